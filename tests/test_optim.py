"""tape.optim: every optimizer and option against torch.optim step by step,
plus the contract tests that need no oracle (convergence, checkpoints,
zero_grad, closures, errors, the version counter, groups, schedulers)."""
import copy
import math

import numpy as np
import pytest

import tape
import tape.optim
from tape.optim import lr_scheduler

OPTIMIZERS = {
    'SGD': [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.9, dampening=0.5),
            dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.1, weight_decay=0.1),
            dict(lr=0.05, maximize=True),
            dict(lr=0.1, momentum=0.8, weight_decay=0.01, nesterov=True, maximize=True)],
    'Adam': [dict(lr=0.01), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
             dict(lr=0.01, amsgrad=True), dict(lr=0.01, maximize=True), dict(lr=0.01, eps=1e-3),
             dict(lr=0.02, betas=(0.3, 0.7), amsgrad=True, weight_decay=0.05, maximize=True),
             dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)],
    'AdamW': [dict(lr=0.01), dict(lr=0.01, weight_decay=0.3), dict(lr=0.01, amsgrad=True),
              dict(lr=0.01, betas=(0.4, 0.8), maximize=True)],
    'RMSprop': [dict(lr=0.01), dict(lr=0.01, alpha=0.9), dict(lr=0.01, momentum=0.5),
                dict(lr=0.01, centered=True), dict(lr=0.01, centered=True, momentum=0.9),
                dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, maximize=True, eps=1e-3)],
    'Adagrad': [dict(lr=0.1), dict(lr=0.1, lr_decay=0.1), dict(lr=0.1, weight_decay=0.1),
                dict(lr=0.1, initial_accumulator_value=0.5), dict(lr=0.1, eps=1e-3),
                dict(lr=0.1, maximize=True, lr_decay=0.01)],
}
CASES = [(name, kw) for name, kws in OPTIMIZERS.items() for kw in kws]


def _case_id(case):
    name, kw = case
    return name + '-' + '-'.join(f'{k}={v}' for k, v in kw.items())


def _init_values(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return {'x': rng.standard_normal((8, 3)), 'y': rng.standard_normal((8, 1)),
            'W1': rng.standard_normal((3, 5)) * 0.5, 'b1': rng.standard_normal(5) * 0.1,
            'W2': rng.standard_normal((5, 1)) * 0.5, 'b2': rng.standard_normal(1) * 0.1}


def _loss(lib, params, x, y, model):
    W1, b1, W2, b2 = params
    if model == 'tanh':        # smooth: a 2-layer tanh MLP, MSE
        out = lib.tanh(x @ W1 + b1) @ W2 + b2
        return ((out - y) ** 2).mean()
    # non-smooth: ReLU hidden layer, L1 loss
    out = lib.nn.functional.relu(x @ W1 + b1) @ W2 + b2
    return (out - y).abs().mean()


def _make(lib, vals, dtype):
    names = ('W1', 'b1', 'W2', 'b2')
    ldt = getattr(lib, 'float32' if dtype == np.float32 else 'float64')
    params = [lib.tensor(vals[n].astype(dtype), dtype=ldt, requires_grad=True) for n in names]
    x = lib.tensor(vals['x'].astype(dtype), dtype=ldt)
    y = lib.tensor(vals['y'].astype(dtype), dtype=ldt)
    return params, x, y


@pytest.mark.parametrize('model', ['tanh', 'relu_l1'])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('case', CASES, ids=_case_id)
def test_matches_torch_step_by_step(case, dtype, model):
    torch = pytest.importorskip('torch')
    name, kw = case
    vals = _init_values(dtype)
    tp, tx, ty = _make(tape, vals, dtype)
    pp, px, py = _make(torch, vals, dtype)
    topt = getattr(tape.optim, name)(tp, **kw)
    popt = getattr(torch.optim, name)(pp, **kw)
    # float32: relative to the tensor's scale, since an ill-conditioned element
    # (a small entry updated through sqrt of a small difference) carries float32
    # rounding noise of the size of the tensor's largest entries, in both libraries
    for step in range(5):
        topt.zero_grad()
        popt.zero_grad()
        _loss(tape, tp, tx, ty, model).backward()
        _loss(torch, pp, px, py, model).backward()
        topt.step()
        popt.step()
        for a, b in zip(tp, pp):
            assert a.dtype == dtype and a.grad.dtype == dtype
            ours, theirs = a.detach().numpy(), b.detach().numpy()
            if dtype == np.float64:
                np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12,
                                           err_msg=f'{name} {kw} step {step}')
            else:
                scale = max(1.0, float(np.abs(theirs).max()))
                assert np.abs(ours - theirs).max() <= 1e-5 * scale, (name, kw, step)
    # every state tensor keeps the parameter's dtype (the step count excepted)
    for p in tp:
        for key, v in topt.state[p].items():
            if isinstance(v, tape.Tensor) and key != 'step':
                assert v.dtype == dtype, key


@pytest.mark.parametrize('case', [(n, kws[-1]) for n, kws in OPTIMIZERS.items()],
                         ids=_case_id)
def test_state_dict_structure_matches_torch(case):
    torch = pytest.importorskip('torch')
    name, kw = case
    vals = _init_values(np.float64)
    tp, tx, ty = _make(tape, vals, np.float64)
    pp, px, py = _make(torch, vals, np.float64)
    topt = getattr(tape.optim, name)([{'params': tp[:2]}, {'params': tp[2:], 'lr': 0.003}], **kw)
    popt = getattr(torch.optim, name)([{'params': pp[:2]}, {'params': pp[2:], 'lr': 0.003}], **kw)
    _loss(tape, tp, tx, ty, 'tanh').backward()
    _loss(torch, pp, px, py, 'tanh').backward()
    topt.step()
    popt.step()
    ts, ps = topt.state_dict(), popt.state_dict()
    assert ts['param_groups'] == ps['param_groups']    # options and index lists, all equal
    assert sorted(ts['state']) == sorted(ps['state']) == [0, 1, 2, 3]
    for i in ps['state']:
        assert list(ts['state'][i]) == list(ps['state'][i])
        for key, v in ps['state'][i].items():
            np.testing.assert_allclose(np.asarray(ts['state'][i][key].numpy()),
                                       v.numpy(), rtol=1e-10, atol=1e-14)
            assert str(ts['state'][i][key].dtype) == str(v.dtype).replace('torch.', '')


# ------------------------------------------------------- without the oracle
def _quadratic_case(name):
    return {'SGD': dict(lr=0.1, momentum=0.5), 'Adam': dict(lr=0.1), 'AdamW': dict(lr=0.1),
            'RMSprop': dict(lr=0.01), 'Adagrad': dict(lr=0.5)}[name]


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_convex_quadratic_converges(name):
    a = tape.tensor([1.0, 3.0, 0.5], dtype=tape.float64)
    c = tape.tensor([2.0, -1.0, 0.5], dtype=tape.float64)
    w = tape.zeros(3, dtype=tape.float64, requires_grad=True)
    opt = getattr(tape.optim, name)([w], **_quadratic_case(name))
    if name == 'AdamW':
        opt.param_groups[0]['weight_decay'] = 0.0    # decay would bias the minimum
    for _ in range(600):
        opt.zero_grad()
        (0.5 * a * (w - c) ** 2).sum().backward()
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), c.numpy(), atol=2e-2)


def _quadratic_loss(w):
    return ((w - tape.tensor([1.0, -1.0, 0.5], dtype=tape.float64)) ** 2).sum() + 0.1 * (w ** 4).sum()


# option sets that keep state and still descend (maximize would diverge here)
ROUND_TRIP = [('SGD', dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
              ('Adam', dict(lr=0.02, betas=(0.3, 0.7), amsgrad=True, weight_decay=0.05)),
              ('AdamW', dict(lr=0.01, amsgrad=True)),
              ('RMSprop', dict(lr=0.01, centered=True, momentum=0.9)),
              ('Adagrad', dict(lr=0.1, lr_decay=0.1, weight_decay=0.1))]


@pytest.mark.parametrize('case', ROUND_TRIP, ids=_case_id)
def test_state_dict_round_trip_continues_identically(case):
    name, kw = case
    w = tape.tensor([0.5, 0.1, -0.3], dtype=tape.float64, requires_grad=True)
    opt = getattr(tape.optim, name)([w], **kw)

    def run(opt, w, n):
        for _ in range(n):
            opt.zero_grad()
            _quadratic_loss(w).backward()
            opt.step()

    run(opt, w, 3)
    saved = copy.deepcopy(opt.state_dict())
    w2 = tape.tensor(w.detach().numpy().copy(), requires_grad=True)
    opt2 = getattr(tape.optim, name)([w2], lr=123.0)   # options come from the checkpoint
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]['lr'] == kw['lr']
    assert opt2.param_groups[0]['params'][0] is w2
    assert isinstance(saved['state'][0], dict) and saved['param_groups'][0]['params'] == [0]
    run(opt, w, 3)
    run(opt2, w2, 3)
    np.testing.assert_array_equal(w.detach().numpy(), w2.detach().numpy())
    # and a fresh optimizer (no loaded state) would have gone elsewhere
    w3 = tape.tensor(w2.detach().numpy().copy(), requires_grad=True)
    opt3 = getattr(tape.optim, name)([w3], **kw)
    run(opt3, w3, 1)
    run(opt2, w2, 1)
    assert not np.array_equal(w3.detach().numpy(), w2.detach().numpy())


def test_load_state_dict_rejects_mismatched_groups():
    w = tape.zeros(2, requires_grad=True)
    v = tape.zeros(2, requires_grad=True)
    sd = tape.optim.SGD([w, v], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        tape.optim.SGD([w], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match='different number of parameter groups'):
        tape.optim.SGD([{'params': [w]}, {'params': [v]}], lr=0.1).load_state_dict(sd)


def test_zero_grad_both_ways():
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    opt = tape.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g                               # the same tensor, zeroed in place
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])
    opt.zero_grad()
    assert w.grad is None


def test_zero_grad_detaches_a_graph_gradient():
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    (w * w * w).sum().backward(create_graph=True)
    assert w.grad.requires_grad
    tape.optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    assert not w.grad.requires_grad and w.grad.is_leaf
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])


def test_closure_runs_with_grad_enabled_and_returns_loss():
    w = tape.tensor([1.0, -1.0], requires_grad=True)
    opt = tape.optim.SGD([w], lr=0.25)
    seen = []

    def closure():
        seen.append(tape.is_grad_enabled())
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with tape.no_grad():
        loss = opt.step(closure)
    assert seen == [True]
    assert loss.item() == 2.0
    np.testing.assert_allclose(w.detach().numpy(), [0.5, -0.5])


def test_step_runs_without_recording():
    w = tape.tensor([1.0], requires_grad=True)
    opt = tape.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert w.is_leaf and w.grad_fn is None and w.requires_grad


def test_errors_match_pytorch():
    w = tape.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match='optimizer got an empty parameter list'):
        tape.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match='Invalid learning rate: -1'):
        tape.optim.Adam([w], lr=-1)
    for name in OPTIMIZERS:
        with pytest.raises(ValueError, match='Invalid learning rate'):
            getattr(tape.optim, name)([w], lr=-0.5)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        tape.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match='more than one parameter group'):
        tape.optim.SGD([{'params': [w]}, {'params': [w]}], lr=0.1)
    with pytest.raises(TypeError, match='iterable of Tensors or dicts'):
        tape.optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match='can only optimize Tensors'):
        tape.optim.SGD([w, 3.0], lr=0.1)
    with pytest.raises(TypeError, match='ordered collections'):
        tape.optim.SGD([{'params': {w}}], lr=0.1)
    with pytest.raises(ValueError, match='Nesterov momentum requires'):
        tape.optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match='Invalid beta parameter at index 1'):
        tape.optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match='Invalid momentum value'):
        tape.optim.RMSprop([w], momentum=-1)
    with pytest.raises(ValueError, match='Invalid lr_decay value'):
        tape.optim.Adagrad([w], lr_decay=-1)
    with pytest.raises(ValueError, match="didn't specify a value of required"):
        class NeedsLr(tape.optim.Optimizer):
            def __init__(self, params):
                super().__init__(params, {'lr': tape.optim.optimizer.required})
        NeedsLr([w])


def test_retained_grad_non_leaf_is_accepted():
    w = tape.zeros(2, requires_grad=True)
    h = w * 2
    h.retain_grad()
    tape.optim.SGD([h], lr=0.1)       # PyTorch accepts a non-leaf that retains grad


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_step_bumps_version_so_a_saved_graph_refuses_backward(name):
    w = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    opt = getattr(tape.optim, name)([w], lr=0.1)
    (w * w).sum().backward()
    v0 = w._version
    y = (w * w).sum()                 # MulBackward0 saved w at version v0
    opt.step()
    assert w._version > v0
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


@pytest.mark.parametrize('name', list(OPTIMIZERS))
@pytest.mark.parametrize('view', ['live', 'gone'])
def test_step_is_seen_by_a_graph_that_saved_a_view_of_the_parameter(name, view):
    # PyTorch's views share the parameter's version counter: a graph that saved
    # W[0:2] (or W.t(), dropped since) refuses backward after the step
    w = tape.tensor([1.0, 2.0, 3.0], dtype=tape.float64, requires_grad=True)
    opt = getattr(tape.optim, name)([w], lr=0.1)
    v = w[0:2]
    y = (v * v).sum() if view == 'live' else (w.t() * w.t()).sum()
    if view == 'gone':
        del v
    w.grad = tape.ones(3, dtype=tape.float64)
    opt.step()
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


def test_graph_recorded_after_step_backpropagates():
    w = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    opt.zero_grad()
    (w * w).sum().backward()          # recorded after the step: fine
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy())


def test_step_on_a_detached_alias_of_a_graph_tensor_is_seen_by_the_graph():
    x = tape.tensor([0.3, 0.7], dtype=tape.float64, requires_grad=True)
    a = x * 2
    b = a.sin()                        # saves a
    p = a.detach().requires_grad_()    # shares a's storage
    p.grad = tape.ones(2, dtype=tape.float64)
    tape.optim.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(a.detach().numpy(), [0.5, 1.3])
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        b.sum().backward()


def test_param_groups_with_different_lr():
    w = tape.tensor([1.0, 1.0], dtype=tape.float64, requires_grad=True)
    v = tape.tensor([1.0, 1.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.SGD([{'params': [w]}, {'params': v, 'lr': 0.01}], lr=0.1, momentum=0.0)
    assert opt.param_groups[1]['params'] == [v] or opt.param_groups[1]['params'][0] is v
    assert opt.param_groups[0]['lr'] == 0.1 and opt.param_groups[1]['lr'] == 0.01
    assert opt.param_groups[1]['momentum'] == 0.0 and 'nesterov' in opt.param_groups[1]
    ((w * w).sum() + (v * v).sum()).backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 0.8])
    np.testing.assert_allclose(v.detach().numpy(), [0.98, 0.98])


def test_add_param_group_later():
    w = tape.tensor([1.0], dtype=tape.float64, requires_grad=True)
    v = tape.tensor([1.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.Adagrad([w], lr=0.1, initial_accumulator_value=0.25)
    opt.add_param_group({'params': [v], 'lr': 0.2})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]['lr_decay'] == 0
    ((w * w).sum() + (v * v).sum()).backward()
    opt.step()
    # both accumulators start at the optimizer's initial value: sum = 0.25 + 4
    np.testing.assert_allclose(w.detach().numpy(), [1 - 0.1 * 2 / (math.sqrt(4.25) + 1e-10)])
    np.testing.assert_allclose(v.detach().numpy(), [1 - 0.2 * 2 / (math.sqrt(4.25) + 1e-10)])
    with pytest.raises(ValueError, match='more than one parameter group'):
        opt.add_param_group({'params': [w]})


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_params_without_grad_are_skipped(name):
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    v = tape.tensor([3.0, 4.0], requires_grad=True)
    opt = getattr(tape.optim, name)([w, v], lr=0.1)
    (w * w).sum().backward()
    before = w._version
    opt.step()
    np.testing.assert_array_equal(v.detach().numpy(), [3.0, 4.0])
    assert v._version == 0 and w._version > before
    assert not np.array_equal(w.detach().numpy(), [1.0, 2.0])
    if name != 'Adagrad':              # Adagrad, as PyTorch, creates its state up front
        assert len(opt.state[v]) == 0


@pytest.mark.parametrize('name', list(OPTIMIZERS))
def test_float32_stays_float32(name):
    w = tape.tensor([1.0, 2.0], requires_grad=True)
    opt = getattr(tape.optim, name)([w], lr=0.1)
    for _ in range(2):
        (w * w).sum().backward()
        opt.step()
    assert w.dtype == tape.float32 and w.grad.dtype == tape.float32
    assert all(v.dtype == tape.float32 for v in opt.state[w].values())


def test_grad_is_not_modified_by_step():
    w = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.5, maximize=True)
    (w * w).sum().backward()
    opt.step()
    opt.step()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_repr_lists_groups():
    opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=0.5)
    text = repr(opt)
    assert text.startswith('SGD (') and 'Parameter Group 0' in text and 'lr: 0.5' in text


# ------------------------------------------------------------- schedulers
SCHEDULERS = [
    ('StepLR', dict(step_size=3, gamma=0.5)),
    ('MultiStepLR', dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ('ExponentialLR', dict(gamma=0.9)),
    ('CosineAnnealingLR', dict(T_max=5, eta_min=0.01)),
    ('CosineAnnealingLR', dict(T_max=4)),
    ('LambdaLR', dict(lr_lambda=lambda e: 1.0 / (1 + e))),
]


def _lr_sequence(lib, name, kw, n=14):
    w = lib.zeros(1, requires_grad=True)
    v = lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD([{'params': [w]}, {'params': [v], 'lr': 0.3}], lr=1.0)
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
    seq = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        seq.append(sched.get_last_lr())
        assert seq[-1] == [g['lr'] for g in opt.param_groups]
    return seq, sched


@pytest.mark.parametrize('case', SCHEDULERS, ids=lambda c: c[0] + str(sorted(c[1])))
def test_scheduler_sequences_match_torch(case):
    torch = pytest.importorskip('torch')
    name, kw = case
    ours, s1 = _lr_sequence(tape, name, kw)
    theirs, s2 = _lr_sequence(torch, name, kw)
    assert s1.last_epoch == s2.last_epoch == 14
    np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize('name, kw, expected', [
    ('StepLR', dict(step_size=2, gamma=0.1), [1.0, 1.0, 0.1, 0.1, 0.01]),
    ('MultiStepLR', dict(milestones=[1, 3], gamma=0.5), [1.0, 0.5, 0.5, 0.25, 0.25]),
    ('ExponentialLR', dict(gamma=0.5), [1.0, 0.5, 0.25, 0.125, 0.0625]),
    ('CosineAnnealingLR', dict(T_max=4), [1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5,
                                          0.5 * (1 + math.cos(3 * math.pi / 4)), 0.0]),
    ('LambdaLR', dict(lr_lambda=lambda e: e + 1.0), [1.0, 2.0, 3.0, 4.0, 5.0]),
])
def test_scheduler_known_values(name, kw, expected):
    w = tape.zeros(1, requires_grad=True)
    opt = tape.optim.SGD([w], lr=1.0)
    sched = getattr(lr_scheduler, name)(opt, **kw)
    got = [sched.get_last_lr()[0]]
    for _ in range(4):
        opt.step()
        sched.step()
        got.append(sched.get_last_lr()[0])
    assert sched.last_epoch == 4
    np.testing.assert_allclose(got, expected, atol=1e-15)
    assert opt.param_groups[0]['initial_lr'] == 1.0


def test_scheduler_drives_the_optimizer_lr():
    w = tape.tensor([1.0], dtype=tape.float64, requires_grad=True)
    opt = tape.optim.SGD([w], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    deltas = []
    for _ in range(3):
        opt.zero_grad()
        w.sum().backward()            # gradient 1: the update is -lr
        before = w.item()
        opt.step()
        deltas.append(before - w.item())
        sched.step()
    np.testing.assert_allclose(deltas, [1.0, 0.5, 0.25])


def test_scheduler_warns_when_stepped_before_the_optimizer():
    opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    with pytest.warns(UserWarning, match='before `optimizer.step\\(\\)`'):
        sched.step()


def test_scheduler_state_dict_round_trip():
    opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    for _ in range(3):
        opt.step()
        sched.step()
    saved = sched.state_dict()
    assert 'optimizer' not in saved and saved['last_epoch'] == 3
    opt2 = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=1.0)
    opt2.load_state_dict(opt.state_dict())
    sched2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=6, last_epoch=2)
    sched2.load_state_dict(saved)
    for _ in range(2):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
    assert sched.get_last_lr() == sched2.get_last_lr()
    assert sched2.last_epoch == 5


def test_scheduler_resume_requires_initial_lr():
    opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(KeyError, match='initial_lr'):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)
    with pytest.raises(TypeError, match='is not an Optimizer'):
        lr_scheduler.StepLR(object(), step_size=2)


def test_import_forms():
    import importlib
    assert importlib.import_module('tape.optim') is tape.optim
    assert tape.optim.lr_scheduler is lr_scheduler
    assert issubclass(tape.optim.AdamW, tape.optim.Adam)
