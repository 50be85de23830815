"""Basic indexing's cached plans (tape/_ops.py ``getitem``): a key of ints,
slices, None and Ellipsis is planned once per (key, shape), so every check runs
a key twice, the first call (planning) and a cached one, against torch."""
import numpy as np
import pytest

import tape
from tape import _ops

torch = pytest.importorskip("torch")

SMALL = (4, 6, 5)
BIG = (32, 32, 20)          # 20480 elements: big records keep the key

KEYS = [
    3, -1, np.int64(2), slice(1, 3), slice(None, None, 2), slice(None), None, Ellipsis,
    (slice(None), slice(1, 5)), (1, 2), (1, 2, 3), (-1, slice(0, 2), 4),
    (Ellipsis, slice(None, 3)), (slice(None), None), (None, 1), (1, None),
    (slice(None), slice(None)), (slice(None), 2, None), (Ellipsis, 0), (0, Ellipsis, None),
    (slice(2, None), Ellipsis, slice(None, None, 3)), (), (slice(0, 100),),
]


def _pair(shape, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tape.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)


def _name(t):
    return None if t.grad_fn is None else t.grad_fn.name()


@pytest.mark.parametrize("shape", [SMALL, BIG])
@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("leaf", [True, False])
def test_key_matches_torch_first_and_cached(shape, key, leaf):
    x, tx = _pair(shape)
    for rep in range(2):
        a, ta = (x, tx) if leaf else (x * 2, tx * 2)
        y, ty = a[key], ta[key]
        assert tuple(y.shape) == tuple(ty.shape)
        assert _name(y) == _name(ty)
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        w = np.random.default_rng(rep).standard_normal(tuple(ty.shape)).astype(np.float32)
        (y * tape.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    # a key of one step keeps its plan; one of several (x[1, 2]), its steps
    pk = _ops._plan_key(key)
    assert (pk, shape) in _ops._PLANS or _ops._STEPS.get((pk, shape))


@pytest.mark.parametrize("shape", [SMALL, BIG])
def test_untracked_views_write_through(shape):
    for rep in range(2):
        x, tx = _pair(shape)
        x, tx = x.detach(), tx.detach()
        for key in [(slice(None), slice(1, 3)), 1, (Ellipsis, 2), (None, 0), (1, 2, 3)]:
            y, ty = x[key], tx[key]
            y.mul_(3)
            ty.mul_(3)
            assert x._version == tx._version and y._version == ty._version
        np.testing.assert_array_equal(x.numpy(), tx.numpy())


@pytest.mark.parametrize("shape", [SMALL, BIG])
def test_inplace_through_a_view_of_a_graph_tensor(shape):
    x, tx = _pair(shape)
    for rep in range(2):
        h, th = x * 1, tx * 1
        v, tv = h[:, 1:4], th[:, 1:4]
        h[1].mul_(2)                    # v is re-read from the changed base
        th[1].mul_(2)
        v[0].add_(1)
        tv[0].add_(1)
        (v * v).sum().backward()
        (tv * tv).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy())


def test_inplace_on_a_view_of_a_leaf_raises_every_time():
    x, _ = _pair(SMALL)
    for rep in range(2):
        with pytest.raises(RuntimeError, match='view of a leaf Variable'):
            x[1:3].add_(1)


@pytest.mark.parametrize("key", [
    tape.tensor([0, 2]), [0, 2], True, False, np.bool_(True), (slice(None), [1, 0]),
    (tape.tensor(1), slice(0, 2)), tape.tensor(2), (slice(None), True),
    (Ellipsis, np.array([1, 1])), slice(np.int64(1), 3), slice(True, 3),
], ids=repr)
def test_keys_that_are_not_planned(key):
    x, tx = _pair(SMALL)
    tkey = key
    conv = lambda k: torch.tensor(k.numpy()) if isinstance(k, tape.Tensor) else (  # noqa: E731
        torch.tensor(k) if isinstance(k, np.ndarray) else (
            bool(k) if isinstance(k, np.bool_) else k))
    tkey = tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)
    x[1]                            # an int's plan must not answer for True
    before = len(_ops._PLANS)
    for rep in range(2):
        y, ty = x[key], tx[tkey]
        assert _name(y) == _name(ty)
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert _ops._plan_key(key) is None
    assert len(_ops._PLANS) == before


def test_errors_are_the_same_on_every_call():
    x, _ = _pair(SMALL)
    x[3]
    for rep in range(2):
        with pytest.raises(IndexError, match=r'index 4 is out of bounds for dimension 0 '
                                             r'with size 4 \(tensor of shape \(4, 6, 5\)\)'):
            x[4]
        with pytest.raises(IndexError, match='too many indices'):
            x[1, 2, 3, 4]
        with pytest.raises(ValueError, match='step must be greater than zero'):
            x[::-1]
        with pytest.raises(ValueError, match='step must be greater than zero'):
            x[:, 1:3:-1]
    x2 = tape.tensor(np.zeros((5, 6, 5), np.float32), requires_grad=True)
    assert tuple(x2[4].shape) == (6, 5)         # the same key on another shape


def test_zero_dim_results_are_views():
    for rep in range(2):
        x = tape.tensor(np.arange(6.0).reshape(2, 3))
        y = x[1, 2]
        assert y.shape == () and y.item() == 5.0
        y.fill_(-1)
        assert x[1, 2].item() == -1.0
        xg, tx = _pair((2, 3))
        z, tz = xg[1, 2], tx[1, 2]
        assert z.shape == () and _name(z) == _name(tz) == 'SelectBackward0'


def test_no_grad_slicing_of_a_grad_tensor():
    x, _ = _pair(SMALL)
    for rep in range(2):
        with tape.no_grad():
            y = x[:, 1:3]
        assert not y.requires_grad and y.grad_fn is None
        y2 = x.detach()[:, 1:3]
        y2.zero_()
        assert np.all(x.detach().numpy()[:, 1:3] == 0)


@pytest.mark.parametrize("shape", [SMALL, BIG])
def test_create_graph_through_slices(shape):
    x, tx = _pair(shape)
    for rep in range(2):
        y, ty = (x[:, 1:4] ** 3).sum(), (tx[:, 1:4] ** 3).sum()
        g, = tape.autograd.grad(y, x, create_graph=True)
        tg, = torch.autograd.grad(ty, tx, create_graph=True)
        (g[1] * g[1]).sum().backward()
        (tg[1] * tg[1]).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
