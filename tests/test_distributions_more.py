"""tape.distributions (the ports of PyTorch's transforms, constraint_registry,
TransformedDistribution and the remaining distributions) against
torch.distributions in float64: log_prob / cdf / icdf / entropy / moments and
their parameter gradients, supports and validation errors, sample and rsample
shapes, sample statistics with a fixed tape.manual_seed, reparameterized
gradients, KL divergences of the registered pairs, and transforms (values,
inverses, log-det Jacobians and their gradients)."""
import math

import numpy as np
import pytest

import tape

D = tape.distributions
F64 = np.float64


def _torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_validates():
    """Validation on in the oracle, as by default (torch._dynamo elsewhere in the
    suite can switch it off globally)."""
    torch = pytest.importorskip("torch")
    old = torch.distributions.Distribution._validate_args
    old_dtype = torch.get_default_dtype()
    torch.distributions.Distribution.set_default_validate_args(True)
    # float64 defaults in the oracle (PyTorch's GeneralizedPareto.log_prob compares
    # a float64 parameter with a default-dtype tensor)
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old_dtype)
    torch.distributions.Distribution.set_default_validate_args(old)


class P:
    """A parameter maker: the same float64 arrays as tensors of either library,
    recording the ones that require grad."""

    def __init__(self, lib):
        self.lib = lib
        self.params = []

    def __call__(self, x, grad=True, dtype=F64):
        a = np.asarray(x, dtype)
        t = self.lib.tensor(a, requires_grad=grad and a.dtype.kind == 'f')
        if t.requires_grad:
            self.params.append(t)
        return t

    def c(self, x, dtype=F64):  # a constant (no grad)
        return self(x, grad=False, dtype=dtype)

    @property
    def D(self):
        return self.lib.distributions


def _np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, 'detach') else t)


def _close(a, b, rtol=1e-6, atol=1e-8):
    an, bn = _np(a), _np(b)
    assert an.shape == bn.shape, (an.shape, bn.shape)
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, equal_nan=True)


def _lkj_value(p):
    # the Cholesky factor of a fixed 3x3 correlation matrix
    c = np.array([[1.0, 0.3, -0.2], [0.3, 1.0, 0.4], [-0.2, 0.4, 1.0]])
    return p.c(np.linalg.cholesky(c))


def _wishart_value(p):
    a = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, -0.2], [0.1, -0.2, 1.0]])
    return p.c(np.stack([a, 2 * a]))


_SPD = np.array([[1.0, 0.2, 0.0], [0.2, 2.0, 0.3], [0.0, 0.3, 1.5]])

# name -> (constructor from a P, values in the support from a P)
SPECS = {
    'Cauchy': (lambda p: p.D.Cauchy(p([0.0, 1.0, -2.0]), p([1.0, 0.5, 2.0])),
               lambda p: [p.c([0.3, -1.0, 4.0])]),
    'Chi2': (lambda p: p.D.Chi2(p([1.5, 3.0, 7.0])),
             lambda p: [p.c([0.5, 2.0, 9.0])]),
    'ContinuousBernoulli': (lambda p: p.D.ContinuousBernoulli(p([0.1, 0.4995, 0.5, 0.8])),
                            lambda p: [p.c([0.2, 0.5, 0.0, 1.0])]),
    'ContinuousBernoulliLogits': (
        lambda p: p.D.ContinuousBernoulli(logits=p([-1.5, 0.0, 0.001, 2.0])),
        lambda p: [p.c([0.7, 0.1, 0.5, 0.95])]),
    'FisherSnedecor': (lambda p: p.D.FisherSnedecor(p([3.0, 5.0, 10.0]), p([5.0, 7.0, 12.0])),
                       lambda p: [p.c([0.5, 1.0, 2.5])]),
    'Geometric': (lambda p: p.D.Geometric(p([0.2, 0.5, 0.9])),
                  lambda p: [p.c([0.0, 3.0, 1.0])]),
    'GeometricLogits': (lambda p: p.D.Geometric(logits=p([-1.0, 0.5, 2.0])),
                        lambda p: [p.c([2.0, 0.0, 5.0])]),
    'Gumbel': (lambda p: p.D.Gumbel(p([0.0, 1.0, -1.0]), p([1.0, 2.0, 0.5])),
               lambda p: [p.c([0.5, -1.0, 3.0])]),
    'HalfCauchy': (lambda p: p.D.HalfCauchy(p([1.0, 2.5])),
                   lambda p: [p.c([0.5, 3.0]), p.c([0.0, 1.0])]),
    'HalfNormal': (lambda p: p.D.HalfNormal(p([1.0, 0.5])),
                   lambda p: [p.c([0.3, 1.2]), p.c([0.0, 2.0])]),
    'InverseGamma': (lambda p: p.D.InverseGamma(p([3.0, 1.5]), p([2.0, 0.7])),
                     lambda p: [p.c([0.5, 1.3])]),
    'Kumaraswamy': (lambda p: p.D.Kumaraswamy(p([2.0, 0.8, 5.0]), p([3.0, 1.5, 0.9])),
                    lambda p: [p.c([0.3, 0.6, 0.9])]),
    'LKJCholesky': (lambda p: p.D.LKJCholesky(3, p([0.5, 2.0])),
                    lambda p: [_lkj_value(p)]),
    'LogNormal': (lambda p: p.D.LogNormal(p([0.0, 0.5]), p([1.0, 0.3])),
                  lambda p: [p.c([0.5, 2.0])]),
    'LogisticNormal': (lambda p: p.D.LogisticNormal(p([0.0, 0.5, -0.3]), p([1.0, 0.3, 0.7])),
                       lambda p: [p.c([0.1, 0.3, 0.2, 0.4])]),
    'LowRankMultivariateNormal': (
        lambda p: p.D.LowRankMultivariateNormal(
            p([[0.0, 1.0, -1.0], [0.5, 0.0, 0.2]]),
            p([[[1.0, 0.5], [0.2, -0.3], [0.0, 1.0]]]),
            p([1.0, 0.5, 2.0])),
        lambda p: [p.c([[0.3, -0.2, 1.0], [1.0, 1.0, 1.0]])]),
    'MixtureSameFamily': (
        lambda p: p.D.MixtureSameFamily(p.D.Categorical(p([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
                                        p.D.Normal(p([[-1.0, 0.0, 2.0], [0.5, 1.0, 1.5]]),
                                                   p([[1.0, 0.5, 2.0], [0.3, 0.6, 0.9]]))),
        lambda p: [p.c([0.3, 1.2])]),
    'MixtureSameFamilyIndependent': (
        lambda p: p.D.MixtureSameFamily(
            p.D.Categorical(logits=p([0.1, -0.3, 0.7])),
            p.D.Independent(p.D.Normal(p([[0.0, 1.0], [1.0, -1.0], [2.0, 0.0]]),
                                       p([[1.0, 0.5], [0.7, 1.2], [0.4, 0.9]])), 1)),
        lambda p: [p.c([0.5, -0.2])]),
    'Multinomial': (lambda p: p.D.Multinomial(10, p([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
                    lambda p: [p.c([[2.0, 3.0, 5.0], [0.0, 1.0, 9.0]])]),
    'MultinomialLogits': (lambda p: p.D.Multinomial(4, logits=p([0.5, -1.0, 0.2])),
                          lambda p: [p.c([1.0, 0.0, 3.0])]),
    'NegativeBinomial': (lambda p: p.D.NegativeBinomial(p([3.0, 5.5]), p([0.3, 0.6])),
                         lambda p: [p.c([2.0, 7.0])]),
    'NegativeBinomialLogits': (
        lambda p: p.D.NegativeBinomial(p([2.0, 4.0]), logits=p([-0.5, 1.0])),
        lambda p: [p.c([0.0, 3.0])]),
    'Pareto': (lambda p: p.D.Pareto(p([1.0, 2.0, 0.5]), p([3.0, 1.5, 0.8])),
               lambda p: [p.c([1.5, 3.0, 0.9])]),
    'RelaxedBernoulli': (lambda p: p.D.RelaxedBernoulli(p.c(0.7), p([0.2, 0.6])),
                         lambda p: [p.c([0.3, 0.9])]),
    'RelaxedOneHotCategorical': (
        lambda p: p.D.RelaxedOneHotCategorical(p.c(0.5), p([0.2, 0.3, 0.5])),
        lambda p: [p.c([0.1, 0.6, 0.3])]),
    'StudentT': (lambda p: p.D.StudentT(p([0.8, 1.5, 2.5, 6.0]), p([0.0, 1.0, -1.0, 0.5]),
                                        p([1.0, 2.0, 0.5, 1.5])),
                 lambda p: [p.c([0.3, -2.0, 4.0, 0.5])]),
    'VonMises': (lambda p: p.D.VonMises(p([0.0, 1.0, -2.0]), p([0.5, 2.0, 20.0])),
                 lambda p: [p.c([0.3, -1.0, 3.0])]),
    'Weibull': (lambda p: p.D.Weibull(p([1.0, 2.0, 0.5]), p([0.7, 1.5, 3.0])),
                lambda p: [p.c([0.5, 1.0, 2.0])]),
    'Wishart': (lambda p: p.D.Wishart(p([4.0, 5.5]), covariance_matrix=p(_SPD)),
                lambda p: [_wishart_value(p)]),
    'WishartPrecision': (lambda p: p.D.Wishart(p(4.5), precision_matrix=p(_SPD)),
                         lambda p: [_wishart_value(p)]),
    'WishartScaleTril': (lambda p: p.D.Wishart(p(3.0), scale_tril=p(np.linalg.cholesky(_SPD))),
                         lambda p: [_wishart_value(p)]),
    'GeneralizedParetoNonzero': (
        lambda p: p.D.GeneralizedPareto(p([0.0, 1.0, -1.0]), p([1.0, 2.0, 0.5]),
                                        p([0.2, -0.3, 0.1])),
        lambda p: [p.c([0.5, 2.0, 0.1])]),
    'GeneralizedPareto': (
        lambda p: p.D.GeneralizedPareto(p([0.0, 1.0, -1.0]), p([1.0, 2.0, 0.5]),
                                        p([0.2, -0.3, 0.0])),
        lambda p: [p.c([0.5, 2.0, 0.1])]),
    'TransformedDistribution': (
        lambda p: p.D.TransformedDistribution(
            p.D.Normal(p([0.0, 0.5]), p([1.0, 0.7])),
            [p.D.AffineTransform(p([1.0, -1.0]), p([2.0, 0.5])), p.D.SigmoidTransform()]),
        lambda p: [p.c([0.3, 0.8])]),
    'TransformedDistributionEvent': (
        lambda p: p.D.TransformedDistribution(
            p.D.Normal(p([0.0, 0.5, 1.0]), p([1.0, 0.7, 0.4])),
            p.D.StickBreakingTransform()),
        lambda p: [p.c([0.3, 0.2, 0.1, 0.4])]),
}

NAMES = sorted(SPECS)


def _both(name):
    torch = _torch()
    make, vals = SPECS[name]
    pa, pb = P(tape), P(torch)
    return (make(pa), pa, vals(pa)), (make(pb), pb, vals(pb))


def _same_outcome(fa, fb, rtol=1e-6, atol=1e-8):
    """Both raise the same kind of error, or both give close values."""
    try:
        vb = fb()
    except (NotImplementedError, ValueError) as e:
        with pytest.raises(type(e)):
            fa()
        return None, None
    va = fa()
    _close(va, vb, rtol, atol)
    return va, vb


def _grads(va, vb, pa, pb, rtol=1e-6, atol=1e-8):
    """Gradients of a weighted sum of the finite values w.r.t. every parameter
    (where some values are infinite, PyTorch's NaN gradients (0 * NaN in the
    backward of the masked-out entries) are not compared)."""
    torch = _torch()
    if not vb.requires_grad:
        assert not va.requires_grad
        return
    w = np.linspace(0.5, 1.5, max(vb.numel(), 1)).reshape(tuple(vb.shape))
    ok = np.isfinite(_np(vb))
    w = np.where(ok, w, 0.0)
    try:
        gb = torch.autograd.grad((torch.where(torch.tensor(ok), vb, 0.0)
                                  * torch.tensor(w)).sum(),
                                 pb.params, allow_unused=True, retain_graph=True)
    except (NotImplementedError, RuntimeError) as e:
        with pytest.raises(type(e)):
            tape.autograd.grad((tape.where(tape.tensor(ok), va, 0.0) * tape.tensor(w)).sum(),
                               pa.params, allow_unused=True, retain_graph=True)
        return
    ga = tape.autograd.grad((tape.where(tape.tensor(ok), va, 0.0) * tape.tensor(w)).sum(),
                            pa.params, allow_unused=True, retain_graph=True)
    for u, v in zip(ga, gb):
        if v is None:
            assert u is None or not np.any(_np(u))
        else:
            un, vn = _np(u), _np(v)
            if not ok.all():
                un = np.where(np.isnan(vn), np.nan, un)
            _close(un, vn, rtol, atol)


@pytest.mark.parametrize('name', NAMES)
def test_shapes_and_flags(name):
    (a, _, _), (b, _, _) = _both(name)
    assert tuple(a.batch_shape) == tuple(b.batch_shape)
    assert tuple(a.event_shape) == tuple(b.event_shape)
    assert a.has_rsample == b.has_rsample
    assert a.has_enumerate_support == b.has_enumerate_support
    tape.manual_seed(0)
    s = a.sample((4, 2))
    assert tuple(s.shape) == tuple(b.sample((4, 2)).shape)
    assert not s.requires_grad
    assert bool(_np(a.support.check(s)).all())
    if a.has_rsample:
        r = a.rsample((3,))
        assert tuple(r.shape) == (3,) + tuple(b.batch_shape) + tuple(b.event_shape)
        assert r.requires_grad
    else:
        with pytest.raises(NotImplementedError):
            a.rsample()
    e = a.expand((5,) + tuple(a.batch_shape))
    assert tuple(e.batch_shape) == (5,) + tuple(b.batch_shape)
    assert tuple(e.sample().shape) == (5,) + tuple(b.batch_shape) + tuple(b.event_shape)


@pytest.mark.parametrize('name', NAMES)
def test_log_prob(name):
    (a, pa, va), (b, pb, vb) = _both(name)
    for x, y in zip(va, vb):
        la, lb = _same_outcome(lambda: a.log_prob(x), lambda: b.log_prob(y))
        _grads(la, lb, pa, pb)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('attr', ['mean', 'variance', 'stddev', 'mode', 'entropy'])
def test_moments_and_entropy(name, attr):
    (a, pa, _), (b, pb, _) = _both(name)
    va, vb = _same_outcome(lambda: getattr(a, attr) if attr != 'entropy' else a.entropy(),
                           lambda: getattr(b, attr) if attr != 'entropy' else b.entropy())
    if vb is not None:
        _grads(va, vb, pa, pb)


@pytest.mark.parametrize('name', NAMES)
def test_cdf_icdf(name):
    (a, pa, xa), (b, pb, xb) = _both(name)
    for x, y in zip(xa, xb):
        ca, cb = _same_outcome(lambda: a.cdf(x), lambda: b.cdf(y))
        if cb is not None:
            _grads(ca, cb, pa, pb)
    q = np.broadcast_to(np.linspace(0.1, 0.9, max(int(np.prod(tuple(b.batch_shape))), 1))
                        .reshape(tuple(b.batch_shape)), tuple(b.batch_shape))
    ia, ib = _same_outcome(lambda: a.icdf(pa.c(q)), lambda: b.icdf(pb.c(q)))
    if ib is not None:
        _grads(ia, ib, pa, pb)
        _close(a.cdf(ia), q)


ATTRS = [
    ('LowRankMultivariateNormal', ['covariance_matrix', 'precision_matrix', 'scale_tril',
                                   'loc', 'cov_factor', 'cov_diag']),
    ('Wishart', ['covariance_matrix', 'precision_matrix', 'scale_tril']),
    ('WishartPrecision', ['covariance_matrix', 'precision_matrix', 'scale_tril']),
    ('WishartScaleTril', ['covariance_matrix', 'precision_matrix', 'scale_tril']),
    ('ContinuousBernoulli', ['probs', 'logits', 'stddev']),
    ('ContinuousBernoulliLogits', ['probs', 'logits']),
    ('Geometric', ['probs', 'logits']),
    ('GeometricLogits', ['probs', 'logits']),
    ('Multinomial', ['probs', 'logits']),
    ('MultinomialLogits', ['probs', 'logits']),
    ('NegativeBinomial', ['probs', 'logits']),
    ('NegativeBinomialLogits', ['probs', 'logits']),
    ('RelaxedBernoulli', ['probs', 'logits', 'temperature']),
    ('RelaxedOneHotCategorical', ['probs', 'logits', 'temperature']),
    ('InverseGamma', ['concentration', 'rate']),
    ('Pareto', ['scale', 'alpha']),
    ('Weibull', ['scale', 'concentration']),
    ('Kumaraswamy', ['concentration1', 'concentration0']),
    ('Gumbel', ['loc', 'scale']),
    ('HalfCauchy', ['scale']),
    ('HalfNormal', ['scale']),
    ('LogNormal', ['loc', 'scale']),
]


@pytest.mark.parametrize('name,attrs', ATTRS, ids=[a[0] for a in ATTRS])
def test_attributes(name, attrs):
    (a, pa, _), (b, pb, _) = _both(name)
    for attr in attrs:
        va, vb = getattr(a, attr), getattr(b, attr)
        _close(va, vb)
        _grads(va, vb, pa, pb)


def test_mixture_same_family_parts():
    (a, _, _), (b, _, _) = _both('MixtureSameFamilyIndependent')
    assert isinstance(a.mixture_distribution, D.Categorical)
    assert isinstance(a.component_distribution, D.Independent)
    _close(a.mixture_distribution.probs, b.mixture_distribution.probs)
    x = np.array([[0.5, -0.2], [1.0, 2.0]])
    _close(a._pad(tape.tensor(x)), b._pad(_torch().tensor(x)))


# --- sample statistics: E[sample] against the mean, and the pathwise gradient
# of E[rsample] against the gradient of the mean

STAT_NAMES = ['Chi2', 'ContinuousBernoulli', 'FisherSnedecor', 'Geometric', 'Gumbel',
              'HalfNormal', 'InverseGamma', 'Kumaraswamy', 'LogNormal',
              'LowRankMultivariateNormal', 'MixtureSameFamily', 'MixtureSameFamilyIndependent',
              'Multinomial', 'NegativeBinomial', 'Pareto', 'StudentT', 'Weibull',
              'Wishart', 'WishartPrecision', 'GeneralizedPareto']


@pytest.mark.parametrize('name', STAT_NAMES)
def test_sample_mean(name):
    (a, pa, _), (b, _, _) = _both(name)
    tape.manual_seed(1234)
    n = 20000
    s = _np(a.sample((n,)))
    mean, var = _np(b.mean), _np(b.variance)
    finite = np.isfinite(var)
    m = s.mean(0)
    se = np.sqrt(np.where(finite, var, 1.0) / n)
    assert np.all(np.abs(m - mean)[finite] < 5 * se[finite] + 1e-9), (m, mean)
    tape.manual_seed(1234)
    np.testing.assert_array_equal(_np(a.sample((n,))), s)  # reproducible


def test_von_mises_sample_statistics():
    """The circular mean of the draws is loc; the mean resultant length is
    I1(k) / I0(k)."""
    torch = _torch()
    d = D.VonMises(tape.tensor([0.0, 1.0, -2.0, 3.0]), tape.tensor([0.5, 2.0, 20.0, 1e-3]))
    tape.manual_seed(5)
    n = 20000
    s = _np(d.sample((n,)))
    assert s.shape == (n, 4) and np.all(np.abs(s) <= np.pi)
    c, sn = np.cos(s).mean(0), np.sin(s).mean(0)
    k = torch.tensor([0.5, 2.0, 20.0, 1e-3])
    r = (torch.special.i1e(k) / torch.special.i0e(k)).numpy()
    np.testing.assert_allclose(np.hypot(c, sn), r, atol=0.015)
    ang = np.arctan2(sn, c)[:3]
    np.testing.assert_allclose(ang, [0.0, 1.0, -2.0], atol=0.1)
    # near-uniform for a tiny concentration: the mean of cos and sin vanish
    assert abs(c[3]) < 0.03 and abs(sn[3]) < 0.03
    tape.manual_seed(5)
    np.testing.assert_array_equal(_np(d.sample((n,))), s)


def test_lkj_cholesky_sample_statistics():
    """L L^T is a correlation matrix; an off-diagonal entry r of LKJ(eta) in
    dimension d has mean 0 and variance 1 / (2 eta + d - 1)."""
    d = D.LKJCholesky(4, tape.tensor([0.5, 3.0], dtype=tape.float64))
    tape.manual_seed(2)
    L = _np(d.sample((20000,)))
    assert L.shape == (20000, 2, 4, 4)
    np.testing.assert_array_equal(np.triu(L, 1), 0)
    C = L @ np.swapaxes(L, -1, -2)
    np.testing.assert_allclose(np.diagonal(C, axis1=-2, axis2=-1), 1.0, atol=1e-10)
    r = C[..., 0, 1]
    np.testing.assert_allclose(r.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(r.var(0), 1 / (2 * np.array([0.5, 3.0]) + 3), rtol=0.05)
    # PyTorch's onion sampler (ported as is) gives the later rows other
    # marginals: compare them with PyTorch's own draws
    torch = _torch()
    torch.manual_seed(2)
    Lt = torch.distributions.LKJCholesky(4, torch.tensor([0.5, 3.0])).sample((20000,))
    Ct = (Lt @ Lt.mT).numpy()
    for i, j in [(0, 2), (1, 2), (0, 3), (2, 3)]:
        np.testing.assert_allclose(C[..., i, j].var(0), Ct[..., i, j].var(0), rtol=0.06)


def test_relaxed_sample_statistics():
    """At a low temperature the relaxed draws concentrate at the vertices with
    the probabilities of the Bernoulli / categorical."""
    tape.manual_seed(4)
    s = _np(D.RelaxedBernoulli(tape.tensor(0.05), tape.tensor([0.2, 0.7])).sample((20000,)))
    assert np.all((s >= 0) & (s <= 1))
    np.testing.assert_allclose((s > 0.5).mean(0), [0.2, 0.7], atol=0.015)
    s = _np(D.RelaxedOneHotCategorical(tape.tensor(0.05),
                                       tape.tensor([0.2, 0.3, 0.5])).sample((20000,)))
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.bincount(s.argmax(-1), minlength=3) / 20000,
                               [0.2, 0.3, 0.5], atol=0.015)


RSAMPLE_NAMES = ['Chi2', 'FisherSnedecor', 'Gumbel', 'HalfNormal', 'InverseGamma',
                 'Kumaraswamy', 'LogNormal', 'LowRankMultivariateNormal',
                 'Weibull', 'Wishart', 'GeneralizedParetoNonzero', 'StudentT', 'Cauchy']


@pytest.mark.parametrize('name', RSAMPLE_NAMES)
def test_rsample_gradient(name):
    """d/dθ mean(f(rsample)) estimates d/dθ E f(X): f = identity where the
    variance is finite; otherwise the expectation of a bounded function
    (atan) is estimated once by the pathwise gradient and once by the score
    function (log_prob gradient) on the same samples."""
    (a, pa, _), (b, _, _) = _both(name)
    tape.manual_seed(7)
    n = 40000
    var = _np(b.variance)
    if np.all(np.isfinite(var)) and name not in ('Cauchy',):
        x = a.rsample((n,))
        ga = tape.autograd.grad(x.mean(0).sum(), pa.params, allow_unused=True,
                                retain_graph=True)
        gm = tape.autograd.grad(a.mean.sum(), pa.params, allow_unused=True)
        sd = np.sqrt(var.sum())
        for u, v in zip(ga, gm):
            if v is None:
                continue
            np.testing.assert_allclose(_np(u), _np(v), rtol=0.1, atol=0.1 * sd)
    else:  # infinite variance, a parameter-free support: the score function
        x = a.rsample((n,))
        f = tape.atan(x)
        ga = tape.autograd.grad(f.mean(0).sum(), pa.params)
        fd = f.detach()
        lp = a.log_prob(x.detach())
        gs = tape.autograd.grad(((fd - fd.mean(0)) * lp).mean(0).sum(), pa.params)
        for u, v in zip(ga, gs):
            np.testing.assert_allclose(_np(u), _np(v), atol=0.05)


class _Shifted(P):
    """A P that adds eps to entry j of its k-th differentiable parameter."""

    def __init__(self, lib, k, j, eps):
        super().__init__(lib)
        self.k, self.j, self.eps = k, j, eps

    def __call__(self, x, grad=True, dtype=F64):
        a = np.array(x, dtype)
        if grad and len(self.params) == self.k:
            a.reshape(-1)[self.j] += self.eps
        return super().__call__(a, grad, dtype)


CRN_NAMES = ['Cauchy', 'Gumbel', 'HalfCauchy', 'HalfNormal', 'Kumaraswamy', 'LogNormal',
             'LogisticNormal', 'LowRankMultivariateNormal', 'Pareto', 'RelaxedBernoulli',
             'RelaxedOneHotCategorical', 'Weibull', 'GeneralizedParetoNonzero',
             'TransformedDistribution', 'TransformedDistributionEvent']


@pytest.mark.parametrize('name', CRN_NAMES)
def test_rsample_gradient_finite_difference(name):
    """With the same seed (common random numbers, no rejection sampling) the
    rsample gradient of mean(atan(x)) is its central finite difference."""
    make = SPECS[name][0]
    p = P(tape)
    d = make(p)
    tape.manual_seed(11)
    f = tape.atan(d.rsample((50,))).mean()
    grads = tape.autograd.grad(f, p.params)
    eps = 1e-6
    for k, g in enumerate(grads):
        gn = _np(g).reshape(-1)
        for j in range(gn.size):
            vals = []
            for sgn in (1, -1):
                tape.manual_seed(11)
                dk = make(_Shifted(tape, k, j, sgn * eps))
                vals.append(float(_np(tape.atan(dk.rsample((50,))).mean())))
            np.testing.assert_allclose(gn[j], (vals[0] - vals[1]) / (2 * eps),
                                       rtol=1e-5, atol=1e-8, err_msg=f'{name} param {k}[{j}]')


def test_rsample_gradient_is_exact_for_location_scale():
    tape.manual_seed(3)
    loc = tape.tensor([0.5, -1.0], dtype=tape.float64, requires_grad=True)
    scale = tape.tensor([2.0, 0.5], dtype=tape.float64, requires_grad=True)
    for d in [D.Cauchy(loc, scale), D.Gumbel(loc, scale), D.StudentT(3.0, loc, scale)]:
        x = d.rsample((10,))
        gl, gs = tape.autograd.grad(x.sum(), [loc, scale])
        _close(gl, [10.0, 10.0])
        z = (x.detach() - loc.detach()) / scale.detach()
        _close(gs, _np(z).sum(0))


# --- supports and validation

def test_supports_match_torch():
    torch = _torch()
    probes = np.array([-1.0, 0.0, 0.3, 1.0, 2.5, np.inf, np.nan])
    for name in NAMES:
        (a, _, _), (b, _, _) = _both(name)
        if tuple(b.event_shape):
            continue
        shape = tuple(b.batch_shape)
        for v in probes:
            x = np.full(shape, v)
            ra = _np(a.support.check(tape.tensor(x)))
            rb = b.support.check(torch.tensor(x)).numpy()
            np.testing.assert_array_equal(ra, rb, err_msg=f'{name} {v}')
        assert type(a.support).__name__ == type(b.support).__name__


BAD_PARAMS = [
    lambda D: D.Cauchy(0.0, -1.0),
    lambda D: D.Chi2(-1.0),
    lambda D: D.ContinuousBernoulli(1.5),
    lambda D: D.FisherSnedecor(1.0, 0.0),
    lambda D: D.Geometric(0.0),
    lambda D: D.Gumbel(0.0, 0.0),
    lambda D: D.HalfCauchy(-1.0),
    lambda D: D.HalfNormal(-1.0),
    lambda D: D.InverseGamma(-1.0, 1.0),
    lambda D: D.Kumaraswamy(1.0, -1.0),
    lambda D: D.Multinomial(3, [0.5, -0.1]),
    lambda D: D.NegativeBinomial(-1.0, 0.5),
    lambda D: D.Pareto(1.0, 0.0),
    lambda D: D.StudentT(-1.0),
    lambda D: D.VonMises(0.0, -1.0),
    lambda D: D.Weibull(1.0, -1.0),
    lambda D: D.GeneralizedPareto(0.0, -1.0, 0.1),
    lambda D: D.RelaxedBernoulli(0.5, 1.5),
    lambda D: D.LogNormal(0.0, -1.0),
]


def _lift(lib, f):
    """Run f with Python floats/lists turned into float64 tensors of lib."""
    class _D:
        def __getattr__(self, k):
            cls = getattr(lib.distributions, k)

            def make(*args, **kw):
                conv = [lib.tensor(x, dtype=lib.float64) if isinstance(x, (float, list)) else x
                        for x in args]
                return cls(*conv, validate_args=True, **kw)
            return make
    return f(_D())


@pytest.mark.parametrize('i', range(len(BAD_PARAMS)))
def test_parameter_validation(i):
    torch = _torch()
    with pytest.raises(ValueError) as eb:
        _lift(torch, BAD_PARAMS[i])
    with pytest.raises(type(eb.value)):
        _lift(tape, BAD_PARAMS[i])


def test_lkj_wishart_lowrank_validation():
    for lib in (_torch(), tape):
        TD = lib.distributions
        t = lambda x: lib.tensor(np.asarray(x, F64))  # noqa: E731
        with pytest.raises(ValueError):
            TD.LKJCholesky(3, t(-1.0), validate_args=True)
        with pytest.raises(ValueError):
            TD.LKJCholesky(1, t(1.0))
        with pytest.raises(ValueError):
            TD.Wishart(t(1.0), covariance_matrix=t(_SPD), validate_args=True)  # df <= p - 1
        with pytest.raises(AssertionError):  # as in PyTorch
            TD.Wishart(t(4.0))
        with pytest.raises(ValueError):
            TD.LowRankMultivariateNormal(t([0.0, 0.0]), t([1.0, 1.0]), t([1.0, 1.0]))
        with pytest.raises(ValueError):
            TD.LowRankMultivariateNormal(t([0.0, 0.0]), t([[1.0], [1.0]]), t([1.0, -1.0]),
                                         validate_args=True)
        with pytest.raises(ValueError):
            TD.MixtureSameFamily(TD.Normal(t([0.0]), t([1.0])), TD.Normal(t([0.0]), t([1.0])))


OUT_OF_SUPPORT = {
    'Cauchy': None, 'Chi2': -1.0, 'ContinuousBernoulli': 1.5, 'FisherSnedecor': -1.0,
    'Geometric': 0.5, 'Gumbel': None, 'HalfCauchy': -1.0, 'HalfNormal': -0.5,
    'InverseGamma': -1.0, 'Kumaraswamy': 1.5, 'Pareto': 0.1, 'StudentT': None,
    'VonMises': None, 'Weibull': -1.0, 'NegativeBinomial': 1.5, 'LogNormal': -1.0,
    'RelaxedBernoulli': 1.5, 'GeneralizedPareto': -5.0,
}


@pytest.mark.parametrize('name', sorted(OUT_OF_SUPPORT))
def test_log_prob_validates_value(name):
    v = OUT_OF_SUPPORT[name]
    if v is None:
        v = math.nan
    (a, pa, _), (b, pb, _) = _both(name)
    shape = tuple(b.batch_shape)
    with pytest.raises(ValueError):
        b.log_prob(pb.c(np.full(shape, v)))
    with pytest.raises(ValueError):
        a.log_prob(pa.c(np.full(shape, v)))


# --- KL divergences: every registered pair that both libraries have

KL_DISTS = {
    'Bernoulli': lambda p: p.D.Bernoulli(p([0.3, 0.7])),
    'Beta': lambda p: p.D.Beta(p([1.5, 3.0]), p([2.0, 0.8])),
    'Binomial': lambda p: p.D.Binomial(5, p([0.3, 0.6])),
    'Categorical': lambda p: p.D.Categorical(p([[0.2, 0.8], [0.6, 0.4]])),
    'Cauchy': lambda p: p.D.Cauchy(p([0.0, 1.0]), p([1.0, 2.0])),
    'ContinuousBernoulli': lambda p: p.D.ContinuousBernoulli(p([0.3, 0.8])),
    'Dirichlet': lambda p: p.D.Dirichlet(p([[1.0, 2.0], [0.5, 3.0]])),
    'Exponential': lambda p: p.D.Exponential(p([1.5, 0.5])),
    'Gamma': lambda p: p.D.Gamma(p([2.0, 3.5]), p([1.0, 0.5])),
    'Geometric': lambda p: p.D.Geometric(p([0.3, 0.6])),
    'Gumbel': lambda p: p.D.Gumbel(p([0.5, -1.0]), p([1.0, 2.0])),
    'HalfNormal': lambda p: p.D.HalfNormal(p([1.0, 2.0])),
    'Laplace': lambda p: p.D.Laplace(p([0.0, 1.0]), p([1.0, 0.5])),
    'LogNormal': lambda p: p.D.LogNormal(p([0.0, 1.0]), p([1.0, 0.5])),
    'LowRankMultivariateNormal': lambda p: p.D.LowRankMultivariateNormal(
        p([[0.0, 1.0], [0.5, -0.5]]), p([[[1.0], [0.5]]]), p([1.0, 2.0])),
    'MultivariateNormal': lambda p: p.D.MultivariateNormal(
        p([[1.0, 0.0], [0.0, 0.5]]), p([[2.0, 0.5], [0.5, 1.0]])),
    'Normal': lambda p: p.D.Normal(p([0.0, 1.0]), p([1.0, 0.5])),
    'OneHotCategorical': lambda p: p.D.OneHotCategorical(p([[0.3, 0.7], [0.5, 0.5]])),
    'Pareto': lambda p: p.D.Pareto(p([1.0, 2.0]), p([3.0, 2.5])),
    'Poisson': lambda p: p.D.Poisson(p([1.0, 3.0])),
    # (away from 0 and 1, where PyTorch's gradients of KL(Uniform || Beta) are NaN)
    'Uniform': lambda p: p.D.Uniform(p([0.1, 0.05]), p([0.9, 0.95])),
    'Independent': lambda p: p.D.Independent(p.D.Normal(p([[0.0, 1.0]]), p([[1.0, 2.0]])), 1),
    'TransformedDistribution': lambda p: p.D.TransformedDistribution(
        p.D.Normal(p([0.0, 1.0]), p([1.0, 0.5])), [p.D.ExpTransform()]),
}


def _kl_pairs():
    torch = pytest.importorskip("torch")
    pairs = []
    for (tp, tq) in torch.distributions.kl._KL_REGISTRY:
        np_, nq = tp.__name__, tq.__name__
        if np_ in KL_DISTS and nq in KL_DISTS:
            pairs.append((np_, nq))
    return sorted(pairs)


try:
    KL_PAIRS = _kl_pairs()
except BaseException:  # torch missing: the tests skip
    KL_PAIRS = [('Normal', 'Normal')]


def test_kl_pairs_cover_the_new_distributions():
    names = {n for pair in KL_PAIRS for n in pair}
    for n in ['ContinuousBernoulli', 'Geometric', 'Gumbel', 'HalfNormal', 'Pareto',
              'LowRankMultivariateNormal', 'TransformedDistribution']:
        assert n in names
    assert len(KL_PAIRS) > 60


@pytest.mark.parametrize('pq', KL_PAIRS, ids=['-'.join(x) for x in KL_PAIRS])
def test_kl(pq):
    torch = _torch()
    pa, pb = P(tape), P(torch)
    p_a, q_a = KL_DISTS[pq[0]](pa), KL_DISTS[pq[1]](pa)
    p_b, q_b = KL_DISTS[pq[0]](pb), KL_DISTS[pq[1]](pb)
    va, vb = _same_outcome(lambda: D.kl_divergence(p_a, q_a),
                           lambda: torch.distributions.kl_divergence(p_b, q_b))
    if vb is not None:
        _grads(va, vb, pa, pb)


def test_kl_lowrank_against_full_mvn():
    p = D.LowRankMultivariateNormal(tape.tensor([0.0, 1.0, 2.0]),
                                    tape.tensor([[1.0], [0.5], [-0.2]]),
                                    tape.tensor([1.0, 2.0, 0.5]))
    q = D.MultivariateNormal(tape.tensor([0.5, 0.0, 1.0]), p.covariance_matrix * 1.5)
    full = D.MultivariateNormal(p.loc, p.covariance_matrix)
    _close(D.kl_divergence(p, q), D.kl_divergence(full, q), rtol=1e-5)
    _close(p.log_prob(tape.tensor([0.3, 0.2, 0.1])),
           full.log_prob(tape.tensor([0.3, 0.2, 0.1])), rtol=1e-5)


# --- transforms

TRANSFORMS = {
    'Exp': (lambda p: p.D.ExpTransform(), lambda p: p([0.3, -1.2, 2.0])),
    'Power': (lambda p: p.D.PowerTransform(p([2.0, 0.5, 3.0])), lambda p: p([0.3, 1.2, 2.0])),
    'Sigmoid': (lambda p: p.D.SigmoidTransform(), lambda p: p([0.3, -4.0, 2.0])),
    'Tanh': (lambda p: p.D.TanhTransform(), lambda p: p([0.3, -1.5, 2.0])),
    'Softplus': (lambda p: p.D.SoftplusTransform(), lambda p: p([0.3, -1.5, 4.0])),
    'Abs': (lambda p: p.D.AbsTransform(), lambda p: p([0.3, -1.5, 4.0])),
    'Affine': (lambda p: p.D.AffineTransform(p([1.0, -1.0, 0.0]), p([2.0, -0.5, 3.0])),
               lambda p: p([0.3, -1.5, 4.0])),
    'AffineEvent': (lambda p: p.D.AffineTransform(p(1.0), p([2.0, -0.5, 3.0]), event_dim=1),
                    lambda p: p([[0.3, -1.5, 4.0], [1.0, 2.0, 3.0]])),
    'Softmax': (lambda p: p.D.SoftmaxTransform(), lambda p: p([0.3, -1.5, 2.0])),
    'StickBreaking': (lambda p: p.D.StickBreakingTransform(),
                      lambda p: p([[0.3, -1.5, 2.0], [0.0, 1.0, -0.5]])),
    'LowerCholesky': (lambda p: p.D.LowerCholeskyTransform(),
                      lambda p: p([[0.3, 1.0, 2.0], [-0.5, 0.2, 0.7], [1.1, -0.4, -1.0]])),
    'PositiveDefinite': (lambda p: p.D.PositiveDefiniteTransform(),
                         lambda p: p([[0.3, 1.0], [-0.5, 0.2]])),
    'CorrCholesky': (lambda p: p.D.CorrCholeskyTransform(),
                     lambda p: p([[0.3, -1.5, 2.0], [0.5, 0.1, -0.7]])),
    'Compose': (lambda p: p.D.ComposeTransform([p.D.AffineTransform(p(0.5), p(2.0)),
                                                p.D.ExpTransform(),
                                                p.D.PowerTransform(p(1.5))]),
                lambda p: p([0.3, -1.5, 2.0])),
    'ComposeEvent': (lambda p: p.D.ComposeTransform([p.D.ExpTransform(),
                                                     p.D.StickBreakingTransform()]),
                     lambda p: p([0.3, -1.5, 2.0])),
    'Inverse': (lambda p: p.D.SigmoidTransform().inv, lambda p: p([0.3, 0.6, 0.9])),
    'Cat': (lambda p: p.D.CatTransform([p.D.ExpTransform(), p.D.AffineTransform(p(1.0), p(3.0))],
                                       dim=0, lengths=[2, 1]),
            lambda p: p([[0.3, 0.5], [-1.5, 1.0], [2.0, -0.7]])),
    'Stack': (lambda p: p.D.StackTransform([p.D.ExpTransform(), p.D.SigmoidTransform()], dim=1),
              lambda p: p([[0.3, 0.5], [-1.5, 1.0], [2.0, -0.7]])),
    'Reshape': (lambda p: p.D.ReshapeTransform((2, 3), (3, 2)),
                lambda p: p([[0.3, 0.5, 1.0], [-1.5, 1.0, 2.0]])),
    'Independent': (lambda p: p.D.IndependentTransform(p.D.ExpTransform(), 1),
                    lambda p: p([[0.3, 0.5], [-1.5, 1.0]])),
    'CumulativeDistribution': (
        lambda p: p.D.CumulativeDistributionTransform(p.D.Normal(p([0.0, 1.0]), p([1.0, 2.0]))),
        lambda p: p([0.3, -1.5])),
    'Identity': (lambda p: p.D.identity_transform, lambda p: p([0.3, -1.5])),
}
TNAMES = sorted(TRANSFORMS)


@pytest.mark.parametrize('name', TNAMES)
def test_transform(name):
    torch = _torch()
    make, x = TRANSFORMS[name]
    pa, pb = P(tape), P(torch)
    ta, tb = make(pa), make(pb)
    xa, xb = x(pa), x(pb)
    ya, yb = ta(xa), tb(xb)
    _close(ya, yb)
    _grads(ya, yb, pa, pb)
    assert ta.domain.event_dim == tb.domain.event_dim
    assert ta.codomain.event_dim == tb.codomain.event_dim
    assert ta.bijective == tb.bijective
    assert type(ta.domain).__name__ == type(tb.domain).__name__
    assert type(ta.codomain).__name__ == type(tb.codomain).__name__
    assert tuple(ta.forward_shape(xa.shape)) == tuple(tb.forward_shape(xb.shape))
    assert tuple(ta.inverse_shape(ya.shape)) == tuple(tb.inverse_shape(yb.shape))
    # inverse (and its cache: the same object comes back for the cached y)
    za, zb = ta.inv(ya.detach()), tb.inv(yb.detach())
    _close(za, zb)
    if ta.bijective and name != 'Abs':
        _close(za, xa.detach(), rtol=1e-6, atol=1e-8)
    ja, jb = _same_outcome(lambda: ta.log_abs_det_jacobian(xa, ya),
                           lambda: tb.log_abs_det_jacobian(xb, yb))
    if jb is not None:
        _grads(ja, jb, pa, pb)
    try:
        sb = tb.sign
    except NotImplementedError:
        sb = None
    if sb is not None:
        sa = ta.sign
        _close(sa if isinstance(sa, tape.Tensor) else np.asarray(sa),
               sb if isinstance(sb, torch.Tensor) else np.asarray(sb))


def test_transform_log_det_is_the_jacobian():
    """log|det J| of the scalar and the square (event_dim 1, same size) bijections
    against the Jacobian formed by autograd."""
    for t, x in [(D.ExpTransform(), [0.3]), (D.TanhTransform(), [0.4]),
                 (D.SoftplusTransform(), [-0.7]), (D.SigmoidTransform(), [1.3]),
                 (D.PowerTransform(tape.tensor(2.5, dtype=tape.float64)), [0.8])]:
        xt = tape.tensor(x, dtype=tape.float64, requires_grad=True)
        y = t(xt)
        (g,) = tape.autograd.grad(y.sum(), [xt])
        _close(t.log_abs_det_jacobian(xt, y), np.log(np.abs(_np(g))))
    # StickBreaking: R^3 -> simplex in R^4; the Jacobian of the first 3 outputs
    t = D.StickBreakingTransform()
    x0 = np.array([0.3, -1.5, 2.0])
    J = np.zeros((3, 3))
    for i in range(3):
        xt = tape.tensor(x0, requires_grad=True)
        (g,) = tape.autograd.grad(t(xt)[i], [xt])
        J[i] = _np(g)
    x = tape.tensor(x0)
    _close(t.log_abs_det_jacobian(x, t(x)), np.log(abs(np.linalg.det(J))))


def test_transform_caching_and_equality():
    t = D.ExpTransform(cache_size=1)
    x = tape.tensor([0.3, 1.0])
    y = t(x)
    assert t.inv(y) is x
    assert D.ExpTransform() == D.ExpTransform()
    assert D.ExpTransform() != D.SigmoidTransform()
    assert D.ExpTransform().inv.inv == D.ExpTransform()
    assert D.AffineTransform(0.0, 2.0) == D.AffineTransform(0.0, 2.0)
    assert D.AffineTransform(0.0, 2.0) != D.AffineTransform(0.0, 3.0)
    c = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)])
    assert c == D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)])
    assert D.ComposeTransform([]) == D.identity_transform
    with pytest.raises(ValueError):
        D.ExpTransform(cache_size=2)
    with pytest.raises(NotImplementedError):
        D.AbsTransform().log_abs_det_jacobian(x, x)
    assert repr(D.ExpTransform()) == 'ExpTransform()'
    assert D.ExpTransform().with_cache(1)._cache_size == 1


CONSTRAINTS = [
    ('real', (3,)), ('positive', (3,)), ('nonnegative', (3,)), ('unit_interval', (3,)),
    ('greater_than', (3,)), ('less_than', (3,)), ('interval', (3,)),
    ('greater_than_eq', (3,)), ('simplex', (2, 3)), ('lower_cholesky', (3, 3)),
    ('positive_definite', (3, 3)), ('positive_semidefinite', (3, 3)),
    ('corr_cholesky', (3,)), ('real_vector', (3,)), ('independent', (2, 3)),
    ('cat', (4,)), ('stack', (3, 2)), ('half_open_interval', (3,)),
]


def _constraint(lib, name):
    C = lib.distributions.constraints
    return {
        'greater_than': lambda: C.greater_than(1.5),
        'greater_than_eq': lambda: C.greater_than_eq(-1.0),
        'less_than': lambda: C.less_than(2.0),
        'interval': lambda: C.interval(-1.0, 3.0),
        'half_open_interval': lambda: C.half_open_interval(0.0, 2.0),
        'independent': lambda: C.independent(C.positive, 1),
        'cat': lambda: C.cat([C.positive, C.interval(0.0, 1.0)], 0, [2, 2]),
        'stack': lambda: C.stack([C.real, C.positive], 1),
    }.get(name, lambda: getattr(C, name))()


@pytest.mark.parametrize('name,shape', CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
@pytest.mark.parametrize('which', ['biject_to', 'transform_to'])
def test_constraint_registry(name, shape, which):
    torch = _torch()
    x = np.linspace(-1.3, 1.7, int(np.prod(shape))).reshape(shape)
    pa, pb = P(tape), P(torch)
    xa, xb = pa(x), pb(x)
    try:
        tb = getattr(torch.distributions, which)(_constraint(torch, name))
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            getattr(D, which)(_constraint(tape, name))
        return
    ta = getattr(D, which)(_constraint(tape, name))
    assert type(ta).__name__ == type(tb).__name__
    ya, yb = ta(xa), tb(xb)
    _close(ya, yb)
    _grads(ya, yb, pa, pb)
    assert bool(_np(_constraint(tape, name).check(ya.detach())).all())
    ja, jb = _same_outcome(lambda: ta.log_abs_det_jacobian(xa, ya),
                           lambda: tb.log_abs_det_jacobian(xb, yb))
    if jb is not None:
        _grads(ja, jb, pa, pb)
    _close(ta.inv(ya.detach()), tb.inv(yb.detach()))


def test_lognormal_is_a_transformed_distribution():
    d = D.LogNormal(tape.tensor([0.0, 1.0]), tape.tensor([1.0, 0.5]))
    assert isinstance(d, D.TransformedDistribution)
    assert isinstance(d.base_dist, D.Normal)
    assert isinstance(d.transforms[0], D.ExpTransform)


def test_exports_match_torch():
    torch = _torch()
    assert set(torch.distributions.__all__) <= set(D.__all__)
    for n in torch.distributions.transforms.__all__:
        assert hasattr(D.transforms, n)
    assert not any(m.startswith(('torch', 'scipy')) for m in
                   __import__('sys').modules if m.startswith('tape.distributions'))
