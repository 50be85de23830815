"""Samplers, as ``torch.utils.data.sampler``.  Random ones draw from tape's
generator (``tape.manual_seed``) or the ``generator`` given (a
``tape.Generator``)."""
import itertools
from typing import Generic, TypeVar

__all__ = ['BatchSampler', 'RandomSampler', 'Sampler', 'SequentialSampler',
           'SubsetRandomSampler', 'WeightedRandomSampler']

_T_co = TypeVar('_T_co', covariant=True)


class Sampler(Generic[_T_co]):
    """Base class of samplers: ``__iter__`` yields indices (or lists of
    indices); ``__len__`` is optional but ``len(DataLoader)`` needs it."""

    def __iter__(self):
        raise NotImplementedError


def _fresh_generator():
    """A new ``tape.Generator`` seeded from the default generator (PyTorch's
    RandomSampler does the same when given no generator)."""
    import tape
    seed = int(tape._rng[0].integers(0, 2 ** 63 - 1))
    return tape.Generator().manual_seed(seed)


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation (``num_samples`` beyond ``len`` repeats whole
    permutations), or ``num_samples`` draws with ``replacement``."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError('replacement should be a boolean value, but got '
                            f'replacement={self.replacement}')
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError('num_samples should be a positive integer value, but got '
                             f'num_samples={self.num_samples}')

    @property
    def num_samples(self):
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        import tape
        n = len(self.data_source)
        generator = _fresh_generator() if self.generator is None else self.generator
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from tape.randint(0, n, (32,), dtype=tape.int64,
                                        generator=generator).tolist()
            yield from tape.randint(0, n, (self.num_samples % 32,), dtype=tape.int64,
                                    generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from tape.randperm(n, generator=generator).tolist()
            yield from tape.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        import tape
        for i in tape.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError('num_samples should be a positive integer value, but got '
                             f'num_samples={num_samples}')
        if not isinstance(replacement, bool):
            raise ValueError('replacement should be a boolean value, but got '
                             f'replacement={replacement}')
        import tape
        weights_tensor = tape.as_tensor(weights, dtype=tape.float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError('weights should be a 1d sequence but given '
                             f'weights have shape {tuple(weights_tensor.shape)}')
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        import tape
        rand_tensor = tape.multinomial(self.weights, self.num_samples, self.replacement,
                                       generator=self.generator)
        yield from iter(rand_tensor.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter,
    or dropped with ``drop_last``).

    >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=True))
    [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError('batch_size should be a positive integer value, but got '
                             f'batch_size={batch_size}')
        if not isinstance(drop_last, bool):
            raise ValueError(f'drop_last should be a boolean value, but got drop_last={drop_last}')
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        sampler_iter = iter(self.sampler)
        if self.drop_last:
            args = [sampler_iter] * self.batch_size
            for batch_droplast in zip(*args):
                yield [*batch_droplast]
        else:
            batch = [*itertools.islice(sampler_iter, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(sampler_iter, self.batch_size)]

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
