"""Numba kernels behind float32 ``sum``/``mean`` over the last axis and the
2-norm (``tape/_ops.py`` ``_np_sum``/``_np_mean``, ``tape/_reductions.py``).

NumPy reduces float32 along the last axis of a C-contiguous array one row
at a time with a scalar pairwise sum (~43 us for 256x1024, PyTorch ~9 us),
and the 2-norm as ``x * x`` then a sum (a full temporary).  Here each row
keeps 64 float64 partial sums in a small array, added block by block: a
loop of 64 stays a loop that LLVM vectorizes (16 or 32 lanes get fully
unrolled into scalar adds, which Numba's pipeline does not re-vectorize).
Float64 lanes keep the float32 result within one rounding of the exact sum,
at least as accurate as PyTorch's float32 cascade sum.

Nothing here compiles at import: callers import this module inside their
functions.
"""
import numpy as np
from numba import njit

from compiler.lanes import LANES, fold as _fold

_L = LANES
_B = 64 * _L     # float32 lanes flush to float64 every _B elements


@njit(cache=True, error_model='numpy', inline='always')
def _sum_row(row, acc):
    """The float64 sum of a 1-D float32 row: float32 lanes (twice the float64
    vector width) over blocks of _B elements, each lane adding at most _B/_L
    values before its block total is folded into a float64 sum."""
    n = row.shape[0]
    nL = n - n % _L
    r = 0.0
    for t0 in range(0, nL, _B):
        t1 = min(t0 + _B, nL)
        for k in range(_L):
            acc[k] = 0.0
        for t in range(t0, t1, _L):
            blk = row[t:t + _L]
            for k in range(_L):
                acc[k] += blk[k]
        r += np.float64(_fold(acc))
    for j in range(nL, n):
        r += row[j]
    return r


@njit(cache=True, error_model='numpy')
def row_sums(x, out, scale):
    """``out[i] = sum(x[i, :]) * scale`` for a C-contiguous float32 (m, n)."""
    acc = np.empty(_L, np.float32)
    for i in range(x.shape[0]):
        out[i] = _sum_row(x[i], acc) * scale


@njit(cache=True, error_model='numpy')
def sum_squares(x):
    """The float64 sum of ``x * x`` over a C-contiguous 1-D float32 array."""
    acc = np.zeros(_L, np.float64)
    n = x.shape[0]
    nL = n - n % _L
    for t in range(0, nL, _L):
        blk = x[t:t + _L]
        for k in range(_L):
            v = np.float64(blk[k])
            acc[k] += v * v
    r = _fold(acc)
    for j in range(nL, n):
        v = np.float64(x[j])
        r += v * v
    return r
