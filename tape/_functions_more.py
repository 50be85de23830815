"""More top-level ``torch`` functions: the old decompositions (``svd``, ``cholesky``,
``lu``, ``lu_unpack``, ``lu_solve``, ``triangular_solve``), ``quantile`` /
``nanquantile``, the ``*_scatter`` ops, ``gradient``, ``pdist``, ``vander``,
``mvlgamma``, ``i0`` and friends.  All are compositions of differentiable tape ops
(twice differentiable for free) except the Bessel functions, custom Functions whose
backward is written in tape ops, and ``nextafter`` / ``isin`` / ``unravel_index``,
which have no gradient.

>>> import tape
>>> tape.quantile(tape.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
tensor(2.5000)
"""
import builtins
import math
import warnings

import numpy as np

from . import _ops
from .return_types import make as _return_type
from ._tensor import Tensor, _leaf

__all__ = ['svd', 'cholesky', 'cholesky_solve', 'cholesky_inverse', 'lu', 'lu_unpack', 'lu_solve', 'triangular_solve', 'quantile',
           'nanquantile', 'isin', 'ldexp', 'diagonal_scatter', 'select_scatter',
           'slice_scatter', 'unravel_index', 'chain_matmul', 'gradient', 'pdist', 'nextafter',
           'vander', 'is_nonzero', 'narrow_copy', 'mvlgamma', 'i0']

_SVD = _return_type('svd', ['U', 'S', 'V'])
_LU_INFO = _return_type('_lu_with_info', ['LU', 'pivots', 'info'])
_LU_UNPACK = _return_type('lu_unpack', ['P', 'L', 'U'])
_TRI = _return_type('triangular_solve', ['solution', 'cloned_coefficient'])


def _where(c, a, b):
    from ._elementwise import where
    return where(c, a, b)


def _t(x, like=None):
    if isinstance(x, Tensor):
        return x
    return _ops._const(x, like) if like is not None else _ops._const(x)


def _linalg():
    from . import linalg
    return linalg


def _float(x):
    """Integer/bool input promoted to the default float dtype (as torch's float ops)."""
    from ._dtypes import default_dtype
    if x._data.dtype.kind in 'biu':
        return _ops.to(x, default_dtype[0])
    return x


_WARNED = set()


def _warn_once(key, msg):
    """A deprecation UserWarning, once per process (torch's TORCH_WARN_ONCE)."""
    if key not in _WARNED:
        _WARNED.add(key)
        # (4: the user's line, above the function and its out= wrapper, _honour_out)
        warnings.warn(msg, UserWarning, stacklevel=4)


_DEPRECATED = {
    'cholesky': 'torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be '
                'removed in a future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced '
                'with\nL = torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\n'
                'should be replaced with\nU = torch.linalg.cholesky(A).mH\nThis transform will '
                'produce equivalent results for all valid (symmetric positive definite) inputs.',
    'triangular_solve': 'torch.triangular_solve is deprecated in favor of '
                        'torch.linalg.solve_triangularand will be removed in a future PyTorch '
                        'release.\ntorch.linalg.solve_triangular has its arguments reversed and '
                        'does not return a copy of one of the inputs.\nX = '
                        'torch.triangular_solve(B, A).solution\nshould be replaced with\nX = '
                        'torch.linalg.solve_triangular(A, B).',
    'lu': 'torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex '
          'and will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, '
          'compute_pivots)\nshould be replaced with\nLU, pivots = torch.linalg.lu_factor(A, '
          'compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)'
          '\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, '
          'compute_pivots)',
    'chain_matmul': 'torch.chain_matmul is deprecated and will be removed in a future PyTorch '
                    'release. Use torch.linalg.multi_dot instead, which accepts a list of two or '
                    'more tensors rather than multiple parameters.',
    'lu_solve': 'torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be '
                'removed in a future PyTorch release.\nNote that torch.linalg.lu_solve has its '
                'arguments reversed.\nX = torch.lu_solve(B, LU, pivots)\nshould be replaced with'
                '\nX = torch.linalg.lu_solve(LU, pivots, B)',
}


# -- old decompositions ---------------------------------------------------------------

def svd(input, some=True, compute_uv=True, *, out=None):  # noqa: A002
    """``torch.svd``: ``(U, S, V)`` with ``A = U diag(S) V^T`` (V, not Vh); ``some``
    gives the reduced form; without ``compute_uv`` U and V are zero-filled m x m and
    n x n (S stays differentiable)."""
    L = _linalg()
    A = _t(input)
    if compute_uv:
        U, S, Vh = L.svd(A, full_matrices=not some)
        return _SVD(U, S, Vh.mT)
    S = L.svdvals(A)
    m, n = A.shape[-2], A.shape[-1]
    dt = A._data.dtype
    batch = tuple(A.shape[:-2])
    return _SVD(_leaf(np.zeros(batch + (m, m), dt)), S, _leaf(np.zeros(batch + (n, n), dt)))


def cholesky(input, upper=False, *, out=None):  # noqa: A002
    """``torch.cholesky``: ``linalg.cholesky`` with the ``upper`` flag positional."""
    _warn_once('cholesky', _DEPRECATED['cholesky'])
    return _linalg().cholesky(input, upper=upper)


def cholesky_solve(B, L, upper=False, *, out=None):
    """``torch.cholesky_solve``: ``X`` with ``A X = B`` for ``A = L L^T`` (``U^T U``
    with ``upper``).  Solved with ``A`` formed from the factor, so that the
    gradient in ``L`` is PyTorch's: that of ``A = L L^T`` in every entry of L
    (triangular solves would read, and give a gradient to, one triangle only)."""
    la = _linalg()
    B = B if isinstance(B, Tensor) else _ops._const(B)
    L = L if isinstance(L, Tensor) else _ops._const(L)
    _check_solve_inputs(B, L, 'cholesky_solve', 'cholesky_solve_cpu')
    A = L.mT @ L if upper else L @ L.mT
    # (B is a batch of matrices, never of vectors as linalg.solve may read it)
    return la.solve(A, la._matrix_rhs(B, A))


def _check_solve_inputs(b, A, name, kernel):
    """PyTorch's checks of cholesky_solve's and triangular_solve's (b, A)."""
    if b.dim() < 2:
        raise RuntimeError(f'b should have at least 2 dimensions, but has {b.dim()} dimensions '
                           f'instead')
    if A.dim() < 2:
        raise RuntimeError(f'u should have at least 2 dimensions, but has {A.dim()} dimensions '
                           f'instead')
    if b._data.dtype != A._data.dtype:
        raise RuntimeError(f'Expected b and A to have the same dtype, but found b of type '
                           f'{_type_name(b)} and A of type {_type_name(A)} instead.')
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'A must be batches of square matrices, but they are {A.shape[-2]} '
                           f'by {A.shape[-1]} matrices')
    if A.shape[-1] != b.shape[-2]:
        raise RuntimeError(f'Incompatible matrix sizes for {name}: each A matrix is '
                           f'{A.shape[-1]} by {A.shape[-1]} but each b matrix is {b.shape[-2]} '
                           f'by {b.shape[-1]}')
    if A._data.dtype.kind != 'f':
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_type_name(A)}\'')


def _type_name(t):
    from ._linalg_more import _type_name
    return _type_name(t)


def cholesky_inverse(L, upper=False, *, out=None):
    """``torch.cholesky_inverse``: ``A^-1`` for ``A = L L^T`` (``U^T U`` with ``upper``)."""
    L = L if isinstance(L, Tensor) else _ops._const(L)
    if L.dim() < 2:
        raise RuntimeError('cholesky_inverse: The input tensor A must have at least 2 '
                           'dimensions.')
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f'cholesky_inverse: A must be batches of square matrices, but they '
                           f'are {L.shape[-2]} by {L.shape[-1]} matrices')
    if L._data.dtype.kind != 'f':
        raise NotImplementedError(f'"cholesky_inverse_out_cpu" not implemented for '
                                  f"'{_type_name(L)}'")
    n = L.shape[-1]
    eye = _leaf(np.ascontiguousarray(np.broadcast_to(np.eye(n, dtype=np.asarray(L._data).dtype),
                                                     tuple(L.shape))))
    return cholesky_solve(eye, L, upper)


def lu(A, pivot=True, get_infos=False, out=None):
    """``torch.lu``: ``(LU, pivots)``, plus ``infos`` with ``get_infos`` (never raises
    for a singular matrix, as torch)."""
    _warn_once('lu', _DEPRECATED['lu'])
    LU, piv, info = _linalg().lu_factor_ex(A, pivot=pivot)
    if get_infos:
        return _LU_INFO(LU, piv, info)
    return LU, piv


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``torch.lu_unpack``: ``(P, L, U)`` from ``lu_factor``'s output; L and U are
    differentiable in ``LU_data``."""
    from ._linalg_more import _unpack
    LU = _t(LU_data)
    P, L, U = _unpack(LU, _t(LU_pivots))
    dt = LU._data.dtype
    empty = _leaf(np.zeros((0,), dt))
    if not unpack_pivots:
        P = empty
    if not unpack_data:
        L = U = _leaf(np.zeros((0,), dt))
    return _LU_UNPACK(P, L, U)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve``: ``linalg.lu_solve(LU_data, LU_pivots, b)``."""
    _warn_once('lu_solve', _DEPRECATED['lu_solve'])
    return _linalg().lu_solve(LU_data, LU_pivots, b)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """``torch.triangular_solve``: ``(X, A.clone())`` with ``op(A) X = b``, ``op`` the
    transpose when ``transpose``; only A's triangle (its diagonal, unless
    ``unitriangular``) is read, so only it gets a gradient."""
    A = _t(A)
    b = _t(b, A)
    if A.dim() < 2 or b.dim() < 2:
        raise RuntimeError(f'triangular_solve: Expected b to have at least 2 dimensions, but it '
                           f'has {b.dim()} dimensions instead' if b.dim() < 2 else
                           f'triangular_solve: Expected A to have at least 2 dimensions, but it '
                           f'has {A.dim()} dimensions instead')
    _check_solve_inputs(b, A, 'triangular_solve', 'triangular_solve_cpu')
    _warn_once('triangular_solve', _DEPRECATED['triangular_solve'])
    M = A.mT if transpose else A
    X = _linalg().solve_triangular(M, b, upper=(upper != bool(transpose)),
                                   unitriangular=unitriangular)
    # the coefficient broadcast to the solution's batch shape, as PyTorch clones it
    shape = tuple(X.shape[:-2]) + tuple(A.shape[-2:])
    return _TRI(X, (A.expand(*shape) if tuple(A.shape) != shape else A).clone())


def chain_matmul(*matrices, out=None):
    """``torch.chain_matmul`` (deprecated): ``linalg.multi_dot`` of 2-D matrices."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    _warn_once('chain_matmul', _DEPRECATED['chain_matmul'])
    if not matrices:
        raise RuntimeError('chain_matmul(): Expected one or more matrices')
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f'Tensor dimension is {m.dim()}, expected 2 instead.')
    if len(matrices) == 1:
        return matrices[0].clone()
    return _linalg().multi_dot(list(matrices))


# -- quantiles ---------------------------------------------------------------------

_INTERP = ('linear', 'lower', 'higher', 'midpoint', 'nearest')


def _quantile(x, q, dim, keepdim, interpolation, ignore_nan, name):
    from ._composites import lerp, sort
    x = _t(x)
    if x._data.dtype not in (np.float32, np.float64):     # (half too: PyTorch has no kernel)
        raise RuntimeError(f'{name}() input tensor must be either float or double dtype')
    scalar_q = not isinstance(q, Tensor) or q.dim() == 0
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f'{name}() q must be a scalar or 1D tensor')
        if q._data.dtype != x._data.dtype:
            raise RuntimeError(f'{name}() q tensor must be same dtype as the input tensor')
        qa = np.asarray(q._data).reshape(-1)
        if not bool(np.all((qa >= 0) & (qa <= 1))):
            raise RuntimeError(f'{name}() q values must be in the range [0, 1]')
    else:
        qf = builtins.float(q)
        if not 0 <= qf <= 1:
            raise RuntimeError(f'{name}() q must be in the range [0, 1] but got {q}')
        qa = np.asarray([qf], dtype=x._data.dtype)
    if interpolation not in _INTERP:
        raise RuntimeError(f'{name}() interpolation must be one of linear, lower, higher, '
                           f'midpoint or nearest, but got {interpolation}')
    if x.numel() == 0:
        raise RuntimeError(f'{name}() input tensor must be non-empty')
    shape = tuple(x.shape)
    if dim is None:
        v = x.reshape(-1)
        out_shape = (1,) * len(shape) if keepdim else ()
    else:
        nd = builtins.max(x.dim(), 1)
        if not -nd <= dim < nd:
            raise IndexError(f'Dimension out of range (expected to be in range of '
                             f'[{-nd}, {nd - 1}], but got {dim})')
        d = dim % nd
        v = x.reshape(1) if x.dim() == 0 else x.movedim(d, -1)
        if x.dim() == 0:
            out_shape = ()
        else:
            out_shape = tuple(1 if i == d else n for i, n in enumerate(shape)) if keepdim \
                else tuple(n for i, n in enumerate(shape) if i != d)
    s = sort(v, -1)[0]
    sa = np.asarray(s._data)
    n = sa.shape[-1]
    lead = sa.shape[:-1]
    nq = qa.shape[0]
    # the ranks in the input's dtype, as PyTorch's (a float32 0.7 * 5 rounds to 3.5,
    # which 'nearest' rounds to 4; in float64 it is just below)
    qb = qa.astype(sa.dtype).reshape((nq,) + (1,) * len(lead) + (1,))
    if ignore_nan:
        cnt = (~np.isnan(sa)).sum(-1, keepdims=True)
        ranks = qb * (cnt - 1).astype(sa.dtype)
        ranks = np.where(ranks < 0, 0, ranks)
    else:
        ranks = np.where(np.isnan(sa).any(-1, keepdims=True), n - 1.0, qb * (n - 1))
        ranks = np.broadcast_to(ranks, (nq,) + lead + (1,))
    if interpolation == 'lower':
        ranks = np.floor(ranks)
    elif interpolation == 'higher':
        ranks = np.ceil(ranks)
    elif interpolation == 'nearest':
        ranks = np.round(ranks)
    below = ranks.astype(np.int64)
    sx = s.unsqueeze(0).expand(nq, *s.shape)
    vals = sx.gather(-1, _leaf(np.ascontiguousarray(below)))
    if interpolation in ('linear', 'midpoint'):
        w = np.full(ranks.shape, 0.5) if interpolation == 'midpoint' else ranks - below
        above = sx.gather(-1, _leaf(np.ascontiguousarray(np.ceil(ranks).astype(np.int64))))
        vals = lerp(vals, above, _leaf(np.ascontiguousarray(w.astype(sa.dtype))))
    vals = vals.reshape(*((nq,) + out_shape))
    return vals.reshape(*out_shape) if scalar_q else vals


def quantile(input, q, dim=None, keepdim=False, *, interpolation='linear', out=None):  # noqa: A002
    """``torch.quantile``: the ``q``-th quantiles (a float or a 1-D tensor, whose
    dim comes first in the result) over ``dim`` (all elements when None); a row
    with a nan gives nan.  Differentiable through the sort."""
    from ._out import into_out
    return into_out(_quantile(input, q, dim, keepdim, interpolation, False, 'quantile'), out,
                    'quantile', input, q)


def nanquantile(input, q, dim=None, keepdim=False, *,  # noqa: A002
                interpolation='linear', out=None):
    """``torch.nanquantile``: ``quantile`` ignoring nans (nan for an all-nan row)."""
    from ._out import into_out
    return into_out(_quantile(input, q, dim, keepdim, interpolation, True, 'nanquantile'), out,
                    'nanquantile', input, q)


# -- small elementwise / set ops ---------------------------------------------------------

def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """``torch.isin``: whether each element of ``elements`` is in ``test_elements``
    (either may be a scalar); bool, no gradient."""
    e = np.asarray(elements._data) if isinstance(elements, Tensor) else np.asarray(elements)
    te = np.asarray(test_elements._data) if isinstance(test_elements, Tensor) \
        else np.asarray(test_elements)
    return _leaf(np.ascontiguousarray(np.isin(e, te, invert=invert)))


def ldexp(input, other, *, out=None):  # noqa: A002
    """``torch.ldexp``: ``input * 2 ** other`` (a float result), differentiable in both."""
    x = _t(input)
    o = _float(_t(other, x))
    import tape
    return _ops.mul(_float(x), tape.pow(2.0, o))


def nextafter(input, other, *, out=None):  # noqa: A002
    """``torch.nextafter``: the next float after ``input`` towards ``other`` (no
    gradient: torch does not implement one either)."""
    x = _t(input)
    o = _t(other, x)
    return _leaf(np.ascontiguousarray(np.nextafter(np.asarray(x._data), np.asarray(o._data))))


def is_nonzero(input):  # noqa: A002
    """``torch.is_nonzero``: the truth of a one-element tensor."""
    n = input.numel()
    if n == 0:
        raise RuntimeError('Boolean value of Tensor with no values is ambiguous')
    if n > 1:
        raise RuntimeError('Boolean value of Tensor with more than one value is ambiguous')
    return builtins.bool(np.asarray(input._data).reshape(-1)[0] != 0)


def narrow_copy(input, dim, start, length, *, out=None):  # noqa: A002
    """``torch.narrow_copy``: ``narrow`` as a new tensor."""
    return input.narrow(dim, start, length).clone()


def unravel_index(indices, shape):
    """``torch.unravel_index``: a tuple of int64 coordinate tensors (indices wrap
    modulo each size, as torch's floor division does)."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    if isinstance(indices, Tensor):
        a = np.asarray(indices._data)
    else:
        a = np.asarray(indices)
    if a.dtype.kind not in 'iu':
        raise TypeError(f"expected 'indices' to be integer dtype, but got "
                        f"{'torch.' + str(a.dtype) if a.dtype.kind in 'fb' else a.dtype}")
    a = a.astype(np.int64)
    out = []
    for s in reversed(shape):
        out.append(np.mod(a, s) if s else np.zeros_like(a))
        a = np.floor_divide(a, s) if s else a
    return tuple(_leaf(np.ascontiguousarray(c)) for c in reversed(out))


# -- scatters into a view ----------------------------------------------------------------

def _scatter_view(x, src, pick):
    """``x`` with the view ``pick(x)`` replaced by ``src``, as a scatter into the
    flattened ``x`` (differentiable in both)."""
    x = _t(x)
    src = _t(src, x)
    idx = pick(np.arange(x.numel(), dtype=np.int64).reshape(tuple(x.shape)))
    if tuple(src.shape) != idx.shape:
        raise RuntimeError(f'expected src to have a size equal to the slice of self. src size = '
                           f'{list(src.shape)}, slice size = {list(idx.shape)}')
    if src._data.dtype != x._data.dtype:
        src = _ops.to(src, x._data.dtype)
    flat = x.reshape(-1)
    ix = _leaf(np.ascontiguousarray(idx.reshape(-1)))
    return flat.scatter(0, ix, src.reshape(-1)).reshape(*x.shape)


def _wrap_dim(d, nd):
    if not -nd <= d < builtins.max(nd, 1):
        raise IndexError(f'Dimension out of range (expected to be in range of '
                         f'[{-builtins.max(nd, 1)}, {builtins.max(nd, 1) - 1}], but got {d})')
    return d % builtins.max(nd, 1)


def select_scatter(input, src, dim, index):  # noqa: A002
    """``torch.select_scatter``: ``input`` with ``input.select(dim, index)`` set to ``src``."""
    x = _t(input)
    d = _wrap_dim(dim, x.dim())
    size = x.shape[d]
    if not -size <= index < size:
        raise IndexError(f'select(): index {index} out of range for tensor of size '
                         f'{list(x.shape)} at dimension {d}')
    return _scatter_view(x, src, lambda a: np.take(a, index % size, axis=d))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``torch.slice_scatter``: ``input`` with ``input[..., start:end:step, ...]`` (at
    ``dim``) set to ``src``."""
    x = _t(input)
    d = _wrap_dim(dim, x.dim())
    if step <= 0:
        raise RuntimeError('slice step must be positive')
    sl = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_view(x, src, lambda a: a[sl])


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``torch.diagonal_scatter``: ``input`` with ``input.diagonal(offset, dim1, dim2)``
    set to ``src``."""
    x = _t(input)
    d1, d2 = _wrap_dim(dim1, x.dim()), _wrap_dim(dim2, x.dim())
    if d1 == d2:
        raise RuntimeError(f'diagonal dimensions cannot be identical {dim1}, {dim2}')
    return _scatter_view(x, src, lambda a: np.diagonal(a, offset, d1, d2))


# -- gradient, pdist, vander ------------------------------------------------------------

def _sl(nd, d, s):
    return (slice(None),) * d + (s,)


def _coord_shape(nd, d, v):
    """A 1-D spacing tensor shaped to broadcast along dim ``d``."""
    return v.reshape(*((1,) * d + (-1,) + (1,) * (nd - d - 1)))


def _grad_uniform(f, d, h, edge):
    from ._shapes import cat
    nd = f.dim()
    g = lambda s: f[_sl(nd, d, s)]  # noqa: E731
    mid = (g(slice(2, None)) - g(slice(None, -2))) / (2.0 * h)
    if edge == 1:
        first = (g(slice(1, 2)) - g(slice(0, 1))) / h
        last = (g(slice(-1, None)) - g(slice(-2, -1))) / h
    else:
        first = (g(slice(0, 1)) * -1.5 + g(slice(1, 2)) * 2.0 - g(slice(2, 3)) * 0.5) / h
        last = (g(slice(-3, -2)) * 0.5 - g(slice(-2, -1)) * 2.0 + g(slice(-1, None)) * 1.5) / h
    return cat([first, mid, last], d)


def _grad_coords(f, d, x, edge):
    from ._shapes import cat
    nd = f.dim()
    x = _ops.to(x, f._data.dtype) if x._data.dtype != f._data.dtype else x
    g = lambda s: f[_sl(nd, d, s)]  # noqa: E731
    dx = x[1:] - x[:-1]
    a1, a2 = dx[:-1], dx[1:]
    A = _coord_shape(nd, d, -a2 / (a1 * (a1 + a2)))
    B = _coord_shape(nd, d, (a2 - a1) / (a1 * a2))
    C = _coord_shape(nd, d, a1 / (a2 * (a1 + a2)))
    mid = A * g(slice(None, -2)) + B * g(slice(1, -1)) + C * g(slice(2, None))
    if edge == 1:
        first = (g(slice(1, 2)) - g(slice(0, 1))) / dx[0]
        last = (g(slice(-1, None)) - g(slice(-2, -1))) / dx[-1]
    else:
        h1, h2 = dx[0], dx[1]
        first = (g(slice(0, 1)) * (-(2.0 * h1 + h2) / (h1 * (h1 + h2)))
                 + g(slice(1, 2)) * ((h1 + h2) / (h1 * h2))
                 + g(slice(2, 3)) * (-h1 / (h2 * (h1 + h2))))
        h1, h2 = dx[-2], dx[-1]
        last = (g(slice(-3, -2)) * (h2 / (h1 * (h1 + h2)))
                + g(slice(-2, -1)) * (-(h2 + h1) / (h1 * h2))
                + g(slice(-1, None)) * ((2.0 * h2 + h1) / (h2 * (h1 + h2))))
    return cat([first, mid, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """``torch.gradient``: central differences in the interior and one-sided ones
    (first or second order) at the edges, per dim; ``spacing`` a scalar, a list of
    scalars, or a list of 1-D coordinate tensors.  Returns a tuple."""
    f = _float(_t(input))
    nd = f.dim()
    if edge_order not in (1, 2):
        raise RuntimeError('torch.gradient only supports edge_order=1 and edge_order=2.')
    if dim is None:
        dims = list(range(nd))
    elif isinstance(dim, (int, np.integer)):
        dims = [_wrap_dim(int(dim), nd)]
    else:
        dims = [_wrap_dim(int(x), nd) for x in dim]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            if dim is None:
                raise RuntimeError(
                    f"torch.gradient expected spacing to be unspecified, a scalar, or a list of "
                    f"length equal to 'self.dim() = {nd}', since dim argument was not given, "
                    f"but got a list of length {len(spacing)}")
            raise RuntimeError(
                f'torch.gradient expected spacing to be unspecified, a scalar or a list of '
                f'length {len(dims)}, but got a list of length {len(spacing)}')
        sp = list(spacing)
    else:
        sp = [spacing] * len(dims)
    for d in dims:
        if f.shape[d] < edge_order + 1:
            raise RuntimeError('torch.gradient expected each dimension size to be at least '
                               'edge_order+1')
    out = []
    for d, h in zip(dims, sp):
        if isinstance(h, Tensor) and h.dim() == 1:
            if h.shape[0] != f.shape[d]:
                raise RuntimeError(f'torch.gradient expected each tensor to be on the same '
                                   f'device and have size {f.shape[d]} along dim {d}')
            out.append(_grad_coords(f, d, h, edge_order))
        else:
            h = builtins.float(h.item()) if isinstance(h, Tensor) else h
            out.append(_grad_uniform(f, d, h, edge_order))
    return tuple(out)


def pdist(input, p=2):  # noqa: A002
    """``torch.pdist``: the p-norm distances between all pairs of rows ``i < j``
    (row-major), a composition of indexing and ``vector_norm``."""
    from ._reductions import vector_norm
    x = _t(input)
    if x.dim() != 2:
        raise RuntimeError(f'pdist only supports 2D tensors, got: {x.dim()}D')
    if x._data.dtype.kind != 'f':
        raise RuntimeError('pdist only supports floating-point dtypes')
    if p < 0:
        raise RuntimeError('pdist only supports non-negative p values')
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    if i.size == 0:
        return _ops.mul(x.reshape(-1)[:0], 1.0)
    diff = x[_leaf(i.astype(np.int64))] - x[_leaf(j.astype(np.int64))]
    return vector_norm(diff, p, -1)


def vander(x, N=None, increasing=False):
    """``torch.vander``: the Vandermonde matrix of a 1-D ``x``, powers decreasing
    unless ``increasing`` (``N`` columns, default ``len(x)``)."""
    from ._shapes import cat
    x = _t(x)
    if x.dim() != 1:
        raise RuntimeError('x must be a one-dimensional tensor.')
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError('N must be non-negative.')
    if n == 0:
        return _leaf(np.zeros((x.shape[0], 0), x._data.dtype))
    ones = _ops._const(np.ones((x.shape[0], 1), x._data.dtype))
    if n == 1:
        return ones
    rest = x.unsqueeze(-1).expand(x.shape[0], n - 1)
    v = cat([ones, rest], -1).cumprod(-1)
    return v if increasing else v.flip(-1)


# -- special functions -------------------------------------------------------------------

def mvlgamma(input, p):  # noqa: A002
    """``torch.mvlgamma``: the multivariate log-gamma of dimension ``p``,
    ``sum_j lgamma(x - j/2) + p(p-1)/4 log(pi)``."""
    if p < 1:
        raise RuntimeError('p has to be greater than or equal to 1')
    x = _float(_t(input))
    args = np.arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=x._data.dtype)
    a = x.unsqueeze(-1) + _ops._const(args)
    return a.lgamma().sum(-1) + p * (p - 1) * math.log(math.pi) / 4


_BESSEL = {}


def _bessel():
    if _BESSEL:
        return _BESSEL
    from compiler.special_kernels import bessel
    from .autograd import Function
    from .autograd.function import _register_node_class

    def run(name, x):
        # compiler/special_kernels.py: torch's Cephes expansions, in x's dtype
        return _leaf(bessel(name, np.asarray(x._data)))

    def tiny(x):
        # |x| <= eps (or NaN), PyTorch's mask: there the formulas' i1(x) / x loses
        # all precision (and 1 / x overflows for a subnormal x)
        d = np.asarray(x._data)
        with np.errstate(invalid='ignore'):
            return _ops._const(~(np.abs(d) > np.finfo(d.dtype).eps))

    def half_at_zero(x, d):
        # i1'(0) and i1e'(0) are 1/2: PyTorch's constant for |x| <= eps
        return _where(tiny(x), _ops._const(np.asarray(0.5, x._data.dtype)), d)

    def nonzero(x):
        # x with 1 where it is tiny (the 1/x of the formulas below, masked by half_at_zero)
        return _where(tiny(x), _ops._const(np.ones((), x._data.dtype)), x)

    # name -> (PyTorch's node name, derivative in terms of the four functions,
    # each applied as a Function again, so that it differentiates to any order)
    derivatives = {
        'i0': ('I0Backward0', lambda x, f: f['i1'].apply(x)),
        'i1': ('SpecialI1Backward0', lambda x, f: half_at_zero(
            x, f['i0'].apply(x) - f['i1'].apply(x) / nonzero(x))),
        'i0e': ('SpecialI0EBackward0',
                lambda x, f: f['i1e'].apply(x) - x.sign() * f['i0e'].apply(x)),
        'i1e': ('SpecialI1EBackward0', lambda x, f: half_at_zero(
            x, f['i0e'].apply(x) - f['i1e'].apply(x) * (x.sign() + 1.0 / nonzero(x)))),
    }

    def function(name, node, derivative):
        class Bessel(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return run(name, x)

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * derivative(x, _BESSEL)
        Bessel.__name__ = Bessel.__qualname__ = node[:-len('Backward0')]
        Bessel._backward_name = node            # PyTorch's grad_fn name
        _register_node_class(node)
        return Bessel

    for name, (node, derivative) in derivatives.items():
        _BESSEL[name] = function(name, node, derivative)
    return _BESSEL


def i0(input, *, out=None):  # noqa: A002
    """``torch.i0``: the modified Bessel function of the first kind, order 0;
    differentiable to any order (``i0' = i1``)."""
    return _bessel()['i0'].apply(_float(_t(input)))


def _special_i0e(input, *, out=None):  # noqa: A002
    """``torch.special.i0e``: ``exp(-|x|) i0(x)``."""
    return _bessel()['i0e'].apply(_float(_t(input)))


def _special_i1(input, *, out=None):  # noqa: A002
    """``torch.special.i1``: the modified Bessel function of the first kind, order 1."""
    return _bessel()['i1'].apply(_float(_t(input)))


def _special_i1e(input, *, out=None):  # noqa: A002
    """``torch.special.i1e``: ``exp(-|x|) i1(x)``."""
    return _bessel()['i1e'].apply(_float(_t(input)))


def _special_multigammaln(input, p, *, out=None):  # noqa: A002
    """``torch.special.multigammaln``: ``mvlgamma``."""
    return mvlgamma(input, p)


# -- torch.range (deprecated) --------------------------------------------------------------

_RANGE_WARNING = ("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).")


def _range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """``torch.range`` (deprecated): ``start, start + step, ...`` up to and including
    ``end``, in the default float dtype unless ``dtype``; warns as torch does."""
    from ._dtypes import default_dtype
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    warnings.warn(_RANGE_WARNING, UserWarning, stacklevel=2)
    if step == 0:
        raise RuntimeError('step must be nonzero')
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError('upper bound and larger bound inconsistent with step sign')
    n = int(math.floor((end - start) / step)) + 1
    dt = np.dtype(dtype) if dtype is not None else default_dtype[0]
    a = (start + np.arange(n, dtype=np.float64) * step).astype(dt)
    t = _leaf(np.ascontiguousarray(a))
    if requires_grad:
        t.requires_grad_(True)
    return t


_range.__name__ = 'range'
_range.__qualname__ = 'range'


# -- wiring ---------------------------------------------------------------------------------

def _honour_out():
    """PyTorch's out= for the functions above that declare it but compute without it."""
    from ._out import honour_out
    honour_out(globals(), ['svd', 'cholesky', 'cholesky_solve', 'cholesky_inverse', 'lu',
                           'lu_unpack', 'lu_solve', 'triangular_solve', 'chain_matmul', 'i0',
                           '_special_i0e', '_special_i1', '_special_i1e',
                           '_special_multigammaln'])


_honour_out()

_METHODS = ('svd', 'cholesky', 'lu', 'lu_solve', 'triangular_solve', 'quantile', 'nanquantile',
            'ldexp', 'diagonal_scatter', 'select_scatter', 'slice_scatter', 'nextafter',
            'is_nonzero', 'narrow_copy', 'mvlgamma', 'i0')


def _install(namespace):
    """Bind the functions into ``tape``'s namespace ``namespace`` (its globals), the
    Tensor methods, ``tape.range`` (through a module ``__getattr__``, so the package's
    own code keeps the builtin ``range``) and the missing ``tape.special`` entries."""
    g = globals()
    # names someone else already defines (in tape or on Tensor) stay theirs
    for name in __all__:
        namespace.setdefault(name, g[name])
    for name in _METHODS:
        if name not in Tensor.__dict__:
            setattr(Tensor, name, g[name])
    for name in ('ldexp', 'nextafter', 'mvlgamma', 'i0'):
        fn = g[name]

        def inplace(a, *args, _fn=fn, **kw):
            return _ops.inplace_apply(a, _fn, *args, **kw)
        inplace.__name__ = name + '_'
        if name + '_' not in Tensor.__dict__:
            setattr(Tensor, name + '_', inplace)
        if name in ('i0', 'ldexp'):                 # torch.i0_ and torch.ldexp_ too
            namespace.setdefault(name + '_', Tensor.__dict__[name + '_'])
    previous = namespace.get('__getattr__')

    def __getattr__(name):
        if name == 'range':
            return _range
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module 'tape' has no attribute '{name}'")
    namespace['__getattr__'] = __getattr__
    special = namespace.get('special')
    if special is not None:
        for name, fn in (('i0', i0), ('i0e', _special_i0e), ('i1', _special_i1),
                         ('i1e', _special_i1e), ('multigammaln', _special_multigammaln)):
            if not hasattr(special, name):
                setattr(special, name, fn)
