"""``tape.nn.utils.clip_grad``: the gradient clipping functions (defined in
``tape.nn.utils``) under their PyTorch module path, and the deprecated
``clip_grad_norm``."""
import warnings as _warnings

from . import (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,  # noqa: F401
               get_total_norm)

__all__ = ['clip_grad_norm', 'clip_grad_norm_', 'clip_grad_value_']


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of ``clip_grad_norm_`` (warns as PyTorch does)."""
    _warnings.warn('`torch.nn.utils.clip_grad_norm` is now deprecated in favor of '
                   '`torch.nn.utils.clip_grad_norm_`.', FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
