"""The forward replay kernel (compiler/_replay_generated.py) against eager recording.

For every row of the op table (tests/test_ops_table.py) the eager graph is
recorded on float64 inputs and packed; when ``replayable`` accepts the tape,
the replay recomputes every record from the leaves' values alone (constants
come from the traced saved values ``Vt``) and must give the eager output and
rebuild the saved values ``V`` the backward sweep reads.  Rows the replay
cannot run must say why, with one of the known reasons.
"""
import numpy as np
import pytest

import tape
from compiler import _replay_generated as gen
from compiler.replaygen import replayable
from tape._rules import OP
from tape._sweep import pack
from tape._tape import grad_mode, resolve
from tests.test_ops_table import CASES, _leaves, make_inputs

RTOL = 1e-12
ATOL = 1e-12

# Why a row may not be replayable (the fragments replayable() puts in its reason)
KNOWN_REASONS = (
    'a constant operand',           # e.g. x + const: add saves neither operand
    'constant input',
    'large-tensor record',
)
# rows recorded eagerly as one fused custom Function (tape/nn/_cross_entropy.py,
# tape/nn/_softmax.py); while tape.jit traces they record their composite form
# instead
FUSED_ROWS = ('cross_entropy', 'nll_loss', 'softmax', 'log_softmax')
# rows recorded eagerly as one node running Python (a p-norm for p not 0, 1, 2
# or inf: PyTorch's norm_backward); while tape.jit traces finite nonzero values
# they record their composite form instead (test_jit_replays_a_p3_norm)
PYTHON_NODE_ROWS = ('norm_p3',)


def _known(name, why):
    return any(r in why for r in KNOWN_REASONS) or (
        name.startswith(FUSED_ROWS + PYTHON_NODE_ROWS) and 'a custom Function' in why)


def run_replay(R, F, V, Vt, A, start=0, stop=None):
    """Replay records start..stop-1, running COLD_FWD records from Python as
    compiler/replaygen.py documents; returns the index of a record it could
    not run, or -1."""
    stop = len(R) if stop is None else stop
    RF = R.view(np.float64)
    k = start
    while k < stop:
        k = gen.replay(R, F, V, Vt, A, k, stop)
        if k < 0:
            return -1
        op, out, n, in0, in1, v, ax, x = (int(f) for f in R[k])
        fn = gen.COLD_FWD.get(op)
        if fn is None or fn(RF, F, V, Vt, A, k, out, n, in0, in1, v, ax, x) >= 0:
            return k
        k += 1
    return -1


def _record(fn, arrays):
    """Record ``fn`` on fresh float64 leaves, on a tape of its own."""
    grad_mode.open_tape = None          # no records of earlier graphs on the tape
    xs = _leaves(arrays)
    with np.errstate(all='ignore'):
        y = fn(*xs)
    return xs, y


def _tape_of(y):
    if not isinstance(y, tape.Tensor) or y._tape is None:
        return None
    return resolve(y)


def check_replay(y):
    """Replay y's tape from its leaves; return (ok, reason).  When replayable,
    assert the output and the rebuilt saved values equal eager's."""
    t = _tape_of(y)
    if t is None:
        return False, 'nothing recorded'
    R, Vt, A = pack(t)
    ok, why = replayable(R)
    if not ok:
        return False, why
    F = np.zeros(t.gpos)
    for leaf, slot in t.leaves:
        d = np.asarray(leaf._data, np.float64).reshape(-1)
        F[slot:slot + d.size] = d
    V = np.full(len(Vt), np.nan)        # every saved value must be written
    assert run_replay(R, F, V, Vt, A) == -1
    got = F[y._goff:y._goff + np.size(y._data)]
    np.testing.assert_allclose(got, np.asarray(y._data, np.float64).reshape(-1),
                               rtol=RTOL, atol=ATOL, equal_nan=True,
                               err_msg='replayed output differs from eager')
    if t.saved:
        np.testing.assert_allclose(V, Vt, rtol=RTOL, atol=ATOL, equal_nan=True,
                                   err_msg='replayed saved values differ from eager')
    return True, ''


def _params():
    out = []
    for c in CASES:
        for i, s in enumerate(c.samples):
            out.append(pytest.param(c, s, id=f'{c.name}-{i}'))
    return out


@pytest.mark.parametrize('case,sample', _params())
def test_replay_matches_eager(case, sample):
    xs, y = _record(lambda *a: case.fn(tape, *a), make_inputs(case, sample))
    ok, why = check_replay(y)
    if not ok:
        assert _known(case.name, why), why
        pytest.skip(f'not replayable: {why}')


def test_most_rows_replay():
    """A summary: how many op-table rows replay, and why the others do not."""
    ok_rows, reasons = [], {}
    for c in CASES:
        _, y = _record(lambda *a: c.fn(tape, *a), make_inputs(c, c.samples[0]))
        t = _tape_of(y)
        ok, why = replayable(pack(t)[0]) if t is not None else (False, 'nothing recorded')
        if ok:
            ok_rows.append(c.name)
        else:
            reasons[c.name] = why
    print(f'\n{len(ok_rows)} of {len(CASES)} rows replay; the others:')
    for name, why in reasons.items():
        print(f'  {name}: {why}')
    assert len(ok_rows) >= 0.85 * len(CASES), reasons
    # today: where/masked_fill/scatter/setitem with a constant side, and the ops
    # that subtract a constant computed from the data (softmax's row maximum,
    # logsumexp, cross_entropy) or add one (cat with a constant part)
    for name, why in reasons.items():
        assert _known(name, why), (name, why)


# ------------------------------------------------ NaN, inf and signed zeros
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5,
                    3.0, 1e-300, -1e-300, 1e300, -1e300, 40.0, -40.0, 800.0, -800.0])

UNARY_SPECIAL = [
    ('neg', lambda m, x: -x), ('exp', lambda m, x: m.exp(x)), ('log', lambda m, x: m.log(x)),
    ('sqrt', lambda m, x: m.sqrt(x)), ('sin', lambda m, x: m.sin(x)),
    ('cos', lambda m, x: m.cos(x)), ('tanh', lambda m, x: m.tanh(x)),
    ('sigmoid', lambda m, x: m.sigmoid(x)), ('relu', lambda m, x: m.relu(x)),
    ('abs', lambda m, x: m.abs(x)), ('rsqrt', lambda m, x: m.rsqrt(x)),
    ('exp2', lambda m, x: m.exp2(x)), ('expm1', lambda m, x: m.expm1(x)),
    ('log2', lambda m, x: m.log2(x)), ('log10', lambda m, x: m.log10(x)),
    ('log1p', lambda m, x: m.log1p(x)), ('tan', lambda m, x: m.tan(x)),
    ('asin', lambda m, x: m.asin(x)), ('acos', lambda m, x: m.acos(x)),
    ('atan', lambda m, x: m.atan(x)), ('sinh', lambda m, x: m.sinh(x)),
    ('cosh', lambda m, x: m.cosh(x)), ('erf', lambda m, x: m.erf(x)),
    ('reciprocal', lambda m, x: m.reciprocal(x)), ('silu', lambda m, x: m.nn.functional.silu(x)),
    ('gelu', lambda m, x: m.nn.functional.gelu(x)),
    ('gelu_tanh', lambda m, x: m.nn.functional.gelu(x, approximate='tanh')),
    ('leaky_relu', lambda m, x: m.nn.functional.leaky_relu(x, 0.2)),
    ('elu', lambda m, x: m.nn.functional.elu(x, alpha=1.5)),
    ('softplus', lambda m, x: m.nn.functional.softplus(x)),
    ('softplus_beta', lambda m, x: m.nn.functional.softplus(x, beta=0.5, threshold=3.0)),
    ('sign', lambda m, x: m.sign(x)), ('floor', lambda m, x: m.floor(x)),
    ('ceil', lambda m, x: m.ceil(x)), ('round', lambda m, x: m.round(x)),
    ('round_decimals', lambda m, x: m.round(x, decimals=2)),
    ('round_negative_decimals', lambda m, x: m.round(x * 100, decimals=-1)),
    ('trunc', lambda m, x: m.trunc(x)), ('clamp', lambda m, x: x.clamp(-0.5, 0.7)),
    ('clamp_min', lambda m, x: x.clamp(min=0.2)), ('clamp_max', lambda m, x: x.clamp(max=-0.2)),
    ('clamp_empty', lambda m, x: x.clamp(1.0, -1.0)),
    ('add_scalar', lambda m, x: x + 2.5), ('sub_scalar', lambda m, x: x - 2.5),
    ('rsub_scalar', lambda m, x: 2.5 - x), ('mul_scalar', lambda m, x: x * -3.0),
    ('div_scalar', lambda m, x: x / 4.0), ('div_scalar_zero', lambda m, x: x / 0.0),
    ('rdiv_scalar', lambda m, x: 2.0 / x),
    ('square', lambda m, x: x ** 2), ('pow_half', lambda m, x: x ** 0.5),
    ('pow_minus_one', lambda m, x: x ** -1), ('pow_scalar', lambda m, x: x ** 2.5),
    ('pow_zero', lambda m, x: x ** 0.0), ('rpow_scalar', lambda m, x: 2.0 ** x),
    ('remainder_scalar', lambda m, x: x % 1.5), ('remainder_negative', lambda m, x: x % -1.5),
    ('fmod_scalar', lambda m, x: m.fmod(x, 1.5)),
    ('norm', lambda m, x: m.norm(x[3:12])), ('norm_p3', lambda m, x: m.norm(x[3:12], p=3)),
    ('std', lambda m, x: x[3:12].std()), ('var', lambda m, x: x[3:12].var()),
    ('var_one', lambda m, x: x[5:6].var()),
    ('bce', lambda m, x: m.nn.functional.binary_cross_entropy(
        x.clamp(0.0, 1.0), m.tensor(np.linspace(0, 1, 20)), reduction='none')),
]

BINARY_SPECIAL = [
    ('add', lambda m, a, b: a + b), ('sub', lambda m, a, b: a - b),
    ('mul', lambda m, a, b: a * b), ('div', lambda m, a, b: a / b),
    ('pow', lambda m, a, b: a ** b), ('maximum', lambda m, a, b: m.maximum(a, b)),
    ('minimum', lambda m, a, b: m.minimum(a, b)), ('atan2', lambda m, a, b: m.atan2(a, b)),
    ('remainder', lambda m, a, b: m.remainder(a, b)), ('fmod', lambda m, a, b: m.fmod(a, b)),
]


_PYTHON_NODE_FNS = [f for n, f in UNARY_SPECIAL if n in PYTHON_NODE_ROWS]


@pytest.mark.parametrize('fn', [pytest.param(f, id=n) for n, f in UNARY_SPECIAL])
def test_replay_special_values_unary(fn):
    _, y = _record(lambda x: fn(tape, x), [SPECIAL])
    ok, why = check_replay(y)
    if fn in _PYTHON_NODE_FNS:
        assert not ok and 'a custom Function' in why
        return
    assert ok, why


def test_jit_replays_a_p3_norm():
    def f(x):
        return tape.norm(x, p=3)
    g = tape.jit(f)
    rng = np.random.default_rng(0)
    for _ in range(3):
        X = rng.uniform(0.5, 2.0, 7)
        x = tape.tensor(X, requires_grad=True)
        y = g(x)
        y.backward()
        x2 = tape.tensor(X, requires_grad=True)
        y2 = f(x2)
        y2.backward()
        np.testing.assert_allclose(y.item(), y2.item(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12)
    assert g.stats()['replays'] >= 1


@pytest.mark.parametrize('fn', [pytest.param(f, id=n) for n, f in BINARY_SPECIAL])
def test_replay_special_values_binary(fn):
    a = np.repeat(SPECIAL, SPECIAL.size)
    b = np.tile(SPECIAL, SPECIAL.size)
    _, y = _record(lambda x, z: fn(tape, x, z), [a, b])
    ok, why = check_replay(y)
    assert ok, why


# ------------------------------------------------------- replayable() itself
def test_unsaved_constant_input_is_not_replayable():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    grad_mode.open_tape = None
    y = x + tape.tensor([3.0, 4.0], dtype=tape.float64)     # add saves neither operand
    R, Vt, A = pack(resolve(y))
    k = int(np.nonzero(R[:, 0] == OP['add'])[0][0])
    assert R[k, 4] == -1
    ok, why = replayable(R)
    assert not ok and f'record {k} (add)' in why and 'constant' in why
    # the kernel itself refuses the record too, and it is not a COLD_FWD one
    F = np.zeros(resolve(y).gpos)
    F[:2] = x._data
    assert run_replay(R, F, np.zeros(len(Vt)), Vt, A) == k
    assert gen.replay(R, F, np.zeros(len(Vt)), Vt, A, k, len(R)) == k
    assert int(R[k, 0]) not in gen.COLD_FWD


def test_saved_constant_input_is_replayed_from_traced_values():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    grad_mode.open_tape = None
    c = tape.tensor([3.0, 4.0], dtype=tape.float64)
    y = (x * c).sum()                                       # mul saves both operands
    R, Vt, A = pack(resolve(y))
    assert replayable(R) == (True, '')
    F = np.zeros(resolve(y).gpos)
    F[x._goff:x._goff + 2] = [5.0, 6.0]                     # new leaf values
    V = np.zeros(len(Vt))
    assert run_replay(R, F, V, Vt, A) == -1
    assert F[y._goff] == 5.0 * 3.0 + 6.0 * 4.0
    assert list(V) == [5.0, 6.0, 3.0, 4.0]                  # a (new), then b (traced)


def test_python_and_where_constant_records_are_not_replayable():
    class Double(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = tape.tensor([1.0, -2.0], dtype=tape.float64, requires_grad=True)
    grad_mode.open_tape = None
    ok, why = replayable(pack(resolve(Double.apply(x).sum()))[0])
    assert not ok and 'Python' in why
    grad_mode.open_tape = None
    ok, why = replayable(pack(resolve(tape.where(x > 0, x, 0.5)))[0])
    assert not ok and 'constant operand' in why


def test_replay_with_new_leaf_values_matches_a_new_eager_run():
    """What tape.jit relies on: trace once, replay with other values."""
    def f(w, b, x):
        h = tape.tanh(x.mm(w.t()) + b)
        return (h * h).mean() + tape.nn.functional.softplus(h, beta=2.0, threshold=0.5).sum() \
            + h.clamp(-0.3, 0.3).sum(1).cumsum(0).sum() + x.var(1).sum()

    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((4, 3)), rng.standard_normal(4), rng.standard_normal((5, 3))]
    xs, y = _record(f, arrays)
    t = resolve(y)
    R, Vt, A = pack(t)
    assert replayable(R) == (True, '')
    new = [rng.standard_normal(a.shape) for a in arrays]
    xs2, y2 = _record(f, new)
    R2, V2, _ = pack(resolve(y2))
    assert np.array_equal(R[:, [0, 2]], R2[:, [0, 2]])     # the same records
    F = np.zeros(t.gpos)
    slot_of = {id(leaf): s for leaf, s in t.leaves}
    for x, a in zip(xs, new):
        F[slot_of[id(x)]:slot_of[id(x)] + a.size] = a.reshape(-1)
    V = np.full(len(Vt), np.nan)
    assert run_replay(R, F, V, Vt, A) == -1
    np.testing.assert_allclose(F[y._goff], y2.item(), rtol=RTOL)
    np.testing.assert_allclose(V, V2, rtol=RTOL, atol=ATOL)


def test_sums_add_in_numpy_order():
    """Sums of contiguous data are bit-equal to NumPy's (pairwise) sums."""
    rng = np.random.default_rng(7)
    for shape, dims in [((1000,), None), ((300,), None), ((7, 130), 1), ((130, 7), 0),
                        ((4, 5, 40), (0, 2)), ((3, 9, 17), (1, 2)), ((2, 3), 1)]:
        arr = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
        for mean in (False, True):
            def f(x):
                return x.mean(dims) if mean else x.sum(dims)
            _, y = _record(f, [arr])
            t = resolve(y)
            R, Vt, A = pack(t)
            F = np.zeros(t.gpos)
            F[:arr.size] = arr.reshape(-1)
            assert run_replay(R, F, np.zeros(len(Vt)), Vt, A) == -1
            assert np.array_equal(F[y._goff:y._goff + np.size(y._data)],
                                  np.reshape(y._data, -1)), (shape, dims, mean)


def test_generated_file_is_fresh():
    from compiler import replaygen
    assert replaygen.main(['--check']) == 0
