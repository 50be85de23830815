"""``torch.amp`` for tape: ``GradScaler`` (as torch's CPU scaler) and ``autocast``
(which in tape runs regions without lowering precision; see ``tape.amp.autocast``)."""
from .autocast_mode import (autocast, custom_bwd, custom_fwd, get_autocast_dtype,  # noqa: F401
                       is_autocast_available, is_autocast_enabled, set_autocast_dtype,
                       set_autocast_enabled)
from .grad_scaler import GradScaler, OptState  # noqa: F401

__all__ = ['autocast', 'custom_fwd', 'custom_bwd', 'GradScaler', 'is_autocast_available',
           'is_autocast_enabled', 'get_autocast_dtype']
