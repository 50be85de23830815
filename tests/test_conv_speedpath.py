"""The conv2d layer's fast paths against PyTorch: the flat-shift im2col/col2im with
the padding strip selected to zero in one pass (compiler/conv_kernels.py), and the
layer backward that builds gy's columns once for both the input and the weight
gradient (``_both_grads_fast`` in tape/nn/_conv.py), with the column chunking."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.nn import _conv

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


def _close(a, b, dtype):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.abs(b).max())) if b.size else 1.0
    tol = _TOL[dtype]
    np.testing.assert_allclose(a, b, rtol=tol['rtol'], atol=tol['atol'] * scale)


def _data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize('n,c,h,w,kh,kw,pt,pl,dh,dw', [
    (2, 3, 7, 9, 3, 3, 1, 1, 1, 1),
    (2, 3, 9, 7, 3, 5, 1, 2, 1, 1),
    (2, 2, 9, 9, 3, 3, 2, 2, 2, 2),
    (1, 2, 8, 8, 5, 5, 2, 2, 1, 1),
    (1, 1, 5, 5, 3, 3, 0, 0, 1, 1),
    (3, 2, 4, 6, 3, 3, 2, 1, 1, 1),
])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_flat_im2col_col2im_match_unfold_fold(n, c, h, w, kh, kw, pt, pl, dh, dw, dtype):
    from compiler.conv_kernels import col2im, im2col
    x = _data((n, c, h, w), dtype, 0)
    oh = h + 2 * pt - dh * (kh - 1)
    ow = w + 2 * pl - dw * (kw - 1)
    for sample_major in (True, False):
        shape = (n, c * kh * kw, oh * ow) if sample_major else (c * kh * kw, n, oh * ow)
        cols = np.full(shape, np.nan, dtype)
        im2col(x, kh, kw, 1, 1, pt, pl, dh, dw, oh, ow, cols, sample_major)
        ref = TF.unfold(torch.tensor(x), (kh, kw), dilation=(dh, dw), padding=(pt, pl)).numpy()
        got = cols if sample_major else cols.transpose(1, 0, 2)
        np.testing.assert_array_equal(got, ref)
        g = _data(ref.shape, dtype, 1)
        gin = g if sample_major else np.ascontiguousarray(g.transpose(1, 0, 2))
        keep = gin.copy()
        gx = np.full(x.shape, np.nan, dtype)
        col2im(gin, kh, kw, 1, 1, pt, pl, dh, dw, oh, ow, gx, sample_major)
        np.testing.assert_array_equal(gin, keep)          # the columns only read
        refg = TF.fold(torch.tensor(g), (h, w), (kh, kw), dilation=(dh, dw),
                       padding=(pt, pl)).numpy()
        _close(gx, refg, dtype)


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
def test_flat_im2col_padding_is_zero_next_to_inf():
    """Padding entries are selected to zero, never a neighbouring row's inf times 0:
    the left padding of a flat-shifted column lands on the previous row's last pixel,
    and output column 0 (which reads no inf) must stay finite."""
    x = _data((2, 3, 6, 6), np.float32, 2)
    x[:, :, :, -1] = np.inf
    w = _data((4, 3, 3, 3), np.float32, 3)
    y = F.conv2d(tape.tensor(x), tape.tensor(w), padding=1).numpy()
    ref = TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(np.isinf(y), np.isinf(ref))
    assert fin[..., :3].all()
    _close(y[fin], ref[fin], np.float32)


# (input shape, (cout, kh, kw), conv2d options): every shape here takes the fused
# backward (stride 1, padding within the kernel's extent, cout <= c); the last ones
# take col2im (strided, more output channels), for comparison
_CASES = [
    ((4, 6, 9, 8), (5, 3, 3), dict(padding=1)),
    ((3, 4, 7, 7), (4, 3, 3), dict()),
    ((3, 4, 8, 9), (3, 3, 2), dict(padding='same')),
    ((2, 5, 10, 9), (5, 3, 3), dict(padding=2, dilation=2)),
    ((2, 4, 9, 8), (4, 3, 5), dict(padding=(1, 2))),
    ((3, 6, 5, 6), (6, 1, 1), dict()),
    ((2, 4, 8, 8), (2, 5, 5), dict(padding=(2, 1))),
    ((3, 4, 9, 9), (6, 3, 3), dict(padding=1, stride=2)),
    ((3, 2, 7, 7), (6, 3, 3), dict(padding=1)),
]


def _grads(lib, x, w, b, opts, need):
    xt = lib.tensor(x, requires_grad=need[0])
    wt = lib.tensor(w, requires_grad=need[1])
    bt = None if b is None else lib.tensor(b, requires_grad=need[2])
    y = lib.nn.functional.conv2d(xt, wt, bt, **opts)
    gy = lib.tensor(np.cos(np.arange(int(np.prod(tuple(y.shape))))).reshape(tuple(y.shape))
                    .astype(x.dtype))
    y.backward(gy)
    out = [y.detach().numpy()]
    for t, nd in ((xt, need[0]), (wt, need[1]), (bt, need[2])):
        if t is not None and nd:
            out.append(t.grad.numpy())
    return out


@pytest.mark.parametrize('xs,ws,opts', _CASES)
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('need', [(True, True, True), (True, False, False),
                                  (False, True, True), (True, True, False)])
@pytest.mark.parametrize('bias', [True, False])
def test_layer_gradients_match_torch(xs, ws, opts, dtype, need, bias):
    x = _data(xs, dtype, 4)
    w = _data((ws[0], xs[1]) + ws[1:], dtype, 5)
    b = _data((ws[0],), dtype, 6) if bias else None
    for a, r in zip(_grads(tape, x, w, b, opts, need), _grads(torch, x, w, b, opts, need)):
        _close(a, r, dtype)


@pytest.mark.parametrize('xs,ws,opts', _CASES[:5])
@pytest.mark.parametrize('per', [1, 2])
def test_fused_backward_in_small_chunks(monkeypatch, xs, ws, opts, per):
    """Ragged chunks of the fused backward, nothing kept."""
    monkeypatch.setattr(_conv, '_KEEP_BYTES', 0)
    monkeypatch.setattr(_conv, '_CHUNK_BYTES', per * ws[0] * ws[1] * ws[2] * xs[2] * xs[3] * 4)
    x = _data(xs, np.float32, 7)
    w = _data((ws[0], xs[1]) + ws[1:], np.float32, 8)
    b = _data((ws[0],), np.float32, 9)
    need = (True, True, True)
    for a, r in zip(_grads(tape, x, w, b, opts, need), _grads(torch, x, w, b, opts, need)):
        _close(a, r, np.float32)


def test_fused_path_is_taken():
    g = _conv._Geom((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    assert _conv._layer_tgeom((32, 16, 14, 14), (16, 16, 3, 3), g) is not None
    assert _conv._layer_tgeom((8, 3, 32, 32), (16, 3, 3, 3), g) is None
    g2 = _conv._Geom((2, 2), ((1, 1), (1, 1)), (1, 1), 1)
    assert _conv._layer_tgeom((8, 16, 14, 14), (16, 16, 3, 3), g2) is None


@pytest.mark.parametrize('xs,ws,opts', [_CASES[0], _CASES[3], _CASES[6]])
def test_double_backward_and_node_name(xs, ws, opts):
    x = _data(xs, np.float64, 10)
    w = _data((ws[0], xs[1]) + ws[1:], np.float64, 11)
    b = _data((ws[0],), np.float64, 12)
    res = []
    for lib in (tape, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = lib.nn.functional.conv2d(xt, wt, bt, **opts)
        if lib is tape:
            assert type(y.grad_fn).__name__ == 'ConvolutionBackward0'
        gx, gw = lib.autograd.grad((y ** 2).sum(), (xt, wt), create_graph=True)
        s = (gx * lib.sin(xt)).sum() + (gw ** 2).sum()
        res.append([t.detach().numpy() for t in lib.autograd.grad(s, (xt, wt, bt))])
    for a, r in zip(*res):
        _close(a, r, np.float64)


def test_gradcheck_fused_backward():
    x = tape.tensor(_data((2, 3, 5, 5), np.float64, 13), requires_grad=True)
    w = tape.tensor(_data((3, 3, 3, 3), np.float64, 14), requires_grad=True)
    b = tape.tensor(_data((3,), np.float64, 15), requires_grad=True)
    assert tape.autograd.gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), (x, w, b))
