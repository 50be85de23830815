"""tape.func: grad, value_and_grad and vjp as decorators."""
import numpy as np
import pytest

import tape
from tape.func import grad, value_and_grad, vjp


def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def test_grad_matches_hand_derivative():
    x = np.array([0.5, -1.0, 2.0])
    g = grad(rosenbrock)(tape.tensor(x, dtype=tape.float64))
    ref = np.zeros(3)
    ref[:-1] += -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    ref[1:] += 200 * (x[1:] - x[:-1] ** 2)
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-12)
    assert not g.requires_grad                     # a plain value outside transforms


def test_decorator_with_control_flow_and_argnums():
    @grad
    def f(x):
        out = x * 0
        for i in range(3):
            if (x > 0).all():
                out = out + x ** 2
            else:
                out = out - x
        return out.sum()
    np.testing.assert_allclose(f(tape.tensor([1.0, 2.0])).numpy(), [6.0, 12.0])
    np.testing.assert_allclose(f(tape.tensor([-1.0, 2.0])).numpy(), [-3.0, -3.0])

    def g(a, b):
        return (a * b ** 2).sum()
    ga, gb = grad(g, argnums=(0, 1))(tape.tensor([1.0, 2.0]), tape.tensor([3.0, 4.0]))
    np.testing.assert_allclose(ga.numpy(), [9.0, 16.0])
    np.testing.assert_allclose(gb.numpy(), [6.0, 16.0])


def test_nested_grad_gives_higher_derivatives():
    def f(x):
        return (tape.sin(x) * x).sum()
    x = tape.tensor([0.3, 1.1], dtype=tape.float64)
    d1 = grad(f)(x)
    d2 = grad(lambda x: grad(f)(x).sum())(x)
    d3 = grad(lambda x: grad(lambda y: grad(f)(y).sum())(x).sum())(x)
    xn = x.numpy()
    np.testing.assert_allclose(d1.numpy(), np.cos(xn) * xn + np.sin(xn), rtol=1e-12)
    np.testing.assert_allclose(d2.numpy(), -np.sin(xn) * xn + 2 * np.cos(xn), rtol=1e-12)
    np.testing.assert_allclose(d3.numpy(), -np.cos(xn) * xn - 3 * np.sin(xn), rtol=1e-12)


def test_value_and_grad_and_vjp():
    v, g = value_and_grad(lambda x: (x * x).sum())(tape.tensor([1.0, 2.0]))
    assert v.item() == 5.0
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    y, pullback = vjp(lambda x: x.exp(), tape.tensor([0.0, 1.0], dtype=tape.float64))
    (gx,) = pullback(tape.tensor([1.0, 2.0], dtype=tape.float64))
    np.testing.assert_allclose(gx.numpy(), [1.0, 2 * np.e])
    (gx2,) = pullback(tape.tensor([1.0, 0.0], dtype=tape.float64))   # reusable
    np.testing.assert_allclose(gx2.numpy(), [1.0, 0.0])


def test_grad_rejects_non_scalar_outputs():
    with pytest.raises(TypeError, match='one-element'):
        grad(lambda x: x * 2)(tape.tensor([1.0, 2.0]))


def test_grad_matches_torch_func():
    torch = pytest.importorskip('torch')
    x = np.random.default_rng(0).standard_normal(6)
    g = grad(rosenbrock)(tape.tensor(x))
    tg = torch.func.grad(rosenbrock)(torch.tensor(x))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10)
