"""tape.testing, tape.random, tape.backends and tape.amp against PyTorch."""
import math
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")


# ----------------------------------------------------------------- helpers
def _conv(lib, x):
    """Build the same structure in torch or tape: ('t', data, dtype) is a tensor."""
    if isinstance(x, tuple) and len(x) == 3 and x[0] == 't':
        return lib.tensor(x[1], dtype=getattr(lib, x[2]))
    if isinstance(x, list):
        return [_conv(lib, v) for v in x]
    if isinstance(x, tuple):
        return tuple(_conv(lib, v) for v in x)
    if isinstance(x, dict):
        return {k: _conv(lib, v) for k, v in x.items()}
    return x


def _outcome(lib, actual, expected, **kw):
    try:
        lib.testing.assert_close(_conv(lib, actual), _conv(lib, expected), **kw)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e).replace('torch', 'tape')
    return None


T = 't'
CASES = [
    # (actual, expected, kwargs)
    ((T, [1.0, 4.0, 5.0], 'float32'), (T, [1.0, 2.0, 3.0], 'float32'), {}),
    ((T, [1.0, 2.0, 3.0], 'float32'), (T, [1.0, 2.0 + 1e-6, 3.0], 'float32'), {}),
    ((T, [[1.0, 2.0], [3.0, 4.5]], 'float64'), (T, [[1.0, 2.0], [3.0, 4.0]], 'float64'), {}),
    ((T, [[0.5, 0.0], [3.0, 1.0]], 'float32'), (T, [[0.0, 0.0], [3.0, 0.0]], 'float32'), {}),
    ((T, [1, 2, 3], 'int64'), (T, [1, 5, 3], 'int64'), {}),
    ((T, [1, 2, 3], 'uint8'), (T, [1, 5, 0], 'uint8'), {}),
    ((T, [True, False], 'bool'), (T, [True, True], 'bool'), {}),
    ((T, [1.0, 2.0], 'float16'), (T, [1.0, 2.002], 'float16'), {}),
    ((T, [1.0, 2.0], 'float16'), (T, [1.0, 2.0005], 'float16'), {}),
    ((T, float('nan'), 'float32'), (T, float('nan'), 'float32'), {}),
    ((T, float('nan'), 'float32'), (T, float('nan'), 'float32'), {'equal_nan': True}),
    ((T, [1.0, float('nan')], 'float32'), (T, [1.0, float('nan')], 'float32'), {}),
    ((T, [math.inf, 1.0], 'float32'), (T, [math.inf, 1.0], 'float32'), {}),
    ((T, [math.inf, 1.0], 'float32'), (T, [-math.inf, 1.0], 'float32'), {}),
    ((T, 2.5, 'float32'), (T, 2.0, 'float32'), {}),
    ((T, [1.0, 2.0], 'float32'), (T, [1.0, 2.0, 3.0], 'float32'), {}),
    ((T, [1.0, 2.0], 'float32'), (T, [1.0, 2.0], 'float64'), {}),
    ((T, [1.0, 2.0], 'float32'), (T, [1.0, 2.0], 'float64'), {'check_dtype': False}),
    ((T, [1.0, 2.5], 'float32'), (T, [1.0, 2.0], 'float64'), {'check_dtype': False}),
    ((T, [1, 2], 'int64'), (T, [1.0, 2.0], 'float32'), {'check_dtype': False}),
    ((T, [1.0, 2.1], 'float32'), (T, [1.0, 2.0], 'float32'), {'rtol': 0.1, 'atol': 0.0}),
    ((T, [1.0, 2.1], 'float32'), (T, [1.0, 2.0], 'float32'), {'rtol': 0.01, 'atol': 0.0}),
    ((T, [1.0, 2.1], 'float32'), (T, [1.0, 2.0], 'float32'), {'rtol': 0.01}),
    ((T, [1.0, 2.1], 'float32'), (T, [1.0, 2.0], 'float32'), {'atol': 0.01}),
    ((T, [1.0, 2.0, 3.0], 'float32'), (T, [1.0, 4.0, 5.0], 'float32'),
     {'msg': 'Argh, the tensors are not close!'}),
    ((T, [1.0, 2.0, 3.0], 'float32'), (T, [1.0, 4.0, 5.0], 'float32'),
     {'msg': lambda m: f'Header\n\n{m}\n\nFooter'}),
    (1e-9, 1e-10, {'rtol': 0, 'atol': 0}),
    (1.0, 1, {}),
    (1.0, 1, {'check_dtype': False}),
    (1.0, 1.0 + 1e-8, {}),
    (1.0, 1.1, {}),
    (3, 4, {}),
    (0.5, 0.0, {}),
    (np.float32(1.5), 1.5, {}),
    (np.float64(1.5), np.float64(1.6), {}),
    (1 + 2j, 1 + 2j, {}),
    (True, True, {}),
    (True, False, {}),
    (None, None, {}),
    (None, 1.0, {}),
    ([1.0, (T, [2.0], 'float32')], ((1.0), (T, [2.0], 'float32')), {}),
    ([1.0, (T, [2.0], 'float32')], [1.0, (T, [2.5], 'float32')], {}),
    ([1.0, 2.0], [1.0], {}),
    ([[1.0, [2.0, 3.0]]], [[1.0, [2.0, 3.5]]], {}),
    ({'a': 1.0, 'b': (T, [1.0], 'float32')}, {'b': (T, [1.0], 'float32'), 'a': 1.0}, {}),
    ({'a': 1.0, 'b': (T, [1.0], 'float32')}, {'a': 1.0, 'b': (T, [2.0], 'float32')}, {}),
    ({'a': 1.0, 'c': 2.0}, {'a': 1.0, 'b': 2.0}, {}),
    ({'a': [1.0, 2.0]}, {'a': [1.0, 3.0]}, {'msg': lambda m: m.upper()}),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0]), {}),
    (np.array([1.0, 2.0]), np.array([1.0, 2.5]), {}),
    (np.array([1, 2], np.int32), np.array([1, 3], np.int32), {}),
    (np.array(3.0), np.array(3.5), {}),
    ('abc', 'abc', {}),
]


@pytest.mark.parametrize('actual,expected,kw', CASES)
def test_assert_close_matches_torch(actual, expected, kw):
    got = _outcome(tape, actual, expected, **kw)
    want = _outcome(torch, actual, expected, **kw)
    assert got == want


def test_assert_close_unrelated_types_and_subclasses():
    with pytest.raises(TypeError, match='No comparison pair was able to handle inputs'):
        tape.testing.assert_close(np.array([1.0]), tape.tensor([1.0]))
    with pytest.raises(TypeError, match='No comparison pair'):
        torch.testing.assert_close(np.array([1.0]), torch.tensor([1.0]))
    tape.testing.assert_close(tape.tensor([1.0]), tape.tensor([1.0]), allow_subclasses=False)
    p = tape.nn.Parameter(tape.tensor([1.0, 2.0]))
    tape.testing.assert_close(p, tape.tensor([1.0, 2.0]))


def test_assert_close_stride():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for lib in (torch, tape):
        x = lib.tensor(a.T.copy())
        y = lib.tensor(a).t()
        lib.testing.assert_close(x, y)
    got = _stride_msg(tape)
    want = _stride_msg(torch)
    assert got == want and "'stride()'" in got


def _stride_msg(lib):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x, y = lib.tensor(a.T.copy()), lib.tensor(a).t()
    with pytest.raises(AssertionError) as ei:
        lib.testing.assert_close(x, y, check_stride=True)
    return str(ei.value)


def test_assert_close_exact_torch_docstring_message():
    with pytest.raises(AssertionError) as ei:
        tape.testing.assert_close(tape.tensor([1.0, 4.0, 5.0]), tape.tensor([1.0, 2.0, 3.0]))
    assert str(ei.value) == ("Tensor-likes are not close!\n\n"
                             "Mismatched elements: 2 / 3 (66.7%)\n"
                             "Greatest absolute difference: 2.0 at index (1,) "
                             "(up to 1e-05 allowed)\n"
                             "Greatest relative difference: 1.0 at index (1,) "
                             "(up to 1.3e-06 allowed)")


def test_assert_close_random_float_arrays_match_torch():
    rng = np.random.default_rng(0)
    for dt in ('float32', 'float64', 'float16'):
        a = rng.standard_normal((4, 5)).astype(dt)
        b = (a + rng.standard_normal((4, 5)) * 1e-3).astype(dt)
        assert _outcome(tape, (T, a.tolist(), dt), (T, b.tolist(), dt)) == \
            _outcome(torch, (T, a.tolist(), dt), (T, b.tolist(), dt))


def test_assert_allclose_deprecated():
    for lib in (torch, tape):
        with pytest.warns(FutureWarning, match='assert_allclose'):
            lib.testing.assert_allclose(lib.tensor([1.0, float('nan')]),
                                        [1.0 + 1e-5, float('nan')])
    outs = []
    for lib in (torch, tape):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            try:
                lib.testing.assert_allclose(lib.tensor([1.0, 2.0]), [1.0, 2.1])
            except AssertionError as e:
                outs.append(str(e).replace('torch', 'tape'))
            try:
                lib.testing.assert_allclose([1.0, 2.0], [1.0, 2.1], msg='custom')
            except AssertionError as e:
                outs.append(str(e))
    assert outs[:2] == outs[2:] and len(outs) == 4


# ------------------------------------------------------------- make_tensor
def test_make_tensor_properties():
    mt = tape.testing.make_tensor
    t = mt(3, 4, dtype=tape.float32, device='cpu')
    assert t.shape == (3, 4) and t.dtype == tape.float32
    assert bool(((t >= -9) & (t < 9)).all()) and not t.requires_grad
    t = mt((2, 5), dtype=tape.float64, device='cpu', low=-1, high=1, requires_grad=True)
    assert t.shape == (2, 5) and t.requires_grad and t.is_leaf
    assert bool(((t >= -1) & (t < 1)).all())
    t = mt([4, 6], dtype=tape.int64, device='cpu', low=0, high=3)
    assert t.dtype == tape.int64 and set(np.unique(t.numpy())) <= {0, 1, 2}
    t = mt(20, dtype=tape.bool, device='cpu')
    assert t.dtype == tape.bool
    t = mt(50, dtype=tape.uint8, device='cpu')
    assert t.numpy().min() >= 0 and t.numpy().max() < 10
    t = mt(3, 4, dtype=tape.float32, device='cpu', noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous()
    assert mt(1, dtype=tape.float32, device='cpu', noncontiguous=True).is_contiguous()
    t = mt(200, dtype=tape.int32, device='cpu', low=-1, high=2, exclude_zero=True)
    assert (t.numpy() != 0).all() and set(np.unique(t.numpy())) <= {-1, 1}
    t = mt(200, dtype=tape.float32, device='cpu', low=0, high=1e-30, exclude_zero=True)
    assert (t.numpy() != 0).all()
    t = mt((), dtype=tape.float32, device='cpu')
    assert t.shape == ()
    tape.manual_seed(3)
    a = mt(5, dtype=tape.float32, device='cpu')
    tape.manual_seed(3)
    assert bool((a == mt(5, dtype=tape.float32, device='cpu')).all())


def test_make_tensor_errors_match_torch():
    def err(lib, *a, **kw):
        try:
            lib.testing.make_tensor(*a, device='cpu', **kw)
        except Exception as e:  # noqa: BLE001
            return type(e), str(e).replace('torch.', 'tape.').split(' To request')[0]
        return None

    for kw in ({'dtype': 'int64', 'requires_grad': True}, {'dtype': 'float32', 'low': 2, 'high': 1},
               {'dtype': 'float32', 'low': float('nan')}, {'dtype': 'uint8', 'low': -5, 'high': -1},
               {'dtype': 'float32', 'noncontiguous': True, 'memory_format': 'x'}):
        kt = dict(kw, dtype=getattr(tape, kw['dtype']))
        kr = dict(kw, dtype=getattr(torch, kw['dtype']))
        if kw.get('memory_format'):
            kr['memory_format'] = torch.contiguous_format
            kt['memory_format'] = 'x'
            assert err(tape, 3, **kt)[0] is err(torch, 3, **kr)[0] is ValueError
            continue
        assert err(tape, 3, **kt) == err(torch, 3, **kr), kw
    with pytest.raises(TypeError, match='not supported by'):
        tape.testing.make_tensor(3, dtype=np.complex64, device='cpu')
    with pytest.raises(TypeError):
        tape.testing.make_tensor(3, dtype=tape.float32)  # device is required, as torch's
    with pytest.warns(FutureWarning):
        tape.testing.make_tensor(3, dtype=tape.float32, device='cpu', low=1, high=1)


# ------------------------------------------------------------------ random
def test_rng_state_round_trip_and_seed():
    tape.random.manual_seed(123)
    assert tape.random.initial_seed() == 123 == tape.initial_seed()
    state = tape.random.get_rng_state()
    a = tape.rand(4)
    tape.random.set_rng_state(state)
    assert bool((tape.rand(4) == a).all())
    s = tape.random.seed()
    assert isinstance(s, int) and tape.random.initial_seed() == s
    assert set(tape.random.__all__) >= {'manual_seed', 'seed', 'initial_seed', 'get_rng_state',
                                        'set_rng_state', 'fork_rng'}


def test_fork_rng_restores():
    tape.manual_seed(5)
    with tape.random.fork_rng():
        tape.rand(10)
        tape.manual_seed(7)
        assert tape.initial_seed() == 7
        tape.randn(3)
    assert tape.initial_seed() == 5
    after = tape.rand(3)
    tape.manual_seed(5)
    assert bool((tape.rand(3) == after).all())
    # devices / device_type accepted; enabled=False does not restore
    tape.manual_seed(5)
    with tape.random.fork_rng(devices=[], device_type='cuda'):
        tape.rand(2)
    before = tape.get_rng_state()
    with tape.random.fork_rng(enabled=False):
        tape.rand(3)
    assert not np.array_equal(tape.get_rng_state().numpy(), before.numpy())
    # restored also when the block raises
    tape.manual_seed(9)
    st = tape.get_rng_state()
    with pytest.raises(ZeroDivisionError):
        with tape.random.fork_rng():
            tape.rand(5)
            1 / 0  # noqa: B018
    assert bool((tape.get_rng_state() == st).all())


def test_random_does_not_shadow_generator_functions():
    assert tape.manual_seed is not tape.random.manual_seed
    assert callable(tape.rand) and tape.random.__name__ == 'tape.random'
    tape.manual_seed(1)
    assert tape.rand(2).shape == (2,) and tape.randint(0, 3, (2,)).shape == (2,)


# ---------------------------------------------------------------- backends
def test_backends_defaults_like_torch_without_gpu():
    b, tb = tape.backends, torch.backends
    # tape has no GPU backend; a CUDA build of torch reports cuDNN even on a
    # machine without a GPU, so torch's answers are compared only from a CPU build
    assert b.cudnn.is_available() is False and b.cudnn.version() is None
    assert b.mps.is_available() is False
    if not torch.version.cuda:
        assert tb.cudnn.is_available() is False and tb.cudnn.version() is None
        assert tb.mps.is_available() is False
    assert b.cuda.is_built() is False
    for name in ('enabled', 'benchmark', 'deterministic', 'allow_tf32'):
        assert getattr(b.cudnn, name) == getattr(tb.cudnn, name), name
    assert b.cuda.matmul.allow_tf32 == tb.cuda.matmul.allow_tf32
    assert isinstance(b.mkldnn.is_available(), bool) and b.mkldnn.enabled is True
    assert isinstance(b.openmp.is_available(), bool)
    assert b.opt_einsum.enabled is True and isinstance(b.opt_einsum.is_available(), bool)
    assert b.opt_einsum.strategy == ('auto' if b.opt_einsum.is_available() else None)
    assert b.cpu.get_cpu_capability() in ('DEFAULT', 'AVX2', 'AVX512', 'SVE256')


def test_backends_flags_set_and_read():
    import tape.backends.cudnn as cudnn
    b = tape.backends
    old = (cudnn.benchmark, cudnn.deterministic, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
    try:
        cudnn.benchmark = True
        b.cudnn.deterministic = True
        b.cuda.matmul.allow_tf32 = True
        b.cudnn.allow_tf32 = False
        b.opt_einsum.strategy = 'greedy'
        b.mkldnn.enabled = False
        assert b.cudnn.benchmark and tape.backends.cudnn.deterministic
        assert b.cuda.matmul.allow_tf32 and not b.cudnn.allow_tf32
        assert b.opt_einsum.strategy == 'greedy' and b.mkldnn.enabled is False
        with b.cudnn.flags(enabled=False, benchmark=False, deterministic=False):
            assert not b.cudnn.enabled and not b.cudnn.benchmark
            assert b.cudnn.allow_tf32 is True  # flags() sets its defaults, as torch's
        assert b.cudnn.enabled and b.cudnn.benchmark and not b.cudnn.allow_tf32
        with b.mkldnn.flags(enabled=True):
            assert b.mkldnn.enabled
        assert b.mkldnn.enabled is False
        # no numerical effect
        x = tape.ones(3, 3)
        assert bool(((x @ x) == 3).all())
    finally:
        (cudnn.benchmark, cudnn.deterministic, b.cuda.matmul.allow_tf32,
         b.cudnn.allow_tf32) = old
        b.opt_einsum.strategy = 'auto' if b.opt_einsum.is_available() else None
        b.mkldnn.enabled = True


# ---------------------------------------------------------------- GradScaler
def _model(lib, w0, x, y):
    w = lib.tensor(w0, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    X, Y = lib.tensor(x), lib.tensor(y)

    def loss():
        return ((X @ w - Y) ** 2).mean()
    return w, opt, loss


def _run_scaler(lib, plan, unscale_first=False, **scaler_kw):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    w, opt, loss = _model(lib, w0, x, y)
    scaler = lib.amp.GradScaler('cpu', **scaler_kw)
    trace = []
    for bad in plan:
        opt.zero_grad()
        scaled = scaler.scale(loss())
        scaled.backward()
        if bad:
            with lib.no_grad():
                w.grad[0, 1] = float('inf') if bad == 'inf' else float('nan')
        if unscale_first:
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_([w], 1.0)
        scaler.step(opt)
        scaler.update()
        trace.append((float(scaled.item()), scaler.get_scale(), scaler._get_growth_tracker(),
                      w.detach().numpy().copy(), scaler.state_dict()))
    return trace


@pytest.mark.parametrize('unscale_first', [False, True])
def test_grad_scaler_matches_torch_step_by_step(unscale_first):
    plan = [None, None, 'inf', None, None, None, 'nan', None, None, None, None]
    kw = dict(init_scale=2.0 ** 10, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    got = _run_scaler(tape, plan, unscale_first, **kw)
    want = _run_scaler(torch, plan, unscale_first, **kw)
    for i, (g, r) in enumerate(zip(got, want)):
        assert g[0] == pytest.approx(r[0], rel=1e-5), i
        assert g[1:3] == r[1:3], i
        np.testing.assert_allclose(g[3], r[3], rtol=1e-5, atol=1e-6, err_msg=str(i))
        assert g[4] == r[4], i
    # skipped steps leave the parameters as they were
    assert np.array_equal(got[2][3], got[1][3]) and np.array_equal(got[6][3], got[5][3])


def test_grad_scaler_growth_overflow_and_state_dict():
    for lib in (torch, tape):
        s = lib.amp.GradScaler('cpu', init_scale=2e38, growth_interval=1)
        w = lib.tensor([1.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        s.scale((w * 0.5).sum()).backward()
        s.step(opt)
        s.update()
        assert s.get_scale() == pytest.approx(2e38, rel=1e-6)  # inf growth is refused
        assert s._get_growth_tracker() == 0
    s = tape.amp.GradScaler('cpu', init_scale=16.0)
    assert s.get_scale() == 16.0 and s.state_dict()['_growth_tracker'] == 0
    t = tape.amp.GradScaler('cpu')
    t.load_state_dict({'scale': 4.0, 'growth_factor': 3.0, 'backoff_factor': 0.5,
                       'growth_interval': 7, '_growth_tracker': 2})
    assert t.get_scale() == 4.0 and t.get_growth_interval() == 7 and t._get_growth_tracker() == 2
    out = t.scale([tape.tensor(1.0), (tape.tensor(2.0),)])
    assert float(out[0]) == 4.0 and float(out[1][0]) == 8.0
    t.update(2.0)
    assert t.get_scale() == 2.0
    t2 = pickle.loads(pickle.dumps(t))
    assert t2.get_scale() == 2.0
    with pytest.raises(RuntimeError, match='source state dict is empty'):
        t.load_state_dict({})
    with pytest.raises(AssertionError, match='growth factor'):
        tape.amp.GradScaler('cpu', growth_factor=1.0)


def test_grad_scaler_misuse_errors_like_torch():
    def errors(lib):
        s = lib.amp.GradScaler('cpu')
        w = lib.tensor([1.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        out = []
        for call in (lambda: s.step(opt), lambda: s.update()):
            try:
                call()
            except Exception as e:  # noqa: BLE001
                out.append((type(e), str(e)))
        s.scale(w.sum()).backward()
        s.unscale_(opt)
        for call in (lambda: s.unscale_(opt), lambda: s.step(opt), lambda: s.step(opt),
                     lambda: s.unscale_(opt), lambda: s.step(opt, closure=lambda: 0)):
            try:
                call()
                out.append(None)
            except Exception as e:  # noqa: BLE001
                out.append((type(e), str(e)))
        return out
    assert errors(tape) == errors(torch)


def test_grad_scaler_disabled_and_cuda_device():
    for lib in (torch, tape):
        s = lib.amp.GradScaler('cpu', enabled=False)
        x = lib.tensor([3.0])
        assert s.scale(x) is x and s.get_scale() == 1.0 and not s.is_enabled()
        assert s.state_dict() == {}
        w = lib.tensor([1.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.5)
        w.sum().backward()
        s.unscale_(opt)
        s.step(opt)
        s.update()
        assert float(w.detach()[0]) == 0.5
        with pytest.warns(UserWarning, match='CUDA is not available'):
            c = lib.amp.GradScaler()
        assert not c.is_enabled()


# ------------------------------------------------------------------ autocast
@pytest.fixture
def fresh_autocast_warning(monkeypatch):
    from tape.amp import autocast_mode
    monkeypatch.setattr(autocast_mode, '_warned', [False])


def test_autocast_enabled_keeps_dtypes_and_warns_once(fresh_autocast_warning):
    a = tape.randn(4, 4)
    with pytest.warns(UserWarning, match='without lowering precision'):
        with tape.autocast('cpu'):
            assert tape.is_autocast_enabled('cpu') and tape.amp.is_autocast_enabled('cpu')
            y = a @ a
            assert y.dtype == tape.float32
            assert tape.get_autocast_dtype('cpu') == tape.float16
    assert not tape.is_autocast_enabled('cpu')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with tape.amp.autocast(device_type='cpu', dtype=tape.float16):
            z = a @ a
            with tape.autocast('cpu', enabled=False):
                assert not tape.is_autocast_enabled('cpu')
            assert tape.is_autocast_enabled('cpu')
    assert z.dtype == tape.float32 and bool((z == y).all())


def test_autocast_disabled_is_a_noop(fresh_autocast_warning):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with tape.autocast('cpu', enabled=False) as ctx:
            assert not tape.is_autocast_enabled('cpu')
            y = tape.ones(2, dtype=tape.float64) * 2
    assert y.dtype == tape.float64 and isinstance(ctx, tape.autocast)
    assert tape.amp.autocast_mode._warned == [False]


def test_autocast_like_torch_on_a_machine_without_gpu():
    for lib in (torch, tape):
        assert lib.is_autocast_enabled() is False and lib.is_autocast_enabled('cpu') is False
        with pytest.warns(UserWarning, match='CUDA is not available'):
            with lib.autocast('cuda'):
                assert not lib.is_autocast_enabled('cuda')
        with pytest.raises(ValueError, match='Expected `device_type` of type `str`'):
            lib.autocast(lib.device('cpu'))
        with pytest.raises(RuntimeError):
            lib.autocast('meta')
        with pytest.raises(RuntimeError, match='device type at start of device string'):
            lib.autocast('nodevice')
        with pytest.raises(TypeError):
            lib.get_autocast_dtype()
    assert tape.get_autocast_dtype('cuda') == tape.float16


def test_autocast_decorator_and_custom_fwd_bwd():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')

        @tape.autocast('cpu')
        def f(x):
            return tape.is_autocast_enabled('cpu'), x * 2

        on, y = f(tape.ones(2))
    assert on and not tape.is_autocast_enabled('cpu') and y.dtype == tape.float32

    seen = {}

    class Double(tape.autograd.Function):
        @staticmethod
        @tape.amp.custom_fwd(device_type='cpu')
        def forward(ctx, x):
            seen['fwd'] = tape.is_autocast_enabled('cpu')
            return x * 2

        @staticmethod
        @tape.amp.custom_bwd(device_type='cpu')
        def backward(ctx, g):
            seen['bwd'] = tape.is_autocast_enabled('cpu')
            return g * 2

    x = tape.ones(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with tape.autocast('cpu'):
            out = Double.apply(x)
    out.sum().backward()
    assert seen == {'fwd': True, 'bwd': True} and x.grad.tolist() == [2.0, 2.0, 2.0]

    class Cast(tape.autograd.Function):
        @staticmethod
        @tape.amp.custom_fwd(device_type='cpu', cast_inputs=tape.float32)
        def forward(ctx, x):
            seen['cast_fwd'] = (tape.is_autocast_enabled('cpu'), x.dtype)
            return x + 1

        @staticmethod
        @tape.amp.custom_bwd(device_type='cpu')
        def backward(ctx, g):
            return g

    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with tape.autocast('cpu'):
            Cast.apply(tape.ones(2, dtype=tape.float16, requires_grad=True))
    assert seen['cast_fwd'] == (False, tape.float32)
    with pytest.raises(ValueError):
        tape.amp.custom_fwd(device_type=None)


def test_top_level_wiring():
    for name in ('testing', 'random', 'backends', 'amp', 'autocast', 'is_autocast_enabled',
                 'get_autocast_dtype'):
        assert hasattr(tape, name), name
    import importlib
    gs = importlib.import_module('tape.amp.grad_scaler')
    assert gs.GradScaler is tape.amp.GradScaler
    assert importlib.import_module('tape.backends.cudnn') is tape.backends.cudnn
