"""The shortcut paths of layer_norm, norm (2-norm of all elements), max/min along
one dim, mse_loss and the softmax/log_softmax wrappers, against PyTorch: values,
gradients (and double backward), graph node names, float32 and float64, negative
dims, keepdim, NaN, no_grad, empty inputs and tape.jit tracing."""
import warnings

import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

F = tape.nn.functional
TF = torch.nn.functional
DTYPES = ('float32', 'float64')


def _tol(dt):
    return dict(rtol=2e-5, atol=2e-6) if dt == 'float32' else dict(rtol=1e-11, atol=1e-12)


def _pair(shape, dt, seed=0, rg=True):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dt)
    return tape.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg)


def _np(t):
    return t.detach().numpy()


def _close(a, b, dt):
    np.testing.assert_allclose(_np(a), _np(b), **_tol(dt))


def _names(fn):
    """The node names of a grad_fn's graph, depth first."""
    out = []
    if fn is None:
        return out
    out.append(type(fn).__name__)
    for f, _ in fn.next_functions:
        out.extend(_names(f))
    return out


# ------------------------------------------------------------ layer_norm
@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('shape,ns', [((32, 10), (10,)), ((4, 3, 5), (3, 5)), ((7,), (7,))])
@pytest.mark.parametrize('affine', ['none', 'both', 'weight'])
def test_layer_norm(dt, shape, ns, affine):
    x, xt = _pair(shape, dt)
    w = wt = b = bt = None
    if affine in ('both', 'weight'):
        w, wt = _pair(ns, dt, 1)
    if affine == 'both':
        b, bt = _pair(ns, dt, 2)
    for _ in range(2):          # the second call takes the cached checks
        y = F.layer_norm(x, ns, w, b)
        yt = TF.layer_norm(xt, ns, wt, bt)
        _close(y, yt, dt)
        assert type(y.grad_fn).__name__ == 'NativeLayerNormBackward0'
        assert _names(y.grad_fn) == _names(yt.grad_fn)
        g = np.random.default_rng(3).standard_normal(shape).astype(dt)
        params = [p for p in (x, w, b) if p is not None]
        tparams = [p for p in (xt, wt, bt) if p is not None]
        gs = tape.autograd.grad(y, params, tape.tensor(g))
        gts = torch.autograd.grad(yt, tparams, torch.tensor(g))
        for p, q in zip(gs, gts):
            _close(p, q, dt)


@pytest.mark.parametrize('dt', DTYPES)
def test_layer_norm_backward_accumulates_and_double_backward(dt):
    x, xt = _pair((6, 8), dt)
    w, wt = _pair((8,), dt, 1)
    b, bt = _pair((8,), dt, 2)
    (F.layer_norm(x, (8,), w, b) ** 2).sum().backward()
    (TF.layer_norm(xt, (8,), wt, bt) ** 2).sum().backward()
    for p, q in ((x, xt), (w, wt), (b, bt)):
        _close(p.grad, q.grad, dt)
    gx, gw = tape.autograd.grad((F.layer_norm(x, (8,), w, b) ** 3).sum(), (x, w),
                                create_graph=True)
    gxt, gwt = torch.autograd.grad((TF.layer_norm(xt, (8,), wt, bt) ** 3).sum(), (xt, wt),
                                   create_graph=True)
    _close(gx, gxt, dt)
    _close(gw, gwt, dt)
    h = tape.autograd.grad((gx * gx).sum() + gw.sum(), (x, w, b))
    ht = torch.autograd.grad((gxt * gxt).sum() + gwt.sum(), (xt, wt, bt))
    for p, q in zip(h, ht):
        np.testing.assert_allclose(_np(p), _np(q), rtol=1e-3 if dt == 'float32' else 1e-9,
                                   atol=1e-3 if dt == 'float32' else 1e-9)


def test_layer_norm_no_grad_frozen_params_and_errors():
    x, xt = _pair((5, 4), 'float32')
    w, wt = _pair((4,), 'float32', 1, rg=False)
    with tape.no_grad():
        y = F.layer_norm(x, (4,), w)
    assert not y.requires_grad and y.grad_fn is None
    _close(y, TF.layer_norm(xt, (4,), wt), 'float32')
    # only the weight requires grad
    w2, wt2 = _pair((4,), 'float32', 1)
    x2, xt2 = _pair((5, 4), 'float32', rg=False)
    F.layer_norm(x2, (4,), w2).sum().backward()
    TF.layer_norm(xt2, (4,), wt2).sum().backward()
    _close(w2.grad, wt2.grad, 'float32')
    # the graph freed after a backward
    y = F.layer_norm(x, (4,), w)
    y.sum().backward()
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y.sum().backward()
    # the input changed in place after the forward
    x3 = tape.randn(5, 4, requires_grad=True)
    h = x3 * 1.0
    y = F.layer_norm(h, (4,))
    with tape.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()
    with pytest.raises(RuntimeError, match='Given normalized_shape'):
        F.layer_norm(x, (5,))
    with pytest.raises(RuntimeError, match='Expected weight to be of same shape'):
        F.layer_norm(x, (4,), tape.ones(3))


def test_layer_norm_empty_and_torch_api():
    x = tape.zeros(0, 4, requires_grad=True)
    assert F.layer_norm(x, (4,)).shape == (0, 4)
    x, xt = _pair((3, 4), 'float64')
    _close(tape.layer_norm(x, [4], eps=1e-3), torch.layer_norm(xt, [4], eps=1e-3), 'float64')


# ------------------------------------------------------------------- norm
@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('shape', [(32, 10), (64, 256), (7,), (2, 3, 4)])
@pytest.mark.parametrize('keepdim', [False, True])
def test_norm_all(dt, shape, keepdim):
    x, xt = _pair(shape, dt)
    for y, yt in ((x.norm(dim=None, keepdim=keepdim),
                   torch.linalg.vector_norm(xt, keepdim=keepdim)),
                  (tape.linalg.vector_norm(x, 2.0, keepdim=keepdim),
                   torch.linalg.vector_norm(xt, 2.0, keepdim=keepdim)),
                  (tape.norm(x, 'fro', keepdim=keepdim), torch.norm(xt, 'fro', keepdim=keepdim))):
        assert tuple(y.shape) == tuple(yt.shape) and y.dtype == x.dtype
        _close(y, yt, dt)
        assert type(y.grad_fn).__name__ == 'LinalgVectorNormBackward0'
        g, = tape.autograd.grad(y.sum() * 3, x)
        gt, = torch.autograd.grad(yt.sum() * 3, xt)
        _close(g, gt, dt)


@pytest.mark.parametrize('dt', DTYPES)
def test_norm_double_backward_zero_and_no_grad(dt):
    x, xt = _pair((5, 3), dt)
    g, = tape.autograd.grad(x.norm() ** 3, x, create_graph=True)
    gt, = torch.autograd.grad(xt.norm() ** 3, xt, create_graph=True)
    _close(g, gt, dt)
    h, = tape.autograd.grad((g * g).sum(), x)
    ht, = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(_np(h), _np(ht), rtol=1e-4 if dt == 'float32' else 1e-10)
    z = tape.zeros(4, dtype=getattr(tape, dt), requires_grad=True)
    z.norm().backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros(4))
    with tape.no_grad():
        assert not x.norm().requires_grad
    assert float(tape.zeros(0, 3).norm()) == 0.0
    n = tape.tensor([1.0, float('nan')], requires_grad=True).norm()
    assert np.isnan(float(n.detach()))


# --------------------------------------------------------- max/min along a dim
@pytest.mark.parametrize('dt', DTYPES + ('int64',))
@pytest.mark.parametrize('shape', [(32, 10), (7,), (2, 3, 4), (3, 1)])
@pytest.mark.parametrize('op', ['max', 'min'])
@pytest.mark.parametrize('keepdim', [False, True])
def test_max_min_dim(dt, shape, op, keepdim):
    a = np.random.default_rng(5).standard_normal(shape)
    if dt == 'int64':
        a = (a * 2).round()         # ties
    a = a.astype(dt)
    if dt != 'int64' and a.size > 3:
        a.reshape(-1)[2] = np.nan   # NaN wins, and its index is returned
    rg = dt != 'int64'
    for dim in range(-len(shape), len(shape)):
        x = tape.tensor(a, requires_grad=rg)
        xt = torch.tensor(a, requires_grad=rg)
        r = getattr(x, op)(dim, keepdim=keepdim)
        rt = getattr(xt, op)(dim, keepdim=keepdim)
        np.testing.assert_array_equal(_np(r.values), _np(rt.values))
        np.testing.assert_array_equal(r.indices.numpy(), rt.indices.numpy())
        assert r.indices.dtype == tape.int64 and tuple(r.values.shape) == tuple(rt.values.shape)
        r2 = getattr(tape, op)(x, dim, keepdim)
        np.testing.assert_array_equal(r2.indices.numpy(), rt.indices.numpy())
        if rg:
            assert type(r.values.grad_fn).__name__ == type(rt.values.grad_fn).__name__
            g = np.random.default_rng(6).standard_normal(tuple(rt.values.shape)).astype(dt)
            r.values.backward(tape.tensor(g))
            rt.values.backward(torch.tensor(g))
            np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_max_dim_strided_double_backward_and_errors():
    a = np.random.default_rng(7).standard_normal((4, 5))
    x = tape.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    r, rt = x.t().max(1), xt.t().max(1)
    np.testing.assert_array_equal(r.indices.numpy(), rt.indices.numpy())
    g, = tape.autograd.grad((r.values ** 2).sum(), x, create_graph=True)
    gt, = torch.autograd.grad((rt.values ** 2).sum(), xt, create_graph=True)
    np.testing.assert_allclose(_np(g), _np(gt))
    h, = tape.autograd.grad(g.sum(), x)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(_np(h), _np(ht))
    with tape.no_grad():
        assert not x.max(0).values.requires_grad
    idx = x.max(1).indices
    idx += 1                        # the indices are the caller's own array
    np.testing.assert_array_equal(x.max(1).indices.numpy(), xt.max(1).indices.numpy())
    with pytest.raises(IndexError, match='Dimension out of range'):
        x.max(2)
    with pytest.raises(IndexError, match='Expected reduction dim 1 to have non-zero size'):
        tape.zeros(3, 0).max(1)
    e = tape.zeros(0, 3).max(1)
    assert tuple(e.values.shape) == (0,) and tuple(e.indices.shape) == (0,)


# ------------------------------------------------------------------ mse_loss
@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('shape', [(32, 10), (64, 256), (3,)])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('target_rg', [False, True])
def test_mse_loss(dt, shape, reduction, target_rg):
    x, xt = _pair(shape, dt)
    y, yt = _pair(shape, dt, 1, rg=target_rg)
    out = F.mse_loss(x, y, reduction=reduction)
    ot = TF.mse_loss(xt, yt, reduction=reduction)
    _close(out, ot, dt)
    assert out.dtype == x.dtype and tuple(out.shape) == tuple(ot.shape)
    assert out.grad_fn.name() == ot.grad_fn.name() == 'MseLossBackward0'
    assert len(out.grad_fn.next_functions) == len(ot.grad_fn.next_functions) == 2
    ins = (x, y) if target_rg else (x,)
    tins = (xt, yt) if target_rg else (xt,)
    gs = tape.autograd.grad(out.sum() * 2, ins, create_graph=True)
    gts = torch.autograd.grad(ot.sum() * 2, tins, create_graph=True)
    for p, q in zip(gs, gts):
        _close(p, q, dt)
    hs = tape.autograd.grad((gs[0] ** 2).sum(), ins)
    hts = torch.autograd.grad((gts[0] ** 2).sum(), tins)
    for p, q in zip(hs, hts):
        _close(p, q, dt)


def test_mse_loss_no_grad_empty_and_broadcast():
    x, xt = _pair((4, 3), 'float32')
    y, yt = _pair((4, 3), 'float32', 1)
    with tape.no_grad():
        out = F.mse_loss(x, y)
    assert not out.requires_grad
    _close(out, TF.mse_loss(xt, yt), 'float32')
    with np.errstate(all='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore')     # (NumPy's mean of an empty array)
        assert np.isnan(float(F.mse_loss(tape.zeros(0), tape.zeros(0))))
    with pytest.warns(UserWarning, match='different to the input size'):
        out = F.mse_loss(x, tape.ones(3))
    with pytest.warns(UserWarning, match='different to the input size'):
        ot = TF.mse_loss(xt, torch.ones(3))
    _close(out, ot, 'float32')
    with pytest.raises(RuntimeError, match='must match the size'):
        F.mse_loss(x, tape.ones(5))
    # mixed dtypes take the general path, which promotes as PyTorch does
    z = tape.tensor(np.ones((4, 3)))
    out = F.mse_loss(x, z)
    ot = TF.mse_loss(xt, torch.ones(4, 3, dtype=torch.float64))
    assert _np(out).dtype == _np(ot).dtype
    _close(out, ot, 'float32')


# ------------------------------------------------------ softmax wrappers
@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('fn', ['softmax', 'log_softmax'])
def test_softmax_wrappers(dt, fn):
    x, xt = _pair((3, 4, 5), dt)
    for dim in (-3, -1, 0, 1, 2):
        y = getattr(F, fn)(x, dim)
        yt = getattr(TF, fn)(xt, dim)
        _close(y, yt, dt)
        assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__
        g, = tape.autograd.grad((y * y).sum(), x)
        gt, = torch.autograd.grad((yt * yt).sum(), xt)
        _close(g, gt, dt)
    with pytest.raises(IndexError, match='Dimension out of range'):
        getattr(F, fn)(x, 3)
    with pytest.raises(NotImplementedError, match='not implemented for'):
        getattr(F, fn)(tape.tensor([1, 2]), 0)
    _close(getattr(F, fn)(x, -1, dtype=tape.float64), getattr(TF, fn)(xt, -1, dtype=torch.float64),
           dt)
    _close(getattr(F, fn)(tape.tensor(2.0), 0), getattr(TF, fn)(torch.tensor(2.0), 0), dt)
    with tape.no_grad():
        assert not getattr(F, fn)(x, 1).requires_grad


# ------------------------------------------------------------ tape.jit
def test_jit_tracing_takes_the_composites():
    rng = np.random.default_rng(9)
    x = tape.tensor(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
    w = tape.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    y = tape.tensor(rng.standard_normal((6, 5)).astype(np.float32))

    def body(x, w, y):
        return (F.layer_norm(x, (5,), w).sum() + x.norm() + F.mse_loss(x, y)
                + F.mse_loss(x, y, reduction='sum') + F.softmax(x, -1)[:, 0].sum()
                + F.log_softmax(x, 1).sum() + tape.linalg.vector_norm(x))
    fj = tape.jit(body)
    for _ in range(3):
        e = body(x, w, y)
        ge = tape.autograd.grad(e, (x, w))
        j = fj(x, w, y)
        gj = tape.autograd.grad(j, (x, w))
        np.testing.assert_allclose(_np(j), _np(e), rtol=1e-5)
        for p, q in zip(gj, ge):
            np.testing.assert_allclose(_np(p), _np(q), rtol=1e-4, atol=1e-5)
        x = tape.tensor(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
