"""The composite ops of tape/_composites.py against PyTorch.

One table: each row is ``fn(m, *xs)`` for ``m`` tape or torch, with its inputs
(shapes of float64 leaves, or fixed arrays; integer arrays are constants).
Every row is checked for values and gradients against PyTorch in float64;
differentiable rows also by gradcheck and by a create_graph second derivative
against PyTorch's.  Then bad inputs (the exception type must be PyTorch's),
the in-place forms, and the non-differentiable helpers.
"""
from dataclasses import dataclass

import inspect

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

TOL = dict(rtol=1e-6, atol=1e-6)


@dataclass
class Row:
    name: str
    fn: object              # fn(m, *xs), m is tape or torch
    inputs: tuple           # shapes (random float64 leaves) or arrays (fixed)
    diff: bool = True       # gradcheck and second derivatives
    torch_grads: bool = True    # False: PyTorch's gradient is NaN where tape's is 0
    torch_gg: bool = True       # False: PyTorch has no second derivative (cdist)
    seed: int = 0


def _arr(x, rng):
    if isinstance(x, tuple):
        return rng.standard_normal(x)
    return np.asarray(x)


def _inputs(row):
    rng = np.random.default_rng(row.seed)
    return [_arr(x, rng) for x in row.inputs]


def _leaves(m, arrays):
    out = []
    for a in arrays:
        if a.dtype.kind == 'f':
            out.append(m.tensor(a.copy(), dtype=m.float64, requires_grad=True))
        else:
            out.append(m.tensor(a.copy()))
    return out


def _outs(r):
    return list(r) if isinstance(r, tuple) else [r]


def _np(t):
    return np.asarray(t.detach().numpy()) if t is not None else None


P = np.array([[0.2, 0.7, 0.5], [0.9, 0.1, 0.35]])          # in (0, 1)
X0 = np.array([0.0, 1.5, -2.0, 0.0, 3.0])                   # zeros for xlogy
Y0 = np.array([0.0, 2.0, 0.5, 4.0, 1.5])
NANS = np.array([[1.0, np.nan, -2.0, np.inf], [np.nan, np.nan, 3.0, -np.inf]])
IDX = np.array([0, 2, 0, 1])

ROWS = [
    Row('tril', lambda m, x: m.tril(x), ((3, 4),)),
    Row('tril_k', lambda m, x: x.tril(-1), ((2, 3, 3),)),
    Row('triu', lambda m, x: m.triu(x, 1), ((4, 3),)),
    Row('triu_inf_nan', lambda m, x: m.triu(x), (np.array([[1.0, np.inf], [np.nan, 2.0]]),),
        diff=False),
    Row('diagonal', lambda m, x: m.diagonal(x), ((3, 4),)),
    Row('diagonal_off', lambda m, x: x.diagonal(-1, 0, 2), ((3, 2, 4),)),
    Row('diagonal_pos', lambda m, x: x.diagonal(offset=2, dim1=-1, dim2=-2), ((2, 5, 4),)),
    Row('diag_vec', lambda m, x: m.diag(x), ((3,),)),
    Row('diag_vec_k', lambda m, x: m.diag(x, -2), ((3,),)),
    Row('diag_mat', lambda m, x: x.diag(1), ((3, 4),)),
    Row('diagflat', lambda m, x: m.diagflat(x, 1), ((2, 2),)),
    Row('diag_embed', lambda m, x: m.diag_embed(x), ((2, 3),)),
    Row('diag_embed_off', lambda m, x: m.diag_embed(x, 1, 0, 2), ((2, 3),)),
    Row('trace', lambda m, x: m.trace(x), ((3, 4),)),
    Row('sort', lambda m, x: m.sort(x), ((3, 5),)),
    Row('sort_desc_dim0', lambda m, x: x.sort(0, descending=True), ((4, 3),)),
    Row('sort_stable_ties', lambda m, x: m.sort(x, stable=True, descending=True),
        (np.array([1.0, 3.0, 1.0, 2.0, 3.0]),), diff=False),
    Row('sort_nan', lambda m, x: m.sort(x, descending=True),
        (np.array([1.0, np.nan, -1.0, 2.0]),), diff=False),
    Row('sort_0d', lambda m, x: m.sort(x), ((),)),
    Row('argsort', lambda m, x: m.argsort(x, dim=0, descending=True), ((4, 2),), diff=False),
    Row('msort', lambda m, x: m.msort(x), ((4, 2),)),
    Row('topk', lambda m, x: m.topk(x, 2), ((3, 5),)),
    Row('topk_smallest', lambda m, x: x.topk(3, dim=0, largest=False), ((4, 2),)),
    Row('kthvalue', lambda m, x: m.kthvalue(x, 2), ((3, 5),)),
    Row('kthvalue_keepdim', lambda m, x: x.kthvalue(3, 0, True), ((4, 2),)),
    Row('median_all', lambda m, x: m.median(x), ((3, 4),)),
    Row('median_dim', lambda m, x: x.median(1), ((3, 4),)),
    Row('median_keepdim', lambda m, x: m.median(x, 0, keepdim=True), ((5, 2),)),
    Row('median_nan', lambda m, x: x.median(1), (NANS,), diff=False),
    Row('nanmedian', lambda m, x: m.nanmedian(x, 1), (NANS,), diff=False),
    Row('nanmedian_all', lambda m, x: x.nanmedian(), ((3, 3),)),
    Row('cummax', lambda m, x: m.cummax(x, 1), ((3, 5),)),
    Row('cummin', lambda m, x: x.cummin(0), ((5, 2),)),
    Row('cummax_ties_nan', lambda m, x: m.cummax(x, 0),
        (np.array([1.0, 3.0, 3.0, np.nan, 0.0, np.nan, 5.0]),), diff=False),
    Row('cummin_ties', lambda m, x: m.cummin(x, 0),
        (np.array([2.0, 1.0, 1.0, 4.0, 1.0]),), diff=False),
    Row('roll_flat', lambda m, x: m.roll(x, 2), ((3, 4),)),
    Row('roll_dims', lambda m, x: x.roll((1, -1), (0, 1)), ((3, 4),)),
    Row('roll_neg_dim', lambda m, x: m.roll(x, 5, -1), ((2, 3),)),
    Row('lerp_scalar', lambda m, a, b: m.lerp(a, b, 0.3), ((2, 3), (2, 3))),
    Row('lerp_tensor', lambda m, a, b, w: a.lerp(b, w), ((2, 3), (3,), (2, 1))),
    Row('addcmul', lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), ((2, 3), (3,), (2, 1))),
    Row('addcdiv', lambda m, a, b, c: a.addcdiv(b, c, value=-2), ((2, 3), (2, 3), (2, 3))),
    Row('addmm', lambda m, a, b, c: m.addmm(a, b, c), ((2, 4), (2, 3), (3, 4))),
    Row('addmm_beta_alpha', lambda m, a, b, c: m.addmm(a, b, c, beta=0.5, alpha=2.0),
        ((4,), (2, 3), (3, 4))),
    Row('addmm_beta0', lambda m, a, b, c: a.addmm(b, c, beta=0),
        ((2, 4), (2, 3), (3, 4))),
    Row('addmv', lambda m, a, b, c: m.addmv(a, b, c, alpha=3), ((2,), (2, 3), (3,))),
    Row('addr', lambda m, a, b, c: m.addr(a, b, c, beta=2), ((2, 3), (2,), (3,))),
    Row('baddbmm', lambda m, a, b, c: m.baddbmm(a, b, c, beta=0.5, alpha=-1),
        ((2, 2, 4), (2, 2, 3), (2, 3, 4))),
    Row('addbmm', lambda m, a, b, c: m.addbmm(a, b, c), ((2, 4), (3, 2, 3), (3, 3, 4))),
    Row('nan_to_num', lambda m, x: m.nan_to_num(x), (NANS,), diff=False),
    Row('nan_to_num_args', lambda m, x: x.nan_to_num(1.5, 9.0, -9.0), (NANS,), diff=False),
    Row('nan_to_num_grad', lambda m, x: m.nan_to_num(x, 0.5), ((2, 3),)),
    Row('logit', lambda m, x: m.logit(x), (P,)),
    Row('logit_eps', lambda m, x: x.logit(0.25), (P,)),
    Row('xlogy', lambda m, x, y: m.xlogy(x, y), (X0, Y0 + 0.5)),
    # d/dy at x = y = 0: PyTorch's x / y is NaN, tape's 0 (the function is 0 along x = 0)
    Row('xlogy_zero_y', lambda m, x, y: m.xlogy(x, y), (X0, Y0), diff=False,
        torch_grads=False),
    Row('xlogy_broadcast', lambda m, x, y: x.xlogy(y), (np.abs(np.arange(6.0).reshape(2, 3)),
                                                        np.array([0.5, 1.5, 2.5]))),
    Row('xlogy_scalar_other', lambda m, x: m.xlogy(x, 3.0), ((2, 3),)),
    Row('hypot', lambda m, a, b: m.hypot(a, b), ((2, 3), (3,))),
    Row('frac', lambda m, x: m.frac(x * 3), ((2, 3),)),
    Row('nansum', lambda m, x: m.nansum(x), (NANS,), diff=False),
    Row('nansum_dim', lambda m, x: x.nansum(1, keepdim=True), (NANS,), diff=False),
    Row('nansum_grad', lambda m, x: m.nansum(x, 0), ((3, 2),)),
    Row('nanmean', lambda m, x: m.nanmean(x), (NANS[:, :3],), diff=False),
    # an all-NaN column: PyTorch's gradient there is NaN (0 / 0), tape's 0
    Row('nanmean_dim', lambda m, x: x.nanmean((0,)), (NANS[:, :3],), diff=False,
        torch_grads=False),
    Row('nanmean_grad', lambda m, x: m.nanmean(x, 1), ((3, 4),)),
    Row('tensordot_int', lambda m, a, b: m.tensordot(a, b, 2), ((2, 3, 4), (3, 4, 2))),
    Row('tensordot_lists', lambda m, a, b: m.tensordot(a, b, dims=([0, 2], [1, 0])),
        ((2, 3, 4), (4, 2, 5))),
    Row('tensordot_0', lambda m, a, b: m.tensordot(a, b, 0), ((2,), (3,))),
    Row('cdist', lambda m, a, b: m.cdist(a, b), ((3, 4), (5, 4)), torch_gg=False),
    Row('cdist_batch_p1', lambda m, a, b: m.cdist(a, b, p=1), ((2, 3, 2), (2, 4, 2)),
        torch_gg=False),
    Row('cdist_p3', lambda m, a, b: m.cdist(a, b, 3.0), ((3, 2), (2, 2)), torch_gg=False),
    Row('cdist_large', lambda m, a, b: m.cdist(a, b), ((30, 3), (27, 3)), diff=False),
    Row('cdist_zero_dist', lambda m, a, b: m.cdist(a, b),
        (np.array([[1.0, 2.0], [0.0, 0.0]]), np.array([[1.0, 2.0], [1.0, 1.0]])), diff=False),
    Row('kron', lambda m, a, b: m.kron(a, b), ((2, 3), (3, 2))),
    Row('kron_ndim', lambda m, a, b: a.kron(b), ((2,), (2, 3))),
    Row('index_add', lambda m, x, i, s: m.index_add(x, 0, i, s), ((3, 2), IDX, (4, 2))),
    Row('index_add_dim1', lambda m, x, i, s: x.index_add(1, i, s, alpha=2.5),
        ((2, 3), IDX, (2, 4))),
    Row('index_add_neg_dim', lambda m, x, i, s: m.index_add(x, -1, i, s),
        ((3,), np.array([2, 0]), (2,))),
]


def _run(m, row, arrays):
    xs = _leaves(m, arrays)
    return xs, _outs(row.fn(m, *xs))


def _float(outs):
    return [o for o in outs if o.dtype in (tape.float64, torch.float64) and o.requires_grad]


@pytest.mark.parametrize('row', ROWS, ids=lambda r: r.name)
def test_values_and_grads_match_torch(row):
    arrays = _inputs(row)
    txs, touts = _run(tape, row, arrays)
    pxs, pouts = _run(torch, row, arrays)
    assert len(touts) == len(pouts)
    for t, p in zip(touts, pouts):
        assert tuple(t.shape) == tuple(p.shape), row.name
        assert str(t.dtype) == str(p.dtype).replace('torch.', ''), row.name
        np.testing.assert_allclose(_np(t), _np(p), equal_nan=True, **TOL)
        assert t.requires_grad == p.requires_grad, row.name
    tf, pf = _float(touts), _float(pouts)
    if not pf or not row.torch_grads:
        return
    rng = np.random.default_rng(1)
    ups = [rng.standard_normal(tuple(p.shape)) for p in pf]
    tape.autograd.backward(tf, [tape.tensor(u) for u in ups])
    torch.autograd.backward(pf, [torch.tensor(u) for u in ups])
    for tx, px in zip(txs, pxs):
        if not px.requires_grad:
            continue
        tg = np.zeros(tuple(tx.shape)) if tx.grad is None else _np(tx.grad)
        pg = np.zeros(tuple(px.shape)) if px.grad is None else _np(px.grad)
        np.testing.assert_allclose(tg, pg, equal_nan=True, **TOL)


DIFF = [r for r in ROWS if r.diff]
GG = [r for r in DIFF if r.torch_gg]


@pytest.mark.parametrize('row', DIFF, ids=lambda r: r.name)
def test_gradcheck(row):
    xs = _leaves(tape, _inputs(row))
    diff = [x for x in xs if x.requires_grad]

    def f(*ds):
        it = iter(ds)
        full = [next(it) if x.requires_grad else x for x in xs]
        return tuple(_float(_outs(row.fn(tape, *full))))
    assert tape.autograd.gradcheck(f, tuple(diff))


@pytest.mark.parametrize('row', [r for r in DIFF if not r.torch_gg], ids=lambda r: r.name)
def test_gradgradcheck_where_torch_has_none(row):
    xs = _leaves(tape, _inputs(row))
    assert tape.autograd.gradgradcheck(lambda *a: _float(_outs(row.fn(tape, *a)))[0], xs)


@pytest.mark.parametrize('row', GG, ids=lambda r: r.name)
def test_second_order_matches_torch(row):
    """grad(create_graph=True) of sum(out ** 2 * u), then the gradient of
    sum(g * v) over the first gradients, against PyTorch."""
    arrays = _inputs(row)
    rng = np.random.default_rng(2)
    results = []
    for m in (tape, torch):
        xs, outs = _run(m, row, arrays)
        diff = [x for x in xs if x.requires_grad]
        fl = _float(outs)
        r = np.random.default_rng(2)
        loss = sum(((o ** 2) * m.tensor(r.standard_normal(tuple(o.shape)))).sum() for o in fl)
        gs = m.autograd.grad(loss, diff, create_graph=True, allow_unused=True)
        r = np.random.default_rng(3)
        s = sum((g * m.tensor(r.standard_normal(tuple(g.shape)))).sum()
                for g in gs if g is not None and g.requires_grad)
        firsts = [None if g is None else _np(g) for g in gs]
        seconds = m.autograd.grad(s, diff, allow_unused=True) if not isinstance(s, int) \
            else [None] * len(diff)
        results.append((firsts, [None if g is None else _np(g) for g in seconds], diff))
    del rng
    (tf, ts, tdiff), (pf, ps, _) = results
    for a, b, x in zip(tf + ts, pf + ps, tdiff + tdiff):
        zero = np.zeros(tuple(x.shape))
        np.testing.assert_allclose(zero if a is None else a, zero if b is None else b,
                                   equal_nan=True, **TOL)


# ------------------------------------------------------------------ bad inputs
BAD = [
    ('tril_1d', lambda m: m.tril(m.zeros(3))),
    ('triu_0d', lambda m: m.triu(m.tensor(1.0))),
    ('diag_3d', lambda m: m.diag(m.zeros(2, 2, 2))),
    ('diagonal_dim', lambda m: m.diagonal(m.zeros(2, 2), 0, 0, 5)),
    ('diagonal_same_dims', lambda m: m.diagonal(m.zeros(2, 2), 0, 1, 1)),
    ('trace_1d', lambda m: m.trace(m.zeros(3))),
    ('sort_dim', lambda m: m.sort(m.zeros(3), dim=3)),
    ('topk_k', lambda m: m.topk(m.zeros(3), 4)),
    ('topk_dim', lambda m: m.topk(m.zeros(3), 1, dim=2)),
    ('kthvalue_k', lambda m: m.kthvalue(m.zeros(3), 5)),
    ('kthvalue_k0', lambda m: m.kthvalue(m.zeros(3), 0)),
    ('median_dim', lambda m: m.median(m.zeros(3, 2), 2)),
    ('median_empty_dim', lambda m: m.median(m.zeros(0, 2), 0)),
    ('cummax_dim', lambda m: m.cummax(m.zeros(3), 1)),
    ('roll_dim', lambda m: m.roll(m.zeros(3), 1, 4)),
    ('roll_align', lambda m: m.roll(m.zeros(3, 2), (1, 2), (0,))),
    ('addmm_shapes', lambda m: m.addmm(m.zeros(3), m.zeros(2, 3), m.zeros(2, 3))),
    ('addmm_1d', lambda m: m.addmm(m.zeros(3), m.zeros(3), m.zeros(3, 3))),
    ('baddbmm_sizes', lambda m: m.baddbmm(m.zeros(2, 2, 2), m.zeros(2, 2, 3),
                                          m.zeros(2, 2, 2))),
    ('index_add_negative', lambda m: m.index_add(m.zeros(3), 0, m.tensor([-1]), m.ones(1))),
    ('addcdiv_int', lambda m: m.addcdiv(m.tensor([1]), m.tensor([1]), m.tensor([2]))),
    ('hypot_int', lambda m: m.hypot(m.tensor([3]), m.tensor([4]))),
    ('frac_int', lambda m: m.frac(m.tensor([1, 2]))),
    ('nanmean_int', lambda m: m.nanmean(m.tensor([1, 2]))),
    ('tensordot_sizes', lambda m: m.tensordot(m.zeros(2, 3), m.zeros(4, 5), 1)),
    ('tensordot_dim', lambda m: m.tensordot(m.zeros(2, 3), m.zeros(3, 5), ([3], [0]))),
    ('cdist_cols', lambda m: m.cdist(m.zeros(2, 3), m.zeros(4, 5))),
    ('cdist_1d', lambda m: m.cdist(m.zeros(3), m.zeros(3))),
    ('index_add_range', lambda m: m.index_add(m.zeros(3, 2), 0, m.tensor([0, 5]),
                                              m.ones(2, 2))),
    ('index_add_count', lambda m: m.index_add(m.zeros(3, 2), 0, m.tensor([0, 1]),
                                              m.ones(3, 2))),
    ('index_add_float_index', lambda m: m.index_add(m.zeros(3, 2), 0, m.tensor([0.0, 1.0]),
                                                    m.ones(2, 2))),
    ('index_add_dim', lambda m: m.index_add(m.zeros(3, 2), 2, m.tensor([0, 1]),
                                            m.ones(2, 2))),
    ('finfo_int', lambda m: m.finfo(m.int64)),
    ('iinfo_float', lambda m: m.iinfo(m.float32)),
    ('mT_1d', lambda m: m.zeros(3).mT),
    ('mH_1d', lambda m: m.zeros(3).mH),
    ('H_3d', lambda m: m.zeros(2, 2, 2).H),
    ('exp__int', lambda m: m.tensor([1, 2]).exp_()),
    ('sigmoid__leaf', lambda m: m.zeros(2, requires_grad=True).sigmoid_()),
    ('index_add__leaf', lambda m: m.zeros(2, requires_grad=True).index_add_(
        0, m.tensor([0]), m.ones(1))),
    ('is_floating_point_list', lambda m: m.is_floating_point([1.0])),
]


@pytest.mark.parametrize('case', BAD, ids=lambda c: c[0])
def test_bad_input_raises_torch_exception_type(case):
    _, fn = case
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(Exception) as got:
        fn(tape)
    assert type(got.value) is type(expected.value), (got.value, expected.value)


# ------------------------------------------------------------------- in place
INPLACE = [
    ('sigmoid_', lambda x, c: x.sigmoid_()),
    ('exp_', lambda x, c: x.exp_()),
    ('tanh_', lambda x, c: x.tanh_()),
    ('pow_', lambda x, c: x.pow_(3)),
    ('pow_tensor', lambda x, c: x.abs_().pow_(c.abs() + 1)),
    ('sin_', lambda x, c: x.sin_()),
    ('neg_', lambda x, c: x.neg_()),
    ('abs_', lambda x, c: x.abs_()),
    ('relu_', lambda x, c: x.relu_()),
    ('square_', lambda x, c: x.square_()),
    ('atan_', lambda x, c: x.atan_()),
    ('clamp_min_', lambda x, c: x.clamp_min_(0.1)),
    ('tril_', lambda x, c: x.tril_()),
    ('triu_', lambda x, c: x.triu_(1)),
    ('frac_', lambda x, c: x.frac_()),
    ('nan_to_num_', lambda x, c: x.nan_to_num_()),
    ('lerp_', lambda x, c: x.lerp_(c, 0.25)),
    ('addcmul_', lambda x, c: x.addcmul_(c, c, value=2)),
    ('addcdiv_', lambda x, c: x.addcdiv_(c, c * c + 1)),
    ('addmm_', lambda x, c: x.addmm_(c, c, beta=0.5)),
    ('hypot_', lambda x, c: x.hypot_(c)),
    ('xlogy_', lambda x, c: x.xlogy_(c.abs())),
    ('index_add_', lambda x, c: x.index_add_(0, x.new_tensor([2, 0]).long(), c[:2] * 3)),
]


@pytest.mark.parametrize('case', INPLACE, ids=lambda c: c[0])
def test_inplace_matches_torch(case):
    _, op = case
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    got = []
    for m in (tape, torch):
        x = m.tensor(a, requires_grad=True)
        c = m.tensor(b, requires_grad=True)
        y = x * 1.5
        v = y._version
        r = op(y, c)
        assert r is y and y._version > v
        (y * m.tensor(a)).sum().backward()
        got.append([_np(y), _np(x.grad), np.zeros((3, 3)) if c.grad is None else _np(c.grad)])
    for t, p in zip(*got):
        np.testing.assert_allclose(t, p, **TOL)


def test_inplace_outside_graph_and_version():
    x = tape.tensor([0.0, 1.0])
    v = x._version
    x.exp_()
    np.testing.assert_allclose(_np(x), np.exp([0.0, 1.0]))
    assert x._version > v
    assert x.grad_fn is None


def test_inplace_on_saved_tensor_raises_at_backward():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    y = x * 1.0
    z = y.sigmoid()              # saves its result
    z.exp_()                     # changes the saved result
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        z.sum().backward()


# ------------------------------------------------------------- non-gradient helpers
@pytest.mark.parametrize('dt', ['float16', 'float32', 'float64'])
def test_finfo_matches_torch(dt):
    a, b = tape.finfo(getattr(tape, dt)), torch.finfo(getattr(torch, dt))
    for attr in ('bits', 'eps', 'max', 'min', 'tiny', 'smallest_normal', 'resolution'):
        assert getattr(a, attr) == getattr(b, attr), attr
        assert type(getattr(a, attr)) is type(getattr(b, attr)), attr
    assert a.dtype == b.dtype
    assert tape.finfo().eps == torch.finfo().eps            # the default dtype


@pytest.mark.parametrize('dt', ['uint8', 'int32', 'int64'])
def test_iinfo_matches_torch(dt):
    a, b = tape.iinfo(getattr(tape, dt)), torch.iinfo(getattr(torch, dt))
    assert (a.bits, a.max, a.min, a.dtype) == (b.bits, b.max, b.min, b.dtype)


def test_randperm():
    tape.manual_seed(3)
    p = tape.randperm(10)
    assert p.dtype == tape.int64 and not p.requires_grad
    assert sorted(p.tolist()) == list(range(10))
    tape.manual_seed(3)
    assert tape.randperm(10).tolist() == p.tolist()
    g = tape.Generator().manual_seed(1)
    assert sorted(tape.randperm(5, generator=g, dtype=tape.int32).tolist()) == list(range(5))
    assert tape.randperm(0).shape == (0,)


def test_is_floating_point_and_contiguous():
    for m in (tape, torch):
        assert m.is_floating_point(m.zeros(2)) and not m.is_floating_point(m.tensor([1]))
    for make in (lambda m: m.zeros(3, 4), lambda m: m.zeros(3, 4).t(),
                 lambda m: m.zeros(3, 4)[:, ::2], lambda m: m.zeros(3, 4)[1:],
                 lambda m: m.zeros(3, 4).t().contiguous(), lambda m: m.zeros(1, 4).t()):
        assert make(tape).is_contiguous() == make(torch).is_contiguous()


def test_new_constructors():
    for m in (tape, torch):
        x = m.tensor([1.0, 2.0], dtype=m.float64)
        assert x.new_zeros(2, 3).shape == (2, 3) and x.new_zeros((2, 3)).dtype == m.float64
        assert x.new_ones([2]).tolist() == [1.0, 1.0]
        assert x.new_empty(4).shape == (4,)
        assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_full((2,), 7).dtype == m.float64
        assert x.new_tensor([1, 2]).dtype == m.float64
        assert x.new_zeros(2, dtype=m.int64).dtype == m.int64
        y = x.new_ones(3, requires_grad=True)
        assert y.requires_grad and y.is_leaf


def test_matrix_transposes():
    a = np.arange(24.0).reshape(2, 3, 4)
    for attr in ('mT', 'mH'):
        t = getattr(tape.tensor(a, requires_grad=True), attr)
        p = getattr(torch.tensor(a, requires_grad=True), attr)
        np.testing.assert_array_equal(_np(t), _np(p))
    np.testing.assert_array_equal(_np(tape.tensor(a[0]).H), a[0].T)
    x = tape.tensor(a, requires_grad=True)
    (x.mT * tape.tensor(np.ones((2, 4, 3)) * 2)).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), np.full(a.shape, 2.0))


def test_named_tuple_results():
    x = tape.tensor([[3.0, 1.0, 2.0]])
    for r in (x.sort(), x.topk(2), x.kthvalue(1), x.median(1), x.cummax(1), x.cummin(1)):
        values, indices = r
        assert values is r.values and indices is r.indices
        assert indices.dtype == tape.int64


def test_integer_inputs_keep_dtype():
    for m in (tape, torch):
        x = m.tensor([[3, 1], [2, 4]])
        assert m.trace(x).item() == 7
        assert m.sort(x).values.dtype == m.int64
        assert m.tril(x).tolist() == [[3, 0], [2, 4]]
        assert m.roll(x, 1).tolist() == [[4, 3], [1, 2]]
        assert m.index_add(x, 0, m.tensor([1]), m.tensor([[10, 20]])).tolist() == \
            [[3, 1], [12, 24]]
        assert m.kron(x, m.tensor([1, -1])).tolist() == [[3, -3, 1, -1], [2, -2, 4, -4]]
        assert m.cummax(m.tensor([1, 3, 2]), 0).values.tolist() == [1, 3, 3]


def test_no_grad_and_constants():
    x = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with tape.no_grad():
        for r in (x.tril(), x.diagonal(), tape.diag(x[0]), x.sort().values, x.roll(1),
                  tape.cdist(x, x), tape.kron(x, x), x.index_add(0, tape.tensor([0]), x[:1])):
            assert not r.requires_grad and r.grad_fn is None


def test_jit_falls_back_for_value_dependent_ops():
    w = tape.tensor([1.0, 2.0, 3.0])

    @tape.jit
    def f(x):
        return (tape.sort(x).values * w).sum() + tape.median(x) + tape.nansum(x)

    for data in ([3.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 1.0]):
        x = tape.tensor(data, requires_grad=True)
        y = f(x)
        y.backward()
        xt = torch.tensor(data, requires_grad=True)
        yt = (torch.sort(xt).values * torch.tensor([1.0, 2.0, 3.0])).sum() + torch.median(xt) \
            + torch.nansum(xt)
        yt.backward()
        assert abs(y.item() - yt.item()) < 1e-5
        np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=1e-5)


def test_jit_replays_shape_only_ops():
    @tape.jit
    def f(x):
        return (tape.tril(x) * tape.roll(x, 1, 0)).sum() + tape.trace(x)

    for seed in range(3):
        a = np.random.default_rng(seed).standard_normal((3, 3))
        if seed == 2:
            assert f.stats()['replays'] >= 1, f.fallback_reasons()
        x = tape.tensor(a, requires_grad=True)
        y = f(x)
        y.backward()
        xt = torch.tensor(a, requires_grad=True)
        yt = (torch.tril(xt) * torch.roll(xt, 1, 0)).sum() + torch.trace(xt)
        yt.backward()
        assert abs(y.item() - yt.item()) < 1e-9
        np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=1e-9)


def test_existing_names_are_not_overridden():
    from tape import _composites
    from tape._tensor import Tensor
    for name, fn in _composites._NEW_FUNCTIONS.items():
        got = getattr(tape, name)
        # (under tape/_out.py's out= wrapper, or tape/_composite_nodes.py's)
        assert (inspect.unwrap(got) is inspect.unwrap(fn)) == (name in _composites.FUNCTIONS), \
            name
    for name, fn in _composites.METHODS.items():
        m = Tensor.__dict__[name]
        assert m is fn or getattr(m, '__wrapped__', None) is fn, name   # (or under axis= names)
    # Tensor.is_floating_point and clamp_ predate the composites and stay theirs
    assert 'is_floating_point' not in _composites.METHODS
    assert 'clamp_' not in _composites.METHODS
