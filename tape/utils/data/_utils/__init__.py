"""``torch.utils.data._utils``: the module path PyTorch documents for extending
``default_collate`` (``from torch.utils.data._utils.collate import collate,
default_collate_fn_map``)."""
from . import collate  # noqa: F401
