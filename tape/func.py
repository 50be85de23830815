"""Function transforms: differentiate a Python function by decorating it.

The same engine as ``backward`` and ``autograd.grad``, in the style of JAX and
HIPS autograd: the decorated function runs eagerly (Python control flow and
all), its ops are recorded, and one compiled sweep gives the gradient.

>>> import tape
>>> @tape.func.grad
... def f(x):
...     return (x ** 3).sum()
>>> f(tape.tensor([1.0, 2.0]))
tensor([ 3., 12.])
>>> tape.func.grad(tape.func.grad(lambda x: x ** 3))(tape.tensor(2.0))
tensor(12.)
"""
import functools
import threading

import numpy as np

from . import autograd
from ._grad_mode import enable_grad
from ._tensor import Tensor, _leaf

__all__ = ['grad', 'value_and_grad', 'vjp']


class _Depth(threading.local):
    n = 0                 # how many transforms are evaluating their function now


_depth = _Depth()


def _as_input(x):
    """A fresh leaf that requires grad, keeping x's graph when x has one (for
    nested transforms)."""
    if isinstance(x, Tensor):
        if x._rg:
            return x
        return _leaf(x._data).requires_grad_()
    arr = np.asarray(x, dtype=np.float64) if not np.issubdtype(np.asarray(x).dtype,
                                                                 np.floating) else np.asarray(x)
    return _leaf(arr).requires_grad_()


def _argnums(argnums):
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def value_and_grad(fn, argnums=0):
    """``fn``'s value and its gradient with respect to the ``argnums`` arguments.

    ``fn`` must return a one-element tensor.  The gradient is itself
    differentiable, so transforms nest (second derivatives and beyond).
    """
    nums = _argnums(argnums)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        args = list(args)
        for i in nums:
            args[i] = _as_input(args[i])
        with enable_grad():
            _depth.n += 1             # a transform inside fn must keep its graph
            try:
                out = fn(*args, **kwargs)
            finally:
                _depth.n -= 1
            if not isinstance(out, Tensor) or out._data.size != 1:
                raise TypeError(f'{fn.__name__}: grad needs a function returning a one-element '
                                f'tensor, got {type(out).__name__} of shape '
                                f'{tuple(np.shape(getattr(out, "_data", out)))}')
            inputs = [args[i] for i in nums]
            if not out._rg:
                grads = tuple(_leaf(np.zeros_like(x._data)) for x in inputs)
            else:
                # inside another transform the gradient must itself be differentiable
                grads = autograd.grad(out, inputs, create_graph=_depth.n > 0,
                                      allow_unused=True, materialize_grads=True)
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        return out, g
    return wrapped


def grad(fn, argnums=0):
    """The gradient of ``fn`` (a one-element result) with respect to argument
    ``argnums`` (an int, or a tuple for several)."""
    vg = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return vg(*args, **kwargs)[1]
    return wrapped


def vjp(fn, *primals):
    """``(fn(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` gives one gradient per primal.

    >>> import tape
    >>> y, pullback = tape.func.vjp(lambda x: x * x, tape.tensor([1.0, 3.0]))
    >>> pullback(tape.ones(2))
    (tensor([2., 6.]),)
    """
    inputs = [_as_input(p) for p in primals]
    with enable_grad():
        out = fn(*inputs)

    def pullback(cotangent):
        return autograd.grad(out, inputs, grad_outputs=cotangent, retain_graph=True,
                             allow_unused=True, materialize_grads=True)
    return out.detach(), pullback
