"""PyTorch's node for an op that tape writes in primitives (``mse_loss``, ``addmm``...).

A composite op appends the records of its primitives, so its result's
``grad_fn`` would be its last primitive's (``MeanBackward0`` for ``mse_loss``).
PyTorch shows one node, ``MseLossBackward0``, whose ``next_functions`` are the
op's tensor arguments.  ``node_named`` wraps such an op: after the call it
writes in ``Tape.names``, under the result's record, a ``NodeEntry``: PyTorch's
node name, the gradient slots (-1 for none), shapes and dtypes of the op's
arguments in PyTorch's order, and the records between them and the result,
which the first look at the node finds (the call itself pays ~0.5 us, not a
walk).  A node of several outputs (``split``) keeps its entry under the first
output's record and an ``OutputOf`` under each other output's.
tape/_graph.py reads it: the node's name and ``next_functions`` are those, and
calling the node runs the VJPs of the inner records, as for a cat tree.

The inner records are those the result's record reaches without passing an
argument's slot or a leaf: the op's own (an op here reads only its arguments).
The sweep ignores ``names``: it is metadata for ``grad_fn``, shifted with its
tape's records when tapes merge (tape/_tape.py), when a released tape's
tensor moves its history (tape/_reroot.py), and copied to a ``tape.jit``
replay's tape.
"""
import functools
import operator

from ._tape import STALE, resolve, shift_slot
from ._tensor import Tensor


class NodeEntry:
    """A composite op's node: ``Tape.names[record of its result]``."""
    __slots__ = ('name', 'inner', 'slots', 'shapes', 'dtypes', 'adjust', 'outs', 'out_info')

    def __init__(self, name, slots, shapes, dtypes, adjust=None):
        self.name = name
        self.inner = None       # the op's records below the result's (found on first look)
        self.slots = slots      # gradient slot of each next_functions entry (-1: None)
        self.shapes = shapes    # ... and the argument's shape and dtype
        self.dtypes = dtypes
        self.adjust = adjust    # (tape, records, slots, shapes) -> what to show, or None
        self.outs = None        # (record, slot) of each output of a node of several
        self.out_info = None    # ... and (shape, dtype) of each (its hooks' grad_outputs)

    def copy(self):
        """An entry for another tape with these records at these places (a jit replay)."""
        e = NodeEntry(self.name, list(self.slots), self.shapes, self.dtypes, self.adjust)
        e.inner, e.outs, e.out_info = self.inner, self.outs, self.out_info
        return e

    def shifted(self, rs, shift, remap):
        """The entry after a merge moved its records by ``rs`` and its slots by
        ``shift`` (then ``remap`` for a leaf both tapes held; tape/_tape.py merge)."""
        e = NodeEntry(self.name, [remap.get(s, s) for s in (shift_slot(s, shift)
                                                             for s in self.slots)],
                      self.shapes, self.dtypes, self.adjust)
        e.inner = None if self.inner is None else tuple(j + rs for j in self.inner)
        e.outs = None if self.outs is None else tuple((r + rs, shift_slot(s, shift))
                                                      for r, s in self.outs)
        e.out_info = self.out_info
        return e


class OutputOf:
    """Another output of a node of several: the record holding its entry, and
    which output this record's result is."""
    __slots__ = ('rec', 'index')

    def __init__(self, rec, index):
        self.rec = rec
        self.index = index

    def copy(self):
        return OutputOf(self.rec, self.index)

    def shifted(self, rs, shift, remap):
        return OutputOf(self.rec + rs, self.index)


def node_named(name, *params, output=None, adjust=None):
    """Decorate an op whose result PyTorch's ``name`` node produces, with
    ``next_functions`` one entry per argument in ``params`` (parameter names,
    in PyTorch's order; ``None, 0`` for one that is not a tensor or needs no
    gradient, as for ClampBackward0's absent ``max``).

    ``name`` may be a function of those arguments' values returning the name,
    a (name, number of entries) pair (LerpBackward0 of a scalar weight lists
    two), or None (keep the primitives' node).  ``output``: the op returns a
    tuple whose item ``output`` the node produces (``sort``'s values),
    ``'values'``: a tuple's first item or a tensor (``median`` with or without
    ``dim``), or ``'all'``: one node produces every item (``std_mean``).
    ``adjust(tape, records, slots, shapes)``: the slots and shapes to show
    instead, given the op's records (F.linear's weight through its TBackward0)."""
    def wrap(fn):
        code = fn.__code__
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        npos = code.co_argcount
        defaults = dict(zip(names[npos - len(fn.__defaults__ or ()):npos],
                            fn.__defaults__ or ()))
        defaults.update(fn.__kwdefaults__ or {})
        where = [(names.index(p) if names.index(p) < npos else 1 << 30, p, defaults.get(p))
                 for p in params]
        last = max(i for i, _p, _d in where)
        pick = operator.itemgetter(*(i for i, _p, _d in where)) if last < npos else None
        single = len(params) == 1

        @functools.wraps(fn)
        def op(*args, **kwargs):
            out = fn(*args, **kwargs)
            if output == 'all':
                if out and type(out[0]) is Tensor and out[0]._tape is not None:
                    vals = [args[i] if i < len(args) else kwargs.get(p, d) for i, p, d in where]
                    name_outputs(tuple(out), name, vals)
                return out
            if output is None:
                res = out
            elif output == 'values':
                res = out[0] if isinstance(out, tuple) else out
            else:
                res = out[output]
            if type(res) is Tensor and res._tape is not None:
                if pick is not None and len(args) > last and not kwargs:
                    vals = (pick(args),) if single else pick(args)     # (the common call)
                else:
                    vals = [args[i] if i < len(args) else kwargs.get(p, d) for i, p, d in where]
                nm = name if type(name) is str else name(*vals)
                if nm is not None:
                    if type(nm) is tuple:
                        nm, count = nm
                        vals = vals[:count]
                    name_result(res, nm, vals, adjust)
            return out
        return op
    return wrap


def name_result(out, name, vals, adjust=None):
    """Show PyTorch's node ``name`` of arguments ``vals`` as ``out``'s grad_fn
    (``out`` was recorded by an op of those arguments, just now)."""
    T = out._tape
    if T.alias is not None:
        if T.alias is STALE:
            return
        T = resolve(out)
    slots, shapes, dtypes = [], [], []
    for t in vals:
        if not isinstance(t, Tensor):
            slots.append(-1)
            shapes.append(None)
            dtypes.append(None)
            continue
        if t is out:
            return              # an argument returned as it is
        shapes.append(t._data.shape)
        dtypes.append(t._data.dtype)
        if not t._rg:
            slots.append(-1)
        elif t._tape is None:
            slots.append(T.leafmap.get(id(t), -1))
        else:
            if t._tape is not T and t._tape.alias is not None and t._tape.alias is not STALE:
                resolve(t)
            if t._tape is not T:
                return          # an argument's history on another tape
            slots.append(t._goff)
    names = T.names
    if names is None:
        names = T.names = {}
    names[out._rec] = NodeEntry(name, slots, shapes, dtypes, adjust)
    if T.nodes is not None:
        T.nodes.pop(out._rec, None)     # (a node asked for during the call: made again)


def name_outputs(outs, name, vals):
    """Show one node ``name`` of arguments ``vals`` for all of ``outs``, an op's
    outputs in order (SplitBackward0, StdMeanBackward0): the first's record
    holds the entry, with ``(record, slot)`` of each output; the others' hold
    an ``OutputOf``."""
    first = outs[0] if outs else None
    if type(first) is not Tensor or first._tape is None:
        return
    T = first._tape
    if T.alias is not None:
        if T.alias is STALE:
            return
        T = resolve(first)
    recs = []
    for o in outs:
        if type(o) is not Tensor or o._tape is None:
            return
        if o._tape is not T and o._tape.alias is not None and o._tape.alias is not STALE:
            resolve(o)
        if o._tape is not T:
            return
        recs.append((o._rec, o._goff))
    if len({r for r, _s in recs}) != len(recs):
        return
    name_result(first, name, vals)
    e = T.names.get(first._rec) if T.names is not None else None
    if type(e) is not NodeEntry or e.name != name:
        return
    e.outs = tuple(recs)
    e.out_info = tuple((o._data.shape, o._data.dtype) for o in outs)
    for i, (r, _s) in enumerate(recs[1:], 1):
        T.names[r] = OutputOf(recs[0][0], i)
        if T.nodes is not None:
            T.nodes.pop(r, None)


def primary(tape, rec):
    """(record of the node, output index) for record ``rec``: the first output's
    record for another output of a node of several (``name_outputs``)."""
    e = tape.names.get(rec)
    if type(e) is OutputOf:
        return e.rec, e.index
    return rec, 0


def entry(tape, rec):
    """Record ``rec``'s names entry with its inner records found (None: none).

    The inner records of a node of several outputs include the other outputs'
    own records, so that calling the node runs them too."""
    names = tape.names
    e = names.get(rec) if names is not None else None
    if type(e) is not NodeEntry:
        return None
    if e.inner is None:
        outs = e.outs
        inner = _records_between(tape, [r for r, _s in outs] if outs else [rec], e.slots)
        if outs:
            inner = tuple(sorted(set(inner) | {r for r, _s in outs[1:]}))
        e.inner = inner
        if e.adjust is not None:
            got = e.adjust(tape, inner, e.slots, e.shapes)
            if got is None:
                del names[rec]      # (the op took another path: its primitives' node)
                return None
            e.slots, e.shapes = got
            e.adjust = None
    return e


def _records_between(T, starts, slots):
    """The records of T on the paths from the records ``starts`` back to the
    argument slots ``slots`` (or leaves), in increasing order."""
    import numpy as np
    from ._graph import _record_of_slot, input_slots
    R = np.frombuffer(bytes(T.rec), np.int64).reshape(-1, 8)
    stop = {s for s in slots if s >= 0}
    stop.update(s for _leaf, s in T.leaves)
    seen, todo = set(), list(starts)
    while todo:
        k = todo.pop()
        for s in input_slots(T, k):
            if s < 0 or s in stop:
                continue
            j = _record_of_slot(T, R[:k], s)
            if j is not None and j not in seen:
                seen.add(j)
                todo.append(j)
    return tuple(sorted(seen))


def through_transpose(arg):
    """An ``adjust`` for F.linear: argument ``arg``'s entry is the TBackward0
    the call recorded on it (PyTorch's AddmmBackward0 reads ``weight.t()``)."""
    from ._rules import OP
    op_t = OP['t']

    def adjust(T, records, slots, shapes):
        slot = slots[arg]
        if slot < 0:
            return slots, shapes
        for k in records:
            op, out, n, g0 = T.record(k)[:4]
            if op == op_t and g0 == slot:
                return (slots[:arg] + [out] + slots[arg + 1:],
                        shapes[:arg] + [shapes[arg][::-1]] + shapes[arg + 1:])
        return None
    return adjust
