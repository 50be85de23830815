"""tape.optim's Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop and
tape.optim.swa_utils, run side by side with torch.optim from the same initial
values: parameters after every step, state and state_dict layouts, checkpoint
round trips, per-group options, the errors for bad hyper-parameters."""
import copy
import warnings

import numpy as np
import pytest

import tape
import tape.optim
from tape.optim import swa_utils

torch = pytest.importorskip('torch')

OPTIMIZERS = {
    'Adamax': [dict(lr=0.01), dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.1),
               dict(lr=0.01, maximize=True, eps=1e-3)],
    'NAdam': [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1),
              dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
              dict(lr=0.02, betas=(0.7, 0.9), momentum_decay=0.1, maximize=True)],
    'RAdam': [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1),
              dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
              dict(lr=0.02, betas=(0.5, 0.8), maximize=True, eps=1e-4)],
    'Adadelta': [dict(), dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1),
                 dict(lr=2.0, maximize=True)],
    'ASGD': [dict(lr=0.05), dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=5),
             dict(lr=0.03, weight_decay=0.1, maximize=True, t0=10)],
    'Rprop': [dict(), dict(lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-4, 0.05)),
              dict(lr=0.01, maximize=True)],
}
CASES = [(name, kw) for name, kws in OPTIMIZERS.items() for kw in kws]
STEPS = 25


def _case_id(case):
    name, kw = case
    return name + '-' + '-'.join(f'{k}={v}' for k, v in kw.items())


def _init_values(seed=0):
    rng = np.random.default_rng(seed)
    return {'x': rng.standard_normal((8, 3)), 'y': rng.standard_normal((8, 1)),
            'W1': rng.standard_normal((3, 5)) * 0.5, 'b1': rng.standard_normal(5) * 0.1,
            'W2': rng.standard_normal((5, 1)) * 0.5, 'b2': rng.standard_normal(1) * 0.1}


def _make(lib, vals, dtype):
    ldt = getattr(lib, dtype)
    params = [lib.tensor(vals[n].astype(dtype), dtype=ldt, requires_grad=True)
              for n in ('W1', 'b1', 'W2', 'b2')]
    x = lib.tensor(vals['x'].astype(dtype), dtype=ldt)
    y = lib.tensor(vals['y'].astype(dtype), dtype=ldt)
    return params, x, y


def _loss(lib, params, x, y):
    W1, b1, W2, b2 = params
    return ((lib.tanh(x @ W1 + b1) @ W2 + b2 - y) ** 2).mean()


def _np(t):
    return np.asarray(t.detach().numpy()) if hasattr(t, 'detach') else np.asarray(t)


def _close(ours, theirs, dtype, what):
    ours, theirs = _np(ours), _np(theirs)
    assert ours.dtype == theirs.dtype, what
    if dtype == 'float64':
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=what)
    else:
        scale = max(1.0, float(np.abs(theirs).max()) if theirs.size else 1.0)
        assert np.abs(ours - theirs).max(initial=0) <= 2e-5 * scale, what


def _train(opt, lib, params, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        _loss(lib, params, x, y).backward()
        opt.step()


def _compare_state(topt, popt, tp, pp, dtype, what):
    for a, b in zip(tp, pp):
        ts, ps = topt.state[a], popt.state[b]
        assert sorted(ts) == sorted(ps), what
        for key in ps:
            if torch.is_tensor(ps[key]):
                assert isinstance(ts[key], tape.Tensor), (what, key)
                assert tuple(ts[key].shape) == tuple(ps[key].shape), (what, key)
                _close(ts[key], ps[key], dtype, f'{what} state {key}')
            else:
                assert ts[key] == ps[key], (what, key)


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_matches_torch_step_by_step(case, dtype):
    name, kw = case
    vals = _init_values()
    tp, tx, ty = _make(tape, vals, dtype)
    pp, px, py = _make(torch, vals, dtype)
    topt = getattr(tape.optim, name)(tp, **kw)
    popt = getattr(torch.optim, name)(pp, **kw)
    for step in range(STEPS):
        topt.zero_grad()
        popt.zero_grad()
        tl = _loss(tape, tp, tx, ty)
        pl = _loss(torch, pp, px, py)
        tl.backward()
        pl.backward()
        topt.step()
        popt.step()
        for i, (a, b) in enumerate(zip(tp, pp)):
            assert a.dtype == getattr(tape, dtype)
            _close(a, b, dtype, f'{name} {kw} step {step} param {i}')
    _compare_state(topt, popt, tp, pp, dtype, f'{name} {kw}')
    for a in tp:     # the step count stays a float32 0-d tensor, as in PyTorch
        assert topt.state[a]['step'].dtype == tape.float32
        assert float(topt.state[a]['step']) == STEPS


@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_state_dict_layout_matches_torch(case):
    name, kw = case
    vals = _init_values()
    tp, tx, ty = _make(tape, vals, 'float64')
    pp, px, py = _make(torch, vals, 'float64')
    topt = getattr(tape.optim, name)([{'params': tp[:2]}, {'params': tp[2:], 'lr': 0.003}],
                                     **kw)
    popt = getattr(torch.optim, name)([{'params': pp[:2]}, {'params': pp[2:], 'lr': 0.003}],
                                      **kw)
    assert topt.state_dict()['param_groups'] == popt.state_dict()['param_groups']
    _train(topt, tape, tp, tx, ty, 2)
    _train(popt, torch, pp, px, py, 2)
    ts, ps = topt.state_dict(), popt.state_dict()
    assert ts['param_groups'] == ps['param_groups']
    assert sorted(ts['state']) == sorted(ps['state']) == [0, 1, 2, 3]
    for i in ps['state']:
        assert list(ts['state'][i]) == list(ps['state'][i])     # same keys, same order
        for key, v in ps['state'][i].items():
            assert str(ts['state'][i][key].dtype).split('.')[-1] == \
                str(v.dtype).split('.')[-1], (name, key)
            np.testing.assert_allclose(_np(ts['state'][i][key]), _np(v), rtol=1e-10,
                                       atol=1e-12)


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
@pytest.mark.parametrize('case', [(n, kws[-1]) for n, kws in OPTIMIZERS.items()]
                         + [('NAdam', OPTIMIZERS['NAdam'][2]),
                            ('ASGD', OPTIMIZERS['ASGD'][1])], ids=_case_id)
def test_state_dict_round_trip_continues_identically(case, dtype):
    """Save after some steps, load into a fresh optimizer over copies of the
    parameters: both continue identically, and as torch's loaded optimizer does
    (loading casts 0-d states such as mu_product/eta/mu to the parameter dtype)."""
    name, kw = case
    vals = _init_values(1)
    tp, tx, ty = _make(tape, vals, dtype)
    pp, px, py = _make(torch, vals, dtype)
    topt = getattr(tape.optim, name)(tp, **kw)
    popt = getattr(torch.optim, name)(pp, **kw)
    _train(topt, tape, tp, tx, ty, 12)
    _train(popt, torch, pp, px, py, 12)
    saved = copy.deepcopy(topt.state_dict())
    tp2 = [p.detach().clone().requires_grad_(True) for p in tp]
    topt2 = getattr(tape.optim, name)(tp2, **kw)
    topt2.load_state_dict(saved)
    pp2 = [p.detach().clone().requires_grad_(True) for p in pp]
    popt2 = getattr(torch.optim, name)(pp2, **kw)
    popt2.load_state_dict(copy.deepcopy(popt.state_dict()))
    _compare_state(topt2, popt2, tp2, pp2, dtype, f'{name} loaded')
    _train(topt, tape, tp, tx, ty, 10)
    _train(topt2, tape, tp2, tx, ty, 10)
    _train(popt2, torch, pp2, px, py, 10)
    for a, a2, b2 in zip(tp, tp2, pp2):
        if name not in ('NAdam', 'ASGD') or dtype == 'float32':
            # nothing was cast: the loaded optimizer repeats the original exactly
            np.testing.assert_array_equal(_np(a), _np(a2))
        _close(a2, b2, dtype, f'{name} after loading')
    _compare_state(topt2, popt2, tp2, pp2, dtype, f'{name} loaded, after steps')


@pytest.mark.parametrize('name, group_kw', [
    ('Adamax', dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.2)),
    ('NAdam', dict(momentum_decay=0.2, weight_decay=0.1, decoupled_weight_decay=True)),
    ('RAdam', dict(betas=(0.6, 0.7), weight_decay=0.1)),
    ('Adadelta', dict(lr=0.3, rho=0.6, maximize=True)),
    ('ASGD', dict(lr=0.01, t0=3, lambd=0.1)),
    ('Rprop', dict(lr=0.05, etas=(0.2, 1.1), step_sizes=(1e-3, 0.1))),
])
def test_param_groups_with_different_options(name, group_kw):
    vals = _init_values(2)
    tp, tx, ty = _make(tape, vals, 'float64')
    pp, px, py = _make(torch, vals, 'float64')
    topt = getattr(tape.optim, name)([{'params': tp[:2]}, dict(params=tp[2:], **group_kw)],
                                     lr=0.02)
    popt = getattr(torch.optim, name)([{'params': pp[:2]}, dict(params=pp[2:], **group_kw)],
                                      lr=0.02)
    _train(topt, tape, tp, tx, ty, STEPS)
    _train(popt, torch, pp, px, py, STEPS)
    for a, b in zip(tp, pp):
        _close(a, b, 'float64', name)
    assert topt.state_dict()['param_groups'] == popt.state_dict()['param_groups']


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_closure_and_params_without_grad(name):
    vals = _init_values(3)
    tp, tx, ty = _make(tape, vals, 'float64')
    pp, px, py = _make(torch, vals, 'float64')
    # the last parameter never gets a gradient: it is skipped and gets no state
    topt = getattr(tape.optim, name)(tp + [tape.zeros(2, requires_grad=True)])
    popt = getattr(torch.optim, name)(pp + [torch.zeros(2, requires_grad=True)])
    for _ in range(5):
        def tclosure():
            topt.zero_grad()
            loss = _loss(tape, tp, tx, ty)
            loss.backward()
            return loss

        def pclosure():
            popt.zero_grad()
            loss = _loss(torch, pp, px, py)
            loss.backward()
            return loss
        tl, pl = topt.step(tclosure), popt.step(pclosure)
        assert abs(tl.item() - pl.item()) < 1e-12
    for a, b in zip(tp, pp):
        _close(a, b, 'float64', name)
    assert len(topt.state) == len(popt.state) == 4


BAD = [
    ('Adamax', dict(lr=-1.0)), ('Adamax', dict(eps=-1.0)), ('Adamax', dict(betas=(1.0, 0.9))),
    ('Adamax', dict(betas=(0.9, -0.1))), ('Adamax', dict(weight_decay=-0.1)),
    ('NAdam', dict(lr=-0.1)), ('NAdam', dict(eps=-1e-8)), ('NAdam', dict(betas=(-0.1, 0.9))),
    ('NAdam', dict(betas=(0.9, 1.0))), ('NAdam', dict(weight_decay=-1)),
    ('NAdam', dict(momentum_decay=-0.1)),
    ('RAdam', dict(lr=-0.1)), ('RAdam', dict(eps=-1.0)), ('RAdam', dict(betas=(1.5, 0.9))),
    ('RAdam', dict(betas=(0.9, 1.0))), ('RAdam', dict(weight_decay=-0.5)),
    ('Adadelta', dict(lr=-1.0)), ('Adadelta', dict(rho=1.5)), ('Adadelta', dict(rho=-0.1)),
    ('Adadelta', dict(eps=-1.0)), ('Adadelta', dict(weight_decay=-1.0)),
    ('ASGD', dict(lr=-0.1)), ('ASGD', dict(weight_decay=-0.1)),
    ('Rprop', dict(lr=-0.1)), ('Rprop', dict(etas=(1.5, 1.2))), ('Rprop', dict(etas=(0.5, 0.9))),
    ('Rprop', dict(etas=(0.0, 1.2))),
]


@pytest.mark.parametrize('name, kw', BAD)
def test_bad_hyper_parameters_raise_torchs_error(name, kw):
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as ours:
        getattr(tape.optim, name)([tape.zeros(2, requires_grad=True)], **kw)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_defaults_repr_and_empty_params(name):
    t = getattr(tape.optim, name)([tape.zeros(2, requires_grad=True)])
    p = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)])
    assert t.defaults == p.defaults
    assert repr(t) == repr(p)
    with pytest.raises(ValueError, match='empty parameter list'):
        getattr(tape.optim, name)([])
    with pytest.raises(NotImplementedError):
        getattr(tape.optim, name)([tape.zeros(2, requires_grad=True)], differentiable=True)


def test_step_bumps_the_version_counter():
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    opt = tape.optim.NAdam([w], lr=0.1)
    y = (w * w).sum()
    y.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError):
        y.backward()


def test_lr_scheduler_drives_the_new_optimizers():
    vals = _init_values(4)
    tp, tx, ty = _make(tape, vals, 'float64')
    pp, px, py = _make(torch, vals, 'float64')
    topt, popt = tape.optim.RAdam(tp, lr=0.05), torch.optim.RAdam(pp, lr=0.05)
    ts = tape.optim.lr_scheduler.StepLR(topt, 3, 0.5)
    ps = torch.optim.lr_scheduler.StepLR(popt, 3, 0.5)
    for _ in range(10):
        _train(topt, tape, tp, tx, ty, 1)
        _train(popt, torch, pp, px, py, 1)
        ts.step()
        ps.step()
    for a, b in zip(tp, pp):
        _close(a, b, 'float64', 'RAdam + StepLR')


# ------------------------------------------------------------------ swa_utils
def _model(lib, seed=0, dtype='float64'):
    nn = lib.nn
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2))
    rng = np.random.default_rng(seed)
    ldt = getattr(lib, dtype)
    m = m.to(ldt)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.5, dtype=ldt))
    return m


def _data(lib, n=4, dtype='float64', seed=5):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal((6, 3)), dtype=getattr(lib, dtype))
            for _ in range(n)]


def _assert_modules_close(tm, pm, dtype='float64'):
    tsd, psd = tm.state_dict(), pm.state_dict()
    assert list(tsd) == list(psd)
    for k in psd:
        ours, theirs = _np(tsd[k]), _np(psd[k])
        assert ours.dtype == theirs.dtype, k
        if dtype == 'float64':
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=k)
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=k)


def _swa_run(lib, dtype, steps=5, **kw):
    m = _model(lib, dtype=dtype)
    avg = lib.optim.swa_utils.AveragedModel(m, **kw)
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    for x in _data(lib, steps, dtype):
        opt.zero_grad()
        (m(x) ** 2).mean().backward()
        opt.step()
        avg.update_parameters(m)
    return m, avg


def _avg_kw(lib, kind):
    su = lib.optim.swa_utils
    return {'swa': {}, 'swa_buffers': dict(use_buffers=True),
            'swa_multi': dict(multi_avg_fn=su.get_swa_multi_avg_fn()),
            'ema_multi': dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.8)),
            'ema_multi_buffers': dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.7),
                                      use_buffers=True),
            'ema': dict(avg_fn=su.get_ema_avg_fn(0.9)),
            'ema_buffers': dict(avg_fn=su.get_ema_avg_fn(0.6), use_buffers=True),
            'swa_fn_buffers': dict(avg_fn=su.get_swa_avg_fn(), use_buffers=True),
            'custom': dict(avg_fn=lambda a, m, n: a * 0.5 + m * 0.5)}[kind]


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
@pytest.mark.parametrize('kind', ['swa', 'swa_buffers', 'swa_multi', 'ema_multi',
                                  'ema_multi_buffers', 'ema', 'ema_buffers',
                                  'swa_fn_buffers', 'custom'])
def test_averaged_model_matches_torch(kind, dtype):
    tm, tavg = _swa_run(tape, dtype, **_avg_kw(tape, kind))
    pm, pavg = _swa_run(torch, dtype, **_avg_kw(torch, kind))
    _assert_modules_close(tm, pm, dtype)
    _assert_modules_close(tavg, pavg, dtype)
    assert int(tavg.n_averaged) == int(pavg.n_averaged) == 5
    assert tavg.n_averaged.dtype == tape.int64
    x = _data(tape, 1, dtype, seed=9)[0]
    tavg.eval()
    pavg.eval()
    _close(tavg(x), pavg(torch.tensor(_np(x))), dtype, 'forward')


def test_averaged_model_swa_is_the_mean_and_ema_the_ema():
    lin = tape.nn.Linear(2, 1, bias=False)
    swa = swa_utils.AveragedModel(lin)
    ema = swa_utils.AveragedModel(lin, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.5))
    values = [1.0, 2.0, 6.0, -1.0]
    for v in values:
        with tape.no_grad():
            lin.weight.fill_(v)
        swa.update_parameters(lin)
        ema.update_parameters(lin)
    np.testing.assert_allclose(_np(swa.module.weight), np.full((1, 2), np.mean(values)))
    e = values[0]
    for v in values[1:]:
        e = 0.5 * e + 0.5 * v
    np.testing.assert_allclose(_np(ema.module.weight), np.full((1, 2), e))
    assert swa.module.weight is not lin.weight
    assert swa.module.weight.requires_grad


def test_averaged_model_errors_match_torch():
    for lib in (tape, torch):
        su = lib.optim.swa_utils
        m = lib.nn.Linear(2, 2)
        with pytest.raises(AssertionError, match='Only one of avg_fn and multi_avg_fn'):
            su.AveragedModel(m, avg_fn=su.get_swa_avg_fn(),
                             multi_avg_fn=su.get_swa_multi_avg_fn())
        for bad in (-0.1, 1.5):
            with pytest.raises(ValueError) as e1:
                su.get_ema_avg_fn(bad)
            with pytest.raises(ValueError) as e2:
                su.get_ema_multi_avg_fn(bad)
            assert str(e1.value) == str(e2.value) == (
                f'Invalid decay value {bad} provided. Please provide a value in [0,1] range.')
    # the running mean over an integer buffer (num_batches_tracked): torch's addcdiv refuses
    for lib in (tape, torch):
        with pytest.raises(RuntimeError, match='Integer division with addcdiv'):
            _swa_run(lib, 'float64', 2, multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn(),
                     use_buffers=True)


SWALR_CASES = [dict(swa_lr=0.05), dict(swa_lr=0.05, anneal_epochs=3),
               dict(swa_lr=0.2, anneal_epochs=4, anneal_strategy='linear'),
               dict(swa_lr=[0.01, 0.3], anneal_epochs=5),
               dict(swa_lr=0.02, anneal_epochs=0),
               dict(swa_lr=0.02, anneal_epochs=0, anneal_strategy='linear'),
               dict(swa_lr=0.3, anneal_epochs=1, anneal_strategy='linear')]


@pytest.mark.parametrize('kw', SWALR_CASES, ids=str)
def test_swalr_schedule_matches_torch(kw):
    def run(lib):
        opt = lib.optim.SGD([{'params': [lib.zeros(2, requires_grad=True)]},
                             {'params': [lib.zeros(1, requires_grad=True)], 'lr': 0.5}],
                            lr=0.1)
        sched = lib.optim.swa_utils.SWALR(opt, **kw)
        lrs = [sched.get_last_lr()]
        for _ in range(14):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
            lrs.append([g['lr'] for g in opt.param_groups])
        return lrs, [g['swa_lr'] for g in opt.param_groups], sched
    ours, theirs = run(tape), run(torch)
    np.testing.assert_allclose(np.array(ours[0]), np.array(theirs[0]), rtol=1e-13, atol=0)
    assert ours[1] == theirs[1]
    tsd, psd = ours[2].state_dict(), theirs[2].state_dict()
    assert set(tsd) >= {'anneal_epochs', '_anneal_strategy', 'base_lrs', 'last_epoch',
                        '_step_count'}
    for k in ('anneal_epochs', '_anneal_strategy', 'last_epoch', '_step_count'):
        assert tsd[k] == psd[k], k


def test_swalr_errors_and_state_dict_round_trip():
    for lib in (tape, torch):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
        su = lib.optim.swa_utils
        with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or "
                                             "'linear', instead got exp"):
            su.SWALR(opt, 0.1, anneal_strategy='exp')
        with pytest.raises(ValueError, match='anneal_epochs must be equal or greater than 0, '
                                             'got -1'):
            su.SWALR(opt, 0.1, anneal_epochs=-1)
        with pytest.raises(ValueError, match='anneal_epochs must be equal or greater than 0, '
                                             'got 1.5'):
            su.SWALR(opt, 0.1, anneal_epochs=1.5)
        with pytest.raises(ValueError, match='swa_lr must have the same length'):
            su.SWALR(opt, [0.1, 0.2])
    opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=0.1)
    s = swa_utils.SWALR(opt, 0.01, anneal_epochs=6, anneal_strategy='linear')
    for _ in range(2):
        opt.step()
        s.step()
    sd = copy.deepcopy(s.state_dict())
    assert 'anneal_func' not in sd and 'optimizer' not in sd
    opt2 = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=opt.param_groups[0]['lr'])
    s2 = swa_utils.SWALR(opt2, 0.01, anneal_epochs=6, anneal_strategy='cos')
    s2.load_state_dict(sd)
    assert s2.anneal_func is swa_utils.SWALR._linear_anneal
    for _ in range(5):
        opt.step()
        s.step()
        opt2.step()
        s2.step()
        assert s.get_last_lr() == s2.get_last_lr()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with pytest.raises(UserWarning, match='get_last_lr'):
            s.get_lr()


@pytest.mark.parametrize('loader_kind', ['tensors', 'tuples'])
def test_update_bn_matches_torch(loader_kind):
    def run(lib):
        m = _model(lib)
        m.add_module('bn2', lib.nn.BatchNorm1d(2, momentum=0.3, dtype=lib.float64))
        m.eval()
        data = _data(lib, 5, seed=11)
        loader = data if loader_kind == 'tensors' else [(x, lib.zeros(6)) for x in data]
        lib.optim.swa_utils.update_bn(loader, m)
        return m
    tm, pm = run(tape), run(torch)
    _assert_modules_close(tm, pm)
    assert not tm.training
    assert tm[1].momentum == 0.1 and tm.bn2.momentum == 0.3
    assert int(tm[1].num_batches_tracked) == 5
    # the running statistics are the plain mean over the batches
    x = np.concatenate([_np(b) for b in _data(tape, 5, seed=11)])
    h = x @ _np(tm[0].weight).T + _np(tm[0].bias)
    means = np.mean([h[i * 6:(i + 1) * 6].mean(0) for i in range(5)], axis=0)
    np.testing.assert_allclose(_np(tm[1].running_mean), means, rtol=1e-10)


def test_update_bn_without_batchnorm_and_with_averaged_model():
    lin = tape.nn.Linear(3, 2)
    before = _np(lin.weight).copy()
    swa_utils.update_bn(_data(tape, 2), lin)              # nothing to do, no forward
    np.testing.assert_array_equal(_np(lin.weight), before)
    tm, tavg = _swa_run(tape, 'float64')
    pm, pavg = _swa_run(torch, 'float64')
    tavg.train()
    pavg.train()
    swa_utils.update_bn(_data(tape, 3, seed=7), tavg)
    torch.optim.swa_utils.update_bn(_data(torch, 3, seed=7), pavg)
    _assert_modules_close(tavg, pavg)
    assert tavg.training


def test_exports():
    for name in ('Adamax', 'NAdam', 'RAdam', 'Adadelta', 'ASGD', 'Rprop', 'swa_utils'):
        assert name in tape.optim.__all__
        assert hasattr(tape.optim, name)
    assert sorted(swa_utils.__all__) == sorted(torch.optim.swa_utils.__all__)
    from tape.optim.swa_utils import SWALR, AveragedModel, update_bn
    assert (SWALR, AveragedModel, update_bn) == (swa_utils.SWALR, swa_utils.AveragedModel,
                                                 swa_utils.update_bn)
