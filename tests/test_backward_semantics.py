"""backward / autograd.backward / autograd.grad semantics, and their errors.

Every expectation here is PyTorch's; where it is cheap, the same program also
runs on torch (``torch_or_skip``) to pin the expectation to the oracle.
"""
import warnings

import numpy as np
import pytest

import tape

IMPLICIT = 'grad can be implicitly created only for scalar outputs'
SECOND = 'backward through the graph a second time'


def t64(values, requires_grad=False):
    return tape.tensor(values, dtype=tape.float64, requires_grad=requires_grad)


def grad_of(x):
    return None if x.grad is None else x.grad.numpy().copy()


# ------------------------------------------------------------ backward()
def test_scalar_backward_fills_leaf_grads():
    x = t64([1.0, 2.0, 3.0], True)
    w = t64([0.5, -1.0, 2.0], True)
    (x * w + x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.5, 3.0, 8.0])
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0, 3.0])


def test_one_element_non_0d_output_needs_no_gradient():
    w = t64([3.0], True)
    z = w * 2 + 1                  # shape (1,), as in the seed's z = w*x + b
    z.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0])


def test_backward_with_gradient_on_non_scalar():
    x = t64([[1.0, 2.0], [3.0, 4.0]], True)
    y = x * x
    y.backward(t64([[1.0, 0.5], [0.0, -1.0]]))
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 2.0], [0.0, -8.0]])


def test_backward_gradient_keyword_and_array_like():
    x = t64([1.0, 2.0], True)
    (x * 3).backward(gradient=t64([1.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 6.0])


def test_backward_on_a_leaf_accumulates_the_gradient_itself():
    x = t64([1.0, 2.0], True)
    x.backward(t64([3.0, 4.0]))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])


@pytest.mark.parametrize('shape', [(2,), (2, 3), (1, 2)])
def test_non_scalar_backward_without_gradient_raises(shape):
    x = tape.ones(*shape, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=IMPLICIT):
        y.backward()
    with pytest.raises(RuntimeError, match=IMPLICIT):
        tape.autograd.backward(y)
    with pytest.raises(RuntimeError, match=IMPLICIT):
        tape.autograd.grad(y, x)
    assert x.grad is None
    # the failed call did not consume the graph
    y.backward(tape.ones(*shape))
    np.testing.assert_allclose(x.grad.numpy(), np.full(shape, 2.0))


def test_gradient_of_wrong_shape_raises():
    x = t64([1.0, 2.0], True)
    y = x * x
    with pytest.raises(RuntimeError, match='Mismatch in shape'):
        y.backward(t64([1.0, 1.0, 1.0]))


def test_backward_of_tensor_without_grad_raises():
    x = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match='does not require grad'):
        (x * 2).sum().backward()


# ------------------------------------------------- retain_graph / release
def test_second_backward_through_released_graph_raises():
    x = t64([1.0, 2.0], True)
    y = (x * x).exp().sum()
    y.backward()
    g = grad_of(x)
    with pytest.raises(RuntimeError, match=SECOND):
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), g)   # nothing was added


def test_second_backward_matches_torch_error(torch_or_skip):
    torch = torch_or_skip
    for m in (tape, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match=SECOND):
            y.backward()


def test_grad_releases_the_graph_too():
    x = t64([1.0, 2.0], True)
    y = (x * x).sum()
    tape.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match=SECOND):
        y.backward()
    with pytest.raises(RuntimeError, match=SECOND):
        tape.autograd.grad(y, x)


def test_new_op_on_a_released_graph_still_raises():
    x = t64([1.0, 2.0], True)
    h = x * x
    h.sum().backward()
    z = (h * 2).sum()              # z's graph runs through the freed mul
    with pytest.raises(RuntimeError, match=SECOND):
        z.backward()


def test_sibling_output_of_a_released_graph_raises():
    x = t64([1.0, 2.0], True)
    e = x.exp()
    a = (e * 3).sum()
    b = (e * 4).sum()
    a.backward()
    with pytest.raises(RuntimeError, match=SECOND):
        b.backward()


def test_retain_graph_allows_repeated_backward_and_accumulates():
    x = t64([1.0, 2.0], True)
    y = (x * x * x).sum()
    for k in range(1, 4):
        y.backward(retain_graph=True)
        np.testing.assert_allclose(x.grad.numpy(), k * 3 * np.array([1.0, 4.0]))
    y.backward()                                   # the last one releases
    np.testing.assert_allclose(x.grad.numpy(), 4 * 3 * np.array([1.0, 4.0]))
    with pytest.raises(RuntimeError, match=SECOND):
        y.backward()


def test_retain_graph_with_grad_then_backward():
    x = t64([1.0, 2.0], True)
    y = (x * x).sum()
    (g,) = tape.autograd.grad(y, x, retain_graph=True)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert x.grad is None                          # grad() leaves .grad alone
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_retain_graph_then_different_seed():
    x = t64([1.0, 2.0], True)
    y = x * x
    y.backward(t64([1.0, 0.0]), retain_graph=True)
    y.backward(t64([0.0, 1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_second_backward_without_saved_tensors_matches_torch():
    x = t64([1.0, 2.0], True)
    y = (x + 1).sum()
    y.backward()
    y.backward()                                   # torch: fine, x.grad == [2, 2]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


# ------------------------------------------------------- accumulation
def test_leaf_grads_accumulate_until_zeroed():
    w = t64([1.0, -2.0], True)
    for k in range(1, 4):
        (w * w).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), k * 2 * w.detach().numpy())
    g = w.grad
    w.grad.zero_()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    (w * 3).sum().backward()
    assert w.grad is g                             # accumulated in place, as in torch
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


def test_grad_data_zero_and_grad_none_reset():
    w = t64([1.0, 2.0], True)
    (w * 5).sum().backward()
    w.grad.data.zero_()
    (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])
    w.grad = None
    (w * 7).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [7.0, 7.0])


def test_float32_leaf_gets_float32_grad_and_accumulates():
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    (w * w).sum().backward()
    assert w.grad.dtype == tape.float32
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 8.0])


def test_leaf_used_in_two_graphs_that_merge():
    x = t64([1.0, 2.0], True)
    a = x * 2                      # one graph
    b = x.exp()                    # another graph
    c = (a * b).sum()              # they meet
    c.backward()
    ex = np.exp([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * ex + 2 * np.array([1.0, 2.0]) * ex)
    (g,) = tape.autograd.grad((x * 2 + x.exp()).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 + ex)


def test_two_leaves_two_graphs_merge_matches_torch(torch_or_skip):
    torch = torch_or_skip
    out = []
    for m in (tape, torch):
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = m.tensor([3.0, -4.0], dtype=m.float64, requires_grad=True)
        p = x * y                  # graph 1
        q = y.tanh() * 3           # graph 2
        r = (x + 1).log()          # graph 3
        z = (p * q - r / q).sum() + (p * r).mean()
        z.backward()
        out.append((x.grad.detach().numpy().copy(), y.grad.detach().numpy().copy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_long_chain_has_no_recursion_limit():
    x = t64(1.0, True)
    h = x
    for _ in range(20000):
        h = h * 1.0001 + 0.001
    h.backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 20000, rel=1e-9)


# ------------------------------------------------- non-leaf .grad, is_leaf
def test_non_leaf_grad_stays_none():
    x = t64([1.0, 2.0], True)
    y = x * 3
    z = y.sum()
    z.backward()
    assert not y.is_leaf
    with pytest.warns(UserWarning, match='not a leaf'):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert z.grad is None
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_leaf_without_requires_grad_gets_no_grad():
    x = t64([1.0, 2.0])
    w = t64([3.0, 4.0], True)
    (x * w).sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])


# ------------------------------------------------------ no_grad & friends
def test_no_grad_records_nothing():
    x = t64([1.0, 2.0], True)
    h = x * x                       # a live graph
    n_before = h._tape.n
    with tape.no_grad():
        assert not tape.is_grad_enabled()
        y = h * 2 + x
        s = y.sum()
        e = x.exp()[0]
    assert tape.is_grad_enabled()
    for t in (y, s, e):
        assert not t.requires_grad
        assert t.grad_fn is None
        assert t.is_leaf
        assert t._tape is None
    assert h._tape.n == n_before    # nothing appended to the existing tape
    with pytest.raises(RuntimeError, match='does not require grad'):
        s.backward()


def test_no_grad_as_decorator_and_nesting():
    x = t64([1.0], True)

    @tape.no_grad()
    def f(a):
        return a * 2

    assert not f(x).requires_grad
    assert tape.is_grad_enabled()
    with tape.no_grad():
        with tape.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and y.grad_fn is not None
    assert not z.requires_grad
    with tape.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_no_grad_restores_mode_after_exception():
    with pytest.raises(ValueError):
        with tape.no_grad():
            raise ValueError
    assert tape.is_grad_enabled()


# --------------------------------------------------- requires_grad flow
def test_requires_grad_propagation():
    a = tape.ones(2)
    b = tape.ones(2, requires_grad=True)
    assert not (a * a + 1).requires_grad
    assert (a * b).requires_grad
    assert (b.sum() * 0).requires_grad
    assert (2 * b).requires_grad
    assert b.view(2, 1).t().requires_grad
    assert a.view(1, 2).mm(b.view(2, 1)).requires_grad
    assert b[0].requires_grad
    c = b.detach()
    assert not c.requires_grad and c.is_leaf
    assert not (c * a).requires_grad


def test_requires_grad_setters():
    a = t64([1.0, 2.0])
    assert a.requires_grad_() is a
    assert a.requires_grad and a.is_leaf
    a.requires_grad = False
    assert not a.requires_grad
    y = (t64([1.0], True) * 2)
    with pytest.raises(RuntimeError, match='leaf variables'):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match='floating point'):
        tape.tensor([1, 2]).requires_grad_()


def test_requires_grad_on_detached_result_starts_new_graph():
    x = t64([1.0, 2.0], True)
    y = (x * 3).detach().requires_grad_()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [6.0, 12.0])
    assert x.grad is None


def test_detach_stops_gradient():
    x = t64([1.0, 2.0], True)
    y = (x * x).detach() * x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 4.0])


# -------------------------------------------------- autograd.backward
def test_autograd_backward_many_roots_and_grad_tensors():
    x = t64([1.0, 2.0], True)
    y = t64([3.0, 4.0], True)
    a = (x * y).sum()
    b = y.exp()
    tape.autograd.backward([a, b], [None, t64([1.0, 2.0])])
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])
    expected = np.array([1.0, 2.0]) + np.array([1.0, 2.0]) * np.exp([3.0, 4.0])
    np.testing.assert_allclose(y.grad.numpy(), expected)


def test_autograd_backward_single_tensor_and_retain_graph():
    w = t64([3.0], True)
    y = w * w
    tape.autograd.backward(y, retain_graph=True)
    tape.autograd.backward(y, grad_tensors=t64([2.0]))
    np.testing.assert_allclose(w.grad.numpy(), [6.0 + 12.0])
    with pytest.raises(RuntimeError, match=SECOND):
        tape.autograd.backward(y)


def test_autograd_backward_grad_variables_legacy_name():
    w = t64([1.0, 2.0], True)
    tape.autograd.backward([w * 2], grad_variables=[t64([1.0, 1.0])])
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])


def test_autograd_backward_roots_on_separate_graphs():
    x = t64([1.0, 2.0], True)
    y = t64([5.0], True)
    tape.autograd.backward([(x * x).sum(), (y * 3).sum()])
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(y.grad.numpy(), [3.0])


# -------------------------------------------------------- autograd.grad
def test_grad_returns_tuple_and_leaves_dot_grad_alone():
    x = t64([1.0, 2.0], True)
    w = t64([3.0, 4.0], True)
    y = (x * w).sum()
    gx, gw = tape.autograd.grad(y, [x, w])
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(gw.numpy(), [1.0, 2.0])
    assert x.grad is None and w.grad is None
    assert gx.is_leaf and not gx.requires_grad
    out = tape.autograd.grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1


def test_grad_with_grad_outputs():
    x = t64([1.0, 2.0], True)
    y = x * x
    (g,) = tape.autograd.grad(y, x, grad_outputs=t64([1.0, -1.0]))
    np.testing.assert_allclose(g.numpy(), [2.0, -4.0])
    (g,) = tape.autograd.grad([x * 3], [x], grad_outputs=[t64([1.0, 2.0])])
    np.testing.assert_allclose(g.numpy(), [3.0, 6.0])


def test_grad_of_intermediate():
    x = tape.ones(3, requires_grad=True)
    w = tape.tensor([0.5, 1.5, 2.5], requires_grad=True)
    y = x * w
    z = (y * y).sum()
    gy, gx = tape.autograd.grad(z, [y, x])
    np.testing.assert_allclose(gy.numpy(), 2 * np.array([0.5, 1.5, 2.5]))
    np.testing.assert_allclose(gx.numpy(), 2 * np.array([0.5, 1.5, 2.5]) ** 2)


def test_grad_multiple_outputs_sum():
    x = t64([1.0, 2.0], True)
    (g,) = tape.autograd.grad([(x * x).sum(), (x * 3).sum()], x)
    np.testing.assert_allclose(g.numpy(), [5.0, 7.0])
    (g,) = tape.autograd.grad([(x * x).sum(), x * 3], x, [None, t64([1.0, 0.0])])
    np.testing.assert_allclose(g.numpy(), [5.0, 4.0])


def test_grad_allow_unused():
    x = t64([1.0, 2.0], True)
    u = t64([1.0], True)
    y = (x * x).sum()
    with pytest.raises(RuntimeError, match='appears to not have been used in the graph'):
        tape.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = tape.autograd.grad(y, [x, u], allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), [2.0, 4.0])
    assert gu is None


def test_grad_input_that_does_not_require_grad_raises():
    x = t64([1.0, 2.0], True)
    c = t64([1.0, 2.0])
    with pytest.raises(RuntimeError, match='does not require grad'):
        tape.autograd.grad((x * c).sum(), [c])


def test_grad_input_used_twice_in_inputs():
    x = t64([1.0, 2.0], True)
    gs = tape.autograd.grad((x * x).sum(), [x, x])
    for g in gs:
        np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


def test_grad_dtype_follows_input():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (g,) = tape.autograd.grad((x * x).sum(), x)
    assert g.dtype == tape.float32 and g.shape == (2,)


# ----------------------------------------------- in-place and versions
def test_inplace_on_leaf_that_requires_grad_raises_outside_no_grad():
    x = t64([1.0, 2.0], True)
    with pytest.raises(RuntimeError, match='leaf Variable that requires grad'):
        x.add_(1)
    with pytest.raises(RuntimeError, match='leaf Variable that requires grad'):
        x -= 1


def test_modifying_a_saved_leaf_under_no_grad_is_detected():
    w = t64([1.0, 2.0], True)
    y = (w * w).sum()
    with tape.no_grad():
        w.sub_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


def test_modifying_through_data_is_not_tracked():
    w = t64([1.0, 2.0], True)
    y = (w * w).sum()
    w.data.sub_(1.0)               # .data bypasses the version counter, as in torch
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), [0.0, 2.0])


def test_modifying_through_detach_is_detected():
    w = t64([1.0, 2.0], True)
    y = (w * w).sum()
    w.detach().mul_(2.0)           # detach shares the version counter
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


def test_modifying_saved_result_through_detach_is_detected():
    w = t64([1.0, 2.0], True)
    e = w.exp()
    y = e.sum()
    e.detach().zero_()             # torch: version of e bumps -> backward raises
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


# ------------------------------------------- independent graphs, one process
def _interleaved_graphs(m):
    """Several graphs built from the same leaves, swept in a mixed order."""
    x = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
    w = m.tensor([1.5, 0.25, -0.5], dtype=m.float64, requires_grad=True)
    log = []
    a = (x * w).sum()                       # graph 1
    b = (x.exp() * 2).sum()                 # graph 2, shares only leaves with 1
    c = (w.tanh() * x).mean()               # graph 3
    b.backward()                            # sweep 2 (released)
    log.append((x.grad.numpy().copy(), None))
    a.backward(retain_graph=True)           # sweep 1, kept
    log.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    d = (a * 3 + c).sum()                   # new ops on graphs 1 and 3
    d.backward()
    log.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    (g,) = m.autograd.grad((x * x).sum(), x)   # a fresh graph afterwards
    log.append((g.numpy().copy(), None))
    return log


def test_independent_graphs_sharing_leaves_match_torch(torch_or_skip):
    ours = _interleaved_graphs(tape)
    theirs = _interleaved_graphs(torch_or_skip)
    assert len(ours) == len(theirs) == 4
    for (g1, h1), (g2, h2) in zip(ours, theirs):
        np.testing.assert_allclose(g1, g2, rtol=1e-12)
        assert (h1 is None) == (h2 is None)
        if h1 is not None:
            np.testing.assert_allclose(h1, h2, rtol=1e-12)


def test_independent_graphs_without_torch():
    x = t64([1.0, 2.0], True)
    a = (x * x).sum()
    b = (x * 3).sum()
    a.backward()
    b.backward()                            # b never touched a's records
    np.testing.assert_allclose(x.grad.numpy(), [2.0 + 3.0, 4.0 + 3.0])
    with pytest.raises(RuntimeError, match=SECOND):
        a.backward()


def test_mixed_dtype_graph_gives_leaf_dtype_grads():
    w = tape.tensor([1.0, 2.0], requires_grad=True)             # float32
    c = tape.tensor([0.5, 0.25], dtype=tape.float64)
    y = (w * c).sum()
    assert y.dtype == tape.float64
    y.backward()
    assert w.grad.dtype == tape.float32
    np.testing.assert_allclose(w.grad.numpy(), [0.5, 0.25])


# In-place updates of leaves under no_grad must only break graphs that SAVED
# the old values (PyTorch checks the version of each saved tensor).


@pytest.mark.parametrize('fn', [lambda w: w + 1, lambda w: w * 3, lambda w: w.exp(),
                                lambda w: w.tanh(), lambda w: w.sigmoid()],
                         ids=['add', 'mul_scalar', 'exp', 'tanh', 'sigmoid'])
def test_inplace_on_unsaved_leaf_does_not_break_backward(fn, torch_or_skip):
    torch = torch_or_skip
    got = []
    for m in (tape, torch):
        w = m.tensor([0.5, 2.0], dtype=m.float64, requires_grad=True)
        y = fn(w).sum()                  # saves nothing of w (or only the output)
        with m.no_grad():
            w.mul_(3.0)
        y.backward()                     # torch: fine
        got.append(w.grad.numpy().copy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12)


def test_update_between_backward_of_two_losses():
    w = t64([1.0, 2.0], True)
    loss1 = (w * w).sum()
    loss2 = (w * 3).sum()                # saves nothing of w
    loss1.backward()
    with tape.no_grad():
        w -= 0.1 * w.grad
    loss2.backward()                     # torch: fine, w.grad == [5, 7]
    np.testing.assert_allclose(w.grad.numpy(), [5.0, 7.0])


def test_graph_built_after_update_is_not_stale():
    w = t64([1.0, 2.0], True)
    kept = (w * w).sum()                 # an older graph, still alive, never swept
    with tape.no_grad():
        w -= 0.5
    fresh = (w * w).sum()                # saved the NEW values
    fresh.backward()                     # torch: fine, w.grad == [1, 3]
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 3.0])
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        kept.backward()                  # the old graph did save the old values


def test_stale_graph_does_not_poison_unrelated_graphs():
    w = t64([1.0, 2.0], True)
    y = (w * w).sum()
    with tape.no_grad():
        w.sub_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()                     # correct: y saved the old w
    v = t64([3.0], True)
    z = (v * v).sum()                    # unrelated to w and y
    z.backward()
    assert v.grad.tolist() == [6.0]


def test_backward_inputs_accumulates_only_into_them(torch_or_skip):
    torch = torch_or_skip
    got = []
    for m in (tape, torch):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        b = m.tensor([3.0, 4.0], requires_grad=True)
        h = a * b
        y = (h * h).sum()
        y.backward(inputs=[a, h], retain_graph=True)
        y.backward(inputs=[a])
        got.append((a.grad.numpy().copy(), b.grad, h.grad.detach().numpy().copy()))
    (ta, tb, th), (ra, rb, rh) = got
    assert tb is None and rb is None
    np.testing.assert_allclose(ta, ra)
    np.testing.assert_allclose(th, rh)


def test_create_graph_gradient_of_float32_input_is_float32():
    # the differentiable sweep computes in float64 (README), but returns x's dtype
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g, = tape.autograd.grad((x * x * x).sum(), x, create_graph=True)
    assert g.dtype == tape.float32 and g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0, 27.0])
    g2, = tape.autograd.grad(g.sum(), x)
    assert g2.dtype == tape.float32
    np.testing.assert_allclose(g2.numpy(), [6.0, 12.0, 18.0])
