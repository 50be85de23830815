"""The flat Wengert tape: plain integer records plus saved buffers.

Format (hard to change, so written down here).  A record is 8 int64 values,
packed with ``struct`` onto the bytearray ``Tape.rec`` while the forward pass
runs and viewed as an ``(n, 8)`` int64 array at backward:

    0 op     opcode: the row index in tape._rules.RULES
    1 out    slot of the result
    2 n      number of elements of the result
    3 in0    slot of the first input, or -1 when it needs no gradient
    4 in1    slot of the second input, or -1
    5 v      offset of the record's saved values in V (for sum/mean: the input's size)
    6 a      offset of the record's integer attributes in A (or a Python index)
    7 x      the record's scalar constant as float64 bits (the 2 of ``x * 2``,
             the 1/n of a mean); for expand/take the input's size

A *slot* is an offset into one gradient arena ``G`` (float64, or float32 for
a graph that is float32 throughout: see ``tape/_sweep.py`` pack); a tensor with
k elements owns G[slot : slot+k], flattened in C order.  Slots are handed out
in recording order, so they never overlap and need no table.  Leaves get a
slot the first time a tape meets them.  A zero-size tensor owns no element
but still advances the counter by one, so that no two tensors share a slot
(the sweeps key gradients and reach flags by slot).

``V`` is ``np.concatenate(saved, axis=None)`` in G's dtype: the saved
arrays are kept by reference while recording (no copy per op), and made into
one buffer when the tape is swept.  ``A`` is the same for integer attributes.
The sweep also gets ``RF``, the records viewed as float64, to read constants.

Why this shape: packing 8 ints onto a bytearray is the cheapest record the
interpreter can make (~70 ns, and no per-int conversion at backward: a list of
ints costs another 13 ns per int to turn into an array), and plain arrays are
what Numba takes without conversion, so the whole sweep is one compiled call.  Python-only
records (custom Functions, hooks, large matrix products) keep their closures
in ``Tape.py`` and stop the sweep there; see tape/_sweep.py.

A tape belongs to one graph.  Its result tensors hold it; it holds its leaves
and saved arrays but no result tensor, so it dies (and frees its buffers) with
the last tensor of its graph.  Combining tensors of two tapes merges the
younger into the older (``_merge``).
"""
import itertools
import struct
import threading
from threading import get_ident as _get_ident
import weakref

import numpy as np

from ._big import BIG, BIG_BASE, BIG_FLAG
from ._rules import KIND_FIELDS, RULES, TWO_INPUT_KINDS

REC = 8
PACK = struct.Struct('8q').pack
PACK_C = struct.Struct('7qd').pack       # field 7 holds a float constant
PACK_CD = struct.Struct('6q2d').pack     # ... and field 6 a second one (elementwise only)
_UNPACK = struct.Struct('8q').unpack_from
_serial = itertools.count(1)

F64 = np.float64


class _GradMode(threading.local):
    enabled = True
    inference = False       # inside inference_mode (tape/_grad_mode.py)
    open_tape = None        # weakref to the tape new graphs join (see open_tape())
    value_uses = None       # a list while tape.jit traces (see note_value_use)


grad_mode = _GradMode()


def note_value_use(what):
    """Called by ops whose result depends on tensor values in a way no record
    replays (comparisons, arg-reductions, max/min and their ties): a function
    that tape.jit traces then runs eagerly instead of replaying stale values."""
    uses = grad_mode.value_uses
    if uses is not None:
        uses.append(what)

# The threads that have recording off right now (their idents), as
# ``grad_off[0]``.  While there are none, the hot paths skip the thread-local
# lookup, which costs about a tenth of a recorded scalar op: they test
# ``not grad_off[0] or grad_mode.enabled``.  A set, not a count under a lock:
# adding and discarding an ident are atomic, and idempotent, so a mode set
# twice cannot miscount (and the toggle around every custom Function's
# forward and backward costs a third of the locked count's).
grad_off = [set()]
_off_threads = grad_off[0]


def set_grad_mode(flag):
    """Set this thread's grad mode (keeping ``grad_off`` in step); returns the old one."""
    prev = grad_mode.enabled
    if prev != flag:
        if flag:
            grad_mode.enabled = True
            _off_threads.discard(_get_ident())
        else:
            _off_threads.add(_get_ident())
            grad_mode.enabled = False
    return prev

# A graph that starts from leaves joins the thread's open tape while that tape
# is alive, never swept without retain_graph, and below this many records.
# Joining saves merging tapes when two leaf-started subgraphs meet (as in
# ``x.mm(w) + b.expand_as(y)``); the cap bounds how much memory an unrelated
# live graph can keep alive by sharing a tape, and what a backward of one
# graph pays to pack the records of the others.
ADOPT_LIMIT = 64
ADOPT_VALUES = 1 << 16      # ... and while it holds fewer saved values than this

# Bumped by every in-place change of a tensor's storage; a tape whose epoch
# matches it needs no version check at backward.
inplace_epoch = [0]


class Tape:
    """One graph's records.  ``print(tape)`` lists them."""
    __slots__ = ('rec', 'n', 'saved', 'vpos', 'attrs', 'apos', 'gpos', 'bpos',
                 'leaves', 'leafmap', 'serial', 'released', 'py', 'alias',
                 'gshift', 'rshift', 'packed', 'epoch', 'boxes',
                 'dirty', 'dead', 'dead_upto', 'freed', 'hooks', 'nodes', 'xslots',
                 'big', 'nonfloat_saved', 'strided_saved', 'hooked', 'meta', 'names',
                 '__weakref__')

    def __init__(self):
        self.rec = bytearray()  # REC int64s per record
        self.n = 0              # number of records
        self.saved = []         # arrays/scalars, concatenated into V at backward
        self.vpos = 0
        self.attrs = []         # int arrays, concatenated into A at backward
        self.apos = 0
        self.bpos = BIG_BASE    # next free big slot (tape/_big.py)
        self.gpos = 0           # next free slot
        self.leaves = []        # (leaf tensor, slot)
        self.leafmap = {}       # id(leaf) -> slot
        self.serial = next(_serial)
        self.released = False
        self.py = []            # Python records: objects with .backward(...)
        self.alias = None       # set when merged into another tape
        self.gshift = (0, 0)    # (small, big) slot offsets, once merged
        self.rshift = 0
        self.packed = None      # (R, V, A) cached by a retain_graph sweep
        self.epoch = inplace_epoch[0]
        self.boxes = []         # (version box, version when saved, record) per saved leaf/constant
        self.dirty = None       # slots of results changed in place
        # records a sweep without retain_graph used are dead: all below
        # dead_upto, plus those marked in the uint8 array dead (partial sweeps)
        self.dead = None
        self.dead_upto = 0
        self.xslots = 0         # result slots beyond one per record (multi-output Functions)
        self.big = []           # BigRecord per big record (tape/_big.py)
        # saved holds an integer or bool array (an op between a float tensor
        # and an integer one): pack must convert, it cannot join the bytes
        self.nonfloat_saved = False
        # saved holds an array that is not C-contiguous (F.linear's W.t()): pack
        # joins C-order copies of such parts without trying the plain join first
        self.strided_saved = False
        self.freed = None       # (V, A lengths) dropped when every record died
        self.hooks = None       # {record: {slot: SlotHooks}}, see tape/_hooks.py
        self.nodes = None       # grad_fn nodes handed out, by record (weak)
        self.meta = None        # {record: its grad_fn's metadata dict}
        # {record: NodeEntry or OutputOf}: composite ops' nodes (tape/_composite_nodes.py)
        self.names = None
        self.hooked = None      # True once a saved-tensor hook packed a value (_saved_hooks.py)

    # -- recording helpers ---------------------------------------------
    def leaf_slot(self, t):
        """Slot of leaf ``t`` on this tape, registering it on first use."""
        slot = self.leafmap.get(id(t))
        if slot is None:
            slot = self.alloc(t._data.size)
            self.leafmap[id(t)] = slot
            self.leaves.append((t, slot))
        t._rec = self.serial      # a leaf caches its last tape's serial...
        t._goff = slot            # ...and its slot there
        return slot

    def alloc(self, size):
        """A new slot of ``size`` elements: in the arena G, or a big slot.

        A zero-size tensor still takes one element: a slot that did not advance
        ``gpos`` would be the next tensor's too, and the sweeps (reach flags,
        the differentiable sweep's gradients by slot) would take the one for
        the other."""
        if size >= BIG:
            slot = self.bpos
            self.bpos += size
        else:
            slot = self.gpos
            self.gpos += size or 1
        return slot

    def add_attrs(self, arr):
        off = self.apos
        self.attrs.append(arr)
        self.apos += len(arr)
        return off

    def save_box(self, t, rec=None):
        """Remember the version of ``t`` (a leaf or constant) whose data record
        ``rec`` (default: the one about to be appended) saves.  Non-leaves are
        tracked by slot instead, see ``dirty``."""
        box = t._vbox
        if box is None:
            box = t._vbox = [0]
        self.boxes.append((box, box[0], self.n if rec is None else rec))

    def add_dirty(self, slot, at):
        """Slot ``slot`` was changed in place before record ``at`` was made."""
        if self.dirty is None:
            self.dirty = []
        self.dirty.append((slot, at))

    def may_be_stale(self):
        """Could ``check_versions`` raise?  False when no tensor a record saved
        has changed version and no result was changed in place: the sweep then
        skips working out which records it used.  (The global epoch that makes
        a sweep ask moves with an in-place change of any tensor at all: an
        optimizer's update, BatchNorm's running statistics.)"""
        if self.dirty:
            return True
        for box, version, _ in self.boxes:
            if box[0] != version:
                return True
        return False

    def check_versions(self, R, used):
        """Raise if a tensor saved by a record this sweep used was changed in place.

        Called after the sweep (and before anything is delivered) with ``used``,
        per record whether the sweep reached it: records of other graphs on the
        tape do not count.
        """
        for box, version, k in self.boxes:
            if box[0] != version and k < len(R) and used[k]:
                raise RuntimeError(
                    'one of the variables needed for gradient computation has been '
                    f'modified by an inplace operation: the tensor saved by '
                    f'{RULES[R[k, 0] & ~BIG_FLAG].node} (record {k}) is at version '
                    f'{box[0]}; expected version {version} instead. Hint: the tensor was '
                    'changed in place after the op used it; change a copy (clone()) instead.')
        if not self.dirty:
            return
        # records before a change that read the changed slot's saved value; all
        # changes at once (a loop writing into a graph tensor makes one entry a
        # write, and a pass over the records per entry was quadratic): per
        # changed slot the last change, looked up for every record's fields
        ops = R[:, 0] & ~BIG_FLAG
        dirty = np.array(self.dirty, np.int64).reshape(-1, 2)
        dirty = dirty[np.lexsort((dirty[:, 1], dirty[:, 0]))]
        last = np.r_[dirty[1:, 0] != dirty[:-1, 0], True]
        slots, last_at = dirty[last, 0], dirty[last, 1]
        order = np.arange(len(R))
        hit = np.zeros(len(R), bool)
        for f in (1, 3, 4):
            vals = R[:, f]
            j = np.minimum(np.searchsorted(slots, vals), len(slots) - 1)
            saved = _SAVED_AT[f][ops]
            if f != 1:      # an operand read only for the other's gradient, if it has none
                saved = saved & ~((FOR_OTHER[ops] & (1 if f == 3 else 2) != 0)
                                  & (R[:, 7 - f] < 0))
            hit |= saved & (slots[j] == vals) & (order < last_at[j])
        hit &= np.asarray(used[:len(R)], bool)
        if hit.any():
            k = int(np.argmax(hit))
            raise RuntimeError(
                'one of the variables needed for gradient computation has '
                'been modified by an inplace operation: the tensor saved by '
                f'{RULES[ops[k]].node} (record {k}) was changed after it was saved.')

    def dead_mask(self):
        """uint8 per record, 1 where dead (None when nothing is).

        A record is dead once a sweep without retain_graph used it and it saves
        values; ``dead_upto`` says that of every saving record below it (the
        usual, cheap case), the array ``dead`` of individual records."""
        if self.dead is None and not self.dead_upto:
            return None
        mask = np.zeros(self.n, np.uint8)
        if self.dead is not None:
            mask[:len(self.dead)] = self.dead
        if self.dead_upto:
            ops = np.frombuffer(self.rec, np.int64)[0:self.dead_upto * REC:REC]
            mask[:self.dead_upto] |= SAVING[ops & ~BIG_FLAG]
        return mask

    def is_dead(self, k):
        if k < self.dead_upto and SAVING[_UNPACK(self.rec, k * 8 * REC)[0] & ~BIG_FLAG]:
            return True
        return self.dead is not None and k < len(self.dead) and bool(self.dead[k])

    def record(self, k):
        """Record k as a tuple of its 8 fields."""
        op, out, n, a, b, v, ax, x = _UNPACK(self.rec, k * 8 * REC)
        return (op & ~BIG_FLAG, out, n, a, b, v, ax, x)

    def __repr__(self):
        state = 'partly released' if self.released else 'live'
        return f'<Tape #{self.serial}: {self.n} records, {self.gpos} gradient slots, {state}>'

    def __str__(self):
        """One line per leaf and per record: what it computed, from which slots,
        what its backward reads, and whether a sweep has freed it."""
        lines = [repr(self)]
        for t, slot in self.leaves:
            lines.append(f'  leaf          slot {_slot_name(slot):>8}  shape '
                         f'{tuple(t._data.shape)} {t._data.dtype}')
        for k in range(self.n):
            raw = _UNPACK(self.rec, k * 8 * REC)
            op, out, n, a, b, v, ax, x = self.record(k)
            rule = RULES[op]
            if rule.kind == 'python':
                ins = 'Python (custom Function)'
            else:
                arity = len(rule.inputs) if rule.kind == 'elementwise' else \
                    (2 if rule.kind in TWO_INPUT_KINDS else 1)
                ins = ', '.join('const' if s < 0 else f'slot {_slot_name(s)}'
                                for s in (a, b)[:arity])
                for name, field in zip(rule.consts, (7, 6)):
                    c = struct.unpack('d', struct.pack('q', raw[field]))[0]
                    ins += f', {name}={c:g}'
            saves = ('  saves ' + '+'.join(rule.saves)) if rule.saves else ''
            big = '  (large: swept in NumPy)' if raw[0] & BIG_FLAG else ''
            dead = '  [freed]' if self.is_dead(k) else ''
            lines.append(f'  {k:>4} {rule.name:<12} slot {_slot_name(out):>8} [{n}] <- {ins}'
                         f'   {rule.node}{saves}{big}{dead}')
        return '\n'.join(lines)


def _slot_name(slot):
    return f'B{slot - BIG_BASE}' if slot >= BIG_BASE else str(slot)


def open_tape():
    """The tape a graph starting from leaves records onto."""
    ref = grad_mode.open_tape
    if ref is not None:
        tape = ref()
        if tape is not None and not tape.released and tape.n < ADOPT_LIMIT \
                and tape.vpos < ADOPT_VALUES and not tape.big and tape.alias is None \
                and not tape.hooked:
            # (not a tape with values saved-tensor hooks packed: a backward of an
            # unrelated graph on it would call their unpack hooks)
            return tape
    tape = Tape()
    ref = grad_mode.open_tape = weakref.ref(tape)
    _live.append(ref)
    if len(_live) > _live_limit[0]:
        _prune_live()
    if saved_hooks_active[0]:
        from ._saved_hooks import install
        install(tape)
    return tape


# Weak references to the tapes open_tape made (the weakref it makes anyway):
# entering a saved-tensor hook context must reach every live tape
# (tape/_saved_hooks.py).  Dead references are pruned when the list has
# doubled since the last pruning, so appending stays O(1) amortised.
_live = []
_live_limit = [64]
saved_hooks_active = [0]        # saved_tensors_hooks contexts open (any thread)


def _prune_live():
    _live[:] = [r for r in _live if r() is not None]
    _live_limit[0] = max(64, 2 * len(_live))


def live_tapes():
    """The tapes open_tape made that are still alive."""
    _prune_live()
    return [t for t in (r() for r in _live) if t is not None]


# a tape stale tensors moved their histories onto -> the stale tapes (tape/_reroot.py)
MOVED_ONTO = weakref.WeakKeyDictionary()


def shift_slot(slot, shift):
    """Where ``slot`` moved when its tape was merged: (small, big) offsets."""
    if slot < 0:
        return slot
    return slot + (shift[1] if slot >= BIG_BASE else shift[0])


# A tape's alias when a backward released it whole (tape/_reroot.py): not None,
# so the fast paths take the general one, which resolves.
STALE = type('Stale', (), {'__repr__': lambda self: 'STALE', '__slots__': ()})()


def resolve(t, move=True):
    """Follow merges: make ``t._tape`` the live tape its records now sit on (for a
    tape a backward released, stale: a new one when ``t``'s history can move,
    see tape/_reroot.py; with ``move`` False only if it has moved already)."""
    tape = t._tape
    while tape.alias is not None:
        if tape.alias is STALE:
            from ._reroot import reroot
            t._tape = tape          # (its slot and record are shifted to this tape)
            return reroot(t, move)
        t._goff = shift_slot(t._goff, tape.gshift)
        t._rec += tape.rshift
        tape = tape.alias
    t._tape = tape
    return tape


# Record fields holding the slots whose values a structural kind saves (the
# rest default to every slot the record touches).  A custom Function's saved
# tensors check their own versions (tape/autograd/function.py), so changing
# its output in place does not make its record stale.
_SAVED_FIELDS = {'mm': (3, 4), 'bmm': (3, 4), 'lse': (3, 1), 'cumprod': (3, 1), 'python': ()}



def _saved_at(field):
    """Per opcode: does the record save the value of the slot in ``field``?"""
    out = []
    for r in RULES:
        if r.kind == 'elementwise':
            out.append({1: 'out', 3: 'a', 4: 'b'}[field] in r.saves)
        else:
            out.append(bool(KIND_FIELDS[r.kind][2])
                       and field in _SAVED_FIELDS.get(r.kind, (1, 3, 4)))
    return np.array(out, bool)


_SAVED_AT = {f: _saved_at(f) for f in (1, 3, 4)}
# per opcode, Rule.for_other: a saved input read only by the other input's
# gradient, which a record whose other input needs none does not read
FOR_OTHER = np.array([r.for_other for r in RULES], np.int64)

# per opcode: does the record die after a backward without retain_graph?  Its
# backward reads saved values, or PyTorch's node saves what the record keeps
# in its fields (rule.frees: a wrapped scalar, indices, a mask).  Not 'put'
# and 'setitem': cat and stack are built of them, and CatBackward0 saves nothing.
SAVING = np.array([(bool(r.saves) if r.kind == 'elementwise' else KIND_FIELDS[r.kind][2])
                   or r.frees for r in RULES])
# ... but a custom Function's record: its ctx frees what it saved (tape/_sweep.py release)
SAVING[[k for k, r in enumerate(RULES) if r.kind == 'python']] = False
_V_OFFSET = np.array([KIND_FIELDS[r.kind][0] for r in RULES])
_A_OFFSET = np.array([KIND_FIELDS[r.kind][1] for r in RULES])
_IS_PYTHON = np.array([r.kind == 'python' for r in RULES])
_V_OFFSETS, _A_OFFSETS, _PYTHONS = (tuple(a.tolist()) for a in (_V_OFFSET, _A_OFFSET,
                                                                 _IS_PYTHON))


_SMALL_MERGE = 16       # records: below this, shift them one by one in Python


def _shifted_rows(src, gs, bs, vs, as_, nbig, npy, remap):
    """src's records moved to the end of another tape (slots by gs/bs, V, A,
    big and Python indices by the destination's sizes; leaf slots per
    ``remap``), one record at a time: a merge of a few records (a loop joining
    ``x[i]`` of a leaf to a long graph) cost ~50 us in NumPy's fixed overheads.
    The float fields (constants) are moved as their bits."""
    out = bytearray()
    rec = src.rec
    for k in range(src.n):
        op, f1, n, f3, f4, f5, f6, f7 = _UNPACK(rec, k * 8 * REC)
        big = op & BIG_FLAG
        o = op & ~BIG_FLAG
        f1, f3, f4 = [c + bs if c >= BIG_BASE else c + gs if c >= 0 else c
                      for c in (f1, f3, f4)]
        f3 = remap.get(f3, f3)
        f4 = remap.get(f4, f4)
        if big:
            f5 += nbig
        elif _V_OFFSETS[o]:
            f5 += vs
        if _PYTHONS[o]:
            f6 += npy
        elif _A_OFFSETS[o] and not big:
            f6 += as_
        out += PACK(op, f1, n, f3, f4, f5, f6, f7)
    return out


def _shifted_array(src, gs, bs, vs, as_, nbig, npy, remap):
    """``_shifted_rows`` for many records, in NumPy."""
    R = np.frombuffer(bytes(src.rec), np.int64).reshape(-1, REC).copy()
    isbig = (R[:, 0] & BIG_FLAG) != 0
    ops = R[:, 0] & ~BIG_FLAG
    for col in (1, 3, 4):
        c = R[:, col]
        R[:, col] = np.where(c >= BIG_BASE, c + bs, np.where(c >= 0, c + gs, c))
    # big records: v indexes tape.big and their attributes live there
    R[:, 5] = np.where(isbig, R[:, 5] + nbig,
                       np.where(_V_OFFSET[ops], R[:, 5] + vs, R[:, 5]))
    R[:, 6] = np.where(_IS_PYTHON[ops], R[:, 6] + npy,
                       np.where(_A_OFFSET[ops] & ~isbig, R[:, 6] + as_, R[:, 6]))
    for old, to in remap.items():
        for col in (3, 4):
            c = R[:, col]
            c[c == old] = to
    return R.tobytes()


def merge(dst, src):
    """Append ``src``'s records to ``dst``; ``src`` becomes an alias of it."""
    src_saved = src.saved           # (its hooks' packed values, if any, by index)
    prefix = 0
    if src.freed is not None:     # materialise src's dropped prefix so offsets hold
        fv, fa = src.freed
        src.saved = [np.zeros(fv)] + src.saved
        src.attrs = [np.zeros(fa, np.int64)] + src.attrs
        src.freed = None
        prefix = 1
    gs, vs, as_, rs = dst.gpos, dst.vpos, dst.apos, dst.n
    bs = dst.bpos - BIG_BASE
    shift = (gs, bs)
    # A leaf on both tapes: src's records read dst's slot for it, so its
    # gradient collects in one place (for a large leaf, one array instead of
    # two to write and add).  Python records keep their own slot lists, so a
    # src with any keeps the two slots; delivery then adds both.
    remap = {}
    shared = set()
    if not src.py:
        for t, slot in src.leaves:
            to = dst.leafmap.get(id(t))
            if to is not None:
                remap[shift_slot(slot, shift)] = to
                shared.add(id(t))
    if src.n <= _SMALL_MERGE:
        dst.rec += _shifted_rows(src, gs, bs, vs, as_, len(dst.big), len(dst.py), remap)
    else:
        dst.rec += _shifted_array(src, gs, bs, vs, as_, len(dst.big), len(dst.py), remap)
    for p in src.py:
        p.shift(shift)
    if src.hooks:
        if dst.hooks is None:
            dst.hooks = {}
        for rec, per in src.hooks.items():
            for h in per.values():
                h.shift(shift)
            dst.hooks.setdefault(rec + rs, {}).update({h.slot: h for h in per.values()})
    dst.py.extend(src.py)
    dst.n += src.n
    if src.hooked:
        from ._saved_hooks import merge_packs
        merge_packs(dst, src_saved, len(dst.saved) + prefix)
        dst.hooked = True           # (src's large records keep their packed values)
    dst.saved.extend(src.saved)
    dst.vpos += src.vpos
    dst.nonfloat_saved = dst.nonfloat_saved or src.nonfloat_saved
    dst.strided_saved = dst.strided_saved or src.strided_saved
    dst.attrs.extend(src.attrs)
    dst.apos += src.apos
    for t, slot in src.leaves:
        if id(t) not in shared:
            dst.leafmap.setdefault(id(t), shift_slot(slot, shift))
            dst.leaves.append((t, shift_slot(slot, shift)))
    dst.gpos += src.gpos
    dst.bpos += src.bpos - BIG_BASE
    dst.xslots += src.xslots
    dst.big.extend(src.big)
    dst.boxes.extend((box, ver, k + rs) for box, ver, k in src.boxes)
    dst.epoch = min(dst.epoch, src.epoch)
    if src.dirty:
        dst.dirty = (dst.dirty or []) + [(shift_slot(s, shift), at + rs) for s, at in src.dirty]
    dst.released = dst.released or src.released
    dm, sm = dst.dead_mask(), src.dead_mask()
    if dm is not None or sm is not None:
        dead = np.zeros(dst.n, np.uint8)
        if dm is not None:
            dead[:len(dm)] = dm
        if sm is not None:
            dead[rs:rs + len(sm)] = sm
        dst.dead = dead
        dst.dead_upto = 0
    dst.packed = None
    if src.meta:
        dst.meta = dst.meta or {}
        dst.meta.update({k + rs: d for k, d in src.meta.items()})
        src.meta = None
    if src.names:
        dst.names = dst.names or {}
        dst.names.update({k + rs: e.shifted(rs, shift, remap) for k, e in src.names.items()})
        src.names = None
    src.nodes = None
    src.alias = dst
    src.gshift = shift
    src.rshift = rs
    if src in MOVED_ONTO:
        # stale tapes moved records onto src (tape/_reroot.py): point them at dst
        from ._reroot import _successor
        for p in list(MOVED_ONTO.pop(src)):
            _successor(p)
    # free src's buffers: dst owns them now
    src.rec = src.saved = src.attrs = src.leaves = src.py = None
    src.leafmap = {}
