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


CASES = {f.__name__[1:]: f for f in (
    _zero, _fill, _fill_tensor, _fill_tensor_into_constant, _copy, _copy_into_constant,
    _copy_broadcast, _copy_float32, _add_alpha, _sub_alpha, _add_alpha_one, _set_slice_number,
    _set_slice_tensor, _set_int, _set_mask, _set_index_list, _set_index_tensor_into_constant)}


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


@pytest.mark.parametrize('case', ['zero', 'fill_tensor', 'copy', 'add_alpha', 'set_slice_tensor',
                                  'set_mask', 'set_index_list'])
def test_calling_the_node_gives_its_inputs_gradients(case):
    y, _gx, _gw, seed = _run(tape, case)
    nd = y.grad_fn
    got = nd(seed)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(nd.next_functions)
    for (fn, _), g in zip(nd.next_functions, got):
        if fn is None:
            assert g is None
            continue
        # the input's own gradient: its node's output, found through its leaf
        assert g is not None and g.shape in ((3,), (2,), ())


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
