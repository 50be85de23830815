"""Lifetime: training loops run in flat memory; a graph's tape dies with its tensors.

The freeing checks run with the cyclic garbage collector disabled, so they
pass only if plain reference counting frees the tape: no reference cycle may
hold a graph alive.
"""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import tape

# bytes the traced heap may grow between step 1000 and step 10000
FLAT_BOUND = 32 * 1024


@pytest.fixture
def no_gc():
    """Disable the cyclic collector for the test; start from a clean heap."""
    gc.collect()
    _forget_open_tape()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _forget_open_tape():
    # tape lets a new leaf-started graph join a recent live tape; start each
    # check from a fresh one so an earlier test's leftovers cannot be shared
    from tape import _tape as tp
    if hasattr(tp.grad_mode, 'open_tape'):
        tp.grad_mode.open_tape = None


def _traced():
    return tracemalloc.get_traced_memory()[0]


def _flat_loop(step, steps=10000, warmup=50):
    for i in range(warmup):
        step(i)
    tracemalloc.start()
    try:
        at_1000 = None
        for i in range(1, steps + 1):
            step(i)
            if i == steps // 10:
                at_1000 = _traced()
        at_end = _traced()
    finally:
        tracemalloc.stop()
    return at_end - at_1000


def test_seed_training_loop_runs_in_flat_memory():
    tape.manual_seed(0)
    w = tape.rand(1, 1, requires_grad=True)
    b = tape.zeros(1, 1, requires_grad=True)
    losses = []

    def step(i):
        x = tape.rand(8, 1) * 20
        y = x * 2 + (1 + tape.randn(8, 1)) * 3
        y_pred = x.mm(w) + b.expand_as(y)
        loss = (0.5 * (y_pred - y) ** 2).sum()
        loss.backward()
        w.data.sub_(0.001 * w.grad.data)
        b.data.sub_(0.001 * b.grad.data)
        w.grad.data.zero_()
        b.grad.data.zero_()
        if i % 1000 == 0:
            losses.append(loss.item())

    growth = _flat_loop(step)
    assert growth < FLAT_BOUND, f'heap grew by {growth} bytes over 9000 steps'
    assert abs(w.item() - 2.0) < 0.4           # and it did train
    assert w.grad.tolist() == [[0.0]]


def test_grad_and_mixed_graph_loop_runs_in_flat_memory():
    """autograd.grad, retain_graph, graphs that merge, in-place updates, and a
    graph kept alive from one step to the next (as a logged metric would be)."""
    rng = np.random.default_rng(0)
    X = tape.tensor(rng.standard_normal((16, 4)), dtype=tape.float64)
    Y = tape.tensor(rng.standard_normal((16, 1)), dtype=tape.float64)
    W1 = tape.tensor(rng.standard_normal((4, 8)) * 0.3, dtype=tape.float64, requires_grad=True)
    W2 = tape.tensor(rng.standard_normal((8, 1)) * 0.3, dtype=tape.float64, requires_grad=True)
    kept = {}

    def step(i):
        nonlocal W2
        h = tape.tanh(X.mm(W1))                   # graph from W1
        r = W2.t().sum() * 0.01                    # separate graph from W2, merged below
        out = h.mm(W2) + r
        loss = ((out - Y) ** 2).mean()
        g1, g2 = tape.autograd.grad(loss, [W1, W2], retain_graph=True)
        loss.backward()                            # a second sweep of the same tape
        with tape.no_grad():
            W1.sub_(0.01 * g1)
            W2 -= 0.01 * W2.grad
        W2.grad.zero_()
        W1.grad = None
        kept['metric'] = (out.sigmoid() * 2).mean()   # a live graph across steps

    growth = _flat_loop(step, steps=5000)
    assert growth < FLAT_BOUND, f'heap grew by {growth} bytes over 4500 steps'
    assert kept['metric'].requires_grad


def test_tape_freed_when_result_dies(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).exp().sum()
    ref = weakref.ref(y._tape)
    del y
    assert ref() is None, 'the tape outlived its only tensor (a reference cycle?)'


@pytest.mark.parametrize('how', ['backward', 'retain_graph', 'grad', 'grad_retain',
                                 'failed_backward'])
def test_tape_freed_after_sweeps(no_gc, how):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).exp()
    ref = weakref.ref(y._tape)
    if how == 'backward':
        y.sum().backward()
    elif how == 'retain_graph':
        y.sum().backward(retain_graph=True)
    elif how == 'grad':
        tape.autograd.grad(y.sum(), x)
    elif how == 'grad_retain':
        tape.autograd.grad(y.sum(), x, retain_graph=True)
    else:
        with pytest.raises(RuntimeError):
            y.backward()                       # non-scalar without gradient
    assert x.grad is None or x.grad.shape == (2,)
    del y
    assert ref() is None


def test_tape_lives_while_any_tensor_of_the_graph_lives(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    y = h.sum()
    ref = weakref.ref(y._tape)
    del y
    assert ref() is not None                   # h still needs it
    (h * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])
    del h
    assert ref() is None


def test_leaves_and_grads_do_not_hold_the_tape(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    ref = weakref.ref(y._tape)
    y.backward()
    g = x.grad
    d = x.detach()
    del y
    assert ref() is None
    assert g.tolist() == [2.0, 4.0] and d.tolist() == [1.0, 2.0]


def test_grad_fn_node_keeps_tape_until_dropped(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    node = y.grad_fn
    ref = weakref.ref(y._tape)
    del y
    assert ref() is not None
    assert node.name() == 'SumBackward0'
    del node
    assert ref() is None


def test_merged_tapes_are_freed(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0], requires_grad=True)
    a = x * 2
    b = (w * w).exp()
    refs = [weakref.ref(a._tape), weakref.ref(b._tape)]
    c = (a * b).sum()
    del a, b
    c.backward()
    del c
    assert all(r() is None for r in refs)


def test_large_matmul_python_path_frees_tape(no_gc):
    W = tape.randn(60, 60, dtype=tape.float64, requires_grad=True)
    y = W.mm(W).tanh().sum()                   # above the compiled mm size
    ref = weakref.ref(y._tape)
    y.backward()
    del y
    assert ref() is None
    assert W.grad.shape == (60, 60)


def test_inplace_on_results_does_not_leak_tape(no_gc):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    h.add_(1.0)
    h.mul_(x)
    y = h.sum()
    ref = weakref.ref(y._tape)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 5.0])
    del h, y
    assert ref() is None


def test_saved_buffers_die_with_the_graph(no_gc):
    x = tape.tensor(np.linspace(0, 1, 1000), requires_grad=True)
    h = x.exp()
    saved = weakref.ref(h._data)               # h's values are saved for backward
    y = (h * h).sum()
    del h
    assert saved() is not None                 # the graph still needs them
    del y
    assert saved() is None


def test_backward_frees_saved_buffers_while_output_lives(no_gc):
    x = tape.tensor(np.linspace(0, 1, 1000), requires_grad=True)
    h = x.exp()
    saved = weakref.ref(h._data)
    y = (h * h).sum()
    del h
    y.backward()
    assert saved() is None, 'saved values outlived backward (without retain_graph)'
    assert y.item() > 0


def test_retain_graph_keeps_saved_buffers_until_the_graph_dies(no_gc):
    x = tape.tensor(np.linspace(0, 1, 1000), requires_grad=True)
    h = x.exp()
    saved = weakref.ref(h._data)
    y = (h * h).sum()
    del h
    y.backward(retain_graph=True)
    assert saved() is not None
    y.backward()
    assert saved() is None


def test_dead_graph_buffers_not_kept_by_unrelated_live_graph(no_gc):
    x = tape.tensor(np.linspace(0, 1, 1_000_000), requires_grad=True)
    h = x.exp()                                # 8 MB saved by graph A
    saved = weakref.ref(h._data)
    a = (h * h).sum()
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    b = (w * w).sum()                          # graph B, unrelated to A
    del h, a
    assert saved() is None, 'graph A is dead but its 8 MB of saved values are alive'
    b.backward()


def test_jit_training_loop_runs_in_flat_memory():
    tape.manual_seed(0)
    w = tape.rand(1, 1, requires_grad=True)
    b = tape.zeros(1, 1, requires_grad=True)

    @tape.jit
    def loss_of(w, b, x, y):
        return (0.5 * (x.mm(w) + b.expand_as(y) - y) ** 2).sum()

    def step(i):
        x = tape.rand(8, 1) * 20
        y = x * 2 + (1 + tape.randn(8, 1)) * 3
        loss_of(w, b, x, y).backward()
        w.data.sub_(0.001 * w.grad.data)
        b.data.sub_(0.001 * b.grad.data)
        w.grad.data.zero_()
        b.grad.data.zero_()

    growth = _flat_loop(step)
    assert growth < FLAT_BOUND, f'heap grew by {growth} bytes over 9000 steps'
    assert loss_of.stats()['replays'] >= 10000


def test_a_view_of_a_parameter_made_once_gives_pytorchs_gradients_step_after_step(no_gc):
    # weight tying: Wt made once; its history moves off each released tape
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(5)
    W0, X = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))

    def train(lib):
        W = lib.tensor(W0, requires_grad=True)
        Wt = W.t()[:, 1:]
        x = lib.tensor(X)
        out = []
        for step in range(4):
            loss = (x[:, 1:] @ Wt.t() @ Wt).tanh().sum()
            loss.backward()
            with lib.no_grad():
                W -= 0.1 * W.grad          # seen through the view
            out.append(W.grad.numpy().copy())
            W.grad = None
        return np.array(out)
    np.testing.assert_allclose(train(tape), train(torch), rtol=1e-12)


def test_a_tensor_whose_history_saves_values_stays_and_still_raises(no_gc):
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    e = w.exp()                                   # exp saves its result
    (e * 2).sum().backward()
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        (e * 3).sum().backward()
    v = w[1:]                                     # saves nothing: reusable
    (v * 2).sum().backward()
    (v * 3).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2 * np.exp(1.0), 2 * np.exp(2.0) + 5.0],
                               rtol=1e-6)
