"""An op of an array and a vector along its last dim (``x + b``: every bias)
through compiler/broadcast_kernels.py: bit-equal to NumPy's broadcast, the
gradients PyTorch's, and NumPy's own path wherever the kernel does not apply."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape import _ops

torch = pytest.importorskip('torch')

OPS = {'add': lambda p, q: p + q, 'sub': lambda p, q: p - q,
       'mul': lambda p, q: p * q, 'div': lambda p, q: p / q}


def _arrays(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(shape) + 0.5).astype(dtype)
    b = (r.standard_normal(shape[-1]) + 0.5).astype(dtype)
    return x, b


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(64, 256), (8, 16, 64), (3000, 1), (2, 4096)])
@pytest.mark.parametrize('reflected', [False, True])
@pytest.mark.parametrize('name', sorted(OPS))
def test_values_bit_equal_numpy_and_gradients_match_torch(name, reflected, shape, dtype):
    f = OPS[name]
    x, b = _arrays(shape, dtype)
    x.flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    xt, bt = tape.tensor(x, requires_grad=True), tape.tensor(b, requires_grad=True)
    with np.errstate(all='ignore'):
        y = f(bt, xt) if reflected else f(xt, bt)
        want = f(b, x) if reflected else f(x, b)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    seed = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    y.backward(tape.tensor(seed))
    xo, bo = torch.tensor(x, requires_grad=True), torch.tensor(b, requires_grad=True)
    (f(bo, xo) if reflected else f(xo, bo)).backward(torch.tensor(seed))
    tol = dict(rtol=2e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), equal_nan=True, **tol)
    np.testing.assert_allclose(bt.grad.numpy(), bo.grad.numpy(), equal_nan=True, **tol)


def test_the_kernel_takes_only_what_it_can(monkeypatch):
    used = []
    real = _ops._row_broadcast

    def spy(codes, ad, bd):
        out = real(codes, ad, bd)
        used.append(out is not None)
        return out
    monkeypatch.setattr(_ops, '_row_broadcast', spy)
    x, b = _arrays((64, 256), np.float32)
    tape.tensor(x) + tape.tensor(b)                             # taken
    tape.tensor(x[:, ::2].copy()) + tape.tensor(b[:128])       # taken (a copy is contiguous)
    tape.tensor(x).t() + tape.tensor(_arrays((256, 64), np.float32)[1])  # strided: NumPy
    tape.tensor(x) + tape.tensor(b.astype(np.float64))         # mixed dtypes: NumPy
    tape.tensor(x[:4]) + tape.tensor(b)                        # small: NumPy
    tape.tensor(x) + tape.tensor(x[:1])                        # (1, c): NumPy
    assert used == [True, True, False, False, False, False]


def test_mixed_dtypes_and_strided_inputs_still_match_torch():
    x, b = _arrays((64, 256), np.float32)
    b64 = b.astype(np.float64)
    np.testing.assert_array_equal((tape.tensor(x) + tape.tensor(b64)).numpy(),
                                  (torch.tensor(x) + torch.tensor(b64)).numpy())
    xs = np.asfortranarray(x)
    np.testing.assert_array_equal((tape.tensor(xs) * tape.tensor(b)).numpy(), x * b)


def test_broadcast_errors_unchanged():
    x, b = _arrays((64, 256), np.float32)
    with pytest.raises(RuntimeError, match='must match the size'):
        tape.tensor(x) + tape.tensor(b[:100])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(64, 784), (8, 16, 64)])
def test_linear_bias_add_matches_torch(shape, dtype):
    r = np.random.default_rng(2)
    x = r.standard_normal(shape).astype(dtype)
    w = r.standard_normal((32, shape[-1])).astype(dtype)
    b = r.standard_normal(32).astype(dtype)
    ts = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
    os_ = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.linear(*ts)
    yo = torch.nn.functional.linear(*os_)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y.detach().numpy(), yo.detach().numpy(), **tol)
    y.sum().backward()
    yo.sum().backward()
    for a, o in zip(ts, os_):
        np.testing.assert_allclose(a.grad.numpy(), o.grad.numpy(), **tol)


def test_in_place_bias_add_is_numpys_add():
    from compiler.broadcast_kernels import row_add_inplace
    x, b = _arrays((33, 70), np.float32)
    want = x + b
    row_add_inplace(x, b)
    np.testing.assert_array_equal(x, want)
