"""Spatial ops of ``torch.nn.functional`` and their layers: resampling
(``interpolate``/``Upsample``), pixel and channel shuffles, ``unfold``/``fold``,
adaptive max pooling, max unpooling, power-average pooling, local response
normalization, ``embedding_bag`` and ``rrelu``.

Every op is a composition of differentiable tape ops (reshapes, ``index_select``
and ``index_add``, the pooling gather/scatter pair of ``_conv``, pads and
elementwise arithmetic), so each has a backward and a double backward.  The
integer work (which input pixel each output reads, and with what weight) is done
once in NumPy, with PyTorch's formulas and in the input's own precision, so
that the picked pixels match PyTorch's.

>>> import tape
>>> import tape.nn.functional as F
>>> F.interpolate(tape.tensor([[[1., 2.]]]), scale_factor=2, mode='linear')
tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
>>> F.pixel_shuffle(tape.arange(4.).reshape(1, 4, 1, 1), 2)
tensor([[[[0., 1.],
          [2., 3.]]]])
"""
import math as _math
import numbers as _numbers

import math

import numpy as np

from .._composite_nodes import name_result, node_named
from .. import _ops
from .._tensor import Tensor, _leaf
from . import _conv as _C
from .modules import Module, Parameter, _empty
from . import init

__all__ = ['Upsample', 'UpsamplingNearest2d', 'UpsamplingBilinear2d', 'PixelShuffle',
           'PixelUnshuffle', 'ChannelShuffle', 'Unfold', 'Fold', 'AdaptiveMaxPool1d',
           'AdaptiveMaxPool2d', 'AdaptiveMaxPool3d', 'MaxUnpool1d', 'MaxUnpool2d',
           'MaxUnpool3d', 'LPPool1d', 'LPPool2d', 'LPPool3d', 'LocalResponseNorm',
           'EmbeddingBag', 'RReLU']


def _F():
    from . import functional
    return functional


def _arr(t):
    return np.asarray(t._data)


def _tensor_arg(t, opname, name='input'):
    if not isinstance(t, Tensor):
        raise TypeError(f"{opname}(): argument '{name}' (position 1) must be Tensor, not "
                        f'{type(t).__name__}')
    return t


def _ntuple(v, n, name='kernel_size'):
    if isinstance(v, (list, tuple)):
        if len(v) == 1 and n > 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f'{name} must either be a single int, or a tuple of {n} ints')
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _torch_dtype(dt):
    return _ops._TORCH_DTYPE_NAMES.get(np.dtype(dt).str[1:], str(dt))


def _zeros(shape, dtype):
    return _leaf(np.zeros(shape, dtype))


# -- interpolate ---------------------------------------------------------------------------
def _scale_value(scale, n_in, n_out, dt):
    """PyTorch's compute_scales_value, in the kernel's precision ``dt``."""
    if scale is not None and scale > 0:
        return dt.type(1.0 / scale)
    return dt.type(n_in) / dt.type(n_out)


def _area_scale(n_in, n_out, align_corners, scale, dt):
    if align_corners:
        return dt.type((n_in - 1) / (n_out - 1)) if n_out > 1 else dt.type(0)
    return _scale_value(scale, n_in, n_out, dt)


def _source(scale, n_out, align_corners, cubic, dt):
    dst = np.arange(n_out).astype(dt)
    if align_corners:
        return scale * dst
    src = scale * (dst + dt.type(0.5)) - dt.type(0.5)
    return src if cubic else np.maximum(src, dt.type(0))


def _cubic_weights(t, dt):
    a = dt.type(-0.75)

    def conv1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t)]


def _taps(mode, n_in, n_out, align_corners, scale, dt):
    """The input indices and weights each output index along one dim reads:
    a list of (indices (n_out,), weights (n_out,) or None)."""
    if mode in ('nearest', 'nearest-exact'):
        if mode == 'nearest' and n_out == n_in:
            idx = np.arange(n_out)
        elif mode == 'nearest' and n_out == 2 * n_in:
            idx = np.arange(n_out) >> 1
        else:
            f32 = np.dtype(np.float32)      # PyTorch picks in float whatever the dtype
            s = _scale_value(scale, n_in, n_out, f32)
            o = np.arange(n_out).astype(np.float32)
            if mode == 'nearest-exact':
                o = o + np.float32(0.5)
            idx = np.minimum(np.floor(o * s).astype(np.int64), n_in - 1)
        return [(idx.astype(np.int64), None)]
    s = _area_scale(n_in, n_out, align_corners, scale, dt)
    if mode == 'bicubic':
        real = _source(s, n_out, align_corners, True, dt)
        base = np.floor(real)
        ws = _cubic_weights((real - base).astype(dt), dt)
        base = base.astype(np.int64)
        return [(np.clip(base - 1 + k, 0, n_in - 1), ws[k].astype(dt)) for k in range(4)]
    real = _source(s, n_out, align_corners, False, dt)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam = np.clip(real - i0.astype(dt), 0, 1).astype(dt)
    i1 = i0 + (i0 < n_in - 1)
    return [(i0, (1 - lam).astype(dt)), (i1, lam)]


def _aa_filter(mode, x):
    """PyTorch's antialias filters: the triangle (bilinear), Keys' cubic with
    a = -0.5 (bicubic, as PIL's; -0.75 is the plain bicubic's)."""
    x = np.abs(x)
    if mode == 'bilinear':
        return np.where(x < 1.0, 1.0 - x, 0.0)
    a = -0.5
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _aa_taps(mode, n_in, n_out, align_corners, scale, dt):
    """``_taps`` of ``antialias=True`` (PyTorch's ``_upsample_bilinear2d_aa`` and
    ``_upsample_bicubic2d_aa``): downsampling by ``scale`` widens the filter's
    support by ``scale``; each output's weights are normalized to sum to 1."""
    s = float(_area_scale(n_in, n_out, align_corners, scale, np.dtype(np.float64)))
    interp = 2 if mode == 'bilinear' else 4
    support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
    width = int(_math.ceil(support)) * 2 + 1
    invscale = 1.0 / s if s >= 1.0 else 1.0
    center = s * (np.arange(n_out) + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)
    xsize = np.clip(np.minimum((center + support + 0.5).astype(np.int64), n_in) - xmin,
                    0, width)
    k = np.arange(width)
    w = _aa_filter(mode, (xmin[:, None] + k - center[:, None] + 0.5) * invscale)
    w = np.where(k < xsize[:, None], w, 0.0)
    total = w.sum(1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total != 0)
    idx = np.minimum(xmin[:, None] + k, n_in - 1)
    return [(idx[:, j], w[:, j].astype(dt)) for j in range(width)]


def _resample_dim(x, dim, taps):
    nd = x.dim()
    out = None
    for idx, w in taps:
        term = x.index_select(dim, _leaf(idx))
        if w is not None:
            term = term * _leaf(w.reshape((-1,) + (1,) * (nd - 1 - dim)))
        out = term if out is None else out + term
    return out


_INTERP_ND = {'linear': 3, 'bilinear': 4, 'bicubic': 4, 'trilinear': 5}
_INTERP_MODES = ('nearest', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area',
                 'nearest-exact')


_UPSAMPLE = {('nearest', 1): 'UpsampleNearest1DBackward0',
             ('nearest', 2): 'UpsampleNearest2DBackward0',
             ('nearest', 3): 'UpsampleNearest3DBackward0',
             ('nearest-exact', 1): 'UpsampleNearestExact1DBackward0',
             ('nearest-exact', 2): 'UpsampleNearestExact2DBackward0',
             ('nearest-exact', 3): 'UpsampleNearestExact3DBackward0',
             ('linear', 1): 'UpsampleLinear1DBackward0',
             ('bilinear', 2): 'UpsampleBilinear2DBackward0',
             ('bicubic', 2): 'UpsampleBicubic2DBackward0',
             ('trilinear', 3): 'UpsampleTrilinear3DBackward0'}


def _interpolate_node(input, mode, antialias):  # noqa: A002
    """PyTorch's node for F.interpolate (its 'area' mode is adaptive_avg_pool's own)."""
    nm = _UPSAMPLE.get((mode, np.ndim(getattr(input, '_data', input)) - 2))
    if nm is not None and antialias:
        nm = nm.replace('Backward0', 'AaBackward0')
    return None if nm is None else (nm, 1)


@node_named(_interpolate_node, 'input', 'mode', 'antialias')
def interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resample (N, C, *spatial) input to ``size`` or by ``scale_factor`` with
    PyTorch's index and weight formulas: ``'nearest'``, ``'nearest-exact'``,
    ``'linear'`` (3-D), ``'bilinear'``/``'bicubic'`` (4-D), ``'trilinear'`` (5-D) and
    ``'area'`` (adaptive average pooling); ``antialias=True`` (bilinear and bicubic
    of 4-D input) is PyTorch's antialiased resampling (``_aa_taps``).

    >>> import tape, tape.nn.functional as F
    >>> F.interpolate(tape.tensor([[[1., 2.]]]), size=3)
    tensor([[[1., 1., 2.]]])
    """
    _tensor_arg(input, 'interpolate')
    if mode in ('nearest', 'area', 'nearest-exact'):
        if align_corners is not None:
            raise ValueError('align_corners option can only be set with the interpolating '
                             'modes: linear | bilinear | bicubic | trilinear')
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError('only one of size or scale_factor should be defined')
    elif size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    'Input and output must have the same number of spatial dimensions, but got '
                    f'input with spatial dimensions of {list(input.shape[2:])} and output size '
                    f'of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format '
                    'and output size in (o1, o2, ...,oK) format.')
            if not all(isinstance(v, _numbers.Integral) for v in size):
                raise TypeError('expected size to be one of int or Tuple[int] or Tuple[int, '
                                'int] or Tuple[int, int, int], but got size with types '
                                f'{[type(v) for v in size]}')
            output_size = [int(v) for v in size]
        else:
            output_size = [int(size)] * dim
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    'Input and scale_factor must have the same number of spatial dimensions, '
                    f'but got input with spatial dimensions of {list(input.shape[2:])} and '
                    f'scale_factor of shape {scale_factor}. Please provide input tensor in '
                    '(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.')
            scale_factors = [float(v) for v in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * dim
    else:
        raise ValueError('either size or scale_factor should be defined')
    if recompute_scale_factor and size is not None:
        raise ValueError('recompute_scale_factor is not meaningful with an explicit size.')
    if mode == 'area' and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        output_size = [_math.floor(float(input.shape[i + 2]) * scale_factors[i])
                       for i in range(dim)]
        scale_factors = None
    if antialias and not (mode in ('bilinear', 'bicubic') and input.dim() == 4):
        raise ValueError('Anti-alias option is restricted to bilinear and bicubic modes and '
                         'requires a 4-D tensor as input')
    if mode not in _INTERP_MODES or input.dim() not in (3, 4, 5):
        raise NotImplementedError(
            f'Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for '
            f'the modes: nearest | linear | bilinear | bicubic | trilinear | area | '
            f'nearest-exact (got {mode})')
    if mode in _INTERP_ND and input.dim() != _INTERP_ND[mode]:
        if mode == 'bicubic' and input.dim() == 5:
            raise NotImplementedError(
                f'Input Error: Only 3D, 4D and 5D input Tensors supported (got 5D) for the '
                f'modes: nearest | linear | bilinear | bicubic | trilinear | area | '
                f'nearest-exact (got {mode})')
        raise NotImplementedError(f'Got {input.dim()}D input, but {mode} mode needs '
                                  f'{_INTERP_ND[mode]}D input')
    in_sizes = [int(v) for v in input.shape[2:]]
    if output_size is None:
        output_size = [int(float(n) * s) for n, s in zip(in_sizes, scale_factors)]
    if mode == 'area':
        fn = (_C.adaptive_avg_pool1d, _C.adaptive_avg_pool2d, _C.adaptive_avg_pool3d)[dim - 1]
        return fn(input, output_size)
    opname = {'nearest': 'upsample_nearest', 'nearest-exact': '_upsample_nearest_exact'}.get(
        mode, {'linear': 'upsample_linear', 'bilinear': 'upsample_bilinear',
               'bicubic': 'upsample_bicubic', 'trilinear': 'upsample_trilinear'}.get(mode))
    opname = f'{opname}{dim}d'
    if any(n <= 0 for n in in_sizes) or any(o <= 0 for o in output_size):
        names = 'DHW'[3 - dim:]
        raise RuntimeError(
            f'{opname}(): Input and output sizes should be greater than 0, but got input ('
            + ', '.join(f'{c}: {n}' for c, n in zip(names, in_sizes)) + ') output ('
            + ', '.join(f'{c}: {n}' for c, n in zip(names, output_size)) + ')')
    dt = _arr(input).dtype
    if mode not in ('nearest', 'nearest-exact') and dt.kind not in 'fc':
        kern = 'compute_indices_weights_cubic' if mode == 'bicubic' else \
            'compute_indices_weights_linear'
        raise NotImplementedError(f'"{kern}" not implemented for \'{_torch_dtype(dt)}\'')
    wdt = dt if dt.kind == 'f' else np.dtype(np.float32)
    x = input
    for i in range(dim):
        scale = None if scale_factors is None else scale_factors[i]
        taps = (_aa_taps if antialias else _taps)(mode, in_sizes[i], output_size[i],
                                                 align_corners, scale, wdt)
        if mode in ('nearest', 'nearest-exact') and output_size[i] == in_sizes[i] \
                and np.array_equal(taps[0][0], np.arange(in_sizes[i])):
            continue
        x = _resample_dim(x, 2 + i, taps)
    if x is input:
        x = input * 1 if dt.kind in 'fc' else _leaf(_arr(input).copy())
    return x


def upsample(input, size=None, scale_factor=None, mode='nearest', align_corners=None):  # noqa: A002
    """Deprecated alias of ``interpolate``."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    return interpolate(input, size, scale_factor, mode='nearest')


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    return interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)


class Upsample(Module):
    """Resample by ``F.interpolate`` with fixed ``size`` or ``scale_factor``."""
    def __init__(self, size=None, scale_factor=None, mode='nearest', align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):  # noqa: A002
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = 'scale_factor=' + repr(self.scale_factor)
        else:
            info = 'size=' + repr(self.size)
        return info + ', mode=' + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """2-d nearest-neighbour upsampling."""
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode='nearest')


class UpsamplingBilinear2d(Upsample):
    """2-d bilinear upsampling with ``align_corners=True``."""
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode='bilinear', align_corners=True)


# -- pixel and channel shuffles ------------------------------------------------------------
def _factor_check(name, factor, what):
    if factor <= 0:
        raise RuntimeError(f'{name} expects a positive {what}, but got {factor}')


@node_named('PixelShuffleBackward0', 'input')
def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """(*, C r^2, H, W) -> (*, C, H r, W r).

    >>> import tape, tape.nn.functional as F
    >>> F.pixel_shuffle(tape.zeros(1, 8, 2, 3), 2).shape
    tape.Size([1, 2, 4, 6])
    """
    _tensor_arg(input, 'pixel_shuffle')
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f'pixel_shuffle expects input to have at least 3 dimensions, but '
                           f'got input with {input.dim()} dimension(s)')
    _factor_check('pixel_shuffle', r, 'upscale_factor')
    *lead, c, h, w = (int(v) for v in input.shape)
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f'divisible by the square of upscale_factor, but input.size(-3)={c} '
                           f'is not divisible by {r * r}')
    lead = tuple(lead)
    n = len(lead)
    oc = c // (r * r)
    x = input.reshape(lead + (oc, r, r, h, w))
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(lead + (oc, h * r, w * r))


@node_named('PixelUnshuffleBackward0', 'input')
def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H r, W r) -> (*, C r^2, H, W), the inverse of ``pixel_shuffle``.

    >>> import tape, tape.nn.functional as F
    >>> F.pixel_unshuffle(tape.zeros(1, 2, 4, 6), 2).shape
    tape.Size([1, 8, 2, 3])
    """
    _tensor_arg(input, 'pixel_unshuffle')
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f'pixel_unshuffle expects input to have at least 3 dimensions, but '
                           f'got input with {input.dim()} dimension(s)')
    _factor_check('pixel_unshuffle', r, 'downscale_factor')
    *lead, c, h, w = (int(v) for v in input.shape)
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by "
                           f"downscale_factor, but input.size(-1)={w} is not divisible by {r}")
    lead = tuple(lead)
    n = len(lead)
    x = input.reshape(lead + (c, h // r, r, w // r, r))
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(lead + (c * r * r, h // r, w // r))


def channel_shuffle(input, groups):  # noqa: A002
    """(N, g k, *) -> (N, k g, *): the channels of ``groups`` groups interleaved.

    >>> import tape, tape.nn.functional as F
    >>> F.channel_shuffle(tape.arange(4.).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    _tensor_arg(input, 'channel_shuffle')
    g = int(groups)
    if input.dim() <= 2:
        raise RuntimeError(f'channel_shuffle expects input to have at least 3 dimensions, but '
                           f'got input with {input.dim()} dimension(s)')
    if g <= 0:
        raise RuntimeError(f'Number of groups to divide channels in must be positive. Value '
                           f'of groups:{g}')
    shape = tuple(int(v) for v in input.shape)
    c = shape[1]
    if c % g:
        raise RuntimeError(f'Number of channels must be divisible by groups. Got {c} channels '
                           f'and {g} groups.')
    x = input.reshape((shape[0], g, c // g) + shape[2:])
    return x.transpose(1, 2).reshape(shape)


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):  # noqa: A002
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f'upscale_factor={self.upscale_factor}'


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):  # noqa: A002
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f'downscale_factor={self.downscale_factor}'


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups."""
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):  # noqa: A002
        return channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f'groups={self.groups}'


# -- unfold / fold ---------------------------------------------------------------------
def _im2col_index(hp, wp, k, d, s, out):
    """Flat positions into the padded (hp, wp) plane, ordered (kh, kw, oh, ow)."""
    rows = (np.arange(k[0]) * d[0])[:, None] + (np.arange(out[0]) * s[0])[None, :]
    cols = (np.arange(k[1]) * d[1])[:, None] + (np.arange(out[1]) * s[1])[None, :]
    idx = rows[:, None, :, None] * wp + cols[None, :, None, :]
    return idx.reshape(-1).astype(np.int64)


def _fold_args(kernel_size, dilation, padding, stride, opname):
    k = _ntuple(kernel_size, 2, 'kernel_size')
    d = _ntuple(dilation, 2, 'dilation')
    p = _ntuple(padding, 2, 'padding')
    s = _ntuple(stride, 2, 'stride')
    if any(v <= 0 for v in k):
        raise RuntimeError(f'{opname}: kernel size should be greater than zero, but got '
                           f'kernel_height: {k[0]} kernel_width: {k[1]}')
    if any(v <= 0 for v in s):
        raise RuntimeError(f'{opname}: stride should be greater than zero, but got '
                           f'stride_height: {s[0]} stride_width: {s[1]}')
    if any(v <= 0 for v in d):
        raise RuntimeError(f'{opname}: dilation should be greater than zero, but got '
                           f'dilation_height: {d[0]} dilation_width: {d[1]}')
    if any(v < 0 for v in p):
        raise RuntimeError(f'{opname}: padding should be non-negative, but got pad_height: '
                           f'{p[0]} pad_width: {p[1]}')
    return k, d, p, s


@node_named('Im2ColBackward0', 'input')
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """im2col: (N, C, H, W) (or (C, H, W)) -> (N, C kh kw, L), every sliding
    block's pixels as one column, channel-major then kernel row, kernel column.

    >>> import tape, tape.nn.functional as F
    >>> F.unfold(tape.arange(9.).reshape(1, 1, 3, 3), 2).shape
    tape.Size([1, 4, 4])
    """
    _tensor_arg(input, 'unfold')
    if input.dim() < 3:
        raise IndexError(f'Dimension out of range (expected to be in range of '
                         f'[{-max(input.dim(), 1)}, {max(input.dim(), 1) - 1}], but got 2)')
    if input.dim() not in (3, 4):
        raise RuntimeError(f'Expected 3D or 4D (batch mode) tensor with optional 0 size batch '
                           f'dimension for input, but got: {list(input.shape)}')
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, 'im2col')
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    n, c, h, w = (int(v) for v in x.shape)
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh < 1 or ow < 1 or c == 0 or h == 0 or w == 0:
        raise RuntimeError(
            f'Given input with spatial size ({h}, {w}), kernel_size=({k[0]}, {k[1]}), '
            f'dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the '
            f'array of sliding blocks as ({oh}, {ow}), but its components must be at least '
            f'one.')
    if p != (0, 0):
        x = _F().pad(x, (p[1], p[1], p[0], p[0]))
    idx = _im2col_index(hp, wp, k, d, s, (oh, ow))
    cols = x.reshape(n, c, hp * wp).index_select(2, _leaf(idx))
    out = cols.reshape(n, c * k[0] * k[1], oh * ow)
    return out.squeeze(0) if unbatched else out


@node_named('Col2ImBackward0', 'input')
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """col2im, the adjoint of ``unfold``: (N, C kh kw, L) (or (C kh kw, L)) ->
    (N, C, *output_size), overlapping blocks summed.

    >>> import tape, tape.nn.functional as F
    >>> F.fold(tape.ones(1, 4, 4), (3, 3), 2)
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    _tensor_arg(input, 'fold')
    if input.dim() not in (2, 3):
        raise RuntimeError(f'Expected 2D or 3D (batch mode) tensor with optional 0 size batch '
                           f'dimension for input, but got: {list(input.shape)}')
    osz = _ntuple(output_size, 2, 'output_size')
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, 'col2im')
    if any(v <= 0 for v in osz):
        raise RuntimeError(f'col2im: output size should be greater than zero, but got '
                           f'output_height: {osz[0]} output_width: {osz[1]}')
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    n, ck, length = (int(v) for v in x.shape)
    kk = k[0] * k[1]
    if ck % kk:
        raise RuntimeError(f'Expected size of input\'s dimension 1 to be divisible by the '
                           f'product of kernel_size, but got input.size(1)={ck} and '
                           f'kernel_size=({k[0]}, {k[1]})')
    h, w = osz
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh < 1 or ow < 1 or length != oh * ow:
        raise RuntimeError(
            f'Given output_size=({h}, {w}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, '
            f'{d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected size of '
            f"input's dimension 2 to match the calculated number of sliding blocks {oh} * "
            f'{ow} = {oh * ow}, but got input.size(2)={length}.')
    c = ck // kk
    idx = _im2col_index(hp, wp, k, d, s, (oh, ow))
    src = x.reshape(n, c, kk * length)
    plane = _zeros((n, c, hp * wp), _arr(x).dtype).index_add(2, _leaf(idx), src)
    out = plane.reshape(n, c, hp, wp)
    if p != (0, 0):
        out = out[:, :, p[0]:p[0] + h, p[1]:p[1] + w]
    return out.squeeze(0) if unbatched else out


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) input as columns (``F.unfold``)."""
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):  # noqa: A002
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f'kernel_size={self.kernel_size}, dilation={self.dilation}, '
                f'padding={self.padding}, stride={self.stride}')


class Fold(Module):
    """Columns of sliding blocks summed back into an image (``F.fold``)."""
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):  # noqa: A002
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self):
        return (f'output_size={self.output_size}, kernel_size={self.kernel_size}, '
                f'dilation={self.dilation}, padding={self.padding}, stride={self.stride}')


# -- adaptive max pooling ----------------------------------------------------------------
def _adaptive_windows(n, out):
    """(out, K) input indices of each adaptive window, short windows padded with
    their last index (a repeat never changes the first maximum or the last NaN)."""
    lo = (np.arange(out) * n) // out
    hi = -((-(np.arange(out) + 1) * n) // out)
    k = int((hi - lo).max()) if out else 1
    idx = lo[:, None] + np.arange(k)[None, :]
    return np.minimum(idx, (hi - 1)[:, None])


def _adaptive_max(input, output_size, spatial, return_indices):
    opname = f'adaptive_max_pool{spatial}d'
    _tensor_arg(input, opname)
    if input.dim() not in (spatial + 1, spatial + 2):
        if spatial == 1:
            raise RuntimeError(f'adaptive_max_pool1d() Expected 2 to 3 dimensions, but got '
                               f"{input.dim()}-dimensional tensor for argument #1 'self' "
                               f'(while checking arguments for adaptive_max_pool1d)')
        raise RuntimeError(f'{opname}(): Expected {spatial + 1}D or {spatial + 2}D tensor, but '
                           f'got: {list(input.shape)}')
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != spatial:
            raise RuntimeError(f'{opname}(): internal error: output_size.size() must be '
                               f'{spatial}')
        size = tuple(output_size)
    else:
        size = (output_size,) * spatial
    if spatial == 1:
        # PyTorch's: the 2-d pool of x.unsqueeze(-2), squeezed (its graph shows both)
        res = _adaptive_max(input.unsqueeze(-2), (1, size[0]), 2, return_indices)
        if return_indices:
            return res[0].squeeze(-2), res[1].squeeze(-2)
        return res.squeeze(-2)
    unbatched = input.dim() == spatial + 1
    x = input.unsqueeze(0) if unbatched else input
    dims = tuple(int(v) for v in x.shape[2:])
    outs = tuple(n if o is None else int(o) for n, o in zip(dims, size))
    for dim in range(1, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(f'{opname}(): Expected input to have non-zero size for '
                               f'non-batch dimensions, but input has sizes {list(input.shape)} '
                               f'with dimension {dim} being empty')
    if any(o < 0 for o in outs):
        raise RuntimeError(f'{opname}(): elements of output_size must be greater than or '
                           f'equal to 0 but received {list(outs)}')
    from .._tape import note_value_use
    note_value_use(opname)                  # (the argmax is baked in)
    xd = _arr(x)
    if xd.dtype.kind not in 'f':
        raise NotImplementedError(f'"{opname}" not implemented for \'{_torch_dtype(xd.dtype)}\'')
    n, c = xd.shape[:2]
    wins = [_adaptive_windows(dn, o) for dn, o in zip(dims, outs)]
    # the flat input index of every (output position, window offset), scan order
    strides = [int(math.prod(dims[i + 1:])) for i in range(spatial)]
    flat = np.zeros((), np.int64)
    for i, wi in enumerate(wins):
        o, k = wi.shape
        shape = [1] * (2 * spatial)
        shape[i], shape[spatial + i] = o, k
        flat = flat + (wi * strides[i]).reshape(shape)
    flat = flat.reshape(outs + (-1,)) if all(outs) else np.zeros(outs + (1,), np.int64)
    if all(outs) and n * c:
        vals = xd.reshape(n, c, -1)[:, :, flat]                # (N, C, *outs, K)
        arg = np.argmax(vals, axis=-1)
        nan = np.isnan(vals)
        if nan.any():
            last = nan.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
            arg = np.where(nan.any(-1), last, arg)
        idx = np.take_along_axis(np.broadcast_to(flat, vals.shape), arg[..., None],
                                 axis=-1)[..., 0]
    else:
        idx = np.zeros((n, c) + outs, np.int64)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    out = _C._PoolGather.apply(x, idx)
    idx_t = _leaf(idx)
    if unbatched:
        out, idx_t = out.squeeze(0), idx_t.squeeze(0)
    if out._tape is not None:
        # (PyTorch's kernel takes the unbatched input as it is: one node of it)
        name_result(out, f'AdaptiveMaxPool{spatial}DBackward0', (input,))
    return (out, idx_t) if return_indices else out


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool1d`` returning (output, indices)."""
    return _adaptive_max(input, output_size, 1, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool2d`` returning (output, indices)."""
    return _adaptive_max(input, output_size, 2, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool3d`` returning (output, indices)."""
    return _adaptive_max(input, output_size, 3, True)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """The maximum over PyTorch's adaptive windows of (N, C, L) input; with
    ``return_indices`` also each maximum's index.

    >>> import tape, tape.nn.functional as F
    >>> F.adaptive_max_pool1d(tape.tensor([[[1., 3., 2., 0., 5.]]]), 2)
    tensor([[[3., 5.]]])
    """
    return _adaptive_max(input, output_size, 1, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """The maximum over PyTorch's adaptive windows of (N, C, H, W) input (a ``None``
    in ``output_size`` keeps that size); with ``return_indices`` the flat
    ``h * W + w`` index of each maximum."""
    return _adaptive_max(input, output_size, 2, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """The maximum over PyTorch's adaptive windows of (N, C, D, H, W) input."""
    return _adaptive_max(input, output_size, 3, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """``max_pool1d`` returning (output, indices)."""
    return _C.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """``max_pool2d`` returning (output, indices)."""
    return _C.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """``max_pool3d`` returning (output, indices)."""
    return _C.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


class _AdaptiveMaxPoolNd(Module):
    _dims = 0

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):  # noqa: A002
        return _adaptive_max(input, self.output_size, self._dims, self.return_indices)

    def extra_repr(self):
        return f'output_size={self.output_size}'


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, L) input to a fixed length."""
    _dims = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, H, W) input to a fixed size."""
    _dims = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, D, H, W) input to a fixed size."""
    _dims = 3


# -- max unpooling -------------------------------------------------------------------------
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    input_size = tuple(input.shape)
    default = [(input_size[-len(kernel_size) + d] - 1) * stride[d] + kernel_size[d]
               - 2 * padding[d] for d in range(len(kernel_size))]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == len(kernel_size) + 2:
        output_size = output_size[2:]
    if len(output_size) != len(kernel_size):
        raise ValueError(f'output_size should be a sequence containing {len(kernel_size)} or '
                         f'{len(kernel_size) + 2} elements, but it has a length of '
                         f"'{len(output_size)}'")
    for d in range(len(kernel_size)):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f'{lo} and {hi})')
    return [int(v) for v in output_size]


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, spatial):  # noqa: A002
    opname = f'max_unpool{spatial}d'
    _tensor_arg(input, opname)
    k = _ntuple(kernel_size, spatial, 'kernel_size')
    s = k if stride is None else _ntuple(stride, spatial, 'stride')
    p = _ntuple(padding, spatial, 'padding')
    size = _unpool_output_size(input, k, s, p, output_size)
    if not isinstance(indices, Tensor) or _arr(indices).dtype != np.int64:
        raise RuntimeError(f'{opname}(): Expected indices to have dtype int64 (Long), but got '
                           f'{_arr(indices).dtype if isinstance(indices, Tensor) else indices}')
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f'Expected shape of indices to be same as that of the input tensor '
                           f'({list(input.shape)}) but got indices tensor with shape: '
                           f'{list(indices.shape)}')
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f'{opname}(): Expected {spatial + 1}D or {spatial + 2}D tensor, but '
                           f'got {list(input.shape)}')
    from .._tape import note_value_use
    note_value_use(opname)                  # (the indices are baked in)
    unbatched = input.dim() == spatial + 1
    x = input.unsqueeze(0) if unbatched else input
    idx = _arr(indices)
    idx = idx[None] if unbatched else idx
    n, c = (int(v) for v in x.shape[:2])
    plane = int(math.prod(size))
    if idx.size and (idx.min() < 0 or idx.max() >= plane):
        bad = idx[(idx < 0) | (idx >= plane)].reshape(-1)[0]
        raise RuntimeError(f'Found an invalid max index: {bad} (output volumes are of size '
                           + 'x'.join(str(v) for v in size) + ')')
    idx = np.ascontiguousarray(idx, np.int64)
    flat = idx.reshape(n * c, -1) + (np.arange(n * c, dtype=np.int64) * plane)[:, None]
    flat = flat.reshape(-1)
    _, first_rev = np.unique(flat[::-1], return_index=True)
    if first_rev.size != flat.size:
        # an index written twice keeps the last value, as PyTorch's serial loop; the
        # gradient still reads every input's position (PyTorch's gather backward)
        last = np.zeros(flat.size, bool)
        last[flat.size - 1 - first_rev] = True
        m = _leaf(last.reshape(x.shape).astype(_arr(x).dtype))
        x = x * m + (x - x.detach()) * (1 - m)
    out = _C._PoolScatter.apply(x, idx, (n, c) + tuple(size))
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of ``max_pool1d``: each value written at its index, zeros
    elsewhere."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of ``max_pool2d``: each value written at its flat
    ``h * W + w`` index, zeros elsewhere.

    >>> import tape, tape.nn.functional as F
    >>> x = tape.tensor([[[[1., 3.], [4., 2.]]]])
    >>> y, i = F.max_pool2d(x, 2, return_indices=True)
    >>> F.max_unpool2d(y, i, 2)
    tensor([[[[0., 0.],
              [4., 0.]]]])
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of ``max_pool3d``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


class _MaxUnpoolNd(Module):
    _dims = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._dims
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def forward(self, input, indices, output_size=None):  # noqa: A002
        return _max_unpool(input, indices, self.kernel_size, self.stride, self.padding,
                           output_size, self._dims)

    def extra_repr(self):
        return f'kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}'


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``."""
    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d``."""
    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``."""
    _dims = 3


# -- power-average pooling --------------------------------------------------------------
def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, spatial):  # noqa: A002
    F = _F()
    maxp = (_C.max_pool1d, _C.max_pool2d, _C.max_pool3d)[spatial - 1]
    avgp = (_C.avg_pool1d, _C.avg_pool2d, _C.avg_pool3d)[spatial - 1]
    if isinstance(norm_type, (int, float)):
        if norm_type == float('inf'):
            return maxp(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float('inf'):
            return -maxp(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if spatial == 1:
        numel = kernel_size if not isinstance(kernel_size, (list, tuple)) else kernel_size[0]
    else:
        numel = int(math.prod(_ntuple(kernel_size, spatial)))
    if stride is not None:
        out = avgp(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avgp(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * F.relu(out.abs())).mul(numel).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """``(sum over each window of x^p)^(1/p)`` of (N, C, L) input."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """``(sum over each window of x^p)^(1/p)`` of (N, C, H, W) input.

    >>> import tape, tape.nn.functional as F
    >>> F.lp_pool2d(tape.full((1, 1, 2, 2), 2.), 2, 2)
    tensor([[[[4.]]]])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """``(sum over each window of x^p)^(1/p)`` of (N, C, D, H, W) input."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


class _LPPoolNd(Module):
    _dims = 0

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        return _lp_pool(input, float(self.norm_type), self.kernel_size, self.stride,
                        self.ceil_mode, self._dims)

    def extra_repr(self):
        return (f'norm_type={self.norm_type}, kernel_size={self.kernel_size}, '
                f'stride={self.stride}, ceil_mode={self.ceil_mode}')


class LPPool1d(_LPPoolNd):
    """Power-average pooling of (N, C, L) input."""
    _dims = 1


class LPPool2d(_LPPoolNd):
    """Power-average pooling of (N, C, H, W) input."""
    _dims = 2


class LPPool3d(_LPPoolNd):
    """Power-average pooling of (N, C, D, H, W) input."""
    _dims = 3


# -- local response norm -------------------------------------------------------------------
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """``x / (k + alpha * mean of x^2 over ``size`` neighbouring channels)^beta``
    (PyTorch's composition: a zero-padded average over the channel dim)."""
    F = _F()
    dim = input.dim()
    if dim < 3:
        raise ValueError(f'Expected 3D or higher dimensionality                          '
                         f'input (got {dim} dimensions)')
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = div.unsqueeze(1)
        div = F.pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = _C.avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = F.pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = _C.avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.reshape(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


class LocalResponseNorm(Module):
    """Normalize each channel by its neighbours' energy (``F.local_response_norm``)."""
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):  # noqa: A002
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f'{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}'


# -- embedding_bag -------------------------------------------------------------------------
_MODES = {'sum': 0, 'mean': 1, 'max': 2}


@node_named('EmbeddingBagBackward0', 'weight', 'per_sample_weights')
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode='mean', sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of ``weight``'s rows: ``input`` is 2-D (one bag
    per row) or 1-D with ``offsets`` (the start of each bag).  Entries equal to
    ``padding_idx`` are left out; ``per_sample_weights`` scales each row (``'sum'``
    only); an empty bag gives zeros.

    >>> import tape, tape.nn.functional as F
    >>> w = tape.arange(6.).reshape(3, 2)
    >>> F.embedding_bag(tape.tensor([0, 2, 1]), w, tape.tensor([0, 2]), mode='sum')
    tensor([[4., 6.],
            [2., 3.]])
    """
    from .._tape import note_value_use
    note_value_use('embedding_bag')         # (the indices and offsets are baked in)
    F = _F()
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding_bag(): argument 'weight' (position 2) must be Tensor, "
                        f'not {type(weight).__name__}')
    if weight.dim() != 2:
        raise ValueError(f'weight has to be a 2D Tensor, but got Tensor of dimension '
                         f'{weight.dim()}')
    idx = np.asarray(input._data if isinstance(input, Tensor) else input)
    if idx.dtype.kind not in 'iu':
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"{_torch_dtype(idx.dtype)} instead (while checking arguments for "
                           f"embedding_bag)")
    psw = per_sample_weights
    if psw is not None and tuple(psw.shape) != tuple(idx.shape):
        raise ValueError(f'embedding_bag: If per_sample_weights ({tuple(psw.shape)}) is not '
                         f'None, then it must have the same shape as the input '
                         f'({tuple(idx.shape)})')
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError('if input is 2D, then offsets has to be None, as input is treated '
                             'is a mini-batch of fixed length sequences. However, found '
                             f'offsets of type {type(offsets)}')
        b, m = idx.shape
        offs = np.arange(0, b * m, m, dtype=np.int64) if m else np.zeros(b, np.int64)
        idx = idx.reshape(-1)
        if psw is not None:
            psw = psw.reshape(-1)
        last = False
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError('offsets has to be a 1D Tensor but got None')
        offs = np.asarray(offsets._data if isinstance(offsets, Tensor) else offsets)
        if offs.ndim != 1:
            raise ValueError('offsets has to be a 1D Tensor')
        offs = offs.astype(np.int64)
        last = include_last_offset
    else:
        raise ValueError(f'input has to be 1D or 2D Tensor, but got Tensor of dimension '
                         f'{idx.ndim}')
    if mode not in _MODES:
        raise ValueError('mode has to be one of sum, mean or max')
    if max_norm is not None:
        F.embedding(_leaf(idx.astype(np.int64)), weight, max_norm=max_norm,
                    norm_type=norm_type)        # (renormalizes the used rows in place)
    if psw is not None and mode != 'sum':
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if scale_grad_by_freq and mode == 'max':
        raise ValueError('max mode does not support scaling the gradient by the frequency')
    if sparse:
        raise NotImplementedError('embedding_bag: sparse gradients are not supported by tape; '
                                  'use sparse=False (the gradient is then dense)')
    num, dim = (int(v) for v in weight.shape)
    flat = idx.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= num):
        bad = flat[(flat < 0) | (flat >= num)][0]
        raise IndexError(f'embedding_bag: Expected idx >= 0 && idx < num_embeddings but found '
                         f'idx to be {bad}')
    if offs.size and offs[0] != 0:
        raise RuntimeError(f'offsets[0] has to be 0, i.e., the first sequence in the mini-batch '
                           f'has to start from position 0. However, got {offs[0]}')
    if offs.size and offs[-1] > flat.size:
        raise RuntimeError(f'offsets[-1] can not be greater than input\'s length '
                           f'({flat.size}), but got offsets[-1] of {offs[-1]}')
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += num
    nb = offs.size - 1 if last else offs.size
    if nb < 0:
        nb = 0
    ends = np.append(offs[1:], flat.size) if not last else offs[1:]
    bag = np.zeros(flat.size, np.int64)
    for i in range(nb):
        bag[offs[i]:ends[i]] = i
    keep = np.zeros(flat.size, bool)
    for i in range(nb):
        keep[offs[i]:ends[i]] = True
    if padding_idx is not None:
        keep &= flat != padding_idx
    pos = np.nonzero(keep)[0]
    rows = weight.index_select(0, _leaf(flat[pos]))           # (M, dim)
    if scale_grad_by_freq and pos.size:
        # each row's gradient divided by a frequency, as PyTorch's CPU kernel does it:
        # the k-th smallest distinct index by the count of the k-th smallest index
        # (its own count when no smaller index repeats)
        counts = np.bincount(flat, minlength=num)
        uniq, srt = np.unique(flat), np.sort(flat)
        div = np.ones(num, np.int64)
        div[uniq] = counts[srt[:uniq.size]]
        freq = div[flat[pos]].astype(_arr(weight).dtype)
        det = rows.detach()
        rows = det + (rows - det) * _leaf((1.0 / freq)[:, None])
    bag_of = bag[pos]
    counts = np.bincount(bag_of, minlength=nb)
    dt = _arr(weight).dtype
    if mode == 'max':
        arg = np.zeros((nb, dim), np.int64)
        wd = _arr(rows)
        has = counts > 0
        for i in np.nonzero(has)[0]:
            sel = np.nonzero(bag_of == i)[0]
            arg[i] = sel[np.argmax(wd[sel], axis=0)]
        out = rows.gather(0, _leaf(arg)) if rows.shape[0] else _zeros((nb, dim), dt)
        if not has.all():
            out = out * _leaf(has[:, None].astype(dt))
        return out
    if psw is not None:
        rows = rows * psw.reshape(-1)[_leaf(pos)].unsqueeze(1)
    out = _zeros((nb, dim), dt).index_add(0, _leaf(bag_of), rows)
    if mode == 'mean':
        out = out / _leaf(np.maximum(counts, 1).astype(dt)[:, None])
    return out


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (``F.embedding_bag``); weight
    ~ N(0, 1), the ``padding_idx`` row zero."""
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, 'padding_idx must be within num_embeddings'
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, \
                    'padding_idx must be within num_embeddings'
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = _empty((num_embeddings, embedding_dim), dtype)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError('Shape of weight does not match num_embeddings and '
                                     'embedding_dim')
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self):
        from .._grad_mode import no_grad
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f'{self.num_embeddings}, {self.embedding_dim}'
        if self.max_norm is not None:
            s += f', max_norm={self.max_norm}'
        if self.norm_type != 2:
            s += f', norm_type={self.norm_type}'
        if self.scale_grad_by_freq is not False:
            s += f', scale_grad_by_freq={self.scale_grad_by_freq}'
        s += f', mode={self.mode!r}'
        if self.padding_idx is not None:
            s += f', padding_idx={self.padding_idx}'
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode='mean', sparse=False,
                        include_last_offset=False, padding_idx=None):
        if embeddings.dim() != 2:
            raise AssertionError('Embeddings parameter is expected to be 2-dimensional')
        rows, cols = embeddings.shape
        bag = cls(rows, cols, _weight=embeddings, max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag


# -- rrelu ---------------------------------------------------------------------------------
@node_named('RreluWithNoiseBackward0', 'input')
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    """Randomized leaky ReLU: in training each negative element is scaled by its own
    slope drawn from U(lower, upper) (tape's global generator); in eval by the
    fixed ``(lower + upper) / 2``."""
    F = _F()
    _tensor_arg(input, 'rrelu')
    dt = _arr(input).dtype
    if dt.kind != 'f':
        raise NotImplementedError(f'"rrelu_with_noise" not implemented for '
                                  f"'{_torch_dtype(dt)}'")
    if lower > upper:
        raise RuntimeError(f'Lower bound should be less than or equal to the upper bound, but '
                           f'got lower={lower} and upper={upper}')
    if not training:
        return F.leaky_relu(input, (lower + upper) / 2, inplace)
    from .._tape import note_value_use
    note_value_use('rrelu')                 # (the random slopes are baked in)
    d = _arr(input)
    slopes = F._rng_of(None).uniform(lower, upper, d.shape).astype(dt)
    noise = np.where(d <= 0, slopes, np.ones((), dt)).astype(dt)
    if inplace:
        return F._maybe_inplace(input, lambda a: a * _leaf(noise), True)
    return input * _leaf(noise)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    """In-place ``rrelu``."""
    return rrelu(input, lower, upper, training, inplace=True)


class RReLU(Module):
    """Randomized leaky ReLU (``F.rrelu``, training set by the module's mode)."""
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f'lower={self.lower}, upper={self.upper}' + (', inplace=True' if self.inplace
                                                              else '')
