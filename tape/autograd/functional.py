"""``tape.autograd.functional``: Jacobians, Hessians and vector products of functions.

As in ``torch.autograd.functional``: each takes a function of tensors and the
point to evaluate at, and builds what it returns from reverse-mode sweeps.

>>> import tape
>>> from tape.autograd.functional import jacobian, hessian
>>> jacobian(lambda x: x ** 2, tape.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
>>> hessian(lambda x: (x ** 3).sum(), tape.tensor([1.0, 2.0]))
tensor([[ 6.,  0.],
        [ 0., 12.]])
"""
import numpy as np

from .._grad_mode import enable_grad
from .._tensor import Tensor, _leaf

__all__ = ['vjp', 'jvp', 'jacobian', 'hessian', 'hvp']


def _tuple(x):
    return ((x,), True) if isinstance(x, Tensor) else (tuple(x), False)


def _prepare(inputs):
    ins, single = _tuple(inputs)
    return tuple(_leaf(x._data).requires_grad_() for x in ins), single


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    from . import grad
    ins, single = _prepare(inputs)
    with enable_grad():
        out = func(*ins)
        gs = grad(out, ins, grad_outputs=v, create_graph=create_graph, allow_unused=True,
                  materialize_grads=True)
    gs = tuple(g if create_graph else g.detach() for g in gs)
    return out.detach(), (gs[0] if single else gs)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick: J v is the gradient, with
    respect to a dummy cotangent u, of (J^T u) . v (reverse mode twice, no
    forward-mode AD needed)."""
    from . import grad
    ins, single = _prepare(inputs)
    vs, _ = _tuple(v) if v is not None else (tuple(_leaf(np.ones_like(x._data)) for x in ins),
                                              False)
    with enable_grad():
        out = func(*ins)
        outs, single_out = _tuple(out)
        us = tuple(_leaf(np.zeros_like(o._data)).requires_grad_() for o in outs)
        gs = grad(outs, ins, grad_outputs=us, create_graph=True, allow_unused=True,
                  materialize_grads=True)
        dot = sum((g * vv).sum() for g, vv in zip(gs, vs))
        jv = grad(dot, us, create_graph=create_graph, allow_unused=True, materialize_grads=True)
    jv = tuple(j if create_graph else j.detach() for j in jv)
    outs = tuple(o.detach() for o in outs)
    return (outs[0] if single_out else outs), (jv[0] if single_out else jv)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy='reverse-mode'):
    """The Jacobian of ``func`` at ``inputs``: shape ``out.shape + in.shape`` (a
    tuple of those for several inputs or outputs), one reverse sweep per output
    element."""
    from . import grad
    ins, single_in = _prepare(inputs)
    with enable_grad():
        outs = func(*ins)
        outs_t, single_out = _tuple(outs)
        result = []
        for o in outs_t:
            rows = [[] for _ in ins]
            for i in range(o._data.size):
                seed = np.zeros(o._data.size, dtype=o._data.dtype)
                seed[i] = 1
                gs = grad(o, ins, grad_outputs=_leaf(seed.reshape(o._data.shape)),
                          retain_graph=True, create_graph=create_graph, allow_unused=True,
                          materialize_grads=True)
                for j, g in enumerate(gs):
                    rows[j].append(g)
            per_in = []
            for j, x in enumerate(ins):
                if rows[j]:
                    from .. import stack
                    block = stack(rows[j]) if create_graph else _leaf(
                        np.stack([g._data for g in rows[j]]))
                    per_in.append(block.reshape(*o._data.shape, *x._data.shape))
                else:
                    per_in.append(_leaf(np.zeros(o._data.shape + x._data.shape)))
            result.append(per_in[0] if single_in else tuple(per_in))
    return result[0] if single_out else tuple(result)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy='reverse-mode'):
    """The Hessian of scalar ``func`` at ``inputs`` (the Jacobian of its gradient)."""
    from . import grad
    ins, single = _prepare(inputs)

    def gradient(*xs):
        out = func(*xs)
        gs = grad(out, xs, create_graph=True, allow_unused=True, materialize_grads=True)
        return gs[0] if single else gs
    return jacobian(gradient, ins[0] if single else ins, create_graph=create_graph)


def hvp(func, inputs, v, create_graph=False, strict=False):
    """``(func(inputs), H v)`` by double backward, without forming H."""
    from . import grad
    ins, single = _prepare(inputs)
    vs, _ = _tuple(v)
    with enable_grad():
        out = func(*ins)
        gs = grad(out, ins, create_graph=True, allow_unused=True, materialize_grads=True)
        dot = sum((g * vv).sum() for g, vv in zip(gs, vs))
        hv = grad(dot, ins, create_graph=create_graph, allow_unused=True, materialize_grads=True)
    hv = tuple(h if create_graph else h.detach() for h in hv)
    return out.detach(), (hv[0] if single else hv)
