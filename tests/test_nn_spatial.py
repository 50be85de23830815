"""The spatial ops of ``tape/nn/_spatial.py`` against PyTorch: values, gradients,
double backward (float64 gradcheck), module reprs and error types."""
import numpy as np
import pytest

import tape
import tape.nn as nn
import tape.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape, seed=0, dtype=np.float32, lo=-1.0, hi=1.0):
    a = np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)
    return (tape.tensor(a.copy(), requires_grad=True),
            torch.tensor(a.copy(), requires_grad=True))


def _check(tfn, ffn, shape, seed=0, atol=1e-5, dtype=np.float32, lo=-1.0, hi=1.0):
    """Compare outputs and input gradients (with a random upstream gradient)."""
    x, xt = _pair(shape, seed, dtype, lo, hi)
    y, yt = tfn(x), ffn(xt)
    assert tuple(y.shape) == tuple(yt.shape)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), atol=atol, rtol=1e-5)
    g = np.random.default_rng(seed + 1).standard_normal(tuple(yt.shape)).astype(dtype)
    y.backward(tape.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), atol=atol, rtol=1e-5)


def _gradcheck(fn, shape, seed=0):
    x = tape.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tape.float64,
                    requires_grad=True)
    assert tape.autograd.gradcheck(fn, (x,))
    assert tape.autograd.gradgradcheck(fn, (x,))


# -- interpolate -------------------------------------------------------------------------
INTERP = [
    ((1, 2, 5), dict(size=9, mode='nearest')),
    ((1, 2, 5), dict(size=3, mode='nearest')),
    ((1, 2, 5), dict(scale_factor=2, mode='nearest')),
    ((1, 2, 5), dict(scale_factor=1.7, mode='nearest')),
    ((1, 2, 5), dict(scale_factor=1.7, mode='nearest', recompute_scale_factor=True)),
    ((1, 2, 7), dict(size=4, mode='nearest-exact')),
    ((1, 2, 4), dict(scale_factor=2.5, mode='nearest-exact')),
    ((2, 3, 4, 5), dict(size=(7, 3), mode='nearest')),
    ((2, 3, 4, 5), dict(scale_factor=(2, 3), mode='nearest')),
    ((1, 1, 3, 4, 5), dict(size=(5, 2, 7), mode='nearest')),
    ((1, 2, 5), dict(size=8, mode='linear')),
    ((1, 2, 5), dict(size=8, mode='linear', align_corners=True)),
    ((1, 2, 5), dict(size=3, mode='linear')),
    ((1, 2, 5), dict(scale_factor=1.3, mode='linear')),
    ((1, 2, 5), dict(size=1, mode='linear', align_corners=True)),
    ((2, 3, 4, 5), dict(size=(7, 3), mode='bilinear')),
    ((2, 3, 4, 5), dict(size=(7, 3), mode='bilinear', align_corners=True)),
    ((2, 3, 4, 5), dict(scale_factor=(1.5, 0.6), mode='bilinear')),
    ((2, 3, 4, 5), dict(scale_factor=2.2, mode='bilinear', recompute_scale_factor=True)),
    ((1, 2, 3, 4, 5), dict(size=(4, 6, 3), mode='trilinear')),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode='trilinear', align_corners=True)),
    ((1, 2, 4, 5), dict(size=(7, 9), mode='bicubic')),
    ((1, 2, 4, 5), dict(size=(3, 8), mode='bicubic', align_corners=True)),
    ((1, 2, 6, 5), dict(size=(3, 2), mode='area')),
    ((1, 2, 6), dict(scale_factor=0.5, mode='area')),
]


@pytest.mark.parametrize('shape,kw', INTERP)
def test_interpolate_matches_torch(shape, kw):
    _check(lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw), shape)


@pytest.mark.parametrize('kw', [dict(size=(5, 3), mode='bilinear'),
                                dict(size=(3, 7), mode='bilinear', align_corners=True),
                                dict(scale_factor=1.5, mode='nearest'),
                                dict(size=(4, 4), mode='bicubic')])
def test_interpolate_gradcheck(kw):
    _gradcheck(lambda x: F.interpolate(x, **kw), (1, 1, 3, 2))


def test_interpolate_float64_and_int_nearest():
    a = np.random.default_rng(0).standard_normal((1, 1, 3, 5))
    for mode in ('nearest', 'bilinear'):
        y = F.interpolate(tape.tensor(a), size=(7, 4), mode=mode)
        yt = TF.interpolate(torch.tensor(a), size=(7, 4), mode=mode)
        np.testing.assert_allclose(y.numpy(), yt.numpy(), atol=1e-12)
    ai = np.arange(15, dtype=np.uint8).reshape(1, 1, 3, 5)
    np.testing.assert_array_equal(F.interpolate(tape.tensor(ai), size=(5, 2)).numpy(),
                                  TF.interpolate(torch.tensor(ai), size=(5, 2)).numpy())
    with pytest.raises(NotImplementedError):
        F.interpolate(tape.tensor(ai), size=(5, 2), mode='bilinear')


def test_interpolate_errors():
    x = tape.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError):
        F.interpolate(x)
    with pytest.raises(ValueError):
        F.interpolate(x, size=2, align_corners=True)          # nearest
    with pytest.raises(ValueError):
        F.interpolate(x, size=(2, 2, 2))
    with pytest.raises(ValueError):
        F.interpolate(x, scale_factor=(2, 2, 2))
    with pytest.raises(ValueError):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    with pytest.raises(TypeError):
        F.interpolate(x, size=(2.0, 2))
    with pytest.raises(NotImplementedError):
        F.interpolate(x, size=2, mode='linear')
    with pytest.raises(NotImplementedError):
        F.interpolate(tape.zeros(1, 4, 4), size=2, mode='bilinear')
    with pytest.raises(NotImplementedError):
        F.interpolate(tape.zeros(4, 4), size=2)
    with pytest.raises(RuntimeError):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(RuntimeError):
        TF.interpolate(torch.zeros(1, 1, 4, 4), scale_factor=0.1)


def test_upsample_modules():
    assert repr(nn.Upsample(scale_factor=2)) == repr(torch.nn.Upsample(scale_factor=2))
    assert repr(nn.Upsample(size=(3, 4), mode='bilinear')) == \
        repr(torch.nn.Upsample(size=(3, 4), mode='bilinear'))
    assert repr(nn.Upsample(scale_factor=(2, 3))) == repr(torch.nn.Upsample(scale_factor=(2, 3)))
    assert repr(nn.UpsamplingNearest2d(scale_factor=2)) == \
        repr(torch.nn.UpsamplingNearest2d(scale_factor=2))
    assert repr(nn.UpsamplingBilinear2d(size=5)) == repr(torch.nn.UpsamplingBilinear2d(size=5))
    _check(nn.UpsamplingBilinear2d(size=(5, 7)), torch.nn.UpsamplingBilinear2d(size=(5, 7)),
           (1, 2, 3, 4))
    _check(nn.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(scale_factor=3),
           (1, 2, 3, 4))
    m = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False)
    assert list(m.parameters()) == []
    _check(m, torch.nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False),
           (2, 1, 3, 3))


# -- shuffles ----------------------------------------------------------------------------
@pytest.mark.parametrize('shape,r', [((1, 8, 2, 3), 2), ((2, 9, 3, 1), 3), ((4, 4, 5), 2),
                                     ((2, 3, 4, 2, 2), 1)])
def test_pixel_shuffle(shape, r):
    _check(lambda x: F.pixel_shuffle(x, r), lambda x: TF.pixel_shuffle(x, r), shape)
    _check(nn.PixelShuffle(r), torch.nn.PixelShuffle(r), shape)


@pytest.mark.parametrize('shape,r', [((1, 2, 4, 6), 2), ((2, 1, 3, 6), 3), ((3, 4, 2), 2)])
def test_pixel_unshuffle(shape, r):
    _check(lambda x: F.pixel_unshuffle(x, r), lambda x: TF.pixel_unshuffle(x, r), shape)
    _check(nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r), shape)
    x = tape.randn(*shape)
    np.testing.assert_array_equal(F.pixel_shuffle(F.pixel_unshuffle(x, r), r).numpy(),
                                  x.numpy())


@pytest.mark.parametrize('shape,g', [((2, 6, 3), 2), ((1, 6, 2, 2), 3), ((2, 4, 1, 2, 3), 4)])
def test_channel_shuffle(shape, g):
    _check(lambda x: F.channel_shuffle(x, g), lambda x: TF.channel_shuffle(x, g), shape)
    _check(nn.ChannelShuffle(g), torch.nn.ChannelShuffle(g), shape)


def test_shuffle_errors_and_reprs():
    for fn, tfn, args in [(F.pixel_shuffle, TF.pixel_shuffle, ((1, 5, 2, 2), 2)),
                          (F.pixel_shuffle, TF.pixel_shuffle, ((4, 4), 2)),
                          (F.pixel_unshuffle, TF.pixel_unshuffle, ((1, 1, 3, 4), 2)),
                          (F.pixel_unshuffle, TF.pixel_unshuffle, ((1, 1, 4, 3), 2)),
                          (F.channel_shuffle, TF.channel_shuffle, ((1, 5, 2), 2)),
                          (F.channel_shuffle, TF.channel_shuffle, ((1, 4), 2))]:
        shape, r = args
        with pytest.raises(RuntimeError):
            tfn(torch.zeros(shape), r)
        with pytest.raises(RuntimeError):
            fn(tape.zeros(shape), r)
    assert repr(nn.PixelShuffle(3)) == repr(torch.nn.PixelShuffle(3))
    assert repr(nn.PixelUnshuffle(3)) == repr(torch.nn.PixelUnshuffle(3))
    assert repr(nn.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3))
    _gradcheck(lambda x: F.pixel_shuffle(x, 2), (1, 4, 2, 1))


# -- unfold / fold ----------------------------------------------------------------------
FOLD = [
    ((2, 3, 5, 4), dict(kernel_size=2)),
    ((1, 2, 6, 7), dict(kernel_size=(3, 2), stride=(2, 1))),
    ((1, 2, 6, 7), dict(kernel_size=3, padding=1, stride=2)),
    ((1, 1, 7, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2))),
    ((2, 5, 4), dict(kernel_size=2, stride=1)),
]


@pytest.mark.parametrize('shape,kw', FOLD)
def test_unfold_fold_match_torch(shape, kw):
    _check(lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw), shape)
    _check(nn.Unfold(**kw), torch.nn.Unfold(**kw), shape)
    cols = TF.unfold(torch.zeros(shape), **kw)
    size = shape[-2:]
    _check(lambda x: F.fold(x, size, **kw), lambda x: TF.fold(x, size, **kw), tuple(cols.shape))
    _check(nn.Fold(size, **kw), torch.nn.Fold(size, **kw), tuple(cols.shape))


def test_unfold_fold_gradcheck_and_errors():
    _gradcheck(lambda x: F.unfold(x, 2, padding=1, stride=2), (1, 2, 3, 3))
    _gradcheck(lambda x: F.fold(x, (3, 3), 2, dilation=1), (1, 4, 4))
    with pytest.raises(IndexError):
        TF.unfold(torch.zeros(2, 2), 2)
    with pytest.raises(IndexError):
        F.unfold(tape.zeros(2, 2), 2)
    for bad in [lambda m: m.unfold(m.zeros(1, 1, 1, 2, 2), 2),
                lambda m: m.unfold(m.zeros(1, 1, 2, 2), 3),
                lambda m: m.fold(m.zeros(1, 5, 4), (3, 3), 2),
                lambda m: m.fold(m.zeros(1, 4, 5), (3, 3), 2),
                lambda m: m.unfold(m.zeros(1, 1, 4, 4), 2, stride=0)]:
        with pytest.raises(RuntimeError):
            bad(type('M', (), dict(unfold=staticmethod(TF.unfold), fold=staticmethod(TF.fold),
                                   zeros=staticmethod(torch.zeros))))
        with pytest.raises(RuntimeError):
            bad(type('M', (), dict(unfold=staticmethod(F.unfold), fold=staticmethod(F.fold),
                                   zeros=staticmethod(tape.zeros))))
    assert repr(nn.Fold((4, 5), 2, padding=1)) == repr(torch.nn.Fold((4, 5), 2, padding=1))
    assert repr(nn.Unfold((2, 3), stride=2)) == repr(torch.nn.Unfold((2, 3), stride=2))


# -- adaptive max pooling ---------------------------------------------------------------
AMP = [((2, 3, 7), 3, 1), ((2, 3, 7), 7, 1), ((3, 8), 5, 1), ((1, 2, 5, 7), (3, 4), 2),
       ((1, 2, 5, 7), (None, 2), 2), ((2, 6, 5), 4, 2), ((1, 2, 4, 5, 3), (2, 3, 2), 3),
       ((1, 2, 3, 3, 3), 1, 3)]


@pytest.mark.parametrize('shape,size,n', AMP)
def test_adaptive_max_pool(shape, size, n):
    fn = getattr(F, f'adaptive_max_pool{n}d')
    tfn = getattr(TF, f'adaptive_max_pool{n}d')
    _check(lambda x: fn(x, size), lambda x: tfn(x, size), shape)
    x, xt = _pair(shape, 3)
    y, i = fn(x, size, return_indices=True)
    yt, it = tfn(xt, size, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), it.numpy())
    y2, i2 = getattr(F, f'adaptive_max_pool{n}d_with_indices')(x, size)
    np.testing.assert_array_equal(i2.numpy(), it.numpy())
    m, mt = getattr(nn, f'AdaptiveMaxPool{n}d')(size, True), \
        getattr(torch.nn, f'AdaptiveMaxPool{n}d')(size, True)
    assert repr(m) == repr(mt)
    np.testing.assert_array_equal(m(x)[1].numpy(), mt(xt)[1].numpy())


def test_adaptive_max_pool_ties_nan_gradcheck_errors():
    a = np.array([[[[1., 1., 0.], [1., np.nan, 2.], [np.nan, 0., 2.]]]], np.float32)
    y, i = F.adaptive_max_pool2d(tape.tensor(a), 2, return_indices=True)
    yt, it = TF.adaptive_max_pool2d(torch.tensor(a), 2, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), it.numpy())
    a = np.zeros((1, 1, 4, 4), np.float32)
    np.testing.assert_array_equal(F.adaptive_max_pool2d(tape.tensor(a), 3, True)[1].numpy(),
                                  TF.adaptive_max_pool2d(torch.tensor(a), 3, True)[1].numpy())
    _gradcheck(lambda x: F.adaptive_max_pool2d(x, (2, 3)), (1, 2, 3, 4))
    with pytest.raises(RuntimeError):
        F.adaptive_max_pool2d(tape.zeros(2, 2), 1)
    with pytest.raises(RuntimeError):
        TF.adaptive_max_pool2d(torch.zeros(2, 2), 1)
    with pytest.raises(RuntimeError):
        F.adaptive_max_pool1d(tape.zeros(1, 2, 3, 4), 1)
    with pytest.raises(RuntimeError):
        TF.adaptive_max_pool1d(torch.zeros(1, 2, 3, 4), 1)


def test_max_pool_with_indices_names():
    for n, shape in [(1, (1, 2, 9)), (2, (1, 2, 5, 6)), (3, (1, 1, 4, 4, 5))]:
        a = np.random.default_rng(n).standard_normal(shape).astype(np.float32)
        y, i = getattr(F, f'max_pool{n}d_with_indices')(tape.tensor(a), 2)
        yt, it = getattr(TF, f'max_pool{n}d_with_indices')(torch.tensor(a), 2)
        np.testing.assert_array_equal(i.numpy(), it.numpy())
        np.testing.assert_allclose(y.numpy(), yt.numpy())


# -- max unpooling ----------------------------------------------------------------------
@pytest.mark.parametrize('n,shape,k,s,p,osz', [
    (1, (2, 3, 8), 2, None, 0, None), (1, (1, 2, 9), 3, 2, 1, None),
    (2, (1, 2, 6, 4), 2, None, 0, None), (2, (1, 2, 6, 5), 2, None, 0, (6, 5)),
    (2, (1, 2, 6, 5), 2, None, 0, (1, 2, 7, 5)),
    (2, (2, 5, 5), 3, 2, 1, None), (3, (1, 1, 4, 4, 6), 2, None, 0, None)])
def test_max_unpool(n, shape, k, s, p, osz):
    pool = getattr(F, f'max_pool{n}d')
    tpool = getattr(TF, f'max_pool{n}d')
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    _, idx = pool(tape.tensor(a), k, s, p, return_indices=True)
    _, tidx = tpool(torch.tensor(a), k, s, p, return_indices=True)
    fn = getattr(F, f'max_unpool{n}d')
    tfn = getattr(TF, f'max_unpool{n}d')
    _check(lambda x: fn(x, idx, k, s, p, osz), lambda x: tfn(x, tidx, k, s, p, osz),
           tuple(idx.shape))
    m = getattr(nn, f'MaxUnpool{n}d')(k, s, p)
    mt = getattr(torch.nn, f'MaxUnpool{n}d')(k, s, p)
    assert repr(m) == repr(mt)
    _check(lambda x: m(x, idx, osz), lambda x: mt(x, tidx, osz), tuple(idx.shape))


def test_max_unpool_gradcheck_and_errors():
    _, idx = F.max_pool2d(tape.randn(1, 1, 4, 4), 2, return_indices=True)
    _gradcheck(lambda x: F.max_unpool2d(x, idx, 2), (1, 1, 2, 2))
    with pytest.raises(ValueError):
        F.max_unpool2d(tape.zeros(1, 1, 2, 2), idx, 2, output_size=(9, 9))
    with pytest.raises(ValueError):
        TF.max_unpool2d(torch.zeros(1, 1, 2, 2), torch.tensor(idx.numpy()), 2,
                        output_size=(9, 9))
    bad = tape.tensor(np.full((1, 1, 2, 2), 99, np.int64))
    with pytest.raises(RuntimeError):
        F.max_unpool2d(tape.zeros(1, 1, 2, 2), bad, 2)
    with pytest.raises(RuntimeError):
        TF.max_unpool2d(torch.zeros(1, 1, 2, 2), torch.tensor(bad.numpy()), 2)


# -- lp pooling -----------------------------------------------------------------------------
@pytest.mark.parametrize('n,shape,p,k,s,ceil', [
    (1, (2, 3, 8), 2, 2, None, False), (1, (1, 2, 9), 3, 3, 2, True),
    (2, (1, 2, 6, 5), 2, 2, None, False), (2, (1, 2, 6, 5), 1.5, (3, 2), (2, 1), True),
    (2, (1, 2, 6, 5), float('inf'), 2, None, False), (3, (1, 1, 4, 4, 6), 2, 2, None, False)])
def test_lp_pool(n, shape, p, k, s, ceil):
    fn, tfn = getattr(F, f'lp_pool{n}d'), getattr(TF, f'lp_pool{n}d')
    _check(lambda x: fn(x, p, k, s, ceil), lambda x: tfn(x, p, k, s, ceil), shape,
           lo=0.1, hi=1.0, atol=1e-4)
    m, mt = getattr(nn, f'LPPool{n}d')(p, k, s, ceil), getattr(torch.nn, f'LPPool{n}d')(p, k, s,
                                                                                      ceil)
    assert repr(m) == repr(mt)
    _check(m, mt, shape, lo=0.1, hi=1.0, atol=1e-4)


def test_lp_pool_gradcheck():
    x = tape.tensor(np.random.default_rng(0).uniform(0.5, 1.5, (1, 1, 4, 4)),
                    requires_grad=True)
    assert tape.autograd.gradcheck(lambda x: F.lp_pool2d(x, 2, 2), (x,))
    assert tape.autograd.gradgradcheck(lambda x: F.lp_pool2d(x, 2, 2), (x,))


# -- local response norm --------------------------------------------------------------------
@pytest.mark.parametrize('shape,size', [((2, 5, 4), 3), ((1, 6, 3, 4), 2), ((1, 4, 2, 3, 2), 5),
                                        ((2, 3, 7), 1)])
def test_local_response_norm(shape, size):
    _check(lambda x: F.local_response_norm(x, size, 0.1, 0.7, 2.0),
           lambda x: TF.local_response_norm(x, size, 0.1, 0.7, 2.0), shape)
    m, mt = nn.LocalResponseNorm(size), torch.nn.LocalResponseNorm(size)
    assert repr(m) == repr(mt)
    _check(m, mt, shape)


def test_local_response_norm_gradcheck_errors():
    _gradcheck(lambda x: F.local_response_norm(x, 3, 0.5), (1, 4, 3))
    with pytest.raises(ValueError):
        F.local_response_norm(tape.zeros(2, 3), 2)
    with pytest.raises(ValueError):
        TF.local_response_norm(torch.zeros(2, 3), 2)


# -- embedding_bag ---------------------------------------------------------------------
EB = [
    (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4]), {}),
    (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4, 4, 7]), {}),          # an empty bag
    (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 3, 8]), dict(include_last_offset=True)),
    (np.array([[1, 2, 3], [4, 4, 0]]), None, {}),
    (np.array([1, 2, 0, 5, 0, 3]), np.array([0, 2, 4]), dict(padding_idx=0)),
    (np.array([0, 0, 0, 5]), np.array([0, 3]), dict(padding_idx=0)),            # all padding
]


@pytest.mark.parametrize('mode', ['sum', 'mean', 'max'])
@pytest.mark.parametrize('idx,offs,kw', EB)
def test_embedding_bag(idx, offs, kw, mode):
    def run(fn, lib):
        o = None if offs is None else lib.tensor(offs)
        return lambda w: fn(lib.tensor(idx), w, o, mode=mode, **kw)
    _check(run(F.embedding_bag, tape), run(TF.embedding_bag, torch), (10, 3))


def test_embedding_bag_per_sample_weights_and_module():
    idx, offs = np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2])
    psw = np.random.default_rng(0).standard_normal(6).astype(np.float32)
    w, wt = _pair((10, 3))
    p, pt = tape.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    y = F.embedding_bag(tape.tensor(idx), w, tape.tensor(offs), mode='sum',
                        per_sample_weights=p)
    yt = TF.embedding_bag(torch.tensor(idx), wt, torch.tensor(offs), mode='sum',
                          per_sample_weights=pt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), atol=1e-6)
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), atol=1e-5)
    with pytest.raises(NotImplementedError):
        F.embedding_bag(tape.tensor(idx), w, tape.tensor(offs), mode='mean',
                        per_sample_weights=p)
    with pytest.raises(NotImplementedError):
        TF.embedding_bag(torch.tensor(idx), wt, torch.tensor(offs), mode='mean',
                         per_sample_weights=pt)
    with pytest.raises(ValueError):
        F.embedding_bag(tape.tensor(idx), w)
    with pytest.raises(ValueError):
        TF.embedding_bag(torch.tensor(idx), wt)
    for mode in ('sum', 'max'):
        m = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2)
        mt = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2)
        assert repr(m) == repr(mt)
        assert [n for n, _ in m.named_parameters()] == ['weight']
        assert tuple(m.weight.shape) == (10, 3)
        np.testing.assert_array_equal(m.weight.detach().numpy()[2], 0)
        mt.weight.data = torch.tensor(m.weight.detach().numpy())
        np.testing.assert_allclose(m(tape.tensor(idx), tape.tensor(offs)).detach().numpy(),
                                   mt(torch.tensor(idx), torch.tensor(offs)).detach().numpy(),
                                   atol=1e-6)
    assert repr(nn.EmbeddingBag(4, 2)) == repr(torch.nn.EmbeddingBag(4, 2))
    wd = tape.tensor(np.random.default_rng(1).standard_normal((5, 2)))
    b = nn.EmbeddingBag.from_pretrained(wd, mode='sum')
    assert not b.weight.requires_grad
    x = tape.tensor(np.random.default_rng(0).standard_normal((6, 2)), requires_grad=True)
    for mode in ('sum', 'mean', 'max'):
        assert tape.autograd.gradgradcheck(
            lambda w: F.embedding_bag(tape.tensor([0, 1, 1, 5, 3]), w, tape.tensor([0, 2]),
                                      mode=mode) ** 2, (x,))


@pytest.mark.parametrize('idx,offs', [([1, 2, 1, 1, 3, 2], [0, 3]), ([4, 4, 1, 2, 3, 3, 3], [0, 2]),
                                      ([0, 0, 0, 0, 1, 2], [0, 2]), ([5, 1, 1], [0])])
@pytest.mark.parametrize('mode', ['sum', 'mean'])
def test_embedding_bag_scale_grad_by_freq(idx, offs, mode):
    def run(fn, lib):
        return lambda w: fn(lib.tensor(idx), w, lib.tensor(offs), mode=mode,
                            scale_grad_by_freq=True)
    _check(run(F.embedding_bag, tape), run(TF.embedding_bag, torch), (6, 2))
    with pytest.raises(ValueError):
        F.embedding_bag(tape.tensor(idx), tape.ones(6, 2), tape.tensor(offs), mode='max',
                        scale_grad_by_freq=True)


# -- rrelu -------------------------------------------------------------------------------------
def test_rrelu():
    x, xt = _pair((3, 4, 5))
    _check(lambda x: F.rrelu(x), lambda x: TF.rrelu(x), (3, 4, 5))
    _check(lambda x: F.rrelu(x, 0.1, 0.5), lambda x: TF.rrelu(x, 0.1, 0.5), (7,))
    tape.manual_seed(0)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    yd, xd = y.detach().numpy(), x.detach().numpy()
    neg = xd < 0
    np.testing.assert_array_equal(yd[~neg], xd[~neg])
    ratio = yd[neg] / xd[neg]
    assert ratio.min() >= 0.1 - 1e-6 and ratio.max() <= 0.3 + 1e-6 and ratio.std() > 0
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[neg], ratio, rtol=1e-5)
    m, mt = nn.RReLU(0.1, 0.3), torch.nn.RReLU(0.1, 0.3)
    assert repr(m) == repr(mt)
    assert repr(nn.RReLU()) == repr(torch.nn.RReLU())
    m.eval()
    mt.eval()
    _check(m, mt, (4, 4))
    z = tape.tensor([-1.0, 2.0])
    F.rrelu(z, inplace=True)
    np.testing.assert_allclose(z.numpy(), [-(1 / 8 + 1 / 3) / 2, 2.0], rtol=1e-6)
    with pytest.raises(NotImplementedError):
        F.rrelu(tape.tensor([1, 2]))
