"""softplus / logsigmoid / binary_cross_entropy_with_logits, nll_loss and
cross_entropy after the speed work: values and gradients against PyTorch in
float32 and float64, below and above the large-tensor size, extreme inputs,
second order, and checks that the fast forms are the ones running."""
import math

import numpy as np
import pytest

import tape
import tape.nn.functional as TF
from tape._big import BIG

torch = pytest.importorskip("torch")
F = torch.nn.functional

EXTREME = [0.0, -0.0, 1e-8, -1e-8, 19.9, 20.0, 20.1, -20.0, -20.1, 30.0, -30.0, 88.0, 89.0,
           -88.0, -104.0, -110.0, 700.0, -700.0, 800.0, -800.0, math.inf, -math.inf]
SIZES = [(8, 16), (256, 512)]          # below and above BIG
assert 8 * 16 < BIG <= 256 * 512


def _inputs(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10).astype(dt)
    flat = x.reshape(-1)
    flat[:len(EXTREME)] = EXTREME
    return x, rng


def _close(got, want, dt, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    if dt == np.float64:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, err_msg=what)
    else:
        # float32 rounding: a few ulps of the value, or of an O(1) term it cancels against
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=5e-7, err_msg=what)


SOFTPLUS_CASES = [
    ('softplus', lambda F_, x, y: F_.softplus(x)),
    ('softplus_beta', lambda F_, x, y: F_.softplus(x, 2.0, 5.0)),
    ('softplus_half', lambda F_, x, y: F_.softplus(x, 0.5, 3.0)),
    ('logsigmoid', lambda F_, x, y: F_.logsigmoid(x)),
]


@pytest.mark.parametrize('shape', SIZES)
@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('name,fn', SOFTPLUS_CASES)
def test_softplus_family_matches_torch(name, fn, dt, shape):
    x, rng = _inputs(shape, dt)
    g = rng.standard_normal(shape).astype(dt)
    X = torch.tensor(x, requires_grad=True)
    A = tape.tensor(x, requires_grad=True)
    ot, oa = fn(F, X, None), fn(TF, A, None)
    _close(oa.detach().numpy(), ot.detach().numpy(), dt, f'{name} value')
    assert oa.detach().numpy().dtype == dt
    ot.backward(torch.tensor(g))
    oa.backward(tape.tensor(g))
    _close(A.grad.numpy(), X.grad.numpy(), dt, f'{name} gradient')


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_softplus_nan_propagates(dt):
    x = np.array([np.nan, 1.0, -np.nan], dt)
    for f in (lambda m, v: m.softplus(v), lambda m, v: m.softplus(v, 2.0, 5.0),
              lambda m, v: m.logsigmoid(v)):
        got = f(TF, tape.tensor(x)).numpy()
        want = f(F, torch.tensor(x)).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize('shape', SIZES)
@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('pos_weight', [False, True])
def test_bce_with_logits_matches_torch(shape, dt, pos_weight):
    x, rng = _inputs(shape, dt, 1)
    x = np.clip(x, -80, 80).astype(dt)    # finite logits (inf ones give NaN gradients in both)
    y = rng.random(shape).astype(dt)
    pw = (rng.random(shape[-1]) * 3).astype(dt) if pos_weight else None
    X = torch.tensor(x, requires_grad=True)
    A = tape.tensor(x, requires_grad=True)
    kw_t = {'pos_weight': torch.tensor(pw)} if pos_weight else {}
    kw_a = {'pos_weight': tape.tensor(pw)} if pos_weight else {}
    lt = F.binary_cross_entropy_with_logits(X, torch.tensor(y), reduction='sum', **kw_t)
    la = TF.binary_cross_entropy_with_logits(A, tape.tensor(y), reduction='sum', **kw_a)
    np.testing.assert_allclose(float(la.detach()), float(lt.detach()), rtol=1e-5 if dt == np.float32 else 1e-9)
    lt.backward()
    la.backward()
    _close(A.grad.numpy(), X.grad.numpy(), dt, 'bce gradient')


def test_softplus_does_not_use_logaddexp(monkeypatch):
    # np.logaddexp has no SIMD loop (~20 ns an element): the forward must not call it
    def refuse(*args, **kwargs):
        raise AssertionError('np.logaddexp called')
    monkeypatch.setattr(np, 'logaddexp', refuse)
    x = tape.tensor(np.linspace(-30, 30, 40000, dtype=np.float32), requires_grad=True)
    TF.softplus(x).sum().backward()
    TF.logsigmoid(x).sum().backward()
    TF.binary_cross_entropy_with_logits(x, tape.zeros(40000)).backward()


@pytest.mark.parametrize('beta,threshold', [(1.0, 20.0), (2.0, 5.0), (1.0, math.inf)])
def test_softplus_second_order_matches_torch(beta, threshold):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(50) * 4
    X = torch.tensor(x, requires_grad=True)
    A = tape.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(F.softplus(X, beta, threshold).sum(), X, create_graph=True)
    (ga,) = tape.autograd.grad(TF.softplus(A, beta, threshold).sum(), A, create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gt.detach().numpy(), rtol=1e-10)
    (ht,) = torch.autograd.grad((gt * gt).sum(), X)
    (ha,) = tape.autograd.grad((ga * ga).sum(), A)
    np.testing.assert_allclose(ha.numpy(), ht.numpy(), rtol=1e-9, atol=1e-14)
    assert tape.autograd.gradgradcheck(lambda v: TF.softplus(v, beta, threshold),
                                       (tape.tensor(x[:8], requires_grad=True),))


@pytest.mark.parametrize('dt', [np.float32, np.float64])
def test_softplus_jit_matches_eager(dt):
    x, _ = _inputs((8, 16), dt, 5)

    @tape.jit
    def f(v):
        return TF.softplus(v, 2.0, 5.0) + TF.logsigmoid(v)
    for seed in (5, 6):
        x, _ = _inputs((8, 16), dt, seed)
        A = tape.tensor(x, requires_grad=True)
        B = tape.tensor(x, requires_grad=True)
        got = f(A)
        want = TF.softplus(B, 2.0, 5.0) + TF.logsigmoid(B)
        _close(got.detach().numpy(), want.detach().numpy(), dt, 'jit value')
        got.sum().backward()
        want.sum().backward()
        _close(A.grad.numpy(), B.grad.numpy(), dt, 'jit gradient')


def test_vectorized_exp_matches_math_exp():
    from numba import njit

    from compiler.kernels import sigmoid, vexp

    @njit
    def both(x, e, s):
        for i in range(x.size):
            e[i] = vexp(x[i])
            s[i] = sigmoid(x[i])
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-760, 720, 20000), rng.uniform(-5, 5, 20000),
                        [np.inf, -np.inf, np.nan, 0.0, -0.0, 709.78, 709.79, -745.13, -745.14,
                         -708.4, -720.0]])
    e, s = np.empty_like(x), np.empty_like(x)
    both(x, e, s)
    with np.errstate(all='ignore'):
        want_e = np.exp(x)
        want_s = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_array_equal(np.isnan(e), np.isnan(x))
    np.testing.assert_allclose(e, want_e, rtol=5e-16, atol=1e-323)
    np.testing.assert_allclose(s, want_s, rtol=5e-16, atol=0)


@pytest.mark.parametrize('shape', SIZES + [(4, 6, 5)])
@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('op', ['nll_loss', 'cross_entropy'])
@pytest.mark.parametrize('weighted', [False, True])
def test_class_losses_match_torch(op, dt, shape, weighted):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(dt)
    C = shape[1]
    t = rng.integers(0, C, (shape[0],) + shape[2:])
    t.reshape(-1)[::5] = -100                      # some ignored targets
    w = (rng.random(C) + 0.5).astype(dt) if weighted else None
    X = torch.tensor(x, requires_grad=True)
    A = tape.tensor(x, requires_grad=True)
    ft, fa = getattr(F, op), getattr(TF, op)
    lt = ft(X, torch.tensor(t), weight=None if w is None else torch.tensor(w))
    la = fa(A, tape.tensor(t), weight=None if w is None else tape.tensor(w))
    np.testing.assert_allclose(float(la.detach()), float(lt.detach()), rtol=1e-5 if dt == np.float32 else 1e-10)
    lt.backward()
    la.backward()
    assert A.grad.numpy().dtype == dt
    _close(A.grad.numpy(), X.grad.numpy(), dt, f'{op} gradient')


def test_nll_loss_big_backward_scatters():
    # a large input's loss is one record (tape/nn/_cross_entropy.py), whose
    # backward writes the targets' entries into float32 zeros
    x = tape.tensor(np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32),
                    requires_grad=True)
    t = tape.tensor(np.random.default_rng(1).integers(0, 512, 256))
    loss = TF.nll_loss(x, t)
    assert loss._tape.n == 1 and loss.grad_fn.name() == 'NllLossBackward0'
    loss.backward()
    assert x.grad.numpy().dtype == np.float32
    want = np.zeros((256, 512), np.float32)
    want[np.arange(256), t.numpy()] = -1.0 / 256
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_nll_loss_second_order_matches_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5))
    t = rng.integers(0, 5, 6)
    X = torch.tensor(x, requires_grad=True)
    A = tape.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(F.cross_entropy(X, torch.tensor(t)), X, create_graph=True)
    (ga,) = tape.autograd.grad(TF.cross_entropy(A, tape.tensor(t)), A, create_graph=True)
    (ht,) = torch.autograd.grad((gt * gt).sum(), X)
    (ha,) = tape.autograd.grad((ga * ga).sum(), A)
    np.testing.assert_allclose(ha.numpy(), ht.numpy(), rtol=1e-9, atol=1e-14)
