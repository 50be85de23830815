"""``torch.backends.mkldnn``: tape does not use oneDNN.  ``enabled`` and the other
flags are recorded so that they read back; they have no numerical effect."""
import contextlib

enabled = True
deterministic = False
allow_tf32 = True
fp32_precision = 'none'


def is_available():
    """False: tape does not use oneDNN (its kernels are NumPy/Numba)."""
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision='none'):
    """Set the flags for the block and restore them after it (no numerical effect)."""
    g = globals()
    names = ('enabled', 'deterministic', 'allow_tf32', 'fp32_precision')
    saved = {n: g[n] for n in names}
    g.update(enabled=enabled, deterministic=deterministic, allow_tf32=allow_tf32,
             fp32_precision=fp32_precision)
    try:
        yield
    finally:
        g.update(saved)
