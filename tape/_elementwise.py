"""Elementwise ops beyond the core arithmetic: each is a NumPy forward plus one record.

Ops with a derivative are rows of ``tape/_rules.py``; here they get their
forward.  Most come from the same factories as ``exp`` or ``add``
(``_ops._unary``/``_ops._binary``); ops with a parameter (``leaky_relu``'s
slope, ``clamp``'s bounds) keep it as the record's constant.  Comparisons and
the logical ops return bool tensors and record nothing, as in PyTorch.

>>> import tape
>>> x = tape.tensor([-1.0, 0.5, 2.0], requires_grad=True)
>>> x.clamp(0.0, 1.0)
tensor([0.0000, 0.5000, 1.0000], grad_fn=<ClampBackward1>)
"""
import math

import numpy as np

from ._composite_nodes import node_named
from . import _dtypes
from ._ops import _binary, _broadcast_error, _const, _np_sigmoid, _record_unary, _shape_str, \
    _unary, check_broadcast, empty_for, kernels_of
from ._ops import _TORCH_DTYPE_NAMES
from ._rules import OP
from ._structural import record_where
from ._tape import grad_mode, note_value_use
from ._tensor import Tensor, _leaf

_scalar = (int, float, bool, np.number, np.bool_)


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _const(x, like)


def _flat_kernel(kernel, x):
    """``kernel(flat_x, flat_out)`` over the ndarray ``x``, the result in x's dtype
    and, for a strided x, in NumPy's (and PyTorch's) layout for it."""
    if x.flags.c_contiguous:
        out = empty_for(x)
        kernel(x.reshape(-1), out.reshape(-1))
        return out
    out = np.empty_like(x)
    out[...] = _flat_kernel(kernel, np.ascontiguousarray(x))
    return out


def _np_erf(x):
    if type(x) is np.ndarray and x.dtype == np.float32:
        # float32 in, float32 out: no float64 copy, no cast back (compiler/kernels.py)
        return _flat_kernel(kernels_of('kernels').erf_f32_array, x)
    arr = np.asarray(x)
    flat = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
    out = kernels_of('kernels').erf_array(flat).reshape(arr.shape)
    out = out.astype(arr.dtype if arr.dtype.kind == 'f' else np.float64, copy=False)
    return out if isinstance(x, np.ndarray) else out[()]


def _np_gelu(d):
    """0.5 d (1 + erf(d / sqrt 2)) in d's dtype: one compiled pass for float32
    (float32 arithmetic, a few ulp) and float64 arrays."""
    if type(d) is np.ndarray and d.dtype == np.float32:
        # float32 arithmetic, 8 lanes wide, x Phi(x) through erfc in the tail
        # (compiler/activation_kernels.py): within a few ulp of the exact
        # value, where PyTorch's 1 + erf form cancels for x < 0
        return _flat_kernel(kernels_of('activation_kernels').gelu32_fwd, d)
    if type(d) is np.ndarray and (d.dtype == np.float32 or d.dtype == np.float64):
        k = kernels_of('kernels')
        return _flat_kernel(k.gelu_f32_array if d.dtype == np.float32 else k.gelu_f64_array, d)
    return 0.5 * d * (1.0 + _np_erf(d * (1.0 / math.sqrt(2.0))))


def _np_special(which, n=0.0):
    # lgamma/digamma/erfc/erfinv/polygamma via compiler.kernels.special_array,
    # in float64, returned in the input's float dtype
    def f(x):
        from compiler.kernels import special_array
        arr = np.asarray(x)
        flat = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
        out = special_array(which, flat, float(n)).reshape(arr.shape)
        out = out.astype(arr.dtype if arr.dtype.kind == 'f' else np.float32, copy=False)
        return out if isinstance(x, np.ndarray) else out[()]
    return f


def _keep_int(npf, name):
    """floor/ceil/round/trunc leave integer tensors as they are (NumPy makes floats);
    PyTorch has no bool kernel for them (NumPy would keep the bools)."""
    def f(x):
        kind = np.dtype(x.dtype).kind
        if kind in 'iub':
            if kind == 'b':
                raise NotImplementedError(f'"{name}_vml_cpu" not implemented for \'Bool\'')
            return x
        return npf(x)
    return f


def _quiet(npf):
    # NaN and inf propagate as in PyTorch, without NumPy's RuntimeWarnings
    def f(x):
        with np.errstate(all='ignore'):
            return npf(x)
    return f


# ------------------------------------------------------------------ unary
rsqrt = _unary('rsqrt', _quiet(lambda x: np.reciprocal(np.sqrt(x))))
exp2 = _unary('exp2', _quiet(np.exp2))
expm1 = _unary('expm1', _quiet(np.expm1))
log2 = _unary('log2', _quiet(np.log2))
log10 = _unary('log10', _quiet(np.log10))
log1p = _unary('log1p', _quiet(np.log1p))
tan = _unary('tan', np.tan)
asin = _unary('asin', _quiet(np.arcsin))
acos = _unary('acos', _quiet(np.arccos))
atan = _unary('atan', np.arctan)
sinh = _unary('sinh', _quiet(np.sinh))
cosh = _unary('cosh', _quiet(np.cosh))
erf = _unary('erf', _np_erf)
_erfc = _unary('erfc', _np_special(2))
_erfinv = _unary('erfinv', _np_special(3))
_ndtri = _unary('ndtri', _np_special(5))
_lgamma = _unary('lgamma', _np_special(0))
_digamma = _unary('digamma', _np_special(1))


def _float_in(a):
    # integer inputs give float32 results, as in PyTorch
    a = _t(a)
    if np.dtype(a._data.dtype).kind in 'iub':
        a = _leaf(a._data.astype(np.float32))
    return a


def erfc(a):
    return _erfc(_float_in(a))


def erfinv(a):
    return _erfinv(_float_in(a))


def ndtri(a):
    """The inverse of the standard normal CDF (``torch.special.ndtri``)."""
    return _ndtri(_float_in(a))


def lgamma(a):
    return _lgamma(_float_in(a))


def digamma(a):
    return _digamma(_float_in(a))


def polygamma(n, a):
    """``torch.polygamma(n, x)``: the n-th derivative of digamma (n >= 0)."""
    if hasattr(n, 'item') and getattr(n, 'ndim', 0) == 0:
        n = n.item()                    # (a 0-d tensor or NumPy number, as PyTorch)
    if isinstance(n, bool) or not isinstance(n, (int, float)) or \
            int(n) != n:
        # (a whole float passes: the backward's own calls give n + 1.0)
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    if n < 0:
        raise RuntimeError('polygamma(n, x) does not support negative n.')
    a = _float_in(a)
    out = _np_special(4, float(n))(a._data)
    return _with_const('polygamma', a, out, float(n))
reciprocal = _unary('reciprocal', _quiet(lambda x: np.true_divide(1, x)))


def _fast(d):
    """d is a C-contiguous float32/float64 array large enough for a compiled pass."""
    return type(d) is np.ndarray and d.size >= 256 and d.flags.c_contiguous \
        and (d.dtype == np.float32 or d.dtype == np.float64)


def _np_silu(x):
    if type(x) is np.ndarray and x.dtype == np.float32 \
            and x.flags.c_contiguous:
        # x / (1 + exp(-x)) in one float32 pass (compiler/activation_kernels.py)
        out = empty_for(x)
        kernels_of('activation_kernels').silu32_fwd(x.reshape(-1), out.reshape(-1))
        return out
    if _fast(x):
        # NumPy's exp, then one pass for x * (1 / (1 + e)): the same float operations
        from compiler.kernels import silu_tail
        e = np.negative(x)
        with np.errstate(over='ignore'):
            np.exp(e, out=e)
        silu_tail(x.reshape(-1), e.reshape(-1))
        return e
    return x * _np_sigmoid(x)


_silu = _unary('silu', _np_silu)


def silu(a, inplace=False):
    a = _floats_only(_t(a), 'silu_cpu')
    if inplace:         # (F.silu(x, inplace=True) and nn.SiLU(inplace=True): x changed, returned)
        from ._ops import inplace_apply
        return inplace_apply(a, _silu)
    return _silu(a)
def _np_sign(x):
    if x.dtype.kind == 'b':
        return x.copy()                 # sign of a bool tensor is itself, as PyTorch's
    out = np.sign(x)
    if out.dtype.kind == 'f':
        out = np.where(np.isnan(out), out.dtype.type(0), out)   # sign(NaN) is 0, as in PyTorch
    return out


sign = _unary('sign', _np_sign)
floor = _unary('floor', _keep_int(np.floor, 'floor'))
ceil = _unary('ceil', _keep_int(np.ceil, 'ceil'))
trunc = _unary('trunc', _keep_int(np.trunc, 'trunc'))
_round0 = _unary('round', _keep_int(np.round, 'round'))


def round(a, decimals=0):  # noqa: A001  (torch.round)
    """Round half to even, as PyTorch (and NumPy) do; ``decimals`` as in ``torch.round``."""
    if not decimals:
        return _round0(a)
    a = _t(a)
    if a._data.dtype.kind in 'iub':
        # (PyTorch's round with decimals has float kernels only)
        raise NotImplementedError(f'"round_cpu" not implemented for '
                                  f"'{_TORCH_INT_NAMES[a._data.dtype.name]}'")
    out = np.round(a._data, decimals)
    return _with_const('round_decimals', a, out, float(decimals))


def square(a):
    """``a * a``, recorded as PyTorch does (``a ** 2``)."""
    from ._ops import pow_
    return pow_(_t(a), 2)


_TORCH_INT_NAMES = {'int64': 'Long', 'int32': 'Int', 'int16': 'Short', 'int8': 'Char',
                    'uint8': 'Byte', 'bool': 'Bool'}


def _floats_only(a, kernel):
    """PyTorch's activations have no integer kernels: raise as it does."""
    dt = np.result_type(a._data)
    if dt.kind not in 'fc':
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_TORCH_INT_NAMES.get(dt.name, dt.name)}'")
    return a


def _with_const(name, a, out, c, d=None):
    """Record ``out = name(a)`` with constant c (record field 7) and d (field 6)."""
    if a._rg and grad_mode.enabled:
        return _record_unary(OP[name], a, out, float(c), None if d is None else float(d))
    return _leaf(out)



def leaky_relu(a, negative_slope=0.01, inplace=False):
    a = _floats_only(_t(a), 'leaky_relu_cpu')
    d = a._data
    if _fast(d) and type(negative_slope) in (int, float):
        # one compiled pass: np.where's select branches on the sign of each element
        # (~4 ns an element on real data, 25x PyTorch's time)
        leaky_relu_fwd = kernels_of('activation_kernels').leaky_relu_fwd
        out = np.empty(d.shape, d.dtype)
        with np.errstate(over='ignore'):
            slope = d.dtype.type(negative_slope)
        leaky_relu_fwd(d.reshape(-1), slope, out.reshape(-1))
        return _with_const('leaky_relu', a, out, negative_slope)
    out = np.where(d > 0, d, d * negative_slope)
    return _with_const('leaky_relu', a, out, negative_slope)


def elu(a, alpha=1.0, inplace=False):
    a = _floats_only(_t(a), 'elu_cpu')
    d = a._data
    if _fast(d) and type(alpha) in (int, float):
        # NumPy's expm1, then one pass for the select (no np.where, no temporaries)
        from compiler.kernels import elu_tail
        e = np.minimum(d, 0)
        with np.errstate(all='ignore'):
            np.expm1(e, out=e)
        elu_tail(d.reshape(-1), d.dtype.type(alpha), e.reshape(-1))
        return _with_const('elu', a, e, alpha)
    with np.errstate(all='ignore'):
        out = np.where(d > 0, d, alpha * np.expm1(np.minimum(d, 0)))
    return _with_const('elu', a, out, alpha)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(a, approximate='none'):
    a = _floats_only(_t(a), 'GeluKernelImpl')
    d = a._data
    if approximate == 'tanh':
        if _fast(d):
            # the expression below in three passes (NumPy's tanh in the middle)
            # instead of nine, with the same float operations in d's dtype
            from compiler.kernels import gelu_tanh_inner, gelu_tanh_outer
            T = d.dtype.type
            flat = d.reshape(-1)
            out = np.empty(d.shape, d.dtype)
            u = out.reshape(-1)
            gelu_tanh_inner(flat, T(0.044715), T(_SQRT_2_OVER_PI), u)
            np.tanh(u, out=u)
            gelu_tanh_outer(flat, T(0.5), T(1.0), u)
        else:
            out = 0.5 * d * (1.0 + np.tanh(_SQRT_2_OVER_PI * (d + 0.044715 * d * d * d)))
        name = 'gelu_tanh'
    elif approximate == 'none':
        out = _np_gelu(d)
        name = 'gelu'
    else:
        raise RuntimeError(f"gelu: approximate argument must be either none or tanh, "
                           f"got {approximate!r}")
    out = np.asarray(out, dtype=np.asarray(d).dtype)
    if a._rg and grad_mode.enabled:
        return _record_unary(OP[name], a, out)
    return _leaf(out)


# the largest float32/float64 y whose exp is finite (compiler/softplus_kernels.py)
_SOFTPLUS_OVF = {np.dtype(np.float32): 88.72283172607421875,
                 np.dtype(np.float64): 709.782712893384}


def _softplus_compiled(d, beta, threshold):
    """softplus of a C-contiguous float32/float64 array in one compiled pass
    (compiler/softplus_kernels.py: NumPy's log1p is a scalar libm loop on an
    AVX2 CPU, ~20 ns an element), or None where it does not apply.  Any size:
    the call costs ~1.3 us against NumPy's ~7 us for three ufuncs on 16 elements."""
    if not (type(d) is np.ndarray and d.flags.c_contiguous
            and (d.dtype == np.float32 or d.dtype == np.float64)
            and type(beta) in (int, float) and type(threshold) in (int, float)
            and beta != 0 and math.isfinite(beta)):
        return None
    dt = d.dtype
    if threshold == math.inf:
        ovf = math.inf                  # no threshold: the overflow-free form throughout
    elif abs(threshold) <= np.finfo(dt).max:
        ovf = _SOFTPLUS_OVF[dt]         # PyTorch's log1p(exp(y)) overflows there
    else:
        return None
    k = kernels_of('softplus_kernels')
    fn = k.softplus32_fwd if dt == np.float32 else k.softplus64_fwd
    T = dt.type
    out = empty_for(d)
    fn(d.reshape(-1), T(beta), T(threshold), T(ovf), beta != 1, out.reshape(-1))
    return out


def softplus(a, beta=1.0, threshold=20.0):
    a = _floats_only(_t(a), 'softplus_cpu')
    d = a._data
    dt = np.asarray(d).dtype
    out = _softplus_compiled(d, beta, threshold)
    if out is not None:
        return _with_const('softplus', a, out, beta, threshold)
    with np.errstate(all='ignore'):
        y = d * dt.type(beta) if dt.kind == 'f' else d * beta
        if threshold == math.inf:
            # no threshold (logsigmoid, binary_cross_entropy_with_logits): PyTorch's
            # log_sigmoid form, max(y, 0) + log1p(exp(-|y|)), which cannot overflow
            sp = np.maximum(y, 0) + np.log1p(np.exp(-np.abs(y)))
        else:
            # PyTorch's softplus kernel: x where beta x > threshold, else
            # log1p(exp(beta x)) / beta, in the tensor's dtype (NumPy's SIMD exp and
            # log1p; np.logaddexp has no SIMD loop and rounds differently)
            sp = np.log1p(np.exp(y))
        if beta != 1:
            sp = sp / beta
        out = np.where(y > threshold, d, sp)
    out = np.asarray(out, dtype=dt)
    return _with_const('softplus', a, out, beta, threshold)


def relu6(a):
    return hardtanh(a, 0.0, 6.0)


def hardtanh(a, min_val=-1.0, max_val=1.0):
    a = _t(a)
    d = a._data
    out = np.clip(d, min_val, max_val)
    if np.result_type(d).kind in 'iu':          # PyTorch keeps an integer dtype
        out = out.astype(np.result_type(d))
    return _with_const('hardtanh', a, out, min_val, max_val)


# ------------------------------------------------------------------ clamp
@node_named(lambda a, lo, hi: 'ClampBackward0' if isinstance(lo, Tensor) or isinstance(hi, Tensor)
            else None, 'a', 'min', 'max')
def clamp(a, min=None, max=None):  # noqa: A002  (torch's argument names)
    """Limit ``a`` to [min, max]; the gradient passes where ``min <= a <= max``.

    >>> import tape
    >>> tape.tensor([-2.0, 0.5, 3.0]).clamp(min=0.0)
    tensor([0.0000, 0.5000, 3.0000])
    """
    a = _t(a)
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None "
                           f'(input of shape {tuple(a._data.shape)})')
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(a, min, max)
    d = a._data
    if _fast(d) and type(min) in _BOUND_TYPES and type(max) in _BOUND_TYPES:
        # one compiled pass instead of np.maximum's and np.minimum's two; the
        # bounds in d's dtype, as NumPy compares with a Python number
        fin = float(np.finfo(d.dtype).max)
        lo = -math.inf if min is None else min
        hi = math.inf if max is None else max
        # (not a NaN bound, which makes every element NaN, nor one that overflows d's dtype)
        if all(abs(v) <= fin or v in (math.inf, -math.inf) for v in (lo, hi)):
            out = np.empty(d.shape, d.dtype)
            kernels_of('activation_kernels').clamp_fwd(d.reshape(-1), d.dtype.type(lo),
                                                       d.dtype.type(hi), out.reshape(-1))
            return _with_const('clamp', a, out, lo, hi)
    out = d
    if min is not None:
        out = np.maximum(out, min)
    if max is not None:
        out = np.minimum(out, max)
    if out.dtype is not np.dtype(d.dtype):
        # (the dtype of either bound promotes: an int tensor clamped to (0, 2.5) is float)
        bound = max if type(max) is float or min is None else min
        out = _dtypes.binary_result('clamp', d, bound, out)
    # the bounds go in the record (no gradient where lo > hi: see tape/_rules.py)
    return _with_const('clamp', a, out, -math.inf if min is None else min,
                       math.inf if max is None else max)


_BOUND_TYPES = (int, float, type(None))


def _clamp_tensor(a, lo, hi):
    # torch.clamp with tensor bounds: min(max(a, lo), hi), NaN where a or a bound is
    # NaN (PyTorch's maximum / minimum propagate it).  The gradient goes, as
    # PyTorch's clamp_backward and clamp_backward_min_max send it, to a where
    # lo <= a <= hi, to lo where a < lo < hi, to hi where a > hi or hi < lo, and
    # nowhere else (a NaN, or a outside lo == hi): there the value is a constant.
    note_value_use('clamp')
    check_broadcast('clamp', a, lo, hi)
    lo = None if lo is None else _t(lo, a)
    hi = None if hi is None else _t(hi, a)
    ad = a._data
    ld = None if lo is None else lo._data
    hd = None if hi is None else hi._data
    with np.errstate(invalid='ignore'):
        value = ad
        keep = True
        if lo is not None:
            value = np.where((value < ld) | (ld != ld), ld, value)
            keep = ad >= ld
            to_lo = ad < ld
        if hi is not None:
            value = np.where((value > hd) | (hd != hd), hd, value)
            keep = keep & (ad <= hd)
            to_hi = ad > hd
        if lo is not None and hi is not None:
            to_lo = to_lo & (ld < hd)
            to_hi = to_hi | (hd < ld)
    dt = _dtypes.result_type(*[d for d in (ad, ld, hd) if d is not None])
    y = _leaf(np.asarray(value, dt))
    if hi is not None:
        y = where(to_hi, hi, y)
    if lo is not None:
        y = where(to_lo, lo, y)
    return where(keep, a, y)


@node_named(lambda a, lo: 'ClampMinBackward1' if isinstance(lo, Tensor)
            else ('ClampMinBackward0', 1), 'a', 'min')
def clamp_min(a, min):  # noqa: A002
    return clamp(a, min=min)


@node_named(lambda a, hi: 'ClampMaxBackward1' if isinstance(hi, Tensor)
            else ('ClampMaxBackward0', 1), 'a', 'max')
def clamp_max(a, max):  # noqa: A002
    return clamp(a, max=max)


# ----------------------------------------------------------------- binary
def _np_atan2(y, x):
    # integer and bool operands compute in the default float dtype, as PyTorch
    # does (NumPy would take float16 for bools, float64 for int64)
    if np.result_type(y).kind in 'biu' and np.result_type(x).kind in 'biu':
        y = np.asarray(y, _dtypes.default_dtype[0])
        x = np.asarray(x, _dtypes.default_dtype[0])
    return np.arctan2(y, x)


atan2, _ = _binary('atan2', None, None, _np_atan2)
remainder, rremainder = _binary('remainder', 'remainder_scalar', None, np.remainder)
fmod, _ = _binary('fmod', 'fmod_scalar', None, np.fmod)


# ------------------------------------------------------------------ where
def _bool_mask(cond, opname):
    c = cond._data if isinstance(cond, Tensor) else cond
    c = np.asarray(c)
    if c.dtype != np.bool_ and isinstance(cond, Tensor):
        # PyTorch takes only a bool mask tensor (an array or list may hold 0/1)
        raise RuntimeError(f'{opname}: expected condition to be a boolean tensor, but got a '
                           f'tensor with dtype {c.dtype} (shape {tuple(c.shape)})')
    if c.dtype != np.bool_:
        if c.dtype.kind not in 'iu':
            raise RuntimeError(f'{opname}: expected a bool (or integer) mask, got dtype '
                               f'{c.dtype} (shape {tuple(c.shape)})')
        c = c.astype(np.bool_)
    return c


_WHERE_FROM = 256       # elements: below, np.where's call costs no more than the kernel's


def _where_compiled(c, xd, yd):
    """``np.where(c, xd, yd)`` for a bool mask and two float arrays of one shape
    and dtype, C-contiguous, by one compiled select (compiler/activation_kernels.py:
    np.where takes ~2 ns an element, 16K float32 36 -> 4 us), else None."""
    if type(xd) is not np.ndarray or type(yd) is not np.ndarray:
        return None
    dt = xd.dtype
    if yd.dtype != dt or dt.kind != 'f' or dt.itemsize < 4 or xd.shape != yd.shape \
            or c.shape != xd.shape \
            or xd.size < _WHERE_FROM or not (xd.flags.c_contiguous and yd.flags.c_contiguous
                                             and c.flags.c_contiguous):
        return None
    out = empty_for(xd)
    kernels_of('activation_kernels').where_fwd(c.reshape(-1), xd.reshape(-1), yd.reshape(-1),
                                               out.reshape(-1))
    return out


@node_named(lambda x, y: ('WhereBackward0', 2) if (x is not None or y is not None) and not (
    isinstance(x, Tensor) and isinstance(y, Tensor)) else None, 'input', 'other')
def where(condition, input=None, other=None):  # noqa: A002
    """``input`` where ``condition`` is True, else ``other``; gradients go to the chosen side.

    >>> import tape
    >>> tape.where(tape.tensor([True, False]), tape.tensor([1.0, 2.0]), 0.0)
    tensor([1., 0.])
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    c = _bool_mask(condition, 'where')
    xd = input._data if isinstance(input, Tensor) else input
    yd = other._data if isinstance(other, Tensor) else other
    if not isinstance(xd, _scalar) and not isinstance(xd, np.ndarray):
        xd = np.asarray(xd)
    if not isinstance(yd, _scalar) and not isinstance(yd, np.ndarray):
        yd = np.asarray(yd)
    out = _where_compiled(c, xd, yd)
    if out is not None:
        dt = out.dtype
    else:
        try:
            np.broadcast_shapes(c.shape, np.shape(xd), np.shape(yd))
        except ValueError:
            raise RuntimeError(
                f'where: The size of tensors must match or broadcast: condition '
                f'{_shape_str(c.shape)}, input {_shape_str(np.shape(xd))}, other '
                f'{_shape_str(np.shape(yd))}') from None
        dt = _dtypes.result_type(xd, yd)
        out = np.where(c, xd, yd).astype(dt, copy=False)
    x = input if isinstance(input, Tensor) else _leaf(np.asarray(xd, dt))
    y = other if isinstance(other, Tensor) else _leaf(np.asarray(yd, dt))
    return record_where('where', c, x, y, out)


@node_named(lambda a, v: 'MaskedFillBackward1' if isinstance(v, Tensor)
            else ('MaskedFillBackward0', 1), 'a', 'value')
def masked_fill(a, mask, value):
    """``a`` with ``value`` where ``mask`` is True (mask broadcasts to ``a``)."""
    a = _t(a)
    m = _bool_mask(mask, 'masked_fill')
    d = a._data
    try:
        shape = np.broadcast_shapes(m.shape, d.shape)
    except ValueError:
        shape = None
    if shape is None:
        raise RuntimeError(f'masked_fill: The size of the mask {_shape_str(m.shape)} must be '
                           f'broadcastable to the size of self {_shape_str(d.shape)}')
    if shape != d.shape:
        # out of place, PyTorch broadcasts self and mask together (masked_fill_ still
        # refuses: its output has self's shape)
        a = a.expand(*shape)
        d = a._data
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError('masked_fill only supports a 0-dimensional value tensor, but got '
                               f'tensor with {value._data.ndim} dimension(s).')
        v = value
        vd = np.asarray(value._data, d.dtype)
    else:
        vd = np.asarray(value, d.dtype)
        v = _leaf(vd)
    if type(d) is np.ndarray and d.dtype.kind == 'f' and d.dtype.itemsize >= 4 \
            and d.size >= _WHERE_FROM \
            and m.shape == d.shape and d.flags.c_contiguous and m.flags.c_contiguous:
        # one compiled select, as where's
        out = empty_for(d)
        kernels_of('activation_kernels').fill_where_fwd(m.reshape(-1), d.dtype.type(vd),
                                                        d.reshape(-1), out.reshape(-1))
    else:
        out = np.where(m, vd, d).astype(d.dtype, copy=False)
    return record_where('masked_fill', m, v, a, out)


def nonzero(a, as_tuple=False):
    d = np.asarray(a._data if isinstance(a, Tensor) else a)
    idx = np.nonzero(d if d.ndim else d.reshape(1))
    if as_tuple:
        return tuple(_leaf(i.astype(np.int64)) for i in idx)
    if not d.ndim:      # PyTorch's (1, 0) or (0, 0): one row per nonzero, no columns
        return _leaf(np.zeros((len(idx[0]), 0), np.int64))
    return _leaf(np.stack(idx, axis=1).astype(np.int64))


# ------------------------------------------------- comparisons and logic
def _compare(name, npf):
    def f(a, b):
        if b is None:
            return False if name == 'eq' else True
        note_value_use(name)
        a = _t(a)
        bd = b._data if isinstance(b, Tensor) else b
        try:
            out = npf(a._data, bd)
        except ValueError:
            raise _broadcast_error(name, a, _t(b)) from None
        return _leaf(out)
    f.__name__ = name
    return f


eq = _compare('eq', np.equal)
ne = _compare('ne', np.not_equal)
lt = _compare('lt', np.less)
le = _compare('le', np.less_equal)
gt = _compare('gt', np.greater)
ge = _compare('ge', np.greater_equal)
logical_and = _compare('logical_and', np.logical_and)
logical_or = _compare('logical_or', np.logical_or)
logical_xor = _compare('logical_xor', np.logical_xor)


def _bitwise(name, npf):
    def f(a, b):
        a = _t(a)
        bd = b._data if isinstance(b, Tensor) else b
        try:
            out = npf(a._data, bd)
        except ValueError:
            raise _broadcast_error(name, a, _t(b)) from None
        except TypeError:
            raise NotImplementedError(f'{name}: not implemented for dtypes {a._data.dtype} '
                                      f'and {np.result_type(bd)}') from None
        if isinstance(b, Tensor) and bd.dtype != a._data.dtype:
            # PyTorch's promotion (a 0-d int64 tensor leaves an int8 one int8)
            out = _dtypes.binary_result(name, a._data, bd, out)
        return _leaf(out)
    f.__name__ = name
    return f


bitwise_and = _bitwise('bitwise_and', np.bitwise_and)
bitwise_or = _bitwise('bitwise_or', np.bitwise_or)
bitwise_xor = _bitwise('bitwise_xor', np.bitwise_xor)


def logical_not(a):
    return _leaf(np.logical_not(_t(a)._data))


def bitwise_not(a):
    d = _t(a)._data
    if np.dtype(d.dtype).kind == 'f':
        raise RuntimeError('bitwise_not: not implemented for floating point tensors')
    return _leaf(np.invert(d))


def isnan(a):
    note_value_use('isnan')         # a mask of values: tape.jit must not replay it
    return _leaf(np.isnan(_t(a)._data))


def isinf(a):
    note_value_use('isinf')
    return _leaf(np.isinf(_t(a)._data))


def isfinite(a):
    note_value_use('isfinite')
    return _leaf(np.isfinite(_t(a)._data))


def equal(a, b):
    """True when ``a`` and ``b`` have the same shape and elements."""
    return bool(np.shape(a._data) == np.shape(b._data) and np.array_equal(a._data, b._data))


def _close_args(a, b, rtol, atol):
    """isclose's operands (a Python number takes the tensor's dtype) and PyTorch's
    checks: one dtype (no promotion) and non-negative tolerances."""
    a = _t(a)
    b = _t(b, a)
    if a._data.dtype != b._data.dtype:
        names = [_TORCH_DTYPE_NAMES.get(x._data.dtype.str[1:], str(x._data.dtype))
                 for x in (a, b)]
        raise RuntimeError(f'{names[0]} did not match {names[1]}')
    for name, v in (('rtol', rtol), ('atol', atol)):
        if v < 0:
            raise RuntimeError(f'{name} must be greater than or equal to zero, but got {v}')
    return a, b


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _close_args(a, b, rtol, atol)
    try:
        return bool(np.allclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError:
        raise _broadcast_error('allclose', a, b) from None


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _close_args(a, b, rtol, atol)
    try:
        return _leaf(np.isclose(a._data, b._data, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError:
        raise _broadcast_error('isclose', a, b) from None
