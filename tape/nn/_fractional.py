"""Fractional max pooling (Graham, 2014), as PyTorch's CPU kernels:
``F.fractional_max_pool2d/3d`` (with ``_with_indices``) and the modules
``FractionalMaxPool2d/3d``.

Each (sample, channel) plane has its random numbers u in [0, 1) (``_random_samples``
of shape (N, C, 2) or (N, C, 3), drawn with ``tape.rand`` when not given); along a
dimension of input size n, window size k and output size m, window i starts at

    int((i + u) * alpha) - int(u * alpha),   alpha = (n - k) / (m - 1)

(the last one at n - k), in the input's dtype as PyTorch computes it; u[..., 0]
goes with the last dimension (W), u[..., 1] with H (2-d), and u[..., 0], 1, 2 with
T, H, W (3-d).  Each output is its window's maximum (the first one on ties, a
NaN if the window has one) and the index is its flat position in the plane.  The
output is a gather of the input at those positions, so the gradient goes to them
(summed where windows share a maximum) and differentiates again.
"""
import numpy as np

from .. import _ops
from .._tape import note_value_use
from .._tensor import Tensor, _leaf
from .modules import Module

__all__ = ['FractionalMaxPool2d', 'FractionalMaxPool3d']


def _tuple(v, n):
    if isinstance(v, (list, tuple)):
        return tuple(v)
    return (v,) * n


def _starts(u, n_in, n_out, k, dt):
    """Window starts (planes, n_out) for the samples ``u`` (planes,)."""
    seq = np.empty((u.shape[0], n_out), np.int64)
    if n_out > 1:
        alpha = dt.type(n_in - k) / dt.type(n_out - 1)
        i = np.arange(n_out - 1).astype(dt)
        seq[:, :-1] = ((i[None, :] + u[:, None]) * alpha).astype(np.int64) \
            - (u * alpha).astype(np.int64)[:, None]
    if n_out > 0:
        seq[:, -1] = n_in - k
    return seq


def _fractional(input, kernel_size, output_size, output_ratio, samples, nd):  # noqa: A002
    name = f'fractional_max_pool{nd}d'
    if not isinstance(input, Tensor):
        raise TypeError(f'{name}(): argument \'input\' must be Tensor, not '
                        f'{type(input).__name__}')
    shape = tuple(input.shape)
    if len(shape) < nd + 1 and samples is None:
        # (PyTorch's Python reads the channels, size(-nd - 1), to draw the samples)
        r = max(len(shape), 1)
        raise IndexError(f'Dimension out of range (expected to be in range of [{-r}, {r - 1}], '
                         f'but got {-nd - 1})')
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f'{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: '
                           f'{list(shape)}')
    if output_size is None and output_ratio is None:
        raise ValueError(f'{name} requires specifying either an output_size or an '
                         f'output_ratio')
    if output_size is None:
        if nd == 2 and isinstance(output_ratio, (list, tuple)) and len(output_ratio) > 2:
            raise ValueError('fractional_max_pool2d requires output_ratio to either be a '
                             'single Int or tuple of Ints.')
        ratio = _tuple(output_ratio, nd)
        output_size = [int(shape[-nd + i] * ratio[i]) for i in range(nd)]
    ks, outs = _tuple(kernel_size, nd), _tuple(output_size, nd)
    if len(ks) != nd:
        raise RuntimeError(f'{name}: kernel_size must either be a single Int or tuple of '
                           f'{nd} Ints (got {list(ks)})')
    if len(outs) != nd:
        raise RuntimeError(f'{name}: output_size must either be a single Int or tuple of '
                           f'{nd} Ints (got {list(outs)})')
    ks, outs = tuple(int(k) for k in ks), tuple(int(o) for o in outs)
    batched = len(shape) == nd + 2
    x = input if batched else input.unsqueeze(0)
    xs = tuple(x.shape)
    n, c, spatial = xs[0], xs[1], xs[2:]
    dt = np.asarray(x._data).dtype
    if dt.kind != 'f':
        raise NotImplementedError(f'"{name}_out_frame" not implemented for \'{dt}\'')
    if any(k <= 0 for k in ks):
        raise RuntimeError(f'{name}(): kernel_size must be greater than zero, but got '
                           f'{list(ks)}')
    # PyTorch's checks, in its order: the 2-d kernel allows a window to end at the
    # input's edge for the last output, the 3-d one does not
    order, where, strict = ((0, 1), f'{name}()', False) if nd == 2 else \
        ((0, 2, 1), f'{name}_out()', True)
    for i in order:
        k, o, s = ks[i], outs[i], spatial[i]
        if o + k - 1 >= s if strict else o + k - 1 > s:
            what = ('time', 'height', 'width')[3 - nd + i]
            raise RuntimeError(f'{where}: pool {what} {k} too large relative to input {what} '
                               f'{s} (output {what} {o}, input of shape {list(shape)})')
    if samples is None:
        import tape
        samples = tape.rand(n, c, nd, dtype=x.dtype)
    sd = np.asarray(samples._data if isinstance(samples, Tensor) else samples)
    if sd.shape != (n, c, nd):
        raise RuntimeError(f'{name}(): Expected _random_samples of shape {[n, c, nd]}, but '
                           f'got {list(sd.shape)}')
    if isinstance(samples, Tensor):
        note_value_use(name)            # (the windows' positions are baked in)
    note_value_use(name)                # (which element of a window is the maximum)
    u = sd.astype(dt).reshape(n * c, nd)
    # u[..., 0] is W's in 2-d and T's in 3-d (PyTorch's kernels)
    cols = (1, 0) if nd == 2 else (0, 1, 2)
    starts = [_starts(u[:, j], s, o, k, dt) for j, s, o, k in zip(cols, spatial, outs, ks)]
    # flat positions in the plane of every window element: (planes, *outs, *ks)
    strides = [int(np.prod(spatial[i + 1:])) for i in range(nd)]
    pos = np.zeros((n * c,) + outs + ks, np.int64)
    for i in range(nd):
        sh = [n * c] + [1] * (2 * nd)
        sh[1 + i] = outs[i]
        st = starts[i].reshape(sh)
        sh = [1] * (1 + 2 * nd)
        sh[1 + nd + i] = ks[i]
        pos += (st + np.arange(ks[i]).reshape(sh)) * strides[i]
    pos = pos.reshape((n * c,) + outs + (-1,))
    xd = np.asarray(x._data).reshape(n * c, -1)
    planes = np.arange(n * c).reshape((-1,) + (1,) * (nd + 1))
    vals = xd[planes, pos]
    nan = np.isnan(vals)
    k_all = vals.shape[-1]
    pick = np.where(nan.any(-1),
                    k_all - 1 - np.argmax(nan[..., ::-1], -1),   # the last NaN
                    np.argmax(np.where(nan, -np.inf, vals), -1))  # the first maximum
    idx = np.take_along_axis(pos, pick[..., None], -1)[..., 0]
    flat = _ops.reshape(x, (n, c, -1))
    out = flat.gather(2, _leaf(idx.reshape(n, c, -1)))
    out = _ops.reshape(out, (n, c) + outs)
    ind = _leaf(idx.reshape((n, c) + outs))
    if not batched:
        out, ind = out.squeeze(0), ind.squeeze(0)
    return out, ind


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    out = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return out if return_indices else out[0]


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    out = _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return out if return_indices else out[0]


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        nd = self._nd
        name = f'FractionalMaxPool{nd}d'
        if nd == 3 and ((isinstance(kernel_size, int) and kernel_size <= 0) or (
                isinstance(kernel_size, (tuple, list)) and not all(k > 0 for k in kernel_size))):
            raise ValueError(f'kernel_size must be greater than 0, but got {kernel_size}')
        self.kernel_size = _tuple(kernel_size, nd)
        self.return_indices = return_indices
        self.register_buffer('_random_samples', _random_samples)
        self.output_size = _tuple(output_size, nd) if output_size is not None else None
        self.output_ratio = _tuple(output_ratio, nd) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f'{name} requires specifying either an output size, or a pooling '
                             f'ratio')
        if output_size is not None and output_ratio is not None:
            raise ValueError('only one of output_size and output_ratio may be specified')
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f'output_ratio must be between 0 and 1 (got {output_ratio})')

    def forward(self, input):  # noqa: A002
        out = _fractional(input, self.kernel_size, self.output_size, self.output_ratio,
                          self._random_samples, self._nd)
        return out if self.return_indices else out[0]


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-d fractional max pooling over (N, C, H, W) or (C, H, W) input."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-d fractional max pooling over (N, C, T, H, W) or (C, T, H, W) input."""
    _nd = 3
