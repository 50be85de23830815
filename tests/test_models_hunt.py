"""Small training programs run side by side on tape and PyTorch (float64):
losses and every parameter's ``.grad`` compared after each step."""
import numpy as np
import pytest

import tape
import tape.nn.functional as PF

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, 'detach') else t, dtype=float)


def _close(a, b, rtol=1e-6, atol=1e-9):
    np.testing.assert_allclose(_np(b), _np(a), rtol=rtol, atol=atol)


def _run_both(prog):
    ra, rb = prog(torch, TF), prog(tape, PF)
    assert len(ra) == len(rb)
    for sa, sb in zip(ra, rb):
        assert sa.keys() == sb.keys()
        for k in sa:
            _close(sa[k], sb[k])


def _P(T, a):
    return T.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


# -- scaled_dot_product_attention -------------------------------------------------

@pytest.mark.parametrize('kw', [dict(), dict(is_causal=True), dict(scale=0.3),
                                dict(mask='bool'), dict(mask='float'), dict(gqa=True)])
def test_sdpa_matches_torch(kw):
    rng = np.random.default_rng(0)
    B, H, L, S, E = 2, 2, 4, 5, 3
    if kw.get('is_causal'):
        S = L
    qn, kn, vn = (rng.normal(size=(B, H, n, E)) for n in (L, S, S))
    if kw.get('gqa'):
        kn, vn = kn[:, :1], vn[:, :1]
    maskb = rng.random((L, S)) > 0.3
    maskb[:, 0] = True
    maskf = rng.normal(size=(L, S))

    def prog(T, F):
        q, k, v = (_P(T, a) for a in (qn, kn, vn))
        extra = {}
        if kw.get('mask') == 'bool':
            extra['attn_mask'] = T.tensor(maskb)
        if kw.get('mask') == 'float':
            extra['attn_mask'] = T.tensor(maskf)
        if 'is_causal' in kw:
            extra['is_causal'] = True
        if 'scale' in kw:
            extra['scale'] = kw['scale']
        if kw.get('gqa'):
            extra['enable_gqa'] = True
        out = F.scaled_dot_product_attention(q, k, v, **extra)
        (out * out.detach().cos()).sum().backward()
        return [{'out': out, 'q': q.grad, 'k': k.grad, 'v': v.grad}]
    _run_both(prog)


def test_sdpa_causal_with_mask_raises_like_torch():
    q = np.zeros((1, 2, 2))
    for T, F in ((torch, TF), (tape, PF)):
        t = T.tensor(q)
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(t, t, t, attn_mask=T.ones(2, 2, dtype=T.bool),
                                           is_causal=True)


# -- clip_grad_norm_ / clip_grad_value_ --------------------------------------------

@pytest.mark.parametrize('norm_type', [2.0, 1, float('inf')])
def test_clip_grad_norm_matches_torch(norm_type):
    rng = np.random.default_rng(1)
    init = [rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(2,))]

    def prog(T, F):
        ps = [_P(T, a) for a in init]
        (sum((p ** 3).sum() for p in ps[:2])).backward()    # ps[2] has no grad
        n = T.nn.utils.clip_grad_norm_(ps, max_norm=0.5, norm_type=norm_type)
        n2 = T.nn.utils.clip_grad_norm_(ps[0], 100.0)           # a single tensor, no clipping
        rec = {'n': n, 'n2': n2, 'g0': ps[0].grad, 'g1': ps[1].grad}
        assert ps[2].grad is None
        T.nn.utils.clip_grad_value_(ps, 0.05)
        rec['v0'] = ps[0].grad
        return [rec]
    _run_both(prog)


# -- linalg.solve / inv (Newton's method) -------------------------------------------

def test_newton_with_linalg_solve_matches_torch():
    def f(T, z):
        return (z ** 4).sum() + (z[0] * z[1]).sin() + T.exp(z[2]) - z.prod()

    def prog(T, F):
        out = []
        x = _P(T, [1.5, -0.5, 0.7])
        for _ in range(4):
            y = f(T, x)
            g, = T.autograd.grad(y, x, create_graph=True)
            Hm = T.stack([T.autograd.grad(g[i], x, retain_graph=True)[0] for i in range(3)])
            dx = T.linalg.solve(Hm, g.detach())
            out.append({'f': y.detach(), 'g': g.detach(), 'dx': dx,
                        'inv': T.linalg.inv(Hm) @ g.detach()})
            with T.no_grad():
                x = (x - dx).requires_grad_()
        return out
    _run_both(prog)


def test_linalg_solve_inv_grads_match_torch():
    rng = np.random.default_rng(3)
    An = rng.normal(size=(2, 3, 3)) + 3 * np.eye(3)
    Bn = rng.normal(size=(2, 3, 2))
    bn = rng.normal(size=(3,))

    def prog(T, F):
        A, Bm, b = _P(T, An), _P(T, Bn), _P(T, bn)
        X = T.linalg.solve(A, Bm)
        x1 = T.linalg.solve(A[0], b)
        Ai = T.linalg.inv(A)
        loss = (X.sin()).sum() + (x1 ** 2).sum() + (Ai * Ai).sum() + T.inverse(A[1]).sum()
        gA, = T.autograd.grad(loss, A, create_graph=True)
        (gA ** 2).sum().backward()
        return [{'X': X, 'x1': x1, 'Ai': Ai, 'gA': gA, 'A': A.grad, 'B': Bm.grad, 'b': b.grad}]
    _run_both(prog)


def test_linalg_solve_singular_raises():
    for T in (torch, tape):
        with pytest.raises(RuntimeError):
            T.linalg.solve(T.zeros(2, 2), T.ones(2))
        with pytest.raises(RuntimeError, match='Incompatible shapes'):
            T.linalg.solve(T.eye(3), T.ones(2))
        with pytest.raises(RuntimeError, match='Incompatible shapes'):
            T.linalg.solve(T.eye(3), T.ones(2, 2))


def test_inverse_and_top_level_similarity_exports():
    rng = np.random.default_rng(4)
    An = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    xn, yn = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))

    def prog(T, F):
        A, x = _P(T, An), _P(T, xn)
        y = T.tensor(yn)
        r = {'inv': A.inverse(), 'inv2': T.inverse(A),
             'cos': T.cosine_similarity(x, y, dim=1), 'pd': T.pairwise_distance(x, y),
             'right': T.linalg.solve(A, y[:3], left=False)}
        sum(v.sum() for v in r.values()).backward()
        r.update(A=A.grad, x=x.grad)
        return [r]
    _run_both(prog)


# -- random draws: generators are honoured; in-place initialisers -------------------

@pytest.mark.parametrize('fn', ['rand', 'randn'])
def test_rand_honours_generator(fn):
    draws = []
    for seed in (1, 2):                    # the global seed must not matter
        tape.manual_seed(seed)
        g = tape.Generator().manual_seed(7)
        draws.append(getattr(tape, fn)(4, generator=g).numpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    a = getattr(tape, fn)(3, generator=tape.Generator().manual_seed(7))
    b = getattr(tape, fn)(3, generator=tape.Generator().manual_seed(8))
    assert not np.array_equal(a.numpy(), b.numpy())


def test_randint_accepts_generator():
    g1, g2 = tape.Generator().manual_seed(3), tape.Generator().manual_seed(3)
    a = tape.randint(0, 10, (6,), generator=g1)
    b = tape.randint(0, 10, (6,), generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_inplace_initialisers():
    g = tape.Generator().manual_seed(0)
    w = tape.empty(200, 50).normal_(0.0, 0.02, generator=g)
    assert abs(float(w.std()) - 0.02) < 2e-3 and abs(float(w.mean())) < 1e-3
    u = tape.empty(1000).uniform_(-0.5, 0.5)
    assert float(u.min()) >= -0.5 and float(u.max()) < 0.5
    bmask = tape.empty(1000).bernoulli_(0.3)
    assert set(np.unique(bmask.numpy())) <= {0.0, 1.0} and 0.2 < float(bmask.mean()) < 0.4
    w.requires_grad_()
    with pytest.raises(RuntimeError):
        w.normal_()                        # a leaf that requires grad, outside no_grad
    with tape.no_grad():
        w.uniform_(-1, 1)
    assert w.requires_grad and w.is_leaf and float(w.abs().max()) <= 1.0
    for T in (torch, tape):
        x = T.zeros(3, dtype=T.float32)
        assert x.normal_() is x and x.dtype == T.float32


# -- metric-learning helpers a contrastive program reaches for -----------------------

def test_pdist_triplet_with_distance_and_multi_margin_match_torch():
    rng = np.random.default_rng(6)
    An, Pn, Nn = (rng.normal(size=(5, 3)) for _ in range(3))
    tgt = np.array([0, 2, 1, 2, 0])

    def prog(T, F):
        a, p_, n = _P(T, An), _P(T, Pn), _P(T, Nn)
        r = {'pdist': F.pdist(a), 'pdist1': F.pdist(p_, p=1),
             'trip': F.triplet_margin_with_distance_loss(a, p_, n, margin=0.5),
             'trip_cos': F.triplet_margin_with_distance_loss(
                 a, p_, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y),
                 swap=True, reduction='sum'),
             'mm': F.multi_margin_loss(a, T.tensor(tgt)),
             'mm2': F.multi_margin_loss(n, T.tensor(tgt), p=2, margin=0.7,
                                        weight=T.tensor([1.0, 0.5, 2.0], dtype=T.float64), reduction='sum'),
             'dist': T.dist(a, n), 'dist1': T.dist(a, p_, 1), 'bt': T.broadcast_to(a[0], (2, 3))}
        sum(v.sum() for v in r.values()).backward()
        r.update(a=a.grad, p=p_.grad, n=n.grad)
        return [r]
    _run_both(prog)


def test_inplace_functional_activations():
    xn = np.array([-1.5, -0.2, 0.3, 2.0])
    for name, args in (('relu_', ()), ('elu_', ()), ('leaky_relu_', (0.2,)),
                       ('threshold_', (0.25, -3.0))):
        outs = []
        for T, F in ((torch, TF), (tape, PF)):
            x = T.tensor(xn)
            y = getattr(F, name)(x, *args)
            assert y is x
            outs.append(x)
        _close(*outs)


# -- helpers of physics / probabilistic programs ----------------------------------------

def test_logaddexp_diff_indices_take_along_dim_match_torch():
    rng = np.random.default_rng(8)
    an, bn = rng.normal(size=(4, 3)) * 30, rng.normal(size=(4, 3))
    an[0, 0] = bn[0, 0]

    def prog(T, F):
        a, b = _P(T, an), _P(T, bn)
        iu = T.triu_indices(4, 4, 1)
        il = T.tril_indices(3, 4, offset=-1)
        idx = T.tensor(np.argsort(bn, axis=1))
        r = {'lae': T.logaddexp(a, b), 'lae2': T.logaddexp2(a, b), 'lae_m': a.logaddexp(b * 2),
             'diff': T.diff(a, dim=0), 'diff2': b.diff(n=2), 'diff_pp': T.diff(b, prepend=b[:, :1],
                                                                              append=b[:, -1:]),
             'iu': iu, 'il': il, 'pairs': (a @ a.T)[iu[0], iu[1]],
             'tad': T.take_along_dim(a, idx, dim=1), 'tad_m': b.take_along_dim(idx, 1)}
        sum(v.sum() for k, v in r.items() if v.dtype == T.float64).backward()
        r.update(a=a.grad, b=b.grad)
        return [r]
    _run_both(prog)


def test_det_slogdet_logdet_match_torch_to_second_order():
    rng = np.random.default_rng(9)
    An = rng.normal(size=(2, 3, 3)) + 2 * np.eye(3)

    def prog(T, F):
        A = _P(T, An)
        sign, lad = T.linalg.slogdet(A)
        r = {'det': T.linalg.det(A), 'det2': T.det(A[0]), 'sign': sign, 'lad': lad,
             'logdet': T.logdet(A[1] @ A[1].mT), 'mdet': A.det()}
        tot = r['det'].sum() + r['lad'].sum() + r['logdet'] + r['det2'] + r['mdet'].sum()
        g, = T.autograd.grad(tot, A, create_graph=True)
        (g ** 2).sum().backward()
        r.update(g=g, A=A.grad)
        return [r]
    _run_both(prog)


# -- tape.nn.init: the initialisers a hand-written model calls ------------------------

def test_nn_init_bounds_and_statistics():
    init = tape.nn.init
    tape.manual_seed(0)
    w = tape.empty(300, 200, requires_grad=True)        # fan_in 200, fan_out 300
    assert init.xavier_uniform_(w) is w and w.is_leaf and w.requires_grad
    bound = np.sqrt(6.0 / 500)
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
    init.xavier_normal_(w, gain=2.0)
    assert abs(float(w.std()) - 2.0 * np.sqrt(2.0 / 500)) < 0.01
    init.kaiming_uniform_(w, a=np.sqrt(5))
    assert float(w.abs().max()) <= np.sqrt(6.0 / ((1 + 5) * 200)) + 1e-12
    init.kaiming_normal_(w, mode='fan_out', nonlinearity='relu')
    assert abs(float(w.std()) - np.sqrt(2.0 / 300)) < 0.005
    init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    assert float(w.abs().max()) <= 0.04
    init.normal_(w, 0.0, 0.02)
    init.uniform_(w, -0.1, 0.1)
    assert float(w.abs().max()) <= 0.1
    init.zeros_(w)
    assert float(w.abs().sum()) == 0.0
    init.ones_(w)
    init.constant_(w, 0.5)
    assert float(w.mean()) == 0.5
    q = init.orthogonal_(tape.empty(4, 6))
    np.testing.assert_allclose((q @ q.T).numpy(), np.eye(4), atol=1e-6)
    e = init.eye_(tape.empty(3, 5))
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 5))
    for nl, args in (('relu', ()), ('tanh', ()), ('leaky_relu', (0.2,)), ('selu', ()),
                     ('sigmoid', ()), ('linear', ())):
        assert init.calculate_gain(nl, *args) == pytest.approx(
            torch.nn.init.calculate_gain(nl, *args))
    assert init._calculate_fan_in_and_fan_out(tape.empty(5, 3, 2, 2)) == (12, 20)
    w.grad = None
    (w * 2).sum().backward()                            # still a leaf of the graph
    assert w.grad is not None
