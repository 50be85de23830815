"""float32 forwards in one compiled pass: sigmoid, silu, gelu
(compiler/activation_kernels.py) and cumsum (compiler/cumgrad.py).

PyTorch is the oracle for NaN/inf and cumsum (bit-equal: float64 accumulation);
the activations are checked against float64 references within a few float32
ulp (PyTorch's own float32 gelu is ~1e-6 off in the negative tail).
"""
import math

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")
F = torch.nn.functional

SIZES = [1, 31, 300, 16383, 16385, 70000]
ACTS = {
    'sigmoid': (lambda x: tape.sigmoid(x), torch.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
    'silu': (lambda x: TF.silu(x), F.silu, lambda v: v / (1 + np.exp(-v))),
    'gelu': (lambda x: TF.gelu(x), F.gelu, lambda v: v * _ndtr(v)),
}


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _ndtr(v):
    """The standard normal CDF in float64, from the C library's erfc (accurate
    relative to the value in the far tail; SciPy is not a dependency)."""
    return _ERFC(-np.asarray(v, np.float64) / math.sqrt(2.0)).astype(np.float64) * 0.5


def _ulps(got, ref):
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / ulp


@pytest.mark.parametrize('n', SIZES)
@pytest.mark.parametrize('name', sorted(ACTS))
def test_values_within_few_ulp(name, n):
    fa, ft, ref = ACTS[name]
    x = (np.random.default_rng(n).standard_normal(n) * 4).astype(np.float32)
    got = fa(tape.tensor(x)).numpy()
    assert got.dtype == np.float32
    want = ref(x.astype(np.float64))
    ok = np.abs(want) > 1e-30
    assert _ulps(got[ok], want[ok]).max() <= 8
    np.testing.assert_allclose(got, ft(torch.tensor(x)).numpy(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize('name', sorted(ACTS))
def test_wide_range_accuracy(name):
    fa, _, ref = ACTS[name]
    x = np.concatenate([np.linspace(-14, 14, 200001), np.linspace(-88, 88, 20001)]) \
        .astype(np.float32)
    want = ref(x.astype(np.float64))
    got = fa(tape.tensor(x)).numpy()
    ok = np.abs(want) > 1e-30
    assert _ulps(got[ok], want[ok]).max() <= 8
    np.testing.assert_allclose(got[~ok], want[~ok], atol=1e-30)


@pytest.mark.parametrize('name', sorted(ACTS))
def test_specials_match_torch(name):
    fa, ft, _ = ACTS[name]
    sp = [np.nan, -np.inf, -200.0, -100.0, -20.0, -14.5, -0.0, 0.0, 1e-40, -1e-42, 20.0, 200.0]
    if name != 'gelu':
        sp.append(np.inf)       # PyTorch's float32 gelu(inf) is NaN, its float64 one inf
    for reps in (1, 50):
        x = np.array(sp * reps, np.float32)
        got = fa(tape.tensor(x)).numpy()
        want = ft(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
        ok = want == 0
        if name == 'gelu':
            # the sign of PyTorch's float32 gelu(x) underflowing to zero
            # depends on its CPU kernel (-0.0 on AVX-512, +0.0 on AVX2); its
            # float64 gelu, and x * Phi(x), give -0.0 for x < 0
            want = ft(torch.tensor(x, dtype=torch.float64)).numpy()
        np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    assert TF.gelu(tape.tensor(np.full(40, np.inf, np.float32))).numpy()[0] == np.inf


@pytest.mark.parametrize('name', sorted(ACTS))
def test_non_contiguous_and_grads(name):
    fa, ft, _ = ACTS[name]
    x = (np.random.default_rng(3).standard_normal((300, 64)) * 3).astype(np.float32)
    for view in (x.T, x[:, ::2], x[::3]):
        a = tape.tensor(view, requires_grad=True)
        b = torch.tensor(np.ascontiguousarray(view), dtype=torch.float64, requires_grad=True)
        ya, yb = fa(a), ft(b)
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=4e-6, atol=1e-6)
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('shape,dim', [((7,), 0), ((5, 3), 1), ((64, 256), 1), ((256, 1024), 1),
                                       ((256, 1024), 0), ((3, 5, 7), 1), ((9, 16385), 1),
                                       ((4, 0, 3), 2), ((6, 4, 5), -1)])
def test_cumsum_bit_equal_to_torch(shape, dim):
    x = (np.random.default_rng(0).standard_normal(shape) + 0.3).astype(np.float32)
    got = tape.cumsum(tape.tensor(x), dim).numpy()
    want = torch.cumsum(torch.tensor(x), dim).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    if x.ndim >= 2:
        v = np.swapaxes(x, 0, -1)           # non-contiguous
        np.testing.assert_array_equal(tape.cumsum(tape.tensor(v), dim).numpy(),
                                      torch.cumsum(torch.tensor(v), dim).numpy())


def test_cumsum_specials_and_grad():
    x = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    x[2, 7] = -np.inf
    x[3, 1:3] = [np.inf, -np.inf]
    np.testing.assert_array_equal(tape.cumsum(tape.tensor(x), 1).numpy(),
                                  torch.cumsum(torch.tensor(x), 1).numpy())
    g = np.random.default_rng(2).standard_normal((6, 40)).astype(np.float32)
    xs = np.random.default_rng(3).standard_normal((6, 40)).astype(np.float32)
    a = tape.tensor(xs, requires_grad=True)
    b = torch.tensor(xs, requires_grad=True)
    tape.cumsum(a, 1).backward(tape.tensor(g))
    torch.cumsum(b, 1).backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)
