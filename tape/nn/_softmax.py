"""softmax and log_softmax as one custom Function each, as PyTorch records them
(``SoftmaxBackward0``, ``LogSoftmaxBackward0``).

As composites of tape ops (``exp(x - logsumexp(x))``) they were three records,
two exp passes each way and a broadcast reduction for the subtracted
logsumexp: 0.3-0.4x PyTorch at 256x512.  Here the forward is PyTorch's: the
maximum along ``dim``, ``e = exp(x - max)`` and its sum, in the input's dtype;
the Function saves its *output* ``y`` only (as PyTorch's node does, so an
in-place change of the input afterwards is allowed and one of the output is
refused), and the backward is one pass

    softmax:      gx = y * (g - sum(g * y))
    log_softmax:  gx = g - exp(y) * sum(g)

written in tape ops when ``create_graph`` is on: ``y`` is then the recorded
output of this node, so the gradient differentiates again through it, to any
order, as PyTorch's ``_softmax_backward_data`` does.

Along the last dim of a C-contiguous array (rows) the row-wise steps are
Numba kernels (``compiler/softmax_kernels.py``): NumPy's reductions along a
short last axis cost more than the exp.  Long float32 rows (softmax's of
``SOFTMAX_FUSED_MIN``, log_softmax's of ``LOG_SOFTMAX_FUSED_MIN`` or more) are
one kernel call each way (the exp vectorized inside it); shorter rows and
float64 take NumPy's exp between two kernel calls, which measured as fast or
faster there (NumPy's exp over the whole array runs at full vector width).
log_softmax's float32 backward is one call at any length.  Other dims keep
the NumPy code.

The record is made here, not by ``Function.apply`` (``_apply``, as
``apply_own`` does): its generic work cost more than a 32x10 softmax.  The
compiled sweep calls ``_Record.backward`` with arrays, and the input's
gradient goes to the store as owned, so a leaf adopts it as its ``.grad``
rather than copying it (a full copy at 256x1024).  ``create_graph``, node
hooks and forward-mode AD take the Function's generic paths.
"""
import math

import numpy as np

from .. import _ops
from .._tape import grad_mode, open_tape, resolve
from .._tensor import Tensor, _leaf
from ..autograd import function as _function
from ..autograd.function import (Function, FunctionCtx, _FunctionRecord, _append_own,
                                 _new_ctx)

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_softmax_kernels = None

F32 = np.dtype(np.float32)
# float32 row lengths from which the one-call forward kernels win (measured:
# below, NumPy's exp over the whole array between two kernel calls costs less
# than the one call's per-row loops; log_softmax's backward is one call always)
SOFTMAX_FUSED_MIN = 128
LOG_SOFTMAX_FUSED_MIN = 32
# ... and arrays of at most this many elements take them whatever their rows:
# there the path's three calls cost more than its per-row loops save (32x10
# log_softmax 5.3 -> 3.1 us, softmax 4.6 -> 3.4 us on an AVX2 CPU)
FUSED_SMALL = 4096


def _kernels():
    """compiler.softmax_kernels, imported on first use (nothing compiles at import)."""
    global _softmax_kernels
    if _softmax_kernels is None:
        import compiler.softmax_kernels as k
        _softmax_kernels = k
    return _softmax_kernels


def _rows(a, dim):
    """``a`` as rows (n, c) when ``dim`` is its last and it is C-contiguous, else None."""
    if dim == a.ndim - 1 and a.flags.c_contiguous and a.size:
        return a.reshape(-1, a.shape[-1])
    return None


def _array(t):
    d = t._data
    return d if type(d) is np.ndarray else np.asarray(d)


def _softmax_array(xd, dim):
    """softmax of the array ``xd`` along ``dim`` (a new array, xd's dtype)."""
    x2 = _rows(xd, dim)
    if x2 is not None:
        k = _softmax_kernels or _kernels()
        e = np.empty(xd.shape, xd.dtype)
        e2 = e.reshape(x2.shape)
        if xd.dtype == F32 and (x2.shape[1] >= SOFTMAX_FUSED_MIN or xd.size <= FUSED_SMALL):
            k.softmax32(x2, e2, 1.0, False)
        else:
            k.shift(x2, e2, 1.0, False)
            np.exp(e, out=e)                    # (<= 0 or NaN: no overflow, nothing invalid)
            k.normalize(e2, False)
        return e
    with np.errstate(all='ignore'):        # an all -inf or a +inf row gives NaN
        e = xd - xd.max(axis=dim, keepdims=True)
        np.exp(e, out=e)
        e /= e.sum(axis=dim, keepdims=True)
    return e


def _log_softmax_array(xd, dim):
    """log_softmax of the array ``xd`` along ``dim`` (a new array, xd's dtype)."""
    x2 = _rows(xd, dim)
    if x2 is not None:
        k = _softmax_kernels or _kernels()
        z = np.empty(xd.shape, xd.dtype)
        z2 = z.reshape(x2.shape)
        if xd.dtype == F32 and (x2.shape[1] >= LOG_SOFTMAX_FUSED_MIN or xd.size <= FUSED_SMALL):
            k.log_softmax32(x2, z2)
        else:
            k.shift(x2, z2, 1.0, False)
            ez = np.exp(z)                      # (<= 0 or NaN: no overflow, nothing invalid)
            k.log_normalize(z2, ez.reshape(x2.shape))
        return z
    with np.errstate(all='ignore'):        # an all -inf or a +inf row gives NaN
        z = xd - xd.max(axis=dim, keepdims=True)
        z -= np.log(np.exp(z).sum(axis=dim, keepdims=True))
    return z


def _grad_array(g):
    """The output's gradient ``g`` (an array in y's dtype), C-contiguous."""
    return g if g.flags.c_contiguous else np.ascontiguousarray(g)


def _softmax_backward_array(yd, gd, dim):
    """gx = y * (g - sum(g * y)) as a new array (gd in yd's dtype)."""
    y2 = _rows(yd, dim)
    if y2 is not None:
        gx = np.empty(yd.shape, yd.dtype)
        (_softmax_kernels or _kernels()).softmax_backward(
            y2, _grad_array(gd).reshape(y2.shape), gx.reshape(y2.shape))
        return gx
    gx = np.multiply(gd, yd)
    dot = gx.sum(axis=dim, keepdims=True)
    np.subtract(gd, dot, out=gx)
    gx *= yd
    return gx


def _log_softmax_backward_array(yd, gd, dim):
    """gx = g - exp(y) * sum(g) as a new array (gd in yd's dtype)."""
    y2 = _rows(yd, dim)
    if y2 is not None:
        k = _softmax_kernels or _kernels()
        g2 = _grad_array(gd).reshape(y2.shape)
        if yd.dtype == F32:
            gx = np.empty(yd.shape, yd.dtype)
            k.log_softmax_backward32(y2, g2, gx.reshape(y2.shape))
            return gx
        gx = np.exp(yd)
        k.log_softmax_backward(g2, gx.reshape(y2.shape))
        return gx
    gx = np.exp(yd)
    gx *= gd.sum(axis=dim, keepdims=True)
    np.subtract(gd, gx, out=gx)
    return gx


def _saved(ctx, g):
    """(y, dim, y's array, g's array in y's dtype) for the tensor backward."""
    y, = ctx.saved_tensors
    yd = _array(y)
    return y, ctx.dim, yd, np.asarray(g._data, dtype=yd.dtype)


class _Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = _leaf(_softmax_array(_array(x), dim))
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, dim, yd, gd = _saved(ctx, g)
        if grad_mode.enabled:
            return _ops.mul(y, _ops.sub(g, _ops.sum_(_ops.mul(g, y), dim, True))), None
        return _leaf(_softmax_backward_array(yd, gd, dim)), None

    # the compiled sweep's (see _Record): arrays in, the input's gradient out
    _backward_y = staticmethod(_softmax_backward_array)


class _LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = _leaf(_log_softmax_array(_array(x), dim))
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, dim, yd, gd = _saved(ctx, g)
        if grad_mode.enabled:
            return _ops.sub(g, _ops.mul(_ops.exp(y), _ops.sum_(g, dim, True))), None
        return _leaf(_log_softmax_backward_array(yd, gd, dim)), None

    _backward_y = staticmethod(_log_softmax_backward_array)


# the nodes PyTorch's softmax and log_softmax record
_Softmax._backward_name = 'SoftmaxBackward0'
_LogSoftmax._backward_name = 'LogSoftmaxBackward0'


class _Record(_FunctionRecord):
    """The record of one softmax or log_softmax: the compiled sweep hands the
    output's gradient array to ``cls._backward_y`` with the saved output's
    array, and the input's gradient (a fresh array) to the store as owned, so a
    leaf adopts it as its ``.grad`` instead of copying it.  ``create_graph`` and
    node hooks take the generic path (``cls.backward`` with tensors)."""
    __slots__ = ()

    def backward(self, store):
        s = self.out_slots[0]
        if s < 0 or not store.reached(s):
            return
        y, = self.ctx.saved_tensors     # (raises once freed, or changed in place)
        shape = self.out_shapes[0]
        yd = _array(y)
        g = store.get(s, math.prod(shape), shape)
        if g.dtype != yd.dtype:
            g = g.astype(yd.dtype)      # (a float64 sweep of a float32 output)
        gx = self.cls._backward_y(yd, g, self.ctx.dim)
        si = self.in_slots[0]
        if si >= 0:
            store.add(si, gx.size, gx, owned=True)


def _apply(cls, fn, x, dim):
    """``cls.apply(x, dim)``: the record ``Function.apply`` makes, without its
    generic work (``apply_own``'s shortcut; ``fn`` computes the output array)."""
    if _function.jvp_hook is not None or type(x) is not Tensor:
        return cls.apply(x, dim)
    xd = _array(x)
    y = _leaf(fn(xd, dim))
    if not (x._rg and grad_mode.enabled):
        return y                            # nothing recorded: nothing to save
    ctx = _new_ctx(FunctionCtx, cls._backward_name)
    ctx.needs_input_grad = (True, False)
    ctx.dim = dim
    ctx._to_save = (y,)
    tape = x._tape
    if tape is None:
        tape = open_tape()
    elif tape.alias is not None:
        tape = resolve(x)
    rec = _Record()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = 2
    rec.in_slots = [_ops._slot(x, tape), -1]
    rec.in_shapes = [xd.shape, ()]
    rec.in_dtypes = [xd.dtype, None]
    return _append_own(tape, rec, ctx, y)


def softmax(a, dim):
    return _apply(_Softmax, _softmax_array, a, dim)


def log_softmax(a, dim):
    return _apply(_LogSoftmax, _log_softmax_array, a, dim)
