"""cat / stack as 'cat'-kind records (tape/_shapes.py): values, gradients, graph
nodes, create_graph and tape.jit against PyTorch."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _pair(shape, dtype=np.float64, rg=True):
    d = RNG.standard_normal(shape).astype(dtype)
    return (tape.tensor(d, requires_grad=rg), torch.tensor(d, requires_grad=rg))


def _check(fn, specs, dim, weights=True):
    """fn(lib, tensors, dim) on both libraries; values and input gradients agree."""
    pairs = [_pair(*s) for s in specs]
    ys = fn(tape, [p[0] for p in pairs], dim)
    yt = fn(torch, [p[1] for p in pairs], dim)
    assert ys.shape == tuple(yt.shape) and str(ys.dtype).split('.')[-1] == \
        str(yt.dtype).split('.')[-1]
    np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    w = RNG.standard_normal(tuple(yt.shape)) if weights else np.ones(tuple(yt.shape))
    (ys * tape.tensor(w, dtype=ys.dtype)).sum().backward()
    (yt * torch.tensor(w, dtype=yt.dtype)).sum().backward()
    for a, b in pairs:
        if b.grad is None:
            assert a.grad is None
            continue
        assert a.grad.dtype == getattr(tape, str(b.grad.dtype).split('.')[-1])
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-6)
    return ys


def _cat(L, xs, dim):
    return L.cat(xs, dim)


def _stack(L, xs, dim):
    return L.stack(xs, dim)


@pytest.mark.parametrize('k', [1, 2, 3, 5, 9])
@pytest.mark.parametrize('dim', [0, 1, 2, -1, -2, -3])
def test_cat_small_every_dim(k, dim):
    base = [3, 4, 2]
    specs = []
    for i in range(k):
        s = list(base)
        s[dim] = 1 + i % 3
        specs.append((tuple(s), np.float64, i % 3 != 1))
    _check(_cat, specs, dim)


@pytest.mark.parametrize('k', [2, 3, 5])
@pytest.mark.parametrize('dim', [0, 1, -1])
def test_cat_big(k, dim):
    # results of 16384 elements or more are large records (tape/_big.py)
    specs = []
    for i in range(k):
        s = [64, 128]
        s[dim] = 40 + 20 * i
        specs.append((tuple(s), np.float32 if i % 2 else np.float64, i != 1))
    _check(_cat, specs, dim)


def test_cat_pieces_small_result_big():
    # small inputs, a large result: the root record is big, its inputs small
    specs = [((8, 512), np.float32, True) for _ in range(5)]
    _check(_cat, specs, 0)


@pytest.mark.parametrize('dim', [0, 1, 2, -1, -3])
@pytest.mark.parametrize('k', [1, 2, 3, 5])
def test_stack(k, dim):
    specs = [((2, 3), np.float64, i != 1) for i in range(k)]
    _check(_stack, specs, dim)


def test_stack_big_and_scalars():
    _check(_stack, [((128, 64), np.float32, True)] * 3, 1)
    _check(_stack, [((), np.float64, True)] * 4, 0)


def test_mixed_dtypes_and_empty_1d():
    specs = [((2, 3), np.float32, True), ((2, 1), np.float64, True), ((2, 2), np.float32, False)]
    y = _check(_cat, specs, 1)
    assert y.dtype == tape.float64
    # 1-D empty tensors are skipped (PyTorch's legacy rule)
    a, at = _pair((2, 3))
    e = tape.zeros(0, dtype=tape.float64)
    et = torch.zeros(0, dtype=torch.float64)
    ys, yt = tape.cat([e, a, e], 0), torch.cat([et, at, et], 0)
    np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    ys.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), at.grad.numpy())


def test_integer_constant_and_no_grad():
    a, at = _pair((2, 2))
    ys = tape.cat([a, tape.tensor([[1, 2]])], 0)
    yt = torch.cat([at, torch.tensor([[1, 2]])], 0)
    assert ys.dtype == tape.float64
    np.testing.assert_array_equal(ys.detach().numpy(), yt.detach().numpy())
    with tape.no_grad():
        assert tape.cat([a, a]).grad_fn is None
    assert tape.cat([a.detach(), a.detach()]).grad_fn is None


def test_grad_fn_names_and_next_functions():
    a = tape.ones(2, 3, requires_grad=True)
    b = tape.ones(2, 3)
    c = tape.ones(2, 3, requires_grad=True) * 2
    for k in (1, 2, 3, 5, 9):
        xs = [(a, b, c)[i % 3] for i in range(k)]
        for fn, name in ((tape.cat, 'CatBackward0'), (tape.stack, 'StackBackward0')):
            y = fn(xs, 1)
            assert y.grad_fn.name() == name
            nf = y.grad_fn.next_functions
            assert len(nf) == k
            for x, (node, idx) in zip(xs, nf):
                if x is a:
                    assert node.name() == 'torch::autograd::AccumulateGrad' and node.variable is a
                elif x is b:
                    assert node is None
                else:
                    assert node.name() == 'MulBackward0'

    # calling the node gives each input its part (distinct inputs: the node call
    # keys gradients by slot, so a repeated input would get the sum of its parts)
    for k in (1, 2, 3, 5, 9):
        xs = [tape.ones(2, 3, requires_grad=True) if i % 3 != 1 else tape.ones(2, 3)
              for i in range(k)]
        for fn in (tape.cat, tape.stack):
            y = fn(xs, 1)
            g = np.arange(y.numel(), dtype=np.float32).reshape(y.shape)
            outs = y.grad_fn(tape.tensor(g))
            outs = outs if isinstance(outs, tuple) else (outs,)
            assert len(outs) == k
            for x, part, o in zip(xs, np.split(g, k, 1), outs):
                if not x.requires_grad:
                    assert o is None
                else:
                    np.testing.assert_array_equal(o.numpy().reshape(-1), part.reshape(-1))


def test_big_next_functions():
    a = tape.ones(200, 100, requires_grad=True)
    b = tape.ones(200, 100)
    y = tape.cat([a, b, a], 0)
    assert y.grad_fn.name() == 'CatBackward0'
    assert [n is None for n, _ in y.grad_fn.next_functions] == [False, True, False]


def test_errors_unchanged():
    with pytest.raises(RuntimeError, match='Sizes of tensors must match'):
        tape.cat([tape.ones(2, 3), tape.ones(3, 2)], 1)
    with pytest.raises(RuntimeError, match='zero-dimensional'):
        tape.cat([tape.tensor(1.0)])
    with pytest.raises(ValueError, match='non-empty'):
        tape.cat([])
    with pytest.raises(RuntimeError, match='stack expects each tensor to be equal size'):
        tape.stack([tape.ones(2), tape.ones(3)])
    with pytest.raises(TypeError):
        tape.cat(tape.ones(2))


def test_retain_graph_and_hooks():
    a = tape.ones(2, 2, requires_grad=True)
    b = tape.ones(2, 3, requires_grad=True)
    seen = []
    b.register_hook(lambda g: seen.append(g.shape))
    y = tape.cat([a, b, a], 1)
    y.register_hook(lambda g: g * 3)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 2), 12.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((2, 3), 6.0))
    assert seen == [(2, 3), (2, 3)]
    with pytest.raises(RuntimeError):
        y2 = tape.cat([a * 2, b.exp()], 1)
        y2.sum().backward()
        y2.sum().backward()


def test_inplace_after_cat_is_fine():
    # cat saves nothing: changing an input in place afterwards does not break backward
    a = tape.ones(2, 2, requires_grad=True)
    h = a * 1
    y = tape.cat([h, a], 0)
    h.add_(1)
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 2), 2.0))


@pytest.mark.parametrize('shape,k', [((2, 3), 2), ((2, 3), 5), ((3, 64, 64), 3)])
def test_create_graph_second_derivative(shape, k):
    pairs = [_pair(shape) for _ in range(k)]

    def f(L, xs):
        y = L.cat([x * x for x in xs] + [xs[0]], -1)
        return (y ** 3).sum()

    for lib, idx in ((tape, 0), (torch, 1)):
        xs = [p[idx] for p in pairs]
        gs = lib.autograd.grad(f(lib, xs), xs, create_graph=True)
        sum(g.sum() for g in gs).backward()
    for a, b in pairs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_create_graph_matches_compiled_sweep():
    a, _ = _pair((3, 4))
    b, _ = _pair((3, 2))
    c, _ = _pair((3, 1))
    y = (tape.stack([tape.cat([a, b, c], 1)] * 2, 0) ** 2).sum()
    g1 = tape.autograd.grad(y, (a, b, c), retain_graph=True)
    g2 = tape.autograd.grad(y, (a, b, c), create_graph=True)
    for x, z in zip(g1, g2):
        np.testing.assert_allclose(x.numpy(), z.detach().numpy(), rtol=1e-12)


def test_gradcheck_gradgradcheck():
    xs = [tape.tensor(RNG.standard_normal(s), requires_grad=True)
          for s in ((2, 3), (2, 1), (2, 2))]
    f = lambda a, b, c: tape.cat([a, b.sin(), c, a * b], 1) * tape.stack([a, a], 0).sum(0).sum()
    assert tape.autograd.gradcheck(f, xs)
    assert tape.autograd.gradgradcheck(f, xs)
    g = lambda a, b: tape.stack([a, a * 2, b.expand(2, 3)], -1)
    assert tape.autograd.gradcheck(g, xs[:2])
    assert tape.autograd.gradgradcheck(g, xs[:2])


def test_jit_replays_cat():
    def f(x, h):
        z = tape.cat([x, h, x * 2], 1)
        return (tape.stack([z, z.tanh()], 0) ** 2).sum()

    jf = tape.jit(f)
    for _ in range(3):
        x = tape.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
        h = tape.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        hr = h.detach().clone().requires_grad_()
        out = jf(x, h)
        ref = f(xr, hr)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
        out.backward()
        ref.backward()
        np.testing.assert_allclose(x.grad.numpy(), xr.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(h.grad.numpy(), hr.grad.numpy(), rtol=1e-12)


def test_replayable_says_constant_inputs_cannot_replay():
    from compiler.replaygen import replayable
    from tape._sweep import pack
    a = tape.ones(2, 2, requires_grad=True)
    y = tape.cat([a, tape.ones(2, 2)], 0)
    ok, why = replayable(pack(y._tape)[0][y._rec:y._rec + 1])
    assert not ok and 'constant' in why
    y = tape.cat([a, a * 2], 0)
    assert replayable(pack(y._tape)[0][y._rec:y._rec + 1]) == (True, '')
