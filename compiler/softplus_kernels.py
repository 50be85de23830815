"""One-pass float32/float64 forwards of softplus (tape/_elementwise.py).

NumPy's float32 and float64 ``log1p`` on an AVX2 CPU is a scalar libm loop
(~20 ns an element), and ``log1p(exp(beta x))`` took three passes around it.
These loops are straight-line arithmetic and selects, no libm call and no
branch, so LLVM vectorizes them (8 float32 or 4 float64 lanes).

For each element, with y = x * beta rounded in x's dtype (as PyTorch's kernel):

    out = x                                   where y > threshold
    out = (max(y, 0) + log1p(exp(-|y|))) / beta   elsewhere

the overflow-free form of log1p(exp(y)) / beta: the two are the same exactly,
and this one needs log1p only of e = exp(-|y|) in [0, 1].  PyTorch's kernel
computes log1p(exp(y)), which overflows to inf for y above log(max float)
(reachable only with a threshold that large); ``ovf`` is that bound (inf for
no threshold: logsigmoid, BCE-with-logits), above which the result is inf as
PyTorch's.  The division by beta is done where ``divide`` (the caller's
beta != 1).  NaN gives NaN, -inf gives 0 / beta, +inf (above any finite
threshold) gives x, -0.0 gives log 2.

log1p(e), e in [0, 1]: 1 + e = 2**k (1 + f + c) with f = e, c = 0 (k = 0) for
e < sqrt 2 - 1, else f = (e - 1) / 2 rounded and c its rounding error, exact
by an FMA (k = 1), so f in [sqrt(1/2) - 1, sqrt 2 - 1]; then log(1 + f) by
Cephes logf's polynomial (float32) or fdlibm's log kernel (float64), plus
c / (1 + f) ~ c (1 - f) and k ln2 in two parts.  Measured against exact
values: within 1.6 ulp (float32) and 2 ulp (float64) over wide ranges of x,
exp's error included.  ``divide`` is loop-invariant: LLVM unswitches the
loop on it (the division cost ~7% of the float32 loop).

Compiled on first use (``cache=True``), never at import.
"""
import numpy as np
from numba import njit

from compiler.activation_kernels import _wide, exp64, logf_series
from compiler.f64_kernels import _LN2_HI, _LN2_LO, log_series
from compiler.softmax_kernels import _fma, exp32

F32 = np.float32

# the largest y whose exp is finite (NumPy's and PyTorch's exp): above it
# log1p(exp(y)) is inf
LOGMAX32 = 88.72283172607421875
LOGMAX64 = 709.782712893384


@njit(cache=True, inline='always', error_model='numpy')
def _log1p01_32(e):
    """log1p(e) for 0 <= e <= 1 (NaN gives NaN), within ~1 ulp (module docstring)."""
    big = e >= F32(0.41421356)
    f = _fma(e, F32(0.5), F32(-0.5)) if big else e
    c = _fma(e, F32(0.5), F32(-0.5) - f) if big else F32(0.0)
    k = F32(1.0) if big else F32(0.0)
    z = f * f
    y = logf_series(f, z)
    y = _fma(c, F32(1.0) - f, y)
    y = _fma(k, F32(-2.12194440e-4), y)
    y = _fma(F32(-0.5), z, y)
    return _fma(k, F32(0.693359375), f + y)


@njit(cache=True, inline='always', error_model='numpy')
def _log1p01_64(e):
    """log1p(e) for 0 <= e <= 1 (NaN gives NaN), within ~1 ulp: fdlibm's
    log(1 + f) = f - (hfsq - s (hfsq + R(s^2))), s = f / (2 + f), with the
    correction c / (1 + f) added where fdlibm's log1p adds its own."""
    big = e >= 0.41421356237309503
    f = _fma(e, 0.5, -0.5) if big else e
    c = _fma(e, 0.5, -0.5 - f) if big else 0.0
    k = 1.0 if big else 0.0
    s = f / (2.0 + f)
    r = log_series(s)
    hfsq = 0.5 * f * f
    return _fma(k, _LN2_HI, -((hfsq - _fma(s, hfsq + r, _fma(k, _LN2_LO, c * (1.0 - f)))) - f))


@njit(cache=True, error_model='numpy')
def softplus32_fwd(x, beta, threshold, ovf, divide, out):
    """out = x where x * beta > threshold, else softplus(x * beta) / beta (divided
    only when ``divide``; module docstring); x, out flat float32, the scalars float32."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        y = v * beta
        sp = (y if y > F32(0.0) else F32(0.0)) + _log1p01_32(exp32(-abs(y)))
        sp = F32(np.inf) if y > ovf else sp
        sp = sp / beta if divide else sp
        out[i] = v if y > threshold else sp


@njit(cache=True, error_model='numpy')
def softplus64_fwd(x, beta, threshold, ovf, divide, out):
    """softplus32_fwd in float64."""
    _wide()
    for i in range(x.shape[0]):
        v = x[i]
        y = v * beta
        sp = (y if y > 0.0 else 0.0) + _log1p01_64(exp64(-abs(y)))
        sp = np.inf if y > ovf else sp
        sp = sp / beta if divide else sp
        out[i] = v if y > threshold else sp
