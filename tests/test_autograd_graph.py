"""tape.autograd.graph (Node, gradient edges, increment_version, multi-grad hooks,
saved-tensor hooks) and the grad-mode names, against PyTorch where installed."""
import numpy as np
import pytest

import tape
from tape.autograd import graph


def _torch():
    return pytest.importorskip('torch')


# ------------------------------------------------------------------ Node
def test_node_isinstance():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).exp()
    assert isinstance(y.grad_fn, graph.Node)
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == 'torch::autograd::AccumulateGrad' and isinstance(acc, graph.Node)
    assert not isinstance(3, graph.Node) and not isinstance(x, graph.Node)

    class Twice(tape.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    assert isinstance(Twice.apply(x).grad_fn, graph.Node)


# ----------------------------------------------------------- gradient edges
def test_gradient_edge_grad_matches_tensor_inputs():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x.sin()
    y = (h * h).sum()
    edge = graph.get_gradient_edge(h)
    assert edge.node is h.grad_fn and edge.output_nr == 0
    by_edge = tape.autograd.grad(y, [edge, graph.get_gradient_edge(x)], retain_graph=True)
    by_tensor = tape.autograd.grad(y, [h, x])
    for a, b in zip(by_edge, by_tensor):
        np.testing.assert_allclose(a.numpy(), b.numpy())
    leaf_edge = graph.get_gradient_edge(x)
    assert leaf_edge.node.name() == 'torch::autograd::AccumulateGrad'
    assert leaf_edge.node.variable is x


def test_gradient_edge_errors():
    with pytest.raises(RuntimeError, match='does not require gradients'):
        graph.get_gradient_edge(tape.ones(2))
    x = tape.ones(2, requires_grad=True)
    y = (x * x).sum()
    hand_made = graph.GradientEdge(y.grad_fn, 0)
    with pytest.raises(RuntimeError, match='GradientEdge'):
        tape.autograd.grad(y, hand_made)


def test_output_nr_against_torch():
    torch = _torch()
    for lib in (tape, torch):
        class Split(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 1, a * 2

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 + 2 * g2
        x = lib.ones(3, requires_grad=True)
        p, q = Split.apply(x)
        assert (p.output_nr, q.output_nr, x.output_nr, (x * 2).output_nr) == (0, 1, 0, 0)


# ------------------------------------------------------- increment_version
def test_increment_version_makes_backward_raise_like_torch():
    torch = _torch()
    for lib in (tape, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        z = (y * y).sum()
        v = y._version
        lib.autograd.graph.increment_version(y)
        assert y._version == v + 1
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            z.backward()
    c = tape.ones(2)
    tape.autograd.graph.increment_version([c, c])
    assert c._version == 2


# ----------------------------------------------------- multi-grad hooks
def _multi_all(lib):
    out = []
    a = lib.rand(2, 3, requires_grad=True)
    b = lib.rand(2, 3, requires_grad=True)
    c = a * b
    d = a * b
    h = lib.autograd.graph.register_multi_grad_hook(
        (a, b, c, d), lambda grads: out.append([g is not None for g in grads]))
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    h.remove()
    c.sum().backward(retain_graph=True)
    return out


def test_register_multi_grad_hook_all_against_torch():
    torch = _torch()
    assert _multi_all(tape) == _multi_all(torch) == [
        [True, True, True, False], [True, False, True, False]]


def test_register_multi_grad_hook_any_and_values():
    torch = _torch()
    res = {}
    for lib in (tape, torch):
        seen = []
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: seen.append(g.tolist()),
                                                     mode='any')
        (a * b).sum().backward()
        (a * 5).sum().backward()
        vals = []
        lib.autograd.graph.register_multi_grad_hook(
            (a, b), lambda gs: vals.append([None if g is None else g.tolist() for g in gs]))
        (a * b * 2).sum().backward()
        res[lib.__name__] = (len(seen), seen[1], vals)
    assert res['tape'] == res['torch']
    assert res['tape'][0] == 3


def test_register_multi_grad_hook_bad_mode_and_failed_backward():
    x = tape.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match='mode'):
        graph.register_multi_grad_hook((x,), print, mode='some')
    calls = []
    graph.register_multi_grad_hook((x,), calls.append)

    def bad(g):
        raise ValueError('hook failed')
    y = x * 2
    y.register_hook(bad)
    with pytest.raises(ValueError, match='hook failed'):
        y.sum().backward()
    assert calls == []              # the failed backward's pending call was dropped
    (x * 3).sum().backward()
    assert len(calls) == 1 and calls[0][0].tolist() == [3.0, 3.0]


# ----------------------------------------------------- saved tensor hooks
def _doc_example(lib):
    log = []

    def pack_hook(x):
        log.append(('pack', x.detach().tolist()))
        return x.detach()

    def unpack_hook(x):
        log.append(('unpack', x.tolist()))
        return x
    a = lib.ones(5, requires_grad=True)
    b = lib.ones(5, requires_grad=True) * 2
    with lib.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = a * b
    log.append('forward done')
    y.sum().backward()
    return log, a.grad.tolist()


def test_saved_tensors_hooks_doc_example_against_torch():
    torch = _torch()
    (ours, grad), (theirs, tgrad) = _doc_example(tape), _doc_example(torch)
    assert grad == tgrad
    # the same calls, packing during the forward and unpacking during the backward
    # (PyTorch's mul saves its second operand first)
    done = ours.index('forward done')
    assert done == theirs.index('forward done')
    assert sorted(ours[:done]) == sorted(theirs[:done])
    assert sorted(ours[done + 1:]) == sorted(theirs[done + 1:])


@pytest.mark.parametrize('n', [4, 20000])          # small records and large ones
def test_unpacked_values_are_used_against_torch(n):
    torch = _torch()
    out = {}
    for lib in (tape, torch):
        x = lib.tensor(np.linspace(0.1, 1.0, n), requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 2):
            y = (x * x).sum() + (x.sin() * 3).sum()
        y.backward()
        out[lib.__name__] = x.grad.numpy().copy()
    np.testing.assert_allclose(out['tape'], out['torch'], rtol=1e-12)


def test_unpack_called_per_backward_with_retain_graph():
    torch = _torch()
    counts = {}
    for lib in (tape, torch):
        calls = [0, 0]

        def pack(t):
            calls[0] += 1
            return t

        def unpack(t):
            calls[1] += 1
            return t
        x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = x.exp().sum()
        y.backward(retain_graph=True)
        y.backward()
        counts[lib.__name__] = tuple(calls)
    assert counts['tape'] == counts['torch'] == (1, 2)


def test_graph_started_before_the_context_and_nested_contexts():
    torch = _torch()
    res = {}
    for lib in (tape, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a * 3                       # recorded before any hook context
        G = lib.autograd.graph
        with G.saved_tensors_hooks(lambda t: t, lambda t: t * 100):
            with G.saved_tensors_hooks(lambda t: t, lambda t: t * 10):     # innermost wins
                c = (b * b).sum()
            d = (b * 2).sum()
        (c + d).backward()
        res[lib.__name__] = a.grad.tolist()
    assert res['tape'] == res['torch']


def test_custom_function_saved_tensors_go_through_hooks():
    torch = _torch()
    res = {}
    for lib in (tape, torch):
        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g
        packed = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or 'k',
                                                    lambda k: packed[0] * 3):
            y = Square.apply(x).sum()
        y.backward()
        res[lib.__name__] = (x.grad.tolist(), packed[0] is x)
    assert res['tape'] == res['torch']


def test_create_graph_through_hooked_values_against_torch():
    torch = _torch()
    res = {}
    for lib in (tape, torch):
        x = lib.tensor([0.3, 0.7], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = (x * x * x).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), x)
        res[lib.__name__] = (g.tolist(), gg.tolist())
    np.testing.assert_allclose(res['tape'], res['torch'])


def test_pack_hook_error_leaves_the_graph_usable():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    calls = [0]

    def pack(t):
        calls[0] += 1
        if calls[0] == 2:
            raise ValueError('cannot pack')
        return t
    with graph.saved_tensors_hooks(pack, lambda t: t):
        with pytest.raises(ValueError, match='cannot pack'):
            h * h                       # the second of its two saved values fails
        z = (h * x).sum()               # the graph records on as before
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])       # d/dx sum(3x * x)


def test_unpack_hook_must_return_a_tensor_of_the_saved_size():
    x = tape.ones(3, requires_grad=True)
    with graph.saved_tensors_hooks(lambda t: t, lambda t: 5):
        y = (x * x).sum()
    with pytest.raises(TypeError, match='unpack_hook'):
        y.backward()
    with graph.saved_tensors_hooks(lambda t: t, lambda t: tape.ones(2)):
        y = (x * x).sum()
    with pytest.raises(RuntimeError, match='shape'):
        y.backward()


def test_disable_and_save_on_cpu():
    torch = _torch()
    for lib in (tape, torch):
        G = lib.autograd.graph
        with G.disable_saved_tensors_hooks('hooks are off here'):
            with pytest.raises(RuntimeError, match='hooks are off here'):
                with G.save_on_cpu():
                    pass
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with G.save_on_cpu(pin_memory=False):
            y = (x.exp() * x).sum()
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), (np.exp([1.0, 2.0]) * [2.0, 3.0]),
                                   rtol=1e-6)


def test_saved_self_reads_through_hooks():
    torch = _torch()
    res = {}
    for lib in (tape, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t + 1):
            y = x * x
        res[lib.__name__] = y.grad_fn._saved_self.tolist()
    assert res['tape'] == res['torch']


def test_jit_runs_eagerly_under_hooks():
    calls = [0]

    @tape.jit
    def f(x):
        return (x * x).sum()
    x = tape.ones(3, requires_grad=True)
    f(x).backward()
    f(x).backward()                     # a replay
    with graph.saved_tensors_hooks(lambda t: calls.__setitem__(0, calls[0] + 1) or t,
                                   lambda t: t):
        f(x).backward()
    assert calls[0] == 2
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])


# -------------------------------------------------------------- grad modes
def test_inference_mode_flags_against_torch():
    torch = _torch()
    for lib in (tape, torch):
        assert not lib.is_inference_mode_enabled()
        with lib.no_grad():
            assert not lib.is_inference_mode_enabled()
        with lib.autograd.inference_mode():
            assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
            with lib.inference_mode(False):
                assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
            assert lib.is_inference_mode_enabled()

        @lib.inference_mode
        def f(x):
            return (x * 2).requires_grad, lib.is_inference_mode_enabled()
        assert f(lib.ones(2, requires_grad=True)) == (False, True)
        assert not lib.is_inference_mode_enabled()
        assert lib.autograd.grad_mode.no_grad is lib.no_grad


def test_looking_at_next_functions_keeps_parameters_on_the_fast_paths():
    # the AccumulateGrad node is kept outside the leaf's _extra, whose presence
    # sends F.linear, gradient delivery and the optimizers down their general
    # (slower) paths: a look at the graph must not change a training step
    nn = tape.nn
    m = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    opt = tape.optim.SGD(m.parameters(), lr=0.1)
    x = tape.randn(5, 4)
    loss = m(x).pow(2).sum()

    def walk(f, seen):
        if f is None or id(f) in seen:
            return
        seen[id(f)] = f
        for c, _ in f.next_functions:
            walk(c, seen)
    seen = {}
    walk(loss.grad_fn, seen)
    accs = [f for f in seen.values() if type(f).__name__ == 'AccumulateGrad']
    assert {id(f.variable) for f in accs} == {id(p) for p in m.parameters()}
    assert all(p._extra is None for p in m.parameters())
    # the same node on a second look, and from another graph of the same leaf
    w = m[0].weight
    acc = next(f for f in accs if f.variable is w)
    again = {}
    walk(m(x).sum().grad_fn, again)
    assert [f for f in again.values() if getattr(f, 'variable', None) is w] == [acc]
    loss.backward()
    before = [p._data for p in m.parameters()]
    opt.step()
    # the optimizer wrote into each parameter's own storage (its fast path)
    assert all(p._data is d for p, d in zip(m.parameters(), before))
    assert all(p._extra is None for p in m.parameters())
