"""Float64 forwards of log, tanh, sin and cos (tape/_ops.py) for CPUs where
NumPy's float64 versions are scalar libm loops (no AVX-512: NumPy vectorizes
them only there).  On an AVX2 CPU NumPy takes, an element, log ~8.6 ns, tanh
~20, sin ~14, cos ~13; these loops are straight-line float64 arithmetic (fused
multiply-adds) and selects, no libm call and no branch, so LLVM vectorizes
them four lanes wide, as compiler/activation_kernels.py's ``exp64``.

Each is within ~1 ulp of the exact value (fdlibm's and Cephes' algorithms;
tests/test_f64_kernels.py measures them against the C library), with NumPy's
and PyTorch's special values, and without NumPy's floating-point warnings
(PyTorch gives none either).  Flat C-contiguous float64 arrays in and out.

Compiled on first use (``cache=True``), never at import.
"""
import numpy as np
from numba import njit

from compiler.activation_kernels import _ROUND64, _bits_as_f64, _f64_bits, _wide, exp64
from compiler.softmax_kernels import _fma


# --- log: x = 2**k (1 + f), 1 + f in [sqrt(1/2), sqrt 2), from the bits
# (subnormals scaled by 2**52 first); then fdlibm's __ieee754_log:
# log(1 + f) = f - (hfsq - s (hfsq + R(s^2))), s = f / (2 + f), plus k ln2 in
# two parts (its high part has 32 low zero bits: k ln2_hi is exact).  k as a
# float64 from its bits (2**52 + e, less 2**52 + bias): AVX2 has no vector
# int64-to-float conversion.  fdlibm's error is under 1 ulp.
_TINY = 2.2250738585072014e-308         # the smallest normal float64
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD    # sqrt(1/2)
_ONE_BITS = 0x3FF0000000000000
_MANT = 0x000FFFFFFFFFFFFF
_TWO52_BITS = 0x4330000000000000        # 2**52: 2**52 + i for 0 <= i < 2**52
_TWO52 = 4503599627370496.0
# fdlibm's (compiler/softplus_kernels.py's float64 log1p takes them from here)
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


@njit(cache=True, inline='always', error_model='numpy')
def log_series(s):
    """fdlibm's R(s^2) of log(1 + f), s = f / (2 + f): t2 + t1."""
    z = s * s
    w = z * z
    t1 = w * _fma(w, _fma(w, _LG6, _LG4), _LG2)
    t2 = z * _fma(w, _fma(w, _fma(w, _LG7, _LG5), _LG3), _LG1)
    return t2 + t1


@njit(cache=True, inline='always', error_model='numpy')
def log64(v):
    """log(v) within 1 ulp: log(0) = -inf (-0.0 too), log(inf) = inf, a
    negative v or NaN gives NaN."""
    sub = v < _TINY
    vs = v * _TWO52 if sub else v
    ix = _f64_bits(vs) + (_ONE_BITS - _SQRT_HALF_BITS)
    kf = _bits_as_f64(((ix >> 52) & 0x7FF) | _TWO52_BITS) - \
        (_TWO52 + 1075.0 if sub else _TWO52 + 1023.0)
    f = _bits_as_f64((ix & _MANT) + _SQRT_HALF_BITS) - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    r = _fma(kf, _LN2_HI, (_fma(s, hfsq + log_series(s), kf * _LN2_LO) - hfsq) + f)
    r = r if v < np.inf else v                  # inf
    r = r if v > 0.0 else -np.inf               # 0 and -0
    return r if v >= 0.0 else np.nan            # negative, NaN


@njit(cache=True, error_model='numpy')
def log64_fwd(x, out):
    _wide()
    for i in range(x.shape[0]):
        out[i] = log64(x[i])


# --- tanh on |x|, then x's sign: Cephes' tanh for |x| < 0.625,
# x + x^3 P(x^2) / Q(x^2), else 1 - 2 / (exp(2|x|) + 1) (exp overflowing to
# inf above 354.9 gives 1).  Both sides are computed, and their divisions
# merged into one: the numerator and denominator are selected, then divided.
# NaN stays NaN, -0.0 stays -0.0, +-inf gives +-1.
_TP = (-9.64399179425052238628E-1, -9.92877231001918586564E1, -1.61468768441708447952E3)
_TQ = (1.12811678491632931402E2, 2.23548839060100448583E3, 4.84406305325125486048E3)


@njit(cache=True, inline='always', error_model='numpy')
def tanh64(v):
    ax = abs(v)
    small = ax < 0.625
    z = ax * ax
    p = _fma(_fma(_TP[0], z, _TP[1]), z, _TP[2])
    q = _fma(_fma(z + _TQ[0], z, _TQ[1]), z, _TQ[2])
    e = exp64(ax + ax)
    t = (p if small else 2.0) / (q if small else e + 1.0)
    r = _fma(ax * z, t, ax) if small else 1.0 - t
    return np.copysign(r, v)


@njit(cache=True, error_model='numpy')
def tanh64_fwd(x, out):
    _wide()
    for i in range(x.shape[0]):
        out[i] = tanh64(x[i])


# --- sin and cos: |x| = n pi/2 + (z + zz), |z| <~ pi/4, zz z's tail, with
# pi/2 in three float64 parts (159 bits): n pi/2's first part off |x| by an FMA
# is exact (both multiples of 2**-52 for |x| >= 1, the difference under 1), the
# second's product split exactly by an FMA and its subtraction by TwoSum, the
# third's small enough to round; so z + zz is good to ~2**-100 relative even
# for the |x| closest to multiples of pi/2.  Then fdlibm's __kernel_sin and
# __kernel_cos (FreeBSD's form, no branch) on (z, zz), both, and n's two low
# bits select and sign.  n is rounded by adding 1.5 * 2**52 (exact below
# 2**51): TRIG_MAX64 keeps far below that; a kernel counts the arguments
# beyond it (inf too), and its caller takes NumPy's result when there are any.
TRIG_MAX64 = 1e9
_INV_PIO2 = 0.6366197723675814
_PIO2_1 = 1.5707963267948966
_PIO2_2 = 6.123233995736766e-17
_PIO2_3 = -1.4973849048591698e-33
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11


@njit(cache=True, inline='always', error_model='numpy')
def _reduce_pio2_64(ax):
    """(z, zz, b): ax = n pi/2 + z + zz, ax in [0, TRIG_MAX64], b an int64
    whose two low bits are n's."""
    kb = _fma(ax, _INV_PIO2, _ROUND64)
    k = kb - _ROUND64
    r1 = _fma(-k, _PIO2_1, ax)                  # exact
    p2 = k * _PIO2_2
    e2 = _fma(k, _PIO2_2, -p2)                  # k P2 = p2 + e2 exactly
    s = r1 - p2
    bb = s - r1
    err = (r1 - (s - bb)) + (-p2 - bb)          # r1 - p2 = s + err exactly
    lo = err - _fma(k, _PIO2_3, e2)
    z = s + lo
    zz = (s - z) + lo
    return z, zz, _f64_bits(kb)                 # _ROUND64's low bits are 0


@njit(cache=True, inline='always', error_model='numpy')
def _sin_cos64(z, zz):
    """(sin(z + zz), cos(z + zz)) for |z| <~ pi/4, |zz| <= ulp(z) / 2."""
    q = z * z
    w = q * q
    r = _fma(q, _fma(q, _S4, _S3), _S2) + q * w * _fma(q, _S6, _S5)
    v = q * z
    s = z - ((q * (0.5 * zz - v * r) - zz) - v * _S1)
    r = q * _fma(q, _fma(q, _C3, _C2), _C1) + w * w * _fma(q, _fma(q, _C6, _C5), _C4)
    hz = 0.5 * q
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (q * r - z * zz))
    return s, c


@njit(cache=True, inline='always', error_model='numpy')
def _count_far64(x):
    """How many |x| exceed TRIG_MAX64 (inf included; NaN not), in a pass of
    its own (as activation_kernels' ``_count_far``)."""
    bad = 0
    for i in range(x.shape[0]):
        bad += 1 if abs(x[i]) > TRIG_MAX64 else 0
    return bad


@njit(cache=True, inline='always', error_model='numpy')
def sin64(v):
    """sin(v) within ~1 ulp (NaN gives NaN, -0.0 stays -0.0) for |v| <=
    TRIG_MAX64; a caller checks its arguments first (``trig64_ok``)."""
    v = np.float64(v)
    ax = abs(v)
    z, zz, n = _reduce_pio2_64(ax if ax == ax else 0.0)
    s, c = _sin_cos64(z, zz)
    r = c if n & 1 else s
    r = -r if n & 2 else r
    r = np.copysign(1.0, v) * r             # odd
    return r if v == v else v


@njit(cache=True, inline='always', error_model='numpy')
def cos64(v):
    """cos(v) within ~1 ulp (NaN gives NaN) for |v| <= TRIG_MAX64 (as ``sin64``)."""
    v = np.float64(v)
    ax = abs(v)
    z, zz, n = _reduce_pio2_64(ax if ax == ax else 0.0)
    s, c = _sin_cos64(z, zz)
    r = s if n & 1 else c
    r = -r if (n + 1) & 2 else r
    return r if v == v else v


@njit(cache=True, error_model='numpy')
def trig64_ok(x):
    """Is every element of x NaN or within +-TRIG_MAX64 (so sin64 and cos64
    apply)?  The float64 chunk kernels of sin's and cos's backward
    (compiler/_chunk_generated.py) check their argument with it."""
    return _count_far64(x) == 0


@njit(cache=True, error_model='numpy')
def sin64_fwd(x, out):
    """sin(x) within ~1 ulp (NaN gives NaN, -0.0 stays -0.0) when every
    |x| <= TRIG_MAX64; otherwise returns how many exceed it, leaving ``out``
    unwritten."""
    _wide()
    bad = _count_far64(x)
    if bad:
        return bad
    for i in range(x.shape[0]):
        out[i] = sin64(x[i])
    return 0


@njit(cache=True, error_model='numpy')
def cos64_fwd(x, out):
    """cos(x) within ~1 ulp (NaN gives NaN) when every |x| <= TRIG_MAX64;
    otherwise returns how many exceed it, leaving ``out`` unwritten."""
    _wide()
    bad = _count_far64(x)
    if bad:
        return bad
    for i in range(x.shape[0]):
        out[i] = cos64(x[i])
    return 0
