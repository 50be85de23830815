"""tape.jit: a traced tape replayed by the generated forward kernel must give
what the eager call gives (values, gradients, graph behaviour), and must run
eagerly whenever a replay could differ."""
import numpy as np
import pytest

import tape
from tests.test_ops_table import CASES, make_inputs, _leaves

rng = np.random.default_rng(11)


def _t(a, rg=False):
    return tape.tensor(np.asarray(a, dtype=np.float64), requires_grad=rg)


def chain(w, b, x):
    h = x
    for _ in range(20):
        h = tape.tanh(h * w + b)
    return h.sum()


def test_chain_replays_and_matches_eager():
    f = tape.jit(chain)
    w, b = _t(rng.standard_normal(16), True), _t(rng.standard_normal(16), True)
    for step in range(4):
        x = _t(rng.standard_normal(16))
        w.grad = b.grad = None
        y = f(w, b, x)
        y.backward()
        got = y.item(), w.grad.numpy().copy(), b.grad.numpy().copy()
        w.grad = b.grad = None
        want_y = chain(w, b, x)
        want_y.backward()
        assert got[0] == pytest.approx(want_y.item(), rel=1e-13)
        np.testing.assert_allclose(got[1], w.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(got[2], b.grad.numpy(), rtol=1e-12)
        assert y.grad_fn.name() == want_y.grad_fn.name() == 'SumBackward0'
    assert f.stats() == {'traces': 1, 'replays': 3, 'eager': 0}


def test_linear_regression_step_with_mm_and_expand():
    def loss_fn(w, b, x, y):
        y_pred = x.mm(w) + b.expand_as(y)
        return (0.5 * (y_pred - y) ** 2).sum()
    f = tape.jit(loss_fn)
    w, b = _t([[0.3]], True), _t([[0.0]], True)
    for step in range(5):
        x = _t(rng.random((8, 1)) * 20)
        y = x * 2 + 3
        loss = f(w, b, x, y)
        loss.backward()
        gw, gb = w.grad.numpy().copy(), b.grad.numpy().copy()
        w.grad = b.grad = None
        loss_fn(w, b, x, y).backward()
        np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(gb, b.grad.numpy(), rtol=1e-12)
        with tape.no_grad():
            w -= 0.001 * w.grad
            b -= 0.001 * b.grad
        w.grad = b.grad = None
    assert f.stats()['replays'] == 4


def test_new_shape_traces_again_and_no_grad_runs_eagerly():
    f = tape.jit(lambda a, x: (a * x).sum())
    a = _t([1.0, 2.0], True)
    f(a, _t([1.0, 1.0]))
    f(a, _t([1.0, 1.0]))
    assert f(_t([1.0, 2.0, 3.0], True), _t([1.0, 1.0, 1.0])).item() == 6.0
    with tape.no_grad():
        r = f(a, _t([3.0, 4.0]))
    assert r.item() == 11.0 and not r.requires_grad
    assert f.stats() == {'traces': 2, 'replays': 1, 'eager': 1}


def test_argument_without_grad_gets_none_and_keeps_requires_grad_false():
    f = tape.jit(lambda a, x: (a * x * x).sum())
    a, x = _t([1.0, 2.0], True), _t([3.0, 4.0])
    for _ in range(2):
        f(a, x).backward()
    assert x.grad is None and not x.requires_grad
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.array([9.0, 16.0]))


def test_closed_over_parameter_gets_gradients_and_is_read_fresh():
    w = _t([2.0, 3.0], True)
    f = tape.jit(lambda x: (w * x).sum())
    x = _t([1.0, 1.0])
    f(x).backward()
    with tape.no_grad():
        w += 1.0
    y = f(x)
    assert y.item() == 7.0
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])
    assert f.stats()['replays'] == 1


def test_closed_over_constant_changed_in_place_traces_again():
    c = _t([1.0, 1.0])
    f = tape.jit(lambda a: (a * c).sum())
    a = _t([1.0, 2.0], True)
    assert f(a).item() == 3.0
    assert f(a).item() == 3.0
    c.add_(1.0)
    assert f(a).item() == 6.0
    assert f.stats() == {'traces': 2, 'replays': 1, 'eager': 0}


@pytest.mark.parametrize('body,reason', [
    (lambda a: a.sum() * float(a.sum()), 'read a tensor value'),
    (lambda a: a.sum() if a.sum().item() > 0 else -a.sum(), 'read a tensor value'),
    (lambda a: (a * tape.rand(2)).sum(), 'random'),
    (lambda a: (a * a.detach()).sum(), 'detach'),
    (lambda a: [a.sum(), 3], 'other than tensors'),
    (lambda a: tape.where(a > 1.5, a, a * 2).sum(), 'depends on tensor values (gt)'),
    (lambda a: a.max(), 'depends on tensor values (max)'),
    (lambda a: a[a.argmax()] * 2, 'argmax'),
    (lambda a: a, 'leaf'),
])
def test_calls_that_a_replay_could_get_wrong_run_eagerly(body, reason):
    f = tape.jit(body)
    a = _t([1.0, 2.0], True)
    first = f(a)
    second = f(a)
    assert f.stats()['replays'] == 0 and f.stats()['eager'] == 2
    assert reason in f.fallback_reasons()[0]
    assert type(first) is type(second)


def test_in_place_change_of_an_argument_runs_eagerly():
    def f(a, x):
        x.add_(1.0)
        return (a * x).sum()
    g = tape.jit(f)
    a, x = _t([1.0, 2.0], True), _t([0.0, 0.0])
    assert g(a, x).item() == 3.0          # eager: x is now 1, 1
    assert g(a, x).item() == 6.0          # eager again: x is 2, 2
    assert g.stats()['replays'] == 0


def test_replayed_graph_behaves_like_an_eager_one():
    f = tape.jit(lambda a, x: (tape.exp(a * x) * a).sum())
    a, x = _t([0.5, -0.25], True), _t([1.0, 2.0])
    f(a, x)
    y = f(a, x)
    seen = []
    a.register_hook(lambda g: seen.append(g.numpy().copy()))
    z = y * 3 + a.sum()               # eager ops continue the replayed graph
    z.backward(retain_graph=True)
    first = a.grad.numpy().copy()
    z.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * first)
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match='second time'):
        z.backward()
    ad, xd = a.detach().numpy(), x.numpy()
    want = 3 * (np.exp(ad * xd) * (1 + ad * xd)) + 1
    np.testing.assert_allclose(first, want, rtol=1e-12)


def test_double_backward_through_a_replay():
    f = tape.jit(lambda a: (a ** 3).sum())
    a = _t([1.0, 2.0], True)
    f(a)
    g, = tape.autograd.grad(f(a), a, create_graph=True)
    h, = tape.autograd.grad(g.sum(), a)
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0])
    np.testing.assert_allclose(h.numpy(), [6.0, 12.0])


def test_float32_results_keep_their_dtype():
    f = tape.jit(lambda a, x: tape.sigmoid(a * x + 1).sum())
    a = tape.tensor([0.5, -1.5, 2.0], requires_grad=True)
    x = tape.tensor([1.0, 2.0, 3.0])
    f(a, x)
    y = f(a, x)
    y.backward()
    assert y.dtype == tape.float32 and a.grad.dtype == tape.float32
    g = a.grad.numpy().copy()
    a.grad = None
    want = tape.sigmoid(a * x + 1).sum()
    want.backward()
    # the replay keeps float64 intermediates where eager rounds each to float32
    assert y.item() == pytest.approx(want.item(), rel=1e-6)
    np.testing.assert_allclose(g, a.grad.numpy(), rtol=1e-4)


def test_tuple_outputs():
    f = tape.jit(lambda a: (a * 2, (a * a).sum()))
    a = _t([1.0, 2.0], True)
    f(a)
    u, v = f(a)
    (u.sum() + v).backward()
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 6.0])
    assert f.stats()['replays'] == 1


_REPLAYED = []


@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_every_op_table_case_replays_like_eager(case):
    """Each op-table case through jit: the same values and gradients as eager,
    replayed when the kernel covers its records, eager otherwise."""
    f = tape.jit(lambda *xs: case.fn(tape, *xs))
    xs = _leaves(make_inputs(case, case.samples[0]))
    want = case.fn(tape, *xs)
    if not (isinstance(want, tape.Tensor) and want.requires_grad):
        pytest.skip('not a differentiable output')
    gw = tape.autograd.grad(want.sum(), xs, allow_unused=True)
    f(*xs)
    got = f(*xs)                    # the trace, then a replay (or eager again)
    if f.stats()['replays']:
        _REPLAYED.append(case.name)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    gg = tape.autograd.grad(got.sum(), xs, allow_unused=True)
    for a, b in zip(gg, gw):
        if b is None:
            assert a is None or not np.any(a.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-11, atol=1e-13)


def test_most_op_table_cases_replay():
    # runs after the parametrized test above (file order): the kernel must cover
    # the common ops, or jit silently degrades to eager everywhere
    if len(_REPLAYED) < 10:
        pytest.skip('the op-table test did not run first')
    assert len(_REPLAYED) >= 0.6 * len(CASES), len(_REPLAYED)


def test_an_output_of_arguments_without_grad_does_not_require_grad():
    f = tape.jit(lambda a, x: ((a * x).sum(), (x * 2).sum()))
    a, x = _t([1.0, 2.0], True), _t([3.0, 4.0])
    f(a, x)
    u, v = f(a, x)
    assert u.requires_grad and not v.requires_grad and v.grad_fn is None
    assert v.item() == 14.0
    u.backward()
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])


def test_nested_jit_and_methods_restored_after_traces():
    real_item = tape.Tensor.__dict__['item']
    inner = tape.jit(lambda a: (a * a).sum())
    outer = tape.jit(lambda a, b: inner(a) * b.sum())
    a, b = _t([1.0, 2.0], True), _t([3.0], True)
    outer(a, b)
    y = outer(a, b)
    y.backward()
    np.testing.assert_allclose(a.grad.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(b.grad.numpy(), [5.0])
    assert outer.stats()['replays'] == 1
    assert tape.Tensor.__dict__['item'] is real_item


def test_traces_in_two_threads():
    import threading
    f = tape.jit(lambda a, x: (a * x).sum())
    g = tape.jit(lambda a: a.sum() * a.sum().item())
    results = {}

    def work(key, fn, *args):
        for _ in range(20):
            results[key] = fn(*args)
    a = _t([1.0, 2.0], True)
    ts = [threading.Thread(target=work, args=('f', f, a, _t([1.0, 1.0]))),
          threading.Thread(target=work, args=('g', g, a))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert results['f'].item() == 3.0 and results['g'].item() == 9.0
    assert f.stats()['replays'] == 19 and g.stats()['eager'] == 20


class _Linear:
    def __init__(self, n_in, n_out):
        self.w = tape.tensor(rng.standard_normal((n_in, n_out)), requires_grad=True)
        self.b = tape.tensor(np.zeros(n_out), requires_grad=True)

    @tape.jit
    def forward(self, x):
        return tape.tanh(x.mm(self.w) + self.b)


def test_a_method_of_a_model_replays_per_instance():
    m1, m2 = _Linear(3, 2), _Linear(3, 2)
    x = _t(rng.standard_normal((4, 3)))
    for m in (m1, m2, m1, m2, m1):
        y = m.forward(x).sum()
        y.backward()
        want = tape.tanh(x.mm(m.w.detach()) + m.b.detach()).sum().item()
        assert y.item() == pytest.approx(want, rel=1e-13)
    g1 = m1.w.grad.numpy().copy()
    m1.w.grad = None
    tape.tanh(x.mm(m1.w) + m1.b).sum().backward()
    np.testing.assert_allclose(g1, 3 * m1.w.grad.numpy(), rtol=1e-12)
    assert _Linear.forward.stats() == {'traces': 2, 'replays': 3, 'eager': 0}


def test_a_dead_object_is_not_taken_for_a_new_one():
    import gc
    f = tape.jit(lambda m, x: (x * m.w).sum())

    class M:
        def __init__(self, v):
            self.w = _t([v, v], True)
    x = _t([1.0, 2.0])
    for v in (1.0, 2.0, 3.0):
        m = M(v)
        assert f(m, x).item() == pytest.approx(3 * v)
        assert f(m, x).item() == pytest.approx(3 * v)
        del m
        gc.collect()


def test_training_an_mlp_with_jit_matches_eager():
    import tape.nn.functional as F

    def make():
        r = np.random.default_rng(5)
        return [tape.tensor(r.standard_normal((6, 16)) * 0.3, requires_grad=True),
                tape.tensor(np.zeros(16), requires_grad=True),
                tape.tensor(r.standard_normal((16, 3)) * 0.3, requires_grad=True),
                tape.tensor(np.zeros(3), requires_grad=True)]

    def loss_fn(w1, b1, w2, b2, x, onehot):
        h = tape.tanh(x @ w1 + b1)
        logp = F.log_softmax(h @ w2 + b2, dim=1)
        return -(onehot * logp).sum() / x.shape[0]

    data = np.random.default_rng(6)
    batches = []
    for _ in range(30):
        x = data.standard_normal((8, 6))
        onehot = np.eye(3)[data.integers(0, 3, 8)]
        batches.append((_t(x), _t(onehot)))
    results = []
    for f in (loss_fn, tape.jit(loss_fn)):
        params = make()
        for x, onehot in batches:
            loss = f(*params, x, onehot)
            loss.backward()
            with tape.no_grad():
                for p in params:
                    p -= 0.1 * p.grad
                    p.grad = None
        results.append([p.detach().numpy().copy() for p in params])
        if f is not loss_fn:
            assert f.stats() == {'traces': 1, 'replays': 29, 'eager': 0}
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def test_replays_without_a_cache_directory(monkeypatch):
    # no writable directory for generated files: the generic dispatcher replays
    from compiler import fuse
    monkeypatch.setattr(fuse, 'cache_dir', lambda: '')
    f = tape.jit(lambda a, x: (tape.tanh(a * x) + a).sum())
    a, x = _t([0.5, 1.5], True), _t([2.0, -1.0])
    f(a, x)
    y = f(a, x)
    y.backward()
    assert f.stats()['replays'] == 1
    want = np.tanh(np.array([1.0, -1.5])).sum() + 2.0
    assert y.item() == pytest.approx(want, rel=1e-13)
    np.testing.assert_allclose(a.grad.numpy(), np.array([2.0, -1.0]) / np.cosh([1.0, -1.5]) ** 2 + 1)


_GLOBAL_W = _t([1.0, 1.0], True)


def _uses_global(x):
    return (x * _GLOBAL_W).sum()


def test_a_rebound_parameter_traces_again():
    global _GLOBAL_W
    f = tape.jit(_uses_global)
    x = _t([1.0, 2.0])
    assert f(x).item() == 3.0 and f(x).item() == 3.0
    old = _GLOBAL_W
    try:
        _GLOBAL_W = _t([2.0, 5.0], True)        # a new tensor under the same name
        y = f(x)
        assert y.item() == 12.0
        y.backward()
        np.testing.assert_allclose(_GLOBAL_W.grad.numpy(), [1.0, 2.0])
    finally:
        _GLOBAL_W = old
    assert f.stats()['traces'] == 2


def test_parameters_of_nested_objects_are_followed():
    class Layer:
        def __init__(self, v):
            self.w = _t([v, v], True)

    class Model:
        def __init__(self):
            self.layers = [Layer(1.0), Layer(2.0)]

    f = tape.jit(lambda m, x: (x * m.layers[0].w * m.layers[1].w).sum())
    m, x = Model(), _t([1.0, 3.0])
    assert f(m, x).item() == 8.0 and f(m, x).item() == 8.0
    m.layers[1] = Layer(3.0)                    # replaced deep inside the model
    assert f(m, x).item() == 12.0
    assert f.stats() == {'traces': 2, 'replays': 1, 'eager': 0}


def test_a_parameter_out_of_reach_runs_eagerly():
    holder = {'w': _t([2.0], True)}
    get = holder.get                            # reached through a builtin: not followed
    f = tape.jit(lambda x: (x * get('w')).sum())
    x = _t([3.0])
    assert f(x).item() == 6.0 and f(x).item() == 6.0
    assert 'out of reach' in f.fallback_reasons()[0]


def test_calls_it_cannot_trace_say_why():
    """Arguments a trace cannot key on run eagerly, and fallback_reasons says which."""
    import tape.nn.functional as F
    W = _t(np.ones((4, 3)) * 0.1, True)

    @tape.jit
    def loss(W, X, y):
        return F.cross_entropy(X.mm(W), y)
    X = _t(np.arange(8.0).reshape(2, 4))
    y = tape.tensor([0, 2])
    eager = F.cross_entropy(X.mm(W), y)
    for _ in range(2):
        got = loss(W, X, y)
    np.testing.assert_allclose(got.item(), eager.item())
    assert loss.stats() == {'traces': 0, 'replays': 0, 'eager': 2}
    assert loss.fallback_reasons()[0].startswith(
        'argument 2 has dtype int64: integer and bool tensors (indices, masks) are not replayed')
    # the replayable spelling the message suggests: one-hot float targets
    onehot = _t(np.eye(3)[[0, 2]])
    for _ in range(2):
        got = loss(W, X, onehot)
    assert loss.stats()['replays'] == 1
    np.testing.assert_allclose(got.item(), eager.item(), rtol=1e-6)

    @tape.jit
    def g(x, opts):
        return (x * 2).sum()
    x = _t([1.0, 2.0], True)
    g(x, [1])
    g(x * 1.0, None)
    reasons = g.fallback_reasons()
    assert 'argument 1 is a list' in reasons[0]
    assert 'argument 0 is the result of recorded ops' in reasons[1]


# A transcendental over NUMPY_FROM or more elements replays through NumPy
# (compiler/replaygen.py numpy_record), not Numba's scalar libm loop.
_F = tape.nn.functional
_NUMPY_CASES = {
    'exp': lambda x, y: tape.exp(x), 'log': lambda x, y: tape.log(y),
    'sin': lambda x, y: tape.sin(x), 'cos': lambda x, y: tape.cos(x),
    'tanh': lambda x, y: tape.tanh(x), 'sigmoid': lambda x, y: tape.sigmoid(x),
    'exp2': lambda x, y: tape.exp2(x), 'expm1': lambda x, y: tape.expm1(x),
    'log2': lambda x, y: tape.log2(y), 'log10': lambda x, y: tape.log10(y),
    'log1p': lambda x, y: tape.log1p(y), 'tan': lambda x, y: tape.tan(x * 0.5),
    'asin': lambda x, y: tape.asin(x * 0.3), 'acos': lambda x, y: tape.acos(x * 0.3),
    'atan': lambda x, y: tape.atan(x), 'sinh': lambda x, y: tape.sinh(x),
    'cosh': lambda x, y: tape.cosh(x), 'atan2': lambda x, y: tape.atan2(x, y),
    'pow': lambda x, y: y ** x, 'pow_scalar': lambda x, y: y ** 2.5,
    'rpow_scalar': lambda x, y: 2.0 ** x, 'silu': lambda x, y: tape.silu(x),
    'gelu_tanh': lambda x, y: _F.gelu(x, approximate='tanh'),
    'binary_cross_entropy': lambda x, y: _F.binary_cross_entropy(
        tape.sigmoid(x), y / (1 + y), reduction='none'),
}


@pytest.mark.parametrize('name', sorted(_NUMPY_CASES))
def test_transcendentals_over_many_elements_replay_through_numpy(name, monkeypatch):
    from compiler import replaygen
    from compiler.replaygen import NUMPY_FROM, NUMPY_OPS
    from tape._rules import OP
    assert OP[name] in NUMPY_OPS
    ran = []
    real = replaygen.numpy_record
    monkeypatch.setattr(replaygen, 'numpy_record',
                        lambda R, *a: ran.append(int(R[a[-1], 0])) or real(R, *a))
    rng = np.random.default_rng(5)
    n = NUMPY_FROM + 37
    x = _t(rng.standard_normal(n) * 0.3, True)
    y = _t(rng.random(n) + 0.5, True)
    body = _NUMPY_CASES[name]
    f = tape.jit(lambda x, y: (body(x, y) * 1.5).sum())
    want = (body(x, y) * 1.5).sum()
    gw = tape.autograd.grad(want, (x, y), allow_unused=True)
    f(x, y)
    got = f(x, y)
    assert f.stats()['replays'] == 1 and OP[name] in ran
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    gg = tape.autograd.grad(got, (x, y), allow_unused=True)
    for a, b in zip(gg, gw):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-11, atol=1e-13)


def test_numpy_replay_covers_every_transcendental_rule():
    from compiler.replaygen import NUMPY_OPS
    from tape._rules import RULES
    assert {RULES[op].name for op in NUMPY_OPS} == set(_NUMPY_CASES)


@pytest.mark.parametrize('seed', range(6))
def test_random_programs_replay_like_eager(seed):
    """Random graphs of the op table's safe ops, at sizes on both sides of the
    NumPy hand-off: the replay's values and gradients equal eager's."""
    from tests.test_ops_table import _run_program
    rng = np.random.default_rng(100 + seed)
    shape = [(30, 30), (700,), (4, 5)][seed % 3]
    steps = [(bool(rng.integers(0, 2)), *(int(v) for v in rng.integers(0, 100, 3)))
             for _ in range(int(rng.integers(2, 6)))]
    xs = [_t(rng.uniform(-1.5, 1.5, shape), True) for _ in range(2)]
    f = tape.jit(lambda a, b: _run_program(tape, [a, b], steps))
    want = _run_program(tape, xs, steps)
    gw = tape.autograd.grad(want, xs, allow_unused=True)
    f(*xs)
    got = f(*xs)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
    for a, b in zip(tape.autograd.grad(got, xs, allow_unused=True), gw):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-11)


def test_a_0d_tensor_computed_without_grad_is_an_argument_like_any():
    """A 0-d op result (its payload a NumPy scalar) traces and replays with new values."""
    f = tape.jit(lambda s, y: (s * y).sum())
    y = _t([1.0, 2.0], True)
    for v in (3.0, 4.0, 5.0):
        with tape.no_grad():
            s = tape.tensor(1.0, dtype=tape.float64) * v
        out = f(s, y)
        out.backward()
        assert out.item() == 3 * v
        np.testing.assert_allclose(y.grad.numpy(), [v, v])
        y.grad = None
    assert f.stats() == {'traces': 1, 'replays': 2, 'eager': 0}


def test_jit_says_when_it_traces(caplog):
    import logging
    w = _t([1.0, 2.0], True)
    c = _t([3.0, 4.0])

    def scaled(w):
        return (w * c).sum()
    f = tape.jit(scaled)
    with caplog.at_level(logging.INFO, logger='tape'):
        f(w)
        f(w)                    # a replay: no message
        c.add_(1.0)             # a baked-in constant changed
        f(w)
    msgs = [r.getMessage() for r in caplog.records if r.getMessage().startswith('jit:')]
    assert msgs == ['jit: traced test_jit_says_when_it_traces.<locals>.scaled for a new signature',
                    'jit: traced test_jit_says_when_it_traces.<locals>.scaled again (a '
                    'constant, object or parameter it used changed)']


def test_the_generic_dispatcher_hands_transcendentals_to_numpy_too(monkeypatch):
    """Without a cache directory the generic replay serves: a hot (tanh) and a
    cold (tan) transcendental over many elements still match eager exactly."""
    from tape import _jit
    monkeypatch.setattr(_jit, '_replay_for', lambda ops: None)
    x = _t(np.random.default_rng(9).random(700), True)

    def body(x):
        return (tape.tanh(x) * tape.sigmoid(x) + tape.tan(x * 0.3)).sum()
    f = tape.jit(body)
    f(x)
    got = f(x)
    assert f.stats()['replays'] == 1
    want = body(x)
    assert got.item() == want.item()
    np.testing.assert_array_equal(tape.autograd.grad(got, x)[0].numpy(),
                                  tape.autograd.grad(want, x)[0].numpy())
