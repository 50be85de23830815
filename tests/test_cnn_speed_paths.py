"""The fast paths of a small CNN's step (tape/nn/_conv.py, compiler/conv_kernels.py)
against PyTorch: the conv2d layer's per-sample columns and products (the columns kept
for the weight gradient), im2col/col2im's flat-shift path (stride 1, output as wide as
the input: one long copy or add per kernel offset, the padding strip fixed after) and
the unrolled 2x2 stride-2 max pool.  float32 and float64; gradcheck in float64."""
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


def _check(tape_fn, torch_fn, arrays, dtype, seed=1):
    """Outputs and the gradients of sum(out * random) for every input, against torch."""
    arrays = [np.asarray(a, dtype) for a in arrays]
    ta = [tape.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    ya, yt = tape_fn(*ta), torch_fn(*tt)
    assert tuple(ya.shape) == tuple(yt.shape)
    assert np.asarray(ya._data).dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, t in zip(ta, tt):
        assert np.asarray(a.grad._data).dtype == dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **_tol(dtype))


# (N, C_in, H, W), (C_out, kH, kW), options.  Rows with stride 1 and OW == W take the
# flat-shift path (strip on the left, the right, both, none; rows all padding; an
# output shorter than the input); the others the row-by-row path next to it.
FLAT = [
    ((3, 2, 7, 9), (4, 3, 3), dict(padding=1)),                      # same, strips both sides
    ((2, 3, 6, 5), (2, 4, 2), dict(padding='same')),                 # even kernel: (0, 1) pads
    ((2, 2, 8, 7), (3, 3, 3), dict(padding='same', dilation=2)),     # dilated
    ((2, 2, 6, 6), (3, 5, 5), dict(padding=2)),                      # two strip columns
    ((2, 2, 5, 3), (2, 5, 5), dict(padding=2)),                      # kernel wider than half
    ((2, 1, 4, 1), (2, 3, 3), dict(padding=1)),                      # one column: no band
    ((2, 2, 3, 4), (2, 7, 3), dict(padding=(3, 1))),                 # rows all padding
    ((2, 3, 8, 6), (4, 3, 3), dict(padding=(0, 1))),                 # OW == W, OH < H
    ((2, 3, 5, 6), (2, 1, 3), dict(padding=(2, 1))),                 # OH > H
    ((2, 3, 6, 7), (4, 3, 1), {}),                                   # no strip, no padding
    ((2, 4, 6, 6), (4, 3, 3), dict(padding=1, groups=2)),            # grouped: _Conv path
    ((2, 3, 8, 8), (4, 3, 3), {}),                                   # OW < W: row path
    ((2, 3, 9, 8), (4, 3, 3), dict(stride=2, padding=1)),            # strided: row path
    ((2, 5, 4, 6), (3, 1, 1), {}),                                   # pointwise layer
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xs,ws,opts', FLAT)
@pytest.mark.parametrize('bias', [True, False])
def test_conv2d_layer_paths_match_torch(xs, ws, opts, dtype, bias):
    r = np.random.default_rng(abs(hash((xs, ws))) % 1000)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g) + ws[1:])]
    if bias:
        arrays.append(r.standard_normal(ws[0]))
    _check(lambda *a: F.conv2d(*a, **opts), lambda *a: TF.conv2d(*a, **opts), arrays, dtype)


@pytest.mark.parametrize('xs,ws,opts', [FLAT[0], FLAT[1], FLAT[7], FLAT[10]])
def test_conv2d_flat_path_gradcheck(xs, ws, opts):
    r = np.random.default_rng(3)
    g = opts.get('groups', 1)
    x = tape.tensor(r.standard_normal(xs)[:1], requires_grad=True)
    w = tape.tensor(r.standard_normal((ws[0], xs[1] // g) + ws[1:]), requires_grad=True)
    b = tape.tensor(r.standard_normal(ws[0]), requires_grad=True)

    def f(x, w, b):
        return F.conv2d(x, w, b, **opts)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


@pytest.mark.parametrize('dtype', DTYPES)
def test_conv_layer_steps_reuse_kept_columns(dtype):
    """Two training steps of conv (kept columns) -> relu -> pool: every parameter's
    gradient as PyTorch's, also when the input itself needs a gradient."""
    r = np.random.default_rng(5)
    x = r.standard_normal((4, 3, 10, 10)).astype(dtype)
    params = [r.standard_normal(s).astype(dtype) * 0.3 for s in
              [(6, 3, 3, 3), (6,), (5, 6, 3, 3), (5,)]]
    results = []
    for lib, fn in ((tape, F), (torch, TF)):
        ps = [lib.tensor(p.copy(), requires_grad=True) for p in params]
        xt = lib.tensor(x, requires_grad=True)
        grads = []
        for _ in range(2):
            h = fn.max_pool2d(fn.relu(fn.conv2d(xt, ps[0], ps[1], padding=1)), 2)
            y = fn.conv2d(h, ps[2], ps[3], padding=1)
            (y * y).sum().backward()
            grads.append([np.array(t.grad.detach().numpy()) for t in ps + [xt]])
            with lib.no_grad():
                for p in ps:
                    p -= 0.01 * p.grad
                    p.grad = None
            xt.grad = None
        results.append(grads)
    for ga, gt in zip(*results):
        for a, t in zip(ga, gt):
            np.testing.assert_allclose(a, t, rtol=1e-3 if dtype == np.float32 else 1e-9,
                                       atol=1e-4 if dtype == np.float32 else 1e-10)


POOL = [(2, 3, 8, 8), (2, 2, 7, 9), (1, 1, 2, 2), (3, 4, 5, 4), (2, 3, 28, 28)]


def _pool_input(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    x = r.integers(-3, 4, shape).astype(dtype)      # many ties
    x.reshape(-1)[::7] = r.standard_normal(x.size)[::7]
    return x


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape', POOL)
def test_max_pool_2x2_matches_torch(shape, dtype):
    x = _pool_input(shape, dtype)
    ya, ia = F.max_pool2d(tape.tensor(x), 2, return_indices=True)
    yt, it = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(ya.numpy(), yt.numpy())
    np.testing.assert_array_equal(ia.numpy(), it.numpy())
    _check(lambda a: F.max_pool2d(a, 2), lambda a: TF.max_pool2d(a, 2), [x], dtype)
    _check(lambda a: F.max_pool2d(a, (2, 2), stride=2), lambda a: TF.max_pool2d(a, 2, 2),
           [x[0]], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_max_pool_2x2_nan_inf_ties(dtype):
    """PyTorch's scan: the first maximum on ties, a NaN takes over (the last NaN wins),
    an all -inf window keeps its first pixel."""
    x = np.zeros((1, 2, 4, 6), dtype)
    x[0, 0, 0, 0:2] = np.nan                    # two NaNs in the first row: the second
    x[0, 0, 1, 3] = np.nan                      # a NaN after a larger value
    x[0, 0, 0, 2] = 5.0
    x[0, 0, 2:4, 0:2] = -np.inf                 # all -inf
    x[0, 0, 2, 2:4] = [1.0, 1.0]                # a tie in the top row
    x[0, 0, 3, 2] = 1.0                         # and below it
    x[0, 0, 2, 5] = np.inf
    x[0, 1] = np.arange(24, dtype=dtype).reshape(4, 6)[::-1]
    ya, ia = F.max_pool2d(tape.tensor(x), 2, return_indices=True)
    yt, it = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(ya.numpy(), yt.numpy())
    np.testing.assert_array_equal(ia.numpy(), it.numpy())


def test_max_pool_2x2_gradcheck():
    x = tape.tensor(np.random.default_rng(2).standard_normal((2, 2, 6, 5)), requires_grad=True)
    assert gradcheck(lambda x: F.max_pool2d(x, 2), (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2), (x,))
