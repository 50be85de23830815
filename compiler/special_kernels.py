"""Numba kernels for the modified Bessel functions of the first kind behind
``tape.i0``, ``tape.special.i0e``, ``tape.special.i1`` and ``tape.special.i1e``
(``tape/_functions_more.py``), so that nothing needs SciPy (the incomplete
gamma functions are in ``compiler/special_more_kernels.py``).

They follow PyTorch's CPU kernels (``calc_i0``, ``calc_i0e``, ``calc_i1`` and
``calc_i1e`` in ATen's ``native/Math.h``), which are Cephes' ``i0.c``/``i1.c``:
two Chebyshev expansions (``chbevl``), one of ``exp(-x) I(x)`` on ``[0, 8]``
and one of ``exp(-x) sqrt(x) I(x)`` on ``(8, inf)`` in ``32/x - 2``, evaluated
at ``|x|``; ``i0``/``i0e`` are even, ``i1``/``i1e`` odd (the sign of a
negative ``x`` is put back, so ``-0.0`` gives ``+0.0`` as in torch).  The
arithmetic is in the array's own dtype, float32 with the float32 tables torch
uses (``i1``/``i1e`` drop the leading, negligible, coefficients there), so
float32 results round, overflow (``i0(89.0)`` is ``inf``) and give ``nan`` at
``+-inf`` for ``i0``/``i1`` (``exp(inf) * c / sqrt(inf)``) exactly where
torch's do; ``i0e``/``i1e`` of ``+-inf`` are ``+-0``, and ``nan`` stays
``nan``.

Each kernel reads a flat C-contiguous float32 or float64 array and writes an
output array of the same dtype and size; ``bessel(name, a)`` is the dispatch
for any array.  Nothing compiles at import: the kernels are
``@njit(cache=True)`` and compile (or load from Numba's cache) on first call,
once per dtype.
"""
import math

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import intrinsic

# Cephes' Chebyshev coefficients (3-clause BSD, as in PyTorch), highest order
# first.  exp(-x) I0(x) on [0, 8]:
_I0E_A = np.array([
    -4.41534164647933937950E-18, 3.33079451882223809783E-17,
    -2.43127984654795469359E-16, 1.71539128555513303061E-15,
    -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12,
    -1.72682629144155570723E-11, 9.67580903537323691224E-11,
    -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8,
    -2.67079385394061173391E-7, 1.11738753912010371815E-6,
    -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4,
    -5.76375574538582365885E-4, 1.63947561694133579842E-3,
    -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2,
    -9.49010970480476444210E-2, 1.71620901522208775349E-1,
    -3.04682672343198398683E-1, 6.76795274409476084995E-1])

# exp(-x) sqrt(x) I0(x) on (8, inf), in 32/x - 2:
_I0E_B = np.array([
    -7.23318048787475395456E-18, -4.83050448594418207126E-18,
    4.46562142029675999901E-17, 3.46122286769746109310E-17,
    -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15,
    -9.55484669882830764870E-15, -4.15056934728722208663E-14,
    1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12,
    -1.32158118404477131188E-11, -3.14991652796324136454E-11,
    1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8,
    2.04891858946906374183E-7, 2.89137052083475648297E-6,
    6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1])

# exp(-x) I1(x) / x on [0, 8]:
_I1E_A = np.array([
    2.77791411276104639959E-18, -2.11142121435816608115E-17,
    1.55363195773620046921E-16, -1.10559694773538630805E-15,
    7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12,
    1.17361862988909016308E-11, -6.66348972350202774223E-11,
    3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9, -4.44505912879632808065E-8,
    2.00329475355213526229E-7, -8.56872026469545474066E-7,
    3.47025130813767847674E-6, -1.32731636560394358279E-5,
    4.78156510755005422638E-5, -1.61760815825896745588E-4,
    5.12285956168575772895E-4, -1.51357245063125314899E-3,
    4.15642294431288815669E-3, -1.05640848946261981558E-2,
    2.47264490306265168283E-2, -5.29459812080949914269E-2,
    1.02643658689847095384E-1, -1.76416518357834055153E-1,
    2.52587186443633654823E-1])

# exp(-x) sqrt(x) I1(x) on (8, inf), in 32/x - 2:
_I1E_B = np.array([
    7.51729631084210481353E-18, 4.41434832307170791151E-18,
    -4.65030536848935832153E-17, -3.20952592199342395980E-17,
    2.96262899764595013876E-16, 3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15,
    1.04202769841288027642E-14, 4.27244001671195135429E-14,
    -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,
    1.41258074366137813316E-11, 3.25260358301548823856E-11,
    -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9, -2.63146884688951950684E-8,
    -2.51223623787020892529E-7, -3.88256480887769039346E-6,
    -1.10588938762623716291E-4, -9.76109749136146840777E-3,
    7.78576235018280120474E-1])

# The constants 0, 1/2, 2, 8, 32 in the kernel's dtype (so float32 stays float32).
_CONSTS = np.array([0.0, 0.5, 2.0, 8.0, 32.0])


def _tables(dtype):
    """(i0e A, i0e B, i1e A, i1e B, constants) in ``dtype``, torch's tables."""
    if dtype == np.float64:
        return _TABLES64
    return _TABLES32


_TABLES64 = (_I0E_A, _I0E_B, _I1E_A, _I1E_B, _CONSTS)
_TABLES32 = (_I0E_A.astype(np.float32), _I0E_B.astype(np.float32),
             _I1E_A[-17:].astype(np.float32), _I1E_B[-7:].astype(np.float32),
             _CONSTS.astype(np.float32))


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM's ``llvm.fma``: the FMA instruction, or
    libm's correctly rounded ``fma``), for three floats of one type."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, a, a), codegen


@njit(cache=True, inline='always', error_model='numpy')
def _chbevl(y, coef, zero, half):
    """Cephes' ``chbevl``: the Chebyshev series ``coef`` (highest order first)
    at ``y/2`` (Clenshaw's recurrence).  The step ``y * b1 - b2`` is one fused
    multiply-add, as in torch's build of ``chbevl`` (the C++ compiler contracts
    it): near ``|x| = 8`` (``y = 2``) the recurrence amplifies rounding, and an
    unfused step differs from torch by up to ~2e-15 relative there."""
    b0 = coef[0]
    b1 = zero
    b2 = zero
    for i in range(1, coef.shape[0]):
        b2 = b1
        b1 = b0
        b0 = _fma(y, b1, -b2) + coef[i]
    return half * (b0 - b2)


@njit(cache=True, error_model='numpy')
def i0_kernel(x, out, a, b, c):
    """``out[i] = I0(x[i])``: ``exp(|x|) chbevl(|x|/2 - 2, A)`` for ``|x| <= 8``,
    else ``exp(|x|) chbevl(32/|x| - 2, B) / sqrt(|x|)``."""
    zero, half, two, eight, t32 = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.shape[0]):
        v = abs(x[i])
        if v <= eight:
            out[i] = math.exp(v) * _chbevl(v / two - two, a, zero, half)
        else:
            out[i] = math.exp(v) * _chbevl(t32 / v - two, b, zero, half) / math.sqrt(v)


@njit(cache=True, error_model='numpy')
def i0e_kernel(x, out, a, b, c):
    """``out[i] = exp(-|x[i]|) I0(x[i])``."""
    zero, half, two, eight, t32 = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.shape[0]):
        v = abs(x[i])
        if v <= eight:
            out[i] = _chbevl(v / two - two, a, zero, half)
        else:
            out[i] = _chbevl(t32 / v - two, b, zero, half) / math.sqrt(v)


@njit(cache=True, error_model='numpy')
def i1_kernel(x, out, a, b, c):
    """``out[i] = I1(x[i])``, odd in ``x``."""
    zero, half, two, eight, t32 = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.shape[0]):
        xi = x[i]
        v = abs(xi)
        if v <= eight:
            r = math.exp(v) * v * _chbevl(v / two - two, a, zero, half)
        else:
            r = math.exp(v) * _chbevl(t32 / v - two, b, zero, half) / math.sqrt(v)
        out[i] = -r if xi < zero else r


@njit(cache=True, error_model='numpy')
def i1e_kernel(x, out, a, b, c):
    """``out[i] = exp(-|x[i]|) I1(x[i])``, odd in ``x``."""
    zero, half, two, eight, t32 = c[0], c[1], c[2], c[3], c[4]
    for i in range(x.shape[0]):
        xi = x[i]
        v = abs(xi)
        if v <= eight:
            r = _chbevl(v / two - two, a, zero, half) * v
        else:
            r = _chbevl(t32 / v - two, b, zero, half) / math.sqrt(v)
        out[i] = -r if xi < zero else r


_KERNELS = {'i0': (i0_kernel, 0), 'i0e': (i0e_kernel, 0),
            'i1': (i1_kernel, 2), 'i1e': (i1e_kernel, 2)}


def bessel(name, a):
    """``name`` (``'i0'``, ``'i0e'``, ``'i1'`` or ``'i1e'``) of the array ``a``, as a
    new C-contiguous array of ``a``'s shape and dtype.  float64 and float32 are
    computed in their own dtype; other float dtypes (float16) in float32, as
    torch upcasts them."""
    kernel, k = _KERNELS[name]
    a = np.asarray(a)
    work = np.float64 if a.dtype == np.float64 else np.float32
    flat = np.ascontiguousarray(a, dtype=work).reshape(-1)
    out = np.empty_like(flat)
    t = _tables(work)
    kernel(flat, out, t[k], t[k + 1], t[4])
    with np.errstate(over='ignore'):   # float16: large values round to inf, as torch
        return out.reshape(a.shape).astype(a.dtype, copy=False)
