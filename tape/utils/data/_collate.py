"""``default_collate`` and ``default_convert``, as ``torch.utils.data._utils.collate``:
samples become batches (tensors stacked, Python and NumPy numbers and NumPy
arrays made tensors with PyTorch's dtypes, strings and bytes kept as lists,
mappings, namedtuples, tuples and lists collated field by field)."""
import collections
import copy
import re

import numpy as np

from ..._tensor import Tensor

np_str_obj_array_pattern = re.compile(r'[SaUO]')

default_collate_err_msg_format = (
    'default_collate: batch must contain tensors, numpy arrays, numbers, '
    'dicts or lists; found {}')


def _tape():
    import tape
    return tape


def default_convert(data):
    """NumPy arrays and scalars in ``data`` made tensors (recursively through
    mappings, namedtuples, tuples (which become lists) and sequences); other
    values as they are.  The collate function of a ``DataLoader`` with
    ``batch_size=None``.

    >>> import numpy as np
    >>> default_convert(np.array([1, 2]))
    tensor([1, 2])
    >>> default_convert((np.float32(1.5), 'a'))
    [tensor(1.5000), 'a']
    """
    tape = _tape()
    elem_type = type(data)
    if isinstance(data, tape.Tensor):
        return data
    if elem_type.__module__ == 'numpy' and elem_type.__name__ not in ('str_', 'string_',
                                                                      'bytes_'):
        if elem_type.__name__ == 'ndarray' \
                and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return _from_numpy_like(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, '_fields'):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _from_numpy_like(data):
    """``torch.as_tensor`` of a NumPy array or scalar (or a list of NumPy
    scalars): its own dtype kept (int32 stays int32)."""
    tape = _tape()
    arr = np.asarray(data)
    if arr.dtype.kind == 'O':
        raise TypeError(default_collate_err_msg_format.format(arr.dtype))
    if isinstance(data, np.ndarray):
        return tape.as_tensor(data)
    return tape.from_numpy(np.array(arr))


def collate(batch, *, collate_fn_map=None):
    """Collate ``batch`` (a list of samples) using ``collate_fn_map`` (type ->
    function) for the leaves, recursing through mappings and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                              for key in elem})
                return clone
            return elem_type({key: collate([d[key] for d in batch],
                                           collate_fn_map=collate_fn_map) for key in elem})
        except TypeError:
            return {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                    for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, '_fields'):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map)
                           for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError('each element in list of batch should be of equal size')
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = collate(samples, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(samples, collate_fn_map=collate_fn_map)
                              for samples in transposed])
        except TypeError:
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return _tape().stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([_tape().as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _from_numpy_like(list(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    tape = _tape()
    return tape.tensor(list(batch), dtype=tape.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return _tape().tensor(list(batch))


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


# filled at import, as PyTorch's, so that a user's entries (added with
# ``default_collate_fn_map.update``) join the defaults instead of replacing them
default_collate_fn_map = {Tensor: collate_tensor_fn,
                          np.ndarray: collate_numpy_array_fn,
                          (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
                          float: collate_float_fn,
                          int: collate_int_fn,
                          str: collate_str_fn,
                          bytes: collate_str_fn}


def default_collate(batch):
    """A list of samples as one batch, as PyTorch's ``default_collate``:

    * tensors -> stacked along a new first dimension
    * NumPy arrays -> tensors, stacked; NumPy scalars -> a tensor of their dtype
    * ``float`` -> float64 tensor, ``int`` -> int64 tensor (``bool`` -> bool)
    * ``str``/``bytes`` -> the list as it is
    * mappings, namedtuples -> the same type, collated per key/field;
      tuples -> lists, other sequences -> the same type, collated per position

    >>> import tape
    >>> default_collate([(1, 2.0, 'a'), (3, 4.0, 'b')])
    [tensor([1, 3]), tensor([2., 4.], dtype=tape.float64), ('a', 'b')]
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
