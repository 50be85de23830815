"""PyTorch parity found by a fifth-session review of known differences:
successive derivatives of powers, the implicit-dim warning of softmax, and
NumPy's floating-point warnings under a user's later ``simplefilter('error')``."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tape

F = tape.nn.functional


def _successive(lib, f, x, k):
    """The first ``k`` derivatives of f at x by repeated grad(create_graph=True):
    (value list, requires_grad list), stopping at a derivative that does not
    require grad (a constant)."""
    y = f(x)
    vals, rgs = [], []
    for _ in range(k):
        (y,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        vals.append(y.detach().numpy().copy())
        rgs.append(y.requires_grad)
        if not y.requires_grad:
            break
    return vals, rgs


@pytest.mark.parametrize('e,expect', [
    (3, [3 * 1.5 ** 2, 6 * 1.5, 6.0, 0.0]),
    (2, [3.0, 2.0, 0.0]),
    (1, [1.0, 0.0]),
])
def test_every_derivative_of_a_power_requires_grad_until_zero(e, expect):
    # PyTorch's gradient of x**2 is 2 * x.pow(1), whose gradient x.pow(0) still
    # depends on x: x**3's third derivative 6 requires grad and its fourth is 0
    x = tape.tensor(1.5, dtype=tape.float64, requires_grad=True)
    vals, rgs = _successive(tape, lambda t: t ** e, x, 6)
    np.testing.assert_allclose([float(v) for v in vals], expect)
    assert rgs == [True] * (len(expect) - 1) + [False]


def test_power_derivatives_match_torch():
    torch = pytest.importorskip('torch')
    v = np.array([1.5, -2.0, 3.0])
    for e in (1, 2, 3, 2.5, 0.5, -1, -2):
        got = _successive(tape, lambda t: t ** e, tape.tensor(v, requires_grad=True), 5)
        want = _successive(torch, lambda t: t ** e, torch.tensor(v, requires_grad=True), 5)
        assert got[1] == want[1], e
        for a, b in zip(got[0], want[0]):
            np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=str(e))


def test_power_rule_paths_agree():
    # the compiled sweep and the differentiable (create_graph) path give one gradient
    x = tape.tensor([1.5, -2.0, 3.0], dtype=tape.float64, requires_grad=True)
    (x ** 2).sum().backward()
    (g,) = tape.autograd.grad((x ** 2).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), x.grad.numpy())
    assert tape.autograd.gradcheck(lambda t: (t ** 2) * t, (x,))
    assert tape.autograd.gradgradcheck(lambda t: t ** 2, (x,))


@pytest.mark.parametrize('fn,name', [(F.softmax, 'softmax'), (F.log_softmax, 'log_softmax'),
                                     (F.softmin, 'softmin')])
@pytest.mark.parametrize('ndim,dim', [(1, 0), (2, 1), (3, 0), (4, 1)])
def test_implicit_softmax_dim_warns_and_picks_pytorchs_dim(fn, name, ndim, dim):
    x = tape.tensor(np.random.default_rng(ndim).standard_normal((2, 3, 4, 5)[:ndim]))
    with pytest.warns(UserWarning, match=f'Implicit dimension choice for {name} has been '
                      'deprecated') as rec:
        got = fn(x)
    assert len(rec) == 1            # softmin warns once, not again through softmax
    np.testing.assert_allclose(got.numpy(), fn(x, dim).numpy())


def test_softmax_module_without_dim_warns():
    with pytest.warns(UserWarning, match='Implicit dimension choice for softmax'):
        tape.nn.Softmax()(tape.ones(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        F.softmax(tape.ones(2, 3), dim=1)        # an explicit dim does not warn


# Run in a fresh interpreter: the point is a filter added *after* import tape,
# which goes in front of the one tape installs.
SCRIPT = r'''
import warnings
import numpy as np
import tape
F = tape.nn.functional
warnings.simplefilter('error')
base = np.array([0.0, -1.0, 1e308, 2.0, -np.inf, 3e38])
ops = [
    lambda z: tape.log(z.abs()), lambda z: tape.sqrt(z), lambda z: 1 / z, lambda z: z / z,
    lambda z: tape.exp(z), lambda z: z * z, lambda z: z ** 0.5, lambda z: z ** z,
    lambda z: z.clone().mul_(1e300), lambda z: z.clone().div_(0.0), lambda z: z @ z,
    lambda z: (z * 1e200).var(), lambda z: (z * 1e10).mean(), lambda z: z.prod(),
    lambda z: (z * 1e300).cumprod(0), lambda z: (z * 1e200).norm(), lambda z: z.float(),
    lambda z: F.log_softmax(z * 1e10, 0), lambda z: F.mse_loss(z, z * 2),
    lambda z: tape.sigmoid(-z * 1e10), lambda z: F.softplus(z), lambda z: 10.0 ** z,
]
for big in (False, True):
    for i, f in enumerate(ops):
        z = tape.tensor(np.tile(base, 20000) if big else base, requires_grad=True)
        y = f(z)
        y.sum().backward()
        z2 = tape.tensor(base, requires_grad=True)
        tape.autograd.grad(f(z2).sum(), z2, create_graph=True)
assert np.isinf(tape.tensor([1e308]).numpy()).all()      # float32 by default: inf
p = tape.tensor([1e38, 1.0])                 # an optimizer-style in-place update
p.mul_(1e10)
p -= tape.tensor([float('inf'), 0.0])
assert np.isnan(p.numpy()[0]) and p.numpy()[1] == 1e10
try:
    np.log(np.zeros(1))
except RuntimeWarning:
    print('user numpy still raises')
'''


def test_a_later_error_filter_does_not_turn_tapes_infs_into_exceptions():
    p = subprocess.run([sys.executable, '-c', SCRIPT], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().endswith('user numpy still raises')


@pytest.mark.parametrize('cast', ['double', 'half', 'float'])
def test_dtype_cast_is_named_tocopybackward(cast):
    x = tape.tensor([1.0, 2.0], dtype=tape.float64 if cast == 'float' else tape.float32,
                    requires_grad=True)
    y = getattr(x, cast)()
    assert type(y.grad_fn).__name__ == 'ToCopyBackward0'
    assert type(x.view(2, 1).grad_fn).__name__ == 'ViewBackward0'     # a view stays one
    (y * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize('fn', [F.cross_entropy, F.nll_loss])
def test_class_targets_must_be_int64_or_uint8(fn):
    x = tape.randn(3, 4)
    for dt, name in ((tape.int32, 'Int'), (tape.int16, 'Short'), (tape.int8, 'Char')):
        with pytest.raises(RuntimeError, match=f'expected target dtype to be Long or Byte, but '
                           f'got {name}'):
            fn(x, tape.tensor([1, 2, 3], dtype=dt))
    a = fn(x, tape.tensor([1, 2, 3], dtype=tape.uint8))
    b = fn(x, tape.tensor([1, 2, 3]))
    assert a.item() == b.item()
