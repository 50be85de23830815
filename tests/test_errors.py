"""Bad input gets PyTorch's exception type, a message naming the op and the
shapes, and leaves the library's state intact (the graph built so far still
gives the right gradient, no half-made records, grad mode unchanged)."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape._tape import resolve


def _graph():
    x = tape.tensor([[0.1, -0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [0.9, 1.0, -1.1, 1.2]],
                    requires_grad=True)
    h = x.tanh() * 2
    return x, h


def _raises(exc, match, fn, records=True):
    """``fn(h)`` raises ``exc`` matching ``match``; then h's graph is intact."""
    x, h = _graph()
    x0 = x._data.copy()
    n0 = resolve(h).n
    mode = tape.is_grad_enabled()
    with pytest.raises(exc, match=match):
        fn(h)
    if records:
        assert resolve(h).n == n0, 'the failed op left records on the tape'
    assert tape.is_grad_enabled() == mode
    np.testing.assert_array_equal(x._data, x0)
    h.sum().backward()
    np.testing.assert_allclose(x.grad._data, 2 * (1 - np.tanh(x0) ** 2), rtol=1e-6)


def A(*shape):
    return tape.ones(*shape, requires_grad=True)


# ---------------------------------------------------------------- broadcasting
@pytest.mark.parametrize('fn, name', [
    (lambda h: h + A(5), 'add'),
    (lambda h: h.mul(A(5)), 'mul'),
    (lambda h: tape.hypot(h, A(5)), 'hypot'),
    (lambda h: tape.lerp(h, A(4), A(5)), 'lerp'),
    (lambda h: tape.addcmul(h, A(5), A(4)), 'addcmul'),
    (lambda h: tape.addcdiv(h, A(4), A(5)), 'addcdiv'),
    (lambda h: tape.isclose(h, A(5)), 'isclose'),
    (lambda h: tape.allclose(h, A(5)), 'allclose'),
    (lambda h: tape.clamp(h, A(5), A(4)), 'clamp'),
    (lambda h: tape.clamp(h, min=A(5)), 'clamp'),
    (lambda h: F.kl_div(h, A(5), reduction='sum'), 'kl_div'),
    (lambda h: F.poisson_nll_loss(h, A(5)), 'poisson_nll_loss'),
    (lambda h: F.multilabel_soft_margin_loss(h, A(5)), 'multilabel_soft_margin_loss'),
    (lambda h: F.hinge_embedding_loss(h, A(5)), 'hinge_embedding_loss'),
    (lambda h: F.cosine_embedding_loss(h, A(3, 4), A(5)), 'cosine_embedding_loss'),
    (lambda h: F.binary_cross_entropy_with_logits(h, A(3, 4), pos_weight=A(5)),
     'binary_cross_entropy_with_logits'),
])
def test_broadcast_mismatch(fn, name):
    _raises(RuntimeError, f'{name}: The size of tensor a .* must match the size of tensor b '
            r'.* at non-singleton dimension \d', fn)


def test_broadcast_message_names_dim_and_shapes():
    with pytest.raises(RuntimeError, match=r'add: The size of tensor a \(4\) must match the '
                       r'size of tensor b \(5\) at non-singleton dimension 1 \(shapes '
                       r'\[3, 4\] and \[5\]\)'):
        tape.ones(3, 4) + tape.ones(5)


@pytest.mark.parametrize('fn, name', [
    (lambda h: tape.addmm(A(5), h, A(4, 2)), 'addmm'),
    (lambda h: tape.addr(A(3, 4), A(3), A(5)), 'addr'),
    (lambda h: tape.addmv(A(4), h, A(4)), 'addmv'),
    (lambda h: tape.baddbmm(A(2, 3, 3), h.unsqueeze(0).expand(2, 3, 4), A(2, 4, 2)), 'baddbmm'),
])
def test_add_product_input_must_expand(fn, name):
    _raises(RuntimeError, f'{name}: The expanded size of the tensor', fn, records=False)


def test_linear_bias_shape():
    _raises(RuntimeError, r'linear: The size of tensor a \(2\) must match the size of tensor '
            r'b \(3\)', lambda h: F.linear(h, A(2, 4), A(3)))


def test_copy_shape_mismatch():
    _raises(RuntimeError, 'copy_: The size of tensor a',
            lambda h: tape.zeros(3, 4).copy_(tape.ones(5)))


# ------------------------------------------------------------ argument types
@pytest.mark.parametrize('fn, match', [
    (lambda h: h.add('a'), r"add\(\): argument 'other' \(position 1\) must be Tensor, not str"),
    (lambda h: tape.mul(h, None), r"mul\(\): argument 'other' .* not NoneType"),
    (lambda h: h.pow(object()), r"pow\(\): argument 'other'"),
    (lambda h: h @ 2, r'matmul\(\): argument must be Tensor, not int'),
    (lambda h: tape.mm(h, 2), r"mm\(\): argument 'mat2' \(position 2\) must be Tensor"),
    (lambda h: h.sum(dim=1.5), r"sum\(\): argument 'dim' must be int or tuple of ints, not "
     'float'),
    (lambda h: h.sum(dim='a'), r"sum\(\): argument 'dim'"),
    (lambda h: h.view(2.0, 6), r"view\(\): argument 'size' must be tuple of ints, but found "
     'element of type float at pos 0'),
    (lambda h: h.reshape('a'), r"reshape\(\): argument 'shape'"),
    (lambda h: h.permute(0, 1.0), r"permute\(\): argument 'dims'"),
    (lambda h: tape.tile(h, (2.5,)), r"tile\(\): argument 'dims'"),
    (lambda h: tape.cat(h, 0), r"cat\(\): argument 'tensors' \(position 1\) must be tuple of "
     'Tensors, not Tensor'),
    (lambda h: tape.triu(h, 1.5), r"triu\(\): argument 'diagonal' must be int, not float"),
    (lambda h: tape.diagflat(h, 'a'), r"diagflat\(\): argument 'offset' must be int"),
    (lambda h: tape.cumsum(h, dim=None), r"cumsum\(\): argument 'dim' must be int, not "
     'NoneType'),
    (lambda h: tape.softmax(h, 0.5), r"softmax\(\): argument 'dim' must be int"),
    (lambda h: h.transpose(0, 'a'), r"transpose\(\): argument 'dim'"),
    (lambda h: h.softmax(), 'dim'),
    (lambda h: h['a'], r"index: invalid index type 'str' \(tensor of shape \(3, 4\)\)"),
    (lambda h: tape.zeros(2.5), r"zeros\(\): argument 'size' must be tuple of ints"),
    (lambda h: tape.full((2,), 'a'), r"full\(\): argument 'fill_value' \(position 2\) must be "
     'Number, not str'),
    (lambda h: tape.tensor('abc'), "invalid data type 'str'"),
])
def test_type_errors(fn, match):
    _raises(TypeError, match, fn)


# ----------------------------------------------------------- values and ranges
@pytest.mark.parametrize('fn, exc, match', [
    (lambda h: tape.zeros(-1), RuntimeError, r'zeros: Trying to create tensor with negative '
     r'dimension -1: \[-1\]'),
    (lambda h: tape.ones(2, -3), RuntimeError, r'ones: .*negative dimension -3: \[2, -3\]'),
    (lambda h: tape.empty(-1), RuntimeError, 'negative dimension'),
    (lambda h: tape.full((2, -1), 1.0), RuntimeError, 'full: .*negative dimension'),
    (lambda h: tape.rand(-2), RuntimeError, 'negative dimension'),
    (lambda h: tape.randn(3, -2), RuntimeError, 'negative dimension'),
    (lambda h: tape.randint(0, 5, (-3,)), RuntimeError, 'randint: .*negative dimension'),
    (lambda h: tape.randint(5, 2, (3,)), RuntimeError, "random_ expects 'from' to be less "
     "than 'to'"),
    (lambda h: tape.randperm(-1), RuntimeError, 'randperm: .*negative dimension'),
    (lambda h: tape.arange(0, 5, 0), RuntimeError, 'arange: step must be nonzero'),
    (lambda h: tape.arange(5, 0, 1), RuntimeError, 'arange: upper bound and lower bound '
     'inconsistent with step sign'),
    (lambda h: tape.linspace(0, 1, -1), RuntimeError, 'linspace: number of steps must be '
     'non-negative'),
    (lambda h: tape.eye(-1), RuntimeError, 'eye: n must be greater or equal to 0'),
    (lambda h: tape.div(h, h, rounding_mode='xx'), RuntimeError, 'div expected rounding_mode'),
    (lambda h: tape.std(tape.tensor([1, 2])), RuntimeError, 'std and var only support '
     'floating point'),
    (lambda h: tape.tensor([1, 2]).var(), RuntimeError, 'std and var only support'),
    (lambda h: h.flip(0, 0), RuntimeError, 'dim 0 appears multiple times in the list of dims'),
    (lambda h: h.sum((1, -1)), RuntimeError, 'dim 1 appears multiple times'),
    (lambda h: tape.repeat_interleave(h, 2, dim=3), IndexError, 'repeat_interleave: Dimension '
     'out of range'),
    (lambda h: tape.repeat_interleave(h, -1), RuntimeError, 'Repeats must be non-negative'),
    (lambda h: F.hardtanh(h, 1.0, -1.0), ValueError, 'min_val cannot be greater than max_val'),
    (lambda h: F.cross_entropy(h, tape.tensor([0, 1, 2]), label_smoothing=2.0), RuntimeError,
     'label_smoothing must be between 0.0 and 1.0'),
    (lambda h: F.softmin(h, 3), IndexError, r'softmin: Dimension out of range'),
])
def test_value_errors(fn, exc, match):
    _raises(exc, match, fn)


# --------------------------------------------------------------------- indices
@pytest.mark.parametrize('fn, exc, match', [
    (lambda h: h[5], IndexError, r'index: index 5 is out of bounds for dimension 0 with size 3 '
     r'\(tensor of shape \(3, 4\)\)'),
    (lambda h: h[:, -5], IndexError, 'index -5 is out of bounds for dimension 1 with size 4'),
    (lambda h: h[tape.tensor([0, 1]), tape.tensor([0, 1, 2])], IndexError,
     'indexing tensors could not be broadcast together'),
    (lambda h: tape.gather(h, 1, tape.tensor([[0, -1]])), RuntimeError,
     r'gather\(\): index -1 is out of bounds for dimension 1 with size 4'),
    (lambda h: tape.gather(h, 1, tape.tensor([[0, 4]])), RuntimeError,
     r'gather\(\): index 4 is out of bounds'),
    (lambda h: tape.index_select(h, 0, tape.tensor([-1])), IndexError,
     r'index_select\(\): index -1 is out of bounds for dimension 0 with size 3'),
    (lambda h: tape.scatter(h, 1, tape.tensor([[-1]]), 1.0), RuntimeError,
     r'scatter\(\): index -1 is out of bounds'),
    (lambda h: tape.scatter_add(h, 1, tape.tensor([[-2]]), A(1, 1)), RuntimeError,
     r'scatter_add\(\): index -2 is out of bounds'),
])
def test_index_errors(fn, exc, match):
    _raises(exc, match, fn)


def test_take_keeps_negative_indices():
    x = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert tape.take(x, tape.tensor([-1]))._data.tolist() == [4.0]


# -------------------------------------------------------------------- autograd
def test_grad_unused_input_leaves_graph_usable():
    x, h = _graph()
    y = h.sum()
    with pytest.raises(RuntimeError, match='The differentiated Tensor at index 1 appears to '
                       r'not have been used in the graph.*\(input 1, shape \(3,\)\)'):
        tape.autograd.grad(y, [x, A(3)])
    y.backward()                       # the failed grad freed nothing
    np.testing.assert_allclose(x.grad._data, 2 * (1 - np.tanh(x._data) ** 2), rtol=1e-6)


def test_grad_unused_input_allowed():
    x, h = _graph()
    gx, gz = tape.autograd.grad(h.sum(), [x, A(3)], allow_unused=True)
    assert gz is None and gx.shape == (3, 4)


def test_grad_unused_nonleaf_on_another_tape():
    x, h = _graph()
    other = A(2) * 3
    with pytest.raises(RuntimeError, match='appears to not have been used in the graph'):
        tape.autograd.grad(h.sum(), other)
    h.sum().backward()


def test_grad_and_backward_empty_inputs():
    _raises(RuntimeError, r'`inputs` argument to `grad\(\)` cannot be empty',
            lambda h: tape.autograd.grad(h.sum(), []), records=False)
    _raises(RuntimeError, r'`inputs` argument to `backward\(\)` cannot be empty',
            lambda h: h.sum().backward(inputs=[]), records=False)


def test_valid_input_unchanged():
    """The new checks pass valid input through as before."""
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    assert x.add(1)._data.tolist() == [2.0, 3.0]
    assert tape.add(x, x)._data.tolist() == [2.0, 4.0]
    assert (x + [1.0, 1.0])._data.tolist() == [2.0, 3.0]
    assert tape.zeros(np.int64(2), 3).shape == (2, 3)
    assert tape.zeros((0, 3)).shape == (0, 3)
    assert tape.arange(5, 0, -1)._data.tolist() == [5, 4, 3, 2, 1]
    assert tape.arange(0, 0, 1).shape == (0,)
    assert x.view(np.int64(2)).shape == (2,)
    assert x.sum(np.int64(0)).shape == ()
    assert tape.softmax(x, 0).shape == (2,)
    assert tape.repeat_interleave(x, 2, dim=-1).shape == (4,)
    assert tape.addmm(tape.ones(1), tape.ones(2, 3), tape.ones(3, 2)).shape == (2, 2)
    assert F.linear(tape.ones(2, 3), tape.ones(4, 3), tape.ones(4)).shape == (2, 4)
