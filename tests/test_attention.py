"""MultiheadAttention and the Transformer modules (tape/nn/_attention.py), checked
against PyTorch: torch's initialised state is copied into tape's modules
(load_state_dict of tape tensors made from torch's values), then outputs,
attention weights and the gradients of the inputs and of every parameter are
compared."""
import warnings

import numpy as np
import pytest

import tape
from tape import nn
import tape.nn.functional as F

torch = pytest.importorskip('torch')

TOL = {'float64': 1e-9, 'float32': 2e-5}


def _np(t):
    return np.asarray(t.detach().numpy())


def _copy_params(tm, m):
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})


def _close(a, b, tol, what=''):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _pair(torch_cls, tape_cls, dtype, *args, **kw):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')        # torch's enable_nested_tensor note
        tm = torch_cls(*args, **kw).to(getattr(torch, dtype))
    m = tape_cls(*args, **kw, dtype=dtype)
    assert list(m.state_dict()) == list(tm.state_dict())
    _copy_params(tm, m)
    return tm, m


def _check_grads(tm, m, touts, outs, tins, ins, rng, tol):
    """Backward a random weighting of the outputs in both libraries; compare the
    gradients of every parameter and every input."""
    ws = [rng.standard_normal(tuple(b.shape)) for b in touts]
    tl = sum((b * torch.tensor(w, dtype=b.dtype)).sum() for b, w in zip(touts, ws))
    gl = sum((a * tape.tensor(w.astype(np.dtype(str(a.dtype))))).sum()
             for a, w in zip(outs, ws))
    tl.backward()
    gl.backward()
    tparams = dict(tm.named_parameters())
    names = [n for n, _ in m.named_parameters()]
    assert names == list(tparams)
    for n, p in m.named_parameters():
        assert p.grad is not None, n
        _close(_np(p.grad), tparams[n].grad.numpy(), tol, n)
    for k, (g, t) in enumerate(zip(ins, tins)):
        if t.requires_grad:
            _close(_np(g.grad), t.grad.numpy(), tol, f'input {k}')


def _masks(kind, rng, N, H, L, S, batched=True):
    """(key_padding_mask, attn_mask) as numpy arrays for one mask ``kind``;
    no query has every key masked."""
    kpm = am = None
    if 'kpm' in kind:
        kpm = np.zeros((N, S), bool)
        kpm[-1, S - 2:] = True                 # pad the last batch element's tail
        if not batched:
            kpm = kpm[-1]
    if 'am2' in kind:
        am = np.triu(np.ones((L, S), bool), 1 + S - L)
    if 'am3' in kind:
        am = rng.random(((N if batched else 1) * H, L, S)) < 0.3
        am[..., 0] = False
    if 'float' in kind:
        def fl(m):
            if m is None:
                return None
            f = rng.standard_normal(m.shape) * 0.5
            f[m] = -np.inf
            return f
        kpm, am = fl(kpm), fl(am)
    return kpm, am


MHA_CASES = [
    # (constructor kwargs, mask kind, call kwargs, attention kind)
    (dict(), '', dict(), 'self'),
    (dict(batch_first=True), 'kpm', dict(), 'self'),
    (dict(), 'kpm am2', dict(average_attn_weights=False), 'cross'),
    (dict(batch_first=True), 'kpm am3 float', dict(), 'cross'),
    (dict(), 'am3', dict(need_weights=False), 'self'),
    (dict(batch_first=True), 'kpm am2 float', dict(need_weights=False), 'cross'),
    (dict(kdim=5, vdim=3), 'kpm am2', dict(), 'sep'),
    (dict(kdim=5, vdim=3, batch_first=True, bias=False), 'am3 float',
     dict(need_weights=False), 'sep'),
    (dict(add_bias_kv=True), 'kpm am2', dict(), 'cross'),
    (dict(add_zero_attn=True, batch_first=True), 'kpm am3', dict(need_weights=False), 'self'),
    (dict(add_bias_kv=True, add_zero_attn=True, kdim=5, vdim=3), 'kpm float', dict(), 'sep'),
    (dict(bias=False), 'am2', dict(need_weights=False, is_causal=True), 'self'),
    (dict(), 'am2', dict(is_causal=True), 'self'),
    (dict(dropout=0.5, batch_first=True), 'kpm', dict(), 'cross'),   # (run in eval mode)
    (dict(), 'unbatched kpm am3', dict(average_attn_weights=False), 'cross'),
    (dict(add_bias_kv=True, add_zero_attn=True), 'unbatched am2 float',
     dict(need_weights=False), 'self'),
]


def _run_mha(ctor, kind, call, attn, dtype, seed=1):
    E, H = 8, 2
    tm, m = _pair(torch.nn.MultiheadAttention, nn.MultiheadAttention, dtype, E, H, **ctor)
    if ctor.get('dropout'):
        tm.eval()
        m.eval()
    rng = np.random.default_rng(seed)
    batched = 'unbatched' not in kind
    N, L, S = 3, 4, 5
    if attn == 'self':
        S = L
    bf = ctor.get('batch_first', False) and batched

    def shape(T, D):
        if not batched:
            return (T, D)
        return (N, T, D) if bf else (T, N, D)

    kd, vd = ctor.get('kdim', E), ctor.get('vdim', E)
    q = rng.standard_normal(shape(L, E)).astype(dtype)
    k = rng.standard_normal(shape(S, kd)).astype(dtype)
    v = rng.standard_normal(shape(S, vd)).astype(dtype)
    kpm, am = _masks(kind, rng, N, H, L, S, batched)
    if call.get('is_causal'):
        am = np.triu(np.ones((L, S), bool), 1)
    tq, gq = torch.tensor(q, requires_grad=True), tape.tensor(q, requires_grad=True)
    if attn == 'self':
        tins, gins = [tq], [gq]
        targs, gargs = (tq, tq, tq), (gq, gq, gq)
    elif attn == 'cross':     # key is value, as in a decoder's memory attention
        tk, gk = torch.tensor(k, requires_grad=True), tape.tensor(k, requires_grad=True)
        tins, gins = [tq, tk], [gq, gk]
        targs, gargs = (tq, tk, tk), (gq, gk, gk)
    else:
        tk, gk = torch.tensor(k, requires_grad=True), tape.tensor(k, requires_grad=True)
        tv, gv = torch.tensor(v, requires_grad=True), tape.tensor(v, requires_grad=True)
        tins, gins = [tq, tk, tv], [gq, gk, gv]
        targs, gargs = (tq, tk, tv), (gq, gk, gv)

    def mk(a, lib):
        if a is None:
            return None
        if a.dtype != bool:
            a = a.astype(dtype)
        return lib.tensor(a)

    tkw = dict(call, key_padding_mask=mk(kpm, torch), attn_mask=mk(am, torch))
    gkw = dict(call, key_padding_mask=mk(kpm, tape), attn_mask=mk(am, tape))
    tout, tw = tm(*targs, **tkw)
    out, w = m(*gargs, **gkw)
    tol = TOL[dtype]
    _close(_np(out), _np(tout), tol, 'output')
    if call.get('need_weights', True):
        _close(_np(w), _np(tw), tol, 'weights')
        touts, outs = [tout, tw], [out, w]
    else:
        assert w is None and tw is None
        touts, outs = [tout], [out]
    _check_grads(tm, m, touts, outs, tins, gins, rng, tol)


@pytest.mark.parametrize('ctor,kind,call,attn', MHA_CASES)
def test_multihead_attention_matches_torch_float64(ctor, kind, call, attn):
    _run_mha(ctor, kind, call, attn, 'float64')


@pytest.mark.parametrize('ctor,kind,call,attn', [MHA_CASES[3], MHA_CASES[10], MHA_CASES[9]])
def test_multihead_attention_matches_torch_float32(ctor, kind, call, attn):
    _run_mha(ctor, kind, call, attn, 'float32')


def test_multihead_attention_state_and_init():
    _ = tape.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert list(m.state_dict()) == ['in_proj_weight', 'in_proj_bias', 'bias_k', 'bias_v',
                                    'out_proj.weight', 'out_proj.bias']
    assert m.q_proj_weight is None and m.in_proj_weight.shape == (24, 8)
    assert isinstance(m.out_proj, nn.Linear)
    assert not np.any(_np(m.in_proj_bias)) and not np.any(_np(m.out_proj.bias))
    bound = np.sqrt(6 / (24 + 8))             # xavier_uniform_ on (3E, E)
    w = _np(m.in_proj_weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert m.bias_k.shape == (1, 1, 8) and np.any(_np(m.bias_k))
    s = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, bias=False)
    assert list(s.state_dict()) == ['q_proj_weight', 'k_proj_weight', 'v_proj_weight',
                                    'out_proj.weight']
    assert s.in_proj_weight is None and s.in_proj_bias is None and s.bias_k is None
    assert s.k_proj_weight.shape == (8, 4) and s.v_proj_weight.shape == (8, 6)
    assert len(list(s.parameters())) == 4


def test_fully_masked_rows_as_torch():
    """A query whose every key is padded: NaN from the weights path, zeros (then
    the output projection) from the sdpa path, as in PyTorch."""
    tm, m = _pair(torch.nn.MultiheadAttention, nn.MultiheadAttention, 'float64', 4, 2)
    x = np.random.default_rng(0).standard_normal((3, 2, 4))
    kpm = np.array([[True, True, True], [False, True, False]])
    for nw in (True, False):
        tx, gx = torch.tensor(x, requires_grad=True), tape.tensor(x, requires_grad=True)
        to, _ = tm(tx, tx, tx, key_padding_mask=torch.tensor(kpm), need_weights=nw)
        go, _ = m(gx, gx, gx, key_padding_mask=tape.tensor(kpm), need_weights=nw)
        _close(_np(go), _np(to), 1e-9, f'need_weights={nw}')
        if not nw:
            to[:, 1].sum().backward()
            go[:, 1].sum().backward()
            _close(_np(gx.grad), tx.grad.numpy(), 1e-9, 'grad')
            assert np.isfinite(_np(gx.grad)).all()


def test_functional_multi_head_attention_forward():
    tm, m = _pair(torch.nn.MultiheadAttention, nn.MultiheadAttention, 'float64', 6, 3)
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((4, 2, 6)), rng.standard_normal((5, 2, 6))
    args = lambda lib, mod: (lib.tensor(q), lib.tensor(k), lib.tensor(k), 6, 3,  # noqa: E731
                             mod.in_proj_weight, mod.in_proj_bias, None, None, False, 0.0,
                             mod.out_proj.weight, mod.out_proj.bias)
    to, tw = torch.nn.functional.multi_head_attention_forward(*args(torch, tm))
    go, gw = F.multi_head_attention_forward(*args(tape, m))
    _close(_np(go), _np(to), 1e-9)
    _close(_np(gw), _np(tw), 1e-9)


def test_multihead_attention_gradcheck():
    _ = tape.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True, dtype='float64')
    rng = np.random.default_rng(3)
    q = tape.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    k = tape.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
    v = tape.tensor(rng.standard_normal((4, 2, 5)), requires_grad=True)
    am = tape.tensor(rng.standard_normal((3, 4)))

    def fn(q, k, v):
        out, w = m(q, k, v, attn_mask=am)
        return out, w

    def fn_sdpa(q, k, v):
        return m(q, k, v, attn_mask=am, need_weights=False)[0]

    assert tape.autograd.gradcheck(fn, (q, k, v))
    assert tape.autograd.gradcheck(fn_sdpa, (q, k, v))
    assert tape.autograd.gradgradcheck(fn_sdpa, (q, k, v))


# -- Transformer layers -------------------------------------------------------------------
def _act(name):
    if name == 'callable':
        return (torch.tanh, tape.tanh)
    return (name, name)


def _run_transformer(dtype, norm_first, act, batch_first, masks, bias=True, batched=True,
                     seed=4):
    E, H = 8, 2
    ta, ga = _act(act)
    kw = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=16, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
              bias=bias)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tm = torch.nn.Transformer(**kw, activation=ta).to(getattr(torch, dtype))
    m = nn.Transformer(**kw, activation=ga, dtype=dtype)
    assert list(m.state_dict()) == list(tm.state_dict())
    _copy_params(tm, m)
    rng = np.random.default_rng(seed)
    N, S, T = 2, 5, 4

    def shape(L):
        if not batched:
            return (L, E)
        return (N, L, E) if batch_first else (L, N, E)

    src = rng.standard_normal(shape(S)).astype(dtype)
    tgt = rng.standard_normal(shape(T)).astype(dtype)
    tkw, gkw = {}, {}
    if 'causal' in masks:
        tkw['tgt_mask'] = torch.nn.Transformer.generate_square_subsequent_mask(
            T, dtype=getattr(torch, dtype))
        gkw['tgt_mask'] = nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)
        _close(_np(gkw['tgt_mask']), _np(tkw['tgt_mask']), 0)
    if 'pad' in masks:
        pad = np.zeros((N, S), bool)
        pad[0, -2:] = True
        if not batched:
            pad = pad[0]
        for name in ('src_key_padding_mask', 'memory_key_padding_mask'):
            tkw[name], gkw[name] = torch.tensor(pad), tape.tensor(pad)
    if 'src_mask' in masks:
        sm = np.triu(np.ones((S, S), bool), 2)
        tkw['src_mask'], gkw['src_mask'] = torch.tensor(sm), tape.tensor(sm)
    ts, gs = torch.tensor(src, requires_grad=True), tape.tensor(src, requires_grad=True)
    tt, gt = torch.tensor(tgt, requires_grad=True), tape.tensor(tgt, requires_grad=True)
    tout = tm(ts, tt, **tkw)
    out = m(gs, gt, **gkw)
    tol = TOL[dtype] * (1 if dtype == 'float32' else 100)
    _close(_np(out), _np(tout), tol, 'output')
    _check_grads(tm, m, [tout], [out], [ts, tt], [gs, gt], rng, tol)


@pytest.mark.parametrize('norm_first,act,batch_first,masks,bias,batched', [
    (False, 'relu', False, '', True, True),
    (True, 'gelu', True, 'causal pad', True, True),
    (False, 'gelu', True, 'causal src_mask', False, True),
    (True, 'callable', False, 'pad src_mask', True, True),
    (False, 'relu', False, 'causal pad', True, False),
])
def test_transformer_matches_torch_float64(norm_first, act, batch_first, masks, bias, batched):
    _run_transformer('float64', norm_first, act, batch_first, masks, bias, batched)


def test_transformer_matches_torch_float32():
    _run_transformer('float32', True, 'relu', True, 'causal pad')


@pytest.mark.parametrize('which', ['encoder', 'decoder'])
def test_layer_stacks_match_torch_eval(which):
    """TransformerEncoder/Decoder built from a layer (deep-copied clones), in eval
    mode with dropout > 0 (so dropout is the identity), with float masks."""
    E, H = 6, 3
    rng = np.random.default_rng(5)
    torch.manual_seed(0)
    if which == 'encoder':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            tl = torch.nn.TransformerEncoderLayer(E, H, 10, dropout=0.3).double()
            tm = torch.nn.TransformerEncoder(tl, 2, torch.nn.LayerNorm(E).double())
        m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 10, dropout=0.3,
                                                             dtype='float64'),
                                  2, nn.LayerNorm(E, dtype='float64'))
    else:
        tl = torch.nn.TransformerDecoderLayer(E, H, 10, dropout=0.3).double()
        tm = torch.nn.TransformerDecoder(tl, 2)
        m = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, 10, dropout=0.3,
                                                             dtype='float64'), 2)
    assert list(m.state_dict()) == list(tm.state_dict())
    _copy_params(tm, m)
    assert m.layers[0].linear1.weight is not m.layers[1].linear1.weight
    tm.eval()
    m.eval()
    x = rng.standard_normal((4, 2, E))
    mem = rng.standard_normal((5, 2, E))
    fm = rng.standard_normal((4, 4)) * 0.3
    kp = rng.standard_normal((2, 4 if which == 'encoder' else 5)) * 0.3
    tx, gx = torch.tensor(x, requires_grad=True), tape.tensor(x, requires_grad=True)
    if which == 'encoder':
        tout = tm(tx, mask=torch.tensor(fm), src_key_padding_mask=torch.tensor(kp))
        out = m(gx, mask=tape.tensor(fm), src_key_padding_mask=tape.tensor(kp))
        tins, gins = [tx], [gx]
    else:
        tmem, gmem = torch.tensor(mem, requires_grad=True), tape.tensor(mem, requires_grad=True)
        tout = tm(tx, tmem, tgt_mask=torch.tensor(fm),
                  memory_key_padding_mask=torch.tensor(kp))
        out = m(gx, gmem, tgt_mask=tape.tensor(fm), memory_key_padding_mask=tape.tensor(kp))
        tins, gins = [tx, tmem], [gx, gmem]
    _close(_np(out), _np(tout), 1e-9, 'output')
    _check_grads(tm, m, [tout], [out], tins, gins, rng, 1e-8)


def test_tiny_transformer_sgd_steps_match_torch():
    kw = dict(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
              dim_feedforward=12, dropout=0.0, batch_first=True)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tm = torch.nn.Transformer(**kw).double()
    m = nn.Transformer(**kw, dtype='float64')
    _copy_params(tm, m)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    opt = tape.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(6)
    src, tgt, y = (rng.standard_normal(s) for s in ((2, 5, 8), (2, 4, 8), (2, 4, 8)))
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    gmask = nn.Transformer.generate_square_subsequent_mask(4, dtype='float64')
    losses = []
    for _ in range(3):
        topt.zero_grad()
        opt.zero_grad()
        tl = torch.nn.functional.mse_loss(tm(torch.tensor(src), torch.tensor(tgt),
                                             tgt_mask=tmask), torch.tensor(y))
        gl = F.mse_loss(m(tape.tensor(src), tape.tensor(tgt), tgt_mask=gmask), tape.tensor(y))
        tl.backward()
        gl.backward()
        topt.step()
        opt.step()
        _close(gl.item(), tl.item(), 1e-9, 'loss')
        losses.append(gl.item())
    assert losses[-1] < losses[0]
    tparams = dict(tm.named_parameters())
    for n, p in m.named_parameters():
        _close(_np(p), _np(tparams[n]), 1e-9, n)


def test_transformer_second_order():
    """A double backward through an encoder layer (create_graph), against torch."""
    tm, m = _pair(torch.nn.TransformerEncoderLayer, nn.TransformerEncoderLayer, 'float64',
                  4, 2, 6, 0.0, 'gelu')
    x = np.random.default_rng(7).standard_normal((3, 2, 4))
    tx, gx = torch.tensor(x, requires_grad=True), tape.tensor(x, requires_grad=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):      # (torch's CPU flash kernel differentiates once)
        tg, = torch.autograd.grad((tm(tx) ** 2).sum(), tx, create_graph=True)
    gg, = tape.autograd.grad((m(gx) ** 2).sum(), gx, create_graph=True)
    _close(_np(gg), _np(tg), 1e-9, 'grad')
    th, = torch.autograd.grad((tg ** 2).sum(), tx)
    gh, = tape.autograd.grad((gg ** 2).sum(), gx)
    _close(_np(gh), _np(th), 1e-8, 'second order')


def test_transformer_attributes():
    _ = tape.manual_seed(0)
    t = nn.Transformer(8, 2, 1, 1, 16)
    assert (t.d_model, t.nhead, t.batch_first) == (8, 2, False)
    # Transformer re-initialises every matrix with xavier_uniform_
    w = _np(t.encoder.layers[0].linear1.weight)
    assert np.abs(w).max() <= np.sqrt(6 / 24)
    layer = nn.TransformerEncoderLayer(8, 2, activation='gelu')
    assert layer.activation is F.gelu and layer.activation_relu_or_gelu == 2
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.dtype == tape.float32
    np.testing.assert_array_equal(_np(mask), np.triu(np.full((3, 3), -np.inf), 1))


# -- errors ------------------------------------------------------------------------------
def test_errors_as_torch():
    with pytest.raises(AssertionError, match='divisible'):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError):
        nn.MultiheadAttention(0, 2)
    m = nn.MultiheadAttention(4, 2)
    x = tape.randn(3, 2, 4)
    with pytest.raises(AssertionError):                     # 4-D query
        m(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0))
    with pytest.raises(AssertionError):                     # 3-D query, 2-D key
        m(x, x[:, 0], x[:, 0])
    with pytest.raises(AssertionError, match='embedding dimension'):
        m(tape.randn(3, 2, 5), tape.randn(3, 2, 5), tape.randn(3, 2, 5))
    with pytest.raises(RuntimeError, match='2D attn_mask'):
        m(x, x, x, attn_mask=tape.zeros(3, 4))
    with pytest.raises(RuntimeError, match='3D attn_mask'):
        m(x, x, x, attn_mask=tape.zeros(2, 3, 3))
    with pytest.raises(AssertionError, match='key_padded_mask'):
        m(x, x, x, key_padding_mask=tape.zeros(2, 4, dtype=tape.bool))
    with pytest.raises(AssertionError, match='only bool and floating'):
        m(x, x, x, attn_mask=tape.zeros(3, 3, dtype=tape.int64))
    with pytest.raises(RuntimeError, match='Need attn_mask'):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match='activation should be relu/gelu'):
        nn.TransformerEncoderLayer(4, 2, activation='tanh')
    t = nn.Transformer(4, 2, 1, 1, 8)
    with pytest.raises(RuntimeError, match='batch number'):
        t(tape.randn(3, 2, 4), tape.randn(3, 3, 4))
    with pytest.raises(RuntimeError, match='feature number'):
        t(tape.randn(3, 2, 5), tape.randn(3, 2, 5))


def test_functional_static_keys_and_values_against_torch():
    # multi_head_attention_forward with precomputed (N * heads, S, head_dim) keys/values
    rng = np.random.default_rng(41)
    L, S, N, E, H = 3, 5, 2, 8, 2
    arrays = dict(q=rng.standard_normal((L, N, E)), w=rng.standard_normal((3 * E, E)) * 0.3,
                  b=rng.standard_normal(3 * E) * 0.1, ow=rng.standard_normal((E, E)) * 0.3,
                  ob=rng.standard_normal(E) * 0.1,
                  sk=rng.standard_normal((N * H, S, E // H)),
                  sv=rng.standard_normal((N * H, S, E // H)))
    out = {}
    for lib in (torch, tape):
        t = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
        y, w = lib.nn.functional.multi_head_attention_forward(
            t['q'], t['q'], t['q'], E, H, t['w'], t['b'], None, None, False, 0.0, t['ow'],
            t['ob'], training=False, static_k=t['sk'], static_v=t['sv'])
        (y.sum() + w.sum()).backward()
        out[lib.__name__] = [y.detach().numpy(), w.detach().numpy()] + [
            t[k].grad.numpy() for k in ('q', 'w', 'sk', 'sv')]
        with pytest.raises(AssertionError, match='expecting static_k.size\\(0\\)'):
            lib.nn.functional.multi_head_attention_forward(
                t['q'], t['q'], t['q'], E, H, t['w'], t['b'], None, None, False, 0.0, t['ow'],
                t['ob'], training=False, static_k=t['sk'][:1], static_v=t['sv'])
    for a, b in zip(out['torch'], out['tape']):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
