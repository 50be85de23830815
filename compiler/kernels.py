"""Scalar helpers that derivative formulas may call, compiled by Numba.

The names match ``tape._rules.FORMULA_FUNCS``; ``tape/_differentiable.py``
holds the Tensor versions of the same functions.  They are inlined into the
generated sweep, so they cost nothing per call.
"""
import math

import numpy as np
from numba import njit, uint64


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


@njit(cache=True, inline='always', error_model='numpy')
def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


@njit(cache=True, inline='always', error_model='numpy')
def sinh(x):
    return math.sinh(x)


@njit(cache=True, inline='always', error_model='numpy')
def cosh(x):
    return math.cosh(x)


@njit(cache=True, inline='always', error_model='numpy')
def erf(x):
    return math.erf(x)


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
