"""tape: PyTorch's autograd semantics on a flat tape with a Numba-compiled reverse sweep.

>>> import tape
>>> x = tape.tensor([1.0, 2.0], requires_grad=True)
>>> y = (x * x + 3 * x).sum()
>>> y
tensor(14., grad_fn=<SumBackward0>)
>>> y.backward()
>>> x.grad
tensor([5., 7.])

Layout: ``_tensor`` (the Tensor), ``_tape`` (the record format), ``_rules``
(the one table of primitives and derivatives), ``_ops`` (forward + record),
``_sweep`` (the backward driver), ``compiler/`` (the Numba kernels),
``autograd`` (the public autograd namespace).
"""
import builtins  # tape.all/any/max/min/round shadow the builtins in this module
import warnings as _warnings

import numpy as np

from . import _ops
from ._out import into_out as _into_out
from ._grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                         is_inference_mode_enabled, no_grad, set_grad_enabled)
from ._pool import aligned, aligned_empty, ALIGN_MIN as _ALIGN_MIN
from ._composite_nodes import node_named as _node_named
from ._tensor import Tensor, Size, _leaf, _norm_dim, _TNEW
from ._tensor import (device, strided, preserve_format, contiguous_format,  # noqa: F401
                      channels_last, channels_last_3d, _check_device)
from ._tape import grad_mode as _mode
from . import _dtypes
from . import autograd
from .autograd import is_anomaly_enabled, is_anomaly_check_nan_enabled  # noqa: F401
from . import func
from . import return_types
from . import profiler  # noqa: E402,F401
from ._sweep import run_scalar as _run_scalar

__version__ = '0.1.0'

# NumPy's floating-point warnings, which PyTorch does not give: see tape/_fpwarn.py
from . import _fpwarn  # noqa: F401,E402

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
float16 = np.dtype(np.float16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
int16 = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001  (torch.bool)
float = float32  # noqa: A001
double = float64
long = int64
half = float16
short = int16
# the class of the dtypes above (``isinstance(x.dtype, tape.dtype)``, annotations):
# tape's dtypes are NumPy's, so they lack torch.dtype's attributes
# (``is_floating_point``, ``itemsize`` is NumPy's own)
dtype = np.dtype

# torch's constants (``torch.pi``, ``x[:, torch.newaxis]``)
import math as _math  # noqa: E402
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan
newaxis = None

from ._dtypes import default_dtype as _default_dtype  # noqa: E402  (shared with the ops)
_rng = [np.random.default_rng()]


def get_default_dtype():
    return _default_dtype[0]


def set_default_dtype(dtype):
    dt = np.dtype(dtype)
    if dt.kind != 'f' or dt.itemsize < 4:
        # (PyTorch also takes float16; tape keeps to float32 and float64, the
        # dtypes its kernels are written for)
        raise TypeError(f'only floating-point types are supported as the default type '
                        f'(got {dt}; tape takes float32 and float64)')
    _default_dtype[0] = dt


# ------------------------------------------------------------------ creation
def _finish(arr, dtype, requires_grad):
    if dtype is not None:
        arr = arr.astype(np.dtype(dtype), copy=False)
    t = _leaf(aligned(arr))       # a new tensor's own memory starts on a cache line
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer(data, dtype=None):
    """``data`` as a new array: float32 (the default dtype) for Python floats,
    the array's or NumPy scalar's own dtype otherwise; with ``dtype``, Python
    numbers convert to it directly (no rounding through float32 first)."""
    if isinstance(data, (Tensor, np.ndarray)):
        src = data._data if isinstance(data, Tensor) else _check_array(data)
        out = aligned_empty(np.shape(src), np.result_type(src))
        np.copyto(out, src)
        return out
    if isinstance(data, (list, tuple)) and builtins.any(isinstance(x, Tensor)
                                                         for x in _flat(data)):
        data = _tolist(data)
    if isinstance(data, np.generic) and not isinstance(data, (str, bytes)):
        _check_array(np.asarray(data))      # (a datetime64, say; a str gets torch's error below)
    if dtype is not None and not isinstance(data, np.generic):
        try:
            arr = np.array(data, np.dtype(dtype))
        except OverflowError:           # a Python int out of dtype's range
            arr = _dtypes.ints_into(data, np.dtype(dtype))
        except ValueError:
            _data_error(data, np.dtype(dtype))
            raise
        if arr.dtype.kind == 'O':
            _data_error(data, np.dtype(dtype))
            raise TypeError(f'tensor: could not infer a dtype from {type(data).__name__}')
        return arr
    try:
        arr = np.array(data)
    except ValueError:                  # a ragged list
        _data_error(data)
        raise
    if arr.dtype.kind in 'iuf' and arr.dtype != np.int64 and isinstance(data, (list, tuple)) \
            and _has_numpy_number(data):
        # NumPy numbers keep their dtypes, promoted item by item as PyTorch's
        return arr.astype(_dtypes.sequence_dtype(_flat(data)), copy=False)
    if arr.dtype == np.float64 and not isinstance(data, np.floating):
        try:
            arr = arr.astype(_default_dtype[0])
        except RuntimeWarning as e:     # a number past float32's range is inf there
            arr = _ops.quietly(e, arr.astype, _default_dtype[0])
    elif arr.dtype.kind in 'iu' and not isinstance(data, np.integer):
        if arr.dtype == np.uint64 and not isinstance(data, np.generic) \
                and arr.size and arr.max() > np.iinfo(np.int64).max:
            # a Python int past int64 (NumPy picks uint64; the cast would wrap)
            raise ValueError('Overflow when unpacking long long')
        arr = arr.astype(np.int64)
    elif arr.dtype.kind in 'OUS':
        _data_error(data)
        if arr.dtype.kind == 'O' and builtins.any(
                type(x) is builtins.int for x in (_flat(data) if isinstance(data, (list, tuple))
                                                  else (data,))):
            raise ValueError('Overflow when unpacking long long')     # (an int past 64 bits)
        raise TypeError(f'tensor: could not infer a dtype from {type(data).__name__} '
                        f"(new(): invalid data type '{type(data).__name__}')")
    return arr


def _data_error(data, dtype=None):
    """Raise PyTorch's error for ``data`` that is not a rectangular nest of numbers
    (or return, leaving the caller's error): a str where a number belongs, then the
    first other element that is no number, then a sequence of the wrong length."""
    import numbers
    if isinstance(data, (list, tuple)):
        sizes, x = [], data
        while isinstance(x, (list, tuple, str)):
            if isinstance(x, str):      # (torch takes a str for a sequence here)
                raise ValueError("too many dimensions 'str'")
            sizes.append(len(x))
            if not x:
                break
            x = x[0]
        items = _flat(data)
    else:
        sizes, items = [], (data,)
    floating = dtype is not None and dtype.kind == 'f'
    for x in items:
        if isinstance(x, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(x).__name__}'")
        if not isinstance(x, (numbers.Number, np.generic)):
            raise RuntimeError(f'Could not infer dtype of {type(x).__name__}')
        floating = floating or (dtype is None and isinstance(x, (builtins.float, np.floating)))
    if 0 in sizes:
        return

    def check(seq, dim):
        if dim == len(sizes):
            if isinstance(seq, (list, tuple)):      # a number was expected
                name = type(seq).__name__
                raise TypeError(f'must be real number, not {name}' if floating else
                                f"'{name}' object cannot be interpreted as an integer")
            return
        if not isinstance(seq, (list, tuple)):
            raise TypeError('not a sequence')
        if len(seq) != sizes[dim]:
            raise ValueError(f'expected sequence of length {sizes[dim]} at dim {dim} '
                             f'(got {len(seq)})')
        for e in seq:
            check(e, dim + 1)
    check(data, 0)


def _array_dtype_error(arr):
    """PyTorch's TypeError for a NumPy array of a dtype tensors cannot hold."""
    return TypeError(f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. The "
                     'only supported types are: float64, float32, float16, int64, int32, '
                     'int16, int8, uint64, uint32, uint16, uint8, and bool.')


def _check_array(arr):
    """``arr`` unless its dtype is no number's (str, object, datetime, ...) or wider
    than 64 bits: tensor() and as_tensor() of it raise as PyTorch does, rather than
    make a tensor of strings (complex stays: tape does not check it elsewhere)."""
    k = arr.dtype.kind
    if k not in 'fiubc' or (k == 'f' and arr.dtype.itemsize > 8):
        raise _array_dtype_error(arr)
    return arr


def _has_numpy_number(data):
    """Does a nested list hold a NumPy number or array (whose dtype PyTorch keeps)?"""
    return builtins.any(isinstance(x, (np.generic, np.ndarray)) for x in _flat(data))


def _flat(x):
    for e in x:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def _tolist(x):
    if isinstance(x, Tensor):
        # PyTorch takes a tensor in a list as one number keeping its dtype (a NumPy
        # number here, promoted as such): [tensor(1., dtype=float64), 2.] is float64
        if x._data.size != 1:
            raise ValueError('only one element tensors can be converted to Python scalars')
        return np.asarray(x._data).reshape(())[()]
    if isinstance(x, (list, tuple)):
        return [_tolist(e) for e in x]
    return x


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new leaf tensor holding a copy of ``data`` (float32 for Python floats).

    >>> import tape
    >>> tape.tensor([[1, 2], [3, 4]]).dtype
    dtype('int64')
    """
    if isinstance(data, Tensor):
        _warnings.warn(_COPY_CONSTRUCT.format('torch.tensor'), UserWarning, stacklevel=2)
    return _finish(_infer(data, dtype), dtype, requires_grad)


# PyTorch's warning for tensor(t) and x.new_tensor(t) of a tensor t (its 'torch.' kept)
_COPY_CONSTRUCT = ('To copy construct from a tensor, it is recommended to use '
                   'sourceTensor.detach().clone() or sourceTensor.detach().clone()'
                   '.requires_grad_(True), rather than {}(sourceTensor).')


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and dtype is None:
        return data
    if isinstance(data, np.ndarray):
        return _finish(_check_array(data), dtype, False)
    # (not tensor(): as_tensor of a tensor does not warn)
    return _finish(_infer(data, dtype), dtype, False)


def from_numpy(arr):
    """A tensor sharing memory with the NumPy array ``arr``."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f'expected np.ndarray (got {type(arr).__name__})')
    if arr.dtype.kind not in 'fiub' or arr.dtype.itemsize > 8:
        raise _array_dtype_error(arr)
    if builtins.any(s < 0 for s in arr.strides):
        # (PyTorch's message, its double space included)
        raise ValueError('At least one stride in the given numpy array is negative, and tensors '
                         'with negative strides are not currently supported. (You can probably '
                         'work around this by making a copy of your array  with array.copy().) ')
    return _leaf(arr)


def _shape(size, opname='zeros'):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if type(s) is not builtins.int or s < 0:
            return _checked_shape(size, opname)
    return tuple(size)


def _checked_shape(size, opname):
    """The slow path of ``_shape``: PyTorch's TypeError for a non-integer size
    and RuntimeError for a negative one."""
    from ._ops import _sizes
    shape = _sizes((size,) if isinstance(size, (tuple, list)) else (size,), opname)
    if builtins.any(s < 0 for s in shape):
        neg = next(s for s in shape if s < 0)
        raise RuntimeError(f'{opname}: Trying to create tensor with negative dimension {neg}: '
                           f'{list(shape)}')
    return shape


def _dt(dtype):
    return _default_dtype[0] if dtype is None else np.dtype(dtype)


def _sized(args, size):
    # torch.zeros(2, 3), zeros((2, 3)) and zeros(size=(2, 3)) are all PyTorch's forms
    if size is None:
        return args
    if args:
        raise TypeError('got both a positional size and size=')
    return (size,)


# The creation functions take out= themselves (tape/_out.py wraps the rest):
# a wrapper's extra call would land on every tape.rand in a data loop.  With
# out=, the values are made in out's dtype.
def zeros(*args, size=None, dtype=None, requires_grad=False, device=None, out=None):
    if out is not None:
        return _into_out(zeros(*args, size=size, dtype=dtype or out.dtype), out, 'zeros')
    size = _sized(args, size)
    return _finish(np.zeros(_shape(size, 'zeros'), _dt(dtype)), None, requires_grad)


def ones(*args, size=None, dtype=None, requires_grad=False, device=None, out=None):
    if out is not None:
        return _into_out(ones(*args, size=size, dtype=dtype or out.dtype), out, 'ones')
    size = _sized(args, size)
    return _finish(np.ones(_shape(size, 'ones'), _dt(dtype)), None, requires_grad)


def empty(*args, size=None, dtype=None, requires_grad=False, device=None, memory_format=None):
    return zeros(*_sized(args, size), dtype=dtype, requires_grad=requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    if not isinstance(fill_value, (builtins.int, builtins.float, builtins.bool, np.number,
                                   np.bool_)) \
            and not (isinstance(fill_value, Tensor) and fill_value._data.ndim == 0):
        raise TypeError(f"full(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(fill_value).__name__}")
    if dtype is None:
        dtype = (int64 if isinstance(fill_value, builtins.int)
                 and not isinstance(fill_value, type(True))
                 else np.bool_ if isinstance(fill_value, type(True)) else _default_dtype[0])
    return _finish(np.full(_shape((size,), 'full'), fill_value, np.dtype(dtype)), None, requires_grad)


def _random(method, size, dtype, requires_grad):
    dt = _dt(dtype)
    if dt == float32 or dt == float64:
        arr = method(_shape(size, 'rand'), dtype=dt)  # drawn in the target dtype: no copy
    else:
        if dt.kind not in 'f':
            # (PyTorch's rand/randn have no integer or bool kernels either)
            name = 'uniform' if method.__name__ == 'random' else 'normal'
            raise NotImplementedError(f'"{name}_kernel_cpu" not implemented for '
                                      f"'{_ops._TORCH_DTYPE_NAMES.get(dt.str[1:], str(dt))}'")
        arr = method(_shape(size, 'rand')).astype(dt)
    t = _leaf(aligned(arr))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _gen(generator):
    """The NumPy generator behind ``generator`` (the global one for None)."""
    if generator is None:
        return _rng[0]
    from .nn.functional import _rng_of
    return _rng_of(generator)


def rand(*args, size=None, dtype=None, requires_grad=False, generator=None, device=None,
         out=None):
    """Uniform samples on [0, 1) (seeded by ``manual_seed``, or drawn from ``generator``)."""
    if out is not None:
        return _into_out(rand(*args, size=size, dtype=dtype or out.dtype, generator=generator),
                         out, 'rand')
    if size is None and dtype is None and generator is None:
        # the common call, rand(8, 1): the same draw as _random's, without its calls
        dt = _default_dtype[0]
        if dt is float32 or dt is float64:
            for s in args:
                if type(s) is not builtins.int or s < 0:
                    break
            else:
                return _random_leaf(_rng[0].random(args, dtype=dt), requires_grad)
    return _random(_gen(generator).random, _sized(args, size), dtype, requires_grad)


def randn(*args, size=None, dtype=None, requires_grad=False, generator=None, device=None,
          out=None):
    """Standard normal samples (seeded by ``manual_seed``, or drawn from ``generator``)."""
    if out is not None:
        return _into_out(randn(*args, size=size, dtype=dtype or out.dtype, generator=generator),
                         out, 'randn')
    if size is None and dtype is None and generator is None:
        dt = _default_dtype[0]
        if dt is float32 or dt is float64:
            for s in args:
                if type(s) is not builtins.int or s < 0:
                    break
            else:
                return _random_leaf(_rng[0].standard_normal(args, dtype=dt), requires_grad)
    return _random(_gen(generator).standard_normal, _sized(args, size), dtype, requires_grad)


def _random_leaf(arr, requires_grad):
    """A new leaf of the fresh draw ``arr`` (on a cache line when large enough)."""
    if arr.nbytes >= _ALIGN_MIN:
        arr = aligned(arr)
    t = _TNEW(Tensor)
    t._data = arr
    t._rg = False
    t._tape = None
    t._goff = -1
    t._rec = 0
    if requires_grad:
        t.requires_grad_(True)
    return t


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False,
           device=None):
    """Normal samples: ``mean + std * randn``, of ``size`` for numbers, or of the
    broadcast shape of tensor ``mean``/``std``.  As in PyTorch, a sample from tensors
    that require grad requires grad, and passes them a zero gradient."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        shape = np.broadcast_shapes(*[x._data.shape for x in (mean, std) if isinstance(x, Tensor)])
        like = mean if isinstance(mean, Tensor) else std
        eps = randn(*shape, dtype=like._data.dtype, generator=generator)
        with no_grad():
            sample = _ops.add(_ops.mul(eps, std), mean)
        anchor = _ops.add(mean, std) if isinstance(mean, Tensor) and isinstance(std, Tensor) \
            else like
        # where(all True): the sample's values, a zero gradient to mean and std
        return _ew.where(np.ones(shape, bool), sample, _ops.expand(anchor, *shape))
    if size is None:
        raise TypeError('normal() with number mean and std needs size=')
    t = randn(*_shape((size,), 'normal'), dtype=dtype, generator=generator)
    t._data *= std
    t._data += mean
    return t.requires_grad_(True) if requires_grad else t


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """0/1 samples, 1 with probability ``input`` (or ``p``), in input's dtype.
    Not differentiable."""
    prob = input._data if p is None else np.broadcast_to(np.asarray(p), input._data.shape)
    draw = _gen(generator).random(input._data.shape) < prob
    return _leaf(draw.astype(input._data.dtype))


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Indices drawn from the rows of ``input`` (non-negative weights, not
    necessarily normalized); without ``replacement`` no index repeats in a row."""
    w = np.asarray(input._data, np.float64)
    rows = w.reshape(-1, w.shape[-1]) if w.ndim else w.reshape(1, 1)
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(1) <= 0).any():
        raise RuntimeError('invalid multinomial distribution (sum of probabilities <= 0, or '
                           'negative or non-finite ones)')
    if not replacement and num_samples > w.shape[-1]:
        raise RuntimeError('cannot sample n_sample > prob_dist.size(-1) samples without '
                           'replacement')
    g = _gen(generator)
    out = np.stack([g.choice(len(r), num_samples, replace=replacement, p=r / r.sum())
                    for r in rows])
    return _leaf(out.reshape(w.shape[:-1] + (num_samples,)).astype(np.int64))


def randint(low, high=None, size=None, dtype=None, requires_grad=False, device=None,
            generator=None):
    if high is None:
        low, high = 0, low
    elif size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high          # torch.randint(high, size)
    if not low < high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    arr = _gen(generator).integers(low, high, size=_shape((size,), 'randint') if size is not None else ())
    return _finish(arr.astype(np.int64 if dtype is None else np.dtype(dtype)), None,
                   requires_grad)


def arange(start=None, end=None, step=1, dtype=None, requires_grad=False, device=None):
    if end is None:
        if start is None:
            raise TypeError("arange() missing required argument 'end'")
        start, end = 0, start
    elif start is None:
        start = 0           # arange(end=4)
    # 0-d tensors count as the numbers they hold (an int tensor gives int64)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    ints = builtins.all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
    if step == 0:
        raise RuntimeError('arange: step must be nonzero')
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f'arange: unsupported range: {start:g} -> {end:g}')
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError(f'arange: upper bound and lower bound inconsistent with step sign '
                           f'(start={start}, end={end}, step={step})')
    dt = None if dtype is None else np.dtype(dtype)
    if dt is not None and dt.kind == 'b':
        raise NotImplementedError('"arange_cpu" not implemented for \'Bool\'')
    if dt is not None and dt.kind in 'iu' and not ints:
        # PyTorch's integer kernels: the count from the bounds, the values from the
        # start and step truncated to integers (int64 counts with them too)
        i0, di = builtins.int(start), builtins.int(step)
        if dt == np.int64:
            if di == 0:
                raise ValueError('step must be nonzero')
            sgn = (di > 0) - (di < 0)
            n = builtins.int((builtins.int(end) - i0 + di - sgn) / di)   # (C's division)
        else:
            n = builtins.int(np.ceil((end - start) / step))
        arr = i0 + di * np.arange(builtins.max(n, 0), dtype=np.int64)
        return _finish(arr.astype(dt), None, requires_grad)
    arr = np.arange(start, end, step)
    if dtype is None:
        dtype = int64 if ints else _default_dtype[0]
    return _finish(arr.astype(np.dtype(dtype)), None, requires_grad)


def _range_ends(name, start, end):
    for which, v in (('start', start), ('end', end)):
        if isinstance(v, Tensor) and v.dim() != 0:
            raise RuntimeError(f'{name} only supports 0-dimensional start and end tensors, but '
                               f'got {which} with {v.dim()} dimension(s).')


def _fma64(a, b, c):
    """``a * b + c`` in float64 rounded (nearly always) once: the product's exact
    error by Dekker's split, the sum's by Knuth's TwoSum."""
    with np.errstate(over='ignore', invalid='ignore'):
        p = a * b
        ah = 134217729.0 * a
        ah = ah - (ah - a)
        bh = 134217729.0 * b
        bh = bh - (bh - b)
        al, bl = a - ah, b - bh
        pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        s = p + c
        v = s - p
        t = (p - (s - v)) + (c - v)
        out = s + (t + pe)
    return np.where(np.isfinite(out), out, s)


def _linspace_values(start, end, steps, dt):
    """PyTorch's linspace kernel: ``step = (end - start) / (steps - 1)`` in the
    result's dtype, then ``start + step * i`` for the first half and ``end - step *
    (steps - 1 - i)`` for the rest, each one multiply-add rounded once (the
    compiler fuses them: long double here); an integer dtype truncates the ends
    first and steps in float64, a half one rounds every operation to half.
    (NumPy's linspace came out an ulp away in about half of the float32 cases.)"""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if steps <= 1:
        with np.errstate(over='ignore'):        # (a start past half's range: inf)
            return np.asarray([start] * steps).astype(dt)
    if dt.kind == 'b':
        raise NotImplementedError('"linspace_cpu" not implemented for \'Bool\'')
    i = np.arange(steps)
    first = i < steps // 2
    if dt == np.float16:
        s, e = np.float16(start), np.float16(end)
        step = (e - s) / np.float16(steps - 1)
        return np.where(first, s + step * i.astype(np.float16),
                        e - step * (steps - 1 - i).astype(np.float16))
    if dt.kind in 'iu':
        s, e = np.longdouble(builtins.int(start)), np.longdouble(builtins.int(end))
        step = np.longdouble(np.float64((builtins.int(end) - builtins.int(start)) / (steps - 1)))
    elif dt == np.float64:
        # (long double's 64 bits cannot hold every product: a compensated fma)
        s, e = np.float64(start), np.float64(end)
        step = (e - s) / np.float64(steps - 1)
        return np.where(first, _fma64(step, i.astype(np.float64), s),
                        _fma64(-step, (steps - 1 - i).astype(np.float64), e))
    else:
        s, e = dt.type(start), dt.type(end)
        step = np.longdouble((e - s) / dt.type(steps - 1))
        s, e = np.longdouble(s), np.longdouble(e)
    vals = np.where(first, s + step * i, e - step * (steps - 1 - i))
    if dt.kind in 'iu':     # (the fused result is a double, then truncated)
        return np.trunc(vals.astype(np.float64)).astype(dt)
    return vals.astype(dt)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    _range_ends('linspace', start, end)
    if isinstance(steps, builtins.float):
        raise TypeError("linspace(): argument 'steps' must be int, not float")
    if steps < 0:
        raise RuntimeError(f'linspace: number of steps must be non-negative, got {steps}')
    return _finish(_linspace_values(start, end, steps, _dt(dtype)), None, requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, requires_grad=False, device=None):
    """``base ** linspace(start, end, steps)``.

    >>> import tape
    >>> tape.logspace(0, 2, 3).tolist()
    [1.0, 10.0, 100.0]
    """
    _range_ends('logspace', start, end)
    if steps < 0:
        raise RuntimeError(f'logspace: number of steps must be non-negative, got {steps}')
    arr = np.power(np.float64(base), np.linspace(start, end, steps))
    return _finish(arr.astype(_dt(dtype)), None, requires_grad)


def scalar_tensor(s, dtype=None, requires_grad=False, device=None):
    """A 0-d tensor of ``s`` (the default float dtype unless ``dtype`` is given)."""
    return _finish(np.asarray(s, _dt(dtype)), None, requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f'eye: n must be greater or equal to 0, got {n if n < 0 else m}')
    return _finish(np.eye(n, m, dtype=_dt(dtype)), None, requires_grad)


def _like(fn):
    def f(t, dtype=None, requires_grad=False, device=None, memory_format=None, layout=None,
          pin_memory=False):
        d = t._data
        out = fn(*d.shape, dtype=d.dtype if dtype is None else dtype)
        return _keep_layout(out, d, memory_format, requires_grad)
    f.__name__ = fn.__name__ + '_like'
    return f


def _keep_layout(out, d, memory_format, requires_grad):
    """``out`` (a new row-major tensor of ``d``'s shape) in ``d``'s layout, as
    PyTorch's ``*_like`` keep a transposed or permuted input's strides
    (preserve_format); NumPy's order 'K' is the rule ``clone`` follows too."""
    if memory_format is not contiguous_format and d.ndim > 1 and not d.flags.c_contiguous:
        arr = np.empty_like(d, dtype=out._data.dtype, order='K')
        if arr.strides != out._data.strides:
            arr[...] = out._data
            out = _leaf(arr)
    if requires_grad:
        out.requires_grad_(True)
    return out


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def randint_like(t, low=0, high=None, *, dtype=None, requires_grad=False, device=None,
                 memory_format=None):
    """``randint`` in ``t``'s shape and dtype (``randint_like(t, high)`` or ``(t, low, high)``)."""
    if high is None:
        low, high = 0, low
    return randint(low, high, t._data.shape, dtype=t._data.dtype if dtype is None else dtype,
                   requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False, device=None, memory_format=None,
              layout=None, pin_memory=False):
    d = t._data
    out = full(d.shape, fill_value, dtype=d.dtype if dtype is None else dtype)
    return _keep_layout(out, d, memory_format, requires_grad)


def show_tape(t):
    """The records of the tape ``t`` was recorded on, one line each (a teaching dump).

    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> print(tape.show_tape((x * 3).exp().sum()))   # doctest: +ELLIPSIS
    <Tape #...: 3 records, 7 gradient slots, live>
      leaf          slot        0  shape (2,) float32
         0 mul_scalar   slot        2 [2] <- slot 0, c=3   MulBackward0
         1 exp          slot        4 [2] <- slot 2   ExpBackward0  saves out
         2 sum          slot        6 [1] <- slot 4   SumBackward0
    """
    from ._tape import resolve
    if t._tape is None:
        return f'<leaf tensor of shape {tuple(t._data.shape)}: not recorded on any tape>'
    return str(resolve(t))


def is_tensor(x):
    return isinstance(x, Tensor)


def numel(input):  # noqa: A002
    return input.numel()


def clone(input, *, memory_format=None):  # noqa: A002
    return input.clone(memory_format=memory_format)


def detach(input):  # noqa: A002
    return input.detach()


def is_complex(input):  # noqa: A002
    return input.is_complex()


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values of ``input`` (or slices along ``dim``), sorted; with the
    inverse indices and counts when asked.  Not differentiable: the results are
    new leaves."""
    from ._tape import note_value_use
    note_value_use('unique')           # a result shaped by values: tape.jit must not replay it
    d = np.asarray(input._data)
    if dim is not None:
        dim = _norm_dim(dim, d.ndim, 'unique')
        _unique_dim_sizes(d.shape, dim)
    # NaNs stay distinct, as PyTorch's (NumPy's default merges them)
    values, inverse, counts = np.unique(d, return_inverse=True, return_counts=True, axis=dim,
                                        equal_nan=False)
    out = _no_derivative((input,), values, 'Unique2Backward0',
                         "the derivative for '_unique2' is not implemented.")
    if not (return_inverse or return_counts):
        return out
    res = (out,)
    if return_inverse:
        inverse = inverse.reshape(d.shape if dim is None else (d.shape[dim],))
        res += (_leaf(inverse.astype(np.int64)),)
    if return_counts:
        res += (_leaf(counts.astype(np.int64)),)
    return res


def _unique_dim_sizes(shape, dim):
    """PyTorch's checks of zero sizes for unique (and unique_consecutive) over ``dim``."""
    zeros = builtins.sum(1 for n in shape if n == 0)
    if shape[dim] == 0 and zeros > 1:
        raise RuntimeError('Number of zero sized dimensions is more than one, so unique cannot '
                           'be applied ')
    if shape[dim] != 0 and zeros:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           'cannot be applied')


_NO_DERIVATIVE = {}


def _no_derivative(inputs, values, node, message, error=NotImplementedError):
    """``values`` as a new tensor; when one of ``inputs`` requires grad it is the
    output of a node named ``node`` whose backward raises ``error(message)``, as
    PyTorch's nodes for ops without a derivative (unique, heaviside, ...)."""
    if not (_mode.enabled and builtins.any(isinstance(t, Tensor) and t._rg for t in inputs)):
        return _leaf(values)
    fn = _NO_DERIVATIVE.get(node)
    if fn is None:
        class fn(autograd.Function):
            @staticmethod
            def forward(ctx, *args):
                # (*inputs, values, message, error): the inputs only link the node
                ctx.message, ctx.error = args[-2], args[-1]
                return _leaf(args[-3])

            @staticmethod
            def backward(ctx, grad):
                raise ctx.error(ctx.message)
        fn._backward_name = node
        autograd.function._register_node_class(node)
        _NO_DERIVATIVE[node] = fn
    return fn.apply(*inputs, values, message, error)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """``input`` with each run of equal values (or slices along ``dim``) kept once;
    with the inverse indices and counts when asked.  Not differentiable, as in
    PyTorch (its backward raises).

    >>> import tape
    >>> tape.unique_consecutive(tape.tensor([1, 1, 2, 2, 3, 1]))
    tensor([1, 2, 3, 1])
    """
    from ._tape import note_value_use
    note_value_use('unique_consecutive')
    d = np.asarray(input._data)
    if dim is None:
        flat = d.reshape(-1)
        new_run = np.ones(flat.size, builtins.bool)
        new_run[1:] = flat[1:] != flat[:-1]
        values = flat[new_run]
    else:
        dim = _norm_dim(dim, d.ndim, 'unique_consecutive')
        _unique_dim_sizes(d.shape, dim)
        moved = np.moveaxis(d, dim, 0).reshape(d.shape[dim], -1 if d.size else 0)
        new_run = np.ones(d.shape[dim], builtins.bool)
        new_run[1:] = (moved[1:] != moved[:-1]).any(axis=1)
        values = np.compress(new_run, d, axis=dim)
    out = _no_derivative((input,), np.ascontiguousarray(values), 'UniqueConsecutiveBackward0',
                         "the derivative for 'unique_consecutive' is not implemented.")
    if not (return_inverse or return_counts):
        return out
    res = (out,)
    if return_inverse:
        inverse = np.cumsum(new_run) - 1
        res += (_leaf(inverse.reshape(d.shape if dim is None else (d.shape[dim],))
                      .astype(np.int64)),)
    if return_counts:
        starts = np.flatnonzero(new_run)
        res += (_leaf(np.diff(np.append(starts, new_run.size)).astype(np.int64)),)
    return res


# ---------------------------------------------------------------- functions
def _either(op, rop, name):
    """``tape.<name>(input, other)``: either argument may be the tensor (a Python
    number first is PyTorch's wrapped scalar: ``tape.add(2.0, x)``)."""
    op = getattr(op, 'method', op)      # a non-tensor other raises TypeError

    def f(input, other, *, out=None):  # noqa: A002
        if isinstance(input, Tensor):
            r = op(input, other)
        elif isinstance(other, Tensor) and rop is not None:
            r = rop(other, input)
        else:
            raise TypeError(f'{name}(): argument \'input\' must be Tensor, not '
                            f'{type(input).__name__}')
        return r if out is None else _into_out(r, out, name, input, other)
    f.__name__ = name
    return f


@_node_named(lambda i, o, alpha: ('AddBackward0', 2) if alpha is not None and alpha != 1 and
             isinstance(o, Tensor) else None, 'input', 'other', 'alpha')
def add(input, other, *, alpha=None, out=None):  # noqa: A002
    """``input + alpha * other``."""
    if out is not None:
        return _into_out(add(input, other, alpha=alpha), out, 'add', input, other)
    if alpha is not None and alpha != 1:
        _dtypes.check_alpha('add', input, other, alpha)
        other = other * alpha
    return _add(input, other)


@_node_named(lambda i, o, alpha: ('SubBackward0', 2) if alpha is not None and alpha != 1 and
             isinstance(o, Tensor) else None, 'input', 'other', 'alpha')
def sub(input, other, *, alpha=None, out=None):  # noqa: A002
    """``input - alpha * other``."""
    if out is not None:
        return _into_out(sub(input, other, alpha=alpha), out, 'sub', input, other)
    if alpha is not None and alpha != 1:
        _dtypes.check_alpha('sub', input, other, alpha)
        other = other * alpha
    return _sub(input, other)


def div(input, other, *, rounding_mode=None, out=None):  # noqa: A002
    """``input / other``; ``rounding_mode`` 'trunc' or 'floor' rounds the quotient
    (its gradient is then zero, as in PyTorch)."""
    if out is not None:
        return _into_out(div(input, other, rounding_mode=rounding_mode), out, 'div', input,
                         other)
    if rounding_mode is None:
        return _div(input, other)
    if rounding_mode == 'floor':
        if _mode.enabled and builtins.any(isinstance(t, Tensor) and t._rg for t in (input, other)):
            return _ew.floor(_div(input, other))        # differentiable: zero gradient
        return floor_divide(input, other)
    if rounding_mode != 'trunc':
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found '{rounding_mode}'")
    a = input if isinstance(input, Tensor) else _ops._const(input, other)
    b = other if isinstance(other, Tensor) else _ops._const(other, a)
    if a._data.dtype.kind in 'iub' and b._data.dtype.kind in 'iub':
        _no_integer_zero(b._data)
        q = np.trunc(np.true_divide(a._data, b._data))
        # PyTorch's promotion (an int32 tensor and a Python int stay int32)
        return _leaf(q.astype(_dtypes.result_type(
            *(x._data if isinstance(x, Tensor) else x for x in (input, other)))))
    return _ew.trunc(_div(a, b))


def _no_integer_zero(bd):
    if np.any(np.asarray(bd) == 0):
        raise RuntimeError('ZeroDivisionError')


_add = _either(_ops.add, _ops.radd, 'add')
_sub = _either(_ops.sub, _ops.rsub, 'sub')
_div = _either(_ops.div, _ops.rdiv, 'div')
subtract = sub
mul = _either(_ops.mul, _ops.rmul, 'mul')
multiply = mul
divide = div
true_divide = _div
maximum = _either(_ops.maximum, None, 'maximum')      # (no Python number first:
minimum = _either(_ops.minimum, None, 'minimum')      # PyTorch raises TypeError)
neg = _ops.neg
negative = _ops.neg
exp = _ops.exp
log = _ops.log
sqrt = _ops.sqrt
sin = _ops.sin
cos = _ops.cos
tanh = _ops.tanh
sigmoid = _ops.sigmoid
relu = _ops.relu
abs = _ops.abs_  # noqa: A001
mm = _ops.mm
t = _ops.t
transpose = _ops.transpose
permute = _ops.permute
reshape = _ops.reshape


def pow(a, b):  # noqa: A001
    if isinstance(a, Tensor):
        return _ops.pow_.method(a, b)
    return _ops.rpow(b, a)


def sum(a, dim=None, keepdim=False, dtype=None):  # noqa: A001
    return _ops.sum_(a, dim, keepdim, dtype)


def mean(a, dim=None, keepdim=False, dtype=None):
    return _ops.mean(a, dim, keepdim, dtype)


# ------------------------------------------------------------ Tensor methods
def _rtruediv(a, b):
    """``b / a`` for a number ``b``: PyTorch's ``a.reciprocal() * b``
    (``Tensor.__rdiv__``), so its values to the last bit (true division differs
    in the last place for about a third of float32 elements) and its nodes,
    MulBackward0 of ReciprocalBackward0.  ``tape.div(b, a)`` divides."""
    if isinstance(b, (builtins.int, builtins.float, np.integer, np.floating)) and \
            not isinstance(b, (builtins.bool, np.bool_)) and a._data.dtype.kind == 'f':
        return _ops.mul(_ew.reciprocal(a), b)
    return _ops.rdiv(a, b)


def _bind():
    T = Tensor
    o = _ops
    T.__add__, T.__radd__ = o.add, o.radd
    T.__sub__, T.__rsub__ = o.sub, o.rsub
    T.__mul__, T.__rmul__ = o.mul, o.rmul
    T.__truediv__, T.__rtruediv__ = o.div, _rtruediv
    T.__pow__, T.__rpow__ = o.pow_, o.rpow
    T.__matmul__ = o.matmul
    T.__rmatmul__ = lambda a, b: o.matmul(o._const(b, a), a)
    T.__neg__ = o.neg
    T.__abs__ = o.abs_
    T.__getitem__ = o.getitem
    T.add, T.sub = _with_alpha(o.add.method, add), _with_alpha(o.sub.method, sub)
    T.mul, T.div = o.mul.method, _with_rounding(o.div.method)
    T.subtract, T.multiply, T.divide, T.true_divide = T.sub, T.mul, T.div, o.div.method
    T.pow = o.pow_.method
    T.maximum, T.minimum = o.maximum.method, o.minimum.method
    T.neg, T.exp, T.log, T.sqrt = o.neg, o.exp, o.log, o.sqrt
    T.sin, T.cos, T.tanh, T.sigmoid, T.relu, T.abs = o.sin, o.cos, o.tanh, o.sigmoid, o.relu, o.abs_
    T.sum, T.mean = o.sum_, o.mean      # (a, dim=None, keepdim=False, dtype=None), bound as is
    T.mm, T.matmul = o.mm, o.matmul
    T.expand, T.expand_as = o.expand, o.expand_as
    T.view, T.reshape = o.view, o.reshape
    T.view_as = lambda a, other: o.view(a, other._data.shape)
    T.reshape_as = lambda a, other: o.reshape(a, other._data.shape)
    T.t, T.transpose, T.permute = o.t, o.transpose, o.permute
    T.T = property(lambda a: o.permute(a, *reversed(range(a._data.ndim))) if a._data.ndim > 1
                   else a)
    T.to = _to
    T.float = lambda a: o.to(a, np.float32)
    T.double = lambda a: o.to(a, np.float64)
    T.long = lambda a: o.to(a, np.int64)
    T.int = lambda a: o.to(a, np.int32)
    T.bool = lambda a: o.to(a, np.bool_)
    T.half = lambda a: o.to(a, np.float16)
    T.short = lambda a: o.to(a, np.int16)
    T.char = lambda a: o.to(a, np.int8)
    T.byte = lambda a: o.to(a, np.uint8)

    from ._tape import grad_mode, inplace_epoch
    # ndarray's own in-place operators: the ufunc with out=a, same_kind casting and
    # the same errors, ~0.1 us faster than the ufunc called with out= by keyword
    import operator
    ufuncs = {'add': operator.iadd, 'sub': operator.isub, 'mul': operator.imul,
              'div': operator.itruediv}

    def _inplace(name):
        ufunc = ufuncs[name]
        is_sub = name == 'sub'      # x.sub_(bool tensor) raises, on the general path

        def f(a, other=None, *, alpha=None):
            # fast path: an optimizer-style update outside the graph
            if a._tape is None and alpha is None and a._extra is None \
                    and not (a._rg and grad_mode.enabled):
                t = type(other)
                if t is Tensor and not (other._rg and grad_mode.enabled) and not (
                        is_sub and other._data.dtype == np.bool_):
                    od = other._data
                elif t is builtins.float or t is builtins.int:
                    od = other
                else:
                    return o.inplace(a, name, other, alpha)
                d = a._data
                if type(d) is np.ndarray:
                    try:
                        ufunc(d, od)            # d (op)= od, in place
                    except (ValueError, TypeError):
                        return o.inplace(a, name, other, alpha)   # raises the proper error
                    except RuntimeWarning as e:
                        # an inf or NaN under a user's error filter (tape/_fpwarn.py):
                        # NumPy raised after writing d, which is PyTorch's result
                        if not _fpwarn.fp_warning(e):
                            raise
                    box = a._vbox
                    if box is None:
                        a._vbox = [1]
                    else:
                        box[0] += 1
                    inplace_epoch[0] += 1
                    return a
            return o.inplace(a, name, other, alpha)
        f.__name__ = name + '_'
        return f
    T.add_, T.sub_, T.mul_, true_div_ = (_inplace(n) for n in ('add', 'sub', 'mul', 'div'))
    T.__iadd__, T.__isub__, T.__imul__, T.__itruediv__ = T.add_, T.sub_, T.mul_, true_div_

    def div_(a, other, *, rounding_mode=None):
        if rounding_mode is None:
            return true_div_(a, other)
        return o.inplace_apply(a, div, other, rounding_mode=rounding_mode)
    T.div_ = div_

    def zero_(a):
        d = a._data
        if a._tape is None and type(d) is np.ndarray and a._extra is None \
                and not (a._rg and grad_mode.enabled):
            d.fill(0)
            box = a._vbox
            if box is None:
                a._vbox = [1]
            else:
                box[0] += 1
            inplace_epoch[0] += 1
            return a
        return o.inplace(a, 'zero')
    T.zero_ = zero_
    def fill_(a, value):
        if isinstance(value, Tensor) and value._data.ndim != 0:
            raise RuntimeError('fill_ only supports 0-dimension value tensor but got tensor '
                               f'with {value._data.ndim} dimensions (fill_ on a tensor of '
                               f'shape {tuple(a._data.shape)}).')
        return o.inplace(a, 'fill', value)
    T.fill_ = fill_
    T.backward = _backward_method
    from ._hooks import register_hook, retain_grad
    T.register_hook = register_hook
    from ._hooks import register_post_accumulate_grad_hook
    T.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
    T.retain_grad = retain_grad
    T.retains_grad = property(lambda a: a._retains_grad())


def _with_alpha(method, function):
    """``x.add(y)``, and with ``alpha=`` as ``tape.add`` takes it."""
    def f(a, other, *, alpha=None):
        if alpha is None:
            return method(a, other)
        return function(a, other, alpha=alpha)
    f.__name__ = function.__name__
    return f


def _with_rounding(method):
    """``x.div(y)``, and with ``rounding_mode=`` as ``tape.div`` takes it."""
    def div_(a, other, *, rounding_mode=None):
        if rounding_mode is None:
            return method(a, other)
        return div(a, other, rounding_mode=rounding_mode)
    div_.__name__ = 'div'
    return div_


def _to(a, *args, dtype=None, non_blocking=False, copy=False, device=None, memory_format=None):
    """``Tensor.to(dtype)``, ``to(other)``, ``to(device[, dtype])``; ``copy=True``
    always gives new memory, as in PyTorch."""
    rest = []
    _check_device(device)
    for x in args:
        if isinstance(x, Tensor):
            dtype = x._data.dtype if dtype is None else dtype
        elif x is None:
            pass
        elif isinstance(x, (str, _tensor_device)):
            _check_device(x)                # a device: the CPU is the only one
        elif isinstance(x, builtins.bool):
            rest.append(x)                  # positional non_blocking, copy
        elif dtype is None:
            dtype = x
    if len(rest) > 1:
        copy = rest[1]
    out = _ops.to(a, a._data.dtype if dtype is None else dtype)
    if copy and out is a:
        out = a.clone()
    return out


_tensor_device = device


from .autograd.anomaly import _mode as _anomaly_mode  # noqa: E402  (per thread)


def _backward_method(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaf) into each leaf's ``.grad``; see ``tape.autograd.backward``."""
    if gradient is None and not create_graph and inputs is None and self._tape is not None \
            and self._data.size == 1 and not _anomaly_mode.enabled:
        _run_scalar(self, True if retain_graph else False)   # the usual loss.backward()
        return
    autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


_bind()
del _bind

# ------------------------------------------------- the wider op set (issue 3)
from . import _elementwise as _ew  # noqa: E402
from . import _indexing as _ix  # noqa: E402
from . import _linalg as _la  # noqa: E402
from . import _reductions as _red  # noqa: E402
from . import _shapes as _sh  # noqa: E402
from . import linalg, nn  # noqa: E402,F401
from ._jit import jit  # noqa: E402,F401
from . import serialization  # noqa: E402,F401
from .serialization import save, load  # noqa: E402,F401
from ._compile import compile  # noqa: E402,F401,A001  (torch.compile: runs eagerly)

rsqrt, exp2, expm1, log2, log10, log1p = _ew.rsqrt, _ew.exp2, _ew.expm1, _ew.log2, _ew.log10, _ew.log1p
tan, asin, acos, atan, sinh, cosh = _ew.tan, _ew.asin, _ew.acos, _ew.atan, _ew.sinh, _ew.cosh
arcsin, arccos, arctan = asin, acos, atan
erf, reciprocal, sign, floor, ceil, trunc = _ew.erf, _ew.reciprocal, _ew.sign, _ew.floor, _ew.ceil, _ew.trunc
round, square, silu = _ew.round, _ew.square, _ew.silu  # noqa: A001
erfc, erfinv, lgamma, digamma, polygamma = _ew.erfc, _ew.erfinv, _ew.lgamma, _ew.digamma, _ew.polygamma
clamp, clip, clamp_min, clamp_max = _ew.clamp, _ew.clamp, _ew.clamp_min, _ew.clamp_max
atan2 = arctan2 = _ew.atan2
def remainder(input, other, *, out=None):  # noqa: A002
    """Python's ``%``: the sign of the divisor."""
    if out is not None:
        return _into_out(remainder(input, other), out, 'remainder', input, other)
    if isinstance(input, Tensor):
        if input._data.dtype.kind in 'iub' and np.result_type(
                input._data, other._data if isinstance(other, Tensor) else other).kind in 'iub':
            _no_integer_zero(other._data if isinstance(other, Tensor) else other)
        return _ew.remainder(input, other)
    if isinstance(other, Tensor):
        return _rremainder(other, input)
    raise TypeError(f"remainder(): argument 'input' must be Tensor, not {type(input).__name__}")


def _rremainder(a, b):
    """``b % a`` for a number ``b``: an integer divisor of zero raises, as above."""
    if a._data.dtype.kind in 'iub' and isinstance(b, (builtins.int, np.integer)):
        _no_integer_zero(a._data)
    return _ew.rremainder(a, b)


def fmod(input, other, *, out=None):  # noqa: A002
    """C's ``fmod``: the sign of the dividend."""
    if out is not None:
        return _into_out(fmod(input, other), out, 'fmod', input, other)
    if input._data.dtype.kind in 'iub' and np.result_type(
            input._data, other._data if isinstance(other, Tensor) else other).kind in 'iub':
        _no_integer_zero(other._data if isinstance(other, Tensor) else other)
    return _ew.fmod(input, other)
where, masked_fill, nonzero = _ew.where, _ew.masked_fill, _ew.nonzero
eq, ne, lt, le, gt, ge = _ew.eq, _ew.ne, _ew.lt, _ew.le, _ew.gt, _ew.ge
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
logical_and, logical_or, logical_xor, logical_not = (
    _ew.logical_and, _ew.logical_or, _ew.logical_xor, _ew.logical_not)
isnan, isinf, isfinite, isclose, allclose, equal = (
    _ew.isnan, _ew.isinf, _ew.isfinite, _ew.isclose, _ew.allclose, _ew.equal)
prod, cumsum, cumprod, logsumexp = _red.prod, _red.cumsum, _red.cumprod, _red.logsumexp
max, min, amax, amin, argmax, argmin = (  # noqa: A001
    _red.max, _red.min, _red.amax, _red.amin, _red.argmax, _red.argmin)
var, std, var_mean, std_mean, norm = _red.var, _red.std, _red.var_mean, _red.std_mean, _red.norm
all, any, count_nonzero = _red.all, _red.any, _red.count_nonzero  # noqa: A001
flatten, unflatten, squeeze, unsqueeze = _sh.flatten, _sh.unflatten, _sh.squeeze, _sh.unsqueeze
movedim = moveaxis = _sh.movedim
swapaxes = swapdims = _sh.swapaxes
tile, flip, fliplr, flipud, narrow = _sh.tile, _sh.flip, _sh.fliplr, _sh.flipud, _sh.narrow
select = _sh.select
split, chunk, unbind = _sh.split, _sh.chunk, _sh.unbind
cat, concat, concatenate = _sh.cat, _sh.concat, _sh.concatenate
stack, hstack, vstack = _sh.stack, _sh.hstack, _sh.vstack
gather, scatter, scatter_add, index_select = _ix.gather, _ix.scatter, _ix.scatter_add, _ix.index_select
masked_select, take = _ix.masked_select, _ix.take
bmm, matmul, dot, mv, outer, ger, einsum = (
    _la.bmm, _la.matmul, _la.dot, _la.mv, _la.outer, _la.outer, _la.einsum)
inner = _la.inner


def softmax(input, dim, dtype=None):  # noqa: A002  (torch.softmax: dim is required)
    return nn.functional.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):  # noqa: A002
    return nn.functional.log_softmax(input, dim, dtype=dtype)


def repeat_interleave(a, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (an int), along ``dim`` (flattened if None);
    ``repeat_interleave(r)`` with one tensor repeats ``arange(len(r))`` by ``r``."""
    if repeats is None:
        a, repeats = _leaf(np.arange(a._data.size, dtype=np.int64)), a
    if not isinstance(repeats, Tensor) and repeats < 0:
        raise RuntimeError(f'repeat_interleave: Repeats must be non-negative, got {repeats}')
    if dim is None:
        a, dim = _ops.reshape(a, -1), 0
    d = a._data
    dim = _norm_dim(dim, d.ndim, 'repeat_interleave')
    if isinstance(repeats, Tensor):
        r = repeats._data
        if r.ndim > 1:
            raise RuntimeError(f'repeat_interleave: repeats must be 0-dim or 1-dim tensor '
                               f'(got shape {tuple(r.shape)})')
        if r.dtype not in (np.int32, np.int64):     # (PyTorch's kernel: int and long only)
            name = _ops._TORCH_DTYPE_NAMES.get(r.dtype.str[1:], str(r.dtype))
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for '
                                      f"'{name}'")
        if r.size != 1 and r.size != d.shape[dim]:
            raise RuntimeError(f'repeats must have the same size as input along dim, but got '
                               f'repeats.size(0) = {r.size} and input.size({dim}) = '
                               f'{d.shape[dim]} (input shape {tuple(d.shape)})')
        if r.size and r.min() < 0:
            raise RuntimeError('repeat_interleave: repeats can not be negative')
        r = r.reshape(-1) if r.size != 1 else builtins.int(r.reshape(-1)[0])
        idx = np.repeat(np.arange(d.shape[dim]), r)
    else:
        idx = np.repeat(np.arange(d.shape[dim]), builtins.int(repeats))
    return _ix.index_select(a, dim, idx)


class _FloorDivide(autograd.Function):
    """``//`` of a tensor that requires grad: its result requires grad too, and
    a backward that reaches it raises, as PyTorch's ``NotImplemented`` node does
    (``div(rounding_mode='floor')`` is the differentiable form, with zero gradient)."""

    @staticmethod
    def forward(ctx, a, b):
        return floor_divide(a, b)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError('derivative for aten::floor_divide is not implemented')


_FloorDivide._backward_name = 'NotImplemented'          # PyTorch's node name
autograd.function._register_node_class('NotImplemented')


def floor_divide(a, b):
    """``a // b`` rounded toward minus infinity, in PyTorch's result dtype.  Not
    differentiable, as in PyTorch: on a tensor that requires grad it records a
    node whose backward raises.  Integer division by zero raises, as in PyTorch."""
    if _mode.enabled and builtins.any(isinstance(t, Tensor) and t._rg for t in (a, b)):
        return _FloorDivide.apply(a, b)
    ad = a._data if isinstance(a, Tensor) else a
    bd = b._data if isinstance(b, Tensor) else b
    if np.result_type(ad, bd).kind in 'iub' and not isinstance(bd, builtins.float):
        _no_integer_zero(bd)
    with np.errstate(divide='ignore', invalid='ignore'):
        out = np.floor_divide(ad, bd)
    return _leaf(_dtypes.binary_result('floor_divide', ad, bd, np.asarray(out)))


class Generator:
    """A random generator for ``dropout(generator=...)`` (``torch.Generator``'s seeding)."""

    def __init__(self, device='cpu'):
        self._seed = builtins.int(np.random.SeedSequence().entropy % (2 ** 63))
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed):
        self._seed = builtins.int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        """Reseed from fresh entropy and return the seed."""
        self.manual_seed(np.random.SeedSequence().entropy % (2 ** 63))
        return self._seed

    def get_state(self):
        """This generator's state as a uint8 tensor (see ``get_rng_state``)."""
        return _rng_state_of(self._rng)

    def set_state(self, new_state):
        """Restore a state from ``get_state`` (or ``get_rng_state``)."""
        _load_rng_state(self._rng, new_state)
        return self


def _invert(a):
    # ~x: PyTorch's operator raises TypeError for a floating tensor
    # (tape.bitwise_not keeps its RuntimeError, as torch.bitwise_not)
    if a._data.dtype.kind in 'fc':
        raise TypeError('~ (operator.invert) is only implemented on integer and Boolean-type '
                        'tensors')
    return _ew.bitwise_not(a)


def _inplace_via_copy(fn):
    # x.op_(...): the out-of-place result copied into x (recorded like copy_)
    def f(a, *args, **kw):
        return _ops.inplace_apply(a, fn, *args, **kw)
    f.__name__ = fn.__name__ + '_'
    return f


def _bind_more():
    T = Tensor
    for name in ('rsqrt', 'exp2', 'expm1', 'log2', 'log10', 'log1p', 'tan', 'asin', 'acos',
                 'atan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'erf', 'erfc', 'erfinv',
                 'lgamma', 'digamma', 'reciprocal',
                 'sign', 'floor', 'ceil', 'trunc', 'round', 'square', 'clamp', 'clip',
                 'clamp_min', 'clamp_max', 'atan2', 'arctan2', 'remainder', 'fmod',
                 'masked_fill', 'nonzero', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'greater',
                 'greater_equal', 'less', 'less_equal', 'not_equal', 'logical_and',
                 'logical_or', 'logical_xor', 'logical_not', 'isnan', 'isinf', 'isfinite',
                 'isclose', 'allclose', 'equal', 'prod', 'cumsum', 'cumprod', 'logsumexp',
                 'max', 'min', 'amax', 'amin', 'argmax', 'argmin', 'var', 'std', 'norm', 'all',
                 'any', 'count_nonzero', 'flatten', 'unflatten', 'squeeze', 'unsqueeze',
                 'movedim', 'moveaxis', 'swapaxes', 'swapdims', 'narrow', 'split', 'chunk',
                 'select', 'unbind', 'fliplr', 'flipud', 'gather', 'scatter', 'scatter_add',
                 'index_select', 'masked_select', 'take', 'bmm', 'matmul', 'dot', 'mv',
                 'outer', 'ger', 'inner', 'softmax', 'log_softmax', 'repeat_interleave',
                 'floor_divide', 'unique', 'unique_consecutive'):
        setattr(T, name, globals()[name])
    T.silu = _ew.silu
    T.repeat = _sh.repeat
    T.tile = lambda a, *dims: _sh.tile(a, dims[0] if len(dims) == 1 else dims)
    T.flip = lambda a, *dims: _sh.flip(a, dims[0] if len(dims) == 1 else dims)
    T.where = lambda a, condition, other: _ew.where(condition, a, other)
    T.contiguous = _sh.contiguous
    T.__matmul__ = _la.matmul
    T.__rmatmul__ = lambda a, b: _la.matmul(_ops._const(b, a), a)
    def _operator(compare):
        # PyTorch's comparison operators take tensors, arrays and numbers; any
        # other operand (a list, a string) gives NotImplemented, so that
        # ``x == [1, 2]`` is False and ``x < [1, 2]`` a TypeError, as in PyTorch
        # (the functions, tape.eq(x, [1, 2]), still compare elementwise)
        def op(a, b):
            if isinstance(b, (Tensor, np.ndarray, np.generic, builtins.int, builtins.float,
                              builtins.complex)) or (b is None and compare in (_ew.eq, _ew.ne)):
                return compare(a, b)
            return NotImplemented
        op.__name__ = f'__{compare.__name__}__'
        return op
    T.__eq__, T.__ne__, T.__lt__ = _operator(_ew.eq), _operator(_ew.ne), _operator(_ew.lt)
    T.__le__, T.__gt__, T.__ge__ = _operator(_ew.le), _operator(_ew.gt), _operator(_ew.ge)
    T.__mod__, T.__rmod__ = remainder, _rremainder
    T.__pos__ = lambda a: a
    T.__floordiv__ = floor_divide
    T.__rfloordiv__ = lambda a, b: floor_divide(b, a)
    T.__and__ = T.__rand__ = _ew.bitwise_and
    T.__or__ = T.__ror__ = _ew.bitwise_or
    T.__xor__ = T.__rxor__ = _ew.bitwise_xor
    T.__invert__ = _invert
    T.__setitem__ = _ix.setitem
    T.__hash__ = lambda a: id(a)       # defining __eq__ again must not drop hashing
    T.masked_fill_ = _inplace_via_copy(_ew.masked_fill)
    T.clamp_ = T.clip_ = _inplace_via_copy(_ew.clamp)
    T.scatter_ = _inplace_via_copy(_ix.scatter)
    T.scatter_add_ = _inplace_via_copy(_ix.scatter_add)


_bind_more()
del _bind_more

# ------------------------------------------- composite ops (tape/_composites.py)
from . import _composites as _cp  # noqa: E402
globals().update(_cp.FUNCTIONS)
for _name, _fn in _cp.METHODS.items():
    setattr(Tensor, _name, _fn)
matrix_power = linalg.matrix_power
linalg.multi_dot = _cp.multi_dot        # tape/linalg.py is another module's; bound here
Tensor.matrix_power = linalg.matrix_power
linalg.cross = _cp._linalg_cross
from . import special  # noqa: E402,F401
special.sinc = _cp.sinc

# storages (tape/_storage.py), the legacy constructor and qr, the cholesky methods
from . import _storage  # noqa: E402
from ._storage import UntypedStorage, TypedStorage  # noqa: E402,F401
Tensor.untyped_storage = _storage.untyped_storage
Tensor.storage = _storage.storage


def _legacy_new(self, *args):
    """``x.new(...)``: PyTorch's legacy constructor, of ``x``'s dtype: ``new(2, 3)``
    (a zero-filled tensor: PyTorch's is uninitialised), ``new(sequence)``,
    ``new(Size)``, ``new()`` (empty)."""
    dt = self.dtype
    if not args:
        return zeros(0, dtype=dt)
    if len(args) == 1 and not isinstance(args[0], (builtins.int, Size)):
        data = args[0]
        if isinstance(data, Tensor) and data.dtype != dt:
            raise TypeError(f'expected {dt} tensor (got {data.dtype} tensor)')
        return _finish(_infer(data, dt), dt, False)
    shape = tuple(args[0]) if isinstance(args[0], Size) else args
    bad = [n for n in shape if not isinstance(n, builtins.int)]
    if bad:
        raise TypeError(f"new(): argument 'size' must be tuple of ints, but found element of "
                        f"type {type(bad[0]).__name__}")
    return zeros(*shape, dtype=dt)


def qr(input, some=True, *, out=None):  # noqa: A002
    """``torch.qr`` (deprecated there for ``linalg.qr``): reduced Q, R unless
    ``some`` is False."""
    r = _QR(*linalg.qr(input, 'reduced' if some else 'complete'))
    return r if out is None else _into_out(r, out, 'qr', input)


_QR = return_types.make('qr', ['Q', 'R'])


Tensor.new = _legacy_new


def _view_base(self):
    """``x._base``: the tensor a view was made from (the root of a chain of
    views), None for a tensor that is not a view (``expand`` gives a copy in tape)."""
    from ._views import view_source
    src = view_source(self)
    if src is None:
        return None
    base = src[0]
    while True:
        up = view_source(base)
        if up is None:
            return base
        base = up[0]


Tensor._base = property(_view_base)
Tensor._is_view = lambda self: _view_base(self) is not None
Tensor.qr = lambda self, some=True: qr(self, some)
Tensor.cholesky_solve = lambda self, input2, upper=False: cholesky_solve(self, input2, upper)
Tensor.cholesky_inverse = lambda self, upper=False: cholesky_inverse(self, upper)
vmap = func.vmap
from . import optim  # noqa: E402,F401
from . import utils  # noqa: E402,F401


def _module_inplace(name):
    method = getattr(Tensor, name)

    def f(input, *args, **kwargs):  # noqa: A002
        return method(input, *args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f'``tape.{name}(t, ...)``: ``t.{name}(...)``, as PyTorch\'s module-level in-place op.'
    return f


# torch.sin_(t) and the other module-level in-place ops: the Tensor methods
for _name in ('abs_', 'acos_', 'addmv_', 'arccos_', 'arcsin_', 'arctan_', 'asin_', 'atan_',
              'ceil_', 'clamp_', 'clamp_max_', 'clamp_min_', 'clip_', 'cos_', 'cosh_', 'detach_',
              'erf_', 'exp2_', 'exp_', 'expm1_', 'fill_', 'floor_', 'frac_', 'log10_', 'log1p_',
              'log2_', 'log_', 'logit_', 'nan_to_num_', 'neg_', 'negative_', 'reciprocal_',
              'relu_', 'round_', 'rsqrt_', 'sigmoid_', 'sin_', 'sinh_', 'sqrt_', 'square_',
              'tan_', 'tanh_', 'trunc_', 'xlogy_', 'zero_', 'deg2rad_', 'rad2deg_', 'sinc_',
              'index_put_'):
    if hasattr(Tensor, _name) and _name not in globals():
        globals()[_name] = _module_inplace(_name)
del _name


class _NoCuda:
    """``torch.cuda`` as seen on a machine without a GPU: training scripts ask
    ``tape.cuda.is_available()`` to pick their device."""

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def device_count():
        return 0

    @staticmethod
    def manual_seed(seed):
        """Nothing to seed: there is no GPU generator."""

    manual_seed_all = manual_seed


cuda = _NoCuda()


# ------------------------------------------------- more of torch's namespace
int = int32  # noqa: A001  (torch.int; builtins.int is used below)
pinverse, matrix_exp = linalg.pinverse, linalg.matrix_exp
Tensor.pinverse, Tensor.matrix_exp = linalg.pinverse, linalg.matrix_exp
scatter_reduce = _ix.scatter_reduce
Tensor.scatter_reduce = _ix.scatter_reduce
Tensor.scatter_reduce_ = _inplace_via_copy(_ix.scatter_reduce)


def heaviside(input, values):  # noqa: A002
    """The step function: 0 below zero, 1 above, ``values`` at zero.  Not
    differentiable, as in PyTorch (its backward raises).

    >>> import tape
    >>> tape.heaviside(tape.tensor([-1.0, 0.0, 2.0]), tape.tensor(0.5))
    tensor([0.0000, 0.5000, 1.0000])
    """
    a = np.asarray(input._data)
    v = np.asarray(values._data if isinstance(values, Tensor) else values)
    if isinstance(values, Tensor) and v.dtype != a.dtype:
        raise RuntimeError('heaviside is not yet implemented for tensors with different dtypes')
    out = np.where(a == 0, v, (a > 0).astype(a.dtype)).astype(a.dtype, copy=False)
    return _no_derivative((input, values), np.ascontiguousarray(out), 'NotImplemented',
                          'derivative for aten::heaviside is not implemented', RuntimeError)


Tensor.heaviside = heaviside


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The length-``r`` combinations of a 1-D tensor's elements, one per row
    (``itertools.combinations``); differentiable (each element is picked).

    >>> import tape
    >>> tape.combinations(tape.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    import itertools
    d = np.asarray(input._data)
    if d.ndim != 1:
        raise RuntimeError(f'Expect a 1D vector, but got shape {list(d.shape)}')
    if r < 0:
        raise RuntimeError(f'Expect a non-negative number, but got {r}')
    if r == 0:
        return _leaf(np.zeros((0,), d.dtype))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    pos = np.array(list(pick(range(d.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return _ix.take(input, pos)


def promote_types(type1, type2):
    """``torch.promote_types``: the dtype both promote to (bool < integer < float,
    NumPy's rule within a category).

    >>> import tape
    >>> tape.promote_types(tape.int32, tape.float32)
    dtype('float32')
    """
    return _dtypes.promote_types(type1, type2)


def result_type(tensor1, tensor2):
    """``torch.result_type``: the dtype of an arithmetic op's result, with PyTorch's
    tiers (dimensioned tensors, then 0-d tensors, then Python numbers).

    >>> import tape
    >>> tape.result_type(tape.tensor([1, 2]), 1.0)
    dtype('float32')
    """
    ops = [x._data if isinstance(x, Tensor) else x for x in (tensor1, tensor2)]
    return _dtypes.result_type(*ops)


def can_cast(from_, to):
    """``torch.can_cast``: False only from a higher category to a lower one
    (float to integer, anything but bool to bool).

    >>> import tape
    >>> tape.can_cast(tape.float64, tape.int32)
    False
    """
    return _dtypes.category(np.dtype(from_)) <= _dtypes.category(np.dtype(to))


# ------------------------------------------------------- the default generator
_seed = [builtins.int(np.random.SeedSequence().entropy % (2 ** 63))]
_rng[0] = np.random.default_rng(_seed[0])


def manual_seed(seed):
    """Seed the generator behind ``rand``, ``randn``, ``randint`` and friends."""
    _seed[0] = builtins.int(seed)
    _rng[0] = np.random.default_rng(_seed[0])
    return _rng[0]




def seed():
    """Seed the default generator from fresh entropy and return the seed."""
    s = builtins.int(np.random.SeedSequence().entropy % (2 ** 63))
    manual_seed(s)
    return s


def initial_seed():
    """The seed the default generator was last seeded with."""
    return _seed[0]


def get_rng_state():
    """The default generator's state as a uint8 tensor (the bit generator's state
    as JSON bytes: tape's generator is NumPy's, so the bytes are not PyTorch's)."""
    return _rng_state_of(_rng[0])


def set_rng_state(new_state):
    """Restore a state from ``get_rng_state``."""
    _load_rng_state(_rng[0], new_state)


def _rng_state_of(rng):
    import json
    raw = json.dumps(rng.bit_generator.state).encode()
    return _leaf(np.frombuffer(raw, np.uint8).copy())


def _load_rng_state(rng, new_state):
    import json
    d = np.asarray(new_state._data if isinstance(new_state, Tensor) else new_state)
    if d.dtype != np.uint8 or d.ndim != 1:
        raise TypeError(f'set_rng_state: expected a 1-D uint8 tensor (got {d.dtype}, '
                        f'shape {tuple(d.shape)})')
    try:
        state = json.loads(d.tobytes().decode())
        rng.bit_generator.state = state
    except (ValueError, TypeError, KeyError) as e:
        raise RuntimeError(f'set_rng_state: not a state from tape.get_rng_state ({e})') from None


_threads = [1]


def get_num_threads():
    """The intra-op thread count set by ``set_num_threads`` (1 unless set)."""
    return _threads[0]


def set_num_threads(n):
    """Record the intra-op thread count (tape's kernels choose their own threads)."""
    if not isinstance(n, (builtins.int, np.integer)) or isinstance(n, builtins.bool) or n < 1:
        raise RuntimeError(f'set_num_threads expects a positive integer (got {n!r})')
    _threads[0] = builtins.int(n)


# ------------------------------------------------------------- printing
_PRINT_PROFILES = {'default': (4, 1000, 3, 80), 'short': (2, 1000, 2, 80),
                   'full': (4, builtins.float('inf'), 3, 80)}


def set_anomaly_enabled(enabled, check_nan=True):
    """``torch.set_anomaly_enabled``: turn anomaly mode on or off (see
    ``tape.autograd.set_detect_anomaly``, its context-manager form)."""
    from .autograd.anomaly import _set
    _set(enabled, check_nan)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """``torch.set_printoptions``: how tensors print (digits, summarising above
    ``threshold`` elements with ``edgeitems`` per edge, line width, scientific
    notation forced on or off; ``sci_mode=None`` chooses per tensor).

    >>> import tape
    >>> tape.set_printoptions(precision=2)
    >>> tape.tensor([1.2345, 2.0])
    tensor([1.23, 2.00])
    >>> tape.set_printoptions(profile='default')
    """
    from ._tensor import PRINT_OPTS
    if profile is not None:
        if profile not in _PRINT_PROFILES:
            raise ValueError(f'set_printoptions: unknown profile {profile!r}')
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = _PRINT_PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode          # always set, as PyTorch does


# ----------------------------------------------------- legacy constructors
class _LegacyType(type):
    """``torch.FloatTensor`` and friends: ``FloatTensor([1, 2])`` (data),
    ``FloatTensor(2, 3)`` (a new uninitialised tensor of that shape), and
    ``isinstance(x, FloatTensor)`` true for a tensor of that dtype."""

    def __call__(cls, *args, device=None):
        dt = cls._legacy_dtype
        if not args:
            return _leaf(np.empty((0,), dt))
        if builtins.all(isinstance(a, (builtins.int, np.integer))
                        and not isinstance(a, builtins.bool) for a in args) \
                or (len(args) == 1 and isinstance(args[0], Size)):
            return empty(*args, dtype=dt)
        if len(args) != 1:
            raise TypeError(f'{cls.__name__}(): expected a sequence of data or a size')
        data = args[0]
        if isinstance(data, Tensor):
            if data._data.dtype != dt:
                raise TypeError(f'expected {cls.__name__[:-6]} tensor (got '
                                f'{data._data.dtype} tensor)')
            return data
        return tensor(data, dtype=dt)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj._data.dtype == cls._legacy_dtype


def _legacy(name, dt):
    return _LegacyType(name, (), {'_legacy_dtype': np.dtype(dt), '__module__': 'tape',
                                  '__doc__': f'``torch.{name}``: tensors of {np.dtype(dt)}.'})


FloatTensor = _legacy('FloatTensor', np.float32)
DoubleTensor = _legacy('DoubleTensor', np.float64)
HalfTensor = _legacy('HalfTensor', np.float16)
LongTensor = _legacy('LongTensor', np.int64)
IntTensor = _legacy('IntTensor', np.int32)
ShortTensor = _legacy('ShortTensor', np.int16)
CharTensor = _legacy('CharTensor', np.int8)
ByteTensor = _legacy('ByteTensor', np.uint8)
BoolTensor = _legacy('BoolTensor', np.bool_)

from ._functions_more import _install as _install_more; _install_more(globals()); del _install_more  # noqa: E402,E702  (tape/_functions_more.py)
from ._api_more import _install as _install_api; _install_api(globals()); del _install_api  # noqa: E402,E702  (tape/_api_more.py)
from ._out import install as _install_out; _install_out(globals()); del _install_out  # noqa: E402,E702  (tape/_out.py: out=)
_getattr_before = __getattr__  # noqa: F821  (set by _functions_more._install: tape.range)


def __getattr__(name):
    # tape.distributions is imported on first use: ~30 ms of import time that
    # most programs do not need
    if name == 'distributions':
        import importlib
        return importlib.import_module('.distributions', __name__)
    return _getattr_before(name)


from . import testing, random, backends, amp  # noqa: E402,F401  (tape/testing.py, random.py, backends/, amp/)
from .amp import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: E402,F401


from ._keywords import install as _install_keywords; _install_keywords(globals(), Tensor); del _install_keywords  # noqa: E402,E702  (tape/_keywords.py)
