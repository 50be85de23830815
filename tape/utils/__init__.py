"""``torch.utils`` for tape: ``tape.utils.data`` (datasets, samplers,
``DataLoader``, ``default_collate``), ``tape.utils.checkpoint``
(activation checkpointing) and ``tape.utils.benchmark`` (``Timer``,
``Measurement``, ``Compare``)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import benchmark  # noqa: F401
