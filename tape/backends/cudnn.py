"""``torch.backends.cudnn``: tape has no cuDNN.  The flags are recorded so that they
read back; they have no numerical effect."""
import contextlib

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True
fp32_precision = 'none'


def is_available():
    """False: tape has no cuDNN."""
    return False


def version():
    """None: tape has no cuDNN."""
    return None


def is_acceptable(tensor):
    """False: no tensor runs on cuDNN in tape."""
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True, fp32_precision='none', depthwise_kernel='auto'):
    """Set the flags for the block and restore them after it (no numerical effect)."""
    g = globals()
    names = ('enabled', 'benchmark', 'benchmark_limit', 'deterministic', 'allow_tf32',
             'fp32_precision')
    saved = {n: g[n] for n in names}
    g.update(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
             deterministic=deterministic, allow_tf32=allow_tf32,
             fp32_precision=fp32_precision)
    try:
        yield
    finally:
        g.update(saved)
