"""Attention as one node (tape/nn/_sdpa.py): F.scaled_dot_product_attention on 4-D
inputs and MultiheadAttention's self-attention without weights record one
``ScaledDotProductFlashAttentionForCpuBackward0`` node, as PyTorch's CPU build
does; values and gradients (first and second order) against PyTorch, with every
kind of mask, and the cases that keep the composite."""
import warnings

import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape import nn

torch = pytest.importorskip('torch')
TF = torch.nn.functional

NODE = 'ScaledDotProductFlashAttentionForCpuBackward0'
TOL = {'float32': 2e-5, 'float64': 1e-10}


def _close(a, b, tol, what=''):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol, err_msg=what)


def _mask(kind, rng, B, H, L, S, dt):
    if kind == 'bool':
        m = rng.random((L, S)) > 0.3
        m[1] = False                     # a query that sees no key: zeros, as PyTorch's
        return m
    if kind == 'bool4':
        return rng.random((B, 1, L, S)) > 0.3
    if kind == 'float':
        return rng.standard_normal((1, H, L, S)).astype(dt)
    return None


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('kind', [None, 'causal', 'bool', 'bool4', 'float', 'scale'])
def test_sdpa_one_node_matches_torch(kind, dt):
    rng = np.random.default_rng(0)
    B, H, L, S, E = 2, 3, 5, 6, 4
    if kind == 'causal':
        S = L
    arrs = [rng.standard_normal(s).astype(dt) for s in ((B, H, L, E), (B, H, S, E),
                                                        (B, H, S, E))]
    m = _mask(kind, rng, B, H, L, S, dt)
    kw = dict(is_causal=kind == 'causal', scale=0.3 if kind == 'scale' else None)
    T = [torch.tensor(a, requires_grad=True) for a in arrs]
    A = [tape.tensor(a, requires_grad=True) for a in arrs]
    to = TF.scaled_dot_product_attention(*T, attn_mask=None if m is None else torch.tensor(m),
                                         **kw)
    ao = F.scaled_dot_product_attention(*A, attn_mask=None if m is None else tape.tensor(m),
                                        **kw)
    assert type(to.grad_fn).__name__ == NODE
    assert ao.grad_fn.name() == NODE
    assert ao._tape.n == 1
    _close(ao.detach().numpy(), to.detach().numpy(), TOL[dt], 'out')
    w = rng.standard_normal(tuple(to.shape)).astype(dt)
    (to * torch.tensor(w)).sum().backward()
    (ao * tape.tensor(w)).sum().backward()
    for a, t, n in zip(A, T, 'qkv'):
        _close(a.grad.numpy(), t.grad.numpy(), TOL[dt], n)


def _torch_safe_sdpa(q, k, v, mask):
    # PyTorch's fused node has no double backward: its math, in torch ops
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is None:
        return torch.softmax(s, -1) @ v
    s = s.masked_fill(~mask, float('-inf'))
    full = (~mask).all(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(full, 0.0), -1).masked_fill(full, 0.0)
    return p @ v


@pytest.mark.parametrize('kind', [None, 'bool'])
def test_sdpa_second_order_through_the_tape_op_backward(kind):
    rng = np.random.default_rng(1)
    arrs = [rng.standard_normal((1, 2, 4, 3)) for _ in range(3)]
    m = _mask(kind, rng, 1, 2, 4, 4, 'float64')
    T = [torch.tensor(a, requires_grad=True) for a in arrs]
    A = [tape.tensor(a, requires_grad=True) for a in arrs]
    to = _torch_safe_sdpa(*T, None if m is None else torch.tensor(m))
    ao = F.scaled_dot_product_attention(*A, attn_mask=None if m is None else tape.tensor(m))
    assert ao.grad_fn.name() == NODE
    tg = torch.autograd.grad((to ** 2).sum(), T, create_graph=True)
    ag = tape.autograd.grad((ao ** 2).sum(), A, create_graph=True)
    for a, t in zip(ag, tg):
        _close(a.detach().numpy(), t.detach().numpy(), 1e-10)
    th = torch.autograd.grad(sum((g ** 2).sum() for g in tg), T)
    ah = tape.autograd.grad(sum((g ** 2).sum() for g in ag), A)
    for a, t in zip(ah, th):
        _close(a.numpy(), t.numpy(), 1e-9)


def test_sdpa_composite_where_pytorch_does_not_fuse():
    rng = np.random.default_rng(2)
    q4 = tape.tensor(rng.standard_normal((1, 2, 3, 4)).astype('float32'), requires_grad=True)
    q3 = tape.tensor(rng.standard_normal((2, 3, 4)).astype('float32'), requires_grad=True)
    tape.manual_seed(0)
    assert F.scaled_dot_product_attention(q4, q4, q4, dropout_p=0.5).grad_fn.name() != NODE
    assert F.scaled_dot_product_attention(q3, q3, q3).grad_fn.name() != NODE
    m3 = tape.zeros(2, 3, 3)                 # a 3-D mask: PyTorch's math path too
    assert F.scaled_dot_product_attention(q4, q4, q4, attn_mask=m3).grad_fn.name() != NODE
    v = tape.tensor(rng.standard_normal((1, 2, 3, 5)).astype('float32'))
    assert F.scaled_dot_product_attention(q4, q4, v).grad_fn.name() != NODE     # head sizes
    # a mask that requires grad keeps the composite (its gradient flows)
    m = tape.zeros(3, 3, requires_grad=True)
    out = F.scaled_dot_product_attention(q4, q4, q4, attn_mask=m)
    assert out.grad_fn.name() != NODE
    out.sum().backward()
    assert m.grad is not None


def test_sdpa_under_jit_traces_the_composite():
    rng = np.random.default_rng(3)
    q = tape.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)

    @tape.jit
    def f(q):
        return (F.scaled_dot_product_attention(q, q, q, is_causal=True) ** 2).sum()

    for _ in range(3):
        g, = tape.autograd.grad(f(q), q)
    ge, = tape.autograd.grad((F.scaled_dot_product_attention(q, q, q, is_causal=True) ** 2)
                             .sum(), q)
    _close(g.numpy(), ge.numpy(), 1e-10)


def _mha_pair(E, H, batch_first, dt, dropout=0.0):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, dropout=dropout, batch_first=batch_first) \
        .to(getattr(torch, dt))
    m = nn.MultiheadAttention(E, H, dropout=dropout, batch_first=batch_first, dtype=dt)
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})
    return tm, m


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('batch_first', [True, False])
@pytest.mark.parametrize('masks', ['none', 'kpm', 'attn_bool', 'attn_float3', 'both',
                                   'causal', 'causal_kpm'])
def test_mha_self_attention_one_node_matches_torch(masks, batch_first, dt):
    rng = np.random.default_rng(4)
    N, L, E, H = 3, 5, 8, 2
    tm, m = _mha_pair(E, H, batch_first, dt)
    xa = rng.standard_normal((N, L, E) if batch_first else (L, N, E)).astype(dt)
    kpm = am = None
    if masks in ('kpm', 'both', 'causal_kpm'):
        kpm = np.zeros((N, L), bool)
        kpm[0, 3:] = True
        kpm[1, :] = True                 # a sequence that is all padding: zeros
    if masks in ('attn_bool', 'both'):
        am = rng.random((L, L)) > 0.7
    if masks == 'attn_float3':
        am = rng.standard_normal((N * H, L, L)).astype(dt)
    if masks.startswith('causal'):
        am = np.triu(np.full((L, L), -np.inf, dt), 1)
    causal = masks.startswith('causal')
    tx = torch.tensor(xa, requires_grad=True)
    ax = tape.tensor(xa, requires_grad=True)
    kw_t = dict(need_weights=False, is_causal=causal,
                key_padding_mask=None if kpm is None else torch.tensor(kpm),
                attn_mask=None if am is None else torch.tensor(am))
    kw_a = dict(need_weights=False, is_causal=causal,
                key_padding_mask=None if kpm is None else tape.tensor(kpm),
                attn_mask=None if am is None else tape.tensor(am))
    to, tw = tm(tx, tx, tx, **kw_t)
    ao, aw = m(ax, ax, ax, **kw_a)
    assert tw is None and aw is None
    tol = TOL[dt] * 5
    _close(ao.detach().numpy(), to.detach().numpy(), tol, 'out')
    names = []
    stack = [ao.grad_fn]
    while stack:
        n = stack.pop()
        if n is not None:
            names.append(n.name())
            stack.extend(c for c, _ in n.next_functions)
    assert names.count(NODE) == 1
    w = rng.standard_normal(tuple(to.shape)).astype(dt)
    (to * torch.tensor(w)).sum().backward()
    (ao * tape.tensor(w)).sum().backward()
    _close(ax.grad.numpy(), tx.grad.numpy(), tol, 'x')
    tp = dict(tm.named_parameters())
    for n, p in m.named_parameters():
        _close(p.grad.numpy(), tp[n].grad.numpy(), tol, n)


def test_mha_records_and_second_order():
    # PyTorch's fused node has no double backward: the general path (need_weights,
    # tape ops only) is the reference
    rng = np.random.default_rng(5)
    _, m = _mha_pair(8, 2, True, 'float64')
    xa = rng.standard_normal((2, 4, 8))
    params = list(m.parameters())
    res = []
    for need_weights in (False, True):
        ax = tape.tensor(xa, requires_grad=True)
        ao = m(ax, ax, ax, need_weights=need_weights)[0]
        if not need_weights:
            # reshape, t, mm, broadcast, add (in projection), attention, the same
            # four for the output projection, reshape
            assert ao._tape.n == 11
        ag, = tape.autograd.grad((ao ** 2).sum(), ax, create_graph=True)
        res.append([ao, ag] + list(tape.autograd.grad((ag ** 2).sum(), [ax] + params)))
    for a, b in zip(*res):
        _close(a.detach().numpy(), b.detach().numpy(), 1e-10)


def test_mha_cases_that_keep_the_general_path():
    rng = np.random.default_rng(6)
    x = tape.tensor(rng.standard_normal((2, 4, 8)).astype('float32'), requires_grad=True)
    y = tape.tensor(rng.standard_normal((2, 4, 8)).astype('float32'))
    _, m = _mha_pair(8, 2, True, 'float32', dropout=0.5)
    m.train()
    assert m(x, x, x, need_weights=False)[0]._tape.n > 11      # dropout in training
    m.eval()
    assert m(x, x, x, need_weights=False)[0]._tape.n == 11     # no dropout in eval
    _, m = _mha_pair(8, 2, True, 'float32')
    assert m(x, x, x)[1] is not None                           # need_weights
    assert m(x, y, y, need_weights=False)[0]._tape.n > 11      # not self-attention
    with pytest.raises(RuntimeError, match='Need attn_mask'):
        m(x, x, x, need_weights=False, is_causal=True)
    with pytest.raises(RuntimeError, match='2D attn_mask'):
        m(x, x, x, need_weights=False, attn_mask=tape.zeros(3, 3))


def test_transformer_encoder_layer_matches_torch():
    rng = np.random.default_rng(7)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        tl = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    layer.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                           for k, v in tl.state_dict().items()})
    xa = rng.standard_normal((3, 6, 16)).astype('float32')
    to = tl(torch.tensor(xa))
    ao = layer(tape.tensor(xa))
    _close(ao.detach().numpy(), to.detach().numpy(), 1e-4, 'out')
    (to ** 2).mean().backward()
    (ao ** 2).mean().backward()
    tp = dict(tl.named_parameters())
    for n, p in layer.named_parameters():
        _close(p.grad.numpy(), tp[n].grad.numpy(), 1e-5, n)
