"""``affine_grid`` and ``grid_sample``, as in ``torch.nn.functional``.

Both are compositions of differentiable tape ops, so their gradients (with respect to
``theta``, ``input`` and ``grid``) and second derivatives come from those ops:

- ``affine_grid`` is a constant base grid (PyTorch's ``linspace_from_neg_one``, with a
  column of ones) times ``theta`` transposed;
- ``grid_sample`` turns each grid coordinate into a source coordinate with PyTorch's
  unnormalisation, reflection and clipping (written with ``where`` so that, as in
  PyTorch's kernels, a coordinate clipped to a border passes no gradient), then reads
  the neighbouring pixels with ``gather`` (the indices and the in-bounds masks are
  constants computed in NumPy from the detached coordinates) and mixes them with
  weights that are polynomials of the fractional parts ``coord - floor(coord)``:
  linear for ``'bilinear'`` (trilinear for 5-d input), PyTorch's cubic convolution
  (A = -0.75) for ``'bicubic'``.  ``'nearest'`` rounds half to even, as PyTorch does,
  and its gradient with respect to the grid is zero.

>>> import tape
>>> import tape.nn.functional as F
>>> theta = tape.tensor([[[1., 0., 0.], [0., 1., 0.]]])
>>> F.affine_grid(theta, (1, 1, 1, 2), align_corners=False)
tensor([[[[-0.5000,  0.0000],
          [ 0.5000,  0.0000]]]])
>>> x = tape.arange(4.).reshape(1, 1, 2, 2)
>>> F.grid_sample(x, tape.zeros(1, 1, 1, 2), align_corners=True)
tensor([[[[1.5000]]]])
"""
import itertools as _itertools
import warnings as _warnings

import math

import numpy as np

from .._tensor import Tensor, _leaf

__all__ = ['affine_grid', 'grid_sample']

_ALIGN_WARNING = ('Default grid_sample and affine_grid behavior has changed to '
                  'align_corners=False since 1.3.0. Please specify align_corners=True if the '
                  'old behavior is desired. See the documentation of grid_sample for details.')

# PyTorch's scalar type names, for its dtype-mismatch message
_TYPE_NAMES = {'float64': 'Double', 'float32': 'Float', 'float16': 'Half', 'bfloat16': 'BFloat16',
               'int64': 'Long', 'int32': 'Int', 'int16': 'Short', 'int8': 'Char',
               'uint8': 'Byte', 'bool': 'Bool'}


def _np(t):
    return np.asarray(t.detach().numpy())


def _type_name(t):
    name = str(_np(t).dtype)
    return _TYPE_NAMES.get(name, name)


# -- affine_grid ---------------------------------------------------------------------------
def _linspace_from_neg_one(n, align_corners, dtype):
    """PyTorch's ``linspace_from_neg_one``: ``linspace(-1, 1, n)`` (filled from both ends,
    as ``torch.linspace``), scaled by ``(n - 1) / n`` without ``align_corners``."""
    if n <= 1:
        return np.zeros(max(n, 0), dtype)
    step = dtype.type(2) / dtype.type(n - 1)
    i = np.arange(n)
    half = n // 2
    r = np.where(i < half, dtype.type(-1) + step * i.astype(dtype),
                 dtype.type(1) - step * (n - 1 - i).astype(dtype)).astype(dtype)
    if not align_corners:
        r = (r * dtype.type(n - 1) / dtype.type(n)).astype(dtype)
    return r


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of affine maps ``theta`` ((N, 2, 3) for a 4-d
    ``size`` (N, C, H, W), (N, 3, 4) for a 5-d one): (N, H, W, 2) or (N, D, H, W, 3) of
    normalised (x, y[, z]) coordinates for ``grid_sample``.

    >>> import tape, tape.nn.functional as F
    >>> F.affine_grid(tape.eye(2, 3).unsqueeze(0), (1, 1, 2, 2), align_corners=False)
    tensor([[[[-0.5000, -0.5000],
              [ 0.5000, -0.5000]],
    <BLANKLINE>
             [[-0.5000,  0.5000],
              [ 0.5000,  0.5000]]]])
    """
    if not isinstance(theta, Tensor):
        raise TypeError(f'affine_grid(): argument \'theta\' must be Tensor, not '
                        f'{type(theta).__name__}')
    if align_corners is None:
        _warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    dtype = _np(theta).dtype
    if dtype.kind != 'f':
        raise ValueError(f'Expected theta to have floating point type, but got {theta.dtype}')
    size = tuple(int(v) for v in size)
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f'Expected a batch of 2D affine matrices of shape Nx2x3 for size '
                             f'{size}. Got {theta.shape}.')
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f'Expected a batch of 3D affine matrices of shape Nx3x4 for size '
                             f'{size}. Got {theta.shape}.')
        spatial = size[-3:]
    else:
        raise NotImplementedError(f'affine_grid only supports 4D and 5D sizes, for 2D and 3D '
                                  f'affine transforms, respectively. Got size {size}.')
    if align_corners and min(spatial) == 1:
        _warnings.warn('Since version 1.3.0, affine_grid behavior has changed for unit-size '
                       'grids when align_corners=True. This is not an intended use case of '
                       'affine_grid. See the documentation of affine_grid for details.',
                       stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f'Expected non-zero, positive output size. Got {size}')
    n = size[0]
    if theta.shape[0] != n:
        k = len(spatial) + 1
        raise RuntimeError(f'Expected size for first two dimensions of batch2 tensor to be: '
                           f'[{n}, {k}] but got: [{theta.shape[0]}, {k}].')
    # base grid (*spatial, k): x runs over the last dim, y over the one before, ...
    axes = [_linspace_from_neg_one(m, align_corners, dtype) for m in spatial]
    mesh = np.meshgrid(*axes, indexing='ij')
    base = np.stack(list(reversed(mesh)) + [np.ones(spatial, dtype)], -1).astype(dtype)
    count = int(math.prod(spatial))
    base = _leaf(np.ascontiguousarray(base.reshape(count, len(spatial) + 1)))
    from .. import matmul
    grid = matmul(base, theta.transpose(1, 2))                  # (N, count, k - 1)
    return grid.reshape((n,) + spatial + (len(spatial),))


# -- grid_sample: source coordinates -------------------------------------------------------
def _where(cond, a, b):
    from .. import where
    return where(_leaf(np.ascontiguousarray(cond)) if isinstance(cond, np.ndarray) else cond,
                 a, b)


def _unnormalize(c, size, align_corners):
    if align_corners:
        return (c + 1) * ((size - 1) / 2)
    return (c + 1) * (size / 2) - 0.5


def _clip(c, size):
    """Clamp to [0, size - 1]; as in PyTorch, a clipped coordinate (one at or past a
    border) passes no gradient."""
    return _where(c <= 0, 0.0, _where(c >= size - 1, float(size - 1), c))


def _zero_from(c):
    """Zeros shaped as ``c`` whose gradient into ``c`` is zero (and never NaN)."""
    return _where(np.zeros(tuple(c.shape), bool), c, 0.0)


def _reflect(c, size, align_corners):
    """PyTorch's reflection into [0, size - 1] (``align_corners``) or [-0.5, size - 0.5],
    with its gradient sign: +1 where the distance from the low end is zero."""
    if align_corners:
        twice_span, low = 2.0 * (size - 1), 0.0
        if size <= 1:
            return _zero_from(c)
    else:
        twice_span, low = 2.0 * size, -0.5
    d = c - low
    a = _where(d < 0, -d, d)
    flips = np.floor(_np(a) / twice_span)
    flips = np.where(np.isfinite(flips), flips, 0).astype(_np(a).dtype)
    extra = a - _leaf(flips * twice_span)
    other = twice_span - extra
    return _where(extra > other, other, extra) + low


def _pad_coord(c, size, padding_mode, align_corners):
    if padding_mode == 'border':
        return _clip(c, size)
    if padding_mode == 'reflection':
        return _clip(_reflect(c, size, align_corners), size)
    return c


def _index_np(coords, sizes):
    """The flat indices (clamped into range) and the in-bounds mask of integer-valued
    float coordinates, one array (N, P) per spatial dim."""
    flat, mask = 0, True
    stride = 1
    for c, m in reversed(list(zip(coords, sizes))):
        c = np.where(np.isfinite(c), c, -1.0)
        mask = mask & (c >= 0) & (c <= m - 1)
        i = np.clip(c, 0, m - 1).astype(np.int64)
        flat = flat + i * stride
        stride *= m
    return flat, mask


def _read(flat_in, coords, sizes):
    """``input[n, :, coords]`` (N, C, P), zero where the coordinates are out of bounds."""
    from .. import gather
    n, c = flat_in.shape[:2]
    idx, mask = _index_np(coords, sizes)
    p = idx.shape[1]
    idx = _leaf(np.ascontiguousarray(np.broadcast_to(idx[:, None, :], (n, c, p))))
    v = gather(flat_in, 2, idx)
    if mask is True or mask.all():
        return v
    return _where(np.ascontiguousarray(np.broadcast_to(mask[:, None, :], (n, c, p))), v, 0.0)


def _cubic_coeffs(t):
    """PyTorch's ``get_cubic_upsample_coefficients`` (A = -0.75) of a fraction ``t``."""
    a = -0.75

    def conv1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    u = 1.0 - t
    return [conv2(t + 1.0), conv1(t), conv1(u), conv2(u + 1.0)]


def _check_grid_sample(input, grid, mode, padding_mode):  # noqa: A002
    if not isinstance(input, Tensor):
        raise TypeError(f'grid_sample(): argument \'input\' must be Tensor, not '
                        f'{type(input).__name__}')
    if not isinstance(grid, Tensor):
        raise TypeError(f'grid_sample(): argument \'grid\' must be Tensor, not '
                        f'{type(grid).__name__}')
    if mode not in ('bilinear', 'nearest', 'bicubic'):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ('zeros', 'border', 'reflection'):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if _np(input).dtype != _np(grid).dtype:
        raise RuntimeError(f'expected scalar type {_type_name(input)} but found '
                           f'{_type_name(grid)}')
    nd = input.dim()
    if nd == 0 or grid.dim() == 0 or input.shape[0] != grid.shape[0]:
        raise RuntimeError(f'grid_sampler(): expected grid and input to have same batch size, '
                           f'but got input with sizes {list(input.shape)} and grid with sizes '
                           f'{list(grid.shape)}')
    if grid.shape[-1] != nd - 2:
        raise RuntimeError(f'grid_sampler(): expected grid to have size {nd - 2} in last '
                           f'dimension, but got grid with sizes {list(grid.shape)}')
    for i in range(2, nd):
        if input.shape[i] <= 0:
            raise RuntimeError(f'grid_sampler(): expected input to have non-empty spatial '
                               f'dimensions, but input has sizes {list(input.shape)} with '
                               f'dimension {i} being empty')
    want = 4 if nd == 4 else 5
    if nd != want or grid.dim() != want:
        raise RuntimeError(f'grid_sampler(): expected {want}D input and grid with same number '
                           f'of dimensions, but got input with sizes {list(input.shape)} and '
                           f'grid with sizes {list(grid.shape)}')
    if mode == 'bicubic' and nd != 4:
        raise RuntimeError('grid_sampler(): bicubic interpolation only supports 4D input')
    if _np(input).dtype.kind != 'f':
        raise NotImplementedError(f'"grid_sampler_{nd - 2}d_cpu" not implemented for '
                                  f'\'{_type_name(input)}\'')


def grid_sample(input, grid, mode='bilinear', padding_mode='zeros',  # noqa: A002
                align_corners=None):
    """Sample (N, C, H, W) ``input`` at the normalised (x, y) locations of ``grid``
    (N, H_out, W_out, 2), or (N, C, D, H, W) input at the (x, y, z) of a (N, D_out, H_out,
    W_out, 3) grid, giving (N, C, H_out, W_out) / (N, C, D_out, H_out, W_out).
    ``mode``: 'bilinear' (trilinear for 5-d input), 'nearest' or 'bicubic' (4-d only);
    ``padding_mode``: 'zeros', 'border' or 'reflection'.

    >>> import tape, tape.nn.functional as F
    >>> x = tape.arange(4.).reshape(1, 1, 2, 2)
    >>> F.grid_sample(x, tape.tensor([[[[-1., -1.], [2., 0.]]]]), align_corners=True,
    ...               padding_mode='border')
    tensor([[[[0., 2.]]]])
    """
    _check_grid_sample(input, grid, mode, padding_mode)
    if align_corners is None:
        _warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    align_corners = bool(align_corners)
    nsp = input.dim() - 2
    n, ch = input.shape[:2]
    sizes = tuple(input.shape[2:])
    out_sp = tuple(grid.shape[1:-1])
    p = int(math.prod(out_sp))
    flat_in = input.reshape(n, ch, int(math.prod(sizes)))
    g = grid.reshape(n, p, nsp)
    # the grid's (x, y[, z]) are the input's last, second-last[, third-last] dims
    raw = [g[:, :, nsp - 1 - k] for k in range(nsp)]
    src = [_unnormalize(raw[k], sizes[k], align_corners) for k in range(nsp)]

    if mode == 'bicubic':
        base = [np.floor(_np(c)) for c in src]
        t = [src[k] - _leaf(np.where(np.isfinite(base[k]), base[k], 0).astype(base[k].dtype))
             for k in range(nsp)]
        cy, cx = _cubic_coeffs(t[0]), _cubic_coeffs(t[1])
        out = None
        for j in range(4):
            row = None
            yj = _np(_pad_coord(_leaf(base[0] - 1 + j), sizes[0], padding_mode,
                                align_corners))
            for i in range(4):
                xi = _np(_pad_coord(_leaf(base[1] - 1 + i), sizes[1], padding_mode,
                                    align_corners))
                term = _read(flat_in, [np.trunc(yj), np.trunc(xi)], sizes) \
                    * cx[i].unsqueeze(1)
                row = term if row is None else row + term
            term = row * cy[j].unsqueeze(1)
            out = term if out is None else out + term
    elif mode == 'nearest':
        coords = [np.rint(_np(_pad_coord(c.detach(), sizes[k], padding_mode, align_corners)))
                  for k, c in enumerate(src)]
        out = _read(flat_in, coords, sizes)
        if grid.requires_grad:
            # PyTorch's grid gradient here is zeros, not None, and (as its backward reads
            # both operands) the first derivatives are themselves differentiable: add a
            # zero term that links them to the input and the grid
            zg = _zero_from(src[0]).unsqueeze(1)
            out = out + _where(np.zeros(tuple(out.shape), bool), out * zg, 0.0)
    else:
        src = [_pad_coord(c, sizes[k], padding_mode, align_corners) for k, c in enumerate(src)]
        base = [np.floor(_np(c)) for c in src]
        frac, rest = [], []
        for k in range(nsp):
            b = np.where(np.isfinite(base[k]), base[k], 0).astype(base[k].dtype)
            f = src[k] - _leaf(b)
            frac.append(f)
            rest.append(1.0 - f)
        out = None
        for corner in _itertools.product((0, 1), repeat=nsp):
            w = None
            for k in reversed(range(nsp)):      # x weight first, as PyTorch multiplies
                wk = frac[k] if corner[k] else rest[k]
                w = wk if w is None else w * wk
            term = _read(flat_in, [base[k] + corner[k] for k in range(nsp)], sizes) \
                * w.unsqueeze(1)
            out = term if out is None else out + term
    return out.reshape((n, ch) + out_sp)
