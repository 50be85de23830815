"""The tape itself: merging tapes, partial release, printing, lifetime of the open tape."""
import weakref

import numpy as np
import pytest

import tape
from tape import _tape as tp

rng = np.random.default_rng(3)


def _fill_open_tape():
    # push the thread's open tape past ADOPT_LIMIT so the next graph starts a new one
    z = tape.ones(1, requires_grad=True)
    for _ in range(tp.ADOPT_LIMIT + 1):
        z = z * 1.0
    return z


def _graph(m, x, w, b):
    h = m.tanh(x.mm(w) + b)                           # mm, broadcast, elementwise
    h = m.where(h > 0, h, h * 0.5)                    # where
    h = h.cumsum(1) * h.cumprod(0)                    # cumsum, cumprod
    return (h[:, ::2] ** 2).mean()                    # take, reduce


def test_merged_tapes_give_torch_gradients():
    torch = pytest.importorskip('torch')
    arrs = [rng.standard_normal(s) for s in [(4, 3), (3, 5), (5,), (4, 3), (3, 5)]]
    ts = [tape.tensor(a, requires_grad=True) for a in arrs]
    rs = [torch.tensor(a, requires_grad=True) for a in arrs]
    keep = _fill_open_tape()
    y1 = _graph(tape, ts[0], ts[1], ts[2])
    keep2 = _fill_open_tape()
    y2 = _graph(tape, ts[3], ts[4], ts[2])
    assert y1._tape is not y2._tape            # two tapes ...
    total = y1 * 2 + y2                        # ... merged here
    assert total._tape is y1._tape or total._tape is y2._tape
    total.backward()
    (_graph(torch, rs[0], rs[1], rs[2]) * 2 + _graph(torch, rs[3], rs[4], rs[2])).backward()
    for t, r in zip(ts, rs):
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-10, atol=1e-12)
    del keep, keep2


def test_merge_keeps_custom_function_and_hooks():
    class Cube(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g

    x = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    _fill_open_tape()
    a = Cube.apply(x)
    seen = []
    a.register_hook(lambda g: seen.append(g.numpy().copy()))
    _fill_open_tape()
    b = x * 5
    (a * b).sum().backward()                    # merges b's tape into a's (or back)
    np.testing.assert_allclose(seen[0], [5.0, 10.0])
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.array([1, 4]) * np.array([5, 10]) + 5 * np.array([1, 8]))


def test_graphs_sharing_a_tape_release_separately():
    x = tape.ones(3, requires_grad=True)
    y1 = (x * x).sum()                           # mul saves x: the sweep frees it
    y2 = (x + 3).sum()
    assert y1._tape is y2._tape                 # both joined the open tape
    y1.backward()
    y2.backward()                                # not released by y1's sweep
    np.testing.assert_allclose(x.grad.numpy(), [3, 3, 3])
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        y1.backward()
    y2.backward()                                # saves nothing: may be swept again
    np.testing.assert_allclose(x.grad.numpy(), [4, 4, 4])


def test_tape_prints_its_records():
    x = tape.ones(2, requires_grad=True)
    y = (x * 3).exp().sum()
    text = str(y._tape)
    assert 'mul_scalar' in text and 'exp' in text and 'sum' in text and 'leaf' in text


def test_tape_dies_with_its_tensors_even_if_open():
    _fill_open_tape()
    x = tape.ones(2, requires_grad=True)
    y = (x * 2).sum()
    ref = weakref.ref(y._tape)
    del y
    assert ref() is None                         # refcounting alone frees it


def test_inplace_change_of_saved_non_leaf_names_the_op():
    x = tape.ones(3, requires_grad=True)
    h = x * 2
    y = (h.cumprod(0)).sum()                    # cumprod saves h
    with tape.no_grad():
        pass
    h.add_(1)
    with pytest.raises(RuntimeError, match='modified by an inplace operation.*Cumprod'):
        y.backward()


# ------------------------------------------- the per-process sweep dispatcher
@pytest.fixture
def fresh_dispatch():
    """A process state with no sweep yet (restored after the test)."""
    from tape import _sweep
    saved = (_sweep._kernel, _sweep._ops, _sweep._widened, _sweep.DISPATCH)
    _sweep.reset_dispatch(True)
    yield _sweep
    _sweep._kernel, _sweep._ops, _sweep._widened, _sweep.DISPATCH = saved


def _chain_grads(x0, fns):
    x = tape.tensor(x0, requires_grad=True)
    y = x
    for f in fns:
        y = f(y)
    y.sum().backward()
    return x.grad.numpy()


def test_the_sweep_dispatches_the_ops_seen_and_widens(fresh_dispatch):
    from tape._rules import OP
    sw = fresh_dispatch
    x0 = rng.standard_normal(6)
    g1 = _chain_grads(x0, [lambda h: h * 2.0, lambda h: h + 1.0])
    assert sw._ops == {OP['mul_scalar'], OP['add_scalar'], OP['sum']}
    first = sw._kernel
    # a graph with an op the dispatcher lacks: the sweep widens mid-graph
    g2 = _chain_grads(x0, [lambda h: h * 2.0, tape.tanh, lambda h: h + 1.0])
    assert OP['tanh'] in sw._ops and sw._kernel is not first
    # the same gradients as the full sweep
    sw.reset_dispatch(False)
    np.testing.assert_allclose(g1, _chain_grads(x0, [lambda h: h * 2.0, lambda h: h + 1.0]))
    np.testing.assert_allclose(
        g2, _chain_grads(x0, [lambda h: h * 2.0, tape.tanh, lambda h: h + 1.0]))
    np.testing.assert_allclose(g2, 2.0 * (1 - np.tanh(2.0 * x0) ** 2))


def test_the_sweep_takes_the_full_dispatcher_after_widen_limit(fresh_dispatch):
    import compiler._sweep_generated as gen
    sw = fresh_dispatch
    x0 = rng.standard_normal(5)
    ops = [tape.exp, tape.tanh, tape.sigmoid, tape.relu, lambda h: h * h]
    for i, f in enumerate(ops):
        g = _chain_grads(x0, [f])
        want = {0: np.exp(x0), 1: 1 - np.tanh(x0) ** 2,
                2: (1 / (1 + np.exp(-x0))) * (1 - 1 / (1 + np.exp(-x0))),
                3: (x0 > 0).astype(float), 4: 2 * x0}[i]
        np.testing.assert_allclose(g, want, rtol=1e-12)
    assert sw._widened > sw.WIDEN_LIMIT and sw._kernel is gen.sweep


def test_node_hook_records_run_alone_on_a_fresh_dispatcher(fresh_dispatch):
    """A record a node hook runs by itself (tape/_node_hooks.py) widens the sweep first."""
    x = tape.tensor(rng.standard_normal(4), requires_grad=True)
    y = tape.sigmoid(x)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(gi[0].numpy().copy()))
    (y * 3.0).sum().backward()
    s = 1 / (1 + np.exp(-x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), 3 * s * (1 - s), rtol=1e-12)
    np.testing.assert_allclose(seen[0], 3 * s * (1 - s), rtol=1e-12)


def test_a_first_graph_of_large_tensors_only(fresh_dispatch):
    """A graph with no small record (every record large) needs a sweep of no ops."""
    from tape._big import BIG
    a = rng.standard_normal(BIG + 5)
    x = tape.tensor(a, requires_grad=True)
    tape.sigmoid(x).backward(tape.ones(BIG + 5, dtype=tape.float64))
    s = 1 / (1 + np.exp(-a))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 - s), rtol=1e-12)
    assert fresh_dispatch._ops == frozenset()
    y = tape.tensor(a[:7], requires_grad=True)
    (y * 2.0).sum().backward()              # then a small one widens it
    np.testing.assert_allclose(y.grad.numpy(), 2.0)


# ------------------------------------------------- the arena's dtype (pack)
def test_a_float32_graph_sweeps_in_float32():
    """Every saved value and leaf float32: the arena is float32, as PyTorch computes."""
    from tape._sweep import pack
    torch = pytest.importorskip('torch')
    a = rng.standard_normal((20, 30)).astype(np.float32)
    x, tx = tape.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = (tape.sigmoid(x) * x).sum()
    assert pack(y._tape)[1].dtype == np.float32
    y.backward()
    (torch.sigmoid(tx) * tx).sum().backward()
    assert x.grad.dtype == tape.float32
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)


def test_a_float64_leaf_or_root_keeps_a_float64_arena():
    from tape._sweep import pack
    y32 = tape.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    x64 = tape.tensor(rng.standard_normal(5), requires_grad=True)
    z = (y32 * y32).sum() + (x64 * 0.1).sum()
    assert pack(z._tape)[1].dtype == np.float64
    z.backward()
    assert np.all(x64.grad.numpy() == 0.1)              # not float32's 0.1
    # float32 leaves and saved values, a float64 root: the seed's dtype wins
    w = tape.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    c = tape.tensor(np.full(5, 1 / 3))
    r = ((w * w) + c).sum()
    assert r.dtype == tape.float64
    r.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy(), rtol=1e-7)


def test_large_new_arrays_are_cache_line_aligned():
    """Arrays of ALIGN_MIN bytes or more start on a 64-byte boundary (an
    optimizer's in-place update of a misaligned one measured 1.6x slower)."""
    from tape._pool import ALIGN, ALIGN_MIN, aligned_empty, pool
    for make in (lambda: aligned_empty((ALIGN_MIN // 4 + 3,), np.float32),
                 lambda: pool.empty((2 << 20) // 8, np.float64),
                 lambda: tape.randn(784, 256)._data):
        for _ in range(4):
            a = make()
            assert a.ctypes.data % ALIGN == 0 and a.flags.c_contiguous and a.flags.writeable


def test_the_sweep_says_when_it_changes(fresh_dispatch, caplog):
    import logging
    x = tape.tensor(rng.standard_normal(3), requires_grad=True)
    with caplog.at_level(logging.INFO, logger='tape'):
        (x * 2.0).sum().backward()
        tape.exp(x).sum().backward()
        tape.exp(x).sum().backward()        # nothing new: no message
    msgs = [r.getMessage() for r in caplog.records if r.getMessage().startswith('sweep:')]
    assert msgs == ['sweep: a dispatcher over 2 ops (1 of at most 3 per process)',
                    'sweep: a dispatcher over 3 ops (2 of at most 3 per process)']


@pytest.mark.parametrize('pieces', [1, 3, 40])     # below and above tape._SMALL_MERGE records
def test_merging_small_and_large_tapes_keeps_gradients(pieces):
    from tape import _tape as tp
    x = tape.tensor([1.0, 2.0, 3.0], dtype=tape.float64, requires_grad=True)
    w = tape.tensor([0.5, -1.0, 2.0], dtype=tape.float64, requires_grad=True)
    long = x * 1.0
    for _ in range(tp.ADOPT_LIMIT + 1):             # past the open tape's cap
        long = long + 0.0
    piece = w * 1.0                                  # starts a tape of its own
    for i in range(pieces - 1):
        piece = (piece * 2.0).exp() if i == 0 else piece + x[0]
    assert piece._tape is not long._tape
    y = (long * piece).sum()                         # the tapes merge here
    y.backward()
    torch = pytest.importorskip('torch')
    tx = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    tw = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    tp_ = tw * 1.0
    for i in range(pieces - 1):
        tp_ = (tp_ * 2.0).exp() if i == 0 else tp_ + tx[0]
    (tx * tp_).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def _packed_values(t):
    from tape import _sweep
    return _sweep.pack(t._tape)[1]


@pytest.mark.parametrize('case', ['f64', 'f32', 'mixed', 'int', 'view', 'freed'])
def test_pack_joins_or_concatenates_saved_values_alike(case):
    # pack joins the saved values' bytes when they are all float64 or all
    # float32; every other mix must take np.concatenate and give the same V
    from tape import _sweep
    f32 = case in ('f32', 'mixed')
    dt = tape.float32 if f32 else tape.float64
    x = tape.tensor(rng.standard_normal(5), dtype=dt, requires_grad=True)
    y = tape.tanh(x * x) * 3.0
    if case == 'mixed':
        y = y * tape.tensor(rng.standard_normal(5), requires_grad=True)     # a float64 part
    if case == 'int':
        y = y * tape.tensor([1, 2, 3, 4, 5])                                # an int64 part
    if case == 'view':
        m = tape.tensor(rng.standard_normal((5, 5)), dtype=dt, requires_grad=True)
        y = y * m.t()[0]                                  # a non-contiguous saved operand
    if case == 'freed':
        y.sum().backward()                                # frees what was saved ...
        y = tape.exp(y) * x                               # ... then the tape records more
    t = y._tape
    parts = ([np.zeros(t.freed[0], np.float32)] if t.freed else []) + list(t.saved)
    want = np.concatenate(parts, axis=None)
    if want.dtype != np.float32:
        want = want.astype(np.float64)
    got = _packed_values(y)
    assert got.dtype == want.dtype and got.flags.writeable
    np.testing.assert_array_equal(got, want)
    if case in ('f64', 'f32'):
        assert _sweep._joined(t) is not None              # the fast way was taken
    if case == 'int':
        assert t.nonfloat_saved
    if case == 'view':
        assert _sweep._joined(t) is not None              # a strided part joins as C-order bytes
    if case == 'freed':
        assert t.freed is not None
        return
    y.sum().backward()
    assert x.grad is not None
