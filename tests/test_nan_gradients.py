"""A NaN or inf gradient arriving at a masking op (relu, clamp, hardtanh, relu6,
maximum, minimum) leaves 0 where the op passes no gradient, as PyTorch's
backward selects 0 there instead of multiplying by 0; on every sweep path."""
import warnings

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

OPS = {
    'relu': lambda lib, x: lib.relu(x),
    'clamp_min': lambda lib, x: lib.clamp(x, min=0.0),
    'clamp': lambda lib, x: lib.clamp(x, -0.5, 0.5),
    'maximum': lambda lib, x: lib.maximum(x, lib.zeros_like(x)),
    'minimum': lambda lib, x: lib.minimum(x, lib.zeros_like(x)),
    'hardtanh': lambda lib, x: lib.nn.functional.hardtanh(x),
    'relu6': lambda lib, x: lib.nn.functional.relu6(x),
}


def _grads(lib, name, values, dtype, create_graph):
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    y = OPS[name](lib, x)
    bad = np.where(np.arange(values.size) % 2 == 0, np.nan, np.inf)
    g = lib.tensor(bad, dtype=getattr(lib, dtype))
    if create_graph:
        gx, = lib.autograd.grad(y, x, g, create_graph=True)
        return gx.detach().numpy()
    y.backward(g)
    return x.grad.numpy()


@pytest.mark.parametrize('name', sorted(OPS))
@pytest.mark.parametrize('n', [9, 20001])             # the arena and the large-tensor path
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('create_graph', [False, True])
def test_masked_positions_get_zero_not_nan(name, n, dtype, create_graph):
    values = np.resize(np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 7.0, -7.0, 6.0]), n)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ours = _grads(tape, name, values, dtype, create_graph)
        theirs = _grads(torch, name, values, dtype, create_graph)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(ours[~np.isnan(ours)], theirs[~np.isnan(theirs)])


@pytest.mark.parametrize('n', [8, 20000])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('create_graph', [False, True])
@pytest.mark.parametrize('kw', [{}, {'beta': 2.0, 'threshold': 5.0}])
def test_softplus_gradient_at_nan_input_is_nan(n, dtype, create_graph, kw):
    values = np.resize(np.array([np.nan, 1.0, -2.0, 30.0]), n)

    def grads(lib):
        x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
        y = lib.nn.functional.softplus(x, **kw).sum()
        if create_graph:
            g, = lib.autograd.grad(y, x, create_graph=True)
            return g.detach().numpy()
        y.backward()
        return x.grad.numpy()
    ours, theirs = grads(tape), grads(torch)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    ok = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[ok], theirs[ok], rtol=1e-6)
