"""avg_pool2d (and avg_pool1d) on float32/float64 input: the compiled window
means (compiler/conv_kernels.py ``avg_pool_window``, with padding, ceil_mode's
overhang and any divisor; its 2x2 stride-2 unrolling ``avg_pool_2x2``)
recorded as one AvgPool2DBackward0 on the input as given, whose backward is
``avg_pool_scatter``; the differentiable backward (for create_graph) is the
same pair of kernels.  Values and gradients against central differences and
PyTorch, double backward, NaN."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from compiler import conv_kernels as ck
from conftest import check_grad

# (input shape, kernel_size, stride)
GEOMS = [((2, 3, 8, 8), 2, None), ((2, 3, 9, 11), 3, 2), ((2, 2, 7, 7), (2, 3), (1, 2)),
         ((1, 2, 6, 6), 2, 1), ((3, 2, 5, 4), (5, 4), None)]


def _ref(x, k, s):
    """Window means by NumPy (float64 sums, in window order)."""
    k = (k, k) if isinstance(k, int) else k
    s = k if s is None else ((s, s) if isinstance(s, int) else s)
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, c, oh, ow))
    for p in range(oh):
        for q in range(ow):
            acc = np.zeros((n, c))
            for i in range(k[0]):
                for j in range(k[1]):
                    acc = acc + x[:, :, p * s[0] + i, q * s[1] + j].astype(np.float64)
            out[:, :, p, q] = acc / (k[0] * k[1])
    return out


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('shape,k,s', GEOMS)
def test_values_and_node(shape, k, s, dtype):
    x0 = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    x = tape.tensor(x0, requires_grad=True)
    y = F.avg_pool2d(x, k, s)
    assert y.dtype == x.dtype
    assert type(y.grad_fn).__name__ == 'AvgPool2DBackward0'
    np.testing.assert_array_equal(y.detach().numpy(), _ref(x0, k, s).astype(dtype))


@pytest.mark.parametrize('shape,k,s', GEOMS)
def test_gradcheck(shape, k, s):
    check_grad(lambda t: F.avg_pool2d(t, k, s) ** 2,
               [np.random.default_rng(1).standard_normal(shape)])


def test_double_backward():
    """create_graph through the pooling: the gradient's derivative along u (a
    Hessian-vector product, by a second backward) against central differences."""
    rng = np.random.default_rng(2)
    x0, v, u = (rng.standard_normal((2, 2, 6, 6)) for _ in range(3))

    def g_dot_v(xa):
        t = tape.tensor(xa, requires_grad=True)
        g, = tape.autograd.grad((F.avg_pool2d(t, 2, 1) ** 3).sum(), t, create_graph=True)
        assert g.requires_grad
        return (g * tape.tensor(v)).sum(), t
    s, t = g_dot_v(x0)
    s.backward()
    eps = 1e-6
    fd = (g_dot_v(x0 + eps * u)[0].item() - g_dot_v(x0 - eps * u)[0].item()) / (2 * eps)
    assert np.isclose((t.grad.numpy() * u).sum(), fd, rtol=1e-6, atol=1e-8)


def test_kernels_agree_and_nan():
    """The 2x2 unrolling gives the general kernel's bits; NaN spreads to its window."""
    for dt in (np.float32, np.float64):
        x = (np.random.default_rng(3).random((2, 3, 9, 8)) * 100).astype(dt)
        x[1, 2, 4, 5] = np.nan
        a = np.empty((2, 3, 4, 4), dt)
        b = np.empty_like(a)
        ck.avg_pool_2x2(x, 4, 4, a)
        ck.avg_pool_window(x, 2, 2, 2, 2, 0, 0, np.full((4, 4), 4.0), b)
        np.testing.assert_array_equal(a, b)
        assert np.isnan(a[1, 2, 2, 2]) and np.isnan(a).sum() == 1


def test_scatter_is_the_adjoint():
    """<pool(x), g> == <x, scatter(g)> for overlapping windows and uncovered pixels."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 10, 12))      # row 9 and column 11 in no window
    out = np.empty((2, 3, 4, 5))
    div = rng.random((4, 5)) + 1
    ck.avg_pool_window(x, 3, 3, 2, 2, 0, 0, div, out)
    g = rng.standard_normal(out.shape)
    back = np.empty_like(x)
    ck.avg_pool_scatter(g, 3, 3, 2, 2, 0, 0, div, back)
    assert np.isclose((out * g).sum(), (x * back).sum(), rtol=1e-13)
    assert (back[:, :, 9, :] == 0).all() and (back[:, :, :, 11] == 0).all()
    assert (back[:, :, 8, :] != 0).any()


def test_avg_pool1d_and_unbatched():
    x0 = np.random.default_rng(5).standard_normal((2, 3, 10))
    x = tape.tensor(x0, requires_grad=True)
    y = F.avg_pool1d(x, 2)
    np.testing.assert_allclose(y.detach().numpy(), x0.reshape(2, 3, 5, 2).mean(-1), rtol=1e-15)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(x0.shape, 0.5))
    z = F.avg_pool2d(tape.tensor(x0[0].reshape(3, 2, 5)), (2, 1))
    assert z.shape == (3, 1, 5)


OPTIONS = [dict(padding=1), dict(ceil_mode=True), dict(divisor_override=3),
           dict(padding=1, count_include_pad=False), dict(padding=1, ceil_mode=True),
           dict(padding=1, ceil_mode=True, count_include_pad=False),
           dict(padding=1, divisor_override=5)]


@pytest.mark.parametrize('kwargs', OPTIONS)
@pytest.mark.parametrize('shape', [(2, 2, 7, 7), (2, 2, 8, 6), (3, 8, 9)])
def test_padding_ceil_and_divisors_against_torch(kwargs, shape):
    torch = pytest.importorskip('torch')
    x0 = np.random.default_rng(6).standard_normal(shape)
    x = tape.tensor(x0, requires_grad=True)
    y = F.avg_pool2d(x, 3, 2, **kwargs)
    assert type(y.grad_fn).__name__ == 'AvgPool2DBackward0'
    xt = torch.tensor(x0, requires_grad=True)
    yt = torch.nn.functional.avg_pool2d(xt, 3, 2, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    g0 = np.random.default_rng(7).standard_normal(tuple(yt.shape))
    y.backward(tape.tensor(g0))
    yt.backward(torch.tensor(g0))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize('kwargs', OPTIONS[:5])
def test_padded_gradcheck_and_double_backward(kwargs):
    x0 = np.random.default_rng(8).standard_normal((1, 2, 6, 7))
    check_grad(lambda t: F.avg_pool2d(t, 3, 2, **kwargs) ** 2, [x0])
    assert tape.autograd.gradgradcheck(lambda t: F.avg_pool2d(t, 3, 2, **kwargs) ** 2,
                                       (tape.tensor(x0, requires_grad=True),))


@pytest.mark.parametrize('shape', [(2, 3, 10), (3, 10)])
def test_avg_pool1d_padded_against_torch(shape):
    torch = pytest.importorskip('torch')
    x0 = np.random.default_rng(9).standard_normal(shape)
    for kw in (dict(), dict(padding=1), dict(padding=1, ceil_mode=True, count_include_pad=False)):
        x = tape.tensor(x0, requires_grad=True)
        xt = torch.tensor(x0, requires_grad=True)
        y = F.avg_pool1d(x, 3, 2, **kw)
        yt = torch.nn.functional.avg_pool1d(xt, 3, 2, **kw)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
        y.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_unbatched_is_one_node():
    x = tape.randn(3, 6, 6, requires_grad=True)
    assert type(F.avg_pool2d(x, 2).grad_fn).__name__ == 'AvgPool2DBackward0'
    assert type(F.avg_pool2d(x, 3, 1, 1).grad_fn).__name__ == 'AvgPool2DBackward0'
    assert F.avg_pool2d(x, 2).grad_fn.next_functions[0][0].__class__.__name__ == 'AccumulateGrad'
    with pytest.raises(RuntimeError, match='Expected 3D .unbatched. or 4D'):
        F.avg_pool2d(tape.randn(5, requires_grad=True), 2)


def test_in_place_change_of_the_input_raises():
    """As PyTorch: AvgPool2DBackward0 saves its input."""
    x = tape.randn(1, 1, 4, 4, requires_grad=True)
    h = x * 1.0
    y = F.avg_pool2d(h, 2)
    with tape.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match='modified by an inplace operation'):
        y.sum().backward()


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
@pytest.mark.parametrize('shape,k,s', GEOMS)
def test_against_torch(shape, k, s, dtype):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(shape).astype(dtype)
    x = tape.tensor(x0, requires_grad=True)
    xt = torch.tensor(x0, requires_grad=True)
    y = F.avg_pool2d(x, k, s)
    yt = torch.nn.functional.avg_pool2d(xt, k, s)
    g0 = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    y.backward(tape.tensor(g0))
    yt.backward(torch.tensor(g0))
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == 'float64' else dict(rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), **tol)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), **tol)
    assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__


def test_create_graph_gradient_requires_grad_as_pytorch():
    """A gradient through a pooling (or a convolution with constant weights) does
    not depend on the input, but PyTorch's double-backward node takes it: the
    gradient requires grad, and a penalty on it gives the input a zero gradient
    (none through the convolution)."""
    x = tape.ones(1, 1, 4, 4, dtype=tape.float64, requires_grad=True)
    w = tape.ones(1, 1, 3, 3, dtype=tape.float64)
    cases = [(lambda: F.avg_pool2d(x, 2), 'AvgPool2DBackwardBackward0', True),
             (lambda: F.avg_pool2d(x, 3, 1, 1), 'AvgPool2DBackwardBackward0', True),
             (lambda: F.max_pool2d(x, 2), 'MaxPool2DWithIndicesBackwardBackward0', True),
             (lambda: F.conv2d(x, w, padding=1), 'ConvolutionBackwardBackward0', False)]
    for make, name, zeros in cases:
        x.grad = None
        g, = tape.autograd.grad(make().sum(), x, create_graph=True)
        assert g.requires_grad and type(g.grad_fn).__name__ == name
        (g ** 2).sum().backward()
        if zeros:
            assert x.grad is not None and not x.grad.numpy().any()
        else:
            assert x.grad is None
    g, = tape.autograd.grad(F.avg_pool2d(x, 2).sum(), x)      # no create_graph: a constant
    assert not g.requires_grad
