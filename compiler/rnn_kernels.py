"""Numba kernels behind the fused recurrent layers of ``tape/nn/_rnn.py``: the
elementwise part of one time step of an LSTM, GRU or Elman RNN, forward and
backward.

The matrix products stay in NumPy (BLAS, in the layer's dtype); each kernel
is the rest of one step, in one pass over the step's rows instead of a dozen
NumPy calls.  Every array is a C-contiguous buffer of the whole sequence (or
the whole batch, for the states); a step owns the rows ``lo, lo + stride, ..,
lo + (b - 1) stride`` of the sequence buffers (written ``lo:lo+b`` below) and
the first ``b`` rows of the state buffers, so packed sequences, whose batch
shrinks from step to step, need nothing else, and a batch-first sequence
(row n T + t for sequence n at step t: ``lo = t``, ``stride = T``) is read and
written in its own layout, with no transposed copy.  The
arithmetic is float64 (float32 buffers are widened on read and rounded on
store) but for the forward activations of a float32 layer, which run in float32
(within 3 ulps of the exact sigmoid and tanh, as PyTorch's float32 kernels are
within a few): they are most of a step, and in float32 a vector holds twice as
many lanes and the exponential needs half the terms.  Sigmoid and tanh are
written with an inlined exponential so the loops vectorize (Numba would call
libm's scalar exp or tanh for every element).  Nothing here
compiles at import: ``tape/nn/_rnn.py`` imports this module inside its
functions.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

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


# -- float32 activations ---------------------------------------------------------------
@intrinsic
def _bits_as_float32(typingctx, bits):
    """The float32 whose bit pattern is the int32 ``bits`` (no libm, vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


# float32 constants (Numba types a NumPy scalar global as its dtype, so no
# float64 literal widens the arithmetic below)
_F32 = np.float32
_ONE, _TWO, _HALF, _ZERO = _F32(1.0), _F32(2.0), _F32(0.5), _F32(0.0)
_LOG2E = _F32(1.4426950408889634)
# ln2 split in two, its high part with 16 significant bits so k * _LN2_HI is exact
_LN2_HI, _LN2_LO = _F32(0.693145751953125), _F32(1.4286068202862268e-06)
_EXP_MIN = _F32(-104.0)      # exp below this is 0 in float32
_C3, _C4, _C5, _C6, _C7 = (_F32(1.0 / math.factorial(k)) for k in range(3, 8))
_BIAS, _MANT = np.int32(127), np.int32(23)


@njit(cache=True, inline='always', error_model='numpy')
def _expm1_parts32(x):
    """exp(x) - 1 for float32 ``x <= 0`` as (s, q) with ``exp(x) - 1 = s q + (s - 1)``,
    s = 2**k: x = k ln2 + r with |r| <= ln2 / 2, ``q = exp(r) - 1`` by its Taylor
    series to r**7 (error < 1e-8 relative on that interval).  Kept apart so tanh
    gets exp(x) - 1 without the cancellation of forming exp(x) first; 2**k is
    built from its bits in two halves so that results down to subnormals are
    reached.  NaN gives k = 0 and is carried by q."""
    xc = _EXP_MIN if x < _EXP_MIN else x
    k = np.floor((xc if xc == xc else _ZERO) * _LOG2E + _HALF)
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    q = r * (_ONE + r * (_HALF + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * _C7))))))
    ki = np.int32(k)
    k1 = ki >> np.int32(1)
    s = _bits_as_float32((k1 + _BIAS) << _MANT) * _bits_as_float32((ki - k1 + _BIAS) << _MANT)
    return s, q


@njit(cache=True, inline='always', error_model='numpy')
def _sigmoid32(x):
    """sigmoid(x) in float32 within 3 ulps: with e = exp(-|x|) (never overflows),
    1 / (1 + e) for x >= 0 and e / (1 + e) below, so tiny results keep their
    precision.  Selects, not branches."""
    s, q = _expm1_parts32(-abs(x))
    e = s * q + s
    inv = _ONE / (_ONE + e)
    return inv if x >= _ZERO else e * inv


@njit(cache=True, inline='always', error_model='numpy')
def _tanh32(x):
    """tanh(x) in float32 within 3 ulps: with m = exp(-2|x|) - 1 (no cancellation
    near 0), tanh|x| = -m / (2 + m), given x's sign (so -0 stays -0, NaN NaN)."""
    s, q = _expm1_parts32(-_TWO * abs(x))
    m = s * q + (s - _ONE)
    return math.copysign(-m / (_TWO + m), x)


# Each transcendental runs in a loop of its own over one contiguous row, from
# index 0: with several arrays in one loop, or a loop from an offset, LLVM
# leaves the loop scalar (3 to 10 times slower for an LSTM step).  The row's
# item size, a compile-time constant, picks the float32 or the float64
# activation (the other branch is compiled away).
@njit(cache=True, inline='always', error_model='numpy')
def _sigmoid_(row):
    if row.itemsize == 4:
        for j in range(row.shape[0]):
            row[j] = _sigmoid32(row[j])
    else:
        for j in range(row.shape[0]):
            row[j] = _sigmoid(row[j])


@njit(cache=True, inline='always', error_model='numpy')
def _tanh_(row):
    if row.itemsize == 4:
        for j in range(row.shape[0]):
            row[j] = _tanh32(row[j])
    else:
        for j in range(row.shape[0]):
            row[j] = _tanh(row[j])


@njit(cache=True, inline='always', error_model='numpy')
def _add_(row, other):
    for j in range(row.shape[0]):
        row[j] += other[j]


# -- LSTM (gates i, f, g, o) ---------------------------------------------------------
@njit(cache=True, error_model='numpy')
def lstm_forward_step(gates, hh, c_state, c_prev, tanh_c, h_state, h_prev, h_out, lo, b,
                      stride, proj):
    """gates[lo:lo+b] holds ``x W_ih^T + b_ih + b_hh`` and ``hh[:b]`` holds
    ``h W_hh^T``; the gates' activations replace the former.  Saves the previous
    h and c and tanh(c') of the step, writes ``h_out = o * tanh(c')`` and moves
    the c state (and, without a projection, the h state) on."""
    hs = c_state.shape[1]
    for r in range(b):
        q = lo + r * stride
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
def lstm_backward_step(gates, c_prev, tanh_c, dh_a, dh_b, dc_state, dgates, lo, b, stride):
    """The step's gradient ``dh = dh_a[:b] + dh_b[lo:lo+b]`` (of ``o * tanh(c')``)
    and the c state's gradient ``dc_state[:b]`` give the gates' pre-activation
    gradients ``dgates[lo:lo+b]``; ``dc_state`` moves back to the previous c."""
    hs = dc_state.shape[1]
    for r in range(b):
        q = lo + r * stride
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
def gru_forward_step(gates, hh, b_hh, hh_n, h_state, h_prev, h_out, lo, b, stride):
    """gates[lo:lo+b] holds ``x W_ih^T + b_ih``, ``hh[:b]`` holds ``h W_hh^T`` (its
    bias ``b_hh`` is added here: the reset gate multiplies ``W_hn h + b_hn``).
    The activations r, z, n replace the gates; ``W_hn h + b_hn`` and the previous
    h are saved; ``h' = (1 - z) n + z h`` goes to ``h_out`` and the state."""
    hs = h_state.shape[1]
    for r in range(b):
        q = lo + r * stride
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
def gru_backward_step(gates, hh_n, h_prev, dh_state, dh_b, dxp, dhp, lo, b, stride):
    """From ``dh = dh_state[:b] + dh_b[lo:lo+b]``: the pre-activation gradients of
    the input projection (``dxp``) and of the hidden one (``dhp``, which differs
    in its n block by the factor r); ``dh_state[:b]`` keeps the direct part
    ``dh * z`` of the previous h's gradient (the caller adds ``dhp W_hh``)."""
    hs = dh_state.shape[1]
    for r in range(b):
        q = lo + r * stride
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
def rnn_forward_step(pre, hh, h_state, h_prev, h_out, lo, b, stride, relu):
    """``h' = act(pre[lo:lo+b] + hh[:b])``, with ``pre = x W_ih^T + b_ih + b_hh``."""
    hs = h_state.shape[1]
    for r in range(b):
        q = lo + r * stride
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
def rnn_backward_step(h_out, dh_state, dh_b, dpre, lo, b, stride, relu):
    """The pre-activation gradient ``dpre[lo:lo+b]`` from ``dh = dh_state[:b] +
    dh_b[lo:lo+b]`` and the step's output."""
    hs = dh_state.shape[1]
    for r in range(b):
        q = lo + r * stride
        for j in range(hs):
            dh = dh_state[r, j] + dh_b[q, j]
            o = h_out[q, j]
            if relu:
                dpre[q, j] = 0.0 if o <= 0.0 else dh     # (NaN passes, as PyTorch's)
            else:
                dpre[q, j] = dh * (1.0 - o * o)
