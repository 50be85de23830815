"""The Tensor: a NumPy payload plus the little autograd needs to find its record.

A result of a recorded op is a non-leaf: ``_tape`` is its graph's tape,
``_goff`` its gradient slot and ``_rec`` the index of the record that made it.
A leaf has ``_tape = None``; if it requires grad it caches, in the same two
fields, its slot on the last tape that used it (``_rec`` then holds that tape's
serial number).  Keeping the object this small is what keeps recording cheap.

0-d results hold a NumPy scalar rather than a 0-d array: NumPy does scalar
arithmetic about ten times faster.  Anything that needs real storage (``.data``,
in-place ops) first turns it into a 0-d array.
"""
import math
import operator

import numpy as np

from . import _tape as _tp
from ._dtypes import default_dtype as _default_dtype

_np_scalar_types = (np.floating, np.integer, np.bool_)


# Printing follows torch/_tensor_str.py; tape.set_printoptions changes these.
class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None             # None: chosen per tensor; True/False: forced


PRINT_OPTS = _PrintOptions()


class _Formatter:
    """torch's ``_Formatter``: one element format and width for a whole tensor."""

    def __init__(self, a):
        self.floating = a.dtype.kind in 'fc'
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = a.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f'{v}'))
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        mags = np.abs(vals.astype(np.float64))
        lo, hi = float(mags.min()), float(mags.max())
        vals = vals.tolist()
        for v in vals:
            if v != math.ceil(v):
                self.int_mode = False
                break
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4 \
            if PRINT_OPTS.sci_mode is None else PRINT_OPTS.sci_mode
        if self.sci_mode:
            fmt, extra = f'{{:.{PRINT_OPTS.precision}e}}', 0
        elif self.int_mode:
            fmt, extra = '{:.0f}', 1
        else:
            fmt, extra = f'{{:.{PRINT_OPTS.precision}f}}', 0
        self.max_width = max(len(fmt.format(v)) for v in vals) + extra

    def format(self, v):
        if self.floating:
            if self.sci_mode:
                s = f'{{:{self.max_width}.{PRINT_OPTS.precision}e}}'.format(v)
            elif self.int_mode:
                s = f'{v:.0f}'
                if not (math.isinf(v) or math.isnan(v)):
                    s += '.'
            else:
                s = f'{{:.{PRINT_OPTS.precision}f}}'.format(v)
        else:
            s = f'{v}'
        return (self.max_width - len(s)) * ' ' + s


def _summarized(a):
    """torch's ``get_summarized_data``: the edge items every dimension keeps."""
    if a.ndim == 0:
        return a
    e = PRINT_OPTS.edgeitems
    if not e:
        return a[:0]            # nothing is shown (a[-0:] would be all of it)
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) \
        if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


def _vector_str(a, indent, summarize, fmt):
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ['...']          # edgeitems=0: torch prints '[...]' (the size is a suffix)
    elif summarize and a.shape[0] > 2 * e:
        data = ([fmt.format(v) for v in a[:e].tolist()] + [' ...']
                + [fmt.format(v) for v in a[-e:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [', '.join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return '[' + (',\n' + ' ' * (indent + 1)).join(lines) + ']'


def _nd_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e, n = PRINT_OPTS.edgeitems, a.shape[0]
    if summarize and n > 2 * e:
        slices = ([_nd_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ['...']
                  + [_nd_str(a[i], indent + 1, summarize, fmt) for i in range(n - e, n)])
    else:
        slices = [_nd_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return '[' + (',' + '\n' * (a.ndim - 1) + ' ' * (indent + 1)).join(slices) + ']'


def _fmt_data(d, indent=7):
    """The body of ``repr`` as torch's ``_tensor_str`` prints it (indent: ``tensor(``)."""
    a = np.asarray(d)
    if a.size == 0:
        return '[]'
    summarize = a.size > PRINT_OPTS.threshold
    return _nd_str(a, indent, summarize, _Formatter(_summarized(a) if summarize else a))


def _add_suffixes(s, suffixes, indent):
    """torch's ``_add_suffixes``: each suffix after ", " unless the line would pass 80.

    Lengths are measured as torch spells the suffix (``dtype=torch.float64``, one
    character longer than ``dtype=tape.float64``) so lines break where torch's do.
    """
    out = [s]
    last = len(s) - s.rfind('\n') + 1
    for suffix in suffixes:
        n = len(suffix) + suffix.startswith('dtype=tape.')
        if last + n + 2 > PRINT_OPTS.linewidth:
            out.append(',\n' + ' ' * indent + suffix)
            last = indent + n
        else:
            out.append(', ' + suffix)
            last += n + 2
    out.append(')')
    return ''.join(out)


DTYPE_NAMES = {np.dtype(np.float32): 'tape.float32', np.dtype(np.float64): 'tape.float64',
               np.dtype(np.int64): 'tape.int64', np.dtype(np.int32): 'tape.int32',
               np.dtype(np.bool_): 'tape.bool', np.dtype(np.float16): 'tape.float16',
               np.dtype(np.uint8): 'tape.uint8', np.dtype(np.int16): 'tape.int16',
               np.dtype(np.int8): 'tape.int8'}
_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)
_FLOAT_WARNED = []      # float() of a tensor requiring grad has warned (once a process)

# Tensor.type()'s legacy names (tape.FloatTensor for torch.FloatTensor)
_TYPE_NAMES = {np.dtype(np.float32): 'FloatTensor', np.dtype(np.float64): 'DoubleTensor',
               np.dtype(np.float16): 'HalfTensor', np.dtype(np.int64): 'LongTensor',
               np.dtype(np.int32): 'IntTensor', np.dtype(np.int16): 'ShortTensor',
               np.dtype(np.int8): 'CharTensor', np.dtype(np.uint8): 'ByteTensor',
               np.dtype(np.bool_): 'BoolTensor'}
_TYPE_DTYPES = {name: dt for dt, name in _TYPE_NAMES.items()}


class device:
    """``torch.device``: where a tensor lives.  tape runs on the CPU only, so every
    tensor's ``device`` is ``device(type='cpu')``; a ``cuda`` device can be named
    (as in PyTorch without CUDA) but moving a tensor there raises.

    >>> import tape
    >>> tape.zeros(2).device
    device(type='cpu')
    >>> tape.zeros(2).device.type
    'cpu'
    """
    __slots__ = ('type', 'index')

    def __init__(self, type, index=None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = 'cuda', type
        elif not isinstance(type, str):
            raise TypeError(f'device() received an invalid combination of arguments - got '
                            f'({type.__class__.__name__})')
        elif ':' in type:
            if index is not None:
                raise RuntimeError(f'type (string) must not include an index because index was '
                                   f'passed explicitly: {type}')
            type, _, idx = type.partition(':')
            if not idx.isdigit():
                raise RuntimeError(f'Invalid device string: \'{type}:{idx}\'')
            index = int(idx)
        if type not in _DEVICE_TYPES:
            raise RuntimeError(f'Expected one of {", ".join(_DEVICE_TYPES)} device type at '
                               f'start of device string: {type}')
        object.__setattr__(self, 'type', type)
        object.__setattr__(self, 'index', index)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'tape.device' objects is not writable")

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f'{self.type}:{self.index}'

    def __eq__(self, other):
        # a device also equals its string ('cpu'), which older tape code compared with
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash(str(self))

    def __reduce__(self):
        return (device, (self.type, self.index))


_DEVICE_TYPES = ('cpu', 'cuda', 'ipu', 'xpu', 'mkldnn', 'opengl', 'opencl', 'ideep', 'hip',
                 've', 'fpga', 'maia', 'xla', 'lazy', 'vulkan', 'mps', 'meta', 'hpu', 'mtia',
                 'privateuseone')
_CPU = device('cpu')


def _check_device(dev):
    """Raise unless ``dev`` (a device, its string, or a CUDA ordinal) is the CPU:
    PyTorch built without CUDA raises AssertionError for a CUDA device."""
    if dev is None:
        return
    d = dev if isinstance(dev, device) else device(dev)
    if d.type == 'cpu':
        return
    if d.type == 'cuda':
        raise AssertionError('Torch not compiled with CUDA enabled (tape runs on the CPU only)')
    raise RuntimeError(f"tape runs on the CPU only: cannot move a tensor to device '{d}'")


class _Named:
    """A singleton that prints as its name: ``tape.strided``, ``tape.preserve_format``."""
    __slots__ = ('name',)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return 'tape.' + self.name

    def __reduce__(self):
        return self.name       # pickled by reference to the module attribute


strided = _Named('strided')
preserve_format = _Named('preserve_format')
contiguous_format = _Named('contiguous_format')
channels_last = _Named('channels_last')
channels_last_3d = _Named('channels_last_3d')


class Tensor:
    """An n-dimensional array that records the ops applied to it.

    >>> import tape
    >>> w = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> w.grad
    tensor([2., 4.])
    """
    # The five fields every op writes are slots; the rarely set ones live in a
    # lazily created __dict__ and read as these class defaults until set, so
    # making a result costs five stores instead of eight.
    __slots__ = ('_data', '_rg', '_tape', '_goff', '_rec', '__dict__', '__weakref__')
    _grad = None        # the accumulated gradient (a leaf Tensor) or None
    _vbox = None        # [version] shared by tensors that share storage
    _extra = None       # dict: hooks, retain_grad
    _acc_node = None    # the leaf's AccumulateGrad node, once asked for (tape/_graph.py)
    __array_priority__ = 1000     # ndarray (op) Tensor defers to Tensor

    def __init__(self, data=None, *sizes, requires_grad=False):
        # Tensor(data) follows torch.Tensor(data): the default dtype (float32
        # unless set) for Python numbers; Tensor(2, 3) and Tensor(Size) make a
        # (zero-filled) tensor of that shape
        dt = _default_dtype[0]
        if data is None:
            data = np.zeros(0, dt)
        elif type(data) is int or isinstance(data, Size) or sizes:
            shape = tuple(data) if isinstance(data, Size) else (data, *sizes)
            if not all(type(s) is int for s in shape):
                raise TypeError(f'new(): argument \'size\' must be a tuple of ints, but got '
                                f'{tuple(type(s).__name__ for s in shape)}')
            data = np.zeros(shape, dt)
        elif isinstance(data, (float, complex, bool)):
            raise TypeError(f'new(): data must be a sequence (got {type(data).__name__})')
        arr = np.array(data.numpy() if isinstance(data, Tensor) else data)
        if arr.dtype.kind in 'iub' and not isinstance(data, np.ndarray):
            arr = arr.astype(dt)
        elif arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype(dt)
        _init(self, arr, False)
        if requires_grad:
            self.requires_grad_(True)

    # -- identity and autograd state ------------------------------------
    @property
    def data(self):
        """A tensor sharing this one's storage, outside the graph; changes to it are not tracked."""
        d = self._data
        if type(d) is not np.ndarray:
            d = self._data = np.array(d)     # a 0-d result's NumPy scalar gets storage
        t = _TNEW(Tensor)                    # _leaf(d), inline: a training loop's hot read
        t._data = d
        t._rg = False
        t._tape = None
        t._goff = -1
        t._rec = 0
        return t

    @data.setter
    def data(self, value):
        value = value._data if isinstance(value, Tensor) else np.asarray(value)
        if self._rg and np.result_type(value).kind not in 'fc':
            raise RuntimeError('data set to a tensor that requires gradients must be floating '
                               f'point or complex dtype (got {np.result_type(value)})')
        self._data = value

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records ops on this leaf; returns self."""
        if self._tape is not None:
            if not requires_grad:
                raise RuntimeError(
                    'you can only change requires_grad flags of leaf variables. If you want '
                    'to use a computed variable in a subgraph that doesn\'t require '
                    'differentiation use var_no_grad = var.detach().')
            return self
        if requires_grad and self._data.dtype.kind not in 'fc':
            raise RuntimeError('only Tensors of floating point dtype can require gradients '
                               f'(got {DTYPE_NAMES.get(self._data.dtype, self._data.dtype)})')
        self._rg = bool(requires_grad)
        if not requires_grad:
            self._goff = -1
            self._rec = 0
        return self

    @property
    def is_leaf(self):
        return self._tape is None

    @property
    def grad(self):
        g = self._grad
        if g is None and self._tape is not None and not self._retains_grad():
            import warnings
            warnings.warn(
                'The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. '
                'Its .grad attribute won\'t be populated during autograd.backward(). If you '
                'indeed want the .grad field to be populated for a non-leaf Tensor, use '
                '.retain_grad() on the non-leaf Tensor.', UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f'assigned grad expected to be a Tensor or None but got '
                                f'grad of type {type(value).__name__}')
            if value is self:       # (a backward would accumulate into the values)
                raise RuntimeError("can't assign Variable as its own grad")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f'assigned grad has data of a different size: '
                                   f'{tuple(value._data.shape)} vs {tuple(self._data.shape)}')
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(f'attempting to assign a gradient with dtype '
                                   f'{value._data.dtype} to a tensor with dtype '
                                   f'{self._data.dtype}: the gradient must match the '
                                   "tensor's dtype")
        self._grad = value

    def _retains_grad(self):
        return self._extra is not None and self._extra.get('retain_grad', False)

    @property
    def grad_fn(self):
        if self._tape is None:
            return None
        from ._graph import node_for
        return node_for(self)

    @property
    def output_nr(self):
        """Which output of its ``grad_fn`` this tensor is (0 for a leaf)."""
        if self._tape is None:
            return 0
        from ._graph import output_index
        return output_index(self)

    @property
    def _version(self):
        return 0 if self._vbox is None else self._vbox[0]

    def detach(self):
        """A new leaf sharing storage (and the version counter) with this tensor."""
        d = _storage(self)
        t = _leaf(d)
        if self._vbox is None:
            self._vbox = [0]
        t._vbox = self._vbox
        if self._tape is not None:
            # an in-place change through the detached alias must reach the
            # graph's in-place check, which tracks non-leaves by slot
            import weakref
            t._extra = {'alias_of': (weakref.ref(self._tape), self._goff)}
        return t

    def detach_(self):
        if self._extra is not None and 'view' in self._extra:
            raise RuntimeError("Can't detach views in-place. Use detach() instead. (detach_ on "
                               f'a view of shape {tuple(np.shape(self._data))})')
        if self._tape is not None:
            self._tape = None
            self._goff = -1
            self._rec = 0
        self._rg = False        # (a leaf too: PyTorch's detach_ clears requires_grad)
        return self

    # -- shape and conversion -----------------------------------------
    @property
    def shape(self):
        return _size_of(Size, self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return _size_of(Size, self._data.shape)
        return self._data.shape[_norm_dim(dim, self._data.ndim, 'size')]

    def dim(self):
        return self._data.ndim

    ndimension = dim

    @property
    def ndim(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        """Bytes per element (4 for float32)."""
        return self._data.dtype.itemsize

    @property
    def itemsize(self):
        return self._data.dtype.itemsize

    @property
    def nbytes(self):
        return int(self._data.size) * self._data.dtype.itemsize

    def stride(self, dim=None):
        """Steps in elements between neighbours along each dimension, as PyTorch's
        (``x.t().stride()`` is ``(1, n)``, an expanded dimension's stride is 0)."""
        d = self._data
        if type(d) is not np.ndarray:
            st = ()
        else:
            size = d.dtype.itemsize
            st = [s // size for s in d.strides]
            # a size-1 (or empty) dimension's stride is arbitrary; where NumPy says
            # 0, PyTorch says what a contiguous layout would (x[:, None]: (4, 4, 1))
            shape = d.shape
            for i in range(len(st) - 1, -1, -1):
                if st[i] == 0 and (shape[i] == 1 or d.size == 0):
                    st[i] = st[i + 1] * max(shape[i + 1], 1) if i + 1 < len(st) else 1
            st = tuple(st)
        if dim is None:
            return st
        return st[_norm_dim(dim, np.ndim(d), 'stride')] if st else 1

    def storage_offset(self):
        """How many elements into its storage this tensor starts (``x[1:]``: 1)."""
        d = self._data
        if type(d) is not np.ndarray or d.base is None:
            return 0
        root = d
        while isinstance(root, np.ndarray) and root.base is not None:
            root = root.base
        start = _address(root)
        if start is None:
            return 0
        if not (isinstance(root, np.ndarray) and root.dtype == d.dtype):
            # a raw byte buffer: tape's allocator starts its arrays on a 64-byte line
            from ._pool import ALIGN
            start += -start % ALIGN
        off = d.ctypes.data - start
        return max(off, 0) // d.dtype.itemsize

    def data_ptr(self):
        """The address of the tensor's first element (views share their base's memory)."""
        return _storage(self).ctypes.data

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return _CPU

    def get_device(self):
        return -1       # PyTorch's answer for a CPU tensor

    is_cpu = property(lambda self: True)
    is_cuda = is_sparse = is_quantized = is_meta = is_mkldnn = is_mps = property(
        lambda self: False)
    layout = property(lambda self: strided)

    def is_inference(self):
        return False

    def is_shared(self):
        return False

    def is_pinned(self, device=None):
        return False

    def cpu(self, memory_format=None):
        """This tensor: it is on the CPU already."""
        return self

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        """Raises AssertionError, as PyTorch built without CUDA does."""
        _check_device('cuda' if device is None else device)
        return self

    def is_floating_point(self):
        return self._data.dtype.kind == 'f'

    def is_complex(self):
        return self._data.dtype.kind == 'c'

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f'a Tensor with {self._data.size} elements cannot be converted '
                               'to Scalar')
        return self._data.reshape(()).item() if isinstance(self._data, np.ndarray) \
            else self._data.item()

    def _scalar(self):
        if self._data.size != 1:
            raise ValueError('only one element tensors can be converted to Python scalars')
        return self.item()

    def __float__(self):
        if self._rg and _tp.grad_mode.enabled and not _FLOAT_WARNED:
            # PyTorch's TORCH_WARN_ONCE (float() only: not int(), bool() or item())
            _FLOAT_WARNED.append(True)
            import warnings
            warnings.warn('Converting a tensor with requires_grad=True to a scalar may lead '
                          'to unexpected behavior.\nConsider using tensor.detach() first.',
                          UserWarning, stacklevel=2)
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __index__(self):
        if self._data.dtype.kind not in 'iub' or self._data.size != 1:
            raise TypeError('only integer tensors of a single element can be converted to an index')
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError('Boolean value of Tensor with no values is ambiguous'
                               if self._data.size == 0 else
                               'Boolean value of Tensor with more than one value is ambiguous')
        return bool(self.item())

    def __contains__(self, element):
        if not isinstance(element, (Tensor, int, float, complex, bool, np.number, np.bool_)):
            raise RuntimeError('Tensor.__contains__ only supports Tensor or scalar, but you '
                               f'passed in a {type(element)}.')
        other = np.asarray(element._data if isinstance(element, Tensor) else element)
        mine = np.asarray(self._data)
        try:
            np.broadcast_shapes(other.shape, mine.shape)
        except ValueError:          # PyTorch's RuntimeError (of element == self)
            from ._ops import shapes_error
            raise shapes_error('eq', other.shape, mine.shape) from None
        return bool(np.any(other == mine))

    def numpy(self, *, force=False):
        # PyTorch refuses only while grad mode is on: under no_grad (a custom
        # Function's forward, say) the array shares memory with the tensor.
        if self._rg and _tp.grad_mode.enabled and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               'Use tensor.detach().numpy() instead.')
        return _storage(self)

    def tolist(self):
        return np.asarray(self._data).tolist()

    def __array__(self, dtype=None, copy=None):
        if self._rg and _tp.grad_mode.enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               'tensor.detach().numpy() instead.')
        a = np.asarray(self._data)
        if dtype is not None:
            return a.astype(dtype)
        # np.array(t) passes copy=True and trusts the result to be new memory
        return a.copy() if copy else a

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError('len() of a 0-d tensor')
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError('iteration over a 0-d tensor')
        if self._rg and _tp.grad_mode.enabled:
            # PyTorch iterates self.unbind(0): the rows' grad_fn is UnbindBackward0
            from ._shapes import unbind
            return iter(unbind(self, 0))
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self):
        return id(self)

    def __format__(self, spec):
        # f'{loss:.3f}': a 0-d tensor formats as its number, as in PyTorch
        if np.ndim(self._data) == 0:
            return format(self._data.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self):
        d = self._data
        suffixes = []
        if d.size == 0:
            # torch shows the shape unless it is (0,), and any non-default dtype
            if d.ndim != 1:
                suffixes.append(f'size={tuple(d.shape)}')
            if d.dtype != _default_dtype[0]:
                suffixes.append(f'dtype={DTYPE_NAMES.get(d.dtype, d.dtype)}')
        else:
            if not PRINT_OPTS.edgeitems:
                # torch names the shape whenever edgeitems=0 (the data may show as '...')
                suffixes.append(f'size={tuple(d.shape)}')
            if d.dtype not in (_default_dtype[0], _INT64, _BOOL):
                suffixes.append(f'dtype={DTYPE_NAMES.get(d.dtype, d.dtype)}')
        if self._tape is not None:
            suffixes.append(f'grad_fn=<{type(self.grad_fn).__name__}>')
        elif self._rg:
            suffixes.append('requires_grad=True')
        text = _add_suffixes('tensor(' + _fmt_data(d), suffixes, 7)
        # a parameter of tape.nn (a plain tensor with a marker: tape/nn/modules.py)
        if self.__dict__.get(_PARAM_MARK, False):
            return 'Parameter containing:\n' + text
        return text

    __str__ = __repr__

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """``x.type()``: the legacy type name, PyTorch's ('torch.FloatTensor'), so
        that code comparing it with PyTorch's names runs unchanged; ``x.type(dtype)``
        or ``x.type('torch.DoubleTensor')`` (also 'tape.DoubleTensor'): ``x.to(dtype)``."""
        if dtype is None:
            name = _TYPE_NAMES.get(self._data.dtype)
            return 'torch.' + name if name else str(self._data.dtype)
        dtype = getattr(dtype, '_legacy_dtype', dtype)     # x.type(tape.DoubleTensor)
        if isinstance(dtype, str):
            module, _, name = dtype.rpartition('.')
            if module not in ('torch', 'tape') or name not in _TYPE_DTYPES:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = _TYPE_DTYPES[name]
        return self.to(dtype)

    def type_as(self, other):
        """This tensor in ``other``'s dtype (itself when they already match)."""
        return self.to(other._data.dtype)

    def clone(self, *, memory_format=None):
        """A copy in new memory, recorded (CloneBackward0); the layout is kept (PyTorch's
        preserve_format), or row-major for ``memory_format=tape.contiguous_format``."""
        from . import _ops
        out = _ops.clone(self)
        if memory_format is contiguous_format and not out._data.flags.c_contiguous:
            out = out.contiguous()
        return out

    def apply_(self, callable):
        """Replace each element ``v`` by ``callable(v)`` (a Python number), in place."""
        if self._rg:
            raise RuntimeError("Can't call apply_() on Variable that requires grad. Use "
                               'var.detach().apply_() instead.')
        d = _storage(self)
        for idx in np.ndindex(d.shape):
            d[idx] = callable(d[idx].item())
        _bump_version(self)
        return self

    def map_(self, tensor, callable):
        """Replace each element ``v`` by ``callable(v, w)``, ``w`` the matching
        element of ``tensor`` broadcast to this shape, in place."""
        if self._rg:
            raise RuntimeError("Can't call map_() on Variable that requires grad. Use "
                               'var.detach().map_() instead.')
        d = _storage(self)
        other = np.broadcast_to(np.asarray(tensor._data if isinstance(tensor, Tensor)
                                           else tensor), d.shape)
        for idx in np.ndindex(d.shape):
            d[idx] = callable(d[idx].item(), other[idx].item())
        _bump_version(self)
        return self

    # -- copying and pickling ------------------------------------------
    def __deepcopy__(self, memo):
        # PyTorch's protocol: leaves only; a new leaf with a copy of the values,
        # the same requires_grad, a deep copy of .grad and of Python attributes
        if self._tape is not None:
            raise RuntimeError(
                'Only Tensors created explicitly by the user (graph leaves) support the '
                'deepcopy protocol at the moment.  If you were attempting to deepcopy a '
                'module, this may be because of a torch.nn.utils.weight_norm usage, see '
                'https://github.com/pytorch/pytorch/pull/103001')
        if id(self) in memo:
            return memo[id(self)]
        import copy
        new = _TNEW(type(self))
        _init(new, np.array(self._data, copy=True), self._rg)
        memo[id(self)] = new
        attrs = _user_attrs(self)
        if self._grad is not None and not attrs.get(_PARAM_MARK):
            # (PyTorch's Parameter.__deepcopy__ drops .grad; a Tensor's keeps it)
            new._grad = copy.deepcopy(self._grad, memo)
        for k, v in attrs.items():
            setattr(new, k, copy.deepcopy(v, memo))
        return new

    def __reduce_ex__(self, protocol):
        # pickle (and copy.copy) as PyTorch does: values, dtype, requires_grad and
        # Python attributes; not the graph, .grad or hooks (a non-leaf comes back
        # as a leaf).  copy.copy shares the storage, as in PyTorch.
        return (_rebuild, (type(self), _storage(self), self._rg, _user_attrs(self) or None))

    def copy_(self, src):
        from . import _ops
        return _ops.inplace(self, 'copy', src)


_size_of = tuple.__new__


class Size(tuple):
    """The shape of a tensor: a tuple that prints like ``tape.Size([2, 3])``;
    its slices, sums with tuples and repeats are Sizes too, as PyTorch's."""
    def __new__(cls, sizes=()):
        # each size an integer, or what converts to one (a 0-d integer tensor),
        # as PyTorch's; a tensor's own shape takes _size_of, which skips this
        return _size_of(cls, [s if type(s) is int else operator.index(s) for s in sizes])

    def __repr__(self):
        return f'tape.Size({list(self)})'

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if type(i) is slice else r

    def __add__(self, other):
        r = tuple.__add__(self, other)
        return Size(r) if isinstance(other, tuple) else r

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _address(a):
    """The data address of an array or of an object exposing ``__array_interface__``."""
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    ai = getattr(a, '__array_interface__', None)
    return ai['data'][0] if isinstance(ai, dict) else None


# tape.nn's marker of a parameter (tape/nn/modules.py): copied and pickled with
# the tensor, so a copy of a Parameter is a Parameter, as in PyTorch
_PARAM_MARK = '_is_param'


def _user_attrs(t):
    """Attributes a user set on the tensor (tape's own start with an underscore),
    and the parameter marker."""
    d = t.__dict__
    return {k: v for k, v in d.items() if not k.startswith('_') or k == _PARAM_MARK} \
        if d else {}


def _rebuild(cls, data, requires_grad, attrs=None):
    t = _TNEW(cls)
    _init(t, data, False)
    if requires_grad:
        t.requires_grad_(True)
    if attrs:
        t.__dict__.update(attrs)
    return t


def _norm_dim(dim, ndim, opname):
    if type(dim) is not int:
        dim = _index_arg(dim, opname, 'dim')
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f'{opname}: Dimension out of range (expected to be in range of '
                         f'[{-n}, {n - 1}], but got {dim})')
    return dim + n if dim < 0 else dim


def _index_arg(x, opname, argname):
    """``x`` as an int (a NumPy integer or a one-element integer tensor counts), or
    PyTorch's TypeError naming the op and the argument."""
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{opname}(): argument '{argname}' must be int, not "
                        f'{type(x).__name__}') from None


_TNEW = object.__new__


def _init(t, data, rg):
    t._data = data
    t._rg = rg
    t._tape = None
    t._goff = -1
    t._rec = 0


def _leaf(data):
    """A leaf that does not require grad, wrapping ``data`` as is."""
    t = _TNEW(Tensor)
    t._data = data
    t._rg = False
    t._tape = None
    t._goff = -1
    t._rec = 0
    return t


def _storage(t):
    """The tensor's data as an ndarray that in-place ops can write to."""
    d = t._data
    if type(d) is not np.ndarray:
        d = t._data = np.array(d)
    return d


def _bump_version(t):
    box = t._vbox
    if box is None:
        box = t._vbox = [0]
    box[0] += 1
    _tp.inplace_epoch[0] += 1
