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


# -- custom Function: keyword arguments to apply ---------------------------------------
def _kw_function(lib):
    class N(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k=1.0):
            ctx.ni = ctx.needs_input_grad
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            return g, 3 * g, None
    return N


@pytest.mark.parametrize('call', ['y_kw', 'k_kw', 'reordered', 'positional'])
def test_function_apply_keyword_arguments_are_inputs(call):
    out = {}
    for lib in _libs():
        N = _kw_function(lib)
        x = lib.tensor(A, requires_grad=True)
        y = lib.tensor(B, requires_grad=True)
        r = {'y_kw': lambda: N.apply(x, y=y),
             'k_kw': lambda: N.apply(x, y, k=2.0),
             'reordered': lambda: N.apply(x, k=2.0, y=y),
             'positional': lambda: N.apply(x, y)}[call]()
        r.sum().backward()
        out[lib.__name__] = (r.detach().numpy(), x.grad.numpy(), y.grad.numpy(),
                             tuple(r.grad_fn.ni))
    t, p = out['torch'], out['tape']
    for a, b in zip(p[:3], t[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert p[3] == t[3]


def test_function_apply_keyword_tensor_without_grad_slot_raises_as_torch():
    def f(lib):
        class M(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, k=1.0):
                return x * y * k

            @staticmethod
            def backward(ctx, g):
                return g, None, 3 * g       # a gradient for the float k
        x = lib.tensor(A, requires_grad=True)
        M.apply(x, k=2.0, y=lib.tensor(B, requires_grad=True)).sum().backward()
    _raises_same(f, RuntimeError, 'returned a gradient different than None at position 3')


# -- checkpoint ------------------------------------------------------------------------
def test_checkpoint_determinism_check_value():
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        with pytest.raises(ValueError, match=r"determinism_check should be one of \['default', "
                                             r"'none'\], but got foo"):
            lib.utils.checkpoint.checkpoint(lambda t: t.sin(), x, use_reentrant=False,
                                            determinism_check='foo')
        y = lib.utils.checkpoint.checkpoint(lambda t: t.sin(), x, use_reentrant=False,
                                            determinism_check='none')
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.cos(A), rtol=1e-12)


# -- node hooks of the record that made an autograd.grad input -------------------------
@pytest.mark.parametrize('create_graph', [False, True])
@pytest.mark.parametrize('pre', [False, True])
def test_node_hooks_of_an_inputs_producer_do_not_run(create_graph, pre):
    # the engine stops at the input: its grad_fn is not run, nor are its node hooks
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        y = x.exp()
        calls = []
        if pre:
            y.grad_fn.register_prehook(lambda go: calls.append('pre'))
        else:
            y.grad_fn.register_hook(lambda gi, go: calls.append('post'))
        seen = []
        y.register_hook(lambda g: seen.append('tensor'))    # the input's own hook does
        g, = lib.autograd.grad((y * 3).sum(), y, create_graph=create_graph)
        assert calls == [] and seen == ['tensor'], lib.__name__
        np.testing.assert_allclose(g.detach().numpy(), 3.0)
        # with x an input too, the node runs and so do its hooks
        gy, gx = lib.autograd.grad((y * 3).sum(), (y, x), create_graph=create_graph)
        assert len(calls) == 1, lib.__name__
        np.testing.assert_allclose(gx.detach().numpy(), 3 * np.exp(A), rtol=1e-12)


@pytest.mark.parametrize('create_graph', [False, True])
def test_tensor_hook_of_a_non_leaf_grad_input_runs(create_graph):
    # grad with respect to y alone: y's hook runs and its result is what grad returns
    out = {}
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        y = x.exp()
        seen = []
        y.register_hook(lambda g: seen.append(1) or g * 2)
        y.retain_grad()
        g, = lib.autograd.grad((y * 3).sum(), y, create_graph=create_graph)
        out[lib.__name__] = (len(seen), g.detach().numpy(), g.requires_grad)
    assert out['tape'][0] == out['torch'][0] == 1
    np.testing.assert_allclose(out['tape'][1], out['torch'][1], rtol=1e-12)
    assert out['tape'][2] == out['torch'][2]


@pytest.mark.parametrize('create_graph', [False, True])
def test_backward_inputs_runs_the_leafs_accumulate_and_post_accumulate_hooks(create_graph):
    out = {}
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)
        y = lib.tensor(B, requires_grad=True)
        calls = []
        x.register_hook(lambda g: calls.append('tensor') or g * 2)
        acc = (x * 1).grad_fn.next_functions[0][0]
        acc.register_prehook(lambda g: calls.append('acc_pre') or (g[0] * 3,))
        x.register_post_accumulate_grad_hook(lambda p: calls.append('post'))
        y.register_post_accumulate_grad_hook(lambda p: calls.append('y'))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            (x * y).sum().backward(inputs=[x], create_graph=create_graph)
        out[lib.__name__] = (calls, x.grad.detach().numpy(), y.grad)
    assert out['tape'][0] == out['torch'][0] == ['tensor', 'acc_pre', 'post']
    np.testing.assert_allclose(out['tape'][1], out['torch'][1], rtol=1e-12)
    np.testing.assert_allclose(out['tape'][1], 6 * B, rtol=1e-12)
    assert out['tape'][2] is None and out['torch'][2] is None


def test_post_accumulate_hook_optimizer_in_backward_with_inputs():
    res = {}
    for lib in _libs():
        x = lib.tensor(A, requires_grad=True)

        def hook(p):
            with lib.no_grad():
                p.add_(p.grad, alpha=-0.1)
            p.grad = None
        x.register_post_accumulate_grad_hook(hook)
        (x ** 2).sum().backward(inputs=[x])
        res[lib.__name__] = (x.detach().numpy().copy(), x.grad)
    np.testing.assert_allclose(res['tape'][0], res['torch'][0], rtol=1e-12)
    assert res['tape'][1] is None and res['torch'][1] is None


@pytest.mark.parametrize('call', ['positional', 'keyword', 'default'])
def test_forward_ad_function_jvp_gets_a_tangent_per_bound_input(call):
    out = {}
    for lib in _libs():
        class S(lib.autograd.Function):
            @staticmethod
            def forward(x, y=None, k=2.0):
                return x * k if y is None else x * y * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[2]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None, None

            @staticmethod
            def jvp(ctx, tx, ty, tk):
                assert ty is None and tk is None
                return tx * ctx.k
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(lib.tensor(A), lib.tensor(B))
            y = {'positional': lambda: S.apply(d, None, 3.0),
                 'keyword': lambda: S.apply(d, k=3.0),
                 'default': lambda: S.apply(d)}[call]()
            p, t = fw.unpack_dual(y)
            out[lib.__name__] = (p.numpy(), t.numpy())
    for a, b in zip(out['tape'], out['torch']):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# -- functional_call -------------------------------------------------------------------
def _tied(lib):
    class T(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 3, bias=False).double()
            self.b = self.a
            self.register_buffer('buf', lib.ones(3, dtype=lib.float64))

        def forward(self, x):
            return self.b(self.a(x)) + self.buf
    return T()


def test_functional_call_strict_counts_tied_names_as_given():
    X = np.arange(6.0).reshape(2, 3) / 5
    out = {}
    for lib in _libs():
        m = _tied(lib)
        params = {'a.weight': lib.eye(3, dtype=lib.float64) * 2,
                  'buf': lib.zeros(3, dtype=lib.float64)}
        out[lib.__name__] = lib.func.functional_call(m, params, (lib.tensor(X),),
                                                     strict=True).numpy()
        # untied, the other name is missing
        with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'b.weight'"):
            lib.func.functional_call(m, params, (lib.tensor(X),), strict=True,
                                     tie_weights=False)
    np.testing.assert_allclose(out['tape'], out['torch'], rtol=1e-12)
    np.testing.assert_allclose(out['tape'], 4 * X, rtol=1e-12)


def test_func_grad_wants_a_zero_dim_output():
    for shape in ((1,), (1, 1)):
        def f(lib, shape=shape):
            lib.func.grad(lambda x: x.sum().reshape(shape))(lib.tensor(A))
        _raises_same(f, RuntimeError, 'Expected f\\(\\*args\\) to return a scalar Tensor, got '
                                      f'tensor with {len(shape)} dims')

        def g(lib, shape=shape):
            lib.func.grad_and_value(lambda x: x.sum().reshape(shape))(lib.tensor(A))
        _raises_same(g, RuntimeError, 'to return a scalar Tensor')
    # tape's own value_and_grad keeps taking a one-element tensor
    v, g = tape.func.value_and_grad(lambda x: (x * x).sum().reshape(1))(tape.tensor(A))
    np.testing.assert_allclose(g.numpy(), 2 * A)


@pytest.mark.parametrize('which', ['jacrev', 'jacfwd'])
def test_func_jacobians_check_outputs(which):
    api = 'vjp\\(f, \\*primals\\)' if which == 'jacrev' else 'jvp\\(f, primals, tangents\\)'

    def f(lib):
        getattr(lib.func, which)(lambda x: 3.0)(lib.tensor(A))
    _raises_same(f, RuntimeError, f'{api}: expected f\\(\\*primals\\) to return only tensors')

    def g(lib):
        getattr(lib.func, which)(lambda x: None)(lib.tensor(A))
    _raises_same(g, RuntimeError, f'{api}: Expected f to be a function that has non-empty output')
    if which == 'jacrev':
        def h(lib):
            lib.func.jacrev(lambda x: (x > 0).long())(lib.tensor(A))
        _raises_same(h, RuntimeError, 'All outputs of f must be floating-point')


def test_func_jvp_needs_a_primal():
    def f(lib):
        lib.func.jvp(lambda: lib.ones(2), (), ())
    _raises_same(f, RuntimeError, 'Expected primals to contain at least one Tensor.')


@pytest.mark.parametrize('case', ['grad', 'grad_and_value', 'jacrev', 'vjp', 'closure'])
@pytest.mark.parametrize('primal_requires_grad', [False, True])
def test_forward_ad_over_func_transforms_keeps_the_tangent(case, primal_requires_grad):
    # forward-over-reverse: a gradient taken inside a dual level carries the tangent
    out = {}
    for lib in _libs():
        fw = lib.autograd.forward_ad
        x = lib.tensor(A, requires_grad=primal_requires_grad)
        with fw.dual_level():
            d = fw.make_dual(x, lib.tensor(B))
            f = lambda y: (y.sin() * y).sum()       # noqa: E731
            r = {'grad': lambda: lib.func.grad(f)(d),
                 'grad_and_value': lambda: lib.func.grad_and_value(f)(d)[0],
                 'jacrev': lambda: lib.func.jacrev(lambda y: y.sin() * y.sum())(d),
                 'vjp': lambda: lib.func.vjp(lambda y: y.sin() * y, d)[1](lib.ones(3))[0],
                 'closure': lambda: lib.func.grad(lambda y: (y * d.exp()).sum())(
                     lib.tensor(B))}[case]()
            p, t = fw.unpack_dual(r)
            assert t is not None, lib.__name__
            out[lib.__name__] = (p.detach().numpy(), t.detach().numpy())
    for a, b in zip(out['tape'], out['torch']):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_backward_c_function_is_the_class_of_a_functions_grad_fn():
    for lib in _libs():
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        y = F.apply(lib.tensor(A, requires_grad=True))
        assert isinstance(y.grad_fn, lib.autograd.function.BackwardCFunction)
        assert not isinstance((y * 2).grad_fn, lib.autograd.function.BackwardCFunction)


# -- graphs built inside a backward (custom Function backward, hooks) ------------------
def _inner_grad(lib):
    with lib.enable_grad():
        w = lib.tensor(A, requires_grad=True)
        q, = lib.autograd.grad((w * w * w).sum(), w)
    return q


@pytest.mark.parametrize('mode', ['backward', 'grad', 'retain'])
@pytest.mark.parametrize('where', ['function', 'tensor_hook', 'node_hook', 'leaf_hook',
                                   'post_accumulate', 'recompute'])
def test_autograd_grad_inside_a_backward(mode, where):
    out = {}
    for lib in _libs():
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2 + _inner_grad(lib)

        class Recompute(lib.autograd.Function):
            # checkpoint style: forward without a graph, backward recomputes with one
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.sin() * x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                with lib.enable_grad():
                    xd = x.detach().requires_grad_()
                    gx, = lib.autograd.grad(xd.sin() * xd, xd, g)
                return gx
        seen = []
        x = lib.tensor(A, requires_grad=True)
        h = x.exp()
        if where == 'function':
            h = F.apply(h)
        elif where == 'recompute':
            h = Recompute.apply(h)
        elif where == 'tensor_hook':
            h.register_hook(lambda g: g + _inner_grad(lib))
        elif where == 'node_hook':
            h.grad_fn.register_hook(lambda gi, go: (gi[0] + _inner_grad(lib),))
        elif where == 'leaf_hook':
            x.register_hook(lambda g: g + _inner_grad(lib))
        else:
            x.register_post_accumulate_grad_hook(lambda p: seen.append(_inner_grad(lib)) and None)
        loss = (h * h).sum()
        if mode == 'backward':
            loss.backward()
            g = x.grad
        elif mode == 'retain':
            loss.backward(retain_graph=True)
            loss.backward()
            g = x.grad
        else:
            if where == 'post_accumulate':
                continue
            g, = lib.autograd.grad(loss, x)
        out[lib.__name__] = (g.numpy(), [s.numpy() for s in seen])
    if out:
        np.testing.assert_allclose(out['tape'][0], out['torch'][0], rtol=1e-12)
        assert len(out['tape'][1]) == len(out['torch'][1])
        for a, b in zip(out['tape'][1], out['torch'][1]):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_post_accumulate_hook_must_return_none():
    def f(lib):
        x = lib.tensor(A, requires_grad=True)
        x.register_post_accumulate_grad_hook(lambda p: p.grad)
        (x * 2).sum().backward()
    _raises_same(f, RuntimeError, 'Tensor post accumulate grad hooks should return None.')
