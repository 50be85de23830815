"""``tape.nn.utils.rnn``: packed and padded batches of variable-length sequences, as
``torch.nn.utils.rnn`` has them: ``PackedSequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pad_sequence``, ``unpad_sequence``, ``pack_sequence``,
``unpack_sequence`` and ``invert_permutation``.

Every function moves values with one gather (``index_select``) over the inputs
(joined by one ``cat`` where there are several, with a constant row for the
padding), so the results differentiate like any tape op, to any order. Lengths
may be a list or an int64 tensor; PyTorch's checks and messages are kept.
``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` take a ``PackedSequence`` input.

Differences from PyTorch: ``unpad_sequence`` with ``batch_first=False`` leaves its
input as it is (PyTorch transposes it in place, ``transpose_(0, 1)``), and
``pack_padded_sequence`` raises a RuntimeError for a length above the input's
number of time steps (PyTorch reads past the input's end).

>>> import tape
>>> from tape.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
>>> seq = tape.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
>>> packed = pack_padded_sequence(seq, [2, 1, 3], batch_first=True, enforce_sorted=False)
>>> packed
PackedSequence(data=tensor([4, 1, 3, 5, 2, 6]), batch_sizes=tensor([3, 2, 1]), sorted_indices=tensor([2, 0, 1]), unsorted_indices=tensor([1, 2, 0]))
>>> pad_packed_sequence(packed, batch_first=True)
(tensor([[1, 2, 0],
        [3, 0, 0],
        [4, 5, 6]]), tensor([2, 1, 3]))
"""
from collections.abc import Iterable as _Iterable
from typing import NamedTuple as _NamedTuple, Optional as _Optional

import numpy as np

from ..._indexing import index_select as _index_select
from ..._shapes import cat as _cat
from ..._tensor import Tensor, _leaf

__all__ = ['PackedSequence', 'invert_permutation', 'pack_padded_sequence',
           'pad_packed_sequence', 'pad_sequence', 'unpad_sequence', 'pack_sequence',
           'unpack_sequence']


def _long(a):
    return _leaf(np.ascontiguousarray(a, dtype=np.int64))


def _ints(t):
    """The values of an index tensor (or list) as an int64 array."""
    return np.asarray(t._data if isinstance(t, Tensor) else t).astype(np.int64)


class PackedSequence_(_NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: _Optional[Tensor]
    unsorted_indices: _Optional[Tensor]


class PackedSequence(PackedSequence_):
    """A packed batch of sequences: ``data`` holds the time steps one after another,
    each step's rows those of the sequences still running (longest first);
    ``batch_sizes`` (an int64 tensor) says how many rows each step has;
    ``sorted_indices`` / ``unsorted_indices`` (or None) map between the caller's batch
    order and the sorted one. Made by ``pack_padded_sequence`` and ``pack_sequence``,
    read by the RNN modules and ``pad_packed_sequence``."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        return super().__new__(cls, *_packed_sequence_init_args(
            data, batch_sizes, sorted_indices, unsorted_indices))

    def pin_memory(self):
        raise RuntimeError('Cannot access accelerator device when none is available.')

    def to(self, *args, **kwargs):
        """``data.to(...)``; ``self`` when that changes nothing, else a copy (the
        batch sizes and indices stay as they are: everything is on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cuda(self, *args, **kwargs):
        kwargs['device'] = 'cuda'
        return self.to(*args, **kwargs)

    def cpu(self, *args, **kwargs):
        return self.to(*args, **kwargs)

    def double(self):
        return self.to(dtype=np.dtype('float64'))

    def float(self):
        return self.to(dtype=np.dtype('float32'))

    def half(self):
        return self.to(dtype=np.dtype('float16'))

    def long(self):
        return self.to(dtype=np.dtype('int64'))

    def int(self):
        return self.to(dtype=np.dtype('int32'))

    def short(self):
        return self.to(dtype=np.dtype('int16'))

    def char(self):
        return self.to(dtype=np.dtype('int8'))

    def byte(self):
        return self.to(dtype=np.dtype('uint8'))

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _packed_sequence_init_args(data, batch_sizes=None, sorted_indices=None,
                               unsorted_indices=None):
    if unsorted_indices is None:
        unsorted_indices = invert_permutation(sorted_indices)
    if batch_sizes is not None:
        return data, batch_sizes, sorted_indices, unsorted_indices
    # PackedSequence((data, batch_sizes), sorted_indices=...)
    if not (isinstance(data, (list, tuple)) and len(data) == 2):
        raise AssertionError('Expected data to be a list or tuple of length 2')
    return data[0], data[1], sorted_indices, unsorted_indices


def invert_permutation(permutation):
    """The inverse of the 1-D index tensor ``permutation`` (None for None)."""
    if permutation is None:
        return None
    p = _ints(permutation).reshape(-1)
    out = np.empty_like(p)
    out[p] = np.arange(p.size, dtype=np.int64)
    return _long(out.reshape(np.shape(permutation._data)))


def _lengths_array(lengths):
    if isinstance(lengths, Tensor):
        return np.asarray(lengths._data).astype(np.int64)
    try:
        return np.asarray(lengths, dtype=np.int64)
    except (TypeError, ValueError):
        return np.asarray([int(v) for v in lengths], dtype=np.int64)


def _dim_error(nd, dim):
    if nd == 0:
        return IndexError(f'Dimension specified as {dim} but tensor has no dimensions')
    return IndexError(f'Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], '
                      f'but got {dim})')


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    """Pack the padded batch ``input`` (``T x B x *``, or ``B x T x *`` with
    ``batch_first``) of sequences of the given ``lengths`` into a ``PackedSequence``.
    With ``enforce_sorted`` the lengths must be decreasing; else the batch is sorted
    (stably, longest first) and the permutation kept in the result."""
    lens = _lengths_array(lengths)
    nd = input.dim()
    sorted_indices = None
    order = None
    if not enforce_sorted:
        if lens.ndim == 1:
            order = np.argsort(-lens, kind='stable')
            lens = lens[order]
            sorted_indices = _long(order)
            if nd < 2 and not batch_first:    # PyTorch's index_select on dim 1
                raise _dim_error(nd, 1)
    # PyTorch's _pack_padded_sequence checks, in its order
    if input.numel() == 0:
        raise RuntimeError('Cannot pack empty tensors.')
    if nd < 2:
        raise _dim_error(nd, 1)
    if lens.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f'{lens.ndim}D cpu Long tensor')
    shape = tuple(input.shape)
    steps, batch = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    if lens.shape[0] != batch:
        raise RuntimeError(f'Expected `len(lengths)` to be equal to batch_size, but got '
                           f'{lens.shape[0]} (batch_size={batch})')
    if lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if np.any(lens[1:] > lens[:-1]):
        raise RuntimeError('`lengths` array must be sorted in decreasing order when '
                           '`enforce_sorted` is True. You can pass `enforce_sorted=False` to '
                           'pack_padded_sequence and/or pack_sequence to sidestep this '
                           'requirement if you do not need ONNX exportability.')
    if lens[0] > steps:
        raise RuntimeError(f'pack_padded_sequence: a length ({int(lens[0])}) exceeds the '
                           f'number of time steps of the input ({steps})')
    t_max = int(lens[0])
    batch_sizes = (lens[None, :] > np.arange(t_max)[:, None]).sum(1).astype(np.int64)
    src = order if order is not None else np.arange(batch)
    # row (t, b) of the packed data: the b-th sorted sequence's step t
    idx = np.concatenate([(src[:b] * steps + t) if batch_first else (t * batch + src[:b])
                          for t, b in enumerate(batch_sizes)])
    flat = input.reshape((steps * batch,) + shape[2:])
    data = _index_select(flat, 0, _long(idx))
    return PackedSequence(data, _long(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of ``pack_padded_sequence``: returns the padded batch (``T x B x *``,
    or ``B x T x *``), in the caller's batch order, and the lengths (an int64 tensor).
    ``total_length`` pads to that many steps."""
    batch_sizes = _ints(sequence.batch_sizes)
    max_seq_length = batch_sizes.shape[0]
    if total_length is not None:
        if isinstance(total_length, bool) or not isinstance(total_length, (int, np.integer)):
            raise TypeError("_pad_packed_sequence(): argument 'total_length' (position 5) "
                            f'must be int, not {type(total_length).__name__}')
        if total_length < max_seq_length:
            raise ValueError('Expected total_length to be at least the length of the longest '
                             'sequence in input, but got '
                             f'total_length={total_length} and max sequence length being '
                             f'{max_seq_length}')
        max_seq_length = int(total_length)
    data = sequence.data
    rows = data.shape[0]
    rest = tuple(data.shape[1:])
    batch = int(batch_sizes[0]) if batch_sizes.size else 0
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    grid = np.full((max_seq_length, batch), rows, np.int64)     # `rows`: the padding row
    for t, b in enumerate(batch_sizes):
        grid[t, :b] = offsets[t] + np.arange(b)
    lengths = (grid[:batch_sizes.shape[0]] < rows).sum(0).astype(np.int64)
    if sequence.unsorted_indices is not None:
        unsorted = _ints(sequence.unsorted_indices)
        grid = grid[:, unsorted]
        lengths = lengths[unsorted]
    if batch_first:
        grid = grid.T
    pad = _leaf(np.full((1,) + rest, padding_value, dtype=np.asarray(data._data).dtype))
    source = _cat([data, pad], 0)
    out = _index_select(source, 0, _long(grid.reshape(-1))).reshape(grid.shape + rest)
    return out, _long(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side='right'):
    """Stack the sequences (``L_i x *`` each) into one ``T x B x *`` (or ``B x T x *``)
    tensor, padded with ``padding_value`` on the ``padding_side`` ('right' or 'left');
    in the first sequence's dtype."""
    if not isinstance(sequences, _Iterable):
        raise RuntimeError('pad_sequence: Expected iterable for input sequences, but got arg '
                           f'of type: {type(sequences)}')
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError('received an empty list of sequences')
    if padding_side not in ('left', 'right'):
        raise RuntimeError('Expected padding_side to be one of left or right, but got '
                           f'{padding_side}.')
    first = sequences[0]
    if first.dim() == 0:
        raise RuntimeError('ArrayRef: invalid slice, N = 1; size = 0')
    trailing = tuple(first.shape[1:])
    dtype = np.asarray(first._data).dtype
    lens = []
    pieces = []
    for s in sequences:
        if s.dim() == 0:
            raise IndexError('Dimension specified as 0 but tensor has no dimensions')
        n = s.size(0)
        if np.asarray(s._data).dtype != dtype:
            s = s.to(dtype)
        if tuple(s.shape[1:]) != trailing:
            have = tuple(s.shape[1:])
            # copy_'s broadcasting of the sequence into its slot
            for k in range(1, max(len(have), len(trailing)) + 1):
                a = trailing[-k] if k <= len(trailing) else 1
                b = have[-k] if k <= len(have) else 1
                if b not in (1, a) or k > len(trailing):
                    raise RuntimeError(f'The size of tensor a ({a}) must match the size of '
                                       f'tensor b ({b}) at non-singleton dimension '
                                       f'{len(trailing) - k + 1}')
            s = s.expand((n,) + trailing)
        lens.append(n)
        pieces.append(s)
    max_len = max(lens)
    total = sum(lens)
    grid = np.full((max_len, len(pieces)), total, np.int64)     # `total`: the padding row
    off = 0
    for i, n in enumerate(lens):
        start = max_len - n if padding_side == 'left' else 0
        grid[start:start + n, i] = off + np.arange(n)
        off += n
    if batch_first:
        grid = grid.T
    pad = _leaf(np.full((1,) + trailing, padding_value, dtype=dtype))
    source = _cat(pieces + [pad], 0)
    return _index_select(source, 0, _long(grid.reshape(-1))).reshape(grid.shape + trailing)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences of a padded batch, cut to ``lengths`` (a tensor), as a list.
    Unlike PyTorch, a ``batch_first=False`` input is not transposed in place."""
    if not hasattr(lengths, 'device'):
        raise AttributeError(f"'{type(lengths).__name__}' object has no attribute 'device'")
    p = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lens = _ints(lengths).reshape(-1) if lengths.dim() else _ints(lengths)
    if lens.ndim == 0:
        raise TypeError('iteration over a 0-d tensor')
    out = []
    for i, n in zip(range(p.size(0)), lens, strict=True):
        out.append(p[i, :max(int(n), 0)])
    return out


def pack_sequence(sequences, enforce_sorted=True):
    """``pack_padded_sequence(pad_sequence(sequences), lengths)``: pack a list of
    sequences (``L_i x *``)."""
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The sequences of a ``PackedSequence``, as a list in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
