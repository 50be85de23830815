"""Custom ``autograd.Function``: the PyTorch 2.x ``setup_context`` style, what
``backward`` receives and may return, ``mark_dirty``, the ``vjp`` alias and
the ctx seen through ``grad_fn``; each against PyTorch where it is installed."""
import numpy as np
import pytest

import tape


def _both(build, check):
    """``check(build(lib), lib)`` for tape and, when installed, for PyTorch."""
    check(build(tape), tape)
    try:
        import torch
    except ImportError:
        return
    check(build(torch), torch)


def _np(t):
    return np.asarray(t.detach().numpy())


def _f64(lib, v, rg=False):
    return lib.tensor(v, dtype=lib.float64, requires_grad=rg)


# ------------------------------------------------------------ setup_context
def _scale_fn(lib, seen):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(x, k=3.0):
            seen.append(('forward', lib.is_grad_enabled()))
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(('setup_context', len(inputs), inputs[1], lib.is_grad_enabled(),
                         ctx.needs_input_grad))
            ctx.k = inputs[1]
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return g * ctx.k, None
    return Scale


def test_setup_context_style_forward_takes_no_ctx():
    def check(lib, _):
        seen = []
        F = _scale_fn(lib, seen)
        x = _f64(lib, [1.0, 2.0], True)
        y = F.apply(x, 4.0)
        np.testing.assert_allclose(_np(y), [4.0, 8.0])
        assert y.grad_fn.name() == 'ScaleBackward'
        y.sum().backward()
        np.testing.assert_allclose(_np(x.grad), [4.0, 4.0])
        # defaults are bound into inputs; both run with grad mode off
        F.apply(x)
        assert seen == [('forward', False), ('setup_context', 2, 4.0, False, (True, False)),
                        ('forward', False), ('setup_context', 2, 3.0, False, (True, False))]
    _both(lambda lib: lib, check)


def test_setup_context_saved_output_double_backward_and_no_grad():
    def check(lib, _):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x.exp()

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(output)

            @staticmethod
            def backward(ctx, g):
                out, = ctx.saved_tensors
                return g * out

        x = _f64(lib, [0.0, 1.0], True)
        g, = lib.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x)
        np.testing.assert_allclose(_np(g), np.exp([0.0, 1.0]))
        np.testing.assert_allclose(_np(g2), np.exp([0.0, 1.0]))
        with lib.no_grad():
            y = Exp.apply(x)
        assert not y.requires_grad
        assert not Exp.apply(_f64(lib, [1.0])).requires_grad
    _both(lambda lib: lib, check)


def test_setup_context_marks_and_materialize_grads():
    def check(lib, _):
        seen = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2, x * 3, x * 4

            @staticmethod
            def setup_context(ctx, inputs, output):
                assert isinstance(output, tuple)
                ctx.mark_non_differentiable(output[1])
                ctx.set_materialize_grads(False)

            @staticmethod
            def backward(ctx, g1, g2, g3):
                seen.append((g2, g3))
                return g1 * 2

        x = _f64(lib, [1.0], True)
        a, b, c = Two.apply(x)
        assert a.requires_grad and not b.requires_grad and c.requires_grad
        a.sum().backward()
        assert seen == [(None, None)]
        np.testing.assert_allclose(_np(x.grad), [2.0])
    _both(lambda lib: lib, check)


def test_legacy_style_still_works_beside_setup_context():
    class Sq(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    x = tape.tensor([3.0], requires_grad=True)
    Sq.apply(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])


# ------------------------------------------------------------ backward's inputs
def test_non_tensor_output_gets_none_gradient():
    def check(lib, _):
        seen = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, 5, x.detach().long()

            @staticmethod
            def backward(ctx, g, g_int, g_long):
                seen.append((g_int, g_long is None, None if g_long is None else
                             _np(g_long).tolist()))
                return g * 2

        x = _f64(lib, [1.0], True)
        y, five, _ = F.apply(x)
        assert five == 5
        y.backward()
        # a Python value's gradient is None; an integer tensor's is materialized zeros
        assert seen == [(None, False, [0])]
        np.testing.assert_allclose(_np(x.grad), [2.0])
    _both(lambda lib: lib, check)


def test_non_tensor_output_gets_none_with_node_hooks_and_create_graph():
    seen = []

    class F(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, 'label'

        @staticmethod
        def backward(ctx, g, g2):
            seen.append(g2)
            return g * 2

    x = tape.tensor([1.0], requires_grad=True)
    y, _ = F.apply(x)
    y.grad_fn.register_prehook(lambda go: None)
    y.backward()
    y, _ = F.apply(x)
    tape.autograd.grad(y.sum(), x, create_graph=True)
    assert seen == [None, None]


# ------------------------------------------------------------ backward's results
@pytest.mark.parametrize('value,name', [(2.0, 'float'), (2, 'int'), ([1.0], 'list'),
                                        (np.array([2.0]), 'numpy.ndarray')])
def test_backward_returning_a_non_tensor_raises(value, name):
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return value

        x = _f64(lib, [1.0], True)
        with pytest.raises(RuntimeError, match=rf'expected Variable or None \(got {name}\)'):
            F.apply(x).backward()
    _both(lambda lib: lib, check)


def test_backward_gradient_for_non_tensor_input_raises():
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, g

        class G(F):
            @staticmethod
            def backward(ctx, g):
                return g, 3.0

        x = _f64(lib, [1.0], True)
        for fn in (F, G):
            with pytest.raises(RuntimeError, match='returned a gradient different than None at '
                                                   'position 2, but the corresponding forward '
                                                   'input was not a Variable'):
                fn.apply(x, 2.0).backward()
    _both(lambda lib: lib, check)


def test_backward_gradient_shape_is_summed_or_refused_as_in_torch():
    def build(lib):
        def run(x_shape, g_shape, create_graph=False):
            class F(lib.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return lib.ones(g_shape, dtype=lib.float64) * 1.5

            x = lib.ones(x_shape, dtype=lib.float64, requires_grad=True)
            g, = lib.autograd.grad(F.apply(x).sum(), x, create_graph=create_graph)
            return _np(g)
        return run

    def check(run, lib):
        np.testing.assert_allclose(run((2,), (3, 2)), [4.5, 4.5])          # summed down
        np.testing.assert_allclose(run((2, 1), (2, 3)), [[4.5], [4.5]])
        np.testing.assert_allclose(run((2, 1), (2, 3), True), [[4.5], [4.5]])
        np.testing.assert_allclose(run((), (2,)), 3.0)
        for xs, gs in (((2,), (1,)), ((2,), ()), ((2, 2), (4,)), ((2,), (3, 1))):
            with pytest.raises(RuntimeError, match='FBackward returned an invalid gradient at '
                                                   'index 0 - got'):
                run(xs, gs)
    _both(build, check)


def test_backward_gradient_for_input_not_requiring_grad_is_not_checked():
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g, lib.ones(5)

        x = _f64(lib, [1.0], True)
        F.apply(x, _f64(lib, [2.0])).backward()
        np.testing.assert_allclose(_np(x.grad), [1.0])
    _both(lambda lib: lib, check)


def test_backward_gradient_takes_the_input_dtype():
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 3

            @staticmethod
            def backward(ctx, g):
                return g.float()

        x = _f64(lib, [1.0, 2.0], True)
        g, = lib.autograd.grad(F.apply(x).sum(), x)
        assert g.dtype == lib.float64
    _both(lambda lib: lib, check)


# ------------------------------------------------------------ mark_dirty
def _dirty_fn(lib):
    class Double_(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.mul_(2)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return Double_


def test_mark_dirty_returns_the_input_itself_with_the_functions_grad_fn():
    def check(lib, _):
        F = _dirty_fn(lib)
        x = _f64(lib, [0.0, 1.0], True)
        h = x * 1
        v0 = h._version
        assert F.apply(h) is h
        assert h.grad_fn.name() == 'Double_Backward'
        assert not h.is_leaf and h.requires_grad
        assert h._version - v0 == 2        # the in-place op, then mark_dirty
        np.testing.assert_allclose(_np(h), [0.0, 2.0])
        h.sum().backward()
        np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])
    _both(lambda lib: lib, check)


def test_mark_dirty_two_outputs_and_hook_before():
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                x.mul_(2)
                return x, x * 3

            @staticmethod
            def backward(ctx, g, g2):
                return g * 2 + g2 * 6

        x = _f64(lib, [0.0, 1.0], True)
        h = x * 1
        seen = []
        h.register_hook(lambda g: seen.append(_np(g).tolist()))
        a, b = F.apply(h)
        assert a is h and b is not h
        (a + b).sum().backward()
        np.testing.assert_allclose(_np(x.grad), [8.0, 8.0])
        assert seen == [[8.0, 8.0]]        # the hook stays with h's value before
    _both(lambda lib: lib, check)


def test_mark_dirty_errors_as_in_torch():
    def check(lib, _):
        F = _dirty_fn(lib)
        with pytest.raises(RuntimeError, match='leaf Variable that requires grad has been used '
                                               'in an in-place operation'):
            F.apply(_f64(lib, [0.0, 1.0], True))

        class NotReturned(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(x)
                x.mul_(2)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(RuntimeError, match='Some elements marked as dirty during the forward '
                                               'method were not returned as output'):
            NotReturned.apply(_f64(lib, [0.0, 1.0], True) * 1)
        # a record that saved the tensor before it changed cannot backward
        x = _f64(lib, [1.0, 2.0], True)
        h = x * 1
        s = h * h
        F.apply(h)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            s.sum().backward()
    _both(lambda lib: lib, check)


def test_mark_dirty_leaf_without_grad_and_no_grad_mode():
    def check(lib, _):
        class MulInto(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.mark_dirty(x)
                x.mul_(w)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2, g * 0 + 1

        x = _f64(lib, [1.0, 2.0])
        w = _f64(lib, [3.0, 3.0], True)
        assert MulInto.apply(x, w) is x
        assert not x.is_leaf and x.grad_fn.name() == 'MulIntoBackward'
        x.sum().backward()
        np.testing.assert_allclose(_np(w.grad), [1.0, 1.0])
        # nothing recorded: the dirty tensor still comes back as itself
        z = _f64(lib, [1.0, 2.0])
        assert _dirty_fn(lib).apply(z) is z
        np.testing.assert_allclose(_np(z), [2.0, 4.0])
    _both(lambda lib: lib, check)


def test_mark_dirty_on_a_view_rewrites_the_base():
    def check(lib, _):
        F = _dirty_fn(lib)
        x = _f64(lib, [1.0, 2.0], True)
        h = x * 1
        F.apply(h[0:1])
        np.testing.assert_allclose(_np(h), [2.0, 2.0])
        (h * h).sum().backward()
        np.testing.assert_allclose(_np(x.grad), [8.0, 4.0])
        x = _f64(lib, [1.0, 2.0], True)
        h = x * 1
        v = h[0:1]
        F.apply(h)
        (v * v).sum().backward()
        np.testing.assert_allclose(_np(x.grad), [8.0, 0.0])
    _both(lambda lib: lib, check)


# ------------------------------------------------------------ vjp, grad_fn as ctx
def test_vjp_is_an_alias_of_backward():
    def check(lib, _):
        class V(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2

        class Sub(V):
            @staticmethod
            def vjp(ctx, g):
                return g * 5

        class Both(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2

            @staticmethod
            def backward(ctx, g):
                return g * 3

        for fn, want in ((V, 2.0), (Sub, 5.0)):
            x = _f64(lib, [1.0], True)
            fn.apply(x).backward()
            np.testing.assert_allclose(_np(x.grad), [want])
        with pytest.raises(RuntimeError, match="Implementing both 'backward' and 'vjp'"):
            Both.apply(_f64(lib, [1.0], True)).backward()
    _both(lambda lib: lib, check)


def test_grad_fn_reads_the_ctx():
    def check(lib, _):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.foo = 'bar'
                ctx.save_for_backward(x)
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g, None

        x = _f64(lib, [1.0], True)
        y = F.apply(x, _f64(lib, [2.0]))
        assert y.grad_fn.foo == 'bar'
        assert y.grad_fn.needs_input_grad == (True, False)
        assert y.grad_fn.saved_tensors[0] is x
        with pytest.raises(AttributeError):
            y.grad_fn.not_there
        y.backward()
        with pytest.raises(RuntimeError, match='backward through the graph a second time'):
            y.grad_fn.saved_tensors
    _both(lambda lib: lib, check)


# ------------------------------------------------------------ regressions vs torch
def test_functions_in_larger_graphs_match_torch():
    def build(lib):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 3 * x ** 2 * g

        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g * b, g * a

        x = _f64(lib, [1.0, 2.0], True)
        out = [Cube.apply(Cube.apply(x)) + Cube.apply(x), Mul.apply(x, x)]
        grads = [_np(lib.autograd.grad(o.sum(), x)[0]) for o in out]
        g, = lib.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x, create_graph=True)
        g3, = lib.autograd.grad(g2.sum(), x)
        return grads + [_np(g), _np(g2), _np(g3)]

    ours = build(tape)
    np.testing.assert_allclose(ours[0], 9 * np.array([1.0, 2.0]) ** 8 + 3 * np.array([1.0, 4.0]))
    np.testing.assert_allclose(ours[1], [2.0, 4.0])
    np.testing.assert_allclose(ours[4], [6.0, 6.0])
    torch = pytest.importorskip('torch')
    for a, b in zip(ours, build(torch)):
        np.testing.assert_allclose(a, b)


def test_function_grad_of_saved_output_is_not_a_view():
    def check(lib, _):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                out, = ctx.saved_tensors
                return g * out

        x = _f64(lib, [0.0, 1.0], True)
        g, = lib.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
        assert g.grad_fn.name() == 'MulBackward0'
    _both(lambda lib: lib, check)
