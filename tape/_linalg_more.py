"""More of ``torch.linalg``: the LU family (``lu_factor``, ``lu_factor_ex``, ``lu``,
``lu_solve``), the ``_ex`` variants (``solve_ex``, ``inv_ex``, ``cholesky_ex``),
``vecdot``, ``cond``, ``tensorinv``, ``tensorsolve``, ``vander``, ``diagonal`` and
``householder_product``.

The LU factorization is one custom Function over NumPy whose backward is PyTorch's
``linalg_lu_backward`` written in tape ops (so it differentiates again); everything
else is a composition of differentiable tape ops.

>>> import tape
>>> LU, piv = tape.linalg.lu_factor(tape.tensor([[1.0, 2.0], [3.0, 4.0]]))
>>> piv
tensor([2, 2], dtype=tape.int32)
"""

import math

import numpy as np

from . import _ops
from .return_types import make as _return_type
from . import linalg as _L
from ._tensor import Tensor, _leaf

__all__ = ['lu_factor', 'lu_factor_ex', 'lu', 'lu_solve', 'solve_ex', 'inv_ex', 'cholesky_ex',
           'vecdot', 'cond', 'tensorinv', 'tensorsolve', 'vander', 'diagonal',
           'householder_product']

_LU_FACTOR = _return_type('linalg_lu_factor', ['LU', 'pivots'])
_LU_FACTOR_EX = _return_type('linalg_lu_factor_ex', ['LU', 'pivots', 'info'])
_LU = _return_type('linalg_lu', ['P', 'L', 'U'])
_SOLVE_EX = _return_type('linalg_solve_ex', ['result', 'info'])
_INV_EX = _return_type('linalg_inv_ex', ['inverse', 'info'])
_CHOL_EX = _return_type('linalg_cholesky_ex', ['L', 'info'])


def _where(c, a, b):
    from ._elementwise import where
    return where(c, a, b)


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like) if like is not None \
        else _ops._const(x)


def _arr(t):
    return np.asarray(t._data)


def _batch_prefix(a, b):
    return f'(Batch element {b}): ' if a.ndim > 2 else ''


# -- the LU factorization in NumPy (partial pivoting, as LAPACK's getrf) -------------

def _lu_np(a):
    """``(LU, pivots (1-based int32), info (int32))`` of ``a`` (..., m, n), batched."""
    a = np.array(a, dtype=a.dtype, copy=True)
    batch = a.shape[:-2]
    m, n = a.shape[-2:]
    k = min(m, n)
    nb = math.prod(batch)
    f = a.reshape((nb, m, n))          # (not -1: ambiguous for an empty matrix)
    piv = np.zeros((nb, k), np.int32)
    info = np.zeros((nb,), np.int32)
    rows = np.arange(nb)
    for j in range(k):
        p = np.argmax(np.abs(f[:, j:, j]), axis=1) + j if m > j else np.full(nb, j)
        piv[:, j] = p + 1
        swap = p != j
        if swap.any():
            r = rows[swap]
            tmp = f[r, j, :].copy()
            f[r, j, :] = f[r, p[swap], :]
            f[r, p[swap], :] = tmp
        d = f[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        if j + 1 < m:
            with np.errstate(divide='ignore', invalid='ignore'):
                scale = np.where(zero[:, None], f[:, j + 1:, j],
                                 f[:, j + 1:, j] / np.where(zero, 1, d)[:, None])
            f[:, j + 1:, j] = scale
            if j + 1 < n:
                f[:, j + 1:, j + 1:] -= scale[:, :, None] * f[:, j, None, j + 1:]
    return (f.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch))


def _perm_np(piv, m):
    """The permutation matrices ``P`` (A = P L U) from 1-based LAPACK pivots."""
    batch = piv.shape[:-1]
    flat = piv.reshape((math.prod(batch), piv.shape[-1])) - 1    # (-1: ambiguous when empty)
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        a, b = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j], perm[rows, p] = b, a
    # row i of P^T A is row perm[i] of A, so P[perm[i], i] = 1
    P = np.zeros((flat.shape[0], m, m))
    P[rows[:, None], perm, np.arange(m)[None, :]] = 1
    return P.reshape(batch + (m, m))


def _split_np(lu):
    m, n = lu.shape[-2:]
    k = min(m, n)
    L = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    U = np.triu(lu[..., :k, :])
    return np.ascontiguousarray(L), np.ascontiguousarray(U)


_FN = []


def _lu_fn():
    if _FN:
        return _FN[0]
    from .autograd import Function

    class LinalgLuBackward0(Function):
        """``A = P L U``: L and U (P is a constant); PyTorch's ``linalg_lu_backward``."""
        @staticmethod
        def forward(ctx, A, P, L, U):
            ctx.set_materialize_grads(False)
            P, L, U = _leaf(P), _leaf(L), _leaf(U)
            ctx.save_for_backward(P, L, U)
            return L, U

        @staticmethod
        def backward(ctx, gL, gU):
            P, L, U = ctx.saved_tensors
            return _lu_backward(gL, gU, P, L, U), None, None, None
    _FN.append(LinalgLuBackward0)
    return LinalgLuBackward0


def _strs(A, B, upper, left=True, unitriangular=False):
    return _L.solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _lu_backward(gL, gU, P, L, U):
    from ._shapes import cat
    if gL is None and gU is None:
        return None
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        gA = (L.mT @ gL).tril(-1) if gL is not None else None
        if gU is not None:
            t = (gU @ U.mT).triu()
            gA = t if gA is None else gA + t
        gA = _strs(U.mT, gA, upper=False, left=False)
        gA = _strs(L.mT, gA, upper=True, unitriangular=True)
        return P @ gA
    if m < n:
        U1 = U[..., :, :k]
        gA = L.mT @ gL if gL is not None else None
        if gU is not None:
            t = gU.triu() @ U.mT
            gA = -t if gA is None else gA - t
        gA = _strs(U1.mT, gA.tril(-1), upper=False, left=False)
        if gU is not None:
            gA = cat([gA + gU[..., :, :k].triu(), gU[..., :, k:]], -1)
        gA = _strs(L.mT, gA, upper=True, unitriangular=True)
        if gU is None:
            gA = cat([gA, _ops.mul(U[..., :, k:], 0.0)], -1)
        return P @ gA
    L1 = L[..., :k, :]
    gA = gU @ U.mT if gU is not None else None
    if gL is not None:
        t = L.mT @ gL.tril(-1)
        gA = -t if gA is None else gA - t
    gA = _strs(L1.mT, gA.triu(), upper=True, unitriangular=True)
    if gL is not None:
        gA = cat([gA + gL[..., :k, :].tril(-1), gL[..., k:, :]], -2)
    gA = _strs(U.mT, gA, upper=False, left=False)
    if gL is None:
        gA = cat([gA, _ops.mul(L[..., k:, :], 0.0)], -2)
    return P @ gA


def _check_lu_input(A, name):
    A = _t(A)
    if A.dim() < 2:
        raise RuntimeError(f'{name}: Expected tensor with 2 or more dimensions. Got size: '
                           f'{list(A.shape)} instead')
    if A._data.dtype.kind != 'f':
        raise NotImplementedError(f'"lu_cpu" not implemented for '
                                  f'\'{_dtype_name(A._data.dtype)}\'')
    return A


def _dtype_name(dt):
    return {'int64': 'Long', 'int32': 'Int', 'int16': 'Short', 'int8': 'Char', 'uint8': 'Byte',
            'bool': 'Bool'}.get(np.dtype(dt).name, str(dt))


def _no_pivot(pivot):
    if not pivot:
        raise RuntimeError('linalg.lu_factor: LU without pivoting is not implemented on the CPU')


def _plu(A):
    """``(P, L, U, LU_np, pivots_np, info_np)`` with L and U differentiable."""
    a = _arr(A)
    lu_, piv, info = _lu_np(a)
    L, U = _split_np(lu_)
    P = _perm_np(piv, a.shape[-2]).astype(a.dtype)
    Lt, Ut = _lu_fn().apply(A, P, L, U)
    return _leaf(P), Lt, Ut, lu_, piv, info


def lu(A, *, pivot=True, out=None):
    """``torch.linalg.lu``: ``(P, L, U)`` with ``A = P L U``, L unit lower-trapezoidal
    (m x k), U upper-trapezoidal (k x n); differentiable to any order."""
    A = _check_lu_input(A, 'linalg.lu')
    _no_pivot(pivot)
    P, L, U = _plu(A)[:3]
    return _LU(P, L, U)


def _pack(L, U):
    from ._shapes import cat
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        return L.tril(-1) + U
    if m > n:
        return L.tril(-1) + cat([U, _ops.mul(L[..., k:, :], 0.0)], -2)
    return cat([L.tril(-1), _ops.mul(U[..., :, k:], 0.0)], -1) + U


def _lu_error(name, info, a):
    flat = info.reshape(-1)
    b = int(np.nonzero(flat)[0][0])
    i = int(flat[b])
    raise _L.LinAlgError(
        f'torch.{name}: {_batch_prefix(a, b)}U[{i},{i}] is zero and using it on lu_solve would '
        f'result in a division by zero. If you still want to perform the factorization, consider '
        f'calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)')


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``torch.linalg.lu_factor_ex``: ``(LU, pivots, info)`` (LAPACK's packed form,
    1-based int32 pivots, ``info`` > 0 where ``U`` has an exact zero on its diagonal)."""
    A = _check_lu_input(A, 'torch.lu_factor')
    _no_pivot(pivot)
    P, L, U, lu_, piv, info = _plu(A)
    if check_errors and info.any():
        _lu_error('linalg.lu_factor_ex', info, lu_)
    return _LU_FACTOR_EX(_pack(L, U), _leaf(piv), _leaf(info))


def lu_factor(A, *, pivot=True, out=None):
    """``torch.linalg.lu_factor``: ``(LU, pivots)``; raises for an exactly singular
    factor as PyTorch does."""
    A = _check_lu_input(A, 'torch.lu_factor')
    _no_pivot(pivot)
    P, L, U, lu_, piv, info = _plu(A)
    if info.any():
        _lu_error('linalg.lu_factor', info, lu_)
    return _LU_FACTOR(_pack(L, U), _leaf(piv))


def _unpack(LU, pivots):
    """``(P, L, U)`` from the packed form, L and U differentiable in ``LU``."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    dt = LU._data.dtype
    L = LU[..., :, :k].tril(-1) + _ops._const(np.eye(m, k, dtype=dt))
    U = LU[..., :k, :].triu()
    P = _perm_np(np.asarray(pivots._data), m).astype(dt)
    return _ops._const(P), L, U


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """``torch.linalg.lu_solve``: ``X`` with ``A X = B`` given ``lu_factor(A)``
    (``X A = B`` when not ``left``, ``A^H`` for ``adjoint``); differentiable in LU and B."""
    LU, B = _t(LU), _t(B)
    pivots = _t(pivots)
    if LU.dim() < 2 or LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f'linalg.lu_solve: A must be batches of square matrices, but they '
                           f'are {LU.shape[-2] if LU.dim() > 1 else 1} by {LU.shape[-1]} '
                           f'matrices')
    if B.dim() < 2:
        raise RuntimeError('linalg.lu_solve: The input tensor B must have at least 2 dimensions.')
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f'linalg.lu_solve: Incompatible shapes of A and B for the equation '
                           f'{"AX = B" if left else "XA = B"} ({n}x{n} and '
                           f'{B.shape[-2]}x{B.shape[-1]})')
    if pivots._data.dtype != np.int32:
        raise RuntimeError('linalg.lu_solve: pivots should be a Tensor of scalar type '
                           'torch.int32')
    _L._floating(LU, 'torch.linalg.lu_solve', 'linalg.lu_solve_cpu')
    P, L, U = _unpack(LU, pivots)
    if not left:
        # X A = B  <=>  A^H X^H = B^H
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    if not adjoint:          # A = P L U: X = U^-1 L^-1 P^T B
        Y = _strs(L, P.mT @ B, upper=False, unitriangular=True)
        return _strs(U, Y, upper=True)
    # A^T = U^T L^T P^T: X = P L^-T U^-T B
    Y = _strs(U.mT, B, upper=False)
    return P @ _strs(L.mT, Y, upper=True, unitriangular=True)


# -- the ``_ex`` variants ------------------------------------------------------------

def _info(A):
    return _lu_np(_arr(A))[2]


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``torch.linalg.solve_ex``: ``(result, info)``; a singular A gives ``info`` > 0
    (and inf/nan in its result) unless ``check_errors``."""
    A = _t(A)
    B = _t(B, A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        return _L.solve(A, B, left=left)            # the same error as solve
    _L._floating(A, 'linalg.solve', 'lu_cpu')
    info = _info(A)
    if not info.any():
        return _SOLVE_EX(_L.solve(A, B, left=left), _leaf(info))
    if check_errors:
        raise _L.LinAlgError('torch.linalg.solve_ex: The solver failed because the input matrix '
                             'is singular.')
    with np.errstate(all='ignore'):
        x = _solve_singular(_arr(A), _arr(B), left)
    return _SOLVE_EX(_leaf(x), _leaf(info))


def _solve_singular(a, b, left):
    """Solve through the (singular) LU factors as LAPACK does, giving infs and nans."""
    if not left:
        return np.swapaxes(_solve_singular(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2),
                                           True), -1, -2)
    vec = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vec:
        b = b[..., None]
    lu_, piv, _ = _lu_np(a)
    L, U = _split_np(lu_)
    P = _perm_np(piv, a.shape[-1]).astype(a.dtype)
    y = np.swapaxes(P, -1, -2) @ b
    y = np.broadcast_to(y, np.broadcast_shapes(y.shape[:-2], L.shape[:-2]) + y.shape[-2:]).copy()
    Lb = np.broadcast_to(L, y.shape[:-2] + L.shape[-2:])
    Ub = np.broadcast_to(U, y.shape[:-2] + U.shape[-2:])
    n = a.shape[-1]
    for i in range(n):
        y[..., i, :] -= np.einsum('...j,...jk->...k', Lb[..., i, :i], y[..., :i, :])
    for i in reversed(range(n)):
        y[..., i, :] = (y[..., i, :] - np.einsum('...j,...jk->...k', Ub[..., i, i + 1:],
                                                 y[..., i + 1:, :])) / Ub[..., i, i, None]
    return y[..., 0] if vec else y


def inv_ex(A, *, check_errors=False, out=None):
    """``torch.linalg.inv_ex``: ``(inverse, info)``."""
    A = _t(A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        return _L.inv(A)
    _L._floating(A, 'linalg.inv')
    info = _info(A)
    if not info.any():
        return _INV_EX(_L.inv(A), _leaf(info))
    if check_errors:
        flat = info.reshape(-1)
        b = int(np.nonzero(flat)[0][0])
        raise _L.LinAlgError(f'linalg.inv_ex: {_batch_prefix(_arr(A), b)}The diagonal element '
                             f'{int(flat[b])} is zero, the inversion could not be completed '
                             f'because the input matrix is singular.')
    a = _arr(A)
    with np.errstate(all='ignore'):
        x = _solve_singular(a, np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape), True)
    return _INV_EX(_leaf(np.ascontiguousarray(x)), _leaf(info))


def _chol_info(a):
    """LAPACK potrf's partial result and info for each matrix (0 where it succeeded)."""
    batch = a.shape[:-2]
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    out = np.zeros_like(flat)
    info = np.zeros((flat.shape[0],), np.int32)
    for b, m in enumerate(flat):
        L = np.tril(m).copy()
        for j in range(n):
            d = m[j, j] - L[j, :j] @ L[j, :j]
            if not d > 0:
                L[j, j] = d
                info[b] = j + 1
                break
            L[j, j] = np.sqrt(d)
            L[j + 1:, j] = (m[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
        out[b] = L
    return out.reshape(a.shape), info.reshape(batch)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``torch.linalg.cholesky_ex``: ``(L, info)``, info the order of the first leading
    minor that is not positive-definite (0 on success)."""
    A = _L._matrices(A, 'cholesky_ex')
    a = _arr(A)
    try:
        np.linalg.cholesky(a)
        ok = True
    except np.linalg.LinAlgError:
        ok = False
    if ok:
        return _CHOL_EX(_L.cholesky(A, upper=upper), _leaf(np.zeros(a.shape[:-2], np.int32)))
    src = np.swapaxes(a, -1, -2) if upper else a
    part, info = _chol_info(src)
    if check_errors:
        flat = info.reshape(-1)
        b = int(np.nonzero(flat)[0][0])
        raise _L.LinAlgError(
            f'linalg.cholesky_ex: {_batch_prefix(a, b)}The factorization could not be completed '
            f'because the input is not positive-definite (the leading minor of order '
            f'{int(flat[b])} is not positive-definite).')
    if upper:
        part = np.swapaxes(part, -1, -2)
    return _CHOL_EX(_leaf(np.ascontiguousarray(part)), _leaf(info))


# -- small compositions ---------------------------------------------------------------

def vecdot(x, y, *, dim=-1, out=None):
    """``torch.linalg.vecdot``: ``sum(x * y, dim)`` (real tensors), broadcasting."""
    x = _t(x)
    y = _t(y, x)
    return _ops.sum_(_ops.mul(x, y), dim, False)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``torch.diagonal`` with matrix-last defaults."""
    return _t(A).diagonal(offset, dim1, dim2)


def cond(A, p=None, *, out=None):
    """``torch.linalg.cond``: ``p`` None/2/-2 from the singular values (any shape);
    'fro', inf, -inf, 1, -1 as ``norm(A) * norm(inv(A))`` (square A; inf where A is
    singular), 'nuc' as ``sum(s) * sum(1/s)``.  Differentiable to any order (torch's
    own backward fails for the norm orders: it fills the inverse in place)."""
    from ._reductions import amax, amin
    A = _t(A)
    if A.dim() < 2:
        raise RuntimeError('linalg.cond: The input tensor must have at least 2 dimensions.')
    inf = float('inf')
    if p not in (None, 2, -2, 'fro', 'nuc', inf, -inf, 1, -1):
        raise RuntimeError(f'linalg.cond got an invalid norm type: {p}')
    if p in (None, 2, -2):
        s = _L.svdvals(A)
        if p == -2:
            return amin(s, -1) / amax(s, -1)
        return amax(s, -1) / amin(s, -1)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.cond(ord={p}): A must be batches of square matrices, but '
                           f'they are {A.shape[-2]} by {A.shape[-1]} matrices')
    a = _arr(A)
    if a.size == 0:
        return _leaf(np.zeros(a.shape[:-2], a.dtype))
    if p == 'nuc':          # as torch: sum(s) * sum(1 / s), finite for inf-free input
        s = _L.svdvals(A)
        return s.sum(-1) * s.reciprocal().sum(-1)
    info = _info(A)
    if not info.any():
        return _L.matrix_norm(A, p) * _L.matrix_norm(_L.inv(A), p)
    bad = (info > 0)[..., None, None]
    eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    Asafe = _where(_ops._const(np.ascontiguousarray(bad)), _ops._const(eye.copy()), A)
    r = _L.matrix_norm(A, p) * _L.matrix_norm(_L.inv(Asafe), p)
    return _where(_ops._const(info > 0), _ops._const(np.asarray(inf, a.dtype)), r)


def tensorinv(A, ind=2, *, out=None):
    """``torch.linalg.tensorinv``: the inverse of ``A`` seen as a map from its last
    ``ndim - ind`` dims to its first ``ind``."""
    A = _t(A)
    if not isinstance(ind, int) or ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    shape = tuple(A.shape)
    lo, hi = int(math.prod(shape[:ind])), int(math.prod(shape[ind:]))
    if lo != hi:
        raise RuntimeError(f'Expected self to satisfy the requirement prod(self.shape[ind:]) == '
                           f'prod(self.shape[:ind]), but got {hi} != {lo}')
    return _L.inv(A.reshape(lo, hi)).reshape(*(shape[ind:] + shape[:ind]))


def tensorsolve(A, B, dims=None, *, out=None):
    """``torch.linalg.tensorsolve``: ``X`` with ``tensordot(A, X, X.ndim) = B``."""
    A = _t(A)
    B = _t(B, A)
    if dims is not None:
        nd = A.dim()
        for d in dims:
            if not -nd <= d < nd:
                raise IndexError(f'Dimension out of range (expected to be in range of '
                                 f'[{-nd}, {nd - 1}], but got {d})')
        dims = [d % nd for d in dims]
        keep = [d for d in range(nd) if d not in dims]
        A = A.permute(*(keep + dims))
    shape = tuple(A.shape)
    nb = B.dim()
    rows, cols = B.numel(), int(math.prod(shape[nb:]))
    if rows != cols or int(math.prod(shape[:nb])) != rows:
        raise RuntimeError(f'Expected self to satisfy the requirement '
                           f'prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), '
                           f'but got {cols} != {rows}')
    x = _L.solve(A.reshape(rows, cols), B.reshape(rows))
    return x.reshape(*shape[nb:])


def vander(x, *, N=None):
    """``torch.linalg.vander``: ``[x^0, x^1, ..., x^(N-1)]`` along a new last dim
    (a cumulative product, differentiable everywhere)."""
    from ._shapes import cat
    x = _t(x)
    if x.dim() < 1:
        raise RuntimeError('N must be greater than 1.')
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError('N must be greater than 1.')
    ones = _ops._const(np.ones(tuple(x.shape) + (1,), x._data.dtype))
    rest = x.unsqueeze(-1).expand(*(tuple(x.shape) + (n - 1,)))
    return cat([ones, rest], -1).cumprod(-1)


def householder_product(A, tau, *, out=None):
    """``torch.linalg.householder_product``: the first n columns of ``H_1 ... H_k``,
    ``H_i = I - tau_i v_i v_i^T`` with ``v_i`` column i of A below the diagonal and 1
    on it (LAPACK's orgqr).  Applied to ``I[:, :n]`` right to left in matmuls, so it
    is differentiable (to any order) in A and tau."""
    name = 'torch.linalg.householder_product'
    A = _t(A)
    tau = _t(tau, A)
    if A.dim() < 2:
        raise RuntimeError(f'{name}: input must have at least 2 dimensions.')
    if tau.dim() == 0:
        raise IndexError('Dimension specified as -1 but tensor has no dimensions')
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f'{name}: input.shape[-2] must be greater than or equal to '
                           f'input.shape[-1]')
    if tau.dim() < 1 or n < tau.shape[-1]:
        raise RuntimeError(f'{name}: input.shape[-1] must be greater than or equal to '
                           f'tau.shape[-1]')
    if tau.dim() != A.dim() - 1:
        raise RuntimeError(f'{name}: Expected tau to have one dimension less than input, but '
                           f'got tau.ndim equal to {tau.dim()} and input.ndim is equal to '
                           f'{A.dim()}')
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f'{name}: Expected batch dimensions of tau to be equal to '
                           f'input.shape[:-2], but got {list(tau.shape[:-1])}')
    dt = _arr(A).dtype
    if tau._data.dtype != dt:
        raise RuntimeError(f'{name}: tau dtype {_type_name(tau)} does not match input dtype '
                           f'{_type_name(A)}')
    if dt.kind != 'f':
        raise NotImplementedError(f'"orgqr_cpu" not implemented for \'{_dtype_name(dt)}\'')
    eye = np.eye(m, n, dtype=dt)
    V = A.tril(-1) + _ops._const(eye)                 # the v_i as columns
    Q = _ops._const(np.ascontiguousarray(np.broadcast_to(eye, tuple(A.shape))))
    for i in reversed(range(tau.shape[-1])):
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q


def _type_name(t):
    """PyTorch's name of ``t``'s dtype (Float, Double, Long, ...)."""
    return {'float32': 'Float', 'float64': 'Double', 'float16': 'Half',
            'bfloat16': 'BFloat16'}.get(_arr(t).dtype.name, _dtype_name(_arr(t).dtype))
