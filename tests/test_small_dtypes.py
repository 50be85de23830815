"""Bool, 8-bit integer and float16 tensors: the results PyTorch gives.

NumPy computes a float function of a bool or 8-bit integer array in float16
and refuses a Python int out of a uint8's range; Numba has no float16 type.
These are the places where tape must not inherit either.
"""
import math

import numpy as np
import pytest

import tape

F = tape.nn.functional


@pytest.mark.parametrize('dt', ['bool', 'uint8', 'int8', 'int16', 'int32', 'int64'])
@pytest.mark.parametrize('name', ['sin', 'exp', 'log1p', 'sqrt', 'tanh', 'sigmoid', 'atan'])
def test_float_function_of_integers_is_float32_accurate(dt, name):
    vals = [0, 1, 3] if dt == 'bool' else [0, 1, 3, 7]
    x = tape.tensor(vals).to(getattr(tape, dt))
    y = getattr(tape, name)(x)
    assert y.dtype == tape.float32
    f = (lambda v: 1 / (1 + math.exp(-v))) if name == 'sigmoid' else getattr(math, name)
    want = np.array([f(float(bool(v) if dt == 'bool' else v)) for v in vals], np.float32)
    # float32 within 2 ulp (float16 arithmetic would be off by ~1e-4)
    np.testing.assert_allclose(y.numpy(), want, rtol=3e-7, atol=1e-30)


def test_uint8_sigmoid_does_not_wrap_the_negation():
    y = tape.tensor([1, 3], dtype=tape.uint8).sigmoid()
    np.testing.assert_allclose(y.numpy(), [0.7310586, 0.95257413], rtol=1e-6)
    assert tape.tensor([True, False]).sigmoid().tolist() == pytest.approx([0.7310586, 0.5])


def test_python_int_out_of_range_wraps_as_pytorch():
    x = tape.tensor([1, 200], dtype=tape.uint8)
    assert (x * 300).tolist() == [44, 96]
    assert (300 * x).tolist() == [44, 96]
    assert (x + 1000).tolist() == [233, 176]
    assert (x - (-1)).tolist() == [2, 201]
    assert (tape.tensor([3, 4], dtype=tape.int8) * 1000).tolist() == [-72, -96]
    assert (x * 300).dtype == tape.uint8


def test_unsigned_sum_is_int64():
    x = tape.tensor([1, 200, 255], dtype=tape.uint8)
    assert x.sum().dtype == tape.int64 and x.sum().item() == 456
    assert x.view(1, 3).sum(1).dtype == tape.int64
    assert x.prod().dtype == tape.int64


def _f16(n, seed=0):
    return (np.random.default_rng(seed).random(n) * 0.8 + 0.1).astype(np.float16)


@pytest.mark.parametrize('n', [300, 20000])
@pytest.mark.parametrize('case', ['mul', 'sigmoid', 'where', 'masked_fill', 'gather', 'chain'])
def test_float16_forward_and_backward(case, n):
    """Each op on float16 tensors, small and past the large-record size (where
    the backward kernels run in float32), against float64 of the same values."""
    xs = _f16(n)
    fns = {
        'mul': lambda L, t: t * t + 2 * t,
        'sigmoid': lambda L, t: t.sigmoid(),
        'where': lambda L, t: L.where(t > 0.5, t, t * 2),
        'masked_fill': lambda L, t: t.masked_fill(t > 0.5, 0.0),
        'gather': lambda L, t: t.view(-1, 20).gather(1, (L.arange(n // 20) % 20).view(-1, 1)),
        'chain': lambda L, t: (t.sin() * t.cos() + t).exp(),
    }
    f = fns[case]
    a = tape.tensor(xs, requires_grad=True)
    y = f(tape, a)
    assert y.dtype == tape.float16
    y.sum().backward()
    assert a.grad.dtype == tape.float16
    r = tape.tensor(xs.astype(np.float64), requires_grad=True)
    yr = f(tape, r)
    yr.sum().backward()
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), yr.detach().numpy(),
                               rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(a.grad.numpy().astype(np.float64), r.grad.numpy(),
                               rtol=2e-3, atol=1e-3)


def test_float16_sums_accumulate_in_float32():
    xs = _f16(20000)
    exact = np.cumsum(xs.astype(np.float64))
    c = tape.tensor(xs).cumsum(0)
    assert c.dtype == tape.float16
    # float16 accumulation stalls once the sum passes 2048 (its ulp there is 2)
    np.testing.assert_allclose(c.numpy().astype(np.float64), exact, rtol=1e-3)
    s = tape.tensor(xs).view(-1, 20).sum(0)
    np.testing.assert_allclose(s.numpy().astype(np.float64),
                               xs.astype(np.float64).reshape(-1, 20).sum(0), rtol=1e-3)


def test_against_pytorch():
    torch = pytest.importorskip('torch')
    for dt in ('bool', 'uint8', 'int8'):
        vals = [0, 1, 3]
        t = torch.tensor(vals).to(getattr(torch, dt))
        p = tape.tensor(vals).to(getattr(tape, dt))
        for name in ('sin', 'exp', 'sigmoid', 'sqrt'):
            np.testing.assert_allclose(getattr(p, name)().numpy(),
                                       getattr(t, name)().numpy(), rtol=3e-7)
    xs = _f16(20000)
    for f in (lambda L, t: (t * 2).sigmoid(), lambda L, t: t.view(-1, 20).sum(0)):
        a = tape.tensor(xs, requires_grad=True)
        b = torch.tensor(xs, requires_grad=True)
        ya, yb = f(tape, a), f(torch, b)
        ya.float().sum().backward()
        yb.float().sum().backward()
        np.testing.assert_allclose(ya.detach().numpy().astype(np.float32),
                                   yb.detach().numpy().astype(np.float32), rtol=2e-3)
        np.testing.assert_allclose(a.grad.numpy().astype(np.float32),
                                   b.grad.numpy().astype(np.float32), rtol=5e-3)  # a few float16 ulp
