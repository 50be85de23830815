"""The large-tensor path (tape/_big.py): records over tensors of BIG or more
elements are swept in NumPy / chunked Numba kernels instead of the arenas.

Each case runs at a size above the threshold and is compared with the same
graph at a small size semantics-wise (values against PyTorch when installed,
and always against the float64 small path by splitting the input)."""
import numpy as np
import pytest

import tape
from compiler import fuse
from tape._big import BIG, CHUNK

rng = np.random.default_rng(7)
ROWS = BIG // 64 + 38          # ROWS x 100 elements is above BIG, not a multiple of CHUNK


@pytest.fixture(autouse=True, params=['chunked', 'fused'])
def run_kernels(request, monkeypatch):
    """Every test runs twice: runs of big elementwise records swept chunk by
    chunk, and by fused kernels compiled on first sight (compiler/fuse.py)."""
    monkeypatch.setattr(fuse, 'FUSE_AFTER', None if request.param == 'chunked' else 1)
    return request.param


def setitem_case(m, x):
    y = x * 2
    y[::2] = 0.0
    return (y * x).sum()


CASES = [
    ('chain', lambda m, x: (x ** 2 * m.exp(x)).sum(), [(ROWS, 100)]),
    ('chain_mean', lambda m, x: (m.tanh(x) * m.sigmoid(x) - x / 3).mean(), [(ROWS, 100)]),
    ('broadcast', lambda m, x, b: m.tanh(x * b + b).sum(), [(ROWS, 100), (100,)]),
    ('mm', lambda m, x, w: m.tanh(x.mm(w)).sum(), [(ROWS, 60), (60, 30)]),
    ('sum_dim', lambda m, x: (x.sum(1) ** 2).sum() + x.mean(0).sum(), [(ROWS, 100)]),
    ('slice', lambda m, x: (x[::2, 1:] * x[1::2, :-1]).sum(), [(ROWS, 100)]),
    ('expand', lambda m, x: (x.expand(ROWS, 100) * 2).pow(2).sum(), [(1, 100)]),
    ('where', lambda m, x, y: (m.where(x > 0, x, y) ** 2).sum(), [(ROWS, 100), (ROWS, 100)]),
    ('cumsum', lambda m, x: (x.cumsum(1) ** 2).sum(), [(ROWS, 100)]),
    ('bmm', lambda m, x, y: m.bmm(x, y).pow(2).sum(), [(8, ROWS // 4, 30), (8, 30, 20)]),
    ('setitem', setitem_case, [(ROWS, 100)]),
    ('reused', lambda m, x: ((x * x).sum() + (x * 3).exp().mean()), [(ROWS, 100)]),
]


def _inputs(shapes, dtype=np.float64):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize('name,fn,shapes', CASES, ids=[c[0] for c in CASES])
def test_big_matches_torch(name, fn, shapes):
    torch = pytest.importorskip('torch')
    arrs = _inputs(shapes)
    xs = [tape.tensor(a, requires_grad=True) for a in arrs]
    ys = [torch.tensor(a, requires_grad=True) for a in arrs]
    out, tout = fn(tape, *xs), fn(torch, *ys)
    assert max(x._data.size for x in xs) >= BIG or name == 'expand'
    # PyTorch's float64 exp on large tensors is off by up to ~3e-9 relative in
    # some runs (its threaded vector path); tape's agrees with NumPy exactly
    np.testing.assert_allclose(out.item(), tout.item(), rtol=1e-8)
    out.backward()
    tout.backward()
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize('name,fn,shapes', CASES[:6], ids=[c[0] for c in CASES[:6]])
def test_big_compiled_equals_create_graph(name, fn, shapes):
    arrs = _inputs(shapes)
    xs = [tape.tensor(a, requires_grad=True) for a in arrs]
    g_fast = tape.autograd.grad(fn(tape, *xs), xs)
    g_diff = tape.autograd.grad(fn(tape, *xs), xs, create_graph=True)
    for a, b in zip(g_fast, g_diff):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_big_float32_gradients_stay_float32():
    x = tape.tensor(_inputs([(ROWS, 100)], np.float32)[0], requires_grad=True)
    w = tape.tensor(_inputs([(100, 50)], np.float32)[0], requires_grad=True)
    tape.tanh(x.mm(w)).sum().backward()
    assert x.grad.dtype == tape.float32 and w.grad.dtype == tape.float32
    ref_x = tape.tensor(x.detach().numpy().astype(np.float64), requires_grad=True)
    ref_w = tape.tensor(w.detach().numpy().astype(np.float64), requires_grad=True)
    tape.tanh(ref_x.mm(ref_w)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), ref_w.grad.numpy(), rtol=2e-3, atol=2e-3)


def test_chain_spans_several_chunks_and_matches_small_pieces():
    # the fused chunked run must give what the small (arena) path gives piecewise
    n = 3 * CHUNK + 5
    a = rng.standard_normal(n)
    x = tape.tensor(a, requires_grad=True)
    (x ** 2 * tape.exp(x) - tape.sin(x)).sum().backward()
    pieces = []
    for lo in range(0, n, 4000):
        p = tape.tensor(a[lo:lo + 4000], requires_grad=True)
        (p ** 2 * tape.exp(p) - tape.sin(p)).sum().backward()
        pieces.append(p.grad.numpy())
    np.testing.assert_allclose(x.grad.numpy(), np.concatenate(pieces), rtol=1e-12, atol=1e-12)


def test_big_graph_second_backward_raises_and_retain_works():
    x = tape.tensor(_inputs([(ROWS, 100)])[0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy())
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y.backward()


def test_hook_on_big_intermediate_sees_and_replaces_gradient():
    x = tape.tensor(_inputs([(ROWS, 100)])[0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 0 + 1)
    (y * y).sum().backward()
    np.testing.assert_allclose(seen[0], 2 * y.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 2.0))


def test_two_full_sums_of_one_big_tensor():
    # both sums hand a broadcast (read-only, zero-stride) gradient to the same slot
    x = tape.tensor(_inputs([(ROWS, 100)])[0], requires_grad=True)
    y = x * 3
    (y.sum() + 2 * y.sum() + y.mean()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(x.shape, 3 * (3 + 1 / x.numel())))


@pytest.mark.parametrize('size', [10, BIG + 5])
def test_leaf_in_merged_subgraphs_collects_one_gradient(size):
    # x**2 and exp(x) start separate tapes that merge at the product: x keeps
    # one slot, so its hook runs once with the whole gradient
    xd = np.linspace(-1, 1, size)
    x = tape.tensor(xd, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = (x ** 2 * tape.exp(x)).sum() + (x * 3).sum()
    leaves = [t for t, _ in y._tape.leaves]
    assert sum(t is x for t in leaves) == 1
    y.backward()
    want = 2 * xd * np.exp(xd) + xd ** 2 * np.exp(xd) + 3
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], want, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


_UNARY = {
    'exp': lambda m, x: (x * 0.1).exp(), 'tanh': lambda m, x: m.tanh(x),
    'sigmoid': lambda m, x: m.sigmoid(x), 'sin': lambda m, x: m.sin(x),
    'relu': lambda m, x: m.relu(x), 'neg': lambda m, x: -x, 'square': lambda m, x: x * x,
    'sum_broadcast': lambda m, x: x - x.mean(),
}
_BINARY = {
    'add': lambda m, x, y: x + y, 'sub': lambda m, x, y: x - y, 'mul': lambda m, x, y: x * y,
    'div': lambda m, x, y: x / (y * y + 1), 'maximum': lambda m, x, y: m.maximum(x, y),
}


@pytest.mark.parametrize('seed', range(12))
def test_random_programs_small_and_big_match_torch(seed):
    """Random elementwise programs over small and big tensors, plain and create_graph."""
    torch = pytest.importorskip('torch')
    import random
    r = random.Random(seed)
    n = r.choice([6, 300, BIG + 4000])
    shape = (n,) if r.random() < 0.5 else (n // 2, 2)
    arrs = [rng.standard_normal(shape) for _ in range(3)]
    prog = [(r.random() < 0.5, r.choice(list(_UNARY)), r.choice(list(_BINARY)),
             r.randrange(10), r.randrange(10)) for _ in range(8)]

    def run(m, ins):
        vals = list(ins)
        for unary, u, b, i, j in prog:
            if unary:
                vals.append(_UNARY[u](m, vals[i % len(vals)]))
            else:
                vals.append(_BINARY[b](m, vals[i % len(vals)], vals[j % len(vals)]))
        return sum(v.sum() for v in vals[3:]) + vals[-1].mean()

    xs = [tape.tensor(a, requires_grad=True) for a in arrs]
    ys = [torch.tensor(a, requires_grad=True) for a in arrs]
    create = seed % 3 == 0
    gs = tape.autograd.grad(run(tape, xs), xs, create_graph=create, allow_unused=True,
                            materialize_grads=True)
    tgs = torch.autograd.grad(run(torch, ys), ys, allow_unused=True, materialize_grads=True)
    for g, tg in zip(gs, tgs):
        np.testing.assert_allclose(g.detach().numpy(), tg.numpy(), rtol=1e-7, atol=1e-9)


def test_a_run_seen_again_is_fused_once_for_every_tape(run_kernels, monkeypatch, tmp_path):
    # FUSE_AFTER = 2: the first backward is chunked, the second fused; a third
    # graph on other slots reuses the kernel (its text names no slot or value)
    monkeypatch.setattr(fuse, 'FUSE_AFTER', 2)
    monkeypatch.setattr(fuse, '_seen', {})
    monkeypatch.setattr(fuse, '_loaded', {})
    monkeypatch.setattr(fuse, '_by_plan', {})
    monkeypatch.setattr(fuse, 'cache_dir', lambda: str(tmp_path))
    xd = rng.standard_normal(BIG + 77)
    grads = []
    for k in range(3):
        pad = tape.ones(k + 1, requires_grad=True) * 2          # shifts the slots
        x = tape.tensor(xd, requires_grad=True)
        y = (x ** 2 * tape.exp(x) * (k + 1.5)).sum() + pad.sum()
        y.backward()
        grads.append(x.grad.numpy() / (k + 1.5))
        assert len(fuse._loaded) == (0 if k == 0 else 1)
    want = (2 * xd + xd ** 2) * np.exp(xd)
    for g in grads:
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-14)


def test_fused_source_has_one_pass_and_no_values():
    x = tape.tensor(rng.standard_normal(BIG + 5), requires_grad=True)
    src = []
    real = fuse.kernel
    try:
        fuse.kernel = lambda run: src.append(fuse.source(run))
        (tape.tanh(x * 0.25) * 3.5).sum().backward()
    finally:
        fuse.kernel = real
    text = src[0]
    assert text.count('for i in range(n)') == 1
    assert '0.25' not in text and '3.5' not in text
    np.testing.assert_allclose(x.grad.numpy(), 3.5 * 0.25 / np.cosh(x.detach().numpy() * 0.25) ** 2,
                               rtol=1e-12)



# ------------------------------------------------ a lone big elementwise record
# (tape/_big.py _sweep_one: the record's kernel over whole arrays, in their dtype)

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name,fn', [
    ('sigmoid', lambda m, x: m.sigmoid(x)),
    ('square', lambda m, x: x * x),            # both inputs are one slot
    ('scalar', lambda m, x: x * 3.0 - 1.0),    # two records: not the lone path
    ('tanh', lambda m, x: m.tanh(x)),
])
def test_lone_record_matches_torch(name, fn, dtype):
    torch = pytest.importorskip('torch')
    a = rng.standard_normal((ROWS, 100)).astype(dtype)
    seed = rng.standard_normal((ROWS, 100)).astype(dtype)
    x, tx = tape.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for _ in range(2):                     # the second backward accumulates
        fn(tape, x).backward(tape.tensor(seed))
        fn(torch, tx).backward(torch.tensor(seed))
    assert x.grad.dtype == x.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


def test_lone_record_leaves_the_seed_alone():
    """The caller's gradient array is read, never written or kept."""
    a = rng.standard_normal((ROWS, 100))
    seed = rng.standard_normal((ROWS, 100))
    kept = seed.copy()
    x = tape.tensor(a, requires_grad=True)
    y = tape.sigmoid(x)
    g = tape.from_numpy(seed)              # shares the array's memory
    y.backward(g, retain_graph=True)
    y.backward(g)
    np.testing.assert_array_equal(seed, kept)
    s = 1 / (1 + np.exp(-a))
    np.testing.assert_allclose(x.grad.numpy(), 2 * seed * s * (1 - s), rtol=1e-12)
    # an identity record hands the seed itself on: the leaf's grad is a copy
    z = tape.tensor(a, requires_grad=True)
    z.view(-1).backward(tape.from_numpy(seed.reshape(-1)))
    seed[0, 0] = 123.0
    assert z.grad.numpy()[0, 0] == kept[0, 0]


def test_lone_record_after_a_hook_on_its_output():
    """A hook on the output replaces its gradient; the lone kernel reads the new one."""
    a = rng.standard_normal((ROWS, 100))
    x = tape.tensor(a, requires_grad=True)
    y = tape.tanh(x)
    y.register_hook(lambda g: g * 2)
    y.backward(tape.ones_like(y))
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(a) ** 2), rtol=1e-12)


@pytest.mark.parametrize('name,fn,shapes', CASES, ids=[c[0] for c in CASES])
def test_big_float32_matches_torch(name, fn, shapes):
    """Float32 large tensors keep float32 gradients, computed in float32 as
    PyTorch computes them (the fused and lone-record kernels write in the
    tensor's dtype), to float32 accuracy."""
    torch = pytest.importorskip('torch')
    arrs = _inputs(shapes, np.float32)
    xs = [tape.tensor(a, requires_grad=True) for a in arrs]
    ys = [torch.tensor(a, requires_grad=True) for a in arrs]
    for _ in range(2):          # the second step takes the fused kernels
        for x, y in zip(xs, ys):
            x.grad = y.grad = None
        out, tout = fn(tape, *xs), fn(torch, *ys)
        np.testing.assert_allclose(out.item(), tout.item(), rtol=1e-4)
        out.backward()
        tout.backward()
        for x, y in zip(xs, ys):
            assert x.grad.dtype == tape.float32
            scale = np.abs(y.grad.numpy()).max() + 1e-30
            np.testing.assert_allclose(x.grad.numpy() / scale, y.grad.numpy() / scale,
                                       rtol=1e-4, atol=1e-5)


def test_big_mixed_dtypes_match_torch():
    """float32 times float64 over large tensors: a float64 result, and each
    input's gradient in its own dtype."""
    torch = pytest.importorskip('torch')
    a = rng.standard_normal((ROWS, 100)).astype(np.float32)
    b = rng.standard_normal((ROWS, 100))
    x, y = tape.tensor(a, requires_grad=True), tape.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    for _ in range(2):
        x.grad = y.grad = tx.grad = ty.grad = None
        (tape.tanh(x * y) * x).sum().backward()
        (torch.tanh(tx * ty) * tx).sum().backward()
        assert x.grad.dtype == tape.float32 and y.grad.dtype == tape.float64
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6, atol=1e-7)


# --------------------------------------- large transposes (F.linear's weight.t())
_TRANSPOSES = {   # name: (shape, op, the axis order it gives)
    't': ((300, 200), lambda x: x.t(), (1, 0)),
    'transpose': ((20, 30, 40), lambda x: x.transpose(0, 2), (2, 1, 0)),
    'transpose_neg': ((20, 30, 40), lambda x: x.transpose(-1, 1), (0, 2, 1)),
    'permute': ((20, 30, 40), lambda x: x.permute(1, 2, 0), (1, 2, 0)),
}


@pytest.mark.parametrize('name', list(_TRANSPOSES))
def test_large_transpose_gradients_match_torch_to_second_order(name):
    torch = pytest.importorskip('torch')
    shape, f, order = _TRANSPOSES[name]
    xn = np.random.default_rng(3).standard_normal(shape)
    wn = np.random.default_rng(4).standard_normal(np.transpose(xn, order).shape)
    out = {}
    for lib in (torch, tape):
        x = lib.tensor(xn, requires_grad=True)
        loss = (lib.tanh(f(x)) * lib.tensor(wn)).sum()
        g, = lib.autograd.grad(loss, x, create_graph=True)
        (g * g).sum().backward()
        out[lib.__name__] = (g.detach().numpy(), x.grad.numpy())
    for a, b in zip(out['torch'], out['tape']):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_a_large_transpose_keeps_its_axis_order_not_an_index_map():
    from tape._big import AxisOrder
    x = tape.randn(300, 200, requires_grad=True)
    y = x.t()
    assert [type(m.attrs) for m in y._tape.big] == [AxisOrder]


def _linear_case(hook):
    """x @ W.t() with W large, as F.linear computes: W's gradient is written in
    W's layout unless something reads W.t()'s own gradient."""
    rng = np.random.default_rng(5)
    W = tape.tensor(rng.standard_normal((256, 100)), requires_grad=True)
    x = tape.tensor(rng.standard_normal((8, 100)))
    Wt = W.t()
    seen = []
    if hook == 'hook':
        Wt.register_hook(lambda g: seen.append(g.numpy().copy()))
    elif hook == 'retain':
        Wt.retain_grad()
    loss = (tape.tanh(x @ Wt) ** 2).sum() + (Wt * 0.5).sum()
    return W, x, Wt, loss, seen


@pytest.mark.parametrize('hook', ['none', 'hook', 'retain', 'grad_wrt_Wt'])
def test_the_weight_gradient_through_a_transposed_matmul(hook):
    W, x, Wt, loss, seen = _linear_case(hook)
    Wn, xn = W.detach().numpy(), x.numpy()
    h = np.tanh(xn @ Wn.T)
    dWt = xn.T @ (2 * h * (1 - h * h)) + 0.5        # d loss / d W.t()
    if hook == 'grad_wrt_Wt':
        gWt, gW = tape.autograd.grad(loss, [Wt, W])
        np.testing.assert_allclose(gWt.numpy(), dWt, rtol=1e-10)
        np.testing.assert_allclose(gW.numpy(), dWt.T, rtol=1e-10)
        return
    loss.backward()
    np.testing.assert_allclose(W.grad.numpy(), dWt.T, rtol=1e-10)
    if hook == 'hook':       # the hook saw the whole gradient of W.t(), mm's part too
        np.testing.assert_allclose(seen[0], dWt, rtol=1e-10)
    if hook == 'retain':
        np.testing.assert_allclose(Wt.grad.numpy(), dWt, rtol=1e-10)


def test_a_transposed_matmul_in_a_backward_toward_another_input():
    # backward(inputs=[b]): W's transposed product must not reach W.grad
    W = tape.randn(256, 100, dtype=tape.float64, requires_grad=True)
    b = tape.randn(256, dtype=tape.float64, requires_grad=True)
    x = tape.randn(8, 100, dtype=tape.float64)
    (x @ W.t() + b).tanh().sum().backward(inputs=[b])
    assert W.grad is None and b.grad is not None
