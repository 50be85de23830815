"""tape.autograd.forward_ad against torch.autograd.forward_ad: the forward-mode
AD tutorial's blocks side by side, op chains, an MLP, custom Functions with
jvp, levels and errors."""
import numpy as np
import pytest

import tape
import tape.autograd.forward_ad as fwAD

torch = pytest.importorskip('torch')
tfwAD = torch.autograd.forward_ad


def _np(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-12):
    assert a is not None and b is not None
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _pair(*shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return tape.tensor(a), torch.tensor(a)


def _both(fn, shape, seed=0, m_args=()):
    """fn(m, dual) run in a level of each library; (primal, tangent) of each."""
    xp, xt = _pair(*shape, seed=seed)
    tp, tt = _pair(*shape, seed=seed + 1)
    res = []
    for m, fw, x, t in ((tape, fwAD, xp, tp), (torch, tfwAD, xt, tt)):
        with fw.dual_level():
            out = fn(m, fw.make_dual(x, t))
            res.append(fw.unpack_dual(out))
    return res


# ------------------------------------------------------------ tutorial: basic use
def test_tutorial_basic_usage():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((10, 10)) for _ in range(3))
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        primal, tangent = m.tensor(a), m.tensor(b)

        def fn(x, y):
            return x ** 2 + y ** 2

        with fw.dual_level():
            dual_input = fw.make_dual(primal, tangent)
            assert fw.unpack_dual(dual_input).tangent is tangent
            dual_input_alt = fw.make_dual(primal, tangent.T)
            assert fw.unpack_dual(dual_input_alt).tangent is not tangent
            plain_tensor = m.tensor(c)
            dual_output = fn(dual_input, plain_tensor)
            jvp = fw.unpack_dual(dual_output).tangent
            alt = fw.unpack_dual(fn(dual_input_alt, plain_tensor)).tangent
        assert fw.unpack_dual(dual_output).tangent is None
        res.append((jvp, alt))
    _close(res[0][0], res[1][0])
    _close(res[0][1], res[1][1])
    np.testing.assert_allclose(_np(res[0][0]), 2 * a * b)


def test_tutorial_usage_with_modules():
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        m.manual_seed(0)
        model = m.nn.Linear(5, 5).double()
        inp = m.tensor(np.random.default_rng(1).standard_normal((16, 5)))
        params = {name: p for name, p in model.named_parameters()}
        rng = np.random.default_rng(2)
        tangents = {name: m.tensor(rng.random(tuple(p.shape))) for name, p in params.items()}
        with fw.dual_level():
            for name, p in params.items():
                delattr(model, name)
                setattr(model, name, fw.make_dual(p, tangents[name]))
            out = model(inp)
            jvp = fw.unpack_dual(out).tangent
        res.append((params, tangents, inp, jvp))
    (pp, tp, ip, jp), (_, _, _, jt) = res
    expect = _np(ip) @ _np(tp['weight']).T + _np(tp['bias'])
    np.testing.assert_allclose(_np(jp), expect, rtol=1e-12)
    _close(jp, jt)


def test_tutorial_functional_call():
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        m.manual_seed(0)
        model = m.nn.Linear(5, 5).double()
        inp = m.tensor(np.random.default_rng(1).standard_normal((16, 5)))
        params = {name: p for name, p in model.named_parameters()}
        rng = np.random.default_rng(2)
        tangents = {name: m.tensor(rng.random(tuple(p.shape))) for name, p in params.items()}
        with fw.dual_level():
            dual_params = {}
            for name, p in params.items():
                dual_params[name] = fw.make_dual(p, tangents[name])
            out = m.func.functional_call(model, dual_params, inp)
            jvp = fw.unpack_dual(out).tangent
        res.append(jvp)
    _close(*res)


class _TapeExp(tape.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = tape.exp(foo)
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx, gI):
        gO = gI * ctx.result
        del ctx.result
        return gO


class _TorchExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = torch.exp(foo)
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx, gI):
        gO = gI * ctx.result
        del ctx.result
        return gO


def test_tutorial_custom_function_jvp_only():
    # the tutorial's Fn: jvp and no backward (backward is never called), a
    # primal that requires grad; jvp deletes what it read, so it runs once
    res = []
    for m, fw, Fn in ((tape, fwAD, _TapeExp), (torch, tfwAD, _TorchExp)):
        fn = Fn.apply
        primal = m.tensor(np.random.default_rng(0).standard_normal((10, 10)),
                          requires_grad=True)
        tangent = m.tensor(np.random.default_rng(1).standard_normal((10, 10)))
        with fw.dual_level():
            dual_input = fw.make_dual(primal, tangent)
            dual_output = fn(dual_input)
            jvp = fw.unpack_dual(dual_output).tangent
            again = fw.unpack_dual((dual_output * 2).sum()).tangent
        res.append((jvp, again))
    _close(res[0][0], res[1][0])
    _close(res[0][1], res[1][1])


def test_custom_function_jvp_is_used_not_backward():
    # a jvp that disagrees with backward: forward AD must report jvp's value
    def make(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, a, b, k):
                ctx.save_for_forward(a, b)
                ctx.save_for_backward(a, b)
                return a * b * k

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g * b, g * a, None

            @staticmethod
            def jvp(ctx, ga, gb, gk):
                a, b = ctx.saved_tensors
                assert gk is None and float(abs(gb).sum()) == 0
                return ga * b + a * gb
        return F
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        a = m.tensor([1.0, 2.0], dtype=m.float64)
        b = m.tensor([3.0, 4.0], dtype=m.float64)
        with fw.dual_level():
            d = fw.make_dual(a, m.ones(2, dtype=m.float64))
            out = make(m).apply(d, b, 2.0)
            res.append(fw.unpack_dual(out.exp()))
    _close(res[0].tangent, res[1].tangent)
    _close(res[0].primal, res[1].primal)
    np.testing.assert_allclose(_np(res[0].tangent), [3 * np.exp(6), 4 * np.exp(16)])


def test_custom_function_without_jvp_uses_backward():
    # torch raises NotImplementedError here; tape falls back to the double-vjp trick
    class Sq(tape.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 2 * a * g
    with fwAD.dual_level():
        d = fwAD.make_dual(tape.tensor([1.0, 3.0]), tape.tensor([1.0, -1.0]))
        t = fwAD.unpack_dual(Sq.apply(d)).tangent
    np.testing.assert_allclose(t.numpy(), [2.0, -6.0])


# ------------------------------------------------------------ chains against torch
CHAINS = {
    'elementwise': (lambda m, d: (m.tanh(d) * d.exp() + d.sigmoid() / (1 + d ** 2)), (4, 3)),
    'reductions': (lambda m, d: (d.sum(0) * d.mean(1)[:1] + d.amax(1)[:1] + d.norm()), (3, 3)),
    'softmax': (lambda m, d: m.nn.functional.log_softmax(d, dim=-1) ** 2, (2, 5)),
    'matmul': (lambda m, d: (d @ d.T).relu() @ d, (3, 3)),
    'indexing': (lambda m, d: d[1:, ::2] * d[0, 1] + d[[0, 2]].cumsum(0)[:, :2], (3, 4)),
    'shapes': (lambda m, d: m.cat([d.reshape(-1), d.t().flatten()]).view(2, -1)
               .unsqueeze(0).permute(2, 0, 1).squeeze(1), (2, 3)),
    'scalar': (lambda m, d: (d * d).sum().sqrt(), (5,)),
}


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_chain_matches_torch(name):
    fn, shape = CHAINS[name]
    mine, ref = _both(fn, shape)
    _close(mine.primal, ref.primal)
    _close(mine.tangent, ref.tangent)


def test_mlp_matches_torch():
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal(s) for s in ((8, 4), (8,), (3, 8), (3,))]
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        model = m.nn.Sequential(m.nn.Linear(4, 8), m.nn.Tanh(), m.nn.Linear(8, 3)).double()
        with m.no_grad():
            for p, w in zip(model.parameters(), ws):
                p.copy_(m.tensor(w))
        x = m.tensor(rng.standard_normal((5, 4)) if m is tape else res[0][2])
        t = m.tensor(np.ones((5, 4)))
        with fw.dual_level():
            out = model(fw.make_dual(x, t))
            loss = m.nn.functional.cross_entropy(out, m.tensor([0, 1, 2, 0, 1]))
            p, tan = fw.unpack_dual(out)
            lp, ltan = fw.unpack_dual(loss)
            res.append((p, tan, x.numpy(), lp, ltan))
        # the parameters really require grad: primal and tangent do too
        assert p.requires_grad and tan.requires_grad
    for a, b in zip(res[0][:2] + res[0][3:], res[1][:2] + res[1][3:]):
        _close(a, b)


# ------------------------------------------------------------ semantics
def test_primal_alias_and_requires_grad_like_torch():
    for req in (False, True):
        for m, fw in ((tape, fwAD), (torch, tfwAD)):
            x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=req)
            with fw.dual_level():
                d = fw.make_dual(x, m.ones(2, dtype=m.float64))
                p, t = fw.unpack_dual(d)
                assert p.requires_grad == req
                yp, yt = fw.unpack_dual(d * 3)
                assert yp.requires_grad == req
                assert t.requires_grad is False
                with m.no_grad():
                    x.mul_(2)           # the primal aliases x's storage
                assert float(p.detach()[1]) == 4.0


def test_tangent_none_when_independent_and_after_exit():
    x = tape.tensor([1.0, 2.0])
    w = tape.tensor([1.0, 1.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tape.ones(2))
        assert fwAD.unpack_dual(x * 2).tangent is None
        assert fwAD.unpack_dual(w * 2).tangent is None          # reverse-mode only
        assert fwAD.unpack_dual(d.detach() * 2).tangent is None
        assert fwAD.unpack_dual(d > 1).tangent is None          # not floating point
        np.testing.assert_array_equal(fwAD.unpack_dual(d.sign()).tangent.numpy(), [0, 0])
        y = d * w
        assert fwAD.unpack_dual(y).tangent is not None
        p = fwAD.unpack_dual(y).primal
        # a primal carries no tangent, even though it is in w's graph
        assert fwAD.unpack_dual(p * 2).tangent is None
    assert fwAD.unpack_dual(y).tangent is None
    assert fwAD.unpack_dual(y).primal is y          # no level: as PyTorch, the tensor itself
    with fwAD.dual_level():                         # a later level does not see old tangents
        assert fwAD.unpack_dual(y).tangent is None
        assert fwAD.unpack_dual(d).tangent is None


def test_reverse_mode_through_duals():
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        x = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
        w = m.tensor([1.5, 2.0, -0.5], dtype=m.float64, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(x, m.tensor([1.0, 2.0, 3.0], dtype=m.float64))
            y = (d * w).sin()
            p, t = fw.unpack_dual(y)
            # the tangent is differentiable: d tangent / d w (forward-over-reverse);
            # tape's tangent graph runs through y's records: retain them (see
            # forward_ad's docstring)
            gw, = m.autograd.grad(t.sum(), w, retain_graph=True)
            (p.sum() + (d ** 2).sum()).backward()
        res.append((x.grad, w.grad, t, gw))
    for a, b in zip(*res):
        _close(a, b)


def test_tangent_that_requires_grad():
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        x = m.tensor([0.5, 2.0], dtype=m.float64)
        v = m.tensor([1.0, -1.0], dtype=m.float64, requires_grad=True)
        with fw.dual_level():
            p, t = fw.unpack_dual(fw.make_dual(x, v) ** 3)
            assert not p.requires_grad and t.requires_grad
            gv, = m.autograd.grad(t.sum(), v)
        res.append((t, gv))
    for a, b in zip(*res):
        _close(a, b)


def test_inplace_on_dual_updates_tangent():
    res = []
    for m, fw in ((tape, fwAD), (torch, tfwAD)):
        with fw.dual_level():
            d = fw.make_dual(m.tensor([1.0, 2.0], dtype=m.float64),
                             m.tensor([1.0, 1.0], dtype=m.float64))
            d.mul_(m.tensor([3.0, -2.0], dtype=m.float64))
            d.sin_()
            res.append(fw.unpack_dual(d).tangent)
    _close(*res)


def test_dual_level_as_decorator_and_functions():
    @fwAD.dual_level()
    def f(x):
        return fwAD.unpack_dual(fwAD.make_dual(x, tape.ones(1)).exp()).tangent
    np.testing.assert_allclose(f(tape.tensor([0.0])).numpy(), [1.0])
    assert fwAD.enter_dual_level() == 0
    d = fwAD.make_dual(tape.tensor([1.0]), tape.tensor([2.0]))
    fwAD.exit_dual_level()
    assert fwAD.unpack_dual(d).tangent is None


# ------------------------------------------------------------ errors
def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None


def test_errors_match_torch():
    cases = [
        lambda m, fw: fw.make_dual(m.ones(2), m.ones(2)),                   # no level
        lambda m, fw: fw.exit_dual_level(),                                 # no level
    ]
    inside = [
        lambda m, fw: fw.make_dual(m.ones(3), m.ones(4)),
        lambda m, fw: fw.make_dual(m.ones(2, 3), m.ones(3, 2)),
        lambda m, fw: fw.make_dual(m.ones(2), m.ones(2, dtype=m.int64)),
        lambda m, fw: fw.make_dual(m.ones(2, dtype=m.int64), m.ones(2)),
        lambda m, fw: fw.make_dual(m.ones(2), m.ones(2), level=1),
        lambda m, fw: fw.make_dual(m.ones(2), m.ones(2), level=-1),
        lambda m, fw: fw.make_dual(fw.make_dual(m.ones(2), m.ones(2)), m.ones(2)),
        lambda m, fw: fw.make_dual(fw.make_dual(m.ones(2), m.ones(2)) * 2, m.ones(2)),
        lambda m, fw: fw.unpack_dual(fw.make_dual(m.ones(2), m.ones(2)), level=3),
        lambda m, fw: fw.enter_dual_level(),                                 # nested
        lambda m, fw: fw.exit_dual_level(level=5),
    ]
    for case in cases:
        assert _err(lambda: case(tape, fwAD)) == _err(lambda: case(torch, tfwAD))
    for case in inside:
        got = []
        for m, fw in ((tape, fwAD), (torch, tfwAD)):
            with fw.dual_level():
                got.append(_err(lambda: case(m, fw)))
        assert got[0] is not None and got[0] == got[1], got
    # the failed nested entry left the level usable, and the state clean after
    assert fwAD._current_level == -1


def test_nested_level_context_raises_and_recovers():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match='Nested forward mode AD is not supported'):
            with fwAD.dual_level():
                pass
        d = fwAD.make_dual(tape.tensor([1.0]), tape.tensor([3.0]))
        np.testing.assert_allclose(fwAD.unpack_dual(d * 2).tangent.numpy(), [6.0])
