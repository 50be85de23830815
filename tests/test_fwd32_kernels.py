"""float32 forwards of exp, log, sin, cos, tanh, sigmoid, silu and gelu through their
compiled kernels (compiler/activation_kernels.py): within a few ulp of the
float64 value rounded, NaN and infinities as PyTorch's, and their gradients."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

F32 = np.float32
N = 4096        # above tape/_ops.py's _KERNEL32_FROM: the kernels' path


def _ulps(got, ref64):
    """|got - ref| in float32 ulps of the reference (finite references)."""
    r32 = ref64.astype(F32)
    sp = np.spacing(np.abs(r32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref64) / sp


def _edges():
    tiny = np.finfo(F32).tiny
    return np.array([0.0, -0.0, 1.0, -1.0, tiny, -tiny, 1e-45, -1e-45, 1e-30, 3e38, -3e38,
                     np.inf, -np.inf, np.nan, 88.7, 89.0, -87.0, -103.0, -104.0,
                     np.pi / 2, np.pi, 1e4, -1e4, 65536.0, -65535.9], F32)


def _inputs(seed, lo, hi, trig=False):
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, N).astype(F32)
    e = _edges()
    if trig:        # any |x| beyond 65536 (inf too) sends sin/cos to NumPy
        e = e[~(np.abs(e) > 65536)]
    x[:len(e)] = e
    return x


def _same_nan_inf(got, want):
    assert (np.isnan(got) == np.isnan(want)).all()
    inf = np.isinf(want)
    assert (got[inf] == want[inf]).all()


CASES = [
    ('exp', np.exp, -110.0, 90.0, 1.0),
    ('log', np.log, -1.0, 1e4, 1.0),
    ('sin', np.sin, -100.0, 100.0, 2.0),
    ('cos', np.cos, -100.0, 100.0, 2.0),
    ('sin', np.sin, -65536.0, 65536.0, 2.0),
    ('cos', np.cos, -65536.0, 65536.0, 2.0),
    ('tanh', np.tanh, -12.0, 12.0, 1.5),
    ('tanh', np.tanh, -0.7, 0.7, 1.5),
]


@pytest.mark.parametrize('name,f64,lo,hi,ulps', CASES)
def test_unary_float32_ulps_and_torch(name, f64, lo, hi, ulps):
    x = _inputs(int(hi), lo, hi, trig=name in ('sin', 'cos'))
    got = getattr(tape, name)(tape.tensor(x)).numpy()
    assert got.dtype == F32
    with np.errstate(all='ignore'):
        ref = f64(x.astype(np.float64))
    want = getattr(torch, name)(torch.from_numpy(x)).numpy()
    _same_nan_inf(got, want)
    fin = np.isfinite(ref) & np.isfinite(got)
    assert _ulps(got[fin], ref[fin]).max() <= ulps
    # and against PyTorch's own float32 (Sleef, ~1 ulp)
    assert _ulps(got[fin], want[fin].astype(np.float64)).max() <= ulps + 1.5
    # odd / even
    if name == 'sin':
        assert (tape.sin(tape.tensor(-x)).numpy()[~np.isnan(x)] == -got[~np.isnan(x)]).all()
        assert np.signbit(got[1]) and not np.signbit(got[0])      # sin(-0) = -0
    if name in ('sin', 'cos'):       # the kernel's own values, not NumPy's fallback
        out = np.empty_like(x)
        from compiler import activation_kernels as ak
        assert getattr(ak, name + '32_fwd')(x, out) == 0 and np.array_equal(out, got,
                                                                            equal_nan=True)
    if name == 'cos':
        assert (tape.cos(tape.tensor(-x)).numpy()[~np.isnan(x)] == got[~np.isnan(x)]).all()


@pytest.mark.parametrize('name', ['exp', 'log', 'sin', 'cos', 'tanh'])
def test_small_and_strided_float32_keep_numpy_results(name):
    x = np.abs(_inputs(3, -4.0, 4.0)[50:]) + F32(0.5)
    small = x[:100]
    with np.errstate(all='ignore'):
        assert np.array_equal(getattr(tape, name)(tape.tensor(small)).numpy(),
                              getattr(np, name)(small))
        xs = x[:64 * 60].reshape(64, 60)[:, ::3]
        got = getattr(tape, name)(tape.tensor(xs)).numpy()
    assert got.shape == xs.shape
    assert np.allclose(got, getattr(np, name)(xs.astype(np.float64)), rtol=1e-6, atol=0)


def test_sin_cos_beyond_kernel_range_take_numpy():
    x = _inputs(4, -10.0, 10.0)
    x[7] = F32(1e30)            # one far argument: the whole array is NumPy's
    x[8] = np.inf
    for name in ('sin', 'cos'):
        with np.errstate(all='ignore'):
            got = getattr(tape, name)(tape.tensor(x)).numpy()
            assert np.array_equal(got, getattr(np, name)(x), equal_nan=True)


def test_float64_keeps_numpy():
    # (where NumPy's float64 ones are not vectorized, no AVX-512, these take
    # compiled kernels: tests/test_exp64_kernel.py, tests/test_f64_kernels.py)
    from tape._ops import _NP_SIMD_EXP64
    if not _NP_SIMD_EXP64:
        pytest.skip('float64 exp, log, sin, cos and tanh take kernels on this CPU')
    x = np.random.default_rng(5).uniform(0.1, 50.0, N)
    for name in ('exp', 'log', 'sin', 'cos', 'tanh'):
        assert np.array_equal(getattr(tape, name)(tape.tensor(x)).numpy(), getattr(np, name)(x))


@pytest.mark.parametrize('name', ['sigmoid', 'silu', 'gelu'])
def test_activations_float32_vs_torch(name):
    x = _inputs(6, -20.0, 20.0)
    fn = (lambda L: getattr(L, 'sigmoid')) if name == 'sigmoid' else \
        (lambda L: getattr(L.nn.functional, name))
    got = fn(tape)(tape.tensor(x)).numpy()
    want = fn(torch)(torch.from_numpy(x)).numpy()
    fin = np.isfinite(want) & np.isfinite(got)
    # PyTorch's float32 gelu is 1 + erf(x / sqrt 2): it cancels for x < 0 (the
    # kernel's erfc form is closer to the exact value there)
    assert np.allclose(got[fin], want[fin], rtol=1e-5, atol=2e-6)
    assert (np.isnan(got) == np.isnan(want))[x != np.inf].all()


@pytest.mark.parametrize('name', ['exp', 'log', 'sin', 'cos', 'tanh'])
def test_gradients_float32(name):
    x = np.random.default_rng(7).uniform(0.2, 3.0, (64, 64)).astype(F32)
    a = tape.tensor(x, requires_grad=True)
    getattr(tape, name)(a).sum().backward()
    t = torch.tensor(x, requires_grad=True)
    getattr(torch, name)(t).sum().backward()
    assert np.allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
