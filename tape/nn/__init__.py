"""``tape.nn``: the functional interface (``tape.nn.functional``), ``init`` and ``utils``."""
from . import functional  # noqa: F401
from . import init, utils  # noqa: F401
