"""NAdam (Adam with Nesterov momentum and momentum decay), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from ._scalar_state import _array0, _scalar_state
from .optimizer import (Optimizer, _check_adam_args, _commit, _lerp_, _next_step, _scalar, _step_state,
                        _writable, _zeros_state)

__all__ = ['NAdam']


class NAdam(Optimizer):
    """``torch.optim.NAdam``: with ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``
    and ``mu_product`` their running product, ``m = lerp(m, g, 1 - beta1)``,
    ``v = beta2 * v + (1 - beta2) * g * g``, ``denom = sqrt(v / (1 - beta2**t)) + eps``,
    ``p -= lr * (1 - mu_t) / (1 - mu_product) * g / denom
    + lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom``.  Weight decay adds
    ``weight_decay * p`` to ``g``, or with ``decoupled_weight_decay`` scales ``p``
    by ``1 - lr * weight_decay`` first.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.8944
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_adam_args(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f'Invalid momentum_decay value: {momentum_decay}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = {'maximize': False, 'foreach': None, 'capturable': False,
                       'differentiable': False, 'decoupled_weight_decay': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                beta1, beta2 = (_scalar(b) for b in group['betas'])
                eps, wd = group['eps'], group['weight_decay']
                momentum_decay = group['momentum_decay']
                decoupled = group['decoupled_weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['mu_product'] = _scalar_state(1.0)
                        state['exp_avg'] = _zeros_state(d)
                        state['exp_avg_sq'] = _zeros_state(d)
                    step = _next_step(state)
                    bias_correction2 = 1 - beta2 ** step
                    if wd != 0:
                        if decoupled:
                            d *= 1 - lr * wd
                        else:
                            g = g + wd * d
                    mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                    mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                    mu_product = _array0(state['mu_product'])
                    mu_product *= mu
                    mu_product = float(mu_product)
                    mu_product_next = mu_product * mu_next
                    m, v = state['exp_avg']._data, state['exp_avg_sq']._data
                    tmp = np.empty_like(d)
                    _lerp_(m, g, 1 - beta1, tmp)
                    v *= beta2
                    np.multiply(g, 1 - beta2, out=tmp)
                    tmp *= g
                    v += tmp
                    denom = np.divide(v, bias_correction2, out=np.empty_like(v))   # (0-d p: an array)
                    np.sqrt(denom, out=denom)
                    denom += eps
                    np.multiply(g, -lr * (1.0 - mu) / (1.0 - mu_product), out=tmp)
                    tmp /= denom
                    d += tmp
                    np.multiply(m, (-lr * mu_next) / (1.0 - mu_product_next), out=tmp)
                    tmp /= denom
                    d += tmp
                    _commit(p, d)
        return loss
