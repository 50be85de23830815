"""The big-record backward's fixed costs (tape/_sweep.py, tape/_big.py):

* ``y.backward(seed)`` for a tape of one big elementwise record of leaves
  (``_run_lone_big``): the chunk kernel adds straight into the leaves'
  ``.grad``.  Checked bit for bit against the general path (the fast path
  switched off), and against PyTorch;
* the leaner run planning of ``sweep_chain``, the full sum's seed read
  straight from the arena, ``_sum_to``'s cached axes: the usual medium
  graphs against PyTorch, with the partial-sweep, hook and error paths.
"""
import numpy as np
import pytest

import tape
from tape import _sweep

torch = pytest.importorskip('torch')

SHAPE = (64, 256)           # 16384 elements: big records


def _data(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) * 0.5 + 0.1).astype(dtype)


@pytest.fixture
def count_lone_big(monkeypatch):
    calls = []
    real = _sweep._run_lone_big

    def spy(*args):
        done = real(*args)
        calls.append(done)
        return done
    monkeypatch.setattr(_sweep, '_run_lone_big', spy)
    return calls


BINARY = {
    'mul': lambda x, y: x * y,
    'add': lambda x, y: x + y,
    'sub': lambda x, y: x - y,
    'div': lambda x, y: x / y,
    'maximum': lambda x, y: tape.maximum(x, y) if isinstance(x, tape.Tensor)
    else torch.maximum(x, y),
}
UNARY = {
    'tanh': lambda x: x.tanh(),
    'sigmoid': lambda x: x.sigmoid(),
    'exp': lambda x: x.exp(),
    'scale': lambda x: x * 1.5,
    'pow': lambda x: x ** 3,
}


def _run(fn, arrays, seed, steps, general, monkeypatch=None, grad_start=None):
    """Leaves' gradients after ``steps`` backward calls of fn(leaves).backward(seed)."""
    if general:
        monkeypatch.setattr(_sweep, '_run_lone_big', lambda *a: False)
    leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
    if grad_start is not None:
        for leaf, g in zip(leaves, grad_start):
            leaf.grad = tape.tensor(g.copy())
    for _ in range(steps):
        fn(*leaves).backward(tape.tensor(seed))
    if general:
        monkeypatch.undo()
    return [leaf.grad.numpy().copy() for leaf in leaves]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', sorted(BINARY))
def test_lone_binary_is_bit_identical_to_the_general_path(name, dtype, monkeypatch,
                                                         count_lone_big):
    x, y, seed = _data(SHAPE, dtype), _data(SHAPE, dtype, 1), _data(SHAPE, dtype, 2)
    fast = _run(BINARY[name], [x, y], seed, 3, False)
    assert count_lone_big and all(count_lone_big) or name == 'maximum'
    slow = _run(BINARY[name], [x, y], seed, 3, True, monkeypatch)
    for f, s in zip(fast, slow):
        assert f.dtype == dtype
        np.testing.assert_array_equal(f, s)
    xo, yo = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    for _ in range(3):
        BINARY[name](xo, yo).backward(torch.tensor(seed))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fast[0], xo.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(fast[1], yo.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', sorted(UNARY))
def test_lone_unary_is_bit_identical_to_the_general_path(name, dtype, monkeypatch):
    x, seed = _data(SHAPE, dtype), _data(SHAPE, dtype, 2)
    start = [_data(SHAPE, dtype, 5)]
    fast = _run(UNARY[name], [x], seed, 2, False, grad_start=start)
    slow = _run(UNARY[name], [x], seed, 2, True, monkeypatch, grad_start=start)
    np.testing.assert_array_equal(fast[0], slow[0])
    xo = torch.tensor(x, requires_grad=True)
    xo.grad = torch.tensor(start[0].copy())
    for _ in range(2):
        UNARY[name](xo).backward(torch.tensor(seed))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fast[0], xo.grad.numpy(), rtol=tol, atol=tol)


def test_lone_big_first_grad_is_fresh_then_accumulates_in_place(count_lone_big):
    x, y = _data(SHAPE, np.float32), _data(SHAPE, np.float32, 1)
    xt, yt = tape.tensor(x, requires_grad=True), tape.tensor(y)
    seed = tape.ones(*SHAPE)
    (xt * yt).backward(seed)
    first = xt.grad
    assert first.shape == SHAPE and first.dtype == tape.float32
    (xt * yt).backward(seed)
    assert xt.grad is first
    assert yt.grad is None
    assert count_lone_big == [True, True]
    np.testing.assert_array_equal(xt.grad.numpy(), y + y)


def test_lone_big_second_backward_and_retain_graph():
    xt = tape.tensor(_data(SHAPE, np.float64), requires_grad=True)
    y = tape.exp(xt)
    seed = tape.ones(*SHAPE, dtype=tape.float64)
    y.backward(seed, retain_graph=True)
    y.backward(seed)
    np.testing.assert_allclose(xt.grad.numpy(), 2 * np.exp(xt.detach().numpy()))
    with pytest.raises(RuntimeError, match='second time'):
        y.backward(seed)


def test_lone_big_in_place_change_of_a_saved_tensor_raises():
    xt = tape.tensor(_data(SHAPE, np.float32), requires_grad=True)
    c = tape.tensor(_data(SHAPE, np.float32, 1))
    y = xt * c
    with tape.no_grad():
        c.mul_(2.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward(tape.ones(*SHAPE))


def test_lone_big_cases_left_to_the_general_path(count_lone_big):
    x = _data(SHAPE, np.float32)
    # one leaf on both inputs
    xt = tape.tensor(x, requires_grad=True)
    (xt * xt).backward(tape.ones(*SHAPE))
    np.testing.assert_allclose(xt.grad.numpy(), 2 * x, rtol=1e-6)
    # a leaf hook
    xt = tape.tensor(x, requires_grad=True)
    xt.register_hook(lambda g: g * 2)
    (xt * 3.0).backward(tape.ones(*SHAPE))
    np.testing.assert_allclose(xt.grad.numpy(), np.full(SHAPE, 6.0), rtol=1e-6)
    # a float64 seed for a float32 graph
    xt = tape.tensor(x, requires_grad=True)
    (xt * 3.0).backward(tape.ones(*SHAPE, dtype=tape.float64))
    assert xt.grad.dtype == tape.float32
    np.testing.assert_allclose(xt.grad.numpy(), np.full(SHAPE, 3.0))
    assert count_lone_big[0] is False and count_lone_big[1] is False \
        and count_lone_big[2] is False
    # retain_grad on the root: a tape hook, so not this path at all
    xt = tape.tensor(x, requires_grad=True)
    y = xt * 2.0
    y.retain_grad()
    y.backward(tape.ones(*SHAPE))
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(SHAPE, np.float32))
    np.testing.assert_array_equal(xt.grad.numpy(), np.full(SHAPE, 2.0, np.float32))


def test_lone_big_seed_that_is_a_leaf_grad():
    # the seed aliases the gradient the kernel would add into: left to the general path
    x, y = _data(SHAPE, np.float32), _data(SHAPE, np.float32, 1)
    xt, yt = tape.tensor(x, requires_grad=True), tape.tensor(y, requires_grad=True)
    (xt * yt).backward(tape.ones(*SHAPE))
    (xt * yt).backward(xt.grad)
    xo, yo = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    (xo * yo).backward(torch.ones(*SHAPE))
    (xo * yo).backward(xo.grad)
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(yt.grad.numpy(), yo.grad.numpy(), rtol=1e-6)


def _medium(L, x, w, b, v):
    return (L.tanh(x * w + b) * v).sum()


def _leaves(lib, rg=(False, True, True, True)):
    arrays = [_data(SHAPE, np.float32), _data(SHAPE, np.float32, 1),
              _data((256,), np.float32, 2), _data(SHAPE, np.float32, 3)]
    if lib is tape:
        return [tape.tensor(a, requires_grad=r) for a, r in zip(arrays, rg)]
    return [torch.tensor(a, requires_grad=r) for a, r in zip(arrays, rg)]


def test_medium_graph_matches_torch_over_steps():
    ts, os_ = _leaves(tape), _leaves(torch)
    for _ in range(3):
        _medium(tape, *ts).backward()
        _medium(torch, *os_).backward()
    for t, o in zip(ts[1:], os_[1:]):
        assert t.grad.dtype == tape.float32
        np.testing.assert_allclose(t.grad.numpy(), o.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_medium_graph_second_backward_raises_and_retain_graph():
    ts, os_ = _leaves(tape), _leaves(torch)
    y = _medium(tape, *ts)
    y.backward(retain_graph=True)
    y.backward()
    yo = _medium(torch, *os_)
    yo.backward(retain_graph=True)
    yo.backward()
    for t, o in zip(ts[1:], os_[1:]):
        np.testing.assert_allclose(t.grad.numpy(), o.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match='second time'):
        y.backward()


def test_medium_graph_autograd_grad_with_inputs():
    ts, os_ = _leaves(tape), _leaves(torch)
    gw, gb = tape.autograd.grad(_medium(tape, *ts), [ts[1], ts[2]])
    ow, ob = torch.autograd.grad(_medium(torch, *os_), [os_[1], os_[2]])
    np.testing.assert_allclose(gw.numpy(), ow.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), ob.numpy(), rtol=1e-5, atol=1e-5)
    assert all(t.grad is None for t in ts)


def test_medium_graph_partial_sweep_and_tensor_hooks():
    ts, os_ = _leaves(tape), _leaves(torch)
    outs = []
    for L, (x, w, b, v) in ((tape, ts), (torch, os_)):
        h = L.tanh(x * w + b)
        h.register_hook(lambda g: g * 0.5)
        mid = h * v
        mid.retain_grad()
        unused = (h * 3.0).exp().sum()     # not reached by the backward below
        mid.sum().backward()
        outs.append((mid.grad, w.grad, b.grad, v.grad, unused))
    for t, o in zip(outs[0][:4], outs[1][:4]):
        np.testing.assert_allclose(t.numpy(), o.numpy(), rtol=1e-5, atol=1e-5)
    # the unreached part was not run, but it leads through the freed tanh: both raise
    for out in (outs[0][4], outs[1][4]):
        with pytest.raises(RuntimeError, match='second time'):
            out.backward()


def test_two_sums_of_one_tensor_and_a_broadcast_bias():
    ts, os_ = _leaves(tape), _leaves(torch)
    for L, (x, w, b, v) in ((tape, ts), (torch, os_)):
        h = x * w + b
        (h.sum() + (h * v).sum() * 0.5 + h.sum() * 2.0).backward()
    for t, o in zip(ts[1:], os_[1:]):
        np.testing.assert_allclose(t.grad.numpy(), o.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_cat_and_slice_match_torch():
    a, b = _data(SHAPE, np.float32), _data(SHAPE, np.float32, 1)
    res = []
    for L in (tape, torch):
        at, bt = L.tensor(a, requires_grad=True), L.tensor(b, requires_grad=True)
        for _ in range(2):
            z = L.cat([at, bt], 0)
            (z[:, 10:200] * 2.0).tanh().sum().backward()
        res.append((at.grad.numpy(), bt.grad.numpy()))
    for t, o in zip(*res):
        np.testing.assert_allclose(t, o, rtol=1e-5, atol=1e-6)


def test_mlp_layers_match_torch():
    r = np.random.default_rng(3)
    X = r.standard_normal((64, 256)).astype(np.float32)
    W1 = (r.standard_normal((256, 256)) * 0.05).astype(np.float32)
    B1 = r.standard_normal(256).astype(np.float32)
    Y = r.standard_normal((64, 256)).astype(np.float32)
    res = []
    for L, F in ((tape, tape.nn.functional), (torch, torch.nn.functional)):
        w, b = L.tensor(W1, requires_grad=True), L.tensor(B1, requires_grad=True)
        for _ in range(2):
            F.mse_loss(L.relu(F.linear(L.tensor(X), w, b)), L.tensor(Y)).backward()
        res.append((w.grad.numpy(), b.grad.numpy()))
    for t, o in zip(*res):
        np.testing.assert_allclose(t, o, rtol=1e-4, atol=1e-6)
