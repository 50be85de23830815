"""Convolution and pooling, as in ``torch.nn.functional``.

Every op here is built from three linear maps that are custom
``tape.autograd.Function``s computing in NumPy:

- ``_Conv``: ``y = conv(x, w)``, im2col with stride tricks and one matmul per group;
- ``_ConvInputGrad``: ``x -> conv^T(gy, w)``, col2im (a transposed convolution);
- ``_ConvWeightGrad``: ``w -> corr(x, gy)``.

All three are the partial derivatives of one bilinear form ``<conv(x, w), gy>``,
so each one's backward is written with the other two (and itself), and a
gradient of a gradient is again one of them: convolutions are differentiable to
any order.  Max pooling picks its argmax in NumPy and then is a gather
(``_PoolGather``) whose backward is a scatter-add (``_PoolScatter``) and vice
versa; average pooling is a depthwise convolution with a ones kernel divided by
PyTorch's divisor; adaptive average pooling is two small averaging matrices
applied with ``matmul``.  1-d ops are the 2-d ones over a height of 1.  A
transposed convolution is ``_ConvInputGrad`` of the convolution it transposes.  A
3-d convolution stacks the input's ``kd`` depth shifts as channels, folds the
output depth into the batch and is then one 2-d ``_Conv``; 3-d pools work the
same way (a sum of depth shifts, then a 2-d window sum; a compiled 3-d argmax
for max pooling).

>>> import tape
>>> import tape.nn.functional as F
>>> x = tape.arange(16.).reshape(1, 1, 4, 4)
>>> F.conv2d(x, tape.ones(1, 1, 2, 2), stride=2)
tensor([[[[10., 18.],
          [42., 50.]]]])
>>> F.max_pool2d(x, 2)
tensor([[[[ 5.,  7.],
          [13., 15.]]]])
"""
from collections import namedtuple as _namedtuple

import math

import numpy as np

from .._composite_nodes import node_named
from .._tape import grad_mode as _grad_mode
from .._tensor import Tensor, _leaf
from ..autograd.function import Function, apply_own, apply_own_inputs

__all__ = ['conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d',
           'conv_transpose3d', 'max_pool1d',
           'max_pool2d', 'max_pool3d', 'avg_pool1d', 'avg_pool2d', 'avg_pool3d',
           'adaptive_avg_pool1d', 'adaptive_avg_pool2d', 'adaptive_avg_pool3d']

# stride (sh, sw); pads ((top, bottom), (left, right)); dilation (dh, dw); groups
_Geom = _namedtuple('_Geom', ['stride', 'pads', 'dilation', 'groups'])


class _ZeroLink(Function):
    """``r`` returned as is, recorded as depending on ``x`` with a zero gradient.

    A gradient taken with create_graph through a pooling, or through a
    convolution with constant weights, does not depend on the input; PyTorch's
    double-backward node (``MaxPool2DWithIndicesBackwardBackward0``, ...) still
    takes the input, so the gradient requires grad and a gradient penalty on it
    runs (giving the input a zero gradient).  ``_linked`` does the same."""
    @staticmethod
    def forward(ctx, r, x, zeros):
        # zeros: a zero gradient for x (PyTorch's pools), else none (its convolution)
        ctx.x_shape = tuple(x.shape)
        ctx.x_dtype = _arr(x).dtype
        ctx.zeros = zeros
        return _leaf(_arr(r))

    @staticmethod
    def backward(ctx, g):
        return g, _leaf(np.zeros(ctx.x_shape, ctx.x_dtype)) if ctx.zeros else None, None


_LINKS = {}


def _linked(r, x, name, zeros=True):
    """``r`` (a gradient built under create_graph) tied to ``x`` as ``_ZeroLink``
    says, where x requires grad and r does not (node ``name``; with ``zeros``
    a backward gives x a zero gradient, else none, as PyTorch's node does)."""
    if r is None or r.requires_grad or not x.requires_grad or not _grad_mode.enabled:
        return r
    cls = _LINKS.get(name)
    if cls is None:
        cls = _LINKS[name] = type(name, (_ZeroLink,), {})
        cls._backward_name = name
    return cls.apply(r, x, zeros)


def _tuple(v, n, name):
    if isinstance(v, (list, tuple)):
        if len(v) == 1 and n > 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f'expected {name} to be a single integer value or a list of {n} '
                               f'values to match the convolution dimensions, but got '
                               f'{name}={list(v)}')
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _arr(t):
    return np.asarray(t._data)


def _out_len(n, pad_lo, pad_hi, k, s, d):
    return (n + pad_lo + pad_hi - d * (k - 1) - 1) // s + 1


def _windows(xp, kh, kw, oh, ow, geom, kernel_first):
    """A strided view of the padded input ``xp`` (N, C, Hp, Wp): (N, C, kh, kw, OH, OW)
    when ``kernel_first``, else (N, C, OH, OW, kh, kw).  No copy."""
    sn, sc, sh_, sw_ = xp.strides
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    kern = ((kh, kw), (sh_ * dh, sw_ * dw))
    outp = ((oh, ow), (sh_ * sh, sw_ * sw))
    first, second = (kern, outp) if kernel_first else (outp, kern)
    return np.lib.stride_tricks.as_strided(
        xp, shape=xp.shape[:2] + first[0] + second[0],
        strides=(sn, sc) + first[1] + second[1], writeable=False)


def _pad(x, pads, value=0):
    (pt, pb), (pl, pr) = pads
    if pt == pb == pl == pr == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def _im2col(x, kh, kw, geom):
    """(G, Cg*kh*kw, N*OH*OW): every group's columns side by side over the batch, so
    the convolution is one (Og, Cg*kh*kw) @ (Cg*kh*kw, N*OH*OW) product per group."""
    n, c, h, w = x.shape
    (pt, pb), (pl, pr) = geom.pads
    oh = _out_len(h, pt, pb, kh, geom.stride[0], geom.dilation[0])
    ow = _out_len(w, pl, pr, kw, geom.stride[1], geom.dilation[1])
    win = _windows(_pad(x, geom.pads), kh, kw, oh, ow, geom, kernel_first=True)
    # sizes spelled out: with an empty batch, -1 cannot be inferred from 0 elements
    cols = win.transpose(1, 2, 3, 0, 4, 5).reshape(geom.groups, c // geom.groups * kh * kw,
                                                   n * oh * ow)
    return cols, oh, ow


def _group_matmul(a, b):
    """a[g] @ b[g] for every group, one 2-d product each: NumPy's stacked matmul
    leaves BLAS for a transposed operand (100x slower here)."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.result_type(a, b))
    for g in range(a.shape[0]):
        np.matmul(a[g], b[g], out=out[g])
    return out


def _conv_np(x, w, geom):
    n = x.shape[0]
    cout, _, kh, kw = w.shape
    g = geom.groups
    cols, oh, ow = _im2col(x, kh, kw, geom)
    y = _group_matmul(w.reshape(g, cout // g, -1), cols)            # (G, Og, N*L)
    y = y.reshape(cout, n, oh, ow).transpose(1, 0, 2, 3)
    return np.ascontiguousarray(y)


def _grouped_grad(gy, g):
    """gy (N, Cout, OH, OW) as (G, Og, N*OH*OW), the layout of ``_im2col``'s columns."""
    n, cout, oh, ow = gy.shape
    return gy.transpose(1, 0, 2, 3).reshape(g, cout // g, n * oh * ow)


def _conv_input_grad_np(gy, w, geom, in_hw):
    """col2im: scatter-add every kernel position's columns back to the input."""
    g = geom.groups
    n, cout, oh, ow = gy.shape
    _, cg, kh, kw = w.shape
    h, wd = in_hw
    (pt, pb), (pl, pr) = geom.pads
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    wg = w.reshape(g, cout // g, -1).transpose(0, 2, 1)         # (G, Cg*kh*kw, Og)
    dcols = _group_matmul(wg, _grouped_grad(gy, g))                 # (G, Cg*kh*kw, N*L)
    dcols = dcols.reshape(g * cg, kh, kw, n, oh, ow)
    gxp = np.zeros((g * cg, n, h + pt + pb, wd + pl + pr), dtype=dcols.dtype)
    for i in range(kh):         # a loop over kernel positions, not over pixels
        for j in range(kw):
            gxp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += dcols[:, i, j]
    gx = gxp[:, :, pt:pt + h, pl:pl + wd].transpose(1, 0, 2, 3)
    return np.ascontiguousarray(gx)


def _conv_weight_grad_np(x, gy, geom, w_shape):
    cout, cg, kh, kw = w_shape
    cols, _, _ = _im2col(x, kh, kw, geom)
    gw = _group_matmul(_grouped_grad(gy, geom.groups), cols.transpose(0, 2, 1))
    return np.ascontiguousarray(gw.reshape(w_shape))


# -- the compiled paths (float32 and float64) ----------------------------------------------
# Columns are built by a Numba kernel that handles padding by bounds (no padded copy
# of the input), per sample, (C*kh*kw, OH*OW), so that W @ cols[b] (NumPy's stacked
# matmul, one BLAS call per sample) writes NCHW output with no transpose.  They are
# built a chunk of samples at a time into one small buffer that the product then
# reads while it is still in cache: columns of the whole batch (kh*kw times the
# input) went out to memory and back, which cost as much as the product itself
# (32x16x14x14, 3x3: 420 -> 340 us forward).  Other dtypes (float16) take the NumPy
# paths above.
_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# (re-measured with the masked flat im2col and the fused backward: 256 KB chunks and
# 1 MB kept columns beat 512 KB / 2 MB, most for 32x8x14x14, whose 1.8 MB of columns
# built at once and kept made its forward + backward 1.1 -> 0.87 ms)
_CHUNK_BYTES = 1 << 18      # a chunk's columns: well inside L2 next to the operands
_KEEP_BYTES = 1 << 20       # columns up to this size: one chunk, kept by a layer


def _common(a, b):
    """(a, b) as C-contiguous arrays of their common dtype, or None when that dtype
    has no compiled kernel."""
    dt = np.result_type(a, b)
    if dt not in _KERNEL_DTYPES:
        return None
    return np.ascontiguousarray(a, dt), np.ascontiguousarray(b, dt)


def _kernel_args(geom):
    (sh, sw), ((pt, _), (pl, _)), (dh, dw) = geom.stride, geom.pads, geom.dilation
    return sh, sw, pt, pl, dh, dw


def _out_hw(hw, k, geom):
    (pt, pb), (pl, pr) = geom.pads
    return (_out_len(hw[0], pt, pb, k[0], geom.stride[0], geom.dilation[0]),
            _out_len(hw[1], pl, pr, k[1], geom.stride[1], geom.dilation[1]))


def _is_pointwise(k, geom):
    """A 1x1 kernel with stride 1 and no padding: the columns are the input itself."""
    return k == (1, 1) and geom.stride == (1, 1) and geom.pads == ((0, 0), (0, 0))


def _is_depthwise(cg, groups):
    """One input channel per group: a direct loop beats N*G tiny BLAS products."""
    return groups > 1 and cg == 1


def _chunks(n, per_sample):
    """(step, ranges): batches of samples whose columns, ``per_sample`` bytes each,
    fill about ``_CHUNK_BYTES``; the whole batch at once when its columns fit in
    ``_KEEP_BYTES`` (they stay in cache anyway, and each chunk costs two calls)."""
    if n * per_sample <= _KEEP_BYTES:
        step = max(n, 1)
    else:
        step = max(1, min(n, _CHUNK_BYTES // max(1, per_sample)))
    return step, [(s, min(n, s + step)) for s in range(0, n, step)]


def _chunked_columns(x, kh, kw, geom, oh, ow, into=None, built=False):
    """Yield (s, e, cols): the columns (e - s, C*kh*kw, OH*OW) of samples [s, e) of
    ``x``, built a chunk at a time into one reused buffer (overwritten by the next
    chunk), or into slices of ``into`` (N, C*kh*kw, OH*OW), or, with ``built``,
    slices of ``into`` built before."""
    from compiler.conv_kernels import im2col
    n, c = x.shape[:2]
    if _is_pointwise((kh, kw), geom):
        yield 0, n, x.reshape(n, c, oh * ow)
        return
    step, ranges = _chunks(n, c * kh * kw * oh * ow * x.itemsize)
    buf = into if into is not None else np.empty((step, c * kh * kw, oh * ow), x.dtype)
    args = _kernel_args(geom)
    for s, e in ranges:
        cols = buf[:e - s] if into is None else buf[s:e]
        if not built:
            im2col(x[s:e], kh, kw, *args, oh, ow, cols, True)
        yield s, e, cols


def _conv_into(x, w, geom, y, keep=False):
    """y (N, Cout, OH*OW) = conv(x, w) for contiguous ``x`` and ``w`` (not depthwise);
    with ``keep`` returns the columns of the whole batch (None for a pointwise
    kernel, whose columns are ``x``)."""
    cout, cg, kh, kw = w.shape
    g = geom.groups
    og, cgkk, npix = cout // g, cg * kh * kw, y.shape[2]
    oh, ow = _out_hw(x.shape[2:], (kh, kw), geom)
    wg = w.reshape(g, og, cgkk)
    kept = None
    if keep and not _is_pointwise((kh, kw), geom):
        kept = np.empty((x.shape[0], x.shape[1] * kh * kw, npix), x.dtype)
    for s, e, cols in _chunked_columns(x, kh, kw, geom, oh, ow, into=kept):
        if g == 1:
            np.matmul(wg[0], cols, out=y[s:e])
        else:
            np.matmul(wg, cols.reshape(e - s, g, cgkk, npix),
                      out=y[s:e].reshape(e - s, g, og, npix))
    return kept


def _conv_fast(x, w, geom):
    n, c = x.shape[:2]
    cout, cg, kh, kw = w.shape
    oh, ow = _out_hw(x.shape[2:], (kh, kw), geom)
    y = np.empty((n, cout, oh, ow), x.dtype)
    if _is_depthwise(cg, geom.groups):
        from compiler.conv_kernels import depthwise_conv
        depthwise_conv(x, w, *_kernel_args(geom), oh, ow, y)
        return y
    _conv_into(x, w, geom, y.reshape(n, cout, oh * ow))
    return y


def _transposed_geom(geom, k, c, cout, in_hw, out_hw):
    """The geometry under which the input gradient is a convolution of gy with the
    flipped, transposed kernel, or None where col2im is the better way.  That needs
    stride 1 and padding at most the kernel's extent.  It builds the columns of gy
    (Cout*kh*kw, H*W) and multiplies with K = Cout*kh*kw, where col2im builds
    (C*kh*kw, OH*OW) with K = Cout, a product that writes its whole output from a
    rank-Cout update and then adds it back pixel by pixel: the convolution wins
    unless its columns are the larger (few input channels, as in a first layer)."""
    if geom.stride != (1, 1):
        return None
    pads = tuple((d * (kk - 1) - lo, d * (kk - 1) - hi)
                 for (lo, hi), d, kk in zip(geom.pads, geom.dilation, k))
    if min(min(p) for p in pads) < 0:
        return None
    if cout * in_hw[0] * in_hw[1] > c * out_hw[0] * out_hw[1]:
        return None
    return _Geom((1, 1), pads, geom.dilation, geom.groups)


def _flipped(w, g):
    """The kernel of the input gradient as a convolution: (C, Cout/G, kh, kw), each
    group's in and out channels swapped, the window turned by 180 degrees."""
    cout, cg, kh, kw = w.shape
    wf = w.reshape(g, cout // g, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    return np.ascontiguousarray(wf).reshape(g * cg, cout // g, kh, kw)


def _conv_input_grad_fast(gy, w, geom, in_hw):
    from compiler.conv_kernels import col2im, depthwise_input_grad
    n, cout, oh, ow = gy.shape
    _, cg, kh, kw = w.shape
    g = geom.groups
    c = g * cg
    gx = np.empty((n, c) + tuple(in_hw), gy.dtype)
    if _is_depthwise(cg, g):
        depthwise_input_grad(gy, w, *_kernel_args(geom), gx)
        return gx
    tgeom = _transposed_geom(geom, (kh, kw), c, cout, in_hw, (oh, ow))
    if tgeom is not None:
        _conv_into(gy, _flipped(w, g), tgeom, gx.reshape(n, c, in_hw[0] * in_hw[1]))
        return gx
    # (G, Cg*kh*kw, Og) made contiguous: a transposed operand would take NumPy's
    # stacked matmul off BLAS
    og, cgkk = cout // g, cg * kh * kw
    wt = np.ascontiguousarray(w.reshape(g, og, cgkk).transpose(0, 2, 1))
    g3 = gy.reshape(n, cout, oh * ow)
    if _is_pointwise((kh, kw), geom) and in_hw == (oh, ow):
        if g == 1:
            return np.matmul(wt[0], g3).reshape(gx.shape)
        return np.matmul(wt, g3.reshape(n, g, og, oh * ow)).reshape(gx.shape)
    # a chunk's columns at a time, added back while still in cache
    step, ranges = _chunks(n, c * kh * kw * oh * ow * gy.itemsize)
    buf = np.empty((step, c * kh * kw, oh * ow), gy.dtype)
    args = _kernel_args(geom)
    for s, e in ranges:
        dcols = buf[:e - s]
        if g == 1:
            np.matmul(wt[0], g3[s:e], out=dcols)
        else:
            np.matmul(wt, g3[s:e].reshape(e - s, g, og, oh * ow),
                      out=dcols.reshape(e - s, g, cgkk, oh * ow))
        col2im(dcols, kh, kw, *args, oh, ow, gx[s:e], True)
    return gx


def _conv_weight_grad_fast(x, gy, geom, w_shape, cols=None):
    """The weight gradient; ``cols``: the columns of ``x`` kept by the forward."""
    cout, cg, kh, kw = w_shape
    n = x.shape[0]
    g = geom.groups
    oh, ow = gy.shape[2:]
    if _is_depthwise(cg, g):
        from compiler.conv_kernels import depthwise_weight_grad
        gw = np.empty(w_shape, x.dtype)
        depthwise_weight_grad(x, gy, *_kernel_args(geom), gw)
        return gw
    og, cgkk, npix = cout // g, cg * kh * kw, oh * ow
    # cols[b] @ gy[b].T per sample (gy[b].T a transposed operand that BLAS reads in
    # place), summed: measured 1.7x faster than gy[b] @ cols[b].T, whose output is
    # the short side; the chunk's columns are still in cache
    gyt = gy.reshape(n, g, og, npix).transpose(0, 1, 3, 2)
    if cols is not None and g == 1:     # kept columns: one call, no chunk loop
        return np.ascontiguousarray(np.matmul(cols, gyt[:, 0]).sum(0).T).reshape(w_shape)
    acc = None
    for s, e, cols in _chunked_columns(x, kh, kw, geom, oh, ow, cols, cols is not None):
        if g == 1:     # 3-d: NumPy's 4-d stacked matmul costs more per sample
            part = np.matmul(cols, gyt[s:e, 0])[:, None]
        else:
            part = np.matmul(cols.reshape(e - s, g, cgkk, npix), gyt[s:e])
        part = part.sum(0)
        acc = part if acc is None else acc + part
    if acc is None:                 # an empty batch
        return np.zeros(w_shape, x.dtype)
    return np.ascontiguousarray(acc.transpose(0, 2, 1)).reshape(w_shape)


def _conv(x, w, geom):
    arrs = _common(x, w)
    if arrs is None:
        return _conv_np(x, w, geom)
    return _conv_fast(*arrs, geom)


def _conv_input_grad(gy, w, geom, in_hw):
    arrs = _common(gy, w)
    if arrs is None:
        return _conv_input_grad_np(gy, w, geom, in_hw)
    return _conv_input_grad_fast(*arrs, geom, tuple(in_hw))


def _conv_weight_grad(x, gy, geom, w_shape):
    arrs = _common(x, gy)
    if arrs is None:
        return _conv_weight_grad_np(x, gy, geom, w_shape)
    return _conv_weight_grad_fast(*arrs, geom, tuple(w_shape))


class _Conv(Function):
    """y = conv(x, w) (no bias: it is added with tape ops)."""
    @staticmethod
    def forward(ctx, x, w, geom):
        ctx.geom = geom
        ctx.save_for_backward(x, w)
        return _leaf(_conv(_arr(x), _arr(w), geom))

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = _linked(_ConvInputGrad.apply(gy, w, ctx.geom, tuple(x.shape[2:])), x,
                         'ConvolutionBackwardBackward0', zeros=False)
        if ctx.needs_input_grad[1]:
            gw = _ConvWeightGrad.apply(x, gy, ctx.geom, tuple(w.shape))
        return gx, gw, None


class _ConvInputGrad(Function):
    """gx = conv^T(gy, w), the transposed convolution; linear in gy and in w."""
    @staticmethod
    def forward(ctx, gy, w, geom, in_hw):
        ctx.geom = geom
        ctx.save_for_backward(gy, w)
        return _leaf(_conv_input_grad(_arr(gy), _arr(w), geom, in_hw))

    @staticmethod
    def backward(ctx, ggx):
        # <conv^T(gy, w), ggx> = <gy, conv(ggx, w)>
        gy, w = ctx.saved_tensors
        dgy = dw = None
        if ctx.needs_input_grad[0]:
            dgy = _Conv.apply(ggx, w, ctx.geom)
        if ctx.needs_input_grad[1]:
            dw = _ConvWeightGrad.apply(ggx, gy, ctx.geom, tuple(w.shape))
        return dgy, dw, None, None


class _ConvWeightGrad(Function):
    """gw = corr(x, gy); linear in x and in gy."""
    @staticmethod
    def forward(ctx, x, gy, geom, w_shape):
        ctx.geom = geom
        ctx.save_for_backward(x, gy)
        return _leaf(_conv_weight_grad(_arr(x), _arr(gy), geom, w_shape))

    @staticmethod
    def backward(ctx, ggw):
        # <corr(x, gy), ggw> = <conv(x, ggw), gy> = <x, conv^T(gy, ggw)>
        x, gy = ctx.saved_tensors
        dx = dgy = None
        if ctx.needs_input_grad[0]:
            dx = _ConvInputGrad.apply(gy, ggw, ctx.geom, tuple(x.shape[2:]))
        if ctx.needs_input_grad[1]:
            dgy = _Conv.apply(x, ggw, ctx.geom)
        return dx, dgy, None, None


# -- a conv2d layer as one record -----------------------------------------------------------
# For the common layer (groups 1, float32/64, a batch): the convolution of the
# compiled paths above with the bias added in place, and a backward that gives all
# three gradients from one call.  The forward's columns are kept for the weight
# gradient while they are small; larger ones the weight gradient builds again, a
# chunk at a time: kept columns have to go out to memory and back, which measured
# slower than building them twice in cache (32x16x14x14, 3x3, 3.6 MB of columns:
# forward + backward 1.7 -> 1.5 ms), while for small ones (and strided ones, whose
# columns are slow to build) keeping them is the faster way.
def _layer_fast_ok(x, w, groups):
    return (groups == 1 and x.shape[0] > 0 and x.dtype in _KERNEL_DTYPES
            and w.dtype == x.dtype)


def _conv_layer_forward(x, w, b, geom, keep=False):
    """(y, cols): y = conv(x, w) + b as (N, Cout, OH, OW); cols the columns
    (N, C*kh*kw, OH*OW) when ``keep`` and they have at most ``_KEEP_BYTES``, else
    None."""
    n, c = x.shape[:2]
    cout, _, kh, kw = w.shape
    oh, ow = _out_hw(x.shape[2:], (kh, kw), geom)
    y = np.empty((n, cout, oh * ow), x.dtype)
    keep = keep and n * c * kh * kw * oh * ow * x.itemsize <= _KEEP_BYTES
    cols = _conv_into(np.ascontiguousarray(x), np.ascontiguousarray(w), geom, y, keep)
    if b is not None:
        y += np.asarray(b, x.dtype).reshape(cout, 1)
    return y.reshape(n, cout, oh, ow), cols


def _layer_tgeom(x_shape, w_shape, geom):
    """``_transposed_geom`` of a groups-1 layer: where not None, the input gradient is
    a convolution of gy whose columns also give the weight gradient."""
    cout, c, kh, kw = w_shape
    in_hw = tuple(x_shape[2:])
    return _transposed_geom(geom, (kh, kw), c, cout, in_hw, _out_hw(in_hw, (kh, kw), geom))


def _both_grads_fast(x, gy, w, tgeom, need_w):
    """(gx, gw) of a groups-1 convolution from one set of columns: those of gy under
    the transposed geometry ``tgeom``, (N, Cout*kh*kw, H*W), row (o, i', j') of sample
    b at input pixel P holding gy[b, o] at P - (kh-1-i', kw-1-j') (dilated, shifted by
    the padding), which is what both need: gx = flip(w) @ cols and
    gw[o, c, i, j] = sum_b,P x[b, c, P] cols[b, (o, kh-1-i, kw-1-j), P].  Building the
    columns once (not those of gy and of x) saves an im2col pass over the batch."""
    n, c, h, wd = x.shape
    cout, _, kh, kw = w.shape
    gx = np.empty((n, c, h * wd), gy.dtype)
    wf = _flipped(w, 1).reshape(c, cout * kh * kw)
    xt = x.reshape(n, c, h * wd).transpose(0, 2, 1)
    acc = None
    for s, e, cols in _chunked_columns(gy, kh, kw, tgeom, h, wd):
        np.matmul(wf, cols, out=gx[s:e])
        if need_w:
            part = np.matmul(cols, xt[s:e]).sum(0)             # (Cout*kh*kw, C)
            if acc is None:
                acc = part
            else:
                acc += part
    gw = None
    if need_w:
        gw = acc.reshape(cout, kh, kw, c)[:, ::-1, ::-1].transpose(0, 3, 1, 2)
        gw = np.ascontiguousarray(gw)
    return gx.reshape(n, c, h, wd), gw


def _conv_layer_backward(ctx, g):
    """The (gx, gw, gb) arrays of ``_Conv2d`` from the output's gradient ``g``."""
    x, w = ctx.saved_tensors        # (raises once freed, or changed in place)
    xd, wd = np.ascontiguousarray(_arr(x)), np.ascontiguousarray(_arr(w))
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    geom = ctx.geom
    g = np.ascontiguousarray(g, xd.dtype)
    gx = gw = gb = None
    if need_b:
        gb = g.sum((0, 2, 3))
    tgeom = _layer_tgeom(xd.shape, wd.shape, geom) if need_x else None
    if tgeom is not None:
        gx, gw = _both_grads_fast(xd, g, wd, tgeom, need_w)
    else:
        if need_w:
            gw = _conv_weight_grad_fast(xd, g, geom, wd.shape, ctx.cols)
        if need_x:
            gx = _conv_input_grad_fast(g, wd, geom, tuple(xd.shape[2:]))
    ctx.cols = None
    return gx, gw, gb


class _Conv2d(Function):
    """y = conv(x, w) + b (b may be None) for a groups-1 float32/64 convolution, one
    record made by ``apply_own_inputs``: the compiled sweep takes
    ``_backward_arrays``; under ``create_graph`` ``backward`` writes the gradients
    with ``_ConvInputGrad``, ``_ConvWeightGrad`` and a sum, differentiable again."""
    @staticmethod
    def forward(ctx, x, w, b, geom):
        ctx.geom = geom
        ctx.save_for_backward(x, w)
        need_x, need_w = ctx.needs_input_grad[:2]
        # no columns kept where the backward builds gy's, which give both gradients
        keep = need_w and not (need_x and _layer_tgeom(x.shape, w.shape, geom) is not None)
        y, ctx.cols = _conv_layer_forward(_arr(x), _arr(w), None if b is None else _arr(b),
                                          geom, keep=keep)
        return _leaf(y)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = _linked(_ConvInputGrad.apply(gy, w, ctx.geom, tuple(x.shape[2:])), x,
                         'ConvolutionBackwardBackward0', zeros=False)
        if ctx.needs_input_grad[1]:
            gw = _ConvWeightGrad.apply(x, gy, ctx.geom, tuple(w.shape))
        if ctx.needs_input_grad[2]:
            gb = gy.sum((0, 2, 3))
        return gx, gw, gb, None

    @staticmethod
    def _backward_arrays(ctx, g):
        return _conv_layer_backward(ctx, g)


# PyTorch's nodes for a convolution's gradients (one node there, for both)
_ConvInputGrad._backward_name = _ConvWeightGrad._backward_name = 'ConvolutionBackwardBackward0'
# PyTorch's node for a convolution
_Conv2d._backward_name = 'ConvolutionBackward0'
_Conv2d._node_inputs = 3      # input, weight, bias (None where absent), as PyTorch's node


# -- argument handling ---------------------------------------------------------------------
def _check_tensor(t, name, opname):
    if not isinstance(t, Tensor):
        raise TypeError(f'{opname}(): argument \'{name}\' must be Tensor, not '
                        f'{type(t).__name__}')
    if _arr(t).dtype.kind != 'f':
        raise RuntimeError(f'{opname}: expected a floating point {name}, got {_arr(t).dtype}')


def _batched(x, spatial, opname):
    """(x with a batch dim, whether one was added): PyTorch takes unbatched inputs too."""
    nd = x.dim()
    if nd == spatial + 1:
        return x.unsqueeze(0), True
    if nd == spatial + 2:
        return x, False
    raise RuntimeError(f'{opname}: Expected {spatial + 1}D (unbatched) or {spatial + 2}D '
                       f'(batched) input, but got input of size: {list(x.shape)}')


def _conv_pads(padding, k, d, n, opname, stride):
    """((lo, hi), ...) per spatial dim from an int, a tuple, 'same' or 'valid'."""
    if isinstance(padding, str):
        if padding == 'valid':
            return tuple((0, 0) for _ in range(n))
        if padding == 'same':
            if any(s != 1 for s in stride):
                # (the nn.Conv2d constructor raises ValueError, as PyTorch's does)
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            # PyTorch puts the odd pixel of an even total on the high side
            return tuple((d[i] * (k[i] - 1) // 2, d[i] * (k[i] - 1) - d[i] * (k[i] - 1) // 2)
                         for i in range(n))
        raise RuntimeError(f"Invalid padding string '{padding}', should be one of "
                           "{'valid', 'same'}")
    p = _tuple(padding, n, 'padding')
    if any(v < 0 for v in p):
        raise RuntimeError(f'{opname}: negative padding is not supported')
    return tuple((v, v) for v in p)


def _check_weight(x, weight, bias, spatial, opname):
    """PyTorch's errors for a weight of the wrong rank, or operands of mixed dtypes."""
    if weight.dim() != spatial + 2:
        raise RuntimeError(f'{opname}: Expected {spatial + 2}-dimensional weight for '
                           f'{spatial + 2}-dimensional input {list(x.shape)}, but got '
                           f'{weight.dim()}-dimensional weight of size {list(weight.shape)}')
    if x.dtype != weight.dtype or (bias is not None and bias.dtype != x.dtype):
        raise RuntimeError(f'{opname}: expected input, weight and bias to have the same dtype, '
                           f'but got input {x.dtype}, weight {weight.dtype}'
                           + ('' if bias is None else f', bias {bias.dtype}'))


def _convnd(input, weight, bias, stride, padding, dilation, groups, spatial):  # noqa: A002
    opname = f'conv{spatial}d'
    _check_tensor(input, 'input', opname)
    _check_tensor(weight, 'weight', opname)
    x, unbatched = _batched(input, spatial, opname)
    _check_weight(x, weight, bias, spatial, opname)
    groups = int(groups)
    cin, cout, cg = x.shape[1], weight.shape[0], weight.shape[1]
    if groups <= 0:
        raise RuntimeError('non-positive groups is not supported')
    if cout % groups:
        raise RuntimeError(f'Given groups={groups}, expected weight to be divisible by {groups} '
                           f'at dimension 0, but got weight of size {list(weight.shape)} instead')
    if cg * groups != cin:
        raise RuntimeError(f'Given groups={groups}, weight of size {list(weight.shape)}, '
                           f'expected input{list(x.shape)} to have {cg * groups} channels, but '
                           f'got {cin} channels instead')
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(f'Given weight of size {list(weight.shape)}, expected bias to be '
                           f'1-dimensional with {cout} elements, but got bias of size '
                           f'{list(bias.shape)} instead')
    s = _tuple(stride, spatial, 'stride')
    d = _tuple(dilation, spatial, 'dilation')
    if any(v <= 0 for v in s):
        raise RuntimeError(f'{opname}: non-positive stride is not supported')
    if any(v <= 0 for v in d):
        raise RuntimeError(f'{opname}: dilation should be greater than zero')
    k = tuple(weight.shape[2:])
    pads = _conv_pads(padding, k, d, spatial, opname, s)
    for i in range(spatial):
        eff = x.shape[2 + i] + pads[i][0] + pads[i][1]
        if eff < d[i] * (k[i] - 1) + 1:
            raise RuntimeError(
                f'{opname}: Calculated padded input size per channel: {eff}. Kernel size: '
                f'{d[i] * (k[i] - 1) + 1}. Kernel size can\'t be greater than actual input size')
    if spatial == 1:            # the 2-d op over a height of 1
        geom = _Geom((1, s[0]), ((0, 0), pads[0]), (1, d[0]), groups)
        y = _Conv.apply(x.unsqueeze(2), weight.unsqueeze(2), geom).squeeze(2)
    elif spatial == 3:
        y = _conv3d(x, weight, s, pads, d, groups)
    else:
        geom = _Geom(s, pads, d, groups)
        if _layer_fast_ok(_arr(x), _arr(weight), groups):
            y = apply_own_inputs(_Conv2d, (x, weight, bias), geom)
            return y.squeeze(0) if unbatched else y
        y = _Conv.apply(x, weight, geom)
    if bias is not None:
        y = y + bias.reshape((1, cout) + (1,) * spatial)
    return y.squeeze(0) if unbatched else y


def _batched_conv(spatial):
    """ConvolutionBackward0 names a batched convolution's result (an unbatched
    one's is PyTorch's SqueezeBackward1 of it)."""
    def name(input, weight, bias):  # noqa: A002
        return 'ConvolutionBackward0' if np.ndim(getattr(input, '_data', input)) == spatial + 2 \
            else None
    return name


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-d cross-correlation over (N, C, H, W) (or unbatched (C, H, W)) input with weight
    (out_channels, in_channels/groups, kH, kW); ``padding`` is an int, a pair, ``'valid'``
    or ``'same'``.

    >>> import tape, tape.nn.functional as F
    >>> F.conv2d(tape.ones(1, 1, 3, 3), tape.ones(1, 1, 2, 2), padding='same').shape
    tape.Size([1, 1, 3, 3])
    """
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 2)


@node_named(_batched_conv(1), 'input', 'weight', 'bias')
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-d cross-correlation over (N, C, L) (or unbatched (C, L)) input with weight
    (out_channels, in_channels/groups, kL).

    >>> import tape, tape.nn.functional as F
    >>> F.conv1d(tape.ones(1, 1, 5), tape.ones(1, 1, 3))
    tensor([[[3., 3., 3.]]])
    """
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1)


@node_named(_batched_conv(3), 'input', 'weight', 'bias')
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """3-d cross-correlation over (N, C, D, H, W) (or unbatched (C, D, H, W)) input with
    weight (out_channels, in_channels/groups, kD, kH, kW).

    >>> import tape, tape.nn.functional as F
    >>> F.conv3d(tape.ones(1, 1, 3, 3, 3), tape.ones(1, 1, 2, 2, 2)).shape
    tape.Size([1, 1, 2, 2, 2])
    """
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3)


def _depth_shifts(x, k, s, d, out):
    """The ``k`` depth shifts of ``x`` (N, C, D, ...) that kernel depth i reads:
    each (N, C, out, ...), ``x[:, :, i*d : i*d + s*(out-1) + 1 : s]``."""
    return [x[:, :, i * d:i * d + s * (out - 1) + 1:s] for i in range(k)]


def _conv3d(x, weight, s, pads, d, groups):
    """conv3d as one 2-d ``_Conv``: the kernel's depth shifts of the (depth-padded)
    input become channels (channel c*kD + i holds shift i of channel c, so groups stay
    contiguous and match ``weight.reshape(Cout, Cg*kD, kH, kW)``) and the output depth
    is folded into the batch.  Built of tape ops around ``_Conv``: every derivative
    is the 2-d convolution's."""
    from . import functional as F
    n, c = x.shape[:2]
    cout, cg, kd, kh, kw = weight.shape
    (dlo, dhi) = pads[0]
    if dlo or dhi:
        x = F.pad(x, (0, 0, 0, 0, dlo, dhi))
    depth = x.shape[2]
    od = _out_len(depth, 0, 0, kd, s[0], d[0])
    h, w = x.shape[3:]
    shifts = _depth_shifts(x, kd, s[0], d[0], od)               # kD x (N, C, OD, H, W)
    if kd == 1:
        xs = shifts[0].permute(0, 2, 1, 3, 4)
    else:
        from .. import stack
        xs = stack(shifts, 3).permute(0, 2, 1, 3, 4, 5)          # (N, OD, C, kD, H, W)
    xs = xs.reshape(n * od, c * kd, h, w)
    geom = _Geom(s[1:], pads[1:], d[1:], groups)
    y = _Conv.apply(xs, weight.reshape(cout, cg * kd, kh, kw), geom)
    oh, ow = y.shape[2:]
    return y.reshape(n, od, cout, oh, ow).permute(0, 2, 1, 3, 4)


def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,  # noqa: A002
                      dilation, spatial):
    opname = f'conv_transpose{spatial}d'
    _check_tensor(input, 'input', opname)
    _check_tensor(weight, 'weight', opname)
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f'Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) '
                           f'input to {opname}, but got input of size: {list(input.shape)}')
    x, unbatched = _batched(input, spatial, opname)
    _check_weight(x, weight, bias, spatial, opname)
    if isinstance(padding, str):
        raise TypeError(f"{opname}(): argument 'padding' must be tuple of ints, not str")
    groups = int(groups)
    cin, wcin, og = x.shape[1], weight.shape[0], weight.shape[1]
    if groups <= 0:
        raise RuntimeError('non-positive groups is not supported')
    if wcin % groups:
        raise RuntimeError(f'Given groups={groups}, expected weight to be divisible by {groups} '
                           f'at dimension 0, but got weight of size {list(weight.shape)} instead')
    if wcin != cin:
        raise RuntimeError(f'Given transposed=1, weight of size {list(weight.shape)}, expected '
                           f'input{list(x.shape)} to have {wcin} channels, but got {cin} '
                           f'channels instead')
    cout = og * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(f'Given transposed=1, weight of size {list(weight.shape)}, expected '
                           f'bias to be 1-dimensional with {cout} elements, but got bias of '
                           f'size {list(bias.shape)} instead')
    s = _tuple(stride, spatial, 'stride')
    p = _tuple(padding, spatial, 'padding')
    op = _tuple(output_padding, spatial, 'output_padding')
    d = _tuple(dilation, spatial, 'dilation')
    if any(v <= 0 for v in s):
        raise RuntimeError('non-positive stride is not supported')
    if any(v <= 0 for v in d):
        raise RuntimeError(f'dilation should be greater than zero, but got {list(d)}')
    if any(v < 0 for v in p):
        raise RuntimeError('negative padding is not supported')
    if any(v < 0 for v in op):
        raise RuntimeError('negative output_padding is not supported')
    if any(op[i] >= s[i] and op[i] >= d[i] for i in range(spatial)):
        raise RuntimeError(f'output padding must be smaller than either stride or dilation, but '
                           f'got output_padding={list(op)}, stride={list(s)}, '
                           f'dilation={list(d)}')
    k = tuple(weight.shape[2:])
    in_sz = tuple(x.shape[2:])
    out = tuple((in_sz[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1
                for i in range(spatial))
    if any(v < 1 for v in out):
        raise RuntimeError(f'Given input size per channel: ({" x ".join(map(str, in_sz))}). '
                           f'Calculated output size per channel: '
                           f'({" x ".join(map(str, out))}). Output size is too small')
    # The transposed op is the input gradient of the convolution from `out` to `in_sz`
    # with padding p below and hi above, hi chosen so that this convolution's output
    # has exactly in_sz positions: hi in [p - op, p - op + s).  When even the top of
    # that range is negative (output_padding >= stride, allowed when dilation >
    # output_padding), the last -hi output positions receive nothing: the op runs to
    # `out + hi` and zeros are appended.
    pads, sizes, extra = [], [], []
    for i in range(spatial):
        hi = p[i] - op[i] + s[i] - 1
        extra.append(max(-hi, 0))
        pads.append((p[i], max(hi, 0)))
        sizes.append(out[i] - extra[-1])
    if spatial == 1:
        geom = _Geom((1, s[0]), ((0, 0), pads[0]), (1, d[0]), groups)
        y = _ConvInputGrad.apply(x.unsqueeze(2), weight.unsqueeze(2), geom,
                                 (1, sizes[0])).squeeze(2)
    elif spatial == 3:
        geom = _Geom(s[1:], tuple(pads[1:]), d[1:], groups)
        y = _conv_transpose3d(x, weight, geom, tuple(sizes[1:]), s[0], p[0], d[0], out[0])
        extra[0] = 0
    else:
        geom = _Geom(s, tuple(pads), d, groups)
        y = _ConvInputGrad.apply(x, weight, geom, tuple(sizes))
    if any(extra):
        from . import functional as F
        y = F.pad(y, [v for e in reversed(extra) for v in (0, e)])
    if bias is not None:
        y = y + bias.reshape((1, cout) + (1,) * spatial)
    return y.squeeze(0) if unbatched else y


@node_named(_batched_conv(2), 'input', 'weight', 'bias')
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """The transposed 2-d convolution ("deconvolution") of (N, C_in, H, W) (or unbatched)
    input with weight (in_channels, out_channels/groups, kH, kW): the gradient of
    ``conv2d`` with respect to its input.  The output is
    ``(H - 1)*stride - 2*padding + dilation*(kH - 1) + output_padding + 1`` high.

    >>> import tape, tape.nn.functional as F
    >>> F.conv_transpose2d(tape.ones(1, 1, 2, 2), tape.ones(1, 1, 2, 2), stride=2)
    tensor([[[[1., 1., 1., 1.],
              [1., 1., 1., 1.],
              [1., 1., 1., 1.],
              [1., 1., 1., 1.]]]])
    """
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2)


@node_named(_batched_conv(1), 'input', 'weight', 'bias')
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """The transposed 1-d convolution of (N, C_in, L) (or unbatched (C_in, L)) input with
    weight (in_channels, out_channels/groups, kL).

    >>> import tape, tape.nn.functional as F
    >>> F.conv_transpose1d(tape.tensor([[[1., 2.]]]), tape.ones(1, 1, 3))
    tensor([[[1., 3., 3., 2.]]])
    """
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1)


@node_named(_batched_conv(3), 'input', 'weight', 'bias')
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """The transposed 3-d convolution of (N, C_in, D, H, W) (or unbatched) input with
    weight (in_channels, out_channels/groups, kD, kH, kW): the gradient of ``conv3d``
    with respect to its input.

    >>> import tape, tape.nn.functional as F
    >>> F.conv_transpose3d(tape.ones(1, 1, 2, 2, 2), tape.ones(1, 1, 2, 2, 2), stride=2).shape
    tape.Size([1, 1, 4, 4, 4])
    """
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3)


def _conv_transpose3d(x, weight, geom, hw_sizes, s, p, d, out):
    """conv_transpose3d as one 2-d ``_ConvInputGrad`` (the transpose of ``_conv3d``):
    the input depth is folded into the batch and the kernel depth into the output
    channels (channel (g*og + o)*kD + i of ``weight.reshape(Cin, og*kD, kH, kW)``), then
    each kernel depth i's slab is spread with stride ``s`` and shifted by ``i*d - p`` into
    the ``out`` output depths and the slabs summed.  Built of tape ops around
    ``_ConvInputGrad``: every derivative is the 2-d convolution's."""
    from . import functional as F
    n, cin, depth, h, w = x.shape
    _, og, kd, kh, kw = weight.shape
    groups = geom.groups
    xs = x.permute(0, 2, 1, 3, 4).reshape(n * depth, cin, h, w)
    z = _ConvInputGrad.apply(xs, weight.reshape(cin, og * kd, kh, kw), geom, hw_sizes)
    oh, ow = z.shape[2:]
    cout = og * groups
    # (N*D, G*og*kD, OH, OW) -> (N, Cout, kD, D, OH, OW)
    z = z.reshape(n, depth, cout, kd, oh, ow).permute(0, 2, 3, 1, 4, 5)
    if s > 1:                   # zeros between the input depths
        z = F.pad(z.unsqueeze(4), (0, 0, 0, 0, 0, s - 1))
        z = z.reshape(n, cout, kd, depth * s, oh, ow)[:, :, :, :(depth - 1) * s + 1]
    span = (depth - 1) * s + 1
    y = None
    for i in range(kd):
        lo = i * d - p                  # output depth of the slab's first row
        a, b = max(0, -lo), min(span, out - lo)     # the rows that land in the output
        if a >= b:
            continue
        part = F.pad(z[:, :, i, a:b], (0, 0, 0, 0, lo + a, out - lo - b))
        y = part if y is None else y + part
    if y is None:               # (no kernel depth reaches the output)
        y = F.pad(z[:, :, 0, :0], (0, 0, 0, 0, 0, out))
    return y


# -- pooling -------------------------------------------------------------------------------
def _pool_len(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: with ceil_mode the last window must start
    inside the input or its left padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_args(kernel_size, stride, padding, dilation, spatial, opname):
    k = _tuple(kernel_size, spatial, 'kernel_size')
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) \
        else _tuple(stride, spatial, 'stride')
    p = _tuple(padding, spatial, 'padding')
    d = _tuple(dilation, spatial, 'dilation')
    if any(v <= 0 for v in k):
        raise RuntimeError(f'{opname}: kernel_size must be greater than zero, but got '
                           f'{list(k)}')
    if any(v <= 0 for v in s):
        raise RuntimeError(f'{opname}: stride must be greater than zero, but got {list(s)}')
    if any(v <= 0 for v in d):
        raise RuntimeError(f'{opname}: dilation must be greater than zero, but got {list(d)}')
    if any(v < 0 for v in p):
        raise RuntimeError(f'{opname}: pad must be non-negative, but got {list(p)}')
    return k, s, p, d


def _pool_geom(x, k, s, p, d, ceil_mode, opname):
    """Output size and the 2-d geometry with the high-side padding ceil_mode needs."""
    outs, pads = [], []
    for i in range(2):
        n = x.shape[2 + i]
        o = _pool_len(n, k[i], s[i], p[i], d[i], ceil_mode)
        if o <= 0:
            raise RuntimeError(f'{opname}: Given input size: ({"x".join(map(str, x.shape[1:]))}'
                               f'). Calculated output size is too small')
        need = (o - 1) * s[i] + d[i] * (k[i] - 1) + 1
        pads.append((p[i], max(need - n - p[i], 0)))
        outs.append(o)
    return tuple(outs), _Geom(s, tuple(pads), d, 1)


def _pool_sizes(x, k, s, p, d, ceil_mode, opname):
    """``_pool_geom`` for any number of spatial dims: the output sizes and per dim the
    (low, high) padding, the high side what ceil_mode needs."""
    outs, pads = [], []
    for i in range(len(k)):
        n = x.shape[2 + i]
        o = _pool_len(n, k[i], s[i], p[i], d[i], ceil_mode)
        if o <= 0:
            raise RuntimeError(f'{opname}: Given input size: ({"x".join(map(str, x.shape[1:]))}'
                               f'). Calculated output size is too small')
        need = (o - 1) * s[i] + d[i] * (k[i] - 1) + 1
        pads.append((p[i], max(need - n - p[i], 0)))
        outs.append(o)
    return tuple(outs), tuple(pads)


class _PoolGather(Function):
    """out[n, c, o] = x[n, c, idx[n, c, o]] over the flattened spatial dims."""
    @staticmethod
    def forward(ctx, x, idx):
        ctx.idx = idx
        ctx.in_shape = tuple(x.shape)
        xd = _arr(x)
        # sizes spelled out: with an empty batch, -1 cannot be inferred from 0 elements
        flat = xd.reshape(xd.shape[:2] + (int(math.prod(xd.shape[2:])),))
        out = np.take_along_axis(flat, idx.reshape(idx.shape[:2] + (int(math.prod(idx.shape[2:])),)),
                                 axis=2)
        return _leaf(out.reshape(idx.shape))

    @staticmethod
    def backward(ctx, g):
        return _PoolScatter.apply(g, ctx.idx, ctx.in_shape), None


class _PoolScatter(Function):
    """The adjoint of ``_PoolGather``: add g[n, c, o] into position idx[n, c, o]."""
    @staticmethod
    def forward(ctx, g, idx, in_shape):
        ctx.idx = idx
        gd = _arr(g)
        n, c = in_shape[:2]
        hw = int(math.prod(in_shape[2:]))
        if gd.dtype in _KERNEL_DTYPES:
            from compiler.conv_kernels import pool_scatter
            out = np.empty((n, c, hw), gd.dtype)
            m = int(math.prod(idx.shape[2:]))
            pool_scatter(np.ascontiguousarray(gd).reshape(n, c, m),
                         np.ascontiguousarray(idx).reshape(n, c, m), out)
            return _leaf(out.reshape(in_shape))
        # overlapping windows may pick one input twice: bincount adds, fancy
        # assignment would not
        offsets = (np.arange(n * c, dtype=np.int64) * hw).reshape(n, c, *(1,) * (idx.ndim - 2))
        out = np.bincount((idx + offsets).ravel(), weights=gd.ravel(), minlength=n * c * hw)
        return _leaf(out.astype(gd.dtype, copy=False).reshape(in_shape))

    @staticmethod
    def backward(ctx, gg):
        return _PoolGather.apply(gg, ctx.idx), None, None


class _MaxPool(Function):
    """out = x at ``idx`` (the compiled kernel's maxima, passed in as ``out``): the
    gather ``_PoolGather`` computes, without computing it again, recorded by
    ``apply_own``; its backward is the same scatter."""
    @staticmethod
    def forward(ctx, x, idx, out):
        ctx.idx = idx
        ctx.save_for_backward(x)        # (as PyTorch: changing x in place then raises)
        return _leaf(out)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return _linked(_PoolScatter.apply(g, ctx.idx, tuple(x.shape)), x,
                       'MaxPool2DWithIndicesBackwardBackward0'), None, None

    @staticmethod
    def _backward_array(ctx, x, g):
        from compiler.conv_kernels import pool_scatter
        idx = ctx.idx
        n, c = idx.shape[:2]
        m = int(math.prod(idx.shape[2:]))
        out = np.empty(x.shape, x._data.dtype)
        pool_scatter(np.ascontiguousarray(g, out.dtype).reshape(n, c, m), idx.reshape(n, c, m),
                     out.reshape(n, c, int(math.prod(x.shape[2:]))))
        return out


# PyTorch's node for max_pool2d
_MaxPool._backward_name = 'MaxPool2DWithIndicesBackward0'


def _max_pool_compiled(xd, k, geom, oh, ow):
    """(maxima, indices) of ``_max_pool_indices`` from the compiled kernels (float32/64)."""
    from compiler.conv_kernels import max_pool, max_pool_2x2, max_pool_unpadded
    n, c = xd.shape[:2]
    kh, kw = k
    (pt, _), (pl, _) = geom.pads
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    xd = np.ascontiguousarray(xd)
    out = np.empty((n, c, oh, ow), xd.dtype)
    idx = np.empty((n, c, oh, ow), np.int64)
    if geom.pads == ((0, 0), (0, 0)) and geom.dilation == (1, 1):
        if (kh, kw, sh, sw) == (2, 2, 2, 2):
            max_pool_2x2(xd, oh, ow, out, idx)
        else:
            max_pool_unpadded(xd, kh, kw, sh, sw, oh, ow, out, idx)
    else:
        max_pool(xd, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, out, idx)
    return out, idx


def _max_pool_indices(xd, k, geom, oh, ow):
    """Per output pixel, the flat (h * W + w) index of its window's maximum: the first
    maximum, as PyTorch; a NaN wins (the last NaN, as PyTorch's ``val > max || isnan``
    scan); padding never wins."""
    n, c, h, w = xd.shape
    kh, kw = k
    (pt, _), (pl, _) = geom.pads
    (sh, sw), (dh, dw) = geom.stride, geom.dilation
    if xd.dtype in _KERNEL_DTYPES:
        return _max_pool_compiled(xd, k, geom, oh, ow)[1]
    win = _windows(_pad(xd, geom.pads, -np.inf), kh, kw, oh, ow, geom, kernel_first=False)
    win = win.reshape(n, c, oh, ow, kh * kw)
    arg = np.argmax(win, axis=-1)
    rows = (np.arange(oh) * sh - pt)[:, None] + (np.arange(kh) * dh)[None, :]   # (OH, kh)
    cols = (np.arange(ow) * sw - pl)[:, None] + (np.arange(kw) * dw)[None, :]   # (OW, kw)
    inside = (((rows >= 0) & (rows < h))[:, None, :, None]
              & ((cols >= 0) & (cols < w))[None, :, None, :]).reshape(oh, ow, kh * kw)
    picked = np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
    if np.isnan(picked).any():
        nan = np.isnan(win)
        last = kh * kw - 1 - np.argmax(nan[..., ::-1], axis=-1)
        arg = np.where(nan.any(-1), last, arg)
    stuck = picked == -np.inf
    if stuck.any():
        # all -inf: PyTorch keeps its starting index, the window's first real pixel
        arg = np.where(stuck, np.argmax(inside, axis=-1), arg)
    ki, kj = np.divmod(arg, kw)
    hi = rows[np.arange(oh)[:, None], ki]               # broadcast over (N, C, OH, OW)
    wi = cols[np.arange(ow)[None, :], kj]
    return (hi * w + wi).astype(np.int64)


def _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,  # noqa: A002
                return_indices, spatial):
    opname = f'max_pool{spatial}d'
    _check_tensor(input, 'input', opname)
    x, unbatched = _batched(input, spatial, opname)
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation, spatial, opname)
    for i in range(spatial):
        if p[i] > k[i] // 2:     # (PyTorch bounds it by the undilated kernel)
            raise RuntimeError(f'{opname}: pad should be smaller than or equal to half of '
                               f'kernel size, but got pad={p[i]} and kernel_size={k[i]}')
    if spatial == 1:
        x = x.unsqueeze(2)
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
    if spatial == 3:
        idx = _max_pool3d_indices(x, k, s, p, d, ceil_mode, opname)
    else:
        (oh, ow), geom = _pool_geom(x, k, s, p, d, ceil_mode, opname)
        xd = _arr(x)
        if xd.dtype in _KERNEL_DTYPES:
            out, idx = _max_pool_compiled(xd, k, geom, oh, ow)
            out = apply_own(_MaxPool, x, idx, out)
        else:
            idx = _max_pool_indices(xd, k, geom, oh, ow)
            out = _PoolGather.apply(x, idx)
    if spatial == 3:
        out = _PoolGather.apply(x, idx)
    idx_t = _leaf(idx)
    if spatial == 1:
        out, idx_t = out.squeeze(2), idx_t.squeeze(2)
    if unbatched:
        out, idx_t = out.squeeze(0), idx_t.squeeze(0)
    return (out, idx_t) if return_indices else out


def _max_pool3d_indices(x, k, s, p, d, ceil_mode, opname):
    """The flat ``d * H * W + h * W + w`` index of every window's maximum (as
    ``_max_pool_indices``; other dtypes than float32/64 scanned in float64, exactly)."""
    from compiler.conv_kernels import max_pool3d
    outs, _ = _pool_sizes(x, k, s, p, d, ceil_mode, opname)
    xd = _arr(x)
    xd = np.ascontiguousarray(xd if xd.dtype in _KERNEL_DTYPES else xd.astype(np.float64))
    out = np.empty(xd.shape[:2] + outs, xd.dtype)
    idx = np.empty(xd.shape[:2] + outs, np.int64)
    max_pool3d(xd, *k, *s, *p, *d, *outs, out, idx)
    return idx


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The maximum over each (dilated) kernel window of (N, C, D, H, W) input; with
    ``return_indices`` also the flat ``d * H * W + h * W + w`` index of each maximum.

    >>> import tape, tape.nn.functional as F
    >>> F.max_pool3d(tape.arange(8.).reshape(1, 1, 2, 2, 2), 2, return_indices=True)[1]
    tensor([[[[[7]]]]])
    """
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 3)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The maximum over each (dilated) kernel window; with ``return_indices`` also the
    flat ``h * W + w`` index of each maximum (the first one on ties).

    >>> import tape, tape.nn.functional as F
    >>> F.max_pool2d(tape.tensor([[[[1., 3.], [3., 2.]]]]), 2, return_indices=True)[1]
    tensor([[[[1]]]])
    """
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The maximum over each kernel window of (N, C, L) input.

    >>> import tape, tape.nn.functional as F
    >>> F.max_pool1d(tape.tensor([[[1., 4., 2., 0.]]]), 2)
    tensor([[[4., 2.]]])
    """
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 1)


def _avg_divisor(n, k, s, p, out, count_include_pad):
    """Per output position along one dim: the window's length counting the padding
    (clipped at the padded end, as PyTorch) or counting only real pixels."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, n + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


_AVG_GEOMS = {}     # (h, w, k, s, p, oh, ow, count_include_pad, divisor_override) -> geom


def _avg_geom(h, w, k, s, p, oh, ow, count_include_pad, divisor_override):
    """(k, s, p, div, plain) of an avg_pool2d: div the (OH, OW) float64 divisors
    of its windows (read-only), plain whether it is a 2x2, stride-2 pooling of
    whole windows divided by 4 (``avg_pool_2x2``'s).  Cached: a training loop
    pools the same shapes every step."""
    key = (h, w, k, s, p, oh, ow, count_include_pad, divisor_override)
    geom = _AVG_GEOMS.get(key)
    if geom is None:
        if divisor_override is not None:
            div = np.full((oh, ow), float(divisor_override))
        else:
            div = np.outer(_avg_divisor(h, k[0], s[0], p[0], oh, count_include_pad),
                           _avg_divisor(w, k[1], s[1], p[1], ow, count_include_pad)
                           ).astype(np.float64)
        div.flags.writeable = False
        plain = (k, s, p) == ((2, 2), (2, 2), (0, 0)) and 2 * oh <= h and 2 * ow <= w \
            and bool((div == 4.0).all())
        geom = (k, s, p, div, plain)
        if len(_AVG_GEOMS) > 256:
            _AVG_GEOMS.clear()
        _AVG_GEOMS[key] = geom
    return geom


def _avg_pool_compiled(xd, geom):
    """The (N, C, OH, OW) window means of float32/64 ``xd`` for ``_avg_geom``'s
    ``geom``: window (i, j) divided by ``div[i, j]``."""
    from compiler.conv_kernels import avg_pool_2x2, avg_pool_window
    k, s, p, div, plain = geom
    xd = np.ascontiguousarray(xd)
    oh, ow = div.shape
    out = np.empty(xd.shape[:2] + (oh, ow), xd.dtype)
    if plain:
        avg_pool_2x2(xd, oh, ow, out)
    else:
        avg_pool_window(xd, k[0], k[1], s[0], s[1], p[0], p[1], div, out)
    return out


def _avg_pool_adjoint(gd, geom, in_shape, dtype):
    """The input gradient of ``_avg_pool_compiled`` for output gradient ``gd``."""
    from compiler.conv_kernels import avg_pool_scatter
    k, s, p, div, _ = geom
    out = np.empty(in_shape, dtype)
    avg_pool_scatter(np.ascontiguousarray(gd), k[0], k[1], s[0], s[1], p[0], p[1], div, out)
    return out


class _AvgPool(Function):
    """out = the window means of x (``_avg_geom``'s geometry; computed by the
    caller and passed in as ``out``), recorded by ``apply_own``; the backward
    spreads each gradient over its window (``_AvgPoolScatter``, so a double
    backward works too)."""
    @staticmethod
    def forward(ctx, x, geom, in4, out):
        # in4: x's shape as (N, C, H, W) (an unbatched or 1-d x is pooled as one)
        ctx.geom = geom
        ctx.in4 = in4
        ctx.save_for_backward(x)        # (as PyTorch: changing x in place then raises)
        return _leaf(out)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return _linked(_AvgPoolScatter.apply(g, ctx.geom, ctx.in4, tuple(x.shape)), x,
                       'AvgPool2DBackwardBackward0'), None, None, None

    @staticmethod
    def _backward_array(ctx, x, g):
        d = x._data.dtype
        in4 = ctx.in4
        g4 = np.asarray(g, d).reshape(in4[:2] + ctx.geom[3].shape)
        return _avg_pool_adjoint(g4, ctx.geom, in4, d).reshape(x._data.shape)


class _AvgPoolScatter(Function):
    """The adjoint of ``_AvgPool`` (linear in g): its backward is the pooling again."""
    @staticmethod
    def forward(ctx, g, geom, in4, in_shape):
        ctx.geom = geom
        ctx.in4 = in4
        gd = _arr(g)
        ctx.g_shape = gd.shape
        dt = gd.dtype if gd.dtype in _KERNEL_DTYPES else np.dtype(np.float64)
        g4 = gd.astype(dt, copy=False).reshape(in4[:2] + geom[3].shape)
        return _leaf(_avg_pool_adjoint(g4, geom, in4, dt).reshape(in_shape))

    @staticmethod
    def backward(ctx, gg):
        geom = ctx.geom
        out = _avg_pool_compiled(_arr(gg).reshape(ctx.in4), geom).reshape(ctx.g_shape)
        return _AvgPool.apply(gg, geom, ctx.in4, out), None, None, None


_AvgPool._backward_name = 'AvgPool2DBackward0'
_AvgPoolScatter._backward_name = 'AvgPool2DBackwardBackward0'


def _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,  # noqa: A002
                divisor_override, spatial):
    opname = f'avg_pool{spatial}d'
    _check_tensor(input, 'input', opname)
    x, unbatched = _batched(input, spatial, opname) if input.dtype not in _KERNEL_DTYPES \
        or spatial == 3 else (input, input.dim() == spatial + 1)
    k, s, p, _ = _pool_args(kernel_size, stride, padding, 1, spatial, opname)
    for i in range(spatial):
        if p[i] > k[i] // 2:
            raise RuntimeError(f'{opname}: pad should be at most half of kernel size, but got '
                               f'pad={p[i]} and kernel_size={k[i]}')
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f'{opname}: divisor must be not zero')
    if spatial == 3:
        out = _avg_pool3d(x, k, s, p, ceil_mode, count_include_pad, divisor_override, opname)
        return out.squeeze(0) if unbatched else out
    if x.dtype in _KERNEL_DTYPES:
        # the compiled window means, one AvgPool2DBackward0 record on the input as
        # given (PyTorch's node also for an unbatched or 1-d input)
        return _avg_pool_node(x, unbatched, spatial, k, s, p, ceil_mode, count_include_pad,
                              divisor_override, opname)
    if spatial == 1:
        x = x.unsqueeze(2)
        k, s, p = (1,) + k, (1,) + s, (0,) + p
    (oh, ow), geom = _pool_geom(x, k, s, p, (1, 1), ceil_mode, opname)
    xd = _arr(x)
    c = x.shape[1]
    dt = xd.dtype
    # a window sum is a depthwise convolution with a ones kernel: its gradients
    # (to any order) come from the convolution's
    ones = _leaf(np.ones((c, 1) + k, dt))
    total = _Conv.apply(x, ones, geom._replace(groups=c))
    if divisor_override is not None:
        out = total / float(divisor_override)
    else:
        h, w = x.shape[2:]
        dh = _avg_divisor(h, k[0], s[0], p[0], oh, count_include_pad)
        dw = _avg_divisor(w, k[1], s[1], p[1], ow, count_include_pad)
        out = total * _leaf((1.0 / np.outer(dh, dw)).astype(dt))
    if spatial == 1:
        out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


def _avg_pool_node(x, unbatched, spatial, k, s, p, ceil_mode, count_include_pad,
                   divisor_override, opname):
    """avg_pool1d/2d of float32/64 ``x`` (batched or not) as one ``_AvgPool`` record."""
    if x.dim() not in (spatial + 1, spatial + 2):
        _batched(x, spatial, opname)            # (raises PyTorch's error)
    xd = _arr(x)
    shape = xd.shape
    in4 = ((1,) + shape) if unbatched else shape
    if spatial == 1:        # (N, C, L) pooled as (N, C, 1, L)
        in4 = in4[:2] + (1,) + in4[2:]
        k, s, p = (1,) + k, (1,) + s, (0,) + p
    n, c, h, w = in4
    oh = _pool_len(h, k[0], s[0], p[0], 1, ceil_mode)
    ow = _pool_len(w, k[1], s[1], p[1], 1, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f'{opname}: Given input size: ({"x".join(map(str, in4[1:]))}). '
                           f'Calculated output size is too small')
    geom = _avg_geom(h, w, k, s, p, oh, ow, count_include_pad, divisor_override)
    out = _avg_pool_compiled(xd.reshape(in4), geom)
    out = out.reshape(shape[:-spatial] + ((ow,) if spatial == 1 else (oh, ow)))
    return apply_own(_AvgPool, x, geom, in4, out)


def _avg_pool3d(x, k, s, p, ceil_mode, count_include_pad, divisor_override, opname):
    """The window sums of (N, C, D, H, W) ``x``: the kernel's depth shifts of the
    (depth-padded) input added with tape ops, then a depthwise 2-d ``_Conv`` with a
    ones kernel over the (N, C*OD, H, W) result; divided as ``avg_pool2d``."""
    from . import functional as F
    outs, pads = _pool_sizes(x, k, s, p, (1, 1, 1), ceil_mode, opname)
    od, oh, ow = outs
    n, c, dep, h, w = x.shape
    (dlo, dhi) = pads[0]
    xp = F.pad(x, (0, 0, 0, 0, dlo, dhi)) if dlo or dhi else x
    shifts = _depth_shifts(xp, k[0], s[0], 1, od)
    total = shifts[0]
    for t in shifts[1:]:
        total = total + t
    dt = np.asarray(x._data).dtype
    ones = _leaf(np.ones((c * od, 1) + k[1:], dt))
    total = _Conv.apply(total.reshape(n, c * od, h, w), ones,
                        _Geom(s[1:], pads[1:], (1, 1), c * od)).reshape(n, c, od, oh, ow)
    if divisor_override is not None:
        return total / float(divisor_override)
    dd = _avg_divisor(dep, k[0], s[0], p[0], od, count_include_pad)
    dh = _avg_divisor(h, k[1], s[1], p[1], oh, count_include_pad)
    dw = _avg_divisor(w, k[2], s[2], p[2], ow, count_include_pad)
    div = dd[:, None, None] * dh[None, :, None] * dw[None, None, :]
    return total * _leaf((1.0 / div).astype(dt))


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """The mean over each kernel window of (N, C, D, H, W) input (options as
    ``avg_pool2d``).

    >>> import tape, tape.nn.functional as F
    >>> F.avg_pool3d(tape.arange(8.).reshape(1, 1, 2, 2, 2), 2)
    tensor([[[[[3.5000]]]]])
    """
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 3)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """The mean over each kernel window (zero padding counted unless
    ``count_include_pad=False``; ``divisor_override`` replaces the window size).

    >>> import tape, tape.nn.functional as F
    >>> F.avg_pool2d(tape.ones(1, 1, 2, 2), 2, padding=1, count_include_pad=False)
    tensor([[[[1., 1.],
              [1., 1.]]]])
    """
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """The mean over each kernel window of (N, C, L) input.

    >>> import tape, tape.nn.functional as F
    >>> F.avg_pool1d(tape.tensor([[[1., 3., 5., 7.]]]), 2)
    tensor([[[2., 6.]]])
    """
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       None, 1)


def _adaptive_matrix(n, out, dtype):
    """(out, n): row i averages input [floor(i n / out), ceil((i + 1) n / out))."""
    m = np.zeros((out, n), dtype)
    for i in range(out):      # one row per output index: out is small
        lo, hi = (i * n) // out, -((-(i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


@node_named(lambda i, size: None if all(s == 1 for s in (size if isinstance(size, (list, tuple))
            else (size,))) else ('AdaptiveAvgPool2DBackward0', 1), 'input', 'output_size')
def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average pooling to a fixed ``output_size`` (an int, or a pair whose ``None``
    keeps that input size), with PyTorch's window bounds.

    >>> import tape, tape.nn.functional as F
    >>> F.adaptive_avg_pool2d(tape.arange(4.).reshape(1, 1, 2, 2), 1)
    tensor([[[[1.5000]]]])
    """
    _check_tensor(input, 'input', 'adaptive_avg_pool2d')
    x, unbatched = _batched(input, 2, 'adaptive_avg_pool2d')
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 2:
            raise ValueError('adaptive_avg_pool2d: output_size must be 2')
        size = tuple(output_size)
    else:
        size = (output_size, output_size)
    h, w = x.shape[2:]
    oh, ow = (h if size[0] is None else int(size[0])), (w if size[1] is None else int(size[1]))
    if oh < 0 or ow < 0 or (oh == 0 and h) or (ow == 0 and w):
        raise RuntimeError(f'adaptive_avg_pool2d: elements of output_size must be greater '
                           f'than or equal to 0 but received {[oh, ow]}')
    for dim in range(1, x.dim()):
        if x.shape[dim] == 0:
            raise RuntimeError(f'adaptive_avg_pool2d(): Expected input to have non-zero size '
                               f'for non-batch dimensions, but input has sizes '
                               f'{list(x.shape)} with dimension {dim} being empty')
    dt = np.asarray(x._data).dtype
    if oh == 1 and ow == 1:         # PyTorch's mean (MeanBackward1)
        out = x.mean((-2, -1), keepdim=True)
        return out.squeeze(0) if unbatched else out
    # each output is a mean over a rectangle: rows averaged by one matrix, columns by
    # another; matmul gives every derivative
    out = _leaf(_adaptive_matrix(h, oh, dt)).matmul(x).matmul(
        _leaf(np.ascontiguousarray(_adaptive_matrix(w, ow, dt).T)))
    return out.squeeze(0) if unbatched else out


@node_named(lambda i, size: None if all(s == 1 for s in (size if isinstance(size, (list, tuple))
            else (size,))) else ('AdaptiveAvgPool3DBackward0', 1), 'input', 'output_size')
def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """Average pooling of (N, C, D, H, W) (or (C, D, H, W)) input to a fixed
    ``output_size`` (an int, or a triple whose ``None`` keeps that input size),
    with PyTorch's window bounds.

    >>> import tape, tape.nn.functional as F
    >>> F.adaptive_avg_pool3d(tape.arange(8.).reshape(1, 1, 2, 2, 2), 1)
    tensor([[[[[3.5000]]]]])
    """
    _check_tensor(input, 'input', 'adaptive_avg_pool3d')
    x, unbatched = _batched(input, 3, 'adaptive_avg_pool3d')
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 3:
            raise RuntimeError('adaptive_avg_pool3d: output_size must be 3')
        size = tuple(output_size)
    else:
        size = (output_size,) * 3
    dims = tuple(x.shape[2:])
    outs = tuple(n if o is None else int(o) for n, o in zip(dims, size))
    if any(o < 0 for o in outs):
        raise RuntimeError('adaptive_avg_pool3d: elements of output_size must be greater '
                           'than or equal to 0 but received {%d, %d,%d}' % outs)
    for dim in range(1, x.dim()):
        if x.shape[dim] == 0:
            raise RuntimeError(f'adaptive_avg_pool3d(): Expected input to have non-zero size '
                               f'for non-batch dimensions, but input has sizes '
                               f'{list(x.shape)} with dimension {dim} being empty')
    (d, h, w), (od, oh, ow) = dims, outs
    n, c = x.shape[:2]
    dt = np.asarray(x._data).dtype
    # a mean over a box is three averaging matrices, one per spatial axis
    out = _leaf(_adaptive_matrix(h, oh, dt)).matmul(x).matmul(
        _leaf(np.ascontiguousarray(_adaptive_matrix(w, ow, dt).T)))
    out = _leaf(_adaptive_matrix(d, od, dt)).matmul(out.reshape(n, c, d, oh * ow))
    out = out.reshape(n, c, od, oh, ow)
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """Average pooling of (N, C, L) (or (C, L)) input to a fixed length ``output_size``
    (an int or a 1-tuple), with PyTorch's window bounds.

    >>> import tape, tape.nn.functional as F
    >>> F.adaptive_avg_pool1d(tape.tensor([[[1., 2., 3., 5.]]]), 2)
    tensor([[[1.5000, 4.0000]]])
    """
    _check_tensor(input, 'input', 'adaptive_avg_pool1d')
    if input.dim() not in (2, 3):
        raise RuntimeError(f'Expected 2 to 3 dimensions, but got {input.dim()}-dimensional '
                           f"tensor for argument #1 'self' (while checking arguments for "
                           f'adaptive_avg_pool1d)')
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise RuntimeError(f"adaptive_avg_pool1d() argument 'output_size' should contain "
                               f'one int (got {len(output_size)})')
        output_size = output_size[0]
    length = input.shape[-1]
    out = int(output_size)
    if out < 0:
        raise RuntimeError(f'adaptive_avg_pool1d: elements of output_size must be greater '
                           f'than or equal to 0 but received {out}')
    if length == 0:
        raise RuntimeError(f'adaptive_avg_pool1d(): Expected input to have non-zero size '
                           f'for non-batch dimensions, but input has sizes '
                           f'{list(input.shape)} with dimension {input.dim() - 1} being empty')
    dt = np.asarray(input._data).dtype
    return input.matmul(_leaf(np.ascontiguousarray(_adaptive_matrix(length, out, dt).T)))
