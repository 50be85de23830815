"""The one-pass Adam and SGD updates (compiler/optim_kernels.py) give the same
bits as the NumPy steps they replace, and PyTorch's values."""
import numpy as np
import pytest

import tape
from tape.optim import adam as adam_mod
from tape.optim import sgd as sgd_mod


def _params(dtype, seed=0, shapes=((7, 5), (5,), (3, 4, 2))):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _run(make_opt, values, grads_per_step, fused, monkeypatch, module):
    ps = [tape.tensor(v.copy(), requires_grad=True) for v in values]
    opt = make_opt(ps)
    with monkeypatch.context() as mp:
        if not fused:
            mp.setattr(module, '_fused_kernels', lambda *a: None)
        for grads in grads_per_step:
            for p, g in zip(ps, grads):
                p.grad = tape.tensor(g)
            opt.step()
    return [p.detach().numpy() for p in ps], opt


ADAMS = [
    lambda ps: tape.optim.Adam(ps, lr=1e-2),
    lambda ps: tape.optim.Adam(ps, lr=3e-2, betas=(0.3, 0.8)),      # lerp's other form
    lambda ps: tape.optim.Adam(ps, lr=1e-2, weight_decay=0.1),
    lambda ps: tape.optim.Adam(ps, lr=1e-2, maximize=True, eps=1e-3),
    lambda ps: tape.optim.AdamW(ps, lr=1e-2, weight_decay=0.5),
]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('which', range(len(ADAMS)))
def test_adam_fused_matches_numpy_steps_bitwise(dtype, which, monkeypatch):
    values = _params(dtype)
    rng = np.random.default_rng(1)
    steps = [[rng.standard_normal(v.shape).astype(dtype) for v in values] for _ in range(4)]
    a, opt_a = _run(ADAMS[which], values, steps, True, monkeypatch, adam_mod)
    b, opt_b = _run(ADAMS[which], values, steps, False, monkeypatch, adam_mod)
    for x, y in zip(a, b):
        assert x.dtype == dtype
        np.testing.assert_array_equal(x, y)
    for pa, pb in zip(opt_a.param_groups[0]['params'], opt_b.param_groups[0]['params']):
        for key in ('exp_avg', 'exp_avg_sq'):
            np.testing.assert_array_equal(opt_a.state[pa][key].numpy(),
                                          opt_b.state[pb][key].numpy())


def test_adam_fused_nan_and_inf_gradients(monkeypatch):
    values = _params(np.float32, shapes=((4,),))
    g = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
    a, _ = _run(ADAMS[0], values, [[g]], True, monkeypatch, adam_mod)
    b, _ = _run(ADAMS[0], values, [[g]], False, monkeypatch, adam_mod)
    np.testing.assert_array_equal(a[0], b[0])       # (NaN in the same places)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_sgd_fused_matches_numpy_steps_bitwise(dtype, monkeypatch):
    values = _params(dtype)
    rng = np.random.default_rng(2)
    steps = [[rng.standard_normal(v.shape).astype(dtype) for v in values] for _ in range(3)]
    for make in (lambda ps: tape.optim.SGD(ps, lr=0.01),
                 lambda ps: tape.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
                 lambda ps: tape.optim.SGD(ps, lr=0.1, momentum=0.8, dampening=0.3),
                 lambda ps: tape.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)):
        a, _ = _run(make, values, steps, True, monkeypatch, sgd_mod)
        b, _ = _run(make, values, steps, False, monkeypatch, sgd_mod)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_fused_update_skips_non_contiguous_gradients(monkeypatch):
    # a gradient that is a transposed view takes the NumPy steps, same values
    w = tape.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    g = np.ascontiguousarray(np.ones((3, 2), np.float32) * np.array([1, 2], np.float32)).T
    assert not g.flags.c_contiguous
    opt = tape.optim.Adam([w], lr=0.1)
    w.grad = tape.from_numpy(g)
    opt.step()
    ref = tape.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    opt2 = tape.optim.Adam([ref], lr=0.1)
    ref.grad = tape.tensor(np.ascontiguousarray(g))
    opt2.step()
    np.testing.assert_array_equal(w.detach().numpy(), ref.detach().numpy())


@pytest.mark.parametrize('opt_name,kwargs', [
    ('Adam', dict(lr=1e-2)),
    ('Adam', dict(lr=1e-2, betas=(0.3, 0.8), weight_decay=0.1)),
    ('AdamW', dict(lr=1e-2, weight_decay=0.5)),
    ('SGD', dict(lr=0.05)),
    ('SGD', dict(lr=0.05, momentum=0.9)),
    ('SGD', dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
])
def test_fused_updates_against_torch(opt_name, kwargs):
    torch = pytest.importorskip('torch')
    values = _params(np.float32, seed=3)
    rng = np.random.default_rng(4)
    steps = [[rng.standard_normal(v.shape).astype(np.float32) for v in values] for _ in range(5)]
    ours = [tape.tensor(v.copy(), requires_grad=True) for v in values]
    theirs = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    o1 = getattr(tape.optim, opt_name)(ours, **kwargs)
    o2 = getattr(torch.optim, opt_name)(theirs, foreach=False, **kwargs)
    for grads in steps:
        for p, q, g in zip(ours, theirs, grads):
            p.grad = tape.tensor(g)
            q.grad = torch.tensor(g)
        o1.step()
        o2.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)
