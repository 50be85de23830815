"""create_graph (the differentiable sweep, tape/_differentiable.py) at the edges:
zero-size tensors, and records over large tensors (tape/_big.py).

Gradients and gradients of gradients are compared with PyTorch in float64.

A zero-size tensor's slot is also the next tensor's slot when the recording
did not advance the slot counter for it (tape/_tape.py): the differentiable
sweep keeps zero-size gradients under keys of their own, and a zero-size leaf
takes a slot of its own."""
import numpy as np
import pytest

import tape
from tape._big import BIG

torch = pytest.importorskip('torch')

TOL = dict(rtol=1e-6, atol=1e-6)


def _lib_tensor(L, a):
    return L.tensor(np.asarray(a))


def _np(t):
    return None if t is None else t.detach().numpy()


def _assert_same(ours, theirs, what=''):
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if b is None:
            assert a is None or np.allclose(a, 0), f'{what} [{i}]: torch None, tape {a}'
            continue
        assert a is not None, f'{what} [{i}]: tape None, torch {b}'
        assert a.shape == b.shape, f'{what} [{i}]: shape {a.shape} != {b.shape}'
        np.testing.assert_allclose(a, b, err_msg=f'{what} [{i}]', **TOL)


# --------------------------------------------------------- zero-size tensors
EMPTY_CASES = {
    'mm_m0': (((0, 3), (3, 4)), lambda L, a, b: a @ b),
    'mm_k0': (((2, 0), (0, 4)), lambda L, a, b: a @ b),
    'mm_n0': (((2, 3), (3, 0)), lambda L, a, b: a @ b),
    'mm_m0n0': (((0, 3), (3, 0)), lambda L, a, b: a @ b),
    'mv_m0': (((0, 3), (3,)), lambda L, a, b: L.mv(a, b)),
    'mv_k0': (((2, 0), (0,)), lambda L, a, b: L.mv(a, b)),
    'vecmat_k0': (((0,), (0, 3)), lambda L, a, b: a @ b),
    'dot0': (((0,), (0,)), lambda L, a, b: L.dot(a, b)),
    'outer0': (((0,), (3,)), lambda L, a, b: L.outer(a, b)),
    'bmm_b0': (((0, 2, 3), (0, 3, 4)), lambda L, a, b: L.bmm(a, b)),
    'bmm_m0': (((2, 0, 3), (2, 3, 4)), lambda L, a, b: L.bmm(a, b)),
    'bmm_k0': (((2, 2, 0), (2, 0, 4)), lambda L, a, b: L.bmm(a, b)),
    'bmm_n0': (((2, 2, 3), (2, 3, 0)), lambda L, a, b: L.bmm(a, b)),
    'einsum_m0': (((0, 3), (3, 4)), lambda L, a, b: L.einsum('ij,jk->ik', a, b)),
    'cat_empty_last': (((2, 3), (2, 0)), lambda L, a, b: L.cat([a, b], 1) * 2),
    'cat_empty_first': (((2, 0), (2, 3)), lambda L, a, b: L.cat([a, b], 1) * 2),
    'stack_empty': (((0, 3), (0, 3)), lambda L, a, b: L.stack([a, b], 0)),
    'split_0_first': (((2, 3), (3,)), lambda L, a, b: (
        lambda p: p[0].sum() + (p[1] * b).sum())(a.split([0, 3], 1))),
    'split_0_mid': (((2, 3), (3,)), lambda L, a, b: (
        lambda p: p[0].sum() * 3 + p[1].sum() + (p[2] * b[1:]).sum())(a.split([1, 0, 2], 1))),
    'sum_dim_empty': (((0, 3), (3,)), lambda L, a, b: a.sum(0) * b),
    'sum_dim_to_nonempty': (((3, 0), (3,)), lambda L, a, b: a.sum(1) + b),
    'broadcast_empty': (((0, 3), (3,)), lambda L, a, b: (a * b).sum() + b.sum()),
    'where_empty': (((0, 3), (0, 3)), lambda L, a, b: L.where(a > 0, a, b)),
    'expand_to_empty': (((1, 3), (3,)), lambda L, a, b: a.expand(0, 3).sum() + (a * b).sum()),
    'cumsum_empty': (((0, 3), (3,)), lambda L, a, b: L.cumsum(a, 0).sum() + b.sum()),
    'cumprod_empty': (((3, 0), (3,)), lambda L, a, b: L.cumprod(a, 0).sum() + (b * b).sum()),
    'slice_empty': (((4, 3), (3,)), lambda L, a, b: a[2:2].sum() + (a[1] * b).sum()),
    'logsumexp_empty': (((0, 3), (3,)), lambda L, a, b: L.logsumexp(a, 1).sum() + (b * b).sum()),
}


def _empty_run(L, shapes, fn, mode):
    a = L.tensor(np.random.default_rng(1).standard_normal(shapes[0]), dtype=L.float64,
                 requires_grad=True)
    b = L.tensor(np.random.default_rng(2).standard_normal(shapes[1]), dtype=L.float64,
                 requires_grad=True)
    out = fn(L, a, b)
    loss = ((out * out).sum() + out.sum()).sum()
    if mode == 'plain':
        loss.backward()
        return [_np(a.grad), _np(b.grad)]
    if mode == 'retain':
        loss.backward(retain_graph=True)
        loss.backward()
        return [_np(a.grad), _np(b.grad)]
    ga, gb = L.autograd.grad(loss, [a, b], create_graph=True, allow_unused=True)
    total = None
    for g in (ga, gb):
        if g is not None and g.requires_grad:
            term = (g * g).sum() + g.sum() * a.sum()
            total = term if total is None else total + term
    second = [None, None]
    if total is not None:
        second = list(L.autograd.grad(total, [a, b], allow_unused=True))
    return [_np(ga), _np(gb)] + [_np(h) for h in second]


@pytest.mark.parametrize('mode', ['cg', 'plain', 'retain'])
@pytest.mark.parametrize('name', sorted(EMPTY_CASES))
def test_zero_size_matches_torch(name, mode):
    shapes, fn = EMPTY_CASES[name]
    _assert_same(_empty_run(tape, shapes, fn, mode), _empty_run(torch, shapes, fn, mode),
                 f'{name} {mode}')


@pytest.mark.parametrize('sa,sb', [((0, 3), (3, 4)), ((2, 0), (0, 4))])
def test_empty_mm_create_graph_gradients_are_differentiable(sa, sb):
    # the report's r11: ZeroDivisionError / a size mismatch before
    a = tape.zeros(*sa, requires_grad=True)
    b = tape.ones(*sb, requires_grad=True)
    ga, gb = tape.autograd.grad((a @ b).sum(), [a, b], create_graph=True)
    assert tuple(ga.shape) == sa and tuple(gb.shape) == sb
    assert ga.requires_grad and gb.requires_grad        # as torch's (MmBackward0)
    assert np.all(gb.detach().numpy() == 0)


def test_split_and_cat_with_zero_size_piece():
    # the report's r13
    x = tape.randn(2, 3, dtype=tape.float64, requires_grad=True)
    a, b = x.split([0, 3], 1)
    (g,) = tape.autograd.grad(a.sum() + (b * 2).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), np.full((2, 3), 2.0))
    y = tape.randn(2, 3, requires_grad=True)
    z = tape.zeros(2, 0, requires_grad=True)
    gy, gz = tape.autograd.grad((tape.cat([y, z], 1) * 2).sum(), [y, z], create_graph=True)
    np.testing.assert_array_equal(gy.detach().numpy(), np.full((2, 3), 2.0))
    assert tuple(gz.shape) == (2, 0)


EMPTIES = {
    'mm': lambda L: L.zeros(0, 3, requires_grad=True) @ L.ones(3, 4, requires_grad=True),
    'exp': lambda L: L.exp(L.zeros(0, requires_grad=True)),
    'sum_dim': lambda L: L.zeros(0, 2, requires_grad=True).sum(1),
    'split': lambda L: L.ones(2, 3, requires_grad=True).split([0, 3], 1)[0],
    'two': lambda L: L.exp(L.zeros(0, requires_grad=True)) * L.zeros(0, requires_grad=True),
}
GRAPHS = {
    'square': lambda L, x: (x * x).sum(),
    'outer': lambda L, x: (L.outer(x, x) ** 2).sum(),
    'exp': lambda L, x: L.exp(x).sum() * x.sum(),
    'mm': lambda L, x: (x.reshape(2, 1) @ x.reshape(1, 2)).sum() ** 2,
    'cat': lambda L, x: (L.cat([x, x * x]) ** 2).sum(),
}


@pytest.mark.parametrize('graph', sorted(GRAPHS))
@pytest.mark.parametrize('empty', sorted(EMPTIES))
def test_live_empty_tensor_does_not_break_later_graphs(empty, graph):
    # the report's r12: a live empty result on the thread's open tape
    res = []
    for L in (tape, torch):
        keep = EMPTIES[empty](L)        # noqa: F841 (kept alive on purpose)
        x = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        (gx,) = L.autograd.grad(GRAPHS[graph](L, x), [x], create_graph=True)
        (hx,) = L.autograd.grad((gx * gx).sum(), [x])
        res.append([_np(gx), _np(hx)])
    _assert_same(res[0], res[1], f'{empty} then {graph}')


def test_zero_size_leaf_has_a_slot_of_its_own():
    # an empty leaf and the next leaf used to share a slot: a backward that
    # reached only the empty one marked the other reached (a zero gradient
    # where torch leaves None)
    res = []
    for L in (tape, torch):
        a = L.zeros(0, requires_grad=True)
        b = L.ones(1, requires_grad=True)
        c = a + b                       # noqa: F841 (puts a, then b, on one tape)
        z = b * 3                       # noqa: F841
        (a * 2).sum().backward()
        res.append((tuple(a.grad.shape), b.grad))
    assert res[0] == res[1] == ((0,), None)


def test_zero_size_result_does_not_free_the_next_record():
    a = tape.zeros(0, 3, requires_grad=True)
    b = tape.ones(3, 4, requires_grad=True)
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (a.sum() + b.sum() + x.sum()).backward()        # puts the leaves on one tape
    e = a @ b                       # empty: its slot is also y's
    y = tape.exp(x)
    e.sum().backward()              # must neither reach nor free y's record
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 + np.exp([1.0, 2.0]), rtol=1e-6)


def test_grad_fn_call_on_empty_mm():
    a = tape.zeros(0, 3, requires_grad=True)
    b = tape.ones(3, 4, requires_grad=True)
    ga, gb = (a @ b).grad_fn(tape.zeros(0, 4))
    assert tuple(ga.shape) == (0, 3)
    np.testing.assert_array_equal(gb.detach().numpy(), np.zeros((3, 4), np.float32))


# ------------------------------------------------------ freed saved values
@pytest.mark.parametrize('n', [10, 2 * BIG])
@pytest.mark.parametrize('op', ['exp', 'cumprod', 'bmm', 'mm'])
def test_create_graph_through_freed_records_raises(op, n):
    # a backward without retain_graph frees saved values; a create_graph
    # backward through them used to read zeros (small) or raise KeyError (big)
    x = tape.tensor(np.linspace(0.5, 1.5, n), dtype=tape.float64, requires_grad=True)
    y = {'exp': lambda: tape.exp(x), 'cumprod': lambda: tape.cumprod(x, 0),
         'bmm': lambda: x.reshape(2, 1, n // 2) @ x.reshape(2, n // 2, 1),
         'mm': lambda: x.reshape(1, n) @ x.reshape(n, 1)}[op]()
    y.sum().backward()
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        tape.autograd.grad((y * 2).sum(), x, create_graph=True)


def test_grad_fn_call_on_freed_node_raises():
    x = tape.ones(3, requires_grad=True)
    z = tape.exp(x)
    z.sum().backward()
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        z.grad_fn(tape.ones(3))


# ----------------------------------------------------------- large tensors
N = 130          # N * N > BIG: every record below is a big one
assert N * N >= BIG
_rng = np.random.default_rng(0)
XA = _rng.standard_normal((N, N)) * 0.5 + 0.1
YA = _rng.standard_normal((N, N)) * 0.5
IDX = _rng.integers(0, N, size=(N, N))
MASK = XA > 0.2


def _F(L):
    return tape.nn.functional if L is tape else torch.nn.functional


BIG_CASES = {
    # the report's r14: failed under create_graph before
    'prod': lambda L, x, y: L.prod(x, 0) * y.sum(0),
    'prod_dim1': lambda L, x, y: L.prod(x * 0.1 + 1, 1) * y.sum(1),
    'cumsum': lambda L, x, y: L.cumsum(x * y, 0) * x,
    'cumsum_dim1': lambda L, x, y: L.cumsum(x, 1) ** 2,
    'cumprod': lambda L, x, y: L.cumprod(x * 0.01 + 1, 0) * y,
    'where': lambda L, x, y: L.where(_lib_tensor(L, MASK), x * x, y * x),
    'where_broadcast': lambda L, x, y: L.where(_lib_tensor(L, MASK), x, y[0]) * x,
    'masked_fill': lambda L, x, y: (x * y).masked_fill(_lib_tensor(L, MASK), 0.5) * x,
    'scatter': lambda L, x, y: L.scatter(x * y, 1, _lib_tensor(L, IDX[:, :3]),
                                         (x * x)[:, :3]) * x,
    'bmm_matmul': lambda L, x, y: (x.reshape(2, 65, 130) @ y.reshape(2, 130, 65)) ** 2,
    'bmm': lambda L, x, y: L.bmm(x.reshape(10, 13, 130), y.reshape(10, 130, 13)) ** 2,
    'matmul_3d_2d': lambda L, x, y: (x.reshape(2, 65, 130) @ y) * x.reshape(2, 65, 130)[:, :, :1],
    # a broad sample that worked before
    'exp': lambda L, x, y: L.exp(x) * y,
    'pow': lambda L, x, y: (x * x + 1) ** y,
    'div_broadcast': lambda L, x, y: x / (y[0] * y[0] + 1),
    'maximum': lambda L, x, y: L.maximum(x, y) * x,
    'sum_dim': lambda L, x, y: (x * x).sum(0) * y.sum(1),
    'mean_all': lambda L, x, y: (x * y).mean() * x,
    'mm': lambda L, x, y: (x @ y) * x,
    'mv': lambda L, x, y: (x @ y[0]) * (x @ y[1]),
    'logsumexp': lambda L, x, y: L.logsumexp(x * y, 1) * x.sum(1),
    'softmax': lambda L, x, y: _F(L).softmax(x * y, 1) * x,
    'amax': lambda L, x, y: L.amax(x * y, 1) * x.sum(1),
    'var': lambda L, x, y: L.var(x * y, 1) * x.sum(1),
    'norm': lambda L, x, y: L.norm(x) * y,
    'permute': lambda L, x, y: x.reshape(130, 13, 10).permute(2, 0, 1) ** 2 * 3,
    'flip_slice': lambda L, x, y: L.flip(x, (0,))[::2] * y[1::2] * x[::2],
    'gather': lambda L, x, y: L.gather(x * x, 1, _lib_tensor(L, IDX)) * y,
    'expand': lambda L, x, y: (x[0:1] * y[0:1]).expand(N, N) * x,
    'cat_split': lambda L, x, y: (lambda p: p[0] * p[1])(L.split(L.cat([x * y, x * x], 0), N, 0)),
    'cross_entropy': lambda L, x, y: _F(L).cross_entropy(x * y, _lib_tensor(L, IDX[:, 0])) * x,
}


def _big_run(L, fn):
    x = L.tensor(XA, dtype=L.float64, requires_grad=True)
    y = L.tensor(YA, dtype=L.float64, requires_grad=True)
    out = fn(L, x, y)
    w = L.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=L.float64)
    gx, gy = L.autograd.grad((out * w).sum(), [x, y], create_graph=True, allow_unused=True)
    total = None
    for g, c in ((gx, 1.0), (gy, 0.7)):
        if g is not None and g.requires_grad:
            term = (g * g).sum() * c + (g * x).sum()
            total = term if total is None else total + term
    second = [None, None]
    if total is not None:
        second = list(L.autograd.grad(total, [x, y], allow_unused=True))
    return [_np(gx), _np(gy)] + [_np(h) for h in second]


@pytest.mark.parametrize('name', sorted(BIG_CASES))
def test_big_create_graph_matches_torch(name):
    fn = BIG_CASES[name]
    _assert_same(_big_run(tape, fn), _big_run(torch, fn), name)


@pytest.mark.parametrize('name', ['where', 'bmm_matmul', 'cumsum', 'cumprod', 'prod'])
def test_big_create_graph_float32(name):
    fn = BIG_CASES[name]
    res = []
    for L in (tape, torch):
        x = L.tensor(XA, dtype=L.float32, requires_grad=True)
        y = L.tensor(YA, dtype=L.float32, requires_grad=True)
        gx, gy = L.autograd.grad(fn(L, x, y).sum(), [x, y], create_graph=True,
                                 allow_unused=True)
        assert gx.dtype == x.dtype
        res.append([_np(gx), _np(gy)])
    for a, b in zip(*res):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)


def test_big_create_graph_report_repro():
    # r14 as the report gave it: every op raised under create_graph
    x = tape.randn(130, 130, dtype=tape.float64, requires_grad=True)
    y = tape.randn(130, 130, dtype=tape.float64, requires_grad=True)
    for f in (lambda: tape.prod(x, 0), lambda: tape.cumsum(x, 0),
              lambda: tape.where(x > 0, x, y),
              lambda: x.reshape(2, 65, 130) @ y.reshape(2, 130, 65)):
        gs = tape.autograd.grad(f().sum(), [x, y], create_graph=True, allow_unused=True)
        assert any(g is not None for g in gs)


# ------------------------------------------------------- custom Functions
def test_custom_function_second_output_only_under_create_graph():
    # a Python record's n field is 0 and its out field its first output's
    # slot: a graph that used only the second output got no gradient (None)
    res = []
    for L in (tape, torch):
        class Two(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2, x * x

            @staticmethod
            def backward(ctx, g1, g2):
                x, = ctx.saved_tensors
                return g1 * 2 + g2 * 2 * x

        x = L.tensor([3.0], dtype=L.float64, requires_grad=True)
        a, b = Two.apply(x)
        (g,) = L.autograd.grad((b * b).sum(), x, create_graph=True)
        (h,) = L.autograd.grad(g.sum(), x)
        res.append([_np(g), _np(h)])
    _assert_same(res[0], res[1], 'second output')
