"""cross_entropy with class-index targets as one custom Function.

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
"""
import numpy as np

from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function, apply_own


def _rows(d, cdim):
    """The input as (samples, classes) rows: class dim last (a copy only for 3-D and up)."""
    if d.ndim == 1:
        return d.reshape(1, -1)
    if d.ndim == 2:
        return d
    return np.moveaxis(d, cdim, -1).reshape(-1, d.shape[cdim])


class _CrossEntropy(Function):
    """Loss of class indices ``t`` (an int array) under logits ``x``; ``w`` per-class
    weights (an array or None), as F.cross_entropy without label smoothing."""
    @staticmethod
    def forward(ctx, x, t, w, ignore_index, reduction):
        xd = np.asarray(x._data)
        dt = xd.dtype
        cdim = 0 if xd.ndim == 1 else 1
        x2 = _rows(xd, cdim)
        tf = t.reshape(-1)
        ignore = tf == ignore_index
        some_ignored = bool(ignore.any())
        safe = np.where(ignore, 0, tf) if some_ignored else tf
        rows = np.arange(x2.shape[0])
        with np.errstate(all='ignore'):
            e = x2 - x2.max(1, keepdims=True)         # (a new array: exp runs in place)
            picked = e[rows, safe]                    # x[t] - max, before the exp
            np.exp(e, out=e)
            s = e.sum(1)
            wi = np.ones(tf.shape, dt) if w is None else w[safe].astype(dt)
            if some_ignored:
                wi[ignore] = 0
            loss = (np.log(s) - picked) * wi
            if reduction == 'none':
                out = loss.reshape(t.shape)
                scale = wi
            elif reduction == 'sum':
                out = loss.sum()
                scale = wi
            else:
                total = wi.sum()
                out = loss.sum() / total
                # every target ignored: NaN, with a gradient of 0 as in PyTorch
                # (class weights of 0 on counted targets still give NaN, as there)
                scale = np.zeros_like(wi) if ignore.all() else wi / total
        ctx.e, ctx.s, ctx.scale, ctx.safe, ctx.rows = e, s, scale, safe, rows
        ctx.reduction, ctx.tshape = reduction, t.shape
        ctx.save_for_backward(x)
        return _leaf(np.asarray(out, dtype=dt))

    @staticmethod
    def backward(ctx, gy):
        x, = ctx.saved_tensors
        if grad_mode.enabled:
            return _backward_tensors(ctx, x, gy), None, None, None, None
        return _leaf(_backward_array(ctx, x, gy._data)), None, None, None, None

    @staticmethod
    def _backward_array(ctx, x, g):
        return _backward_array(ctx, x, g)


def _backward_array(ctx, x, g):
    """The input's gradient as an array, from the output's (``g``, any float dtype)."""
    e = ctx.e
    dt = e.dtype
    g = np.asarray(g, dtype=dt)
    coef = ctx.scale * (g.reshape(-1) if ctx.reduction == 'none' else g)
    with np.errstate(all='ignore'):
        gx = e * (coef / ctx.s)[:, None]          # softmax * coef, one pass
        gx[ctx.rows, ctx.safe] -= coef
    xd_shape = x.shape
    if len(xd_shape) > 2:
        # rows back to (N, C, d1...): class dim from last to 1
        lead = (xd_shape[0],) + tuple(xd_shape[2:])
        gx = np.ascontiguousarray(np.moveaxis(gx.reshape(lead + (xd_shape[1],)), -1, 1))
    return gx.reshape(xd_shape)


def _backward_tensors(ctx, x, gy):
    """The backward in tape ops from x and gy (create_graph): (softmax - onehot) * coef."""
    from . import functional as F
    cdim = 0 if x.dim() == 1 else 1
    p = F.softmax(x, cdim)
    dt = ctx.e.dtype
    onehot = np.zeros(ctx.e.shape, dt)
    onehot[ctx.rows, ctx.safe] = 1                    # (ignored rows: coef is 0)
    if x.dim() > 2:
        lead = (x.shape[0],) + tuple(x.shape[2:])
        onehot = np.moveaxis(onehot.reshape(lead + (x.shape[1],)), -1, 1)
    onehot = _leaf(np.ascontiguousarray(onehot).reshape(x.shape))
    coef = gy * _leaf(ctx.scale.reshape(ctx.tshape))
    return (p - onehot) * coef.unsqueeze(cdim)


# the node PyTorch's cross_entropy result shows (its next function, PyTorch's
# LogSoftmaxBackward0, is folded into this one)
_CrossEntropy._backward_name = 'NllLossBackward0'


def cross_entropy_indices(x, t, w, ignore_index, reduction):
    return apply_own(_CrossEntropy, x, t, w, ignore_index, reduction)
