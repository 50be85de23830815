"""Node hooks: ``grad_fn.register_hook`` / ``register_prehook``, on AccumulateGrad too.

The first half pins PyTorch's behaviour without torch (values worked out by
hand); the second runs the same programs on torch and on tape and compares
what the hooks saw and the gradients (``torch = pytest.importorskip``).
"""
import numpy as np
import pytest

import tape
from tape._tape import grad_mode


def t64(values, requires_grad=True):
    return tape.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)


def arr(t):
    return None if t is None else np.asarray(t.numpy(), dtype=np.float64)


# ------------------------------------------------------- post hooks
def test_post_hook_sees_grad_inputs_and_grad_outputs():
    x = t64([1.0, 2.0])
    y = x * 3.0
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((gi, go)))
    (y * y).sum().backward()
    (gi, go), = seen
    assert isinstance(gi, tuple) and isinstance(go, tuple)
    assert len(gi) == len(y.grad_fn.next_functions) == 2
    np.testing.assert_allclose(arr(go[0]), [6.0, 12.0])        # 2 y
    np.testing.assert_allclose(arr(gi[0]), [18.0, 36.0])       # 3 * 2 y
    assert gi[1] is None                                       # the constant 3
    np.testing.assert_allclose(arr(x.grad), [18.0, 36.0])


def test_post_hook_replacement_flows_upstream_and_chains():
    x = t64([1.0, 2.0])
    y = x.exp()
    z = y * 2.0
    seen = []
    z.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, gi[1]))
    z.grad_fn.register_hook(lambda gi, go: seen.append(arr(gi[0])))     # sees the first's
    y.register_hook(lambda g: seen.append(arr(g)))                      # and so does y's
    z.sum().backward()
    np.testing.assert_allclose(seen[0], [20.0, 20.0])
    np.testing.assert_allclose(seen[1], [20.0, 20.0])
    np.testing.assert_allclose(arr(x.grad), 20.0 * np.exp([1.0, 2.0]))


def test_post_hook_returning_none_entry_drops_the_gradient():
    x = t64([1.0, 2.0])
    w = t64([3.0, 4.0])
    y = x * w
    y.grad_fn.register_hook(lambda gi, go: (None, gi[1]))
    y.sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(arr(w.grad), [1.0, 2.0])


def test_same_input_twice_gives_two_separate_entries():
    x = t64([1.0, 2.0])
    y = x * 3.0
    z = y * y
    seen = []
    z.grad_fn.register_hook(lambda gi, go: seen.append([arr(g) for g in gi]) or (gi[0], gi[1] * 0))
    z.sum().backward()
    np.testing.assert_allclose(seen[0][0], [3.0, 6.0])        # grad * b
    np.testing.assert_allclose(seen[0][1], [3.0, 6.0])        # grad * a
    np.testing.assert_allclose(arr(x.grad), [9.0, 18.0])      # only the first half, times 3


def test_broadcast_input_is_shown_before_broadcasting():
    x = t64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = t64([10.0, 20.0, 30.0])
    y = x * b
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(gi) or (gi[0], gi[1] * 2))
    y.sum().backward()
    gi = seen[0]
    assert tuple(gi[0].shape) == (2, 3) and tuple(gi[1].shape) == (3,)
    np.testing.assert_allclose(arr(gi[1]), [5.0, 7.0, 9.0])
    np.testing.assert_allclose(arr(b.grad), [10.0, 14.0, 18.0])
    np.testing.assert_allclose(arr(x.grad), np.broadcast_to([10.0, 20.0, 30.0], (2, 3)))


def test_hook_on_the_first_record_of_a_fresh_tape():
    grad_mode.open_tape = None          # the next op starts a new tape: record 0
    x = t64([1.0, 2.0])
    y = x.exp()
    assert y._rec == 0
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 0 + 7,))
    (y * y).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [7.0, 7.0])


def test_matrix_product_node():
    rng = np.random.default_rng(0)
    a, b = t64(rng.standard_normal((3, 4))), t64(rng.standard_normal((4, 2)))
    y = a.mm(b)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(gi) or (gi[0] * 2, None))
    y.sum().backward()
    assert tuple(seen[0][0].shape) == (3, 4) and tuple(seen[0][1].shape) == (4, 2)
    np.testing.assert_allclose(arr(a.grad), 2 * np.ones((3, 2)) @ b.detach().numpy().T)
    assert b.grad is None


def test_hooks_on_a_node_reached_through_next_functions():
    x = t64([[1.0, 2.0], [3.0, 4.0]])
    z = x.exp().sum()
    exp_node = z.grad_fn.next_functions[0][0]
    seen = []
    exp_node.register_hook(lambda gi, go: seen.append((gi, go)) or (gi[0] * 2,))
    z.backward()
    gi, go = seen[0]
    assert tuple(go[0].shape) == (2, 2) and tuple(gi[0].shape) == (2, 2)
    np.testing.assert_allclose(arr(x.grad), 2 * np.exp([[1.0, 2.0], [3.0, 4.0]]))


def test_unreached_node_runs_no_hooks():
    x = t64([1.0, 2.0])
    y, w = x * x, x.exp()
    calls = []
    w.grad_fn.register_hook(lambda gi, go: calls.append('post'))
    w.grad_fn.register_prehook(lambda go: calls.append('pre'))
    y.sum().backward()
    assert calls == []


def test_noop_hook_changes_no_bit_of_a_float32_gradient():
    def grads(hook):
        x = tape.tensor(np.array([0.3, 1.7, -2.2], np.float32), requires_grad=True)
        y = x.exp()
        if hook:
            y.grad_fn.register_hook(lambda gi, go: None)
        (y * y.sin()).sum().backward()
        return x.grad.numpy()
    np.testing.assert_array_equal(grads(True), grads(False))


def test_large_tensors_take_the_numpy_path():
    rng = np.random.default_rng(1)
    data = rng.standard_normal(20000)
    x = t64(data)
    y = x * 2.0
    z = y.sin()
    seen = []
    z.grad_fn.register_hook(lambda gi, go: seen.append(gi[0].shape) or (gi[0] * 3,))
    (z * y).sum().backward()
    assert tuple(seen[0]) == (20000,)
    y0 = 2 * data
    np.testing.assert_allclose(arr(x.grad), 2 * (3 * np.cos(y0) * y0 + np.sin(y0)))


def test_hook_registered_before_tapes_merge():
    x = t64([1.0, 2.0])
    y = x.exp()
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 2,))
    w = t64([3.0, 4.0])
    u = w.sin() * 2
    for _ in range(70):     # past the open tape's size: u lives on a tape of its own
        u = u + 0
    (y * u).sum().backward()
    np.testing.assert_allclose(arr(x.grad), 2 * np.exp([1.0, 2.0]) * 2 * np.sin([3.0, 4.0]))
    np.testing.assert_allclose(arr(w.grad), np.exp([1.0, 2.0]) * 2 * np.cos([3.0, 4.0]))


# ------------------------------------------------------- pre hooks, order
def test_order_tensor_hooks_retain_grad_prehooks_posthooks():
    x = t64([1.0, 2.0])
    y = x * x
    log = []
    y.grad_fn.register_prehook(lambda go: log.append(('pre1', arr(go[0]))) or (go[0] * 5,))
    y.register_hook(lambda g: log.append(('tensor', arr(g))))
    y.grad_fn.register_hook(lambda gi, go: log.append(('post', arr(go[0]), arr(gi[0]))))
    y.grad_fn.register_prehook(lambda go: log.append(('pre2', arr(go[0]))))
    y.retain_grad()
    y.sum().backward()
    assert [e[0] for e in log] == ['tensor', 'pre1', 'pre2', 'post']
    np.testing.assert_allclose(log[2][1], [5.0, 5.0])          # pre2 sees pre1's
    np.testing.assert_allclose(log[3][1], [5.0, 5.0])          # so does post's grad_outputs
    np.testing.assert_allclose(log[3][2], [5.0, 10.0])
    np.testing.assert_allclose(arr(y.grad), [1.0, 1.0])        # retain_grad: before prehooks
    np.testing.assert_allclose(arr(x.grad), [10.0, 20.0])


def test_prehook_returning_none_drops_the_gradient():
    x = t64([1.0, 2.0])
    y = x.exp()
    y.grad_fn.register_prehook(lambda go: (None,))
    y.sum().backward()
    assert x.grad is None


def test_autograd_grad_of_a_hooked_output_is_taken_before_the_node():
    x = t64([1.0, 2.0])
    y = x * x
    z = y * 3.0
    y.grad_fn.register_prehook(lambda go: (go[0] * 100,))
    gy, gx = tape.autograd.grad(z.sum(), [y, x])
    np.testing.assert_allclose(arr(gy), [3.0, 3.0])
    np.testing.assert_allclose(arr(gx), [600.0, 1200.0])


# ------------------------------------------------------- handles, retain_graph
def test_retain_graph_runs_hooks_each_time_and_remove_stops_them():
    x = t64([1.0, 2.0])
    y = x * x
    calls = []
    h = y.grad_fn.register_hook(lambda gi, go: calls.append(1))
    y.sum().backward(retain_graph=True)
    y.sum().backward(retain_graph=True)
    h.remove()
    h.remove()                      # twice is fine
    y.sum().backward()
    assert len(calls) == 2
    np.testing.assert_allclose(arr(x.grad), [6.0, 12.0])
    with pytest.raises(RuntimeError, match='second time'):
        y.sum().backward()


def test_handle_works_as_context_manager():
    x = t64([1.0, 2.0])
    y = x.exp()
    with y.grad_fn.register_prehook(lambda go: (go[0] * 0,)):
        pass
    y.sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.exp([1.0, 2.0]))


def test_hook_must_be_callable():
    x = t64([1.0])
    with pytest.raises(TypeError):
        (x * 2).grad_fn.register_hook(3)


# ------------------------------------------------------- errors (PyTorch's messages)
@pytest.mark.parametrize('ret, err, msg', [
    (lambda gi: gi[0], TypeError, "expected tuple, but hook returned 'Tensor'"),
    (lambda gi: [gi[0]], TypeError, "expected tuple, but hook returned 'list'"),
    (lambda gi: (gi[0], gi[0]), RuntimeError, r'incorrect number of values \(got 2, but '
                                              r'expected 1\)'),
    (lambda gi: (3.0,), TypeError, "expected Variable, but hook returned 'float'"),
    (lambda gi: (gi[0].reshape(4),), RuntimeError, 'has changed the size of value'),
    (lambda gi: (gi[0].float(),), RuntimeError, 'has changed the type of value'),
])
@pytest.mark.parametrize('post', [True, False])
def test_bad_hook_results(ret, err, msg, post):
    x = t64([[1.0, 2.0], [3.0, 4.0]])
    y = x.exp()
    if post:
        y.grad_fn.register_hook(lambda gi, go: ret(gi))
    else:
        y.grad_fn.register_prehook(lambda go: ret(go))
    with pytest.raises(err, match=msg):
        y.sum().backward()


def test_cannot_replace_a_none_gradient():
    x = t64([1.0, 2.0])
    y = x * 2.0
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="can't replace a None gradient"):
        y.sum().backward()


# ------------------------------------------------------- custom Functions
class _Two(tape.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2, a * 3

    @staticmethod
    def backward(ctx, g1, g2):
        out = 0
        if g1 is not None:
            out = out + g1 * 2
        if g2 is not None:
            out = out + g2 * 3
        return out


def test_function_node_with_two_outputs():
    x = t64([1.0, 2.0])
    u, v = _Two.apply(x)
    log = []
    v.register_hook(lambda g: log.append('v tensor hook'))
    u.grad_fn.register_prehook(lambda go: log.append(('pre', go)))
    u.grad_fn.register_hook(lambda gi, go: log.append('post') or (gi[0] * 10,))
    (v * 5).sum().backward()            # only the second output is used
    assert log[0] == 'v tensor hook' and log[2] == 'post'
    go = log[1][1]
    assert go[0] is None
    np.testing.assert_allclose(arr(go[1]), [5.0, 5.0])
    np.testing.assert_allclose(arr(x.grad), [150.0, 150.0])


# ------------------------------------------------------- AccumulateGrad
def test_accumulate_grad_hooks():
    x = t64([1.0, 2.0])
    z = x * x
    acc = z.grad_fn.next_functions[0][0]
    assert acc.name() == 'torch::autograd::AccumulateGrad' and acc.variable is x
    log = []
    x.register_hook(lambda g: log.append(('tensor1', arr(g))))
    acc.register_prehook(lambda go: log.append(('pre', arr(go[0]))) or (go[0] * 10,))
    acc.register_hook(lambda gi, go: log.append(('post', gi, arr(go[0]), arr(x.grad))))
    x.register_hook(lambda g: log.append(('tensor2', arr(g))))     # still before the node's
    z.sum().backward()
    assert [e[0] for e in log] == ['tensor1', 'tensor2', 'pre', 'post']
    np.testing.assert_allclose(log[2][1], [2.0, 4.0])
    assert log[3][1] == ()
    np.testing.assert_allclose(log[3][2], [20.0, 40.0])
    np.testing.assert_allclose(log[3][3], [20.0, 40.0])       # .grad already updated
    (x * 3).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [50.0, 70.0])


def test_accumulate_grad_post_hook_must_return_nothing():
    x = t64([1.0, 2.0])
    z = x * x
    z.grad_fn.next_functions[0][0].register_hook(lambda gi, go: (go[0],))
    with pytest.raises(RuntimeError, match=r'got 1, but expected 0'):
        z.sum().backward()


def test_accumulate_grad_hooks_do_not_run_in_autograd_grad():
    x = t64([1.0, 2.0])
    z = x * x
    calls = []
    z.grad_fn.next_functions[0][0].register_prehook(lambda go: calls.append(1))
    g, = tape.autograd.grad(z.sum(), x)
    assert calls == []
    np.testing.assert_allclose(arr(g), [2.0, 4.0])


def test_accumulate_grad_hook_on_a_large_leaf():
    x = t64(np.ones(20000))
    z = x * x
    seen = []
    z.grad_fn.next_functions[0][0].register_hook(lambda gi, go: seen.append(float(x.grad.sum())))
    z.sum().backward()
    assert seen == [40000.0]


def test_accumulate_grad_prehook_dropping_gives_zeros():
    # PyTorch leaves .grad None here; tape accumulates zeros (README, Known differences)
    x = t64([1.0, 2.0])
    z = x * x
    z.grad_fn.next_functions[0][0].register_prehook(lambda go: (None,))
    z.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [0.0, 0.0])


# ------------------------------------------------------- the fast paths stay fast
def test_no_hooks_keeps_the_tape_hook_free():
    x = t64([1.0, 2.0])
    y = x * x
    assert y.grad_fn.next_functions[0][0] is not None
    assert y._tape.hooks is None        # so backward() takes run_scalar's fast path


# ------------------------------------------------------- create_graph
def test_node_hooks_with_create_graph():
    x = t64([1.0, 2.0])
    y = x * x
    seen = []
    y.grad_fn.register_prehook(lambda go: seen.append(go[0].requires_grad))
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 3, gi[1]))
    g, = tape.autograd.grad(y.exp().sum(), x, create_graph=True)
    assert seen == [True] and g.requires_grad
    xs = np.array([1.0, 2.0])
    np.testing.assert_allclose(arr(g.detach()), 4 * xs * np.exp(xs ** 2))   # (3 + 1) x e^(x^2)
    gg, = tape.autograd.grad(g.sum(), x)
    # the second backward passes the hooked node again (PyTorch gives the same)
    assert seen == [True, False]
    np.testing.assert_allclose(arr(gg), np.exp(xs ** 2) * (4 + 16 * xs ** 2))


# ------------------------------------------------------- PyTorch as oracle
def _case_post_and_pre(lib, log):
    x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = lib.tensor(np.array([3.0, 4.0]))
    y = x * c
    z = y * 2
    z.register_hook(lambda g: log.append(('z tensor', g)))
    z.grad_fn.register_prehook(lambda go: log.append(('pre z', go)))
    z.grad_fn.register_hook(lambda gi, go: log.append(('post z', gi, go)))
    y.grad_fn.register_hook(lambda gi, go: log.append(('post y', gi, go)))
    y.register_hook(lambda g: log.append(('y tensor', g)))
    z.sum().backward()
    return x.grad


def _case_broadcast_nonleaf(lib, log):
    x = lib.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), requires_grad=True)
    b = lib.tensor(np.array([[0.1, 0.2, 0.3]]), requires_grad=True)
    y = x / b.exp()
    y.grad_fn.register_hook(lambda gi, go: log.append(('post', gi)) or (gi[0], gi[1] * 2))
    (y * y).sum().backward()
    return x.grad, b.grad


def _case_reduce_with_prehook(lib, log):
    x = lib.tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), requires_grad=True)
    y = x.sum(1)
    y.grad_fn.register_hook(lambda gi, go: log.append(('post', gi, go)))
    y.grad_fn.register_prehook(lambda go: (go[0] * lib.tensor(np.array([1.0, 10.0])),))
    (y ** 2).sum().backward()
    return x.grad


def _case_where(lib, log):
    x = lib.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    w = lib.tensor(np.array([5.0, 6.0, 7.0]), requires_grad=True)
    y = lib.where(x > 0, x, w)
    y.grad_fn.register_hook(lambda gi, go: log.append(('post', gi)) or (gi[0] * 2, gi[1] * 3))
    (y * y).sum().backward()
    return x.grad, w.grad


def _case_transpose(lib, log):
    x = lib.tensor(np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]), requires_grad=True)
    y = x.t()
    y.grad_fn.register_hook(lambda gi, go: log.append(('post', gi)) or (gi[0] * 2,))
    (y * lib.tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))).sum().backward()
    return x.grad


def _case_autograd_grad(lib, log):
    x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x * x
    z = (y * 3).sin()
    y.grad_fn.register_prehook(lambda go: (go[0] * 100,))
    z.grad_fn.register_hook(lambda gi, go: (gi[0] + 1,))
    return lib.autograd.grad(z.sum(), [y, x])


def _case_multi_output_both_used(lib, log):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3
    x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
    u, v = F.apply(x)
    u.grad_fn.register_prehook(lambda go: log.append(('pre', go)) or (go[0], go[1] * 0))
    u.register_hook(lambda g: log.append(('u tensor', g)))
    (u * 7 + v * 5).sum().backward()
    return x.grad


def _case_accumulate(lib, log):
    x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
    z = x * x
    acc = z.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: log.append(('pre', go)) or (go[0] * 10,))
    x.register_hook(lambda g: log.append(('tensor', g)))
    z.sum().backward()
    return x.grad


@pytest.mark.parametrize('case', [
    _case_post_and_pre, _case_broadcast_nonleaf, _case_reduce_with_prehook, _case_where,
    _case_transpose, _case_autograd_grad, _case_multi_output_both_used, _case_accumulate,
], ids=lambda c: c.__name__[6:])
def test_against_torch(case):
    torch = pytest.importorskip('torch')

    def plain(v):
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, (tuple, list)):
            return [plain(e) for e in v]
        if hasattr(v, 'detach'):
            v = v.detach()
        return np.asarray(v.numpy(), dtype=np.float64)

    def check(a, b, where):
        if isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b), where
            for i, (p, q) in enumerate(zip(a, b)):
                check(p, q, f'{where}[{i}]')
        elif a is None or isinstance(a, str):
            assert a == b, where
        else:
            assert b is not None and a.shape == b.shape, (where, a, b)
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=where)

    logs = {}
    results = {}
    for name, lib in (('torch', torch), ('tape', tape)):
        log = []
        results[name] = plain(case(lib, log))
        logs[name] = plain(log)
    check(results['torch'], results['tape'], 'result')
    check(logs['torch'], logs['tape'], 'hook log')
