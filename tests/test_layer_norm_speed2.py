"""F.layer_norm's one-record form after the speed work (float32 lanes in
compiler/norm_kernels.py, the checks cache in tape/nn/functional.py) against
PyTorch: row lengths around the kernels' 64-lane blocks and 16-block float64
flushes, multi-dim normalized_shape, weight / bias absent, float32 / float64,
non-contiguous input, inputs not needing grad, repeated calls through the
cache, and gradcheck / gradgradcheck in float64."""
import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")

LENGTHS = [1, 10, 63, 64, 65, 256, 1000, 1024 * 16 + 70]


def _run(lib, Fm, xn, ns, wn, bn, gn, eps=1e-5, need=(True, True, True), xt=None):
    x = lib.tensor(xn, requires_grad=need[0]) if xt is None else xt(lib, need[0])
    w = None if wn is None else lib.tensor(wn, requires_grad=need[1])
    b = None if bn is None else lib.tensor(bn, requires_grad=need[2])
    y = Fm.layer_norm(x, ns, w, b, eps)
    out = [y.detach().numpy()]
    if y.requires_grad:
        (y * lib.tensor(gn)).sum().backward()
        leaves = [x] if xt is None else []
        out += [None if p.grad is None else p.grad.numpy()
                for p in leaves + [p for p in (w, b) if p is not None]]
    return out


def _close(got, want, dtype, scale=1.0):
    tol = dict(rtol=2e-5, atol=5e-5 * scale) if dtype == np.float32 else \
        dict(rtol=1e-10, atol=1e-10 * scale)
    assert len(got) == len(want)
    for g, t in zip(got, want):
        if t is None:
            assert g is None
            continue
        assert g.dtype == t.dtype and g.shape == t.shape
        np.testing.assert_allclose(g, t, **tol)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('n', LENGTHS)
@pytest.mark.parametrize('hw,hb', [(False, False), (True, False), (False, True), (True, True)])
def test_row_lengths(dtype, n, hw, hb):
    rng = np.random.default_rng(n)
    m = 3 if n > 5000 else 37            # 37 rows: two float64 flushes of the weight sums and a rest
    xn = (rng.standard_normal((m, n)) * 2 + 0.5).astype(dtype)
    wn = rng.standard_normal(n).astype(dtype) if hw else None
    bn = rng.standard_normal(n).astype(dtype) if hb else None
    gn = rng.standard_normal((m, n)).astype(dtype)
    got = _run(tape, TF, xn, (n,), wn, bn, gn)
    want = _run(torch, torch.nn.functional, xn, (n,), wn, bn, gn)
    _close(got, want, dtype, scale=np.sqrt(m))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape,ns', [((2, 3, 4, 5), (4, 5)), ((5, 8, 16), (8, 16)),
                                      ((4, 3, 7, 9), (3, 7, 9)), ((6, 130), (6, 130))])
def test_multi_dim(dtype, shape, ns):
    rng = np.random.default_rng(7)
    xn = rng.standard_normal(shape).astype(dtype)
    wn = rng.standard_normal(ns).astype(dtype)
    bn = rng.standard_normal(ns).astype(dtype)
    gn = rng.standard_normal(shape).astype(dtype)
    for _ in range(2):                   # the second call goes through the checks cache
        _close(_run(tape, TF, xn, ns, wn, bn, gn),
               _run(torch, torch.nn.functional, xn, ns, wn, bn, gn), dtype)


@pytest.mark.parametrize('need', [(False, True, True), (False, True, False), (False, False, True),
                                  (True, False, False), (True, True, False), (False, False, False)])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_partial_needs(need, dtype):
    rng = np.random.default_rng(8)
    xn = rng.standard_normal((20, 70)).astype(dtype)
    wn = rng.standard_normal(70).astype(dtype)
    bn = rng.standard_normal(70).astype(dtype)
    gn = rng.standard_normal((20, 70)).astype(dtype)
    got = _run(tape, TF, xn, (70,), wn, bn, gn, need=need)
    want = _run(torch, torch.nn.functional, xn, (70,), wn, bn, gn, need=need)
    _close(got, want, dtype)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_noncontiguous(dtype):
    rng = np.random.default_rng(9)
    base = rng.standard_normal((130, 6, 40)).astype(dtype)
    wn = rng.standard_normal(130).astype(dtype)
    gn = rng.standard_normal((40, 6, 130)).astype(dtype)

    def xt(lib, rg):
        return lib.tensor(base, requires_grad=rg).permute(2, 1, 0)

    got = _run(tape, TF, None, (130,), wn, wn, gn, xt=xt)
    want = _run(torch, torch.nn.functional, None, (130,), wn, wn, gn, xt=xt)
    _close(got, want, dtype)
    # the input's gradient through the permuted view, and a non-contiguous
    # upstream gradient
    res = []
    g2 = np.ascontiguousarray(gn[:, 0, :].T)
    for lib, Fm in ((tape, TF), (torch, torch.nn.functional)):
        x = lib.tensor(base[:, 0], requires_grad=True)
        y = Fm.layer_norm(x.T, (130,), lib.tensor(wn))
        y.backward(lib.tensor(g2).T)
        res.append(x.grad.numpy())
    _close(res[:1], res[1:], dtype)


def test_module_and_cache_do_not_leak_shapes():
    """A cached (shape, normalized_shape) must still reject a mismatched weight."""
    x = tape.randn(4, 10)
    w = tape.ones(10)
    TF.layer_norm(x, (10,), w)
    with pytest.raises(RuntimeError, match='Expected weight to be of same shape'):
        TF.layer_norm(x, (10,), tape.ones(9))
    with pytest.raises(RuntimeError, match='Given normalized_shape'):
        TF.layer_norm(tape.randn(4, 9), (10,), w)
    ln = tape.nn.LayerNorm(10)
    tl = torch.nn.LayerNorm(10)
    xn = np.random.default_rng(1).standard_normal((5, 10)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(ln(tape.tensor(xn)).detach().numpy(),
                                   tl(torch.tensor(xn)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_float16_and_mixed_still_composite():
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float16)
    for _ in range(2):
        got = TF.layer_norm(tape.tensor(x), (8,)).numpy()
        want = torch.nn.functional.layer_norm(torch.tensor(x), (8,)).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=5e-3)


@pytest.mark.parametrize('n', [1, 10, 65])
def test_gradcheck(n):
    rng = np.random.default_rng(n)
    x = tape.tensor(rng.standard_normal((3, n)), requires_grad=True)
    w = tape.tensor(rng.standard_normal(n), requires_grad=True)
    b = tape.tensor(rng.standard_normal(n), requires_grad=True)

    def f(x, w, b):
        return TF.layer_norm(x, (n,), w, b)

    assert tape.autograd.gradcheck(f, (x, w, b))
    if n > 1:               # n == 1: y is b whatever x; the second derivative is 0/0-ish
        assert tape.autograd.gradgradcheck(f, (x, w, b))


def test_create_graph_matches_fast_path():
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((6, 65))
    wn = rng.standard_normal(65)
    gn = rng.standard_normal((6, 65))
    grads = []
    for cg in (False, True):
        x = tape.tensor(xn, requires_grad=True)
        w = tape.tensor(wn, requires_grad=True)
        y = TF.layer_norm(x, (65,), w, w)
        grads.append([g.detach().numpy() for g in
                      tape.autograd.grad(y, (x, w), tape.tensor(gn), create_graph=cg)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
