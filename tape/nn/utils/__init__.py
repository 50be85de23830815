"""``tape.nn.utils``: gradient clipping and parameter/vector conversion, as in
``torch.nn.utils`` (over plain tensors: there is no ``Module``), and the
``tape.nn.utils.rnn`` submodule (``PackedSequence``, ``pack_padded_sequence``, ...).

>>> import tape
>>> w = tape.tensor([3.0, 4.0], requires_grad=True)
>>> (w * w).sum().backward()
>>> tape.nn.utils.clip_grad_norm_([w], 1.0)
tensor(10.)
"""
import math as _math

from ... import _ops
from ..._shapes import cat as _cat, stack as _stack
from ..._grad_mode import no_grad
from ..._reductions import vector_norm
from ..._tensor import Tensor
from . import rnn  # noqa: F401  (torch.nn.utils.rnn)

__all__ = ['clip_grad_norm_', 'clip_grad_value_', 'get_total_norm', 'clip_grads_with_norm_',
           'parameters_to_vector', 'vector_to_parameters']


def _tensors(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of the norms of ``tensors`` (0 for none)."""
    ts = [t for t in _tensors(tensors) if t is not None]
    norm_type = float(norm_type)
    if not ts:
        return _ops._const(0.0)
    with no_grad():
        total = vector_norm(_stack([vector_norm(t, norm_type) for t in ts]), norm_type)
    if error_if_nonfinite and not _math.isfinite(total.item()):
        raise RuntimeError(f'The total norm of order {norm_type} for gradients from '
                           '`parameters` is non-finite, so it cannot be clipped. To disable '
                           'this error and scale the gradients by the non-finite norm anyway, '
                           'set `error_if_nonfinite=False`')
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale each ``.grad`` by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Clip the gradients' global ``norm_type`` norm to ``max_norm`` in place;
    returns the norm before clipping."""
    ps = _tensors(parameters)
    total = get_total_norm([p.grad for p in ps if p.grad is not None], norm_type,
                           error_if_nonfinite)
    clip_grads_with_norm_(ps, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp each ``.grad`` to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated."""
    return _cat([p.reshape(-1) for p in _tensors(parameters)])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters' data."""
    if not isinstance(vec, Tensor):
        raise TypeError(f'expected torch.Tensor, but got: {type(vec).__name__}')
    i = 0
    for p in _tensors(parameters):
        n = p.numel()
        p.data = vec[i:i + n].view_as(p).data
        i += n
from . import parametrize  # noqa: E402,F401  (torch.nn.utils.parametrize)
from . import parametrizations  # noqa: E402,F401
from . import clip_grad, convert_parameters, fusion, init, memory_format, stateless  # noqa: E402,F401,E501
from .clip_grad import clip_grad_norm  # noqa: E402,F401
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: E402,F401
                     fuse_linear_bn_weights)
from .init import skip_init  # noqa: E402,F401
from .memory_format import (convert_conv2d_weight_memory_format,  # noqa: E402,F401
                            convert_conv3d_weight_memory_format)
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402,F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: E402,F401
__all__ += ['clip_grad_norm', 'convert_conv2d_weight_memory_format',  # noqa: E402
            'convert_conv3d_weight_memory_format', 'fuse_conv_bn_eval', 'fuse_conv_bn_weights',
            'fuse_linear_bn_eval', 'fuse_linear_bn_weights', 'parametrizations', 'parametrize',
            'remove_spectral_norm', 'remove_weight_norm', 'rnn', 'skip_init', 'spectral_norm',
            'stateless', 'weight_norm']
