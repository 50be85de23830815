"""The CNN layer paths of tape/nn/_conv.py: a groups-1 float conv2d with its bias as
one record (``_Conv2d``, recorded by ``apply_own_inputs``, its columns kept for the
weight gradient) and max pooling whose kernel's maxima are the output (``_MaxPool``,
recorded by ``apply_own``).  Structure, values and gradients against PyTorch,
second order through the create_graph paths, and a LeNet-sized training step."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck
from tape.autograd.function import _OwnInputsRecord

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _records(t):
    return list(t._tape.py)


def test_conv2d_with_bias_is_one_record():
    x = tape.randn(2, 3, 6, 6, requires_grad=True)
    w = tape.randn(4, 3, 3, 3, requires_grad=True)
    b = tape.randn(4, requires_grad=True)
    y = F.conv2d(x, w, b, padding=1)
    assert y.grad_fn.name() == 'ConvolutionBackward0'
    recs = _records(y)
    assert len(recs) == 1 and isinstance(recs[0], _OwnInputsRecord)
    assert y._tape.n == 1               # no separate bias add


def test_max_pool_is_one_lean_record():
    x = tape.randn(2, 3, 6, 6, requires_grad=True)
    y = F.max_pool2d(x, 2)
    assert y.grad_fn.name() == 'MaxPool2DWithIndicesBackward0'
    assert y._tape.n == 1


def test_grouped_and_float16_keep_the_generic_conv():
    x = tape.randn(2, 4, 5, 5, requires_grad=True)
    w = tape.randn(4, 2, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, groups=2)
    assert not isinstance(_records(y)[0], _OwnInputsRecord)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('opts,bias,need_x', [
    (dict(padding=1), True, True),
    (dict(padding=1), True, False),                  # an input batch: only w and b
    (dict(stride=2, padding=(1, 0), dilation=(1, 2)), False, True),
    (dict(padding='same'), True, True),
    (dict(), False, True),                           # 1x1 below, valid 3x3 here
])
def test_conv2d_layer_matches_torch(dtype, opts, bias, need_x):
    r = np.random.default_rng(3)
    xs, ws = r.standard_normal((3, 2, 7, 6)), r.standard_normal((5, 2, 3, 3))
    bs, gs = r.standard_normal(5), None
    outs = []
    for lib in (tape, torch):
        x = lib.tensor(xs.astype(dtype), requires_grad=need_x)
        w = lib.tensor(ws.astype(dtype), requires_grad=True)
        b = lib.tensor(bs.astype(dtype), requires_grad=True) if bias else None
        y = (F if lib is tape else TF).conv2d(x, w, b, **opts)
        if gs is None:
            gs = r.standard_normal(tuple(y.shape))
        (y * lib.tensor(gs.astype(dtype))).sum().backward()
        outs.append([y.detach().numpy(), w.grad.numpy()]
                    + ([x.grad.numpy()] if need_x else []) + ([b.grad.numpy()] if bias else []))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for a, t in zip(*outs):
        assert a.dtype == t.dtype
        np.testing.assert_allclose(a, t, **tol)


def test_conv2d_layer_gradcheck_and_second_order():
    r = np.random.default_rng(4)
    x = tape.tensor(r.standard_normal((2, 2, 5, 5)), requires_grad=True)
    w = tape.tensor(r.standard_normal((3, 2, 3, 3)), requires_grad=True)
    b = tape.tensor(r.standard_normal(3), requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, padding=1, stride=(1, 2))
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_conv2d_layer_double_backward_matches_torch():
    r = np.random.default_rng(5)
    xs, ws, bs = r.standard_normal((2, 2, 6, 6)), r.standard_normal((3, 2, 3, 3)), \
        r.standard_normal(3)
    res = []
    for lib in (tape, torch):
        x = lib.tensor(xs, requires_grad=True)
        w = lib.tensor(ws, requires_grad=True)
        b = lib.tensor(bs, requires_grad=True)
        y = (F if lib is tape else TF).conv2d(x, w, b, padding=1)
        gx, gw, gb = lib.autograd.grad((y ** 2).sum(), (x, w, b), create_graph=True)
        hx, hw, hb = lib.autograd.grad((gx ** 2).sum() + (gw ** 3).sum() + (gb ** 2).sum(),
                                       (x, w, b))
        res.append([t.detach().numpy() for t in (gx, gw, gb, hx, hw, hb)])
    for a, t in zip(*res):
        np.testing.assert_allclose(a, t, rtol=1e-9, atol=1e-9)


def test_conv2d_layer_retain_graph_and_inplace_check():
    x = tape.randn(2, 1, 5, 5)
    w = tape.randn(2, 1, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    y.sum().backward(retain_graph=True)
    g1 = w.grad.clone()
    y.sum().backward()              # the kept columns were freed: built again
    np.testing.assert_allclose(w.grad.numpy(), 2 * g1.numpy(), rtol=1e-6)
    y = F.conv2d(x, w, padding=1)
    x.add_(1)
    with pytest.raises(RuntimeError, match='inplace'):
        y.sum().backward()


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('opts', [dict(kernel_size=2), dict(kernel_size=3, stride=1),
                                  dict(kernel_size=(2, 3), stride=(2, 1)),
                                  dict(kernel_size=3, stride=2, padding=1)])
def test_max_pool_matches_torch(dtype, opts):
    r = np.random.default_rng(6)
    xs = r.standard_normal((2, 3, 8, 7))
    xs[..., ::2, 1::3] = 0.25       # ties
    xs[0, 0, 0, 0] = np.nan
    gs = None
    res = []
    for lib in (tape, torch):
        x = lib.tensor(xs.astype(dtype), requires_grad=True)
        y, i = (F if lib is tape else TF).max_pool2d(x, return_indices=True, **opts)
        if gs is None:
            gs = r.standard_normal(tuple(y.shape))
        (y * lib.tensor(gs.astype(dtype))).sum().backward()
        res.append([y.detach().numpy(), i.numpy(), x.grad.numpy()])
    for a, t in zip(*res):
        np.testing.assert_array_equal(a, t)


def test_max_pool_second_order():
    x = tape.tensor(np.random.default_rng(7).permutation(36).reshape(1, 1, 6, 6) / 7.0,
                    requires_grad=True)
    assert gradcheck(lambda x: F.max_pool2d(x, 2) ** 2, (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2) ** 2, (x,))


def _lenet(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * 7 * 7, 10))


def test_lenet_step_matches_torch():
    r = np.random.default_rng(8)
    xs = r.standard_normal((4, 1, 28, 28)).astype(np.float32)
    ys = r.integers(0, 10, 4)
    mt = _lenet(torch)
    ma = _lenet(tape)
    ma.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    for lib, m in ((tape, ma), (torch, mt)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            lib.nn.functional.cross_entropy(m(lib.tensor(xs)), lib.tensor(ys)).backward()
            opt.step()
    for (k, a), (_, t) in zip(ma.state_dict().items(), mt.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=2e-4, atol=2e-5,
                                   err_msg=k)
