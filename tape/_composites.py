"""Ops written in the primitives (no rule of their own): their gradients come
from the records of the primitives they are made of.

``FUNCTIONS`` are exported as ``tape.<name>``, ``METHODS`` bound as
``Tensor.<name>`` (see the end of tape/__init__.py).

The building blocks:

* element pickers (``diagonal``, ``roll``, ``sort``, ``topk``, ``median``,
  ``cummax``...) compute, in NumPy, the flat position in the input of each
  output element and record one take (``index``) record, so the gradient of
  each output element goes back to the element it came from;
* element placers (``diag`` of a vector, ``index_add``) record a put record
  (the adjoint of a take);
* masks that depend on values (``nan_to_num``, ``nansum``) are where records,
  which cut the gradient where the mask replaced the input (``tril``/``triu``,
  whose mask is the shape's, take the kept elements and put them back);
* the rest (``lerp``, ``addmm``, ``cdist``, ``kron``, ``tensordot``...) are
  arithmetic of the existing ops, so create_graph differentiates them again.

An op whose choice of elements depends on the values (sorting, NaN masks)
says so with ``note_value_use``, so ``tape.jit`` runs a function using it
eagerly instead of replaying a stale choice.

>>> import tape
>>> x = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> tape.trace(x)
tensor(5., grad_fn=<TraceBackward0>)
"""
import builtins

import math
import warnings

import numpy as np

from . import _elementwise as _ew
from . import _linalg as _la
from . import _ops
from . import _reductions as _red
from . import _shapes as _sh
from . import _views
from . import _dtypes
from ._composite_nodes import name_result, node_named
from ._dtypes import default_dtype
from ._reductions import _flat_index, take_as
from .return_types import make as _return_type, values_indices
from ._tape import grad_mode, note_value_use
from ._tensor import Tensor, _index_arg, _leaf, _norm_dim

FUNCTIONS = {}
METHODS = {}


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like)


def _np(a):
    return np.asarray(a._data)


def _pick(a, pos, unique=False):
    """``a.flatten()[pos]`` in ``pos``'s shape, recorded as one take (index) record;
    ``unique``: no position repeats (a sort's, a roll's), so a large record's
    backward scatters instead of summing with a bincount (see take_as)."""
    pos = np.asarray(pos, dtype=np.int64)
    return take_as('index', a, _np(a).reshape(-1)[pos], pos, unique=unique)


def _pick_along(a, idx, dim, unique=False):
    """The elements of ``a`` at indices ``idx`` along ``dim`` (take_along_axis)."""
    return _pick(a, np.take_along_axis(_flat_index(_np(a).shape), idx, axis=dim), unique)


def _torch_dtype_name(dt):
    return _ops._TORCH_DTYPE_NAMES.get(np.dtype(dt).str[1:], str(dt))


def _not_for(a, kinds, kernel):
    """PyTorch's NotImplementedError for a kernel that has no ``a``'s dtype."""
    dt = _np(a).dtype
    if dt.kind in kinds:
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_torch_dtype_name(dt)}'")


def _scaled(x, c):
    """``c * x`` where ``c == 0`` ignores x's values (NaN too) but keeps its gradient
    slot, as PyTorch's beta=0 (a zero gradient)."""
    if c == 1:
        return x
    if c == 0:
        return _ew.where(np.zeros((), bool), x, 0)
    return _ops.mul(x, c)


# ------------------------------------------------------- triangles, diagonals
def _triangle(npf, opname):
    def f(input, diagonal=0):  # noqa: A002  (torch's argument names)
        a = _t(input)
        d = _np(a)
        if d.ndim < 2:
            raise RuntimeError(f'{opname}: input tensor must have at least 2 dimensions '
                               f'(got shape {tuple(d.shape)})')
        diagonal = _index_arg(diagonal, opname, 'diagonal')
        keep = np.broadcast_to(npf(np.ones(d.shape[-2:], bool), diagonal), d.shape)
        if not (a._rg and grad_mode.enabled):
            return _leaf(np.where(keep, d, np.zeros((), d.dtype)))
        # the kept elements taken and put back into zeros: exact zeros (even where the
        # input is inf or NaN) and records that tape.jit replays
        pos = _flat_index(d.shape)[keep]
        return _ops.reshape(_ops.put_flat(_pick(a, pos), pos, d.size), d.shape)
    f.__name__ = opname
    f.__doc__ = (f'The {"lower" if opname == "tril" else "upper"} triangle of the last two '
                 f'dims (others zero); ``diagonal`` shifts the edge up (> 0) or down (< 0).')
    return f


tril = node_named('TrilBackward0', 'input')(_triangle(np.tril, 'tril'))
triu = node_named('TriuBackward0', 'input')(_triangle(np.triu, 'triu'))


def _diagonal_of(offset, d1, d2):
    """The function that makes the ``offset`` diagonal of the (d1, d2) planes of an
    array as a writeable view (NumPy's ``diagonal`` is read-only): the planes'
    dims moved last, the offset sliced off, then one dim whose stride steps a
    row and a column at once."""
    def fn(m):
        m = np.moveaxis(m, (d1, d2), (-2, -1))[..., max(-offset, 0):, max(offset, 0):]
        n = min(m.shape[-2], m.shape[-1])
        return np.lib.stride_tricks.as_strided(
            m, m.shape[:-2] + (n,), m.strides[:-2] + (m.strides[-2] + m.strides[-1],))
    return fn


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """The diagonal of the (dim1, dim2) planes, as a new last dim: a view, as in
    PyTorch, so ``a.diagonal().add_(eps)`` changes ``a``.

    >>> import tape
    >>> tape.arange(9.0).reshape(3, 3).diagonal(1)
    tensor([1., 5.])
    """
    a = _t(input)
    d = _np(a)
    # the dims first: PyTorch's IndexError for a 0-d or 1-d input
    d1 = _norm_dim(dim1, d.ndim, 'diagonal')
    d2 = _norm_dim(dim2, d.ndim, 'diagonal')
    if d.ndim < 2:
        raise RuntimeError(f'diagonal: expected a tensor with at least 2 dimensions, got '
                           f'{d.ndim} (shape {tuple(d.shape)})')
    if d1 == d2:
        raise RuntimeError(f'diagonal dimensions cannot be identical {dim1}, {dim2}')
    fn = _diagonal_of(int(offset), d1, d2)
    out = fn(d) if type(d) is np.ndarray else np.diagonal(d, int(offset), d1, d2).copy()
    return _views.as_view(_ops._take_record(a, out, 'diagonal', fn), a, fn)


_diagonal = diagonal        # diag's argument named diagonal hides the function


@node_named(lambda i: 'DiagEmbedBackward0' if np.ndim(_np(_t(i))) == 1 else None, 'input')
def diag(input, diagonal=0):  # noqa: A002
    """A vector's elements on the ``diagonal``-th diagonal of a square matrix, or a
    matrix's ``diagonal``-th diagonal as a vector.

    >>> import tape
    >>> tape.diag(tape.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    a = _t(input)
    d = _np(a)
    k = int(diagonal)
    if d.ndim == 2:
        return _diagonal(a, k)
    if d.ndim != 1:
        raise RuntimeError(f'diag(): Supports 1D or 2D tensors. Got {d.ndim}D')
    m = d.shape[0]
    n = m + builtins.abs(k)
    rows = np.arange(m) + builtins.max(-k, 0)
    cols = np.arange(m) + builtins.max(k, 0)
    if a._rg:
        return _ops.reshape(_ops.put_flat(a, rows * n + cols, n * n), (n, n))
    out = np.zeros((n, n), d.dtype)
    out[rows, cols] = d
    return _leaf(out)


def diagflat(input, offset=0):  # noqa: A002
    """``diag`` of the flattened input."""
    offset = _index_arg(offset, 'diagflat', 'offset')
    return diag(_ops.reshape(_t(input), -1), offset)


@node_named('DiagEmbedBackward0', 'input')
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Each last-dim vector of ``input`` put on the ``offset`` diagonal of the
    (dim1, dim2) planes of a new tensor (the inverse of ``diagonal``)."""
    a = _t(input)
    d = _np(a)
    m = d.shape[-1] if d.ndim else 1
    n = m + builtins.abs(int(offset))
    ndim = d.ndim + 1
    d1 = _norm_dim(dim1, ndim, 'diag_embed')
    d2 = _norm_dim(dim2, ndim, 'diag_embed')
    if d1 == d2:
        raise RuntimeError(f'diagonal dimensions cannot be identical {dim1}, {dim2}')
    batch = d.shape[:-1]
    shape = [None] * ndim
    shape[d1] = shape[d2] = n
    rest = iter(batch)
    shape = tuple(next(rest) if s is None else s for s in shape)
    # positions in the result of its offset diagonal, laid out as diagonal() gives them
    pos = np.diagonal(_flat_index(shape), int(offset), d1, d2)
    size = int(math.prod(shape))
    if a._rg:
        return _ops.reshape(_ops.put_flat(_ops.reshape(a, pos.shape), pos.reshape(-1), size),
                            shape)
    out = np.zeros(size, d.dtype)
    out[pos.reshape(-1)] = d.reshape(-1)
    return _leaf(out.reshape(shape))


@node_named('TraceBackward0', 'input')
def trace(input):  # noqa: A002
    """The sum of a matrix's diagonal.

    >>> import tape
    >>> tape.trace(tape.tensor([[1, 2], [3, 4]]))
    tensor(5)
    """
    a = _t(input)
    _not_for(a, 'b', 'trace')
    if _np(a).ndim != 2:
        raise RuntimeError(f'trace: expected a matrix, but got tensor with dim {_np(a).ndim}')
    return _ops.sum_(diagonal(a))


# ---------------------------------------------------------- sorting and order
def _sort_index(d, dim, descending):
    """Stable argsort along ``dim``; NaN is the largest value, as in PyTorch."""
    if not descending:
        return np.argsort(d, axis=dim, kind='stable')
    # stable and descending: sort the reversed array ascending and reverse back
    n = d.shape[dim]
    rev = np.flip(d, axis=dim)
    return (n - 1) - np.flip(np.argsort(rev, axis=dim, kind='stable'), axis=dim)


@node_named('SortBackward0', 'input', output=0)
def sort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """(values, indices) of ``input`` sorted along ``dim`` (always stable; NaN last,
    or first when descending, as in PyTorch).

    >>> import tape
    >>> tape.sort(tape.tensor([3.0, 1.0, 2.0]), descending=True)
    tape.return_types.sort(
    values=tensor([3., 2., 1.]),
    indices=tensor([0, 2, 1]))
    """
    a = _t(input)
    d = _np(a)
    note_value_use('sort')
    if d.ndim == 0:
        _norm_dim(dim, 0, 'sort')
        return values_indices('sort', _ops.clone(a) if a._rg else _leaf(d), _leaf(np.int64(0)))
    dim = _norm_dim(dim, d.ndim, 'sort')
    idx = _sort_index(d, dim, descending)
    return values_indices('sort', _pick_along(a, idx, dim, unique=True),
                          _leaf(idx.astype(np.int64)))


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """The indices that sort ``input`` along ``dim`` (see ``sort``)."""
    return sort(input, dim, descending, stable).indices


def msort(input):  # noqa: A002
    """``input`` sorted along its first dim."""
    return sort(input, 0).values


@node_named('TopkBackward0', 'input', output=0)
def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """(values, indices) of the ``k`` largest (or smallest) elements along ``dim``.

    >>> import tape
    >>> tape.tensor([1.0, 5.0, 3.0]).topk(2)
    tape.return_types.topk(
    values=tensor([5., 3.]),
    indices=tensor([1, 2]))
    """
    a = _t(input)
    d = _np(a)
    note_value_use('topk')
    if d.dtype.kind == 'b':
        raise RuntimeError('topk does not support bool dtypes on CPU')
    k = int(k)
    dim = _norm_dim(dim, d.ndim, 'topk')
    n = d.shape[dim] if d.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f'topk: selected index k out of range (k={k}, dim {dim} of shape '
                           f'{tuple(d.shape)})')
    if d.ndim == 0:
        return sort(a)              # (k=0 too: PyTorch gives the 0-d element)
    idx = _topk_index(d, k, dim, largest)
    if idx is None:
        idx = np.take(_sort_index(d, dim, largest), np.arange(k), axis=dim)
    return values_indices('topk', _pick_along(a, idx, dim, unique=True),
                          _leaf(idx.astype(np.int64)))


def _topk_index(d, k, dim, largest):
    """``_sort_index``'s first ``k`` along ``dim`` without sorting whole rows
    (compiler.kernels.topk_rows: a full stable argsort of a 512-wide row cost
    12x PyTorch's topk), or None where that kernel does not apply (a NaN, a
    small input, k a large part of the row): the caller then sorts."""
    n = d.shape[dim]
    if d.dtype.kind not in 'fiu' or not 0 < k <= max(n // 8, 16) or d.size < 4096:
        return None
    flat = np.ascontiguousarray(np.moveaxis(d, dim, -1)).reshape(-1, n)
    if d.dtype.kind == 'f' and np.isnan(flat).any():
        return None
    from compiler.kernels import topk_rows
    idx = topk_rows(flat, k, bool(largest)).reshape(np.moveaxis(d, dim, -1).shape[:-1] + (k,))
    return np.moveaxis(idx, -1, dim)


def _zero_dim_pick(a, d, dim, opname):
    """(values, indices) of a 0-d input along ``dim`` (0 or -1): itself, index 0."""
    _norm_dim(dim, 0, opname)
    return values_indices(opname, _ops.clone(a) if a._rg else _leaf(d), _leaf(np.int64(0)))


def _select_kth(a, dim, keepdim, kth, opname):
    """(values, indices) at the sorted position ``kth(sorted_row, row)`` along dim,
    where kth gives, per row (keepdim shape), the position in the ascending order."""
    d = _np(a)
    note_value_use(opname)
    if d.ndim == 0:
        return _zero_dim_pick(a, d, dim, opname)
    dim = _norm_dim(dim, d.ndim, opname)
    if d.shape[dim] == 0:
        raise IndexError(f'{opname}(): Expected reduction dim {dim} to have non-zero size '
                         f'(input of shape {tuple(d.shape)})')
    order = _sort_index(d, dim, False)
    pos = kth(np.take_along_axis(d, order, axis=dim), dim)
    idx = np.take_along_axis(order, pos, axis=dim)
    if not keepdim:
        idx = np.squeeze(idx, axis=dim)
        flat = np.squeeze(np.take_along_axis(_flat_index(d.shape), np.expand_dims(
            idx, dim), axis=dim), axis=dim)
    else:
        flat = np.take_along_axis(_flat_index(d.shape), idx, axis=dim)
    return values_indices(opname, _pick(a, flat, unique=True), _leaf(idx.astype(np.int64)))


@node_named('KthvalueBackward0', 'input', output=0)
def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """(values, indices) of the ``k``-th smallest element (1-based) along ``dim``.

    >>> import tape
    >>> tape.kthvalue(tape.tensor([3.0, 1.0, 2.0]), 2)
    tape.return_types.kthvalue(
    values=tensor(2.),
    indices=tensor(2))
    """
    a = _t(input)
    d = _np(a)
    _not_for(a, 'b', 'kthvalue_cpu')
    n = d.shape[_norm_dim(dim, d.ndim, 'kthvalue')] if d.ndim else 1
    if d.ndim and n == 0:
        raise IndexError(f'kthvalue(): Expected reduction dim {dim} to have non-zero size.')
    if not 1 <= int(k) <= n:
        raise RuntimeError(f'kthvalue(): selected number k out of range for dimension '
                           f'{dim} (k={k}, shape {tuple(d.shape)})')
    shape_of = lambda s, dim: np.full(s.shape[:dim] + (1,) + s.shape[dim + 1:],  # noqa: E731
                                      int(k) - 1, np.int64)
    return _select_kth(a, dim, keepdim, shape_of, 'kthvalue')


def _lower_median(skip_nan):
    def kth(s, dim):
        nan = np.isnan(s).sum(axis=dim, keepdims=True) if s.dtype.kind == 'f' else \
            np.zeros(s.shape[:dim] + (1,) + s.shape[dim + 1:], np.int64)
        n = s.shape[dim]
        if skip_nan:           # the lower median of the numbers (the first NaN if none)
            return np.maximum((n - nan - 1) // 2, 0)
        # a NaN makes the median NaN: the first NaN (NaNs sort last, stably)
        return np.where(nan > 0, n - nan, (n - 1) // 2)
    return kth


def _median(opname, skip_nan):
    def f(input, dim=None, keepdim=False):  # noqa: A002
        a = _t(input)
        _not_for(a, 'b', 'median_cpu' if dim is None else 'median_out')
        if dim is None:
            d = _np(a)
            if d.size == 0:
                note_value_use(opname)
                if a._rg and grad_mode.enabled:    # NaN, its gradient (none) as PyTorch's
                    return _ops.add(_ops.sum_(a), float('nan'))
                return _leaf(np.array(np.nan, d.dtype)[()])
            flat = _ops.reshape(a, -1)
            if not (a._rg and grad_mode.enabled) or d.dtype.kind != 'f':
                return _select_kth(flat, 0, False, _lower_median(skip_nan), opname).values
            # of all elements: PyTorch shares the gradient evenly among the
            # elements equal to the median (along a dim it picks one index)
            from ._grad_mode import no_grad
            with no_grad():
                value = _select_kth(flat, 0, False, _lower_median(skip_nan), opname).values
            return _red._evenly(a, None, False,
                                np.asarray(value._data).reshape((1,) * d.ndim),
                                rule=opname + '_even')     # MedianBackward0
        return _select_kth(a, dim, keepdim, _lower_median(skip_nan), opname)
    f.__name__ = opname
    return f


median = node_named(lambda i, dim: ('MedianBackward0' if dim is None else 'MedianBackward1', 1),
                    'input', 'dim', output='values')(_median('median', False))
median.__doc__ = """The lower median (of all elements, or (values, indices) along ``dim``);
NaN where the numbers include a NaN.

>>> import tape
>>> tape.tensor([4.0, 1.0, 3.0, 2.0]).median()
tensor(2.)
"""
nanmedian = node_named(
    lambda i, dim: ('NanmedianBackward0' if dim is None else 'NanmedianBackward1', 1),
    'input', 'dim', output='values')(_median('nanmedian', True))
nanmedian.__doc__ = 'The lower median of the numbers that are not NaN (see ``median``).'


def _cumulative(opname, better):
    def f(input, dim):  # noqa: A002
        a = _t(input)
        d = _np(a)
        note_value_use(opname)
        if d.ndim == 0:
            return _zero_dim_pick(a, d, dim, opname)
        dim = _norm_dim(dim, d.ndim, opname)
        x = np.moveaxis(d, dim, 0)
        idx = np.zeros(x.shape, np.int64)
        if x.shape[0]:
            best = x[0].copy()
            cur = np.zeros(x.shape[1:], np.int64)
            for i in range(1, x.shape[0]):
                # a NaN wins and stays; ties move to the later index, as PyTorch's
                if x.dtype.kind == 'f':
                    take = np.isnan(x[i]) | (~np.isnan(best) & better(x[i], best))
                else:
                    take = better(x[i], best)
                best = np.where(take, x[i], best)
                cur = np.where(take, i, cur)
                idx[i] = cur
        idx = np.moveaxis(idx, 0, dim)
        return values_indices(opname, _pick_along(a, idx, dim), _leaf(idx))
    f.__name__ = opname
    f.__doc__ = (f'(values, indices) of the running {opname[3:]}imum along ``dim`` (a NaN '
                 f'propagates; on ties the later index).')
    return f


cummax = node_named('CummaxBackward0', 'input', output=0)(_cumulative('cummax', np.greater_equal))
cummin = node_named('CumminBackward0', 'input', output=0)(_cumulative('cummin', np.less_equal))


@node_named('RollBackward0', 'input')
def roll(input, shifts, dims=None):  # noqa: A002
    """``input`` shifted circularly by ``shifts`` along ``dims`` (flattened if None).

    >>> import tape
    >>> tape.roll(tape.tensor([1, 2, 3]), 1)
    tensor([3, 1, 2])
    """
    a = _t(input)
    d = _np(a)
    pos = _flat_index(d.shape)
    if isinstance(shifts, (tuple, list)) and len(shifts) == 0:
        raise RuntimeError('`shifts` required')
    if isinstance(dims, (tuple, list)) and len(dims) == 0:
        dims = None             # (dims=[]: PyTorch rolls the flattened tensor)
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise RuntimeError(f'roll: shifts and dimensions must align. shifts: '
                               f'{len(shifts)}, dims: 0')
        return _pick(a, np.roll(pos, shifts), unique=True)
    sh = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dm = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(sh) != len(dm):
        raise RuntimeError(f'roll: shifts and dimensions must align. shifts: {len(sh)}, '
                           f'dims:{len(dm)}')
    if d.ndim == 0:
        raise IndexError(f'Dimension specified as {dm[0]} but tensor has no dimensions')
    dm = tuple(_norm_dim(k, d.ndim, 'roll') for k in dm)
    return _pick(a, np.roll(pos, tuple(int(s) for s in sh), dm), unique=True)


# ------------------------------------------------------- fused arithmetic
@node_named(lambda i, e, w: 'LerpBackward1' if isinstance(w, Tensor) else ('LerpBackward0', 2),
            'input', 'end', 'weight')
def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``.

    >>> import tape
    >>> tape.lerp(tape.tensor([0.0, 2.0]), tape.tensor([4.0, 4.0]), 0.25)
    tensor([1.0000, 2.5000])
    """
    a = _t(input)
    b = _t(end, a)
    if isinstance(weight, Tensor) and _np(weight).ndim == 0 and _np(weight).dtype != _np(a).dtype:
        # a 0-d weight binds to PyTorch's Scalar overload: any dtype, still differentiable
        weight = _ops.to(weight, _np(a).dtype)
    for name, t in (('end', end), ('weight', weight)):
        if isinstance(t, Tensor) and _np(t).dtype != _np(a).dtype:    # PyTorch promotes none
            raise RuntimeError(f'lerp: expected dtype {_torch_dtype_name(_np(a).dtype)} for '
                               f'`{name}` but got dtype {_torch_dtype_name(_np(t).dtype)} '
                               f'(shapes {tuple(_np(a).shape)} and {tuple(_np(t).shape)})')
    if _np(a).dtype.kind == 'b' or _np(b).dtype.kind == 'b':
        if _np(a).dtype != _np(b).dtype:
            raise RuntimeError(f'expected dtype {_np(a).dtype} for `end` but got dtype '
                               f'{_np(b).dtype}')
    _not_for(a, 'iub', 'lerp_kernel_scalar' if not isinstance(weight, Tensor)
             else 'lerp_kernel_tensor')
    _ops.check_broadcast('lerp', a, b, weight if isinstance(weight, Tensor) else None)
    return _ops.add(a, _ops.mul(_ops.sub(b, a), weight))


@node_named('AddcmulBackward0', 'input', 'tensor1', 'tensor2')
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    a = _t(input)
    _not_for(a, 'b', 'addcmul_cpu_out')
    _ops.check_broadcast('addcmul', a, tensor1, tensor2)
    p = _ops.mul(_t(tensor1, a), tensor2)
    if np.result_type(_np(a).dtype, _np(p).dtype).kind in 'iu' and not isinstance(value, Tensor):
        value = int(value)      # PyTorch casts the scalar to the integer result's type
    return _ops.add(a, p if value == 1 else _ops.mul(p, value))


@node_named('AddcdivBackward0', 'input', 'tensor1', 'tensor2')
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2``."""
    a = _t(input)
    t1, t2 = _t(tensor1, a), _t(tensor2, a)
    if _np(t1).dtype.kind in 'iub' and _np(t2).dtype.kind in 'iub':
        raise RuntimeError('Integer division with addcdiv is no longer supported; divide '
                           'with true_divide or floor_divide instead')
    _ops.check_broadcast('addcdiv', a, t1, t2)
    q = _ops.div(t1, t2)
    return _ops.add(a, q if value == 1 else _ops.mul(q, value))


def _expands_to(name, input, shape):
    """PyTorch's RuntimeError when ``input`` cannot be expanded to ``shape`` (the
    product's), checked before the product is recorded."""
    si = np.shape(input._data if isinstance(input, Tensor) else input)
    bad = len(si) > len(shape)
    for i in range(1, len(si) + 1):
        if not bad and si[-i] != 1 and si[-i] != shape[-i]:
            raise RuntimeError(f'{name}: The expanded size of the tensor ({shape[-i]}) must match '
                               f'the existing size ({si[-i]}) at non-singleton dimension '
                               f'{len(shape) - i}.  Target sizes: {list(shape)}.  Tensor sizes: '
                               f'{list(si)}')
    if bad:
        raise RuntimeError(f'{name}: the input of shape {list(si)} cannot be expanded to the '
                           f'product\'s shape {list(shape)}')


def _add_product(input, product, beta, alpha):
    p = product if alpha == 1 else _ops.mul(product, alpha)
    return _ops.add(_scaled(_t(input, p), beta), p)


@node_named('AddmmBackward0', 'input', 'mat1', 'mat2')
def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``; beta=0 ignores input's values.

    >>> import tape
    >>> tape.addmm(tape.ones(2, 2), tape.eye(2), tape.eye(2), beta=0.5)
    tensor([[1.5000, 0.5000],
            [0.5000, 1.5000]])
    """
    m1, m2 = _t(mat1), _t(mat2)
    if _np(m1).ndim != 2 or _np(m2).ndim != 2:
        raise RuntimeError(f'addmm: expected 2-D matrices, got mat1 of shape '
                           f'{tuple(_np(m1).shape)} and mat2 of shape {tuple(_np(m2).shape)}')
    _expands_to('addmm', input, (_np(m1).shape[0], _np(m2).shape[1]))
    if isinstance(input, Tensor) and _np(input).dtype != _np(m1).dtype:
        raise RuntimeError(f'addmm: self and mat2 must have the same dtype, but got '
                           f'{_torch_dtype_name(_np(input).dtype)} and '
                           f'{_torch_dtype_name(_np(m1).dtype)} (shapes '
                           f'{tuple(_np(input).shape)} and {tuple(_np(m1).shape)})')
    return _add_product(input, _ops.mm(m1, m2), beta, alpha)


@node_named('AddmvBackward0', 'input', 'mat', 'vec')
def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    if _np(_t(mat)).ndim == 2:
        _expands_to('addmv', input, _np(_t(mat)).shape[:1])
    return _add_product(input, _la.mv(_t(mat), _t(vec)), beta, alpha)


@node_named('AddrBackward0', 'input', 'vec1', 'vec2')
def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _expands_to('addr', input, (_np(_t(vec1)).size, _np(_t(vec2)).size))
    return _add_product(input, _la.outer(_t(vec1), _t(vec2)), beta, alpha)


@node_named('BaddbmmBackward0', 'input', 'batch1', 'batch2')
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    s1, s2 = _np(_t(batch1)).shape, _np(_t(batch2)).shape
    if len(s1) == 3 and len(s2) == 3:
        _expands_to('baddbmm', input, (s1[0], s1[1], s2[2]))
    return _add_product(input, _la.bmm(_t(batch1), _t(batch2)), beta, alpha)


@node_named('AddbmmBackward0', 'input', 'batch1', 'batch2')
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum over the batch of bmm(batch1, batch2)``."""
    s1, s2 = _np(_t(batch1)).shape, _np(_t(batch2)).shape
    if len(s1) == 3 and len(s2) == 3:
        _expands_to('addbmm', input, (s1[1], s2[2]))
    return _add_product(input, _ops.sum_(_la.bmm(_t(batch1), _t(batch2)), 0), beta, alpha)


# ------------------------------------------------------------- elementwise
def _float_input(a):
    if _np(a).dtype.kind not in 'fc':
        return _ops.to(a, default_dtype[0])
    return a


@node_named('NanToNumBackward0', 'input')
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0
    and the dtype's largest and lowest finite values); the gradient is cut there.

    >>> import tape
    >>> tape.nan_to_num(tape.tensor([float('nan'), 1.0]))
    tensor([0., 1.])
    """
    a = _t(input)
    d = _np(a)
    if d.dtype.kind != 'f':
        return _ops.clone(a) if a._rg else _leaf(np.array(d, copy=True))
    note_value_use('nan_to_num')
    fi = np.finfo(d.dtype)
    repl = np.nan_to_num(d, nan=nan, posinf=fi.max if posinf is None else posinf,
                         neginf=fi.min if neginf is None else neginf)
    return _ew.where(np.isfinite(d), a, _leaf(np.asarray(repl, d.dtype)))


@node_named('LogitBackward0', 'input')
def logit(input, eps=None):  # noqa: A002
    """``log(p / (1 - p))``, with p clamped to [eps, 1 - eps] when ``eps`` is given."""
    a = _float_input(_t(input))
    if eps is not None:
        a = _ew.clamp(a, eps, 1.0 - eps)
    elif a._rg and grad_mode.enabled:
        # PyTorch's gradient is NaN outside [0, 1] (the value is NaN there anyway)
        d = _np(a)
        with np.errstate(invalid='ignore'):
            out = (d < 0) | (d > 1)
        if out.any():
            note_value_use('logit')
            a = _ops.mul(a, _leaf(np.where(out, np.nan, 1).astype(d.dtype)))
        ends = (d == 0) | (d == 1)
        if ends.any():
            # log(p / (1 - p))'s chain rule is 0 * inf (NaN) at p = 0 and 1, where
            # PyTorch's gradient 1 / (p (1 - p)) is inf: log p - log1p(-p) there
            note_value_use('logit')
            half = np.asarray(0.5, d.dtype)
            e = _ew.where(ends, _ops.add(a, 0.0), half)     # (-0.0 + 0.0: +0, PyTorch's +inf)
            with np.errstate(divide='ignore'):
                at_ends = _ops.sub(_ops.log(e), _ew.log1p(_ops.neg(e)))
            a = _ew.where(ends, half, a)
            with np.errstate(invalid='ignore', divide='ignore'):
                inner = _ops.log(_ops.div(a, _ops.rsub(a, 1.0)))
            return _ew.where(ends, at_ends, inner)
    with np.errstate(invalid='ignore', divide='ignore'):
        return _ops.log(_ops.div(a, _ops.rsub(a, 1.0)))


def xlogy(input, other):  # noqa: A002
    """``input * log(other)``, and 0 where input is 0 (unless other is NaN).

    >>> import tape
    >>> tape.xlogy(tape.tensor([0.0, 2.0]), tape.tensor([0.0, 1.0]))
    tensor([0., 0.])
    """
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"xlogy(): argument 'input' must be Tensor, not {type(input).__name__}")
    like = input if isinstance(input, Tensor) else other
    x, y = _float_input(_t(input, like)), _float_input(_t(other, like))
    sx, sy = _np(x).shape, _np(y).shape
    try:
        np.broadcast_shapes(sx, sy)
    except ValueError:
        raise RuntimeError(f'xlogy: The size of tensor a {tuple(sx)} must match the size of '
                           f'tensor b {tuple(sy)} (shapes do not broadcast)') from None
    note_value_use('xlogy')
    # XlogyBackward0 (two tensors), 1 (a number as input), 2 (a number as other)
    kind = 0 if isinstance(input, Tensor) and isinstance(other, Tensor) else \
        (2 if isinstance(input, Tensor) else 1)
    return _xlogy_fns()[kind].apply(x, y)


_XLOGY = {}


def _xlogy_fns(log1p=False):
    """xlogy (``log1p``: special.xlog1py) as one Function per PyTorch node
    (XlogyBackward0/1/2: two tensors, a number as input, a number as other), with
    PyTorch's derivatives (derivatives.yaml), which no masked composite of
    ``x * log(y)`` gives: d/dx is ``xlogy(grad, y)`` masked to 0 where x == 0 and
    y <= 0 (y <= -1 for xlog1py; for a number y, where y is not above that: NaN
    too), so inf at x == 0, y == inf; d/dy is ``grad * x / y`` (``/ (y + 1)``)
    unmasked, NaN at x == y == 0.  The backward is in tape ops, so it
    differentiates again as PyTorch's does."""
    fns = _XLOGY.get(log1p)
    if fns is None:
        from .autograd import Function
        low = -1.0 if log1p else 0.0

        class _Xlogy(Function):
            scalar_other = False

            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                xd, yd = _np(x), _np(y)
                dt = np.result_type(xd.dtype, yd.dtype)
                with np.errstate(all='ignore'):
                    val = np.where(np.isnan(yd), np.asarray(np.nan, dt),
                                   np.where(xd == 0, np.zeros((), dt),
                                            xd * (np.log1p(yd) if log1p else np.log(yd))))
                return _leaf(np.ascontiguousarray(val, dtype=dt))

            @classmethod
            def backward(cls, ctx, g):
                with np.errstate(all='ignore'):
                    return cls._grads(ctx, g)

            @classmethod
            def _grads(cls, ctx, g):
                x, y = ctx.saved_tensors
                gx = gy = None
                if ctx.needs_input_grad[0]:
                    xd, yd = _np(x), _np(y)
                    with np.errstate(invalid='ignore'):
                        drop = (xd == 0) & (~(yd > low) if cls.scalar_other else (yd <= low))
                    gx = _xlogy_fns(log1p)[0].apply(g, y)
                    if drop.any():
                        gx = _ew.where(_leaf(np.ascontiguousarray(drop)),
                                       np.zeros((), _np(gx).dtype), gx)
                if ctx.needs_input_grad[1]:
                    gy = _ops.div(_ops.mul(g, x), _ops.add(y, 1.0) if log1p else y)
                return gx, gy

        fns = []
        for i in range(3):
            cls = type('_Xlogy', (_Xlogy,), {'scalar_other': i == 2})
            cls._backward_name = f'SpecialXlog1PyBackward{i}' if log1p else f'XlogyBackward{i}'
            fns.append(cls)
        _XLOGY[log1p] = fns
    return fns


@node_named('HypotBackward0', 'input', 'other')
def hypot(input, other):  # noqa: A002
    """``sqrt(input ** 2 + other ** 2)``."""
    a = _t(input)
    if _np(a).dtype.kind not in 'fc':
        raise NotImplementedError(f'hypot: not implemented for dtype {_np(a).dtype}')
    b = _t(other, a)
    _ops.check_broadcast('hypot', a, b)
    return _ops.sqrt(_ops.add(_ops.mul(a, a), _ops.mul(b, b)))


@node_named('FracBackward0', 'input')
def frac(input):  # noqa: A002
    """The fractional part, ``input - trunc(input)`` (the sign of input)."""
    a = _t(input)
    if _np(a).dtype.kind not in 'fc':
        raise NotImplementedError(f'frac: not implemented for dtype {_np(a).dtype}')
    return _ops.sub(a, _ew.trunc(a))


# ------------------------------------------------------------ reductions
@node_named('NansumBackward0', 'input')
def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The sum, treating NaN as zero (which also gets no gradient)."""
    a = _t(input)
    d = _np(a)
    if d.dtype.kind == 'f':
        note_value_use('nansum')
        nan = np.isnan(d)
        if nan.any():
            a = _ew.where(nan, np.asarray(0, d.dtype), a)
    return _ops.sum_(a, dim, keepdim, dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The mean of the elements that are not NaN (NaN where there are none).

    >>> import tape
    >>> tape.nanmean(tape.tensor([1.0, float('nan'), 3.0]))
    tensor(2.)
    """
    a = _t(input)
    if _np(a).dtype.kind not in 'fc':       # (checked before any dtype= conversion)
        raise RuntimeError(f'nanmean(): expected input to have floating point or complex '
                           f'dtype but got {_torch_dtype_name(_np(a).dtype)}')
    if dtype is not None:
        a = _ops.to(a, dtype)
    d = _np(a)
    s = nansum(a, dim, keepdim)
    dims = None if dim is None or (isinstance(dim, (tuple, list)) and not len(dim)) else \
        _ops._dims(dim, d.ndim, 'nanmean') if d.ndim else None
    count = np.sum(~np.isnan(d), axis=dims, keepdims=keepdim)
    return _ops.div(s, _leaf(np.asarray(count, d.dtype)))


# ----------------------------------------------------------- linear algebra
def tensordot(a, b, dims=2):
    """Sum of products over ``dims`` (the last ``dims`` of a with the first of b, or two
    lists of dims).

    >>> import tape
    >>> tape.tensordot(tape.ones(2, 3), tape.ones(3, 4), 1).shape
    tape.Size([2, 4])
    """
    a, b = _t(a), _t(b)
    ad, bd = _np(a), _np(b)
    _not_for(a, 'b', 'addmm_impl_cpu_')
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f'tensordot expects dims >= 0, but got dims={dims}')
        da = list(range(ad.ndim - dims, ad.ndim))
        db = list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f'both dimension lists should have same length (got {len(da)} '
                           f'and {len(db)})')
    da = [_norm_dim(k, ad.ndim, 'tensordot') for k in da]
    db = [_norm_dim(k, bd.ndim, 'tensordot') for k in db]
    for i, j in zip(da, db):
        if ad.shape[i] != bd.shape[j]:
            raise RuntimeError(f'contracted dimensions need to match, but first has size '
                               f'{ad.shape[i]} in dim {i} and second has size {bd.shape[j]} '
                               f'in dim {j}')
    fa = [k for k in range(ad.ndim) if k not in da]
    fb = [k for k in range(bd.ndim) if k not in db]
    m = int(math.prod([ad.shape[k] for k in fa]))
    n = int(math.prod([bd.shape[k] for k in fb]))
    c = int(math.prod([ad.shape[k] for k in da]))
    a2 = _ops.reshape(_ops.permute(a, *(fa + da)) if ad.ndim else a, (m, c))
    b2 = _ops.reshape(_ops.permute(b, *(db + fb)) if bd.ndim else b, (c, n))
    out_shape = tuple(ad.shape[k] for k in fa) + tuple(bd.shape[k] for k in fb)
    return _ops.reshape(_ops.mm(a2, b2), out_shape)


@node_named(lambda x1, x2, p: ('CdistBackward0', 2) if p != 2 or (
    np.ndim(_np(_t(x1))) >= 2 and np.shape(_np(_t(x1)))[-2] <= 25
    and np.ndim(_np(_t(x2))) >= 2 and np.shape(_np(_t(x2)))[-2] <= 25) else None,
    'x1', 'x2', 'p')
def cdist(x1, x2, p=2.0, compute_mode=None):
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and of ``x2``
    (..., R, M): a (..., P, R) tensor.  The gradient at a zero distance is 0.

    >>> import tape
    >>> tape.cdist(tape.tensor([[0.0, 0.0]]), tape.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
    """
    a, b = _t(x1), _t(x2)
    ad, bd = _np(a), _np(b)
    for name, d in (('X1', ad), ('X2', bd)):
        if d.ndim < 2:
            raise RuntimeError(f'cdist only supports at least 2D tensors, {name} got: '
                               f'{d.ndim}D')
    if ad.shape[-1] != bd.shape[-1]:
        raise RuntimeError(f'X1 and X2 must have the same number of columns. X1: '
                           f'{ad.shape[-1]} X2: {bd.shape[-1]}')
    for name, d in (('X1', ad), ('X2', bd)):
        if d.dtype.kind not in 'fc':
            raise RuntimeError(f'cdist only supports floating-point dtypes, {name} got: '
                               f'{_torch_dtype_name(d.dtype)}')
    if ad.dtype != bd.dtype:
        raise RuntimeError(f'cdist: expected scalar type {_torch_dtype_name(ad.dtype)} but found '
                           f'{_torch_dtype_name(bd.dtype)} (shapes {tuple(ad.shape)} and '
                           f'{tuple(bd.shape)})')
    if p < 0:
        raise RuntimeError(f'cdist only supports non-negative p values (got {p})')
    diff = _ops.sub(_sh.unsqueeze(a, -2), _sh.unsqueeze(b, -3))
    return _red.vector_norm(diff, p, dim=-1)


def kron(input, other):  # noqa: A002
    """The Kronecker product: every element of ``input`` times the whole of ``other``.

    >>> import tape
    >>> tape.kron(tape.tensor([1, 2]), tape.tensor([1, 10]))
    tensor([ 1, 10,  2, 20])
    """
    a, b = _t(input), _t(other)
    ad, bd = _np(a), _np(b)
    nd = builtins.max(ad.ndim, bd.ndim)
    sa = (1,) * (nd - ad.ndim) + ad.shape
    sb = (1,) * (nd - bd.ndim) + bd.shape
    # a's dims at even positions, b's at odd: the product's (a0, b0, a1, b1, ...)
    ea = _ops.reshape(a, tuple(x for s in sa for x in (s, 1)))
    eb = _ops.reshape(b, tuple(x for s in sb for x in (1, s)))
    prod = _ops.mul(ea, eb)
    out = _ops.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))
    for view, of in ((ea, a), (eb, b), (out, prod)):
        if view._tape is not None and view is not of:
            name_result(view, 'UnsafeViewBackward0', (of,))    # (PyTorch's _unsafe_view)
    return out


# ----------------------------------------------------------------- indexing
@node_named('IndexAddBackward0', 'input', 'source')
def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` with ``alpha * source``'s slices added at ``index`` along ``dim``
    (repeated indices accumulate).

    >>> import tape
    >>> tape.zeros(3).index_add(0, tape.tensor([0, 0, 2]), tape.tensor([1.0, 2.0, 3.0]))
    tensor([3., 0., 3.])
    """
    a = _t(input)
    d = _np(a)
    src = _t(source, a)
    sd = _np(src)
    idx = np.asarray(index._data if isinstance(index, Tensor) else index)
    # (PyTorch's order of checks: the index's rank, its dtype, then the source's dtype)
    if idx.ndim > 1:
        raise IndexError(f'index_add_(): Index is supposed to be a vector, got shape '
                         f'{tuple(idx.shape)}')
    if idx.dtype.kind not in 'iu':
        raise RuntimeError(f'index_add_(): Expected dtype int32/int64 for index but got: '
                           f'{idx.dtype}')
    if isinstance(source, Tensor) and sd.dtype != d.dtype:
        raise RuntimeError(f'index_add_(): self ({_torch_dtype_name(d.dtype)}) and source '
                           f'({_torch_dtype_name(sd.dtype)}) must have the same scalar type')
    idx = idx.reshape(-1).astype(np.int64)
    dim = _norm_dim(dim, d.ndim, 'index_add')
    shape = d.shape if d.ndim else (1,)
    sshape = sd.shape if sd.ndim else (1,)
    if len(sshape) != len(shape) or builtins.any(
            sshape[k] != shape[k] for k in range(len(shape)) if k != dim):
        raise RuntimeError(f'index_add_(): source {tuple(sd.shape)} and self '
                           f'{tuple(d.shape)} must match in every dim but dim {dim}')
    if sshape[dim] != idx.size:
        raise RuntimeError(f'index_add_(): Number of indices ({idx.size}) should be equal to '
                           f'source.size(dim): ({sshape[dim]}), for dim: {dim}')
    n = shape[dim]
    if idx.size and idx.min() < 0:
        raise IndexError(f'index_add_(): index {idx.min()} is out of range in self (a '
                         f'negative index, as PyTorch refuses)')
    if idx.size and idx.max() >= n:
        bad = idx[idx >= n][0]
        # PyTorch's one-dimensional kernel raises IndexError, the others RuntimeError
        raise (IndexError if d.ndim <= 1 else RuntimeError)(
            f'index_add_(): index {bad} is out of bounds for dimension {dim} with size {n}')
    grids = list(np.indices(sshape, dtype=np.int64))
    grids[dim] = idx[grids[dim]]
    tgt = np.ravel_multi_index(grids, shape).reshape(-1) if sd.size else \
        np.zeros(0, np.int64)
    s = src if alpha == 1 else _ops.mul(src, alpha)
    if s._rg:
        added = _ops.put_flat(_ops.reshape(s, -1), tgt, d.size)
    else:
        flat = np.zeros(d.size, np.result_type(d, _np(s)))
        np.add.at(flat, tgt, _np(s).reshape(-1))        # exact for integers too
        added = _leaf(flat)
    out = _ops.add(a, _ops.reshape(added, d.shape))
    if _np(out).dtype != d.dtype:
        out = _ops.to(out, d.dtype)
    return out


# ------------------------------------------------------- creation and dtypes
def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None,
             layout=None, pin_memory=False, out=None):
    """A random permutation of ``0 .. n-1`` (int64; seeded by ``tape.manual_seed``)."""
    from . import _rng
    rng = generator._rng if generator is not None else _rng[0]
    if n < 0:
        raise RuntimeError(f'randperm: Trying to create tensor with negative dimension {n}: [{n}]')
    arr = rng.permutation(int(n)).astype(np.int64 if dtype is None else np.dtype(dtype))
    t = _leaf(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


_TORCH_NAMES = {'float16': 'float16', 'float32': 'float32', 'float64': 'float64',
                'int8': 'int8', 'int16': 'int16', 'int32': 'int32', 'int64': 'int64',
                'uint8': 'uint8', 'bfloat16': 'bfloat16'}


def _dtype_of(dtype, default):
    if dtype is None:
        return default
    if isinstance(dtype, Tensor):
        return np.dtype(_np(dtype).dtype)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f'expected a dtype, got {type(dtype).__name__}') from None


class _TypeInfo:
    """What finfo and iinfo share: they compare by their class and dtype."""

    def __eq__(self, other):
        return type(other) is type(self) and other.dtype == self.dtype

    def __hash__(self):
        return hash((type(self).__name__, self.dtype))


class finfo(_TypeInfo):
    """``torch.finfo``: the limits of a floating dtype, as Python floats.

    >>> import tape
    >>> tape.finfo(tape.float32).eps
    1.1920928955078125e-07
    """

    def __init__(self, type=None):  # noqa: A002  (torch's argument name)
        dt = _dtype_of(type, default_dtype[0])
        if dt.kind != 'f':
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{dt}'")
        fi = np.finfo(dt)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.tiny = self.smallest_normal = float(fi.smallest_normal)
        self.resolution = 10.0 ** -int(fi.precision)     # 1e-06, not float32's 1e-06
        self.dtype = _TORCH_NAMES.get(dt.name, dt.name)

    def __repr__(self):
        return (f'finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, '
                f'eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, '
                f'tiny={self.tiny:g}, dtype={self.dtype})')


class iinfo(_TypeInfo):
    """``torch.iinfo``: the limits of an integer dtype, as Python ints.

    >>> import tape
    >>> tape.iinfo(tape.int32).max
    2147483647
    """

    def __init__(self, type):  # noqa: A002
        dt = _dtype_of(type, None)
        if dt.kind not in 'iub':
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo "
                            f"to handle '{dt}'")
        ii = np.iinfo(np.uint8 if dt.kind == 'b' else dt)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = _TORCH_NAMES.get(dt.name, dt.name)

    def __repr__(self):
        return f'iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})'


def is_floating_point(input):  # noqa: A002
    """Is ``input``'s dtype a floating one?"""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    return _np(input).dtype.kind == 'f'


# ---------------------------------------------------------- Tensor methods
def is_contiguous(self, memory_format=None):
    """Are the elements laid out in row-major order with no gaps?"""
    return builtins.bool(np.asarray(self._data).flags.c_contiguous)


def _new(kind):
    def f(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
          pin_memory=False):
        import tape
        make = tape.ones if kind == 'ones' else tape.zeros
        return make(*size, dtype=_np(self).dtype if dtype is None else dtype,
                    requires_grad=requires_grad)
    f.__name__ = f'new_{kind}'
    f.__doc__ = f'A new {kind} tensor of ``size``, in this tensor\'s dtype by default.'
    return f


new_zeros = _new('zeros')
new_ones = _new('ones')
new_empty = _new('empty')


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    """A new tensor of ``size`` filled with ``fill_value``, in this tensor's dtype by default."""
    from . import full
    return full(size, fill_value, dtype=_np(self).dtype if dtype is None else dtype,
                requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    """A new leaf holding a copy of ``data``, in this tensor's dtype by default."""
    from . import _finish, _infer, _COPY_CONSTRUCT
    if isinstance(data, Tensor):
        warnings.warn(_COPY_CONSTRUCT.format('tensor.new_tensor'), UserWarning, stacklevel=2)
    dtype = _np(self).dtype if dtype is None else dtype
    return _finish(_infer(data, dtype), dtype, requires_grad)


def _matrix_transpose(name):
    def get(self):
        d = _np(self)
        if d.ndim == 0:
            return self                 # allowed (deprecated) in PyTorch
        if d.ndim < 2:
            raise RuntimeError(f'tensor.{name} is only supported on matrices or batches of '
                               f'matrices. Got {d.ndim}-D tensor.')
        return _ops.transpose(self, -2, -1)
    return property(get, doc=f'``{name}``: the last two dims swapped (real dtypes: no '
                             f'conjugation).')


def _conj_transpose(self):
    d = _np(self)
    if d.ndim == 0:
        return self
    if d.ndim != 2:
        raise RuntimeError(f'tensor.H is only supported on matrices (2-D tensors). Got '
                           f'{d.ndim}-D tensor.')
    return _ops.transpose(self, 0, 1)


def _inplace(fn, name):
    """``x.<name>(...)``: ``fn``'s out-of-place result written into x (recorded like copy_)."""
    def f(a, *args, **kwargs):
        return _ops.inplace_apply(a, fn, *args, **kwargs)
    f.__name__ = name
    f.__doc__ = f'In-place ``{name[:-1]}``.'
    return f


def _named(fn, name):
    # inplace_apply names its errors after fn: tape._ops.pow_ is the out-of-place pow
    def g(*args, **kwargs):
        return fn(*args, **kwargs)
    g.__name__ = name
    return g


def inverse(input):  # noqa: A002
    """``torch.inverse``: ``tape.linalg.inv``."""
    from .linalg import inv
    return inv(input)


def _random_fill(draw, name):
    def fill(a, *args, generator=None, **kwargs):
        from . import _gen
        d = np.asarray(a._data)
        vals = np.asarray(draw(_gen(generator), d.shape, *args, **kwargs)).astype(d.dtype)
        return a.copy_(_leaf(vals))
    fill.__name__ = name
    fill.__doc__ = f'``Tensor.{name}``: fill in place with random draws (``generator`` honoured).'
    return fill


_RANDOM_FILLS = {
    'normal_': _random_fill(lambda g, n, mean=0.0, std=1.0: g.normal(mean, std, n), 'normal_'),
    'uniform_': _random_fill(lambda g, n, a=0.0, b=1.0: g.uniform(a, b, n), 'uniform_'),
    'bernoulli_': _random_fill(lambda g, n, p=0.5: g.random(n) < _np_of(p, n), 'bernoulli_'),
    'exponential_': _random_fill(lambda g, n, lambd=1.0: g.exponential(1.0 / lambd, n),
                                 'exponential_'),
}


def _np_of(p, shape):
    return np.broadcast_to(np.asarray(p._data if isinstance(p, Tensor) else p), shape)


@node_named('DistBackward0', 'input', 'other')
def dist(input, other, p=2):  # noqa: A002
    """``torch.dist``: the ``p``-norm of ``input - other`` over all elements."""
    a = input if isinstance(input, Tensor) else _ops._const(input)
    return _red.vector_norm(_ops.sub(a, _ops._const(other, a) if not isinstance(other, Tensor)
                                     else other), float(p), None, False)


def broadcast_to(input, size):  # noqa: A002
    """``torch.broadcast_to``: ``input.expand(size)``."""
    return input.expand(*size) if isinstance(size, (tuple, list)) else input.expand(size)


def _broadcast_to_method(self, *size):
    # Tensor.broadcast_to takes the sizes as one sequence or spread, as expand does
    return broadcast_to(self, size[0] if len(size) == 1 else size)


@node_named('LogaddexpBackward0', 'input', 'other')
def logaddexp(input, other):  # noqa: A002
    """``log(exp(a) + exp(b))`` as ``a + softplus(b - a)`` where ``a >= b``, else
    ``b + softplus(a - b)``: each side smooth, so the gradients are PyTorch's
    ``sigmoid(a - b)`` and ``sigmoid(b - a)`` to any order (at ties too, where a
    form through ``|a - b|`` has a kink).  Equal infinities give themselves (their
    difference is taken as 0)."""
    a = input if isinstance(input, Tensor) else _ops._const(input)
    b = other if isinstance(other, Tensor) else _ops._const(other, a)
    note_value_use('logaddexp')
    ad, bd = np.asarray(a._data), np.asarray(b._data)
    d = _ops.sub(b, a)
    with np.errstate(invalid='ignore'):
        same_inf = (ad == bd) & np.isinf(ad)
    if np.any(same_inf):
        d = _ew.where(same_inf, _ops._const(0.0, d), d)
    with np.errstate(invalid='ignore'):
        a_wins = ad >= bd
    return _ew.where(a_wins, _ops.add(a, _ew.softplus(d, 1.0, math.inf)),
                     _ops.add(b, _ew.softplus(_ops.neg(d), 1.0, math.inf)))


@node_named('Logaddexp2Backward0', 'input', 'other')
def logaddexp2(input, other):  # noqa: A002
    """``log2(2**a + 2**b)``."""
    ln2 = float(np.log(2.0))
    a = input if isinstance(input, Tensor) else _ops._const(input)
    b = other if isinstance(other, Tensor) else _ops._const(other, a)
    return _ops.div(logaddexp(_ops.mul(a, ln2), _ops.mul(b, ln2)), ln2)


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """``torch.diff``: the ``n``-th forward difference along ``dim``."""
    a = input
    if n < 0:
        raise RuntimeError(f'order must be non-negative but got {n}')
    if prepend is not None or append is not None:
        parts = [t if isinstance(t, Tensor) else _ops._const(t, a)
                 for t in (prepend, a, append) if t is not None]
        a = _sh.cat(parts, dim)
    if a.dim() == 0:
        raise RuntimeError('diff expects input to be at least one-dimensional')
    boolean = _np(a).dtype == np.bool_
    for _ in range(n):
        m = a.shape[dim]
        if m == 0:
            break               # (n past the length: an empty result, as PyTorch)
        hi, lo = a.narrow(dim, 1, m - 1), a.narrow(dim, 0, m - 1)
        # a bool tensor's difference is the XOR of neighbours, as PyTorch's
        a = _ew.logical_xor(hi, lo) if boolean else _ops.sub(hi, lo)
    return a


def _index_pairs(np_fn):
    name = np_fn.__name__

    def fn(row, col, offset=0, *, dtype=None, device=None, layout=None):
        dt = np.dtype(np.int64 if dtype is None else dtype)
        if dt not in (np.int32, np.int64):      # PyTorch's kernels: int and long only
            raise NotImplementedError(f'"{name}" not implemented for '
                                      f"'{_torch_dtype_name(dt)}'")
        if row < 0 or col < 0:
            which, v = ('row', row) if row < 0 else ('col', col)
            raise RuntimeError(f'{which} must be non-negative, got{v}')
        i, j = np_fn(row, offset, col)
        return _leaf(np.stack([i, j]).astype(dt))
    return fn


triu_indices = _index_pairs(np.triu_indices)
tril_indices = _index_pairs(np.tril_indices)
triu_indices.__name__, tril_indices.__name__ = 'triu_indices', 'tril_indices'


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """``torch.take_along_dim``: ``gather`` after broadcasting (flattened for ``dim=None``)."""
    from . import _indexing as _ix
    a = input
    if dim is None:
        return _ix.gather(a.reshape(-1), 0, indices.reshape(-1))
    if _np(indices).dtype != np.int64:
        raise RuntimeError(f'torch.take_along_dim(): dtype of indices should be Long but got '
                           f'{_torch_dtype_name(_np(indices).dtype)}')
    nd = a.dim()
    if nd == 0:
        raise IndexError(f'Dimension specified as {dim} but tensor has no dimensions')
    dim = _norm_dim(dim, nd, 'take_along_dim')
    if indices.dim() != nd:
        raise RuntimeError(f'torch.take_along_dim(): input and indices should have the same '
                           f'number of dimensions, but got {nd} dimensions for input, and '
                           f'{indices.dim()} dimensions for indices')
    sa, si = list(a.shape), list(indices.shape)
    shape = [max(x, y) for x, y in zip(sa, si)]
    ea = a.expand(*[sa[k] if k == dim else shape[k] for k in range(nd)])
    ei = indices.expand(*[si[k] if k == dim else shape[k] for k in range(nd)])
    return _ix.gather(ea, dim, ei)


def _det(input):  # noqa: A002
    from .linalg import det
    return det(input)


def _logdet(input):  # noqa: A002
    from .linalg import logdet
    return logdet(input)


def _slogdet(input):  # noqa: A002
    from .linalg import slogdet
    return slogdet(input)


def _functional(name):
    def fn(*args, **kwargs):
        from .nn import functional
        return getattr(functional, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f'``tape.nn.functional.{name}``.'
    return fn


# ------------------------------------------------------------ registration
_NEW_FUNCTIONS = {
    'tril': tril, 'triu': triu, 'diagonal': diagonal, 'diag': diag, 'diagflat': diagflat,
    'diag_embed': diag_embed, 'trace': trace, 'sort': sort, 'argsort': argsort,
    'msort': msort, 'topk': topk, 'kthvalue': kthvalue, 'median': median,
    'nanmedian': nanmedian, 'cummax': cummax, 'cummin': cummin, 'roll': roll, 'lerp': lerp,
    'addcmul': addcmul, 'addcdiv': addcdiv, 'addmm': addmm, 'addmv': addmv, 'addr': addr,
    'baddbmm': baddbmm, 'addbmm': addbmm, 'nan_to_num': nan_to_num, 'logit': logit,
    'xlogy': xlogy, 'hypot': hypot, 'frac': frac, 'nansum': nansum, 'nanmean': nanmean,
    'tensordot': tensordot, 'cdist': cdist, 'kron': kron, 'index_add': index_add,
    'randperm': randperm, 'finfo': finfo, 'iinfo': iinfo,
    'is_floating_point': is_floating_point, 'inverse': inverse, 'dist': dist,
    'broadcast_to': broadcast_to, 'logaddexp': logaddexp, 'logaddexp2': logaddexp2,
    'diff': diff, 'triu_indices': triu_indices, 'tril_indices': tril_indices,
    'take_along_dim': take_along_dim, 'det': _named(_det, 'det'),
    'logdet': _named(_logdet, 'logdet'), 'slogdet': _named(_slogdet, 'slogdet'),
    'cosine_similarity': _functional('cosine_similarity'),
    'pairwise_distance': _functional('pairwise_distance'),
}

_METHOD_NAMES = (
    'tril', 'triu', 'diagonal', 'diag', 'diagflat', 'diag_embed', 'trace', 'sort', 'argsort',
    'msort', 'topk', 'kthvalue', 'median', 'nanmedian', 'cummax', 'cummin', 'roll', 'lerp',
    'addcmul', 'addcdiv', 'addmm', 'addmv', 'addr', 'baddbmm', 'addbmm', 'nan_to_num',
    'logit', 'xlogy', 'hypot', 'frac', 'nansum', 'nanmean', 'kron', 'index_add', 'inverse',
    'dist', 'broadcast_to', 'logaddexp', 'logaddexp2', 'diff', 'take_along_dim', 'det',
    'logdet', 'slogdet',
)

_NEW_METHODS = {name: _NEW_FUNCTIONS[name] for name in _METHOD_NAMES}
_NEW_METHODS.update({
    'broadcast_to': _broadcast_to_method,
    'is_contiguous': is_contiguous, 'new_zeros': new_zeros, 'new_ones': new_ones,
    'new_empty': new_empty, 'new_full': new_full, 'new_tensor': new_tensor,
    'mT': _matrix_transpose('mT'), 'mH': _matrix_transpose('mH'),
    'H': property(_conj_transpose, doc='``H``: a matrix transposed (real dtypes).'),
})
_NEW_METHODS.update(_RANDOM_FILLS)

# in-place forms: the out-of-place op, written back through inplace_apply
_INPLACE_OF = {
    'sigmoid_': _ops.sigmoid, 'exp_': _ops.exp, 'log_': _ops.log, 'sqrt_': _ops.sqrt,
    'sin_': _ops.sin, 'cos_': _ops.cos, 'tanh_': _ops.tanh, 'neg_': _ops.neg,
    'negative_': _ops.neg, 'abs_': _ops.abs_, 'relu_': _ops.relu, 'pow_': _ops.pow_,
    'rsqrt_': _ew.rsqrt, 'exp2_': _ew.exp2, 'expm1_': _ew.expm1, 'log2_': _ew.log2,
    'log10_': _ew.log10, 'log1p_': _ew.log1p, 'tan_': _ew.tan, 'asin_': _ew.asin,
    'acos_': _ew.acos, 'atan_': _ew.atan, 'arcsin_': _ew.asin, 'arccos_': _ew.acos,
    'arctan_': _ew.atan, 'sinh_': _ew.sinh, 'cosh_': _ew.cosh, 'erf_': _ew.erf,
    'reciprocal_': _ew.reciprocal, 'sign_': _ew.sign, 'floor_': _ew.floor,
    'ceil_': _ew.ceil, 'trunc_': _ew.trunc, 'round_': _ew.round, 'square_': _ew.square,
    'clamp_min_': _ew.clamp_min, 'clamp_max_': _ew.clamp_max, 'atan2_': _ew.atan2,
    'fmod_': _ew.fmod, 'silu_': _ew.silu,
    'tril_': tril, 'triu_': triu, 'lerp_': lerp, 'addcmul_': addcmul, 'addcdiv_': addcdiv,
    'addmm_': addmm, 'addmv_': addmv, 'addr_': addr, 'baddbmm_': baddbmm,
    'addbmm_': addbmm, 'nan_to_num_': nan_to_num, 'logit_': logit, 'xlogy_': xlogy,
    'hypot_': hypot, 'frac_': frac, 'index_add_': index_add,
}
for _name, _fn in _INPLACE_OF.items():
    _NEW_METHODS[_name] = _inplace(_named(_fn, _name[:-1]), _name)


# ------------------------------------------------ scans, grids, splits, counts
@node_named('LogcumsumexpBackward0', 'input')
def logcumsumexp(input, dim):  # noqa: A002
    """``log(cumsum(exp(x), dim))`` without overflow: a log-space prefix scan
    (log2(n) rounds of ``logaddexp`` of the tensor and itself shifted)."""
    x = input if isinstance(input, Tensor) else _ew._t(input)
    if x._data.ndim == 0:
        return x * 1.0
    d = _norm_dim(dim, x._data.ndim, 'logcumsumexp')
    n = x._data.shape[d]
    if x._data.dtype.kind != 'f':
        raise NotImplementedError(f'logcumsumexp: not implemented for dtype {x._data.dtype} '
                                  f'(tensor of shape {tuple(x._data.shape)}; PyTorch\'s '
                                  f'"logcumsumexp_out_cpu" takes floating tensors)')
    out = x
    k = 1
    while k < n:
        out = _sh.cat([_sh.narrow(out, d, 0, k),
                       logaddexp(_sh.narrow(out, d, k, n - k), _sh.narrow(out, d, 0, n - k))], d)
        k *= 2
    return out if k > 1 else out * 1.0


def meshgrid(*tensors, indexing=None):
    """``torch.meshgrid``: ``indexing`` 'ij' (the default) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError('meshgrid expects a non-empty TensorList')
    indexing = 'ij' if indexing is None else indexing
    if indexing not in ('ij', 'xy'):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", '
                           f'but received: {indexing}')
    ts = [t if isinstance(t, Tensor) else _ew._t(t) for t in tensors]
    for t in ts:
        if t._data.ndim > 1:
            raise RuntimeError('torch.meshgrid: Expected 0D or 1D tensor in the tensor list '
                               f'but got: {t}')
        if t._data.dtype != ts[0]._data.dtype:
            raise RuntimeError(f'meshgrid expects all tensors to have the same dtype (got '
                               f'{ts[0]._data.dtype} and {t._data.dtype})')
    sizes = [t._data.size for t in ts]
    pos = list(range(len(ts)))
    if indexing == 'xy' and len(ts) >= 2:
        pos[0], pos[1] = 1, 0
    full = [0] * len(ts)
    for i, p in enumerate(pos):
        full[p] = sizes[i]
    outs = []
    for i, t in enumerate(ts):
        shape = [1] * len(ts)
        shape[pos[i]] = sizes[i]
        outs.append(_ops.expand(_ops.reshape(t, *shape), *full))
    return tuple(outs)


def cartesian_prod(*tensors):
    """Every combination of the 1-D inputs' elements, one row each."""
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f'Expect a 1D vector, but got shape {list(t.shape)}')
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing='ij')
    return _sh.stack([_ops.reshape(g, -1) for g in grids], 1)


def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """``torch.tensor_split``: ``n`` nearly equal parts (the first ``size % n`` one
    longer), or the parts between the given indices."""
    x = input
    if x._data.ndim == 0:
        raise RuntimeError('tensor_split expected at least a 1-dimensional tensor, but got a '
                           'tensor with 0 dims')
    d = _norm_dim(dim, x._data.ndim, 'tensor_split')
    n = x._data.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios._data.ndim > 1:
            raise RuntimeError('tensor_split expected tensor_indices_or_sections to be a '
                               'zero-dimensional or one-dimensional tensor, but got a tensor '
                               f'with {ios._data.ndim} dims')
        if ios._data.dtype != np.int64:
            raise RuntimeError('tensor_split expected tensor_indices_or_sections to have dtype '
                               f'of long, but got {_torch_dtype_name(ios._data.dtype)}')
        ios = ios._data.tolist()
    if isinstance(ios, (int, np.integer)):
        if ios <= 0:
            raise RuntimeError(f'number of sections must be larger than 0, got {ios}')
        q, r = divmod(n, int(ios))
        bounds = [0]
        for i in range(int(ios)):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) + (n if i < 0 else 0), 0), n)
                        for i in ios] + [n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        hi = builtins.max(lo, hi)
        lo = builtins.min(lo, n)
        parts.append(_sh.narrow(x, d, lo, builtins.max(0, builtins.min(hi, n) - lo)))
    return tuple(parts)


@node_named('LinalgCrossBackward0', 'input', 'other')
def cross(input, other, dim=None):  # noqa: A002
    """The cross product along ``dim`` (of size 3); the inputs broadcast.  Without
    ``dim``, the first dimension of size 3 (``torch.cross``'s old default)."""
    a = input if isinstance(input, Tensor) else _ew._t(input)
    b = other if isinstance(other, Tensor) else _ew._t(other)
    if a.dim() != b.dim():
        raise RuntimeError('linalg.cross: inputs must have the same number of dimensions.')
    if dim is not None:
        # PyTorch checks the lengths along dim before it broadcasts
        d = _norm_dim(dim, a.dim(), 'linalg.cross')
        if a._data.shape[d] != 3 or b._data.shape[d] != 3:
            raise RuntimeError(f'linalg.cross: inputs dimension {dim} must have length 3. '
                               f'Got {a._data.shape[d]} and {b._data.shape[d]}')
    _ops.check_broadcast('linalg.cross', a, b)
    shape = tuple(np.broadcast_shapes(a._data.shape, b._data.shape))
    if a._data.shape != shape:
        a = _ops.expand(a, *shape)
    if b._data.shape != shape:
        b = _ops.expand(b, *shape)
    if dim is None:
        dims = [i for i, s in enumerate(shape) if s == 3]
        if not dims:
            raise RuntimeError('no dimension of size 3 in input')
        d = dims[0]
    else:
        d = _norm_dim(dim, len(shape), 'linalg.cross')
    if shape[d] != 3:
        raise RuntimeError(f'linalg.cross: inputs dimension {dim} must have length 3. '
                           f'Got {a._data.shape[d]} and {b._data.shape[d]}')
    a0, a1, a2 = (_sh.narrow(a, d, i, 1) for i in range(3))
    b0, b1, b2 = (_sh.narrow(b, d, i, 1) for i in range(3))
    return _sh.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def _linalg_cross(input, other, *, dim=-1, out=None):  # noqa: A002
    from ._out import into_out
    return into_out(cross(input, other, dim=dim), out, 'linalg_cross', input, other)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Insertion points of ``values`` in the last dimension of ``sorted_sequence``
    (batched over the leading ones).  Not differentiable: int64 (or int32)."""
    seq = sorted_sequence._data if isinstance(sorted_sequence, Tensor) else np.asarray(
        sorted_sequence)
    scalar = not isinstance(values, Tensor)
    vals = values._data if isinstance(values, Tensor) else np.asarray(values)
    if side is not None:
        if side not in ('left', 'right') or (right and side == 'left'):
            raise RuntimeError("torch.searchsorted(): side can only be 'left' or 'right'")
        right = side == 'right'
    if seq.ndim == 0:
        raise RuntimeError('torch.searchsorted(): boundaries tensor should have positive '
                           'dimension, but got 0 dimension')
    if sorter is not None:
        srt = sorter._data if isinstance(sorter, Tensor) else np.asarray(sorter)
        if srt.dtype != np.int64:
            raise RuntimeError(f'torch.searchsorted(): sorter must be a tensor of long dtype '
                               f'but got dtype {_torch_dtype_name(srt.dtype)}')
        if srt.shape != seq.shape:
            raise RuntimeError(f'torch.searchsorted(): boundary and sorter must have the same '
                               f'size, but got boundary tensor {list(seq.shape)}and got sorter '
                               f'tensor {list(srt.shape)}')
        if srt.size and (srt.min() < 0 or srt.max() >= seq.shape[-1]):
            raise RuntimeError('torch.searchsorted(): sorter index out of range')
        seq = np.take_along_axis(seq, srt, -1)
    how = 'right' if right else 'left'
    if seq.ndim <= 1:
        out = np.searchsorted(seq, vals, side=how)
    else:
        if seq.shape[:-1] != vals.shape[:-1]:
            raise RuntimeError('torch.searchsorted(): boundaries tensor should be 1 dimension '
                               'or the first N-1 dimensions of boundaries tensor and input '
                               'value tensor must match')
        s2 = seq.reshape(-1, seq.shape[-1])
        v2 = vals.reshape(-1, vals.shape[-1])
        out = np.stack([np.searchsorted(s2[i], v2[i], side=how) for i in range(s2.shape[0])]
                       ).reshape(vals.shape)
    out = np.asarray(out, np.int32 if out_int32 else np.int64)
    return _leaf(out.reshape(()) if scalar else out)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """Counts of each value of a 1-D non-negative integer tensor (weighted sums
    with ``weights``).  Not differentiable."""
    x = input._data if isinstance(input, Tensor) else np.asarray(input)
    if x.dtype.kind not in 'iu':
        raise NotImplementedError(f'"bincount_cpu" not implemented for '
                                  f"'{_torch_dtype_name(x.dtype)}' (bincount of "
                                  f'shape {tuple(x.shape)}: integer tensors only)')
    if x.ndim != 1:
        raise RuntimeError('bincount only supports 1-d non-negative integral inputs.')
    if x.size and x.min() < 0:
        raise RuntimeError('bincount only supports 1-d non-negative integral inputs.')
    if minlength < 0:
        raise RuntimeError('minlength should be >= 0')
    if weights is None:
        return _leaf(np.bincount(x, minlength=minlength).astype(np.int64))
    w = weights._data if isinstance(weights, Tensor) else np.asarray(weights)
    if w.ndim != 1 or w.shape[0] != x.shape[0]:
        raise RuntimeError('weights should be 1-d and have the same length as input')
    # float32 weights sum in float32; every other dtype (half too) in float64, as PyTorch
    dt = np.float32 if w.dtype == np.float32 else np.float64
    return _leaf(np.bincount(x, weights=w.astype(np.float64), minlength=minlength).astype(dt))


_NEW_FUNCTIONS.update({
    'logcumsumexp': logcumsumexp, 'meshgrid': meshgrid, 'cartesian_prod': cartesian_prod,
    'tensor_split': tensor_split, 'cross': cross, 'searchsorted': searchsorted,
    'bincount': bincount,
})
for _name in ('logcumsumexp', 'tensor_split', 'cross', 'bincount'):
    _NEW_METHODS[_name] = _NEW_FUNCTIONS[_name]


# ------------------------------------- the common PyTorch API (tests/test_api_hunt.py)
# Names that tutorials and training code reach for, written in the ops above so
# their gradients need no rule of their own.
def _pair_dims(dims, ndim, opname):
    if len(dims) != 2:
        raise RuntimeError(f'{opname}: expected total rotation dims == 2, but got dims = {len(dims)}')
    d0, d1 = _norm_dim(dims[0], ndim, opname), _norm_dim(dims[1], ndim, opname)
    if d0 == d1:
        raise RuntimeError(f'{opname}: expected rotation dims to be different, got {d0} and {d1}')
    return d0, d1


@node_named('Rot90Backward0', 'input')
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first
    axis toward the second), as flips and a transpose.

    >>> import tape
    >>> tape.rot90(tape.tensor([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    a = _t(input)
    if len(tuple(dims)) == 2 and _np(a).ndim < 2:
        raise RuntimeError(f'expected total dims >= 2, but got total dims = {_np(a).ndim}')
    d0, d1 = _pair_dims(tuple(dims), _np(a).ndim, 'rot90')
    k = int(k) % 4
    if k == 1:
        return _ops.transpose(_sh.flip(a, d1), d0, d1)
    if k == 2:
        return _sh.flip(a, (d0, d1))
    if k == 3:
        return _ops.transpose(_sh.flip(a, d0), d0, d1)
    return _ops.clone(a)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (``RuntimeError`` if they do not)."""
    from ._tensor import Size
    try:
        return Size(np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s)
                                          for s in shapes]))
    except ValueError:
        raise RuntimeError(f'Shape mismatch: objects cannot be broadcast to a single shape '
                           f'(shapes {list(shapes)})') from None


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*[_np(t).shape for t in tensors])
    return tuple(_ops.expand(t, *shape) if _np(t).shape != tuple(shape) else t
                 for t in tensors)


def _atleast(nd, place):
    def f(*tensors):
        many = len(tensors) != 1 or isinstance(tensors[0], (list, tuple))
        ts = tensors[0] if len(tensors) == 1 and many else tensors
        out = []
        for t in ts:
            t = _t(t)
            s = _np(t).shape
            out.append(t if len(s) >= nd else _ops.reshape(t, *place(s)))
        return tuple(out) if many else out[0]
    f.__name__ = f'atleast_{nd}d'
    f.__doc__ = f'The input viewed with at least {nd} dimensions (NumPy\'s placement).'
    return f


atleast_1d = _atleast(1, lambda s: (1,))
atleast_2d = _atleast(2, lambda s: (1, 1) if not s else (1,) + s)
atleast_3d = _atleast(3, lambda s: (1, 1, 1) if not s else (1,) + s + (1,) if len(s) == 1
                      else s + (1,))


def _split_along(dim, name, min_ndim):
    def f(input, indices_or_sections):  # noqa: A002
        a = _t(input)
        nd = _np(a).ndim
        if nd < min_ndim:
            raise RuntimeError(f'torch.{name} requires a tensor with at least {min_ndim} '
                               f'dimension, but got a tensor with {nd} dimensions!')
        d = dim if dim is not None else (1 if nd >= 2 else 0)
        if isinstance(indices_or_sections, int):
            n = _np(a).shape[d]
            if indices_or_sections == 0 or n % indices_or_sections:
                raise RuntimeError(f'torch.{name} attempted to split along dimension {d}, but '
                                   f'the size of the dimension {n} is not divisible by the '
                                   f'split_size {indices_or_sections}!')
        return tensor_split(a, indices_or_sections, d)
    f.__name__ = name
    f.__doc__ = f'``tensor_split`` along dim {dim if dim is not None else "1 (0 for 1-D)"}.'
    return f


hsplit = _split_along(None, 'hsplit', 1)
vsplit = _split_along(0, 'vsplit', 2)
dsplit = _split_along(2, 'dsplit', 3)


def dstack(tensors):
    """The tensors, made at least 3-D, joined along dim 2."""
    return _sh.cat(list(atleast_3d(list(tensors))), 2)


def column_stack(tensors):
    """1-D (and 0-D) tensors as columns, joined with the 2-D ones along dim 1."""
    cols = [_ops.reshape(t, -1, 1) if _np(t).ndim < 2 else t for t in map(_t, tensors)]
    return _sh.cat(cols, 1)


def ravel(input):  # noqa: A002
    """The elements as a 1-D tensor."""
    return _ops.reshape(_t(input), -1)


@node_named('UnfoldBackward0', 'self')
def unfold(self, dimension, size, step):
    """Windows of ``size`` elements every ``step`` along ``dimension``; the window is
    the new last dim (``Tensor.unfold``), recorded as one take.

    >>> import tape
    >>> tape.arange(5).unfold(0, 2, 2).tolist()
    [[0, 1], [2, 3]]
    """
    d = _np(self)
    nd = builtins.max(d.ndim, 1)
    dim = _norm_dim(dimension, nd, 'unfold')
    n = d.shape[dim] if d.ndim else 1
    if size > n:
        raise RuntimeError(f'maximum size for tensor at dimension {dim} is {n} but size is {size}')
    if step <= 0:
        raise RuntimeError(f'step is {step} but must be > 0')
    pos = np.lib.stride_tricks.sliding_window_view(_flat_index(d.shape if d.ndim else (1,)),
                                                   size, axis=dim)
    pos = np.take(pos, np.arange(0, n - size + 1, step), axis=dim)
    return _pick(self, pos if d.ndim else pos[0])


def argwhere(input):  # noqa: A002
    """The indices of the non-zero elements, one row each."""
    return _ew.nonzero(_t(input))


def _along(dim, ndim, index):
    return (slice(None),) * dim + (index,)


def _index_array(index):
    """An index tensor (or list) as an int64 array, for a NumPy key."""
    return np.asarray(_np(index) if isinstance(index, Tensor) else index, np.int64)


def _index_key(index):
    """One part of an ``index_put`` key: a bool mask stays a mask (it picks where
    it is True), anything else is an int64 index array."""
    arr = np.asarray(_np(index) if isinstance(index, Tensor) else index)
    return arr if arr.dtype == np.bool_ else arr.astype(np.int64, copy=False)


@node_named('IndexCopyBackward0', 'input', 'source')
def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    a = _t(input)
    dim = _norm_dim(dim, _np(a).ndim, 'index_copy')
    src = _t(source, a)
    idx = np.asarray(_np(index) if isinstance(index, Tensor) else index)
    sd, nd, n = _np(src).ndim, _np(a).ndim, idx.size
    # PyTorch's checks, in its order (index_copy_ never broadcasts the source)
    if idx.ndim > 1:
        raise IndexError(f'index_copy_(): Index should have dimension 1 or 0 (got {idx.ndim})')
    if sd == 0 and n != 1:
        raise IndexError(f'index_copy_(): When source is scalar, index should have one element '
                         f'(got {n})')
    if sd != nd and sd != 0 and nd != 0:
        raise IndexError(f'index_copy_(): When source and destination are not scalars, their '
                         f'dimensionality must match. Source dimensionality ({sd}), '
                         f'destination dimensionality ({nd})')
    if idx.dtype != np.int64:
        raise RuntimeError(f'index_copy_(): Expected a long tensor for index, but got '
                           f'{_torch_dtype_name(idx.dtype)}')
    if isinstance(source, Tensor) and _np(source).dtype != _np(a).dtype:
        raise RuntimeError(f'index_copy_(): self and source expected to have the same dtype, '
                           f'but got (self) {_torch_dtype_name(_np(a).dtype)} and (source) '
                           f'{_torch_dtype_name(_np(source).dtype)}')
    dst_slice = [k for i, k in enumerate(_np(a).shape) if i != dim]
    src_slice = [k for i, k in enumerate(_np(src).shape) if i != dim]
    if sd and nd and dst_slice != src_slice:
        raise RuntimeError(f'index_copy_(): Source/destination tensor must have same slice '
                           f'shapes. Destination slice shape: {dst_slice} at dimension {dim} and '
                           f'source slice shape: {src_slice} at dimension 0.')
    if sd and nd and n != _np(src).shape[dim]:
        raise IndexError(f'index_copy_(): Number of indices ({n}) should be equal to '
                         f'source.size(dim) ({_np(src).shape[dim]})')
    size = _np(a).shape[dim] if nd else 1
    if n and (idx.min() < 0 or idx.max() >= size):
        bad = idx.reshape(-1)[(idx.reshape(-1) < 0) | (idx.reshape(-1) >= size)][0]
        raise IndexError(f'index_copy_(): index {bad} is out of bounds for dimension {dim} '
                         f'with size {size}')
    out = _ops.clone(a)
    out[_along(dim, _np(a).ndim, _index_array(index))] = source
    return out


def index_fill(input, dim, index, value):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` set to ``value``."""
    a = _t(input)
    d = _np(a)
    dim = _norm_dim(dim, d.ndim, 'index_fill')
    idx = np.asarray(_np(index) if isinstance(index, Tensor) else index)
    if idx.dtype != np.int64:
        raise IndexError('index_fill_(): Expected dtype int64 for index.')
    if idx.ndim > 1:
        raise RuntimeError('Index has to be a vector/scalar')
    size = d.shape[dim] if d.ndim else 1
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx.reshape(-1)[(idx.reshape(-1) < -size) | (idx.reshape(-1) >= size)][0]
        raise IndexError(f'index {bad} is out of bounds for dimension {dim} with size {size}')
    mask = np.zeros(d.shape, bool)
    mask[_along(dim, d.ndim, _index_array(index))] = True
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(f'index_fill_ only supports a 0-dimensional value tensor, but got '
                           f'tensor with {value.dim()} dimension(s).')
    v = value if isinstance(value, Tensor) else np.asarray(value, d.dtype)
    return _ew.where(mask, v, a)


@node_named('MaskedScatterBackward0', 'input', 'source')
def masked_scatter(input, mask, source):  # noqa: A002
    """``input`` with the places where ``mask`` is True filled, in order, by
    ``source``'s leading elements."""
    a = _t(input)
    m = _np(_t(mask)) if isinstance(mask, Tensor) else np.asarray(mask)
    try:
        shape = np.broadcast_shapes(m.shape, _np(a).shape)
    except ValueError:
        raise RuntimeError(f'masked_scatter: the mask of shape {tuple(m.shape)} does not '
                           f'broadcast to self of shape {tuple(_np(a).shape)}') from None
    if shape != _np(a).shape:
        a = a.expand(*shape)    # (out of place, PyTorch broadcasts self and mask together)
    m = np.broadcast_to(m, shape)
    if m.dtype != np.bool_:
        raise RuntimeError(f'masked_scatter_ only supports boolean masks, but got mask with '
                           f'dtype {_torch_dtype_name(m.dtype)}')
    if isinstance(source, Tensor) and _np(source).dtype != _np(a).dtype:
        raise RuntimeError(f'masked_scatter: expected self and source to have same dtypes but '
                           f'got{_torch_dtype_name(_np(a).dtype)} and '
                           f'{_torch_dtype_name(_np(source).dtype)}')
    k = int(m.sum())
    if k > _np(source).size:
        raise RuntimeError(f'masked_scatter: expected source to have at least {k} elements '
                           f'(got {_np(source).size})')
    pos = np.where(m, np.cumsum(m.reshape(-1)).reshape(m.shape) - 1, 0)
    return _ew.where(m, _pick(source, pos), a)


@node_named('IndexPutBackward0', 'input', 'values')
def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """``input`` with ``input[indices] = values`` (``+=`` with ``accumulate``)."""
    a = _t(input)
    defined = [i for i in indices if i is not None]
    # one bool mask and a one-element value: PyTorch's masked_fill, which casts the value
    masked_fill = (not accumulate and isinstance(values, Tensor) and _np(values).size == 1
                   and len(defined) == 1 and isinstance(defined[0], Tensor)
                   and _np(defined[0]).dtype in (np.bool_, np.uint8))
    if isinstance(values, Tensor) and _np(values).dtype != _np(a).dtype and not masked_fill:
        raise RuntimeError(f'Index put requires the source and destination dtypes match, got '
                           f'{_torch_dtype_name(_np(a).dtype)} for the destination and '
                           f'{_torch_dtype_name(_np(values).dtype)} for the source.')
    key = tuple(_index_key(i) for i in indices)
    if not accumulate:
        out = _ops.clone(a)
        out[key] = values
        return out
    pos = _flat_index(_np(a).shape)[key]
    v = _ops.expand(_t(values, a), *pos.shape) if _np(_t(values, a)).shape != pos.shape \
        else _t(values, a)
    flat = index_add(_ops.reshape(a, -1), 0, pos.reshape(-1), _ops.reshape(v, -1))
    return _ops.reshape(flat, *_np(a).shape)


def fill_diagonal(self, fill_value, wrap=False):
    d = _np(self)
    if d.ndim < 2 or (d.ndim > 2 and len(set(d.shape)) != 1):
        raise RuntimeError('all dimensions of input must be of equal length (or a matrix)')
    mask = np.zeros(d.shape, bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return _ew.where(mask, np.asarray(fill_value, d.dtype), self)


_SINC_SERIES = (-1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6)


@node_named('SincBackward0', 'input')
def sinc(input):  # noqa: A002
    """``sin(pi x) / (pi x)``, 1 at 0.  Near 0 (|pi x| < 0.1) its Taylor series in
    u = (pi x)^2 instead (truncated below 1e-21): the quotient's derivative
    cancels there (at x = 1e-10 it came out -1.5e-6, for -3.3e-10), the
    series' derivatives do not (gradient 0 at 0, second derivative -pi^2/3)."""
    a = _float_input(_t(input))
    d = _np(a)
    dt = d.dtype
    with np.errstate(invalid='ignore'):
        small = np.abs(d) < 0.1 / np.pi
    if not small.any():
        px = _ops.mul(a, np.pi)
        return _ops.div(_ops.sin(px), px)
    note_value_use('sinc')
    px = _ops.mul(_ew.where(small, np.asarray(1, dt), a), np.pi)      # (1 where small)
    quotient = _ops.div(_ops.sin(px), px)
    pxs = _ops.mul(_ew.where(small, a, np.asarray(0, dt)), np.pi)     # (0 elsewhere)
    u = _ops.mul(pxs, pxs)
    series = _ops.mul(u, _SINC_SERIES[0])
    for c in _SINC_SERIES[1:]:
        series = _ops.mul(_ops.add(series, c), u)
    return _ew.where(small, _ops.add(series, 1.0), quotient)


def copysign(input, other):  # noqa: A002
    """``|input|`` with the sign bit of ``other`` (whose gradient is zero), in the
    promoted dtype of the two (a float one), as PyTorch."""
    from . import result_type
    a = _t(input)
    o = _np(other) if isinstance(other, Tensor) else np.asarray(other)
    if isinstance(other, Tensor):
        dt = np.dtype(result_type(a, other))
        if dt.kind not in 'fc':
            dt = np.dtype(default_dtype[0])
        if dt != _np(a).dtype:
            a = _ops.to(a, dt)
    else:
        a = _float_input(a)
    out = _ops.mul(_ops.abs_(a), np.where(np.signbit(o), -1, 1).astype(_np(a).dtype))
    if isinstance(other, Tensor) and other._rg and grad_mode.enabled:
        # PyTorch gives other a zero gradient (not None): a where that never picks it
        b = other if _np(other).dtype == _np(out).dtype else _ops.to(other, _np(out).dtype)
        out = _ew.where(np.zeros(_np(out).shape, bool), b, out)
    return out


def _nan_aware(name, keep_first):
    def f(input, other):  # noqa: A002
        a = _t(input)
        b = _t(other, a)
        ad, bd = _np(a), _np(b)
        note_value_use(name)
        with np.errstate(invalid='ignore'):
            first = keep_first(ad, bd) | np.isnan(bd)
        return _ew.where(first, a, b)
    f.__name__ = name
    f.__doc__ = (f'Elementwise {name[1:]}imum that ignores NaN (NaN only where both are); '
                 'ties give the gradient to ``input``, as PyTorch.')
    return f


fmax = _nan_aware('fmax', np.greater_equal)
fmin = _nan_aware('fmin', np.less_equal)


def _bool_of(npf, name):
    def f(input):  # noqa: A002
        return _leaf(np.asarray(npf(_np(_t(input)))))
    f.__name__ = name
    f.__doc__ = f'``{name}``, a bool tensor (not differentiable).'
    return f


isposinf = _bool_of(np.isposinf, 'isposinf')
isneginf = _bool_of(np.isneginf, 'isneginf')
signbit = _bool_of(np.signbit, 'signbit')
isreal = _bool_of(lambda d: np.ones(d.shape, bool) if d.dtype.kind != 'c' else d.imag == 0,
                  'isreal')


def positive(input):  # noqa: A002
    """``+input``: the tensor itself."""
    return input


def rsub(input, other, *, alpha=1):  # noqa: A002
    """``other - alpha * input``."""
    a = _t(input)
    if alpha == 1 and type(other) in (int, float):
        return _ops.rsub(a, other)          # other - a, as ``other - input``: RsubBackward1
    return _ops.sub(_t(other, a), a if alpha == 1 else _ops.mul(a, alpha))


def float_power(input, exponent):  # noqa: A002
    """``input ** exponent`` in float64."""
    a = _ops.to(_t(input), np.float64)
    e = _ops.to(exponent, np.float64) if isinstance(exponent, Tensor) else exponent
    return _ops.pow_(a, e) if isinstance(a, Tensor) else _ops.rpow(e, a)


def asinh(input):  # noqa: A002
    """``log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))`` with the sign of x: no cancellation
    near 0 or for large negative x."""
    a = _float_input(_t(input))
    neg = _np(a) < 0
    x = _ew.where(neg, _ops.neg(a), a) if neg.any() else a
    x2 = _ops.mul(x, x)
    y = _ew.log1p(_ops.add(x, _ops.div(x2, _ops.add(_ops.sqrt(_ops.add(x2, 1.0)), 1.0))))
    return _ew.where(neg, _ops.neg(y), y) if neg.any() else y


def acosh(input):  # noqa: A002
    """``log(x + sqrt(x^2 - 1))`` (NaN below 1)."""
    a = _float_input(_t(input))
    with np.errstate(invalid='ignore'):
        return _ops.log(_ops.add(a, _ops.sqrt(_ops.sub(_ops.mul(a, a), 1.0))))


def atanh(input):  # noqa: A002
    """``(log1p(x) - log1p(-x)) / 2``."""
    a = _float_input(_t(input))
    with np.errstate(invalid='ignore', divide='ignore'):
        return _ops.mul(_ops.sub(_ew.log1p(a), _ew.log1p(_ops.neg(a))), 0.5)


@node_named('Deg2RadBackward0', 'input')
def deg2rad(input):  # noqa: A002
    """Degrees to radians."""
    return _ops.mul(_float_input(_t(input)), np.pi / 180)


@node_named('Rad2DegBackward0', 'input')
def rad2deg(input):  # noqa: A002
    """Radians to degrees."""
    return _ops.mul(_float_input(_t(input)), 180 / np.pi)


@node_named('ModeBackward0', 'input', output=0)
def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """(values, indices) of the most frequent value along ``dim`` (the smallest
    among equally frequent ones; the index of its last occurrence).

    >>> import tape
    >>> tape.mode(tape.tensor([1, 2, 2, 3])).values
    tensor(2)
    """
    a = _t(input)
    d = _np(a)
    note_value_use('mode')
    if d.ndim == 0:
        return _zero_dim_pick(a, d, dim, 'mode')
    dim = _norm_dim(dim, d.ndim, 'mode')
    if d.shape[dim] == 0:
        raise IndexError(f'mode(): Expected reduction dim {dim} to have non-zero size.')
    rows = np.moveaxis(d, dim, -1).reshape(-1, d.shape[dim])
    idx = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        vals, counts = np.unique(row, return_counts=True)   # sorted: argmax picks the smallest
        v = vals[np.argmax(counts)]
        idx[r] = np.flatnonzero(row == v)[-1] if v == v else np.flatnonzero(row != row)[-1]
    idx = np.expand_dims(idx.reshape(np.moveaxis(d, dim, -1).shape[:-1]), dim)
    flat = np.take_along_axis(_flat_index(d.shape), idx, axis=dim)
    if not keepdim:
        idx, flat = np.squeeze(idx, dim), np.squeeze(flat, dim)
    return values_indices('mode', _pick(a, flat), _leaf(idx))


_MinMax = _return_type('aminmax', ('min', 'max'))


@node_named('AminmaxBackward0', 'input', output='all')
def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """``(amin, amax)`` over ``dim`` (all elements if None)."""
    a = _t(input)
    if dim is None:
        lo, hi = _red.amin(a), _red.amax(a)
        if keepdim:
            ones = (1,) * _np(a).ndim
            lo, hi = _ops.reshape(lo, *ones), _ops.reshape(hi, *ones)
        return _MinMax(lo, hi)
    return _MinMax(_red.amin(a, dim, keepdim), _red.amax(a, dim, keepdim))


@node_named('VdotBackward0', 'input', 'other')
def vdot(input, other):  # noqa: A002
    """The dot product of two 1-D tensors (real dtypes: ``dot``)."""
    return _la.dot(input, other)


def multi_dot(tensors, *, out=None):
    """``torch.linalg.multi_dot`` (with ``out=``)."""
    from ._out import into_out
    tensors = list(tensors)
    return into_out(_multi_dot(tensors), out, 'linalg_multi_dot', *tensors)


def _multi_dot(tensors):
    """``torch.linalg.multi_dot``: the product of the matrices, left to right (a 1-D
    first or last tensor is a row or a column vector)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f'multi_dot(): expected at least 2 tensors but got {len(tensors)}')
    out = tensors[0]
    for t in tensors[1:]:
        out = _la.matmul(out, t)
    return out


@node_named('RenormBackward0', 'input')
def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to it
    (by ``maxnorm / (norm + 1e-7)``, as PyTorch); the gradient goes through the norm."""
    a = _t(input)
    d = _np(a)
    dim = _norm_dim(dim, d.ndim, 'renorm')
    others = tuple(i for i in range(d.ndim) if i != dim)
    norm = _red.norm(a, p, others, True)
    over = _np(norm) > maxnorm
    scale = _ew.where(over, _ops.rdiv(_ops.add(norm, 1e-7), maxnorm), np.asarray(1, d.dtype))
    return _ops.mul(a, scale)


def _trapezoid_parts(y, x, dx, dim):
    y = _float_input(_t(y))
    d = _np(y)
    dim = _norm_dim(dim, d.ndim, 'trapezoid')
    n = d.shape[dim]
    mid = _ops.mul(_ops.add(_sh.narrow(y, dim, 1, n - 1), _sh.narrow(y, dim, 0, n - 1)), 0.5)
    if x is not None:
        x = _t(x, y)
        step = diff(x, dim=-1 if _np(x).ndim == 1 else dim)
        if _np(x).ndim == 1 and d.ndim > 1:
            step = _ops.reshape(step, *[n - 1 if i == dim else 1 for i in range(d.ndim)])
        return _ops.mul(mid, step), dim
    return _ops.mul(mid, 1.0 if dx is None else dx), dim


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along ``dim`` (sample points ``x``, or spacing ``dx``, 1 by default)."""
    parts, dim = _trapezoid_parts(y, x, dx, dim)
    return _ops.sum_(parts, dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """``trapezoid`` (its older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along ``dim`` (one element fewer than ``y``)."""
    parts, dim = _trapezoid_parts(y, x, dx, dim)
    return _red.cumsum(parts, dim)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """The covariance of the variables in the rows (observations in the columns),
    NumPy's formula for frequency and analytic weights."""
    x = _float_input(_t(input))
    if _np(x).ndim > 2:
        raise ValueError(f'cov(): expected input to have two or fewer dimensions but got an '
                         f'input with {_np(x).ndim} dimensions')
    if _np(x).ndim < 2:
        x = _ops.reshape(x, 1, -1)
    n = _np(x).shape[1]
    w = None
    for extra in (fweights, aweights):
        if extra is not None:
            e = _t(extra, x)
            w = e if w is None else _ops.mul(w, e)
    if w is None:
        mean_ = _ops.mean(x, 1, True)
        fact = n - correction
        xc = _ops.sub(x, mean_)
        c = _la.matmul(xc, _ops.t(xc))
    else:
        w = _ops.to(w, _np(x).dtype)
        wsum = _ops.sum_(w)
        mean_ = _ops.div(_ops.sum_(_ops.mul(x, w), 1, True), wsum)
        if aweights is None:
            fact = _ops.sub(wsum, correction)
        else:
            fact = _ops.sub(wsum, _ops.div(_ops.mul(_ops.sum_(_ops.mul(w, _t(aweights, x))),
                                                    correction), wsum))
        xc = _ops.sub(x, mean_)
        c = _la.matmul(_ops.mul(xc, w), _ops.t(xc))
    if not isinstance(fact, Tensor) and fact <= 0:
        fact = 0.0
    with np.errstate(divide='ignore', invalid='ignore'):
        c = _ops.div(c, fact)
    return _ops.reshape(c, ()) if _np(_t(input)).ndim < 2 or _np(c).shape == (1, 1) \
        and _np(_t(input)).ndim < 2 else c


def corrcoef(input):  # noqa: A002
    """Pearson correlation of the rows, clipped to [-1, 1] as PyTorch's."""
    c = cov(input)
    if _np(c).ndim == 0:
        return _ops.div(c, c)
    sd = _ops.sqrt(diagonal(c))
    c = _ops.div(_ops.div(c, _ops.reshape(sd, -1, 1)), _ops.reshape(sd, 1, -1))
    return _ew.clamp(c, -1, 1)


def block_diag(*tensors):
    """The tensors (0-D, 1-D or 2-D) as the blocks of a block-diagonal matrix."""
    ts = [_t(t) for t in tensors]
    for i, t in enumerate(ts):
        if _np(t).ndim > 2:
            raise RuntimeError(f'torch.block_diag: Input tensors must have 2 or fewer '
                               f'dimensions. Input {i} has {_np(t).ndim} dimensions')
    blocks = [_ops.reshape(t, *((1, 1) if _np(t).ndim == 0 else (1, -1) if _np(t).ndim == 1
                                else _np(t).shape)) for t in ts]
    dt = _dtypes.result_type(*[_np(b) for b in blocks]) if blocks else default_dtype[0]
    blocks = [b if _np(b).dtype == dt else _ops.to(b, dt) for b in blocks]
    width = builtins.sum(_np(b).shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        r, c = _np(b).shape
        pieces = [_leaf(np.zeros((r, left), dt)), b, _leaf(np.zeros((r, width - left - c), dt))]
        rows.append(_sh.cat(pieces, 1))
        left += c
    # (no tensors: PyTorch's 1 x 0 result)
    return _sh.cat(rows, 0) if rows else _leaf(np.zeros((1, 0), dt))


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts in ``bins`` equal bins over [min, max] (the data's range when both are
    0); elements outside are ignored.  Not differentiable."""
    d = _np(_t(input))
    if d.dtype.kind not in 'f':
        raise NotImplementedError(f'"histogram_cpu" not implemented for '
                                  f"'{_torch_dtype_name(d.dtype)}' (histc of shape "
                                  f'{tuple(d.shape)})')
    if int(bins) <= 0:
        raise RuntimeError(f'torch.histogram(): bins must be > 0, but got {bins} for dimension 0')
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError(f'torch.histc: max must be larger than min (got min={min}, '
                           f'max={max})')
    if lo == hi and d.size:
        lo, hi = float(d.min()), float(d.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f'torch.histc: range of [{lo:g}, {hi:g}] is not finite')
    # PyTorch's kernel: the bin by one division in the input's dtype, truncated (the
    # last bin keeps its right edge); NumPy's histogram, with float64 edges, put
    # values near an edge in the other bin
    t = d.dtype.type
    lo, hi, n = t(lo), t(hi), int(bins)
    flat = d.reshape(-1)
    with np.errstate(invalid='ignore'):
        inside = flat[(flat >= lo) & (flat <= hi)]
        pos = np.trunc((inside - lo) * t(n) / (hi - lo)).astype(np.int64)
    pos[pos == n] = n - 1
    return _leaf(np.bincount(pos, minlength=n).astype(d.dtype))


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The bucket index of each element among the sorted ``boundaries``."""
    x = _np(input) if isinstance(input, Tensor) else np.asarray(input)
    if _np(boundaries).ndim != 1:
        raise RuntimeError(f'boundaries tensor must be 1 dimension, but got '
                           f'dim({_np(boundaries).ndim})')
    out = np.searchsorted(_np(boundaries), x, side='right' if right else 'left')
    return _leaf(np.asarray(out, np.int32 if out_int32 else np.int64))


def _integer_pair(npf, name):
    def f(input, other):  # noqa: A002
        return _leaf(np.asarray(npf(_np(_t(input)), _np(_t(other)))))
    f.__name__ = name
    f.__doc__ = f'Elementwise ``{name}`` of integer tensors.'
    return f


gcd = _integer_pair(np.gcd, 'gcd')
lcm = _integer_pair(np.lcm, 'lcm')


def is_nonzero(self):
    """Whether the one-element tensor is not zero."""
    if _np(self).size != 1:
        raise RuntimeError('Boolean value of Tensor with more than one value is ambiguous'
                           if _np(self).size else
                           'Boolean value of Tensor with no values is ambiguous')
    return builtins.bool(_np(self).reshape(-1)[0] != 0)


def is_same_size(self, other):
    """Whether the two tensors have the same shape."""
    return _np(self).shape == _np(other).shape


def dropout(input, p=0.5, train=True):  # noqa: A002
    """``tape.nn.functional.dropout``, as ``torch.dropout`` takes its arguments."""
    from .nn import functional
    return functional.dropout(input, p, train)


_NEW_FUNCTIONS.update({
    'rot90': rot90, 'broadcast_shapes': broadcast_shapes, 'broadcast_tensors': broadcast_tensors,
    'atleast_1d': atleast_1d, 'atleast_2d': atleast_2d, 'atleast_3d': atleast_3d,
    'hsplit': hsplit, 'vsplit': vsplit, 'dsplit': dsplit, 'dstack': dstack,
    'column_stack': column_stack, 'ravel': ravel, 'argwhere': argwhere,
    'index_copy': index_copy, 'index_fill': index_fill, 'masked_scatter': masked_scatter,
    'index_put': index_put, 'sinc': sinc, 'copysign': copysign, 'fmax': fmax, 'fmin': fmin,
    'isposinf': isposinf, 'isneginf': isneginf, 'signbit': signbit, 'isreal': isreal,
    'positive': positive, 'rsub': rsub, 'float_power': float_power,
    'asinh': asinh, 'acosh': acosh, 'atanh': atanh, 'arcsinh': asinh, 'arccosh': acosh,
    'arctanh': atanh, 'deg2rad': deg2rad, 'rad2deg': rad2deg, 'mode': mode,
    'aminmax': aminmax, 'vdot': vdot, 'renorm': renorm, 'trapezoid': trapezoid,
    'trapz': trapz, 'cumulative_trapezoid': cumulative_trapezoid, 'cov': cov,
    'corrcoef': corrcoef, 'block_diag': block_diag, 'histc': histc, 'bucketize': bucketize,
    'gcd': gcd, 'lcm': lcm, 'dropout': dropout,
    'sgn': node_named('SgnBackward0', 'a')(_ew.sign), 'fix': _ew.trunc, 'absolute': _ops.abs_,
    'bitwise_and': _ew.bitwise_and, 'bitwise_or': _ew.bitwise_or,
    'bitwise_xor': _ew.bitwise_xor, 'bitwise_not': _ew.bitwise_not,
    'row_stack': _sh.vstack,
})
for _name in ('rot90', 'ravel', 'argwhere', 'index_copy', 'index_fill', 'masked_scatter',
              'index_put', 'sinc', 'copysign', 'fmax', 'fmin', 'isposinf', 'isneginf',
              'signbit', 'isreal', 'positive', 'float_power', 'asinh', 'acosh', 'atanh',
              'arcsinh', 'arccosh', 'arctanh', 'deg2rad', 'rad2deg', 'mode', 'aminmax', 'vdot',
              'renorm', 'histc', 'sgn', 'fix', 'absolute', 'bitwise_and', 'bitwise_or',
              'bitwise_xor', 'bitwise_not', 'gcd', 'lcm', 'hsplit', 'vsplit', 'dsplit'):
    _NEW_METHODS[_name] = _NEW_FUNCTIONS[_name]
_NEW_METHODS.update({
    'unfold': unfold, 'is_nonzero': is_nonzero, 'is_same_size': is_same_size,
    'index_put_': _inplace(_named(index_put, 'index_put'), 'index_put_'),
    'index_copy_': _inplace(_named(index_copy, 'index_copy'), 'index_copy_'),
    'index_fill_': _inplace(_named(index_fill, 'index_fill'), 'index_fill_'),
    'masked_scatter_': _inplace(_named(masked_scatter, 'masked_scatter'), 'masked_scatter_'),
    'fill_diagonal_': _inplace(_named(fill_diagonal, 'fill_diagonal'), 'fill_diagonal_'),
    'copysign_': _inplace(_named(copysign, 'copysign'), 'copysign_'),
    'sinc_': _inplace(_named(sinc, 'sinc'), 'sinc_'),
    'deg2rad_': _inplace(_named(deg2rad, 'deg2rad'), 'deg2rad_'),
    'rad2deg_': _inplace(_named(rad2deg, 'rad2deg'), 'rad2deg_'),
    'renorm_': _inplace(_named(renorm, 'renorm'), 'renorm_'),
})


def _register():
    # never shadow what tape or Tensor already has (tape/__init__.py runs before us)
    import sys
    package = sys.modules[__package__]
    for name, fn in _NEW_FUNCTIONS.items():
        if not hasattr(package, name):
            FUNCTIONS[name] = fn
    for name, fn in _NEW_METHODS.items():
        if not hasattr(Tensor, name):
            METHODS[name] = fn


_register()
