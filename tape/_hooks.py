"""Tensor hooks and ``retain_grad``.

A hook on a non-leaf lives on its tape, keyed by the record that made the
tensor: the gradient of that tensor is complete exactly when the reverse sweep
reaches its producer, so the sweep stops there, Python runs the hooks (a
returned tensor replaces the gradient for everything upstream) and the sweep
resumes.  A hook on a leaf lives on the leaf and runs before accumulation
into ``.grad``.  Hooks are kept on the tape, not the tensor, so that (as in
PyTorch) they still run after the Python tensor object is gone.

Node hooks (``grad_fn.register_hook``) ride on the same stops; they live in
tape/_node_hooks.py.
"""
import itertools
import weakref

import numpy as np

from ._tape import grad_mode, set_grad_mode
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


def _apply(fns, g, shape, where, grad_enabled=False):
    """Run hooks ``fns`` on gradient ``g`` in turn; a returned tensor replaces it.

    Hooks run with recording off, as PyTorch's engine runs them, unless the
    backward builds a graph (``grad_enabled``: create_graph)."""
    prev = grad_mode.enabled
    set_grad_mode(grad_enabled)
    # a graph a hook builds under enable_grad (an autograd.grad of its own) starts a
    # tape of its own, not the one the backward is running over
    open_before = grad_mode.open_tape
    grad_mode.open_tape = None
    try:
        for fn in list(fns):
            r = fn(g)
            if r is not None:
                if g is None:       # (an output nothing used: see SlotHooks.run_unused)
                    raise RuntimeError("can't replace a None gradient with a non-None value")
                # PyTorch's messages (``where``: which tensor's hook, for the reader)
                name = getattr(fn, '__name__', type(fn).__name__)
                if not isinstance(r, Tensor):
                    raise TypeError(f"expected Variable, but hook returned "
                                    f"'{type(r).__name__}' (hook on {where})")
                if tuple(r._data.shape) != tuple(shape):
                    raise RuntimeError(f"hook '{name}' has changed the size of value (hook on "
                                       f"{where}: got shape {tuple(r._data.shape)}, expected "
                                       f"{tuple(shape)})")
                if np.result_type(r._data) != np.result_type(g._data):
                    raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                                       f"{np.result_type(g._data)} got "
                                       f"{np.result_type(r._data)})")
                g = r
    finally:
        set_grad_mode(prev)
        grad_mode.open_tape = open_before
    return g


class SlotHooks:
    """The hooks (and retain_grad target) of one non-leaf tensor, by its slot.

    ``node``: the hooks of the node that produced the tensor (NodeHooks), on the
    SlotHooks of each output of that record.  ``exact``: whether ``shape`` is the
    tensor's own (False when only a node, which knows a size, registered it)."""
    __slots__ = ('slot', 'size', 'shape', 'dtype', 'fns', 'retain', 'name', 'node', 'exact',
                 'seq', '__weakref__')

    def __init__(self, t, slot=-1, size=0, shape=(), dtype=np.float64, exact=True):
        if t is not None:
            slot, size, shape, dtype = t._goff, t._data.size, t._data.shape, t._data.dtype
        self.slot = slot
        self.size = size
        self.shape = shape
        self.dtype = dtype
        self.exact = exact
        self.fns = []
        self.retain = None       # weakref to the tensor whose .grad to fill
        self.node = None
        # when the tensor's first hook was registered: the hooks of a node's
        # outputs run tensor by tensor in this order (PyTorch keeps one
        # pre-hook per output on the node, added at its first registration)
        self.seq = None

    def run_compiled(self, grads, tape=None, k=-1, R=None, V=None, A=None, run_node=True):
        """Run this tensor's hooks at the sweep's stop at record k; then, if the
        record has node hooks (and ``run_node``: the sweep runs the record, which
        it does not for the record that made an ``autograd.grad`` input when
        nothing below leads to an input), run the record itself and return True
        (the sweep resumes below it)."""
        node = self.node
        if node is not None and node.spans:
            # outputs with records of their own (split's pieces): at the first
            # of their stops the sweep meets (the highest reached one, unless
            # that record is off the path to autograd.grad's inputs), where
            # every output's gradient is complete (their users come after them
            # all), the outputs' tensor hooks (PyTorch runs a node's tensor
            # pre-hooks together, before its own hooks), then the node's hooks;
            # the other outputs' stops have nothing left to run
            ran = node.ran
            if ran is not None and ran() is grads:
                return False
            node.ran = weakref.ref(grads)
            for h in in_hook_order(node.holders):
                if grads.reached(h.slot):
                    h._run_tensor_hooks(grads)
                else:
                    h.run_unused()
            if tape is None or not run_node or not (node.pre or node.post):
                return False
        elif node is None or tape is None or not run_node or not (node.pre or node.post):
            self._run_tensor_hooks(grads)
            return False
        else:
            self._run_tensor_hooks(grads)
            if len(node.holders) > 1:
                # a Function with several outputs: once, after the last reached one's hooks
                reached = [h for h in node.holders if grads.reached(h.slot)]
                if reached[-1] is not self:
                    return False
        from ._node_hooks import run_node
        open_before = grad_mode.open_tape
        grad_mode.open_tape = None          # (as in _apply: the hooks' own graphs)
        try:
            run_node(node, grads, tape, k, R, V, A)
        finally:
            grad_mode.open_tape = open_before
        return True

    def _run_tensor_hooks(self, grads):
        if self.fns or self.retain is not None:
            s = self.slot
            g = _leaf(grads.get(s, self.size, self.shape).astype(self.dtype))
            had = bool(self.fns)        # (a hook may remove itself while it runs)
            new = _apply(self.fns, g, self.shape, 'a non-leaf tensor')
            if had:
                # g is a copy: a hook may have changed it in place (g.clamp_())
                grads.set(s, self.size, new._data)
            self._retain(new, copy=True)

    def run_unused(self):
        """The hooks of an output nothing used, when its node runs: PyTorch calls
        them with None (and refuses a gradient one returns)."""
        if self.fns:
            _apply(self.fns, None, self.shape, 'a non-leaf tensor')

    def run_differentiable(self, g_flat):
        from . import _ops
        g = _ops.reshape(g_flat, self.shape)
        new = _apply(self.fns, g, self.shape, 'a non-leaf tensor', grad_enabled=True)
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


_registered = itertools.count()


def run_unused_outputs(tape, row, per_rec, reached):
    """At the stop of a custom Function's record ``row`` that runs (an output of it
    was reached): the hooks of its outputs nothing used get None, as PyTorch's do.
    (Run before the used outputs' hooks, not among them in registration order.)"""
    from ._rules import OP
    from ._big import BIG_FLAG
    if (row[0] & ~BIG_FLAG) != OP['python']:
        return
    idle = [h for h in per_rec.values() if h.fns and not reached(h.slot)]
    if idle and any(s >= 0 and reached(s) for s in tape.py[row[6]].out_slots):
        for h in idle:
            h.run_unused()


def in_hook_order(holders):
    """SlotHooks of one node's outputs in the order their first hooks were
    registered; those with none (a retain_grad alone) last."""
    return sorted(holders, key=lambda h: (h.seq is None, h.seq or 0))


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
        from ._node_hooks import nodes_last
        nodes_last(per_rec)
    elif not h.exact:           # made for a node hook: now the tensor's shape is known
        h.shape, h.dtype, h.exact = t._data.shape, t._data.dtype, True
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
        runner = t._extra.get('accumulate_hooks')
        if runner is not None and any(f is runner for f in fns):
            # tensor hooks run before the AccumulateGrad node's hooks, as in PyTorch
            fns.insert(next(i for i, f in enumerate(fns) if f is runner), fn)
            return RemovableHandle(fns, fn)
    else:
        h = _slot_hooks(t)
        if h.seq is None:
            h.seq = next(_registered)
            if h.node is None and t._tape.names is not None:     # (resolved above)
                from ._node_hooks import span_node_of
                span_node_of(t, t._tape)
        fns = h.fns
    fns.append(fn)
    return RemovableHandle(fns, fn)


def register_post_accumulate_grad_hook(t, fn):
    """Register ``fn(t)`` to run after a backward has accumulated into leaf
    ``t``'s ``.grad`` (PyTorch's hook for stepping an optimizer in backward)."""
    if t._tape is not None:
        raise RuntimeError('post accumulate grad hooks cannot be registered on non-leaf '
                           'tensors')
    if not t._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._extra is None:
        t._extra = {}
    fns = t._extra.setdefault('post_accumulate', [])
    fns.append(fn)
    return RemovableHandle(fns, fn)


def run_post_accumulate_hooks(leaf):
    """After ``leaf.grad`` was written by a backward: its post-accumulate hooks."""
    fns = leaf._extra.get('post_accumulate') if leaf._extra is not None else None
    if not fns or leaf._extra.pop('post_accumulate_ran', False):
        return      # (or already run by the AccumulateGrad node's hooks, in PyTorch's order)
    prev = grad_mode.enabled
    set_grad_mode(False)
    open_before = grad_mode.open_tape
    grad_mode.open_tape = None          # (as in _apply)
    try:
        for fn in list(fns):
            if fn(leaf) is not None:
                raise RuntimeError('Tensor post accumulate grad hooks should return None.')
    finally:
        set_grad_mode(prev)
        grad_mode.open_tape = open_before


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


def run_leaf_hooks(leaf, g, grad_enabled=False, tensor_hooks_only=False):
    """Apply ``leaf``'s hooks to gradient Tensor ``g``; returns the gradient to accumulate.

    ``tensor_hooks_only``: skip the AccumulateGrad node's hooks (``autograd.grad``
    runs a leaf's tensor hooks but accumulates nothing)."""
    extra = leaf._extra
    if extra is None or not extra.get('hooks'):
        return g
    fns = extra['hooks']
    if tensor_hooks_only:
        runner = extra.get('accumulate_hooks')
        fns = [f for f in fns if f is not runner]
    return _apply(fns, g, leaf._data.shape, 'a leaf tensor', grad_enabled)
