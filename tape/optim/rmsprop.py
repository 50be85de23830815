"""RMSprop, PyTorch's formulas (optionally centered, with momentum)."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor
from .optimizer import (Optimizer, _commit, _lerp_, _next_step, _scalar, _step_state,
                        _writable, _zeros_state)

__all__ = ['RMSprop']


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: ``v = alpha * v + (1 - alpha) * g * g``;
    ``avg = sqrt(v - gbar**2) + eps`` when ``centered`` (``gbar = lerp(gbar, g, 1 - alpha)``)
    else ``sqrt(v) + eps``; then ``b = momentum * b + g / avg``, ``p -= lr * b``
    with momentum, else ``p -= lr * g / avg``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if not 0.0 <= eps:
            raise ValueError(f'Invalid epsilon value: {eps}')
        if not 0.0 <= momentum:
            raise ValueError(f'Invalid momentum value: {momentum}')
        if not 0.0 <= weight_decay:
            raise ValueError(f'Invalid weight_decay value: {weight_decay}')
        if not 0.0 <= alpha:
            raise ValueError(f'Invalid alpha value: {alpha}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = {'momentum': 0, 'centered': False, 'foreach': None, 'maximize': False,
                       'differentiable': False, 'capturable': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                alpha, eps, wd = group['alpha'], group['eps'], group['weight_decay']
                momentum, centered = group['momentum'], group['centered']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['square_avg'] = _zeros_state(d)
                        if momentum > 0:
                            state['momentum_buffer'] = _zeros_state(d)
                        if centered:
                            state['grad_avg'] = _zeros_state(d)
                    _next_step(state)
                    if wd != 0:
                        g = g + wd * d
                    v = state['square_avg']._data
                    tmp = np.empty_like(d)
                    v *= alpha
                    np.multiply(g, g, out=tmp)
                    tmp *= 1 - alpha
                    v += tmp
                    avg = np.empty_like(d)
                    if centered:
                        gbar = state['grad_avg']._data
                        _lerp_(gbar, g, 1 - alpha, tmp)
                        np.multiply(gbar, gbar, out=tmp)
                        np.subtract(v, tmp, out=avg)
                        np.sqrt(avg, out=avg)
                    else:
                        np.sqrt(v, out=avg)
                    avg += eps
                    np.divide(g, avg, out=tmp)
                    if momentum > 0:
                        b = state['momentum_buffer']._data
                        b *= momentum
                        b += tmp
                        np.multiply(b, lr, out=tmp)
                        d -= tmp
                    else:
                        tmp *= -lr
                        d += tmp
                    _commit(p, d)
        return loss
