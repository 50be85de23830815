"""``tape.nn``: for now the functional interface, ``tape.nn.functional``."""
from . import functional  # noqa: F401
