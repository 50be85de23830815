"""Errors of the wrong type, or that leave state broken: each test triggers an
error mid-way through a program, checks its type against PyTorch's, then
finishes the program and checks the values and gradients."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")


def _outcome(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


def _program(lib, bad):
    """Build a graph, run ``bad`` on a non-leaf mid-way, then finish and backward."""
    x = lib.tensor(np.arange(6.0).reshape(2, 3) / 7, dtype=lib.float32, requires_grad=True)
    a = x.exp()
    b = a.sin()
    v0 = a._version
    err = _outcome(lambda: bad(lib, a))
    dv = a._version - v0
    vals = a.detach().numpy().copy()
    (b.sum() + (a * a).sum()).backward()
    return err, dv, vals, x.grad.numpy().copy()


def _same(bad):
    et, dvt, vt, gt = _program(tape, bad)
    er, dvr, vr, gr = _program(torch, bad)
    assert er is not None
    assert et is er, (et, er)
    assert dvt == dvr == 0
    np.testing.assert_allclose(vt, vr, rtol=1e-6)
    np.testing.assert_allclose(gt, gr, rtol=1e-5)


@pytest.mark.parametrize('bad', [
    lambda l, a: l.masked_fill(a, l.tensor([1, 0, 1]), 0.0),
    lambda l, a: a.masked_fill_(l.tensor([1, 0, 1]), 0.0),
    lambda l, a: a.masked_fill_(l.tensor([1, 0, 1], dtype=l.uint8), 0.0),
    lambda l, a: l.where(l.tensor([1, 0, 1]), a, a),
], ids=['masked_fill', 'masked_fill_', 'masked_fill_u8', 'where'])
def test_non_bool_mask_tensor_is_refused(bad):
    # PyTorch: "masked_fill_ only supports boolean masks" / "where expected
    # condition to be a boolean tensor"; tape filled, and bumped the version
    _same(bad)


def test_where_non_bool_mask_message():
    with pytest.raises(RuntimeError, match='where.*bool.*int64'):
        tape.where(tape.tensor([1, 0]), tape.ones(2), tape.zeros(2))


def test_fill_with_non_0d_tensor_is_refused():
    # PyTorch: fill_ only supports 0-dimension value tensor; tape filled elementwise
    _same(lambda l, a: a.fill_(l.tensor([1.0, 2.0, 3.0])))
    _same(lambda l, a: a.fill_(l.ones(1)))
    t = tape.ones(3)
    t.fill_(tape.tensor(2.0))
    assert t.tolist() == [2.0, 2.0, 2.0]


def test_index_add_out_of_range_is_index_error():
    # PyTorch (one-dimensional self): IndexError "index out of range in self";
    # tape raised RuntimeError
    _same(lambda l, a: l.index_add(a[0], 0, l.tensor([5]), l.ones(1)))
    _same(lambda l, a: l.index_add(a, 0, l.tensor([5]), l.ones(1, 3)))   # RuntimeError
    _same(lambda l, a: a[1].index_add_(0, l.tensor([3]), l.ones(1)))


@pytest.mark.parametrize('repeats,dim', [([1, 2], 0), ([3], 0), ([0, 2, 1], 1), ([2], None)])
def test_repeat_interleave_tensor_repeats(repeats, dim):
    # a repeats vector (one count per slice) raised ValueError in tape
    d = np.arange(6.0).reshape(2, 3)
    xt = tape.tensor(d, requires_grad=True)
    xr = torch.tensor(d, requires_grad=True)
    yt = tape.repeat_interleave(xt, tape.tensor(repeats), dim=dim)
    yr = torch.repeat_interleave(xr, torch.tensor(repeats), dim=dim)
    np.testing.assert_allclose(yt.detach().numpy(), yr.detach().numpy())
    w = np.arange(yr.numel(), dtype=float).reshape(tuple(yr.shape))
    (yt * tape.tensor(w)).sum().backward()
    (yr * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy())


def test_repeat_interleave_wrong_repeats_length():
    # PyTorch: RuntimeError "repeats must have the same size as input along dim";
    # tape: ValueError from int() of a tensor
    _same(lambda l, a: l.repeat_interleave(a, l.tensor([1, 2, 3]), dim=0))
    _same(lambda l, a: l.repeat_interleave(a, l.tensor([[1, 2]]), dim=0))
    _same(lambda l, a: l.repeat_interleave(a, l.tensor([1, -1]), dim=0))


def test_grad_of_output_not_requiring_grad_names_the_output():
    # PyTorch checks the outputs first: "element 0 of tensors does not require grad"
    x = tape.ones(2, requires_grad=True)
    with tape.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match='element 0 of tensors does not require grad'):
        tape.autograd.grad(y, x)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_jit_function_that_raises_is_run_once_and_raises():
    calls = []

    @tape.jit
    def f(x):
        calls.append(1)
        y = x.exp()
        if len(calls) == 1:
            raise KeyError('boom')
        return y.sum()

    x = tape.ones(3, requires_grad=True)
    with pytest.raises(KeyError):
        f(x)
    assert len(calls) == 1
    f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(1.0) * np.ones(3), rtol=1e-6)


@pytest.mark.parametrize('argnums', [3, -2, (0, 0), (), (0, 1.5)])
def test_func_grad_bad_argnums_is_runtime_error(argnums):
    # PyTorch: RuntimeError "Got argnum=3, but only 1 positional inputs" (and the
    # like); tape raised IndexError from a list lookup
    x = tape.tensor([1.0, 2.0, 3.0])
    xr = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda a: (a * 2).sum(), argnums=argnums)(xr)
    with pytest.raises(RuntimeError):
        tape.func.grad(lambda a: (a * 2).sum(), argnums=argnums)(x)
    with pytest.raises(RuntimeError):
        tape.func.jacrev(lambda a: a * 2, argnums=argnums)(x)
    assert tape.is_grad_enabled()
    g = tape.func.grad(lambda a: (a.sin()).sum())(x)
    np.testing.assert_allclose(g.numpy(), np.cos([1.0, 2.0, 3.0]), rtol=1e-6)


@pytest.mark.parametrize('bad', ['save', 'non_differentiable'])
def test_function_ctx_non_tensor_arguments(bad):
    # save_for_backward(a, 3): PyTorch TypeError naming argument 1; tape raised
    # RuntimeError "Boolean value of Tensor ..." (tensors.index compared tensors).
    # mark_non_differentiable(3): PyTorch RuntimeError; tape accepted it.
    def make(lib):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                if bad == 'save':
                    ctx.save_for_backward(a, 3)
                else:
                    ctx.mark_non_differentiable(3)
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        return F

    types = []
    for lib in (tape, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        e = _outcome(lambda: make(lib).apply(x))
        types.append(e)
        (x * x).sum().backward()
        assert x.grad.tolist() == [2.0, 4.0]
        assert lib.is_grad_enabled()
    assert types[0] is types[1] and types[0] is not None
    if bad == 'save':
        with pytest.raises(TypeError, match='argument 1 is of type int'):
            make(tape).apply(tape.ones(2, requires_grad=True))


def _f64(lib, *shape):
    return lib.ones(*shape, dtype=lib.float64)


@pytest.mark.parametrize('bad', [
    lambda l, a: l.dot(a[0], _f64(l, 3)),
    lambda l, a: l.dot(a[0], l.ones(3, dtype=l.int64)),
    lambda l, a: l.inner(a, _f64(l, 3)),
    lambda l, a: l.addmm(_f64(l, 2, 2), a, a.t()),
    lambda l, a: l.cdist(a, _f64(l, 2, 3)),
    lambda l, a: l.lerp(a, _f64(l, 2, 3), 0.5),
    lambda l, a: l.lerp(a, a, _f64(l, 2, 3)),
    lambda l, a: l.scatter(a, 1, l.tensor([[0]]), _f64(l, 1, 1)),
    lambda l, a: l.scatter_add(a, 1, l.tensor([[0]]), _f64(l, 1, 1)),
    lambda l, a: a.scatter_(1, l.tensor([[0]]), _f64(l, 1, 1)),
    lambda l, a: a.scatter_add_(1, l.tensor([[0]]), _f64(l, 1, 1)),
], ids=['dot', 'dot_int', 'inner', 'addmm_bias', 'cdist', 'lerp_end', 'lerp_weight',
        'scatter', 'scatter_add', 'scatter_', 'scatter_add_'])
def test_mixed_dtypes_are_refused_as_pytorch_does(bad):
    # PyTorch refuses these dtype mixes (RuntimeError); tape promoted or cast silently
    _same(bad)


def test_mixed_dtype_refusals_leave_promoting_ops_alone():
    assert tape.inner(tape.ones(2), tape.tensor(2.0, dtype=tape.float64)).dtype == tape.float32
    assert tape.zeros(3, dtype=tape.float64).scatter(0, tape.tensor([0]), 1.0).dtype == \
        tape.float64
    assert tape.lerp(tape.ones(2), tape.zeros(2), 0.5).tolist() == [0.5, 0.5]


@pytest.mark.parametrize('bad', [
    lambda l, a: l.cat([a, 3]),
    lambda l, a: l.cat([a, None]),
    lambda l, a: l.stack([a, 3]),
    lambda l, a: l.stack(a),
], ids=['cat_int', 'cat_none', 'stack_int', 'stack_tensor'])
def test_cat_stack_non_tensor_elements_are_type_errors(bad):
    # PyTorch: TypeError "expected Tensor as element 1 in argument 0, but got int";
    # tape: RuntimeError about dimensions (or, for stack(tensor), stacked its rows)
    _same(bad)


def test_linear_and_nll_loss_refuse_a_bias_or_weight_of_another_dtype():
    # PyTorch raises rather than promote: addmm's "same dtype", nll's "scalar type"
    import tape.nn.functional as TF
    for lib, F in ((tape, TF), (torch, torch.nn.functional)):
        x, W = lib.ones(2, 3), lib.ones(4, 3)
        with pytest.raises(RuntimeError, match='must have the same dtype'):
            F.linear(x, W, lib.ones(4, dtype=lib.float64))
        assert F.linear(x, W, lib.ones(4)).dtype == lib.float32
        t = lib.tensor([0, 1])
        for loss in (F.cross_entropy, F.nll_loss):
            with pytest.raises(RuntimeError, match='expected scalar type'):
                loss(x, t, weight=lib.ones(3, dtype=lib.float64))
            with pytest.raises(RuntimeError, match='expected scalar type'):
                loss(x.double(), t, weight=lib.ones(3))
        assert F.cross_entropy(x, t, weight=lib.ones(3)).dtype == lib.float32


def test_norm_nuclear_and_an_unknown_order():
    # torch.norm(p='nuc') is the nuclear norm; an unknown order is a RuntimeError
    a = np.array([[3.0, 1.0], [2.0, 5.0]])
    xt, xr = tape.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yt, yr = tape.norm(xt, p='nuc'), torch.norm(xr, p='nuc')
    yt.backward()
    yr.backward()
    np.testing.assert_allclose(yt.item(), yr.item(), rtol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10)
    for lib in (tape, torch):
        with pytest.raises(RuntimeError, match='Order bogus not supported'):
            lib.norm(lib.ones(2, 2), p='bogus')
