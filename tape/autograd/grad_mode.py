"""``torch.autograd.grad_mode``: the grad-mode context managers, importable from
here as PyTorch's are (``from torch.autograd.grad_mode import no_grad``)."""
from .._grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                          is_inference_mode_enabled, no_grad, set_grad_enabled)

__all__ = ['no_grad', 'enable_grad', 'set_grad_enabled', 'inference_mode']
