"""0-d state tensors (``step``, ``mu_product``, ``eta``, ``mu``) that the
optimizers added after the first five keep, as PyTorch does: float32 tensors
written in place (a loaded state dict may have cast them to the parameter's dtype)."""
import numpy as np

from .._tensor import _leaf


def _scalar_state(value):
    """A new float32 0-d state tensor holding ``value``."""
    return _leaf(np.array(value, np.float32))


def _array0(t):
    """The 0-d array behind the state tensor ``t``, made a writable ndarray if needed."""
    arr = t._data
    if type(arr) is not np.ndarray:
        arr = t._data = np.array(arr, getattr(arr, 'dtype', np.float32))
    return arr


def _set0(t, value):
    """``t.copy_(value)`` for a 0-d state tensor: ``value`` rounded to ``t``'s dtype."""
    _array0(t)[...] = value
