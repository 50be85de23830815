"""Numba kernels behind layer_norm (``tape/nn/_layer_norm.py``), over a
C-contiguous input viewed as rows (m, n).

The first kernels (``layer_norm_rows`` in ``compiler/kernels.py``, removed) summed each
row with one float64 accumulator: without fastmath LLVM may not reassociate a
sum, so every add waited on the one before (a 4-cycle chain per element, two
passes) and the forward ran at ~1.3 ns an element, 3x PyTorch.  Here

- every row sum keeps ``_L`` = 64 partial sums in a small array, added block by
  block of 64 from 1-D row slices: an elementwise inner loop, which LLVM's
  loop vectorizer turns into vector adds (Numba runs without the SLP
  vectorizer, so eight scalar partial sums stay scalar; 16 or 32 lanes get
  fully unrolled into scalar code, 64 stays a loop and vectorizes);
- the lanes have the input's dtype: a float32 row sums in float32 lanes (8 to
  a 256-bit vector, twice float64's, and no widening on load), flushed into
  float64 lanes every ``_B`` blocks, so no float32 partial sum takes more than
  ``_B`` adds whatever the row length, and each row total is float64;
- the forward saves the row ``mean`` and ``rstd`` (float64, one (2, m) array)
  instead of ``xhat`` (m x n): the backward recomputes
  ``xhat = (x - mean) * rstd`` from the saved input, which is cheaper than
  writing and reading back a full array;
- the backward is two passes per row: the two row sums, then gx together
  with the weight's and bias's sums (one read of x and gy for all three),
  which gather ``_B`` rows in the row's dtype (float32 vectors, no widening
  per element) and then flush into float64 rows of n that stay in cache; the
  loops are specialised on whether weight / gx / gw / gb exist (a test
  outside each loop, not per element);
- element math is in the input's dtype with the row's scalars (mean, rstd and
  the backward's two means) rounded once to it, as PyTorch's float32 kernel
  computes; float64 input is float64 throughout.

Nothing here compiles at import: the caller imports this module inside its
functions.
"""
import numpy as np
from numba import njit

from compiler.lanes import LANES, fold as _fold


_L = LANES     # lanes of the partial sums
_B = 16     # blocks of _L summed in the input dtype's lanes before a float64 flush


@njit(cache=True, error_model='numpy', inline='always')
def _cast(lane, v):
    """``v`` rounded to the dtype of the array ``lane`` (whose [0] it overwrites):
    Numba promotes float32 op float64 to float64, so the element loops want
    their scalars in the row's dtype to stay in float32 vectors."""
    lane[0] = v
    return lane[0]


@njit(cache=True, error_model='numpy', inline='always')
def _flush(acc, acc64):
    for k in range(_L):
        acc64[k] += acc[k]
        acc[k] = 0


@njit(cache=True, error_model='numpy', inline='always')
def _row_sum(row, acc, acc64):
    """The float64 sum of the 1-D ``row``: ``_L`` lanes of its dtype (``acc``)
    flushed every ``_B`` blocks into float64 lanes (``acc64``)."""
    n = row.shape[0]
    nL = n - n % _L
    acc[:] = 0
    acc64[:] = 0.0
    for t0 in range(0, nL, _L * _B):
        for t in range(t0, min(t0 + _L * _B, nL), _L):
            blk = row[t:t + _L]
            for k in range(_L):
                acc[k] += blk[k]
        _flush(acc, acc64)
    r = _fold(acc64)
    for j in range(nL, n):
        r += row[j]
    return r


@njit(cache=True, error_model='numpy', inline='always')
def _row_sqdev(row, mu, acc, acc64):
    """The float64 sum of ``(row - mu) ** 2``, lanes as ``_row_sum``'s (mu in
    the row's dtype)."""
    n = row.shape[0]
    nL = n - n % _L
    acc[:] = 0
    acc64[:] = 0.0
    for t0 in range(0, nL, _L * _B):
        for t in range(t0, min(t0 + _L * _B, nL), _L):
            blk = row[t:t + _L]
            for k in range(_L):
                d = blk[k] - mu
                acc[k] += d * d
        _flush(acc, acc64)
    r = _fold(acc64)
    for j in range(nL, n):
        d = np.float64(row[j] - mu)
        r += d * d
    return r


@njit(cache=True, error_model='numpy')
def layer_norm_forward(x, w, b, eps, y, mr):
    """Per row i of x (m, n): the float64 mean and biased variance (two
    passes), ``mr[0, i] = mean``, ``mr[1, i] = 1 / sqrt(var + eps)`` and
    ``y = (x - mean) * rstd * w + b`` (w, b of size 0: none)."""
    m, n = x.shape
    hw = w.shape[0] > 0
    hb = b.shape[0] > 0
    acc = np.empty(_L, x.dtype)
    acc64 = np.empty(_L)
    for i in range(m):
        xr = x[i]
        yr = y[i]
        mu64 = _row_sum(xr, acc, acc64) / n
        mu = _cast(acc, mu64)
        # rows are centred on the mean rounded to their dtype, here and in the
        # backward (mr keeps that rounded mean)
        r64 = 1.0 / np.sqrt(_row_sqdev(xr, mu, acc, acc64) / n + eps)
        mr[0, i] = mu
        mr[1, i] = r64
        r = _cast(acc, r64)
        if hw and hb:
            for j in range(n):
                yr[j] = (xr[j] - mu) * r * w[j] + b[j]
        elif hw:
            for j in range(n):
                yr[j] = (xr[j] - mu) * r * w[j]
        elif hb:
            for j in range(n):
                yr[j] = (xr[j] - mu) * r + b[j]
        else:
            for j in range(n):
                yr[j] = (xr[j] - mu) * r


@njit(cache=True, error_model='numpy', inline='always')
def _row_sums(xr, gr, w, mu, hw, acc, acc2, a64, b64):
    """(sum g, sum g * (x - mu)) over one row, g = gy * w (or gy), as float64
    totals of lanes of the row's dtype (``_row_sum``'s scheme, mu in that dtype)."""
    n = xr.shape[0]
    nL = n - n % _L
    acc[:] = 0
    acc2[:] = 0
    a64[:] = 0.0
    b64[:] = 0.0
    for t0 in range(0, nL, _L * _B):
        t1 = min(t0 + _L * _B, nL)
        if hw:
            for t in range(t0, t1, _L):
                xb = xr[t:t + _L]
                gb = gr[t:t + _L]
                wb = w[t:t + _L]
                for k in range(_L):
                    g = gb[k] * wb[k]
                    acc[k] += g
                    acc2[k] += g * (xb[k] - mu)
        else:
            for t in range(t0, t1, _L):
                xb = xr[t:t + _L]
                gb = gr[t:t + _L]
                for k in range(_L):
                    g = gb[k]
                    acc[k] += g
                    acc2[k] += g * (xb[k] - mu)
        _flush(acc, a64)
        _flush(acc2, b64)
    s = _fold(a64)
    u = _fold(b64)
    for j in range(nL, n):
        g = gr[j] * w[j] if hw else gr[j]
        s += g
        u += np.float64(g * (xr[j] - mu))
    return s, u


@njit(cache=True, error_model='numpy')
def layer_norm_backward(x, gy, w, mr, gx, gwb, want):
    """The fused layer-norm backward over rows from the saved input and
    moments ``mr`` (forward's): with xhat = (x - mean) rstd and g = gy * w,
    ``gx = rstd (g - mean(g) - xhat mean(g xhat))``; ``gwb[0] += sum_rows gy xhat``,
    ``gwb[1] += sum_rows gy`` (float64 rows).  ``want``: bit 1 gx, 2 gw, 4 gb."""
    m, n = x.shape
    hw = w.shape[0] > 0
    hx = (want & 1) != 0
    hgw = (want & 2) != 0
    hgb = (want & 4) != 0
    gw = gwb[0]
    gb = gwb[1]
    acc = np.empty(_L, x.dtype)
    acc2 = np.empty(_L, x.dtype)
    a64 = np.empty(_L)
    b64 = np.empty(_L)
    # the weight's and bias's sums gather _B rows in the row's dtype (vectors of
    # its width, no widening per element) before each float64 flush
    sw = np.zeros(n if hgw else 0, x.dtype)
    sb = np.zeros(n if hgb else 0, x.dtype)
    for i in range(m):
        mu = _cast(acc, mr[0, i])
        r64 = mr[1, i]
        r = _cast(acc, r64)
        xr = x[i]
        gr = gy[i]
        if hx:
            s, u = _row_sums(xr, gr, w, mu, hw, acc, acc2, a64, b64)
            a = _cast(acc, s / n * r64)
            c = _cast(acc, u * r64 * r64 / n)    # mean(g xhat) rstd, xhat's rstd folded in
            xo = gx[i]
            if hw and hgw and hgb:
                for j in range(n):
                    g = gr[j]
                    xh = (xr[j] - mu) * r
                    xo[j] = g * w[j] * r - a - xh * c
                    sw[j] += g * xh
                    sb[j] += g
            elif hw:
                for j in range(n):
                    xo[j] = gr[j] * w[j] * r - a - (xr[j] - mu) * r * c
            else:
                for j in range(n):
                    xo[j] = gr[j] * r - a - (xr[j] - mu) * r * c
        fused = hx and hw and hgw and hgb
        if hgw and not fused:
            for j in range(n):
                sw[j] += gr[j] * ((xr[j] - mu) * r)
        if hgb and not fused:
            for j in range(n):
                sb[j] += gr[j]
        if i % _B == _B - 1 or i == m - 1:
            if hgw:
                for j in range(n):
                    gw[j] += sw[j]
                    sw[j] = 0
            if hgb:
                for j in range(n):
                    gb[j] += sb[j]
                    sb[j] = 0
