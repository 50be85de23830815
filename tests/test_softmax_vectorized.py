"""The vectorized softmax kernels (compiler/softmax_kernels.py): row lengths
around the LANES partial sums and the eight-sum tail, the one-call float32
kernels (rows >= FUSED_MIN) and the NumPy-exp path, NaN/inf rows, masked
attention rows, exp32's accuracy, gradcheck; PyTorch as the oracle."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F

torch = pytest.importorskip('torch')
TF = torch.nn.functional

TOL = {'float32': 2e-6, 'float64': 1e-12}
OPS = ['softmax', 'log_softmax']
LENGTHS = [1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 256, 1000]


def _close(a, b, tol, what=''):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol,
                               equal_nan=True, err_msg=what)


def _both(op, x, g):
    xt = tape.tensor(x, requires_grad=True)
    yt = getattr(F, op)(xt, -1)
    yt.backward(tape.tensor(g))
    xT = torch.tensor(x, requires_grad=True)
    yT = getattr(TF, op)(xT, -1)
    yT.backward(torch.tensor(g))
    return (yt.detach().numpy(), xt.grad.numpy()), (yT.detach().numpy(), xT.grad.numpy())


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('c', LENGTHS)
def test_row_lengths_match_torch(c, op, dt):
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((5, c)) * 4).astype(dt)
    g = rng.standard_normal((5, c)).astype(dt)
    (y, gx), (yT, gxT) = _both(op, x, g)
    assert y.dtype == np.dtype(dt) and gx.dtype == np.dtype(dt)
    _close(y, yT, TOL[dt], f'{op} c={c}')
    _close(gx, gxT, 10 * TOL[dt], f'{op} grad c={c}')


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('c', [3, 16, 33, 64, 100, 1000])
def test_nan_and_inf_rows(c, op, dt):
    inf, nan = np.inf, np.nan
    x = np.random.default_rng(c).standard_normal((9, c)).astype(dt)
    x[0] = -inf                         # all -inf: NaN
    x[1, c // 2] = inf                  # a +inf: NaN
    x[2, c - 1] = nan                   # a NaN: NaN row
    x[3, :c - 1] = -inf                 # one finite entry: one-hot
    x[4, ::2] = -inf
    x[5] = 1e30
    x[6] = np.arange(c) * 50.0          # exps underflow (float32 subnormals)
    x[7, 0] = nan
    x[7, 1:] = -inf
    x[8] = -1e30
    g = np.random.default_rng(c + 1).standard_normal((9, c)).astype(dt)
    with np.errstate(all='raise', under='ignore'):
        (y, gx), (yT, gxT) = _both(op, x, g)
    _close(y, yT, TOL[dt])
    _close(gx, gxT, 10 * TOL[dt])
    assert np.isnan(y[[0, 1, 2, 7]]).all()


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('S', [5, 16, 33, 64, 70])
def test_masked_attention_rows(S, dt):
    rng = np.random.default_rng(S)
    q = rng.standard_normal((2, 3, 6, 8)).astype(dt)
    k, v = (rng.standard_normal((2, 3, S, 8)).astype(dt) for _ in range(2))
    mask = rng.random((6, S)) > 0.4
    mask[:, 0] = True
    mask[2] = False                     # a query that sees no key: zeros (safe)
    q[1, 2, 4, 0] = np.nan              # a NaN score row
    out = []
    for lib, Fn in ((tape, F), (torch, TF)):
        ts = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        o = Fn.scaled_dot_product_attention(*ts, attn_mask=lib.tensor(mask), scale=0.3)
        o.backward(lib.tensor(np.ones(o.shape, dt)))
        out.append([np.asarray(o.detach().numpy())] + [t.grad.numpy() for t in ts])
    for a, b in zip(*out):
        _close(a, b, 20 * TOL[dt] if dt == 'float64' else 2e-5)
    assert (out[0][0][:, :, 2] == 0).all()
    assert np.isnan(out[0][0][1, 2, 4]).all()
    # unmasked scores (no bias: the scale goes into the kernel)
    q[1, 2, 4, 0] = 0.5
    o = F.scaled_dot_product_attention(*(tape.tensor(a) for a in (q, k, v)), scale=0.3)
    oT = TF.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), scale=0.3)
    _close(o.numpy(), oT.numpy(), 20 * TOL[dt] if dt == 'float64' else 2e-5)


def test_exp32_within_one_ulp():
    from numba import njit
    from compiler.softmax_kernels import exp32

    @njit
    def apply(t, o):
        for j in range(t.size):
            o[j] = exp32(t[j])
    t = np.concatenate([-np.logspace(-8, np.log10(110), 100001),
                        np.logspace(-8, np.log10(88.7), 50001)]).astype(np.float32)
    o = np.empty_like(t)
    apply(t, o)
    ref = np.exp(t.astype(np.float64))
    normal = (ref > np.finfo(np.float32).tiny) & (ref < np.finfo(np.float32).max)
    ulps = np.abs(o[normal] - ref[normal]) / np.spacing(ref[normal].astype(np.float32))
    assert ulps.max() <= 1.0
    # subnormal results within one subnormal step
    sub = ~normal & (t < 0)
    assert (np.abs(o[sub] - ref[sub]) <= 1.5e-45).all()
    sp = np.float32([0.0, -0.0, -np.inf, np.inf, np.nan, -104.0, -200.0, 89.0, 1e30])
    os_ = np.empty_like(sp)
    apply(sp, os_)
    np.testing.assert_array_equal(os_, np.float32([1, 1, 0, np.inf, np.nan, 0, 0, np.inf, np.inf]))


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('c', [7, 64, 100])
def test_kernels_against_numpy(c, dt):
    import compiler.softmax_kernels as k
    rng = np.random.default_rng(c)
    x = (rng.standard_normal((6, c)) * 3).astype(dt)
    x[1] = -np.inf
    for safe in (False, True):
        e = np.empty_like(x)
        k.shift(x, e, 0.37, safe)
        with np.errstate(all='ignore'):
            xs = x * x.dtype.type(0.37)
            m = xs.max(-1, keepdims=True)
            if safe:
                m[np.isneginf(m)] = 0.0
            ref = np.exp(xs - m)
            den = ref.sum(-1, keepdims=True)
            if safe:
                den[den == 0] = 1.0
            ref /= den
            np.testing.assert_array_equal(e, xs - m)
        if dt == 'float32':
            e = x.copy()
            k.softmax32(e, e, 0.37, safe)           # in place, as attention calls it
            _close(e, ref, TOL[dt])
    y = rng.random((6, c)).astype(dt)
    g = rng.standard_normal((6, c)).astype(dt)
    out = g.copy()
    k.softmax_backward(y, out, out)
    _close(out, y * (g - (g.astype(np.float64) * y).sum(-1, keepdims=True)), 10 * TOL[dt])
    if dt == 'float32':
        yl = -y
        out = np.empty_like(g)
        k.log_softmax_backward32(yl, g, out)
        _close(out, g - np.exp(yl) * g.sum(-1, keepdims=True), 10 * TOL[dt])


@pytest.mark.parametrize('op', OPS)
@pytest.mark.parametrize('c', [5, 40, 70])
def test_gradcheck_and_create_graph(op, c):
    x = np.random.default_rng(c).standard_normal((3, c))
    w = tape.tensor(np.random.default_rng(c + 1).standard_normal((3, c)))

    def f(a):
        return getattr(F, op)(a, -1) * w
    assert tape.autograd.gradcheck(f, (tape.tensor(x, requires_grad=True),))
    assert tape.autograd.gradgradcheck(f, (tape.tensor(x, requires_grad=True),))
    # create_graph gradient == the fast backward, float32 (the one-call kernels)
    x32 = x.astype(np.float32)
    g = np.random.default_rng(c + 2).standard_normal((3, c)).astype(np.float32)
    a = tape.tensor(x32, requires_grad=True)
    fast, = tape.autograd.grad(getattr(F, op)(a, -1), a, tape.tensor(g))
    a = tape.tensor(x32, requires_grad=True)
    slow, = tape.autograd.grad(getattr(F, op)(a, -1), a, tape.tensor(g), create_graph=True)
    _close(fast.numpy(), slow.detach().numpy(), 2e-5)
