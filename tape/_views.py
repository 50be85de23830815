"""Views: tensors that share a base tensor's memory, as PyTorch's view ops make them.

A view op (basic indexing, ``view``/``reshape`` without a copy, ``t``,
``transpose``, ``permute``, ``squeeze``/``unsqueeze``, ``narrow``, ``split``)
marks its result with its *base* (the tensor that owns the memory, never
itself a view) and a function that makes the view from an array shaped like
the base (``vfn``).  From that:

- a view shares its base's version counter, so an in-place change through
  either one is seen by every record that saved the other;
- an in-place op on a view of a leaf that requires grad raises, as in PyTorch;
- an in-place op on a view rewrites the base's graph too (PyTorch's
  CopySlices): the base becomes "the old base with the view's elements
  replaced by the op's result", and the op's gradient reaches the base's
  history only through the elements it did not overwrite;
- after the base's graph changes (an in-place op on the base or on any of
  its views), its live views that require grad are re-read from the new base,
  so gradients through a view made before the change are those of the new
  values (PyTorch regenerates such a view's ``grad_fn`` from the base).

Positions come from ``vfn`` applied to an index array: ``vfn(arange(n).
reshape(base.shape))`` holds, per view element, its flat position in the
base, because the view functions only select and rearrange.
"""
import weakref

import numpy as np
try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:                 # NumPy before 2.0
    from numpy import byte_bounds

from ._tape import STALE, grad_mode
from ._tensor import Tensor, _leaf


def as_view(res, a, vfn, multi=None):
    """Mark ``res`` (a new tensor whose data is a NumPy view of ``a``'s) as a
    view of ``a``'s base; ``vfn(arr)`` makes ``res``'s data from ``a``'s.

    ``multi``: the node name of an op that returns several views (split,
    unbind), whose outputs PyTorch does not let an in-place op change."""
    if res is a or type(res._data) is not np.ndarray:
        return res
    ext = a._extra
    src = ext.get('view') if ext is not None else None
    if src is not None:
        base, f0 = src
        fn = _compose(f0, vfn)
    else:
        base, fn = a, vfn
    box = base._vbox
    if box is None:
        box = base._vbox = [0]
    res._vbox = box
    e = res._extra
    if e is None:
        e = res._extra = {}
    e['view'] = (base, fn)
    if multi is not None:
        e['view_multi'] = multi
    if not grad_mode.enabled:
        e['view_no_grad'] = 1       # (see check_inplace)
    elif ext is not None and ext.get('view_no_grad'):
        e['view_no_grad'] = 2       # a view of such a view
    if base._tape is not None:
        # only a graph tensor's views need re-reading when it changes: a leaf
        # that requires grad cannot be changed in place while recording, and
        # a leaf that carries an _extra dict loses its fast in-place path
        _extra_entry(base, 'views', weakref.WeakSet).add(res)
    elif res._tape is not None:
        # a recorded view of a leaf that requires grad: the leaf keeps the
        # tapes such views were recorded on, so that changing it under no_grad
        # marks the records there that saved a view's memory (PyTorch's shared
        # version counter), the view itself gone or not
        note_view_tape(base, res._tape)
    return res


def note_view_tape(base, tape):
    """A recorded view of leaf ``base`` lives on ``tape``: the leaf keeps the
    tapes such views were recorded on, so that changing it under no_grad marks
    the records there that saved a view's memory."""
    if base._tape is None:
        _extra_entry(base, 'view_tapes', _TapeSet).add(tape)


def forget_released_view_tapes(t):
    """Drop from leaf ``t``'s ``view_tapes`` every tape released whole with
    nothing moved off it: no array it saved is left for a change of ``t`` to
    mark.  With none left the entry goes, and the ``_extra`` dict when that was
    all it held, so ``t`` takes the fast paths again: an optimizer's in-place
    step (``nn.Linear`` records ``weight.t()``, a view, every forward) and a
    backward's inline gradient delivery."""
    ext = t._extra
    ts = ext.get('view_tapes') if ext is not None else None
    if ts is None:
        return
    from ._reroot import _successor
    keep = []
    for r in ts.refs:
        tape = r()
        if tape is not None and not (tape.alias is STALE and not tape.saved
                                     and _successor(tape) is None):
            keep.append(r)
    if keep:
        ts.refs = keep
        if ts.last not in keep:
            ts.last = keep[-1]
        return
    del ext['view_tapes']
    if not ext:
        t._extra = None


def _extra_entry(t, key, make):
    """``t._extra[key]``, made by ``make()`` (and the dict with it) when absent."""
    ext = t._extra
    if ext is None:
        ext = t._extra = {}
    entry = ext.get(key)
    if entry is None:
        entry = ext[key] = make()
    return entry


class _TapeSet:
    """Weak references to tapes, the last one added checked first (a loop
    slicing a parameter records every view on the same tape)."""
    __slots__ = ('last', 'refs')

    def __init__(self):
        self.last = None
        self.refs = []

    def add(self, tape):
        last = self.last
        if last is not None and last() is tape:
            return
        self.refs = [r for r in self.refs if r() is not None and r() is not tape]
        self.last = weakref.ref(tape)
        self.refs.append(self.last)

    def __iter__(self):
        return iter([t for t in (r() for r in self.refs) if t is not None])


def _compose(f0, f1):
    return lambda arr: f1(f0(arr))


def view_source(t):
    """(base, vfn) when ``t`` is a view, else None."""
    ext = t._extra
    return ext.get('view') if ext is not None else None


def check_inplace(t, opname, grad_enabled):
    """Raise as PyTorch does for an in-place op on a view of a leaf that requires grad."""
    src = view_source(t)
    if src is None or not grad_enabled:
        return
    base = src[0]
    made = t._extra.get('view_no_grad')
    if made and (base._rg or t._rg):
        # PyTorch's CreationMeta::NO_GRAD_MODE: whether the change should be
        # recorded is ambiguous, so it is refused
        raise RuntimeError(
            ('A view was created in no_grad mode' if made == 1 else
             'A view of a view which was created in no_grad mode') +
            f' and is being modified inplace with grad mode enabled ({opname} on a view '
            f'of shape {tuple(np.shape(t._data))}). Given that this use case is ambiguous '
            'and error-prone, it is forbidden. You can clarify your code by moving both the '
            'view and the inplace either both inside the no_grad block (if you don\'t want '
            'the inplace to be tracked) or both outside (if you want the inplace to be '
            'tracked).')
    multi = t._extra.get('view_multi')
    if multi is not None and (base._rg or t._rg):
        raise RuntimeError(f'Output of {multi} is a view and is being modified inplace ({opname}). '
                           'This view is the output of a function that returns multiple views. '
                           'Such functions do not allow the output views to be modified '
                           'inplace. You should replace the inplace operation by an '
                           'out-of-place one.')
    if base._rg and base._tape is None:
        raise RuntimeError('a view of a leaf Variable that requires grad is being used in an '
                           f'in-place operation ({opname} on a view of shape '
                           f'{tuple(np.shape(t._data))} of a leaf of shape '
                           f'{tuple(np.shape(base._data))}).')


def positions(base, fn):
    """Per element of the view ``fn`` makes, its flat position in ``base``."""
    d = base._data
    from ._ops import flat_index
    return np.ascontiguousarray(fn(flat_index(np.shape(d))), dtype=np.int64).reshape(-1)


def snapshot_base(t, involved):
    """Before an in-place op on view ``t``: its base as it is now, as an op input
    (a copy of the data, the base's place in the graph), when the op will
    rewrite the base's graph (the base is a graph tensor, or the op is
    ``involved``: it records, as when its operand requires grad); else None."""
    src = view_source(t)
    if src is None:
        return None
    from ._tape import grad_mode
    base = src[0]
    if not grad_mode.enabled or not (involved or base._tape is not None):
        return None
    from ._ops import _leaf_view_of
    return _leaf_view_of(base)


def write_through(t, new_value, before):
    """After an in-place op wrote view ``t`` (whose graph value is now
    ``new_value``, a recorded tensor or None): rewrite its base's graph.

    ``before`` is the base's snapshot from ``snapshot_base`` (None: the
    base's graph stays as it is).  Records that saved the base or any of its
    views by reference are marked stale."""
    base, fn = view_source(t)
    from . import _ops
    from ._structural import record_where
    mark_dirty(base, t)
    if before is None or (base._tape is None and (new_value is None
                                                  or new_value._tape is None)):
        return
    bd = _ops._storage(base)
    flat = positions(base, fn)
    mask = np.zeros(bd.size, bool)
    mask[flat] = True
    if new_value is None:
        new_value = _leaf(np.array(t._data, copy=True))
    v = _ops.reshape(new_value, -1)
    s = _ops.reshape(_ops.put_flat(v, flat, bd.size), bd.shape)
    recorded = record_where('setitem', mask.reshape(bd.shape), s, before,
                            np.array(bd, copy=True))
    _ops.rebind(base, recorded)
    refresh(base)


def mark_dirty(base, written=None):
    """Records that saved ``base`` or a view of it by reference now see new values:
    a backward through them raises (PyTorch's shared version counter).

    ``written`` is the tensor the in-place op wrote, already rebound to the op's
    record: its slot now belongs to that record, whose inputs are snapshots, so
    it is not marked (its old slot was marked before the op recorded).

    The live views are marked by slot; records that saved a view which is gone
    by now are found by memory: every saved array that may share memory with
    the base marks the record that saved it."""
    ext = base._extra
    members = [base] + (list(ext['views']) if ext is not None and 'views' in ext else [])
    tapes = []
    for m in members:
        tape = m._tape
        if m is written:
            if tape is not None and tape not in tapes:
                tapes.append(tape)
            continue
        if tape is not None:
            if tape.alias is not None:
                from ._tape import resolve
                tape = resolve(m)
            tape.add_dirty(m._goff, tape.n)
            if tape not in tapes:
                tapes.append(tape)
    if ext is not None and 'view_tapes' in ext:
        from ._reroot import _successor
        for tape in ext['view_tapes']:
            while tape is not None and tape not in tapes:
                while tape.alias is not None and tape.alias is not STALE:     # merged since
                    tape = tape.alias
                tapes.append(tape)
                # released whole: the views used again moved to its successor
                moved = _successor(tape) if tape.alias is STALE else None
                tape = moved[0] if moved is not None else None
    if type(base._data) is np.ndarray:
        for tape in tapes:
            _mark_saved_overlaps(tape, base._data)


class _SavedMemory:
    """Per tape: the byte range of every saved array and the record that saved
    it, extended as the tape grows (an in-place loop over a graph tensor scans
    once per op; rescanning every saved array each time was quadratic)."""
    __slots__ = ('saved', 'nsaved', 'off', 'nrec', 'starts', 'lo', 'hi', 'rec', 'nbig',
                 'ranges', 'nranges', '__weakref__')

    def __init__(self, tape):
        self.saved = tape.saved         # the list object: replaced when the tape releases
        self.nsaved = 0
        self.off = tape.freed[0] if tape.freed is not None else 0
        self.nrec = 0
        self.starts = []                # (V offset, record) of records that save values
        self.lo, self.hi, self.rec = [], [], []     # added since the last lookup
        self.nbig = 0
        # (lo, hi, record) rows of every range, in an array grown by doubling:
        # converting the whole of three Python lists per lookup was quadratic
        self.ranges = np.empty((64, 3), np.int64)
        self.nranges = 0

    def extend(self, tape):
        from ._big import BIG_FLAG
        from ._rules import KIND_FIELDS, RULES
        R = np.frombuffer(tape.rec, np.int64).reshape(-1, 8)[self.nrec:tape.n].copy()
        for i, row in enumerate(R.tolist()):
            k = self.nrec + i
            op = row[0]
            # an operand read only by the other's gradient, when the other has
            # none, is not read: its memory does not count (Rule.for_other)
            fo = RULES[op & ~BIG_FLAG].for_other
            unread = ('a' if fo & 1 and row[4] < 0 else '') + ('b' if fo & 2 and row[3] < 0
                                                               else '')
            if op & BIG_FLAG:           # a large record keeps its arrays itself
                if row[5] < len(tape.big):
                    for name, arr in tape.big[row[5]].saved.items():
                        if name not in unread:
                            self._add(arr, k)
                continue
            rule = RULES[op]
            fields = KIND_FIELDS[rule.kind]
            if fields[0] and fields[2] and (rule.kind != 'elementwise' or rule.saves):
                self.starts.append((row[5], k, _unread_parts(rule, row, unread)))
        self.nrec = tape.n
        # small records' saved arrays are appended in record order, each record's
        # from its V offset (field 5) on
        j = self._record_at(self.off)
        for arr in tape.saved[self.nsaved:]:
            while j + 1 < len(self.starts) and self.starts[j + 1][0] <= self.off:
                j += 1
            if j >= 0 and self.off not in self.starts[j][2]:
                self._add(arr, self.starts[j][1])
            self.off += int(np.size(arr))
        self.nsaved = len(tape.saved)

    def _record_at(self, off):
        j = -1
        while j + 1 < len(self.starts) and self.starts[j + 1][0] <= off:
            j += 1
        return j

    def _add(self, arr, k):
        if isinstance(arr, np.ndarray) and arr.size:
            lo, hi = byte_bounds(arr)
            self.lo.append(lo)
            self.hi.append(hi)
            self.rec.append(k)

    def overlapping(self, memory):
        """Records whose saved arrays may share ``memory`` (by byte range, as
        ``np.may_share_memory`` decides)."""
        if self.rec:
            new = len(self.rec)
            end = self.nranges + new
            if end > len(self.ranges):
                grown = np.empty((max(2 * len(self.ranges), end), 3), np.int64)
                grown[:self.nranges] = self.ranges[:self.nranges]
                self.ranges = grown
            part = self.ranges[self.nranges:end]
            part[:, 0] = self.lo
            part[:, 1] = self.hi
            part[:, 2] = self.rec
            self.nranges = end
            self.lo, self.hi, self.rec = [], [], []
        if not self.nranges or not memory.size:
            return ()
        lo, hi = byte_bounds(memory)
        r = self.ranges[:self.nranges]
        hit = (r[:, 0] < hi) & (r[:, 1] > lo)
        return set(r[hit, 2].tolist())


_SCANS = weakref.WeakKeyDictionary()


def _unread_parts(rule, row, unread):
    """V offsets of a small record's saved operands named in ``unread``."""
    if not unread:
        return ()
    v, n = row[5], row[2]
    if rule.kind == 'elementwise':
        at = {'a': v, 'b': v + n if 'a' in rule.saves else v}
    elif rule.kind == 'mm':             # a is m x k (m in field 6, k in 7)
        at = {'a': v, 'b': v + row[6] * row[7]}
    elif rule.kind == 'bmm':            # batch x m x k, k in the high half of x
        m, kk, nn = row[6], row[7] >> 32, row[7] & 0xFFFFFFFF
        at = {'a': v, 'b': v + (n // (m * nn) if m * nn else 0) * m * kk}
    else:
        return ()
    return {at[name] for name in unread}


def _mark_saved_overlaps(tape, memory):
    """Mark stale every record of ``tape`` whose saved arrays may share ``memory``."""
    scan = _SCANS.get(tape)
    if scan is None or scan.saved is not tape.saved or scan.nsaved > len(tape.saved) \
            or scan.nrec > tape.n:
        scan = _SCANS[tape] = _SavedMemory(tape)
    scan.extend(tape)
    for k in scan.overlapping(memory):
        tape.boxes.append(([1], 0, k))     # a version that no longer matches


def refresh(base):
    """After ``base``'s graph changed: its live views that require grad read the
    new base (each becomes a record taking its elements from it)."""
    ext = base._extra
    views = ext.get('views') if ext is not None else None
    if not views or base._tape is None:
        return
    from ._ops import rebind
    from ._reductions import take_as
    from ._tape import grad_mode
    if not grad_mode.enabled:
        return
    fresh_base = _leaf(base._data)      # the base as an op input: its current graph place
    fresh_base._rg, fresh_base._tape = base._rg, base._tape
    fresh_base._goff, fresh_base._rec = base._goff, base._rec
    for v in list(views):
        src = view_source(v)
        if src is None or src[0] is not base or not isinstance(v, Tensor):
            continue
        r = take_as('index', fresh_base, v._data, positions(base, src[1]))
        rebind(v, r)
