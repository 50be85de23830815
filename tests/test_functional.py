"""tape.autograd.functional against PyTorch's."""
import numpy as np
import pytest

import tape
from tape.autograd import functional as F


def f(x, y):
    return (x ** 2).sum() * y.sin().sum() + (x * y).sum()



@pytest.mark.parametrize('which', ['jacobian', 'hessian', 'vjp', 'hvp', 'jvp'])
def test_functional_matches_torch(which):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    ta, tb = tape.tensor(a), tape.tensor(b)
    pa, pb = torch.tensor(a), torch.tensor(b)
    tf = lambda x, y: (x ** 2).sum() * y.sin().sum() + (x * y).sum()   # noqa: E731
    if which == 'jacobian':
        mine = F.jacobian(lambda x: tape.tanh(x * 2) * x.sum(), ta)
        ref = torch.autograd.functional.jacobian(lambda x: torch.tanh(x * 2) * x.sum(), pa)
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10)
    elif which == 'hessian':
        mine = F.hessian(f, (ta, tb))
        ref = torch.autograd.functional.hessian(tf, (pa, pb))
        for i in range(2):
            for j in range(2):
                np.testing.assert_allclose(mine[i][j].numpy(), ref[i][j].numpy(), rtol=1e-10,
                                           atol=1e-12)
    elif which == 'vjp':
        v = rng.standard_normal(3)
        _, mine = F.vjp(lambda x: x.exp() * x, ta, tape.tensor(v))
        _, ref = torch.autograd.functional.vjp(lambda x: x.exp() * x, pa, torch.tensor(v))
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10)
    elif which == 'jvp':
        v = rng.standard_normal(3)
        _, mine = F.jvp(lambda x: x.exp() * x.sum(), ta, tape.tensor(v))
        _, ref = torch.autograd.functional.jvp(lambda x: x.exp() * x.sum(), pa, torch.tensor(v))
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10)
    else:
        v = rng.standard_normal(3)
        _, mine = F.hvp(lambda x: (x ** 4).sum() + x.prod(), ta, tape.tensor(v))
        _, ref = torch.autograd.functional.hvp(lambda x: (x ** 4).sum() + x.prod(), pa,
                                               torch.tensor(v))
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-10)
