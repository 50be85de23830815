"""Autograd API layer against PyTorch (hunt 5): autograd.grad options,
torch.func argument checks, gradcheck, saved-tensor hooks, anomaly flags,
tensor-hook errors."""
import warnings

import numpy as np
import pytest

import tape


def _libs():
    torch = pytest.importorskip("torch")
    return torch, tape


def _raises_same(fn, exc, match=None):
    """fn(lib) raises ``exc`` for both libraries (with ``match`` in the message)."""
    for lib in _libs():
        with pytest.raises(exc, match=match):
            fn(lib)


A = np.array([0.3, -1.2, 2.0])
B = np.array([1.5, 0.4, -0.7])


# -- autograd.grad ---------------------------------------------------------------------
def test_grad_dict_inputs_return_a_dict():
    res = {}
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        y = lib.tensor(B, requires_grad=True)
        g = lib.autograd.grad((x * y.exp()).sum(), {'a': x, 'b': y})
        assert isinstance(g, dict) and list(g) == ['a', 'b']
        res[lib.__name__] = {k: v.detach().numpy() for k, v in g.items()}
    for k in ('a', 'b'):
        np.testing.assert_allclose(res['tape'][k], res['torch'][k], rtol=1e-12)


def test_grad_mapping_that_is_not_a_dict_is_a_type_error():
    from collections import OrderedDict

    class M(dict):
        pass
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        with pytest.raises(TypeError, match='must be a dict'):
            lib.autograd.grad((x * 2).sum(), M(a=x))
        # an OrderedDict is a dict subclass too: also refused
        with pytest.raises(TypeError, match='must be a dict'):
            lib.autograd.grad((x * 2).sum(), OrderedDict(a=x))


def test_grad_only_inputs_false_warns_future_warning():
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            g, = lib.autograd.grad((x * 2).sum(), x, only_inputs=False)
        assert any(issubclass(i.category, FutureWarning) and 'only_inputs' in str(i.message)
                   for i in w)
        np.testing.assert_allclose(g.numpy(), 2.0)


def test_grad_materialize_with_gradient_edge_raises():
    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        y = lib.tensor(B, requires_grad=True)
        lib.autograd.grad((x * 2).sum(), (x, lib.autograd.graph.get_gradient_edge(y)),
                          materialize_grads=True)
    _raises_same(f, RuntimeError, 'materialize_grads cannot be used when the given input is '
                                  'a GradientEdge')


def test_grad_non_tensor_input_is_runtime_error():
    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        lib.autograd.grad((x * 2).sum(), (x, 3.0))
    _raises_same(f, RuntimeError, 'all inputs have to be Tensors or GradientEdges, but got '
                                  'float')


def test_grad_non_tensor_grad_output_is_type_error():
    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        lib.autograd.grad((x * 2).sum(), (x,), [2.0])
    _raises_same(f, TypeError, 'gradients can be either Tensors or None, but got float')

    def g(lib):
        x = lib.tensor(A, requires_grad=True)
        lib.autograd.backward([(x * 2).sum()], [2.0])
    _raises_same(g, TypeError, 'gradients can be either Tensors or None')


def test_grad_output_count_mismatch_message():
    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        lib.autograd.grad([(x * 2).sum(), (x * 3).sum()], [x], [lib.tensor(1.0)])
    _raises_same(f, RuntimeError, 'got 2 tensors and 1 gradients')


# -- torch.func ------------------------------------------------------------------------
def test_func_argnums_of_wrong_type_is_runtime_error():
    def f(lib):
        lib.func.grad(lambda x, y: (x * y).sum(), argnums=1.0)(lib.tensor(A), lib.tensor(B))
    _raises_same(f, RuntimeError, r'argnums must be int or Tuple\[int, \.\.\.\], got')

    def g(lib):
        lib.func.jacrev(lambda x, y: x * y, argnums=[0, 1])(lib.tensor(A), lib.tensor(B))
    _raises_same(g, RuntimeError, 'argnums must be int or Tuple')


def test_func_vjp_cotangent_structure_must_match_output():
    def f(lib):
        _, pull = lib.func.vjp(lambda x: x.sin(), lib.tensor(A))
        pull((lib.tensor(B), lib.tensor(B)))
    _raises_same(f, RuntimeError, 'Expected pytree structure of cotangents to be the same as '
                                  r'pytree structure of outputs to the function. cotangents: '
                                  r'\(\*, \*\), primal output: \*')

    def g(lib):
        _, pull = lib.func.vjp(lambda x: (x.sin(), x.cos()), lib.tensor(A))
        pull(lib.tensor(B))
    _raises_same(g, RuntimeError, 'Expected pytree structure of cotangents')


def test_func_vjp_outputs_must_be_floating_tensors():
    def f(lib):
        lib.func.vjp(lambda x: 3.0, lib.tensor(A))
    _raises_same(f, RuntimeError, r'vjp\(f, \*primals\): expected f\(\*primals\) to return only '
                                  'tensors')

    def g(lib):
        lib.func.vjp(lambda x: (x > 0).long(), lib.tensor(A))
    _raises_same(g, RuntimeError, 'All outputs of f must be floating-point or complex Tensors, '
                                  'got Tensor with dtype')


def test_func_vjp_fn_takes_retain_graph_and_create_graph():
    out = {}
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        _, pull = lib.func.vjp(lambda t: t.sin() * t, x)
        g, = pull(lib.tensor(B), retain_graph=True, create_graph=True)
        g2, = pull(lib.tensor(B), create_graph=False)
        out[lib.__name__] = (g.detach().numpy(), g.requires_grad, g2.numpy(), g2.requires_grad)
    t, p = out['torch'], out['tape']
    np.testing.assert_allclose(p[0], t[0], rtol=1e-12)
    np.testing.assert_allclose(p[2], t[2], rtol=1e-12)
    assert (p[1], p[3]) == (t[1], t[3]) == (True, False)


def test_func_jacrev_chunk_size_must_be_positive():
    for lib in _libs():
        with pytest.raises(ValueError, match='jacrev: `chunk_size` should be greater than 0.'):
            lib.func.jacrev(lambda x: x.sin(), chunk_size=0)
    j = tape.func.jacrev(lambda x: x.sin(), chunk_size=2)(tape.tensor(A))
    np.testing.assert_allclose(j.numpy(), np.diag(np.cos(A)), rtol=1e-12)


# -- gradcheck -------------------------------------------------------------------------
def test_gradcheck_non_contiguous_input():
    # a transposed input: the numerical Jacobian perturbs the input's own elements
    for lib in _libs():
        base = lib.tensor(np.arange(12.0).reshape(3, 4) / 7, dtype=lib.float64,
                          requires_grad=True)
        x = base.t()
        assert lib.autograd.gradcheck(lambda t: (t.sin() * t[:1]).cumsum(0), (x,))
        assert lib.autograd.gradgradcheck(lambda t: t.sin() * t, (x,))


def test_gradcheck_needs_forward_or_backward_check():
    def f(lib):
        x = lib.tensor(A, dtype=lib.float64, requires_grad=True)
        lib.autograd.gradcheck(lambda t: t.sin(), (x,), check_backward_ad=False)
    _raises_same(f, AssertionError, 'Expected at least one of check_forward_ad or '
                                    'check_backward_ad to be True')


def test_gradcheck_no_input_requires_grad_message():
    def f(lib):
        lib.autograd.gradcheck(lambda t: t.sin(), (lib.tensor(A, dtype=lib.float64),))
    _raises_same(f, ValueError, 'but none of them have requires_grad=True')


# -- saved tensors hooks, anomaly flags, tensor hooks ----------------------------------
def test_disable_saved_tensors_hooks_inside_active_hooks_raises():
    for lib in _libs():
        G = lib.autograd.graph
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            with pytest.raises(RuntimeError, match='^hooks are off$'):
                with G.disable_saved_tensors_hooks('hooks are off'):
                    pass
        # the failed entry left nothing disabled
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass


def test_is_anomaly_check_nan_enabled_is_the_flag():
    for lib in _libs():
        assert not lib.is_anomaly_enabled()
        assert lib.is_anomaly_check_nan_enabled()       # True by default, mode off
        lib.autograd.set_detect_anomaly(False, check_nan=False)
        try:
            assert not lib.is_anomaly_check_nan_enabled()
        finally:
            lib.autograd.set_detect_anomaly(False)
        assert lib.is_anomaly_check_nan_enabled()


def test_tensor_hook_errors_as_torch():
    def wrong_size(g):
        return g[:2]

    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        y = x * 2
        y.register_hook(wrong_size)
        y.sum().backward()
    _raises_same(f, RuntimeError, "hook 'wrong_size' has changed the size of value")

    def g(lib):
        x = lib.tensor(A, requires_grad=True)
        x.register_hook(wrong_size)
        (x * 2).sum().backward()
    _raises_same(g, RuntimeError, "hook 'wrong_size' has changed the size of value")

    def h(lib):
        x = lib.tensor(A, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: 3)
        y.sum().backward()
    _raises_same(h, TypeError, "expected Variable, but hook returned 'int'")
