"""``torch.backends.cuda``: tape has no CUDA.  ``matmul.allow_tf32`` and friends are
recorded so that they read back; they have no numerical effect."""


class _Matmul:
    """``torch.backends.cuda.matmul``: recorded flags, no numerical effect."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = 'none'


matmul = _Matmul()
_sdp = {'flash': True, 'mem_efficient': True, 'math': True, 'cudnn': True}
preferred_linalg_library_choice = 'default'


def is_built():
    """False: tape is not built with CUDA."""
    return False


def flash_sdp_enabled():
    return _sdp['flash']


def enable_flash_sdp(enabled):
    _sdp['flash'] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _sdp['mem_efficient']


def enable_mem_efficient_sdp(enabled):
    _sdp['mem_efficient'] = bool(enabled)


def math_sdp_enabled():
    return _sdp['math']


def enable_math_sdp(enabled):
    _sdp['math'] = bool(enabled)


def cudnn_sdp_enabled():
    return _sdp['cudnn']


def enable_cudnn_sdp(enabled):
    _sdp['cudnn'] = bool(enabled)


def preferred_linalg_library(backend=None):
    """Record (and return) the preferred linear-algebra library; no effect in tape."""
    global preferred_linalg_library_choice
    if backend is not None:
        preferred_linalg_library_choice = backend
    return preferred_linalg_library_choice
