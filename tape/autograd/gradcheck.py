"""``gradcheck`` and ``gradgradcheck``: compare autograd with finite differences.

Both build the full Jacobian, so they are meant for small inputs in float64,
as in PyTorch.  The analytical Jacobian comes from ``autograd.grad`` with one
unit vector per output element; the numerical one from central differences,
perturbing each input element in place.

>>> import tape
>>> x = tape.randn(3, dtype=tape.float64, requires_grad=True)
>>> tape.autograd.gradcheck(lambda x: (x * x).sum(), (x,))
True
"""
import warnings

import numpy as np

from .._tensor import Tensor, _leaf, _storage


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _outputs(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def _numerical(func, inputs, diff_idx, outputs, eps):
    jac = {}
    for i in diff_idx:
        x = inputs[i]
        d = _storage(x)
        for oi, o in enumerate(outputs):
            jac[(oi, i)] = np.zeros((o._data.size, d.size))
        # element by element in the logical (C) order the analytical Jacobian uses,
        # indexing d itself (a reshape of a non-contiguous input would be a copy)
        for j, at in enumerate(np.ndindex(d.shape)):
            orig = d[at].item()
            # writes go straight to storage (no version bump: nothing is saved across them)
            d[at] = orig + eps
            plus = [np.array(o._data, dtype=np.float64).ravel() for o in _outputs(func, inputs)]
            d[at] = orig - eps
            minus = [np.array(o._data, dtype=np.float64).ravel() for o in _outputs(func, inputs)]
            d[at] = orig
            for oi in range(len(outputs)):
                jac[(oi, i)][:, j] = (plus[oi] - minus[oi]) / (2 * eps)
    return jac


def _analytical(inputs, diff_idx, outputs):
    from . import grad
    jac = {}
    diff_inputs = [inputs[i] for i in diff_idx]
    for oi, o in enumerate(outputs):
        for i in diff_idx:
            jac[(oi, i)] = np.zeros((o._data.size, inputs[i]._data.size))
        if not o._rg:
            continue
        for r in range(o._data.size):
            seed = np.zeros(o._data.size)
            seed[r] = 1.0
            gs = grad(o, diff_inputs, grad_outputs=_leaf(seed.reshape(o._data.shape)),
                      retain_graph=True, allow_unused=True)
            for i, g in zip(diff_idx, gs):
                if g is not None:
                    jac[(oi, i)][r, :] = np.asarray(g._data, dtype=np.float64).ravel()
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check ``func``'s gradients against central differences; True if they agree.

    On a mismatch raises ``GradcheckError`` (a RuntimeError) naming the output,
    the input and the first element that differs, or returns False when
    ``raise_exception=False``.
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError('Expected at least one of check_forward_ad or check_backward_ad '
                             'to be True')
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._rg]
    if not diff_idx:
        raise ValueError('gradcheck expects at least one input tensor to require gradient, '
                         'but none of them have requires_grad=True.')
    for i in diff_idx:
        if inputs[i]._data.dtype != np.float64:
            warnings.warn(f'Input #{i} requires gradient and is not a double precision floating '
                          'point. This check will likely fail if all the inputs are not of '
                          'double precision floating point.', UserWarning, stacklevel=2)
    outputs = _outputs(func, inputs)
    analytical = _analytical(inputs, diff_idx, outputs)
    numerical = _numerical(func, inputs, diff_idx, outputs, eps)
    for (oi, i), num in numerical.items():
        ana = analytical[(oi, i)]
        bad = ~(np.abs(ana - num) <= atol + rtol * np.abs(num))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            # printed as PyTorch prints them: a row per input element, a column per
            # output element, in the input's dtype
            dt = inputs[i]._data.dtype
            msg = (f'Jacobian mismatch for output {oi} with respect to input {i},\n'
                   f'first differing element: d output[{r}] / d input[{c}]: numerical '
                   f'{float(num[r, c])!r}, analytical {float(ana[r, c])!r}\n'
                   f'numerical:{_leaf(num.T.astype(dt))}\n'
                   f'analytical:{_leaf(ana.T.astype(dt))}\n')
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of the gradient of ``func``.

    ``grad_outputs`` default to random tensors (which require grad, so the
    check covers the dependence on them too).
    """
    from . import grad
    inputs = _as_tuple(inputs)
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(_leaf(rng.standard_normal(o._data.shape)).requires_grad_()
                             for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._rg]

    def first_grad(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _outputs(func, ins)
        diff = [ins[i] for i in diff_idx]
        gs = grad(outs, diff, grad_outputs=list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grad, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
