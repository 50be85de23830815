"""``tape.save`` and ``tape.load``: ``torch.save``/``torch.load`` for tape objects.

>>> import io, tape
>>> model = tape.nn.Linear(3, 2)
>>> buf = io.BytesIO()
>>> tape.save({'model': model.state_dict(), 'epoch': 3}, buf)
>>> _ = buf.seek(0)
>>> ckpt = tape.load(buf)                     # weights_only=True, as torch >= 2.6
>>> model.load_state_dict(ckpt['model'])
<All keys matched successfully>
>>> ckpt['epoch']
3

The file format
---------------
A ``tape.save`` file is a zip archive (stored, not compressed) laid out like
PyTorch's own: ``tape_archive/data.pkl``, a pickle of the object in which
every tensor and every dtype is a *persistent id* (``('tensor', i)``,
``('dtype', '<f4')``) instead of pickled bytes; ``tape_archive/meta.json``,
which lists for tensor ``i`` its storage, dtype, byte offset, shape, byte
strides, ``requires_grad`` and whether it is a ``Parameter``; and
``tape_archive/data/<n>``, the raw bytes of storage ``n``.

Why not PyTorch's own format: its pickle names ``torch._utils`` rebuild
functions and ``torch.*Storage`` classes, which a reader without torch would
have to imitate without a specification, and which ``torch.load`` then would
expect to find (tape does not install torch).  Why not one plain pickle of the
NumPy arrays: NumPy's array pickle goes through ``numpy`` globals that a
``weights_only`` unpickler would have to trust, and it loses storage sharing.
With persistent ids the pickle names no global at all for tensors, dtypes and
plain containers, so the ``weights_only`` unpickler can refuse *every* global
but a short list (``collections.OrderedDict``, ``set``, ``tape.device`` ...),
the data lives outside the pickle as raw bytes (read straight into the new
arrays; with ``mmap=True`` mapped copy-on-write, each storage 64-byte
aligned in the file), and the metadata that sizes the arrays is JSON, parsed
without running any pickle.  A zip keeps the entries addressable by name and
can be written to a stream that cannot seek.

Storage sharing: the tensors of one ``save`` whose bytes overlap in memory (a
tensor and a view of it, two views of one tensor) are written as one storage
that covers exactly the bytes they use, and load as arrays over one new
buffer, so they share memory again as PyTorch's loaded tensors share a
storage (they are not views in autograd's sense, as in PyTorch: ``_base`` is
None and their version counters are their own).  The same tensor object
saved twice loads as one object.  Unlike ``torch.save`` a view does not drag
the rest of its base's memory into the file.

Files written by ``torch.save``
-------------------------------
``tape.load`` also reads ``torch.save`` files, without torch, so that
``model.load_state_dict(tape.load('weights.pt'))`` works for PyTorch
checkpoints.  Both of torch's formats are read: the zip archive (any archive
folder name: ``<root>/data.pkl``, ``<root>/data/<key>``, ``<root>/byteorder``)
and the legacy one of ``_use_new_zipfile_serialization=False`` (pickles of
torch's magic number, the protocol and system info, the object, the storage
keys, then each storage's element count and little-endian bytes).  The
pickle's torch globals are mapped to tape's:
``torch._utils._rebuild_tensor{,_v2,_v3}`` build tensors as NumPy views (with
torch's storage offset, size and stride) of one array per storage, so tensors
that shared a storage in torch (a tensor and its slice or transpose) share
memory again; ``_rebuild_parameter{,_with_state}`` give ``tape.nn.Parameter``
(``requires_grad`` and Python attributes kept); ``torch.Size``,
``torch.device``, the dtypes and ``collections.OrderedDict`` give their tape
equivalents.  Storages are read in the file's byte order (swapped when it is
not the machine's).  dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64,
bool and complex64/128 load as themselves; bfloat16 (which tape lacks) loads
as float32, exactly, with a UserWarning (those tensors are converted copies,
so they share memory only among themselves); other torch dtypes (float8,
quantized), sparse, nested and meta tensors, and TorchScript archives raise
an error that names what is unsupported.  ``weights_only`` behaves as in torch
>= 2.6: by default only the globals above (and those added with
``add_safe_globals``) load, any other raises ``pickle.UnpicklingError``
naming it; with ``weights_only=False`` other globals load as pickle loads
them, except torch globals that tape has no equivalent of (a whole pickled
``nn.Module``, an optimizer): those raise a RuntimeError, since tape never
imports torch.  ``map_location`` and ``mmap=True`` work as for tape's files
(``mmap`` maps the zip format's storages; a legacy file is read).

Not supported: the legacy *tar* format of PyTorch before 0.4 (a clear
RuntimeError), and ``torch.load`` of a ``tape.save`` file: ``tape.save``
writes tape's format only (``_use_new_zipfile_serialization`` is accepted and
ignored).  Everything loads on the CPU.
"""
import contextlib
import io
import json
import os
import pickle
import re
import struct
import sys
import zipfile
from collections import Counter, OrderedDict
from codecs import encode as _codecs_encode

import numpy as np

from . import _tensor
from ._tensor import Size, Tensor, device

__all__ = ['save', 'load', 'DEFAULT_PROTOCOL', 'add_safe_globals', 'get_safe_globals',
           'clear_safe_globals', 'safe_globals']

DEFAULT_PROTOCOL = 2          # torch.serialization.DEFAULT_PROTOCOL
_FORMAT = 'tape.save'
_VERSION = 1
_PREFIX = 'tape_archive/'
_ALIGN = 64                   # storages start 64-byte aligned in the file (for mmap)
_PAD_ID = 0x7461              # the zip "extra field" id of the alignment padding

UNSAFE_MESSAGE = (
    'In PyTorch 2.6, we changed the default value of the `weights_only` argument in '
    '`torch.load` from `False` to `True`; tape.load follows. Re-running `tape.load` with '
    '`weights_only` set to `False` will likely succeed, but it can result in arbitrary code '
    'execution. Do it only if you got the file from a trusted source.')

_CUDA_MESSAGE = (
    'Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is '
    "False. If you are running on a CPU-only machine, please use torch.load with "
    "map_location=torch.device('cpu') to map your storages to the CPU. (tape runs on the "
    'CPU only.)')


# -- saving ---------------------------------------------------------------------
def _is_path(f):
    return isinstance(f, (str, os.PathLike))


def _byte_bounds(a):
    """[lo, hi) of the bytes the array ``a`` (non-empty) reads."""
    lo = hi = a.__array_interface__['data'][0]
    item = a.dtype.itemsize
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + item


class _Collector:
    """Gives each tensor an index as the pickler meets it, then lays out storages."""

    def __init__(self):
        self.index = {}           # id(tensor) -> index
        self.keep = []            # the tensors, alive so their ids stay unique
        self.arrays = []

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            i = self.index.get(id(obj))
            if i is None:
                i = self.index[id(obj)] = len(self.keep)
                self.keep.append(obj)
                d = obj._data
                self.arrays.append(d if type(d) is np.ndarray else np.asarray(d))
            attrs = {k: v for k, v in _tensor._user_attrs(obj).items()
                     if k != _tensor._PARAM_MARK}
            cls = type(obj)
            if attrs or cls is not Tensor:
                return ('tensor', i, attrs or None, None if cls is Tensor else cls)
            return ('tensor', i)
        if isinstance(obj, np.dtype) and obj.kind in 'biufc' and obj.fields is None \
                and obj.subdtype is None:
            return ('dtype', obj.str)
        return None

    def layout(self):
        """(storages as [(lo, hi)], one record per tensor): overlapping arrays share
        a storage covering the union of their bytes."""
        spans = []
        for i, a in enumerate(self.arrays):
            if a.size:
                lo, hi = _byte_bounds(a)
                spans.append((lo, hi, i))
        spans.sort()
        storages, where = [], {}
        for lo, hi, i in spans:
            if storages and lo < storages[-1][1]:
                s = storages[-1]
                s[1] = max(s[1], hi)
            else:
                storages.append([lo, hi])
            where[i] = len(storages) - 1
        records = []
        for i, (t, a) in enumerate(zip(self.keep, self.arrays)):
            if i in where:
                s = where[i]
                off = a.__array_interface__['data'][0] - storages[s][0]
            else:                               # an empty tensor: a storage of its own
                s, off = len(storages), 0
                storages.append([0, 0])
            records.append({'storage': s, 'dtype': a.dtype.str, 'offset': off,
                            'shape': list(a.shape), 'strides': list(a.strides),
                            'requires_grad': bool(t.requires_grad),
                            'parameter': bool(t.__dict__.get(_tensor._PARAM_MARK, False))})
        return storages, records

    def storage_bytes(self, storages, records):
        """Each storage's bytes: every tensor's elements written at its offset."""
        bufs = [np.zeros(hi - lo, np.uint8) for lo, hi in storages]
        for r, a in zip(records, self.arrays):
            if a.size:
                dst = np.ndarray(a.shape, a.dtype, buffer=bufs[r['storage']],
                                 offset=r['offset'], strides=a.strides)
                dst[...] = a
        return bufs


def _check_save_filelike(f):
    if not _is_path(f) and not hasattr(f, 'write'):
        raise AttributeError("expected 'f' to be string, path, or a file-like object with "
                             "a 'write' attribute")


def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save ``obj`` (tensors, state_dicts, checkpoints: any picklable object) to ``f``,
    a path (str or os.PathLike) or a binary file-like object with ``write``, as
    ``torch.save`` does.  Tensors keep their values, dtype, shape, ``requires_grad``
    and Parameter-ness, not ``.grad`` or their graph (a non-leaf is saved as a leaf);
    tensors that share memory are saved sharing it.  See the module docstring for
    the format (a zip archive of tape's own; ``torch.load`` cannot read it)."""
    _check_save_filelike(f)
    if _is_path(f):
        f = os.fspath(f)
        parent = os.path.dirname(os.path.abspath(f))
        if not os.path.isdir(parent):
            raise RuntimeError(f'Parent directory {parent} does not exist.')

    col = _Collector()
    pkl = io.BytesIO()

    class _Pickler(pickle_module.Pickler):
        def persistent_id(self, o):
            return col.persistent_id(o)

    _Pickler(pkl, protocol=pickle_protocol).dump(obj)
    storages, records = col.layout()
    bufs = col.storage_bytes(storages, records)
    col = None
    meta = {'format': _FORMAT, 'version': _VERSION, 'byteorder': sys.byteorder,
            'storages': [{'nbytes': int(b.nbytes), 'location': 'cpu'} for b in bufs],
            'tensors': records}

    if _is_path(f):
        with open(f, 'wb') as fh:
            _write_zip(fh, meta, pkl.getvalue(), bufs)
    else:
        _write_zip(f, meta, pkl.getvalue(), bufs)
        if hasattr(f, 'flush'):
            f.flush()


def _write_zip(fh, meta, pkl, bufs):
    try:
        base = fh.tell()
    except (AttributeError, OSError):
        base = None
    with zipfile.ZipFile(fh, 'w', zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(_PREFIX + 'meta.json', json.dumps(meta))
        zf.writestr(_PREFIX + 'data.pkl', pkl)
        for n, b in enumerate(bufs):
            name = _PREFIX + f'data/{n}'
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            big = b.nbytes >= 0x7FFFFFFF
            start = getattr(zf, 'start_dir', None)
            if base is not None and start is not None:
                # pad the local header's extra field so the data starts aligned
                hdr = start + 30 + len(name.encode()) + (20 if big else 0) + 4
                pad = -(hdr - base) % _ALIGN
                info.extra = struct.pack('<HH', _PAD_ID, pad) + b'\0' * pad
            with zf.open(info, 'w', force_zip64=big) as dst:
                if b.nbytes:
                    dst.write(memoryview(b))


# -- loading --------------------------------------------------------------------
_safe_globals = {}          # 'module.name' -> object, added by add_safe_globals


def _allowed_globals():
    rc = {
        'collections.OrderedDict': OrderedDict,
        'collections.Counter': Counter,
        '_codecs.encode': _codecs_encode,       # bytes, pickled at protocol 2
        'builtins.bytearray': bytearray,
        'builtins.set': set,
        'builtins.complex': complex,
        'tape._tensor.device': device,
        'tape._tensor.Size': Size,
    }
    for name in ('strided', 'preserve_format', 'contiguous_format', 'channels_last',
                 'channels_last_3d'):
        rc['tape._tensor.' + name] = getattr(_tensor, name)
    rc.update(_safe_globals)
    return rc


def _qualname(obj):
    return f'{getattr(obj, "__module__", "")}.{getattr(obj, "__qualname__", obj.__name__)}'


def add_safe_globals(safe_globals):
    """``torch.serialization.add_safe_globals``: allow these classes and functions
    (or ``(obj, 'module.name')`` pairs) in a ``weights_only`` load."""
    for g in safe_globals:
        if isinstance(g, tuple):
            obj, name = g
        else:
            obj, name = g, _qualname(g)
        _safe_globals[name] = obj


def get_safe_globals():
    """The globals added by ``add_safe_globals``."""
    return list(_safe_globals.values())


def clear_safe_globals():
    """Forget the globals added by ``add_safe_globals``."""
    _safe_globals.clear()


@contextlib.contextmanager
def safe_globals(globals_list):
    """``torch.serialization.safe_globals``: ``add_safe_globals`` for a ``with`` block."""
    saved = dict(_safe_globals)
    add_safe_globals(globals_list)
    try:
        yield
    finally:
        _safe_globals.clear()
        _safe_globals.update(saved)


def _weights_only_message(message):
    if 'was not an allowed global by default' in message:
        return ('Weights only load failed. This file can still be loaded, to do so you have '
                'two options, do those steps only if you trust the source of the checkpoint. '
                f'\n\t(1) {UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with '
                '`weights_only=True` please check the recommended steps in the following '
                f'error message.\n\tWeightsUnpickler error: {message}')
    return f'Weights only load failed. {UNSAFE_MESSAGE}\n\n{message}'


class _Storage:
    """What a callable ``map_location`` receives and returns: one loaded storage
    (its bytes are ``storage.data``, a uint8 array)."""

    def __init__(self, data):
        self.data = data
        self.device = _tensor._CPU

    def nbytes(self):
        return int(self.data.nbytes)

    def size(self):
        return int(self.data.nbytes)

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking=False):
        raise RuntimeError(_CUDA_MESSAGE)

    def to(self, device=None, non_blocking=False):
        _check_location(device)
        return self

    def __repr__(self):
        return f'<tape storage of {self.data.nbytes} bytes on cpu>'


def _check_location(loc):
    """Raise unless the map_location target ``loc`` (a string or a device) is the CPU."""
    if isinstance(loc, device):
        d = loc
    else:
        if not isinstance(loc, str):
            if type(loc).__name__ == 'device' and hasattr(loc, 'type'):
                loc = str(loc)      # a torch.device
            else:
                raise TypeError(f'map_location: expected a device or a string, got '
                                f'{type(loc).__name__}')
        d = device(loc)
    if d.type == 'cuda':
        raise RuntimeError(_CUDA_MESSAGE)
    if d.type != 'cpu':
        raise RuntimeError(f"tape runs on the CPU only: cannot load storages onto device '{d}'")


def _restore(storage, location, map_location):
    """``storage`` (a uint8 array saved at ``location``) placed as ``map_location`` says."""
    if map_location is None:
        _check_location(location)
        return storage
    if isinstance(map_location, dict):
        _check_location(map_location.get(location, location))
        return storage
    if isinstance(map_location, (str, device)) or (type(map_location).__name__ == 'device'
                                                   and hasattr(map_location, 'type')):
        _check_location(map_location)
        return storage
    out = map_location(_Storage(storage), location)
    if out is None:
        _check_location(location)
        return storage
    if isinstance(out, _Storage):
        return out.data
    raise TypeError(f'map_location: the callable must return a storage or None, not '
                    f'{type(out).__name__}')


class _Loader:
    def __init__(self, meta, storages):
        self.meta = meta
        self.storages = storages
        self.tensors = {}

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid:
            raise pickle.UnpicklingError(f'unsupported persistent id {pid!r}')
        if pid[0] == 'dtype' and len(pid) == 2 and isinstance(pid[1], str):
            dt = np.dtype(pid[1])
            if dt.kind not in 'biufc' or dt.fields is not None:
                raise pickle.UnpicklingError(f'unsupported dtype {pid[1]!r}')
            return dt
        if pid[0] == 'tensor' and len(pid) in (2, 4) and type(pid[1]) is int:
            i = pid[1]
            t = self.tensors.get(i)
            if t is None:
                t = self.tensors[i] = self._tensor(i, *pid[2:])
            return t
        raise pickle.UnpicklingError(f'unsupported persistent id {pid!r}')

    def _tensor(self, i, attrs=None, cls=None):
        recs = self.meta['tensors']
        if not 0 <= i < len(recs):
            raise pickle.UnpicklingError(f'tensor {i} is not in the file')
        r = recs[i]
        dt = np.dtype(r['dtype'])
        if dt.kind not in 'biufc':
            raise pickle.UnpicklingError(f'unsupported dtype {r["dtype"]!r}')
        buf = self.storages[r['storage']]
        shape, strides = tuple(r['shape']), tuple(r['strides'])
        if 0 in shape:
            arr = np.empty(shape, dt)
        else:
            arr = np.ndarray(shape, dt, buffer=buf, offset=r['offset'], strides=strides)
            if not dt.isnative:         # written on a machine of the other byte order
                arr = arr.astype(dt.newbyteorder('='))
        if cls is None:
            cls = Tensor
        elif not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise pickle.UnpicklingError(f'{cls!r} is not a tensor class')
        attrs = dict(attrs) if attrs else {}
        if r.get('parameter'):
            attrs[_tensor._PARAM_MARK] = True
        return _tensor._rebuild(cls, arr, bool(r['requires_grad']), attrs or None)


def _not_tape_file(name):
    return RuntimeError(
        f'{name} is not a file written by tape.save or torch.save (a zip archive without '
        'tape_archive/meta.json or <archive>/data.pkl)')


def _check_seekable(f):
    try:
        f.seek(f.tell())
    except (io.UnsupportedOperation, AttributeError) as e:
        raise type(e)(str(e) + '. You can only tape.load from a file that is seekable. Please '
                      'pre-load the data into a buffer like io.BytesIO and try to load from '
                      'it instead.') from None


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved by ``tape.save`` or ``torch.save`` from ``f`` (a path or a
    seekable binary file-like object), as ``torch.load``.

    ``weights_only`` (the default, as in torch >= 2.6, unless a ``pickle_module`` is
    given) loads only tensors, Parameters, dtypes, devices, numbers, strings,
    bytes, None, and lists, tuples, dicts, sets and OrderedDicts of them; any other
    global (a custom class, a whole ``nn.Module``, a NumPy scalar) raises
    ``pickle.UnpicklingError`` ("Weights only load failed ...").  Allow more with
    ``tape.serialization.add_safe_globals``, or load anything from a trusted file
    with ``weights_only=False``.

    ``map_location``: None, ``'cpu'``, a device, a dict of location strings, or a
    callable ``(storage, location) -> storage or None``; tape runs on the CPU, so a
    location naming CUDA raises PyTorch's RuntimeError for a CPU-only machine.
    ``mmap=True`` (``f`` a path) maps the storages copy-on-write instead of reading
    them.

    ``f`` may also be a file written by ``torch.save`` (either of its formats): its
    tensors load as tape tensors, its Parameters as ``tape.nn.Parameter``, sharing
    storage as they did; see the module docstring for what such a file may hold.
    """
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only:
        if pickle_module is not None:
            raise RuntimeError('Can not safely load weights when explicit pickle_module is '
                               'specified')
    elif pickle_module is None:
        pickle_module = pickle
    if pickle_load_args and weights_only:
        import warnings
        warnings.warn('pickle_load_args only works if `weights_only=False`.', stacklevel=2)
    pickle_load_args.setdefault('encoding', 'utf-8')
    if mmap and not _is_path(f):
        raise ValueError('f must be a file path in order to use the mmap argument')

    if _is_path(f):
        with open(f, 'rb') as fh:
            return _load(fh, os.fspath(f), map_location, pickle_module, weights_only,
                         bool(mmap), pickle_load_args)
    _check_seekable(f)
    return _load(f, None, map_location, pickle_module, weights_only, False, pickle_load_args)


def _read_entry(zf, entry, nbytes, name):
    """The first ``nbytes`` bytes of the zip entry ``entry`` as a new uint8 array,
    starting on a 64-byte line of its raw buffer, as tape's allocator places a
    storage (``Tensor.storage_offset`` of the tensors over it counts from there)."""
    from ._pool import ALIGN
    raw = np.empty(nbytes + ALIGN, np.uint8)
    lo = -raw.ctypes.data % ALIGN
    buf = raw[lo:lo + nbytes]
    if nbytes:
        with zf.open(entry) as src:
            view, got = memoryview(buf), 0
            while got < nbytes:
                k = src.readinto(view[got:])
                if not k:
                    raise RuntimeError(f'{name}: the record {entry!r} is truncated (expected '
                                       f'{nbytes} bytes, found {got})')
                got += k
    return buf


def _map_entry(zf, entry, nbytes, path):
    """The entry's bytes mapped copy-on-write from the file at ``path`` (None when
    the entry is compressed)."""
    info = zf.getinfo(entry)
    if info.compress_type != zipfile.ZIP_STORED or info.file_size < nbytes:
        return None
    with open(path, 'rb') as raw:
        raw.seek(info.header_offset)
        hdr = raw.read(30)
        name_len, extra_len = struct.unpack('<HH', hdr[26:30])
        off = info.header_offset + 30 + name_len + extra_len
    return np.asarray(_MappedStorage(
        np.memmap(path, np.uint8, mode='c', offset=off, shape=(nbytes,))))


class _MappedStorage:
    """A mapped storage as the root of its tensors' arrays (keeping the map alive),
    so ``Tensor.storage_offset`` counts from the storage's first byte rather than
    from the start of the mapped page."""

    def __init__(self, mapped):
        self.mapped = mapped
        self.__array_interface__ = {'shape': mapped.shape, 'typestr': '|u1',
                                    'data': (mapped.ctypes.data, False), 'version': 3}


class _Bounded:
    """The file ``fh`` seen as ending at byte ``end`` (positions unchanged), so that
    zipfile finds the end record of the archive that ends there."""

    def __init__(self, fh, end):
        self._fh, self._end = fh, end

    def seek(self, offset, whence=0):
        if whence == 2:
            offset, whence = self._end + offset, 0
        return self._fh.seek(offset, whence)

    def tell(self):
        return self._fh.tell()

    def read(self, n=-1):
        left = max(0, self._end - self._fh.tell())
        return self._fh.read(left if n is None or n < 0 else min(n, left))

    def seekable(self):
        return True


def _archive_end(fh, start):
    """The end of the zip archive that starts at ``start``: just past the first end
    of central directory record after it whose directory ends where it begins."""
    sig = b'PK\x05\x06'
    pos, tail = start, b''
    while True:
        fh.seek(pos)
        chunk = fh.read(1 << 20)
        if not chunk:
            raise zipfile.BadZipFile('no end of central directory record')
        data = tail + chunk
        base = pos - len(tail)
        i = data.find(sig)
        while i >= 0:
            e = base + i
            fh.seek(e)
            rec = fh.read(22)
            if len(rec) == 22:
                size_cd, offset_cd, comment = struct.unpack('<LLH', rec[12:22])
                # directory offsets relative to the archive or to the file
                if offset_cd == 0xFFFFFFFF or size_cd == 0xFFFFFFFF \
                        or offset_cd + size_cd in (e, e - start):
                    return e + 22 + comment
            i = data.find(sig, i + 1)
        tail = data[-3:]
        pos += len(chunk)


def _load(fh, path, map_location, pickle_module, weights_only, mmap, pickle_load_args):
    name = repr(path) if path is not None else 'the file'
    start = fh.tell()
    magic = fh.read(4)
    if not magic:
        raise EOFError('Ran out of input')
    fh.seek(start)
    if magic != b'PK\x03\x04':
        fh.seek(start + 257)
        if fh.read(5) == b'ustar':
            fh.seek(start)
            raise RuntimeError(f'{name} is a tar archive: the legacy format of torch.save '
                               'before PyTorch 0.4, which tape.load does not read (load it '
                               'with torch.load and save it again)')
        fh.seek(start)
        if _is_torch_legacy(fh, start):
            return _load_torch_legacy(fh, name, map_location, pickle_module, weights_only,
                                      pickle_load_args)
        msg = (f'invalid load key, {magic[:1]!r}: {name} is not a file written by tape.save '
               'or torch.save')
        if weights_only:
            msg = _weights_only_message(msg)
        raise pickle.UnpicklingError(msg)
    try:
        zf = zipfile.ZipFile(fh)
        end = None
        if zf.infolist() and min(i.header_offset for i in zf.infolist()) > start:
            # the end record found is a later archive's (saves written one after
            # another into one file): read the one that starts here, as torch.load
            end = _archive_end(fh, start)
            zf.close()
            zf = zipfile.ZipFile(_Bounded(fh, end))
    except zipfile.BadZipFile as e:
        raise RuntimeError(f'{name} is not a valid tape.save file: {e}') from None
    with zf:
        names = set(zf.namelist())
        if _PREFIX + 'meta.json' not in names or _PREFIX + 'data.pkl' not in names:
            root = _torch_root(zf)
            if root is None:
                raise _not_tape_file(name)
            if root + 'constants.pkl' in names:
                raise RuntimeError(f'{name} is a TorchScript archive (written by '
                                   'torch.jit.save); tape.load reads torch.save files only')
            return _load_torch_zip(zf, root, name, path, map_location, pickle_module,
                                   weights_only, mmap, pickle_load_args)
        meta = json.loads(zf.read(_PREFIX + 'meta.json'))
        if meta.get('format') != _FORMAT:
            raise _not_tape_file(name)
        if meta.get('version', 0) > _VERSION:
            raise RuntimeError(f'{name} was written by a newer tape (format version '
                               f'{meta["version"]}); this tape reads version {_VERSION}')
        storages = []
        for n, s in enumerate(meta['storages']):
            nbytes = int(s['nbytes'])
            entry = _PREFIX + f'data/{n}'
            buf = _map_entry(zf, entry, nbytes, path) if mmap and nbytes else None
            if buf is None:
                buf = _read_entry(zf, entry, nbytes, name)
            storages.append(_restore(buf, s.get('location', 'cpu'), map_location))
        loader = _Loader(meta, storages)
        data = zf.read(_PREFIX + 'data.pkl')
    if end is not None:
        fh.seek(end)            # at the next archive, if any
    return _unpickle(io.BytesIO(data), loader.persistent_load, weights_only, pickle_module,
                     pickle_load_args)


def _find_global(module, qualname, allowed):
    obj = allowed.get(f'{module}.{qualname}')
    if obj is None:
        shown = qualname if module == 'builtins' else f'{module}.{qualname}'
        raise pickle.UnpicklingError(
            f'Unsupported global: GLOBAL {shown} was not an allowed global by '
            f'default. Please use `tape.serialization.add_safe_globals([{shown}])` '
            f'or the `tape.serialization.safe_globals([{shown}])` context manager '
            'to allowlist this global if you trust this class/function.')
    return obj


def _unpickle(file, persistent_load, weights_only, pickle_module, pickle_load_args,
              torch_find=None):
    """Run the pickle in ``file``.  ``torch_find`` (a torch file: ``_TorchLoader.find``)
    gives the tape object that stands for a torch global; the protocol 2 names of
    Python 2 are translated, as torch's unpicklers do."""
    if weights_only:
        allowed = _allowed_globals()

        class _WeightsUnpickler(pickle.Unpickler):
            def find_class(self, module, qualname):
                if torch_find is not None:
                    module, qualname = _py2_name(module, qualname)
                    if _is_torch_module(module):
                        obj = torch_find(module, qualname, True)
                        if obj is not None:
                            return obj
                if module == '__builtin__':         # a protocol 0-2 pickle's name
                    module = 'builtins'
                return _find_global(module, qualname, allowed)

            def persistent_load(self, pid):
                return persistent_load(pid)

        try:
            return _WeightsUnpickler(file, encoding='utf-8').load()
        except _TorchUnsupported:
            raise
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(_weights_only_message(str(e))) from None
        except Exception as e:          # malformed input: torch reports it the same way
            if getattr(e, '_tape_pass', False):     # map_location's own error
                raise
            raise pickle.UnpicklingError(
                _weights_only_message(f'{type(e).__name__}: {e}')) from None

    class _Unpickler(pickle_module.Unpickler):
        if torch_find is not None:
            def find_class(self, module, qualname):
                module, qualname = _py2_name(module, qualname)
                if _is_torch_module(module):
                    obj = torch_find(module, qualname, False)
                    if obj is None:
                        key = f'{module}.{qualname}'
                        raise _TorchUnsupported(
                            f'tape.load: the file names the torch global {key}, which tape '
                            'has no equivalent of (tape reads tensors, Parameters, dtypes, '
                            'devices and sizes from a torch.save file, not torch objects '
                            'such as whole nn.Modules or optimizers: save a state_dict '
                            'instead)')
                    return obj
                return super().find_class(module, qualname)

        def persistent_load(self, pid):
            return persistent_load(pid)

    return _Unpickler(file, **pickle_load_args).load()


# -- reading files written by torch.save -------------------------------------------
class _TorchUnsupported(RuntimeError):
    """A torch.save file holds something tape cannot represent."""


_MAGIC_NUMBER = 0x1950a86a20f9469cfc6c      # torch.serialization.MAGIC_NUMBER (legacy files)
_LEGACY_PROTOCOL = 1001

# torch's dtypes (the names its pickles use) -> tape's (NumPy) dtype names
_TORCH_DTYPES = {
    'float32': 'float32', 'float': 'float32', 'float64': 'float64', 'double': 'float64',
    'float16': 'float16', 'half': 'float16', 'bfloat16': 'bfloat16',
    'int64': 'int64', 'long': 'int64', 'int32': 'int32', 'int': 'int32',
    'int16': 'int16', 'short': 'int16', 'int8': 'int8', 'uint8': 'uint8', 'bool': 'bool',
    'uint16': 'uint16', 'uint32': 'uint32', 'uint64': 'uint64',
    'complex64': 'complex64', 'cfloat': 'complex64', 'complex128': 'complex128',
    'cdouble': 'complex128'}
# torch's storage classes (any module: torch maps every '...Storage' name) -> dtype
_TORCH_STORAGES = {
    'DoubleStorage': 'float64', 'FloatStorage': 'float32', 'HalfStorage': 'float16',
    'BFloat16Storage': 'bfloat16', 'LongStorage': 'int64', 'IntStorage': 'int32',
    'ShortStorage': 'int16', 'CharStorage': 'int8', 'ByteStorage': 'uint8',
    'BoolStorage': 'bool', 'ComplexFloatStorage': 'complex64',
    'ComplexDoubleStorage': 'complex128', 'UntypedStorage': 'uint8',
    'TypedStorage': 'uint8'}
_ITEMSIZE = {k: (2 if k == 'bfloat16' else np.dtype(k).itemsize)
             for k in set(_TORCH_DTYPES.values())}
# torch names that torch.load(weights_only=True) accepts but tape cannot represent
_TORCH_UNSUPPORTED = re.compile(r'float8_|float4_|complex32$|chalf$|q(u)?int|bits|'
                                r'per_tensor_|per_channel_|u?int[1-7]$')


def _is_torch_module(module):
    return module == 'torch' or module.startswith('torch.')


def _py2_name(module, name):
    """The protocol 2 pickle names of Python 2 (``__builtin__``...) in Python 3."""
    import _compat_pickle
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _torch_unsupported(module, name):
    """Raise a clear error for a torch global that tape knows it cannot load."""
    if (name.endswith('Storage') and name not in _TORCH_STORAGES) or \
            (module == 'torch' and _TORCH_UNSUPPORTED.match(name)):
        what = 'storage type' if name.endswith('Storage') else 'dtype or quantization scheme'
        raise _TorchUnsupported(f'tape.load: the torch.save file holds a {module}.{name} '
                                f'({what}) that tape has no equivalent of (tape supports '
                                'float16/32/64, int8/16/32/64, uint8/16/32/64, bool, '
                                'complex64/128, and bfloat16 converted to float32)')


def _torch_rebuild_unsupported(name, what):
    def rebuild(*args, **kwargs):
        raise _TorchUnsupported(f'tape.load: the torch.save file holds {what} '
                                f'(torch._utils.{name}), which tape does not support')
    rebuild.__name__ = name
    return rebuild


class _TorchStorageType:
    """What a torch storage class (``torch.FloatStorage``...) unpickles to."""
    __slots__ = ('name', 'dtype')

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f'<torch.{self.name} of a torch.save file>'


class _TorchStorage:
    """One storage of a torch.save file: the bytes of record ``key`` (``offset``
    elements in, for the storage views of legacy files)."""
    __slots__ = ('key', 'dtype', 'offset')

    def __init__(self, key, dtype, offset=0):
        self.key, self.dtype, self.offset = key, dtype, offset

    def __repr__(self):
        return f'<storage {self.key!r} ({self.dtype}) of a torch.save file>'


def _warn_bfloat16():
    import warnings
    warnings.warn('tape.load: tape has no bfloat16; the bfloat16 tensors (and dtypes) of this '
                  'torch.save file load as float32 (exactly: every bfloat16 is a float32)',
                  UserWarning, stacklevel=4)


def _set_state(obj, state):
    """torch._utils._set_obj_state: a tensor's Python attributes."""
    if not state:
        return obj
    if isinstance(state, tuple):
        if len(state) != 2:
            raise pickle.UnpicklingError(f'Invalid serialized state: {state!r}')
        dict_state, slots_state = state
    else:
        dict_state, slots_state = state, None
    for d in (dict_state, slots_state):
        if d:
            for k, v in d.items():
                setattr(obj, k, v)
    return obj


class _TorchLoader:
    """Storages and tensors of one torch.save file, and the tape objects that stand
    for torch's globals in its pickle."""

    def __init__(self, read, byteorder, map_location):
        self.read = read                    # (key, nbytes) -> uint8 array, or None: later
        self.order = '<' if byteorder == 'little' else '>'
        self.swap = byteorder != sys.byteorder
        self.map_location = map_location
        self.raw = {}                       # key -> uint8 array (the record's bytes)
        self.typed = {}                     # (key, dtype) -> 1-d array over the storage
        self.converted = []                 # the typed arrays that are converted copies
        self.warned = False
        self.names = None

    # persistent ids
    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid:
            raise pickle.UnpicklingError(f'unsupported persistent id {pid!r}')
        kind = pid[0].decode('ascii') if isinstance(pid[0], bytes) else pid[0]
        if kind == 'storage' and len(pid) in (5, 6):
            stype, key, location, numel = pid[1:5]
            view = pid[5] if len(pid) == 6 else None
            if not isinstance(stype, _TorchStorageType):
                raise pickle.UnpicklingError(f'unsupported storage type {stype!r}')
            key = key.decode('ascii') if isinstance(key, bytes) else str(key)
            if isinstance(location, bytes):
                location = location.decode('ascii')
            if key not in self.raw:
                nbytes = int(numel) * _ITEMSIZE[stype.dtype]
                buf = self.read(key, nbytes)
                try:
                    self.raw[key] = _restore(buf, location, self.map_location)
                except Exception as e:      # map_location's errors, as torch raises them
                    e._tape_pass = True
                    raise
            offset = 0
            if view is not None:            # (view_key, offset, size): legacy files
                offset = int(view[1])
            return _TorchStorage(key, stype.dtype, offset)
        if kind == 'module':
            raise _TorchUnsupported('tape.load: the torch.save file holds a whole nn.Module '
                                    f'({pid[1:2]!r}); tape reads state_dicts (save '
                                    'model.state_dict() instead)')
        raise pickle.UnpicklingError(f'unsupported persistent id {pid!r}')

    # storages as arrays
    def _fill(self, out, raw, dtype):
        """``out`` (a new array) = the elements of ``raw`` (bytes) as tape holds them."""
        n = out.shape[0]
        if dtype == 'bfloat16':
            u = np.ndarray((n,), self.order + 'u2', buffer=raw)
            out.view(np.uint32)[...] = u.astype(np.uint32) << 16
        else:
            out[...] = np.ndarray((n,), np.dtype(dtype).newbyteorder(self.order), buffer=raw)

    def typed_array(self, key, dtype):
        arr = self.typed.get((key, dtype))
        if arr is None:
            raw = self.raw[key]
            n = raw.nbytes // _ITEMSIZE[dtype]
            if dtype == 'bfloat16':
                if not self.warned:
                    self.warned = True
                    _warn_bfloat16()
                arr = np.empty(n, np.float32)
                self._fill(arr, raw, dtype)
                self.converted.append((arr, key, dtype))
            elif self.swap and _ITEMSIZE[dtype] > 1:
                arr = np.empty(n, np.dtype(dtype))
                self._fill(arr, raw, dtype)
                self.converted.append((arr, key, dtype))
            else:
                arr = np.ndarray((n,), np.dtype(dtype), buffer=raw)
            self.typed[(key, dtype)] = arr
        return arr

    def refill(self):
        """Legacy files: the converted arrays again, now that the bytes are read."""
        for arr, key, dtype in self.converted:
            self._fill(arr, self.raw[key], dtype)

    def array(self, storage, dtype, offset, size, stride):
        if not isinstance(storage, _TorchStorage):
            raise pickle.UnpicklingError(f'expected a storage, got {type(storage).__name__}')
        typed = self.typed_array(storage.key, dtype or storage.dtype)
        size = tuple(int(s) for s in size)
        stride = tuple(int(s) for s in stride)
        if len(size) != len(stride):
            raise pickle.UnpicklingError(f'size {size} and stride {stride} differ in length')
        off = storage.offset + int(offset)
        if any(s == 0 for s in size):
            return np.empty(size, typed.dtype)
        last = off + sum((n - 1) * s for n, s in zip(size, stride))
        if off < 0 or min(stride, default=0) < 0 or last >= typed.shape[0]:
            raise RuntimeError(f'tape.load: a tensor of size {list(size)}, stride '
                               f'{list(stride)} and offset {off} does not fit in its storage '
                               f'of {typed.shape[0]} elements (a corrupt file?)')
        item = typed.itemsize
        return np.ndarray(size, typed.dtype, buffer=typed, offset=off * item,
                          strides=tuple(s * item for s in stride))

    # torch._utils's rebuild functions
    def _tensor(self, storage, offset, size, stride, requires_grad, metadata, dtype=None):
        arr = self.array(storage, dtype, offset, size, stride)
        if metadata:
            if metadata.get('conj'):
                arr = np.conj(arr)
            if metadata.get('neg'):
                arr = np.negative(arr)
        return _tensor._rebuild(Tensor, arr, bool(requires_grad))

    def rebuild_tensor(self, storage, storage_offset, size, stride):
        return self._tensor(storage, storage_offset, size, stride, False, None)

    def rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False,
                          backward_hooks=None, metadata=None):
        return self._tensor(storage, storage_offset, size, stride, requires_grad, metadata)

    def rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad,
                          backward_hooks, dtype, metadata=None):
        return self._tensor(storage, storage_offset, size, stride, requires_grad, metadata,
                            np.dtype(dtype).name)

    @staticmethod
    def rebuild_parameter(data, requires_grad, backward_hooks, state=None):
        from .nn.modules import Parameter
        if not isinstance(data, Tensor):
            raise pickle.UnpicklingError(f'a Parameter of a {type(data).__name__}')
        return _set_state(Parameter(data, bool(requires_grad)), state)

    @staticmethod
    def rebuild_from_type_v2(func, new_type, args, state):
        from .nn.modules import Parameter
        ret = func(*args)
        if new_type is Parameter:
            if not isinstance(ret, Parameter):
                ret = Parameter(ret, ret.requires_grad)
        elif new_type is not Tensor:
            if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
                raise pickle.UnpicklingError(f'{new_type!r} is not a tensor class')
            if type(ret) is not new_type:
                ret = _tensor._rebuild(new_type, _tensor._storage(ret), ret.requires_grad,
                                       _tensor._user_attrs(ret) or None)
        return _set_state(ret, state)

    def find(self, module, name, weights_only):
        """The tape object for the torch global ``module.name``; None for a name that
        tape does not map (which a weights_only load then refuses as any other)."""
        if self.names is None:
            self.names = self._names()
        if name in _TORCH_STORAGES:         # any module, as torch (torch.cuda.FloatStorage)
            return _TorchStorageType(name, _TORCH_STORAGES[name])
        key = f'{module}.{name}'
        if key == 'torch.bfloat16' and not self.warned:
            self.warned = True
            _warn_bfloat16()
        obj = self.names[0].get(key)
        if obj is None and not weights_only:
            obj = self.names[1].get(key)
        if obj is None:
            _torch_unsupported(module, name)
        return obj

    def _names(self):
        """(torch names torch.load(weights_only=True) allows -> tape objects, the
        further names tape maps when weights_only=False)."""
        from .nn.modules import Parameter
        safe = {
            'torch._utils._rebuild_tensor': self.rebuild_tensor,
            'torch._utils._rebuild_tensor_v2': self.rebuild_tensor_v2,
            'torch._utils._rebuild_tensor_v3': self.rebuild_tensor_v3,
            'torch._utils._rebuild_parameter': self.rebuild_parameter,
            'torch._utils._rebuild_parameter_with_state': self.rebuild_parameter,
            'torch._tensor._rebuild_from_type_v2': self.rebuild_from_type_v2,
            'torch.Tensor': Tensor,
            'torch.nn.parameter.Parameter': Parameter,
            'torch.Size': Size,
            'torch.device': device,
            'torch.serialization._get_layout': _get_layout,
        }
        for fn, what in (('_rebuild_qtensor', 'a quantized tensor'),
                         ('_rebuild_sparse_tensor', 'a sparse tensor'),
                         ('_rebuild_nested_tensor', 'a nested tensor'),
                         ('_rebuild_meta_tensor_no_storage', 'a tensor on the meta device'),
                         ('_rebuild_wrapper_subclass', 'a wrapper tensor subclass'),
                         ('_rebuild_device_tensor_from_numpy', 'a tensor saved via NumPy'),
                         ('_rebuild_device_tensor_from_cpu_tensor',
                          'a tensor of a non-CPU backend')):
            safe['torch._utils.' + fn] = _torch_rebuild_unsupported(fn, what)
        for name, dt in _TORCH_DTYPES.items():
            # tape's dtypes are NumPy's; torch.bfloat16 (a value) becomes float32
            safe['torch.' + name] = np.dtype('float32' if dt == 'bfloat16' else dt)
        full = {f'torch.{n}': getattr(_tensor, n) for n in (
            'strided', 'preserve_format', 'contiguous_format', 'channels_last',
            'channels_last_3d')}
        return safe, full


def _get_layout(name):
    if name == 'torch.strided':
        return _tensor.strided
    raise _TorchUnsupported(f'tape.load: the torch.save file holds a tensor of layout {name}, '
                            'which tape does not support (strided tensors only)')


def _torch_root(zf):
    """The archive folder of a torch.save zip (``archive/``, or the file's stem: any
    name), or None when it is not one."""
    names = zf.namelist()
    if not names:
        return None
    root = names[0].split('/', 1)[0] + '/'
    if root + 'data.pkl' in set(names):
        return root
    return None


def _load_torch_zip(zf, root, name, path, map_location, pickle_module, weights_only, mmap,
                    pickle_load_args):
    names = set(zf.namelist())
    byteorder = 'little'
    if root + 'byteorder' in names:
        byteorder = zf.read(root + 'byteorder').decode('ascii', 'replace').strip()
        if byteorder not in ('little', 'big'):
            raise ValueError('Unknown endianness type: ' + byteorder)

    def read(key, nbytes):
        entry = f'{root}data/{key}'
        if entry not in names:
            raise RuntimeError(f'{name}: the torch.save archive has no record {entry!r}')
        buf = _map_entry(zf, entry, nbytes, path) if mmap and nbytes else None
        return buf if buf is not None else _read_entry(zf, entry, nbytes, name)

    loader = _TorchLoader(read, byteorder, map_location)
    data = zf.read(root + 'data.pkl')
    return _unpickle(io.BytesIO(data), loader.persistent_load, weights_only, pickle_module,
                     pickle_load_args, torch_find=loader.find)


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f'unexpected global {module}.{name}')


def _is_torch_legacy(fh, start):
    """Whether ``fh`` (at ``start``) is a torch.save file of the legacy (non-zip)
    format: a pickle of torch's magic number, then the object's pickle."""
    try:
        head = fh.read(1)
        if head != b'\x80':
            return False
        fh.seek(start)
        return _NoGlobals(fh).load() == _MAGIC_NUMBER
    except Exception:           # noqa: BLE001  (not a pickle: not a legacy file)
        return False
    finally:
        fh.seek(start)


def _load_torch_legacy(fh, name, map_location, pickle_module, weights_only,
                       pickle_load_args):
    """A file written by ``torch.save(..., _use_new_zipfile_serialization=False)``:
    pickles of the magic number, the protocol version and system info; the object's
    pickle (storages as persistent ids); a pickle of the storage keys; then each
    storage as an int64 element count and its bytes (little-endian)."""
    import pickletools
    _NoGlobals(fh).load()
    if _NoGlobals(fh).load() != _LEGACY_PROTOCOL:
        raise RuntimeError(f'{name}: invalid torch.save protocol version')
    info = _NoGlobals(fh).load()
    byteorder = 'little' if not isinstance(info, dict) or info.get('little_endian', True) \
        else 'big'
    pos = fh.tell()
    for _ in pickletools.genops(fh):     # skip the object's pickle: the storage bytes
        pass                              # come after it
    keys = _NoGlobals(fh).load()
    data_pos = fh.tell()

    loader = _TorchLoader(lambda key, nbytes: np.empty(nbytes, np.uint8), byteorder,
                          map_location)
    fh.seek(pos)
    result = _unpickle(fh, loader.persistent_load, weights_only, pickle_module,
                       pickle_load_args, torch_find=loader.find)
    fh.seek(data_pos)
    for key in keys:
        key = key.decode('ascii') if isinstance(key, bytes) else str(key)
        buf = loader.raw.get(key)
        if buf is None:
            raise RuntimeError(f'{name}: storage {key!r} is not used by the object')
        head = fh.read(8)
        if len(head) != 8:
            raise RuntimeError(f'{name}: the torch.save file is truncated')
        nbytes = buf.nbytes
        view, got = memoryview(buf), 0
        while got < nbytes:
            k = fh.readinto(view[got:])
            if not k:
                raise RuntimeError(f'{name}: storage {key!r} is truncated')
            got += k
    loader.refill()
    return result
