"""F.batch_norm's one-node form (tape/nn/_batch_norm.py, compiler/bn_kernels.py)
against PyTorch: values, gradients and running statistics over (N, C), (N, C, L),
(N, C, H, W) and (N, C, D, H, W) inputs (both kernel layouts: S below and above
64), dtypes, weight/bias combinations, training and eval, the BatchNorm modules,
non-contiguous input, NaN/inf, a large mean, create_graph agreement and
gradcheck / gradgradcheck in float64."""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")

SHAPES = [(16, 5), (4, 6, 7), (3, 4, 65), (8, 3, 32, 32), (6, 4, 5, 5), (2, 3, 4, 5, 6),
          (2, 2, 130)]


def _run(lib, Fm, xn, wn, bn, gn, rmn, rvn, training, eps=1e-5, momentum=0.1):
    x = lib.tensor(xn, requires_grad=True)
    w = None if wn is None else lib.tensor(wn, requires_grad=True)
    b = None if bn is None else lib.tensor(bn, requires_grad=True)
    rm = None if rmn is None else lib.tensor(rmn.copy())
    rv = None if rvn is None else lib.tensor(rvn.copy())
    y = Fm.batch_norm(x, rm, rv, w, b, training, momentum, eps)
    (y * lib.tensor(gn)).sum().backward()
    return [y.detach().numpy(), x.grad.numpy()] + \
        [p.grad.numpy() for p in (w, b) if p is not None] + \
        [r.numpy() for r in (rm, rv) if r is not None]


def _case(shape, dtype, hw, hb, seed=0, scale=3.0, shift=1.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    xn = (rng.standard_normal(shape) * scale + shift).astype(dtype)
    wn = rng.standard_normal(c).astype(dtype) if hw else None
    bn = rng.standard_normal(c).astype(dtype) if hb else None
    gn = rng.standard_normal(shape).astype(dtype)
    rmn = rng.standard_normal(c).astype(dtype)
    rvn = (rng.random(c) + 0.5).astype(dtype)
    return xn, wn, bn, gn, rmn, rvn


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('hw,hb', [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize('training', [True, False])
def test_matches_torch(dtype, shape, hw, hb, training):
    xn, wn, bn, gn, rmn, rvn = _case(shape, dtype, hw, hb)
    got = _run(tape, TF, xn, wn, bn, gn, rmn, rvn, training)
    want = _run(torch, torch.nn.functional, xn, wn, bn, gn, rmn, rvn, training)
    for g, t in zip(got, want):
        assert g.dtype == t.dtype and g.shape == t.shape
        np.testing.assert_allclose(g, t, **_tol(dtype))


@pytest.mark.parametrize('shape', [(8, 3, 32, 32), (16, 5)])
def test_no_running_stats_and_one_record(shape):
    xn, wn, bn, gn, _, _ = _case(shape, np.float32, True, True)
    got = _run(tape, TF, xn, wn, bn, gn, None, None, True)
    want = _run(torch, torch.nn.functional, xn, wn, bn, gn, None, None, True)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, **_tol(np.float32))
    x = tape.tensor(xn, requires_grad=True)
    y = TF.batch_norm(x, None, None, tape.tensor(wn), None, training=True)
    assert y.grad_fn.name() == 'NativeBatchNormBackward0'


@pytest.mark.parametrize('momentum', [0.1, 0.5])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_running_stats_over_steps(momentum, dtype):
    rng = np.random.default_rng(5)
    xs = [(rng.standard_normal((6, 4, 9)) * (k + 1) + k).astype(dtype) for k in range(5)]
    res = []
    for lib, Fm in ((tape, TF), (torch, torch.nn.functional)):
        rm = lib.zeros(4, dtype=getattr(lib, np.dtype(dtype).name))
        rv = lib.ones(4, dtype=getattr(lib, np.dtype(dtype).name))
        for xn in xs:
            Fm.batch_norm(lib.tensor(xn), rm, rv, training=True, momentum=momentum)
        res.append((rm.numpy().copy(), rv.numpy().copy()))
    for g, t in zip(*res):
        np.testing.assert_allclose(g, t, **_tol(dtype))


@pytest.mark.parametrize('mod,shape', [('BatchNorm1d', (8, 5)), ('BatchNorm1d', (8, 5, 7)),
                                       ('BatchNorm2d', (4, 3, 9, 9)),
                                       ('BatchNorm3d', (2, 3, 4, 5, 6))])
@pytest.mark.parametrize('momentum', [0.1, None])
def test_modules_train_then_eval(mod, shape, momentum):
    rng = np.random.default_rng(7)
    xs = [(rng.standard_normal(shape) * 2 + 0.5).astype(np.float32) for _ in range(4)]
    g = rng.standard_normal(shape).astype(np.float32)
    res = []
    for lib in (tape, torch):
        lib.manual_seed(0)
        m = getattr(lib.nn, mod)(shape[1], momentum=momentum)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, shape[1]).astype(np.float32)))
            m.bias.copy_(lib.tensor(np.linspace(-1, 1, shape[1]).astype(np.float32)))
        outs = []
        for xn in xs:
            x = lib.tensor(xn, requires_grad=True)
            y = m(x)
            (y * lib.tensor(g)).sum().backward()
            outs += [y.detach().numpy(), x.grad.numpy()]
        if lib is tape:
            assert y.grad_fn.name() == 'NativeBatchNormBackward0'
        m.eval()
        x = lib.tensor(xs[0], requires_grad=True)
        y = m(x)
        (y * lib.tensor(g)).sum().backward()
        outs += [y.detach().numpy(), x.grad.numpy(), m.weight.grad.numpy(), m.bias.grad.numpy(),
                 m.running_mean.numpy(), m.running_var.numpy(),
                 np.asarray(m.num_batches_tracked.numpy())]
        res.append(outs)
    for a, t in zip(*res):
        np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-4)


def test_noncontiguous_input():
    rng = np.random.default_rng(4)
    xn = rng.standard_normal((5, 40, 3, 70)).astype(np.float32)
    for training in (True, False):
        res = []
        for lib, Fm in ((tape, TF), (torch, torch.nn.functional)):
            x = lib.tensor(xn, requires_grad=True)
            w = lib.tensor(np.linspace(-1, 1, 5).astype(np.float32), requires_grad=True)
            xt = x.permute(1, 0, 3, 2)[:, :, ::2]       # (40, 5, 35, 3), strided
            y = Fm.batch_norm(xt, lib.zeros(5), lib.ones(5), w, None, training)
            (y * y).sum().backward()
            res.append((y.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
        for g, t in zip(*res):
            np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('shape', [(4, 3, 100), (40, 3)])
def test_large_mean_float32(shape):
    xn, wn, bn, gn, rmn, rvn = _case(shape, np.float32, True, True, scale=0.5, shift=1000.0)
    got = _run(tape, TF, xn, wn, bn, gn, rmn, rvn, True)
    want = _run(torch, torch.nn.functional, xn, wn, bn, gn, rmn, rvn, True)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-3, atol=2e-3)


def test_constant_channel():
    xn = np.full((4, 2, 70), 2.5, np.float32)
    xn[:, 1] = np.random.default_rng(2).standard_normal((4, 70))
    gn = np.random.default_rng(3).standard_normal((4, 2, 70)).astype(np.float32)
    w = np.array([0.5, 2.0], np.float32)
    got = _run(tape, TF, xn, w, w, gn, np.zeros(2, np.float32), np.ones(2, np.float32), True)
    want = _run(torch, torch.nn.functional, xn, w, w, gn, np.zeros(2, np.float32),
                np.ones(2, np.float32), True)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('shape,at', [((3, 2, 80), (1, 0, 5)), ((3, 2, 80), (0, 0, 0)),
                                      ((9, 3), (4, 1)), ((9, 3), (0, 1))])
@pytest.mark.parametrize('training', [True, False])
def test_nonfinite(bad, shape, at, training):
    xn = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    xn[at] = bad
    gn = np.ones(shape, np.float32)
    rm, rv = np.zeros(shape[1], np.float32), np.ones(shape[1], np.float32)
    got = _run(tape, TF, xn, None, None, gn, rm, rv, training)
    want = _run(torch, torch.nn.functional, xn, None, None, gn, rm, rv, training)
    for g, t in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(t))
        np.testing.assert_array_equal(np.isinf(g), np.isinf(t))
        np.testing.assert_allclose(np.nan_to_num(g, posinf=0, neginf=0),
                                   np.nan_to_num(t, posinf=0, neginf=0), rtol=1e-5, atol=2e-5)


def test_inplace_change_of_input_raises():
    x = tape.randn(4, 3, 8, requires_grad=True)
    a = x * 1.0
    y = TF.batch_norm(a, None, None, training=True)
    with tape.no_grad():
        a.mul_(2)
    with pytest.raises(RuntimeError):
        y.sum().backward()


@pytest.mark.parametrize('training', [True, False])
@pytest.mark.parametrize('hw,hb', [(False, False), (True, True), (True, False), (False, True)])
@pytest.mark.parametrize('shape', [(4, 2, 3), (5, 3)])
def test_gradcheck_gradgradcheck(training, hw, hb, shape):
    rng = np.random.default_rng(11)
    x = tape.tensor(rng.standard_normal(shape), requires_grad=True)
    c = shape[1]
    w = tape.tensor(rng.standard_normal(c), requires_grad=True) if hw else None
    b = tape.tensor(rng.standard_normal(c), requires_grad=True) if hb else None
    rm = tape.tensor(rng.standard_normal(c))
    rv = tape.tensor(rng.random(c) + 0.5)
    inputs = tuple(p for p in (x, w, b) if p is not None)

    def f(*args):
        it = iter(args)
        xx = next(it)
        ww = next(it) if hw else None
        bb = next(it) if hb else None
        # (running statistics left out in training: gradcheck calls f many times)
        return TF.batch_norm(xx, None if training else rm, None if training else rv,
                             ww, bb, training)
    assert tape.autograd.gradcheck(f, inputs)
    assert tape.autograd.gradgradcheck(f, inputs)


@pytest.mark.parametrize('training', [True, False])
@pytest.mark.parametrize('shape', [(6, 3, 70), (7, 4)])
def test_create_graph_matches_fast_path_and_torch(training, shape):
    xn, wn, bn, gn, rmn, rvn = _case(shape, np.float64, True, True, seed=3)
    vn = np.random.default_rng(9).standard_normal(shape)
    firsts, seconds = [], []
    for lib, Fm in ((tape, TF), (torch, torch.nn.functional)):
        for create in ((False, True) if lib is tape else (True,)):
            x = lib.tensor(xn, requires_grad=True)
            w = lib.tensor(wn, requires_grad=True)
            b = lib.tensor(bn, requires_grad=True)
            y = Fm.batch_norm(x, lib.tensor(rmn), lib.tensor(rvn), w, b, training)
            gs = lib.autograd.grad((y * lib.tensor(gn)).sum(), (x, w, b), create_graph=create)
            firsts.append([g.detach().numpy() for g in gs])
            if create:
                h = lib.autograd.grad((gs[0] * lib.tensor(vn)).sum(), (x, w),
                                      allow_unused=True)
                seconds.append([np.zeros(p.shape) if hh is None else hh.numpy()
                                for hh, p in zip(h, (xn, wn))])
    for other in firsts[1:]:
        for g, t in zip(firsts[0], other):
            np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-11)
    for g, t in zip(*seconds):
        np.testing.assert_allclose(g, t, rtol=1e-9, atol=1e-10)


def test_fallbacks_keep_composite_behaviour():
    x = tape.randn(4, 3, 5, requires_grad=True)
    # float16: the composite
    y = TF.batch_norm(x.half().detach(), None, None, training=True)
    assert y.dtype == tape.float16
    # a weight of another dtype raises, as PyTorch's CPU batch_norm ("mixed dtype")
    with pytest.raises(RuntimeError, match='mixed dtype'):
        TF.batch_norm(x, None, None, tape.ones(3, dtype=tape.float64), training=True)
    # float16 input with float32 weights: computed in float32, the result float16
    y = TF.batch_norm(x.half().detach(), None, None, tape.ones(3), training=True)
    assert y.dtype == tape.float16
    # eval with running statistics that require grad: differentiated through, as before
    rm = tape.zeros(3, requires_grad=True)
    y = TF.batch_norm(x, rm, tape.ones(3), training=False)
    y.sum().backward()
    assert rm.grad is not None
    # while tape.jit traces, the composite (its records replay in the kernel)
    f = tape.jit(lambda a: TF.batch_norm(a, None, None, training=True).sum())
    a = tape.randn(4, 3, 5)
    np.testing.assert_allclose(f(a).item(), TF.batch_norm(a, None, None, training=True)
                               .sum().item(), atol=1e-5)


def test_errors_kept():
    x = tape.randn(4, 3, 5)
    with pytest.raises(ValueError, match='Expected more than 1 value per channel'):
        TF.batch_norm(tape.randn(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match='running_mean must be defined'):
        TF.batch_norm(x, None, None, training=False)
    with pytest.raises(RuntimeError, match='weight should contain 3 elements not 4'):
        TF.batch_norm(x, None, None, tape.ones(4), training=True)
    with pytest.raises(RuntimeError, match='running_var should contain 3 elements not 2'):
        TF.batch_norm(x, tape.zeros(3), tape.ones(2), training=True)
    with pytest.raises(NotImplementedError):
        TF.batch_norm(tape.ones(4, 3, dtype=tape.int64), None, None, training=True)
    with pytest.raises(TypeError):
        TF.batch_norm(x, np.zeros(3), None, training=True)


@pytest.mark.filterwarnings('ignore::DeprecationWarning')     # (torch's forward_ad import)
def test_forward_ad_tangent_matches_torch():
    import tape.autograd.forward_ad as fw
    import torch.autograd.forward_ad as tfw
    xn = np.random.default_rng(0).standard_normal((4, 3, 5))
    tn = np.random.default_rng(1).standard_normal((4, 3, 5))
    wn = np.linspace(0.5, 1.5, 3)
    res = []
    for lib, fwm, Fm in ((tape, fw, TF), (torch, tfw, torch.nn.functional)):
        with fwm.dual_level():
            d = fwm.make_dual(lib.tensor(xn), lib.tensor(tn))
            out = Fm.batch_norm(d, None, None, lib.tensor(wn), None, training=True)
            res.append(fwm.unpack_dual(out).tangent.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10, atol=1e-12)
