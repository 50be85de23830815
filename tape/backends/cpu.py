"""``torch.backends.cpu``."""


def get_cpu_capability():
    """The widest SIMD level NumPy detected on this CPU, named as torch names it
    (``'AVX512'``, ``'AVX2'``, ``'DEFAULT'``; ``'SVE256'``/``'DEFAULT'`` on ARM)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as f
    except ImportError:  # NumPy < 2
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as f
        except ImportError:
            return 'DEFAULT'
    if all(f.get(k) for k in ('AVX512F', 'AVX512BW', 'AVX512VL', 'AVX512DQ')):
        return 'AVX512'
    if f.get('AVX2') and f.get('FMA3'):
        return 'AVX2'
    if f.get('SVE'):
        return 'SVE256'
    return 'DEFAULT'
