"""The backward driver (tape/_sweep.py): the fast path of ``y.backward(g)`` and
``loss.backward()`` (``run_scalar``), and what it shares with the general
``run``: packing, release, second-backward errors, version checks, delivery.

Structure and semantics only; no timing."""
import numpy as np
import pytest

import tape
import tape.autograd as autograd
from tape import _sweep


def _sig(x):
    return 1 / (1 + np.exp(-x))


@pytest.fixture
def no_general_run(monkeypatch):
    """Fail if backward takes the general ``run`` instead of the fast path."""
    def boom(*a, **k):
        raise AssertionError('the general run path was taken')
    monkeypatch.setattr(_sweep, 'run', boom)
    calls = []
    fast = autograd._run_one
    monkeypatch.setattr(autograd, '_run_one', lambda *a: calls.append(1) or fast(*a))
    yield
    assert calls, 'the fast path was not taken'


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_backward_with_gradient_takes_the_fast_path(no_general_run, dtype):
    xv = np.linspace(-2, 2, 12).reshape(3, 4).astype(dtype)
    x = tape.tensor(xv, requires_grad=True)
    g = np.arange(12.0).reshape(3, 4).astype(dtype)
    tape.sigmoid(x).backward(tape.tensor(g))
    s = _sig(xv.astype(np.float64))
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(x.grad.numpy(), g * s * (1 - s), rtol=1e-6)
    tape.sigmoid(x).backward(tape.tensor(g))       # accumulates
    np.testing.assert_allclose(x.grad.numpy(), 2 * g * s * (1 - s), rtol=1e-6)


def test_gradient_of_another_float_dtype_is_cast():
    x = tape.tensor(np.array([0.5, -1.0], np.float32), requires_grad=True)
    (x * x).backward(tape.tensor(np.array([1.0, 2.0], np.float64)))
    assert x.grad.dtype == tape.float32
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -4.0])


def test_float64_root_of_float32_graph_sweeps_in_float64():
    x = tape.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    y = (x * 3).to(tape.float64)
    y.backward(tape.tensor([1e-9 + 1, 1.0], dtype=tape.float64))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_second_backward_with_gradient_raises():
    x = tape.tensor([0.1, 0.2], requires_grad=True)
    y = tape.sigmoid(x)
    y.backward(tape.ones(2))
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y.backward(tape.ones(2))


def test_retain_graph_with_gradient():
    x = tape.tensor([0.1, 0.2], requires_grad=True)
    y = tape.sigmoid(x)
    y.backward(tape.ones(2), retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward(tape.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match='second time'):
        y.backward(tape.ones(2))


def test_recording_after_a_retained_sweep_grows_the_tape():
    # R is a copy of the records: the tape's bytearray is not locked by it
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    R, _, _ = _sweep.pack(y._tape)
    y.backward(tape.ones(2), retain_graph=True)
    z = (y * 2).sum()           # onto the same tape, while R is alive
    assert z._tape is y._tape and R.flags.writeable
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 4, 4 + 8])


def test_shape_mismatch_and_integer_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match='Mismatch in shape'):
        (x * x).backward(tape.ones(3))
    (x * x).backward(tape.tensor([1, 1]))       # an integer gradient: the general path
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_tensor_hook_with_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    y.backward(tape.tensor([1.0, 10.0]))
    np.testing.assert_allclose(seen[0], [1.0, 10.0])
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 60.0])


def test_leaf_hooks_and_post_accumulate_hooks_run():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g + 1)
    after = []
    x.register_post_accumulate_grad_hook(lambda p: after.append(p.grad.numpy().copy()))
    (x * x).backward(tape.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 5.0])
    np.testing.assert_allclose(after[0], [3.0, 5.0])


def test_custom_function_with_gradient_frees_its_ctx():
    class Square(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 2 * a * g

    x = tape.tensor([1.0, 3.0], requires_grad=True)
    y = Square.apply(x)
    y.backward(tape.tensor([1.0, 0.5]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 3.0])
    with pytest.raises(RuntimeError):
        y.backward(tape.ones(2))


def test_partial_sweep_releases_only_its_custom_functions():
    class Twice(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            ctx.saved_tensors
            return g * 2

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    a = Twice.apply(x)
    b = Twice.apply(x)
    assert a._tape is b._tape       # one open tape: a's sweep is a partial one
    a.backward(tape.ones(2))
    b.backward(tape.ones(2))        # b's ctx was not released by a's sweep
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])
    with pytest.raises(RuntimeError):
        b.backward(tape.ones(2))


def test_inplace_change_after_recording_raises_with_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0])
    y = x * w
    w.add_(1)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward(tape.ones(2))


def test_large_root_with_gradient():
    n = 20000                       # a big slot: the general path
    xv = np.linspace(-1, 1, n)
    x = tape.tensor(xv, requires_grad=True)
    g = np.full(n, 0.5)
    tape.tanh(x).backward(tape.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), 0.5 * (1 - np.tanh(xv) ** 2))


def test_unreached_records_stay_sweepable():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y1 = x * x
    y2 = x * 5
    assert y1._tape is y2._tape
    y1.backward(tape.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    y2.backward(tape.ones(2))
    np.testing.assert_allclose(x.grad.numpy(), [7.0, 9.0])
    with pytest.raises(RuntimeError, match='second time'):
        y1.backward(tape.ones(2))


def test_leaf_grad_not_writeable_or_other_shape_is_replaced():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.grad = tape.tensor([1.0, 1.0])
    held = x.grad
    (x * x).sum().backward()
    assert x.grad is held             # accumulated in place
    np.testing.assert_allclose(held.numpy(), [3.0, 5.0])


@pytest.mark.filterwarnings("ignore:Anomaly Detection")
def test_anomaly_mode_takes_the_general_path():
    x = tape.tensor([0.0], requires_grad=True)
    y = tape.sqrt(x) * 0
    with autograd.detect_anomaly():
        with pytest.raises(RuntimeError):
            y.backward(tape.ones(1))


def test_training_loop_memory_is_flat_with_gradient():
    import gc
    import tracemalloc
    x = tape.tensor(np.ones((10, 10), np.float32), requires_grad=True)
    ones = tape.ones(10, 10)

    def step():
        tape.sigmoid(x).backward(ones)
    for _ in range(20):
        step()
    gc.collect()
    tracemalloc.start()
    for _ in range(200):
        step()
    first = tracemalloc.get_traced_memory()[0]
    for _ in range(500):
        step()
    grown = tracemalloc.get_traced_memory()[0] - first
    tracemalloc.stop()
    assert grown < 20000


def test_backward_with_gradient_under_jit_trace_runs_eagerly():
    # a traced function that calls backward (even through a name imported
    # before tracing) runs eagerly: a replay would not run the sweep
    from tape.autograd import backward

    @tape.jit
    def f(x):
        y = x * 2
        backward(y, tape.ones(2))
        return y.detach()

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    f(x)
    f(x)
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])
    assert f.fallback_reasons()
