"""Printing and conversion parity hunt (8), each fix checked against PyTorch:

- ``set_printoptions(edgeitems=0)``: every non-empty tensor gets a ``size=`` suffix and a
  summarised one prints ``[...]`` (tape printed all of a 1-D tensor after ' ...' and
  raised ValueError for a summarised 2-D one).
- ``np.array(t)`` (NumPy's ``copy=True`` to ``__array__``) copies: it shared the memory.
- ``float(t)`` of a tensor requiring grad (grad mode on) gives PyTorch's once-a-process
  UserWarning "Converting a tensor with requires_grad=True to a scalar ...".
- ``tensor(t)`` and ``x.new_tensor(t)`` of a tensor give PyTorch's "To copy construct
  from a tensor ..." UserWarning (``as_tensor``, ``asarray`` and ``new`` do not).
- ``tensor()`` of a ragged or non-numeric nested list raises PyTorch's errors
  ("expected sequence of length 2 at dim 1 (got 1)", "not a sequence", "Could not
  infer dtype of NoneType", "too many dimensions 'str'", ...), not NumPy's.
- ``tensor([t0, t1])`` takes each tensor as one number keeping its dtype
  (``[tensor(1., dtype=float64), 2.]`` is float64; a one-element tensor of any shape
  counts, a longer one raises PyTorch's ValueError).
- ``tensor()``/``as_tensor()`` of a NumPy array (or scalar) of str, object, datetime or
  longdouble dtype raise PyTorch's "can't convert np.ndarray of type ..." TypeError
  (tape made a tensor of strings or objects); ``tensor(b'ab')`` raises its TypeError.
- ``element in t`` for shapes that do not broadcast raises RuntimeError (was NumPy's
  ValueError).
"""
import warnings

import numpy as np
import pytest

import tape


def _pair(fn):
    """``fn(lib)``'s result or (exception type, message) for tape and torch."""
    torch = pytest.importorskip('torch')
    out = []
    for lib in (tape, torch):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                out.append(fn(lib))
        except Exception as e:  # noqa: BLE001  (compared below)
            out.append((type(e), str(e)))
    return out


def _printed(fn, **opts):
    torch = pytest.importorskip('torch')
    out = []
    for lib in (tape, torch):
        lib.set_printoptions(**opts)
        try:
            out.append(repr(fn(lib)).replace('torch.', 'tape.'))
        finally:
            lib.set_printoptions(profile='default')
    return out


# ------------------------------------------------------------- edgeitems=0
@pytest.mark.parametrize('fn', [
    lambda L: L.tensor([1., 2.]),
    lambda L: L.tensor(1.5),
    lambda L: L.tensor([]),
    lambda L: L.arange(100.) / 3,
    lambda L: L.arange(100, dtype=L.int32),
    lambda L: L.arange(10.).reshape(2, 5),
    lambda L: L.arange(24.).reshape(2, 3, 4),
    lambda L: L.arange(100., requires_grad=True) * 3,
])
def test_edgeitems_zero_prints_as_torch(fn):
    ours, theirs = _printed(fn, edgeitems=0, threshold=5)
    assert ours == theirs


def test_edgeitems_zero_restored_by_default_profile():
    ours, theirs = _printed(lambda L: L.arange(10.), edgeitems=0, threshold=5)
    assert ours == theirs == 'tensor([...], size=(10,))'
    assert repr(tape.arange(3.)) == 'tensor([0., 1., 2.])'


# ------------------------------------------------------------- np.array copies
def test_np_array_copies_and_asarray_shares():
    torch = pytest.importorskip('torch')
    for lib in (tape, torch):
        t = lib.tensor([1., 2.])
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')     # (torch's __array__ has no copy=)
            a = np.array(t)
        a[0] = 5
        assert t.tolist() == [1., 2.]
        b = np.asarray(t)
        b[0] = 7
        assert t.tolist() == [7., 2.]
    # an explicit dtype still converts
    assert np.array(tape.tensor([1, 2]), dtype=np.float32).dtype == np.float32


# ------------------------------------------------------------- warnings
def test_float_of_requires_grad_tensor_warns_once(monkeypatch):
    from tape import _tensor
    monkeypatch.setattr(_tensor, '_FLOAT_WARNED', [])
    t = tape.tensor([1.5], requires_grad=True)
    with tape.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('error')
        assert float(t) == 1.5                  # not under no_grad
        assert int(t) == 1 and t.item() == 1.5  # not for int() or item()
    with pytest.warns(UserWarning, match=r'Converting a tensor with requires_grad=True to a '
                      r'scalar may lead to unexpected behavior.\nConsider using '
                      r'tensor.detach\(\) first.'):
        assert float(t * 2) == 3.0
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        float(t)                                # once a process, as PyTorch's


@pytest.mark.parametrize('make, name', [
    (lambda L, t: L.tensor(t), 'torch.tensor'),
    (lambda L, t: L.tensor(t, dtype=L.float64, requires_grad=True), 'torch.tensor'),
    (lambda L, t: t.new_tensor(t), 'tensor.new_tensor'),
])
def test_copy_construct_warning(make, name):
    torch = pytest.importorskip('torch')
    msgs = []
    for lib in (tape, torch):
        t = lib.tensor([1., 2.])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            out = make(lib, t)
        msgs.append([str(x.message) for x in w])
        assert out.tolist() == [1., 2.]
    assert msgs[0] == msgs[1]
    assert msgs[0] == ['To copy construct from a tensor, it is recommended to use '
                       'sourceTensor.detach().clone() or sourceTensor.detach().clone()'
                       f'.requires_grad_(True), rather than {name}(sourceTensor).']


@pytest.mark.parametrize('make', [
    lambda L, t: L.as_tensor(t),
    lambda L, t: L.as_tensor(t, dtype=L.float64),
    lambda L, t: L.asarray(t),
    lambda L, t: t.new(t),
    lambda L, t: L.tensor([t[0], t[1]]),
])
def test_no_copy_construct_warning(make):
    torch = pytest.importorskip('torch')
    for lib in (tape, torch):
        t = lib.tensor([1., 2.])
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            assert make(lib, t).tolist() == [1., 2.]


# ------------------------------------------------------------- tensor() errors
@pytest.mark.parametrize('data', [
    [[1, 2], [3]], [[1, 2], (3, 4, 5)], [[[1, 2], [3, 4]], [[1, 2], [3]]], [[1], []],
    [[1, 2], 3.5], [1, [2, 3]], [1., [2, 3]], [True, [1]], [[1, 2], [3, [4]]],
    [1, 'a'], ['a', 1], [[1, 2], 'ab'], 'abc', None, [None], [1, None], [1, 'a', None],
    [1, None, 'a'], [[1, 2], [3, None]], [1.5, {}], {1, 2},
])
def test_bad_data_errors_match_torch(data):
    ours, theirs = _pair(lambda L: L.tensor(data))
    assert isinstance(theirs, tuple) and ours == theirs


@pytest.mark.parametrize('data, dtype', [
    ([[1, 2], [3]], 'float64'), ([[1, 2], [3, [4]]], 'float64'),
    ([[1, 2], [3, [4]]], 'int32'),
])
def test_bad_data_errors_with_dtype_match_torch(data, dtype):
    ours, theirs = _pair(lambda L: L.tensor(data, dtype=getattr(L, dtype)))
    assert isinstance(theirs, tuple) and ours == theirs


def test_good_data_still_converts():
    # (the error paths only run when NumPy refuses the data)
    assert tape.tensor([(1, 2), [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match='Overflow when unpacking long long'):
        tape.tensor([[1], [2 ** 70]])


@pytest.mark.parametrize('make', [
    lambda: np.array(['a']), lambda: np.array([1, None], dtype=object),
    lambda: np.datetime64('2020'), lambda: np.array([np.timedelta64(1)]),
    lambda: np.array([1., 2.], dtype=np.longdouble),
    lambda: np.array([(1,)], dtype=[('a', np.int64)]),
])
@pytest.mark.parametrize('ctor', ['tensor', 'as_tensor'])
def test_tensor_of_non_numeric_array_raises(make, ctor):
    ours, theirs = _pair(lambda L: getattr(L, ctor)(make()))
    assert ours[0] is theirs[0] is TypeError
    # (tape's list of dtypes has no complex ones)
    assert ours[1] == theirs[1].replace('complex64, complex128, ', '')


def test_tensor_of_bytes_raises_type_error():
    for data in (b'ab', [b'ab'], [1, b'a']):
        ours, theirs = _pair(lambda L: L.tensor(data))
        assert ours == theirs == (TypeError, "new(): invalid data type 'bytes'")


# ------------------------------------------------------------- lists of tensors
@pytest.mark.parametrize('fn', [
    lambda L: L.tensor([L.tensor(1., dtype=L.float64), 2.]),
    lambda L: L.tensor([L.tensor(1., dtype=L.float64), L.tensor(2.)]),
    lambda L: L.tensor([L.tensor(1, dtype=L.int32), L.tensor(2, dtype=L.int8)]),
    lambda L: L.tensor([L.tensor(1, dtype=L.int32), 2]),
    lambda L: L.tensor([L.tensor(1., dtype=L.float16), 2.]),
    lambda L: L.tensor([L.tensor(True), L.tensor(False)]),
    lambda L: L.tensor([L.tensor(True), 2]),
    lambda L: L.tensor([L.tensor(1, dtype=L.uint8), -1]),
    lambda L: L.tensor([L.tensor([1.]), L.tensor([2.])]),
    lambda L: L.tensor([L.tensor([[1.]]), 2.]),
    lambda L: L.tensor([[L.tensor(1.)], [L.tensor(2.)]]),
    lambda L: L.tensor([L.tensor([1., 2.]), L.tensor([3., 4.])]),
    lambda L: L.as_tensor([L.tensor(1., dtype=L.float64), 2.]),
])
def test_list_of_tensors_matches_torch(fn):
    ours, theirs = _pair(lambda L: repr(fn(L)).replace('torch.', 'tape.'))
    assert ours == theirs


# ------------------------------------------------------------- in
def test_contains_shape_mismatch_raises_runtime_error():
    with pytest.raises(RuntimeError, match=r'The size of tensor a \(2\) must match the size '
                       r'of tensor b \(3\) at non-singleton dimension 0'):
        tape.tensor([2, 5]) in tape.arange(3)
    assert tape.tensor([[2]]) in tape.arange(3)
    assert tape.tensor([7, 1, 9]) in tape.arange(3)     # (element-wise, as torch)
    assert 5 not in tape.arange(3)
