"""The differentiable backward's fast paths (tape/_differentiable.py): compiled
elementwise plans, records whose result got no gradient skipped, flat seeds,
x ** 2's gradient without a pow record.  PyTorch is the oracle, to third order."""
import numpy as np
import pytest

import tape
from tape import autograd

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _pair(a, rg=True):
    return tape.tensor(a.copy(), requires_grad=rg), torch.tensor(a.copy(), requires_grad=rg)


def _ros(lib, x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _chain(lib, x):
    return (lib.tanh(x * 1.5) ** 3 + lib.exp(-x) * lib.sin(x) - x ** 0.5 * 0).sum()


def _mm(lib, x):
    w = x.reshape(4, 5)
    return (w @ w.t() @ w).sum() + (w[:, 1:3] ** 2).sum()


def _sums(lib, x):
    return (x.sum() ** 2 + (x * x).sum() * x[2] + (1 - x[:-1]).pow(3).sum())


def _function(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * 3 * a ** 2
    return lambda lib_, x: Cube.apply(x * 2).sum()


FUNCS = [_ros, _chain, _mm, _sums]


def _derivs(lib, f, x, v, w):
    """Gradient, Hessian-vector product and a third-order directional derivative."""
    g, = lib.autograd.grad(f(lib, x), x, create_graph=True)
    hv, = lib.autograd.grad((g * v).sum(), x, create_graph=True)
    t, = lib.autograd.grad((hv * w).sum(), x)
    return g, hv, t


@pytest.mark.parametrize("f", FUNCS + ['function'], ids=lambda f: getattr(f, '__name__', f))
def test_hvp_and_third_order_match_torch(f):
    a = RNG.uniform(0.2, 1.5, 20)
    v, w = RNG.standard_normal(20), RNG.standard_normal(20)
    xt, xr = _pair(a)
    ft = _function(tape) if f == 'function' else f
    fr = _function(torch) if f == 'function' else f
    got = _derivs(tape, ft, xt, tape.tensor(v), tape.tensor(w))
    want = _derivs(torch, fr, xr, torch.tensor(v), torch.tensor(w))
    for a_, b_ in zip(got, want):
        np.testing.assert_allclose(a_.detach().numpy(), b_.detach().numpy(),
                                   rtol=1e-9, atol=1e-9)


def test_double_backward_agrees_with_plain_backward():
    # the recorded (create_graph) gradient equals the compiled sweep's
    for f in FUNCS:
        a = RNG.uniform(0.2, 1.5, 20)
        x1, x2 = tape.tensor(a, requires_grad=True), tape.tensor(a, requires_grad=True)
        g1, = autograd.grad(f(tape, x1), x1, create_graph=True)
        g2, = autograd.grad(f(tape, x2), x2)
        np.testing.assert_allclose(g1.detach().numpy(), g2.numpy(), rtol=1e-12)
        assert g1.requires_grad and not g2.requires_grad


def test_many_contributions_to_one_slot():
    a = RNG.standard_normal(6)
    for lib in (tape, torch):
        x = lib.tensor(a.copy(), requires_grad=True)
        y = x * x + x * 3 + x.exp() + x[1:].sum() + x[:2].sum() * x[0] + x ** 2
        g, = lib.autograd.grad(y.sum(), x, create_graph=True)
        h, = lib.autograd.grad(g.sum(), x)
        if lib is tape:
            got = (g.detach().numpy(), h.numpy())
        else:
            want = (g.detach().numpy(), h.numpy())
    for a_, b_ in zip(got, want):
        np.testing.assert_allclose(a_, b_, rtol=1e-12)


def test_unused_inputs_and_unreached_records():
    for lib in (tape, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        z = lib.tensor([3.0, 4.0], requires_grad=True)
        side = (z * 5).exp()            # on the graph, no gradient reaches it
        y = (x ** 2).sum()
        g = lib.autograd.grad(y, [x, z], create_graph=True, allow_unused=True)
        assert g[1] is None
        with pytest.raises(RuntimeError):
            lib.autograd.grad((x ** 2).sum(), [x, z], create_graph=True)
        m = lib.autograd.grad((x ** 2).sum(), [x, z], create_graph=True,
                              materialize_grads=True)
        assert np.all(m[1].detach().numpy() == 0)
        h, = lib.autograd.grad(g[0].sum(), x)
        np.testing.assert_allclose(h.numpy(), [2.0, 2.0])
        del side


def test_grad_outputs_and_retain_graph():
    a = RNG.standard_normal(5)
    go = RNG.standard_normal(5)
    res = {}
    for lib in (tape, torch):
        x = lib.tensor(a.copy(), requires_grad=True)
        y = x ** 2 * x.sin()
        g, = lib.autograd.grad(y, x, grad_outputs=lib.tensor(go), create_graph=True)
        h1, = lib.autograd.grad(g.sum(), x, retain_graph=True)
        h2, = lib.autograd.grad(g.sum(), x)
        with pytest.raises(RuntimeError):
            lib.autograd.grad(g.sum(), x)       # the graph was freed
        res[lib.__name__] = (g.detach().numpy(), h1.numpy(), h2.numpy())
    for a_, b_ in zip(res['tape'], res['torch']):
        np.testing.assert_allclose(a_, b_, rtol=1e-12)


def test_hooks_see_recorded_gradients():
    seen = {}
    for lib in (tape, torch):
        x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = x ** 2

        def hook(g, n=lib.__name__):
            seen[n] = g.detach().numpy().copy()
            return g * 2
        y.register_hook(hook)
        g, = lib.autograd.grad(y.sum(), x, create_graph=True)
        h, = lib.autograd.grad(g.sum(), x)
        seen[lib.__name__ + 'gh'] = (g.detach().numpy(), h.numpy())
    np.testing.assert_allclose(seen['tape'], seen['torch'])
    for a_, b_ in zip(seen['tapegh'], seen['torchgh']):
        np.testing.assert_allclose(a_, b_)


def test_square_gradient_is_differentiable_at_zero():
    for lib in (tape, torch):
        x = lib.tensor([0.0, 3.0], requires_grad=True)
        g, = lib.autograd.grad((x ** 2).sum(), x, create_graph=True)
        h, = lib.autograd.grad(g.sum(), x, create_graph=True)
        assert h.requires_grad or lib is tape
        np.testing.assert_allclose(g.detach().numpy(), [0.0, 6.0])
        np.testing.assert_allclose(h.detach().numpy(), [2.0, 2.0])
