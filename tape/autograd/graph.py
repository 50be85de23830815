"""``tape.autograd.graph``: the graph's node type, gradient edges, version
bumps and hooks over several tensors, as in ``torch.autograd.graph``.

>>> import tape
>>> from tape.autograd.graph import Node, get_gradient_edge
>>> x = tape.tensor([1.0, 2.0], requires_grad=True)
>>> y = x * x
>>> isinstance(y.grad_fn, Node)
True
>>> edge = get_gradient_edge(y)
>>> edge.node.name(), edge.output_nr
('MulBackward0', 0)
>>> tape.autograd.grad(y.sum(), edge)
(tensor([1., 1.]),)
"""
import abc
import threading
from typing import Any, NamedTuple

from .._graph import AccumulateGrad as _AccumulateGrad
from .._graph import Node as _RecordNode
from .._tensor import Tensor, _bump_version

__all__ = ['Node', 'GradientEdge', 'get_gradient_edge', 'increment_version',
           'register_multi_grad_hook', 'saved_tensors_hooks', 'save_on_cpu',
           'disable_saved_tensors_hooks']


class Node(abc.ABC):
    """The type of every ``grad_fn`` and ``AccumulateGrad`` node.

    The library's nodes are views of tape records (tape/_graph.py) and do not
    inherit from this class; they are registered as its virtual subclasses,
    so ``isinstance(t.grad_fn, Node)`` holds as in PyTorch.  A user class
    that defines ``name``, ``next_functions``, ``register_hook`` and
    ``register_prehook`` counts as a Node too (PyTorch's ``__subclasshook__``).
    """

    @abc.abstractmethod
    def name(self):
        """The node's name, e.g. ``MulBackward0``."""

    @property
    @abc.abstractmethod
    def next_functions(self):
        """``(node, input_nr)`` per input of the node."""

    @abc.abstractmethod
    def register_hook(self, fn):
        """A hook run after the node's backward."""

    @abc.abstractmethod
    def register_prehook(self, fn):
        """A hook run before the node's backward."""

    @classmethod
    def __subclasshook__(cls, C):
        if cls is Node:
            names = ('name', 'next_functions', 'register_hook', 'register_prehook')
            if all(any(n in B.__dict__ for B in C.__mro__) for n in names):
                return True
        return NotImplemented


Node.register(_RecordNode)
Node.register(_AccumulateGrad)


class GradientEdge(NamedTuple):
    """Where a tensor's gradient is computed: its producing node and output index.

    ``tape.autograd.grad(outputs, edge)`` gives the same gradient as passing the
    tensor itself.  ``ownership_token`` keeps the tensor (and so its graph) alive,
    as PyTorch's token keeps the graph alive."""
    node: Any
    output_nr: int
    ownership_token: Any = None


def get_gradient_edge(tensor):
    """The ``GradientEdge`` of ``tensor``: ``(grad_fn, output_nr)`` for a graph
    tensor, ``(AccumulateGrad, 0)`` for a leaf that requires grad."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f'get_gradient_edge(): expected a Tensor, got {type(tensor).__name__}')
    if not tensor.requires_grad:
        raise RuntimeError('It is not possible to get the gradient edge for a Tensor that '
                           'does not require gradients')
    if tensor._tape is None:
        from .._graph import accumulate_node
        return GradientEdge(accumulate_node(tensor), 0, tensor)
    return GradientEdge(tensor.grad_fn, tensor.output_nr, tensor)


def edge_tensor(x):
    """The tensor a ``GradientEdge`` (from ``get_gradient_edge``) stands for; any
    other value as it is (for ``autograd.grad``'s inputs and outputs)."""
    if isinstance(x, GradientEdge):
        t = x.ownership_token
        if not isinstance(t, Tensor):
            if isinstance(x.node, _AccumulateGrad):
                return x.node.variable
            raise RuntimeError('grad(): a GradientEdge made by hand (not by get_gradient_edge) '
                               'names no tensor here; pass the tensor or its edge from '
                               'get_gradient_edge')
        return t
    return x


def increment_version(tensor):
    """Record that ``tensor`` (or each tensor of an iterable) was changed in place
    behind the library's back (through ``.numpy()``, say): a backward through a
    record that saved it then raises PyTorch's "modified by an inplace
    operation" error."""
    tensors = (tensor,) if isinstance(tensor, Tensor) else tuple(tensor)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f'increment_version(): expected Tensors, got {type(t).__name__}')
        _bump_version(t)
        tape = t._tape
        if tape is not None:
            from .._tape import resolve
            tape = resolve(t, move=False)
            if tape.alias is None:
                # records made so far that saved it by reference read stale values
                tape.add_dirty(t._goff, tape.n)
        ext = t._extra
        if ext is not None and ('views' in ext or 'view_tapes' in ext):
            from .. import _views
            _views.mark_dirty(t, t)


class _MultiHandle:
    """The handle ``register_multi_grad_hook`` returns: ``remove()`` removes every
    tensor hook it registered."""
    __slots__ = ('handles',)

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode='all'):
    """Call ``fn`` once per backward with the gradients of several tensors.

    ``mode='all'``: after the backward has computed the gradients of the tensors
    it reaches, ``fn(grads)`` gets one entry per tensor, ``None`` for a tensor
    whose gradient the backward did not compute (off the graph, or not needed
    for the ``inputs`` given).  ``mode='any'``: ``fn(grad)`` with the first of
    their gradients the backward computes.  Returns a handle with ``remove()``.

    Where PyTorch calls an ``'all'`` hook as soon as its last gradient is ready,
    here it runs when the backward call that computed them finishes (its
    arguments are the same).
    """
    from .. import _graph_task
    if mode not in ('all', 'any'):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = list(tensors)
    lock = threading.Lock()
    if mode == 'all':
        buffers = {}            # graph task -> the gradients seen so far

        def inner(idx):
            def hook(grad):
                task = _graph_task.current()
                with lock:
                    buf = buffers.get(task)
                    if buf is None:
                        buf = buffers[task] = [None] * len(tensors)
                        _graph_task.at_end(lambda: fn(buffers.pop(task)))
                buf[idx] = grad
            return hook

        handles = tuple(t.register_hook(inner(i)) for i, t in enumerate(tensors))
    else:
        seen = set()

        def hook(grad):
            task = _graph_task.current()
            with lock:
                if task in seen:
                    return
                seen.add(task)
                _graph_task.at_end(lambda: seen.discard(task))
            fn(grad)

        handles = tuple(t.register_hook(hook) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


from .._saved_hooks import (disable_saved_tensors_hooks, save_on_cpu,  # noqa: E402,F401
                            saved_tensors_hooks)
