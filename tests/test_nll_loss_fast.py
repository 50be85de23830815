"""F.nll_loss with class-index targets as one record (tape/nn/_cross_entropy.py,
kernels in compiler/loss_kernels.py) against PyTorch: values, gradients and
nodes for weights, ignore_index (some and every target), each reduction, 1-D to
5-D inputs, float32 and float64, NaN and inf, double backward; and the
composite path it falls back to."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from tests.test_cross_entropy_fast import _case, _tol  # noqa: E402  (the same cases)

SHAPES = [(7,), (5, 7), (64, 10), (3, 6, 4), (2, 5, 3, 2), (2, 4, 3, 2, 2), (300, 64)]


def _nodes(fn, depth=2):
    out = []

    def walk(n, d):
        if n is None or d > depth:
            return
        out.append((d, n.name()))
        for c, _ in n.next_functions:
            walk(c, d + 1)
    walk(fn, 0)
    return out


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('ignore', [None, 'some'])
def test_matches_torch(dt, shape, reduction, weighted, ignore):
    """Values, gradient (under a random upstream gradient for 'none', so each
    sample's coefficient counts), dtypes and the nodes two levels down."""
    x, t, w = _case(shape, dt, ignore=ignore)
    w = w if weighted else None
    xa = tape.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    # log-probabilities that are a graph tensor, as a model's log_softmax output
    ya = F.nll_loss(xa * 1.0, tape.tensor(t), weight=None if w is None else tape.tensor(w),
                    reduction=reduction)
    yt = TF.nll_loss(xt * 1.0, torch.tensor(t), weight=None if w is None else torch.tensor(w),
                     reduction=reduction)
    assert ya.dtype == (tape.float32 if dt == np.float32 else tape.float64)
    assert tuple(ya.shape) == tuple(yt.shape)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dt))
    assert _nodes(ya.grad_fn) == _nodes(yt.grad_fn)
    g = np.random.default_rng(1).uniform(0.5, 1.5, tuple(yt.shape)).astype(dt)
    ya.backward(tape.tensor(g))
    yt.backward(torch.tensor(g))
    assert xa.grad.dtype == ya.dtype
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), **_tol(dt))


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_every_target_ignored(reduction):
    x, t, _ = _case((4, 5), np.float64, ignore='all')
    xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya = F.nll_loss(xa, tape.tensor(t), reduction=reduction)
    yt = TF.nll_loss(xt, torch.tensor(t), reduction=reduction)
    np.testing.assert_array_equal(ya.detach().numpy(), yt.detach().numpy())   # NaN for mean
    ya.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(xa.grad.numpy(), xt.grad.numpy())
    assert (xa.grad.numpy() == 0).all()


def test_nan_and_inf_log_probabilities():
    """-inf at a target gives inf; NaN at an ignored sample does not reach the
    loss; a weight of 0 on an inf gives NaN, as 0 * inf does in PyTorch."""
    x = np.array([[-np.inf, 0.0, -1.0], [np.nan, -2.0, -3.0], [0.5, -np.inf, -1.0]])
    t = np.array([0, -100, 1])
    for w in (None, np.array([0.0, 1.0, 2.0])):
        for reduction in ('none', 'sum', 'mean'):
            xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
            kw = {} if w is None else {'weight': w}
            ya = F.nll_loss(xa, tape.tensor(t), reduction=reduction,
                            **{k: tape.tensor(v) for k, v in kw.items()})
            yt = TF.nll_loss(xt, torch.tensor(t), reduction=reduction,
                             **{k: torch.tensor(v) for k, v in kw.items()})
            np.testing.assert_array_equal(ya.detach().numpy(), yt.detach().numpy())
            ya.sum().backward()
            yt.sum().backward()
            np.testing.assert_array_equal(xa.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('shape', [(6,), (4, 6), (3, 4, 2), (2, 3, 2, 2)])
def test_second_order_matches_torch(reduction, shape):
    """create_graph: the gradient is itself recorded (linear in the upstream
    gradient), so a gradient of the gradient matches PyTorch's, and
    gradgradcheck passes."""
    x, t, w = _case(shape, np.float64, seed=3, ignore='some')
    xa, xt = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)

    def fa(z):
        return F.nll_loss(F.log_softmax(z, 0 if len(shape) == 1 else 1), tape.tensor(t),
                          weight=tape.tensor(w), reduction=reduction)
    ya = fa(xa)
    yt = TF.nll_loss(TF.log_softmax(xt, 0 if len(shape) == 1 else 1), torch.tensor(t),
                     weight=torch.tensor(w), reduction=reduction)
    (ga,) = tape.autograd.grad(ya.sum(), xa, create_graph=True)
    (gt,) = torch.autograd.grad(yt.sum(), xt, create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gt.detach().numpy(), **_tol(np.float64))
    v = np.random.default_rng(4).standard_normal(shape)
    (ha,) = tape.autograd.grad((ga * tape.tensor(v)).sum(), xa)
    (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), xt)
    np.testing.assert_allclose(ha.numpy(), ht.numpy(), **_tol(np.float64))
    assert tape.autograd.gradcheck(fa, (tape.tensor(x, requires_grad=True),))
    assert tape.autograd.gradgradcheck(fa, (tape.tensor(x, requires_grad=True),))


def test_compiled_sweep_and_create_graph_agree():
    x, t, w = _case((8, 5), np.float64, seed=6, ignore='some')
    grads = []
    for create in (False, True):
        xa = tape.tensor(x, requires_grad=True)
        y = F.nll_loss(xa, tape.tensor(t), weight=tape.tensor(w), reduction='none')
        # (the gradient is linear in g and does not read x: it is a graph
        # tensor under create_graph when g requires grad)
        g = tape.tensor(np.linspace(0.5, 2.0, 8), requires_grad=True)
        (gx,) = tape.autograd.grad(y, xa, g, create_graph=create)
        assert (gx.grad_fn is not None) == create
        grads.append(gx.detach().numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_one_record_of_a_log_softmax():
    """The MNIST example's loss: nll_loss's node is one record on log_softmax's,
    and the node, called, gives the gradient of its input."""
    x = np.random.default_rng(0).standard_normal((16, 10)).astype(np.float32)
    xa = tape.tensor(x, requires_grad=True)
    t = np.arange(16) % 10
    y = F.nll_loss(F.log_softmax(xa, 1), tape.tensor(t))
    assert y.grad_fn.name() == 'NllLossBackward0'
    assert [n.name() for n, _ in y.grad_fn.next_functions if n is not None] == \
        ['LogSoftmaxBackward0']
    g = y.grad_fn(tape.tensor(np.float32(2.0)))     # (one gradient: a tensor, as PyTorch's)
    assert isinstance(g, tape.Tensor)
    want = np.zeros((16, 10), np.float32)
    want[np.arange(16), t] = -2.0 / 16
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


def test_in_place_change_of_the_input_is_caught():
    xa = tape.randn(4, 3, dtype=tape.float64, requires_grad=True)
    lp = F.log_softmax(xa, 1)
    y = F.nll_loss(lp, tape.tensor([0, 1, 2, 0]))
    lp.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.backward()


def test_errors_and_other_cases_keep_the_composite():
    x = tape.randn(3, 4, requires_grad=True)
    with pytest.raises(IndexError):
        F.nll_loss(x, tape.tensor([0, 4, 1]))
    with pytest.raises((RuntimeError, ValueError)):
        F.nll_loss(x, tape.tensor([0, 1]))
    with pytest.raises(RuntimeError):
        F.nll_loss(x, tape.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError):
        F.nll_loss(x, tape.tensor([0, 1, 2]), weight=tape.ones(4, dtype=tape.float64))
    # a weight that requires grad: refused where the op would be recorded, as
    # PyTorch's kernels have no derivative for it; under no_grad, a constant
    w = tape.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="'nll_loss_forward' is not differentiable with "
                                           "respect to argument 'weight'"):
        F.nll_loss(x, tape.tensor([0, 1, 2]), weight=w)
    with tape.no_grad():
        y = F.nll_loss(x, tape.tensor([0, 1, 2]), weight=w)
    want = -np.array([1.0, 2.0, 3.0]) @ x.detach().numpy()[[0, 1, 2], [0, 1, 2]] / 6.0
    np.testing.assert_allclose(y.item(), want, rtol=1e-6)
    # the legacy arguments
    ya = F.nll_loss(x, tape.tensor([0, 1, 2]), size_average=False)
    np.testing.assert_allclose(ya.item(), -(x.detach().numpy()[[0, 1, 2], [0, 1, 2]]).sum(),
                               rtol=1e-6)


def test_module_and_jit_match_eager():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 6))
    t = tape.tensor(rng.integers(0, 6, 8))
    loss = tape.nn.NLLLoss()

    def f(z):
        return loss(F.log_softmax(z, 1), t)
    xa = tape.tensor(x, requires_grad=True)
    f(xa).backward()
    jf = tape.jit(f)
    for _ in range(3):
        xj = tape.tensor(x, requires_grad=True)
        y = jf(xj)
        y.backward()
        np.testing.assert_allclose(y.item(), f(tape.tensor(x)).item(), rtol=1e-12)
        np.testing.assert_allclose(xj.grad.numpy(), xa.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize('shape', [(4,), (3, 4), (2, 4, 5), (2, 4, 3, 2)])
@pytest.mark.parametrize('fn', ['nll_loss', 'cross_entropy'])
def test_weight_requiring_grad_is_refused_as_in_torch(fn, shape):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    t = rng.integers(0, 4, shape[:1] + shape[2:]) if len(shape) > 1 else np.int64(2)
    w = rng.random(4)
    msgs = {}
    for name, lib in (('torch', torch), ('tape', tape)):
        f = getattr(lib.nn.functional, fn)
        xt = lib.tensor(x, requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        with pytest.raises(RuntimeError) as e:
            f(xt, lib.tensor(t), weight=wt)
        msgs[name] = str(e.value)
        with lib.no_grad():
            msgs[name + ' value'] = round(float(f(xt, lib.tensor(t), weight=wt)), 10)
    assert msgs['tape'] == msgs['torch']
    assert msgs['tape value'] == msgs['torch value']
    # probability targets: cross_entropy is a composite in both, and the weight's
    # gradient flows
    if fn == 'cross_entropy' and len(shape) == 2:
        p = rng.random(shape)
        p /= p.sum(1, keepdims=True)
        grads = {}
        for name, lib in (('torch', torch), ('tape', tape)):
            wt = lib.tensor(w, requires_grad=True)
            lib.nn.functional.cross_entropy(lib.tensor(x), lib.tensor(p), weight=wt).backward()
            grads[name] = wt.grad.numpy()
        np.testing.assert_allclose(grads['tape'], grads['torch'], rtol=1e-10)
