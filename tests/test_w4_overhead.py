"""The W4 loop's cheap paths (examples/bench.py): rand/randn's direct draw, ``.data``
made inline, in-place updates through ndarray's operators, ``Tensor.sum``/``mean``
bound without a wrapper.  Each must give what the general path gives."""
import numpy as np
import pytest

import tape


def _draws(fn, *args, **kw):
    tape.manual_seed(123)
    return fn(*args, **kw)._data.copy()


@pytest.mark.parametrize('fn', [tape.rand, tape.randn])
def test_random_fast_path_same_stream_as_general_path(fn):
    # rand(8, 1) (direct draw) and rand((8, 1)) / rand(size=...) (general path)
    a = _draws(fn, 8, 1)
    b = _draws(fn, (8, 1))
    c = _draws(fn, size=(8, 1))
    d = _draws(fn, np.int64(8), 1)            # a NumPy int takes the general path
    for other in (b, c, d):
        np.testing.assert_array_equal(a, other)
    assert a.dtype == np.float32 and a.shape == (8, 1)
    # a sequence of draws continues the same stream either way
    tape.manual_seed(5)
    seq1 = [fn(3, 2)._data.copy() for _ in range(3)]
    tape.manual_seed(5)
    seq2 = [fn((3, 2))._data.copy() for _ in range(3)]
    for x, y in zip(seq1, seq2):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize('fn', [tape.rand, tape.randn])
def test_random_fast_path_dtype_grad_and_shapes(fn):
    t = fn(2, 3, requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None and t.dtype == tape.float32
    assert fn().shape == () and fn(0).shape == (0,)
    assert fn(4).shape == (4,)
    old = tape.get_default_dtype()
    try:
        tape.set_default_dtype(tape.float64)
        assert fn(2).dtype == tape.float64
        tape.manual_seed(9)
        a = fn(5)._data.copy()
        tape.manual_seed(9)
        np.testing.assert_array_equal(a, fn((5,))._data)
    finally:
        tape.set_default_dtype(old)
    assert fn(2, dtype=tape.float64).dtype == tape.float64
    with pytest.raises(RuntimeError):
        fn(2, -1)
    with pytest.raises(TypeError):
        fn(2, 1.5)
    g = tape.Generator().manual_seed(3)
    a = fn(4, generator=g)._data.copy()
    g = tape.Generator().manual_seed(3)
    np.testing.assert_array_equal(a, fn(4, generator=g)._data)


def test_random_large_draw_is_aligned():
    from tape._pool import ALIGN, ALIGN_MIN
    n = ALIGN_MIN // 4 + 16
    for fn in (tape.rand, tape.randn):
        tape.manual_seed(1)
        t = fn(n)
        assert t._data.ctypes.data % ALIGN == 0 and t._data.flags.c_contiguous
        tape.manual_seed(1)
        np.testing.assert_array_equal(t._data, fn((n,))._data)


def test_data_shares_storage_and_is_not_tracked():
    w = tape.rand(1, 1, requires_grad=True)
    d = w.data
    assert d is not w and d.is_leaf and not d.requires_grad and d._data is w._data
    v = w._version
    d.sub_(0.5)
    assert w._version == v                      # changes through .data are not tracked
    np.testing.assert_array_equal(w._data, d._data)
    # a 0-d result (a NumPy scalar inside) gets storage that .data then shares
    s = (w * 2).sum()
    sd = s.data
    assert isinstance(s._data, np.ndarray) and sd._data is s._data and sd.shape == ()
    sd.zero_()
    assert s.item() == 0.0


def test_inplace_update_paths_match_torch():
    torch = pytest.importorskip('torch')
    for name in ('add_', 'sub_', 'mul_', 'div_'):
        a = tape.tensor([[1.5, -2.0], [3.0, 4.0]])
        ta = torch.tensor([[1.5, -2.0], [3.0, 4.0]])
        v = a._version
        for other, tother in ((0.25, 0.25), (2, 2), (tape.tensor([2.0, -4.0]),
                                                     torch.tensor([2.0, -4.0]))):
            r = getattr(a, name)(other)
            getattr(ta, name)(tother)
            assert r is a
        assert a._version == v + 3
        np.testing.assert_allclose(a._data, ta.numpy(), rtol=1e-6)
    # an integer tensor cannot take a float in place, as in PyTorch
    i = tape.tensor([1, 2])
    with pytest.raises(RuntimeError):
        i.sub_(0.5)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).sub_(0.5)
    np.testing.assert_array_equal(i._data, [1, 2])
    i.sub_(1)
    np.testing.assert_array_equal(i._data, [0, 1])
    # a shape that does not broadcast into the target raises, and leaves it as it was
    a = tape.zeros(2)
    with pytest.raises(RuntimeError):
        a.add_(tape.ones(3))
    # a leaf that requires grad: in-place outside no_grad raises; inside, it updates
    w = tape.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        w.sub_(1.0)
    with tape.no_grad():
        w.sub_(0.5)
    np.testing.assert_array_equal(w._data, [0.5, 0.5])
    # a 0-d tensor updates in place
    z = tape.tensor(3.0)
    zd = z._data
    z.mul_(2.0)
    assert z.item() == 6.0 and z._data is zd


def test_sum_and_mean_methods_keep_their_arguments():
    torch = pytest.importorskip('torch')
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, ta = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for args, kw in (((), {}), ((1,), {}), ((0, True), {}), ((), {'dim': 1, 'keepdim': True}),
                     ((), {'dtype': tape.float64})):
        tkw = dict(kw)
        if 'dtype' in tkw:
            tkw['dtype'] = torch.float64
        for m in ('sum', 'mean'):
            r, tr = getattr(a, m)(*args, **kw), getattr(ta, m)(*args, **tkw)
            assert tuple(r.shape) == tuple(tr.shape)
            assert str(r.dtype).split('.')[-1] == str(tr.dtype).split('.')[-1]
            np.testing.assert_allclose(r.detach()._data, tr.detach().numpy(), rtol=1e-6)


def test_w4_loop_matches_torch():
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    w0, b0 = np.float32([[0.3]]), np.float32([[0.0]])
    w, b = tape.tensor(w0, requires_grad=True), tape.tensor(b0, requires_grad=True)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    lr = 0.001
    for _ in range(5):
        xs = (rng.random((8, 1)) * 20).astype(np.float32)
        ys = (xs * 2 + (1 + rng.standard_normal((8, 1))) * 3).astype(np.float32)
        for lib, x, y, ww, bb in ((tape, tape.tensor(xs), tape.tensor(ys), w, b),
                                  (torch, torch.tensor(xs), torch.tensor(ys), tw, tb)):
            y_pred = x.mm(ww) + bb.expand_as(y)
            loss = (0.5 * (y_pred - y) ** 2).sum()
            loss.backward()
            ww.data.sub_(lr * ww.grad.data)
            bb.data.sub_(lr * bb.grad.data)
            ww.grad.data.zero_()
            bb.grad.data.zero_()
        np.testing.assert_allclose(w._data, tw.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(b._data, tb.detach().numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(w.grad._data, 0)
    assert w._version == 0 and w.grad is not None
