"""Numba kernels behind the fused recurrent layers of ``tape/nn/_rnn.py``: the
elementwise part of one time step of an LSTM, GRU or Elman RNN, forward and
backward.

The matrix products stay in NumPy (BLAS, in the layer's dtype); each kernel
is the rest of one step, in one pass over the step's rows instead of a dozen
NumPy calls.  Every array is a C-contiguous buffer of the whole sequence (or
the whole batch, for the states); a step owns the rows ``lo .. lo + b`` of the
sequence buffers and the first ``b`` rows of the state buffers, so packed
sequences, whose batch shrinks from step to step, need nothing else.  The
arithmetic is float64 (float32 buffers are widened on read and rounded on
store); sigmoid and tanh are written with ``vexp`` so the loops vectorize
(Numba would call libm's scalar exp or tanh for every element).  Nothing here
compiles at import: ``tape/nn/_rnn.py`` imports this module inside its
functions.
"""
from numba import njit

from .kernels import vexp


@njit(cache=True, inline='always', error_model='numpy')
def _sigmoid(x):
    return 1.0 / (1.0 + vexp(-x))


@njit(cache=True, inline='always', error_model='numpy')
def _tanh(x):
    """tanh(x) within a few ulps, without a libm call: ``1 - 2 / (exp(2x) + 1)``,
    and for |x| < 1/8, where that form cancels, the Taylor series to x**17
    (truncation error below 1e-18 relative there).  Selects, not branches."""
    big = 1.0 - 2.0 / (vexp(2.0 * x) + 1.0)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3 + x2 * (2.0 / 15 + x2 * (-17.0 / 315 + x2 * (
        62.0 / 2835 + x2 * (-1382.0 / 155925 + x2 * (21844.0 / 6081075 + x2 * (
            -929569.0 / 638512875 + x2 * (6404582.0 / 10854718875)))))))))
    return small if abs(x) < 0.125 else big


# Each transcendental runs in a loop of its own over one contiguous row, from
# index 0: with several arrays in one loop, or a loop from an offset, LLVM
# leaves the loop scalar (3 to 10 times slower for an LSTM step).
@njit(cache=True, inline='always', error_model='numpy')
def _sigmoid_(row):
    for j in range(row.shape[0]):
        row[j] = _sigmoid(row[j])


@njit(cache=True, inline='always', error_model='numpy')
def _tanh_(row):
    for j in range(row.shape[0]):
        row[j] = _tanh(row[j])


@njit(cache=True, inline='always', error_model='numpy')
def _add_(row, other):
    for j in range(row.shape[0]):
        row[j] += other[j]


# -- LSTM (gates i, f, g, o) ---------------------------------------------------------
@njit(cache=True, error_model='numpy')
def lstm_forward_step(gates, hh, c_state, c_prev, tanh_c, h_state, h_prev, h_out, lo, b,
                      proj):
    """gates[lo:lo+b] holds ``x W_ih^T + b_ih + b_hh`` and ``hh[:b]`` holds
    ``h W_hh^T``; the gates' activations replace the former.  Saves the previous
    h and c and tanh(c') of the step, writes ``h_out = o * tanh(c')`` and moves
    the c state (and, without a projection, the h state) on."""
    hs = c_state.shape[1]
    for r in range(b):
        q = lo + r
        g = gates[q]
        _add_(g, hh[r])
        _sigmoid_(g[:2 * hs])
        _tanh_(g[2 * hs:3 * hs])
        _sigmoid_(g[3 * hs:])
        hp, hq, cs, cp, tc, ho = h_state[r], h_prev[q], c_state[r], c_prev[q], tanh_c[q], h_out[q]
        for j in range(hp.shape[0]):
            hq[j] = hp[j]
        for j in range(hs):
            cp[j] = cs[j]
            cs[j] = g[hs + j] * cs[j] + g[j] * g[2 * hs + j]
            tc[j] = cs[j]
        _tanh_(tc)
        for j in range(hs):
            ho[j] = g[3 * hs + j] * tc[j]
        if not proj:
            for j in range(hs):
                hp[j] = ho[j]


@njit(cache=True, error_model='numpy')
def lstm_backward_step(gates, c_prev, tanh_c, dh_a, dh_b, dc_state, dgates, lo, b):
    """The step's gradient ``dh = dh_a[:b] + dh_b[lo:lo+b]`` (of ``o * tanh(c')``)
    and the c state's gradient ``dc_state[:b]`` give the gates' pre-activation
    gradients ``dgates[lo:lo+b]``; ``dc_state`` moves back to the previous c."""
    hs = dc_state.shape[1]
    for r in range(b):
        q = lo + r
        for j in range(hs):
            i = gates[q, j]
            f = gates[q, hs + j]
            g = gates[q, 2 * hs + j]
            o = gates[q, 3 * hs + j]
            dh = dh_a[r, j] + dh_b[q, j]
            tc = tanh_c[q, j]
            dc = dc_state[r, j] + dh * o * (1.0 - tc * tc)
            dgates[q, j] = dc * g * (i * (1.0 - i))
            dgates[q, hs + j] = dc * c_prev[q, j] * (f * (1.0 - f))
            dgates[q, 2 * hs + j] = dc * i * (1.0 - g * g)
            dgates[q, 3 * hs + j] = dh * tc * (o * (1.0 - o))
            dc_state[r, j] = dc * f


# -- GRU (gates r, z, n) -------------------------------------------------------------
@njit(cache=True, error_model='numpy')
def gru_forward_step(gates, hh, b_hh, hh_n, h_state, h_prev, h_out, lo, b):
    """gates[lo:lo+b] holds ``x W_ih^T + b_ih``, ``hh[:b]`` holds ``h W_hh^T`` (its
    bias ``b_hh`` is added here: the reset gate multiplies ``W_hn h + b_hn``).
    The activations r, z, n replace the gates; ``W_hn h + b_hn`` and the previous
    h are saved; ``h' = (1 - z) n + z h`` goes to ``h_out`` and the state."""
    hs = h_state.shape[1]
    for r in range(b):
        q = lo + r
        g, hr, hn = gates[q], hh[r], hh_n[q]
        _add_(hr, b_hh)
        _add_(g[:2 * hs], hr)
        _sigmoid_(g[:2 * hs])
        for j in range(hs):
            hn[j] = hr[2 * hs + j]
        for j in range(hs):
            g[2 * hs + j] += g[j] * hn[j]
        _tanh_(g[2 * hs:])
        hp, hq, ho = h_state[r], h_prev[q], h_out[q]
        for j in range(hs):
            hq[j] = hp[j]
        for j in range(hs):
            z = g[hs + j]
            ho[j] = (1.0 - z) * g[2 * hs + j] + z * hq[j]
        for j in range(hs):
            hp[j] = ho[j]


@njit(cache=True, error_model='numpy')
def gru_backward_step(gates, hh_n, h_prev, dh_state, dh_b, dxp, dhp, lo, b):
    """From ``dh = dh_state[:b] + dh_b[lo:lo+b]``: the pre-activation gradients of
    the input projection (``dxp``) and of the hidden one (``dhp``, which differs
    in its n block by the factor r); ``dh_state[:b]`` keeps the direct part
    ``dh * z`` of the previous h's gradient (the caller adds ``dhp W_hh``)."""
    hs = dh_state.shape[1]
    for r in range(b):
        q = lo + r
        for j in range(hs):
            rg = gates[q, j]
            z = gates[q, hs + j]
            n = gates[q, 2 * hs + j]
            dh = dh_state[r, j] + dh_b[q, j]
            dpn = dh * (1.0 - z) * (1.0 - n * n)
            dpr = dpn * hh_n[q, j] * (rg * (1.0 - rg))
            dpz = dh * (h_prev[q, j] - n) * (z * (1.0 - z))
            dxp[q, j] = dpr
            dxp[q, hs + j] = dpz
            dxp[q, 2 * hs + j] = dpn
            dhp[q, j] = dpr
            dhp[q, hs + j] = dpz
            dhp[q, 2 * hs + j] = dpn * rg
            dh_state[r, j] = dh * z


# -- Elman RNN (tanh or relu) --------------------------------------------------------
@njit(cache=True, error_model='numpy')
def rnn_forward_step(pre, hh, h_state, h_prev, h_out, lo, b, relu):
    """``h' = act(pre[lo:lo+b] + hh[:b])``, with ``pre = x W_ih^T + b_ih + b_hh``."""
    hs = h_state.shape[1]
    for r in range(b):
        q = lo + r
        p, hr, hp, hq, ho = pre[q], hh[r], h_state[r], h_prev[q], h_out[q]
        for j in range(hs):
            ho[j] = p[j] + hr[j]
        if relu:
            for j in range(hs):
                v = ho[j]
                ho[j] = v if v > 0.0 or v != v else 0.0     # (NaN stays NaN, as in PyTorch)
        else:
            _tanh_(ho)
        for j in range(hs):
            hq[j] = hp[j]
        for j in range(hs):
            hp[j] = ho[j]


@njit(cache=True, error_model='numpy')
def rnn_backward_step(h_out, dh_state, dh_b, dpre, lo, b, relu):
    """The pre-activation gradient ``dpre[lo:lo+b]`` from ``dh = dh_state[:b] +
    dh_b[lo:lo+b]`` and the step's output."""
    hs = dh_state.shape[1]
    for r in range(b):
        q = lo + r
        for j in range(hs):
            dh = dh_state[r, j] + dh_b[q, j]
            o = h_out[q, j]
            if relu:
                dpre[q, j] = 0.0 if o <= 0.0 else dh     # (NaN passes, as PyTorch's)
            else:
                dpre[q, j] = dh * (1.0 - o * o)
