"""The torch.nn modules of tape/nn/_modules_more.py (activations, losses, InstanceNorm,
RMSNorm, padding, channel dropout) against PyTorch: values, input and parameter
gradients from the same parameter values, reprs, state_dict keys, train/eval
behaviour and the error types."""
import warnings

import numpy as np
import pytest

import tape
from tape import nn

torch = pytest.importorskip('torch')
tnn = torch.nn


def _np(t):
    return np.asarray(t.detach().numpy())


def _pair(name, *args, **kwargs):
    """The tape and the torch module ``name`` from the same arguments, tape's
    parameters and buffers set to torch's values."""
    tm = getattr(tnn, name)(*args, **kwargs)
    pm = getattr(nn, name)(*args, **kwargs)
    _copy_state(tm, pm)
    return tm, pm


def _copy_state(tm, pm):
    assert list(pm.state_dict()) == list(tm.state_dict())
    pm.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})


def _run(tm, pm, arrays, grads, dtype=np.float64, tol=1e-10, check_state=True):
    """Forward tm and pm on the same ``arrays`` (float ones as ``dtype``), backward
    the same random cotangent; values, the gradients of the inputs flagged in
    ``grads`` and of the parameters, and the buffers agree."""
    t_in, p_in = [], []
    for a, g in zip(arrays, grads):
        a = np.asarray(a)
        if a.dtype.kind == 'f':
            a = a.astype(dtype)
        t_in.append(torch.tensor(a.copy(), requires_grad=g))
        p_in.append(tape.tensor(a.copy(), requires_grad=g))
    t_out, p_out = tm(*t_in), pm(*p_in)
    assert tuple(p_out.shape) == tuple(t_out.shape)
    assert str(p_out.dtype).replace('tape.', '') == str(t_out.dtype).replace('torch.', '')
    np.testing.assert_allclose(_np(p_out), _np(t_out), rtol=tol, atol=tol)
    if any(grads) or any(p.requires_grad for p in tm.parameters()):
        cot = np.random.default_rng(7).standard_normal(tuple(t_out.shape))
        (t_out * torch.tensor(cot, dtype=t_out.dtype)).sum().backward()
        (p_out * tape.tensor(cot, dtype=p_out.dtype)).sum().backward()
        for i, (ti, pi) in enumerate(zip(t_in, p_in)):
            if ti.requires_grad:
                np.testing.assert_allclose(_np(pi.grad), _np(ti.grad), rtol=tol, atol=tol,
                                           err_msg=f'input {i}')
        tp, pp = dict(tm.named_parameters()), dict(pm.named_parameters())
        assert list(tp) == list(pp)
        for k in tp:
            np.testing.assert_allclose(_np(pp[k].grad), _np(tp[k].grad), rtol=tol, atol=tol,
                                       err_msg=k)
    if check_state:
        ts, ps = tm.state_dict(), pm.state_dict()
        assert list(ps) == list(ts)
        for k in ts:
            np.testing.assert_allclose(_np(ps[k]), _np(ts[k]), rtol=tol, atol=tol, err_msg=k)
    assert repr(pm) == repr(tm)
    return t_out, p_out


R = np.random.default_rng(0)


def _x(*shape):
    return R.standard_normal(shape)


def _sign(*shape):
    return np.where(R.random(shape) < 0.5, -1.0, 1.0)


# -- activations -------------------------------------------------------------------------
ACTS = [
    ('SELU', (), {}, (4, 3)),
    ('CELU', (0.5,), {}, (4, 3)),     # (torch's backward rounds 1/alpha to float32)
    ('CELU', (), {}, (5,)),
    ('GLU', (), {}, (3, 4)),
    ('GLU', (), {'dim': 1}, (2, 6, 3)),
    ('LogSigmoid', (), {}, (4, 3)),
    ('Softmin', (), {'dim': 1}, (4, 3)),
    ('Softmin', (0,), {}, (4, 3)),
    ('Softshrink', (), {}, (4, 5)),
    ('Softshrink', (0.3,), {}, (4, 5)),
    ('Hardshrink', (), {}, (4, 5)),
    ('Hardshrink', (0.3,), {}, (4, 5)),
    ('Tanhshrink', (), {}, (4, 3)),
    ('Threshold', (0.1, 20.0), {}, (4, 5)),
    ('Softmax2d', (), {}, (2, 3, 4, 5)),
    ('Softmax2d', (), {}, (3, 4, 5)),
]


@pytest.mark.parametrize('dtype', [np.float64, np.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('name,args,kw,shape', ACTS,
                         ids=[f'{a[0]}-{i}' for i, a in enumerate(ACTS)])
def test_activation_matches_torch(name, args, kw, shape, dtype):
    tm, pm = _pair(name, *args, **kw)
    _run(tm, pm, [_x(*shape)], [True], dtype, 1e-10 if dtype == np.float64 else 1e-5)


def test_activation_reprs_and_inplace():
    for name, args, kw in [('SELU', (), {'inplace': True}), ('CELU', (0.5, True), {}),
                           ('Threshold', (0.1, 2), {'inplace': True}), ('Threshold', (1, 2), {}),
                           ('Softmin', (), {}), ('GLU', (), {'dim': 0}), ('Softshrink', (1,), {}),
                           ('Hardshrink', (), {}), ('LogSigmoid', (), {}), ('Softmax2d', (), {}),
                           ('Tanhshrink', (), {}), ('SELU', (), {})]:
        assert repr(getattr(nn, name)(*args, **kw)) == repr(getattr(tnn, name)(*args, **kw))
    for name, args in [('SELU', ()), ('CELU', (0.5,)), ('Threshold', (0.1, 2.0))]:
        x = _x(3, 4)
        t, p = torch.tensor(x), tape.tensor(x)
        to = getattr(tnn, name)(*args, inplace=True)(t)
        po = getattr(nn, name)(*args, inplace=True)(p)
        assert po is p and to is t
        np.testing.assert_allclose(_np(p), _np(t), rtol=1e-12)


def test_softmax2d_rejects_other_ranks():
    for shape in [(3, 4), (1, 2, 3, 4, 5)]:
        with pytest.raises(ValueError, match='Softmax2d: expected input to be 3D or 4D'):
            nn.Softmax2d()(tape.zeros(*shape))
        with pytest.raises(ValueError):
            tnn.Softmax2d()(torch.zeros(*shape))


def test_glu_odd_dim_error_type():
    with pytest.raises(RuntimeError):
        tnn.GLU()(torch.zeros(2, 3))
    with pytest.raises(RuntimeError):
        nn.GLU()(tape.zeros(2, 3))


# -- losses ------------------------------------------------------------------------------
def _loss_cases():
    xs = _x(6)
    return [
        ('MarginRankingLoss', {'margin': 0.2}, [xs, _x(6), _sign(6)], [True, True, False]),
        ('MarginRankingLoss', {}, [_x(6), _x(6), _sign(6)], [True, True, False]),
        ('HingeEmbeddingLoss', {'margin': 0.5}, [_x(4, 3), _sign(4, 3)], [True, False]),
        ('HingeEmbeddingLoss', {}, [_x(4, 3), _sign(4, 3)], [True, False]),
        ('CosineEmbeddingLoss', {'margin': 0.1}, [_x(5, 4), _x(5, 4), _sign(5)],
         [True, True, False]),
        ('CosineEmbeddingLoss', {}, [_x(4), _x(4), np.array(-1.0)], [True, True, False]),
        ('TripletMarginLoss', {}, [_x(5, 4), _x(5, 4), _x(5, 4)], [True, True, True]),
        ('TripletMarginLoss', {'margin': 0.5, 'p': 1.5, 'swap': True, 'eps': 1e-4},
         [_x(5, 4), _x(5, 4), _x(5, 4)], [True, True, True]),
        ('TripletMarginWithDistanceLoss', {}, [_x(5, 4), _x(5, 4), _x(5, 4)],
         [True, True, True]),
        ('TripletMarginWithDistanceLoss', {'margin': 2.0, 'swap': True},
         [_x(5, 4), _x(5, 4), _x(5, 4)], [True, True, True]),
        ('SoftMarginLoss', {}, [_x(4, 3), _sign(4, 3)], [True, False]),
        ('MultiLabelSoftMarginLoss', {}, [_x(4, 3), (R.random((4, 3)) < 0.5) * 1.0],
         [True, False]),
        ('MultiLabelSoftMarginLoss', {'weight': R.random(3) + 0.5},
         [_x(4, 3), (R.random((4, 3)) < 0.5) * 1.0], [True, False]),
        ('MultiMarginLoss', {}, [_x(4, 5), R.integers(0, 5, 4)], [True, False]),
        ('MultiMarginLoss', {'p': 2, 'margin': 0.7, 'weight': R.random(5) + 0.5},
         [_x(4, 5), R.integers(0, 5, 4)], [True, False]),
        ('MultiMarginLoss', {}, [_x(5), np.array(2)], [True, False]),
        ('MultiLabelMarginLoss', {},
         [_x(3, 5), np.array([[3, 0, -1, 1, 2], [0, 1, 2, 3, 4], [4, 4, 1, -1, -1]])],
         [True, False]),
        ('MultiLabelMarginLoss', {}, [_x(4), np.array([2, -1, 0, 1])], [True, False]),
        ('PoissonNLLLoss', {}, [_x(4, 3), R.poisson(2.0, (4, 3)) * 1.0], [True, False]),
        ('PoissonNLLLoss', {'log_input': False, 'full': True, 'eps': 1e-6},
         [R.random((4, 3)) + 0.1, R.poisson(2.0, (4, 3)) * 1.0], [True, False]),
        ('GaussianNLLLoss', {}, [_x(4, 3), _x(4, 3), R.random((4, 3)) + 0.1],
         [True, True, True]),
        ('GaussianNLLLoss', {'full': True, 'eps': 0.2}, [_x(4, 3), _x(4, 3),
                                                         R.random((4,)) + 0.1],
         [True, True, True]),
    ]


LOSS_CASES = _loss_cases()


def _loss_kwargs(kw, lib):
    kw = dict(kw)
    if 'weight' in kw:
        kw['weight'] = lib.tensor(kw['weight'])
    return kw


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('name,kw,arrays,grads', LOSS_CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(LOSS_CASES)])
def test_loss_matches_torch(name, kw, arrays, grads, reduction):
    tm = getattr(tnn, name)(reduction=reduction, **_loss_kwargs(kw, torch))
    pm = getattr(nn, name)(reduction=reduction, **_loss_kwargs(kw, tape))
    _run(tm, pm, arrays, grads)
    if 'weight' in kw:
        assert list(pm.state_dict()) == ['weight']


def test_loss_float32_and_reprs():
    for name, kw, arrays, grads in LOSS_CASES[::3]:
        tm = getattr(tnn, name)(**_loss_kwargs(kw, torch))
        pm = getattr(nn, name)(**_loss_kwargs(kw, tape))
        if 'weight' in kw:
            tm, pm = tm.float(), pm.float()
        _run(tm, pm, arrays, grads, np.float32, 2e-5)
    assert repr(nn.TripletMarginWithDistanceLoss()) == repr(tnn.TripletMarginWithDistanceLoss())
    assert isinstance(nn.TripletMarginWithDistanceLoss().distance_function,
                      nn.PairwiseDistance)


def test_triplet_with_custom_distance():
    a, p, n = _x(5, 4), _x(5, 4), _x(5, 4)

    def dist(lib):
        return lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y)
    tm = tnn.TripletMarginWithDistanceLoss(distance_function=dist(torch), margin=0.3)
    pm = nn.TripletMarginWithDistanceLoss(distance_function=dist(tape), margin=0.3)
    _run(tm, pm, [a, p, n], [True, True, True])


def test_loss_legacy_reduction_args():
    for name in ['MarginRankingLoss', 'HingeEmbeddingLoss', 'CosineEmbeddingLoss',
                 'TripletMarginLoss', 'SoftMarginLoss', 'MultiLabelSoftMarginLoss',
                 'MultiMarginLoss', 'MultiLabelMarginLoss', 'PoissonNLLLoss']:
        for sa, red in [(False, None), (None, False), (True, True)]:
            with pytest.warns(UserWarning, match='size_average and reduce'):
                pm = getattr(nn, name)(size_average=sa, reduce=red)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                tm = getattr(tnn, name)(size_average=sa, reduce=red)
            assert pm.reduction == tm.reduction, name
    for name in ['GaussianNLLLoss', 'TripletMarginWithDistanceLoss']:
        with pytest.raises(TypeError):
            getattr(nn, name)(size_average=False)


def test_loss_constructor_errors():
    for lib in (tnn, nn):
        with pytest.raises(ValueError, match='expected margin to be greater than 0'):
            lib.TripletMarginLoss(margin=0)
        with pytest.raises(ValueError, match='expected margin to be greater than 0'):
            lib.TripletMarginWithDistanceLoss(margin=-1.0)
        with pytest.raises(ValueError, match='only p == 1 and p == 2 supported'):
            lib.MultiMarginLoss(p=3)
        with pytest.raises(TypeError):
            lib.GaussianNLLLoss(False)                       # full is keyword-only
    with pytest.raises(ValueError, match='expected weight to be None or 1D tensor'):
        nn.MultiMarginLoss(weight=tape.ones(2, 2))
    with pytest.raises(ValueError):
        nn.MarginRankingLoss(reduction='avg')(tape.zeros(2), tape.zeros(2), tape.ones(2))


def test_multi_margin_loss_none_shape_follows_target():
    for t in (np.array([2]), np.array(2)):
        x = _x(5)
        tl = tnn.MultiMarginLoss(reduction='none')(torch.tensor(x), torch.tensor(t))
        pl = nn.MultiMarginLoss(reduction='none')(tape.tensor(x), tape.tensor(t))
        assert tuple(pl.shape) == tuple(tl.shape)
        np.testing.assert_allclose(pl.detach().numpy(), tl.numpy(), rtol=1e-6)


@pytest.mark.parametrize('case', ['mm_3d', 'soft_margin_target_wider', 'triplet_ndim'])
def test_loss_shape_errors_like_torch(case):
    def run(lib):
        F = lib.nn.functional
        if case == 'mm_3d':
            return F.multi_margin_loss(lib.ones(2, 3, 4), lib.zeros(2, dtype=lib.long))
        if case == 'soft_margin_target_wider':
            return F.soft_margin_loss(lib.ones(3), lib.ones(2, 3))
        return F.triplet_margin_with_distance_loss(lib.ones(2, 3), lib.ones(3), lib.ones(2, 3))
    with pytest.raises(RuntimeError) as theirs:
        run(torch)
    with pytest.raises(RuntimeError) as ours:
        run(tape)
    assert str(ours.value) == str(theirs.value)
    # the other way round, a target narrower than the input broadcasts in both
    tl = tnn.functional.soft_margin_loss(torch.ones(2, 3), torch.full((3,), 0.5))
    pl = nn.functional.soft_margin_loss(tape.ones(2, 3), tape.full((3,), 0.5))
    np.testing.assert_allclose(pl.item(), tl.item(), rtol=1e-6)


def test_multilabel_margin_loss_functional_and_errors():
    F, tF = nn.functional, tnn.functional
    x = _x(2, 4)
    for tgt in [np.array([[4, 0, -1, 1], [0, 1, 2, 3]]), np.array([[-2, 0, -1, 1], [0] * 4]),
                np.array([1, 2, -1, 0]), np.zeros((2, 3), np.int64)]:
        with pytest.raises(RuntimeError) as te:
            tF.multilabel_margin_loss(torch.tensor(x), torch.tensor(tgt))
        with pytest.raises(RuntimeError) as pe:
            F.multilabel_margin_loss(tape.tensor(x), tape.tensor(tgt))
        assert str(pe.value) == str(te.value)
    tgt = np.array([[3, 0, -1, 1], [0, 1, 2, 3]])
    for bad in (np.int32,):
        with pytest.raises(RuntimeError, match='expected scalar type Long but found Int'):
            F.multilabel_margin_loss(tape.tensor(x), tape.tensor(tgt.astype(bad)))
    with pytest.raises(RuntimeError, match='Expected non-empty vector or matrix'):
        F.multilabel_margin_loss(tape.zeros(2, 4, 3), tape.zeros(2, 4, 3, dtype=tape.int64))
    # a 0-d input is one sample with one class; an empty batch gives an empty 'none'
    for xs, ts, red in [((), (), 'none'), ((), (), 'sum'), ((0, 4), (0, 4), 'none')]:
        a, b = np.zeros(xs), np.zeros(ts, np.int64)
        t = tF.multilabel_margin_loss(torch.tensor(a), torch.tensor(b), reduction=red)
        p = F.multilabel_margin_loss(tape.tensor(a), tape.tensor(b), reduction=red)
        assert tuple(p.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(p), _np(t))
    # gradcheck in float64 (duplicate targets count twice, as in PyTorch)
    xg = tape.tensor(_x(3, 5), requires_grad=True)
    tg = tape.tensor(np.array([[1, 1, 3, -1, 0], [4, -1, 0, 0, 0], [0, 1, 2, 3, 4]]))
    assert tape.autograd.gradcheck(lambda a: F.multilabel_margin_loss(a, tg, reduction='none'),
                                   (xg,))


# -- normalization -----------------------------------------------------------------------
@pytest.mark.parametrize('name,shape,kw', [
    ('InstanceNorm1d', (2, 3, 7), {}),
    ('InstanceNorm1d', (3, 7), {'affine': True}),
    ('InstanceNorm1d', (2, 3, 7), {'affine': True, 'bias': False}),
    ('InstanceNorm2d', (2, 3, 4, 5), {'affine': True, 'eps': 1e-3}),
    ('InstanceNorm2d', (3, 4, 5), {}),
    ('InstanceNorm3d', (2, 2, 3, 3, 3), {'affine': True}),
    ('InstanceNorm3d', (2, 3, 3, 3), {'affine': True}),
])
def test_instance_norm_matches_torch(name, shape, kw):
    nb = int(name[-2]) + 1                         # the rank without a batch dimension
    tm, pm = _pair(name, shape[len(shape) - nb], **kw)
    if kw.get('affine'):
        with torch.no_grad():                      # not the ones/zeros they start at
            tm.weight.uniform_(0.5, 1.5)
            if tm.bias is not None:
                tm.bias.uniform_(-0.5, 0.5)
        _copy_state(tm, pm)
    _run(tm, pm, [_x(*shape) * 2 + 1], [True], np.float32, 1e-5)
    tm, pm = tm.double(), pm.double()
    for p in list(tm.parameters()) + list(pm.parameters()):
        p.grad = None
    _run(tm, pm, [_x(*shape) * 2 + 1], [True])
    tm.eval(), pm.eval()
    for p in list(tm.parameters()) + list(pm.parameters()):
        p.grad = None
    _run(tm, pm, [_x(*shape)], [True])             # no running stats: input stats still


@pytest.mark.parametrize('momentum', [0.1, None, 0.5])
def test_instance_norm_running_stats(momentum):
    tm, pm = _pair('InstanceNorm2d', 3, affine=True, track_running_stats=True,
                   momentum=momentum)
    assert list(pm.state_dict()) == ['weight', 'bias', 'running_mean', 'running_var',
                                     'num_batches_tracked']
    assert [k for k, _ in pm.named_buffers()] == ['running_mean', 'running_var',
                                                  'num_batches_tracked']
    tm, pm = tm.double(), pm.double()
    for _ in range(2):
        _run(tm, pm, [_x(2, 3, 4, 5) * 3 + 2], [True])        # updates the buffers alike
    _run(tm, pm, [_x(3, 4, 5) * 3 + 2], [True])               # no batch dim
    # PyTorch's instance norm leaves num_batches_tracked alone
    assert int(pm.num_batches_tracked) == int(tm.num_batches_tracked) == 0
    tm.eval(), pm.eval()
    t_out, p_out = _run(tm, pm, [_x(2, 3, 4, 5)], [True])     # the running stats now
    pm.reset_running_stats()
    assert pm.running_mean.tolist() == [0.0] * 3 and pm.running_var.tolist() == [1.0] * 3


def test_instance_norm_state_dict_and_repr():
    for kw in [{}, {'affine': True}, {'track_running_stats': True},
               {'affine': True, 'bias': False, 'momentum': None}]:
        for name in ['InstanceNorm1d', 'InstanceNorm2d', 'InstanceNorm3d']:
            tm, pm = getattr(tnn, name)(4, **kw), getattr(nn, name)(4, **kw)
            assert repr(pm) == repr(tm)
            assert list(pm.state_dict()) == list(tm.state_dict())
            assert [k for k, _ in pm.named_parameters()] == \
                [k for k, _ in tm.named_parameters()]
    # an old checkpoint's running stats for a module that does not track them
    pm = nn.InstanceNorm1d(2)
    sd = {'running_mean': tape.zeros(2), 'running_var': tape.ones(2)}
    with pytest.raises(RuntimeError, match='Unexpected running stats buffer'):
        pm.load_state_dict(sd)
    tm = tnn.InstanceNorm1d(2, track_running_stats=True)
    pm = nn.InstanceNorm1d(2, track_running_stats=True)
    pm.load_state_dict({'running_mean': tape.ones(2), 'running_var': tape.ones(2) * 2})
    assert pm.running_mean.tolist() == [1.0, 1.0]


def test_instance_norm_errors_and_warning():
    for lib, mk in [(nn, tape.zeros), (tnn, torch.zeros)]:
        with pytest.raises(ValueError, match=r'expected 2D or 3D input \(got 4D input\)'):
            lib.InstanceNorm1d(3)(mk(1, 3, 4, 5))
        with pytest.raises(ValueError, match=r'expected 3D or 4D input \(got 2D input\)'):
            lib.InstanceNorm2d(3)(mk(3, 4))
        with pytest.raises(ValueError, match=r'expected 4D or 5D input \(got 3D input\)'):
            lib.InstanceNorm3d(3)(mk(3, 4, 4))
        with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match"):
            lib.InstanceNorm1d(3, affine=True)(mk(2, 4, 5))
        with pytest.warns(UserWarning, match=r"input's size at dim=0 does not match"):
            lib.InstanceNorm1d(3)(mk(4, 5) + 1)
        with pytest.raises(ValueError, match='Expected more than 1 spatial element'):
            lib.InstanceNorm1d(3)(mk(2, 3, 1))


def test_instance_norm_gradcheck():
    m = nn.InstanceNorm2d(2, affine=True).double()
    with tape.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-1, 1)
    x = tape.tensor(_x(2, 2, 3, 3), requires_grad=True)
    assert tape.autograd.gradcheck(m, (x,))
    assert tape.autograd.gradcheck(lambda w: nn.functional.instance_norm(
        x, weight=w, bias=m.bias), (m.weight,))


@pytest.mark.parametrize('args,kw,shape', [
    ((5,), {}, (3, 5)),
    (([4, 5],), {}, (2, 4, 5)),
    ((5,), {'eps': 1e-3, 'elementwise_affine': False}, (3, 5)),
    (((2, 3),), {'eps': 0.1}, (3, 2, 3)),
])
@pytest.mark.parametrize('dtype', [np.float64, np.float32], ids=['f64', 'f32'])
def test_rms_norm_matches_torch(args, kw, shape, dtype):
    tm = tnn.RMSNorm(*args, **kw)
    pm = nn.RMSNorm(*args, **kw)
    if tm.weight is not None:
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
    if dtype == np.float64:
        tm, pm = tm.double(), pm.double()
    _copy_state(tm, pm)
    assert list(pm.state_dict()) == (['weight'] if kw.get('elementwise_affine', True) else [])
    _run(tm, pm, [_x(*shape)], [True], dtype, 1e-10 if dtype == np.float64 else 1e-5)


def test_rms_norm_errors_and_gradcheck():
    with pytest.raises(RuntimeError):
        tnn.RMSNorm(4)(torch.zeros(3, 5))
    with pytest.raises(RuntimeError, match='expected input with shape'):
        nn.RMSNorm(4)(tape.zeros(3, 5))
    m = nn.RMSNorm(4).double()
    with tape.no_grad():
        m.weight.uniform_(0.5, 1.5)
    x = tape.tensor(_x(3, 4), requires_grad=True)
    assert tape.autograd.gradcheck(m, (x,))
    assert repr(nn.RMSNorm([2, 3], eps=1e-6)) == repr(tnn.RMSNorm([2, 3], eps=1e-6))


# -- padding -----------------------------------------------------------------------------
PADS = []
for _kind in ['Reflection', 'Replication', 'Circular', 'Zero', 'Constant']:
    for _k, _pad in [(1, 2), (1, (1, 3)), (2, 1), (2, (1, 0, 2, 1)), (3, 1),
                     (3, (1, 0, 0, 2, 1, 1))]:
        for _batched in (False, True):
            PADS.append((f'{_kind}Pad{_k}d', _pad, (2,) * _batched + (3,) + (4,) * _k))


@pytest.mark.parametrize('name,pad,shape', PADS,
                         ids=[f'{n}-{p}-{len(s)}D' for n, p, s in PADS])
def test_padding_matches_torch(name, pad, shape):
    args = (pad, 1.5) if name.startswith('Constant') else (pad,)
    tm, pm = _pair(name, *args)
    _run(tm, pm, [_x(*shape)], [True])


def test_padding_negative_values_and_reprs():
    for name, args in [('ConstantPad1d', ((-1, 2), 0.0)), ('ConstantPad2d', (-1, 3)),
                       ('CircularPad2d', ((-1, 2, 1, 0),)), ('ZeroPad2d', ((1, -1, 0, 2),)),
                       ('ReplicationPad2d', ((-1, 2, 0, 1),))]:
        tm, pm = _pair(name, *args)
        _run(tm, pm, [_x(2, 3, 4, 5)], [True])
    for name, args in [('ConstantPad3d', (1, 2.5)), ('ZeroPad1d', (2,)),
                       ('ZeroPad3d', ((1, 2, 3, 4, 5, 6),)), ('ReflectionPad2d', (3,)),
                       ('CircularPad3d', (1,)), ('ConstantPad1d', (3, -1))]:
        assert repr(getattr(nn, name)(*args)) == repr(getattr(tnn, name)(*args))
        assert getattr(nn, name)(*args).padding == getattr(tnn, name)(*args).padding


def test_padding_errors():
    for lib, mk in [(nn, tape.zeros), (tnn, torch.zeros)]:
        with pytest.raises(ValueError, match=r'expected 2D or 3D input \(got 4D input\)'):
            lib.CircularPad1d(1)(mk(1, 2, 3, 4))
        with pytest.raises(ValueError, match=r'expected 4D or 5D input \(got 3D input\)'):
            lib.CircularPad3d(1)(mk(2, 3, 4))
        with pytest.raises(RuntimeError):
            lib.ReflectionPad1d(4)(mk(1, 2, 4))              # pad >= the dimension
        with pytest.raises((RuntimeError, NotImplementedError)):
            lib.ReplicationPad1d(1)(mk(2, 3, 4, 5))


def test_padding_gradcheck():
    x = tape.tensor(_x(1, 2, 3, 4), requires_grad=True)
    for m in [nn.ReflectionPad2d((2, 1, 1, 2)), nn.ReplicationPad2d(2),
              nn.CircularPad2d((1, 2, 2, 0))]:
        assert tape.autograd.gradcheck(m, (x,))


# -- dropout ----------------------------------------------------------------------------
@pytest.mark.parametrize('name,shape', [('Dropout1d', (4, 5, 6)), ('Dropout1d', (5, 6)),
                                        ('Dropout2d', (4, 5, 3, 3)),
                                        ('Dropout3d', (4, 5, 2, 2, 2)),
                                        ('Dropout3d', (5, 2, 2, 2)),
                                        ('AlphaDropout', (4, 5)),
                                        ('FeatureAlphaDropout', (4, 5, 3))])
def test_dropout_eval_identity_repr_and_train(name, shape):
    for kw in [{}, {'p': 0.2}, {'p': 0.3, 'inplace': True}]:
        assert repr(getattr(nn, name)(**kw)) == repr(getattr(tnn, name)(**kw))
    tm, pm = _pair(name, 0.4)
    tm.eval(), pm.eval()
    _run(tm, pm, [_x(*shape)], [True])
    pm.train()
    assert pm.training
    tape.manual_seed(0)
    x = tape.tensor(np.abs(_x(*shape)) + 0.5, requires_grad=True)
    out = pm(x)
    o, xd = _np(out), _np(x)
    if name.startswith('Dropout'):
        # whole channels are dropped or scaled by 1/(1-p)
        lead = shape[:len(shape) - int(name[-2])]
        ratio = (o / xd).reshape(*lead, -1)
        assert np.allclose(ratio, ratio[..., :1])
        assert set(np.round(np.unique(ratio), 6)) <= {0.0, round(1 / 0.6, 6)}
    out.sum().backward()
    assert x.grad is not None
    # p == 0 keeps the input; p == 1 zeros it
    assert np.array_equal(_np(getattr(nn, name)(0.0)(x)), xd)
    z = _np(getattr(nn, name)(1.0)(x))
    assert np.all(z == 0.0) if name.startswith('Dropout') else np.allclose(z, z.flat[0])


def test_alpha_dropout_keeps_mean_and_variance():
    tape.manual_seed(1)
    x = tape.randn(200, 500)
    for m in (nn.AlphaDropout(0.3), nn.FeatureAlphaDropout(0.3)):
        y = _np(m(x if isinstance(m, nn.AlphaDropout) else x.reshape(200, 500, 1)))
        assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05


def test_dropout_errors():
    for lib in (nn, tnn):
        for name in ['Dropout1d', 'Dropout2d', 'Dropout3d', 'AlphaDropout',
                     'FeatureAlphaDropout']:
            with pytest.raises(ValueError, match='dropout probability has to be between 0 and 1'):
                getattr(lib, name)(1.5)
    with pytest.raises(RuntimeError, match='dropout1d: Expected 2D or 3D input'):
        nn.Dropout1d()(tape.zeros(2, 3, 4, 5))
    with pytest.raises(RuntimeError):
        tnn.Dropout1d()(torch.zeros(2, 3, 4, 5))


def test_all_listed_names_exist_like_torch():
    from tape.nn import _modules_more
    for name in _modules_more.__all__:
        assert hasattr(tnn, name) and getattr(nn, name) is getattr(_modules_more, name)
    assert nn.functional.multilabel_margin_loss is _modules_more.multilabel_margin_loss


# -- LazyLinear ----------------------------------------------------------------------------
def test_lazy_linear_materializes_on_first_call():
    for bias in (True, False):
        tm, pm = tnn.LazyLinear(3, bias=bias), nn.LazyLinear(3, bias=bias)
        assert repr(pm) == repr(tm)
        assert list(pm.state_dict()) == list(tm.state_dict())
        assert isinstance(pm.weight, nn.UninitializedParameter)
        assert isinstance(pm.weight, nn.Parameter) and pm.weight.requires_grad
        assert pm.has_uninitialized_params()
        assert len(list(pm.parameters())) == len(list(tm.parameters()))
        w = pm.weight
        tape.manual_seed(0)
        x = tape.randn(2, 5)
        y = pm(x)
        tm(torch.randn(2, 5))
        assert type(pm) is nn.Linear and type(tm) is tnn.Linear
        assert repr(pm) == repr(tm) == f'Linear(in_features=5, out_features=3, bias={bias})'
        assert pm.weight is w                           # the same object, materialized
        assert not isinstance(pm.weight, nn.UninitializedParameter)
        assert tuple(pm.weight.shape) == (3, 5) and not pm._forward_pre_hooks
        assert np.abs(_np(pm.weight)).max() <= 1 / np.sqrt(5)   # Linear's initialisation
        b = pm.bias if bias else tape.zeros(3)
        np.testing.assert_allclose(_np(y), _np(x @ pm.weight.T + b), rtol=1e-6)
        y.sum().backward()
        assert tuple(pm.weight.grad.shape) == (3, 5)


def test_lazy_linear_dtype_and_state_dict_loading():
    pm = nn.LazyLinear(2).double()
    assert pm.weight.dtype == tape.float64 and isinstance(pm.weight, nn.UninitializedParameter)
    pm(tape.zeros(4, 3, dtype=tape.float64))
    assert pm.weight.dtype == tape.float64
    # a state dict with real tensors materializes the parameters; the first call finishes
    src = tnn.Linear(4, 3)
    tm, pm = tnn.LazyLinear(3), nn.LazyLinear(3)
    tm.load_state_dict(src.state_dict())
    pm.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})
    assert repr(pm) == repr(tm) and type(pm) is nn.LazyLinear
    assert tuple(pm.weight.shape) == (3, 4) and not pm.has_uninitialized_params()
    x = _x(2, 4).astype(np.float32)
    np.testing.assert_allclose(_np(pm(tape.tensor(x))), _np(tm(torch.tensor(x))), rtol=1e-5)
    assert repr(pm) == repr(tm) and type(pm) is nn.Linear
    # an uninitialized module's state dict holds its uninitialized parameters
    sd = nn.LazyLinear(3).state_dict()
    assert all(isinstance(v, nn.UninitializedParameter) for v in sd.values())
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(sd)
    assert fresh.has_uninitialized_params()


def test_lazy_linear_copies_and_nests():
    import copy
    import pickle
    for c in (copy.deepcopy(nn.LazyLinear(3)), pickle.loads(pickle.dumps(nn.LazyLinear(3)))):
        assert isinstance(c.weight, nn.UninitializedParameter)
        c(tape.zeros(2, 4))
        assert repr(c) == 'Linear(in_features=4, out_features=3, bias=True)'
    s = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(1))
    assert tuple(s(tape.zeros(5, 7)).shape) == (5, 1)
    assert [tuple(p.shape) for p in s.parameters()] == [(4, 7), (4,), (1, 4), (1,)]
