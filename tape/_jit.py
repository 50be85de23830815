"""``tape.jit``: trace a function's tape once, then replay it in one Numba call.

Eager recording costs about half a microsecond of Python per op, which bounds
a define-by-run library on small tensors.  A function decorated with
``tape.jit`` runs eagerly once per *signature* (its tensor arguments' shapes,
dtypes and ``requires_grad``; the values of its Python numbers, strings and
None; the identity of other objects, such as a module's ``self``), on
stand-in leaves, and keeps the tape that call recorded.  Later calls with the
same signature skip Python per op: the generated forward kernel
(``compiler/_replay_generated.py``, made from the rule table's ``fwd``
formulas) recomputes every record in order from the new argument values and
writes what each record saves, and the result tensors sit on an ordinary tape
built from the traced records.  ``backward``, ``autograd.grad``, hooks,
``retain_graph``, ``create_graph`` and ``grad_fn`` then work as for eager
results, through the same sweep.

    >>> import tape
    >>> @tape.jit
    ... def loss(w, x):
    ...     return (tape.tanh(x * w) ** 2).sum()
    >>> w = tape.tensor([0.5, -1.0], requires_grad=True)
    >>> for step in range(3):
    ...     l = loss(w, tape.tensor([1.0, 2.0]))
    ...     l.backward()
    >>> loss.stats()['replays']
    2

What a trace bakes in, as ``torch.jit.trace`` and ``jax.jit`` do: Python
control flow and the values of tensors the function closes over that do not
require grad.  A function is run eagerly instead (every call, for that
signature) when its trace reads a tensor's value into Python (``item()``,
``bool()``, ``numpy()``, ``tolist()``), draws random numbers, changes an
argument in place, uses ``detach()``/``.data`` of an argument, records an op
the replay kernel lacks (custom Functions, hooks, large tensors, the rarer
structural ops), or returns anything but tensors that require grad.  A closed
over constant changed in place since the trace makes the next call trace
again, and so does a parameter rebound to another tensor: each call checks
that the function's closure, globals and argument objects still lead to the
parameters the trace used (``self.layers[1].w``, say).  The replay computes in float64 and rounds results to the traced dtype,
so float32 results may differ from eager ones in the last bit.
"""
import functools
import logging
import sys
import threading
import weakref

import numpy as np

from ._sweep import pack
from ._tape import Tape, grad_mode, note_value_use, resolve
from ._tensor import Tensor, _TNEW

__all__ = ['jit']
_log = logging.getLogger('tape')

# Tensor methods that hand a value to Python (control flow on it would be baked
# into the trace) or a tensor outside the graph (its values would be baked in)
_READS = ('item', 'tolist', 'numpy', '__array__', '__bool__', '__float__', '__int__',
          '__index__', 'detach', 'data')


def jit(fn=None):
    """Decorate ``fn(*args)`` (tensors and static Python values in, a tensor or a
    tuple/list of tensors out) to replay its traced tape; see the module doc."""
    if fn is None:
        return jit
    compiled = _Jit(fn)
    wrapper = functools.wraps(fn)(lambda *args, **kwargs: compiled(args, kwargs))
    wrapper.stats = compiled.stats
    wrapper.fallback_reasons = compiled.reasons
    return wrapper


class _Fallback:
    __slots__ = ('reason', 'objects')
    consts = params = ()

    def valid(self, args):
        return all(ref() is args[i] for i, ref in self.objects)

    def __init__(self, reason):
        self.reason = reason


class _Jit:
    def __init__(self, fn):
        self.fn = fn
        self.plans = {}
        self.counts = {'traces': 0, 'replays': 0, 'eager': 0}
        self.untraced = {}          # why calls could not even be traced -> count

    def stats(self):
        """Counts of traces, replays and eager calls so far."""
        return dict(self.counts)

    def reasons(self):
        """Why each signature that runs eagerly does so."""
        return ([p.reason for p in self.plans.values() if isinstance(p, _Fallback)]
                + list(self.untraced))

    def __call__(self, args, kwargs):
        sig = _signature(args, kwargs)
        if sig is None or not grad_mode.enabled:
            self.counts['eager'] += 1
            if sig is None and len(self.untraced) < 16:
                why = _untraceable(args, kwargs)
                self.untraced[why] = self.untraced.get(why, 0) + 1
            return self.fn(*args, **kwargs)
        plan = self.plans.get(sig)
        retrace = False
        if plan is not None and (plan.consts or plan.objects or plan.params) \
                and not plan.valid(args):
            plan = None                     # a baked-in constant changed: trace again
            retrace = True
        traced = plan is None
        if traced:
            self.counts['traces'] += 1
            plan = self.plans[sig] = _trace(self.fn, args, kwargs)
            _log.info('jit: traced %s %s%s', getattr(self.fn, '__qualname__', self.fn),
                      'again (a constant, object or parameter it used changed)' if retrace
                      else 'for a new signature',
                      f'; runs eagerly: {plan.reason}' if isinstance(plan, _Fallback) else '')
            plan.objects = tuple((i, weakref.ref(a)) for i, a in enumerate(args)
                                 if type(a) is not Tensor and not _is_static(a))
        if isinstance(plan, _Fallback):
            self.counts['eager'] += 1
            return self.fn(*args, **kwargs)
        if not traced:
            self.counts['replays'] += 1
        return plan.run(args)


def _is_static(a):
    return a is None or type(a) in (int, float, bool, str)


def _signature(args, kwargs):
    """A hashable key for a call, or None when the call cannot be traced."""
    key = []
    for i, a in enumerate(args if not kwargs else list(args) + [kwargs[k] for k in sorted(kwargs)]):
        if type(a) is Tensor:
            d = a._data
            if a._tape is not None or not isinstance(d, (np.ndarray, np.floating)) \
                    or d.dtype.kind != 'f':
                return None                 # a non-leaf (part of a graph) or not float
            key.append((d.shape, d.dtype, a._rg))
        elif _is_static(a):
            key.append((type(a), a))
        else:
            # another object (a module's ``self``, say): by identity, checked
            # through a weak reference (see _Jit.__call__), never kept alive
            if i >= len(args):
                return None                 # (objects by keyword: not tracked)
            try:
                weakref.ref(a)
            except TypeError:
                return None                 # a list, dict, ...: no trace
            key.append(('object', id(a)))
    if kwargs:
        key.append(tuple(sorted(kwargs)))
    return tuple(key)


def _untraceable(args, kwargs):
    """Why ``_signature`` gave up on a call (for ``fallback_reasons``)."""
    named = [(f'argument {i}', a) for i, a in enumerate(args)]
    named += [(f'argument {k!r}', kwargs[k]) for k in sorted(kwargs)]
    for name, a in named:
        if type(a) is Tensor:
            if a._tape is not None:
                return (f'{name} is the result of recorded ops (part of a graph): only '
                        'leaves and constants are replayed')
            d = a._data
            if np.result_type(d).kind != 'f':
                return (f'{name} has dtype {np.result_type(d).name}: integer and bool '
                        'tensors (indices, masks) are not replayed; cross_entropy with '
                        'class probabilities (one-hot float targets) is')

        elif not _is_static(a):
            if name.startswith("argument '"):
                return f'{name} is an object passed by keyword, which is not tracked'
            try:
                weakref.ref(a)
            except TypeError:
                return (f'{name} is a {type(a).__name__}, which a trace cannot key on '
                        '(pass tensors, numbers, strings or objects)')
    return 'the call cannot be traced'


class _Plan:
    """A traced tape and how to refill it from new arguments.

    ``R`` drives the forward replay: every argument has a slot there.  ``Rb``
    is the tape the results sit on: inputs that need no gradient (arguments
    without ``requires_grad`` and what only they feed) read as constants (-1),
    as eager records them, so the sweep spends nothing on them."""
    __slots__ = ('R', 'Rb', 'Rbytes', 'Vt', 'A', 'n', 'gpos', 'fills', 'deliver', 'outputs',
                 'structure', 'boxes', 'consts', 'unreached', 'objects', 'replay', 'params',
                 'params_now', 'fn')

    def valid(self, args):
        """Still the same objects among the arguments, the same parameters where
        the function finds them, and the same versions of baked-in constants."""
        return all(ref() is args[i] for i, ref in self.objects) and \
            (not self.params or self.params_now(self.fn, args) == self.params) and \
            all(box[0] == version for box, version in self.consts)

    def run(self, args):
        # every slot is written before it is read: the arguments' by the fills
        # below, each record's by its record
        F = np.empty(self.gpos)
        for where, slot, size in self.fills:
            t = args[where] if type(where) is int else where
            F[slot:slot + size] = t._data.reshape(-1)
        V = np.empty(len(self.Vt))
        if self.replay is None:
            _replay(self.R, F, V, self.Vt, self.A, self.n)
        else:
            k = self.replay(self.R, F, V, self.Vt, self.A, 0, self.n)
            while k >= 0:
                # a transcendental over many elements, handed back for NumPy
                if not _numpy_record(self.R, F, V, self.Vt, k):
                    raise RuntimeError('tape.jit: a traced record could not be replayed')
                k = self.replay(self.R, F, V, self.Vt, self.A, k + 1, self.n)
        tape = Tape()
        tape.rec = bytearray(self.Rbytes)
        tape.n = self.n
        tape.saved = [V]
        tape.vpos = len(V)
        tape.attrs = [self.A]
        tape.apos = len(self.A)
        tape.gpos = self.gpos
        # records whose result needs no gradient are never reached: say so, or
        # the release after a sweep would take the slow partial path
        tape.xslots = -self.unreached
        tape.packed = (self.n, self.Rb, V, self.A)
        for where, slot in self.deliver:
            t = args[where] if type(where) is int else where
            if t._rg:               # (a closed-over parameter may have stopped requiring it)
                tape.leaves.append((t, slot))
                tape.leafmap[id(t)] = slot
        for where, k in self.boxes:
            t = args[where] if type(where) is int else where
            box = t._vbox
            if box is None:
                box = t._vbox = [0]
            tape.boxes.append((box, box[0], k))
        outs = []
        for slot, rec, shape, size, dtype, rg in self.outputs:
            t = _TNEW(Tensor)
            t._data = F[slot:slot + size].reshape(shape).astype(dtype)
            if rg:
                t._rg = True
                t._tape = tape
                t._goff = slot
                t._rec = rec
            else:
                t._rg = False
                t._tape = None
                t._goff = -1
                t._rec = 0
            outs.append(t)
        if self.structure is None:
            return outs[0]
        return self.structure(outs)


_gen = None
_rg = None


def _replaygen():
    """compiler.replaygen, imported on first use (it is not needed to import tape)."""
    global _rg
    if _rg is None:
        from compiler import replaygen
        _rg = replaygen
    return _rg


def _numpy_record(R, F, V, Vt, k):
    return _replaygen().numpy_record(R, F, V, Vt, k)


def _replay_for(ops):
    """A replay dispatcher over just ``ops`` (compiler/replaygen.py's
    ``dispatcher_source``), in a generated file loaded as the fused kernels are
    (compiler/fuse.py's ``load``): a first trace then compiles the few kernels it
    uses, not every kernel of the generic dispatcher (about 8 s cold).  None
    without a cache directory; the generic dispatcher serves then."""
    from compiler.fuse import load
    return load('tape_replay', _replaygen().dispatcher_source(ops), 'replay')


def _replay(R, F, V, Vt, A, n):
    global _gen
    if _gen is None:
        from compiler import _replay_generated
        _gen = _replay_generated        # imported (and compiled) on first use only
    rg = _replaygen()
    k = 0
    while k < n:
        k = _gen.replay(R, F, V, Vt, A, k, n)
        if k < 0:
            return
        op, out, size, in0, in1, v, ax, x = R[k].tolist()
        if op not in _gen.COLD_FWD or (size >= rg.NUMPY_FROM and op in rg.NUMPY_OPS):
            if not _numpy_record(R, F, V, Vt, k):
                raise RuntimeError('tape.jit: a traced record could not be replayed')
        else:
            _gen.COLD_FWD[op](R.view(np.float64), F, V, Vt, A, k, out, size, in0, in1, v, ax, x)
        k += 1


_watch = {'depth': 0, 'saved': None}
_watch_lock = threading.Lock()


def _watch_reads(step):
    """While any thread traces, Tensor's value-reading methods note their use
    (to that thread's trace only: note_value_use is per thread).  Counted, so
    that traces in several threads, or nested, install and restore once."""
    with _watch_lock:
        depth = _watch['depth']
        if step > 0 and depth == 0:
            saved = {name: Tensor.__dict__[name] for name in _READS if name in Tensor.__dict__}
            _watch['saved'] = saved
            for name, real in saved.items():
                setattr(Tensor, name, _reader(name, real))
        elif step < 0 and depth == 1:
            for name, real in _watch['saved'].items():
                setattr(Tensor, name, real)
            _watch['saved'] = None
        _watch['depth'] = depth + step


_SEARCH_DEPTH = 4          # attribute / item steps from a root
_SEARCH_LIMIT = 20000      # objects looked at, at most


def _roots(fn, args):
    """(root, value) for what a function can reach: its closure cells, the
    globals its code names, and its non-tensor object arguments."""
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            yield ('cell', i), cell.cell_contents
        except ValueError:          # an empty cell
            pass
    g = fn.__globals__
    for name in fn.__code__.co_names:
        if name in g:
            yield ('global', name), g[name]
    for i, a in enumerate(args):
        if type(a) is not Tensor and not _is_static(a):
            yield ('arg', i), a


def _paths_to(fn, args, wanted):
    """{id(tensor): (root, steps)} for the tensors in ``wanted`` (ids), found
    breadth first through object attributes, list/tuple items and dict values."""
    import types
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType, np.ndarray)
    found = {}
    seen = set()
    frontier = [((root, ()), value) for root, value in _roots(fn, args)]
    looked = 0
    for depth in range(_SEARCH_DEPTH + 1):
        nxt = []
        for (root, steps), value in frontier:
            looked += 1
            if looked > _SEARCH_LIMIT or len(found) == len(wanted):
                return found
            if id(value) in seen:
                continue
            seen.add(id(value))
            if type(value) is Tensor:
                if id(value) in wanted and id(value) not in found:
                    found[id(value)] = (root, steps)
                continue
            if depth == _SEARCH_DEPTH or isinstance(value, skip):
                continue
            if type(value) in (list, tuple):
                nxt += [((root, steps + (('item', i),)), v) for i, v in enumerate(value)]
            elif type(value) is dict:
                nxt += [((root, steps + (('item', k),)), v) for k, v in value.items()
                        if type(k) in (str, int)]
            else:
                d = getattr(value, '__dict__', None)
                if type(d) is dict:
                    nxt += [((root, steps + (('attr', k),)), v) for k, v in d.items()]
        frontier = nxt
    return found


def _lookup(paths):
    """One function ``(fn, args) -> tuple`` of the objects at ``paths`` (from
    _paths_to) now, as ids (None where a path is broken): checked on every call,
    so each path is one expression, not a loop of lookups."""
    exprs = []
    for (kind, key), steps in paths:
        e = {'cell': f'fn.__closure__[{key!r}].cell_contents',
             'global': f'fn.__globals__[{key!r}]', 'arg': f'args[{key!r}]'}[kind]
        for how, k in steps:
            e = f'{e}.__dict__[{k!r}]' if how == 'attr' else f'{e}[{k!r}]'
        exprs.append(e)
    body = '(' + ''.join(f'id({e}), ' for e in exprs) + ')'
    get = eval(f'lambda fn, args: {body}')   # noqa: S307 (text built above from names and ints)

    def now(fn, args):
        try:
            return get(fn, args)
        except (LookupError, ValueError, AttributeError, TypeError):
            return None
    return now


def _reader(name, real):
    """``real`` (a Tensor method or property) noting its use while this thread traces."""
    if isinstance(real, property):
        def get(self):
            note_value_use(name)
            return real.fget(self)
        return property(get, real.fset, real.fdel, real.__doc__)

    def read(self, *a, **k):
        note_value_use(name)
        return real(self, *a, **k)
    return read


def _trace(fn, args, kwargs):
    """Run ``fn`` once on stand-in leaves and turn its tape into a _Plan (or a
    _Fallback saying why it cannot be replayed)."""
    from compiler.replaygen import replayable
    from . import _rng
    proxies = {}
    targs = list(args)
    for i, a in enumerate(args):
        if type(a) is Tensor:
            p = _TNEW(Tensor)
            p._data = a._data
            p._rg = True            # every argument gets a slot, grad or not
            p._tape = None
            p._goff = -1
            p._rec = 0
            proxies[id(p)] = i
            targs[i] = p
    tkwargs = dict(kwargs)
    for name, a in kwargs.items():
        if type(a) is Tensor:
            return _Fallback('a tensor passed by keyword')
    versions = [a._vbox[0] if type(a) is Tensor and a._vbox is not None else 0 for a in args]
    reads = []

    rng_state = _rng[0].bit_generator.state
    open_before = grad_mode.open_tape
    serial = Tape().serial          # tapes made during the call have a larger serial
    grad_mode.open_tape = None      # the call's graph starts a tape of its own
    outer_uses = grad_mode.value_uses
    grad_mode.value_uses = reads    # ops that bake values in say so (note_value_use)
    _watch_reads(+1)
    try:
        result = fn(*targs, **tkwargs)
    except Exception as e:  # noqa: BLE001  (the eager call that follows raises it for real)
        return _Fallback(f'the trace raised {type(e).__name__}: {e}')
    finally:
        _watch_reads(-1)
        grad_mode.open_tape = open_before
        grad_mode.value_uses = outer_uses
    if reads:
        what = reads[0]
        return _Fallback('the trace used detach() or .data' if what in ('detach', 'data') else
                         f'the trace read a tensor value into Python ({what})'
                         if what in _READS else f'the result depends on tensor values ({what})')
    if _rng[0].bit_generator.state != rng_state:
        return _Fallback('the trace drew random numbers')
    for i, a in enumerate(args):
        if type(a) is Tensor and a._vbox is not None and a._vbox[0] != versions[i]:
            return _Fallback(f'the trace changed argument {i} in place')
    if type(result) is Tensor:
        outs, structure = [result], None
    elif type(result) in (tuple, list) and result and all(type(r) is Tensor for r in result):
        outs, structure = list(result), type(result)
    else:
        return _Fallback('the function returns something other than tensors')
    tape = None
    for o in outs:
        if not o._rg or o._tape is None:
            return _Fallback('an output is a leaf or does not require grad')
        t = resolve(o) if o._tape.alias is not None else o._tape
        if tape is None:
            tape = t
        elif t is not tape:
            return _Fallback('the outputs are on separate graphs')
    if tape.serial < serial:
        return _Fallback('the graph joins one made before the call')
    if tape.big or tape.py or tape.hooks or tape.dirty or tape.xslots or tape.released \
            or tape.freed is not None:
        return _Fallback('the tape has large-tensor, Python, hooked or in-place records')
    R, V, A = pack(tape, f64=True)         # the replay computes in float64
    ok, why = replayable(R)
    if not ok:
        return _Fallback(why)
    plan = _Plan()
    plan.replay = _replay_for({int(op) for op in R[:, 0]})
    plan.R = R
    plan.Vt = V
    plan.A = A
    plan.n = tape.n
    plan.gpos = tape.gpos
    plan.fills = []
    plan.deliver = []
    where_of = {}
    needs = set()                   # slots that carry a gradient, as eager would record
    params = []
    for t, slot in tape.leaves:
        if id(t) in proxies:
            where = proxies[id(t)]
            if args[where]._rg:
                needs.add(slot)
                plan.deliver.append((where, slot))
        elif sys.getrefcount(t) <= 3:
            # only the tape (and this loop) hold it: made inside the function,
            # so a replay must not keep delivering into this one object
            return _Fallback('the function creates a leaf that requires grad')
        else:
            where = t                   # a parameter the function closes over
            needs.add(slot)
            plan.deliver.append((where, slot))
            params.append(t)
        where_of[id(t)] = where
        plan.fills.append((where, slot, t._data.size))
    Rb = R.copy()
    unreached = 0
    for k in range(tape.n):
        in0, in1 = int(R[k, 3]), int(R[k, 4])
        if in0 >= 0 and in0 not in needs:
            Rb[k, 3] = -1
        if in1 >= 0 and in1 not in needs:
            Rb[k, 4] = -1
        if Rb[k, 3] >= 0 or Rb[k, 4] >= 0:
            needs.add(int(R[k, 1]))
        else:
            unreached += 1
    # where the function finds each parameter it closes over, checked at every
    # call: a name rebound to another tensor (a loaded state, say) traces again
    paths = _paths_to(fn, args, {id(t) for t in params})
    if len(paths) < len(params):
        return _Fallback('a tensor the function closes over is out of reach of its '
                         'closure, globals and argument objects')
    plan.params = tuple(id(t) for t in params)     # (the plan holds them: ids stay theirs)
    plan.params_now = _lookup([paths[id(t)] for t in params])
    plan.fn = fn
    plan.Rb = Rb
    plan.Rbytes = Rb.tobytes()
    plan.unreached = unreached
    plan.boxes = []
    plan.consts = []
    proxy_boxes = {}
    for p in targs:
        if type(p) is Tensor and p._vbox is not None:
            proxy_boxes[id(p._vbox)] = proxies[id(p)]
    leaf_boxes = {id(t._vbox): where_of[id(t)] for t, _ in tape.leaves if t._vbox is not None}
    for box, version, k in tape.boxes:
        if id(box) in proxy_boxes:
            plan.boxes.append((proxy_boxes[id(box)], k))
        elif id(box) in leaf_boxes:
            plan.boxes.append((leaf_boxes[id(box)], k))
        else:
            plan.consts.append((box, version))     # a closed-over constant, baked in
    plan.outputs = [(o._goff, o._rec, o._data.shape, o._data.size, o._data.dtype,
                     o._goff in needs) for o in outs]
    plan.structure = structure
    return plan

