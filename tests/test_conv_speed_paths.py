"""The compiled convolution and pooling paths (compiler/conv_kernels.py, used by
tape/nn/_conv.py for float32 and float64) against PyTorch: im2col/col2im with
padding by bounds, the pointwise shortcut, the direct depthwise kernels, the
whole-batch weight gradient, max pooling's index scan and its scatter-add
backward.  Every geometry option, odd shapes, an empty batch and non-contiguous
input; first derivatives against PyTorch, second ones by gradgradcheck."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


def _check(tape_fn, torch_fn, arrays, dtype, prep=lambda t: t, seed=1):
    """Outputs and the gradients of sum(out * random) for every input, against torch;
    ``prep`` turns each input into the form passed (a non-contiguous view, say)."""
    arrays = [np.asarray(a, dtype) for a in arrays]
    ta = [tape.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    ya, yt = tape_fn(*[prep(a) for a in ta]), torch_fn(*[prep(t) for t in tt])
    assert tuple(ya.shape) == tuple(yt.shape)
    assert np.asarray(ya._data).dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, t in zip(ta, tt):
        assert np.asarray(a.grad._data).dtype == dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **_tol(dtype))


# (N, C_in, H, W), (C_out, kH, kW), options: each row exercises one path or edge
CONV2D = [
    ((2, 3, 7, 9), (4, 3, 3), dict(padding=1)),                                  # im2col/col2im
    ((3, 4, 11, 8), (6, 3, 2), dict(stride=(2, 3), padding=(2, 1))),             # strided
    ((2, 2, 9, 10), (3, 3, 3), dict(dilation=(2, 3), padding=(3, 2))),           # dilated
    ((2, 3, 6, 5), (2, 4, 2), dict(padding='same')),                             # even kernel
    ((2, 2, 8, 7), (3, 2, 3), dict(padding='same', dilation=2)),
    ((2, 6, 7, 7), (4, 3, 3), dict(groups=2, stride=2, padding=1)),              # grouped
    ((2, 6, 9, 8), (6, 3, 3), dict(groups=6, padding=1)),                        # depthwise
    ((2, 4, 9, 8), (8, 3, 2), dict(groups=4, stride=(2, 1), padding=(1, 0),      # multiplier 2
                                   dilation=(1, 2))),
    ((1, 3, 5, 5), (3, 5, 5), dict(groups=3, padding=4)),                        # all-padding rows
    ((2, 5, 4, 6), (3, 1, 1), {}),                                               # pointwise
    ((2, 5, 7, 6), (3, 1, 1), dict(stride=2)),                                   # 1x1, strided
    ((2, 4, 5, 5), (2, 1, 1), dict(padding=1, groups=2)),                        # 1x1 padded
    ((1, 1, 1, 13), (2, 1, 4), dict(stride=(1, 3), padding=(0, 3))),             # one row
    ((2, 3, 3, 3), (2, 3, 3), dict(padding=0)),                                  # one pixel out
    ((2, 2, 4, 4), (2, 2, 2), dict(stride=5, padding=2)),                        # stride > kernel
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xs,ws,opts', CONV2D)
def test_conv2d_paths_match_torch(xs, ws, opts, dtype):
    r = np.random.default_rng(abs(hash((xs, ws))) % 1000)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g) + ws[1:]),
              r.standard_normal(ws[0])]
    _check(lambda *a: F.conv2d(*a, **opts), lambda *a: TF.conv2d(*a, **opts), arrays, dtype)


CONV1D = [
    ((2, 3, 17), (4, 3), dict(padding=1)),
    ((3, 4, 20), (2, 4), dict(stride=3, padding=2, dilation=2)),
    ((2, 4, 9), (8, 3), dict(groups=4, padding='same')),
    ((2, 6, 8), (3, 1), dict(groups=3)),
    ((1, 2, 5), (3, 2), dict(padding='same', dilation=3)),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xs,ws,opts', CONV1D)
def test_conv1d_paths_match_torch(xs, ws, opts, dtype):
    r = np.random.default_rng(7)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g, ws[1])),
              r.standard_normal(ws[0])]
    _check(lambda *a: F.conv1d(*a, **opts), lambda *a: TF.conv1d(*a, **opts), arrays, dtype)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('groups,cout', [(1, 4), (2, 4), (4, 4)])
def test_conv2d_empty_batch(groups, cout, dtype):
    r = np.random.default_rng(2)
    arrays = [np.zeros((0, 4, 6, 5)), r.standard_normal((cout, 4 // groups, 3, 3))]
    _check(lambda x, w: F.conv2d(x, w, padding=1, groups=groups),
           lambda x, w: TF.conv2d(x, w, padding=1, groups=groups), arrays, dtype)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('groups', [1, 3])
def test_conv2d_non_contiguous_input(groups, dtype):
    r = np.random.default_rng(3)
    x = r.standard_normal((2, 3, 7, 6))
    w = r.standard_normal((3, 3 // groups, 3, 2))

    def prep(t):   # x (batch 2) as a transposed view, w (3 out channels) as it is
        return t.transpose(2, 3) if t.shape[0] == 2 else t
    _check(lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, groups=groups),
           lambda x, w: TF.conv2d(x, w, stride=(2, 1), padding=1, groups=groups),
           [x, w], dtype, prep=prep)
    # a strided slice of the batch and channels
    xa = tape.tensor(r.standard_normal((4, 6, 7, 6)).astype(dtype))[::2, ::2]
    wa = tape.tensor(w.astype(dtype))
    ya = F.conv2d(xa, wa, padding=1, groups=groups)
    yt = TF.conv2d(torch.tensor(xa.numpy()), torch.tensor(wa.numpy()), padding=1, groups=groups)
    np.testing.assert_allclose(ya.numpy(), yt.numpy(), **_tol(dtype))


@pytest.mark.parametrize('opts,ws,xs', [
    (dict(padding=1, stride=2), (2, 2, 3, 3), (2, 2, 5, 4)),              # im2col/col2im
    (dict(padding=(1, 0), groups=2, dilation=(1, 2)), (4, 1, 2, 2), (1, 2, 4, 5)),  # depthwise
    ({}, (3, 2, 1, 1), (2, 2, 3, 2)),                                     # pointwise
])
def test_conv_paths_second_order(opts, ws, xs):
    r = np.random.default_rng(5)
    x = tape.tensor(r.standard_normal(xs), requires_grad=True)
    w = tape.tensor(r.standard_normal(ws), requires_grad=True)

    def f(x, w):
        return F.conv2d(x, w, **opts)
    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))


@pytest.mark.parametrize('dtype', DTYPES)
def test_conv_double_backward_matches_torch(dtype):
    """d/dx of <grad_w, v> through the depthwise and the im2col weight gradients."""
    r = np.random.default_rng(6)
    for groups, ws in [(1, (3, 2, 3, 3)), (2, (4, 1, 3, 3))]:
        x, w = r.standard_normal((2, 2, 6, 5)), r.standard_normal(ws)
        v = r.standard_normal(ws)
        outs = []
        for lib, fn in ((tape, F.conv2d), (torch, TF.conv2d)):
            xt = lib.tensor(x.astype(dtype), requires_grad=True)
            wt = lib.tensor(w.astype(dtype), requires_grad=True)
            y = fn(xt, wt, padding=1, stride=(1, 2), groups=groups)
            gw, = lib.autograd.grad((y * y).sum(), wt, create_graph=True)
            gx, = lib.autograd.grad((gw * lib.tensor(v.astype(dtype))).sum(), xt)
            outs.append(gx.detach().numpy())
        np.testing.assert_allclose(outs[0], outs[1], **_tol(dtype))


# -- max pooling ---------------------------------------------------------------------------
POOL = [
    ((2, 3, 8, 9), dict(kernel_size=2)),
    ((2, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 10, 9), dict(kernel_size=(3, 2), stride=1, dilation=(2, 3), padding=(1, 1))),
    ((2, 2, 7, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((1, 1, 5, 6), dict(kernel_size=2, stride=1)),                      # overlapping windows
    ((0, 3, 6, 6), dict(kernel_size=2)),                                # empty batch
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xs,opts', POOL)
def test_max_pool_kernel_matches_torch(xs, opts, dtype):
    r = np.random.default_rng(8)
    x = r.standard_normal(xs)
    x[..., ::2, 1::3] = 0.5            # ties
    _check(lambda x: F.max_pool2d(x, **opts), lambda x: TF.max_pool2d(x, **opts), [x], dtype)
    ia = F.max_pool2d(tape.tensor(x.astype(dtype)), return_indices=True, **opts)[1]
    it = TF.max_pool2d(torch.tensor(x.astype(dtype)), return_indices=True, **opts)[1]
    np.testing.assert_array_equal(ia.numpy(), it.numpy())


@pytest.mark.parametrize('dtype', DTYPES)
def test_max_pool_kernel_nan_inf_and_views(dtype):
    x = np.random.default_rng(9).standard_normal((2, 2, 6, 6)).astype(dtype)
    x[0, 0, :2, :2] = -np.inf
    x[0, 1, 0, 0] = x[0, 1, 1, 1] = np.nan
    x[1, 0, 2:4, 2:4] = np.inf
    for opts in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)):
        va, ia = F.max_pool2d(tape.tensor(x).transpose(2, 3), return_indices=True, **opts)
        vt, it = TF.max_pool2d(torch.tensor(x).transpose(2, 3), return_indices=True, **opts)
        np.testing.assert_array_equal(va.numpy(), vt.numpy())
        np.testing.assert_array_equal(ia.numpy(), it.numpy())


def test_max_pool1d_kernel_and_second_order():
    r = np.random.default_rng(10)
    _check(lambda x: F.max_pool1d(x, 3, stride=2, padding=1),
           lambda x: TF.max_pool1d(x, 3, stride=2, padding=1),
           [r.standard_normal((2, 3, 11))], np.float32)
    x = tape.tensor(r.standard_normal((1, 2, 5, 5)), requires_grad=True)
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2, stride=1), (x,))


@pytest.mark.parametrize('dtype', DTYPES)
def test_avg_pool_through_depthwise_kernel(dtype):
    r = np.random.default_rng(11)
    x = r.standard_normal((2, 3, 9, 8))
    for opts in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1,
                                            count_include_pad=False, ceil_mode=True)):
        _check(lambda x: F.avg_pool2d(x, **opts), lambda x: TF.avg_pool2d(x, **opts), [x], dtype)


def test_float16_keeps_numpy_path():
    x = np.random.default_rng(12).standard_normal((1, 2, 5, 5)).astype(np.float16)
    w = np.ones((2, 2, 3, 3), np.float16)
    y = F.conv2d(tape.tensor(x), tape.tensor(w), padding=1)
    assert np.asarray(y._data).dtype == np.float16
    ref = TF.conv2d(torch.tensor(x, dtype=torch.float32), torch.tensor(w, dtype=torch.float32),
                    padding=1)
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref.numpy(), rtol=1e-2, atol=2e-2)
