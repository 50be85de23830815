"""Adversarial review of the new parts (optim, nn modules, conv/pool/batchnorm,
anomaly mode, printoptions, scatter_reduce, linalg additions, unique, rng state),
side by side with PyTorch: the edge cases real programs hit."""
import copy
import pickle
import threading
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip('torch')


def _np(t):
    return np.asarray(t.detach().numpy())


def _pair(a, requires_grad=True):
    """The same values as a torch and a tape leaf."""
    rg = requires_grad and np.asarray(a).dtype.kind == 'f'
    return (torch.tensor(a, requires_grad=rg), tape.tensor(a, requires_grad=rg))


# -- conv / pooling: an empty batch ------------------------------------------------
# A DataLoader's last batch can be empty after filtering; PyTorch returns an empty
# output of the right shape (and an empty gradient).  The im2col reshape used -1,
# which NumPy cannot infer from zero elements.
@pytest.mark.parametrize('op', [
    lambda F, x, w: F.conv2d(x, w, padding=1, groups=2),
    lambda F, x, w: F.conv1d(x.flatten(2), w[..., 0], stride=2, groups=2),
    lambda F, x, w: F.max_pool2d(x, 2),
    lambda F, x, w: F.max_pool2d(x, 3, 1, 1, return_indices=True)[0],
    lambda F, x, w: F.avg_pool2d(x, 2, padding=1),
    lambda F, x, w: F.max_pool1d(x.flatten(2), 3),
    lambda F, x, w: F.avg_pool1d(x.flatten(2), 2),
])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_conv_and_pool_accept_an_empty_batch(op, dtype):
    x = np.zeros((0, 4, 5, 6), dtype)
    w = np.random.default_rng(0).standard_normal((6, 2, 3, 3)).astype(dtype)
    xt, xp = _pair(x)
    wt, wp = _pair(w)
    yt = op(torch.nn.functional, xt, wt)
    yp = op(TF, xp, wp)
    assert tuple(yp.shape) == tuple(yt.shape)
    assert yp.dtype == getattr(tape, str(yt.dtype).split('.')[-1])
    assert yp.requires_grad == yt.requires_grad
    yt.sum().backward()
    yp.sum().backward()
    assert tuple(xp.grad.shape) == tuple(xt.grad.shape)
    if wt.grad is not None:         # an empty batch contributes a zero weight gradient
        np.testing.assert_array_equal(_np(wp.grad), wt.grad.numpy())


def test_conv_module_on_an_empty_batch_then_a_full_one():
    torch.manual_seed(0)
    mt = torch.nn.Conv2d(3, 4, 3, padding=1)
    mp = tape.nn.Conv2d(3, 4, 3, padding=1)
    mp.load_state_dict({k: tape.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    assert tuple(mp(tape.zeros(0, 3, 5, 5)).shape) == (0, 4, 5, 5)
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(_np(mp(tape.tensor(x))), mt(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


# -- conv: error types of the functional form ---------------------------------------
def test_functional_conv_invalid_padding_string_is_a_runtime_error():
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2),
                                   padding='foo')
    with pytest.raises(RuntimeError, match='padding'):
        TF.conv2d(tape.ones(1, 1, 4, 4), tape.ones(1, 1, 2, 2), padding='foo')
    with pytest.raises(ValueError):         # the module's check stays a ValueError, as torch
        tape.nn.Conv2d(1, 1, 2, padding='foo')
    # and the library is still usable afterwards
    assert tuple(TF.conv2d(tape.ones(1, 1, 4, 4), tape.ones(1, 1, 2, 2)).shape) == (1, 1, 3, 3)


def test_functional_conv_strided_same_is_a_runtime_error():
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2), stride=2,
                                   padding='same')
    with pytest.raises(RuntimeError, match='strided'):
        TF.conv2d(tape.ones(1, 1, 4, 4), tape.ones(1, 1, 2, 2), stride=2, padding='same')


# -- lstsq: PyTorch's per-driver outputs and its gradient ----------------------------
def _lstsq_inputs(dtype):
    rng = np.random.default_rng(3)
    return (rng.standard_normal((5, 3)).astype(dtype), rng.standard_normal((5, 2)).astype(dtype))


@pytest.mark.parametrize('driver', [None, 'gelsy', 'gelsd', 'gelss', 'gels'])
@pytest.mark.parametrize('vector_rhs', [False, True])
def test_lstsq_outputs_per_driver_match_torch(driver, vector_rhs):
    a, b = _lstsq_inputs(np.float64)
    if vector_rhs:
        b = b[:, 0]
    at, ap = _pair(a)
    bt, bp = _pair(b)
    rt = torch.linalg.lstsq(at, bt, driver=driver)
    rp = tape.linalg.lstsq(ap, bp, driver=driver)
    for name in ('solution', 'residuals', 'rank', 'singular_values'):
        t, p = getattr(rt, name), getattr(rp, name)
        assert tuple(p.shape) == tuple(t.shape), name
        assert str(p.dtype).split('.')[-1] == str(t.dtype).split('.')[-1], name
        assert p.requires_grad == t.requires_grad, name
        np.testing.assert_allclose(_np(p), t.detach().numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)
    if rt.residuals.numel():
        # the residuals are differentiable, as torch's
        gt = torch.autograd.grad(rt.residuals.sum(), [at, bt])
        gp = tape.autograd.grad(rp.residuals.sum(), [ap, bp])
        for x, y in zip(gt, gp):
            np.testing.assert_allclose(_np(y), x.numpy(), rtol=1e-8, atol=1e-10)


def test_lstsq_rejects_an_unknown_driver():
    a, b = _lstsq_inputs(np.float64)
    with pytest.raises(RuntimeError, match='driver'):
        torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver='lu')
    with pytest.raises(RuntimeError, match='driver'):
        tape.linalg.lstsq(tape.tensor(a), tape.tensor(b), driver='lu')


@pytest.mark.parametrize('shape', [(5, 3), (3, 5), (2, 4, 3)])
def test_lstsq_gradient_of_a_rank_deficient_matrix_is_torchs(shape):
    # torch differentiates lstsq as pinv(A) @ B; the normal equations (A^T A)^-1 of
    # the old backward are singular for a rank-deficient A (gradients of 1e14)
    rng = np.random.default_rng(4)
    a = rng.standard_normal(shape)
    a[..., -1] = a[..., 0]                      # rank one less than full
    b = rng.standard_normal(shape[:-1] + (2,))
    g = rng.standard_normal(shape[:-2] + (shape[-1], 2))
    at, ap = _pair(a)
    bt, bp = _pair(b)
    xt = torch.linalg.lstsq(at, bt, driver='gelsd').solution
    xp = tape.linalg.lstsq(ap, bp, driver='gelsd').solution
    np.testing.assert_allclose(_np(xp), xt.detach().numpy(), rtol=1e-8, atol=1e-10)
    gt = torch.autograd.grad(xt, [at, bt], torch.tensor(g))
    gp = tape.autograd.grad(xp, [ap, bp], tape.tensor(g))
    for x, y in zip(gt, gp):
        np.testing.assert_allclose(_np(y), x.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize('shape', [(5, 3), (3, 5)])
def test_lstsq_gradient_checks_to_second_order(shape):
    # the pinv-based backward is written in tape ops, so it differentiates again
    rng = np.random.default_rng(5)
    a = tape.tensor(rng.standard_normal(shape), requires_grad=True)
    b = tape.tensor(rng.standard_normal((shape[0], 2)), requires_grad=True)
    fn = lambda A, B: tape.linalg.lstsq(A, B).solution      # noqa: E731
    assert tape.autograd.gradcheck(fn, (a, b))
    assert tape.autograd.gradgradcheck(fn, (a, b))


# -- unique: NaNs are distinct, as in torch ------------------------------------------
@pytest.mark.parametrize('kw', [dict(), dict(return_inverse=True, return_counts=True),
                                dict(sorted=False, return_counts=True)])
def test_unique_keeps_nans_distinct(kw):
    x = np.array([np.nan, 1.0, np.nan, 1.0, 2.0])
    rt = torch.unique(torch.tensor(x), **kw)
    rp = tape.unique(tape.tensor(x), **kw)
    rt = rt if isinstance(rt, tuple) else (rt,)
    rp = rp if isinstance(rp, tuple) else (rp,)
    for t, p in zip(rt, rp):
        assert tuple(p.shape) == tuple(t.shape)
        np.testing.assert_array_equal(_np(p), t.numpy())


# -- Generator state, as torch.Generator ------------------------------------------------
def test_generator_get_and_set_state():
    for lib in (torch, tape):
        g = lib.Generator()
        g.manual_seed(5)
        state = g.get_state()
        assert state.dtype == lib.uint8 and state.dim() == 1
        first = lib.rand(3, generator=g) if lib is torch else \
            TF.dropout(tape.ones(64), 0.5, generator=g)
        assert g.set_state(state) is g
        again = lib.rand(3, generator=g) if lib is torch else \
            TF.dropout(tape.ones(64), 0.5, generator=g)
        assert lib.equal(first, again)
        s = g.seed()
        assert isinstance(s, int) and g.initial_seed() == s
    with pytest.raises(TypeError):
        tape.Generator().set_state(tape.zeros(3))


def test_top_level_anomaly_functions_as_torch():
    # torch.is_anomaly_enabled / set_anomaly_enabled live at the top level
    for lib in (torch, tape):
        assert not lib.is_anomaly_enabled()
        lib.set_anomaly_enabled(True)
        try:
            assert lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
            lib.set_anomaly_enabled(True, False)
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
        finally:
            lib.set_anomaly_enabled(False)
        assert not lib.is_anomaly_enabled()


# -- nn containers and modules -------------------------------------------------------
def test_sequential_and_modulelist_pop_as_torch():
    for lib in (torch, tape):
        s = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Tanh())
        popped = s.pop(0)
        assert type(popped).__name__ == 'Linear'
        assert list(s._modules) == ['0', '1'] and type(s[0]).__name__ == 'ReLU'
        ml = lib.nn.ModuleList([lib.nn.ReLU(), lib.nn.Tanh(), lib.nn.Sigmoid()])
        assert type(ml.pop(-1)).__name__ == 'Sigmoid' and len(ml) == 2
        assert len(ml.pop(slice(0, 1))) == 1 and type(ml[0]).__name__ == 'Tanh'


def test_get_parameter_errors_as_torch():
    for lib in (torch, tape):
        m = lib.nn.Sequential(lib.nn.BatchNorm1d(2))
        with pytest.raises(AttributeError, match='has no attribute `nope`'):
            m.get_parameter('0.nope')
        with pytest.raises(AttributeError, match='is not an nn.Parameter'):
            m.get_parameter('0.running_mean')
        assert tuple(m.get_parameter('0.weight').shape) == (2,)


def test_deepcopied_model_has_no_stale_gradients():
    # torch's Parameter.__deepcopy__ leaves .grad out: an optimizer over a copy made
    # after backward (MAML-style "fast weights", EMA targets) must not apply the
    # original's gradients
    results = []
    for lib in (torch, tape):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Tanh(), lib.nn.Linear(2, 1))
        m(lib.ones(4, 3)).sum().backward()
        fast = copy.deepcopy(m)
        assert all(p.grad is None for p in fast.parameters())
        assert all(p.grad is not None for p in m.parameters())     # the original keeps its own
        assert all(isinstance(p, lib.nn.Parameter) for p in fast.parameters())
        before = [_np(p).copy() for p in fast.parameters()]
        lib.optim.SGD(fast.parameters(), lr=1.0).step()
        results.append(all(np.array_equal(b, _np(p)) for b, p in zip(before, fast.parameters())))
    assert results == [True, True]


def test_deepcopy_and_pickle_of_a_lone_parameter_keep_it_a_parameter():
    p = tape.nn.Parameter(tape.ones(2))
    (p * 2).sum().backward()
    q = copy.deepcopy(p)
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(q, tape.nn.Parameter) and isinstance(r, tape.nn.Parameter)
    assert q.grad is None                   # as torch's Parameter.__deepcopy__
    m = tape.nn.Linear(2, 1)
    m.weight = copy.deepcopy(m.weight)      # torch accepts this: the copy is a Parameter


def test_state_dict_round_trip_through_torch_with_numpy_arrays():
    # a conv/bn/linear model: torch's weights and running statistics, as NumPy arrays,
    # load into tape's copy, which then computes what torch computes (train and eval),
    # and tape's state_dict goes back into torch unchanged
    def build(lib):
        nn = lib.nn
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 2))
    torch.manual_seed(0)
    mt, mp = build(torch), build(tape)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    mt(torch.tensor(x))                     # moves the running statistics
    arrays = {k: v.numpy().copy() for k, v in mt.state_dict().items()}
    result = mp.load_state_dict({k: tape.tensor(v) for k, v in arrays.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert int(mp[1].num_batches_tracked) == 1
    for mode in ('train', 'eval'):
        getattr(mt, mode)()
        getattr(mp, mode)()
        np.testing.assert_allclose(_np(mp(tape.tensor(x))), mt(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
    back = {k: torch.tensor(_np(v)) for k, v in mp.state_dict().items()}
    mt2 = build(torch)
    mt2.load_state_dict(back)
    for k, v in mt.state_dict().items():
        assert mt2.state_dict()[k].dtype == v.dtype
        np.testing.assert_allclose(mt2.state_dict()[k].numpy(), v.numpy(), rtol=1e-6)


# -- optimizers: resuming from torch's state, parameters without gradients ------------
_OPTIMIZERS = {
    'sgd': lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                         weight_decay=0.01),
    'adam': lambda lib, ps: lib.optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.1),
    'adamw': lambda lib, ps: lib.optim.AdamW(ps, lr=0.05),
    'adagrad': lambda lib, ps: lib.optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
    'rmsprop': lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True),
}


def _train(lib, make, steps, w0, b0, state=None):
    w = lib.tensor(w0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    frozen = lib.tensor(w0.copy(), requires_grad=True)        # never gets a gradient
    opt = make(lib, [{'params': [w, frozen]}, {'params': [b], 'lr': 0.02}])
    sched = lib.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    if state is not None:
        opt.load_state_dict(state[0])
        sched.load_state_dict(state[1])
    for i in range(steps):
        opt.zero_grad(set_to_none=i % 2 == 0)   # zeros (kept) and None (skipped) mixed
        loss = (w ** 2).sum() + (b.sum() * 3 if i % 3 else 0)  # b: no gradient some steps
        loss.backward()
        opt.step()
        sched.step()
    return w, b, frozen, opt, sched


@pytest.mark.parametrize('name', sorted(_OPTIMIZERS))
def test_optimizer_resumes_from_torch_state_given_as_numpy(name):
    make = _OPTIMIZERS[name]
    w0 = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    b0 = np.array([0.1, -0.3], np.float32)
    wt, bt, ft, ot, st = _train(torch, make, 3, w0, b0)
    # torch's optimizer and scheduler state, tensors as NumPy arrays
    sd = ot.state_dict()
    state = {'state': {k: {kk: tape.tensor(v.numpy()) for kk, v in s.items()}
                       for k, s in sd['state'].items()},
             'param_groups': copy.deepcopy(sd['param_groups'])}
    w_resume = wt.detach().numpy().copy()
    wp, bp, fp, op, sp = _train(tape, make, 3, w_resume.copy(),
                                bt.detach().numpy().copy(), (state, st.state_dict()))
    wt2, bt2, ft2, _, st2 = _train(torch, make, 3, wt.detach().numpy().copy(),
                                   bt.detach().numpy().copy(), (sd, st.state_dict()))
    np.testing.assert_allclose(_np(wp), wt2.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(bp), bt2.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_np(fp), w_resume)           # no gradient: untouched
    assert op.state_dict()['state'].keys() == ot.state_dict()['state'].keys()
    assert sp.get_last_lr() == st2.get_last_lr()
    # the optimizer pickles, and the copy steps the copied parameters only
    op2 = pickle.loads(pickle.dumps(op))
    p2 = op2.param_groups[0]['params'][0]
    p2.grad = tape.ones_like(p2)
    before = _np(wp).copy()
    op2.step()
    np.testing.assert_array_equal(_np(wp), before)
    assert not np.array_equal(_np(p2), before)


# -- anomaly mode with hooks and custom Functions ---------------------------------------
def test_anomaly_mode_sees_hook_fixed_gradients_and_custom_functions():
    warnings.simplefilter('ignore')
    seen = {}
    for lib in (torch, tape):
        class NanBack(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * float('nan')
        x = lib.ones(2, requires_grad=True)
        with lib.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="Function 'NanBackBackward' returned nan "
                               "values in its 0th output"):
                NanBack.apply(x).sum().backward()
            # a node hook that replaces the NaN runs before the check, as in torch
            z = lib.zeros(2, requires_grad=True)
            out = z.sqrt()
            out.grad_fn.register_hook(
                lambda gi, go: tuple(None if g is None else lib.nan_to_num(g) for g in gi))
            (out * 0).sum().backward()
            seen[lib.__name__] = z.grad.tolist()
        # the failed backward leaves the library usable
        y = lib.ones(2, requires_grad=True)
        (y * 3).sum().backward()
        assert y.grad.tolist() == [3.0, 3.0]
        assert not (lib.is_anomaly_enabled())
    assert seen['torch'] == seen['tape'] == [0.0, 0.0]


# -- copysign: PyTorch's type promotion, and other's zero gradient -------------------------
@pytest.mark.parametrize('da,db', [(np.float32, np.float64), (np.float64, np.float32),
                                   (np.int64, np.float64), (np.float32, np.int64),
                                   (np.int64, np.int64)])
def test_copysign_promotes_as_torch(da, db):
    a = np.array([1.0, -2.0, 3.0]).astype(da)
    b = np.array([[-1.0], [0.0]]).astype(db)
    at, ap = _pair(a)
    bt, bp = _pair(b)
    yt = torch.copysign(at, bt)
    yp = tape.copysign(ap, bp)
    assert str(yp.dtype) == str(yt.dtype).split('.')[-1]
    np.testing.assert_array_equal(_np(yp), yt.detach().numpy())
    assert yp.requires_grad == yt.requires_grad
    if yt.requires_grad:
        g = np.ones(tuple(yt.shape))
        leaves = [(t, p) for t, p in ((at, ap), (bt, bp)) if t.requires_grad]
        gt = torch.autograd.grad(yt, [t for t, _ in leaves], torch.tensor(g, dtype=yt.dtype))
        gp = tape.autograd.grad(yp, [p for _, p in leaves], tape.tensor(g, dtype=yp.dtype))
        for x, y in zip(gt, gp):            # other's is a zero (not None), in its dtype
            assert y is not None and str(y.dtype) == str(x.dtype).split('.')[-1]
            np.testing.assert_allclose(_np(y), x.numpy())


def test_batchnorm_loads_a_plain_dict_without_num_batches_tracked():
    # weights converted from elsewhere often lack the count; torch accepts a state dict
    # without a version (no _metadata) and keeps the module's own count, and still
    # requires it from a dict saved with version 2
    for lib in (torch, tape):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        arrays = {k: (v.numpy() if lib is torch else _np(v)).copy()
                  for k, v in m.state_dict().items() if not k.endswith('num_batches_tracked')}
        arrays['1.running_mean'] += 1.0
        result = m.load_state_dict({k: lib.tensor(v) for k, v in arrays.items()})
        assert result.missing_keys == [] and result.unexpected_keys == []
        assert int(m[1].num_batches_tracked) == 0
        np.testing.assert_array_equal(np.asarray(m[1].running_mean.tolist()),
                                      arrays['1.running_mean'])
    saved = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3)).state_dict()
    del saved['1.num_batches_tracked']
    converted = type(saved)((k, tape.tensor(v.numpy())) for k, v in saved.items())
    converted._metadata = saved._metadata
    m = tape.nn.Sequential(tape.nn.Linear(2, 3), tape.nn.BatchNorm1d(3))
    with pytest.raises(RuntimeError, match='Missing key.*num_batches_tracked'):
        m.load_state_dict(converted)
    # the failed load leaves the module usable
    assert tuple(m(tape.ones(2, 2)).shape) == (2, 3)


# -- printoptions: many tensors under each option set, then a reset -------------------------
_PRINT_VALUES = [np.arange(1500, dtype=np.float32).reshape(30, 50) / 7,
                 np.array([1e-5, 1.0, 1e8]), np.array([123456789.0, 1.0]),
                 np.array([True, False]), np.array([10 ** 12, 3]), np.zeros((2, 0, 3)),
                 np.array(3.14159), np.array([np.nan, np.inf, -1.5]), np.array([-0.0, 0.0]),
                 np.array([0.1, 0.2], np.float16), np.array([[1.5, -2.25]])]


@pytest.mark.parametrize('opts', [dict(precision=2), dict(threshold=5),
                                  dict(edgeitems=1, threshold=3), dict(linewidth=30),
                                  dict(sci_mode=True), dict(sci_mode=False),
                                  dict(profile='short'), dict(profile='full'),
                                  dict(precision=6, sci_mode=False, linewidth=200)])
def test_printoptions_match_torch_and_reset(opts):
    try:
        torch.set_printoptions(**opts)
        tape.set_printoptions(**opts)
        for v in _PRINT_VALUES:
            for rg in (False, True):
                if rg and v.dtype.kind != 'f':
                    continue
                t = torch.tensor(v, requires_grad=rg)
                p = tape.tensor(v, requires_grad=rg)
                if rg:                      # a grad_fn suffix too
                    t, p = t * 2, p * 2
                assert repr(p).replace('tape.', '') == repr(t).replace('torch.', '')
    finally:
        torch.set_printoptions(profile='default', sci_mode=None)
        tape.set_printoptions(profile='default', sci_mode=None)
    for v in _PRINT_VALUES:
        assert repr(tape.tensor(v)).replace('tape.', '') == \
            repr(torch.tensor(v)).replace('torch.', '')


# -- grad mode is per thread, inside a module's forward too ---------------------------------
def test_no_grad_in_a_thread_does_not_leak_into_a_module_forward():
    m = tape.nn.Linear(3, 2)
    seen = {}
    barrier = threading.Barrier(2)

    def worker():
        with tape.no_grad():
            barrier.wait()
            seen['thread'] = m(tape.ones(1, 3)).requires_grad
            barrier.wait()
    t = threading.Thread(target=worker)
    t.start()
    barrier.wait()                          # the worker is inside no_grad now
    seen['main'] = m(tape.ones(1, 3)).requires_grad
    barrier.wait()
    t.join()
    assert seen == {'thread': False, 'main': True}
