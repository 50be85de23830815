"""Edge cases of single ops found by a comparison with PyTorch: NaN in min/argmin,
softmax precision for large logits, cross_entropy with every target ignored,
atan2's dtype and the masked gradients of pow and atan2 at zero.

Each test states the expected value itself and, where PyTorch is installed,
checks it against PyTorch too."""
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as F

NAN = float('nan')
INF = float('inf')


def _grads(fn, values, create_graph=False, dtype=tape.float64):
    """Gradients of ``fn(*xs).sum()`` for leaves made from ``values``."""
    xs = [tape.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        gs = tape.autograd.grad(fn(tape, *xs).sum(), xs, create_graph=create_graph)
    return [g.detach().numpy() for g in gs]


def _torch_grads(torch, fn, values):
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    return [g.numpy() for g in torch.autograd.grad(fn(torch, *xs).sum(), xs)]


# --------------------------------------------------------------- min, argmin
def test_min_and_argmin_along_a_dim_with_nan_in_one_row():
    x = tape.tensor([[1.0, NAN, 3.0], [2.0, 1.0, 0.0], [-INF, NAN, NAN]])
    values, indices = tape.min(x, 1)
    np.testing.assert_array_equal(values.numpy(), [NAN, 0.0, NAN])
    np.testing.assert_array_equal(indices.numpy(), [1, 2, 1])
    np.testing.assert_array_equal(tape.argmin(x, 1).numpy(), [1, 2, 1])
    np.testing.assert_array_equal(tape.argmin(x, 0).numpy(), [2, 0, 2])
    assert tape.argmin(x).item() == 1


def test_min_gradient_goes_to_the_chosen_element_of_each_row():
    x = tape.tensor([[1.0, NAN, 3.0], [2.0, 1.0, 0.0]], dtype=tape.float64,
                    requires_grad=True)
    tape.min(x, 1).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [0, 0, 1]])


def test_min_nan_matches_torch():
    torch = pytest.importorskip('torch')
    d = np.array([[1.0, NAN, 3.0], [2.0, 1.0, 0.0], [NAN, 5.0, NAN], [4.0, 4.0, 9.0]])
    for dim in (0, 1):
        want = torch.min(torch.tensor(d), dim)
        got = tape.min(tape.tensor(d), dim)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        np.testing.assert_array_equal(tape.argmin(tape.tensor(d), dim).numpy(),
                                      torch.argmin(torch.tensor(d), dim).numpy())


# ---------------------------------------------------------------- softmax
def test_softmax_of_large_equal_logits_in_float32():
    s = tape.softmax(tape.tensor([1e8, 1e8]), 0)
    assert s.dtype == tape.float32
    np.testing.assert_array_equal(s.numpy(), [0.5, 0.5])


def test_log_softmax_keeps_float32_precision_for_large_logits():
    got = F.log_softmax(tape.tensor([1e5, 1e5 + 1.0]), 0).numpy()
    want = np.array([-1.0, 0.0]) - np.log1p(np.exp(-1.0))     # shift-invariant
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_softmax_gradient_for_large_logits():
    x = tape.tensor([1e8, 1e8], requires_grad=True)
    (tape.softmax(x, 0) * tape.tensor([1.0, 0.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.25, -0.25], rtol=1e-6)


def test_softmax_with_an_inf_logit_is_nan_like_torch():
    assert np.isnan(tape.softmax(tape.tensor([INF, 0.0]), 0).numpy()).all()
    assert np.isnan(F.log_softmax(tape.tensor([INF, 0.0]), 0).numpy()).all()
    np.testing.assert_allclose(tape.softmax(tape.tensor([-INF, 0.0, 1.0]), 0).numpy(),
                               [0.0, 0.26894142, 0.73105858], rtol=1e-6)


@pytest.mark.parametrize('scale', [1.0, 1e3, 1e5])
def test_softmax_and_log_softmax_match_torch_in_float32(scale):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    d = (rng.standard_normal((4, 7)) * scale + scale).astype(np.float32)
    w = rng.standard_normal((4, 7)).astype(np.float32)
    for name in ('softmax', 'log_softmax'):
        x = tape.tensor(d, requires_grad=True)
        tx = torch.tensor(d, requires_grad=True)
        y = getattr(F, name)(x, 1)
        ty = getattr(torch.nn.functional, name)(tx, 1)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-6,
                                   atol=1e-6)
        (y * tape.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_large_logit_softmax_float64_gradients_match_torch():
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(1)
    d = rng.standard_normal((3, 5)) * 50 + 1e6

    def f(m, x):
        return m.nn.functional.log_softmax(x, 1) * m.tensor(np.arange(15.0).reshape(3, 5))
    for got, want in zip(_grads(f, [d]), _torch_grads(torch, f, [d])):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    for got, want in zip(_grads(f, [d], create_graph=True), _torch_grads(torch, f, [d])):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_softmax_replays_under_jit_with_large_logits():
    @tape.jit
    def f(x):
        return F.log_softmax(x, 1).sum()
    small = tape.tensor(np.random.default_rng(2).standard_normal((2, 3)), requires_grad=True)
    big = tape.tensor(np.array([[1e8, 1e8, 0.0], [1.0, 2.0, 3.0]]), requires_grad=True)
    for x in (small, big, small, big):
        y = f(x)
        x.grad = None
        y.backward()
        want = F.log_softmax(x.detach(), 1).sum().item()
        np.testing.assert_allclose(y.item(), want, rtol=1e-12)


# ----------------------------------------------------------- cross_entropy
@pytest.mark.parametrize('smoothing', [0.0, 0.1])
def test_cross_entropy_with_every_target_ignored_has_zero_gradient(smoothing):
    x = tape.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    loss = F.cross_entropy(x, tape.tensor([1, 1, 1]), ignore_index=1,
                           label_smoothing=smoothing)
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 4)))
    g, = tape.autograd.grad(F.cross_entropy(x, tape.tensor([1, 1, 1]), ignore_index=1,
                                            label_smoothing=smoothing), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), np.zeros((3, 4)))


def test_nll_loss_with_every_target_ignored_has_zero_gradient():
    x = tape.tensor(np.random.default_rng(4).standard_normal((2, 3)), requires_grad=True)
    loss = F.nll_loss(x, tape.tensor([-100, -100]))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize('kw', [dict(ignore_index=1), dict(ignore_index=1, label_smoothing=0.1),
                                dict(weight=[1.0, 0.0, 1.0, 1.0]),
                                dict(weight=[1.0, 0.0, 1.0, 1.0], label_smoothing=0.2),
                                dict(ignore_index=1, reduction='sum')])
def test_cross_entropy_without_counted_targets_matches_torch(kw):
    torch = pytest.importorskip('torch')
    d = np.random.default_rng(5).standard_normal((3, 4))
    out = []
    for m in (tape, torch):
        x = m.tensor(d, requires_grad=True)
        args = {k: m.tensor(v, dtype=m.float64) if k == 'weight' else v for k, v in kw.items()}
        loss = m.nn.functional.cross_entropy(x, m.tensor([1, 1, 1]), **args)
        loss.backward()
        out.append((loss.item(), x.grad.numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], equal_nan=True)
    np.testing.assert_allclose(out[0][1], out[1][1], equal_nan=True)


# ------------------------------------------------------------------- atan2
def test_atan2_of_integers_and_bools_is_float32():
    got = tape.atan2(tape.tensor([1, 2]), tape.tensor([2, 1]))
    assert got.dtype == tape.float32
    np.testing.assert_allclose(got.numpy(), np.arctan2([1.0, 2.0], [2.0, 1.0]), rtol=1e-6)
    b = tape.atan2(tape.tensor([True, False]), tape.tensor([True, True]))
    assert b.dtype == tape.float32
    np.testing.assert_allclose(b.numpy(), [np.pi / 4, 0.0], rtol=1e-7)
    assert tape.atan2(tape.tensor([1, 2], dtype=tape.int32), tape.tensor(3)).dtype == tape.float32
    assert tape.atan2(tape.tensor([1, 2]), tape.tensor([1.0, 2.0],
                                                       dtype=tape.float64)).dtype == tape.float64


def test_atan2_dtypes_match_torch():
    torch = pytest.importorskip('torch')
    dts = ['bool', 'int32', 'int64', 'float32', 'float64']
    for d1 in dts:
        for d2 in dts:
            a, b = np.array([1, 0, 3]).astype(d1), np.array([2, 1, 1]).astype(d2)
            want = torch.atan2(torch.tensor(a), torch.tensor(b))
            got = tape.atan2(tape.tensor(a), tape.tensor(b))
            assert str(got.dtype) == str(want.dtype).replace('torch.', ''), (d1, d2)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# ------------------------------------------- gradients masked at zero (pow, atan2)
GRAD_CASES = [
    # (name, fn, inputs, expected gradients)
    ('rpow_zero_base', lambda m, x: m.pow(0.0, x), [[0.0, 1.0, 4.0, -1.0, 0.5]],
     [[0.0, 0.0, 0.0, -INF, 0.0]]),
    ('rpow_two', lambda m, x: m.pow(2.0, x), [[0.0, 1.0, -1.0]],
     [[np.log(2.0), 2 * np.log(2.0), 0.5 * np.log(2.0)]]),
    ('pow_zero_base', lambda m, x, y: m.pow(x, y), [[0.0, 2.0, 0.0, 0.0, 0.0],
                                                    [0.0, 1.0, 1.0, 2.0, 0.5]],
     [[0.0, 1.0, 1.0, 0.0, INF], [0.0, 2.0 * np.log(2.0), 0.0, 0.0, 0.0]]),
    ('atan2_origin', lambda m, y, x: m.atan2(y, x), [[0.0, 1e-200, 1.0], [0.0, 0.0, 1.0]],
     [[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]]),
]


@pytest.mark.parametrize('create_graph', [False, True])
@pytest.mark.parametrize('case', GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_masked_gradients_at_zero(case, create_graph):
    _, fn, values, want = case
    for got, w in zip(_grads(fn, values, create_graph), want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=0)


@pytest.mark.parametrize('case', GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_masked_gradients_at_zero_match_torch(case):
    torch = pytest.importorskip('torch')
    _, fn, values, _ = case
    for got, want in zip(_grads(fn, values), _torch_grads(torch, fn, values)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)


def test_masked_pow_gradients_on_the_large_tensor_path():
    n = 130 * 130
    x = np.zeros(n)
    x[1::2] = 2.0
    y = np.where(np.arange(n) % 3 == 0, 0.0, 1.0)
    gx, gy = _grads(lambda m, a, b: m.pow(a, b) + m.pow(0.0, b), [x, y])
    assert np.isfinite(gx).all() and np.isfinite(gy).all()
    np.testing.assert_array_equal(gx[::6], 0.0)        # 0 ** 0
    np.testing.assert_allclose(gx[1::2], np.where(y[1::2] == 0, 0.0, 1.0))


# ----------------------------------------------- empty and 0-d reductions
@pytest.mark.parametrize('name', ['amax', 'amin', 'argmax', 'argmin'])
def test_reducing_an_empty_tensor_along_a_nonempty_dim(name):
    f = getattr(tape, name)
    got = f(tape.zeros(0, 3), 1)
    assert tuple(got.shape) == (0,)
    assert tuple(f(tape.zeros(0, 3), 1, keepdim=True).shape) == (0, 1)
    with pytest.raises(IndexError, match='dim 0 to have non-zero size'):
        f(tape.zeros(0, 3), 0)


def test_amax_of_an_empty_tensor_backward():
    x = tape.zeros(0, 3, requires_grad=True)
    x.amax(1).sum().backward()
    assert tuple(x.grad.shape) == (0, 3)


@pytest.mark.parametrize('dim', [0, -1, (0,)])
def test_all_and_any_of_a_0d_tensor_along_dim(dim):
    assert tape.tensor(1.0).all(dim).item() is True
    assert tape.tensor(0.0).any(dim=dim, keepdim=True).item() is False
    assert tape.tensor(0.0).all(dim).shape == ()


def test_all_of_a_0d_tensor_along_dim_1_raises():
    with pytest.raises(IndexError, match='Dimension out of range'):
        tape.tensor(1.0).all(1)


# --------------------------------------------------------- NaN gradients
def test_maximum_and_minimum_pass_the_gradient_to_both_sides_of_a_nan():
    a = [NAN, 1.0, 2.0, 3.0]
    b = [1.0, NAN, 2.0, 1.0]
    for create_graph in (False, True):
        ga, gb = _grads(lambda m, x, y: m.maximum(x, y), [a, b], create_graph)
        np.testing.assert_array_equal(ga, [1.0, 1.0, 0.5, 1.0])
        np.testing.assert_array_equal(gb, [1.0, 1.0, 0.5, 0.0])
        ga, gb = _grads(lambda m, x, y: m.minimum(x, y), [a, b], create_graph)
        np.testing.assert_array_equal(ga, [1.0, 1.0, 0.5, 0.0])
        np.testing.assert_array_equal(gb, [1.0, 1.0, 0.5, 1.0])


def test_sign_of_nan_is_zero_and_abs_passes_no_gradient_there():
    np.testing.assert_array_equal(tape.sign(tape.tensor([NAN, -2.0, 0.0, 3.0])).numpy(),
                                  [0.0, -1.0, 0.0, 1.0])
    for create_graph in (False, True):
        g, = _grads(lambda m, x: m.abs(x), [[NAN, -2.0, 3.0]], create_graph)
        np.testing.assert_array_equal(g, [0.0, -1.0, 1.0])


def test_sign_of_nan_replays_under_jit():
    @tape.jit
    def f(x):
        return tape.sign(x) * 2.0 + x.abs()
    x = tape.tensor([NAN, -2.0, 3.0], dtype=tape.float64, requires_grad=True)
    for _ in range(3):
        x.grad = None
        y = f(x)
        np.testing.assert_array_equal(y.detach().numpy(), [NAN, 0.0, 5.0])
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, -1.0, 1.0])
    assert f.stats()['replays'] >= 1


@pytest.mark.parametrize('name', ['maximum', 'minimum'])
def test_maximum_minimum_nan_gradients_match_torch(name):
    torch = pytest.importorskip('torch')
    vals = [[NAN, 1.0, 2.0, 3.0, NAN], [1.0, NAN, 2.0, 1.0, NAN]]

    def fn(m, x, y):
        return getattr(m, name)(x, y)
    for got, want in zip(_grads(fn, vals), _torch_grads(torch, fn, vals)):
        np.testing.assert_array_equal(got, want)


def test_hardtanh_and_relu6_gradients_are_cut_at_the_bounds():
    x = tape.tensor([-1.0, 1.0, 0.5, -3.0, 0.0, 6.0, 7.0], dtype=tape.float64,
                    requires_grad=True)
    F = tape.nn.functional
    (F.hardtanh(x).sum() + F.relu6(x * 1).sum()).backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 0.0, 0.0]
    g, = tape.autograd.grad(F.hardtanh(x).sum(), x, create_graph=True)
    assert g.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    assert F.hardtanh(x).grad_fn.name() == 'HardtanhBackward0'


@pytest.mark.parametrize('name, kernel', [('gelu', 'GeluKernelImpl'), ('elu', 'elu_cpu'),
                                          ('silu', 'silu_cpu'),
                                          ('leaky_relu', 'leaky_relu_cpu'),
                                          ('softplus', 'softplus_cpu')])
def test_activations_refuse_integers_as_pytorch(name, kernel):
    with pytest.raises(NotImplementedError, match=kernel):
        getattr(tape.nn.functional, name)(tape.tensor([1, 2]))


def test_hardtanh_keeps_an_integer_dtype():
    F = tape.nn.functional
    assert F.hardtanh(tape.tensor([-3, 0, 3])).tolist() == [-1, 0, 1]
    r = F.relu6(tape.tensor([-3, 0, 9], dtype=tape.int32))
    assert r.dtype == tape.int32 and r.tolist() == [0, 0, 6]


def test_norm_below_one_at_zero_has_a_zero_gradient():
    x = tape.tensor([0.0, 1.0, -2.0, 0.0], dtype=tape.float64, requires_grad=True)
    tape.norm(x, p=0.5).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 2.414213562373095, -1.7071067811865472,
                                                0.0], rtol=1e-12)
    z = tape.zeros(3, requires_grad=True)
    tape.norm(z, p=0.5).backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]
