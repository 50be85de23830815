"""Gradient parity with PyTorch at special points (0 * inf, 0 / 0, NaN, ties):
xlogy/xlog1py, kl_div, poisson_nll_loss, amax/amin on NaN slices, p-norms'
first and second derivatives, div's gradient in the divisor at extreme
magnitudes.  Values, first and (where PyTorch has them) second derivatives are
compared in float64, NaN positions included."""
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip('torch')
F = torch.nn.functional

INF, NAN = np.inf, np.nan
VALS = np.array([0.0, -0.0, 1.0, -1.0, 2.0, INF, -INF, NAN, 0.5, -2.0, 1e-300])
GX, GY = [a.ravel().copy() for a in np.meshgrid(VALS, VALS)]


def _np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)
    return np.asarray(t.detach().numpy())


def _close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True,
                               err_msg=what)
    # assert_allclose treats inf == inf but also needs NaN positions to agree
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)


def _check(f_torch, f_tape, *arrays, second=False):
    """Values, first derivatives (and with ``second`` the derivatives of a weighted
    sum of the first ones, through create_graph) of f at ``arrays``."""
    tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    pp = [tape.tensor(a, dtype=tape.float64, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        yt, yp = f_torch(*tt), f_tape(*pp)
    _close(_np(yp), _np(yt), 'value')
    w = np.linspace(0.5, 1.5, max(yt.numel(), 1)).reshape(tuple(yt.shape))
    gt = torch.autograd.grad((yt * torch.tensor(w)).sum(), tt, allow_unused=True,
                             create_graph=second)
    gp = tape.autograd.grad((yp * tape.tensor(w)).sum(), pp, allow_unused=True,
                            create_graph=second)
    for i, (a, b) in enumerate(zip(gt, gp)):
        za = np.zeros_like(arrays[i]) if a is None else _np(a)
        zb = np.zeros_like(arrays[i]) if b is None else _np(b)
        _close(zb, za, f'gradient {i}')
    if not second or not any(g is not None and g.requires_grad for g in gt):
        return
    vs = [np.linspace(0.7, 1.3, g.numel()).reshape(tuple(g.shape)) if g is not None else None
          for g in gt]
    st = sum((g * torch.tensor(v)).sum() for g, v in zip(gt, vs) if g is not None)
    sp = sum((g * tape.tensor(v)).sum() for g, v in zip(gp, vs) if g is not None)
    ht = torch.autograd.grad(st, tt, allow_unused=True)
    hp = tape.autograd.grad(sp, pp, allow_unused=True)
    for i, (a, b) in enumerate(zip(ht, hp)):
        za = np.zeros_like(arrays[i]) if a is None else _np(a)
        zb = np.zeros_like(arrays[i]) if b is None else _np(b)
        _close(zb, za, f'second derivative {i}')


# ------------------------------------------------------------------ xlogy
def test_xlogy_grid_first_and_second():
    # d/dx at x == 0, y == inf is inf; d/dy at x == y == 0 is NaN (0 / 0)
    _check(torch.xlogy, tape.xlogy, GX, GY, second=True)


@pytest.mark.parametrize('other', [0.0, INF, -1.0, NAN, 2.0, -INF])
def test_xlogy_number_other(other):
    # XlogyBackward2: no gradient at x == 0 unless other > 0 (so NaN gives 0 there)
    _check(lambda x: torch.xlogy(x, other), lambda x: tape.xlogy(x, other), VALS)


@pytest.mark.parametrize('inp', [0.0, 1.0, -2.0])
def test_xlogy_number_input(inp):
    _check(lambda y: torch.xlogy(inp, y), lambda y: tape.xlogy(inp, y), VALS, second=True)


def test_xlogy_zero_upstream_gradient_and_broadcast():
    # xlogy(grad, y) in PyTorch's d/dx: a zero upstream gradient gives 0 even at y == 0
    mask = (np.arange(GX.size) % 2).astype(np.float64)
    _check(lambda x, y: torch.xlogy(x, y) * torch.tensor(mask),
           lambda x, y: tape.xlogy(x, y) * tape.tensor(mask), GX, GY, second=True)
    _check(torch.xlogy, tape.xlogy, VALS.reshape(-1, 1), VALS.reshape(1, -1), second=True)


def test_xlogy_node_names_and_dtypes():
    x = tape.tensor([0.0, 1.0], requires_grad=True)
    assert type(tape.xlogy(x, x).grad_fn).__name__ == 'XlogyBackward0'
    assert type(tape.xlogy(2.0, x).grad_fn).__name__ == 'XlogyBackward1'
    assert type(tape.xlogy(x, 2.0).grad_fn).__name__ == 'XlogyBackward2'
    assert type(tape.special.xlog1py(x, x).grad_fn).__name__ == 'SpecialXlog1PyBackward0'
    x32 = tape.tensor([0.0, 1.0, 2.0], dtype=tape.float32, requires_grad=True)
    y64 = tape.tensor([0.0, 2.0, 3.0], dtype=tape.float64, requires_grad=True)
    z = tape.xlogy(x32, y64)
    gx, gy = tape.autograd.grad(z.sum(), [x32, y64])
    assert z.dtype == tape.float64 and gx.dtype == tape.float32 and gy.dtype == tape.float64
    xt = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    yt = torch.tensor([0.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    wx, wy = torch.autograd.grad(torch.xlogy(xt, yt).sum(), [xt, yt])
    _close(_np(gx), _np(wx), 'x')
    _close(_np(gy), _np(wy), 'y')


def test_xlog1py_grid_and_numbers():
    _check(torch.special.xlog1py, tape.special.xlog1py, GX, GY, second=True)
    for other in (-1.0, INF, -2.0, NAN, 2.0):
        _check(lambda x: torch.special.xlog1py(x, other),
               lambda x: tape.special.xlog1py(x, other), VALS)
        _check(lambda y: torch.special.xlog1py(other, y),
               lambda y: tape.special.xlog1py(other, y), VALS, second=True)


# ------------------------------------------------------------------ losses
@pytest.mark.parametrize('log_target', [False, True])
@pytest.mark.parametrize('reduction', ['none', 'sum', 'mean', 'batchmean'])
def test_kl_div_at_zero_targets(log_target, reduction):
    # PyTorch's target gradient is xlogy's: NaN at target == 0 (t / t)
    _check(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
           lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
           GX, GY, second=True)


@pytest.mark.parametrize('log_input', [True, False])
@pytest.mark.parametrize('full', [False, True])
@pytest.mark.parametrize('reduction', ['none', 'sum', 'mean'])
def test_poisson_nll_loss_at_zero_targets(log_input, full, reduction):
    # full: Stirling's term masked (masked_fill) where target <= 1, whose target
    # gradient is 0 * (log t + 1 + 1 / (2 t)): NaN at t <= 0
    _check(lambda a, b: F.poisson_nll_loss(a, b, log_input=log_input, full=full,
                                           reduction=reduction),
           lambda a, b: TF.poisson_nll_loss(a, b, log_input=log_input, full=full,
                                            reduction=reduction),
           GX, GY, second=True)


# ------------------------------------------------------------------ reductions
M = np.array([[1.0, NAN, 3.0, NAN], [2.0, 2.0, 1.0, 0.0], [NAN, NAN, NAN, NAN],
              [INF, 1.0, INF, -INF], [-INF, -INF, 0.0, 1.0], [5.0, 5.0, 5.0, 5.0]])


@pytest.mark.parametrize('name', ['amax', 'amin'])
@pytest.mark.parametrize('dim', [0, 1, (0, 1), None])
@pytest.mark.parametrize('keepdim', [False, True])
def test_amax_amin_nan_slices(name, dim, keepdim):
    # scale_grad_by_count: (grad / (result == x).sum()) * mask, 0 / 0 on a NaN slice
    if dim is None:
        _check(lambda x: getattr(torch, name)(x), lambda x: getattr(tape, name)(x), M)
        return
    _check(lambda x: getattr(torch, name)(x, dim, keepdim),
           lambda x: getattr(tape, name)(x, dim, keepdim), M, second=True)


@pytest.mark.parametrize('name', ['max', 'min'])
def test_max_min_nan_slices(name):
    # with a dim the first NaN takes the gradient; of all elements the NaNs share it
    _check(lambda x: getattr(torch, name)(x, 1)[0], lambda x: getattr(tape, name)(x, 1)[0], M)
    _check(lambda x: getattr(torch, name)(x, 0, True)[0],
           lambda x: getattr(tape, name)(x, 0, True)[0], M)
    _check(lambda x: getattr(torch, name)(x), lambda x: getattr(tape, name)(x), M)


NV = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, -2.0], [-0.0, 3.0, 0.0], [1.0, -1.0, 0.5],
               [INF, 1.0, 0.0], [NAN, 1.0, 0.0], [0.0, -INF, 2.0]])


@pytest.mark.parametrize('ord', [3, 4, 2.5, 1.5, 0.5, -1, -2, INF, -INF, 2, 1])
@pytest.mark.parametrize('dim', [1, None])
def test_vector_norm_special_points(ord, dim):
    # first derivatives with inf and NaN rows; second derivatives where finite
    # (a zero row for ord=3: 0, where the composite |x|^3 root gave NaN)
    _check(lambda x: torch.linalg.vector_norm(x, ord, dim),
           lambda x: tape.linalg.vector_norm(x, ord, dim), NV)
    _check(lambda x: torch.linalg.vector_norm(x, ord, dim),
           lambda x: tape.linalg.vector_norm(x, ord, dim), NV[:4], second=True)


def test_vector_norm_ord3_double_backward_at_zero():
    x = tape.tensor([0.0, 0.0], dtype=tape.float64, requires_grad=True)
    g, = tape.autograd.grad(tape.linalg.vector_norm(x, 3), x, create_graph=True)
    h, = tape.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(_np(h), [0.0, 0.0])
    assert type(tape.linalg.vector_norm(x, 3).grad_fn).__name__ == 'LinalgVectorNormBackward0'


@pytest.mark.parametrize('p', [3, 0.5])
def test_norm_and_normalize_second_derivatives(p):
    _check(lambda x: torch.norm(x, p, 1), lambda x: tape.norm(x, p, 1), NV[:4], second=True)
    _check(lambda x: F.normalize(x, p, 1), lambda x: TF.normalize(x, p, 1), NV[:4],
           second=True)


# ------------------------------------------------------------------ div
def test_div_divisor_gradient_extreme_magnitudes():
    # PyTorch's -grad * ((a / b) / b): b * b under/overflows at 1e-200 / 1e200
    a = np.array([1.0, 1e-100, 1e150, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1e-160])
    b = np.array([1e-200, 1e200, 1e-300, 2.0, -3.0, 0.0, -0.0, INF, NAN, 1e-160])
    _check(torch.div, tape.div, a, b, second=True)
    # the large-tensor path's chunk kernel
    _check(torch.div, tape.div, np.tile(a, 2000), np.tile(b, 2000))


def test_div_kernel_agrees_with_create_graph_form():
    # b * b is 0 or inf here, (a / b) / b is not
    a = np.array([1e-250, 1e200, 1e-290, 3.0])
    b = np.array([1e-200, 1e200, 1e-160, 2.0])
    outs = []
    for cg in (False, True):
        x = tape.tensor(a, dtype=tape.float64, requires_grad=True)
        y = tape.tensor(b, dtype=tape.float64, requires_grad=True)
        _, gy = tape.autograd.grad((x / y).sum(), [x, y], create_graph=cg)
        outs.append(_np(gy))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], -(a / b) / b, rtol=1e-15)
    assert np.isfinite(outs[0]).all() and (outs[0] != 0).all()
