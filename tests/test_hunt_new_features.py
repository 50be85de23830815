"""New-features hunt: tutorial-shaped programs over what was added recently
(attention and Transformer modules, ``utils.data``, ``save``/``load``,
LBFGS and schedulers, packed sequences, module backward hooks, transposed and
3-d convolutions, ``func``, ``forward_ad``, ``utils.checkpoint``), each
written once as ``program(side)`` and run on PyTorch and on tape from the same
initial state (torch's ``state_dict`` loaded into tape's model) and the same
data.  Every value the program records must agree: float64 to 1e-8 relative,
float32 to 1e-4.  Shuffles are off or use fixed index orders (tape's
generator is not PyTorch's).
"""
import io

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

from tests.test_training_hunt import F32, run_both  # noqa: E402  (the side-by-side harness)


def _rng(seed):
    return np.random.default_rng(seed)


def _x(seed, *shape, dtype=np.float64):
    return _rng(seed).standard_normal(shape).astype(dtype)


# -- 1. tiny Transformer language model on random tokens, causal mask, AdamW + warmup
def prog_transformer_lm(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    V, D, L, B = 11, 16, 7, 3

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(lib.zeros(1, L, D, dtype=lib.float64))
            layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=32, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(D, V)

        def forward(self, tok):
            h = self.emb(tok) + self.pos[:, :tok.shape[1]]
            mask = nn.Transformer.generate_square_subsequent_mask(tok.shape[1],
                                                                  dtype=lib.float64)
            h = self.enc(h, mask=mask, is_causal=True)
            return self.head(h)

    model = s.sync(LM().double())
    tok = s.T(_rng(1).integers(0, V, (B, L + 1)))
    inp, tgt = tok[:, :-1], tok[:, 1:]
    opt = s.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = s.optim.lr_scheduler.LambdaLR(opt, lambda st: min(1.0, (st + 1) / 3))
    for step in range(5):
        opt.zero_grad(set_to_none=True)
        logits = model(inp)
        loss = s.F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        s.rec('gnorm', nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        sched.step()
        s.rec('loss', loss)
        s.rec('lr', sched.get_last_lr()[0])
    s.rec_params('p', model)
    model.eval()
    with lib.no_grad():
        s.rec('eval', model(inp))


def test_transformer_lm_causal():
    run_both(prog_transformer_lm)


# -- 2. char-RNN name classifier: padded names, pack_padded_sequence, LSTM, final h
def prog_char_rnn_packed(s):
    nn, lib = s.nn, s.lib
    R = lib.nn.utils.rnn
    lib.manual_seed(0)
    n_chars, H, C = 9, 8, 3

    class Clf(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(n_chars, 5, padding_idx=0)
            self.rnn = nn.LSTM(5, H, batch_first=True, num_layers=2)
            self.out = nn.Linear(H, C)

        def forward(self, x, lengths):
            packed = R.pack_padded_sequence(self.emb(x), lengths, batch_first=True,
                                            enforce_sorted=False)
            out, (h, c) = self.rnn(packed)
            padded, lens = R.pad_packed_sequence(out, batch_first=True)
            return self.out(h[-1]), padded, lens

    model = s.sync(Clf().double())
    rng = _rng(2)
    lengths = [3, 6, 2, 5]
    seqs = [s.T(rng.integers(1, n_chars, n)) for n in lengths]
    x = R.pad_sequence(seqs, batch_first=True)
    y = s.T(rng.integers(0, C, 4))
    opt = s.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(4):
        opt.zero_grad()
        logits, padded, lens = model(x, s.T(lengths))
        loss = s.F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec('padded', padded)
        s.rec('lens', lens)
        s.rec_grads('g', model)
    s.rec_params('p', model)


def test_char_rnn_packed_lstm():
    run_both(prog_char_rnn_packed)


# -- 3. bidirectional GRU over pack_sequence, outputs and final states
def prog_gru_pack_sequence(s):
    nn, lib = s.nn, s.lib
    R = lib.nn.utils.rnn
    lib.manual_seed(0)
    gru = s.sync(nn.GRU(3, 4, bidirectional=True).double())
    seqs = [s.T(_x(3 + i, n, 3), requires_grad=True) for i, n in enumerate([5, 4, 2])]
    packed = R.pack_sequence(seqs)
    s.rec('data', packed.data)
    s.rec('bs', packed.batch_sizes)
    h0 = s.T(_x(9, 2, 3, 4), requires_grad=True)
    out, hn = gru(packed, h0)
    pad, lens = R.pad_packed_sequence(out, padding_value=-1.0, total_length=6)
    s.rec('pad', pad, lens, hn)
    (pad.clamp(min=0).pow(2).sum() + hn.sum()).backward()
    for i, q in enumerate(seqs):
        s.rec(f'g{i}', q.grad)
    s.rec('gh0', h0.grad)
    s.rec_grads('g', gru)
    # unsorted pack_sequence keeps the caller's order in the final state
    out2, hn2 = gru(R.pack_sequence([seqs[2], seqs[0], seqs[1]], enforce_sorted=False))
    s.rec('hn2', hn2)
    s.rec('unsorted', out2.unsorted_indices, out2.sorted_indices)


def test_gru_bidirectional_pack_sequence():
    run_both(prog_gru_pack_sequence)


# -- 4. DCGAN-style generator (ConvTranspose2d + BatchNorm2d) and discriminator
def prog_dcgan(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    nz = 4

    G = s.sync(nn.Sequential(
        nn.ConvTranspose2d(nz, 8, 4, 1, 0, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.ConvTranspose2d(8, 4, 4, 2, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(True),
        nn.ConvTranspose2d(4, 1, 4, 2, 1, bias=False), nn.Tanh()))
    D = s.sync(nn.Sequential(
        nn.Conv2d(1, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(4, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 1, 4, 1, 0, bias=False), nn.Sigmoid()))
    crit = nn.BCELoss()
    optD = s.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = s.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = s.T(np.tanh(_x(10, 3, 1, 16, 16, dtype=np.float32)))
    for it in range(3):
        noise = s.T(_x(20 + it, 3, nz, 1, 1, dtype=np.float32))
        D.zero_grad()
        out = D(real).view(-1)
        errD_real = crit(out, lib.full((3,), 1.0))
        errD_real.backward()
        fake = G(noise)
        out = D(fake.detach()).view(-1)
        errD_fake = crit(out, lib.full((3,), 0.0))
        errD_fake.backward()
        optD.step()
        G.zero_grad()
        out = D(fake).view(-1)
        errG = crit(out, lib.full((3,), 1.0))
        errG.backward()
        optG.step()
        s.rec('errD', errD_real + errD_fake)
        s.rec('errG', errG)
        s.rec('fake', fake)
    s.rec_params('G', G)
    s.rec_params('D', D)
    for n, b in list(G.named_buffers()) + list(D.named_buffers()):
        s.rec(n, b)


def test_dcgan_convtranspose_batchnorm():
    run_both(prog_dcgan, rtol=2e-3, atol=2e-5)


# -- 5. autoencoder trained with a DataLoader (shuffle=False) and OneCycleLR
def prog_autoencoder_loader(s):
    nn, lib = s.nn, s.lib
    U = lib.utils.data
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(8, 3), nn.ReLU(), nn.Linear(3, 8)).double())
    X = s.T(_x(30, 22, 8))
    ds = U.TensorDataset(X, X * 0.5)
    loader = U.DataLoader(ds, batch_size=5, shuffle=False, drop_last=False)
    s.rec('len', len(loader))
    opt = s.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epochs = 3
    sched = s.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, epochs=epochs,
                                            steps_per_epoch=len(loader))
    for ep in range(epochs):
        tot = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = s.F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * xb.shape[0]
            s.rec('lr', opt.param_groups[0]['lr'])
            s.rec('mom', opt.param_groups[0]['momentum'])
        s.rec('epoch', tot / len(ds))
    s.rec_params('p', model)


def test_autoencoder_dataloader_onecycle():
    run_both(prog_autoencoder_loader)


# -- 6. checkpoint save/resume mid-training: the resumed run equals the straight one
def prog_checkpoint_resume(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)

    def build():
        m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double()
        o = s.optim.Adam(m.parameters(), lr=0.02, amsgrad=True)
        sc = s.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.7)
        return m, o, sc

    X, Y = s.T(_x(40, 10, 4)), s.T(_x(41, 10, 2))

    def train(m, o, sc, n):
        for _ in range(n):
            o.zero_grad()
            loss = s.F.mse_loss(m(X), Y)
            loss.backward()
            o.step()
            sc.step()
            s.rec('loss', loss)

    model, opt, sched = build()
    s.sync(model)
    train(model, opt, sched, 3)
    buf = io.BytesIO()
    lib.save({'epoch': 3, 'model': model.state_dict(), 'optim': opt.state_dict(),
              'sched': sched.state_dict()}, buf)
    train(model, opt, sched, 3)
    straight = [p.detach().clone() for p in model.parameters()]
    buf.seek(0)
    ck = lib.load(buf)
    s.rec('epoch', ck['epoch'])
    m2, o2, sc2 = build()
    m2.load_state_dict(ck['model'])
    o2.load_state_dict(ck['optim'])
    sc2.load_state_dict(ck['sched'])
    s.rec('lr', o2.param_groups[0]['lr'])
    train(m2, o2, sc2, 3)
    for a, b in zip(straight, m2.parameters()):
        s.rec('same', (a - b).abs().max())
    s.rec_params('p', m2)
    s.rec('step', o2.state_dict()['state'][0]['step'])


def test_checkpoint_save_resume():
    run_both(prog_checkpoint_resume)


# -- 7. per-sample gradients: vmap(grad(functional_call)) over a batch
def prog_per_sample_grads(s):
    nn, lib = s.nn, s.lib
    fn = lib.func
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double())
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    X, y = s.T(_x(50, 6, 5)), s.T(_rng(51).integers(0, 3, 6))

    def loss_one(p, b, x, t):
        out = fn.functional_call(model, (p, b), (x.unsqueeze(0),))
        return s.F.cross_entropy(out, t.unsqueeze(0))

    g = fn.vmap(fn.grad(loss_one), in_dims=(None, None, 0, 0))(params, buffers, X, y)
    for k in params:
        s.rec(k, g[k])
    # the per-sample mean equals the batch gradient
    model.zero_grad()
    s.F.cross_entropy(model(X), y).backward()
    for k, p in model.named_parameters():
        s.rec(k + '.mean', (g[k].mean(0) - p.grad).abs().max() < 1e-12)
    # value_and_grad, argnums over the input
    v, gx = fn.vmap(fn.grad_and_value(loss_one, argnums=2), in_dims=(None, None, 0, 0))(
        params, buffers, X, y)
    s.rec('gx', v, gx)


def test_per_sample_grads_vmap_grad_functional_call():
    run_both(prog_per_sample_grads)


# -- 8. feature extraction with forward hooks (and a forward pre-hook that rescales)
def prog_feature_hooks(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5)).double())
    feats = {}

    def save(name):
        def hook(mod, inp, out):
            feats[name] = out.detach()
        return hook

    hs = [model[1].register_forward_hook(save('relu')),
          model[3].register_forward_hook(save('flat'))]
    hp = model[4].register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))
    hk = model[0].register_forward_hook(lambda m, inp, out, **kw: out + 1, with_kwargs=False)
    x = s.T(_x(60, 2, 2, 6, 6), requires_grad=True)
    out = model(x)
    s.rec('out', out, feats['relu'], feats['flat'])
    out.sum().backward()
    s.rec('gx', x.grad)
    for h in hs + [hp, hk]:
        h.remove()
    s.rec('after', model(x))
    s.rec('nhooks', len(model[1]._forward_hooks))


def test_feature_extraction_forward_hooks():
    run_both(prog_feature_hooks)


# -- 9. gradient inspection with full backward hooks and backward pre-hooks
def prog_full_backward_hooks(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3), nn.LogSoftmax(-1)
                                 ).double())
    seen = []

    def bh(name):
        def hook(mod, gin, gout):
            seen.append((name, 'in', [g for g in gin if g is not None]))
            seen.append((name, 'out', [g for g in gout if g is not None]))
        return hook

    for i, m in enumerate(model):
        m.register_full_backward_hook(bh(str(i)))
    model[2].register_full_backward_pre_hook(lambda m, gout: (gout[0] * 0.5,))
    model[1].register_full_backward_hook(lambda m, gin, gout: (gin[0].clamp(-0.05, 0.05),))
    x = s.T(_x(70, 5, 4), requires_grad=True)
    y = s.T(_rng(71).integers(0, 3, 5))
    loss = s.F.nll_loss(model(x), y)
    loss.backward()
    for name, kind, gs in seen:
        s.rec(f'{name}{kind}', *gs)
    s.rec('gx', x.grad)
    s.rec_grads('g', model)


def test_full_backward_hooks_inspection():
    run_both(prog_full_backward_hooks)


# -- 10. LBFGS on a small regression, both line searches, closure returns the loss
def prog_lbfgs(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    X = s.T(_x(80, 30, 3))
    y = s.T(np.sin(_x(80, 30, 3) @ np.array([1.0, -2.0, 0.5]))[:, None])
    for ls in (None, 'strong_wolfe'):
        model = s.sync(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double())
        opt = s.optim.LBFGS(model.parameters(), lr=0.5 if ls is None else 1.0, max_iter=8,
                            history_size=5, line_search_fn=ls)
        calls = [0]

        def closure():
            calls[0] += 1
            opt.zero_grad()
            loss = s.F.mse_loss(model(X), y)
            loss.backward()
            return loss

        for _ in range(3):
            s.rec(f'{ls}:loss', opt.step(closure))
        s.rec(f'{ls}:calls', calls[0])
        st = opt.state[opt._params[0]] if hasattr(opt, '_params') else None
        s.rec(f'{ls}:n_iter', opt.state_dict()['state'][0]['n_iter'])
        s.rec_params(f'{ls}', model)


def test_lbfgs_regression():
    run_both(prog_lbfgs, rtol=1e-7, atol=1e-10)


# -- 11. gradient checkpointing of blocks (reentrant and not), with dropout in a block
def prog_grad_checkpoint(s):
    nn, lib = s.nn, s.lib
    ck = lib.utils.checkpoint
    lib.manual_seed(0)

    class Net(nn.Module):
        def __init__(self, reentrant):
            super().__init__()
            self.reentrant = reentrant
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.LayerNorm(6))
                                        for _ in range(3))
            self.head = nn.Linear(6, 1)

        def forward(self, x):
            for b in self.blocks:
                x = x + ck.checkpoint(b, x, use_reentrant=self.reentrant)
            return self.head(x)

    X = s.T(_x(90, 8, 6))
    for re in (False, True):
        model = s.sync(Net(re).double())
        x = X.clone().requires_grad_(True)
        out = model(x)
        out.pow(2).mean().backward()
        s.rec(f'{re}:out', out, x.grad)
        s.rec_grads(f'{re}', model)
    seq = s.sync(nn.Sequential(*[nn.Linear(6, 6) for _ in range(4)]).double())
    x = X.clone().requires_grad_(True)
    out = ck.checkpoint_sequential(seq, 2, x, use_reentrant=False)
    out.sum().backward()
    s.rec('seq', out, x.grad)
    s.rec_grads('seq', seq)


def test_gradient_checkpointing():
    run_both(prog_grad_checkpoint)


# -- 12. ReduceLROnPlateau on a validation loss, with cooldown and min_lr
def prog_plateau(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Linear(3, 1).double())
    X, y = s.T(_x(100, 12, 3)), s.T(_x(101, 12, 1))
    Xv, yv = s.T(_x(102, 6, 3)), s.T(_x(103, 6, 1))
    opt = s.optim.SGD(model.parameters(), lr=0.3)
    sched = s.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='min', factor=0.5, patience=1,
                                                   threshold=1e-3, cooldown=1, min_lr=0.02)
    for ep in range(14):
        opt.zero_grad()
        s.F.mse_loss(model(X), y).backward()
        opt.step()
        with lib.no_grad():
            val = s.F.mse_loss(model(Xv), yv)
        sched.step(val)
        s.rec('val', val)
        s.rec('lr', opt.param_groups[0]['lr'])
        s.rec('last', sched.get_last_lr()[0])
        s.rec('bad', sched.num_bad_epochs)
    sd = sched.state_dict()
    s.rec('best', sd['best'])


def test_reduce_lr_on_plateau():
    run_both(prog_plateau)


# -- 13. Conv3d video classifier with BatchNorm3d, MaxPool3d, AdaptiveAvgPool3d
def prog_conv3d(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(
        nn.Conv3d(2, 4, kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
        nn.Conv3d(4, 3, 1), nn.AdaptiveAvgPool3d(1), nn.Flatten()).double())
    x = s.T(_x(110, 2, 2, 5, 8, 8))
    y = s.T([0, 2])
    opt = s.optim.RMSprop(model.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        out = model(x)
        loss = s.F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_grads('g', model)
    model.eval()
    s.rec('eval', model(x))
    s.rec('rm', model[1].running_mean, model[1].running_var)


def test_conv3d_video_classifier():
    run_both(prog_conv3d)


# -- 14. forward-mode AD: a JVP through an MLP with dual numbers, vs func.jvp
def prog_forward_ad(s):
    nn, lib = s.nn, s.lib
    fwAD = lib.autograd.forward_ad
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 5), nn.Softplus(), nn.Linear(5, 2)).double())
    x, v = s.T(_x(120, 3, 4)), s.T(_x(121, 3, 4))
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, v)
        out = model(dual)
        p, t = fwAD.unpack_dual(out)
        s.rec('primal', p)
        s.rec('tangent', t)
        y = (out.sin() * out).sum(-1)
        s.rec('t2', fwAD.unpack_dual(y).tangent)
    out2, t2 = lib.func.jvp(lambda a: model(a), (x,), (v,))
    s.rec('jvp', out2, t2)
    _, t3 = lib.autograd.functional.jvp(lambda a: model(a).sum(0), x, v)
    s.rec('ajvp', t3)


def test_forward_ad_mlp():
    run_both(prog_forward_ad)


# -- 15. seq2seq nn.Transformer with padding masks and a causal target mask
def prog_seq2seq_transformer(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    D = 8
    model = s.sync(nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                                  dim_feedforward=16, dropout=0.0).double())
    src = s.T(_x(130, 6, 2, D))
    tgt = s.T(_x(131, 5, 2, D))
    src_pad = s.T(np.array([[False] * 6, [False] * 4 + [True] * 2]))
    tgt_pad = s.T(np.array([[False] * 5, [False] * 3 + [True] * 2]))
    tgt_mask = model.generate_square_subsequent_mask(5, dtype=lib.float64)
    opt = s.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        out = model(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=src_pad,
                    tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
                    tgt_is_causal=True)
        loss = (out * (~tgt_pad).T.unsqueeze(-1)).pow(2).mean()
        loss.backward()
        opt.step()
        s.rec('loss', loss, out)
    s.rec_grads('g', model)
    s.rec_params('p', model)


def test_seq2seq_transformer_masks():
    run_both(prog_seq2seq_transformer)


# -- 16. MultiheadAttention: per-head weights, kdim/vdim, float and bool masks together
def prog_mha_weights(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    mha = s.sync(nn.MultiheadAttention(6, 3, kdim=4, vdim=5, batch_first=True,
                                       add_bias_kv=True).double())
    q = s.T(_x(140, 2, 3, 6), requires_grad=True)
    k = s.T(_x(141, 2, 4, 4), requires_grad=True)
    v = s.T(_x(142, 2, 4, 5), requires_grad=True)
    kpm = s.T(np.array([[False, False, True, False], [False, False, False, False]]))
    am = s.T(_x(143, 3, 4))
    out, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
    s.rec('out', out, w)
    (out.sum() + w[:, 1].sum()).backward()
    s.rec('g', q.grad, k.grad, v.grad)
    s.rec_grads('p', mha)
    mha.eval()
    with lib.no_grad():
        o2, w2 = mha(q, k, v, need_weights=True)
        s.rec('eval', o2, w2)
        o3, w3 = mha(q, k, v, need_weights=False)
        s.rec('noweights', o3)
        s.rec('none', w3 is None)


def test_mha_per_head_weights_masks():
    run_both(prog_mha_weights)


# -- 17. adaptive 3-d pooling (non-divisible sizes, None) and its gradient
def prog_adaptive_pool3d(s):
    lib = s.lib
    x = s.T(_x(150, 2, 3, 5, 7, 4), requires_grad=True)
    outs = [s.F.adaptive_avg_pool3d(x, (2, 3, None)), s.F.adaptive_avg_pool3d(x, 3),
            s.nn.AdaptiveAvgPool3d((1, 4, 3))(x), s.F.adaptive_avg_pool3d(x[0], (3, 2, 2))]
    for i, o in enumerate(outs):
        s.rec(f'o{i}', o)
        (o * s.T(_x(151 + i, *o.shape))).sum().backward()
        s.rec(f'g{i}', x.grad)
        x.grad = None
    for bad in [(x, (1, 2))]:
        try:
            s.F.adaptive_avg_pool3d(*bad)
        except Exception as e:
            s.rec(type(e).__name__, 1)
    s.rec('repr', len(repr(lib.nn.AdaptiveAvgPool3d((1, None, 2)))))


def test_adaptive_avg_pool3d():
    run_both(prog_adaptive_pool3d)


# -- 18. a map-style Dataset, a custom collate_fn, samplers and random_split
def prog_dataset_collate(s):
    lib = s.lib
    U = lib.utils.data
    R = lib.nn.utils.rnn
    rng = _rng(160)
    lens = [3, 1, 4, 2, 5, 2, 3]
    items = [(rng.standard_normal((n, 2)), int(rng.integers(0, 3))) for n in lens]

    class Seqs(U.Dataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, i):
            x, y = items[i]
            return lib.tensor(x), y

    def collate(batch):
        xs, ys = zip(*batch)
        return (R.pad_sequence(list(xs), batch_first=True),
                lib.tensor([len(x) for x in xs]), lib.tensor(ys))

    ds = Seqs()
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True),
               dict(sampler=U.SequentialSampler(ds), batch_size=2),
               dict(batch_sampler=U.BatchSampler([6, 0, 2, 5, 1, 3, 4], 3, False))):
        loader = U.DataLoader(ds, collate_fn=collate, **kw)
        s.rec('n', len(loader))
        for xb, lb, yb in loader:
            s.rec('b', xb, lb, yb)
    # default collation of (tensor, int) pairs and of dicts
    for xb, yb in U.DataLoader(U.Subset(ds, [3, 5]), batch_size=3):
        s.rec('sub', xb, yb)
    dd = U.DataLoader([{'a': lib.tensor([float(i)]), 'b': i, 'c': float(i) / 2}
                       for i in range(5)], batch_size=2)
    for b in dd:
        s.rec('dict', b['a'], b['b'], b['c'])
    # random_split: sizes (ints and fractions), disjoint and covering
    for lengths in ([4, 3], [0.5, 0.3, 0.2]):
        parts = U.random_split(range(10 if isinstance(lengths[0], float) else 7), lengths,
                               generator=lib.Generator().manual_seed(0))
        s.rec('sizes', [len(p) for p in parts])
        idx = sorted(i for p in parts for i in p)
        s.rec('cover', idx)
    cd = U.ConcatDataset([U.TensorDataset(lib.arange(3.)), U.TensorDataset(lib.arange(4.))])
    s.rec('concat', len(cd), cd[4][0], cd[-1][0])
    for exc_args in (([3, 3],), ([0.5, 0.6],)):
        try:
            U.random_split(range(7), *exc_args)
        except Exception as e:
            s.rec(type(e).__name__, 1)


def test_dataset_collate_samplers_random_split():
    run_both(prog_dataset_collate)


class _Thing:
    pass


# -- 19. save/load: tensors sharing storage, map_location, weights_only, dtypes
def prog_save_load(s, tmp_path=None):
    lib = s.lib
    base = s.T(_x(170, 4, 3))
    view = base[1:3]
    buf = io.BytesIO()
    obj = {'base': base, 'view': view, 'ints': lib.arange(5), 'half': base.float().half(),
           'bool': base > 0, 'list': [lib.tensor(1.5), (2, 'x')], 'none': None,
           'f32': lib.ones(2, dtype=lib.float32), 'nested': {'k': lib.zeros(0, 3)}}
    lib.save(obj, buf)
    buf.seek(0)
    back = lib.load(buf, map_location='cpu', weights_only=True)
    for k in ('base', 'view', 'ints', 'half', 'bool', 'f32'):
        s.rec(k, back[k])
        s.rec(k + '.dtype:' + str(back[k].dtype).replace('torch.', ''), 1)
    s.rec('list', back['list'][0], back['list'][1][0])
    s.rec('nested', back['nested']['k'].shape)
    back['base'][1, 0] = 100.0
    s.rec('shared', back['view'][0, 0])          # the view still shares the base's storage
    s.rec('req', back['base'].requires_grad)
    p = s.nn.Parameter(s.T(_x(171, 2)))
    buf = io.BytesIO()
    lib.save({'p': p}, buf)
    buf.seek(0)
    q = lib.load(buf)['p']
    s.rec('param', q, q.requires_grad, isinstance(q, s.nn.Parameter))

    buf = io.BytesIO()
    lib.save({'t': _Thing()}, buf)
    buf.seek(0)
    try:
        lib.load(buf, weights_only=True)
    except Exception as e:
        s.rec(type(e).__name__, 1)


def test_save_load_storage_sharing_and_weights_only():
    run_both(prog_save_load)


# -- 20. model ensembling (the torch.func tutorial): stack_module_state + vmap
def prog_ensembling(s):
    nn, lib = s.nn, s.lib
    fn = lib.func
    lib.manual_seed(0)
    models = [s.sync(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)).double())
              for _ in range(3)]
    params, buffers = fn.stack_module_state(models)
    s.rec('keys', len(params), len(buffers))
    for k in sorted(params):
        s.rec(k, params[k], params[k].requires_grad)
    base = models[0]

    def call(p, b, x):
        return fn.functional_call(base, (p, b), (x,))

    x = s.T(_x(180, 5, 4))
    out_same = fn.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
    s.rec('same', out_same)
    xs = s.T(_x(181, 3, 5, 4))
    out_diff = fn.vmap(call)(params, buffers, xs)
    s.rec('diff', out_diff)
    for i, m in enumerate(models):
        s.rec(f'check{i}', (m(xs[i]) - out_diff[i]).abs().max())
    out_diff.sum().backward()
    for k in sorted(params):
        s.rec(k + '.grad', params[k].grad)


def test_model_ensembling_stack_module_state():
    run_both(prog_ensembling)


# -- 21. forward-mode AD w.r.t. parameters (the forward-AD tutorial) via functional_call
def prog_forward_ad_params(s):
    nn, lib = s.nn, s.lib
    fwAD = lib.autograd.forward_ad
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double())
    x = s.T(_x(190, 5, 3))
    params = {n: p.detach() for n, p in model.named_parameters()}
    tangents = {n: s.T(_x(191 + i, *p.shape)) for i, (n, p) in enumerate(params.items())}
    with fwAD.dual_level():
        duals = {n: fwAD.make_dual(p, tangents[n]) for n, p in params.items()}
        out = lib.func.functional_call(model, duals, (x,))
        jvp = fwAD.unpack_dual(out).tangent
    s.rec('jvp', jvp)
    _, jvp2 = lib.func.jvp(lambda ps: lib.func.functional_call(model, ps, (x,)),
                           (params,), (tangents,))
    s.rec('jvp2', jvp2)
    # jacrev / hessian w.r.t. a parameter dict
    def loss(ps):
        return lib.func.functional_call(model, ps, (x,)).pow(2).mean()
    J = lib.func.jacrev(loss)(params)
    for n in params:
        s.rec('jac:' + n, J[n])
    H = lib.func.hessian(lambda w: loss({**params, '2.weight': w}))(params['2.weight'])
    s.rec('hess', H)


def test_forward_ad_parameters_and_jacrev_dict():
    run_both(prog_forward_ad_params)


# -- 22. transfer learning: frozen backbone, new head, unfreeze later with add_param_group
def prog_finetune(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    backbone = s.sync(nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(),
                                    nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten()).double())
    head = s.sync(nn.Linear(12, 2).double())
    for p in backbone.parameters():
        p.requires_grad_(False)
    backbone.eval()
    model = nn.Sequential(backbone, head)
    opt = s.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1,
                      momentum=0.9)
    sched = s.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    x, y = s.T(_x(200, 4, 1, 6, 6)), s.T([0, 1, 1, 0])
    for step in range(6):
        if step == 3:
            for p in backbone.parameters():
                p.requires_grad_(True)
            backbone.train()
            opt.add_param_group({'params': list(backbone.parameters()), 'lr': 0.01})
        opt.zero_grad()
        loss = s.F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        s.rec('loss', loss)
        s.rec('lrs', [g['lr'] for g in opt.param_groups])
        s.rec('frozen', backbone[0].weight.grad is None)
    s.rec_params('p', model)
    s.rec('rm', backbone[1].running_mean, backbone[1].num_batches_tracked)


def test_finetune_frozen_backbone_add_param_group():
    run_both(prog_finetune)


# -- 23. warmup then cosine: SequentialLR, ChainedScheduler, CyclicLR, warm restarts
def prog_schedulers(s):
    nn, lib = s.nn, s.lib
    O = s.optim
    S = O.lr_scheduler
    lib.manual_seed(0)
    model = s.sync(nn.Linear(2, 1).double())
    x, y = s.T(_x(210, 6, 2)), s.T(_x(211, 6, 1))

    def run(opt, sched, n, tag, per_epoch_arg=None):
        for i in range(n):
            opt.zero_grad()
            s.F.mse_loss(model(x), y).backward()
            opt.step()
            if per_epoch_arg is None:
                sched.step()
            else:
                sched.step(per_epoch_arg(i))
            s.rec(tag, [g['lr'] for g in opt.param_groups])
            if 'momentum' in opt.param_groups[0]:
                s.rec(tag + ':m', opt.param_groups[0]['momentum'])
            if 'betas' in opt.param_groups[0]:
                s.rec(tag + ':b', opt.param_groups[0]['betas'][0])

    opt = O.SGD(model.parameters(), lr=0.1)
    seq = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3),
                               S.CosineAnnealingLR(opt, T_max=5, eta_min=0.01)], milestones=[3])
    run(opt, seq, 9, 'seq')
    opt = O.SGD(model.parameters(), lr=0.1)
    ch = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                             S.ExponentialLR(opt, gamma=0.9)])
    run(opt, ch, 5, 'chain')
    for mode in ('triangular', 'triangular2', 'exp_range'):
        opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)
        cyc = S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=3,
                         mode=mode, gamma=0.9)
        run(opt, cyc, 11, 'cyc:' + mode)
    opt = O.Adam(model.parameters(), lr=0.1)
    oc = S.OneCycleLR(opt, max_lr=0.2, total_steps=9, three_phase=True, anneal_strategy='linear')
    run(opt, oc, 9, 'onecycle')
    opt = O.SGD(model.parameters(), lr=0.1)
    wr = S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
    run(opt, wr, 10, 'warm', per_epoch_arg=lambda i: i * 0.7)
    opt = O.SGD(model.parameters(), lr=0.1)
    pl = S.PolynomialLR(opt, total_iters=4, power=2.0)
    run(opt, pl, 6, 'poly')
    sd = pl.state_dict()
    s.rec('poly_sd', sd['last_epoch'], sd['_last_lr'][0])
    s.rec_params('p', model)


def test_scheduler_zoo():
    run_both(prog_schedulers)


# -- 24. U-Net-style decoder: ConvTranspose2d (groups, dilation, output_size) + skip cat
def prog_unet_decoder(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1 = nn.Conv2d(2, 4, 3, stride=2, padding=1)
            self.down2 = nn.Conv2d(4, 8, 3, stride=2, padding=1, padding_mode='reflect')
            self.up2 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, groups=2)
            self.up1 = nn.ConvTranspose2d(8, 2, (3, 2), stride=2, padding=(1, 1), dilation=(1, 2))
            self.out = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            d1 = s.F.relu(self.down1(x))
            d2 = s.F.relu(self.down2(d1))
            u2 = self.up2(d2, output_size=d1.shape[-2:])
            u1 = self.up1(lib.cat([u2, d1], 1), output_size=x.shape[-2:])
            return self.out(lib.cat([u1, x], 1))

    model = s.sync(UNet().double())
    x = s.T(_x(220, 2, 2, 9, 10), requires_grad=True)
    tgt = s.T(_x(221, 2, 1, 9, 10))
    opt = s.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        out = model(x)
        loss = s.F.smooth_l1_loss(out, tgt)
        loss.backward()
        opt.step()
        s.rec('loss', loss, out.shape)
    s.rec('gx', x.grad)
    s.rec_grads('g', model)
    s.rec_params('p', model)


def test_unet_conv_transpose_output_size():
    run_both(prog_unet_decoder)


# -- 25. full backward hooks on a two-input module, a frozen input, and a module used twice
def prog_hooks_multi_input(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    bil = s.sync(nn.Bilinear(3, 2, 4).double())
    lin = s.sync(nn.Linear(4, 4).double())
    log = []
    bil.register_full_backward_hook(
        lambda m, gi, go: log.append(('bil', [g is None for g in gi], gi, go)))
    lin.register_full_backward_hook(lambda m, gi, go: log.append(('lin', [], gi, go)))
    lin.register_full_backward_pre_hook(lambda m, go: log.append(('pre', [], (), go)))
    a = s.T(_x(230, 5, 3), requires_grad=True)
    b = s.T(_x(231, 5, 2))                            # needs no grad
    out = lin(lin(bil(a, b)).tanh())                  # lin runs twice
    out.pow(2).sum().backward()
    for name, nones, gi, go in log:
        s.rec(name + ':nones', nones)
        s.rec(name + ':gi', *[g for g in gi if g is not None])
        s.rec(name + ':go', *[g for g in go if g is not None])
    s.rec('ga', a.grad)
    s.rec_grads('bil', bil)
    s.rec_grads('lin', lin)


def test_full_backward_hooks_two_inputs_module_reused():
    run_both(prog_hooks_multi_input)


# -- 26. truncated BPTT: RNN over chunks with the hidden state detached between chunks
def prog_tbptt(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    rnn = s.sync(nn.RNN(2, 5, num_layers=2, nonlinearity='relu', batch_first=True).double())
    head = s.sync(nn.Linear(5, 1).double())
    opt = s.optim.Adagrad(list(rnn.parameters()) + list(head.parameters()), lr=0.05)
    seq, tgt = s.T(_x(240, 3, 12, 2)), s.T(_x(241, 3, 12, 1))
    h = None
    for c in range(0, 12, 4):
        opt.zero_grad()
        out, h = rnn(seq[:, c:c + 4], h)
        loss = s.F.l1_loss(head(out), tgt[:, c:c + 4])
        loss.backward()
        opt.step()
        h = h.detach()
        s.rec('loss', loss, h)
    s.rec_params('rnn', rnn)


def test_truncated_bptt_detach_hidden():
    run_both(prog_tbptt)


# -- 27. save a whole model (not weights_only), load it and keep training
def prog_save_whole_model(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(),
                                 nn.Linear(4, 1)).double())
    x, y = s.T(_x(250, 8, 3)), s.T(_x(251, 8, 1))
    s.F.mse_loss(model(x), y).backward()
    buf = io.BytesIO()
    lib.save(model, buf)
    buf.seek(0)
    m2 = lib.load(buf, weights_only=False)
    s.rec('type', type(m2).__name__ == 'Sequential', m2.training)
    s.rec('grads', [p.grad is None for p in m2.parameters()])
    s.rec('bufs', *m2.buffers())
    opt = s.optim.SGD(m2.parameters(), lr=0.1)
    opt.step()
    s.rec('out', m2(x))
    s.rec('indep', (m2[0].weight - model[0].weight).abs().sum() > 0)


def test_save_load_whole_module():
    run_both(prog_save_whole_model)


# -- 28. Transformer text classifier: train with padding masks, then batched inference
#        (eval + no_grad: PyTorch's nested-tensor path zeroes the padded positions)
def prog_encoder_classifier_inference(s):
    nn, lib = s.nn, s.lib
    import warnings
    lib.manual_seed(0)
    V, D = 10, 8
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        odd = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 1, 16, batch_first=True), 1)
    s.rec('warned', len(w), odd.use_nested_tensor)

    class Clf(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D))
            self.fc = nn.Linear(D, 2)

        def forward(self, tok):
            pad = tok == 0
            h = self.enc(self.emb(tok), src_key_padding_mask=pad)
            self.h = h
            keep = (~pad).unsqueeze(-1).to(h.dtype)
            return self.fc((h * keep).sum(1) / keep.sum(1))

    model = s.sync(Clf().double())
    s.rec('nested', model.enc.use_nested_tensor)
    tok = s.T(np.array([[3, 4, 5, 6, 2], [7, 1, 2, 0, 0], [9, 8, 0, 0, 0]]))
    y = s.T([0, 1, 1])
    opt = s.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        loss = s.F.cross_entropy(model(tok), y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
    model.eval()
    with lib.no_grad():
        s.rec('eval', model(tok), model.h)
    s.rec('eval-grad', model(tok), model.h)          # grad enabled: the general path
    right = s.T(np.array([[0, 0, 3, 4, 5]]))          # not left-aligned: the general path
    with lib.no_grad():
        s.rec('right', model(right), model.h)


def test_encoder_classifier_eval_padding_nested_path():
    run_both(prog_encoder_classifier_inference, rtol=1e-7, atol=1e-10)
