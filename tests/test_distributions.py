"""tape.distributions against torch.distributions: values and parameter gradients
of log_prob / entropy / moments / cdf / icdf / KL, sample shapes and supports,
sample moments, reparameterized gradients, and argument validation."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

D = tape.distributions
TD = torch.distributions

DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def _torch_validates():
    """Once torch._dynamo is set up (torch.compile elsewhere in the suite), PyTorch
    turns argument validation off globally; the oracle here validates, as by default."""
    old = TD.Distribution._validate_args
    TD.Distribution.set_default_validate_args(True)
    yield
    TD.Distribution.set_default_validate_args(old)


def _pair(x, dt, grad=True):
    a = np.asarray(x, dt)
    return (tape.tensor(a, requires_grad=grad and a.dtype.kind == 'f'),
            torch.tensor(a, requires_grad=grad and a.dtype.kind == 'f'))


def _tol(dt):
    return dict(rtol=2e-4, atol=2e-5) if dt == np.float32 else dict(rtol=1e-9, atol=1e-10)


def _close(a, b, dt):
    assert a.dtype.itemsize == b.dtype.itemsize if hasattr(b.dtype, 'itemsize') else True
    an, bn = a.detach().numpy(), b.detach().numpy()
    assert an.shape == bn.shape, (an.shape, bn.shape)
    np.testing.assert_allclose(an, bn, equal_nan=True, **_tol(dt))


_LGAMMA_F32_PROBE = []


def _lgamma_f32_backward_ok():
    """Whether the float32 lgamma/digamma backward runs (in a child process: with
    a warm Numba cache it has been seen to crash the interpreter)."""
    if not _LGAMMA_F32_PROBE:
        import subprocess
        import sys
        code = ("import tape; c = tape.tensor([0.3, 2.0], requires_grad=True); "
                "tape.lgamma(c).sum().backward(); tape.digamma(c).sum().backward()")
        for _ in range(2):  # the second run loads the kernels from the Numba cache
            ok = subprocess.run([sys.executable, '-c', code], capture_output=True).returncode == 0
            if not ok:
                break
        _LGAMMA_F32_PROBE.append(ok)
    return _LGAMMA_F32_PROBE[0]


USES_LGAMMA = {'Gamma', 'Beta', 'Dirichlet', 'Poisson', 'Binomial'}


def _check(xa, xb, params, dt, lgamma=False):
    """Values and gradients (w.r.t. every parameter) of xa (tape) and xb (torch)."""
    _close(xa, xb, dt)
    assert str(xa.dtype).split('.')[-1] == str(xb.dtype).split('.')[-1]
    if lgamma and dt == np.float32 and not _lgamma_f32_backward_ok():
        pytest.skip('float32 lgamma/digamma backward crashes with a warm Numba cache '
                    '(compiler/kernels.py digamma, outside tape.distributions)')
    pa = [p[0] for p in params if p[0].requires_grad]
    pb = [p[1] for p in params if p[1].requires_grad]
    if not xb.requires_grad or not pb:
        return
    w = np.linspace(0.5, 1.5, xb.numel()).reshape(tuple(xb.shape)).astype(dt)
    ga = tape.autograd.grad((xa * tape.tensor(w)).sum(), pa, allow_unused=True, retain_graph=True)
    gb = torch.autograd.grad((xb * torch.tensor(w)).sum(), pb, allow_unused=True, retain_graph=True)
    for u, v in zip(ga, gb):
        if v is None:
            assert u is None or np.all(u.numpy() == 0)
        else:
            assert u is not None
            _close(u, v, dt)


# name: (constructor args (broadcasting batch shapes), value, kwargs)
CASES = {
    'Normal': ([[0.3, -1.0], [[1.5], [0.5]]], [0.2, 1.0], {}),
    'Laplace': ([[0.3, -1.0], [[1.5], [0.5]]], [0.2, 1.0], {}),
    'Uniform': ([[0.3, -1.0], [2.0, 1.5]], [0.5, 1.0], {}),
    'Exponential': ([[0.3, 2.0]], [0.5, 1.0], {}),
    'LogNormal': ([[0.3, -1.0], [[1.5], [0.5]]], [0.2, 1.0], {}),
    'Gamma': ([[0.3, 2.0], [1.5, 0.5]], [0.2, 1.0], {}),
    'Beta': ([[0.3, 2.0], [[1.5], [0.5]]], [0.2, 0.7], {}),
    'Poisson': ([[0.3, 2.0]], [0.0, 3.0], {}),
    'Binomial': ([[5.0, 10.0], [0.3, 0.6]], [2.0, 7.0], {}),
    'Bernoulli': ([[0.3, 0.8]], [0.0, 1.0], {}),
    'BernoulliLogits': ([], [0.0, 1.0], {'logits': [[-0.3, 1.8], [0.1, 0.2]]}),
    'Categorical': ([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]], [0, 2], {}),
    'CategoricalLogits': ([], [[0, 2], [1, 1]], {'logits': [[0.2, -1.3, 0.5], [0.1, 2.1, 0.8]]}),
    'OneHotCategorical': ([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]], [[0, 0, 1.], [1, 0, 0]], {}),
    'Dirichlet': ([[[0.2, 0.3, 0.5], [1.1, 2.1, 0.8]]], [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], {}),
}


def _make(name, dt):
    args, value, kw = CASES[name]
    cls = name.replace('Logits', '')
    params = [_pair(a, dt) for a in args]
    if name == 'Binomial':
        params[0] = _pair(args[0], dt, grad=False)
    kws = {k: _pair(v, dt) for k, v in kw.items()}
    a = getattr(D, cls)(*[p[0] for p in params], **{k: v[0] for k, v in kws.items()})
    b = getattr(TD, cls)(*[p[1] for p in params], **{k: v[1] for k, v in kws.items()})
    vdt = np.int64 if cls == 'Categorical' else dt
    return a, b, params + list(kws.values()), _pair(value, vdt, grad=False)


@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('name', list(CASES))
def test_log_prob_entropy_moments(name, dt):
    a, b, params, v = _make(name, dt)
    assert a.batch_shape == b.batch_shape and a.event_shape == b.event_shape
    assert a.has_rsample == b.has_rsample
    lg = name in USES_LGAMMA
    _check(a.log_prob(v[0]), b.log_prob(v[1]), params, dt, lg)
    for attr in ['mean', 'variance', 'stddev', 'mode', 'entropy']:
        try:
            yb = getattr(b, attr)
            yb = yb() if callable(yb) else yb
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                ya = getattr(a, attr)
                ya() if callable(ya) else ya
            continue
        ya = getattr(a, attr)
        ya = ya() if callable(ya) else ya
        if attr == 'mode' and name in ('Dirichlet', 'Beta'):
            _close(ya, yb, dt)  # tape's clamp backward passes nan where torch selects 0
            continue
        _check(ya, yb, params, dt, lg)


CDF = ['Normal', 'Laplace', 'Uniform', 'Exponential', 'LogNormal', 'Gamma']


@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('name', CDF)
def test_cdf_icdf(name, dt):
    a, b, params, v = _make(name, dt)
    if name == 'Gamma':  # torch: no derivative in the concentration
        _check(a.cdf(v[0]), b.cdf(v[1]), [], dt, True)
        ga = tape.autograd.grad(a.cdf(v[0]).sum(), [params[1][0]])
        gb = torch.autograd.grad(b.cdf(v[1]).sum(), [params[1][1]])
        _close(ga[0], gb[0], dt)
        with pytest.raises(NotImplementedError, match="igamma"):
            tape.autograd.grad(a.cdf(v[0]).sum(), [params[0][0]])
        return
    _check(a.cdf(v[0]), b.cdf(v[1]), params, dt)
    q = _pair([0.3, 0.6], dt, grad=False)
    _check(a.icdf(q[0]), b.icdf(q[1]), params, dt)


def _mvn_pair(dt, kind):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((2, 3, 3))
    cov = m @ m.transpose(0, 2, 1) + 3 * np.eye(3)
    loc = rng.standard_normal((3,))
    mat = {'covariance_matrix': cov, 'precision_matrix': np.linalg.inv(cov),
           'scale_tril': np.linalg.cholesky(cov)}[kind]
    pl, pm = _pair(loc, dt), _pair(mat, dt)
    a = D.MultivariateNormal(pl[0], **{kind: pm[0]})
    b = TD.MultivariateNormal(pl[1], **{kind: pm[1]})
    return a, b, [pl, pm]


@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('kind', ['covariance_matrix', 'precision_matrix', 'scale_tril'])
def test_multivariate_normal(dt, kind):
    a, b, params = _mvn_pair(dt, kind)
    assert a.batch_shape == b.batch_shape == (2,) and a.event_shape == b.event_shape == (3,)
    v = _pair(np.random.default_rng(1).standard_normal((4, 1, 3)), dt, grad=False)
    _check(a.log_prob(v[0]), b.log_prob(v[1]), params, dt)
    _check(a.entropy(), b.entropy(), params, dt)
    for attr in ['mean', 'variance', 'mode', 'scale_tril', 'covariance_matrix', 'precision_matrix']:
        _check(getattr(a, attr), getattr(b, attr), params, dt)
    a2, b2, params2 = _mvn_pair(dt, 'covariance_matrix')
    _check(D.kl_divergence(a, a2), TD.kl_divergence(b, b2), params + params2, dt)
    # reparameterized: d/dloc mean(rsample) = 1 for each component
    s = a.rsample((5,))
    assert s.shape == (5, 2, 3)
    g, = tape.autograd.grad(s.mean(dim=(0, 1)).sum(), [params[0][0]])
    np.testing.assert_allclose(g.numpy(), np.ones(3), rtol=1e-6)


def test_multivariate_normal_sample_moments():
    tape.manual_seed(0)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    d = D.MultivariateNormal(tape.tensor([1.0, -2.0], dtype=tape.float64),
                             covariance_matrix=tape.tensor(cov))
    s = d.sample((20000,)).numpy()
    np.testing.assert_allclose(s.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.08)


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(tape.zeros(2))
    with pytest.raises(ValueError, match="at least two-dimensional"):
        D.MultivariateNormal(tape.zeros(2), covariance_matrix=tape.ones(2))
    with pytest.raises(ValueError) as e:
        D.MultivariateNormal(tape.zeros(2), covariance_matrix=-tape.eye(2))
    with pytest.raises(ValueError) as f:
        TD.MultivariateNormal(torch.zeros(2), covariance_matrix=-torch.eye(2))
    assert str(e.value).replace('tape.', 'torch.').split(' found invalid')[0] == \
        str(f.value).split(' found invalid')[0]


SHAPES = [(), (5,), (2, 3)]


@pytest.mark.parametrize('sample_shape', SHAPES)
@pytest.mark.parametrize('name', list(CASES))
def test_sample_shapes_and_support(name, sample_shape):
    a, b, params, v = _make(name, np.float32)
    s = a.sample(sample_shape)
    t = b.sample(sample_shape)
    assert tuple(s.shape) == tuple(t.shape)
    assert str(s.dtype).split('.')[-1] == str(t.dtype).split('.')[-1]
    assert not s.requires_grad
    assert bool(a.support.check(s).all())
    if a.has_rsample:
        r = a.rsample(sample_shape)
        assert tuple(r.shape) == tuple(t.shape) and r.requires_grad
    else:
        with pytest.raises(NotImplementedError):
            a.rsample(sample_shape)


@pytest.mark.parametrize('name', ['Normal', 'Laplace', 'Uniform', 'Exponential', 'LogNormal',
                                  'Gamma', 'Beta', 'Poisson', 'Binomial', 'Bernoulli',
                                  'Categorical', 'OneHotCategorical', 'Dirichlet'])
def test_sample_moments(name):
    tape.manual_seed(1)
    a, b, params, v = _make(name, np.float64)
    s = a.sample((20000,))
    if name == 'Categorical':
        s = tape.nn.functional.one_hot(s, 3).double()
        mean, var = b.probs.detach().numpy(), (b.probs * (1 - b.probs)).detach().numpy()
    else:
        mean, var = b.mean.detach().numpy(), b.variance.detach().numpy()
    sn = s.numpy()
    np.testing.assert_allclose(sn.mean(0), mean, atol=4 * np.sqrt(var.max() / 20000) + 1e-3)
    np.testing.assert_allclose(sn.var(0), var, rtol=0.1, atol=0.01)


def test_manual_seed_reproducible():
    d = D.Normal(tape.zeros(3), tape.ones(3))
    tape.manual_seed(7)
    x = d.sample((4,))
    tape.manual_seed(7)
    y = d.sample((4,))
    np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize('dt', DTYPES)
def test_rsample_gradients(dt):
    tape.manual_seed(3)
    loc = tape.tensor(np.array([0.5, -1.0], dt), requires_grad=True)
    scale = tape.tensor(np.array([1.5, 0.3], dt), requires_grad=True)
    for cls in (D.Normal, D.Laplace):
        s = cls(loc, scale).rsample((7, 3))
        g, = tape.autograd.grad(s.mean(), [loc])
        np.testing.assert_allclose(g.numpy(), np.full(2, 0.5, dt), rtol=1e-5)
        gs, = tape.autograd.grad(cls(loc, scale).rsample((7, 3)).sum(), [scale])
        assert gs.shape == (2,)
    # Normal: d sample / d scale = (sample - loc) / scale
    s = D.Normal(loc, scale).rsample((11,))
    gs, = tape.autograd.grad(s.sum(), [scale])
    np.testing.assert_allclose(gs.numpy(), ((s - loc) / scale).detach().numpy().sum(0),
                               rtol=1e-4)
    # Uniform: d sample / d low + d sample / d high = 1
    lo = tape.tensor(np.array([0.0, 1.0], dt), requires_grad=True)
    hi = tape.tensor(np.array([1.0, 3.0], dt), requires_grad=True)
    s = D.Uniform(lo, hi).rsample((4,))
    gl, gh = tape.autograd.grad(s.sum(), [lo, hi])
    np.testing.assert_allclose((gl + gh).numpy(), np.full(2, 4.0), rtol=1e-5)
    # Exponential: d sample / d rate = -sample / rate
    rate = tape.tensor(np.array([0.5, 2.0], dt), requires_grad=True)
    s = D.Exponential(rate).rsample((6,))
    g, = tape.autograd.grad(s.sum(), [rate])
    np.testing.assert_allclose(g.numpy(), (-s / rate).detach().numpy().sum(0), rtol=1e-4)
    # LogNormal: d sample / d loc = sample
    s = D.LogNormal(loc, scale).rsample((6,))
    g, = tape.autograd.grad(s.sum(), [loc])
    np.testing.assert_allclose(g.numpy(), s.detach().numpy().sum(0), rtol=1e-4)


def test_implicit_gradient_kernels():
    from tape.distributions import _implicit
    alpha = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 20.0, 200.0])[:, None]
    x = np.array([0.01, 0.5, 1.5, 1.0, 3.0])[None, :] * np.maximum(alpha, 1.0)
    alpha, x = np.broadcast_arrays(alpha, x)
    ref = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x)).numpy()
    np.testing.assert_allclose(_implicit.standard_gamma_grad(alpha, x), ref, rtol=1e-10)
    a = np.array([0.3, 2.0, 7.0, 1.0, 10.0])[:, None]
    t = np.array([1.0, 3.0, 15.0, 20.0, 11.0])[:, None]
    xs = np.array([0.01, 0.2, 0.5, 0.8, 0.99])[None, :]
    a, t, xs = np.broadcast_arrays(a, t, xs)
    ref = torch._dirichlet_grad(torch.tensor(xs), torch.tensor(a), torch.tensor(t)).numpy()
    np.testing.assert_allclose(_implicit.dirichlet_grad(xs, a, t), ref, rtol=1e-8)


def test_implicit_rsample_gradients():
    """d/dparam of the mean of many reparameterized samples = d/dparam of the mean."""
    tape.manual_seed(5)
    n = 40000
    c = tape.tensor([0.4, 3.0], dtype=tape.float64, requires_grad=True)
    r = tape.tensor([2.0, 0.5], dtype=tape.float64, requires_grad=True)
    s = D.Gamma(c, r).rsample((n,))
    gc, gr = tape.autograd.grad(s.mean(0).sum(), [c, r])
    np.testing.assert_allclose(gc.numpy(), 1 / r.detach().numpy(), rtol=0.05)
    np.testing.assert_allclose(gr.numpy(), -(c / r ** 2).detach().numpy(), rtol=0.05)
    a = tape.tensor([0.7, 2.0], dtype=tape.float64, requires_grad=True)
    b = tape.tensor([1.5, 4.0], dtype=tape.float64, requires_grad=True)
    s = D.Beta(a, b).rsample((n,))
    ga, gb = tape.autograd.grad(s.mean(0).sum(), [a, b])
    an, bn = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_allclose(ga.numpy(), bn / (an + bn) ** 2, rtol=0.05)
    np.testing.assert_allclose(gb.numpy(), -an / (an + bn) ** 2, rtol=0.05)
    conc = tape.tensor([0.5, 1.0, 2.5], dtype=tape.float64, requires_grad=True)
    s = D.Dirichlet(conc).rsample((n,))
    g, = tape.autograd.grad(s.mean(0)[0], [conc])
    cn = conc.detach().numpy()
    expect = -cn[0] / cn.sum() ** 2 * np.ones(3)
    expect[0] += 1 / cn.sum()
    np.testing.assert_allclose(g.numpy(), expect, rtol=0.06, atol=2e-3)
    s32 = D.Gamma(tape.tensor([1.5], requires_grad=True), tape.tensor([1.0])).rsample((3,))
    assert s32.dtype == tape.float32 and s32.requires_grad


def test_independent():
    for dt in DTYPES:
        loc, scale = _pair(np.arange(6.).reshape(2, 3) / 3, dt), _pair(np.ones((2, 3)) * 0.7, dt)
        loc2, scale2 = _pair(np.ones((2, 3)) / 4, dt), _pair(np.ones((2, 3)) * 1.3, dt)
        a = D.Independent(D.Normal(loc[0], scale[0]), 1)
        b = TD.Independent(TD.Normal(loc[1], scale[1]), 1)
        a2 = D.Independent(D.Normal(loc2[0], scale2[0]), 1)
        b2 = TD.Independent(TD.Normal(loc2[1], scale2[1]), 1)
        assert a.batch_shape == b.batch_shape == (2,) and a.event_shape == (3,)
        v = _pair(np.full((4, 2, 3), 0.25), dt, grad=False)
        params = [loc, scale, loc2, scale2]
        _check(a.log_prob(v[0]), b.log_prob(v[1]), params, dt)
        _check(a.entropy(), b.entropy(), params, dt)
        _check(D.kl_divergence(a, a2), TD.kl_divergence(b, b2), params, dt)
        assert a.sample((5,)).shape == (5, 2, 3)
        assert a.has_rsample
        e = a.expand((4, 2))
        assert e.batch_shape == (4, 2) and e.event_shape == (3,)
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims"):
        D.Independent(D.Normal(tape.zeros(2), tape.ones(2)), 2)


KL = {
    ('Normal', 'Normal'): ([[0.3, -1.0], [[1.5], [0.5]]], [[0.1, 0.2], [0.7, 2.0]]),
    ('Laplace', 'Laplace'): ([[0.3, -1.0], [[1.5], [0.5]]], [[0.1, 0.2], [0.7, 2.0]]),
    ('Uniform', 'Uniform'): ([[0.3, -1.0], [2.0, 1.5]], [[0.1, -2.0], [2.5, 1.7]]),
    ('Exponential', 'Exponential'): ([[0.3, 2.0]], [[0.7, 1.1]]),
    ('Gamma', 'Gamma'): ([[0.3, 2.0], [1.5, 0.5]], [[0.7, 1.2], [0.4, 0.9]]),
    ('Beta', 'Beta'): ([[0.3, 2.0], [1.5, 0.5]], [[0.7, 1.2], [0.4, 0.9]]),
    ('Bernoulli', 'Bernoulli'): ([[0.3, 0.8]], [[0.5, 0.1]]),
    ('Categorical', 'Categorical'): ([[[0.2, 0.3, 0.5]]], [[[0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]]),
    ('OneHotCategorical', 'OneHotCategorical'): ([[[0.2, 0.3, 0.5]]], [[[0.6, 0.3, 0.1]]]),
    ('Dirichlet', 'Dirichlet'): ([[[0.2, 0.3, 0.5]]], [[[1.6, 0.3, 2.1], [0.1, 0.1, 0.8]]]),
    ('Poisson', 'Poisson'): ([[0.3, 2.0]], [[0.7, 1.1]]),
    ('LogNormal', 'LogNormal'): ([[0.3, -1.0], [1.5, 0.5]], [[0.1, 0.2], [0.7, 2.0]]),
    ('Normal', 'Laplace'): ([[0.3, -1.0], [1.5, 0.5]], [[0.1, 0.2], [0.7, 2.0]]),
    ('Exponential', 'Gamma'): ([[0.3, 2.0]], [[0.7, 1.2], [0.4, 0.9]]),
    ('Uniform', 'Normal'): ([[0.3, -1.0], [2.0, 1.5]], [[0.1, 0.2], [0.7, 2.0]]),
    ('Normal', 'Uniform'): ([[0.3, -1.0], [1.5, 0.5]], [[0.1, -2.0], [2.5, 1.7]]),
}


@pytest.mark.parametrize('dt', DTYPES)
@pytest.mark.parametrize('pair', list(KL), ids=['-'.join(k) for k in KL])
def test_kl_divergence(pair, dt):
    (pn, qn), (pargs, qargs) = pair, KL[pair]
    pp, qp = [_pair(x, dt) for x in pargs], [_pair(x, dt) for x in qargs]
    a = D.kl_divergence(getattr(D, pn)(*[p[0] for p in pp]), getattr(D, qn)(*[p[0] for p in qp]))
    b = TD.kl_divergence(getattr(TD, pn)(*[p[1] for p in pp]),
                         getattr(TD, qn)(*[p[1] for p in qp]))
    _check(a, b, pp + qp, dt, bool({pn, qn} & USES_LGAMMA))


def test_kl_registry():
    class MyNormal(D.Normal):
        pass

    p = MyNormal(tape.zeros(2), tape.ones(2))
    q = D.Normal(tape.ones(2), tape.ones(2))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), np.full(2, 0.5), rtol=1e-6)

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return tape.zeros(p.batch_shape)

    assert D.kl_divergence(p, q).numpy().tolist() == [0.0, 0.0]
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Categorical(tape.ones(2)), q)
    with pytest.raises(TypeError):
        D.register_kl(1, D.Normal)


def _msg(e):
    return str(e).replace('tape.', 'torch.').replace('tape', 'torch')


@pytest.mark.parametrize('ctor', [
    lambda m, t: m.Normal(t([0.0, 1.0]), t([1.0, -1.0])),
    lambda m, t: m.Normal(t([0.0, float('nan')]), t([1.0, 1.0])),
    lambda m, t: m.Bernoulli(t([0.5, 1.5])),
    lambda m, t: m.Categorical(t([[0.5, -0.5]])),
    lambda m, t: m.Uniform(t([1.0]), t([0.0])),
    lambda m, t: m.Exponential(t([0.0])),
    lambda m, t: m.Gamma(t([1.0]), t([-1.0])),
    lambda m, t: m.Beta(t([1.0]), t([-1.0])),
    lambda m, t: m.Dirichlet(t([0.5, -1.0])),
    lambda m, t: m.Poisson(t([-1.0])),
    lambda m, t: m.Laplace(t([0.0]), t([0.0])),
])
def test_parameter_validation(ctor):
    with pytest.raises(ValueError) as e:
        ctor(D, tape.tensor)
    with pytest.raises(ValueError) as f:
        ctor(TD, torch.tensor)
    assert _msg(e.value) == str(f.value)


def test_argument_errors():
    for m, t in ((D, tape.tensor), (TD, torch.tensor)):
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
            m.Bernoulli()
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
            m.Categorical(t([0.5]), t([0.5]))
        with pytest.raises(ValueError, match="must be at least one-dimensional"):
            m.Categorical(t(0.5))


@pytest.mark.parametrize('case', [
    ('Normal', lambda t: t(1.0), lambda t: t([0.5, 2.0])),
    ('Bernoulli', lambda t: t([0.3, 0.4]), lambda t: t([0.5, 1.0])),
    ('Exponential', lambda t: t([1.0, 1.0]), lambda t: t([-1.0, 1.0])),
    ('Categorical', lambda t: t([[0.3, 0.7]]), lambda t: t([2])),
    ('Beta', lambda t: t([1.0]), lambda t: t([1.5])),
])
def test_sample_validation(case):
    name, make_param, make_value = case
    msgs = []
    for m, t in ((D, tape.tensor), (TD, torch.tensor)):
        cls = getattr(m, name)
        if name == 'Normal':
            d = cls(make_param(t), make_param(t), validate_args=True)
            value = make_value(t) * float('nan')
        elif name == 'Beta':
            d = cls(make_param(t), make_param(t), validate_args=True)
            value = make_value(t)
        else:
            d = cls(make_param(t), validate_args=True)
            value = make_value(t)
        with pytest.raises(ValueError) as e:
            d.log_prob(value)
        msgs.append(str(e.value))
    assert _msg(msgs[0]) == msgs[1]
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(tape.tensor(0.0), tape.tensor(1.0), validate_args=True).log_prob(0.5)


def test_validate_args_default():
    old = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(tape.tensor([0.0]), tape.tensor([-1.0]))  # no error
        D.Distribution.set_default_validate_args(True)
        with pytest.raises(ValueError):
            D.Normal(tape.tensor([0.0]), tape.tensor([-1.0]))
        D.Normal(tape.tensor([0.0]), tape.tensor([-1.0]), validate_args=False)
    finally:
        D.Distribution.set_default_validate_args(old)
    for m in (D, TD):
        with pytest.raises(ValueError):
            m.Distribution.set_default_validate_args('yes')


def test_expand_and_shapes():
    d = D.Normal(tape.tensor([0.0, 1.0]), tape.tensor(1.0))
    e = d.expand((3, 2))
    assert e.batch_shape == (3, 2) and e.loc.shape == (3, 2)
    assert e.sample().shape == (3, 2) and e.sample((4,)).shape == (4, 3, 2)
    assert d._extended_shape((5,)) == (5, 2)
    assert isinstance(d.batch_shape, tape.Size)
    c = D.Categorical(logits=tape.zeros(2, 4))
    assert c.expand((3, 2)).logits.shape == (3, 2, 4)
    assert c.enumerate_support().shape == (4, 2)
    assert D.Bernoulli(tape.tensor([0.2, 0.4])).enumerate_support().shape == (2, 2)
    assert repr(d) == 'Normal(loc: tape.Size([2]), scale: tape.Size([2]))'
    with pytest.raises(RuntimeError):
        d.expand((3, 4))


def test_constraints():
    C = D.constraints
    x = tape.tensor([-1.0, 0.0, 0.5, 2.0])
    for name in ['real', 'positive', 'nonnegative', 'unit_interval', 'boolean',
                 'nonnegative_integer', 'positive_integer']:
        a = getattr(C, name).check(x).numpy()
        b = getattr(torch.distributions.constraints, name).check(torch.tensor(x.numpy())).numpy()
        assert a.tolist() == b.tolist(), name
    assert C.interval(0.0, 1.0).check(x).numpy().tolist() == [False, True, True, False]
    assert C.greater_than(0.0).check(x).numpy().tolist() == [False, False, True, True]
    assert C.integer_interval(0, 2).check(x).numpy().tolist() == [False, True, False, True]
    assert C.simplex.check(tape.tensor([[0.5, 0.5], [0.5, 0.6]])).numpy().tolist() == [True, False]
    assert C.lower_cholesky.check(tape.tensor([[1.0, 0.0], [0.5, 1.0]])).item()
    assert not C.lower_cholesky.check(tape.tensor([[1.0, 0.5], [0.5, 1.0]])).item()
    assert C.positive_definite.check(tape.tensor([[2.0, 0.5], [0.5, 1.0]])).item()
    assert C.independent(C.real, 1).check(tape.zeros(2, 3)).shape == (2,)
    assert C.is_dependent(D.Binomial.support)
    assert repr(C.positive) == 'GreaterThan(lower_bound=0.0)'


@pytest.mark.parametrize('dt', DTYPES)
def test_binomial_values(dt):
    if True:
        n = _pair([[4.0], [9.0]], dt, grad=False)
        p = _pair([0.2, 0.75], dt)
        a, b = D.Binomial(n[0], p[0]), TD.Binomial(n[1], p[1])
        v = _pair([3.0, 4.0], dt, grad=False)
        _check(a.log_prob(v[0]), b.log_prob(v[1]), [p], dt, True)
        a, b = D.Binomial(5, logits=p[0]), TD.Binomial(5, logits=p[1])
        _check(a.entropy(), b.entropy(), [p], dt, True)
        assert a.enumerate_support().shape == b.enumerate_support().shape
