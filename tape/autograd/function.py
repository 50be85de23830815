"""Custom differentiable functions: ``tape.autograd.Function``.

``apply`` runs ``forward`` without recording, then appends one Python record
to the tape.  The compiled sweep stops there and calls ``backward`` with the
output gradients as tensors; with ``create_graph`` the differentiable sweep
calls it with recording on, so a ``backward`` written in tape ops can be
differentiated again (unless marked ``once_differentiable``).

>>> import tape
>>> from tape.autograd import Function
>>> class Square(Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x
...     @staticmethod
...     def backward(ctx, grad):
...         x, = ctx.saved_tensors
...         return 2 * x * grad
>>> x = tape.tensor([3.0], requires_grad=True)
>>> y = Square.apply(x)
>>> y.grad_fn.name()
'SquareBackward'
>>> y.backward()
>>> x.grad
tensor([6.])
"""
import functools
import math
import warnings
import weakref

import numpy as np

from .. import _ops
from .. import _saved_hooks
from .._grad_mode import enable_grad, no_grad
from .._rules import OP
from .._tape import PACK, grad_mode, open_tape, resolve, set_grad_mode
from .. import _views
from .._tensor import Tensor, _bump_version, _leaf, _TNEW

_PYTHON_OP = OP['python']


class _Saved:
    """One saved tensor, held without a reference cycle through its tape."""
    __slots__ = ('data', 'leaf', 'tape', 'slot', 'rec', 'box', 'version', 'dtype', 'packed')

    def __init__(self, t):
        self.packed = None
        hooks = _saved_hooks.state.stack
        if hooks:
            # saved_tensors_hooks: pack now, unpack at each access (tape/_saved_hooks.py)
            pack, unpack = hooks[-1]
            self.packed = (pack(t), unpack)
        self.data = t._data
        self.box = t._vbox
        if self.box is None:
            self.box = t._vbox = [0]
        self.version = self.box[0]
        tp = t._tape
        if tp is None:
            self.leaf = t            # leaves hold no tape: no cycle
            self.tape = None
        else:
            self.leaf = None
            if tp.alias is not None:
                tp = resolve(t)
            self.tape = weakref.ref(tp)
            self.slot = t._goff
            self.rec = t._rec

    def unpack(self, fn_name):
        if self.box[0] != self.version:
            raise RuntimeError(
                'one of the variables needed for gradient computation has been modified by an '
                f'inplace operation: a tensor saved by {fn_name} is at version {self.box[0]}; '
                f'expected version {self.version} instead.')
        if self.packed is not None:
            packed, unpack = self.packed
            t = unpack(packed)
            if not isinstance(t, Tensor):
                raise TypeError('Output of saved tensor unpack_hook expected to be a Tensor but '
                                f'got result of type {type(t).__name__}')
            return t
        if self.leaf is not None:
            return self.leaf
        tape = self.tape()
        t = _TNEW(Tensor)
        t._data = self.data
        t._rg = tape is not None
        t._tape = tape
        t._goff = self.slot
        t._rec = self.rec
        if tape is None:
            t._goff = -1
            t._rec = 0
        return t


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``: a place to keep what
    backward needs.  Any attribute may be set on it."""
    # defaults as class attributes: ``apply`` makes a ctx per call setting only
    # what differs (see _new_ctx)
    _to_save = ()
    _saved = None
    _released = False
    _non_differentiable = ()
    _dirty = ()
    needs_input_grad = ()
    materialize_grads = True

    def __init__(self, fn_name):
        self._fn_name = fn_name

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):     # (not tensors.index(t): that compares tensors)
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f'save_for_backward can only save variables, but argument '
                                f'{i} is of type {type(t).__name__}')
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Keep tensors for this Function's ``jvp`` (forward-mode AD, forward_ad.py)."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f'save_for_forward expects all arguments to be tensors; but '
                                f'got {type(t).__name__} at position {i}.')
        self._fwad_saved = tensors

    def mark_non_differentiable(self, *outputs):
        for o in outputs:
            if not isinstance(o, Tensor):
                raise RuntimeError('mark_non_differentiable only accepts variable arguments, '
                                   f'but got {type(o).__name__}')
        self._non_differentiable = tuple(id(o) for o in outputs)

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(
                'Trying to backward through the graph a second time (or directly access saved '
                'tensors after they have already been freed). Saved intermediate values of the '
                'graph are freed when you call .backward() or autograd.grad(). Specify '
                'retain_graph=True if you need to backward through the graph a second time or '
                'if you need to access saved tensors after calling backward.')
        saved = self._saved
        if saved is None:       # still inside forward
            return tuple(self._to_save)
        name = self._fn_name
        return tuple([None if s is None else s.unpack(name) for s in saved])

    @property
    def saved_variables(self):
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'",
                      DeprecationWarning, stacklevel=2)
        return self.saved_tensors


class _FunctionRecord:
    """The Python record of one ``Function.apply``."""
    __slots__ = ('cls', 'ctx', 'in_slots', 'in_shapes', 'in_dtypes', 'out_slots',
                 'out_shapes', 'out_dtypes', 'nargs', '__weakref__')

    def shift(self, shift):
        from .._tape import shift_slot
        self.in_slots = [shift_slot(s, shift) for s in self.in_slots]
        self.out_slots = [shift_slot(s, shift) for s in self.out_slots]

    def shown_inputs(self):
        """Positions of the arguments the node lists in ``next_functions`` (and its
        hooks' ``grad_inputs``): PyTorch lists a custom Function's tensor
        arguments only; the library's own Functions stand for native ops, whose
        nodes list a fixed number (``_node_inputs``: NativeLayerNormBackward0's
        input, weight and bias, None where absent)."""
        n = getattr(self.cls, '_node_inputs', None)
        if n is not None:
            return range(min(n, len(self.in_slots)))
        return [i for i, dt in enumerate(self.in_dtypes) if dt is not None]

    def _call_backward(self, grads):
        cls = self.cls
        if cls._both_backward_and_vjp:
            raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is "
                               "not allowed. You should only implement one of them.")
        out_dtypes = self.out_dtypes
        if len(out_dtypes) != 1 or out_dtypes[0] is None:
            for dt in out_dtypes:
                if dt is None:              # (np.dtype('f8') == None is True: test with is)
                    # a non-Tensor output's gradient is None, materialized or not (and
                    # on every path that calls here: the sweeps and the node-hook runner)
                    grads = [None if dt is None else g for g, dt in zip(grads, out_dtypes)]
                    break
        res = cls.backward(self.ctx, *grads)
        nargs = self.nargs
        if type(res) is not tuple and not isinstance(res, tuple):
            res = (res,)
        if len(res) != nargs:
            if len(res) > nargs and all(r is None for r in res[nargs:]):
                res = res[:nargs]
            else:
                raise RuntimeError(f'function {cls._backward_name} returned an incorrect number '
                                   f'of gradients (expected {nargs}, got {len(res)})')
        in_slots, in_shapes, in_dtypes = self.in_slots, self.in_shapes, self.in_dtypes
        out = [None] * nargs
        for i, r in enumerate(res):
            dt = in_dtypes[i]
            if dt is None:          # not a Tensor input: PyTorch allows only None here
                if r is not None:
                    raise RuntimeError(f'function {cls._backward_name} returned a gradient '
                                       f'different than None at position {i + 1}, but the '
                                       'corresponding forward input was not a Variable')
                continue
            if r is None:
                continue
            if type(r) is not Tensor and not isinstance(r, Tensor):
                raise RuntimeError(f'expected Variable or None (got {_typename(r)})')
            if in_slots[i] < 0:     # a Tensor input that does not require grad
                continue
            d = r._data
            shape = in_shapes[i]
            if d.shape != shape and tuple(d.shape) != tuple(shape):
                r = _sum_to(r, tuple(shape), cls._backward_name, i)
                d = r._data
            if d.dtype != dt and dt.kind == 'f':
                r = _ops.to(r, dt)
            out[i] = r
        return out

    def _grads_in(self, have, get):
        grads = []
        for s, shape, dt in zip(self.out_slots, self.out_shapes, self.out_dtypes):
            if s >= 0 and have(s):
                grads.append(get(s, shape, dt))
            elif dt is not None and self.ctx.materialize_grads:
                grads.append(_leaf(np.zeros(shape, dt)))
            else:
                grads.append(None)
        return grads

    def backward(self, store):
        """Compiled-sweep side: read output grads from the store, add input grads to it."""
        cls = self.cls
        bw = cls._backward_array
        if bw is not None:
            # the library's own one-in, one-out Functions (made by apply_own):
            # arrays in, an array out, none of the generic checks' work
            s = self.out_slots[0]
            if s < 0 or not store.reached(s):
                return
            x, = self.ctx.saved_tensors         # (raises once freed, or changed in place)
            shape = self.out_shapes[0]
            g = store.get(s, math.prod(shape), shape)
            gx = bw(self.ctx, x, g)
            store.add(self.in_slots[0], gx.size, gx)
            return
        out_slots = self.out_slots
        if len(out_slots) == 1:
            # one output (the usual case): its gradient, reached or else not needed
            s = out_slots[0]
            if s < 0 or not store.reached(s):
                return
            shape = self.out_shapes[0]
            grads = (_leaf(store.get(s, math.prod(shape), shape).astype(self.out_dtypes[0])),)
        else:
            grads = None
            for s in out_slots:
                if s >= 0 and store.reached(s):
                    grads = []
                    break
            if grads is None:
                return
            materialize = self.ctx.materialize_grads
            for s, shape, dt in zip(out_slots, self.out_shapes, self.out_dtypes):
                if s >= 0 and store.reached(s):
                    grads.append(_leaf(store.get(s, math.prod(shape), shape).astype(dt)))
                elif dt is not None and materialize:
                    grads.append(_leaf(np.zeros(shape, dt)))
                else:
                    grads.append(None)
            first = out_slots[0]
            mark = getattr(store, 'mark', None)     # (the arena sweep's store)
            if mark is not None and first >= 0 and not store.reached(first):
                # the sweep judges a record by its first output's slot (which
                # records it reached, so which release frees): this one ran
                mark(first)
        # cls.backward runs with recording off (as under no_grad); a graph it builds
        # under enable_grad (a recomputation, an autograd.grad of its own) starts a
        # tape of its own, not the one this sweep is running over
        open_before = grad_mode.open_tape
        grad_mode.open_tape = None
        if grad_mode.enabled:
            set_grad_mode(False)
            try:
                res = self._call_backward(grads)
            finally:
                set_grad_mode(True)
                grad_mode.open_tape = open_before
        else:
            # (off already: the sweep of Python records sets it once for all)
            try:
                res = self._call_backward(grads)
            finally:
                if grad_mode.enabled:
                    set_grad_mode(False)
                grad_mode.open_tape = open_before
        for r, s in zip(res, self.in_slots):
            if r is not None:
                d = r._data
                store.add(s, d.size, d)

    def backward_differentiable(self, acc, tape, leaf_of):
        if not any(s >= 0 and s in acc for s in self.out_slots):
            return
        # _shaped, not a reshape: the gradients keep the grad_fn of the op that
        # computed them, as PyTorch's do, instead of showing a ViewBackward0
        from .._differentiable import _add, _shaped
        grads = self._grads_in(lambda s: s in acc,
                               lambda s, shape, dt: _shaped(acc[s], shape))
        with enable_grad():
            res = self._call_backward(grads)
        for r, s in zip(res, self.in_slots):
            if r is not None:
                _add(acc, s, r if r._data.ndim == 1 else _shaped(r, (-1,)))


def _typename(obj):
    """A type's name as PyTorch's messages give it: 'float', 'numpy.ndarray'."""
    tp = type(obj)
    mod = tp.__module__
    return tp.__name__ if mod in ('builtins', '__main__') else f'{mod.split(".")[0]}.{tp.__name__}'


def _sum_to(r, shape, name, i):
    """A gradient returned for an input of ``shape``: summed down to it when the
    input broadcasts to the gradient's shape (as PyTorch does), else an error."""
    gshape = tuple(r._data.shape)
    lead = len(gshape) - len(shape)
    if lead < 0 or any(d != 1 and d != gd for d, gd in zip(shape, gshape[lead:])):
        raise RuntimeError(f'Function {name} returned an invalid gradient at index {i} - got '
                           f'{list(gshape)} but expected shape compatible with {list(shape)}')
    dims = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and gshape[lead + k] != 1)
    if dims:
        r = r.sum(dims, True)
    return _ops.reshape(r, shape)


def _base_backward(ctx, *grad_outputs):
    raise NotImplementedError('You must implement either the backward or vjp method for '
                              'your custom autograd.Function to use it with backward mode AD.')


def _base_setup_context(ctx, inputs, output):
    raise NotImplementedError('setup_context is not implemented.')


def _own(cls, name):
    """The function ``name`` resolves to on ``cls``, skipping a ``backward`` that
    is only this module's alias of ``vjp``."""
    for k in cls.__mro__:
        d = k.__dict__
        if name in d and not (name == 'backward' and d.get('_vjp_alias', False)):
            f = d[name]
            return f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
    return None


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_name = name + 'Backward'
        # PyTorch 2.x style: forward(*args) without ctx, plus setup_context(ctx, inputs, output)
        cls._setup_ctx = getattr(cls, 'setup_context', _base_setup_context) is not \
            _base_setup_context
        cls._forward_sig = None
        # vjp is backward's alias: a class may write either (not both)
        bw, vjp = _own(cls, 'backward'), _own(cls, 'vjp')
        cls._both_backward_and_vjp = False
        if vjp is not None and vjp is not _base_backward:
            if bw is not None and bw is not _base_backward:
                cls._both_backward_and_vjp = True
            else:
                cls.backward = staticmethod(vjp)
                cls._vjp_alias = True
        if bases:
            _register_node_class(cls._backward_name)


def _bind(cls, args, kwargs):
    """``args`` and ``kwargs`` bound to ``cls.forward``'s signature with defaults
    applied, as PyTorch does for a Function with ``setup_context``."""
    sig = cls.__dict__.get('_forward_sig')
    if sig is None:
        import inspect
        sig = inspect.signature(cls.forward)
        cls._forward_sig = sig
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args), bound.kwargs


def _bind_with_ctx(cls, args, kwargs):
    """Keyword arguments of a ``forward(ctx, ...)`` Function moved to their places
    among the positional inputs (defaults not applied), as PyTorch's ``apply``
    does: they are inputs like the others (``needs_input_grad``, one gradient
    each from ``backward``)."""
    import inspect
    try:
        sig = inspect.signature(cls.forward)
        bound = sig.bind(None, *args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs         # forward raises its own TypeError when called
    return tuple(bound.args[1:]), bound.kwargs


def _alias(o):
    """A new tensor object for input ``o`` returned as is (PyTorch returns a view)."""
    t = _leaf(o._data)
    if o._vbox is None:
        o._vbox = [0]
    t._vbox = o._vbox
    return t


class Function(metaclass=_FunctionMeta):
    """Base class for custom differentiable operations; see the module docstring.

    Either ``forward(ctx, *args)`` sets up ``ctx`` itself, or (PyTorch 2.x)
    ``forward(*args)`` takes no ctx and ``setup_context(ctx, inputs, output)``
    does it, with ``inputs`` the arguments (defaults applied) and ``output``
    what ``forward`` returned."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError('You must implement the forward function for custom '
                                  'autograd.Function.')

    setup_context = staticmethod(_base_setup_context)
    backward = staticmethod(_base_backward)
    vjp = backward
    # the library's own Functions recorded by apply_own: backward(ctx, x, grad
    # array) -> the input's gradient array, for the compiled sweep
    _backward_array = None

    def __init__(self, *args, **kwargs):
        warnings.warn(f'{type(self).__name__} should not be instantiated. Methods on autograd '
                      'functions are all static, so you should invoke them on the class itself.',
                      DeprecationWarning, stacklevel=2)

    @classmethod
    def apply(cls, *args, **kwargs):
        if jvp_hook is not None and getattr(cls, 'jvp', None) is not None:
            # bound first, so that jvp gets one tangent per input (None for defaults)
            if cls._setup_ctx:
                args, kwargs = _bind(cls, args, kwargs)
            elif kwargs:
                args, kwargs = _bind_with_ctx(cls, args, kwargs)
            return jvp_hook(_apply, cls, args, kwargs)
        return _apply(cls, args, kwargs)


# Set by forward-mode AD (autograd/forward_ad.py) while a dual level is open:
# ``apply`` then hands a Function that defines ``jvp`` to it, with ``_apply``.
jvp_hook = None


_new_obj = object.__new__


def _new_ctx(cls, name):
    """``FunctionCtx(name)`` without the call (``cls`` is FunctionCtx)."""
    ctx = _new_obj(cls)
    ctx._fn_name = name
    return ctx


def _apply(cls, args, kwargs):
    """``cls.apply(*args, **kwargs)``: run ``forward`` without recording, then
    append one Python record for the outputs."""
    ctx = _new_obj(FunctionCtx)
    ctx._fn_name = cls._backward_name
    if cls._setup_ctx:
        args, kwargs = _bind(cls, args, kwargs)
    elif kwargs:
        args, kwargs = _bind_with_ctx(cls, args, kwargs)
    needs = tuple([isinstance(a, Tensor) and a._rg for a in args])
    ctx.needs_input_grad = needs
    # forward (and setup_context) with recording off, as under no_grad
    enabled = grad_mode.enabled
    if enabled:
        set_grad_mode(False)
    try:
        if cls._setup_ctx:
            outputs = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, outputs)
        elif kwargs:
            outputs = cls.forward(ctx, *args, **kwargs)
        else:
            outputs = cls.forward(ctx, *args)
    finally:
        if enabled or grad_mode.enabled:
            set_grad_mode(enabled)
    record = enabled and any(needs)
    dirty = ctx._dirty
    if dirty:
        is_tuple = isinstance(outputs, tuple)
        outs = list(outputs) if is_tuple else [outputs]
        dirty = _check_dirty(ctx, outs, record)
    elif not isinstance(outputs, tuple):
        # one output (the usual case)
        o = outputs
        if isinstance(o, Tensor):
            for a in args:
                if o is a:
                    # an input returned as is: give it a fresh identity
                    o = _renamed(ctx, o, _alias(o))
                    break
            else:
                if o._tape is not None:
                    # a result of recording: a fresh identity
                    o = _renamed(ctx, o, _leaf(o._data))
        if not record:
            _pack_saved(ctx)
            return o
        if isinstance(o, Tensor) and o._data.dtype.kind == 'f' \
                and not ctx._non_differentiable:
            return _record_one(cls, ctx, args, needs, o)
        return _record(cls, ctx, args, [o], False, dirty)
    else:
        is_tuple = True
        outs = list(outputs)
    for i, o in enumerate(outs):
        if isinstance(o, Tensor):
            arg = False
            for a in args:
                if o is a:
                    arg = True
                    break
            if not (arg or o._tape is not None):
                continue
            if dirty and id(o) in dirty:
                continue            # changed in place: returned as the same object
            # an input returned as is, or a result of recording: give it a fresh identity
            outs[i] = _renamed(ctx, o, _alias(o) if arg else _leaf(o._data))
    if not record:
        _pack_saved(ctx)
        return tuple(outs) if is_tuple else outs[0]
    return _record(cls, ctx, args, outs, is_tuple, dirty)


def _renamed(ctx, old, new):
    """``new``, the fresh identity ``apply`` gives output ``old``, keeping a
    ``mark_non_differentiable`` made of ``old`` (an input returned as is)."""
    if id(old) in ctx._non_differentiable:
        ctx._non_differentiable += (id(new),)
    return new


def _in_fields(rec, args, tape):
    """The record's per-input fields: slot (-1: not a tensor, or no grad), shape, dtype."""
    in_slots, in_shapes, in_dtypes = [], [], []
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            in_slots.append(_ops._slot(a, tape))
            in_shapes.append(d.shape)
            in_dtypes.append(d.dtype)
        else:
            in_slots.append(-1)
            in_shapes.append(())
            in_dtypes.append(None)
    rec.in_slots, rec.in_shapes, rec.in_dtypes = in_slots, in_shapes, in_dtypes


def _tape_for(args):
    """The tape the record of a Function of ``args`` goes on (_ops.tape_of_all)."""
    t = None
    for a in args:
        if isinstance(a, Tensor):
            if t is not None:
                return _ops.tape_of_all([a for a in args if isinstance(a, Tensor)])
            t = a
    tape = t._tape
    if tape is None:
        return open_tape()
    if tape.alias is not None:
        tape = resolve(t)
    return tape


def _record_one(cls, ctx, args, needs, o):
    """``_record`` for one floating output, not marked dirty or non-differentiable."""
    tape = _tape_for(args)
    rec = _FunctionRecord()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = len(args)
    _in_fields(rec, args, tape)
    d = o._data
    index = tape.n
    slot = tape.alloc(d.size)
    o._rg = True
    o._tape = tape
    o._goff = slot
    o._rec = index
    rec.out_slots, rec.out_shapes, rec.out_dtypes = [slot], [d.shape], [d.dtype]
    tape.rec += PACK(_PYTHON_OP, slot, 0, -1, -1, 0, len(tape.py), 0)
    tape.py.append(rec)
    tape.n = index + 1
    # saved tensors are packed now that the output has its slot
    _pack_saved(ctx)
    return o


def _record(cls, ctx, args, outs, is_tuple, dirty):
    """Append the Python record of ``cls.apply(*args)`` with outputs ``outs``."""
    tape = _tape_for(args)
    rec = _FunctionRecord()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = len(args)
    _in_fields(rec, args, tape)
    out_slots, out_shapes, out_dtypes = [], [], []
    index = tape.n
    rebound = []
    for o in outs:
        differentiable = (isinstance(o, Tensor) and id(o) not in ctx._non_differentiable
                          and o._data.dtype.kind == 'f')
        if not differentiable:
            out_slots.append(-1)
            out_shapes.append(np.shape(o._data) if isinstance(o, Tensor) else ())
            out_dtypes.append(o._data.dtype if isinstance(o, Tensor) else None)
            continue
        if dirty and id(o) in dirty:
            if o._tape is not None:
                # records made so far that saved o's data by reference see new values
                t0 = resolve(o)
                t0.add_dirty(o._goff, index)
            rebound.append(o)
        slot = tape.alloc(o._data.size)
        o._rg = True
        o._tape = tape
        o._goff = slot
        o._rec = index
        out_slots.append(slot)
        out_shapes.append(o._data.shape)
        out_dtypes.append(o._data.dtype)
    rec.out_slots, rec.out_shapes, rec.out_dtypes = out_slots, out_shapes, out_dtypes
    tape.xslots += sum(1 for s in out_slots if s >= 0) - 1
    first = next((s for s in out_slots if s >= 0), tape.gpos)
    tape.rec += PACK(_PYTHON_OP, first, 0, -1, -1, 0, len(tape.py), 0)
    tape.py.append(rec)
    tape.n += 1
    # saved tensors are packed now that the outputs have their slots
    _pack_saved(ctx)
    for o in rebound:
        # a view changed in place rewrites its base's graph; a base, its views'
        if o._extra is not None:
            _rewrite_views(o)
    return tuple(outs) if is_tuple else outs[0]


def _pack_saved(ctx):
    """Hold what ``forward`` saved (``_Saved``: no cycle through the tape)."""
    to_save = ctx._to_save
    if to_save:
        ctx._saved = [None if t is None else _Saved(t) for t in to_save]
        ctx._to_save = ()
    else:
        ctx._saved = []


def _append_own(tape, rec, ctx, o):
    """Give result ``o`` its slot on ``tape`` and append ``rec`` as the Python
    record that made it (the record ``apply`` appends for one floating result)."""
    d = o._data
    index = tape.n
    slot = tape.alloc(d.size)
    o._rg = True
    o._tape = tape
    o._goff = slot
    o._rec = index
    rec.out_slots, rec.out_shapes, rec.out_dtypes = [slot], [d.shape], [d.dtype]
    tape.rec += PACK(_PYTHON_OP, slot, 0, -1, -1, 0, len(tape.py), 0)
    tape.py.append(rec)
    tape.n += 1
    _pack_saved(ctx)
    return o


def apply_own(cls, x, *args):
    """``cls.apply(x, *args)`` for the library's own Functions of one tensor ``x``
    (the other arguments are not tensors) and one floating result, which set
    up ``ctx`` in ``forward`` without ``mark_dirty``/``mark_non_differentiable``
    and save ``x`` alone.  The record is the one ``apply`` makes, without its
    generic work (a loss is called once per training step, where that work
    cost more than the loss)."""
    if jvp_hook is not None or type(x) is not Tensor:
        return cls.apply(x, *args)
    ctx = _new_ctx(FunctionCtx, cls._backward_name)
    rg = x._rg
    ctx.needs_input_grad = (rg,) + (False,) * len(args)
    o = cls.forward(ctx, x, *args)      # (records nothing: NumPy only)
    if not (rg and grad_mode.enabled):
        _pack_saved(ctx)
        return o
    tape = x._tape
    if tape is None:
        tape = _ops.open_tape()
    elif tape.alias is not None:
        tape = resolve(x)
    rec = _FunctionRecord()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = 1 + len(args)
    rec.in_slots = [_ops._slot(x, tape)] + [-1] * len(args)
    rec.in_shapes = [x._data.shape] + [()] * len(args)
    rec.in_dtypes = [x._data.dtype] + [None] * len(args)
    return _append_own(tape, rec, ctx, o)


class _OwnInputsRecord(_FunctionRecord):
    """The record ``apply_own_inputs`` makes: the compiled sweep hands the output's
    gradient array to ``cls._backward_arrays(ctx, g)``, which returns one array (or
    None) per tensor input, each in that input's shape.  ``create_graph`` and node
    hooks take the generic path (``cls.backward`` with tensors) it inherits."""
    __slots__ = ()

    def backward(self, store):
        s = self.out_slots[0]
        if s < 0 or not store.reached(s):
            return
        shape = self.out_shapes[0]
        g = store.get(s, math.prod(shape), shape)
        for gi, si in zip(self.cls._backward_arrays(self.ctx, g), self.in_slots):
            if gi is not None and si >= 0:
                store.add(si, gi.size, gi)


def apply_own_inputs(cls, tensors, *args):
    """``cls.apply(*tensors, *args)`` for the library's own Functions of several
    tensors (each a Tensor or None; the other arguments are not tensors) and one
    floating result, with ``forward`` as ``apply_own`` asks (NumPy only, ctx set
    up there, no ``mark_dirty``/``mark_non_differentiable``) and a
    ``_backward_arrays(ctx, g)`` for the compiled sweep (see ``_OwnInputsRecord``).
    ``apply_own`` for more than one differentiable input: a convolution's x, w
    and bias."""
    if jvp_hook is not None or any(t is not None and type(t) is not Tensor for t in tensors):
        return cls.apply(*tensors, *args)
    ctx = _new_ctx(FunctionCtx, cls._backward_name)
    needs = tuple(t is not None and t._rg for t in tensors)
    ctx.needs_input_grad = needs + (False,) * len(args)
    o = cls.forward(ctx, *tensors, *args)      # (records nothing: NumPy only)
    if not (grad_mode.enabled and any(needs)):
        _pack_saved(ctx)
        return o
    tape = _ops.tape_of_all([t for t in tensors if t is not None])
    rec = _OwnInputsRecord()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = len(tensors) + len(args)
    rec.in_slots = [-1 if t is None else _ops._slot(t, tape) for t in tensors] + [-1] * len(args)
    rec.in_shapes = [() if t is None else t._data.shape for t in tensors] + [()] * len(args)
    rec.in_dtypes = [None if t is None else t._data.dtype for t in tensors] + [None] * len(args)
    return _append_own(tape, rec, ctx, o)


def _rewrite_views(o):
    """After dirty ``o`` became this Function's output: as after an in-place op,
    a view rewrites its base's graph, a base refreshes its views."""
    _ops._after_inplace(o, o, _views.snapshot_base(o, True))


def _check_dirty(ctx, outs, record):
    """The ids of the tensors ``mark_dirty`` named, after PyTorch's checks; each
    gets a version bump (PyTorch bumps the version of a dirty tensor)."""
    ids = {id(t) for t in ctx._dirty if isinstance(t, Tensor)}
    returned = {id(o) for o in outs if isinstance(o, Tensor)}
    if not ids <= returned:
        raise RuntimeError('Some elements marked as dirty during the forward method were not '
                           'returned as output. The inputs that are modified inplace must all '
                           'be outputs of the Function.')
    for t in ctx._dirty:
        if not isinstance(t, Tensor):
            continue
        if record and t._rg and t._tape is None and id(t) not in ctx._non_differentiable \
                and t._data.dtype.kind == 'f':
            raise RuntimeError('a leaf Variable that requires grad has been used in an in-place '
                               'operation.')
        _bump_version(t)
    if not record:
        # nothing is recorded: a dirty tensor that requires grad comes back as an alias
        ids = {i for i in ids for t in ctx._dirty if id(t) == i and not t._rg}
    return ids


def _register_node_class(name):
    """``grad_fn`` of a Function's output is also its ctx, as in PyTorch: the
    node's class reads attributes it lacks (``saved_tensors``, what forward
    set) from the ctx."""
    from .. import _graph
    classes = getattr(_graph, '_classes', None)
    if classes is None or name in classes:
        return
    classes[name] = type(name, (_FunctionNode,), {'__slots__': ()})


def _make_function_node():
    from .._graph import Node

    class _FunctionNode(Node):
        __slots__ = ()

        def __getattr__(self, name):
            if name.startswith('__') or name == '_tape':
                raise AttributeError(name)
            try:
                ax = self._tape.record(self._rec)[6]
                ctx = self._tape.py[ax].ctx
            except Exception:
                ctx = None
            if ctx is not None and not name.startswith('_saved_'):
                try:
                    return getattr(ctx, name)
                except AttributeError:
                    pass
            return Node.__getattr__(self, name)
    return _FunctionNode


_FunctionNode = _make_function_node()
# PyTorch's name for the class of a custom Function's ``grad_fn`` (isinstance checks)
BackwardCFunction = _FunctionNode


def once_differentiable(fn):
    """Decorate a ``backward`` that is written in NumPy (or otherwise not in tape
    ops): it runs with recording off, and differentiating it again raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        if not grad_mode.enabled:
            # recording is off already (the compiled sweep's call): no_grad's work
            # is only to restore the mode, should fn have turned it on
            try:
                return fn(ctx, *args)
            finally:
                if grad_mode.enabled:
                    set_grad_mode(False)
        with no_grad():
            res = fn(ctx, *args)
        if not grad_mode.enabled:
            return res
        deps = [a for a in args if isinstance(a, Tensor) and a._rg]
        if not deps:
            return res
        seq = res if isinstance(res, tuple) else (res,)
        out = tuple(_OnceDifferentiable.apply(r, *deps) if isinstance(r, Tensor) else r
                    for r in seq)
        return out if isinstance(res, tuple) else out[0]
    return wrapper


class _OnceDifferentiable(Function):
    """Passes a value through, tied to the gradients it came from; differentiating
    through it raises, as PyTorch does for ``once_differentiable``."""
    @staticmethod
    def forward(ctx, value, *deps):
        return _leaf(value._data)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError('trying to differentiate twice a function that was marked with '
                           '@once_differentiable')
