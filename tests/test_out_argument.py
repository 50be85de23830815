"""PyTorch's ``out=`` on the functions of the namespace (tape/_out.py)."""
import warnings
import numpy as np
import pytest

import tape

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
IDX = np.array([[0], [1], [2]])

# (function, args, number of result tensors)
CASES = [
    ('exp', (A,), 1), ('tanh', (A,), 1), ('sigmoid', (A,), 1), ('abs', (A,), 1),
    ('sum', (A, 1), 1), ('mean', (A,), 1), ('prod', (A, 0), 1), ('std', (A, 1), 1),
    ('logsumexp', (A, 1), 1), ('cumsum', (A, 1), 1), ('norm', (A,), 1),
    ('matmul', (A, B), 1), ('mm', (A, B), 1), ('cat', ([A, A],), 1), ('stack', ([A, A],), 1),
    ('clamp', (A, -0.5, 0.5), 1), ('where', (A > 0, A, -A), 1), ('eq', (A, A), 1),
    ('gather', (A, 1, IDX), 1), ('argmax', (A, 1), 1), ('pow', (A, 2), 1),
    ('maximum', (A, -A), 1), ('atan2', (A, B[:, :1].T), 1),
    ('arange', (5,), 1), ('zeros', (2, 3), 1), ('linspace', (0, 1, 5), 1),
    ('max', (A, 1), 2), ('min', (A, 0), 2), ('sort', (A,), 2), ('topk', (A, 2), 2),
    ('cummax', (A, 1), 2),
]


def _run(lib, name, args, n):
    def conv(v):
        if isinstance(v, np.ndarray):
            return lib.tensor(v)
        if isinstance(v, list):
            return [lib.tensor(x) for x in v]
        return v
    largs = [conv(v) for v in args]
    fn = getattr(lib, name)
    plain = fn(*largs)
    if n == 1:
        out = lib.empty(0, dtype=plain.dtype)
        r = fn(*largs, out=out)
        assert r is out
        return [np.array(out.numpy())]
    outs = tuple(lib.empty(0, dtype=t.dtype) for t in plain)
    r = fn(*largs, out=outs)
    assert all(x is y for x, y in zip(r, outs))
    assert [np.array(x.numpy()).tolist() for x in r] == [np.array(x.numpy()).tolist()
                                                         for x in plain]
    return [np.array(x.numpy()) for x in outs]


@pytest.mark.parametrize('name,args,n', CASES, ids=[c[0] for c in CASES])
def test_out_is_written_and_returned(name, args, n):
    got = _run(tape, name, args, n)
    plain = getattr(tape, name)(*[tape.tensor(v) if isinstance(v, np.ndarray) else
                                  [tape.tensor(x) for x in v] if isinstance(v, list) else v
                                  for v in args])
    plain = plain if n > 1 else (plain,)
    for g, p in zip(got, plain):
        np.testing.assert_array_equal(g, p.numpy())


@pytest.mark.parametrize('name,args,n', CASES, ids=[c[0] for c in CASES])
def test_out_matches_torch(name, args, n):
    torch = pytest.importorskip('torch')
    for g, w in zip(_run(tape, name, args, n), _run(torch, name, args, n)):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-12)


def test_out_refuses_autograd_and_wrong_types():
    w = tape.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"exp\(\): functions with out=\.\.\. arguments "
                       "don't support automatic differentiation"):
        tape.exp(w, out=tape.empty(3))
    with pytest.raises(RuntimeError, match='automatic differentiation'):
        tape.cat([w, w], out=tape.empty(6))
    with pytest.raises(RuntimeError, match='automatic differentiation'):
        tape.sum(tape.ones(3), out=tape.empty((), requires_grad=True))
    with tape.no_grad():
        assert tape.sum(w, out=tape.empty(())).item() == 3.0
    with pytest.raises(TypeError, match="argument 'out' must be Tensor"):
        tape.exp(tape.ones(2), out=np.empty(2))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                       "output type Long"):
        tape.exp(tape.ones(2), out=tape.empty(2, dtype=tape.int64))
    with pytest.raises(TypeError, match='tuple of 2 Tensors'):
        tape.sort(tape.ones(2), out=tape.empty(2))


def test_out_of_another_shape_is_resized_with_pytorchs_warning():
    out = tape.empty(5)
    with pytest.warns(UserWarning, match=r'resized since it had shape \[5\], which does not '
                      r'match the required output shape \[2, 3\]'):
        tape.add(tape.ones(2, 3), 1, out=out)
    assert out.shape == (2, 3)
    out = tape.empty(5)
    with warnings.catch_warnings():
        warnings.simplefilter('error')      # zeros and ones resize silently, as PyTorch's
        tape.zeros(2, 3, out=out)
    assert out.shape == (2, 3)
    empty = tape.empty(0)
    tape.ones(4, out=empty)                 # an empty out is resized silently
    assert empty.tolist() == [1.0] * 4
