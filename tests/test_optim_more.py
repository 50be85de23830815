"""tape.optim.LBFGS and the learning-rate schedulers added after the first
five, run side by side with torch.optim from the same initial values."""
import copy
import math
import warnings

import numpy as np
import pytest

import tape
import tape.optim
from tape.optim import lr_scheduler

torch = pytest.importorskip('torch')


# ------------------------------------------------------------------ LBFGS
def _rosenbrock(lib, x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _regression_data(seed=0):
    rng = np.random.default_rng(seed)
    return dict(X=rng.standard_normal((20, 3)), Y=rng.standard_normal((20, 1)),
                W0=rng.standard_normal((3, 4)) * 0.5, b0=rng.standard_normal(4) * 0.1,
                W1=rng.standard_normal((4, 1)) * 0.5)


def _problem(lib, name, dtype):
    dt = getattr(lib, dtype)
    if name == 'rosenbrock':
        x = lib.tensor([-1.5, 2.0, -0.5, 1.2, 0.3], dtype=dt, requires_grad=True)
        return [x], lambda: _rosenbrock(lib, x)
    v = _regression_data()
    W0, b0, W1 = (lib.tensor(v[k], dtype=dt, requires_grad=True) for k in ('W0', 'b0', 'W1'))
    X, Y = lib.tensor(v['X'], dtype=dt), lib.tensor(v['Y'], dtype=dt)
    return [W0, b0, W1], lambda: ((lib.tanh(X @ W0 + b0) @ W1 - Y) ** 2).mean()


def _flat(params):
    return np.concatenate([np.array(p.detach().tolist(), np.float64).ravel() for p in params])


def _run_lbfgs(lib, problem, dtype, steps, **kw):
    params, f = _problem(lib, problem, dtype)
    opt = lib.optim.LBFGS(params, **kw)

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss

    traj, losses, evals = [], [], []
    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
        traj.append(_flat(params))
        st = opt.state[params[0]]
        evals.append((st['func_evals'], st['n_iter']))
    return np.array(traj), np.array(losses), evals, opt, params, closure


LBFGS_CASES = [(problem, ls, hs)
               for problem in ('rosenbrock', 'regression')
               for ls in (None, 'strong_wolfe')
               for hs in (1, 3, 10, 100)]


@pytest.mark.parametrize('problem, line_search_fn, history_size', LBFGS_CASES)
def test_lbfgs_matches_torch_float64(problem, line_search_fn, history_size):
    kw = dict(lr=1 if line_search_fn else 0.1, max_iter=10, history_size=history_size,
              line_search_fn=line_search_fn)
    # the strong-Wolfe runs with a short history amplify a last-bit difference
    # (the two libraries sum and fuse differently) 10-100x per step: 4 (3) steps
    # of 10 iterations keep it below the tolerance
    steps = 4 if problem == 'rosenbrock' else 3
    ours = _run_lbfgs(tape, problem, 'float64', steps, **kw)
    theirs = _run_lbfgs(torch, problem, 'float64', steps, **kw)
    assert ours[2] == theirs[2]                     # func_evals, n_iter after each step
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9, atol=1e-12)
    assert not np.allclose(ours[0][0], ours[0][-1])  # it moved


@pytest.mark.parametrize('line_search_fn', [None, 'strong_wolfe'])
@pytest.mark.parametrize('history_size', [2, 100])
def test_lbfgs_matches_torch_float32(line_search_fn, history_size):
    kw = dict(lr=1 if line_search_fn else 0.5, max_iter=4, history_size=history_size,
              line_search_fn=line_search_fn)
    ours = _run_lbfgs(tape, 'regression', 'float32', 2, **kw)
    theirs = _run_lbfgs(torch, 'regression', 'float32', 2, **kw)
    assert ours[2] == theirs[2]
    assert ours[4][0].dtype == tape.float32
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5)


def _rosenbrock_np(x):
    f = float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))
    g = np.zeros_like(x)
    g[:-1] += -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return f, g


@pytest.mark.parametrize('line_search_fn', [None, 'strong_wolfe'])
@pytest.mark.parametrize('history_size', [1, 2, 5, 100])
def test_lbfgs_matches_torch_given_identical_gradients(line_search_fn, history_size):
    # the closure computes loss and gradient in NumPy for both libraries, so
    # only the optimizers' own arithmetic can differ
    runs = []
    for lib in (tape, torch):
        x = lib.tensor([-1.5, 2.0, -0.5, 1.2, 0.3, 0.8], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([x], lr=1 if line_search_fn else 0.1, max_iter=8,
                              history_size=history_size, line_search_fn=line_search_fn)

        def closure():
            f, g = _rosenbrock_np(np.array(x.detach().tolist()))
            x.grad = lib.tensor(g, dtype=lib.float64)
            return lib.tensor(f, dtype=lib.float64)
        traj = []
        for _ in range(3):
            loss = opt.step(closure)
            traj.append([float(loss)] + x.detach().tolist()
                        + [opt.state[x]['func_evals'], opt.state[x]['n_iter']])
        runs.append(np.array(traj))
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-10, atol=1e-12)


def test_lbfgs_converges_on_rosenbrock():
    x = tape.tensor([-1.2, 1.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.LBFGS([x], max_iter=100, line_search_fn='strong_wolfe')

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(tape, x)
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    np.testing.assert_allclose(x.tolist(), [1.0, 1.0], atol=1e-4)


def test_lbfgs_defaults_and_options_match_torch():
    ours = tape.optim.LBFGS([tape.zeros(2, requires_grad=True)], max_iter=7)
    theirs = torch.optim.LBFGS([torch.zeros(2, requires_grad=True)], max_iter=7)
    assert ours.defaults == theirs.defaults
    assert ours.defaults['max_eval'] == 8
    assert {k: v for k, v in ours.param_groups[0].items() if k != 'params'} == \
        {k: v for k, v in theirs.param_groups[0].items() if k != 'params'}


def test_lbfgs_state_dict_layout_matches_torch():
    kw = dict(lr=1, max_iter=5, history_size=3, line_search_fn='strong_wolfe')
    ours = _run_lbfgs(tape, 'regression', 'float64', 2, **kw)[3].state_dict()
    theirs = _run_lbfgs(torch, 'regression', 'float64', 2, **kw)[3].state_dict()
    assert list(ours['state']) == list(theirs['state']) == [0]
    s, t = ours['state'][0], theirs['state'][0]
    assert sorted(s) == sorted(t)
    for key in s:
        if isinstance(t[key], torch.Tensor):
            assert isinstance(s[key], tape.Tensor), key
            np.testing.assert_allclose(np.array(s[key].tolist()), t[key].numpy(), rtol=1e-9,
                                       atol=1e-12)
        elif isinstance(t[key], list):
            assert len(s[key]) == len(t[key]), key
            for a, b in zip(s[key], t[key]):
                assert (a is None) == (b is None), key
                if b is not None:
                    np.testing.assert_allclose(np.array(a.tolist()), b.numpy(), rtol=1e-8,
                                               atol=1e-12)
        else:
            assert type(s[key]) is type(t[key]), key
            assert s[key] == pytest.approx(t[key], rel=1e-9), key
    assert [{k: v for k, v in g.items()} for g in ours['param_groups']] == \
        [{k: v for k, v in g.items()} for g in theirs['param_groups']]


@pytest.mark.parametrize('line_search_fn', [None, 'strong_wolfe'])
def test_lbfgs_state_dict_round_trip_continues_identically(line_search_fn):
    kw = dict(lr=1 if line_search_fn else 0.2, max_iter=4, history_size=3,
              line_search_fn=line_search_fn)
    full = _run_lbfgs(tape, 'rosenbrock', 'float64', 4, **kw)[0]
    _, _, _, opt, params, _ = _run_lbfgs(tape, 'rosenbrock', 'float64', 2, **kw)
    saved = copy.deepcopy(opt.state_dict())
    params2, f = _problem(tape, 'rosenbrock', 'float64')
    with tape.no_grad():
        params2[0].copy_(params[0])
    opt2 = tape.optim.LBFGS(params2, **kw)
    opt2.load_state_dict(saved)

    def closure():
        opt2.zero_grad()
        loss = f()
        loss.backward()
        return loss
    rest = []
    for _ in range(2):
        opt2.step(closure)
        rest.append(_flat(params2))
    np.testing.assert_array_equal(np.array(rest), full[2:])


def test_lbfgs_stops_at_once_on_a_zero_gradient():
    w = tape.tensor([1.0, 1.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.LBFGS([w])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert len(calls) == 1 and loss.item() == 0.0
    assert opt.state[w]['func_evals'] == 1 and opt.state[w]['n_iter'] == 0
    assert w.tolist() == [1.0, 1.0]


def test_lbfgs_respects_max_eval():
    for lib in (tape, torch):
        params, f = _problem(lib, 'rosenbrock', 'float64')
        opt = lib.optim.LBFGS(params, max_iter=100, max_eval=7, line_search_fn='strong_wolfe')
        n = []

        def closure():
            n.append(1)
            opt.zero_grad()
            loss = f()
            loss.backward()
            return loss
        opt.step(closure)
        if lib is tape:
            ours = len(n)
        else:
            assert ours == len(n) <= 8


def test_lbfgs_closure_runs_with_grad_enabled_and_step_is_not_recorded():
    w = tape.tensor([2.0, -3.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.LBFGS([w], max_iter=3)
    seen = []

    def closure():
        seen.append(tape.is_grad_enabled())
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss
    with tape.no_grad():
        opt.step(closure)
    assert seen and all(seen)
    assert w.is_leaf and w.grad_fn is None and w.requires_grad


def test_lbfgs_step_bumps_version():
    w = tape.tensor([2.0, -3.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.LBFGS([w], max_iter=2)
    saved = (w * w).sum()

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        saved.backward()


def _both_raise(make):
    """Build with each library; both must raise the same exception type and message."""
    excs = []
    for lib in (tape, torch):
        with pytest.raises(Exception) as info:
            make(lib)
        excs.append(info.value)
    assert type(excs[0]) is type(excs[1]), excs
    return excs


def test_lbfgs_errors_match_torch():
    def p(lib):
        return lib.zeros(2, requires_grad=True)
    a, b = _both_raise(lambda lib: lib.optim.LBFGS([p(lib)], lr=-1.0))
    assert isinstance(a, ValueError) and str(a) == str(b)
    a, b = _both_raise(lambda lib: lib.optim.LBFGS([{'params': [p(lib)]},
                                                    {'params': [p(lib)], 'lr': 0.1}]))
    assert isinstance(a, ValueError) and str(a) == str(b)
    a, b = _both_raise(lambda lib: lib.optim.LBFGS([p(lib)]).step())
    assert isinstance(a, TypeError)

    def bad_line_search(lib):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        opt = lib.optim.LBFGS([w], line_search_fn='backtracking')

        def closure():
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            return loss
        opt.step(closure)
    a, b = _both_raise(bad_line_search)
    assert isinstance(a, RuntimeError) and str(a) == str(b)


# ------------------------------------------------------------- schedulers
def _sgd(lib, momentum=0.9):
    w = lib.zeros(1, requires_grad=True)
    v = lib.zeros(1, requires_grad=True)
    return lib.optim.SGD([{'params': [w]}, {'params': [v], 'lr': 0.3}], lr=1.0,
                         momentum=momentum)


def _adam(lib):
    w = lib.zeros(1, requires_grad=True)
    v = lib.zeros(1, requires_grad=True)
    return lib.optim.Adam([{'params': [w]}, {'params': [v], 'lr': 0.3}], lr=1.0,
                          betas=(0.9, 0.99))


def _seq(lib, opt):
    S = lib.optim.lr_scheduler
    return S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=4),
                                S.ExponentialLR(opt, gamma=0.8),
                                S.CosineAnnealingLR(opt, T_max=5)], milestones=[5, 9])


def _chain(lib, opt):
    S = lib.optim.lr_scheduler
    return S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3),
                               S.ExponentialLR(opt, gamma=0.9),
                               S.MultiStepLR(opt, milestones=[4, 8], gamma=0.5)])


# (id, optimizer maker, scheduler maker, steps): steps cover every phase
SCHEDULERS = [
    ('Multiplicative', _sgd, lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9 if e < 5 else 1.1), 12),
    ('Constant', _sgd, lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4), 8),
    ('Linear', _sgd, lambda S, o: S.LinearLR(o, start_factor=0.2, end_factor=0.9,
                                             total_iters=6), 10),
    ('Linear-down', _sgd, lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.0,
                                                  total_iters=5), 8),
    ('Polynomial', _sgd, lambda S, o: S.PolynomialLR(o, total_iters=6, power=2.0), 9),
    ('Polynomial-1', _sgd, lambda S, o: S.PolynomialLR(o), 7),
    ('WarmRestarts', _sgd, lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3), 10),
    ('WarmRestarts-mult', _sgd, lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01), 16),
    ('Cyclic-triangular', _sgd, lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3), 14),
    ('Cyclic-triangular2', _sgd, lambda S, o: S.CyclicLR(
        o, [0.01, 0.02], [0.1, 0.3], step_size_up=2, step_size_down=4, mode='triangular2'), 20),
    ('Cyclic-exp_range', _sgd, lambda S, o: S.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, mode='exp_range', gamma=0.9), 14),
    ('Cyclic-adam', _adam, lambda S, o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                   base_momentum=0.7, max_momentum=0.95), 10),
    ('Cyclic-scale_fn', _sgd, lambda S, o: S.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 1 / (1 + x), scale_mode='iterations',
        cycle_momentum=False), 10),
    ('OneCycle-cos', _sgd, lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=12), 11),
    ('OneCycle-linear', _sgd, lambda S, o: S.OneCycleLR(
        o, max_lr=0.8, epochs=3, steps_per_epoch=4, anneal_strategy='linear',
        pct_start=0.25), 11),
    ('OneCycle-three', _sgd, lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=15,
                                                       three_phase=True), 14),
    ('OneCycle-adam', _adam, lambda S, o: S.OneCycleLR(o, max_lr=0.1, total_steps=10,
                                                       div_factor=10.0), 9),
    ('OneCycle-nomomentum', _sgd, lambda S, o: S.OneCycleLR(
        o, max_lr=0.1, total_steps=10, cycle_momentum=False, final_div_factor=100.0), 9),
    ('Sequential', _sgd, lambda S, o: None, 16),
    ('Chained', _sgd, lambda S, o: None, 12),
]


def _make_sched(lib, case):
    name, make_opt, make, _ = case
    opt = make_opt(lib)
    if name == 'Sequential':
        return opt, _seq(lib, opt)
    if name == 'Chained':
        return opt, _chain(lib, opt)
    return opt, make(lib.optim.lr_scheduler, opt)


def _snapshot(opt, sched):
    row = [float(x) for x in sched.get_last_lr()]
    assert row == [float(g['lr']) for g in opt.param_groups]
    for g in opt.param_groups:
        row.append(g['betas'][0] if 'betas' in g else g.get('momentum', 0.0))
    return row


def _sequence(lib, case, start=None):
    opt, sched = start or _make_sched(lib, case)
    seq = [_snapshot(opt, sched)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for _ in range(case[3]):
            opt.step()
            sched.step()
            seq.append(_snapshot(opt, sched))
    return seq, opt, sched


@pytest.mark.parametrize('case', SCHEDULERS, ids=[c[0] for c in SCHEDULERS])
def test_scheduler_sequence_matches_torch(case):
    ours, _, s1 = _sequence(tape, case)
    theirs, _, s2 = _sequence(torch, case)
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-13, atol=1e-15)
    assert getattr(s1, 'last_epoch', None) == getattr(s2, 'last_epoch', None)
    assert len(set(map(tuple, ours))) >= 2      # the lr changed along the way


@pytest.mark.parametrize('case', SCHEDULERS, ids=[c[0] for c in SCHEDULERS])
def test_scheduler_state_dict_keys_match_torch(case):
    _, s1 = _make_sched(tape, case)
    _, s2 = _make_sched(torch, case)
    d1, d2 = s1.state_dict(), s2.state_dict()
    assert sorted(d1) == sorted(d2)
    for key in ('last_epoch', '_step_count', 'base_lrs', '_last_lr'):
        if key in d2:
            assert d1[key] == pytest.approx(d2[key], rel=1e-14), key


@pytest.mark.parametrize('case', SCHEDULERS, ids=[c[0] for c in SCHEDULERS])
def test_scheduler_state_dict_resume_mid_schedule(case):
    full, *_ = _sequence(tape, case)
    k = case[3] // 2
    opt, sched = _make_sched(tape, case)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for _ in range(k):
            opt.step()
            sched.step()
    saved_opt = copy.deepcopy(opt.state_dict())
    saved = copy.deepcopy(sched.state_dict())
    opt2, sched2 = _make_sched(tape, case)       # fresh: at epoch 0
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved)
    case_rest = case[:3] + (case[3] - k,)
    rest, *_ = _sequence(tape, case_rest, start=(opt2, sched2))
    np.testing.assert_allclose(np.array(rest), np.array(full[k:]), rtol=1e-14, atol=1e-16)


def _plateau_run(lib, metrics, **kw):
    opt = _sgd(lib)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    rows = []
    for m in metrics:
        opt.step()
        sched.step(lib.tensor(m) if len(rows) % 2 else m)     # floats and 0-d tensors
        rows.append([float(g['lr']) for g in opt.param_groups] + list(sched.get_last_lr())
                    + [sched.num_bad_epochs, sched.cooldown_counter, sched.best,
                       sched.last_epoch])
    return rows, opt, sched


PLATEAU_METRICS = [5.0, 4.0, 4.0, 4.1, 3.9999, 3.0, 3.5, 3.5, 3.5, 3.5, 2.0, 2.5, 2.5, 2.5,
                   2.5, 2.5, 2.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize('kw', [
    dict(), dict(patience=1), dict(patience=0, factor=0.5),
    dict(mode='max', patience=1, factor=0.5), dict(patience=1, threshold=0.05),
    dict(patience=1, threshold_mode='abs', threshold=0.2),
    dict(mode='max', threshold_mode='abs', threshold=0.5, patience=0),
    dict(patience=1, cooldown=2, factor=0.5), dict(patience=0, min_lr=0.2, factor=0.3),
    dict(patience=0, min_lr=[0.5, 0.001], factor=0.3), dict(patience=0, eps=0.5, factor=0.4),
], ids=str)
def test_reduce_lr_on_plateau_matches_torch(kw):
    ours, _, _ = _plateau_run(tape, PLATEAU_METRICS, **kw)
    theirs, _, _ = _plateau_run(torch, PLATEAU_METRICS, **kw)
    np.testing.assert_allclose(np.array(ours, float), np.array(theirs, float), rtol=1e-14)


def test_reduce_lr_on_plateau_reduces_and_state_dict_round_trips():
    rows, opt, sched = _plateau_run(tape, PLATEAU_METRICS[:8], patience=1, factor=0.5)
    assert rows[-1][0] < 1.0
    saved = copy.deepcopy(sched.state_dict())
    _, t_opt, t_sched = _plateau_run(torch, PLATEAU_METRICS[:8], patience=1, factor=0.5)
    assert sorted(saved) == sorted(t_sched.state_dict())
    opt2 = _sgd(tape)
    opt2.load_state_dict(opt.state_dict())
    sched2 = lr_scheduler.ReduceLROnPlateau(opt2, mode='max')
    sched2.load_state_dict(saved)
    assert sched2.mode == 'min' and sched2.mode_worse == math.inf
    for m in PLATEAU_METRICS[8:]:
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step(m)
        assert [g['lr'] for g in opt.param_groups] == [g['lr'] for g in opt2.param_groups]
    assert sched2.last_epoch == len(PLATEAU_METRICS)


def test_reduce_lr_on_plateau_epoch_argument_warns():
    opt = _sgd(tape)
    sched = lr_scheduler.ReduceLROnPlateau(opt)
    with pytest.warns(UserWarning, match='epoch parameter'):
        sched.step(1.0, epoch=5)
    assert sched.last_epoch == 5


def test_warm_restarts_fractional_epochs_match_torch():
    epochs = [0, 0.5, 1.25, 2, 3.7, 6.1, 9, 13.5, 1.0, 20]
    rows = []
    for lib in (tape, torch):
        opt = _sgd(lib)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                                   eta_min=0.05)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            for e in epochs:
                opt.step()
                sched.step(e)
                seq.append(list(sched.get_last_lr()) + [sched.T_cur, sched.T_i,
                                                        sched.last_epoch])
        rows.append(seq)
    np.testing.assert_allclose(np.array(rows[0], float), np.array(rows[1], float), rtol=1e-13)
    with pytest.raises(ValueError, match='non-negative epoch'):
        sched_t = lr_scheduler.CosineAnnealingWarmRestarts(_sgd(tape), T_0=2)
        sched_t.step(-1)


@pytest.mark.parametrize('name, kw, epochs', [
    ('ConstantLR', dict(factor=0.5, total_iters=3), [0, 2, 3, 7, 1]),
    ('LinearLR', dict(start_factor=0.25, total_iters=4), [0, 1, 3, 4, 9, 2]),
    ('PolynomialLR', dict(total_iters=4, power=3.0), [0, 1, 3, 4, 9, 2]),
])
def test_closed_form_step_with_epoch_matches_torch(name, kw, epochs):
    rows = []
    for lib in (tape, torch):
        opt = _sgd(lib)
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            for e in epochs:
                opt.step()
                sched.step(e)
                seq.append(sched.get_last_lr())
        rows.append(seq)
    np.testing.assert_allclose(np.array(rows[0]), np.array(rows[1]), rtol=1e-14)


def test_onecycle_sets_group_fields_and_refuses_extra_steps():
    for lib in (tape, torch):
        opt = _sgd(lib)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=[0.5, 2.0], total_steps=4)
        g = opt.param_groups[1]
        assert g['initial_lr'] == 2.0 / 25 and g['max_lr'] == 2.0
        assert g['min_lr'] == pytest.approx(2.0 / 25 / 1e4)
        assert g['momentum'] == 0.95 and g['max_momentum'] == 0.95
        assert g['base_momentum'] == 0.85
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            for _ in range(4):
                opt.step()
                sched.step()
            with pytest.raises(ValueError, match='Tried to step 5 times'):
                sched.step()


def test_onecycle_adam_cycles_beta1_only():
    opt = _adam(tape)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    assert opt.param_groups[0]['betas'] == (0.95, 0.99)
    opt.step()
    sched.step()
    b1, b2 = opt.param_groups[0]['betas']
    assert 0.85 < b1 < 0.95 and b2 == 0.99


def test_sequential_lr_milestone_restarts_the_next_scheduler():
    opt = _sgd(tape, momentum=0)
    S = lr_scheduler
    sched = S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.1, total_iters=2),
                                 S.ExponentialLR(opt, gamma=0.5)], milestones=[3])
    got = [sched.get_last_lr()[0]]
    for _ in range(5):
        opt.step()
        sched.step()
        got.append(sched.get_last_lr()[0])
    np.testing.assert_allclose(got, [0.1, 0.1, 1.0, 1.0, 0.5, 0.25])


def test_get_lr_outside_step_warns_as_torch():
    for lib in (tape, torch):
        opt = _sgd(lib)
        sched = lib.optim.lr_scheduler.LinearLR(opt)
        with pytest.warns(UserWarning, match='get_last_lr'):
            sched.get_lr()


def _sched_errors():
    S = 'lr_scheduler'

    def mk(fn):
        return lambda lib: fn(getattr(lib.optim, S), _sgd(lib))

    def mk_adagrad(fn):
        def make(lib):
            w = lib.zeros(1, requires_grad=True)
            return fn(getattr(lib.optim, S), lib.optim.Adagrad([w]))
        return make

    def other_opt(lib):
        o1, o2 = _sgd(lib), _sgd(lib)
        sched = lib.optim.lr_scheduler
        return sched.SequentialLR(o1, [sched.ConstantLR(o1), sched.ConstantLR(o2)],
                                  milestones=[2])

    return [
        ('ConstantLR-factor', mk(lambda s, o: s.ConstantLR(o, factor=1.5)), True),
        ('LinearLR-start', mk(lambda s, o: s.LinearLR(o, start_factor=0)), True),
        ('LinearLR-end', mk(lambda s, o: s.LinearLR(o, end_factor=1.5)), True),
        ('Multiplicative-count', mk(lambda s, o: s.MultiplicativeLR(o, [lambda e: 1.0])), True),
        ('Multiplicative-callable', mk(lambda s, o: s.MultiplicativeLR(o, 0.5)), True),
        ('Plateau-factor', mk(lambda s, o: s.ReduceLROnPlateau(o, factor=1.0)), True),
        ('Plateau-mode', mk(lambda s, o: s.ReduceLROnPlateau(o, mode='avg')), True),
        ('Plateau-threshold_mode', mk(lambda s, o: s.ReduceLROnPlateau(o, threshold_mode='x')),
         True),
        ('Plateau-min_lr', mk(lambda s, o: s.ReduceLROnPlateau(o, min_lr=[0.1])), True),
        ('Plateau-optimizer', lambda lib: lib.optim.lr_scheduler.ReduceLROnPlateau(object()),
         True),
        ('WarmRestarts-T0', mk(lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=0)), True),
        ('WarmRestarts-T0-float', mk(lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=2.0)),
         True),
        ('WarmRestarts-Tmult', mk(lambda s, o: s.CosineAnnealingWarmRestarts(o, 2, T_mult=0)),
         True),
        ('WarmRestarts-eta', mk(lambda s, o: s.CosineAnnealingWarmRestarts(o, 2, eta_min='a')),
         True),
        ('Cyclic-mode', mk(lambda s, o: s.CyclicLR(o, 0.1, 1.0, mode='sawtooth')), True),
        ('Cyclic-maxlr-len', mk(lambda s, o: s.CyclicLR(o, 0.1, [1.0, 2.0, 3.0])), True),
        ('Cyclic-momentum', mk_adagrad(lambda s, o: s.CyclicLR(o, 0.1, 1.0)), True),
        ('OneCycle-total', mk(lambda s, o: s.OneCycleLR(o, 1.0, total_steps=0)), True),
        ('OneCycle-none', mk(lambda s, o: s.OneCycleLR(o, 1.0)), True),
        ('OneCycle-epochs', mk(lambda s, o: s.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3)),
         True),
        ('OneCycle-spe', mk(lambda s, o: s.OneCycleLR(o, 1.0, epochs=2, steps_per_epoch=1.5)),
         True),
        ('OneCycle-pct', mk(lambda s, o: s.OneCycleLR(o, 1.0, total_steps=5, pct_start=1.5)),
         True),
        ('OneCycle-pct-int', mk(lambda s, o: s.OneCycleLR(o, 1.0, total_steps=5, pct_start=0)),
         True),
        ('OneCycle-anneal', mk(lambda s, o: s.OneCycleLR(o, 1.0, total_steps=5,
                                                         anneal_strategy='exp')), True),
        ('OneCycle-momentum', mk_adagrad(lambda s, o: s.OneCycleLR(o, 1.0, total_steps=5)),
         True),
        ('OneCycle-optimizer', lambda lib: lib.optim.lr_scheduler.OneCycleLR(None, 1.0, 5),
         True),
        ('Sequential-empty', mk(lambda s, o: s.SequentialLR(o, [], [])), True),
        ('Sequential-milestones', mk(lambda s, o: s.SequentialLR(
            o, [s.ConstantLR(o), s.LinearLR(o)], [1, 2])), True),
        ('Sequential-plateau', mk(lambda s, o: s.SequentialLR(
            o, [s.ConstantLR(o), s.ReduceLROnPlateau(o)], [1])), True),
        ('Sequential-no-optimizer', mk(lambda s, o: s.SequentialLR(o, [object()], [])), True),
        ('Sequential-other-optimizer', other_opt, False),
        ('Chained-empty', mk(lambda s, o: s.ChainedScheduler([])), True),
        ('Chained-plateau', mk(lambda s, o: s.ChainedScheduler([s.ReduceLROnPlateau(o)])),
         True),
    ]


@pytest.mark.parametrize('name, make, same_message', _sched_errors(),
                         ids=[e[0] for e in _sched_errors()])
def test_scheduler_errors_match_torch(name, make, same_message):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        a, b = _both_raise(make)
    if same_message:
        assert str(a) == str(b)


def test_new_names_are_exported():
    assert 'LBFGS' in tape.optim.__all__ and tape.optim.LBFGS is tape.optim.lbfgs.LBFGS
    for name in ('ReduceLROnPlateau', 'OneCycleLR', 'CosineAnnealingWarmRestarts', 'LinearLR',
                 'ConstantLR', 'PolynomialLR', 'MultiplicativeLR', 'CyclicLR', 'SequentialLR',
                 'ChainedScheduler'):
        assert name in lr_scheduler.__all__
        assert issubclass(getattr(lr_scheduler, name), lr_scheduler.LRScheduler)
