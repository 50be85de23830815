"""Datasets, as ``torch.utils.data.dataset``."""
import bisect
import itertools
import math
import warnings
from typing import Generic, Iterable, TypeVar

__all__ = ['Dataset', 'IterableDataset', 'TensorDataset', 'StackDataset', 'ConcatDataset',
           'ChainDataset', 'Subset', 'random_split']

_T_co = TypeVar('_T_co', covariant=True)


class Dataset(Generic[_T_co]):
    """A map-style dataset: subclasses define ``__getitem__`` (and usually
    ``__len__``, which samplers and ``DataLoader`` need)."""

    def __getitem__(self, index):
        raise NotImplementedError('Subclasses of Dataset should implement __getitem__.')

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset[_T_co], Iterable[_T_co]):
    """An iterable-style dataset: subclasses define ``__iter__``."""

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)``; all tensors share their
    first dimension."""

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != tensor.size(0) for tensor in tensors):
            raise AssertionError('Size mismatch between tensors')
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Datasets of equal length zipped: tuples (positional) or dicts (keywords)."""

    def __init__(self, *args, **kwargs):
        if args:
            if kwargs:
                raise ValueError('Supported either ``tuple``- (via ``args``) or'
                                 '``dict``- (via ``kwargs``) like input/output, but both types '
                                 'are given.')
            self._length = len(args[0])
            if any(self._length != len(dataset) for dataset in args):
                raise ValueError('Size mismatch between datasets')
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(dataset) for dataset in tmp):
                raise ValueError('Size mismatch between datasets')
            self.datasets = kwargs
        else:
            raise ValueError('At least one dataset should be passed')

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            n = len(e)
            r.append(n + s)
            s += n
        return r

    def __init__(self, datasets):
        super().__init__()
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError('datasets should not be an empty iterable')
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError('ConcatDataset does not support IterableDataset')
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError('absolute value of index should not exceed dataset length')
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx == 0:
            sample_idx = idx
        else:
            sample_idx = idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]

    @property
    def cummulative_sizes(self):
        warnings.warn('`cummulative_sizes` attribute is renamed to `cumulative_sizes`',
                      FutureWarning, stacklevel=2)
        return self.cumulative_sizes


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (chained lazily)."""

    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError('ChainDataset only supports IterableDataset')
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError('ChainDataset only supports IterableDataset')
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ \
                and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f'{type(self).__name__} overrides __getitem__ but not __getitems__. '
                'When subclassing Subset and overriding __getitem__, you must also override '
                '__getitems__ to ensure DataLoader works correctly with your custom logic. '
                'A simple implementation:\n\n'
                'def __getitems__(self, indices):\n'
                '    return [self.__getitem__(idx) for idx in indices]')

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, '__getitems__', None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping ``Subset``s of the given lengths
    (ints, or fractions summing to 1: each gets ``floor(len * frac)`` and the
    remainder is handed out one by one, round robin, as PyTorch does).  The
    permutation comes from ``generator`` (a ``tape.Generator``; None: tape's
    default generator).

    >>> import tape
    >>> [len(s) for s in random_split(range(10), [0.5, 0.3, 0.2])]
    [5, 3, 2]
    >>> [len(s) for s in random_split(range(11), [0.5, 0.5])]
    [6, 5]
    """
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f'Fraction at index {i} is not between 0 and 1')
            subset_lengths.append(math.floor(len(dataset) * frac))
        remainder = len(dataset) - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f'Length of split at index {i} is 0. '
                              f'This might result in an empty dataset.', stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError('Sum of input lengths does not equal the length of the input dataset!')
    from ... import randperm
    indices = randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[offset - length: offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]
