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


# Printing follows torch/_tensor_str.py with its default options.
_PRECISION, _THRESHOLD, _EDGEITEMS, _LINEWIDTH = 4, 1000, 3, 80


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
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        if self.sci_mode:
            fmt, extra = f'{{:.{_PRECISION}e}}', 0
        elif self.int_mode:
            fmt, extra = '{:.0f}', 1
        else:
            fmt, extra = f'{{:.{_PRECISION}f}}', 0
        self.max_width = max(len(fmt.format(v)) for v in vals) + extra

    def format(self, v):
        if self.floating:
            if self.sci_mode:
                s = f'{{:{self.max_width}.{_PRECISION}e}}'.format(v)
            elif self.int_mode:
                s = f'{v:.0f}'
                if not (math.isinf(v) or math.isnan(v)):
                    s += '.'
            else:
                s = f'{{:.{_PRECISION}f}}'.format(v)
        else:
            s = f'{v}'
        return (self.max_width - len(s)) * ' ' + s


def _summarized(a):
    """torch's ``get_summarized_data``: the edge items every dimension keeps."""
    if a.ndim == 0:
        return a
    e = _EDGEITEMS
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) \
        if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


def _vector_str(a, indent, summarize, fmt):
    per_line = max(1, math.floor((_LINEWIDTH - indent) / (fmt.max_width + 2)))
    e = _EDGEITEMS
    if summarize and a.shape[0] > 2 * e:
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
    e, n = _EDGEITEMS, a.shape[0]
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
    summarize = a.size > _THRESHOLD
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
        if last + n + 2 > _LINEWIDTH:
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
               np.dtype(np.uint8): 'tape.uint8'}
_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)


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
    __array_priority__ = 1000     # ndarray (op) Tensor defers to Tensor

    def __init__(self, data=None, *sizes, requires_grad=False):
        # Tensor(data) follows torch.Tensor(data): float32 for Python numbers;
        # Tensor(2, 3) and Tensor(Size) make a (zero-filled) tensor of that shape
        if data is None:
            data = np.zeros(0, np.float32)
        elif type(data) is int or isinstance(data, Size) or sizes:
            shape = tuple(data) if isinstance(data, Size) else (data, *sizes)
            if not all(type(s) is int for s in shape):
                raise TypeError(f'new(): argument \'size\' must be a tuple of ints, but got '
                                f'{tuple(type(s).__name__ for s in shape)}')
            data = np.zeros(shape, np.float32)
        elif isinstance(data, (float, complex, bool)):
            raise TypeError(f'new(): data must be a sequence (got {type(data).__name__})')
        arr = np.array(data.numpy() if isinstance(data, Tensor) else data)
        if arr.dtype.kind in 'iub' and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)
        elif arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)
        _init(self, arr, False)
        if requires_grad:
            self.requires_grad_(True)

    # -- identity and autograd state ------------------------------------
    @property
    def data(self):
        """A tensor sharing this one's storage, outside the graph; changes to it are not tracked."""
        d = _storage(self)
        t = _leaf(d)
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
            self._rg = False
            self._goff = -1
            self._rec = 0
        return self

    # -- shape and conversion -----------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
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

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return 'cpu'

    def is_floating_point(self):
        return self._data.dtype.kind == 'f'

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f'a Tensor with {self._data.size} elements cannot be converted '
                               'to Scalar')
        return self._data.reshape(()).item() if isinstance(self._data, np.ndarray) \
            else self._data.item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in 'iu':
            raise TypeError('only integer tensors of a single element can be converted to an index')
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError('Boolean value of Tensor with more than one value is ambiguous')
        return bool(self.item())

    def numpy(self):
        if self._rg:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               'Use tensor.detach().numpy() instead.')
        return _storage(self)

    def tolist(self):
        return np.asarray(self._data).tolist()

    def __array__(self, dtype=None, copy=None):
        if self._rg:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               'tensor.detach().numpy() instead.')
        a = np.asarray(self._data)
        return a if dtype is None else a.astype(dtype)

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError('len() of a 0-d tensor')
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError('iteration over a 0-d tensor')
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
        elif d.dtype not in (_default_dtype[0], _INT64, _BOOL):
            suffixes.append(f'dtype={DTYPE_NAMES.get(d.dtype, d.dtype)}')
        if self._tape is not None:
            suffixes.append(f'grad_fn=<{self.grad_fn.name()}>')
        elif self._rg:
            suffixes.append('requires_grad=True')
        return _add_suffixes('tensor(' + _fmt_data(d), suffixes, 7)

    __str__ = __repr__

    def type(self, dtype=None):
        if dtype is None:
            return {np.dtype(np.float32): 'tape.FloatTensor', np.dtype(np.float64): 'tape.DoubleTensor',
                    np.dtype(np.int64): 'tape.LongTensor', np.dtype(np.bool_): 'tape.BoolTensor'}.get(
                        self._data.dtype, str(self._data.dtype))
        return self.to(dtype)

    def clone(self):
        from . import _ops
        return _ops.clone(self)

    def copy_(self, src):
        from . import _ops
        return _ops.inplace(self, 'copy', src)


class Size(tuple):
    """The shape of a tensor: a tuple that prints like ``tape.Size([2, 3])``."""
    def __repr__(self):
        return f'tape.Size({list(self)})'

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


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
