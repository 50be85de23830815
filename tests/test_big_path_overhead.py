"""The large-tensor path's short cuts (tape/_sweep.py ``_run_scalar_on`` for a
big root, tape/_big.py ``sweep_chain``'s lone record and ``_sweep_one``,
``_python_record`` taking big records first, the sweeps not calling the
compiled kernel for a big record): ``y.backward(g)`` on a large ``y`` swept
without ``run``'s generality, big leaves delivered inline, a lone big record
swept without planning a run.  Checked against PyTorch just below, at and
above ``BIG``, with and without hooks, retain_graph, create_graph, leaves
that accumulate, and the errors of freed and modified graphs."""
import numpy as np
import pytest

import tape
from tape._big import BIG

torch = pytest.importorskip('torch')

rng = np.random.default_rng(5)
SIZES = [BIG - 1, BIG, BIG + 3]
DTYPES = [np.float32, np.float64]


def _tol(dtype):
    return dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def _pair(shape, dtype, lo=None):
    a = rng.standard_normal(shape).astype(dtype)
    if lo is not None:
        a = np.abs(a) + lo
    return tape.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _same(x, tx, dtype):
    assert x.grad is not None and tx.grad is not None
    g = x.grad.numpy()
    assert g.dtype == dtype and g.shape == tuple(tx.shape)
    np.testing.assert_allclose(g, tx.grad.numpy(), **_tol(dtype))


UNARY = [
    ('relu', lambda m, a: m.relu(a)),
    ('exp', lambda m, a: m.exp(a)),
    ('sigmoid', lambda m, a: m.sigmoid(a)),
    ('tanh', lambda m, a: m.tanh(a)),
    ('scale', lambda m, a: a * 2.5),
    ('pow', lambda m, a: a ** 3),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('n', SIZES)
@pytest.mark.parametrize('name,fn', UNARY, ids=[u[0] for u in UNARY])
def test_lone_unary_with_seed(name, fn, n, dtype):
    x, tx = _pair(n, dtype)
    seed = rng.standard_normal(n).astype(dtype)
    for step in range(3):           # the leaf's gradient accumulates
        fn(tape, x).backward(tape.tensor(seed))
        fn(torch, tx).backward(torch.tensor(seed))
        _same(x, tx, dtype)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('n', SIZES)
def test_lone_binary_and_same_input_twice(n, dtype):
    x, tx = _pair((n,), dtype)
    w, tw = _pair((n,), dtype, lo=0.5)
    seed = rng.standard_normal(n).astype(dtype)
    for m, a, b, s in ((tape, x, w, tape.tensor(seed)), (torch, tx, tw, torch.tensor(seed))):
        (a * b).backward(s)
        (a / b).backward(s)
        (a * a).backward(s)             # one slot both inputs' gradients go to
        (a * b).sum().backward()        # a broadcast (full sum's) output gradient
    _same(x, tx, dtype)
    _same(w, tw, dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_seed_of_another_dtype_and_layout(dtype):
    n = BIG + 64
    x, tx = _pair((64, n // 64), dtype)
    other = np.float64 if dtype == np.float32 else np.float32
    seed = rng.standard_normal((n // 64, 64)).astype(other).T     # not C-contiguous
    x.sigmoid().backward(tape.tensor(seed))
    tx.sigmoid().backward(torch.tensor(seed))
    _same(x, tx, dtype)
    # the seed is the caller's: the sweep must not write into it
    before = seed.copy()
    y = x * 1.0
    (y + y).backward(tape.tensor(seed))
    np.testing.assert_array_equal(seed, before)


@pytest.mark.parametrize('dtype', DTYPES)
def test_chains_and_a_record_between_runs(dtype):
    n = BIG + 8
    x, tx = _pair(n, dtype)
    w, tw = _pair(n, dtype)
    for step in range(3):
        for m, a, b in ((tape, x, w), (torch, tx, tw)):
            h = m.tanh(a * b) * 2.0
            h = h.reshape(8, -1).t().reshape(-1)        # a big take record between runs
            (m.exp(h * 0.1) + a).sum().backward()
        _same(x, tx, dtype)
        _same(w, tw, dtype)


@pytest.mark.parametrize('n', SIZES)
def test_leaf_hooks_run(n):
    dtype = np.float32
    x, tx = _pair(n, dtype)
    seen = []
    for a, lib in ((x, tape), (tx, torch)):
        a.register_hook(lambda g: g * 3)
        a.register_post_accumulate_grad_hook(lambda p, lib=lib: seen.append(lib.__name__))
    seed = np.ones(n, dtype)
    for step in range(2):
        x.exp().backward(tape.tensor(seed))
        tx.exp().backward(torch.tensor(seed))
        _same(x, tx, dtype)
    assert seen == ['tape', 'torch'] * 2 or sorted(seen) == ['tape'] * 2 + ['torch'] * 2


def test_hook_on_the_big_root_and_multi_grad_hook():
    n = BIG + 1
    x, tx = _pair(n, np.float64)
    calls = []
    for m, a in ((tape, x), (torch, tx)):
        y = m.sigmoid(a)
        y.register_hook(lambda g: g * 2)
        m.autograd.graph.register_multi_grad_hook(
            (a,), lambda grads, m=m: calls.append(m.__name__))
        y.backward(m.ones(n, dtype=m.float64))
    _same(x, tx, np.float64)
    assert calls == ['tape', 'torch']


def test_nested_backward_in_a_hook_keeps_the_graph_task():
    # a hook that runs a backward of its own while a big root's backward runs:
    # the multi-grad callback of the outer backward still fires once, at its end
    n = BIG + 2
    x = tape.tensor(rng.standard_normal(n), requires_grad=True)
    z = tape.tensor(rng.standard_normal(n), requires_grad=True)
    fired = []

    def inner(g):
        with tape.enable_grad():        # (hooks run with recording off, as in PyTorch)
            (z * 2.0).backward(tape.ones(n, dtype=tape.float64))
        return g
    x.register_hook(inner)
    tape.autograd.graph.register_multi_grad_hook((x,), lambda grads: fired.append(1))
    x.exp().backward(tape.ones(n, dtype=tape.float64))
    assert fired == [1]
    np.testing.assert_allclose(z.grad.numpy(), 2.0)
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()))


@pytest.mark.parametrize('n', SIZES)
def test_retain_graph_then_free(n):
    dtype = np.float64
    x, tx = _pair(n, dtype)
    seed = rng.standard_normal(n)
    y = x.exp() * x
    ty = tx.exp() * tx
    y.backward(tape.tensor(seed), retain_graph=True)
    ty.backward(torch.tensor(seed), retain_graph=True)
    y.backward(tape.tensor(seed))
    ty.backward(torch.tensor(seed))
    _same(x, tx, dtype)
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y.backward(tape.tensor(seed))
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        ty.backward(torch.tensor(seed))


def test_freed_buffers_after_backward():
    n = BIG + 11
    x = tape.tensor(rng.standard_normal(n), requires_grad=True)
    y = x.exp()
    t = y._tape
    y.backward(tape.ones(n, dtype=tape.float64))
    assert all(not meta.saved for meta in t.big)


@pytest.mark.parametrize('n', SIZES)
def test_create_graph_agrees(n):
    dtype = np.float64
    x, tx = _pair(n, dtype)
    seed = rng.standard_normal(n)
    for m, a, s in ((tape, x, tape.tensor(seed)), (torch, tx, torch.tensor(seed))):
        y = m.sigmoid(a) * a
        g, = m.autograd.grad(y, a, s, create_graph=True)
        (g * g).sum().backward()
    _same(x, tx, dtype)
    # and the plain backward of the same function agrees with the graph-making one
    x.grad = None
    (tape.sigmoid(x) * x).backward(tape.tensor(seed))
    g, = tape.autograd.grad(tape.sigmoid(x) * x, x, tape.tensor(seed), create_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), g.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('n', SIZES)
def test_modified_saved_tensor_raises(n):
    x, tx = _pair(n, np.float64)
    for m, a in ((tape, x), (torch, tx)):
        y = m.sigmoid(a * 1.0)          # saves its output
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            y.backward(m.ones(n, dtype=m.float64))


def test_leaf_that_stopped_requiring_grad():
    n = BIG + 4
    x, tx = _pair(n, np.float32)
    w, tw = _pair(n, np.float32)
    for m, a, b in ((tape, x, w), (torch, tx, tw)):
        y = a * b
        b.requires_grad_(False)
        y.backward(m.ones(n))
    _same(x, tx, np.float32)
    assert w.grad is None and tw.grad is None


def test_small_graph_with_an_unreached_big_record_on_its_tape():
    # the small graph's tape adopts the big record made after it; a backward
    # of the small root reaches no big record (nor the big leaf)
    w = tape.tensor(rng.standard_normal(5), requires_grad=True)
    xb = tape.tensor(rng.standard_normal(BIG + 1), requires_grad=True)
    z = w * 2.0
    yb = xb.exp().sum()
    z.backward(tape.ones(5, dtype=tape.float64))
    np.testing.assert_allclose(w.grad.numpy(), 2.0)
    assert xb.grad is None
    yb.backward()
    np.testing.assert_allclose(xb.grad.numpy(), np.exp(xb.detach().numpy()))
    np.testing.assert_allclose(w.grad.numpy(), 2.0)


@pytest.mark.parametrize('n', [BIG - 1, BIG])
def test_mixed_small_and_big_leaves(n):
    dtype = np.float32
    x, tx = _pair((n,), dtype)
    b, tb = _pair((1,), dtype)
    for step in range(2):
        for m, a, bb in ((tape, x, b), (torch, tx, tb)):
            m.relu(a + bb).backward(m.ones(n))
        _same(x, tx, dtype)
        _same(b, tb, dtype)


def test_grad_of_a_big_intermediate_and_leaf():
    n = BIG + 2
    x, tx = _pair(n, np.float64)
    seed = rng.standard_normal(n)
    res = []
    for m, a, s in ((tape, x, tape.tensor(seed)), (torch, tx, torch.tensor(seed))):
        h = m.exp(a)
        y = m.tanh(h)
        res.append([np.asarray(g.detach().numpy()) for g in m.autograd.grad(y, (h, a), s)])
    for g, tg in zip(*res):
        np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
