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
Other dims keep the NumPy code.
"""
import numpy as np

from .. import _ops
from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_softmax_kernels = None

F32 = np.dtype(np.float32)
# float32 row lengths from which the one-call kernels win (measured; softmax's
# three steps vectorize as well as its one call up to a few hundred)
FUSED_MIN = 32
SOFTMAX_FUSED_MIN = 512
LOG_SOFTMAX_FUSED_MIN = 128


def _kernels():
    """compiler.softmax_kernels, imported on first use (nothing compiles at import)."""
    global _softmax_kernels
    if _softmax_kernels is None:
        import compiler.softmax_kernels as k
        _softmax_kernels = k
    return _softmax_kernels


def _fused(a2, least=FUSED_MIN):
    """Whether the rows ``a2`` (n, c) take the one-call float32 kernels."""
    return a2.dtype == F32 and a2.shape[1] >= least


def _rows(a, dim):
    """``a`` as rows (n, c) when ``dim`` is its last and it is C-contiguous, else None."""
    if dim == a.ndim - 1 and a.flags.c_contiguous:
        return a.reshape(-1, a.shape[-1])
    return None


def _output(ctx, arr, dim):
    """The result tensor, saved (alone) for the backward, as PyTorch's node saves it."""
    y = _leaf(arr)
    ctx.dim = dim
    ctx.save_for_backward(y)
    return y


def _saved(ctx, g):
    """(y, dim, y's array, g's array in y's dtype) for the NumPy backward."""
    y, = ctx.saved_tensors
    yd = np.asarray(y._data)
    return y, ctx.dim, yd, np.asarray(g._data, dtype=yd.dtype)


class _Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        xd = np.asarray(x._data)
        x2 = _rows(xd, dim)
        if x2 is not None:
            k = _kernels()
            e = np.empty(xd.shape, xd.dtype)
            e2 = e.reshape(x2.shape)
            if _fused(x2, SOFTMAX_FUSED_MIN):
                k.softmax32(x2, e2, 1.0, False)
                return _output(ctx, e, dim)
            k.shift(x2, e2, 1.0, False)
            np.exp(e, out=e)                    # (<= 0 or NaN: no overflow, nothing invalid)
            k.normalize(e2, False)
            return _output(ctx, e, dim)
        with np.errstate(all='ignore'):        # an all -inf or a +inf row gives NaN
            e = xd - xd.max(axis=dim, keepdims=True)
            np.exp(e, out=e)
            e /= e.sum(axis=dim, keepdims=True)
        return _output(ctx, e, dim)

    @staticmethod
    def backward(ctx, g):
        y, dim, yd, gd = _saved(ctx, g)
        if grad_mode.enabled:
            return _ops.mul(y, _ops.sub(g, _ops.sum_(_ops.mul(g, y), dim, True))), None
        y2 = _rows(yd, dim)
        if y2 is not None:
            gx = np.empty(yd.shape, yd.dtype)
            _kernels().softmax_backward(y2, np.ascontiguousarray(gd).reshape(y2.shape),
                                        gx.reshape(y2.shape))
            return _leaf(gx), None
        gx = np.multiply(gd, yd)
        dot = gx.sum(axis=dim, keepdims=True)
        np.subtract(gd, dot, out=gx)
        gx *= yd
        return _leaf(gx), None


class _LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        xd = np.asarray(x._data)
        x2 = _rows(xd, dim)
        if x2 is not None:
            k = _kernels()
            z = np.empty(xd.shape, xd.dtype)
            z2 = z.reshape(x2.shape)
            if _fused(x2, LOG_SOFTMAX_FUSED_MIN):
                k.log_softmax32(x2, z2, np.empty((1, x2.shape[1]), xd.dtype))
                return _output(ctx, z, dim)
            k.shift(x2, z2, 1.0, False)
            ez = np.exp(z)                      # (<= 0 or NaN: no overflow, nothing invalid)
            k.log_normalize(z2, ez.reshape(x2.shape))
            return _output(ctx, z, dim)
        with np.errstate(all='ignore'):        # an all -inf or a +inf row gives NaN
            z = xd - xd.max(axis=dim, keepdims=True)
            z -= np.log(np.exp(z).sum(axis=dim, keepdims=True))
        return _output(ctx, z, dim)

    @staticmethod
    def backward(ctx, g):
        y, dim, yd, gd = _saved(ctx, g)
        if grad_mode.enabled:
            return _ops.sub(g, _ops.mul(_ops.exp(y), _ops.sum_(g, dim, True))), None
        y2 = _rows(yd, dim)
        if y2 is not None and _fused(y2, LOG_SOFTMAX_FUSED_MIN):
            gx = np.empty(yd.shape, yd.dtype)
            _kernels().log_softmax_backward32(y2, np.ascontiguousarray(gd).reshape(y2.shape),
                                              gx.reshape(y2.shape))
            return _leaf(gx), None
        gx = np.exp(yd)
        if y2 is not None:
            _kernels().log_softmax_backward(np.ascontiguousarray(gd).reshape(y2.shape),
                                            gx.reshape(y2.shape))
            return _leaf(gx), None
        gx *= gd.sum(axis=dim, keepdims=True)
        np.subtract(gd, gx, out=gx)
        return _leaf(gx), None


# the nodes PyTorch's softmax and log_softmax record
_Softmax._backward_name = 'SoftmaxBackward0'
_LogSoftmax._backward_name = 'LogSoftmaxBackward0'


def softmax(a, dim):
    return _Softmax.apply(a, dim)


def log_softmax(a, dim):
    return _LogSoftmax.apply(a, dim)
