"""Medium-size ops (10^4-10^5 elements) made fast: the structure that makes each
path fast (not a timing, which is noisy), and values and gradients against
PyTorch at that size, to second order where the op has one."""
import numpy as np
import pytest

import tape
from tape import _composites
from tests.test_perf_paths_hunt import _kinds, _second_order as _against_torch

rng = np.random.default_rng(23)
XN = rng.standard_normal((256, 130))           # 33280 elements: large (tape._big.BIG)


# ------------------------------------------------------------------ flip
@pytest.mark.parametrize('dims', [(1,), (0,), (0, 1), (-1,)])
def test_large_flip_keeps_its_reversing_key(dims):
    x = tape.tensor(XN, requires_grad=True)
    y = x.flip(dims)
    assert _kinds(y) == ['BasicKey']
    _against_torch(lambda lib, a: a.flip(dims) * 2.0, [XN])


def test_flip_of_a_3d_tensor_against_torch():
    a = rng.standard_normal((40, 30, 20))
    _against_torch(lambda lib, x: x.flip((0, 2)), [a])


# ------------------------------------------------------------------ topk
def _stable_topk(x, k, dim, largest):
    key = -x.astype(np.float64) if largest else x
    return np.take(np.argsort(key, axis=dim, kind='stable'), np.arange(k), axis=dim)


@pytest.mark.parametrize('dtype', [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize('largest', [True, False])
@pytest.mark.parametrize('shape,dim,k', [((256, 130), 1, 5), ((256, 130), 0, 1),
                                         ((40, 30, 20), 1, 3), ((8, 4000), -1, 40)])
def test_topk_by_rows_picks_the_stable_sorts_first_k(dtype, largest, shape, dim, k):
    x = (rng.standard_normal(shape) * 3).astype(dtype)     # the ints have many ties
    fast = _composites._topk_index(x, k, dim, largest)
    assert fast is not None
    np.testing.assert_array_equal(fast, _stable_topk(x, k, dim, largest))
    got = tape.topk(tape.tensor(x), k, dim, largest)
    np.testing.assert_array_equal(got.indices.numpy(), _stable_topk(x, k, dim, largest))


def test_topk_with_nan_or_small_input_sorts_instead():
    x = XN.copy()
    x[3, 7] = np.nan
    assert _composites._topk_index(x, 5, 1, True) is None
    got = tape.topk(tape.tensor(x), 5, 1)
    assert got.indices.numpy()[3, 0] == 7            # NaN is the largest, as in PyTorch
    np.testing.assert_array_equal(got.indices.numpy(), _stable_topk(np.nan_to_num(
        x, nan=np.inf), 5, 1, True))
    assert _composites._topk_index(XN[:4], 5, 1, True) is None      # small: sorted


def test_topk_ties_keep_index_order():
    x = np.zeros((300, 200))
    x[:, 50] = 1.0
    got = tape.topk(tape.tensor(x), 3, 1)
    np.testing.assert_array_equal(got.indices.numpy(), np.tile([50, 0, 1], (300, 1)))


@pytest.mark.parametrize('largest', [True, False])
def test_large_topk_and_sort_scatter_back_without_bincount(largest):
    x = tape.tensor(XN, requires_grad=True)
    assert _kinds(tape.topk(x, 4, 1, largest).values) == ['UniqueIndex']
    assert _kinds(tape.sort(x, 0).values) == ['UniqueIndex']
    _against_torch(lambda lib, a: lib.topk(a, 4, 1, largest).values, [XN])
    _against_torch(lambda lib, a: lib.sort(a, 0, descending=largest).values, [XN])


def test_large_roll_and_kthvalue_against_torch():
    _against_torch(lambda lib, a: lib.roll(a, (3, -5), (0, 1)), [XN])
    _against_torch(lambda lib, a: lib.kthvalue(a, 7, 1).values, [XN])


# ------------------------------------------------------- softmax, log_softmax
@pytest.mark.parametrize('name,node', [('softmax', 'SoftmaxBackward0'),
                                       ('log_softmax', 'LogSoftmaxBackward0')])
def test_softmax_is_one_node_named_as_pytorchs(name, node):
    x = tape.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = getattr(tape, name)(x, 1)
    assert y.grad_fn.name() == node
    assert y.grad_fn.next_functions[0][0].name() == 'torch::autograd::AccumulateGrad'
    assert len(y._tape.py) == 1 and y._tape.n == 1


@pytest.mark.parametrize('name', ['softmax', 'log_softmax'])
@pytest.mark.parametrize('shape,dim', [((256, 130), 1), ((256, 130), 0), ((5, 6, 7), 1),
                                       ((5, 6, 7), -1), ((9,), 0)])
def test_softmax_against_torch_to_second_order(name, shape, dim):
    _against_torch(lambda lib, a: getattr(lib, name)(a, dim), [rng.standard_normal(shape)])


@pytest.mark.parametrize('name', ['softmax', 'log_softmax'])
def test_softmax_third_order_and_float32_against_torch(name):
    torch = pytest.importorskip('torch')
    x = rng.standard_normal((4, 6))
    w = rng.standard_normal((4, 6))
    res = []
    for lib in (torch, tape):
        z = lib.tensor(x, requires_grad=True)
        y = getattr(lib, name)(z, 1)
        g, = lib.autograd.grad((lib.tanh(y) * lib.tensor(w)).sum(), z, create_graph=True)
        h, = lib.autograd.grad((g * g).sum(), z, create_graph=True)
        (h ** 3).sum().backward()
        res.append([g.detach().numpy(), h.detach().numpy(), z.grad.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    x32 = rng.standard_normal((64, 100)).astype(np.float32)
    out = []
    for lib in (torch, tape):
        z = lib.tensor(x32, requires_grad=True)
        y = getattr(lib, name)(z, 1)
        (y * lib.tensor(w[0, 0])).sum().backward()
        assert y.dtype == z.grad.dtype == lib.float32
        out.append([y.detach().numpy(), z.grad.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize('name', ['softmax', 'log_softmax'])
def test_softmax_saves_its_output_only(name):
    # PyTorch's node saves the result: changing the input in place afterwards is
    # allowed, changing the output is refused
    torch = pytest.importorskip('torch')
    for lib in (torch, tape):
        x = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
        a = x * 1.0
        y = getattr(lib, name)(a, 1)
        a.mul_(2.0)
        y.sum().backward()
        x2 = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
        y2 = getattr(lib, name)(x2 * 1.0, 1)
        y2.add_(1.0)
        with pytest.raises(RuntimeError, match='modified by an inplace operation'):
            y2.sum().backward()


@pytest.mark.parametrize('name', ['softmax', 'log_softmax'])
def test_softmax_of_infinite_rows_as_pytorch(name):
    torch = pytest.importorskip('torch')
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0], [np.inf, 0.0, 1.0],
                  [np.nan, 0.0, 1.0]])
    got = getattr(tape, name)(tape.tensor(x), 1).numpy()
    want = getattr(torch, name)(torch.tensor(x), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_softmax_under_jit_replays_its_composite():
    @tape.jit
    def f(x):
        return (tape.softmax(x, 1) * tape.log_softmax(x, 1)).sum()
    x = tape.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    for _ in range(3):
        x.grad = None
        f(x).backward()
    assert f.stats()['replays'] == 2
    want = tape.tensor(x.detach().numpy(), requires_grad=True)
    (tape.softmax(want, 1) * tape.log_softmax(want, 1)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=1e-9)


# ---------------------------------------------------------------------- bmm
@pytest.mark.parametrize('shapes', [((32, 16, 16), (32, 16, 16)), ((8, 12, 7), (8, 7, 9)),
                                    ((2, 3, 4), (2, 4, 5))])
def test_small_bmm_backward_against_torch(shapes, monkeypatch):
    from tape import _sweep
    used = []
    real = _sweep._bmm_numpy
    monkeypatch.setattr(_sweep, '_bmm_numpy', lambda *a: used.append(real(*a)) or used[-1])
    a, b = (rng.standard_normal(s) for s in shapes)
    _against_torch(lambda lib, x, y: lib.bmm(x, y), [a, b])
    flops = shapes[0][0] * shapes[0][1] * shapes[0][2] * shapes[1][2]
    assert used and all(u == (flops >= _sweep.BMM_NUMPY_FROM) for u in used)
