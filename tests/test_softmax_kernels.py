"""softmax, log_softmax and attention's softmax through the row kernels of
compiler/softmax_kernels.py (last dim of a C-contiguous array) and through the
NumPy code (other dims and layouts): values, dtypes and gradients against
PyTorch, NaN/inf/-inf rows, masked and safe attention rows, first and second
order."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape import nn

torch = pytest.importorskip('torch')
TF = torch.nn.functional

TOL = {'float32': 2e-6, 'float64': 1e-12}
OPS = ['softmax', 'log_softmax']


def _close(a, b, tol, what=''):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                               equal_nan=True, err_msg=what)


def _both(op, x, dim, g):
    """(tape's y, x.grad) and (torch's) for y = op(x, dim), y.backward(g)."""
    xt = tape.tensor(x, requires_grad=True)
    yt = getattr(F, op)(xt, dim)
    yt.backward(tape.tensor(g))
    xT = torch.tensor(x, requires_grad=True)
    yT = getattr(TF, op)(xT, dim)
    yT.backward(torch.tensor(g))
    return (yt, xt.grad), (yT.detach().numpy(), xT.grad.numpy())


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('shape', [(32, 10), (64, 1000), (8, 4, 16, 16), (5, 1), (1, 17),
                                   (7,), (2, 3, 33), (3, 9)])
def test_values_and_grads_match_torch(shape, op, dt):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    for dim in range(-1, len(shape)):
        (y, gx), (yT, gxT) = _both(op, x, dim, g)
        assert y.dtype == getattr(tape, dt) and gx.dtype == getattr(tape, dt)
        _close(y.detach().numpy(), yT, TOL[dt], f'{op} {shape} dim {dim}')
        _close(gx.numpy(), gxT, 10 * TOL[dt], f'{op} grad {shape} dim {dim}')


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
def test_non_contiguous_input_and_gradient(op, dt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 9)).astype(dt).T          # last dim strided
    g = rng.standard_normal((9, 12)).astype(dt)
    (y, gx), (yT, gxT) = _both(op, x, -1, g)
    _close(y.detach().numpy(), yT, TOL[dt])
    _close(gx.numpy(), gxT, 10 * TOL[dt])
    # a broadcast (stride 0) upstream gradient, as .sum().backward() sends
    xt = tape.tensor(np.ascontiguousarray(x), requires_grad=True)
    (getattr(F, op)(xt, -1) * 1.0).sum().backward()
    xT = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    (getattr(TF, op)(xT, -1) * 1.0).sum().backward()
    _close(xt.grad.numpy(), xT.grad.numpy(), 10 * TOL[dt])


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('n', [3, 8, 19])
def test_nan_and_inf_rows_as_torch(op, dt, n):
    inf, nan = np.inf, np.nan
    x = np.zeros((8, n), dt)
    x[0] = -inf                         # all -inf: NaN
    x[1, 1] = inf                       # a +inf: NaN
    x[2, 2] = nan                       # a NaN: NaN row
    x[3, :n - 1] = -inf                 # one finite entry: one-hot
    x[4, ::2] = -inf
    x[5] = 1e30
    x[6] = np.arange(n) * 50.0          # large spread: exps underflow
    x[7, -1] = inf
    g = np.random.default_rng(n).standard_normal((8, n)).astype(dt)
    # no floating-point warning escapes (underflow: NumPy's default ignores it)
    with np.errstate(all='raise', under='ignore'):
        (y, gx), (yT, gxT) = _both(op, x, -1, g)
    _close(y.detach().numpy(), yT, TOL[dt])
    _close(gx.numpy(), gxT, 10 * TOL[dt])
    # the other dim (NumPy code) agrees as well
    (y0, gx0), (yT0, gxT0) = _both(op, np.ascontiguousarray(x.T), 0, np.ascontiguousarray(g.T))
    _close(y0.detach().numpy(), yT0, TOL[dt])
    _close(gx0.numpy(), gxT0, 10 * TOL[dt])


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('dim', [-1, 0])
def test_gradcheck_and_gradgradcheck(op, dim):
    x = np.random.default_rng(2).standard_normal((3, 4, 5))
    w = tape.tensor(np.arange(60.0).reshape(3, 4, 5))

    def f(a):
        return getattr(F, op)(a, dim) * w
    assert tape.autograd.gradcheck(f, (tape.tensor(x, requires_grad=True),))
    assert tape.autograd.gradgradcheck(f, (tape.tensor(x, requires_grad=True),))


@pytest.mark.parametrize('op', OPS)
def test_second_order_matches_torch(op):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 7))
    w = rng.standard_normal((6, 7))
    xt = tape.tensor(x, requires_grad=True)
    gt, = tape.autograd.grad((getattr(F, op)(xt, -1) * tape.tensor(w)).sum(), xt,
                             create_graph=True)
    (gt ** 2).sum().backward()
    xT = torch.tensor(x, requires_grad=True)
    gT, = torch.autograd.grad((getattr(TF, op)(xT, -1) * torch.tensor(w)).sum(), xT,
                              create_graph=True)
    (gT ** 2).sum().backward()
    _close(gt.detach().numpy(), gT.detach().numpy(), 1e-12)
    _close(xt.grad.numpy(), xT.grad.numpy(), 1e-10)


# -- the kernels themselves, against NumPy ------------------------------------------------
def _kernels():
    import compiler.softmax_kernels as k
    return k


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('safe', [False, True])
@pytest.mark.parametrize('c', [1, 7, 8, 9, 16, 17, 100])
def test_shift_and_normalize_kernels(c, safe, dt):
    k = _kernels()
    rng = np.random.default_rng(c)
    x = rng.standard_normal((5, c)).astype(dt)
    x[1] = -np.inf
    x[2, c // 2] = -np.inf
    sc = 0.37
    e = np.empty_like(x)
    k.shift(x, e, sc, safe)
    with np.errstate(all='ignore'):
        xs = x * x.dtype.type(sc)
        m = xs.max(-1, keepdims=True)
        if safe:
            m[np.isneginf(m)] = 0.0
        ref = xs - m
    np.testing.assert_array_equal(e, ref)              # the same rounding as NumPy's
    np.exp(e, out=e)
    k.normalize(e, safe)
    with np.errstate(all='ignore'):
        ex = np.exp(ref)
        den = ex.sum(-1, keepdims=True)
        if safe:
            den[den == 0] = 1.0
        ref = ex / den
    _close(e, ref, TOL[dt])
    assert e.dtype == np.dtype(dt)
    if safe:
        assert (e[1] == 0).all()
    else:
        assert np.isnan(e[1]).all()


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('c', [1, 7, 8, 9, 33])
def test_backward_kernels_in_place(c, dt):
    k = _kernels()
    rng = np.random.default_rng(c)
    y = rng.random((4, c)).astype(dt)
    g = rng.standard_normal((4, c)).astype(dt)
    ref = y * (g - (g * y).sum(-1, keepdims=True))
    out = g.copy()
    k.softmax_backward(y, out, out)                    # attention's ds, in place
    _close(out, ref, 10 * TOL[dt])
    ey = np.exp(-y)
    ref = g - ey * g.sum(-1, keepdims=True)
    k.log_softmax_backward(g, ey)
    _close(ey, ref, 10 * TOL[dt])


# -- attention -----------------------------------------------------------------------------
@pytest.mark.parametrize('dt', ['float32', 'float64'])
def test_sdpa_scores_with_nan_and_masked_rows(dt):
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 5, 8)).astype(dt) for _ in range(3))
    q[0, 1, 2, 3] = np.nan                             # a NaN score row
    mask = rng.random((5, 5)) > 0.4
    mask[3] = False                                    # a query that sees no key
    mask[:, 0] = True
    mask[3, 0] = False
    out = []
    for lib, Fn in ((tape, F), (torch, TF)):
        ts = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        o = Fn.scaled_dot_product_attention(*ts, attn_mask=lib.tensor(mask), scale=0.3)
        o.backward(lib.tensor(np.ones(o.shape, dt)))
        out.append([np.asarray(o.detach().numpy())] + [t.grad.numpy() for t in ts])
    for a, b in zip(*out):
        _close(a, b, 20 * TOL[dt] if dt == 'float64' else 2e-5)
    assert (out[0][0][1, :, 3] == 0).all()             # safe: zeros, not NaN


@pytest.mark.parametrize('dt', ['float32', 'float64'])
def test_mha_self_attention_matches_torch(dt):
    torch.manual_seed(0)
    mT = torch.nn.MultiheadAttention(16, 4, batch_first=True).to(getattr(torch, dt))
    mt = nn.MultiheadAttention(16, 4, batch_first=True).to(getattr(tape, dt))
    mt.load_state_dict({n: tape.tensor(p.detach().numpy()) for n, p in mT.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((3, 6, 16)).astype(dt)
    xt = tape.tensor(x, requires_grad=True)
    xT = torch.tensor(x, requires_grad=True)
    yt = mt(xt, xt, xt, need_weights=False)[0]
    yT = mT(xT, xT, xT, need_weights=False)[0]
    (yt ** 2).sum().backward()
    (yT ** 2).sum().backward()
    tol = 2e-5 if dt == 'float32' else 1e-10
    _close(yt.detach().numpy(), yT.detach().numpy(), tol)
    _close(xt.grad.numpy(), xT.grad.numpy(), 10 * tol)
    _close(mt.in_proj_weight.grad.numpy(), mT.in_proj_weight.grad.numpy(), 10 * tol)
