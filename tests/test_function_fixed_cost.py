"""The fixed-cost paths of a custom Function's backward, against PyTorch:
the sweep of a tape of Python records only (tape/_sweep.py ``_run_python``,
with ``SlotGrads`` in place of an arena), the Python record met at the root
or inside a compiled sweep without a kernel call, grad mode set once per
sweep, and the thread set behind ``grad_off``.  Each test runs the same
program in both libraries; the fallbacks (hooks on the output, create_graph,
mixed tapes) are checked to agree with the fast path."""
import threading

import numpy as np
import pytest

import tape
from tape import _sweep
from tape._tape import grad_mode, grad_off, set_grad_mode

torch = pytest.importorskip("torch")


def _fn(lib, name='Scale'):
    """y = 2 x (saves x); the same class in both libraries."""
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2
    Scale.__name__ = Scale.__qualname__ = name
    return Scale


def _sigmoid(lib):
    class Sigmoid(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = 1 / (1 + lib.exp(-x))
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return out * (1 - out) * g
    return Sigmoid


def _pair(a, rg=True):
    return tape.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg)


def _close(t, p, rtol=1e-5, atol=1e-6):
    assert (t is None) == (p is None)
    if t is None:
        return
    assert str(t.dtype).split('.')[-1] == str(p.dtype).split('.')[-1]
    np.testing.assert_allclose(t.detach().numpy(), p.detach().numpy(), rtol=rtol, atol=atol)


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _spy(monkeypatch):
    """Count the calls of the Python-only sweep."""
    calls = []
    orig = _sweep._run_python

    def spy(*a):
        calls.append(1)
        return orig(*a)
    monkeypatch.setattr(_sweep, '_run_python', spy)
    return calls


@pytest.mark.parametrize('shape', [(32, 10), (64, 256)])      # small and big slots
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_one_function_seeded_matches_torch(monkeypatch, shape, dtype):
    calls = _spy(monkeypatch)
    a = _rand(*shape, dtype=dtype)
    g = _rand(*shape, dtype=dtype, seed=1)
    tx, px = _pair(a)
    for _ in range(2):          # the second accumulates into .grad
        _sigmoid(tape).apply(tx).backward(tape.tensor(g))
        _sigmoid(torch).apply(px).backward(torch.tensor(g))
    _close(tx.grad, px.grad)
    assert calls == [1, 1]


def test_scalar_loss_and_seed_left_unchanged():
    a = _rand(5)
    tx, px = _pair(a)
    seed = tape.ones(5)

    class Mean(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.numel()
            return x.sum() / ctx.n

        @staticmethod
        def backward(ctx, g):
            return g.expand(ctx.n) / ctx.n

    class PMean(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.numel()
            return x.sum() / ctx.n

        @staticmethod
        def backward(ctx, g):
            return g.expand(ctx.n) / ctx.n
    Mean.apply(tx).backward()
    PMean.apply(px).backward()
    _close(tx.grad, px.grad)
    y = _fn(tape).apply(tx)
    y.backward(seed)
    np.testing.assert_array_equal(seed.numpy(), np.ones(5, np.float32))


def test_chain_of_functions_and_input_twice():
    a = _rand(4, 3)
    tx, px = _pair(a)

    class Mul(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x

    class PMul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x
    ty = _sigmoid(tape).apply(Mul.apply(tx, tx))
    py = _sigmoid(torch).apply(PMul.apply(px, px))
    assert ty._tape.n == len(ty._tape.py) == 2
    ty.sum().backward()
    py.sum().backward()
    _close(tx.grad, px.grad)
    # and the same chain seeded directly (the Python-only sweep)
    tx.grad = None
    px.grad = None
    g = _rand(4, 3, seed=3)
    _sigmoid(tape).apply(Mul.apply(tx, tx)).backward(tape.tensor(g))
    _sigmoid(torch).apply(PMul.apply(px, px)).backward(torch.tensor(g))
    _close(tx.grad, px.grad)


def test_unreached_record_keeps_its_graph():
    tx, px = _pair(_rand(3))
    out = {}
    for lib, x in ((tape, tx), (torch, px)):
        f = _fn(lib)
        y1 = f.apply(x)
        y2 = f.apply(x)
        y2.backward(lib.ones(3))
        y1.backward(lib.ones(3))            # y1's record was not swept: still alive
        with pytest.raises(RuntimeError, match='backward through the graph a second time'):
            y2.backward(lib.ones(3))
        out[lib.__name__] = x.grad
    _close(out['tape'], out['torch'])


def test_second_backward_error_and_retain_graph():
    tx, px = _pair(_rand(3))
    for lib, x in ((tape, tx), (torch, px)):
        y = _fn(lib).apply(x)
        y.backward(lib.ones(3), retain_graph=True)
        y.backward(lib.ones(3))
        with pytest.raises(RuntimeError, match='backward through the graph a second time'):
            y.backward(lib.ones(3))
    _close(tx.grad, px.grad)


def test_backward_reading_nothing_runs_again():
    for lib in (tape, torch):
        x = lib.ones(3, requires_grad=True)

        class Id(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g
        y = Id.apply(x)
        y.backward(lib.ones(3))
        y.backward(lib.ones(3))
        np.testing.assert_array_equal(np.asarray(x.grad.detach().numpy()), [2, 2, 2])


def test_grad_mode_inside_backward_and_restored_after_error():
    seen = []

    class Probe(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(tape.is_grad_enabled())
            if len(seen) == 2:
                tape.set_grad_enabled(True)     # turned on inside: undone after
            if len(seen) == 3:
                raise ValueError('boom')
            return g
    x = tape.ones(2, requires_grad=True)
    Probe.apply(x).backward(tape.ones(2))
    Probe.apply(x).backward(tape.ones(2))
    assert tape.is_grad_enabled() and not grad_off[0]
    with pytest.raises(ValueError, match='boom'):
        Probe.apply(x).backward(tape.ones(2))
    assert tape.is_grad_enabled() and not grad_off[0]
    with tape.no_grad():
        pass
    y = Probe.apply(x)
    tape.autograd.grad(y, x, tape.ones(2), create_graph=True)
    assert seen == [False, False, False, True]
    # under no_grad: the sweep leaves recording off
    y = Probe.apply(x)
    with tape.no_grad():
        y.backward(tape.ones(2))
        assert not tape.is_grad_enabled()
    assert tape.is_grad_enabled() and not grad_off[0]


def test_create_graph_agrees():
    a = _rand(3, 2, dtype=np.float64)
    tx, px = _pair(a)
    t1, = tape.autograd.grad(_sigmoid(tape).apply(tx).sum(), tx, create_graph=True)
    p1, = torch.autograd.grad(_sigmoid(torch).apply(px).sum(), px, create_graph=True)
    _close(t1, p1)
    t1.sum().backward()
    p1.sum().backward()
    _close(tx.grad, px.grad)
    tx.grad = None
    _sigmoid(tape).apply(tx).backward(tape.ones(3, 2, dtype=tape.float64))
    _close(tx.grad, p1.detach())


def test_hooks_on_input_and_output():
    for lib_x in (_pair(_rand(4)),):
        tx, px = lib_x
    logs = {'tape': [], 'torch': []}
    for lib, x in ((tape, tx), (torch, px)):
        log = logs[lib.__name__]
        h = x.register_hook(lambda g, log=log: (log.append('leaf'), g * 3)[1])
        y = _fn(lib).apply(x)
        y.register_hook(lambda g, log=log: (log.append('out'), g + 1)[1])
        y.backward(lib.ones(4))
        h.remove()
        _fn(lib).apply(x).backward(lib.ones(4))     # no hooks now
        x.register_post_accumulate_grad_hook(lambda p, log=log: log.append('post'))
        _fn(lib).apply(x).backward(lib.ones(4))
    assert logs['tape'] == logs['torch'] == ['out', 'leaf', 'post']
    _close(tx.grad, px.grad)


def test_several_outputs_materialized_or_not():
    a = _rand(3)
    for materialize in (True, False):
        got = {}
        for lib in (tape, torch):
            x = lib.tensor(a, requires_grad=True)
            seen = []

            class Two(lib.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.set_materialize_grads(materialize)
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, ga, gb):
                    seen.append((ga is None, gb is None))
                    out = 0
                    if ga is not None:
                        out = out + ga * 2
                    if gb is not None:
                        out = out + gb * 3
                    return out
            ya, yb = Two.apply(x)
            yb.backward(lib.ones(3))
            got[lib.__name__] = (x.grad, seen)
        _close(got['tape'][0], got['torch'][0])
        assert got['tape'][1] == got['torch'][1]


def test_non_tensor_args_and_none_gradients():
    a, b = _rand(3), _rand(3, seed=1)
    out = {}
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, y):
                ctx.k = k
                return x * k + y

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None, None
        F.apply(x, 2.5, y).backward(lib.ones(3))
        out[lib.__name__] = (x.grad, y.grad)
    _close(out['tape'][0], out['torch'][0])
    assert out['tape'][1] is None and out['torch'][1] is None


def test_needs_input_grad():
    for lib in (tape, torch):
        x = lib.ones(2, requires_grad=True)
        c = lib.ones(2)
        seen = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, c, k):
                return x * c * k

            @staticmethod
            def backward(ctx, g):
                seen.append(tuple(ctx.needs_input_grad))
                return g, None, None
        F.apply(x, c, 2.0).backward(lib.ones(2))
        assert seen == [(True, False, False)]


def test_wrong_count_and_wrong_shape_errors_name_the_function():
    for lib in (tape, torch):
        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g, g
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match='function BadBackward returned an incorrect '
                                               r'number of gradients \(expected 1, got 2\)'):
            Bad.apply(x).backward(lib.ones(2))

        class BadShape(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return lib.ones(5)
        with pytest.raises(RuntimeError, match='Function BadShapeBackward returned an invalid '
                                               'gradient at index 0'):
            BadShape.apply(x).backward(lib.ones(2))


def test_broadcast_gradient_summed_to_input():
    a = _rand(1, 3)
    out = {}
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)

        class Wide(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g.expand(4, 3) * 1
        Wide.apply(x).backward(lib.ones(1, 3))
        out[lib.__name__] = x.grad
    _close(out['tape'], out['torch'])


def test_dirty_and_non_differentiable_outputs():
    a = _rand(3)
    out = {}
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)

        class AddOneInPlace(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                t.add_(1)
                ctx.mark_dirty(t)
                return t

            @staticmethod
            def backward(ctx, g):
                return g * 5

        class WithIndex(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                idx = t.argmax().reshape(1).to(t.dtype)
                ctx.mark_non_differentiable(idx)
                return t * 2, idx

            @staticmethod
            def backward(ctx, g, gi):
                return g * 2
        y = x.clone()
        z = AddOneInPlace.apply(y)
        v, i = WithIndex.apply(z)
        assert not i.requires_grad
        v.backward(lib.ones(3))
        out[lib.__name__] = x.grad
    _close(out['tape'], out['torch'])


def test_inplace_change_of_saved_tensor_raises():
    for lib in (tape, torch):
        x = lib.ones(3, requires_grad=True)
        w = lib.ones(3)

        class MulW(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(w)
                return x * w

            @staticmethod
            def backward(ctx, g):
                w, = ctx.saved_tensors
                return g * w, None
        y = MulW.apply(x, w)
        w.mul_(2)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            y.backward(lib.ones(3))


def test_saved_tensor_hooks():
    a = _rand(3)
    logs = {}
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)
        log = logs[lib.__name__] = []

        def pack(t, log=log):
            log.append('pack')
            return t * 1

        def unpack(t, log=log):
            log.append('unpack')
            return t
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = _sigmoid(lib).apply(x)
        y.backward(lib.ones(3))
    assert logs['tape'] == logs['torch'] == ['pack', 'unpack']


def test_once_differentiable():
    a = _rand(3, dtype=np.float64)
    tx, px = _pair(a)
    for lib, x in ((tape, tx), (torch, px)):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            @lib.autograd.function.once_differentiable
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 3 * x * x * g
        Cube.apply(x).backward(lib.ones(3, dtype=lib.float64))
        y = Cube.apply(x)
        g, = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError, match='trying to differentiate twice'):
            g.sum().backward()
    _close(tx.grad, px.grad)


def test_python_record_at_root_of_a_mixed_tape():
    a = _rand(4, 5)
    tx, px = _pair(a)
    for lib, x in ((tape, tx), (torch, px)):
        h = lib.tanh(x * 3)
        y = _sigmoid(lib).apply(h)
        y = _sigmoid(lib).apply(y)
        y.backward(lib.ones(4, 5))
        # and a Python record in the middle of a compiled sweep
        (_sigmoid(lib).apply(lib.tanh(x)) * 2).sum().backward()
    _close(tx.grad, px.grad)


def test_library_functions_through_the_fast_path():
    F_t, F_p = tape.nn.functional, torch.nn.functional
    a = _rand(6, 40)
    w, b = _rand(40, seed=2), _rand(40, seed=3)
    t = np.array([1, 0, 3, 39, 2, 5])
    tx, px = _pair(a)
    tw, pw = _pair(w)
    tb, pb = _pair(b)
    for _ in range(2):
        F_t.softmax(tx, -1).backward(tape.tensor(_rand(6, 40, seed=4)))
        F_p.softmax(px, -1).backward(torch.tensor(_rand(6, 40, seed=4)))
        F_t.log_softmax(tx, 1).backward(tape.ones(6, 40))
        F_p.log_softmax(px, 1).backward(torch.ones(6, 40))
        F_t.layer_norm(tx, (40,), tw, tb).backward(tape.tensor(_rand(6, 40, seed=5)))
        F_p.layer_norm(px, (40,), pw, pb).backward(torch.tensor(_rand(6, 40, seed=5)))
        F_t.cross_entropy(tx, tape.tensor(t)).backward()
        F_p.cross_entropy(px, torch.tensor(t)).backward()
    for tt, pp in ((tx, px), (tw, pw), (tb, pb)):
        _close(tt.grad, pp.grad, rtol=1e-4, atol=1e-5)


def test_leaf_that_stopped_requiring_grad_gets_nothing():
    x = tape.ones(3, requires_grad=True)
    y = _fn(tape).apply(x)
    x.requires_grad_(False)
    y.backward(tape.ones(3))
    assert x.grad is None


def test_mixed_dtypes_of_input_and_output():
    a = _rand(3, dtype=np.float64)
    out = {}
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)

        class ToF32(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.to(lib.float32) * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2            # float32, for a float64 input: cast
        ToF32.apply(x).backward(lib.ones(3))
        out[lib.__name__] = x.grad
    _close(out['tape'], out['torch'])


def test_set_grad_mode_is_idempotent_and_per_thread():
    assert not grad_off[0]
    set_grad_mode(False)
    set_grad_mode(False)
    assert grad_off[0]
    set_grad_mode(True)
    assert not grad_off[0] and grad_mode.enabled
    x = tape.ones(2, requires_grad=True)
    inside, go = threading.Event(), threading.Event()

    def other():
        with tape.no_grad():
            inside.set()
            go.wait(5)
    th = threading.Thread(target=other)
    th.start()
    inside.wait(5)
    try:
        assert grad_off[0]              # another thread has recording off ...
        y = _fn(tape).apply(x)          # ... this one still records
        assert y.requires_grad
        y.backward(tape.ones(2))
    finally:
        go.set()
        th.join()
    assert not grad_off[0]
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2])


@pytest.mark.parametrize('mixed', [False, True])
def test_a_multi_output_function_reached_through_a_later_output_is_freed(mixed):
    """PyTorch frees a node's saved tensors when its backward runs, whichever
    output brought the gradient: a second backward then raises."""
    seen = []

    class Two(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1 is None, g2 is None))
            x, = ctx.saved_tensors
            return g2 * 3

    x = tape.ones(3, requires_grad=True)
    y1, y2 = Two.apply(x * 1.0 if mixed else x)
    y2.sum().backward()
    assert seen == [(True, False)]          # the unused output's gradient stays None
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])
    with pytest.raises(RuntimeError, match='second time'):
        y2.sum().backward()
