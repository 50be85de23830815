"""F.cross_entropy with class-index targets (tape/nn/_cross_entropy.py, kernels in
compiler/loss_kernels.py) against PyTorch: values and gradients for weights,
ignore_index (some and every target), each reduction, 1-D, 2-D and N-D inputs,
float32 and float64, NaN and inf logits, and double backward."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F

torch = pytest.importorskip("torch")

SHAPES = [(32, 3), (64, 10), (7,), (4, 5, 3), (2, 4, 3, 2), (3, 33)]


def _tol(dt):
    return dict(rtol=2e-5, atol=2e-6) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)


def _case(shape, dt, seed=0, ignore=None):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dt)
    ncls = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
    t = rng.integers(0, ncls, tshape)
    if ignore == 'some' and t.ndim:
        t.reshape(-1)[::3] = -100
    elif ignore == 'all':
        t = np.full(tshape, -100)
    w = rng.uniform(0.5, 2.0, ncls).astype(dt)
    return x, t, w


def _both(x, t, w, reduction, gseed=1, **kw):
    """(tape loss, tape grad, torch loss, torch grad), backward with a random
    upstream gradient (for 'none') so each sample's coefficient is checked."""
    xa = tape.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    wa = None if w is None else tape.tensor(w)
    wt = None if w is None else torch.tensor(w)
    ya = F.cross_entropy(xa, tape.tensor(t), weight=wa, reduction=reduction, **kw)
    yt = torch.nn.functional.cross_entropy(xt, torch.tensor(t), weight=wt,
                                           reduction=reduction, **kw)
    g = np.random.default_rng(gseed).uniform(0.5, 1.5, yt.shape).astype(x.dtype)
    ya.backward(tape.tensor(g))
    yt.backward(torch.tensor(g))
    return ya, xa.grad, yt, xt.grad


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('ignore', [None, 'some'])
def test_matches_torch(dt, shape, reduction, weighted, ignore):
    x, t, w = _case(shape, dt, ignore=ignore)
    ya, ga, yt, gt = _both(x, t, w if weighted else None, reduction)
    assert ya.dtype == (tape.float32 if dt == np.float32 else tape.float64)
    assert ga.dtype == ya.dtype and tuple(ya.shape) == tuple(yt.shape)
    assert ya.grad_fn.name() == 'NllLossBackward0'
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **_tol(dt))
    np.testing.assert_allclose(ga.numpy(), gt.numpy(), **_tol(dt))


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('shape', [(8, 4), (3, 4, 5)])
def test_every_target_ignored(dt, reduction, shape):
    x, t, w = _case(shape, dt, ignore='all')
    for weight in (None, w):
        ya, ga, yt, gt = _both(x, t, weight, reduction)
        np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), equal_nan=True)
        np.testing.assert_allclose(ga.numpy(), gt.numpy(), equal_nan=True)
    if reduction == 'mean':
        assert np.isnan(ya.item())


def test_ignore_index_inside_class_range():
    x, t, _ = _case((16, 5), np.float64)
    ya, ga, yt, gt = _both(x, t, None, 'mean', ignore_index=2)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ga.numpy(), gt.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize('dt', [np.float32, np.float64])
@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
def test_nan_and_inf_logits(dt, reduction):
    x, t, _ = _case((6, 4), dt)
    t[:] = [0, 1, 2, 3, 0, 1]
    x[0, 2] = np.nan                # NaN elsewhere in the row: NaN loss and gradient row
    x[1, 3] = np.inf                # +inf not the target: NaN
    x[2, 0] = -np.inf               # -inf not the target: finite, its softmax 0
    x[3, 3] = -np.inf               # -inf at the target: an infinite loss
    x[4, :] = 1e30 if dt == np.float64 else 1e30  # huge equal logits: log(4)
    ya, ga, yt, gt = _both(x, t, None, reduction)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), equal_nan=True, **_tol(dt))
    np.testing.assert_allclose(ga.numpy(), gt.numpy(), equal_nan=True, **_tol(dt))


@pytest.mark.parametrize('reduction', ['mean', 'none'])
def test_ignored_sample_with_bad_logits_counts_zero(reduction):
    """An ignored sample adds 0 to the loss whatever its logits (as PyTorch)."""
    x, t, _ = _case((5, 3), np.float64)
    t[1] = -100
    x[1, 0] = -np.inf
    ya, ga, yt, gt = _both(x, t, None, reduction)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ga.numpy(), gt.numpy(), rtol=1e-12, atol=1e-15)


def test_zero_class_weights_give_nan_mean():
    x, t, w = _case((6, 3), np.float64)
    t[:] = 1
    w[1] = 0
    ya, ga, yt, gt = _both(x, t, w, 'mean')
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), equal_nan=True)
    np.testing.assert_allclose(ga.numpy(), gt.numpy(), equal_nan=True)


def test_target_dtypes_and_layouts():
    x, t, _ = _case((12, 4), np.float32)
    ref, *_ = _both(x, t, None, 'none')
    for tt in (t.astype(np.uint8), np.repeat(t, 2)[::2]):
        ya = F.cross_entropy(tape.tensor(x), tape.tensor(tt), reduction='none')
        np.testing.assert_array_equal(ya.detach().numpy(), ref.detach().numpy())
    with pytest.raises(RuntimeError, match='expected target dtype to be Long or Byte'):
        F.cross_entropy(tape.tensor(x), tape.tensor(t.astype(np.int32)))     # as PyTorch
    xs = np.asfortranarray(x)       # non-contiguous logits
    ya = F.cross_entropy(tape.tensor(xs), tape.tensor(t), reduction='none')
    np.testing.assert_array_equal(ya.detach().numpy(), ref.detach().numpy())


@pytest.mark.parametrize('bad', [4, -1, -5])
def test_out_of_range_target_raises_as_torch(bad):
    x, t, _ = _case((6, 4), np.float32)
    t[2] = bad
    with pytest.raises((IndexError, RuntimeError)):
        F.cross_entropy(tape.tensor(x, requires_grad=True), tape.tensor(t))
    with pytest.raises((IndexError, RuntimeError)):
        torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t))


def test_large_rows_match_torch():
    x, t, w = _case((300, 1000), np.float32, seed=3)
    for weight in (None, w):
        ya, ga, yt, gt = _both(x, t, weight, 'mean')
        np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(ga.numpy(), gt.numpy(), rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize('reduction', ['mean', 'sum', 'none'])
@pytest.mark.parametrize('shape', [(5, 4), (4,), (2, 3, 2)])
def test_double_backward(reduction, shape):
    x, t, w = _case(shape, np.float64, ignore='some')
    for weight in (None, tape.tensor(w)):
        def f(z):
            return F.cross_entropy(z, tape.tensor(t), weight=weight, reduction=reduction)
        assert tape.autograd.gradcheck(f, (tape.tensor(x, requires_grad=True),))
        assert tape.autograd.gradgradcheck(f, (tape.tensor(x, requires_grad=True),))
    xa = tape.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    v = np.random.default_rng(2).standard_normal(shape)
    ga, = tape.autograd.grad(F.cross_entropy(xa, tape.tensor(t), reduction='sum'), xa,
                             create_graph=True)
    gt, = torch.autograd.grad(torch.nn.functional.cross_entropy(xt, torch.tensor(t),
                                                                reduction='sum'), xt,
                              create_graph=True)
    ha, = tape.autograd.grad((ga * tape.tensor(v)).sum(), xa)
    ht, = torch.autograd.grad((gt * torch.tensor(v)).sum(), xt)
    np.testing.assert_allclose(ha.numpy(), ht.numpy(), rtol=1e-10, atol=1e-12)
