"""Creation, dtype promotion, shape and indexing details a differential hunt
against PyTorch 2.13 found differing: each test states PyTorch's behaviour and,
where torch is installed, checks it against torch."""
import warnings

import numpy as np
import pytest

import tape


def _same(t, r):
    """tape result ``t`` equals torch result ``r``: values, dtype and shape."""
    assert str(t.dtype).split('.')[-1] == str(r.dtype).split('.')[-1], (t.dtype, r.dtype)
    assert tuple(t.shape) == tuple(r.shape)
    np.testing.assert_allclose(np.asarray(t.tolist(), float), np.asarray(r.tolist(), float))


# ------------------------------------------------------------ creation
@pytest.mark.parametrize('data', [
    np.int8(3), np.int16(3), np.int32(3), np.uint8(3), np.float16(1.5),
    [np.int8(1), np.int8(2)], [np.int8(1), np.int16(2)], [np.uint8(1), np.int8(1)],
    [np.int8(1), 2], [np.int8(1), 2.5], [np.float16(1), 2], [np.float16(1), 2.5],
    [np.float32(1), 2.5], [np.float64(1), 2], [[np.int16(1)], [np.int8(2)]], [np.int8(1), True],
])
def test_tensor_keeps_numpy_number_dtypes(data):
    """torch.tensor keeps a NumPy number's dtype and promotes a list's items with
    promote_types (a Python int counts as int64, a float as the default dtype)."""
    torch = pytest.importorskip('torch')
    _same(tape.tensor(data), torch.tensor(data))


def test_tensor_python_numbers_unchanged():
    assert tape.tensor([1, 2]).dtype == tape.int64
    assert tape.tensor([1.5, 2]).dtype == tape.float32
    assert tape.tensor(np.float64(1.5)).dtype == tape.float64
    assert tape.tensor([np.float64(1.5), 2.0]).dtype == tape.float64
    with pytest.raises(ValueError):
        tape.tensor([2 ** 63])


# ------------------------------------------------------------ promotion
def test_pow_bool_and_int_base_with_negative_int_exponents():
    torch = pytest.importorskip('torch')
    e = [-7, 5, 3]
    cases = [
        (lambda m: m.tensor([True, False, True]) ** m.tensor(e)),
        (lambda m: m.tensor(True) ** m.tensor(e, dtype=m.int32)),
        (lambda m: m.tensor(2) ** m.tensor(e, dtype=m.int32)),     # 0-d int64 keeps int32
        (lambda m: m.tensor(2, dtype=m.int32) ** m.tensor(e, dtype=m.int8)),
        (lambda m: m.tensor([-1, 1, 2]) ** m.tensor(e)),
        (lambda m: 2 ** m.tensor(e)),
        (lambda m: -3 ** m.tensor(e, dtype=m.int8)),
        (lambda m: (-1) ** m.tensor(e, dtype=m.int32)),
        (lambda m: True ** m.tensor(e)),
    ]
    for f in cases:
        _same(f(tape), f(torch))


def test_pow_shapes_still_checked():
    with pytest.raises(RuntimeError, match='pow'):
        tape.tensor([1, 2]) ** tape.tensor([-1, 2, 3])


def test_bitwise_ops_promote_as_pytorch():
    torch = pytest.importorskip('torch')
    for f in [lambda m: m.tensor([-7, 5, 3], dtype=m.int8) & m.tensor(2),
              lambda m: m.tensor(2) | m.tensor([7, 5, 3], dtype=m.uint8),
              lambda m: m.tensor([7, 5, 3], dtype=m.uint8) ^ m.tensor(2, dtype=m.int32),
              lambda m: m.tensor([7, 5], dtype=m.int32) & m.tensor([1, 1]),
              lambda m: m.bitwise_and(m.tensor([True, False]), m.tensor([3, 3], dtype=m.int16)),
              lambda m: m.tensor([7, 5]) & 3]:
        _same(f(tape), f(torch))
    with pytest.raises(NotImplementedError):
        tape.tensor([1, 2]) & tape.tensor([1., 2.])


def test_sum_and_prod_keep_an_integer_dtype_argument():
    torch = pytest.importorskip('torch')
    for f in [lambda m: m.tensor([[1, 2, 3], [4, 5, 6]]).sum(1, dtype=m.int32),
              lambda m: m.tensor([[1, 2, 3], [4, 5, 6]]).sum(dtype=m.int16),
              lambda m: m.tensor([[1., 2, 3], [4, 5, 6]]).sum((0, 1), keepdim=True, dtype=m.uint8),
              lambda m: m.tensor([[True, False, True]]).sum(1, dtype=m.int32),
              lambda m: m.tensor([[1, 2, 3], [4, 5, 6]]).prod(dtype=m.int32),
              lambda m: m.tensor([[1, 2, 3], [4, 5, 6]]).prod(1, dtype=m.int32),
              lambda m: m.tensor([[1, 2, 3], [4, 5, 6]], dtype=m.int32).sum(1),
              lambda m: m.tensor([[1, 2, 3], [4, 5, 6]], dtype=m.int32).prod()]:
        _same(f(tape), f(torch))


@pytest.mark.parametrize('a,b', [('uint8', 'int64'), ('uint8', 'int8'), ('int8', 'uint8'),
                                 ('int16', 'uint8'), ('int32', 'int64')])
def test_inplace_and_out_cast_within_a_category(a, b):
    """PyTorch casts an in-place result back into any dtype of the same category
    (uint8 += int64 is fine), NumPy's same_kind rule refused signed to unsigned."""
    torch = pytest.importorskip('torch')
    for m in (tape, torch):
        x = m.ones(2, dtype=getattr(m, a))
        x.add_(m.ones(2, dtype=getattr(m, b)) * 3)
        x.sub_(m.ones(2, dtype=getattr(m, b)))
        assert x.tolist() == [3, 3] and x.dtype == getattr(m, a)
        o = m.zeros(2, dtype=getattr(m, b))
        m.add(m.ones(2, dtype=getattr(m, a)), m.ones(2, dtype=getattr(m, a)), out=o)
        assert o.tolist() == [2, 2] and o.dtype == getattr(m, b)


def test_inplace_still_refuses_a_higher_category():
    for a, b in (('int64', 'float32'), ('bool', 'int64'), ('uint8', 'float16')):
        x = tape.ones(2, dtype=getattr(tape, a))
        with pytest.raises(RuntimeError, match="can't be cast"):
            x.add_(tape.ones(2, dtype=getattr(tape, b)))
    with pytest.raises(RuntimeError, match='Subtraction'):
        tape.tensor([True]).sub_(tape.tensor([True]))


def test_sign_of_bool_is_bool():
    torch = pytest.importorskip('torch')
    _same(tape.tensor([True, False]).sign(), torch.tensor([True, False]).sign())
    assert tape.tensor([-2, 0, 3]).sign().tolist() == [-1, 0, 1]


def test_logcumsumexp_of_integers_is_not_implemented():
    with pytest.raises(NotImplementedError, match='logcumsumexp'):
        tape.logcumsumexp(tape.tensor([1, 2, 3]), 0)


# ------------------------------------------------------------ shapes
def test_concatenate_takes_axis():
    torch = pytest.importorskip('torch')
    for f in [lambda m: m.concatenate((m.ones(2, 2), m.zeros(2, 1)), axis=1),
              lambda m: m.concat((m.ones(2, 2), m.zeros(2, 1)), axis=-1),
              lambda m: m.concatenate((m.ones(2, 2), m.zeros(1, 2)), 0),
              lambda m: m.concat((m.ones(2, 2), m.zeros(2, 1)), dim=1)]:
        _same(f(tape), f(torch))


def test_hstack_of_zero_dim_tensors():
    torch = pytest.importorskip('torch')
    f = lambda m: m.hstack([m.tensor(1), m.tensor(2.), m.tensor([3., 4.])])   # noqa: E731
    _same(f(tape), f(torch))


def test_block_diag_promotes_as_pytorch():
    torch = pytest.importorskip('torch')
    f = lambda m: m.block_diag(m.ones(2, 2), m.arange(3).reshape(1, 3))      # noqa: E731
    _same(f(tape), f(torch))


def test_chunk_of_an_empty_dim_gives_chunks_empty_tensors():
    torch = pytest.importorskip('torch')
    for f in [lambda m: m.arange(0).chunk(3), lambda m: m.zeros(2, 0).chunk(5, 1)]:
        r, t = f(torch), f(tape)
        assert len(r) == len(t)
        for a, b in zip(t, r):
            _same(a, b)
    assert len(tape.arange(5).chunk(3)) == 3 and len(tape.arange(6).chunk(4)) == 3


def test_nonzero_of_a_zero_dim_tensor():
    assert tape.tensor(3.).nonzero().shape == (1, 0)
    assert tape.tensor(0.).nonzero().shape == (0, 0)
    assert [t.tolist() for t in tape.tensor(3.).nonzero(as_tuple=True)] == [[0]]
    assert tape.zeros(0).nonzero().shape == (0, 1)


def test_histc_min_above_max_is_a_runtime_error():
    with pytest.raises(RuntimeError, match='max must be larger than min'):
        tape.histc(tape.tensor([1., 2.]), bins=4, min=3, max=1)
    with pytest.raises(NotImplementedError, match='histogram_cpu'):
        tape.histc(tape.tensor([1, 2]), bins=4)


# ------------------------------------------------------------ indexing
def test_list_of_sequences_indexes_as_a_tuple():
    torch = pytest.importorskip('torch')
    keys = [lambda m: [m.tensor([0, 1]), m.tensor([2, 0])], lambda m: [[0, 1], [2, 0]],
            lambda m: [0, slice(1, 3)], lambda m: [0, None], lambda m: [[0, 1]],
            lambda m: [1, 2]]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for k in keys:
            _same(tape.arange(12.).reshape(3, 4)[k(tape)],
                  torch.arange(12.).reshape(3, 4)[k(torch)])
            for m in (tape, torch):
                x = m.arange(12.).reshape(3, 4)
                x[k(m)] = -1.
                if m is tape:
                    got = x
                else:
                    _same(got, x)


def test_uint8_index_is_a_mask_and_small_ints_are_refused():
    torch = pytest.importorskip('torch')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for k in ([1, 0, 1], 1):
            _same(tape.arange(12.).reshape(3, 4)[tape.tensor(k, dtype=tape.uint8)],
                  torch.arange(12.).reshape(3, 4)[torch.tensor(k, dtype=torch.uint8)])
    with pytest.raises(IndexError, match='long, int, byte or bool'):
        tape.ones(3)[tape.tensor([0, 1], dtype=tape.int8)]
    assert tape.ones(3, 2)[tape.tensor([0, 2], dtype=tape.int32)].shape == (2, 2)


def test_scatter_reduce_multiply_and_value():
    torch = pytest.importorskip('torch')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for f in [
            lambda m: m.ones(3, 3).scatter(0, m.tensor([[0, 1, 0], [2, 0, 2]]),
                                           m.arange(6.).reshape(2, 3) + 1, reduce='multiply'),
            lambda m: m.ones(3, 3).scatter(0, m.tensor([[0, 1, 0], [2, 0, 2]]), 2.,
                                           reduce='multiply'),
            lambda m: m.ones(3, 3).scatter(1, m.tensor([[0, 0], [2, 1]]), 2., reduce='add'),
        ]:
            _same(f(tape), f(torch))
    with pytest.raises(RuntimeError, match='reduce'):
        tape.ones(3).scatter(0, tape.tensor([0]), 1., reduce='max')


def test_scatter_multiply_gradcheck():
    idx = tape.tensor([[0, 0], [2, 2], [3, 0]])
    x = tape.rand(3, 4, dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(lambda x: x.scatter(1, idx, 2., reduce='multiply'), (x,))


def test_getitem_list_of_tensors_gradcheck():
    rows, cols = tape.tensor([0, 1, 0]), tape.tensor([2, 0, 2])
    x = tape.rand(3, 4, dtype=tape.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert tape.autograd.gradcheck(lambda x: x[[rows, cols]] * 2, (x,))
        assert tape.autograd.gradcheck(
            lambda x: x[tape.tensor([1, 0, 1], dtype=tape.uint8)], (x,))


# ------------------------------------------------------------ more creation and shapes
def test_clone_contiguous_format_makes_row_major():
    x = tape.ones(2, 3).T
    assert x.clone().stride() == (1, 3)                    # preserve_format keeps the layout
    assert x.clone(memory_format=tape.contiguous_format).stride() == (2, 1)
    assert tape.clone(x, memory_format=tape.contiguous_format).is_contiguous()
    y = tape.rand(2, 3, dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(
        lambda y: y.T.clone(memory_format=tape.contiguous_format) * 2, (y,))


def test_tensor_python_ints_out_of_an_integer_dtype():
    """torch.tensor(ints, dtype=...): an unsigned dtype wraps negatives down to
    -max (-1 is 255 in uint8); anything else out of range is a RuntimeError."""
    torch = pytest.importorskip('torch')
    for data, dt in (([-1], 'uint8'), ([-255, 255], 'uint8'), (-1, 'uint8')):
        _same(tape.tensor(data, dtype=getattr(tape, dt)),
              torch.tensor(data, dtype=getattr(torch, dt)))
    for data, dt in (([300], 'int8'), ([-256], 'uint8'), ([2 ** 40], 'int32'), (300, 'uint8')):
        with pytest.raises(RuntimeError, match='overflow'):
            tape.tensor(data, dtype=getattr(tape, dt))
    with pytest.raises(ValueError, match='Overflow'):
        tape.tensor([2 ** 64], dtype=tape.int64)


def test_meshgrid_wants_one_dtype_and_bincount_integers():
    for f in (lambda: tape.meshgrid(tape.arange(2), tape.arange(3.), indexing='ij'),
              lambda: tape.cartesian_prod(tape.arange(2), tape.arange(2.))):
        with pytest.raises(RuntimeError, match='same dtype'):
            f()
    assert tape.cartesian_prod(tape.arange(2), tape.arange(3)).shape == (6, 2)
    with pytest.raises(NotImplementedError, match='bincount'):
        tape.bincount(tape.tensor([1., 2.]))
    with pytest.raises(RuntimeError, match='1-d non-negative'):
        tape.bincount(tape.tensor([[1, 2]]))


def test_any_all_of_uint8_stay_uint8():
    torch = pytest.importorskip('torch')
    for f in (lambda m: m.tensor([[0, 1], [0, 0]], dtype=m.uint8).any(),
              lambda m: m.tensor([[0, 1], [0, 0]], dtype=m.uint8).all(1),
              lambda m: m.any(m.tensor([[0, 1], [0, 0]], dtype=m.uint8), 0, keepdim=True),
              lambda m: m.tensor([3, 0]).any(), lambda m: m.tensor([1., 2.]).all(0)):
        _same(f(tape), f(torch))


def test_float_alpha_with_integer_operands_is_refused():
    torch = pytest.importorskip('torch')
    for f in (lambda m: m.add(m.tensor([1, 2]), m.tensor([1, 1]), alpha=0.5),
              lambda m: m.tensor([1, 2]).add(m.tensor([1, 1]), alpha=0.5),
              lambda m: m.sub(m.tensor([1]), 1, alpha=2.)):
        for m in (tape, torch):
            with pytest.raises(RuntimeError, match='alpha'):
                f(m)
    for f in (lambda m: m.add(m.tensor([1., 2]), m.tensor([1, 1]), alpha=0.5),
              lambda m: m.add(m.tensor([1, 2]), 1.5, alpha=0.5),
              lambda m: m.sub(m.tensor([1, 2]), m.tensor([1, 1]), alpha=2)):
        _same(f(tape), f(torch))
