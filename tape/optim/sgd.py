"""Stochastic gradient descent, with PyTorch's momentum, dampening, Nesterov
and weight-decay rules."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor, _leaf
from .optimizer import Optimizer, _commit, _fused_kernels, _scalar, _writable

__all__ = ['SGD']


class SGD(Optimizer):
    """``torch.optim.SGD``: ``b = momentum * b + (1 - dampening) * g`` (``b = g`` on
    the first step), ``g = g + momentum * b`` with Nesterov else ``g = b``, then
    ``p -= lr * g``; ``g`` includes ``weight_decay * p``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     (w * w).sum().backward()
    ...     opt.step()
    >>> round(w.item(), 4)
    0.46
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if lr < 0.0:
            raise ValueError(f'Invalid learning rate: {lr}')
        if momentum < 0.0:
            raise ValueError(f'Invalid momentum value: {momentum}')
        if weight_decay < 0.0:
            raise ValueError(f'Invalid weight_decay value: {weight_decay}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError('Nesterov momentum requires a momentum and zero dampening')
        super().__init__(params, defaults)

    _group_defaults = {'nesterov': False, 'maximize': False, 'foreach': None,
                       'differentiable': False, 'fused': False}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                wd, momentum = group['weight_decay'], group['momentum']
                dampening, nesterov = group['dampening'], group['nesterov']
                scalars = {}
                for p, g in self._grads(group):
                    d = _writable(p)
                    if wd != 0:
                        g = g + wd * d              # a new array: .grad stays untouched
                    if momentum != 0:
                        state = self.state[p]
                        buf = state.get('momentum_buffer')
                        if buf is None:
                            buf = state['momentum_buffer'] = _leaf(np.array(g))
                            b = buf._data
                        else:
                            b = buf._data
                            kern = _fused_kernels(d, g, b)
                            if kern is not None:
                                # the steps below and the update in one pass
                                # (compiler/optim_kernels.py), the scalars
                                # rounded to d's dtype as NumPy rounds them
                                key = d.dtype
                                sc = scalars.get(key)
                                if sc is None:
                                    sc = scalars[key] = np.array(
                                        [momentum, 1 - dampening, lr], d.dtype)
                                kern.sgd_momentum_update(d.reshape(-1), g.reshape(-1),
                                                         b.reshape(-1), sc, nesterov)
                                _commit(p, d)
                                continue
                            b *= momentum
                            b += (1 - dampening) * g
                        g = g + momentum * b if nesterov else b
                    kern = _fused_kernels(d, g)
                    if kern is not None:
                        kern.sgd_update(d.reshape(-1), g.reshape(-1), d.dtype.type(lr))
                    else:
                        d -= lr * g
                    _commit(p, d)
        return loss
