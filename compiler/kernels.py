"""Scalar helpers that derivative formulas may call, compiled by Numba.

The names match ``tape._rules.FORMULA_FUNCS``; ``tape/_differentiable.py``
holds the Tensor versions of the same functions.  They are inlined into the
generated sweep, so they cost nothing per call.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.extending import intrinsic


@njit(cache=True, inline='always', error_model='numpy')
def step(x):
    return 1.0 if x > 0.0 else 0.0


@njit(cache=True, inline='always', error_model='numpy')
def sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return 0.0 * x          # keeps NaN a NaN


@njit(cache=True, inline='always', error_model='numpy')
def ge_half(x, y):
    if x > y:
        return 1.0
    if x == y:
        return 0.5
    return 0.0


@njit(cache=True, inline='always', error_model='numpy')
def pow_grad(x, y):
    # small integer exponents by multiplication: libm pow costs ~20 ns an element
    if y == 0.0:
        return 0.0
    if y == 1.0:
        return 1.0
    if y == 2.0:
        return 2.0 * x
    if y == 3.0:
        return 3.0 * x * x
    return y * x ** (y - 1.0)


@njit(cache=True, inline='always', error_model='numpy')
def xlogy_safe(out, x):
    if x == 0.0 and out <= 1.0:
        return 0.0
    return out * math.log(x)


@intrinsic
def _bits_as_float(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits`` (no libm, vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(cache=True, inline='always', error_model='numpy')
def vexp(x):
    """exp(x) in plain arithmetic, within a few ulps of math.exp.

    Numba compiles math.exp to a scalar libm call (~6 ns an element, there is no
    SVML here); this form has no call and no branch, so LLVM vectorizes the loop
    around it.  x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two so k ln2 is
    exact), exp(r) by its Taylor series to r**13 (error < 1e-16 on that
    interval), times 2**k built from its bits, in two halves so that results
    from 2**-1074 (subnormals) up to inf are reached.  NaN stays NaN."""
    # selects, not min/max (whose NaN handling branches): NaN gives k = 0 and
    # is carried by r
    xc = -746.0 if x < -746.0 else x
    xc = 710.0 if xc > 710.0 else xc
    k = np.floor((xc if xc == xc else 0.0) * 1.4426950408889634 + 0.5)
    r = (xc - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
        1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (
            1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 + r * (
                1.0 / 479001600 + r * (1.0 / 6227020800)))))))))))))
    ki = np.int64(k)
    k1 = ki >> 1
    k2 = ki - k1
    return p * _bits_as_float((k1 + 1023) << 52) * _bits_as_float((k2 + 1023) << 52)


@njit(cache=True, inline='always', error_model='numpy')
def sigmoid(x):
    # vexp, not math.exp: silu's and softplus's backward over a large tensor then
    # run as one vectorized loop instead of a libm call per element
    return 1.0 / (1.0 + vexp(-x))


@njit(cache=True, inline='always', error_model='numpy')
def sinh(x):
    return math.sinh(x)


@njit(cache=True, inline='always', error_model='numpy')
def cosh(x):
    return math.cosh(x)


@njit(cache=True, inline='always', error_model='numpy')
def erf(x):
    return math.erf(x)


@njit(cache=True, error_model='numpy')
def digamma(x):
    # PyTorch's conventions: -inf at +0 (inf at -0), NaN at the negative integers
    if x == 0.0:
        return math.copysign(math.inf, -x)
    if x != x:
        return x
    if x < 0.0:
        if x == np.floor(x):
            return math.nan
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        r = math.pi / math.tan(math.pi * (x - np.floor(x)))
        return digamma(1.0 - x) - r
    s = 0.0
    while x < 10.0:
        s -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    return s + math.log(x) - 0.5 / x - z * (1.0 / 12 - z * (1.0 / 120 - z * (
        1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132)))))


@njit(cache=True, error_model='numpy')
def polygamma(n, x):
    """The n-th derivative of digamma (n a whole number as a float)."""
    if n == 0.0:
        return digamma(x)
    if x != x:
        return x
    if x <= 0.0 and x == np.floor(x):
        return math.inf if n % 2.0 == 1.0 else -math.inf
    fact = math.gamma(n + 1.0)           # n!
    sgn = 1.0 if n % 2.0 == 1.0 else -1.0       # (-1)**(n+1)
    # psi^(n)(x) = psi^(n)(x + 1) - (-1)**n n! / x**(n+1)
    s = 0.0
    while x < 20.0:
        s += sgn * fact / x ** (n + 1.0)
        x += 1.0
    # asymptotic series: (n-1)!/x^n + n!/(2 x^(n+1)) + sum B_2k (2k+n-1)!/((2k)! x^(2k+n))
    t = math.gamma(n) / x ** n + fact / (2.0 * x ** (n + 1.0))
    b = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6)
    for k in range(1, 8):
        t += b[k - 1] * math.exp(math.lgamma(2.0 * k + n) - math.lgamma(2.0 * k + 1.0)) \
            / x ** (2.0 * k + n)
    return s + sgn * t


@njit(cache=True, error_model='numpy')
def erfinv(y):
    # Giles' single-precision approximation, then two Newton steps on erf
    if y != y or y < -1.0 or y > 1.0:
        return math.nan
    if y == 1.0:
        return math.inf
    if y == -1.0:
        return -math.inf
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    x = p * y
    if abs(y) <= 0.5:
        for _ in range(2):
            x -= (math.erf(x) - y) / (1.1283791670955126 * math.exp(-x * x))
        return x
    # near +-1: Newton on log(erfc(|x|)) = log(1 - |y|) (1 - |y| is exact here)
    q = 1.0 - abs(y)
    x = abs(x)
    lq = math.log(q)
    for _ in range(3):
        e = math.erfc(x)
        x += (math.log(e) - lq) * e / (1.1283791670955126 * math.exp(-x * x))
    return x if y > 0.0 else -x


@njit(cache=True, inline='always', error_model='numpy')
def erfc(x):
    return math.erfc(x)


@njit(cache=True, inline='always', error_model='numpy')
def lgamma(x):
    return math.lgamma(x)


@njit(cache=True, inline='always', error_model='numpy')
def floor(x):
    return np.floor(x)        # math.floor returns an int in Numba (wrong for inf/NaN)


@njit(cache=True, inline='always', error_model='numpy')
def trunc(x):
    return np.trunc(x)


@njit(cache=True, inline='always', error_model='numpy')
def ge(x, y):
    return 1.0 if x >= y else 0.0


@njit(cache=True, inline='always', error_model='numpy')
def eq(x, y):
    return 1.0 if x == y else 0.0


@njit(cache=True, inline='always', error_model='numpy')
def where_pos(cond, x, y):
    return x if cond > 0.0 else y


@njit(cache=True, inline='always', error_model='numpy')
def inv0(x):
    return 1.0 / x if x != 0.0 else 0.0


@njit(cache=True, inline='always', error_model='numpy')
def zero(x):
    return 0.0


# --- helpers only forward formulas call (tape._rules.FWD_ONLY_FUNCS): each is
# the float64 scalar version of the NumPy function the eager op calls, so the
# forward replay (compiler/_replay_generated.py) computes what eager computes.

@njit(cache=True, inline='always', error_model='numpy')
def maximum(x, y):
    # np.maximum: NaN wins; on ties (0.0 and -0.0) the second operand, as NumPy does
    return x if (x > y or x != x) else y


@njit(cache=True, inline='always', error_model='numpy')
def minimum(x, y):
    return x if (x < y or x != x) else y


@njit(cache=True, inline='always', error_model='numpy')
def gt(x, y):
    return 1.0 if x > y else 0.0


@njit(cache=True, inline='always', error_model='numpy')
def ceil(x):
    return np.ceil(x)


@njit(cache=True, inline='always', error_model='numpy')
def rint(x):
    return np.rint(x)           # half to even, as np.round


@njit(cache=True, inline='always', error_model='numpy')
def round_decimals(x, n):
    # np.round(x, n): scale by 10**|n|, round half to even, scale back
    if n >= 0.0:
        f = 10.0 ** n
        return np.rint(x * f) / f
    f = 10.0 ** (-n)
    return np.rint(x / f) * f


@njit(cache=True, inline='always', error_model='numpy')
def exp2(x):
    return np.exp2(x)


@njit(cache=True, inline='always', error_model='numpy')
def fmod(x, y):
    return np.fmod(x, y)


@njit(cache=True, inline='always', error_model='numpy')
def remainder(x, y):
    return np.remainder(x, y)   # the sign of the divisor, as np.remainder (and %)


@njit(cache=True, inline='always', error_model='numpy')
def logaddexp0(y):
    # np.logaddexp(0, y), NumPy's npy_logaddexp with x = 0
    if y == 0.0:
        return 0.6931471805599453
    tmp = -y
    if tmp > 0.0:
        return math.log1p(math.exp(-tmp))
    if tmp <= 0.0:
        return y + math.log1p(math.exp(tmp))
    return tmp                  # NaN


@njit(cache=True, inline='always', error_model='numpy')
def power(x, y):
    # ``array ** y`` for a Python number y: NumPy squares for 2, takes sqrt for
    # 0.5 and the reciprocal for -1 (pow itself would round differently)
    if y == 2.0:
        return x * x
    if y == 0.5:
        return math.sqrt(x)
    if y == -1.0:
        return 1.0 / x
    return x ** y


@njit(cache=True)
def erf_array(x):
    """math.erf over a flat float64 array (NumPy has no erf)."""
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


@njit(cache=True, error_model='numpy')
def special_array(which, x, n):
    """lgamma (0), digamma (1), erfc (2), erfinv (3), polygamma(n) (4) over a flat
    float64 array (NumPy has none of them)."""
    out = np.empty_like(x)
    for i in range(x.size):
        v = x[i]
        if which == 0:
            out[i] = math.lgamma(v)
        elif which == 1:
            out[i] = digamma(v)
        elif which == 2:
            out[i] = math.erfc(v)
        elif which == 3:
            out[i] = erfinv(v)
        else:
            out[i] = polygamma(n, v)
    return out


@njit(cache=True, error_model='numpy')
def recip1p(e):
    """e = 1 / (1 + e) in place, in e's own dtype (the tail of NumPy's sigmoid)."""
    one = e.dtype.type(1.0)
    for i in range(e.shape[0]):
        e[i] = one / (one + e[i])


@njit(cache=True)
def accumulate(dst, G, start):
    """dst += G[start : start + dst.size] (a leaf's .grad from the arena).

    The offset is unsigned so that the loop vectorizes (see compiler/codegen.py).
    """
    u = uint64(start)
    for i in range(uint64(dst.shape[0])):
        dst[i] += G[u + i]


@njit(cache=True)
def depends_on(R, py_row, py_in_at, py_in, py_out_at, py_out, mark, dep):
    """Per record of R (in recording order): does it read a marked slot (fields
    3 and 4; ``mark`` is indexed by slot)?  Its result slot (field 1) is then
    marked too.  When ``py_row`` is not empty, ``py_row[k]`` >= 0 makes record
    k a Python record whose input and output slots are
    ``py_in[py_in_at[j]:py_in_at[j + 1]]`` (likewise out)."""
    for k in range(R.shape[0]):
        j = py_row[k] if py_row.shape[0] > 0 else -1
        if j >= 0:
            d = False
            for i in range(py_in_at[j], py_in_at[j + 1]):
                if py_in[i] >= 0 and mark[py_in[i]]:
                    d = True
            if d:
                for i in range(py_out_at[j], py_out_at[j + 1]):
                    if py_out[i] >= 0:
                        mark[py_out[i]] = 1
            dep[k] = d
        else:
            a = R[k, 3]
            b = R[k, 4]
            if (a >= 0 and mark[a]) or (b >= 0 and mark[b]):
                dep[k] = True
                mark[R[k, 1]] = 1
