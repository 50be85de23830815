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


# formula helper (its float64 kernel name) -> its float32 version
HELPERS32 = {'vexp': 'vexp32', 'sigmoid': 'sigmoid32', 'erf': 'erf32', 'eq': 'eq32',
             'ge': 'ge32', 'where_pos': 'where_pos32'}
