"""Adam and AdamW (Adam with decoupled weight decay), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor
from .optimizer import (Optimizer, _check_adam_args, _commit, _fused_kernels, _lerp_,
                        _next_step, _scalar, _step_state, _writable, _zeros_state)

__all__ = ['Adam', 'AdamW']


class Adam(Optimizer):
    """``torch.optim.Adam``: ``m = lerp(m, g, 1 - beta1)``,
    ``v = beta2 * v + (1 - beta2) * g * g``, then
    ``p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)``;
    ``amsgrad`` uses the running maximum of ``v``.  Weight decay adds
    ``weight_decay * p`` to ``g``, or with ``decoupled_weight_decay`` (AdamW)
    scales ``p`` by ``1 - lr * weight_decay`` first.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.9
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam_args(lr, eps, betas, weight_decay)
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError('betas must be either both floats or both Tensors')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        betas = tuple(_scalar(b) for b in betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    _group_defaults = {'amsgrad': False, 'maximize': False, 'foreach': None,
                       'capturable': False, 'differentiable': False,
                       'decoupled_weight_decay': False, 'fused': None}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                beta1, beta2 = group['betas']
                eps, wd, amsgrad = group['eps'], group['weight_decay'], group['amsgrad']
                decoupled = group['decoupled_weight_decay']
                scalars = {}
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['exp_avg'] = _zeros_state(d)
                        state['exp_avg_sq'] = _zeros_state(d)
                        if amsgrad:
                            state['max_exp_avg_sq'] = _zeros_state(d)
                    step = _next_step(state)
                    if wd != 0:
                        if decoupled:
                            d *= 1 - lr * wd
                        else:
                            g = g + wd * d
                    m, v = state['exp_avg']._data, state['exp_avg_sq']._data
                    kern = None if amsgrad else _fused_kernels(d, g, m, v)
                    if kern is not None:
                        # the steps below in one pass (compiler/optim_kernels.py),
                        # the scalars in d's dtype as NumPy rounds them (one
                        # array of them per step count and dtype)
                        w = 1 - beta1
                        low = abs(w) < 0.5
                        key = (step, d.dtype)
                        sc = scalars.get(key)
                        if sc is None:
                            sc = scalars[key] = np.array(
                                [w if low else 1 - w, beta2, 1 - beta2,
                                 (1 - beta2 ** step) ** 0.5, eps, -(lr / (1 - beta1 ** step))],
                                d.dtype)
                        kern.adam_update(d.reshape(-1), g.reshape(-1), m.reshape(-1),
                                         v.reshape(-1), sc, low)
                        _commit(p, d)
                        continue
                    tmp = np.empty_like(d)
                    _lerp_(m, g, 1 - beta1, tmp)
                    v *= beta2
                    np.multiply(g, g, out=tmp)
                    tmp *= 1 - beta2
                    v += tmp
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    step_size = lr / bias_correction1
                    if amsgrad:
                        vmax = state['max_exp_avg_sq']._data
                        np.maximum(vmax, v, out=vmax)
                        v = vmax
                    np.sqrt(v, out=tmp)                      # the denominator
                    tmp /= bias_correction2 ** 0.5
                    tmp += eps
                    np.divide(m, tmp, out=tmp)
                    tmp *= -step_size
                    d += tmp
                    _commit(p, d)
        return loss


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam whose weight decay scales the parameter by
    ``1 - lr * weight_decay`` before the update instead of entering the gradient.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.85
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group['decoupled_weight_decay'] = True      # as PyTorch: AdamW is always decoupled
