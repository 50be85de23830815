"""The large-tensor path's per-step fast paths (tape/_big.py): a run of big
elementwise records swept by a fused kernel through a recipe kept across
tapes (``_recipes``), and a full sum's gradient as a zero-stride view
(``_filled``).  Gradients are compared with PyTorch at sizes around BIG, in
float32 and float64, with broadcasting, repeated steps (the recipe reused),
retain_graph, hooks, and gradients whose state (absent, broadcast, an array,
one array saved twice) changes between steps of one structure."""
import numpy as np
import pytest

import tape
from compiler import fuse
from tape import _big
from tape._big import BIG

torch = pytest.importorskip('torch')

rng = np.random.default_rng(11)
SIZES = [BIG - 1, BIG, BIG + 1, 65536]
DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True, params=['fused', 'chunked'])
def run_kernels(request, monkeypatch):
    """Fused kernels compiled on first sight, and fusing off (no recipe kept
    or used)."""
    monkeypatch.setattr(fuse, 'FUSE_AFTER', 1 if request.param == 'fused' else None)
    return request.param


def _tol(dtype):
    return dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def _pair(shape, dtype, data=None):
    a = rng.standard_normal(shape).astype(dtype) if data is None else data
    return tape.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(xs, ts, dtype):
    for x, t in zip(xs, ts):
        assert x.grad is not None and t.grad is not None
        assert x.grad.dtype == x.dtype if hasattr(x.grad, 'dtype') else True
        want = t.grad.numpy()
        tol = _tol(dtype)
        if dtype == np.float32:
            # an entry that cancels carries the float32 rounding of its largest
            # terms (~|grad|'s scale): the two libraries' tanh differ by an ulp
            tol['atol'] = max(tol['atol'], 1e-6 * float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(x.grad.numpy(), want, **tol)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('n', SIZES)
def test_repeated_steps_match_torch(n, dtype):
    # a training loop's shape: the same graph every step, so from the second
    # step on the recipe is reused; the grads accumulate across steps
    x, tx = _pair(n, dtype)
    y, ty = _pair(n, dtype)
    for step in range(4):
        for m, a, b in ((tape, x, y), (torch, tx, ty)):
            ((a * b).relu() + a).sum().backward()
        _check([x, y], [tx, ty], dtype)
        assert x.grad.numpy().dtype == dtype
    for step in range(2):            # and with the grads reset each step
        x.grad = y.grad = None
        tx.grad = ty.grad = None
        ((x * y).relu() + x).sum().backward()
        ((tx * ty).relu() + tx).sum().backward()
        _check([x, y], [tx, ty], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_linear_bias_relu_chain_matches_torch(dtype):
    h, th = _pair((8, 16, 64), dtype)
    w, tw = _pair((128, 64), dtype)
    b, tb = _pair(128, dtype)
    for step in range(3):
        for m, a, ww, bb in ((tape, h, w, b), (torch, th, tw, tb)):
            a.grad = ww.grad = bb.grad = None
            F = m.nn.functional
            (F.relu(F.linear(a, ww, bb)) * 2.0 + 1.0).sum().backward()
        _check([h, w, b], [th, tw, tb], dtype)
    for step in range(2):            # the bias broadcast inside the run
        for m, a, bb in ((tape, h, b), (torch, th, tb)):
            a.grad = bb.grad = None
            (m.tanh(a.reshape(8, 16, 64) * bb[:64] + bb[64:]) * a).sum().backward()
        _check([h, b], [th, tb], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('n', [BIG, BIG + 3])
def test_retain_graph_twice(n, dtype):
    x, tx = _pair(n, dtype)
    y, ty = _pair(n, dtype)
    out = (tape.sigmoid(x * y) * x + y).sum()
    tout = (torch.sigmoid(tx * ty) * tx + ty).sum()
    for _ in range(2):
        out.backward(retain_graph=True)
        tout.backward(retain_graph=True)
        _check([x, y], [tx, ty], dtype)
    out.backward()
    tout.backward()
    _check([x, y], [tx, ty], dtype)
    with pytest.raises(RuntimeError):
        out.backward()


@pytest.mark.parametrize('dtype', DTYPES)
def test_the_seed_changes_between_steps_of_one_structure(dtype):
    # one structure, its run's upstream gradient broadcast (a full sum), an
    # array (a seed), absent (another output's graph): recipes must not mix
    n = BIG + 10
    x, tx = _pair(n, dtype)
    seed = rng.standard_normal(n).astype(dtype)
    for kind in ['sum', 'seed', 'sum', 'seed', 'mean', 'seed']:
        for m, a in ((tape, x), (torch, tx)):
            a.grad = None
            out = m.exp(a * 0.5) * a
            if kind == 'sum':
                out.sum().backward()
            elif kind == 'mean':
                out.mean().backward()
            else:
                out.backward(m.tensor(seed))
        _check([x], [tx], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_one_array_saved_by_two_leaves(dtype):
    # the same slots, but the two leaves' data one array, then two arrays: a
    # recipe that read one saved array for both would be wrong the second time
    n = BIG + 1
    a = rng.standard_normal(n).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    for shared in [True, False, True, False]:
        x = tape.tensor(a, requires_grad=True)
        y = x.detach().requires_grad_() if shared else tape.tensor(c, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        ty = torch.tensor(a if shared else c, requires_grad=True)
        ((x * y).relu() + x).sum().backward()
        ((tx * ty).relu() + tx).sum().backward()
        _check([x, y], [tx, ty], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_existing_gradient_is_added_to(dtype):
    # x's gradient exists before the run (another use of x, swept first), so
    # the run adds into it; the other step's x has no gradient yet
    n = BIG + 5
    x, tx = _pair(n, dtype)
    for step in range(3):
        for m, a in ((tape, x), (torch, tx)):
            a.grad = None
            u = m.tanh(a) * 3.0
            (u.sum() + (a * 2.0).sum() * (step + 1)).backward()
        _check([x], [tx], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_nan_and_inf(dtype):
    n = BIG + 2
    a = rng.standard_normal(n).astype(dtype)
    a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30]
    b = rng.standard_normal(n).astype(dtype)
    b[3] = np.inf
    for step in range(2):
        x, tx = _pair(n, dtype, a)
        y, ty = _pair(n, dtype, b)
        with np.errstate(all='ignore'):
            ((x * y).relu() + x * 2.0).sum().backward()
        ((tx * ty).relu() + tx * 2.0).sum().backward()
        for g, tg in ((x.grad, tx.grad), (y.grad, ty.grad)):
            np.testing.assert_allclose(g.numpy(), tg.numpy(), equal_nan=True, **_tol(dtype))
    x, tx = _pair(n, dtype, a)
    x.sum().backward()
    (x * float('nan')).sum().backward()            # a NaN broadcast gradient
    tx.sum().backward()
    (tx * float('nan')).sum().backward()
    np.testing.assert_array_equal(np.isnan(x.grad.numpy()), np.isnan(tx.grad.numpy()))


@pytest.mark.parametrize('dtype', DTYPES)
def test_hook_on_a_big_intermediate(dtype):
    n = BIG + 7
    x, tx = _pair(n, dtype)
    for step in range(3):
        for m, a in ((tape, x), (torch, tx)):
            a.grad = None
            u = a * a
            u.register_hook(lambda g: g * 3)
            (m.sigmoid(u) * 2.0).sum().backward()
        _check([x], [tx], dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_sums_of_one_tensor_and_autograd_grad(dtype):
    # two full sums of one big tensor (the zero-stride gradient added to), and
    # autograd.grad, create_graph and not, sharing the records
    n = BIG + 9
    for step in range(2):
        x, tx = _pair(n, dtype)
        y = tape.exp(x)
        ty = torch.exp(tx)
        loss = y.sum() + y.sum() * 2.5 + (y * x).sum()
        tloss = ty.sum() + ty.sum() * 2.5 + (ty * tx).sum()
        g, = tape.autograd.grad(loss, x, retain_graph=True)
        tg, = torch.autograd.grad(tloss, tx, retain_graph=True)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), **_tol(dtype))
        g2, = tape.autograd.grad(loss, x, create_graph=True)
        tg2, = torch.autograd.grad(tloss, tx, create_graph=True)
        np.testing.assert_allclose(g2.detach().numpy(), tg2.detach().numpy(), **_tol(dtype))
        (g2 * g2).sum().backward()
        (tg2 * tg2).sum().backward()
        _check([x], [tx], dtype)


def test_filled_is_a_read_only_zero_stride_view():
    v = _big._filled(np.float32(1.5), BIG)
    ref = np.broadcast_to(np.float64(1.5), (BIG,))
    assert v.dtype == ref.dtype and v.strides == ref.strides and v.shape == ref.shape
    assert not v.flags.writeable
    np.testing.assert_array_equal(v, ref)


def test_recipes_hold_no_arrays_and_stay_bounded(monkeypatch):
    if fuse.FUSE_AFTER is None:
        pytest.skip('fusing off: no recipes')
    monkeypatch.setattr(_big, 'MAX_RECIPES', 3)
    n = BIG + 1
    for k in range(8):
        x = tape.tensor(rng.standard_normal(n), requires_grad=True)
        pad = tape.ones(k + 1, requires_grad=True) * 2         # shifts the slots
        ((x * 1.5).exp() * x).sum().backward()
        pad.sum().backward()
        assert len(_big._recipes) <= _big.MAX_RECIPES + 1
    for key, recipe in _big._recipes.items():
        for part in recipe[1:]:
            for item in part:
                assert not any(isinstance(v, np.ndarray) for v in item)


@pytest.mark.parametrize('dtype', DTYPES)
def test_one_run_at_other_places_on_the_tape(dtype):
    # the same big slots (small records before the run take small slots only)
    # at other record positions, with other constants: a reused recipe must
    # find the saved arrays and constants by the run's own records
    n = BIG + 1
    for k in [1, 3, 1, 2, 3]:
        x, tx = _pair(n, dtype)
        for m, a in ((tape, x), (torch, tx)):
            t = a[:2]
            for _ in range(k):
                t = t * 2
            c = 0.5 + k / 4
            (((a * c).exp() * a).sum() + t.sum()).backward()
        _check([x], [tx], dtype)
