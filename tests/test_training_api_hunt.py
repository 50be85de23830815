"""Training utilities a differential hunt against PyTorch 2.13 found differing:
0-d parameters in every optimizer, ModuleList.extend with containers,
set_submodule, _LRScheduler, optimizer step hooks, nn.init's dirac_/sparse_
and its deprecated names."""
import warnings

import numpy as np
import pytest

import tape

OPTIMIZERS = [('Adagrad', {}), ('NAdam', {}), ('Adadelta', {}), ('Rprop', {}),
              ('ASGD', dict(lr=0.1, t0=2)), ('SGD', dict(lr=0.1, momentum=0.9)), ('Adam', {}),
              ('AdamW', {}), ('RMSprop', dict(centered=True, momentum=0.5)), ('Adamax', {}),
              ('RAdam', {})]


def _run(lib, name, kw, shape):
    p = lib.nn.Parameter(lib.ones(shape, dtype=lib.float64) if shape else
                         lib.tensor(1.0, dtype=lib.float64))
    o = getattr(lib.optim, name)([p], **kw)
    for i in range(5):
        p.grad = lib.full(shape, 0.5 * (i + 1) - 1.2, dtype=lib.float64)
        o.step()
    return np.asarray(p.detach().numpy(), np.float64)


@pytest.mark.parametrize('name,kw', OPTIMIZERS)
def test_zero_dim_parameters_step_as_one_element_ones(name, kw):
    """A learnable scalar (a temperature, say) steps as a (1,) parameter would."""
    scalar = _run(tape, name, kw, ())
    assert scalar.shape == ()
    np.testing.assert_allclose(scalar.reshape(1), _run(tape, name, kw, (1,)), rtol=1e-15)


@pytest.mark.parametrize('name,kw', OPTIMIZERS)
def test_zero_dim_parameters_against_torch(name, kw):
    torch = pytest.importorskip('torch')
    np.testing.assert_allclose(_run(tape, name, kw, ()), _run(torch, name, kw, ()), rtol=1e-12)


def test_module_list_extends_with_containers():
    nn = tape.nn
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml += nn.ModuleList([nn.ReLU()])
    ml.extend(nn.Sequential(nn.Tanh()))
    assert [type(m).__name__ for m in ml] == ['Linear', 'ReLU', 'Tanh']
    with pytest.raises(TypeError, match='iterable'):
        ml.extend(nn.Linear(1, 1))


def test_set_submodule():
    nn = tape.nn
    net = nn.Sequential(nn.Sequential(nn.ReLU()), nn.Linear(2, 2))
    net.set_submodule('0.0', nn.Tanh())
    assert type(net[0][0]).__name__ == 'Tanh'
    net.set_submodule('0.extra', nn.ReLU())
    assert type(net[0].extra).__name__ == 'ReLU'
    with pytest.raises(AttributeError):
        net.set_submodule('0.missing', nn.ReLU(), strict=True)
    with pytest.raises(AttributeError, match='is not an nn.Module'):
        net.set_submodule('1.weight', nn.ReLU())
    with pytest.raises(ValueError):
        net.set_submodule('', nn.ReLU())


def test_old_scheduler_base_class():
    p = tape.nn.Parameter(tape.ones(2))
    o = tape.optim.SGD([p], lr=0.1)

    class Half(tape.optim.lr_scheduler._LRScheduler):
        def get_lr(self):
            return [g['lr'] * 0.5 for g in self.optimizer.param_groups]
    s = Half(o)
    o.step()
    s.step()
    assert s.get_last_lr() == [0.025]     # (the constructor steps once too)


def test_step_hooks():
    p = tape.nn.Parameter(tape.ones(2))
    o = tape.optim.SGD([p], lr=0.1)
    log = []
    h1 = o.register_step_pre_hook(lambda opt, a, k: log.append('pre'))
    h2 = o.register_step_post_hook(lambda opt, a, k: log.append('post'))
    g = tape.optim.optimizer.register_optimizer_step_pre_hook(lambda opt, a, k: log.append('g'))
    p.grad = tape.ones(2)
    o.step()
    h1.remove()
    o.step()
    g.remove()
    h2.remove()
    o.step()
    assert log == ['g', 'pre', 'post', 'g', 'post']
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 0.7], rtol=1e-6)
    # a pre hook may replace the arguments (here the closure)
    o.register_step_pre_hook(lambda opt, a, k: ((), {'closure': lambda: 3.0}))
    assert o.step() == 3.0


def test_init_dirac_sparse_and_old_names():
    w = tape.empty(4, 2, 3, 3)
    tape.nn.init.dirac_(w, groups=2)
    d = w.numpy()
    assert d.sum() == 4 and d[0, 0, 1, 1] == d[1, 1, 1, 1] == d[2, 0, 1, 1] == d[3, 1, 1, 1] == 1
    s = tape.empty(10, 5)
    tape.nn.init.sparse_(s, 0.3)
    assert ((s.numpy() == 0).sum(0) == 3).all()
    for bad, msg in ((lambda: tape.nn.init.dirac_(tape.empty(4, 2)), '3, 4, or 5'),
                     (lambda: tape.nn.init.dirac_(tape.empty(3, 2, 3), groups=2), 'divisible'),
                     (lambda: tape.nn.init.sparse_(tape.empty(3), 0.1), '2 dimensions')):
        with pytest.raises(ValueError, match=msg):
            bad()
    assert tape.nn.init.orthogonal_(tape.empty(0, 5)).shape == (0, 5)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter('always')
        tape.nn.init.kaiming_uniform_(tape.empty(0, 3))
        tape.nn.init.xavier_uniform(tape.empty(2, 3))
    assert [r.category for r in rec] == [UserWarning, FutureWarning]


def test_init_dirac_against_torch():
    torch = pytest.importorskip('torch')
    for shape, groups in (((4, 2, 3), 1), ((4, 2, 3, 3), 2), ((2, 4, 3, 3, 3), 1)):
        a, t = tape.empty(*shape), torch.empty(*shape)
        tape.nn.init.dirac_(a, groups)
        torch.nn.init.dirac_(t, groups)
        np.testing.assert_array_equal(a.numpy(), t.numpy())


def test_extra_state_round_trip():
    nn = tape.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(1, 1)
            self.cfg = {'a': 1}

        def get_extra_state(self):
            return self.cfg

        def set_extra_state(self, state):
            self.cfg = dict(state, loaded=True)
    sd = nn.Sequential(M()).state_dict()
    assert list(sd) == ['0._extra_state', '0.lin.weight', '0.lin.bias']
    m = nn.Sequential(M())
    m.load_state_dict(sd)
    assert m[0].cfg == {'a': 1, 'loaded': True}
    del sd['0._extra_state']
    with pytest.raises(RuntimeError, match='Missing key.*_extra_state'):
        m.load_state_dict(sd)
    assert m.load_state_dict(sd, strict=False).missing_keys == ['0._extra_state']
    # a module without the methods saves no such key
    assert '_extra_state' not in ''.join(nn.Linear(1, 1).state_dict())


def test_legacy_loss_flags_and_in_place_dropout():
    F = tape.nn.functional
    x = tape.tensor([[1., 2.], [3., 4.]])
    t = tape.zeros(2, 2)
    with pytest.warns(UserWarning, match='size_average and reduce'):
        assert F.mse_loss(x, t, size_average=False).item() == 30.0
    with pytest.warns(UserWarning):
        assert F.nll_loss(x, tape.tensor([0, 1]), reduce=False).tolist() == [-1., -4.]
    with pytest.warns(UserWarning):
        assert F.l1_loss(x, t, reduce=False).shape == (2, 2)
    with pytest.warns(UserWarning):
        assert F.binary_cross_entropy_with_logits(x, t, size_average=False).shape == ()
    y = tape.ones(10, 10)
    assert F.dropout(y, 0.5, inplace=True) is y and (y == 0).any().item()
    with pytest.raises(RuntimeError, match='leaf Variable'):
        F.dropout(tape.ones(3, requires_grad=True), 0.5, inplace=True)
    w = tape.ones(50, requires_grad=True)
    h = w * 1
    tape.nn.Dropout(0.5, inplace=True)(h)
    h.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), h.detach().numpy())


def test_backward_inputs_given_twice_and_a_hook_removing_itself():
    x = tape.tensor([1., 2.], dtype=tape.float64, requires_grad=True)
    x.exp().sum().backward(inputs=[x, x])
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1., 2.]))
    x = tape.tensor([1., 2.], dtype=tape.float64, requires_grad=True)
    h = x * 2
    handles = []

    def once(g):
        handles[0].remove()
        return g * 3
    handles.append(h.register_hook(once))
    (h * h).sum().backward()
    assert x.grad.tolist() == [24., 48.]
