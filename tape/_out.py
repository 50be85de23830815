"""PyTorch's ``out=`` argument: a function's result written into a given tensor.

One wrapper (``accepting_out``) gives ``out=`` to the functions of the
``tape`` namespace that PyTorch gives it to (``OUT_FUNCTIONS``): the result is
computed as without ``out``, then written into it (``into_out``).  The
elementwise unary ops take ``out`` themselves (tape/_ops.py ``_unary``), so
that ``tape.tanh(h)`` in a loop pays no extra call.  Tensor methods are not
wrapped: PyTorch's methods take no ``out``.
"""
import builtins
import functools
import inspect
import warnings

import numpy as np

from . import _dtypes
from ._grad_mode import no_grad
from ._tape import grad_mode
from ._tensor import Tensor, _leaf

_NAMES = {'f2': 'Half', 'f4': 'Float', 'f8': 'Double', 'i1': 'Char', 'i2': 'Short',
          'i4': 'Int', 'i8': 'Long', 'u1': 'Byte', 'b1': 'Bool'}


def into_out(result, out, name, *inputs):
    """``result`` written into ``out`` (PyTorch's ``out=``), which is returned;
    ``result`` itself where ``out`` is None.  As PyTorch: no autograd through it,
    no float result into an integer ``out``, a resize (with its warning) where
    the shapes differ.  A tuple result (``sort``'s values and indices) goes into
    a tuple ``out`` of as many tensors, and comes back as the same kind of tuple."""
    if out is None:
        return result
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result) or \
                not builtins.all(isinstance(o, Tensor) for o in out):
            raise TypeError(f"{name}(): argument 'out' must be tuple of {len(result)} Tensors, "
                            f'not {type(out).__name__}')
        _check_grad(name, out, inputs)
        outs = [_write(r, o, name) for r, o in zip(result, out)]
        fields = getattr(type(result), '_fields', None)
        return type(result)(*outs) if fields is not None else tuple(outs)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    _check_grad(name, (out,), inputs)
    return _write(result, out, name)


def _check_grad(name, outs, inputs):
    if grad_mode.enabled and (builtins.any(o._rg for o in outs) or builtins.any(
            isinstance(t, Tensor) and t._rg for t in _flat(inputs))):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _write(result, out, name):
    r = result._data if isinstance(result, Tensor) else np.asarray(result)
    od = np.asarray(out._data)
    if _dtypes.category(r.dtype) > _dtypes.category(od.dtype):     # PyTorch's rule
        raise RuntimeError(f'result type {_NAMES.get(r.dtype.str[1:], r.dtype)} '
                           f"can't be cast to the desired output type "
                           f'{_NAMES.get(od.dtype.str[1:], od.dtype)}')
    with no_grad():
        if od.shape != r.shape:
            if od.size:
                warnings.warn(f'An output with one or more elements was resized since it had '
                              f'shape {list(od.shape)}, which does not match the required '
                              f'output shape {list(r.shape)}.', UserWarning, stacklevel=4)
            out.resize_(*r.shape)
        out.copy_(_leaf(r))
    return out


# The functions of PyTorch's namespace that take out= (torch 2.13's docs), as
# far as tape has them; those that already take it are left as they are.
OUT_FUNCTIONS = (
    'abs acos acosh addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax any '
    'arange argmax argmin argsort asin asinh atan atan2 atanh baddbmm bitwise_and bitwise_not bitwise_or '
    'bitwise_xor bmm bucketize cat ceil clamp clip column_stack concat concatenate copysign '
    'cos cosh cross cummax cummin cumprod cumsum deg2rad diag diff digamma dot dstack empty '
    'eq erf erfc erfinv exp exp2 expm1 eye fix float_power floor floor_divide fmax fmin '
    'frac full gather gcd ge ger greater greater_equal gt heaviside histc hstack hypot '
    'index_add index_copy index_select inner inverse isneginf isposinf kron kthvalue lcm le '
    'lerp less less_equal '
    'lgamma linspace log log10 log1p log2 logaddexp logaddexp2 logcumsumexp logical_and '
    'logical_not logical_or logical_xor logit logspace logsumexp lt masked_select matmul '
    'max min mean median mm mode msort mv mvlgamma nan_to_num nanmean nansum ne neg negative '
    'nonzero norm normal not_equal ones outer polygamma pow prod rad2deg rand randint randn '
    'reciprocal renorm round row_stack rsqrt searchsorted sgn sigmoid sign signbit sin sinc '
    'sinh sort sqrt square stack std sum take take_along_dim tan tanh tensordot topk tril triu trunc '
    'var vdot vstack '
    'where xlogy zeros').split()


def accepting_out(fn, name):
    """``fn`` with PyTorch's keyword-only ``out=``."""
    @functools.wraps(fn)
    def f(*args, out=None, **kw):
        if out is None:
            return fn(*args, **kw)
        return into_out(fn(*args, **kw), out, name, *args, *kw.values())
    return f


def honour_out(namespace, names, prefix=''):
    """``out=`` for the functions ``names`` of ``namespace`` (a module's globals),
    which declare it (as PyTorch's do) but compute without it: each is wrapped to
    write its result into ``out`` (``prefix + name``, less a leading underscore,
    names the op in the errors)."""
    for name in names:
        namespace[name] = accepting_out(namespace[name], prefix + name.lstrip('_'))


def install(namespace):
    """Give ``out=`` to the functions of ``namespace`` (tape's) named in
    OUT_FUNCTIONS that do not take it yet."""
    for name in OUT_FUNCTIONS:
        fn = namespace.get(name)
        if fn is None or not callable(fn):
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if 'out' in params or builtins.any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        namespace[name] = accepting_out(fn, name)
