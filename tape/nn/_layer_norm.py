"""layer_norm as one custom Function: a Numba forward and PyTorch's fused backward.

As a composite of tape ops layer_norm was about 15 records and six full passes
each way; here the forward takes each row's mean and (biased) variance, in
float64, and writes y in one Numba call (``compiler/norm_kernels.py``), saving
the input and the row moments, and the backward is the standard fused form

    gx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = gy * weight

with ``gw = sum(gy * xhat)`` and ``gb = sum(gy)`` over the leading dims, xhat
recomputed from the saved input and moments, in one Numba call.  Under
``create_graph`` the same backward is written in tape ops from the saved input,
so it is itself recorded and differentiable to any order.
"""
import math

import numpy as np

from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function


_norm_kernels = None


def _kernels():
    """compiler.norm_kernels, imported on first use (nothing compiles at import)."""
    global _norm_kernels
    if _norm_kernels is None:
        import compiler.norm_kernels as k
        _norm_kernels = k
    return _norm_kernels


def _rows(a, n):
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a.reshape(-1, n)


class _LayerNorm(Function):
    """y = (x - mean) * rstd * w + b over the last ``len(ns)`` dims (w, b may be None).

    Saves the input (as rows) and the float64 row moments ``mean`` and ``rstd``;
    the backward recomputes xhat from them (compiler/norm_kernels.py)."""
    @staticmethod
    def forward(ctx, x, w, b, ns, eps):
        xd = np.asarray(x._data)
        dt = xd.dtype
        n = math.prod(ns)
        x2 = _rows(xd, n)
        y = np.empty(x2.shape, dt)
        mr = np.empty((2, x2.shape[0]))
        _kernels().layer_norm_forward(x2, _vec(w, dt), _vec(b, dt), eps, y, mr[0], mr[1])
        ctx.ns, ctx.eps, ctx.n = ns, eps, n
        ctx.x2, ctx.mr = x2, mr
        ctx.save_for_backward(x, w)
        return _leaf(y.reshape(xd.shape))

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        if grad_mode.enabled:
            return _backward_tensors(ctx, x, w, gy)
        n = ctx.n
        x2 = ctx.x2
        dt = x2.dtype
        g2 = _rows(np.asarray(gy._data, dtype=dt), n)
        need = ctx.needs_input_grad
        gx = np.empty(x2.shape, dt) if need[0] else _EMPTY[dt]
        # the weight's and bias's sums accumulate in float64, as the row moments do
        gwb = np.zeros((2, n)) if need[1] or need[2] else None
        e64 = _EMPTY[_F64]
        gw = gwb[0] if need[1] else e64
        gb = gwb[1] if need[2] else e64
        mr = ctx.mr
        _kernels().layer_norm_backward(x2, g2, _vec(w, dt), mr[0], mr[1], gx, gw, gb)
        return (_leaf(gx.reshape(x.shape)) if need[0] else None,
                _leaf(gw.astype(dt).reshape(ctx.ns)) if need[1] else None,
                _leaf(gb.astype(dt).reshape(ctx.ns)) if need[2] else None, None, None)


_EMPTY = {np.dtype(t): np.empty(0, t) for t in (np.float16, np.float32, np.float64)}
_F64 = np.dtype(np.float64)


def _vec(p, dt):
    """A weight or bias as a flat contiguous array (size 0 when absent)."""
    if p is None:
        return _EMPTY[dt]
    a = np.asarray(p._data)
    if a.dtype != dt or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=dt)
    return a.reshape(-1)


def _backward_tensors(ctx, x, w, gy):
    """The fused backward in tape ops from x, w and gy (create_graph)."""
    dims = tuple(range(x.dim() - len(ctx.ns), x.dim()))
    lead = tuple(range(x.dim() - len(ctx.ns)))
    mean = x.mean(dims, keepdim=True)
    xc = x - mean
    rstd = ((xc * xc).mean(dims, keepdim=True) + ctx.eps).rsqrt()
    xhat = xc * rstd
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        g = gy if w is None else gy * w
        gx = rstd * (g - g.mean(dims, keepdim=True)
                     - xhat * (g * xhat).mean(dims, keepdim=True))
    if ctx.needs_input_grad[1]:
        gw = (gy * xhat).sum(lead) if lead else gy * xhat
    if ctx.needs_input_grad[2]:
        gb = gy.sum(lead) if lead else gy
    return gx, gw, gb, None, None


# the node PyTorch's layer_norm records
_LayerNorm._backward_name = 'NativeLayerNormBackward0'


def layer_norm(a, w, b, ns, eps):
    return _LayerNorm.apply(a, w, b, ns, eps)
