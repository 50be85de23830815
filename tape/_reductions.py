"""Reductions beyond sum and mean, written in primitives (plus cumsum/cumprod records).

* ``max``/``min`` along a dim pick values at the arg-max with one take record,
  so the gradient goes to that element, as in PyTorch; over all elements, and
  ``amax``/``amin``, ties share the gradient evenly (PyTorch's rule): the
  values are a sum of ``x * w`` with a constant weight ``w = tie / count``.
* ``prod`` is the last element of a ``cumprod``, whose kernel is exact with zeros.
* ``var``/``std`` are two-pass (mean, then squared deviations); ``std`` and
  ``norm`` end in a root whose gradient is 0 where the value is 0, as
  PyTorch masks it.
* ``logsumexp`` shifts by the (constant) maximum, so it neither overflows nor
  loses the gradient, which is exactly the softmax.

>>> import tape
>>> x = tape.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
>>> x.max(dim=1)
tape.return_types.max(
values=tensor([5., 3.], grad_fn=<MaxBackward0>),
indices=tensor([1, 0]))
"""
import math

import numpy as np

from ._composite_nodes import node_named
from . import _ops
from ._ops import _dims, _record_struct, _record_unary
from ._big import BIG, BasicKey, UniqueIndex
from ._rules import OP
from ._structural import record_cumprod, record_cumsum
from ._out import into_out
from .return_types import values_indices
from ._tape import grad_mode, note_value_use
from ._tensor import Tensor, _leaf, _norm_dim


def _t(x):
    return x if isinstance(x, Tensor) else _ops._const(x)


def take_as(name, a, out, index, key=None, unique=False):
    """Record ``out = a.flatten()[index]`` under rule ``name`` (a 'take' kind);
    ``key``: ``out`` is ``a[key]`` for a basic-indexing key, which a large
    record keeps instead of the index map (see tape/_big.py's BasicKey);
    ``unique``: no position repeats, so a large record's backward may scatter
    (tape/_big.py's UniqueIndex)."""
    if a._rg and grad_mode.enabled:
        if key is not None and a._data.size >= BIG:
            return _ops._record_struct(OP[name], a, out, x=a._data.size,
                                       big_attrs=BasicKey(key, a._data.shape))
        idx = np.ascontiguousarray(index, dtype=np.int64).reshape(-1)
        big_attrs = idx.view(UniqueIndex) if unique and a._data.size >= BIG else None
        return _record_struct(OP[name], a, out, x=a._data.size, attrs=idx,
                              big_attrs=big_attrs)
    return _leaf(out)


def _flat_index(shape):
    return _ops.flat_index(tuple(int(s) for s in shape))


def _one_dim(dim, ndim, opname):
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            raise RuntimeError(f'{opname}: expected a single dim, got {tuple(dim)}')
        dim = dim[0]
    return _norm_dim(dim, ndim, opname)


# ------------------------------------------------------- cumsum, cumprod
def _cum(opname, npf, record):
    def f(a, dim, dtype=None):
        a = _t(a)
        d = a._data
        if dtype is not None:
            a = _ops.to(a, dtype)
            d = a._data
        dim = _norm_dim(dim, np.ndim(d), opname)
        if np.ndim(d) == 0:
            return _ops.reshape(f(_ops.reshape(a, 1), 0), ())
        if npf is np.cumsum and type(d) is np.ndarray and d.dtype == np.float32:
            out = _cumsum32(d, dim)
        elif type(d) is np.ndarray and d.dtype == np.float16:
            # accumulated in float32, as PyTorch's (NumPy's accumulates in float16)
            out = npf(d, axis=dim, dtype=np.float32).astype(np.float16)
        else:
            try:
                out = npf(d, axis=dim)
            except RuntimeWarning as e:
                out = _ops.quietly(e, npf, d, axis=dim)
        if out.dtype.kind == 'b' or (out.dtype.kind in 'iu' and out.dtype != np.int64):
            out = out.astype(np.int64)
        return record(a, out, dim)
    f.__name__ = f.__qualname__ = opname
    return f


def _cumsum32(d, dim):
    """float32 cumsum accumulated in float64, as PyTorch's CPU kernel (and its
    values), in one compiled pass (compiler/cumgrad.py)."""
    from compiler.cumgrad import cumsum_fwd
    d = np.ascontiguousarray(d)
    shape = d.shape
    out = np.empty(shape, np.float32)
    if d.size:
        outer = math.prod(shape[:dim])
        inner = math.prod(shape[dim + 1:])
        cumsum_fwd(d.reshape(-1), out.reshape(-1), outer, shape[dim], inner)
    return out


cumsum = _cum('cumsum', np.cumsum, record_cumsum)
cumprod = _cum('cumprod', np.cumprod, record_cumprod)


# ------------------------------------------------------------------ prod
@node_named(lambda a, dim: ('ProdBackward0' if dim is None else 'ProdBackward1', 1), 'a', 'dim')
def prod(a, dim=None, keepdim=False, dtype=None):
    a = _t(a)
    if dtype is not None:
        a = _ops.to(a, dtype)
    d = a._data
    if dim is None:
        try:
            out = np.prod(d)
        except RuntimeWarning as e:
            out = _ops.quietly(e, np.prod, d)
        if np.dtype(out.dtype).kind in 'bu' or np.dtype(out.dtype).kind == 'i':
            out = np.int64(out) if dtype is None else np.asarray(out).astype(dtype)[()]
        if not (a._rg and grad_mode.enabled):
            return _leaf(out)
        if d.size == 0:
            return _ops.add(_ops.mul(_ops.sum_(a), 0.0), 1.0)
        c = cumprod(_ops.reshape(a, -1), 0)
        return take_as('prod', c, out, np.array([d.size - 1]), unique=True)
    dim = _one_dim(dim, np.ndim(d), 'prod')
    if np.ndim(d) == 0:
        return prod(a) if not keepdim else _ops.reshape(prod(a), ())
    try:
        out = np.prod(d, axis=dim, keepdims=keepdim)
    except RuntimeWarning as e:
        out = _ops.quietly(e, np.prod, d, axis=dim, keepdims=keepdim)
    if out.dtype.kind in 'bui' and out.dtype != (np.int64 if dtype is None else d.dtype):
        out = out.astype(np.int64 if dtype is None else d.dtype)
    if not (a._rg and grad_mode.enabled):
        return _leaf(out)
    n = d.shape[dim]
    if n == 0:
        return _ops.add(_ops.mul(_ops.sum_(a, dim, keepdim), 0.0), 1.0)
    c = cumprod(a, dim)
    if d.size >= BIG and (keepdim or np.ndim(d) > 1):
        # a large record keeps the basic-indexing key (the last position along
        # dim), not an index map built from an int64 copy of every position
        key = (slice(None),) * dim + ((slice(n - 1, n),) if keepdim else (n - 1,))
        return take_as('prod_dim', c, out, None, key=key)
    idx = np.take(_flat_index(d.shape), [n - 1] if keepdim else n - 1, axis=dim)
    return take_as('prod_dim', c, out, idx, unique=True)     # one position per row


# ------------------------------------------------------- max, min, args
def _arg(npf, opname):
    def f(a, dim=None, keepdim=False):
        note_value_use(opname)
        d = np.asarray(_t(a)._data)
        if d.dtype == np.bool_:
            raise RuntimeError(f'{opname}(): does not support bool input')
        if d.size == 0 and dim is None:
            raise IndexError(f'{opname}(): Expected reduction dim to be specified for '
                             f'input.numel() == 0 (input of shape {tuple(d.shape)})')
        if dim is None:
            out = npf(d.reshape(-1))
            return _leaf(np.reshape(np.int64(out), (1,) * d.ndim) if keepdim else np.int64(out))
        dim = _one_dim(dim, d.ndim, opname)
        if d.ndim == 0:
            return _leaf(np.int64(0))
        _check_nonempty(d, (dim,), opname)      # an empty input along another dim is fine
        return _leaf(npf(d, axis=dim, keepdims=keepdim).astype(np.int64))
    f.__name__ = opname
    return f


def _check_nonempty(d, dims, opname):
    for k in dims:
        if d.shape[k] == 0:
            raise IndexError(f'{opname}(): Expected reduction dim {k} to have non-zero size '
                             f'(input of shape {tuple(d.shape)})')


def _np_argmax(d, axis=None, keepdims=False):
    # NaN is the maximum, as in PyTorch (np.argmax already returns the first NaN)
    return np.argmax(d, axis=axis, keepdims=keepdims)


def _np_argmin(d, axis=None, keepdims=False):
    # NaN is also the minimum, as in PyTorch: np.argmin returns the first NaN
    # of each row that has one and the ordinary argmin of the rest
    return np.argmin(d, axis=axis, keepdims=keepdims)


argmax = _arg(_np_argmax, 'argmax')
argmin = _arg(_np_argmin, 'argmin')


def _extreme(a, dim, keepdim, opname, argf, take_name):
    d = np.asarray(a._data)
    dim = _one_dim(dim, d.ndim, opname)
    if d.ndim == 0:
        return values_indices(opname, _ops.clone(a) if a._rg else _leaf(a._data),
                              _leaf(np.int64(0)))
    if d.shape[dim] == 0:
        raise IndexError(f'{opname}(): Expected reduction dim {dim} to have non-zero size '
                         f'(input of shape {tuple(d.shape)})')
    idx = argf(d, axis=dim, keepdims=True)
    flat = np.take_along_axis(_flat_index(d.shape), idx, axis=dim)
    if not keepdim:
        flat = np.squeeze(flat, axis=dim)
        idx = np.squeeze(idx, axis=dim)
    values = d.reshape(-1)[flat]
    # one position per output element: a large record's backward scatters
    # (tape/_big.py's UniqueIndex) instead of a bincount over the whole input
    return values_indices(opname, take_as(take_name, a, values, flat, unique=True),
                          _leaf(idx.astype(np.int64)))


_NAMED_SUMS = {}     # rule name -> a sum recorded under that rule (its node's name)


def _named_sum(rule):
    f = _NAMED_SUMS.get(rule)
    if f is None:
        f = _NAMED_SUMS[rule] = _ops._reduce(rule, rule + '_dim' if rule + '_dim' in OP
                                             else 'sum_dim', _ops._np_sum, lambda n: 1.0)
    return f


def _evenly(a, dims, keepdim, value, nan_ties=True, rule=None):
    """Values ``value`` (keepdim shape) with the gradient shared evenly among ties.

    ``rule``: the sum's rule (its ``_dim`` twin along dims), which names the
    node as PyTorch does (``amax_even``: AmaxBackward0).

    Recorded as ``sum(a * w, dims)`` with the constant ``w = tie / count``; the
    result then gets the exact values (the products can round).  A NaN extreme
    ties the NaNs (max(), median()'s evenly_distribute_backward); with
    ``nan_ties=False`` nothing ties it, so its whole slice gets ``0 / 0``, NaN
    (amax/amin's scale_grad_by_count: ``grad / (result == self).sum() * mask``)."""
    d = np.asarray(a._data)
    k = d.ndim if dims is None else len(dims)
    if not nan_ties and d.dtype.kind == 'f' and np.isnan(value).any():
        tie = d == value
        with np.errstate(invalid='ignore'):
            w = _leaf((tie / tie.sum(axis=dims, keepdims=True)).astype(d.dtype))
    elif d.dtype in (np.float32, np.float64) and d.flags.c_contiguous and d.size and (
            dims is None or tuple(sorted(dims)) == tuple(range(d.ndim - k, d.ndim))):
        # the reduced dims are the trailing ones (dim=-1, or all): rows of a 2-d
        # view, one compiled pass each for the count and the weights
        from compiler.kernels import even_weights_rows
        w = np.empty(d.shape, d.dtype)
        n = int(math.prod(d.shape[d.ndim - k:]))
        even_weights_rows(d.reshape(-1, n), np.ascontiguousarray(value).reshape(-1),
                          w.reshape(-1, n))
        w = _leaf(w)
    else:
        if d.dtype.kind == 'f':
            tie = np.where(np.isnan(value), np.isnan(d), d == value)     # NaN is the max
        else:
            tie = d == value
        count = tie.sum(axis=dims, keepdims=True)
        w = _leaf((tie / count).astype(d.dtype))
    with np.errstate(all='ignore'):
        r = (_ops.sum_ if rule is None else _named_sum(rule))(_ops.mul(a, w), dims, keepdim)
    if not keepdim:
        value = value.reshape(()) if dims is None else np.squeeze(value, axis=dims)
    value = np.asarray(value, dtype=np.asarray(r._data).dtype)
    r._data = value if value.ndim else value[()]
    return r


# (shape, dim, keepdim) -> (axis, base, stride) for max/min along one int dim of a
# non-empty input: ``base`` (read-only int64, the output's shape) is the flat
# index of each output element's first input position along the axis, ``stride``
# the axis's step in flat positions, so the arg-max ``i`` picks ``base + i * stride``
_PICKS = {}


def _picks(shape, dim, keepdim):
    axis = dim + len(shape) if dim < 0 else dim       # (in range: checked by the caller)
    stride = math.prod(shape[axis + 1:])
    step = shape[axis] * stride
    base = np.arange(math.prod(shape[:axis]), dtype=np.int64)[:, None] * step \
        + np.arange(stride, dtype=np.int64)
    base = base.reshape(shape[:axis] + ((1,) if keepdim else ()) + shape[axis + 1:])
    base.flags.writeable = False
    if len(_PICKS) >= 256:
        _PICKS.clear()
    hit = _PICKS[(shape, dim, keepdim)] = (axis, base, stride)
    return hit


def _extreme_fast(a, d, dim, keepdim, argf, take_name, opname):
    """max/min along the int ``dim`` of a non-empty floating or integer array ``d``
    (``a``'s, ``dim`` in range, size along it non-zero; ``argf`` np.ndarray.argmax
    or argmin): ``_extreme``'s values, indices and record, the pick positions
    from a cached base (``_PICKS``) instead of a take_along_axis of the whole grid."""
    hit = _PICKS.get((d.shape, dim, keepdim))
    if hit is None:
        hit = _picks(d.shape, dim, keepdim)
    axis, base, stride = hit
    # (the ndarray method: np.argmax's Python wrapper costs more than the call;
    # NaN wins, the first of a row, as in PyTorch)
    idx = argf(d, axis, keepdims=keepdim)
    if type(idx) is not np.ndarray or idx.dtype != _I64:
        idx = np.array(idx, np.int64)   # (a 1-D input's is a NumPy scalar)
    if stride == 1:
        flat = idx + base
    else:
        flat = idx * stride
        flat += base
    values = d.reshape(-1)[flat]
    # one position per output element: a large record's backward scatters
    # (tape/_big.py's UniqueIndex) instead of a bincount over the whole input
    return values_indices(opname, take_as(take_name, a, values, flat, unique=True), _leaf(idx))


_I64 = np.dtype(np.int64)


def _extreme_all(a, d, value, opname):
    """max() or min() of all of ``a`` (data ``d``, extreme ``value``, keepdims) as
    PyTorch records it (MaxBackward1): a take of the extreme's position when
    one element holds it, else the gradient shared evenly among the ties."""
    v = value.reshape(-1)[0]
    tie = np.isnan(d) if d.dtype.kind == 'f' and v != v else d == v     # NaN wins
    if np.count_nonzero(tie) == 1:
        pos = np.array([np.argmax(tie)], np.int64)     # (the flat index, C order)
        return take_as(opname + '_all', a, d.reshape(-1)[pos[0]], pos, unique=True)
    return _evenly(a, None, False, value, rule=opname + '_even')


def _max_min(npf, argf, opname, take_name, binary, arg_method):
    def f(a, dim=None, keepdim=False, *, out=None):
        if out is not None:         # (values and indices, or max(a, b)'s one tensor)
            return into_out(f(a, dim, keepdim), out, opname, a, dim)
        if type(dim) is int and type(a) is Tensor:
            # the common call: one int dim of a non-empty float or integer tensor
            d = a._data
            if type(d) is np.ndarray and d.dtype.kind in 'fiu':
                nd = d.ndim
                if nd and -nd <= dim < nd and d.shape[dim] and (keepdim is False
                                                                or keepdim is True):
                    note_value_use(opname)      # which element wins (and ties) is baked in
                    return _extreme_fast(a, d, dim, keepdim, arg_method, take_name, opname)
        a = _t(a)
        if not isinstance(dim, Tensor):
            note_value_use(opname)          # which element wins (and ties) is baked in
        if isinstance(dim, Tensor):            # max(a, other): elementwise
            return binary(a, dim)
        d = np.asarray(a._data)
        if dim is None:
            if d.size == 0:
                raise RuntimeError(f'{opname}(): Expected reduction dim to be specified for '
                                   f'input.numel() == 0. Specify the reduction dim with the '
                                   f"'dim' argument (input of shape {tuple(d.shape)})")
            value = npf(d, axis=None, keepdims=True)
            if not (a._rg and grad_mode.enabled):
                return _leaf(value.reshape(())[()])
            return _extreme_all(a, d, value, opname)
        return _extreme(a, dim, keepdim, opname, argf, take_name)
    f.__name__ = opname
    return f


max = _max_min(np.max, _np_argmax, 'max', 'max_dim', _ops.maximum,  # noqa: A001
               np.ndarray.argmax)
min = _max_min(np.min, _np_argmin, 'min', 'min_dim', _ops.minimum,  # noqa: A001
               np.ndarray.argmin)


def _amax_amin(npf, opname, nan_ties=False):
    def f(a, dim=(), keepdim=False):
        note_value_use(opname)
        a = _t(a)
        d = np.asarray(a._data)
        if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
            dims = None
        else:
            dims = _dims(dim, d.ndim, opname) if d.ndim else None
        if d.size == 0:
            if dims is None:
                raise RuntimeError(f'{opname}(): Expected reduction dim to be specified for '
                                   f'input.numel() == 0. Specify the reduction dim with the '
                                   f"'dim' argument (input of shape {tuple(d.shape)})")
            _check_nonempty(d, dims, opname)
        value = npf(d, axis=dims, keepdims=True)
        if not (a._rg and grad_mode.enabled):
            if keepdim:
                return _leaf(value)
            return _leaf(value.reshape(())[()] if dims is None else np.squeeze(value, axis=dims))
        return _evenly(a, dims, keepdim, value, nan_ties=nan_ties, rule=opname + '_even')
    f.__name__ = opname
    return f


amax = node_named('AmaxBackward0', 'a')(_amax_amin(np.max, 'amax'))
amin = node_named('AminBackward0', 'a')(_amax_amin(np.min, 'amin'))
# the inf-norms' reductions of |x|: PyTorch's norm backward shares the gradient
# among the NaNs of a NaN slice (mask |x| == norm or isnan), as max() does
_amax_norm = _amax_amin(np.max, 'amax', nan_ties=True)
_amin_norm = _amax_amin(np.min, 'amin', nan_ties=True)


# --------------------------------------------------------- var, std, norm
def _var_args(dim, unbiased, correction, ndim, opname):
    if isinstance(dim, bool):                 # var(unbiased) of old PyTorch
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = None
    else:
        dims = _dims(dim, ndim, opname) if ndim else None
    return dims, float(correction)


_VAR_CACHE = {}     # (shape, dim, its types, unbiased, correction) -> see _var_plan


def _var_plan(d, dim, unbiased, correction):
    """(dims, correction, count, kept shape, attrs) of a var of ``d`` over ``dim``:
    they depend only on the shape and the arguments, and cached they save ~2 us
    of Python a call.  Keyed with the types of the dims, so that a float (1.0 ==
    1) still reaches _dims' TypeError."""
    td = type(dim)
    if td is int:
        key = (d.shape, dim, unbiased, correction)
    elif td is tuple:
        key = (d.shape, dim, *map(type, dim), unbiased, correction)
    else:
        key = None
    hit = _VAR_CACHE.get(key) if key is not None else None
    if hit is None:
        dims, corr = _var_args(dim, unbiased, correction, d.ndim, 'var')
        count = d.size if dims is None else int(math.prod([d.shape[k] for k in dims]))
        if dims is not None and d.ndim:
            kept = tuple(1 if i in dims else sz for i, sz in enumerate(d.shape))
            attrs = _ops._broadcast_attrs(d.shape, kept)
        else:
            kept = attrs = None
        hit = (dims, corr, count, kept, attrs)
        if key is not None and type(unbiased) in (type(None), bool) and \
                type(correction) in (type(None), int, float):
            if len(_VAR_CACHE) > 4096:
                _VAR_CACHE.clear()
            _VAR_CACHE[key] = hit
    return hit


_OP_MEAN_DIM = OP['mean_dim']
_OP_SUM_DIM = OP['sum_dim']
_OP_SUB = OP['sub']
_OP_VAR_SCALE = OP['var_scale']


@node_named('VarBackward0', 'a')
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance with PyTorch's ``correction`` (1 by default: Bessel's)."""
    a = _t(a)
    d = np.asarray(a._data)
    if d.dtype.kind not in 'fc':
        raise RuntimeError(f'var: std and var only support floating point and complex dtypes '
                           f'(got {d.dtype} of shape {tuple(d.shape)})')
    dims, corr, count, kept, attrs = _var_plan(d, dim, unbiased, correction)
    denom = count - corr if count - corr > 0 else 0.0
    if not (a._rg and grad_mode.enabled):
        with np.errstate(all='ignore'):
            mu = np.mean(d, axis=dims, keepdims=True)
            s = np.sum((d - mu) ** 2, axis=dims, keepdims=keepdim)
            return _leaf(np.asarray(s / denom, dtype=d.dtype)[()] if np.ndim(s) == 0
                         else (s / denom).astype(d.dtype))
    if attrs is not None and count and denom and d.size < BIG and d.dtype.kind == 'f':
        return _var_recorded(a, d, dims, keepdim, count, kept, attrs, denom)
    mu = _ops.mean(a, dims, True) if dims is not None else _ops.mean(a)
    diff = _ops.sub(a, mu)
    s = _ops.sum_(_ops.mul(diff, diff), dims, keepdim) if dims is not None else \
        _ops.sum_(_ops.mul(diff, diff), None, keepdim)
    with np.errstate(all='ignore'):
        out = np.asarray(s._data / denom, dtype=d.dtype)
        scale = 1.0 / denom if denom else float('inf')
    # d: the divisor itself, which the forward divides by (1/(1/d) is not d)
    return _record_unary(OP['var_scale'], s, out if out.ndim else out[()], scale, float(denom))


def _var_recorded(a, d, dims, keepdim, count, kept, attrs, denom):
    """var over ``dims`` of a small, non-empty float ``a`` that requires grad: the
    records and values of ``sum_(mul(diff, diff)) / denom`` with ``diff = a -
    mean(a, dims, True)`` (what the general path builds through the ops), made
    here directly: the NumPy calls the ops make, without their dispatch."""
    mu = _ops._np_mean(d, dims, True)
    mt = _record_struct(_OP_MEAN_DIM, a, mu, x=d.size, attrs=attrs, scale=1.0 / count,
                        big_attrs=kept)
    diff = d - mu
    dt = _ops._record_binary(_OP_SUB, a, mt, diff)
    sq = diff * diff
    st = _ops._record_binary(_OP_MUL, dt, dt, sq)
    s = _ops._np_sum(sq, dims, keepdim)
    ss = _record_struct(_OP_SUM_DIM, st, s, x=d.size, attrs=attrs, scale=1.0, big_attrs=kept)
    out = s / denom
    if out.dtype != d.dtype:
        out = out.astype(d.dtype)
    # d: the divisor itself, which the forward divides by (1/(1/d) is not d)
    return _record_unary(_OP_VAR_SCALE, ss, out if out.ndim else out[()], 1.0 / denom,
                         float(denom))


@node_named('StdBackward0', 'a')
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v = var(a, dim, unbiased, keepdim, correction=correction)
    return _root(v, 'std_root', 0.5)


def _root(s, name, c):
    """``s ** c`` for s >= 0 with the gradient masked to 0 where s == 0."""
    with np.errstate(all='ignore'):
        out = np.sqrt(s._data) if c == 0.5 else np.power(s._data, c)
    if s._rg and grad_mode.enabled:
        return _record_unary(OP[name], s, out, c)
    return _leaf(out)


@node_named('VarMeanBackward0', 'a', output='all')
def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(a, dim, unbiased, keepdim, correction=correction), _mean_kd(a, dim, keepdim)


@node_named('StdMeanBackward0', 'a', output='all')
def std_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(a, dim, unbiased, keepdim, correction=correction), _mean_kd(a, dim, keepdim)


def _mean_kd(a, dim, keepdim):
    if isinstance(dim, bool):
        dim = None
    return _ops.mean(_t(a), dim, keepdim)


@node_named('LinalgVectorNormBackward0', 'a')
def vector_norm(a, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """``torch.linalg.vector_norm``: the ord-norm of ``a`` over ``dim`` (all by default)."""
    if dim is None and dtype is None and type(a) is Tensor and (
            type(ord) is int or type(ord) is float) and ord == 2:
        out = _norm2_all(a, keepdim)
        if out is not None:
            return out
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' (position 2) must be Number, "
                        "not str")
    a = _t(a)
    if dtype is not None:
        a = _ops.to(a, dtype)
    d = np.asarray(a._data)
    if d.dtype.kind not in 'fc':
        raise RuntimeError(f'linalg.vector_norm: Expected a floating point or complex tensor '
                           f'as input. Got {d.dtype}')
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        dims = None
    else:
        dims = _dims(dim, d.ndim, 'linalg.vector_norm') if d.ndim else None
    p = float(ord)
    if (p < 0 or p == float('inf')) and d.size == 0:
        _empty_norm_error(ord, dim, d.shape, dims)
    if p == float('inf'):
        return _amax_norm(_ops.abs_(a), dims if dims is not None else (), keepdim)
    if p == float('-inf'):
        return _amin_norm(_ops.abs_(a), dims if dims is not None else (), keepdim)
    if p == 0:
        cnt = np.asarray(np.sum(d != 0, axis=dims, keepdims=keepdim).astype(d.dtype))
        if a._rg and grad_mode.enabled:
            return _count_nonzero_fn().apply(a, cnt)
        return _leaf(cnt)
    if p == 1:
        return _ops.sum_(_ops.abs_(a), dims, keepdim)
    if p == 2 and dims is None and d.dtype == np.float32 and d.flags.c_contiguous and d.size:
        s = _sum_squares32(a, d, keepdim)
    elif p == 2:
        s = _ops.sum_(_ops.mul(a, a), dims, keepdim)
    elif p > 1 and grad_mode.value_uses is not None and d.size and np.all(np.isfinite(d)) \
            and not np.any(d == 0):
        # while tape.jit traces, on finite nonzero values: the composite, which
        # replays (the node below runs Python); its value and first derivative
        # are the node's, and at zeros too for p > 1
        s = _ops.sum_(_ops.pow_(_ops.abs_(a), p), dims, keepdim)
    else:
        # any other p: one node with PyTorch's norm_backward (its masks give 0 or
        # NaN at zeros, inf and NaN where a composite of |x|^p does not)
        with np.errstate(all='ignore'):
            out = np.power(np.sum(np.power(np.abs(d), p), axis=dims, keepdims=keepdim),
                           1.0 / p)
        out = np.asarray(out, d.dtype)
        if a._rg and grad_mode.enabled:
            note_value_use('norm')
            return _pnorm_fn().apply(a, p, dims, keepdim, out)
        return _leaf(out)
    return _root(s, 'norm_root', 1.0 / p)


def _empty_norm_error(ord, dim, shape, dims):  # noqa: A002
    """PyTorch's RuntimeError for a norm without an identity (inf, -inf, p < 0) over
    an empty dim, or over all of an empty tensor."""
    p = float(ord)
    name = str(int(p)) if p.is_integer() else str(p)
    if dims is None:
        raise RuntimeError(f'linalg.vector_norm cannot compute the {name} norm on an empty '
                           f'tensor because the operation does not have an identity')
    for given in (dim if isinstance(dim, (tuple, list)) else (dim,)):
        if shape[given] == 0:
            raise RuntimeError(f'linalg.vector_norm cannot compute the {name} norm on the '
                               f'dimension {given}because this dimension is empty and the '
                               f'operation does not have an identity')


_COUNT = []


def _count_nonzero_fn():
    """The 0-"norm" (the count of nonzeros) as a node that requires grad but passes
    none back: PyTorch's backward gives no gradient (None, not zeros) for ord 0."""
    if not _COUNT:
        from .autograd import Function

        class LinalgVectorNorm(Function):
            @staticmethod
            def forward(ctx, a, cnt):
                return _leaf(cnt)

            @staticmethod
            def backward(ctx, grad):
                return None, None
        LinalgVectorNorm._backward_name = 'LinalgVectorNormBackward0'
        _COUNT.append(LinalgVectorNorm)
    return _COUNT[0]


_PNORM = []


def _pnorm_fn():
    """The p-norm for p not 0, 1, 2 or inf as one node (LinalgVectorNormBackward0)
    whose backward is PyTorch's norm_backward written in tape ops, so that a
    second derivative is that formula's, as PyTorch's is:
    ``sgn(x) |x|^(p-1)`` (0 at x == 0) ``* grad * norm^(1-p)`` for p < 1, else
    ``sgn(x) |x|^(p-1)`` (``x |x|^(p-2)`` for p > 2) ``* grad / norm^(p-1)``
    (0 where the norm is 0).  The norm in the backward is recomputed by this
    node, so it differentiates as the result does."""
    if not _PNORM:
        from .autograd import Function
        from . import _elementwise as _ew

        class LinalgVectorNorm(Function):
            @staticmethod
            def forward(ctx, a, p, dims, keepdim, out):
                ctx.save_for_backward(a)
                ctx.p, ctx.dims, ctx.keepdim = p, dims, keepdim
                return _leaf(out)

            @staticmethod
            def backward(ctx, grad):
                x, = ctx.saved_tensors
                p, dims = ctx.p, ctx.dims
                d = np.asarray(x._data)
                kept = (1,) * d.ndim if dims is None else \
                    tuple(1 if i in dims else n for i, n in enumerate(d.shape))
                g = _ops.reshape(grad, kept)
                norm = vector_norm(x, p, dims, True)
                nd = np.asarray(norm._data)
                with np.errstate(all='ignore'):
                    if p < 1:
                        mag = _ew.where(d == 0, 0.0, _ops.pow_(_ops.abs_(x), p - 1))
                        return (_ops.mul(_ops.mul(_ops.mul(_ew.sign(x), mag), g),
                                         _ops.pow_(norm, 1 - p)),
                                None, None, None, None)
                    if p < 2:
                        scaled = _ops.mul(_ew.sign(x), _ops.pow_(_ops.abs_(x), p - 1))
                    else:
                        scaled = _ops.mul(x, _ops.pow_(_ops.abs_(x), p - 2))
                    scale = _ops.div(g, _ops.pow_(norm, p - 1))
                    if np.any(nd == 0):
                        scale = _ew.where(np.broadcast_to(nd == 0, scale.shape), 0.0, scale)
                    return _ops.mul(scaled, scale), None, None, None, None
        LinalgVectorNorm._backward_name = 'LinalgVectorNormBackward0'
        _PNORM.append(LinalgVectorNorm)
    return _PNORM[0]


def _sum_squares32(a, d, keepdim):
    """``sum(a * a)`` over all of a C-contiguous float32 ``a`` in one pass
    (compiler/reduce_kernels.py: float64 lanes, no ``a * a`` temporary), with
    the same two records as ``sum_(mul(a, a))``.  The product's values are read
    by nothing (its gradient needs only ``a``, the sum's only the shapes), so
    its tensor holds a zero-stride placeholder instead."""
    from compiler.reduce_kernels import sum_squares
    out = np.float32(sum_squares(d.reshape(-1)))
    if keepdim:
        out = np.full((1,) * d.ndim, out)
    if not (a._rg and (not _ops._OFF[0] or grad_mode.enabled)):
        return _leaf(out)
    sq = np.ndarray(d.shape, np.float32, _ZERO32, 0, (0,) * d.ndim)
    prod = _ops._record_binary(_OP_MUL, a, a, sq)
    return _record_struct(_OP_SUM, prod, out, x=d.size, scale=1.0)


# ------------------------------------------- the 2-norm of all elements, directly
def _norm2_all(a, keepdim):
    """The 2-norm of all of ``a`` (a Tensor): the values and the records of
    ``_root(sum_(mul(a, a)), 'norm_root', 0.5)`` (MulBackward0, SumBackward0,
    LinalgVectorNormBackward0), made here directly, without vector_norm's
    argument handling and the ops' dispatch.  None where this does not apply: an
    input that is not a non-empty C-contiguous float32 or float64 array, or
    tape.jit tracing (the general path then).  float32 sums in one float64 pass
    (compiler/reduce_kernels.py), float64 as ``sum(x * x)``; the product's
    values are read by nothing (its gradient needs only ``a``, the sum's only
    the shapes), so its tensor holds a zero-stride placeholder."""
    d = a._data
    if type(d) is not np.ndarray or not d.size or not d.flags.c_contiguous \
            or getattr(_ops._jit_tracing(), 'proxies', None) is not None:
        return None
    dt = d.dtype
    if dt == _F32:
        k = _reduce_kernels or _load_reduce_kernels()
        s = np.float32(k.sum_squares(d.reshape(-1)))
        if keepdim:
            s = np.full((1,) * d.ndim, s)
    elif dt == _F64:
        with np.errstate(over='ignore'):         # past 1e154 the norm is inf, as PyTorch's
            s = _ops._np_sum(d * d, None, keepdim)
    else:
        return None
    out = np.sqrt(s)                        # (s >= 0 or NaN: nothing to warn about)
    if not (a._rg and (not _ops._OFF[0] or grad_mode.enabled)):
        return _leaf(out)
    sq = _placeholder(d.shape, dt)
    prod = _ops._record_binary(_OP_MUL, a, a, sq)
    ss = _record_struct(_OP_SUM, prod, s, x=d.size, scale=1.0)
    return _record_unary(_OP_NORM_ROOT, ss, out, 0.5)


def _placeholder(shape, dt):
    """A read-only zero-stride array of ``shape`` and dtype ``dt`` (cached by both):
    the data of a result whose values nothing reads."""
    key = (shape, dt)
    p = _PLACEHOLDERS.get(key)
    if p is None:
        if len(_PLACEHOLDERS) >= 256:
            _PLACEHOLDERS.clear()
        p = _PLACEHOLDERS[key] = np.ndarray(shape, dt, _ZERO32 if dt == _F32 else _ZERO64, 0,
                                            (0,) * len(shape))
    return p


_PLACEHOLDERS = {}
_reduce_kernels = None
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_OP_NORM_ROOT = OP['norm_root']


def _load_reduce_kernels():
    """compiler.reduce_kernels, imported on first use (nothing compiles at import)."""
    global _reduce_kernels
    import compiler.reduce_kernels as k
    _reduce_kernels = k
    return k


_ZERO32 = np.zeros(1, np.float32)
_ZERO32.flags.writeable = False
_ZERO64 = np.zeros(1, np.float64)
_ZERO64.flags.writeable = False
_OP_MUL = OP['mul']
_OP_SUM = OP['sum']


@node_named(lambda a, p: None if isinstance(p, str) and p != 'fro'
            else ('LinalgVectorNormBackward0', 1),
            'a', 'p')
def norm(a, p='fro', dim=None, keepdim=False, dtype=None):
    """``torch.norm``: 'fro' (or a number p) as a vector norm over ``dim`` (all by default)."""
    if dim is None and dtype is None and type(a) is Tensor and (
            p == 'fro' if type(p) is str else p is None or (type(p) is int and p == 2)):
        out = _norm2_all(a, keepdim)
        if out is not None:
            return out
    if p is None or p == 'fro':
        p = 2
    elif p == 'nuc':
        from . import linalg
        return linalg.matrix_norm(a, 'nuc', (-2, -1) if dim is None else dim, keepdim, dtype)
    elif isinstance(p, str):
        raise RuntimeError(f'linalg.matrix_norm: Order {p} not supported.')
    return vector_norm(a, p, dim, keepdim, dtype)


def logsumexp(a, dim, keepdim=False):
    """``log(sum(exp(a), dim))``, shifted by the maximum so it does not overflow."""
    a = _t(a)
    d = np.asarray(a._data)
    if d.dtype.kind not in 'fc':
        a = _ops.to(a, np.float32)
        d = a._data
    dims = _dims(dim, d.ndim, 'logsumexp') if d.ndim else None
    if d.size == 0:
        m = np.zeros(np.sum(d, axis=dims, keepdims=True).shape, d.dtype)
    else:
        m = np.max(d, axis=dims, keepdims=True)
    m = np.where(np.isinf(m), 0, m).astype(d.dtype)          # all -inf stays -inf, no NaN
    with np.errstate(all='ignore'):
        out = np.log(np.add.reduce(np.exp(d - m), axis=dims, keepdims=True)) + m
    out = np.asarray(out, dtype=d.dtype)
    kept = out.shape
    result = out
    if not keepdim:     # the same elements in the same order: the record serves both
        result = out.reshape(np.squeeze(m, axis=dims).shape if dims is not None else ())
    if a._rg and grad_mode.enabled:
        # one record (LogsumexpBackward0), saving the input and the result
        return _ops._record_struct(OP['logsumexp'], a, result, x=d.size, saved=(d, out),
                                   attrs=_ops._broadcast_attrs(d.shape, kept), big_attrs=kept)
    return _leaf(result)


# ------------------------------------------------------------- booleans
def _bool_reduce(npf, a, dim, keepdim, opname):
    d = np.asarray(_t(a)._data)
    if d.dtype == np.uint8:     # PyTorch keeps uint8 for any/all of uint8 (0 or 1)
        r = _bool_reduce(npf, _leaf(d.astype(np.bool_)), dim, keepdim, opname)
        return _leaf(np.asarray(r._data).astype(np.uint8))
    if dim is None:
        return _leaf(np.bool_(npf(d)))
    if d.ndim == 0:         # dim 0 or -1 of a 0-d tensor is the tensor itself, as in PyTorch
        for k in (dim if isinstance(dim, (tuple, list)) else (dim,)):
            _norm_dim(k, 1, opname)
        return _leaf(np.bool_(npf(d)))
    return _leaf(npf(d, axis=_dims(dim, d.ndim, opname), keepdims=keepdim))


def all(a, dim=None, keepdim=False):  # noqa: A001
    return _bool_reduce(np.all, a, dim, keepdim, 'all')


def any(a, dim=None, keepdim=False):  # noqa: A001
    return _bool_reduce(np.any, a, dim, keepdim, 'any')


def count_nonzero(a, dim=None):
    d = np.asarray(_t(a)._data)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return _leaf(np.int64(np.count_nonzero(d)))     # (dim=() counts all, as PyTorch)
    axes = _dims(dim, d.ndim, 'count_nonzero')
    if d.ndim == 0:         # (a scalar's dim 0 / -1: numpy has no axis to count along)
        return _leaf(np.int64(np.count_nonzero(d)))
    return _leaf(np.count_nonzero(d, axis=axes).astype(np.int64))
