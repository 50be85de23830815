"""``tape.nn.utils.memory_format``: ``convert_conv2d_weight_memory_format`` and
``convert_conv3d_weight_memory_format``.

tape tensors are NumPy arrays on the CPU with one (row-major) layout and no
``channels_last`` kernels, so these return ``module`` unchanged: the values
and results are what PyTorch's are, only the physical layout is not changed.
"""
__all__ = ['convert_conv2d_weight_memory_format', 'convert_conv3d_weight_memory_format']


def convert_conv2d_weight_memory_format(module, memory_format):
    """Identity on tape (one memory layout): returns ``module``."""
    return module


def convert_conv3d_weight_memory_format(module, memory_format):
    """Identity on tape (one memory layout): returns ``module``."""
    return module
