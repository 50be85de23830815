"""float32 versions of the formula helpers, for fused kernels over float32 runs.

A run whose saved arrays and gradients are all float32 (compiler/fuse.py)
evaluates its formulas in float32: twice the SIMD lanes of float64, no
conversions, and shorter polynomials (float32 needs ~7 digits, not 16).
PyTorch computes these backward formulas in float32 too.  Every helper is
plain arithmetic and selects (no libm call, no branch) so loops vectorize.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

F32 = np.float32


@intrinsic
def _bits_as_f32(typingctx, bits):
    """The float32 whose bit pattern is the int32 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@njit(cache=True, inline='always', error_model='numpy')
def vexp32(x):
    """expf(x) within ~2 ulp: x = k ln2 + r (|r| <= ln2/2, Cody-Waite split),
    Cephes expf's degree-7 polynomial for exp(r), times 2**k from its bits in
    two halves (results reach float32 subnormals and inf).  NaN stays NaN."""
    xc = F32(-104.0) if x < F32(-104.0) else x
    xc = F32(89.0) if xc > F32(89.0) else xc
    k = np.floor((xc if xc == xc else F32(0.0)) * F32(1.44269504088896341) + F32(0.5))
    r = (xc - k * F32(0.693359375)) - k * F32(-2.12194440e-4)
    r2 = r * r
    p = F32(1.9875691500E-4)
    p = p * r + F32(1.3981999507E-3)
    p = p * r + F32(8.3334519073E-3)
    p = p * r + F32(4.1665795894E-2)
    p = p * r + F32(1.6666665459E-1)
    p = p * r + F32(5.0000001201E-1)
    p = (p * r2 + r) + F32(1.0)
    ki = np.int32(k)
    k1 = ki >> 1
    k2 = ki - k1
    return p * _bits_as_f32((k1 + 127) << 23) * _bits_as_f32((k2 + 127) << 23)


@njit(cache=True, inline='always', error_model='numpy')
def sigmoid32(x):
    return F32(1.0) / (F32(1.0) + vexp32(-x))


@njit(cache=True, inline='always', error_model='numpy')
def erf32(x):
    """erff(x) as a rational in x (Eigen's generic_fast_erf_float), the input
    clamped to [-4, 4] (beyond, erf is +-1 in float32) by selects that keep NaN."""
    xc = F32(4.0) if x > F32(4.0) else x
    xc = F32(-4.0) if xc < F32(-4.0) else xc
    x2 = xc * xc
    p = x2 * F32(-2.72614225801306e-10) + F32(2.77068142495902e-08)
    p = x2 * p + F32(-2.10102402082508e-06)
    p = x2 * p + F32(-5.69250639462346e-05)
    p = x2 * p + F32(-7.34990630326855e-04)
    p = x2 * p + F32(-2.95459980854025e-03)
    p = x2 * p + F32(-1.60960333262415e-02)
    p = xc * p
    q = x2 * F32(-1.45660718464996e-05) + F32(-2.13374055278905e-04)
    q = x2 * q + F32(-1.68282697438203e-03)
    q = x2 * q + F32(-7.37332916720468e-03)
    q = x2 * q + F32(-1.42647390514189e-02)
    return p / q


@njit(cache=True, inline='always', error_model='numpy')
def eq32(x, y):
    return F32(1.0) if x == y else F32(0.0)


@njit(cache=True, inline='always', error_model='numpy')
def ge32(x, y):
    return F32(1.0) if x >= y else F32(0.0)


@njit(cache=True, inline='always', error_model='numpy')
def where_pos32(cond, x, y):
    return x if cond > F32(0.0) else y


@njit(cache=True, inline='always', error_model='numpy')
def inv0_32(x):
    return F32(1.0) / x if x != F32(0.0) else F32(0.0)


@njit(cache=True, inline='always', error_model='numpy')
def zero32(x):
    return F32(0.0)


@njit(cache=True, inline='always', error_model='numpy')
def step32(x):
    return F32(1.0) if x > F32(0.0) else F32(0.0)


@njit(cache=True, inline='always', error_model='numpy')
def sign32(x):
    s = F32(1.0) if x > F32(0.0) else F32(0.0)
    s = F32(-1.0) if x < F32(0.0) else s
    return s if x == x else x           # NaN stays NaN, as the float64 helper


@njit(cache=True, inline='always', error_model='numpy')
def sqrt32(x):
    return np.sqrt(x)                   # llvm.sqrt.f32: vectorizes, unlike a libm call


# --- sin and cos: Cephes sinf/cosf.  |x| is reduced by the nearest even
# multiple j of pi/4 with pi/4 split in three (Cody-Waite, exact products in
# float32 while |x| <= TRIG32_MAX), then a degree-7 (sin) or degree-8 (cos)
# polynomial on |z| <= pi/4; about 1 ulp.  Beyond TRIG32_MAX the reduction
# loses digits: a kernel calls these only after ``trig32_ok`` has seen every
# argument within it (inf included), and otherwise takes its float64 loop.
TRIG32_MAX = 8192.0


@njit(cache=True, inline='always', error_model='numpy')
def _quadrant32(x):
    """(z, q): |x| = q pi/4 + z, q in {0, 2, 4, 6}; NaN gives q = 0 and z NaN."""
    ax = abs(x)
    # (a NaN must not reach the int conversion, whose result LLVM leaves undefined)
    j = np.int32((ax if ax == ax else F32(0.0)) * F32(1.27323954473516))
    j = j + (j & 1)
    y = F32(j)
    z = ((ax - y * F32(0.78515625)) - y * F32(2.4187564849853515625e-4)) \
        - y * F32(3.77489497744594108e-8)
    return z, j & 7


@njit(cache=True, inline='always', error_model='numpy')
def _sinpoly32(z, zz):
    return ((F32(-1.9515295891e-4) * zz + F32(8.3321608736e-3)) * zz
            - F32(1.6666654611e-1)) * zz * z + z


@njit(cache=True, inline='always', error_model='numpy')
def _cospoly32(zz):
    return ((F32(2.443315711809948e-5) * zz - F32(1.388731625493765e-3)) * zz
            + F32(4.166664568298827e-2)) * zz * zz - F32(0.5) * zz + F32(1.0)


@njit(cache=True, inline='always', error_model='numpy')
def sin32(x):
    z, q = _quadrant32(x)
    zz = z * z
    r = _cospoly32(zz) if q & 2 else _sinpoly32(z, zz)
    r = -r if q & 4 else r
    return np.copysign(F32(1.0), x) * r     # odd (and -0.0 stays -0.0)


@njit(cache=True, inline='always', error_model='numpy')
def cos32(x):
    z, q = _quadrant32(x)
    zz = z * z
    r = _sinpoly32(z, zz) if q & 2 else _cospoly32(zz)
    return -r if (q + 2) & 4 else r


@njit(cache=True, error_model='numpy')
def trig32_ok(x):
    """Is every element of the float32 array x NaN or within +-TRIG32_MAX?"""
    bad = 0
    for i in range(x.shape[0]):
        bad += 1 if abs(x[i]) > F32(TRIG32_MAX) else 0
    return bad == 0


# --- sinh and cosh from vexp32: (e +- 1/e) / 2 with e = exp(|x|) up to |x| = 9,
# beyond it e^|x| / 2 as (e/2) e with e = exp(|x| / 2), which stays finite up to
# float32's own overflow (cosh(89) is finite, exp(89) is not).  sinh below 1 is
# Cephes sinhf's odd polynomial (the difference would cancel there).  ~3 ulp.
@njit(cache=True, inline='always', error_model='numpy')
def _exp_half_sum32(ax, sgn):
    e = vexp32(ax if ax < F32(9.0) else F32(0.0))
    h = vexp32(ax * F32(0.5))
    return F32(0.5) * (e + sgn / e) if ax < F32(9.0) else (F32(0.5) * h) * h


@njit(cache=True, inline='always', error_model='numpy')
def cosh32(x):
    r = _exp_half_sum32(abs(x), F32(1.0))
    return r if x == x else x


@njit(cache=True, inline='always', error_model='numpy')
def sinh32(x):
    ax = abs(x)
    z = x * x
    p = ((F32(2.03721912945e-4) * z + F32(8.33028376239e-3)) * z
         + F32(1.66667160211e-1)) * z * x + x
    r = np.copysign(_exp_half_sum32(ax, F32(-1.0)), x)
    r = p if ax < F32(1.0) else r
    return r if x == x else x


# formula helper (its float64 kernel name) -> its float32 version
HELPERS32 = {'vexp': 'vexp32', 'sigmoid': 'sigmoid32', 'erf': 'erf32', 'eq': 'eq32',
             'ge': 'ge32', 'where_pos': 'where_pos32', 'inv0': 'inv0_32', 'zero': 'zero32',
             'step': 'step32', 'sign': 'sign32', 'abs': 'abs', 'math.sqrt': 'sqrt32',
             'sinh': 'sinh32', 'cosh': 'cosh32', 'math.sin': 'sin32', 'math.cos': 'cos32'}
# float32 versions exact only within a range of their argument: a kernel that
# uses them first checks its argument array (name -> the checking function)
GUARDED32 = {'sin32': 'trig32_ok', 'cos32': 'trig32_ok'}
