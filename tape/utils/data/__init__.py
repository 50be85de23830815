"""``torch.utils.data`` for tape: in-process data loading.

Datasets (``Dataset``, ``IterableDataset``, ``TensorDataset``, ``StackDataset``,
``ConcatDataset``, ``ChainDataset``, ``Subset``, ``random_split``), samplers
(``Sampler``, ``SequentialSampler``, ``RandomSampler``, ``SubsetRandomSampler``,
``WeightedRandomSampler``, ``BatchSampler``, ``DistributedSampler``), ``DataLoader``,
``default_collate``, ``default_convert`` and ``get_worker_info``, with
PyTorch's arguments, rules and error messages.  Random draws (shuffling,
``random_split``) come from tape's generator (``tape.manual_seed``,
``tape.Generator``), so the permutations are not PyTorch's; everything
deterministic is.

>>> import tape
>>> from tape.utils.data import TensorDataset, DataLoader
>>> ds = TensorDataset(tape.arange(10.0).reshape(5, 2), tape.arange(5))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
[[0, 1], [2, 3], [4]]
"""
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset,  # noqa: F401
                      StackDataset, Subset, TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler, WeightedRandomSampler)
from ._collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, WorkerInfo, get_worker_info, _DatasetKind  # noqa: F401
from . import _utils  # noqa: F401,E402
from . import distributed  # noqa: F401,E402
from .distributed import DistributedSampler  # noqa: F401,E402

__all__ = [
    'BatchSampler', 'ChainDataset', 'ConcatDataset', 'DataLoader', 'Dataset', 'DistributedSampler',
    'IterableDataset', 'RandomSampler', 'Sampler', 'SequentialSampler', 'StackDataset',
    'Subset', 'SubsetRandomSampler', 'TensorDataset', 'WeightedRandomSampler',
    'default_collate', 'default_convert', 'get_worker_info', 'random_split',
]
