"""gelu's vectorizable erf and layer_norm's single fused record, against PyTorch."""
import math

import numpy as np
import pytest

import tape
import tape.nn as tnn
import tape.nn.functional as F

torch = pytest.importorskip("torch")

TOL = {'float32': dict(rtol=2e-5, atol=2e-6), 'float64': dict(rtol=1e-6, atol=1e-9)}


def _pair(a, requires_grad=True):
    return (tape.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def test_verf_matches_math_erf_to_an_ulp():
    from compiler.kernels import erf_array
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(400_000) * 2, rng.uniform(-7, 7, 400_000),
                        10 ** rng.uniform(-320, 2, 100_000) * rng.choice([-1, 1], 100_000),
                        [0.0, 0.84375, 1.25, 1 / 0.35, 6.0, -6.0, 5e-324, 1e-300]])
    got = erf_array(x)
    ref = np.array([math.erf(v) for v in x])
    ulp = np.abs(got - ref) / np.spacing(np.abs(ref)).clip(min=5e-324)
    assert ulp.max() <= 1.0
    special = erf_array(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert special[0] == 1.0 and special[1] == -1.0 and np.isnan(special[2])
    assert special[3] == 0.0 and np.signbit(special[3])


def test_erf_kernel_has_no_libm_call_and_vectorizes():
    # the structural point: the sweep's erf helper is plain arithmetic (the old
    # one called libm's erf per element), so a loop over it is vectorized
    from numba import njit

    from compiler import kernels

    @njit(error_model='numpy')
    def loop(x, out):
        for i in range(x.size):
            out[i] = kernels.erf(x[i])

    loop(np.zeros(8), np.zeros(8))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert 'call double @erf' not in ir and 'call double @exp' not in ir
    assert 'x double>' in ir


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('shape', [(8, 16), (64, 300)])        # below and above 16384
@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_gelu_values_and_grads(dtype, shape, approximate):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    a.flat[:6] = [0.0, -0.0, 30.0, -30.0, 1e-30, -9.0]
    x, tx = _pair(a)
    g = rng.standard_normal(shape).astype(dtype)
    y = F.gelu(x, approximate=approximate)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    assert y.dtype == getattr(tape, dtype)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    (y * tape.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_gelu_extremes(approximate):
    a = np.array([np.inf, -np.inf, np.nan, 1e300, -1e300, 40.0, -40.0])
    y = F.gelu(tape.tensor(a), approximate=approximate).numpy()
    ty = torch.nn.functional.gelu(torch.tensor(a), approximate=approximate).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ty))
    np.testing.assert_allclose(y[~np.isnan(y)], ty[~np.isnan(ty)])


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_gelu_second_order(approximate):
    a = np.random.default_rng(2).standard_normal((3, 5))
    x = tape.tensor(a, requires_grad=True)
    assert tape.autograd.gradgradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))


def _ln_case(dtype, shape, k, affine=True, seed=3):
    rng = np.random.default_rng(seed)
    ns = shape[len(shape) - k:]
    a = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    w = rng.standard_normal(ns).astype(dtype) if affine else None
    b = rng.standard_normal(ns).astype(dtype) if affine else None
    return a, w, b, ns


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('shape,k', [((8, 16), 1), ((64, 400), 1), ((4, 3, 5), 2),
                                     ((2, 50, 200), 2)])
@pytest.mark.parametrize('affine', [True, False])
def test_layer_norm_values_and_grads(dtype, shape, k, affine):
    a, w, b, ns = _ln_case(dtype, shape, k, affine)
    x, tx = _pair(a)
    args = [None, None]
    targs = [None, None]
    if affine:
        (args[0], targs[0]), (args[1], targs[1]) = _pair(w), _pair(b)
    y = F.layer_norm(x, ns, *args)
    ty = torch.nn.functional.layer_norm(tx, ns, *targs)
    assert y.dtype == getattr(tape, dtype)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    g = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    (y * tape.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **TOL[dtype])
    if affine:
        for p, tp in zip(args, targs):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **TOL[dtype])


def test_layer_norm_is_one_record():
    # the old composite recorded about 15 ops; the fused Function records one
    a, w, b, ns = _ln_case('float64', (4, 6), 1)
    x = tape.tensor(a, requires_grad=True)
    y = F.layer_norm(x, ns, tape.tensor(w, requires_grad=True), tape.tensor(b, requires_grad=True))
    assert y.grad_fn.name() == 'NativeLayerNormBackward0'
    assert ': 1 records,' in tape.show_tape(y).splitlines()[0]


def test_layer_norm_constant_rows_and_extremes():
    a = np.array([[1.0, 1.0, 1.0, 1.0], [1e8, -1e8, 3.0, 0.0], [np.inf, 0.0, 1.0, 2.0]])
    x, tx = _pair(a)
    y = F.layer_norm(x, (4,))
    ty = torch.nn.functional.layer_norm(tx, (4,))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, equal_nan=True)
    y[:2].sum().backward()
    ty[:2].sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[:2], tx.grad.numpy()[:2], atol=1e-9)


def test_layer_norm_second_order():
    a, w, b, ns = _ln_case('float64', (3, 4), 1)
    x = tape.tensor(a, requires_grad=True)
    wt = tape.tensor(w, requires_grad=True)
    bt = tape.tensor(b, requires_grad=True)
    assert tape.autograd.gradcheck(lambda p, q, r: F.layer_norm(p, ns, q, r), (x, wt, bt))
    assert tape.autograd.gradgradcheck(lambda p, q, r: F.layer_norm(p, ns, q, r), (x, wt, bt))
    # against torch: the gradient of a gradient's norm
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
    out = []
    for lib, xx, ww, bb in ((tape, x, wt, bt), (torch, tx, tw, tb)):
        fn = F if lib is tape else torch.nn.functional
        y = (fn.layer_norm(xx, ns, ww, bb) ** 3).sum()
        gx, gw = lib.autograd.grad(y, (xx, ww), create_graph=True)
        hx, hw, hb = lib.autograd.grad((gx * gx).sum() + (gw * gw).sum(), (xx, ww, bb))
        out.append([t.detach().numpy() for t in (gx, gw, hx, hw, hb)])
    for m, tm in zip(*out):
        np.testing.assert_allclose(m, tm, rtol=1e-6, atol=1e-9)


def test_layer_norm_errors_like_torch():
    x = tape.ones(2, 3)
    with pytest.raises(RuntimeError, match='Given normalized_shape'):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match='Expected weight to be of same shape'):
        F.layer_norm(x, (3,), tape.ones(4))
    with pytest.raises(NotImplementedError, match='LayerNormKernelImpl'):
        F.layer_norm(tape.ones(2, 3, dtype=tape.int64), (3,))


def test_layer_norm_module_and_float16():
    m = tnn.LayerNorm(6).double()      # (float64 input: float64 weights, as PyTorch needs)
    x = tape.tensor(np.random.default_rng(5).standard_normal((3, 6)), requires_grad=True)
    m(x).pow(2).sum().backward()
    assert m.weight.grad is not None and m.bias.grad is not None and x.grad is not None
    h = F.layer_norm(tape.ones(2, 4, dtype=tape.float16), (4,))
    assert h.dtype == tape.float16


@pytest.mark.parametrize('n', [16, 600])
def test_jit_matches_eager(n):
    rng = np.random.default_rng(6)
    w = tape.tensor(rng.standard_normal(n), requires_grad=True)
    b = tape.tensor(rng.standard_normal(n), requires_grad=True)

    def f(x):
        return (F.gelu(F.layer_norm(x, (n,), w, b)) + F.gelu(x, approximate='tanh')).sum()

    jf = tape.jit(f)
    for seed in range(3):
        a = rng.standard_normal((40, n))
        x1 = tape.tensor(a, requires_grad=True)
        x2 = tape.tensor(a, requires_grad=True)
        y1 = f(x1)
        y2 = jf(x2)
        y1.backward()
        y2.backward()
        np.testing.assert_allclose(y2.item(), y1.item(), rtol=1e-12)
        np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-10, atol=1e-12)
