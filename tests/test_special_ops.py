"""Special functions (lgamma, digamma, polygamma, erfc, erfinv, tape.special) and
the composites logcumsumexp, meshgrid, tensor_split, cross, searchsorted,
bincount, cartesian_prod: values and gradients against PyTorch, float64
gradcheck and gradgradcheck."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _both(fn, *arrays, grad=True):
    """fn on tape and on torch; values and gradients of sum(out * w) compared."""
    ts = [tape.tensor(a, dtype=tape.float64, requires_grad=grad) for a in arrays]
    qs = [torch.tensor(a, dtype=torch.float64, requires_grad=grad) for a in arrays]
    y, z = fn(tape, *ts), fn(torch, *qs)
    np.testing.assert_allclose(y.detach().numpy(), z.detach().numpy(), rtol=1e-9, atol=1e-10)
    if grad:
        w = RNG.uniform(0.5, 1.5, np.shape(z.detach().numpy()))
        (y * tape.tensor(w)).sum().backward()
        (z * torch.tensor(w)).sum().backward()
        for t, q in zip(ts, qs):
            np.testing.assert_allclose(t.grad.numpy(), q.grad.numpy(), rtol=1e-7, atol=1e-9)


def _gradchecks(fn, *arrays):
    xs = tuple(tape.tensor(a, dtype=tape.float64, requires_grad=True) for a in arrays)
    assert tape.autograd.gradcheck(fn, xs)
    assert tape.autograd.gradgradcheck(fn, xs)


POS = RNG.uniform(0.2, 6.0, (3, 4))
REAL = RNG.uniform(-3.0, 3.0, (3, 4))
UNIT = RNG.uniform(-0.95, 0.95, (3, 4))
NEG = np.array([-2.5, -1.3, -0.4, 0.7, 25.0, 130.0])


@pytest.mark.parametrize('name,fn,x', [
    ('lgamma', lambda m, x: m.lgamma(x), POS),
    ('lgamma_neg', lambda m, x: x.lgamma(), NEG),
    ('digamma', lambda m, x: m.digamma(x), POS),
    ('digamma_neg', lambda m, x: x.digamma(), NEG),
    ('polygamma1', lambda m, x: m.polygamma(1, x), POS),
    ('polygamma3', lambda m, x: m.polygamma(3, x), POS),
    ('polygamma0', lambda m, x: m.polygamma(0, x), POS),
    ('erfc', lambda m, x: m.erfc(x), REAL),
    ('erfinv', lambda m, x: x.erfinv(), UNIT),
    ('special_ndtr', lambda m, x: m.special.ndtr(x), REAL),
    ('special_ndtri', lambda m, x: m.special.ndtri(x), RNG.uniform(0.05, 0.95, (5,))),
    ('special_gammaln', lambda m, x: m.special.gammaln(x), POS),
    ('special_psi', lambda m, x: m.special.psi(x), POS),
    ('special_expit', lambda m, x: m.special.expit(x), REAL),
    ('special_logit', lambda m, x: m.special.logit(x), RNG.uniform(0.1, 0.9, (4,))),
    ('special_xlogy', lambda m, x: m.special.xlogy(x, x * x + 1), REAL),
    ('special_logsumexp', lambda m, x: m.special.logsumexp(x, 1), REAL),
    ('special_erf', lambda m, x: m.special.erf(x) + m.special.erfc(x) * 2, REAL),
    ('special_log1p_expm1', lambda m, x: m.special.log1p(m.special.expm1(x)), REAL),
    ('special_erfinv', lambda m, x: m.special.erfinv(x), UNIT),
])
def test_special_vs_torch(name, fn, x):
    _both(fn, x)


@pytest.mark.parametrize('fn,x', [
    (lambda x: tape.lgamma(x), POS), (lambda x: tape.digamma(x), POS),
    (lambda x: tape.polygamma(2, x), POS), (lambda x: tape.erfc(x), REAL),
    (lambda x: tape.erfinv(x), UNIT),
])
def test_special_gradchecks(fn, x):
    _gradchecks(fn, x[:2, :3])


def test_special_edges_vs_torch():
    x = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1e-300, 171.5, 1e5])
    with np.errstate(all='ignore'):
        for f in ('lgamma', 'digamma', 'erfc'):
            a = getattr(tape, f)(tape.tensor(x, dtype=tape.float64)).numpy()
            b = getattr(torch, f)(torch.tensor(x, dtype=torch.float64)).numpy()
            np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True, err_msg=f)
    u = np.array([-1.0, 1.0, 1.5, -2.0, np.nan, 0.0, -0.0, 1 - 1e-12, -1 + 1e-15, 1e-20])
    np.testing.assert_allclose(tape.erfinv(tape.tensor(u, dtype=tape.float64)).numpy(),
                               torch.erfinv(torch.tensor(u, dtype=torch.float64)).numpy(),
                               rtol=1e-9, equal_nan=True)


def test_special_dtypes_and_big_and_jit():
    x32 = tape.tensor(POS, dtype=tape.float32)
    assert tape.lgamma(x32).dtype == tape.float32
    assert tape.digamma(tape.tensor([1, 2, 3])).dtype == tape.float32
    np.testing.assert_allclose(tape.digamma(tape.tensor([1, 2, 3])).numpy(),
                               torch.digamma(torch.tensor([1, 2, 3])).numpy(), rtol=1e-6)
    # the large-tensor path (chunk kernels) and the Numba sweep
    big = RNG.uniform(0.3, 4.0, 20000)
    t = tape.tensor(big, requires_grad=True)
    q = torch.tensor(big, requires_grad=True)
    (tape.lgamma(t) + tape.erfc(t) + tape.digamma(t) + tape.erfinv(t * 0.2)).sum().backward()
    (torch.lgamma(q) + torch.erfc(q) + torch.digamma(q) + torch.erfinv(q * 0.2)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), q.grad.numpy(), rtol=1e-8)

    @tape.jit
    def f(x):
        return (tape.lgamma(x) * tape.erfc(x) + tape.polygamma(1, x) + tape.erfinv(x * 0.1)).sum()

    for seed in range(2):
        v = np.random.default_rng(seed).uniform(0.5, 3.0, 5)
        xt = tape.tensor(v, requires_grad=True)
        out = f(xt)
        out.backward()
        xq = torch.tensor(v, requires_grad=True)
        ref = (torch.lgamma(xq) * torch.erfc(xq) + torch.polygamma(1, xq)
               + torch.erfinv(xq * 0.1)).sum()
        ref.backward()
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-8)  # torch trigamma ~1e-9
        np.testing.assert_allclose(xt.grad.numpy(), xq.grad.numpy(), rtol=1e-8)


def test_grad_fn_names():
    x = tape.tensor([1.5], requires_grad=True)
    for f, node in (('lgamma', 'LgammaBackward0'), ('digamma', 'DigammaBackward0'),
                    ('erfc', 'ErfcBackward0'), ('erfinv', 'ErfinvBackward0')):
        assert type(getattr(tape, f)(x * 0.5).grad_fn).__name__ == node or \
            node in repr(getattr(tape, f)(x * 0.5))
    assert 'PolygammaBackward0' in repr(tape.polygamma(2, x))


# ------------------------------------------------------------------- composites
@pytest.mark.parametrize('dim', [0, 1, -1])
def test_logcumsumexp(dim):
    x = RNG.normal(size=(5, 6)) * 3
    _both(lambda m, a: m.logcumsumexp(a, dim), x)
    _both(lambda m, a: a.logcumsumexp(dim), x)
    _gradchecks(lambda a: tape.logcumsumexp(a, dim), x[:3, :4])


def test_logcumsumexp_extremes():
    v = np.array([-np.inf, -1000.0, 0.0, 800.0, 5.0])
    a = tape.logcumsumexp(tape.tensor(v), 0).numpy()
    b = torch.logcumsumexp(torch.tensor(v), 0).numpy()
    np.testing.assert_allclose(a, b)
    _both(lambda m, a: m.logcumsumexp(a, 0), np.array([-1000.0, 0.0, 3.0, 700.0]))
    _both(lambda m, a: m.logcumsumexp(a, 0), np.array(2.0))


@pytest.mark.parametrize('indexing', ['ij', 'xy'])
def test_meshgrid(indexing):
    a, b, c = RNG.normal(size=3), RNG.normal(size=4), RNG.normal(size=2)

    def fn(m, x, y, z):
        g = m.meshgrid(x, y, z, indexing=indexing)
        return g[0] * 1.0 + g[1] * 2.0 + g[2] * g[0]

    _both(fn, a, b, c)
    _gradchecks(lambda x, y: sum(g * (i + 1.0) for i, g in enumerate(
        tape.meshgrid([x, y], indexing=indexing))) ** 2, a, b)
    for g, h in zip(tape.meshgrid(tape.tensor(a), tape.tensor(b), indexing=indexing),
                    torch.meshgrid(torch.tensor(a), torch.tensor(b), indexing=indexing)):
        assert tuple(g.shape) == tuple(h.shape)


def test_cartesian_prod():
    a, b = RNG.normal(size=3), RNG.normal(size=2)
    _both(lambda m, x, y: m.cartesian_prod(x, y), a, b)
    _both(lambda m, x: m.cartesian_prod(x), a)


@pytest.mark.parametrize('ios,dim', [(3, 0), (4, 1), (2, -1), ([1, 3], 1), ((0, 2, 2, 9), 0),
                                      ([-2], 1)])
def test_tensor_split(ios, dim):
    x = RNG.normal(size=(5, 7))
    tp = tape.tensor_split(tape.tensor(x), ios, dim)
    tq = torch.tensor_split(torch.tensor(x), ios, dim)
    assert len(tp) == len(tq)
    for p, q in zip(tp, tq):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    _both(lambda m, a: m.cat([p * (i + 1.0) for i, p in enumerate(a.tensor_split(ios, dim))],
                             dim), x)


def test_cross():
    a, b = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    _both(lambda m, x, y: m.cross(x, y, dim=1), a, b)
    _both(lambda m, x, y: m.linalg.cross(x, y), a, b)
    _both(lambda m, x, y: x.cross(y, dim=-1), a, b)
    _both(lambda m, x, y: m.linalg.cross(x.t(), y.t(), dim=0), a, b)
    _gradchecks(lambda x, y: tape.linalg.cross(x, y), a[:2], b[:2])
    with pytest.raises(RuntimeError):
        tape.linalg.cross(tape.ones(2, 4), tape.ones(2, 4))


def test_searchsorted():
    seq = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    vals = np.array([[0.0, 3.0, 6.0], [9.0, 10.0, 5.0]])
    for kw in ({}, {'right': True}, {'side': 'right'}, {'out_int32': True}):
        p = tape.searchsorted(tape.tensor(seq), tape.tensor(vals), **kw)
        q = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), **kw)
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert str(p.dtype).split('.')[-1] == str(q.dtype).split('.')[-1]
    bseq = np.sort(RNG.normal(size=(2, 6)), -1)
    bval = RNG.normal(size=(2, 4))
    np.testing.assert_array_equal(
        tape.searchsorted(tape.tensor(bseq), tape.tensor(bval)).numpy(),
        torch.searchsorted(torch.tensor(bseq), torch.tensor(bval)).numpy())
    assert tape.searchsorted(tape.tensor(seq), 4.0).item() == 2
    unsorted = np.array([5.0, 1.0, 3.0])
    order = np.argsort(unsorted)
    np.testing.assert_array_equal(
        tape.searchsorted(tape.tensor(unsorted), tape.tensor([2.0, 4.0]),
                          sorter=tape.tensor(order)).numpy(),
        torch.searchsorted(torch.tensor(unsorted), torch.tensor([2.0, 4.0]),
                           sorter=torch.tensor(order)).numpy())


def test_bincount():
    x = np.array([0, 1, 1, 3, 5, 1])
    w = np.array([0.5, 1.0, 2.0, 3.0, -1.0, 0.25])
    for kw in ({}, {'minlength': 9}):
        p, q = tape.bincount(tape.tensor(x), **kw), torch.bincount(torch.tensor(x), **kw)
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert str(p.dtype).split('.')[-1] == str(q.dtype).split('.')[-1]
    p = tape.tensor(x).bincount(weights=tape.tensor(w))
    q = torch.tensor(x).bincount(weights=torch.tensor(w))
    np.testing.assert_allclose(p.numpy(), q.numpy())
    assert str(p.dtype).split('.')[-1] == str(q.dtype).split('.')[-1]
    with pytest.raises(RuntimeError):
        tape.bincount(tape.tensor([-1, 2]))


def test_digamma_kernel_survives_its_numba_cache(tmp_path):
    # digamma used to call itself (the reflection for x < 0): compiled for float32
    # and float64 and loaded back from Numba's cache=True cache, it crashed the
    # process.  Two fresh processes share one cache directory here.
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ('import numpy as np, tape\n'
            'from compiler.kernels import digamma\n'
            'x = tape.tensor([0.3, -0.3, 2.5], requires_grad=True)\n'
            'tape.lgamma(x).sum().backward()\n'
            'print(digamma(np.float32(0.3)), digamma(-0.3), x.grad.tolist())\n')
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=root)
    outs = [subprocess.run([sys.executable, '-c', code], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in outs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert outs[0].stdout == outs[1].stdout
