"""The specialized fronts of the binary and unary ops (tape/_fronts.py) record
exactly what the generic recorders they stand in front of record: the same
record bytes, saved arrays, version boxes, values and gradients, on every lane
they take and on the cases they pass on."""
import numpy as np
import pytest

import tape
from tape import _ops

BINARY = ['add', 'sub', 'mul', 'div', 'pow_', 'maximum', 'minimum']
UNARY = ['neg', 'exp', 'log', 'sqrt', 'sin', 'cos', 'tanh', 'sigmoid', 'relu', 'abs_']


def _graph(build, seed=0):
    """Run ``build(lib_fn)`` on fresh inputs; return the root's tape state, its
    value and the leaves' gradients."""
    rng = np.random.default_rng(seed)
    w = tape.tensor(rng.uniform(0.5, 2.0, 6), requires_grad=True)
    v = tape.tensor(rng.uniform(0.5, 2.0, (1, 6)), requires_grad=True)
    c = tape.tensor(rng.uniform(0.5, 2.0, 6))
    y = build(w, v, c)
    tp = y._tape
    state = (bytes(tp.rec), [np.array(s, copy=True) for s in tp.saved],
             [(ver, k) for _, ver, k in tp.boxes], tp.gpos, tp.vpos, tp.n)
    value = y.detach().numpy().copy()
    y.sum().backward()
    return state, value, w.grad.numpy().copy(), v.grad.numpy().copy()


def _same(build_front, build_generic):
    f = _graph(build_front)
    g = _graph(build_generic)
    assert f[0][0] == g[0][0]                          # record bytes
    assert len(f[0][1]) == len(g[0][1])
    for x, y in zip(f[0][1], g[0][1]):
        np.testing.assert_array_equal(x, y)
    assert f[0][2:] == g[0][2:]                         # boxes, positions, count
    for x, y in zip(f[1:], g[1:]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize('name', BINARY)
def test_binary_front_records_what_the_generic_records(name):
    fn = getattr(_ops, name)
    gen = fn.generic

    def build(f):
        def run(w, v, c):
            h = f(w, c)                 # a leaf and a constant: the graph starts
            h = f(h, w)                 # on a tape, a leaf operand
            h = f(h, v)                 # equal sizes, (6,) with (1, 6)
            h = f(c, h)                 # a constant on the left
            h = f(h, 1.5)               # a float
            h = f(h, 2)                 # an int
            return f(h, h)              # both on the tape
        return run
    _same(build(fn), build(gen))


@pytest.mark.parametrize('name', UNARY)
def test_unary_front_records_what_the_generic_records(name):
    fn = getattr(_ops, name)
    gen = fn.generic

    def build(f):
        def run(w, v, c):
            h = _ops.mul(w, v)
            return f(f(h) + 3.0)
        return run
    _same(build(fn), build(gen))


def test_fronts_pass_other_cases_on():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    y = a * 2.0
    # shapes that do not broadcast: the generic path's error
    with pytest.raises(RuntimeError, match='mul'):
        _ops.mul(y, tape.ones(3))
    # equal sizes that broadcast to more elements: the generic path records it
    z = _ops.mul(y.reshape(2, 1), tape.ones(1, 2))
    assert z.shape == (2, 2)
    z.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0])
    # an inf from the operands is PyTorch's, without a warning
    big = tape.tensor([1e308], dtype=tape.float64, requires_grad=True) * 1.0
    out = big * 10.0
    assert np.isinf(out.item())
    assert np.isinf((big * tape.tensor([10.0], dtype=tape.float64)).item())
    # no grad: nothing recorded
    with tape.no_grad():
        assert (y * y).grad_fn is None and tape.tanh(y).grad_fn is None
    # out=
    o = tape.empty(2)
    tape.tanh(tape.tensor([0.0, 1.0]), out=o)
    np.testing.assert_allclose(o.numpy(), np.tanh([0.0, 1.0]), rtol=1e-6)


def test_front_source_in_tracebacks():
    import linecache
    import traceback
    a = tape.tensor([1.0], requires_grad=True) * 1.0

    class Odd:
        pass
    try:
        a.mul(Odd())
    except TypeError as e:
        names = [f.filename for f in traceback.extract_tb(e.__traceback__)]
    else:
        raise AssertionError('no TypeError')
    front = [n for n in names if n.startswith('<tape front mul')]
    assert front and linecache.getline(front[0], 2).strip().startswith('def mul(a, b)')


REFLECTED = ['radd', 'rsub', 'rmul', 'rdiv', 'rpow']


@pytest.mark.parametrize('name', REFLECTED)
def test_reflected_front_records_what_the_generic_records(name):
    fn = getattr(_ops, name)
    gen = fn.generic

    def build(f):
        def run(w, v, c):
            h = _ops.mul(w, v)
            h = f(h, 1.5)               # a float on the left of a tensor on the tape
            h = f(h, 2)                 # an int
            h = _ops.add(h, f(w, 0.5))  # a leaf: the generic recorder's case
            return _ops.add(f(c, 3.0), h)   # a constant: no record
        return run
    _same(build(fn), build(gen))


def _constants_same(x, y):
    """``x`` and ``y``, results of one op on constants, are the same leaf."""
    assert type(x) is type(y) is tape.Tensor
    assert x.dtype == y.dtype and x.shape == y.shape
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('name', BINARY + REFLECTED)
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'bool'])
def test_constant_lanes_give_what_the_generic_gives(name, dtype):
    """Ops on tensors that are on no tape and do not require grad (data,
    constants) take the fronts' constant lane for float32 and float64: the
    same leaf as the generic recorder's, values, dtype and all, on numbers
    that convert exactly, numbers that overflow the dtype, zeros and NaN."""
    fn = getattr(_ops, name)
    gen = fn.generic
    rng = np.random.default_rng(3)
    data = rng.uniform(-2.0, 2.0, (2, 3))
    data[0, 0] = 0.0
    c = tape.tensor(data.astype(dtype))
    c2 = tape.tensor(rng.uniform(-2.0, 2.0, (2, 3)).astype(dtype))
    numbers = [1.5, 2, -3, 0, 0.0, -0.0, float('nan'), float('inf'), 1e300, 10 ** 40, 2 ** 70]
    for b in numbers:
        try:
            want = gen(c, b)
        except Exception as e:          # (PyTorch's errors: the front raises the same)
            with pytest.raises(type(e)):
                fn(c, b)
            continue
        if want is NotImplemented:
            assert fn(c, b) is NotImplemented
            continue
        _constants_same(fn(c, b), want)
    if not name.startswith('r'):
        for other in (c2, c2.reshape(3, 2), c2[0], c2.reshape(6, 1)[:3]):
            try:
                want = gen(c, other)
            except Exception as e:
                with pytest.raises(type(e)):
                    fn(c, other)
                continue
            _constants_same(fn(c, other), want)


def test_constant_lanes_under_no_grad_and_for_grad_leaves():
    """A leaf that requires grad is recorded (the graph starts); under no_grad
    nothing is; a constant's result never requires grad."""
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    c = tape.tensor([3.0, 4.0])
    assert (0.5 * w).grad_fn is not None and (w * 2).grad_fn is not None
    assert (c * 2).grad_fn is None and (2 * c).grad_fn is None and (c + c).grad_fn is None
    with tape.no_grad():
        assert (w * 2).grad_fn is None and (1 - w).grad_fn is None
    y = (c * 2 + (1 - c) / 4) * w
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [6.0 - 0.5, 8.0 - 0.75])
