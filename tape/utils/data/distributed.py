"""``torch.utils.data.distributed.DistributedSampler``: the share of a dataset
one of ``num_replicas`` processes reads.  tape has no process group, so
``num_replicas`` and ``rank`` must be given (PyTorch reads them from
``torch.distributed`` when they are None).  The shuffle draws from a
``tape.Generator`` seeded with ``seed + epoch``: the same on every replica,
so their shares are disjoint, but not PyTorch's permutation.

>>> from tape.utils.data import DistributedSampler
>>> list(DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False))
[1, 4, 7, 0]
"""
import math

from .sampler import Sampler

__all__ = ['DistributedSampler']


class DistributedSampler(Sampler):
    """Indices ``rank, rank + num_replicas, ...`` of the (shuffled) index list,
    padded by repeating its start to a multiple of ``num_replicas`` (or cut
    to one with ``drop_last``).  Call ``set_epoch`` each epoch to reshuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError('Requires distributed package to be available')
        if rank >= num_replicas or rank < 0:
            raise ValueError(f'Invalid rank {rank}, rank should be in the interval '
                             f'[0, {num_replicas - 1}]')
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            import tape
            g = tape.Generator().manual_seed(self.seed + self.epoch)
            indices = tape.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            pad = self.total_size - len(indices)
            if pad > 0:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose shuffle the next ``__iter__`` gives (seed + epoch)."""
        self.epoch = epoch
