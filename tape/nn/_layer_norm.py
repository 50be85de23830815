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

The record is made here (``layer_norm``), not by ``Function.apply``, whose
generic work cost as much as the kernels at (32, 10); the compiled sweep calls
``_Record.backward`` with arrays, and the fresh gradients go to the store as
owned, so a leaf adopts its gradient rather than copying it.  Forward-mode AD
takes ``Function.apply``.
"""
import math

import numpy as np

from .. import _ops
from .._tape import grad_mode, open_tape, resolve
from .._tensor import Tensor, _leaf
from ..autograd import function as _function
from ..autograd.function import (Function, FunctionCtx, _FunctionRecord, _append_own,
                                 _new_ctx)


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
        ctx._to_save = (x, w)               # (save_for_backward's, without its checks)
        return _leaf(y)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        if grad_mode.enabled:
            return _backward_tensors(ctx, x, w, gy)
        gx, gw, gb = _backward_arrays(ctx, gy._data, w)
        return (None if gx is None else _leaf(gx), None if gw is None else _leaf(gw),
                None if gb is None else _leaf(gb), None, None, None)

    @staticmethod
    def _backward_arrays(ctx, g):
        # the compiled sweep's (apply_own_inputs' record): the output's gradient
        # array in, (gx, gw, gb) arrays out
        x, w = ctx.saved_tensors        # (raises once freed, or changed in place)
        return _backward_arrays(ctx, g, w)


def _backward_arrays(ctx, gd, w):
    """(gx, gw, gb) as arrays (None where not wanted) from the output's gradient."""
    n = ctx.n
    x2 = ctx.x2
    dt = x2.dtype
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
    return (gx,
            gwb[0].astype(dt).reshape(ns) if need[1] else None,
            gwb[1].astype(dt).reshape(ns) if need[2] else None)


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
_LayerNorm._node_inputs = 3      # input, weight, bias (None where absent), as PyTorch's node


class _Record(_FunctionRecord):
    """The record of one layer_norm (``apply_own_inputs``' record, made here): the
    compiled sweep hands the output's gradient array to ``_backward_arrays`` and
    the fresh gradients of x, weight and bias to the store as owned (a leaf
    adopts its gradient rather than copying it).  ``create_graph`` and node
    hooks take the generic path (``_LayerNorm.backward`` with tensors)."""
    __slots__ = ()

    def backward(self, store):
        s = self.out_slots[0]
        if s < 0 or not store.reached(s):
            return
        shape = self.out_shapes[0]
        g = store.get(s, math.prod(shape), shape)
        for gi, si in zip(_LayerNorm._backward_arrays(self.ctx, g), self.in_slots):
            if gi is not None and si >= 0:
                store.add(si, gi.size, gi, owned=True)


_NAME = _LayerNorm._backward_name


def layer_norm(a, w, b, ns, eps, n=None):
    """``_LayerNorm.apply(a, w, b, ns, eps, n)`` (a, w, b Tensors, w and b may be
    None): the record ``Function.apply`` makes, without its generic work, which
    cost as much as the kernels at (32, 10)."""
    if n is None:
        n = math.prod(ns)
    if _function.jvp_hook is not None or type(a) is not Tensor \
            or (w is not None and type(w) is not Tensor) \
            or (b is not None and type(b) is not Tensor):
        return _LayerNorm.apply(a, w, b, ns, eps, n)
    ctx = _new_ctx(FunctionCtx, _NAME)
    rw = w is not None and w._rg
    rb = b is not None and b._rg
    ctx.needs_input_grad = (a._rg, rw, rb, False, False, False)
    o = _LayerNorm.forward(ctx, a, w, b, ns, eps, n)     # (records nothing: NumPy only)
    if not ((a._rg or rw or rb) and grad_mode.enabled):
        return o                            # nothing recorded: nothing to keep
    tape = a._tape
    if (w is None or w._tape is None) and (b is None or b._tape is None):
        if tape is None:
            tape = open_tape()
        elif tape.alias is not None:
            tape = resolve(a)
    else:
        tape = _ops.tape_of_all([t for t in (a, w, b) if t is not None])
    slot = _ops._slot
    rec = _Record()
    rec.cls = _LayerNorm
    rec.ctx = ctx
    rec.nargs = 6
    rec.in_slots = [slot(a, tape), -1 if w is None else slot(w, tape),
                    -1 if b is None else slot(b, tape), -1, -1, -1]
    rec.in_shapes = [a._data.shape, () if w is None else w._data.shape,
                     () if b is None else b._data.shape, (), (), ()]
    rec.in_dtypes = [a._data.dtype, None if w is None else w._data.dtype,
                     None if b is None else b._data.dtype, None, None, None]
    return _append_own(tape, rec, ctx, o)
