"""The chunked, out-of-place attention path of tape/nn/_sdpa.py against PyTorch.

Scores above ``CHUNK_BYTES`` are computed in slices of the leading batch axis,
the weights written into a pooled array apart from the scores; smaller ones in
one piece.  Both, with every kind of mask (2-D, 4-D, broadcast along the batch
or the heads, bool, causal), the safe softmax of fully masked rows, float64,
MultiheadAttention's packed path and create_graph, must agree with torch.
"""
import numpy as np
import pytest

import tape
from tape.nn import _sdpa

torch = pytest.importorskip("torch")

BIG = (32, 4, 64, 16)           # 2 MB of float32 scores: 8 chunks
SMALL = (8, 4, 16, 16)          # one piece


def _inputs(shape, dtype, seed=0, kv_len=None):
    rng = np.random.default_rng(seed)
    kshape = shape if kv_len is None else shape[:2] + (kv_len, shape[3])
    return [rng.standard_normal(s).astype(dtype) for s in (shape, kshape, kshape)]


def _run(lib, arrays, grad_out, **kw):
    ins = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = lib.nn.functional.scaled_dot_product_attention(*ins, **kw)
    out.backward(lib.tensor(grad_out))
    return [np.asarray(out.detach().numpy())] + [np.asarray(i.grad.numpy()) for i in ins]


def _check(arrays, mask=None, dtype=np.float32, **kw):
    rng = np.random.default_rng(5)
    L, S = arrays[0].shape[-2], arrays[1].shape[-2]
    g = rng.standard_normal(arrays[0].shape[:-1] + (arrays[2].shape[-1],)).astype(dtype)
    tkw, akw = dict(kw), dict(kw)
    if mask is not None:
        tkw['attn_mask'] = torch.tensor(mask)
        akw['attn_mask'] = tape.tensor(mask)
    want = _run(torch, arrays, g, **tkw)
    got = _run(tape, arrays, g, **akw)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-6, atol=1e-9)
    for w, a in zip(want, got):
        np.testing.assert_allclose(a, w, **tol)
    assert L and S


@pytest.mark.parametrize('shape', [BIG, SMALL])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_plain(shape, dtype):
    _check(_inputs(shape, dtype), dtype=dtype)


@pytest.mark.parametrize('shape', [BIG, SMALL])
def test_scale_and_causal(shape):
    _check(_inputs(shape, np.float32, 1), scale=0.3)
    _check(_inputs(shape, np.float32, 2), is_causal=True)


def test_cross_lengths_chunked():
    # L != S, scores (32, 4, 64, 48): chunked with a non-square score block
    _check(_inputs(BIG, np.float32, 3, kv_len=48))


@pytest.mark.parametrize('mshape', [(64, 64), (32, 4, 64, 64), (1, 4, 64, 64),
                                    (32, 1, 64, 64), (1, 1, 64, 64)])
def test_float_masks_broadcast(mshape):
    rng = np.random.default_rng(7)
    mask = rng.standard_normal(mshape).astype(np.float32)
    _check(_inputs(BIG, np.float32, 4), mask=mask)


@pytest.mark.parametrize('mshape', [(64, 64), (32, 1, 64, 64)])
def test_bool_masks_with_fully_masked_rows(mshape):
    rng = np.random.default_rng(8)
    mask = rng.random(mshape) > 0.3
    mask[..., 3, :] = False            # a query that sees no key: zero weights (safe softmax)
    _check(_inputs(BIG, np.float32, 5), mask=mask)


def test_float64_bool_mask_chunked():
    rng = np.random.default_rng(9)
    mask = rng.random((64, 64)) > 0.5
    mask[:, 0] = True
    _check(_inputs(BIG, np.float64, 6), mask=mask, dtype=np.float64)


def test_forward_arrays_chunked_vs_whole():
    # the chunked path against the all-rows NumPy reference, bit for bit is not
    # required (the sums' order differs): float32 closeness, safe zeros kept
    q, k, v = _inputs(BIG, np.float32, 10)
    bias = np.where(np.random.default_rng(1).random((64, 64)) > 0.5, 0, -np.inf)
    bias = bias.astype(np.float32)
    bias[5] = -np.inf
    out, p = _sdpa.attention_forward(q, k, v, bias, 0.25, True)
    ref_out, ref_p = _sdpa._attention_forward_all(q, np.swapaxes(k, -1, -2), v, bias, 0.25, True)
    np.testing.assert_allclose(p, ref_p, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out, ref_out, rtol=1e-4, atol=1e-6)
    assert not p[:, :, 5].any() and not out[:, :, 5].any()
    g = np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)
    for a, b in zip(_sdpa.attention_backward(g, q, k, v, p, 0.25),
                    _sdpa._attention_backward_all(g, q, k, v, p, 0.25)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_create_graph_agrees_with_fast_path():
    q, k, v = _inputs(BIG, np.float64, 11)
    g = np.random.default_rng(3).standard_normal(q.shape)
    grads = []
    for create in (False, True):
        ins = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = tape.nn.functional.scaled_dot_product_attention(*ins, is_causal=True)
        gs = tape.autograd.grad(out, ins, tape.tensor(g), create_graph=create)
        grads.append([np.asarray(x.detach().numpy()) for x in gs])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_double_backward_against_torch():
    q, k, v = _inputs((16, 4, 64, 8), np.float64, 12)
    res = []
    for lib in (torch, tape):
        ins = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        if lib is torch:        # (torch's fused CPU kernel has no double backward)
            w = torch.softmax(ins[0] @ ins[1].transpose(-2, -1) / np.sqrt(8.0), -1)
            out = w @ ins[2]
        else:
            out = lib.nn.functional.scaled_dot_product_attention(*ins)
        gq, = lib.autograd.grad((out * out).sum(), [ins[0]], create_graph=True)
        (gq * gq).sum().backward()
        res.append([np.asarray(i.grad.detach().numpy()) for i in ins])
    for a, w in zip(res[1], res[0]):
        np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize('batch_first', [True, False])
def test_multihead_attention_packed_chunked(batch_first):
    # N * heads * L * L * 4 = 16 * 4 * 64 * 64 * 4 bytes: the packed path in chunks
    E, H, N, L = 32, 4, 16, 64
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    am = tape.nn.MultiheadAttention(E, H, batch_first=batch_first)
    am.load_state_dict({k: tape.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(13)
    x = rng.standard_normal((N, L, E) if batch_first else (L, N, E)).astype(np.float32)
    kpm = rng.random((N, L)) > 0.8
    kpm[2] = True                      # a sequence with every key padded
    res = []
    for lib, m in ((torch, tm), (tape, am)):
        xt = lib.tensor(x, requires_grad=True)
        out, _ = m(xt, xt, xt, key_padding_mask=lib.tensor(kpm), need_weights=False)
        out = lib.nan_to_num(out)
        (out * out).sum().backward()
        res.append((np.asarray(out.detach().numpy()), np.asarray(xt.grad.numpy()),
                    np.asarray(m.in_proj_weight.grad.numpy())))
    for a, w in zip(res[1], res[0]):
        np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-5)


def test_bmm_and_linear_3d_against_torch():
    rng = np.random.default_rng(14)
    cases = [((8, 16, 64), (8, 64, 16)), ((32, 64, 64), (32, 64, 64)), ((2, 3, 5, 4), (3, 4, 6))]
    for sa, sb in cases:
        a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
        res = []
        for lib in (torch, tape):
            x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
            out = x @ y
            out.backward(lib.ones(*out.shape))
            res.append([np.asarray(t.detach().numpy()) for t in (out, x.grad, y.grad)])
        for got, want in zip(res[1], res[0]):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
