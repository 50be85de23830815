"""tape.utils.checkpoint against plain (non-checkpointed) gradients and torch."""
import warnings

import numpy as np
import pytest

import tape
from tape.utils.checkpoint import checkpoint, checkpoint_sequential

nn = tape.nn
torch = pytest.importorskip('torch')


def _mlp(drop=0.0):
    layers = [nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU()]
    if drop:
        layers.append(nn.Dropout(drop))
    layers += [nn.Linear(16, 8), nn.Sigmoid(), nn.Linear(8, 3)]
    return nn.Sequential(*layers)


def _torch_copy(m):
    """A torch Sequential with the same layers and weights as tape's ``m``."""
    mods = []
    for layer in m:
        name = type(layer).__name__
        if name == 'Linear':
            t = torch.nn.Linear(layer.in_features, layer.out_features)
            with torch.no_grad():
                t.weight.copy_(torch.tensor(layer.weight.detach().numpy()))
                t.bias.copy_(torch.tensor(layer.bias.detach().numpy()))
            mods.append(t)
        else:
            mods.append(getattr(torch.nn, name)())
    return torch.nn.Sequential(*mods)


def _grads(m, x, fn, seed=1):
    m.zero_grad()
    x.grad = None
    tape.manual_seed(seed)
    y = fn(m, x)
    (y ** 2).sum().backward()
    return y.detach().numpy(), [p.grad.numpy().copy() for p in m.parameters()] + \
        [x.grad.numpy().copy()]


def _same(a, b):
    ya, ga = a
    yb, gb = b
    np.testing.assert_allclose(ya, yb, rtol=1e-6, atol=1e-6)
    assert len(ga) == len(gb)
    for u, v in zip(ga, gb):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('reentrant', [True, False])
def test_mlp_block_matches_plain_and_torch(reentrant):
    tape.manual_seed(0)
    m = _mlp()
    xn = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    x = tape.tensor(xn, requires_grad=True)
    plain = _grads(m, x, lambda m, x: m(x))
    ck = _grads(m, x, lambda m, x: checkpoint(m, x, use_reentrant=reentrant))
    _same(plain, ck)
    tm = _torch_copy(m)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.utils.checkpoint.checkpoint(tm, tx, use_reentrant=reentrant)
    (ty ** 2).sum().backward()
    _same(ck, (ty.detach().numpy(), [p.grad.numpy() for p in tm.parameters()] +
               [tx.grad.numpy()]))


@pytest.mark.parametrize('reentrant', [True, False])
def test_dropout_with_preserve_rng_state(reentrant):
    tape.manual_seed(0)
    m = _mlp(drop=0.5)
    x = tape.randn(8, 4, requires_grad=True)
    plain = _grads(m, x, lambda m, x: m(x))
    ck = _grads(m, x, lambda m, x: checkpoint(m, x, use_reentrant=reentrant))
    _same(plain, ck)
    # without the state restored the recompute draws other masks: wrong gradients
    bad = _grads(m, x, lambda m, x: checkpoint(m, x, use_reentrant=reentrant,
                                               preserve_rng_state=False))
    np.testing.assert_allclose(plain[0], bad[0])        # same forward
    assert not all(np.allclose(u, v) for u, v in zip(plain[1], bad[1]))


def test_rng_state_after_backward_is_the_surrounding_one():
    tape.manual_seed(0)
    m = _mlp(drop=0.5)
    x = tape.randn(8, 4, requires_grad=True)
    tape.manual_seed(3)
    m(x).sum().backward()
    expected = tape.rand(3)
    tape.manual_seed(3)
    checkpoint(m, x, use_reentrant=True).sum().backward()
    np.testing.assert_array_equal(tape.rand(3).numpy(), expected.numpy())


@pytest.mark.parametrize('reentrant', [True, False])
@pytest.mark.parametrize('segments', [1, 2, 3])
def test_checkpoint_sequential_matches_plain(reentrant, segments):
    tape.manual_seed(0)
    m = _mlp(drop=0.3)
    x = tape.randn(5, 4, requires_grad=True)
    plain = _grads(m, x, lambda m, x: m(x))
    ck = _grads(m, x, lambda m, x: checkpoint_sequential(m, segments, x,
                                                         use_reentrant=reentrant))
    _same(plain, ck)
    ck_list = _grads(m, x, lambda m, x: checkpoint_sequential(list(m), segments, x,
                                                              use_reentrant=reentrant))
    _same(plain, ck_list)


def test_checkpoint_sequential_matches_torch():
    tape.manual_seed(0)
    m = _mlp()
    xn = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    x = tape.tensor(xn, requires_grad=True)
    ck = _grads(m, x, lambda m, x: checkpoint_sequential(m, 3, x, use_reentrant=False))
    tm = _torch_copy(m)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.utils.checkpoint.checkpoint_sequential(tm, 3, tx, use_reentrant=False)
    (ty ** 2).sum().backward()
    _same(ck, (ty.detach().numpy(), [p.grad.numpy() for p in tm.parameters()] +
               [tx.grad.numpy()]))


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        fn()
    return [(x.category, str(x.message)) for x in w]


def test_use_reentrant_warning_matches_torch():
    got = _warnings_of(lambda: checkpoint(lambda t: t * 2, tape.ones(2, requires_grad=True)))
    want = _warnings_of(lambda: torch.utils.checkpoint.checkpoint(
        lambda t: t * 2, torch.ones(2, requires_grad=True)))
    assert got == want and len(got) == 1
    seq = [nn.Tanh(), nn.Tanh()]
    got = _warnings_of(lambda: checkpoint_sequential(seq, 2, tape.ones(2, requires_grad=True)))
    want = _warnings_of(lambda: torch.utils.checkpoint.checkpoint_sequential(
        [torch.nn.Tanh(), torch.nn.Tanh()], 2, torch.ones(2, requires_grad=True)))
    assert got == want and len(got) == 1
    assert _warnings_of(lambda: checkpoint(lambda t: t * 2, tape.ones(2, requires_grad=True),
                                           use_reentrant=False)) == []


def test_no_input_requires_grad_warns_and_gives_no_graph():
    got = _warnings_of(lambda: checkpoint(lambda t: t * 2, tape.ones(2), use_reentrant=True))
    want = _warnings_of(lambda: torch.utils.checkpoint.checkpoint(
        lambda t: t * 2, torch.ones(2), use_reentrant=True))
    assert got == want and 'None of the inputs have requires_grad=True' in got[0][1]


def test_errors_match_torch():
    for mod, x in ((tape, tape.ones(2, requires_grad=True)),
                   (torch, torch.ones(2, requires_grad=True))):
        ck = tape.utils.checkpoint if mod is tape else torch.utils.checkpoint
        with pytest.raises(ValueError, match='Unexpected keyword arguments: a'):
            ck.checkpoint(lambda t, a=1: t * a, x, a=3, use_reentrant=True)
        with pytest.raises(ValueError, match='Unexpected keyword arguments: b'):
            ck.checkpoint_sequential([lambda t: t], 1, x, use_reentrant=True, b=1)
        y = ck.checkpoint(lambda t: (t * 2).detach(), x, use_reentrant=True)
        with pytest.raises(RuntimeError):
            y.sum().backward()


def test_non_tensor_args_and_outputs():
    def f(x, scale, name):
        return x * scale, name + '!', 7

    for reentrant in (True, False):
        x = tape.tensor([1.0, 2.0], requires_grad=True)
        y, s, n = checkpoint(f, x, 3.0, 'a', use_reentrant=reentrant)
        assert (s, n) == ('a!', 7)
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_non_reentrant_kwargs_nested_outputs_and_autograd_grad():
    lin = nn.Linear(3, 2)
    x = tape.randn(4, 3)                    # no input requires grad: parameters do

    def f(x, *, shift):
        h = lin(x) + shift
        return {'out': h, 'aux': [h.sum(), 'tag']}

    shift = tape.ones(2, requires_grad=True)
    res = checkpoint(f, x, shift=shift, use_reentrant=False)
    assert res['aux'][1] == 'tag' and res['out'].requires_grad
    loss = (res['out'] ** 2).sum() + res['aux'][0]
    gw, gs = tape.autograd.grad(loss, [lin.weight, shift])
    plain = f(x, shift=shift)
    loss2 = (plain['out'] ** 2).sum() + plain['aux'][0]
    ew, es = tape.autograd.grad(loss2, [lin.weight, shift])
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gs.numpy(), es.numpy(), rtol=1e-6)
    assert lin.weight.grad is None


def test_closure_parameters_get_grads_reentrant():
    w = tape.randn(3, 3, requires_grad=True)
    x = tape.randn(2, 3, requires_grad=True)
    checkpoint(lambda t: tape.tanh(t @ w), x, use_reentrant=True).sum().backward()
    gw, gx = w.grad.clone(), x.grad.clone()
    w.grad = x.grad = None
    tape.tanh(x @ w).sum().backward()
    np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-6)


def test_second_order_non_reentrant():
    x = tape.tensor([1.0, 2.0, -0.5], requires_grad=True)
    w = tape.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda t: (w * t ** 3).sum(), x, use_reentrant=False)
    g, = tape.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), (3 * w * x ** 2).detach().numpy())
    hx, hw = tape.autograd.grad(g.sum(), [x, w])
    np.testing.assert_allclose(hx.numpy(), (6 * w * x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(hw.numpy(), (3 * x ** 2).detach().numpy(), rtol=1e-6)


def test_no_grad_runs_plainly():
    x = tape.ones(2, requires_grad=True)
    with tape.no_grad():
        y = checkpoint(lambda t: t * 2, x, use_reentrant=False)
        z = checkpoint(lambda t: t * 2, x, use_reentrant=True)
    assert not y.requires_grad and not z.requires_grad
    np.testing.assert_array_equal(y.numpy(), [2.0, 2.0])
