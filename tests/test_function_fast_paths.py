"""The fast paths of ``Function.apply`` and of its record's backward
(tape/autograd/function.py): one output, grad mode switched only when needed,
a ctx built without ``__init__``, the single-tensor tape lookup.  Each case
against PyTorch where it is installed."""
import numpy as np
import pytest

import tape
from tape.autograd.function import FunctionCtx


def _both(build, check):
    check(build(tape), tape)
    try:
        import torch
    except ImportError:
        return
    check(build(torch), torch)


def _np(t):
    return np.asarray(t.detach().numpy())


def _double(lib, seen=None):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if seen is not None:
                seen.append(('forward', lib.is_grad_enabled(), ctx.needs_input_grad))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if seen is not None:
                seen.append(('backward', lib.is_grad_enabled(), tuple(g.shape), g.dtype))
            return g * 2
    return Double


@pytest.mark.parametrize('shape', [(), (4,), (100, 100)])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_one_output_forward_and_backward(shape, dtype):
    def build(lib):
        seen = []
        return _double(lib, seen), seen

    def check(built, lib):
        Double, seen = built
        dt = getattr(lib, dtype)
        x = lib.ones(shape, dtype=dt, requires_grad=True)
        y = Double.apply(x)
        assert y.requires_grad and y.dtype == dt
        assert type(y.grad_fn).__name__ == 'DoubleBackward'
        y.backward(lib.full(shape, 3.0, dtype=dt))
        np.testing.assert_array_equal(_np(x.grad), np.full(shape, 6.0))
        assert x.grad.dtype == dt
        assert seen == [('forward', False, (True,)), ('backward', False, shape, dt)]
    _both(build, check)


def test_not_recorded_when_no_input_requires_grad_or_grad_off():
    def check(Double, lib):
        x = lib.ones(3)
        y = Double.apply(x)
        assert not y.requires_grad and y.grad_fn is None
        w = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            z = Double.apply(w)
        assert not z.requires_grad and z.grad_fn is None
        assert lib.is_grad_enabled()
    _both(_double, check)


def test_input_returned_as_is_gets_a_new_identity():
    def build(lib):
        class Ident(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 5
        return Ident

    def check(Ident, lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Ident.apply(x)
        assert y is not x and y.requires_grad
        y.sum().backward()
        np.testing.assert_array_equal(_np(x.grad), [5.0, 5.0])
        # not recorded: still a new tensor object, sharing the data
        with lib.no_grad():
            z = Ident.apply(x)
        assert z is not x
        np.testing.assert_array_equal(_np(z), [1.0, 2.0])
    _both(build, check)


def test_output_recorded_inside_forward_gets_a_new_identity():
    def build(lib):
        class Rec(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                with lib.enable_grad():
                    y = x * 3
                ctx.inner = y
                return y

            @staticmethod
            def backward(ctx, g):
                return g * 7
        return Rec

    def check(Rec, lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Rec.apply(x)
        assert type(y.grad_fn).__name__ == 'RecBackward'
        y.sum().backward()
        np.testing.assert_array_equal(_np(x.grad), [7.0, 7.0])
    _both(build, check)


def test_grad_mode_restored_when_forward_or_backward_leaks_it():
    def build(lib):
        class Leaky(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                lib.set_grad_enabled(True)      # never turned back off
                return x * 2

            @staticmethod
            def backward(ctx, g):
                lib.set_grad_enabled(True)
                return g * 2
        return Leaky

    def check(Leaky, lib):
        x = lib.ones(2, requires_grad=True)
        with lib.no_grad():
            y = Leaky.apply(x)
            assert not lib.is_grad_enabled()
        assert not y.requires_grad
        y = Leaky.apply(x)
        assert lib.is_grad_enabled()
        s = y.sum()
        with lib.no_grad():
            # the backward's mode is the caller's mode after it, whatever it did
            s.backward()
            assert not lib.is_grad_enabled()
        np.testing.assert_array_equal(_np(x.grad), [2.0, 2.0])
    _both(build, check)


def test_backward_leaking_grad_mode_under_plain_backward():
    class Leaky(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            tape.set_grad_enabled(True)
            return g * 2

    x = tape.ones(2, requires_grad=True)
    Leaky.apply(x).sum().backward()
    assert tape.is_grad_enabled()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_once_differentiable_leaking_grad_mode_is_undone():
    @tape.autograd.once_differentiable
    def bw(ctx, g):
        tape.set_grad_enabled(True)
        return g * 2

    class F(tape.autograd.Function):
        forward = staticmethod(lambda ctx, x: x * 2)
        backward = staticmethod(bw)

    x = tape.ones(2, requires_grad=True)
    F.apply(x).sum().backward()
    assert tape.is_grad_enabled()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    with tape.no_grad():
        bw(None, tape.ones(2))
        assert not tape.is_grad_enabled()


def test_forward_keywords_and_non_tensor_arguments():
    def build(lib):
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, shift=0.0):
                ctx.k = k
                return x * k + shift

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None, None
        return Scale

    def check(Scale, lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Scale.apply(x, 3.0, shift=1.0) if lib is tape else Scale.apply(x, 3.0, 1.0)
        np.testing.assert_array_equal(_np(y), [4.0, 7.0])
        y.sum().backward()
        np.testing.assert_array_equal(_np(x.grad), [3.0, 3.0])
    _both(build, check)


def test_inputs_on_two_tapes_and_leaf_second():
    def build(lib):
        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g * b, g * a
        return Mul

    def check(Mul, lib):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        a2 = a * 1.0
        b2 = b + 0.0
        y = Mul.apply(a2, b2)
        z = Mul.apply(y, b)         # a recorded tensor and a leaf
        z.sum().backward()
        np.testing.assert_array_equal(_np(a.grad), [9.0, 16.0])
        np.testing.assert_array_equal(_np(b.grad), [6.0, 16.0])
    _both(build, check)


def test_one_non_float_or_non_tensor_or_marked_output():
    def build(lib):
        class ArgMax(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.argmax()

            @staticmethod
            def backward(ctx, g):
                return None

        class Marked(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_non_differentiable(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g

        class Num(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return 3.5

            @staticmethod
            def backward(ctx, g):
                return None
        return ArgMax, Marked, Num

    def check(fns, lib):
        ArgMax, Marked, Num = fns
        x = lib.tensor([1.0, 5.0, 2.0], requires_grad=True)
        i = ArgMax.apply(x)
        assert not i.requires_grad and int(i) == 1
        m = Marked.apply(x)
        assert not m.requires_grad
        assert Num.apply(x) == 3.5
    _both(build, check)


def test_two_outputs_one_used_materialized_or_not():
    def build(lib):
        seen = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, materialize):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append((ga is None, gb is None))
                out = ga * 2 if ga is not None else 0
                if gb is not None:
                    out = out + gb * 3
                return out, None
        return Two, seen

    def check(built, lib):
        Two, seen = built
        for materialize in (True, False):
            x = lib.tensor([1.0, 2.0], requires_grad=True)
            a, b = Two.apply(x, materialize)
            b.sum().backward()
            np.testing.assert_array_equal(_np(x.grad), [3.0, 3.0])
        assert seen == [(False, False), (True, False)]
    _both(build, check)


def test_saved_tensors_none_order_and_version_check():
    def build(lib):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(None, x, y)
                return x * y

            @staticmethod
            def backward(ctx, g):
                n, x, y = ctx.saved_tensors
                assert n is None
                return g * y, g * x
        return F

    def check(F, lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0])
        z = F.apply(x, y)
        z.sum().backward(retain_graph=True)
        np.testing.assert_array_equal(_np(x.grad), [3.0, 4.0])
        y.add_(1)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            z.sum().backward()
    _both(build, check)


def test_wrong_gradients_name_the_function():
    class Bad(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class BadShape(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return tape.ones(3)

    x = tape.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r'function BadBackward returned an incorrect number '
                                            r'of gradients \(expected 1, got 2\)'):
        Bad.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match=r'Function BadShapeBackward returned an invalid '
                                            r'gradient at index 0'):
        BadShape.apply(x).sum().backward()


def test_ctx_defaults():
    ctx = FunctionCtx('XBackward')
    assert ctx.needs_input_grad == () and ctx.materialize_grads is True
    assert ctx.saved_tensors == ()
    ctx.save_for_backward(None)
    assert ctx.saved_tensors == (None,)
    seen = []

    class F(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            seen.append((ctx.needs_input_grad, ctx.materialize_grads, ctx.saved_tensors))
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, None

    F.apply(tape.ones(2, requires_grad=True), 2)
    F.apply(tape.ones(2), 2)
    assert seen == [((True, False), True, ()), ((False, False), True, ())]


def test_create_graph_through_one_output_function():
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
        return Cube

    def check(Cube, lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), x)
        np.testing.assert_array_equal(_np(gg), [6.0, 12.0])
    _both(build, check)
