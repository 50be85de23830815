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
structural ops), or returns anything but tensors that require grad; so is one
whose trace prints, casts an argument to integers or copies it with
``tensor()``, draws from NumPy's or Python's global generator, changes a
Python value it reads, keeps a tensor of the call (in a list, an attribute) or
returns a view of an argument.  A closed
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
from ._tape import saved_hooks_active as _saved_hooks_active
from ._tensor import Tensor, _TNEW

__all__ = ['jit']
_log = logging.getLogger('tape')

# Tensor methods that hand a value to Python (control flow on it would be baked
# into the trace) or a tensor outside the graph (its values would be baked in)
_READS = ('item', 'tolist', 'numpy', '__array__', '__bool__', '__float__', '__int__',
          '__index__', 'detach', 'data', 'grad')
# Tensor methods with effects a replay would not repeat (changing a tensor in
# place, registering hooks, sweeping, flipping requires_grad): a trace stops
# before running one (_Refuse) and the call runs eagerly, once
_EFFECTS = ('add_', 'sub_', 'mul_', 'div_', '__iadd__', '__isub__', '__imul__', '__itruediv__',
            '__ipow__', 'clamp_', 'clip_', 'copy_', 'detach_', 'fill_', 'masked_fill_',
            'scatter_', 'scatter_add_', 'zero_', '__setitem__', 'requires_grad_',
            'register_hook', 'retain_grad', 'register_post_accumulate_grad_hook', 'backward',
            '__repr__', '__str__', '__format__')


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


class _Refuse(BaseException):
    """Raised inside a trace before an effect a replay would not repeat (a
    BaseException, so that the traced function's ``except Exception`` does not
    swallow it)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _refuse(reason):
    """Stop this thread's trace (when it traces) with ``reason``."""
    uses = grad_mode.value_uses
    if uses is not None:
        uses.append(reason)     # (noted too, should the function catch BaseException)
        raise _Refuse(reason)


class _Fallback:
    __slots__ = ('reason', 'objects', 'checks', 'error')
    consts = params = ()

    def valid(self, args):
        return all(ref() is args[i] for i, ref in self.objects)

    def __init__(self, reason, error=None):
        self.reason = reason
        self.error = error      # what the traced call raised: raised once, as eager would


# what only the trace's stand-ins (leaves that require grad) make a call raise:
# such a call runs again eagerly on the real arguments
_STAND_IN_ERRORS = ('a leaf Variable that requires grad', "Can't call numpy() on Tensor that "
                    'requires grad', 'only Tensors of floating point dtype can require gradients')


MAX_SIGNATURES = 64


class _Jit:
    def __init__(self, fn):
        self.fn = fn
        self.plans = {}             # signature -> plan, at most MAX_SIGNATURES
        self.evicting = False
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
        if sig is None or not grad_mode.enabled or _saved_hooks_active[0]:
            # (under saved_tensors_hooks: a replay saves nothing through the hooks)
            self.counts['eager'] += 1
            if sig is None and len(self.untraced) < 16:
                why = _untraceable(args, kwargs)
                self.untraced[why] = self.untraced.get(why, 0) + 1
            return self.fn(*args, **kwargs)
        plan = self.plans.get(sig)
        retrace = False
        if plan is not None and plan.checks and not plan.valid(args):
            plan = None                     # a baked-in constant changed: trace again
            retrace = True
        traced = plan is None
        if traced:
            self.counts['traces'] += 1
            if len(self.plans) >= MAX_SIGNATURES and sig not in self.plans:
                # a number argument that changes every call (a step size, a time)
                # makes a signature per call: keep the newest, as a cache
                del self.plans[next(iter(self.plans))]
                if not self.evicting:
                    self.evicting = True
                    _log.info('jit: %s has more than %d signatures; a Python number '
                              'that changes between calls is baked into each trace (pass '
                              'it as a tensor to replay one trace)',
                              getattr(self.fn, '__qualname__', self.fn), MAX_SIGNATURES)
            plan = self.plans[sig] = _trace(self.fn, args, kwargs)
            _log.info('jit: traced %s %s%s', getattr(self.fn, '__qualname__', self.fn),
                      'again (a constant, object or parameter it used changed)' if retrace
                      else 'for a new signature',
                      f'; runs eagerly: {plan.reason}' if isinstance(plan, _Fallback) else '')
            plan.objects = tuple((i, weakref.ref(a)) for i, a in enumerate(args)
                                 if type(a) is not Tensor and not _is_static(a))
            plan.checks = bool(plan.objects) or (not isinstance(plan, _Fallback) and plan.checks)
        if isinstance(plan, _Fallback):
            if traced and plan.error is not None:
                e, plan.error = plan.error, None
                raise e
            self.counts['eager'] += 1
            return self.fn(*args, **kwargs)
        if not traced:
            self.counts['replays'] += 1
        return plan.run(args)


def _is_static(a):
    return a is None or type(a) in (int, float, bool, str)


def _static_key(a):
    """What a static value is keyed by: its type and value, with the sign of a
    float zero (x * -0.0 is not x * 0.0) and NaN as one key (NaN != NaN)."""
    if type(a) is float and (a == 0.0 or a != a):
        return (float, 'nan' if a != a else str(a))
    return (type(a), a)


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
            key.append((type(a), a) if type(a) is not float or (a != 0.0 and a == a)
                       else _static_key(a))
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
                 'watch', 'statics', 'checks', 'order',
                 'params_now', 'fn', 'ranges', 'names')

    def valid(self, args):
        """Still the same objects among the arguments, the same parameters where
        the function finds them, and the same versions of baked-in constants."""
        for i, ref in self.objects:
            if ref() is not args[i]:
                return False
        if self.params and self.params_now(self.fn, args) != self.params:
            return False
        for box, version in self.consts:
            if box[0] != version:
                return False
        for t, a, b in self.watch:
            if b is False:                      # a constant: same array, no grad
                if t._data is not a or t._rg:
                    return False
            elif not t._rg or t._data.shape != a or t._data.dtype != b:
                return False                    # a parameter
        return self.statics is None or self.statics(self.fn, args)

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
        for slot, size, dtype in self.ranges:
            # (binary_cross_entropy's check of its input, as eager makes it)
            d = F[slot:slot + size].astype(dtype)
            if np.any((d < 0) | (d > 1)):
                raise RuntimeError('binary_cross_entropy: all elements of input should be '
                                   f'between 0 and 1 (input of {size} elements)')
        tape = Tape()
        tape.rec = bytearray(self.Rbytes)
        tape.n = self.n
        tape.saved = [V]
        tape.vpos = len(V)
        tape.attrs = [self.A]
        tape.apos = len(self.A)
        tape.gpos = self.gpos
        if self.names:
            tape.names = {k: e.copy() for k, e in self.names.items()}
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
        if self.order is not None:
            outs = [outs[i] for i in self.order]
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
    and its effectful methods (and no_grad, backward, random generators) stop
    the trace (to that thread's trace only: note_value_use and _refuse look at
    the thread's grad_mode).  Counted, so that traces in several threads, or
    nested, install and restore once."""
    with _watch_lock:
        depth = _watch['depth']
        if step > 0 and depth == 0:
            saved = []
            for name in _READS + _EFFECTS:
                if name in Tensor.__dict__:
                    real = Tensor.__dict__[name]
                    saved.append((Tensor, name, real))
                    setattr(Tensor, name, _reader(name, real) if name in _READS
                            else _effect(name, real))
            rg = Tensor.__dict__['requires_grad']
            saved.append((Tensor, 'requires_grad', rg))
            setattr(Tensor, 'requires_grad', property(
                lambda self: _proxy_rg(self, rg.fget(self)),
                lambda self, flag: _refuse('the trace changed requires_grad') or
                rg.fset(self, flag), None, rg.__doc__))
            for mod, name, why in _module_watch():
                real = getattr(mod, name, None)
                saved.append((mod, name, real))
                setattr(mod, name, why(real))
            _watch['saved'] = saved
        elif step < 0 and depth == 1:
            for owner, name, real in reversed(_watch['saved']):
                if real is None:
                    delattr(owner, name)        # (a property put on a class)
                else:
                    setattr(owner, name, real)
            _watch['saved'] = None
        _watch['depth'] = depth + step


def _proxy_rg(t, rg):
    """``requires_grad`` as the traced function sees it: a stand-in leaf (which
    requires grad so that it gets a slot) answers for the argument it stands for."""
    if rg and t._tape is None:
        real = _tracing.proxies.get(id(t)) if getattr(_tracing, 'proxies', None) else None
        if real is not None:
            return real._rg
    return rg


_tracing = threading.local()        # .proxies: {id(stand-in): argument} while tracing


def _module_watch():
    """(module or class, attribute, wrap) for the functions outside Tensor that a
    trace must not run: turning grad mode off (what runs then is baked in),
    sweeping into ``.grad`` or out of the graph, drawing from a generator
    object (the global one is checked by its state)."""
    import builtins

    import tape as _t
    from tape import _grad_mode, autograd
    from tape.nn import functional

    def no_grad(real):
        def set_grad_mode(flag):
            if not flag and grad_mode.enabled:
                _refuse('the trace turned grad mode off (no_grad, set_grad_enabled(False), '
                        'inference_mode): what it computed there would be baked in')
            return real(flag)
        return set_grad_mode

    def sweep(what):
        def wrap(real):
            def run(*a, **k):
                _refuse(f'the trace ran {what}')
                return real(*a, **k)
            return run
        return wrap

    def rng_of(real):
        def get(generator):
            if generator is not None and not isinstance(generator, (int, np.integer)):
                _refuse('the trace drew random numbers (from a generator object)')
            return real(generator)
        return get

    def generator(real):        # tape.Generator: its numbers come from ._rng
        return property(lambda self: _refuse('the trace drew random numbers (from a '
                                             'tape.Generator)') or self.__dict__['_rng'],
                        lambda self, v: self.__dict__.__setitem__('_rng', v))
    def cast(real):             # _ops.to: a cast to an integer or bool dtype records nothing
        def to(a, dtype):
            out = real(a, dtype)
            if out is not a and a._rg and not out._rg and grad_mode.enabled:
                note_value_use('the trace cast a tensor to an integer or bool dtype (its '
                               'values would be baked in)')
            return out
        return to

    def printing(real):         # a replay would print nothing
        def run(*a, **k):
            _refuse('the trace printed (a replay would not)')
            return real(*a, **k)
        return run

    def infer(real):            # tape.tensor(data): a tensor in data is copied as a constant
        def get(data, *a, **k):
            if isinstance(data, Tensor) or (isinstance(data, (list, tuple)) and any(
                    isinstance(e, Tensor) for e in _t._flat(data))):
                note_value_use('the trace copied a tensor into a new one (tensor(), '
                               'new_tensor()): its values would be baked in')
            return real(data, *a, **k)
        return get
    out = [(_grad_mode, 'set_grad_mode', no_grad), (autograd, 'run', sweep('a backward sweep')),
           (_t._ops, 'to', cast), (_t, '_infer', infer), (builtins, 'print', printing),
           (autograd, 'backward', sweep('backward()')),
           (_t, '_run_scalar', sweep('backward()')), (functional, '_rng_of', rng_of)]
    if isinstance(getattr(_t, 'Generator', None), type):
        out.append((_t.Generator, '_rng', generator))
    return [(m, n, w) for m, n, w in out if n == '_rng' or hasattr(m, n)]


def _effect(name, real):
    """``real`` (a Tensor method or property) stopping this thread's trace, if it traces."""
    why = ('the trace printed or formatted a tensor' if name in (
        '__repr__', '__str__', '__format__') else
           'the trace changed a tensor in place' if name not in (
        'register_hook', 'retain_grad', 'register_post_accumulate_grad_hook', 'backward',
        'requires_grad_') else 'the trace ran backward()' if name == 'backward'
        else 'the trace registered a hook or changed requires_grad')
    if isinstance(real, property):
        return property(real.fget, None if real.fset is None else
                        lambda self, v: _refuse(f'{why} ({name} set)') or real.fset(self, v),
                        real.fdel, real.__doc__)

    def effect(self, *a, **k):
        _refuse(f'{why} ({name})')
        return real(self, *a, **k)
    effect.__name__ = name
    return effect


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


def _paths_to(fn, args, wanted, boxes=frozenset()):
    """{id(tensor): (root, steps)} for the tensors in ``wanted`` (ids), found
    breadth first through object attributes, list/tuple items and dict values;
    and {id(box): (tensor, (root, steps))} for the first tensor found with each
    version counter in ``boxes`` (closed-over constants)."""
    import types
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType, np.ndarray)
    found = {}
    by_box = {}
    seen = set()
    frontier = [((root, ()), value) for root, value in _roots(fn, args)]
    looked = 0
    for depth in range(_SEARCH_DEPTH + 1):
        nxt = []
        for (root, steps), value in frontier:
            looked += 1
            if looked > _SEARCH_LIMIT or (len(found) == len(wanted)
                                          and len(by_box) == len(boxes)):
                return found, by_box
            if id(value) in seen:
                continue
            seen.add(id(value))
            if type(value) is Tensor:
                if id(value) in wanted and id(value) not in found:
                    found[id(value)] = (root, steps)
                box = value._vbox
                if box is not None and id(box) in boxes and id(box) not in by_box \
                        and id(value) not in wanted:
                    by_box[id(box)] = (value, (root, steps))
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
    return found, by_box


def _statics(fn, args):
    """(where, key) for the Python numbers, strings and None that ``fn`` reads
    from its closure and globals, and that its object arguments hold as
    attributes (a module's ``training`` flag, say): baked into a trace, so a
    change traces again, as a changed argument of these types does.  Helper
    functions it names are followed (their closures and globals, a few calls
    deep), and so are the attributes its code names on the objects it reaches
    (``cfg.scale`` of a global ``cfg``, ``self.cfg.scale``)."""
    out = []
    _fn_statics(fn, 'fn', out, 0, set())
    for i, a in enumerate(args):
        d = getattr(a, '__dict__', None) if type(a) is not Tensor and not _is_static(a) else None
        if type(d) is dict:
            out += [(f'args[{i}].__dict__.get({k!r})', _static_key(v))
                    for k, v in list(d.items())[:_STATIC_ATTRS] if _is_static(v)]
            _value_statics(a, f'args[{i}]', _code_names(fn.__code__), out, 0, {id(fn)})
    return tuple(dict.fromkeys(out))[:_STATIC_MAX]


_STATIC_MAX = 256           # statics checked per call, at most
_FOLLOW = 3                 # helper-function calls followed


def _code_names(code):
    """The global and attribute names ``code`` (and the code nested in it) uses."""
    import types
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _library(v):
    import types
    name = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, '__module__', None)
    return (name if type(name) is str else '').split('.')[0] in (
        'tape', 'numpy', 'numba', 'compiler', 'builtins', 'math', 'torch')


def _fn_statics(fn, expr, out, level, seen):
    if id(fn) in seen or len(out) >= _STATIC_MAX:
        return
    seen.add(id(fn))
    names = _code_names(fn.__code__)
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        _value_statics(v, f'{expr}.__closure__[{i}].cell_contents', names, out, level, seen)
    g = fn.__globals__
    for name in names:
        v = g.get(name, _lookup)
        if v is not _lookup:
            _value_statics(v, f'{expr}.__globals__.get({name!r})', names, out, level, seen)


def _value_statics(v, expr, names, out, level, seen, depth=0):
    """``v`` (at ``expr``) if static; else what it leads to: a helper function's
    statics, or the attributes ``names`` holds of an object or module (two deep)."""
    import types
    if _is_static(v):
        out.append((expr, _static_key(v)))
    elif isinstance(v, types.FunctionType):
        if level < _FOLLOW and not _library(v):
            _fn_statics(v, expr, out, level + 1, seen)
    elif depth < 2 and not isinstance(v, (type, np.ndarray, Tensor)) and id(v) not in seen \
            and not (isinstance(v, types.ModuleType) and _library(v)):
        d = getattr(v, '__dict__', None)
        if type(d) is dict:
            seen.add(id(v))
            for k in names.intersection(d):
                _value_statics(d[k], f'{expr}.__dict__.get({k!r})', names, out, level, seen,
                               depth + 1)
            if not isinstance(v, types.ModuleType) and not _library(type(v)):
                # class attributes and methods (``self.scale``, ``self.helper(h)``)
                c = type(v).__dict__
                for k in names.intersection(c).difference(d):
                    _value_statics(c[k], f'type({expr}).__dict__.get({k!r})', names, out,
                                   level, seen, 2)


_STATIC_ATTRS = 32          # attributes of an object argument looked at, at most


def _statics_now(statics):
    """One function ``(fn, args) -> bool``: whether what _statics found is as it
    was (one expression, as in _lookup)."""
    get = eval('lambda fn, args, key: (' + ''.join(f'key({e}), ' for e, _ in statics) + ')')  # noqa: S307
    want = tuple(v for _, v in statics)

    def same(fn, args):
        try:
            return get(fn, args, _static_key) == want
        except (LookupError, ValueError, AttributeError, TypeError):
            return False
    return same


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
        return property(get, None if real.fset is None else lambda self, v: _refuse(
            f'the trace set .{name} of a tensor') or real.fset(self, v), real.fdel, real.__doc__)

    def read(self, *a, **k):
        note_value_use(name)
        return real(self, *a, **k)
    return read


def _trace(fn, args, kwargs):
    """Run ``fn`` once on stand-in leaves and turn its tape into a _Plan (or a
    _Fallback saying why it cannot be replayed).  A trace that falls back puts
    the global random generator back as it found it: the eager call that
    follows must draw the numbers an undecorated call would."""
    import random
    from . import _rng
    gen = _rng[0]
    state = gen.bit_generator.state
    outer = getattr(_tracing, 'proxies', None)
    statics = _statics(fn, args)
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        plan = _trace_once(fn, args, kwargs, gen, state)
    finally:
        _tracing.proxies = outer
    if isinstance(plan, _Fallback) and plan.error is not None:
        return plan                 # the call raised: what it changed stays, as eagerly
    if _undo_statics(fn, args, statics):
        # (put back, so that the eager call that follows starts where this one did)
        plan = _Fallback('the trace changed a Python number, string or None that it reads '
                         '(a global, closure variable or attribute): a replay would not')
    now = np.random.get_state()
    if now[2] != np_state[2] or not np.array_equal(now[1], np_state[1]) \
            or random.getstate() != py_state:
        plan = _Fallback('the trace drew random numbers (from NumPy\'s or Python\'s global '
                         'generator)')
        np.random.set_state(np_state)
        random.setstate(py_state)
    if isinstance(plan, _Fallback):
        _rng[0] = gen
        gen.bit_generator.state = state
    return plan


def _undo_statics(fn, args, statics):
    """Put back the statics (from _statics) that a trace changed; whether any had."""
    changed = False
    env = {'fn': fn, 'args': args}
    for expr, key in statics:
        try:
            v = eval(expr, env)         # noqa: S307 (text built by _statics)
        except Exception:  # noqa: BLE001
            v = _lookup
        if _is_static(v) and _static_key(v) == key:
            continue
        changed = True
        old = float(key[1]) if key[0] is float and type(key[1]) is str else key[1]
        target = expr if expr.endswith('.cell_contents') else \
            '{}[{}]'.format(*expr[:-1].rsplit('.get(', 1))
        try:
            exec(f'{target} = v', dict(env, v=old))     # noqa: S102
        except Exception:  # noqa: BLE001
            pass
    return changed


def _escaped(tape, outs, targs, proxies):
    """Whether something besides the results holds a tensor of the traced graph
    or a stand-in leaf: counted by references, as the tape holds no result
    tensor and a stand-in is held by the argument list and the tape's leaves."""
    expected = 0
    via = set()
    for o in {id(o): o for o in outs}.values():
        src = o._extra.get('view') if o._extra is not None else None
        for t in (o,) if src is None else (o, src[0]):
            if t._tape is tape:
                expected += 1
            elif t._tape is not None:
                a = t._tape
                while a is not None and a is not tape:
                    via.add(a)
                    a = a.alias
    expected += sum(1 for a in via if a.alias is tape)
    # (the caller's name, this name and getrefcount's argument)
    if sys.getrefcount(tape) > expected + 3:
        return True
    for p in targs:
        if type(p) is Tensor and id(p) in proxies:
            # (the argument list, the tape's leaves, this name and getrefcount's argument)
            held = sum(1 for t, _ in tape.leaves if t is p)
            if sys.getrefcount(p) > 3 + held:
                return True
    return False


def _trace_once(fn, args, kwargs, gen, rng_state):
    # numba before the trace's patches: an op that loads a kernel module imports
    # it, and its import reads builtins.print, which the trace replaces
    import numba  # noqa: F401
    from compiler.replaygen import replayable
    from . import _rng
    from ._tape import inplace_epoch
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
    _tracing.proxies = {id(p): args[i] for p, i in zip(targs, range(len(args)))
                        if id(p) in proxies}
    epoch = inplace_epoch[0]
    open_before = grad_mode.open_tape
    serial = Tape().serial          # tapes made during the call have a larger serial
    grad_mode.open_tape = None      # the call's graph starts a tape of its own
    outer_uses = grad_mode.value_uses
    grad_mode.value_uses = reads    # ops that bake values in say so (note_value_use)
    _watch_reads(+1)
    try:
        result = fn(*targs, **tkwargs)
    except _Refuse as e:
        return _Fallback(e.reason)
    except Exception as e:  # noqa: BLE001
        if any(m in str(e) for m in _STAND_IN_ERRORS):
            # (the eager call that follows, on the real arguments, may well not raise)
            return _Fallback(f'the trace raised {type(e).__name__}: {e}')
        # the function's own error: raised from this call, which is not run
        # again (its side effects would happen twice); later calls run eagerly
        return _Fallback(f'the trace raised {type(e).__name__}: {e}', e)
    finally:
        _watch_reads(-1)
        grad_mode.open_tape = open_before
        grad_mode.value_uses = outer_uses
    if reads:
        what = reads[0]
        if ' ' in what:                 # a reason given by _refuse
            return _Fallback(what)
        return _Fallback('the trace used detach() or .data' if what in ('detach', 'data') else
                         f'the trace read a tensor value into Python ({what})'
                         if what in _READS else f'the result depends on tensor values ({what})')
    if _rng[0] is not gen or gen.bit_generator.state != rng_state:
        return _Fallback('the trace drew random numbers')
    if inplace_epoch[0] != epoch:
        # (an in-place change the Tensor methods watched above did not see)
        return _Fallback('a tensor changed in place during the trace')
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
    for o in outs:
        src = o._extra.get('view') if o._extra is not None else None
        if src is not None and (id(src[0]) in proxies or src[0]._tape is None):
            # (eager returns a view sharing the argument's memory; a replay, a copy)
            return _Fallback('an output is a view of an argument or of a tensor the '
                             'function closes over')
    p = t = None                # (names that held a stand-in and the tape)
    if _escaped(tape, outs, targs, proxies):
        return _Fallback('the trace kept a tensor it made or was passed (in a list, an '
                         'attribute, a global): a replay would not update it')
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
    # composite ops' nodes (tape/_composite_nodes.py): copies, as a look fills them in
    plan.names = {k: e.copy() for k, e in tape.names.items()} if tape.names else None
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
    const_boxes = {id(box) for box, _, _ in tape.boxes}
    paths, by_box = _paths_to(fn, args, {id(t) for t in params}, const_boxes)
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
    # closed-over constants the function reaches: rebound to another tensor,
    # given new .data or made to require grad, they trace again; parameters
    # that stop requiring grad or get .data of another shape or dtype, too
    consts = []
    for box, _ in plan.consts:
        hit = by_box.get(id(box))
        if hit is not None and all(hit[0] is not t for t, _ in consts):
            consts.append(hit)
    if consts:
        plan.params += tuple(id(t) for t, _ in consts)
        plan.params_now = _lookup([paths[id(t)] for t in params] + [p for _, p in consts])
    plan.watch = tuple((t, t._data, False) for t, _ in consts) + \
        tuple((t, t._data.shape, t._data.dtype) for t in params)
    statics = _statics(fn, args)
    plan.statics = _statics_now(statics) if statics else None
    plan.checks = bool(plan.params or plan.consts or plan.statics)
    # the same tensor returned twice is one tensor twice, as eager returns it
    unique = []
    order = []
    for o in outs:
        i = next((j for j, u in enumerate(unique) if u is o), None)
        if i is None:
            i = len(unique)
            unique.append(o)
        order.append(i)
    plan.order = tuple(order) if len(unique) < len(outs) else None
    plan.outputs = [(o._goff, o._rec, o._data.shape, o._data.size, o._data.dtype,
                     o._goff in needs) for o in unique]
    plan.structure = structure
    from ._rules import OP
    plan.ranges = tuple((int(R[k, 3]), int(R[k, 2]), plan.outputs[0][4]) for k in range(tape.n)
                        if R[k, 0] == OP['binary_cross_entropy'] and R[k, 3] >= 0)
    return plan



# -- torch.jit's names: TorchScript does not exist here, so code written for it
# runs eagerly (scripting or tracing is an optimisation that must not change
# what the code computes; tape.jit itself stays an explicit choice, as it fixes
# Python control flow at its trace).  Model code calls these in its forward
# (``torch.jit.is_scripting()``) and decorates with them (``@torch.jit.ignore``).
def _ts_script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``torch.jit.script(obj)``: ``obj`` itself, run eagerly."""
    return obj


def _ts_trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
           check_tolerance=1e-05, strict=True, _force_outplace=False, _module_class=None,
           _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """``torch.jit.trace(func, example_inputs)``: ``func`` itself, run eagerly (its
    Python control flow keeps working, where a trace would fix it)."""
    if not callable(func):
        raise RuntimeError('trace: expected a function or a module, got '
                           f'{type(func).__name__}')
    return func


def _ts_trace_module(mod, inputs, *args, **kwargs):
    """``torch.jit.trace_module(mod, inputs)``: ``mod`` itself, run eagerly."""
    return mod


def _ts_ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function as it is."""
    if callable(drop):
        return drop
    return lambda fn: fn


def _ts_identity(fn):
    return fn


jit.script = _ts_script
jit.trace = _ts_trace
jit.trace_module = _ts_trace_module
jit.ignore = _ts_ignore
jit.unused = jit.export = jit.interface = jit.script_if_tracing = _ts_identity
jit.is_scripting = lambda: False
jit.is_tracing = lambda: False
jit.annotate = lambda the_type, the_value: the_value
jit.Final = __import__('typing').Final
