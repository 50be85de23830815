"""Matrix products: bmm (one record), and matmul/dot/mv/outer/einsum built on mm and bmm.

``matmul`` follows PyTorch for every rank: 1-D operands gain (and lose) a
dimension, a stack of matrices times one matrix folds into one ``mm``, and
batch dimensions broadcast before a ``bmm``.  ``einsum`` handles one or two
operands (more are folded pairwise): repeated labels take a diagonal, labels
of one operand only are summed first, and the rest becomes a ``bmm`` of
permuted, reshaped operands.

>>> import tape
>>> a = tape.ones(2, 3, 4)
>>> (a @ tape.ones(4, 5)).shape
tape.Size([2, 3, 5])
"""
import math

import numpy as np

from ._composite_nodes import name_result
from . import _ops
from ._dtypes import promote_types
from ._ops import _record_struct, _shape_str
from ._reductions import _flat_index, take_as
from ._rules import OP
from ._structural import record_bmm
from ._tape import grad_mode
from ._tensor import Tensor, _leaf
from ._views import as_view


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like)


def _same_dtype(a, b):
    """Matrix products take one dtype, as in PyTorch (no promotion)."""
    da, db = np.asarray(a._data).dtype, np.asarray(b._data).dtype
    if da != db:
        raise RuntimeError(f'expected m1 and m2 to have the same dtype, but got: {da} != {db} '
                           f'(shapes {tuple(np.shape(a._data))} and {tuple(np.shape(b._data))})')
    return a, b


def bmm(a, b):
    a, b = _t(a), _t(b, a)
    ad, bd = np.asarray(a._data), np.asarray(b._data)
    if ad.ndim != 3 or bd.ndim != 3:
        raise RuntimeError(f'bmm: batch1 and batch2 must be 3D tensors, got shapes '
                           f'{_shape_str(ad.shape)} and {_shape_str(bd.shape)}')
    if ad.shape[0] != bd.shape[0] or ad.shape[2] != bd.shape[1]:
        raise RuntimeError(f'bmm: Expected size for first two dimensions of batch2 tensor to be: '
                           f'[{ad.shape[0]}, {ad.shape[2]}] but got: [{bd.shape[0]}, '
                           f'{bd.shape[1]}] (shapes {_shape_str(ad.shape)} and '
                           f'{_shape_str(bd.shape)})')
    a, b = _same_dtype(a, b)
    out = np.matmul(a._data, b._data)
    return record_bmm(a, b, out)


def _mismatch(a_shape, b_shape):
    return RuntimeError(f'matmul: mat1 and mat2 shapes cannot be multiplied '
                        f'({a_shape[-2] if len(a_shape) > 1 else 1}x{a_shape[-1]} and '
                        f'{b_shape[-2] if len(b_shape) > 1 else b_shape[0]}x'
                        f'{b_shape[-1] if len(b_shape) > 1 else 1}); shapes '
                        f'{_shape_str(a_shape)} and {_shape_str(b_shape)}')


_MATMUL_PLANS = {}      # (shape of a, shape of b) -> batched plan (see _batched_plan)
_OP_RESHAPE = OP['reshape']


def matmul(a, b):
    """``a @ b`` with PyTorch's rules for every rank (errors name both shapes)."""
    # the fast lane: Tensors of ndarrays of one dtype, a batched product of
    # shapes seen before (their checks and the batch shape are remembered)
    if type(a) is Tensor and type(b) is Tensor:
        ad = a._data
        bd = b._data
        if type(ad) is np.ndarray and type(bd) is np.ndarray and ad.dtype is bd.dtype:
            plan = _MATMUL_PLANS.get((ad.shape, bd.shape))
            if plan is not None:
                return _batched(a, b, *plan)
    a0, b0 = a, b
    a = _t(a)
    b = _t(b, a)
    sa, sb = np.shape(a._data), np.shape(b._data)
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        for x in (a0, b0):
            if not isinstance(x, (Tensor, np.ndarray, list, tuple)):
                raise TypeError(f'matmul(): argument must be Tensor, not {type(x).__name__} '
                                f'(shapes {list(sa)} and {list(sb)})')
        raise RuntimeError(f'matmul: both arguments to matmul need to be at least 1D, but they '
                           f'are {na}D and {nb}D')
    k_b = sb[0] if nb == 1 else sb[-2]
    if sa[-1] != k_b:
        if na == 1 and nb == 1:
            raise RuntimeError(f'dot: inconsistent tensor size, expected tensor [{sa[0]}] and '
                               f'src [{sb[0]}] to have the same number of elements, but got '
                               f'{sa[0]} and {sb[0]} elements respectively')
        raise _mismatch(sa, sb)
    if na <= 2 and nb <= 2:
        if na == 2 and nb == 2:
            return _ops.mm(*_same_dtype(a, b))
        return _ops.matmul(*_same_dtype(a, b))
    try:
        batch = np.broadcast_shapes(sa[:-2], sb[:-2] if nb > 2 else ())
    except ValueError:
        raise RuntimeError(f'matmul: the batch dimensions of shapes {_shape_str(sa)} and '
                           f'{_shape_str(sb)} cannot be broadcast together') from None
    a, b = _same_dtype(a, b)
    if nb <= 2 and na > 2:
        # a stack of matrices (or vectors) times one matrix: one mm
        m = int(math.prod(sa[:-1]))
        a2 = _ops.reshape(a, m, sa[-1])
        # PyTorch's nodes: the product (MvBackward0 or MmBackward0) of the rows'
        # view, then an UnsafeViewBackward0 of the batch shape
        p = _ops.matmul(a2, b) if nb == 1 else _ops.mm(a2, b)
        out = _ops.reshape(p, sa[:-1] + (() if nb == 1 else (sb[-1],)))
        if out._tape is not None:
            name_result(out, 'UnsafeViewBackward0', (p,))
        return out
    plan = _batched_plan(sa, sb, batch)
    if type(a._data) is np.ndarray and type(b._data) is np.ndarray:
        if len(_MATMUL_PLANS) > 4096:
            _MATMUL_PLANS.clear()
        _MATMUL_PLANS[(sa, sb)] = plan
    return _batched(a, b, *plan)


def _batched_plan(sa, sb, batch):
    """How ``a @ b`` of checked shapes ``sa`` and ``sb`` (b at least 3-D) runs as
    one bmm: (a vector a's row shape or None, expanded shape of a or None, of
    b or None, a's bmm shape, b's bmm shape, the result's shape)."""
    squeeze_m = len(sa) == 1
    if squeeze_m:                   # a vector: a row first, as (1, k)
        sa = (1, sa[0])
    m, k = sa[-2], sa[-1]
    n = sb[-1]
    nbatch = int(math.prod(batch))
    ea = batch + (m, k) if sa[:-2] != batch else None
    eb = batch + (k, n) if sb[:-2] != batch else None
    shape = batch + ((n,) if squeeze_m else (m, n))
    return (sa if squeeze_m else None, ea, eb, (nbatch, m, k), (nbatch, k, n), shape)


def _batched(a, b, row, ea, eb, sa3, sb3, shape):
    """``a @ b`` by a plan of _batched_plan: the same records as ``reshape(bmm(
    reshape(expand(a)), reshape(expand(b))), shape)`` (a vector ``a`` reshaped
    to a ``row`` first), with the reshapes of contiguous operands made here
    without the op's argument handling."""
    if row is not None:
        a = _reshape_to(a, row)
    if ea is not None:
        a = _ops.expand(a, ea)
    if eb is not None:
        b = _ops.expand(b, eb)
    a = _reshape_to(a, sa3)
    b = _reshape_to(b, sb3)
    return _reshape_to(record_bmm(a, b, np.matmul(a._data, b._data)), shape)


def _reshape_to(t, shape):
    """``_ops.reshape(t, shape)`` for a valid ``shape`` (a tuple of ints)."""
    d = t._data
    if type(d) is not np.ndarray or not d.flags.c_contiguous:
        return _ops.reshape(t, shape)
    out = d.reshape(shape)
    if t._rg and grad_mode.enabled:
        res = _record_struct(_OP_RESHAPE, t, out)
    else:
        res = _leaf(out)
    return as_view(res, t, _reshaper(shape))


def _reshaper(shape):
    return lambda m: m.reshape(shape)


def dot(a, b):
    a, b = _t(a), _t(b)
    sa, sb = np.shape(a._data), np.shape(b._data)
    if len(sa) != 1 or len(sb) != 1:
        raise RuntimeError(f'dot: 1D tensors expected, but got {len(sa)}D and {len(sb)}D tensors')
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f'dot : expected both vectors to have same dtype, but found '
                           f'{a._data.dtype} and {b._data.dtype} (shapes {sa} and {sb})')
    if sa != sb:
        raise RuntimeError(f'dot: inconsistent tensor size, expected tensor [{sa[0]}] and src '
                           f'[{sb[0]}] to have the same number of elements, but got {sa[0]} '
                           f'and {sb[0]} elements respectively')
    return _ops.matmul(a, b)


def inner(a, b):
    """``torch.inner``: a product over the last dimension of each (a scalar's: a product)."""
    a, b = _t(a), _t(b)
    sa, sb = np.shape(a._data), np.shape(b._data)
    if sa and sb and a._data.dtype != b._data.dtype:
        raise RuntimeError(f'inner: both inputs should have same dtype (got {a._data.dtype} '
                           f'and {b._data.dtype}, shapes {sa} and {sb})')
    if not sa or not sb:
        return _ops.mul(a, b)
    if len(sa) == 1 and len(sb) == 1:
        return dot(a, b)
    if sa[-1] != sb[-1]:
        raise RuntimeError(f'inner() the last dimension must match on both input tensors but '
                           f'got shapes {list(sa)} and {list(sb)}')
    k = sa[-1]
    m, n = int(math.prod(sa[:-1])), int(math.prod(sb[:-1]))
    out = _ops.matmul(_ops.reshape(a, m, k), _ops.t(_ops.reshape(b, n, k)))
    return _ops.reshape(out, sa[:-1] + sb[:-1])


def mv(a, v):
    a, v = _t(a), _t(v)
    sa, sv = np.shape(a._data), np.shape(v._data)
    if len(sa) != 2 or len(sv) != 1:
        raise RuntimeError(f'mv: vector + matrix @ vector expected, got {len(sa)}D and '
                           f'{len(sv)}D (shapes {_shape_str(sa)} and {_shape_str(sv)})')
    if sa[1] != sv[0]:
        raise RuntimeError(f'mv: size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), '
                           f'vec ({sv[0]})')
    return matmul(a, v)


def outer(a, b):
    a, b = _t(a), _t(b)
    sa, sb = np.shape(a._data), np.shape(b._data)
    if len(sa) != 1 or len(sb) != 1:
        raise RuntimeError(f'outer: expected 1D vectors, got shapes {_shape_str(sa)} and '
                           f'{_shape_str(sb)}')
    return _ops.mul(_ops.reshape(a, sa[0], 1), b)       # (PyTorch's: b broadcasts)


ger = outer


# -------------------------------------------------------------------- einsum
def _parse(equation, operands):
    eq = equation.replace(' ', '')
    lhs, arrow, rhs = eq.partition('->')
    terms = lhs.split(',')
    if len(terms) != len(operands):
        raise RuntimeError(f'einsum(): {len(terms)} operand subscript(s) in {equation!r} but '
                           f'{len(operands)} operand(s) given')
    ell_nd = 0
    for t, x in zip(terms, operands):
        if '...' in t:
            ell_nd = max(ell_nd, np.ndim(x._data) - (len(t) - 3))
    used = set(eq)
    pool = [c for c in 'ABCDEFGHIJKLMNOPQRSTUVWXYZ' if c not in used][:ell_nd]
    labels = []
    for t, x in zip(terms, operands):
        nd = np.ndim(x._data)
        if '...' in t:
            k = nd - (len(t) - 3)
            t = t.replace('...', ''.join(pool[ell_nd - k:]))
        if len(t) != nd or not all(c.isalpha() for c in t):
            raise RuntimeError(f'einsum(): the number of subscripts in {t!r} does not match the '
                               f'number of dimensions ({nd}) of its operand '
                               f'{_shape_str(np.shape(x._data))}')
        labels.append(t)
    if arrow:
        out = rhs.replace('...', ''.join(pool))
        if not all(c.isalpha() for c in out) or len(set(out)) != len(out):
            raise RuntimeError(f'einsum(): invalid output subscripts {rhs!r}')
        for c in out:
            if not any(c in t for t in labels):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   'equation for any input operand')
    else:
        counts = {}
        for t in labels:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ''.join(pool) + ''.join(sorted(c for c, n in counts.items()
                                             if n == 1 and c not in pool))
    return labels, out


def _diagonal(x, lab):
    """Take the diagonal of repeated labels: 'ii' -> 'i'."""
    uniq = ''.join(dict.fromkeys(lab))
    if uniq == lab:
        return x, lab
    shape = np.shape(x._data)
    for c in uniq:
        sizes = {shape[i] for i, l in enumerate(lab) if l == c}
        if len(sizes) > 1:
            raise RuntimeError(f'einsum(): subscript {c} is repeated for operand of shape '
                               f'{_shape_str(shape)} but the sizes do not match')
    idx = np.einsum(f'{lab}->{uniq}', _flat_index(shape))
    d = np.asarray(x._data).reshape(-1)[idx]
    return take_as('index', x, d, idx), uniq


def _sum_labels(x, lab, keep):
    drop = [i for i, c in enumerate(lab) if c not in keep]
    if not drop:
        return x, lab
    return _ops.sum_(x, tuple(drop)), ''.join(c for c in lab if c in keep)


def _permute_to(x, lab, order):
    if lab == order:
        return x
    return _ops.permute(x, *[lab.index(c) for c in order])


def _contract(x, lx, y, ly, keep, sizes):
    """Contract two operands, keeping the labels in ``keep`` (in the result's order)."""
    batch = [c for c in lx if c in ly and c in keep]
    contract = [c for c in lx if c in ly and c not in keep]
    left = [c for c in lx if c not in ly]
    right = [c for c in ly if c not in lx]
    # broadcast size-1 dims of shared labels (ellipsis dims)
    x = _expand_labels(x, lx, sizes)
    y = _expand_labels(y, ly, sizes)
    dx, dy = np.asarray(x._data).dtype, np.asarray(y._data).dtype
    if not contract and dx != dy:
        # no summed label: PyTorch multiplies (promoting); only a contraction is a bmm,
        # which takes one dtype
        dt = promote_types(dx, dy)
        x, y = _ops.to(x, dt), _ops.to(y, dt)
    xb = _permute_to(x, lx, ''.join(batch + left + contract))
    yb = _permute_to(y, ly, ''.join(batch + contract + right))
    nb = int(math.prod([sizes[c] for c in batch]))
    nl = int(math.prod([sizes[c] for c in left]))
    nc = int(math.prod([sizes[c] for c in contract]))
    nr = int(math.prod([sizes[c] for c in right]))
    if nb == 1:
        r = _ops.mm(*_same_dtype(_ops.reshape(xb, nl, nc), _ops.reshape(yb, nc, nr)))
    else:
        r = bmm(_ops.reshape(xb, nb, nl, nc), _ops.reshape(yb, nb, nc, nr))
    lab = ''.join(batch + left + right)
    r = _ops.reshape(r, tuple(sizes[c] for c in lab))
    return r, lab


def _expand_labels(x, lab, sizes):
    shape = np.shape(x._data)
    want = tuple(sizes[c] for c in lab)
    return x if shape == want else _ops.expand(x, want)


def _sublist_equation(first, rest):
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (PyTorch's sublist form, ``...``
    as Ellipsis) as an equation and its operands."""
    args = (first,) + tuple(rest)
    out = None
    if len(args) % 2:                   # operand, sublist pairs, then the output's
        out, args = args[-1], args[:-1]
    ops, subs = args[0::2], args[1::2]

    def letters(sub):
        chars = []
        for v in sub:
            if v is Ellipsis:
                chars.append('...')
            elif isinstance(v, int) and 0 <= v < 52:
                chars.append('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'[v])
            else:
                raise ValueError(f'einsum(): subscript in subscript list is not within the '
                                 f'valid range [0, 52), got {v}')
        return ''.join(chars)
    eq = ','.join(letters(s) for s in subs)
    if out is not None:
        eq += '->' + letters(out)
    return eq, tuple(ops)


def einsum(equation, *operands):
    """Einstein summation for one or two operands (more are folded pairwise).

    >>> import tape
    >>> tape.einsum('ij,jk->ik', tape.ones(2, 3), tape.ones(3, 4)).shape
    tape.Size([2, 4])
    """
    if not isinstance(equation, str):
        equation, operands = _sublist_equation(equation, operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ops = [_t(x) for x in operands]
    labels, out = _parse(equation, ops)
    sizes = {}
    for x, lab in zip(ops, labels):
        for c, s in zip(lab, np.shape(x._data)):
            if c in sizes and sizes[c] != s and 1 not in (sizes[c], s):
                raise RuntimeError(f'einsum(): operands do not broadcast: subscript {c} has size '
                                   f'{sizes[c]} and {s} (equation {equation!r}, shapes '
                                   + ', '.join(_shape_str(np.shape(o._data)) for o in ops) + ')')
            sizes[c] = s if c not in sizes or sizes[c] == 1 else sizes[c]
    terms = []
    for i, (x, lab) in enumerate(zip(ops, labels)):
        x, lab = _diagonal(x, lab)
        others = set(out).union(*[set(labels[j]) for j in range(len(ops)) if j != i])
        x, lab = _sum_labels(x, lab, others)
        terms.append((x, lab))
    x, lx = terms[0]
    for j in range(1, len(terms)):
        y, ly = terms[j]
        later = set(out).union(*[set(t[1]) for t in terms[j + 1:]])
        x, lx = _contract(x, lx, y, ly, later, sizes)
    x, lx = _sum_labels(x, lx, set(out))
    x = _expand_labels(x, lx, sizes)
    return _permute_to(x, lx, out)
