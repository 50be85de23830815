"""Function transforms: differentiate a Python function by decorating it.

The same engine as ``backward`` and ``autograd.grad``, in the style of JAX and
HIPS autograd: the decorated function runs eagerly (Python control flow and
all), its ops are recorded, and one compiled sweep gives the gradient.

As with ``torch.func``, a result stays connected to the graph of whatever
outside the transform requires grad (an argument that requires grad, a
parameter the function closes over, an enclosing transform's input), so
transforms nest and ``backward`` through a result reaches those tensors; a
result that depends on nothing of the kind is a plain value.

>>> import tape
>>> @tape.func.grad
... def f(x):
...     return (x ** 3).sum()
>>> f(tape.tensor([1.0, 2.0]))
tensor([ 3., 12.])
>>> tape.func.grad(tape.func.grad(lambda x: x ** 3))(tape.tensor(2.0))
tensor(12.)
"""
import functools
import threading
import weakref

import numpy as np

from . import autograd
from ._grad_mode import inference_mode, is_grad_enabled
from ._tape import resolve
from ._tensor import Tensor, _leaf
from ._vmap import _leaves, _rebuild, _spec, vmap

__all__ = ['grad', 'grad_and_value', 'value_and_grad', 'vjp', 'jacrev', 'jacfwd', 'hessian',
           'jvp', 'linearize', 'vmap', 'functional_call']


class _NotScalarError(TypeError, RuntimeError):
    """PyTorch raises RuntimeError here; tape has raised TypeError: either catches it."""


def _recording():
    """Ops recorded for a transform's own work, as torch.func's transforms have it
    even inside ``no_grad`` or ``inference_mode`` (where ``enable_grad`` yields)."""
    return inference_mode(False)


def _as_input(x):
    """What the function runs on: a view of ``x`` when it requires grad (only the
    argument's own path is differentiated, and the result stays connected to
    ``x``'s graph, as in ``torch.func``), else a fresh leaf that requires grad.
    (Under ``no_grad`` no result connects to an outer graph: a fresh leaf too.)"""
    if isinstance(x, Tensor):
        if x._rg and is_grad_enabled():
            return x.view_as(x)
        return _leaf(x._data).requires_grad_()
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return _leaf(arr).requires_grad_()


def _argnums(argnums):
    if isinstance(argnums, int):
        return (argnums,)
    if not isinstance(argnums, tuple):
        raise RuntimeError(f'argnums must be int or Tuple[int, ...], got: {type(argnums)}')
    return argnums


def _tensors(tree):
    """The tensors in a pytree of tuples, lists and dicts."""
    if isinstance(tree, Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            yield from _tensors(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from _tensors(t)


def _map(fn, tree):
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, (tuple, list)):
        if hasattr(tree, '_fields'):            # a namedtuple takes its fields one by one
            return type(tree)(*(_map(fn, t) for t in tree))
        return type(tree)(_map(fn, t) for t in tree)
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    return tree


# The fresh leaves transforms make for their inputs (by id, while they live), and
# those of the transforms running now in this thread: a fresh leaf of a finished
# transform, still listed on a shared tape, is nothing a result can connect to.
_FRESH = weakref.WeakValueDictionary()


class _Active(threading.local):
    ids = frozenset()


_active = _Active()


def _outer_leaves(tensors, own):
    """The leaves that require grad on the graphs of ``tensors`` that a result may
    stay connected to: not the transform's own inputs, nor those of finished ones."""
    skip = {id(f) for f in own}
    running = _active.ids
    tapes, out = set(), {}
    for t in tensors:
        if t._rg and t._tape is None:
            # a leaf on no tape (a parameter returned as is, a cotangent or tangent
            # that requires grad): it is an outer leaf itself, as in torch.func
            i = id(t)
            if i not in skip and (i in running or _FRESH.get(i) is not t):
                out.setdefault(i, t)
        elif t._rg and t._tape is not None:
            tp = resolve(t)
            if id(tp) in tapes:
                continue
            tapes.add(id(tp))
            for leaf, _ in tp.leaves:
                i = id(leaf)
                if leaf._rg and i not in skip and (i in running or _FRESH.get(i) is not leaf):
                    out.setdefault(i, leaf)
    return list(out.values())


class _Outer:
    """Decides, per result tensor, whether it stays connected to the outer graph
    (never when the transform was called with grad mode off, ``on`` False: as in
    torch.func, the outer graph records nothing then)."""

    def __init__(self, tensors, own, on=True):
        self.leaves = _outer_leaves(tensors, own) if on else []

    def __bool__(self):
        return bool(self.leaves)

    def keep(self, t):
        """``t`` itself if its graph reaches an outer leaf, else ``t.detach()``.
        (A tape may hold unrelated graphs, so its leaves alone do not say.)"""
        if not isinstance(t, Tensor) or not t._rg:
            return t
        if self.leaves:
            if any(x is t for x in self.leaves):
                return t
            if t._tape is not None:
                gs = autograd.grad(t, self.leaves, grad_outputs=_leaf(np.ones_like(t._data)),
                                   retain_graph=True, allow_unused=True)
                if any(g is not None for g in gs):
                    return t
                if any(_tangent_reached(t, self.leaves, _leaf(np.ones_like(t._data)))):
                    return t
        return t.detach()


def _tangent_reached(out, leaves, seed=None):
    """Per leaf: whether it is a dual's hidden leaf of the open forward-AD level that
    ``out`` depends on (tape/autograd/forward_ad.py).  A reverse sweep reaches
    those only as unpack_dual's tangent sweeps run it, so the transforms' check of
    what a result stays connected to asks this too: a gradient taken inside a
    dual level keeps its tangent."""
    from .autograd import forward_ad as fw
    if fw._current_level < 0 or not any('_fwad_fake' in x.__dict__ for x in leaves):
        return [False] * len(leaves)
    fw._sweeping[0] = True
    try:
        gs = autograd.grad(out, leaves, grad_outputs=seed, retain_graph=True,
                           allow_unused=True)
    finally:
        fw._sweeping[0] = False
    return [g is not None and '_fwad_fake' in x.__dict__ for x, g in zip(leaves, gs)]


def _with_leaves(outer, tensors, own):
    """``outer`` joined by the outer leaves of ``tensors`` (the cotangents or
    tangents a transform was given: a result they reach stays connected to them)."""
    more = [x for x in _outer_leaves([t for t in tensors if isinstance(t, Tensor)], own)
            if not any(x is y for y in outer.leaves)]
    if not more:
        return outer
    both = _Outer((), ())
    both.leaves = outer.leaves + more
    return both


class _Running:
    """Registers a transform's fresh inputs, and marks them running while ``fn`` runs.
    ``given``: the arguments ``inputs`` were made from (``_as_input``)."""

    def __init__(self, inputs, given=()):
        self.own = [x for x in inputs if x._tape is None]
        for x in self.own:
            _FRESH[id(x)] = x
        self.on = is_grad_enabled()         # (made before the transform records)
        # the inputs made of tensor arguments, with those arguments
        self.views = [(m, g) for m, g in zip(inputs, given)
                      if m is not g and isinstance(g, Tensor)]

    def keeper(self, outer, give_back=True):
        """What ``outer.keep`` makes of what the function returned, except that a
        leaf that requires grad returned as is stays that tensor (even under
        ``no_grad``), and, with ``give_back``, an input returned as is is the
        argument it was made of (torch.func's reverse-mode transforms give back
        the tensor itself; jvp and jacfwd a new one)."""
        views = self.views if give_back else ()

        def keep(t):
            for m, g in views:
                if t is m:
                    return g
            if isinstance(t, Tensor) and t._rg and t._tape is None:
                i = id(t)       # (not a finished transform's own input)
                if i in _active.ids or _FRESH.get(i) is not t:
                    return t
            return outer.keep(t)
        return keep

    def __enter__(self):
        self.prev = _active.ids
        _active.ids = self.prev | {id(x) for x in self.own}
        return self

    def __exit__(self, *exc):
        _active.ids = self.prev
        return False


def _split_aux(fn, out, has_aux, api):
    """``(output, aux)``; ``api`` is how PyTorch's message names the transform
    (grad's is grad_and_value's, jacrev's vjp's and jacfwd's jvp's, as there)."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f'{api}: output of function f should be a tuple: '
                           '(output, aux) if has_aux is True')
    return out


def _check_scalar(fn, out, zero_dim=False):
    """``zero_dim``: torch.func's grad and grad_and_value want a 0-dim tensor;
    tape's own value_and_grad takes any one-element tensor."""
    if not isinstance(out, Tensor):
        raise _NotScalarError(f'{getattr(fn, "__name__", "f")}: grad needs a function returning '
                              f'a one-element tensor; grad_and_value(f)(*args): Expected '
                              f'f(*args) to return a Tensor, got {type(out)}')
    if out._data.size != 1 or (zero_dim and out._data.ndim != 0):
        raise _NotScalarError(
            f'{getattr(fn, "__name__", "f")}: grad needs a function returning a one-element '
            f'tensor, got shape {tuple(out._data.shape)}; grad_and_value(f)(*args): Expected '
            f'f(*args) to return a scalar Tensor, got tensor with {out._data.ndim} dims. '
            'Maybe you wanted to use the vjp or jacrev APIs instead?')


def _check_dual(t, name):
    """torch.func's forward-mode transforms make a dual of each primal: one that
    is not floating point (or a tangent that is not) raises make_dual's ValueError
    (the message names the dtype as tape.autograd.forward_ad.make_dual's does)."""
    if isinstance(t, Tensor) and t._data.dtype.kind not in 'fc':
        from ._tensor import DTYPE_NAMES
        dt = DTYPE_NAMES.get(t._data.dtype, str(t._data.dtype))
        raise ValueError(f'Expected {name} to be floating point or complex, but got: '
                         f'{dt.replace("tape.", "torch.")}')


def _enter(args, nums, forward=False):
    """The call's arguments with the differentiated ones (``nums``) made inputs
    of this transform, those inputs, and the run that watches them (``forward``:
    the transform is a forward-mode one of torch.func, which checks dtypes so)."""
    args = list(args)
    for i in nums:
        if not isinstance(i, int):
            raise RuntimeError(f'argnum must be int, got: {type(i)}')
        if not -len(args) <= i < len(args):
            raise RuntimeError(f'Got argnum={i}, but only {len(args)} positional inputs')
    # wrapped first, as torch does: (0, -2) of two arguments names the first twice
    nums = tuple(i % len(args) for i in nums)
    if not nums:
        raise RuntimeError('argnums must be non-empty')
    if len(set(nums)) != len(nums):
        raise RuntimeError(f'argnums elements must be unique, got {nums}')
    inputs, trees, given = [], [], []
    for i in nums:
        if forward:
            for x in _leaves(args[i]):
                _check_dual(x, 'primal')
    for i in nums:
        # an argument may be a pytree (tuples, lists, dicts) of tensors, as in torch.func:
        # each leaf is an input, and its gradient comes back in the same structure
        given.extend(_leaves(args[i]))
        made = [_as_input(x) for x in _leaves(args[i])]
        trees.append((args[i], len(made)))
        args[i] = _rebuild(args[i], iter(made))
        inputs.extend(made)

    def regroup(flat):
        """Per-input results (in ``inputs``' order) as one pytree per argnum."""
        it = iter(flat)
        return tuple(_rebuild(tree, it) for tree, _ in trees)
    return args, inputs, _Running(inputs, given), regroup


def _value_and_grad(fn, argnums, has_aux, args, kwargs, api):
    nums = _argnums(argnums)
    args, inputs, run, regroup = _enter(args, nums)
    with _recording():
        with run:
            out, aux = _split_aux(fn, fn(*args, **kwargs), has_aux,
                                  'value_and_grad(f)(*args)' if api == 'value_and_grad'
                                  else 'grad_and_value(f)(*args)')
        _check_scalar(fn, out, zero_dim=api != 'value_and_grad')
        outer = _Outer([out, *_tensors(aux)], run.own, run.on)
        value = out.detach()
        if not out._rg:
            grads = tuple(_leaf(np.zeros_like(x._data)) for x in inputs)
        elif not outer:
            # the usual case: nothing outside the transform on the graph, one plain sweep
            grads = autograd.grad(out, inputs, allow_unused=True, materialize_grads=True)
        else:
            # one plain sweep says which outer leaves the value reaches (often none: a
            # shared tape holds unrelated graphs); only then is the gradient recorded
            n = len(inputs)
            first = autograd.grad(out, inputs + outer.leaves, retain_graph=True,
                                  allow_unused=True)
            tangent = _tangent_reached(out, outer.leaves)
            reached = [x for x, g, tr in zip(outer.leaves, first[n:], tangent)
                       if g is not None or tr]
            if not reached:
                grads = tuple(_leaf(np.zeros_like(x._data)) if g is None else g
                              for x, g in zip(inputs, first[:n]))
            else:
                value = out
                grads = autograd.grad(out, inputs, create_graph=True, allow_unused=True,
                                      materialize_grads=True)
                inner = _Outer((), ())
                inner.leaves = reached
                grads = tuple(inner.keep(g) for g in grads)
    g = regroup(grads)
    g = g[0] if isinstance(argnums, int) else g
    if has_aux:
        value = (value, _map(run.keeper(outer), aux))
    return value, g


def value_and_grad(fn, argnums=0, has_aux=False):
    """``fn``'s value and its gradient with respect to the ``argnums`` arguments.

    ``fn`` must return a one-element tensor (with ``has_aux``, a pair
    ``(value, aux)``; the value returned is then ``(value, aux)``).  The gradient
    is itself differentiable, so transforms nest (second derivatives and beyond).
    """
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return _value_and_grad(fn, argnums, has_aux, args, kwargs, 'value_and_grad')
    return wrapped


def grad_and_value(fn, argnums=0, has_aux=False):
    """As ``torch.func.grad_and_value``: ``(gradient, value)``, or
    ``(gradient, (value, aux))`` with ``has_aux``."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        value, g = _value_and_grad(fn, argnums, has_aux, args, kwargs, 'grad_and_value')
        return g, value
    return wrapped


def grad(fn, argnums=0, has_aux=False):
    """The gradient of ``fn`` (a one-element result) with respect to argument
    ``argnums`` (an int, or a tuple for several).  With ``has_aux``, ``fn``
    returns ``(value, aux)`` and this gives ``(gradient, aux)``."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        value, g = _value_and_grad(fn, argnums, has_aux, args, kwargs, 'grad')
        return (g, value[1]) if has_aux else g
    return wrapped


_VJP = 'vjp(f, *primals)'
_JVP = 'jvp(f, primals, tangents)'


def _check_outputs(out, api, floating=True):
    """The tensors of ``out`` (a pytree), after torch.func's checks: not empty, only
    tensors, and (``floating``: reverse mode) only floating ones."""
    outs = _leaves(out)
    if not outs or (len(outs) == 1 and outs[0] is None):
        raise RuntimeError(f'{api}: Expected f to be a function that has non-empty output '
                           f'(got output = {outs})')
    for o in outs:
        if not isinstance(o, Tensor):
            raise RuntimeError(f'{api}: expected f(*primals) to return only tensors, got '
                               f'unsupported type {type(o)}')
        if floating and o._data.dtype.kind not in 'fc':
            from ._tensor import DTYPE_NAMES
            dt = DTYPE_NAMES.get(o._data.dtype, str(o._data.dtype))
            raise RuntimeError('vjp(f, ...): All outputs of f must be floating-point or complex '
                               f'Tensors, got Tensor with dtype {dt}')
    return outs


def vjp(fn, *primals, has_aux=False):
    """``(fn(*primals), vjp_fn)``: ``vjp_fn(cotangent)`` gives one gradient per primal
    (with ``has_aux``, ``fn`` returns ``(output, aux)`` and this gives
    ``(output, vjp_fn, aux)``).

    >>> import tape
    >>> y, pullback = tape.func.vjp(lambda x: x * x, tape.tensor([1.0, 3.0]))
    >>> pullback(tape.ones(2))
    (tensor([2., 6.]),)
    """
    inputs = [_as_input(x) for x in _leaves(primals)]      # primals may be pytrees
    run = _Running(inputs, _leaves(primals))
    with _recording(), run:
        out, aux = _split_aux(fn, fn(*_rebuild(tuple(primals), iter(inputs))), has_aux, _VJP)
    outs = _check_outputs(out, _VJP)
    outer = _Outer([*outs, *_tensors(aux)], run.own, run.on)

    def pullback(cotangent, retain_graph=True, create_graph=None):
        if _spec(cotangent) != _spec(out):
            raise RuntimeError('Expected pytree structure of cotangents to be the same as pytree '
                               'structure of outputs to the function. cotangents: '
                               f'{_spec(cotangent)}, primal output: {_spec(out)}')
        cots = _leaves(cotangent)
        pairs = [(o, c) for o, c in zip(outs, cots) if o._rg]
        if not pairs:
            return _rebuild(tuple(primals), (_leaf(np.zeros_like(x._data)) for x in inputs))
        # (torch.func's create_graph=None: connected to enclosing levels when grad mode
        # is on, here the outer graph, which a cotangent that requires grad is part of)
        on = is_grad_enabled() if create_graph is None else bool(create_graph)
        keep = _with_leaves(outer, [c for _, c in pairs], run.own) if on else _Outer((), ())
        with _recording():
            cg = bool(keep)
            gs = autograd.grad([o for o, _ in pairs], inputs, grad_outputs=[c for _, c in pairs],
                               retain_graph=retain_graph, create_graph=cg,
                               allow_unused=True, materialize_grads=True)
        return _rebuild(tuple(primals), (keep.keep(g) for g in gs))
    res = _map(run.keeper(outer), out)
    if has_aux:
        return res, pullback, _map(run.keeper(outer), aux)
    return res, pullback


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """As ``torch.func.jacrev``: the Jacobian of ``func`` with respect to argument
    ``argnums`` by one reverse sweep per output element, of shape
    ``output.shape + input.shape`` (a tuple over ``argnums`` when it is a tuple,
    and the output's structure when ``func`` returns several tensors).

    >>> import tape
    >>> tape.func.jacrev(lambda x: x ** 2)(tape.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError('jacrev: `chunk_size` should be greater than 0.')
    return _jacobian(func, argnums, has_aux, _VJP)


def _jacobian(func, argnums, has_aux, api, randomness=None):
    """``jacrev``'s transform; ``api`` names the checks' PyTorch function (jacfwd's
    are jvp's, which also takes integer outputs and gives the Jacobian in the
    output's dtype, a tangent's; ``randomness``: jacfwd's)."""
    nums = _argnums(argnums)
    fwd = api == _JVP

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        from . import stack
        from ._vmap import _RANDOM_ERROR, _global_rng
        args, inputs, run, regroup = _enter(args, nums, forward=fwd)
        rng = _global_rng()
        gen0 = rng[0]
        state0 = gen0.bit_generator.state if randomness == 'error' else None
        with _recording():
            with run:
                out, aux = _split_aux(func, func(*args, **kwargs), has_aux, api)
            if randomness == 'error' and (rng[0] is not gen0
                                          or gen0.bit_generator.state != state0):
                # torch's jacfwd runs func under vmap, which refuses random ops by
                # default (seen, as vmap sees it, by the global generator moving)
                rng[0] = gen0
                gen0.bit_generator.state = state0
                raise RuntimeError(_RANDOM_ERROR)
            _check_outputs(out, api, floating=not fwd)
            outer = _Outer([*_tensors(out), *_tensors(aux)], run.own, run.on)

            def jac(o):
                od = o._data
                rows = [[] for _ in inputs]
                for j in range(od.size):
                    if o._rg:
                        seed = np.zeros(od.size, dtype=od.dtype if od.dtype.kind == 'f'
                                        else np.float64)
                        seed[j] = 1
                        gs = autograd.grad(o, inputs, grad_outputs=_leaf(seed.reshape(od.shape)),
                                           retain_graph=True, create_graph=bool(outer),
                                           allow_unused=True, materialize_grads=True)
                    else:
                        gs = [_leaf(np.zeros_like(x._data)) for x in inputs]
                    for r, g in zip(rows, gs):
                        r.append(g)
                res = []
                for x, r in zip(inputs, rows):
                    shape = tuple(od.shape) + tuple(x._data.shape)
                    dt = od.dtype if fwd else x._data.dtype
                    if not r:
                        res.append(_leaf(np.zeros(shape, dtype=dt)))
                    elif any(g._rg for g in r):
                        j = stack(r, dim=0).reshape(shape)
                        res.append(outer.keep(j if j.dtype == dt else j.to(dt)))
                    else:
                        res.append(_leaf(np.stack([g._data for g in r]).reshape(shape)
                                         .astype(dt, copy=False)))
                res = regroup(res)
                return res[0] if isinstance(argnums, int) else res
            result = _map(jac, out)
        if has_aux:
            return result, _map(run.keeper(outer, give_back=not fwd), aux)
        return result
    return wrapped


def jacfwd(func, argnums=0, has_aux=False, *, randomness='error'):
    """As ``torch.func.jacfwd``: the Jacobian of ``func`` with respect to argument
    ``argnums``, laid out as ``jacrev``'s (``output.shape + input.shape``).

    tape has no forward-mode AD: this computes the same Jacobian as ``jacrev``,
    by one reverse sweep per output element, so it costs ``jacrev``'s time (a
    function with many outputs and few inputs is where forward mode would have
    been cheaper).  ``randomness`` is vmap's: with ``'error'`` (the default) a
    draw from tape's global generator in ``func`` raises, as under torch's vmap;
    otherwise random ops simply run once (there is no vmap inside).
    """
    if randomness not in ('error', 'different', 'same'):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    return _jacobian(func, argnums, has_aux, _JVP, randomness)


def hessian(func, argnums=0):
    """As ``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``, the
    Jacobian of the gradient (all reverse sweeps here), of shape
    ``output.shape + input.shape + input.shape``.

    >>> import tape
    >>> tape.func.hessian(lambda x: (x ** 3).sum())(tape.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """As ``torch.func.jvp``: ``(func(*primals), J @ tangents)`` (with ``has_aux``,
    ``func`` returns ``(output, aux)`` and this gives ``(output, jvp_out, aux)``).

    Computed without forward-mode AD, by the double-vjp trick: ``J v`` is the
    gradient, with respect to a dummy cotangent ``u``, of ``(J^T u) . v``, two
    reverse sweeps, the first recorded.  The results are differentiable and
    stay connected to an enclosing transform's inputs, as ``vjp``'s do.  With
    ``strict``, an output that does not depend on the primals raises, as in PyTorch.

    >>> import tape
    >>> tape.func.jvp(tape.sin, (tape.tensor([0.0, 1.0]),), (tape.tensor([1.0, 1.0]),))[1]
    tensor([1.0000, 0.5403])
    """
    from . import zeros_like
    if not isinstance(primals, tuple):
        raise RuntimeError(f'{_JVP}: Expected primals to be a tuple. E.g. it should be valid '
                           'to call f(*primals).')
    p_leaves, t_leaves = _leaves(primals), _leaves(tangents)
    # torch's checks, in its order: the structures, then each side's leaves
    if _spec(primals) != _spec(tangents):
        raise RuntimeError(f'{_JVP}: Expected primals and tangents to have the same python '
                           'structure. For example, if primals is a tuple of 3 tensors, '
                           'tangents also must be. Got primals with structure '
                           f'{_spec(primals)} and tangents with structure {_spec(tangents)}')
    for what, ls in (('primals', p_leaves), ('tangents', t_leaves)):
        if not ls:
            raise RuntimeError(f'{_JVP}: Expected {what} to contain at least one Tensor.')
        for x in ls:
            if not isinstance(x, Tensor):
                raise RuntimeError(f'{_JVP}: Expected {what} to only contain Tensors, got '
                                   f'{type(x)}')
    for p, t in zip(p_leaves, t_leaves):
        _check_dual(p, 'primal')
        _check_dual(t, 'tangent')
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError('Trying to set a forward gradient that has a different size '
                               'than that of the original Tensor, this is not supported. '
                               f'Tensor is of size {list(p.shape)} while the given forward '
                               f'gradient is of size {list(t.shape)}.')
    inputs = [_as_input(x) for x in p_leaves]
    run = _Running(inputs)
    with _recording():
        with run:
            out, aux = _split_aux(func, func(*_rebuild(primals, iter(inputs))), has_aux, _JVP)
        outs = _leaves(out)
        for o in outs:
            if not isinstance(o, Tensor):
                raise RuntimeError(f'{_JVP}: expected f(*primals) to return only tensors, got '
                                   f'unsupported type {type(o)}')
        outer = _Outer([*outs, *_tensors(aux)], run.own, run.on)
        live = [k for k, o in enumerate(outs) if o._rg]
        if strict and any(
                k not in live or not any(g is not None for g in autograd.grad(
                    outs[k], inputs, _leaf(np.ones_like(outs[k]._data)), retain_graph=True,
                    allow_unused=True)) for k in range(len(outs))):
            # (an output whose graph the inputs are not on: PyTorch's has no tangent)
            raise RuntimeError('jvp(f, primals, tangents, strict=True): The output of f is '
                               'independent of the inputs. This is not allowed with '
                               'strict=True.')
        tangent_outs = [None] * len(outs)
        if live:
            us = [zeros_like(outs[k]).requires_grad_() for k in live]
            _Running(us)          # fresh leaves of this transform, never an outer graph's
            gs = autograd.grad([outs[k] for k in live], inputs, grad_outputs=us,
                               create_graph=True, allow_unused=True)
            pairs = [(g, t) for g, t in zip(gs, t_leaves) if g is not None and g._rg]
            if pairs:
                keep = _with_leaves(outer, [t for _, t in pairs], run.own) if run.on else outer
                jv = autograd.grad([g for g, _ in pairs], us,
                                   grad_outputs=[t.to(g.dtype) for g, t in pairs],
                                   create_graph=bool(keep), allow_unused=True,
                                   materialize_grads=True)
                for k, j in zip(live, jv):
                    tangent_outs[k] = keep.keep(j)
        for k, o in enumerate(outs):
            if tangent_outs[k] is None:
                tangent_outs[k] = _leaf(np.zeros_like(o._data))
    keep = run.keeper(outer, give_back=False)
    res = (_map(keep, out), _rebuild(out, iter(tangent_outs)))
    if has_aux:
        return res + (_map(keep, aux),)
    return res


def linearize(func, *primals):
    """As ``torch.func.linearize``: ``(func(*primals), jvp_fn)``, where
    ``jvp_fn(*tangents)`` is ``jvp(func, primals, tangents)[1]``.  tape stores no
    linearized graph: each ``jvp_fn`` call runs ``func`` again (two reverse
    sweeps, see ``jvp``)."""
    from ._tensor import DTYPE_NAMES
    p_leaves = _leaves(primals)
    for p in p_leaves:
        _check_dual(p, 'primal')
    out = vjp(func, *primals)[0]

    def jvp_fn(*tangents):
        # torch's checks of the tangents against the primals' structure, shapes and dtypes
        if _spec(tangents) != _spec(primals):
            raise RuntimeError(f'Expected the tangents {_spec(tangents)} to have the same '
                               f'argspec as the primals {_spec(primals)}')
        for idx, (p, t) in enumerate(zip(p_leaves, _leaves(tangents))):
            if isinstance(p, Tensor) and isinstance(t, Tensor):
                if tuple(t.shape) != tuple(p.shape):
                    raise RuntimeError(f'tangent:{idx} with shape {t.shape} in flattened '
                                       f"pytree doesn't match the shape {p.shape} of the "
                                       'corresponding primal.')
                if t.dtype != p.dtype:
                    raise RuntimeError(
                        f'tangent:{idx} with dtype {DTYPE_NAMES.get(t._data.dtype)} in '
                        f"flattened pytree doesn't match the dtype "
                        f'{DTYPE_NAMES.get(p._data.dtype)} of the corresponding primal.')
        return jvp(func, primals, tangents)[1]
    return out, jvp_fn


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """As ``torch.func.functional_call``: ``module(*args, **kwargs)`` with its
    parameters and buffers named in ``parameter_and_buffer_dicts`` (a dict from
    dotted names to tensors, or a tuple/list of such dicts) swapped in for the
    call and put back afterwards, even when the call raises.

    ``args`` that is not a tuple is the single positional argument.  With
    ``tie_weights`` (the default), a parameter the module holds under several
    names is replaced under all of them when one is given.  With ``strict``,
    names that are not the module's parameters/buffers, or parameters/buffers
    left out, raise PyTorch's RuntimeError.  A name that is neither is set as
    a plain attribute for the call (and removed or restored afterwards).

    >>> import tape
    >>> lin = tape.nn.Linear(2, 1)
    >>> params = {'weight': tape.ones(1, 2), 'bias': tape.zeros(1)}
    >>> tape.func.functional_call(lin, params, (tape.tensor([[1.0, 2.0]]),))
    tensor([[3.]])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError('Expected all elements of parameter_and_buffer_dicts to be '
                             'dictionaries')
        values, seen = {}, {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                seen[k] = seen.get(k, 0) + 1
        repeated = [k for k, n in seen.items() if n > 1]
        if repeated:
            raise ValueError(f'{repeated} appeared in multiple dictionaries; behavior of '
                             'functional call is ambiguous')
        for d in parameter_and_buffer_dicts:
            values.update(d)
    else:
        raise ValueError('Expected parameter_and_buffer_dicts to be a dict, or a list/tuple '
                         f'of dicts, but got {type(parameter_and_buffer_dicts)}')
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {} if kwargs is None else kwargs

    named = list(module.named_parameters(remove_duplicate=False)) + \
        list(module.named_buffers(remove_duplicate=False))
    if tie_weights:
        groups = {}
        for n, t in named:
            if t is not None:
                groups.setdefault(id(t), []).append(n)
        for ns in groups.values():
            given = [n for n in ns if n in values]
            if given and len(ns) > 1:
                v = values[given[0]]
                for n in given[1:]:
                    if values[n] is not v:
                        raise ValueError(f'functional_call got multiple values for keys '
                                         f'{given}, which are tied. Consider using '
                                         'tie_weights=False')
                for n in ns:
                    values.setdefault(n, v)
    # (after tying, as PyTorch checks: a tied name is given when one of its names is)
    if strict:
        names = {n for n, _ in named}
        unexpected = [k for k in values if k not in names]
        missing = [n for n, _ in named if n not in values]
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(f'Error(s) in reparametrizing for {type(module).__name__}:\n\t'
                               + '\n\t'.join(msgs))

    undo = []
    try:
        for key, value in values.items():
            *path, attr = key.split('.')
            mod = module
            for p in path:
                mod = getattr(mod, p)
            d = mod.__dict__
            for table in ('_parameters', '_buffers'):
                t = d.get(table)
                if t is not None and attr in t:
                    undo.append((t, attr, t[attr]))
                    t[attr] = value
                    break
            else:
                missing_attr = object()
                old = d.get(attr, missing_attr)
                undo.append((d, attr, old if old is not missing_attr else _ABSENT))
                d[attr] = value
        return module(*args, **kwargs)
    finally:
        for table, attr, old in reversed(undo):
            if old is _ABSENT:
                table.pop(attr, None)
            else:
                table[attr] = old


_ABSENT = object()


def stack_module_state(models):
    """As ``torch.func.stack_module_state``: the parameters and buffers of ``M``
    modules of one class stacked along a new first dim, as two dicts by name
    (``(params, buffers)``), for ensembling with :func:`vmap` and
    :func:`functional_call`.  Stacked parameters are new leaves that require grad
    (optimizable, unrelated to the models' own parameters).

    >>> import tape
    >>> ms = [tape.nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = tape.func.stack_module_state(ms)
    >>> params['weight'].shape, params['weight'].requires_grad, buffers
    (tape.Size([4, 2, 3]), True, {})
    """
    models = list(models)
    if len(models) == 0:
        raise RuntimeError('stack_module_state: Expected at least one model, got 0.')
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError('stack_module_state: Expected all models to have the same '
                           'training/eval mode.')
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError('stack_module_state: Expected all models to be of the same class.')

    def stacked(tensors, name):
        need = [t.requires_grad for t in tensors]
        if any(need) and not all(need):
            raise RuntimeError(f'Expected {name} from each model to have the same '
                               '.requires_grad')
        from ._shapes import stack
        out = stack(tensors)
        return out.detach().requires_grad_() if all(need) else out

    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: stacked([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


__all__ += ['stack_module_state']


def functionalize(func, *, remove='mutations'):
    """As ``torch.func.functionalize``: ``func`` with its mutations removed.  tape
    runs eagerly and records no program to rewrite, so the function runs as it
    is: the values, the gradients and the inputs' mutations are the ones
    functionalization keeps.  With ``remove='mutations_and_views'`` an output
    that is a view (of an input) comes back as a copy, as PyTorch's does.

    >>> import tape
    >>> tape.func.functionalize(lambda x: x.clone().add_(1) * 2)(tape.zeros(2))
    tensor([2., 2.])
    """
    if remove not in ('mutations', 'mutations_and_views'):
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove="
            f"{remove}. Valid options are:\n     remove='mutations': all inplace and out= "
            "operators will be removed from the program, and replaced with their out-of-place "
            "equivalents.\n     remove='mutations_and_views': In addition to the above, all "
            "aliasing operators {view} will be replaced with their non-aliasing counterparts, "
            "{view}_copy.\n")

    def unalias(t):
        return t.clone() if t._base is not None else t

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        out = func(*args, **kwargs)
        return _map(unalias, out) if remove == 'mutations_and_views' else out
    return wrapped


def debug_unwrap(tensor, *, recurse=True):
    """As ``torch.func.debug_unwrap``: the tensor itself (tape's transforms wrap
    no tensor: inside them, tensors are ordinary tape tensors)."""
    return tensor


def replace_all_batch_norm_modules_(root):
    """As ``torch.func.replace_all_batch_norm_modules_``: every BatchNorm module in
    ``root`` (``root`` included) stops tracking running stats, in place (its
    ``running_mean``, ``running_var`` and ``num_batches_tracked`` become None, so
    it normalizes with the batch's statistics, in eval mode too); returns ``root``."""
    from .nn._conv_modules import _BatchNorm
    for m in root.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


__all__ += ['functionalize', 'debug_unwrap', 'replace_all_batch_norm_modules_']
