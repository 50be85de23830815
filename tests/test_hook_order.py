"""A leaf's hooks run in PyTorch's order: tensor hook, AccumulateGrad prehook,
the accumulation, post-accumulate hook, AccumulateGrad post hook."""
import pytest

import tape


def _order(lib, how):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    log = []
    y = (x * 3).sum()
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    x.register_hook(lambda g: log.append('tensor') or None)
    acc.register_prehook(lambda g: log.append('pre') or None)
    x.register_post_accumulate_grad_hook(lambda t: log.append(('post_acc', t.grad.tolist()))
                                         or None)
    acc.register_hook(lambda gi, go: log.append(('post', x.grad.tolist())) or None)
    for _ in range(2):          # the second backward runs them all again
        y = (x * 3).sum()
        if how == 'grad':
            lib.autograd.grad(y, x, create_graph=True)
        else:
            y.backward(create_graph=how == 'create_graph')
    return log


@pytest.mark.parametrize('how', ['backward', 'create_graph', 'grad'])
def test_leaf_hook_order(how):
    got = _order(tape, how)
    if how == 'grad':
        assert got == ['tensor', 'tensor']      # grad() accumulates nothing
    else:
        assert got == ['tensor', 'pre', ('post_acc', [3.0, 3.0]), ('post', [3.0, 3.0]),
                       'tensor', 'pre', ('post_acc', [6.0, 6.0]), ('post', [6.0, 6.0])]


@pytest.mark.parametrize('how', ['backward', 'create_graph', 'grad'])
def test_leaf_hook_order_matches_torch(how):
    torch = pytest.importorskip('torch')
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert _order(tape, how) == _order(torch, how)


def test_norm_gradient_at_an_infinite_element_as_torch():
    # c * a^(c-1) for the root, not c * out / a, which is inf/inf = NaN at a = inf:
    # the finite elements get 0, the infinite one NaN, as PyTorch's x / norm
    import numpy as np
    for p in (2, 3):
        x = tape.tensor([[np.inf, 1.0], [2.0, 3.0]], dtype=tape.float64, requires_grad=True)
        tape.linalg.vector_norm(x, p).backward()
        g = x.grad.numpy()
        assert np.isnan(g[0, 0]) and (g.ravel()[1:] == 0).all()
    x = tape.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=tape.float64, requires_grad=True)
    x.norm(dim=-1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-15)  # zero row masked


def test_norm_gradients_at_inf_and_zero_match_torch():
    torch = pytest.importorskip('torch')
    import numpy as np
    for v in ([[np.inf, 1.0]], [[np.inf, 1.0], [2.0, 3.0]], [[0.0, 0.0], [3.0, 4.0]]):
        for p in (2, 3, 0.5, 1):
            got = []
            for lib in (tape, torch):
                x = lib.tensor(v, dtype=lib.float64, requires_grad=True)
                (lib.linalg.vector_norm(x, p) + lib.linalg.vector_norm(x, p, dim=-1).sum()
                 ).backward()
                got.append(x.grad.numpy())
            np.testing.assert_allclose(got[0], got[1], rtol=1e-12, equal_nan=True)


def test_mark_non_differentiable_on_an_input_returned_as_is():
    class F(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(x)
            return x * 2, x

        @staticmethod
        def backward(ctx, gy, gx):
            return gy * 2
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    y, z = F.apply(a)
    assert y.requires_grad and not z.requires_grad and z.grad_fn is None and z is not a
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_subtraction_with_a_bool_operand_raises_as_torch():
    t = tape.tensor([1.0, 2.0])
    for f in (lambda: t - True, lambda: True - t, lambda: t.sub(True),
              lambda: t.clone().sub_(tape.tensor([True, False])), lambda: t.clone().sub_(True),
              lambda: tape.tensor([1, 2]) - True, lambda: t - tape.tensor([True, False])):
        with pytest.raises(RuntimeError, match='Subtraction, the `-` operator, with'):
            f()
    assert (t + True).tolist() == [2.0, 3.0]        # addition is fine
    x = tape.tensor([5.0, 5.0])
    x.sub_(tape.tensor([1.0, 2.0]))
    x -= 1
    assert x.tolist() == [3.0, 2.0]
