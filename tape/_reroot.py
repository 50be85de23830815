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
from ._tape import REC, SAVING, STALE, Tape

MAX_RECORDS = 64        # a longer history stays where it is (copying it per use costs more)
_PYTHON = OP['python']
_CANNOT = weakref.WeakKeyDictionary()      # stale tape -> records whose history cannot move


def mark_stale(tape):
    """``tape`` was released whole: its tensors reroot when they are used again."""
    tape.alias = STALE


def reroot(t):
    """Move ``t``'s history to a new tape if it saves nothing; the tape ``t``
    records on afterwards (the stale one when it cannot move)."""
    tape = t._tape
    failed = _CANNOT.get(tape)
    if failed is not None and t._rec in failed:
        return tape
    plan = _history(tape, t)
    if plan is None:
        # remembered, so that each later op on t does not walk its history again
        _CANNOT.setdefault(tape, set()).add(t._rec)
        return tape
    R, chain = plan
    leaf_of = {slot: leaf for leaf, slot in tape.leaves}
    new = Tape()
    where = {}                          # old slot -> new slot
    a_ends = None
    for k in chain:
        row = R[k].copy()
        op = int(row[0])
        rule = RULES[op]
        v_offset, a_offset, _ = KIND_FIELDS[rule.kind]
        for f in (3, 4):
            s = int(row[f])
            if s >= 0:
                if s not in where:
                    where[s] = new.leaf_slot(leaf_of[s])
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
        new.n += 1
    t._tape = new
    t._goff = where[t._goff]
    t._rec = new.n - 1
    return new


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


def _history(tape, t):
    """(R, the records ``t`` comes from, ascending) when they can move, else None."""
    k0 = t._rec
    if tape.py or tape.big or tape.hooks or not 0 <= k0 < tape.n:
        return None
    R = np.frombuffer(tape.rec, np.int64, count=(k0 + 1) * REC).reshape(-1, REC).copy()
    if R[k0, 1] != t._goff:
        return None
    producer = dict(zip(R[:, 1].tolist(), range(k0 + 1)))
    leaves = {slot for _, slot in tape.leaves}
    chain, stack = set(), [k0]
    while stack:
        k = stack.pop()
        if k in chain:
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
