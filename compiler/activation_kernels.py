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
from numba import njit

from compiler.softmax_kernels import _fma, exp32

F32 = np.float32


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
    for i in range(x.shape[0]):
        out[i] = exp32(x[i])


@njit(cache=True, error_model='numpy')
def sigmoid32_fwd(x, out):
    """1 / (1 + exp(-x)): exp(-x) overflows to inf below -89, giving 0."""
    for i in range(x.shape[0]):
        out[i] = F32(1.0) / (F32(1.0) + exp32(-x[i]))


@njit(cache=True, error_model='numpy')
def silu32_fwd(x, out):
    """x / (1 + exp(-x)), one rounding fewer than x * sigmoid(x); -inf gives
    -inf / inf = NaN, as PyTorch's."""
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
    for i in range(x.shape[0]):
        v = x[i]
        vc = F32(14.5) if v > F32(14.5) else v
        vc = F32(-14.5) if vc < F32(-14.5) else vc
        out[i] = v * _phi32(vc)
