"""A tensor that outlives its graph's backward moves its history to a new tape.

A graph's records stay on its tape until every tensor of the graph dies.  A
tensor made once and used every step (``Wt = W.t()`` for weight tying, a slice
of a parameter) would keep its tape alive, and each step's ops on it would
append to that tape: it would grow with every step, and each backward would
pack and sweep the whole history.  PyTorch's nodes of a step die with the step.

So a backward that releases its whole tape marks it *stale* (its ``alias`` is
``STALE``: the fast paths, which test ``alias is None``, then take the general
path, which calls ``resolve``).  When a tensor of a stale tape is used again,
``reroot`` copies the records it comes from onto a new tape, if they are few
and save nothing (view and shape records, sums, a scalar add...: what PyTorch
lets a second backward run through), and points the tensor there; the old
tape then dies with the step's other tensors.  A history that saves values is
dead after the release (a backward through it raises), so such a tensor stays.
"""
import weakref

import numpy as np

from ._big import BIG_FLAG
from ._rules import KIND_FIELDS, OP, RULES
from ._tape import MOVED_ONTO, REC, SAVING, STALE, Tape, resolve, shift_slot

MAX_RECORDS = 64        # a longer history stays where it is (copying it per use costs more)
_PYTHON = OP['python']
_CANNOT = weakref.WeakKeyDictionary()      # stale tape -> records whose history cannot move


def mark_stale(tape):
    """``tape`` was released whole: its tensors reroot when they are used again."""
    tape.alias = STALE


def reroot(t, copy=True):
    """Move ``t``'s history to a new tape if it saves nothing; the tape ``t``
    records on afterwards (the stale one when it cannot move).

    Every tensor of one stale tape moves to the same new tape, and a record
    copied once is not copied again (``_MOVED``): ``V2 = V1[0]`` moved after
    ``V1`` reads ``V1``'s new slot, so a hook, ``retain_grad`` or
    ``autograd.grad`` toward ``V1`` still sees the gradient through ``V2``.
    ``copy=False`` (an input of ``autograd.grad``) only follows what moved
    already: an input copied alone would leave the outputs' graph."""
    tape = t._tape
    if copy:
        failed = _CANNOT.get(tape)
        if failed is not None and t._rec in failed:
            return tape
    got = _move(tape, t._goff, t._rec, copy)
    if got is None:
        if copy:
            # remembered, so that each later op on t does not walk its history again
            _CANNOT.setdefault(tape, set()).add(t._rec)
        return tape
    t._tape, t._goff, t._rec = got
    ext = t._extra
    if ext is not None and 'view' in ext:
        # a recorded view of a leaf: the leaf may have forgotten the released
        # tape (_views.forget_released_view_tapes), so it learns the new one,
        # which a change of the leaf must mark
        from ._views import note_view_tape
        note_view_tape(ext['view'][0], got[0])
    # a successor that is stale itself (released since) passes t on to its own
    return resolve(t) if got[0].alias is not None else got[0]


def _move(tape, slot, k0, copy, adopt=True):
    """(tape, slot, record) where record ``k0`` of stale ``tape`` (result
    ``slot``) now sits on its successor, copying its history there if
    ``copy``; None when it cannot move (or has not, without ``copy``)."""
    moved = _successor(tape)
    if moved is not None:
        new, where, recs = moved
        k = recs.get(k0)
        if k is not None and slot in where:
            return new, where[slot], k
    if not copy:
        return None
    plan = _history(tape, slot, k0, moved[2] if moved is not None else {})
    if plan is None:
        return None
    R, chain = plan
    if moved is None:
        new, where, recs = Tape(), {}, {}     # old slot -> new slot, old record -> new
        _MOVED[tape] = [new, where, recs]
        _PREDS.setdefault(new, weakref.WeakSet()).add(tape)
    leaf_of = {s: leaf for leaf, s in tape.leaves}
    a_ends = None
    for k in chain:
        row = R[k].copy()
        op = int(row[0])
        rule = RULES[op]
        v_offset, a_offset, _ = KIND_FIELDS[rule.kind]
        for f in (3, 4):
            s = int(row[f])
            if s >= 0:
                # a leaf by its tensor: a merge of the successor may have
                # moved its slot to the other tape's
                if s in leaf_of:
                    leaf = leaf_of[s]
                    row[f] = new.leaf_slot(leaf)
                    vt = leaf._extra.get('view_tapes') if leaf._extra is not None else None
                    if vt is not None:
                        vt.add(new)     # its views sit here now (tape/_views.py mark_dirty)
                else:
                    row[f] = where[s]
        out = new.alloc(int(row[2]))
        where[int(row[1])] = out
        row[1] = out
        if a_offset:
            if a_ends is None:
                A, a_ends = _attr_extents(tape)
            start = int(row[6])
            row[6] = new.add_attrs(A[start:a_ends[start]].copy())
        if v_offset:
            row[5] = new.vpos           # the record reads nothing from V
        new.rec += row.tobytes()
        recs[k] = new.n
        new.n += 1
        new.packed = None
        if tape.names is not None and k in tape.names:
            _move_name(tape.names[k], new, recs[k], where, leaf_of)
    if adopt:
        _adopt_preds(tape, new, where, recs)
    return new, where[slot], recs[k0]


def _move_name(e, new, k, where, leaf_of):
    """A composite op's node (tape/_composite_nodes.py) of a moved record, its
    argument slots as they are on ``new`` (none if an argument did not move, or
    for a node of several outputs)."""
    from ._composite_nodes import NodeEntry
    if type(e) is not NodeEntry or e.outs is not None:
        return
    slots = []
    for s in e.slots:
        if s >= 0:
            s = new.leafmap.get(id(leaf_of[s])) if s in leaf_of else where.get(s)
            if s is None:
                return
        slots.append(s)
    if new.names is None:
        new.names = {}
    new.names[k] = NodeEntry(e.name, slots, e.shapes, e.dtypes,
                             e.adjust if e.inner is None else None)


# stale tape -> [its successor (held: a tensor of the stale tape may need the
# records moved there), old slot -> slot there, old record -> record there]
_MOVED = weakref.WeakKeyDictionary()
_PREDS = MOVED_ONTO                     # successor -> the stale tapes that moved onto it


def _adopt_preds(stale, new, where, recs):
    """``stale``, a successor of older stale tapes, moved records to ``new``:
    point those tapes at ``new`` (copying the records they had moved onto
    ``stale`` that are not there yet), so that no chain of stale tapes,
    each holding the next, builds up over a training loop."""
    preds = _PREDS.get(stale)
    if not preds:
        return
    for p in list(preds):
        memo = _MOVED.get(p)
        if memo is None or memo[0] is not stale:
            continue
        pw, pr = memo[1], memo[2]
        out_of = {k: s for s, k in _result_records(stale, pw, pr)}
        nw, nr = {}, {}
        for ok, sk in pr.items():
            s = out_of.get(sk)
            if s is None:
                continue
            if sk not in recs:
                if _history(stale, s, sk, recs) is None:
                    break               # cannot move: p keeps pointing at stale
                _move(stale, s, sk, True, False)
            nr[ok] = recs[sk]
        else:
            for os_, ss in pw.items():
                if ss in where:
                    nw[os_] = where[ss]
            _MOVED[p] = [new, nw, nr]
            _PREDS.setdefault(new, weakref.WeakSet()).add(p)
            preds.discard(p)


def _result_records(tape, where, recs):
    """(result slot, record) on ``tape`` of the records ``recs`` maps to."""
    ks = set(recs.values())
    R = np.frombuffer(tape.rec, np.int64, count=tape.n * REC).reshape(-1, REC)
    out = [(int(R[k, 1]), k) for k in ks if k < tape.n]
    del R
    return out


def _successor(tape):
    """(the tape ``tape``'s moved records now sit on, old slot -> slot there,
    old record -> record there), following merges of the successor; None when
    nothing moved yet."""
    memo = _MOVED.get(tape)
    if memo is None:
        return None
    new, where, recs = memo
    if new.alias is not None and new.alias is not STALE:
        # merged into another tape since: shift the maps to where it went
        while new.alias is not None and new.alias is not STALE:
            shift, rs = new.gshift, new.rshift
            for s in where:
                where[s] = shift_slot(where[s], shift)
            for k in recs:
                recs[k] += rs
            new = new.alias
        memo[0] = new
        _PREDS.setdefault(new, weakref.WeakSet()).add(tape)
    return new, where, recs


def _attr_extents(tape):
    """The tape's attributes as one array, and where each record's part ends
    (by its start): records append their parts in record order, so a part
    ends where the next record's starts (an empty part starts where the next
    one does: the next start that is larger ends it)."""
    A = np.concatenate(tape.attrs, axis=None) if tape.attrs else np.zeros(0, np.int64)
    R = np.frombuffer(tape.rec, np.int64, count=tape.n * REC).reshape(-1, REC)
    small = (R[:, 0] & BIG_FLAG) == 0          # a large record keeps its attributes itself
    starts = np.unique(R[small & _A_OFFSET[R[:, 0] & ~BIG_FLAG], 6])
    ends = dict(zip(starts.tolist(), starts[1:].tolist() + [len(A)]))
    del R                               # (a view of tape.rec locks it against growing)
    return A, ends


_A_OFFSET = np.array([KIND_FIELDS[r.kind][1] for r in RULES], bool)


def _history(tape, slot, k0, done):
    """(R, the records record ``k0`` (result ``slot``) comes from, ascending)
    when they can move, else None.  Records in ``done`` moved already: the
    walk stops at them."""
    if tape.py or tape.big or tape.hooks or not 0 <= k0 < tape.n:
        return None
    R = np.frombuffer(tape.rec, np.int64, count=(k0 + 1) * REC).reshape(-1, REC).copy()
    if R[k0, 1] != slot:
        return None
    producer = dict(zip(R[:, 1].tolist(), range(k0 + 1)))
    leaves = {slot for _, slot in tape.leaves}
    chain, stack = set(), [k0]
    while stack:
        k = stack.pop()
        if k in chain or k in done:
            continue
        op = int(R[k, 0])
        if op & BIG_FLAG or op == _PYTHON or SAVING[op] or len(chain) >= MAX_RECORDS:
            return None
        chain.add(k)
        for f in (3, 4):
            s = int(R[k, f])
            if s < 0 or s in leaves:
                continue
            p = producer.get(s)
            if p is None or p >= k:
                return None
            stack.append(p)
    return R, sorted(chain)
