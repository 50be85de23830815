"""Graph nodes for ``grad_fn``: made on demand, so recording never pays for them.

A node is a view of one tape record.  Its class is named as PyTorch names the
node (``MulBackward0``); ``next_functions`` follows the record's input slots
to the records (or leaves) that produced them.  Nodes are cached per tape
(weakly), so asking twice gives the same object, as in PyTorch.
"""
import struct
import weakref

import numpy as np

from ._big import BIG_FLAG
from ._composite_nodes import entry as names_entry, primary as names_primary
from ._rules import OP, RULES, TWO_INPUT_KINDS
from ._tape import STALE, resolve

_BROADCAST = OP['broadcast']
_PYTHON = OP['python']
# rules PyTorch shows with a second, constant input: x + 2 is AddBackward0((x), (None));
# 2 - x is RsubBackward1((x)) alone
_SCALAR_SECOND = {OP[n] for n in ('add_scalar', 'sub_scalar', 'mul_scalar', 'div_scalar')}
# ... and div(2, x): DivBackward0((None), (x))
_SCALAR_FIRST = {OP['rdiv_scalar']}
_CAT_ROOTS = {OP['cat'], OP['stack']}
_COUNT_SHIFT = 40           # a cat record's field 7: wb | count << 40 (tape/_rules.py)
_classes = {}
_UNPACK_RAW = struct.Struct('8q').unpack_from


# PyTorch's nodes written in C++ by hand (not generated from derivatives.yaml)
# give their namespace in name(), though their type is named plainly
_CPP_NAMES = {n: 'torch::autograd::' + n for n in ('CopySlices', 'CopyBackwards')}


class Node:
    """The backward of one record, as ``tensor.grad_fn`` shows it."""
    __slots__ = ('_tape', '_rec', '_hint', '__weakref__')

    def __init__(self, tape, rec):
        self._tape = tape
        self._rec = rec
        self._hint = None       # (slot, shape, dtype) of the tensor it was asked from

    @property
    def metadata(self):
        """A dict of the user's, kept with the record: nodes are made on demand and
        cached weakly, so the dict lives on the tape (``Tape.meta``), not here."""
        tape, rec = self._tape, self._rec
        while tape.alias is not None and tape.alias is not STALE:
            rec += tape.rshift
            tape = tape.alias
        meta = tape.meta
        if meta is None:
            meta = tape.meta = {}
        d = meta.get(rec)
        if d is None:
            d = meta[rec] = {}
        return d

    def name(self):
        n = type(self).__name__
        return _CPP_NAMES.get(n, n)

    def __repr__(self):
        return f'<{type(self).__name__} object at {id(self):#x}>'

    def _fields(self):
        return self._tape.record(self._rec)

    def _input_slots(self):
        return input_slots(self._tape, self._rec)

    @property
    def next_functions(self):
        return tuple(_producer(self._tape, s) for s in joined_slots(self._tape, self._rec)[0])

    def __call__(self, *grads):
        return _apply_node(self, grads)

    def apply(self, *grads):
        return _apply_node(self, grads)

    def register_hook(self, fn):
        """Call ``fn(grad_inputs, grad_outputs)`` after this node's backward; a returned
        tuple replaces ``grad_inputs``.  Returns a handle with ``remove()``."""
        from ._node_hooks import register_node_hook
        return register_node_hook(self, fn, post=True)

    def register_prehook(self, fn):
        """Call ``fn(grad_outputs)`` before this node's backward; a returned tuple
        replaces ``grad_outputs``.  Returns a handle with ``remove()``."""
        from ._node_hooks import register_node_hook
        return register_node_hook(self, fn, post=False)

    # the values the node saved for its backward, under PyTorch's names
    _SAVED_NAMES = {'_saved_self': 'a', '_saved_other': 'b', '_saved_result': 'out'}

    def __getattr__(self, name):
        key = Node._SAVED_NAMES.get(name)
        if key is None and name in ('_saved_exponent', '_saved_scalar'):
            key = 'c'
        if key is None:
            raise AttributeError(f'{type(self).__name__!r} object has no attribute {name!r}')
        return _saved_value(self, key, name)


class AccumulateGrad:
    """The node that accumulates into a leaf's ``.grad``."""
    __slots__ = ('variable', '__weakref__')
    next_functions = ()

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return 'torch::autograd::AccumulateGrad'      # (PyTorch's C++ node, namespaced)

    def __repr__(self):
        return f'<AccumulateGrad object at {id(self):#x}>'

    def register_hook(self, fn):
        """``fn((), (grad,))`` after the gradient is accumulated into ``variable.grad``."""
        from ._node_hooks import register_accumulate_hook
        return register_accumulate_hook(self, fn, post=True)

    def register_prehook(self, fn):
        """``fn((grad,))`` before accumulation; a returned tuple replaces the gradient."""
        from ._node_hooks import register_accumulate_hook
        return register_accumulate_hook(self, fn, post=False)


_VIEW = OP['view']


def _node_class(name):
    cls = _classes.get(name)
    if cls is None:
        cls = _classes[name] = type(name, (Node,), {'__slots__': ()})
    return cls


def _node_name(tape, rec):
    if tape.names is not None:
        e = names_entry(tape, rec)      # a composite op's (tape/_composite_nodes.py)
        if e is not None:
            return e.name
    op, out, n, g0, g1, v, ax, x = tape.record(rec)
    if op == _PYTHON:
        return tape.py[ax].cls._backward_name
    if op == _VIEW and x:
        return 'ToCopyBackward0'        # a dtype cast (tape/_ops.py to)
    return RULES[op].node


def node(tape, rec):
    if tape.names is not None:
        rec = names_primary(tape, rec)[0]     # (one node of several outputs)
    nodes = tape.nodes
    if nodes is None:
        nodes = tape.nodes = weakref.WeakValueDictionary()
    nd = nodes.get(rec)
    if nd is None:
        nd = _node_class(_node_name(tape, rec))(tape, rec)
        nodes[rec] = nd
    return nd


def node_for(t):
    tape = t._tape
    if tape.alias is not None:
        tape = resolve(t)
    nd = node(tape, t._rec)
    if nd._hint is None:
        # the one place a node learns its output's shape (records know sizes only)
        nd._hint = (t._goff, t._data.shape, t._data.dtype)
    return nd


def output_index(t):
    """Which output of its record graph tensor ``t`` is (a custom Function's
    outputs are numbered; every other record has one)."""
    tape = t._tape
    if tape.alias is not None:
        tape = resolve(t)
    op, out, n, g0, g1, v, ax, x = tape.record(t._rec)
    if op == _PYTHON:
        slots = tape.py[ax].out_slots
        if t._goff in slots:
            return slots.index(t._goff)
    if tape.names is not None:
        return names_primary(tape, t._rec)[1]
    return 0


def input_slots(tape, rec):
    """The gradient slots of record ``rec``'s inputs, one per ``next_functions`` entry
    (-1 where an input needs no gradient)."""
    op, out, n, g0, g1, v, ax, x = tape.record(rec)
    if op == _PYTHON:
        return list(tape.py[ax].in_slots)
    rule = RULES[op]
    if rule.kind == 'elementwise':
        slots = [g0, g1][:len(rule.inputs)]
        if op in _SCALAR_SECOND:
            slots.append(-1)
        elif op in _SCALAR_FIRST:
            slots.insert(0, -1)
        return slots
    if rule.kind in TWO_INPUT_KINDS:
        return [g0, g1]
    return [g0]


def joined_slots(tape, rec):
    """(input slots, inner records) of record ``rec`` as its node shows them.

    A cat of more than two tensors is a balanced tree of two-input records
    (tape/_shapes.py); its root's node lists the tensors themselves, as
    PyTorch's CatBackward0 does, so the inner records (count 0 in field 7) are
    looked through.  Each half of a tree of ``count`` inputs joins
    ``count // 2`` and the rest; a half that needs no gradient has slot -1 and
    stands for that many inputs.  A composite op's result (tape/_composite_nodes.py):
    its arguments' slots, and the records its call appended before it.  Other
    records: input_slots, no inner ones."""
    if tape.names is not None:
        e = names_entry(tape, rec)
        if e is not None:
            return list(e.slots), list(e.inner)
    op, out, n, g0, g1, v, ax, x = tape.record(rec)
    if op == _PYTHON:
        prec = tape.py[ax]
        return [prec.in_slots[i] for i in prec.shown_inputs()], []
    if op not in _CAT_ROOTS:
        return input_slots(tape, rec), []
    count = x >> _COUNT_SHIFT
    if count <= 2:
        return [g0, g1][:max(count, 1)], []
    R = np.frombuffer(bytes(tape.rec), np.int64).reshape(-1, 8)
    slots, inner = [], []

    def walk(slot, cnt, below):
        if cnt == 1 or slot < 0:
            slots.extend([slot] * cnt)
            return
        k = _record_of_slot(tape, R[:below], slot)
        inner.append(k)
        walk(int(R[k, 3]), cnt // 2, k)
        walk(int(R[k, 4]), cnt - cnt // 2, k)

    walk(g0, count // 2, rec)
    walk(g1, count - count // 2, rec)
    return slots, inner


def accumulate_node(leaf):
    """The leaf's AccumulateGrad node, made on first look.  It is kept in the
    leaf's ``_acc_node``, not in ``_extra``: a leaf with ``_extra`` (hooks,
    views) leaves the recording, delivery and optimizer fast paths, and a
    look at ``next_functions`` must not slow the training steps after it
    (it made an MLP step 2.2x slower)."""
    nd = leaf._acc_node
    if nd is None:
        nd = leaf._acc_node = AccumulateGrad(leaf)
    return nd


def _producer(tape, slot):
    """(node, output index) of whatever produced gradient slot ``slot``."""
    if slot < 0:
        return (None, 0)
    for leaf, s in tape.leaves:
        if s == slot:
            return (accumulate_node(leaf), 0)
    outs = np.frombuffer(bytes(tape.rec), np.int64).reshape(-1, 8)
    k = _record_of_slot(tape, outs, slot)
    if k is None:
        return (None, 0)
    op = int(outs[k, 0]) & ~BIG_FLAG
    if op == _BROADCAST:        # implicit broadcasting: PyTorch shows the input itself
        return _producer(tape, int(outs[k, 3]))
    index = 0
    if op == _PYTHON:
        index = tape.py[int(outs[k, 6])].out_slots.index(slot)
    return (node(tape, k), index)


def _record_of_slot(tape, R, slot):
    for k in range(len(R) - 1, -1, -1):
        op = int(R[k, 0]) & ~BIG_FLAG
        if op == _PYTHON:
            if slot in tape.py[int(R[k, 6])].out_slots:
                return k
        elif R[k, 1] == slot:
            return k
    return None


def _saved_value(nd, key, name):
    """What record nd saved under ``key`` ('a', 'b', 'out' or the constant 'c')."""
    from ._big import BIG_FLAG as _flag
    from ._sweep import SECOND_BACKWARD
    from ._tensor import _leaf
    tape = nd._tape
    op, out, n, g0, g1, v, ax, x = tape.record(nd._rec)
    rule = RULES[op]
    if key == 'c':
        if 'c' not in rule.consts:
            raise AttributeError(f'{type(nd).__name__!r} object has no attribute {name!r}')
        raw = _UNPACK_RAW(tape.rec, nd._rec * 64)
        return np.frombuffer(np.int64(raw[7]).tobytes(), np.float64)[0].item()
    if rule.kind != 'elementwise' or key not in rule.saves:
        raise AttributeError(f'{type(nd).__name__!r} object has no attribute {name!r}')
    if tape.is_dead(nd._rec):
        raise RuntimeError(SECOND_BACKWARD)
    raw_op = _UNPACK_RAW(tape.rec, nd._rec * 64)[0]
    if raw_op & _flag:
        meta = tape.big[v]
        packs = getattr(meta, 'packs', None)
        if packs and key in packs:
            from ._saved_hooks import unpacked_value
            return _leaf(unpacked_value(*packs[key], meta.saved[key]))
        return _leaf(meta.saved[key])
    offset = v + rule.saves.index(key) * n
    pos = tape.freed[0] if tape.freed is not None else 0
    packs = getattr(tape.saved, 'packs', None)      # (saved-tensor hooks)
    for i, arr in enumerate(tape.saved):          # the saved arrays keep their shapes
        if pos == offset:
            if packs and i in packs:
                from ._saved_hooks import unpacked_value
                return _leaf(unpacked_value(*packs[i], arr))
            return _leaf(arr)
        pos += np.size(arr)
    raise RuntimeError(SECOND_BACKWARD)


def _apply_node(nd, grads):
    """Call one node's backward: gradients for its inputs, as tensors."""
    from . import _ops
    from ._differentiable import _record_vjp
    from ._sweep import pack
    from ._tensor import Tensor, _leaf
    tape = nd._tape
    R, V, A = pack(tape)
    RF = R.view(np.float64)
    op, out, n, g0, g1, v, ax, x = tape.record(nd._rec)
    named = names_entry(tape, nd._rec) if tape.names is not None else None
    if op == _PYTHON and named is None:
        # a custom Function's node returns its backward's result as is (one the
        # library names after PyTorch's op is called as that op's, below)
        from ._grad_mode import enable_grad
        rec = tape.py[ax]
        with enable_grad():
            res = rec.cls.backward(rec.ctx, *grads)
        if not rec.cls.__module__.startswith('tape.'):
            return res
        # the library's own Function (softmax, cross_entropy, nll_loss...):
        # PyTorch's node gives a gradient per next_functions entry, and one
        # gradient alone rather than a tuple of one
        res = res if isinstance(res, tuple) else (res,)
        shown = [res[i] for i in rec.shown_inputs()]
        return shown[0] if len(shown) == 1 else tuple(shown)
    if tape.is_dead(nd._rec):
        from ._sweep import SECOND_BACKWARD
        raise RuntimeError(SECOND_BACKWARD)
    outs = named.outs if named is not None and named.outs else ((nd._rec, out),)
    acc = {}
    for (_k, s), g in zip(outs, grads):
        if g is not None:
            acc[s] = _ops.reshape(g if isinstance(g, Tensor) else _leaf(np.asarray(g)), -1)
    leaf_of = {s: leaf for leaf, s in tape.leaves}
    slots, inner = joined_slots(tape, nd._rec)
    # the record, then the records below it (a cat's tree, a composite op's
    # records, a node's other outputs) from the last down
    for k in sorted(set(inner) | {nd._rec}, reverse=True):
        _record_vjp(tape, k, R, RF, V, A, acc, leaf_of)
    result = []
    for i, s in enumerate(slots):
        # (a zero-size input that shares its slot has a key of its own there)
        gi = acc.get(('empty', s), acc.get(s)) if s >= 0 else None
        if gi is not None and s in leaf_of:
            gi = _ops.reshape(gi, leaf_of[s]._data.shape)
        elif gi is not None and named is not None:
            gi = _ops.reshape(gi, named.shapes[i])  # (its arguments' shapes)
        result.append(gi)
    return tuple(result) if len(result) != 1 else result[0]
