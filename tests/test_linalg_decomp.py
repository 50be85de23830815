"""``tape.linalg`` decompositions (cholesky, eigh, qr, svd, lstsq, matrix_power):
values, first and second derivatives against PyTorch and ``gradcheck`` (float64)."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=float)


def _close(a, b, rtol=1e-7, atol=1e-9):
    np.testing.assert_allclose(_np(b), _np(a), rtol=rtol, atol=atol)


def _spd(rng, *shape):
    x = rng.normal(size=shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _both(prog, *arrays):
    """Run ``prog(T, *leaves)`` on torch and tape; compare its outputs and the leaves'
    first (and, through ``create_graph``, second) derivatives of ``loss = out[0]``."""
    res = []
    for T in (torch, tape):
        leaves = [T.tensor(a, dtype=T.float64, requires_grad=True) for a in arrays]
        outs = prog(T, *leaves)
        gs = T.autograd.grad(outs[0], leaves, create_graph=True)
        g2 = T.autograd.grad(sum((g ** 2).sum() for g in gs), leaves)
        res.append(list(outs) + list(gs) + list(g2))
    for a, b in zip(*res):
        _close(a, b, rtol=1e-6, atol=1e-8)


def _sym(T, x):
    return 0.5 * (x + x.mT)


# -- cholesky -----------------------------------------------------------------------

def test_cholesky_values_grads_vs_torch():
    rng = np.random.default_rng(0)
    An = _spd(rng, 2, 4, 4)

    def prog(T, A):
        L = T.linalg.cholesky(_sym(T, A))
        U = T.linalg.cholesky(_sym(T, A), upper=True)
        return (L.sin().sum() + (U * U.exp()).sum(), L, U)
    _both(prog, An)


def test_cholesky_gradcheck():
    rng = np.random.default_rng(1)
    A = tape.tensor(_spd(rng, 3, 3), dtype=tape.float64, requires_grad=True)
    f = lambda a: tape.linalg.cholesky(_sym(tape, a))  # noqa: E731
    assert tape.autograd.gradcheck(f, (A,))
    assert tape.autograd.gradgradcheck(f, (A,))


def test_cholesky_errors():
    for T in (torch, tape):
        with pytest.raises(RuntimeError, match=r'^linalg.cholesky: The factorization could not '
                           r'be completed because the input is not positive-definite \(the '
                           r'leading minor of order 2 is not positive-definite\)\.$'):
            T.linalg.cholesky(T.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=T.float64))
        with pytest.raises(T.linalg.LinAlgError, match=r'^linalg.cholesky: \(Batch element 1\): '):
            T.linalg.cholesky(T.tensor([[[4.0, 0], [0, 1]], [[1.0, 2], [2, 1]]], dtype=T.float64))
        with pytest.raises(RuntimeError, match='A must be batches of square matrices, but they '
                           'are 2 by 3 matrices'):
            T.linalg.cholesky(T.ones(2, 3, dtype=T.float64))


# -- eigh ---------------------------------------------------------------------------

def test_eigh_values_grads_vs_torch():
    rng = np.random.default_rng(2)
    An = rng.normal(size=(2, 4, 4))

    def prog(T, A):
        S = _sym(T, A)
        w, V = T.linalg.eigh(S)
        r = T.linalg.eigh(S, UPLO='U')
        d = T.tensor([1.0, -2.0, 3.0, 0.5], dtype=T.float64)
        M = (V * d) @ V.mT                        # gauge invariant
        loss = (w ** 2).sum() + (M.sin()).sum() + ((V * V) ** 2 * d).sum() \
            + T.linalg.eigvalsh(S).exp().sum()
        return loss, w, r.eigenvalues, V.abs(), M
    _both(prog, An)


def test_eigh_named_tuple_and_gradcheck():
    rng = np.random.default_rng(3)
    A = tape.tensor(rng.normal(size=(3, 3)), dtype=tape.float64, requires_grad=True)
    r = tape.linalg.eigh(_sym(tape, A))
    assert r.eigenvalues is r[0] and r.eigenvectors is r[1]
    assert tape.autograd.gradcheck(lambda a: tape.linalg.eigvalsh(_sym(tape, a)), (A,))

    def f(a):
        w, V = tape.linalg.eigh(_sym(tape, a))
        return (V * w.exp()) @ V.mT
    assert tape.autograd.gradcheck(f, (A,))
    assert tape.autograd.gradgradcheck(f, (A,))
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        tape.linalg.eigh(A, UPLO='X')


def test_eigvalsh_repeated_eigenvalues_grad_finite():
    for T in (torch, tape):
        A = T.eye(3, dtype=T.float64, requires_grad=True)
        T.linalg.eigvalsh(A).sum().backward()
        np.testing.assert_allclose(_np(A.grad), np.eye(3))


# -- qr -----------------------------------------------------------------------------

@pytest.mark.parametrize('shape', [(4, 4), (2, 5, 3)])
def test_qr_values_grads_vs_torch(shape):
    rng = np.random.default_rng(4)
    An = rng.normal(size=shape)

    def prog(T, A):
        Q, R = T.linalg.qr(A)
        return (Q.sin().sum() + (R ** 2).sum(), Q, R, T.linalg.qr(A, mode='r').R,
                T.linalg.qr(A, mode='complete').Q)
    _both(prog, An)


def test_qr_gradcheck_and_errors():
    rng = np.random.default_rng(5)
    A = tape.tensor(rng.normal(size=(4, 3)), dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(lambda a: tape.linalg.qr(a), (A,))
    assert tape.autograd.gradgradcheck(lambda a: tape.linalg.qr(a).R, (A,))
    for T in (torch, tape):
        B = T.tensor(rng.normal(size=(4, 3)), dtype=T.float64, requires_grad=True)
        assert T.linalg.qr(B, mode='r').Q.shape == (0,)
        with pytest.raises(RuntimeError, match="not computed when mode='r'"):
            T.linalg.qr(B, mode='r').R.sum().backward()
        with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and "
                           "nrows > ncols"):
            T.linalg.qr(B, mode='complete').Q.sum().backward()
        with pytest.raises(RuntimeError, match="qr received unrecognized mode 'x'"):
            T.linalg.qr(B, mode='x')


# -- svd ----------------------------------------------------------------------------

@pytest.mark.parametrize('shape', [(4, 4), (5, 3), (2, 3, 5)])
def test_svd_values_grads_vs_torch(shape):
    rng = np.random.default_rng(6)
    An = rng.normal(size=shape)

    def prog(T, A):
        U, S, Vh = T.linalg.svd(A, full_matrices=False)
        P = U @ U.mT                              # gauge invariant
        Pv = Vh.mT @ (Vh * S.unsqueeze(-1))
        loss = S.exp().sum() + P.sin().sum() + (Pv ** 2).sum() + T.linalg.svdvals(A).sum()
        return (loss, S, P, Pv, T.linalg.svd(A).S, T.linalg.svdvals(A))
    _both(prog, An)


def test_svd_full_matrices_shapes_and_grad():
    rng = np.random.default_rng(7)
    An = rng.normal(size=(5, 3))
    out = []
    for T in (torch, tape):
        A = T.tensor(An, dtype=T.float64, requires_grad=True)
        U, S, Vh = T.linalg.svd(A)
        assert tuple(U.shape) == (5, 5) and tuple(Vh.shape) == (3, 3)
        loss = (U[:, :3] * S) @ Vh
        loss = (loss ** 2).sum() + (Vh.mT @ Vh).sin().sum()
        loss.backward()
        out.append(A.grad)
    _close(*out)


def test_svd_gradcheck():
    rng = np.random.default_rng(8)
    A = tape.tensor(rng.normal(size=(4, 3)), dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(lambda a: tape.linalg.svdvals(a), (A,))
    assert tape.autograd.gradgradcheck(lambda a: tape.linalg.svdvals(a), (A,))

    def f(a):
        U, S, Vh = tape.linalg.svd(a, full_matrices=False)
        return U @ (S.unsqueeze(-1) ** 2 * U.mT), Vh.mT @ (Vh * S.unsqueeze(-1))
    assert tape.autograd.gradcheck(f, (A,))
    with pytest.raises(RuntimeError, match='must have at least 2 dimensions'):
        tape.linalg.svd(tape.ones(3, dtype=tape.float64))


@pytest.mark.parametrize('ord', ['fro', 'nuc', 2, -2])
def test_matrix_norm_svd_orders(ord):  # noqa: A002
    rng = np.random.default_rng(9)
    An = rng.normal(size=(2, 4, 3))

    def prog(T, A):
        n1 = T.linalg.matrix_norm(A, ord)
        n2 = T.linalg.norm(A, ord, dim=(0, 2), keepdim=True)
        return (n1.sum() + n2.exp().sum(), n1, n2)
    _both(prog, An)


# -- lstsq --------------------------------------------------------------------------

def test_lstsq_values_grads_vs_torch():
    rng = np.random.default_rng(10)
    An, Bn, bn = rng.normal(size=(2, 6, 3)), rng.normal(size=(2, 6, 2)), rng.normal(size=(6,))

    def prog(T, A, B, b):
        X = T.linalg.lstsq(A, B).solution
        x = T.linalg.lstsq(A[0], b).solution
        return (X.sin().sum() + (x ** 2).sum(), X, x)
    _both(prog, An, Bn, bn)


def test_lstsq_tuple_gradcheck_and_errors():
    rng = np.random.default_rng(11)
    A = tape.tensor(rng.normal(size=(5, 3)), dtype=tape.float64, requires_grad=True)
    B = tape.tensor(rng.normal(size=(5, 2)), dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(lambda a, b: tape.linalg.lstsq(a, b).solution, (A, B))
    assert tape.autograd.gradgradcheck(lambda a, b: tape.linalg.lstsq(a, b)[0], (A, B))
    r = tape.linalg.lstsq(A, B)
    t = torch.linalg.lstsq(torch.tensor(_np(A)), torch.tensor(_np(B)))
    assert int(r.rank) == int(t.rank) == 3
    assert tuple(r.residuals.shape) == tuple(t.residuals.shape)
    for T in (torch, tape):
        with pytest.raises(RuntimeError, match=r'input.size\(-2\) should match other.size\(-2\)'):
            T.linalg.lstsq(T.ones(3, 2, dtype=T.float64), T.ones(4, 2, dtype=T.float64))


# -- matrix_power -------------------------------------------------------------------

@pytest.mark.parametrize('n', [0, 1, 2, 5, -1, -3])
def test_matrix_power_vs_torch(n):
    rng = np.random.default_rng(12)
    An = rng.normal(size=(2, 3, 3)) * 0.5 + 2 * np.eye(3)

    def prog(T, A):
        P = T.linalg.matrix_power(A, n)
        Q = T.matrix_power(A[0], n)
        R = A[1].matrix_power(n)
        return ((P * P).sum() + Q.sum() + R.sin().sum() + (A ** 3).sum(), P, Q, R)
    _both(prog, An)


def test_matrix_power_errors():
    for T in (torch, tape):
        with pytest.raises(RuntimeError, match='A must be batches of square matrices'):
            T.linalg.matrix_power(T.ones(2, 3), 2)
