"""The recording fast lanes for graphs that start from leaves (binary ops of one
shape and dtype, unary ops), big records made inline, and the cached index
maps of small transposes: same values, gradients and in-place checks as the
general path, PyTorch as the oracle."""
import numpy as np
import pytest

import tape

SHAPES = [(5,), (7, 3), (64, 256), (4, 64, 80)]       # small and big (>= 16384) records


def _pair(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 2.0, shape).astype(dtype), rng.uniform(0.5, 2.0, shape).astype(dtype)


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('op', ['add', 'sub', 'mul', 'div', 'pow', 'maximum'])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_binary_of_two_leaves_against_torch(shape, op, dtype):
    torch = pytest.importorskip('torch')
    A, B = _pair(shape, dtype)
    a = tape.tensor(A, requires_grad=True)
    b = tape.tensor(B, requires_grad=True)
    ta = torch.tensor(A, requires_grad=True)
    tb = torch.tensor(B, requires_grad=True)
    y = getattr(tape, op)(a, b)
    ty = getattr(torch, op)(ta, tb)
    assert y.grad_fn is not None and y.dtype == a.dtype
    G = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    (y * tape.tensor(G)).sum().backward()
    (ty * torch.tensor(G)).sum().backward()
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), **tol)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **tol)


@pytest.mark.parametrize('shape', SHAPES)
def test_leaf_and_constant_of_one_shape(shape):
    A, B = _pair(shape, np.float64)
    a = tape.tensor(A, requires_grad=True)
    c = tape.tensor(B)                 # a constant: no gradient, saved for a's
    y = a * c
    y.backward(tape.ones_like(y))
    np.testing.assert_array_equal(a.grad.numpy(), B)
    assert c.grad is None


@pytest.mark.parametrize('shape', SHAPES)
def test_leaf_saved_by_a_binary_lane_then_changed_in_place_raises(shape):
    A, B = _pair(shape, np.float64)
    a = tape.tensor(A, requires_grad=True)
    b = tape.tensor(B, requires_grad=True)
    y = a * b                           # saves both leaves
    with tape.no_grad():
        b.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()


@pytest.mark.parametrize('shape', SHAPES)
def test_constant_saved_by_a_binary_lane_then_changed_in_place_raises(shape):
    A, B = _pair(shape, np.float64)
    a = tape.tensor(A, requires_grad=True)
    c = tape.tensor(B)
    y = a * c                           # a's gradient reads c
    c.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('op', ['exp', 'log', 'sin', 'tanh', 'sigmoid', 'sqrt', 'relu'])
def test_unary_of_a_leaf_against_torch(shape, op):
    torch = pytest.importorskip('torch')
    A, _ = _pair(shape, np.float32)
    a = tape.tensor(A, requires_grad=True)
    ta = torch.tensor(A, requires_grad=True)
    y = getattr(tape, op)(a)
    ty = getattr(torch, op)(ta)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize('shape', SHAPES)
def test_leaf_saved_by_a_unary_lane_then_changed_in_place_raises(shape):
    A, _ = _pair(shape, np.float64)
    a = tape.tensor(A, requires_grad=True)
    y = tape.sin(a)                     # saves its input, the leaf
    with tape.no_grad():
        a.mul_(2.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()
    # a unary whose backward reads its output only is not affected by the leaf
    b = tape.tensor(A, requires_grad=True)
    z = tape.exp(b)
    with tape.no_grad():
        b.mul_(2.0)
    z.sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.exp(A))


def test_leaf_lanes_record_nothing_under_no_grad_or_without_requires_grad():
    A, B = _pair((64, 256), np.float32)
    a = tape.tensor(A, requires_grad=True)
    b = tape.tensor(B, requires_grad=True)
    with tape.no_grad():
        assert (a * b).grad_fn is None and tape.exp(a).grad_fn is None
    c, d = tape.tensor(A), tape.tensor(B)
    assert (c * d).grad_fn is None and not (c * d).requires_grad
    assert tape.exp(c).grad_fn is None


@pytest.mark.parametrize('shape', [(8, 16, 64), (3, 4, 5, 6), (30, 40)])
def test_small_transposes_and_permutes_with_cached_index_maps(shape):
    torch = pytest.importorskip('torch')
    X = np.random.default_rng(3).standard_normal(shape)
    nd = len(shape)
    perms = [tuple(reversed(range(nd))), tuple(range(1, nd)) + (0,)]
    for _ in range(2):                  # the second round reads the cache
        x = tape.tensor(X, requires_grad=True)
        tx = torch.tensor(X, requires_grad=True)
        total = x.transpose(0, nd - 1).sum() * 0
        ttotal = tx.transpose(0, nd - 1).sum() * 0
        for k, p in enumerate(perms):
            w = np.random.default_rng(k).standard_normal([shape[i] for i in p])
            total = total + (x.permute(*p) * tape.tensor(w)).sum()
            ttotal = ttotal + (tx.permute(*p) * torch.tensor(w)).sum()
        y = x.transpose(0, 1) * 2.0
        total = total + (y * y).sum()
        ty = tx.transpose(0, 1) * 2.0
        ttotal = ttotal + (ty * ty).sum()
        total.backward()
        ttotal.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('shape', [(3,), (64, 256)])
def test_seed_that_is_a_leafs_own_grad(shape):
    # y.backward(a.grad): the one-record sweeps add into a.grad while reading
    # the seed; the other input's gradient must see the seed as it was
    torch = pytest.importorskip('torch')
    A, B = _pair(shape, np.float64)
    a = tape.tensor(A, requires_grad=True)
    b = tape.tensor(B, requires_grad=True)
    ta = torch.tensor(A, requires_grad=True)
    tb = torch.tensor(B, requires_grad=True)
    (a * b).sum().backward()
    (ta * tb).sum().backward()
    (a * b).backward(a.grad)
    (ta * tb).backward(ta.grad)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize('op', ['sum', 'mean'])
@pytest.mark.parametrize('shape', [(1,), (8, 1), (7, 3), (0, 3)])
def test_full_reduction_lane_against_torch(op, shape):
    torch = pytest.importorskip('torch')
    X = np.random.default_rng(5).standard_normal(shape)
    x = tape.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    y = getattr(x * 2.0, op)()
    ty = getattr(tx * 2.0, op)()
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__
    assert y.shape == () and y.dtype == x.dtype
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-12, equal_nan=True)
    y.backward()
    ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
