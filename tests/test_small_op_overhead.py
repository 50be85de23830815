"""The fast lanes of cat (shape-signature cache, two-input record, no reference
cycle keeping results alive), batched matmul (cached plans, direct reshape
records) and var/std (records made directly) against PyTorch: values,
gradients, double backward, graph nodes and errors."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _pair(shape, dtype=np.float32, rg=True):
    d = RNG.standard_normal(shape).astype(dtype)
    return tape.tensor(d, requires_grad=rg), torch.tensor(d, requires_grad=rg)


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _same_dtype(a, b):
    assert str(a.dtype).split('.')[-1] == str(b.dtype).split('.')[-1]


def _grads(ys, yt, xs, xt, dtype, double=True):
    """First gradients (with create_graph) and, when ``double``, the gradients
    of their squared sum, on both libraries."""
    w = RNG.standard_normal(tuple(yt.shape)).astype(dtype)
    gs = tape.autograd.grad(ys, xs, tape.tensor(w), create_graph=double, allow_unused=True)
    gt = torch.autograd.grad(yt, xt, torch.tensor(w), create_graph=double, allow_unused=True)
    for a, b in zip(gs, gt):
        if b is None:
            assert a is None
            continue
        _same_dtype(a, b)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **_tol(dtype))
    if not double:
        return
    pairs = [(a, b) for a, b in zip(gs, gt) if b is not None and b.requires_grad]
    if not pairs:
        return
    sum(((a * a).sum() for a, _ in pairs), tape.tensor(0.0, dtype=pairs[0][0].dtype)).backward()
    sum(((b * b).sum() for _, b in pairs), torch.tensor(0.0, dtype=pairs[0][1].dtype)).backward()
    for a, b in zip(xs, xt):
        if b.grad is None:
            assert a.grad is None
        else:
            # (float32 second derivatives sum terms up to |b.grad|'s largest:
            # an entry that cancels carries float32 rounding of that scale,
            # which BLAS kernels with another summation order round otherwise)
            want = b.grad.numpy()
            scale = float(np.abs(want).max(initial=0.0)) if dtype == np.float32 else 0.0
            np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-4,
                                       atol=max(1e-4, 1e-6 * scale))


# ----------------------------------------------------------------------- cat
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('k', [1, 2, 3, 4])
@pytest.mark.parametrize('dim', [0, 1, 2, -1, -2, -3])
def test_cat_fast_lane(dtype, k, dim):
    base = [2, 3, 4]
    xs, xt = [], []
    for i in range(k):
        s = list(base)
        s[dim] = 1 + i
        a, b = _pair(tuple(s), dtype, rg=i != 1 or k == 1)
        xs.append(a)
        xt.append(b)
    for _ in range(2):          # the second call takes the cached signature
        ys = tape.cat(xs, dim)
        yt = torch.cat(xt, dim)
        assert ys.shape == tuple(yt.shape)
        _same_dtype(ys, yt)
        np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    assert ys.grad_fn.name() == yt.grad_fn.name() == 'CatBackward0'
    assert len(ys.grad_fn.next_functions) == len(yt.grad_fn.next_functions) == k
    for (fs, _), (ft, _) in zip(ys.grad_fn.next_functions, yt.grad_fn.next_functions):
        assert (fs is None) == (ft is None)
    ins_s = [x for x in xs if x.requires_grad]
    ins_t = [x for x in xt if x.requires_grad]
    _grads(ys, yt, ins_s, ins_t, dtype, double=False)
    ys2 = tape.cat(xs, dim)
    yt2 = torch.cat(xt, dim)
    _grads((ys2 * ys2).sum(), (yt2 * yt2).sum(), ins_s, ins_t, dtype)


@pytest.mark.parametrize('shape', [(64, 256), (256, 1024)])
def test_cat_big_and_pooled(shape):
    (xs, xt), (ys_, yt_) = _pair(shape), _pair(shape)
    out = tape.cat([xs, ys_], 1)
    ref = torch.cat([xt, yt_], 1)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    w = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(tape.tensor(w))
    ref.backward(torch.tensor(w))
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(ys_.grad.numpy(), yt_.grad.numpy())


def test_cat_result_freed_without_gc():
    # the join's recursion once was a closure (a reference cycle), which kept
    # each result and its buffer alive until the garbage collector ran
    a, _ = _pair((3, 4))
    b, _ = _pair((3, 4))
    c, _ = _pair((3, 4))
    for ts in ([a, b], [a, b, c]):
        gc.disable()
        try:
            out = tape.cat(ts, 0)
            ref = weakref.ref(out._data)
            del out
            assert ref() is None
        finally:
            gc.enable()


def test_cat_no_grad_and_mixed():
    a, at = _pair((2, 3), rg=False)
    b, bt = _pair((2, 3), rg=False)
    y = tape.cat([a, b], 1)
    assert y.grad_fn is None and not y.requires_grad
    c, ct = _pair((2, 3), np.float64)
    y = tape.cat([a, c], 0)           # mixed dtypes: the general path
    yt = torch.cat([at, ct], 0)
    _same_dtype(y, yt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy())
    with tape.no_grad():
        y = tape.cat([c, c], 0)
    assert y.grad_fn is None
    # 1-D empty tensors are skipped (PyTorch's legacy rule)
    e = tape.tensor(np.zeros(0, np.float32))
    y = tape.cat([a, e, b], 0)
    yt = torch.cat([at, torch.zeros(0), bt], 0)
    assert y.shape == tuple(yt.shape)
    # tuples, and empty results
    y = tape.cat((a[:0], b[:0]), 0)
    assert y.shape == (0, 3)


def test_cat_errors():
    a = tape.ones(2, 3)
    b = tape.ones(3, 3)
    for args, typ in [(([a, b], 1), RuntimeError), (([a, tape.ones(2)], 0), RuntimeError),
                      (([a, a], 2), IndexError), (([a, a], -3), IndexError),
                      (([tape.tensor(1.0), tape.tensor(2.0)], 0), RuntimeError),
                      (([], 0), ValueError), ((a, 0), TypeError), (([a, 1], 0), TypeError)]:
        ta = [torch.tensor(x.numpy()) if isinstance(x, tape.Tensor) else x
              for x in args[0]] if isinstance(args[0], list) else torch.ones(2, 3)
        with pytest.raises(typ):
            tape.cat(*args)
        if not (isinstance(args[0], list) and not args[0]):
            with pytest.raises(typ):
                torch.cat(ta, args[1])
    # a cached signature still checks nothing it should not skip
    tape.cat([a, a], 1)
    with pytest.raises(RuntimeError):
        tape.cat([a, b], 1)


def test_stack_still_matches():
    (a, at), (b, bt) = _pair((2, 3)), _pair((2, 3))
    for dim in (0, 1, 2, -1):
        ys = tape.stack([a, b], dim)
        yt = torch.stack([at, bt], dim)
        np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
        assert ys.grad_fn.name() == yt.grad_fn.name()
        _grads(ys, yt, [a, b], [at, bt], np.float32, double=False)


# ----------------------------------------------------------------- matmul
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('sa,sb', [
    ((4, 3, 5), (4, 5, 2)),          # bmm shapes
    ((2, 4, 3, 5), (2, 4, 5, 2)),    # 4-D, same batch
    ((1, 3, 5), (4, 5, 2)),          # a's batch broadcast
    ((4, 3, 5), (1, 5, 2)),          # b's batch broadcast
    ((2, 1, 3, 5), (4, 5, 2)),       # batch dims broadcast both ways
    ((5,), (4, 5, 2)),               # a vector times a stack
    ((3, 5), (2, 4, 5, 2)),          # a matrix times a stack
    ((4, 3, 5), (5, 2)),             # a stack times a matrix (one mm)
    ((4, 3, 5), (5,)),
    ((0, 3, 5), (0, 5, 2)),          # empty batch
    ((4, 3, 0), (4, 0, 2)),          # empty contraction
])
def test_matmul_batched(dtype, sa, sb):
    xs, xt = _pair(sa, dtype)
    ys_, yt_ = _pair(sb, dtype)
    for _ in range(2):          # the second call takes the cached plan
        zs = xs @ ys_
        zt = xt @ yt_
        assert zs.shape == tuple(zt.shape)
        _same_dtype(zs, zt)
        np.testing.assert_allclose(zs.detach().numpy(), zt.detach().numpy(), **_tol(dtype))
    assert zs.grad_fn is not None
    _grads(zs, zt, [xs, ys_], [xt, yt_], dtype)
    _grads((zs * zs).sum(), (zt * zt).sum(), [xs, ys_], [xt, yt_], dtype)


def test_matmul_graph_and_no_grad():
    xs, xt = _pair((4, 3, 5))
    ys_, yt_ = _pair((4, 5, 2), rg=False)
    for _ in range(2):
        z = xs @ ys_
        nodes = [z.grad_fn.name()]
        bmm = z.grad_fn.next_functions[0][0]
        nodes.append(bmm.name())
        assert nodes == ['ViewBackward0', 'BmmBackward0']
        assert bmm.next_functions[1][0] is None or 'View' in bmm.next_functions[1][0].name()
    b = tape.bmm(xs, ys_)
    assert b.grad_fn.name() == 'BmmBackward0'
    with tape.no_grad():
        z = xs @ ys_
    assert z.grad_fn is None
    np.testing.assert_allclose(z.numpy(), (xt @ yt_).detach().numpy(), rtol=1e-5, atol=1e-5)
    # a view of an input that is then changed in place is seen as stale
    a = tape.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    b = tape.tensor(RNG.standard_normal((2, 4, 3)))
    z = (a * 1.0) @ b
    z.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(b.numpy().sum(2)[:, None, :],
                                                               (2, 3, 4)))


def test_matmul_errors_after_cache():
    a = tape.ones(2, 3, 4)
    a @ tape.ones(2, 4, 5)
    for other, typ in [(tape.ones(2, 5, 5), RuntimeError), (tape.ones(3, 4, 5), RuntimeError),
                       (tape.ones(2, 4, 5, dtype=tape.float64), RuntimeError)]:
        with pytest.raises(typ):
            a @ other
        with pytest.raises(typ):
            torch.ones(2, 3, 4) @ torch.ones(*other.shape, dtype=getattr(
                torch, str(other.dtype).split('.')[-1]))


def test_matmul_noncontiguous_operands():
    d = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    xs = tape.tensor(d, requires_grad=True)
    xt = torch.tensor(d, requires_grad=True)
    e, et = _pair((4, 5, 2))
    for _ in range(2):
        zs = xs.transpose(1, 2) @ e
        zt = xt.transpose(1, 2) @ et
        np.testing.assert_allclose(zs.detach().numpy(), zt.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    _grads(zs, zt, [xs, e], [xt, et], np.float32)


# -------------------------------------------------------------------- var
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('fn', ['var', 'std'])
@pytest.mark.parametrize('shape,dim,keepdim,correction', [
    ((32, 10), 1, False, None),
    ((32, 10), 0, True, None),
    ((32, 10), -1, False, 0),
    ((4, 5, 6), (0, 2), False, None),
    ((4, 5, 6), (-1, 0), True, 2),
    ((4, 5, 6), -2, False, 1.5),
    ((7,), 0, False, None),
    ((3, 4), (0, 1), False, None),
    ((3, 4), None, False, None),
    ((64, 300), 1, False, None),      # large: the general path
])
def test_var_std(dtype, fn, shape, dim, keepdim, correction):
    xs, xt = _pair(shape, dtype)
    kw = {} if dim is None else dict(dim=dim, keepdim=keepdim, correction=correction)
    for _ in range(2):          # the second call takes the cached plan
        ys = getattr(xs, fn)(**kw)
        yt = getattr(xt, fn)(**kw)
        assert ys.shape == tuple(yt.shape)
        _same_dtype(ys, yt)
        np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), **_tol(dtype))
    assert ys.grad_fn.name() == yt.grad_fn.name()
    _grads(ys, yt, [xs], [xt], dtype)


def test_var_unbiased_and_edge_cases():
    xs, xt = _pair((5, 4), np.float64)
    for args in [(1, False), (1, True), (0,), (True,), (False,)]:
        ys = xs.var(*args)
        yt = xt.var(*args)
        np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    with pytest.warns(UserWarning):
        yt = xt.var(1, correction=4)
    ys = xs.var(1, correction=4)            # no degrees of freedom: inf/nan, as PyTorch
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy())
    e, et = _pair((0, 3), np.float64)
    with pytest.warns(UserWarning):
        yt = et.var(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ys = e.var(0)
    np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    with tape.no_grad():
        ys = xs.var(1)
    assert ys.grad_fn is None
    np.testing.assert_allclose(ys.numpy(), xt.var(1).detach().numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError):
        tape.ones(3, dtype=tape.int64).var()
    with pytest.raises(IndexError):
        xs.var(2)
    with pytest.raises(TypeError):
        xs.var(1.0)
