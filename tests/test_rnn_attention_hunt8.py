"""Differential hunt (round 8) over the recurrent and attention modules, against PyTorch.

Fixed:
- ``RNNCell``/``GRUCell``/``LSTMCell`` did not check their states: a state of the
  wrong batch size failed in a broadcast (or, unbatched input with a batched state,
  silently broadcast to a batch), and one of the wrong hidden size in the linear;
  now PyTorch's "Input batch size N doesn't match hiddenI batch size M" and
  "hiddenI has inconsistent hidden_size: got H, expected K" (RuntimeError).
- The cells checked the states' dimensions before the input's; PyTorch checks the
  input first.
- ``F.scaled_dot_product_attention`` accepted an integer (or other-float) mask and
  added it to the scores, and gave matmul's errors for q/k/v of different dtypes or
  under 2-D; now PyTorch's validate_sdpa_input errors, in its order.
- ``F.scaled_dot_product_attention(enable_gqa=True)`` with key/value heads that do not
  divide the query heads failed in a broadcast; now PyTorch's RuntimeError.
- The fused ``RNN``/``LSTM``/``GRU`` layer saved its biases for a version check, so a
  bias changed in place between forward and backward (an optimizer step on it)
  made backward raise; PyTorch's graph keeps the gates, not the biases, and
  backpropagates.  The biases are now unpacked only by the create_graph
  recompute (which still raises there: it would read the changed values).
- ``RNN``/``GRU``/``LSTM`` given an initial hidden state of another dtype than the
  weights cast it silently (the fused layer) and returned a result; PyTorch's
  ``h0 @ W_hh^T`` fails: now its RuntimeError "mat1 and mat2 must have the same
  dtype, but got Double and Float", plain or packed input.
"""
import numpy as np
import pytest

import tape


def _both(fn):
    """``fn(lib)`` for torch and tape: (type name, message) of the error each raises."""
    torch = pytest.importorskip('torch')
    out = []
    for lib in (torch, tape):
        with pytest.raises(Exception) as info:
            fn(lib)
        out.append((type(info.value).__name__, str(info.value)))
    return out


@pytest.mark.parametrize('case', [
    lambda L: L.nn.RNNCell(3, 4)(L.randn(2, 3), L.randn(3, 4)),
    lambda L: L.nn.RNNCell(3, 4)(L.randn(2, 3), L.randn(2, 5)),
    lambda L: L.nn.RNNCell(3, 4)(L.randn(3), L.randn(2, 4)),
    lambda L: L.nn.RNNCell(3, 4)(L.randn(2, 3), L.randn(4)),
    lambda L: L.nn.RNNCell(3, 4, nonlinearity='relu')(L.randn(2, 3), L.randn(3, 4)),
    lambda L: L.nn.GRUCell(3, 4)(L.randn(2, 3), L.randn(2, 5)),
    lambda L: L.nn.GRUCell(3, 4)(L.randn(2, 3), L.randn(1, 4)),
    lambda L: L.nn.GRUCell(3, 4)(L.randn(3), L.randn(3, 4)),
    lambda L: L.nn.LSTMCell(3, 4)(L.randn(2, 3), (L.randn(2, 4), L.randn(3, 4))),
    lambda L: L.nn.LSTMCell(3, 4)(L.randn(2, 3), (L.randn(3, 4), L.randn(2, 4))),
    lambda L: L.nn.LSTMCell(3, 4)(L.randn(2, 3), (L.randn(2, 4), L.randn(2, 6))),
    lambda L: L.nn.LSTMCell(3, 4)(L.randn(3), (L.randn(2, 4), L.randn(2, 4))),
    # the input's dimension is checked before the states'
    lambda L: L.nn.LSTMCell(3, 4)(L.randn(2, 2, 3), (L.randn(1, 1, 4), L.randn(2, 4))),
    lambda L: L.nn.GRUCell(3, 4)(L.randn(2, 2, 3), L.randn(1, 1, 4)),
    lambda L: L.nn.RNNCell(3, 4)(L.randn(2, 2, 3), L.randn(1, 1, 4)),
])
def test_cell_state_checks_match_torch(case):
    got_torch, got_tape = _both(case)
    assert got_tape == got_torch


@pytest.mark.parametrize('cls', ['RNNCell', 'GRUCell', 'LSTMCell'])
@pytest.mark.parametrize('batched', [True, False])
def test_cells_with_good_states_still_match_torch(cls, batched):
    torch = pytest.importorskip('torch')
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(3, 4).double()
    tp = getattr(tape.nn, cls)(3, 4).double()
    tp.load_state_dict({k: tape.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    shp = (2,) if batched else ()
    x = torch.randn(*shp, 3, dtype=torch.float64, requires_grad=True)
    h = torch.randn(*shp, 4, dtype=torch.float64, requires_grad=True)
    c = torch.randn(*shp, 4, dtype=torch.float64, requires_grad=True)
    xt, ht, ct = (tape.tensor(a.detach().numpy()).requires_grad_() for a in (x, h, c))
    if cls == 'LSTMCell':
        ot = sum(o.sum() * (i + 1) for i, o in enumerate(tm(x, (h, c))))
        op = sum(o.sum() * (i + 1) for i, o in enumerate(tp(xt, (ht, ct))))
        pairs = [(x, xt), (h, ht), (c, ct)]
    else:
        ot, op = tm(x, h).sum(), tp(xt, ht).sum()
        pairs = [(x, xt), (h, ht)]
    ot.backward()
    op.backward()
    np.testing.assert_allclose(op.item(), ot.item(), rtol=1e-10)
    for a, b in pairs:
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize('case', [
    # q, k, v of different dtypes
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4).double(), L.randn(2, 5, 6)),
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4), L.randn(2, 5, 6).double()),
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4).double(), L.randn(2, 5, 4), L.randn(2, 5, 6)),
    # under 2-D
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(4), L.randn(2, 5, 4), L.randn(2, 5, 6)),
    # a mask neither bool, float32 nor q's dtype (checked before is_causal's check)
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4), L.randn(2, 5, 6),
        attn_mask=L.zeros(3, 5, dtype=L.int64)),
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4), L.randn(2, 5, 6),
        attn_mask=L.zeros(3, 5, dtype=L.int32), is_causal=True),
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4), L.randn(2, 5, 6),
        attn_mask=L.zeros(3, 5, dtype=L.uint8)),
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 3, 4), L.randn(2, 5, 4), L.randn(2, 5, 6),
        attn_mask=L.zeros(3, 5, dtype=L.float64)),
    # key/value heads that do not divide the query heads
    lambda L: L.nn.functional.scaled_dot_product_attention(
        L.randn(2, 4, 3, 4), L.randn(2, 3, 5, 4), L.randn(2, 3, 5, 6), enable_gqa=True),
])
def test_sdpa_input_validation_matches_torch(case):
    got_torch, got_tape = _both(case)
    assert got_tape == got_torch


def test_sdpa_float32_mask_with_float64_query_matches_torch():
    # PyTorch allows a float32 mask whatever q's dtype; the result keeps q's dtype
    torch = pytest.importorskip('torch')
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 4, dtype=torch.float64, generator=g) for n in (3, 5, 5))
    m = torch.randn(3, 5, generator=g)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
    got = tape.nn.functional.scaled_dot_product_attention(
        *(tape.tensor(a.numpy()) for a in (q, k, v)), attn_mask=tape.tensor(m.numpy()))
    assert got.dtype == tape.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('cls', ['RNN', 'LSTM', 'GRU'])
@pytest.mark.parametrize('extra', [{}, {'bidirectional': True, 'num_layers': 2},
                                   {'batch_first': True}])
@pytest.mark.parametrize('which', ['bias_ih_l0', 'bias_hh_l0'])
def test_bias_changed_in_place_after_forward_backpropagates_like_torch(cls, extra, which):
    torch = pytest.importorskip('torch')
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(3, 4, **extra).double()
    tp = getattr(tape.nn, cls)(3, 4, **extra).double()
    tp.load_state_dict({k: tape.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    xt = tape.tensor(x.detach().numpy()).requires_grad_()
    ot, op = tm(x)[0], tp(xt)[0]
    with torch.no_grad():
        getattr(tm, which).add_(1.0)
    with tape.no_grad():
        getattr(tp, which).add_(1.0)
    (ot ** 2).sum().backward()
    (op ** 2).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), x.grad.numpy(), rtol=1e-9, atol=1e-12)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(dict(tp.named_parameters())[name].grad.numpy(),
                                   p.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_weight_changed_in_place_after_forward_still_raises():
    # the weights are read by BPTT: changing one is an error, as in PyTorch
    m = tape.nn.GRU(3, 4).double()
    out = m(tape.randn(5, 2, 3, dtype=tape.float64, requires_grad=True))[0]
    with tape.no_grad():
        m.weight_hh_l0.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        out.sum().backward()


def test_bias_changed_in_place_refuses_create_graph():
    # the create_graph backward recomputes the layer from its inputs: with a changed
    # bias that would be another function, so it raises rather than answer wrongly
    m = tape.nn.LSTM(3, 4).double()
    x = tape.randn(5, 2, 3, dtype=tape.float64, requires_grad=True)
    out = m(x)[0]
    with tape.no_grad():
        m.bias_hh_l0.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        tape.autograd.grad(out.sum(), x, create_graph=True)


@pytest.mark.parametrize('cls', ['RNN', 'GRU', 'LSTM'])
@pytest.mark.parametrize('packed', [False, True])
@pytest.mark.parametrize('wide', [False, True])
@pytest.mark.parametrize('extra', [{}, {'num_layers': 2, 'bidirectional': True}])
def test_h0_of_another_dtype_raises_like_torch(cls, packed, wide, extra):
    torch = pytest.importorskip('torch')
    n = 4 if extra else 1
    errs = []
    for lib in (torch, tape):
        m = getattr(lib.nn, cls)(3, 4, **extra)
        mdt, hdt = (lib.float32, lib.float64) if wide else (lib.float64, lib.float32)
        m = m.to(mdt)
        x = lib.randn(5, 2, 3, dtype=mdt)
        if packed:
            x = lib.nn.utils.rnn.pack_padded_sequence(x, [5, 3])
        h = lib.zeros(n, 2, 4, dtype=hdt)
        hx = (h, lib.zeros(n, 2, 4, dtype=mdt)) if cls == 'LSTM' else h
        with pytest.raises(RuntimeError) as info:
            m(x, hx)
        errs.append(str(info.value))
    if cls == 'LSTM' and not packed and wide:
        # (PyTorch's CPU LSTM fails there in its oneDNN dispatch, with
        # "get_mkldnn_dtype: unsupported data type")
        assert errs[1] == 'mat1 and mat2 must have the same dtype, but got Double and Float'
    else:
        assert errs[1] == errs[0]


@pytest.mark.parametrize('cls', ['RNN', 'GRU', 'LSTM'])
def test_h0_of_the_weights_dtype_still_runs(cls):
    m = getattr(tape.nn, cls)(3, 4).double()
    h = tape.zeros(1, 2, 4, dtype=tape.float64)
    out = m(tape.randn(5, 2, 3, dtype=tape.float64), (h, h) if cls == 'LSTM' else h)[0]
    assert out.dtype == tape.float64 and tuple(out.shape) == (5, 2, 4)
