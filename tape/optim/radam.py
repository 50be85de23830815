"""RAdam (rectified Adam), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .optimizer import (Optimizer, _check_adam_args, _commit, _lerp_, _next_step, _scalar, _step_state,
                        _writable, _zeros_state)

__all__ = ['RAdam']


class RAdam(Optimizer):
    """``torch.optim.RAdam``: Adam's moments; with ``rho_inf = 2 / (1 - beta2) - 1`` and
    ``rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)``, the step is
    ``p -= lr * m / (1 - beta1**t) * r_t * sqrt(1 - beta2**t) / (sqrt(v) + eps)``
    (``r_t`` the variance rectification) when ``rho_t > 5``, else
    ``p -= lr * m / (1 - beta1**t)``.  Weight decay adds ``weight_decay * p`` to
    ``g``, or with ``decoupled_weight_decay`` scales ``p`` by ``1 - lr * weight_decay``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.8
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_adam_args(lr, eps, betas, weight_decay)
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = {'foreach': None, 'maximize': False, 'differentiable': False,
                       'decoupled_weight_decay': False, 'capturable': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                beta1, beta2 = (_scalar(b) for b in group['betas'])
                eps, wd = group['eps'], group['weight_decay']
                decoupled = group['decoupled_weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['exp_avg'] = _zeros_state(d)
                        state['exp_avg_sq'] = _zeros_state(d)
                    step = _next_step(state)
                    if wd != 0:
                        if decoupled:
                            d *= 1 - lr * wd
                        else:
                            g = g + wd * d
                    m, v = state['exp_avg']._data, state['exp_avg_sq']._data
                    tmp = np.empty_like(d)
                    _lerp_(m, g, 1 - beta1, tmp)
                    v *= beta2
                    np.multiply(g, 1 - beta2, out=tmp)
                    tmp *= g
                    v += tmp
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    update = np.divide(m, bias_correction1)
                    rho_inf = 2 / (1 - beta2) - 1
                    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                    update *= lr
                    if rho_t > 5.0:
                        np.sqrt(v, out=tmp)
                        tmp += eps
                        np.divide(bias_correction2 ** 0.5, tmp, out=tmp)
                        update *= tmp
                        update *= ((rho_t - 4) * (rho_t - 2) * rho_inf
                                   / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    d -= update
                    _commit(p, d)
        return loss
