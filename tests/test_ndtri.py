"""special.ndtri as one primitive (tape/_rules.py, compiler/kernels.py ndtri):
full precision in both tails, where sqrt(2) * erfinv(2p - 1) cancelled."""
import math

import numpy as np
import pytest

import tape

P = np.array([1e-300, 1e-20, 1e-16, 1e-13, 1e-10, 1e-3, 0.02, 0.03, 0.3, 0.5, 0.7, 0.97,
              1 - 1e-10, 0.0, 1.0, -0.1, 1.1, np.nan])


def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def test_ndtri_inverts_the_normal_cdf_in_both_tails():
    got = tape.special.ndtri(tape.tensor(P, dtype=tape.float64)).numpy()
    for p, x in zip(P[:13], got[:13]):
        if p <= 0.5:        # Phi keeps its relative precision below the median
            assert abs(_phi(x) / p - 1) < 1e-13, (p, x)
        else:
            assert abs((1 - _phi(x)) / (1 - p) - 1) < 1e-5, (p, x)   # (1 - p) rounds
    assert got[13] == -np.inf and got[14] == np.inf and np.isnan(got[15:]).all()
    assert got[9] == 0.0 and abs(got[8] + got[10]) < 1e-15       # (1 - 0.7 rounds)


def test_ndtri_matches_torch():
    torch = pytest.importorskip('torch')
    got = tape.special.ndtri(tape.tensor(P, dtype=tape.float64)).numpy()
    want = torch.special.ndtri(torch.tensor(P, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14, equal_nan=True)
    x = tape.tensor(P[:13], requires_grad=True)
    tape.special.ndtri(x).sum().backward()
    xt = torch.tensor(P[:13], requires_grad=True)
    torch.special.ndtri(xt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert type(tape.special.ndtri(x).grad_fn).__name__ == 'SpecialNdtriBackward0'


def test_ndtri_float32_and_higher_order():
    y = tape.special.ndtri(tape.tensor([0.25, 0.5]))
    assert y.dtype == tape.float32
    np.testing.assert_allclose(y.numpy(), [-0.6744898, 0.0], rtol=1e-6)
    x = tape.tensor([0.2, 0.6], dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(tape.special.ndtri, (x,))
    assert tape.autograd.gradgradcheck(tape.special.ndtri, (x,))
