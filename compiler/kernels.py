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


@intrinsic
def _float_bits(typingctx, x):
    """The int64 bit pattern of the float64 ``x``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


# FreeBSD/Sun's s_erf.c coefficients, numerator then denominator (without its
# leading 1), low order first, zero-padded to one length (padding at the high
# end leaves Horner's result unchanged): |x| < 0.84375 in z = x*x ...
_ERF_P0 = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
           -5.77027029648944159157e-03, -2.37630166566501626084e-05, 0.0, 0.0, 0.0)
_ERF_Q0 = (3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
           1.32494738004321644526e-04, -3.96022827877536812320e-06, 0.0, 0.0, 0.0)
# ... 0.84375 <= |x| < 1.25 in s = |x| - 1 ...
_ERF_P1 = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
           3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03, 0.0)
_ERF_Q1 = (1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
           1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02,
           0.0, 0.0)
# ... 1.25 <= |x| < 1/0.35 and 1/0.35 <= |x| < 6 in t = 1/x^2
_ERF_P2 = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
           -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
           -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_ERF_Q2 = (1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
           6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
           6.57024977031928170135e+00, -6.04244152148580987438e-02)
_ERF_P3 = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
           -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
           -4.83519191608651397019e+02, 0.0)
_ERF_Q3 = (3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
           3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
           -2.24409524465858183362e+01, 0.0)


@njit(cache=True, inline='always', error_model='numpy')
def _erf_rational(m0, m1, m2, v):
    """P(v) / Q(v) with the coefficients of the range the masks pick (selects)."""
    p = 0.0
    q = 0.0
    for k in range(7, -1, -1):
        a0 = _ERF_P0[k] if m0 else (_ERF_P1[k] if m1 else (_ERF_P2[k] if m2 else _ERF_P3[k]))
        b0 = _ERF_Q0[k] if m0 else (_ERF_Q1[k] if m1 else (_ERF_Q2[k] if m2 else _ERF_Q3[k]))
        p = p * v + a0
        q = q * v + b0
    return p / (1.0 + q * v)


@njit(cache=True, inline='always', error_model='numpy')
def verf(x):
    """erf(x) in plain arithmetic, within 1 ulp of math.erf.

    math.erf is a scalar libm call (~6 ns an element, no SVML here).  This is
    FreeBSD/Sun's s_erf.c (the rational approximations glibc uses too): its
    four ranges of |x| (< 0.84375, < 1.25, < 6 in two fits, >= 6) share one
    rational whose variable and coefficients are chosen with selects, exp is
    vexp: no call and no branch, so LLVM vectorizes the loop around it (one
    division for the rational instead of four).  NaN falls through every
    comparison into the last fit, where vexp carries it; +-inf gives +-1."""
    ax = abs(x)
    m0 = ax < 0.84375
    m1 = ax < 1.25
    m2 = ax < 2.857142857142857
    inv = 1.0 / ax
    v = x * x if m0 else (ax - 1.0 if m1 else inv * inv)
    r = _erf_rational(m0, m1, m2, v)
    # one exp of the rounded -x*x + r - 0.5625, not s_erf.c's two with x*x split
    # exactly: that split keeps erfc's relative error small, but here the
    # exponential is at most 0.08 of a result near 1, so its argument's rounding
    # (under 8 ulp of 2**-50 relative) stays far below erf's last bit
    big = 1.0 - vexp(r - 0.5625 - ax * ax) * inv
    big = 8.45062911510467529297e-01 + r if m1 else big
    big = 1.0 if ax >= 6.0 else big
    big = math.copysign(big, x)
    return x + x * r if m0 else big         # odd: keeps -0.0


@njit(cache=True, inline='always', error_model='numpy')
def erf(x):
    # verf: the sweep's and the chunk kernels' gelu and erf backward vectorize
    return verf(x)


@njit(cache=True, error_model='numpy')
def digamma(x):
    # PyTorch's conventions: -inf at +0 (inf at -0), NaN at the negative integers.
    # No recursion: a recursive function that Numba compiles for float32 and
    # float64 crashed the process when loaded back from its cache=True cache.
    x = np.float64(x)
    if x == 0.0:
        return math.copysign(math.inf, -x)
    if x != x:
        return x
    shift = 0.0
    if x < 0.0:
        if x == np.floor(x):
            return math.nan
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x), tan's period taken
        # off exactly (x - round(x) is exact; x - floor(x) rounds to 1 for a
        # tiny negative x, whose pi / tan(pi x) is 1 / x)
        shift = math.pi / math.tan(math.pi * (x - np.rint(x)))
        x = 1.0 - x
    s = 0.0
    while x < 10.0:
        s -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    return s + math.log(x) - 0.5 / x - z * (1.0 / 12 - z * (1.0 / 120 - z * (
        1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132))))) - shift


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


@njit(cache=True, error_model='numpy')
def erf_array(x):
    """math.erf over a flat float64 array (NumPy has no erf)."""
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = verf(x[i])
    return out


@njit(cache=True, error_model='numpy')
def ndtri(p):
    # The inverse of the standard normal CDF.  Acklam's rational approximation
    # (relative error 1.2e-9), then one Halley step on Phi(x) - p with Phi from
    # erfc, which keeps its relative precision in the lower tail: erfinv(2p - 1)
    # cancels there (1e-16 gave -8.2095, -inf below ~1e-17; PyTorch's Cephes
    # gives -8.2221).  The upper half is -ndtri(1 - p).
    if p != p or p < 0.0 or p > 1.0:
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    if p > 0.5:
        return -ndtri(1.0 - p)
    if p < 0.02425:
        q = math.sqrt(-2.0 * math.log(p))
        x = (((((-7.784894002430293e-03 * q - 3.223964580411365e-01) * q
                - 2.400758277161838e+00) * q - 2.549732539343734e+00) * q
              + 4.374664141464968e+00) * q + 2.938163982698783e+00) / \
            ((((7.784695709041462e-03 * q + 3.224671290700398e-01) * q
               + 2.445134137142996e+00) * q + 3.754408661907416e+00) * q + 1.0)
    else:
        q = p - 0.5
        r = q * q
        x = (((((-3.969683028665376e+01 * r + 2.209460984245205e+02) * r
                - 2.759285104469687e+02) * r + 1.383577518672690e+02) * r
              - 3.066479806614716e+01) * r + 2.506628277459239e+00) * q / \
            (((((-5.447609879822406e+01 * r + 1.615858368580409e+02) * r
                - 1.556989798598866e+02) * r + 6.680131188771972e+01) * r
              - 1.328068155288572e+01) * r + 1.0)
    # Halley: u = (Phi(x) - p) / phi(x), written as (Phi/p - 1) * p / phi(x) so
    # that p / phi(x) = sqrt(2 pi) exp(log p + x^2 / 2) stays finite for any p
    e = 0.5 * math.erfc(-x / math.sqrt(2.0)) / p - 1.0
    u = e * 2.5066282746310002 * math.exp(math.log(p) + 0.5 * x * x)
    return x - u / (1.0 + 0.5 * x * u)


@njit(cache=True, error_model='numpy')
def special_array(which, x, n):
    """lgamma (0), digamma (1), erfc (2), erfinv (3), polygamma(n) (4), ndtri (5)
    over a flat float64 array (NumPy has none of them)."""
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
        elif which == 5:
            out[i] = ndtri(v)
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


@njit(cache=True)
def topk_rows(x, k, largest):
    """Per row of the 2-d ``x``, the indices of its ``k`` largest (or smallest)
    values, best first, ties in index order: the first k of a stable sort
    (descending for largest), as tape sorts.  One pass per row keeping the k
    best in order (an insertion into k slots, which a random element mostly
    skips after one comparison) instead of sorting the whole row.  No NaN:
    the caller sorts rows that hold one."""
    rows, n = x.shape
    out = np.empty((rows, k), np.int64)
    vals = np.empty(k, x.dtype)
    for r in range(rows):
        m = 0
        for j in range(n):
            v = x[r, j]
            if m == k:
                # strictly better than the k-th: an equal value comes later in index order
                if (v <= vals[k - 1]) if largest else (v >= vals[k - 1]):
                    continue
                p = k - 1
            else:
                p = m
                m += 1
            while p > 0 and ((v > vals[p - 1]) if largest else (v < vals[p - 1])):
                vals[p] = vals[p - 1]
                out[r, p] = out[r, p - 1]
                p -= 1
            vals[p] = v
            out[r, p] = j
    return out


# --- float32 forwards of erf and gelu (tape/_elementwise.py): a float32 input is
# read and written as float32 (no float64 copy of the array and no cast back),
# with an erf that is accurate far beyond float32's precision but costs a
# polynomial instead of verf's exponentials and divisions.
#
# Chebyshev fits (converted to monomials in t in [-1, 1]) of erf(x) / x in
# t = 2 x^2 - 1 for |x| < 1, and of erf(x) in t = 2 (|x| - c) on [c - 1/2, c + 1/2]
# for c = 1.5, 2.5, 3.5; at |x| >= 4, erf(x) rounds to +-1 in float32.  Largest
# error against math.erf: about 1e-10 (the float32 half-ulp is 3e-8 near 1),
# so the float32 result is the correctly rounded erf(x) except at ties that
# close.  Low order first, zero-padded to one length.
_ERF32_C0 = (0.9654687386698851, -0.14053608901552916, 0.019852496688085655,
             -0.002285485656955489, 0.00021751716322686266, -1.7536824684909303e-05,
             1.2233626223434182e-06, -7.55749298919945e-08, 4.138775483420064e-09, 0.0, 0.0)
_ERF32_C1 = (0.9661051464673418, 0.05946514334760407, -0.044598857882589674,
             0.017344025852710776, -0.0027874354175763004, -0.00046471382745879355,
             0.00030200055906357746, -3.672784072911802e-05, -9.286222830663488e-06,
             3.008616227672344e-06, -3.852685581685881e-08)
_ERF32_C2 = (0.9995930479842078, 0.0010891421591440586, -0.0013614277630208732,
             0.0010437603273665253, -0.0005388970524732941, 0.00019117187307088627,
             -4.3732345365342215e-05, 4.22716520036481e-06, 1.0297115426867608e-06,
             -4.792870216156922e-07, 6.672773367180457e-08)
_ERF32_C3 = (0.9999992569015663, 2.699714544833801e-06, -4.724494024028442e-06,
             5.2869146525351905e-06, -4.232414312870797e-06, 2.5662765230764205e-06,
             -1.2145374054392624e-06, 4.54274504403894e-07, -1.342367114046977e-07,
             3.035956019658633e-08, -4.176303425951928e-09)


@njit(cache=True, inline='always', error_model='numpy')
def erf32(x):
    """erf(x) (float64 in and out) to about 1e-10, for results rounded to float32.

    Plain arithmetic with selects (no call, no branch, no division), so a loop
    over it vectorizes.  NaN stays NaN, +-inf gives +-1, -0.0 stays -0.0."""
    ax = abs(x)
    m0 = ax < 1.0
    m1 = ax < 2.0
    m2 = ax < 3.0
    t = 2.0 * x * x - 1.0 if m0 else 2.0 * (ax - (1.5 if m1 else (2.5 if m2 else 3.5)))
    p = 0.0
    for k in range(10, -1, -1):
        c = _ERF32_C0[k] if m0 else (_ERF32_C1[k] if m1 else (
            _ERF32_C2[k] if m2 else _ERF32_C3[k]))
        p = p * t + c
    big = 1.0 if ax >= 4.0 else p
    r = x * p if m0 else math.copysign(big, x)
    return r if x == x else x


@njit(cache=True, error_model='numpy')
def erf_f32_array(x, out):
    """out = erf(x) over flat float32 arrays."""
    for i in range(x.shape[0]):
        out[i] = erf32(np.float64(x[i]))


@njit(cache=True, error_model='numpy')
def gelu_f32_array(x, out):
    """out = 0.5 x (1 + erf(x / sqrt 2)) over flat float32 arrays (computed in
    float64, rounded once)."""
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        out[i] = 0.5 * v * (1.0 + erf32(v * 0.7071067811865475))


@njit(cache=True, error_model='numpy')
def gelu_f64_array(x, out):
    """out = 0.5 x (1 + erf(x / sqrt 2)) over flat float64 arrays, in one pass:
    the same operations, in the same order, as the NumPy form and the rule's
    forward formula (``0.5 * a * (1.0 + erf(a * 0.7071067811865475))``)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = 0.5 * v * (1.0 + verf(v * 0.7071067811865475))


# --- one-pass tails of NumPy forwards (tape/_elementwise.py): NumPy keeps the
# transcendental (its SIMD exp/tanh/expm1/log1p), one compiled pass does the
# rest, in the arrays' own dtype with the constants passed in that dtype, so
# each element gets the same float operations as the NumPy expression it
# replaces, without its temporaries (and without np.where, which takes ~4 ns an
# element).  Flat C-contiguous arrays.

@njit(cache=True, error_model='numpy')
def gelu_tanh_inner(x, k, c, u):
    """u = c * (x + k * x * x * x)  (the argument of gelu's tanh)."""
    for i in range(x.shape[0]):
        v = x[i]
        u[i] = c * (v + k * v * v * v)


@njit(cache=True, error_model='numpy')
def gelu_tanh_outer(x, h, one, t):
    """t = h * x * (one + t)  (t holds tanh of the argument; in place)."""
    for i in range(x.shape[0]):
        t[i] = h * x[i] * (one + t[i])


@njit(cache=True, error_model='numpy')
def silu_tail(x, e):
    """e = x * (1 / (1 + e))  (e holds exp(-x); in place)."""
    one = e.dtype.type(1.0)
    for i in range(x.shape[0]):
        e[i] = x[i] * (one / (one + e[i]))


@njit(cache=True, error_model='numpy')
def elu_tail(x, alpha, e):
    """e = x where x > 0, else alpha * e  (e holds expm1(min(x, 0)); in place)."""
    for i in range(x.shape[0]):
        v = x[i]
        e[i] = v if v > 0 else alpha * e[i]


@njit(cache=True, error_model='numpy')
def even_weights_rows(x, v, w):
    """Per row i of the 2-d x: w[i, j] = 1 / (number of ties) where x[i, j] ties
    the row's extreme v[i] (is NaN, for a NaN v), else 0.  The ratio is taken in
    float64 and stored in w's dtype, as ``(tie / count).astype(dtype)`` does."""
    m, n = x.shape
    for i in range(m):
        t = v[i]
        nan = t != t
        c = 0
        for j in range(n):
            xj = x[i, j]
            if (xj != xj) if nan else (xj == t):
                c += 1
        r = 1.0 / c
        for j in range(n):
            xj = x[i, j]
            w[i, j] = r if ((xj != xj) if nan else (xj == t)) else 0.0
