"""tape.nn modules: PyTorch's nn.Module layer, checked against torch where installed."""
import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tape
from tape import nn


def _np(t):
    return np.asarray(t.detach().numpy())


# -- without torch ------------------------------------------------------------------
def test_parameter_is_a_plain_marked_tensor():
    p = nn.Parameter(tape.zeros(3))
    assert type(p) is tape.Tensor           # keeps the ops' fast lanes
    assert isinstance(p, nn.Parameter) and isinstance(p, tape.Tensor)
    assert p.requires_grad and p.is_leaf
    assert not isinstance(tape.zeros(3, requires_grad=True), nn.Parameter)
    assert not isinstance(p.detach(), nn.Parameter)
    assert not isinstance(p * 2, nn.Parameter)
    q = nn.Parameter(tape.zeros(2), requires_grad=False)
    assert not q.requires_grad and isinstance(q, nn.Parameter)
    # shares storage with its data, as torch's Parameter(t) does
    t = tape.ones(2)
    r = nn.Parameter(t)
    with tape.no_grad():
        r.mul_(3.0)
    assert t.tolist() == [3.0, 3.0]
    assert repr(p) == 'Parameter containing:\ntensor([0., 0., 0.], requires_grad=True)'
    assert repr(p.detach()) == 'tensor([0., 0., 0.])'


def test_parameter_rejects_non_tensors():
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])


def _mlp(seed=0):
    tape.manual_seed(seed)
    return nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))


def test_mlp_trains_with_manual_sgd():
    model = _mlp()
    x = tape.linspace(-2, 2, 64).reshape(64, 1)
    y = tape.sin(x * 1.5)
    loss_fn = nn.MSELoss()
    losses = []
    for _ in range(300):
        loss = loss_fn(model(x), y)
        model.zero_grad()
        loss.backward()
        with tape.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert losses[-1] < 0.05


def test_shared_parameters_appear_once():
    lin = nn.Linear(2, 2)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    names = [n for n, _ in model.named_parameters()]
    assert names == ['0.weight', '0.bias']
    assert len(list(model.parameters())) == 2
    assert len(list(model.modules())) == 3          # Sequential, lin (once), ReLU
    # the state_dict lists a shared module under each name, as torch's does
    assert list(model.state_dict()) == ['0.weight', '0.bias', '2.weight', '2.bias']
    tied = nn.Module()
    tied.a = nn.Linear(2, 2)
    tied.b = nn.Linear(2, 2)
    tied.b.weight = tied.a.weight
    assert [n for n, _ in tied.named_parameters()] == ['a.weight', 'a.bias', 'b.bias']
    assert len([n for n, _ in tied.named_parameters(remove_duplicate=False)]) == 4


def test_load_state_dict_errors_and_strict_false():
    m = nn.Linear(2, 3)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict({'weight': tape.zeros(3, 2), 'foo': tape.zeros(1)})
    assert str(e.value) == ('Error(s) in loading state_dict for Linear:\n\tMissing key(s) in '
                            'state_dict: "bias". \n\tUnexpected key(s) in state_dict: "foo". ')
    with pytest.raises(RuntimeError, match='size mismatch for weight'):
        m.load_state_dict({'weight': tape.zeros(2, 2), 'bias': tape.zeros(3)})
    res = m.load_state_dict({'weight': tape.ones(3, 2), 'foo': tape.zeros(1)}, strict=False)
    assert res.missing_keys == ['bias'] and res.unexpected_keys == ['foo']
    assert m.weight.tolist() == [[1.0, 1.0]] * 3
    assert repr(m.load_state_dict(m.state_dict())) == '<All keys matched successfully>'


def test_load_state_dict_copies_in_place_and_nested_keys():
    src, dst = _mlp(1), _mlp(2)
    w = dst[0].weight
    dst.load_state_dict(src.state_dict())
    assert dst[0].weight is w                       # in place: optimizers keep their tensors
    for (n1, a), (n2, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert n1 == n2 and np.array_equal(_np(a), _np(b))
    sd = src.state_dict()
    del sd['2.bias']
    sd['2.extra'] = tape.zeros(1)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "2.bias"'):
        dst.load_state_dict(sd)
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "2.extra"'):
        dst.load_state_dict(sd)


def test_state_dict_is_detached_and_keep_vars():
    m = nn.Linear(2, 2)
    sd = m.state_dict()
    assert not sd['weight'].requires_grad and sd['weight'] is not m.weight
    assert m.state_dict(keep_vars=True)['weight'] is m.weight


def test_setattr_registration_rules():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(tape.ones(2))
            self.register_buffer('running', tape.zeros(2))
            self.register_buffer('scratch', tape.zeros(1), persistent=False)
            self.sub = nn.Linear(2, 2)
            self.scale = 3.0
    m = M()
    assert list(m._parameters) == ['w'] and list(m._modules) == ['sub']
    assert list(m.state_dict()) == ['w', 'running', 'sub.weight', 'sub.bias']
    assert [n for n, _ in m.named_buffers()] == ['running', 'scratch']
    assert m.scale == 3.0 and 'scale' in m.__dict__
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'w'"):
        m.w = tape.ones(2)
    m.running = tape.ones(2)                            # a buffer takes a tensor
    assert m.running.tolist() == [1.0, 1.0] and 'running' not in m.__dict__
    with pytest.raises(TypeError):
        m.sub = 5
    m.w = None
    assert list(m.parameters())[0] is m.sub.weight
    del m.sub
    assert list(m.children()) == []
    with pytest.raises(AttributeError, match="'M' object has no attribute 'nothing'"):
        m.nothing

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(tape.ones(1))
    with pytest.raises(AttributeError, match='before Module.__init__'):
        Early()
    with pytest.raises(KeyError):
        m.register_buffer('a.b', tape.zeros(1))
    with pytest.raises(NotImplementedError, match='forward'):
        nn.Module()(1)


def test_containers_without_torch():
    a, b, c = nn.Linear(1, 1), nn.ReLU(), nn.Tanh()
    s = nn.Sequential(a, b)
    assert len(s) == 2 and s[0] is a and s[-1] is b and list(s) == [a, b]
    s.append(c)
    assert s[2] is c and isinstance(s[1:], nn.Sequential) and list(s[1:]) == [b, c]
    with pytest.raises(IndexError):
        s[3]
    del s[0]
    assert list(s._modules) == ['0', '1'] and s[0] is b
    named = nn.Sequential(OrderedDict([('fc', a), ('act', b)]))
    assert list(named._modules) == ['fc', 'act'] and named.fc is a

    ml = nn.ModuleList([a, b])
    ml.append(c)
    ml += [nn.Identity()]
    assert len(ml) == 4 and ml[-2] is c and list(ml[1:3]) == [b, c]
    assert [n for n, _ in ml.named_parameters()] == ['0.weight', '0.bias']

    md = nn.ModuleDict({'x': a, 'y': b})
    md['z'] = c
    assert list(md) == ['x', 'y', 'z'] and 'y' in md and md['z'] is c and len(md) == 3
    assert md.pop('y') is b and list(md.keys()) == ['x', 'z']

    pl = nn.ParameterList([tape.zeros(2), nn.Parameter(tape.ones(3))])
    pl.append(tape.zeros(1))
    assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ['0', '1', '2']
    assert pl[1].tolist() == [1.0, 1.0, 1.0]


def test_train_eval_and_dropout():
    tape.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Dropout(0.5)))
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    x = tape.ones(200, 4)
    drop = model[1][0]
    assert np.array_equal(_np(drop(x)), _np(x))
    model.train()
    out = _np(drop(x))
    assert set(np.unique(out)) == {0.0, 2.0}            # zeroed or scaled by 1/(1-p)
    assert 0.4 < (out == 0).mean() < 0.6
    with pytest.raises(ValueError):
        model.train('yes')
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def test_zero_grad_requires_grad_apply_and_children():
    model = _mlp()
    model(tape.ones(3, 1)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ['Linear', 'Tanh', 'Linear', 'Sequential']      # children first
    assert [n for n, _ in model.named_children()] == ['0', '1', '2']
    assert [n for n, _ in model.named_modules()] == ['', '0', '1', '2']


def test_to_double_keeps_parameter_objects():
    model = _mlp()
    w = model[0].weight
    model(tape.ones(2, 1)).sum().backward()
    assert model.double() is model
    assert model[0].weight is w and w.dtype == tape.float64 and w.grad.dtype == tape.float64
    assert isinstance(w, nn.Parameter) and w.requires_grad
    out = model(tape.ones(2, 1, dtype=tape.float64))
    assert out.dtype == tape.float64
    model.to(tape.float32)
    assert w.dtype == tape.float32
    model.to('cpu', dtype=tape.float64)
    assert w.dtype == tape.float64


def test_linear_default_init_bounds():
    tape.manual_seed(3)
    lin = nn.Linear(100, 400)
    bound = 1 / math.sqrt(100)
    w, b = _np(lin.weight), _np(lin.bias)
    assert w.dtype == np.float32 and w.shape == (400, 100)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    # a uniform on (-bound, bound) has std bound/sqrt(3)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    tape.manual_seed(3)
    assert np.array_equal(_np(nn.Linear(100, 400).weight), w)     # drawn from tape's generator


def test_deepcopy_and_pickle_keep_parameters():
    model = _mlp()
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        ps = list(clone.parameters())
        assert len(ps) == 4 and all(isinstance(p, nn.Parameter) for p in ps)
        assert ps[0] is not model[0].weight
        assert np.array_equal(_np(ps[0]), _np(model[0].weight))


def test_hooks_without_torch():
    lin = nn.Identity()
    log = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    h2 = lin.register_forward_hook(lambda m, args, out: out * 10)
    assert lin(tape.tensor(1.0)).item() == 20.0
    h1.remove()
    assert lin(tape.tensor(1.0)).item() == 10.0
    with h2:
        pass                                        # leaving the block removes it
    assert lin(tape.tensor(1.0)).item() == 1.0

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError('boom')
    b = Boom()
    b.register_forward_hook(lambda m, a, o: log.append('always'), always_call=True)
    b.register_forward_hook(lambda m, a, o: log.append('normal'))
    with pytest.raises(ValueError):
        b(1)
    assert log == ['always']


def test_module_works_under_jit():
    model = _mlp()
    x = tape.randn(5, 1)

    @tape.jit
    def loss(m, x):
        return (m(x) ** 2).sum()
    eager = (model(x) ** 2).sum().item()
    for _ in range(3):
        assert abs(loss(model, x).item() - eager) < 1e-5


def test_bilinear_functional_shapes():
    w = tape.randn(4, 2, 3, dtype=tape.float64)
    x1, x2 = tape.randn(5, 2, dtype=tape.float64), tape.randn(5, 3, dtype=tape.float64)
    want = np.einsum('ni,oij,nj->no', _np(x1), _np(w), _np(x2))
    assert np.allclose(_np(nn.functional.bilinear(x1, x2, w)), want)
    with pytest.raises(RuntimeError, match='bilinear'):
        nn.functional.bilinear(x1, x1, w)


# -- against torch ---------------------------------------------------------------------
torch = pytest.importorskip('torch')
tnn = torch.nn


def _to_tape(sd):
    return {k: tape.tensor(v.detach().numpy().copy()) for k, v in sd.items()}


def _copy_params(tm, pm):
    """torch module ``tm``'s initialised values into tape module ``pm``."""
    pm.load_state_dict(_to_tape(tm.state_dict()))


TOL = {torch.float64: dict(rtol=1e-6, atol=1e-6), torch.float32: dict(rtol=1e-4, atol=1e-5)}
DT = {torch.float64: tape.float64, torch.float32: tape.float32}


def _float(shape, tdt, positive=False):
    a = np.random.default_rng(0).standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.1
    return torch.tensor(a, dtype=tdt)


LAYERS = [
    ('Linear', lambda: tnn.Linear(3, 4), lambda: nn.Linear(3, 4), [(5, 3)]),
    ('Linear-nobias', lambda: tnn.Linear(3, 4, bias=False),
     lambda: nn.Linear(3, 4, bias=False), [(2, 5, 3)]),
    ('Bilinear', lambda: tnn.Bilinear(2, 3, 4), lambda: nn.Bilinear(2, 3, 4), [(5, 2), (5, 3)]),
    ('LayerNorm', lambda: tnn.LayerNorm(4), lambda: nn.LayerNorm(4), [(3, 4)]),
    ('LayerNorm2d', lambda: tnn.LayerNorm((2, 3), elementwise_affine=False),
     lambda: nn.LayerNorm((2, 3), elementwise_affine=False), [(4, 2, 3)]),
    ('Flatten', lambda: tnn.Flatten(), lambda: nn.Flatten(), [(2, 3, 4)]),
    ('Identity', lambda: tnn.Identity(), lambda: nn.Identity(), [(3,)]),
    ('ReLU', lambda: tnn.ReLU(), lambda: nn.ReLU(), [(4, 3)]),
    ('Tanh', lambda: tnn.Tanh(), lambda: nn.Tanh(), [(4, 3)]),
    ('Sigmoid', lambda: tnn.Sigmoid(), lambda: nn.Sigmoid(), [(4, 3)]),
    ('GELU', lambda: tnn.GELU(), lambda: nn.GELU(), [(4, 3)]),
    ('GELU-tanh', lambda: tnn.GELU('tanh'), lambda: nn.GELU('tanh'), [(4, 3)]),
    ('SiLU', lambda: tnn.SiLU(), lambda: nn.SiLU(), [(4, 3)]),
    ('ELU', lambda: tnn.ELU(0.7), lambda: nn.ELU(0.7), [(4, 3)]),
    ('LeakyReLU', lambda: tnn.LeakyReLU(0.2), lambda: nn.LeakyReLU(0.2), [(4, 3)]),
    ('Softplus', lambda: tnn.Softplus(2.0, 1.0), lambda: nn.Softplus(2.0, 1.0), [(4, 3)]),
    ('Softmax', lambda: tnn.Softmax(dim=1), lambda: nn.Softmax(dim=1), [(4, 3)]),
    ('LogSoftmax', lambda: tnn.LogSoftmax(dim=0), lambda: nn.LogSoftmax(dim=0), [(4, 3)]),
    ('Dropout-eval', lambda: tnn.Dropout(0.3).eval(), lambda: nn.Dropout(0.3).eval(), [(4, 3)]),
]


def _compare(tm, pm, t_inputs, tdt, extra_inputs=((), ())):
    """Forward values, input gradients and parameter gradients of tm and pm agree."""
    tol = TOL[tdt]
    p_inputs = [tape.tensor(t.detach().numpy().copy(), requires_grad=t.requires_grad)
                for t in t_inputs]
    t_out = tm(*t_inputs, *extra_inputs[0])
    p_out = pm(*p_inputs, *extra_inputs[1])
    assert p_out.dtype == DT[t_out.dtype]
    np.testing.assert_allclose(_np(p_out), t_out.detach().numpy(), **tol)
    cot = np.random.default_rng(1).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(cot, dtype=t_out.dtype)).sum().backward()
    (p_out * tape.tensor(cot, dtype=p_out.dtype)).sum().backward()
    for ti, pi in zip(t_inputs, p_inputs):
        if ti.requires_grad:
            np.testing.assert_allclose(_np(pi.grad), ti.grad.numpy(), **tol)
    t_named = dict(tm.named_parameters())
    p_named = dict(pm.named_parameters())
    assert list(t_named) == list(p_named)
    for name, tp in t_named.items():
        np.testing.assert_allclose(_np(p_named[name].grad), tp.grad.numpy(), **tol,
                                   err_msg=name)


@pytest.mark.parametrize('tdt', [torch.float64, torch.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('name,tmake,pmake,shapes', LAYERS, ids=[r[0] for r in LAYERS])
def test_layer_matches_torch(name, tmake, pmake, shapes, tdt):
    torch.manual_seed(0)
    tm, pm = tmake().to(tdt), pmake().to(DT[tdt])
    _copy_params(tm, pm)
    inputs = [_float(s, tdt).requires_grad_() for s in shapes]
    _compare(tm, pm, inputs, tdt)
    assert repr(pm) == repr(tm)


def test_embedding_matches_torch():
    torch.manual_seed(0)
    tm = tnn.Embedding(6, 3, padding_idx=1).double()
    pm = nn.Embedding(6, 3, padding_idx=1).double()
    assert not pm.weight[1].any()               # the padding row starts at zero
    _copy_params(tm, pm)
    idx = [[0, 1, 5], [1, 2, 2]]
    t_out = tm(torch.tensor(idx))
    p_out = pm(tape.tensor(idx))
    np.testing.assert_allclose(_np(p_out), t_out.detach().numpy(), rtol=1e-12)
    t_out.pow(2).sum().backward()
    p_out.pow(2).sum().backward()
    np.testing.assert_allclose(_np(pm.weight.grad), tm.weight.grad.numpy(), rtol=1e-12)
    assert repr(pm) == repr(tm) == 'Embedding(6, 3, padding_idx=1)'


LOSSES = [
    ('MSELoss', tnn.MSELoss, nn.MSELoss, {}, 'float'),
    ('L1Loss', tnn.L1Loss, nn.L1Loss, {}, 'float'),
    ('CrossEntropyLoss', tnn.CrossEntropyLoss, nn.CrossEntropyLoss, {}, 'class'),
    ('CrossEntropyLoss-opts', tnn.CrossEntropyLoss, nn.CrossEntropyLoss,
     dict(ignore_index=2, label_smoothing=0.1), 'class'),
    ('NLLLoss', tnn.NLLLoss, nn.NLLLoss, {}, 'class'),
    ('BCELoss', tnn.BCELoss, nn.BCELoss, {}, 'prob'),
    ('BCEWithLogitsLoss', tnn.BCEWithLogitsLoss, nn.BCEWithLogitsLoss, {}, 'binary'),
]


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('tdt', [torch.float64, torch.float32], ids=['f64', 'f32'])
@pytest.mark.parametrize('name,tcls,pcls,kw,kind', LOSSES, ids=[r[0] for r in LOSSES])
def test_loss_matches_torch(name, tcls, pcls, kw, kind, tdt, reduction):
    rng = np.random.default_rng(2)
    x = _float((6, 4), tdt)
    if kind == 'class':
        target = torch.tensor(rng.integers(0, 4, 6))
        if name == 'NLLLoss':
            x = torch.log_softmax(x, 1).detach()
    elif kind == 'prob':
        x = torch.sigmoid(x).detach()
        target = torch.tensor(rng.uniform(0, 1, (6, 4)), dtype=tdt)
    elif kind == 'binary':
        target = torch.tensor(rng.integers(0, 2, (6, 4)), dtype=tdt)
    else:
        target = torch.tensor(rng.standard_normal((6, 4)), dtype=tdt)
    x.requires_grad_()
    tm, pm = tcls(reduction=reduction, **kw), pcls(reduction=reduction, **kw)
    p_target = tape.tensor(target.numpy().copy())
    _compare(tm, pm, [x], tdt, extra_inputs=((target,), (p_target,)))
    assert repr(pm) == repr(tm)


def test_weighted_losses_match_torch_and_keep_weights_as_buffers():
    w = torch.tensor([0.5, 2.0, 1.0, 1.5], dtype=torch.float64)
    pw = tape.tensor(w.numpy().copy())
    x = _float((5, 4), torch.float64).requires_grad_()
    target = torch.tensor([0, 1, 3, 2, 1])
    tm, pm = tnn.CrossEntropyLoss(weight=w), nn.CrossEntropyLoss(weight=pw)
    assert [n for n, _ in pm.named_buffers()] == ['weight'] == list(tm.state_dict())
    _compare(tm, pm, [x], torch.float64, extra_inputs=((target,), (tape.tensor(target.numpy()),)))
    x2 = _float((5, 4), torch.float64).requires_grad_()
    t2 = torch.tensor(np.random.default_rng(3).integers(0, 2, (5, 4)), dtype=torch.float64)
    tm = tnn.BCEWithLogitsLoss(weight=w, pos_weight=w * 2)
    pm = nn.BCEWithLogitsLoss(weight=pw, pos_weight=pw * 2)
    assert list(pm.state_dict()) == list(tm.state_dict()) == ['weight', 'pos_weight']
    _compare(tm, pm, [x2], torch.float64, extra_inputs=((t2,), (tape.tensor(t2.numpy()),)))


class _TBlock(tnn.Module):
    def __init__(self):
        super().__init__()
        self.norm = tnn.LayerNorm(4)
        self.heads = tnn.ModuleList([tnn.Linear(4, 4), tnn.Linear(4, 4)])
        self.gates = tnn.ModuleDict({'g': tnn.Linear(4, 4), 'h': tnn.Sigmoid()})
        self.scale = tnn.Parameter(torch.ones(4))
        self.extra = tnn.ParameterList([tnn.Parameter(torch.full((4,), 0.5))])
        self.register_buffer('offset', torch.full((4,), 0.1))

    def forward(self, x):
        h = self.norm(x)
        for head in self.heads:
            h = torch.tanh(head(h)) + h
        return self.gates['h'](self.gates['g'](h)) * self.scale * self.extra[0] + self.offset


class _PBlock(nn.Module):
    # the same model, written with tape.nn: only the names of the import differ
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.heads = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.gates = nn.ModuleDict({'g': nn.Linear(4, 4), 'h': nn.Sigmoid()})
        self.scale = nn.Parameter(tape.ones(4))
        self.extra = nn.ParameterList([nn.Parameter(tape.full((4,), 0.5))])
        self.register_buffer('offset', tape.full((4,), 0.1))

    def forward(self, x):
        h = self.norm(x)
        for head in self.heads:
            h = tape.tanh(head(h)) + h
        return self.gates['h'](self.gates['g'](h)) * self.scale * self.extra[0] + self.offset


def _models():
    torch.manual_seed(0)
    tm = tnn.Sequential(tnn.Linear(3, 4), tnn.GELU(), _TBlock(),
                        tnn.Sequential(tnn.Dropout(0.2), tnn.Linear(4, 2)))
    pm = nn.Sequential(nn.Linear(3, 4), nn.GELU(), _PBlock(),
                       nn.Sequential(nn.Dropout(0.2), nn.Linear(4, 2)))
    return tm, pm


def test_nested_model_names_order_and_values_match_torch():
    tm, pm = _models()
    assert [n for n, _ in pm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in pm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in pm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    tm.double().eval()
    pm.double().eval()
    _copy_params(tm, pm)
    _compare(tm, pm, [_float((5, 3), torch.float64).requires_grad_()], torch.float64)
    # and back: tape's state_dict loads strictly into torch
    tm.load_state_dict({k: torch.tensor(_np(v)) for k, v in pm.state_dict().items()})


def test_reprs_match_torch():
    tm, pm = _models()
    assert repr(pm).replace('_PBlock', '_TBlock') == repr(tm).replace('torch.float', 'tape.float')
    tl = tnn.ParameterList([tnn.Parameter(torch.zeros(2, 3)),
                            tnn.Parameter(torch.zeros(3, dtype=torch.float64))])
    pl = nn.ParameterList([nn.Parameter(tape.zeros(2, 3)),
                           nn.Parameter(tape.zeros(3, dtype=tape.float64))])
    assert repr(pl) == repr(tl).replace('torch.', 'tape.')
    for tmod, pmod in [(tnn.ModuleList([tnn.Tanh(), tnn.Tanh(), tnn.ReLU(inplace=True)]),
                        nn.ModuleList([nn.Tanh(), nn.Tanh(), nn.ReLU(inplace=True)])),
                       (tnn.ModuleList(), nn.ModuleList()),
                       (tnn.ModuleDict({'a': tnn.SiLU()}), nn.ModuleDict({'a': nn.SiLU()})),
                       (tnn.Dropout(), nn.Dropout()), (tnn.Softmax(), nn.Softmax()),
                       (tnn.ELU(inplace=True), nn.ELU(inplace=True)),
                       (tnn.LeakyReLU(0.2, True), nn.LeakyReLU(0.2, True)),
                       (tnn.LayerNorm(3, bias=False), nn.LayerNorm(3, bias=False)),
                       (tnn.CrossEntropyLoss(), nn.CrossEntropyLoss())]:
        assert repr(pmod) == repr(tmod)
    for data in ([0.0, 1.5], 2.0, [[1.0, 2.0]]):
        tp, pp = tnn.Parameter(torch.tensor(data)), nn.Parameter(tape.tensor(data))
        assert repr(pp) == repr(tp) and str(pp) == str(tp)
    tp = tnn.Parameter(torch.zeros(2), requires_grad=False)
    assert repr(nn.Parameter(tape.zeros(2), requires_grad=False)) == repr(tp)


def test_load_state_dict_messages_match_torch():
    cases = [{'weight': 'z32', 'foo': 'z1'}, {'weight': 'z22', 'bias': 'z3'}, {}]
    shapes = {'z32': (3, 2), 'z1': (1,), 'z22': (2, 2), 'z3': (3,)}
    for case in cases:
        msgs = []
        for mod, lib in ((tnn.Linear(2, 3), torch), (nn.Linear(2, 3), tape)):
            try:
                mod.load_state_dict({k: lib.zeros(*shapes[v]) for k, v in case.items()})
                msgs.append(None)
            except RuntimeError as e:
                msgs.append(str(e).replace('torch.Size', 'tape.Size'))
        assert msgs[0] is not None and msgs[0] == msgs[1]
    res = [m.load_state_dict({'weight': lib.zeros(3, 2), 'foo': lib.zeros(1)}, strict=False)
           for m, lib in ((tnn.Linear(2, 3), torch), (nn.Linear(2, 3), tape))]
    assert repr(res[0]) == repr(res[1])


def test_hook_order_matches_torch():
    def run(lib, mod):
        log = []
        m = mod.Linear(2, 2)

        def pre(tag, ret=None):
            def h(module, args):
                log.append(('pre', tag))
                return ret
            return h

        def post(tag):
            def h(module, args, out):
                log.append(('post', tag, len(args)))
            return h
        m.register_forward_pre_hook(pre('a'))
        m.register_forward_pre_hook(pre('b'), prepend=True)
        hk = m.register_forward_pre_hook(
            lambda module, args, kwargs: log.append(('prekw', sorted(kwargs))), with_kwargs=True)
        m.register_forward_hook(post('x'))
        m.register_forward_hook(post('y'), prepend=True)
        m.register_forward_hook(
            lambda module, args, kwargs, out: log.append(('postkw', tuple(out.shape))),
            with_kwargs=True)
        h = m.register_forward_hook(lambda module, args, out: out * 0 + 7)
        out = m(lib.ones(3, 2))
        log.append(('out', out.sum().item()))
        h.remove()
        hk.remove()
        log.append(('out', m(lib.ones(3, 2)).sum().item() != 42.0))
        return log
    assert run(tape, nn) == run(torch, tnn)


def test_train_eval_flags_match_torch_and_dropout_masks_behave():
    tm, pm = _models()
    tm.eval()
    pm.eval()
    tm[3].train()
    pm[3].train()
    assert [m.training for m in pm.modules()] == [m.training for m in tm.modules()]
    x = tape.ones(400, 4)
    out = _np(pm[3][0](x))
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.8)} and 0.1 < (out == 0).mean() < 0.3
    pm.eval()
    assert np.array_equal(_np(pm[3][0](x)), _np(x))
