"""tape.compile: torch.compile's interface, running eagerly (tape/_compile.py)."""
import numpy as np
import pytest

import tape


def test_compiled_module_matches_torch_structure():
    torch = pytest.importorskip('torch')
    m, tm = tape.nn.Linear(2, 3), torch.nn.Linear(2, 3)
    c, tc = tape.compile(m), torch.compile(tm)     # (torch compiles on its first call only)
    assert type(c).__name__ == type(tc).__name__ == 'OptimizedModule'
    assert list(c.state_dict()) == list(tc.state_dict())
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in tc.named_parameters()]
    assert repr(c) == repr(tc)
    assert c._orig_mod is m and c.weight is m.weight and c.in_features == 2
    assert isinstance(c, tape.nn.Module) and isinstance(c, tape._compile.OptimizedModule)


def test_compiled_module_trains_like_the_module():
    tape.manual_seed(0)
    m = tape.nn.Sequential(tape.nn.Linear(3, 4), tape.nn.Tanh(), tape.nn.Linear(4, 1))
    c = tape.compile(m)
    x = tape.randn(5, 3)
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    opt = tape.optim.SGD(c.parameters(), lr=0.1)
    before = m[0].weight.detach().numpy().copy()
    c(x).sum().backward()
    opt.step()
    assert not np.allclose(before, m[0].weight.detach().numpy())    # the module's own weights


def test_compile_functions_and_decorators():
    def f(x, k=2):
        return x * k
    g = tape.compile(f)
    assert g.__wrapped__ is f and g.__name__ == 'f'
    assert g(tape.ones(2), k=3).tolist() == [3.0, 3.0]

    @tape.compile
    def h(x):
        return x + 1

    @tape.compile(mode='reduce-overhead', fullgraph=True, dynamic=False)
    def k(x):
        # data-dependent Python control flow runs as written (no trace is fixed)
        return x * 2 if x.sum().item() > 0 else x * -1
    assert h(tape.zeros(1)).tolist() == [1.0]
    assert k(tape.ones(1)).tolist() == [2.0] and k(-tape.ones(1)).tolist() == [1.0]
    assert tape.nn.Linear(1, 1).compile(backend='eager') is None


def test_compile_argument_errors_like_torch():
    torch = pytest.importorskip('torch')
    for lib in (tape, torch):
        with pytest.raises(RuntimeError, match='Unrecognized mode'):
            lib.compile(lambda x: x, mode='fastest')
        with pytest.raises(RuntimeError, match='Either mode or options'):
            lib.compile(lambda x: x, mode='default', options={'a': 1})


def test_torchscript_names_run_eagerly_like_torch_in_eager_code():
    torch = pytest.importorskip('torch')

    class Net:
        pass
    for lib in (tape, torch):
        J = lib.jit
        assert J.is_scripting() is False and J.is_tracing() is False
        assert J.annotate(int, 3) == 3

        @J.ignore
        def f(x):
            return x + 1

        @J.ignore(drop=True)
        def g(x):
            return x + 2

        @J.unused
        def h(x):
            return x + 3
        assert (f(1), g(1), h(1)) == (2, 3, 4)
    m = tape.nn.Linear(2, 1)
    x = tape.ones(3, 2)
    assert tape.jit.script(m) is m and tape.jit.trace(m, x) is m
    assert tape.jit.trace_module(m, {'forward': x}) is m

    def branchy(t):             # a trace would fix the branch; eager code keeps it
        return t * 2 if t.sum().item() > 0 else t * -3
    traced = tape.jit.trace(branchy, (tape.ones(2),))
    assert traced(-tape.ones(2)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match='trace'):
        tape.jit.trace(Net(), x)
    # tape's own jit still traces and replays
    @tape.jit
    def loss(w):
        return (w * 2).sum()
    w = tape.ones(2, requires_grad=True)
    loss(w).backward()
    loss(w).backward()
    assert loss.stats()['replays'] == 1 and w.grad.tolist() == [4.0, 4.0]
