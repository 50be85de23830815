"""The fused recurrent layers of tape/nn/_rnn.py (one ``_FusedLayer`` node per layer
and direction, step kernels in compiler/rnn_kernels.py): against PyTorch, and
against the composite of tape ops they replace (``_composite_layer``), in float32
and float64, with every option; gradients of the input, the states and every
parameter; second order through the create_graph fallback; saved-tensor errors."""
import numpy as np
import pytest

import tape
from tape import nn
from tape.nn import _rnn

torch = pytest.importorskip('torch')

TOL = {'float64': 1e-9, 'float32': 2e-5}


def _modules(kind, dtype, **kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(**kw).to(getattr(torch, dtype))
    m = getattr(nn, kind)(**kw, dtype=dtype)
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})
    return tm, m


def _run(lib, m, x, states, kind):
    """Forward, a loss touching every output, backward; returns the outputs and
    the gradients of x, the states and the parameters, as arrays."""
    xt = lib.tensor(x, requires_grad=True)
    st = [lib.tensor(s, requires_grad=True) for s in states]
    hx = None if not st else (tuple(st) if kind == 'LSTM' else st[0])
    out, h = m(xt, hx)
    finals = list(h) if kind == 'LSTM' else [h]
    rng = np.random.default_rng(7)
    loss = (out * lib.tensor(rng.standard_normal(tuple(out.shape)).astype(x.dtype))).sum()
    for f in finals:
        loss = loss + (f * lib.tensor(rng.standard_normal(tuple(f.shape)).astype(x.dtype))).sum()
    loss.backward()
    arr = lambda t: np.asarray(t.detach().numpy())  # noqa: E731
    res = [arr(out)] + [arr(f) for f in finals] + [arr(xt.grad)] + [arr(s.grad) for s in st]
    res += [arr(p.grad) for _, p in m.named_parameters()]
    return res


def _close(a, b, tol):
    for i, (u, v) in enumerate(zip(a, b)):
        assert u.shape == v.shape, (i, u.shape, v.shape)
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol, err_msg=f'item {i}')


CASES = [
    # kind, extra kwargs
    ('LSTM', {}), ('LSTM', {'proj_size': 3}), ('GRU', {}),
    ('RNN', {'nonlinearity': 'tanh'}), ('RNN', {'nonlinearity': 'relu'}),
]


@pytest.mark.parametrize('kind,extra', CASES)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('layers,bidir,batch_first,with_h0,bias', [
    (1, False, False, False, True), (2, True, True, True, True),
    (1, True, False, True, False), (2, False, True, False, False)])
def test_fused_matches_torch(kind, extra, dtype, layers, bidir, batch_first, with_h0, bias):
    kw = dict(input_size=3, hidden_size=5, num_layers=layers, bidirectional=bidir,
              batch_first=batch_first, bias=bias, **extra)
    tm, m = _modules(kind, dtype, **kw)
    rng = np.random.default_rng(1)
    T, N, D = 6, 3, 2 if bidir else 1
    x = rng.standard_normal((N, T, 3) if batch_first else (T, N, 3)).astype(dtype)
    states = []
    if with_h0:
        states.append(rng.standard_normal((layers * D, N, extra.get('proj_size', 5)))
                      .astype(dtype))
        if kind == 'LSTM':
            states.append(rng.standard_normal((layers * D, N, 5)).astype(dtype))
    _close(_run(tape, m, x, states, kind), _run(torch, tm, x, states, kind), TOL[dtype])


def _both_paths(monkeypatch, fn):
    fused = fn()
    with monkeypatch.context() as mp:
        mp.setattr(_rnn, '_fused_ok', lambda x: False)
        comp = fn()
    return fused, comp


@pytest.mark.parametrize('kind,extra', CASES)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_fused_matches_composite(monkeypatch, kind, extra, dtype):
    kw = dict(input_size=4, hidden_size=6, num_layers=2, bidirectional=True, **extra)
    _, m = _modules(kind, dtype, **kw)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((7, 2, 4)).astype(dtype)
    hout = extra.get('proj_size', 6)
    states = [rng.standard_normal((4, 2, hout)).astype(dtype)]
    if kind == 'LSTM':
        states.append(rng.standard_normal((4, 2, 6)).astype(dtype))

    def run():
        m.zero_grad()
        return _run(tape, m, x, states, kind)
    fused, comp = _both_paths(monkeypatch, run)
    _close(fused, comp, 1e-12 if dtype == 'float64' else 1e-5)


@pytest.mark.parametrize('kind', ['LSTM', 'GRU', 'RNN'])
@pytest.mark.parametrize('bidir', [False, True])
def test_fused_packed_matches_composite_and_torch(monkeypatch, kind, bidir):
    from tape.nn.utils.rnn import pack_padded_sequence
    kw = dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=bidir)
    tm, m = _modules(kind, 'float64', **kw)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4, 3))
    lengths = [3, 5, 1, 4]
    D = 2 if bidir else 1
    h0 = rng.standard_normal((2 * D, 4, 4))
    c0 = rng.standard_normal((2 * D, 4, 4))

    def run(lib, mod):
        xt = lib.tensor(x, requires_grad=True)
        hs = [lib.tensor(h0, requires_grad=True)] + \
            ([lib.tensor(c0, requires_grad=True)] if kind == 'LSTM' else [])
        pack = (torch.nn.utils.rnn.pack_padded_sequence if lib is torch
                else pack_padded_sequence)
        p = pack(xt, lengths, enforce_sorted=False)
        out, h = mod(p, tuple(hs) if kind == 'LSTM' else hs[0])
        finals = list(h) if kind == 'LSTM' else [h]
        loss = (out.data ** 2).sum() + sum((f * f * f).sum() for f in finals)
        loss.backward()
        arr = lambda t: np.asarray(t.detach().numpy())  # noqa
        return [arr(out.data)] + [arr(f) for f in finals] + [arr(xt.grad)] + \
            [arr(s.grad) for s in hs] + [arr(q.grad) for _, q in mod.named_parameters()]

    def run_tape():
        m.zero_grad()
        return run(tape, m)
    fused, comp = _both_paths(monkeypatch, run_tape)
    _close(fused, comp, 1e-12)
    _close(fused, run(torch, tm), 1e-9)


@pytest.mark.parametrize('kind', ['LSTM', 'GRU', 'RNN'])
def test_unbatched_and_cell_free_options(kind):
    tm, m = _modules(kind, 'float64', input_size=3, hidden_size=4, batch_first=True)
    x = np.random.default_rng(4).standard_normal((6, 3))
    _close(_run(tape, m, x, [], kind), _run(torch, tm, x, [], kind), 1e-9)


def test_node_name_and_one_node_per_layer_direction():
    _, m = _modules('LSTM', 'float32', input_size=3, hidden_size=4)
    out, (h, c) = m(tape.randn(5, 2, 3))
    assert out.grad_fn.name() == 'MkldnnRnnLayerBackward0'
    _, m = _modules('GRU', 'float64', input_size=3, hidden_size=4, num_layers=2,
                    bidirectional=True)
    out, h = m(tape.randn(5, 2, 3, dtype=tape.float64))
    text = tape.show_tape(out) if hasattr(tape, 'show_tape') else ''
    if text:
        assert str(text).count('MkldnnRnnLayer') <= 4 + 4     # not one node per step


@pytest.mark.parametrize('kind', ['LSTM', 'GRU', 'RNN'])
def test_second_order_through_fallback(kind):
    """gradgradcheck runs the fused node's backward with create_graph, where it
    recomputes the composite and differentiates that."""
    tape.manual_seed(0)
    kw = {'proj_size': 2} if kind == 'LSTM' else {}
    m = getattr(nn, kind)(2, 3, bidirectional=True, dtype='float64', **kw)
    x = tape.randn(3, 2, 2, dtype=tape.float64, requires_grad=True)
    assert tape.autograd.gradcheck(lambda x: m(x)[0], (x,))
    assert tape.autograd.gradgradcheck(lambda x: m(x)[0], (x,))
    # a gradient penalty against PyTorch: d/dW |d loss / d x|^2
    tm = getattr(torch.nn, kind)(2, 3, bidirectional=True, **kw).double()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    res = []
    for lib, mod in ((tape, m), (torch, tm)):
        xt = lib.tensor(x.detach().numpy(), requires_grad=True)
        out, _ = mod(xt)
        loss = (out ** 2).sum()
        g, = lib.autograd.grad(loss, xt, create_graph=True)
        pen = (g ** 2).sum()
        grads = lib.autograd.grad(pen, list(mod.parameters()))
        res.append([np.asarray(t.detach().numpy()) for t in grads])
    _close(res[0], res[1], 1e-8)


def test_inplace_change_of_saved_weight_raises():
    _, m = _modules('LSTM', 'float64', input_size=3, hidden_size=4)
    out, _ = m(tape.randn(4, 2, 3, dtype=tape.float64, requires_grad=True))
    with tape.no_grad():
        m.weight_hh_l0.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        out.sum().backward()


def test_backward_twice_needs_retain_graph():
    _, m = _modules('GRU', 'float32', input_size=3, hidden_size=4)
    x = tape.randn(4, 2, 3, requires_grad=True)
    out, _ = m(x)
    loss = out.sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)
    with pytest.raises(RuntimeError, match='second time'):
        loss.backward()


def test_no_grad_and_eval_forward_match():
    tm, m = _modules('LSTM', 'float32', input_size=3, hidden_size=4, num_layers=2,
                     dropout=0.5)
    m.eval()
    tm.eval()
    x = np.random.default_rng(5).standard_normal((4, 2, 3)).astype('float32')
    with tape.no_grad():
        out, _ = m(tape.tensor(x))
    assert out.grad_fn is None
    np.testing.assert_allclose(out.numpy(), tm(torch.tensor(x))[0].detach().numpy(),
                               rtol=2e-5, atol=2e-5)


def test_only_some_inputs_need_grad():
    """needs_input_grad: gradients for the weights only, or for x only."""
    _, m = _modules('LSTM', 'float64', input_size=3, hidden_size=4, proj_size=2)
    x = np.random.default_rng(6).standard_normal((4, 2, 3))
    for p in m.parameters():
        p.requires_grad_(False)
    xt = tape.tensor(x, requires_grad=True)
    m(xt)[0].sum().backward()
    assert xt.grad is not None and all(p.grad is None for p in m.parameters())
    for p in m.parameters():
        p.requires_grad_(True)
    m(tape.tensor(x))[0].sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_step_kernels_tanh_is_accurate():
    from numba import njit
    from compiler.rnn_kernels import _tanh

    @njit
    def apply(a, out):
        for i in range(a.shape[0]):
            out[i] = _tanh(a[i])
    xs = np.concatenate([np.linspace(-30, 30, 20001), np.geomspace(1e-300, 1, 200),
                         -np.geomspace(1e-300, 1, 200), [0.0, np.inf, -np.inf]])
    out = np.empty_like(xs)
    apply(xs, out)
    np.testing.assert_allclose(out, np.tanh(xs), rtol=1e-14, atol=0)
    nan = np.empty(1)
    apply(np.array([np.nan]), nan)
    assert np.isnan(nan[0])


@pytest.mark.parametrize('kind', ['LSTM', 'GRU'])
def test_jit_traces_the_composite(kind):
    """Under tape.jit the layer records its composite (replayable ops), and the
    traced function agrees with eager."""
    _, m = _modules(kind, 'float64', input_size=3, hidden_size=4)

    @tape.jit
    def f(x):
        return m(x)[0].sum()
    x = tape.randn(4, 2, 3, dtype=tape.float64)
    eager = m(x)[0].sum()
    np.testing.assert_allclose(f(x).item(), eager.item(), rtol=1e-12)
    np.testing.assert_allclose(f(x).item(), eager.item(), rtol=1e-12)
