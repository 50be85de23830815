"""Scaled dot-product attention as one node (``ScaledDotProductFlashAttentionForCpuBackward0``,
the node PyTorch's CPU build records for 4-D inputs without dropout).

Written with tape ops, attention is a dozen records per call (a transpose of
k, two bmm with their reshapes, a scale, a mask, a softmax), and
``MultiheadAttention`` adds a dozen more to split the packed projection into
heads and merge them back: 0.5x PyTorch on a small Transformer layer, nearly
all of it Python per record.  Here the forward is NumPy,

    p = softmax(q @ k^T * scale + bias),   out = p @ v,

and the backward one fused pass over the saved ``p``:

    dv = p^T @ g,   dp = g @ v^T,   ds = p * (dp - sum(dp * p)),
    dq = ds @ k * scale,   dk = ds^T @ q * scale.

``bias`` is an additive mask (-inf where masked) of constants: a mask that
requires grad, dropout, float16 and ``tape.jit`` tracing take the composite
instead.  With ``safe`` a query whose every key is masked gets zero weights
(PyTorch's safe softmax, which MultiheadAttention's path computes), else NaN.
Under ``create_graph`` the backward is the same formulas in tape ops, on the
node's saved inputs, so it differentiates again to any order.  The softmax's
row-wise steps (row max, row sums, ``ds``) are the Numba kernels of
``compiler/softmax_kernels.py``, one call each over all rows of the scores.

Two entries:
- ``sdpa(q, k, v, bias, scale, safe)``: q, k, v tensors (..., L, E), as
  ``F.scaled_dot_product_attention`` takes them (a Function of three inputs);
- ``packed_self_attention(proj, ...)``: MultiheadAttention's self-attention,
  from the packed projection ``proj`` (rows of [q | k | v], (N*L, 3E) or
  (L*N, 3E)) to the heads' outputs merged back into rows (same order, (rows,
  E)), ready for the output projection: one record where the composite splits,
  transposes, attends and merges in about twenty.
"""
import numpy as np

from .. import _ops
from .. import _shapes as _sh
from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function, apply_own
from ._softmax import _fused, _kernels

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def attention_forward(q, k, v, bias, scale, safe):
    """(out, p) for arrays q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    if s.dtype in DTYPES and s.flags.c_contiguous and s.size:
        kern = _kernels()
        s2 = s.reshape(-1, s.shape[-1])
        if bias is not None:
            s *= s.dtype.type(scale)
            s += bias
            scale = 1.0
        if _fused(s2):                          # float32, rows long enough: one call
            kern.softmax32(s2, s2, float(scale), bool(safe))
            return np.matmul(s, v), s
        # s * scale - row max (shifted by 0 where a row is all -inf and safe)
        kern.shift(s2, s2, float(scale), bool(safe))
        np.exp(s, out=s)                        # (<= 0 or NaN: no overflow, nothing invalid)
        kern.normalize(s2, bool(safe))          # (that row's zeros stay zeros)
        return np.matmul(s, v), s
    s *= s.dtype.type(scale)
    if bias is not None:
        s += bias
    with np.errstate(all='ignore'):         # a row of -inf gives NaN (or zeros if safe)
        m = s.max(axis=-1, keepdims=True)
        if safe:
            full = np.isneginf(m)
            if full.any():
                m[full] = 0.0
            else:
                full = None
        s -= m
        np.exp(s, out=s)
        den = s.sum(axis=-1, keepdims=True)
        if safe and full is not None:
            den[full] = 1.0
        s /= den
    return np.matmul(s, v), s


def attention_backward(g, q, k, v, p, scale):
    """(dq, dk, dv) arrays for the output gradient ``g``."""
    dv = np.matmul(np.swapaxes(p, -1, -2), g)
    dp = np.matmul(g, np.swapaxes(v, -1, -2))
    if dp.dtype in DTYPES and dp.dtype == p.dtype and dp.flags.c_contiguous \
            and p.flags.c_contiguous and dp.size:
        ds = dp                                 # ds = p * (dp - sum(dp * p)), in place
        p2 = p.reshape(-1, p.shape[-1])
        d2 = ds.reshape(p2.shape)
        _kernels().softmax_backward(p2, d2, d2)
    else:
        ds = dp * p
        ds -= p * ds.sum(axis=-1, keepdims=True)
    sc = ds.dtype.type(scale)
    dq = np.matmul(ds, k)
    dq *= sc
    dk = np.matmul(np.swapaxes(ds, -1, -2), q)
    dk *= sc
    return dq, dk, dv


def attention_backward_tensors(g, q, k, v, bias, scale, safe):
    """The same gradients in tape ops (for create_graph): p recomputed from q, k."""
    from . import functional as F
    from .._linalg import matmul
    s = _ops.mul(matmul(q, _ops.transpose(k, -2, -1)), scale)
    if bias is not None:
        s = _ops.add(s, _leaf(bias))
    full = None
    if safe and bias is not None:
        full = np.isneginf(np.asarray(s._data)).all(-1, keepdims=True)
        if full.any():
            from .._elementwise import where
            fm = _leaf(np.ascontiguousarray(np.broadcast_to(full, s._data.shape[:-1] + (1,))))
            zero = _leaf(np.zeros((), s._data.dtype))
            p = where(fm, zero, F.softmax(where(fm, zero, s), dim=-1))
        else:
            full = None
    if full is None:
        p = F.softmax(s, dim=-1)
    dv = matmul(_ops.transpose(p, -2, -1), g)
    dp = matmul(g, _ops.transpose(v, -2, -1))
    ds = _ops.mul(p, _ops.sub(dp, _ops.sum_(_ops.mul(dp, p), -1, True)))
    dq = _ops.mul(matmul(ds, k), scale)
    dk = _ops.mul(matmul(_ops.transpose(ds, -2, -1), q), scale)
    return dq, dk, dv


class _SDPA(Function):
    """F.scaled_dot_product_attention on q, k, v (bias: an additive constant mask or None)."""
    @staticmethod
    def forward(ctx, q, k, v, bias, scale, safe):
        out, p = attention_forward(np.asarray(q._data), np.asarray(k._data),
                                   np.asarray(v._data), bias, scale, safe)
        ctx.p, ctx.bias, ctx.scale, ctx.safe = p, bias, scale, safe
        ctx.save_for_backward(q, k, v)
        return _leaf(out)

    @staticmethod
    def backward(ctx, g):
        q, k, v = ctx.saved_tensors
        if grad_mode.enabled:
            dq, dk, dv = attention_backward_tensors(g, q, k, v, ctx.bias, ctx.scale, ctx.safe)
        else:
            dq, dk, dv = (_leaf(a) for a in attention_backward(
                np.asarray(g._data, dtype=ctx.p.dtype), np.asarray(q._data),
                np.asarray(k._data), np.asarray(v._data), ctx.p, ctx.scale))
        return dq, dk, dv, None, None, None


def sdpa(q, k, v, bias, scale, safe=False):
    return _SDPA.apply(q, k, v, bias, scale, safe)


# -- MultiheadAttention's packed self-attention ------------------------------------------
def _split_axes(batch_first):
    # rows (N, L) or (L, N), each [3, H, hd] -> (3, N, H, L, hd)
    return (2, 0, 3, 1, 4) if batch_first else (2, 1, 3, 0, 4)


def _unsplit_axes(batch_first):
    return tuple(int(i) for i in np.argsort(_split_axes(batch_first)))


def _rows_shape(n, L, batch_first):
    return (n, L) if batch_first else (L, n)


class _PackedSelfAttention(Function):
    """proj (rows, 3E) -> the merged heads' attention output (rows, E)."""
    @staticmethod
    def forward(ctx, x, n, L, heads, bias, scale, safe, batch_first):
        xd = np.asarray(x._data)
        E = xd.shape[1] // 3
        hd = E // heads
        a = xd.reshape(_rows_shape(n, L, batch_first) + (3, heads, hd)) \
            .transpose(_split_axes(batch_first))
        out, p = attention_forward(a[0], a[1], a[2], bias, scale, safe)
        # (N, H, L, hd) -> rows (N, L) or (L, N) of E
        o = out.transpose((0, 2, 1, 3) if batch_first else (2, 0, 1, 3))
        ctx.p = p
        ctx.shape = (n, L, heads, hd, E, bias, scale, safe, batch_first)
        ctx.save_for_backward(x)
        return _leaf(o.reshape(xd.shape[0], E))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        n, L, heads, hd, E, bias, scale, safe, bf = ctx.shape
        if not grad_mode.enabled:
            return _leaf(_backward_array(ctx, x, np.asarray(g._data))), *(None,) * 7
        rows = _rows_shape(n, L, bf)
        a = _ops.permute(_ops.reshape(x, rows + (3, heads, hd)), *_split_axes(bf))
        q, k, v = (_ops.getitem(a, i) for i in range(3))
        gh = _ops.permute(_ops.reshape(g, rows + (heads, hd)),
                          *((0, 2, 1, 3) if bf else (1, 2, 0, 3)))
        dq, dk, dv = attention_backward_tensors(gh, q, k, v, bias, scale, safe)
        d = _ops.permute(_sh.stack([dq, dk, dv]), *_unsplit_axes(bf))
        return _ops.reshape(d, tuple(x._data.shape)), *(None,) * 7

    @staticmethod
    def _backward_array(ctx, x, g):
        return _backward_array(ctx, x, g)


def _backward_array(ctx, x, g):
    n, L, heads, hd, E, bias, scale, safe, bf = ctx.shape
    xd = np.asarray(x._data)
    p = ctx.p
    rows = _rows_shape(n, L, bf)
    a = xd.reshape(rows + (3, heads, hd)).transpose(_split_axes(bf))
    gh = np.asarray(g, dtype=p.dtype).reshape(rows + (heads, hd)) \
        .transpose((0, 2, 1, 3) if bf else (1, 2, 0, 3))
    grads = attention_backward(gh, a[0], a[1], a[2], p, scale)
    d = np.empty(rows + (3, heads, hd), p.dtype)
    dv = d.transpose(_split_axes(bf))
    for i in range(3):
        dv[i] = grads[i]
    return d.reshape(xd.shape)


_SDPA._backward_name = 'ScaledDotProductFlashAttentionForCpuBackward0'
_PackedSelfAttention._backward_name = 'ScaledDotProductFlashAttentionForCpuBackward0'


def packed_self_attention(proj, n, L, heads, bias, scale, safe, batch_first):
    return apply_own(_PackedSelfAttention, proj, n, L, heads, bias, scale, safe, batch_first)
