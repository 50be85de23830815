"""A cache of large buffers, so big results and gradients reuse warm memory.

A fresh multi-megabyte NumPy array comes from mmap: the kernel maps and zeroes
each page on first touch, which on these machines costs about as much as a
pass over the data (2-3 ms for 32 MB).  PyTorch avoids it with a caching
allocator; this is ours, for arrays of at least ``MIN_BYTES``.

An array from ``empty`` views a raw buffer through a small owner object, and
every view of the array keeps that owner alive; when the last view dies, a
finalizer puts the raw buffer back for the next request of the same size.
The cache holds at most ``LIMIT`` bytes, so memory stays bounded.

>>> import numpy as np
>>> from tape._pool import pool
>>> a = pool.empty((1024, 1024), np.float64)     # 8 MB
>>> a.shape, a.dtype.name
((1024, 1024), 'float64')
"""
import threading
import weakref

import numpy as np

MIN_BYTES = 1 << 20
LIMIT = 1 << 30
# Cache-line alignment for arrays of ALIGN_MIN bytes or more.  malloc gives
# NumPy 16-byte alignment (an mmap'd block starts 16 bytes into its page); an
# in-place update of a misaligned float32 array (an optimizer step on a
# 784x256 weight) measured 1.6x slower than of an aligned one on these
# machines, as vector loads and stores straddle cache lines.  PyTorch's
# allocator aligns to 64 bytes too.  Smaller arrays are not aligned: finding
# an array's address (``ctypes.data``) builds Python objects, 0.8 us alone but
# 6-9 us right after a large matrix product has flushed the caches, which in
# an MLP step cost more than the alignment saved.
ALIGN = 64
ALIGN_MIN = 1 << 18


def _request(shape, dtype):
    """(shape as a tuple of ints, dtype, bytes) of an array request."""
    if not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    ts = type(shape)
    if ts is int:
        return (shape,), dtype, shape * dtype.itemsize
    if ts is not tuple:
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    count = 1
    for s in shape:
        count *= s
    return shape, dtype, count * dtype.itemsize


def aligned_empty(shape, dtype):
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
    shape, dtype, nbytes = _request(shape, dtype)
    if nbytes < ALIGN_MIN or dtype.kind not in 'biufc':
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + ALIGN, np.uint8)
    return np.ndarray(shape, dtype, raw, -raw.ctypes.data % ALIGN)


def aligned(arr):
    """``arr`` itself when small or already aligned and C-contiguous, else an aligned copy."""
    if arr.nbytes < ALIGN_MIN or (arr.ctypes.data % ALIGN == 0 and arr.flags.c_contiguous):
        return arr
    out = aligned_empty(arr.shape, arr.dtype)
    np.copyto(out, arr)
    return out


class _Owner:
    """Exposes a raw buffer to NumPy; views of the array keep it alive, and
    when the last one dies ``__del__`` puts the buffer back.  (``__del__``
    rather than a ``weakref.finalize``, and the buffer's aligned address
    kept with it rather than asked of ``ctypes`` per request: each cost
    ~10 us right after a large kernel had pushed the interpreter's own data
    out of the caches.)"""
    __slots__ = ('__array_interface__', 'raw', 'start', 'pool', '__weakref__')

    def __del__(self):
        try:
            self.pool._give_back(self.raw, self.start)
        except Exception:       # (interpreter shutdown: nothing to give back to)
            pass


class BufferPool:
    def __init__(self, limit=LIMIT):
        self.free = {}            # nbytes -> [(raw uint8 array, its aligned data address)]
        self.held = 0
        self.limit = limit
        self.lock = threading.RLock()    # (a __del__ may give back from inside a locked section)

    def empty(self, shape, dtype):
        """An uninitialised array, from the cache when one of its size is free."""
        shape, dtype, nbytes = _request(shape, dtype)
        if nbytes < MIN_BYTES:
            return aligned_empty(shape, dtype)
        with self.lock:
            stack = self.free.get(nbytes)
            got = stack.pop() if stack else None
            if got is not None:
                self.held -= nbytes
        if got is None:
            raw = np.empty(nbytes + ALIGN, np.uint8)
            start = raw.ctypes.data
            start += -start % ALIGN
        else:
            raw, start = got
        owner = _Owner()
        owner.raw = raw
        owner.start = start
        owner.pool = self
        owner.__array_interface__ = {'shape': shape, 'typestr': dtype.str,
                                     'data': (start, False), 'version': 3}
        return np.asarray(owner)

    def zeros(self, shape, dtype):
        arr = self.empty(shape, dtype)
        arr.fill(0)
        return arr

    def _give_back(self, raw, start):
        nbytes = raw.nbytes - ALIGN          # the size it was asked for
        with self.lock:
            if self.held + nbytes <= self.limit:
                self.free.setdefault(nbytes, []).append((raw, start))
                self.held += nbytes

    def clear(self):
        with self.lock:
            self.free.clear()
            self.held = 0


pool = BufferPool()
