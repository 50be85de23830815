"""tape.nn.utils: parametrize, parametrizations (weight_norm, spectral_norm,
orthogonal), the legacy weight_norm/spectral_norm hooks, fusion and the small
helpers, checked against torch (same initial values)."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import tape
from tape import nn

torch = pytest.importorskip("torch")

P = nn.utils.parametrize
TP = torch.nn.utils.parametrize


def _np(t):
    return np.asarray(t.detach().numpy())


def _t(x):
    return torch.tensor(_np(x))


def _close(a, b, tol=1e-5):
    a, b = (_np(x) if isinstance(x, tape.Tensor) else
            x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
            for x in (a, b))
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _copy_params(src, dst):
    """Copy torch module ``src``'s parameters and buffers into tape module ``dst``."""
    sd = {k: tape.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)


def _pair(cls_name, *args, **kw):
    tm = getattr(torch.nn, cls_name)(*args, **kw)
    m = getattr(nn, cls_name)(*args, **kw)
    _copy_params(tm, m)
    return m, tm


def _mods(lib):
    """The same parametrizations written for tape and for torch (same class names)."""
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    class Scale(lib.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c

        def forward(self, X):
            return X * self.c

        def right_inverse(self, X):
            return X / self.c

    class Skew(lib.nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.mT

    class SplitSum(lib.nn.Module):          # right_inverse with two outputs
        def forward(self, A, B):
            return A + 2 * B

        def right_inverse(self, X):
            return X * 0.5, X * 0.25

    class Grow(lib.nn.Module):              # changes the shape: needs unsafe
        def forward(self, X):
            return lib.cat([X, X], 0)

    return dict(Symmetric=Symmetric, Scale=Scale, Skew=Skew, SplitSum=SplitSum, Grow=Grow)


TA, TO = _mods(tape), _mods(torch)


def _grads_match(m, tm, x):
    out, tout = m(x), tm(_t(x))
    _close(out, tout)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    tp = dict(tm.named_parameters())
    names = [n for n, _ in m.named_parameters()]
    assert names == list(tp)
    for n, p in m.named_parameters():
        _close(p.grad, tp[n].grad, 1e-4)


# -- parametrize ----------------------------------------------------------------------
def test_register_symmetric_forward_grad_state_dict_repr():
    m, tm = _pair('Linear', 3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    TP.register_parametrization(tm, 'weight', TO['Symmetric']())
    assert type(m).__name__ == type(tm).__name__ == 'ParametrizedLinear'
    assert isinstance(m, nn.Linear) and P.type_before_parametrizations(m) is nn.Linear
    assert P.is_parametrized(m) and P.is_parametrized(m, 'weight')
    assert not P.is_parametrized(m, 'bias')
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == \
        ['bias', 'parametrizations.weight.original']
    for k, v in tm.state_dict().items():
        _close(m.state_dict()[k], v)
    assert 'weight' not in m._parameters
    _close(m.weight, tm.weight)
    _grads_match(m, tm, tape.randn(4, 3))
    # the class is per module: another Linear is untouched
    assert type(nn.Linear(2, 2)) is nn.Linear


def test_original_is_the_same_tensor_object():
    m = nn.Linear(3, 3)
    w = m.weight
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    assert m.parametrizations.weight.original is w
    assert isinstance(w, nn.Parameter)


def test_chained_parametrizations_and_assignment():
    m, tm = _pair('Linear', 3, 3)
    for lib, mod, M in ((P, m, TA), (TP, tm, TO)):
        lib.register_parametrization(mod, 'weight', M['Scale'](2.0))
        lib.register_parametrization(mod, 'weight', M['Symmetric']())
        lib.register_parametrization(mod, 'weight', M['Scale'](3.0))
    assert repr(m) == repr(tm)
    assert len(m.parametrizations.weight) == 3
    _close(m.weight, tm.weight)
    # Scale's right_inverse ran at registration: original = W / 2
    _close(m.parametrizations.weight.original, tm.parametrizations.weight.original)
    _grads_match(m, tm, tape.randn(2, 3))
    # assigning runs right_inverse through the chain (Symmetric has none -> error)
    X = tape.randn(3, 3)
    with pytest.raises(RuntimeError, match='parametrization Symmetric does not implement '
                                           'right_inverse'):
        m.weight = X
    with pytest.raises(RuntimeError, match='does not implement right_inverse'):
        tm.weight = _t(X)


def test_assignment_runs_right_inverse():
    m, tm = _pair('Linear', 3, 2)
    P.register_parametrization(m, 'weight', TA['Scale'](4.0))
    TP.register_parametrization(tm, 'weight', TO['Scale'](4.0))
    X = tape.randn(2, 3)
    orig = m.parametrizations.weight.original
    m.weight = X
    tm.weight = _t(X)
    assert m.parametrizations.weight.original is orig
    _close(orig, tm.parametrizations.weight.original)
    _close(m.weight, X)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        m.weight = nn.Parameter(X)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        tm.weight = torch.nn.Parameter(_t(X))


def test_right_inverse_with_several_outputs():
    m, tm = _pair('Linear', 3, 2)
    P.register_parametrization(m, 'weight', TA['SplitSum']())
    TP.register_parametrization(tm, 'weight', TO['SplitSum']())
    assert list(m.state_dict()) == list(tm.state_dict()) == \
        ['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
    pl = m.parametrizations.weight
    assert not pl.is_tensor and pl.ntensors == 2
    assert isinstance(pl.original0, nn.Parameter) and isinstance(pl.original1, nn.Parameter)
    _close(pl.original0, tm.parametrizations.weight.original0)
    _close(m.weight, tm.weight)
    _grads_match(m, tm, tape.randn(5, 3))
    m.weight = tape.ones(2, 3)
    _close(pl.original1, np.full((2, 3), 0.25, np.float32))
    with pytest.raises(ValueError, match='Cannot leave unparametrized'):
        P.remove_parametrizations(m, 'weight', leave_parametrized=False)
    P.remove_parametrizations(m, 'weight')
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    _close(m.weight, np.ones((2, 3), np.float32))


def test_unsafe_and_shape_dtype_errors():
    m, tm = _pair('Linear', 3, 2)
    with pytest.raises(ValueError) as e1:
        P.register_parametrization(m, 'weight', TA['Grow']())
    with pytest.raises(ValueError) as e2:
        TP.register_parametrization(tm, 'weight', TO['Grow']())
    assert str(e1.value).split('\n')[0] == str(e2.value).split('\n')[0]
    assert 'unparametrized shape' in str(e1.value)
    assert type(m) is nn.Linear and 'weight' in m._parameters   # nothing changed
    P.register_parametrization(m, 'weight', TA['Grow'](), unsafe=True)
    TP.register_parametrization(tm, 'weight', TO['Grow'](), unsafe=True)
    assert m.weight.shape == (4, 3) and m.parametrizations.weight.unsafe
    _close(m.weight, tm.weight)
    # chaining a shape-changing one on a parametrized tensor
    with pytest.raises(ValueError, match='may not change the shape'):
        P.register_parametrization(m, 'weight', TA['Grow']())


def test_errors_for_bad_use():
    m, tm = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with pytest.raises(ValueError) as e1:
        P.register_parametrization(m, 'nope', TA['Symmetric']())
    with pytest.raises(ValueError) as e2:
        TP.register_parametrization(tm, 'nope', TO['Symmetric']())
    assert str(e1.value) == str(e2.value) == (
        "Module 'Linear(in_features=2, out_features=2, bias=True)' does not have a parameter, "
        "a buffer, or a parametrized element with name 'nope'")
    with pytest.raises(ValueError, match='does not have a parametrization on weight'):
        P.remove_parametrizations(m, 'weight')
    assert P.type_before_parametrizations(m) is nn.Linear
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        nn.utils.parametrizations.spectral_norm(m, 'nope')
    with pytest.raises(ValueError, match='Expected n_power_iterations to be positive'):
        nn.utils.parametrizations.spectral_norm(m, n_power_iterations=0)


@pytest.mark.parametrize('leave', [True, False])
def test_remove_parametrizations(leave):
    m, tm = _pair('Linear', 3, 3)
    P.register_parametrization(m, 'weight', TA['Skew']())
    TP.register_parametrization(tm, 'weight', TO['Skew']())
    P.register_parametrization(m, 'bias', TA['Scale'](2.0))
    TP.register_parametrization(tm, 'bias', TO['Scale'](2.0))
    orig = m.parametrizations.weight.original
    P.remove_parametrizations(m, 'weight', leave_parametrized=leave)
    TP.remove_parametrizations(tm, 'weight', leave_parametrized=leave)
    assert type(m).__name__ == 'ParametrizedLinear'        # bias still parametrized
    assert m.weight is orig and isinstance(m.weight, nn.Parameter)
    _close(m.weight, tm.weight)
    assert list(m.state_dict()) == list(tm.state_dict())
    P.remove_parametrizations(m, 'bias', leave_parametrized=leave)
    TP.remove_parametrizations(tm, 'bias', leave_parametrized=leave)
    assert type(m) is nn.Linear and not hasattr(m, 'parametrizations')
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == ['weight', 'bias']
    for k, v in tm.state_dict().items():
        _close(m.state_dict()[k], v)
    assert [n for n, _ in m.named_parameters()] == ['weight', 'bias']


def test_parametrized_buffer():
    class WithBuf(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer('b', tape.arange(9.).reshape(3, 3))

    m = WithBuf()
    P.register_parametrization(m, 'b', TA['Symmetric']())
    assert list(m.state_dict()) == ['parametrizations.b.original']
    assert not isinstance(m.parametrizations.b.original, nn.Parameter)
    assert list(m.parameters()) == []
    np.testing.assert_array_equal(_np(m.b), _np(m.b).T)
    P.remove_parametrizations(m, 'b')
    assert 'b' in m._buffers and type(m) is WithBuf


def test_cached():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    assert m.weight is not m.weight
    with P.cached():
        w = m.weight
        assert m.weight is w
        with P.cached():
            assert m.weight is w
        assert m.weight is w
    assert m.weight is not w
    assert not P._cache


def test_transfer_parametrizations_and_params():
    a = nn.Linear(3, 3)
    P.register_parametrization(a, 'weight', TA['Symmetric']())
    P.register_parametrization(a, 'weight', TA['Scale'](2.0))
    b = nn.Linear(3, 3)
    P.transfer_parametrizations_and_params(a, b)
    assert type(b).__name__ == 'ParametrizedLinear'
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    assert len(b.parametrizations.weight) == 2
    _close(b.weight, a.weight)
    # onto a module without the tensor
    c = nn.Identity()
    P.transfer_parametrizations_and_params(a, c, 'weight')
    _close(c.weight, a.weight)


def test_optimizer_steps_through_parametrization():
    m, tm = _pair('Linear', 3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    TP.register_parametrization(tm, 'weight', TO['Symmetric']())
    opt = tape.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    x = tape.randn(8, 3)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (m(x) ** 2).mean().backward()
        (tm(_t(x)) ** 2).mean().backward()
        opt.step()
        topt.step()
    _close(m.parametrizations.weight.original, tm.parametrizations.weight.original, 1e-5)
    _close(m.weight, tm.weight, 1e-5)


def test_deepcopy_and_pickle():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    m(tape.randn(2, 3)).sum().backward()
    c = copy.deepcopy(m)
    assert type(c) is type(m)
    assert c.parametrizations.weight.original is not m.parametrizations.weight.original
    assert isinstance(c.parametrizations.weight.original, nn.Parameter)
    _close(c.weight, m.weight)
    with pytest.raises(RuntimeError, match='only supported through state_dict'):
        pickle.dumps(m)


def test_functional_call_and_dtype_conversion():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    m.double()
    assert m.weight.dtype == tape.float64
    x = tape.randn(2, 3, dtype=tape.float64)
    W = tape.tensor([[1., 2., 3.], [0., 4., 5.], [0., 0., 6.]], dtype=tape.float64)
    out = tape.func.functional_call(m, {'parametrizations.weight.original': W}, (x,))
    sym = _np(W) + np.triu(_np(W), 1).T
    np.testing.assert_allclose(_np(out), _np(x) @ sym.T + _np(m.bias), rtol=1e-12)
    assert m.parametrizations.weight.original is not W


def test_load_state_dict_into_parametrized():
    m, tm = _pair('Linear', 3, 3)
    P.register_parametrization(m, 'weight', TA['Symmetric']())
    TP.register_parametrization(tm, 'weight', TO['Symmetric']())
    with torch.no_grad():
        tm.parametrizations.weight.original.mul_(3)
    _copy_params(tm, m)
    _close(m.weight, tm.weight)


# -- parametrizations.weight_norm ---------------------------------------------------------
@pytest.mark.parametrize('dim', [0, 1, None, -1])
def test_weight_norm_parametrization(dim):
    m, tm = _pair('Linear', 4, 3)
    nn.utils.parametrizations.weight_norm(m, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    assert repr(m).replace('tape', 'torch') == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        _close(m.state_dict()[k], v)
    _close(m.weight, tm.weight)
    _grads_match(m, tm, tape.randn(5, 4))


def test_weight_norm_parametrization_conv_and_legacy_keys():
    m, tm = _pair('Conv2d', 2, 3, 3)
    nn.utils.parametrizations.weight_norm(m)
    torch.nn.utils.parametrizations.weight_norm(tm)
    _grads_match(m, tm, tape.randn(1, 2, 5, 5))
    # a state dict with the legacy weight_g / weight_v keys loads
    lm = nn.Conv2d(2, 3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)
        nn.utils.weight_norm(lm)
    m2 = nn.utils.parametrizations.weight_norm(nn.Conv2d(2, 3, 3))
    m2.load_state_dict(lm.state_dict())
    _close(m2.weight, lm.weight)


# -- parametrizations.spectral_norm -------------------------------------------------------
def _sn_pair(cls_name, *args, n_iter=1, dim=None, **kw):
    m, tm = _pair(cls_name, *args, **kw)
    nn.utils.parametrizations.spectral_norm(m, n_power_iterations=n_iter, dim=dim)
    torch.nn.utils.parametrizations.spectral_norm(tm, n_power_iterations=n_iter, dim=dim)
    # the random start vectors differ: give tape torch's
    _copy_params(tm, m)
    return m, tm


@pytest.mark.parametrize('n_iter', [1, 3])
def test_spectral_norm_parametrization_train_eval(n_iter):
    m, tm = _sn_pair('Linear', 5, 4, n_iter=n_iter)
    assert list(m.state_dict()) == list(tm.state_dict()) == \
        ['bias', 'parametrizations.weight.original', 'parametrizations.weight.0._u',
         'parametrizations.weight.0._v']
    assert repr(m) == repr(tm)
    sn, tsn = m.parametrizations.weight[0], tm.parametrizations.weight[0]
    x = tape.randn(3, 5)
    for _ in range(3):                 # each access in train mode iterates
        _close(m.weight, tm.weight)
        _close(sn._u, tsn._u)
        _close(sn._v, tsn._v)
    _grads_match(m, tm, x)
    m.eval()
    tm.eval()
    u = _np(sn._u).copy()
    _close(m.weight, tm.weight)
    _close(m(x), tm(_t(x)))
    np.testing.assert_array_equal(_np(sn._u), u)          # eval: no iteration
    # sigma of the result is ~1
    s = np.linalg.svd(_np(m.weight), compute_uv=False)[0]
    assert abs(s - 1) < 0.1


def test_spectral_norm_parametrization_conv_dims_and_1d():
    m, tm = _sn_pair('Conv2d', 2, 3, 3)
    _grads_match(m, tm, tape.randn(1, 2, 5, 5))
    m, tm = _sn_pair('ConvTranspose2d', 3, 2, 3)          # dim defaults to 1
    assert m.parametrizations.weight[0].dim == tm.parametrizations.weight[0].dim == 1
    _grads_match(m, tm, tape.randn(1, 3, 4, 4))
    m, tm = _sn_pair('Linear', 4, 3, dim=1)
    _grads_match(m, tm, tape.randn(2, 4))
    # a 1-d tensor is just normalized
    m, tm = _pair('Linear', 4, 3)
    nn.utils.parametrizations.spectral_norm(m, 'bias')
    torch.nn.utils.parametrizations.spectral_norm(tm, 'bias')
    _close(m.bias, tm.bias)


def test_spectral_norm_parametrization_optimizer_and_remove():
    m, tm = _sn_pair('Linear', 4, 4)
    opt = tape.optim.Adam(m.parameters(), lr=0.01)
    topt = torch.optim.Adam(tm.parameters(), lr=0.01)
    x = tape.randn(6, 4)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        m(x).pow(2).mean().backward()
        tm(_t(x)).pow(2).mean().backward()
        opt.step()
        topt.step()
    _close(m.parametrizations.weight.original, tm.parametrizations.weight.original, 1e-4)
    P.remove_parametrizations(m, 'weight')
    TP.remove_parametrizations(tm, 'weight')
    _close(m.weight, tm.weight, 1e-4)
    assert list(m.state_dict()) == list(tm.state_dict()) == ['bias', 'weight']


# -- parametrizations.orthogonal ------------------------------------------------------------
@pytest.mark.parametrize('omap,shape', [('matrix_exp', (4, 4)), ('cayley', (4, 4)),
                                        ('householder', (4, 4)), ('matrix_exp', (3, 5)),
                                        ('cayley', (5, 3)), (None, (5, 3)), (None, (3, 5))])
def test_orthogonal(omap, shape):
    m, tm = _pair('Linear', shape[1], shape[0])
    nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=omap)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    W = _np(m.weight).astype(np.float64)
    G = W @ W.T if shape[0] <= shape[1] else W.T @ W
    np.testing.assert_allclose(G, np.eye(min(shape)), atol=1e-5)
    # with torch's original and base, tape computes torch's weight and gradients
    _copy_params(tm, m)
    _close(m.weight, tm.weight, 1e-5)
    _grads_match(m, tm, tape.randn(2, shape[1]))


def test_orthogonal_square_base_matches_torch():
    # the base of a square weight is the (deterministic) QR of the weight
    m, tm = _pair('Linear', 4, 4)
    nn.utils.parametrizations.orthogonal(m, orthogonal_map='cayley')
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map='cayley')
    _close(m.parametrizations.weight[0].base, tm.parametrizations.weight[0].base, 1e-5)
    _close(m.weight, tm.weight, 1e-5)


def test_orthogonal_without_trivialization():
    m, tm = _pair('Linear', 4, 4)
    nn.utils.parametrizations.orthogonal(m, orthogonal_map='householder',
                                         use_trivialization=False)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map='householder',
                                               use_trivialization=False)
    _close(m.parametrizations.weight.original, tm.parametrizations.weight.original, 1e-5)
    _close(m.weight, tm.weight, 1e-5)
    m2 = nn.Linear(3, 3)
    nn.utils.parametrizations.orthogonal(m2, orthogonal_map='cayley', use_trivialization=False)
    with pytest.raises(NotImplementedError, match='not possible to assign'):
        m2.weight = tape.eye(3)
    with pytest.raises(ValueError, match='orthogonal_map has to be one of'):
        nn.utils.parametrizations.orthogonal(nn.Linear(3, 3), orthogonal_map='qr')
    with pytest.raises(ValueError, match='Expected a matrix or batch of matrices'):
        nn.utils.parametrizations.orthogonal(nn.Linear(3, 3), 'bias')


# -- legacy weight_norm / spectral_norm ------------------------------------------------------
@pytest.mark.parametrize('dim', [0, 1, None])
def test_legacy_weight_norm(dim):
    m, tm = _pair('Linear', 4, 3)
    with pytest.warns(FutureWarning, match='deprecated in favor of'):
        nn.utils.weight_norm(m, dim=dim)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)
        torch.nn.utils.weight_norm(tm, dim=dim)
    assert list(m.state_dict()) == list(tm.state_dict()) == ['bias', 'weight_g', 'weight_v']
    for k, v in tm.state_dict().items():
        _close(m.state_dict()[k], v)
    _grads_match(m, tm, tape.randn(5, 4))
    with pytest.raises(RuntimeError, match='Cannot register two weight_norm hooks'):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', FutureWarning)
            nn.utils.weight_norm(m, dim=dim)
    nn.utils.remove_weight_norm(m)
    torch.nn.utils.remove_weight_norm(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == ['bias', 'weight']
    assert isinstance(m.weight, nn.Parameter)
    _close(m.weight, tm.weight)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        nn.utils.remove_weight_norm(m)


def test_legacy_spectral_norm_train_eval_remove():
    m, tm = _pair('Linear', 5, 4)
    nn.utils.spectral_norm(m, n_power_iterations=2)
    torch.nn.utils.spectral_norm(tm, n_power_iterations=2)
    assert list(m.state_dict()) == list(tm.state_dict()) == \
        ['bias', 'weight_orig', 'weight_u', 'weight_v']
    _copy_params(tm, m)
    x = tape.randn(3, 5)
    for _ in range(3):
        _close(m(x), tm(_t(x)))
        _close(m.weight_u, tm.weight_u)
        _close(m.weight_v, tm.weight_v)
        _close(m.weight, tm.weight)
    _grads_match(m, tm, x)
    m.eval()
    tm.eval()
    u = _np(m.weight_u).copy()
    _close(m(x), tm(_t(x)))
    np.testing.assert_array_equal(_np(m.weight_u), u)
    with pytest.raises(RuntimeError, match='Cannot register two spectral_norm hooks'):
        nn.utils.spectral_norm(m)
    nn.utils.remove_spectral_norm(m)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == ['bias', 'weight']
    _close(m.weight, tm.weight)
    assert not m._forward_pre_hooks and not m._state_dict_hooks
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        nn.utils.remove_spectral_norm(m)


# -- fusion -------------------------------------------------------------------------------
def _bn_pair(cls_name, n):
    bn, tbn = _pair(cls_name, n)
    rng = np.random.default_rng(0)
    sd = {'weight': rng.normal(size=n), 'bias': rng.normal(size=n),
          'running_mean': rng.normal(size=n), 'running_var': rng.uniform(0.5, 2, size=n)}
    tbn.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in sd.items()},
                        strict=False)
    _copy_params(tbn, bn)
    return bn.eval(), tbn.eval()


@pytest.mark.parametrize('bias', [True, False])
def test_fuse_conv_bn_eval(bias):
    conv, tconv = _pair('Conv2d', 2, 3, 3, bias=bias)
    bn, tbn = _bn_pair('BatchNorm2d', 3)
    conv.eval()
    tconv.eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    tfused = torch.nn.utils.fuse_conv_bn_eval(tconv, tbn)
    x = tape.randn(2, 2, 6, 6)
    _close(fused(x), bn(conv(x)), 1e-4)
    _close(fused(x), tfused(_t(x)), 1e-4)
    assert isinstance(fused.weight, nn.Parameter) and isinstance(fused.bias, nn.Parameter)
    assert fused.bias.requires_grad == tfused.bias.requires_grad == bias
    assert fused is not conv and (conv.bias is None) == (not bias)
    with pytest.raises(AssertionError, match='Fusion only for eval!'):
        nn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_conv_transpose_and_linear_bn():
    conv, tconv = _pair('ConvTranspose2d', 2, 3, 3)
    bn, tbn = _bn_pair('BatchNorm2d', 3)
    conv.eval()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=True)
    x = tape.randn(1, 2, 4, 4)
    _close(fused(x), bn(conv(x)), 1e-4)
    lin, tlin = _pair('Linear', 4, 3)
    bn1, tbn1 = _bn_pair('BatchNorm1d', 3)
    lin.eval()
    tlin.eval()
    fl = nn.utils.fuse_linear_bn_eval(lin, bn1)
    tfl = torch.nn.utils.fuse_linear_bn_eval(tlin, tbn1)
    x = tape.randn(5, 4)
    _close(fl(x), bn1(lin(x)), 1e-5)
    _close(fl.weight, tfl.weight)
    _close(fl.bias, tfl.bias)
    w, b = nn.utils.fuse_linear_bn_weights(lin.weight, None, bn1.running_mean,
                                           bn1.running_var, bn1.eps, bn1.weight, bn1.bias)
    tw, tb = torch.nn.utils.fuse_linear_bn_weights(tlin.weight, None, tbn1.running_mean,
                                                   tbn1.running_var, tbn1.eps, tbn1.weight,
                                                   tbn1.bias)
    _close(w, tw)
    _close(b, tb)
    assert b.requires_grad == tb.requires_grad
    with pytest.raises(AssertionError, match='To fuse, linear.out_features == bn.num_features'):
        nn.utils.fuse_linear_bn_eval(nn.Linear(4, 2).eval(), bn1)


# -- small helpers ------------------------------------------------------------------------
def test_helpers():
    tape.manual_seed(0)
    a = tape.rand(3)
    tape.manual_seed(0)
    m = nn.utils.skip_init(nn.Linear, 5, 2)
    assert m.weight.shape == (2, 5) and isinstance(m.weight, nn.Parameter)
    np.testing.assert_array_equal(_np(tape.rand(3)), _np(a))      # no RNG drawn
    with pytest.raises(RuntimeError, match='Expected a Module'):
        nn.utils.skip_init(int)
    assert nn.utils.convert_conv2d_weight_memory_format(m, tape.channels_last) is m \
        if hasattr(tape, 'channels_last') else True
    assert nn.utils.convert_conv3d_weight_memory_format(m, None) is m
    assert nn.utils.convert_parameters.parameters_to_vector is nn.utils.parameters_to_vector
    assert nn.utils.clip_grad.clip_grad_norm_ is nn.utils.clip_grad_norm_
    p = tape.tensor([3.0, 4.0], requires_grad=True)
    p.grad = tape.tensor([3.0, 4.0])
    with pytest.warns(FutureWarning, match='clip_grad_norm_'):
        n = nn.utils.clip_grad_norm(p, 1.0)
    assert abs(n.item() - 5) < 1e-6
    lin = nn.Linear(2, 2)
    x = tape.randn(3, 2)
    with pytest.warns(FutureWarning, match='torch.func.functional_call'):
        out = nn.utils.stateless.functional_call(lin, {'weight': tape.zeros(2, 2),
                                                       'bias': tape.ones(2)}, (x,))
    np.testing.assert_array_equal(_np(out), np.ones((3, 2), np.float32))
    names = [n for n in dir(torch.nn.utils) if not n.startswith('_')]
    assert [n for n in names if not hasattr(nn.utils, n)] == []
    assert sorted(nn.utils.__all__) == sorted(torch.nn.utils.__all__)
