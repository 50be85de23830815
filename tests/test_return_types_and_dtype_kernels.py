"""Return types, ``*_like`` layouts and bool kernels, as PyTorch has them.

* Ops that return named tuples (``max(dim)``, ``sort``, ``topk``, ``aminmax``,
  ``linalg.qr``, ``frexp``...) return ``tape.return_types.<op>`` types: named
  like the op, printed one field a line, picklable.
* ``zeros_like``/``ones_like``/``empty_like``/``full_like``/``rand_like``/
  ``randn_like`` keep a transposed or permuted input's strides
  (preserve_format) and take ``memory_format``.
* ``abs``, ``floor``, ``ceil``, ``trunc``, ``round`` of a bool tensor raise
  NotImplementedError and ``argmax``/``argmin`` of one RuntimeError, as
  PyTorch's, where NumPy would return bools or indices.
"""
import pickle

import numpy as np
import pytest

import tape


def _both(fn):
    torch = pytest.importorskip('torch')
    return fn(torch), fn(tape)


_RETURNING = {
    'max': lambda L: L.max(L.tensor([[1., 3., 2.]]), 1),
    'min': lambda L: L.tensor([[1., 3., 2.]]).min(dim=1, keepdim=True),
    'sort': lambda L: L.sort(L.tensor([3., 1., 2.])),
    'topk': lambda L: L.topk(L.tensor([3., 1., 2.]), 2),
    'kthvalue': lambda L: L.kthvalue(L.tensor([3., 1., 2.]), 2),
    'median': lambda L: L.median(L.tensor([[3., 1., 2.]]), 1),
    'mode': lambda L: L.mode(L.tensor([1., 1., 2.])),
    'cummax': lambda L: L.cummax(L.tensor([1., 3., 2.]), 0),
    'cummin': lambda L: L.cummin(L.tensor([1., 3., 2.]), 0),
    'aminmax': lambda L: L.aminmax(L.tensor([1., 3., 2.])),
    'frexp': lambda L: L.frexp(L.tensor([1., 3., 2.])),
    'linalg_qr': lambda L: L.linalg.qr(L.tensor([[2., 1.], [1., 3.]], dtype=L.float64)),
    'linalg_slogdet': lambda L: L.linalg.slogdet(L.tensor([[2., 1.], [1., 3.]],
                                                          dtype=L.float64)),
}


@pytest.mark.parametrize('name', sorted(_RETURNING))
def test_return_type_name_fields_and_repr_match_torch(name):
    ours, theirs = _both(_RETURNING[name])[::-1]
    assert type(ours).__name__ == type(theirs).__name__ == name
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a.numpy(), float), np.asarray(b.numpy(), float),
                                   atol=1e-6)
    assert repr(ours).replace('tape.', 'torch.') == repr(theirs)
    assert str(ours) == repr(ours)


def test_return_types_fields_pickle_and_grad():
    x = tape.tensor([[1., 3., 2.]], requires_grad=True)
    r = tape.max(x, 1)
    assert r.values is r[0] and r.indices is r[1]
    assert r._fields == ('values', 'indices')
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is type(r) and back.indices.tolist() == [1]
    r.values.sum().backward()
    assert x.grad.tolist() == [[0., 1., 0.]]
    assert type(r) is tape.return_types.max
    lo, hi = tape.aminmax(tape.tensor([4., -1.]))
    assert (lo.item(), hi.item()) == (-1.0, 4.0)
    with pytest.raises(TypeError, match='fields'):
        tape.return_types.make('max', ('a', 'b'))


_LIKES = ['zeros_like', 'ones_like', 'empty_like', 'rand_like', 'randn_like']
_INPUTS = {
    'transposed': lambda L: L.ones(2, 3).t(),
    'permuted': lambda L: L.ones(2, 3, 4).permute(2, 0, 1),
    'sliced': lambda L: L.ones(2, 6)[:, ::2],
    'expanded': lambda L: L.ones(2, 3).expand(4, 2, 3),
    'contiguous': lambda L: L.ones(2, 3),
}


@pytest.mark.parametrize('inp', sorted(_INPUTS))
@pytest.mark.parametrize('fn', _LIKES + ['full_like'])
def test_like_keeps_layout_as_torch(fn, inp):
    def run(L):
        x = _INPUTS[inp](L)
        args = (x, 2.5) if fn == 'full_like' else (x,)
        out = getattr(L, fn)(*args)
        cont = getattr(L, fn)(*args, memory_format=L.contiguous_format)
        return tuple(out.shape), out.stride(), cont.stride(), str(out.dtype).split('.')[-1]
    theirs, ours = _both(run)
    assert ours == theirs


def test_like_values_dtype_and_requires_grad():
    x = tape.arange(6.).reshape(2, 3).t()
    z = tape.full_like(x, 7., requires_grad=True)
    assert z.stride() == (1, 3) and z.requires_grad and z.is_leaf
    assert (z.detach().numpy() == 7).all()
    o = tape.ones_like(x, dtype=tape.int32)
    assert o.dtype == tape.int32 and o.stride() == (1, 3) and o.sum().item() == 6
    with pytest.raises(RuntimeError, match='floating point'):
        tape.zeros_like(tape.ones(2, dtype=tape.int64), requires_grad=True)
    (z * x).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), x.numpy())


@pytest.mark.parametrize('op', ['abs', 'floor', 'ceil', 'trunc', 'round'])
def test_bool_rounding_and_abs_raise_as_torch(op):
    torch = pytest.importorskip('torch')
    with pytest.raises(NotImplementedError) as theirs:
        getattr(torch, op)(torch.tensor([True, False]))
    with pytest.raises(NotImplementedError) as ours:
        getattr(tape, op)(tape.tensor([True, False]))
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(NotImplementedError):
        getattr(tape.tensor([True]), op)()
    # integer tensors keep working (and keep their dtype)
    assert getattr(tape, op)(tape.tensor([3, -2])).tolist() == \
        getattr(torch, op)(torch.tensor([3, -2])).tolist()


def test_round_decimals_of_integers_raises_as_torch():
    torch = pytest.importorskip('torch')
    for L in (torch, tape):
        with pytest.raises(NotImplementedError, match="round_cpu.*'Long'"):
            L.round(L.tensor([3, 4]), decimals=1)
    assert tape.round(tape.tensor([1.26]), decimals=1).tolist() == pytest.approx([1.3])


@pytest.mark.parametrize('op', ['argmax', 'argmin'])
def test_argmax_of_bool_raises_as_torch(op):
    torch = pytest.importorskip('torch')
    for L in (torch, tape):
        b = L.tensor([[True, False], [False, True]])
        with pytest.raises(RuntimeError, match=f'{op}\\(\\): does not support bool input'):
            getattr(L, op)(b)
        with pytest.raises(RuntimeError, match='bool'):
            getattr(b, op)(dim=1)
    assert getattr(tape, op)(tape.tensor([1, 5, 0])).item() == (1 if op == 'argmax' else 2)
