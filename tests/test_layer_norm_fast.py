"""F.layer_norm's one-node form (tape/nn/_layer_norm.py, compiler/norm_kernels.py)
against PyTorch: values and gradients over shapes, dtypes, weight/bias
combinations, multi-dim normalized_shape, eps, NaN/inf and constant rows, and
gradcheck / gradgradcheck in float64."""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")

SHAPES = [((64, 256), (256,)), ((8, 16, 64), (64,)), ((3, 100), (100,)), ((5, 7), (7,)),
          ((2, 3, 4, 5), (4, 5)), ((4, 130), (130,)), ((1, 1), (1,)), ((6, 64), (6, 64))]


def _run(lib, Fm, xn, ns, wn, bn, gn, eps):
    x = lib.tensor(xn, requires_grad=True)
    w = None if wn is None else lib.tensor(wn, requires_grad=True)
    b = None if bn is None else lib.tensor(bn, requires_grad=True)
    y = Fm.layer_norm(x, ns, w, b, eps)
    (y * lib.tensor(gn)).sum().backward()
    return [y.detach().numpy(), x.grad.numpy()] + \
        [p.grad.numpy() for p in (w, b) if p is not None]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape,ns', SHAPES)
@pytest.mark.parametrize('hw,hb', [(False, False), (True, False), (False, True), (True, True)])
def test_matches_torch(dtype, shape, ns, hw, hb):
    rng = np.random.default_rng(0)
    xn = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    wn = rng.standard_normal(ns).astype(dtype) if hw else None
    bn = rng.standard_normal(ns).astype(dtype) if hb else None
    gn = rng.standard_normal(shape).astype(dtype)
    got = _run(tape, TF, xn, ns, wn, bn, gn, 1e-5)
    want = _run(torch, torch.nn.functional, xn, ns, wn, bn, gn, 1e-5)
    tol = dict(rtol=1e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for g, t in zip(got, want):
        assert g.dtype == t.dtype
        np.testing.assert_allclose(g, t, **tol)


@pytest.mark.parametrize('eps', [1e-5, 0.1, 0.0])
def test_eps_and_large_mean(eps):
    rng = np.random.default_rng(1)
    xn = (rng.standard_normal((4, 300)) + 1000).astype(np.float32)
    gn = rng.standard_normal((4, 300)).astype(np.float32)
    got = _run(tape, TF, xn, (300,), None, None, gn, eps)
    want = _run(torch, torch.nn.functional, xn, (300,), None, None, gn, eps)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=2e-4, atol=2e-4)


def test_constant_rows():
    xn = np.full((3, 70), 2.5, np.float32)
    gn = np.random.default_rng(2).standard_normal((3, 70)).astype(np.float32)
    wn = np.linspace(-1, 1, 70).astype(np.float32)
    got = _run(tape, TF, xn, (70,), wn, wn, gn, 1e-5)
    want = _run(torch, torch.nn.functional, xn, (70,), wn, wn, gn, 1e-5)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_nonfinite_rows(bad):
    xn = np.random.default_rng(3).standard_normal((3, 80)).astype(np.float32)
    xn[1, 5] = bad
    gn = np.ones((3, 80), np.float32)
    got = _run(tape, TF, xn, (80,), None, None, gn, 1e-5)
    want = _run(torch, torch.nn.functional, xn, (80,), None, None, gn, 1e-5)
    for g, t in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(t))
        np.testing.assert_allclose(np.nan_to_num(g), np.nan_to_num(t), rtol=1e-5, atol=2e-5)


def test_noncontiguous_input_and_grad():
    rng = np.random.default_rng(4)
    xn = rng.standard_normal((40, 2, 96)).astype(np.float32)
    res = []
    for lib, Fm in ((tape, TF), (torch, torch.nn.functional)):
        x = lib.tensor(xn, requires_grad=True)
        y = Fm.layer_norm(x.transpose(0, 1), (96,))
        y.sum().backward()
        res.append((y.detach().numpy(), x.grad.numpy()))
    for g, t in zip(*res):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=2e-5)


def test_node_name_and_inplace_error():
    x = tape.randn(4, 8, requires_grad=True)
    y = TF.layer_norm(x * 1.0, (8,))
    assert type(y.grad_fn).__name__ == 'NativeLayerNormBackward0' or \
        'NativeLayerNormBackward0' in repr(y.grad_fn)
    a = x * 1.0
    y = TF.layer_norm(a, (8,))
    with tape.no_grad():
        a.mul_(2)
    with pytest.raises(RuntimeError):
        y.sum().backward()


@pytest.mark.parametrize('hw,hb', [(False, False), (True, True), (True, False)])
def test_gradcheck_gradgradcheck(hw, hb):
    x = tape.randn(3, 2, 5, dtype=tape.float64, requires_grad=True)
    w = tape.randn(2, 5, dtype=tape.float64, requires_grad=True) if hw else None
    b = tape.randn(2, 5, dtype=tape.float64, requires_grad=True) if hb else None
    inputs = tuple(p for p in (x, w, b) if p is not None)

    def f(*args):
        it = iter(args)
        xx = next(it)
        ww = next(it) if hw else None
        bb = next(it) if hb else None
        return TF.layer_norm(xx, (2, 5), ww, bb)
    assert tape.autograd.gradcheck(f, inputs)
    assert tape.autograd.gradgradcheck(f, inputs)
