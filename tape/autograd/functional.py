"""``tape.autograd.functional``: Jacobians, Hessians and vector products of functions.

As in ``torch.autograd.functional``: each takes a function of tensors and the
point to evaluate at, and builds what it returns from reverse-mode sweeps.
With ``create_graph=True`` the results are differentiable, and connected to
the graph of any input that requires grad (the function runs on views of such
inputs, as in PyTorch); ``strict=True`` raises PyTorch's errors when an output
is independent of an input.

>>> import tape
>>> from tape.autograd.functional import jacobian, hessian
>>> jacobian(lambda x: x ** 2, tape.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
>>> hessian(lambda x: (x ** 3).sum(), tape.tensor([1.0, 2.0]))
tensor([[ 6.,  0.],
        [ 0., 12.]])
"""
import numpy as np

from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .._tensor import Tensor, _leaf

__all__ = ['vjp', 'jvp', 'jacobian', 'hessian', 'hvp', 'vhp']


def _as_tuple(inp, arg_name, fn_name):
    """``(is_tuple, tuple_of_tensors)``, with PyTorch's TypeError for anything else
    (a list is taken as a tuple)."""
    is_tuple = isinstance(inp, (tuple, list))
    inp = tuple(inp) if is_tuple else (inp,)
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f'The {arg_name} given to {fn_name} must be either a Tensor or a '
                                f'tuple of Tensors but the value at index {i} has type '
                                f'{type(el)}.')
            raise TypeError(f'The {arg_name} given to {fn_name} must be either a Tensor or a '
                            f'tuple of Tensors but the given {arg_name} has type {type(el)}.')
    return is_tuple, inp


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    """What ``func`` runs on: with create_graph, a view of an input that requires
    grad (so the results stay connected to its graph); else a detached copy."""
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f'v is a tuple of invalid length: should be {len(other)} but got '
                               f'{len(v)}.')
        raise RuntimeError('The given v should contain a single Tensor.')
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f'Entry {idx} in ' if is_other_tuple else ''
            raise RuntimeError(f'{prepend}v has invalid size: should be {el_other.size()} but '
                               f'got {el_v.size()}.')


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f'The output of the user-provided function is independent of '
                               f'input {i}. This is not allowed in strict mode.')
        if not inp.requires_grad:
            if input_type == 'hessian':
                raise RuntimeError(
                    f'The hessian of the user-provided function with respect to input {i}'
                    ' is independent of the input. This is not allowed in strict mode.'
                    ' You should ensure that your function is thrice differentiable and that'
                    ' the hessian depends on the inputs.')
            if input_type == 'jacobian':
                raise RuntimeError(
                    'While computing the hessian, found that the jacobian of the user-provided'
                    f' function with respect to input {i} is independent of the input. This is '
                    'not allowed in strict mode. You should ensure that your function is twice'
                    ' differentiable and that the jacobian depends on the inputs (this would be'
                    ' violated by a linear function for example).')
            if input_type == 'grad_inputs':
                raise RuntimeError(
                    f'The gradient with respect to input {i} is independent of the inputs of the'
                    ' user-provided function. This is not allowed in strict mode.')
            raise RuntimeError(
                f'Output {i} of the user-provided function does not require gradients.'
                ' The outputs must be computed in a differentiable manner from the input'
                ' when running in strict mode.')


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """``autograd.grad`` over the outputs that require grad (None per input when
    none does), unused inputs giving None."""
    from . import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = [], []
    for out, g in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(g)
    if not new_outputs:
        return (None,) * len(inputs)
    if all(g is None for g in new_grad_outputs):
        new_grad_outputs = None
    return grad(new_outputs, inputs, new_grad_outputs, allow_unused=True,
                create_graph=create_graph, retain_graph=retain_graph)


_STRICT_MSG = {
    'back': 'The output of the user-provided function is independent of input {i}. This is '
            'not allowed in strict mode.',
    'back_trick': 'The gradient with respect to the input is independent of entry {i} in the '
                  'grad_outputs when using the double backward trick to compute forward mode '
                  'gradients. This is not allowed in strict mode.',
    'double_back': 'The jacobian of the user-provided function is independent of input {i}. '
                   'This is not allowed in strict mode.',
    'double_back_trick': 'The hessian of the user-provided function is independent of entry '
                         '{i} in the grad_jacobian. This is not allowed in strict mode as it '
                         'prevents from using the double backward trick to replace forward '
                         'mode AD.',
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    from .. import zeros_like
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_STRICT_MSG[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = 'hessian' if 'double' in stage else 'jacobian'
            raise RuntimeError(f'The {what} of the user-provided function is independent of '
                               f'input {i}. This is not allowed in strict mode when '
                               'create_graph=True.')
        res.append(g)
    return tuple(res)


def _single_output(outputs, is_tuple, name):
    if is_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f'The function given to {name} should return a single Tensor')
    if outputs[0].nelement() != 1:
        raise RuntimeError(f'The Tensor returned by the function given to {name} should '
                           'contain a single element')


def _prepare_v(v, others, is_others_tuple, create_graph, name, none_msg):
    if v is not None:
        _, v = _as_tuple(v, 'v', name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, others, is_others_tuple)
        return v
    if len(others) != 1 or others[0].nelement() != 1:
        raise RuntimeError(none_msg)
    return None


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, 'inputs', 'vjp')
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, 'outputs of the user-provided function',
                                              'vjp')
        _check_requires_grad(outputs, 'outputs', strict=strict)
        v = _prepare_v(v, outputs, is_outputs_tuple, create_graph, 'vjp',
                       'The vector v can only be None if the user-provided function returns a '
                       'single Tensor with a single element.')
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, 'back')
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick: J v is the gradient, with
    respect to a dummy cotangent u, of (J^T u) . v (reverse mode twice, no
    forward-mode AD needed)."""
    from .. import zeros_like
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, 'inputs', 'jvp')
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, 'jvp',
                       'The vector v can only be None if the input to the user-provided '
                       'function is a single Tensor with a single element.')
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, 'outputs of the user-provided function',
                                              'jvp')
        _check_requires_grad(outputs, 'outputs', strict=strict)
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, 'grad_inputs', strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, outputs, strict, create_graph, 'back_trick')
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_outputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy='reverse-mode'):
    """The Jacobian of ``func`` at ``inputs``: shape ``out.shape + in.shape`` (a
    tuple of those for several inputs or outputs), one reverse sweep per output
    element.  ``vectorize`` and ``strategy='forward-mode'`` give the same values
    (computed the same way)."""
    from .. import stack, zeros_like
    if strategy not in ('forward-mode', 'reverse-mode'):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    if strategy == 'forward-mode':
        if create_graph:
            raise NotImplementedError(
                'torch.autograd.functional.jacobian: `create_graph=True` and '
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError(
                'torch.autograd.functional.jacobian: `strict=True` and '
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError(
                'Computing Jacobian using forward-AD or forward-over-reverse Hessian is'
                'only implemented for `vectorize=True`.')
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, 'inputs', 'jacobian')
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, 'outputs of the user-provided function',
                                              'jacobian')
        _check_requires_grad(outputs, 'outputs', strict=strict)
        if vectorize and strict:
            # (after running func, as PyTorch: its strict errors come first)
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and '
                               '`vectorized=True` are not supported together. Please either '
                               'set `strict=False` or `vectorize=False`.')
        jac = []
        for i, out in enumerate(outputs):
            jac_i = tuple([] for _ in inputs)
            odata = out._data
            for j in range(odata.size):
                if out.requires_grad:
                    # row j: the sweep seeded with the j-th unit vector (what
                    # PyTorch gets from out.reshape(-1)[j], without the indexing op)
                    seed = np.zeros(odata.size, dtype=odata.dtype if odata.dtype.kind == 'f'
                                    else np.float64)
                    seed[j] = 1
                    vj = _autograd_grad((out,), inputs, (_leaf(seed.reshape(odata.shape)),),
                                        retain_graph=True, create_graph=create_graph)
                else:
                    vj = (None,) * len(inputs)
                for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                    if vj_el is not None:
                        if strict and create_graph and not vj_el.requires_grad:
                            raise RuntimeError(
                                'The jacobian of the user-provided function is independent of '
                                f'input {i}. This is not allowed in strict mode when '
                                'create_graph=True.')
                        jac_i_el.append(vj_el)
                    else:
                        if strict:
                            raise RuntimeError(
                                f'Output {i} of the user-provided function is independent of '
                                f'input {el_idx}. This is not allowed in strict mode.')
                        jac_i_el.append(zeros_like(inp_el))
            per_in = []
            for el_idx, rows in enumerate(jac_i):
                shape = tuple(odata.shape) + tuple(inputs[el_idx]._data.shape)
                # forward mode's Jacobian holds tangents: the output's dtype, as in PyTorch
                dt = odata.dtype if strategy == 'forward-mode' else inputs[el_idx]._data.dtype
                if not rows:                          # an output with no element
                    per_in.append(_leaf(np.zeros(shape, dtype=dt)))
                elif any(r.requires_grad for r in rows):
                    j = stack(rows, dim=0).reshape(shape)
                    per_in.append(j if j.dtype == dt else j.to(dt))
                else:
                    per_in.append(_leaf(np.stack([r._data for r in rows]).reshape(shape)
                                        .astype(dt, copy=False)))
            jac.append(tuple(per_in))
        jac = _grad_postprocess(tuple(jac), create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy='reverse-mode'):
    """The Hessian of scalar ``func`` at ``inputs`` (the Jacobian of its gradient)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, 'inputs', 'hessian')
    if outer_jacobian_strategy not in ('forward-mode', 'reverse-mode'):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, 'outputs of the user-provided function', 'hessian')
        _check_requires_grad(t_out, 'outputs', strict=strict)
        _single_output(t_out, is_out_tuple, 'hessian')
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == 'forward-mode':
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, 'jacobian', strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_and_gradient(func, inputs, v, create_graph, strict, name):
    """The common start of ``vhp`` and ``hvp`` (inside ``enable_grad``): the
    prepared inputs and ``v``, the function's single output, and its gradient
    with a graph."""
    is_inputs_tuple, inputs = _as_tuple(inputs, 'inputs', name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, name,
                   'The vector v can only be None if the input to the user-provided '
                   'function is a single Tensor with a single element.')
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, 'outputs of the user-provided function',
                                          name)
    _check_requires_grad(outputs, 'outputs', strict=strict)
    _single_output(outputs, is_outputs_tuple, name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, 'jacobian', strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def _second_order_result(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph):
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` by double backward, without forming H."""
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, 'vhp')
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, 'double_back')
    return _second_order_result(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` by the double-backward trick, without forming H."""
    from .. import zeros_like
    with enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, 'hvp')
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, 'hessian', strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, 'double_back_trick')
    return _second_order_result(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)
