"""Convolution, pooling and batch-norm layers, as in ``torch.nn``: the same
constructor arguments, attributes, parameter and buffer names (so a PyTorch
``state_dict`` loads as is), reprs and initialisation (drawn from tape's
generator, so the values differ from PyTorch's; the distributions match).

>>> import tape
>>> tape.nn.Conv2d(1, 8, 3)
Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1))
>>> tape.nn.BatchNorm2d(8)(tape.randn(2, 8, 4, 4)).shape
tape.Size([2, 8, 4, 4])
"""
import math as _math

import numpy as np

from .._grad_mode import no_grad
from .._tensor import _leaf
from . import _conv as _F
from . import functional as F
from . import init
from .modules import Module, _affine_params, _dtype, _empty, _reset_affine

__all__ = ['Conv1d', 'Conv2d', 'Conv3d', 'ConvTranspose1d', 'ConvTranspose2d',
           'ConvTranspose3d', 'MaxPool1d',
           'MaxPool2d', 'MaxPool3d', 'AvgPool1d', 'AvgPool2d', 'AvgPool3d', 'AdaptiveAvgPool1d',
           'AdaptiveAvgPool2d', 'AdaptiveAvgPool3d', 'BatchNorm1d', 'BatchNorm2d', 'BatchNorm3d']


def _ntuple(v, n):
    if isinstance(v, (list, tuple)):
        return tuple(v)
    return (v,) * n


class _ConvNd(Module):
    _dims = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode='zeros', device=None,
                 dtype=None, output_padding=0):
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError('groups must be a positive integer')
        if in_channels % groups != 0:
            raise ValueError('in_channels must be divisible by groups')
        if out_channels % groups != 0:
            raise ValueError('out_channels must be divisible by groups')
        if isinstance(padding, str):
            if padding not in ('same', 'valid'):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == 'same' and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ('zeros', 'reflect', 'replicate', 'circular'):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                             f"'circular'], but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's order (last dim first, low then high) for the non-zero padding modes
        if padding == 'same':
            pads = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            self._reversed_padding_repeated_twice = pads
        elif padding == 'valid':
            self._reversed_padding_repeated_twice = [0, 0] * n
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding)
                                                     for _ in range(2)]
        if self._transposed:        # PyTorch's layout: (in, out/groups, k...)
            self.weight = _empty((in_channels, out_channels // groups) + self.kernel_size,
                                 dtype)
        else:
            self.weight = _empty((out_channels, in_channels // groups) + self.kernel_size,
                                 dtype)
        if bias:
            self.bias = _empty((out_channels,), dtype)
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's default: kaiming_uniform(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        init.kaiming_uniform_(self.weight, a=_math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / _math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv(self, input, weight, bias):  # noqa: A002
        fn = (_F.conv1d, _F.conv2d, _F.conv3d)[self._dims - 1]
        if self.padding_mode != 'zeros':
            return fn(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                      weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        return self._conv(input, self.weight, self.bias)

    def extra_repr(self):
        n = self._dims
        s = (f'{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, '
             f'stride={self.stride}')
        if self.padding != (0,) * n:
            s += f', padding={self.padding}'
        if self.dilation != (1,) * n:
            s += f', dilation={self.dilation}'
        if self.output_padding != (0,) * n:
            s += f', output_padding={self.output_padding}'
        if self.groups != 1:
            s += f', groups={self.groups}'
        if self.bias is None:
            s += ', bias=False'
        if self.padding_mode != 'zeros':
            s += f', padding_mode={self.padding_mode}'
        return s


class Conv1d(_ConvNd):
    """1-d convolution over (N, C_in, L): weight (C_out, C_in/groups, k), bias (C_out,)."""
    _dims = 1


class Conv2d(_ConvNd):
    """2-d convolution over (N, C_in, H, W): weight (C_out, C_in/groups, kH, kW), bias
    (C_out,)."""
    _dims = 2


class Conv3d(_ConvNd):
    """3-d convolution over (N, C_in, D, H, W): weight (C_out, C_in/groups, kD, kH, kW),
    bias (C_out,)."""
    _dims = 3


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros',
                 device=None, dtype=None):
        if padding_mode != 'zeros':
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):  # noqa: A002
        """``self.output_padding``, or the one that gives ``output_size`` (its spatial
        sizes, optionally after batch and channel sizes)."""
        n = self._dims
        if output_size is None:
            return self.output_padding
        output_size = list(output_size)
        lead = 2 if input.dim() == n + 2 else 1
        if len(output_size) == lead + n:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f'ConvTranspose{n}D: for {input.dim()}D input, output_size must '
                             f'have {n} or {lead + n} elements (got {len(output_size)})')
        lo = [(input.shape[lead + i] - 1) * self.stride[i] - 2 * self.padding[i]
              + self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(n)]
        hi = [lo[i] + self.stride[i] - 1 for i in range(n)]
        for i in range(n):
            if not lo[i] <= output_size[i] <= hi[i]:
                raise ValueError(f'requested an output size of {output_size}, but valid sizes '
                                 f'range from {lo} to {hi} (for an input of '
                                 f'{list(input.shape[lead:])})')
        return tuple(int(output_size[i]) - lo[i] for i in range(n))

    def forward(self, input, output_size=None):  # noqa: A002
        fn = (_F.conv_transpose1d, _F.conv_transpose2d, _F.conv_transpose3d)[self._dims - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding,
                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution over (N, C_in, L): weight (C_in, C_out/groups, k), bias
    (C_out,); ``forward(input, output_size=None)``."""
    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-d convolution over (N, C_in, H, W): weight (C_in, C_out/groups, kH,
    kW), bias (C_out,); ``forward(input, output_size=None)`` picks the output padding
    that gives ``output_size``."""
    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-d convolution over (N, C_in, D, H, W): weight (C_in, C_out/groups, kD,
    kH, kW), bias (C_out,); ``forward(input, output_size=None)`` picks the output padding
    that gives ``output_size``."""
    _dims = 3


class _MaxPoolNd(Module):
    _dims = 0

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002
        fn = (_F.max_pool1d, _F.max_pool2d, _F.max_pool3d)[self._dims - 1]
        return fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                  ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f'kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, '
                f'dilation={self.dilation}, ceil_mode={self.ceil_mode}')


class MaxPool1d(_MaxPoolNd):
    """The maximum over each window of (N, C, L) input."""
    _dims = 1


class MaxPool2d(_MaxPoolNd):
    """The maximum over each window of (N, C, H, W) input."""
    _dims = 2


class MaxPool3d(_MaxPoolNd):
    """The maximum over each window of (N, C, D, H, W) input."""
    _dims = 3


class AvgPool1d(Module):
    """The mean over each window of (N, C, L) input."""
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        # PyTorch keeps AvgPool1d's sizes as 1-tuples (and AvgPool2d's as given)
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):  # noqa: A002
        return _F.avg_pool1d(input, self.kernel_size, self.stride, self.padding,
                             self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f'kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}'


class AvgPool2d(Module):
    """The mean over each window of (N, C, H, W) input."""
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        return _F.avg_pool2d(input, self.kernel_size, self.stride, self.padding,
                             self.ceil_mode, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f'kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}'


class AvgPool3d(AvgPool2d):
    """The mean over each window of (N, C, D, H, W) input."""
    def forward(self, input):  # noqa: A002
        return _F.avg_pool3d(input, self.kernel_size, self.stride, self.padding,
                             self.ceil_mode, self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool1d(Module):
    """Average pooling of (N, C, L) input to a fixed length."""
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        return _F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self):
        return f'output_size={self.output_size}'


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size."""
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        return _F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f'output_size={self.output_size}'


class AdaptiveAvgPool3d(Module):
    """Average pooling of (N, C, D, H, W) input to a fixed output size."""
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002
        return _F.adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self):
        return f'output_size={self.output_size}'


class _NormBase(Module):
    """PyTorch's ``_NormBase``: the per-channel affine parameters and running
    statistics that batch and instance normalization share (the buffers exist
    only with ``track_running_stats``)."""
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_params(self, (num_features,), affine, bias, dtype)
        if track_running_stats:
            dt = _dtype(dtype)
            self.register_buffer('running_mean', _leaf(np.zeros(num_features, dt)))
            self.register_buffer('running_var', _leaf(np.ones(num_features, dt)))
            self.register_buffer('num_batches_tracked', _leaf(np.array(0, np.int64)))
        else:
            self.register_buffer('running_mean', None)
            self.register_buffer('running_var', None)
            self.register_buffer('num_batches_tracked', None)
        self.reset_parameters()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        # as PyTorch: a state dict without a version (a plain dict, or one saved before
        # num_batches_tracked existed) may lack the count; the module keeps its own
        version = local_metadata.get('version', None)
        key = prefix + 'num_batches_tracked'
        if (version is None or version < 2) and self.track_running_stats \
                and key not in state_dict:
            state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None \
                else _leaf(np.array(0, np.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, assign)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def extra_repr(self):
        return (f'{self.num_features}, eps={self.eps}, momentum={self.momentum}, '
                f'affine={self.affine}, bias={self.bias is not None}, '
                f'track_running_stats={self.track_running_stats}')


class _BatchNorm(_NormBase):
    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:       # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        # batch statistics in training, and in eval when there are no running ones
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        # the buffers are passed only where they are read or updated
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) input, per channel C."""
    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f'expected 2D or 3D input (got {input.dim()}D input)')


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) input, per channel C."""
    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 4:
            raise ValueError(f'expected 4D input (got {input.dim()}D input)')


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) input, per channel C."""
    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 5:
            raise ValueError(f'expected 5D input (got {input.dim()}D input)')
