"""embedding, index_select and gather's kernel paths (compiler/index_kernels.py; the
Function records in tape/_indexing.py and tape/nn/functional.py) against PyTorch:
values, gradients (repeated indices accumulate), padding_idx, max_norm,
scale_grad_by_freq, int32 indices, bad indices, node names, create_graph and
gradcheck / gradgradcheck in float64, on both sides of the big-record size
(below it index_select and gather keep a take record)."""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF
from tape.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
PF = torch.nn.functional


def _close(a, b, dtype):
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **tol)


def _emb(lib, Fm, idx, wn, gn, **kw):
    w = lib.tensor(wn, requires_grad=True)
    y = Fm.embedding(lib.tensor(idx), w, **kw)
    y.backward(lib.tensor(gn))
    return y, w


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('itype', [np.int64, np.int32])
@pytest.mark.parametrize('ishape', [(), (7,), (3, 4), (2, 3, 5), (0,), (300, 60)])
@pytest.mark.parametrize('vd', [(6, 3), (1000, 64)])
@pytest.mark.parametrize('kw', [{}, {'padding_idx': 2}, {'padding_idx': -1},
                                {'scale_grad_by_freq': True},
                                {'padding_idx': 0, 'scale_grad_by_freq': True}])
def test_embedding_matches_torch(dtype, itype, ishape, vd, kw):
    rng = np.random.default_rng(0)
    v, d = vd
    idx = rng.integers(0, v, ishape).astype(itype)
    if idx.size > 2:
        idx.reshape(-1)[:3] = [2, 2, 0]         # repeats and the padding rows
    wn = rng.standard_normal(vd).astype(dtype)
    gn = rng.standard_normal(ishape + (d,)).astype(dtype)
    ya, wa = _emb(tape, TF, idx, wn, gn, **kw)
    yb, wb = _emb(torch, PF, idx, wn, gn, **kw)
    assert ya.dtype == wa.dtype and tuple(ya.shape) == tuple(yb.shape)
    assert ya.grad_fn.name() == yb.grad_fn.name() == 'EmbeddingBackward0'
    assert len(ya.grad_fn.next_functions) == len(yb.grad_fn.next_functions) == 1
    _close(ya.detach().numpy(), yb.detach().numpy(), dtype)
    assert wa.grad.dtype == wa.dtype
    _close(wa.grad.numpy(), wb.grad.numpy(), dtype)


def test_embedding_module_and_max_norm():
    rng = np.random.default_rng(1)
    wn = rng.standard_normal((10, 4)) * 3
    idx = np.array([[1, 3, 3], [9, 0, 1]])
    wa = tape.tensor(wn, requires_grad=True)
    wb = torch.tensor(wn, requires_grad=True)
    ya = TF.embedding(tape.tensor(idx), wa, max_norm=1.5, norm_type=3.0)
    yb = PF.embedding(torch.tensor(idx), wb, max_norm=1.5, norm_type=3.0)
    _close(wa.detach().numpy(), wb.detach().numpy(), np.float64)     # renormalized in place
    ya.sum().backward()
    yb.sum().backward()
    _close(ya.detach().numpy(), yb.detach().numpy(), np.float64)
    _close(wa.grad.numpy(), wb.grad.numpy(), np.float64)
    m = tape.nn.Embedding(10, 4, padding_idx=3)
    y = m(tape.tensor(idx))
    assert y.grad_fn.name() == 'EmbeddingBackward0'
    y.sum().backward()
    assert (m.weight.grad.numpy()[3] == 0).all()
    assert m.weight.grad.numpy()[1].tolist() == [2.0] * 4


@pytest.mark.parametrize('bad', [[5], [-1], [0, 7, 1]])
def test_embedding_bad_index(bad):
    w = tape.ones(5, 3, requires_grad=True)
    with pytest.raises(IndexError, match='index out of range in self'):
        TF.embedding(tape.tensor(bad), w)
    with pytest.raises(IndexError, match='index out of range in self'):
        TF.embedding(tape.tensor(bad), w, max_norm=1.0)
    with pytest.raises(RuntimeError, match="'indices' to have one of"):
        TF.embedding(tape.tensor([1.0]), w)


def test_embedding_graph_semantics():
    w = tape.randn(6, 3, requires_grad=True)
    y = TF.embedding(tape.tensor([1, 2]), w)
    y.sum().backward()
    with pytest.raises(RuntimeError, match='second time'):
        y.sum().backward()
    # the weight is not saved: changing it in place does not stop the backward (as torch)
    y = TF.embedding(tape.tensor([1, 2]), w)
    with tape.no_grad():
        w.mul_(2.0)
    y.sum().backward()
    # the index is: changing it in place does
    i = tape.tensor([1, 2])
    y = TF.embedding(i, w)
    i[0] = 3
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()
    with tape.no_grad():
        assert TF.embedding(tape.tensor([1]), w).grad_fn is None


@pytest.mark.parametrize('kw', [{}, {'padding_idx': 1}, {'scale_grad_by_freq': True}])
def test_embedding_gradcheck(kw):
    rng = np.random.default_rng(2)
    w = tape.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    idx = tape.tensor([[1, 1, 4], [0, 2, 1]])
    f = lambda w: TF.embedding(idx, w, **kw)      # noqa: E731
    if not kw:      # (padding_idx and scale_grad_by_freq are not the true derivative)
        assert gradcheck(f, (w,))
    assert gradgradcheck(f, (w,))


@pytest.mark.parametrize('kw', [{}, {'padding_idx': 1}])
def test_embedding_create_graph_matches_torch(kw):
    rng = np.random.default_rng(3)
    wn = rng.standard_normal((5, 3))
    gn = rng.standard_normal((2, 3, 3))
    idx = np.array([[1, 1, 4], [0, 2, 1]])
    out = []
    for lib, Fm in ((tape, TF), (torch, PF)):
        w = lib.tensor(wn, requires_grad=True)
        g = lib.tensor(gn, requires_grad=True)
        dw, = lib.autograd.grad(Fm.embedding(lib.tensor(idx), w, **kw), w, g, create_graph=True)
        (dw ** 2).sum().backward()
        out.append((dw.detach().numpy(), g.grad.numpy()))
    for a, b in zip(*out):
        _close(a, b, np.float64)


def _pick(lib, fn, xn, gn):
    x = lib.tensor(xn, requires_grad=True)
    y = fn(lib, x)
    y.backward(lib.tensor(gn))
    return y, x


ISEL = [((6, 4), 0, 9), ((6, 4), 1, 5), ((3, 4, 5), 1, 7), ((3, 4, 5), -1, 2),
        ((1000, 64), 0, 256), ((64, 1000), 1, 256), ((8, 300, 4), 1, 700), ((7,), 0, 4),
        ((5, 3), 0, 0)]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('itype', [np.int64, np.int32])
@pytest.mark.parametrize('shape,dim,n', ISEL)
def test_index_select_matches_torch(dtype, itype, shape, dim, n):
    rng = np.random.default_rng(4)
    xn = rng.standard_normal(shape).astype(dtype)
    idx = rng.integers(0, shape[dim], n).astype(itype)
    if n > 2:
        idx[:2] = idx[2]                        # repeats accumulate
    oshape = list(shape)
    oshape[dim] = n
    gn = rng.standard_normal(oshape).astype(dtype)
    ya, xa = _pick(tape, lambda L, x: L.index_select(x, dim, L.tensor(idx)), xn, gn)
    yb, xb = _pick(torch, lambda L, x: L.index_select(x, dim, L.tensor(idx)), xn, gn)
    assert ya.grad_fn.name() == yb.grad_fn.name() == 'IndexSelectBackward0'
    _close(ya.detach().numpy(), yb.detach().numpy(), dtype)
    assert xa.grad.dtype == xa.dtype
    _close(xa.grad.numpy(), xb.grad.numpy(), dtype)


GATHER = [((6, 4), 0, (6, 4)), ((6, 4), 1, (6, 9)), ((3, 4, 5), 1, (3, 2, 5)),
          ((3, 4, 5), 2, (3, 4, 1)), ((3, 4, 5), 0, (2, 3, 4)), ((256, 1000), 1, (256, 5)),
          ((64, 256), 1, (64, 256)), ((40, 30, 20), 0, (50, 30, 20)), ((7,), 0, (9,))]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape,dim,ishape', GATHER)
def test_gather_matches_torch(dtype, shape, dim, ishape):
    rng = np.random.default_rng(5)
    xn = rng.standard_normal(shape).astype(dtype)
    idx = rng.integers(0, shape[dim], ishape)
    gn = rng.standard_normal(ishape).astype(dtype)
    ya, xa = _pick(tape, lambda L, x: L.gather(x, dim, L.tensor(idx)), xn, gn)
    yb, xb = _pick(torch, lambda L, x: L.gather(x, dim, L.tensor(idx)), xn, gn)
    assert ya.grad_fn.name() == yb.grad_fn.name() == 'GatherBackward0'
    assert len(ya.grad_fn.next_functions) == 1
    _close(ya.detach().numpy(), yb.detach().numpy(), dtype)
    _close(xa.grad.numpy(), xb.grad.numpy(), dtype)


def test_noncontiguous_and_no_grad():
    rng = np.random.default_rng(6)
    xn = rng.standard_normal((300, 200))
    x = tape.tensor(xn, requires_grad=True)
    xt = x.t()                                  # a transposed view: np.take's path
    idx = rng.integers(0, 200, 100)
    y = tape.index_select(xt, 0, tape.tensor(idx))
    np.testing.assert_array_equal(y.detach().numpy(), xn.T[idx])
    y.sum().backward()
    ref = np.zeros_like(xn)
    np.add.at(ref.T, idx, 1.0)
    np.testing.assert_allclose(x.grad.numpy(), ref)
    with tape.no_grad():
        z = tape.gather(x, 1, tape.tensor(rng.integers(0, 200, (300, 3))))
    assert z.grad_fn is None
    iv = tape.tensor(np.array([True, False]))     # other dtypes pick too
    assert tape.index_select(iv, 0, tape.tensor([1, 0, 1])).tolist() == [False, True, False]


@pytest.mark.parametrize('big', [False, True])
def test_bad_indices(big):
    x = tape.ones(200, 100, requires_grad=True) if big else tape.ones(4, 3, requires_grad=True)
    n = x.shape[0]
    for bad in (n, -1):
        with pytest.raises(IndexError, match=f'index {bad} is out of bounds for dimension 0'):
            tape.index_select(x, 0, tape.tensor([0, bad, 1]))
        idx = np.zeros(tuple(x.shape), np.int64)
        idx[1, 2] = bad
        with pytest.raises(RuntimeError, match=f'index {bad} is out of bounds for dimension 0'):
            x.gather(0, tape.tensor(idx))


@pytest.mark.parametrize('size', [(4, 3), (200, 100)])
def test_pick_gradcheck_and_create_graph(size):
    rng = np.random.default_rng(7)
    small = size == (4, 3)
    x = tape.tensor(rng.standard_normal(size), requires_grad=True)
    ii = tape.tensor(rng.integers(0, size[0], 6))
    gi = tape.tensor(rng.integers(0, size[1], (size[0], 5)))
    fs = [lambda x: tape.index_select(x, 0, ii), lambda x: x.gather(1, gi)]
    for f in fs:
        if small:
            assert gradcheck(f, (x,))
            assert gradgradcheck(f, (x,))
        # create_graph: the recorded backward agrees with the kernel one
        y = f(x)
        g = tape.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)
        dx, = tape.autograd.grad(y, x, g, create_graph=True)
        dx2, = tape.autograd.grad(f(x), x, g.detach())
        np.testing.assert_allclose(dx.detach().numpy(), dx2.numpy())
        (dx * dx).sum().backward()
        np.testing.assert_allclose(g.grad.numpy(), 2 * f(dx.detach()).numpy())


def test_jit_runs_embedding_and_picks():
    rng = np.random.default_rng(8)
    w = tape.tensor(rng.standard_normal((300, 64)), requires_grad=True)
    idx = tape.tensor(rng.integers(0, 300, 40))

    @tape.jit
    def f(w):
        return (TF.embedding(idx, w) * 2).sum() + w.index_select(0, idx).sum() \
            + w.gather(1, tape.tensor(np.zeros((300, 2), np.int64))).sum()

    for _ in range(3):
        w.grad = None
        f(w).backward()
        ref = np.zeros((300, 64))
        np.add.at(ref, idx.numpy(), 3.0)
        ref[:, 0] += 2.0
        np.testing.assert_allclose(w.grad.numpy(), ref)
