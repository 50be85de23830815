"""Numba kernels behind batch_norm (``tape/nn/_batch_norm.py``), over a
C-contiguous input viewed as (N, C, S): S the product of the spatial dims
(1 for an (N, C) input), the statistics per channel c over all (n, s).

A channel's elements are N rows of S contiguous values, C * S apart, so the
sums take one of two layouts, picked on S:

- S >= ``_L`` (images): each channel's rows are added block by block of 64
  into 64 float64 partial sums that carry across the N rows and fold once
  (as ``compiler/norm_kernels.py`` does per layer-norm row: without fastmath
  one accumulator is a 4-cycle chain per element; an elementwise block loop is
  what LLVM's loop vectorizer turns into vector adds);
- S < ``_L`` ((N, C) and small maps): a row would be mostly remainder, so
  whole samples (C * S values) are added into a float64 row of C * S column
  sums (vectorized across columns, in cache), each channel's S columns folded
  at the end.

The statistics are two passes (mean, then the squared deviations), as
PyTorch's CPU kernel, so a large mean costs no precision; a float32 input in
the row layout takes one pass of shifted sums instead (``bn_stats_shifted``:
exact differences in float64, a quarter of the forward saved).  Sums
accumulate in float64; the elementwise passes (y, gx) use per-channel
constants rounded to the input's dtype, as PyTorch's float32 kernels compute
in float32.  The moments and the weight's and bias's sums are float64 arrays
of C; ``bn_forward`` and ``bn_backward`` are the two calls the caller makes.

Nothing here compiles at import: the caller imports this module inside its
functions.
"""
import numpy as np
from numba import njit

from compiler.lanes import LANES, fold as _fold


_L = LANES     # lanes of the float64 partial sums; also the row/column layout threshold


@njit(cache=True, error_model='numpy', inline='always')
def _col_expand(v, c, s):
    """Per-channel ``v`` (C) repeated over each channel's S columns (C * S)."""
    out = np.empty(c * s, v.dtype)
    for i in range(c):
        vi = v[i]
        for j in range(s):
            out[i * s + j] = vi
    return out


@njit(cache=True, error_model='numpy', inline='always')
def _col_fold(cols, c, s, out):
    """``out[i] = sum of cols[i * s:(i + 1) * s]`` (C channels of S column sums)."""
    for i in range(c):
        r = 0.0
        for j in range(s):
            r += cols[i * s + j]
        out[i] = r


@njit(cache=True, error_model='numpy')
def bn_stats_shifted(x, mean, var):
    """``bn_stats`` in one pass over a float32 x (row layout, S >= ``_L``): the
    float64 sums of d = x - K and d * d, K the channel's first element (0 if
    not finite, so that an inf gives PyTorch's inf mean and NaN variance).
    ``x - K`` of two float32 values is exact in float64, and the cancellation
    in ``sum d^2 - (sum d)^2 / n`` costs at most a factor n (the shift is one
    of the values) on float64's 1e-16: far below float32's resolution, where
    the second pass cost a quarter of the forward."""
    nb, c, s = x.shape
    cnt = nb * s
    sL = s - s % _L
    acc = np.empty(_L)
    acc2 = np.empty(_L)
    for i in range(c):
        K = np.float64(x[0, i, 0])
        if not np.isfinite(K):
            K = 0.0
        for k in range(_L):
            acc[k] = 0.0
            acc2[k] = 0.0
        r = 0.0
        r2 = 0.0
        for n in range(nb):
            row = x[n, i]
            for t in range(0, sL, _L):
                blk = row[t:t + _L]
                for k in range(_L):
                    d = blk[k] - K
                    acc[k] += d
                    acc2[k] += d * d
            for j in range(sL, s):
                d = row[j] - K
                r += d
                r2 += d * d
        sd = _fold(acc) + r
        sdd = _fold(acc2) + r2
        m = sd / cnt
        mean[i] = K + m
        v = (sdd - sd * m) / cnt
        # (rounding can leave a constant channel's variance a hair below 0)
        var[i] = v if v > 0.0 else (v if v != v else 0.0)


@njit(cache=True, error_model='numpy')
def bn_stats(x, mean, var):
    """Per channel of x (N, C, S): the float64 mean and biased variance."""
    nb, c, s = x.shape
    cnt = nb * s
    if s >= _L and x.itemsize == 4:
        bn_stats_shifted(x, mean, var)
    elif s >= _L:
        sL = s - s % _L
        acc = np.empty(_L)
        for i in range(c):
            for k in range(_L):
                acc[k] = 0.0
            r = 0.0
            for n in range(nb):
                row = x[n, i]
                for t in range(0, sL, _L):
                    blk = row[t:t + _L]
                    for k in range(_L):
                        acc[k] += blk[k]
                for j in range(sL, s):
                    r += row[j]
            mu = (_fold(acc) + r) / cnt
            for k in range(_L):
                acc[k] = 0.0
            r = 0.0
            for n in range(nb):
                row = x[n, i]
                for t in range(0, sL, _L):
                    blk = row[t:t + _L]
                    for k in range(_L):
                        d = blk[k] - mu
                        acc[k] += d * d
                for j in range(sL, s):
                    d = row[j] - mu
                    r += d * d
            mean[i] = mu
            var[i] = (_fold(acc) + r) / cnt
    else:
        m = c * s
        x2 = x.reshape(nb, m)
        cols = np.zeros(m)
        for n in range(nb):
            xr = x2[n]
            for j in range(m):
                cols[j] += xr[j]
        _col_fold(cols, c, s, mean)
        for i in range(c):
            mean[i] /= cnt
        mc = _col_expand(mean, c, s)
        for j in range(m):
            cols[j] = 0.0
        for n in range(nb):
            xr = x2[n]
            for j in range(m):
                d = xr[j] - mc[j]
                cols[j] += d * d
        _col_fold(cols, c, s, var)
        for i in range(c):
            var[i] /= cnt


@njit(cache=True, error_model='numpy')
def bn_apply(x, mu, scale, shift, y):
    """``y = (x - mu[c]) * scale[c] + shift[c]`` over x (N, C, S); the per-channel
    arrays are float64 (scale = rstd * weight, shift = bias)."""
    nb, c, s = x.shape
    if s >= _L:
        for n in range(nb):
            for i in range(c):
                xr = x[n, i]
                yr = y[n, i]
                m = mu[i]
                a = scale[i]
                b = shift[i]
                for j in range(s):
                    yr[j] = (xr[j] - m) * a + b
    else:
        mm = c * s
        x2 = x.reshape(nb, mm)
        y2 = y.reshape(nb, mm)
        mc = _col_expand(mu, c, s)
        ac = _col_expand(scale, c, s)
        bc = _col_expand(shift, c, s)
        for n in range(nb):
            xr = x2[n]
            yr = y2[n]
            for j in range(mm):
                yr[j] = (xr[j] - mc[j]) * ac[j] + bc[j]


@njit(cache=True, error_model='numpy')
def bn_grad_sums(x, gy, mu, sg, sgx):
    """Per channel: ``sg = sum gy`` and ``sgx = sum gy * (x - mu[c])`` (float64)."""
    nb, c, s = x.shape
    if s >= _L:
        sL = s - s % _L
        acc = np.empty(_L)
        acc2 = np.empty(_L)
        for i in range(c):
            for k in range(_L):
                acc[k] = 0.0
                acc2[k] = 0.0
            r = 0.0
            r2 = 0.0
            m = mu[i]
            for n in range(nb):
                xr = x[n, i]
                gr = gy[n, i]
                for t in range(0, sL, _L):
                    xb = xr[t:t + _L]
                    gb = gr[t:t + _L]
                    for k in range(_L):
                        g = np.float64(gb[k])
                        acc[k] += g
                        acc2[k] += g * (xb[k] - m)
                for j in range(sL, s):
                    g = np.float64(gr[j])
                    r += g
                    r2 += g * (xr[j] - m)
            sg[i] = _fold(acc) + r
            sgx[i] = _fold(acc2) + r2
    else:
        mm = c * s
        x2 = x.reshape(nb, mm)
        g2 = gy.reshape(nb, mm)
        mc = _col_expand(mu, c, s)
        cols = np.zeros(mm)
        cols2 = np.zeros(mm)
        for n in range(nb):
            xr = x2[n]
            gr = g2[n]
            for j in range(mm):
                g = np.float64(gr[j])
                cols[j] += g
                cols2[j] += g * (xr[j] - mc[j])
        _col_fold(cols, c, s, sg)
        _col_fold(cols2, c, s, sgx)


@njit(cache=True, error_model='numpy')
def bn_grad_input(x, gy, mu, k, a, cc, gx):
    """``gx = (gy - a[c] - (x - mu[c]) * cc[c]) * k[c]`` over (N, C, S): the
    training backward with a = mean(gy), cc = mean(gy (x - mu)) rstd^2 and
    k = rstd * weight; with a = cc = 0, the eval backward ``gy * k``."""
    nb, c, s = x.shape
    if s >= _L:
        for n in range(nb):
            for i in range(c):
                xr = x[n, i]
                gr = gy[n, i]
                o = gx[n, i]
                m = mu[i]
                ki = k[i]
                ai = a[i]
                ci = cc[i]
                for j in range(s):
                    o[j] = (gr[j] - ai - (xr[j] - m) * ci) * ki
    else:
        mm = c * s
        x2 = x.reshape(nb, mm)
        g2 = gy.reshape(nb, mm)
        o2 = gx.reshape(nb, mm)
        mc = _col_expand(mu, c, s)
        kc = _col_expand(k, c, s)
        ac = _col_expand(a, c, s)
        cx = _col_expand(cc, c, s)
        for n in range(nb):
            xr = x2[n]
            gr = g2[n]
            o = o2[n]
            for j in range(mm):
                o[j] = (gr[j] - ac[j] - (xr[j] - mc[j]) * cx[j]) * kc[j]


@njit(cache=True, error_model='numpy')
def bn_grad_scale(gy, k, gx):
    """The eval backward ``gx = gy * k[c]`` over (N, C, S)."""
    nb, c, s = gy.shape
    if s >= _L:
        for n in range(nb):
            for i in range(c):
                gr = gy[n, i]
                o = gx[n, i]
                ki = k[i]
                for j in range(s):
                    o[j] = gr[j] * ki
    else:
        mm = c * s
        g2 = gy.reshape(nb, mm)
        o2 = gx.reshape(nb, mm)
        kc = _col_expand(k, c, s)
        for n in range(nb):
            gr = g2[n]
            o = o2[n]
            for j in range(mm):
                o[j] = gr[j] * kc[j]


@njit(cache=True, error_model='numpy')
def bn_forward(x, w, b, eps, train, mean, var, rstd, y):
    """The whole forward in one call (a call's argument unboxing is a fixed
    cost worth saving at small sizes).  Training: the batch ``mean`` and biased
    ``var`` are written; eval: they hold the running statistics.  Then
    ``rstd = 1 / sqrt(var + eps)`` and ``y = (x - mean) * rstd * w + b``
    (w, b of size 0: none), the per-channel constants rounded to x's dtype
    (float32 vectors are twice as wide; PyTorch's float32 kernel does this
    step in float32 too)."""
    c = x.shape[1]
    if train:
        bn_stats(x, mean, var)
    mu = np.empty(c, x.dtype)
    scale = np.empty(c, x.dtype)
    shift = np.zeros(c, x.dtype)
    hw = w.shape[0] > 0
    hb = b.shape[0] > 0
    for i in range(c):
        r = 1.0 / np.sqrt(var[i] + eps)
        rstd[i] = r
        mu[i] = mean[i]
        scale[i] = r * w[i] if hw else r
        if hb:
            shift[i] = b[i]
    bn_apply(x, mu, scale, shift, y)


@njit(cache=True, error_model='numpy')
def bn_backward(x, gy, w, mean, rstd, train, gx, gw, gb):
    """The whole backward in one call from the saved input and moments:
    ``gw = sum gy * xhat``, ``gb = sum gy`` per channel (float64 sums), and
    ``gx`` as ``bn_grad_input`` (training) or ``bn_grad_scale`` (eval), its
    per-channel constants rounded to x's dtype; gx, gw or gb of size 0: not
    wanted."""
    nb, c, s = x.shape
    hx = gx.size > 0
    hgw = gw.shape[0] > 0
    hgb = gb.shape[0] > 0
    k = np.empty(c, x.dtype)
    for i in range(c):
        k[i] = rstd[i] * w[i] if w.shape[0] > 0 else rstd[i]
    if train or hgw or hgb:
        sg = np.empty(c)
        sgx = np.empty(c)
        bn_grad_sums(x, gy, mean, sg, sgx)
        for i in range(c):
            if hgw:
                gw[i] = sgx[i] * rstd[i]
            if hgb:
                gb[i] = sg[i]
        if hx and train:
            cnt = nb * s
            mu = np.empty(c, x.dtype)
            a = np.empty(c, x.dtype)
            cc = np.empty(c, x.dtype)
            for i in range(c):
                mu[i] = mean[i]
                a[i] = sg[i] / cnt
                cc[i] = sgx[i] * rstd[i] * rstd[i] / cnt
            bn_grad_input(x, gy, mu, k, a, cc, gx)
            return
    if hx:
        bn_grad_scale(gy, k, gx)
