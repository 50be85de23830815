"""tape/_linalg_more.py and tape/_functions_more.py: the LU family, the ``_ex``
variants, cond/tensorinv/tensorsolve/vander/vecdot, and the top-level svd, cholesky,
lu, quantile, scatters, gradient, pdist, i0, ... against PyTorch (values, first and
second derivatives, errors) plus float64 gradcheck/gradgradcheck."""
import warnings

import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")


def _np(t):
    if isinstance(t, (bool, int, float)):
        return np.asarray(t)
    return np.asarray(t.detach().numpy(), dtype=float)


def _close(a, b, rtol=1e-7, atol=1e-9):
    np.testing.assert_allclose(_np(b), _np(a), rtol=rtol, atol=atol)


def _both(prog, *arrays, second=True, rtol=1e-6, atol=1e-8):
    """Run ``prog(T, *leaves)`` on torch and tape; compare its outputs and the leaves'
    first (and, through ``create_graph``, second) derivatives of ``out[0]``."""
    res = []
    for T in (torch, tape):
        leaves = [T.tensor(a, dtype=T.float64, requires_grad=True) for a in arrays]
        outs = prog(T, *leaves)
        gs = T.autograd.grad(outs[0], leaves, create_graph=second)
        r = list(outs) + list(gs)
        if second:
            r += list(T.autograd.grad(sum((g ** 2).sum() for g in gs), leaves))
        res.append(r)
    for a, b in zip(*res):
        _close(a, b, rtol=rtol, atol=atol)


def _errs(fn):
    """The exception types and messages of ``fn(torch)`` and ``fn(tape)``."""
    out = []
    for T in (torch, tape):
        with pytest.raises(Exception) as e:
            fn(T)
        out.append(e.value)
    return out


def _same_error(fn, cls=RuntimeError):
    te, ta = _errs(fn)
    assert isinstance(te, cls) and isinstance(ta, cls), (te, ta)
    assert str(ta) == str(te).split('\n')[0], (str(ta), str(te))


def _w(rng, shape):
    return rng.normal(size=shape)


# -- LU family ---------------------------------------------------------------------------

@pytest.mark.parametrize('shape', [(3, 3), (2, 4, 4), (5, 3), (3, 5), (2, 1, 4, 3), (2, 3, 4)])
def test_lu_values_and_grads(shape):
    rng = np.random.default_rng(0)
    A, W1, W2 = _w(rng, shape), _w(rng, shape), _w(rng, shape)

    def prog(T, a):
        P, L, U = T.linalg.lu(a)
        LU, piv = T.linalg.lu_factor(a)
        loss = (L * L).sum() + (U.sin() * U).sum() + (LU * T.tensor(W1)).sum() \
            + (T.linalg.lu_factor_ex(a).LU ** 2 * T.tensor(W2)).sum()
        return loss, P, L, U, LU, piv.double()
    _both(prog, A)


def test_lu_pivots_info_dtypes():
    rng = np.random.default_rng(1)
    A = _w(rng, (3, 4, 4))
    r1, r2 = torch.linalg.lu_factor_ex(torch.tensor(A)), tape.linalg.lu_factor_ex(tape.tensor(A))
    assert r2.pivots.dtype == tape.int32 and r2.info.dtype == tape.int32
    np.testing.assert_array_equal(np.asarray(r2.pivots._data), r1.pivots.numpy())
    np.testing.assert_array_equal(np.asarray(r2.info._data), r1.info.numpy())
    assert tuple(tape.linalg.lu(tape.tensor(A))._fields) == ('P', 'L', 'U')


def test_lu_singular():
    S = [[1.0, 2.0], [2.0, 4.0]]
    lu1, lu2 = torch.linalg.lu_factor_ex(torch.tensor(S)), tape.linalg.lu_factor_ex(tape.tensor(S))
    _close(lu1.LU, lu2.LU)
    assert int(lu2.info) == int(lu1.info) == 2
    _same_error(lambda T: T.linalg.lu_factor(T.tensor(S)))
    _same_error(lambda T: T.linalg.lu_factor(T.stack([T.eye(2), T.tensor(S)])))
    _same_error(lambda T: T.linalg.lu_factor_ex(T.tensor(S), check_errors=True))
    _same_error(lambda T: T.linalg.lu_factor(T.ones(3)))
    _same_error(lambda T: T.linalg.lu(T.eye(3), pivot=False))
    te, ta = _errs(lambda T: T.linalg.lu_factor(T.ones(2, 2, dtype=T.int64)))
    assert type(te) is type(ta) is NotImplementedError


def test_lu_gradcheck():
    rng = np.random.default_rng(2)
    for shape in [(3, 3), (4, 2), (2, 4)]:
        A = tape.tensor(_w(rng, shape), dtype=tape.float64, requires_grad=True)
        f = lambda a: tape.linalg.lu(a)[1:]  # noqa: E731
        assert tape.autograd.gradcheck(f, (A,))
        assert tape.autograd.gradgradcheck(f, (A,))


@pytest.mark.parametrize('left,adjoint', [(True, False), (True, True), (False, False),
                                          (False, True)])
def test_lu_solve(left, adjoint):
    rng = np.random.default_rng(3)
    A = _w(rng, (2, 3, 3)) + 3 * np.eye(3)
    B = _w(rng, (2, 3, 2)) if left else _w(rng, (2, 2, 3))

    def prog(T, a, b):
        LU, piv = T.linalg.lu_factor(a)
        X = T.linalg.lu_solve(LU, piv, b, left=left, adjoint=adjoint)
        return (X.sin() * X).sum(), X
    _both(prog, A, B)


def test_lu_solve_gradcheck():
    rng = np.random.default_rng(4)
    A = tape.tensor(_w(rng, (3, 3)) + 3 * np.eye(3), dtype=tape.float64)
    LU, piv = tape.linalg.lu_factor(A)
    LU.requires_grad_(True)
    B = tape.tensor(_w(rng, (3, 2)), dtype=tape.float64, requires_grad=True)
    f = lambda lu_, b: tape.linalg.lu_solve(lu_, piv, b, adjoint=True)  # noqa: E731
    assert tape.autograd.gradcheck(f, (LU, B))
    assert tape.autograd.gradgradcheck(f, (LU, B))


def test_old_lu_api():
    rng = np.random.default_rng(5)
    A, b = _w(rng, (2, 3, 3)), _w(rng, (2, 3, 1))

    def prog(T, a, bb):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            LU, piv = T.lu(a)
            LU2, piv2, info = a.lu(get_infos=True)
            P, L, U = T.lu_unpack(LU, piv)
            x = T.lu_solve(bb, LU, piv)
        return (x ** 2).sum() + (L * U).sum(), LU, LU2, info.double(), P, L, U, x
    _both(prog, A, b)
    P, L, U = tape.lu_unpack(*tape.linalg.lu_factor(tape.tensor(A)), unpack_data=False)
    assert L.shape == (0,) and P.shape == (2, 3, 3)


# -- _ex variants ----------------------------------------------------------------------

def test_solve_inv_ex():
    rng = np.random.default_rng(6)
    A, B = _w(rng, (2, 3, 3)) + 3 * np.eye(3), _w(rng, (2, 3))

    def prog(T, a, b):
        x, info = T.linalg.solve_ex(a, b)
        xl = T.linalg.solve_ex(a, b.unsqueeze(-2), left=False).result
        inv, info2 = T.linalg.inv_ex(a)
        return (x * x).sum() + (inv ** 3).sum() + xl.sum(), x, inv, info.double(), info2.double()
    _both(prog, A, B)
    S = [[1.0, 2.0], [2.0, 4.0]]
    for fn in (lambda T: T.linalg.solve_ex(T.tensor(S), T.ones(2)),
               lambda T: T.linalg.inv_ex(T.tensor(S))):
        r1, r2 = fn(torch), fn(tape)
        _close(r1[0], r2[0])
        assert int(r1[1]) == int(r2[1]) == 2
    _same_error(lambda T: T.linalg.solve_ex(T.tensor(S), T.ones(2), check_errors=True))
    _same_error(lambda T: T.linalg.inv_ex(T.tensor(S), check_errors=True))
    _same_error(lambda T: T.linalg.inv_ex(T.stack([T.eye(2), T.tensor(S)]), check_errors=True))
    te, ta = _errs(lambda T: T.linalg.inv_ex(T.tensor(S), check_errors=True))
    assert isinstance(ta, tape.linalg.LinAlgError)


def test_cholesky_ex():
    rng = np.random.default_rng(7)
    x = _w(rng, (2, 3, 3))
    A = x @ np.swapaxes(x, -1, -2) + 3 * np.eye(3)

    def prog(T, a):
        L, info = T.linalg.cholesky_ex(a)
        U, _ = T.linalg.cholesky_ex(a, upper=True)
        return (L ** 2).sum() + U.sin().sum(), L, U, info.double()
    _both(prog, A)
    bad = [[1.0, 2.0], [2.0, 1.0]]
    r1, r2 = torch.linalg.cholesky_ex(torch.tensor(bad)), tape.linalg.cholesky_ex(tape.tensor(bad))
    _close(r1.L, r2.L)
    assert int(r1.info) == int(r2.info) == 2
    _same_error(lambda T: T.linalg.cholesky_ex(T.tensor(bad), check_errors=True))


# -- cond, tensorinv, tensorsolve, vander, vecdot, diagonal -------------------------------

@pytest.mark.parametrize('p', [None, 2, -2, 'fro', 'nuc', float('inf'), float('-inf'), 1, -1])
def test_cond(p):
    rng = np.random.default_rng(8)
    A = _w(rng, (2, 3, 3)) + np.eye(3)

    def prog(T, a):
        if T is torch and p not in (None, 2, -2):
            # torch's own cond backward fails here (it masks the inverse in place):
            # compare the gradients with its formula written out
            c = T.linalg.matrix_norm(a, p) * T.linalg.matrix_norm(T.linalg.inv(a), p)
            _close(c, T.linalg.cond(a.detach(), p))
        else:
            c = T.linalg.cond(a, p)
        return (c * c).sum(), c
    _both(prog, A, second=p not in (None, 2, -2))
    S = [[1.0, 2.0], [2.0, 4.0]]
    if p not in (None, 2, -2, 'nuc'):
        assert float(tape.linalg.cond(tape.tensor(S), p)) == float('inf')
        c = tape.linalg.cond(tape.stack([tape.eye(2), tape.tensor(S)]), p)
        _close(torch.linalg.cond(torch.stack([torch.eye(2), torch.tensor(S)]), p), c)


def test_cond_rect_and_errors():
    rng = np.random.default_rng(9)
    A = _w(rng, (2, 3, 4))
    _close(torch.linalg.cond(torch.tensor(A)), tape.linalg.cond(tape.tensor(A)))
    _same_error(lambda T: T.linalg.cond(T.ones(2, 3), 1))
    _same_error(lambda T: T.linalg.cond(T.ones(2, 2), 3))
    _same_error(lambda T: T.linalg.cond(T.ones(2)))


def test_tensorinv_tensorsolve():
    rng = np.random.default_rng(10)
    A = _w(rng, (4, 6, 8, 3)) + 0.0
    A2 = np.eye(6).reshape(6, 2, 3) + 0.1 * _w(rng, (6, 2, 3))
    B2 = _w(rng, (6,))
    A3 = _w(rng, (2, 3, 6))
    A3 = np.einsum('ijk->kij', np.eye(6).reshape(2, 3, 6)) + 0.1 * _w(rng, (6, 2, 3))

    def prog(T, a, a2, b2, a3):
        X = T.linalg.tensorinv(a, ind=2)
        Y = T.linalg.tensorsolve(a2, b2)
        Z = T.linalg.tensorsolve(a3.permute(1, 2, 0), b2, dims=(0, 1))
        return (X ** 2).sum() + Y.sin().sum() + (Z ** 3).sum(), X, Y, Z
    A = A.reshape(24, 24) + 5 * np.eye(24)
    _both(prog, A.reshape(4, 6, 8, 3), A2, B2, A3)
    _same_error(lambda T: T.linalg.tensorinv(T.ones(2, 3), 0))
    _same_error(lambda T: T.linalg.tensorinv(T.ones(2, 3, 2), 1))
    _same_error(lambda T: T.linalg.tensorsolve(T.ones(2, 3, 6), T.ones(3)))


def test_vander_vecdot_diagonal():
    rng = np.random.default_rng(11)
    x, y, z = _w(rng, (2, 4)), _w(rng, (3, 1, 5)), _w(rng, (4, 5))
    x[0, 1] = 0.0

    def prog(T, a, b, c):
        V = T.linalg.vander(a)
        V3 = T.linalg.vander(a, N=3)
        if T is torch:
            # torch.vander's own backward fails (an in-place op): compare the gradients
            # with linalg.vander, its values with torch.vander
            v = T.linalg.vander(a[0]).flip(-1)
            v2 = T.linalg.vander(a[1], N=2)
            _close(T.vander(a[0].detach()), v)
            _close(T.vander(a[1].detach(), N=2, increasing=True), v2)
        else:
            v = T.vander(a[0])
            v2 = T.vander(a[1], N=2, increasing=True)
        d = T.linalg.vecdot(b, c)
        dg = T.linalg.diagonal(b.expand(3, 4, 5), offset=1)
        return (V ** 2).sum() + V3.sum() + (v * v2[:, :1]).sum() + (d ** 2).sum() \
            + dg.sum(), V, V3, v, v2, d, dg
    _both(prog, x, y, z)
    assert tuple(tape.vander(tape.tensor([1.0, 2.0]), N=0).shape) == (2, 0)
    assert tape.linalg.vander(tape.tensor([1, 2])).dtype == tape.int64
    _same_error(lambda T: T.linalg.vander(T.tensor(2.0)))
    _same_error(lambda T: T.vander(T.ones(2, 2)))
    _same_error(lambda T: T.vander(T.ones(2), N=-1))


def test_linalg_gradchecks():
    rng = np.random.default_rng(12)
    A = tape.tensor(_w(rng, (3, 3)) + 2 * np.eye(3), dtype=tape.float64, requires_grad=True)
    x = tape.tensor(_w(rng, (4,)), dtype=tape.float64, requires_grad=True)
    for f, inp in [(lambda a: tape.linalg.cond(a, 'fro'), A), (lambda a: tape.linalg.cond(a), A),
                   (lambda a: tape.linalg.inv_ex(a).inverse, A),
                   (lambda a: tape.linalg.vander(a, N=4), x)]:
        assert tape.autograd.gradcheck(f, (inp,))
        assert tape.autograd.gradgradcheck(f, (inp,))


# -- top-level decompositions -----------------------------------------------------------

@pytest.mark.parametrize('shape,some', [((4, 3), True), ((4, 3), False), ((2, 3, 5), True)])
def test_svd_top_level(shape, some):
    rng = np.random.default_rng(13)
    A = _w(rng, shape)

    def prog(T, a):
        U, S, V = T.svd(a, some=some)
        k = S.shape[-1]
        rec = (U[..., :k] * S.unsqueeze(-2)) @ V[..., :k].mT
        return (rec ** 2).sum() + (S ** 3).sum(), rec, S, (U[..., :k] @ U[..., :k].mT)
    _both(prog, A)
    U, S, V = tape.svd(tape.tensor(A), compute_uv=False)
    U2, S2, V2 = torch.svd(torch.tensor(A), compute_uv=False)
    assert U.shape == U2.shape and V.shape == V2.shape
    _close(S2, S)
    assert float(U.abs().sum()) == 0.0


def test_cholesky_top_level_and_triangular_solve():
    rng = np.random.default_rng(14)
    x = _w(rng, (2, 3, 3))
    A = x @ np.swapaxes(x, -1, -2) + 3 * np.eye(3)
    M, b = _w(rng, (2, 3, 3)) + 3 * np.eye(3), _w(rng, (2, 3, 2))

    def prog(T, a, m, bb):
        L = T.cholesky(0.5 * (a + a.mT))
        U = (0.5 * (a + a.mT)).cholesky(upper=True)
        r = [T.triangular_solve(bb, m, upper=u, transpose=t, unitriangular=un)
             for u in (True, False) for t in (True, False) for un in (True, False)]
        loss = (L ** 2).sum() + U.sin().sum() + sum((s ** 2).sum() + c.sum() for s, c in r)
        return [loss, L, U] + [s.solution for s in r]
    _both(prog, A, M, b)


def test_chain_matmul():
    rng = np.random.default_rng(15)
    a, b, c = _w(rng, (2, 3)), _w(rng, (3, 4)), _w(rng, (4, 2))

    def prog(T, x, y, z):
        r = T.chain_matmul(x, y, z)
        return (r ** 2).sum(), r, T.chain_matmul(x)
    _both(prog, a, b, c)
    _same_error(lambda T: T.chain_matmul())
    _same_error(lambda T: T.chain_matmul(T.ones(3), T.ones(3)))


# -- quantile ------------------------------------------------------------------------------

@pytest.mark.parametrize('interp', ['linear', 'lower', 'higher', 'midpoint', 'nearest'])
def test_quantile(interp):
    rng = np.random.default_rng(16)
    x = _w(rng, (3, 5, 4))
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])

    def prog(T, a):
        outs = [T.quantile(a, 0.3, interpolation=interp),
                T.quantile(a, T.tensor(q, dtype=T.float64), dim=1, interpolation=interp),
                T.quantile(a, T.tensor(q, dtype=T.float64), dim=-1, keepdim=True,
                           interpolation=interp),
                T.quantile(a, T.tensor(0.7, dtype=T.float64), keepdim=True,
                           interpolation=interp),
                a.quantile(0.5, dim=0, interpolation=interp),
                T.nanquantile(a, 0.4, dim=2, interpolation=interp)]
        return [sum((o * (i + 1)).sin().sum() for i, o in enumerate(outs))] + outs
    _both(prog, x)


def test_quantile_nan_and_errors():
    nan = float('nan')
    x = [[1.0, nan, 2.0, 5.0], [nan, nan, nan, nan], [3.0, 1.0, 2.0, 0.0]]
    _close(torch.quantile(torch.tensor(x), 0.5, dim=1), tape.quantile(tape.tensor(x), 0.5, dim=1))
    _close(torch.nanquantile(torch.tensor(x), torch.tensor([0.2, 0.5]), dim=1),
           tape.nanquantile(tape.tensor(x), tape.tensor([0.2, 0.5]), dim=1))
    _close(torch.quantile(torch.tensor(3.0), 0.5, dim=0),
           tape.quantile(tape.tensor(3.0), 0.5, dim=0))
    _same_error(lambda T: T.quantile(T.ones(3), 1.5))
    _same_error(lambda T: T.quantile(T.arange(3), 0.5))
    _same_error(lambda T: T.quantile(T.ones(3), T.tensor([0.5], dtype=T.float64)))
    _same_error(lambda T: T.quantile(T.ones(3), T.tensor([[0.5]])))
    _same_error(lambda T: T.quantile(T.ones(3), 0.5, interpolation='foo'))
    _same_error(lambda T: T.quantile(T.ones(0), 0.5))
    _same_error(lambda T: T.quantile(T.ones(3), T.tensor([0.5, 2.0])))


# -- scatters -------------------------------------------------------------------------------

def test_scatters():
    rng = np.random.default_rng(17)
    x = _w(rng, (3, 4, 5))
    s1, s2, s3 = _w(rng, (3, 5)), _w(rng, (3, 2, 5)), _w(rng, (5, 3))

    def prog(T, a, b, c, d):
        r1 = T.select_scatter(a, b, 1, -1)
        r2 = T.slice_scatter(a, c, 1, 1, 4, 2)
        r3 = a.diagonal_scatter(d, 0, 0, 1)
        r4 = T.diagonal_scatter(a[0], d[:4, 0], offset=1)
        r5 = a.slice_scatter(a[:, :, :2] * 2, dim=-1, end=2)
        loss = sum(((r * r).sum() * (i + 1)) for i, r in enumerate((r1, r2, r3, r4, r5)))
        return loss, r1, r2, r3.sin(), r4, r5
    # diagonal of a (3, 4, 5) over dims 0, 1 has shape (5, 3)
    _both(prog, x, s1, s2, s3)
    _same_error(lambda T: T.select_scatter(T.ones(3, 4), T.ones(3), 0, 0))
    _same_error(lambda T: T.slice_scatter(T.ones(3, 4), T.ones(3, 3), 1, 0, 2))
    _same_error(lambda T: T.diagonal_scatter(T.ones(3, 4), T.ones(2)))
    _same_error(lambda T: T.select_scatter(T.ones(3, 4), T.ones(4), 0, 5), IndexError)


# -- gradient, pdist -----------------------------------------------------------------------

@pytest.mark.parametrize('edge', [1, 2])
def test_gradient(edge):
    rng = np.random.default_rng(18)
    x = _w(rng, (4, 5, 3))
    c0 = np.cumsum(rng.uniform(0.5, 1.5, size=4))
    c2 = np.cumsum(rng.uniform(0.5, 1.5, size=3))

    def prog(T, a):
        g1 = T.gradient(a, edge_order=edge)
        g2 = T.gradient(a, spacing=2.0, dim=1, edge_order=edge)
        g3 = T.gradient(a, spacing=[0.5, 3.0], dim=(0, -1), edge_order=edge)
        g4 = T.gradient(a, spacing=[T.tensor(c0), T.tensor(c2)], dim=[0, 2], edge_order=edge)
        outs = list(g1) + list(g2) + list(g3) + list(g4)
        return [sum(((o ** 2) * (i + 1)).sum() for i, o in enumerate(outs))] + outs
    _both(prog, x)
    g = tape.gradient(tape.tensor([1, 2, 4, 8]))
    _close(torch.gradient(torch.tensor([1, 2, 4, 8]))[0], g[0])
    _same_error(lambda T: T.gradient(T.tensor([1.0, 2.0]), edge_order=2))
    _same_error(lambda T: T.gradient(T.tensor([1.0, 2.0, 3.0]), edge_order=3))
    _same_error(lambda T: T.gradient(T.ones(3, 3), spacing=[1.0, 2.0, 3.0]))


@pytest.mark.parametrize('p', [2, 1, 3, 0.5, float('inf')])
def test_pdist(p):
    rng = np.random.default_rng(19)
    x = _w(rng, (5, 3))

    def prog(T, a):
        d = T.pdist(a, p)
        return (d ** 2).sum(), d
    _both(prog, x, second=False)    # torch's _pdist_backward has no derivative
    assert tape.pdist(tape.ones(1, 3)).shape == (0,)
    _same_error(lambda T: T.pdist(T.ones(3)))
    _same_error(lambda T: T.pdist(T.ones(3, 2), -1))


# -- elementwise, special ------------------------------------------------------------------

def test_mvlgamma_i0_ldexp():
    rng = np.random.default_rng(20)
    x = rng.uniform(2.0, 4.0, size=(2, 3))
    y = _w(rng, (2, 3))
    y[0, 0] = 0.0
    e = rng.integers(-2, 3, size=(2, 3)).astype(float)

    def prog(T, a, b, c):
        outs = [T.mvlgamma(a, 3), a.mvlgamma(1), T.i0(b), b.i0(), T.special.i0(b),
                T.special.i0e(b), T.special.i1(b), T.special.i1e(b),
                T.special.multigammaln(a, 2), T.ldexp(b, c), b.ldexp(c)]
        return [sum((o * (i + 1)).sin().sum() for i, o in enumerate(outs))] + outs
    _both(prog, x, y, e)
    _close(torch.i0(torch.tensor([0, 1])), tape.i0(tape.tensor([0, 1])))
    _close(torch.ldexp(torch.tensor([1, 2]), torch.tensor([1, 2])),
           tape.ldexp(tape.tensor([1, 2]), tape.tensor([1, 2])))
    _same_error(lambda T: T.mvlgamma(T.tensor([2.5]), 0))
    y[0, 0] = 0.3             # i0e has a kink at 0
    b = tape.tensor(y, dtype=tape.float64, requires_grad=True)
    for f in (tape.i0, tape.special.i0e, tape.special.i1, tape.special.i1e):
        assert tape.autograd.gradcheck(f, (b,))
        assert tape.autograd.gradgradcheck(f, (b,))


_BESSELS = [('i0', lambda T: T.i0), ('i0e', lambda T: T.special.i0e),
            ('i1', lambda T: T.special.i1), ('i1e', lambda T: T.special.i1e)]


def _bessel_points():
    rng = np.random.default_rng(21)
    special = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e-40, -1e-45, 1e-20, -1e-8, 0.5,
               8.0, -8.0, np.nextafter(8.0, 9.0), np.nextafter(8.0, 0.0), 88.7, 89.0,
               -89.0, 700.0, -700.0, 709.0, 710.0, -710.0, 1e300, np.inf, -np.inf, np.nan]
    return np.concatenate([np.linspace(-700.0, 700.0, 14001), rng.uniform(-10, 10, 4000),
                           rng.standard_normal(1000) * 1e-3, special])


@pytest.mark.parametrize('dtype', ['float64', 'float32', 'float16'])
@pytest.mark.parametrize('name,fn', _BESSELS)
def test_bessel_values_wide_range(name, fn, dtype):
    """i0/i0e/i1/i1e (compiler/special_kernels.py, Cephes' Chebyshev expansions as in
    torch) against torch on [-700, 700], around the branch point 8, tiny and
    subnormal x, overflow, +-0, +-inf and nan: same nan/inf/sign-of-zero pattern,
    float64 within 1e-15 relative (the kernels reproduce torch's fused chbevl),
    float32 within a few ulps (float32 arithmetic and tables, as torch)."""
    with np.errstate(over='ignore'):
        x = _bessel_points().astype(dtype)
    ours = np.asarray(fn(tape)(tape.tensor(x))._data)
    ref = fn(torch)(torch.from_numpy(x)).numpy()
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(ours), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(ref))
    np.testing.assert_array_equal(np.signbit(ours[ref == 0]), np.signbit(ref[ref == 0]))
    assert (ours[ref == 0] == 0).all()
    fin = np.isfinite(ref) & (ref != 0)
    rtol = {'float64': 1e-15, 'float32': 1e-6, 'float16': 1e-3}[dtype]
    np.testing.assert_allclose(ours[fin].astype(float), ref[fin].astype(float), rtol=rtol,
                               atol=0)
    # parity and the values torch documents at the ends
    if name in ('i0', 'i0e'):
        np.testing.assert_array_equal(ours[x == 0], 1.0 if dtype != 'float32' else ref[x == 0])
    else:
        assert (ours[x == 0] == 0).all() and not np.signbit(ours[x == 0]).any()
    if name in ('i0e', 'i1e'):
        assert ours[x == np.inf][0] == 0 and ours[x == -np.inf][0] == 0
    # non-contiguous and multi-dimensional input, and a 0-d tensor
    # (float16 is computed in float32, as torch; torch's half i0e is 1 ulp off at times)
    y = x[:4000].reshape(40, 100)[:, ::3]
    np.testing.assert_allclose(np.asarray(fn(tape)(tape.tensor(y).t())._data),
                               fn(torch)(torch.from_numpy(np.ascontiguousarray(y)).t()).numpy(),
                               rtol=rtol, atol=0)
    np.testing.assert_allclose(np.asarray(fn(tape)(tape.tensor(x[5], dtype=dtype))._data),
                               fn(torch)(torch.tensor(x[5])).numpy(), rtol=rtol, atol=0)


def test_bessel_without_scipy(monkeypatch):
    """The Bessel functions and their derivatives need no SciPy (only NumPy and Numba):
    with ``import scipy`` failing and the Function cache cleared they still match torch."""
    import sys
    from tape import _functions_more as fm
    for mod in [m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, 'scipy', None)
    monkeypatch.setitem(sys.modules, 'scipy.special', None)
    saved = dict(fm._BESSEL)
    fm._BESSEL.clear()
    try:
        with pytest.raises(ImportError):
            import scipy.special  # noqa: F401
        x = np.array([-12.0, -3.5, -0.25, 0.0, 0.7, 2.0, 8.0, 9.5, 30.0])

        def prog(T, a):
            outs = [f(T)(a) for _, f in _BESSELS]
            return [sum((o * (i + 1)).sin().sum() for i, o in enumerate(outs))] + outs
        _both(prog, x, rtol=1e-12, atol=1e-14)
    finally:
        fm._BESSEL.clear()
        fm._BESSEL.update(saved)


def test_small_functions():
    a = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(np.asarray(tape.isin(tape.tensor([1, 2, 3]), 2)._data),
                                  torch.isin(torch.tensor([1, 2, 3]), 2).numpy())
    np.testing.assert_array_equal(
        np.asarray(tape.isin(tape.tensor([[1, 5], [3, 4]]), tape.tensor([4, 1]),
                             invert=True)._data),
        torch.isin(torch.tensor([[1, 5], [3, 4]]), torch.tensor([4, 1]), invert=True).numpy())
    assert bool(tape.isin(2, tape.tensor([1, 2]))) is True
    np.testing.assert_array_equal(
        np.asarray(tape.nextafter(tape.tensor(a), tape.tensor([0.0, 3.0, 3.0, 5.0]))._data),
        torch.nextafter(torch.tensor(a), torch.tensor([0.0, 3.0, 3.0, 5.0])).numpy())
    assert tape.is_nonzero(tape.tensor([[0.5]])) is True
    assert tape.tensor([0.0]).is_nonzero() is False
    _same_error(lambda T: T.is_nonzero(T.tensor([])))
    _same_error(lambda T: T.is_nonzero(T.tensor([1, 2])))
    for T in (torch, tape):
        r = T.unravel_index(T.tensor([[4, -1], [6, 0]]), (2, 3))
        assert len(r) == 2
    t1 = torch.unravel_index(torch.tensor([[4, -1], [6, 0]]), (2, 3))
    t2 = tape.unravel_index(tape.tensor([[4, -1], [6, 0]]), (2, 3))
    for u, v in zip(t1, t2):
        np.testing.assert_array_equal(np.asarray(v._data), u.numpy())
        assert v.dtype == tape.int64
    _same_error(lambda T: T.unravel_index(T.tensor(1.0), (2, 3)), TypeError)
    _same_error(lambda T: T.unravel_index(T.tensor(1), (-2, 3)), ValueError)

    def prog(T, x):
        n = T.narrow_copy(x, 1, 1, 2)
        return (n ** 2).sum() + x.narrow_copy(0, 0, 1).sum(), n
    _both(prog, np.arange(12.0).reshape(3, 4))


def test_inplace_methods():
    for T in (torch, tape):
        x = T.tensor([1.0, 2.0, 3.0], dtype=T.float64)
        x.ldexp_(T.tensor([1.0, 0.0, -1.0], dtype=T.float64))
        x.i0_()
        x.mvlgamma_(1)
        x.nextafter_(T.zeros(3, dtype=T.float64))
        if T is torch:
            ref = x
    _close(ref, x)
    y = tape.tensor([1.0, 2.0])
    assert tape.i0_(y) is y and tape.ldexp_(y, tape.tensor([1.0, 1.0])) is y
    _close(torch.i0(torch.tensor([1.0, 2.0])) * 2, y, rtol=1e-6)


def test_range():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        for args, kw in [((1, 4), {}), ((0, 1, 0.3), {}), ((1, 4), {'dtype': tape.int64}),
                         ((5, 1, -2), {})]:
            kw2 = {'dtype': torch.int64} if kw else {}
            r1, r2 = torch.range(*args, **kw2), tape.range(*args, **kw)
            _close(r1, r2)
            assert str(r2.dtype) == str(r1.dtype).replace('torch.', '')
    assert len(w) == 8 and all(issubclass(x.category, UserWarning) for x in w)
    assert str(w[1].message) == str(w[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _same_error(lambda T: T.range(5), TypeError)
        _same_error(lambda T: T.range(1, 4, 0))
    # the package's own code keeps Python's range
    assert tape.zeros(2, 3).T.shape == (3, 2)


def test_deprecation_warnings_once():
    from tape import _functions_more as fm
    A = tape.eye(3, dtype=tape.float64) + 0.1
    b = tape.ones(3, 1, dtype=tape.float64)
    calls = {'cholesky': lambda: tape.cholesky(A @ A.mT),
             'triangular_solve': lambda: tape.triangular_solve(b, A),
             'lu': lambda: tape.lu(A), 'chain_matmul': lambda: tape.chain_matmul(A, A),
             'lu_solve': lambda: tape.lu_solve(b, *tape.linalg.lu_factor(A))}
    for key, f in calls.items():
        fm._WARNED.discard(key)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            f()
            f()
        assert len(w) == 1 and issubclass(w[0].category, UserWarning)
        assert str(w[0].message) == fm._DEPRECATED[key]
        assert str(w[0].message).startswith(f'torch.{key} is deprecated')


def test_bessel_node_names_are_torchs():
    for name in ('i0', 'special.i0e', 'special.i1', 'special.i1e'):
        got = []
        for lib in (tape, torch):
            fn = lib
            for part in name.split('.'):
                fn = getattr(fn, part)
            got.append(fn(lib.tensor([0.5, 1.0], requires_grad=True)).grad_fn.name())
        assert got[0] == got[1], name
