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
``compiler/softmax_kernels.py``, one call each over the rows of a chunk of the
scores: past ``CHUNK_BYTES`` of scores both passes go over slices of the
leading batch axis, so each slice's scores stay in cache from its product to
the next.  The weights ``p`` (kept for the backward) are written apart from
the scores, never over them.

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
from .._pool import MIN_BYTES, pool
from .._tape import grad_mode
from .._tensor import _leaf
from ..autograd.function import Function, apply_own
from ._softmax import _kernels

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# Scores per chunk of the leading batch axis: a chunk's scores, its weights and
# the products over them stay in L2 between the passes.  Over all of
# (32, 4, 64, 64) float32 at once (2 MB) each pass went to memory: 1040 us a
# forward, 890 us in chunks of 128-512 KB.
CHUNK_BYTES = 1 << 18


def _chunks(shape, nbytes):
    """Slices of the leading axis of a batch of score matrices ``shape``."""
    n = shape[0]
    step = max(1, CHUNK_BYTES * n // nbytes)
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _part(a, sl, nd):
    """``a``'s part in the chunk ``sl`` of a result of ``nd`` dims (broadcast along
    the leading axis when ``a`` has fewer dims or a leading 1)."""
    return a[sl] if a.ndim == nd and a.shape[0] != 1 else a


def _empty(shape, dt, nbytes):
    # A fresh array of megabytes costs its page faults (about as much as the
    # softmax on (32, 4, 64, 64)): the big ones come from the pool.
    return pool.empty(shape, dt) if nbytes >= MIN_BYTES else np.empty(shape, dt)


def _fast(*arrays):
    a0 = arrays[0]
    dt = a0.dtype
    if dt not in DTYPES or a0.ndim < 3:
        return False
    for a in arrays:
        if a.dtype != dt or not a.size:
            return False
    return True


def _softmax_into(s, p, bias, scale, safe, kern):
    """p = softmax(s * scale + bias) over the last axis; s is overwritten with a bias."""
    S = s.shape[-1]
    s2, p2 = s.reshape(-1, S), p.reshape(-1, S)
    if bias is not None:
        s *= s.dtype.type(scale)
        s += bias
        scale = 1.0
    # Into p, not in place: over one array the kernels' loops fail their
    # overlap checks and run scalar (softmax32 in place: 3x slower).  NumPy's
    # vectorized exp between shift and normalize beat the fused softmax32 by
    # 25-45% on these rows.  (shift gives <= 0 or NaN: nothing overflows.)
    kern.shift(s2, p2, float(scale), safe)
    np.exp(p, out=p)
    kern.normalize(p2, safe)                # (a safe all -inf row's zeros stay zeros)


def attention_forward(q, k, v, bias, scale, safe, out=None):
    """(out, p) for arrays q (..., L, E), k (..., S, E), v (..., S, Ev).

    ``out``: an array (any strides) of the output's shape and q's dtype to write
    the output into (MultiheadAttention's merged heads), or None."""
    kt = np.swapaxes(k, -1, -2)
    if not _fast(q, k, v) or (bias is not None and bias.dtype != q.dtype):
        o, p = _attention_forward_all(q, kt, v, bias, scale, safe)
        if out is None:
            return o, p
        out[...] = o
        return out, p
    batch = q.shape[:-2]
    if not batch == k.shape[:-2] == v.shape[:-2]:
        batch = np.broadcast_shapes(batch, k.shape[:-2], v.shape[:-2])
    shape = batch + (q.shape[-2], k.shape[-2])
    dt = q.dtype
    nbytes = dt.itemsize
    for d in shape:
        nbytes *= d
    kern = _kernels()
    safe = bool(safe)
    p = _empty(shape, dt, nbytes)
    if nbytes <= CHUNK_BYTES:
        _softmax_into(np.matmul(q, kt), p, bias, scale, safe, kern)
        if out is None:
            return np.matmul(p, v), p
        np.matmul(p, v, out=out)
        return out, p
    if out is None:
        out = _empty(batch + (q.shape[-2], v.shape[-1]), dt,
                     nbytes // shape[-1] * v.shape[-1])
    nd = len(shape)
    for sl in _chunks(shape, nbytes):
        pc = p[sl]
        _softmax_into(np.matmul(_part(q, sl, nd), _part(kt, sl, nd)), pc,
                      None if bias is None else _part(bias, sl, nd), scale, safe, kern)
        np.matmul(pc, _part(v, sl, nd), out=out[sl])
    return out, p


def _attention_forward_all(q, kt, v, bias, scale, safe):
    """attention_forward of any dtypes and shapes, in NumPy ops over all rows."""
    s = np.matmul(q, kt)
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


def attention_backward(g, q, k, v, p, scale, out=None):
    """(dq, dk, dv) arrays for the output gradient ``g``.

    ``out``: three arrays (any strides) of q's, k's and v's shapes and p's dtype
    to write the gradients into (the packed projection's gradient), or None."""
    bs = p.shape[:-2]
    if not (_fast(p, g, q, k, v) and p.flags.c_contiguous
            and g.shape[:-2] == q.shape[:-2] == k.shape[:-2] == v.shape[:-2] == bs):
        grads = _attention_backward_all(g, q, k, v, p, scale)
        if out is None:
            return grads
        for o, a in zip(out, grads):
            o[...] = a
        return out
    dt = p.dtype
    S = p.shape[-1]
    kern = _kernels()
    sc = dt.type(scale)
    if out is None:
        oq = ok = ov = None
    else:
        oq, ok, ov = out
    if p.nbytes <= CHUNK_BYTES:
        dv = np.matmul(np.swapaxes(p, -1, -2), g, out=ov)
        dp = np.matmul(g, np.swapaxes(v, -1, -2))
        d2 = dp.reshape(-1, S)
        kern.softmax_backward(p.reshape(-1, S), d2, d2)
        dp *= sc                            # ds * scale: one pass for dq's and dk's
        return np.matmul(dp, k, out=oq), np.matmul(np.swapaxes(dp, -1, -2), q, out=ok), dv
    dq = _empty(q.shape, dt, q.nbytes) if oq is None else oq
    dk = _empty(k.shape, dt, k.nbytes) if ok is None else ok
    dv = _empty(v.shape, dt, v.nbytes) if ov is None else ov
    for sl in _chunks(p.shape, p.nbytes):
        pc, gc = p[sl], g[sl]
        np.matmul(np.swapaxes(pc, -1, -2), gc, out=dv[sl])
        dp = np.matmul(gc, np.swapaxes(v[sl], -1, -2))
        # ds = p * (dp - sum(dp * p)) into an array of its own: written
        # over dp, the kernel's loops fail their overlap checks, run scalar.
        ds = np.empty_like(dp)
        kern.softmax_backward(pc.reshape(-1, S), dp.reshape(-1, S), ds.reshape(-1, S))
        ds *= sc
        np.matmul(ds, k[sl], out=dq[sl])
        np.matmul(np.swapaxes(ds, -1, -2), q[sl], out=dk[sl])
    return dq, dk, dv


def _attention_backward_all(g, q, k, v, p, scale):
    dv = np.matmul(np.swapaxes(p, -1, -2), g)
    dp = np.matmul(g, np.swapaxes(v, -1, -2))
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
        rows = (n, L) if batch_first else (L, n)
        a = xd.reshape(rows + (3, heads, hd)).transpose(_split_axes(batch_first))
        # the heads' outputs (N, H, L, hd) written straight into rows (N, L) or
        # (L, N) of E: the merge is the output array's strides, not a copy
        o = np.empty(rows + (heads, hd), xd.dtype)
        _, p = attention_forward(a[0], a[1], a[2], bias, scale, safe,
                                 o.transpose((0, 2, 1, 3) if batch_first else (1, 2, 0, 3)))
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
    # the gradients of q, k and v written straight into the packed rows
    d = np.empty(rows + (3, heads, hd), p.dtype)
    dv = d.transpose(_split_axes(bf))
    attention_backward(gh, a[0], a[1], a[2], p, scale, (dv[0], dv[1], dv[2]))
    return d.reshape(xd.shape)


_SDPA._backward_name = 'ScaledDotProductFlashAttentionForCpuBackward0'
_PackedSelfAttention._backward_name = 'ScaledDotProductFlashAttentionForCpuBackward0'


def packed_self_attention(proj, n, L, heads, bias, scale, safe, batch_first):
    return apply_own(_PackedSelfAttention, proj, n, L, heads, bias, scale, safe, batch_first)
