"""Rprop (resilient backpropagation), PyTorch's formulas."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor, _leaf
from .optimizer import Optimizer, _commit, _next_step, _scalar, _step_state, _writable, \
    _zeros_state

__all__ = ['Rprop']


class Rprop(Optimizer):
    """``torch.optim.Rprop``: each element's step size is multiplied by ``etaplus``
    where the gradient kept its sign, by ``etaminus`` where it flipped (and that
    gradient is then treated as 0), clamped to ``step_sizes``; then
    ``p -= sign(g) * step_size``.

    >>> import tape
    >>> w = tape.tensor([1.0], requires_grad=True)
    >>> opt = tape.optim.Rprop([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 6)
    0.9
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Invalid learning rate: {lr}')
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f'Invalid eta values: {etas[0]}, {etas[1]}')
        if differentiable:
            raise NotImplementedError('tape.optim: differentiable=True (a step recorded on the '
                                      'graph) is not supported')
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
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
                etaminus, etaplus = group['etas']
                step_size_min, step_size_max = group['step_sizes']
                for p, g in self._grads(group):
                    d = _writable(p)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        state['prev'] = _zeros_state(d)
                        state['step_size'] = _leaf(np.full(np.shape(g), lr, g.dtype))
                    _next_step(state)
                    prev, step_size = state['prev']._data, state['step_size']._data
                    sign = np.asarray(np.sign(np.multiply(g, prev)))     # (0-d p: an array)
                    sign[sign > 0] = etaplus
                    sign[sign < 0] = etaminus
                    sign[sign == 0] = 1
                    step_size *= sign
                    np.clip(step_size, step_size_min, step_size_max, out=step_size)
                    g = np.array(g)
                    g[sign == etaminus] = 0
                    upd = np.sign(g)
                    upd *= step_size
                    d -= upd
                    prev[...] = g
                    _commit(p, d)
        return loss
