"""Node hooks: ``grad_fn.register_hook`` / ``register_prehook``, on AccumulateGrad too.

Node hooks (``grad_fn.register_hook`` / ``register_prehook``) ride on the same
stop: they hang on the ``SlotHooks`` of the record's output, which the sweep
already visits when that gradient is complete.  After the tensor hooks, the
node's backward runs here on its own, on a fresh arena (so its input gradients
are its own, not sums with other paths), the hooks see and may replace them,
and they are added to the sweep's store; the sweep then resumes *below* the
record instead of running it again.  A record without node hooks pays nothing.
Hooks on an ``AccumulateGrad`` node run as the last of the leaf's tensor hooks.
"""
import weakref

import math

import numpy as np

from ._big import BIG_BASE, BIG_FLAG, Grads
from ._hooks import RemovableHandle, SlotHooks, in_hook_order, run_unused_outputs
from ._rules import OP, RULES
from ._tape import STALE
from ._tensor import Tensor, _leaf

_PYTHON = OP['python']
_BROADCAST = OP['broadcast']


class NodeHooks:
    """The hooks of one graph node (record): ``pre`` get ``grad_outputs``, ``post``
    get ``(grad_inputs, grad_outputs)``.  ``holders``: the SlotHooks of the
    record's outputs that carry it, in the order the sweep visits them, held
    weakly: each SlotHooks holds its node, and the tape's ``hooks`` dict holds
    the SlotHooks, so a strong link back would be a reference cycle that keeps
    the hooks (and what they close over) alive after the graph dies."""
    __slots__ = ('pre', 'post', '_holders', 'spans', 'ran')

    def __init__(self):
        self.pre = []
        self.post = []
        self._holders = ()
        # whether the outputs have records of their own (split's pieces); the
        # holders are then in the order the sweep meets those records
        self.spans = False
        # (spans) a weak reference to the gradient store of the sweep that ran
        # the outputs' hooks: they run once, at the first of its stops the sweep meets
        self.ran = None

    @property
    def holders(self):
        return [h for h in (r() for r in self._holders) if h is not None]

    @holders.setter
    def holders(self, hs):
        self._holders = tuple(weakref.ref(h) for h in hs)


def nodes_last(per_rec):
    """Move a record's node-carrying SlotHooks to the end of its dict: node hooks
    run after every tensor hook of the record's outputs."""
    tail = [(s, h) for s, h in per_rec.items() if h.node is not None]
    if not tail:
        return
    for s, h in tail:
        del per_rec[s]
        per_rec[s] = h
    for node in {id(h.node): h.node for s, h in tail}.values():
        if not node.spans:      # (a node over several records keeps its order)
            node.holders = [h for h in per_rec.values() if h.node is node]


def _live(nd):
    """(tape, record) of a node, following merges made since it was handed out."""
    tape, rec = nd._tape, nd._rec
    while tape.alias is not None and tape.alias is not STALE:
        rec += tape.rshift
        tape = tape.alias
    return tape, rec


def _is_big(tape, rec):
    from ._tape import _UNPACK
    return bool(_UNPACK(tape.rec, rec * 64)[0] & BIG_FLAG)


def _multi_entry(tape, rec):
    """The names entry of a composite node of several outputs, each made by a
    record of its own (split, unbind, var_mean; tape/_composite_nodes.py
    ``name_outputs``), of which record ``rec`` made one; else None."""
    if tape.names is None:
        return None
    from ._composite_nodes import entry, primary
    e = entry(tape, primary(tape, rec)[0])
    return e if e is not None and e.outs is not None and e.out_info is not None else None


def _node_of(tape, outs):
    """The NodeHooks of the node whose outputs are ``outs`` ((record, slot, shape,
    dtype, exact) each), made with a SlotHooks per output where missing."""
    holders = []
    for r, s, shape, dt, exact in outs:
        per_rec = tape.hooks.setdefault(r, {})
        h = per_rec.get(s)
        if h is None:
            h = per_rec[s] = SlotHooks(None, s, int(math.prod(shape)), shape, dt, exact)
        elif exact and not h.exact:
            h.shape, h.dtype, h.exact = shape, dt, True
        holders.append(h)
    node = next((h.node for h in holders if h.node is not None), None) or NodeHooks()
    for h in holders:
        h.node = node
    for r in {o[0] for o in outs}:
        nodes_last(tape.hooks[r])
    return node


def _span_node(tape, multi):
    """The NodeHooks of a node whose outputs have records of their own (split's
    pieces; ``multi``: its names entry), carried by each output's SlotHooks,
    highest record first, the order the sweep meets them."""
    outs = sorted(((r, s, tuple(shape), dt, True)
                   for (r, s), (shape, dt) in zip(multi.outs, multi.out_info)),
                  key=lambda o: -o[0])
    if tape.hooks is None:
        tape.hooks = {}
    node = _node_of(tape, outs)
    if not node.spans:
        node.spans = True
        node.holders = [tape.hooks[r][s] for r, s, *_ in outs]
    return node


def span_node_of(t, tape):
    """For a tensor hook on ``t`` (on ``tape``, resolved): the node of several
    records that made ``t`` (split's pieces), so that its outputs' tensor hooks
    run together, in PyTorch's order; else None."""
    multi = _multi_entry(tape, t._rec)
    return _span_node(tape, multi) if multi is not None else None


def register_node_hook(nd, fn, post):
    """``grad_fn.register_hook(fn)`` (post) or ``register_prehook(fn)``.

    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x * 3
    >>> h = y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * 10, None))
    >>> y.sum().backward()
    >>> x.grad
    tensor([30., 30.])
    """
    if not callable(fn):
        raise TypeError(f'hook must be callable, got {type(fn).__name__}')
    tape, rec = _live(nd)
    op, out, n, g0, g1, v, ax, x = tape.record(rec)
    if tape.hooks is None:
        tape.hooks = {}
    multi = _multi_entry(tape, rec) if op != _PYTHON else None
    if op == _PYTHON:
        p = tape.py[ax]
        outs = [(rec, s, shape, dt, True) for s, shape, dt in
                zip(p.out_slots, p.out_shapes, p.out_dtypes) if s >= 0]
    elif multi is not None:
        node = _span_node(tape, multi)
    else:
        outs = [(rec, out, *_out_info(tape, rec, out, n, nd))]
    if multi is None:
        node = _node_of(tape, outs)
    fns = node.post if post else node.pre
    fns.append(fn)
    return RemovableHandle(fns, fn)


def _recorded_shape(tape, rec, slot, nd=None):
    """(shape, dtype) of result ``slot`` of record ``rec`` where something recorded it:
    the tensor a node was asked from, a tensor hook, a Function, a large record."""
    for hint in (nd._hint if nd is not None else None,
                 getattr((tape.nodes or {}).get(rec), '_hint', None)):
        if hint is not None and hint[0] == slot:
            return tuple(hint[1]), np.dtype(hint[2])
    h = (tape.hooks or {}).get(rec, {}).get(slot)
    if h is not None and h.exact:
        return tuple(h.shape), np.dtype(h.dtype)
    op, out, n, g0, g1, v, ax, x = tape.record(rec)
    if op == _PYTHON:
        p = tape.py[ax]
        if slot in p.out_slots:
            i = p.out_slots.index(slot)
            return tuple(p.out_shapes[i]), np.dtype(p.out_dtypes[i])
        return None
    if _is_big(tape, rec):
        meta = tape.big[v]
        return tuple(meta.out_shape), np.dtype(meta.out_dtype)
    return None


def _out_info(tape, rec, out, n, nd=None, R=None):
    """(shape, dtype, exact) of record rec's result: records know its size only, so
    look for it where recorded, else follow elementwise operands (which have the
    result's shape) down to a leaf or a recorded shape; else (n,), not exact."""
    known = _recorded_shape(tape, rec, out, nd)
    if known is not None:
        return (*known, True)
    if R is None:
        R = np.frombuffer(bytes(tape.rec), np.int64).reshape(-1, 8)
    leaf_of = {s: leaf for leaf, s in tape.leaves}
    j = rec
    for _ in range(256):
        op = int(R[j, 0])
        if op & BIG_FLAG or RULES[op].kind != 'elementwise':
            break
        nxt = None
        for s in (int(R[j, 3]), int(R[j, 4])):
            if s < 0:
                continue
            leaf = leaf_of.get(s)
            if leaf is not None:
                return tuple(leaf._data.shape), leaf._data.dtype, True
            p = _producer_rec(R, j, s)
            if p is None or (int(R[p, 0]) & ~BIG_FLAG) == _BROADCAST:
                continue
            known = _recorded_shape(tape, p, s)
            if known is not None:
                return (*known, True)
            if nxt is None:
                nxt = p
        if nxt is None:
            break
        j = nxt
    return (n,), np.dtype(np.float64), False


def _check_result(fn, result, given, exact):
    """A hook's returned tuple, checked against what it was given, as PyTorch checks."""
    name = getattr(fn, '__name__', type(fn).__name__)
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(given):
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values "
                           f"(got {len(result)}, but expected {len(given)})")
    for new, old, ex in zip(result, given, exact):
        if new is None:
            continue
        if not isinstance(new, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
        if old is None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        if (new._data.shape != old._data.shape) if ex else (new._data.size != old._data.size):
            raise RuntimeError(f"hook '{name}' has changed the size of value")
        if new._data.dtype != old._data.dtype:
            raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                               f"{old._data.dtype} got {new._data.dtype})")
    return result


def _call_hooks(fns, given, exact):
    """Run pre hooks in order, each seeing the previous one's replacement."""
    cur = given
    for fn in list(fns):
        r = fn(cur)
        if r is not None:
            cur = _check_result(fn, r, cur, exact)
    return cur


def _as_tensor(raw, shape, dtype):
    return None if raw is None else _leaf(np.asarray(raw).reshape(shape).astype(dtype))


def _raw(t, given, raw):
    """The float64 array behind a hook's result: the sweep's own if unchanged."""
    if t is None:
        return None
    return raw if t is given else np.ravel(t._data)


class _Input:
    """One input of a node: the record's slot for it, the broadcast records between
    that and the input proper (PyTorch shows the input before broadcasting), and the
    input's slot, size, shape and dtype."""
    __slots__ = ('direct', 'dsize', 'chain', 'slot', 'size', 'shape', 'dtype', 'exact')


def _producer_rec(R, below, slot):
    """The last record before ``below`` whose result is ``slot`` (None if a leaf's)."""
    hits = np.flatnonzero(R[:below, 1] == slot)
    return int(hits[-1]) if len(hits) else None


def _known_shape(tape, slot, j, leaf_of, R):
    """(shape, dtype) of the tensor at ``slot`` made by record ``j``, where known."""
    leaf = leaf_of.get(slot)
    if leaf is not None:
        return leaf._data.shape, leaf._data.dtype
    if j is None:
        return None
    shape, dtype, exact = _out_info(tape, j, slot, 0, R=R)
    return (shape, dtype) if exact else None


def _in_sizes(tape, row):
    """Element counts of a (non-Python) record's two input slots."""
    op, go, n, g0, g1, v, ax, x = row
    if op & BIG_FLAG:
        meta = tape.big[v]
        if RULES[op & ~BIG_FLAG].kind == 'elementwise':
            return n, n
        sizes = [int(math.prod(s)) for s in meta.in_shapes] + [0]
        return sizes[0], sizes[1]
    kind = RULES[op].kind
    if kind in ('sum_all', 'reduce'):
        return v, 0
    if kind in ('expand', 'take', 'put', 'lse'):
        return x, 0
    if kind == 'mm':
        return ax * x, (x * (n // ax) if ax else 0)
    if kind == 'bmm':
        kk, nn = x >> 32, x & 0xFFFFFFFF
        bb = n // (ax * nn) if ax * nn else 0
        return bb * ax * kk, bb * kk * nn
    if kind == 'cat':
        # the output as rows (outer, wa + wb): each input is its own columns
        wa, wb = ax, x & ((1 << 40) - 1)
        outer = n // (wa + wb) if wa + wb else 0
        return outer * wa, outer * wb
    return n, n


def _fallback_shape(tape, row, pos, size, out_shape):
    """Shape of a record's input ``pos`` from the record alone: (shape, exact)."""
    op, go, n, g0, g1, v, ax, x = row
    if op & BIG_FLAG:
        meta = tape.big[v]
        if pos < len(meta.in_shapes):
            return tuple(meta.in_shapes[pos]), True
        return (size,), False
    kind = RULES[op].kind
    if kind in ('elementwise', 'where'):
        return out_shape[0], out_shape[1]       # operands come expanded to the result's shape
    if kind == 'mm':
        kk, nn = x, (n // ax if ax else 0)
        return ((ax, kk), True) if pos == 0 else ((kk, nn), True)
    if kind == 'bmm':
        kk, nn = x >> 32, x & 0xFFFFFFFF
        bb = n // (ax * nn) if ax * nn else 0
        return ((bb, ax, kk), True) if pos == 0 else ((bb, kk, nn), True)
    return (size,), False


def _unbroadcast_shape(tape, brow, A):
    """The shape a broadcast record expanded from: exact for large records, else
    read off its index map (leading 1s, which it cannot tell, are dropped)."""
    op, go, n, g0, g1, v, ax, x = brow
    if op & BIG_FLAG:
        return tuple(tape.big[v].in_shapes[0]), True
    if x == 1:
        return (), False
    nd = int(A[ax])
    big = [int(d) for d in A[ax + 1:ax + 1 + nd]]
    strides = A[ax + 1 + nd:ax + 1 + 2 * nd]
    dims = [d if s != 0 else 1 for d, s in zip(big, strides)]
    while dims and dims[0] == 1:
        dims.pop(0)
    return tuple(dims), False


def _node_inputs(tape, k, row, R, A, out_shape, out_dtype, out_exact):
    """The _Input of each next_functions entry of record k (None where no gradient)."""
    from ._graph import input_slots
    leaf_of = {s: leaf for leaf, s in tape.leaves}
    sizes = _in_sizes(tape, row)
    result = []
    for pos, s in enumerate(input_slots(tape, k)):
        if s < 0:
            result.append(None)
            continue
        e = _Input()
        e.direct, e.dsize = s, sizes[pos]
        e.chain = []
        slot, size = s, e.dsize
        j = None if s in leaf_of else _producer_rec(R, k, s)
        while j is not None and (int(R[j, 0]) & ~BIG_FLAG) == _BROADCAST:
            brow = tuple(R[j].tolist())
            e.chain.append(brow)
            slot, size = brow[3], brow[7]
            j = None if slot in leaf_of else _producer_rec(R, j, slot)
        e.slot, e.size = slot, size
        known = _known_shape(tape, slot, j, leaf_of, R)
        if known is not None:
            e.shape, e.dtype, e.exact = tuple(known[0]), np.dtype(known[1]), True
        else:
            if e.chain:
                e.shape, e.exact = _unbroadcast_shape(tape, e.chain[-1], A)
            else:
                e.shape, e.exact = _fallback_shape(tape, row, pos, size, (out_shape, out_exact))
            e.dtype = out_dtype
        if int(math.prod(e.shape)) != e.size:
            e.shape, e.exact = (e.size,), False
        result.append(e)
    return result


def _alone(tape, row, V, A, seed_slot, seed_size, seed):
    """Run one record (its 8 fields) by itself on a fresh arena seeded with its
    output's gradient; returns that arena (a Grads)."""
    from ._sweep import _python_record, kernel
    R1 = np.array([row], dtype=np.int64)
    size = max(tape.gpos, 1)
    G = np.zeros(size, V.dtype)          # the arena's dtype follows V's (tape/_sweep.py pack)
    reach = np.zeros(size, np.uint8)
    store = Grads(G, reach)
    store.add(seed_slot, seed_size, seed)
    if kernel(R1)(R1, G, V, A, reach, 0, -1) >= 0:
        _python_record(tape, 0, R1, G, V, A, reach, store)
    return store


def _take(store, slot, size):
    if not store.reached(slot):
        return None
    g = store.get(slot, size)
    return None if g is None else np.array(g, dtype=np.float64).ravel()


def _record_vjp(tape, row, V, A, g, inputs):
    """Input gradients (flat float64 arrays or None) of a non-Python record alone."""
    go, n = row[1], row[2]
    out = [None] * len(inputs)
    if g is None:
        return out
    field = {0: 3, 1: 4}
    live = [pos for pos, e in enumerate(inputs) if e is not None]
    shared = len(live) == 2 and inputs[live[0]].direct == inputs[live[1]].direct
    runs = [[pos] for pos in live] if shared else [live]
    for group in runs:
        r = list(row)
        if shared:      # x * x: each input's part on its own, as PyTorch reports them
            for pos in live:
                if pos not in group:
                    r[field[pos]] = -1
        store = _alone(tape, r, V, A, go, n, g)
        for pos in group:
            out[pos] = _take(store, inputs[pos].direct, inputs[pos].dsize)
    for pos in live:
        gi = out[pos]
        for brow in inputs[pos].chain:       # PyTorch's node sums the broadcast away
            if gi is None:
                break
            gi = _take(_alone(tape, brow, V, A, brow[1], brow[2], gi), brow[3], brow[7])
        out[pos] = gi
    return out


def run_node(node, grads, tape, k, R, V, A):
    """Node hooks of record k at the compiled sweep's stop: pre hooks, the record's
    backward alone, post hooks, then its input gradients into ``grads``."""
    row = tuple(R[k].tolist())
    op = row[0] & ~BIG_FLAG
    multi = _multi_entry(tape, k) if node.spans else None
    outs = _outputs(node, tape, row, multi)
    if op == _PYTHON:
        p = tape.py[row[6]]
    raw_out = []
    for s, size, shape, dt, ex in outs:
        g = grads.get(s, size) if s >= 0 and grads.reached(s) else None
        raw_out.append(None if g is None else np.ravel(g))
    given = tuple(_as_tensor(g, o[2], o[3]) for g, o in zip(raw_out, outs))
    exact_out = [o[4] for o in outs]
    gouts = _call_hooks(node.pre, given, exact_out)
    eff_out = [_raw(t, g0, r) for t, g0, r in zip(gouts, given, raw_out)]
    named = _composite(tape, k)
    if op == _PYTHON:
        ins, raw_in = _python_vjp(p, outs, eff_out)
    elif multi is not None:
        from ._composite_nodes import primary
        ins = _composite_inputs(multi)
        raw_in = _composite_vjp(tape, primary(tape, k)[0], multi, R, V, A,
                                [(o[0], o[1], g) for o, g in zip(outs, eff_out)], ins)
    elif named is not None:
        ins = _composite_inputs(named)
        raw_in = _composite_vjp(tape, k, named, R, V, A, [(row[1], row[2], eff_out[0])], ins)
    else:
        ins = _node_inputs(tape, k, row, R, A, *outs[0][2:])
        raw_in = _record_vjp(tape, row, V, A, eff_out[0], ins)
    gins = tuple(None if e is None else _as_tensor(g, e.shape, e.dtype)
                 for e, g in zip(ins, raw_in))
    new = _post(node.post, gins, gouts, ins)
    for e, t, g0, r in zip(ins, new, gins, raw_in):
        g = _raw(t, g0, r)
        if e is None or g is None or e.slot < 0:
            continue
        dt = e.dtype if e.slot >= BIG_BASE and e.dtype.kind == 'f' else None
        grads.add(e.slot, e.size, g, dt)
    if multi is not None:
        # the node ran every output's records: the sweep passes the others by
        for s, size, *_rest in outs:
            grads.drop(s, size)


def _composite(tape, k):
    """The names entry of a composite op's node of one output at record k
    (tape/_composite_nodes.py), or None."""
    if tape.names is None:
        return None
    from ._composite_nodes import entry
    e = entry(tape, k)
    return e if e is not None and e.outs is None else None


def _direct_inputs(rows):
    """An _Input per (slot, shape, dtype) row (None for a slot < 0): inputs the
    node's records read at their own slots, with no broadcast in between."""
    ins = []
    for s, shape, dt in rows:
        if s < 0:
            ins.append(None)
            continue
        x = _Input()
        x.direct = x.slot = s
        x.dsize = x.size = int(math.prod(shape))
        x.chain = []
        x.shape, x.dtype, x.exact = tuple(shape), np.dtype(dt), True
        ins.append(x)
    return ins


def _composite_inputs(e):
    """The _Input of each next_functions entry of a composite op's node: its
    arguments' slots, which its records read directly."""
    return _direct_inputs(zip(e.slots, e.shapes, e.dtypes))


def _composite_vjp(tape, k, e, R, V, A, seeds, ins):
    """Input gradients (flat float64 arrays or None) of a composite op's records
    (k and those between it and its arguments) run by themselves from
    ``seeds``, (slot, size, gradient or None) of each output.  The sweep then
    finds its inner records unreached and passes them by."""
    from ._sweep import _python_record, kernel
    if all(g is None for _s, _n, g in seeds):
        return [None] * len(ins)
    R1 = np.ascontiguousarray(R[sorted(set(e.inner) | {k})])
    size = max(tape.gpos, 1)
    G = np.zeros(size, V.dtype)
    reach = np.zeros(size, np.uint8)
    store = Grads(G, reach)
    for s, n, g in seeds:
        if g is not None:
            store.add(s, n, g)
    sweep = kernel(R1)
    j = len(R1) - 1
    while j >= 0:
        if not R1[j, 0] & BIG_FLAG:
            j = sweep(R1, G, V, A, reach, j, -1)
            if j < 0:
                break
        j = _python_record(tape, j, R1, G, V, A, reach, store) - 1
    return [None if x is None else _take(store, x.direct, x.dsize) for x in ins]


def _post(fns, gins, gouts, ins):
    """Run post hooks ``fn(grad_inputs, grad_outputs)`` in order, as _call_hooks."""
    exact = [e is None or e.exact for e in ins]
    cur = gins
    for fn in list(fns):
        r = fn(cur, gouts)
        if r is not None:
            cur = _check_result(fn, r, cur, exact)
    return cur


def _python_inputs(p):
    """The _Input of each ``next_functions`` entry of a custom Function's node."""
    return _direct_inputs((p.in_slots[i], p.in_shapes[i], p.in_dtypes[i])
                          for i in p.shown_inputs())


def _outputs(node, tape, row, multi=None):
    """(slot, size, shape, dtype, exact) of each output of a hooked record, or
    of the node of several records ``multi`` (its names entry)."""
    if multi is not None:
        return [(s, int(math.prod(shape)), tuple(shape), np.dtype(dt), True)
                for (_r, s), (shape, dt) in zip(multi.outs, multi.out_info)]
    if (row[0] & ~BIG_FLAG) == _PYTHON:
        p = tape.py[row[6]]
        return [(s, int(math.prod(shape)), tuple(shape), np.dtype(dt), True)
                for s, shape, dt in zip(p.out_slots, p.out_shapes, p.out_dtypes)]
    h = node.holders[0]
    return [(h.slot, h.size, tuple(h.shape), np.dtype(h.dtype), h.exact)]


def _python_vjp(p, outs, eff_out):
    """A custom Function's backward, called once, with each input's gradient apart."""
    from ._grad_mode import no_grad
    ins = _python_inputs(p)
    if all(g is None for g in eff_out):
        return ins, [None] * len(ins)
    grads = []
    for (s, size, shape, dt, ex), g in zip(outs, eff_out):
        if g is None:
            grads.append(_leaf(np.zeros(shape, dt)) if p.ctx.materialize_grads else None)
        else:
            grads.append(_as_tensor(g, shape, dt))
    with no_grad():
        res = p._call_backward(grads)
    res = [res[i] for i in p.shown_inputs()]
    return ins, [None if r is None or e is None else np.ravel(r._data)
                 for r, e in zip(res, ins)]


# ------------------------------------ node hooks under create_graph=True
def run_pieces_differentiable(node, acc, sweep):
    """For a node whose outputs have records of their own (split's pieces): at
    the first of their stops this differentiable sweep meets, every output's
    tensor hooks (as SlotHooks.run_compiled).  Returns whether they ran now."""
    ran = node.ran
    if ran is not None and ran() is sweep:
        return False
    node.ran = weakref.ref(sweep)
    for x in in_hook_order(node.holders):
        if x.slot not in acc:
            if not sweep.pruned:      # (else its users may not have run: no call)
                x.run_unused()
        elif x.fns or x.retain is not None:
            acc[x.slot] = x.run_differentiable(acc[x.slot])
    return True


def run_record_differentiable(per_rec, tape, k, R, RF, V, A, acc, leaf_of, sweep):
    """The differentiable sweep's stop at hooked record k (tape/_differentiable.py):
    its outputs' tensor hooks, then its node hooks, which run the record's backward
    with Tensor ops themselves.  Returns True when they did (skip the record)."""
    ran = False
    run_unused_outputs(tape, R[k].tolist(), per_rec, acc.__contains__)
    for h in list(per_rec.values()):
        if h.slot not in acc:
            continue
        node = h.node
        if node is not None and node.spans:
            # outputs with records of their own: as SlotHooks.run_compiled
            if run_pieces_differentiable(node, acc, sweep) and (node.pre or node.post):
                _run_node_differentiable(node, tape, k, R, V, A, acc, leaf_of)
                ran = True
            continue
        if h.fns or h.retain is not None:
            acc[h.slot] = h.run_differentiable(acc[h.slot])
        if node is None or not (node.pre or node.post):
            continue
        if len(node.holders) > 1 and [x for x in node.holders if x.slot in acc][-1] is not h:
            continue
        _run_node_differentiable(node, tape, k, R, V, A, acc, leaf_of)
        ran = True
    return ran


class _Parts(dict):
    """An ``acc`` for _differentiable._record_vjp that holds only the output's
    gradient and keeps each input contribution apart (x * x gives two)."""

    def __init__(self, out_slot, g):
        super().__init__({out_slot: g})
        self.out_slot = out_slot
        self.parts = {}

    def get(self, key, default=None):
        return dict.get(self, key, default) if key == self.out_slot else default

    def __setitem__(self, key, value):
        self.parts.setdefault(key, []).append(value)


def _diff_alone(tape, row, V, A, g, leaf_of):
    from ._differentiable import _record_vjp as vjp
    R1 = np.array([row], dtype=np.int64)
    acc = _Parts(row[1], g)
    vjp(tape, 0, R1, R1.view(np.float64), V, A, acc, leaf_of)
    return acc.parts


def _run_node_differentiable(node, tape, k, R, V, A, acc, leaf_of):
    from . import _ops
    from ._differentiable import _add
    from ._grad_mode import enable_grad
    row = tuple(R[k].tolist())
    op = row[0] & ~BIG_FLAG
    multi = _multi_entry(tape, k) if node.spans else None
    outs = _outputs(node, tape, row, multi)
    given = tuple(_ops.reshape(acc[s], shape) if s >= 0 and acc.get(s) is not None else None
                  for s, size, shape, dt, ex in outs)
    gouts = _call_hooks(node.pre, given, [o[4] for o in outs])
    named = _composite(tape, k)
    if multi is not None:
        # every output's records, differentiably, as calling the node does
        from ._composite_nodes import primary
        from ._graph import node as graph_node
        ins = _composite_inputs(multi)
        gins = (None,) * len(ins)
        if any(g is not None for g in gouts):
            got = graph_node(tape, primary(tape, k)[0])(*gouts)
            gins = got if isinstance(got, tuple) else (got,)
    elif op == _PYTHON:
        p = tape.py[row[6]]
        ins = _python_inputs(p)
        if all(g is None for g in gouts):
            gins = (None,) * len(ins)
        else:
            grads = [g if g is not None else
                     (_leaf(np.zeros(o[2], o[3])) if p.ctx.materialize_grads else None)
                     for g, o in zip(gouts, outs)]
            with enable_grad():
                res = p._call_backward(grads)
            res = [res[i] for i in p.shown_inputs()]
            gins = tuple(None if e is None else r for e, r in zip(ins, res))
    elif named is not None:
        # a composite op's records, differentiably, as calling its node does
        from ._graph import node as graph_node
        ins = _composite_inputs(named)
        gins = (None,) * len(ins)
        if gouts[0] is not None:
            got = graph_node(tape, k)(gouts[0])
            gins = got if isinstance(got, tuple) else (got,)
    else:
        ins = _node_inputs(tape, k, row, R, A, *outs[0][2:])
        gins = [None] * len(ins)
        if gouts[0] is not None:
            parts = _diff_alone(tape, row, V, A, _ops.reshape(gouts[0], -1), leaf_of)
            taken = {}
            for pos, e in enumerate(ins):
                if e is None:
                    continue
                got = parts.get(e.direct, [])
                i = taken.get(e.direct, 0)
                gi = got[i] if i < len(got) else None
                taken[e.direct] = i + 1
                for brow in e.chain:
                    if gi is None:
                        break
                    gi = (_diff_alone(tape, brow, V, A, gi, leaf_of).get(brow[3]) or [None])[0]
                gins[pos] = None if gi is None else _ops.reshape(gi, e.shape)
        gins = tuple(gins)
    new = _post(node.post, gins, gouts, ins)
    for e, t in zip(ins, new):
        if e is not None and t is not None:
            _add(acc, e.slot, _ops.reshape(t, -1))
    if multi is not None:
        for s, *_rest in outs:          # the sweep passes the outputs' records by
            acc.pop(s, None)


# ------------------------------------------------ AccumulateGrad hooks
class AccumulateHooks:
    """The hooks of a leaf's AccumulateGrad node, run as the leaf's last tensor hook."""
    __slots__ = ('leaf', 'pre', 'post')

    def __init__(self, leaf):
        self.leaf = weakref.ref(leaf)
        self.pre = []
        self.post = []

    def __call__(self, g):
        if not self.pre and not self.post:
            return None
        leaf = self.leaf()
        cur = _call_hooks(self.pre, (g,), [True])
        new = cur[0]
        if not self.post:
            if new is None:     # the gradient dropped: nothing to add (.grad becomes zeros)
                return _leaf(np.zeros(leaf._data.shape, leaf._data.dtype))
            return None if new is g else new
        if new is not None:
            _accumulate_now(leaf, new)
        if leaf._extra is not None and leaf._extra.get('post_accumulate'):
            # PyTorch runs the tensor's post-accumulate hooks before the node's
            # post hooks; the backward's own call after this one then skips them
            from ._hooks import run_post_accumulate_hooks
            run_post_accumulate_hooks(leaf)
            leaf._extra['post_accumulate_ran'] = True
        for fn in list(self.post):
            r = fn((), cur)
            if r is not None:
                _check_result(fn, r, (), ())
        # already accumulated: the caller adds this zero
        return _leaf(np.zeros(leaf._data.shape, leaf._data.dtype))


def _accumulate_now(leaf, g):
    """leaf.grad += g, as the backward that called the leaf's hooks would."""
    if g._tape is not None:         # create_graph: keep the gradient's graph
        from . import _ops
        if g._data.dtype != leaf._data.dtype:
            g = _ops.to(g, leaf._data.dtype)
        leaf._grad = g if leaf._grad is None else _ops.add(leaf._grad, g)
        return
    from ._sweep import _accumulate
    _accumulate(leaf, np.ravel(np.asarray(g._data, dtype=np.float64)))


def register_accumulate_hook(acc, fn, post):
    """``AccumulateGrad.register_hook`` (post) or ``register_prehook``."""
    if not callable(fn):
        raise TypeError(f'hook must be callable, got {type(fn).__name__}')
    leaf = acc.variable
    if leaf._extra is None:
        leaf._extra = {}
    runner = leaf._extra.get('accumulate_hooks')
    if runner is None:
        runner = leaf._extra['accumulate_hooks'] = AccumulateHooks(leaf)
        leaf._extra.setdefault('hooks', []).append(runner)
    fns = runner.post if post else runner.pre
    fns.append(fn)
    return RemovableHandle(fns, fn)
