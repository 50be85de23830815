"""tape.linalg / tape.special against PyTorch (the seventh hunt).  Each test pins a
discrepancy that was fixed:

- linalg.inv of an (n, n, n) batch returned one (n, n) matrix: solve read the
  identity as a batch of vectors (it matches A.shape[:-1]); solve_triangular,
  cholesky_solve and triangular_solve read a (n, k) B beside an (n, n, n) A the
  same wrong way.  linalg.solve(left=False) with a vector B raises as PyTorch's.
- inv, solve, det, slogdet, logdet, inv_ex, solve_ex, lu_solve of an integer
  matrix raise PyTorch's RuntimeError (inv and solve returned truncated
  integers), of a float16 one PyTorch's RuntimeError or NotImplementedError
  (not NumPy's TypeError); solve_triangular, triangular_solve, cholesky_solve and
  cholesky_inverse raise its NotImplementedError; cholesky_solve's and
  triangular_solve's shape checks (a 1-D b, mismatched sizes) and
  cholesky_inverse's are PyTorch's.
- logdet with a negative determinant: NaN with no gradient (PyTorch's where),
  not log|det|'s gradient.
- linalg.qr is differentiable for wide matrices (nrows < ncols), as in PyTorch.
- linalg.householder_product (missing), differentiable.
- linalg.vector_norm(ord=0): the gradient is None (PyTorch's), not zeros.
- linalg.norm with len(dim) not in (1, 2), matrix_norm with equal or
  out-of-range dims, vector_norm with a str ord, linalg.cross with mismatched
  ndims or a dim of the wrong length before broadcasting, pinv / matrix_rank
  with hermitian=True on a non-square A: PyTorch's exception types and messages.
- linalg.pinv(hermitian=True) reads A's lower triangle only, as PyTorch's eigh;
  pinv takes Tensor atol / rtol (NotImplementedError) and the older overload's
  rcond (positional too); matrix_rank's Tensor atol of a batch raised
  ValueError, and it takes tol and hermitian positionally.
- empty inputs: matrix_norm's max-type orders (2, 1, inf) give 0 and its
  min-type ones raise amin's IndexError, as PyTorch's; vector_norm of order inf
  or < 0 over an empty dim raises PyTorch's RuntimeError (-1 gave inf);
  lstsq, lu, lu_factor of empty matrices (a reshape(-1, ...) raised ValueError).
- out=: the linalg functions (and torch.cholesky, cholesky_solve,
  cholesky_inverse, lu_solve, triangular_solve, svd, lu, lu_unpack, chain_matmul,
  i0, special.i0e / i1 / i1e / multigammaln) declared out= but left it untouched;
  linalg.cross / multi_dot / vector_norm / matrix_norm / norm, tensordot and the
  special functions (but softmax, log_softmax, sinc) did not take it.
- triangular_solve's cloned_coefficient is A broadcast to the batch shape.
- smaller checks as PyTorch's: tensorsolve's out-of-range dims (wrapped
  silently), eigh / eigvalsh UPLO in lower case (refused), svd / svdvals
  driver= on the CPU (ignored), lu_solve's int64 pivots message, a 0-d tau,
  matrix_power of a 1-D tensor, polygamma with a fractional n (RuntimeError
  about a negative n), special.ndtr / log_ndtr / entr of a non-Tensor.
- special.xlog1py: 0 (not NaN) where x == 0 and y < -1; an integer tensor beside
  a float scalar no longer truncates the scalar; shapes that do not broadcast
  raise RuntimeError; two numbers raise TypeError.
- special.entr's gradient is -(1 + log x) everywhere (inf at 0, NaN below 0,
  -inf at inf), as PyTorch's, not 0 off x > 0.
- special.log_ndtr in float32: -inf (and an inf gradient) for -20 < x < -14,
  where float32's ndtr underflows, and an -inf second derivative from x = -10:
  now computed in float64 and cast back.
- special.logit's gradient at exactly 0 and 1 is inf (was NaN).
- special.i1 / i1e: the gradient is 1/2 (second derivative 0) for |x| <= eps,
  PyTorch's mask (i1e gave -inf for a subnormal x).
"""
import numpy as np
import pytest

import tape


def _torch():
    return pytest.importorskip('torch')


def _run(lib, fn, arrays, grad=True, create_graph=False):
    xs = [lib.tensor(a, requires_grad=grad) for a in arrays]
    out = fn(lib, *xs)
    outs = list(out) if isinstance(out, tuple) else [out]
    vals = [o.detach().numpy() for o in outs]
    if not grad:
        return vals, None
    weights = [lib.tensor(np.cos(np.arange(o.numel()) + 1.0).reshape(tuple(o.shape)),
                          dtype=o.dtype) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    gs = lib.autograd.grad(loss, xs, allow_unused=True, create_graph=create_graph)
    if create_graph:
        hs = lib.autograd.grad(sum((g * g).sum() for g in gs if g is not None), xs,
                               allow_unused=True)
        return vals, [None if g is None else g.detach().numpy() for g in gs + hs]
    return vals, [None if g is None else g.numpy() for g in gs]


def _same(fn, *arrays, grad=True, create_graph=False, rtol=1e-7, atol=1e-9):
    torch = _torch()
    vt, gt = _run(torch, fn, arrays, grad, create_graph)
    va, ga = _run(tape, fn, arrays, grad, create_graph)
    assert len(vt) == len(va)
    for x, y in zip(vt, va):
        assert x.shape == y.shape
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, equal_nan=True)
    for x, y in zip(gt or [], ga or []):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, equal_nan=True)


def _raises_like(fn):
    """fn(tape) raises what fn(torch) raises: the same builtin type, and a message
    that holds PyTorch's (tape's may add the op's name and the shapes)."""
    torch = _torch()
    with pytest.raises(Exception) as et:
        fn(torch)
    want = next(c for c in type(et.value).__mro__ if c.__module__ == 'builtins')
    with pytest.raises(want) as ea:
        fn(tape)
    assert str(et.value).split('\n')[0] in str(ea.value).split('\n')[0]


RNG = np.random.default_rng(7)


def _tri(shape, upper=True):
    a = RNG.standard_normal(shape)
    a = np.triu(a) if upper else np.tril(a)
    return a + 3 * np.eye(shape[-1])


# ---------------------------------------------------------------- batch vs vector
def test_inv_of_n_by_n_by_n_batch():
    a = RNG.standard_normal((2, 2, 2)) + 2 * np.eye(2)
    _same(lambda m, x: m.linalg.inv(x), a, create_graph=True)
    _same(lambda m, x: m.inverse(x), RNG.standard_normal((3, 3, 3)) + 3 * np.eye(3))


def test_det_and_slogdet_gradients_of_n_by_n_by_n_batch():
    # their backward takes inv(A)
    a = RNG.standard_normal((2, 2, 2)) + 2 * np.eye(2)
    _same(lambda m, x: m.linalg.det(x), a, create_graph=True)
    _same(lambda m, x: m.linalg.slogdet(x)[1], a)


@pytest.mark.parametrize('left', [True, False])
@pytest.mark.parametrize('upper', [True, False])
def test_solve_triangular_matrix_rhs_matching_batch(left, upper):
    _same(lambda m, a, b: m.linalg.solve_triangular(a, b, upper=upper, left=left),
          _tri((2, 2, 2), upper), RNG.standard_normal((2, 2)))


def test_triangular_solve_and_cholesky_solve_matrix_rhs_matching_batch():
    import warnings
    a = _tri((2, 2, 2))
    s = a @ np.swapaxes(a, -1, -2)
    L = np.linalg.cholesky(s)
    b = RNG.standard_normal((2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _same(lambda m, x, y: m.triangular_solve(x, y)[0], b, a)
        _same(lambda m, x, y: m.cholesky_solve(x, y), b, L)


def test_solve_left_false_vector_rhs_raises():
    a = np.eye(2) + 1.0
    for bshape in ((2,), (2, 2)):
        _raises_like(lambda m: m.linalg.solve(m.tensor(a if len(bshape) == 1 else
                                                       np.stack([a, a])),
                                              m.ones(*bshape, dtype=m.float64), left=False))
    _same(lambda m, x, y: m.linalg.solve(x, y, left=False), a, RNG.standard_normal((3, 2)))


# ---------------------------------------------------------------- dtypes and checks
@pytest.mark.parametrize('name', ['inv', 'det', 'slogdet', 'solve', 'inv_ex', 'solve_ex',
                                  'logdet', 'matrix_power', 'tensorinv'])
def test_integer_matrix_raises_runtime_error(name):
    calls = {
        'inv': lambda m, a: m.linalg.inv(a), 'det': lambda m, a: m.linalg.det(a),
        'slogdet': lambda m, a: m.linalg.slogdet(a), 'solve': lambda m, a: m.linalg.solve(a, a),
        'inv_ex': lambda m, a: m.linalg.inv_ex(a), 'solve_ex': lambda m, a: m.linalg.solve_ex(a, a),
        'logdet': lambda m, a: m.logdet(a),
        'matrix_power': lambda m, a: m.linalg.matrix_power(a, -1),
        'tensorinv': lambda m, a: m.linalg.tensorinv(a, 1)}
    _raises_like(lambda m: calls[name](m, m.tensor([[2, 1], [1, 3]])))


@pytest.mark.parametrize('name', ['inv', 'det', 'slogdet', 'solve', 'inv_ex', 'solve_ex',
                                  'logdet', 'lu_solve'])
def test_float16_matrix_raises_like_pytorch(name):
    calls = {
        'inv': lambda m, a: m.linalg.inv(a), 'det': lambda m, a: m.linalg.det(a),
        'slogdet': lambda m, a: m.linalg.slogdet(a), 'solve': lambda m, a: m.linalg.solve(a, a),
        'inv_ex': lambda m, a: m.linalg.inv_ex(a), 'solve_ex': lambda m, a: m.linalg.solve_ex(a, a),
        'logdet': lambda m, a: m.logdet(a),
        'lu_solve': lambda m, a: m.linalg.lu_solve(a, m.tensor([1, 2], dtype=m.int32), a)}
    _raises_like(lambda m: calls[name](m, m.eye(2, dtype=m.float16)))


def test_integer_lu_solve_raises_runtime_error():
    _raises_like(lambda m: m.linalg.lu_solve(m.tensor([[2, 1], [1, 3]]),
                                             m.tensor([1, 2], dtype=m.int32),
                                             m.tensor([[1], [2]])))


def test_integer_triangular_and_cholesky_solvers_raise_not_implemented():
    import warnings
    i = [[2, 0], [1, 3]]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _raises_like(lambda m: m.linalg.solve_triangular(m.tensor(i), m.tensor(i), upper=False))
        _raises_like(lambda m: m.triangular_solve(m.tensor(i), m.tensor(i)))
        _raises_like(lambda m: m.cholesky_solve(m.tensor(i), m.tensor(i)))
        _raises_like(lambda m: m.cholesky_inverse(m.tensor(i)))


def test_solver_shape_errors():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _raises_like(lambda m: m.cholesky_solve(m.ones(3), m.eye(3)))
        _raises_like(lambda m: m.cholesky_solve(m.ones(2, 1), m.eye(3)))
        _raises_like(lambda m: m.cholesky_solve(m.ones(3, 1), m.ones(2, 3)))
        _raises_like(lambda m: m.cholesky_solve(m.ones(3, 1), m.eye(3, dtype=m.float64)))
        _raises_like(lambda m: m.cholesky_inverse(m.ones(3)))
        _raises_like(lambda m: m.cholesky_inverse(m.ones(2, 3)))
        _raises_like(lambda m: m.triangular_solve(m.ones(2, 1), m.eye(3)))
        _raises_like(lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(2, 1), upper=True))
        _raises_like(lambda m: m.linalg.solve_triangular(m.eye(3), m.ones(3, 2), upper=True,
                                                         left=False))
        _raises_like(lambda m: m.linalg.solve(m.eye(3), m.ones(4, 1)))
        _raises_like(lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(3)), m.ones(2, 1)))
        _raises_like(lambda m: m.logdet(m.ones(2, 3)))


def test_norm_dim_errors():
    _raises_like(lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=(0, 1, 2)))
    _raises_like(lambda m: m.linalg.norm(m.ones(2, 2, 2), 2, dim=[0, 1, 2]))
    _raises_like(lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=()))
    _raises_like(lambda m: m.linalg.norm(m.ones(3, 3), 'fro', dim=0))
    _raises_like(lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=(0, -2)))
    _raises_like(lambda m: m.linalg.matrix_norm(m.ones(3, 3), dim=(0, 2)))
    _raises_like(lambda m: m.linalg.matrix_norm(m.ones(2, 3, 4), 'nuc', dim=(0,)))
    _raises_like(lambda m: m.linalg.vector_norm(m.ones(3), 'fro'))


def test_cross_errors():
    _raises_like(lambda m: m.linalg.cross(m.ones(3), m.ones(2, 3)))
    _raises_like(lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3, 3)))
    _raises_like(lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3, 3), dim=0))
    _raises_like(lambda m: m.linalg.cross(m.ones(2, 3), m.ones(2, 3), dim=5))
    _same(lambda m, x, y: m.linalg.cross(x, y), RNG.standard_normal((1, 3)),
          RNG.standard_normal((4, 3)))


def test_hermitian_non_square_raises():
    _raises_like(lambda m: m.linalg.pinv(m.ones(2, 3), hermitian=True))
    _raises_like(lambda m: m.linalg.matrix_rank(m.ones(2, 3), hermitian=True))


# ---------------------------------------------------------------- gradients
def test_logdet_negative_determinant_has_no_gradient():
    a = np.array([[[1., 2.], [3., 1.]], [[2., 1.], [1., 3.]]])      # det -5 and 5
    _same(lambda m, x: m.logdet(x), a)
    _same(lambda m, x: m.logdet(x), a[0])
    _same(lambda m, x: x.logdet(), a[1], create_graph=True)


@pytest.mark.parametrize('shape', [(3, 5), (2, 3, 4), (2, 2, 3)])
@pytest.mark.parametrize('mode', ['reduced', 'complete'])
def test_qr_wide_gradient(shape, mode):
    a = RNG.standard_normal(shape)
    _same(lambda m, x: m.linalg.qr(x, mode), a, create_graph=True, rtol=1e-6, atol=1e-8)
    _same(lambda m, x: m.linalg.qr(x, mode).R, a, rtol=1e-6, atol=1e-8)
    _same(lambda m, x: m.linalg.qr(x, mode).Q, a, rtol=1e-6, atol=1e-8)


def test_qr_wide_gradcheck():
    x = tape.tensor(RNG.standard_normal((3, 5)), requires_grad=True)

    def f(a):
        q, r = tape.linalg.qr(a)
        return q.sum() + (r * r).sum()
    assert tape.autograd.gradcheck(f, (x,))
    assert tape.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize('shape,tshape', [((4, 3), (2,)), ((4, 3), (3,)), ((2, 5, 3), (2, 3)),
                                          ((3, 3), (3,))])
def test_householder_product(shape, tshape):
    _same(lambda m, a, t: m.linalg.householder_product(a, t), RNG.standard_normal(shape),
          RNG.standard_normal(tshape), create_graph=True, rtol=1e-6, atol=1e-9)


def test_householder_product_of_geqrf_is_qr():
    a = RNG.standard_normal((5, 3))
    torch = _torch()
    qr, tau = torch.geqrf(torch.tensor(a))
    q = tape.linalg.householder_product(tape.tensor(qr.numpy()), tape.tensor(tau.numpy()))
    np.testing.assert_allclose(q.numpy(), torch.linalg.qr(torch.tensor(a)).Q.numpy(),
                               atol=1e-12)


def test_householder_product_errors():
    _raises_like(lambda m: m.linalg.householder_product(m.ones(3, 4), m.ones(2)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(4, 3), m.ones(4)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(4, 3), m.ones(2, 2)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(2, 4, 3), m.ones(3, 2)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(4), m.ones(1)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(4, 3),
                                                        m.ones(2, dtype=m.float64)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(4, 3, dtype=m.int64),
                                                        m.ones(2, dtype=m.int64)))


def test_vector_norm_ord_zero_has_no_gradient():
    torch = _torch()
    for lib in (torch, tape):
        x = lib.tensor([[1., 0., 2.], [0., 0., 3.]], requires_grad=True)
        y = lib.linalg.vector_norm(x, 0, dim=1)
        assert y.requires_grad
        (y.sum() + x.sum()).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))   # x.sum()'s only
        x.grad = None
        lib.norm(x, 0).backward()
        assert x.grad is None
        np.testing.assert_array_equal(y.detach().numpy(), [2., 1.])


# ---------------------------------------------------------------- special
def test_xlog1py_zero_times_log1p_below_minus_one():
    x = np.array([0., 0., 0., 1., -1., 0., 2.])
    y = np.array([-2., -1., -5., 0., 2., 3., -0.5])
    _same(lambda m, a, b: m.special.xlog1py(a, b), x, y)
    _same(lambda m, a, b: m.special.xlog1py(a, b), x.astype(np.float32), y.astype(np.float32),
          rtol=1e-6)


def test_xlog1py_integer_tensor_and_float_scalar():
    torch = _torch()
    for args in ((np.array([1, 2]), 2.5), (2.5, np.array([1, 2])),
                 (np.array([1, 2]), np.array([1., 2.]))):
        got, want = (lib.special.xlog1py(*[lib.tensor(a) if isinstance(a, np.ndarray) else a
                                           for a in args]) for lib in (tape, torch))
        assert str(got.dtype).split('.')[-1] == str(want.dtype).split('.')[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_xlog1py_errors():
    _raises_like(lambda m: m.special.xlog1py(m.ones(2), m.ones(3)))
    torch = _torch()
    with pytest.raises(TypeError):
        torch.special.xlog1py(1.0, 2.0)
    with pytest.raises(TypeError):
        tape.special.xlog1py(1.0, 2.0)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_entr_gradient_everywhere(dtype):
    x = np.array([-1., 0., -0., 0.5, 2., np.inf, np.nan], dtype=dtype)
    _same(lambda m, a: m.special.entr(a), x, create_graph=True, rtol=1e-6)
    _same(lambda m, a: m.special.entr(a), np.array([1, 0, 3]), grad=False)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_logit_gradient_at_zero_and_one(dtype):
    x = np.array([0., 1., -0., 0.25, 0.5, 1.5, -0.5], dtype=dtype)
    _same(lambda m, a: m.special.logit(a), x, rtol=1e-6)
    _same(lambda m, a: m.logit(a), x, rtol=1e-6)


@pytest.mark.parametrize('dtype,tiny', [(np.float64, 5e-320), (np.float64, 1e-17),
                                        (np.float32, 1e-40), (np.float32, 1e-8)])
def test_i1_i1e_gradient_near_zero(dtype, tiny):
    x = np.array([tiny, -tiny, 0., 2., -3.], dtype=dtype)
    _same(lambda m, a: m.special.i1e(a), x, create_graph=True, rtol=1e-5, atol=1e-7)
    _same(lambda m, a: m.special.i1(a), x, create_graph=True, rtol=1e-5, atol=1e-7)


def test_pinv_hermitian_reads_the_lower_triangle():
    a = np.array([[2., 5.], [1., -3.]])
    _same(lambda m, x: m.linalg.pinv(x, hermitian=True), a, grad=False)
    s = np.array([[[2., 1.], [1., -3.]], [[4., 1.], [1., 2.]]])
    _same(lambda m, x: m.linalg.pinv(x, hermitian=True), s)


@pytest.mark.parametrize('shape', [(2, 3, 0), (2, 0, 3), (0, 0)])
@pytest.mark.parametrize('ord', [1, -1, 2, -2, float('inf'), float('-inf'), 'fro', 'nuc'])
def test_matrix_norm_of_empty_matrices(shape, ord):
    torch = _torch()
    try:
        want = torch.linalg.matrix_norm(torch.zeros(*shape), ord)
    except IndexError:
        with pytest.raises(IndexError):
            tape.linalg.matrix_norm(tape.zeros(*shape), ord)
        return
    got = tape.linalg.matrix_norm(tape.zeros(*shape), ord)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_vector_norm_without_identity_over_empty_dims():
    for ord, dim in [(float('inf'), -2), (-1, (1, 0)), (-0.5, None), (float('-inf'), None),
                     (-2, (0,)), (-1, ())]:
        _raises_like(lambda m: m.linalg.vector_norm(m.zeros(0, 3), ord, dim=dim))
    for ord, dim in [(float('inf'), 1), (0, 0), (2, 0), (-1, 1)]:
        _same(lambda m, x: m.linalg.vector_norm(x, ord, dim=dim), np.zeros((0, 3)), grad=False)


@pytest.mark.parametrize('fn', [
    lambda m: m.linalg.lstsq(m.zeros(0, 3), m.zeros(0, 2)),
    lambda m: m.linalg.lstsq(m.zeros(2, 3, 0), m.zeros(2, 3, 2)),
    lambda m: m.linalg.lu(m.zeros(3, 0)),
    lambda m: m.linalg.lu(m.zeros(0, 2, 3)),
    lambda m: m.linalg.lu_factor(m.zeros(2, 0, 3)),
    lambda m: m.linalg.lu_factor_ex(m.zeros(0, 0))])
def test_empty_lstsq_and_lu(fn):
    torch = _torch()
    want, got = fn(torch), fn(tape)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())


_A = np.array([[4., 1., 0.], [1., 3., 1.], [0., 1., 2.]])
_OUT_CASES = {
    'linalg.inv': lambda m, a, out: m.linalg.inv(a, out=out),
    'linalg.det': lambda m, a, out: m.linalg.det(a, out=out),
    'linalg.solve': lambda m, a, out: m.linalg.solve(a, a[:, :2], out=out),
    'linalg.cholesky': lambda m, a, out: m.linalg.cholesky(a, out=out),
    'linalg.svdvals': lambda m, a, out: m.linalg.svdvals(a, out=out),
    'linalg.eigvalsh': lambda m, a, out: m.linalg.eigvalsh(a, out=out),
    'linalg.matrix_power': lambda m, a, out: m.linalg.matrix_power(a, 3, out=out),
    'linalg.pinv': lambda m, a, out: m.linalg.pinv(a, out=out),
    'linalg.solve_triangular': lambda m, a, out: m.linalg.solve_triangular(a, a, upper=True,
                                                                           out=out),
    'linalg.lu_solve': lambda m, a, out: m.linalg.lu_solve(*m.linalg.lu_factor(a), a, out=out),
    'linalg.vecdot': lambda m, a, out: m.linalg.vecdot(a, a, out=out),
    'linalg.cond': lambda m, a, out: m.linalg.cond(a, out=out),
    'linalg.tensorinv': lambda m, a, out: m.linalg.tensorinv(a, 1, out=out),
    'linalg.householder_product': lambda m, a, out: m.linalg.householder_product(a, a[0],
                                                                                 out=out),
    'linalg.cross': lambda m, a, out: m.linalg.cross(a, a.flip(0), out=out),
    'linalg.multi_dot': lambda m, a, out: m.linalg.multi_dot([a, a, a], out=out),
    'linalg.vector_norm': lambda m, a, out: m.linalg.vector_norm(a, 3, dim=0, out=out),
    'linalg.matrix_norm': lambda m, a, out: m.linalg.matrix_norm(a, 'nuc', out=out),
    'linalg.norm': lambda m, a, out: m.linalg.norm(a, dim=1, out=out),
    'inverse': lambda m, a, out: m.inverse(a, out=out),
    'matrix_power': lambda m, a, out: m.matrix_power(a, 2, out=out),
    'tensordot': lambda m, a, out: m.tensordot(a, a, dims=([1], [0]), out=out),
    'cholesky_solve': lambda m, a, out: m.cholesky_solve(a, m.linalg.cholesky(a), out=out),
    'cholesky_inverse': lambda m, a, out: m.cholesky_inverse(m.linalg.cholesky(a), out=out),
    'lu_solve': lambda m, a, out: m.lu_solve(a, *m.linalg.lu_factor(a), out=out),
    'i0': lambda m, a, out: m.i0(a, out=out),
    'special.i1e': lambda m, a, out: m.special.i1e(a, out=out),
    'special.multigammaln': lambda m, a, out: m.special.multigammaln(a + 2, 2, out=out),
    'special.entr': lambda m, a, out: m.special.entr(a, out=out),
    'special.xlog1py': lambda m, a, out: m.special.xlog1py(a, a, out=out),
    'special.xlogy': lambda m, a, out: m.special.xlogy(a, a, out=out),
    'special.logit': lambda m, a, out: m.special.logit(a / 5, out=out),
    'special.ndtr': lambda m, a, out: m.special.ndtr(a, out=out),
    'special.log_ndtr': lambda m, a, out: m.special.log_ndtr(a, out=out),
    'special.erfinv': lambda m, a, out: m.special.erfinv(a / 5, out=out),
    'special.gammaln': lambda m, a, out: m.special.gammaln(a + 1, out=out),
    'special.digamma': lambda m, a, out: m.special.digamma(a + 1, out=out),
    'special.polygamma': lambda m, a, out: m.special.polygamma(2, a + 1, out=out),
    'special.logsumexp': lambda m, a, out: m.special.logsumexp(a, 0, out=out),
    'special.expit': lambda m, a, out: m.special.expit(a, out=out),
}


@pytest.mark.parametrize('name', sorted(_OUT_CASES))
def test_out_is_written(name):
    import warnings
    torch = _torch()
    fn = _OUT_CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        want = fn(torch, torch.tensor(_A), None)
        out = tape.empty(0, dtype=tape.float64)
        got = fn(tape, tape.tensor(_A), out)
    assert got is out
    assert tuple(out.shape) == tuple(want.shape)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_out_tuples_and_errors():
    s, la = tape.zeros(()), tape.zeros(())
    r = tape.linalg.slogdet(tape.tensor([[2., 0.], [0., 3.]]), out=(s, la))
    assert r.sign is s and r.logabsdet is la
    assert s.item() == 1.0 and abs(la.item() - np.log(6.0)) < 1e-6
    with pytest.raises(RuntimeError, match=r"out=\.\.\. arguments don't support automatic"):
        tape.linalg.inv(tape.eye(2, requires_grad=True), out=tape.empty(2, 2))
    _raises_like(lambda m: m.linalg.vector_norm(m.ones(2, requires_grad=True),
                                                out=m.empty(())))
    _raises_like(lambda m: m.special.entr(m.ones(2, requires_grad=True), out=m.empty(2)))


def test_triangular_solve_clones_the_broadcast_coefficient():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _same(lambda m, b, a: m.triangular_solve(b, a), RNG.standard_normal((1, 4, 3, 2)),
              _tri((2, 1, 3, 3)))


def test_deprecation_warnings_point_at_the_caller():
    import warnings
    from tape import _functions_more
    _functions_more._WARNED.discard('cholesky')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        tape.cholesky(tape.eye(2), out=tape.empty(2, 2))
    assert [x.filename for x in w] == [__file__]


def test_log_ndtr_float32_tail():
    torch = _torch()
    x = np.array([-100., -30., -19.9, -15., -14., -12., -10., -9.99, -5., 0., 5., 10.],
                 dtype=np.float32)
    got = []
    for lib, dt in ((tape, np.float32), (torch, np.float64)):
        t = lib.tensor(x.astype(dt), requires_grad=True)
        y = lib.special.log_ndtr(t)
        g, = lib.autograd.grad(y.sum(), t, create_graph=True)
        h, = lib.autograd.grad(g.sum(), t)
        got.append([y.detach().numpy(), g.detach().numpy(), h.numpy()])
    assert got[0][0].dtype == np.float32 and got[0][2].dtype == np.float32
    for mine, exact in zip(*got):          # PyTorch's float64 values, rounded
        np.testing.assert_allclose(mine, exact.astype(np.float32), rtol=2e-6, atol=1e-30)


def test_tensor_tolerances_and_older_overloads():
    a = RNG.standard_normal((2, 4, 4))
    _same(lambda m, x: m.linalg.matrix_rank(x, atol=m.tensor([0.5, 2.0], dtype=m.float64)),
          a, grad=False)
    _same(lambda m, x: m.linalg.matrix_rank(x, rtol=m.tensor(0.5, dtype=m.float64)), a,
          grad=False)
    _same(lambda m, x: m.linalg.matrix_rank(x, 0.5, True), a, grad=False)
    _same(lambda m, x: m.linalg.pinv(x, atol=m.tensor([0.5, 2.0], dtype=m.float64)), a)
    _same(lambda m, x: m.linalg.pinv(x, rtol=m.tensor(0.3, dtype=m.float64)), a)
    _same(lambda m, x: m.linalg.pinv(x, rcond=0.5), a)
    _same(lambda m, x: m.linalg.pinv(x, 0.5, True), a, grad=False)


def test_smaller_checks():
    a = RNG.standard_normal((3, 3))
    _raises_like(lambda m: m.linalg.tensorsolve(m.ones(2, 3, 6), m.ones(2, 3), dims=(5,)))
    _same(lambda m, x: m.linalg.eigvalsh(x, UPLO='u'), a)
    _same(lambda m, x: m.linalg.eigh(x, 'l').eigenvalues, a)
    _raises_like(lambda m: m.linalg.eigh(m.eye(2), UPLO='x'))
    _raises_like(lambda m: m.linalg.svd(m.eye(2), driver='gesvd'))
    _raises_like(lambda m: m.linalg.svdvals(m.eye(2), driver='gesvd'))
    _raises_like(lambda m: m.linalg.lu_solve(m.linalg.lu_factor(m.eye(3))[0],
                                             m.linalg.lu_factor(m.eye(3))[1].long(),
                                             m.ones(3, 1)))
    _raises_like(lambda m: m.linalg.householder_product(m.ones(3, 2), m.tensor(1.0)))
    _raises_like(lambda m: m.linalg.matrix_power(m.ones(3), 2))
    _raises_like(lambda m: m.polygamma(1.5, m.ones(2)))
    with pytest.raises(TypeError):
        tape.special.polygamma(1.5, tape.ones(2))
    _raises_like(lambda m: m.polygamma(-1, m.ones(2)))
    _same(lambda m, x: m.polygamma(m.tensor(2), x), np.array([0.5, 3.0]), create_graph=True)
    for name in ('ndtr', 'log_ndtr', 'entr'):
        _raises_like(lambda m: getattr(m.special, name)([1.0, 2.0]))
        _raises_like(lambda m: getattr(m.special, name)(1.0))
