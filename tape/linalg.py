"""``tape.linalg``: norms (``torch.linalg`` names and arguments).

>>> import tape
>>> tape.linalg.norm(tape.tensor([3.0, 4.0]))
tensor(5.)
"""
from . import _ops
from ._linalg import matmul  # noqa: F401  (tape.linalg.matmul, as in torch.linalg)
from ._reductions import amax, amin, vector_norm
from ._tensor import Tensor

__all__ = ['norm', 'vector_norm', 'matrix_norm', 'matmul']


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
