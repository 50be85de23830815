"""autograd.functional and tape.func against PyTorch: results connected to the
inputs' graph under create_graph, strict mode, constant functions, has_aux,
grad_and_value, jacrev, vhp."""
import numpy as np
import pytest

import tape


def _np(t):
    return t.detach().numpy() if hasattr(t, 'detach') else np.asarray(t)


def _flat(res):
    if isinstance(res, (tuple, list)):
        return [y for r in res for y in _flat(r)]
    return [res]


def _assert_same(mine, ref):
    mine, ref = _flat(mine), _flat(ref)
    assert len(mine) == len(ref)
    for a, b in zip(mine, ref):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-6)
        assert a.requires_grad == b.requires_grad


# ---------------------------------------------------------------- H7: create_graph
def _cases(m):
    AF = m.autograd.functional
    one = m.ones(2, dtype=m.float64)
    v = m.tensor([1.0, -2.0], dtype=m.float64)
    return {
        'jacobian': lambda x: AF.jacobian(lambda t: t ** 3, x, create_graph=True),
        'hessian': lambda x: AF.hessian(lambda t: (t ** 4).sum(), x, create_graph=True),
        'vjp': lambda x: AF.vjp(lambda t: t ** 3, x, one, create_graph=True)[1],
        'jvp': lambda x: AF.jvp(lambda t: t ** 3, x, v, create_graph=True)[1],
        'hvp': lambda x: AF.hvp(lambda t: (t ** 4).sum(), x, v, create_graph=True)[1],
        'vhp': lambda x: AF.vhp(lambda t: (t ** 4).sum(), x, v, create_graph=True)[1],
    }


EXPECTED = {'jacobian': [6, 12], 'hessian': [24, 48], 'vjp': [6, 12], 'jvp': [6, -24],
            'hvp': [24, -96], 'vhp': [24, -96]}


@pytest.mark.parametrize('which', sorted(EXPECTED))
def test_create_graph_connects_to_inputs(which):
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    r = _cases(tape)[which](x)
    assert r.requires_grad
    (g,) = tape.autograd.grad(r.sum(), x, allow_unused=True)
    assert g is not None
    np.testing.assert_allclose(g.numpy(), EXPECTED[which], rtol=1e-6)


@pytest.mark.parametrize('which', sorted(EXPECTED))
def test_create_graph_matches_torch(which):
    torch = pytest.importorskip('torch')
    for rg in (True, False):
        res = []
        for m in (tape, torch):
            x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=rg)
            r = _cases(m)[which](x)
            g = m.autograd.grad(r.sum(), x, allow_unused=True)[0] if rg else None
            res.append((r, g))
        _assert_same(res[0][0], res[1][0])
        if rg:
            _assert_same(res[0][1], res[1][1])


def test_without_create_graph_results_are_plain():
    AF = tape.autograd.functional
    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    assert not AF.jacobian(lambda t: t ** 3, x).requires_grad
    assert not AF.hessian(lambda t: (t ** 3).sum(), x).requires_grad
    out, v = AF.vjp(lambda t: t ** 3, x, tape.ones(2, dtype=tape.float64))
    assert not out.requires_grad and not v.requires_grad
    assert x.grad is None


# ---------------------------------------------------------------- M16: constant functions
def test_jacobian_of_constant_is_zeros():
    AF = tape.autograd.functional
    x = tape.tensor([1.0, 2.0], dtype=tape.float64)
    J = AF.jacobian(lambda a: tape.ones(3, dtype=tape.float64), x)
    assert tuple(J.shape) == (3, 2)
    np.testing.assert_array_equal(J.numpy(), np.zeros((3, 2)))
    H = AF.hessian(lambda a: tape.ones((), dtype=tape.float64), x)
    np.testing.assert_array_equal(H.numpy(), np.zeros((2, 2)))
    _, v = AF.vjp(lambda a: tape.ones(3, dtype=tape.float64), x, tape.ones(3, dtype=tape.float64))
    np.testing.assert_array_equal(v.numpy(), [0.0, 0.0])


def test_constant_functions_match_torch():
    torch = pytest.importorskip('torch')
    res = []
    for m in (tape, torch):
        AF = m.autograd.functional
        x = m.tensor([1.0, 2.0], dtype=m.float64)
        y = m.tensor([3.0], dtype=m.float64)
        c = lambda *a: m.ones(3, dtype=m.float64)             # noqa: E731
        res.append([AF.jacobian(c, x), AF.jacobian(c, (x, y)),
                    AF.jacobian(lambda a, b: a * 2, (x, y)),
                    AF.hessian(lambda a: m.ones((), dtype=m.float64), x),
                    AF.vjp(c, x, m.ones(3, dtype=m.float64)),
                    AF.jvp(c, x, m.ones(2, dtype=m.float64)),
                    AF.hvp(lambda a: (a * 2).sum(), x, m.ones(2, dtype=m.float64)),
                    AF.vhp(lambda a: (a * 2).sum(), x, m.ones(2, dtype=m.float64))])
    _assert_same(res[0], res[1])


# ---------------------------------------------------------------- M17, M18: strict and errors
def _strict_calls(m):
    AF = m.autograd.functional
    x = m.tensor([1.0, 2.0], dtype=m.float64)
    y = m.tensor([3.0], dtype=m.float64)
    v2 = m.ones(2, dtype=m.float64)
    return {
        'jacobian_indep': lambda: AF.jacobian(lambda a, b: a * 2, (x, y), strict=True),
        'jacobian_const': lambda: AF.jacobian(lambda a: m.ones(3, dtype=m.float64), x,
                                              strict=True),
        'jacobian_cg': lambda: AF.jacobian(lambda a: a * 2, x, strict=True, create_graph=True),
        'hessian_linear': lambda: AF.hessian(lambda a: (a * 2).sum(), x, strict=True),
        'hessian_indep': lambda: AF.hessian(lambda a, b: (a ** 3).sum(), (x, y), strict=True),
        'vjp_indep': lambda: AF.vjp(lambda a, b: a * 2, (x, y), v2, strict=True),
        'jvp_indep': lambda: AF.jvp(lambda a: (a * 2, m.ones(1, dtype=m.float64)), x, v2,
                                    strict=True),
        'hvp_linear': lambda: AF.hvp(lambda a: (a * 2).sum(), x, v2, strict=True),
        'vhp_linear': lambda: AF.vhp(lambda a: (a * 2).sum(), x, v2, strict=True),
        'hessian_nonscalar': lambda: AF.hessian(lambda a: a ** 2, x),
        'hessian_tuple': lambda: AF.hessian(lambda a: ((a ** 2).sum(), a.sum()), x),
        'hvp_nonscalar': lambda: AF.hvp(lambda a: a ** 2, x, v2),
        'vjp_no_v': lambda: AF.vjp(lambda a: a ** 2, x),
        'vjp_bad_v': lambda: AF.vjp(lambda a: a ** 2, x, m.ones(3, dtype=m.float64)),
        'jacobian_vectorize_strict': lambda: AF.jacobian(lambda a: a ** 2, x, vectorize=True,
                                                         strict=True),
        'inputs_not_tensor': lambda: AF.jacobian(lambda a: a, 3.0),
    }


def test_strict_jacobian_raises():
    AF = tape.autograd.functional
    x = tape.tensor([1.0, 2.0], dtype=tape.float64)
    y = tape.tensor([3.0], dtype=tape.float64)
    with pytest.raises(RuntimeError, match='independent of input 1'):
        AF.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    J = AF.jacobian(lambda a, b: a * 2, (x, y))             # without strict: zeros
    np.testing.assert_array_equal(J[1].numpy(), np.zeros((2, 1)))


def test_hessian_of_non_scalar_raises():
    x = tape.tensor([1.0, 2.0], dtype=tape.float64)
    with pytest.raises(RuntimeError, match='should contain a single element'):
        tape.autograd.functional.hessian(lambda a: a ** 2, x)


@pytest.mark.parametrize('case', sorted(_strict_calls(tape)))
def test_errors_match_torch(case):
    torch = pytest.importorskip('torch')
    errs = []
    for m in (tape, torch):
        with pytest.raises(Exception) as info:
            _strict_calls(m)[case]()
        errs.append(info.value)
    assert isinstance(errs[0], type(errs[1])), (errs[0], errs[1])
    assert str(errs[0]).replace('tape.', 'torch.') == str(errs[1]), (errs[0], errs[1])


def test_strict_passes_when_dependent():
    torch = pytest.importorskip('torch')
    res = []
    for m in (tape, torch):
        AF = m.autograd.functional
        x = m.tensor([1.0, 2.0], dtype=m.float64)
        y = m.tensor([3.0], dtype=m.float64)
        f = lambda a, b: (a ** 2).sum() * b.sin().sum()     # noqa: E731
        res.append([AF.jacobian(lambda a, b: a * b, (x, y), strict=True),
                    AF.hessian(f, (x, y), strict=True),
                    AF.hvp(f, (x, y), (m.ones(2, dtype=m.float64), y), strict=True)[1],
                    AF.vhp(f, (x, y), (m.ones(2, dtype=m.float64), y), strict=True)[1],
                    AF.jvp(lambda a: a ** 2, x, x, strict=True)[1]])
    _assert_same(res[0], res[1])


def test_vhp_values():
    AF = tape.autograd.functional
    x = tape.tensor([1.0, 2.0], dtype=tape.float64)
    v = tape.tensor([1.0, -1.0], dtype=tape.float64)
    f = lambda a: (a[0] ** 2) * a[1] + a[1] ** 3              # noqa: E731
    out, vh = AF.vhp(f, x, v)
    np.testing.assert_allclose(out.item(), 10.0)
    # H = [[2 a1, 2 a0], [2 a0, 6 a1]] = [[4, 2], [2, 12]]; v^T H = [2, -10]
    np.testing.assert_allclose(vh.numpy(), [2.0, -10.0])
    assert not vh.requires_grad


# ---------------------------------------------------------------- tape.func
def test_func_grad_connected_to_input_graph():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    g = tape.func.grad(lambda t: (t ** 3).sum())(x)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0])
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_func_grad_plain_input_gives_plain_result():
    g = tape.func.grad(lambda t: (t ** 3).sum())(tape.tensor([1.0, 2.0]))
    assert not g.requires_grad and g.grad_fn is None
    v, g = tape.func.value_and_grad(lambda t: (t ** 3).sum())(tape.tensor([1.0, 2.0]))
    assert not v.requires_grad and not g.requires_grad


def _func_cases(m):
    F = m.func
    w = m.tensor([0.5, -1.5], dtype=m.float64, requires_grad=True)
    xs = lambda rg: m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=rg)   # noqa: E731
    return w, {
        'grad_rg': lambda: F.grad(lambda t: (t ** 3).sum())(xs(True)),
        'grad_plain': lambda: F.grad(lambda t: (t ** 3).sum())(xs(False)),
        'grad_closure': lambda: F.grad(lambda t: (t * w).sum())(xs(False)),
        'grad_closure_additive': lambda: F.grad(lambda t: (t * t).sum() + w.sum())(xs(False)),
        'grad_arg_and_closure': lambda: F.grad(lambda t: (t * w * w).sum())(w),
        'grad_argnums': lambda: F.grad(lambda a, b: (a * b ** 2).sum(), argnums=(0, 1))(
            xs(False), w),
        'grad_constant': lambda: F.grad(lambda t: w.sum())(xs(False)),
        'grad_and_value_rg': lambda: F.grad_and_value(lambda t: (t ** 3).sum())(xs(True)),
        'grad_and_value_plain': lambda: F.grad_and_value(lambda t: (t ** 3).sum())(xs(False)),
        'grad_has_aux': lambda: F.grad(lambda t: ((t ** 2).sum(), (t * 2, t.sum() * w)),
                                       has_aux=True)(xs(False)),
        'grad_and_value_has_aux': lambda: F.grad_and_value(
            lambda t: ((t ** 2).sum(), [t.exp()]), has_aux=True)(xs(True)),
        'nested': lambda: F.grad(lambda t: F.grad(lambda u: (u.sin() * u).sum())(t).sum())(
            xs(False)),
        'nested_rg': lambda: F.grad(lambda t: F.grad(lambda u: (u.sin() * w).sum())(t).sum())(
            xs(True)),
        'jacrev': lambda: F.jacrev(lambda t: t ** 2)(xs(False)),
        'jacrev_rg': lambda: F.jacrev(lambda t: t ** 3)(xs(True)),
        'jacrev_closure': lambda: F.jacrev(lambda t: t * w)(xs(False)),
        'jacrev_argnums': lambda: F.jacrev(lambda t, u: (t * u, t.sum()), argnums=(0, 1))(
            xs(False), m.tensor([3.0, 4.0], dtype=m.float64)),
        'jacrev_aux': lambda: F.jacrev(lambda t: (t ** 2, t), has_aux=True)(xs(False)),
        'jacrev_constant': lambda: F.jacrev(lambda t: m.ones(3, dtype=m.float64))(xs(False)),
        'jacrev_matrix': lambda: F.jacrev(lambda t: t.reshape(2, 1) * t)(xs(False)),
        'vjp_rg': lambda: (lambda o, f: (o, f(m.ones(2, dtype=m.float64))))(
            *F.vjp(lambda t: t ** 3, xs(True))),
        'vjp_plain': lambda: (lambda o, f: (o, f(m.ones(2, dtype=m.float64))))(
            *F.vjp(lambda t: t ** 3, xs(False))),
    }


@pytest.mark.parametrize('case', sorted(_func_cases(tape)[1]))
def test_func_matches_torch(case):
    torch = pytest.importorskip('torch')
    res = []
    for m in (tape, torch):
        w, cases = _func_cases(m)
        r = cases[case]()
        flat = [t for t in _flat(r) if hasattr(t, 'requires_grad')]
        conn = [t for t in flat if t.requires_grad]
        s = sum(t.sum() for t in conn) if conn else None
        gw = m.autograd.grad(s, w, allow_unused=True)[0] if s is not None else None
        res.append((r, gw))
    _assert_same(res[0][0], res[1][0])
    assert (res[0][1] is None) == (res[1][1] is None)
    if res[1][1] is not None:
        _assert_same(res[0][1], res[1][1])


def test_func_grad_has_aux_and_grad_and_value():
    x = tape.tensor([1.0, 2.0])
    g, aux = tape.func.grad(lambda t: ((t ** 2).sum(), {'d': t * 2}), has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(aux['d'].numpy(), [2.0, 4.0])
    assert not aux['d'].requires_grad
    g, v = tape.func.grad_and_value(lambda t: (t ** 2).sum())(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert v.item() == 5.0
    g, (v, aux) = tape.func.grad_and_value(lambda t: ((t ** 2).sum(), 7), has_aux=True)(x)
    assert v.item() == 5.0 and aux == 7
    with pytest.raises(RuntimeError, match='should be a tuple'):
        tape.func.grad(lambda t: (t ** 2).sum(), has_aux=True)(x)


def test_func_grad_non_scalar_raises_torch_and_tape_types():
    for exc in (TypeError, RuntimeError):
        with pytest.raises(exc, match='scalar Tensor'):
            tape.func.grad(lambda t: t * 2)(tape.tensor([1.0, 2.0]))


def test_jacrev_values():
    J = tape.func.jacrev(lambda t: t ** 2)(tape.tensor([1.0, 2.0]))
    np.testing.assert_allclose(J.numpy(), [[2.0, 0.0], [0.0, 4.0]])
    Ja, Jb = tape.func.jacrev(lambda a, b: a * b, argnums=(0, 1))(tape.tensor([1.0, 2.0]),
                                                                   tape.tensor([3.0, 4.0]))
    np.testing.assert_allclose(Ja.numpy(), [[3.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(Jb.numpy(), [[1.0, 0.0], [0.0, 2.0]])


def test_func_grad_plain_beside_other_live_graphs():
    # unrelated graphs alive on the same tape (a parameter's, earlier calls') must
    # not make the result require grad, as in a functional training loop
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    keep = (w * 2).sum()
    x = tape.tensor([0.5, 1.5])
    for _ in range(3):
        g = tape.func.grad(lambda t: (t.sin() * t).sum())(x)
        assert not g.requires_grad and g.grad_fn is None
        x = x - 0.1 * g
    g = tape.func.grad(lambda t: (t * w).sum())(x)        # but a closure over w connects
    assert g.requires_grad
    (gw,) = tape.autograd.grad(g.sum(), w)
    np.testing.assert_allclose(gw.numpy(), [1.0, 1.0])
    assert keep.requires_grad
