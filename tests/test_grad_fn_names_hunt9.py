"""grad_fn parity with PyTorch (hunt 9): node names and next_functions of
max/min/amax/amin/median of all elements, unbind and iteration, split with
sizes, squeeze's three overloads, rsub with a number, the linalg nodes."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')


def sig(fn, depth=2):
    """(name, next_functions' signatures) ``depth`` levels down; None for no node."""
    if fn is None:
        return None
    name = fn.name().replace('torch::autograd::', '')
    if depth == 0:
        return name
    return (name, tuple(sig(f, depth - 1) for f, _ in fn.next_functions))


A = np.array([[0.3, -1.2, 2.5, 0.7], [1.1, 0.4, -0.6, 2.0], [-0.8, 1.9, 0.2, -2.2]])
TIES = np.array([[2.5, -1.2, 2.5, 0.7], [1.1, 0.4, -2.2, 2.0], [-0.8, 1.9, 0.2, -2.2]])
SPD = A.T @ A + 4 * np.eye(4)


def both(f, arr=A):
    out = {}
    for lib in (torch, tape):
        x = lib.tensor(arr.copy(), requires_grad=True)
        y = f(lib, x)
        if isinstance(y, (tuple, list)):
            y = y[0]
        out[lib.__name__] = (x, y)
    return out


CASES = {
    'max': lambda L, x: x.max(),
    'min': lambda L, x: x.min(),
    'max_fn': lambda L, x: L.max(x),
    'min_fn': lambda L, x: L.min(x),
    'iter_list': lambda L, x: list(x)[1],
    'iter_for': lambda L, x: [r for r in x][2],
    'unbind': lambda L, x: x.unbind()[1],
    'unbind_dim1': lambda L, x: x.unbind(1)[3],
    'fn_unbind': lambda L, x: L.unbind(x, 0)[0],
    'split_sizes': lambda L, x: x.split([1, 2])[1],
    'split_with_sizes': lambda L, x: x.split_with_sizes([1, 3], 1)[1],
    'split_int': lambda L, x: x.split(2)[1],
    'squeeze_all': lambda L, x: x[:1].squeeze(),
    'squeeze_noop': lambda L, x: x.squeeze(),
    'squeeze_int': lambda L, x: x[:1].squeeze(0),
    'squeeze_tuple': lambda L, x: x[:1].squeeze((0,)),
    'rsub_number': lambda L, x: 2 - x,
    'rsub_fn': lambda L, x: L.rsub(x, 2.5),
    'rsub_fn_int': lambda L, x: L.rsub(x, 2),
}


@pytest.mark.parametrize('name', list(CASES))
def test_graph_matches_torch(name):
    r = both(CASES[name])
    assert sig(r['tape'][1].grad_fn) == sig(r['torch'][1].grad_fn)


@pytest.mark.parametrize('name', ['max', 'min', 'iter_list', 'unbind_dim1', 'split_sizes',
                                  'squeeze_tuple', 'rsub_fn'])
def test_gradients_unchanged(name):
    r = both(CASES[name])
    for lib in ('torch', 'tape'):
        x, y = r[lib]
        (y * 3).sum().backward()
    np.testing.assert_allclose(r['tape'][0].grad.numpy(), r['torch'][0].grad.numpy())


@pytest.mark.parametrize('op', ['max', 'min'])
def test_full_extreme_with_ties_names_and_shares(op):
    # ties: the gradient is shared evenly (PyTorch's evenly_distribute_backward);
    # the node is MaxBackward1 / MinBackward1 as PyTorch's
    r = both(lambda L, x: getattr(x, op)(), TIES)
    names = {k: v[1].grad_fn.name() for k, v in r.items()}
    assert names['tape'] == names['torch'] == {'max': 'MaxBackward1', 'min': 'MinBackward1'}[op]
    for lib in ('torch', 'tape'):
        (r[lib][1] * 2).backward()
    np.testing.assert_allclose(r['tape'][0].grad.numpy(), r['torch'][0].grad.numpy())


@pytest.mark.parametrize('op', ['max', 'min'])
def test_full_extreme_nan_and_double_backward(op):
    arr = A.copy()
    arr[1, 2] = np.nan
    r = both(lambda L, x: getattr(x, op)(), arr)
    assert r['tape'][1].grad_fn.name() == r['torch'][1].grad_fn.name()
    gs = {}
    for lib, L in (('torch', torch), ('tape', tape)):
        x, _ = r[lib]
        y = getattr(x * x, op)()
        g, = L.autograd.grad(y, x, create_graph=True)
        gg, = L.autograd.grad(g.sum(), x)
        gs[lib] = (g.detach().numpy(), gg.numpy())
    np.testing.assert_allclose(gs['tape'][0], gs['torch'][0])
    np.testing.assert_allclose(gs['tape'][1], gs['torch'][1])


@pytest.mark.parametrize('f', [
    lambda L, x: x.amax(), lambda L, x: x.amin(), lambda L, x: x.amax(1),
    lambda L, x: x.amin(0, keepdim=True), lambda L, x: x.median(), lambda L, x: x.nanmedian(),
], ids=['amax', 'amin', 'amax_dim', 'amin_dim', 'median', 'nanmedian'])
def test_even_reductions_named_as_torch(f):
    # tape records sum(x * w): the node now carries PyTorch's name (the product
    # below it remains)
    for arr in (A, TIES):
        r = both(f, arr)
        assert r['tape'][1].grad_fn.name() == r['torch'][1].grad_fn.name()
        for lib in ('torch', 'tape'):
            (r[lib][1] * 2).sum().backward()
        np.testing.assert_allclose(r['tape'][0].grad.numpy(), r['torch'][0].grad.numpy())


def test_iteration_rows_are_unbind_outputs():
    for lib in (torch, tape):
        x = lib.tensor(A.copy(), requires_grad=True)
        rows = list(x * 1)
        with pytest.raises(RuntimeError, match='multiple views'):
            rows[0].add_(1)
    # without recording, iteration still yields writable views
    x = tape.tensor(A.copy())
    for row in x:
        row.add_(1)
    np.testing.assert_allclose(x.numpy(), A + 1)


LINALG = {
    'det': lambda L, s: L.linalg.det(s),
    'slogdet': lambda L, s: L.linalg.slogdet(s)[1],
    'cholesky': lambda L, s: L.linalg.cholesky(s),
    'solve': lambda L, s: L.linalg.solve(s, s[:, :1]),
    'qr': lambda L, s: L.linalg.qr(s)[0],
    'eigh': lambda L, s: L.linalg.eigh(s)[0],
    'svd': lambda L, s: L.linalg.svd(s)[1],
    'svdvals': lambda L, s: L.linalg.svdvals(s),
    'pinv': lambda L, s: L.linalg.pinv(s),
    'lstsq': lambda L, s: L.linalg.lstsq(s, s[:, :2]).solution,
}


@pytest.mark.parametrize('name', list(LINALG))
def test_linalg_node_names(name):
    r = both(LINALG[name], SPD)
    nt, np_ = r['torch'][1].grad_fn, r['tape'][1].grad_fn
    assert np_.name() == nt.name()
    assert repr(np_).startswith(f'<{type(nt).__name__} object at ')
    # the node is still a custom Function's (its ctx's attributes read through)
    assert np_.next_functions[0][0].name() == 'torch::autograd::AccumulateGrad'
    for lib in ('torch', 'tape'):
        r[lib][1].sum().backward()
    np.testing.assert_allclose(r['tape'][0].grad.numpy(), r['torch'][0].grad.numpy(),
                               rtol=1e-6, atol=1e-9)


def test_rsub_node_hook_sees_one_input():
    seen = []
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = 2 - x
    y.grad_fn.register_hook(lambda gi, go: seen.append(len(gi)))
    y.sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = 2 - tx
    tseen = []
    ty.grad_fn.register_hook(lambda gi, go: tseen.append(len(gi)))
    ty.sum().backward()
    assert seen == tseen == [1]
    np.testing.assert_allclose(x.grad.numpy(), [-1.0, -1.0])
