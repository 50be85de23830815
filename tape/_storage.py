"""``Tensor.untyped_storage()`` and ``Tensor.storage()``: the memory a tensor
and its views share, as PyTorch's storages show it.

A tape tensor's data is a NumPy array; its storage is the buffer at the root
of that array's ``.base`` chain (a view of a view of a leaf shares the leaf's
buffer).  The storage objects here are read views of that buffer: a tutorial's
check that a view shares memory (``y.untyped_storage().data_ptr() ==
x.untyped_storage().data_ptr()``), its size, its elements.  Writing through a
storage is left out: every write in tape goes through a tensor, which is how
in-place changes reach the version counters autograd checks.
"""
import warnings

import numpy as np


def _root_bytes(t):
    """(the storage's bytes as a read-only uint8 array, the tensor's offset in
    it in bytes)."""
    from ._tensor import _storage
    d = _storage(t)
    root = d
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    start = t.data_ptr() - t.storage_offset() * d.dtype.itemsize
    if isinstance(root, np.ndarray) and root.flags.c_contiguous:
        end = root.ctypes.data + root.nbytes
    else:       # a raw buffer (tape's pool): as far as the tensor reaches
        last = d.ctypes.data + sum((n - 1) * s for n, s in zip(d.shape, d.strides) if s > 0)
        end = last + d.dtype.itemsize if d.size else d.ctypes.data
    n = max(end - start, 0)
    if n == 0:
        return np.zeros(0, np.uint8), 0
    buf = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(start))
    buf = buf.view()
    buf.flags.writeable = False
    return _Keep(buf, d), start


class _Keep(np.ndarray):
    """A byte view that keeps the tensor's array (and so the buffer) alive."""
    def __new__(cls, buf, owner):
        obj = buf.view(cls)
        obj._owner = owner
        return obj


class UntypedStorage:
    """The bytes under a tensor (``torch.UntypedStorage``)."""

    def __init__(self, tensor):
        self._bytes, self._ptr = _root_bytes(tensor)
        self.device = tensor.device

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return int(self._bytes.size)

    size = nbytes
    __len__ = nbytes

    def element_size(self):
        return 1

    def __getitem__(self, i):
        v = self._bytes[i]
        return int(v) if np.ndim(v) == 0 else [int(b) for b in v]

    def tolist(self):
        return [int(b) for b in self._bytes]

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self):
        body = '\n'.join(f' {b}' for b in self.tolist())
        return f'{body}\n[tape.storage.UntypedStorage(device=cpu) of size {self.nbytes()}]'


class TypedStorage:
    """The elements under a tensor (``torch.TypedStorage``, deprecated there)."""

    def __init__(self, tensor):
        raw, self._ptr = _root_bytes(tensor)
        self.dtype = tensor.dtype
        k = raw.size // self.dtype.itemsize
        self._values = raw[:k * self.dtype.itemsize].view(self.dtype)
        self.device = tensor.device

    def data_ptr(self):
        return self._ptr

    def size(self):
        return int(self._values.size)

    __len__ = size

    def element_size(self):
        return self.dtype.itemsize

    def nbytes(self):
        return self.size() * self.dtype.itemsize

    def __getitem__(self, i):
        v = self._values[i]
        return v.tolist()

    def tolist(self):
        return self._values.tolist()

    def __iter__(self):
        return iter(self.tolist())

    def untyped(self):
        return self._untyped

    def __repr__(self):
        body = '\n'.join(f' {v}' for v in self.tolist())
        return (f'{body}\n[tape.storage.TypedStorage(dtype=tape.{self.dtype}, device=cpu) of '
                f'size {self.size()}]')


def untyped_storage(self):
    """``Tensor.untyped_storage()``: the bytes this tensor and its views share."""
    return UntypedStorage(self)


def storage(self):
    """``Tensor.storage()``: the elements this tensor and its views share (PyTorch
    deprecates it, with the warning given here, for ``untyped_storage()``)."""
    warnings.warn('TypedStorage is deprecated. It will be removed in the future and '
                  'UntypedStorage will be the only storage class. This should only matter to '
                  'you if you are using storages directly.  To access UntypedStorage directly, '
                  'use tensor.untyped_storage() instead of tensor.storage()', UserWarning,
                  stacklevel=2)
    s = TypedStorage(self)
    s._untyped = UntypedStorage(self)
    return s
