"""Adadelta, PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor
from .optimizer import (Optimizer, _commit, _next_step, _scalar, _step_state, _writable,
                        _zeros_state)

__all__ = ['Adadelta']


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``: ``v = rho * v + (1 - rho) * g * g``,
    ``delta = sqrt(u + eps) / sqrt(v + eps) * g``, ``u = rho * u + (1 - rho) * delta**2``,
    ``p -= lr * delta``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.Adadelta([w], lr=1.0)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 5)
    0.99684
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f'Invalid rho value: {rho}')
        if not 0.0 <= eps:
            raise ValueError(f'Invalid epsilon value: {eps}')
        if not 0.0 <= weight_decay:
            raise ValueError(f'Invalid weight_decay value: {weight_decay}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = {'foreach': None, 'maximize': False, 'differentiable': False,
                       'capturable': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                rho, eps, wd = group['rho'], group['eps'], group['weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['square_avg'] = _zeros_state(d)
                        state['acc_delta'] = _zeros_state(d)
                    _next_step(state)
                    if wd != 0:
                        g = g + wd * d
                    v, u = state['square_avg']._data, state['acc_delta']._data
                    tmp = np.empty_like(d)
                    v *= rho
                    np.multiply(g, 1 - rho, out=tmp)
                    tmp *= g
                    v += tmp
                    std = np.add(v, eps, out=np.empty_like(v))     # (0-d p: arrays)
                    np.sqrt(std, out=std)
                    delta = np.add(u, eps, out=np.empty_like(u))
                    np.sqrt(delta, out=delta)
                    delta /= std
                    delta *= g
                    u *= rho
                    np.multiply(delta, 1 - rho, out=tmp)
                    tmp *= delta
                    u += tmp
                    delta *= -lr
                    d += delta
                    _commit(p, d)
        return loss
