"""Shared test helpers: a finite-difference gradient checker and the PyTorch oracle.

``check_grad`` compares the gradients tape computes with central differences
in float64.  For small problems it builds the whole Jacobian twice: once row by
row with ``tape.autograd.grad`` (one unit ``grad_outputs`` per output element)
and once column by column from finite differences.  It also checks the other
public path, ``y.backward(v)`` on fresh leaves, against ``v @ J``, so the
``grad`` and ``backward`` entry points are both covered by one call.  Large
problems fall back to random projections ``v . J u`` (HIPS autograd's
``check_grads`` style), which is just as strict for a wrong rule.
"""
import numpy as np
import pytest

import tape

# Above this many Jacobian entries, check random projections instead.
FULL_JACOBIAN_LIMIT = 2500


def _as_array(x):
    return np.array(x._data if isinstance(x, tape.Tensor) else x, dtype=np.float64)


def _leaves(arrays, requires):
    return [tape.tensor(a.copy(), dtype=tape.float64, requires_grad=r)
            for a, r in zip(arrays, requires)]


def _value(fn, arrays):
    """fn at the given float64 arrays, as a float64 array, without recording."""
    with tape.no_grad():
        out = fn(*[tape.tensor(a.copy(), dtype=tape.float64) for a in arrays])
    return np.array(out._data, dtype=np.float64)


def _grad_or_zeros(g, like):
    if g is None:
        return np.zeros(like.size)
    return np.asarray(g._data, dtype=np.float64).ravel()


def check_grad(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5, seed=0):
    """Assert that tape's gradients of ``fn`` match central differences (float64).

    ``fn`` takes tape Tensors and returns one Tensor.  ``inputs`` are Tensors or
    arrays; Tensors that do not require grad are held constant, everything else
    is differentiated.  Returns the analytic Jacobian (outputs x inputs, flat)
    when it was built in full, else None.
    """
    arrays = [_as_array(x) for x in inputs]
    requires = [x.requires_grad if isinstance(x, tape.Tensor) else True for x in inputs]
    diff = [i for i, r in enumerate(requires) if r]
    assert diff, 'check_grad: nothing to differentiate'
    xs = _leaves(arrays, requires)
    y = fn(*xs)
    assert isinstance(y, tape.Tensor), f'check_grad: fn returned {type(y).__name__}'
    assert y.dtype == tape.float64, f'check_grad: float64 inputs gave a {y.dtype} result'
    assert y.requires_grad, 'check_grad: the result does not require grad'
    y0 = np.array(y._data, dtype=np.float64)
    np.testing.assert_allclose(y0, _value(fn, arrays), rtol=1e-12, atol=1e-12,
                               err_msg='recording changed the forward value')
    ny = y0.size
    nx = sum(arrays[i].size for i in diff)
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(y0.shape)

    if ny * nx <= FULL_JACOBIAN_LIMIT:
        jac = np.zeros((ny, nx))
        for r in range(ny):
            e = np.zeros(ny)
            e[r] = 1.0
            gs = tape.autograd.grad(y, [xs[i] for i in diff],
                                    grad_outputs=tape.tensor(e.reshape(y0.shape),
                                                             dtype=tape.float64),
                                    retain_graph=True, allow_unused=True)
            assert len(gs) == len(diff)
            jac[r] = np.concatenate([_grad_or_zeros(g, arrays[i]) for g, i in zip(gs, diff)])
        num = np.zeros((ny, nx))
        col = 0
        for i in diff:
            for j in range(arrays[i].size):
                plus = [a.copy() for a in arrays]
                minus = [a.copy() for a in arrays]
                plus[i].reshape(-1)[j] += eps
                minus[i].reshape(-1)[j] -= eps
                num[:, col] = ((_value(fn, plus) - _value(fn, minus)) / (2 * eps)).ravel()
                col += 1
        np.testing.assert_allclose(jac, num, rtol=rtol, atol=atol,
                                   err_msg='Jacobian from autograd.grad != finite differences')
        expected_vjp = v.ravel() @ jac
    else:
        jac = None
        us = [rng.standard_normal(arrays[i].shape) for i in diff]
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        for u, i in zip(us, diff):
            plus[i] += eps * u
            minus[i] -= eps * u
        directional = float(np.sum(v * (_value(fn, plus) - _value(fn, minus)) / (2 * eps)))
        gs = tape.autograd.grad(y, [xs[i] for i in diff],
                                grad_outputs=tape.tensor(v, dtype=tape.float64),
                                retain_graph=True, allow_unused=True)
        analytic = float(sum(np.dot(_grad_or_zeros(g, arrays[i]), u.ravel())
                             for g, i, u in zip(gs, diff, us)))
        np.testing.assert_allclose(analytic, directional, rtol=rtol,
                                   atol=atol * max(1.0, np.sqrt(nx)),
                                   err_msg='v . J u from autograd.grad != finite differences')
        expected_vjp = np.concatenate(
            [_grad_or_zeros(g, arrays[i]) for g, i in zip(gs, diff)])

    # the other entry point: backward(gradient) on fresh leaves accumulates v @ J
    xs2 = _leaves(arrays, requires)
    y2 = fn(*xs2)
    y2.backward(tape.tensor(v, dtype=tape.float64))
    got = np.concatenate([_grad_or_zeros(xs2[i].grad, arrays[i]) for i in diff])
    np.testing.assert_allclose(got, expected_vjp, rtol=1e-9, atol=1e-12,
                               err_msg='backward(v) != v @ J from autograd.grad')
    for i in diff:
        g = xs2[i].grad
        if g is not None:
            assert g.shape == xs2[i].shape, 'a leaf grad has the wrong shape'
            assert g.dtype == tape.float64
    return jac


@pytest.fixture(autouse=True)
def _fresh_open_tape():
    """Start every test on a fresh tape.

    tape lets a new graph that starts from leaves join a recent live tape (the
    "open tape").  pytest keeps the tracebacks of failed and xfailed tests, and
    with them their graphs; without this reset a later test's graphs could join
    such a leftover tape and inherit its state (see
    test_stale_graph_does_not_poison_unrelated_graphs for the bug that makes
    that visible).  Uses an internal when it exists; a no-op otherwise.
    """
    from tape import _tape as tp
    if hasattr(tp.grad_mode, 'open_tape'):
        tp.grad_mode.open_tape = None
    yield


@pytest.fixture
def torch_or_skip():
    """The PyTorch module, for oracle comparisons; skips the test without it."""
    return pytest.importorskip('torch')
