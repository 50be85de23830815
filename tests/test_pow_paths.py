"""``x ** c`` for a floating tensor and a Python number, against PyTorch.

The forward takes PyTorch's exact formulas for 2, 3, -2, 0.5, -0.5 and -1, and
applies other integer exponents to |x| with the sign put back (NumPy's power
of a negative base is a slow scalar path).  These tests pin the values,
signed zeros, infinities and NaN to PyTorch's on both sides of the big-record
threshold, and the gradients.
"""
import warnings

import numpy as np
import pytest

import tape
from tape._big import BIG
from tape._ops import _pow_float

torch = pytest.importorskip('torch')

EXPONENTS = [2, 3, 0.5, -1, -2, -0.5, 4, 5, -3, 1, 0, 3.0, -4.0, 7, 1e20, 2.5]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, -2.5]


def _data(dtype, n):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    x[:len(SPECIAL)] = SPECIAL
    return x


def _same(a, b, rtol):
    """Equal within ``rtol``, NaN where the other is NaN, and the same sign
    (so -0.0 and +0.0 are told apart)."""
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=rtol, atol=0, equal_nan=True)
    real = ~np.isnan(b)
    np.testing.assert_array_equal(np.signbit(a[real]), np.signbit(b[real]))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('n', [16, BIG + 5])
@pytest.mark.parametrize('e', EXPONENTS)
def test_values_match_torch(dtype, n, e):
    x = _data(dtype, n)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        ours = (tape.tensor(x, requires_grad=True) ** e).detach().numpy()
    _same(ours, (torch.tensor(x) ** e).numpy(), 2e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize('e', EXPONENTS)
def test_zero_dim_and_no_grad(e):
    for x in (np.float64(-1.5), np.array(-1.5)):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            ours = tape.tensor(x) ** e
        assert ours.shape == ()
        np.testing.assert_allclose(ours.item(), (torch.tensor(x) ** e).item(),
                                   rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize('n', [16, BIG + 5])
@pytest.mark.parametrize('e', [2, 3, 4, 5, -2, -3, 0.5, -0.5, 2.5])
def test_gradients_match_torch(n, e):
    x = np.random.default_rng(3).standard_normal(n)
    if e % 1:
        x = np.abs(x) + 0.5       # a real power of a negative number is NaN
    xt = tape.tensor(x, requires_grad=True)
    (xt ** e).sum().backward()
    xo = torch.tensor(x, requires_grad=True)
    (xo ** e).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize('e', [3, 5, -2, -3, 0.5, -0.5])
def test_gradcheck_and_gradgradcheck(e):
    x = np.random.default_rng(4).standard_normal((3, 4))
    if e % 1 or e < 0:
        x = np.abs(x) + 0.5
    xt = tape.tensor(x, requires_grad=True)
    assert tape.autograd.gradcheck(lambda t: t ** e, (xt,))
    assert tape.autograd.gradgradcheck(lambda t: t ** e, (xt,))


@pytest.mark.parametrize('e', [3, 5, -2])
def test_create_graph_agrees_with_the_compiled_sweep(e):
    x = np.random.default_rng(5).standard_normal(40) + 3.0
    a = tape.tensor(x, requires_grad=True)
    (ga,) = tape.autograd.grad((a ** e).sum(), a, create_graph=True)
    b = tape.tensor(x, requires_grad=True)
    (gb,) = tape.autograd.grad((b ** e).sum(), b)
    np.testing.assert_allclose(ga.detach().numpy(), gb.numpy(), rtol=1e-12)
    (gga,) = tape.autograd.grad(ga.sum(), a)
    xo = torch.tensor(x, requires_grad=True)
    (go,) = torch.autograd.grad((xo ** e).sum(), xo, create_graph=True)
    (ggo,) = torch.autograd.grad(go.sum(), xo)
    np.testing.assert_allclose(gga.numpy(), ggo.numpy(), rtol=1e-10)


def test_odd_powers_of_negative_numbers_keep_their_sign():
    x = np.array([-2.0, -0.5, -0.0, 0.0, 3.0, -np.inf], np.float32)
    out = _pow_float(x, 5)
    np.testing.assert_array_equal(out, np.float32([-32.0, -0.03125, -0.0, 0.0, 243.0, -np.inf]))
    assert np.signbit(out[2]) and not np.signbit(out[3])
    np.testing.assert_array_equal(_pow_float(x, 4)[:2], np.float32([16.0, 0.0625]))


def test_writes_into_the_given_buffer():
    x = np.random.default_rng(6).standard_normal(50)
    for e in (2, 3, 0.5, -1, -2, -0.5, 5, 2.5):
        out = np.empty_like(x)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            got = _pow_float(x, e, out)
            want = _pow_float(x, e)
        assert got is out
        np.testing.assert_array_equal(got, want)


def test_integer_tensors_and_tensor_exponents_unchanged():
    i = tape.tensor([-3, 2, 5])
    assert (i ** 3).tolist() == [-27, 8, 125]
    assert (i ** 3).dtype == tape.int64
    x = tape.tensor([-2.0, 3.0], requires_grad=True)
    y = x ** tape.tensor([3.0, 2.0])
    np.testing.assert_allclose(y.detach().numpy(), [-8.0, 9.0])
    np.testing.assert_allclose((2.0 ** tape.tensor([3.0, -1.0])).numpy(), [8.0, 0.5])


def test_in_place_pow():
    x = np.random.default_rng(7).standard_normal(BIG + 3).astype(np.float32)
    t = tape.tensor(x.copy())
    t.pow_(3)
    np.testing.assert_array_equal(t.numpy(), (torch.tensor(x) ** 3).numpy())
