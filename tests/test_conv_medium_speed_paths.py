"""The chunked convolution paths of tape/nn/_conv.py against PyTorch: columns built a
chunk of samples at a time into one reused buffer (forward, weight gradient) or,
when small, kept by the layer for its weight gradient; the input gradient as a
convolution of gy with the flipped kernel (stride 1, padding within the kernel's
extent, no more columns than col2im's), else col2im a chunk at a time.  Medium and
small layers, LeNet's, stride, dilation, groups, asymmetric and oversized padding,
no bias, non-contiguous input, ragged chunks, double backward; gradcheck in
float64."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck
from tape.nn import _conv

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _tol(dtype, ref=None):
    """float32: a weight gradient sums thousands of products of size ~1 (a
    LeNet conv1 weight's, 18432), so its rounding error scales with the
    gradient's largest element, not with each element."""
    if dtype != np.float32:
        return dict(rtol=1e-9, atol=1e-9)
    scale = float(np.abs(ref).max()) if ref is not None and np.size(ref) else 0.0
    return dict(rtol=3e-4, atol=3e-4 + 2e-5 * scale)


def _check(opts, xs, ws, dtype, bias=True, prep=lambda t: t, seed=0):
    """conv2d's output and the gradients of sum(out * random) for x, w (and b)."""
    r = np.random.default_rng(seed)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g) + ws[1:])]
    if bias:
        arrays.append(r.standard_normal(ws[0]))
    arrays = [a.astype(dtype) for a in arrays]
    ta = [tape.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    ya = F.conv2d(prep(ta[0]), *ta[1:], **opts)
    yt = TF.conv2d(prep(tt[0]), *tt[1:], **opts)
    assert tuple(ya.shape) == tuple(yt.shape)
    assert np.asarray(ya._data).dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    gy = r.standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(gy)).sum().backward()
    (yt * torch.tensor(gy)).sum().backward()
    for a, t in zip(ta, tt):
        assert np.asarray(a.grad._data).dtype == dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(),
                                   **_tol(dtype, t.grad.numpy()))


CASES = [
    ((32, 16, 14, 14), (16, 3, 3), dict(padding=1)),                 # medium: flipped conv
    ((8, 3, 32, 32), (16, 3, 3), dict(padding=1)),                   # small: col2im
    ((32, 1, 28, 28), (6, 5, 5), {}),                                # LeNet conv1
    ((32, 6, 12, 12), (16, 5, 5), {}),                               # LeNet conv2
    ((6, 16, 14, 14), (16, 3, 3), dict(stride=2, padding=1)),        # strided: col2im
    ((6, 16, 14, 14), (16, 3, 3), dict(dilation=2, padding=2)),      # dilated, flipped
    ((6, 16, 14, 14), (16, 3, 3), dict(groups=2, padding=1)),        # grouped, flipped
    ((5, 8, 9, 7), (8, 2, 4), dict(padding='same')),                 # uneven pads, flipped
    ((5, 8, 9, 7), (8, 3, 3), dict(padding=(3, 0))),                 # pad > kernel: col2im
    ((4, 6, 8, 8), (6, 3, 3), dict(padding=1, stride=(1, 2), groups=3)),
    ((4, 6, 9, 9), (4, 1, 1), {}),                                   # pointwise
    ((3, 8, 7, 7), (4, 3, 3), dict(padding=1, dilation=(2, 1), groups=2)),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xs,ws,opts', CASES)
@pytest.mark.parametrize('bias', [True, False])
def test_conv2d_matches_torch(xs, ws, opts, dtype, bias):
    _check(opts, xs, ws, dtype, bias)


@pytest.mark.parametrize('per', [1, 2, 3])
@pytest.mark.parametrize('xs,ws,opts', [CASES[0], CASES[4], CASES[6], CASES[8]])
def test_ragged_chunks_match_torch(monkeypatch, per, xs, ws, opts):
    """Chunks of a few of 5 samples (one each, or a shorter last one), none kept."""
    monkeypatch.setattr(_conv, '_KEEP_BYTES', 0)
    monkeypatch.setattr(_conv, '_CHUNK_BYTES', per * xs[1] * ws[1] * ws[2] * xs[2] * xs[3] * 8)
    _check(opts, (5,) + xs[1:], ws, np.float64)


@pytest.mark.parametrize('xs,ws,opts', [CASES[0], CASES[5], CASES[6], CASES[7]])
def test_col2im_fallback_agrees(monkeypatch, xs, ws, opts):
    """The shapes that take the flipped convolution, forced through col2im."""
    monkeypatch.setattr(_conv, '_transposed_geom', lambda *a: None)
    _check(opts, (3,) + xs[1:], ws, np.float64)


def test_input_gradient_path_choice():
    g1 = _conv._Geom((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    assert _conv._transposed_geom(g1, (3, 3), 16, 16, (14, 14), (14, 14)) is not None
    assert _conv._transposed_geom(g1, (3, 3), 3, 16, (32, 32), (32, 32)) is None
    g2 = _conv._Geom((2, 2), ((1, 1), (1, 1)), (1, 1), 1)
    assert _conv._transposed_geom(g2, (3, 3), 16, 16, (14, 14), (7, 7)) is None
    g3 = _conv._Geom((1, 1), ((3, 3), (0, 0)), (1, 1), 1)
    assert _conv._transposed_geom(g3, (3, 3), 8, 8, (9, 7), (13, 5)) is None


@pytest.mark.parametrize('dtype', DTYPES)
def test_non_contiguous_input(dtype):
    def prep(t):
        return t.permute(0, 1, 3, 2)
    _check(dict(padding=1), (6, 16, 14, 14), (16, 3, 3), dtype, prep=prep)
    _check(dict(padding=1, groups=2), (6, 16, 14, 14), (16, 3, 3), dtype,
           prep=lambda t: t[:, :, ::2, 1:])


@pytest.mark.parametrize('opts', [dict(padding=1), dict(padding=1, groups=2),
                                  dict(stride=2, padding=1)])
def test_double_backward_matches_torch(opts):
    r = np.random.default_rng(7)
    xs, ws = (4, 8, 9, 9), (8, 8 // opts.get('groups', 1), 3, 3)
    arrays = [r.standard_normal(xs), r.standard_normal(ws), r.standard_normal(8)]
    outs = []
    for lib, fn in ((tape, F), (torch, TF)):
        x, w, b = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = fn.conv2d(x, w, b, **opts)
        gx, gw = (tape.autograd if lib is tape else torch.autograd).grad(
            (y * y).sum(), (x, w), create_graph=True)
        ((gx * gx).sum() + (gw ** 3).sum()).backward()
        outs.append([t.detach().numpy() for t in (gx, gw, x.grad, w.grad, b.grad)])
    for a, t in zip(*outs):
        np.testing.assert_allclose(a, t, rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize('opts,xs,ws', [
    (dict(padding=1), (2, 4, 5, 5), (4, 3, 3)),
    (dict(padding=1, groups=2), (2, 4, 5, 4), (4, 3, 3)),
    (dict(padding=2, dilation=2), (2, 2, 6, 5), (3, 3, 3)),
    (dict(padding=(1, 0), stride=2), (2, 2, 6, 5), (3, 3, 2)),
])
def test_gradcheck_float64(opts, xs, ws):
    r = np.random.default_rng(11)
    g = opts.get('groups', 1)
    x = tape.tensor(r.standard_normal(xs), requires_grad=True)
    w = tape.tensor(r.standard_normal((ws[0], xs[1] // g) + ws[1:]), requires_grad=True)
    b = tape.tensor(r.standard_normal(ws[0]), requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, **opts)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_conv2d_module_matches_torch():
    r = np.random.default_rng(2)
    x = r.standard_normal((8, 16, 14, 14)).astype(np.float32)
    ma = tape.nn.Conv2d(16, 16, 3, padding=1)
    mt = torch.nn.Conv2d(16, 16, 3, padding=1)
    with torch.no_grad():
        mt.weight.copy_(torch.tensor(ma.weight.detach().numpy()))
        mt.bias.copy_(torch.tensor(ma.bias.detach().numpy()))
    xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ma(xa).square().sum().backward()
    mt(xt).square().sum().backward()
    for a, t in ((xa, xt), (ma.weight, mt.weight), (ma.bias, mt.bias)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-3, atol=2e-3)
