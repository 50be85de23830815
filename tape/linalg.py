"""``tape.linalg``: norms, ``solve``, ``inv``, ``det``, ``slogdet`` (``torch.linalg`` names and
arguments; the solvers are custom Functions over NumPy, differentiable to any order).

>>> import tape
>>> tape.linalg.norm(tape.tensor([3.0, 4.0]))
tensor(5.)
"""
from . import _ops
from ._linalg import matmul  # noqa: F401  (tape.linalg.matmul, as in torch.linalg)
from ._reductions import amax, amin, vector_norm
from ._tensor import Tensor, _leaf

__all__ = ['norm', 'vector_norm', 'matrix_norm', 'matmul', 'solve', 'inv', 'det', 'slogdet']


def matrix_norm(a, ord='fro', dim=(-2, -1), keepdim=False, dtype=None):  # noqa: A002
    """Frobenius (default), 1, -1, inf and -inf matrix norms over the two dims ``dim``."""
    a = a if isinstance(a, Tensor) else _ops._const(a)
    if a.dim() < 2:
        raise RuntimeError(f'linalg.matrix_norm: The input tensor A must have at least 2 '
                           f'dimensions (got shape {tuple(a.shape)})')
    if dtype is not None:
        a = _ops.to(a, dtype)
    r, c = (d % a.dim() for d in dim)
    if ord == 'fro':
        return vector_norm(a, 2, (r, c), keepdim)
    if ord in ('nuc', 2, -2):
        raise NotImplementedError(f'linalg.matrix_norm: ord={ord!r} needs singular values, '
                                  'which are not supported')
    if ord in (1, -1):            # max/min over columns of the column sums
        inner, outer = r, c
    elif ord in (float('inf'), float('-inf')):
        inner, outer = c, r
    else:
        raise RuntimeError(f'linalg.matrix_norm: Order {ord} not supported.')
    s = _ops.sum_(_ops.abs_(a), inner, True)
    pick = amax if ord in (1, float('inf')) else amin
    s = pick(s, outer, True)
    if not keepdim:
        shape = tuple(n for i, n in enumerate(a.shape) if i not in (r, c))
        s = _ops.reshape(s, shape)
    return s


def norm(a, ord=None, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """``torch.linalg.norm``: a vector norm for 1-D input or one ``dim``, a matrix
    norm for 2-D input or two dims; with neither ord nor dim, the 2-norm of all."""
    a = a if isinstance(a, Tensor) else _ops._const(a)
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(a, 'fro', dim, keepdim, dtype)
        return vector_norm(a, 2, dim, keepdim, dtype)
    if dim is None:
        dim = tuple(range(a.dim()))
        if len(dim) not in (1, 2):
            raise RuntimeError(f'linalg.norm: If dim is not specified but ord is, the input '
                               f'must be 1D or 2D. Got {a.dim()}D.')
    if len(dim) == 2:
        return matrix_norm(a, ord, dim, keepdim, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f'linalg.norm: Order {ord} not supported for a vector norm.')
    return vector_norm(a, ord, dim, keepdim, dtype)


# -- linear systems -----------------------------------------------------------------

def _sum_to(g, shape):
    """``g`` summed over the leading (broadcast) dims and the dims of size 1 of ``shape``."""
    lead = g.dim() - len(shape)
    if lead:
        g = g.sum(tuple(range(lead)))
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(dims, keepdim=True) if dims else g


def _solve_np(a, b):
    import numpy as np
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise RuntimeError('torch.linalg.solve: The solver failed because the input matrix is '
                           'singular.') from None


def _solve_fn():
    from .autograd import Function

    class LinalgSolveEx(Function):
        """``X = A^-1 B`` (B matrices); ``gB = A^-T gX``, ``gA = -gB X^T``, in tape ops."""
        @staticmethod
        def forward(ctx, A, B):
            import numpy as np
            x = _solve_np(np.asarray(A._data), np.asarray(B._data))
            out = _leaf(np.asarray(x, dtype=np.asarray(A._data).dtype))
            ctx.save_for_backward(A, out)
            ctx.shapes = (tuple(A.shape), tuple(B.shape))
            return out

        @staticmethod
        def backward(ctx, gx):
            A, X = ctx.saved_tensors
            sa, sb = ctx.shapes
            gb = LinalgSolveEx.apply(A.mT, gx)
            ga = -(gb @ X.mT) if ctx.needs_input_grad[0] else None
            return (None if ga is None else _sum_to(ga, sa)), _sum_to(gb, sb)
    return LinalgSolveEx


_SOLVE = []


def solve(A, B, *, left=True, out=None):
    """``torch.linalg.solve``: ``X`` with ``A @ X = B`` (``X @ A = B`` for ``left=False``);
    ``B`` is a batch of vectors when it has one dim fewer than ``A`` and matches its
    leading shape.  Differentiable to any order; a singular ``A`` raises RuntimeError."""
    A = A if isinstance(A, Tensor) else _ops._const(A)
    B = B if isinstance(B, Tensor) else _ops._const(B, A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.solve: A must be batches of square matrices, but they are '
                           f'{A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} matrices')
    if A.dtype != B.dtype:
        raise RuntimeError(f'linalg.solve: Expected A and B to have the same dtype, but found '
                           f'A of type {A.dtype} and B of type {B.dtype} instead')
    if not _SOLVE:
        _SOLVE.append(_solve_fn())
    if not left:
        return solve(A.mT, B.mT).mT
    vec = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vec:
        B = B.unsqueeze(-1)
    if B.dim() < 2 or B.shape[-2] != A.shape[-1]:
        raise RuntimeError(f'linalg.solve: Incompatible shapes of A and B for the equations '
                           f'AX = B ({A.shape[-2]}x{A.shape[-1]} and '
                           f'{B.shape[-2] if B.dim() > 1 else 1}x{B.shape[-1]})')
    if vec:
        return _SOLVE[0].apply(A, B).squeeze(-1)
    return _SOLVE[0].apply(A, B)


def inv(A, *, out=None):
    """``torch.linalg.inv``: ``solve(A, I)``, differentiable to any order."""
    import numpy as np
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.inv: A must be batches of square matrices, but they are '
                           f'{A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} matrices')
    eye = _ops._const(np.eye(A.shape[-1], dtype=np.asarray(A._data).dtype))
    return solve(A, eye)


def _det_fns():
    import numpy as np
    from .autograd import Function

    class LinalgDet(Function):
        """``det(A)``; ``gA = g det(A) A^-T``, in tape ops (differentiable again)."""
        @staticmethod
        def forward(ctx, A):
            ctx.save_for_backward(A)
            return _leaf(np.asarray(np.linalg.det(np.asarray(A._data))))

        @staticmethod
        def backward(ctx, g):
            A, = ctx.saved_tensors
            return (g * LinalgDet.apply(A)).unsqueeze(-1).unsqueeze(-1) * inv(A).mT

    class LinalgLogAbsDet(Function):
        """``log|det(A)|``; ``gA = g A^-T``."""
        @staticmethod
        def forward(ctx, A):
            ctx.save_for_backward(A)
            return _leaf(np.asarray(np.linalg.slogdet(np.asarray(A._data))[1]))

        @staticmethod
        def backward(ctx, g):
            A, = ctx.saved_tensors
            return g.unsqueeze(-1).unsqueeze(-1) * inv(A).mT
    return LinalgDet, LinalgLogAbsDet


_DET = []


def _square(A, name):
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.{name}: A must be batches of square matrices, but they are '
                           f'{A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} matrices')
    if not _DET:
        _DET.extend(_det_fns())
    return A


def det(A, *, out=None):
    """``torch.linalg.det``, differentiable to any order (through ``inv``: an exactly
    singular ``A`` has no gradient here)."""
    A = _square(A, 'det')
    return _DET[0].apply(A)


def slogdet(A, *, out=None):
    """``torch.linalg.slogdet``: ``(sign, log|det A|)``; the sign is a constant."""
    import numpy as np
    A = _square(A, 'slogdet')
    sign = np.linalg.slogdet(np.asarray(A._data))[0]
    return _leaf(np.asarray(sign)), _DET[1].apply(A)


def logdet(A):
    """``torch.logdet``: ``log det A`` (nan for a negative determinant)."""
    import numpy as np
    sign, lad = slogdet(A)
    with np.errstate(divide='ignore', invalid='ignore'):
        return _ops.add(lad, _leaf(np.log(np.asarray(sign._data))))
