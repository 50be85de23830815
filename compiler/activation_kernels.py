"""One-pass float32/float64 forwards of activations (tape/_elementwise.py).

NumPy spends several passes (and temporaries) on what these do in one loop:
``np.where(x > 0, x, x * slope)`` for leaky_relu takes ~4 ns an element on a
random sign pattern (its select branches), ``np.maximum`` then ``np.minimum``
for clamp reads and writes the array twice.  Each loop does the same float
operations, in the array's own dtype, as the NumPy expression it replaces, so
results are equal element by element, NaN included.  Flat C-contiguous arrays.

Compiled on first use (``cache=True``), never at import.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from compiler.kernels32 import _bits_as_f32
from compiler.softmax_kernels import (_EXP_BIAS, _ROUND, _ROUND_BITS, _TWO_M64, _f32_bits, _fma,
                                      exp32, exp_poly32)

F32 = np.float32


@intrinsic
def _wide(typingctx):
    """Lets LLVM vectorize the calling kernel's loops 16 float32 lanes wide on
    an AVX-512 CPU: its default for those (the "prefer-256-bit" tuning) stops
    at 8.  A float32 exp pass measured 112 -> 77 us for 256K elements.  It sets
    the function attribute "prefer-vector-width" (llvmlite's attribute set
    only admits its known names, hence set.add); elsewhere it changes nothing."""
    def codegen(context, builder, signature, args):
        try:
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        except Exception:       # an llvmlite without that set: 8 lanes then
            pass
        return context.get_dummy_value()
    return types.none(), codegen


@njit(cache=True, error_model='numpy')
def leaky_relu_fwd(x, slope, out):
    """out = x where x > 0, else x * slope (slope in x's dtype; NaN stays NaN)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v if v > 0 else v * slope


@njit(cache=True, error_model='numpy')
def relu_fwd(x, zero, out):
    """out = 0 where x < 0, else x (zero in x's dtype): NaN stays NaN and -0.0
    stays -0.0, as PyTorch's relu.  NumPy's np.maximum(x, 0) takes ~0.8 ns an
    element on an AVX2 CPU (256K float32: 213 us), this loop a quarter."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = zero if v < zero else v


@njit(cache=True, error_model='numpy')
def where_fwd(c, x, y, out):
    """out = x where c, else y (c bool, x, y and out of one dtype, flat): one
    select a lane (both values loaded first: a conditional load keeps LLVM from
    vectorizing); NumPy's np.where takes ~2 ns an element (16K float32: 36 us)."""
    _wide()
    for i in range(x.shape[0]):
        a = x[i]
        b = y[i]
        out[i] = a if c[i] else b


@njit(cache=True, error_model='numpy')
def fill_where_fwd(c, v, y, out):
    """out = v where c, else y (masked_fill; v a scalar of y's dtype)."""
    _wide()
    for i in range(y.shape[0]):
        b = y[i]
        out[i] = v if c[i] else b


@njit(cache=True, error_model='numpy')
def keep_where_fwd(c, y, v, out):
    """out = y where c, else v (where's backward: the gradient's selected part)."""
    _wide()
    for i in range(y.shape[0]):
        b = y[i]
        out[i] = b if c[i] else v


@njit(cache=True, error_model='numpy')
def clamp_fwd(x, lo, hi, out):
    """out = minimum(maximum(x, lo), hi) with NumPy's NaN propagation (a NaN in x
    stays NaN; lo and hi, in x's dtype, are not NaN)."""
    for i in range(x.shape[0]):
        v = x[i]
        v = lo if v < lo else v
        out[i] = hi if v > hi else v



# --- float32 transcendental forwards in one pass (exp, sigmoid, silu, gelu).
# NumPy's float32 exp is ~0.37 ns an element and sigmoid/silu add passes
# around it; gelu's erf was a float64 polynomial.  These loops are straight-line
# float32 arithmetic and selects over ``exp32`` (compiler/softmax_kernels.py,
# within 1 ulp), so LLVM vectorizes them 8 lanes wide.  PyTorch's float32
# kernels are not bit-equal to NumPy either (Sleef, ~1 ulp); these stay within
# a few float32 ulp of the exact values, NaN and infinities as PyTorch's.

@njit(cache=True, error_model='numpy')
def exp32_fwd(x, out):
    _wide()
    for i in range(x.shape[0]):
        out[i] = exp32(x[i])


@njit(cache=True, error_model='numpy')
def sigmoid32_fwd(x, out):
    """1 / (1 + exp(-x)): exp(-x) overflows to inf below -89, giving 0."""
    _wide()
    for i in range(x.shape[0]):
        out[i] = F32(1.0) / (F32(1.0) + exp32(-x[i]))


@njit(cache=True, error_model='numpy')
def silu32_fwd(x, out):
    """x / (1 + exp(-x)), one rounding fewer than x * sigmoid(x); -inf gives
    -inf / inf = NaN, as PyTorch's."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v / (F32(1.0) + exp32(-v))


@njit(cache=True, error_model='numpy')
def tanh32_fwd(x, out):
    """tanhf within 2 ulp (Cephes tanhf): x + x^3 P(x^2) for |x| < 0.625, else
    1 - 2 / (exp(2|x|) + 1) with the sign of x (exp overflowing to inf above 44
    gives 1), on |x|, both sides computed and one selected so the loop
    vectorizes, then x's sign.  NumPy's float32 tanh on an AVX2 CPU takes ~4 ns
    an element (256K: 1040 -> 310 us).  -0.0 stays -0.0, NaN stays NaN, +-inf
    gives +-1."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        ax = abs(v)
        z = v * v
        p = _fma(F32(-5.70498872745E-3), z, F32(2.06390887954E-2))
        p = _fma(p, z, F32(-5.37397155531E-2))
        p = _fma(p, z, F32(1.33314422036E-1))
        p = _fma(p, z, F32(-3.33332819422E-1))
        small = _fma(p * z, ax, ax)
        r = F32(1.0) - F32(2.0) / (exp32(ax + ax) + F32(1.0))
        out[i] = np.copysign(small if ax < F32(0.625) else r, v)


# Phi(x) = erfc(-x / sqrt 2) / 2, as x Phi(x) = x r for x <= 0 and x - x r
# for x > 0, r = erfc(|x| / sqrt 2) / 2.  The float32 1 + erf(z) of the usual
# form cancels for x < 0 (PyTorch's float32 gelu is off by ~1e-6 absolute
# there); r instead is exp(-x^2 / 2) g(|x|), with g = erfcx(|x| / sqrt 2) / 2
# one rational function P/Q over all of [0, 14.5] (degrees 4 and 5, fitted
# for relative error: 0.33 ulp with these float32 coefficients).  One branch,
# one division, one exp: no select between a small-|x| series and a tail, so
# each element does half the arithmetic of the two-branch form (226 -> 150 us
# for 256K elements).  P and Q have positive coefficients (their Horner sums
# do not cancel), and g varies slowly in |x| (relative sensitivity under 1),
# so the rounding of each step stays near an ulp.  x^2 / 2 is split exactly
# by an FMA so that exp's argument carries no rounding error (which exp would
# scale by x^2 / 2, up to 105).
_GELU_P = (F32(0.5), F32(0.43828409910202026), F32(0.18322688341140747),
           F32(0.04063038155436516), F32(0.00411587068811059))
_GELU_Q = (F32(1.0), F32(1.6744531393051147), F32(1.2024693489074707),
           F32(0.4694487750530243), F32(0.10185171663761139), F32(0.010316837579011917))


@njit(cache=True, inline='always', error_model='numpy')
def _exp_split32(h, lo):
    """exp(h + lo) for -105.2 <= h <= 0 and |lo| <= ulp(h) / 2: exp32's
    reduction and polynomial (compiler/softmax_kernels.py, as its
    ``_exp_nonpos32``), with lo added to the reduced argument, where it costs
    one rounding of a number under 0.35 instead of one of the result.  No
    clamp: 2**(k + 64) stays normal for k >= -152."""
    kb = _fma(h, F32(1.44269504088896341), _ROUND)
    k = kb - _ROUND
    r = _fma(k, F32(-0.693359375), h)
    r = _fma(k, F32(2.12194440e-4), r) + lo
    p = exp_poly32(r)
    return p * _bits_as_f32((_f32_bits(kb) << 23) + _EXP_BIAS) * _TWO_M64


@njit(cache=True, inline='always', error_model='numpy')
def _gelu_tail32(a):
    """erfc(a / sqrt 2) / 2 for 0 <= a <= 14.5, within a few ulp relative (it
    underflows to 0 near a = 14.5); NaN for a NaN a."""
    p = _fma(_GELU_P[4], a, _GELU_P[3])
    p = _fma(p, a, _GELU_P[2])
    p = _fma(p, a, _GELU_P[1])
    p = _fma(p, a, _GELU_P[0])
    q = _fma(_GELU_Q[5], a, _GELU_Q[4])
    q = _fma(q, a, _GELU_Q[3])
    q = _fma(q, a, _GELU_Q[2])
    q = _fma(q, a, _GELU_Q[1])
    q = _fma(q, a, _GELU_Q[0])
    ah = a * F32(-0.5)
    h = ah * a                          # -a^2 / 2 rounded, >= -105.125
    lo = _fma(ah, a, -h)                # its rounding error, exactly
    return _exp_split32(h, lo) * p / q


@njit(cache=True, error_model='numpy')
def gelu32_fwd(x, out):
    """x Phi(x): gelu(-inf) = -inf * 0 = NaN, as PyTorch's float32 kernel;
    gelu(inf) = inf (PyTorch's float32 gives NaN, its float64 inf); -0.0
    gives -0.0.  |x| is clamped to 14.5, where r is already 0 in float32 (so
    an infinite x gives r = 0, not inf / inf)."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        a = abs(v)
        a = F32(14.5) if a > F32(14.5) else a
        r = _gelu_tail32(a)
        out[i] = v * (r if v <= F32(0.0) else F32(1.0) - r)


def _i32_binop(name):
    """An int32 (op) int32 -> int32 intrinsic, wrapping: NumPy's rules would
    widen the int32 bits to int64, which LLVM cannot narrow back (it must keep
    the overflow), and 64-bit lanes halve the loop's width."""
    @intrinsic
    def op(typingctx, a, b):
        if a != types.int32 or b != types.int32:
            return None

        def codegen(context, builder, signature, args):
            return getattr(builder, name)(*args)
        return types.int32(types.int32, types.int32), codegen
    return op


_i32_add = _i32_binop('add')
_i32_and = _i32_binop('and_')
_i32_sra = _i32_binop('ashr')


# --- float32 log, sin and cos forwards (tape/_ops.py), the same way: NumPy's
# float32 log and sin take ~0.4-0.5 ns an element, these about half that.

@njit(cache=True, inline='always', error_model='numpy')
def logf_series(f, z):
    """Cephes logf's polynomial part of log(1 + f), f * z * P(f) with z = f * f,
    for f in [sqrt(1/2) - 1, sqrt 2 - 1] (log32_fwd, softplus's log1p)."""
    y = _fma(F32(7.0376836292E-2), f, F32(-1.1514610310E-1))
    y = _fma(y, f, F32(1.1676998740E-1))
    y = _fma(y, f, F32(-1.2420140846E-1))
    y = _fma(y, f, F32(1.4249322787E-1))
    y = _fma(y, f, F32(-1.6668057665E-1))
    y = _fma(y, f, F32(2.0000714765E-1))
    y = _fma(y, f, F32(-2.4999993993E-1))
    y = _fma(y, f, F32(3.3333331174E-1))
    return y * f * z


@njit(cache=True, error_model='numpy')
def log32_fwd(x, out):
    """logf(x) within 1 ulp: x = 2**e m with m in [sqrt(1/2), sqrt 2) from the
    bits (subnormals scaled by 2**23 first), then Cephes logf's polynomial in
    f = m - 1 and e ln2 split in two.  log(0) = -inf, log(inf) = inf, negative
    and NaN give NaN, without NumPy's warnings (PyTorch warns neither)."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        sub = v < F32(1.1754943508222875e-38)
        vs = v * F32(8388608.0) if sub else v
        ix = _i32_add(_f32_bits(vs), np.int32(0x3F800000 - 0x3F3504F3))
        e = F32(_i32_sra(ix, np.int32(23))) - (F32(127 + 23) if sub else F32(127))
        f = _bits_as_f32(_i32_add(_i32_and(ix, np.int32(0x007FFFFF)), np.int32(0x3F3504F3))) \
            - F32(1.0)
        z = f * f
        y = logf_series(f, z)
        y = _fma(e, F32(-2.12194440e-4), y)
        y = _fma(F32(-0.5), z, y)
        r = _fma(e, F32(0.693359375), f + y)
        r = r if v < F32(np.inf) else v                     # inf
        r = r if v > F32(0.0) else F32(-np.inf)             # 0 and -0
        out[i] = r if v >= F32(0.0) else F32(np.nan)        # negative, NaN


# sin and cos: |x| = n pi/2 + z, |z| <= pi/4, with pi/2 in three float32 parts
# by FMAs (the first product and difference exact, so z keeps its digits near
# the multiples of pi/2), then Cephes sinf/cosf's polynomials on z.  Within
# TRIG_MAX the reduction's error stays far below an ulp of z (checked over
# every float32 there); a kernel counts the arguments beyond it (inf too),
# and its caller takes NumPy's result when there are any.
TRIG_MAX = 65536.0
_PIO2_1 = F32(1.5707963705062866)
_PIO2_2 = F32(-4.371138828673793e-08)
_PIO2_3 = F32(-1.7151245100058819e-15)


@njit(cache=True, inline='always', error_model='numpy')
def _reduce_pio2(ax):
    """(z, b): ax = n pi/2 + z, ax in [0, TRIG_MAX], b an int32 whose two low
    bits are n's."""
    kb = _fma(ax, F32(0.6366197466850281), _ROUND)
    k = kb - _ROUND
    z = _fma(-k, _PIO2_1, ax)
    z = _fma(-k, _PIO2_2, z)
    z = _fma(-k, _PIO2_3, z)
    return z, _f32_bits(kb)          # n's low bits: _ROUND_BITS has none


@njit(cache=True, inline='always', error_model='numpy')
def _sin_cos_poly(z):
    """(sin z, cos z) for |z| <= pi/4."""
    zz = z * z
    s = _fma(F32(-1.9515295891e-4), zz, F32(8.3321608736e-3))
    s = _fma(s, zz, F32(-1.6666654611e-1))
    s = _fma(s * zz, z, z)
    c = _fma(F32(2.443315711809948e-5), zz, F32(-1.388731625493765e-3))
    c = _fma(c, zz, F32(4.166664568298827e-2))
    c = _fma(c * zz, zz, _fma(F32(-0.5), zz, F32(1.0)))
    return s, c


@njit(cache=True, inline='always', error_model='numpy')
def _count_far(x):
    """How many |x| exceed TRIG_MAX (inf included; NaN not), in a pass of its
    own: a count kept in the sin loop widens it to 64-bit lanes (1.7x slower)."""
    bad = 0
    for i in range(x.shape[0]):
        bad += 1 if abs(x[i]) > F32(TRIG_MAX) else 0
    return bad


@njit(cache=True, error_model='numpy')
def sin32_fwd(x, out):
    """sinf(x) within ~1.6 ulp (NaN gives NaN) when every |x| <= TRIG_MAX;
    otherwise returns how many exceed it, leaving ``out`` unwritten."""
    _wide()
    bad = _count_far(x)
    if bad:
        return bad
    for i in range(x.shape[0]):
        v = x[i]
        ax = abs(v)
        z, n = _reduce_pio2(ax if ax == ax else F32(0.0))
        s, c = _sin_cos_poly(z)
        r = c if _i32_and(n, np.int32(1)) else s
        r = -r if _i32_and(n, np.int32(2)) else r
        r = np.copysign(F32(1.0), v) * r        # odd: -0.0 stays -0.0
        out[i] = r if v == v else v
    return 0


@njit(cache=True, error_model='numpy')
def cos32_fwd(x, out):
    """cosf(x) within ~1.6 ulp (NaN gives NaN) when every |x| <= TRIG_MAX;
    otherwise returns how many exceed it, leaving ``out`` unwritten."""
    _wide()
    bad = _count_far(x)
    if bad:
        return bad
    for i in range(x.shape[0]):
        v = x[i]
        ax = abs(v)
        z, n = _reduce_pio2(ax if ax == ax else F32(0.0))
        s, c = _sin_cos_poly(z)
        r = s if _i32_and(n, np.int32(1)) else c
        r = -r if _i32_and(_i32_add(n, np.int32(1)), np.int32(2)) else r
        out[i] = r if v == v else v
    return 0


# --- float64 exp forward.  Where NumPy has no AVX-512 (an AVX2 CPU), its
# float64 exp is a scalar libm loop, ~9 ns an element on this project's
# machines: a 4M exp took 22-36 ms, most of W3's forward.  This one is
# straight-line float64 arithmetic (Sleef's xexp, 1.0 ulp, as PyTorch's
# vectorized exp), so LLVM vectorizes it: 1.2-2 ns an element in cache (FMA
# throughput), 8.8 ms for 4M elements (memory).

@intrinsic
def _f64_bits(typingctx, x):
    """The int64 bit pattern of the float64 ``x``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_as_f64(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


_ROUND64 = 6755399441055744.0                   # 1.5 * 2**52, as _ROUND
_ROUND64_BITS = np.int64(0x4338000000000000)
_LN2_HI = 0.69314718055966295651160180568695068359375      # ln 2 in two parts
_LN2_LO = 0.28235290563031577122588448175013436025525412068e-12


@njit(cache=True, inline='always', error_model='numpy')
def exp64(x):
    """exp(x) within 1 ulp: x = k ln2 + s (|s| <= ln2/2, Cody-Waite), Sleef's
    degree-11 polynomial for exp(s) by fused multiply-adds, times 2**k from
    its bits in two halves (reaching subnormals with one rounding).  k is
    rounded by adding 1.5 * 2**52 (no float-to-int conversion, which LLVM
    leaves undefined for NaN and huge x); inf above 709.8, 0 below -1000 (exp
    is already 0 from -745.14), and a NaN x gives a NaN u, so NaN."""
    kb = _fma(x, 1.4426950408889634, _ROUND64)
    k = kb - _ROUND64
    s = _fma(k, -_LN2_HI, x)
    s = _fma(k, -_LN2_LO, s)
    u = _fma(0.2081276378237164457e-8, s, 0.2511210703042288022e-7)
    u = _fma(u, s, 0.2755762628169491192e-6)
    u = _fma(u, s, 0.2755723402025388239e-5)
    u = _fma(u, s, 0.2480158687479686264e-4)
    u = _fma(u, s, 0.0001984126989855865850)
    u = _fma(u, s, 0.001388888888897680118)
    u = _fma(u, s, 0.008333333333316527367)
    u = _fma(u, s, 0.04166666666666754464)
    u = _fma(u, s, 0.1666666666666666019)
    u = _fma(u, s, 0.5)
    u = _fma(s * s, u, s) + 1.0
    ki = _f64_bits(kb) - _ROUND64_BITS
    k1 = ki >> 1
    k2 = ki - k1
    u = u * _bits_as_f64((k1 + 1023) << 52) * _bits_as_f64((k2 + 1023) << 52)
    u = np.inf if x > 709.8 else u      # (from 709.7827128933841 u overflows)
    return 0.0 if x < -1000.0 else u


@njit(cache=True, error_model='numpy')
def exp64_fwd(x, out):
    _wide()
    for i in range(x.shape[0]):
        out[i] = exp64(x[i])
