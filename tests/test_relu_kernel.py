"""relu's forward through its compiled select (compiler/activation_kernels.py's
relu_fwd) from tape/_ops.py's _KERNEL32_FROM elements on: PyTorch's values
bit for bit (NaN stays NaN, -0.0 stays -0.0, -inf gives 0), and its gradient."""
import numpy as np
import pytest

import tape
from tape import _ops

torch = pytest.importorskip('torch')


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(_ops._KERNEL32_FROM,), (64, 256), (3, 40, 17)])
def test_relu_matches_torch_bitwise(dtype, shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:9] = [-0.0, 0.0, np.nan, -np.nan, -1.0, 2.0, np.inf, -np.inf, 1e-45]
    a = tape.tensor(x, requires_grad=True)
    y = tape.relu(a)
    g = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    y.backward(tape.tensor(g))
    t = torch.tensor(x, requires_grad=True)
    yt = torch.relu(t)
    yt.backward(torch.tensor(g))
    got, want = y.detach().numpy(), yt.detach().numpy()
    assert got.dtype == dtype
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert np.array_equal(a.grad.numpy(), t.grad.numpy())


def test_relu_strided_and_no_grad():
    x = np.random.default_rng(2).standard_normal((64, 96)).astype(np.float32)
    xs = x[:, ::3]                      # not contiguous: NumPy's np.maximum
    assert np.array_equal(tape.relu(tape.tensor(xs)).numpy(), np.maximum(xs, 0))
    with tape.no_grad():
        y = tape.relu(tape.tensor(x, requires_grad=True))
    assert y.grad_fn is None and np.array_equal(y.numpy(), np.maximum(x, 0))
    assert tape.nn.functional.relu(tape.tensor(x)).numpy().dtype == np.float32
