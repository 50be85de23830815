"""Indexing by index tensors: gather, index_select, scatter, masked_select, item assignment.

Reads are take records (the flat position of each output element in the
input), except that index_select and gather (and nn.functional.embedding) pick
with a Numba kernel (compiler/index_kernels.py) that checks the indices in the
same pass, and where a take record would be a big one (tape/_big.py: an int64
map as large as the output, a float64 bincount backward) record one Function
of the input instead, whose backward adds the gradient's rows back in one
kernel call (``own_record``).  Writes (``scatter``, ``x[key] = value``) are a
where record that chooses, per element, between the old tensor and the written values put in
place, so the old tensor's gradient is cut where it was overwritten and the
written values get theirs.  Every check runs before anything is recorded.

>>> import tape
>>> x = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> x.gather(1, tape.tensor([[1], [0]]))
tensor([[2.],
        [3.]], grad_fn=<GatherBackward0>)
"""
import math

import numpy as np

from ._composite_nodes import name_result, node_named
from . import _ops, _views
from .autograd import function as _function
from .autograd.function import Function
from ._ops import _shape_str, _unwrap_key
from ._big import BIG
from ._reductions import _flat_index, take_as
from ._structural import record_where
from ._tape import grad_mode
from ._tensor import Tensor, _bump_version, _leaf, _norm_dim, _storage


def _t(x):
    return x if isinstance(x, Tensor) else _ops._const(x)


def _index_array(index, opname):
    d = np.asarray(index._data if isinstance(index, Tensor) else index)
    if d.dtype.kind not in 'iu':
        raise RuntimeError(f'{opname}(): Expected dtype int64 for index, got {d.dtype}')
    return d.astype(np.int64, copy=False)


def _check_range(idx, size, dim, opname, shape, error=IndexError, negative=True):
    """Raise for an index out of [-size, size), or of [0, size) where PyTorch takes
    no negative index (``negative=False``: gather, scatter, index_select)."""
    low = -size if negative else 0
    if idx.size and (idx.max() >= size or idx.min() < low):
        bad = idx[(idx >= size) | (idx < low)].reshape(-1)[0]
        raise error(f'{opname}(): index {bad} is out of bounds for dimension {dim} with '
                         f'size {size} (tensor of shape {tuple(shape)})')


def index_select(a, dim, index):
    a = _t(a)
    d = np.asarray(a._data)
    idx = _index_array(index, 'index_select')
    if idx.ndim > 1:
        raise IndexError(f'index_select(): Index is supposed to be a vector, got shape '
                         f'{tuple(idx.shape)}')
    if d.ndim == 0:
        _check_range(idx, 1, 0, 'index_select', d.shape, negative=False)
        return take_as('index_select', a, d.reshape(1)[idx.reshape(-1) * 0].reshape(idx.shape),
                       np.zeros(idx.shape, np.int64))
    dim = _norm_dim(dim, d.ndim, 'index_select')
    flat = idx.reshape(-1)
    if kernel_dtype(d.dtype) and d.flags.c_contiguous:
        # one kernel pass picks the rows and checks the indices (no index map)
        flat = np.ascontiguousarray(flat)
        n = d.shape[dim]
        outer = math.prod(d.shape[:dim])
        inner = math.prod(d.shape[dim + 1:])
        m = flat.shape[0]
        out = np.empty(d.shape[:dim] + (m,) + d.shape[dim + 1:], d.dtype)
        bad = kernels().pick_rows(d.reshape(outer, n, inner), flat, out.reshape(outer, m, inner))
        if bad >= 0:
            _check_range(flat[bad:bad + 1], n, dim, 'index_select', d.shape, negative=False)
        if not (a._rg and grad_mode.enabled):
            return _leaf(out)
        if as_function(d.size, out.size) and fast_record_ok(a):
            ctx = new_ctx('IndexSelectBackward0')
            ctx.idx, ctx.dim, ctx.rows, ctx.shape, ctx.dtype = \
                keep_index(ctx, index, flat), dim, (outer, n, inner), d.shape, d.dtype
            return own_record(_IndexSelect, ctx, a, _leaf(out))
    else:
        _check_range(idx, d.shape[dim], dim, 'index_select', d.shape, negative=False)
        out = np.take(d, flat, axis=dim)
    return take_as('index_select', a, out, np.take(_flat_index(d.shape), flat, axis=dim))


def as_function(in_size, out_size):
    """Record a pick as a Function (its backward one kernel call) rather than a take
    record?  Where the take record would take the big-record path (tape/_big.py:
    an int64 map as large as the output, a float64 bincount backward); a smaller
    take record's map is cheap and the compiled sweep runs it without calling back
    into Python, which costs a Function record ~7 us."""
    return in_size >= BIG or out_size >= BIG


def kernel_dtype(dt):
    """Whether the row kernels take dtype ``dt``: NumPy's object and string dtypes,
    and float16 (Numba has no such type), keep np.take."""
    return dt.kind in 'biufc' and dt.char != 'e'


_index_kernels = None


def kernels():
    """compiler.index_kernels, imported on first use (nothing compiles at import)."""
    global _index_kernels
    if _index_kernels is None:
        import compiler.index_kernels as k
        _index_kernels = k
    return _index_kernels


def fast_record_ok(a):
    """May a pick of ``a`` be recorded as one of this module's Functions?  Not while
    tape.jit traces (its replay kernel replays take records, not Functions) nor
    under forward-mode AD (its tangents flow through the rule table's take)."""
    return grad_mode.value_uses is None and _function.jvp_hook is None and type(a) is Tensor


def new_ctx(name):
    return _function._new_ctx(_function.FunctionCtx, name)


def keep_index(ctx, index, arr):
    """The index array ``arr`` (read from ``index``) for the backward.  An index
    tensor is saved, as PyTorch saves it: changing it in place before the backward
    then raises; anything else is copied (the caller may still change it)."""
    if type(index) is Tensor:
        ctx.save_for_backward(index)
        return arr
    return arr.copy()


def own_record(cls, ctx, a, o):
    """Record ``o = cls(a)`` as ``apply_own_inputs`` does (the compiled sweep calls
    ``cls._backward_arrays``), as a Function of ``a`` alone: the indices and options
    are not inputs (PyTorch's node has one next function).  ``a`` is not saved, so
    changing it in place afterwards does not stop the backward, as in PyTorch."""
    ctx.needs_input_grad = (True,)
    tape = _ops.tape_of_all([a])
    rec = _PickRecord()
    rec.cls = cls
    rec.ctx = ctx
    rec.nargs = 1
    rec.in_slots = [_ops._slot(a, tape)]
    rec.in_shapes = [a._data.shape]
    rec.in_dtypes = [a._data.dtype]
    return _function._append_own(tape, rec, ctx, o)


class _PickRecord(_function._OwnInputsRecord):
    """``own_record``'s record: as ``apply_own_inputs``'s, but the input's gradient
    (a fresh array of the kernel's) is handed over as owned, so a leaf adopts it
    as its ``.grad`` instead of copying it (a copy as large as the input)."""
    __slots__ = ()

    def backward(self, store):
        s = self.out_slots[0]
        if s < 0 or not store.reached(s):
            return
        si = self.in_slots[0]
        shape = self.out_shapes[0]
        gi, = self.cls._backward_arrays(self.ctx, store.get(s, math.prod(shape), shape))
        if si >= 0:
            store.add(si, gi.size, gi, owned=True)


def _grad_rows(g, shape):
    """The output's gradient as a C-contiguous array in ``shape``, in its own dtype
    (the sweep's arena may hold float64 for a float32 graph: the kernels cast per
    element, which beats a cast copy)."""
    return np.ascontiguousarray(g).reshape(shape)


def grad_zeros(shape, dt):
    """The input's gradient to add into: in the input's dtype, as the leaf's
    ``.grad`` adopts it as is (another dtype would be cast again, a full copy)."""
    return np.zeros(shape, dt if dt.kind in 'fc' else np.float64)


class _IndexSelect(Function):
    """index_select's record: ``ctx.idx`` (flat), ``ctx.rows`` the input viewed as
    (outer, n, inner) rows along ``dim``; the backward adds the gradient's rows
    back (PyTorch's index_add)."""
    @staticmethod
    def _backward_arrays(ctx, g):
        ctx.saved_tensors           # (raises after the graph was freed, as PyTorch's)
        outer, n, inner = ctx.rows
        idx = ctx.idx
        ga = grad_zeros(ctx.shape, ctx.dtype)
        kernels().add_rows(_grad_rows(g, (outer, idx.shape[0], inner)), idx,
                           ga.reshape(outer, n, inner))
        return (ga,)

    @staticmethod
    def backward(ctx, gy):
        if not grad_mode.enabled:
            return _leaf(_IndexSelect._backward_arrays(ctx, np.asarray(gy._data))[0])
        ctx.saved_tensors
        # create_graph: the same sum as a recorded put, so it differentiates again
        pos = np.take(_flat_index(ctx.shape), ctx.idx, axis=ctx.dim).reshape(-1)
        return _ops.reshape(_ops.put_flat(gy, pos, math.prod(ctx.shape)), ctx.shape)


_IndexSelect._backward_name = 'IndexSelectBackward0'


def _gather_positions(shape, dim, idx, opname):
    """Flat positions in a tensor of ``shape`` of gather/scatter's index ``idx``."""
    if idx.ndim != len(shape) and not (idx.ndim <= 1 and len(shape) <= 1):
        raise RuntimeError(f'{opname}(): Index tensor must have the same number of dimensions '
                           f'as input tensor (index {tuple(idx.shape)}, input {tuple(shape)})')
    shape = tuple(shape) if shape else (1,)
    idx = idx.reshape(idx.shape if idx.ndim else (1,)) if len(shape) == 1 else idx
    for k in range(idx.ndim):
        if k != dim and idx.shape[k] > shape[k]:
            raise RuntimeError(f'{opname}(): Size does not match at dimension {k} expected '
                               f'index {_shape_str(idx.shape)} to be smaller than self '
                               f'{_shape_str(shape)} apart from dimension {dim}')
    _check_range(idx, shape[dim], dim, opname, shape, RuntimeError, False)    # as PyTorch
    grids = list(np.indices(idx.shape, dtype=np.int64))
    grids[dim] = np.where(idx < 0, idx + shape[dim], idx)
    return np.ravel_multi_index(grids, shape) if idx.size else np.zeros(idx.shape, np.int64)


def gather(a, dim, index):
    a = _t(a)
    d = np.asarray(a._data)
    idx = _index_array(index, 'gather')
    dim = _norm_dim(dim, d.ndim, 'gather')
    if (d.ndim and idx.ndim == d.ndim and kernel_dtype(d.dtype) and d.flags.c_contiguous
            and idx.shape[:dim] == d.shape[:dim] and idx.shape[dim + 1:] == d.shape[dim + 1:]):
        # index and input agree off ``dim`` (the usual case): one kernel pass picks and
        # checks, with no map of flat positions
        n = d.shape[dim]
        outer = math.prod(d.shape[:dim])
        inner = math.prod(d.shape[dim + 1:])
        m = idx.shape[dim]
        idx = np.ascontiguousarray(idx)
        out = np.empty(idx.shape, d.dtype)
        record = a._rg and grad_mode.enabled
        function = record and as_function(d.size, out.size) and fast_record_ok(a)
        pos = np.empty(out.size if record and not function else 0, np.int64)
        bad = kernels().gather_rows(d.reshape(outer, n, inner), idx.reshape(outer, m, inner),
                                    out.reshape(outer, m, inner), pos)
        if bad >= 0:
            _check_range(idx.reshape(-1)[bad:bad + 1], n, dim, 'gather', d.shape,
                         RuntimeError, False)
        if not record:
            return _leaf(out)
        if not function:
            return take_as('gather', a, out, pos)
        ctx = new_ctx('GatherBackward0')
        ctx.idx, ctx.dim, ctx.rows, ctx.shape, ctx.dtype = \
            keep_index(ctx, index, idx), dim, (outer, n, inner), d.shape, d.dtype
        return own_record(_Gather, ctx, a, _leaf(out))
    pos = _gather_positions(d.shape, dim, idx, 'gather')
    return take_as('gather', a, d.reshape(-1)[pos].reshape(idx.shape), pos)


class _Gather(Function):
    """gather's record when the index agrees with the input off ``dim``: ``ctx.idx``
    (the index, C-contiguous), ``ctx.rows`` the input as (outer, n, inner); the
    backward is PyTorch's scatter_add of the gradient."""
    @staticmethod
    def _backward_arrays(ctx, g):
        ctx.saved_tensors           # (raises after the graph was freed, as PyTorch's)
        outer, n, inner = ctx.rows
        idx = ctx.idx
        m = idx.shape[ctx.dim]
        ga = grad_zeros(ctx.shape, ctx.dtype)
        kernels().scatter_rows(_grad_rows(g, (outer, m, inner)),
                               idx.reshape(outer, m, inner), ga.reshape(outer, n, inner))
        return (ga,)

    @staticmethod
    def backward(ctx, gy):
        if not grad_mode.enabled:
            return _leaf(_Gather._backward_arrays(ctx, np.asarray(gy._data))[0])
        ctx.saved_tensors
        pos = _gather_positions(ctx.shape, ctx.dim, ctx.idx, 'gather').reshape(-1)
        return _ops.reshape(_ops.put_flat(gy, pos, math.prod(ctx.shape)), ctx.shape)


_Gather._backward_name = 'GatherBackward0'


@node_named('TakeBackward0', 'a')
def take(a, index):
    """``a.flatten()[index]`` (torch.take)."""
    a = _t(a)
    d = np.asarray(a._data)
    idx = _index_array(index, 'take')
    _check_range(idx, d.size, 0, 'take', d.shape)
    pos = np.where(idx < 0, idx + d.size, idx)
    return take_as('index', a, d.reshape(-1)[pos], pos)


def _scatter_write(a, dim, index, src, opname):
    """(flat target positions, source values (flat), source tensor or None)."""
    d = np.asarray(a._data)
    idx = _index_array(index, opname)
    dim = _norm_dim(dim, d.ndim, opname)
    tgt = _gather_positions(d.shape, dim, idx, opname).reshape(-1)
    if isinstance(src, Tensor):
        sd = np.asarray(src._data)
        if sd.dtype != d.dtype:
            raise RuntimeError(f'{opname}(): Expected self.dtype to be equal to src.dtype (got '
                               f'{d.dtype} and {sd.dtype}, shapes {tuple(d.shape)} and '
                               f'{tuple(sd.shape)})')
        if sd.ndim != idx.ndim and not (sd.ndim <= 1 and idx.ndim <= 1):
            raise RuntimeError(f'{opname}(): Index tensor must have the same number of '
                               f'dimensions as src tensor (index {tuple(idx.shape)}, src '
                               f'{tuple(sd.shape)})')
        if any(idx.shape[k] > sd.shape[k] for k in range(idx.ndim)):
            raise RuntimeError(f'{opname}(): Expected index {_shape_str(idx.shape)} to be '
                               f'smaller than src {_shape_str(sd.shape)}')
        spos = np.ravel_multi_index(np.indices(idx.shape), sd.shape).reshape(-1) \
            if idx.size and sd.ndim else np.zeros(idx.size, np.int64)
        return tgt, sd.reshape(-1)[spos].astype(d.dtype, copy=False), src, spos
    return tgt, np.full(tgt.size, src, d.dtype), None, None


@node_named(lambda a, src, reduce: None if reduce is not None else ('ScatterBackward0', 2)
            if isinstance(src, Tensor) else ('ScatterBackward1', 1), 'a', 'src', 'reduce')
def scatter(a, dim, index, src=None, value=None, reduce=None):
    """``a`` with ``src`` (or ``value``) written at ``index`` along ``dim`` (out of place)."""
    if src is None:
        src = value
    if reduce is not None:
        if reduce not in ('add', 'sum', 'multiply'):
            raise RuntimeError(f"scatter: reduce argument must be either 'add' or 'multiply', "
                               f'got {reduce!r}')
        a = _t(a)
        if not isinstance(src, Tensor):     # a value: written at every index
            src = _leaf(np.full(np.shape(_t(index)._data), src, np.asarray(a._data).dtype))
        if reduce == 'multiply':
            return scatter_reduce(a, dim, index, src, 'prod')
        return scatter_add(a, dim, index, src)
    a = _t(a)
    if src is None:
        raise TypeError('scatter() missing the src (or value) argument')
    d = np.asarray(a._data)
    tgt, vals, st, spos = _scatter_write(a, dim, index, src, 'scatter')
    out = np.array(d, copy=True).reshape(-1)
    out[tgt] = vals                             # with repeats the last write wins
    out = out.reshape(d.shape)
    mask = np.zeros(d.size, bool)
    mask[tgt] = True
    if st is not None and st._rg and grad_mode.enabled:
        # every src element gets the gradient at its target, as PyTorch's gather(grad)
        s = _ops.put_flat(take_as('index', st, vals, spos), tgt, d.size)
        s = _ops.reshape(s, d.shape)
    else:
        full = np.zeros(d.size, d.dtype)
        full[tgt] = vals
        s = _leaf(full.reshape(d.shape))
    return record_where('scatter', mask.reshape(d.shape), s, a, out)


@node_named('ScatterAddBackward0', 'a', 'src')
def scatter_add(a, dim, index, src):
    a = _t(a)
    d = np.asarray(a._data)
    src = _t(src)
    tgt, vals, st, spos = _scatter_write(a, dim, index, src, 'scatter_add')
    if st._rg and grad_mode.enabled:
        s = _ops.put_flat(take_as('index', st, vals, spos), tgt, d.size)
    else:
        s = _leaf(np.bincount(tgt, weights=vals, minlength=d.size).astype(d.dtype))
    return _ops.add(a, _ops.reshape(s, d.shape))


@node_named('MaskedSelectBackward0', 'a')
def masked_select(a, mask):
    a = _t(a)
    m = np.asarray(mask._data if isinstance(mask, Tensor) else mask)
    if m.dtype != np.bool_:
        raise RuntimeError(f'masked_select: expected a bool mask, got {m.dtype}')
    d = np.asarray(a._data)
    try:
        shape = np.broadcast_shapes(m.shape, d.shape)
    except ValueError:
        raise RuntimeError(f'masked_select: The size of the mask {_shape_str(m.shape)} must '
                           f'match the size of the tensor {_shape_str(d.shape)}') from None
    if shape != d.shape:
        a = _ops.expand(a, shape)
        d = np.asarray(a._data)
    pos = _flat_index(shape)[np.broadcast_to(m, shape)]
    return take_as('index', a, d.reshape(-1)[pos], pos)


# ------------------------------------------------------------ x[key] = value
def _broadcasts_to(shape, target):
    """Can an array of ``shape`` broadcast to ``target`` (NumPy's rule, without
    the ~8 us of ``np.broadcast_to`` on a scratch array)?"""
    if len(shape) > len(target):
        return False
    return all(s == 1 or s == t for s, t in zip(shape[::-1], target[::-1]))


def setitem(a, key, value):
    """``a[key] = value``: in place; on a recorded ``a`` (or a value that requires
    grad) the write is recorded, so gradients flow to the kept part of the old
    ``a`` and to ``value``.  Bumps ``a``'s version."""
    k = _unwrap_key(key)
    d = _storage(a)
    try:
        pos = _flat_index(d.shape)[k]
    except IndexError as e:
        raise IndexError(f'index: {e} (tensor of shape {tuple(d.shape)})') from None
    vd = value._data if isinstance(value, Tensor) else value
    vshape = np.shape(vd)
    extra = len(vshape) - np.ndim(pos)
    if extra > 0 and all(n == 1 for n in vshape[:extra]):
        # leading size-1 dims of the value are dropped, as PyTorch does
        vshape = vshape[extra:]
        value = value.reshape(vshape) if isinstance(value, Tensor) else np.reshape(vd, vshape)
        vd = value._data if isinstance(value, Tensor) else value
    if not _broadcasts_to(vshape, np.shape(pos)):
        raise RuntimeError(f'setitem: shape mismatch: value tensor of shape {_shape_str(vshape)} '
                           f'cannot be broadcast to indexing result of shape '
                           f'{_shape_str(np.shape(pos))} (tensor of shape {tuple(d.shape)})') \
            from None
    if a._rg and grad_mode.enabled and a._tape is None:
        raise RuntimeError('a leaf Variable that requires grad is being used in an in-place '
                           f'operation (setitem on a tensor of shape {tuple(d.shape)}).')
    _views.check_inplace(a, 'setitem', grad_mode.enabled)
    vrg = isinstance(value, Tensor) and value._rg
    recorded = None
    tape = a._tape
    if tape is not None:
        # records made so far that saved a's data by reference now see new values
        tape.add_dirty(a._goff, tape.n)
    if grad_mode.enabled and (tape is not None or vrg):
        before = _ops._leaf_view_of(a)
        flat = np.asarray(pos, dtype=np.int64).reshape(-1)
        mask = np.zeros(d.size, bool)
        mask[flat] = True
        v = value if isinstance(value, Tensor) else _leaf(np.asarray(vd, d.dtype))
        if np.shape(v._data) != np.shape(pos):
            v = _ops.expand(v, np.shape(pos))
        basic = _ops._basic_key(k)
        if basic:       # a large put keeps the key (tape/_big.py's BasicKey)
            s = _ops.reshape(_ops.put_block(v, k, d.shape, flat), d.shape)
        else:
            s = _ops.reshape(_ops.put_flat(v, flat, d.size), d.shape)
        after = np.array(d, copy=True)
        after[k] = vd
        recorded = record_where('setitem', mask.reshape(d.shape), s, before, after)
        if recorded._tape is not None:
            # PyTorch's node: CopySlices for a basic key (a write into a view),
            # IndexPutBackward0 for an advanced one; of (a as it was, value)
            name_result(recorded, 'CopySlices' if basic else 'IndexPutBackward0',
                        (before, value))
    base_before = _views.snapshot_base(a, recorded is not None)
    d[k] = vd
    _bump_version(a)
    if recorded is not None:
        _ops.rebind(a, recorded)
    _ops._after_inplace(a, recorded, base_before)


# ------------------------------------------------------------ scatter_reduce
_REDUCE_AT = {'sum': np.add, 'prod': np.multiply, 'mean': np.add, 'amax': np.maximum,
              'amin': np.minimum}


def _scatter_reduce_np(d, tgt, vals, reduce, include_self):
    """The forward in NumPy: ``d`` (flat copy) with ``vals`` reduced in at ``tgt``."""
    touched = np.zeros(d.size, bool)
    touched[tgt] = True
    out = np.array(d, copy=True).reshape(-1)
    if not include_self:
        # the reduction's identity where a value lands, so only src counts there
        ident = {'sum': 0, 'mean': 0, 'prod': 1}.get(reduce)
        if ident is None:
            ident = (np.inf if reduce == 'amin' else -np.inf) if d.dtype.kind == 'f' else (
                np.iinfo(d.dtype).max if reduce == 'amin' else np.iinfo(d.dtype).min)
        out[touched] = ident
    _REDUCE_AT[reduce].at(out, tgt, vals)
    if reduce == 'mean':
        cnt = np.bincount(tgt, minlength=d.size) + (1 if include_self else 0)
        cnt = np.maximum(cnt, 1)
        if d.dtype.kind == 'f':
            out = out / cnt
        else:                                   # PyTorch floors an integer mean
            out = np.floor_divide(out, cnt)
        out = out.astype(d.dtype, copy=False)
    return out, touched


@node_named('ScatterReduceBackward0', 'a', 'src')
def scatter_reduce(a, dim, index, src, reduce, *, include_self=True):
    """``a`` with ``src``'s elements reduced (``'sum'``, ``'prod'``, ``'mean'``,
    ``'amax'``, ``'amin'``) into the places ``index`` names along ``dim``.
    The gradients are PyTorch's: amax/amin share each gradient evenly among the
    elements equal to the result; prod's (zeros handled) differentiates once.

    >>> import tape
    >>> tape.zeros(2).scatter_reduce(0, tape.tensor([0, 0, 1]), tape.tensor([1., 3., 2.]), 'amax')
    tensor([3., 2.])
    """
    if reduce not in _REDUCE_AT:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    a, src = _t(a), _t(src)
    d = np.asarray(a._data)
    tgt, vals, st, spos = _scatter_write(a, dim, index, src, 'scatter_reduce')
    out, touched = _scatter_reduce_np(d, tgt, vals, reduce, include_self)
    needs = grad_mode.enabled and (a._rg or src._rg)
    if not needs:
        return _leaf(out.reshape(d.shape))
    if reduce == 'prod':
        return _ScatterProd().apply(a, src, dim, index, include_self)
    size = d.size
    shape = d.shape
    flat_a = _ops.reshape(a, -1)
    srcv = take_as('index', st, vals, spos)
    cnt = np.bincount(tgt, minlength=size).astype(d.dtype)
    if reduce in ('sum', 'mean'):
        total = _ops.put_flat(srcv, tgt, size)
        if include_self:
            total = _ops.add(total, flat_a)
        if reduce == 'mean':
            total = _ops.div(total, np.maximum(cnt + (1 if include_self else 0), 1))
    else:
        # an even share of the gradient for each element equal to the result (a choice
        # made from the values: tape.jit must not replay it)
        from ._tape import note_value_use
        note_value_use('scatter_reduce')
        src_eq = (vals == out[tgt]).astype(d.dtype)
        self_eq = (include_self & (d.reshape(-1) == out)).astype(d.dtype)
        share = np.bincount(tgt, weights=src_eq, minlength=size) + self_eq
        share = np.where(share > 0, share, 1).astype(d.dtype)
        total = _ops.put_flat(_ops.mul(srcv, src_eq / share[tgt]), tgt, size)
        if include_self:
            total = _ops.add(total, _ops.mul(flat_a, self_eq / share))
    res = record_where('scatter', touched, total, flat_a, out)
    return _ops.reshape(res, *shape)


def _scatter_prod_fn():
    from .autograd import Function, once_differentiable
    from .autograd.function import _OnceDifferentiable

    class ScatterReduce(Function):
        """reduce='prod': PyTorch's gradient (``scatter_reduce_backward``), zeros
        included: each element's gradient is the product of the others reduced
        with it; computed in NumPy, so it differentiates only once: its gradients
        depend on the inputs too, so differentiating them raises (where
        ``once_differentiable`` alone would see only the incoming gradient and
        give the second derivative as 0)."""

        @staticmethod
        def forward(ctx, a, src, dim, index, include_self):
            d = np.asarray(a._data)
            tgt, vals, _, spos = _scatter_write(a, dim, index, src, 'scatter_reduce')
            out, _ = _scatter_reduce_np(d, tgt, vals, 'prod', include_self)
            ctx.parts = (d, tgt, vals, spos, np.asarray(src._data).shape, include_self, out)
            ctx.inputs = (a, src)
            return _leaf(out.reshape(d.shape))

        @staticmethod
        def backward(ctx, grad):
            grads = ScatterReduce._prod_grads(ctx, grad)
            deps = [t for t in (grad,) + ctx.inputs if isinstance(t, Tensor) and t._rg]
            if not (grad_mode.enabled and deps):
                return grads
            return tuple(None if r is None else _OnceDifferentiable.apply(r, *deps)
                         for r in grads)

        @staticmethod
        @once_differentiable
        def _prod_grads(ctx, grad):
            d, tgt, vals, spos, src_shape, include_self, out = ctx.parts
            g = np.asarray(grad._data).reshape(-1)
            flat = d.reshape(-1)
            # self: the product of the others at its place (its own zero masked to 1)
            masked_self = np.where(flat == 0, 1, flat)
            others, _ = _scatter_reduce_np(masked_self, tgt, vals, 'prod', include_self)
            g_self = g * others / masked_self
            if not include_self:
                g_self[tgt] = 0
            # src: result / src, except a lone zero at its place, whose gradient is
            # the product of the others there (two zeros or more: zero)
            src_zero = vals == 0
            zeros_at = np.bincount(tgt, weights=src_zero, minlength=flat.size)[tgt]
            single = src_zero & (zeros_at == 1)
            rest, _ = _scatter_reduce_np(flat, tgt, np.where(single, 1, vals), 'prod',
                                         include_self)
            g_vals = np.where(single, g[tgt] * rest[tgt],
                              g[tgt] * out[tgt] / np.where(src_zero, 1, vals))
            g_src = np.zeros(int(math.prod(src_shape)), d.dtype)
            np.add.at(g_src, spos, g_vals)
            return (_leaf(g_self.reshape(d.shape).astype(d.dtype, copy=False)),
                    _leaf(g_src.reshape(src_shape)), None, None, None)
    from .autograd.function import _register_node_class
    ScatterReduce._backward_name = 'ScatterReduceBackward0'     # PyTorch's node name
    _register_node_class('ScatterReduceBackward0')
    return ScatterReduce


def _ScatterProd():
    if not _PROD:
        _PROD.append(_scatter_prod_fn())
    return _PROD[0]


_PROD = []
