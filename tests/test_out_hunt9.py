"""PyTorch's ``out=`` on functions that ignored it, lacked it, or differed from
PyTorch in its resize warning, dtype errors, autograd refusal or tuple outs
(tape/_out.py)."""
import warnings

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

RNG = np.random.default_rng(9)
A = (RNG.random((3, 4)) * 0.8 + 0.1).astype(np.float32)
A2 = (RNG.random((3, 4)) * 0.8 + 0.1).astype(np.float32)
M = RNG.standard_normal((3, 3)).astype(np.float32)
S = (M @ M.T + 3 * np.eye(3)).astype(np.float32)
I = RNG.integers(1, 5, (3, 4)).astype(np.int64)
I2 = RNG.integers(1, 5, (3, 4)).astype(np.int64)
IDX = np.array([[0], [2], [1]], np.int64)


def _mod(lib, path):
    obj = lib
    for part in path.split('.')[:-1]:
        obj = getattr(obj, part)
    return getattr(obj, path.split('.')[-1])


def _conv(lib, x, rg=False):
    if isinstance(x, list):
        return [_conv(lib, y, rg) for y in x]
    if isinstance(x, np.ndarray):
        t = lib.tensor(x)
        return t.requires_grad_(True) if rg and x.dtype.kind == 'f' else t
    return x


# (function path, args, kwargs): functions whose out= was ignored or refused
CASES = [
    ('ldexp', (A, I), {}), ('nextafter', (A, A2), {}), ('angle', (A,), {}),
    ('igamma', (A, A2), {}), ('igammac', (A, A2), {}), ('conj_physical', (A,), {}),
    ('bitwise_left_shift', (I, I2), {}), ('bitwise_right_shift', (I, I2), {}),
    ('narrow_copy', (A, 1, 1, 2), {}), ('view_copy', (A, (4, 3)), {}),
    ('permute_copy', (A, (1, 0)), {}), ('unsqueeze_copy', (A, 0), {}),
    ('arccosh', (A + 1,), {}), ('arcsinh', (A,), {}), ('arctanh', (A,), {}),
    ('arctan2', (A, A2), {}), ('clamp_max', (A, 0.5), {}), ('clamp_min', (A, 0.5), {}),
    ('isin', (I, I2), {}), ('nuclear_norm', (A,), {}), ('frobenius_norm', (A, (0, 1)), {}),
    ('scatter', (A, 1, IDX, A2), {}), ('softmax', (A, 1), {}), ('log_softmax', (A, 1), {}),
    ('hardshrink', (A - 0.5,), {}), ('threshold', (A, 0.5, 0.0), {}),
    ('slice_scatter', (A, A2[:, :2].copy(), 1, 0, 2), {}),
    ('special.sinc', (A,), {}), ('linalg.matmul', (A, A2.T), {}),
    ('nn.functional.normalize', (A,), {}),
    ('frexp', (A,), {}), ('histogram', (A, 5), {}), ('nanmedian', (A, 1), {}),
    ('slogdet', (S,), {}), ('linalg.lstsq', (S, A[:, :3].T.copy()), {}),
]
IDS = [c[0] for c in CASES]


def _outs_like(lib, result, n=0):
    if isinstance(result, tuple):
        return tuple(lib.empty(n, dtype=r.dtype) for r in result)
    return lib.empty(n, dtype=result.dtype)


def _values(r):
    if isinstance(r, tuple):
        return [np.array(t.detach().numpy()) for t in r]
    return [np.array(r.detach().numpy())]


def _call(lib, path, args, kw, n=0):
    fn = _mod(lib, path)
    plain = fn(*[_conv(lib, a) for a in args], **kw)
    out = _outs_like(lib, plain, n)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        r = fn(*[_conv(lib, a) for a in args], **kw, out=out)
    warned = any('resized' in str(x.message) for x in w)
    return plain, out, r, warned


@pytest.mark.parametrize('path,args,kw', CASES, ids=IDS)
def test_out_written_returned_and_resized_as_torch(path, args, kw):
    for n in (0, 7):        # an empty out, then a non-empty one of the wrong shape
        plain, out, r, warned = _call(tape, path, args, kw, n)
        _, tout, _, twarned = _call(torch, path, args, kw, n)
        if isinstance(out, tuple):
            assert isinstance(r, tuple) and all(x is y for x, y in zip(r, out))
            assert type(r) is type(plain)               # the named tuple, fields and all
        else:
            assert r is out
        assert warned == twarned
        for g, p, t in zip(_values(out), _values(plain), _values(tout)):
            assert g.shape == t.shape and g.dtype == t.dtype
            np.testing.assert_array_equal(g, p)
            np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('path,args,kw', [c for c in CASES if c[0] not in (
    'bitwise_left_shift', 'bitwise_right_shift', 'isin')], ids=[
        i for i in IDS if i not in ('bitwise_left_shift', 'bitwise_right_shift', 'isin')])
def test_out_refused_under_autograd_as_torch(path, args, kw):
    def attempt(lib):
        fn = _mod(lib, path)
        plain = fn(*[_conv(lib, a) for a in args], **kw)
        try:
            fn(*[_conv(lib, a, rg=True) for a in args], **kw, out=_outs_like(lib, plain))
        except RuntimeError as e:
            return 'automatic differentiation' in str(e)
        return False
    assert attempt(tape) == attempt(torch)


def _error(lib, f):
    try:
        f(lib)
    except Exception as e:    # noqa: BLE001
        return type(e), str(e)
    return None


DTYPE_CASES = {
    'ldexp_long': lambda L: L.ldexp(L.tensor(A), L.tensor(I), out=L.empty(0, dtype=L.int64)),
    'abs_long': lambda L: L.abs(L.tensor(A), out=L.empty(0, dtype=L.int64)),
    'abs_double': lambda L: L.abs(L.tensor(A), out=L.empty(0, dtype=L.float64)),
    'mm_double': lambda L: L.mm(L.tensor(S), L.tensor(S), out=L.empty(0, dtype=L.float64)),
    'amax_long': lambda L: L.amax(L.tensor(A), out=L.empty(0, dtype=L.int64)),
    'where_long': lambda L: L.where(L.tensor(A) > 0.5, L.tensor(A), L.tensor(A2),
                                    out=L.empty(0, dtype=L.int64)),
    'dot_double': lambda L: L.dot(L.tensor(A[0]), L.tensor(A2[0]),
                                  out=L.empty(0, dtype=L.float64)),
    'index_select_double': lambda L: L.index_select(L.tensor(A), 0, L.tensor([0, 2]),
                                                    out=L.empty(0, dtype=L.float64)),
    'cat_long': lambda L: L.cat([L.tensor(A), L.tensor(A2)], out=L.empty(0, dtype=L.int64)),
    'sort_int_indices': lambda L: L.sort(L.tensor(A), out=(L.empty(0), L.empty(0, dtype=L.int32))),
    'frexp_long': lambda L: L.frexp(L.tensor(A), out=(L.empty(0, dtype=L.int64),
                                                     L.empty(0, dtype=L.int32))),
    'histc_long': lambda L: L.histc(L.tensor(A), 5, out=L.empty(0, dtype=L.int64)),
    'nextafter_long': lambda L: L.nextafter(L.tensor(A), L.tensor(A2),
                                            out=L.empty(0, dtype=L.int64)),
    'exp_double_ok': lambda L: L.exp(L.tensor(A), out=L.empty(0, dtype=L.float64)),
    'cumsum_long_ok': lambda L: L.cumsum(L.tensor(A * 3), 1, out=L.empty(0, dtype=L.int64)),
}


@pytest.mark.parametrize('case', list(DTYPE_CASES))
def test_out_dtype_errors_are_torchs(case):
    got, want = _error(tape, DTYPE_CASES[case]), _error(torch, DTYPE_CASES[case])
    assert got == want


@pytest.mark.parametrize('name,args', [
    ('sum', (A * 3, 1)), ('prod', (A * 3, 1)), ('cumsum', (A * 3, 1)), ('cumprod', (A * 3, 1))])
def test_out_dtype_is_the_computation_dtype(name, args):
    got = getattr(tape, name)(tape.tensor(args[0]), *args[1:], out=tape.empty(0, dtype=tape.int64))
    want = getattr(torch, name)(torch.tensor(args[0]), *args[1:],
                                out=torch.empty(0, dtype=torch.int64))
    assert got.dtype == tape.int64
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize('name,make', [
    ('eye', lambda L, o: L.eye(3, out=o)), ('full', lambda L, o: L.full((2, 3), 1.5, out=o)),
    ('linspace', lambda L, o: L.linspace(0, 3, 5, out=o)),
    ('empty', lambda L, o: L.empty(2, 3, out=o))])
def test_creation_out_takes_its_dtype_and_resizes_silently(name, make):
    for lib in (tape, torch):
        o = lib.empty(7, dtype=lib.int64)
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            r = make(lib, o)
        assert r is o and o.dtype == lib.int64
    if name != 'empty':
        assert make(tape, tape.empty(0, dtype=tape.int64)).tolist() == \
            make(torch, torch.empty(0, dtype=torch.int64)).tolist()


@pytest.mark.parametrize('name', ['eq', 'gt', 'logical_and', 'argmax', 'signbit', 'isneginf',
                                  'searchsorted', 'bucketize'])
def test_integer_and_bool_results_need_no_grad_check(name):
    # PyTorch refuses out= under autograd only where the result has a gradient
    def run(lib):
        x = lib.tensor(np.sort(A.ravel())[:6].copy(), requires_grad=True)
        y = lib.tensor(np.sort(A2.ravel())[:6].copy())
        fn = getattr(lib, name)
        args = {'argmax': (x,), 'signbit': (x,), 'isneginf': (x,), 'searchsorted': (x, y),
                'bucketize': (y, x)}.get(name, (x, y))
        plain = fn(*args)
        out = lib.empty(0, dtype=plain.dtype)
        r = fn(*args, out=out)
        assert r is out and not out.requires_grad
        return out.tolist()
    assert run(tape) == run(torch)


def test_composite_out_keeps_the_graph_as_torch():
    # PyTorch's composite ops (inner, quantile, ...) copy a differentiable result into out
    res = []
    for lib in (tape, torch):
        x = lib.tensor(A, requires_grad=True)
        o = lib.empty(0)
        r = lib.inner(x, lib.tensor(A2), out=o)
        assert r is o and o.requires_grad
        o.sum().backward()
        res.append(np.array(x.grad.numpy()))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6)


def test_out_requiring_grad_is_refused():
    for lib in (tape, torch):
        with pytest.raises(RuntimeError, match=r"ldexp\(\): functions with out=\.\.\. arguments "
                           "don't support automatic differentiation"):
            lib.ldexp(lib.tensor(A), lib.tensor(I), out=lib.empty(0, requires_grad=True))
        with lib.no_grad():
            x = lib.tensor(A, requires_grad=True)
            o = lib.empty(0)
            assert lib.ldexp(x, lib.tensor(I), out=o) is o


def test_unbind_copy_writes_a_list_out_and_returns_none():
    got = [tape.empty(0) for _ in range(3)]
    want = [torch.empty(0) for _ in range(3)]
    assert tape.unbind_copy(tape.tensor(A), out=got) is None
    assert torch.unbind_copy(torch.tensor(A), out=want) is None
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
