"""The backward of sin and cos: the compiled sweep's kernels (small records,
compiler/_sweep_generated.py, float64 or float32 arenas), and on large float64
tensors the chunk kernels (compiler/_chunk_generated.py, one record) and the
fused run kernels (compiler/fuse.py, a run seen again) evaluate cos(a) and
sin(a) with compiler/f64_kernels.py's vectorizing sin64/cos64 where every
argument is within TRIG_MAX64, and with libm (math.sin/math.cos) otherwise.
Each must give the formula's value to within a few ulps, with NaN and inf as
PyTorch gives them, whichever branch runs."""
import numpy as np
import pytest

import tape
from compiler import f64_kernels as fk
from compiler import fuse
from compiler.codegen import GUARDED64

N = (256, 128)          # 32768 elements: a big record (tape/_big.py BIG = 16384)
EPS = np.finfo(np.float64).eps


def _args(far=False, special=False, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N) * 4.0
    x.flat[:7] = [0.0, -0.0, np.pi / 2, -np.pi, 1e-300, 1e6 + 0.5, -7e8]
    if far:
        x.flat[100] = 3e9           # beyond TRIG_MAX64: the libm branch
    if special:
        x.flat[200] = np.nan
        x.flat[201] = np.inf        # (inf is beyond TRIG_MAX64 too)
    return x


def _close(got, want, scale):
    """Within 4 ulps of |scale| (the formula's terms), NaN where want is NaN."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    err = np.abs(got[~nan] - want[~nan])
    tol = 4 * EPS * np.maximum(np.abs(scale[~nan]), np.finfo(np.float64).tiny)
    assert (err <= tol).all(), float(np.max(err / tol))


@pytest.mark.parametrize('far', [False, True])
@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_one_record(name, far):
    """A lone big sin/cos record: its chunk kernel, in range and not."""
    x0 = _args(far=far)
    g0 = np.random.default_rng(1).standard_normal(N)
    x = tape.tensor(x0, requires_grad=True)
    getattr(tape, name)(x).backward(tape.tensor(g0))
    want = g0 * np.cos(x0) if name == 'sin' else -g0 * np.sin(x0)
    _close(x.grad.numpy(), want, g0)


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
@pytest.mark.parametrize('far', [False, True])
@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_small_records(name, far, dtype):
    """Records under BIG elements: the compiled sweep's kernel (its arena in
    the graph's dtype), in range and not; float32 within float32's rounding."""
    x0 = _args(far=far).reshape(-1)[:4096].astype(dtype).reshape(64, 64)
    g0 = np.random.default_rng(4).standard_normal((64, 64)).astype(dtype)
    x = tape.tensor(x0, requires_grad=True)
    getattr(tape, name)(x).backward(tape.tensor(g0))
    assert x.grad.dtype == getattr(tape, dtype)
    x64, g64 = x0.astype(np.float64), g0.astype(np.float64)
    want = g64 * np.cos(x64) if name == 'sin' else -g64 * np.sin(x64)
    got = x.grad.numpy().astype(np.float64)
    if dtype == 'float64':
        _close(got, want, g64)
    else:
        np.testing.assert_allclose(got, want, rtol=2 * np.finfo(np.float32).eps,
                                   atol=np.finfo(np.float32).tiny)


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_small_special_values(name):
    x0 = np.array([0.0, -0.0, np.nan, 1.0, 2e9, -np.inf, 3.0])
    for x0 in (x0, np.delete(x0, [4, 5])):      # with and without out-of-range ones
        x = tape.tensor(x0, requires_grad=True)
        with np.errstate(invalid='ignore'):
            getattr(tape, name)(x).sum().backward()
            want = np.cos(x0) if name == 'sin' else -np.sin(x0)
        _close(x.grad.numpy(), want, np.ones(x0.shape))


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_special_values(name):
    """NaN gives NaN; inf (out of range, so libm) gives NaN, as PyTorch."""
    x0 = _args(special=True)
    x = tape.tensor(x0, requires_grad=True)
    with np.errstate(invalid='ignore'):     # (NumPy's forward of inf warns; not ours)
        getattr(tape, name)(x).sum().backward()
        want = np.cos(x0) if name == 'sin' else -np.sin(x0)
    _close(x.grad.numpy(), want, np.ones(N))
    assert np.isnan(x.grad.numpy().flat[200]) and np.isnan(x.grad.numpy().flat[201])


@pytest.mark.parametrize('far', [False, True])
def test_fused_run(far):
    """A run of big records seen again takes one fused kernel (compiler/fuse.py);
    its sin/cos terms give the same values as the formula, both branches."""
    x0 = _args(far=far)
    y0 = np.random.default_rng(2).standard_normal(N)
    x = tape.tensor(x0, requires_grad=True)
    y = tape.tensor(y0, requires_grad=True)
    for _ in range(fuse.FUSE_AFTER + 1 if fuse.FUSE_AFTER else 1):
        x.grad = y.grad = None
        (tape.sin(x) * y + tape.cos(x) * 2.0).sum().backward()
    terms = np.abs(y0 * np.cos(x0)) + np.abs(2.0 * np.sin(x0))
    _close(x.grad.numpy(), y0 * np.cos(x0) - 2.0 * np.sin(x0), terms)
    _close(y.grad.numpy(), np.sin(x0), np.ones(N))


def test_fused_source_guards():
    """The fused kernel's source: a float64 run with sin/cos of saved arrays
    checks them and has both loops; a run without them is unchanged."""
    body = ['g0 = I0[i]', 'o0 = g0 * math.cos(S0[i])', 'o1 = -g0 * math.sin(S1[i])']
    out, guards = fuse._guarded64(body)
    assert guards == [('trig64_ok', 'S0'), ('trig64_ok', 'S1')]
    assert out[1] == 'o0 = g0 * cos64(S0[i])' and out[2] == 'o1 = -g0 * sin64(S1[i])'
    assert fuse._guarded64(['o0 = I0[i] * S0[i]']) == (None, None)
    # (an argument that is not a saved array's element: no guarded loop)
    assert fuse._guarded64(['o0 = math.cos(l0)']) == (None, None)


def test_helpers_match_the_forward_kernels():
    """sin64/cos64 (the backward's helpers) are the forward kernels' own
    per-element functions: the same bits; trig64_ok says when they apply."""
    x = _args().reshape(-1)
    for name in ('sin', 'cos'):
        out = np.empty_like(x)
        assert getattr(fk, name + '64_fwd')(x, out) == 0
        np.testing.assert_array_equal(out, _elementwise(name, x))
    assert fk.trig64_ok(x) and fk.trig64_ok(np.array([np.nan, -1e9]))
    assert not fk.trig64_ok(np.array([0.0, 1.0000001e9]))
    assert not fk.trig64_ok(np.array([-np.inf]))
    assert set(GUARDED64) == {'math.sin', 'math.cos'}


def _elementwise(name, x):
    from numba import njit
    fn = fk.sin64 if name == 'sin' else fk.cos64

    @njit
    def run(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    out = np.empty_like(x)
    run(x, out)
    return out


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_against_torch(name):
    torch = pytest.importorskip('torch')
    x0 = _args()
    y0 = np.random.default_rng(3).standard_normal(N)
    x = tape.tensor(x0, requires_grad=True)
    (getattr(tape, name)(x) * tape.tensor(y0)).sum().backward()
    xt = torch.tensor(x0, requires_grad=True)
    (getattr(torch, name)(xt) * torch.tensor(y0)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)
