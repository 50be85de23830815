"""Fifth nn hunt: discrepancies with PyTorch found by differential runs of the nn
modules and the functional layer, each fixed and pinned here.

* ``F.scaled_dot_product_attention`` on inputs that take the composite path (not
  4-D, a mask that requires grad, dropout) gave NaN for a query whose every key is
  masked; PyTorch's math path uses its safe softmax (zero weights).
* ``F.ctc_loss`` and ``nn.CTCLoss`` were missing.
"""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF


def _np(t):
    return np.asarray(t.detach().numpy())


# -- scaled_dot_product_attention: fully masked rows ------------------------------------
@pytest.mark.parametrize('shape', [(1, 2, 3), (2, 3, 4), (3, 4)])
@pytest.mark.parametrize('kind', ['bool', 'float', 'float_rg'])
def test_sdpa_fully_masked_row_composite_matches_torch(shape, kind):
    torch = pytest.importorskip('torch')
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    q = rng.standard_normal(shape)
    L = shape[-2]
    m = np.ones((L, L), bool)
    m[0] = False
    if kind == 'bool':
        mp, mt = torch.tensor(m), tape.tensor(m)
    else:
        mf = np.where(m, 0.0, -np.inf)
        rg = kind == 'float_rg'
        mp = torch.tensor(mf, requires_grad=rg)
        mt = tape.tensor(mf, requires_grad=rg)
    qp = torch.tensor(q, requires_grad=True)
    qt = tape.tensor(q, requires_grad=True)
    op = F.scaled_dot_product_attention(qp, qp * 2, qp + 1, attn_mask=mp)
    ot = TF.scaled_dot_product_attention(qt, qt * 2, qt + 1, attn_mask=mt)
    assert not np.isnan(_np(ot)).any()
    np.testing.assert_allclose(_np(ot), _np(op), atol=1e-12)
    (op ** 2).sum().backward()
    (ot ** 2).sum().backward()
    np.testing.assert_allclose(_np(qt.grad), _np(qp.grad), atol=1e-10)
    if kind == 'float_rg':
        np.testing.assert_allclose(_np(mt.grad), _np(mp.grad), atol=1e-10)


def test_sdpa_fully_masked_row_dropout_has_no_nan():
    q = tape.randn(1, 2, 3)
    m = tape.tensor([[False, False], [True, True]])
    out = TF.scaled_dot_product_attention(q, q, q, attn_mask=m, dropout_p=0.5)
    assert not np.isnan(_np(out)).any()
    assert (_np(out)[0, 0] == 0).all()


def test_sdpa_fully_masked_row_gradcheck():
    rng = np.random.default_rng(1)
    q = tape.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    m = np.ones((3, 3), bool)
    m[1] = False
    mt = tape.tensor(m)
    assert tape.autograd.gradcheck(
        lambda a: TF.scaled_dot_product_attention(a, a * 0.5, a, attn_mask=mt), (q,))
    assert tape.autograd.gradgradcheck(
        lambda a: TF.scaled_dot_product_attention(a, a * 0.5, a, attn_mask=mt), (q,))


# -- CTC loss ------------------------------------------------------------------------
def _ctc_case(rng, T, N, C, S, blank):
    il = rng.integers(0, T + 1, N)
    tl = rng.integers(0, S + 1, N)
    tg = rng.integers(0, C - 1, (N, max(S, 1)))
    tg = np.where(tg >= blank, tg + 1, tg)      # labels other than blank
    return il, tl, tg


@pytest.mark.parametrize('seed', range(40))
def test_ctc_loss_matches_torch(seed):
    torch = pytest.importorskip('torch')
    F = torch.nn.functional
    rng = np.random.default_rng(seed)
    T, N, C, S = (int(rng.integers(1, 10)), int(rng.integers(1, 4)),
                  int(rng.integers(2, 6)), int(rng.integers(0, 5)))
    blank = int(rng.integers(0, C))
    il, tl, tg = _ctc_case(rng, T, N, C, S, blank)
    red = ('none', 'mean', 'sum')[seed % 3]
    zi = bool(seed % 2)
    if seed % 4 == 3:   # concatenated targets
        tg = np.concatenate([tg[n, :tl[n]] for n in range(N)]).astype(np.int64)
    x = rng.standard_normal((T, N, C)) * 2
    xp = torch.tensor(x, requires_grad=True)
    xt = tape.tensor(x, requires_grad=True)
    lp = F.ctc_loss(F.log_softmax(xp, 2), torch.tensor(tg), torch.tensor(il), torch.tensor(tl),
                    blank=blank, reduction=red, zero_infinity=zi)
    lt = TF.ctc_loss(TF.log_softmax(xt, 2), tape.tensor(tg), tape.tensor(il), tape.tensor(tl),
                     blank=blank, reduction=red, zero_infinity=zi)
    np.testing.assert_allclose(_np(lt), _np(lp), rtol=1e-10, atol=1e-10)
    g = rng.standard_normal(tuple(lp.shape))
    (lp * torch.tensor(g)).sum().backward()
    (lt * tape.tensor(g)).sum().backward()
    np.testing.assert_allclose(_np(xt.grad), _np(xp.grad), rtol=1e-8, atol=1e-10)


def test_ctc_loss_leaf_log_probs_gradient_is_torchs():
    """PyTorch's gradient w.r.t. log_probs is exp(lp) - posterior (the logits'
    gradient through log_softmax); impossible alignments give inf and NaN, zeros
    past each input length."""
    torch = pytest.importorskip('torch')
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    lp = np.log(rng.dirichlet(np.ones(4), (5, 2)))
    tg, il, tl = np.array([[1, 1, 1], [1, 2, 3]]), np.array([2, 5]), np.array([3, 3])
    for zi in (False, True):
        a = torch.tensor(lp, requires_grad=True)
        b = tape.tensor(lp, requires_grad=True)
        la = F.ctc_loss(a, torch.tensor(tg), torch.tensor(il), torch.tensor(tl),
                        reduction='none', zero_infinity=zi)
        lb = TF.ctc_loss(b, tape.tensor(tg), tape.tensor(il), tape.tensor(tl),
                         reduction='none', zero_infinity=zi)
        np.testing.assert_allclose(_np(lb), _np(la), rtol=1e-10)
        la.sum().backward()
        lb.sum().backward()
        np.testing.assert_allclose(_np(b.grad), _np(a.grad), rtol=1e-8, atol=1e-10)


def test_ctc_loss_module_unbatched_and_sequences():
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(4)
    lp = np.log(rng.dirichlet(np.ones(5), (8, 3)))
    tg = np.array([[1, 2, 2, 0], [3, 1, 4, 4], [1, 1, 0, 0]])
    pm, tm = torch.nn.CTCLoss(blank=0), tape.nn.CTCLoss(blank=0)
    assert repr(tm) == repr(pm) == 'CTCLoss()'
    a = pm(torch.tensor(lp), torch.tensor(tg), (8, 7, 6), (3, 4, 2))
    b = tm(tape.tensor(lp), tape.tensor(tg), (8, 7, 6), [3, 4, 2])
    np.testing.assert_allclose(_np(b), _np(a), rtol=1e-10)
    # unbatched: (T, C) log-probs, (S,) targets, scalar lengths -> a 0-d loss
    a = torch.nn.functional.ctc_loss(torch.tensor(lp[:, 0]), torch.tensor(tg[0, :3]),
                                     torch.tensor(8), torch.tensor(3), reduction='none')
    b = TF.ctc_loss(tape.tensor(lp[:, 0]), tape.tensor(tg[0, :3]), tape.tensor(8),
                    tape.tensor(3), reduction='none')
    assert tuple(b.shape) == tuple(a.shape) == ()
    np.testing.assert_allclose(_np(b), _np(a), rtol=1e-10)
    # float32 stays float32
    c = TF.ctc_loss(tape.tensor(lp.astype(np.float32)), tape.tensor(tg), (8, 7, 6), (3, 4, 2))
    assert c.dtype == tape.float32


def test_ctc_loss_gradcheck_and_twice_differentiation_raises():
    rng = np.random.default_rng(5)
    x = tape.tensor(rng.standard_normal((6, 2, 4)), requires_grad=True)
    tg, il, tl = tape.tensor([[1, 2, 2], [3, 1, 0]]), tape.tensor([6, 5]), tape.tensor([3, 2])
    for red in ('none', 'mean', 'sum'):
        assert tape.autograd.gradcheck(
            lambda a: TF.ctc_loss(a.log_softmax(2), tg, il, tl, reduction=red), (x,))
    g, = tape.autograd.grad(TF.ctc_loss(x.log_softmax(2), tg, il, tl), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_ctc_loss_errors_are_torchs_types():
    torch = pytest.importorskip('torch')
    F = torch.nn.functional
    lp = np.log(np.full((5, 2, 4), 0.25))
    cases = [
        ((np.array([[1, 1], [1, 2]]), [5, 5], [-1, 2]), {}),     # negative target length
        ((np.array([[1, 1], [1, 2]]), [-1, 5], [1, 2]), {}),     # negative input length
        ((np.array([[1, 1], [1, 2]]), [5, 5], [3, 2]), {}),      # target length > S
        ((np.array([[1, 1], [1, 2]]), [6, 5], [1, 2]), {}),      # input length > T
        ((np.array([[1, 1], [1, 2]]), [5], [1, 2]), {}),         # lengths != batch
        ((np.array([[1, 1], [1, 2]]), [5, 5], [1]), {}),
        ((np.array([[1, 1]]), [5, 5], [1, 2]), {}),              # targets' batch
        ((np.array([1, 1]), [5, 5], [1, 2]), {}),                # concatenated too short
        ((np.array([[1, 1], [1, 2]]), [5, 5], [1, 2]), {'blank': 4}),
        ((np.array([[1, 1], [1, 2]]), [5, 5], [1, 2]), {'reduction': 'avg'}),
    ]
    for (tg, il, tl), kw in cases:
        with pytest.raises(Exception) as ep:
            F.ctc_loss(torch.tensor(lp), torch.tensor(tg), torch.tensor(il),
                       torch.tensor(tl), **kw)
        with pytest.raises(ep.type):
            TF.ctc_loss(tape.tensor(lp), tape.tensor(tg), tape.tensor(il),
                        tape.tensor(tl), **kw)
    with pytest.raises(RuntimeError, match='must be integral'):
        TF.ctc_loss(tape.tensor(lp), tape.tensor([[1], [1]]), tape.tensor([5.0, 5.0]),
                    tape.tensor([1, 1]))
    with pytest.raises(RuntimeError, match='3-dimensional'):
        TF.ctc_loss(tape.tensor(lp[None]), tape.tensor([[1], [1]]), [5, 5], [1, 1])


# -- nll_loss / cross_entropy: a (1,) target for an unbatched input ---------------------
@pytest.mark.parametrize('fn', ['nll_loss', 'cross_entropy'])
@pytest.mark.parametrize('reduction', ['none', 'mean', 'sum'])
def test_unbatched_input_takes_one_element_target(fn, reduction):
    torch = pytest.importorskip('torch')
    x = np.random.default_rng(0).standard_normal(4)
    a = torch.tensor(x, requires_grad=True)
    b = tape.tensor(x, requires_grad=True)
    la = getattr(torch.nn.functional, fn)(a, torch.tensor([2]), reduction=reduction)
    lb = getattr(TF, fn)(b, tape.tensor([2]), reduction=reduction)
    assert tuple(lb.shape) == tuple(la.shape) == ()
    np.testing.assert_allclose(_np(lb), _np(la), rtol=1e-12)
    # (PyTorch's backward of this form fails on a size check: the gradient is
    # that of the 0-d target)
    lb.backward()
    a0 = torch.tensor(x, requires_grad=True)
    getattr(torch.nn.functional, fn)(a0, torch.tensor(2), reduction=reduction).backward()
    np.testing.assert_allclose(_np(b.grad), _np(a0.grad), rtol=1e-12)
    with pytest.raises(ValueError, match='1D target must have size 1'):
        getattr(TF, fn)(b, tape.tensor([1, 2]), reduction=reduction)


# -- interpolate(antialias=True) -----------------------------------------------------------
@pytest.mark.parametrize('mode', ['bilinear', 'bicubic'])
@pytest.mark.parametrize('align_corners', [False, True])
@pytest.mark.parametrize('spec', [{'size': (4, 3)}, {'size': (16, 20)}, {'size': (1, 1)},
                                  {'scale_factor': 0.33}, {'scale_factor': (0.7, 2.5)},
                                  {'scale_factor': 0.45, 'recompute_scale_factor': True},
                                  {'size': (2, 27)}])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_interpolate_antialias_matches_torch(mode, align_corners, spec, dtype):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 13, 9)).astype(dtype)
    xp = torch.tensor(x, requires_grad=True)
    xt = tape.tensor(x, requires_grad=True)
    op = torch.nn.functional.interpolate(xp, mode=mode, align_corners=align_corners,
                                         antialias=True, **spec)
    ot = TF.interpolate(xt, mode=mode, align_corners=align_corners, antialias=True, **spec)
    assert ot.dtype == (tape.float32 if dtype == np.float32 else tape.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(_np(ot), _np(op), rtol=tol, atol=tol)
    g = rng.standard_normal(tuple(op.shape)).astype(dtype)
    (op * torch.tensor(g)).sum().backward()
    (ot * tape.tensor(g)).sum().backward()
    np.testing.assert_allclose(_np(xt.grad), _np(xp.grad), rtol=tol, atol=tol)


def test_interpolate_antialias_gradcheck_and_errors():
    x = tape.tensor(np.random.default_rng(1).standard_normal((1, 2, 7, 6)), requires_grad=True)
    for mode in ('bilinear', 'bicubic'):
        f = (lambda a, mode=mode: TF.interpolate(a, size=(3, 4), mode=mode, antialias=True))
        assert tape.autograd.gradcheck(f, (x,))
        assert tape.autograd.gradgradcheck(f, (x,))
    with pytest.raises(ValueError, match='Anti-alias'):
        TF.interpolate(tape.ones(1, 2, 3), size=2, mode='linear', antialias=True)
    with pytest.raises(ValueError, match='Anti-alias'):
        TF.interpolate(tape.ones(1, 2, 3, 3), size=2, mode='nearest', antialias=True)


# -- normalizations and prelu: parameter dtypes --------------------------------------------
def _norm_cases(L, xd, pd, X):
    F = L.nn.functional

    def mk(a, d):
        return L.tensor(np.asarray(a).astype(d))
    return {
        'bn train': lambda: F.batch_norm(mk(X, xd), None, None, mk(np.ones(3), pd),
                                         mk(np.zeros(3), pd), training=True),
        'bn running': lambda: F.batch_norm(mk(X, xd), mk(np.zeros(3), pd), mk(np.ones(3), pd),
                                           training=True),
        'bn eval mixed': lambda: F.batch_norm(mk(X, xd), mk(np.zeros(3), xd),
                                              mk(np.ones(3), xd), mk(np.ones(3), pd),
                                              training=False),
        'ln': lambda: F.layer_norm(mk(X, xd), (5,), mk(np.ones(5), pd), mk(np.zeros(5), pd)),
        'gn': lambda: F.group_norm(mk(X, xd), 3, mk(np.ones(3), pd), mk(np.zeros(3), pd)),
        'in weight': lambda: F.instance_norm(mk(X, xd), weight=mk(np.ones(3), pd)),
        'in running': lambda: F.instance_norm(mk(X, xd), mk(np.zeros(3), pd),
                                              mk(np.ones(3), pd), use_input_stats=False),
        'prelu': lambda: F.prelu(mk(X, xd), mk(np.full(1, 0.2), pd)),
        'rms': lambda: F.rms_norm(mk(X, xd), (5,), mk(np.full(5, 2.0), pd)),
        'BatchNorm1d': lambda: L.nn.BatchNorm1d(3).to(getattr(L, pd))(mk(X, xd)),
        'LayerNorm': lambda: L.nn.LayerNorm(5).to(getattr(L, pd))(mk(X, xd)),
    }


@pytest.mark.parametrize('xd', ['float16', 'float32', 'float64'])
@pytest.mark.parametrize('pd', ['float16', 'float32', 'float64'])
def test_norm_parameter_dtypes_as_torch(xd, pd):
    """PyTorch's CPU rule: weight, bias and batch_norm's running statistics of the
    input's dtype, or float32 ones for a float16 input (a float16 result); any other
    mix raises RuntimeError (it used to promote silently)."""
    torch = pytest.importorskip('torch')
    X = np.random.default_rng(0).standard_normal((4, 3, 5))
    pc, tc = _norm_cases(torch, xd, pd, X), _norm_cases(tape, xd, pd, X)
    for name in pc:
        try:
            want = pc[name]()
        except RuntimeError:
            with pytest.raises(RuntimeError):
                tc[name]()
            continue
        got = tc[name]()
        assert str(got.dtype).split('.')[-1] == str(want.dtype).split('.')[-1], name
        np.testing.assert_allclose(_np(got).astype(np.float32),
                                   want.detach().float().numpy(), atol=2e-2, err_msg=name)


def test_float16_input_float32_norm_modules_gradients():
    torch = pytest.importorskip('torch')
    X = np.random.default_rng(1).standard_normal((4, 3, 5)).astype(np.float16)
    for name in ('BatchNorm1d', 'LayerNorm'):
        got = []
        for L in (torch, tape):
            m = getattr(L.nn, name)(3 if name == 'BatchNorm1d' else 5)
            x = L.tensor(X, requires_grad=True)
            y = m(x)
            (y.float() ** 2).sum().backward()
            got.append((str(y.dtype).split('.')[-1], str(x.grad.dtype).split('.')[-1],
                        str(m.weight.grad.dtype).split('.')[-1], m.weight.grad.numpy()))
        assert got[0][:3] == got[1][:3] == ('float16', 'float16', 'float32')
        np.testing.assert_allclose(got[1][3], got[0][3], rtol=2e-3, atol=2e-2)


# -- mse_loss / smooth_l1_loss of integer or bool operands ------------------------------
@pytest.mark.parametrize('fn,kernel', [('mse_loss', 'mse_cpu'),
                                       ('smooth_l1_loss', 'smooth_l1_cpu')])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_integer_losses_raise_not_implemented(fn, kernel, reduction):
    f = getattr(TF, fn)
    for a, b, name in ((tape.tensor([1, 2]), tape.tensor([1, 3]), 'Long'),
                       (tape.tensor([True, False]), tape.tensor([True, True]), 'Bool'),
                       (tape.tensor([1, 2], dtype=tape.int32), tape.tensor([True, True]), 'Int')):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'{name}\''):
            f(a, b, reduction=reduction)
    # one float operand: computed in its dtype, as PyTorch
    out = f(tape.tensor([1, 2]), tape.tensor([1.0, 3.0]), reduction=reduction)
    assert out.dtype == tape.float32


# -- modules that were missing: RNNBase/RNNCellBase exports, NLLLoss2d,
# -- AdaptiveLogSoftmaxWithLoss ---------------------------------------------------------
def test_rnn_base_classes_exported():
    torch = pytest.importorskip('torch')
    assert isinstance(tape.nn.LSTM(3, 4), tape.nn.RNNBase)
    assert isinstance(tape.nn.GRUCell(3, 4), tape.nn.RNNCellBase)
    for L in (torch, tape):
        m = L.nn.RNNBase('LSTM', 3, 4)
        assert repr(m) == 'RNNBase(3, 4)'
        assert [n for n, _ in m.named_parameters()] == ['weight_ih_l0', 'weight_hh_l0',
                                                        'bias_ih_l0', 'bias_hh_l0']
        with pytest.raises(ValueError, match='Unrecognized RNN mode'):
            L.nn.RNNBase('FOO', 3, 4)


def test_nllloss2d_is_deprecated_nllloss():
    with pytest.warns(FutureWarning, match='NLLLoss2d'):
        m = tape.nn.NLLLoss2d(ignore_index=1)
    assert isinstance(m, tape.nn.NLLLoss) and repr(m) == 'NLLLoss2d()'
    x = tape.randn(2, 3, 4, 4).log_softmax(1)
    t = tape.randint(0, 3, (2, 4, 4))
    np.testing.assert_allclose(m(x, t).item(), TF.nll_loss(x, t, ignore_index=1).item())


@pytest.mark.parametrize('kw', [dict(in_features=8, n_classes=20, cutoffs=[4, 10]),
                                dict(in_features=16, n_classes=30, cutoffs=[5, 12, 25],
                                     div_value=2.0, head_bias=True),
                                dict(in_features=6, n_classes=10, cutoffs=[9])])
def test_adaptive_log_softmax_matches_torch(kw):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    pm = torch.nn.AdaptiveLogSoftmaxWithLoss(**kw).double()
    tm = tape.nn.AdaptiveLogSoftmaxWithLoss(**kw).double()
    assert repr(tm) == repr(pm)
    assert list(tm.state_dict()) == list(pm.state_dict())
    tm.load_state_dict({k: tape.tensor(v.numpy()) for k, v in pm.state_dict().items()})
    for B in (7, 1):
        x = rng.standard_normal((B, kw['in_features']))
        t = rng.integers(0, kw['n_classes'], B)
        xp = torch.tensor(x, requires_grad=True)
        xt = tape.tensor(x, requires_grad=True)
        op, ot = pm(xp, torch.tensor(t)), tm(xt, tape.tensor(t))
        np.testing.assert_allclose(_np(ot.output), _np(op.output), rtol=1e-10)
        np.testing.assert_allclose(ot.loss.item(), op.loss.item(), rtol=1e-10)
        (op.loss + op.output.sum() * 0.3).backward()
        (ot.loss + ot.output.sum() * 0.3).backward()
        np.testing.assert_allclose(_np(xt.grad), _np(xp.grad), rtol=1e-8, atol=1e-12)
        tp = dict(tm.named_parameters())
        for k, v in pm.named_parameters():
            assert (tp[k].grad is None) == (v.grad is None), k      # (an unused cluster)
            if v.grad is not None:
                np.testing.assert_allclose(_np(tp[k].grad), _np(v.grad), rtol=1e-8,
                                           atol=1e-12)
        pm.zero_grad()
        tm.zero_grad()
        np.testing.assert_allclose(_np(tm.log_prob(tape.tensor(x))),
                                   _np(pm.log_prob(torch.tensor(x))), rtol=1e-10)
        np.testing.assert_array_equal(_np(tm.predict(tape.tensor(x))),
                                      _np(pm.predict(torch.tensor(x))))
    x = rng.standard_normal(kw['in_features'])
    ot = tm(tape.tensor(x), tape.tensor(kw['n_classes'] - 1))
    op = pm(torch.tensor(x), torch.tensor(kw['n_classes'] - 1))
    assert tuple(ot.output.shape) == ()
    np.testing.assert_allclose(ot.output.item(), op.output.item(), rtol=1e-10)
    with pytest.raises(RuntimeError, match='Target values should be in'):
        tm(tape.tensor(rng.standard_normal((2, kw['in_features']))),
           tape.tensor([0, kw['n_classes']]))
    with pytest.raises(RuntimeError, match='multi-target not supported'):
        tm(tape.tensor(rng.standard_normal((2, kw['in_features']))), tape.tensor([[0, 1]]))
    with pytest.raises(ValueError, match='cutoffs'):
        tape.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])


def test_adaptive_log_softmax_gradcheck():
    m = tape.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 6]).double()
    rng = np.random.default_rng(1)
    x = tape.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    t = tape.tensor([0, 4, 9, 2, 7])
    assert tape.autograd.gradcheck(lambda a: m(a, t).output, (x,))
    assert tape.autograd.gradcheck(lambda a: m.log_prob(a), (x,))


# -- fractional max pooling (was missing) ------------------------------------------------
@pytest.mark.parametrize('nd,shape,ks,spec', [
    (2, (2, 3, 9, 11), 2, {'output_size': (4, 5)}),
    (2, (2, 3, 9, 11), (3, 2), {'output_ratio': (0.5, 0.5)}),
    (2, (3, 7, 7), 3, {'output_size': 5}),
    (2, (2, 2, 8, 8), 2, {'output_size': 1}),
    (3, (2, 2, 6, 7, 8), 2, {'output_size': (3, 4, 5)}),
    (3, (2, 5, 6, 7), (2, 3, 2), {'output_ratio': (0.5, 0.5, 0.5)}),
])
@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('ties', [False, True])
def test_fractional_max_pool_matches_torch(nd, shape, ks, spec, dtype, ties):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    if ties:
        x = np.round(x)
    n = shape[0] if len(shape) == nd + 2 else 1
    u = rng.random((n, shape[-nd - 1], nd)).astype(dtype)
    xp = torch.tensor(x, requires_grad=True)
    xt = tape.tensor(x, requires_grad=True)
    op, ip = getattr(torch.nn.functional, f'fractional_max_pool{nd}d')(
        xp, ks, return_indices=True, _random_samples=torch.tensor(u), **spec)
    ot, it = getattr(TF, f'fractional_max_pool{nd}d')(
        xt, ks, return_indices=True, _random_samples=tape.tensor(u), **spec)
    np.testing.assert_array_equal(_np(ot), _np(op))
    np.testing.assert_array_equal(_np(it), _np(ip))
    assert it.dtype == tape.int64
    g = rng.standard_normal(tuple(op.shape)).astype(dtype)
    (op * torch.tensor(g)).sum().backward()
    (ot * tape.tensor(g)).sum().backward()
    np.testing.assert_allclose(_np(xt.grad), _np(xp.grad), rtol=1e-6, atol=1e-6)
    mod = {k: (v if k != 'output_ratio' else v[0]) for k, v in spec.items()}
    pm = getattr(torch.nn, f'FractionalMaxPool{nd}d')(ks, _random_samples=torch.tensor(u), **mod)
    tm = getattr(tape.nn, f'FractionalMaxPool{nd}d')(ks, _random_samples=tape.tensor(u), **mod)
    assert repr(tm) == repr(pm)
    assert list(tm.state_dict()) == list(pm.state_dict())
    np.testing.assert_array_equal(_np(tm(tape.tensor(x))), _np(pm(torch.tensor(x))))


def test_fractional_max_pool_nan_errors_and_gradcheck():
    torch = pytest.importorskip('torch')
    F = torch.nn.functional
    x = np.array([[[[1., np.nan, 3.], [np.nan, 2., 0.], [1., 1., 1.]]]])
    u = np.array([[[0.3, 0.6]]])
    op, ip = F.fractional_max_pool2d(torch.tensor(x), 2, output_size=2, return_indices=True,
                                     _random_samples=torch.tensor(u))
    ot, it = TF.fractional_max_pool2d(tape.tensor(x), 2, output_size=2, return_indices=True,
                                      _random_samples=tape.tensor(u))
    np.testing.assert_array_equal(_np(ot), _np(op))
    np.testing.assert_array_equal(_np(it), _np(ip))
    cases = [
        (lambda L, G: G.fractional_max_pool2d(L.randn(1, 1, 5, 5), 2)),           # no size
        (lambda L, G: G.fractional_max_pool2d(L.randn(1, 1, 4, 4), 2, output_size=4)),
        (lambda L, G: G.fractional_max_pool3d(L.randn(1, 1, 4, 4, 4), 2, output_size=3)),
        (lambda L, G: G.fractional_max_pool3d(L.randn(1, 1, 9, 9, 4), 2, output_size=3)),
        (lambda L, G: G.fractional_max_pool2d(L.randn(5, 5), 2, output_size=2)),
        (lambda L, G: G.fractional_max_pool2d(L.randn(1, 2, 5, 5), 2, output_size=2,
                                              _random_samples=L.rand(1, 1, 2))),
        (lambda L, G: L.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)),
        (lambda L, G: L.nn.FractionalMaxPool2d(2)),
        (lambda L, G: L.nn.FractionalMaxPool2d(2, output_ratio=1.5)),
        (lambda L, G: L.nn.FractionalMaxPool3d(0, output_ratio=0.5)),
    ]
    for case in cases:
        with pytest.raises(Exception) as ep:
            case(torch, F)
        with pytest.raises(ep.type):
            case(tape, TF)
    tape.manual_seed(0)
    assert tuple(tape.nn.FractionalMaxPool2d(3, output_ratio=0.5)(tape.randn(2, 3, 10, 10))
                 .shape) == (2, 3, 5, 5)
    rng = np.random.default_rng(2)
    xg = tape.tensor(rng.standard_normal((1, 2, 7, 7)), requires_grad=True)
    ug = tape.tensor(rng.random((1, 2, 2)))
    assert tape.autograd.gradcheck(
        lambda a: TF.fractional_max_pool2d(a, 2, output_size=4, _random_samples=ug), (xg,))
    assert tape.autograd.gradgradcheck(
        lambda a: TF.fractional_max_pool2d(a, 2, output_size=4, _random_samples=ug), (xg,))


# -- state_dict()._metadata ---------------------------------------------------------------
def test_state_dict_carries_module_versions():
    torch = pytest.importorskip('torch')
    got = []
    for L in (torch, tape):
        m = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.BatchNorm1d(3))
        sd = m.state_dict()
        got.append((dict(sd._metadata), dict(m.state_dict(prefix='p.')._metadata)))
        # a versioned (current) BatchNorm state without its count is incomplete
        del sd['1.num_batches_tracked']
        with pytest.raises(RuntimeError, match='num_batches_tracked'):
            m.load_state_dict(sd)
        # a plain dict (no versions) is taken as an old checkpoint: the count is added
        m.load_state_dict({k: v for k, v in sd.items()})
    assert got[0] == got[1]


# -- gumbel_softmax (was missing) --------------------------------------------------------
def test_gumbel_softmax():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5))
    a = tape.tensor(x, requires_grad=True)
    y = TF.gumbel_softmax(a, tau=0.5)
    np.testing.assert_allclose(_np(y).sum(1), 1.0, rtol=1e-12)
    h = TF.gumbel_softmax(a, tau=0.5, hard=True, dim=0)
    assert set(np.unique(_np(h)).tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(_np(h).sum(0), 1.0)
    # hard: the one-hot of the soft sample's argmax, with its gradient (straight-through)
    c = tape.tensor(rng.standard_normal((4, 5)))
    tape.manual_seed(3)
    soft = TF.gumbel_softmax(a, tau=0.7)
    gs, = tape.autograd.grad((soft * c).sum(), a)
    tape.manual_seed(3)
    hard = TF.gumbel_softmax(a, tau=0.7, hard=True)
    gh, = tape.autograd.grad((hard * c).sum(), a)
    np.testing.assert_array_equal(_np(hard).argmax(1), _np(soft).argmax(1))
    np.testing.assert_allclose(_np(gh), _np(gs), rtol=1e-12, atol=1e-15)

    def f(t):
        tape.manual_seed(5)
        return TF.gumbel_softmax(t, tau=0.8)
    assert tape.autograd.gradcheck(f, (a,))
    # hard samples follow softmax(logits)
    tape.manual_seed(1)
    freq = TF.gumbel_softmax(tape.tensor([[1.0, 0.0, -1.0]]).expand(20000, 3), hard=True).mean(0)
    np.testing.assert_allclose(_np(freq), _np(tape.softmax(tape.tensor([1.0, 0.0, -1.0]), 0)),
                               atol=0.02)
    assert TF.gumbel_softmax(tape.randn(2, 3)).dtype == tape.float32


# -- F.celu_, F.selu_, F.hardtanh_ (were missing) --------------------------------------------
@pytest.mark.parametrize('name,kw', [('celu_', {'alpha': 0.5}), ('selu_', {}),
                                     ('hardtanh_', {'min_val': -0.5, 'max_val': 2.0})])
def test_inplace_activation_functions(name, kw):
    torch = pytest.importorskip('torch')
    x = np.random.default_rng(0).standard_normal(6) * 3
    got = []
    for L in (torch, tape):
        a = L.tensor(x, requires_grad=True)
        b = a * 1.0
        out = getattr(L.nn.functional, name)(b, **kw)
        assert out is b
        (out * out).sum().backward()
        got.append((b.detach().numpy().copy(), a.grad.numpy().copy()))
        with pytest.raises(RuntimeError, match='leaf Variable'):
            getattr(L.nn.functional, name)(L.tensor(x, requires_grad=True), **kw)
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-12)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-12)


# -- binary_cross_entropy's target dtype, BCE-with-logits' integer targets -------------------
def test_bce_target_dtypes_as_torch():
    torch = pytest.importorskip('torch')
    x = np.random.default_rng(0).random(3) * 0.8 + 0.1
    cases = {
        'f32,f64': lambda L, F: F.binary_cross_entropy(L.tensor(x, dtype=L.float32),
                                                       L.tensor(x)),
        'f64,f32': lambda L, F: F.binary_cross_entropy(L.tensor(x), L.tensor(x).float()),
        'f32,long': lambda L, F: F.binary_cross_entropy(L.tensor(x).float(),
                                                        L.ones(3, dtype=L.int64)),
        'module': lambda L, F: L.nn.BCELoss()(L.tensor(x).float(), L.tensor(x)),
        'weight f64': lambda L, F: F.binary_cross_entropy(L.tensor(x).float(),
                                                          L.tensor(x).float(),
                                                          weight=L.ones(3).double()),
        'logits long': lambda L, F: F.binary_cross_entropy_with_logits(
            L.tensor(x).float(), L.ones(3, dtype=L.int64)),
        'logits int32': lambda L, F: L.nn.BCEWithLogitsLoss()(
            L.tensor(x).float(), L.ones(3, dtype=L.int32)),
        'logits f64': lambda L, F: F.binary_cross_entropy_with_logits(L.tensor(x).float(),
                                                                      L.tensor(x)),
    }
    for name, case in cases.items():
        try:
            want = case(torch, torch.nn.functional)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e).split(' (')[0][:30]):
                case(tape, TF)
            continue
        got = case(tape, TF)
        assert str(got.dtype).split('.')[-1] == str(want.dtype).split('.')[-1], name
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
