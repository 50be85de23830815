"""Activation checkpointing, as ``torch.utils.checkpoint``.

``checkpoint(function, *args)`` runs ``function`` without keeping its graph;
the backward runs it again with recording on (with the random state it had,
so dropout draws the same masks, when ``preserve_rng_state``) and
backpropagates through that recomputation.  Gradients equal those of
``function(*args)`` called plainly.

Two variants, chosen by ``use_reentrant`` as in PyTorch:

* ``use_reentrant=True`` (PyTorch's default, with its warning when the
  argument is not passed): a custom ``Function`` of the tensor arguments.
  Its backward recomputes from detached copies of the inputs and calls
  ``tape.autograd.backward``, so parameters used inside ``function`` get
  their ``.grad`` accumulated by that inner backward.  As in PyTorch, no
  keyword arguments; when no tensor argument requires grad the output does
  not either (PyTorch's warning "None of the inputs have requires_grad=True"),
  and gradients reach parameters only through ``.backward()``: tape does
  not raise, as PyTorch does, for ``autograd.grad`` through it, but only the
  inputs' gradients are returned then (parameters still get ``.grad``).
* ``use_reentrant=False``: the forward runs once with recording on to find
  the tensors requiring grad that the outputs depend on (parameters, tensors
  in closures), keeps only the outputs' values and drops that graph; the
  result is a ``Function`` of the inputs *and* those tensors, so
  ``autograd.grad``, ``backward(inputs=...)``, keyword arguments, nested
  outputs (tuples, lists, dicts) and outputs that require grad only through
  parameters work.  Under ``create_graph=True`` the recomputation records
  from the original inputs and its backward records too, so second-order
  gradients flow (to the inputs and the parameters).

Differences from PyTorch: tape's graph is not a saved-tensor-hook graph, so
``use_reentrant=False`` runs the forward with recording on (and the
recomputation once per backward); a closure over a *non-leaf* tensor merges
the recording with that tensor's graph until backward.  ``context_fn``,
``determinism_check`` and ``debug`` are accepted and ignored.
"""
import warnings

from .._tape import grad_mode as _grad_mode
from ..autograd.function import Function

__all__ = ['checkpoint', 'checkpoint_sequential', 'CheckpointFunction', 'detach_variable',
           'check_backward_validity']


def _tape():
    import tape
    return tape


def detach_variable(inputs):
    """Each tensor of the tuple ``inputs`` detached, keeping ``requires_grad``."""
    tape = _tape()
    if not isinstance(inputs, tuple):
        raise RuntimeError('Only tuple of tensors is supported. Got Unsupported input type: ',
                           type(inputs).__name__)
    out = []
    for inp in inputs:
        if not isinstance(inp, tape.Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs):
    tape = _tape()
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, tape.Tensor)):
        warnings.warn('None of the inputs have requires_grad=True. Gradients will be None',
                      stacklevel=2)


class _ForkedRng:
    """Run a block with the default generator set to ``state`` (when given),
    restoring the surrounding state after it (``torch.random.fork_rng``)."""

    def __init__(self, state):
        self.state = state

    def __enter__(self):
        if self.state is not None:
            tape = _tape()
            self.outer = tape.get_rng_state()
            tape.set_rng_state(self.state)

    def __exit__(self, *exc):
        if self.state is not None:
            _tape().set_rng_state(self.outer)


class _FreshTape:
    """Graphs that start from leaves in this block record on a new tape, not on
    the thread's open one (which may be the tape a backward is sweeping)."""

    def __enter__(self):
        self.saved = _grad_mode.open_tape
        _grad_mode.open_tape = None

    def __exit__(self, *exc):
        _grad_mode.open_tape = self.saved


class CheckpointFunction(Function):
    """The ``use_reentrant=True`` checkpoint: a Function of the arguments."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        tape = _tape()
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.fwd_cpu_state = tape.get_rng_state() if preserve_rng_state else None
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if isinstance(arg, tape.Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        with tape.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        tape = _tape()
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        create_graph = _grad_mode.enabled
        with _ForkedRng(ctx.fwd_cpu_state):
            detached_inputs = detach_variable(tuple(inputs))
            with tape.enable_grad(), _FreshTape():
                outputs = ctx.run_function(*detached_inputs)
        if isinstance(outputs, tape.Tensor):
            outputs = (outputs,)
        outputs_with_grad, args_with_grad = [], []
        for i in range(len(outputs)):
            if isinstance(outputs[i], tape.Tensor) and outputs[i].requires_grad:
                outputs_with_grad.append(outputs[i])
                args_with_grad.append(args[i])
        if len(outputs_with_grad) == 0:
            raise RuntimeError('none of output has requires_grad=True,'
                               ' this checkpoint() is not necessary')
        tape.autograd.backward(outputs_with_grad, args_with_grad, create_graph=create_graph)
        grads = tuple(inp.grad if isinstance(inp, tape.Tensor) else None
                      for inp in detached_inputs)
        return (None, None) + grads


# -------------------------------------------------------------- use_reentrant=False
def _flatten(obj, leaves):
    """``obj``'s tensors appended to ``leaves``; returns a spec to rebuild it."""
    tape = _tape()
    if isinstance(obj, tape.Tensor):
        leaves.append(obj)
        return ('T',)
    if isinstance(obj, tuple) and hasattr(obj, '_fields'):
        return ('N', type(obj), [_flatten(o, leaves) for o in obj])
    if isinstance(obj, (tuple, list)):
        return ('S', type(obj), [_flatten(o, leaves) for o in obj])
    if type(obj) is dict:
        return ('D', list(obj), [_flatten(v, leaves) for v in obj.values()])
    return ('V', obj)


def _unflatten(spec, it):
    kind = spec[0]
    if kind == 'T':
        return next(it)
    if kind == 'N':
        return spec[1](*[_unflatten(s, it) for s in spec[2]])
    if kind == 'S':
        return spec[1]([_unflatten(s, it) for s in spec[2]])
    if kind == 'D':
        return dict(zip(spec[1], [_unflatten(s, it) for s in spec[2]]))
    return spec[1]


def _detached(t):
    x = t.detach()
    if t.requires_grad:
        x.requires_grad_(True)
    return x


class _Frame:
    """What the non-reentrant checkpoint keeps between forward and backward."""
    __slots__ = ('function', 'args', 'kwargs', 'args_count', 'n_in', 'params', 'rng_state',
                 'outs', 'differentiable')


class _NonReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx, frame, *tensors):
        ctx.frame = frame
        ctx.save_for_backward(*tensors[:frame.n_in])
        outs = frame.outs
        frame.outs = None
        # an output the function's own graph does not reach (a detached tensor, a
        # constant) does not require grad, as in PyTorch, where the outputs are
        # the function's own
        fixed = [o for o, d in zip(outs, frame.differentiable) if not d]
        if fixed:
            ctx.mark_non_differentiable(*fixed)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        tape = _tape()
        frame = ctx.frame
        inputs = ctx.saved_tensors
        create_graph = _grad_mode.enabled
        # recompute from the inputs themselves under create_graph (so the gradient
        # graph reaches them), else from detached copies
        rebuilt = list(inputs) if create_graph else [_detached(t) for t in inputs]
        with _ForkedRng(frame.rng_state):
            args = _unflatten(frame.args, iter(rebuilt))
            kwargs = _unflatten(frame.kwargs, iter(rebuilt[frame.args_count:]))
            with tape.enable_grad(), _FreshTape():
                out = frame.function(*args, **kwargs)
        flat = []
        _flatten(out, flat)
        outs, gs = [], []
        for o, g in zip(flat, grads):
            if g is not None and o.requires_grad:
                outs.append(o)
                gs.append(g)
        targets = [t for t in rebuilt if t.requires_grad] + list(frame.params)
        if not outs or not targets:
            return (None,) * (1 + len(inputs) + len(frame.params))
        res = iter(tape.autograd.grad(outs, targets, gs, retain_graph=True,
                                      create_graph=create_graph, allow_unused=True))
        in_grads = tuple(next(res) if t.requires_grad else None for t in rebuilt)
        return (None,) + in_grads + tuple(res)


def _checkpoint_without_reentrant(function, preserve, args, kwargs):
    tape = _tape()
    if not _grad_mode.enabled:
        return function(*args, **kwargs)
    rng_state = tape.get_rng_state() if preserve else None
    in_args, in_kwargs = [], []
    args_spec = _flatten(args, in_args)
    kwargs_spec = _flatten(dict(kwargs), in_kwargs)
    inputs = in_args + in_kwargs
    copies = [_detached(t) for t in inputs]
    # the recording forward, on a fresh tape so that unrelated graphs stay out of it
    with _FreshTape():
        out = function(*_unflatten(args_spec, iter(copies)),
                       **_unflatten(kwargs_spec, iter(copies[len(in_args):])))
    flat = []
    out_spec = _flatten(out, flat)
    if not flat:
        return out
    own = {id(c) for c in copies}
    params, seen = [], set()
    from .._tape import resolve
    for o in flat:
        if o._tape is None:
            if o.requires_grad and id(o) not in own and id(o) not in seen:
                seen.add(id(o))           # a leaf returned as it is
                params.append(o)
            continue
        for leaf, _ in resolve(o).leaves:
            if leaf.requires_grad and id(leaf) not in own and id(leaf) not in seen:
                seen.add(id(leaf))
                params.append(leaf)
    frame = _Frame()
    frame.function = function
    frame.args = args_spec
    frame.kwargs = kwargs_spec
    frame.args_count = len(in_args)
    frame.n_in = len(inputs)
    frame.params = params
    frame.rng_state = rng_state
    frame.outs = [o.detach() for o in flat]
    frame.differentiable = [o.requires_grad for o in flat]
    del out, flat
    res = _NonReentrantCheckpoint.apply(frame, *inputs, *params)
    return _unflatten(out_spec, iter(res))


_USE_REENTRANT_WARNING = (
    'torch.utils.checkpoint: the use_reentrant parameter should be '
    'passed explicitly. Starting in PyTorch 2.9, calling checkpoint '
    'without use_reentrant will raise an exception. use_reentrant=False is '
    'recommended, but if you need to preserve the current default '
    'behavior, you can pass use_reentrant=True. Refer to docs for more '
    'details on the differences between the two variants.')

_SEQUENTIAL_WARNING = (
    'torch.utils.checkpoint.checkpoint_sequential: the use_reentrant '
    'parameter should be passed explicitly. '
    'In version 2.9 we will raise an exception if use_reentrant '
    'is not passed. use_reentrant=False is '
    'recommended, but if you need to preserve the current default '
    'behavior, you can pass use_reentrant=True. Refer to docs for more '
    'details on the differences between the two variants.')


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check='default',
               debug=False, early_stop=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed at backward instead of keeping
    its graph (see the module docstring).  ``preserve_rng_state=True`` (a
    keyword) replays the random draws of the forward in the recomputation.

    >>> import tape
    >>> from tape.utils.checkpoint import checkpoint
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> checkpoint(lambda t: (t ** 3).sum(), x, use_reentrant=False).backward()
    >>> x.grad
    tensor([ 3., 12.])
    """
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop('preserve_rng_state', True)
    if kwargs and use_reentrant:
        raise ValueError('Unexpected keyword arguments: ' + ','.join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not None or debug is not False:
            raise ValueError('Passing `context_fn` or `debug` is only supported when '
                             'use_reentrant=False.')
        return CheckpointFunction.apply(function, preserve, *args)
    if determinism_check not in ('default', 'none'):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f'{determinism_check}')
    return _checkpoint_without_reentrant(function, preserve, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None,  # noqa: A002
                          **kwargs):
    """Run ``functions`` (a list, or an ``nn.Sequential``) in order on
    ``input``, checkpointing all but the last of ``segments`` equal runs of
    them (the last runs plainly, as in PyTorch)."""
    if use_reentrant is None:
        warnings.warn(_SEQUENTIAL_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop('preserve_rng_state', True)
    if kwargs:
        raise ValueError('Unexpected keyword arguments: ' + ','.join(arg for arg in kwargs))

    def run_function(start, end, functions):
        def forward(input):  # noqa: A002
            for j in range(start, end + 1):
                input = functions[j](input)
            return input
        return forward

    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
