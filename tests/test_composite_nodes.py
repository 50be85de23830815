"""Composite ops show PyTorch's one node (tape/_composite_nodes.py): its name,
``next_functions`` over the op's arguments, and a call that returns their
gradients; through merges of tapes, ``tape.jit`` replays and a backward."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape._tape import grad_mode


def _lib(name):
    if name == 'torch':
        torch = pytest.importorskip('torch')
        import torch.nn.functional as TF
        return torch, TF
    return tape, F


def _desc(fn, depth=1):
    """'Name(child, child)' to ``depth`` levels (None for an empty entry)."""
    if fn is None:
        return 'None'
    name = fn.name().replace('torch::autograd::', '')
    if depth == 0 or not fn.next_functions:
        return name
    return name + '(' + ','.join(_desc(n, depth - 1) for n, _ in fn.next_functions) + ')'


# each case builds the op's result from P (float64 inputs requiring grad) and I (ints)
CASES = {
    'mse_loss': lambda T, F, P, I: F.mse_loss(P(3, 4), P(3, 4).detach()),
    'mse_loss_none': lambda T, F, P, I: F.mse_loss(P(3, 4), P(3, 4), reduction='none'),
    'smooth_l1_loss': lambda T, F, P, I: F.smooth_l1_loss(P(3, 4), P(3, 4).detach()),
    'huber_loss': lambda T, F, P, I: F.huber_loss(P(3, 4), P(3, 4), reduction='sum'),
    'nll_loss': lambda T, F, P, I: F.nll_loss(P(3, 4), I(0, 1, 2)),
    'nll_of_log_softmax': lambda T, F, P, I: F.nll_loss(F.log_softmax(P(3, 4), 1), I(0, 1, 2)),
    'bce': lambda T, F, P, I: F.binary_cross_entropy(P(3, 4) * 0.5, P(3, 4).detach() * 0.5),
    'bce_logits': lambda T, F, P, I: F.binary_cross_entropy_with_logits(P(3, 4), P(3, 4)),
    'linear': lambda T, F, P, I: F.linear(P(2, 4), P(3, 4), P(3)),
    'linear_frozen_input': lambda T, F, P, I: F.linear(P(2, 4).detach(), P(3, 4), P(3)),
    'addmm': lambda T, F, P, I: T.addmm(P(3), P(2, 4), P(4, 3)),
    'addmv': lambda T, F, P, I: T.addmv(P(2), P(2, 4), P(4)),
    'addr': lambda T, F, P, I: T.addr(P(2, 3), P(2), P(3)),
    'baddbmm': lambda T, F, P, I: T.baddbmm(P(2, 2, 3), P(2, 2, 4), P(2, 4, 3)),
    'addbmm': lambda T, F, P, I: T.addbmm(P(2, 3), P(2, 2, 4), P(2, 4, 3)),
    'clamp_tensor': lambda T, F, P, I: T.clamp(P(3, 4), P(3, 4) * 0.9, P(3, 4) * 1.1),
    'clamp_min_tensor': lambda T, F, P, I: T.clamp(P(3), min=P(3).detach()),
    'trace': lambda T, F, P, I: T.trace(P(3, 3)),
    'tril': lambda T, F, P, I: T.tril(P(3, 3)),
    'triu': lambda T, F, P, I: T.triu(P(3, 3) * 2),
    'lerp': lambda T, F, P, I: T.lerp(P(3), P(3), 0.3),
    'lerp_tensor': lambda T, F, P, I: T.lerp(P(3), P(3), P(3)),
    'addcmul': lambda T, F, P, I: T.addcmul(P(3), P(3), P(3).detach(), value=0.5),
    'addcdiv': lambda T, F, P, I: T.addcdiv(P(3), P(3), P(3)),
    'hypot': lambda T, F, P, I: T.hypot(P(3), P(3)),
    'logaddexp': lambda T, F, P, I: T.logaddexp(P(3), P(3)),
    'glu': lambda T, F, P, I: F.glu(P(4)),
    'mish': lambda T, F, P, I: F.mish(P(3)),
    'hardswish': lambda T, F, P, I: F.hardswish(P(3)),
    'hardsigmoid': lambda T, F, P, I: F.hardsigmoid(P(3)),
    'selu': lambda T, F, P, I: F.selu(P(3)),
    'celu': lambda T, F, P, I: F.celu(P(3)),
    'logsigmoid': lambda T, F, P, I: F.logsigmoid(P(3)),
    'threshold': lambda T, F, P, I: F.threshold(P(3), 0.9, 0.0),
    'pad': lambda T, F, P, I: F.pad(P(3), (1, 1)),
    'pad_reflect': lambda T, F, P, I: F.pad(P(1, 4), (1, 1), mode='reflect'),
    'pad_replicate': lambda T, F, P, I: F.pad(P(1, 1, 3, 3), (1, 1, 1, 1), mode='replicate'),
    'roll': lambda T, F, P, I: T.roll(P(3, 2), 1, 0),
    'rot90': lambda T, F, P, I: T.rot90(P(3, 3)),
    'sinc': lambda T, F, P, I: T.sinc(P(3)),
    'frac': lambda T, F, P, I: T.frac(P(3)),
    'logit': lambda T, F, P, I: T.logit(P(3) * 0.5),
    'deg2rad': lambda T, F, P, I: T.deg2rad(P(3)),
    'nan_to_num': lambda T, F, P, I: T.nan_to_num(P(3)),
    'masked_select': lambda T, F, P, I: T.masked_select(P(3), I(True, False, True)),
    'take': lambda T, F, P, I: T.take(P(3), I(0, 2)),
    'index_add': lambda T, F, P, I: T.index_add(P(3), 0, I(0, 2), P(2)),
    'cdist': lambda T, F, P, I: T.cdist(P(2, 3), P(2, 3)),
    'cross': lambda T, F, P, I: T.linalg.cross(P(3), P(3)),
    'nansum': lambda T, F, P, I: T.nansum(P(3)),
    'var': lambda T, F, P, I: T.var(P(3, 4)),
    'std_dim': lambda T, F, P, I: T.std(P(3, 4), 1),
    'norm': lambda T, F, P, I: T.norm(P(3, 4)),
    'vector_norm_1': lambda T, F, P, I: T.linalg.vector_norm(P(3), 1),
    'dist': lambda T, F, P, I: T.dist(P(3), P(3)),
    'dot': lambda T, F, P, I: T.dot(P(3), P(3)),
    'mv': lambda T, F, P, I: T.mv(P(2, 3), P(3)),
    'matmul_vectors': lambda T, F, P, I: P(3) @ P(3) * 1,
    'prod': lambda T, F, P, I: T.prod(P(3)),
    'prod_dim': lambda T, F, P, I: T.prod(P(3, 2), 1),
    'amax': lambda T, F, P, I: T.amax(P(3, 4), 1),
    'sort': lambda T, F, P, I: T.sort(P(3))[0],
    'topk': lambda T, F, P, I: T.topk(P(3), 2)[0],
    'kthvalue': lambda T, F, P, I: T.kthvalue(P(3), 2)[0],
    'cummax': lambda T, F, P, I: T.cummax(P(3), 0)[0],
    'logcumsumexp': lambda T, F, P, I: T.logcumsumexp(P(3), 0),
    'unfold': lambda T, F, P, I: P(6).unfold(0, 2, 2),
    'inv': lambda T, F, P, I: T.linalg.inv(P(3, 3) + 3 * T.eye(3, dtype=T.float64)),
    'masked_scatter': lambda T, F, P, I: P(3).masked_scatter(I(True, False, True), P(3)),
    'vdot': lambda T, F, P, I: T.vdot(P(3), P(3)),
    'renorm': lambda T, F, P, I: T.renorm(P(3, 4), 2, 0, 1.0),
    'hardshrink': lambda T, F, P, I: F.hardshrink(P(3) - 1.0, 0.3),
    'log_ndtr': lambda T, F, P, I: T.special.log_ndtr(P(3)),
    'rrelu_eval': lambda T, F, P, I: F.rrelu(P(3) - 1.0),
    'pixel_shuffle': lambda T, F, P, I: F.pixel_shuffle(P(1, 4, 2, 3), 2),
    'pixel_unshuffle': lambda T, F, P, I: F.pixel_unshuffle(P(1, 1, 4, 6), 2),
    'unfold_batched': lambda T, F, P, I: F.unfold(P(1, 2, 4, 4), 2),
    'unfold_unbatched': lambda T, F, P, I: F.unfold(P(2, 4, 4), 2),
    'fold_batched': lambda T, F, P, I: F.fold(P(1, 4, 4), (3, 3), 2),
    'adaptive_max_pool2d': lambda T, F, P, I: F.adaptive_max_pool2d(P(1, 2, 5, 5), 2),
    'adaptive_max_pool1d': lambda T, F, P, I: F.adaptive_max_pool1d(P(1, 2, 5), 2),
    'adaptive_max_pool1d_unbatched': lambda T, F, P, I: F.adaptive_max_pool1d(P(2, 5), 3),
    'adaptive_max_pool2d_unbatched': lambda T, F, P, I: F.adaptive_max_pool2d(P(2, 5, 4), 2),
    'fold_unbatched': lambda T, F, P, I: F.fold(P(4, 4), (3, 3), 2),
    'embedding_bag_mean': lambda T, F, P, I: F.embedding_bag(I(0, 2, 1), P(5, 3), I(0, 2)),
    'embedding_bag_weighted': lambda T, F, P, I: F.embedding_bag(
        I(0, 2, 1), P(5, 3), I(0, 2), mode='sum', per_sample_weights=P(3)),
    'put': lambda T, F, P, I: P(3).put(I(0), P(1)),
    'index_put': lambda T, F, P, I: P(3).index_put((I(0),), P(1)),
    'scatter_add': lambda T, F, P, I: P(3).scatter_add(0, I(0, 1), P(2)),
    'scatter_reduce': lambda T, F, P, I: P(3).scatter_reduce(0, I(0, 1), P(2), 'sum'),
    'index_copy': lambda T, F, P, I: P(3).index_copy(0, I(0), P(1)),
    'softmax': lambda T, F, P, I: F.softmax(P(3, 4), 1),
    'layer_norm': lambda T, F, P, I: F.layer_norm(P(3, 4), (4,)),
    'batch_norm': lambda T, F, P, I: F.batch_norm(P(3, 4), None, None, training=True),
    'conv1d': lambda T, F, P, I: F.conv1d(P(1, 1, 4), P(2, 1, 3), P(2)),
    'normalize': lambda T, F, P, I: F.normalize(P(3, 4)),
    'where_scalar_first': lambda T, F, P, I: T.where(I(True, False, True), 2.0, P(3)),
    'masked_fill': lambda T, F, P, I: P(3).masked_fill(I(True, False, True), 0.0),
    'masked_fill_tensor': lambda T, F, P, I: P(3).masked_fill(I(True, False, True),
                                                              P(1).sum()),
    'scatter': lambda T, F, P, I: P(3).scatter(0, I(0, 1), P(2)),
    'scatter_value': lambda T, F, P, I: P(3).scatter(0, I(0, 1), 2.0),
    'diag_embed': lambda T, F, P, I: T.diag_embed(P(2, 3)),
    'diag_of_vector': lambda T, F, P, I: T.diag(P(3)),
    'sgn': lambda T, F, P, I: P(3).sgn(),
    'softshrink': lambda T, F, P, I: F.softshrink(P(3)),
    'group_norm': lambda T, F, P, I: F.group_norm(P(2, 4, 3), 2),
    'group_norm_affine': lambda T, F, P, I: F.group_norm(P(2, 4, 3), 2, P(4), P(4)),
    'interpolate_nearest': lambda T, F, P, I: F.interpolate(P(1, 1, 4), scale_factor=2),
    'interpolate_bilinear': lambda T, F, P, I: F.interpolate(P(1, 1, 3, 3), size=5,
                                                             mode='bilinear'),
    'interpolate_area': lambda T, F, P, I: F.interpolate(P(1, 1, 4, 4), size=2, mode='area'),
    'adaptive_avg_pool2d': lambda T, F, P, I: F.adaptive_avg_pool2d(P(1, 1, 4, 4), 2),
    'adaptive_avg_pool2d_1': lambda T, F, P, I: F.adaptive_avg_pool2d(P(1, 1, 4, 4), 1),
    'mode': lambda T, F, P, I: T.mode(P(4))[0],
    'median': lambda T, F, P, I: T.median(P(3)),
    'median_dim': lambda T, F, P, I: T.median(P(2, 3), 1)[0],
    'add_alpha': lambda T, F, P, I: T.add(P(3), P(3), alpha=2),
    'sub_alpha': lambda T, F, P, I: T.sub(P(3), P(3), alpha=2),
    'matmul_batch_matrix': lambda T, F, P, I: T.matmul(P(2, 2, 3), P(3, 4)),
    'matmul_batch_vector': lambda T, F, P, I: T.matmul(P(2, 2, 3), P(3)),
    'matmul_vector_matrix': lambda T, F, P, I: T.matmul(P(3), P(3, 2)),
    'rms_norm': lambda T, F, P, I: F.rms_norm(P(3, 4).float(), (4,)),
    'rms_norm_weight': lambda T, F, P, I: F.rms_norm(P(3, 4).float(), (4,), P(4).float()),
    'prelu': lambda T, F, P, I: F.prelu(P(2, 3, 4), P(3)),
    'prelu_one_weight': lambda T, F, P, I: F.prelu(P(3, 2), P(1)),
    'prelu_vector': lambda T, F, P, I: F.prelu(P(3), P(1)),
    'prelu_frozen': lambda T, F, P, I: F.prelu(P(3, 2), P(2).detach()),
    'pairwise_distance': lambda T, F, P, I: F.pairwise_distance(P(3, 4), P(3, 4)),
    'triplet_margin_loss': lambda T, F, P, I: F.triplet_margin_loss(P(3, 4), P(3, 4), P(3, 4)),
    'clamp_min_scalar': lambda T, F, P, I: T.clamp_min(P(3), 0.9),
    'clamp_max_method': lambda T, F, P, I: P(3).clamp_max(P(3)),
    'outer': lambda T, F, P, I: T.outer(P(3), P(2)),
    'kron': lambda T, F, P, I: T.kron(P(2, 2), P(2, 3)),
    'conv2d_no_bias': lambda T, F, P, I: F.conv2d(P(1, 1, 4, 4), P(2, 1, 3, 3)),
}


def _run(lib, case):
    T, FF = _lib(lib)
    rs = np.random.RandomState(0)

    def P(*s):
        return T.tensor(rs.rand(*s) + 0.5, dtype=T.float64, requires_grad=True)

    def I(*v):  # noqa: E743
        return T.tensor(list(v))
    return CASES[case](T, FF, P, I)


@pytest.mark.parametrize('case', sorted(CASES))
def test_node_and_next_functions_as_pytorchs(case):
    want = _desc(_run('torch', case).grad_fn, 2)
    assert _desc(_run('tape', case).grad_fn, 2) == want


def test_names_without_pytorch():
    x = tape.randn(3, 4, requires_grad=True)
    loss = F.mse_loss(x * 2, tape.randn(3, 4))
    assert _desc(loss.grad_fn, 2) == 'MseLossBackward0(MulBackward0(AccumulateGrad,None),None)'
    y = tape.addmm(tape.randn(3, requires_grad=True), x, tape.randn(4, 3))
    assert _desc(y.grad_fn) == 'AddmmBackward0(AccumulateGrad,AccumulateGrad,None)'


def test_the_tutorial_network_chain():
    """The 60-minute blitz: loss.grad_fn, then two steps of next_functions[0][0]."""
    def chain(lib):
        T, FF = _lib(lib)
        T.manual_seed(0)
        nn = T.nn
        net = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
        out = net(T.randn(2, 8))
        loss = nn.MSELoss()(out, T.randn(2, 4))
        g = loss.grad_fn
        names = [g.name()]
        for _ in range(2):
            g = g.next_functions[0][0]
            names.append(g.name().replace('torch::autograd::', ''))
        return names, _desc(loss.grad_fn, 4)
    names, full = chain('tape')
    assert names == ['MseLossBackward0', 'AddmmBackward0', 'AccumulateGrad']
    assert (names, full) == chain('torch')


@pytest.mark.parametrize('case', ['mse_loss_none', 'addmm', 'hypot', 'lerp_tensor', 'linear',
                                  'var', 'dot', 'mv', 'index_add', 'clamp_min_tensor', 'tril',
                                  'masked_scatter', 'adaptive_max_pool2d', 'pixel_shuffle',
                                  'embedding_bag_weighted', 'unfold_batched', 'renorm'])
def test_calling_the_node_gives_the_arguments_gradients(case):
    out = _run('tape', case)
    nd = out.grad_fn
    g = tape.tensor(np.random.RandomState(1).rand(*out.shape) + 0.5, dtype=tape.float64)
    got = nd(g)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(nd.next_functions)
    # the tensors the entries stand for: an AccumulateGrad's variable, else the
    # output of the node (only leaves here, but for linear's TBackward0)
    for gi, (fn, _) in zip(got, nd.next_functions):
        if fn is None:
            assert gi is None
            continue
        if type(fn).__name__ == 'AccumulateGrad':
            want, = tape.autograd.grad(out, fn.variable, g, retain_graph=True)
        else:                               # linear: the gradient of weight.t()
            w = fn.next_functions[0][0].variable
            want, = tape.autograd.grad(out, w, g, retain_graph=True)
            want = want.t()
        assert tuple(gi.shape) == tuple(want.shape)
        np.testing.assert_allclose(gi.detach().numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_a_node_of_non_leaf_arguments_returns_their_shapes():
    a = tape.rand(3, 4, dtype=tape.float64, requires_grad=True)
    p, q = a * 2, a.exp()
    h = tape.hypot(p, q)
    gp, gq = h.grad_fn(tape.ones(3, 4, dtype=tape.float64))
    assert tuple(gp.shape) == tuple(gq.shape) == (3, 4)
    want = tape.autograd.grad(h, (p, q), tape.ones(3, 4, dtype=tape.float64))
    np.testing.assert_allclose(gp.detach().numpy(), want[0].numpy())
    np.testing.assert_allclose(gq.detach().numpy(), want[1].numpy())


def _fresh_tape():
    grad_mode.open_tape = None      # the next graph from leaves starts a tape of its own


def test_names_survive_a_merge_of_tapes():
    a = tape.rand(3, dtype=tape.float64, requires_grad=True)
    b = tape.rand(3, dtype=tape.float64, requires_grad=True)
    _fresh_tape()
    loss = F.mse_loss(a * 2, tape.zeros(3, dtype=tape.float64))
    _fresh_tape()
    other = (b * 3).sum()
    assert loss._tape is not other._tape
    total = other + loss                # one tape's records move onto the other's
    assert _desc(loss.grad_fn, 2) == 'MseLossBackward0(MulBackward0(AccumulateGrad,None),None)'
    assert loss.grad_fn.next_functions[0][0].next_functions[0][0].variable is a
    ga, gt = loss.grad_fn(tape.tensor(1.0, dtype=tape.float64))
    assert gt is None                   # (the gradient of a * 2, the node's input)
    np.testing.assert_allclose(ga.detach().numpy(), 4 * a.detach().numpy() / 3)
    total.backward()
    np.testing.assert_allclose(a.grad.numpy(), 8 * a.detach().numpy() / 3)
    np.testing.assert_allclose(b.grad.numpy(), [3.0] * 3)


def test_arguments_on_two_tapes_merged_by_the_call():
    a = tape.rand(3, dtype=tape.float64, requires_grad=True)
    b = tape.rand(3, dtype=tape.float64, requires_grad=True)
    _fresh_tape()
    p = a * 2
    _fresh_tape()
    q = (b * 3).exp().log()             # records before the call on q's tape
    assert p._tape is not q._tape
    h = tape.hypot(p, q)
    assert _desc(h.grad_fn) == 'HypotBackward0(MulBackward0,LogBackward0)'
    gp, gq = h.grad_fn(tape.ones(3, dtype=tape.float64))
    want = tape.autograd.grad(h, (p, q), tape.ones(3, dtype=tape.float64))
    np.testing.assert_allclose(gp.detach().numpy(), want[0].numpy())
    np.testing.assert_allclose(gq.detach().numpy(), want[1].numpy())


def test_no_grad_and_non_float_calls_name_nothing():
    with tape.no_grad():
        assert F.mse_loss(tape.randn(3, requires_grad=True), tape.randn(3)).grad_fn is None
    assert tape.clamp(tape.randn(3, requires_grad=True), -0.5, 0.5).grad_fn.name() == \
        'ClampBackward1'                # scalar bounds: the primitive's own node


def test_jit_replays_keep_the_name():
    @tape.jit
    def loss_fn(x, t):
        return F.mse_loss(x * 2, t)
    x = tape.rand(3, 4, requires_grad=True)
    t = tape.rand(3, 4)
    for _ in range(3):
        loss = loss_fn(x, t)
        assert _desc(loss.grad_fn, 2) == \
            'MseLossBackward0(MulBackward0(AccumulateGrad,None),None)'
    assert loss_fn.stats()['replays'] >= 1
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * (2 * x.detach().numpy() - t.numpy()) / 12,
                               rtol=1e-5)


def test_custom_function_lists_tensor_arguments_only():
    class Scale(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None
    x = tape.rand(3, requires_grad=True)
    assert _desc(Scale.apply(x, 2, None).grad_fn) == 'ScaleBackward(AccumulateGrad)'
    assert _desc(Scale.apply(x, 2, tape.ones(3)).grad_fn) == 'ScaleBackward(AccumulateGrad,None)'


def test_the_tutorial_convnet_graph_is_pytorchs():
    """The 60-minute blitz's LeNet: its whole graph, node by node, as PyTorch's."""
    def graph(lib):
        T, FF = _lib(lib)
        nn = T.nn
        T.manual_seed(0)
        conv1, conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        fc1, fc2, fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, 10)
        x = FF.max_pool2d(FF.relu(conv1(T.randn(1, 1, 32, 32))), (2, 2))
        x = T.flatten(FF.max_pool2d(FF.relu(conv2(x)), 2), 1)
        out = fc3(FF.relu(fc2(FF.relu(fc1(x)))))
        loss = nn.MSELoss()(out, T.randn(10).view(1, -1))
        return _desc(loss.grad_fn, 20)
    got = graph('tape')
    assert got.startswith('MseLossBackward0(AddmmBackward0(AccumulateGrad,ReluBackward0(')
    assert got == graph('torch')


def test_a_history_moved_off_a_released_tape_keeps_the_node():
    w = tape.rand(3, 3, requires_grad=True)
    tr = tape.trace(w)                  # made once, used after a backward released its tape
    (tr * 2).backward()
    y = tr * 3
    assert _desc(y.grad_fn, 2) == 'MulBackward0(TraceBackward0(AccumulateGrad),None)'
    assert tr.grad_fn.next_functions[0][0].variable is w
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), 5 * np.eye(3))


def test_custom_function_hooks_see_one_gradient_per_tensor_argument():
    def run(lib):
        T, _ = _lib(lib)

        class Scale(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, y):
                return x * k * y

            @staticmethod
            def backward(ctx, g):
                return g * 2, None, g * 3
        x = T.ones(3, requires_grad=True)
        y = T.ones(3, requires_grad=True)
        out = Scale.apply(x, 2, y)
        seen = []
        out.grad_fn.register_hook(lambda gi, go: seen.append(len(gi)))
        out.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, gi[1]))
        out.sum().backward()
        out = Scale.apply(x, 2, y)
        out.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
        g, = T.autograd.grad(out.sum(), x, create_graph=True)
        return seen, x.grad.tolist(), y.grad.tolist(), g.tolist()
    got = run('tape')
    assert got == ([2], [20.0] * 3, [3.0] * 3, [20.0] * 3)
    assert got == run('torch')


MULTI = {
    'split': lambda T, x: x.split(2),
    'split_sizes': lambda T, x: x.split([1, 3]),
    'chunk': lambda T, x: x.chunk(2, 1),
    'unbind': lambda T, x: x.unbind(1),
    'iterate': lambda T, x: tuple(x),
    'std_mean': lambda T, x: T.std_mean(x),
    'var_mean_dim': lambda T, x: T.var_mean(x, 1),
    'aminmax': lambda T, x: T.aminmax(x),
    'aminmax_dim': lambda T, x: T.aminmax(x, dim=0),
}


@pytest.mark.parametrize('case', sorted(MULTI))
def test_one_node_of_several_outputs(case):
    """split, unbind, std_mean...: every output's grad_fn is the same node, its
    output_nr the output's place, and calling it takes one gradient per output."""
    def run(lib):
        T, _ = _lib(lib)
        x = T.tensor(np.random.RandomState(3).rand(4, 3), requires_grad=True)
        outs = MULTI[case](T, x * 1)
        g = outs[0].grad_fn
        seeds = [T.ones_like(o) * (i + 1) for i, o in enumerate(outs)]
        got = g(*seeds)
        got = got if isinstance(got, tuple) else (got,)
        return (_desc(g, 2), [o.grad_fn is g for o in outs], [o.output_nr for o in outs],
                [r.detach().numpy().round(12).tolist() for r in got])
    got = run('tape')
    assert all(got[1])
    assert got == run('torch')


def test_a_node_of_several_outputs_survives_a_merge():
    x = tape.rand(4, 3, dtype=tape.float64, requires_grad=True)
    y = tape.rand(3, dtype=tape.float64, requires_grad=True)
    _fresh_tape()
    a, b = (x * 2).split(2)
    _fresh_tape()
    c = (y * 3).sum()
    total = c + (a * b).sum()           # merges the two tapes
    assert a.grad_fn is b.grad_fn and b.output_nr == 1
    ga = a.grad_fn(tape.ones(2, 3, dtype=tape.float64), tape.ones(2, 3, dtype=tape.float64) * 2)
    np.testing.assert_allclose(ga.detach().numpy(), [[1] * 3] * 2 + [[2] * 3] * 2)
    total.backward()
    xd = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.concatenate([xd[2:], xd[:2]]))


@pytest.mark.parametrize('create_graph', [False, True])
def test_hooks_on_a_composite_node_see_its_arguments(create_graph):
    """Pre and post hooks on MseLossBackward0 and AddmmBackward0, as PyTorch runs
    them: one grad_input per next_functions entry, a returned tuple replaces them."""
    def run(lib):
        T, FF = _lib(lib)
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        t = T.tensor([0.0, 0.0, 1.0])
        loss = FF.mse_loss(x * 2, t)
        seen = []
        loss.grad_fn.register_prehook(lambda go: seen.append(('pre', go[0].tolist())))
        loss.grad_fn.register_hook(lambda gi, go: seen.append(
            ('post', [None if g is None else [round(v, 5) for v in g.tolist()] for g in gi])))
        loss.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
        if create_graph:
            g, = T.autograd.grad(loss, x, create_graph=True)
            h, = T.autograd.grad(g.sum(), x)
            grads = [g.tolist(), h.tolist()]
        else:
            loss.backward()
            grads = [x.grad.tolist()]
        a = T.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        w = T.tensor(np.arange(12.0).reshape(4, 3) / 10, requires_grad=True)
        b = T.zeros(4, dtype=T.float64, requires_grad=True)
        out = FF.linear(a, w, b)
        shapes = []
        out.grad_fn.register_hook(lambda gi, go: shapes.append(
            [None if g is None else tuple(g.shape) for g in gi]))
        out.sum().backward()
        return seen, [[round(v, 4) for v in g] for g in grads], shapes, w.grad.tolist()
    got = run('tape')
    assert got[2] == [[(4,), (2, 3), (3, 4)]]
    assert got == run('torch')


@pytest.mark.parametrize('op', ['softmax', 'log_softmax', 'cross_entropy', 'nll_loss',
                                'layer_norm'])
def test_own_function_node_call_matches_torch(op):
    """The library's own Functions (one record standing for PyTorch's native op)
    answer a node call as PyTorch's node: one gradient per next_functions entry,
    a lone gradient as a tensor, not a tuple of the Function's arguments."""
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 5))
    w, b = rng.standard_normal(5), rng.standard_normal(5)
    t = np.array([0, 3, 1, 4])

    def run(lib):
        F = lib.nn.functional
        xs = lib.tensor(x, requires_grad=True)
        if op == 'layer_norm':
            y = F.layer_norm(xs, (5,), lib.tensor(w, requires_grad=True),
                             lib.tensor(b, requires_grad=True))
        elif op == 'cross_entropy':
            y = F.cross_entropy(xs, lib.tensor(t))
        elif op == 'nll_loss':
            y = F.nll_loss(xs, lib.tensor(t))
        else:
            y = getattr(F, op)(xs, 1)
        g = lib.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))
        res = y.grad_fn(g)
        if op == 'cross_entropy' and lib is torch:
            # tape's node folds PyTorch's LogSoftmaxBackward0 below it into itself
            res = y.grad_fn.next_functions[0][0](res)
        return res
    got, want = run(tape), run(torch)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
    else:
        assert isinstance(got, tape.Tensor)
        got, want = (got,), (want,)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
