"""where and masked_fill through their compiled select (compiler/activation_kernels.py's
where_fwd / fill_where_fwd) for same-shape float arrays from tape/_elementwise.py's
_WHERE_FROM elements on: NumPy's np.where values bit for bit (NaN, -0.0, inf
included), PyTorch's gradients, and the NumPy path for everything else."""
import numpy as np
import pytest

import tape
from tape import _elementwise

torch = pytest.importorskip('torch')


def _data(shape, dtype, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:6] = [np.nan, -0.0, np.inf, -np.inf, 0.0, -np.nan]
    return x


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(_elementwise._WHERE_FROM,), (64, 256), (3, 50, 7)])
def test_where_matches_numpy_and_torch(dtype, shape):
    x, y = _data(shape, dtype, 1), _data(shape, dtype, 2)
    c = np.random.default_rng(3).random(shape) > 0.4
    a, b = tape.tensor(x, requires_grad=True), tape.tensor(y, requires_grad=True)
    out = tape.where(tape.tensor(c), a, b)
    got = out.detach().numpy()
    want = np.where(c, x, y)
    assert got.dtype == dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    g = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    out.backward(tape.tensor(g))
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    torch.where(torch.tensor(c), ta, tb).backward(torch.tensor(g))
    assert np.array_equal(a.grad.numpy(), ta.grad.numpy())
    assert np.array_equal(b.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('value', [0.5, -np.inf, np.nan, -0.0])
def test_masked_fill_matches_torch(dtype, value):
    x = _data((40, 30), dtype, 5)
    m = np.random.default_rng(6).random((40, 30)) > 0.5
    a = tape.tensor(x, requires_grad=True)
    out = a.masked_fill(tape.tensor(m), value)
    ta = torch.tensor(x, requires_grad=True)
    tout = ta.masked_fill(torch.tensor(m), value)
    got, want = out.detach().numpy(), tout.detach().numpy()
    assert got.dtype == dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    out.sum().backward()
    tout.sum().backward()
    assert np.array_equal(a.grad.numpy(), ta.grad.numpy())


def test_where_other_cases_take_numpy():
    x = _data((32, 40), np.float32, 7)
    c = x > 0
    # broadcast condition, a strided input, mixed dtypes, a scalar other
    cases = [(c[:1], x, x[::-1].copy()), (c, x, np.asfortranarray(x)), (c[:, ::2], x[:, ::2], x[:, 1::2]),
             (c, x, x.astype(np.float64)), (c, x, 2.0)]
    for cc, xx, yy in cases:
        got = tape.where(tape.tensor(cc), tape.tensor(xx),
                         tape.tensor(yy) if isinstance(yy, np.ndarray) else yy).numpy()
        want = torch.where(torch.tensor(cc), torch.tensor(xx),
                           torch.tensor(yy) if isinstance(yy, np.ndarray) else yy).numpy()
        assert got.dtype == want.dtype
        assert np.array_equal(got, want, equal_nan=True)
    with pytest.raises(RuntimeError, match='where'):
        tape.where(tape.tensor(c), tape.tensor(x), tape.tensor(x[:5]))
