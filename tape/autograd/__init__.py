"""``tape.autograd``: backward, grad, and the legacy ``Variable`` name.

>>> import tape
>>> x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x ** 2).sum()
>>> tape.autograd.grad(y, x)
(tensor([2., 4., 6.]),)
"""
import warnings
from collections.abc import Mapping

import numpy as np

from .._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .._sweep import run, run_scalar as _run_one
_sweep_run = run        # (tape.jit replaces ``run`` while it traces: then no fast path)
from .._tensor import Tensor, _leaf

from .function import Function, FunctionCtx, once_differentiable
from .anomaly import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: F401
                      is_anomaly_enabled, set_detect_anomaly, watching as _watching)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from . import functional  # noqa: E402
from . import forward_ad  # noqa: E402
from . import graph  # noqa: E402
from . import profiler  # noqa: E402,F401
from . import grad_mode  # noqa: E402,F401  (torch.autograd.grad_mode)
from .._grad_mode import inference_mode  # noqa: E402,F401


class set_multithreading_enabled:
    """``torch.autograd.set_multithreading_enabled(mode)``: a context manager (and
    decorator) PyTorch uses to run backward on its device threads or not.  tape's
    backward always runs on the calling thread, so the mode changes nothing."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_multithreading_enabled(): argument 'mode' must be bool, "
                            f'not {type(mode).__name__}')
        self.mode = mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn

__all__ = ['backward', 'grad', 'Variable', 'Function', 'FunctionCtx', 'once_differentiable',
           'gradcheck', 'gradgradcheck', 'GradcheckError',
           'no_grad', 'enable_grad', 'set_grad_enabled', 'is_grad_enabled',
           'detect_anomaly', 'set_detect_anomaly', 'inference_mode', 'graph']


def _seq(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, graph.GradientEdge):
        return [graph.edge_tensor(x)]
    return [graph.edge_tensor(e) for e in x]


def _seeds(outputs, grad_outputs, create_graph):
    grads = []
    gs = _seq(grad_outputs) or [None] * len(outputs)
    if len(gs) != len(outputs):
        raise RuntimeError(f'got {len(outputs)} tensors and {len(gs)} gradients')
    for i, (o, g) in enumerate(zip(outputs, gs)):
        if not isinstance(o, Tensor):
            raise TypeError(f'backward: expected a Tensor as output {i}, got {type(o).__name__}')
        if not o._rg:
            raise RuntimeError(f'element {i} of tensors does not require grad and does not '
                               'have a grad_fn')
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f'gradients can be either Tensors or None, but got '
                            f'{type(g).__name__}')
        if g is None:
            if o._data.size != 1:
                raise RuntimeError('grad can be implicitly created only for scalar outputs '
                                   f'(output {i} has shape {tuple(o._data.shape)})')
            grads.append(1.0)
            continue
        if type(g) is Tensor:
            gd = g._data
            if type(gd) is np.ndarray and gd.shape == o._data.shape and gd.dtype.kind == 'f':
                grads.append(gd)            # the usual case: no checks left to make
                continue
        gd = g._data if isinstance(g, Tensor) else np.asarray(g)
        if np.shape(gd) != o._data.shape:
            if np.size(gd) == o._data.size and np.ndim(gd) == 0:
                gd = np.reshape(gd, o._data.shape)
            else:
                raise RuntimeError(
                    f'Mismatch in shape: grad_output[{i}] has a shape of '
                    f'{list(np.shape(gd))} and output[{i}] has a shape of '
                    f'{list(o._data.shape)}.')
        # the sweep casts when it seeds the float64 arena: no copy here
        gd = np.asarray(gd)
        grads.append(gd if gd.dtype.kind == 'f' else gd.astype(np.float64))
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the graph's leaves.

    >>> import tape
    >>> w = tape.tensor([3.0], requires_grad=True)
    >>> tape.autograd.backward(w * w)
    >>> w.grad
    tensor([6.])
    """
    if type(grad_tensors) is Tensor and type(tensors) is Tensor and inputs is None \
            and not create_graph and grad_variables is None and tensors._tape is not None:
        # ``y.backward(g)`` for one non-leaf y and a gradient of its shape (the
        # checks _seeds makes): the sweep of ``loss.backward()``
        gd = grad_tensors._data
        d = tensors._data
        if type(gd) is np.ndarray and gd.shape == d.shape and gd.dtype.kind == 'f' \
                and tensors._rg and run is _sweep_run and not is_anomaly_enabled():
            _run_one(tensors, True if retain_graph else False, gd)
            return
    if not is_anomaly_enabled():        # (a context manager per call costs ~1.5 us)
        return _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables,
                         inputs)
    with _watching(_seq(tensors)):      # anomaly mode's NaN check (tape/autograd/anomaly.py)
        _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)


def _backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
              grad_variables=None, inputs=None):
    if grad_variables is not None:
        grad_tensors = grad_variables
    outputs = _seq(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        # only these tensors receive .grad, as in PyTorch: a non-leaf among them
        # gets retain_grad() (so, as there, later backwards fill it too)
        from .._hooks import retain_grad
        ins = _seq(inputs)
        if not ins:
            raise RuntimeError('`inputs` argument to `backward()` cannot be empty.')
        for x in ins:
            if x._tape is not None:
                retain_grad(x)
        gs = grad(outputs, ins, grad_tensors, retain_graph=retain_graph,
                  create_graph=create_graph, allow_unused=True)
        done = set()
        for x, g in zip(ins, gs):
            if g is None or x._tape is not None:     # a non-leaf: its retain hook did it
                continue
            if id(x) in done:       # (a leaf given twice gets its gradient once)
                continue
            done.add(id(x))
            if not create_graph:
                g = g.detach()
            extra = x._extra
            runner = extra.get('accumulate_hooks') if extra is not None else None
            if runner is not None:
                # the leaf's AccumulateGrad node runs, with its hooks (grad() ran
                # only the tensor hooks); they may accumulate themselves
                from .._hooks import _apply
                g = _apply([runner], g, x._data.shape, 'a leaf tensor',
                           grad_enabled=bool(create_graph))
            if x._grad is None or create_graph:
                x._grad = g if x._grad is None else x._grad + g
            else:
                from .._sweep import _accumulate
                _accumulate(x, g._data)     # in place, as PyTorch's AccumulateGrad
            if extra is not None and 'post_accumulate' in extra:
                from .._hooks import run_post_accumulate_hooks
                run_post_accumulate_hooks(x)
        return
    if create_graph:
        from .._differentiable import backward_differentiable
        grads = _seeds(outputs, grad_tensors, True)
        with enable_grad():             # create_graph records even under no_grad
            backward_differentiable(outputs, _seq(grad_tensors), grads, retain_graph=True,
                                    inputs=None)
        return
    grads = _seeds(outputs, grad_tensors, False)
    run(outputs, grads, retain_graph)


def _unused_error(i, x):
    return RuntimeError(f'The differentiated Tensor at index {i} appears to not have been used '
                        'in the graph. Set allow_unused=True if this is the desired behavior. '
                        f'(input {i}, shape {tuple(x._data.shape)})')


def _check_reachable(outs, ins):
    """Raise for an input that no output's tape holds, before the sweep frees
    anything (PyTorch's engine runs no node for an unreachable input, so the
    graph stays usable after the error)."""
    from .._tape import resolve
    tapes = [resolve(o) for o in outs if isinstance(o, Tensor) and o._tape is not None]
    for i, x in enumerate(ins):
        if any(x is o for o in outs):
            continue
        if x._tape is None:
            if not any(id(x) in t.leafmap for t in tapes):
                raise _unused_error(i, x)
        elif resolve(x, move=False) not in tapes:
            raise _unused_error(i, x)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` (a tuple).

    Leaves' ``.grad`` are left untouched.  ``inputs`` may be a dict of tensors:
    the gradients then come back as a dict with its keys (as in PyTorch).
    """
    if type(inputs) is dict:
        keys = list(inputs)
        res = grad(outputs, tuple(inputs.values()), grad_outputs, retain_graph, create_graph,
                   only_inputs, allow_unused, is_grads_batched, materialize_grads)
        return dict(zip(keys, res))
    if isinstance(inputs, Mapping):
        raise TypeError(f'`inputs` argument to `grad()` must be a dict, not '
                        f'{type(inputs).__name__}. Other Mapping types are not supported.')
    if not only_inputs:
        warnings.warn('only_inputs argument is deprecated and is ignored now (defaults to True). '
                      'To accumulate gradient for other parts of the graph, please use '
                      'tape.autograd.backward.', FutureWarning, stacklevel=2)
    if materialize_grads and not isinstance(inputs, Tensor) and any(
            isinstance(x, graph.GradientEdge) for x in
            ((inputs,) if isinstance(inputs, graph.GradientEdge) else inputs)):
        raise RuntimeError('materialize_grads cannot be used when the given input is a '
                           'GradientEdge')
    if not is_anomaly_enabled():
        return _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
                     allow_unused, is_grads_batched, materialize_grads)
    with _watching(_seq(outputs)):      # anomaly mode's NaN check (tape/autograd/anomaly.py)
        return _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
                     allow_unused, is_grads_batched, materialize_grads)


def _grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
          only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    outs = _seq(outputs)
    ins = _seq(inputs)
    single = isinstance(inputs, Tensor)
    if not ins:
        raise RuntimeError('`inputs` argument to `grad()` cannot be empty.')
    if materialize_grads and allow_unused is False:
        raise ValueError('Expected allow_unused to be True or not passed when '
                         'materialize_grads=True, but got: allow_unused=False.')
    for i, x in enumerate(ins):
        if not isinstance(x, Tensor):
            raise RuntimeError('all inputs have to be Tensors or GradientEdges, but got '
                               f'{type(x).__name__}')
        if not x._rg:
            raise RuntimeError(f'One of the differentiated Tensors does not require grad '
                               f'(input {i}, shape {tuple(x._data.shape)})')
    for i, o in enumerate(outs):    # PyTorch checks the outputs before the inputs' use
        if isinstance(o, Tensor) and not o._rg:
            raise RuntimeError(f'element {i} of tensors does not require grad and does not '
                               'have a grad_fn')
    if not allow_unused and not materialize_grads:
        _check_reachable(outs, ins)
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _batched_grad(outs, ins, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    grads = _seeds(outs, grad_outputs, create_graph)
    if create_graph:
        from .._differentiable import backward_differentiable
        with enable_grad():             # create_graph records even under no_grad
            res = backward_differentiable(outs, _seq(grad_outputs), grads, retain_graph=True,
                                          inputs=ins)
    else:
        res = run(outs, grads, retain_graph, inputs=ins, accumulate=False)
        res = [None if g is None else _leaf(g) for g in res]
    out = []
    for i, g in enumerate(res):
        if g is None:
            if materialize_grads:   # PyTorch's zeros_like(input, requires_grad=create_graph)
                g = _leaf(np.zeros_like(ins[i]._data))
                g.requires_grad_(bool(create_graph))
            elif not allow_unused:
                raise _unused_error(i, ins[i])
        out.append(g)
    del single
    return tuple(out)


def _batched_grad(outs, ins, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``is_grads_batched``: each grad_output has a leading batch dimension; one
    backward per batch entry (PyTorch vmaps it), the results stacked along dim 0."""
    from .._shapes import stack
    gos = _seq(grad_outputs)
    if gos is None or len(gos) != len(outs) or not all(isinstance(g, Tensor) for g in gos):
        raise RuntimeError('grad: is_grads_batched=True needs one batched Tensor in '
                           'grad_outputs per output')
    sizes = set()
    for i, (o, g) in enumerate(zip(outs, gos)):
        gs = tuple(g._data.shape)
        if not gs or gs[1:] != tuple(o._data.shape):
            raise RuntimeError(f'If `is_grads_batched=True`, we interpret the first dimension '
                               f'of each grad_output as the batch dimension. The sizes of the '
                               f'remaining dimensions are expected to match the shape of '
                               f'corresponding output, but a mismatch was detected: '
                               f'grad_output[{i}] has a shape of {list(gs)} and output[{i}] '
                               f'has a shape of {list(o._data.shape)}.')
        sizes.add(gs[0])
    if len(sizes) != 1:
        raise RuntimeError('grad: the batched grad_outputs must share their batch size')
    nb = sizes.pop()
    per = []
    for b in range(nb):
        per.append(grad(outs, ins, [g[b] for g in gos],
                        retain_graph=retain_graph if b == nb - 1 else True,
                        create_graph=create_graph, allow_unused=True))
    out = []
    for i, x in enumerate(ins):
        col = [p[i] for p in per]
        if all(g is None for g in col):
            if materialize_grads or nb == 0:
                g = _leaf(np.zeros((nb,) + x._data.shape, x._data.dtype))
                out.append(g.requires_grad_(bool(create_graph and materialize_grads)))
            elif not allow_unused:
                raise _unused_error(i, x)
            else:
                out.append(None)
            continue
        col = [_leaf(np.zeros_like(x._data)) if g is None else g for g in col]
        out.append(stack(col, 0))
    return tuple(out)


def Variable(data, requires_grad=False, volatile=False):
    """The legacy wrapper: returns a Tensor (``Variable`` and ``Tensor`` merged in PyTorch 0.4).

    >>> import tape
    >>> from tape.autograd import Variable
    >>> Variable(tape.ones(2), requires_grad=True)
    tensor([1., 1.], requires_grad=True)
    """
    if volatile:
        warnings.warn('volatile was removed and now has no effect. Use `with tape.no_grad():` '
                      'instead.', UserWarning, stacklevel=2)
    if isinstance(data, Tensor):
        t = _leaf(data._data)
        t._vbox = data._vbox
    else:
        from .. import tensor
        t = tensor(data)
    if requires_grad:
        t.requires_grad_(True)
    return t
