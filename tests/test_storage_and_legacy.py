"""Storages (tape/_storage.py), ``Tensor.new``, ``torch.qr``, the cholesky
methods and ``tape.vmap``."""
import warnings

import numpy as np
import pytest

import tape


def test_views_share_their_bases_storage_and_copies_do_not():
    x = tape.arange(6.0)
    s = x.untyped_storage()
    assert s.data_ptr() == x.data_ptr() and s.nbytes() == 24 and len(s) == 24
    for view in (x[2:], x.view(2, 3).t(), x.reshape(3, 2)[1]):
        assert view.untyped_storage().data_ptr() == x.data_ptr()
        assert view.untyped_storage().nbytes() == 24
    assert x.clone().untyped_storage().data_ptr() != x.data_ptr()
    assert s[4:8] == list(np.float32(1.0).tobytes())


def test_typed_storage_warns_as_pytorch_and_lists_elements():
    x = tape.arange(6.0)
    with pytest.warns(UserWarning, match='TypedStorage is deprecated'):
        ts = x[2:].storage()
    assert ts.size() == len(ts) == 6 and ts.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert ts.dtype == tape.float32 and ts.element_size() == 4 and ts.nbytes() == 24
    assert ts[1] == 1.0 and ts.data_ptr() == x.data_ptr()


def test_storage_matches_torch():
    torch = pytest.importorskip('torch')
    v = np.arange(12, dtype=np.float64)
    for lib in (tape, torch):
        x = lib.tensor(v)
        y = x.view(3, 4)[1:, 2:]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            got = (y.untyped_storage().nbytes(), y.untyped_storage().data_ptr() == x.data_ptr(),
                   y.storage().tolist(), y.storage_offset())
        if lib is tape:
            mine = got
    assert mine == got


def test_legacy_new_keeps_the_dtype():
    x = tape.ones(2, dtype=tape.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == tape.float64
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new([1, 2]).dtype == tape.float64
    assert x.new(tape.Size([4])).shape == (4,) and x.new().shape == (0,)
    with pytest.raises(TypeError, match='expected float64 tensor'):
        x.new(tape.ones(2))
    with pytest.raises(TypeError, match="argument 'size' must be tuple of ints"):
        x.new(2, 1.5)


def test_qr_and_cholesky_methods_match_torch():
    torch = pytest.importorskip('torch')
    A = np.random.default_rng(0).standard_normal((4, 3))
    Lv = np.array([[2.0, 0.0], [1.0, 3.0]])
    res = []
    for lib in (tape, torch):
        a = lib.tensor(A, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            q, r = a.qr()
            qc = lib.qr(a, some=False).Q
        (q.sum() + r.sum()).backward()
        L = lib.tensor(Lv, requires_grad=True)
        b = lib.tensor(np.array([[1.0], [2.0]]))
        sol = b.cholesky_solve(L)
        inv = L.cholesky_inverse()
        (sol.sum() + inv.sum()).backward()
        res.append([t.detach().numpy() for t in (q, r, a.grad, sol, inv, L.grad)] + [qc.shape])
    for g, w in zip(*res):
        if isinstance(g, np.ndarray):
            np.testing.assert_allclose(g, w, atol=1e-10)
        else:
            assert tuple(g) == tuple(w)


def test_vmap_is_func_vmap():
    assert tape.vmap is tape.func.vmap
    assert tape.vmap(lambda v: v * 2)(tape.ones(3, 2)).shape == (3, 2)


def test_base_names_the_root_of_a_view_chain_as_torch():
    torch = pytest.importorskip('torch')

    def bases(lib):
        x0 = lib.arange(12.0)
        x = x0.reshape(3, 4)
        views = {'view': x0.view(3, 4), 'slice': x0[2:], 't': x.t(), 'select': x[1],
                 'permute': x.permute(1, 0), 'unsqueeze': x0.unsqueeze(0),
                 'narrow': x0.narrow(0, 1, 3), 'split': x0.split(4)[0], 'diag': x.diagonal(),
                 'detach': x0.detach(), 'clone': x0.clone(), 'index': x0[[1, 2]], 'self': x0}
        return {k: None if v._base is None else 'x0' if v._base is x0 else 'other'
                for k, v in views.items()}
    assert bases(tape) == bases(torch)


def test_comparison_operators_with_other_objects_as_torch():
    torch = pytest.importorskip('torch')

    def outcomes(lib):
        t = lib.tensor([1, 2])
        res = []
        for o in ([1, 2], (1, 2), 'a', None, 1, np.float64(1.0), lib.tensor([1, 1])):
            for op in ('__eq__', '__ne__', '__lt__', '__ge__'):
                try:
                    r = {'==': t == o, '!=': t != o, '<': t < o, '>=': t >= o}[
                        {'__eq__': '==', '__ne__': '!=', '__lt__': '<', '__ge__': '>='}[op]]
                    res.append(r if isinstance(r, bool) else r.tolist())
                except TypeError:
                    res.append('TypeError')
        return res
    assert outcomes(tape) == outcomes(torch)


def test_from_numpy_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match='At least one stride in the given numpy array is '
                       'negative'):
        tape.from_numpy(np.arange(6.0)[::-1])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.str_"):
        tape.from_numpy(np.array(['a']))
    a = np.ones((2, 3))[:, ::2]                 # positive strides: shared, not copied
    t = tape.from_numpy(a)
    a[0, 0] = 5.0
    assert t[0, 0].item() == 5.0
