"""Numba kernels behind layer_norm (``tape/nn/_layer_norm.py``), over a
C-contiguous input viewed as rows (m, n).

The first kernels (``layer_norm_rows`` in ``compiler/kernels.py``, removed) summed each
row with one float64 accumulator: without fastmath LLVM may not reassociate a
sum, so every add waited on the one before (a 4-cycle chain per element, two
passes) and the forward ran at ~1.3 ns an element, 3x PyTorch.  Here

- every row sum keeps 64 float64 partial sums in a small array, added block
  by block of 64 from 1-D row slices: an elementwise inner loop, which LLVM's
  loop vectorizer turns into vector adds (Numba runs without the SLP
  vectorizer, so eight scalar partial sums stay scalar: half this speed);
- the forward saves the row ``mean`` and ``rstd`` (float64, m each) instead of
  ``xhat`` (m x n): the backward recomputes ``xhat = (x - mean) * rstd`` from the
  saved input, which is cheaper than writing and reading back a full array;
- the backward is two passes per row (the two row sums, then ``gx`` and the
  weight's and bias's sums, accumulated into float64 rows of n that stay in
  cache), with the loops specialised on whether weight / gx / gw / gb exist
  (a test outside each loop, not per element);
- element math is float64 (the float32 input widened on load, the result
  rounded once on store); every array written has the input's dtype, except
  the float64 moments and weight/bias sums.

Nothing here compiles at import: the caller imports this module inside its
functions.
"""
import numpy as np
from numba import njit


_L = 64     # lanes of the float64 partial sums


@njit(cache=True, error_model='numpy', inline='always')
def _fold(acc):
    """The sum of the ``_L`` lanes as a tree (halving in place, independent adds)
    instead of one 64-add dependency chain (~100 ns a row)."""
    h = _L
    while h > 1:
        h //= 2
        for k in range(h):
            acc[k] += acc[k + h]
    return acc[0]


@njit(cache=True, error_model='numpy', inline='always')
def _row_sum(row, acc):
    """The float64 sum of the 1-D ``row``, in ``_L`` partial sums (``acc``)."""
    n = row.shape[0]
    nL = n - n % _L
    for k in range(_L):
        acc[k] = 0.0
    for t in range(0, nL, _L):
        blk = row[t:t + _L]
        for k in range(_L):
            acc[k] += blk[k]
    r = _fold(acc)
    for j in range(nL, n):
        r += row[j]
    return r


@njit(cache=True, error_model='numpy', inline='always')
def _row_sqdev(row, mu, acc):
    """The float64 sum of ``(row - mu) ** 2`` (mu float64), ``_L`` partial sums."""
    n = row.shape[0]
    nL = n - n % _L
    for k in range(_L):
        acc[k] = 0.0
    for t in range(0, nL, _L):
        blk = row[t:t + _L]
        for k in range(_L):
            d = blk[k] - mu
            acc[k] += d * d
    r = _fold(acc)
    for j in range(nL, n):
        d = row[j] - mu
        r += d * d
    return r


@njit(cache=True, error_model='numpy')
def layer_norm_forward(x, w, b, eps, y, mean, rstd):
    """Per row of x (m, n): the float64 mean and biased variance (two passes),
    ``mean[i]``, ``rstd[i] = 1 / sqrt(var + eps)`` and
    ``y = (x - mean) * rstd * w + b`` (w, b of size 0: none)."""
    m, n = x.shape
    hw = w.shape[0] > 0
    hb = b.shape[0] > 0
    acc = np.empty(_L)
    for i in range(m):
        xr = x[i]
        yr = y[i]
        mu = _row_sum(xr, acc) / n
        r = 1.0 / np.sqrt(_row_sqdev(xr, mu, acc) / n + eps)
        mean[i] = mu
        rstd[i] = r
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
def _row_sums(xr, gr, w, mu, hw, acc, acc2):
    """(sum g, sum g * (x - mu)) over one row, g = gy * w (or gy), float64,
    ``_L`` partial sums each."""
    n = xr.shape[0]
    nL = n - n % _L
    for k in range(_L):
        acc[k] = 0.0
        acc2[k] = 0.0
    if hw:
        for t in range(0, nL, _L):
            xb = xr[t:t + _L]
            gb = gr[t:t + _L]
            wb = w[t:t + _L]
            for k in range(_L):
                g = np.float64(gb[k]) * wb[k]
                acc[k] += g
                acc2[k] += g * (xb[k] - mu)
    else:
        for t in range(0, nL, _L):
            xb = xr[t:t + _L]
            gb = gr[t:t + _L]
            for k in range(_L):
                g = np.float64(gb[k])
                acc[k] += g
                acc2[k] += g * (xb[k] - mu)
    s = _fold(acc)
    u = _fold(acc2)
    for j in range(nL, n):
        g = np.float64(gr[j]) * w[j] if hw else np.float64(gr[j])
        s += g
        u += g * (xr[j] - mu)
    return s, u


@njit(cache=True, error_model='numpy')
def layer_norm_backward(x, gy, w, mean, rstd, gx, gw, gb):
    """The fused layer-norm backward over rows from the saved input and moments:
    with xhat = (x - mean) rstd and g = gy * w,
    ``gx = rstd (g - mean(g) - xhat mean(g xhat))``; ``gw += sum_rows gy xhat``,
    ``gb += sum_rows gy`` (float64 rows; gx, gw or gb of size 0: not wanted)."""
    m, n = x.shape
    hw = w.shape[0] > 0
    hx = gx.shape[0] > 0
    hgw = gw.shape[0] > 0
    hgb = gb.shape[0] > 0
    acc = np.empty(_L)
    acc2 = np.empty(_L)
    for i in range(m):
        mu = mean[i]
        r = rstd[i]
        xr = x[i]
        gr = gy[i]
        if hx:
            s, u = _row_sums(xr, gr, w, mu, hw, acc, acc2)
            a = s / n
            c = u * r * r / n          # mean(g xhat) * rstd, xhat's rstd folded in
            xo = gx[i]
            if hw:
                for j in range(n):
                    xo[j] = (np.float64(gr[j]) * w[j] - a - (xr[j] - mu) * c) * r
            else:
                for j in range(n):
                    xo[j] = (np.float64(gr[j]) - a - (xr[j] - mu) * c) * r
        if hgw and hgb:
            for j in range(n):
                g = np.float64(gr[j])
                gw[j] += g * ((xr[j] - mu) * r)
                gb[j] += g
        elif hgw:
            for j in range(n):
                gw[j] += np.float64(gr[j]) * ((xr[j] - mu) * r)
        elif hgb:
            for j in range(n):
                gb[j] += gr[j]
