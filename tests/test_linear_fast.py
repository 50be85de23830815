"""F.linear's recorded fast path (tape/_ops.py linear_records) for inputs of any
rank and sizes on either side of the big-record threshold, and the broadcast
kernels of the sweep (an expand's backward, a reduction's), against PyTorch."""
import numpy as np
import pytest

import tape
from tape._big import BIG
from tape.autograd import gradcheck, gradgradcheck

F = tape.nn.functional

SHAPES = [
    ((2, 5, 4), 3),             # 3-D input, small
    ((2, 3, 2, 4), 5),          # 4-D input
    ((300, 60), 70),            # 2-D, output above BIG
    ((4, 64, 64), 128),         # 3-D, output of BIG elements exactly
    ((3, 4), BIG // 4 + 1),     # a weight above BIG
]


def _torch_pair(torch, shape, nout, dtype):
    rng = np.random.default_rng(sum(shape) + nout)
    nin = shape[-1]
    x = rng.standard_normal(shape).astype(dtype)
    w = (rng.standard_normal((nout, nin)) / np.sqrt(nin)).astype(dtype)
    b = rng.standard_normal(nout).astype(dtype)
    ours = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    return ours, theirs


@pytest.mark.parametrize('shape,nout', SHAPES)
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_linear_matches_torch(shape, nout, dtype):
    torch = pytest.importorskip('torch')
    (x, w, b), (tx, tw, tb) = _torch_pair(torch, shape, nout, dtype)
    y = F.linear(x * 2, w, b)
    ty = torch.nn.functional.linear(tx * 2, tw, tb)
    assert y.shape == tuple(ty.shape) and y.dtype == getattr(tape, np.dtype(dtype).name)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    g = np.random.default_rng(0).standard_normal(y.shape).astype(dtype)
    (y * tape.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    for a, ta in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=tol, atol=tol * 10)


@pytest.mark.parametrize('shape,nout', SHAPES[:2])
def test_linear_gradcheck_nd(shape, nout):
    rng = np.random.default_rng(1)
    x = tape.tensor(rng.standard_normal(shape), requires_grad=True)
    w = tape.tensor(rng.standard_normal((nout, shape[-1])), requires_grad=True)
    b = tape.tensor(rng.standard_normal(nout), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.linear(x * 1.5, w, b), (x, w, b))
    assert gradgradcheck(lambda x, w, b: F.linear(x, w, b), (x, w, b))


@pytest.mark.parametrize('shape,nout', SHAPES)
def test_linear_create_graph_matches_torch(shape, nout):
    torch = pytest.importorskip('torch')
    (x, w, b), (tx, tw, tb) = _torch_pair(torch, shape, nout, np.float64)
    y = F.linear(x * 2, w, b)
    g, = tape.autograd.grad((y * y).sum(), x, create_graph=True)
    (g * g).sum().backward()
    ty = torch.nn.functional.linear(tx * 2, tw, tb)
    tg, = torch.autograd.grad((ty * ty).sum(), tx, create_graph=True)
    (tg * tg).sum().backward()
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-9, atol=1e-9)
    for a, ta in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-7)


@pytest.mark.parametrize('shape,nout', SHAPES)
def test_linear_input_changed_in_place_raises(shape, nout):
    rng = np.random.default_rng(2)
    x = tape.tensor(rng.standard_normal(shape), requires_grad=True)
    lin = tape.nn.Linear(shape[-1], nout).double()
    h = x * 2
    loss = lin(h).sum()
    h.mul_(2)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        loss.backward()


def test_linear_of_views_and_strided_inputs():
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((4, 6, 5))
    lin = tape.nn.Linear(4, 3).double()
    tl = torch.nn.Linear(4, 3).double()
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(lin.weight.detach().numpy()))
        tl.bias.copy_(torch.tensor(lin.bias.detach().numpy()))
    x = tape.tensor(xv, requires_grad=True)
    tx = torch.tensor(xv, requires_grad=True)
    # a transposed (strided) input and a reshaped view of a leaf
    for f in (lambda a: a.transpose(0, 2), lambda a: a.reshape(30, 4)[::2]):
        y, ty = lin(f(x)), tl(f(tx))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-12)
        y.pow(2).sum().backward()
        ty.pow(2).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)
        np.testing.assert_allclose(lin.weight.grad.numpy(), tl.weight.grad.numpy(), atol=1e-9)


def test_linear_nd_under_no_grad_and_node_names():
    lin = tape.nn.Linear(4, 3)
    x = tape.randn(2, 5, 4, requires_grad=True)
    with tape.no_grad():
        y = lin(x)
    assert y.grad_fn is None and not y.requires_grad and y.shape == (2, 5, 3)
    y = lin(x)
    assert y.grad_fn.name() == 'AddBackward0'
    names = {n.name() for n, _ in y.grad_fn.next_functions if n is not None}
    assert names == {'MmBackward0', 'torch::autograd::AccumulateGrad'}


@pytest.mark.parametrize('big,small', [
    ((4, 5, 6), (5, 1)), ((4, 5, 6), (6,)), ((4, 5, 6), (4, 1, 6)), ((4, 5, 6), (1, 5, 1)),
    ((3, 1, 7), (2, 1)), ((2, 3, 4, 5), (3, 1, 5)), ((7,), (1,)), ((128, 64), (64,)),
])
def test_broadcast_backward_matches_torch(big, small):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(big), rng.standard_normal(small)
    A, B = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
    TA, TB = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out = A * 1.0 + B
    w = rng.standard_normal(tuple(out.shape))
    (out * tape.tensor(w)).sum().backward()
    ((TA * 1.0 + TB) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), TB.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), TA.grad.numpy(), rtol=1e-12, atol=1e-12)
    # the reduction's backward (a gather through the same map)
    nd = len(tuple(out.shape))
    for dims in [(0,), (nd - 1,), tuple(range(nd))[::2]]:
        A.grad = None
        TA.grad = None
        s = (A * 1.0).sum(dims) if len(big) == nd else None
        if s is None:
            continue
        ww = rng.standard_normal(tuple(s.shape))
        (s * tape.tensor(ww)).sum().backward()
        ((TA * 1.0).sum(dims) * torch.tensor(ww)).sum().backward()
        np.testing.assert_allclose(A.grad.numpy(), TA.grad.numpy(), rtol=1e-12, atol=1e-12)
