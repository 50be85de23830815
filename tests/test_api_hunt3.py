"""Tensor API details a differential hunt against PyTorch 2.13 found differing:
each test states PyTorch's behaviour (checked against torch when installed)."""
import numpy as np
import pytest

import tape


def test_view_dtype_reinterprets_the_bits():
    x = tape.tensor([1., 2.])
    v = x.view(tape.int32)
    assert v.dtype == tape.int32 and v.tolist() == [1065353216, 1073741824]
    assert tape.tensor([1., 2.], dtype=tape.float64).view(tape.int32).tolist() == \
        [0, 1072693248, 0, 1073741824]
    assert x.view(tape.float64).shape == (1,)          # the last dim scales
    assert tape.ones(4, 6)[:, :2].view(tape.float64).shape == (4, 1)
    # shares storage (and the version counter) with x
    y = tape.zeros(4)
    y.view(tape.int32)[0] = 1065353216
    assert y.tolist() == [1., 0., 0., 0.]
    # not differentiable, as PyTorch's
    assert not tape.ones(4, requires_grad=True).view(tape.float64).requires_grad
    assert tape.ones(2, 3).view(tape.tensor(6)).shape == (6,)     # a 0-d tensor is a size


@pytest.mark.parametrize('make,match', [
    (lambda: tape.ones(2, 2).t().view(tape.float64), 'stride.-1. must be 1'),
    (lambda: tape.ones(3).view(tape.float64), 'divisible by 2'),
    (lambda: tape.tensor(1.).view(tape.float64), 'dim.. cannot be 0'),
])
def test_view_dtype_errors(make, match):
    with pytest.raises(RuntimeError, match=match):
        make()


def test_clamp_promotes_with_either_bound():
    x = tape.tensor([1, 5])
    for y in (tape.clamp(x, 0, 2.5), x.clip(0, 2.5), x.clamp(min=0, max=2.5), x.clamp(max=2.5)):
        assert y.dtype == tape.float32 and y.tolist() == [1.0, 2.5]
    assert x.clamp(0, 3).dtype == tape.int64
    with pytest.raises(RuntimeError):
        x.clamp_(0, 2.5)          # a float result cannot be written into an int tensor


def test_arange_takes_tensors_and_end_alone():
    assert tape.arange(tape.tensor(3)).dtype == tape.int64
    assert tape.arange(tape.tensor(3)).tolist() == [0, 1, 2]
    assert tape.arange(tape.tensor(3.)).dtype == tape.float32
    assert tape.arange(0, tape.tensor(4), 2).tolist() == [0, 2]
    assert tape.arange(end=4).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize('mode', ['floor', 'trunc'])
def test_div_rounding_keeps_integer_dtypes(mode):
    x = tape.tensor([3, -4])
    y = x.div(2, rounding_mode=mode)
    want = [1, -2]
    assert y.dtype == tape.int64 and y.tolist() == want
    assert tape.div(x, 2, rounding_mode=mode).tolist() == want
    assert tape.tensor([3, 4], dtype=tape.int32).div(2, rounding_mode=mode).dtype == tape.int32
    with pytest.raises(RuntimeError, match='ZeroDivisionError'):
        x.div(0, rounding_mode=mode)
    assert tape.tensor([3., 4.]).div(0, rounding_mode=mode).tolist() == [np.inf, np.inf]
    f = tape.tensor([3., -4.], requires_grad=True)
    assert f.div(2, rounding_mode=mode).requires_grad


def test_default_dtype_is_a_float_and_reaches_the_legacy_constructor():
    with pytest.raises(TypeError, match='floating-point'):
        tape.set_default_dtype(tape.int64)
    assert tape.get_default_dtype() == tape.float32
    tape.set_default_dtype(tape.float64)
    try:
        assert tape.Tensor([1]).dtype == tape.float64
        assert tape.Tensor(2, 3).dtype == tape.float64
    finally:
        tape.set_default_dtype(tape.float32)
    assert tape.Tensor([1]).dtype == tape.float32


def test_size_slices_and_sums_are_sizes():
    s = tape.ones(2, 3, 4).shape
    for v, want in ((s[1:], (3, 4)), (s + (1,), (2, 3, 4, 1)), ((1,) + s, (1, 2, 3, 4)),
                    (s * 2, (2, 3, 4) * 2), (2 * s, (2, 3, 4) * 2), (s[::-1], (4, 3, 2))):
        assert type(v) is tape.Size and v == want
    assert type(s[0]) is int and repr(s[1:]) == 'tape.Size([3, 4])'


def test_detach_in_place_on_a_leaf_stops_requiring_grad():
    x = tape.ones(2, requires_grad=True)
    assert x.detach_() is x and not x.requires_grad


def test_random_floats_only():
    for make in (lambda: tape.rand(2, dtype=tape.int64), lambda: tape.randn(2, dtype=tape.int64),
                 lambda: tape.rand_like(tape.tensor([1, 2]))):
        with pytest.raises(NotImplementedError, match='not implemented for'):
            make()
    assert tape.rand(2, dtype=tape.float64).dtype == tape.float64


def test_set_grad_enabled_takes_a_bool_and_sets_its_mode_when_entered():
    for bad in ('yes', 0, None):
        with pytest.raises(TypeError, match='must be bool'):
            tape.set_grad_enabled(bad)
    assert tape.is_grad_enabled()
    ctx = tape.set_grad_enabled(False)
    tape.set_grad_enabled(True)
    with ctx:
        assert not tape.is_grad_enabled()
    assert tape.is_grad_enabled()


def test_bool_subtraction_raises():
    b = tape.tensor([True, False])
    for make in (lambda: 1 - b, lambda: b - 1, lambda: b - b, lambda: b - 1.5,
                 lambda: tape.tensor([1, 2]) - b, lambda: tape.sub(b, 1)):
        with pytest.raises(RuntimeError, match='Subtraction, the `-` operator, with'):
            make()
    assert (b + 1).tolist() == [2, 1]


def test_against_pytorch():
    torch = pytest.importorskip('torch')
    pairs = [
        (lambda L: L.tensor([1., 2.]).view(L.int32), None),
        (lambda L: L.clamp(L.tensor([1, 5]), 0, 2.5), None),
        (lambda L: L.arange(L.tensor(3)), None),
        (lambda L: L.tensor([3, -4]).div(2, rounding_mode='floor'), None),
        (lambda L: L.tensor([3, -4]).div(2, rounding_mode='trunc'), None),
    ]
    for make, _ in pairs:
        a, t = make(tape), make(torch)
        assert a.tolist() == t.tolist()
        assert str(a.dtype).split('.')[-1] == str(t.dtype).split('.')[-1]
    assert list(tape.ones(2, 3, 4).shape[1:]) == list(torch.ones(2, 3, 4).shape[1:])
    x, xt = tape.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    assert x.detach_().requires_grad == xt.detach_().requires_grad


def test_python_ints_past_int64_raise():
    for data in (2 ** 63, [2 ** 64], 2 ** 70):
        with pytest.raises(ValueError, match='Overflow'):
            tape.tensor(data)
    assert tape.tensor(2 ** 63 - 1).item() == 2 ** 63 - 1


def test_inference_mode_wins_over_enable_grad():
    x = tape.ones(2, requires_grad=True)
    with tape.inference_mode():
        with tape.enable_grad():
            y = x * 2
        with tape.set_grad_enabled(True):
            z = x * 2
    assert not y.requires_grad and not z.requires_grad
    with tape.no_grad():
        with tape.enable_grad():
            assert (x * 2).requires_grad
    with tape.inference_mode(), tape.inference_mode(False), tape.enable_grad():
        assert (x * 2).requires_grad
    assert tape.is_grad_enabled()
