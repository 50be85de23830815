"""``torch.backends.openmp``."""


def is_available():
    """Whether Numba's OpenMP threading layer can be loaded (tape's kernels use Numba)."""
    try:
        from numba.np.ufunc import omppool  # noqa: F401
        return True
    except Exception:
        return False
