"""``tape.nn.init``: in-place initialisers, as in ``torch.nn.init`` (drawn from
tape's generators, so the values differ from PyTorch's; the distributions match).

>>> import tape
>>> w = tape.nn.init.zeros_(tape.empty(2, requires_grad=True))
>>> w
tensor([0., 0.], requires_grad=True)
"""
import math as _math

import math
import warnings

import numpy as np

from .._grad_mode import no_grad
from .._tensor import _leaf

__all__ = ['calculate_gain', 'uniform_', 'normal_', 'trunc_normal_', 'constant_', 'ones_',
           'zeros_', 'eye_', 'xavier_uniform_', 'xavier_normal_', 'kaiming_uniform_',
           'kaiming_normal_', 'orthogonal_', 'dirac_', 'sparse_']


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = ('linear', 'conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d',
              'conv_transpose3d', 'sigmoid')
    if nonlinearity in linear:
        return 1
    if nonlinearity == 'tanh':
        return 5.0 / 3
    if nonlinearity == 'relu':
        return _math.sqrt(2.0)
    if nonlinearity == 'leaky_relu':
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f'negative_slope {param} not a valid number')
        return _math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == 'selu':
        return 3.0 / 4
    raise ValueError(f'Unsupported nonlinearity {nonlinearity}')


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError('Fan in and fan out can not be computed for tensor with fewer than 2 '
                         'dimensions')
    field = 1
    for n in tensor.shape[2:]:
        field *= n
    return tensor.shape[1] * field, tensor.shape[0] * field


def _fill(tensor, values):
    with no_grad():
        tensor.copy_(_leaf(np.asarray(values, dtype=np.asarray(tensor._data).dtype)))
    return tensor


def _rng(generator):
    from .. import _gen
    return _gen(generator)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, _rng(generator).uniform(a, b, tuple(tensor.shape)))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(tensor, _rng(generator).normal(mean, std, tuple(tensor.shape)))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal draws redrawn until they fall in ``[a, b]``."""
    rng, n = _rng(generator), int(math.prod(tuple(tensor.shape)))
    out = np.empty(0)
    while out.size < n:
        d = rng.normal(mean, std, max(2 * (n - out.size), 16))
        out = np.concatenate([out, d[(d >= a) & (d <= b)]])
    return _fill(tensor, out[:n].reshape(tuple(tensor.shape)))


def constant_(tensor, val):
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError('Only tensors with 2 dimensions are supported')
    return _fill(tensor, np.eye(*tuple(tensor.shape)))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = _math.sqrt(3.0) * gain * _math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * _math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if tensor.numel() == 0:
        warnings.warn('Initializing zero-element tensors is a no-op', stacklevel=3)
        return 0.0
    if mode not in ('fan_in', 'fan_out'):
        raise ValueError(f'Mode {mode} not supported, please use one of fan_in, fan_out')
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == 'fan_in' else fan_out
    return calculate_gain(nonlinearity, a) / _math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode='fan_in', nonlinearity='leaky_relu', generator=None):
    bound = _math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode='fan_in', nonlinearity='leaky_relu', generator=None):
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw."""
    if tensor.dim() < 2:
        raise ValueError('Only tensors with 2 or more dimensions are supported')
    if tensor.numel() == 0:
        return tensor           # (no-op, as PyTorch's)
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def dirac_(tensor, groups=1):
    """Identity taps: for a (out, in, *k) convolution weight, 1 at the kernel's
    centre on each group's diagonal (input channel i to output channel i), 0
    elsewhere, so the convolution keeps as many input channels as it can."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError('Only tensors with 3, 4, or 5 dimensions are supported')
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError('dim 0 must be divisible by groups')
    out_per_group = sizes[0] // groups
    w = np.zeros(sizes)
    centre = tuple(k // 2 for k in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            w[(g * out_per_group + d, d) + centre] = 1
    return _fill(tensor, w)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-d tensor of normal draws (mean 0, ``std``) with ``ceil(sparsity * rows)``
    zeros in each column, at random rows."""
    if tensor.dim() != 2:
        raise ValueError('Only tensors with 2 dimensions are supported')
    rows, cols = tuple(tensor.shape)
    rng = _rng(generator)
    w = rng.normal(0.0, std, (rows, cols))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        w[rng.permutation(rows)[:zeros], c] = 0
    return _fill(tensor, w)


def _deprecated(fn):
    """PyTorch's old non-underscore names, which warn and call the in-place form."""
    old = fn.__name__[:-1]

    def f(*args, **kwargs):
        warnings.warn(f'`nn.init.{old}` is now deprecated in favor of `nn.init.{fn.__name__}`.',
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    f.__name__ = old
    return f


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
