"""Convolution, pooling and batch-norm (tape/nn/_conv.py, tape/nn/_conv_modules.py)
against PyTorch: values, first and second derivatives, module reprs, state dicts,
running statistics and a few SGD steps of a small CNN."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _rng(seed=0):
    return np.random.default_rng(seed)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


def _compare(tape_fn, torch_fn, arrays, dtype, seed=1, grads=True):
    """Run both, compare outputs, then the gradients of sum(out * random) for every input."""
    arrays = [a.astype(dtype) for a in arrays]
    ta = [tape.tensor(a, requires_grad=grads) for a in arrays]
    tt = [torch.tensor(a, requires_grad=grads) for a in arrays]
    ya, yt = tape_fn(*ta), torch_fn(*tt)
    if isinstance(yt, tuple):
        np.testing.assert_array_equal(ya[1].numpy(), yt[1].numpy())
        assert ya[1].dtype == np.int64
        ya, yt = ya[0], yt[0]
    assert tuple(ya.shape) == tuple(yt.shape)
    assert np.asarray(ya._data).dtype == dtype
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    if not grads:
        return
    g = _rng(seed).standard_normal(tuple(yt.shape)).astype(dtype)
    (ya * tape.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, t in zip(ta, tt):
        assert np.asarray(a.grad._data).dtype == dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **_tol(dtype))


# -- conv2d / conv1d ------------------------------------------------------------------------
# (N, C_in, H, W), (C_out, kH, kW), options
CONV2D_CASES = [
    ((1, 1, 5, 5), (1, 3, 3), {}),
    ((3, 2, 7, 6), (4, 3, 3), dict(stride=2)),
    ((2, 3, 8, 7), (5, 2, 3), dict(stride=(2, 1), padding=(1, 2))),
    ((2, 4, 9, 9), (6, 3, 3), dict(padding='same', groups=2)),
    ((2, 4, 9, 8), (4, 2, 4), dict(padding='same', dilation=(2, 1))),     # even kernel
    ((2, 3, 6, 6), (2, 2, 2), dict(padding='valid')),
    ((2, 4, 10, 9), (8, 3, 2), dict(stride=(3, 2), padding=1, dilation=2, groups=4)),
    ((1, 6, 5, 7), (6, 1, 3), dict(groups=6, padding=(0, 1))),            # depthwise
    ((2, 3, 4, 4), (5, 1, 1), {}),                                        # 1x1
    ((2, 2, 5, 5), (2, 5, 5), dict(padding=2, stride=3)),
]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('xs,ws,opts', CONV2D_CASES)
def test_conv2d_matches_torch(xs, ws, opts, bias, dtype):
    r = _rng(hash((xs, ws)) % 1000)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g) + ws[1:])]
    if bias:
        arrays.append(r.standard_normal(ws[0]))
    _compare(lambda *a: F.conv2d(*a, **opts), lambda *a: TF.conv2d(*a, **opts), arrays, dtype)


CONV1D_CASES = [
    ((1, 1, 6), (1, 3), {}),
    ((3, 4, 11), (6, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 3, 10), (4, 4), dict(padding='same', dilation=3)),
    ((2, 2, 9), (3, 2), dict(stride=3, dilation=2, padding=(2,))),
]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('xs,ws,opts', CONV1D_CASES)
def test_conv1d_matches_torch(xs, ws, opts, dtype):
    r = _rng(3)
    g = opts.get('groups', 1)
    arrays = [r.standard_normal(xs), r.standard_normal((ws[0], xs[1] // g, ws[1])),
              r.standard_normal(ws[0])]
    _compare(lambda *a: F.conv1d(*a, **opts), lambda *a: TF.conv1d(*a, **opts), arrays, dtype)


def test_conv_unbatched_input():
    r = _rng(4)
    _compare(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1),
             [r.standard_normal((2, 5, 5)), r.standard_normal((3, 2, 3, 3))], np.float64)
    _compare(lambda x, w: F.conv1d(x, w), lambda x, w: TF.conv1d(x, w),
             [r.standard_normal((2, 5)), r.standard_normal((3, 2, 2))], np.float64)


GRADCHECK_CONV = [
    (2, (1, 2, 4, 4), (2, 2, 2), dict(stride=2, padding=1)),
    (2, (1, 4, 5, 4), (2, 2, 3), dict(padding='same', dilation=(1, 2), groups=2)),
    (2, (2, 1, 4, 5), (2, 3, 2), dict(stride=(1, 2))),
    (1, (2, 2, 6), (2, 3), dict(stride=2, padding=1, dilation=2)),
]


@pytest.mark.parametrize('nd,xs,ws,opts', GRADCHECK_CONV)
def test_conv_gradcheck_and_gradgradcheck(nd, xs, ws, opts):
    r = _rng(5)
    g = opts.get('groups', 1)
    x = tape.tensor(r.standard_normal(xs), requires_grad=True)
    w = tape.tensor(r.standard_normal((ws[0], xs[1] // g) + ws[1:]), requires_grad=True)
    b = tape.tensor(r.standard_normal(ws[0]), requires_grad=True)
    fn = F.conv2d if nd == 2 else F.conv1d

    def f(x, w, b):
        return fn(x, w, b, **opts)
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


def test_conv_third_order_matches_torch():
    """d/dw of a gradient penalty's gradient: conv, its transpose and its weight
    gradient all differentiated again."""
    r = _rng(6)
    x0, w0 = r.standard_normal((2, 2, 5, 5)), r.standard_normal((3, 2, 3, 3))
    out = []
    for lib in (tape, torch):
        x = lib.tensor(x0, requires_grad=True)
        w = lib.tensor(w0, requires_grad=True)
        fn = F.conv2d if lib is tape else TF.conv2d
        y = (fn(x, w, stride=2, padding=1) ** 2).sum()
        gx, = lib.autograd.grad(y, x, create_graph=True)
        pen = (gx ** 2).sum()
        gw, = lib.autograd.grad(pen, w, create_graph=True)
        gw3, = lib.autograd.grad((gw ** 2).sum(), x)
        out.append((pen.detach().numpy(), gw.detach().numpy(), gw3.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_conv_errors():
    x, w = tape.randn(1, 4, 5, 5), tape.randn(6, 2, 3, 3)
    with pytest.raises(RuntimeError, match='groups'):
        F.conv2d(x, w, groups=1)
    with pytest.raises(RuntimeError, match='strided'):      # (PyTorch's functional type)
        F.conv2d(x, w, stride=2, padding='same', groups=2)
    with pytest.raises(RuntimeError, match='Kernel size'):
        F.conv2d(tape.randn(1, 4, 2, 2), w, groups=2)
    with pytest.raises(RuntimeError, match='dtype'):
        F.conv2d(x.double(), w, groups=2)
    with pytest.raises(RuntimeError, match='bias'):
        F.conv2d(x, w, tape.randn(5), groups=2)


# -- pooling --------------------------------------------------------------------------------
MAXPOOL2D_CASES = [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 2, 7, 6), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((2, 2, 8, 7), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True)),
    ((1, 2, 9, 9), dict(kernel_size=3, stride=1, dilation=2, padding=1)),
    ((2, 1, 5, 5), dict(kernel_size=3, stride=1)),                 # overlapping windows
    ((2, 2, 6, 5), dict(kernel_size=2, stride=3, ceil_mode=True)),
]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('ties', [False, True])
@pytest.mark.parametrize('shape,opts', MAXPOOL2D_CASES)
def test_max_pool2d_matches_torch(shape, opts, ties, dtype):
    x = _rng(7).standard_normal(shape)
    if ties:        # few distinct values: many windows hold their maximum twice
        x = np.round(x)
    _compare(lambda a: F.max_pool2d(a, return_indices=True, **opts),
             lambda a: TF.max_pool2d(a, return_indices=True, **opts), [x], dtype)


@pytest.mark.parametrize('opts', [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                  dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True),
                                  dict(kernel_size=4, stride=3, ceil_mode=True, padding=2)])
def test_max_pool1d_matches_torch(opts):
    x = np.round(_rng(8).standard_normal((2, 3, 11)))
    _compare(lambda a: F.max_pool1d(a, return_indices=True, **opts),
             lambda a: TF.max_pool1d(a, return_indices=True, **opts), [x], np.float64)


def test_max_pool_ties_pick_first_maximum():
    x = tape.ones(1, 1, 4, 4, requires_grad=True)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), [[[[0, 2], [8, 10]]]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0],
                                  [[1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]])


def test_max_pool_nan_and_neg_inf_like_torch():
    x = np.full((1, 1, 4, 4), -np.inf)
    x[0, 0, 0, 1] = np.nan
    x[0, 0, 1, 0] = np.nan
    x[0, 0, 3, 3] = 2.0
    for opts in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)):
        a = F.max_pool2d(tape.tensor(x), return_indices=True, **opts)
        t = TF.max_pool2d(torch.tensor(x), return_indices=True, **opts)
        np.testing.assert_array_equal(a[0].numpy(), t[0].numpy())
        np.testing.assert_array_equal(a[1].numpy(), t[1].numpy())


def test_max_pool_unbatched_and_module():
    x = _rng(9).standard_normal((3, 6, 6))
    _compare(lambda a: tape.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(a),
             lambda a: torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(a), [x], np.float64)
    _compare(lambda a: tape.nn.MaxPool1d(2, return_indices=True)(a),
             lambda a: torch.nn.MaxPool1d(2, return_indices=True)(a), [x[:, 0]], np.float64)


AVGPOOL2D_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), ceil_mode=True),
    dict(kernel_size=2, stride=3, ceil_mode=True),
    dict(kernel_size=3, padding=1, divisor_override=5),
]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('opts', AVGPOOL2D_CASES)
def test_avg_pool2d_matches_torch(opts, dtype):
    x = _rng(10).standard_normal((2, 3, 7, 8))
    _compare(lambda a: F.avg_pool2d(a, **opts), lambda a: TF.avg_pool2d(a, **opts), [x], dtype)


@pytest.mark.parametrize('opts', [dict(kernel_size=3), dict(kernel_size=3, stride=2, padding=1),
                                  dict(kernel_size=2, ceil_mode=True, count_include_pad=False,
                                       padding=1)])
def test_avg_pool1d_matches_torch(opts):
    x = _rng(11).standard_normal((2, 3, 9))
    _compare(lambda a: F.avg_pool1d(a, **opts), lambda a: TF.avg_pool1d(a, **opts), [x],
             np.float64)


@pytest.mark.parametrize('size', [1, (2, 3), (3, None), 5, (4, 7)])
def test_adaptive_avg_pool2d_matches_torch(size):
    x = _rng(12).standard_normal((2, 3, 7, 10))
    for dtype in (np.float32, np.float64):
        _compare(lambda a: F.adaptive_avg_pool2d(a, size),
                 lambda a: TF.adaptive_avg_pool2d(a, size), [x], dtype)
    _compare(lambda a: tape.nn.AdaptiveAvgPool2d(size)(a),
             lambda a: torch.nn.AdaptiveAvgPool2d(size)(a), [x[0]], np.float64)


@pytest.mark.parametrize('fn', [
    lambda a: F.max_pool2d(a, 2, 1),
    lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True),
    lambda a: F.max_pool1d(a[:, :, 0], 2, 1),
    lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    lambda a: F.avg_pool1d(a[:, :, 0], 2),
    lambda a: F.adaptive_avg_pool2d(a, (2, 3)),
])
def test_pool_gradcheck_and_gradgradcheck(fn):
    # distinct values, far apart: finite differences never move a max-pool argmax
    x = tape.tensor(_rng(13).permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) / 10.0,
                    requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_pool_errors():
    x = tape.randn(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match='half'):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match='half'):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match='too small'):
        F.max_pool2d(x, 5)


# -- batch norm -----------------------------------------------------------------------------
def _to_tape_state(module):
    return {k: tape.tensor(v.detach().numpy()) for k, v in module.state_dict().items()}


@pytest.mark.parametrize('kind,shape', [('BatchNorm2d', (4, 3, 5, 5)), ('BatchNorm1d', (6, 3)),
                                        ('BatchNorm1d', (4, 3, 7))])
@pytest.mark.parametrize('kwargs', [{}, dict(momentum=None), dict(momentum=0.3, eps=1e-3),
                                    dict(affine=False), dict(track_running_stats=False)])
def test_batch_norm_train_eval_running_stats(kind, shape, kwargs):
    r = _rng(14)
    tm, am = getattr(torch.nn, kind)(3, **kwargs), getattr(tape.nn, kind)(3, **kwargs)
    if tm.affine:
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            tm.bias.uniform_(-0.5, 0.5)
    am.load_state_dict(_to_tape_state(tm))
    for step in range(4):
        x = (r.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        _compare(am, tm, [x], np.float32, seed=step)
    assert list(am.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(am.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    am.eval()
    tm.eval()
    x = r.standard_normal(shape).astype(np.float32)
    _compare(am, tm, [x], np.float32)
    if tm.track_running_stats:      # eval mode leaves the statistics alone
        np.testing.assert_array_equal(am.num_batches_tracked.numpy(), 4)


def test_batch_norm_input_dim_checks():
    with pytest.raises(ValueError, match='expected 4D input'):
        tape.nn.BatchNorm2d(3)(tape.randn(2, 3))
    with pytest.raises(ValueError, match='expected 2D or 3D input'):
        tape.nn.BatchNorm1d(3)(tape.randn(2, 3, 4, 4))


# -- modules --------------------------------------------------------------------------------
MODULES = [
    ('Conv2d', (1, 8, 3), {}),
    ('Conv2d', (4, 8, (3, 2)), dict(stride=2, padding=(1, 0), dilation=2, groups=2,
                                    bias=False)),
    ('Conv2d', (2, 4, 3), dict(padding='same', padding_mode='reflect')),
    ('Conv2d', (2, 4, 3), dict(padding='valid')),
    ('Conv1d', (3, 6, 5), dict(stride=2, padding=2, groups=3)),
    ('Conv1d', (2, 2, 4), dict(padding='same', padding_mode='circular', dilation=2)),
    ('Conv1d', (2, 2, 3), dict(padding=1, padding_mode='replicate')),
    ('MaxPool2d', (2,), {}),
    ('MaxPool2d', ((3, 2), (2, 1), 1), dict(dilation=1, ceil_mode=True)),
    ('MaxPool1d', (3,), dict(stride=2, padding=1)),
    ('AvgPool2d', (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ('AvgPool1d', (3,), dict(stride=2)),
    ('AdaptiveAvgPool2d', ((1, 1),), {}),
    ('AdaptiveAvgPool2d', (3,), {}),
    ('BatchNorm2d', (8,), {}),
    ('BatchNorm1d', (4,), dict(eps=1e-3, momentum=None, affine=False)),
    ('BatchNorm2d', (4,), dict(track_running_stats=False, bias=False)),
]


@pytest.mark.parametrize('name,args,kwargs', MODULES)
def test_module_repr_and_state_dict_keys(name, args, kwargs):
    am, tm = getattr(tape.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(am) == repr(tm)
    assert list(am.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(am.state_dict()[k].shape) == tuple(v.shape)
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]


@pytest.mark.parametrize('name,args,kwargs', [m for m in MODULES if m[0].startswith('Conv')])
def test_conv_module_forward_from_torch_state(name, args, kwargs):
    am, tm = getattr(tape.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    am.load_state_dict(_to_tape_state(tm))
    nd = 2 if name == 'Conv2d' else 1
    x = _rng(15).standard_normal((2, args[0]) + (9,) * nd).astype(np.float32)
    ya, yt = am(tape.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    ya.sum().backward()
    yt.sum().backward()
    for (n, p), (_, q) in zip(am.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('cls,args', [('Conv2d', (16, 32, 5)), ('Conv1d', (6, 10, 3)),
                                      ('Conv2d', (8, 8, 3, 1, 0, 1, 4))])
def test_conv_default_init_bounds(cls, args):
    """kaiming_uniform(a=sqrt(5)) on the weight and U(-1/sqrt(fan_in), .) on the bias,
    fan_in = in_channels / groups * kernel elements, as in PyTorch."""
    tape.manual_seed(0)
    m = getattr(tape.nn, cls)(*args)
    fan_in = int(np.prod(m.weight.shape[1:]))
    bound = 1 / np.sqrt(fan_in)
    for p in (m.weight, m.bias):
        v = p.detach().numpy()
        assert v.dtype == np.float32
        assert np.abs(v).max() <= bound
        # spread over the interval (U(-b, b) has std b/sqrt(3)): a wrong fan, e.g. one
        # that ignores groups, fails these; the bias has few values, so a looser check
        assert np.abs(v).max() > (0.8 if v.size > 50 else 0.5) * bound
        assert v.std() > (0.45 if v.size > 50 else 0.3) * bound


# -- a small CNN end to end ------------------------------------------------------------------
def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2, ceil_mode=True),
        nn.Flatten(), nn.Linear(16 * 3 * 3, 10))


def test_small_cnn_sgd_steps_match_torch():
    torch.manual_seed(0)
    tm = _cnn(torch.nn)
    am = _cnn(tape.nn)
    assert repr(am) == repr(tm)
    am.load_state_dict(_to_tape_state(tm))
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    aopt = tape.optim.SGD(am.parameters(), lr=0.1, momentum=0.9)
    r = _rng(16)
    tl, al = [], []
    # one batch over and over: the loss must then fall
    x = r.standard_normal((8, 1, 12, 12)).astype(np.float32)
    y = r.integers(0, 10, 8)
    for _ in range(5):
        topt.zero_grad()
        loss = TF.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        topt.step()
        tl.append(loss.item())
        aopt.zero_grad()
        loss = F.cross_entropy(am(tape.tensor(x)), tape.tensor(y))
        loss.backward()
        aopt.step()
        al.append(loss.item())
    np.testing.assert_allclose(al, tl, rtol=1e-5, atol=1e-5)
    assert tl[-1] < tl[0]           # it learnt something: the steps were not no-ops
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(am.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-5)
    am.eval()
    tm.eval()
    x = r.standard_normal((3, 1, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(am(tape.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
