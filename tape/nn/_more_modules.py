"""More ``torch.nn`` modules: ``GroupNorm``, ``PReLU``, ``Unflatten``,
``ParameterDict``, the losses ``SmoothL1Loss``, ``HuberLoss``, ``KLDivLoss``,
``CosineSimilarity``, ``PairwiseDistance`` and the activations ``Softsign``,
``Hardtanh``, ``ReLU6``, ``Hardsigmoid``, ``Hardswish``, ``Mish``. Each is a thin
layer over the function of the same name in ``tape.nn.functional``, with
PyTorch's constructor arguments, parameter names, initialisation and repr.

>>> import tape
>>> tape.nn.GroupNorm(2, 4)
GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
>>> tape.nn.PReLU()(tape.tensor([-2.0, 3.0]))
tensor([-0.5000,  3.0000], grad_fn=<PreluKernelBackward0>)
"""
from collections import OrderedDict as _OrderedDict
from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping

import numpy as np

from .._tensor import Tensor
from . import functional as F
from . import init
from .modules import Module, Parameter, _affine_params, _empty, _Loss, _reset_affine

__all__ = ['GroupNorm', 'PReLU', 'Unflatten', 'ParameterDict', 'SmoothL1Loss', 'HuberLoss',
           'KLDivLoss', 'CosineSimilarity', 'PairwiseDistance', 'Softsign', 'Hardtanh',
           'ReLU6', 'Hardsigmoid', 'Hardswish', 'Mish']


# -- normalization and parametric activation -------------------------------------------
class GroupNorm(Module):
    """Normalize over groups of channels (``F.group_norm``); weight ones, bias zeros."""
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f'num_channels ({num_channels}) must be divisible by num_groups '
                             f'({num_groups})')
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_params(self, (num_channels,), affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):  # noqa: A002
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f'{self.num_groups}, {self.num_channels}, eps={self.eps}, '
                f'affine={self.affine}, bias={self.bias is not None}')


class PReLU(Module):
    """``x`` where positive, else ``weight * x``; ``weight`` (1 or C values) starts at
    ``init``."""
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):  # noqa: A002
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = _empty((num_parameters,), dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):  # noqa: A002
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f'num_parameters={self.num_parameters}'


# -- shapes and containers ---------------------------------------------------------------
class Unflatten(Module):
    """Expand dimension ``dim`` into ``unflattened_size``."""
    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f'unflattened_size must be a tuple of ints, but found type '
                            f'{type(unflattened_size).__name__}')
        for idx, elem in enumerate(unflattened_size):
            if not isinstance(elem, int):
                raise TypeError(f'unflattened_size must be tuple of ints, but found element of '
                                f'type {type(elem).__name__} at pos {idx}')
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):  # noqa: A002
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f'dim={self.dim}, unflattened_size={self.unflattened_size}'


# torch.typename of a CPU tensor, which ParameterDict's repr prints
_TYPENAMES = {'float32': 'FloatTensor', 'float64': 'DoubleTensor', 'float16': 'HalfTensor',
              'bfloat16': 'BFloat16Tensor', 'int64': 'LongTensor', 'int32': 'IntTensor',
              'int16': 'ShortTensor', 'int8': 'CharTensor', 'uint8': 'ByteTensor',
              'bool': 'BoolTensor', 'complex64': 'ComplexFloatTensor',
              'complex128': 'ComplexDoubleTensor'}


class ParameterDict(Module):
    """An ordered dict of parameters, each registered under its key (a plain tensor
    is made a Parameter). A plain dict is added in sorted key order, an OrderedDict,
    ParameterDict or sequence of pairs in its own order, as in PyTorch."""
    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key(key):
        if not isinstance(key, str):
            raise TypeError(f'Index given to ParameterDict cannot be used as a key as it is not a '
                            f"string (type is '{type(key).__name__}'). Open an issue on github "
                            'if you need non-string keys.')
        return key

    def __getitem__(self, key):
        return getattr(self, self._key(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        attr = self._key(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._key(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(_OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k, _ = self._keys.popitem()
        self._keys[k] = None        # back, so that the lookup and delete below work
        val = self[k]
        del self[k]
        return k, val

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        if not isinstance(parameters, _Iterable):
            raise TypeError('ParametersDict.update should be called with an iterable of '
                            'key/value pairs, but got ' + type(parameters).__name__)
        if isinstance(parameters, (_OrderedDict, ParameterDict)):
            for key, parameter in parameters.items():
                self[key] = parameter
        elif isinstance(parameters, _Mapping):
            for key, parameter in sorted(parameters.items()):
                self[key] = parameter
        else:
            for j, p in enumerate(parameters):
                if not isinstance(p, _Iterable):
                    raise TypeError(f'ParameterDict update sequence element #{j} should be '
                                    f'Iterable; is{type(p).__name__}')
                if len(p) != 2:
                    raise ValueError(f'ParameterDict update sequence element #{j} has length '
                                     f'{len(p)}; 2 is required')
                self[p[0]] = p[1]

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def extra_repr(self):
        lines = []
        for k, p in self.items():
            if isinstance(p, Tensor):
                size = 'x'.join(str(s) for s in p.shape)
                kind = 'Parameter' if isinstance(p, Parameter) else 'Tensor'
                name = _TYPENAMES.get(np.dtype(p.dtype).name, str(p.dtype))
                lines.append(f'  ({k}): {kind} containing: [torch.{name} of size {size}]')
            else:
                lines.append(f'  ({k}): Object of type: {type(p).__name__}')
        return '\n'.join(lines)

    def __call__(self, input):  # noqa: A002
        raise RuntimeError('ParameterDict should not be called.')


# -- losses and distances --------------------------------------------------------------
class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction='mean', beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction='mean', delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """``target * (log target - input)`` (``input`` log-probabilities); reduction
    'batchmean' divides the sum by the batch size, the mathematically correct mean."""
    def __init__(self, size_average=None, reduce=None, reduction='mean', log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# -- activations ---------------------------------------------------------------------
def _inplace_str(inplace, lead=''):
    return f'{lead}inplace=True' if inplace else ''


class Softsign(Module):
    def forward(self, input):  # noqa: A002
        return F.softsign(input)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f'max_val ({self.max_val}) must be greater than min_val '
                                 f'({self.min_val})')

    def forward(self, input):  # noqa: A002
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f'min_val={self.min_val}, max_val={self.max_val}{_inplace_str(self.inplace, ", ")}'


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace)


class Hardsigmoid(Module):
    # PyTorch prints no inplace flag for this one (and for Hardswish)
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.hardsigmoid(input, self.inplace)


class Hardswish(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.hardswish(input, self.inplace)


class Mish(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.mish(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace)
