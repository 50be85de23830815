"""``DataLoader``, as ``torch.utils.data.dataloader``, loading in-process.

tape has no worker processes: with ``num_workers > 0`` the batches are still
loaded in the main process, in the same order a single process would, and
``get_worker_info()`` stays None.  ``worker_init_fn(0)`` is called once per
iterator then (as by a single worker), ``prefetch_factor``,
``persistent_workers``, ``timeout``, ``multiprocessing_context``,
``pin_memory`` and ``in_order`` are accepted and checked as PyTorch checks
them (``pin_memory=True`` warns as PyTorch does on a machine without an
accelerator) but change nothing else.
"""
import math
import warnings
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import _collate
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ['DataLoader', 'get_worker_info', 'default_collate', 'default_convert']

default_collate = _collate.default_collate
default_convert = _collate.default_convert

_T_co = TypeVar('_T_co', covariant=True)


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info`` returns in a worker (never, in tape: loading is
    in-process)."""
    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: Any = 'multiprocessing'


def get_worker_info():
    """Information about the current DataLoader worker: None, as in PyTorch's
    main process (tape loads every batch in-process)."""
    return None


class _DatasetKind:
    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler):
    """Yields None forever: the sampler of an iterable-style dataset."""

    def __iter__(self):
        while True:
            yield None


class DataLoader(Generic[_T_co]):
    """Batches from a dataset, as ``torch.utils.data.DataLoader``.

    Map-style datasets are read through ``sampler`` (``SequentialSampler``, or
    ``RandomSampler`` with ``shuffle=True`` and ``generator``) grouped by
    ``batch_sampler`` (``BatchSampler(sampler, batch_size, drop_last)``) and
    collated by ``collate_fn`` (``default_collate``; ``default_convert`` with
    ``batch_size=None``); iterable-style datasets are read in order.

    Loading is in-process: ``num_workers > 0`` is accepted (and checked) but
    the batches are loaded in the main process, in the order one worker
    would give them; ``get_worker_info()`` returns None and ``worker_init_fn``
    is called once per iterator with worker id 0.  ``pin_memory``,
    ``persistent_workers``, ``prefetch_factor``, ``timeout`` and
    ``multiprocessing_context`` are accepted and validated as PyTorch does.
    """

    __initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device='',
                 in_order=True):
        if num_workers < 0:
            raise ValueError('num_workers option should be non-negative; '
                             'use num_workers=0 to disable multiprocessing.')
        if timeout < 0:
            raise ValueError('timeout option should be non-negative')
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError('prefetch_factor option could only be specified in multiprocessing.'
                             'let num_workers > 0 to enable multiprocessing, otherwise set '
                             'prefetch_factor to None.')
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError('prefetch_factor option should be non-negative')
        if persistent_workers and num_workers == 0:
            raise ValueError('persistent_workers option needs num_workers > 0')

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError('DataLoader with IterableDataset: expected unspecified shuffle '
                                 f'option, but got shuffle={shuffle}')
            if sampler is not None:
                raise ValueError('DataLoader with IterableDataset: expected unspecified sampler '
                                 f'option, but got sampler={sampler}')
            elif batch_sampler is not None:
                raise ValueError('DataLoader with IterableDataset: expected unspecified '
                                 f'batch_sampler option, but got batch_sampler={batch_sampler}')
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError('sampler option is mutually exclusive with shuffle')

        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError('batch_sampler option is mutually exclusive '
                                 'with batch_size, shuffle, sampler, and '
                                 'drop_last')
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError('batch_size=None option disables auto-batching '
                                 'and is mutually exclusive with drop_last')

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)

        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator

        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called = None
        self._iterator = None

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context):
        if multiprocessing_context is not None and self.num_workers == 0:
            raise ValueError('multiprocessing_context can only be used with '
                             'multi-process loading (num_workers > 0), but got '
                             f'num_workers={self.num_workers}')
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val):
        if self.__initialized and attr in ('batch_size', 'batch_sampler', 'sampler',
                                           'drop_last', 'dataset', 'persistent_workers'):
            raise ValueError(f'{attr} attribute should not be set after '
                             f'{self.__class__.__name__} is initialized')
        super().__setattr__(attr, val)

    def __iter__(self):
        return _SingleProcessDataLoaderIter(self)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self):
        """PyTorch warns about more workers than CPUs; tape starts none."""


class _SingleProcessDataLoaderIter:
    """One pass over a DataLoader, loading in the calling process."""

    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        if loader.pin_memory and loader.pin_memory_device:
            warnings.warn('pin_memory_device is deprecated, the current accelerator will be used '
                          f"as the device,ignore pin_memory_device='{loader.pin_memory_device}'.",
                          stacklevel=3)
        if loader.pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        # as PyTorch, each iterator draws a base seed from the generator
        from ...nn.functional import _rng_of
        rng = _rng_of(loader.generator)
        self._base_seed = int(rng.integers(0, 2 ** 63 - 1))
        self._num_yielded = 0
        if self._num_workers > 0 and loader.worker_init_fn is not None:
            loader.worker_init_fn(0)
        if self._dataset_kind == _DatasetKind.Iterable:
            self._dataset_iter = iter(self._dataset)
            self._ended = False

    def __iter__(self):
        return self

    def _fetch(self, index):
        if self._dataset_kind == _DatasetKind.Map:
            if self._auto_collation:
                getitems = getattr(self._dataset, '__getitems__', None)
                if getitems:
                    data = getitems(index)
                else:
                    data = [self._dataset[idx] for idx in index]
            else:
                data = self._dataset[index]
            return self._collate_fn(data)
        if self._ended:
            raise StopIteration
        if self._auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self._dataset_iter))
                except StopIteration:
                    self._ended = True
                    break
            if len(data) == 0 or (self._drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self._dataset_iter)
        return self._collate_fn(data)

    def __next__(self):
        index = next(self._sampler_iter)
        data = self._fetch(index)
        self._num_yielded += 1
        if self._dataset_kind == _DatasetKind.Iterable \
                and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            warn_msg = (f'Length of IterableDataset {self._dataset} was reported to be '
                        f'{self._IterableDataset_len_called}(when accessing len(dataloader)), '
                        f'but {self._num_yielded} samples have been fetched. ')
            warnings.warn(warn_msg, stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError('{} cannot be pickled', self.__class__.__name__)
