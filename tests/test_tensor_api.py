"""Factories, tensor attributes, repr, dtypes, in-place ops under no_grad, .data."""
import numpy as np
import pytest

import tape


# ------------------------------------------------------------ factories
def test_tensor_infers_dtypes_like_torch():
    assert tape.tensor([1.0, 2.0]).dtype == tape.float32
    assert tape.tensor(1.5).dtype == tape.float32
    assert tape.tensor([1, 2.5]).dtype == tape.float32
    assert tape.tensor([1, 2]).dtype == tape.int64
    assert tape.tensor(True).dtype == tape.bool
    assert tape.tensor(np.array([1.0, 2.0])).dtype == tape.float64
    assert tape.tensor(np.array([1.0], np.float32)).dtype == tape.float32
    assert tape.tensor([1.0], dtype=tape.float64).dtype == tape.float64
    assert tape.tensor([[1.0, 2.0], [3.0, 4.0]]).shape == (2, 2)
    assert tape.tensor(3.0).shape == ()


def test_tensor_copies_its_input():
    a = np.array([1.0, 2.0])
    t = tape.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]
    s = tape.tensor(t)
    t.add_(1)
    assert s.tolist() == [1.0, 2.0]


def test_tensor_requires_grad_flag():
    t = tape.tensor([1.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None
    with pytest.raises(RuntimeError, match='floating point'):
        tape.tensor([1, 2], requires_grad=True)


@pytest.mark.parametrize('factory,value', [(tape.ones, 1.0), (tape.zeros, 0.0)])
def test_ones_zeros(factory, value):
    for t in (factory(2, 3), factory((2, 3)), factory([2, 3])):
        assert t.shape == (2, 3) and t.dtype == tape.float32
        assert np.all(t.numpy() == value)
    assert factory(4, dtype=tape.float64).dtype == tape.float64
    assert factory(()).shape == ()
    r = factory(2, requires_grad=True)
    assert r.requires_grad and r.is_leaf


def test_full():
    t = tape.full((2, 3), 1.5)
    assert t.shape == (2, 3) and t.dtype == tape.float32
    assert np.all(t.numpy() == 1.5)
    assert tape.full((2,), 7).dtype == tape.int64
    assert tape.full((2,), 1.5, dtype=tape.float64).dtype == tape.float64
    assert tape.full((1,), 2.0, requires_grad=True).requires_grad


def test_arange():
    assert tape.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert tape.arange(5).dtype == tape.int64
    assert tape.arange(1, 4).tolist() == [1, 2, 3]
    assert tape.arange(-2, 4).tolist() == [-2, -1, 0, 1, 2, 3]
    assert tape.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tape.arange(0, 1, 0.25).dtype == tape.float32
    assert tape.arange(5.0).dtype == tape.float32
    assert tape.arange(3, dtype=tape.float64).dtype == tape.float64
    assert tape.arange(0, 20).view(-1, 1).shape == (20, 1)


def test_rand_randn_and_manual_seed():
    tape.manual_seed(7)
    a, b = tape.rand(3, 4), tape.randn(3, 4)
    tape.manual_seed(7)
    a2, b2 = tape.rand(3, 4), tape.randn(3, 4)
    np.testing.assert_array_equal(a.numpy(), a2.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())
    tape.manual_seed(8)
    assert not np.array_equal(tape.rand(3, 4).numpy(), a.numpy())
    assert a.dtype == tape.float32 and b.dtype == tape.float32
    assert tape.rand((2, 3)).shape == (2, 3)
    assert tape.randn(5, dtype=tape.float64).dtype == tape.float64
    u = tape.rand(2000).numpy()
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    z = tape.randn(4000).numpy()
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1
    assert tape.rand(2, requires_grad=True).requires_grad


def test_like_factories():
    base = tape.ones(2, 3, dtype=tape.float64)
    for f in (tape.zeros_like, tape.ones_like, tape.rand_like, tape.randn_like):
        t = f(base)
        assert t.shape == (2, 3) and t.dtype == tape.float64 and not t.requires_grad
    assert np.all(tape.zeros_like(base).numpy() == 0)
    assert np.all(tape.ones_like(base).numpy() == 1)
    assert tape.zeros_like(base, dtype=tape.float32).dtype == tape.float32
    f = tape.full_like(base, 3.0)
    assert f.dtype == tape.float64 and np.all(f.numpy() == 3.0)
    assert tape.ones_like(tape.zeros(2), requires_grad=True).requires_grad


def test_from_numpy_shares_memory():
    a = np.array([1.0, 2.0])
    t = tape.from_numpy(a)
    assert t.dtype == tape.float64
    a[0] = 5.0
    assert t.tolist() == [5.0, 2.0]
    t.add_(1.0)
    assert a.tolist() == [6.0, 3.0]
    with pytest.raises(TypeError):
        tape.from_numpy([1.0, 2.0])


# ------------------------------------------------------------ attributes
def test_shape_size_dim():
    x = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert x.size() == (2, 3)
    assert x.size(1) == 3 and x.size(-1) == 3 and x.size(0) == 2
    assert x.dim() == 2 and x.ndim == 2
    assert x.numel() == 6 and len(x) == 2
    assert repr(x.shape) == 'tape.Size([2, 3])'
    assert tape.tensor(1.0).dim() == 0 and tape.tensor(1.0).shape == ()
    with pytest.raises(IndexError):
        x.size(2)


def test_item_tolist_numpy():
    assert tape.tensor(2.5).item() == 2.5
    assert tape.tensor([4.0]).item() == 4.0
    assert isinstance(tape.tensor(3).item(), int)
    assert isinstance(tape.tensor(3.0).item(), float)
    with pytest.raises(RuntimeError, match='cannot be converted to Scalar'):
        tape.tensor([1.0, 2.0]).item()
    assert tape.tensor([[1.0, 2.0]]).tolist() == [[1.0, 2.0]]
    assert tape.tensor(2.5).tolist() == 2.5
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    assert y.item() == 6.0                         # item works on graph tensors
    with pytest.raises(RuntimeError, match=r'numpy\(\) on Tensor that requires grad'):
        x.numpy()
    arr = x.detach().numpy()
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float32
    c = tape.tensor([1.0, 2.0])
    c.numpy()[0] = 9.0                             # numpy() shares storage
    assert c.tolist() == [9.0, 2.0]


def test_dtype_attribute_and_conversions():
    x = tape.tensor([1.0, 2.0])
    assert x.dtype == tape.float32 == np.float32
    assert x.double().dtype == tape.float64
    assert x.double().float().dtype == tape.float32
    assert tape.get_default_dtype() == tape.float32


def test_grad_and_grad_fn_attributes():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.grad_fn is not None and y.grad_fn.name() == 'MulBackward0'
    assert 'MulBackward0' in repr(y.grad_fn)
    assert y.requires_grad and not y.is_leaf
    assert x.grad_fn is None
    y.sum().backward()
    assert isinstance(x.grad, tape.Tensor)
    assert x.grad.shape == x.shape and not x.grad.requires_grad


def test_grad_setter_checks():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.grad = tape.tensor([5.0, 5.0])
    (x * 1).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    with pytest.raises(RuntimeError):
        x.grad = tape.tensor([1.0, 2.0, 3.0])


# ------------------------------------------------------------ .data, detach
def test_data_shares_storage_and_is_outside_graph():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    d = x.data
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    d.mul_(3)
    assert x.detach().tolist() == [3.0, 6.0]
    assert x.requires_grad and x.is_leaf
    y = x * 2
    yd = y.data
    assert not yd.requires_grad and yd.grad_fn is None
    yd.add_(1)
    assert y.detach().tolist() == [7.0, 13.0]


def test_data_of_0d_result_shares_storage():
    x = tape.tensor(3.0, requires_grad=True)
    y = x * 2
    y.data.add_(1)
    assert y.item() == 7.0


def test_data_setter():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.data = tape.tensor([5.0, 6.0])
    assert x.detach().tolist() == [5.0, 6.0] and x.requires_grad
    (x * x).sum().backward()
    assert x.grad.tolist() == [10.0, 12.0]


def test_detach_shares_storage():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert np.shares_memory(d.numpy(), y.data.numpy())
    dx = x.detach()
    assert np.shares_memory(dx.numpy(), x.data.numpy())


# ------------------------------------------------------------ in-place
def test_inplace_under_no_grad_on_leaves():
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    with tape.no_grad():
        r = w.sub_(tape.tensor([0.5, 0.5]))
        assert r is w
        w.add_(1.0)
        w.mul_(2.0)
        w -= 1.0
        w += tape.tensor([0.5, 0.5])
        w *= 2.0
    assert w.detach().tolist() == [5.0, 9.0]
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    (w * w).sum().backward()                       # still a usable leaf
    assert w.grad.tolist() == [10.0, 18.0]


def test_inplace_keeps_identity_and_dtype():
    x = tape.tensor([1.0, 2.0])
    ident = id(x)
    x += 1
    x -= 0.5
    x *= 4
    assert id(x) == ident and x.dtype == tape.float32
    assert x.tolist() == [6.0, 10.0]
    assert x.zero_() is x and x.tolist() == [0.0, 0.0]


def test_inplace_alpha_and_broadcast_error():
    x = tape.tensor([1.0, 2.0])
    x.sub_(tape.tensor([1.0, 1.0]), alpha=0.5)
    assert x.tolist() == [0.5, 1.5]
    y = tape.tensor([[1.0, 2.0]])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y.add_(tape.tensor([[1.0], [2.0]]))


def test_seed_style_update_through_data():
    w = tape.tensor([[0.5]], requires_grad=True)
    for _ in range(3):
        loss = ((w * 4.0 - 2.0) ** 2).sum()
        loss.backward()
        w.data.sub_(0.01 * w.grad.data)
        w.grad.data.zero_()
    assert w.grad.tolist() == [[0.0]]
    assert w.is_leaf and w.requires_grad
    assert abs(w.item() - 0.5) < 1e-12               # gradient is zero at the optimum
    p = tape.tensor([1.0, 0.0], requires_grad=True)
    (p * tape.tensor([2.0, 3.0])).sum().backward()
    p.data -= 0.5 * p.grad.data
    assert p.detach().tolist() == [0.0, -1.5] and p.is_leaf


def test_setitem_on_plain_tensor():
    x = tape.tensor([1.0, 2.0, 3.0])
    x[0] = 5.0
    x[1:] = tape.tensor([7.0, 8.0])
    assert x.tolist() == [5.0, 7.0, 8.0]


# ------------------------------------------------------------ dtypes
def test_float64_end_to_end():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    y = (x.exp() * 2 + x ** 2).mean()
    assert y.dtype == tape.float64
    y.backward()
    assert x.grad.dtype == tape.float64
    expected = (np.exp([1.0, 2.0]) * 2 + 2 * np.array([1.0, 2.0])) / 2
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-14)


def test_float32_results_stay_float32():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    for y in (x * 2.5, 2.5 * x, x / 3, 1 / x, x ** 2, x ** 0.5, 2 ** x, x - 1.5, x.exp(),
              x.sum(), x.mean(), x.sigmoid(), x @ x, x[0] * 3.0, x.sum() * 0.1):
        assert y.dtype == tape.float32, y


_PROMOTION = [
    ('f32+f64', lambda m: m.ones(2) + m.ones(2, dtype=m.float64)),
    ('f32*float', lambda m: m.ones(2) * 0.1),
    ('f64*float', lambda m: m.ones(2, dtype=m.float64) * 0.1),
    ('int+int', lambda m: m.arange(3) + 2),
    ('int*float', lambda m: m.arange(3) * 0.5),
    ('int/int', lambda m: m.arange(3) / 2),
    ('int+f32', lambda m: m.arange(3) + m.ones(3)),
    ('f32*f64_0d', lambda m: m.ones(2) * m.tensor(2.0, dtype=m.float64)),
    ('f64*f32_0d', lambda m: m.ones(2, dtype=m.float64) * m.tensor(2.0)),
    ('f32_0d*f64_0d', lambda m: m.tensor(1.0) * m.tensor(2.0, dtype=m.float64)),
    ('f32_grad_f64', lambda m: m.ones(2, requires_grad=True) * m.ones(2, dtype=m.float64)),
    ('float-f32', lambda m: 2.5 - m.ones(2)),
]


@pytest.mark.parametrize('fn', [pytest.param(f, id=n) for n, f in _PROMOTION])
def test_dtype_promotion_matches_torch(fn, torch_or_skip):
    torch = torch_or_skip
    got = fn(tape).dtype
    want = fn(torch).dtype
    assert str(want) == 'torch.' + str(got), f'tape {got} vs torch {want}'


# ------------------------------------------------------------ repr
def test_repr_seed_examples():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == 'tensor([1., 2.], requires_grad=True)'
    assert repr(x + x) == 'tensor([2., 4.], grad_fn=<AddBackward0>)'
    assert repr((x * x).sum()) == 'tensor(5., grad_fn=<SumBackward0>)'
    assert repr(tape.tensor([0.9610, 0.5827, 0.1305])) == 'tensor([0.9610, 0.5827, 0.1305])'
    assert repr(tape.tensor(12.0)) == 'tensor(12.)'
    assert repr(tape.tensor([2.0], dtype=tape.float64)) == 'tensor([2.], dtype=tape.float64)'
    assert repr(tape.tensor([1, 2])) == 'tensor([1, 2])'
    assert str(x) == repr(x)
    with tape.no_grad():
        assert repr(x * 2) == 'tensor([2., 4.])'


_REPRS = [
    ('int_valued', lambda m: m.tensor([1.0, 2.0, -3.0]), None),
    ('fractional', lambda m: m.tensor([0.1, 0.25, 1 / 3]), None),
    ('0d', lambda m: m.tensor(3.25), None),
    ('0d_neg', lambda m: m.tensor(-0.5), None),
    ('requires_grad', lambda m: m.tensor([1.5, 2.0], requires_grad=True), None),
    ('grad_fn', lambda m: m.tensor([1.5, 2.0], requires_grad=True) * 2, None),
    ('grad_fn_0d', lambda m: (m.tensor([1.5, 2.0], requires_grad=True) * 2).sum(), None),
    ('float64', lambda m: m.tensor([0.1, 0.25], dtype=m.float64), None),
    ('float64_rg', lambda m: m.tensor(2.0, dtype=m.float64, requires_grad=True), None),
    ('int64', lambda m: m.tensor([3, -4]), None),
    ('int32', lambda m: m.tensor([3, -4], dtype=m.int32), None),
    ('sci_small', lambda m: m.tensor([1e-5, 1.0]), None),
    ('sci_big', lambda m: m.tensor([1e9, 1.0]), None),
    ('inf_mixed', lambda m: m.tensor([float('inf'), 1.0, -2.5]), None),
    ('nan_inf_int_valued', lambda m: m.tensor([float('inf'), 1.0, float('nan')]), None),
    ('empty', lambda m: m.zeros(0), None),
    ('empty_2d', lambda m: m.zeros(2, 0), None),
    ('row_2d_grad_fn', lambda m: m.tensor([[1.5, 2.0]], requires_grad=True) * 2, None),
    ('3d', lambda m: m.zeros(2, 2, 2), None),
    ('2d_plain', lambda m: m.ones(3, 4), None),
    ('2d_requires_grad', lambda m: m.ones(3, 4, requires_grad=True), None),
    ('2d_grad_fn', lambda m: m.ones(3, 4, requires_grad=True).add(m.zeros(3, 4)), None),
    ('2d_float64', lambda m: m.zeros(2, 3, dtype=m.float64), None),
    ('long_row', lambda m: m.arange(30, dtype=m.float32) / 7, None),
    ('summarized', lambda m: m.arange(2000, dtype=m.float32), None),
    ('bool', lambda m: m.tensor([True, False]), None),
]


@pytest.mark.parametrize('fn', [
    pytest.param(f, id=n, marks=() if why is None else pytest.mark.xfail(reason=why, strict=True))
    for n, f, why in _REPRS])
def test_repr_matches_torch(fn, torch_or_skip):
    torch = torch_or_skip
    want = repr(fn(torch)).replace('torch.', 'tape.')
    assert repr(fn(tape)) == want


def test_grad_fn_repr_names():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    cases = {
        'AddBackward0': x + 1, 'SubBackward0': x - x, 'MulBackward0': x * 2,
        'DivBackward0': x / 2, 'PowBackward0': x ** 2, 'NegBackward0': -x,
        'ExpBackward0': x.exp(), 'LogBackward0': x.log(), 'TanhBackward0': x.tanh(),
        'SigmoidBackward0': x.sigmoid(), 'ReluBackward0': x.relu(),
        'SumBackward0': x.sum(), 'MeanBackward0': x.mean(),
        'SumBackward1': x.view(1, 2).sum(0), 'MeanBackward1': x.view(1, 2).mean(1),
        'MmBackward0': x.view(1, 2).mm(x.view(2, 1)), 'ExpandBackward0': x.expand(3, 2),
        'ViewBackward0': x.view(2, 1), 'TBackward0': x.view(1, 2).t(),
        'SelectBackward0': x[0], 'SliceBackward0': x[1:],
        'RsubBackward1': 1 - x, 'PowBackward1': x ** x, 'PowBackward2': 2 ** x,
    }
    for name, t in cases.items():
        assert t.grad_fn.name() == name
        assert repr(t).endswith(f'grad_fn=<{name}>)'), repr(t)


def test_variable_is_a_tensor():
    from tape.autograd import Variable
    v = Variable(tape.ones(2), requires_grad=True)
    assert isinstance(v, tape.Tensor) and v.requires_grad and v.is_leaf
    assert repr(v) == 'tensor([1., 1.], requires_grad=True)'
    with pytest.warns(UserWarning, match='volatile'):
        u = Variable(tape.ones(1), volatile=True)
    assert not u.requires_grad


# ------------------------------------------------------------ errors
_ERRORS = [
    ('view_bad_size', lambda m: m.ones(2, 3).view(4), None),
    ('expand_bad', lambda m: m.ones(2, 3).expand(3, 3), None),
    ('mm_shapes', lambda m: m.ones(2, 3).mm(m.ones(2, 3)), None),
    ('mm_1d', lambda m: m.ones(3).mm(m.ones(3, 2)), None),
    ('matmul_0d', lambda m: m.ones(3) @ m.tensor(2.0), None),
    ('broadcast', lambda m: m.ones(2, 3) + m.ones(2), None),
    ('inplace_broadcast', lambda m: m.ones(1, 2).add_(m.ones(2, 1)), None),
    ('int_requires_grad', lambda m: m.zeros(2, dtype=m.int64, requires_grad=True), None),
    ('item_many', lambda m: m.ones(2).item(), None),
    ('view_non_contiguous', lambda m: m.ones(2, 3).t().view(-1), None),
    ('sum_duplicate_dims', lambda m: m.ones(2, 3).sum((0, 0)), None),
    ('mean_of_int', lambda m: m.tensor([1, 2]).mean(), None),
    ('mul_float_into_int', lambda m: m.ones(2, dtype=m.int64).mul_(1.5), None),
]


@pytest.mark.parametrize('fn', [
    pytest.param(f, id=n, marks=() if why is None else pytest.mark.xfail(reason=why, strict=True))
    for n, f, why in _ERRORS])
def test_errors_torch_raises_are_raised(fn, torch_or_skip):
    torch = torch_or_skip
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(Exception) as ours:
        fn(tape)
    # the same exception family (RuntimeError, IndexError, TypeError, ...)
    assert issubclass(ours.type, theirs.type) or issubclass(theirs.type, ours.type), \
        f'tape raised {ours.type.__name__}, torch {theirs.type.__name__}'


# errors whose message is PyTorch's word for word, on graph tensors as well as plain
# ones: (name, prepare(m, x) -> the op's input, op(m, input) that raises)
_EXACT_ERRORS = [
    ('view_non_contiguous', lambda m, x: x.t(), lambda m, z: z.view(-1)),
    ('view_of_column_slice', lambda m, x: x[:, 1:], lambda m, z: z.view(-1)),
    ('sum_duplicate_dims', None, lambda m, z: z.sum((0, 0))),
    ('sum_duplicate_negative_dim', None, lambda m, z: z.sum([1, -1])),
    ('mean_duplicate_dims', None, lambda m, z: z.mean((1, -1), keepdim=True)),
    ('mean_of_int', None, lambda m, z: m.tensor([1, 2]).mean()),
    ('mean_of_int_dim', None, lambda m, z: m.tensor([[1, 2]], dtype=m.int32).mean(0)),
    ('mean_of_bool', None, lambda m, z: m.tensor([True]).mean()),
    ('mul_float_into_int', None, lambda m, z: m.ones(2, dtype=m.int64).mul_(1.5)),
    ('add_float_tensor_into_int', None, lambda m, z: m.ones(2, 3, dtype=m.int64).add_(z)),
    ('div_into_int', None, lambda m, z: m.ones(2, dtype=m.int64).div_(2)),
    ('add_int_into_bool', None, lambda m, z: m.ones(2, dtype=m.bool).add_(1)),
]


@pytest.mark.parametrize('prep,fn', [pytest.param(p, f, id=n) for n, p, f in _EXACT_ERRORS])
def test_error_messages_match_torch(prep, fn, torch_or_skip):
    torch = torch_or_skip
    prep = prep or (lambda m, x: x)
    base = np.arange(6.0).reshape(2, 3)
    tx = torch.tensor(base, requires_grad=True)
    tz = prep(torch, tx * 1)
    with pytest.raises(Exception) as theirs:
        fn(torch, tz)
    x = tape.tensor(base, requires_grad=True)
    z = prep(tape, x * 1)               # a graph tensor: the error must not touch its tape
    recs = len(z._tape.rec)
    with pytest.raises(Exception) as ours:
        fn(tape, z)
    assert ours.type is theirs.type
    assert str(ours.value) == str(theirs.value)
    assert len(z._tape.rec) == recs, 'the failed op left a record on the tape'
    z.sum().backward()
    tz.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_refused_inplace_leaves_the_tensor_unchanged():
    i = tape.tensor([1, 2])
    v = i._version
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        i.mul_(1.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        i += 0.5
    assert i.tolist() == [1, 2] and i._version == v
    i.mul_(3)                            # same kind: allowed
    assert i.tolist() == [3, 6] and i.dtype == tape.int64
    f = tape.ones(2, dtype=tape.float32)
    f.add_(tape.ones(2, dtype=tape.float64))     # float64 into float32: same kind, allowed
    assert f.tolist() == [2.0, 2.0] and f.dtype == tape.float32


def test_reshape_views_where_it_can_and_copies_where_it_must():
    x = tape.arange(6.0).reshape(2, 3).requires_grad_()
    xt = x.t()
    assert np.shares_memory(x.view(3, 2).detach().numpy(), x.detach().numpy())
    assert np.shares_memory(x[:, 1:].reshape(2, 1, 2).detach().numpy(), x.detach().numpy())
    flat = xt.reshape(-1)
    assert flat.grad_fn.name() == 'UnsafeViewBackward0'
    assert flat.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    (flat * tape.arange(6.0)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]


def test_module_level_inplace_ops_are_the_tensor_methods():
    torch = pytest.importorskip('torch')
    names = [n for n in dir(torch) if n.endswith('_') and not n.startswith('_')
             and hasattr(tape.Tensor, n) and callable(getattr(torch, n))]
    assert {'sin_', 'exp_', 'clamp_', 'zero_', 'fill_'} <= set(names)
    for name in names:
        assert callable(getattr(tape, name, None)), name
    for name, args in (('sin_', ()), ('clamp_', (0.2, 0.6)), ('fill_', (3.0,)),
                       ('sqrt_', ()), ('zero_', ())):
        a, b = tape.tensor([0.1, 0.5, 0.9]), torch.tensor([0.1, 0.5, 0.9])
        assert getattr(tape, name)(a, *args) is a
        getattr(torch, name)(b, *args)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
