"""A small model's training step on its lean paths: ``F.linear`` appending the
composite's records itself, cross_entropy's record made without ``apply``'s
generic work, the sweep joining a transposed saved weight.  Structure, values
and gradients (PyTorch as the oracle where installed); no timing."""
import numpy as np
import pytest

import tape
from tape import _ops
from tape._sweep import _joined, pack

F = tape.nn.functional

ACC = 'torch::autograd::AccumulateGrad'     # (PyTorch's C++ node's name())


def _mlp(lib, dtype):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(20, 64), lib.nn.ReLU(), lib.nn.Linear(64, 64),
                          lib.nn.ReLU(), lib.nn.Linear(64, 3))
    return m.to(dtype) if dtype is not None else m


def _records(y):
    t = y._tape
    return np.frombuffer(bytes(t.rec), np.int64).reshape(-1, 8).copy()


@pytest.mark.parametrize('x_grad', [False, True])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_linear_records_what_the_composite_records(x_grad, dtype):
    rng = np.random.default_rng(0)
    w = tape.tensor(rng.standard_normal((5, 4)).astype(dtype), requires_grad=True)
    b = tape.tensor(rng.standard_normal(5).astype(dtype), requires_grad=True)
    xd = rng.standard_normal((3, 4)).astype(dtype)
    x1 = tape.tensor(xd, requires_grad=x_grad)
    x2 = tape.tensor(xd, requires_grad=x_grad)
    fast = F.linear(x1, w, b)
    r_fast = _records(fast)
    names = [r.split()[1] for r in str(tape.show_tape(fast)).splitlines() if r[:6].strip()
             .isdigit()]
    assert names == ['t', 'mm', 'broadcast', 'add']
    # PyTorch's one node: AddmmBackward0 of (bias, input, weight.t())
    assert fast.grad_fn.name() == 'AddmmBackward0'
    assert [n.name() if n else None for n, _ in fast.grad_fn.next_functions] == \
        [ACC, ACC if x_grad else None, 'TBackward0']
    assert w._extra is None             # no view bookkeeping for the transposed weight
    assert fast.grad_fn.next_functions[2][0].next_functions[0][0].variable is w
    assert fast._data.dtype == dtype
    fast.sum().backward()               # (releases the tape: the composite gets a new one)
    g_fast = (w.grad._data.copy(), b.grad._data.copy(),
              None if not x_grad else x1.grad._data.copy())
    w.grad = b.grad = None
    slow = _ops.add(_ops.mm(x2, _ops.t(w)), b)
    np.testing.assert_array_equal(fast._data, slow._data)
    np.testing.assert_array_equal(r_fast, _records(slow))
    slow.sum().backward()
    np.testing.assert_array_equal(g_fast[0], w.grad._data)
    np.testing.assert_array_equal(g_fast[1], b.grad._data)
    if x_grad:
        np.testing.assert_array_equal(g_fast[2], x2.grad._data)


def test_linear_other_cases_take_the_composite():
    w = tape.randn(3, 2, requires_grad=True)
    b = tape.randn(3, requires_grad=True)
    # a 1-D or 3-D input, no bias, a frozen weight, mixed dtypes: same results as before
    for x in (tape.randn(2), tape.randn(4, 5, 2)):
        y = F.linear(x, w, b)
        np.testing.assert_allclose(y._data, x._data @ w._data.T + b._data, rtol=1e-6)
    y = F.linear(tape.randn(4, 2), w)
    assert y.grad_fn.name() == 'MmBackward0'
    wf = tape.randn(3, 2)
    y = F.linear(tape.randn(4, 2), wf, b)
    assert y.grad_fn.name() == 'AddmmBackward0'       # (as PyTorch's: the composite's records)
    assert [n is None for n, _ in y.grad_fn.next_functions] == [False, True, True]
    with pytest.raises(RuntimeError, match='same dtype'):
        F.linear(tape.randn(4, 2), w, b.double())
    with pytest.raises(RuntimeError, match='cannot be multiplied'):
        F.linear(tape.randn(4, 3), w, b)


def test_linear_under_no_grad_is_a_plain_result():
    w = tape.randn(3, 2, requires_grad=True)
    b = tape.randn(3, requires_grad=True)
    x = tape.randn(4, 2, requires_grad=True)
    with tape.no_grad():
        y = F.linear(x, w, b)
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_allclose(y._data, x._data @ w._data.T + b._data, rtol=1e-6)


def test_weight_changed_in_place_after_linear():
    torch = pytest.importorskip('torch')
    for lib in (torch, tape):
        for x_grad, raises in ((True, True), (False, False)):
            lib.manual_seed(0)
            w = lib.randn(4, 3, requires_grad=True)
            b = lib.randn(4, requires_grad=True)
            y = lib.nn.functional.linear(lib.randn(2, 3, requires_grad=x_grad), w, b)
            with lib.no_grad():
                w.mul_(2)
            if raises:
                with pytest.raises(RuntimeError, match='modified by an inplace operation'):
                    y.sum().backward()
            else:
                y.sum().backward()


def test_the_step_matches_torch():
    torch = pytest.importorskip('torch')
    for dt, tdt in ((np.float32, torch.float32), (np.float64, torch.float64)):
        rng = np.random.default_rng(1)
        xd = rng.standard_normal((32, 20)).astype(dt)
        yd = rng.integers(0, 3, 32)
        mt, mo = _mlp(torch, tdt), _mlp(tape, None)
        for p, q in zip(mo.parameters(), mt.parameters()):
            p._data = q.detach().numpy().astype(dt).copy()
        ot = torch.optim.SGD(mt.parameters(), lr=0.1, momentum=0.9)
        oo = tape.optim.SGD(mo.parameters(), lr=0.1, momentum=0.9)
        xt, yt = torch.tensor(xd), torch.tensor(yd)
        xo, yo = tape.tensor(xd), tape.tensor(yd)
        tol = 1e-5 if dt == np.float32 else 1e-10
        for _ in range(5):
            ot.zero_grad()
            oo.zero_grad()
            lt = torch.nn.functional.cross_entropy(mt(xt), yt)
            lo = F.cross_entropy(mo(xo), yo)
            assert lo.grad_fn.name() == 'NllLossBackward0'
            assert lo._data.dtype == dt
            np.testing.assert_allclose(lo.item(), lt.item(), rtol=tol)
            lt.backward()
            lo.backward()
            for p, q in zip(mo.parameters(), mt.parameters()):
                assert p.grad._data.dtype == dt
                np.testing.assert_allclose(p.grad._data, q.grad.numpy(), rtol=tol * 10,
                                           atol=tol)
            ot.step()
            oo.step()
        # one tape of 15 records: 4 per layer, 2 relus, the loss
        lo = F.cross_entropy(mo(xo), yo)
        assert lo._tape.n == 15
        assert all(p._extra is None for p in mo.parameters())


def test_cross_entropy_record_keeps_function_semantics():
    x = tape.randn(6, 4, requires_grad=True)
    t = tape.tensor(np.array([0, 3, 1, 2, 2, 0]))
    loss = F.cross_entropy(x * 1.0, t)
    loss.backward(retain_graph=True)
    g1 = x.grad._data.copy()
    loss.backward()
    np.testing.assert_allclose(x.grad._data, 2 * g1, rtol=1e-6)
    with pytest.raises(RuntimeError, match='backward through the graph a second time'):
        loss.backward()
    # a leaf input, create_graph (the differentiable backward), no_grad
    x.grad = None
    loss = F.cross_entropy(x, t, reduction='sum')
    g, = tape.autograd.grad(loss, x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g._data, F.softmax(x, 1)._data - np.eye(4)[t._data], rtol=1e-5,
                               atol=1e-6)
    with tape.no_grad():
        assert not F.cross_entropy(x, t).requires_grad
    # changed in place after the loss: PyTorch's error
    y = x * 1.0
    loss = F.cross_entropy(y, t)
    with tape.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        loss.backward()


def test_pack_joins_a_transposed_saved_weight():
    w = tape.randn(5, 4, requires_grad=True)
    b = tape.randn(5, requires_grad=True)
    x = tape.randn(3, 4, requires_grad=True)
    y = F.linear(x, w, b)
    tp = y._tape
    assert any(not s.flags.c_contiguous for s in tp.saved)
    V = _joined(tp)
    assert V is not None
    np.testing.assert_array_equal(V, np.concatenate(tp.saved, axis=None))
    np.testing.assert_array_equal(pack(tp)[1], np.concatenate(tp.saved, axis=None))
