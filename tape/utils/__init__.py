"""``torch.utils`` for tape: ``tape.utils.data`` (datasets, samplers,
``DataLoader``, ``default_collate``) and ``tape.utils.checkpoint``
(activation checkpointing)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
