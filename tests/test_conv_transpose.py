"""Transposed convolutions, 3-d convolution and pooling, adaptive_avg_pool1d and
BatchNorm3d (tape/nn/_conv.py, tape/nn/_conv_modules.py) against PyTorch: values,
gradients of input, weight and bias, second derivatives and error types."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float64, np.float32]


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)


def _torch_dtype(dtype):
    return torch.float64 if dtype == np.float64 else torch.float32


def _pair(torch_cls, tape_cls, args, kwargs, dtype):
    """A torch module and a tape module with the torch one's parameters."""
    torch.manual_seed(0)
    tm = torch_cls(*args, **kwargs, dtype=_torch_dtype(dtype))
    am = getattr(tape.nn, tape_cls)(*args, **kwargs, dtype=dtype)
    am.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, am


def _check_module(tm, am, x, dtype, seed=1, **fwd):
    """Outputs, then the gradients of sum(out * g) for the input and every parameter."""
    xa = tape.tensor(x.astype(dtype), requires_grad=True)
    xt = torch.tensor(x.astype(dtype), requires_grad=True)
    ya, yt = am(xa, **fwd), tm(xt, **fwd)
    assert tuple(ya.shape) == tuple(yt.shape)
    assert np.asarray(ya._data).dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), **_tol(dtype))
    params = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), params[name].grad.numpy(), **_tol(dtype))
    return ya


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- ConvTranspose2d / ConvTranspose1d ---------------------------------------------------
# (N, C_in, H, W), (C_out, kH, kW), constructor options
CT2D_CASES = [
    ((2, 3, 4, 5), (2, 3, 3), {}),
    ((2, 3, 4, 4), (4, 3, 3), dict(stride=2)),
    ((2, 3, 4, 5), (4, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 5, 4), (6, 3, 3), dict(stride=(3, 2), padding=(1, 0), output_padding=(2, 1),
                                   groups=2)),
    ((2, 4, 3, 4), (4, 2, 3), dict(stride=2, dilation=(2, 1), padding=(2, 1), groups=4)),
    ((2, 2, 3, 3), (3, 3, 3), dict(dilation=3, output_padding=2)),   # op >= stride < dilation
    ((2, 2, 3, 3), (3, 2, 2), dict(dilation=4, output_padding=3, padding=1)),
    ((2, 6, 4, 4), (6, 3, 3), dict(groups=6, stride=2, output_padding=1)),   # depthwise
    ((2, 3, 4, 4), (5, 1, 1), dict(bias=False)),
    ((1, 2, 3, 3), (2, 5, 5), dict(padding=2, stride=3)),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xshape,wshape,kw', CT2D_CASES)
def test_conv_transpose2d_module(xshape, wshape, kw, dtype):
    tm, am = _pair(torch.nn.ConvTranspose2d, 'ConvTranspose2d',
                   (xshape[1], wshape[0], wshape[1:]), kw, dtype)
    assert tuple(am.weight.shape) == (xshape[1], wshape[0] // kw.get('groups', 1)) + wshape[1:]
    _check_module(tm, am, _x(xshape), dtype)


CT1D_CASES = [
    ((2, 3, 5), (2, 3), {}),
    ((2, 4, 6), (6, 4), dict(stride=3, padding=1, output_padding=2, groups=2)),
    ((1, 2, 4), (3, 2), dict(dilation=3, output_padding=2)),
    ((3, 4, 5), (4, 3), dict(groups=4, stride=2, padding=1, bias=False)),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xshape,wshape,kw', CT1D_CASES)
def test_conv_transpose1d_module(xshape, wshape, kw, dtype):
    tm, am = _pair(torch.nn.ConvTranspose1d, 'ConvTranspose1d',
                   (xshape[1], wshape[0], wshape[1]), kw, dtype)
    _check_module(tm, am, _x(xshape), dtype)


@pytest.mark.parametrize('cls,xshape,kw,size', [
    ('ConvTranspose2d', (2, 3, 4, 5), dict(stride=2, padding=1), (8, 10)),
    ('ConvTranspose2d', (2, 3, 4, 5), dict(stride=3), (12, 17)),
    ('ConvTranspose2d', (2, 3, 4, 5), dict(stride=(3, 2)), (2, 4, 13, 12)),  # with N, C
    ('ConvTranspose2d', (3, 4, 5), dict(stride=2), (4, 10, 11)),              # unbatched
    ('ConvTranspose1d', (2, 3, 5), dict(stride=4, padding=2), [16]),
    ('ConvTranspose1d', (2, 3, 5), dict(stride=4, output_padding=1), (20,)),  # overrides
])
def test_output_size(cls, xshape, kw, size):
    spatial = int(cls[-2])
    cin = xshape[-spatial - 1]
    tm, am = _pair(getattr(torch.nn, cls), cls, (cin, 4, 3), kw, np.float64)
    y = _check_module(tm, am, _x(xshape), np.float64, output_size=size)
    assert tuple(y.shape[-spatial:]) == tuple(size[-spatial:])


@pytest.mark.parametrize('dtype', DTYPES)
def test_conv_transpose_empty_batch_and_unbatched(dtype):
    tm, am = _pair(torch.nn.ConvTranspose2d, 'ConvTranspose2d', (4, 6, 3),
                   dict(stride=2, output_padding=1, groups=2), dtype)
    y = _check_module(tm, am, _x((0, 4, 3, 5)), dtype)
    assert tuple(y.shape) == (0, 6, 8, 12)
    y = _check_module(tm, am, _x((4, 3, 5)), dtype)
    assert tuple(y.shape) == (6, 8, 12)
    tm, am = _pair(torch.nn.ConvTranspose1d, 'ConvTranspose1d', (2, 3, 2), dict(stride=2), dtype)
    assert tuple(_check_module(tm, am, _x((2, 5)), dtype).shape) == (3, 10)
    assert tuple(_check_module(tm, am, _x((0, 2, 5)), dtype).shape) == (0, 3, 10)


def test_functional_matches_torch_and_is_the_input_gradient_of_conv():
    x, w, b = _x((2, 4, 3, 5)), _x((4, 3, 3, 2), 1), _x((6,), 2)
    kw = dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2))
    ya = F.conv_transpose2d(tape.tensor(x), tape.tensor(w), tape.tensor(b), **kw)
    yt = TF.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw)
    np.testing.assert_allclose(ya.numpy(), yt.numpy(), rtol=1e-10, atol=1e-12)
    # without bias and output_padding: the gradient of conv2d's input
    kw2 = dict(stride=(2, 3), padding=(1, 0), groups=2, dilation=(1, 2))
    yt = F.conv_transpose2d(tape.tensor(x), tape.tensor(w), **kw2)
    assert tuple(yt.shape) == (2, 6, 5, 15)
    xin = tape.tensor(np.zeros((2, 6, 5, 15)), requires_grad=True)
    y = F.conv2d(xin, tape.tensor(w), **kw2)
    assert tuple(y.shape) == (2, 4, 3, 5)
    gx, = tape.autograd.grad((y * tape.tensor(x)).sum(), xin)
    np.testing.assert_allclose(gx.numpy(), yt.numpy(), rtol=1e-12)


@pytest.mark.parametrize('fn,xs,ws,kw', [
    (F.conv_transpose2d, (1, 2, 3, 2), (2, 2, 2, 3), dict(stride=2, output_padding=1,
                                                          padding=(0, 1))),
    (F.conv_transpose2d, (2, 4, 2, 3), (4, 1, 2, 2), dict(groups=2, dilation=2, stride=(1, 2))),
    (F.conv_transpose2d, (1, 1, 2, 2), (1, 1, 2, 2), dict(dilation=3, output_padding=2)),
    (F.conv_transpose1d, (2, 2, 3), (2, 3, 3), dict(stride=3, padding=1, output_padding=2)),
])
def test_gradgradcheck_conv_transpose(fn, xs, ws, kw):
    x = tape.tensor(_x(xs), requires_grad=True)
    w = tape.tensor(_x(ws, 1), requires_grad=True)
    cout = ws[1] * kw.get('groups', 1)
    b = tape.tensor(_x((cout,), 2), requires_grad=True)
    f = lambda x, w, b: fn(x, w, b, **kw)  # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_third_derivative_matches_torch():
    x, w = _x((1, 2, 3, 3)), _x((2, 2, 2, 2), 1)
    kw = dict(stride=2, padding=1)    # (torch's double backward rejects output_padding)
    outs = []
    for lib, fn in ((tape, F.conv_transpose2d), (torch, TF.conv_transpose2d)):
        xa = lib.tensor(x, requires_grad=True)
        wa = lib.tensor(w, requires_grad=True)
        y = (fn(xa, wa, **kw) ** 3).sum()
        gx, = lib.autograd.grad(y, xa, create_graph=True)
        gw, = lib.autograd.grad((gx ** 2).sum(), wa, create_graph=True)
        g3, = lib.autograd.grad(gw.sum(), xa)
        outs.append(g3.detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-9, atol=1e-10)


def _ct_errors():
    x, w = np.zeros((1, 4, 5, 5)), np.zeros((4, 2, 3, 3))
    return [
        ('conv_transpose2d', (x, w), dict(stride=2, output_padding=2)),
        ('conv_transpose2d', (x, w), dict(output_padding=1)),
        ('conv_transpose2d', (x, w), dict(output_padding=-1)),
        ('conv_transpose2d', (x[:, :3], w), {}),
        ('conv_transpose2d', (x, w), dict(groups=3)),
        ('conv_transpose2d', (x, w), dict(groups=0)),
        ('conv_transpose2d', (x, w, np.zeros(3)), {}),
        ('conv_transpose2d', (x, w), dict(padding=-1)),
        ('conv_transpose2d', (x, w), dict(padding=5)),
        ('conv_transpose2d', (x, w), dict(padding='same')),
        ('conv_transpose2d', (x, w), dict(stride=0)),
        ('conv_transpose2d', (x, w), dict(dilation=0)),
        ('conv_transpose2d', (x, w[0]), {}),
        ('conv_transpose2d', (x[0, 0], w), {}),
        ('conv_transpose2d', (x, w), dict(stride=(1, 1, 1))),
        ('conv_transpose1d', (x[0], w[..., 0]), dict(stride=2, output_padding=3)),
        ('conv3d', (np.zeros((1, 2, 3, 4, 4)), np.zeros((3, 2, 4, 2, 2))), {}),
        ('max_pool3d', (np.zeros((1, 2, 3, 4, 4)),), dict(kernel_size=2, padding=2)),
        ('avg_pool3d', (np.zeros((1, 2, 3, 4, 4)),), dict(kernel_size=5)),
        ('adaptive_avg_pool1d', (np.zeros((2, 3, 0)),), dict(output_size=2)),
        ('adaptive_avg_pool1d', (np.zeros((2, 3, 5)),), dict(output_size=(2, 3))),
        ('adaptive_avg_pool1d', (np.zeros((2, 3, 5)),), dict(output_size=-1)),
        ('adaptive_avg_pool1d', (np.zeros(5),), dict(output_size=2)),
    ]


@pytest.mark.parametrize('name,arrays,kw', _ct_errors())
def test_functional_errors_match_torch_types(name, arrays, kw):
    with pytest.raises(Exception) as et:
        getattr(TF, name)(*[torch.tensor(a) for a in arrays], **kw)
    with pytest.raises(et.type):
        getattr(F, name)(*[tape.tensor(a) for a in arrays], **kw)


@pytest.mark.parametrize('make,call', [
    (lambda nn: nn.ConvTranspose2d(4, 3, 3, groups=2), None),
    (lambda nn: nn.ConvTranspose2d(3, 4, 3, groups=2), None),
    (lambda nn: nn.ConvTranspose2d(4, 2, 3, padding_mode='reflect'), None),
    (lambda nn: nn.ConvTranspose1d(4, 2, 3, padding_mode='circular'), None),
    (lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2), dict(output_size=(20, 20))),
    (lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2), dict(output_size=(10, 11))),
    (lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2), dict(output_size=(11,))),
    (lambda nn: nn.BatchNorm3d(4), dict()),
])
def test_module_errors_match_torch_types(make, call):
    x = np.zeros((1, 4, 5, 5))
    with pytest.raises(Exception) as et:
        m = make(torch.nn)
        m(torch.tensor(x, dtype=torch.float32), **call)
    with pytest.raises(et.type):
        m = make(tape.nn)
        m(tape.tensor(x, dtype=tape.float32), **call)


@pytest.mark.parametrize('name,args,kwargs', [
    ('ConvTranspose2d', (4, 2, 3), dict(stride=2, output_padding=1, dilation=2, groups=2,
                                        bias=False)),
    ('ConvTranspose2d', (4, 2, (2, 3)), dict(padding=1)),
    ('ConvTranspose1d', (4, 2, 3), {}),
    ('Conv3d', (2, 3, 3), dict(padding=1, padding_mode='replicate')),
    ('MaxPool3d', (2,), dict(stride=1, ceil_mode=True)),
    ('AvgPool3d', (2,), dict(padding=1)),
    ('AdaptiveAvgPool1d', (3,), {}),
    ('BatchNorm3d', (3,), dict(momentum=None)),
])
def test_module_reprs_and_init(name, args, kwargs):
    tm = getattr(torch.nn, name)(*args, **kwargs)
    am = getattr(tape.nn, name)(*args, **kwargs)
    assert repr(am) == repr(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(am.state_dict()[k].shape) == tuple(v.shape)
    if name.startswith('Conv'):
        # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in over weight.shape[1:] as PyTorch
        w = am.weight.detach().numpy()
        bound = 1 / np.sqrt(np.prod(w.shape[1:]))
        assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2


# -- Conv3d, 3-d pools, adaptive_avg_pool1d, BatchNorm3d ----------------------------------
C3D_CASES = [
    ((2, 2, 4, 5, 4), (3, 3, 2, 3), {}),
    ((1, 4, 6, 5, 5), (6, 2, 3, 3), dict(stride=(2, 1, 2), padding=(1, 0, 1), groups=2)),
    ((2, 3, 5, 4, 6), (3, 3, 1, 2), dict(padding='same', dilation=(2, 1, 1), groups=3)),
    ((2, 2, 3, 4, 3), (4, 1, 1, 1), dict(bias=False)),
    ((1, 2, 5, 5, 5), (2, 3, 3, 3), dict(padding=1, padding_mode='reflect')),
    ((1, 2, 4, 4, 4), (2, 2, 2, 2), dict(padding=(1, 2, 1), padding_mode='circular')),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('xshape,wshape,kw', C3D_CASES)
def test_conv3d_module(xshape, wshape, kw, dtype):
    tm, am = _pair(torch.nn.Conv3d, 'Conv3d', (xshape[1], wshape[0], wshape[1:]), kw, dtype)
    _check_module(tm, am, _x(xshape), dtype)


def test_conv3d_empty_unbatched_and_gradgrad():
    tm, am = _pair(torch.nn.Conv3d, 'Conv3d', (2, 3, 2), dict(stride=2), np.float64)
    assert tuple(_check_module(tm, am, _x((0, 2, 4, 4, 4)), np.float64).shape) == \
        (0, 3, 2, 2, 2)
    assert tuple(_check_module(tm, am, _x((2, 4, 4, 5)), np.float64).shape) == (3, 2, 2, 2)
    x = tape.tensor(_x((1, 2, 3, 3, 2)), requires_grad=True)
    w = tape.tensor(_x((2, 1, 2, 2, 1), 1), requires_grad=True)
    f = lambda x, w: F.conv3d(x, w, stride=(2, 1, 1), padding=(1, 0, 1), groups=2)  # noqa
    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))


@pytest.mark.parametrize('padding_mode', ['reflect', 'replicate', 'circular'])
@pytest.mark.parametrize('cls,xshape,kw', [
    ('Conv1d', (2, 2, 7), dict(padding=2, stride=2)),
    ('Conv2d', (2, 2, 5, 6), dict(padding=(1, 2), dilation=(2, 1))),
])
def test_padding_modes(cls, xshape, kw, padding_mode):
    tm, am = _pair(getattr(torch.nn, cls), cls, (2, 3, 3), dict(kw, padding_mode=padding_mode),
                   np.float64)
    _check_module(tm, am, _x(xshape), np.float64)


POOL3D_CASES = [
    ('max_pool3d', dict(kernel_size=2)),
    ('max_pool3d', dict(kernel_size=(3, 2, 2), stride=(1, 2, 1), padding=(1, 1, 0),
                        dilation=(1, 2, 1))),
    ('max_pool3d', dict(kernel_size=3, stride=2, ceil_mode=True, padding=1)),
    ('avg_pool3d', dict(kernel_size=2)),
    ('avg_pool3d', dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 1, 1),
                        count_include_pad=False)),
    ('avg_pool3d', dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ('avg_pool3d', dict(kernel_size=2, ceil_mode=True, count_include_pad=False)),
    ('avg_pool3d', dict(kernel_size=2, stride=1, divisor_override=3)),
]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('name,kw', POOL3D_CASES)
def test_pool3d(name, kw, dtype):
    for shape in ((2, 3, 5, 6, 5), (3, 5, 4, 5)):     # batched and unbatched
        x = _x(shape).astype(dtype)
        xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yt = getattr(F, name)(xa, **kw), getattr(TF, name)(xt, **kw)
        np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
        g = _x(tuple(yt.shape), 3).astype(dtype)
        (ya * tape.tensor(g)).sum().backward()
        (yt * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), **_tol(dtype))


def test_max_pool3d_indices_ties_nan_and_module():
    x = np.zeros((1, 2, 4, 4, 4))
    x[0, 1, 1, 2, 3] = np.nan
    x[0, 0, 2:, 2:, :2] = 1.0                          # ties: the first wins
    ya, ia = F.max_pool3d(tape.tensor(x), 2, return_indices=True)
    yt, it = TF.max_pool3d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(ia.numpy(), it.numpy())
    np.testing.assert_array_equal(ya.numpy(), yt.numpy())
    m = tape.nn.MaxPool3d(2, stride=1, return_indices=True)
    np.testing.assert_array_equal(m(tape.tensor(x))[1].numpy(),
                                  torch.nn.MaxPool3d(2, stride=1, return_indices=True)(
                                      torch.tensor(x))[1].numpy())
    x16 = _x((1, 2, 3, 4, 4)).astype(np.float16)
    np.testing.assert_array_equal(F.max_pool3d(tape.tensor(x16), 2).numpy(),
                                  TF.max_pool3d(torch.tensor(x16), 2).numpy())


def test_pool3d_modules_and_gradgrad():
    x = _x((2, 2, 4, 4, 5))
    for name, args in (('MaxPool3d', (2,)), ('AvgPool3d', ((2, 1, 3), 1, (1, 0, 1)))):
        tm, am = getattr(torch.nn, name)(*args), getattr(tape.nn, name)(*args)
        _check_module(tm, am, x, np.float64)
    xa = tape.tensor(_x((1, 2, 3, 3, 3)), requires_grad=True)
    assert gradgradcheck(lambda x: F.avg_pool3d(x, 2, stride=1, padding=1) ** 2, (xa,))
    assert gradgradcheck(lambda x: F.max_pool3d(x, 2, stride=1) ** 2, (xa,))


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape,size', [((2, 3, 7), 3), ((2, 3, 5), (5,)), ((3, 10), 4),
                                        ((0, 3, 4), 2), ((2, 3, 4), 0), ((2, 3, 3), 7)])
def test_adaptive_avg_pool1d(shape, size, dtype):
    tm = torch.nn.AdaptiveAvgPool1d(size)
    am = tape.nn.AdaptiveAvgPool1d(size)
    if size == 0:       # (torch's backward rejects an empty output)
        ya = am(tape.tensor(_x(shape).astype(dtype)))
        assert tuple(ya.shape) == tuple(tm(torch.tensor(_x(shape))).shape)
        return
    _check_module(tm, am, _x(shape), dtype)


def test_adaptive_avg_pool1d_gradgrad():
    xa = tape.tensor(_x((2, 2, 5)), requires_grad=True)
    assert gradgradcheck(lambda x: F.adaptive_avg_pool1d(x, 3) ** 2, (xa,))


@pytest.mark.parametrize('dtype', DTYPES)
def test_batchnorm3d_training_and_eval(dtype):
    tm, am = _pair(torch.nn.BatchNorm3d, 'BatchNorm3d', (3,), {}, dtype)
    x = _x((2, 3, 3, 4, 2))
    for _ in range(2):
        _check_module(tm, am, x, dtype)
    for k in ('running_mean', 'running_var', 'num_batches_tracked'):
        np.testing.assert_allclose(getattr(am, k).numpy(), getattr(tm, k).numpy(), **_tol(dtype))
    tm.eval()
    am.eval()
    _check_module(tm, am, x, dtype)
