"""In-place ops show PyTorch's nodes: ZeroBackward0, FillBackward2/3,
CopyBackwards, CopySlices or IndexPutBackward0 for ``x[key] = v``, and
AddBackward0/SubBackward0 of ``add_(t, alpha=k)`` over (old x, t); with the
gradients PyTorch gives, and C++ nodes named with their namespace."""
import numpy as np
import pytest

import tape


def _desc(fn, depth=2):
    if fn is None:
        return 'None'
    if depth == 0 or not fn.next_functions:
        return fn.name()
    return fn.name() + '(' + ','.join(_desc(n, depth - 1) for n, _ in fn.next_functions) + ')'


def _zero(T, x, w):
    y = x * 2
    return y.zero_()


def _fill(T, x, w):
    return (x * 2).fill_(3.0)


def _fill_tensor(T, x, w):
    return (x * 2).fill_(w[0])


def _fill_tensor_into_constant(T, x, w):
    return T.zeros(3, dtype=T.float64).fill_(w.sum())


def _copy(T, x, w):
    return (x * 2).copy_(w.exp())


def _copy_into_constant(T, x, w):
    return T.zeros(3, dtype=T.float64).copy_(x)


def _copy_broadcast(T, x, w):
    return T.zeros(2, 3, dtype=T.float64).copy_(x)


def _copy_float32(T, x, w):
    return T.zeros(3, dtype=T.float32).copy_(x * 3)


def _add_alpha(T, x, w):
    return (x * 2).add_(w, alpha=2)


def _sub_alpha(T, x, w):
    return (x * 2).sub_(w.exp(), alpha=0.5)


def _add_alpha_one(T, x, w):
    return (x * 2).add_(w, alpha=1)


def _set_slice_number(T, x, w):
    y = x * 2
    y[1:] = 0
    return y


def _set_slice_tensor(T, x, w):
    y = x * 2
    y[1:] = w[:2]
    return y


def _set_int(T, x, w):
    y = x * 2
    y[0] = w[2]
    return y


def _set_mask(T, x, w):
    y = x * 2
    y[y > 3] = 0
    return y


def _set_index_list(T, x, w):
    y = x * 2
    y[[0, 2]] = w[:2]
    return y


def _set_index_tensor_into_constant(T, x, w):
    y = T.zeros(3, dtype=T.float64)
    y[T.tensor([2, 0])] = w[1:] * 3
    return y


def _set_index_0d_tensor(T, x, w):
    y = x * 2
    y[T.tensor(1)] = w[0]
    return y


CASES = {f.__name__[1:]: f for f in (
    _zero, _fill, _fill_tensor, _fill_tensor_into_constant, _copy, _copy_into_constant,
    _copy_broadcast, _copy_float32, _add_alpha, _sub_alpha, _add_alpha_one, _set_slice_number,
    _set_slice_tensor, _set_int, _set_mask, _set_index_list, _set_index_tensor_into_constant,
    _set_index_0d_tensor)}


def _run(T, case):
    x = T.tensor([1.0, 2.0, 0.5], dtype=T.float64, requires_grad=True)
    w = T.tensor([0.3, -0.7, 1.1], dtype=T.float64, requires_grad=True)
    y = CASES[case](T, x, w)
    seed = T.tensor(np.arange(1.0, 1.0 + y.numel()).reshape(tuple(y.shape)), dtype=y.dtype)
    gx, gw = T.autograd.grad(y, (x, w), seed, retain_graph=True, allow_unused=True)
    return y, gx, gw, seed


@pytest.mark.parametrize('case', sorted(CASES))
def test_node_and_gradients_as_pytorchs(case):
    torch = pytest.importorskip('torch')
    want = _run(torch, case)
    got = _run(tape, case)
    assert _desc(got[0].grad_fn) == _desc(want[0].grad_fn)
    assert repr(got[0]).split('grad_fn=')[1] == repr(want[0]).split('grad_fn=')[1]
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy())
    for g, h in zip(got[1:3], want[1:3]):
        assert (g is None) == (h is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-12)


def _down(fn, g, acc):
    """Call ``fn`` on ``g`` and its next nodes on what it returns, down to the
    leaves: ``acc[id(leaf)]`` sums what reaches each one."""
    if fn is None or g is None:
        return
    if type(fn).__name__ == 'AccumulateGrad':
        acc[id(fn.variable)] = acc.get(id(fn.variable), 0) + g.detach().numpy()
        return
    outs = fn(g)
    outs = outs if isinstance(outs, tuple) else (outs,)
    assert len(outs) == len(fn.next_functions)
    for (nxt, _), gi in zip(fn.next_functions, outs):
        _down(nxt, gi, acc)


@pytest.mark.parametrize('case', ['zero', 'fill_tensor', 'copy', 'add_alpha', 'set_slice_tensor',
                                  'set_mask', 'set_index_list', 'copy_broadcast'])
def test_calling_the_nodes_down_to_the_leaves_gives_the_gradients(case):
    """The in-place op's node, called, returns its inputs' gradients: passed down
    through the nodes below it they add up to autograd.grad's."""
    x = tape.tensor([1.0, 2.0, 0.5], dtype=tape.float64, requires_grad=True)
    w = tape.tensor([0.3, -0.7, 1.1], dtype=tape.float64, requires_grad=True)
    y = CASES[case](tape, x, w)
    seed = tape.tensor(np.arange(1.0, 1.0 + y.numel()).reshape(tuple(y.shape)),
                       dtype=tape.float64)
    acc = {}
    _down(y.grad_fn, seed, acc)
    want = tape.autograd.grad(y, (x, w), seed, allow_unused=True)
    for leaf, g in zip((x, w), want):
        if g is None:
            assert id(leaf) not in acc
        else:
            np.testing.assert_allclose(acc[id(leaf)], g.numpy(), rtol=1e-12)


def test_cpp_nodes_keep_plain_type_names():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    acc = (x * 2).grad_fn.next_functions[0][0]
    assert acc.name() == 'torch::autograd::AccumulateGrad'
    assert type(acc).__name__ == 'AccumulateGrad' and repr(acc).startswith('<AccumulateGrad ')
    y = x * 2
    y[0] = 1.0
    assert y.grad_fn.name() == 'torch::autograd::CopySlices'
    assert type(y.grad_fn).__name__ == 'CopySlices'
    assert repr(y.grad_fn).startswith('<CopySlices object at ')
    assert repr(y).endswith('grad_fn=<CopySlices>)')


def test_fill_with_a_tensor_needs_a_0d_value():
    y = tape.zeros(3)
    with pytest.raises(RuntimeError, match='0-dimension'):
        y.fill_(tape.ones(2, requires_grad=True))


# ------------------------------------------------ a basic key of several steps
KEYS = {
    'slice_slice': (slice(1, None), slice(None, 2)),
    'int_slice': (1, slice(None, 2)),
    'none_none': (None, None),
    'ellipsis_int_none': (Ellipsis, 1, None),
    'whole_none_int': (slice(None), None, 1),
    'int_int': (1, 2),
    'none_int_step': (None, 1, slice(0, 3, 2)),
    'step_ellipsis_slice': (slice(None, None, 2), Ellipsis, slice(1, None)),
    'one_step': (slice(None), 1),
}


def _index(T, key):
    x = T.tensor(np.arange(24.0).reshape(2, 3, 4) / 7, dtype=T.float64, requires_grad=True)
    y = x[key]
    g = T.tensor(np.arange(1.0, 1.0 + y.numel()).reshape(tuple(y.shape)), dtype=T.float64)
    gx, = T.autograd.grad(y, x, g)
    return y, gx


@pytest.mark.parametrize('name', sorted(KEYS))
def test_a_key_of_several_steps_is_a_chain_of_views(name):
    """PyTorch indexes step by step: x[1:, :2] is SliceBackward0 of SliceBackward0."""
    torch = pytest.importorskip('torch')
    want, want_g = _index(torch, KEYS[name])
    got, got_g = _index(tape, KEYS[name])
    assert _desc(got.grad_fn, 3) == _desc(want.grad_fn, 3)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(got_g.numpy(), want_g.numpy())


def test_in_place_through_a_chained_view_writes_the_base():
    x = tape.tensor(np.arange(24.0).reshape(2, 3, 4), dtype=tape.float64, requires_grad=True)
    b = x * 1
    v = b[1:, :2]
    assert v.grad_fn.name() == 'SliceBackward0'
    assert v.grad_fn.next_functions[0][0].name() == 'SliceBackward0'
    v.mul_(3)
    assert v._base is b
    want = np.arange(24.0).reshape(2, 3, 4)
    want[1:, :2] *= 3
    np.testing.assert_array_equal(b.detach().numpy(), want)
    b.sum().backward()
    gw = np.ones((2, 3, 4))
    gw[1:, :2] = 3
    np.testing.assert_array_equal(x.grad.numpy(), gw)


def test_out_of_range_keys_still_raise_index_error():
    x = tape.ones(2, 3, requires_grad=True)
    with pytest.raises(IndexError):
        x[1, 5]
    with pytest.raises(IndexError):
        x[None, 0, 0, 0]


def test_steps_of_a_key_with_an_index_tensor_or_numpy_integers():
    x = tape.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    for key in [(tape.tensor(1), slice(1, None)), (np.int64(1), slice(np.int64(1), None))]:
        y = x[key]
        assert _desc(y.grad_fn, 2) == \
            'SliceBackward0(SelectBackward0(torch::autograd::AccumulateGrad))'
        assert y.tolist() == [5.0, 6.0, 7.0]


def test_mul_with_alpha_on_a_recorded_tensor_does_not_crash():
    # (PyTorch's mul_ takes no alpha; tape's scales the other operand)
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).mul_(x, alpha=2)
    assert y.grad_fn.name() == 'MulBackward0' and y.tolist() == [4.0, 16.0]
