"""The fast paths of ``loss.backward()``'s driver (tape/_sweep.py ``_run_scalar``,
``pack``, ``release``), against PyTorch: the attributes taken or joined without
``np.concatenate``, the inline delivery to a leaf whose ``_extra`` holds no
hooks, the large arena zeroed around ``y.backward(g)``'s seed, the all-reached
test by result slots, and the release of Python records."""
import numpy as np
import pytest

import tape
from tape import _sweep

torch = pytest.importorskip("torch")


def _pair(a, rg=True):
    return (tape.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg))


def _close(t, p, rtol=1e-5, atol=1e-6):
    assert t is not None and p is not None
    assert t.dtype == {torch.float32: tape.float32, torch.float64: tape.float64}[p.dtype]
    np.testing.assert_allclose(t.detach().numpy(), p.detach().numpy(), rtol=rtol, atol=atol)


def test_one_attribute_array_used_as_is():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 1)), rng.standard_normal((1, 4))
    (ta, pa), (tb, pb) = _pair(a), _pair(b)
    ((ta * tb) ** 2).sum().backward()
    ((pa * pb) ** 2).sum().backward()
    _close(ta.grad, pa.grad)
    _close(tb.grad, pb.grad)


def test_several_attribute_arrays_joined():
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 1)), rng.standard_normal((1, 6)), rng.standard_normal((3, 6))
    ts = [tape.tensor(x, requires_grad=True) for x in (a, b, c)]
    ps = [torch.tensor(x, requires_grad=True) for x in (a, b, c)]
    for lib, (x, y, z) in ((tape, ts), (torch, ps)):
        w = x + y                       # broadcasts: index maps in the attributes
        v = (w * y).t() + z.t()         # a transpose: one more
        (lib.tanh(v) * x.t()).sum().backward()
    for t, p in zip(ts, ps):
        _close(t.grad, p.grad)


def test_attributes_unchanged_by_backward():
    x = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    b = tape.tensor(np.ones((1, 3)), requires_grad=True)
    y = (x + b).t()
    loss = (y * y).sum()
    before = [a.copy() for a in loss._tape.attrs]
    loss.backward(retain_graph=True)
    loss.backward()
    for a, c in zip(loss._tape.attrs, before):
        np.testing.assert_array_equal(a, c)
    np.testing.assert_allclose(b.grad.numpy(), 2 * 2 * (np.arange(6.0).reshape(2, 3) + 1).sum(
        0, keepdims=True))


def _mlp_pair():
    torch.manual_seed(0)
    pm = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    tm = tape.nn.Sequential(tape.nn.Linear(20, 64), tape.nn.ReLU(), tape.nn.Linear(64, 3))
    for tp, pp in zip(tm.parameters(), pm.parameters()):
        tp.data = tape.tensor(pp.detach().numpy().copy())
    return tm, pm


def test_linear_weights_get_grads_inline_and_accumulate():
    tm, pm = _mlp_pair()
    rng = np.random.default_rng(2)
    X = rng.standard_normal((32, 20)).astype(np.float32)
    Y = rng.integers(0, 3, 32)
    for _ in range(3):          # .grad accumulates across backwards
        tape.nn.functional.cross_entropy(tm(tape.tensor(X)), tape.tensor(Y)).backward()
        torch.nn.functional.cross_entropy(pm(torch.tensor(X)), torch.tensor(Y)).backward()
    for tp, pp in zip(tm.parameters(), pm.parameters()):
        _close(tp.grad, pp.grad, rtol=1e-4, atol=1e-5)


def test_linear_weight_hooks_still_run():
    tm, pm = _mlp_pair()
    X = np.random.default_rng(3).standard_normal((4, 20)).astype(np.float32)
    seen, post = [], []
    for m, lib in ((tm, tape), (pm, torch)):
        w = m[0].weight
        w.register_hook(lambda g: g * 2)
        w.register_post_accumulate_grad_hook(lambda p: post.append(p.grad.sum().item()))
        m[2].weight.register_hook(lambda g: seen.append(tuple(g.shape)))
        (m(lib.tensor(X)) ** 2).sum().backward()
    assert seen == [(3, 64), (3, 64)]
    assert len(post) == 2
    np.testing.assert_allclose(post[0], post[1], rtol=1e-4)
    for tp, pp in zip(tm.parameters(), pm.parameters()):
        _close(tp.grad, pp.grad, rtol=1e-4, atol=1e-5)


def test_linear_weight_grad_read_only_or_strided():
    tm, pm = _mlp_pair()
    X = np.random.default_rng(4).standard_normal((4, 20)).astype(np.float32)
    for m, lib in ((tm, tape), (pm, torch)):
        (m(lib.tensor(X)) ** 2).sum().backward()
    g = tm[0].weight.grad.numpy().copy(order='F')      # a non-contiguous .grad
    tm[0].weight.grad = tape.tensor(g)
    tm[2].weight.grad.data = tape.tensor(tm[2].weight.grad.numpy().copy())
    for m, lib in ((tm, tape), (pm, torch)):
        (m(lib.tensor(X)) ** 2).sum().backward()
    for tp, pp in zip(tm.parameters(), pm.parameters()):
        _close(tp.grad, pp.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('where', ['first', 'middle', 'last'])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_seed_in_a_large_arena(where, dtype):
    """y.backward(g) with an arena past ZERO_SPLIT: zeroed around the seed."""
    n = 1500
    assert 2 * n < _sweep.ZERO_SPLIT <= 4 * n
    rng = np.random.default_rng(5)
    a = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    for lib in (tape, torch):
        x = lib.tensor(a, requires_grad=True)
        z = lib.tensor(a[::-1].copy(), requires_grad=True)
        if where == 'first':
            y = lib.sigmoid(x)          # seed right after the first leaf; z's slot after it
            x2 = x * z
            y.backward(lib.tensor(g))
            unused = x2
        elif where == 'middle':
            u = lib.tanh(x)
            y = u * z
            unused = lib.exp(y)
            y.backward(lib.tensor(g))
        else:
            u = lib.tanh(x) * z
            y = lib.sin(u)
            unused = None
            y.backward(lib.tensor(g))
        if lib is tape:
            assert y._tape.gpos >= _sweep.ZERO_SPLIT
            tx, tz = x.grad, z.grad
        else:
            px, pz = x.grad, z.grad
        del unused
    _close(tx, px, rtol=1e-4 if dtype == np.float32 else 1e-10)
    if pz is None:
        assert tz is None
    else:
        _close(tz, pz, rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_partly_reached_large_tape_then_the_rest():
    """Two losses on one tape with a large arena: the first backward reaches
    only its records (not all of them), the second sweeps the others; a third
    through the first raises."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal(3000)
    x = tape.tensor(a, requires_grad=True)
    px = torch.tensor(a, requires_grad=True)
    l1 = (tape.tanh(x) * 3).sum()
    l2 = (tape.sin(x) ** 2).sum()
    assert l1._tape is l2._tape and l1._tape.gpos > 2048
    p1 = (torch.tanh(px) * 3).sum()
    p2 = (torch.sin(px) ** 2).sum()
    l1.backward()
    p1.backward()
    _close(x.grad, px.grad)
    l2.backward()
    p2.backward()
    _close(x.grad, px.grad)
    with pytest.raises(RuntimeError, match='second time'):
        l1.backward()
    with pytest.raises(RuntimeError, match='second time'):
        p1.backward()


class _Square(tape.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


class _TSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


@pytest.mark.parametrize('size', [4, 3000])
def test_custom_function_saved_tensors_freed(size):
    a = np.linspace(-1, 1, size)
    for lib, F in ((tape, _Square), (torch, _TSquare)):
        x = lib.tensor(a, requires_grad=True)
        y = F.apply(x * 2)
        loss = (y * 3).sum()
        loss.backward()
        with pytest.raises(RuntimeError):
            loss.backward()
        if lib is tape:
            tg = x.grad
        else:
            _close(tg, x.grad)


def test_custom_function_off_the_swept_path_survives():
    """A Python record the sweep did not reach keeps its saved tensors."""
    a = np.linspace(-1, 1, 3000)
    for lib, F in ((tape, _Square), (torch, _TSquare)):
        x = lib.tensor(a, requires_grad=True)
        other = F.apply(x).sum()            # not part of the first loss's graph
        (x * 2).sum().backward()
        other.backward()
        if lib is tape:
            tg = x.grad
        else:
            _close(tg, x.grad)


def test_float32_grads_from_float32_model():
    x = tape.tensor(np.ones((8, 1), np.float32))
    w = tape.tensor(np.full((1, 1), 0.5, np.float32), requires_grad=True)
    b = tape.tensor(np.zeros((1, 1), np.float32), requires_grad=True)
    y = x * 2
    for _ in range(2):
        (0.5 * (x.mm(w) + b.expand_as(y) - y) ** 2).sum().backward()
    assert w.grad.dtype == tape.float32 and b.grad.dtype == tape.float32
    assert w.grad.shape == (1, 1) and b.grad.shape == (1, 1)
    np.testing.assert_allclose(w.grad.numpy(), [[2 * 8 * (0.5 - 2)]])
    np.testing.assert_allclose(b.grad.numpy(), [[2 * 8 * (0.5 - 2)]])


def test_zero_dim_and_one_dim_leaves():
    for lib in (tape, torch):
        s = lib.tensor(1.5, requires_grad=True)
        v = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (s * v * v).sum().backward()
        if lib is tape:
            ts, tv = s.grad, v.grad
        else:
            _close(ts, s.grad)
            _close(tv, v.grad)
            assert ts.shape == () and tv.shape == (3,)
