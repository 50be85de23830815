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
from numba import njit, types
from numba.extending import intrinsic

from compiler.kernels32 import _bits_as_f32
from compiler.softmax_kernels import _ROUND, _ROUND_BITS, _f32_bits, _fma, exp32

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


# Phi(x) = erfc(-x / sqrt 2) / 2.  The float32 1 + erf(z) of the usual form
# cancels for x < 0 (PyTorch's float32 gelu is off by ~1e-6 absolute there);
# instead, for z = |x| / sqrt 2 >= 0.5, erfc(z) = exp(-z^2) g(t), g = erfcx
# as a polynomial in t = 1 / (1 + z) (fitted for relative error on z in
# [0.5, 10.5]; ~3 ulp, bounded by t's own rounding), with z^2 = x^2 / 2 split
# exactly by an FMA so that exp's argument carries no rounding error (which
# exp would scale by z^2).  Below 0.5, erf(z) = z P(z^2) without cancellation.
_ERFCX = (F32(4.642683506972389e-06), F32(0.5639870166778564), F32(0.5679162740707397),
          F32(0.24437125027179718), F32(-0.054480649530887604), F32(-1.511635661125183),
          F32(1.2161500453948975), F32(2.3692965507507324), F32(-5.232626438140869),
          F32(3.9575719833374023), F32(-1.1249338388442993))
_ERF = (F32(1.1283791065216064), F32(-0.37612590193748474), F32(0.11282503604888916),
        F32(-0.02673884853720665), F32(0.004684141371399164))


@njit(cache=True, inline='always', error_model='numpy')
def _phi32(x):
    """The standard normal CDF of x, |x| <= 14.5 (beyond, exp32 gives 0 or 1 - 0)."""
    z = abs(x) * F32(0.70710678118654752)
    zz = z * z
    e = _fma(zz, _ERF[4], _ERF[3])
    e = _fma(e, zz, _ERF[2])
    e = _fma(e, zz, _ERF[1])
    e = _fma(e, zz, _ERF[0]) * z
    small = _fma(F32(0.5), e if x >= F32(0.0) else -e, F32(0.5))
    t = F32(1.0) / (F32(1.0) + z)
    g = _fma(_ERFCX[10], t, _ERFCX[9])
    g = _fma(g, t, _ERFCX[8])
    g = _fma(g, t, _ERFCX[7])
    g = _fma(g, t, _ERFCX[6])
    g = _fma(g, t, _ERFCX[5])
    g = _fma(g, t, _ERFCX[4])
    g = _fma(g, t, _ERFCX[3])
    g = _fma(g, t, _ERFCX[2])
    g = _fma(g, t, _ERFCX[1])
    g = _fma(g, t, _ERFCX[0])
    h = x * x
    lo = _fma(x, x, -h)
    ex = exp32(F32(-0.5) * h)
    ex = _fma(ex, F32(-0.5) * lo, ex)        # exp(-h/2 - lo/2), lo tiny
    q = F32(0.5) * ex * g
    big = q if x < F32(0.0) else F32(1.0) - q
    return small if z < F32(0.5) else big


@njit(cache=True, error_model='numpy')
def gelu32_fwd(x, out):
    """x Phi(x): gelu(-inf) = -inf * 0 = NaN, as PyTorch's float32 kernel;
    gelu(inf) = inf (PyTorch's float32 gives NaN, its float64 inf)."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        vc = F32(14.5) if v > F32(14.5) else v
        vc = F32(-14.5) if vc < F32(-14.5) else vc
        out[i] = v * _phi32(vc)


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
        y = _fma(F32(7.0376836292E-2), f, F32(-1.1514610310E-1))
        y = _fma(y, f, F32(1.1676998740E-1))
        y = _fma(y, f, F32(-1.2420140846E-1))
        y = _fma(y, f, F32(1.4249322787E-1))
        y = _fma(y, f, F32(-1.6668057665E-1))
        y = _fma(y, f, F32(2.0000714765E-1))
        y = _fma(y, f, F32(-2.4999993993E-1))
        y = _fma(y, f, F32(3.3333331174E-1))
        y = y * f * z
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
