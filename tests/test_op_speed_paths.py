"""The compiled forward paths of erf, gelu (both forms), silu, elu and softplus,
and max(dim)'s scatter backward: values and gradients against PyTorch and
against the NumPy expressions they replace, across dtypes, sizes (below 256,
the small-record path, the large-record path from 16384), strided inputs, NaN
and inf."""
import math

import numpy as np
import pytest

import tape
import tape.nn.functional as TF

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
SHAPES = [(5, 7), (64, 300), (40, 30, 20)]          # 35, 19200 and 24000 elements
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 30.0, -30.0, -9.0, 1e-30, -1e-30, 5.5, -5.5]

OPS = {
    'gelu': (lambda m, x: m.nn.functional.gelu(x)),
    'gelu_tanh': (lambda m, x: m.nn.functional.gelu(x, approximate='tanh')),
    'erf': (lambda m, x: m.erf(x)),
    'silu': (lambda m, x: m.nn.functional.silu(x)),
    'elu': (lambda m, x: m.nn.functional.elu(x)),
    'elu_alpha': (lambda m, x: m.nn.functional.elu(x, 0.5)),
    'softplus': (lambda m, x: m.nn.functional.softplus(x)),
    'softplus_beta': (lambda m, x: m.nn.functional.softplus(x, 2.0, 5.0)),
    'softplus_int': (lambda m, x: m.nn.functional.softplus(x, 3, 4)),
    'max_dim': (lambda m, x: m.max(x, -1)[0]),
}


def _input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    return x


def _close(got, want, dtype, what):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               equal_nan=True, err_msg=what, **TOL[dtype])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('name', sorted(OPS))
@pytest.mark.parametrize('strided', [False, True])
def test_values_and_grads_match_torch(name, shape, dtype, strided):
    x = _input(shape, dtype)
    g = _input(shape, dtype, seed=1)
    a = tape.tensor(x, requires_grad=True)
    # the oracle is PyTorch in float64 (its float32 kernels cancel where gelu's
    # tails are small: 1e-5 off at x = -5); float32 results must round it
    b = torch.tensor(x.astype(np.float64), requires_grad=True)
    xa, xb = a, b
    if strided:             # a transposed view: the kernels see a non-contiguous array
        xa, xb = a.transpose(0, 1), b.transpose(0, 1)
    ya, yb = OPS[name](tape, xa), OPS[name](torch, xb)
    assert ya.dtype == (tape.float32 if dtype == np.float32 else tape.float64)
    assert tuple(ya.shape) == tuple(yb.shape)
    _close(ya.detach().numpy(), yb.detach().numpy(), dtype, f'{name} value')
    gy = np.ascontiguousarray(np.transpose(g, (1, 0) + tuple(range(2, g.ndim)))) if strided else g
    if name == 'max_dim':
        gy = gy[..., 0].copy()
    ya.backward(tape.tensor(gy))
    yb.backward(torch.tensor(gy.astype(np.float64)))
    assert a.grad.numpy().dtype == dtype
    _close(a.grad.numpy(), b.grad.numpy(), dtype, f'{name} gradient')


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', ['gelu', 'gelu_tanh', 'erf', 'silu', 'elu', 'softplus'])
def test_nan_and_inf_values_keep_their_behaviour(name, dtype):
    # the special values repeated past the compiled paths' 256-element threshold;
    # the results agree with the small (NumPy) path element by element
    x = np.array(SPECIAL * 30, dtype)
    small = np.array(SPECIAL, dtype)
    with np.errstate(all='ignore'):
        big = OPS[name](tape, tape.tensor(x)).numpy()
        ref = OPS[name](tape, tape.tensor(small)).numpy()
        want = OPS[name](torch, torch.tensor(small)).numpy()
    for k in range(len(SPECIAL)):
        col = big[k::len(SPECIAL)]
        assert np.all((col == ref[k]) | (np.isnan(col) & np.isnan(ref[k]))), (name, SPECIAL[k])
    # against PyTorch where PyTorch's float32 kernels are themselves exact (not at
    # +inf, where PyTorch's float32 gelu gives NaN and its float64 one inf)
    finite = np.isfinite(small)
    _close(ref[finite], want[finite], dtype, name)
    want64 = OPS[name](torch, torch.tensor(small.astype(np.float64))).numpy()
    assert np.array_equal(np.isnan(ref), np.isnan(want64))


def _erf32_reference(x):
    return np.array([math.erf(float(v)) for v in x])


def test_float32_erf_is_correctly_rounded_but_for_near_ties():
    from compiler.kernels import erf_f32_array
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(200_000) * 2, rng.uniform(-6, 6, 100_000),
                        10 ** rng.uniform(-45, 1, 50_000) * rng.choice([-1, 1], 50_000),
                        [0.0, 0.99999994, 1.0, 1.0000001, 1.9999999, 2.0, 2.9999998, 3.0,
                         3.9999998, 4.0, 1.4e-45, -1.4e-45, 3.4e38, -3.4e38]]).astype(np.float32)
    out = np.empty_like(x)
    erf_f32_array(x, out)
    ref = _erf32_reference(x)
    err = np.abs(out.astype(np.float64) - ref)
    half_ulp = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64) / 2
    # within half an ulp plus the fit's 1e-10 (relative below |x| = 1)
    assert np.all(err <= half_ulp + 1.5e-10 * np.minimum(np.abs(ref), 1.0)), err.max()
    assert np.mean(out == ref.astype(np.float32)) > 0.9995
    special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0], np.float32)
    res = np.empty_like(special)
    erf_f32_array(special, res)
    assert res[0] == 1.0 and res[1] == -1.0 and np.isnan(res[2])
    assert res[3] == 0.0 and np.signbit(res[3]) and not np.signbit(res[4])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_gelu_forward_matches_exact_formula(dtype):
    # float32: the float64 value rounded once; float64: erf's own ulp
    x = np.concatenate([_input(20_000, np.float64).astype(dtype),
                        np.linspace(-12, 12, 2001).astype(dtype)])
    got = TF.gelu(tape.tensor(x)).numpy()
    want = np.array([0.5 * float(v) * (1.0 + math.erf(float(v) / math.sqrt(2.0))) for v in x])
    if dtype == np.float32:
        # float32's kernel (compiler/activation_kernels.py) is within a few ulp
        # (PyTorch's float32 gelu is ~1e-6 off in the negative tail); plus, beyond
        # |x| / sqrt 2 = 4, the float64 reference's own cancellation in
        # 0.5 x (1 + erf): erfc(4) = 1.6e-8 of it, values under 5e-8 there
        ax = np.abs(x).astype(np.float64)
        bound = 8 * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) + 1e-10 * ax \
            + np.where(ax / math.sqrt(2.0) >= 4.0, 0.5 * ax * 1.6e-8, 0.0)
    else:
        bound = 4e-16 * np.abs(x) + 1e-300
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(300,), (64, 300)])
def test_fused_forwards_equal_the_numpy_expressions(shape, dtype):
    # the one-pass tails do the same float operations in the same dtype as the
    # NumPy expressions they replaced: equal element by element, NaN included
    d = _input(shape, dtype)
    d.reshape(-1)[:len(SPECIAL)] = SPECIAL
    T = d.dtype.type
    with np.errstate(all='ignore'):
        c = math.sqrt(2.0 / math.pi)
        want = {
            'gelu_tanh': 0.5 * d * (1.0 + np.tanh(c * (d + 0.044715 * d * d * d))),
            'silu': d * (1.0 / (1.0 + np.exp(-d))),
            'elu': np.where(d > 0, d, 0.5 * np.expm1(np.minimum(d, 0))),
            'softplus': np.where(d * T(2.0) > 5.0, d, np.log1p(np.exp(d * T(2.0))) / 2.0),
            'softplus1': np.where(d * T(1.0) > 20.0, d, np.log1p(np.exp(d * T(1.0)))),
        }
        got = {
            'gelu_tanh': TF.gelu(tape.tensor(d), approximate='tanh').numpy(),
            'silu': TF.silu(tape.tensor(d)).numpy(),
            'elu': TF.elu(tape.tensor(d), 0.5).numpy(),
            'softplus': TF.softplus(tape.tensor(d), 2.0, 5.0).numpy(),
            'softplus1': TF.softplus(tape.tensor(d)).numpy(),
        }
    for k in want:
        assert got[k].dtype == dtype, k
        if k == 'silu' and dtype == np.float32:
            # float32 silu is one compiled pass over exp32 (~1 ulp, as PyTorch's
            # Sleef expf), not NumPy's exp: within a few ulp, NaN where NumPy's
            np.testing.assert_array_equal(np.isnan(got[k]), np.isnan(want[k]), err_msg=k)
            np.testing.assert_allclose(got[k], want[k], rtol=5e-7, atol=1e-37, err_msg=k)
            continue
        if k.startswith('softplus'):
            # one compiled pass (compiler/softplus_kernels.py, ~2 ulp), not
            # NumPy's log1p of exp: within a few ulp, NaN where NumPy's
            np.testing.assert_array_equal(np.isnan(got[k]), np.isnan(want[k]), err_msg=k)
            np.testing.assert_allclose(got[k], want[k], rtol=4 * np.finfo(dtype).eps,
                                       atol=1e-37, err_msg=k)
            continue
        np.testing.assert_array_equal(got[k], want[k].astype(dtype), err_msg=k)


@pytest.mark.parametrize('name', ['gelu', 'gelu_tanh', 'erf', 'silu', 'elu', 'softplus'])
def test_float64_gradcheck(name):
    # sizes on both sides of the compiled forward's threshold
    for n in (7, 300):
        x = tape.tensor(np.random.default_rng(5).standard_normal(n) * 2, requires_grad=True)
        assert tape.autograd.gradcheck(lambda v: OPS[name](tape, v), (x,), eps=1e-6, atol=1e-5)


def test_gelu_double_backward_matches_torch():
    x = _input((64, 300), np.float64)
    a = tape.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    (ga,) = tape.autograd.grad(TF.gelu(a).sum(), a, create_graph=True)
    (gb,) = torch.autograd.grad(F.gelu(b).sum(), b, create_graph=True)
    _close(ga.detach().numpy(), gb.detach().numpy(), np.float64, 'first')
    ga.sum().backward()
    gb.sum().backward()
    _close(a.grad.numpy(), b.grad.numpy(), np.float64, 'second')


def test_max_dim_large_with_ties_and_nan_matches_torch():
    x = np.round(_input((40, 30, 20), np.float32))     # many ties
    x[3, 4, 5] = np.nan
    for dim in (0, 1, 2):
        a = tape.tensor(x, requires_grad=True)
        b = torch.tensor(x, requires_grad=True)
        va, ia = tape.max(a, dim)
        vb, ib = torch.max(b, dim)
        np.testing.assert_array_equal(ia.numpy(), ib.numpy())
        _close(va.detach().numpy(), vb.detach().numpy(), np.float32, 'values')
        g = _input(va.shape, np.float32, seed=dim)
        va.backward(tape.tensor(g))
        vb.backward(torch.tensor(g))
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_kernels_compile_lazily():
    # nothing new compiles at import: the new kernels are dispatchers with no
    # signature until first called (in a fresh process)
    import subprocess
    import sys
    code = ('import tape, compiler.kernels as k, compiler.softplus_kernels as s\n'
            'import compiler.activation_kernels as a\n'
            'names = ["erf_f32_array", "gelu_f32_array", "gelu_f64_array", "gelu_tanh_inner",'
            ' "gelu_tanh_outer", "silu_tail", "elu_tail"]\n'
            'assert all(not getattr(k, n).signatures for n in names)\n'
            'assert not s.softplus32_fwd.signatures and not s.softplus64_fwd.signatures\n'
            'assert not (a.exp64_fwd.signatures or a.tanh32_fwd.signatures'
            ' or a.relu_fwd.signatures)\n')
    subprocess.run([sys.executable, '-c', code], check=True)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_prod_large_matches_torch(dtype):
    # prod's take of the cumprod's last element scatters its gradient (one
    # position per row); zeros in some rows, one of them twice
    x = (1.0 + 0.01 * _input((40, 30, 20), dtype)).astype(dtype)
    x[1, 2, 3] = 0.0
    x[5, 6, 7] = x[5, 6, 9] = 0.0
    for dim in (None, 0, 2):
        a = tape.tensor(x, requires_grad=True)
        b = torch.tensor(x.astype(np.float64), requires_grad=True)
        ya = tape.prod(a) if dim is None else tape.prod(a, dim)
        yb = torch.prod(b) if dim is None else torch.prod(b, dim)
        tol = dict(rtol=2e-4, atol=2e-6) if dtype == np.float32 else TOL[dtype]
        np.testing.assert_allclose(np.asarray(ya.detach().numpy(), np.float64),
                                   yb.detach().numpy(), **tol)
        g = _input(tuple(yb.shape), dtype, seed=2)
        ya.backward(tape.tensor(g))
        yb.backward(torch.tensor(g.astype(np.float64)))
        assert a.grad.numpy().dtype == dtype
        np.testing.assert_allclose(np.asarray(a.grad.numpy(), np.float64), b.grad.numpy(),
                                   **tol)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape,dims', [((40, 30, 20), -1), ((40, 30, 20), (1, 2)),
                                        ((40, 30, 20), (2, 1)), ((40, 30, 20), 0),
                                        ((5, 7), -1), ((300,), 0), ((4, 5, 6), None)])
@pytest.mark.parametrize('fn', ['amax', 'amin', 'max'])
@pytest.mark.parametrize('nan', [False, True])
def test_even_split_of_ties(fn, shape, dims, dtype, nan):
    # amax/amin (and max over all) share the gradient evenly among ties; a NaN
    # is max()'s extreme and takes it, while amax/amin give a slice holding a
    # NaN NaN throughout (PyTorch's scale_grad_by_count: nothing equals the NaN,
    # 0 / 0).  The compiled weights (trailing dims) and the NumPy ones (others)
    # against the NumPy formula; no NaN: against PyTorch too
    if fn == 'max' and dims is not None:
        return
    x = np.round(_input(shape, dtype) * 0.7).astype(dtype)       # many ties
    if nan:
        x.reshape(-1)[[5, -1]] = np.nan
    a = tape.tensor(x, requires_grad=True)
    red = dims if dims is not None else tuple(range(x.ndim))
    y = getattr(tape, fn)(a) if dims is None else getattr(tape, fn)(a, dims)
    g = _input(y.shape, dtype, seed=4)
    y.backward(tape.tensor(g))
    npf = np.max if fn in ('amax', 'max') else np.min
    value = npf(x, axis=red, keepdims=True)
    if fn == 'max':
        tie = np.where(np.isnan(value), np.isnan(x), x == value)
    else:
        tie = x == value
    with np.errstate(invalid='ignore'):
        w = (tie / tie.sum(axis=red, keepdims=True)).astype(dtype)
    want = np.expand_dims(g, red) if dims is not None and np.ndim(g) else g
    with np.errstate(invalid='ignore'):
        expect = (np.asarray(want) * w).astype(dtype)
    np.testing.assert_allclose(a.grad.numpy(), expect, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(y.detach().numpy(), np.squeeze(value, axis=red)
                                  if dims is not None else value.reshape(()))
    if not nan:
        b = torch.tensor(x, requires_grad=True)
        tf = getattr(torch, fn)
        yb = tf(b) if dims is None else tf(b, dims)
        yb.backward(torch.tensor(g))
        _close(a.grad.numpy(), b.grad.numpy(), dtype, fn)
