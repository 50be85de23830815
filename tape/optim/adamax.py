"""Adamax (Adam with the infinity norm), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .optimizer import (Optimizer, _check_adam_args, _commit, _lerp_, _next_step, _scalar, _step_state,
                        _writable, _zeros_state)

__all__ = ['Adamax']


class Adamax(Optimizer):
    """``torch.optim.Adamax``: ``m = lerp(m, g, 1 - beta1)``,
    ``u = max(beta2 * u, |g| + eps)``, then ``p -= lr / (1 - beta1**t) * m / u``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.9
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_adam_args(lr, eps, betas, weight_decay)
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    _group_defaults = {'foreach': None, 'maximize': False, 'differentiable': False,
                       'capturable': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                beta1, beta2 = (_scalar(b) for b in group['betas'])
                eps, wd = group['eps'], group['weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['exp_avg'] = _zeros_state(d)
                        state['exp_inf'] = _zeros_state(d)
                    step = _next_step(state)
                    if wd != 0:
                        g = g + wd * d
                    m, u = state['exp_avg']._data, state['exp_inf']._data
                    tmp = np.empty_like(d)
                    _lerp_(m, g, 1 - beta1, tmp)
                    u *= beta2
                    np.abs(g, out=tmp)
                    tmp += eps
                    np.maximum(u, tmp, out=u)
                    clr = lr / (1 - beta1 ** step)
                    np.multiply(m, -clr, out=tmp)
                    tmp /= u
                    d += tmp
                    _commit(p, d)
        return loss
