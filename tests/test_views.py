"""Views and in-place ops, as PyTorch has them (tape/_views.py).

Expected values are PyTorch's (checked against torch 2.13 when written); the
last test compares with torch directly where it is installed.
"""
import numpy as np
import pytest

import tape

INPLACE_ERROR = 'modified by an inplace operation'


def _x(values, rg=True):
    return tape.tensor(values, requires_grad=rg)


def test_inplace_through_a_view_reaches_the_base_gradient():
    x = _x([1.0, 2.0, 3.0])
    h = x * 1
    h[1:].mul_(3)
    h.sum().backward()
    assert h.tolist() == [1.0, 6.0, 9.0]
    assert x.grad.tolist() == [1.0, 3.0, 3.0]


def test_a_view_made_before_an_inplace_op_on_its_base_sees_the_new_graph():
    x = _x([1.0, 2.0, 3.0])
    h = x * 1
    v = h[1:]
    h.mul_(2)
    assert v.tolist() == [4.0, 6.0]
    v.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 2.0]


def test_setitem_through_a_transposed_view():
    x = _x([[1.0, 2.0], [3.0, 4.0]])
    h = x.clone()
    h.t()[0, 1] = 100.0
    (h * x).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0], [100.0, 8.0]]


def test_fill_through_a_view_cuts_the_overwritten_gradient():
    x = _x([1.0, 2.0, 3.0])
    h = x * 3
    h[1:].fill_(2.0)
    (h * h).sum().backward()
    assert x.grad.tolist() == [18.0, 0.0, 0.0]


@pytest.mark.parametrize('case, expected', [
    ('view_row', [50.0, 100.0, 6.0, 8.0]),
    ('column_add', [8.0, 10.0, 20.0, 22.0]),
    ('view_of_view', [1.0, 2.0, 20.0]),
    ('unsqueeze', [2.0, 2.0, 2.0]),
    ('transposed_mul', [2.0, 36.0, 24.0, 128.0]),
    ('strided_row', [3.0, 1.0, 3.0, 1.0]),
    ('select', [1.0, 7.0, 1.0]),
])
def test_inplace_through_views_matches_pytorch(case, expected):
    if case == 'view_row':
        x = _x([1.0, 2.0, 3.0, 4.0])
        h = x * 1
        h.view(2, 2)[0].mul_(5)
        (h * h).sum().backward()
        g = x.grad
    elif case == 'column_add':
        x = _x([[1.0, 2.0], [3.0, 4.0]])
        h = x * 2
        h[:, 1].add_(h[:, 0])
        (h * x).sum().backward()
        g = x.grad
    elif case == 'view_of_view':
        x = _x([1.0, 2.0, 3.0])
        h = x * 1
        v = h[1:]
        v[1:].mul_(10)
        (h.sum() + v.sum()).backward()
        g = x.grad
    elif case == 'unsqueeze':
        x = _x([1.0, 2.0, 3.0])
        h = x * 1
        h.unsqueeze(0).mul_(2)
        h.squeeze().sum().backward()
        g = x.grad
    elif case == 'transposed_mul':
        x = _x([[1.0, 2.0], [3.0, 4.0]])
        h = x * 1
        h.t().mul_(tape.tensor([[1.0, 2.0], [3.0, 4.0]]))
        (h * h).sum().backward()
        g = x.grad
    elif case == 'strided_row':
        x = _x([1.0, 2.0, 3.0, 4.0])
        h = x * 1
        h.view(2, 2).t()[0].mul_(3)
        h.sum().backward()
        g = x.grad
    else:
        x = _x([1.0, 2.0, 3.0])
        h = x * 1
        h[1].mul_(7)
        h.sum().backward()
        g = x.grad
    np.testing.assert_allclose(g.numpy().reshape(-1), expected)


def test_a_plain_tensor_gets_a_gradient_through_a_written_view():
    x = _x([1.0, 2.0, 3.0])
    y = _x([1.0, 1.0, 1.0])
    w = tape.zeros(3)
    w[1:].add_(x[1:] * y[1:])
    assert w.requires_grad and not w.is_leaf
    (w * w).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0, 6.0]
    assert y.grad.tolist() == [0.0, 8.0, 18.0]


def test_views_share_the_version_counter():
    x = tape.tensor([1.0, 2.0])
    x.add_(1)
    x[0] = 3
    assert x._version == 2
    v = x[0:1]
    v.add_(1)
    assert (x._version, v._version) == (3, 3)
    assert x.tolist() == [4.0, 3.0]


@pytest.mark.parametrize('change', [
    lambda w: w[0:1].mul_(10),
    lambda w: w.view(2, 1).add_(1),
    lambda w: w[0].zero_(),
])
def test_changing_a_saved_tensor_through_a_view_raises(change):
    x = _x([1.0, 2.0])
    w = tape.tensor([3.0, 4.0])
    y = (x * w).sum()
    change(w)
    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        y.backward()


def test_changing_a_base_whose_saved_view_is_gone_raises():
    x = _x([1.0, 2.0, 3.0])
    h = x * 2
    u = h[1:] * h[1:]           # the views are temporaries: only their data is saved
    h[1] = 0.0
    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        u.sum().backward()


def test_a_base_change_that_misses_saved_values_is_fine():
    x = _x([1.0, 2.0, 3.0])
    h = x * 2
    u = h[1:].exp()             # exp saves its output, not the view
    h.mul_(3)
    u.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 2 * np.exp(4.0), 2 * np.exp(6.0)])


def test_x_mul_x_in_place_uses_the_old_values():
    x = _x([1.0, 2.0])
    h = x * 2
    h.mul_(h)
    h.sum().backward()
    assert x.grad.tolist() == [8.0, 16.0]


@pytest.mark.parametrize('change', [
    lambda x: x[0:1].mul_(2), lambda x: x.view(2).add_(1), lambda x: x.unsqueeze(0).zero_(),
    lambda x: x[0].fill_(3.0), lambda x: x.t().__setitem__(0, 1.0),
])
def test_inplace_on_a_view_of_a_leaf_that_requires_grad_raises(change):
    x = _x([1.0, 2.0])
    with pytest.raises(RuntimeError, match='a view of a leaf Variable that requires grad'):
        change(x)
    assert x.tolist() == [1.0, 2.0]
    with tape.no_grad():
        x[0:1].mul_(2)          # allowed outside the graph, as an optimizer step
    assert x.tolist() == [2.0, 2.0]


@pytest.mark.parametrize('split', [lambda h: h.split(2)[1], lambda h: h.unbind()[2],
                                   lambda h: h.chunk(2)[0]])
def test_outputs_of_multi_view_ops_refuse_inplace_changes(split):
    x = _x([1.0, 2.0, 3.0])
    h = x * 1
    with pytest.raises(RuntimeError, match='returns multiple views'):
        split(h).zero_()
    plain = tape.tensor([1.0, 2.0, 3.0])
    split(plain).zero_()                     # no graph: allowed, as in PyTorch


def test_detach_in_place_on_a_view_raises():
    x = _x([1.0, 2.0])
    y = (x * 2)[0:1]
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        y.detach_()


def test_integer_indexing_gives_a_view():
    x = tape.tensor([1.0, 2.0, 3.0])
    x[1].add_(10)
    assert x.tolist() == [1.0, 12.0, 3.0]
    m = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    m[1, 0].mul_(2)
    assert m.tolist() == [[1.0, 2.0], [6.0, 4.0]]


def test_against_pytorch():
    torch = pytest.importorskip('torch')

    def program(lib):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lib.float64,
                       requires_grad=True)
        h = x * 2 + 1                    # (exp would save h: PyTorch raises too)
        h[:, 1:].mul_(x[:, :2])
        v = h.t()[1:]
        v.add_(1.0)
        h.view(-1)[::2].sub_(h.view(-1)[1::2].detach())
        (h * h).sum().backward()
        return x.grad.detach().numpy()
    np.testing.assert_allclose(program(tape), program(torch), rtol=1e-12)


def test_a_loop_writing_a_graph_tensor_through_views_stays_correct_and_bounded():
    # h[i] += h[i-1] * 0.5: each write reads a view of the tensor it writes
    torch = pytest.importorskip('torch')
    res = []
    for m in (tape, torch):
        x = m.tensor(np.arange(40.0).reshape(10, 4) / 10, dtype=m.float64, requires_grad=True)
        h = x * 1
        for i in range(1, 10):
            h[i] += h[i - 1] * 0.5
        (h * h).sum().backward()
        res.append(x.grad.detach().numpy().copy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


def test_stacking_many_rows_keeps_gradients_and_values():
    rows = [tape.tensor([float(i), -float(i)], requires_grad=True) for i in range(37)]
    s = tape.stack(rows)
    assert s.shape == (37, 2) and s[5].tolist() == [5.0, -5.0]
    (s * s).sum().backward()
    assert rows[7].grad.tolist() == [14.0, -14.0]


def test_diagonal_is_a_view():
    # A.diagonal().add_(eps): a common regularisation, which must change A
    a = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    a.diagonal().add_(10)
    assert a.tolist() == [[11.0, 2.0], [3.0, 14.0]]
    b = tape.zeros(2, 3, 3)
    b.diagonal(1, 1, 2).fill_(1)
    assert b[0].tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert b.diagonal(5).shape == (3, 0)
    w = _x([[1.0, 2.0], [3.0, 4.0]])
    assert w.diagonal().grad_fn.name() == 'DiagonalBackward0'
    with pytest.raises(RuntimeError, match='leaf Variable that requires grad'):
        w.diagonal().add_(1)


def test_diagonal_view_in_place_matches_pytorch():
    torch = pytest.importorskip('torch')

    def program(lib):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
                       dtype=lib.float64, requires_grad=True)
        h = x * x
        h.diagonal().mul_(3)                     # through the view: CopySlices
        h.diagonal(-1).add_(x[0, :2])
        d = h.diagonal(1)                        # a view made before a change of h
        h.mul_(2)
        (h.sum() + (d * d).sum()).backward()
        return h.detach().numpy(), x.grad.numpy()
    for got, want in zip(program(tape), program(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
