"""softmax / log_softmax's fast path (tape/nn/_softmax.py, compiler/softmax_kernels.py):
the record made without Function.apply (arrays through the compiled sweep, the
gradient adopted as the leaf's .grad), the one-call float32 kernels with the
exp for arguments <= 0, at medium and large shapes; PyTorch as the oracle."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F

torch = pytest.importorskip('torch')
TF = torch.nn.functional

OPS = ['softmax', 'log_softmax']
TOL = {'float32': 2e-6, 'float64': 1e-12}
SHAPES = [(32, 10), (64, 64), (64, 127), (64, 128), (64, 256), (8, 4, 300), (256, 1024)]


def _close(a, b, tol, what=''):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                               equal_nan=True, err_msg=what)


def _both(op, x, g, dim=-1):
    xt = tape.tensor(x, requires_grad=True)
    yt = getattr(F, op)(xt, dim)
    yt.backward(tape.tensor(g))
    xT = torch.tensor(x, requires_grad=True)
    yT = getattr(TF, op)(xT, dim)
    yT.backward(torch.tensor(g))
    return (yt.detach().numpy(), xt.grad.numpy()), (yT.detach().numpy(), xT.grad.numpy())


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('shape', SHAPES)
def test_values_and_grads_match_torch(shape, op, dt):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 5).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    (y, gx), (yT, gxT) = _both(op, x, g)
    assert y.dtype == np.dtype(dt) and gx.dtype == np.dtype(dt)
    _close(y, yT, TOL[dt], f'{op} {shape}')
    _close(gx, gxT, 10 * TOL[dt], f'{op} grad {shape}')


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('c', [10, 64, 200, 1024])
def test_nan_and_inf_rows(c, op, dt):
    inf, nan = np.inf, np.nan
    x = np.random.default_rng(c).standard_normal((10, c)).astype(dt)
    x[0] = -inf                         # all -inf: NaN
    x[1, c // 2] = inf                  # a +inf: NaN
    x[2, c - 1] = nan                   # a NaN: NaN row
    x[3, :c - 1] = -inf                 # one finite entry: one-hot
    x[4, ::2] = -inf
    x[5] = 1e30
    x[6] = np.arange(c) * 50.0          # exps underflow (float32 subnormals)
    x[7, 0] = nan
    x[8] = -np.arange(c) * 0.9          # exps from 1 down through the subnormals
    g = np.random.default_rng(c + 1).standard_normal((10, c)).astype(dt)
    (y, gx), (yT, gxT) = _both(op, x, g)
    _close(y, yT, TOL[dt], f'{op} c={c}')
    _close(gx, gxT, 10 * TOL[dt], f'{op} grad c={c}')


@pytest.mark.parametrize('op', OPS)
def test_other_dims_and_non_contiguous(op):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 300)).astype(np.float32)
    for dim in (0, 1, -1):
        g = rng.standard_normal(x.shape).astype(np.float32)
        (y, gx), (yT, gxT) = _both(op, x, g, dim)
        _close(y, yT, TOL['float32'])
        _close(gx, gxT, 10 * TOL['float32'])
    xt = tape.tensor(x.T.copy(), requires_grad=True)
    xT = torch.tensor(x.T.copy(), requires_grad=True)
    y = getattr(F, op)(xt.t(), -1)          # a non-contiguous input
    yT = getattr(TF, op)(xT.t(), -1)
    _close(y.detach().numpy(), yT.detach().numpy(), TOL['float32'])
    gn = rng.standard_normal((300, 16)).astype(np.float32)
    y.backward(tape.tensor(gn).t())           # a non-contiguous gradient
    yT.backward(torch.tensor(gn).t())
    _close(xt.grad.numpy(), xT.grad.numpy(), 10 * TOL['float32'])


@pytest.mark.parametrize('op', OPS)
def test_grad_accumulates_and_is_not_shared(op):
    x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)
    g = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float32)
    xt = tape.tensor(x, requires_grad=True)
    getattr(F, op)(xt, -1).backward(tape.tensor(g))
    first = xt.grad.numpy().copy()
    getattr(F, op)(xt, -1).backward(tape.tensor(g))
    _close(xt.grad.numpy(), 2 * first, 1e-6)
    # through a loss: the gradient reaches the leaf through other records
    xt.grad = None
    y = getattr(F, op)(xt * 2.0, -1)
    (y * tape.tensor(g)).sum().backward()
    xT = torch.tensor(x, requires_grad=True)
    yT = getattr(TF, op)(xT * 2.0, -1)
    (yT * torch.tensor(g)).sum().backward()
    _close(xt.grad.numpy(), xT.grad.numpy(), 1e-5)


@pytest.mark.parametrize('op', OPS)
def test_float64_gradient_into_float32_output(op):
    """A float64 root over a float32 softmax: the sweep's float64 gradient is
    cast to the output's dtype first, as PyTorch's is."""
    x = np.random.default_rng(6).standard_normal((8, 200)).astype(np.float32)
    w = np.random.default_rng(7).standard_normal((8, 200))
    xt = tape.tensor(x, requires_grad=True)
    (getattr(F, op)(xt, -1).double() * tape.tensor(w)).sum().backward()
    xT = torch.tensor(x, requires_grad=True)
    (getattr(TF, op)(xT, -1).double() * torch.tensor(w)).sum().backward()
    assert xt.grad.dtype == tape.float32
    _close(xt.grad.numpy(), xT.grad.numpy(), 2e-5)


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('dt', ['float32', 'float64'])
def test_double_backward_matches_torch(op, dt):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 160)).astype(dt)
    g = rng.standard_normal((16, 160)).astype(dt)
    xt = tape.tensor(x, requires_grad=True)
    y = getattr(F, op)(xt, -1)
    gx, = tape.autograd.grad((y * tape.tensor(g)).sum(), xt, create_graph=True)
    (gx * gx).sum().backward()
    xT = torch.tensor(x, requires_grad=True)
    yT = getattr(TF, op)(xT, -1)
    gxT, = torch.autograd.grad((yT * torch.tensor(g)).sum(), xT, create_graph=True)
    (gxT * gxT).sum().backward()
    tol = 1e-4 if dt == 'float32' else 1e-10
    _close(gx.detach().numpy(), gxT.detach().numpy(), tol)
    _close(xt.grad.numpy(), xT.grad.numpy(), tol)


@pytest.mark.parametrize('op', OPS)
def test_record_semantics(op):
    x = tape.tensor(np.random.default_rng(9).standard_normal((4, 200)).astype(np.float32),
                    requires_grad=True)
    y = getattr(F, op)(x, -1)
    assert y.grad_fn.name() == ('SoftmaxBackward0' if op == 'softmax' else 'LogSoftmaxBackward0')
    assert y.requires_grad
    y.sum().backward()
    with pytest.raises(RuntimeError):
        y.sum().backward()                  # freed after the first backward
    # the output is saved: changing it in place stops the backward, as in PyTorch
    y = getattr(F, op)(x, -1)
    with tape.no_grad():
        y.mul_(2.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()
    # the input is not saved: changing it afterwards is allowed
    x2 = x.detach().clone().requires_grad_(True)
    h = x2 * 1.0
    y = getattr(F, op)(h, -1)
    with tape.no_grad():
        h.add_(1.0)
    y.sum().backward()
    # no graph: nothing recorded
    with tape.no_grad():
        assert getattr(F, op)(x, -1).grad_fn is None
    assert getattr(F, op)(x.detach(), -1).grad_fn is None


def test_exp_nonpos32_is_exp32():
    from numba import njit
    from compiler.softmax_kernels import _exp_nonpos32, exp32

    @njit
    def both(t, a, b):
        for j in range(t.size):
            a[j] = _exp_nonpos32(t[j])
            b[j] = exp32(t[j])
    t = np.concatenate([-np.logspace(-9, np.log10(120), 200001),
                        [0.0, -0.0, -np.inf, np.nan, -87.0, -103.9, -104.0, -104.1]]
                       ).astype(np.float32)
    a, b = np.empty_like(t), np.empty_like(t)
    both(t, a, b)
    np.testing.assert_array_equal(a, b)


def test_kernels_against_numpy_long_rows():
    import compiler.softmax_kernels as k
    rng = np.random.default_rng(10)
    for c in (64, 130, 1000):
        x = (rng.standard_normal((5, c)) * 4).astype(np.float32)
        xd = x.astype(np.float64)
        ref = np.exp(xd - xd.max(-1, keepdims=True))
        ref /= ref.sum(-1, keepdims=True)
        e = np.empty_like(x)
        k.softmax32(x, e, 1.0, False)
        _close(e, ref, 2e-6)
        z = np.empty_like(x)
        k.log_softmax32(x, z)
        _close(z, np.log(ref), 2e-6)
        g = rng.standard_normal((5, c)).astype(np.float32)
        gx = np.empty_like(x)
        k.log_softmax_backward32(z, g, gx)
        _close(gx, g - np.exp(z.astype(np.float64)) * g.sum(-1, keepdims=True), 2e-5)
