"""The seed tutorials' blocks on graph nodes, hooks, custom Function, higher order
derivatives and gradcheck, run with only the import changed (``import tape as t``,
``from tape.autograd import Variable as V, Function``)."""
import re
import warnings

import numpy as np
import pytest

import tape as t
from tape.autograd import Function
from tape.autograd import Variable as V


def _node(s):
    """A node's repr without its address: '<MulBackward0 object at 0x...>' -> 'MulBackward0'."""
    return re.sub(r'<(\w+) object at 0x[0-9a-f]+>', r'\1', repr(s))


def test_grad_fn_and_next_functions_as_printed():
    x = V(t.ones(1))
    b = V(t.rand(1), requires_grad=True)
    w = V(t.rand(1), requires_grad=True)
    y = w * x
    z = y + b
    assert (x.requires_grad, b.requires_grad, w.requires_grad) == (False, True, True)
    assert y.requires_grad
    assert (x.is_leaf, w.is_leaf, b.is_leaf, y.is_leaf, z.is_leaf) == (True, True, True, False,
                                                                      False)
    assert _node(z.grad_fn) == 'AddBackward0'
    assert _node(z.grad_fn.next_functions) == '((MulBackward0, 0), (AccumulateGrad, 0))'
    assert z.grad_fn.next_functions[0][0] == y.grad_fn
    assert _node(y.grad_fn.next_functions) == '((AccumulateGrad, 0), (None, 0))'
    assert y.grad_fn.next_functions[0][0].variable is w
    assert (w.grad_fn, x.grad_fn) == (None, None)
    z.backward(retain_graph=True)
    np.testing.assert_allclose(w.grad.numpy(), [1.0])
    z.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0])


def test_volatile_warns_and_is_ignored():
    with pytest.warns(UserWarning, match='volatile was removed'):
        x = V(t.ones(1), volatile=True)
    w = V(t.rand(1), requires_grad=True)
    y = x * w
    assert (x.requires_grad, w.requires_grad, y.requires_grad) == (False, True, True)


def test_hook_prints_intermediate_gradient_and_is_removed():
    seen = []
    x = V(t.ones(3), requires_grad=True)
    w = V(t.rand(3), requires_grad=True)
    y = x * w
    handle = y.register_hook(lambda grad: seen.append(grad.numpy().copy()))
    z = y.sum()
    z.backward()
    handle.remove()
    np.testing.assert_allclose(seen[0], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), w.detach().numpy())
    with pytest.warns(UserWarning, match='not a leaf'):
        assert y.grad is None
    # removed: a second graph through the same kind of op does not call it
    (x * w).sum().backward()
    assert len(seen) == 1


class MultiplyAdd(Function):
    @staticmethod
    def forward(ctx, w, x, b):
        ctx.save_for_backward(w, x)
        return w * x + b

    @staticmethod
    def backward(ctx, grad_output):
        w, x = ctx.saved_tensors
        return grad_output * x, grad_output * w, grad_output * 1


def test_custom_function_multiply_add():
    x = V(t.ones(1))
    w = V(t.rand(1), requires_grad=True)
    b = V(t.rand(1), requires_grad=True)
    z = MultiplyAdd.apply(w, x, b)
    z.backward()
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), [1.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0])
    assert z.grad_fn.name() == 'MultiplyAddBackward'


def test_node_apply_calls_backward_with_graph():
    x = V(t.ones(1))
    w = V(t.rand(1), requires_grad=True)
    b = V(t.rand(1), requires_grad=True)
    z = MultiplyAdd.apply(w, x, b)
    gw, gx, gb = z.grad_fn.apply(V(t.ones(1)))
    np.testing.assert_allclose(gw.numpy(), [1.0])
    np.testing.assert_allclose(gx.detach().numpy(), w.detach().numpy())
    assert gx.grad_fn.name() == 'MulBackward0'     # grad_output * w depends on w
    np.testing.assert_allclose(gb.numpy(), [1.0])


def test_saved_variables_is_a_deprecated_alias():
    class Old(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_variables
            return g * 2

    x = t.ones(2, requires_grad=True)
    with pytest.warns(DeprecationWarning, match='saved_variables'):
        Old.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_second_derivative_by_create_graph():
    x = V(t.Tensor([5]), requires_grad=True)
    y = x ** 2
    grad_x = t.autograd.grad(y, x, create_graph=True)
    assert repr(grad_x) == '(tensor([10.], grad_fn=<MulBackward0>),)'
    grad_grad_x = t.autograd.grad(grad_x[0], x)
    assert repr(grad_grad_x) == '(tensor([2.]),)'


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        output = 1 / (1 + t.exp(-x))
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        output, = ctx.saved_tensors
        return output * (1 - output) * grad_output


class WrongSigmoid(Sigmoid):
    @staticmethod
    def backward(ctx, grad_output):
        output, = ctx.saved_tensors
        return output * grad_output                 # forgot (1 - output)


def test_sigmoid_function_passes_gradcheck_and_wrong_one_fails():
    test_input = V(t.randn(3, 4, dtype=t.float64), requires_grad=True)
    assert t.autograd.gradcheck(Sigmoid.apply, (test_input,), eps=1e-3)
    with pytest.raises(t.autograd.GradcheckError, match='Jacobian mismatch'):
        t.autograd.gradcheck(WrongSigmoid.apply, (test_input,), eps=1e-3)
    assert t.autograd.gradcheck(WrongSigmoid.apply, (test_input,), eps=1e-3,
                                raise_exception=False) is False


def test_gradcheck_warns_on_float32_like_the_seed_input():
    test_input = V(t.randn(3, 4), requires_grad=True)
    with pytest.warns(UserWarning, match='not a double precision'):
        t.autograd.gradcheck(Sigmoid.apply, (test_input,), eps=1e-3, atol=1e-2, rtol=1e-2)


def test_three_sigmoids_agree():
    x = V(t.randn(100, 100), requires_grad=True)

    def f_sigmoid(x):
        y = Sigmoid.apply(x)
        y.backward(t.ones(x.size()))

    def f_naive(x):
        y = 1 / (1 + t.exp(-x))
        y.backward(t.ones(x.size()))

    def f_th(x):
        y = t.sigmoid(x)
        y.backward(t.ones(x.size()))

    grads = []
    for f in (f_sigmoid, f_naive, f_th):
        x.grad = None
        f(x)
        grads.append(x.grad.numpy().copy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[0], grads[2], rtol=1e-5, atol=1e-6)


def test_once_differentiable_backward_cannot_be_differentiated_again():
    from tape.autograd import once_differentiable

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return t.tensor(3 * x.detach().numpy() ** 2) * g

    x = t.tensor([2.0], dtype=t.float64, requires_grad=True)
    y = Cube.apply(x)
    # the gradient reaching Cube's backward (2y) requires grad under create_graph
    g, = t.autograd.grad((y * y).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [2 * 8 * 12.0])
    with pytest.raises(RuntimeError, match='once_differentiable'):
        g.backward()


def test_function_errors_name_the_function():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class BadShape(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return t.ones(5)

    a = t.ones(2, requires_grad=True)
    b = t.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match='TooFewBackward returned an incorrect number'):
        TooFew.apply(a, b).sum().backward()
    with pytest.raises(RuntimeError, match='BadShapeBackward returned an invalid gradient'):
        BadShape.apply(a).sum().backward()
    # the state is intact: a correct graph over the same leaves still works
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0])


def test_grad_modes_are_per_thread():
    import threading
    seen = {}

    def worker():
        seen['worker'] = t.is_grad_enabled()

    with t.no_grad():
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        seen['main'] = t.is_grad_enabled()
    assert seen == {'worker': True, 'main': False}
    t.set_grad_enabled(False)
    try:
        assert not t.is_grad_enabled()
        assert not (t.ones(1, requires_grad=True) * 2).requires_grad
    finally:
        t.set_grad_enabled(True)

    @t.no_grad()
    def f(x):
        return x * 2
    assert not f(t.ones(1, requires_grad=True)).requires_grad
    with t.no_grad():
        with t.enable_grad():
            assert (t.ones(1, requires_grad=True) * 2).requires_grad


def test_inplace_on_leaf_requiring_grad_raises_and_leaves_it_intact():
    w = t.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match='leaf Variable that requires grad'):
        w.add_(1)
    np.testing.assert_allclose(w.detach().numpy(), [1.0, 1.0])
    with t.no_grad():
        w.add_(1)
    np.testing.assert_allclose(w.detach().numpy(), [2.0, 2.0])


def test_inplace_change_of_saved_tensor_names_the_op():
    x = t.ones(3, requires_grad=True)
    y = x * 2
    z = y.exp()            # exp saves its output
    s = (z * 1).sum()
    z.mul_(3)
    with pytest.raises(RuntimeError, match='modified by an inplace operation.*ExpBackward0'):
        s.backward()
    warnings.simplefilter('ignore')


def test_inplace_clamp_on_non_leaf_matches_torch():
    torch = pytest.importorskip('torch')
    vals = [0.3, -2.0, 3.0, 0.9]
    x = t.tensor(vals, requires_grad=True)
    y = x * 2
    y.clamp_(-1, 1)
    (y * y).sum().backward()
    xt = torch.tensor(vals, requires_grad=True)
    yt = xt * 2
    yt.clamp_(-1, 1)
    (yt * yt).sum().backward()
    assert y.grad_fn.name() == yt.grad_fn.name() == 'ClampBackward1'
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_function_ctx_features():
    class SortWithIndex(Function):
        @staticmethod
        def forward(ctx, x, scale, descending=False):
            xs = x.detach().numpy()
            order = np.argsort(-xs if descending else xs)
            idx = t.tensor(order)
            ctx.mark_non_differentiable(idx)
            ctx.order = order                     # arbitrary ctx attributes
            ctx.scale = scale
            ctx.seen_needs = ctx.needs_input_grad
            return x[t.tensor(order)] * scale, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            grad = np.zeros(len(ctx.order))
            grad[ctx.order] = g.numpy() * ctx.scale
            return t.tensor(grad, dtype=g.dtype), None, None   # None for non-tensor args

    x = t.tensor([3.0, 1.0, 2.0], requires_grad=True)
    vals, idx = SortWithIndex.apply(x, 2.0, True)
    assert vals.requires_grad and not idx.requires_grad
    assert idx.tolist() == [0, 2, 1]
    (vals * t.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 200.0, 20.0])
    assert vals.grad_fn.name() == 'SortWithIndexBackward'


def test_needs_input_grad_reports_which_inputs_require_grad():
    seen = []

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b):
            seen.append(ctx.needs_input_grad)
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None

    a = t.ones(2, requires_grad=True)
    Probe.apply(a, t.ones(2)).sum().backward()
    assert seen == [(True, False)]
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0])


def test_nodes_expose_saved_values_until_freed():
    x = t.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = x * y
    p = x ** 3
    np.testing.assert_allclose(y.grad_fn._saved_result.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(z.grad_fn._saved_self.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(z.grad_fn._saved_other.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    assert p.grad_fn._saved_exponent == 3.0
    with pytest.raises(AttributeError):
        z.grad_fn._saved_exponent
    z.sum().backward()
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        z.grad_fn._saved_self
