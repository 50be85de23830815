"""cross_entropy and nll_loss with class-index targets, each one custom Function.

As ``nll_loss(log_softmax(x))`` in tape ops it was about ten records: the
logsumexp's max, exp, sum and log passes, the pick, the weighting and the
reduction, each with a backward, and the backward recomputed ``exp(x - lse)``.
Here the forward takes each row's maximum, then ``e = exp(x - max)`` and its sum
in the input's dtype (float32 stays float32), picks ``x[t] - max - log(sum)``
and reduces; ``e`` and the row sums are kept, so the backward is the one pass

    gx = e * (coef / sum) - onehot(t) * coef,   coef = gy * w[t] (/ sum of w[t] for mean)

Under ``create_graph`` the same backward is written in tape ops from the saved
input (softmax of it, minus the constant one-hot), so it is itself recorded and
differentiable to any order.  Probability targets and label smoothing keep the
composite path in functional.py.

nll_loss of log-probabilities (the MNIST example's ``F.nll_loss(F.log_softmax(x,
1), t)``) was four records and some twenty NumPy calls for the pick of each
target, its weight and the reduction: 3x cross_entropy's time on a small batch.
Here it is one pass that picks and reduces, and a backward that writes
``-g * scale`` at each target into zeros (scale: the sample's weight, over the
weights' total for 'mean').
"""
import math

import numpy as np

from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function, apply_own


_REDUCTIONS = {'none': 0, 'sum': 1, 'mean': 2}
_EMPTY = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64)}


def _planes(d):
    """The input as a C-contiguous (samples, classes, positions) array: (N, C) as
    (N, C, 1), (C,) as (1, C, 1), (N, C, d1, ...) as (N, C, d1 * ...)."""
    d = np.ascontiguousarray(d)
    if d.ndim == 1:
        return d.reshape(1, d.shape[0], 1)
    if d.ndim == 2:
        return d.reshape(d.shape[0], d.shape[1], 1)
    return d.reshape(d.shape[0], d.shape[1], -1)


_loss_kernels = None


def _kernels():
    """compiler.loss_kernels, imported on first use (nothing compiles at import)."""
    global _loss_kernels
    if _loss_kernels is None:
        import compiler.loss_kernels as k
        _loss_kernels = k
    return _loss_kernels


def _target_shape(shape):
    """The targets' shape for logits of ``shape``: (N, C, d1...) -> (N, d1...), (C,) -> ()."""
    return tuple(shape[:1]) + tuple(shape[2:]) if len(shape) > 1 else ()


class _CrossEntropy(Function):
    """Loss of class indices ``t`` (a 1-d int64 array, the targets flattened) under
    logits ``x``; ``w`` per-class weights (a contiguous array or None), as
    F.cross_entropy without label smoothing."""
    @staticmethod
    def forward(ctx, x, t, w, ignore_index, reduction):
        k = _kernels()
        xd = np.asarray(x._data)
        dt = xd.dtype
        x3 = _planes(xd)
        ns = t.shape[0]
        e = np.empty(x3.shape, dt)
        rows = np.empty((3, ns))                # picked x[t] - max, sums of e, scales
        code = _REDUCTIONS[reduction]
        loss = np.empty(ns, dt) if code == 0 else _EMPTY[dt]
        k.ce_shift(x3, t, ignore_index, e, rows)
        np.exp(e, out=e)                        # (x - max <= 0: no overflow)
        total = k.ce_reduce(e, t, _EMPTY[dt] if w is None else w, ignore_index, code,
                            rows, loss)
        ctx.e, ctx.rows, ctx.t, ctx.ignore_index = e, rows, t, ignore_index
        ctx.save_for_backward(x)
        if code == 0:
            return _leaf(loss.reshape(_target_shape(xd.shape)))
        return _leaf(np.array(total, dt))

    @staticmethod
    def backward(ctx, gy):
        return _loss_backward(ctx, gy, _backward_tensors, _backward_array)

    @staticmethod
    def _backward_array(ctx, x, g):
        return _backward_array(ctx, x, g)


def _loss_backward(ctx, gy, tensors, array):
    """Both losses' ``backward``: the input's gradient in tape ops under
    create_graph (``tensors``), else from arrays (``array``); none for the
    targets, weights and options."""
    x, = ctx.saved_tensors
    if grad_mode.enabled:
        return tensors(ctx, x, gy), None, None, None, None
    return _leaf(array(ctx, x, gy._data)), None, None, None, None


def _backward_array(ctx, x, g):
    """The input's gradient as an array, from the output's (``g``, any float dtype)."""
    e = ctx.e
    g = np.asarray(g)
    if g.dtype.char not in 'fd':
        g = g.astype(np.float64)
    gx = np.empty(e.shape, e.dtype)
    _kernels().ce_backward(e, ctx.rows, ctx.t, ctx.ignore_index, g.reshape(-1), gx)
    return gx.reshape(x.shape)


def _backward_tensors(ctx, x, gy):
    """The backward in tape ops from x and gy (create_graph): (softmax - onehot) * coef."""
    from . import functional as F
    cdim = 0 if x.dim() == 1 else 1
    p = F.softmax(x, cdim)
    e = ctx.e
    dt = e.dtype
    n, _, d = e.shape
    onehot = np.zeros(e.shape, dt)
    safe = np.where(ctx.t == ctx.ignore_index, 0, ctx.t)     # (ignored: coef is 0)
    np.put_along_axis(onehot, safe.reshape(n, 1, d), 1, axis=1)
    onehot = _leaf(onehot.reshape(x.shape))
    coef = gy * _leaf(ctx.rows[2].astype(dt).reshape(_target_shape(x.shape)))
    return (p - onehot) * coef.unsqueeze(cdim)


# the node PyTorch's cross_entropy result shows (its next function, PyTorch's
# LogSoftmaxBackward0, is folded into this one)
_CrossEntropy._backward_name = 'NllLossBackward0'


class _NllLoss(Function):
    """nll_loss of class indices ``t`` (a 1-d int64 array, the targets
    flattened) under log-probabilities ``x``; ``w`` per-class weights (a
    contiguous array or None)."""
    @staticmethod
    def forward(ctx, x, t, w, ignore_index, reduction):
        xd = np.asarray(x._data)
        dt = xd.dtype
        ns = t.shape[0]
        scale = np.empty(ns)
        code = _REDUCTIONS[reduction]
        loss = np.empty(ns, dt) if code == 0 else _EMPTY[dt]
        total = _kernels().nll_reduce(_planes(xd), t, _EMPTY[dt] if w is None else w,
                                      ignore_index, code, scale, loss)
        ctx.scale, ctx.t, ctx.ignore_index = scale, t, ignore_index
        ctx.save_for_backward(x)
        if code == 0:
            return _leaf(loss.reshape(_target_shape(xd.shape)))
        return _leaf(np.array(total, dt))

    @staticmethod
    def backward(ctx, gy):
        return _loss_backward(ctx, gy, _nll_backward_tensors, _nll_backward_array)

    @staticmethod
    def _backward_array(ctx, x, g):
        return _nll_backward_array(ctx, x, g)


def _nll_backward_array(ctx, x, g):
    g = np.asarray(g)
    if g.dtype.char not in 'fd':
        g = g.astype(np.float64)
    dt = x._data.dtype
    gx = np.zeros(_planes_shape(x.shape), dt)
    _kernels().nll_backward(ctx.t, ctx.ignore_index, ctx.scale, g.reshape(-1), gx)
    return gx.reshape(x.shape)


def _nll_backward_tensors(ctx, x, gy):
    """The backward in tape ops (create_graph): a constant -scale at each
    target, times gy: linear in gy, so differentiable to any order."""
    shape = _planes_shape(x.shape)
    n, _, d = shape
    dt = x._data.dtype
    picks = np.zeros(shape, dt)
    counted = ctx.t != ctx.ignore_index
    safe = np.where(counted, ctx.t, 0)
    np.put_along_axis(picks, safe.reshape(n, 1, d),
                      np.where(counted, -ctx.scale, 0.0).astype(dt).reshape(n, 1, d), axis=1)
    cdim = 0 if x.dim() == 1 else 1
    return _leaf(picks.reshape(x.shape)) * (gy if gy.dim() == 0 else gy.unsqueeze(cdim))


def _planes_shape(shape):
    """``_planes``' (samples, classes, positions) for an input of ``shape``."""
    if len(shape) == 1:
        return (1, shape[0], 1)
    return (shape[0], shape[1], math.prod(shape[2:]))


_NllLoss._backward_name = 'NllLossBackward0'


class _NllLoss2d(_NllLoss):
    """_NllLoss of a 4-D input (PyTorch's nll_loss2d)."""


_NllLoss2d._backward_name = 'NllLoss2DBackward0'


def nll_loss_indices(x, t, w, ignore_index, reduction):
    return apply_own(_NllLoss, x, t, w, int(ignore_index), reduction)


def nll_loss2d_indices(x, t, w, ignore_index, reduction):
    return apply_own(_NllLoss2d, x, t, w, int(ignore_index), reduction)


def cross_entropy_indices(x, t, w, ignore_index, reduction):
    return apply_own(_CrossEntropy, x, t, w, int(ignore_index), reduction)
