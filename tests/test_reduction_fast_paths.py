"""The float32 fast paths of sum/mean (lane kernel over the last axis or all
elements), the one-pass 2-norm and the cached dim handling of reductions,
against PyTorch: values, gradients, create_graph, keepdim, tuple dims, empty,
NaN/inf, non-contiguous inputs and float64 (NumPy's path)."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

SHAPES = [(32, 10), (64, 256), (256, 1024), (3, 5, 300), (5000,), (2, 4, 8, 70)]


def _pair(shape, dtype=np.float32, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True))


def _close(a, b, dtype=np.float32):
    a = np.asarray(a.detach().numpy() if hasattr(a, 'detach') else a)
    b = b.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a, b, equal_nan=True, **tol)


def _dims_for(nd):
    out = [None, ()]
    for k in range(nd):
        out += [k, k - nd, (k,)]
    if nd > 1:
        out += [(0, nd - 1), tuple(range(nd)), (nd - 1, 0)]
    return out


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('op', ['sum', 'mean'])
def test_sum_mean_all_dims(op, shape, dtype):
    for dim in _dims_for(len(shape)):
        for keepdim in (False, True):
            a, b = _pair(shape, dtype)
            if dim is None:
                ya = getattr(a, op)() if not keepdim else getattr(a, op)(dim=None, keepdim=True)
                yb = getattr(b, op)() if not keepdim else \
                    getattr(b, op)(dim=tuple(range(len(shape))), keepdim=True)
            else:
                ya = getattr(a, op)(dim, keepdim=keepdim)
                yb = getattr(b, op)(dim, keepdim=keepdim)
            _close(ya, yb, dtype)
            g = np.random.default_rng(1).standard_normal(yb.shape).astype(dtype)
            ya.backward(tape.tensor(g))
            yb.backward(torch.tensor(g))
            _close(a.grad, b.grad, dtype)


@pytest.mark.parametrize('op', ['sum', 'mean'])
def test_nan_inf_and_noncontiguous(op):
    x = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    x[3, 7] = np.nan
    x[5, 1] = np.inf
    x[6, 2], x[6, 3] = np.inf, -np.inf
    x[9, :] = 3e38          # overflows float32, as in PyTorch
    for arr in (x, x.T, x[:, ::2], x[::2]):
        ya = getattr(tape.tensor(arr), op)(-1)
        yb = getattr(torch.tensor(np.ascontiguousarray(arr)), op)(-1)
        _close(ya, yb)
        _close(getattr(tape.tensor(arr), op)(), getattr(torch.tensor(np.ascontiguousarray(arr)),
                                                          op)())


def test_empty_and_zero_dim():
    for shape in [(0, 4096), (4096, 0), (0,), ()]:
        x = np.zeros(shape, np.float32)
        for op in ('sum', 'mean'):
            _close(getattr(tape.tensor(x), op)(), getattr(torch.tensor(x), op)())
            if len(shape):
                _close(getattr(tape.tensor(x), op)(-1), getattr(torch.tensor(x), op)(-1))
    _close(tape.tensor(np.float32(3)).sum(0), torch.tensor(np.float32(3)).sum(0))


def test_dtype_argument_and_errors():
    x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    _close(tape.tensor(x).sum(1, dtype=tape.float64), torch.tensor(x).sum(1, dtype=torch.float64),
           np.float64)
    with pytest.raises(TypeError):
        tape.tensor(x).sum((1.0,))
    with pytest.raises(TypeError):
        tape.tensor(x).sum(1.0)
    with pytest.raises(RuntimeError, match='multiple times'):
        tape.tensor(x).sum((1, 1))
    with pytest.raises(IndexError):
        tape.tensor(x).sum(2)
    xi = tape.tensor(np.ones((64, 256), np.int64))
    with pytest.raises(RuntimeError, match='could not infer output dtype'):
        xi.mean(1)
    assert xi.sum(1).dtype == tape.int64


@pytest.mark.parametrize('shape', SHAPES + [(1,)])
@pytest.mark.parametrize('keepdim', [False, True])
def test_norm_one_pass(shape, keepdim):
    a, b = _pair(shape)
    ya = a.norm(dim=None, keepdim=keepdim) if keepdim else a.norm()
    yb = torch.linalg.vector_norm(b, keepdim=True) if keepdim else b.norm()
    _close(ya, yb)
    ya.backward(tape.ones_like(ya) * 0.5)
    yb.backward(torch.ones_like(yb) * 0.5)
    _close(a.grad, b.grad)


def test_norm_zero_nan_noncontiguous_and_nograd():
    for x in (np.zeros((64, 256), np.float32), np.full((8, 700), np.nan, np.float32)):
        a, b = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = a.norm(), b.norm()
        _close(ya, yb)
        ya.backward()
        yb.backward()
        _close(a.grad, b.grad)
    x = np.random.default_rng(4).standard_normal((256, 64)).astype(np.float32)
    _close(tape.tensor(x).T.norm(), torch.tensor(x).T.norm())
    _close(tape.tensor(x).norm(), torch.tensor(x).norm())
    with tape.no_grad():
        a = tape.tensor(x, requires_grad=True)
        assert not a.norm().requires_grad


def test_norm_create_graph():
    a, b = _pair((64, 256))
    ga, = tape.autograd.grad(a.norm() ** 2, a, create_graph=True)
    gb, = torch.autograd.grad(b.norm() ** 2, b, create_graph=True)
    _close(ga, gb)
    (ga * ga).sum().backward()
    (gb * gb).sum().backward()
    _close(a.grad, b.grad)


def test_mean_create_graph():
    a, b = _pair((64, 256))
    ga, = tape.autograd.grad((a.mean(1) ** 2).sum(), a, create_graph=True)
    gb, = torch.autograd.grad((b.mean(1) ** 2).sum(), b, create_graph=True)
    _close(ga, gb)
    ga.sum().backward()
    gb.sum().backward()
    _close(a.grad, b.grad)


@pytest.mark.parametrize('shape', [(32, 10), (64, 256)])
def test_var_std_mse(shape):
    a, b = _pair(shape)
    for f in (lambda x: x.var(1), lambda x: x.std(0), lambda x: x.var(),
              lambda x: x.var((0, 1), keepdim=True, correction=0)):
        a.grad = None
        b.grad = None
        ya, yb = f(a), f(b)
        _close(ya, yb)
        ya.sum().backward()
        yb.sum().backward()
        _close(a.grad, b.grad)
    c, d = _pair(shape, seed=5)
    ya = tape.nn.functional.mse_loss(a, c)
    yb = torch.nn.functional.mse_loss(b, d)
    _close(ya, yb)


@pytest.mark.parametrize('f', [lambda x: x.sum(-1), lambda x: x.mean((0, 1)),
                               lambda x: x.norm(), lambda x: x.mean(),
                               lambda x: x.var(1)])
def test_float64_gradcheck(f):
    x = tape.tensor(np.random.default_rng(6).standard_normal((6, 700)), requires_grad=True)
    assert tape.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-5)
