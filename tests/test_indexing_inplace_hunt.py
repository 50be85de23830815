"""Indexing, in-place ops and out= as a differential hunt against PyTorch 2.13
found them differing: 0-d tensor keys (a zero gradient on large tensors, a copy
where PyTorch gives a view), index_put with bool masks, in-place ops after
clamp, silu(inplace=True), fill_ with a tensor that requires grad,
scatter_reduce('prod') differentiated twice, out= ignored, setitem values with
leading size-1 dims."""
import numpy as np
import pytest

import tape

F64 = tape.float64


@pytest.mark.parametrize('rows', [3, 820])          # 820 x 20: a large record
def test_zero_dim_tensor_key_is_an_int(rows):
    x = tape.zeros(rows, 20, dtype=F64, requires_grad=True)
    for key, want in (((tape.tensor(1),), 20.0), ((tape.tensor(1), tape.tensor(2)), 1.0),
                      ((slice(None), tape.tensor(2)), float(rows)),
                      ((Ellipsis, tape.tensor(3, dtype=tape.int32)), float(rows))):
        x.grad = None
        x[key].sum().backward()
        assert x.grad.sum().item() == want
    assert type(x[tape.tensor(1)].grad_fn).__name__ == 'SelectBackward0'


def test_zero_dim_tensor_key_gives_a_view():
    x = tape.zeros(3, 4)
    x[tape.tensor(1)].add_(1)
    x[:, tape.tensor(2)].fill_(5)
    assert x.sum(1).tolist() == [5., 8., 5.]
    w = tape.ones(3, 4, dtype=F64, requires_grad=True)
    y = w * 1
    y[tape.tensor(1)].mul_(3)
    y.sum().backward()
    assert w.grad.sum(1).tolist() == [4., 12., 4.]


def test_index_put_with_bool_masks():
    x = tape.zeros(3, 4, dtype=F64)
    x.index_put_((tape.tensor([True, False, True]),), tape.tensor(1., dtype=F64))
    assert x.sum(1).tolist() == [4., 0., 4.]
    x.index_put_((tape.tensor([True, False, True]),), tape.tensor(1., dtype=F64),
                 accumulate=True)
    assert x.sum(1).tolist() == [8., 0., 8.]
    y = tape.zeros(2, 2, dtype=F64)
    y.index_put_((tape.tensor([[True, False], [False, True]]),), tape.tensor([5., 6.], dtype=F64))
    assert y.tolist() == [[5., 0.], [0., 6.]]


@pytest.mark.parametrize('make', [lambda x: x.clamp(min=0.), lambda x: x.clamp(-0.5, 0.5),
                                  lambda x: x.clip(0., 1.), lambda x: x.clamp_max(1.),
                                  lambda x: tape.nn.functional.hardtanh(x),
                                  lambda x: tape.nn.functional.relu6(x)])
def test_in_place_after_clamp_like_ops(make):
    x = tape.tensor([1., 2., -3., 0.25], dtype=F64, requires_grad=True)
    y = make(x)
    y.mul_(2)              # PyTorch saves the input only: no error at backward
    y.sum().backward()
    r = tape.tensor([1., 2., -3., 0.25], dtype=F64, requires_grad=True)
    (make(r) * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), r.grad.numpy())


def test_clamp_gradient_edges():
    x = tape.tensor([-1., 0., 1., 2., float('nan')], dtype=F64, requires_grad=True)
    x.clamp(0., 1.).sum().backward()
    assert x.grad.tolist() == [0., 1., 1., 0., 0.]
    x.grad = None
    x.clamp(1., 0.).sum().backward()                 # lo > hi: no gradient anywhere
    assert not x.grad.numpy().any()
    x.grad = None
    tape.nn.functional.hardtanh(x, 0., 1.).sum().backward()     # strictly inside only
    assert x.grad.tolist() == [0., 0., 0., 0., 0.]


def test_silu_in_place():
    y = tape.tensor([-1., .5, 2.], dtype=F64)
    r = tape.nn.functional.silu(y, inplace=True)
    assert r is y
    np.testing.assert_allclose(y.numpy(), np.array([-1., .5, 2.]) / (1 + np.exp(-np.array(
        [-1., .5, 2.]))), rtol=1e-15)
    x = tape.tensor([-1., .5, 2.], dtype=F64, requires_grad=True)
    z = x * 1
    tape.nn.SiLU(inplace=True)(z)
    z.sum().backward()
    s = 1 / (1 + np.exp(-np.array([-1., .5, 2.])))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 + np.array([-1., .5, 2.]) * (1 - s)),
                               rtol=1e-14)


def test_fill_with_a_tensor_that_requires_grad():
    x = tape.ones(3, 4, dtype=F64, requires_grad=True)
    s = tape.tensor(0.5, dtype=F64, requires_grad=True)
    y = x * 2
    y.fill_(s)
    (y * 3).sum().backward()
    assert s.grad.item() == 36.0 and x.grad.sum().item() == 0.0
    s.grad = None
    y = x * 2
    y[1].fill_(s)
    y.sum().backward()
    assert s.grad.item() == 4.0


def test_scatter_prod_differentiated_twice_raises():
    x = tape.tensor([1., 2., 3.], dtype=F64, requires_grad=True)
    y = (x * x).scatter_reduce(0, tape.tensor([0, 0, 1]), x, 'prod')
    g, = tape.autograd.grad(y.sum(), x, create_graph=True)
    assert g.tolist() == [6., 13., 10.]
    with pytest.raises(RuntimeError, match='once_differentiable'):
        tape.autograd.grad(g.sum(), x)


@pytest.mark.parametrize('name', ['add', 'sub', 'mul', 'div', 'maximum', 'minimum',
                                  'remainder', 'fmod'])
def test_out_is_written(name):
    a = tape.tensor([1., 2., 3.], dtype=F64)
    b = tape.tensor([4., 5., 6.], dtype=F64)
    c = tape.zeros(3, dtype=F64)
    r = getattr(tape, name)(a, b, out=c)
    assert r is c
    np.testing.assert_array_equal(c.numpy(), getattr(tape, name)(a, b).numpy())
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        getattr(tape, name)(a.detach().requires_grad_(), b, out=tape.zeros(3, dtype=F64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(tape, name)(a, b, out=tape.zeros(3, dtype=tape.int64))


def test_setitem_value_with_leading_ones():
    y = tape.zeros(3, 4, dtype=F64)
    y[0] = tape.ones(1, 1, 4, dtype=F64)
    y[...] = tape.full((1, 3, 4), 2., dtype=F64)
    assert y.sum().item() == 24.0
    x = tape.zeros(3, 4, dtype=F64, requires_grad=True)
    v = tape.ones(1, 1, 4, dtype=F64, requires_grad=True)
    z = x * 1
    z[1] = v
    z.sum().backward()
    assert v.grad.shape == (1, 1, 4) and v.grad.sum().item() == 4.0


def test_against_pytorch():
    torch = pytest.importorskip('torch')
    for lib in (tape, torch):
        x = lib.zeros(820, 20, dtype=lib.float64, requires_grad=True)
        (x[lib.tensor(3)] * lib.arange(20, dtype=lib.float64)).sum().backward()
        if lib is tape:
            mine = x.grad.numpy()
    np.testing.assert_array_equal(mine, x.grad.numpy())
    outs = []
    for lib in (tape, torch):
        x = lib.tensor([1., 2., -3., 0.25], dtype=lib.float64, requires_grad=True)
        y = x.clamp(min=0.)
        y.mul_(2)
        y.sum().backward()
        outs.append(x.grad.numpy())
    np.testing.assert_array_equal(*outs)
