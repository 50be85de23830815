"""Higher-order derivatives side by side with PyTorch (float64).

Each program runs on tape and on torch with the same inputs; values, first,
second (and for elementwise ops third) derivatives are compared.  The first
tests are the regressions this hunt found; the sweep at the end keeps a broad
selection of ops covered.
"""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip('torch')
F = torch.nn.functional

TOL = dict(rtol=1e-6, atol=1e-6)
SPECIAL = np.array([[0.0, -1.0, 1.0, 2.0], [-0.5, 0.5, -2.0, 3.0], [0.0, -0.0, 1e-3, -1e-3]])


def _fn(L):
    return TF if L is tape else F


def _np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)
    return np.asarray(t._data)


def _derivs(L, fn, arrays, order, seed=0):
    """Value, then ``order`` levels of gradients: level k+1 differentiates a random
    projection of level k's gradients (kept in the graph with create_graph)."""
    xs = [L.tensor(a.copy(), dtype=L.float64, requires_grad=True) for a in arrays]
    y = fn(L, *xs)
    rng = np.random.default_rng(seed)
    out = [_np(y)]
    cur = (y * L.tensor(rng.standard_normal(tuple(y.shape)), dtype=L.float64)).sum()
    for _ in range(order):
        gs = L.autograd.grad(cur, xs, create_graph=True, allow_unused=True)
        out.append([_np(g) for g in gs])
        nxt = None
        for g in gs:
            if g is None or not g.requires_grad:
                continue
            term = (g * L.tensor(rng.standard_normal(tuple(g.shape)), dtype=L.float64)).sum()
            nxt = term if nxt is None else nxt + term
        if nxt is None:
            break
        cur = nxt
    return out


def _zeros_if_none(a, like):
    return np.zeros_like(like) if a is None else a


def _compare(fn, arrays, order):
    ours = _derivs(tape, fn, arrays, order)
    theirs = _derivs(torch, fn, arrays, order)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if k == 0:
            np.testing.assert_allclose(a, b, err_msg='value', **TOL)
            continue
        for i, (ga, gb) in enumerate(zip(a, b)):
            if ga is None and gb is None:
                continue
            ref = gb if gb is not None else ga
            np.testing.assert_allclose(_zeros_if_none(ga, ref), _zeros_if_none(gb, ref),
                                       err_msg=f'derivative {k}, input {i}', **TOL)


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) if isinstance(s, tuple) else np.asarray(s, float)
            for s in shapes]


# ------------------------------------------------------------- regressions
def test_abs_gradient_stays_in_the_graph():
    # PyTorch's grad of |x| is grad * sgn(x), which requires grad (its derivative is
    # 0), so a second grad, a strict hessian or gradgradcheck go through
    for L in (tape, torch):
        x = L.tensor([1.5, -2.0, 0.0], dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad(x.abs().sum(), x, create_graph=True)
        assert g.requires_grad, L.__name__
        h, = L.autograd.grad(g.sum(), x)
        np.testing.assert_array_equal(_np(h), 0.0)
    for L in (tape, torch):
        H = L.autograd.functional.hessian(lambda x: x.abs().sum() + (x ** 3).sum(),
                                          L.tensor([1.5, -2.0], dtype=L.float64), strict=True)
        np.testing.assert_allclose(_np(H), np.diag([9.0, -12.0]))
    assert tape.autograd.gradgradcheck(lambda x: x.abs() * x,
                                       [tape.tensor([1.5, -2.0], dtype=tape.float64,
                                                    requires_grad=True)])


@pytest.mark.parametrize('name', ['elu', 'elu_alpha', 'selu', 'celu', 'celu_1', 'elu_inplace'])
def test_elu_family_higher_derivatives_at_zero(name):
    # PyTorch's elu double backward is 0 at x == 0 (its first derivative there is
    # the negative side's, alpha); selu and celu are elus
    fn = {
        'elu': lambda L, x: _fn(L).elu(x),
        'elu_alpha': lambda L, x: _fn(L).elu(x, 0.5) * x,
        'selu': lambda L, x: _fn(L).selu(x),
        'celu': lambda L, x: _fn(L).celu(x, 0.7),
        'celu_1': lambda L, x: _fn(L).celu(x) * x,
        'elu_inplace': lambda L, x: _fn(L).elu(x * 1.0, 2.0, inplace=True),
    }[name]
    _compare(fn, [SPECIAL], order=3)


def test_softplus_at_its_threshold():
    # beta * x == threshold takes the smooth side, with PyTorch's double backward 0 there
    _compare(lambda L, x: _fn(L).softplus(x, beta=2.0, threshold=0.0), [SPECIAL], order=3)
    _compare(lambda L, x: _fn(L).softplus(x, beta=0.5, threshold=1.0) * x,
             [SPECIAL * 2.0], order=3)


def test_celu_negative_alpha():
    _compare(lambda L, x: _fn(L).celu(x, -0.7), [SPECIAL + 0.25], order=2)


def test_pow_zero_exponent_masks_a_nan_gradient():
    # a negative base with a zero exponent: d/db of a**b is NaN (log of a negative
    # number), and the second derivative sends it back into the pow; PyTorch's
    # pow backward selects 0 where the exponent is 0 rather than multiplying by 0
    a, b = np.array([-1.0, 0.0, 1.0, 2.0]), np.array([0.0, 0.0, 0.0, 1.5])
    ours = _derivs(tape, lambda L, x, y: x ** y, [a, b], 2)
    theirs = _derivs(torch, lambda L, x, y: x ** y, [a, b], 2)
    for k in (1, 2):
        for ga, gb in zip(ours[k], theirs[k]):
            np.testing.assert_allclose(ga, gb, equal_nan=True, **TOL)
    # first order, a NaN upstream gradient where the exponent is 0
    for L in (tape, torch):
        x = L.tensor([1.0, -2.0], dtype=L.float64, requires_grad=True)
        nan = L.tensor([float('nan'), 1.0], dtype=L.float64)
        for y in (x ** 0.0 * nan, x ** L.zeros(2, dtype=L.float64) * nan):
            g, = L.autograd.grad(y.sum(), x)
            np.testing.assert_array_equal(_np(g), [0.0, 0.0])


def test_materialized_gradients_require_grad():
    for L in (tape, torch):
        x = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        w = L.tensor([3.0], dtype=L.float64, requires_grad=True)
        for cg in (True, False):
            gx, gw = L.autograd.grad((x ** 3).sum(), (x, w), create_graph=cg,
                                     materialize_grads=True)
            np.testing.assert_array_equal(_np(gw), [0.0])
            assert gw.requires_grad == cg, (L.__name__, cg)
        with pytest.raises(ValueError):
            L.autograd.grad((x ** 3).sum(), (x, w), allow_unused=False, materialize_grads=True)


@pytest.mark.parametrize('create_graph', [False, True])
def test_is_grads_batched(create_graph):
    res = {}
    for L in (tape, torch):
        x = L.tensor(np.array([0.3, -1.2, 2.0]), dtype=L.float64, requires_grad=True)
        w = L.tensor(np.array([1.5, 0.5, -1.0]), dtype=L.float64, requires_grad=True)
        y = (x ** 3) * w
        v = L.tensor(np.arange(6.0).reshape(2, 3), dtype=L.float64)
        gx, gw = L.autograd.grad(y, (x, w), v, is_grads_batched=True,
                                 create_graph=create_graph)
        out = [_np(gx), _np(gw)]
        if create_graph:
            out += [_np(g) for g in L.autograd.grad((gx * gw).sum(), (x, w))]
        # the Hessian of a scalar by a batch of unit vectors
        g, = L.autograd.grad((x.sin() * w).sum(), x, create_graph=True)
        H, = L.autograd.grad(g, x, L.eye(3, dtype=L.float64), is_grads_batched=True)
        res[L.__name__] = out + [_np(H)]
    for a, b in zip(res['tape'], res['torch']):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **TOL)


def test_inner_of_matrices():
    _compare(lambda L, a, b: L.inner(a, b) ** 2, _arrays([(2, 3), (4, 3)]), order=2)
    _compare(lambda L, a, b: L.inner(a, b) ** 2, _arrays([(2, 2, 3), (3,)]), order=2)
    _compare(lambda L, a, b: a.inner(b) * a.sum(), _arrays([(3,), (3,)]), order=2)
    _compare(lambda L, a, b: L.inner(a, b[0, 0]) ** 2, _arrays([(2, 3), (2, 2)]), order=2)


# ------------------------------------- nodes on no path to the inputs are left alone
def test_grad_through_a_freed_branch_that_does_not_reach_the_input():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    w = tape.tensor([3.0, 4.0], dtype=tape.float64, requires_grad=True)
    gx, = tape.autograd.grad((x * w).sum(), x, create_graph=True)
    s = gx.sum()
    tape.autograd.grad(s, w)            # frees the backward's mul, the path to w
    assert tape.autograd.grad(s, x, allow_unused=True) == (None,)


def test_grad_frees_only_the_nodes_on_a_path_to_its_inputs():
    # as PyTorch's engine: grad(s, x) runs (and frees) x*3, not w's branch
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    w = tape.tensor([3.0, 4.0], dtype=tape.float64, requires_grad=True)
    s = (x * 3 + w.exp()).sum()
    assert tape.autograd.grad(s, x)[0].tolist() == [3.0, 3.0]
    assert tape.autograd.grad(s, w)[0].tolist() == pytest.approx(np.exp([3.0, 4.0]).tolist())
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        tape.autograd.grad(s, w)        # exp's saved result is freed now
    y = (x * w).sum() + (w * w).sum()
    tape.autograd.grad(y, x)            # frees x*w, not w*w
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y.backward()                    # x*w is on the way to w too


# ------------------------------------------------------------ semantics
def _cube(L, once=False):
    class Cube(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x ** 2 * g
    if once:
        Cube.backward = staticmethod(L.autograd.function.once_differentiable(
            Cube.backward.__func__ if hasattr(Cube.backward, '__func__') else Cube.backward))
    return Cube


def test_custom_function_backward_is_differentiable():
    res = {}
    for L in (tape, torch):
        x = L.tensor(np.array([0.5, -1.5, 2.0]), dtype=L.float64, requires_grad=True)
        y = (_cube(L).apply(x * 2) * x).sum()
        g, = L.autograd.grad(y, x, create_graph=True)
        h, = L.autograd.grad((g * g).sum(), x, create_graph=True)
        k, = L.autograd.grad(h.sum(), x)
        res[L.__name__] = [_np(g), _np(h), _np(k)]
    for a, b in zip(res['tape'], res['torch']):
        np.testing.assert_allclose(a, b, **TOL)


def test_once_differentiable_raises_on_double_backward():
    for L in (tape, torch):
        x = L.tensor(np.array([0.5, -1.5]), dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad(_cube(L, once=True).apply(x).sum(), x, create_graph=True)
        np.testing.assert_allclose(_np(g), 3 * np.array([0.5, -1.5]) ** 2)
        with pytest.raises(RuntimeError):
            L.autograd.grad(g.sum(), x)


def test_hooks_and_grad_outputs_under_create_graph():
    res = {}
    for L in (tape, torch):
        rng = np.random.default_rng(1)
        x = L.tensor(rng.standard_normal(4), dtype=L.float64, requires_grad=True)
        v = L.tensor(rng.standard_normal(4), dtype=L.float64, requires_grad=True)
        z = x * x
        z.register_hook(lambda g, z=z: g * z)
        y = z.sin() * x
        g, = L.autograd.grad(y, x, grad_outputs=v * v, create_graph=True)
        res[L.__name__] = [_np(g)] + [_np(h) for h in L.autograd.grad(g.sum(), (x, v))]
    for a, b in zip(res['tape'], res['torch']):
        np.testing.assert_allclose(a, b, **TOL)


def test_backward_create_graph_grad_is_differentiable_and_accumulates():
    res = {}
    for L in (tape, torch):
        x = L.tensor(np.array([0.5, -1.5, 2.0]), dtype=L.float64, requires_grad=True)
        (x ** 3).sum().backward(create_graph=True)
        g = x.grad
        assert g.requires_grad and not g.is_leaf
        h, = L.autograd.grad(g.sum(), x, retain_graph=True)
        g.sum().backward()              # accumulates into x.grad
        res[L.__name__] = [_np(h), _np(x.grad)]
    for a, b in zip(res['tape'], res['torch']):
        np.testing.assert_allclose(a, b, **TOL)


# ---------------------------------------------------------------- sweep
_POS = np.abs(_arrays([(3, 4)], 5)[0]) + 0.3
_UNIT = np.random.default_rng(6).uniform(-0.9, 0.9, (3, 4))
ELEMENTWISE = {
    'tanh': (lambda L, x: x.tanh(), (3, 4)),
    'sigmoid': (lambda L, x: x.sigmoid() * x, (3, 4)),
    'log': (lambda L, x: L.log(x), _POS),
    'rsqrt': (lambda L, x: L.rsqrt(x), _POS),
    'asin': (lambda L, x: L.asin(x), _UNIT),
    'erf': (lambda L, x: L.erf(x), (3, 4)),
    'pow_half': (lambda L, x: x ** 0.5, _POS),
    'rpow': (lambda L, x: 2.0 ** x, (3, 4)),
    'relu': (lambda L, x: L.relu(x) * x, SPECIAL),
    'leaky_relu': (lambda L, x: _fn(L).leaky_relu(x, 0.1) * x, SPECIAL),
    'hardtanh': (lambda L, x: _fn(L).hardtanh(x) * x, SPECIAL),
    'clamp': (lambda L, x: L.clamp(x, -0.5, 1.0) * x, SPECIAL),
    'abs': (lambda L, x: x.abs() * x, SPECIAL),
    'gelu': (lambda L, x: _fn(L).gelu(x), (3, 4)),
    'gelu_tanh': (lambda L, x: _fn(L).gelu(x, approximate='tanh'), (3, 4)),
    'softplus': (lambda L, x: _fn(L).softplus(x, beta=2.0, threshold=1.0), (3, 4)),
    'mish': (lambda L, x: _fn(L).mish(x), (3, 4)),
    'logit': (lambda L, x: L.logit(x, 0.1), np.random.default_rng(7).uniform(0.05, 0.95, (3, 4))),
    'zero_d': (lambda L, x: (x.sum() * x.sum()).exp(), ()),
}
OTHERS = {
    'mul_broadcast': (lambda L, a, b: a * b * a, [(3, 1), (1, 4)]),
    'div_0d': (lambda L, a, b: a / b, [(3, 4), _POS[0, 0]]),
    'pow_tensor': (lambda L, a, b: a ** b, [_POS[:, :1], (4,)]),
    'maximum_ties': (lambda L, a, b: L.maximum(a, b) * (a + b) ** 2,
                     [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]]),
    'atan2': (lambda L, a, b: L.atan2(a, b), [(3, 1), (4,)]),
    'amax_ties': (lambda L, x: L.amax(x, 1) * x.sum(1),
                  [[[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, -1.0, 2.0]]]),
    'max_dim_keepdim': (lambda L, x: x.max(0, keepdim=True).values * x,
                        [[[1.0, 3.0, 3.0, 0.5], [1.0, 2.0, -1.0, 2.0]]]),
    'prod_zeros': (lambda L, x: x.prod(1, keepdim=True) * x,
                   [[[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [1.5, 2.0, -1.0]]]),
    'cumprod_zero': (lambda L, x: L.cumprod(x, 1), [[[0.0, 1.0, 2.0], [1.0, 0.0, 3.0]]]),
    'logsumexp_keepdim': (lambda L, x: L.logsumexp(x, (0, 1), keepdim=True) * x, [(3, 4)]),
    'var_std': (lambda L, x: x.var(1, keepdim=True) * x + x.std(), [(3, 4)]),
    'norm_p3': (lambda L, x: L.norm(x, p=3, dim=0), [(3, 4)]),
    'softmax': (lambda L, x: L.softmax(x, 0), [(3, 4)]),
    'layer_norm': (lambda L, a, b: _fn(L).layer_norm(a, (4,), b[0], b[1]), [(3, 4), (2, 4)]),
    'cross_entropy': (lambda L, a, b: _fn(L).cross_entropy(a * b, L.tensor([0, 2, 1])),
                      [(3, 4), (3, 4)]),
    'matmul_broadcast': (lambda L, a, b: L.matmul(a, b) ** 2, [(2, 1, 2, 3), (4, 3, 2)]),
    'bmm': (lambda L, a, b: L.bmm(a, b) ** 2, [(2, 2, 3), (2, 3, 4)]),
    'gather': (lambda L, x: L.gather(x, 1, L.tensor([[0, 0], [3, 1], [2, 2]])) ** 3, [(3, 4)]),
    'scatter': (lambda L, x: L.scatter(x, 1, L.tensor([[0], [3], [2]]), x[:, :1] ** 2) ** 3,
                [(3, 4)]),
    'index_add': (lambda L, x: L.index_add(x * x, 0, L.tensor([0, 0]), x[1:] ** 2) ** 2,
                  [(3, 4)]),
    'advanced_index': (lambda L, x: x[L.tensor([0, 2, 0]), L.tensor([1, 1, 3])] ** 3, [(3, 4)]),
    'cat_stack': (lambda L, x: L.stack([L.cat([x, x ** 2], 0), L.cat([x[:1], x, x[1:]], 0)]) ** 2,
                  [(2, 3)]),
    'views': (lambda L, x: x.t()[1:, ::2].reshape(-1).unsqueeze(0) ** 3, [(3, 4)]),
    'inplace_view': (lambda L, x: (lambda y: (y[:, 1:3].mul_(x[:, :2]), y ** 3)[1])(x * 2),
                     [(3, 4)]),
}


@pytest.mark.parametrize('name', list(ELEMENTWISE))
def test_elementwise_third_derivatives(name):
    fn, arr = ELEMENTWISE[name]
    _compare(fn, _arrays([arr]), order=3)


@pytest.mark.parametrize('name', list(OTHERS))
def test_second_derivatives(name):
    fn, shapes = OTHERS[name]
    _compare(fn, _arrays(shapes), order=2)


def test_functional_hessian_hvp_vhp_jacobian():
    rng = np.random.default_rng(3)
    x5, y5, v5 = (rng.standard_normal(5) for _ in range(3))

    def rosen(x):
        return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()

    def res(L):
        A = L.autograd.functional
        T = lambda a: L.tensor(a, dtype=L.float64)      # noqa: E731
        w = L.tensor(x5, dtype=L.float64, requires_grad=True)
        H = A.hessian(lambda x: ((x * w) ** 3).sum(), T(y5), create_graph=True)
        J = A.jacobian(lambda x: (x * w).tanh(), T(y5), create_graph=True)
        return [A.hessian(rosen, T(x5)), A.hvp(rosen, T(x5), T(v5))[1],
                A.vhp(lambda x, y: (x.exp() * y.sin()).sum(), (T(x5), T(y5)),
                      (T(v5), T(y5)))[1][1],
                L.autograd.grad((H * H).sum() + (J ** 2).sum(), w)[0]]
    for a, b in zip(res(tape), res(torch)):
        np.testing.assert_allclose(_np(a), _np(b), **TOL)


def test_create_graph_grad_runs_only_the_nodes_on_a_path_to_its_inputs():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    w = tape.tensor([3.0, 4.0], dtype=tape.float64, requires_grad=True)
    s = (x * 3 + w.exp()).sum()
    tape.autograd.grad(s, w)                        # frees exp's saved result
    gx, = tape.autograd.grad(s, x, create_graph=True)   # never reaches exp: no error
    assert gx.tolist() == [3.0, 3.0]
