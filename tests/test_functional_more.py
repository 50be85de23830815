"""The rest of tape.nn.functional (padding, activations, losses, embedding, dropout
variants, normalization) against PyTorch's torch.nn.functional, in float64.

Each case is one function of ``(F, lib, *tensors)`` run once with
``tape.nn.functional`` and once with ``torch.nn.functional`` (the two share
argument names), so the same code states both sides.  Values and the
gradients of every floating input (for one random upstream gradient) must
agree to 1e-6; a sample of each is also checked by ``tape.autograd.gradcheck``.
"""
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip('torch')
import torch.nn.functional as PF  # noqa: E402


def _shp(shape):
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple) else shape


def R(*shape, seed=0):
    shape = _shp(shape)
    return np.random.default_rng(seed + 7 * len(shape) + sum(shape)).standard_normal(shape)


def P(*shape, seed=1):                  # positive values
    return np.abs(R(*shape, seed=seed)) + 0.1


def PROB(*shape, seed=2):              # rows of probabilities (last dim)
    e = np.exp(R(*shape, seed=seed))
    return e / e.sum(-1, keepdims=True)


def SIGN(*shape, seed=3):
    return np.where(R(*shape, seed=seed) > 0, 1.0, -1.0)


def U01(*shape, seed=4):
    return np.random.default_rng(seed).uniform(0.05, 0.95, shape)


def IDX(*shape, high=5, seed=5):
    shape = _shp(shape)
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int64)


def _to_lib(arrays, lib, grads):
    out = []
    for a, g in zip(arrays, grads):
        if a.dtype.kind == 'f':
            out.append(lib.tensor(a.copy(), dtype=lib.float64, requires_grad=g))
        else:
            out.append(lib.tensor(a.copy()))
    return out


def compare(fn, arrays, grads=None, atol=1e-6, rtol=1e-6):
    """fn(F, lib, *tensors) with tape and with torch: same values and gradients."""
    grads = grads if grads is not None else [a.dtype.kind == 'f' for a in arrays]
    tt = _to_lib(arrays, tape, grads)
    pt = _to_lib(arrays, torch, grads)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        mine = fn(TF, tape, *tt)
        ref = fn(PF, torch, *pt)
    np.testing.assert_allclose(np.asarray(mine.detach().numpy(), dtype=np.float64),
                               ref.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)
    assert tuple(mine.shape) == tuple(ref.shape)
    if not ref.requires_grad:
        return
    up = np.random.default_rng(11).standard_normal(tuple(ref.shape))
    mine.backward(tape.tensor(up, dtype=mine.dtype))
    ref.backward(torch.tensor(up, dtype=ref.dtype))
    for t, p in zip(tt, pt):
        if isinstance(p, torch.Tensor) and p.requires_grad:
            if p.grad is None:              # (not reached in PyTorch's graph)
                assert t.grad is None or not t.grad.numpy().any()
                continue
            assert t.grad is not None
            np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=rtol, atol=atol)


def gradcheck(fn, arrays, grads=None):
    grads = grads if grads is not None else [a.dtype.kind == 'f' for a in arrays]
    tt = _to_lib(arrays, tape, grads)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert tape.autograd.gradcheck(lambda *ts: fn(TF, tape, *ts), tuple(tt))


# (id, fn(F, lib, *tensors), list of input sets); the first set is also gradchecked
CASES = [
    ('pad_constant', lambda F, L, x: F.pad(x, (1, 2, 0, 1), value=0.5),
     [[R(3, 4)], [R(2, 3, 4)]]),
    ('pad_constant_negative', lambda F, L, x: F.pad(x, (-1, 2, 1, -1, 1, 0)),
     [[R(2, 3, 4)], [R(3, 3, 3, 2)]]),
    ('pad_constant_0d_dims', lambda F, L, x: F.pad(x, (1, 1)), [[R(4)], [R(2, 0, 3)]]),
    ('pad_reflect_1d', lambda F, L, x: F.pad(x, (2, 1), mode='reflect'),
     [[R(2, 4)], [R(2, 3, 5)]]),
    ('pad_reflect_2d', lambda F, L, x: F.pad(x, (1, 2, 2, 1), mode='reflect'),
     [[R(2, 3, 4)], [R(2, 2, 3, 4)]]),
    ('pad_reflect_negative', lambda F, L, x: F.pad(x, (-1, 2), mode='reflect'), [[R(2, 4)]]),
    ('pad_replicate_2d', lambda F, L, x: F.pad(x, (3, 1, 0, 2), mode='replicate'),
     [[R(2, 3, 4)], [R(1, 2, 3, 4)]]),
    ('pad_replicate_3d', lambda F, L, x: F.pad(x, (1, 1, 2, 0, 0, 1), mode='replicate'),
     [[R(2, 2, 3, 2)], [R(1, 2, 2, 3, 2)]]),
    ('pad_circular', lambda F, L, x: F.pad(x, (2, 1, 1, 1), mode='circular'),
     [[R(2, 3, 4)], [R(1, 2, 3, 4)]]),
    ('pad_circular_negative', lambda F, L, x: F.pad(x, (-1, 2), mode='circular'),
     [[R(2, 4)], [R(1, 2, 3)]]),
    ('one_hot', lambda F, L, i: F.one_hot(i).double(), [[IDX(2, 3)], [IDX(5)]]),
    ('one_hot_classes', lambda F, L, i: F.one_hot(i, 7).double(), [[IDX(2, 3)], [IDX(())]]),
    ('hardswish', lambda F, L, x: F.hardswish(x * 3), [[R(3, 4)], [R(10)]]),
    ('hardsigmoid', lambda F, L, x: F.hardsigmoid(x * 3), [[R(3, 4)], [R(10)]]),
    ('mish', lambda F, L, x: F.mish(x * 3), [[R(3, 4)], [R(())]]),
    ('selu', lambda F, L, x: F.selu(x), [[R(3, 4)], [R(10)]]),
    ('celu', lambda F, L, x: F.celu(x, alpha=0.7), [[R(3, 4)], [R(10)]]),
    ('celu_negative_alpha', lambda F, L, x: F.celu(x, alpha=-1.5), [[R(3, 4)]]),
    ('softsign', lambda F, L, x: F.softsign(x), [[R(3, 4)], [R(())]]),
    ('tanhshrink', lambda F, L, x: F.tanhshrink(x), [[R(3, 4)], [R(10)]]),
    ('threshold', lambda F, L, x: F.threshold(x, 0.1, -2.0), [[R(3, 4)], [R(10)]]),
    ('glu', lambda F, L, x: F.glu(x), [[R(3, 4)], [R(2, 6)]]),
    ('glu_dim', lambda F, L, x: F.glu(x, 0), [[R(4, 3)], [R(2, 6, 1)]]),
    ('softmin', lambda F, L, x: F.softmin(x, 1), [[R(3, 4)], [R(2, 3, 2)]]),
    ('softmin_dtype', lambda F, L, x: F.softmin(x, 0, dtype=L.float64), [[R(3, 4)]]),
    ('softshrink', lambda F, L, x: F.softshrink(x, 0.3), [[R(3, 4)], [R(10)]]),
    ('hardshrink', lambda F, L, x: F.hardshrink(x, 0.3), [[R(3, 4)], [R(10)]]),
    ('prelu', lambda F, L, x, w: F.prelu(x, w), [[R(2, 3, 4), R(3)], [R(2, 3), R(1)]]),
    ('cosine_similarity', lambda F, L, a, b: F.cosine_similarity(a, b),
     [[R(3, 4), R(3, 4, seed=1)], [R(2, 3, 4), R(3, 4, seed=1)]]),
    ('cosine_similarity_dim', lambda F, L, a, b: F.cosine_similarity(a, b, dim=-1, eps=1e-3),
     [[R(3, 4), R(1, 4, seed=1)], [R(5), R(5, seed=1)]]),
    ('cosine_similarity_eps', lambda F, L, a, b: F.cosine_similarity(a * 1e-4, b, dim=1,
                                                                       eps=1e-2),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('pairwise_distance', lambda F, L, a, b: F.pairwise_distance(a, b),
     [[R(3, 4), R(3, 4, seed=1)], [R(2, 3, 4), R(4, seed=1)]]),
    ('pairwise_distance_p', lambda F, L, a, b: F.pairwise_distance(a, b, p=3.0, eps=1e-3,
                                                                   keepdim=True),
     [[R(3, 4), R(3, 4, seed=1)], [R(4), R(4, seed=1)]]),
    ('pairwise_distance_p1', lambda F, L, a, b: F.pairwise_distance(a, b, p=1.0),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('smooth_l1_loss', lambda F, L, x, y: F.smooth_l1_loss(x, y, beta=0.5),
     [[R(3, 4), R(3, 4, seed=1)], [R(10), R(10, seed=1)]]),
    ('smooth_l1_loss_none', lambda F, L, x, y: F.smooth_l1_loss(x, y, reduction='none'),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('smooth_l1_loss_sum_beta0', lambda F, L, x, y: F.smooth_l1_loss(x, y, reduction='sum',
                                                                     beta=0.0),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('smooth_l1_loss_broadcast', lambda F, L, x, y: F.smooth_l1_loss(x, y),
     [[R(3, 4), R(4, seed=1)]]),
    ('huber_loss', lambda F, L, x, y: F.huber_loss(x, y, delta=0.7),
     [[R(3, 4), R(3, 4, seed=1)], [R(10), R(10, seed=1)]]),
    ('huber_loss_sum', lambda F, L, x, y: F.huber_loss(x, y, reduction='sum'),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('huber_loss_weight', lambda F, L, x, y, w: F.huber_loss(x, y, reduction='none', weight=w),
     [[R(3, 4), R(3, 4, seed=1), P(3, 4)]]),
    ('kl_div_batchmean', lambda F, L, x, t: F.kl_div(x, t, reduction='batchmean'),
     [[np.log(PROB(3, 4)), PROB(3, 4, seed=5)], [np.log(PROB(2, 3, 5)), PROB(2, 3, 5)]]),
    ('kl_div_mean', lambda F, L, x, t: F.kl_div(x, t), [[R(3, 4), PROB(3, 4)]]),
    ('kl_div_none', lambda F, L, x, t: F.kl_div(x, t, reduction='none'),
     [[R(3, 4), PROB(3, 4)]]),
    ('kl_div_zero_target', lambda F, L, x, t: F.kl_div(x, t, reduction='sum'),
     [[R(3, 4), np.where(PROB(3, 4) > 0.2, PROB(3, 4), 0.0)]], [True, False]),
    ('kl_div_log_target', lambda F, L, x, t: F.kl_div(x, t, reduction='sum', log_target=True),
     [[R(3, 4), np.log(PROB(3, 4))], [R(5), np.log(PROB(5))]]),
    ('margin_ranking_loss', lambda F, L, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2),
     [[R(6), R(6, seed=1), SIGN(6)], [R(2, 3), R(2, 3, seed=1), SIGN(2, 3)]]),
    ('hinge_embedding_loss', lambda F, L, x, y: F.hinge_embedding_loss(x, y, margin=0.5),
     [[R(6), SIGN(6)], [R(2, 3), SIGN(2, 3)]], [True, False]),
    ('hinge_embedding_loss_none', lambda F, L, x, y: F.hinge_embedding_loss(x, y,
                                                                            reduction='none'),
     [[R(2, 3), SIGN(2, 3)]], [True, False]),
    ('soft_margin_loss', lambda F, L, x, y: F.soft_margin_loss(x, y),
     [[R(6), SIGN(6)], [R(2, 3), SIGN(2, 3)]], [True, False]),
    ('multilabel_soft_margin_loss', lambda F, L, x, y: F.multilabel_soft_margin_loss(x, y),
     [[R(3, 4), (R(3, 4, seed=2) > 0).astype(float)], [R(5), (R(5, seed=2) > 0) * 1.0]]),
    ('multilabel_soft_margin_loss_w', lambda F, L, x, y, w:
        F.multilabel_soft_margin_loss(x, y, weight=w, reduction='none'),
     [[R(3, 4), (R(3, 4, seed=2) > 0).astype(float), P(4)]]),
    ('cosine_embedding_loss', lambda F, L, a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1),
     [[R(4, 3), R(4, 3, seed=1), SIGN(4)], [R(5), R(5, seed=1), np.array(-1.0)]],
     [True, True, False]),
    ('poisson_nll_loss', lambda F, L, x, y: F.poisson_nll_loss(x, y),
     [[R(3, 4), P(3, 4) * 3], [R(5), P(5)]]),
    ('poisson_nll_loss_full', lambda F, L, x, y: F.poisson_nll_loss(x, y, log_input=False,
                                                                    full=True, reduction='sum'),
     [[P(3, 4), P(3, 4, seed=9) * 3]]),
    ('gaussian_nll_loss', lambda F, L, x, y, v: F.gaussian_nll_loss(x, y, v),
     [[R(3, 4), R(3, 4, seed=1), P(3, 4)], [R(3, 4), R(3, 4, seed=1), P(3)],
      [R(2, 3, 4), R(2, 3, 4, seed=1), P(2, 1, 4)]]),
    ('gaussian_nll_loss_full', lambda F, L, x, y, v: F.gaussian_nll_loss(x, y, v, full=True,
                                                                         reduction='none',
                                                                         eps=0.2),
     [[R(3, 4), R(3, 4, seed=1), P(3, 4)]]),
    ('gaussian_nll_loss_float', lambda F, L, x, y: F.gaussian_nll_loss(x, y, 0.5,
                                                                       reduction='sum'),
     [[R(3, 4), R(3, 4, seed=1)]]),
    ('triplet_margin_loss', lambda F, L, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0),
     [[R(4, 3), R(4, 3, seed=1), R(4, 3, seed=2)], [R(3), R(3, seed=1), R(3, seed=2)]]),
    ('triplet_margin_loss_swap', lambda F, L, a, p, n: F.triplet_margin_loss(
        a, p, n, margin=2.0, p=1, swap=True, reduction='none'),
     [[R(4, 3), R(4, 3, seed=1), R(4, 3, seed=2)]]),
    ('embedding', lambda F, L, i, w: F.embedding(i, w), [[IDX(2, 3), R(5, 4)], [IDX(()), R(5, 2)]]),
    ('embedding_padding', lambda F, L, i, w: F.embedding(i, w, padding_idx=-2),
     [[IDX(2, 6), R(5, 4)], [IDX(7), R(5, 3)]]),
    ('embedding_freq', lambda F, L, i, w: F.embedding(i, w, padding_idx=1,
                                                      scale_grad_by_freq=True),
     [[IDX(3, 4), R(5, 4)]]),
    ('layer_norm', lambda F, L, x, w, b: F.layer_norm(x, (4,), w, b),
     [[R(3, 4), R(4, seed=1), R(4, seed=2)], [R(2, 3, 4), R(4, seed=1), R(4, seed=2)]]),
    ('layer_norm_2d', lambda F, L, x: F.layer_norm(x, [3, 4], eps=1e-3),
     [[R(2, 3, 4)], [R(3, 4)]]),
    ('rms_norm', lambda F, L, x, w: F.rms_norm(x, (4,), w),
     [[R(3, 4), R(4, seed=1)], [R(2, 3, 4), R(4, seed=1)]]),
    ('rms_norm_eps', lambda F, L, x: F.rms_norm(x, [3, 4], eps=1e-2), [[R(2, 3, 4)]]),
    ('batch_norm_train', lambda F, L, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [[R(4, 3), R(3, seed=1), R(3, seed=2)], [R(2, 3, 5), R(3, seed=1), R(3, seed=2)]]),
    ('batch_norm_train_4d', lambda F, L, x: F.batch_norm(x, None, None, training=True, eps=0.1),
     [[R(2, 3, 2, 2)]]),
    ('batch_norm_eval', lambda F, L, x, m, v, w, b: F.batch_norm(x, m, v, w, b),
     [[R(4, 3), R(3, seed=3), P(3), R(3, seed=1), R(3, seed=2)],
      [R(2, 3, 5), R(3, seed=3), P(3), R(3, seed=1), R(3, seed=2)]],
     [True, False, False, True, True]),
    ('instance_norm', lambda F, L, x, w, b: F.instance_norm(x, weight=w, bias=b),
     [[R(2, 3, 5), R(3, seed=1), R(3, seed=2)], [R(2, 3, 2, 2), R(3, seed=1), R(3, seed=2)]]),
    ('instance_norm_running', lambda F, L, x, m, v: F.instance_norm(x, m, v,
                                                                    use_input_stats=False),
     [[R(2, 3, 5), R(3, seed=3), P(3)]], [True, False, False]),
    ('group_norm', lambda F, L, x, w, b: F.group_norm(x, 2, w, b),
     [[R(2, 4, 3), R(4, seed=1), R(4, seed=2)], [R(3, 6, 2, 2), R(6, seed=1), R(6, seed=2)]]),
    ('group_norm_plain', lambda F, L, x: F.group_norm(x, 1, eps=1e-3), [[R(2, 4)]]),
]


# one_hot has no gradient; these three show a value with a gradient that is not its
# derivative on purpose, as PyTorch's do: the padding row gets none, the frequency
# scaling divides it, and the norms clamped at eps pass their gradient through
NO_GRADCHECK = {'one_hot', 'one_hot_classes', 'embedding_padding', 'embedding_freq',
                'cosine_similarity_eps'}


def _params():
    for case in CASES:
        name, fn, sets = case[:3]
        grads = case[3] if len(case) > 3 else None
        for k, arrays in enumerate(sets):
            yield pytest.param(fn, arrays, grads, id=f'{name}-{k}')


@pytest.mark.parametrize('fn, arrays, grads', list(_params()))
def test_matches_torch(fn, arrays, grads):
    compare(fn, [np.asarray(a) for a in arrays], grads)


@pytest.mark.parametrize('fn, arrays, grads',
                         [pytest.param(c[1], c[2][0], c[3] if len(c) > 3 else None, id=c[0])
                          for c in CASES if c[0] not in NO_GRADCHECK])
def test_gradcheck(fn, arrays, grads):
    gradcheck(fn, [np.asarray(a) for a in arrays], grads)


def test_all_names_exported():
    for name in TF.__all__:
        assert callable(getattr(TF, name)), name
        assert hasattr(PF, name), name


# -- exceptions: the type PyTorch raises, for one bad input each ---------------------

BAD = [
    ('pad_odd', lambda F, L: F.pad(L.ones(2, 3), (1,))),
    ('pad_too_long', lambda F, L: F.pad(L.ones(2, 3), (1, 1, 1, 1, 1, 1))),
    ('pad_mode', lambda F, L: F.pad(L.ones(2, 3), (1, 1), mode='foo')),
    ('pad_reflect_big', lambda F, L: F.pad(L.ones(2, 3), (3, 1), mode='reflect')),
    ('pad_reflect_1d', lambda F, L: F.pad(L.ones(6), (1, 1), mode='reflect')),
    ('pad_reflect_value', lambda F, L: F.pad(L.ones(2, 3), (1, 1), mode='reflect', value=2.0)),
    ('pad_circular_wrap', lambda F, L: F.pad(L.ones(2, 3), (4, 1), mode='circular')),
    ('pad_replicate_small', lambda F, L: F.pad(L.ones(2, 3), (-2, -1), mode='replicate')),
    ('one_hot_float', lambda F, L: F.one_hot(L.tensor([1.0, 2.0]))),
    ('one_hot_negative', lambda F, L: F.one_hot(L.tensor([-1, 2]))),
    ('one_hot_big', lambda F, L: F.one_hot(L.tensor([1, 2]), 2)),
    ('one_hot_empty', lambda F, L: F.one_hot(L.tensor([], dtype=L.int64))),
    ('smooth_l1_beta', lambda F, L: F.smooth_l1_loss(L.ones(3), L.ones(3), beta=-1.0)),
    ('smooth_l1_reduction', lambda F, L: F.smooth_l1_loss(L.ones(3), L.ones(3), reduction='x')),
    ('huber_delta', lambda F, L: F.huber_loss(L.ones(3), L.ones(3), delta=0.0)),
    ('huber_weight', lambda F, L: F.huber_loss(L.ones(3), L.ones(3), weight=L.ones(2))),
    ('kl_div_reduction', lambda F, L: F.kl_div(L.ones(3), L.ones(3), reduction='x')),
    ('cosine_similarity_shapes', lambda F, L: F.cosine_similarity(L.ones(2, 3), L.ones(3, 3))),
    ('celu_alpha', lambda F, L: F.celu(L.ones(3), alpha=0.0)),
    ('glu_odd', lambda F, L: F.glu(L.ones(2, 3))),
    ('glu_scalar', lambda F, L: F.glu(L.tensor(1.0))),
    ('softshrink_lambd', lambda F, L: F.softshrink(L.ones(3), -1.0)),
    ('prelu_channels', lambda F, L: F.prelu(L.ones(2, 3), L.ones(2))),
    ('margin_ranking_dims', lambda F, L: F.margin_ranking_loss(L.ones(2, 3), L.ones(2, 3),
                                                               L.ones(3))),
    ('multilabel_reduction', lambda F, L: F.multilabel_soft_margin_loss(
        L.ones(2, 3), L.ones(2, 3), reduction='x')),
    ('poisson_reduction', lambda F, L: F.poisson_nll_loss(L.ones(3), L.ones(3), reduction='x')),
    ('gaussian_var_size', lambda F, L: F.gaussian_nll_loss(L.ones(2, 3), L.ones(2, 3), L.ones(3))),
    ('gaussian_var_negative', lambda F, L: F.gaussian_nll_loss(L.ones(3), L.ones(3),
                                                               -L.ones(3))),
    ('triplet_dims', lambda F, L: F.triplet_margin_loss(L.ones(2, 3), L.ones(2, 3), L.ones(3))),
    ('triplet_margin', lambda F, L: F.triplet_margin_loss(L.ones(3), L.ones(3), L.ones(3),
                                                          margin=0.0)),
    ('cosine_embedding_target', lambda F, L: F.cosine_embedding_loss(L.ones(2, 3), L.ones(2, 3),
                                                                     L.ones(2, 1))),
    ('embedding_range', lambda F, L: F.embedding(L.tensor([5]), L.ones(2, 3))),
    ('embedding_float_index', lambda F, L: F.embedding(L.tensor([1.0]), L.ones(2, 3))),
    ('embedding_padding_idx', lambda F, L: F.embedding(L.tensor([1]), L.ones(2, 3),
                                                       padding_idx=5)),
    ('dropout1d_dims', lambda F, L: F.dropout1d(L.ones(2, 3, 4, 5))),
    ('dropout_p', lambda F, L: F.dropout2d(L.ones(2, 3, 4, 5), p=1.5)),
    ('alpha_dropout_p', lambda F, L: F.alpha_dropout(L.ones(3), p=-0.1)),
    ('layer_norm_shape', lambda F, L: F.layer_norm(L.ones(2, 3), (4,))),
    ('rms_norm_shape', lambda F, L: F.rms_norm(L.ones(2, 3), (4,))),
    ('group_norm_groups', lambda F, L: F.group_norm(L.ones(2, 3, 4), 2)),
    ('batch_norm_one_value', lambda F, L: F.batch_norm(L.ones(1, 3), None, None, training=True)),
    ('batch_norm_eval_none', lambda F, L: F.batch_norm(L.ones(2, 3), None, None)),
    ('batch_norm_channels', lambda F, L: F.batch_norm(L.ones(2, 3), L.zeros(4), L.ones(4))),
    ('instance_norm_spatial', lambda F, L: F.instance_norm(L.ones(2, 3, 1))),
    ('batch_norm_1d', lambda F, L: F.batch_norm(L.ones(3), None, None, training=True)),
    ('pad_crop_too_much', lambda F, L: F.pad(L.ones(2, 3), (-4, 1))),
    ('pad_reflect_empty', lambda F, L: F.pad(L.ones(0, 3), (1, 1), mode='reflect')),
    ('cosine_similarity_int', lambda F, L: F.cosine_similarity(L.ones(2, 3, dtype=L.int64),
                                                               L.ones(2, 3, dtype=L.int64))),
    ('prelu_weight_2d', lambda F, L: F.prelu(L.ones(2, 3), L.ones(1, 3))),
]


@pytest.mark.parametrize('fn', [pytest.param(b[1], id=b[0]) for b in BAD])
def test_errors_match_torch(fn):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with pytest.raises(Exception) as ref:
            fn(PF, torch)
        with pytest.raises(ref.type):
            fn(TF, tape)


# -- in-place, running statistics, randomness ------------------------------------------

@pytest.mark.parametrize('name, kw', [('hardswish', {}), ('hardsigmoid', {}), ('mish', {}),
                                      ('selu', {}), ('celu', {'alpha': 0.5}),
                                      ('threshold', {'threshold': 0.2, 'value': 1.5})])
def test_inplace_activations(name, kw):
    x = R(3, 4)
    a, b = tape.tensor(x), torch.tensor(x)
    ra = getattr(TF, name)(a, inplace=True, **kw)
    rb = getattr(PF, name)(b, inplace=True, **kw)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ra.numpy(), rb.numpy(), rtol=1e-12, atol=1e-12)
    # on a non-leaf in a graph: the gradient flows through the in-place result
    xa = tape.tensor(x, requires_grad=True)
    xb = torch.tensor(x, requires_grad=True)
    ha, hb = xa * 2, xb * 2
    getattr(TF, name)(ha, inplace=True, **kw)
    getattr(PF, name)(hb, inplace=True, **kw)
    ha.sum().backward()
    hb.sum().backward()
    # (PyTorch's hardsigmoid backward multiplies by a float32 1/6)
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize('shape', [(4, 3), (2, 3, 5), (2, 3, 2, 2)])
def test_batch_norm_running_stats(shape):
    x = R(*shape)
    rm, rv = R(3, seed=3), P(3)
    tm, tv = tape.tensor(rm.copy()), tape.tensor(rv.copy())
    pm, pv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    xa = tape.tensor(x, requires_grad=True)
    xb = torch.tensor(x, requires_grad=True)
    v0 = tm._version
    ya = TF.batch_norm(xa, tm, tv, training=True, momentum=0.3)
    yb = PF.batch_norm(xb, pm, pv, training=True, momentum=0.3)
    assert tm._version > v0
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tm.numpy(), pm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tv.numpy(), pv.numpy(), rtol=1e-12, atol=1e-14)
    assert not tm.requires_grad and tm.grad_fn is None
    (ya * ya * ya).sum().backward()
    (yb * yb * yb).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-8, atol=1e-10)
    # eval mode with the updated statistics
    ea = TF.batch_norm(xa, tm, tv, training=False)
    eb = PF.batch_norm(xb, pm, pv, training=False)
    np.testing.assert_allclose(ea.detach().numpy(), eb.detach().numpy(), rtol=1e-10)


def test_instance_norm_running_stats():
    x = R(2, 3, 5)
    rm, rv = R(3, seed=3), P(3)
    tm, tv = tape.tensor(rm.copy()), tape.tensor(rv.copy())
    pm, pv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    ya = TF.instance_norm(tape.tensor(x), tm, tv, momentum=0.2)
    yb = PF.instance_norm(torch.tensor(x), pm, pv, momentum=0.2)
    np.testing.assert_allclose(ya.numpy(), yb.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tm.numpy(), pm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tv.numpy(), pv.numpy(), rtol=1e-12, atol=1e-14)


def test_embedding_max_norm():
    w = R(5, 3) * 3
    idx = np.array([[0, 2], [2, 4]])
    wa = tape.tensor(w.copy(), requires_grad=True)
    wb = torch.tensor(w.copy(), requires_grad=True)
    ya = TF.embedding(tape.tensor(idx), wa, max_norm=1.0)
    yb = PF.embedding(torch.tensor(idx), wb, max_norm=1.0)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(wa.detach().numpy(), wb.detach().numpy(), rtol=1e-10)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(wa.grad.numpy(), wb.grad.numpy())


def test_embedding_int32_indices():
    w = R(5, 3)
    idx = np.array([1, 3, 3], dtype=np.int32)
    out = TF.embedding(tape.tensor(idx), tape.tensor(w))
    np.testing.assert_allclose(out.numpy(), w[idx])


def test_one_hot_dtype():
    out = TF.one_hot(tape.tensor([0, 2, 1]))
    assert out.dtype == tape.int64
    assert out.tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert tuple(TF.one_hot(tape.tensor([], dtype=tape.int64), 3).shape) == (0, 3)


def test_pad_keeps_integer_dtype():
    out = TF.pad(tape.tensor([1, 2]), (1, 1), value=2.5)
    ref = PF.pad(torch.tensor([1, 2]), (1, 1), value=2.5)
    assert out.dtype == tape.int64
    assert out.tolist() == ref.tolist()


@pytest.mark.parametrize('name, shape, feature', [
    ('dropout1d', (4, 6, 5), True), ('dropout1d', (6, 5), True),
    ('dropout2d', (4, 6, 3, 3), True), ('dropout3d', (2, 6, 2, 2, 2), True),
    ('dropout3d', (6, 2, 2, 2), True), ('alpha_dropout', (40, 50), False),
    ('feature_alpha_dropout', (4, 6, 5), True)])
def test_dropout_variants(name, shape, feature):
    p = 0.4
    x = tape.tensor(np.ones(shape), requires_grad=True)
    y = getattr(TF, name)(x, p=p, training=True, generator=3)
    d = y.detach().numpy()
    vals = np.unique(np.round(d, 12))
    assert len(vals) == 2                                     # dropped and kept
    if name.endswith('alpha_dropout'):
        al = 1.7580993408473766
        a = 1.0 / np.sqrt((al * al * p + 1) * (1 - p))
        np.testing.assert_allclose(sorted(vals), sorted([-al * a + al * a * p, a + al * a * p]))
    else:
        np.testing.assert_allclose(sorted(vals), [0.0, 1.0 / (1 - p)])
    if feature:
        # whole feature maps are kept or dropped together
        batched = d if (name != 'dropout1d' or len(shape) == 3) and (
            name != 'dropout3d' or len(shape) == 5) else d[None]
        flat = batched.reshape(batched.shape[0], batched.shape[1], -1)
        assert (flat == flat[..., :1]).all()
    y.sum().backward()
    grad = x.grad.numpy()
    kept = d != (0.0 if not name.endswith('alpha_dropout') else d.min())
    scale = 1.0 / (1 - p) if not name.endswith('alpha_dropout') else a
    np.testing.assert_allclose(grad[kept], scale)
    np.testing.assert_allclose(grad[~kept], 0.0)
    # eval mode and p == 0 are the identity; p == 1 zeros
    for same in (getattr(TF, name)(x, p=p, training=False),
                 getattr(TF, name)(x, p=0.0, training=True)):
        np.testing.assert_array_equal(same.detach().numpy(), x.detach().numpy())
    assert not getattr(TF, name)(x, p=1.0, training=True).detach().numpy().any()


def test_dropout2d_inplace():
    x = tape.tensor(np.ones((2, 3, 2, 2)))
    y = TF.dropout2d(x, 0.5, inplace=True, generator=0)
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_legacy_reduction_flags():
    x, y = R(3, 4), R(3, 4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for kw in ({'size_average': False}, {'reduce': False}, {'size_average': True}):
            a = TF.smooth_l1_loss(tape.tensor(x), tape.tensor(y), **kw)
            b = PF.smooth_l1_loss(torch.tensor(x), torch.tensor(y), **kw)
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_kl_div_mean_warns():
    with pytest.warns(UserWarning, match='batchmean'):
        TF.kl_div(tape.tensor(R(3)), tape.tensor(PROB(3)))


def test_float32_stays_float32():
    x = tape.tensor(R(2, 3, 4), dtype=tape.float32, requires_grad=True)
    for out in (TF.layer_norm(x, (4,)), TF.group_norm(x, 3), TF.hardswish(x), TF.mish(x),
                TF.pad(x, (1, 1), mode='reflect'), TF.cosine_similarity(x, x),
                TF.smooth_l1_loss(x, x * 0.5), TF.batch_norm(x, None, None, training=True),
                TF.rms_norm(x, (4,))):
        assert out.dtype == tape.float32


def test_jit_replays_comparison_free_composites():
    """Losses written without comparisons replay under tape.jit with new values; those
    that bake a target's masks in run eagerly instead, so neither goes stale."""
    @tape.jit
    def f(x, y):
        return (TF.huber_loss(x, y, delta=0.5) + TF.smooth_l1_loss(x, y, beta=0.3)
                + TF.layer_norm(x, (4,)).pow(2).sum() * 0.1 + TF.softshrink(x).sum()
                + TF.celu(x, 0.5).sum() + TF.pad(x, (1, 1), mode='reflect').sum())

    @tape.jit
    def g(x, y):
        return TF.hinge_embedding_loss(x, y)

    def ref(fn, x, y):
        a = torch.tensor(x, requires_grad=True)
        out = fn(a, torch.tensor(y))
        out.backward()
        return out.item(), a.grad.numpy()

    def tf(x, y):
        return (PF.huber_loss(x, y, delta=0.5) + PF.smooth_l1_loss(x, y, beta=0.3)
                + PF.layer_norm(x, (4,)).pow(2).sum() * 0.1 + PF.softshrink(x).sum()
                + PF.celu(x, 0.5).sum() + PF.pad(x, (1, 1), mode='reflect').sum())

    for seed in range(3):
        x, y = R(3, 4, seed=seed), R(3, 4, seed=seed + 10)
        s = SIGN(3, 4, seed=seed)
        for fn, tfn, yy in ((f, tf, y), (g, PF.hinge_embedding_loss, s)):
            xa = tape.tensor(x, requires_grad=True)
            out = fn(xa, tape.tensor(yy))
            out.backward()
            val, grad = ref(tfn, x, yy)
            np.testing.assert_allclose(out.item(), val, rtol=1e-9)
            np.testing.assert_allclose(xa.grad.numpy(), grad, rtol=1e-9, atol=1e-12)
    assert f.stats()['replays'] == 2
    assert g.stats()['replays'] == 0
