"""``y.backward(seed)`` for a tape of one elementwise record of leaves (tape/_sweep.py
``_run_lone``): the record's chunk kernel writes the leaves' gradients directly.
PyTorch is the oracle; the cases the fast path leaves to the general one are
checked to give the same answers."""
import numpy as np
import pytest

import tape
from tape import _sweep

torch = pytest.importorskip('torch')

UNARY = {
    'sigmoid': lambda L, x: L.sigmoid(x),
    'tanh': lambda L, x: L.tanh(x),
    'exp': lambda L, x: L.exp(x),
    'relu': lambda L, x: L.relu(x),
    'sin': lambda L, x: L.sin(x),
    'scale': lambda L, x: x * 1.5,
    'shift': lambda L, x: 2.0 - x,
    'cube': lambda L, x: x ** 3,
    'recip': lambda L, x: x.reciprocal(),
}
BINARY = {
    'add': lambda x, y: x + y,
    'mul': lambda x, y: x * y,
    'div': lambda x, y: x / y,
    'sub': lambda x, y: x - y,
}


def _data(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 0.1).astype(dtype)


@pytest.fixture
def count_lone(monkeypatch):
    """How many backward calls the fast path handled."""
    calls = []
    real = _sweep._run_lone

    def spy(*args):
        done = real(*args)
        calls.append(done)
        return done
    monkeypatch.setattr(_sweep, '_run_lone', spy)
    return calls


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(7,), (100, 100), (3, 4, 5)])
@pytest.mark.parametrize('name', sorted(UNARY))
def test_unary_matches_torch(name, shape, dtype, count_lone):
    x = _data(shape, dtype)
    seed = _data(shape, dtype, 1)
    xt = tape.tensor(x, requires_grad=True)
    UNARY[name](tape, xt).backward(tape.tensor(seed))
    xo = torch.tensor(x, requires_grad=True)
    UNARY[name](torch, xo).backward(torch.tensor(seed))
    assert count_lone == [True]
    assert xt.grad.dtype == xo.grad.numpy().dtype and xt.grad.shape == xo.grad.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_of_two_leaves_matches_torch(name, count_lone):
    x, y, seed = _data((20, 30), np.float64), _data((20, 30), np.float64, 1), \
        _data((20, 30), np.float64, 2)
    xt, yt = tape.tensor(x, requires_grad=True), tape.tensor(y, requires_grad=True)
    BINARY[name](xt, yt).backward(tape.tensor(seed))
    xo, yo = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    BINARY[name](xo, yo).backward(torch.tensor(seed))
    assert count_lone == [True]
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(yt.grad.numpy(), yo.grad.numpy(), rtol=1e-12)


def test_one_input_without_grad_and_a_constant_operand(count_lone):
    x, y = _data((5, 6), np.float32), _data((5, 6), np.float32, 1)
    xt, yt = tape.tensor(x, requires_grad=True), tape.tensor(y)
    (xt * yt).backward(tape.ones(5, 6))
    assert count_lone == [True]
    np.testing.assert_allclose(xt.grad.numpy(), y, rtol=1e-6)
    assert yt.grad is None


def test_gradients_accumulate_in_place_across_calls():
    x = _data((50, 40), np.float32)
    xt = tape.tensor(x, requires_grad=True)
    seed = tape.ones(50, 40)
    tape.sigmoid(xt).backward(seed)
    first = xt.grad
    tape.sigmoid(xt).backward(seed)
    assert xt.grad is first            # accumulated into the same tensor, as PyTorch
    xo = torch.tensor(x, requires_grad=True)
    for _ in range(2):
        torch.sigmoid(xo).backward(torch.ones(50, 40))
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-6)


def test_retain_graph_then_the_second_backward_error():
    xt = tape.tensor(_data((4, 4), np.float64), requires_grad=True)
    y = tape.exp(xt)
    seed = tape.ones(4, 4)
    y.backward(seed, retain_graph=True)
    y.backward(seed)
    np.testing.assert_allclose(xt.grad.numpy(), 2 * np.exp(xt.detach().numpy()))
    with pytest.raises(RuntimeError, match='second time'):
        y.backward(seed)


def test_in_place_change_of_a_saved_tensor_raises():
    xt = tape.tensor(_data((4, 4), np.float64), requires_grad=True)
    y = tape.sigmoid(xt)
    with tape.no_grad():
        y.mul_(2.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward(tape.ones(4, 4))


def test_cases_left_to_the_general_path_agree_with_torch(count_lone):
    x = _data((6, 5), np.float64)
    xt = tape.tensor(x, requires_grad=True)
    (xt * xt).backward(tape.ones(6, 5, dtype=tape.float64))    # one leaf on both inputs
    np.testing.assert_allclose(xt.grad.numpy(), 2 * x, rtol=1e-14)
    assert count_lone == [False]
    # a broadcast leaf: an expand record too, so not a tape of one record
    w = _data((5,), np.float64, 4)
    xt, wt = tape.tensor(x, requires_grad=True), tape.tensor(w, requires_grad=True)
    (xt * wt).backward(tape.ones(6, 5, dtype=tape.float64))
    xo, wo = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (xo * wo).backward(torch.ones(6, 5, dtype=torch.float64))
    np.testing.assert_allclose(wt.grad.numpy(), wo.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-12)
    assert count_lone == [False]
    seen = []
    xt = tape.tensor(x, requires_grad=True)
    xt.register_hook(lambda g: seen.append(g.shape) or g * 2)
    tape.exp(xt).backward(tape.ones(6, 5, dtype=tape.float64))
    np.testing.assert_allclose(xt.grad.numpy(), 2 * np.exp(x))
    assert seen == [tape.Size([6, 5])]


def test_seed_of_another_dtype_and_layout():
    x = _data((8, 6), np.float32)
    seed = np.asfortranarray(_data((8, 6), np.float64, 3))
    xt = tape.tensor(x, requires_grad=True)
    tape.tanh(xt).backward(tape.tensor(seed).to(tape.float32))
    xo = torch.tensor(x, requires_grad=True)
    torch.tanh(xo).backward(torch.tensor(seed).float())
    assert xt.grad.dtype == tape.float32
    np.testing.assert_allclose(xt.grad.numpy(), xo.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_one_element_root_without_a_seed():
    xt = tape.tensor([0.3], requires_grad=True)
    tape.exp(xt).backward()
    np.testing.assert_allclose(xt.grad.numpy(), np.exp(np.float32([0.3])), rtol=1e-6)


def test_create_graph_gives_the_same_first_order_gradient():
    x = _data((10,), np.float64)
    a = tape.tensor(x, requires_grad=True)
    (ga,) = tape.autograd.grad(tape.sigmoid(a), a, tape.ones(10, dtype=tape.float64),
                               create_graph=True)
    b = tape.tensor(x, requires_grad=True)
    tape.sigmoid(b).backward(tape.ones(10, dtype=tape.float64))
    np.testing.assert_allclose(ga.detach().numpy(), b.grad.numpy(), rtol=1e-14)
