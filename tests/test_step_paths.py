"""A training step's fast paths: a released graph's views of a parameter no
longer send the optimizer (or the next backward) to the slow in-place path, while
a graph that can still read the parameter keeps PyTorch's version check."""
import numpy as np
import pytest

import tape


def _model():
    tape.manual_seed(0)
    return tape.nn.Sequential(tape.nn.Linear(5, 4), tape.nn.Tanh(), tape.nn.Linear(4, 2))


def test_a_released_graph_leaves_the_weights_plain():
    m = _model()
    opt = tape.optim.SGD(m.parameters(), 0.1, momentum=0.9)
    x = tape.randn(8, 5, requires_grad=True)
    arrays = [p._data for p in m.parameters()]
    for _ in range(3):
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        # (F.linear records weight.t() without making the view: no _extra even now)
        loss.backward()
        assert all(p._extra is None for p in m.parameters())
        versions = [p._version for p in m.parameters()]
        opt.step()
        # written in place (the same arrays), each version bumped once
        assert all(p._data is a for p, a in zip(m.parameters(), arrays))
        assert [p._version for p in m.parameters()] == [v + 1 for v in versions]


def test_a_live_graph_still_refuses_backward_after_a_step():
    torch = pytest.importorskip('torch')
    for lib in (torch, tape):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2)
        opt = lib.optim.SGD(m.parameters(), 0.1)
        x = lib.randn(4, 3, requires_grad=True)
        m.weight.grad, m.bias.grad = lib.ones(2, 3), lib.ones(2)
        loss = m(x).sum()
        opt.step()                  # before the backward: the saved weight changed
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            loss.backward()
        loss = m(x).sum()
        loss.backward(retain_graph=True)
        opt.step()
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            loss.backward()


def test_a_view_used_again_after_release_is_still_watched():
    w = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = w.t()
    (v * v).sum().backward()
    assert w._extra is None                 # the released tape was forgotten...
    y = (v * v).sum()                       # ...and v's history moved to a new one
    with tape.no_grad():
        w.mul_(0.5)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()
