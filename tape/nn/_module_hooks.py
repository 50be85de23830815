"""Module backward hooks: ``register_full_backward_hook``,
``register_full_backward_pre_hook`` and the deprecated ``register_backward_hook``,
as ``torch.utils.hooks.BackwardHook`` implements them.

A module with backward hooks passes its tensor arguments through an identity
custom Function (``BackwardHookFunction``) before ``forward`` and its tensor
results through another after it.  The output side's backward sees the
gradients of the module's outputs (``grad_output``; None for an output that got
none) and runs the pre-hooks; the input side's backward sees the gradients of
the module's inputs (``grad_input``) and runs the hooks, whose result replaces
them.  Both are ordinary Python records on the tape, so the hooks run in the
compiled sweep, in ``autograd.grad``, with ``retain_graph`` (once per backward)
and with ``create_graph`` (the gradients they see are then graph tensors).

A tensor the Function returns is a new tensor object over the input's storage
and version counter (PyTorch returns a view).  PyTorch refuses an in-place
change of such a view at the op; here the change is noticed by the version
counter, for an input when ``forward`` returns and for an output when the
backward reaches it, and raises PyTorch's RuntimeError then.
"""
import functools
import os
import sys
import warnings
import weakref
from collections import OrderedDict

from .._tape import grad_mode
from .._tensor import Tensor
from ..autograd.function import Function, _alias

# global hooks (``register_module_*``), run before every module's own.  Each
# handle's id is also put in ``_global_any``, so ``Module.__call__`` tests one
# dict to know that none is registered
_global_any = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_is_full_backward_hook = [None]
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()

_VIEW_INPLACE = ('Output {} of BackwardHookFunction is a view and is being modified inplace. '
                 'This view was created inside a custom Function (or because an input was '
                 'returned as-is) and the autograd logic to handle view+inplace would override '
                 'the custom backward associated with the custom Function, leading to '
                 'incorrect gradients. This behavior is forbidden. You can fix this by cloning '
                 'the output of the custom Function.')

# the (BackwardHook, side) that the next BackwardHookFunction.forward takes
_pending = [None]


class BackwardHookFunction(Function):
    """Identity on its tensor arguments; its backward hands the gradients to a
    ``BackwardHook`` (the input or output side), whose result it returns."""

    @staticmethod
    def forward(ctx, *args):
        hook, side = _pending[0]
        _pending[0] = None
        ctx.bw_hook = hook
        ctx.side = side
        outs = tuple(_alias(a) for a in args)
        ctx.mark_non_differentiable(*[o for o, a in zip(outs, args) if not a.requires_grad])
        if side == 'out':
            ctx.set_materialize_grads(False)     # grad_output: None where none came
        ctx.versions = [(o._vbox, o._vbox[0]) for o in outs]
        return outs

    @staticmethod
    def backward(ctx, *grads):
        if ctx.side == 'out':
            for i, (box, v) in enumerate(ctx.versions):
                if box[0] != v:
                    raise RuntimeError(_VIEW_INPLACE.format(i))
            return ctx.bw_hook._output_grads(grads)
        return ctx.bw_hook._input_grads(grads)


_TAPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_stacklevel():
    """The ``stacklevel`` that points a warning given by our caller at the first
    frame outside tape (the user's ``backward()`` call, as PyTorch's does)."""
    f = sys._getframe(2)
    level = 2
    while f is not None and f.f_code.co_filename.startswith(_TAPE_DIR):
        f = f.f_back
        level += 1
    return level


def _pack_with_none(indices, values, size):
    res = [None] * size
    for idx, val in zip(indices, values):
        res[idx] = val
    return tuple(res)


def _unpack_none(indices, values):
    return tuple(values[idx] for idx in indices)


class BackwardHook:
    """The backward hooks of one module call (``torch.utils.hooks.BackwardHook``).

    It wraps the call's tensor arguments (``setup_input_hook``) and results
    (``setup_output_hook``) in ``BackwardHookFunction``; non-tensor arguments
    and results are None in what the hooks see."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.module = module
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None
        self._input_versions = ()

    # -- backward side ----------------------------------------------------------
    def _input_grads(self, grad_input):
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the
            # outputs (double backward, say): the hooks do not run
            return grad_input
        res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if len(out) != len(res):
                raise RuntimeError('Backward hook returned an invalid number of grad_input, '
                                   f'got {len(out)}, but expected {len(res)}')
            res = out
        self.grad_outputs = None
        return _unpack_none(self.input_tensors_index, res)

    def _output_grads(self, grad_output):
        self.grad_outputs = _pack_with_none(self.output_tensors_index, grad_output,
                                            self.n_outputs)
        if self.user_pre_hooks:
            expected_len = len(self.grad_outputs)
            for user_pre_hook in self.user_pre_hooks:
                hook_grad_outputs = user_pre_hook(self.module, self.grad_outputs)
                if hook_grad_outputs is None:
                    continue
                actual_len = len(hook_grad_outputs)
                if actual_len != expected_len:
                    raise RuntimeError('Backward pre hook returned an invalid number of '
                                       f'grad_output, got {actual_len}, but expected '
                                       f'{expected_len}')
                self.grad_outputs = hook_grad_outputs
        local_grad_outputs = self.grad_outputs
        if self.input_tensors_index is None:
            # no input requires grad: the hooks run now, with grad_input all None
            warnings.warn('Full backward hook is firing when gradients are computed with '
                          'respect to module outputs since no inputs require gradients. See '
                          'https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html'
                          '#torch.nn.Module.register_full_backward_hook for more details.',
                          stacklevel=_user_stacklevel())
            grad_inputs = _pack_with_none([], [], self.n_inputs)
            for user_hook in self.user_hooks:
                res = user_hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple)
                                            and all(el is None for el in res)):
                    raise RuntimeError('Backward hook for Modules where no input requires '
                                       'gradient should always return None or None for all '
                                       'gradients.')
            self.grad_outputs = None
        return tuple(local_grad_outputs[i] for i in self.output_tensors_index)

    # -- forward side -------------------------------------------------------------
    def _apply_on_tensors(self, side, args):
        tensors_idx = []
        tensors = []
        requires_grad = False
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensors_idx.append(i)
                tensors.append(arg)
                requires_grad |= arg.requires_grad
        if not (requires_grad and grad_mode.enabled):
            return args, None
        _pending[0] = (self, side)
        try:
            new_tensors = BackwardHookFunction.apply(*tensors)
        finally:
            _pending[0] = None
        if len(new_tensors) == 0:
            raise RuntimeError('Cannot set Module backward hook for a Module with no input '
                               'Tensors.')
        if side == 'in':
            self._input_versions = [(t._vbox, t._vbox[0]) for t in new_tensors]
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors):
            arg_list[idx] = val
        out = tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)
        return out, tensors_idx

    def setup_input_hook(self, args):
        res, input_idx = self._apply_on_tensors('in', args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return res

    def check_inputs(self):
        """After ``forward``: an input it changed in place raises, as PyTorch's
        view+inplace check does."""
        for i, (box, v) in enumerate(self._input_versions):
            if box[0] != v:
                raise RuntimeError(_VIEW_INPLACE.format(i))

    def setup_output_hook(self, args):
        is_tuple = True
        if not isinstance(args, tuple):
            args = (args,)
            is_tuple = False
        res, output_idx = self._apply_on_tensors('out', args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        if not is_tuple:
            res = res[0]
        return res


class _WrappedHook:
    """A deprecated (non-full) backward hook on a node: ``hook(module, *args)``,
    the module held weakly."""

    def __init__(self, hook, module=None):
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = False
        if module is not None:
            self.module = weakref.ref(module)
            self.with_module = True

    def __call__(self, *args, **kwargs):
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError('You are trying to call the hook of a dead Module!')
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)


def maybe_warn_non_full_backward_hook(inputs, result, grad_fn):
    """PyTorch's FutureWarnings for a non-full backward hook on a module whose
    hook would miss some gradients."""
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            warnings.warn('Using non-full backward hooks on a Module that does not return a '
                          'single Tensor or a tuple of Tensors is deprecated and will be removed '
                          'in future versions. This hook will be missing some of the '
                          'grad_output. Please use register_full_backward_hook to get the '
                          'documented behavior.', FutureWarning, stacklevel=4)
            return
    else:
        result = (result,)
    if not isinstance(inputs, Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            warnings.warn('Using non-full backward hooks on a Module that does not take as input '
                          'a single Tensor or a tuple of Tensors is deprecated and will be '
                          'removed in future versions. This hook will be missing some of the '
                          'grad_input. Please use register_full_backward_hook to get the '
                          'documented behavior.', FutureWarning, stacklevel=4)
            return
    else:
        inputs = (inputs,)
    out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
    if len(out_grad_fn) == 0 or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
        warnings.warn('Using a non-full backward hook when outputs are nested in python data '
                      'structure is deprecated and will be removed in future versions. This hook '
                      'will be missing some grad_output.', FutureWarning, stacklevel=4)
    elif len(out_grad_fn) > 1:
        warnings.warn('Using a non-full backward hook when outputs are generated by different '
                      'autograd Nodes is deprecated and will be removed in future versions. This '
                      'hook will be missing some grad_output. Please use '
                      'register_full_backward_hook to get the documented behavior.',
                      FutureWarning, stacklevel=4)
    else:
        inputs_grad_fn = {i.grad_fn for i in inputs if i.grad_fn is not None}
        next_functions = {n[0] for n in grad_fn.next_functions}
        if inputs_grad_fn != next_functions:
            warnings.warn('Using a non-full backward hook when the forward contains multiple '
                          'autograd Nodes is deprecated and will be removed in future versions. '
                          'This hook will be missing some grad_input. Please use '
                          'register_full_backward_hook to get the documented behavior.',
                          FutureWarning, stacklevel=4)
