"""Training-program hunt: realistic ``torch.nn`` + ``torch.optim`` programs,
each written once as ``program(side)`` and run on PyTorch and on tape from the
same initial parameters (torch's ``state_dict`` loaded into tape's model) and
the same data.  Every loss, gradient norm and parameter the program records
after each step must agree: float64 to 1e-8 relative, float32 to 1e-4.

``side.lib`` is ``torch`` or ``tape``; ``side.sync(model)`` copies the torch
model's initial state into the tape model built at the same point; ``side.rec``
appends values to the side's log, and the two logs are compared entry by entry.
"""
import copy
import gc
import math
import tracemalloc

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')


def _np(v):
    if isinstance(v, (bool, int, float)):
        return np.array(v, np.float64)
    if isinstance(v, (torch.Tensor, tape.Tensor)):
        return np.array(v.detach().numpy(), copy=True)
    return np.asarray(v)


class Side:
    """One library's run of a program; ``shared`` carries torch's initial states
    to the tape run, in the order the program builds its models."""

    def __init__(self, lib, shared):
        self.lib, self.shared, self.log, self._k = lib, shared, [], 0
        self.nn, self.optim = lib.nn, lib.optim
        self.F = lib.nn.functional

    def sync(self, model):
        if self.lib is torch:
            self.shared.append({k: _np(v) for k, v in model.state_dict().items()})
        else:
            sd = self.shared[self._k]
            self._k += 1
            model.load_state_dict({k: tape.tensor(v) for k, v in sd.items()})
        return model

    def T(self, arr, **kw):
        return self.lib.tensor(np.array(arr), **kw)

    def rec(self, tag, *values):
        for v in values:
            self.log.append((tag, _np(v)))

    def rec_params(self, tag, model):
        for name, p in model.named_parameters():
            self.rec(f'{tag}:{name}', p)

    def rec_grads(self, tag, model):
        for name, p in model.named_parameters():
            self.rec(f'{tag}:{name}.grad', p.grad)


def run_both(program, rtol=1e-8, atol=1e-11):
    shared = []
    ts = Side(torch, shared)
    program(ts)
    tp = Side(tape, shared)
    program(tp)
    assert len(ts.log) == len(tp.log), (len(ts.log), len(tp.log),
                                        [t for t, _ in ts.log][:40], [t for t, _ in tp.log][:40])
    assert ts.log, 'the program recorded nothing'
    for (tag_t, a), (tag_p, b) in zip(ts.log, tp.log):
        assert tag_t == tag_p
        assert a.shape == b.shape, (tag_t, a.shape, b.shape)
        assert a.dtype == b.dtype, (tag_t, a.dtype, b.dtype)
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=tag_t)
    return ts, tp


F32 = dict(rtol=1e-4, atol=1e-6)


def _data(seed, *shapes, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


# -- 1. MLP classifier: CrossEntropyLoss, SGD(momentum, nesterov, weight decay), StepLR
def prog_mlp_sgd_nesterov(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                                 nn.Linear(16, 4)).double())
    rng = np.random.default_rng(1)
    X = s.T(rng.standard_normal((32, 6)))
    y = s.T(rng.integers(0, 4, 32))
    opt = s.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                      weight_decay=1e-3)
    sched = s.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    for _ in range(12):
        opt.zero_grad()
        loss = crit(model(X), y)
        loss.backward()
        opt.step()
        sched.step()
        s.rec('loss', loss)
        s.rec('lr', sched.get_last_lr()[0])
        s.rec_params('p', model)


def test_mlp_sgd_nesterov_steplr():
    run_both(prog_mlp_sgd_nesterov)


# -- 2. regression: Adam(weight_decay), CosineAnnealingLR, MSELoss on minibatches
def prog_regression_adam_cosine(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 8), nn.SiLU(), nn.Linear(8, 1)).double())
    X, w = _data(2, (40, 3), (3, 1))
    Xt, yt = s.T(X), s.T(np.sin(X @ w))
    opt = s.optim.Adam(model.parameters(), lr=0.05, weight_decay=1e-2)
    sched = s.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-3)
    loss_fn = nn.MSELoss()
    for epoch in range(10):
        for i in range(0, 40, 10):
            opt.zero_grad()
            loss = loss_fn(model(Xt[i:i + 10]), yt[i:i + 10])
            loss.backward()
            opt.step()
            s.rec('loss', loss)
        sched.step()
        s.rec_params(f'e{epoch}', model)
        s.rec('lr', opt.param_groups[0]['lr'])


def test_regression_adam_cosine():
    run_both(prog_regression_adam_cosine)


# -- 3. AdamW with two parameter groups built from named_parameters (no decay on biases)
def prog_adamw_groups(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(5, 12), nn.GELU(), nn.LayerNorm(12),
                                 nn.Linear(12, 3)).double())
    decay = [p for n, p in model.named_parameters() if n.endswith('weight') and p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters()
                if not (n.endswith('weight') and p.dim() > 1)]
    opt = s.optim.AdamW([{'params': decay, 'weight_decay': 0.1},
                         {'params': no_decay, 'weight_decay': 0.0, 'lr': 0.02}],
                        lr=0.01, betas=(0.8, 0.99), amsgrad=True)
    X, = _data(3, (16, 5))
    y = s.T(np.random.default_rng(4).integers(0, 3, 16))
    X = s.T(X)
    for _ in range(10):
        opt.zero_grad()
        loss = s.F.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_adamw_param_groups_from_named_parameters():
    run_both(prog_adamw_groups)


# -- 4. gradient clipping between backward and step
def prog_clip_grad_norm(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 10), nn.Tanh(), nn.Linear(10, 2)).double())
    X, Y = _data(5, (20, 4), (20, 2))
    X, Y = s.T(X * 5), s.T(Y * 10)        # large targets: the norm is clipped every step
    opt = s.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    for step in range(10):
        opt.zero_grad()
        loss = s.F.mse_loss(model(X), Y)
        loss.backward()
        if step % 2:
            norm = s.lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        else:
            norm = s.lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0,
                                                  norm_type=float('inf'))
        s.rec('norm', norm)
        s.lib.nn.utils.clip_grad_value_(model.parameters(), 0.3)
        s.rec('grads', *[p.grad for p in model.parameters()])
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_clip_grad_norm_between_backward_and_step():
    run_both(prog_clip_grad_norm)


# -- 5. gradient accumulation over micro-batches, then one step
def prog_grad_accumulation(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.1), nn.Linear(8, 1)).double())
    X, Y = _data(6, (24, 4), (24, 1))
    X, Y = s.T(X), s.T(Y)
    opt = s.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, centered=True,
                          weight_decay=1e-3)
    accum = 3
    for step in range(6):
        opt.zero_grad()
        total = 0.0
        for k in range(accum):
            sl = slice(8 * k, 8 * k + 8)
            loss = nn.L1Loss()(model(X[sl]), Y[sl]) / accum
            loss.backward()
            total += loss.item()
        s.rec('loss', total)
        s.rec('grads', *[p.grad for p in model.parameters()])
        opt.step()
        s.rec_params('p', model)


def test_gradient_accumulation_micro_batches():
    run_both(prog_grad_accumulation)


# -- 6. a text classifier: Embedding + LayerNorm + mean pooling + Linear, float32
class _TextClassifier:
    @staticmethod
    def build(nn):
        class TextClassifier(nn.Module):
            def __init__(self, vocab, dim, classes):
                super().__init__()
                self.emb = nn.Embedding(vocab, dim, padding_idx=0)
                self.norm = nn.LayerNorm(dim)
                self.head = nn.Linear(dim, classes)

            def forward(self, tokens):
                h = self.norm(self.emb(tokens))
                mask = (tokens != 0).unsqueeze(-1).to(h.dtype)
                pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                return self.head(pooled)
        return TextClassifier


def prog_text_classifier(s):
    s.lib.manual_seed(0)
    model = s.sync(_TextClassifier.build(s.nn)(20, 8, 3))
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 20, (10, 7))
    tokens[:, 5:] = 0                                      # padding
    tokens, y = s.T(tokens), s.T(rng.integers(0, 3, 10))
    opt = s.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(10):
        opt.zero_grad()
        loss = s.nn.CrossEntropyLoss()(model(tokens), y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec('pad_grad', model.emb.weight.grad[0])
        s.rec_params('p', model)


def test_embedding_layernorm_text_classifier_float32():
    run_both(prog_text_classifier, **F32)


# -- 7. weight tying: the decoder's weight is the embedding's Parameter
def prog_weight_tying(s):
    nn = s.nn

    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.mix = nn.Linear(6, 6)
            self.dec = nn.Linear(6, 11)
            self.dec.weight = self.emb.weight            # tied

        def forward(self, tok):
            return self.dec(s.lib.tanh(self.mix(self.emb(tok))))

    s.lib.manual_seed(0)
    model = s.sync(TiedLM().double())
    s.rec('n_params', len(list(model.parameters())))
    s.rec('state_keys', len(model.state_dict()))
    rng = np.random.default_rng(8)
    tok, nxt = s.T(rng.integers(0, 11, 15)), s.T(rng.integers(0, 11, 15))
    opt = s.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    for _ in range(8):
        opt.zero_grad()
        loss = s.F.cross_entropy(model(tok), nxt)
        loss.backward()
        opt.step()
        assert model.dec.weight is model.emb.weight
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_weight_tying_shared_parameter():
    run_both(prog_weight_tying)


# -- 8. freezing a submodule, optimizer over the remaining parameters only
def prog_freeze_submodule(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 2)).double())
    model[0].requires_grad_(False)
    opt = s.optim.Adagrad([p for p in model.parameters() if p.requires_grad], lr=0.1,
                          lr_decay=0.01, initial_accumulator_value=0.1)
    X, Y = _data(9, (12, 4), (12, 2))
    X, Y = s.T(X), s.T(Y)
    for _ in range(8):
        opt.zero_grad()
        loss = s.F.smooth_l1_loss(model(X), Y)
        loss.backward()
        assert model[0].weight.grad is None
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_freeze_submodule_optimizer_over_rest():
    run_both(prog_freeze_submodule)


# -- 9. two models, two optimizers: a GAN-like alternation with detach()
def prog_gan(s):
    nn = s.nn
    s.lib.manual_seed(0)
    G = s.sync(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2)).double())
    D = s.sync(nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)).double())
    opt_g = s.optim.Adam(G.parameters(), lr=0.01, betas=(0.5, 0.999))
    opt_d = s.optim.Adam(D.parameters(), lr=0.01, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(10)
    for step in range(8):
        z, real = s.T(rng.standard_normal((16, 2))), s.T(rng.standard_normal((16, 2)) + 3)
        ones, zeros = s.lib.ones(16, 1, dtype=s.lib.float64), s.lib.zeros(16, 1,
                                                                             dtype=s.lib.float64)
        fake = G(z)
        opt_d.zero_grad()
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(D(fake), ones)
        g_loss.backward()
        opt_g.step()
        s.rec('losses', d_loss, g_loss)
        s.rec_params('G', G)
        s.rec_params('D', D)


def test_gan_two_models_two_optimizers():
    run_both(prog_gan)


# -- 10. train()/eval() with Dropout: p=0 in train mode, any p in eval mode
def prog_dropout_train_eval(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Dropout(0.0), nn.Linear(10, 3),
                                 nn.Dropout(0.7)).double())
    model[4].eval()                       # only this Dropout in eval: compared deterministically
    model[4].p = 0.7
    X, = _data(11, (9, 5))
    X, y = s.T(X), s.T(np.random.default_rng(12).integers(0, 3, 9))
    opt = s.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        model.train()
        model[4].eval()
        s.rec('modes', float(model.training), float(model[4].training))
        opt.zero_grad()
        loss = s.F.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        model.eval()
        model[2].p = 0.9                  # eval: a Dropout of any p is the identity
        with s.lib.no_grad():
            ev = model(X)
        model[2].p = 0.0
        s.rec('loss', loss)
        s.rec('eval', ev)
        s.rec_params('p', model)


def test_dropout_train_eval():
    run_both(prog_dropout_train_eval)


def test_dropout_train_mode_statistics_tape():
    # train-mode dropout on tape alone: random streams differ from torch's
    tape.manual_seed(0)
    drop = tape.nn.Dropout(0.3)
    x = tape.ones(200, 500, dtype=tape.float64, requires_grad=True)
    y = drop(x)
    kept = (y.detach().numpy() != 0)
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 1 / 0.7, 0.0))
    drop.eval()
    assert drop(x) is x or np.array_equal(drop(x).detach().numpy(), x.detach().numpy())


# -- 11. checkpoint mid-training: model AND optimizer state_dict into fresh ones
def prog_checkpoint_resume(s):
    nn = s.nn

    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.ELU(), nn.Linear(8, 2)).double()

    def make_opt(m):
        opt = s.optim.Adam(m.parameters(), lr=0.02, amsgrad=True, weight_decay=1e-3)
        return opt, s.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

    s.lib.manual_seed(0)
    model = s.sync(make())
    opt, sched = make_opt(model)
    X, Y = _data(13, (10, 4), (10, 2))
    X, Y = s.T(X), s.T(Y)

    def train(model, opt, sched, n):
        for _ in range(n):
            opt.zero_grad()
            loss = s.F.mse_loss(model(X), Y)
            loss.backward()
            opt.step()
            sched.step()
            s.rec('loss', loss)
            s.rec_params('p', model)

    train(model, opt, sched, 5)
    ckpt = copy.deepcopy({'model': model.state_dict(), 'opt': opt.state_dict(),
                          'sched': sched.state_dict()})
    train(model, opt, sched, 3)                          # the original keeps going
    model2 = make()                                      # fresh random init, overwritten
    model2.load_state_dict(ckpt['model'])
    opt2, sched2 = make_opt(model2)
    opt2.load_state_dict(ckpt['opt'])
    sched2.load_state_dict(ckpt['sched'])
    s.rec('lr_after_load', opt2.param_groups[0]['lr'])
    train(model2, opt2, sched2, 3)                       # must repeat the 3 steps above
    s.rec('state_step', opt2.state_dict()['state'][0]['step'])


def test_checkpoint_model_and_optimizer_resume():
    ts, tp = run_both(prog_checkpoint_resume)
    # the resumed run repeats the original's last 3 steps exactly (on each side)
    for log in (ts.log, tp.log):
        losses = [v for t, v in log if t == 'loss']
        np.testing.assert_array_equal(losses[5:8], losses[8:11])


# -- 12. a custom autograd.Function inside a Module
def prog_custom_function(s):
    nn, lib = s.nn, s.lib

    class ScaledSoftsign(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return scale * x / (1 + x.abs())

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ctx.scale / (1 + x.abs()) ** 2, None

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 6)
            self.b = nn.Linear(6, 1)
            self.scale = nn.Parameter(lib.tensor(1.5, dtype=lib.float64))

        def forward(self, x):
            return self.b(ScaledSoftsign.apply(self.a(x), 2.0)) * self.scale

    lib.manual_seed(0)
    model = s.sync(Net().double())
    X, Y = _data(14, (8, 3), (8, 1))
    X, Y = s.T(X), s.T(Y)
    opt = s.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.1)
    for _ in range(8):
        opt.zero_grad()
        loss = s.F.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_custom_function_inside_module():
    run_both(prog_custom_function)


# -- 13. Python control flow in forward: the loop count depends on the input
def prog_control_flow(s):
    nn, lib = s.nn, s.lib

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.Linear(4, 4)
            self.out = nn.Linear(4, 1)

        def forward(self, x):
            h = x
            n = 1 + int(x.abs().sum().item()) % 4          # 1..4 applications
            for _ in range(n):
                h = lib.tanh(self.cell(h)) + h
            if h.mean() > 0:
                h = h * 2
            return self.out(h)

    lib.manual_seed(0)
    model = s.sync(Recurrent().double())
    opt = s.optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(15)
    for _ in range(10):
        x = s.T(rng.standard_normal((1, 4)))
        opt.zero_grad()
        loss = (model(x) ** 2).sum()
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_forward_with_input_dependent_control_flow():
    run_both(prog_control_flow)


# -- 14. a gradient penalty: grad(create_graph=True) of the output wrt the input, with Adam
def prog_gradient_penalty(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    critic = s.sync(nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1)).double())
    opt = s.optim.Adam(critic.parameters(), lr=0.01, betas=(0.0, 0.9))
    rng = np.random.default_rng(16)
    for _ in range(8):
        real = s.T(rng.standard_normal((12, 3)))
        fake = s.T(rng.standard_normal((12, 3)) * 0.5 + 1)
        alpha = s.T(rng.uniform(size=(12, 1)))
        mid = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = critic(mid)
        g, = lib.autograd.grad(out.sum(), mid, create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        opt.zero_grad()
        loss.backward()
        opt.step()
        s.rec('loss', loss, gp)
        s.rec('grads', *[p.grad for p in critic.parameters()])
        s.rec_params('p', critic)


def test_gradient_penalty_second_order_adam():
    run_both(prog_gradient_penalty)


# -- 15. zero_grad(set_to_none=False) vs True with parameters unused on some steps
def _prog_zero_grad(set_to_none, opt_name):
    def program(s):
        nn = s.nn

        class TwoHeads(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(3, 5)
                self.h1 = nn.Linear(5, 1)
                self.h2 = nn.Linear(5, 1)

            def forward(self, x, head):
                h = s.lib.relu(self.body(x))
                return self.h1(h) if head == 1 else self.h2(h)

        s.lib.manual_seed(0)
        model = s.sync(TwoHeads().double())
        opts = {'sgd': lambda p: s.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                'adam': lambda p: s.optim.Adam(p, lr=0.05, weight_decay=0.01),
                'rmsprop': lambda p: s.optim.RMSprop(p, lr=0.01, momentum=0.3),
                'adagrad': lambda p: s.optim.Adagrad(p, lr=0.1, weight_decay=0.01)}
        opt = opts[opt_name](model.parameters())
        X, Y = _data(17, (6, 3), (6, 1))
        X, Y = s.T(X), s.T(Y)
        for step in range(8):
            opt.zero_grad(set_to_none=set_to_none)
            model.zero_grad(set_to_none=set_to_none)
            loss = s.F.mse_loss(model(X, 1 + step % 2), Y)   # the heads alternate
            loss.backward()
            s.rec('h2_grad_is_none', float(model.h2.weight.grad is None))
            opt.step()
            s.rec('loss', loss)
            s.rec_params('p', model)
    return program


@pytest.mark.parametrize('opt_name', ['sgd', 'adam', 'rmsprop', 'adagrad'])
@pytest.mark.parametrize('set_to_none', [False, True])
def test_zero_grad_set_to_none_with_unused_head(set_to_none, opt_name):
    run_both(_prog_zero_grad(set_to_none, opt_name))


# -- 16. error paths: an optimizer over a non-leaf, a step after a parameter the graph saved
def prog_error_paths(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Linear(3, 2).double())
    nonleaf = model.weight * 2
    try:
        s.optim.SGD([nonleaf], lr=0.1)
    except ValueError as e:
        s.log.append(('nonleaf', str(e)))
    else:
        s.log.append(('nonleaf', 'no error'))
    try:
        s.optim.Adam(model.weight, lr=0.1)        # a bare tensor, not an iterable
    except TypeError as e:
        s.log.append(('bare', str(e).split(',')[0]))
    # a graph that saved the weight (the input requires grad, so the weight is
    # needed for the input's gradient), then a step, then backward: PyTorch refuses
    x = s.T(np.ones((4, 3)), requires_grad=True)
    opt = s.optim.SGD(model.parameters(), lr=0.1)
    loss = (model(x) ** 2).sum()
    loss.backward(retain_graph=True)
    opt.step()
    try:
        (model(x) ** 2).sum().backward()
        loss.backward()
    except RuntimeError as e:
        s.log.append(('stale', 'modified by an inplace operation' in str(e)))
    else:
        s.log.append(('stale', 'no error'))


def test_backward_after_step_when_the_weight_was_not_saved():
    # loss.backward(retain_graph=True); opt.step(); loss.backward(): PyTorch's
    # MmBackward saves the weight only when the input needs a gradient, so with a
    # constant input the second backward runs (and uses the unchanged input)
    def program(s):
        s.lib.manual_seed(0)
        model = s.sync(s.nn.Linear(3, 2).double())
        x = s.T(np.arange(12.0).reshape(4, 3))
        opt = s.optim.SGD(model.parameters(), lr=0.1)
        loss = (model(x) ** 2).sum()
        loss.backward(retain_graph=True)
        opt.step()
        loss.backward()
        s.rec('grad', model.weight.grad, model.bias.grad)
        s.rec_params('p', model)
    run_both(program)


def test_optimizer_error_paths():
    shared = []
    logs = []
    for lib in (torch, tape):
        side = Side(lib, shared)
        prog_error_paths(side)
        logs.append(side.log)
    assert logs[0] == logs[1]


# -- 17. a model run under tape.jit on the tape side (torch eager)
def prog_jit_model(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid(),
                                 nn.Linear(8, 1)).double())

    def loss_fn(x, y):
        return ((model(x) - y) ** 2).mean()

    step_loss = tape.jit(loss_fn) if lib is tape else loss_fn
    opt = s.optim.Adam(model.parameters(), lr=0.02)
    rng = np.random.default_rng(18)
    for _ in range(10):
        x, y = s.T(rng.standard_normal((8, 4))), s.T(rng.standard_normal((8, 1)))
        opt.zero_grad()
        loss = step_loss(x, y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)
    if lib is tape:
        s.jit_reasons = step_loss.fallback_reasons()


def test_model_under_tape_jit():
    ts, tp = run_both(prog_jit_model)
    # the replay must really run (not fall back to eager every call)
    assert not tp.jit_reasons, tp.jit_reasons


# -- 18. float32 MLP with Adam(amsgrad), LambdaLR and MultiStepLR chained
def prog_float32_schedulers(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(6, 12), nn.Softplus(), nn.Linear(12, 3)))
    X, = _data(19, (20, 6), dtype=np.float32)
    X, y = s.T(X), s.T(np.random.default_rng(20).integers(0, 3, 20))
    opt = s.optim.Adam(model.parameters(), lr=0.02, amsgrad=True)
    lam = s.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e))
    ms = s.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 6], gamma=0.3)
    for _ in range(9):
        opt.zero_grad()
        loss = nn.NLLLoss()(s.F.log_softmax(model(X), dim=1), y)
        loss.backward()
        opt.step()
        lam.step()
        ms.step()
        s.rec('loss', loss)
        s.rec('lr', opt.param_groups[0]['lr'])
        s.rec_params('p', model)


def test_float32_adam_amsgrad_chained_schedulers():
    run_both(prog_float32_schedulers, **F32)


# -- 19. closures: SGD.step(closure) returns the loss, the closure runs with grad on
def prog_closure(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1)).double())
    X, Y = _data(21, (10, 2), (10, 1))
    X, Y = s.T(X), s.T(Y)
    opt = s.optim.SGD(model.parameters(), lr=0.1, maximize=False)

    def closure():
        opt.zero_grad()
        loss = s.F.mse_loss(model(X), Y)
        loss.backward()
        return loss

    for _ in range(6):
        with s.lib.no_grad():                 # step() must still record inside the closure
            loss = opt.step(closure)
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_step_with_closure_under_no_grad():
    run_both(prog_closure)


# -- 20. BCELoss on sigmoid outputs with per-sample weights and parameters_to_vector
def prog_bce_vector(s):
    nn = s.nn
    utils = s.lib.nn.utils
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1), nn.Sigmoid())
                   .double())
    X, = _data(22, (14, 3))
    rng = np.random.default_rng(23)
    X, Y = s.T(X), s.T(rng.integers(0, 2, (14, 1)).astype(np.float64))
    w = s.T(rng.uniform(0.5, 2.0, (14, 1)))
    opt = s.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(6):
        opt.zero_grad()
        loss = nn.BCELoss(weight=w)(model(X), Y)
        loss.backward()
        opt.step()
        vec = utils.parameters_to_vector(model.parameters())
        s.rec('loss', loss)
        s.rec('vec', vec)
    with s.lib.no_grad():
        utils.vector_to_parameters(vec * 0.5, model.parameters())
    s.rec_params('halved', model)
    s.rec('out', model(X))


def test_bce_weights_parameters_to_vector():
    run_both(prog_bce_vector)


# -- 21. a long loop on tape alone: 2000 Adam steps of a small MLP, flat memory
def test_long_adam_loop_flat_memory():
    tape.manual_seed(0)
    nn = tape.nn
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)).double()
    opt = tape.optim.Adam(model.parameters(), lr=1e-3)
    sched = tape.optim.lr_scheduler.StepLR(opt, 500, 0.5)
    X, Y = _data(24, (32, 4), (32, 1))
    X, Y = tape.tensor(X), tape.tensor(Y)
    losses = []

    def step(i):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(X), Y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        losses.append(loss.item())

    for i in range(20):
        step(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(990):
            step(i)
        gc.collect()
        mid = tracemalloc.get_traced_memory()[0]
        for i in range(990):
            step(i)
        gc.collect()
        end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # 990 steps must not leave even 8 bytes per step behind (besides the loss list)
    assert end - mid < 990 * 8 + 990 * 40, end - mid
    assert losses[-1] < losses[0]


# -- 22. a DQN-like target network: deepcopy, Polyak averaging through .data, clamp_
def prog_target_network(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    online = s.sync(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).double())
    target = copy.deepcopy(online)
    target.requires_grad_(False)
    opt = s.optim.RMSprop(online.parameters(), lr=0.01, alpha=0.9)
    rng = np.random.default_rng(25)
    for step in range(8):
        obs, nxt = s.T(rng.standard_normal((6, 4))), s.T(rng.standard_normal((6, 4)))
        act, rew = s.T(rng.integers(0, 2, (6, 1))), s.T(rng.standard_normal(6))
        with lib.no_grad():
            tgt = rew + 0.9 * target(nxt).max(dim=1).values
        q = online(obs).gather(1, act).squeeze(1)
        loss = s.F.smooth_l1_loss(q, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        for p in online.parameters():
            p.data.clamp_(-0.4, 0.4)                   # WGAN-style weight clipping
        with lib.no_grad():
            for tp, p in zip(target.parameters(), online.parameters()):
                tp.data.mul_(0.8).add_(0.2 * p.data)
        s.rec('loss', loss)
        s.rec_params('online', online)
        s.rec_params('target', target)


def test_target_network_polyak_and_clamp():
    run_both(prog_target_network)


# -- 23. fine-tuning: unfreeze a layer mid-run and add_param_group; manual lr warmup
def prog_finetune_add_group(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1)).double())
    model[0].requires_grad_(False)
    opt = s.optim.Adam(model[2].parameters(), lr=0.0)
    X, Y = _data(26, (10, 3), (10, 1))
    X, Y = s.T(X), s.T(Y)
    for step in range(10):
        for g in opt.param_groups:
            g['lr'] = 0.02 * min(1.0, (step + 1) / 4)   # warmup written by hand
        if step == 4:
            model[0].requires_grad_(True)
            opt.add_param_group({'params': list(model[0].parameters()), 'lr': 0.005,
                                 'betas': (0.5, 0.9)})
        opt.zero_grad()
        loss = s.F.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)
    s.rec('n_groups', len(opt.param_groups))


def test_finetune_unfreeze_add_param_group():
    run_both(prog_finetune_add_group)


# -- 24. the classic tutorial loop: manual SGD on p under no_grad, p.grad.zero_()
def prog_manual_sgd(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(2, 5), nn.Sigmoid(), nn.Linear(5, 1)).double())
    X, Y = _data(27, (12, 2), (12, 1))
    X, Y = s.T(X), s.T(Y)
    for step in range(8):
        loss = ((model(X) - Y) ** 2).mean()
        loss.backward()
        with lib.no_grad():
            for p in model.parameters():
                p -= 0.3 * p.grad
                p.grad.zero_()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_manual_sgd_tutorial_loop():
    run_both(prog_manual_sgd)


# -- 25. parameter hooks and a grad assigned by hand (a federated-averaging step)
def prog_hooks_and_assigned_grad(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Linear(4, 3).double())
    model.weight.register_hook(lambda g: g * 0.5)
    outs = []
    model.register_forward_hook(lambda m, inp, out: outs.append(out.shape[0]))
    opt = s.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, maximize=True)
    X, = _data(28, (9, 4))
    X = s.T(X)
    for step in range(6):
        opt.zero_grad(set_to_none=False)
        loss = -(model(X).tanh() ** 2).mean()
        loss.backward()
        if step % 3 == 2:                   # a server hands back an averaged gradient
            model.bias.grad = model.bias.grad * 0 + 0.25
        opt.step()
        s.rec('loss', loss)
        s.rec('grads', model.weight.grad, model.bias.grad)
        s.rec_params('p', model)
    s.rec('hook_calls', len(outs))


def test_parameter_hooks_and_assigned_grad_maximize():
    run_both(prog_hooks_and_assigned_grad)


# -- 26. a model switched to float32 mid-training, then a fresh optimizer; tensor lr
def prog_dtype_switch(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double())
    X, Y = _data(29, (8, 3), (8, 2))
    opt = s.optim.Adam(model.parameters(), lr=lib.tensor(0.01))
    for phase, dtype in ((0, np.float64), (1, np.float32)):
        Xp, Yp = s.T(X.astype(dtype)), s.T(Y.astype(dtype))
        for _ in range(5):
            opt.zero_grad()
            loss = s.F.mse_loss(model(Xp), Yp)
            loss.backward()
            opt.step()
            s.rec('loss', loss)
            s.rec_params('p', model)
        model.float()
        opt = s.optim.SGD(model.parameters(), lr=lib.tensor(0.05), momentum=0.9)


def test_dtype_switch_midway_and_tensor_lr():
    run_both(prog_dtype_switch, **F32)


# -- 27. backward(create_graph=True) into .grad, a grad-norm term, zero_grad keeping buffers
def prog_create_graph_backward(s):
    nn, lib = s.nn, s.lib
    lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double())
    X, Y = _data(30, (7, 3), (7, 1))
    X, Y = s.T(X), s.T(Y)
    opt = s.optim.SGD(model.parameters(), lr=0.05)
    for step in range(5):
        opt.zero_grad(set_to_none=False)
        params = list(model.parameters())
        loss = s.F.mse_loss(model(X), Y)
        grads = lib.autograd.grad(loss, params, create_graph=True)
        penalty = sum((g ** 2).sum() for g in grads)
        total = loss + 0.1 * penalty
        total.backward()
        opt.step()
        s.rec('loss', loss, penalty)
        s.rec_params('p', model)


def test_grad_norm_regulariser_create_graph():
    run_both(prog_create_graph_backward)


# -- 28. state_dicts alias live storage: a "checkpoint" taken without a copy moves on
def prog_state_dict_aliasing(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double())
    opt = s.optim.Adam(model.parameters(), lr=0.05)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    opt_fresh = s.optim.SGD(fresh.parameters(), lr=0.1)   # built before the load below
    fresh.load_state_dict(model.state_dict())             # copies in place
    X, Y = _data(31, (6, 3), (6, 2))
    X, Y = s.T(X), s.T(Y)
    sd = model.state_dict()                               # no copy: aliases the parameters
    for step in range(4):
        for m, o in ((model, opt), (fresh, opt_fresh)):
            o.zero_grad()
            loss = s.F.mse_loss(m(X), Y)
            loss.backward()
            o.step()
            s.rec('loss', loss)
        osd = opt.state_dict()
        s.rec('sd', *sd.values())
        s.rec('opt_state', osd['state'][0]['exp_avg'], osd['state'][0]['step'])
        s.rec_params('fresh', fresh)
    early = opt.state_dict()['state'][1]['exp_avg_sq']     # live: moves with later steps
    opt.zero_grad()
    s.F.mse_loss(model(X), Y).backward()
    opt.step()
    s.rec('live', early)


def test_state_dict_aliasing_and_load_before_optimizer():
    run_both(prog_state_dict_aliasing)


# -- 29. a module with buffers updated in forward, ModuleDict and ParameterList
def prog_buffers_containers(s):
    nn, lib = s.nn, s.lib

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({'a': nn.Linear(3, 4), 'b': nn.Linear(4, 2)})
            self.scales = nn.ParameterList([nn.Parameter(lib.ones(4, dtype=lib.float64)),
                                            nn.Parameter(lib.ones(2, dtype=lib.float64))])
            self.register_buffer('running_mean', lib.zeros(4, dtype=lib.float64))
            self.register_buffer('calls', lib.zeros((), dtype=lib.float64), persistent=False)

        def forward(self, x):
            h = self.blocks['a'](x)
            if self.training:
                with lib.no_grad():
                    self.running_mean.mul_(0.9).add_(0.1 * h.mean(0))
                    self.calls += 1
            h = (h - self.running_mean) * self.scales[0]
            return self.blocks['b'](lib.relu(h)) * self.scales[1]

    lib.manual_seed(0)
    model = s.sync(Net().double())
    s.rec('keys', len(model.state_dict()))
    opt = s.optim.AdamW(model.parameters(), lr=0.02)
    X, Y = _data(32, (8, 3), (8, 2))
    X, Y = s.T(X), s.T(Y)
    for step in range(6):
        model.train(step % 3 != 2)
        opt.zero_grad()
        loss = s.F.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec('buffers', model.running_mean, model.calls)
        s.rec_params('p', model)


def test_buffers_updated_in_forward_and_containers():
    run_both(prog_buffers_containers)


# -- 30. deterministic inits through model.apply: no state copied at all
def prog_apply_init(s):
    nn, lib = s.nn, s.lib

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.eye_(m.weight)
            nn.init.constant_(m.bias, 0.1)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.GELU(approximate='tanh'),
                          nn.Linear(4, 3)).double()
    model.apply(init)
    X, = _data(33, (5, 4))
    X, y = s.T(X), s.T(np.array([0, 2, -100, 1, 2]))       # one ignored target
    crit = nn.CrossEntropyLoss(weight=s.T(np.array([1.0, 2.0, 0.5])), ignore_index=-100)
    opt = s.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    for _ in range(6):
        opt.zero_grad()
        loss = crit(model(X), y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_apply_deterministic_init_weighted_ignore_index():
    run_both(prog_apply_init)


# -- 31. multi-task: two heads' losses backward separately through a shared trunk
def prog_multitask(s):
    nn = s.nn
    s.lib.manual_seed(0)
    trunk = s.sync(nn.Sequential(nn.Linear(5, 8), nn.Tanh()).double())
    cls, reg = s.sync(nn.Linear(8, 3).double()), s.sync(nn.Linear(8, 1).double())
    params = list(trunk.parameters()) + list(cls.parameters()) + list(reg.parameters())
    opt = s.optim.Adam(params, lr=0.01)
    X, Y = _data(34, (10, 5), (10, 1))
    X, Y = s.T(X), s.T(Y)
    y = s.T(np.random.default_rng(35).integers(0, 3, 10))
    for _ in range(6):
        opt.zero_grad()
        h = trunk(X)
        l1 = s.F.cross_entropy(cls(h), y, reduction='sum') / 10
        l2 = s.F.huber_loss(reg(h), Y, delta=0.5)
        l1.backward(retain_graph=True)
        l2.backward()
        opt.step()
        s.rec('loss', l1, l2)
        s.rec_params('p', trunk)


def test_multitask_two_backwards_shared_trunk():
    run_both(prog_multitask)


# -- 32. Embedding(max_norm): the forward renormalises looked-up rows in place
def prog_embedding_max_norm(s):
    nn = s.nn
    s.lib.manual_seed(0)
    model = s.sync(nn.Sequential(nn.Embedding(10, 4, max_norm=1.0), nn.Flatten(),
                                 nn.Linear(12, 2)).double())
    rng = np.random.default_rng(36)
    opt = s.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(5):
        tok, y = s.T(rng.integers(0, 10, (6, 3))), s.T(rng.integers(0, 2, 6))
        opt.zero_grad()
        loss = s.F.cross_entropy(model(tok), y)
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('p', model)


def test_embedding_max_norm_renorm_in_training():
    run_both(prog_embedding_max_norm)


# -- 33. a Bilinear scorer, slicing a Sequential into a shared feature extractor
def prog_bilinear_slices(s):
    nn = s.nn
    s.lib.manual_seed(0)
    enc = s.sync(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.ReLU()).double())
    score = s.sync(nn.Bilinear(4, 5, 1).double())
    feat = enc[:2]                                          # shares enc's first layer
    opt = s.optim.Adagrad(list(enc.parameters()) + list(score.parameters()), lr=0.1)
    A, B = _data(37, (7, 3), (7, 3))
    A, B = s.T(A), s.T(B)
    target = s.T(np.random.default_rng(38).uniform(size=(7, 1)))
    for _ in range(6):
        opt.zero_grad()
        out = score(enc(A), feat(B))
        loss = s.F.binary_cross_entropy_with_logits(out, target,
                                                    pos_weight=s.T(np.array([2.0])))
        loss.backward()
        opt.step()
        s.rec('loss', loss)
        s.rec_params('enc', enc)
        s.rec_params('score', score)


def test_bilinear_and_sequential_slice():
    run_both(prog_bilinear_slices)
