"""``tape.linalg``: norms, ``solve``, ``inv``, ``det``, ``slogdet`` (``torch.linalg`` names and
arguments; the solvers are custom Functions over NumPy, differentiable to any order).

>>> import tape
>>> tape.linalg.norm(tape.tensor([3.0, 4.0]))
tensor(5.)
"""
from ._composite_nodes import node_named
from . import _ops
from ._linalg import matmul  # noqa: F401  (tape.linalg.matmul, as in torch.linalg)
from ._reductions import amax, amin, vector_norm
from ._tensor import Tensor, _leaf

__all__ = ['norm', 'vector_norm', 'matrix_norm', 'matmul', 'solve', 'inv', 'det', 'slogdet',
           'cholesky', 'eigh', 'eigvalsh', 'qr', 'svd', 'svdvals', 'lstsq', 'matrix_power',
           'LinAlgError', 'pinv', 'matrix_exp', 'solve_triangular', 'matrix_rank']


def matrix_norm(a, ord='fro', dim=(-2, -1), keepdim=False, dtype=None):  # noqa: A002
    """Frobenius (default), 1, -1, inf and -inf matrix norms over the two dims ``dim``."""
    a = a if isinstance(a, Tensor) else _ops._const(a)
    if a.dim() < 2:
        raise RuntimeError(f'linalg.matrix_norm: The input tensor A must have at least 2 '
                           f'dimensions (got shape {tuple(a.shape)})')
    if dtype is not None:
        a = _ops.to(a, dtype)
    dim = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if len(dim) != 2:
        raise RuntimeError('linalg.matrix_norm: dim must be a 2-tuple. Got '
                           + ' '.join(str(d) for d in dim))
    n = a.dim()
    for d in dim:
        if not -n <= d < n:
            raise IndexError(f'Dimension out of range (expected to be in range of [{-n}, '
                             f'{n - 1}], but got {d})')
    r, c = (d % n for d in dim)
    if r == c:
        raise RuntimeError(f'linalg.matrix_norm: dims must be different. Got ({r}, {c})')
    if ord == 'fro':
        return vector_norm(a, 2, (r, c), keepdim)
    if ord in ('nuc', 2, -2):
        perm = [i for i in range(a.dim()) if i not in (r, c)] + [r, c]
        s = svdvals(a.permute(*perm))
        s = s.sum(-1) if ord == 'nuc' else (_amax0(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            s = s.unsqueeze(min(r, c)).unsqueeze(max(r, c))
        return s
    if ord in (1, -1):            # max/min over columns of the column sums
        inner, outer = r, c
    elif ord in (float('inf'), float('-inf')):
        inner, outer = c, r
    else:
        raise RuntimeError(f'linalg.matrix_norm: Order {ord} not supported.')
    s = _ops.sum_(_ops.abs_(a), inner, True)
    pick = _amax0 if ord in (1, float('inf')) else amin
    s = pick(s, outer, True)
    if not keepdim:
        shape = tuple(n for i, n in enumerate(a.shape) if i not in (r, c))
        s = _ops.reshape(s, shape)
    return s


def _amax0(s, dim, keepdim=False):
    """amax, but 0 over an empty dim (an empty matrix's 2, 1 and inf norms are 0 in
    PyTorch; its min-norms raise amin's IndexError)."""
    if s.shape[dim] == 0:
        return _ops.sum_(s, dim, keepdim)
    return amax(s, dim, keepdim)


def norm(a, ord=None, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """``torch.linalg.norm``: a vector norm for 1-D input or one ``dim``, a matrix
    norm for 2-D input or two dims; with neither ord nor dim, the 2-norm of all."""
    a = a if isinstance(a, Tensor) else _ops._const(a)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f'linalg.norm: If dim is specified, it must be of length 1 or 2. '
                           f'Got {list(dim)}')
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(a, 'fro', dim, keepdim, dtype)
        return vector_norm(a, 2, dim, keepdim, dtype)
    if dim is None:
        dim = tuple(range(a.dim()))
        if len(dim) not in (1, 2):
            raise RuntimeError(f'linalg.norm: If dim is not specified but ord is, the input '
                               f'must be 1D or 2D. Got {a.dim()}D.')
    if len(dim) == 2 or isinstance(ord, str):       # (a str ord: matrix_norm's error)
        return matrix_norm(a, ord, dim, keepdim, dtype)
    return vector_norm(a, ord, dim, keepdim, dtype)


# -- linear systems -----------------------------------------------------------------

def _sum_to(g, shape):
    """``g`` summed over the leading (broadcast) dims and the dims of size 1 of ``shape``."""
    lead = g.dim() - len(shape)
    if lead:
        g = g.sum(tuple(range(lead)))
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(dims, keepdim=True) if dims else g


def _floating(A, name, half_kernel=None):
    """PyTorch's refusal of an integer or bool ``A`` (NumPy would solve it in float64
    and the result be cast back to A's integer dtype: truncated), and of float16
    (NumPy's TypeError): a RuntimeError, or the NotImplementedError of the kernel
    ``half_kernel`` where PyTorch's op reaches one."""
    dt = A._data.dtype
    if dt.kind != 'f':
        from ._linalg_more import _dtype_name
        raise RuntimeError(f'{name}: Expected a floating point or complex tensor as input. '
                           f'Got {_dtype_name(dt)}')
    if dt == 'float16':
        if half_kernel is not None:
            raise NotImplementedError(f'"{half_kernel}" not implemented for \'Half\'')
        raise RuntimeError(f'{name}: Low precision dtypes not supported. Got Half')


def _solve_np(a, b):
    import numpy as np
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise LinAlgError('torch.linalg.solve: The solver failed because the input matrix is '
                          'singular.') from None


def _torch_named(cls, node):
    """Name ``cls``'s node (``grad_fn.name()``) as PyTorch names the op's."""
    from .autograd.function import _register_node_class
    cls._backward_name = node
    _register_node_class(node)
    return cls


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
    return _torch_named(LinalgSolveEx, 'LinalgSolveExBackward0')


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
    _floating(A, 'linalg.solve', 'lu_cpu')
    if A.dtype != B.dtype:
        raise RuntimeError(f'linalg.solve: Expected A and B to have the same dtype, but found '
                           f'A of type {A.dtype} and B of type {B.dtype} instead')
    if not _SOLVE:
        _SOLVE.append(_solve_fn())
    vec = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if not left:
        if vec:             # PyTorch has no vector right-hand side for XA = B
            n = A.shape[-1]
            raise RuntimeError(f'linalg.solve: Incompatible shapes of A and B for the equation '
                               f'XA = B ({n}x{n} and {B.shape[-1]}x1)')
        return solve(A.mT, B.mT).mT
    if vec:
        B = B.unsqueeze(-1)
    if B.dim() < 2 or B.shape[-2] != A.shape[-1]:
        raise RuntimeError(f'linalg.solve: Incompatible shapes of A and B for the equation '
                           f'AX = B ({A.shape[-2]}x{A.shape[-1]} and '
                           f'{B.shape[-2] if B.dim() > 1 else 1}x{B.shape[-1]})')
    if vec:
        return _SOLVE[0].apply(A, B).squeeze(-1)
    return _SOLVE[0].apply(A, B)


def _matrix_rhs(B, A):
    """``B`` with leading 1s up to ``A``'s dims, so that ``solve`` reads it as a batch
    of matrices (as inv, solve_triangular and cholesky_solve do), never as a batch of
    vectors: B of shape (n, k) beside A of shape (n, n, n) matches A.shape[:-1]."""
    if B.dim() < A.dim():
        return B.reshape(*((1,) * (A.dim() - B.dim()) + tuple(B.shape)))
    return B


@node_named('LinalgInvExBackward0', 'A')
def inv(A, *, out=None):
    """``torch.linalg.inv``: ``solve(A, I)``, differentiable to any order."""
    import numpy as np
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.inv: A must be batches of square matrices, but they are '
                           f'{A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} matrices')
    _floating(A, 'linalg.inv')
    eye = _ops._const(np.eye(A.shape[-1], dtype=np.asarray(A._data).dtype))
    try:
        return solve(A, _matrix_rhs(eye, A))
    except LinAlgError:
        raise LinAlgError('linalg.inv: The inversion could not be completed because the input '
                          'matrix is singular.') from None


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
            try:
                inv_t = inv(A).mT
            except LinAlgError:
                # the cofactor matrix (det A times A^-T where that exists), from
                # the SVD: a constant under create_graph
                return g.unsqueeze(-1).unsqueeze(-1) * _leaf(_cofactors(np.asarray(A._data)))
            return (g * LinalgDet.apply(A)).unsqueeze(-1).unsqueeze(-1) * inv_t

    class LinalgLogAbsDet(Function):
        """``log|det(A)|``; ``gA = g A^-T`` (cofactors / det: infinite for a singular A)."""
        @staticmethod
        def forward(ctx, A):
            ctx.save_for_backward(A)
            return _leaf(np.asarray(np.linalg.slogdet(np.asarray(A._data))[1]))

        @staticmethod
        def backward(ctx, g):
            A, = ctx.saved_tensors
            try:
                inv_t = inv(A).mT
            except LinAlgError:
                a = np.asarray(A._data)
                with np.errstate(divide='ignore', invalid='ignore'):
                    inv_t = _leaf(_cofactors(a) / np.linalg.det(a)[..., None, None])
            return g.unsqueeze(-1).unsqueeze(-1) * inv_t
    return (_torch_named(LinalgDet, 'LinalgDetBackward0'),
            _torch_named(LinalgLogAbsDet, 'LinalgSlogdetBackward0'))


def _cofactors(a):
    """The cofactor matrices of the (batch of) square ``a``: the gradient of det,
    defined for singular matrices too (rank n-1: nonzero; lower: zero).  From
    the SVD a = U diag(s) Vh: det(U) det(Vh) U diag(prod of the other s) Vh."""
    import numpy as np
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    ones = np.ones(s.shape[:-1] + (1,), s.dtype)
    # products of the singular values left and right of each (no division by zero)
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)
    right = np.cumprod(np.concatenate([ones, s[..., :0:-1]], -1), -1)[..., ::-1]
    others = left * right if n else s
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return (sign[..., None, None] * (u * others[..., None, :])) @ vh


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
    _floating(A, 'linalg.det', 'lu_cpu')
    return _DET[0].apply(A)


def slogdet(A, *, out=None):
    """``torch.linalg.slogdet``: ``(sign, log|det A|)``; the sign is a constant."""
    import numpy as np
    A = _square(A, 'slogdet')
    _floating(A, 'linalg.slogdet')
    sign = np.asarray(np.linalg.slogdet(np.asarray(A._data))[0])
    if A._rg and _grad_enabled():
        # PyTorch's sign requires grad too; a real sign is piecewise constant, so
        # its node passes no gradient on
        sign = _sign_fn().apply(A, sign)
    else:
        sign = _leaf(sign)
    return _SLOGDET(sign, _DET[1].apply(A))


_SIGN = []


def _grad_enabled():
    from ._tape import grad_mode
    return grad_mode.enabled


def _sign_fn():
    if not _SIGN:
        from .autograd import Function

        class LinalgSlogdetSign(Function):
            @staticmethod
            def forward(ctx, A, sign):
                return _leaf(sign)

            @staticmethod
            def backward(ctx, grad):
                return None, None
        LinalgSlogdetSign._backward_name = 'LinalgSlogdetBackward0'
        _SIGN.append(LinalgSlogdetSign)
    return _SIGN[0]


def logdet(A):
    """``torch.logdet``: ``log det A`` (nan for a negative determinant)."""
    import numpy as np
    from ._elementwise import where
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'logdet: A must be batches of square matrices, but they are '
                           f'{A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} matrices')
    _floating(A, 'logdet')
    sign, lad = slogdet(A)
    neg = np.asarray(sign._data) < 0
    if not neg.any():
        return lad
    # PyTorch's where(sign == -1, nan, logabsdet): NaN with no gradient to A there
    return where(neg, np.asarray(np.nan, lad._data.dtype), lad)


# -- decompositions -----------------------------------------------------------------
# Each is a custom Function over NumPy whose backward is written in tape ops (PyTorch's
# formulas from FunctionsManual.cpp), so it is differentiable to any order.

_FNS = {}


def _fns():
    if _FNS:
        return _FNS
    import numpy as np
    from .autograd import Function
    from ._composites import diag_embed

    def arr(t):
        return np.asarray(t._data)

    def eye_like(t):
        return _ops._const(np.eye(t.shape[-1], dtype=arr(t).dtype))

    class LinalgCholesky(Function):
        """``L`` lower; ``gA = L^-T Phi(L^T gL) L^-1`` symmetrized (``cholesky_backward``)."""
        @staticmethod
        def forward(ctx, A):
            out = _leaf(np.ascontiguousarray(_cholesky_np(arr(A))))
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, gL):
            L, = ctx.saved_tensors
            gA = (L.mT @ gL).tril()
            gA = 0.5 * (gA + gA.tril(-1).mT)
            gA = solve(L.mT, gA)                    # L^-T gA
            return solve(L, gA, left=False)         # ... L^-1

    class LinalgEigh(Function):
        """``A = V diag(w) V^T``; ``gA = V (diag(gw) + skew(V^T gV) / E) V^T``."""
        @staticmethod
        def forward(ctx, A, uplo):
            ctx.set_materialize_grads(False)
            w, v = np.linalg.eigh(arr(A), UPLO=uplo)
            w, v = _leaf(w), _leaf(v)
            ctx.save_for_backward(w, v)
            return w, v

        @staticmethod
        def backward(ctx, gw, gv):
            w, V = ctx.saved_tensors
            if gv is not None:
                X = V.mT @ gv
                E = w.unsqueeze(-2) - w.unsqueeze(-1) + eye_like(V)
                mid = 0.5 * (X - X.mT) / E
                if gw is not None:
                    mid = mid + diag_embed(gw)
            elif gw is not None:
                mid = diag_embed(gw)
            else:
                return None, None
            return V @ mid @ V.mT, None

    class LinalgQR(Function):
        """``A = QR``; ``gA = (gQ + Q syminvadj(triu(gR R^T - Q^T gQ))) R^-T`` for m >= n,
        and that for the first m columns of a wide A (see backward)."""
        @staticmethod
        def forward(ctx, A, mode):
            ctx.set_materialize_grads(False)
            ctx.mode = mode
            if mode == 'r':
                return _leaf(np.ascontiguousarray(np.linalg.qr(arr(A), mode='r')))
            q, r = np.linalg.qr(arr(A), mode=mode)
            q, r = _leaf(np.ascontiguousarray(q)), _leaf(np.ascontiguousarray(r))
            ctx.save_for_backward(q, r)
            return q, r

        @staticmethod
        def backward(ctx, gQ, gR=None):
            if ctx.mode == 'r':
                raise RuntimeError("The derivative of linalg.qr depends on Q, which is not "
                                   "computed when mode='r'. Please use linalg.qr(A, "
                                   "mode='reduced') if you are going to differentiate through "
                                   "linalg.qr.")
            Q, R = ctx.saved_tensors
            m, n = Q.shape[-2], R.shape[-1]
            if ctx.mode == 'complete' and m > n:
                raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                                   "and nrows > ncols.")
            if gQ is None and gR is None:
                return None, None
            if m < n:
                # A = [X | Y] with X = Q U square and Y = Q V (R = [U | V]): V = Q^T Y
                # adds Y gV^T to Q's gradient, and Y's gradient is Q gV
                U, V = R[..., :m], R[..., m:]
                gU = gV = None
                if gR is not None:
                    gU, gV = gR[..., :m], gR[..., m:]
                    gQ = Q @ V @ gV.mT if gQ is None else gQ + Q @ V @ gV.mT
                gX = LinalgQR._tall_backward(Q, U, gQ, gU)
                gY = Q @ gV if gV is not None else _ops.mul(V, 0.0)
                from ._shapes import cat
                return cat([gX, gY], -1), None
            return LinalgQR._tall_backward(Q, R, gQ, gR), None

        @staticmethod
        def _tall_backward(Q, R, gQ, gR):
            if gQ is None:
                X = gR @ R.mT
            elif gR is None:
                X = -(Q.mT @ gQ)
            else:
                X = gR @ R.mT - Q.mT @ gQ
            X = X.triu()
            X = X + X.mT - diag_embed(X.diagonal(0, -2, -1))
            gA = Q @ X
            if gQ is not None:
                gA = gA + gQ
            return solve(R.mT, gA, left=False)

    class LinalgSVD(Function):
        """``A = U diag(S) Vh`` (``svd_backward``)."""
        @staticmethod
        def forward(ctx, A, full):
            ctx.set_materialize_grads(False)
            u, s, vh = np.linalg.svd(arr(A), full_matrices=full)
            u, s, vh = (_leaf(np.ascontiguousarray(x)) for x in (u, s, vh))
            ctx.save_for_backward(u, s, vh)
            return u, s, vh

        @staticmethod
        def backward(ctx, gU, gS, gVh):
            U, S, Vh = ctx.saved_tensors
            m, n = U.shape[-2], Vh.shape[-1]
            k = S.shape[-1]
            if U.shape[-1] != k:
                U = U[..., :k]
                gU = None if gU is None else gU[..., :k]
            if Vh.shape[-2] != k:
                Vh = Vh[..., :k, :]
                gVh = None if gVh is None else gVh[..., :k, :]
            if gU is None and gVh is None:
                if gS is None:
                    return None, None
                if m >= n:
                    return U @ (gS.unsqueeze(-1) * Vh), None
                return (U * gS.unsqueeze(-2)) @ Vh, None
            S2 = S * S
            E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_like(S.unsqueeze(-1).expand(
                *S.shape, k))
            gA = None
            if gU is not None:
                UhgU = U.mT @ gU
                gA = (UhgU - UhgU.mT) * S.unsqueeze(-2)
            if gVh is not None:
                VhgV = Vh @ gVh.mT
                t = S.unsqueeze(-1) * (VhgV - VhgV.mT)
                gA = t if gA is None else gA + t
            gA = gA / E
            if gS is not None:
                gA = gA + diag_embed(gS)
            if m > n and gU is not None:
                gA = U @ gA
                gUSinv = gU / S.unsqueeze(-2)
                gA = gA + gUSinv - U @ (U.mT @ gUSinv)
                gA = gA @ Vh
            elif m < n and gVh is not None:
                gA = gA @ Vh
                SinvgVh = gVh / S.unsqueeze(-1)
                gA = gA + SinvgVh - (SinvgVh @ Vh.mT) @ Vh
                gA = U @ gA
            else:
                gA = U @ (gA @ Vh)
            return gA, None

    class LinalgSvdvals(Function):
        """Singular values; ``gA = U diag(gS) Vh`` with U, Vh differentiable."""
        @staticmethod
        def forward(ctx, A):
            u, s, vh = np.linalg.svd(arr(A), full_matrices=False)
            ctx.save_for_backward(A)
            return _leaf(np.ascontiguousarray(s))

        @staticmethod
        def backward(ctx, gS):
            A, = ctx.saved_tensors
            U, S, Vh = LinalgSVD.apply(A, False)
            return (U * gS.unsqueeze(-2)) @ Vh

    class LinalgLstsq(Function):
        """``X = argmin |AX - B|`` (the minimum-norm one).  The gradient is PyTorch's:
        that of ``X = pinv(A) B``, so it holds for wide and rank-deficient ``A`` too
        (the normal equations ``(A^T A)^-1`` are singular there)."""
        @staticmethod
        def forward(ctx, A, B, rcond):
            a, b = arr(A), arr(B)
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            nb = int(np.prod(batch))          # (not -1: ambiguous for empty matrices)
            a2 = np.broadcast_to(a, batch + a.shape[-2:]).reshape((nb,) + a.shape[-2:])
            b2 = np.broadcast_to(b, batch + b.shape[-2:]).reshape((nb,) + b.shape[-2:])
            xs = [np.linalg.lstsq(ai, bi, rcond=rcond)[0] for ai, bi in zip(a2, b2)]
            x = np.stack(xs).reshape(batch + (a.shape[-1], b.shape[-1])) if xs else \
                np.zeros(batch + (a.shape[-1], b.shape[-1]), a.dtype)
            out = _leaf(np.ascontiguousarray(x, dtype=a.dtype))
            ctx.save_for_backward(A, B)
            return out

        @staticmethod
        def backward(ctx, gX, *_):
            A, B = ctx.saved_tensors
            P = _pinv_fn().apply(A, None, None, False)
            gA = gB = None
            if ctx.needs_input_grad[0]:
                gA = _sum_to(_pinv_backward(gX @ B.mT, A, P), tuple(A.shape))
            if ctx.needs_input_grad[1]:
                gB = _sum_to(P.mT @ gX, tuple(B.shape))
            return gA, gB, None

    for cls, node in ((LinalgCholesky, 'LinalgCholeskyExBackward0'),
                      (LinalgEigh, 'LinalgEighBackward0'), (LinalgQR, 'LinalgQrBackward0'),
                      (LinalgSVD, 'LinalgSvdBackward0'), (LinalgSvdvals, 'LinalgSvdBackward0'),
                      (LinalgLstsq, 'LinalgLstsqBackward0')):
        _torch_named(cls, node)
    _FNS.update(cholesky=LinalgCholesky, eigh=LinalgEigh, qr=LinalgQR, svd=LinalgSVD,
                svdvals=LinalgSvdvals, lstsq=LinalgLstsq)
    return _FNS


def _cholesky_np(a):
    import numpy as np
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        pass
    flat = a.reshape((-1,) + a.shape[-2:])
    for b, m in enumerate(flat):
        for k in range(1, m.shape[-1] + 1):
            try:
                np.linalg.cholesky(m[:k, :k])
            except np.linalg.LinAlgError:
                where = f'(Batch element {b}): ' if a.ndim > 2 else ''
                raise LinAlgError(
                    f'linalg.cholesky: {where}The factorization could not be completed because '
                    f'the input is not positive-definite (the leading minor of order {k} is not '
                    'positive-definite).') from None
    raise LinAlgError('linalg.cholesky: The factorization could not be completed because '
                      'the input is not positive-definite.')


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a decomposition failed (a ``RuntimeError``)."""


def _matrices(A, name, square=True):
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2:
        raise RuntimeError(f'linalg.{name}: The input tensor A must have at least 2 dimensions.')
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.{name}: A must be batches of square matrices, but they are '
                           f'{A.shape[-2]} by {A.shape[-1]} matrices')
    if A._data.dtype.kind != 'f':
        raise RuntimeError(f'linalg.{name}: Expected a floating point or complex tensor as '
                           f'input. Got {A.dtype}')
    return A


def cholesky(A, *, upper=False, out=None):
    """``torch.linalg.cholesky``: ``L`` with ``A = L L^T`` (``U = L^T`` for ``upper``);
    reads only the lower (upper) triangle.  A matrix that is not positive-definite
    raises RuntimeError as torch does."""
    A = _matrices(A, 'cholesky')
    if upper:
        return cholesky(A.mT).mT
    return _fns()['cholesky'].apply(A)


def _named_tuple(name, fields):
    from .return_types import make
    return make(name, fields)


_EIGH = _named_tuple('linalg_eigh', ['eigenvalues', 'eigenvectors'])
_QR = _named_tuple('linalg_qr', ['Q', 'R'])
_SVD = _named_tuple('linalg_svd', ['U', 'S', 'Vh'])
_SLOGDET = _named_tuple('linalg_slogdet', ['sign', 'logabsdet'])
_LSTSQ = _named_tuple('linalg_lstsq', ['solution', 'residuals', 'rank', 'singular_values'])


def eigh(A, UPLO='L', *, out=None):
    """``torch.linalg.eigh``: ``(eigenvalues, eigenvectors)`` of a symmetric matrix,
    ascending; reads only the ``UPLO`` triangle.  Eigenvectors are defined up to sign:
    differentiate only losses invariant to it."""
    A = _matrices(A, 'eigh')
    if not isinstance(UPLO, str) or UPLO.upper() not in ('L', 'U'):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _EIGH(*_fns()['eigh'].apply(A, UPLO.upper()))      # (either case, as PyTorch)


def eigvalsh(A, UPLO='L', *, out=None):
    """``torch.linalg.eigvalsh``: the eigenvalues of ``eigh``."""
    return eigh(A, UPLO).eigenvalues


def qr(A, mode='reduced', *, out=None):
    """``torch.linalg.qr``: ``(Q, R)``; ``mode`` 'reduced', 'complete' or 'r' (Q empty).
    Differentiable except with 'r', and with 'complete' for ``nrows > ncols``."""
    import numpy as np
    A = _matrices(A, 'qr', square=False)
    if mode not in ('reduced', 'complete', 'r'):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    if mode == 'r':
        return _QR(_leaf(np.zeros((0,), A._data.dtype)), _fns()['qr'].apply(A, 'r'))
    return _QR(*_fns()['qr'].apply(A, mode))


def _no_driver(driver):
    if driver is not None:
        raise RuntimeError('torch.linalg.svd: keyword argument `driver=` is only supported on '
                           'CUDA inputs with cuSOLVER backend.')


def svd(A, full_matrices=True, *, driver=None, out=None):
    """``torch.linalg.svd``: ``(U, S, Vh)``, ``S`` descending.  U and Vh are defined up
    to sign: differentiate only losses invariant to it."""
    A = _matrices(A, 'svd', square=False)
    _no_driver(driver)
    return _SVD(*_fns()['svd'].apply(A, bool(full_matrices)))


def svdvals(A, *, driver=None, out=None):
    """``torch.linalg.svdvals``: the singular values, descending."""
    A = _matrices(A, 'svdvals', square=False)
    _no_driver(driver)
    return _fns()['svdvals'].apply(A)


def lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq``: ``(solution, residuals, rank, singular_values)`` with
    PyTorch's per-driver outputs: ``rank`` except for 'gels', ``singular_values``
    for 'gelsd' and 'gelss', ``residuals`` (the squared residual norm per column)
    for a tall A of full rank except with 'gelsy', the CPU default.  The solution
    and residuals are differentiable (as ``pinv(A) @ B``, PyTorch's gradient).

    >>> import tape
    >>> A = tape.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> tape.linalg.lstsq(A, tape.tensor([[1.0], [2.0], [3.0]]), driver='gelsd').residuals
    tensor([9.])
    """
    import numpy as np
    A = _matrices(A, 'lstsq', square=False)
    B = B if isinstance(B, Tensor) else _ops._const(B, A)
    if driver is None:
        driver = 'gelsy'
    if driver not in ('gels', 'gelsy', 'gelsd', 'gelss'):
        raise RuntimeError('torch.linalg.lstsq: parameter `driver` should be one of '
                           '(gels, gelsy, gelsd, gelss)')
    if A.dtype != B.dtype:
        raise RuntimeError(f'torch.linalg.lstsq: Expected input and other to have the same '
                           f'dtype, but got input with dtype {A.dtype} and other with dtype '
                           f'{B.dtype}')
    vec = B.dim() == A.dim() - 1
    if not (B.dim() == A.dim() or vec) or B.dim() < 1:
        raise RuntimeError('torch.linalg.lstsq: input.dim() must be greater or equal to '
                           'other.dim() and (input.dim() - other.dim()) <= 1')
    if vec:
        B = B.unsqueeze(-1)
    if A.shape[-2] != B.shape[-2]:
        raise RuntimeError(f'torch.linalg.lstsq: input.size(-2) should match other.size(-2)'
                           f'{"" if not vec else " (treating other as a batch of vectors)"}')
    m, n = A.shape[-2], A.shape[-1]
    dt = A._data.dtype
    X = _fns()['lstsq'].apply(A, B, rcond)
    a = np.asarray(A._data)
    s = np.linalg.svd(a, compute_uv=False) if a.size else np.zeros(a.shape[:-2] + (0,), dt)
    # LAPACK's rank: singular values above rcond (default eps * max(m, n)) times the largest
    ranks = np.asarray((s > _tolerance(s, a.shape, None, rcond)).sum(axis=-1), np.int64)
    rank = _leaf(ranks) if driver != 'gels' else _leaf(np.zeros((0,), np.int64))
    svals = _leaf(np.ascontiguousarray(s.astype(dt))) if driver in ('gelsd', 'gelss') \
        else _leaf(np.zeros((0,), dt))
    if m > n and driver != 'gelsy' and bool(np.all(ranks == n)):
        residuals = ((A @ X - B) ** 2).sum(-2)
    else:
        # empty, but an output of the solve as in PyTorch (requires_grad follows X)
        residuals = X.reshape(-1)[:0]
    if vec:
        X = X.squeeze(-1)
    return _LSTSQ(X, residuals, rank, svals)


def matrix_power(A, n, *, out=None):
    """``torch.linalg.matrix_power``: ``A^n`` by repeated squaring (``inv(A)^-n`` for
    negative ``n``, the identity for 0), built from matmul."""
    import numpy as np
    A = A if isinstance(A, Tensor) else _ops._const(A)
    if A.dim() < 2:
        raise RuntimeError('linalg.matrix_power: The input tensor A must have at least 2 '
                           'dimensions.')
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f'linalg.matrix_power: A must be batches of square matrices, but '
                           f'they are {A.shape[-2] if A.dim() > 1 else 1} by {A.shape[-1]} '
                           f'matrices')
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f'matrix_power(): argument \'n\' must be int, not {type(n).__name__}')
    if n == 0:
        eye = np.ascontiguousarray(np.broadcast_to(np.eye(A.shape[-1], dtype=A._data.dtype),
                                                   A.shape))
        # (A * 0 + I: tied to A with a zero gradient, as PyTorch's result requires grad)
        return _ops.add(_ops.mul(A, 0.0), _leaf(eye)) if A._rg and _grad_enabled() \
            else _leaf(eye)
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            return result
        base = base @ base


# -- pseudo-inverse, matrix exponential, triangular solve, rank ---------------------

def _tolerance(s, shape, atol, rtol):
    """The cutoff below which a singular value counts as zero (PyTorch's rule: rtol
    defaults to eps * max(m, n) when neither tolerance is given, else to 0)."""
    import numpy as np
    if rtol is None:
        rtol = np.finfo(s.dtype).eps * max(shape[-2:]) if atol is None else 0.0
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,))
    return np.maximum(0.0 if atol is None else atol, rtol * smax)


def _pinv_np(a, atol, rtol):
    import numpy as np
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    cut = _tolerance(s, a.shape, atol, rtol)
    with np.errstate(divide='ignore'):
        sinv = np.where(s > cut, 1.0 / s, 0.0).astype(a.dtype)
    v, uh = np.swapaxes(vh, -1, -2), np.swapaxes(u, -1, -2)
    return np.ascontiguousarray(v @ (sinv[..., None] * uh))


_PINV = []


def _pinv_fn():
    if _PINV:
        return _PINV[0]
    from .autograd import Function

    class LinalgPinv(Function):
        """``A+`` by SVD; the backward is PyTorch's ``pinv_backward`` (valid while the
        rank stays put), in tape ops on a recomputed ``A+`` so it differentiates again."""
        @staticmethod
        def forward(ctx, A, atol, rtol, hermitian):
            import numpy as np
            ctx.save_for_backward(A)
            ctx.tols = (atol, rtol, hermitian)
            a = np.asarray(A._data)
            if hermitian:
                # PyTorch's eigh reads the lower triangle only; the SVD of that
                # symmetric matrix has its eigenvalues' magnitudes
                a = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
            return _leaf(_pinv_np(a, atol, rtol))

        @staticmethod
        def backward(ctx, g):
            A, = ctx.saved_tensors
            return _pinv_backward(g, A, LinalgPinv.apply(A, *ctx.tols)), None, None, None
    _PINV.append(_torch_named(LinalgPinv, 'LinalgPinvBackward0'))
    return LinalgPinv


def _pinv_backward(g, A, P):
    """PyTorch's ``pinv_backward``: the gradient wrt ``A`` of ``<g, pinv(A)>`` given
    ``P = pinv(A)`` (valid while the rank stays put), in tape ops so it
    differentiates again."""
    m, n = A.shape[-2], A.shape[-1]
    gh, Ph = g.mT, P.mT
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        return -(P @ K).mT + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -(K @ P).mT + PhK - (PhK @ P) @ A + (gh - A @ K) @ P @ Ph


def _tol_array(t):
    """A Tensor tolerance as an array that broadcasts over the singular values
    (PyTorch's: one per matrix of the batch); a number as it is."""
    import numpy as np
    return np.asarray(t._data)[..., None] if isinstance(t, Tensor) else t


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse (singular values at or
    below ``max(atol, rtol * largest)`` count as zero).  Differentiable while the rank
    does not change.

    >>> import tape
    >>> tape.linalg.pinv(tape.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    A = _matrices(A, 'pinv', square=False)
    if hermitian:
        _matrices(A, 'eigh')            # PyTorch's error for a non-square A
    if rcond is not None:               # PyTorch's older overload: rcond is rtol
        rtol = rcond
    return _pinv_fn().apply(A, _tol_array(atol), _tol_array(rtol), bool(hermitian))


def pinverse(input, rcond=1e-15):  # noqa: A002
    """``torch.pinverse``: ``linalg.pinv`` with relative tolerance ``rcond``."""
    return pinv(input, rtol=rcond)


# Higham (2005), "The scaling and squaring method for the matrix exponential
# revisited": the [13/13] Pade coefficients and the 1-norm up to which they suffice
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    """``torch.linalg.matrix_exp``: ``e^A`` by scaling and squaring with the [13/13]
    Pade approximant, written in matmul and solve, so it is differentiable to any order.

    >>> import tape
    >>> tape.linalg.matrix_exp(tape.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    import numpy as np
    from ._tape import note_value_use
    A = _square(A, 'matrix_exp')
    a = np.asarray(A._data)
    if a.dtype.kind != 'f':
        raise RuntimeError(f'linalg.matrix_exp: Expected a floating point tensor (got {a.dtype})')
    if a.size == 0:
        return _ops.mul(A, 1.0)
    note_value_use('matrix_exp')        # the number of squarings depends on the values
    norm1 = float(np.abs(a).sum(axis=-2).max()) if a.size else 0.0
    s = max(0, int(np.ceil(np.log2(norm1 / _THETA13)))) if norm1 > _THETA13 else 0
    X = A / float(2 ** s) if s else A
    b = _PADE13
    eye = _ops._const(np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy())
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2)
             + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 \
        + b[0] * eye
    R = solve(V - U, V + U)
    for _ in range(s):
        R = R @ R
    return R


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """``torch.linalg.solve_triangular``: ``X`` with ``A X = B`` (``X A = B`` when not
    ``left``), reading only ``A``'s upper or lower triangle (its diagonal taken as ones
    when ``unitriangular``), so ``A``'s gradient lies in that triangle.

    >>> import tape
    >>> tape.linalg.solve_triangular(tape.tensor([[2.0, 1.0], [0.0, 4.0]]),
    ...                              tape.tensor([[3.0], [4.0]]), upper=True)
    tensor([[1.],
            [1.]])
    """
    import numpy as np
    A = _square(A, 'solve_triangular')
    B = B if isinstance(B, Tensor) else _ops._const(B, A)
    if B.dim() < 2:
        raise RuntimeError(f'linalg.solve_triangular: The input tensor B must have at least 2 '
                           f'dimensions (got {B.dim()})')
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f'linalg.solve_triangular: Incompatible shapes of A and B for the '
                           f'equation {"AX = B" if left else "XA = B"} ({n}x{n} and '
                           f'{B.shape[-2]}x{B.shape[-1]})')
    if A._data.dtype.kind != 'f':
        from ._linalg_more import _dtype_name
        raise NotImplementedError(f'"triangular_solve_cpu" not implemented for '
                                  f"'{_dtype_name(A._data.dtype)}'")
    k = 1 if unitriangular else 0
    T = A.triu(k) if upper else A.tril(-k)
    if unitriangular:
        T = T + _ops._const(np.eye(A.shape[-1], dtype=np.asarray(A._data).dtype))
    return solve(T, _matrix_rhs(B, A), left=left)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``torch.linalg.matrix_rank``: the number of singular values above
    ``max(atol, rtol * largest)`` (``tol`` is the older name of ``atol``), int64.

    >>> import tape
    >>> tape.linalg.matrix_rank(tape.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    import numpy as np
    A = _matrices(A, 'matrix_rank', square=False)
    if hermitian:
        _matrices(A, 'eigh')            # PyTorch's error for a non-square A
    if tol is not None:
        atol = tol
    a = np.asarray(A._data)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    cut = _tolerance(s, a.shape, _tol_array(atol), _tol_array(rtol))
    return _leaf(np.asarray((s > cut).sum(axis=-1), dtype=np.int64))
from ._linalg_more import *  # noqa: E402,F401,F403  (lu family, _ex variants, cond, ...)
from ._out import honour_out as _honour_out  # noqa: E402

# PyTorch's out= (these declare it but compute without it; cross and multi_dot
# take it themselves, tape/_composites.py)
_honour_out(globals(), [
    'solve', 'inv', 'det', 'slogdet', 'cholesky', 'eigh', 'eigvalsh', 'qr', 'svd', 'svdvals',
    'matrix_power', 'pinv', 'solve_triangular', 'matrix_rank', 'lu', 'lu_factor',
    'lu_factor_ex', 'lu_solve', 'solve_ex', 'inv_ex', 'cholesky_ex', 'vecdot', 'cond',
    'tensorinv', 'tensorsolve', 'householder_product', 'vector_norm', 'matrix_norm', 'norm'],
    'linalg_')
