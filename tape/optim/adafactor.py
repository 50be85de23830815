"""Adafactor (Shazeer & Stern, 2018), PyTorch's variant and formulas."""
import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor, _leaf
from .optimizer import (Optimizer, _commit, _lerp_, _next_step, _scalar, _step_state,
                        _writable, _zeros_state)

__all__ = ['Adafactor']


class Adafactor(Optimizer):
    """``torch.optim.Adafactor``: the second moment of a matrix gradient kept
    factored, as a row mean (shape ``[..., R, 1]``) and a column mean
    (``[..., 1, C]``) of ``g**2``; a vector's kept whole.  With
    ``beta2_t = 1 - t**beta2_decay``, each step

        row_var = lerp(row_var, mean(g**2, -1), 1 - beta2_t)  (likewise col_var)
        v = row_var @ col_var / max(mean(row_var, -2), eps1)   (vector: lerp of g**2)
        u = g / sqrt(max(v, eps1**2))
        p -= max(eps2, rms(p)) * min(lr, 1/sqrt(t)) / max(1, rms(u) / d) * u

    after decoupled weight decay ``p *= 1 - lr * weight_decay``.  ``eps1=None``
    is the parameter dtype's machine epsilon.

    >>> import tape
    >>> w = tape.tensor([3.0, 4.0], requires_grad=True)
    >>> opt = tape.optim.Adafactor([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> [round(x, 4) for x in w.tolist()]
    [2.6464, 3.6464]
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError('Tensor lr must be 1-element')
        if not 0.0 <= lr:
            raise ValueError(f'Learning rate should be >= 0 but is: {lr}')
        if not 0.0 >= beta2_decay:
            raise ValueError(f'beta2_decay should be <= 0 but is: {beta2_decay}')
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f'epsilon1 should be >= 0 but is: {eps[0]}')
        if not 0.0 <= eps[1]:
            raise ValueError(f'epsilon2 should be >= 0 but is: {eps[1]}')
        if not 1.0 <= d:
            raise ValueError(f'Clipping threshold d should be >= 1 but is: {d}')
        if not 0.0 <= weight_decay:
            raise ValueError(f'weight_decay should be >= 0 but is: {weight_decay}')
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    _group_defaults = {'foreach': None}

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``; returns the closure's loss."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr = _scalar(group['lr'])
                eps1, eps2 = group['eps']
                beta2_decay, clip_d, wd = group['beta2_decay'], group['d'], group['weight_decay']
                for p, g in self._grads(group):
                    d = _writable(p)
                    if eps1 is None:
                        # as PyTorch: the first parameter's dtype sets it for the group
                        eps1 = float(np.finfo(d.dtype).eps)
                    state = self.state[p]
                    if len(state) == 0:
                        state['step'] = _step_state()
                        if g.ndim > 1:
                            state['row_var'] = _leaf(np.zeros(g.shape[:-1] + (1,), g.dtype))
                            state['col_var'] = _leaf(
                                np.zeros(g.shape[:-2] + (1,) + g.shape[-1:], g.dtype))
                        else:
                            state['variance'] = _zeros_state(g)
                    step = _next_step(state)
                    one_minus_beta2_t = step ** beta2_decay
                    rho_t = min(lr, 1 / (step ** 0.5))
                    alpha = max(eps2, float(np.sqrt(np.vdot(d, d))) / (d.size ** 0.5)) * rho_t
                    if wd != 0:
                        d *= 1 - lr * wd
                    if g.ndim > 1:
                        row_var, col_var = state['row_var']._data, state['col_var']._data
                        gg = g * g
                        row_mean = np.square(np.sqrt(gg.sum(-1, keepdims=True)))
                        row_mean /= g.shape[-1]
                        _lerp_(row_var, row_mean, one_minus_beta2_t, np.empty_like(row_var))
                        col_mean = np.square(np.sqrt(gg.sum(-2, keepdims=True)))
                        col_mean /= g.shape[-2]
                        _lerp_(col_var, col_mean, one_minus_beta2_t, np.empty_like(col_var))
                        var_estimate = np.matmul(row_var, col_var)
                        var_estimate /= np.maximum(row_var.mean(-2, keepdims=True),
                                                   row_var.dtype.type(eps1))
                    else:
                        variance = state['variance']._data
                        _lerp_(variance, g * g, one_minus_beta2_t, np.empty_like(variance))
                        var_estimate = np.array(variance)
                    np.maximum(var_estimate, var_estimate.dtype.type(eps1 * eps1),
                               out=var_estimate)
                    update = np.sqrt(var_estimate, out=var_estimate)
                    np.reciprocal(update, out=update)        # rsqrt, then times g
                    update *= g
                    denom = max(1.0, float(np.sqrt(np.vdot(update, update)))
                                / ((update.size ** 0.5) * clip_d))
                    update *= -alpha / denom
                    d += update
                    _commit(p, d)
        return loss
