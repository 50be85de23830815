"""The float64 log, tanh, sin and cos kernels (compiler/f64_kernels.py), which
tape.log/tanh/sin/cos take on CPUs where NumPy's float64 versions are scalar
libm loops: accuracy against the C library (and x87 long double where NumPy
has it), special values, the out-of-range fallback of sin and cos, and the
ops built on them (values, NumPy's path for small and strided inputs,
gradients, PyTorch).  The kernels are called directly, so these run on any CPU."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import tape
from compiler import f64_kernels as fk
from conftest import check_grad
from tape import _ops

NAMES = ('log', 'tanh', 'sin', 'cos')
LONG = np.finfo(np.longdouble).nmant >= 63          # x87 long double (exact enough)


def _libm(name, x):
    """The C library's function element by element (NaN for a domain error)."""
    fn = getattr(math, name)

    def one(v):
        try:
            return fn(v)
        except ValueError:
            return math.nan
    return np.array([one(v) for v in x.tolist()], np.float64)


def _kernel(name, x):
    x = np.ascontiguousarray(x, np.float64)
    out = np.empty_like(x)
    bad = getattr(fk, name + '64_fwd')(x, out)
    assert not bad
    return out


def _steps(got, ref):
    """|got - ref| in ulps of ref (whole steps between float64s)."""
    return np.abs(got - ref) / np.spacing(np.abs(ref))


CASES = [
    ('log', 1e-300, 1e-290), ('log', 0.5, 2.0), ('log', 0.99, 1.01), ('log', 1e-5, 1e5),
    ('log', 0.0, 1.7e308), ('log', 0.0, 2.3e-308),          # subnormals
    ('tanh', -0.7, 0.7), ('tanh', -1e-3, 1e-3), ('tanh', 0.6, 0.65), ('tanh', -20.0, 20.0),
    ('tanh', -1e-300, 1e-300),
    ('sin', -4.0, 4.0), ('sin', -100.0, 100.0), ('sin', -1e5, 1e5), ('sin', 1e8, 1e9),
    ('sin', -1e-8, 1e-8),
    ('cos', -4.0, 4.0), ('cos', -100.0, 100.0), ('cos', -1e5, 1e5), ('cos', 1e8, 1e9),
    ('cos', -1e-8, 1e-8),
]


@pytest.mark.parametrize('name,lo,hi', CASES)
def test_within_an_ulp_step_of_libm(name, lo, hi):
    # glibc's log, sin and cos are within ~0.5 ulp, its tanh within ~2
    x = np.random.default_rng(CASES.index((name, lo, hi))).uniform(lo, hi, 50_000)
    got = _kernel(name, x)
    ref = _libm(name, x)
    fin = np.isfinite(ref) & (ref != 0)
    assert _steps(got[fin], ref[fin]).max() <= (2.0 if name == 'tanh' else 1.0)
    assert np.array_equal(got[~fin], ref[~fin])


@pytest.mark.skipif(not LONG, reason='no extended-precision long double here')
@pytest.mark.parametrize('name,lo,hi', CASES)
def test_ulp_error_against_long_double(name, lo, hi):
    x = np.random.default_rng(7).uniform(lo, hi, 50_000)
    got = _kernel(name, x)
    ref = getattr(np, name)(x.astype(np.longdouble))
    ref64 = ref.astype(np.float64)
    fin = np.isfinite(ref64) & (ref64 != 0)
    err = np.abs(got[fin].astype(np.longdouble) - ref[fin]) / np.spacing(np.abs(ref64[fin]))
    # measured: log 0.80, tanh 1.34, sin and cos 0.78
    assert float(err.max()) <= (1.5 if name == 'tanh' else 1.0)


def test_log_special_values():
    tiny = np.finfo(np.float64).tiny
    x = np.array([0.0, -0.0, -1.0, -1e-300, -np.inf, np.inf, np.nan, -np.nan, 1.0, 5e-324,
                  tiny, tiny * (1 - 2 ** -52), 1.7976931348623157e308, 2.0, 0.5, math.e])
    got = _kernel('log', x)
    with np.errstate(all='ignore'):
        want = np.log(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert got[0] == got[1] == -np.inf and got[5] == np.inf
    assert got[8] == 0.0 and not np.signbit(got[8])
    fin = np.isfinite(want)
    assert _steps(got[fin], _libm('log', x[fin])).max() <= 1.0
    assert got[9] == math.log(5e-324) and got[13] == math.log(2.0)


def test_tanh_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300, 0.625,
                  np.nextafter(0.625, 0), 20.0, 22.0, 354.0, 355.0, 1e300, -1e300, -30.0])
    got = _kernel('tanh', x)
    assert got[0] == 0.0 and not np.signbit(got[0])
    assert got[1] == 0.0 and np.signbit(got[1])
    assert got[2] == 1.0 and got[3] == -1.0 and np.isnan(got[4])
    assert got[5] == 5e-324 and got[6] == -5e-324 and got[7] == 1e-300
    assert (got[10:15] == 1.0).all() and got[15] == -1.0 and got[16] == -1.0
    assert _steps(got[8:11], _libm('tanh', x[8:11])).max() <= 1.0


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_trig_special_values(name):
    x = np.array([0.0, -0.0, np.nan, 5e-324, -5e-324, 1e-300, math.pi / 4, -math.pi / 2,
                  math.pi, 2 * math.pi, fk.TRIG_MAX64, -fk.TRIG_MAX64])
    got = _kernel(name, x)
    if name == 'sin':
        assert got[0] == 0.0 and not np.signbit(got[0])
        assert got[1] == 0.0 and np.signbit(got[1])
        assert got[3] == 5e-324 and got[4] == -5e-324 and got[5] == 1e-300
    else:
        assert (got[[0, 1, 3, 4, 5]] == 1.0).all()
    assert np.isnan(got[2])
    rest = [6, 7, 8, 9, 10, 11]
    assert _steps(got[rest], _libm(name, x[rest])).max() <= 1.0


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_trig_near_multiples_of_half_pi(name):
    # the doubles nearest k pi/2 and their neighbours: the reduction cancels
    # almost everything, the result (sin there) is tiny
    k = np.concatenate([np.arange(1, 3000),
                        np.random.default_rng(8).integers(1, int(fk.TRIG_MAX64 / 1.6), 3000)])
    c = (k.astype(np.longdouble) * (np.longdouble(np.pi) + np.longdouble(1.2246467991473532e-16))
         / 2).astype(np.float64)
    x = np.concatenate([c, np.nextafter(c, 0), np.nextafter(c, np.inf)])
    x = x[x <= fk.TRIG_MAX64]
    got = _kernel(name, x)
    assert _steps(got, _libm(name, x)).max() <= 1.0


@pytest.mark.parametrize('name', ['sin', 'cos'])
def test_trig_counts_arguments_out_of_range(name):
    x = np.random.default_rng(9).uniform(-3, 3, 1000)
    out = np.full_like(x, 7.0)
    x[[5, 900]] = [fk.TRIG_MAX64 * 1.5, -np.inf]
    x[17] = np.inf
    assert getattr(fk, name + '64_fwd')(x, out) == 3
    assert (out == 7.0).all()                   # left unwritten
    # tape falls back to NumPy for the whole array: its result, NaN included
    with np.errstate(all='ignore'):
        want = getattr(np, name)(x)
        got = getattr(tape, name)(tape.tensor(x)).numpy()
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize('name', NAMES)
def test_tape_takes_the_kernel_where_numpy_is_scalar(name):
    x = np.random.default_rng(10).uniform(0.05, 20.0, (64, 80))
    got = getattr(tape, name)(tape.tensor(x)).numpy()
    if not _ops._NP_SIMD_EXP64:
        assert np.array_equal(got, _kernel(name, x.ravel()).reshape(x.shape))
    else:                                       # NumPy's own, vectorized
        assert np.array_equal(got, getattr(np, name)(x))
    assert _steps(got.ravel(), _libm(name, x.ravel())).max() <= 2.0


@pytest.mark.parametrize('name', NAMES)
def test_strided_and_small_inputs_take_numpy(name):
    x = np.random.default_rng(11).uniform(0.05, 5.0, (64, 96))
    t = tape.tensor(x)
    for a, want in ((t[:, ::3], x[:, ::3]), (t.T, x.T), (t[:3, :5], x[:3, :5]),
                    (t[0, :100], x[0, :100])):
        got = getattr(tape, name)(a).numpy()
        assert got.shape == want.shape
        assert np.array_equal(got, getattr(np, name)(want))


@pytest.mark.parametrize('name', NAMES)
def test_gradients_float64(name):
    x = np.random.default_rng(12).uniform(0.2, 3.0, (24, 32))     # 768: the kernel's path
    check_grad(lambda a: getattr(tape, name)(a) * 1.5, [x])


@pytest.mark.parametrize('name', NAMES)
def test_values_and_gradients_vs_torch(name):
    torch = pytest.importorskip('torch')
    lo, hi = (1e-3, 50.0) if name == 'log' else (-30.0, 30.0)
    x = np.random.default_rng(13).uniform(lo, hi, (128, 64))
    a = tape.tensor(x, requires_grad=True)
    y = getattr(tape, name)(a)
    (y * y).sum().backward()                    # grad 2 y y'
    t = torch.tensor(x, requires_grad=True)
    yt = getattr(torch, name)(t)
    (yt * yt).sum().backward()
    want = yt.detach().numpy()
    # both within ~1-2 ulp of the exact value
    assert _steps(y.detach().numpy(), want).max() <= 3.0
    # (tanh's y' = 1 - y^2 cancels near |y| = 1: an ulp of y is ~4e-16 there)
    assert np.allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=2e-15)


def test_special_values_vs_torch():
    torch = pytest.importorskip('torch')
    x = np.resize(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 5e-324, 1e-310, 3.0]),
                  1024)
    for name in NAMES:
        with np.errstate(all='ignore'):
            got = getattr(tape, name)(tape.tensor(x)).numpy()
        want = getattr(torch, name)(torch.from_numpy(x)).numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        fin = np.isfinite(want)
        assert np.array_equal(got[~fin], want[~fin], equal_nan=True), name
        assert np.array_equal(np.signbit(got[fin]), np.signbit(want[fin])), name
        assert _steps(got[fin], want[fin]).max() <= 2.0, name


def test_nothing_compiles_at_import():
    code = ('import compiler.f64_kernels as m\n'
            'assert not any(getattr(m, n + "64_fwd").signatures for n in '
            '("log", "tanh", "sin", "cos"))\n')
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 0, p.stderr[-2000:]
