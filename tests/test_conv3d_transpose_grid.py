"""conv_transpose3d / ConvTranspose3d (tape/nn/_conv.py, tape/nn/_conv_modules.py) and
affine_grid / grid_sample (tape/nn/_grid.py) against PyTorch: values, gradients of
input, weight, bias, theta and grid, second derivatives and error types."""
import itertools
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)


def _pairs(*arrays):
    return ([tape.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _compare(fa, ft, arrays, dtype=np.float64, seed=1):
    """Outputs of fa(*tape) and ft(*torch), then the gradients of sum(out * g)."""
    arrays = [a.astype(dtype) for a in arrays]
    ta, tt = _pairs(*arrays)
    ya, yt = fa(*ta), ft(*tt)
    assert tuple(ya.shape) == tuple(yt.shape)
    assert ya.detach().numpy().dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, t in zip(ta, tt):
        assert a.grad is not None
        assert not np.isnan(a.grad.numpy()).any()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **_tol(dtype))
    return ya


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- conv_transpose3d ----------------------------------------------------------------------
# (N, C_in, D, H, W), (C_out/groups, kD, kH, kW), options
CT3D_CASES = [
    ((2, 4, 3, 4, 5), (3, 2, 3, 2), {}),
    ((1, 4, 3, 2, 3), (2, 3, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((2, 2, 3, 3, 2), (3, 3, 2, 2), dict(stride=(2, 1, 3), padding=(2, 0, 1),
                                         dilation=(2, 1, 2), output_padding=(1, 0, 2))),
    ((1, 2, 2, 2, 2), (1, 3, 3, 3), dict(padding=2, dilation=3, output_padding=2)),
    ((1, 3, 1, 3, 1), (2, 1, 2, 1), dict(stride=3, padding=(0, 1, 0), groups=3)),
    ((2, 2, 4, 1, 3), (1, 2, 1, 2), dict(stride=(1, 2, 2), padding=(3, 0, 1), dilation=(3, 1, 1))),
]


@pytest.mark.parametrize('xs, ws, kw', CT3D_CASES)
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_conv_transpose3d_functional(xs, ws, kw, bias, dtype):
    cin, groups = xs[1], kw.get('groups', 1)
    arrays = [_x(xs), _x((cin,) + ws, 1)] + ([_x((ws[0] * groups,), 2)] if bias else [])
    _compare(lambda *a: F.conv_transpose3d(*a, **kw), lambda *a: TF.conv_transpose3d(*a, **kw),
             arrays, dtype)


def test_conv_transpose3d_unbatched_empty_and_input_gradient_of_conv3d():
    _compare(lambda x, w: F.conv_transpose3d(x, w, stride=2),
             lambda x, w: TF.conv_transpose3d(x, w, stride=2),
             [_x((2, 2, 3, 2)), _x((2, 3, 2, 2, 2))])
    y = F.conv_transpose3d(tape.zeros(0, 2, 2, 2, 2), tape.ones(2, 1, 2, 2, 2))
    assert tuple(y.shape) == (0, 1, 3, 3, 3)
    # conv_transpose3d(g, w) is the gradient of conv3d with respect to its input
    x = tape.tensor(_x((1, 2, 5, 6, 4)), requires_grad=True)
    w = tape.tensor(_x((3, 2, 2, 3, 2), 1))
    y = F.conv3d(x, w, stride=(2, 1, 2), padding=1, dilation=(1, 2, 1))
    g = tape.tensor(_x(tuple(y.shape), 2))
    (y * g).sum().backward()
    ct = F.conv_transpose3d(g, w, stride=(2, 1, 2), padding=1, dilation=(1, 2, 1),
                            output_padding=(1, 0, 0))
    np.testing.assert_allclose(ct.numpy(), x.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('kw', [dict(stride=2, padding=1, output_padding=1),
                                dict(groups=2, dilation=(2, 1, 1), stride=(1, 2, 1))])
def test_conv_transpose3d_gradcheck_gradgradcheck(kw):
    x = tape.tensor(_x((1, 2, 2, 2, 2)), requires_grad=True)
    w = tape.tensor(_x((2, 1, 2, 2, 2), 1), requires_grad=True)
    b = tape.tensor(_x((kw.get('groups', 1),), 2), requires_grad=True)

    def f(x, w, b):
        return F.conv_transpose3d(x, w, b, **kw)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_conv_transpose3d_second_derivative_matches_torch():
    arrays = [_x((1, 2, 2, 3, 2)), _x((2, 2, 2, 2, 3), 1)]
    kw = dict(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0))
    (xa, wa), (xt, wt) = _pairs(*arrays)
    ya, yt = F.conv_transpose3d(xa, wa, **kw), TF.conv_transpose3d(xt, wt, **kw)
    ga = tape.autograd.grad((ya ** 2).sum(), (xa, wa), create_graph=True)
    gt = torch.autograd.grad((yt ** 2).sum(), (xt, wt), create_graph=True)
    ha = tape.autograd.grad(ga[0].sum() + (ga[1] ** 2).sum(), (xa, wa))
    ht = torch.autograd.grad(gt[0].sum() + (gt[1] ** 2).sum(), (xt, wt))
    for a, t in zip(ha, ht):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-9, atol=1e-10)


def _ct3_errors():
    x, w = _x((1, 2, 3, 3, 3)), _x((2, 1, 2, 2, 2))
    return [
        ((x, _x((3, 1, 2, 2, 2))), {}),                       # channels
        ((x, _x((2, 1, 2, 2))), {}),                          # weight rank
        ((x[0, 0, 0], w), {}),                                # input rank
        ((x, w), dict(stride=0)),
        ((x, w), dict(padding=-1)),
        ((x, w), dict(output_padding=2, stride=2)),           # >= stride and dilation
        ((x, w), dict(groups=3)),
        ((x, w), dict(stride=(1, 2))),
        ((_x((1, 2, 1, 1, 1)), w), dict(padding=3)),          # output too small
        ((x, w, _x((3,))), {}),                               # bias size
        ((x, w), dict(padding='same')),
    ]


@pytest.mark.parametrize('arrays, kw', _ct3_errors())
def test_conv_transpose3d_errors_match_torch_types(arrays, kw):
    with pytest.raises(Exception) as et:
        TF.conv_transpose3d(*[torch.tensor(a) for a in arrays], **kw)
    with pytest.raises(type(et.value)):
        F.conv_transpose3d(*[tape.tensor(a) for a in arrays], **kw)
    with pytest.raises(RuntimeError):
        F.conv_transpose3d(tape.tensor(arrays[0]).float(), tape.tensor(arrays[1]))


def _module_pair(args, kwargs, dtype=np.float64):
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose3d(*args, **kwargs,
                                  dtype=torch.float64 if dtype == np.float64 else torch.float32)
    am = tape.nn.ConvTranspose3d(*args, **kwargs, dtype=dtype)
    am.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, am


MODULE_CASES = [
    ((4, 6, 3), {}),
    ((4, 6, (2, 3, 1)), dict(stride=2, padding=1, output_padding=1, groups=2, bias=False)),
    ((2, 3, 2), dict(stride=(1, 2, 3), dilation=(2, 1, 1), padding=(0, 1, 0))),
]


@pytest.mark.parametrize('args, kwargs', MODULE_CASES)
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_conv_transpose3d_module(args, kwargs, dtype):
    tm, am = _module_pair(args, kwargs, dtype)
    assert repr(am) == repr(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    for (na, pa), (nt, pt) in zip(am.named_parameters(), tm.named_parameters()):
        assert na == nt and tuple(pa.shape) == tuple(pt.shape)
    x = _x((2, args[0], 2, 3, 2)).astype(dtype)
    xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = am(xa), tm(xt)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    g = _x(tuple(yt.shape), 3).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), **_tol(dtype))
    tp = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), **_tol(dtype))


def test_conv_transpose3d_module_output_size_and_errors():
    tm, am = _module_pair((2, 3, 3), dict(stride=(2, 3, 2), padding=1))
    x = _x((1, 2, 3, 2, 4))
    for size in [(5, 4, 7), (6, 6, 8), [1, 3, 6, 5, 8]]:
        ya = am(tape.tensor(x), output_size=size)
        yt = tm(torch.tensor(x), output_size=size)
        assert tuple(ya.shape) == tuple(yt.shape)
        np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    ya = am(tape.tensor(x[0]), output_size=(6, 6, 8))             # unbatched
    assert tuple(ya.shape) == tuple(tm(torch.tensor(x[0]), output_size=(6, 6, 8)).shape)
    for size in [(4, 4, 7), (5, 4), (7, 4, 7)]:
        with pytest.raises(Exception) as et:
            tm(torch.tensor(x), output_size=size)
        with pytest.raises(type(et.value)):
            am(tape.tensor(x), output_size=size)
    for kwargs in [dict(groups=2), dict(padding_mode='reflect')]:
        with pytest.raises(Exception) as et:
            torch.nn.ConvTranspose3d(3, 4, 2, **kwargs)
        with pytest.raises(type(et.value)):
            tape.nn.ConvTranspose3d(3, 4, 2, **kwargs)
    assert tuple(tape.nn.ConvTranspose3d(4, 6, 3, groups=2).weight.shape) == (4, 3, 3, 3, 3)


# -- affine_grid ---------------------------------------------------------------------------
@pytest.mark.parametrize('size', [(2, 3, 4, 5), (1, 1, 1, 3), (1, 1, 1, 1), (2, 1, 3, 1, 4),
                                  (1, 2, 5, 4, 3), (1, 1, 2, 1, 1)])
@pytest.mark.parametrize('align_corners', [False, True])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_affine_grid(size, align_corners, dtype):
    k = len(size) - 2
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        _compare(lambda t: F.affine_grid(t, size, align_corners=align_corners),
                 lambda t: TF.affine_grid(t, size, align_corners=align_corners),
                 [_x((size[0], k, k + 1))], dtype)


def test_affine_grid_gradgradcheck_warnings_and_errors():
    th = tape.tensor(_x((2, 2, 3)), requires_grad=True)
    assert gradcheck(lambda t: F.affine_grid(t, (2, 1, 3, 2), align_corners=False) ** 2, (th,))
    assert gradgradcheck(lambda t: F.affine_grid(t, (2, 1, 3, 2), align_corners=True) ** 2,
                         (th,))
    with pytest.warns(UserWarning):
        F.affine_grid(th, (2, 1, 3, 2))
    with pytest.warns(UserWarning):
        F.affine_grid(th, (2, 1, 1, 2), align_corners=True)
    bad = [(_x((1, 2, 3)), (1, 1, 0, 3)), (_x((1, 2, 3)), (1, 1, 3)),
           (_x((2, 2, 3)), (1, 1, 3, 3)), (_x((1, 3, 4)), (1, 1, 3, 3)),
           (_x((1, 2, 3)), (1, 1, 2, 3, 3)), (_x((2, 3)), (1, 1, 3, 3)),
           (np.ones((1, 2, 3), np.int64), (1, 1, 2, 2))]
    for arr, size in bad:
        with pytest.raises(Exception) as et:
            TF.affine_grid(torch.tensor(arr), size, align_corners=False)
        with pytest.raises(type(et.value)):
            F.affine_grid(tape.tensor(arr), size, align_corners=False)


# -- grid_sample ---------------------------------------------------------------------------
def _grid(shape, seed, lo=-2.5, hi=2.5):
    """Random points, many outside [-1, 1], plus the exact corners and centre."""
    g = np.random.default_rng(seed).uniform(lo, hi, shape)
    flat = g.reshape(-1, shape[-1])
    special = [-1.0, 1.0, 0.0]
    for i in range(min(len(flat), 3)):
        flat[i] = special[i]
    return g


GS4_CASES = [((2, 3, 4, 5), (2, 3, 4, 2)), ((1, 2, 1, 3), (1, 4, 3, 2)),
             ((1, 1, 5, 1), (1, 2, 2, 2))]
GS5_CASES = [((2, 2, 3, 4, 5), (2, 2, 3, 2, 3)), ((1, 2, 1, 3, 1), (1, 2, 2, 1, 3))]
PADS = ['zeros', 'border', 'reflection']


@pytest.mark.parametrize('mode', ['bilinear', 'nearest', 'bicubic'])
@pytest.mark.parametrize('padding_mode', PADS)
@pytest.mark.parametrize('align_corners', [False, True])
def test_grid_sample_4d(mode, padding_mode, align_corners):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    for i, (xs, gs) in enumerate(GS4_CASES):
        for dtype in (np.float64, np.float32):
            _compare(lambda x, g: F.grid_sample(x, g, **kw),
                     lambda x, g: TF.grid_sample(x, g, **kw), [_x(xs, i), _grid(gs, i)], dtype)


@pytest.mark.parametrize('mode', ['bilinear', 'nearest'])
@pytest.mark.parametrize('padding_mode', PADS)
@pytest.mark.parametrize('align_corners', [False, True])
def test_grid_sample_5d(mode, padding_mode, align_corners):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    for i, (xs, gs) in enumerate(GS5_CASES):
        for dtype in (np.float64, np.float32):
            _compare(lambda x, g: F.grid_sample(x, g, **kw),
                     lambda x, g: TF.grid_sample(x, g, **kw), [_x(xs, i), _grid(gs, i)], dtype)


@pytest.mark.parametrize('nd', [4, 5])
def test_grid_sample_far_and_boundary_points_nan_free(nd):
    """Points far outside, on the borders and at half-pixel ties, in every mode."""
    vals = np.array([-1, 1, 0, -1.5, 1.5, 3, -3, 1e8, -1e8, 1 / 3, 0.5, -0.5, 0.25, 1e30])
    if nd == 4:
        g = np.stack(np.meshgrid(vals, vals[::-1]), -1)[None]
        xs, modes = (1, 2, 3, 4), ['bilinear', 'nearest', 'bicubic']
    else:
        # (PyTorch's 5-d reflection casts floor(x / span) to int: undefined past 2**31)
        vals[-1] = 1e12
        g = np.stack(np.meshgrid(vals, vals[::-1], vals[:5]), -1)[None]
        xs, modes = (1, 2, 3, 4, 2), ['bilinear', 'nearest']
    for mode, pm, ac in itertools.product(modes, PADS, [False, True]):
        kw = dict(mode=mode, padding_mode=pm, align_corners=ac)
        y = _compare(lambda x, g: F.grid_sample(x, g, **kw),
                     lambda x, g: TF.grid_sample(x, g, **kw), [_x(xs), g])
        assert not np.isnan(y.detach().numpy()).any()


def test_grid_sample_nearest_ties_round_half_to_even():
    x = tape.arange(4.).reshape(1, 1, 1, 4)
    g = tape.tensor([[[[-0.75, 0.], [-0.25, 0.], [0.25, 0.]]]])     # x = 0.5, 1.5, 2.5
    y = F.grid_sample(x, g, mode='nearest', align_corners=False)
    yt = TF.grid_sample(torch.arange(4.).reshape(1, 1, 1, 4),
                        torch.tensor([[[[-0.75, 0.], [-0.25, 0.], [0.25, 0.]]]]),
                        mode='nearest', align_corners=False)
    np.testing.assert_array_equal(y.numpy(), yt.numpy())


@pytest.mark.parametrize('mode, pm, ac', [('bilinear', 'zeros', False),
                                          ('bilinear', 'reflection', True),
                                          ('bilinear', 'border', False),
                                          ('bicubic', 'reflection', False),
                                          ('bicubic', 'zeros', True),
                                          ('nearest', 'border', True)])
def test_grid_sample_gradcheck_gradgradcheck_4d(mode, pm, ac):
    x = tape.tensor(_x((1, 2, 3, 4)), requires_grad=True)
    # away from the kinks (pixel centres and borders), where the numerical derivative holds
    g = tape.tensor(np.array([[[[-0.77, 0.31], [0.43, -0.58]], [[1.37, -1.21], [-1.43, 0.87]]]]),
                    requires_grad=True)

    def f(x, g):
        return F.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac)
    assert gradcheck(f, (x, g))
    assert gradgradcheck(f, (x, g))


@pytest.mark.parametrize('pm', PADS)
def test_grid_sample_gradcheck_gradgradcheck_5d(pm):
    x = tape.tensor(_x((1, 2, 2, 3, 2)), requires_grad=True)
    g = tape.tensor(np.array([[[[[-0.77, 0.31, 0.12], [1.43, -0.58, -1.31]]]]]),
                    requires_grad=True)

    def f(x, g):
        return F.grid_sample(x, g, padding_mode=pm, align_corners=False)
    assert gradcheck(f, (x, g))
    assert gradgradcheck(f, (x, g))


@pytest.mark.parametrize('mode', ['bilinear', 'nearest', 'bicubic'])
def test_grid_sample_second_derivatives_match_torch(mode):
    nd_cases = [((1, 2, 3, 4), (1, 3, 2, 2))] + ([((1, 2, 3, 2, 3), (1, 2, 2, 2, 3))]
                                                 if mode != 'bicubic' else [])
    for (xs, gs), pm, ac in itertools.product(nd_cases, PADS, [False, True]):
        kw = dict(mode=mode, padding_mode=pm, align_corners=ac)
        arrays = [_x(xs), np.random.default_rng(2).uniform(-1.8, 1.8, gs)]
        (xa, ga), (xt, gt) = _pairs(*arrays)
        go = _x(xs[:2] + gs[1:-1], 3)
        a1 = tape.autograd.grad((F.grid_sample(xa, ga, **kw) * tape.tensor(go)).sum(), (xa, ga),
                                create_graph=True)
        t1 = torch.autograd.grad((TF.grid_sample(xt, gt, **kw) * torch.tensor(go)).sum(),
                                 (xt, gt), create_graph=True)
        va, vg = _x(xs, 4), _x(gs, 5)
        a2 = tape.autograd.grad((a1[0] * tape.tensor(va)).sum() + (a1[1] * tape.tensor(vg)).sum(),
                                (xa, ga), allow_unused=True)
        t2 = torch.autograd.grad((t1[0] * torch.tensor(va)).sum()
                                 + (t1[1] * torch.tensor(vg)).sum(), (xt, gt), allow_unused=True)
        for a, t in zip(a2, t2):
            a = np.zeros(t.shape) if a is None else a.numpy()
            t = np.zeros(a.shape) if t is None else t.numpy()
            np.testing.assert_allclose(a, t, rtol=1e-9, atol=1e-10)


def test_grid_sample_with_affine_grid_and_empty_shapes():
    th = _x((2, 2, 3)) * 0.5 + np.eye(2, 3)
    _compare(lambda x, t: F.grid_sample(x, F.affine_grid(t, (2, 3, 4, 5), align_corners=False),
                                        align_corners=False),
             lambda x, t: TF.grid_sample(x, TF.affine_grid(t, (2, 3, 4, 5), align_corners=False),
                                         align_corners=False),
             [_x((2, 3, 5, 6)), th])
    for xs, gs in [((0, 2, 3, 4), (0, 2, 2, 2)), ((1, 2, 3, 4), (1, 0, 2, 2)),
                   ((1, 0, 3, 4), (1, 2, 2, 2)), ((0, 2, 3, 4, 2), (0, 2, 2, 2, 3))]:
        for mode in ('bilinear', 'nearest'):
            x = tape.tensor(_x(xs), requires_grad=True)
            g = tape.tensor(_x(gs), requires_grad=True)
            y = F.grid_sample(x, g, mode=mode, align_corners=False)
            yt = TF.grid_sample(torch.tensor(_x(xs)), torch.tensor(_x(gs)), mode=mode,
                                align_corners=False)
            assert tuple(y.shape) == tuple(yt.shape)
            y.sum().backward()
            assert tuple(x.grad.shape) == xs and tuple(g.grad.shape) == gs


def test_grid_sample_warning_and_errors():
    x, g = _x((1, 2, 3, 4)), _x((1, 2, 2, 2))
    with pytest.warns(UserWarning):
        F.grid_sample(tape.tensor(x), tape.tensor(g))
    bad = [((x, g), dict(mode='area')), ((x, g), dict(padding_mode='circular')),
           ((x, g.astype(np.float32)), {}), ((x, g[..., :1]), {}), ((x[0], g), {}),
           ((x, g[0]), {}), ((_x((2, 2, 3, 4)), g), {}),
           ((_x((1, 2, 3, 4, 5)), _x((1, 2, 2, 2, 3))), dict(mode='bicubic')),
           ((_x((1, 2, 0, 4)), g), {}), ((x, _x((1, 2, 2, 2, 2))), {}),
           ((_x((1, 2, 3)), _x((1, 2, 1))), {}),
           ((np.ones((1, 2, 3, 4), np.int64), np.ones((1, 2, 2, 2), np.int64)), {})]
    for (xa, ga), kw in bad:
        with pytest.raises(Exception) as et:
            TF.grid_sample(torch.tensor(xa), torch.tensor(ga), align_corners=False, **kw)
        with pytest.raises(type(et.value)):
            F.grid_sample(tape.tensor(xa), tape.tensor(ga), align_corners=False, **kw)


def test_exports():
    import tape.nn.functional as fn
    for name in ('conv_transpose3d', 'affine_grid', 'grid_sample'):
        assert name in fn.__all__ and callable(getattr(fn, name))
    assert 'ConvTranspose3d' in tape.nn._conv_modules.__all__
    assert tape.nn.ConvTranspose3d is tape.nn._conv_modules.ConvTranspose3d
