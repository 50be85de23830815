"""The composites (tape/_composites.py) and tape.nn.functional's newer functions in
regimes their own tests skip: float32 and large inputs, non-contiguous views,
0-d, empty, integer and bool inputs, against PyTorch.  Each test below pinned a
discrepancy that was fixed."""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip('torch')
import torch.nn.functional as PF  # noqa: E402


def _raises_like(fn_tape, fn_torch):
    """tape raises the (builtin) exception type that PyTorch raises."""
    with pytest.raises(Exception) as et:
        fn_torch()
    want = next(c for c in type(et.value).__mro__ if c.__module__ == 'builtins')
    with pytest.raises(want):
        fn_tape()


def _grad(m, fn, arr, dtype):
    x = m.tensor(arr, dtype=dtype, requires_grad=True)
    fn(m, x).sum().backward()
    return np.asarray(x.grad.numpy())


# ---------------------------------------------------------------- composites
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_logit_gradient_nan_outside_unit_interval(dtype):
    arr = np.array([-0.5, 0.3, 1.5, 0.9])
    gt = _grad(tape, lambda m, x: m.logit(x), arr, getattr(tape, dtype))
    gp = _grad(torch, lambda m, x: m.logit(x), arr, getattr(torch, dtype))
    assert gt.dtype == np.dtype(dtype)
    np.testing.assert_allclose(gt, gp, rtol=1e-5, equal_nan=True)


def test_xlogy_shapes_that_do_not_broadcast_raise_runtime_error():
    _raises_like(lambda: tape.xlogy(tape.ones(3, 4), tape.ones(3)),
                 lambda: torch.xlogy(torch.ones(3, 4), torch.ones(3)))


def test_kthvalue_empty_dim_is_index_error():
    _raises_like(lambda: tape.kthvalue(tape.zeros(3, 0), 1),
                 lambda: torch.kthvalue(torch.zeros(3, 0), 1))


def test_median_of_empty_keeps_the_graph():
    x = tape.zeros(0, 3, requires_grad=True)
    y = tape.median(x)
    assert y.requires_grad and np.isnan(y.item())
    y.backward()
    assert x.grad.shape == (0, 3)


def test_diagonal_of_0d_and_1d_is_index_error():
    for arr in (np.array(1.0), np.zeros(3)):
        _raises_like(lambda: tape.diagonal(tape.tensor(arr)),
                     lambda: torch.diagonal(torch.tensor(arr)))


def test_roll_0d_with_dims_is_index_error():
    _raises_like(lambda: tape.roll(tape.tensor(1.0), 1, 0),
                 lambda: torch.roll(torch.tensor(1.0), 1, 0))


def test_topk_0d_with_k_0_gives_the_element():
    rt = tape.topk(tape.tensor(2.5), 0)
    rp = torch.topk(torch.tensor(2.5), 0)
    assert tuple(rt.values.shape) == tuple(rp.values.shape) == ()
    assert rt.values.item() == rp.values.item()


@pytest.mark.parametrize('call', [
    lambda m, x: m.topk(x, 1), lambda m, x: m.kthvalue(x, 1), lambda m, x: m.median(x),
    lambda m, x: m.median(x, 0), lambda m, x: m.nanmedian(x), lambda m, x: m.trace(x),
    lambda m, x: m.addcmul(x, x, x), lambda m, x: m.tensordot(x, x.T, 1),
    lambda m, x: m.cdist(x, x),
])
def test_bool_inputs_refused_as_torch(call):
    a = np.array([[True, False], [False, True]])
    _raises_like(lambda: call(tape, tape.tensor(a)), lambda: call(torch, torch.tensor(a)))


@pytest.mark.parametrize('dt', ['int64', 'int32'])
def test_lerp_of_integers_refused(dt):
    a = np.arange(4).reshape(2, 2).astype(dt)
    _raises_like(lambda: tape.lerp(tape.tensor(a), tape.tensor(a), 0.5),
                 lambda: torch.lerp(torch.tensor(a), torch.tensor(a), 0.5))
    _raises_like(lambda: tape.tensor(a).lerp_(tape.tensor(a), 0.5),
                 lambda: torch.tensor(a).lerp_(torch.tensor(a), 0.5))


def test_nanmean_of_integers_refused_even_with_dtype():
    _raises_like(lambda: tape.nanmean(tape.tensor([1, 2]), dtype=tape.float64),
                 lambda: torch.nanmean(torch.tensor([1, 2]), dtype=torch.float64))


def test_index_add_source_dtype_must_match():
    _raises_like(lambda: tape.zeros(3).index_add(0, tape.tensor([0]),
                                                 tape.ones(1, dtype=tape.float64)),
                 lambda: torch.zeros(3).index_add(0, torch.tensor([0]),
                                                  torch.ones(1, dtype=torch.float64)))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_large_sort_roll_nanmean_float32_and_views(dtype):
    rng = np.random.default_rng(0)
    arr = rng.standard_normal((200, 130)).astype(dtype)
    g = rng.standard_normal((130, 100)).astype(dtype)
    outs = []
    for m in (tape, torch):
        x = m.tensor(arr, requires_grad=True)
        v = x.T[:, ::2]                                  # non-contiguous, >= 16384 elements
        y = m.sort(v, 0).values + m.roll(v, 3, -1) + m.nanmean(v, 0, keepdim=True)
        (y * m.tensor(g)).sum().backward()
        outs.append((np.asarray(y.detach().numpy()), np.asarray(x.grad.numpy())))
    (yt, gt), (yp, gp) = outs
    assert yt.dtype == gt.dtype == np.dtype(dtype)
    np.testing.assert_allclose(yt, yp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gt, gp, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------- functional
@pytest.mark.parametrize('name,call', [
    ('hardswish', lambda F, x: F.hardswish(x)), ('hardsigmoid', lambda F, x: F.hardsigmoid(x)),
    ('mish', lambda F, x: F.mish(x)), ('selu', lambda F, x: F.selu(x)),
    ('celu', lambda F, x: F.celu(x)), ('glu', lambda F, x: F.glu(x, 0)),
    ('softmin', lambda F, x: F.softmin(x, -1)), ('softmax', lambda F, x: F.softmax(x, 0)),
    ('log_softmax', lambda F, x: F.log_softmax(x, 1)),
    ('softshrink', lambda F, x: F.softshrink(x)), ('hardshrink', lambda F, x: F.hardshrink(x)),
    ('logsigmoid', lambda F, x: F.logsigmoid(x)),
    ('layer_norm', lambda F, x: F.layer_norm(x, (2,))), ('rms_norm', lambda F, x: F.rms_norm(x, (2,))),
    ('group_norm', lambda F, x: F.group_norm(x, 1)),
    ('batch_norm', lambda F, x: F.batch_norm(x, None, None, training=True)),
    ('instance_norm', lambda F, x: F.instance_norm(x.reshape(1, 2, 2))),
    ('huber', lambda F, x: F.huber_loss(x, x)), ('soft_margin', lambda F, x: F.soft_margin_loss(x, x)),
    ('gaussian_nll', lambda F, x: F.gaussian_nll_loss(x, x, x)),
    ('kl_div', lambda F, x: F.kl_div(x, x, reduction='sum')),
    ('multilabel_soft_margin', lambda F, x: F.multilabel_soft_margin_loss(x, x)),
])
def test_integer_inputs_refused_as_torch(name, call):
    a = np.array([[1, 2], [3, 4]])
    _raises_like(lambda: call(TF, tape.tensor(a)), lambda: call(PF, torch.tensor(a)))


@pytest.mark.parametrize('call', [
    lambda F, x: F.softsign(x), lambda F, x: F.tanhshrink(x), lambda F, x: F.threshold(x, 0, 1),
    lambda F, x: F.l1_loss(x, x), lambda F, x: F.poisson_nll_loss(x, x),
    lambda F, x: F.pairwise_distance(x, x),
])
def test_bool_inputs_refused_as_torch_functional(call):
    a = np.array([[True, False], [False, True]])
    _raises_like(lambda: call(TF, tape.tensor(a)), lambda: call(PF, torch.tensor(a)))


def test_kl_div_negative_target_is_nan_as_torch():
    x = np.array([0.3, -0.2, 0.1])
    t = np.array([0.5, -0.25, 0.0])
    vt = TF.kl_div(tape.tensor(x), tape.tensor(t), reduction='none').numpy()
    vp = PF.kl_div(torch.tensor(x), torch.tensor(t), reduction='none').numpy()
    np.testing.assert_allclose(vt, vp, equal_nan=True)


def test_0d_inputs_index_error():
    _raises_like(lambda: TF.normalize(tape.tensor(1.0)), lambda: PF.normalize(torch.tensor(1.0)))
    _raises_like(lambda: TF.multilabel_soft_margin_loss(tape.tensor(1.0), tape.tensor(1.0)),
                 lambda: PF.multilabel_soft_margin_loss(torch.tensor(1.0), torch.tensor(1.0)))


def test_group_norm_empty_batch():
    yt = TF.group_norm(tape.zeros(0, 4, 3), 2)
    yp = PF.group_norm(torch.zeros(0, 4, 3), 2)
    assert tuple(yt.shape) == tuple(yp.shape) == (0, 4, 3)
