"""Memory and lifetime hunt: programs a training loop runs, checked for
reference cycles (garbage only the cyclic collector would free) and for heap
growth over many steps.  PyTorch frees all of these by reference counting.
"""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape import autograd as ag


@pytest.fixture
def no_gc():
    gc.collect()
    from tape import _tape as tp
    tp.grad_mode.open_tape = None
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _cyclic_garbage(fn, warmup=2, reps=4):
    """Types of the objects that only the cyclic collector frees after ``fn`` runs."""
    for _ in range(warmup):
        fn()
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(reps):
            fn()
        gc.collect()
        found = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    return found


def _heap_growth(step, steps, warmup=20):
    """Bytes the traced heap grew over the second half of ``steps`` steps."""
    for i in range(warmup):
        step(i)
    gc.collect()
    tracemalloc.start()
    try:
        mid = None
        for i in range(steps):
            step(i)
            if i == steps // 2:
                gc.collect()
                mid = tracemalloc.get_traced_memory()[0]
        gc.collect()
        end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return end - mid


_rng = np.random.default_rng(0)
_X = tape.tensor(_rng.standard_normal((4, 8)))
_W = tape.tensor(_rng.standard_normal((8, 8)) * 0.1, requires_grad=True)
_V = tape.tensor(_rng.standard_normal(8), requires_grad=True)


class _Square(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


def _p_mlp():
    logits = F.linear(F.relu(_X @ _W), _W)
    F.cross_entropy(logits, tape.tensor([1, 2, 3, 4])).backward()


def _p_function():
    _Square.apply(_X @ _W).sum().backward()


def _p_tensor_hooks():
    h = (_X @ _W).tanh()
    h.register_hook(lambda g: g * 2)
    h.retain_grad()
    h.sum().backward()
    assert h.grad is not None


def _p_node_hook():
    y = (_X @ _W).tanh().sum()
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    y.backward()


def _p_node_prehook():
    y = (_X @ _W).tanh().sum()
    y.grad_fn.next_functions[0][0].register_prehook(lambda grad_outputs: None)
    y.backward()


def _p_node_hook_create_graph():
    y = (_X @ _W).tanh().sum()
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    g, = ag.grad(y, _W, create_graph=True)
    g.sum().backward()


def _p_gradient_penalty():
    x = _X.clone().requires_grad_()
    g, = ag.grad((x @ _W).tanh().sum(), x, create_graph=True)
    ((g.norm(2, dim=1) - 1) ** 2).mean().backward()


def _p_views():
    q = _W * 1
    q[1:3] += _W[0:2] * 2
    q.view(-1)[5:10].mul_(_V[:5])
    q.sum().backward()


def _p_merge():
    ((_X @ _W).tanh() * (_V * _V).exp()).sum().backward()


def _p_failed_forward():
    try:
        (_X @ _W) @ _X
    except RuntimeError:
        pass


@tape.jit
def _jitted(x, w):
    return (x @ w).tanh().sum()


def _p_jit():
    _jitted(_X, _W).backward()


@pytest.mark.parametrize('program', [
    _p_mlp, _p_function, _p_tensor_hooks, _p_node_hook, _p_node_prehook,
    _p_node_hook_create_graph, _p_gradient_penalty, _p_views, _p_merge,
    _p_failed_forward, _p_jit], ids=lambda f: f.__name__[3:])
def test_no_cyclic_garbage(program):
    """Each step's objects are freed by reference counting alone."""
    found = _cyclic_garbage(program)
    _W.grad = _V.grad = None
    assert found == [], f'{program.__name__} left cyclic garbage: {found}'


def test_node_hook_closure_freed_with_its_graph(no_gc):
    """A node hook's function (and what it closes over) dies with the graph,
    as in PyTorch: NodeHooks and SlotHooks pointed at each other (a cycle)."""
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    big = np.zeros(100_000)
    probe = weakref.ref(big)
    y = (x * x).tanh().sum()
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs, keep=big: None)
    y.grad_fn.next_functions[0][0].register_prehook(lambda grad_outputs, keep=big: None)
    del big
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0])
                               * (1 - np.tanh([1.0, 4.0]) ** 2), rtol=1e-5)
    del y
    assert probe() is None, 'a node hook outlived its graph (reference cycle)'


def test_node_hooks_still_run_on_multi_output_function():
    """The weak link from a node to its output slots keeps them while the graph lives."""
    class Two(ag.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x * 1)
    seen = []
    a.grad_fn.register_hook(lambda gi, go: seen.append(len(go)))
    gc.collect()
    (a.sum() + b.sum()).backward()
    assert seen == [2]
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0])


# A tensor of a graph that outlives the step (a view of a parameter made once,
# as weight tying does, or a parameter transform computed once): every op on
# it would record onto its tape, so each step's records (and the arena slots,
# and for a forward that is never swept the saved arrays) would pile up on
# that one tape.  PyTorch's nodes of a step die with the step.  A history that
# saves nothing moves to a new tape once a backward released the old one
# (tape/_reroot.py); one that saves values stays, a known difference.
_GROWS = pytest.mark.xfail(strict=True, reason=(
    'a long-lived non-leaf whose history saves values keeps its tape, which every '
    "step's ops extend (tape/_reroot.py moves only histories that save nothing)"))

_STEP_BOUND = 24 * 1024     # bytes over 400 steps (a flat loop measures ~0)


@pytest.mark.parametrize('make', ['t', 'slice', 'reshape', 'expand'])
def test_view_of_a_parameter_made_once_runs_in_flat_memory(make):
    W = tape.tensor(_rng.standard_normal((8, 8)), requires_grad=True)
    view = {'t': lambda: W.t(), 'slice': lambda: W[:4].t(),
            'reshape': lambda: W.reshape(4, 16)[:, :8].t(),
            'expand': lambda: W[0].expand(8, 8)}[make]()
    x = _X[:, :view.shape[0]]

    def step(i):
        (x @ view).tanh().sum().backward()      # PyTorch: the view's node saves nothing
        W.grad = None

    growth = _heap_growth(step, 800)
    assert growth < _STEP_BOUND, f'heap grew by {growth} bytes over 400 steps'


@_GROWS
@pytest.mark.parametrize('how', ['forward_only', 'retain_graph', 'grad_wrt_it'])
def test_long_lived_non_leaf_runs_in_flat_memory(how):
    base = tape.tensor(_rng.standard_normal((8, 8)), requires_grad=True)
    w = base.exp()                                # computed once, used every step

    def step(i):
        loss = (_X @ w).tanh().sum()
        if how == 'retain_graph':
            loss.backward(retain_graph=True)     # w's record is swept every step
            base.grad = None
        elif how == 'grad_wrt_it':
            ag.grad(loss, w)                      # sweeps the step's records only

    growth = _heap_growth(step, 800)
    assert growth < _STEP_BOUND, f'heap grew by {growth} bytes over 400 steps'
