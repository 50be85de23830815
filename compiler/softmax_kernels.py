"""Numba kernels behind softmax, log_softmax (``tape/nn/_softmax.py``) and the
attention weights of ``tape/nn/_sdpa.py``, along the last dim of a C-contiguous
array viewed as rows (n, c).

NumPy reduces a short last axis row by row, a few nanoseconds of overhead per
row on top of the call: on attention scores (8, 4, 16, 16) its ``max(-1)``
alone cost more than the exp.  Here each row-wise step is one call over all
rows:

    forward:   ``shift`` (e = x * scale - row max), NumPy's exp in place (it is
               vectorized in float32 as well as float64; a Numba loop calls libm
               per element, several times slower), then ``normalize`` (softmax:
               e / sum e) or ``log_normalize`` (log_softmax: z - log sum exp z);
    backward:  ``softmax_backward`` (gx = y * (g - sum(g * y))) or
               ``log_softmax_backward`` (gx = g - exp(y) * sum(g), exp(y) from NumPy).

The maximum keeps eight running maxima (one vector register, not one chain of
dependent compares) and never takes NaN: a NaN reaches the row's sum, and the
whole row, by itself, as PyTorch's does.  Sums are float64 with eight partial
sums; every array written has the input's dtype.  Nothing here compiles at
import: the callers import this module inside their functions.
"""
import numpy as np
from numba import njit


# The row helpers index the 2-D arrays (x[i, j]) and are inlined into their
# callers: slicing a row out per row, and a call per row, cost 20 ns a row of 16.

@njit(cache=True, error_model='numpy', inline='always')
def _row_max(x, i, sc):
    """The largest of ``x[i] * sc`` (the product in x's dtype), ignoring NaN, with
    eight running maxima (LLVM keeps them in registers)."""
    c = x.shape[1]
    c8 = c - c % 8
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x.dtype.type(-np.inf)
    for j in range(0, c8, 8):
        v0 = x[i, j] * sc
        v1 = x[i, j + 1] * sc
        v2 = x[i, j + 2] * sc
        v3 = x[i, j + 3] * sc
        v4 = x[i, j + 4] * sc
        v5 = x[i, j + 5] * sc
        v6 = x[i, j + 6] * sc
        v7 = x[i, j + 7] * sc
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        m4 = v4 if v4 > m4 else m4
        m5 = v5 if v5 > m5 else m5
        m6 = v6 if v6 > m6 else m6
        m7 = v7 if v7 > m7 else m7
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    r = m4 if m4 > m0 else m0
    for j in range(c8, c):
        v = x[i, j] * sc
        r = v if v > r else r
    return r


@njit(cache=True, error_model='numpy', inline='always')
def _row_sum(e, i):
    """The float64 sum of ``e[i]``, eight partial sums."""
    c = e.shape[1]
    c8 = c - c % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    for j in range(0, c8, 8):
        a0 += e[i, j]
        a1 += e[i, j + 1]
        a2 += e[i, j + 2]
        a3 += e[i, j + 3]
        a4 += e[i, j + 4]
        a5 += e[i, j + 5]
        a6 += e[i, j + 6]
        a7 += e[i, j + 7]
    r = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for j in range(c8, c):
        r += e[i, j]
    return r


@njit(cache=True, error_model='numpy', inline='always')
def _row_dot(g, y, i):
    """The float64 sum of ``g[i] * y[i]`` (products in float64), eight partial sums."""
    c = g.shape[1]
    c8 = c - c % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    for j in range(0, c8, 8):
        a0 += np.float64(g[i, j]) * y[i, j]
        a1 += np.float64(g[i, j + 1]) * y[i, j + 1]
        a2 += np.float64(g[i, j + 2]) * y[i, j + 2]
        a3 += np.float64(g[i, j + 3]) * y[i, j + 3]
        a4 += np.float64(g[i, j + 4]) * y[i, j + 4]
        a5 += np.float64(g[i, j + 5]) * y[i, j + 5]
        a6 += np.float64(g[i, j + 6]) * y[i, j + 6]
        a7 += np.float64(g[i, j + 7]) * y[i, j + 7]
    r = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for j in range(c8, c):
        r += np.float64(g[i, j]) * y[i, j]
    return r


@njit(cache=True, error_model='numpy')
def shift(x, e, sc, safe):
    """e = x * sc - (the row's maximum of x * sc), rows of x, e (n, c); e may be x.

    An all -inf row (or a +inf in it) gives NaN after the exp and sum, as
    PyTorch's softmax; with ``safe`` an all -inf row is shifted by 0 instead, so
    its exps are all 0 and ``normalize`` leaves them 0 (every key masked)."""
    n, c = x.shape
    sc = x.dtype.type(sc)
    for i in range(n):
        m = _row_max(x, i, sc)
        if safe and m == -np.inf:
            m = x.dtype.type(0.0)
        for j in range(c):
            e[i, j] = x[i, j] * sc - m


@njit(cache=True, error_model='numpy')
def normalize(e, safe):
    """e /= its row's sum (a float64 sum; one reciprocal per row, as PyTorch's
    kernel multiplies by it).  With ``safe`` a row summing to 0 (only an all
    -inf row shifted by 0 does) stays 0."""
    n, c = e.shape
    for i in range(n):
        s = _row_sum(e, i)
        if safe and s == 0.0:
            continue
        r = e.dtype.type(1.0 / s)
        for j in range(c):
            e[i, j] = e[i, j] * r


@njit(cache=True, error_model='numpy')
def log_normalize(z, ez):
    """z -= log(the row's float64 sum of ez), ez = exp(z): log_softmax from the
    shifted z."""
    n, c = z.shape
    for i in range(n):
        ls = z.dtype.type(np.log(_row_sum(ez, i)))
        for j in range(c):
            z[i, j] = z[i, j] - ls


@njit(cache=True, error_model='numpy')
def softmax_backward(y, g, gx):
    """gx = y * (g - sum(g * y)) row by row (the sum in float64, the rest in the
    dtype); gx may be g (attention's ds = p * (dp - sum(dp * p)) in place)."""
    n, c = y.shape
    for i in range(n):
        d = y.dtype.type(_row_dot(g, y, i))
        for j in range(c):
            gx[i, j] = y[i, j] * (g[i, j] - d)


@njit(cache=True, error_model='numpy')
def log_softmax_backward(g, gx):
    """gx = g - gx * sum(g) row by row, gx holding exp(y) on entry (the sum in
    float64, the rest in the dtype)."""
    n, c = g.shape
    for i in range(n):
        s = g.dtype.type(_row_sum(g, i))
        for j in range(c):
            gx[i, j] = g[i, j] - gx[i, j] * s
