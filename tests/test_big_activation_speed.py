"""Large-tensor backward of activations, cumsum, cumprod and prod against PyTorch.

Covers the fast paths of tape/_big.py: fused kernels evaluated in float32 for
float32 runs (compiler/fuse.py, compiler/kernels32.py) and cumsum/cumprod
backward along the axis on the arrays themselves (compiler/cumgrad.py).
"""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}

ACTS = {
    'gelu': (lambda x: TF.gelu(x), lambda x: F.gelu(x)),
    'gelu_tanh': (lambda x: TF.gelu(x, approximate='tanh'), lambda x: F.gelu(x, approximate='tanh')),
    'silu': (lambda x: TF.silu(x), lambda x: F.silu(x)),
    'softplus': (lambda x: TF.softplus(x), lambda x: F.softplus(x)),
    'softplus_bt': (lambda x: TF.softplus(x, beta=2.0, threshold=3.0),
                    lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
    'elu': (lambda x: TF.elu(x, alpha=0.7), lambda x: F.elu(x, alpha=0.7)),
}


def _x(shape, dtype, seed=0, special=False):
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)
    if special:
        x.flat[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30]
    return x


def _check(a, t, dtype):
    t = t.detach().numpy()
    assert a.dtype == t.dtype
    np.testing.assert_allclose(a, t, equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', sorted(ACTS))
@pytest.mark.parametrize('shape', [(64, 256), (16385,)])
def test_activation_backward(name, dtype, shape):
    fa, ft = ACTS[name]
    xn = _x(shape, dtype)
    xt = torch.tensor(xn, requires_grad=True)
    ft(xt).sum().backward()
    for _ in range(3):                  # the second time on: a fused kernel
        xa = tape.tensor(xn, requires_grad=True)
        fa(xa).sum().backward()
        _check(xa.grad.numpy(), xt.grad, dtype)
    # a real (not broadcast) upstream gradient, and a chain with a multiply
    g = _x(shape, dtype, seed=1)
    xt = torch.tensor(xn, requires_grad=True)
    (ft(xt) * 0.5).backward(torch.tensor(g))
    for _ in range(3):
        xa = tape.tensor(xn, requires_grad=True)
        (fa(xa) * 0.5).backward(tape.tensor(g))
        _check(xa.grad.numpy(), xt.grad, dtype)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', sorted(ACTS))
def test_activation_nan_inf(name, dtype):
    fa, ft = ACTS[name]
    xn = _x((128, 130), dtype, special=True)
    xt = torch.tensor(xn, requires_grad=True)
    ft(xt).sum().backward()
    for _ in range(3):
        xa = tape.tensor(xn, requires_grad=True)
        fa(xa).sum().backward()
        a, t = xa.grad.numpy(), xt.grad.numpy()
        if name != 'elu':
            # (PyTorch's elu gradient at NaN is NaN in its vectorized loop and 1
            # in its scalar tail; tape's is 1.0 throughout)
            assert np.array_equal(np.isnan(a), np.isnan(t))
        ok = np.isfinite(t)
        np.testing.assert_allclose(a[ok], t[ok], **TOL[dtype])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('op', ['cumsum', 'cumprod', 'prod'])
@pytest.mark.parametrize('shape', [(64, 256), (16, 32, 40), (16400,)])
def test_cum_backward(op, dtype, shape):
    for dim in range(len(shape)):
        xn = _x(shape, dtype) * dtype(0.4) + dtype(1.0)
        if op != 'cumsum':
            xn.flat[::97] = 0
            xn.flat[5] = 0
        for mode in ('sum', 'grad'):
            xt = torch.tensor(xn, requires_grad=True)
            yt = getattr(xt, op)(dim)
            xa = tape.tensor(xn, requires_grad=True)
            ya = getattr(xa, op)(dim)
            if mode == 'sum':
                yt.sum().backward()
                ya.sum().backward()
            else:
                g = _x(yt.shape, dtype, seed=2)
                yt.backward(torch.tensor(g))
                ya.backward(tape.tensor(g))
            a, t = xa.grad.numpy(), xt.grad.numpy()
            assert a.dtype == t.dtype
            scale = max(1.0, float(np.abs(t).max()))
            np.testing.assert_allclose(a, t, rtol=TOL[dtype]['rtol'] * 10,
                                       atol=TOL[dtype]['rtol'] * 10 * scale)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_cum_nan_inf(dtype):
    xn = _x((64, 256), dtype, special=True)
    for op in ('cumsum', 'cumprod'):
        xt = torch.tensor(xn, requires_grad=True)
        getattr(xt, op)(-1).sum().backward()
        xa = tape.tensor(xn, requires_grad=True)
        getattr(xa, op)(-1).sum().backward()
        a, t = xa.grad.numpy(), xt.grad.numpy()
        assert np.array_equal(np.isnan(a[1:]), np.isnan(t[1:]))
        np.testing.assert_allclose(a[1:], t[1:], **TOL[dtype])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_retain_graph_twice(dtype):
    xn = _x((64, 256), dtype)
    for fa, ft in [ACTS['gelu'], ACTS['silu'], (lambda x: x.cumsum(0), lambda x: x.cumsum(0)),
                   (lambda x: x.cumprod(1), lambda x: x.cumprod(1)),
                   (lambda x: (x * 0.5 + 1).prod(-1), lambda x: (x * 0.5 + 1).prod(-1))]:
        xt = torch.tensor(xn, requires_grad=True)
        lt = ft(xt).sum()
        lt.backward(retain_graph=True)
        lt.backward()
        xa = tape.tensor(xn, requires_grad=True)
        la = fa(xa).sum()
        la.backward(retain_graph=True)
        la.backward()
        _check(xa.grad.numpy(), xt.grad, dtype)
