"""The one-pass softplus forwards (compiler/softplus_kernels.py) behind
tape.nn.functional.softplus for C-contiguous float32/float64 arrays: within a
few ulp of the exact value, PyTorch's threshold select, overflow, NaN, infinities
and signed zeros, and gradients as PyTorch's.

References: float32 against float64 arithmetic, float64 against NumPy's long
double (x87 extended, 11 more bits) where it is wider than float64."""
import math
import subprocess
import sys

import numpy as np
import pytest

import tape
import tape.nn.functional as TF
from compiler import softplus_kernels as sk

torch = pytest.importorskip('torch')
F = torch.nn.functional

LD_WIDE = np.finfo(np.longdouble).nmant >= 63


def _softplus(x, beta=1.0, threshold=20.0):
    return TF.softplus(tape.tensor(x), beta, threshold).numpy()


def _ref(x, beta=1.0, threshold=20.0):
    """The exact softplus of y = x * beta rounded in x's dtype, in long double
    (float64 for float32 x): x where y > threshold, inf where PyTorch's
    log1p(exp(y)) overflows, else max(y, 0) + log1p(exp(-|y|)), / beta."""
    dt = x.dtype.type
    b = dt(beta)
    with np.errstate(all='ignore'):
        y = x * b
        W = np.longdouble if dt == np.float64 else np.float64
        yw = y.astype(W)
        sp = np.maximum(yw, 0) + np.log1p(np.exp(-np.abs(yw)))
        if threshold != math.inf:
            sp = np.where(y > sk.LOGMAX32 if dt == np.float32 else y > sk.LOGMAX64, np.inf, sp)
        sp = sp / W(b) if beta != 1 else sp
        return np.where(y > dt(threshold), x.astype(W), sp)


def _ulps(got, ref, dt):
    """|got - ref| in ulps of ref rounded to dt (equal infinities and NaNs: 0)."""
    r = ref.astype(dt)
    with np.errstate(all='ignore'):
        err = np.abs(got.astype(ref.dtype) - ref) / np.spacing(np.abs(r)).astype(ref.dtype)
    same = (got == r) | (np.isnan(got) & np.isnan(r))
    return np.where(same, 0, err).astype(np.float64)


def _wide_inputs(dt, n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-120, 100, n), rng.uniform(-4, 4, n),
                        rng.uniform(-1e-3, 1e-3, n // 10),
                        np.exp(rng.uniform(-80, 6, n // 4)) * rng.choice([-1, 1], n // 4),
                        np.linspace(-2.0, 2.0, 100_001)])
    return x.astype(dt)


# measured: 1.6 ulp (float32, with a division by beta 2.1), 2.0 ulp (float64)
ULP = {np.float32: 2.5, np.float64: 2.5 if LD_WIDE else 3.5}


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('beta,threshold', [(1.0, 20.0), (2.0, 5.0), (0.5, 3.0), (-1.5, 20.0),
                                            (3.7, 50.0), (1.0, math.inf), (-2.0, math.inf),
                                            (0.25, 1000.0), (1.0, -5.0)])
def test_values_within_a_few_ulp(dt, beta, threshold):
    x = _wide_inputs(dt, n=100_000 if dt == np.float64 else 200_000)
    got = _softplus(x, beta, threshold)
    assert got.dtype == dt
    err = _ulps(got, _ref(x, beta, threshold), dt)
    i = int(np.argmax(err))
    assert err[i] <= ULP[dt], (x[i], got[i], err[i])


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_log1p_branch_point(dt):
    # exp(-|y|) across sqrt(2) - 1 and 1/2, where log1p's reduction switches
    for c in (-math.log(math.sqrt(2) - 1), math.log(2.0)):
        x = np.linspace(c - 1e-3, c + 1e-3, 20001).astype(dt)
        for xx in (x, -x):
            err = _ulps(_softplus(xx), _ref(xx), dt)
            assert err.max() <= ULP[dt]


def test_float64_against_math_log1p():
    # y < 0: log1p(exp(y)) by the C library, exp(y) rounded once (the reference's
    # own error reaches ~1 ulp there, hence 3)
    x = np.random.default_rng(3).uniform(-40, 0, 20000)
    ref = np.array([math.log1p(math.exp(v)) for v in x.tolist()])
    got = _softplus(x)
    assert (np.abs(got - ref) / np.spacing(ref)).max() <= 3


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('beta', [1.0, 2.0, -1.5, 0.5])
@pytest.mark.parametrize('threshold', [20.0, 5.0, math.inf, 1000.0, -3.0])
def test_special_values_as_torch(dt, beta, threshold):
    big = 1e300 if dt == np.float64 else 1e38
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 5e-324 if dt == np.float64
                  else 1e-45, 20.0, -20.0, 19.999, 20.001, 5.0, 2.5, 10.0, 40.0, 44.36, 88.0,
                  88.7, 88.8, 90.0, 354.9, 355.0, 709.7, 709.8, 720.0, -90.0, -104.0, -800.0,
                  big, -big, 1.5, -3.0, -6.0], dt)
    got = _softplus(x, beta, threshold)
    if threshold == math.inf:
        y = torch.tensor(x) * beta
        want = ((torch.clamp(y, min=0) + torch.log1p(torch.exp(-y.abs()))) / beta).numpy()
    else:
        want = F.softplus(torch.tensor(x), beta, threshold).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=4 * np.finfo(dt).eps, atol=0)
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    # zeros keep PyTorch's sign (0 / beta); x itself above the threshold exactly
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    with np.errstate(all='ignore'):
        above = x * dt(beta) > dt(threshold)
    np.testing.assert_array_equal(got[above], x[above])


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_exact_special_results(dt):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30], dt)
    got = _softplus(x)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 0 and not np.signbit(got[2])
    assert np.all(got[3:] == dt(math.log(2.0)))
    got = _softplus(x, -2.0)
    # x = inf: y = -inf, 0 / -2 = -0.0; x = -inf: y = inf > 20, x itself
    assert got[1] == 0 and np.signbit(got[1]) and got[2] == -np.inf
    assert np.all(got[3:] == dt(math.log(2.0) / -2.0))


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_threshold_select_and_overflow(dt):
    T = dt
    # y exactly at the threshold takes the formula, just above it x itself
    t = T(5.0)
    x = np.array([t / 2, np.nextafter(t, T(9)) / 2, np.nextafter(t, T(0)) / 2], dt)
    got = _softplus(x, 2.0, 5.0)
    want = F.softplus(torch.tensor(x), 2.0, 5.0).numpy()
    assert got[1] == x[1] and want[1] == x[1]
    assert got[0] != x[0] and abs(got[0] - want[0]) <= 2 * np.spacing(want[0])
    # under a threshold that high, PyTorch's log1p(exp(y)) overflows from log(max)
    lm = T(sk.LOGMAX32 if dt == np.float32 else sk.LOGMAX64)
    x = np.array([lm, np.nextafter(lm, T(np.inf)), T(1000.0)], dt)
    got = _softplus(x, 1.0, 2000.0)
    assert np.isfinite(got[0]) and abs(got[0] - lm) <= np.spacing(lm)
    assert got[1] == np.inf and got[2] == np.inf
    assert F.softplus(torch.tensor(x[2:]), 1.0, 2000.0).item() == math.inf
    # no threshold: no overflow either
    got = _softplus(x, 1.0, math.inf)
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(), (1,), (7,), (16,), (255,), (256,), (3, 5),
                                   (64, 300), (0,), (2, 0, 3)])
def test_sizes_match_torch(dt, shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 10).astype(dt)
    for beta, threshold in ((1.0, 20.0), (2.0, 5.0)):
        got = _softplus(x, beta, threshold)
        want = F.softplus(torch.tensor(x), beta, threshold).numpy()
        assert got.shape == x.shape and got.dtype == dt
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dt).eps, atol=0)


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_strided_inputs(dt):
    rng = np.random.default_rng(2)
    base = (rng.standard_normal((64, 80)) * 10).astype(dt)
    for x in (base[:, ::2], base.T, base[::-1], base[3:40, 5:9]):
        got = _softplus(x, 2.0, 5.0)
        np.testing.assert_allclose(got, F.softplus(torch.tensor(x.copy()), 2.0, 5.0).numpy(),
                                   rtol=4 * np.finfo(dt).eps, atol=0)
        # the NumPy path for a strided input and the kernel for its copy agree
        np.testing.assert_allclose(got, _softplus(np.ascontiguousarray(x), 2.0, 5.0),
                                   rtol=4 * np.finfo(dt).eps, atol=0)


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('beta,threshold', [(1.0, 20.0), (2.0, 5.0), (-1.5, 20.0),
                                            (0.5, 3.0)])
@pytest.mark.parametrize('n', [7, 300, 5000])
def test_gradients_match_torch(dt, beta, threshold, n):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(n) * 8).astype(dt)
    x[:6] = [np.nan, 0.0, -0.0, threshold / beta, 30.0, -30.0][:min(6, n)]
    g = rng.standard_normal(n).astype(dt)
    A = tape.tensor(x, requires_grad=True)
    X = torch.tensor(x, requires_grad=True)
    oa = TF.softplus(A, beta, threshold)
    ot = F.softplus(X, beta, threshold)
    np.testing.assert_allclose(oa.detach().numpy(), ot.detach().numpy(),
                               rtol=4 * np.finfo(dt).eps, atol=0)
    oa.backward(tape.tensor(g))
    ot.backward(torch.tensor(g))
    # the backward rule (tape/_rules.py, unchanged) is grad * sigmoid(beta x):
    # PyTorch's z / (z + 1) differs by up to ~12 float32 ulp with a negative beta
    np.testing.assert_allclose(A.grad.numpy(), X.grad.numpy(),
                               rtol=16 * np.finfo(dt).eps, atol=np.finfo(dt).tiny)


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_logsigmoid_and_bce_with_logits(dt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((32, 50)) * 30).astype(dt)
    x.reshape(-1)[:4] = [np.inf, -np.inf, 0.0, 800.0]
    t = rng.uniform(0, 1, x.shape).astype(dt)
    A = tape.tensor(x, requires_grad=True)
    X = torch.tensor(x, requires_grad=True)
    oa, ot = TF.logsigmoid(A), F.logsigmoid(X)
    np.testing.assert_allclose(oa.detach().numpy(), ot.detach().numpy(),
                               rtol=4 * np.finfo(dt).eps, atol=0)
    oa.sum().backward()
    ot.sum().backward()
    # (the rule's gradient is exactly 1 where softplus(-x) rounds to -x: 1 - e with
    # e under half an ulp of x, up to ~16 eps off)
    np.testing.assert_allclose(A.grad.numpy(), X.grad.numpy(), rtol=8 * np.finfo(dt).eps,
                               atol=32 * np.finfo(dt).eps)
    xf = np.where(np.isfinite(x), x, 0).astype(dt)
    la = TF.binary_cross_entropy_with_logits(tape.tensor(xf), tape.tensor(t)).item()
    lt = F.binary_cross_entropy_with_logits(torch.tensor(xf), torch.tensor(t)).item()
    assert abs(la - lt) <= (1e-5 if dt == np.float32 else 1e-12) * abs(lt)


def test_float64_gradcheck():
    x = tape.tensor(np.random.default_rng(6).standard_normal(300) * 3, requires_grad=True)
    assert tape.autograd.gradcheck(lambda v: TF.softplus(v, 2.0, 5.0), (x,))


def test_nothing_compiled_at_import():
    code = ('import compiler.softplus_kernels as k; '
            'assert not k.softplus32_fwd.signatures and not k.softplus64_fwd.signatures')
    subprocess.run([sys.executable, '-c', code], check=True)
