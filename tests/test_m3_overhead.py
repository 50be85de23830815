"""The M3 workload's attention paths (tape/nn/_sdpa.py): the packed self-attention
writes the merged heads and the packed gradient through strided output arrays,
and the backward folds the scale into ds once; checked against PyTorch, in both
dtypes and layouts, on sizes that take the small and the chunked passes."""
import numpy as np
import pytest

import tape
import tape.nn as nn
import tape.nn.functional as F
from tape.nn import _sdpa

torch = pytest.importorskip("torch")

TOL = {'float32': 2e-4, 'float64': 1e-10}
NODE = 'ScaledDotProductFlashAttentionForCpuBackward0'


def _close(a, b, tol, what=''):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(1.0, float(np.abs(b).max()) if b.size else 1.0)
    assert np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True), \
        (what, float(np.abs(a - b).max()))


def _mha_pair(E, H, batch_first, dt):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first).to(getattr(torch, dt))
    m = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=dt)
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})
    return tm, m


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('batch_first', [True, False])
@pytest.mark.parametrize('size', ['small', 'chunked'])
def test_packed_self_attention_matches_torch(size, batch_first, dt):
    # chunked: the scores (N, H, L, L) pass CHUNK_BYTES, the forward and backward
    # go over slices of the batch, writing into the strided outputs
    N, L, E, H = (3, 5, 12, 3) if size == 'small' else (4, 96, 16, 4)
    if size == 'chunked':
        assert N * H * L * L * np.dtype(dt).itemsize > _sdpa.CHUNK_BYTES
    rng = np.random.default_rng(11)
    tm, m = _mha_pair(E, H, batch_first, dt)
    shape = (N, L, E) if batch_first else (L, N, E)
    xa = rng.standard_normal(shape).astype(dt)
    kpm = np.zeros((N, L), bool)
    kpm[0, L // 2:] = True
    for mask in (None, kpm):
        tx = torch.tensor(xa, requires_grad=True)
        ax = tape.tensor(xa, requires_grad=True)
        to, _ = tm(tx, tx, tx, need_weights=False,
                   key_padding_mask=None if mask is None else torch.tensor(mask))
        ao, aw = m(ax, ax, ax, need_weights=False,
                   key_padding_mask=None if mask is None else tape.tensor(mask))
        assert aw is None
        tol = TOL[dt] * 5
        _close(ao.detach().numpy(), to.detach().numpy(), tol, 'out')
        w = rng.standard_normal(tuple(to.shape)).astype(dt)
        tm.zero_grad()
        m.zero_grad()
        (to * torch.tensor(w)).sum().backward()
        (ao * tape.tensor(w)).sum().backward()
        _close(ax.grad.numpy(), tx.grad.numpy(), tol, 'x')
        tp = dict(tm.named_parameters())
        for n, p in m.named_parameters():
            _close(p.grad.numpy(), tp[n].grad.numpy(), tol, n)


@pytest.mark.parametrize('dt', ['float32', 'float64'])
def test_attention_arrays_into_strided_outputs(dt):
    rng = np.random.default_rng(12)
    for n, L in ((2, 7), (3, 120)):             # the small and the chunked passes
        x = rng.standard_normal((n, L, 3, 2, 5)).astype(dt)
        q, k, v = x.transpose(2, 0, 3, 1, 4)
        scale = 0.37
        ref, p = _sdpa.attention_forward(q, k, v, None, scale, False)
        buf = np.full((n, L, 2, 5), np.nan, dt)
        out, p2 = _sdpa.attention_forward(q, k, v, None, scale, False, buf.transpose(0, 2, 1, 3))
        assert np.shares_memory(out, buf)
        np.testing.assert_array_equal(buf.transpose(0, 2, 1, 3), ref)
        np.testing.assert_array_equal(p2, p)
        g = rng.standard_normal(ref.shape).astype(dt)
        grads = _sdpa.attention_backward(g, q, k, v, p, scale)
        d = np.full((n, L, 3, 2, 5), np.nan, dt)
        dv = d.transpose(2, 0, 3, 1, 4)
        got = _sdpa.attention_backward(g, q, k, v, p, scale, (dv[0], dv[1], dv[2]))
        for a, b, o in zip(got, grads, dv):
            assert np.shares_memory(a, d)
            np.testing.assert_array_equal(o, b)
        # the NumPy fallback (k broadcast over the batch) fills the outputs too
        ref2, p3 = _sdpa.attention_forward(q, k[:1], v, None, scale, False)
        buf2 = np.empty_like(ref2)
        out2, _ = _sdpa.attention_forward(q, k[:1], v, None, scale, False, buf2)
        assert out2 is buf2
        np.testing.assert_array_equal(buf2, ref2)
        # and the gradients against the composite formulas
        ds = g @ np.swapaxes(v, -1, -2)
        ds = p * (ds - (ds * p).sum(-1, keepdims=True))
        tol = TOL[dt] * 10
        _close(grads[0], ds @ k * scale, tol, 'dq')
        _close(grads[1], np.swapaxes(ds, -1, -2) @ q * scale, tol, 'dk')
        _close(grads[2], np.swapaxes(p, -1, -2) @ g, tol, 'dv')


@pytest.mark.parametrize('dt', ['float32', 'float64'])
def test_sdpa_scale_matches_torch(dt):
    rng = np.random.default_rng(13)
    qa, ka, va = (rng.standard_normal((2, 3, 6, 5)).astype(dt) for _ in range(3))
    ts = [torch.tensor(a, requires_grad=True) for a in (qa, ka, va)]
    as_ = [tape.tensor(a, requires_grad=True) for a in (qa, ka, va)]
    to = torch.nn.functional.scaled_dot_product_attention(*ts, scale=0.3)
    ao = F.scaled_dot_product_attention(*as_, scale=0.3)
    assert ao.grad_fn.name() == NODE
    _close(ao.detach().numpy(), to.detach().numpy(), TOL[dt], 'out')
    w = rng.standard_normal(to.shape).astype(dt)
    (to * torch.tensor(w)).sum().backward()
    (ao * tape.tensor(w)).sum().backward()
    for a, t in zip(as_, ts):
        _close(a.grad.numpy(), t.grad.numpy(), TOL[dt] * 5)


@pytest.mark.parametrize('dt', ['float32', 'float64'])
@pytest.mark.parametrize('batch_first', [True, False])
def test_encoder_layer_adam_steps_match_torch(batch_first, dt):
    # the M3 workload: a TransformerEncoderLayer training step with Adam
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=batch_first) \
        .to(getattr(torch, dt))
    al = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=batch_first, dtype=dt)
    al.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                        for k, v in tl.state_dict().items()})
    topt = torch.optim.Adam(tl.parameters(), lr=1e-2)
    aopt = tape.optim.Adam(al.parameters(), lr=1e-2)
    xa = np.random.default_rng(14).standard_normal((3, 5, 16)).astype(dt)
    tx, ax = torch.tensor(xa), tape.tensor(xa)
    tp = dict(tl.named_parameters())
    for step in range(3):
        topt.zero_grad()
        aopt.zero_grad()
        tloss = (tl(tx) ** 2).mean()
        aloss = (al(ax) ** 2).mean()
        _close(aloss.item(), tloss.item(), TOL[dt] * 10, 'loss')
        tloss.backward()
        aloss.backward()
        if step == 0:
            for n, p in al.named_parameters():
                _close(p.grad.numpy(), tp[n].grad.numpy(), TOL[dt] * 10, n)
        topt.step()
        aopt.step()
    if dt == 'float64':
        # (in float32 Adam's first steps follow the sign of gradients near 0)
        for n, p in al.named_parameters():
            _close(p.detach().numpy(), tp[n].detach().numpy(), 1e-8, n)
