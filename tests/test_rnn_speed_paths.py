"""The fast paths of the fused recurrent layers (tape/nn/_rnn.py,
compiler/rnn_kernels.py): a one-layer one-direction module passes its whole
(1, N, H) states to its one fused node (no indexing or stacking around it); a
batch-first sequence is read and written in its own layout (row stride T, no
transposes); float32 layers take their gate activations in float32.  Each is
checked against PyTorch with copied weights (outputs, final states, gradients of
the input, the states and every parameter), in float32 and float64, against
the composite of tape ops, and by gradcheck in float64 on a tiny case."""
import numpy as np
import pytest

import tape
from tape import nn
from tape.nn import _rnn

torch = pytest.importorskip('torch')

TOL = {'float64': 1e-9, 'float32': 2e-5}
KINDS = [('LSTM', {}), ('LSTM', {'proj_size': 3}), ('GRU', {}),
         ('RNN', {'nonlinearity': 'tanh'}), ('RNN', {'nonlinearity': 'relu'})]


def _modules(kind, dtype, **kw):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(**kw).to(getattr(torch, dtype))
    m = getattr(nn, kind)(**kw, dtype=dtype)
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})
    return tm, m


def _states(kind, dtype, n_states, batch, hidden, proj, rng):
    states = [rng.standard_normal((n_states, batch, proj or hidden)).astype(dtype)]
    if kind == 'LSTM':
        states.append(rng.standard_normal((n_states, batch, hidden)).astype(dtype))
    return states


def _run(lib, m, x, states, kind, packed_lengths=None, batch_first=False):
    """Forward, a loss touching every output, backward; returns the outputs and
    the gradients of x, the states and the parameters, as arrays."""
    xt = lib.tensor(x, requires_grad=True)
    st = [lib.tensor(s, requires_grad=True) for s in states]
    hx = None if not st else (tuple(st) if kind == 'LSTM' else st[0])
    inp = xt
    if packed_lengths is not None:
        pack = (torch.nn.utils.rnn.pack_padded_sequence if lib is torch
                else tape.nn.utils.rnn.pack_padded_sequence)
        inp = pack(xt, packed_lengths, batch_first=batch_first, enforce_sorted=False)
    out, h = m(inp, hx)
    if packed_lengths is not None:
        out = out.data
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
    assert len(a) == len(b)
    for i, (u, v) in enumerate(zip(a, b)):
        assert u.shape == v.shape, (i, u.shape, v.shape)
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol, err_msg=f'item {i}')


@pytest.mark.parametrize('kind,extra', KINDS)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('batch_first', [True, False])
@pytest.mark.parametrize('with_h0', [True, False])
def test_single_layer_matches_torch(kind, extra, dtype, batch_first, with_h0):
    """One layer, one direction: the states go to the fused node whole."""
    tm, m = _modules(kind, dtype, input_size=3, hidden_size=5, batch_first=batch_first,
                     **extra)
    rng = np.random.default_rng(1)
    T, N = 6, 4
    x = rng.standard_normal((N, T, 3) if batch_first else (T, N, 3)).astype(dtype)
    states = _states(kind, dtype, 1, N, 5, extra.get('proj_size'), rng) if with_h0 else []
    _close(_run(tape, m, x, states, kind), _run(torch, tm, x, states, kind), TOL[dtype])


@pytest.mark.parametrize('kind,extra', KINDS)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('layers,bidir', [(2, False), (1, True), (2, True)])
def test_batch_first_stacked_matches_torch(kind, extra, dtype, layers, bidir):
    """Batch-first through every layer and direction, with dropout off."""
    tm, m = _modules(kind, dtype, input_size=3, hidden_size=5, batch_first=True,
                     num_layers=layers, bidirectional=bidir, **extra)
    rng = np.random.default_rng(2)
    T, N, D = 5, 3, 2 if bidir else 1
    x = rng.standard_normal((N, T, 3)).astype(dtype)
    states = _states(kind, dtype, layers * D, N, 5, extra.get('proj_size'), rng)
    _close(_run(tape, m, x, states, kind), _run(torch, tm, x, states, kind), TOL[dtype])


@pytest.mark.parametrize('kind,extra', KINDS)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('batch_first', [True, False])
def test_single_layer_packed_matches_torch(kind, extra, dtype, batch_first):
    tm, m = _modules(kind, dtype, input_size=3, hidden_size=4, batch_first=batch_first,
                     **extra)
    rng = np.random.default_rng(3)
    T, N = 5, 4
    x = rng.standard_normal((N, T, 3) if batch_first else (T, N, 3)).astype(dtype)
    states = _states(kind, dtype, 1, N, 4, extra.get('proj_size'), rng)
    lengths = [3, 5, 1, 4]
    _close(_run(tape, m, x, states, kind, lengths, batch_first),
           _run(torch, tm, x, states, kind, lengths, batch_first), TOL[dtype])


@pytest.mark.parametrize('kind,extra', KINDS)
@pytest.mark.parametrize('batch_first,layers', [(True, 1), (False, 1), (True, 2)])
def test_fast_paths_match_composite(monkeypatch, kind, extra, batch_first, layers):
    """The fused node against the composite of tape ops (``_fused_ok`` False), in
    float64 where both are exact to rounding."""
    _, m = _modules(kind, 'float64', input_size=3, hidden_size=4, batch_first=batch_first,
                    num_layers=layers, **extra)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 3) if batch_first else (6, 2, 3))
    states = _states(kind, 'float64', layers, 2, 4, extra.get('proj_size'), rng)

    def run():
        m.zero_grad()
        return _run(tape, m, x, states, kind)
    fused = run()
    with monkeypatch.context() as mp:
        mp.setattr(_rnn, '_fused_ok', lambda x: False)
        comp = run()
    _close(fused, comp, 1e-12)


@pytest.mark.parametrize('kind,extra', KINDS)
@pytest.mark.parametrize('batch_first', [True, False])
def test_single_layer_gradcheck(kind, extra, batch_first):
    """Full-Jacobian gradcheck and gradgradcheck (the create_graph fallback) of the
    output and both final states, through the input and the initial states."""
    tape.manual_seed(0)
    extra = {'proj_size': 2} if 'proj_size' in extra else extra
    m = getattr(nn, kind)(2, 3, batch_first=batch_first, dtype='float64', **extra)
    rng = np.random.default_rng(5)
    x = tape.tensor(rng.standard_normal((2, 3, 2) if batch_first else (3, 2, 2)),
                    requires_grad=True)
    hout = extra.get('proj_size', 3)
    h0 = tape.tensor(rng.standard_normal((1, 2, hout)), requires_grad=True)
    inputs = [x, h0]
    if kind == 'LSTM':
        inputs.append(tape.tensor(rng.standard_normal((1, 2, 3)), requires_grad=True))

    def f(x, h0, *c0):
        out, h = m(x, (h0, c0[0]) if kind == 'LSTM' else h0)
        return (out,) + (tuple(h) if kind == 'LSTM' else (h,))
    assert tape.autograd.gradcheck(f, tuple(inputs))
    assert tape.autograd.gradgradcheck(f, tuple(inputs))


@pytest.mark.parametrize('kind', ['LSTM', 'GRU'])
def test_jit_traces_single_layer_batch_first(kind):
    """Under tape.jit the one-layer batch-first module records its composite."""
    _, m = _modules(kind, 'float64', input_size=3, hidden_size=4, batch_first=True)

    @tape.jit
    def f(x):
        out, h = m(x)
        h = h[0] if kind == 'LSTM' else h
        return out.sum() + (h * h).sum()
    x = tape.randn(2, 5, 3, dtype=tape.float64)
    out, h = m(x)
    h = h[0] if kind == 'LSTM' else h
    eager = out.sum() + (h * h).sum()
    for _ in range(2):
        np.testing.assert_allclose(f(x).item(), eager.item(), rtol=1e-12)


def test_single_layer_state_shapes_and_node():
    """The final states keep their (1, N, H) shape and come from the fused node."""
    m = nn.LSTM(3, 4, batch_first=True)
    out, (h, c) = m(tape.randn(2, 5, 3))
    assert tuple(out.shape) == (2, 5, 4) and tuple(h.shape) == (1, 2, 4)
    assert tuple(c.shape) == (1, 2, 4)
    assert out.grad_fn.name() == h.grad_fn.name() == 'MkldnnRnnLayerBackward0'
    out, h = nn.GRU(3, 4)(tape.randn(5, 2, 3), tape.zeros(1, 2, 4))
    assert tuple(h.shape) == (1, 2, 4) and h.grad_fn.name() == 'MkldnnRnnLayerBackward0'


def test_empty_sequence_raises_batch_first():
    m = nn.GRU(3, 4, batch_first=True)
    with pytest.raises(RuntimeError, match='sequence length to be larger than 0'):
        m(tape.randn(2, 0, 3))


def _ulps(got, exact):
    ref = exact.astype(np.float32)
    d = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(ref)).astype(np.float64)
    d[got == ref] = 0
    return d.max()


def test_float32_activations_are_accurate():
    """The float32 sigmoid and tanh of the step kernels: within 3 ulps of the
    exact values everywhere (subnormal results, both tails, near 0), NaN stays
    NaN, tanh keeps the sign of 0; float64 rows keep the float64 forms."""
    from numba import njit
    from compiler.rnn_kernels import _sigmoid_, _tanh_

    @njit
    def sig(a):
        _sigmoid_(a)

    @njit
    def tanh(a):
        _tanh_(a)
    xs = np.concatenate([np.linspace(-120, 120, 100001), np.geomspace(1e-45, 1, 2000),
                         -np.geomspace(1e-45, 1, 2000), np.linspace(-1, 1, 20001),
                         [0.0, np.inf, -np.inf]]).astype(np.float32)
    x64 = xs.astype(np.float64)
    with np.errstate(over='ignore'):
        exact_sig = 1.0 / (1.0 + np.exp(-x64))
    a = xs.copy()
    sig(a)
    assert _ulps(a, exact_sig) <= 3
    a = xs.copy()
    tanh(a)
    assert _ulps(a, np.tanh(x64)) <= 3
    special = np.array([np.nan, 0.0, -0.0], np.float32)
    s, t = special.copy(), special.copy()
    sig(s)
    tanh(t)
    assert np.isnan(s[0]) and np.isnan(t[0]) and s[1] == s[2] == 0.5
    assert t[1] == 0 and not np.signbit(t[1]) and np.signbit(t[2])
    a = x64.copy()
    sig(a)
    np.testing.assert_allclose(a, exact_sig, rtol=1e-14, atol=0)
