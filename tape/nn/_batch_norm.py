"""batch_norm as one custom Function: a Numba forward and a fused backward.

As a composite of tape ops batch_norm was about ten records (mean, sub, mul,
mean, add, sqrt, div, the affine) and as many full passes each way, 5-7x
PyTorch.  Here, over the input viewed as (N, C, S):

- training: one Numba call takes each channel's float64 mean and biased
  variance (``compiler/bn_kernels.py``), another writes
  ``y = (x - mean) * rstd * w + b``; the moments are handed back for the
  running statistics (updated by the caller with the unbiased variance) and
  kept for the backward, which is the fused form

      gx = rstd * w * (gy - mean(gy) - xhat * mean(gy * xhat)),

  ``gw = sum(gy * xhat)``, ``gb = sum(gy)`` per channel, from two per-channel
  sums and one elementwise pass (xhat recomputed from the saved input);
- eval: the running statistics are constants, so the forward is one pass and
  the input's gradient a per-channel scale ``gy * rstd * w``.

The record is made by ``apply_own_inputs``: the compiled sweep takes
``_backward_arrays``.  Under ``create_graph`` the same backward is written in
tape ops from the saved input (``_backward_tensors``), so it is recorded and
differentiable to any order.
"""
import numpy as np

from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function, apply_own_inputs


_bn_kernels = None


def _kernels():
    """compiler.bn_kernels, imported on first use (nothing compiles at import)."""
    global _bn_kernels
    if _bn_kernels is None:
        import compiler.bn_kernels as k
        _bn_kernels = k
    return _bn_kernels


def _nc_s(a):
    """``a`` as a C-contiguous (N, C, S) array."""
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    sh = a.shape
    return a.reshape(sh[0], sh[1], -1)


_EMPTY = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64)}
_EMPTY3 = {np.dtype(t): np.empty((0, 0, 0), t) for t in (np.float32, np.float64)}


def _vec(p, dt):
    """A weight or bias as a flat contiguous array (size 0 when absent)."""
    if p is None:
        return _EMPTY[dt]
    a = np.asarray(p._data)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a.reshape(-1)


class _BatchNorm(Function):
    """y = (x - mean) * rstd * w + b per channel (dim 1); w, b may be None.

    ``stats`` is a list: in eval the float64 running (mean, var); in training
    the forward fills it with the batch's float64 (mean, biased var) for the
    caller's running-statistics update."""
    @staticmethod
    def forward(ctx, x, w, b, train, eps, stats):
        xd = np.asarray(x._data)
        dt = xd.dtype
        x3 = _nc_s(xd)
        c = x3.shape[1]
        if train:
            mean, var, rstd = np.empty((3, c))
            stats[:] = [mean, var]
        else:
            mean, var = stats
            rstd = np.empty(c)
        y = np.empty(x3.shape, dt)
        _kernels().bn_forward(x3, _vec(w, dt), _vec(b, dt), eps, train, mean, var, rstd, y)
        ctx.train, ctx.eps = train, eps
        ctx.x3, ctx.mean, ctx.rstd = x3, mean, rstd
        ctx.bshape = None if b is None else b.shape
        ctx.save_for_backward(x, w)
        return _leaf(y.reshape(xd.shape))

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        if grad_mode.enabled:
            return _backward_tensors(ctx, x, w, gy)
        gx, gw, gb = _backward_arrays(ctx, np.asarray(gy._data), x, w)
        return (None if gx is None else _leaf(gx), None if gw is None else _leaf(gw),
                None if gb is None else _leaf(gb), None, None, None)

    @staticmethod
    def _backward_arrays(ctx, g):
        x, w = ctx.saved_tensors        # (raises once freed, or changed in place)
        return _backward_arrays(ctx, g, x, w)


# the node PyTorch's batch_norm records
_BatchNorm._backward_name = 'NativeBatchNormBackward0'
_BatchNorm._node_inputs = 3      # input, weight, bias (None where absent), as PyTorch's node


def _backward_arrays(ctx, g, x, w):
    """(gx, gw, gb) as arrays (None where not wanted) from the output's gradient."""
    x3 = ctx.x3
    dt = x3.dtype
    g = np.asarray(g)
    if g.dtype != dt or not g.flags.c_contiguous:
        g = np.ascontiguousarray(g, dtype=dt)
    g3 = g.reshape(x3.shape)
    need = ctx.needs_input_grad
    c = x3.shape[1]
    gx = np.empty(x3.shape, dt) if need[0] else _EMPTY3[dt]
    gw = np.empty(c, dt) if need[1] else _EMPTY[dt]
    gb = np.empty(c, dt) if need[2] else _EMPTY[dt]
    _kernels().bn_backward(x3, g3, _vec(w, dt), ctx.mean, ctx.rstd, ctx.train, gx, gw, gb)
    return (gx.reshape(x.shape) if need[0] else None,
            gw.reshape(w.shape) if need[1] else None,
            gb.reshape(ctx.bshape) if need[2] else None)


def _backward_tensors(ctx, x, w, gy):
    """The backward in tape ops from x, w and gy (create_graph)."""
    nd = x.dim()
    dims = (0,) + tuple(range(2, nd))
    cs = (1, x.shape[1]) + (1,) * (nd - 2)
    need = ctx.needs_input_grad
    wc = None if w is None else w.reshape(cs)
    if ctx.train:
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        rstd = ((xc * xc).mean(dims, keepdim=True) + ctx.eps).rsqrt()
    else:
        dt = ctx.x3.dtype
        xc = x - _leaf(ctx.mean.astype(dt).reshape(cs))
        rstd = _leaf(ctx.rstd.astype(dt).reshape(cs))
    xhat = xc * rstd
    gx = gw = gb = None
    if need[0]:
        if ctx.train:
            gx = rstd * (gy - gy.mean(dims, keepdim=True)
                         - xhat * (gy * xhat).mean(dims, keepdim=True))
        else:
            gx = gy * rstd
        if wc is not None:
            gx = gx * wc
    if need[1]:
        gw = (gy * xhat).sum(dims).reshape(w.shape)
    if need[2]:
        gb = gy.sum(dims).reshape(ctx.bshape)
    return gx, gw, gb, None, None, None


def batch_norm(x, w, b, train, eps, stats):
    """The normalized ``x`` (one record); in training ``stats`` receives the batch's
    float64 (mean, biased var), in eval it holds the running (mean, rstd)."""
    return apply_own_inputs(_BatchNorm, (x, w, b), train, eps, stats)
