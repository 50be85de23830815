"""Shape ops: views are 'view'-kind records, element pickers are 'take' records.

``squeeze``/``unsqueeze``/``flatten`` keep the elements in order (an identity
record); ``flip``/``repeat``/``split``/``narrow`` pick elements of their input
(a take record with the flat index of each output element; its adjoint puts
the gradient back).  ``cat``/``stack`` are 'cat'-kind records of two inputs
each (a balanced tree of them for more), whose backward hands each input its
columns of the output's gradient.

>>> import tape
>>> a = tape.ones(2, 1, 3, requires_grad=True)
>>> a.squeeze(1).shape
tape.Size([2, 3])
"""
import math

import numpy as np

from ._composite_nodes import name_outputs
from . import _ops
from ._ops import _record_struct, _shape_str, _sizes
from ._pool import pool
from ._reductions import _flat_index, take_as
from ._rules import OP
from ._tape import grad_mode
from ._tensor import Tensor, _leaf, _norm_dim
from ._views import as_view


def _t(x):
    return x if isinstance(x, Tensor) else _ops._const(x)


def _view_as(name, a, out):
    if a._rg and grad_mode.enabled:
        return _record_struct(OP[name], a, out)
    return _leaf(out)


def flatten(a, start_dim=0, end_dim=-1):
    a = _t(a)
    d = np.asarray(a._data)
    if d.ndim == 0:
        return _ops.reshape(a, 1)
    s = _norm_dim(start_dim, d.ndim, 'flatten')
    e = _norm_dim(end_dim, d.ndim, 'flatten')
    if s > e:
        raise RuntimeError(f'flatten() has invalid args: start_dim ({start_dim}) cannot come '
                           f'after end_dim ({end_dim}) (input of shape {tuple(d.shape)})')
    if s == e:
        return a
    shape = d.shape[:s] + (int(math.prod(d.shape[s:e + 1])),) + d.shape[e + 1:]
    return _ops.reshape(a, shape)


def unflatten(a, dim, sizes):
    a = _t(a)
    d = np.asarray(a._data)
    dim = _norm_dim(dim, d.ndim, 'unflatten')
    return _ops.reshape(a, d.shape[:dim] + tuple(sizes) + d.shape[dim + 1:])


def squeeze(a, dim=None):
    a = _t(a)
    d = a._data
    shape = np.shape(d)
    if dim is None:
        new = tuple(s for s in shape if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        drop = {_norm_dim(k, len(shape), 'squeeze') for k in dims}
        new = tuple(s for i, s in enumerate(shape) if not (i in drop and s == 1))
    # PyTorch's node: SqueezeBackward0 with no dim, 1 with an int, 2 with dims
    name = 'squeeze_all' if dim is None else \
        'squeeze_dims' if isinstance(dim, (tuple, list)) else 'squeeze'
    return _reshaped_view(name, a, new)


def _reshaped_view(name, a, shape):
    """A view record of ``a`` reshaped (no copy: squeeze, unsqueeze), marked as a view."""
    res = _view_as(name, a, np.reshape(a._data, shape))
    if type(a._data) is np.ndarray:
        as_view(res, a, lambda m: m.reshape(shape))
    return res


def contiguous(a, memory_format=None):
    """``a`` itself when its elements are in row-major order, else a row-major copy
    (PyTorch's CloneBackward0), so that ``x.t().contiguous().view(-1)`` works."""
    d = a._data
    if type(d) is not np.ndarray or d.flags.c_contiguous:
        return a
    return _view_as('contiguous', a, np.ascontiguousarray(d))


def unsqueeze(a, dim):
    a = _t(a)
    d = a._data
    shape = np.shape(d)
    k = _norm_dim(dim, len(shape) + 1, 'unsqueeze')
    return _reshaped_view('unsqueeze', a, shape[:k] + (1,) + shape[k:])


def movedim(a, source, destination):
    a = _t(a)
    nd = np.ndim(a._data)
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    src = [_norm_dim(s, nd, 'movedim') for s in src]
    dst = [_norm_dim(s, nd, 'movedim') for s in dst]
    perm = [n for n in range(nd) if n not in src]
    for dest, s in sorted(zip(dst, src)):
        perm.insert(dest, s)
    return _ops.permute(a, *perm)


def swapaxes(a, dim0, dim1):
    return _ops.transpose(_t(a), dim0, dim1)


def repeat(a, *sizes):
    a = _t(a)
    reps = _sizes(sizes, 'repeat', 'repeats')
    d = np.asarray(a._data)
    if len(reps) < d.ndim:
        raise RuntimeError(f'repeat: Number of dimensions of repeat dims ({len(reps)}) can not be '
                           f'smaller than number of dimensions of tensor ({d.ndim}); tensor '
                           f'shape {tuple(d.shape)}')
    if any(r < 0 for r in reps):
        raise RuntimeError(f'repeat: Trying to create tensor with negative dimension: {reps}')
    shape = (1,) * (len(reps) - d.ndim) + d.shape
    out = np.tile(d.reshape(shape), reps)
    idx = np.tile(_flat_index(d.shape).reshape(shape), reps)
    return take_as('repeat', a, out, idx)


def tile(a, dims):
    a = _t(a)
    dims = _sizes((dims,), 'tile', 'dims')
    nd = np.ndim(a._data)
    if len(dims) < nd:
        dims = (1,) * (nd - len(dims)) + dims
    return repeat(a, dims)


def flip(a, dims):
    a = _t(a)
    d = np.asarray(a._data)
    ds = _ops._dims(dims, d.ndim, 'flip')
    if d.ndim == 0:
        return _view_as('view', a, a._data)
    out = np.flip(d, ds).copy()
    # a flip is basic indexing (reversing slices): a large record keeps that key
    key = tuple(slice(None, None, -1) if i in ds else slice(None) for i in range(d.ndim))
    return take_as('flip', a, out, np.flip(_flat_index(d.shape), ds), key)


def fliplr(a):
    return flip(a, 1)


def flipud(a):
    return flip(a, 0)


def narrow(a, dim, start, length):
    a = _t(a)
    d = np.asarray(a._data)
    if d.ndim == 0:
        raise RuntimeError('narrow() cannot be applied to a 0-dim tensor.')
    dim = _norm_dim(dim, d.ndim, 'narrow')
    size = d.shape[dim]
    start = int(start)
    if start < 0:
        start += size
    if not 0 <= start <= size:
        raise IndexError(f'narrow(): start ({start}) out of range for dimension {dim} of size '
                         f'{size} (tensor of shape {tuple(d.shape)})')
    if length < 0 or start + length > size:
        raise RuntimeError(f'narrow(): start ({start}) + length ({length}) exceeds dimension '
                           f'size ({size}) (tensor of shape {tuple(d.shape)})')
    key = (slice(None),) * dim + (slice(start, start + length),)
    return as_view(take_as('slice', a, d[key], _flat_index(d.shape)[key], key), a,
                   lambda m: m[key])


def select(a, dim, index):
    """``a[..., index, ...]`` with ``index`` at dimension ``dim``: a view."""
    a = _t(a)
    d = np.asarray(a._data)
    if d.ndim == 0:
        raise IndexError('select() cannot be applied to a 0-dim tensor.')
    dim = _norm_dim(dim, d.ndim, 'select')
    size = d.shape[dim]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f'select(): index {index} out of range for tensor of size '
                         f'{list(d.shape)} at dimension {dim}')
    return a[(slice(None),) * dim + (index,)]


def _split_sizes(size, split_size_or_sections, dim, shape):
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f'split_with_sizes expects split_sizes to sum exactly to {size} '
                               f"(input tensor's size at dimension {dim}), but got "
                               f'split_sizes={sizes} (tensor of shape {tuple(shape)})')
        return sizes
    step = int(split_size_or_sections)
    if step <= 0:
        if size == 0 and step == 0:
            return [0]
        raise RuntimeError(f'split: split_size can only be 0 if dimension size is 0, but got '
                           f'{step} for a dimension of size {size}')
    return [min(step, size - i) for i in range(0, size, step)] or [0]


def split(a, split_size_or_sections, dim=0):
    a = _t(a)
    d = np.asarray(a._data)
    dim = _norm_dim(dim, d.ndim, 'split')
    sizes = _split_sizes(d.shape[dim], split_size_or_sections, dim, d.shape)
    idx = _flat_index(d.shape)
    parts = []
    start = 0
    # split(a, [sizes]) is PyTorch's split_with_sizes (SplitWithSizesBackward0)
    rule, node = ('split_with_sizes', 'SplitWithSizesBackward0') if isinstance(
        split_size_or_sections, (list, tuple)) else ('split', 'SplitBackward0')
    for s in sizes:
        key = (slice(None),) * dim + (slice(start, start + s),)
        parts.append(as_view(take_as(rule, a, d[key], idx[key], key), a, _picker(key),
                             multi=node))
        start += s
    if parts[0]._tape is not None:      # one node of all the parts, as PyTorch's
        _one_tape(a, parts)
        name_outputs(parts, node, (a,))
    return tuple(parts)


def _one_tape(a, parts):
    """Put the pieces of leaf ``a`` on one tape, for their one node: a piece
    of a large leaf is a large record, and a tape holding one adopts no new
    leaf-started graph (tape/_tape.py open_tape), so each piece started its own."""
    if a._tape is None and any(p._tape is not parts[0]._tape for p in parts):
        _ops.tape_of_all(parts, new=False)


def _picker(key):
    return lambda m: m[key]


def chunk(a, chunks, dim=0):
    a = _t(a)
    d = np.asarray(a._data)
    if chunks <= 0:
        raise RuntimeError(f'chunk expects `chunks` to be greater than 0, got: {chunks}')
    dim = _norm_dim(dim, d.ndim, 'chunk')
    size = d.shape[dim]
    if size == 0:           # PyTorch gives ``chunks`` empty chunks
        return split(a, [0] * chunks, dim)
    return split(a, -(-size // chunks), dim)


def unbind(a, dim=0):
    a = _t(a)
    d = np.asarray(a._data)
    dim = _norm_dim(dim, d.ndim, 'unbind')
    idx = _flat_index(d.shape)
    out = []
    for i in range(d.shape[dim]):
        key = (slice(None),) * dim + (i, Ellipsis)
        out.append(as_view(take_as('unbind', a, d[key], idx[key], key), a, _picker(key),
                           multi='UnbindBackward0'))
    if out and out[0]._tape is not None:
        _one_tape(a, out)
        name_outputs(out, 'UnbindBackward0', (a,))
    return tuple(out)


# ---------------------------------------------------------------- cat, stack
_CAT_SIGS = {}      # (dim, input shapes) -> (dim, out shape, inner, widths), checked


def _cat_sig(dim, shapes):
    """(dim, out shape, inner, widths) of a cat of ``shapes`` along ``dim``, or
    None when the slow path must run (its checks, errors and legacy rules).
    Keyed by the shapes and dim: a model joins the same shapes every step, and
    the Python over the dims cost more than the copy for small tensors."""
    key = (dim, shapes)
    hit = _CAT_SIGS.get(key)
    if hit is None:
        ref = shapes[0]
        nd = len(ref)
        if nd == 0 or not -nd <= dim < nd:
            return None
        d = dim + nd if dim < 0 else dim
        total = 0
        for s in shapes:
            if len(s) != nd or s == (0,):
                return None
            for k in range(nd):
                if k != d and s[k] != ref[k]:
                    return None
            total += s[d]
        inner = 1
        for s in ref[d + 1:]:
            inner *= s
        hit = (d, ref[:d] + (total,) + ref[d + 1:], inner,
               tuple(s[d] * inner for s in shapes))
        if len(_CAT_SIGS) > 4096:
            _CAT_SIGS.clear()
        _CAT_SIGS[key] = hit
    return hit


def cat(tensors, dim=0):
    """Join tensors along ``dim``; each input gets its slice of the gradient back.

    >>> import tape
    >>> tape.cat([tape.zeros(1, 2), tape.ones(2, 2)]).shape
    tape.Size([3, 2])
    """
    # the fast lane: Tensors of ndarrays of one dtype, shapes seen before
    tl = type(tensors)
    if (tl is list or tl is tuple) and type(dim) is int and tensors:
        arrays = []
        rg = False
        dt = None
        for x in tensors:
            if type(x) is not Tensor:
                break
            d = x._data
            if type(d) is not np.ndarray or (dt is not None and d.dtype is not dt):
                break
            dt = d.dtype
            arrays.append(d)
            rg = rg or x._rg
        else:
            sig = _cat_sig(dim, tuple([d.shape for d in arrays]))
            if sig is not None:
                k, shape, inner, widths = sig
                out = _concatenate_same(arrays, k, dt, shape)
                if not (rg and grad_mode.enabled):
                    return _leaf(out)
                if len(arrays) == 2:
                    a, b = tensors
                    return _record_struct(_CAT, a, out, x=widths[1] | 2 << _COUNT_SHIFT,
                                          ax=widths[0], b=b)
                return _join_tree(_CAT, tensors, [x.shape for x in arrays], k, inner, out, 0,
                                  len(arrays), True)[0]
    return _cat_slow(tensors, dim)


def _cat_slow(tensors, dim):
    if isinstance(tensors, Tensor):
        raise TypeError("cat(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f'Tensor (got one tensor of shape {tuple(np.shape(tensors._data))})')
    _tensors_only('cat', tensors)
    ts = [_t(x) for x in tensors]
    if not ts:
        raise ValueError('cat(): expected a non-empty list of Tensors')
    # PyTorch skips 1-D empty tensors (a legacy rule)
    live = [x for x in ts if not (np.ndim(x._data) == 1 and np.size(x._data) == 0)] or ts[:1]
    ref = np.shape(live[0]._data)
    if len(ref) == 0:
        raise RuntimeError('cat(): zero-dimensional tensor (at position 0) cannot be '
                           'concatenated')
    dim = _norm_dim(dim, len(ref), 'cat')
    for i, x in enumerate(live):
        s = np.shape(x._data)
        if len(s) != len(ref):
            raise RuntimeError(f'cat(): Tensors must have same number of dimensions: got '
                               f'{len(ref)} and {len(s)} (shapes {_shape_str(ref)} and '
                               f'{_shape_str(s)})')
        for k in range(len(ref)):
            if k != dim and s[k] != ref[k]:
                raise RuntimeError(
                    f'cat(): Sizes of tensors must match except in dimension {dim}. Expected '
                    f'size {ref[k]} but got size {s[k]} for tensor number {i} in the list '
                    f'(shapes {_shape_str(ref)} and {_shape_str(s)}).')
    from . import _dtypes
    arrays = [np.asarray(x._data) for x in live]
    dt = _dtypes.result_type(*arrays)
    out = _concatenate(arrays, dim, dt, ref)
    if not (grad_mode.enabled and any(x._rg for x in live)):
        return _leaf(out)
    return _join(OP['cat'], live, [np.shape(x._data) for x in live], dim, out)


def _concatenate_same(arrays, dim, dt, shape):
    """np.concatenate of ``arrays`` (all of dtype ``dt``) along ``dim`` into a
    result of ``shape``; a large one into a pooled buffer (see _concatenate)."""
    n = dt.itemsize
    for s in shape:
        n *= s
    if n < _ops.POOL_FROM:
        return np.concatenate(arrays, axis=dim)
    out = pool.empty(shape, dt)
    np.concatenate(arrays, axis=dim, out=out)
    return out


def _concatenate(arrays, dim, dt, ref):
    """np.concatenate of ``arrays`` along ``dim`` in dtype ``dt``.  A large result
    is written into a buffer from the pool (tape/_pool.py): a fresh one of a few
    MB costs a page fault per 4 KB on first touch, several times the copy."""
    nbytes = dt.itemsize * sum(a.size for a in arrays)
    if nbytes < _ops.POOL_FROM or any(a.dtype != dt for a in arrays):
        return np.concatenate(arrays, axis=dim).astype(dt, copy=False)
    shape = ref[:dim] + (sum(a.shape[dim] for a in arrays),) + tuple(ref[dim + 1:])
    out = pool.empty(shape, dt)
    np.concatenate(arrays, axis=dim, out=out)
    return out


# field 7 of a cat record: wb | count << _COUNT_SHIFT (tape/_rules.py)
_COUNT_SHIFT = 40


def _blank(shape, dt):
    """A stand-in array of ``shape`` for a tensor whose values no one reads: an
    inner node of a cat's tree (cat saves nothing), or a run of inputs that need
    no gradient.  Zero strides over one element, so it costs no memory and no
    copy; building it directly avoids np.broadcast_to's Python overhead."""
    arr = np.ndarray(shape, dt, np.zeros(1, dt), 0, (0,) * len(shape))
    arr.flags.writeable = False
    return arr


def _join(op, ts, shapes, dim, out):
    """Record ``out``, the join of ``ts`` (seen with ``shapes``) along ``dim``.

    One record of two inputs for two tensors; for more, a balanced tree of them
    (so each level copies the gradient once: size * log2(count) in all), whose
    inner records carry count 0, so that next_functions shows the inputs
    themselves (tape/_graph.py).  Each record hands each input its columns of
    the output's gradient: no zero-filled result per input, nothing saved.
    Mixed dtypes need no conversion record: gradients reach each input in its
    own dtype, as they do for any op."""
    inner = 1
    for s in out.shape[dim + 1:]:
        inner *= int(s)
    return _join_tree(op, ts, shapes, dim, inner, out, 0, len(ts), True)[0]


def _join_tree(op, ts, shapes, dim, inner, out, lo, hi, root):
    """(tensor, shape) of the join of ``ts[lo:hi]``.  A module-level recursion,
    not a closure: a recursive closure is a reference cycle, which kept each
    result (and its pooled buffer) alive until the garbage collector ran, so
    every call wrote into fresh, cold memory."""
    if hi - lo == 1 and not root:
        return ts[lo], shapes[lo]
    mid = lo + (hi - lo) // 2 if hi - lo > 1 else hi
    a, sa = _join_tree(op, ts, shapes, dim, inner, out, lo, mid, False)
    if mid < hi:
        b, sb = _join_tree(op, ts, shapes, dim, inner, out, mid, hi, False)
        shape = sa[:dim] + (sa[dim] + sb[dim],) + sa[dim + 1:]
    else:                       # cat of one tensor
        b, sb, shape = None, None, sa
    if not (a._rg or (b is not None and b._rg)):
        return _leaf(_blank(shape, out.dtype)), shape
    data = out if root else _blank(shape, out.dtype)
    wa = int(sa[dim]) * inner
    wb = int(sb[dim]) * inner if b is not None else 0
    count = hi - lo if root else 0
    return _record_struct(op if root else _CAT, a, data, x=wb | count << _COUNT_SHIFT,
                          ax=wa, b=b), shape


_CAT = OP['cat']


def concat(tensors, dim=0, *, axis=None):
    """``cat``, also under NumPy's name for ``dim`` (``torch.concatenate(ts, axis=1)``)."""
    return cat(tensors, dim if axis is None else axis)


concatenate = concat


def _tensors_only(opname, tensors):
    # PyTorch takes Tensors only (a NumPy array is let through, as tape's ops take them)
    for i, x in enumerate(tensors):
        if not isinstance(x, (Tensor, np.ndarray)):
            raise TypeError(f'{opname}(): expected Tensor as element {i} in argument 0, but '
                            f'got {type(x).__name__}')


def stack(tensors, dim=0):
    if isinstance(tensors, Tensor):
        raise TypeError("stack(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f'not Tensor (got one tensor of shape {tuple(np.shape(tensors._data))})')
    tensors = list(tensors)
    _tensors_only('stack', tensors)
    ts = [_t(x) for x in tensors]
    if not ts:
        raise RuntimeError('stack expects a non-empty TensorList')
    ref = np.shape(ts[0]._data)
    for i, x in enumerate(ts):
        if np.shape(x._data) != ref:
            raise RuntimeError(f'stack expects each tensor to be equal size, but got '
                               f'{_shape_str(ref)} at entry 0 and {_shape_str(np.shape(x._data))} '
                               f'at entry {i}')
    dim = _norm_dim(dim, len(ref) + 1, 'stack')
    from . import _dtypes
    datas = [np.asarray(x._data) for x in ts]
    dt = _dtypes.result_type(*datas)
    out = np.concatenate([np.expand_dims(d, dim) for d in datas], axis=dim).astype(
        dt, copy=False)
    if not (grad_mode.enabled and any(x._rg for x in ts)):
        return _leaf(out)
    # the inputs themselves, seen with a 1 at dim (the same elements in the same
    # order), so next_functions shows them and not their unsqueezes
    shape = tuple(ref[:dim]) + (1,) + tuple(ref[dim:])
    return _join(OP['stack'], ts, [shape] * len(ts), dim, out)


def hstack(tensors):
    ts = [x if np.ndim(x._data) else _ops.reshape(x, 1) for x in map(_t, tensors)]
    return cat(ts, 0 if ts and np.ndim(ts[0]._data) == 1 else 1)


def vstack(tensors):
    ts = [_t(x) for x in tensors]
    return cat([x if np.ndim(x._data) >= 2 else _ops.reshape(x, 1, -1) for x in ts], 0)
