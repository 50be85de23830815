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

Not supported: ``tape.load`` of a file written by ``torch.save`` (it raises a
RuntimeError that says so: load it with ``torch.load`` and convert with
``tape.tensor(t.numpy())``), and ``torch.load`` of a ``tape.save`` file.
``_use_new_zipfile_serialization=False`` is accepted and ignored (there is one
tape format).  Everything loads on the CPU.
"""
import contextlib
import io
import json
import os
import pickle
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
        f'{name} is not a file written by tape.save: tape.load reads only its own format '
        '(a file written by torch.save has to be loaded with torch.load; convert its tensors '
        'with tape.tensor(t.numpy()))')


def _check_seekable(f):
    try:
        f.seek(f.tell())
    except (io.UnsupportedOperation, AttributeError) as e:
        raise type(e)(str(e) + '. You can only tape.load from a file that is seekable. Please '
                      'pre-load the data into a buffer like io.BytesIO and try to load from '
                      'it instead.') from None


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved by ``tape.save`` from ``f`` (a path or a seekable binary
    file-like object), as ``torch.load``.

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

    ``tape.load`` cannot read a file written by ``torch.save`` (RuntimeError): load
    it with ``torch.load`` and convert the tensors with ``tape.tensor(t.numpy())``.
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


def _load(fh, path, map_location, pickle_module, weights_only, mmap, pickle_load_args):
    name = repr(path) if path is not None else 'the file'
    start = fh.tell()
    magic = fh.read(4)
    if not magic:
        raise EOFError('Ran out of input')
    fh.seek(start)
    if magic != b'PK\x03\x04':
        msg = f'invalid load key, {magic[:1]!r}: {name} is not a file written by tape.save'
        if weights_only:
            msg = _weights_only_message(msg)
        raise pickle.UnpicklingError(msg)
    try:
        zf = zipfile.ZipFile(fh)
    except zipfile.BadZipFile as e:
        raise RuntimeError(f'{name} is not a valid tape.save file: {e}') from None
    with zf:
        names = set(zf.namelist())
        if _PREFIX + 'meta.json' not in names or _PREFIX + 'data.pkl' not in names:
            raise _not_tape_file(name)
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
            if mmap and nbytes:
                info = zf.getinfo(entry)
                with open(path, 'rb') as raw:
                    raw.seek(info.header_offset)
                    hdr = raw.read(30)
                    name_len, extra_len = struct.unpack('<HH', hdr[26:30])
                    off = info.header_offset + 30 + name_len + extra_len
                buf = np.memmap(path, np.uint8, mode='c', offset=off, shape=(nbytes,))
            else:
                buf = np.empty(nbytes, np.uint8)
                if nbytes:
                    with zf.open(entry) as src:
                        view, got = memoryview(buf), 0
                        while got < nbytes:
                            k = src.readinto(view[got:])
                            if not k:
                                raise RuntimeError(f'{name}: storage {n} is truncated')
                            got += k
            storages.append(_restore(buf, s.get('location', 'cpu'), map_location))
        loader = _Loader(meta, storages)
        data = zf.read(_PREFIX + 'data.pkl')

    if weights_only:
        allowed = _allowed_globals()

        class _WeightsUnpickler(pickle.Unpickler):
            def find_class(self, module, qualname):
                if module == '__builtin__':         # a protocol 0-2 pickle's name
                    module = 'builtins'
                obj = allowed.get(f'{module}.{qualname}')
                if obj is None:
                    shown = qualname if module == 'builtins' else f'{module}.{qualname}'
                    raise pickle.UnpicklingError(
                        f'Unsupported global: GLOBAL {shown} was not an allowed global by '
                        f'default. Please use `tape.serialization.add_safe_globals([{shown}])` '
                        f'or the `tape.serialization.safe_globals([{shown}])` context manager '
                        'to allowlist this global if you trust this class/function.')
                return obj

            def persistent_load(self, pid):
                return loader.persistent_load(pid)

        try:
            result = _WeightsUnpickler(io.BytesIO(data), encoding='utf-8').load()
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(_weights_only_message(str(e))) from None
        except Exception as e:          # malformed input: torch reports it the same way
            raise pickle.UnpicklingError(
                _weights_only_message(f'{type(e).__name__}: {e}')) from None
    else:
        class _Unpickler(pickle_module.Unpickler):
            def persistent_load(self, pid):
                return loader.persistent_load(pid)

        result = _Unpickler(io.BytesIO(data), **pickle_load_args).load()
    return result
