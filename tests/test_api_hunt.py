"""The PyTorch API that tutorials and training code use, checked against PyTorch:
one table of (name, call, inputs); each row compares values (1e-6, float64),
dtype, shape, requires_grad and the gradients of every float input."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
A, B, C = (_rng.uniform(-2, 2, (3, 4)) for _ in range(3))
M, M3 = _rng.uniform(-2, 2, (4, 4)), _rng.uniform(-2, 2, (2, 3, 4))
V, W = _rng.uniform(-2, 2, 4), _rng.uniform(-2, 2, 3)
U = _rng.uniform(0.05, 0.95, (3, 4))
P = np.abs(A) + 1.5                 # > 1: acosh's domain
Z = np.array([[0.0, 1.0, -0.5], [2.0, 0.0, -1.5]])   # zeros: sinc's and copysign's edge
D = np.array([[3.0, 1.0, 2.0, 3.0, 1.0, 5.0], [2.0, 2.0, 4.0, 4.0, 0.0, 1.0]])
NAN = np.array([1.0, np.nan, -2.0, np.nan])
NAN2 = np.array([np.nan, 3.0, -5.0, np.nan])

ROWS = [
    # creation
    ('zeros(size=)', lambda m: m.zeros(size=(2, 3)), ()),
    ('ones(size=, dtype)', lambda m: m.ones(size=(2,), dtype=m.float64), ()),
    ('empty(size=).shape', lambda m: m.empty(size=(2, 3)).shape, ()),
    ('randn(size=).shape', lambda m: m.randn(size=(2, 3)).shape, ()),
    ('rand(size=).dtype', lambda m: m.rand(size=(2,), dtype=m.float64).dtype, ()),
    ('randint(high, size)', lambda m: m.randint(5, (2, 3)).shape, ()),
    ('randint_like', lambda m, a: (m.randint_like(a, 5).dtype, m.randint_like(a, 5).shape), (A,)),
    ('logspace', lambda m: m.logspace(0, 2, 5), ()),
    ('logspace base dtype', lambda m: m.logspace(0, 3, 4, base=2.0, dtype=m.float64), ()),
    ('scalar_tensor', lambda m: m.scalar_tensor(3.5), ()),
    ('normal(size=)', lambda m: (m.normal(0.0, 1.0, size=(2, 3)).shape,
                                 m.normal(0.0, 1.0, size=(2, 3)).dtype), ()),
    ('normal(mean tensor)', lambda m, a: m.normal(a, 0.0), (A,)),
    ('bernoulli', lambda m: m.bernoulli(m.full((3,), 1.0)), ()),
    ('multinomial', lambda m: m.multinomial(m.tensor([0.0, 1.0, 0.0]), 2, replacement=True), ()),
    ('repeat_interleave(repeats)', lambda m: m.repeat_interleave(m.tensor([1, 2, 3])), ()),
    ('cuda.is_available', lambda m: m.cuda.is_available(), ()),
    # shapes
    ('rot90', lambda m, a: m.rot90(a), (A,)),
    ('rot90 k=2', lambda m, a: a.rot90(2, (0, 1)), (A,)),
    ('rot90 k=-1 dims', lambda m, a: m.rot90(a, -1, [2, 0]), (M3,)),
    ('broadcast_tensors', lambda m, a, v: m.broadcast_tensors(a, v), (A, V)),
    ('broadcast_shapes', lambda m: m.broadcast_shapes((3, 1), (1, 4), 4), ()),
    ('atleast_1d', lambda m, a: m.atleast_1d(a.sum()), (A,)),
    ('atleast_2d', lambda m, v: m.atleast_2d(v), (V,)),
    ('atleast_3d', lambda m, a, v: m.atleast_3d(a, v), (A, V)),
    ('hsplit', lambda m, a: m.hsplit(a, 2), (A,)),
    ('vsplit', lambda m, a: a.vsplit([1]), (A,)),
    ('dsplit', lambda m, a: m.dsplit(a, [1, 3]), (M3,)),
    ('dstack', lambda m, a, b: m.dstack([a, b]), (A, B)),
    ('column_stack', lambda m, v, a: m.column_stack([v, a.t()]), (V, A)),
    ('row_stack', lambda m, a, b: m.row_stack([a, b]), (A, B)),
    ('ravel', lambda m, a: a.t().ravel(), (A,)),
    ('unfold', lambda m, v: v.unfold(0, 2, 1), (V,)),
    ('unfold dim step', lambda m, a: a.unfold(1, 3, 2), (M3,)),
    ('argwhere', lambda m, a: m.argwhere(a > 0), (A,)),
    # indexing
    ('index_copy', lambda m, a, b: a.index_copy(0, m.tensor([2, 0]), b[:2]), (A, B)),
    ('index_fill', lambda m, a: a.index_fill(1, m.tensor([0, 2]), -1.0), (A,)),
    ('masked_scatter', lambda m, a, b: a.masked_scatter(a > 0, b), (A, B)),
    ('index_put', lambda m, a, v: a.index_put((m.tensor([0, 2]), m.tensor([1, 3])), v[:2]),
     (A, V)),
    ('index_put accumulate', lambda m, a, v: a.index_put((m.tensor([0, 0, 2]),), v,
                                                        accumulate=True), (A, V)),
    ('index_put_', lambda m: m.zeros(3).index_put_((m.tensor([0, 2]),), m.tensor([1.0, 2.0])), ()),
    ('fill_diagonal_', lambda m: m.zeros(3, 3).fill_diagonal_(2.0), ()),
    ('fill_diagonal_ wrap', lambda m: m.zeros(7, 3).fill_diagonal_(1.0, wrap=True), ()),
    # math
    ('sinc', lambda m, z: m.sinc(z), (Z,)),
    ('sinc method', lambda m, a: a.sinc(), (A,)),
    ('special.sinc', lambda m, a: m.special.sinc(a), (A,)),
    ('copysign', lambda m, z, b: m.copysign(z, b[:2, :3].detach()), (Z, B)),
    ('copysign scalar', lambda m, a: a.copysign(-1.0), (A,)),
    ('fmax', lambda m, a, b: m.fmax(a, b), (A, B)),
    ('fmin nan', lambda m, x, y: m.fmin(x, y), (NAN, NAN2)),
    ('isposinf isneginf', lambda m, a: (m.isposinf(a / 0), m.isneginf(a / 0)), (A,)),
    ('signbit', lambda m, z: m.signbit(-z), (Z,)),
    ('isreal', lambda m, a: m.isreal(a), (A,)),
    ('sgn', lambda m: m.tensor([-2.0, 0.0, 3.0]).sgn(), ()),   # (PyTorch's grad is a ZeroTensor)
    ('fix', lambda m, a: m.fix(a * 3), (A,)),
    ('absolute', lambda m, a: m.absolute(a), (A,)),
    ('positive', lambda m, a: m.positive(a), (A,)),
    ('rsub', lambda m, a, b: m.rsub(a, b, alpha=2), (A, B)),
    ('float_power', lambda m, p, a: m.float_power(p, a), (P, A)),
    ('float_power int', lambda m: m.float_power(m.arange(4), 2), ()),
    ('asinh', lambda m, a: m.asinh(a * 1e3), (A,)),
    ('asinh small', lambda m, a: a.mul(1e-9).asinh(), (A,)),
    ('arcsinh', lambda m, z: m.arcsinh(z), (Z,)),
    ('acosh', lambda m, p: p.acosh(), (P,)),
    ('atanh', lambda m, u: m.atanh(u - 0.5), (U,)),
    ('deg2rad rad2deg', lambda m, a: (m.deg2rad(a), a.rad2deg()), (A,)),
    ('deg2rad int', lambda m: m.deg2rad(m.arange(3)), ()),
    ('mode', lambda m, d: m.mode(d, 1), (D,)),
    ('mode int keepdim', lambda m: m.tensor([[1, 2, 2, 3], [4, 4, 1, 1]]).mode(0, keepdim=True), ()),
    ('aminmax', lambda m, a: m.aminmax(a), (A,)),
    ('aminmax dim', lambda m, a: a.aminmax(dim=1, keepdim=True), (A,)),
    ('aminmax fields', lambda m, a: m.aminmax(a, dim=0).max, (A,)),
    ('vdot', lambda m, v: m.vdot(v, v * 2), (V,)),
    ('linalg.multi_dot', lambda m, a, b, v: m.linalg.multi_dot([a, b.t(), a, v]), (A, B, V)),
    ('renorm', lambda m, a: a.renorm(2, 0, 2.0), (A,)),
    ('renorm p1 dim1', lambda m, a: m.renorm(a, 1, 1, 3.0), (A,)),
    ('trapezoid', lambda m, a: m.trapezoid(a), (A,)),
    ('trapezoid x', lambda m, a, v: m.trapezoid(a, v.cumsum(0), dim=1), (A, V)),
    ('trapz dx', lambda m, a: m.trapz(a, dx=0.5, dim=0), (A,)),
    ('cumulative_trapezoid', lambda m, a: m.cumulative_trapezoid(a), (A,)),
    ('cov', lambda m, a: m.cov(a), (A,)),
    ('cov correction 1-D', lambda m, v: m.cov(v, correction=0), (V,)),
    ('cov weights', lambda m, a: m.cov(a, fweights=m.tensor([1, 2, 1, 3]),
                                       aweights=m.tensor([0.5, 1.0, 2.0, 1.0], dtype=m.float64)),
     (A,)),
    ('corrcoef', lambda m, a: m.corrcoef(a), (A,)),
    ('block_diag', lambda m, a, m4, v: m.block_diag(a, m4, v), (A, M, V)),
    ('histc', lambda m, a: m.histc(a, bins=4, min=-2, max=2), (A,)),
    ('bucketize', lambda m, a: m.bucketize(a, m.tensor([-1.0, 0.0, 1.0], dtype=m.float64)), (A,)),
    ('bucketize right', lambda m: m.bucketize(m.tensor([1, 2, 3]), m.tensor([1, 3]), right=True), ()),
    ('gcd lcm', lambda m: (m.gcd(m.tensor([6, 9]), m.tensor([4, 6])),
                           m.lcm(m.tensor([6, 9]), m.tensor([4, 6]))), ()),
    ('bitwise_and', lambda m: m.bitwise_and(m.tensor([6, 3]), m.tensor([3, 1])), ()),
    ('bitwise_not method', lambda m: m.tensor([True, False]).bitwise_not(), ()),
    ('is_nonzero', lambda m: (m.tensor([1.0]).is_nonzero(), m.tensor(0).is_nonzero()), ()),
    ('is_same_size', lambda m, a, b: (a.is_same_size(b), a.is_same_size(b.t())), (A, B)),
    ('dropout p=0', lambda m, a: m.dropout(a, 0.0, True), (A,)),
]


def _leaves(m, inputs):
    return [m.tensor(x.copy(), requires_grad=True) for x in inputs]


def _flat(r):
    if isinstance(r, (tuple, list)) and not isinstance(r, (torch.Size, tape.Size)):
        return [y for x in r for y in _flat(x)]
    return [r]


def _same(a, b, where):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, tape.Tensor), where
        assert tuple(b.shape) == tuple(a.shape), where
        assert str(b.dtype) == str(a.dtype).replace('torch.', ''), where
        assert b.requires_grad == a.requires_grad, where
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6,
                                   atol=1e-6, err_msg=where)
    elif isinstance(a, torch.dtype):
        assert str(b) == str(a).replace('torch.', ''), where
    else:
        assert tuple(b) == tuple(a) if isinstance(a, torch.Size) else b == a, where
        assert not isinstance(b, tape.Tensor), where


@pytest.mark.parametrize('name,call,inputs', ROWS, ids=[r[0] for r in ROWS])
def test_matches_torch(name, call, inputs):
    tl, pl = _leaves(torch, inputs), _leaves(tape, inputs)
    torch.manual_seed(0)
    tape.manual_seed(0)
    rt, rp = call(torch, *tl), call(tape, *pl)
    ft, fp = _flat(rt), _flat(rp)
    assert len(fp) == len(ft)
    for i, (a, b) in enumerate(zip(ft, fp)):
        _same(a, b, f'{name}: output {i}')
    outs = [(a, b) for a, b in zip(ft, fp) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not outs:
        return
    lt, lp = 0, 0
    for a, b in outs:
        w = _rng.uniform(-1, 1, tuple(a.shape))
        lt = lt + (a * torch.tensor(w)).sum()
        lp = lp + (b * tape.tensor(w)).sum()
    lt.backward()
    lp.backward()
    for i, (a, b) in enumerate(zip(tl, pl)):
        assert (b.grad is None) == (a.grad is None), f'{name}: grad {i}'
        if a.grad is not None:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-6, atol=1e-6,
                                       err_msg=f'{name}: grad {i}')


# new differentiable composites: their gradients against finite differences
GRADCHECK = [
    ('rot90', lambda t, a: t.rot90(a, 1, (0, 1)), (A,)),
    ('unfold', lambda t, a: a.unfold(1, 2, 1), (A,)),
    ('index_copy', lambda t, a, b: a.index_copy(0, t.tensor([2, 0]), b[:2]), (A, B)),
    ('masked_scatter', lambda t, a, b: a.masked_scatter(a > 0, b), (A, B)),
    ('index_put accumulate', lambda t, a, v: a.index_put((t.tensor([0, 0, 2]),), v,
                                                        accumulate=True), (A, V)),
    ('sinc', lambda t, z: t.sinc(z), (Z,)),
    ('fmax', lambda t, a, b: t.fmax(a, b), (A, B)),
    ('asinh', lambda t, z: t.asinh(z), (Z,)),
    ('acosh', lambda t, p: t.acosh(p), (P,)),
    ('atanh', lambda t, u: t.atanh(u - 0.5), (U,)),
    ('aminmax', lambda t, a: t.aminmax(a, dim=1).min, (A,)),
    ('renorm', lambda t, a: a.renorm(2, 0, 2.0), (A,)),
    ('trapezoid x', lambda t, a, v: t.trapezoid(a, v.cumsum(0), dim=1), (A, V)),
    ('cov weights', lambda t, a, w: t.cov(a, aweights=w.abs() + 0.5), (A, V)),
    ('corrcoef', lambda t, a: t.corrcoef(a), (A,)),
    ('block_diag', lambda t, a, v: t.block_diag(a, v), (A, V)),
    ('multi_dot', lambda t, a, b, v: t.linalg.multi_dot([a, b.t(), v[:3]]), (A, B, V)),
]


@pytest.mark.parametrize('name,call,inputs', GRADCHECK, ids=[r[0] for r in GRADCHECK])
def test_gradcheck(name, call, inputs):
    leaves = [tape.tensor(x.copy(), requires_grad=True) for x in inputs]
    assert tape.autograd.gradcheck(lambda *xs: call(tape, *xs), tuple(leaves))


def test_lstsq_gradient_wide_matrix():
    a, b = A, B[:, :2]
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b)
    torch.linalg.lstsq(ta, tb).solution.sum().backward()
    pa = tape.tensor(a, requires_grad=True)
    tape.linalg.lstsq(pa, tape.tensor(b)).solution.sum().backward()
    np.testing.assert_allclose(pa.grad.numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_unique_requires_grad():
    assert tape.unique(tape.tensor([1.0, 1.0], requires_grad=True)).requires_grad
