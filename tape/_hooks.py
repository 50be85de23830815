"""Tensor hooks and ``retain_grad``.

A hook on a non-leaf lives on its tape, keyed by the record that made the
tensor: the gradient of that tensor is complete exactly when the reverse sweep
reaches its producer, so the sweep stops there, Python runs the hooks (a
returned tensor replaces the gradient for everything upstream) and the sweep
resumes.  A hook on a leaf lives on the leaf and runs before accumulation
into ``.grad``.  Hooks are kept on the tape, not the tensor, so that (as in
PyTorch) they still run after the Python tensor object is gone.
"""
import weakref

import numpy as np

from ._tensor import Tensor, _leaf


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""
    __slots__ = ('_hooks', '_fn')

    def __init__(self, hooks, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self):
        fns = self._hooks
        for i, f in enumerate(fns):
            if f is self._fn:
                del fns[i]
                return

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _apply(fns, g, shape, where):
    for fn in list(fns):
        r = fn(g)
        if r is not None:
            if not isinstance(r, Tensor):
                raise TypeError(f'hook on {where} returned a {type(r).__name__}; a hook must '
                                'return None or a Tensor')
            if tuple(r._data.shape) != tuple(shape):
                raise RuntimeError(f'hook on {where} returned a gradient of shape '
                                   f'{tuple(r._data.shape)}; expected {tuple(shape)}')
            g = r
    return g


class SlotHooks:
    """The hooks (and retain_grad target) of one non-leaf tensor, by its slot."""
    __slots__ = ('slot', 'size', 'shape', 'dtype', 'fns', 'retain', 'name')

    def __init__(self, t):
        self.slot = t._goff
        self.size = t._data.size
        self.shape = t._data.shape
        self.dtype = t._data.dtype
        self.fns = []
        self.retain = None       # weakref to the tensor whose .grad to fill

    def run_compiled(self, grads):
        s = self.slot
        g = _leaf(grads.get(s, self.size, self.shape).astype(self.dtype))
        new = _apply(self.fns, g, self.shape, 'a non-leaf tensor')
        if new is not g:
            grads.set(s, self.size, new._data)
        self._retain(new, copy=True)

    def run_differentiable(self, g_flat):
        from . import _ops
        g = _ops.reshape(g_flat, self.shape)
        new = _apply(self.fns, g, self.shape, 'a non-leaf tensor')
        self._retain(new, copy=False)
        return _ops.reshape(new, -1)

    def _retain(self, g, copy):
        t = self.retain() if self.retain is not None else None
        if t is None:
            return
        if t._grad is None:
            t._grad = _leaf(np.array(g._data, copy=True)) if copy else g
        else:
            from . import _ops
            t._grad = _ops.add(t._grad, g) if not copy else _leaf(t._grad._data + g._data)

    def shift(self, shift):
        from ._tape import shift_slot
        self.slot = shift_slot(self.slot, shift)


def _slot_hooks(t):
    from ._tape import resolve
    tape = t._tape
    if tape.alias is not None:
        tape = resolve(t)
    if tape.hooks is None:
        tape.hooks = {}
    per_rec = tape.hooks.setdefault(t._rec, {})
    h = per_rec.get(t._goff)
    if h is None:
        h = per_rec[t._goff] = SlotHooks(t)
    return h


def register_hook(t, fn):
    """Register ``fn(grad)`` to run when ``t``'s gradient is computed.

    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x * 2
    >>> h = y.register_hook(lambda g: g * 10)
    >>> y.sum().backward()
    >>> x.grad
    tensor([20., 20.])
    """
    if not t._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._tape is None:
        if t._extra is None:
            t._extra = {}
        fns = t._extra.setdefault('hooks', [])
    else:
        fns = _slot_hooks(t).fns
    fns.append(fn)
    return RemovableHandle(fns, fn)


def retain_grad(t):
    """Keep the gradient of non-leaf ``t`` in ``t.grad`` at the next backward."""
    if not t._rg:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if t._tape is None:
        return
    _slot_hooks(t).retain = weakref.ref(t)
    if t._extra is None:
        t._extra = {}
    t._extra['retain_grad'] = True


def run_leaf_hooks(leaf, g):
    """Apply ``leaf``'s hooks to gradient Tensor ``g``; returns the gradient to accumulate."""
    extra = leaf._extra
    if extra is None or not extra.get('hooks'):
        return g
    return _apply(extra['hooks'], g, leaf._data.shape, 'a leaf tensor')
