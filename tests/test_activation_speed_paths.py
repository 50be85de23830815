"""Activations' fast paths: one-pass forwards (compiler/activation_kernels.py) and
float32 backward kernels (compiler/chunkgen.py with compiler/kernels32.py).

PyTorch is the oracle; sizes on both sides of tape/_big.py's BIG (16384).
"""
import math

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")
F = torch.nn.functional

OPS = {
    'sin': lambda L, x: L.sin(x),
    'cos': lambda L, x: L.cos(x),
    'sinh': lambda L, x: L.sinh(x),
    'cosh': lambda L, x: L.cosh(x),
    'tan': lambda L, x: L.tan(x),
    'asin': lambda L, x: L.asin(x * 0.1),
    'atan': lambda L, x: L.atan(x),
    'exp': lambda L, x: L.exp(x),
    'sigmoid': lambda L, x: L.sigmoid(x),
    'erf': lambda L, x: L.erf(x),
    'erfc': lambda L, x: L.erfc(x),
    'gelu': lambda L, x: (TF if L is tape else F).gelu(x),
    'gelu_tanh': lambda L, x: (TF if L is tape else F).gelu(x, approximate='tanh'),
    'silu': lambda L, x: (TF if L is tape else F).silu(x),
    'softplus': lambda L, x: (TF if L is tape else F).softplus(x, 2.0, 5.0),
    'elu': lambda L, x: (TF if L is tape else F).elu(x),
    'leaky_relu': lambda L, x: (TF if L is tape else F).leaky_relu(x, 0.1),
    'clamp': lambda L, x: x.clamp(-0.5, 0.7),
    'clamp_min': lambda L, x: x.clamp(min=0.25),
    'hardtanh': lambda L, x: (TF if L is tape else F).hardtanh(x, -0.5, 0.5),
    'abs': lambda L, x: L.abs(x),
}
SIZES = [(30, 10), (64, 300)]       # 300 and 19200 elements


def _data(shape, dtype, seed=0, scale=2.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _both(name, x, g):
    """(value, gradient) by tape, and by PyTorch in float64 on the same inputs: the
    float32 kernels are compared with the exact values (PyTorch's float32
    gelu_tanh backward, for one, cancels to 0 in the tail where ours does not)."""
    out = {}
    for L in (tape, torch):
        cast = (lambda v: v) if L is tape else (lambda v: v.astype(np.float64))
        a = L.tensor(cast(x), requires_grad=True)
        y = OPS[name](L, a)
        y.backward(L.tensor(cast(g)))
        out[L.__name__] = (y.detach().numpy(), a.grad.numpy())
    return out['tape'], out['torch']


@pytest.mark.parametrize('shape', SIZES)
@pytest.mark.parametrize('name', sorted(OPS))
def test_float32_values_and_grads_match_torch(name, shape):
    x = _data(shape, np.float32)
    g = _data(shape, np.float32, seed=1)
    (ya, ga), (yb, gb) = _both(name, x, g)
    assert ya.dtype == np.float32 and ga.dtype == np.float32
    np.testing.assert_allclose(ya, OPS[name](torch, torch.tensor(x)).numpy(), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ya, yb, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', sorted(OPS))
def test_float64_large_matches_torch(name):
    x = _data((64, 300), np.float64)
    g = _data((64, 300), np.float64, seed=1)
    (ya, ga), (yb, gb) = _both(name, x, g)
    np.testing.assert_allclose(ya, yb, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize('name', ['sin', 'cos', 'sinh', 'cosh', 'gelu', 'silu', 'leaky_relu',
                                  'clamp', 'softplus', 'erf'])
def test_float64_gradcheck(name):
    x = tape.tensor(_data(40, np.float64, seed=3), requires_grad=True)
    assert tape.autograd.gradcheck(lambda v: OPS[name](tape, v), (x,), eps=1e-6, atol=1e-5)


def test_trig_far_arguments_and_specials_match_torch():
    # beyond the float32 polynomial's range the kernel takes its float64 loop
    for far in (1e4, 1e7, 3e38):
        x = _data((64, 300), np.float32, seed=4)
        x[0, :50] = np.linspace(-far, far, 50, dtype=np.float32)
        x[1, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
        g = np.ones_like(x)
        for name in ('sin', 'cos'):
            (ya, ga), (yb, gb) = _both(name, x, g)
            np.testing.assert_allclose(ya, yb, rtol=2e-6, atol=1e-6)
            np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', ['sin', 'cos', 'sinh', 'cosh', 'gelu', 'gelu_tanh', 'silu',
                                  'softplus', 'erf', 'erfc', 'leaky_relu', 'clamp',
                                  'hardtanh', 'exp', 'sigmoid'])
def test_float32_nan_and_inf_match_torch(name):
    x = _data((64, 300), np.float32, seed=5)
    # (not +inf for gelu, where PyTorch's float32 kernel gives NaN and its float64 one inf)
    x[0, :8] = [np.nan, 1.0 if name == 'gelu' else np.inf, -np.inf, 0.0, -0.0, 88.0, -88.0,
                1e-40]
    x[1, :4] = [89.5, -89.5, 200.0, -200.0]
    g = np.ones_like(x)
    g[2, :3] = [np.nan, np.inf, -np.inf]
    res = []
    for L in (tape, torch):
        a = L.tensor(x, requires_grad=True)
        y = OPS[name](L, a)
        y.backward(L.tensor(g))
        res.append((y.detach().numpy(), a.grad.numpy()))
    (ya, ga), (yb, gb) = res
    np.testing.assert_allclose(ya, yb, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(ga, gb, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize('name', ['sin', 'cosh', 'gelu', 'silu', 'leaky_relu', 'clamp'])
def test_create_graph_agrees_with_fast_path(name):
    x = _data((64, 300), np.float32, seed=6)
    g = _data((64, 300), np.float32, seed=7)
    a = tape.tensor(x, requires_grad=True)
    (fast,) = tape.autograd.grad(OPS[name](tape, a), a, tape.tensor(g))
    (slow,) = tape.autograd.grad(OPS[name](tape, a), a, tape.tensor(g), create_graph=True)
    np.testing.assert_allclose(fast.numpy(), slow.detach().numpy(), rtol=1e-5, atol=1e-6)
    # and the second order against PyTorch (float64)
    x64 = x.astype(np.float64)
    a = tape.tensor(x64, requires_grad=True)
    b = torch.tensor(x64, requires_grad=True)
    (ga,) = tape.autograd.grad(OPS[name](tape, a).sum(), a, create_graph=True)
    (gb,) = torch.autograd.grad(OPS[name](torch, b).sum(), b, create_graph=True)
    if gb.requires_grad:
        (ga * ga).sum().backward()
        (gb * gb).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-10)


def test_accumulating_and_mixed_dtype_gradients():
    # x used twice (the second kernel adds into the first's gradient), and a
    # float64 upstream gradient into a float32 op (the float64 loop)
    x = _data((64, 300), np.float32, seed=8)
    for gdt in (np.float32, np.float64):
        res = []
        for L in (tape, torch):
            a = L.tensor(x, requires_grad=True)
            y = L.sin(a) * 1.0 + L.cosh(a * 0.5) + (TF if L is tape else F).gelu(a)
            y.backward(L.tensor(np.ones(x.shape, gdt).astype(np.float32)))
            res.append(a.grad.numpy())
        np.testing.assert_allclose(res[0], res[1], rtol=1e-5, atol=1e-5)
    from compiler import _chunk_generated as K
    g = np.ones(100, np.float64)
    a = _data(100, np.float32)
    ga = np.full(100, 1.0, np.float32)
    K.vjp_sin(g, a, np.zeros(0), np.zeros(0), 0.0, 0.0, ga, np.zeros(0), False, False)
    np.testing.assert_allclose(ga, 1.0 + np.cos(a.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_leaky_relu_and_clamp_forwards_equal_numpy():
    for dt in (np.float32, np.float64):
        d = _data((64, 300), dt, seed=9)
        d.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45]
        with np.errstate(all='ignore'):
            for slope in (0.1, 0, -2, 1e300):
                got = TF.leaky_relu(tape.tensor(d), slope).numpy()
                np.testing.assert_array_equal(got, np.where(d > 0, d, d * slope))
                assert got.dtype == dt
            for lo, hi in [(-0.5, 0.7), (None, 0.3), (0.2, None), (1, 2), (0.7, -0.5),
                           (-math.inf, math.inf), (-1e300, 1e300), (math.nan, 1.0)]:
                got = tape.tensor(d).clamp(lo, hi).numpy()
                want = d
                if lo is not None:
                    want = np.maximum(want, lo)
                if hi is not None:
                    want = np.minimum(want, hi)
                np.testing.assert_array_equal(got, want.astype(dt))
                assert got.dtype == dt
        # a strided input keeps NumPy's layout
        t = tape.tensor(d).t()
        np.testing.assert_array_equal(TF.leaky_relu(t, 0.1).numpy(),
                                      np.where(d.T > 0, d.T, d.T * 0.1))


def test_float32_helpers_accuracy():
    from numba import njit

    from compiler.kernels32 import cos32, cosh32, sin32, sinh32, trig32_ok

    @njit
    def apply(f, x, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i])

    rng = np.random.default_rng(10)
    for f, ref, x in [(sin32, np.sin, rng.uniform(-8192, 8192, 200_000)),
                      (cos32, np.cos, rng.uniform(-20, 20, 200_000)),
                      (sinh32, np.sinh, rng.uniform(-89, 89, 200_000)),
                      (cosh32, np.cosh, rng.uniform(-89, 89, 200_000))]:
        x = x.astype(np.float32)
        out = np.empty_like(x)
        apply(f, x, out)
        want = ref(x.astype(np.float64))
        err = np.abs(out - want)
        assert np.all(err <= 4 * np.spacing(np.abs(want).astype(np.float32)) + 1e-7)
    assert trig32_ok(np.array([1.0, np.nan, -8192.0], np.float32))
    assert not trig32_ok(np.array([1.0, np.inf], np.float32))
    assert not trig32_ok(np.array([8193.0], np.float32))
