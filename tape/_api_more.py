"""More of ``torch``'s namespace and ``Tensor`` methods: window functions, the
top-level aliases of ``nn.functional`` (with torch's top-level signatures), the
process settings scripts call, ``asarray`` / ``frombuffer`` / ``empty_strided``,
the missing in-place forms of existing ops, and a few more methods (``cov``,
``histogram``, ``igamma``, ``put``, ``index_reduce``, random fills, ...).

Everything is installed by :func:`_install` only where a name does not exist yet.

>>> import tape
>>> tape.hann_window(4)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""
import builtins
import math
import sys
import warnings

import numpy as np

from ._composite_nodes import node_named
from . import _ops
from .return_types import make as _return_type
from . import _views
from ._tape import grad_mode
from ._tensor import Tensor, _leaf, _storage, _bump_version, _check_device, device

_REDUCTION = {0: 'none', 1: 'mean', 2: 'sum'}
_TORCH_NAMES = {'f2': 'Half', 'f4': 'Float', 'f8': 'Double', 'i1': 'Char', 'i2': 'Short',
                'i4': 'Int', 'i8': 'Long', 'u1': 'Byte', 'b1': 'Bool', 'c8': 'ComplexFloat',
                'c16': 'ComplexDouble'}


def _tape():
    return sys.modules['tape']


def _F():
    return sys.modules['tape'].nn.functional


def _tname(dt):
    dt = np.dtype(dt)
    return _TORCH_NAMES.get(dt.kind + str(dt.itemsize), str(dt))


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like)


def _dtype_or_default(dtype):
    from ._dtypes import default_dtype
    return np.dtype(default_dtype[0] if dtype is None else dtype)


def _finish(arr, requires_grad):
    t = _leaf(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _red(reduction):
    if isinstance(reduction, str):
        return reduction
    if reduction not in _REDUCTION:
        raise RuntimeError(f'{reduction} is not a valid value for reduction')
    return _REDUCTION[reduction]


# ============================================================ window functions

def _window(name, window_length, periodic, dtype, device_, requires_grad, body):
    _check_device(device_)
    dt = _dtype_or_default(dtype)
    if dt.kind != 'f':
        cname = {'i8': 'long int', 'i4': 'int', 'i2': 'short int', 'i1': 'signed char',
                 'u1': 'unsigned char', 'b1': 'bool'}.get(dt.kind + str(dt.itemsize), str(dt))
        raise RuntimeError(f'{name} expects floating point dtypes, got: TensorOptions(dtype='
                           f'{cname}, device=cpu, layout=Strided (default), requires_grad=false '
                           '(default), pinned_memory=false, memory_format=(nullopt))')
    if isinstance(window_length, bool) or not isinstance(window_length, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f'{type(window_length).__name__}')
    if window_length < 0:
        raise RuntimeError(f'{name} requires non-negative window_length, got '
                           f'window_length={window_length}')
    if window_length == 0:
        return _finish(np.zeros(0, dt), requires_grad)
    if window_length == 1:
        return _finish(np.ones(1, dt), requires_grad)
    n = window_length + 1 if periodic else window_length
    w = body(np.arange(n, dtype=np.float64), n)
    if periodic:
        w = w[:-1]
    return _finish(np.ascontiguousarray(w.astype(dt)), requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """``torch.hann_window``: ``0.5 - 0.5 cos(2 pi n / (N - 1))`` (N = length + 1 when
    ``periodic``, the last sample dropped)."""
    return _window('hann_window', window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 0.5 - 0.5 * np.cos(2 * math.pi * k / (n - 1)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """``torch.hamming_window``: ``alpha - beta cos(2 pi n / (N - 1))``."""
    return _window('hamming_window', window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: alpha - beta * np.cos(2 * math.pi * k / (n - 1)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """``torch.blackman_window``: ``0.42 - 0.5 cos(2 pi n/(N-1)) + 0.08 cos(4 pi n/(N-1))``."""
    def body(k, n):
        a = math.pi * k / (n - 1)
        return 0.08 * np.cos(4 * a) - 0.5 * np.cos(2 * a) + 0.42
    return _window('blackman_window', window_length, periodic, dtype, device, requires_grad,
                   body)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """``torch.bartlett_window``: the triangle ``1 - |2n/(N-1) - 1|``."""
    return _window('bartlett_window', window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: 1.0 - np.abs(2.0 * k / (n - 1) - 1.0))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """``torch.kaiser_window``: ``I0(beta sqrt(1 - ((n - a)/a)^2)) / I0(beta)``, a = (N-1)/2."""
    def body(k, n):
        a = (n - 1) / 2.0
        r = np.sqrt(np.maximum(0.0, 1.0 - ((k - a) / a) ** 2))
        return np.i0(beta * r) / np.i0(beta)
    return _window('kaiser_window', window_length, periodic, dtype, device, requires_grad, body)


# ======================================================= top-level functional aliases

def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``torch.conv1d``: ``nn.functional.conv1d``."""
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``torch.conv2d``: ``nn.functional.conv2d``."""
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """``torch.conv3d``: ``nn.functional.conv3d``."""
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """``torch.conv_transpose1d``: ``nn.functional.conv_transpose1d``."""
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """``torch.conv_transpose2d``: ``nn.functional.conv_transpose2d``."""
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """``torch.conv_transpose3d``: ``nn.functional.conv_transpose3d``."""
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enable=True):
    """``torch.layer_norm`` (``cudnn_enable`` is accepted and ignored)."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enabled=True):
    """``torch.group_norm`` (``cudnn_enabled`` is accepted and ignored)."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum,  # noqa: A002
               eps, cudnn_enabled):
    """``torch.batch_norm``: every argument positional and required, in aten's order
    (weight and bias before the running statistics)."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                           eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,  # noqa: A002
                  momentum, eps, cudnn_enabled):
    """``torch.instance_norm``: every argument positional and required, in aten's order."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """``torch.rms_norm``: ``nn.functional.rms_norm``."""
    return _F().rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: note the order (weight first) and ``padding_idx=-1`` (a
    negative index means no padding row, as aten's)."""
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return _F().embedding(indices, weight, pad, None, 2.0, scale_grad_by_freq, sparse)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """``torch.embedding_bag``: ``(output, offset2bag, bag_size, max_indices)``, weight
    first and ``mode`` an int (0 sum, 1 mean, 2 max).  The output is
    ``nn.functional.embedding_bag``'s; the three bookkeeping tensors follow torch's CPU
    kernel (an empty ``offset2bag`` and zero sizes in sum mode; ``max_indices`` a copy
    of ``bag_size`` in mean mode)."""
    modes = {0: 'sum', 1: 'mean', 2: 'max'}
    if mode not in modes:
        raise RuntimeError('mode has to be one of sum, mean or max')
    out = _F().embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, modes[mode],
                             sparse, per_sample_weights, include_last_offset, padding_idx)
    idx = np.asarray(indices._data).reshape(-1).astype(np.int64)
    off = np.asarray(offsets._data).reshape(-1).astype(np.int64)
    nb = len(off) - 1 if include_last_offset else len(off)
    ends = np.append(off[1:], len(idx)) if not include_last_offset else off[1:]
    starts = off[:nb]
    bag_of = np.zeros(len(idx), np.int64)
    for b in range(nb):
        bag_of[starts[b]:ends[b]] = b
    sizes = np.array([builtins.max(0, int(ends[b] - starts[b])) for b in range(nb)], np.int64)
    if mode == 0:
        return (out, _leaf(np.zeros(0 if per_sample_weights is None else len(idx), np.int64)
                           if per_sample_weights is None else bag_of),
                _leaf(np.zeros(nb, np.int64)), _leaf(np.zeros(nb, np.int64)))
    if mode == 1:
        return out, _leaf(bag_of), _leaf(sizes), _leaf(sizes.copy())
    w = np.asarray(weight._data)
    maxi = np.full((nb, w.shape[1]), -1, np.int64)
    for b in range(nb):
        rows = idx[starts[b]:ends[b]]
        if padding_idx is not None:
            rows = rows[rows != padding_idx]
        if len(rows):
            maxi[b] = rows[np.argmax(w[rows], axis=0)]
    return out, _leaf(bag_of), _leaf(sizes), _leaf(maxi)


def dropout(input, p, train):  # noqa: A002
    """``torch.dropout(input, p, train)``: all positional, no defaults."""
    return _F().dropout(input, p, train)


def alpha_dropout(input, p, train):  # noqa: A002
    """``torch.alpha_dropout(input, p, train)``."""
    return _F().alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):  # noqa: A002
    """``torch.feature_alpha_dropout(input, p, train)``."""
    return _F().feature_alpha_dropout(input, p, train)


def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """``torch.pixel_shuffle``."""
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """``torch.pixel_unshuffle``."""
    return _F().pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input, groups):  # noqa: A002
    """``torch.channel_shuffle``."""
    return _F().channel_shuffle(input, groups)


native_channel_shuffle = channel_shuffle


def _stride(stride):
    return None if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) \
        else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    """``torch.max_pool1d`` (an empty ``stride`` means the kernel size)."""
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    """``torch.max_pool2d`` (no ``return_indices``)."""
    return _F().max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    """``torch.max_pool3d`` (no ``return_indices``)."""
    return _F().max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False):
    """``torch.max_pool1d_with_indices``: ``(values, indices)``."""
    return tuple(_F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation,
                                 ceil_mode, return_indices=True))


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """``torch.avg_pool1d``."""
    return _F().avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                           count_include_pad)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """``torch.adaptive_avg_pool1d``."""
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):  # noqa: A002
    """``torch.adaptive_max_pool1d``: always ``(values, indices)``."""
    return tuple(_F().adaptive_max_pool1d(input, output_size, return_indices=True))


@node_named('EluBackward0', 'input')
def selu(input):  # noqa: A002
    """``torch.selu``."""
    return _F().selu(input)


@node_named('CeluBackward0', 'input')
def celu(input, alpha=1.0):  # noqa: A002
    """``torch.celu``."""
    return _F().celu(input, alpha)


def prelu(input, weight):  # noqa: A002
    """``torch.prelu``."""
    return _F().prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    """``torch.rrelu``: in training, each negative element is scaled by a slope drawn
    uniformly from ``[lower, upper]`` (from ``generator``, or tape's global one); the
    gradient there is that slope.  Otherwise a leaky ReLU of slope ``(lower+upper)/2``."""
    x = _t(input)
    if not training:
        return _F().leaky_relu(x, (lower + upper) / 2.0)
    g = _tape()._gen(generator)
    d = np.asarray(x._data)
    slope = g.uniform(lower, upper, d.shape)
    a = np.where(d >= 0, 1.0, slope).astype(d.dtype)
    return _ops.mul(x, _leaf(a))


@node_named('ThresholdBackward0', 'input')
def threshold(input, threshold, value):  # noqa: A002
    """``torch.threshold``: ``value`` where ``input <= threshold``."""
    return _F().threshold(input, threshold, value)


def hardshrink(input, lambd=0.5):  # noqa: A002
    """``torch.hardshrink``."""
    return _F().hardshrink(input, lambd)


def bilinear(input1, input2, weight, bias=None):
    """``torch.bilinear``."""
    return _F().bilinear(input1, input2, weight, bias)


def kl_div(input, target, reduction=1, *, log_target=False):  # noqa: A002
    """``torch.kl_div``: ``reduction`` an int (0 none, 1 mean over all elements, 2 sum);
    no ``batchmean`` warning, as torch's top-level op."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return _F().kl_div(input, target, reduction=_red(reduction), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    """``torch.margin_ranking_loss`` (``reduction`` an int)."""
    return _F().margin_ranking_loss(input1, input2, target, margin, reduction=_red(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):  # noqa: A002
    """``torch.hinge_embedding_loss`` (``reduction`` an int)."""
    return _F().hinge_embedding_loss(input, target, margin, reduction=_red(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    """``torch.cosine_embedding_loss`` (``reduction`` an int)."""
    return _F().cosine_embedding_loss(input1, input2, target, margin, reduction=_red(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False,
                        reduction=1):
    """``torch.triplet_margin_loss`` (``reduction`` an int)."""
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_red(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    """``torch.poisson_nll_loss``: every argument positional and required."""
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_red(reduction))


@node_named('BinaryCrossEntropyWithLogitsBackward0', 'input', 'target')
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,  # noqa: A002
                                     reduction=1):
    """``torch.binary_cross_entropy_with_logits`` (``pos_weight`` before ``reduction``,
    an int)."""
    return _F().binary_cross_entropy_with_logits(input, target, weight,
                                                 reduction=_red(reduction),
                                                 pos_weight=pos_weight)


def matrix_rank(input, tol=None, symmetric=False, *, out=None):  # noqa: A002
    """``torch.matrix_rank``: removed in PyTorch 1.9; raises as torch does."""
    raise RuntimeError("This function was deprecated since version 1.9 and is now removed.\n"
                       "Please use the `torch.linalg.matrix_rank` function instead. The "
                       "parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to "
                       "'hermitian'.")


def eig(self, eigenvectors=False, *, e=None, v=None):
    """``torch.eig``: removed in PyTorch 1.9; raises as torch does."""
    raise RuntimeError(
        'This function was deprecated since version 1.9 and is now removed. `torch.linalg.eig` '
        'returns complex tensors of dtype `cfloat` or `cdouble` rather than real tensors '
        'mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\n'
        'L_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) '
        'should be replaced with:\nL_complex, V_complex = torch.linalg.eig(A)')


def symeig(input, eigenvectors=False, upper=True, *, out=None):  # noqa: A002
    """``torch.symeig``: removed in PyTorch 1.9; raises as torch does."""
    raise RuntimeError(
        'This function was deprecated since version 1.9 and is now removed. The default '
        'behavior has changed from using the upper triangular portion of the matrix by default '
        'to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should '
        "be replaced with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\n"
        'L, V = torch.symeig(A, eigenvectors=True) should be replaced with:\nL, V = '
        "torch.linalg.eigh(A, UPLO='U' if upper else 'L')")


def nuclear_norm(input, dim=None, keepdim=False):  # noqa: A002
    """``torch.nuclear_norm`` (deprecated in torch): ``linalg.matrix_norm(A, 'nuc')``;
    ``nuclear_norm(A, keepdim)`` with a bool second argument is the no-dim form."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    warnings.warn('at::nuclear_norm is deprecated and it is just left for JIT compatibility. '
                  'It will be removed in a future PyTorch release. Please use '
                  "`linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    return _tape().linalg.matrix_norm(input, 'nuc', (-2, -1) if dim is None else tuple(dim),
                                      keepdim)


def frobenius_norm(input, dim, keepdim=False):  # noqa: A002
    """``torch.frobenius_norm`` (deprecated in torch): ``linalg.vector_norm(A, 2, dim)``."""
    warnings.warn('at::frobenius_norm is deprecated and it is just left for JIT compatibility. '
                  'It will be removed in a future PyTorch release. Please use '
                  '`linalg.vector_norm(A, 2., dim, keepdim)` instead', UserWarning, stacklevel=2)
    if isinstance(dim, int):
        dim = (dim,)
    return _tape().linalg.vector_norm(input, 2.0, tuple(dim), keepdim)


def is_same_size(input, other):  # noqa: A002
    """``torch.is_same_size``: the two shapes are equal."""
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input):  # noqa: A002
    """``torch.is_signed``: the dtype is a signed one (floats included; bool and uint8 not)."""
    return np.dtype(input._data.dtype).kind in 'ifc'


def is_inference(input):  # noqa: A002
    """``torch.is_inference``: ``input.is_inference()``."""
    return input.is_inference()


# ============================================================= process settings
# These record and return values as torch does; none changes tape's numerics
# (tape computes on the CPU in NumPy: matmuls are always full precision and
# already deterministic).

_SETTINGS = {'matmul_precision': 'highest', 'deterministic': False, 'warn_only': False,
             'warn_always': False, 'interop_threads': None, 'flush_denormal': False}


def set_float32_matmul_precision(precision):
    """``torch.set_float32_matmul_precision``: recorded only (tape's float32 matmuls are
    always full precision).  An unknown value warns and changes nothing, as torch."""
    if precision not in ('highest', 'high', 'medium'):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      'setFloat32MatmulPrecision call has no effect.', UserWarning, stacklevel=2)
        return
    _SETTINGS['matmul_precision'] = precision


def get_float32_matmul_precision():
    """``torch.get_float32_matmul_precision``: the recorded value (``'highest'`` by default)."""
    return _SETTINGS['matmul_precision']


def use_deterministic_algorithms(mode, *, warn_only=False):
    """``torch.use_deterministic_algorithms``: recorded only (tape's ops are deterministic)."""
    if not isinstance(mode, bool):
        raise RuntimeError(f'use_deterministic_algorithms expects a bool, but got '
                           f'{type(mode).__name__}')
    _SETTINGS['deterministic'] = mode
    _SETTINGS['warn_only'] = bool(warn_only)


def are_deterministic_algorithms_enabled():
    """``torch.are_deterministic_algorithms_enabled``: the recorded flag."""
    return _SETTINGS['deterministic']


def is_deterministic_algorithms_warn_only_enabled():
    """``torch.is_deterministic_algorithms_warn_only_enabled``: the recorded flag."""
    return _SETTINGS['warn_only']


def set_deterministic_debug_mode(debug_mode):
    """``torch.set_deterministic_debug_mode``: 0/'default', 1/'warn', 2/'error' (recorded,
    through the deterministic flags, as torch)."""
    if isinstance(debug_mode, str):
        names = {'default': 0, 'warn': 1, 'error': 2}
        if debug_mode not in names:
            raise RuntimeError(f'invalid value of debug_mode, expected one of `default`, '
                               f'`warn`, `error`, but got {debug_mode}')
        debug_mode = names[debug_mode]
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f'debug_mode must be str or int, but got {type(debug_mode)}')
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f'invalid value of debug_mode, expected 0, 1, or 2, but got '
                           f'{debug_mode}')
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """``torch.get_deterministic_debug_mode``: 0, 1 (warn only) or 2."""
    if not _SETTINGS['deterministic']:
        return 0
    return 1 if _SETTINGS['warn_only'] else 2


def set_warn_always(b):
    """``torch.set_warn_always``: recorded only."""
    _SETTINGS['warn_always'] = bool(b)


def is_warn_always_enabled():
    """``torch.is_warn_always_enabled``: the recorded flag."""
    return _SETTINGS['warn_always']


def set_default_device(device):  # noqa: A002
    """``torch.set_default_device``: tape runs on the CPU only; ``None`` or a CPU device
    is accepted, anything else raises as tape's other device errors."""
    if device is not None:
        _check_device(device)


def get_default_device():
    """``torch.get_default_device``: always the CPU."""
    return device('cpu')


def get_num_interop_threads():
    """``torch.get_num_interop_threads``: the recorded value (the CPU count by default;
    tape runs no inter-op thread pool)."""
    n = _SETTINGS['interop_threads']
    if n is None:
        import os
        n = os.cpu_count() or 1
    return n


def set_num_interop_threads(num):
    """``torch.set_num_interop_threads``: recorded only; positive ints, once, as torch."""
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError(f'set_num_interop_threads expects an int, but got {type(num).__name__}')
    if num <= 0:
        raise RuntimeError('Expected positive number of threads')
    if _SETTINGS['interop_threads'] is not None:
        raise RuntimeError('Error: cannot set number of interop threads after parallel work '
                           'has started or set_num_interop_threads called')
    _SETTINGS['interop_threads'] = builtins.int(num)


def set_flush_denormal(mode):
    """``torch.set_flush_denormal``: recorded only (NumPy keeps denormals); returns True
    (supported), as torch on x86 with SSE3."""
    _SETTINGS['flush_denormal'] = bool(mode)
    return True


# ================================================================= constructors

def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):  # noqa: A002
    """``torch.asarray``: shares memory with a Tensor or NumPy array (or any buffer)
    when no copy is needed and ``copy`` is not True; ``copy=False`` where a copy is
    needed raises ValueError, as torch.  Python sequences and scalars get torch's
    inferred dtype (the default float dtype for floats)."""
    _check_device(device)
    want = None if dtype is None else np.dtype(dtype)
    if isinstance(obj, Tensor):
        same = want is None or want == obj._data.dtype
        if not same and copy is False:
            raise ValueError(f"can't alias tensor with dtype '{_tname(obj._data.dtype)}' into "
                             f"dtype '{_tname(want)}'.")
        if same and not copy:
            if requires_grad:
                obj.requires_grad_(True)
            return obj
        t = _ops.to(obj.detach(), want) if not same else None
        arr = np.array(obj._data if t is None else t._data, copy=True)
        return _finish(arr, requires_grad)
    if isinstance(obj, np.ndarray) or hasattr(obj, '__array_interface__') \
            or (not isinstance(obj, (list, tuple, int, float, bool, complex))
                and _has_buffer(obj)):
        arr = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
        if want is not None and want != arr.dtype:
            if copy is False:
                raise ValueError(f"can't alias tensor with dtype '{_tname(arr.dtype)}' into "
                                 f"dtype '{_tname(want)}'.")
            arr = arr.astype(want)
        elif copy:
            arr = np.array(arr, copy=True)
        return _finish(arr, requires_grad)
    if copy is False:
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    t = _tape().tensor(obj, dtype=want)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _has_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """``torch.frombuffer``: a 1-D tensor over ``buffer``'s memory (shared, not copied)."""
    mv = memoryview(buffer)
    n = mv.nbytes
    dt = np.dtype(dtype)
    if n == 0 or count == 0:
        raise ValueError(f'both buffer length ({n}) and count ({count}) must not be 0')
    if offset < 0 or offset >= n:
        raise ValueError(f'offset ({offset} bytes) must be non-negative and no greater than '
                         f'buffer length ({n} bytes) minus 1')
    if count < 0 and (n - offset) % dt.itemsize != 0:
        raise ValueError(f'buffer length ({n - offset} bytes) after offset ({offset} bytes) '
                         f'must be a multiple of element size ({dt.itemsize})')
    if count > 0 and count * dt.itemsize > n - offset:
        raise ValueError(f'requested buffer length ({count} * {dt.itemsize} bytes) after offset '
                         f'({offset} bytes) must not be greater than actual buffer length ({n} '
                         'bytes)')
    if mv.readonly:
        warnings.warn('The given buffer is not writable, and PyTorch does not support '
                      'non-writable tensors. This means you can write to the underlying '
                      '(supposedly non-writable) buffer using the tensor. You may want to copy '
                      'the buffer to protect its data or make it writable before converting it '
                      'to a tensor.', UserWarning, stacklevel=2)
    arr = np.frombuffer(buffer, dtype=dt, count=count, offset=offset)
    return _finish(arr, requires_grad)


def _strided_zeros(size, stride, dt, name):
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f'dimensionality of sizes ({len(size)}) must match dimensionality '
                           f'of strides ({len(stride)})')
    if builtins.any(s < 0 for s in size):
        raise RuntimeError(f'Trying to create tensor with negative dimension {min(size)}: '
                           f'{list(size)}')
    if builtins.any(s < 0 for s in stride):
        raise RuntimeError('as_strided: Negative strides are not supported at the moment, got '
                           f'strides: {list(stride)}')
    if builtins.any(s == 0 for s in size):
        return np.zeros(size, dt)
    extent = 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride))
    buf = np.zeros(extent, dt)
    return np.lib.stride_tricks.as_strided(buf, size, tuple(s * dt.itemsize for s in stride))


def empty_strided(size, stride, *, dtype=None, layout=None, device=None,  # noqa: A002
                  requires_grad=False, pin_memory=False):
    """``torch.empty_strided``: a (zero-filled) tensor with the given strides."""
    _check_device(device)
    return _finish(_strided_zeros(size, stride, _dtype_or_default(dtype), 'empty_strided'),
                   requires_grad)


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       pin_memory=False, requires_grad=False):
    """``Tensor.new_empty_strided``: ``empty_strided`` with this tensor's dtype by default."""
    _check_device(device)
    dt = self._data.dtype if dtype is None else np.dtype(dtype)
    return _finish(_strided_zeros(size, stride, dt, 'new_empty_strided'), requires_grad)


# ================================================================ in-place forms

def _inplace(fn, name):
    from ._composites import _inplace as mk, _named
    return mk(_named(fn, name[:-1]), name)


def _zero_grad_result(fn):
    """``fn``'s (non-differentiable) result, recorded as a zero-gradient function of its
    first input when that input is in the graph (torch's ``EqBackward``: zeros)."""
    def g(x, *args, **kwargs):
        r = fn(x, *args, **kwargs)
        if r._tape is None and x._rg and grad_mode.enabled:
            from ._elementwise import where
            dt = x._data.dtype
            val = np.asarray(r._data).astype(dt)
            return where(_leaf(np.ones(val.shape, bool)), _leaf(val), x)
        return r
    g.__name__ = fn.__name__
    return g


def _float_power_(self, exponent):
    if self._data.dtype != np.float64:
        raise RuntimeError(f'the base given to float_power_ has dtype {_tname(self._data.dtype)} '
                           "but the operation's result requires dtype Double")
    return _ops.inplace_apply(self, _named_fn(_tape().float_power, 'float_power'), exponent)


def _named_fn(fn, name):
    from ._composites import _named
    return _named(fn, name)


def _shape_inplace(fn, name):
    """``x.<name>(...)`` for a view op that changes x's shape (``squeeze_``, ``t_``, ...):
    x takes the view's data and place in the graph (the version bumps, as torch).

    A tensor that is itself a view stays a view of its base (with the composed view
    function).  A graph tensor with live views of its own cannot change shape in place
    in tape: those views locate their elements from its shape.  That case raises."""
    def f(a, *args, **kwargs):
        grad_on = grad_mode.enabled
        if a._rg and a._tape is None and grad_on:
            raise RuntimeError('a leaf Variable that requires grad is being used in an in-place '
                               f'operation ({name} on a tensor of shape '
                               f'{tuple(np.shape(a._data))}).')
        ext = a._extra
        if ext is not None and (len(ext.get('views', ())) or 'view_tapes' in ext):
            raise RuntimeError(f'{name}: tape cannot change the shape in place of a tensor '
                               'whose views are in use by autograd; use the out-of-place '
                               f'{name[:-1]} instead.')
        _views.check_inplace(a, name, grad_on)
        _storage(a)
        tape = a._tape
        if tape is not None:
            tape.add_dirty(a._goff, tape.n)
        res = fn(a, *args, **kwargs)
        src = _views.view_source(res)
        a._data = res._data
        if src is not None and src[0] is not a:
            if a._extra is None:
                a._extra = {}
            a._extra['view'] = src
        _bump_version(a)
        if res._tape is not None:
            _ops.rebind(a, res)
        return a
    f.__name__ = name
    f.__doc__ = f'In-place ``{name[:-1]}``: changes this tensor\'s shape (a view op).'
    return f


def _resize_(self, *sizes, memory_format=None):
    """``Tensor.resize_``: a new shape over the same storage (first ``numel`` elements
    in row-major order; grown storage is zero-filled).  Tensors that require grad
    cannot be resized, as torch."""
    if self._rg:
        raise RuntimeError('cannot resize variables that require grad')
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
        else tuple(sizes)
    shape = tuple(int(s) for s in shape)
    if builtins.any(s < 0 for s in shape):
        raise RuntimeError(f'Trying to create tensor with negative dimension '
                           f'{builtins.min(shape)}: {list(shape)}')
    d = _storage(self)
    n = int(np.prod(shape, dtype=np.int64))
    # torch keeps the storage's elements beyond numel after shrinking, and shows
    # them again when the tensor grows back within it: the 1-D storage is kept
    ext = self._extra
    store = ext.get('resize_storage') if ext is not None else None
    if store is None or not np.shares_memory(store, d) or not d.flags.c_contiguous \
            or d.__array_interface__['data'][0] != store.__array_interface__['data'][0]:
        store = d.reshape(-1) if d.flags.c_contiguous else np.ascontiguousarray(d).reshape(-1)
    if n > store.size:
        grown = np.zeros(n, d.dtype)
        grown[:store.size] = store
        store = grown
    new = store[:n].reshape(shape)
    if self._extra is None:
        self._extra = {}
    self._extra['resize_storage'] = store
    self._data = new
    _bump_version(self)
    return self


def _resize_as_(self, the_template, *, memory_format=None):
    """``Tensor.resize_as_``: ``resize_`` to the template's shape."""
    return _resize_(self, tuple(the_template.shape))


# ================================================================= misc methods

def _sum_to_size(self, *size):
    """``Tensor.sum_to_size``: summed down to ``size`` (which must expand to its shape)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    ok = lead >= 0 and builtins.all(s == t or s == 1 for s, t in zip(size, shape[lead:]))
    if not ok:
        raise RuntimeError(f'size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.'
                           .replace('{[', '{[').replace(']}', ']}'))
    tp = _tape()
    out = self
    if lead:
        out = tp.sum(out, tuple(range(lead)))
    dims = tuple(i for i, (s, t) in enumerate(zip(size, shape[lead:])) if s == 1 and t != 1)
    if dims:
        out = tp.sum(out, dims, keepdim=True)
    return out


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """``torch.split_with_sizes``: ``split`` with a list of sizes that must sum to the
    dimension's size."""
    n = input.shape[dim]
    sizes = [int(s) for s in split_sizes]
    if builtins.sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes={sizes}")
    return _tape().split(input, sizes, dim)


@node_named('PutBackward0', 'input', 'source')
def put(input, index, source, accumulate=False):  # noqa: A002
    """``torch.put``: ``source`` written (or added, with ``accumulate``) at the flat
    positions ``index`` of ``input`` (negative positions count from the end).
    Differentiable in input and source."""
    tp = _tape()
    x = _t(input)
    idx = np.asarray(index._data if isinstance(index, Tensor) else index)
    if idx.dtype.kind not in 'iu':
        raise RuntimeError(f'put_(): Expected a long tensor for index, but got '
                           f'{_tname(idx.dtype)}')
    n = x.numel()
    flat_idx = idx.reshape(-1).astype(np.int64)
    if flat_idx.size and (flat_idx.max() >= n or flat_idx.min() < -n):
        bad = flat_idx[(flat_idx >= n) | (flat_idx < -n)][0]
        raise IndexError(f'out of range: tried to access index {bad} on a tensor of {n} '
                         'elements.')
    src = _t(source, x)
    if src._data.dtype != x._data.dtype:
        raise RuntimeError(f'put_(): self and source expected to have the same dtype, but got '
                           f'self.dtype = {_tname(x._data.dtype)} and source.dtype = '
                           f'{_tname(src._data.dtype)}')
    if src.numel() != flat_idx.size:
        raise RuntimeError(f'put_(): Expected source and index to have the same number of '
                           f'elements, but got source.numel() = {src.numel()}, index.numel() = '
                           f'{flat_idx.size}')
    flat_idx = np.where(flat_idx < 0, flat_idx + n, flat_idx)
    out = tp.index_put(tp.reshape(x, (-1,)), (_leaf(flat_idx),), tp.reshape(src, (-1,)),
                       accumulate)
    return tp.reshape(out, tuple(x.shape))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """``torch.index_reduce``: rows ``index`` of ``input`` along ``dim`` reduced
    (``'prod'``, ``'mean'``, ``'amax'``, ``'amin'``) with ``source``'s slices; through
    ``scatter_reduce``, so differentiable as it is."""
    if reduce not in ('prod', 'mean', 'amax', 'amin'):
        raise RuntimeError(f'index_reduce(): Expected reduce to be one of prod, mean, amax or '
                           f'amin but got {reduce}.')
    tp = _tape()
    x = _t(input)
    src = _t(source, x)
    nd = x.dim()
    dim = dim + nd if dim < 0 else dim
    idx = np.asarray(index._data).reshape(-1).astype(np.int64)
    sshape = tuple(src.shape) if src.dim() else (1,)
    if len(idx) != (sshape[dim] if src.dim() else 1):
        raise IndexError(f'index_reduce_(): Number of indices ({len(idx)}) should be equal to '
                         f'source.size(dim) ({sshape[dim]})')
    view = [1] * builtins.max(nd, 1)
    view[dim] = len(idx)
    full = np.broadcast_to(idx.reshape(view), sshape).copy()
    return tp.scatter_reduce(x, dim, _leaf(full), src, reduce, include_self=include_self)


_FREXP = _return_type('frexp', ['mantissa', 'exponent'])


def frexp(input, *, out=None):  # noqa: A002
    """``torch.frexp``: ``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``,
    the exponent int32.  Not differentiable."""
    d = np.asarray(input._data)
    if d.dtype.kind != 'f':
        raise RuntimeError('torch.frexp() only supports floating-point dtypes')
    m, e = np.frexp(d)
    return _FREXP(_leaf(np.asarray(m, d.dtype)), _leaf(np.asarray(e, np.int32)))


_IGAMMA = {}


def _igamma_fn():
    if _IGAMMA:
        return _IGAMMA
    from .autograd import Function
    # (the kernels of tape.special.gammainc/gammaincc: PyTorch's, within 1e-12)
    from compiler.special_more_kernels import binary as _special_binary

    def grad_x(a, x):
        # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)
        return ((a - 1.0) * x.log() - x - a.lgamma()).exp()

    def make(name, upper):
        def forward(ctx, a, x):
            ctx.save_for_backward(a, x)
            ad, xd = np.asarray(a._data), np.asarray(x._data)
            return _leaf(_special_binary('gammaincc' if upper else 'gammainc', ad, xd,
                                         ad.dtype))

        def backward(ctx, g):
            a, x = ctx.saved_tensors
            if ctx.needs_input_grad[0]:
                raise NotImplementedError(f"the derivative for '{name}: input' is not "
                                          'implemented.')
            d = grad_x(a, x)
            return None, (-g * d if upper else g * d)
        cls = type('Igammac' if upper else 'Igamma', (Function,),
                   {'forward': staticmethod(forward), 'backward': staticmethod(backward)})
        cls._backward_name = cls.__name__ + 'Backward0'       # (PyTorch's node name)
        return cls
    _IGAMMA['igamma'] = make('igamma', False)
    _IGAMMA['igammac'] = make('igammac', True)
    return _IGAMMA


def _igamma_common(name, input, other):
    tp = _tape()
    a, x = _t(input), _t(other)
    dt = np.result_type(a._data, x._data)
    if dt.kind != 'f':
        from ._dtypes import default_dtype
        dt = np.dtype(default_dtype[0])
    a, x = _ops.to(a, dt), _ops.to(x, dt)
    if tuple(a.shape) != tuple(x.shape):
        a, x = tp.broadcast_tensors(a, x)
    return _igamma_fn()[name].apply(a, x)


def igamma(input, other, *, out=None):  # noqa: A002
    """``torch.igamma``: the regularized lower incomplete gamma function ``P(input,
    other)``; differentiable in ``other`` only (the gradient in ``input`` raises, as
    torch's)."""
    return _igamma_common('igamma', input, other)


def igammac(input, other, *, out=None):  # noqa: A002
    """``torch.igammac``: the regularized upper incomplete gamma function ``Q = 1 - P``."""
    return _igamma_common('igammac', input, other)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """``torch.cov``: the covariance of the rows (variables) of a 1-D or 2-D input,
    observations in the columns; differentiable in input (and aweights)."""
    tp = _tape()
    x = _t(input)
    if x.dim() > 2:
        raise RuntimeError(f'cov(): expected input to have two or fewer dimensions but got an '
                           f'input with {x.dim()} dimensions')
    if x._data.dtype.kind in 'biu':
        from ._dtypes import default_dtype
        x = _ops.to(x, default_dtype[0])
    if x.dim() < 2:
        x = tp.reshape(x, (1, -1))
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        fw = np.asarray(fweights._data)
        if fw.ndim > 1:
            raise RuntimeError(f'cov(): expected fweights to have one or fewer dimensions but '
                               f'got fweights with {fw.ndim} dimensions')
        if fw.dtype.kind not in 'iu':
            raise RuntimeError(f'cov(): expected fweights to have integral dtype but got '
                               f'fweights with {_tname(fw.dtype)} dtype')
        if fw.size != n_obs:
            raise RuntimeError(f'cov(): expected fweights to have the same numel as there are '
                               f'observations in the input but got {fw.size} != {n_obs}')
        if (fw < 0).any():
            raise RuntimeError('cov(): fweights cannot be negative')
        w = _leaf(fw.astype(x._data.dtype))
    if aweights is not None:
        aw = aweights if isinstance(aweights, Tensor) else _leaf(np.asarray(aweights))
        if aw.dim() > 1:
            raise RuntimeError(f'cov(): expected aweights to have one or fewer dimensions but '
                               f'got aweights with {aw.dim()} dimensions')
        if aw._data.dtype.kind != 'f':
            raise RuntimeError(f'cov(): expected aweights to have floating point dtype but got '
                               f'aweights with {_tname(aw._data.dtype)} dtype')
        if aw.numel() != n_obs:
            raise RuntimeError(f'cov(): expected aweights to have the same numel as there are '
                               f'observations in the input but got {aw.numel()} != {n_obs}')
        if (np.asarray(aw._data) < 0).any():
            raise RuntimeError('cov(): aweights cannot be negative')
        aw = _ops.to(aw, x._data.dtype)
        w = aw if w is None else w * aw
    if w is None:
        avg = tp.mean(x, 1)
        w_sum = float(n_obs)
        norm = w_sum - correction
    else:
        w_sum_t = tp.sum(w)
        avg = tp.sum(x * w, 1) / w_sum_t
        if aweights is not None and correction != 0:
            norm = w_sum_t - correction * tp.sum(w * aw) / w_sum_t
        else:
            norm = w_sum_t - correction
    norm_val = float(np.asarray(norm._data if isinstance(norm, Tensor) else norm))
    if norm_val <= 0:
        warnings.warn('cov(): degrees of freedom is <= 0. Correction should be strictly less '
                      'than the number of observations.', UserWarning, stacklevel=2)
        norm = 0.0 if not isinstance(norm, Tensor) else norm * 0.0
    xm = x - tp.unsqueeze(avg, 1)
    c = tp.mm(xm, (xm if w is None else xm * w).t())
    c = c / norm
    return tp.squeeze(c)


def corrcoef(input):  # noqa: A002
    """``torch.corrcoef``: Pearson correlation coefficients of the rows, clipped to
    ``[-1, 1]``."""
    tp = _tape()
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = tp.diagonal(c)
    s = tp.sqrt(d)
    c = c / tp.unsqueeze(s, 1)
    c = c / tp.unsqueeze(s, 0)
    return tp.clamp(c, -1, 1)


_HIST = _return_type('histogram', ['hist', 'bin_edges'])
_HISTDD = _return_type('histogramdd', ['hist', 'bin_edges'])


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """``torch.histogram``: ``(hist, bin_edges)`` in input's (floating) dtype; ``bins``
    a count (equal bins over ``range``, or the data's min and max) or a tensor of
    edges.  Not differentiable."""
    d = np.asarray(input._data)
    if d.dtype.kind != 'f':
        raise NotImplementedError(f'"histogramdd" not implemented for \'{_tname(d.dtype)}\'')
    wt = None if weight is None else np.asarray(weight._data).reshape(-1)
    if isinstance(bins, Tensor):
        edges = np.asarray(bins._data)
        if edges.dtype != d.dtype:
            raise RuntimeError(f'torch.histogram: input tensor and bins tensors should have '
                               f'the same dtype, but got input {_tname(d.dtype)} and bins '
                               f'{_tname(edges.dtype)}')
        h, _ = np.histogram(d.reshape(-1), edges.astype(np.float64), weights=wt,
                            density=density)
        return _HIST(_leaf(h.astype(d.dtype)), _leaf(edges.copy()))
    if bins <= 0:
        raise RuntimeError(f'torch.histogram(): bins must be > 0, but got {bins} for dimension 0')
    if range is None:
        lo, hi = (float(d.min()), float(d.max())) if d.size else (0.0, 0.0)
    else:
        lo, hi = float(range[0]), float(range[1])
        if lo > hi:
            raise RuntimeError(f'torch.histogram(): min should not exceed max, but got min {lo} '
                               f'max {hi} for dimension 0')
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1).astype(d.dtype)
    h, _ = np.histogram(d.reshape(-1), edges.astype(np.float64), weights=wt, density=density)
    return _HIST(_leaf(h.astype(d.dtype)), _leaf(edges))


def histogramdd(input, bins=10, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """``torch.histogramdd``: the histogram of the points in the rows of ``input``
    (its last dimension the coordinates); ``(hist, [edges per dimension])``."""
    d = np.asarray(input._data)
    if d.dtype.kind != 'f':
        raise NotImplementedError(f'"histogramdd" not implemented for \'{_tname(d.dtype)}\'')
    D = d.shape[-1]
    pts = d.reshape(-1, D).astype(np.float64)
    wt = None if weight is None else np.asarray(weight._data).reshape(-1)
    if isinstance(bins, (int, np.integer)):
        bins = [int(bins)] * D
    if len(bins) != D:
        raise RuntimeError(f'torch.histogramdd: expected {D} sequences of bin edges for each '
                           f'of the {D} dimensions of the input, but got {len(bins)}')
    edges = []
    for k, b in enumerate(bins):
        if isinstance(b, Tensor):
            edges.append(np.asarray(b._data).astype(d.dtype))
            continue
        if range is not None:
            lo, hi = float(range[2 * k]), float(range[2 * k + 1])
        else:
            col = pts[:, k]
            lo, hi = (float(col.min()), float(col.max())) if col.size else (0.0, 0.0)
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(np.linspace(lo, hi, int(b) + 1).astype(d.dtype))
    h, _ = np.histogramdd(pts, [e.astype(np.float64) for e in edges], weights=wt,
                          density=density)
    return _HISTDD(_leaf(h.astype(d.dtype)), [_leaf(e) for e in edges])


# ------------------------------------------------------------ random fills

def _fill(a, vals):
    d = np.asarray(a._data)
    return a.copy_(_leaf(np.asarray(vals).astype(d.dtype)))


def _random_(self, *args, generator=None, **kwargs):
    """``Tensor.random_([from,] to)``: integers uniform on ``[from, to)`` (``to`` None:
    up to the dtype's largest value, ``2**mantissa`` for floats)."""
    from_, to = 0, None
    if 'from' in kwargs:
        from_ = kwargs.pop('from')
    if 'to' in kwargs:
        to = kwargs.pop('to')
    if kwargs:
        raise TypeError(f'random_() got an unexpected keyword argument {next(iter(kwargs))!r}')
    explicit_to = to is not None
    if len(args) == 1:
        if explicit_to:
            from_ = args[0]
        else:
            to = args[0]
    elif len(args) == 2:
        from_, to = args
    elif len(args) > 2:
        raise TypeError('random_() takes at most 2 positional arguments')
    d = np.asarray(self._data)
    dt = d.dtype
    if to is None:
        if dt.kind == 'f':
            hi = 2 ** (np.finfo(dt).nmant + 1)
        elif dt.kind == 'b':
            hi = 1
        else:
            hi = int(np.iinfo(dt).max)
        endpoint = True
    else:
        hi, endpoint = int(to), False
        if from_ >= hi:
            raise RuntimeError(f'random_ expects \'from\' to be less than \'to\', but got '
                               f'from={from_} >= to={hi}')
    g = _tape()._gen(generator)
    vals = g.integers(int(from_), hi, d.shape, dtype=np.int64, endpoint=endpoint)
    return _fill(self, vals)


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """``Tensor.cauchy_``: Cauchy draws ``median + sigma tan(pi (U - 1/2))``."""
    g = _tape()._gen(generator)
    u = g.random(np.shape(self._data))
    return _fill(self, median + sigma * np.tan(math.pi * (u - 0.5)))


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """``Tensor.log_normal_``: ``exp`` of normal draws with ``mean`` and ``std``."""
    g = _tape()._gen(generator)
    return _fill(self, np.exp(g.normal(mean, std, np.shape(self._data))))


def _geometric_(self, p, *, generator=None):
    """``Tensor.geometric_``: the number of Bernoulli(p) trials to the first success."""
    if not 0 < p < 1:
        raise RuntimeError(f'geometric_ expects p to be in (0, 1), but got p={p}')
    g = _tape()._gen(generator)
    return _fill(self, g.geometric(p, np.shape(self._data)))


# ------------------------------------------------------------ shifts

def bitwise_left_shift(input, other, *, out=None):  # noqa: A002
    """``torch.bitwise_left_shift``: ``input << other`` (integer dtypes, as torch)."""
    return _shift(input, other, True)


def bitwise_right_shift(input, other, *, out=None):  # noqa: A002
    """``torch.bitwise_right_shift``: ``input >> other`` (arithmetic for signed ints)."""
    return _shift(input, other, False)


def _shift(a, b, left):
    if not isinstance(a, Tensor):
        a = _ops._const(a)
    raw_b = np.asarray(b._data) if isinstance(b, Tensor) else b
    b = _t(b, a)
    ad, bd = np.asarray(a._data), np.asarray(b._data)
    # PyTorch's promotion: a Python number or a 0-d tensor keeps a tensor's
    # integer dtype (uint8 << 1 is uint8, and wraps)
    from ._dtypes import result_type
    dt = np.dtype(result_type(ad, raw_b))
    if dt.kind in 'bfc':
        raise NotImplementedError(f'"{"lshift" if left else "rshift"}_cpu" not implemented '
                                  f"for '{_tname(dt)}'")
    x, s = ad.astype(dt), bd.astype(dt)
    bits = dt.itemsize * 8
    big = (s < 0) | (s >= bits)
    safe = np.where(big, 0, s).astype(dt)
    if left:
        r = np.where(big, 0, np.left_shift(x, safe))
    else:
        r = np.where(big, np.where(x < 0, -1, 0) if dt.kind == 'i' else 0,
                     np.right_shift(x, safe))
    return _leaf(np.asarray(r, dt))


# ------------------------------------------------------------ small extras

def _copy_of(fn, name):
    def f(input, *args, **kwargs):  # noqa: A002
        return fn(input, *args, **kwargs).clone()
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f'``torch.{name}``: ``{name[:-5]}`` as a new tensor (no memory shared), '
                 'differentiable as the view op.')
    return f


def _copy_ops():
    tp = _tape()
    ops = {'detach_copy': lambda x: x.detach(), 'alias_copy': lambda x: x,
           't_copy': tp.t, 'transpose_copy': tp.transpose, 'permute_copy': tp.permute,
           'squeeze_copy': tp.squeeze, 'unsqueeze_copy': tp.unsqueeze,
           'diagonal_copy': tp.diagonal, 'expand_copy': lambda x, size, *, implicit=False:
           x.expand(size), 'view_copy': lambda x, size: x.view(size),
           'select_copy': tp.select, 'unfold_copy': lambda x, dimension, size, step:
           x.unfold(dimension, size, step)}
    out = {n: _copy_of(f, n) for n, f in ops.items()}

    def multi(fn, name):
        def f(input, *args, **kwargs):  # noqa: A002
            return [t.clone() for t in fn(input, *args, **kwargs)]
        f.__name__ = f.__qualname__ = name
        f.__doc__ = f'``torch.{name}``: ``{name[:-5]}``, each part a new tensor.'
        return f
    out['unbind_copy'] = multi(tp.unbind, 'unbind_copy')
    out['split_copy'] = multi(tp.split, 'split_copy')
    out['split_with_sizes_copy'] = multi(split_with_sizes, 'split_with_sizes_copy')
    return out


def adjoint(input):  # noqa: A002
    """``torch.adjoint``: the last two dimensions swapped (conjugation is the identity on
    tape's real dtypes)."""
    return _tape().transpose(input, -2, -1)


def conj(input):  # noqa: A002
    """``torch.conj``: the input itself (tape's dtypes are real)."""
    return input


def resolve_conj(input):  # noqa: A002
    """``torch.resolve_conj``: the input itself (real dtypes)."""
    return input


def resolve_neg(input):  # noqa: A002
    """``torch.resolve_neg``: the input itself (real dtypes)."""
    return input


def conj_physical(input, *, out=None):  # noqa: A002
    """``torch.conj_physical``: a copy (real dtypes)."""
    return input.clone()


def is_conj(input):  # noqa: A002
    """``torch.is_conj``: False (real dtypes)."""
    return False


def is_neg(input):  # noqa: A002
    """``torch.is_neg``: False (real dtypes)."""
    return False


def unsafe_chunk(input, chunks, dim=0):  # noqa: A002
    """``torch.unsafe_chunk``: ``chunk``."""
    return _tape().chunk(input, chunks, dim)


def unsafe_split(input, split_size, dim=0):  # noqa: A002
    """``torch.unsafe_split``: ``split``."""
    return _tape().split(input, split_size, dim)


unsafe_split_with_sizes = split_with_sizes


def feature_dropout(input, p, train):  # noqa: A002
    """``torch.feature_dropout``: whole channels (dimension 1 of an (N, C, ...) input)
    zeroed with probability ``p``, the rest scaled by ``1/(1-p)``."""
    x = _t(input)
    if not train or p == 0:
        return x
    if not 0 <= p <= 1:
        raise RuntimeError(f'dropout probability has to be between 0 and 1, but got {p}')
    d = np.asarray(x._data)
    shape = d.shape[:2] + (1,) * (d.ndim - 2)
    if p == 1:
        return _ops.mul(x, _leaf(np.zeros(shape, d.dtype)))
    keep = _tape()._gen(None).random(shape) >= p
    return _ops.mul(x, _leaf((keep / (1.0 - p)).astype(d.dtype)))


def typename(obj):
    """``torch.typename``: a tensor's ``type()``, else the object's qualified name."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, '__module__', '') or ''
    if hasattr(obj, '__qualname__'):
        qualname = obj.__qualname__
    elif hasattr(obj, '__name__'):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ''
        qualname = obj.__class__.__qualname__
    if module in ('', 'builtins'):
        return qualname
    return f'{module}.{qualname}'


def get_device(input):  # noqa: A002
    """``torch.get_device``: -1 (the CPU)."""
    return -1


def fill(input, value):  # noqa: A002
    """``torch.fill``: a new tensor like ``input`` filled with ``value`` (out of place;
    the gradient to input is zero, to a tensor ``value`` its sum)."""
    x = _t(input)
    tp = _tape()
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f'fill only supports 0-dimension value tensor but got tensor '
                               f'with {value.dim()} dimensions.')
        return tp.where(_leaf(np.ones(tuple(x.shape), bool)),
                        _ops.to(value, x._data.dtype).expand(tuple(x.shape)), x)
    return tp.full_like(x, value)


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    """``torch.constant_pad_nd``: ``nn.functional.pad(input, pad, 'constant', value)``."""
    return _F().pad(input, list(pad), 'constant', value)


def poisson(input, generator=None):  # noqa: A002
    """``torch.poisson``: Poisson draws with the rates ``input`` (in its dtype)."""
    d = np.asarray(input._data)
    return _leaf(_tape()._gen(generator).poisson(d).astype(d.dtype))


def binomial(count, prob, generator=None):
    """``torch.binomial``: binomial draws with ``count`` trials of probability ``prob``."""
    c, p = np.asarray(count._data), np.asarray(prob._data)
    return _leaf(_tape()._gen(generator).binomial(c.astype(np.int64), p).astype(
        np.result_type(c, p)))


def init_num_threads():
    """``torch.init_num_threads``: nothing to do (tape has no thread pool to set up)."""


def set_default_tensor_type(t):
    """``torch.set_default_tensor_type`` (deprecated in torch): ``tape.FloatTensor`` /
    ``tape.DoubleTensor`` (or their names) set the default float dtype."""
    warnings.warn('torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please '
                  'use torch.set_default_dtype() and torch.set_default_device() as '
                  'alternatives.', UserWarning, stacklevel=2)
    tp = _tape()
    name = t if isinstance(t, str) else getattr(t, '__name__', str(t))
    name = name.split('.')[-1]
    dts = {'FloatTensor': tp.float32, 'DoubleTensor': tp.float64, 'HalfTensor': tp.float16}
    if name not in dts:
        raise TypeError(f'invalid type: {t!r}')
    tp.set_default_dtype(dts[name])


@node_named('AngleBackward0', 'input')
def angle(input, *, out=None):  # noqa: A002
    """``torch.angle`` of a real tensor: pi where negative, 0 elsewhere (NaN stays NaN);
    integer input gives the default float dtype.  The gradient is zero, as torch's."""
    x = _t(input)
    d = np.asarray(x._data)
    dt = d.dtype if d.dtype.kind == 'f' else _dtype_or_default(None)
    val = np.where(np.isnan(d) if d.dtype.kind == 'f' else False, np.nan,
                   np.where(d < 0, math.pi, 0.0)).astype(dt)
    if x._rg and grad_mode.enabled:
        from ._elementwise import where
        return where(_leaf(np.ones(val.shape, bool)), _leaf(val), x)
    return _leaf(val)


def real(input):  # noqa: A002
    """``torch.real`` of a real tensor: the tensor itself."""
    return input


def imag(input):  # noqa: A002
    """``torch.imag``: raises for tape's real dtypes, as torch."""
    raise RuntimeError('imag is not implemented for tensors with non-complex dtypes.')


# ================================================================= install

def _tensor_methods():
    tp = _tape()
    F = tp.nn.functional
    T = Tensor
    m = {}

    def alias(name, target):
        fn = getattr(T, target, None)
        if fn is not None:
            m[name] = fn

    # out-of-place methods
    m['polygamma'] = lambda self, n: tp.polygamma(n, self)
    m['negative'] = lambda self: tp.neg(self)
    m['prelu'] = lambda self, weight: F.prelu(self, weight)
    m['hardshrink'] = lambda self, lambd=0.5: F.hardshrink(self, lambd)
    m['is_signed'] = is_signed
    m['sum_to_size'] = _sum_to_size
    m['split_with_sizes'] = split_with_sizes
    m['unsafe_split_with_sizes'] = split_with_sizes
    m['unsafe_split'] = lambda self, split_size, dim=0: tp.split(self, split_size, dim)
    m['unsafe_chunk'] = lambda self, chunks, dim=0: tp.chunk(self, chunks, dim)
    m['put'] = put
    m['index_reduce'] = index_reduce
    m['frexp'] = frexp
    m['igamma'] = igamma
    m['igammac'] = igammac
    m['bernoulli'] = lambda self, p=None, *, generator=None: tp.bernoulli(self, p,
                                                                          generator=generator)
    m['multinomial'] = lambda self, num_samples, replacement=False, *, generator=None: \
        tp.multinomial(self, num_samples, replacement, generator=generator)
    m['cov'] = cov
    m['corrcoef'] = corrcoef
    m['histogram'] = histogram
    m['new_empty_strided'] = _new_empty_strided
    m['bitwise_left_shift'] = bitwise_left_shift
    m['bitwise_right_shift'] = bitwise_right_shift
    m['__lshift__'] = bitwise_left_shift
    m['__rshift__'] = bitwise_right_shift
    m['__rlshift__'] = lambda self, other: bitwise_left_shift(_ops._const(other), self)
    m['__rrshift__'] = lambda self, other: bitwise_right_shift(_ops._const(other), self)
    # real tensors: conjugation is the identity
    m['conj'] = lambda self: self
    m['resolve_conj'] = lambda self: self
    m['resolve_neg'] = lambda self: self
    m['conj_physical'] = lambda self: self.clone()
    m['is_conj'] = lambda self: False
    m['is_neg'] = lambda self: False
    m['adjoint'] = lambda self: tp.transpose(self, -2, -1)
    m['angle'] = angle
    m['real'] = property(real, doc='``Tensor.real``: the tensor itself (real dtypes).')
    m['imag'] = property(imag, doc='``Tensor.imag``: raises for real dtypes, as torch.')
    # random fills
    m['random_'] = _random_
    m['cauchy_'] = _cauchy_
    m['log_normal_'] = _log_normal_
    m['geometric_'] = _geometric_
    m['resize_'] = _resize_
    m['resize_as_'] = _resize_as_

    # in-place aliases of existing in-place methods
    for new, old in (('absolute_', 'abs_'), ('arctan2_', 'atan2_'), ('multiply_', 'mul_'),
                     ('subtract_', 'sub_'), ('divide_', 'div_'), ('true_divide_', 'div_'),
                     ('sgn_', 'sign_'), ('fix_', 'trunc_')):
        alias(new, old)
    # in-place forms through inplace_apply (graph, versions, leaf checks as the rest)
    plain = {
        'acosh_': tp.acosh, 'asinh_': tp.asinh, 'atanh_': tp.atanh,
        'arccosh_': tp.acosh, 'arcsinh_': tp.asinh, 'arctanh_': tp.atanh,
        'cumsum_': tp.cumsum, 'cumprod_': tp.cumprod, 'digamma_': tp.digamma,
        'erfc_': tp.erfc, 'erfinv_': tp.erfinv, 'lgamma_': tp.lgamma,
        'floor_divide_': tp.floor_divide, 'remainder_': tp.remainder, 'gcd_': tp.gcd,
        'lcm_': tp.lcm, 'heaviside_': tp.heaviside, 'logical_and_': tp.logical_and,
        'logical_or_': tp.logical_or, 'logical_xor_': tp.logical_xor,
        'logical_not_': tp.logical_not, 'bitwise_and_': tp.bitwise_and,
        'bitwise_or_': tp.bitwise_or, 'bitwise_xor_': tp.bitwise_xor,
        'bitwise_not_': tp.bitwise_not, 'bitwise_left_shift_': bitwise_left_shift,
        'bitwise_right_shift_': bitwise_right_shift,
        'put_': put, 'index_reduce_': index_reduce, 'igamma_': igamma, 'igammac_': igammac,
        'hardshrink_': lambda x, lambd=0.5: F.hardshrink(x, lambd),
    }
    for name, fn in plain.items():
        if name == 'hardshrink_':
            continue        # torch has no Tensor.hardshrink_
        m[name] = _inplace(fn, name)
    m['polygamma_'] = _inplace(lambda x, n: tp.polygamma(n, x), 'polygamma_')
    m['float_power_'] = _float_power_
    for name in ('eq', 'ne', 'lt', 'le', 'gt', 'ge', 'greater', 'greater_equal', 'less',
                 'less_equal', 'not_equal'):
        m[name + '_'] = _inplace(_zero_grad_result(getattr(tp, name)), name + '_')
    # shape-changing in-place view ops
    m['squeeze_'] = _shape_inplace(lambda a, *dim: tp.squeeze(a, *dim), 'squeeze_')
    m['unsqueeze_'] = _shape_inplace(lambda a, dim: tp.unsqueeze(a, dim), 'unsqueeze_')
    m['t_'] = _shape_inplace(lambda a: tp.t(a), 't_')
    m['transpose_'] = _shape_inplace(lambda a, dim0, dim1: tp.transpose(a, dim0, dim1),
                                     'transpose_')
    m['swapaxes_'] = _shape_inplace(lambda a, axis0, axis1: tp.transpose(a, axis0, axis1),
                                    'swapaxes_')
    m['swapdims_'] = _shape_inplace(lambda a, dim0, dim1: tp.transpose(a, dim0, dim1),
                                    'swapdims_')
    for name, fn in m.items():
        if callable(fn) and getattr(fn, '__name__', '') == '<lambda>':
            fn.__name__ = name
            fn.__qualname__ = 'Tensor.' + name
    return m


_FUNCTIONS = [
    'hann_window', 'hamming_window', 'blackman_window', 'bartlett_window', 'kaiser_window',
    'conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d', 'conv_transpose3d',
    'layer_norm', 'group_norm', 'batch_norm', 'instance_norm', 'rms_norm', 'embedding',
    'embedding_bag', 'dropout', 'alpha_dropout', 'feature_alpha_dropout', 'pixel_shuffle',
    'pixel_unshuffle', 'channel_shuffle', 'native_channel_shuffle', 'max_pool1d', 'max_pool2d',
    'max_pool3d', 'max_pool1d_with_indices', 'avg_pool1d', 'adaptive_avg_pool1d',
    'adaptive_max_pool1d', 'selu', 'celu', 'prelu', 'rrelu', 'threshold', 'hardshrink',
    'bilinear', 'kl_div', 'margin_ranking_loss', 'hinge_embedding_loss', 'cosine_embedding_loss',
    'triplet_margin_loss', 'poisson_nll_loss', 'binary_cross_entropy_with_logits',
    'matrix_rank', 'eig', 'symeig', 'nuclear_norm', 'frobenius_norm', 'is_same_size',
    'is_signed', 'is_inference',
    'set_float32_matmul_precision', 'get_float32_matmul_precision',
    'use_deterministic_algorithms', 'are_deterministic_algorithms_enabled',
    'is_deterministic_algorithms_warn_only_enabled', 'set_deterministic_debug_mode',
    'get_deterministic_debug_mode', 'set_warn_always', 'is_warn_always_enabled',
    'set_default_device', 'get_default_device', 'get_num_interop_threads',
    'set_num_interop_threads', 'set_flush_denormal',
    'asarray', 'frombuffer', 'empty_strided',
    'split_with_sizes', 'put', 'index_reduce', 'frexp', 'igamma', 'igammac', 'cov', 'corrcoef',
    'histogram', 'histogramdd', 'bitwise_left_shift', 'bitwise_right_shift',
    'adjoint', 'conj', 'resolve_conj', 'resolve_neg', 'conj_physical', 'is_conj', 'is_neg',
    'unsafe_chunk', 'unsafe_split', 'unsafe_split_with_sizes', 'feature_dropout', 'typename',
    'get_device', 'fill', 'constant_pad_nd', 'poisson', 'binomial', 'init_num_threads',
    'set_default_tensor_type', 'angle', 'real', 'imag',
]

# torch's module-level in-place ops: the Tensor method, or an in-place form of a
# function defined here
_MODULE_INPLACE = ('acosh_', 'asinh_', 'atanh_', 'arccosh_', 'arcsinh_', 'arctanh_', 'erfc_',
                   'fix_', 'gcd_', 'lcm_', 'resize_as_')


def _module_inplace(name):
    method = getattr(Tensor, name)

    def f(input, *args, **kwargs):  # noqa: A002
        return method(input, *args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``tape.{name}(t, ...)``: ``t.{name}(...)``, as PyTorch's module-level op."
    return f


def _install(namespace):
    """Add this module's names to ``tape`` (``namespace``: its globals) and its methods
    to ``Tensor``, only where the name does not exist yet."""
    g = globals()
    for name in _FUNCTIONS:
        if name not in namespace:
            namespace[name] = g[name]
    for name, fn in _tensor_methods().items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name, fn in _copy_ops().items():
        if name not in namespace:
            namespace[name] = fn
    for name in _MODULE_INPLACE:
        if name not in namespace and hasattr(Tensor, name):
            namespace[name] = _module_inplace(name)
    # in-place top-level forms of functionals (torch.selu_(x) and friends)
    F = namespace['nn'].functional
    inpl = {
        'selu_': lambda input: F.selu(input, inplace=True),  # noqa: A002
        'celu_': lambda input, alpha=1.0: F.celu(input, alpha, inplace=True),  # noqa: A002
        'threshold_': lambda input, threshold, value: F.threshold(  # noqa: A002
            input, threshold, value, inplace=True),
        'dropout_': lambda input, p, train: F.dropout(input, p, train, inplace=True),  # noqa: A002
        'alpha_dropout_': lambda input, p, train: F.alpha_dropout(input, p, train,  # noqa: A002
                                                                  inplace=True),
        'feature_alpha_dropout_': lambda input, p, train: F.feature_alpha_dropout(  # noqa: A002
            input, p, train, inplace=True),
        'rrelu_': _inplace(rrelu, 'rrelu_'),
        'feature_dropout_': _inplace(feature_dropout, 'feature_dropout_'),
    }
    for name, fn in inpl.items():
        if name not in namespace:
            if getattr(fn, '__name__', '') == '<lambda>':
                fn.__name__ = fn.__qualname__ = name
                fn.__doc__ = f'``torch.{name}``: the in-place ``{name[:-1]}``.'
            namespace[name] = fn
