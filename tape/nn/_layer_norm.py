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

    Saves the input (as rows) and the float64 row moments ``mean`` and ``rstd``
    (one (2, m) array); the backward recomputes xhat from them
    (compiler/norm_kernels.py)."""
    @staticmethod
    def forward(ctx, x, w, b, ns, eps, n):
        xd = x._data
        if type(xd) is not np.ndarray:
            xd = np.asarray(xd)
        dt = xd.dtype
        x2 = xd.reshape(-1, n) if xd.flags.c_contiguous else _rows(xd, n)
        y = np.empty(xd.shape, dt)
        mr = np.empty((2, x2.shape[0]))
        _kernels().layer_norm_forward(x2, _vec(w, dt), _vec(b, dt), eps, y.reshape(x2.shape), mr)
        ctx.ns, ctx.eps, ctx.n, ctx.shape = ns, eps, n, xd.shape
        ctx.x2, ctx.mr = x2, mr
        ctx.save_for_backward(x, w)
        return _leaf(y)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        if grad_mode.enabled:
            return _backward_tensors(ctx, x, w, gy)
        n = ctx.n
        x2 = ctx.x2
        dt = x2.dtype
        gd = gy._data
        if type(gd) is not np.ndarray or gd.dtype != dt or not gd.flags.c_contiguous:
            gd = np.ascontiguousarray(gd, dtype=dt)
        need = ctx.needs_input_grad
        gx = np.empty(ctx.shape, dt) if need[0] else None
        # the weight's and bias's sums accumulate in float64, as the row moments do
        gwb = np.zeros((2, n)) if need[1] or need[2] else _EMPTY2[_F64]
        _kernels().layer_norm_backward(
            x2, gd.reshape(x2.shape), _vec(w, dt), ctx.mr,
            _EMPTY2[dt] if gx is None else gx.reshape(x2.shape), gwb,
            need[0] | need[1] << 1 | need[2] << 2)
        ns = ctx.ns
        return (None if gx is None else _leaf(gx),
                _leaf(gwb[0].astype(dt).reshape(ns)) if need[1] else None,
                _leaf(gwb[1].astype(dt).reshape(ns)) if need[2] else None, None, None, None)


_EMPTY = {np.dtype(t): np.empty(0, t) for t in (np.float16, np.float32, np.float64)}
# a gx or weight/bias-sum array that is not wanted: 2-D, the kernel's argument type
_EMPTY2 = {np.dtype(t): np.empty((0, 0), t) for t in (np.float32, np.float64)}
_F64 = np.dtype(np.float64)


def _vec(p, dt):
    """A weight or bias as a flat contiguous array (size 0 when absent)."""
    if p is None:
        return _EMPTY[dt]
    a = p._data
    if type(a) is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=dt)
    return a if a.ndim == 1 else a.reshape(-1)


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
    return gx, gw, gb, None, None, None


# the node PyTorch's layer_norm records
_LayerNorm._backward_name = 'NativeLayerNormBackward0'


def layer_norm(a, w, b, ns, eps, n=None):
    return _LayerNorm.apply(a, w, b, ns, eps, math.prod(ns) if n is None else n)
