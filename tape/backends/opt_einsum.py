"""``torch.backends.opt_einsum``: ``enabled`` and ``strategy`` are recorded so that
they read back; tape's ``einsum`` does not consult them (no numerical effect)."""
import importlib.util

_available = importlib.util.find_spec('opt_einsum') is not None
enabled = True
strategy = 'auto' if _available else None


def is_available():
    """Whether the ``opt_einsum`` package is installed."""
    return _available


def get_opt_einsum():
    """The ``opt_einsum`` module if installed, else ``None``."""
    if not _available:
        return None
    import opt_einsum
    return opt_einsum
