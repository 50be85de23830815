"""Lazy convolution and normalization modules, ``UninitializedBuffer`` and ``nn.Buffer``.

``nn.LazyConv{1,2,3}d``, ``nn.LazyConvTranspose{1,2,3}d``,
``nn.LazyBatchNorm{1,2,3}d`` and ``nn.LazyInstanceNorm{1,2,3}d`` infer their
input channels from the first call, then become the eager class, as PyTorch's.
``nn.Buffer(t, persistent=...)`` registers a buffer when assigned to a module.
"""
import pickle

import numpy as np
import pytest

import tape
import tape.nn as nn


def _np(t):
    return np.asarray(t.detach().numpy())


_CASES = {
    'conv1d': (lambda n: n.LazyConv1d(4, 3, bias=False), (3, 6)),
    'conv2d': (lambda n: n.LazyConv2d(4, 3, padding=1), (2, 3, 5, 5)),
    'conv3d': (lambda n: n.LazyConv3d(2, 1, groups=2), (1, 4, 2, 2, 2)),
    'convt1d': (lambda n: n.LazyConvTranspose1d(2, 3, stride=2), (2, 3, 4)),
    'convt2d': (lambda n: n.LazyConvTranspose2d(4, 3, stride=2, output_padding=1),
                (2, 3, 5, 5)),
    'convt3d': (lambda n: n.LazyConvTranspose3d(2, 2), (3, 2, 2, 2)),
    'bn1d': (lambda n: n.LazyBatchNorm1d(), (4, 3)),
    'bn2d': (lambda n: n.LazyBatchNorm2d(affine=False), (4, 3, 2, 2)),
    'bn3d': (lambda n: n.LazyBatchNorm3d(track_running_stats=False), (2, 3, 2, 2, 2)),
    'in1d': (lambda n: n.LazyInstanceNorm1d(), (2, 3, 5)),
    'in2d': (lambda n: n.LazyInstanceNorm2d(affine=True, track_running_stats=True),
             (4, 3, 2, 2)),
    'in3d': (lambda n: n.LazyInstanceNorm3d(affine=True), (2, 3, 2, 2, 2)),
}


@pytest.mark.parametrize('case', sorted(_CASES))
def test_lazy_module_matches_torch_after_loading_its_weights(case):
    torch = pytest.importorskip('torch')
    make, shape = _CASES[case]
    ours, theirs = make(nn), make(torch.nn)
    assert type(ours).__name__ == type(theirs).__name__
    assert ours.has_uninitialized_params()
    x = np.random.default_rng(1).standard_normal(shape)
    yt = theirs(torch.tensor(x, dtype=torch.float32))
    yo = ours(tape.tensor(x, dtype=tape.float32))
    # both became the eager class, with the same state names, shapes and dtypes
    assert type(ours).__name__ == type(theirs).__name__
    st, so = theirs.state_dict(), ours.state_dict()
    assert [(k, tuple(v.shape), str(v.dtype).split('.')[-1]) for k, v in st.items()] == \
        [(k, tuple(v.shape), str(v.dtype).split('.')[-1]) for k, v in so.items()]
    assert repr(ours) == repr(theirs)
    assert yo.shape == tuple(yt.shape)
    # with torch's initial values, the same outputs and gradients
    fresh = make(nn)
    fresh(tape.tensor(x, dtype=tape.float32))
    fresh.load_state_dict({k: tape.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    theirs.train()
    xt = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    xo = tape.tensor(x, dtype=tape.float32, requires_grad=True)
    (theirs(xt) ** 2).sum().backward()
    (fresh(xo) ** 2).sum().backward()
    np.testing.assert_allclose(_np(xo.grad), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (n, p), (_, q) in zip(theirs.named_parameters(), fresh.named_parameters()):
        np.testing.assert_allclose(_np(q.grad), p.grad.numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=n)


def test_lazy_conv_infers_channels_and_checks_input():
    m = nn.LazyConv2d(5, 3, groups=1)
    assert isinstance(m.weight, nn.UninitializedParameter)
    assert isinstance(m.weight, nn.Parameter)
    assert m.in_channels == 0
    y = m(tape.randn(2, 7, 6, 6))
    assert type(m) is nn.Conv2d and m.in_channels == 7
    assert tuple(m.weight.shape) == (5, 7, 3, 3) and tuple(y.shape) == (2, 5, 4, 4)
    # PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias
    assert np.abs(_np(m.bias)).max() <= 1 / np.sqrt(7 * 9)
    with pytest.raises(RuntimeError, match='Expected 3D \\(unbatched\\) or 4D'):
        nn.LazyConv2d(4, 3)(tape.randn(3, 3))
    with pytest.raises(ValueError, match='divisible by groups'):
        nn.LazyConv1d(4, 1, groups=2)(tape.randn(1, 3, 4))
    # unbatched input: channels are dim 0
    m1 = nn.LazyConv1d(2, 1)
    m1(tape.randn(3, 4))
    assert m1.in_channels == 3


def test_lazy_batchnorm_buffers_train_and_pickle():
    m = nn.LazyBatchNorm1d(momentum=0.5)
    assert isinstance(m.running_mean, nn.UninitializedBuffer)
    assert not isinstance(m.weight, nn.UninitializedBuffer)
    assert not isinstance(tape.zeros(0), nn.UninitializedBuffer)
    x = tape.tensor([[1., 2.], [3., 6.]])
    m(x)
    assert type(m) is nn.BatchNorm1d and m.num_features == 2
    np.testing.assert_allclose(_np(m.running_mean), [1.0, 2.0])
    assert int(m.num_batches_tracked) == 1
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_allclose(_np(back.running_mean), [1.0, 2.0])
    # a state dict materializes an uninitialized module without a call
    fresh = nn.LazyBatchNorm1d()
    fresh.load_state_dict(m.state_dict())
    np.testing.assert_allclose(_np(fresh.running_var), _np(m.running_var))


def test_buffer_registers_on_assignment_as_torch():
    torch = pytest.importorskip('torch')
    for L in (torch, tape):
        m = L.nn.Module()
        m.steps = L.nn.Buffer(L.zeros(2), persistent=False)
        m.scale = L.nn.Buffer(L.ones(1))
        assert [k for k, _ in m.named_buffers()] == ['steps', 'scale']
        assert list(m.state_dict()) == ['scale']
        assert isinstance(m.scale, L.nn.Buffer) and not isinstance(L.ones(1), L.nn.Buffer)
        assert not m.scale.requires_grad and list(m.parameters()) == []
        m.x = 5
        with pytest.raises(KeyError, match="attribute 'x' already exists"):
            m.x = L.nn.Buffer(L.ones(1))
        m.p = L.nn.Parameter(L.ones(1))
        with pytest.raises(TypeError, match="as parameter 'p'"):
            m.p = L.nn.Buffer(L.ones(1))
    b = nn.Buffer(tape.ones(2, requires_grad=True))
    assert b.requires_grad and b.is_leaf
    with pytest.raises(TypeError):
        nn.Buffer([1.0])
