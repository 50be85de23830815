"""``torch.backends.mps``: tape has no MPS."""


def is_available():
    """False: tape has no MPS device."""
    return False


def is_built():
    """False: tape is not built with MPS."""
    return False
