"""Module hooks (full backward hooks and pre-hooks, the deprecated backward hook,
forward hooks' options, global hooks, state-dict hooks), checked against torch:
the same model in both, the same hooks, and what the hooks see compared."""
import warnings

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

LIBS = (torch, tape)


def _np(t):
    return None if t is None else np.asarray(t.detach().numpy(), dtype=np.float64)


def _same(a, b, tol=1e-5):
    """Nested tuples/lists of tensors (or None, or plain values) equal."""
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y, tol)
    elif a is None or b is None:
        assert a is None and b is None, (a, b)
    elif hasattr(a, 'detach'):
        assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)
    else:
        assert a == b, (a, b)


def _copy(src, dst):
    dst.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


def _pair(make):
    """The torch and tape forms of one model, with the same values."""
    t, m = make(torch), make(tape)
    _copy(t, m)
    return t, m


def _data(lib, *shape, seed=0, rg=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return lib.tensor(a.astype(np.float32), requires_grad=rg)


def _recorder(log, name):
    def full(module, grad_input, grad_output):
        log.append((name, 'full', tuple(grad_input), tuple(grad_output)))

    def pre(module, grad_output):
        log.append((name, 'pre', tuple(grad_output)))
    return full, pre


def _compare_logs(lt, lm):
    assert len(lt) == len(lm), ([e[:2] for e in lt], [e[:2] for e in lm])
    for et, em in zip(lt, lm):
        assert et[:2] == em[:2], (et[:2], em[:2])
        _same(et[2:], em[2:])


# -- full backward hooks -------------------------------------------------------------
def test_linear_full_backward_hook_sees_torch_gradients():
    models = _pair(lambda lib: lib.nn.Linear(4, 3))
    logs, grads = [], []
    for lib, m in zip(LIBS, models):
        log = []
        full, pre = _recorder(log, 'lin')
        m.register_full_backward_hook(full)
        m.register_full_backward_pre_hook(pre)
        x = _data(lib, 2, 4)
        y = m(x)
        assert y.grad_fn.name() == 'BackwardHookFunctionBackward'
        (y * y).sum().backward()
        logs.append(log)
        grads.append((x.grad, m.weight.grad, m.bias.grad))
    assert [e[:2] for e in logs[1]] == [('lin', 'pre'), ('lin', 'full')]
    _compare_logs(*logs)
    _same(*grads)


def test_sequential_hook_order_and_counts():
    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.Tanh(), lib.nn.Linear(5, 2))
    models = _pair(make)
    logs, grads = [], []
    for lib, seq in zip(LIBS, models):
        log = []
        for name, m in [('seq', seq)] + [(str(i), c) for i, c in enumerate(seq)]:
            full, pre = _recorder(log, name)
            m.register_full_backward_hook(full)
            m.register_full_backward_pre_hook(pre)
        x = _data(lib, 4, 3)
        seq(x).pow(2).sum().backward()
        logs.append(log)
        grads.append([p.grad for p in seq.parameters()] + [x.grad])
    order = [e[:2] for e in logs[1]]
    assert order == [('seq', 'pre'), ('2', 'pre'), ('2', 'full'), ('1', 'pre'), ('1', 'full'),
                     ('0', 'pre'), ('0', 'full'), ('seq', 'full')]
    _compare_logs(*logs)
    _same(*grads)


class _TwoInTwoOut:
    """forward(a, k, b) -> (a * b * k, a + b): a non-tensor argument in the middle."""
    @staticmethod
    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(lib.tensor([0.5, -1.0, 2.0]))

            def forward(self, a, k, b):
                return a * b * k * self.w, a + b
        return M()


@pytest.mark.parametrize('b_requires_grad', [True, False])
@pytest.mark.parametrize('use_second', [True, False])
def test_two_inputs_two_outputs_non_tensor_argument(b_requires_grad, use_second):
    models = _pair(_TwoInTwoOut.make)
    logs, grads = [], []
    for lib, m in zip(LIBS, models):
        log = []
        full, pre = _recorder(log, 'm')
        m.register_full_backward_hook(full)
        m.register_full_backward_pre_hook(pre)
        a = _data(lib, 3, seed=1)
        b = _data(lib, 3, seed=2, rg=b_requires_grad)
        o1, o2 = m(a, 3.0, b)
        loss = (o1 * o1).sum() + (o2.sum() if use_second else 0)
        loss.backward()
        logs.append(log)
        grads.append((a.grad, b.grad, m.w.grad))
    gi, go = logs[1][1][2], logs[1][1][3]
    assert gi[1] is None                             # the non-tensor argument
    assert (go[1] is None) == (not use_second)       # an output that got no gradient
    _compare_logs(*logs)
    _same(*grads)


def test_input_without_grad_runs_hooks_at_the_outputs_with_a_warning():
    models = _pair(lambda lib: lib.nn.Linear(3, 2))
    logs, grads = [], []
    for lib, m in zip(LIBS, models):
        log = []
        full, _ = _recorder(log, 'lin')
        m.register_full_backward_hook(full)
        with pytest.warns(UserWarning, match='Full backward hook is firing when gradients are '
                                             'computed with respect to module outputs'):
            m(_data(lib, 2, 3, rg=False)).sum().backward()
        logs.append(log)
        grads.append(m.weight.grad)
        assert log[0][2] == (None,)
        # such a hook may only return None (or all None)
        m.register_full_backward_hook(lambda mod, gi, go: (lib.ones(2, 3),))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            with pytest.raises(RuntimeError, match='no input requires gradient should always '
                                                   'return None'):
                m(_data(lib, 2, 3, rg=False)).sum().backward()
    _compare_logs(*logs)
    _same(*grads)


def test_hooks_returning_replacements():
    models = _pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)))
    grads = []
    for lib, seq in zip(LIBS, models):
        # the pre-hook doubles grad_output of the last layer (its weight grad sees it);
        # the full hook of the first layer zeroes one column of its grad_input
        seq[1].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))

        def zero_col(m, gi, go):
            g = gi[0].clone()
            g[:, 1] = 0
            return (g,)
        seq[0].register_full_backward_hook(zero_col)
        x = _data(lib, 5, 3)
        seq(x).pow(2).sum().backward()
        assert np.all(_np(x.grad)[:, 1] == 0)
        grads.append([p.grad for p in seq.parameters()] + [x.grad])
    _same(*grads)
    # and the result differs from the run without hooks
    plain = _pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)))[1]
    plain.load_state_dict(models[1].state_dict())
    x = _data(tape, 5, 3)
    plain(x).pow(2).sum().backward()
    assert not np.allclose(_np(plain[1].weight.grad), _np(models[1][1].weight.grad))


def test_wrong_number_of_replacements_raises():
    for lib in LIBS:
        m = lib.nn.Linear(3, 2)
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError, match='Backward hook returned an invalid number of '
                                               'grad_input, got 2, but expected 1'):
            m(_data(lib, 2, 3)).sum().backward()
        m2 = lib.nn.Linear(3, 2)
        m2.register_full_backward_pre_hook(lambda mod, go: ())
        with pytest.raises(RuntimeError, match='Backward pre hook returned an invalid number of '
                                               'grad_output, got 0, but expected 1'):
            m2(_data(lib, 2, 3)).sum().backward()


def test_removal_and_prepend_order():
    for lib in LIBS:
        log = []
        m = lib.nn.Linear(3, 2)
        h1 = m.register_full_backward_hook(lambda *a: log.append('a'))
        m.register_full_backward_hook(lambda *a: log.append('b'))
        m.register_full_backward_hook(lambda *a: log.append('c'), prepend=True)
        hp = m.register_full_backward_pre_hook(lambda *a: log.append('pre1'))
        m.register_full_backward_pre_hook(lambda *a: log.append('pre0'), prepend=True)
        x = _data(lib, 2, 3)
        m(x).sum().backward()
        assert log == ['pre0', 'pre1', 'c', 'a', 'b'], lib
        h1.remove()
        hp.remove()
        log.clear()
        m(x).sum().backward()
        assert log == ['pre0', 'c', 'b'], lib
        with pytest.raises(RuntimeError, match='Cannot use both regular backward hooks and full '
                                               'backward hooks on a single Module'):
            m.register_backward_hook(lambda *a: None)


def test_retain_graph_two_backwards_fire_twice():
    models = _pair(lambda lib: lib.nn.Linear(3, 3))
    logs, grads = [], []
    for lib, m in zip(LIBS, models):
        log = []
        full, pre = _recorder(log, 'lin')
        m.register_full_backward_hook(full)
        m.register_full_backward_pre_hook(pre)
        x = _data(lib, 2, 3)
        y = m(x)
        loss = (y * y).sum()
        loss.backward(retain_graph=True)
        (y * 3).sum().backward()
        logs.append(log)
        grads.append((x.grad, m.weight.grad))
    assert [e[1] for e in logs[1]] == ['pre', 'full', 'pre', 'full']
    _compare_logs(*logs)
    _same(*grads)


def test_autograd_grad_and_create_graph():
    models = _pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh()))
    logs, results = [], []
    for lib, m in zip(LIBS, models):
        log = []
        full, pre = _recorder(log, 'tanh')
        m[1].register_full_backward_hook(full)
        m[1].register_full_backward_pre_hook(pre)
        seen = []
        m[1].register_full_backward_hook(lambda mod, gi, go: seen.append(gi[0].requires_grad))
        x = _data(lib, 2, 3)
        y = m(x).pow(2).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        assert seen == [True]             # the hook saw graph tensors
        gg, = lib.autograd.grad(g.pow(2).sum(), x)
        # the double backward passes the hooked nodes again (torch: 4 calls in all)
        assert [e[1] for e in log] == ['pre', 'full', 'pre', 'full'], lib
        g2, = lib.autograd.grad(m(x).sum(), x)
        logs.append(log)
        results.append((g, gg, g2))
    _compare_logs(*logs)
    _same(*results)


# -- errors and warnings ------------------------------------------------------------
def test_inplace_on_input_or_output_raises():
    for lib in LIBS:
        m = lib.nn.ReLU(inplace=True)
        m.register_full_backward_hook(lambda *a: None)
        x = _data(lib, 3)
        with pytest.raises(RuntimeError, match='Output 0 of BackwardHookFunction is a view and '
                                               'is being modified inplace'):
            m(x * 1)
        lin = lib.nn.Linear(3, 3)
        lin.register_full_backward_hook(lambda *a: None)
        # torch raises at add_, tape when the backward reaches the changed output
        with pytest.raises(RuntimeError, match='Output 0 of BackwardHookFunction is a view'):
            y = lin(x)
            y.add_(1)
            y.sum().backward()


def test_module_without_tensor_output_warns_and_skips_hooks():
    for lib in LIBS:
        class NoOut(lib.nn.Module):
            def forward(self, x):
                return None

        class ListOut(lib.nn.Module):
            def forward(self, x):
                return [x * 2]
        calls = []
        x = _data(lib, 3)
        for cls, kind in ((NoOut, 'NoneType'), (ListOut, 'list')):
            m = cls()
            m.register_full_backward_hook(lambda *a: calls.append(1))
            with pytest.warns(UserWarning, match='For backward hooks to be called, module output '
                                                 f"should be a Tensor or a tuple of Tensors but "
                                                 f"received <class '{kind}'>"):
                out = m(x)
            if out is not None:
                out[0].sum().backward()
        assert calls == []


# -- the deprecated backward hook ------------------------------------------------------
def test_deprecated_backward_hook_on_a_single_node_module():
    class Scale:
        @staticmethod
        def make(lib):
            class M(lib.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = lib.nn.Parameter(lib.tensor([1.5, -2.0, 0.5]))

                def forward(self, x):
                    return x * self.w
            return M()
    models = _pair(Scale.make)
    logs, warned = [], []
    for lib, m in zip(LIBS, models):
        log = []
        m.register_backward_hook(lambda mod, gi, go: log.append((mod, tuple(gi), tuple(go))))
        x = _data(lib, 3)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            y = m(x)
        # torch compares the inputs' grad_fns with the node's next functions
        warned.append([str(e.message) for e in w if issubclass(e.category, FutureWarning)])
        (y * y).sum().backward()
        assert log[0][0] is m
        logs.append([e[1:] for e in log])
        with pytest.raises(RuntimeError, match='Cannot use both regular backward hooks and full '
                                               'backward hooks on a single Module'):
            m.register_full_backward_hook(lambda *a: None)
    assert warned[0] == warned[1] and 'multiple autograd Nodes' in warned[1][0]
    _same(*logs)


def test_deprecated_backward_hook_warns_for_nested_output():
    for lib in LIBS:
        class Nested(lib.nn.Module):
            def forward(self, x):
                return [x * 2]
        m = Nested()
        m.register_backward_hook(lambda *a: None)
        with pytest.warns(FutureWarning, match='Using non-full backward hooks on a Module that '
                                               'does not return a single Tensor'):
            m(_data(lib, 3))


# -- forward hooks ----------------------------------------------------------------------
def test_forward_pre_hooks_with_kwargs_and_prepend():
    def make(lib):
        class M(lib.nn.Module):
            def forward(self, x, scale=1.0):
                return x * scale
        return M()
    outs, logs = [], []
    for lib in LIBS:
        m = make(lib)
        log = []

        def kw_hook(mod, args, kwargs):
            log.append(('kw', sorted(kwargs)))
            return args, {'scale': kwargs.get('scale', 1.0) * 10}
        m.register_forward_pre_hook(kw_hook, with_kwargs=True)
        m.register_forward_pre_hook(lambda mod, args: log.append('first') or (args[0] + 1),
                                    prepend=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: log.append(('fk', kwargs)),
                                with_kwargs=True)
        m.register_forward_hook(lambda mod, args, out: log.append('post0') or out * 2,
                                prepend=True)
        x = _data(lib, 3)
        outs.append(m(x, scale=2.0))
        logs.append(log)
    assert logs[0] == logs[1] == ['first', ('kw', ['scale']), 'post0', ('fk', {'scale': 20.0})]
    _same(*outs)


def test_global_module_hooks():
    from tape.nn.modules import module as tape_module
    torch_module = torch.nn.modules.module
    models = _pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.ReLU()))
    logs = []
    for mod, (lib, seq) in zip((torch_module, tape_module), zip(LIBS, models)):
        log = []
        names = {id(m): n for n, m in seq.named_modules()}
        handles = [
            mod.register_module_forward_pre_hook(lambda m, a: log.append(('fpre', names[id(m)]))),
            mod.register_module_forward_hook(lambda m, a, o: log.append(('fwd', names[id(m)]))),
            mod.register_module_full_backward_pre_hook(
                lambda m, go: log.append(('bpre', names[id(m)], go))),
            mod.register_module_full_backward_hook(
                lambda m, gi, go: log.append(('bwd', names[id(m)], gi, go))),
        ]
        try:
            x = _data(lib, 2, 3)
            seq(x).sum().backward()
        finally:
            for h in handles:
                h.remove()
        seq(x).sum().backward()         # no longer hooked
        logs.append(log)
    assert [e[:2] for e in logs[0]] == [e[:2] for e in logs[1]]
    for et, em in zip(*logs):
        _same(et[2:], em[2:])


# -- state dict hooks ----------------------------------------------------------------------
def test_state_dict_hooks():
    for lib in LIBS:
        m = lib.nn.Linear(2, 2)
        log = []
        m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(('pre', prefix)))
        m._register_state_dict_hook(
            lambda mod, sd, prefix, meta: log.append(('post', list(sd))))
        sd = m.state_dict()
        assert log == [('pre', ''), ('post', ['weight', 'bias'])]

        def drop_unexpected(mod, keys):
            keys.unexpected_keys.clear()
        m.register_load_state_dict_post_hook(drop_unexpected)
        sd['extra'] = sd['bias']
        m.load_state_dict(sd)               # strict, but the hook cleared the unexpected key
