"""Names and keywords PyTorch code uses that tape lacked (thirteenth session's
probes): constants, ``tape.dtype``, NumPy's ``axis=``/``keepdims=``, the
legacy type names, ``div_(rounding_mode=)``, ``x.grad = x``,
``torch.autograd.grad_mode`` as a module, ``set_multithreading_enabled`` and
``Tensor._is_view``.  Each checks tape by hand; where torch is installed, the
same program runs on it too and must agree."""
import math

import numpy as np
import pytest

import tape


def _libs():
    libs = [tape]
    try:
        import torch
        libs.append(torch)
    except ImportError:
        pass
    return libs


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_constants(lib):
    assert lib.pi == math.pi and lib.e == math.e
    assert lib.inf == math.inf and math.isnan(lib.nan)
    x = lib.arange(3.0, dtype=lib.float64)
    assert tuple(x[:, lib.newaxis].shape) == (3, 1)
    assert (2 * lib.pi * x).tolist() == [0.0, 2 * math.pi, 4 * math.pi]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_dtype_class(lib):
    assert isinstance(lib.ones(1).dtype, lib.dtype)
    assert isinstance(lib.float64, lib.dtype)

    def cast(x, dt: lib.dtype):     # an annotation evaluated when the def runs
        return x.to(dt)
    assert cast(lib.ones(1), lib.float64).dtype == lib.float64


REDUCTIONS = [
    ('sum', {}), ('mean', {}), ('std', {}), ('var', {}), ('prod', {}), ('amax', {}),
    ('amin', {}), ('logsumexp', {}), ('nansum', {}), ('nanmean', {}),
]


@pytest.mark.parametrize('name,kw', REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_numpy_axis_and_keepdims(name, kw):
    x = tape.tensor(np.arange(1.0, 7.0).reshape(2, 3), dtype=tape.float64, requires_grad=True)
    by_dim = getattr(x, name)(dim=1, keepdim=True)
    by_axis = getattr(x, name)(axis=1, keepdims=True)
    assert by_axis.shape == by_dim.shape == (2, 1)
    np.testing.assert_array_equal(by_axis.detach().numpy(), by_dim.detach().numpy())
    fn = getattr(tape, name)(x, axis=0)
    np.testing.assert_array_equal(fn.detach().numpy(), getattr(x, name)(0).detach().numpy())
    by_axis.sum().backward()
    assert x.grad is not None and x.grad.shape == (2, 3)


def test_numpy_axis_on_dim_ops():
    x = tape.arange(6.0).reshape(2, 3)
    assert tape.cat([x, x], axis=0).shape == (4, 3)
    assert tape.stack([x, x], axis=1).shape == (2, 2, 3)
    assert x.unsqueeze(axis=0).shape == (1, 2, 3)
    assert x.unsqueeze(axis=0).squeeze(axis=0).shape == (2, 3)
    assert x.argmax(axis=1).tolist() == [2, 2]
    assert tape.max(x, axis=1).values.tolist() == [2.0, 5.0]
    assert x.cumsum(axis=1).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
    assert x.softmax(axis=1).shape == (2, 3)
    assert [t.tolist() for t in x.unbind(axis=1)] == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert x.sort(axis=1, descending=True).values[0].tolist() == [2.0, 1.0, 0.0]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_axis_and_dim_together_is_a_type_error(lib):
    with pytest.raises(TypeError):
        lib.ones(2, 2).sum(axis=0, dim=1)


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_legacy_type_names_are_torchs(lib):
    assert lib.ones(1).type() == 'torch.FloatTensor'
    assert lib.ones(1, dtype=lib.float64).type() == 'torch.DoubleTensor'
    assert lib.ones(1, dtype=lib.int64).type() == 'torch.LongTensor'
    assert lib.ones(1).type('torch.DoubleTensor').dtype == lib.float64


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_inplace_div_rounding_mode(lib):
    x = lib.tensor([5.0, -5.0])
    assert x.div_(2, rounding_mode='floor') is x
    assert x.tolist() == [2.0, -3.0]
    x.divide_(2, rounding_mode='trunc')
    assert x.tolist() == [1.0, -1.0]
    i = lib.tensor([5, -5])
    i.div_(2, rounding_mode='floor')
    assert i.tolist() == [2, -3] and i.dtype == lib.int64
    x = lib.tensor([5.0, -5.0])
    x /= 2
    assert x.tolist() == [2.5, -2.5]
    w = lib.tensor([3.0, 7.0], requires_grad=True)
    y = w * 1
    y.div_(2, rounding_mode='floor')
    assert y.tolist() == [1.0, 3.0]
    y.sum().backward()
    assert w.grad.tolist() == [0.0, 0.0]     # rounding has a zero gradient


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_grad_cannot_be_the_tensor_itself(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="can't assign Variable as its own grad"):
        x.grad = x
    assert x.grad is None
    (x * 3).sum().backward()
    assert x.tolist() == [1.0, 2.0] and x.grad.tolist() == [3.0, 3.0]


def test_autograd_grad_mode_module():
    from tape.autograd.grad_mode import enable_grad, no_grad, set_grad_enabled
    assert no_grad is tape.no_grad and enable_grad is tape.enable_grad
    assert set_grad_enabled is tape.set_grad_enabled
    x = tape.ones(2, requires_grad=True)
    with no_grad():
        assert not (x * 2).requires_grad


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_set_multithreading_enabled(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with lib.autograd.set_multithreading_enabled(False):
        (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_is_view(lib):
    x = lib.ones(4)
    assert not x._is_view()
    assert x[1:]._is_view() and x.view(2, 2)._is_view()
    assert not (x + 1)._is_view()


_NO_GRAD_VIEW = 'was created in no_grad mode and is being modified inplace with grad mode enabled'


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
@pytest.mark.parametrize('change', ['mul_', 'setitem', 'zero_', 'copy_', 'view_of_view'])
def test_inplace_on_a_view_made_under_no_grad(lib, change):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    with lib.no_grad():
        w = y[1:]
    if change == 'view_of_view':
        w = w[1:]
    do = {'mul_': lambda: w.mul_(2), 'setitem': lambda: w.__setitem__(0, 5.0),
          'zero_': lambda: w.zero_(), 'copy_': lambda: w.copy_(lib.ones(w.shape)),
          'view_of_view': lambda: w.add_(1)}[change]
    with pytest.raises(RuntimeError, match=_NO_GRAD_VIEW):
        do()
    assert y.tolist() == [1.0, 2.0, 3.0]        # nothing changed
    with lib.no_grad():
        do()                                    # inside no_grad it is allowed
    assert y.tolist() != [1.0, 2.0, 3.0]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_no_grad_views_that_stay_allowed(lib):
    p = lib.ones(3, requires_grad=True)
    with lib.no_grad():                 # an optimizer-style update through views
        p[1:].mul_(2)
        p[0] = 5.0
        p.view(3).add_(1)
    assert p.tolist() == [6.0, 3.0, 3.0]
    c = lib.ones(3)
    with lib.no_grad():
        v = c[1:]
    v.mul_(2)                           # its base does not require grad
    assert c.tolist() == [1.0, 2.0, 2.0]
    c.requires_grad_()                  # ... but once it does, PyTorch refuses
    with pytest.raises(RuntimeError, match=_NO_GRAD_VIEW):
        v.mul_(2)
    y = p * 1
    u = y[1:]                           # made while recording: tracked as usual
    u.mul_(2)
    y.sum().backward()
    assert p.grad.tolist() == [1.0, 2.0, 2.0]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_non_reentrant_checkpoint_outputs_off_the_graph(lib):
    from importlib import import_module
    checkpoint = import_module(lib.__name__ + '.utils.checkpoint').checkpoint
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    a, b, c = checkpoint(lambda t: ((t * 2).detach(), t * w, lib.ones(2)), x,
                         use_reentrant=False)
    assert [t.requires_grad for t in (a, b, c)] == [False, True, False]
    assert a.grad_fn is None and c.grad_fn is None
    (b.sum() * 2).backward()
    assert x.grad.tolist() == [6.0, 8.0] and w.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_method_keyword_names(lib):
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64, requires_grad=True)
    assert x.flip(dims=(0,)).tolist() == [[3.0, 4.0], [1.0, 2.0]]
    assert x.permute(dims=(1, 0)).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert tuple(x.reshape(shape=(4,)).shape) == (4,)
    assert tuple(x[:1].expand(size=(3, 2)).shape) == (3, 2)
    assert tuple(x.repeat(repeats=(2, 1)).shape) == (4, 2)
    assert tuple(x.tile(dims=(2,)).shape) == (2, 4)
    assert tuple(x.new_zeros(size=(3,)).shape) == (3,)
    assert x.new_full(size=(2,), fill_value=3.0).tolist() == [3.0, 3.0]
    assert [t.tolist() for t in x.split(split_size=1)] == [[[1.0, 2.0]], [[3.0, 4.0]]]
    assert x.pow(exponent=2).tolist() == [[1.0, 4.0], [9.0, 16.0]]
    assert x.eq(other=x).all().item() and x.allclose(other=x)
    assert x.maximum(other=x.flip(0)).tolist() == [[3.0, 4.0], [3.0, 4.0]]
    assert x.detach().view(dtype=lib.int64).dtype == lib.int64
    (x.flip(dims=(1,)) * x.pow(exponent=2)).sum().backward()
    # d/dx_ij of sum(x_i,1-j * x_ij ** 2): 2 x_ij x_i,1-j + x_i,1-j ** 2
    assert x.grad.tolist() == [[8.0, 5.0], [40.0, 33.0]]
    with pytest.raises(TypeError):
        x.flip((0,), dims=(0,))


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_number_remainder_by_an_integer_zero(lib):
    t = lib.tensor([0, 2])
    with pytest.raises(RuntimeError, match='ZeroDivisionError'):
        5 % t
    with pytest.raises(RuntimeError, match='ZeroDivisionError'):
        lib.remainder(5, t)
    assert (5 % lib.tensor([3, -2])).tolist() == [2, -1]
    r = 5 % lib.tensor([0.0, 2.0])           # a float divisor of zero gives NaN
    assert math.isnan(r[0].item()) and r[1].item() == 1.0


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_size_of_integer_tensors(lib):
    s = lib.Size([lib.tensor(2), np.int64(3), 4])
    assert s == (2, 3, 4) and type(s[0]) is int
    assert lib.zeros(s).shape == s
    with pytest.raises(TypeError):
        lib.Size([2.5])
    assert lib.Size() == () and isinstance(lib.ones(2, 3).shape[1:], lib.Size)


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_functions_take_input_by_keyword(lib):
    x = lib.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], dtype=lib.float64, requires_grad=True)
    assert lib.sum(input=x).item() == 21.0
    assert lib.cumsum(input=x, dim=1)[0].tolist() == [1.0, 6.0, 9.0]
    assert lib.amax(input=x, dim=0).tolist() == [4.0, 5.0, 6.0]
    assert lib.clamp(input=x, max=4.0)[1].tolist() == [4.0, 2.0, 4.0]
    assert tuple(lib.reshape(input=x, shape=(3, 2)).shape) == (3, 2)
    assert tuple(lib.permute(input=x, dims=(1, 0)).shape) == (3, 2)
    assert tuple(lib.transpose(input=x, dim0=0, dim1=1).shape) == (3, 2)
    assert lib.index_select(input=x, dim=1, index=lib.tensor([2])).tolist() == [[3.0], [6.0]]
    assert lib.zeros_like(input=x).sum().item() == 0.0
    assert lib.where(x > 3, x, 0.0)[0].tolist() == [0.0, 5.0, 0.0]   # (where's input is 2nd)
    (lib.std(input=x) + lib.flip(input=x, dims=(1,))[0, 0]).backward()
    assert x.grad[0, 2].item() != 0.0


@pytest.mark.parametrize('lib', _libs(), ids=lambda m: m.__name__)
def test_shift_dtypes(lib):
    u = lib.tensor([7, 250], dtype=lib.uint8)
    r = u << 1
    assert r.dtype == lib.uint8 and r.tolist() == [14, 244]        # wraps, as uint8
    assert (3 << lib.tensor([1], dtype=lib.int32)).dtype == lib.int32
    assert (lib.tensor(2) << lib.tensor([1], dtype=lib.int8)).dtype == lib.int8
    assert (lib.tensor([1], dtype=lib.int8) << lib.tensor([1])).dtype == lib.int64
    assert (lib.tensor([-8], dtype=lib.int16) >> 1).tolist() == [-4]
    assert (lib.tensor([True]) << 1).dtype == lib.int64
    with pytest.raises(NotImplementedError, match='lshift_cpu'):
        lib.tensor([1]) << 1.5
