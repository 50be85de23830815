"""The second API hunt's gaps, checked against PyTorch: one table of (name, call,
inputs); each row compares values (1e-6, float64), dtype, shape, requires_grad and
the gradients of every float input (the harness of tests/test_api_hunt.py)."""
import threading

import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

from test_api_hunt import _flat, _leaves, _same  # noqa: E402  (the same harness)

_rng = np.random.default_rng(1)
A, B = (_rng.uniform(-2, 2, (3, 4)) for _ in range(2))
M = _rng.uniform(-2, 2, (4, 4))
M3 = _rng.uniform(-1, 1, (2, 3, 3))
V = _rng.uniform(-2, 2, 4)
S = np.round(_rng.uniform(-2, 2, (3, 5)))          # rounded: ties for amax/amin
IDX = _rng.integers(0, 4, (3, 5))
T = np.triu(M) + 4 * np.eye(4)                      # well conditioned triangles
L = np.tril(M) + 4 * np.eye(4)
RUNS = np.array([1.0, 1.0, 2.0, 2.0, 2.0, -1.0, 1.0, 1.0])
STEP = np.array([[-1.5, 0.0, 2.0], [0.0, 3.0, -0.5]])


def _sr(reduce, include_self=True, dim=1):
    return lambda m, a, s: a.scatter_reduce(dim, m.tensor(IDX), s, reduce,
                                            include_self=include_self)


ROWS = [
    # wrong results before this change
    ('lstsq wide', lambda m, a, b: m.linalg.lstsq(a, b[:, :2]).solution, (A, B)),
    ('lstsq wide vector', lambda m, a, v: m.linalg.lstsq(a, v[:3]).solution, (A, V)),
    ('lstsq tall', lambda m, a, b: m.linalg.lstsq(a.t(), b.t()).solution, (A, B)),
    ('slogdet', lambda m, x: m.linalg.slogdet(x), (M,)),
    ('slogdet fields', lambda m, x: (m.linalg.slogdet(x).sign, m.linalg.slogdet(x).logabsdet),
     (M,)),
    ('logdet', lambda m, x: m.logdet(x @ x.t()), (M,)),
    ('copysign other grad', lambda m, a, b: m.copysign(a, b), (A, B)),
    ('copysign broadcast other', lambda m, a, v: a.copysign(v), (A, V)),
    ('unique', lambda m, r: m.unique(r), (RUNS,)),
    ('unique inverse counts', lambda m, r: m.unique(r, return_inverse=True,
                                                    return_counts=True), (RUNS,)),
    # scatter_reduce
    ('scatter_reduce sum', _sr('sum'), (A, S)),
    ('scatter_reduce sum exclude', _sr('sum', False), (A, S)),
    ('scatter_reduce mean', _sr('mean'), (A, S)),
    ('scatter_reduce mean exclude', _sr('mean', False), (A, S)),
    ('scatter_reduce amax', _sr('amax'), (A, S)),
    ('scatter_reduce amax exclude', _sr('amax', False), (A, S)),
    ('scatter_reduce amin', _sr('amin'), (A, S)),
    ('scatter_reduce amin exclude', _sr('amin', False), (A, S)),
    ('scatter_reduce prod', _sr('prod'), (A, S)),           # S has zeros: their branch
    ('scatter_reduce prod exclude', _sr('prod', False), (A, S)),
    ('scatter_reduce prod self zero', lambda m, a, s: _sr('prod')(m, a * (a > 0), s + 0.5),
     (A, S)),
    ('scatter_reduce dim 0', lambda m, a, s: m.scatter_reduce(
        a, 0, m.tensor([[0, 2, 2, 1], [2, 2, 0, 0]]), s[:2, :4], 'amax'), (A, S)),
    ('scatter_reduce int mean', lambda m: m.tensor([1, 2, 3]).scatter_reduce(
        0, m.tensor([0, 0, 2, 2]), m.tensor([4, 5, 7, 8]), 'mean'), ()),
    ('scatter_reduce int amin exclude', lambda m: m.tensor([1, 2, 3]).scatter_reduce(
        0, m.tensor([0, 0, 2]), m.tensor([4, 5, 7]), 'amin', include_self=False), ()),
    ('scatter_reduce_', lambda m: m.zeros(3, dtype=m.float64).scatter_reduce_(
        0, m.tensor([0, 2, 2]), m.tensor([1.0, 2.0, 3.0], dtype=m.float64), 'sum'), ()),
    # new functions
    ('unique_consecutive', lambda m, r: m.unique_consecutive(r), (RUNS,)),
    ('unique_consecutive inverse counts', lambda m, r: r.unique_consecutive(
        return_inverse=True, return_counts=True), (RUNS,)),
    ('unique_consecutive dim', lambda m: m.tensor([[1, 1], [1, 1], [2, 3], [1, 1]])
     .unique_consecutive(dim=0, return_counts=True), ()),
    ('unique_consecutive int', lambda m: m.unique_consecutive(m.tensor([3, 3, 1, 3])), ()),
    ('heaviside', lambda m, x: m.heaviside(x, m.tensor(0.5, dtype=m.float64)), (STEP,)),
    ('heaviside method values', lambda m, x: x.heaviside(x * 0 + 7), (STEP,)),
    ('heaviside int', lambda m: m.heaviside(m.tensor([-2, 0, 3]), m.tensor([5])), ()),
    ('combinations', lambda m, v: m.combinations(v), (V,)),
    ('combinations r=3', lambda m, v: m.combinations(v, r=3), (V,)),
    ('combinations replacement', lambda m, v: m.combinations(v[:3], 2, with_replacement=True),
     (V,)),
    ('combinations int', lambda m: m.combinations(m.tensor([1, 2, 3])), ()),
    ('linalg.pinv wide', lambda m, a: m.linalg.pinv(a), (A,)),
    ('linalg.pinv tall batch', lambda m, a, b: m.linalg.pinv(m.stack([a.t(), b.t()])), (A, B)),
    ('linalg.pinv rank-deficient', lambda m: m.linalg.pinv(
        m.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=m.float64)), ()),
    ('linalg.pinv atol', lambda m, x: m.linalg.pinv(x, atol=1.0), (M,)),
    ('pinverse', lambda m, a: m.pinverse(a), (A,)),
    ('pinverse method', lambda m, a: a.t().pinverse(), (A,)),
    ('linalg.matrix_exp', lambda m, x: m.linalg.matrix_exp(x), (M,)),
    ('linalg.matrix_exp large norm', lambda m, x: m.linalg.matrix_exp(4 * x), (M,)),
    ('linalg.matrix_exp small', lambda m, x: m.linalg.matrix_exp(1e-3 * x), (M,)),
    ('matrix_exp batch', lambda m, x: m.matrix_exp(x), (M3,)),
    ('matrix_exp method float32', lambda m: m.tensor([[0.0, 1.0], [-1.0, 0.0]]).matrix_exp(),
     ()),
    ('solve_triangular upper', lambda m, t, b: m.linalg.solve_triangular(t, b.t(), upper=True),
     (T, B)),
    ('solve_triangular lower reads triangle', lambda m, x, b: m.linalg.solve_triangular(
        x + 4 * m.eye(4, dtype=m.float64), b.t(), upper=False), (M, B)),
    ('solve_triangular right', lambda m, t, b: m.linalg.solve_triangular(
        t, b, upper=False, left=False), (L, B)),
    ('solve_triangular unitriangular', lambda m, x, b: m.linalg.solve_triangular(
        x, b.t(), upper=True, unitriangular=True), (M, B)),
    ('linalg.matrix_rank', lambda m, a: m.linalg.matrix_rank(a), (A,)),
    ('linalg.matrix_rank batch', lambda m: m.linalg.matrix_rank(m.tensor(
        [[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])), ()),
    ('linalg.matrix_rank atol', lambda m, x: m.linalg.matrix_rank(x, atol=2.0), (M,)),
    ('linalg.matrix_rank hermitian', lambda m, x: m.linalg.matrix_rank(x @ x.t(),
                                                                      hermitian=True), (M,)),
    # dtypes
    ('promote_types', lambda m: [m.promote_types(a, b) for a, b in (
        (m.int32, m.float32), (m.uint8, m.int8), (m.bool, m.int16), (m.float16, m.float64),
        (m.int64, m.float16))], ()),
    ('result_type', lambda m: (m.result_type(m.tensor([1, 2]), 1.0),
                               m.result_type(m.tensor([1, 2], dtype=m.int32), 5),
                               m.result_type(m.tensor([1.0]), m.tensor(2.0, dtype=m.float64)),
                               m.result_type(m.tensor([1, 2]), m.tensor(2.0)),
                               m.result_type(True, m.tensor([1], dtype=m.uint8))), ()),
    ('can_cast', lambda m: [m.can_cast(a, b) for a, b in (
        (m.float64, m.int32), (m.int64, m.uint8), (m.int32, m.bool), (m.bool, m.float16),
        (m.float64, m.float16), (m.int8, m.int8))], ()),
    ('dtype aliases', lambda m: (m.int, m.long, m.float, m.double, m.bool, m.half,
                                 m.short), ()),
    # legacy constructors
    ('FloatTensor data', lambda m: m.FloatTensor([1, 2]), ()),
    ('DoubleTensor data', lambda m: m.DoubleTensor([[1.5, 2], [3, 4]]), ()),
    ('LongTensor data', lambda m: m.LongTensor([1, 2, 3]), ()),
    ('IntTensor data', lambda m: m.IntTensor([1, 2]), ()),
    ('BoolTensor data', lambda m: m.BoolTensor([True, False]), ()),
    ('FloatTensor size', lambda m: (m.FloatTensor(2, 3).shape, m.FloatTensor(2, 3).dtype), ()),
    ('LongTensor empty', lambda m: m.LongTensor(), ()),
    ('isinstance legacy', lambda m: (isinstance(m.zeros(2), m.FloatTensor),
                                     isinstance(m.zeros(2), m.DoubleTensor),
                                     isinstance(m.tensor([1]), m.LongTensor),
                                     isinstance(m.tensor([True]), m.BoolTensor),
                                     isinstance(3, m.FloatTensor)), ()),
    ('type(legacy class)', lambda m: m.zeros(2).type(m.DoubleTensor), ()),
    # threads
    ('set_num_threads', lambda m: (m.set_num_threads(3), m.get_num_threads()), ()),
]


def _no_derivative(a):
    name = a.grad_fn.name() if a.grad_fn is not None else ''
    return 'NotImplemented' in name or name.startswith('Unique')


@pytest.fixture(autouse=True)
def _restore_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize('name,call,inputs', ROWS, ids=[r[0] for r in ROWS])
def test_matches_torch(name, call, inputs):
    tl, pl = _leaves(torch, inputs), _leaves(tape, inputs)
    rt, rp = call(torch, *tl), call(tape, *pl)
    ft, fp = _flat(rt), _flat(rp)
    assert len(fp) == len(ft)
    for i, (a, b) in enumerate(zip(ft, fp)):
        _same(a, b, f'{name}: output {i}')
    # gradients through the differentiable outputs (unique's and heaviside's raise)
    outs = [(a, b) for a, b in zip(ft, fp) if isinstance(a, torch.Tensor) and a.requires_grad
            and not _no_derivative(a)]
    if not outs:
        return
    lt, lp = 0, 0
    for a, b in outs:
        w = _rng.uniform(-1, 1, tuple(a.shape))
        lt = lt + (a * torch.tensor(w)).sum()
        lp = lp + (b * tape.tensor(w)).sum()
    lt.backward()
    lp.backward()
    for i, (a, b) in enumerate(zip(tl, pl)):
        assert (b.grad is None) == (a.grad is None), f'{name}: grad {i}'
        if a.grad is not None:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-6, atol=1e-6,
                                       err_msg=f'{name}: grad {i}')


GRADCHECK = [
    ('lstsq wide', lambda t, a, b: t.linalg.lstsq(a, b[:, :2]).solution, (A, B)),
    ('scatter_reduce sum', lambda t, a, s: _sr('sum')(t, a, s), (A, S + 0.1)),
    ('scatter_reduce mean exclude', lambda t, a, s: _sr('mean', False)(t, a, s), (A, S + 0.1)),
    ('scatter_reduce prod', lambda t, a, s: _sr('prod')(t, a, s), (A, S + 0.1)),
    ('scatter_reduce prod exclude', lambda t, a, s: _sr('prod', False)(t, a, s), (A, S + 0.1)),
    ('scatter_reduce amax', lambda t, a, s: _sr('amax')(t, a, s), (A, np.c_[B, A[:, :1]])),
    ('combinations', lambda t, v: t.combinations(v, 3), (V,)),
    ('pinv', lambda t, a: t.linalg.pinv(a), (A,)),
    ('pinv tall', lambda t, a: t.linalg.pinv(a.t()), (A,)),
    ('matrix_exp', lambda t, x: t.linalg.matrix_exp(x), (M,)),
    ('matrix_exp squaring', lambda t, x: t.linalg.matrix_exp(4 * x), (M,)),
    ('solve_triangular', lambda t, x, b: t.linalg.solve_triangular(x, b.t(), upper=True), (T, B)),
    ('solve_triangular unit right', lambda t, x, b: t.linalg.solve_triangular(
        x, b, upper=False, left=False, unitriangular=True), (M, B)),
]


@pytest.mark.parametrize('name,call,inputs', GRADCHECK, ids=[r[0] for r in GRADCHECK])
def test_gradcheck(name, call, inputs):
    leaves = [tape.tensor(x.copy(), requires_grad=True) for x in inputs]
    assert tape.autograd.gradcheck(lambda *xs: call(tape, *xs), tuple(leaves))


@pytest.mark.parametrize('name,call,inputs', [GRADCHECK[5], GRADCHECK[7]],
                         ids=['pinv', 'matrix_exp'])
def test_gradgradcheck(name, call, inputs):
    leaves = [tape.tensor(x.copy(), requires_grad=True) for x in inputs]
    assert tape.autograd.gradgradcheck(lambda *xs: call(tape, *xs), tuple(leaves))


@pytest.mark.parametrize('make', [
    lambda m, x: m.unique(x),
    lambda m, x: m.unique_consecutive(x),
    lambda m, x: m.heaviside(x, m.tensor(0.5, dtype=m.float64)),
], ids=['unique', 'unique_consecutive', 'heaviside'])
def test_no_derivative_raises_as_torch(make):
    pt = torch.tensor(RUNS, requires_grad=True)
    pp = tape.tensor(RUNS, requires_grad=True)
    out_t, out_p = make(torch, pt), make(tape, pp)
    assert out_p.grad_fn.name() == out_t.grad_fn.name().replace('torch::autograd::', '')
    with pytest.raises(Exception) as et:
        out_t.sum().backward()
    with pytest.raises(type(et.value), match=str(et.value).replace('.', r'\.')):
        out_p.sum().backward()


def test_scatter_reduce_prod_differentiates_once():
    a, s = tape.tensor(A, requires_grad=True), tape.tensor(S + 0.5, requires_grad=True)
    out = _sr('prod')(tape, a, s)
    assert out.grad_fn.name() == 'ScatterReduceBackward0'
    g, = tape.autograd.grad(out.sum(), s, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_slogdet_sign_passes_no_gradient():
    # PyTorch: the sign requires grad, but a backward through it alone leaves A.grad None
    x = tape.tensor(M, requires_grad=True)
    tape.linalg.slogdet(x).sign.sum().backward()
    xt = torch.tensor(M, requires_grad=True)
    torch.linalg.slogdet(xt).sign.sum().backward()
    assert x.grad is None and xt.grad is None


def test_rng_state_round_trip():
    tape.manual_seed(7)
    assert tape.initial_seed() == 7
    state = tape.get_rng_state()
    assert state.dtype == tape.uint8 and state.dim() == 1
    first = tape.randn(5)
    tape.set_rng_state(state)
    assert tape.equal(tape.randn(5), first)
    s = tape.seed()
    assert tape.initial_seed() == s
    tape.manual_seed(s)
    a = tape.rand(3)
    tape.manual_seed(s)
    assert tape.equal(tape.rand(3), a)
    with pytest.raises(TypeError):
        tape.set_rng_state(tape.zeros(3))


@pytest.mark.parametrize('opts,make', [
    (dict(precision=2), lambda m: m.tensor([1.23456, -2.0])),
    (dict(precision=6), lambda m: m.tensor([1.23456789, 2.5], dtype=m.float64)),
    (dict(sci_mode=True), lambda m: m.tensor([1.5, 250.0])),
    (dict(sci_mode=False), lambda m: m.tensor([1e-6, 1e3])),
    (dict(sci_mode=True), lambda m: m.tensor([1.0, 2.0])),
    (dict(threshold=5, edgeitems=1), lambda m: m.arange(10.0)),
    (dict(threshold=10, edgeitems=2), lambda m: m.arange(36.0).reshape(6, 6)),
    (dict(linewidth=30), lambda m: m.arange(12.0) / 7),
    (dict(profile='short'), lambda m: m.ones(7, 7) / 3),
    (dict(profile='full'), lambda m: m.arange(1200.0)),
    (dict(profile='short', precision=5), lambda m: m.ones(3, 9) / 3),
], ids=lambda x: str(x) if isinstance(x, dict) else '')
def test_set_printoptions_repr_matches_torch(opts, make):
    try:
        torch.set_printoptions(**opts)
        tape.set_printoptions(**opts)
        expect = repr(make(torch)).replace('torch.', 'tape.')
        assert repr(make(tape)) == expect
    finally:
        torch.set_printoptions(profile='default')
        tape.set_printoptions(profile='default')
    assert repr(tape.tensor([1.23456])) == 'tensor([1.2346])'


def _nan_backward(m, x, how):
    z = (x.sqrt() * 0).sum()
    if how == 'backward':
        z.backward()
    elif how == 'autograd.backward':
        m.autograd.backward([z])
    else:
        m.autograd.grad(z, x)


@pytest.mark.filterwarnings('ignore:Anomaly Detection')
@pytest.mark.parametrize('how', ['backward', 'autograd.backward', 'autograd.grad'])
def test_detect_anomaly_names_the_nan_node(how):
    messages = []
    for m in (torch, tape):
        x = m.zeros(2, requires_grad=True)
        with m.autograd.detect_anomaly():
            with pytest.raises(RuntimeError) as e:
                _nan_backward(m, x, how)
        messages.append(str(e.value))
        assert not m.is_anomaly_enabled() if m is torch else not m.autograd.is_anomaly_enabled()
    assert messages[1] == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert messages[0] == messages[1]


@pytest.mark.filterwarnings('ignore:Anomaly Detection')
def test_anomaly_mode_off_and_clean_gradients():
    x = tape.zeros(2, requires_grad=True)
    _nan_backward(tape, x, 'backward')               # off: NaN gradients pass, as PyTorch
    assert np.isnan(x.grad.numpy()).all()
    y = tape.tensor([1.0, 2.0], requires_grad=True)
    with tape.autograd.detect_anomaly():
        (y * y).sum().backward()
    assert tape.equal(y.grad, tape.tensor([2.0, 4.0]))
    with tape.autograd.detect_anomaly(check_nan=False):     # on, but not checking NaN
        _nan_backward(tape, tape.zeros(1, requires_grad=True), 'backward')


def test_set_detect_anomaly_is_per_thread():
    seen = []
    try:
        tape.autograd.set_detect_anomaly(True)
        thread = threading.Thread(target=lambda: seen.append(tape.autograd.is_anomaly_enabled()))
        thread.start()
        thread.join()
        assert tape.autograd.is_anomaly_enabled() and seen == [False]
    finally:
        tape.autograd.set_detect_anomaly(False)
    with tape.autograd.set_detect_anomaly(True):
        assert tape.autograd.is_anomaly_enabled()
    assert not tape.autograd.is_anomaly_enabled()
