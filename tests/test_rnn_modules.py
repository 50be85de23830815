"""Recurrent layers (tape/nn/_rnn.py) and the further modules of tape/nn/_more_modules.py,
checked against PyTorch: torch's initialised parameters are copied into tape's modules
(load_state_dict of tape tensors made from torch's values), then outputs, final states
and every parameter and input gradient are compared."""
import itertools
import math
import warnings

import numpy as np
import pytest

import tape
from tape import nn

torch = pytest.importorskip('torch')

TOL = {'float64': 1e-8, 'float32': 1e-5}


def _np(t):
    return np.asarray(t.detach().numpy())


def _copy_params(tm, m):
    """Load torch module ``tm``'s state into tape module ``m``."""
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})


def _close(a, b, tol, what=''):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _pair(kind, dtype='float64', **kw):
    """A torch module of ``kind`` (RNN/LSTM/GRU or a cell) and the tape module with its
    parameters, both in ``dtype``."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(**kw).to(getattr(torch, dtype))
    m = getattr(nn, kind)(**kw, dtype=dtype)
    _copy_params(tm, m)
    return tm, m


def _compare_run(kind, dtype, layers, bidir, batch_first, with_h0, bias, nonlin='tanh',
                 batched=True, proj_size=0, seed=1):
    kw = dict(input_size=3, hidden_size=4, num_layers=layers, bias=bias,
              batch_first=batch_first, bidirectional=bidir)
    if kind == 'RNN':
        kw['nonlinearity'] = nonlin
    if proj_size:
        kw['proj_size'] = proj_size
    tm, m = _pair(kind, dtype, **kw)
    rng = np.random.default_rng(seed)
    T, N, D = 5, 2, 2 if bidir else 1
    hout = proj_size or 4
    xs = (N, T, 3) if batch_first else (T, N, 3)
    if not batched:
        xs = (T, 3)
    x = rng.standard_normal(xs).astype(dtype)
    hshape = (layers * D, N) if batched else (layers * D,)
    states = []
    if with_h0:
        states.append(rng.standard_normal(hshape + (hout,)).astype(dtype))
        if kind == 'LSTM':
            states.append(rng.standard_normal(hshape + (4,)).astype(dtype))

    tx = torch.tensor(x, requires_grad=True)
    gx = tape.tensor(x, requires_grad=True)
    ts = [torch.tensor(s, requires_grad=True) for s in states]
    gs = [tape.tensor(s, requires_grad=True) for s in states]

    def hx(ss):
        if not ss:
            return None
        return tuple(ss) if kind == 'LSTM' else ss[0]

    tout, th = tm(tx, hx(ts))
    out, h = m(gx, hx(gs))
    touts = [tout] + (list(th) if kind == 'LSTM' else [th])
    outs = [out] + (list(h) if kind == 'LSTM' else [h])
    tol = TOL[dtype]
    for k, (a, b) in enumerate(zip(outs, touts)):
        _close(_np(a), b.detach().numpy(), tol, f'output {k}')
    # random weights on every output, so that every gradient path is exercised
    ws = [rng.standard_normal(tuple(b.shape)).astype(dtype) for b in touts]
    tl = sum((b * torch.tensor(w)).sum() for b, w in zip(touts, ws))
    gl = sum((a * tape.tensor(w)).sum() for a, w in zip(outs, ws))
    tl.backward()
    gl.backward()
    tparams = dict(tm.named_parameters())
    names = [n for n, _ in m.named_parameters()]
    assert names == list(tparams)
    for n, p in m.named_parameters():
        _close(_np(p.grad), tparams[n].grad.numpy(), tol, n)
    _close(_np(gx.grad), tx.grad.numpy(), tol, 'input')
    for k, (g, t) in enumerate(zip(gs, ts)):
        _close(_np(g.grad), t.grad.numpy(), tol, f'state {k}')


COMBOS = list(itertools.product([1, 2], [False, True], [False, True], [False, True],
                                [True, False]))


@pytest.mark.parametrize('layers,bidir,batch_first,with_h0,bias', COMBOS)
@pytest.mark.parametrize('kind,nonlin', [('RNN', 'tanh'), ('RNN', 'relu'), ('LSTM', None),
                                         ('GRU', None)])
def test_recurrent_matches_torch_float64(kind, nonlin, layers, bidir, batch_first, with_h0,
                                         bias):
    _compare_run(kind, 'float64', layers, bidir, batch_first, with_h0, bias, nonlin)


@pytest.mark.parametrize('kind', ['RNN', 'LSTM', 'GRU'])
@pytest.mark.parametrize('layers,bidir,batch_first,with_h0,bias',
                         [(2, True, True, True, True), (1, False, False, False, False),
                          (2, False, True, False, True)])
def test_recurrent_matches_torch_float32(kind, layers, bidir, batch_first, with_h0, bias):
    _compare_run(kind, 'float32', layers, bidir, batch_first, with_h0, bias)


@pytest.mark.parametrize('kind', ['RNN', 'LSTM', 'GRU'])
@pytest.mark.parametrize('batch_first,with_h0,bidir', [(False, True, True), (True, False, False),
                                                       (True, True, False)])
def test_unbatched_input(kind, batch_first, with_h0, bidir):
    _compare_run(kind, 'float64', 2, bidir, batch_first, with_h0, True, batched=False)


@pytest.mark.parametrize('bidir,with_h0,layers', [(False, False, 1), (True, True, 2)])
def test_lstm_proj_size(bidir, with_h0, layers):
    _compare_run('LSTM', 'float64', layers, bidir, True, with_h0, True, proj_size=2)


# -- structure: names, reprs, init ------------------------------------------------------
REPR_CASES = [
    ('RNN', dict(input_size=3, hidden_size=4)),
    ('RNN', dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity='relu', bias=False,
                 batch_first=True, dropout=0.5, bidirectional=True)),
    ('LSTM', dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True)),
    ('LSTM', dict(input_size=3, hidden_size=4, proj_size=2, bias=False)),
    ('GRU', dict(input_size=5, hidden_size=2, num_layers=3, dropout=0.25, batch_first=True)),
    ('RNNCell', dict(input_size=3, hidden_size=4)),
    ('RNNCell', dict(input_size=3, hidden_size=4, bias=False, nonlinearity='relu')),
    ('LSTMCell', dict(input_size=3, hidden_size=4, bias=False)),
    ('GRUCell', dict(input_size=3, hidden_size=4)),
]


@pytest.mark.parametrize('kind,kw', REPR_CASES)
def test_repr_names_shapes_match_torch(kind, kw):
    tm = getattr(torch.nn, kind)(**kw)
    m = getattr(nn, kind)(**kw)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert repr(nn.Sequential(m)) == repr(torch.nn.Sequential(tm))


@pytest.mark.parametrize('kind,kw', REPR_CASES)
def test_init_range_and_seed(kind, kw):
    tape.manual_seed(3)
    m = getattr(nn, kind)(**kw)
    bound = 1 / math.sqrt(kw['hidden_size'])
    allv = np.concatenate([_np(p).ravel() for p in m.parameters()])
    assert np.all(np.abs(allv) <= bound)
    # uniform over the whole range, not a constant or a narrower one
    assert allv.max() > 0.8 * bound and allv.min() < -0.8 * bound
    assert abs(allv.mean()) < 0.25 * bound
    for p in m.parameters():
        assert len(np.unique(_np(p))) == p.numel()
    tape.manual_seed(3)
    again = getattr(nn, kind)(**kw)
    for p, q in zip(m.parameters(), again.parameters()):
        assert np.array_equal(_np(p), _np(q))
    tape.manual_seed(4)
    other = getattr(nn, kind)(**kw)
    assert not np.array_equal(_np(next(m.parameters())), _np(next(other.parameters())))


def test_constructor_errors_match_torch():
    cases = [dict(input_size=3, hidden_size=0), dict(input_size=3, hidden_size=4, num_layers=0),
             dict(input_size=3, hidden_size=4, dropout=1.5),
             dict(input_size=3, hidden_size=4, bias=1),
             dict(input_size=3, hidden_size=4, proj_size=4)]
    for kw in cases:
        with pytest.raises(Exception) as te:
            torch.nn.LSTM(**kw)
        with pytest.raises(type(te.value), match=None) as ge:
            nn.LSTM(**kw)
        assert str(ge.value) == str(te.value)
    for cls in ('RNN', 'GRU'):
        with pytest.raises(ValueError, match='proj_size argument is only supported'):
            getattr(nn, cls)(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, 1, 'gelu')
    with pytest.warns(UserWarning, match='non-zero dropout expects num_layers greater than 1'):
        nn.GRU(3, 4, dropout=0.5)


def test_forward_errors_match_torch():
    tm, m = _pair('LSTM', input_size=3, hidden_size=4)
    bad = [((np.zeros((5, 2, 4)),), RuntimeError),          # input size
           ((np.zeros((5,)),), ValueError),                   # 1-D input
           ((np.zeros((5, 2, 3)), (np.zeros((1, 3, 4)), np.zeros((1, 2, 4)))), RuntimeError),
           ((np.zeros((5, 3)), (np.zeros((1, 1, 4)), np.zeros((1, 1, 4)))), RuntimeError)]
    for args, exc in bad:
        tin = [torch.tensor(args[0])] + ([tuple(torch.tensor(s) for s in args[1])]
                                         if len(args) > 1 else [])
        gin = [tape.tensor(args[0])] + ([tuple(tape.tensor(s) for s in args[1])]
                                        if len(args) > 1 else [])
        with pytest.raises(exc) as te:
            tm(*tin)
        with pytest.raises(exc) as ge:
            m(*gin)
        assert str(ge.value) == str(te.value)
    with pytest.raises(ValueError, match='does not match weight dtype'):
        m(tape.zeros(5, 2, 3, dtype=tape.float32))


# -- dropout between layers ------------------------------------------------------------
def test_dropout_between_layers():
    kw = dict(input_size=3, hidden_size=4, num_layers=2, dropout=0.5)
    tm, m = _pair('GRU', **kw)
    x = np.random.default_rng(0).standard_normal((6, 2, 3))
    # eval: no dropout, equal to torch
    tm.eval()
    m.eval()
    _close(_np(m(tape.tensor(x))[0]), tm(torch.tensor(x))[0].detach().numpy(), 1e-8)
    ev = _np(m(tape.tensor(x))[0])
    m.train()
    tape.manual_seed(0)
    a = _np(m(tape.tensor(x))[0])
    tape.manual_seed(0)
    b = _np(m(tape.tensor(x))[0])
    assert np.array_equal(a, b)              # drawn from tape's generator
    assert not np.allclose(a, ev)            # and applied in training
    # the last layer's output is not dropped: no exact zeros in it
    assert np.count_nonzero(a == 0) == 0
    # p = 1 drops the first layer's whole output in both libraries: deterministic
    kw['dropout'] = 1.0
    tm, m = _pair('LSTM', **kw)
    tm.train()
    m.train()
    tx = torch.tensor(x, requires_grad=True)
    gx = tape.tensor(x, requires_grad=True)
    tout, _ = tm(tx)
    out, _ = m(gx)
    _close(_np(out), tout.detach().numpy(), 1e-8)
    out.sum().backward()
    tout.sum().backward()
    _close(_np(gx.grad), tx.grad.numpy(), 1e-8)
    for n, p in m.named_parameters():
        _close(_np(p.grad), dict(tm.named_parameters())[n].grad.numpy(), 1e-8, n)
    # a single layer has no dropout at all, even in training
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tm1, m1 = _pair('RNN', input_size=3, hidden_size=4, dropout=0.9)
    _close(_np(m1(tape.tensor(x))[0]), tm1(torch.tensor(x))[0].detach().numpy(), 1e-8)


# -- cells ------------------------------------------------------------------------------
@pytest.mark.parametrize('kind,nonlin', [('RNNCell', 'tanh'), ('RNNCell', 'relu'),
                                         ('LSTMCell', None), ('GRUCell', None)])
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('batched', [True, False])
@pytest.mark.parametrize('with_h', [True, False])
@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_cells_match_torch(kind, nonlin, bias, batched, with_h, dtype):
    kw = dict(input_size=3, hidden_size=4, bias=bias)
    if nonlin:
        kw['nonlinearity'] = nonlin
    tm, m = _pair(kind, dtype, **kw)
    rng = np.random.default_rng(2)
    lead = (2,) if batched else ()
    x = rng.standard_normal(lead + (3,)).astype(dtype)
    nstates = 2 if kind == 'LSTMCell' else 1
    states = [rng.standard_normal(lead + (4,)).astype(dtype) for _ in range(nstates)] \
        if with_h else []
    tx, gx = torch.tensor(x, requires_grad=True), tape.tensor(x, requires_grad=True)
    ts = [torch.tensor(s, requires_grad=True) for s in states]
    gs = [tape.tensor(s, requires_grad=True) for s in states]

    def hx(ss):
        if not ss:
            return None
        return tuple(ss) if kind == 'LSTMCell' else ss[0]

    tout, out = tm(tx, hx(ts)), m(gx, hx(gs))
    touts = list(tout) if kind == 'LSTMCell' else [tout]
    outs = list(out) if kind == 'LSTMCell' else [out]
    tol = TOL[dtype]
    ws = [rng.standard_normal(tuple(t.shape)).astype(dtype) for t in touts]
    for a, b in zip(outs, touts):
        _close(_np(a), b.detach().numpy(), tol)
    sum((b * torch.tensor(w)).sum() for b, w in zip(touts, ws)).backward()
    sum((a * tape.tensor(w)).sum() for a, w in zip(outs, ws)).backward()
    tp = dict(tm.named_parameters())
    for n, p in m.named_parameters():
        _close(_np(p.grad), tp[n].grad.numpy(), tol, n)
    _close(_np(gx.grad), tx.grad.numpy(), tol)
    for g, t in zip(gs, ts):
        _close(_np(g.grad), t.grad.numpy(), tol)


@pytest.mark.parametrize('kind', ['LSTMCell', 'GRUCell', 'RNNCell'])
def test_cell_second_order_matches_torch(kind):
    """A gradient penalty: d/dparams of |d loss / d x|^2, through create_graph."""
    tm, m = _pair(kind, input_size=3, hidden_size=4)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3))
    h = rng.standard_normal((2, 4))
    tx, gx = torch.tensor(x, requires_grad=True), tape.tensor(x, requires_grad=True)
    th, gh = torch.tensor(h, requires_grad=True), tape.tensor(h, requires_grad=True)
    targ = (th, th * 0.5) if kind == 'LSTMCell' else th
    garg = (gh, gh * 0.5) if kind == 'LSTMCell' else gh
    tout, out = tm(tx, targ), m(gx, garg)
    tl = (tout[0] * tout[1]).sum() if kind == 'LSTMCell' else (tout ** 3).sum()
    gl = (out[0] * out[1]).sum() if kind == 'LSTMCell' else (out ** 3).sum()
    tgx, tgh = torch.autograd.grad(tl, (tx, th), create_graph=True)
    ggx, ggh = tape.autograd.grad(gl, (gx, gh), create_graph=True)
    _close(_np(ggx), tgx.detach().numpy(), 1e-8)
    _close(_np(ggh), tgh.detach().numpy(), 1e-8)
    ((tgx ** 2).sum() + (tgh ** 2).sum()).backward()
    ((ggx ** 2).sum() + (ggh ** 2).sum()).backward()
    tp = dict(tm.named_parameters())
    for n, p in m.named_parameters():
        assert np.abs(tp[n].grad.numpy()).max() > 0
        _close(_np(p.grad), tp[n].grad.numpy(), 1e-8, n)
    _close(_np(gx.grad), tx.grad.numpy(), 1e-8)


@pytest.mark.parametrize('kind', ['LSTMCell', 'GRUCell'])
def test_cell_gradcheck(kind):
    tape.manual_seed(0)
    m = getattr(nn, kind)(2, 3, dtype='float64')
    rng = np.random.default_rng(1)
    x = tape.tensor(rng.standard_normal((2, 2)), requires_grad=True)
    h = tape.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    params = list(m.parameters())

    def fn(x, h, *ps):
        for name, p in zip([n for n, _ in m.named_parameters()], ps):
            m._parameters[name] = p
        out = m(x, (h, h * 0.3)) if kind == 'LSTMCell' else m(x, h)
        return out[0] * out[1] if kind == 'LSTMCell' else out

    try:
        assert tape.autograd.gradcheck(fn, (x, h, *params))
        assert tape.autograd.gradgradcheck(fn, (x, h, *params))
    finally:
        for (name, _), p in zip(list(m.named_parameters()), params):
            m._parameters[name] = p


def test_sequence_model_trains_like_torch():
    """LSTM + Linear on the last step, SGD: tape's losses are torch's, step by step."""
    class Model:
        def __init__(self, lib):
            self.rnn = lib.nn.LSTM(3, 5, num_layers=2, batch_first=True)
            self.head = lib.nn.Linear(5, 1)
            self.seq = lib.nn.Sequential(self.rnn, self.head)  # one parameter list

        def __call__(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    torch.manual_seed(0)
    tm = Model(torch)
    tm.seq.double()
    gm = Model(tape)
    gm.seq.double()
    _copy_params(tm.seq, gm.seq)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, 3))
    y = rng.standard_normal((4, 1))
    topt = torch.optim.SGD(tm.seq.parameters(), lr=0.5, momentum=0.9)
    gopt = tape.optim.SGD(gm.seq.parameters(), lr=0.5, momentum=0.9)
    tl, gl = [], []
    for _ in range(6):
        topt.zero_grad()
        gopt.zero_grad()
        lt = torch.nn.functional.mse_loss(tm(torch.tensor(x)), torch.tensor(y))
        lg = nn.functional.mse_loss(gm(tape.tensor(x)), tape.tensor(y))
        lt.backward()
        lg.backward()
        topt.step()
        gopt.step()
        tl.append(lt.item())
        gl.append(lg.item())
    np.testing.assert_allclose(gl, tl, rtol=1e-9, atol=1e-12)
    assert tl[-1] < tl[0]                    # it did learn


def test_rnn_state_dict_round_trip_and_all_weights():
    tm, m = _pair('GRU', input_size=3, hidden_size=2, num_layers=2, bidirectional=True)
    sd = m.state_dict()
    m2 = nn.GRU(3, 2, num_layers=2, bidirectional=True, dtype='float64')
    m2.load_state_dict(sd)
    x = tape.tensor(np.random.default_rng(0).standard_normal((4, 1, 3)))
    _close(_np(m2(x)[0]), _np(m(x)[0]), 0)
    assert [[tuple(w.shape) for w in ws] for ws in m.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]


def test_zero_length_sequence_not_silently_wrong():
    # PyTorch rejects an empty sequence; so do we (no output of garbage shape)
    tm, m = _pair('RNN', input_size=3, hidden_size=4)
    for bf in (False, True):
        tm.batch_first = m.batch_first = bf
        shape = (2, 0, 3) if bf else (0, 2, 3)
        with pytest.raises(RuntimeError) as te:
            tm(torch.zeros(shape, dtype=torch.float64))
        with pytest.raises(RuntimeError) as ge:
            m(tape.zeros(shape, dtype=tape.float64))
        assert str(ge.value) == str(te.value)


# -- the further modules ------------------------------------------------------------------
def _check_module(tm, m, inputs, tol=1e-8, copy=True):
    if copy:
        _copy_params(tm, m)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    tin = [torch.tensor(a, requires_grad=a.dtype.kind == 'f') for a in inputs]
    gin = [tape.tensor(a, requires_grad=a.dtype.kind == 'f') for a in inputs]
    tout, out = tm(*tin), m(*gin)
    _close(_np(out), tout.detach().numpy(), tol)
    w = np.random.default_rng(9).standard_normal(tuple(tout.shape))
    (tout * torch.tensor(w)).sum().backward()
    (out * tape.tensor(w)).sum().backward()
    for a, b in zip(gin, tin):
        if b.requires_grad:
            _close(_np(a.grad), b.grad.numpy(), tol)
    tp = dict(tm.named_parameters())
    for n, p in m.named_parameters():
        _close(_np(p.grad), tp[n].grad.numpy(), tol, n)


def test_group_norm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6, 4, 2))
    for kw in (dict(), dict(affine=False), dict(bias=False), dict(eps=1e-3)):
        tm = torch.nn.GroupNorm(3, 6, **kw).double()
        m = nn.GroupNorm(3, 6, dtype='float64', **kw)
        # default init (ones, zeros) equals torch's without copying
        for (n, p), (_, q) in zip(m.named_parameters(), tm.named_parameters()):
            assert np.array_equal(_np(p), q.detach().numpy()), n
        if kw.get('affine', True):
            with torch.no_grad():
                for p in tm.parameters():
                    p.add_(torch.randn(p.shape, dtype=p.dtype))
        _check_module(tm, m, [x])
    with pytest.raises(ValueError, match=r'num_channels \(5\) must be divisible by num_groups'):
        nn.GroupNorm(2, 5)


def test_prelu():
    rng = np.random.default_rng(0)
    tm, m = torch.nn.PReLU().double(), nn.PReLU(dtype='float64')
    assert _np(m.weight).tolist() == [0.25]
    _check_module(tm, m, [rng.standard_normal((3, 4))])
    tm, m = torch.nn.PReLU(4, init=0.1).double(), nn.PReLU(4, init=0.1, dtype='float64')
    with torch.no_grad():
        tm.weight.copy_(torch.tensor([0.1, -0.2, 0.3, 0.5]))
    _check_module(tm, m, [rng.standard_normal((3, 4, 5))])


def test_unflatten():
    x = np.random.default_rng(0).standard_normal((2, 12, 3))
    _check_module(torch.nn.Unflatten(1, (3, 4)), nn.Unflatten(1, (3, 4)), [x])
    _check_module(torch.nn.Unflatten(-1, (3, 1)), nn.Unflatten(-1, (3, 1)), [x])
    with pytest.raises(TypeError, match='unflattened_size must be tuple of ints'):
        nn.Unflatten(1, (3, 4.0))
    with pytest.raises(TypeError, match='unflattened_size must be a tuple of ints'):
        nn.Unflatten(1, 12)


def test_parameter_dict():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    b = np.zeros(2)
    tpd = torch.nn.ParameterDict({'z': torch.nn.Parameter(torch.tensor(a)),
                                  'b': torch.tensor(b)})
    pd = nn.ParameterDict({'z': nn.Parameter(tape.tensor(a)), 'b': tape.tensor(b)})
    assert repr(pd) == repr(tpd)
    assert list(pd.keys()) == list(tpd.keys()) == ['b', 'z']      # a plain dict: sorted
    assert list(pd.state_dict()) == list(tpd.state_dict())
    assert all(isinstance(p, nn.Parameter) for p in pd.values())
    assert [n for n, _ in pd.named_parameters()] == [n for n, _ in tpd.named_parameters()]
    pd['c'] = tape.ones(1)
    assert 'c' in pd and len(pd) == 3 and isinstance(pd['c'], nn.Parameter)
    assert pd.pop('c').tolist() == [1.0] and 'c' not in pd
    assert pd.get('missing') is None
    from collections import OrderedDict
    od = nn.ParameterDict(OrderedDict([('y', tape.ones(1)), ('x', tape.ones(2))]))
    assert list(od) == ['y', 'x']                                 # an OrderedDict keeps order
    model = nn.Module()
    model.params = od
    assert list(model.state_dict()) == ['params.y', 'params.x']
    with pytest.raises(TypeError, match='cannot be used as a key'):
        od[1]
    with pytest.raises(RuntimeError, match='ParameterDict should not be called'):
        od(1)
    k, v = od.popitem()
    assert k == 'x' and list(od) == ['y']
    od.clear()
    assert len(od) == 0 and list(od.parameters()) == []


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_regression_losses(reduction):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 5)) * 2, rng.standard_normal((4, 5)) * 2
    for beta in (1.0, 0.5):
        _check_module(torch.nn.SmoothL1Loss(reduction=reduction, beta=beta),
                      nn.SmoothL1Loss(reduction=reduction, beta=beta), [x, y])
    for delta in (1.0, 0.3):
        _check_module(torch.nn.HuberLoss(reduction=reduction, delta=delta),
                      nn.HuberLoss(reduction=reduction, delta=delta), [x, y])


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none', 'batchmean'])
@pytest.mark.parametrize('log_target', [False, True])
def test_kl_div_loss(reduction, log_target):
    rng = np.random.default_rng(0)
    inp = np.log(rng.dirichlet(np.ones(5), size=4))
    tgt = rng.dirichlet(np.ones(5), size=4)
    if log_target:
        tgt = np.log(tgt)
    _check_module(torch.nn.KLDivLoss(reduction=reduction, log_target=log_target),
                  nn.KLDivLoss(reduction=reduction, log_target=log_target), [inp, tgt])


def test_similarity_and_distance():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    _check_module(torch.nn.CosineSimilarity(), nn.CosineSimilarity(), [a, b])
    _check_module(torch.nn.CosineSimilarity(dim=0, eps=1e-6),
                  nn.CosineSimilarity(dim=0, eps=1e-6), [a, b])
    for kw in (dict(), dict(p=1.0), dict(p=3.0, keepdim=True), dict(eps=0.1)):
        _check_module(torch.nn.PairwiseDistance(**kw), nn.PairwiseDistance(**kw), [a, b])


@pytest.mark.parametrize('name,kw', [('Softsign', {}), ('Hardtanh', {}),
                                     ('Hardtanh', dict(min_val=-0.5, max_val=2.0)),
                                     ('ReLU6', {}), ('ReLU6', dict(inplace=True)),
                                     ('Hardsigmoid', {}), ('Hardswish', {}), ('Mish', {}),
                                     ('Mish', dict(inplace=True))])
def test_activations(name, kw):
    # values away from the kinks, where the one-sided derivatives differ
    x = np.random.default_rng(0).uniform(-8, 8, (5, 7))
    x = x[np.all(np.abs(x[..., None] - np.array([-3, -1, -0.5, 0, 1, 2, 3, 6])) > 1e-3,
                 axis=-1)]
    tm, m = getattr(torch.nn, name)(**kw), getattr(nn, name)(**kw)
    assert repr(m) == repr(tm)
    if kw.get('inplace'):
        kw = {k: v for k, v in kw.items() if k != 'inplace'}
        tm, m = getattr(torch.nn, name)(**kw), getattr(nn, name)(**kw)
    _check_module(tm, m, [x])


def test_hardtanh_bounds_error():
    with pytest.raises(AssertionError, match=r'max_val \(0\) must be greater than min_val'):
        nn.Hardtanh(1, 0)


def test_get_buffer():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    tmodel = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    assert model.get_buffer('1.running_mean') is model[1].running_mean
    assert model.get_buffer('1.num_batches_tracked') is model[1].num_batches_tracked
    for target in ('1.nothing', '0.weight', '2.x'):
        with pytest.raises(AttributeError) as te:
            tmodel.get_buffer(target)
        with pytest.raises(AttributeError) as ge:
            model.get_buffer(target)
        assert str(ge.value) == str(te.value)
