"""Numba kernels behind softmax, log_softmax (``tape/nn/_softmax.py``) and the
attention weights of ``tape/nn/_sdpa.py``, along the last dim of a C-contiguous
array viewed as rows (n, c).

NumPy reduces a short last axis row by row, a few nanoseconds of overhead per
row on top of the call: on attention scores (8, 4, 16, 16) its ``max(-1)``
alone cost more than the exp.  Here each row-wise step is one call over all
rows:

    float32 forward:  ``softmax32`` / ``log_softmax32``, one call, each row
               passed over while it is in cache: its maximum, the exps
               (``_exp_nonpos32`` below: exp32 for arguments <= 0, as
               x - max is) and their sum, the normalization;
    float64 forward:  ``shift`` (e = x * scale - row max), NumPy's exp in place
               (vectorized; a Numba loop calls libm per element, several times
               slower), then ``normalize`` (softmax: e / sum e) or
               ``log_normalize`` (log_softmax: z - log sum exp z);
    backward:  ``softmax_backward`` (gx = y * (g - sum(g * y))),
               ``log_softmax_backward32`` (gx = g - exp(y) * sum(g), float32) or
               ``log_softmax_backward`` (the same, exp(y) from NumPy).

Vectorization without fastmath.  Numba's LLVM runs no SLP vectorizer, and the
loop vectorizer leaves a floating-point sum scalar unless it may reassociate
it.  So:

  * the row maximum is one ``llvm.maxnum`` reduction (``_maxnum``): an exact
    operation in any order, which the loop vectorizer vectorizes as it is.
    maxnum ignores NaN (maxnum(m, NaN) = m), as the old ``v > m`` select did: a
    NaN reaches the row's sum, and the whole row, by itself, as PyTorch's does;
  * sums are float64 in LANES partial sums kept in a small array, updated lane
    by lane in an inner loop: the vectorizer turns the lanes into vector
    registers, reassociating nothing (the order of the adds is written out);
    rows shorter than LANES fall back to eight scalar partial sums;
  * exp in float32 is ``exp32``: Cephes expf's polynomial in fused
    multiply-adds (``llvm.fma``, one rounding each: no less accurate than
    separate ops), plain arithmetic and selects that vectorize; within 1 ulp
    (measured over [-110, 0] and at the specials), like PyTorch's Sleef expf.

Every array written has the input's dtype.  Nothing here compiles at import:
the callers import this module inside their functions.

NaN and infinities, as PyTorch's softmax: a NaN in a row makes the row NaN; an
all -inf row (or a +inf in it) gives NaN, except with ``safe`` (attention
masks), where an all -inf row is shifted by 0, its exps are all 0 and stay 0.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from compiler.kernels32 import _bits_as_f32

from compiler.lanes import LANES, fold as _fold

F32 = np.float32

# Partial sums per row sum: LANES (compiler/lanes.py says why 64).


def _llvm_call(builder, name, args):
    t = args[0].type
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(t, [t] * len(args)),
        name + ('.f32' if t == ir.FloatType() else '.f64'))
    return builder.call(fn, args)


@intrinsic
def _maxnum(typingctx, a, b):
    """llvm.maxnum: the larger of a, b, the other if one is NaN."""
    def codegen(context, builder, signature, args):
        return _llvm_call(builder, 'llvm.maxnum', args)
    if a != b:
        return None
    return a(a, b), codegen


@intrinsic
def _fma(typingctx, a, b, c):
    """llvm.fma: a * b + c, one rounding."""
    def codegen(context, builder, signature, args):
        return _llvm_call(builder, 'llvm.fma', args)
    if not (a == b == c):
        return None
    return a(a, b, c), codegen


@intrinsic
def _f32_bits(typingctx, x):
    """The int32 bit pattern of the float32 ``x``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


_ROUND = F32(12582912.0)        # 1.5 * 2**23: adding it rounds to an integer,
_ROUND_BITS = np.int32(0x4B400000)  # which its bits then hold (minus these)


@njit(cache=True, inline='always', error_model='numpy')
def exp_poly32(r):
    """exp(r) for |r| <= ln2 / 2 (and a little beyond): Cephes expf's
    polynomial in fused multiply-adds (exp32, _exp_nonpos32, gelu's exp)."""
    p = _fma(F32(1.9875691500E-4), r, F32(1.3981999507E-3))
    p = _fma(p, r, F32(8.3334519073E-3))
    p = _fma(p, r, F32(4.1665795894E-2))
    p = _fma(p, r, F32(1.6666665459E-1))
    p = _fma(p, r, F32(5.0000001201E-1))
    return _fma(p, r * r, r) + F32(1.0)


@njit(cache=True, inline='always', error_model='numpy')
def exp32(x):
    """expf(x) within 1 ulp: x = k ln2 + r (Cody-Waite), Cephes expf's
    polynomial for exp(r) in fused multiply-adds, times 2**k from its bits in
    two halves (reaching subnormals; 0 below -104, inf above 89).  k is
    rounded by adding 1.5 * 2**23 (no float-to-int conversion, which LLVM
    leaves undefined for NaN); a NaN x gives a NaN p, so NaN."""
    xc = F32(-104.0) if x < F32(-104.0) else x
    xc = F32(89.0) if xc > F32(89.0) else xc
    kb = _fma(xc, F32(1.44269504088896341), _ROUND)
    k = kb - _ROUND
    r = _fma(k, F32(-0.693359375), xc)
    r = _fma(k, F32(2.12194440e-4), r)
    p = exp_poly32(r)
    ki = _f32_bits(kb) - _ROUND_BITS
    k1 = ki >> 1
    k2 = ki - k1
    return p * _bits_as_f32((k1 + 127) << 23) * _bits_as_f32((k2 + 127) << 23)


_EXP_BIAS = np.int32(191 << 23)   # the exponent field of 2**64 less (k << 23)'s
_TWO_M64 = F32(2.0 ** -64)


@njit(cache=True, inline='always', error_model='numpy')
def _exp_nonpos32(x):
    """``exp32(x)`` bit for bit for x <= 0 (or NaN), in 19 vector instructions
    instead of 30: what softmax exponentiates (x - row max), and a
    log_softmax output.  No upper clamp; 2**k (k in [-150, 0]) as 2**(k + 64),
    a normal number, times 2**-64: the first product is exact, the second
    rounds once, as exp32's two halves do.  2**(k + 64)'s bits are kb's shifted
    up 23 plus a constant (the 1.5 * 2**23 in kb's bits shifts out)."""
    xc = F32(-104.0) if x < F32(-104.0) else x
    kb = _fma(xc, F32(1.44269504088896341), _ROUND)
    k = kb - _ROUND
    r = _fma(k, F32(-0.693359375), xc)
    r = _fma(k, F32(2.12194440e-4), r)
    p = exp_poly32(r)
    return p * _bits_as_f32((_f32_bits(kb) << 23) + _EXP_BIAS) * _TWO_M64


# The row helpers index the 2-D arrays (x[i, j]) and are inlined into their
# callers: slicing a row out per row, and a call per row, cost 20 ns a row of 16.

@njit(cache=True, error_model='numpy', inline='always')
def _row_max(x, i, sc, safe):
    """The largest of ``x[i] * sc`` (the product in x's dtype), ignoring NaN;
    with ``safe`` 0 in place of -inf (an all -inf row)."""
    m = x.dtype.type(-np.inf)
    for j in range(x.shape[1]):
        m = _maxnum(m, x[i, j] * sc)
    if safe and m == -np.inf:
        m = x.dtype.type(0.0)
    return m


# A row sum is LANES partial sums over the row's first cl = c - c % LANES
# elements (``_lanes_sum``) plus eight scalar partial sums over the rest
# (``_tail_sum``, all of a row shorter than LANES).  The kernels branch on
# cl > 0 once, outside their row loop: with that test inside the row helper
# (even inlined), LLVM made short rows ~20 ns a row slower.

@njit(cache=True, error_model='numpy', inline='always')
def _lanes_sum(g, y, i, acc, cl, dot):
    """The float64 sum of ``g[i, :cl]`` (``dot`` False) or of ``g[i, :cl] *
    y[i, :cl]`` (True, products in float64); ``acc`` a float64 scratch array
    of LANES, cl a multiple of LANES."""
    for l in range(LANES):
        acc[l] = 0.0
    for j in range(0, cl, LANES):
        for l in range(LANES):
            if dot:
                acc[l] += np.float64(g[i, j + l]) * np.float64(y[i, j + l])
            else:
                acc[l] += g[i, j + l]
    return _fold(acc)


@njit(cache=True, error_model='numpy', inline='always')
def _tail_sum(g, y, i, j0, dot):
    """The float64 sum of ``g[i, j0:]`` (or of ``g[i, j0:] * y[i, j0:]``) in
    eight scalar partial sums."""
    c = g.shape[1]
    c8 = c - (c - j0) % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    for j in range(j0, c8, 8):
        if dot:
            a0 += np.float64(g[i, j]) * np.float64(y[i, j])
            a1 += np.float64(g[i, j + 1]) * np.float64(y[i, j + 1])
            a2 += np.float64(g[i, j + 2]) * np.float64(y[i, j + 2])
            a3 += np.float64(g[i, j + 3]) * np.float64(y[i, j + 3])
            a4 += np.float64(g[i, j + 4]) * np.float64(y[i, j + 4])
            a5 += np.float64(g[i, j + 5]) * np.float64(y[i, j + 5])
            a6 += np.float64(g[i, j + 6]) * np.float64(y[i, j + 6])
            a7 += np.float64(g[i, j + 7]) * np.float64(y[i, j + 7])
        else:
            a0 += g[i, j]
            a1 += g[i, j + 1]
            a2 += g[i, j + 2]
            a3 += g[i, j + 3]
            a4 += g[i, j + 4]
            a5 += g[i, j + 5]
            a6 += g[i, j + 6]
            a7 += g[i, j + 7]
    r = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for j in range(c8, c):
        if dot:
            r += np.float64(g[i, j]) * np.float64(y[i, j])
        else:
            r += g[i, j]
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
        m = _row_max(x, i, sc, safe)
        for j in range(c):
            e[i, j] = x[i, j] * sc - m


@njit(cache=True, error_model='numpy', inline='always')
def _scale_row(e, i, s, safe):
    """e[i] *= 1 / s (one reciprocal per row, as PyTorch's kernel multiplies by
    it); with ``safe`` a row summing to 0 (an all -inf row shifted by 0) stays 0."""
    if safe and s == 0.0:
        return
    r = e.dtype.type(1.0 / s)
    for j in range(e.shape[1]):
        e[i, j] = e[i, j] * r


@njit(cache=True, error_model='numpy')
def normalize(e, safe):
    """e /= its row's (float64) sum; ``safe`` as in ``_scale_row``."""
    n, c = e.shape
    cl = c - c % LANES
    acc = np.empty(LANES)
    if cl:
        for i in range(n):
            _scale_row(e, i, _lanes_sum(e, e, i, acc, cl, False)
                       + _tail_sum(e, e, i, cl, False), safe)
    else:
        for i in range(n):
            _scale_row(e, i, _tail_sum(e, e, i, 0, False), safe)


@njit(cache=True, error_model='numpy', inline='always')
def _log_normalize_row(z, i, s):
    ls = z.dtype.type(np.log(s))
    for j in range(z.shape[1]):
        z[i, j] = z[i, j] - ls


@njit(cache=True, error_model='numpy')
def log_normalize(z, ez):
    """z -= log(the row's float64 sum of ez), ez = exp(z): log_softmax from the
    shifted z."""
    n, c = z.shape
    cl = c - c % LANES
    acc = np.empty(LANES)
    if cl:
        for i in range(n):
            _log_normalize_row(z, i, _lanes_sum(ez, ez, i, acc, cl, False)
                               + _tail_sum(ez, ez, i, cl, False))
    else:
        for i in range(n):
            _log_normalize_row(z, i, _tail_sum(ez, ez, i, 0, False))


@njit(cache=True, error_model='numpy', inline='always')
def _row_sum(e, i, acc, cl):
    """The float64 sum of row ``e[i]`` (``_lanes_sum`` then ``_tail_sum``)."""
    s = _tail_sum(e, e, i, cl, False)
    if cl:
        s += _lanes_sum(e, e, i, acc, cl, False)
    return s


@njit(cache=True, error_model='numpy')
def softmax32(x, e, sc, safe):
    """e = softmax(x * sc) of float32 rows (e may be x, though LLVM's overlap
    check then runs the exp loop scalar): per row, while it is in cache, its
    maximum, the exps (one straight loop, vectorized), their float64 sum and the
    scaling by its reciprocal.  Summing inside the exp loop measured slower."""
    n, c = x.shape
    cl = c - c % LANES
    sc = F32(sc)
    acc = np.empty(LANES)
    for i in range(n):
        m = _row_max(x, i, sc, safe)
        for j in range(c):                      # (<= 0 or NaN; -inf gives 0)
            e[i, j] = _exp_nonpos32(x[i, j] * sc - m)
        _scale_row(e, i, _row_sum(e, i, acc, cl), safe)


@njit(cache=True, error_model='numpy')
def log_softmax32(x, z):
    """z = log_softmax(x) of float32 rows (z not x), as PyTorch's kernel: per
    row its maximum m, the sum s of exp(x - m) (the exps in a one-row scratch
    array, in cache), then z = (x - m) - log(s) in that order (PyTorch's note:
    x - m first keeps the small differences of large inputs)."""
    n, c = x.shape
    cl = c - c % LANES
    one = F32(1.0)
    acc = np.empty(LANES)
    ez = np.empty((1, c), np.float32)
    for i in range(n):
        m = _row_max(x, i, one, False)
        for j in range(c):
            ez[0, j] = _exp_nonpos32(x[i, j] - m)
        ls = F32(np.log(_row_sum(ez, 0, acc, cl)))
        for j in range(c):
            z[i, j] = (x[i, j] - m) - ls


@njit(cache=True, error_model='numpy', inline='always')
def _softmax_backward_row(y, g, gx, i, d):
    d = y.dtype.type(d)
    for j in range(y.shape[1]):
        gx[i, j] = y[i, j] * (g[i, j] - d)


@njit(cache=True, error_model='numpy')
def softmax_backward(y, g, gx):
    """gx = y * (g - sum(g * y)) row by row (the sum in float64, the rest in the
    dtype); gx may be g (attention's ds = p * (dp - sum(dp * p)) in place)."""
    n, c = y.shape
    cl = c - c % LANES
    acc = np.empty(LANES)
    if cl:
        for i in range(n):
            _softmax_backward_row(y, g, gx, i, _lanes_sum(g, y, i, acc, cl, True)
                                  + _tail_sum(g, y, i, cl, True))
    else:
        for i in range(n):
            _softmax_backward_row(y, g, gx, i, _tail_sum(g, y, i, 0, True))


@njit(cache=True, error_model='numpy', inline='always')
def _log_softmax_backward_row(y, g, gx, i, s, exp_y):
    s = g.dtype.type(s)
    for j in range(g.shape[1]):
        if exp_y:
            gx[i, j] = g[i, j] - _exp_nonpos32(y[i, j]) * s
        else:
            gx[i, j] = g[i, j] - gx[i, j] * s


@njit(cache=True, error_model='numpy')
def log_softmax_backward(g, gx):
    """gx = g - gx * sum(g) row by row, gx holding exp(y) on entry (the sum in
    float64, the rest in the dtype)."""
    n, c = g.shape
    cl = c - c % LANES
    acc = np.empty(LANES)
    if cl:
        for i in range(n):
            _log_softmax_backward_row(gx, g, gx, i, _lanes_sum(g, g, i, acc, cl, False)
                                      + _tail_sum(g, g, i, cl, False), False)
    else:
        for i in range(n):
            _log_softmax_backward_row(gx, g, gx, i, _tail_sum(g, g, i, 0, False), False)


@njit(cache=True, error_model='numpy')
def log_softmax_backward32(y, g, gx):
    """gx = g - exp(y) * sum(g) of float32 rows (gx may be g or y), y a
    log_softmax (<= 0 or NaN: ``_exp_nonpos32``)."""
    n, c = g.shape
    cl = c - c % LANES
    acc = np.empty(LANES)
    if cl:
        for i in range(n):
            _log_softmax_backward_row(y, g, gx, i, _lanes_sum(g, g, i, acc, cl, False)
                                      + _tail_sum(g, g, i, cl, False), True)
    else:
        for i in range(n):
            _log_softmax_backward_row(y, g, gx, i, _tail_sum(g, g, i, 0, False), True)
