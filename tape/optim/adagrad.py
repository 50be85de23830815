"""Adagrad, PyTorch's formulas (with learning-rate decay)."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor, _leaf
from .optimizer import Optimizer, _commit, _next_step, _scalar, _step_state, _writable

__all__ = ['Adagrad']


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``: ``s += g * g`` (``s`` starts at
    ``initial_accumulator_value``), then ``p -= clr * g / (sqrt(s) + eps)`` with
    ``clr = lr / (1 + (t - 1) * lr_decay)``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.9
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if not 0.0 <= lr_decay:
            raise ValueError(f'Invalid lr_decay value: {lr_decay}')
        if not 0.0 <= weight_decay:
            raise ValueError(f'Invalid weight_decay value: {weight_decay}')
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f'Invalid initial_accumulator_value value: '
                             f'{initial_accumulator_value}')
        if not 0.0 <= eps:
            raise ValueError(f'Invalid epsilon value: {eps}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # PyTorch creates Adagrad's state at construction (later groups: on first step)
        for group in self.param_groups:
            for p in group['params']:
                self._init_state(p, initial_accumulator_value)

    def _init_state(self, p, value):
        state = self.state[p]
        state['step'] = _step_state()
        d = np.asarray(p._data)
        state['sum'] = _leaf(np.full(d.shape, value, d.dtype))

    _group_defaults = {'foreach': None, 'maximize': False, 'differentiable': False,
                       'fused': None}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                lr_decay, eps, wd = group['lr_decay'], group['eps'], group['weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        # as PyTorch: the optimizer's default, not the group's option
                        self._init_state(p, self.defaults['initial_accumulator_value'])
                    step = _next_step(state)
                    if wd != 0:
                        g = g + wd * d
                    clr = lr / (1 + (step - 1) * lr_decay)
                    s = state['sum']._data
                    tmp = np.multiply(g, g, out=np.empty_like(d))   # (an array for a 0-d p too)
                    s += tmp
                    np.sqrt(s, out=tmp)
                    tmp += eps
                    np.divide(g, tmp, out=tmp)
                    tmp *= -clr
                    d += tmp
                    _commit(p, d)
        return loss
