"""The float64 exp kernel (compiler/activation_kernels.py's exp64), which
tape.exp takes on CPUs where NumPy's float64 exp is a scalar libm loop: within
1 ulp of the exact value, NaN, infinities, overflow and subnormal results as
NumPy's and PyTorch's, and the gradient built on it."""
import math

import numpy as np
import pytest

import tape
from compiler import activation_kernels as ak
from tape import _ops


def _libm_exp(x):
    """The C library's exp (glibc's is within 0.5 ulp), element by element:
    NumPy's own float64 exp on AVX-512 CPUs is a vector one of its own."""
    def one(v):
        try:
            return math.exp(v)
        except OverflowError:
            return math.inf
    return np.array([one(v) for v in x.tolist()], np.float64)


def _ulps(got, ref):
    return np.abs(got - ref) / np.spacing(np.abs(ref))


def _kernel(x):
    out = np.empty_like(x)
    ak.exp64_fwd(x, out)
    return out


@pytest.mark.parametrize('lo,hi', [(-1.0, 1.0), (-40.0, 40.0), (-708.0, 709.78),
                                   (700.0, 711.0), (-1e-9, 1e-9)])
def test_within_one_ulp_of_libm(lo, hi):
    x = np.random.default_rng(int(hi)).uniform(lo, hi, 100_000)
    got = _kernel(x)
    ref = _libm_exp(x)
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float64).tiny)
    assert _ulps(got[normal], ref[normal]).max() <= 1.0
    assert np.array_equal(got[~normal], ref[~normal])      # overflow: inf


def test_subnormal_results_within_one_step():
    x = np.random.default_rng(3).uniform(-746.0, -708.0, 100_000)
    got = _kernel(x)
    ref = _libm_exp(x)
    assert (np.abs(got - ref) <= 2 * 5e-324 + 1e-16 * ref).all()
    assert (got[x < -745.2] == 0).all() and (got >= 0).all()


def test_special_values():
    x = np.array([0.0, -0.0, 2.0 ** -60, np.inf, -np.inf, np.nan, -np.nan, 709.782712893384,
                  709.7827128933841, 709.8, 709.81, 1e300, -745.1332191019411,
                  -745.1332191019412, -999.0, -1000.5, -1e300, 1e-320, -1e-320])
    got = _kernel(x)
    ref = _libm_exp(x)
    assert np.array_equal(got, ref, equal_nan=True)
    assert np.isfinite(got[7]) and got[7] > 1.79e308 and got[8] == np.inf   # the edge of overflow


def test_strided_and_small_inputs_and_shapes():
    x = np.random.default_rng(4).uniform(-5, 5, (64, 96))
    for a in (x, x[:, ::3], x[:3, :5], x.T):
        got = tape.exp(tape.tensor(a)).numpy()
        assert got.shape == a.shape
        assert np.allclose(got, _libm_exp(a.ravel()).reshape(a.shape), rtol=3e-16, atol=0)


def test_tape_exp_takes_the_kernel_where_numpy_is_scalar():
    x = np.random.default_rng(5).uniform(-20, 20, 4096)
    got = tape.exp(tape.tensor(x)).numpy()
    if not _ops._NP_SIMD_EXP64:
        assert np.array_equal(got, _kernel(x))
    assert _ulps(got, _libm_exp(x)).max() <= 1.0


def test_gradient_and_torch():
    torch = pytest.importorskip('torch')
    x = np.random.default_rng(6).uniform(-3, 3, (128, 64))
    a = tape.tensor(x, requires_grad=True)
    y = (a ** 2 * tape.exp(a)).sum()
    y.backward()
    t = torch.tensor(x, requires_grad=True)
    yt = (t ** 2 * torch.exp(t)).sum()
    yt.backward()
    assert np.allclose(y.item(), yt.item(), rtol=1e-13)
    assert np.allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=0)
    assert np.allclose(tape.exp(tape.tensor(x)).numpy(), torch.exp(torch.from_numpy(x)).numpy(),
                       rtol=3e-16, atol=0)
