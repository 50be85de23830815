"""ASGD (averaged stochastic gradient descent), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor
from ._scalar_state import _array0, _scalar_state, _set0
from .optimizer import Optimizer, _commit, _next_step, _scalar, _step_state, _writable, \
    _zeros_state

__all__ = ['ASGD']


class ASGD(Optimizer):
    """``torch.optim.ASGD``: ``p *= 1 - lambd * eta``, ``p -= eta * g``; the average
    ``ax`` follows ``p`` (``ax += mu * (p - ax)``, a copy while ``mu == 1``); then
    ``eta = lr / (1 + lambd * lr * t)**alpha`` and ``mu = 1 / max(1, t - t0)``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.ASGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 5)
    0.79999
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if not 0.0 <= weight_decay:
            raise ValueError(f'Invalid weight_decay value: {weight_decay}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
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
                lambd, alpha, t0 = group['lambd'], group['alpha'], group['t0']
                wd = group['weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['eta'] = _scalar_state(lr)
                        state['mu'] = _scalar_state(1.0)
                        state['ax'] = _zeros_state(d)
                    step = _next_step(state)
                    if wd != 0:
                        g = g + wd * d
                    eta = float(_array0(state['eta']))
                    d *= 1 - lambd * eta
                    tmp = np.multiply(g, -eta, out=np.empty_like(d))     # (0-d p: an array)
                    d += tmp
                    mu = _array0(state['mu'])
                    ax = state['ax']._data
                    if float(mu) != 1:
                        np.subtract(d, ax, out=tmp)
                        tmp *= mu
                        ax += tmp
                    else:
                        ax[...] = d
                    # as PyTorch: the new values pass through a default-dtype (float32)
                    # tensor before being copied into the state, whatever its dtype
                    _set0(state['eta'], np.float32(lr / ((1 + lambd * lr * step) ** alpha)))
                    _set0(state['mu'], np.float32(1 / max(1, step - t0)))
                    _commit(p, d)
        return loss
