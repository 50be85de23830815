"""The reverse sweep driver: pack a tape, run the compiled sweep, deliver gradients.

``run`` turns the tape's lists into three arrays (``R`` records, ``V`` saved
values, ``A`` integer attributes) and calls the Numba sweep in
``compiler/_sweep_generated.py`` over the gradient arena ``G``.  The sweep
returns to Python only at records that need it (custom Functions, hooks,
rarely used rules, large tensors, BLAS-sized products); Python runs that
record and calls the sweep again from the next one.  ``run_scalar`` is the
same for the common ``loss.backward()``, with less generality; for a tape
of custom Functions only it calls their ``backward`` directly
(``_run_python``: no arrays packed, no arena, no kernel).

Without ``retain_graph`` the records the sweep used are released (see
``release``) and a second backward through them raises; with it, the packed
arrays are kept so the next sweep starts at once (the sweep never writes to
them: each sweep gets a fresh ``G``, which is the "clone" of the tape's
mutable state).
"""
import logging
import struct
import threading

import numpy as np

from . import _graph_task
from ._fpwarn import raises as _fp_raises
from ._graph_task import pending as _task_pending
from ._big import BIG_BASE, BIG_FLAG, Grads, SlotGrads, sweep_chain, sweep_record
from ._pool import ALIGN_MIN as _ALIGN_MIN, pool as _pool
from ._rules import OP, RULES
from ._reroot import mark_stale
from ._tape import REC, SAVING, grad_mode, inplace_epoch, resolve, set_grad_mode
from ._tensor import _leaf
from ._views import forget_released_view_tapes

SECOND_BACKWARD = (
    'Trying to backward through the graph a second time (or directly access saved tensors '
    'after they have already been freed). Saved intermediate values of the graph are freed '
    'when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to '
    'backward through the graph a second time or if you need to access saved tensors after '
    'calling backward.')

_PYTHON_OP = OP['python']
_EMPTY_F = np.zeros(1)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_EMPTY_I = np.zeros(1, dtype=np.int64)
_NO_INTS = np.zeros(0, dtype=np.int64)
_kernel = None
_cold_table = None


def _cold():
    global _cold_table
    if _cold_table is None:
        from compiler._sweep_generated import COLD
        _cold_table = COLD
    return _cold_table


# The sweep this process runs dispatches only the hot opcodes its graphs have
# used so far (``_ops``): a dispatcher generated for that set and cached on
# disk like any generated kernel (compiler/codegen.py dispatcher_source), so a
# first backward compiles the kernels of its own graph (1.6 s cold for a tanh
# chain) and not every hot kernel (5.7 s).  A record with a hot opcode outside
# the set comes back to Python, which widens the set and sweeps on with the
# new dispatcher.  After WIDEN_LIMIT widenings (a program that keeps meeting
# new ops, a test suite) it takes the full sweep at once rather than compile
# dispatcher after dispatcher.  DISPATCH = False (or no cache directory) uses
# the full sweep from the start.
DISPATCH = True
WIDEN_LIMIT = 3
_widened = 0
_ops = frozenset()
_hot = None
_lock = threading.Lock()
_log = logging.getLogger('tape')


def _hot_ops():
    global _hot
    if _hot is None:
        from compiler._sweep_generated import HOT_OPS
        _hot = HOT_OPS
    return _hot


def _extend(R):
    """Make ``_kernel`` dispatch every hot opcode of the records R too; return it."""
    global _kernel, _ops, _widened
    hot = _hot_ops()
    want = {int(op) for op in np.unique(R[:, 0]) if int(op) in hot}
    with _lock:
        if _kernel is not None and want <= _ops:
            return _kernel
        ops = _ops | want
        fn = None
        _widened += 1
        if DISPATCH and _widened <= WIDEN_LIMIT:
            from compiler import codegen, fuse
            fn = fuse.load('tape_sweep', codegen.dispatcher_source(ops), 'sweep')
        if fn is None:
            from compiler._sweep_generated import sweep as fn
            ops = hot
        _kernel, _ops = fn, frozenset(ops)
        # say when the sweep changes (a new dispatcher compiles, or loads from
        # the cache): logging.getLogger('tape').setLevel(logging.INFO) shows it
        if ops is hot:
            _log.info('sweep: the full dispatcher (all %d hot ops)', len(ops))
        else:
            _log.info('sweep: a dispatcher over %d ops (%d of at most %d per process)',
                      len(ops), _widened, WIDEN_LIMIT)
    return fn


def kernel(R):
    """The compiled sweep, able to dispatch every hot opcode of the records R
    (a row or two: a record run by itself; a whole tape's misses are widened
    as the sweep meets them, in ``_python_record``)."""
    fn = _kernel
    if fn is None or not all(int(op) in _ops or int(op) not in _hot_ops() for op in R[:, 0]):
        fn = _extend(R)
    return fn


def reset_dispatch(dispatch=True):
    """Forget the current sweep (the next backward builds one); for tests."""
    global _kernel, _ops, DISPATCH, _widened
    with _lock:
        _kernel, _ops, DISPATCH, _widened = None, frozenset(), dispatch, 0


def pack(tape, f64=False):
    """The tape as arrays: R (records), V (saved values), A (int attributes).

    V, and with it the gradient arena of a sweep, is float32 when every saved
    value and every leaf is float32 (a float32 model: its gradients are then
    computed in float32, as PyTorch computes them, without a float64 round
    trip per array), else float64; ``f64`` forces float64.

    R views a copy of the records' bytes: a view of the tape's bytearray would
    lock it against growing for as long as anything (an exception's
    traceback, say) holds R.
    """
    packed = tape.packed
    if packed is not None and packed[0] == tape.n and not (f64 and packed[2].dtype != _F64):
        return packed[1:]
    rec = tape.rec[:]
    R = np.ndarray((len(rec) // (8 * REC), REC), _I64, rec)
    saved, attrs = tape.saved, tape.attrs
    if tape.hooked:
        # saved-tensor hooks packed values: each backward reads what unpack_hook
        # gives (tape/_saved_hooks.py), so a retained tape is not cached packed
        from ._saved_hooks import unpacked_saved
        saved = unpacked_saved(tape)
    if tape.freed is not None:
        fv, fa = tape.freed
        saved = [np.zeros(fv, np.float32)] + saved
        attrs = [np.zeros(fa, np.int64)] + attrs
    if not saved:
        V = _EMPTY_F
    elif len(saved) == 1 and type(saved[0]) is np.ndarray and saved[0].flags.c_contiguous \
            and saved[0].flags.writeable and saved[0].dtype in (_F32, _F64):
        # (writeable: Numba compiles a read-only array as another type)
        V = saved[0].reshape(-1)                # one saved array: a view, no copy
        if V.dtype != _F64 and (f64 or _wide_leaf(tape)):
            V = V.astype(np.float64)
    else:
        V = _joined(tape, saved) if tape.freed is None and not tape.nonfloat_saved else None
        if V is None:
            V = np.concatenate(saved, axis=None)    # float32 only if every part is
        if V.dtype != _F32 or f64 or _wide_leaf(tape):
            V = V.astype(np.float64, copy=False)
    A = _joined_attrs(tape, attrs) if attrs else _EMPTY_I
    return R, V, A


def _joined_attrs(tape, attrs):
    """The attributes as one int64 array: ``np.concatenate(attrs, dtype=int64)``
    without its cost on the usual few int64 index maps.  One array that the
    sweep can read as is (int64, contiguous, writeable: Numba compiles a
    read-only array as another type) is used as is, a view (the sweep never
    writes A); several are joined by their bytes when that gives 8 bytes an
    element (every part int64: NumPy's integer and bool types are at most 8
    bytes wide, and float attributes cannot be concatenated as int64 at all).
    """
    if len(attrs) == 1:
        a = attrs[0]
        if type(a) is np.ndarray and a.dtype == _I64 and a.ndim == 1:
            flags = a.flags
            if flags.c_contiguous and flags.writeable:
                return a
    else:
        try:
            buf = bytearray().join(attrs)
        except TypeError:
            buf = None
        if buf is not None and len(buf) == 8 * tape.apos and all(
                type(a) is np.ndarray and a.ndim == 1 for a in attrs):
            return np.frombuffer(buf, _I64)
    return np.concatenate(attrs, axis=None, dtype=np.int64)


def _joined(tape, saved=None):
    """The saved values as one array by joining their bytes, or None.

    Three times faster than ``np.concatenate`` on many small arrays (about
    30 ns an array against 100; a 100-step chain saves 300).  It applies when
    every part is float64, or every part float32: the tape holds only floats
    (``nonfloat_saved`` is False), so the joined length tells which.  A mix
    gives None, and ``np.concatenate`` converts as before.
    """
    if not tape.vpos:
        return None
    if saved is None:
        saved = tape.saved
    try:
        if tape.strided_saved:
            raise TypeError     # (known to hold one: skip the plain join's failing try)
        buf = bytearray().join(saved)     # a bytearray: V must be writeable
    except TypeError:
        # a part that is not contiguous (F.linear's transposed weight): its
        # bytes in C order, a copy that np.concatenate would make too
        try:
            buf = bytearray().join([s if type(s) is not np.ndarray or s.flags.c_contiguous
                                    else s.tobytes() for s in saved])
        except TypeError:
            return None
    if len(buf) == 8 * tape.vpos:
        return np.frombuffer(buf, _F64)
    if len(buf) == 4 * tape.vpos:
        return np.frombuffer(buf, _F32)
    return None


def _wide_leaf(tape):
    """Is a leaf of the tape wider than float32 (so the arena must be float64)?"""
    for leaf, _ in tape.leaves:
        if leaf._data.dtype != _F32:
            return True
    return False


def _arena_for(V, roots):
    """V as the sweep needs it: float64 when a root (the seed's tensor) is not float32."""
    if V.dtype == _F32:
        for r in roots:
            if r._data.dtype != _F32:
                return V.astype(np.float64)
    return V


def _graph_of(roots):
    if len(roots) == 1:
        t = roots[0]._tape
        if t is None or t.alias is None:
            return t
    from ._ops import tape_of_all
    return tape_of_all(roots, new=False)


def _python_record(tape, k, R, G, V, A, reach, grads, stop=-1, keep=(), numpy=False,
                   needed=None):
    """Run record k in Python; return the lowest record index handled."""
    op = int(R[k, 0])
    if op == _PYTHON_OP:
        tape.py[R[k, 6]].backward(grads)
        return k
    if op & BIG_FLAG:
        # (first: no hot or cold opcode carries the flag)
        if RULES[op & ~BIG_FLAG].kind == 'elementwise':
            return sweep_chain(tape, k, R, grads, stop, keep, needed)
        sweep_record(tape, k, R, A, grads, keep, needed)
        return k
    if op not in _ops and op in _hot_ops():
        # a hot opcode this process's sweep does not dispatch yet: widen it, and
        # have the caller sweep on from this record
        _extend(R)
        return k + 1
    if not numpy and not op & BIG_FLAG and RULES[op].kind == 'bmm' and _bmm_numpy(R, k, G, V):
        return k
    cold = None if numpy else _cold().get(op)
    if cold is not None:
        # a rule outside the sweep's hot set (compiler/codegen.py); the sweep
        # already checked its reach and marked its inputs
        go, n, g0, g1, v, ax, x = R[k, 1:].tolist()
        if cold(R.view(np.float64), G, V, A, k, go, n, g0, g1, v, ax, x) >= 0:
            return _python_record(tape, k, R, G, V, A, reach, grads, stop, keep, True, needed)
        return k
    rule = RULES[op]
    if rule.kind == 'mm':
        go, g0, g1, v, ax = R[k, 1], R[k, 3], R[k, 4], R[k, 5], R[k, 6]
        m, kk = ax, R[k, 7]
        nn = R[k, 2] // m
        gout = G[go:go + m * nn].reshape(m, nn)
        if g0 >= 0:
            b = V[v + m * kk:v + m * kk + kk * nn].reshape(kk, nn)
            G[g0:g0 + m * kk] += (gout @ b.T).ravel()
        if g1 >= 0:
            a = V[v:v + m * kk].reshape(m, kk)
            G[g1:g1 + kk * nn] += (a.T @ gout).ravel()
        return k
    tape.py[R[k, 6]].backward(grads)
    return k


BMM_NUMPY_FROM = 4096      # multiply-adds of one batched product


def _bmm_numpy(R, k, G, V):
    """Sweep small bmm record k with NumPy's stacked matmul (the layout of
    compiler.codegen's 'bmm' kind): the compiled kernel's scalar loops took 7x
    as long on attention's (32, 16, 16) batches.  False, leaving the record to
    the kernel, below ``BMM_NUMPY_FROM`` multiply-adds, where NumPy's call
    overhead dominates."""
    go, n, g0, g1, v, m, x = R[k, 1:].tolist()
    kk, nn = x >> 32, x & 0xFFFFFFFF
    bb = n // (m * nn) if n > 0 else 0
    if bb * m * kk * nn < BMM_NUMPY_FROM:
        return False
    gout = G[go:go + n].reshape(bb, m, nn)
    vb = v + bb * m * kk
    if g0 >= 0:
        b = V[vb:vb + bb * kk * nn].reshape(bb, kk, nn)
        G[g0:g0 + bb * m * kk] += np.matmul(gout, b.transpose(0, 2, 1)).reshape(-1)
    if g1 >= 0:
        a = V[v:v + bb * m * kk].reshape(bb, m, kk)
        G[g1:g1 + bb * kk * nn] += np.matmul(a.transpose(0, 2, 1), gout).reshape(-1)
    return True


def run(roots, grads, retain_graph, inputs=None, accumulate=True):
    """Sweep the tape of ``roots`` seeded with ``grads`` (arrays, one per root).

    Accumulates into the ``.grad`` of reached leaves when ``accumulate``; returns
    the gradients of ``inputs`` (None where unreached) when given.
    """
    _graph_task.enter()
    try:
        if not _fp_raises():
            result = _run(roots, grads, retain_graph, inputs, accumulate)
        else:
            with np.errstate(all='ignore'):
                result = _run(roots, grads, retain_graph, inputs, accumulate)
    except BaseException:
        _graph_task.leave()
        if _task_pending[0]:
            _graph_task.abort()
        raise
    _graph_task.leave()
    if _task_pending[0]:
        _graph_task.finish()        # hooks that act once per backward (tape/_graph_task.py)
    return result


def _run(roots, grads, retain_graph, inputs, accumulate):
    tape = _graph_of(roots)
    if tape is None:
        # every root is a leaf: its gradient is the seed itself
        return _leaf_only(roots, grads, inputs, accumulate)
    dead = tape.dead is not None or tape.dead_upto
    if dead:
        for r in roots:
            if r._tape is tape and tape.is_dead(r._rec):
                raise RuntimeError(SECOND_BACKWARD)
    R, V, A = pack(tape)
    V = _arena_for(V, roots)
    G = np.zeros(tape.gpos, V.dtype)
    reach = np.zeros(tape.gpos, np.uint8)
    store = Grads(G, reach)
    if _kernel is None:
        _extend(R)
    start = -1
    for r, g in zip(roots, grads):
        if r._tape is None:
            continue
        s = r._goff
        if type(g) is float and s < BIG_BASE:
            G[s] += g
            reach[s] = 1
        else:
            store.add(s, r._data.size, g)
        if r._rec > start:
            start = r._rec
    # non-leaf tensors whose gradient autograd.grad returns must not be fused away
    keep = {x._goff for x in inputs if x._tape is tape} if inputs is not None else ()
    # autograd.grad with respect to non-leaf tensors only: the records that made
    # them (and everything below) are not needed, as PyTorch's engine does not
    # run them (they may have been freed by an earlier backward)
    floor = -1
    if inputs is not None and not accumulate and inputs and all(x._tape is tape for x in inputs):
        floor = min(x._rec for x in inputs)
    # PyTorch's engine runs only the nodes on a path to an input: the others
    # are neither run (custom Functions, hooks) nor checked nor freed (a later
    # grad may need them)
    needed = needed_for(tape, R, inputs) if inputs is not None else None
    if needed is not None and needed.all():
        needed = None                           # (every record leads to an input)
    hooks = tape.hooks
    stops = sorted((h for h in hooks if floor <= h <= start), reverse=True) if hooks else []
    if not stops or stops[-1] != floor:
        stops.append(floor)
    if needed is not None and hooks:
        ends = {x._rec for x in inputs if x._tape is tape}     # an input's own hooks run
    k = start
    for stop in stops:
        # records k .. stop+1 in the kernel, Python records as they come
        while k > stop:
            if not R[k, 0] & BIG_FLAG:      # (the kernel hands a big record back at once)
                k = _kernel(R, G, V, A, reach, k, stop)
                if k < 0:
                    break
            if needed is not None and not needed[k]:
                k -= 1                  # off every path to an input: not run
                continue
            if dead:
                _check_dead_above(tape, R, store, needed, k)
            k = _python_record(tape, k, R, G, V, A, reach, store, stop, keep,
                               needed=needed) - 1
        k = stop
        if stop >= 0 and hooks and stop in hooks and (needed is None or needed[stop]
                                                      or stop in ends):
            if dead:
                _check_dead_above(tape, R, store, needed, stop)
            # the record's own node hooks only if the engine runs it: not the record
            # that made an input, below which nothing leads to an input
            run_node = stop != floor and (needed is None or bool(needed[stop]))
            if run_node:
                from ._hooks import run_unused_outputs
                run_unused_outputs(tape, R[stop].tolist(), hooks[stop], store.reached)
            for h in hooks[stop].values():
                if store.reached(h.slot) and h.run_compiled(store, tape, stop, R, V, A,
                                                            run_node=run_node):
                    k = stop - 1    # node hooks ran the record itself (tape/_hooks.py)
    used = None
    # (something changed in place since recording: a tensor this graph saved?)
    stale = tape.epoch != inplace_epoch[0] and tape.may_be_stale()
    if dead or stale or floor >= 0 or needed is not None:
        used = store.reached_records(R)
        if needed is not None:
            used &= needed
        used[:floor + 1] = False                # records below the inputs were not swept
        if dead and np.any(tape.dead_mask() & used[:tape.n]):
            raise RuntimeError(SECOND_BACKWARD)
        if stale:
            tape.check_versions(R, used)
    result = None
    if inputs is not None:
        result = [_grad_of(tape, x, store) for x in inputs]
    if accumulate:
        for leaf, s in tape.leaves:
            _deliver(leaf, s, store)
        for r, g in zip(roots, grads):
            if r._tape is None:
                _accumulate(r, g)
    if retain_graph:
        if not tape.hooked:
            tape.packed = (tape.n, R, V, A)
    elif floor >= 0 or needed is not None:
        release(tape, used, R)
    else:
        release(tape, None if store.all_reached(tape) else store.reached_records(R), R)
    return result



def _check_dead_above(tape, R, store, needed, k):
    """Before Python code (a custom Function, a hook) runs at record k: raise if
    the sweep went through a freed record above it, as PyTorch's engine raises
    at that node before it reaches the Python one."""
    used = store.reached_records(R)
    if needed is not None:
        used &= needed
    used[:k + 1] = False
    if np.any(tape.dead_mask()[:len(used)] & used[:tape.n]):
        raise RuntimeError(SECOND_BACKWARD)


def needed_for(tape, R, inputs):
    """Per record of R: does its result depend on one of ``inputs`` (the records
    a gradient with respect to them passes through)?  None when every record
    does: each record depends on some leaf of its tape, so when every leaf is
    an input (``grad(loss, params)``) there is nothing to look up."""
    ids = {id(x) for x in inputs}
    if all(id(leaf) in ids for leaf, _ in tape.leaves):
        return None
    targets = []
    for x in inputs:
        if x._tape is tape:
            targets.append(x._goff)
        else:
            targets.extend(s for leaf, s in tape.leaves if leaf is x)
    n = len(R)
    dep = np.zeros(n, np.bool_)
    if not targets or not n:
        return dep
    py_row = ins = outs = ins_at = outs_at = _NO_INTS
    if tape.py:
        py_row = np.full(n, -1, np.int64)
        ins, outs, ins_at, outs_at = [], [], [0], [0]
        for j, k in enumerate(np.nonzero(R[:, 0] == _PYTHON_OP)[0].tolist()):
            p = tape.py[int(R[k, 6])]
            py_row[k] = j
            ins.extend(p.in_slots)
            outs.extend(p.out_slots)
            ins_at.append(len(ins))
            outs_at.append(len(outs))
        ins, outs = np.array(ins, np.int64), np.array(outs, np.int64)
        ins_at, outs_at = np.array(ins_at, np.int64), np.array(outs_at, np.int64)
    targets = np.array(targets, np.int64)
    if tape.bpos == BIG_BASE:
        # small slots only: mark them by slot number
        mark = np.zeros(tape.gpos + 1, np.uint8)
        Rs = R
    else:
        # large slots are numbered from BIG_BASE on: number every slot afresh
        every = np.concatenate([R[:, 1], R[:, 3], R[:, 4], ins, outs, targets])
        slots = np.unique(every[every >= 0])

        def compact(s):
            return np.where(s >= 0, np.searchsorted(slots, s), -1)
        Rs = R.copy()
        for f in (1, 3, 4):
            Rs[:, f] = compact(R[:, f])
        ins, outs, targets = compact(ins), compact(outs), compact(targets)
        mark = np.zeros(len(slots), np.uint8)
    mark[targets] = 1
    _depends_on(Rs, py_row, ins_at, ins, outs_at, outs, mark, dep)
    return dep


def _depends_on(*args):
    global _depends_on
    from compiler.kernels import depends_on
    _depends_on = depends_on          # import (and compile) on first use only
    depends_on(*args)


def run_scalar(root, retain_graph, seed=None):
    """``loss.backward()`` for a one-element non-leaf (``seed`` None), or
    ``y.backward(seed)`` for one non-leaf ``y`` and an array ``seed`` of its
    shape: ``run`` without its generality.

    The common case of every training step, so every call saved here counts.
    """
    try:        # (free unless something raises)
        if not _fp_raises():
            _run_scalar(root, retain_graph, seed)
        else:
            with np.errstate(all='ignore'):
                _run_scalar(root, retain_graph, seed)
    except BaseException:
        if _task_pending[0]:
            _graph_task.abort()
        raise
    if _task_pending[0]:
        _graph_task.finish()        # hooks that act once per backward (tape/_graph_task.py)


_SAVE_NAMES = ('a', 'b', 'out')
_lone_rules = {}    # op -> (chunk kernel, input 0 has a VJP, input 1 has one, saves), or None


def _lone_rule(op):
    """What ``_run_lone`` needs of rule ``op``, worked out once per op: its
    chunk kernel (compiler/_chunk_generated.py), which inputs have a VJP, and
    which of a, b, out it saves (in that order on the tape); None where it
    has no chunk kernel."""
    info = None
    if op & BIG_FLAG:       # (a big record's result is not in a small slot)
        _lone_rules[op] = info
        return info
    rule = RULES[op]
    if rule.kind == 'elementwise':
        from compiler import _chunk_generated
        kern = getattr(_chunk_generated, 'vjp_' + rule.name, None)
        if kern is not None:
            vj = rule.vjps
            info = (kern, len(vj) > 0 and vj[0] is not None, len(vj) > 1 and vj[1] is not None,
                    tuple(name for name in _SAVE_NAMES if name in rule.saves))
    _lone_rules[op] = info
    return info


def _lone_target(tape, slot, n):
    """(leaf, the array its gradient goes into, fresh) for the input in
    ``slot``: a leaf of n elements without hooks or views; fresh (None grad)
    means the kernel writes a new array, no zeroing.  None where the general
    path must run."""
    for t, ls in tape.leaves:
        if ls == slot:
            break
    else:
        return None
    if not t._rg or t._extra is not None:
        return None
    d = t._data
    if type(d) is not np.ndarray or d.size != n:
        return None
    cur = t._grad
    if cur is None:
        return t, np.empty(n, d.dtype), True
    cd = cur._data
    if type(cd) is not np.ndarray or cd.dtype != d.dtype or cd.size != n \
            or not cd.flags.c_contiguous or not cd.flags.writeable:
        return None
    return t, cd.reshape(-1), False


_NO_TARGET = (None, np.empty(0), False)


def _lone_record(tape, root, cache, make):
    """(rule info, op, n, g0, g1, v, ax, x) of a one-record tape's record for the
    one-record sweeps: the info from ``cache`` (``make`` fills it once per op),
    None where it has none, the record did not make ``root`` or takes one
    leaf on both inputs."""
    op, go, n, g0, g1, v, ax, x = _UNPACK_REC(tape.rec)
    try:
        info = cache[op]
    except KeyError:
        info = make(op)
    if info is None or go != root._goff or (g0 == g1 and g0 >= 0):
        return None
    return info, op, n, g0, g1, v, ax, x


def _run_lone(tape, root, retain_graph, seed):
    """``y.backward(seed)`` where y's tape holds one elementwise record, of
    leaves without hooks (``y = f(x)``, a loss of one op): the record's chunk
    kernel reads the seed and the saved arrays and writes (or adds into) each
    leaf's ``.grad`` in one pass, in the arrays' dtypes.  The arena path would
    zero an arena, copy the seed in, sweep, and copy each gradient out: three
    passes more.  Returns False, having done nothing, where the general path
    must run (a freed or stale record, broadcasting, a leaf with hooks or views,
    one leaf on both inputs, a rule without a chunk kernel)."""
    if tape.dead is not None or tape.dead_upto or tape.nonfloat_saved \
            or (tape.epoch != inplace_epoch[0] and tape.may_be_stale()):
        return False
    rec = _lone_record(tape, root, _lone_rules, _lone_rule)
    if rec is None:
        return False
    info, op, n, g0, g1, v, ax, x = rec
    kern, has0, has1, saves = info
    dtype = root._data.dtype
    if seed is None:
        if n != 1:
            return False
        g = np.ones(1, dtype)
    else:
        if type(seed) is np.ndarray and seed.dtype is dtype and seed.flags.c_contiguous:
            g = seed.reshape(-1)
        else:
            g = np.ascontiguousarray(seed, dtype).reshape(-1)
        if g.size != n:
            return False
    first = _NO_TARGET
    if g0 >= 0 and has0:
        first = _lone_target(tape, g0, n)
        if first is None:
            return False
    second = _NO_TARGET
    if g1 >= 0 and has1:
        second = _lone_target(tape, g1, n)
        if second is None:
            return False
    a = b = out = _EMPTY
    k = 0
    for name in saves:
        arr = tape.saved[k]
        k += 1
        if type(arr) is not np.ndarray or arr.size != n:
            return False
        if name == 'out':
            out = arr.reshape(-1)
        elif name == 'a':
            a = arr.reshape(-1)
        else:
            b = arr.reshape(-1)
    return _lone_finish(tape, kern, g, a, b, out, ax, x, first, second, retain_graph)


def _lone_finish(tape, kern, g, a, b, out, ax, x, first, second, retain_graph):
    """The end of ``_run_lone``/``_run_lone_big``: the kernel adds into the first
    input's gradient array in one loop, then into the second's in another, so
    an array it reads (``y.backward(x.grad)``'s seed, say) must not overlap a
    gradient it adds to (False, having done nothing); then fresh arrays become
    the leaves' ``.grad`` and the tape is released unless retained."""
    l0, t0, f0 = first
    l1, t1, f1 = second
    for t, f in ((t0, f0), (t1, f1)):
        if t.size and not f:
            for arr in (g, a, b, out):
                if arr.size and np.may_share_memory(arr, t):
                    return False
    d, c = _AS_FLOATS(_AS_INTS(ax, x))      # (the fields' float64 bits)
    kern(g, a, b, out, c, d, t0, t1, f0, f1)
    if f0:
        shape = l0._data.shape
        l0._grad = _leaf(t0 if len(shape) == 1 else t0.reshape(shape))
    if f1:
        shape = l1._data.shape
        l1._grad = _leaf(t1 if len(shape) == 1 else t1.reshape(shape))
    if not retain_graph:
        release(tape, None, None)
    return True


_lone_big_rules = {}    # op -> (chunk kernel, input 0 has a VJP, input 1 has one,
                        # float32 in-place add exact), or None


def _lone_big_rule(op):
    """What ``_run_lone_big`` needs of big rule ``op`` (with BIG_FLAG), once per
    op: its chunk kernel, which inputs have a VJP, and whether the kernel's
    float32 add (``ga[i] += expr``) rounds as a float32 store and a float32
    add would (every formula has an unguarded float32 form: a guarded one may
    take the float64 branch, whose add rounds once, not twice); None where
    the rule is not elementwise or has no chunk kernel."""
    info = None
    rule = RULES[op & ~BIG_FLAG]
    if op & BIG_FLAG and rule.kind == 'elementwise':
        from compiler import _chunk_generated
        kern = getattr(_chunk_generated, 'vjp_' + rule.name, None)
        if kern is not None:
            from compiler.chunkgen import _expr32
            slots32 = {'grad': 'g[i]', 'a': 'a[i]', 'b': 'b[i]', 'out': 'out[i]',
                       'c': 'k_c', 'd': 'k_d'}
            exact32 = True
            for f in rule.vjps:
                if f is not None:
                    expr, guards = _expr32(f, slots32)
                    if expr is None or guards:
                        exact32 = False
            vj = rule.vjps
            info = (kern, len(vj) > 0 and vj[0] is not None,
                    len(vj) > 1 and vj[1] is not None, exact32)
    _lone_big_rules[op] = info
    return info


def _lone_big_target(tape, slot, n, dtype, exact32):
    """``_lone_target`` for a big record: (leaf, array, fresh) where the leaf's
    dtype is ``dtype`` and a gradient it holds can be added into in place with
    the result the general path gives (float64, or float32 with ``exact32``);
    a fresh array comes from the pool, as the general path's does."""
    for t, ls in tape.leaves:
        if ls == slot:
            break
    else:
        return None
    if not t._rg or t._extra is not None:
        return None
    d = t._data
    if type(d) is not np.ndarray or d.size != n or d.dtype != dtype:
        return None
    cur = t._grad
    if cur is None:
        return t, (np.empty(n, dtype) if n * dtype.itemsize < _ALIGN_MIN
                   else _pool.empty(n, dtype)), True
    if dtype == _F32 and not exact32:
        return None
    cd = cur._data
    if type(cd) is not np.ndarray or cd.dtype != dtype or cd.size != n:
        return None
    flags = cd.flags
    if not flags.c_contiguous or not flags.writeable:
        return None
    return t, cd.reshape(-1), False


def _run_lone_big(tape, root, retain_graph, seed):
    """``_run_lone`` for a tape of one big elementwise record (``y = a * b`` of
    two 64x256 leaves, ``y.backward(g)``): the record's chunk kernel reads the
    seed and the saved arrays and writes (or adds into) each leaf's ``.grad``,
    where the general path would write fresh gradients, then add each into
    ``.grad`` in a second pass, and pay for a Grads store, a graph task and
    the record's lookups.  Only where every array (seed, saved, leaves and
    their gradients) has one dtype, float32 or float64, so the kernel computes
    exactly what the general path does; returns False, having done nothing,
    elsewhere (and for a freed or stale record, a leaf with hooks or views,
    one leaf on both inputs, arrays that may overlap a gradient it adds to)."""
    if tape.py or tape.dead is not None or tape.dead_upto \
            or (tape.epoch != inplace_epoch[0] and tape.may_be_stale()):
        return False
    rec = _lone_record(tape, root, _lone_big_rules, _lone_big_rule)
    if rec is None:
        return False
    info, op, n, g0, g1, v, ax, x = rec
    kern, has0, has1, exact32 = info
    if type(seed) is not np.ndarray or seed.size != n or not seed.flags.c_contiguous:
        return False
    dtype = seed.dtype
    if dtype != _F32 and dtype != _F64:
        return False
    meta = tape.big[v]
    shape = meta.out_shape
    a = b = out = _EMPTY
    for name, arr in meta.saved.items():
        if type(arr) is not np.ndarray or arr.shape != shape or arr.dtype != dtype:
            return False
        if name == 'out':
            out = arr.reshape(-1)
        elif name == 'a':
            a = arr.reshape(-1)
        elif name == 'b':
            b = arr.reshape(-1)
        else:
            return False
    if not meta.saved and RULES[op & ~BIG_FLAG].saves:
        return False            # freed: the general path raises
    in_dtypes = meta.in_dtypes
    first = second = _NO_TARGET
    if g0 >= 0 and has0:
        if in_dtypes[0] != dtype:
            return False
        first = _lone_big_target(tape, g0, n, dtype, exact32)
        if first is None:
            return False
    if g1 >= 0 and has1:
        if len(in_dtypes) < 2 or in_dtypes[1] != dtype:
            return False
        second = _lone_big_target(tape, g1, n, dtype, exact32)
        if second is None:
            return False
    return _lone_finish(tape, kern, seed.reshape(-1), a, b, out, ax, x, first, second,
                        retain_graph)


_EMPTY = np.empty(0)
_AS_INTS = struct.Struct('2q').pack
_UNPACK_REC = struct.Struct(f'{REC}q').unpack_from     # a tape's first record
_AS_FLOATS = struct.Struct('2d').unpack


def _run_scalar(root, retain_graph, seed, entered=False):
    tape = root._tape
    if tape.alias is not None:
        tape = resolve(root)
    s = root._goff
    if tape.hooks is not None:
        return run((root,), (1.0 if seed is None else seed,), retain_graph)
    if s >= BIG_BASE and tape.n == 1 and seed is not None and not entered \
            and _run_lone_big(tape, root, retain_graph, seed):
        return
    if s >= BIG_BASE and not entered:
        # y.backward(g) for a large y: run's nesting depth (a hook that calls
        # backward must not end this graph task), none of its generality
        _graph_task.enter()
        try:
            _run_scalar(root, retain_graph, seed, True)
        finally:
            _graph_task.leave()
        return
    if tape.n == len(tape.py):
        # Python records only (custom Functions: no record is freed by record,
        # so none is dead either)
        return _run_python(tape, root, retain_graph, seed)
    if tape.n == 1 and s < BIG_BASE and _run_lone(tape, root, retain_graph, seed):
        return
    dead = tape.dead is not None or tape.dead_upto
    if dead and tape.is_dead(root._rec):
        raise RuntimeError(SECOND_BACKWARD)
    packed = tape.packed
    if packed is not None and packed[0] == tape.n:
        _, R, V, A = packed
    else:
        R, V, A = pack(tape)
    dt = V.dtype
    if dt == _F32 and root._data.dtype != _F32:
        V = V.astype(np.float64)        # (_arena_for)
        dt = _F64
    gpos = tape.gpos
    if s >= BIG_BASE:
        G = np.zeros(gpos, dt)
        reach = np.zeros(gpos, np.uint8)
        store = Grads(G, reach)
        # the caller's array, read-only: a later add replaces it (Grads.add)
        flat = seed.reshape(-1)         # (a new array object, a view or a copy)
        flat.flags.writeable = False
        store.big[s] = flat
        store.bigreach.add(s)
        k = root._rec
    else:
        if seed is None:
            G = np.zeros(gpos, dt)
            G[s] = 1.0
        else:
            n = root._data.size
            if gpos < ZERO_SPLIT:
                G = np.zeros(gpos, dt)
                G[s:s + n] = seed.reshape(-1)
            else:
                # a large arena: zero only what the seed does not fill (np.zeros
                # would write the seed's part twice)
                G = np.empty(gpos, dt)
                if s:
                    G[:s] = 0.0
                G[s:s + n] = seed.reshape(-1)
                if s + n < gpos:
                    G[s + n:] = 0.0
        reach = np.zeros(gpos, np.uint8)
        reach[s] = 1
        k = root._rec
        if (tape.bpos == BIG_BASE or not R[k, 0] & BIG_FLAG) \
                and (not tape.py or R[k, 0] != _PYTHON_OP):
            # (a big record, a full sum's say, or a Python one would come straight back)
            kern = _kernel
            if kern is None:
                kern = _extend(R)
            k = kern(R, G, V, A, reach, k, -1)
        store = None
    if k >= 0:
        if store is None:
            store = Grads(G, reach)
        while k >= 0:
            op = R[k, 0]
            if op == _PYTHON_OP:
                # (the kernel hands a Python record back at once: not called for one)
                if dead:
                    _check_dead_above(tape, R, store, None, k)
                tape.py[R[k, 6]].backward(store)
                k -= 1
                continue
            if not op & BIG_FLAG:
                # (nor for a big record)
                k = (_kernel or _extend(R))(R, G, V, A, reach, k, -1)
                if k < 0:
                    break
            if dead:
                _check_dead_above(tape, R, store, None, k)
            k = _python_record(tape, k, R, G, V, A, reach, store) - 1
    stale = tape.epoch != inplace_epoch[0] and tape.may_be_stale()
    if dead or stale:
        if store is None:
            store = Grads(G, reach)
        used = store.reached_records(R)
        if dead and np.any(tape.dead_mask() & used[:tape.n]):
            raise RuntimeError(SECOND_BACKWARD)
        if stale:
            tape.check_versions(R, used)
    for leaf, ls in tape.leaves:
        if not leaf._rg:
            continue        # (stopped requiring grad since: PyTorch's AccumulateGrad skips it)
        ext = leaf._extra
        if ls >= BIG_BASE and ext is None:
            # inline: a large leaf without hooks (_deliver, less its lookups)
            if store is not None and ls in store.bigreach:
                g = store.big.get(ls)
                if g is not None:
                    _accumulate(leaf, g, owned=True)
        elif ls >= BIG_BASE or ext is not None and (ext.get('hooks') or 'post_accumulate' in ext):
            if store is None:
                store = Grads(G, reach)
            _deliver(leaf, ls, store)
        elif reach[ls]:
            # inline: the common small leaf without hooks (its _extra, if any,
            # holds nothing delivery reads: the view tapes of a weight whose
            # W.t() the graph recorded, say)
            d = leaf._data
            cur = leaf._grad
            if cur is None:
                g = G[ls:ls + d.size].astype(d.dtype)      # a copy: G dies here
                leaf._grad = _leaf(g if d.ndim == 1 else g.reshape(d.shape))
                continue
            cd = cur._data
            size = d.size
            if type(cd) is np.ndarray and cd.size == size:
                flags = cd.flags
                if flags.c_contiguous and flags.writeable:
                    _acc_kernel(cd if cd.ndim == 1 else cd.reshape(-1), G, ls)
                    continue
            _accumulate(leaf, G[ls:ls + size])
    if retain_graph:
        if not tape.hooked:
            tape.packed = (tape.n, R, V, A)
    elif tape.bpos == BIG_BASE:
        # (Grads.all_reached and reached_records for a tape without big slots)
        if gpos <= 2048:
            # a small arena: counting its reached slots is cheapest
            used = None if np.count_nonzero(reach) == tape.n + len(tape.leaves) + tape.xslots \
                else reach[R[:, 1]] != 0
        else:
            # else look up the records' result slots only (every record
            # reached: as good as every slot, for what release does)
            used = reach[R[:, 1]]
            used = None if used.tobytes().count(0) == 0 else used != 0
        release(tape, used, R)
    else:
        if store is None:
            store = Grads(G, reach)
        release(tape, None if store.all_reached(tape) else store.reached_records(R), R)


def _run_python(tape, root, retain_graph, seed):
    """``_run_scalar`` for a tape of Python records only: one custom Function
    of leaves (a loss, softmax or layer_norm of a parameter, the seed's
    sigmoid Function), or a chain of them.  Nothing is compiled to run, so
    nothing is packed: the seed goes to the records' ``backward`` in a
    ``SlotGrads`` (no arena to zero, fill and copy out of), and the leaves
    get what the records added.

    The gradients are kept in the root's dtype (float64 unless float32), as
    a float32 model's arena is float32."""
    dt = root._data.dtype
    if dt != _F32:
        dt = _F64
    store = SlotGrads()
    s = root._goff
    if seed is None:
        store.g[s] = np.ones(1, dt)
        store.owned.add(s)
    else:
        g = seed.reshape(-1)
        if g.dtype != dt:
            g = g.astype(dt)
        store.g[s] = g          # (the caller's: never written to, see SlotGrads)
    py = tape.py
    k = root._rec
    # backward runs with recording off: set once here, not per record
    prev = grad_mode.enabled
    if prev:
        set_grad_mode(False)
    try:
        # tape.py holds the records in record order (each appended with its
        # record, and a merged tape's after the tape's own)
        while k >= 0:
            py[k].backward(store)
            k -= 1
    finally:
        if prev or grad_mode.enabled:
            set_grad_mode(prev)
    reached = store.g
    used = None
    if tape.n > 1 or root._rec:
        flags = [any(o in reached for o in p.out_slots) for p in py]
        if not all(flags):
            used = np.array(flags, bool)
    if tape.epoch != inplace_epoch[0] and tape.may_be_stale():
        tape.check_versions(_records(tape), np.ones(tape.n, bool) if used is None else used)
    owned = store.owned
    for leaf, ls in tape.leaves:
        if not leaf._rg:
            continue        # (stopped requiring grad since: PyTorch's AccumulateGrad skips it)
        g = reached.get(ls)
        if g is None:
            continue
        ext = leaf._extra
        if ext is not None and (ext.get('hooks') or 'post_accumulate' in ext):
            _deliver_value(leaf, g, owned=ls in owned)
        else:
            _accumulate(leaf, g, owned=ls in owned)
    if not retain_graph:
        release(tape, used, None if used is None else _records(tape))


def _records(tape):
    """The tape's records as an array R (a copy: see pack)."""
    rec = tape.rec[:]
    return np.ndarray((len(rec) // (8 * REC), REC), _I64, rec)


# arenas of this many elements or more are zeroed around y.backward(g)'s seed
# rather than whole
ZERO_SPLIT = 4096


def _acc_kernel(dst, G, s):
    global _acc_kernel
    from compiler.kernels import accumulate
    _acc_kernel = accumulate          # import (and compile) on first use only
    accumulate(dst, G, s)


def release(tape, used, R):
    """Free what the sweep's records saved, as PyTorch frees saved tensors.

    ``used``: per record, whether the sweep reached it (None: all were).
    Only records that save values die (a second sweep through, say, an add is
    allowed, as in PyTorch), and only those the sweep reached: another graph
    sharing the tape can still be swept.  Records appended later keep their
    offsets into V: ``tape.freed`` remembers how much was dropped, and ``pack``
    pads with zeros for it.  Index maps (A) and leaves are metadata, kept.
    """
    tape.released = True
    tape.packed = None
    if tape.py:
        # a custom Function's record is not freed by record (SAVING): its ctx
        # frees what it saved, so a backward that reads no saved tensor may
        # run again, as in PyTorch
        if used is None and (R is None or len(R) == tape.n):
            # every record was reached, so every Python one: tape.py holds
            # one entry per Python record of the tape (appended with it)
            pys = tape.py
        else:
            # (found with NumPy: a Python loop over every record cost ~0.1 us each)
            is_py = R[:, 0] == _PYTHON_OP
            if used is not None:
                np.logical_and(is_py, used[:len(R)], out=is_py)
            pys = [tape.py[int(R[k, 6])] for k in np.flatnonzero(is_py).tolist()]
        for p in pys:
            ctx = getattr(p, 'ctx', None)
            if ctx is not None:
                ctx._released = True
                ctx._saved = ()
    if used is None:
        # every record was reached (the usual case): every saving one is dead now
        tape.dead_upto = tape.n
        tape.dead = None
    else:
        saving = SAVING[R[:, 0] & ~BIG_FLAG]
        used = saving & used
        mask = tape.dead_mask()
        dead = used.astype(np.uint8) if mask is None else (mask | used)
        tape.dead = dead
        tape.dead_upto = 0
        if not (dead | ~saving).all():
            return
    # every record that saved something is dead: free the buffers, and have a
    # tensor of this graph that is used again move its history off (_reroot.py)
    mark_stale(tape)
    tape.freed = (tape.vpos, 0)
    tape.saved = []
    for meta in tape.big:
        meta.saved = {}
        meta.packs = None
    for leaf, _ in tape.leaves:
        if leaf._extra is not None:     # (a weight whose view, W.t(), the tape recorded)
            forget_released_view_tapes(leaf)


def _grad_of(tape, x, store):
    size = x._data.size
    if x._tape is tape:
        s = x._goff
        g = store.get(s, size) if store.reached(s) else None
        if g is None:
            return None
        return g.reshape(x._data.shape).astype(x._data.dtype)
    total = None
    for leaf, s in tape.leaves:
        if leaf is x and store.reached(s):
            g = store.get(s, size)
            if g is not None:
                total = g.copy() if total is None else total + g
    if total is None:
        return None
    if x._extra is not None and x._extra.get('hooks'):
        # a leaf's tensor hooks see (and may replace) the gradient grad() returns
        from ._hooks import run_leaf_hooks
        d = x._data
        return run_leaf_hooks(x, _leaf(total.reshape(d.shape).astype(d.dtype)),
                              tensor_hooks_only=True)._data
    return total.reshape(x._data.shape).astype(x._data.dtype)


def _deliver(leaf, s, store):
    """Accumulate the gradient of leaf slot ``s`` into ``leaf.grad``, through its hooks.

    A leaf that stopped requiring grad after the graph was built gets nothing,
    as PyTorch's AccumulateGrad checks ``requires_grad`` when it runs."""
    if not leaf._rg or not store.reached(s):
        return
    g = store.get(s, leaf._data.size)
    if g is None:
        return
    _deliver_value(leaf, g, owned=s >= BIG_BASE)


def _deliver_value(leaf, g, owned=False):
    """Accumulate gradient array ``g`` into ``leaf.grad`` through its hooks."""
    if leaf._extra is not None and leaf._extra.get('hooks'):
        g = _leaf_hooks(leaf, g)
        if g is None:
            return
    _accumulate(leaf, g, owned=owned)
    if leaf._extra is not None and 'post_accumulate' in leaf._extra:
        from ._hooks import run_post_accumulate_hooks
        run_post_accumulate_hooks(leaf)


def _leaf_hooks(leaf, g):
    from ._hooks import run_leaf_hooks
    d = leaf._data
    return np.ravel(run_leaf_hooks(leaf, _leaf(g.reshape(d.shape).astype(d.dtype)))._data)


def _accumulate(leaf, g, owned=False):
    """leaf.grad += g (g flat or shaped; copied on first write, added in place after).

    ``owned``: g is a big-slot array nothing else refers to; adopt it as is."""
    d = leaf._data
    cur = leaf._grad
    if cur is None:
        if owned and g.dtype == d.dtype and g.flags.writeable and g.flags.c_contiguous:
            leaf._grad = _leaf(g.reshape(d.shape))
            return
        leaf._grad = _leaf(g.astype(d.dtype).reshape(d.shape))
    else:
        cd = cur._data
        if type(cd) is np.ndarray and cd.flags.writeable:
            if g.dtype != cd.dtype and g.dtype == _F64 and g.ndim == 1 \
                    and cd.flags.c_contiguous and g.flags.c_contiguous and cd.size == g.size:
                # a Numba loop: NumPy's mixed-dtype in-place add (float32 +=
                # float64) is several times slower
                _acc_kernel(cd.reshape(-1), g, 0)
            else:
                cd += g.reshape(cd.shape)
        else:
            cur._data = np.asarray(cd + g.reshape(np.shape(cd)), dtype=d.dtype)


def _leaf_only(roots, grads, inputs, accumulate):
    """backward or grad where every root is a leaf: its gradient is its seed (a
    root given twice, the sum), through the leaf's hooks as in PyTorch, where
    the leaf's AccumulateGrad (backward) or its tensor hooks (grad) see it."""
    totals = {}
    for r, g in zip(roots, grads):
        g = np.full(r._data.shape, g) if type(g) is float else np.asarray(g)
        prev = totals.get(id(r))
        totals[id(r)] = (r, g if prev is None else prev[1] + g)
    if accumulate:
        for r, g in totals.values():
            if r._rg:
                _deliver_value(r, np.ravel(g))
    if inputs is None:
        return None
    out = []
    for x in inputs:
        got = totals.get(id(x))
        if got is None:
            out.append(None)
            continue
        d = x._data
        g = np.reshape(got[1], d.shape).astype(d.dtype)
        if x._extra is not None and x._extra.get('hooks'):
            from ._hooks import run_leaf_hooks
            g = run_leaf_hooks(x, _leaf(g), tensor_hooks_only=True)._data
        out.append(g)
    return out
