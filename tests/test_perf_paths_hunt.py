"""Slow paths of large tensors found by timing ops against PyTorch, and fixed.

Each test checks the structure that makes the path fast (not a timing, which
is noisy) and the values and gradients against PyTorch at that size, to second
order where the op has one.
"""
import numpy as np
import pytest

import tape
from tape import _big

rng = np.random.default_rng(11)
XN = rng.standard_normal((256, 130))           # 33280 elements: large
YN = rng.standard_normal((256, 130))


def _kinds(t):
    return [type(m.attrs).__name__ for m in t._tape.big]


def _second_order(f, arrays):
    """f over leaves of each library: (loss's gradients, then the gradients of
    the squared norm of those gradients), for tape and torch."""
    torch = pytest.importorskip('torch')
    out = {}
    for lib in (torch, tape):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = f(lib, *xs)
        w = lib.tensor(np.random.default_rng(5).standard_normal(tuple(y.shape)))
        loss = (lib.tanh(y) * w).sum()
        gs = lib.autograd.grad(loss, xs, create_graph=True)
        sum((g * g).sum() for g in gs).backward()
        out[lib.__name__] = ([y.detach().numpy()] + [g.detach().numpy() for g in gs]
                             + [x.grad.numpy() for x in xs])
    for a, b in zip(out['torch'], out['tape']):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


# --------------------------------------------------- basic-indexing takes
_TAKES = {
    'rows': lambda L, x: x[10:200],
    'cols': lambda L, x: x[:, 10:100],
    'steps': lambda L, x: x[::2, ::3],
    'select': lambda L, x: x[3],
    'select_col': lambda L, x: x[:, 7],
    'none': lambda L, x: x[1:, None],
    'narrow': lambda L, x: x.narrow(1, 5, 60),
    'split0': lambda L, x: L.cat([p * (i + 1) for i, p in enumerate(x.split(64, 0))], 0),
    'split1': lambda L, x: L.cat([p * (i + 1) for i, p in enumerate(x.split(50, 1))], 1),
    'chunk1': lambda L, x: L.stack([p.sum(1) for p in x.chunk(3, 1)]),
    'unbind': lambda L, x: L.stack([r * (i % 3) for i, r in enumerate(x.unbind(1))]),
}


@pytest.mark.parametrize('name', list(_TAKES))
def test_large_basic_indexing_matches_torch_to_second_order(name):
    _second_order(_TAKES[name], [XN])


@pytest.mark.parametrize('name', ['rows', 'cols', 'steps', 'select', 'none', 'narrow'])
def test_a_large_slice_keeps_its_key_not_an_index_map(name):
    x = tape.tensor(XN, requires_grad=True)
    y = _TAKES[name](tape, x)
    # (a key of two steps, x[::2, ::3] or x[1:, None], records a view per step,
    # as PyTorch does: each take keeps its key, an unsqueeze is a plain view)
    kinds = _kinds(y)
    assert kinds[0] == 'BasicKey' and set(kinds) <= {'BasicKey', 'NoneType'}
    assert len(kinds) == (2 if name in ('steps', 'none') else 1)


@pytest.mark.parametrize('method', ['split', 'chunk', 'unbind'])
def test_large_pieces_keep_their_keys(method):
    x = tape.tensor(XN, requires_grad=True)
    parts = {'split': lambda: x.split(64, 0), 'chunk': lambda: x.chunk(3, 1),
             'unbind': lambda: x.unbind(0)}[method]()
    for p in parts:
        assert _kinds(p)[-1] == 'BasicKey' and p._tape.big[-1].saved == {}


def test_split_pieces_add_into_one_gradient_without_a_bincount(monkeypatch):
    # the pieces' gradients land in their regions of the input's gradient
    monkeypatch.setattr(np, 'bincount', None)
    x = tape.tensor(XN, requires_grad=True)
    sum(((p * (i + 1)) ** 2).sum() for i, p in enumerate(x.split(100, 0))).backward()
    k = np.repeat([1.0, 2.0, 3.0], [100, 100, 56])[:, None]
    np.testing.assert_allclose(x.grad.numpy(), 2 * k * k * XN, rtol=1e-12)


def test_a_slice_and_another_use_of_the_same_input():
    # the slice's gradient is added into the region of a gradient that the
    # other use made, and a read-only one (a view's) is not written into
    torch = pytest.importorskip('torch')
    res = []
    for lib in (torch, tape):
        x = lib.tensor(XN, requires_grad=True)
        ((x[5:50] ** 2).sum() + x.reshape(-1).sum() + (x[:, 3] * 3).sum()).backward()
        res.append(x.grad.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-12)


def test_float32_slice_gradient_stays_float32():
    x = tape.tensor(XN.astype(np.float32), requires_grad=True)
    (x[:, 1:90] * 2).sum().backward()
    assert x.grad.dtype == tape.float32
    expect = np.zeros_like(XN, np.float32)
    expect[:, 1:90] = 2
    np.testing.assert_array_equal(x.grad.numpy(), expect)


# ------------------------------------------------------------------- cat
_CATS = {
    'cat0': lambda L, x, y: L.cat([x, y], 0),
    'cat1': lambda L, x, y: L.cat([x, y * 2, x], 1),
    'const': lambda L, x, y: L.cat([x, L.tensor(YN), y[:10]], 0),
    'stack0': lambda L, x, y: L.stack([x, y], 0),
    'stack2': lambda L, x, y: L.stack([x, y, x * y], 2),
    'many': lambda L, x, y: L.cat([x[i:i + 20] for i in range(0, 200, 20)] + [y], 0),
}


@pytest.mark.parametrize('name', list(_CATS))
def test_large_cat_matches_torch_to_second_order(name):
    _second_order(_CATS[name], [XN, YN])


def test_a_large_cat_builds_no_index_maps():
    x = tape.tensor(XN, requires_grad=True)
    y = tape.tensor(YN, requires_grad=True)
    z = tape.cat([x, y], 1)
    assert all(m.attrs is None for m in z._tape.big)
    assert z.dtype == tape.float64
    assert np.array_equal(z.detach().numpy(), np.concatenate([XN, YN], 1))


def test_a_float32_cat_makes_no_float64_copy():
    x = tape.tensor(XN.astype(np.float32), requires_grad=True)
    y = tape.tensor(YN.astype(np.float32), requires_grad=True)
    z = tape.cat([x, y], 0)
    for m in z._tape.big:
        assert m.out_dtype == np.float32
    (z * z).sum().backward()
    assert x.grad.dtype == tape.float32
    np.testing.assert_allclose(x.grad.numpy(), 2 * XN.astype(np.float32), rtol=1e-6)


# ------------------------------------------------------------------- bmm
_BMMS = {
    'bmm': ((8, 40, 60), (8, 60, 50), lambda L, a, b: L.bmm(a, b)),
    'matmul4d': ((2, 4, 40, 60), (2, 4, 60, 50), lambda L, a, b: a @ b),
    'einsum': ((8, 40, 60), (8, 50, 60), lambda L, a, b: L.einsum('bij,bkj->bik', a, b)),
}


@pytest.mark.parametrize('name', list(_BMMS))
def test_large_bmm_matches_torch_to_second_order(name):
    sa, sb, f = _BMMS[name]
    r = np.random.default_rng(2)
    _second_order(f, [r.standard_normal(sa), r.standard_normal(sb)])


def test_a_large_bmm_runs_batched_blas_not_the_kernel_on_copies(monkeypatch):
    def fail(*args, **kw):
        raise AssertionError('big bmm went through _via_kernel (float64 copies, no BLAS)')
    monkeypatch.setattr(_big, '_via_kernel', fail)
    r = np.random.default_rng(3)
    an = r.standard_normal((8, 40, 60)).astype(np.float32)
    bn = r.standard_normal((8, 60, 50)).astype(np.float32)
    a = tape.tensor(an, requires_grad=True)
    b = tape.tensor(bn, requires_grad=True)
    (tape.bmm(a, b) ** 2).sum().backward()
    g = 2 * (an @ bn)
    assert a.grad.dtype == tape.float32 and b.grad.dtype == tape.float32
    np.testing.assert_allclose(a.grad.numpy(), g @ bn.transpose(0, 2, 1), rtol=1e-4)
    np.testing.assert_allclose(b.grad.numpy(), an.transpose(0, 2, 1) @ g, rtol=1e-4)


def test_a_large_bmm_with_one_operand_requiring_grad():
    torch = pytest.importorskip('torch')
    r = np.random.default_rng(4)
    an, bn = r.standard_normal((8, 40, 60)), r.standard_normal((8, 60, 50))
    res = []
    for lib in (torch, tape):
        a = lib.tensor(an)
        b = lib.tensor(bn, requires_grad=True)
        (lib.bmm(a, b) ** 2).sum().backward()
        res.append(b.grad.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-10)


# ------------------------------------------------ where, masked_fill, setitem
MASK = rng.random((256, 130)) > 0.4


def _setitem(L, x, y):
    z = x * 1
    z[:, 10:100] = y[:, :90] * 2
    return z


def _setitem_rows(L, x, y):
    z = x * 1
    z[3:200:2] = y[:99]
    return z


_WHERES = {
    'where': lambda L, x, y: L.where(L.tensor(MASK), x, y),
    'where_bcast': lambda L, x, y: L.where(L.tensor(MASK), x, y[0]),
    'masked_fill': lambda L, x, y: x.masked_fill(L.tensor(MASK), 0.5) * y,
    'setitem': _setitem,
    'setitem_rows': _setitem_rows,
    'scatter': lambda L, x, y: x.scatter(1, L.tensor(np.argsort(MASK, 1)[:, :40]), y[:, :40]),
}


@pytest.mark.parametrize('name', list(_WHERES))
def test_large_where_kinds_match_torch_to_second_order(name):
    _second_order(_WHERES[name], [XN, YN])


def test_a_large_where_selects_in_numpy_in_its_dtype(monkeypatch):
    def fail(*args, **kw):
        raise AssertionError('big where went through _via_kernel (float64 copies)')
    monkeypatch.setattr(_big, '_via_kernel', fail)
    x = tape.tensor(XN.astype(np.float32), requires_grad=True)
    y = tape.tensor(YN.astype(np.float32), requires_grad=True)
    z = tape.where(tape.tensor(MASK), x, y)
    assert z._tape.big[-1].attrs.dtype == np.bool_       # not an int64 copy of the mask
    (z * 3).sum().backward()
    assert x.grad.dtype == tape.float32 and y.grad.dtype == tape.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.where(MASK, 3, 0).astype(np.float32))
    np.testing.assert_array_equal(y.grad.numpy(), np.where(MASK, 0, 3).astype(np.float32))


def test_a_large_setitem_keeps_its_key_not_an_index_map():
    x = tape.tensor(XN, requires_grad=True)
    y = tape.tensor(YN, requires_grad=True)
    z = _setitem(tape, x, y)
    assert 'BasicKey' in _kinds(z)


# ------------------------------------ reductions fed by the (float64) arena
def _spy_big_adds(monkeypatch):
    seen = []
    orig = _big.Grads.add

    def add(self, slot, size, value, dtype=None, owned=False):
        if slot >= _big.BIG_BASE:
            seen.append(np.result_type(value))
        return orig(self, slot, size, value, dtype, owned)
    monkeypatch.setattr(_big.Grads, 'add', add)
    return seen


@pytest.mark.parametrize('op', ['softmax', 'log_softmax', 'logsumexp', 'sum_dim', 'mean_dim'])
def test_float32_row_reductions_make_no_float64_gradient(monkeypatch, op):
    # the reduced gradient (small) comes from the float64 arena: it is cast
    # before it is spread over the large input, not the large result after
    import tape.nn.functional as F
    f = {'softmax': lambda x: F.softmax(x, -1), 'log_softmax': lambda x: F.log_softmax(x, 0),
         'logsumexp': lambda x: x.logsumexp(1), 'sum_dim': lambda x: x.sum(0),
         'mean_dim': lambda x: x.mean(1)}[op]
    seen = _spy_big_adds(monkeypatch)
    x = tape.tensor(XN.astype(np.float32), requires_grad=True)
    (f(x) ** 2).sum().backward()
    assert seen and all(dt == np.float32 for dt in seen), seen
    assert x.grad.dtype == tape.float32


@pytest.mark.parametrize('op', ['softmax', 'log_softmax0', 'logsumexp', 'mean_dim', 'var'])
def test_large_reductions_match_torch(op):
    f = {'softmax': lambda L, x: L.softmax(x, -1),
         'log_softmax0': lambda L, x: L.log_softmax(x, 0),
         'logsumexp': lambda L, x: x.logsumexp(1), 'mean_dim': lambda L, x: x.mean(0),
         'var': lambda L, x: x.var(1)}[op]
    _second_order(f, [XN])
    torch = pytest.importorskip('torch')
    res = []
    for lib in (torch, tape):
        x = lib.tensor(XN.astype(np.float32), requires_grad=True)
        (f(lib, x) ** 2).sum().backward()
        res.append(x.grad.numpy())
    # (float32 rounding: both libraries are about 1e-4 off the float64 result here)
    np.testing.assert_allclose(res[1], res[0], rtol=1e-5, atol=1e-5 * np.abs(res[0]).max())
