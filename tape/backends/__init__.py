"""``torch.backends`` for tape: the flags training scripts set or read.

tape runs on NumPy/Numba on the CPU: there is no cuDNN, CUDA, MPS or oneDNN here.
Setting a flag (``tape.backends.cudnn.benchmark = True``,
``tape.backends.cuda.matmul.allow_tf32 = False``, ...) records the value so that it
reads back, and has no numerical effect.

>>> import tape
>>> tape.backends.cudnn.is_available(), tape.backends.mps.is_available()
(False, False)
>>> with tape.backends.cudnn.flags(enabled=False, deterministic=True):
...     tape.backends.cudnn.deterministic
True
"""
from . import cpu, cuda, cudnn, mkldnn, mps, openmp, opt_einsum  # noqa: F401

__all__ = ['cpu', 'cuda', 'cudnn', 'mkldnn', 'mps', 'openmp', 'opt_einsum']
