"""tape.save / tape.load against torch.save / torch.load's behaviour on the CPU."""
import io
import os
import pathlib
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import tape
from tape import nn


def _roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    tape.save(obj, buf)
    buf.seek(0)
    return tape.load(buf, **load_kw)


def _same(a, b):
    """Same values, dtype and shape, bit for bit."""
    assert isinstance(b, tape.Tensor)
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(np.asarray(a._data), np.asarray(b._data))


class Custom:
    def __init__(self, v=1):
        self.v = v


# -- tensors ------------------------------------------------------------------
@pytest.mark.parametrize('make', [
    lambda: tape.randn(3, 4),
    lambda: tape.randn(3, 4, dtype=tape.float64),
    lambda: tape.tensor([[1, -2], [3, 2 ** 40]]),
    lambda: tape.tensor([True, False, True]),
    lambda: tape.tensor(2.5),
    lambda: tape.tensor(7),
    lambda: tape.zeros(0),
    lambda: tape.zeros(2, 0, 3),
    lambda: tape.tensor([1, 2], dtype=tape.int32),
    lambda: tape.tensor([1.5, 2], dtype=tape.float16),
], ids=['f32', 'f64', 'i64', 'bool', '0d-float', '0d-int', 'empty', 'empty-3d', 'i32', 'f16'])
def test_tensor_round_trip(make, tmp_path):
    t = make()
    p = tmp_path / 't.pt'
    tape.save(t, p)
    r = tape.load(p)
    _same(t, r)
    assert r.requires_grad is False and r.is_leaf


@pytest.mark.parametrize('view', [
    lambda x: x.t(), lambda x: x[:, 1::2], lambda x: x[1], lambda x: tape.flip(x, (0,))[:, ::2],
    lambda x: x.expand(3, 4, 6)[:, 1], lambda x: x.unsqueeze(0).permute(2, 0, 1),
], ids=['t', 'strided-slice', 'row', 'negative-strides', 'expanded', 'permuted'])
def test_non_contiguous_views_round_trip(view):
    x = tape.arange(24.).reshape(4, 6)
    v = view(x)
    r = _roundtrip(v)
    _same(v, r)
    # a loaded tensor owns writable memory of its own
    r.add_(1)
    _same(v + 1, r)
    np.testing.assert_array_equal(x._data, np.arange(24.).reshape(4, 6))


def test_view_of_large_base_saves_only_its_bytes():
    base = tape.zeros(100000)
    buf = io.BytesIO()
    tape.save(base[10:20], buf)
    assert len(buf.getvalue()) < 10000
    buf.seek(0)
    _same(base[10:20], tape.load(buf))


def test_requires_grad_parameter_and_grad():
    p = nn.Parameter(tape.randn(3))
    p.grad = tape.ones(3)
    w = tape.randn(2, requires_grad=True)
    y = w * 2                                           # a non-leaf
    i = tape.tensor([1, 2])
    r = _roundtrip({'p': p, 'w': w, 'y': y, 'i': i})
    assert isinstance(r['p'], nn.Parameter) and r['p'].requires_grad
    assert r['p'].grad is None                          # .grad is not saved
    assert not isinstance(r['w'], nn.Parameter) and r['w'].requires_grad
    assert r['y'].is_leaf and r['y'].requires_grad and r['y'].grad_fn is None
    _same(y.detach(), r['y'].detach())
    assert not r['i'].requires_grad
    (r['y'] * r['p'][:2]).sum().backward()              # the loaded leaves work in a graph
    np.testing.assert_allclose(r['p'].grad._data[:2], r['y']._data)


def test_user_attributes_kept_and_refused_by_weights_only():
    t = tape.ones(2)
    t.note = 'hello'
    assert _roundtrip(t).note == 'hello'
    t.obj = Custom(3)
    assert _roundtrip(t, weights_only=False).obj.v == 3
    with pytest.raises(pickle.UnpicklingError, match='Weights only load failed'):
        _roundtrip(t)


# -- shared storage --------------------------------------------------------------
def test_same_tensor_twice_loads_as_one_object():
    x = tape.randn(3)
    r = _roundtrip([x, x, {'again': x}])
    assert r[0] is r[1] is r[2]['again']


def test_views_share_memory_after_load():
    x = tape.arange(12.).reshape(3, 4)
    r = _roundtrip({'x': x, 'row': x[1], 'col': x[:, 2], 't': x.t()})
    assert np.shares_memory(r['x']._data, r['row']._data)
    assert np.shares_memory(r['x']._data, r['t']._data)
    r['x'][1, 2] = 100.0
    assert r['row'][2].item() == 100.0 and r['col'][1].item() == 100.0
    assert r['t'][2, 1].item() == 100.0


def test_disjoint_tensors_do_not_share():
    x = tape.arange(8.)
    r = _roundtrip([x[:4], x[4:], tape.ones(2)])
    assert not np.shares_memory(r[0]._data, r[1]._data)
    r[0].zero_()
    _same(tape.tensor([4., 5., 6., 7.]), r[1])


def test_sharing_matches_torch():
    torch = pytest.importorskip('torch')
    tx = torch.arange(12.).reshape(3, 4)
    x = tape.arange(12.).reshape(3, 4)
    tb = io.BytesIO()
    torch.save({'x': tx, 'v': tx[:, 1:3], 'same': tx}, tb)
    tb.seek(0)
    tr = torch.load(tb)
    r = _roundtrip({'x': x, 'v': x[:, 1:3], 'same': x})
    assert (r['x'] is r['same']) == (tr['x'] is tr['same'])
    tr['x'].mul_(3)
    r['x'].mul_(3)
    np.testing.assert_array_equal(r['v']._data, tr['v'].numpy())


# -- models and optimizers -------------------------------------------------------
def _check_state_dict_round_trip(model, fresh, tmp_path):
    p = tmp_path / 'model.pt'
    tape.save(model.state_dict(), p)
    sd = tape.load(p)
    assert isinstance(sd, OrderedDict) and list(sd) == list(model.state_dict())
    fresh.load_state_dict(sd)
    for (k, a), (k2, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert k == k2
        _same(a, b)


def test_linear_state_dict(tmp_path):
    tape.manual_seed(0)
    model = nn.Linear(4, 3)
    _check_state_dict_round_trip(model, nn.Linear(4, 3), tmp_path)
    x = tape.randn(2, 4)
    fresh = nn.Linear(4, 3)
    fresh.load_state_dict(tape.load(tmp_path / 'model.pt'))
    _same(model(x).detach(), fresh(x).detach())


def test_sequential_with_batchnorm_buffers(tmp_path):
    tape.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))
    model.train()
    for _ in range(3):
        model(tape.randn(8, 4))                 # moves running_mean/var, num_batches_tracked
    sd = model.state_dict()
    assert '1.running_mean' in sd and '1.num_batches_tracked' in sd
    fresh = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))
    _check_state_dict_round_trip(model, fresh, tmp_path)
    assert fresh[1].num_batches_tracked.item() == 3
    model.eval()
    fresh.eval()
    x = tape.randn(3, 4)
    _same(model(x).detach(), fresh(x).detach())


def test_lstm_state_dict(tmp_path):
    tape.manual_seed(0)
    model = nn.LSTM(3, 5, num_layers=2, batch_first=True)
    fresh = nn.LSTM(3, 5, num_layers=2, batch_first=True)
    _check_state_dict_round_trip(model, fresh, tmp_path)
    x = tape.randn(2, 4, 3)
    _same(model(x)[0].detach(), fresh(x)[0].detach())


def _train(model, opt, xs, ys):
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _make_model():
    tape.manual_seed(1)
    return nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 1))


def test_adam_checkpoint_resume_matches_uninterrupted(tmp_path):
    tape.manual_seed(2)
    xs = [tape.randn(8, 3) for _ in range(6)]
    ys = [tape.randn(8, 1) for _ in range(6)]

    ref = _make_model()
    ref_opt = tape.optim.Adam(ref.parameters(), lr=1e-2, weight_decay=1e-3)
    _train(ref, ref_opt, xs, ys)

    model = _make_model()
    opt = tape.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
    _train(model, opt, xs[:3], ys[:3])
    ckpt = tmp_path / 'ckpt.pt'
    tape.save({'epoch': 3, 'model_state_dict': model.state_dict(),
               'optimizer_state_dict': opt.state_dict(), 'loss': 0.25}, ckpt)
    del model, opt

    model = _make_model()
    tape.manual_seed(99)
    for p in model.parameters():                # make sure the load is what restores them
        p.data.uniform_(-1, 1)
    opt = tape.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
    c = tape.load(ckpt)
    assert c['epoch'] == 3 and c['loss'] == 0.25
    model.load_state_dict(c['model_state_dict'])
    opt.load_state_dict(c['optimizer_state_dict'])
    assert opt.state_dict()['state'][0]['step'].item() == 3
    _train(model, opt, xs[3:], ys[3:])
    for a, b in zip(ref.parameters(), model.parameters()):
        _same(a.detach(), b.detach())


def test_optimizer_and_scheduler_state_dicts_load_weights_only():
    model = _make_model()
    opt = tape.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = tape.optim.lr_scheduler.StepLR(opt, step_size=2)
    _train(model, opt, [tape.randn(4, 3)], [tape.randn(4, 1)])
    sched.step()
    r = _roundtrip({'opt': opt.state_dict(), 'sched': sched.state_dict()})
    assert r['opt']['param_groups'] == opt.state_dict()['param_groups']
    assert r['sched'] == sched.state_dict()
    _same(opt.state_dict()['state'][0]['momentum_buffer'], r['opt']['state'][0]['momentum_buffer'])


def test_whole_module(tmp_path):
    model = _make_model()
    p = tmp_path / 'whole.pt'
    tape.save(model, p)
    with pytest.raises(pickle.UnpicklingError, match='Weights only load failed') as e:
        tape.load(p)
    assert 'nn.modules.Sequential' in str(e.value)
    m2 = tape.load(p, weights_only=False)
    assert all(isinstance(q, nn.Parameter) for q in m2.parameters())
    x = tape.randn(2, 3)
    _same(model(x).detach(), m2(x).detach())


# -- weights_only ---------------------------------------------------------------
def test_weights_only_accepts_primitives_and_containers():
    obj = {'ints': [1, -2, 2 ** 70], 'floats': (1.5, float('inf')), 'none': None, 'b': True,
           's': 'str', 'bytes': b'\x00\xff', 'ba': bytearray(b'ab'), 'set': {1, 2}, 'c': 1 + 2j,
           'od': OrderedDict(a=tape.ones(1)), 'dtype': tape.float64, 'dtypes': [tape.int64, tape.bool],
           'dev': tape.device('cpu'), 'size': tape.Size([2, 3]), 'nested': [[{'x': ()}]]}
    r = _roundtrip(obj)
    assert {k: v for k, v in r.items() if k != 'od'} == {k: v for k, v in obj.items() if k != 'od'}
    assert type(r['od']) is OrderedDict and type(r['size']) is tape.Size
    assert r['dtype'] is tape.float64 or r['dtype'] == tape.float64
    assert tape.zeros(2, dtype=r['dtypes'][0]).dtype == tape.int64


@pytest.mark.parametrize('obj', [Custom(), np.float64(1.0), slice(1, 2), frozenset([1]),
                                 {'model': Custom()}, np.arange(3)],
                         ids=['class', 'np-scalar', 'slice', 'frozenset', 'nested', 'ndarray'])
def test_weights_only_refuses_other_globals(obj):
    buf = io.BytesIO()
    tape.save(obj, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match='(?s)Weights only load failed.*GLOBAL'):
        tape.load(buf)
    buf.seek(0)
    r = tape.load(buf, weights_only=False)
    assert type(r) is type(obj)


def test_weights_only_refusal_matches_torch():
    torch = pytest.importorskip('torch')
    for obj in [Custom(), np.float64(1.0), slice(1, 2), {1, 2}, b'x', 1j, OrderedDict(a=1)]:
        tb = io.BytesIO()
        torch.save(obj, tb)
        tb.seek(0)
        try:
            torch.load(tb)
            torch_ok = True
        except pickle.UnpicklingError:
            torch_ok = False
        try:
            _roundtrip(obj)
            ok = True
        except pickle.UnpicklingError:
            ok = False
        assert ok == torch_ok, obj


def test_safe_globals():
    with tape.serialization.safe_globals([Custom]):
        assert _roundtrip(Custom(5)).v == 5
    with pytest.raises(pickle.UnpicklingError):
        _roundtrip(Custom(5))


def test_weights_only_refuses_reduce_to_arbitrary_callable():
    class Evil:
        def __reduce__(self):
            return (os.system, ('echo pwned',))
    buf = io.BytesIO()
    tape.save(Evil(), buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match='system'):
        tape.load(buf)


def test_explicit_pickle_module():
    buf = io.BytesIO()
    tape.save({'a': tape.ones(2)}, buf, pickle_module=pickle, pickle_protocol=4)
    buf.seek(0)
    with pytest.raises(RuntimeError, match='explicit pickle_module'):
        tape.load(buf, pickle_module=pickle, weights_only=True)
    buf.seek(0)
    r = tape.load(buf, pickle_module=pickle)            # weights_only defaults to False then
    _same(tape.ones(2), r['a'])


@pytest.mark.parametrize('protocol', [2, 3, 4, 5])
def test_pickle_protocols(protocol):
    buf = io.BytesIO()
    obj = {'t': tape.ones(2), 'b': b'x', 's': {1}, 'size': tape.Size([1])}
    tape.save(obj, buf, pickle_protocol=protocol)
    buf.seek(0)
    r = tape.load(buf)
    assert r['b'] == b'x' and r['s'] == {1} and r['size'] == tape.Size([1])


# -- map_location --------------------------------------------------------------
@pytest.mark.parametrize('loc', ['cpu', 'cpu:0', tape.device('cpu'), {'cuda:0': 'cpu'},
                                 {'cpu': 'cpu'}, lambda storage, loc: storage,
                                 lambda storage, loc: None, lambda storage, loc: storage.cpu()],
                         ids=['str', 'str-index', 'device', 'dict-other', 'dict-cpu', 'callable',
                              'callable-none', 'callable-cpu'])
def test_map_location_cpu_forms(loc):
    x = tape.randn(3)
    _same(x, _roundtrip(x, map_location=loc))


@pytest.mark.parametrize('loc', ['cuda', 'cuda:0', tape.device('cuda', 1), {'cpu': 'cuda:1'},
                                 lambda storage, loc: storage.cuda()],
                         ids=['str', 'str-index', 'device', 'dict', 'callable'])
def test_map_location_cuda_raises(loc):
    with pytest.raises(RuntimeError, match='CUDA'):
        _roundtrip(tape.randn(3), map_location=loc)


def test_map_location_cuda_matches_torch():
    torch = pytest.importorskip('torch')
    if torch.cuda.is_available():
        pytest.skip('needs a CPU-only torch')
    for loc in ['cuda', 'cuda:0', {'cpu': 'cuda:0'}]:
        tb = io.BytesIO()
        torch.save(torch.ones(2), tb)
        tb.seek(0)
        with pytest.raises(RuntimeError) as te:
            torch.load(tb, map_location=loc)
        with pytest.raises(RuntimeError) as e:
            _roundtrip(tape.ones(2), map_location=loc)
        assert str(te.value).split('.')[0] == str(e.value).split('.')[0]
    _same(tape.ones(2), _roundtrip(tape.ones(2), map_location=torch.device('cpu')))
    with pytest.raises(RuntimeError, match='CUDA'):
        _roundtrip(tape.ones(2), map_location=torch.device('cuda'))


def test_map_location_cuda_without_tensors_is_fine():
    # as torch: the location is applied per storage
    assert _roundtrip({'epoch': 1}, map_location='cuda') == {'epoch': 1}


# -- files ---------------------------------------------------------------------
def test_paths_str_and_pathlike(tmp_path):
    x = tape.randn(4)
    tape.save(x, str(tmp_path / 'a.pt'))
    tape.save(x, tmp_path / 'b.pt')
    _same(x, tape.load(tmp_path / 'a.pt'))
    _same(x, tape.load(str(tmp_path / 'b.pt')))
    assert isinstance(tmp_path / 'b.pt', os.PathLike)


def test_open_file_objects(tmp_path):
    x = tape.randn(4)
    with open(tmp_path / 'c.pt', 'wb') as f:
        tape.save(x, f)
    with open(tmp_path / 'c.pt', 'rb') as f:
        _same(x, tape.load(f))


def test_save_to_non_seekable_stream(tmp_path):
    class WriteOnly(io.RawIOBase):
        def __init__(self):
            self.chunks = []

        def writable(self):
            return True

        def write(self, b):
            self.chunks.append(bytes(b))
            return len(b)

    w = WriteOnly()
    x = {'a': tape.randn(3, 2), 'b': [1, 2]}
    tape.save(x, w)
    r = tape.load(io.BytesIO(b''.join(w.chunks)))
    _same(x['a'], r['a'])
    assert r['b'] == [1, 2]


def test_mmap(tmp_path):
    x = tape.randn(50, dtype=tape.float64)
    y = tape.arange(10)
    p = tmp_path / 'm.pt'
    tape.save({'x': x, 'y': y, 'v': x[5:10]}, p)
    r = tape.load(p, mmap=True)
    _same(x, r['x'])
    _same(y, r['y'])
    assert r['x']._data.ctypes.data % 8 == 0                # aligned in the file
    r['x'].add_(1)                                          # copy-on-write: file unchanged
    _same(x + 1, r['x'])
    _same(x[5:10] + 1, r['v'])
    _same(x, tape.load(p)['x'])
    with pytest.raises(ValueError, match='file path'):
        tape.load(io.BytesIO(p.read_bytes()), mmap=True)


def test_format_is_a_zip_with_json_metadata(tmp_path):
    p = tmp_path / 'f.pt'
    tape.save({'w': tape.ones(2, 3)}, p)
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        assert 'tape_archive/data.pkl' in names and 'tape_archive/meta.json' in names
        assert z.read('tape_archive/data/0') == np.ones((2, 3), np.float32).tobytes()


# -- errors --------------------------------------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        tape.load(tmp_path / 'missing.pt')
    with pytest.raises(RuntimeError, match='Parent directory'):
        tape.save(tape.ones(1), tmp_path / 'no' / 'dir.pt')


@pytest.mark.parametrize('bad', [123, None, object()])
def test_not_a_file(bad):
    with pytest.raises(AttributeError, match='seek'):
        tape.load(bad)
    with pytest.raises(AttributeError, match="'write' attribute"):
        tape.save(tape.ones(1), bad)


def test_error_types_match_torch(tmp_path):
    torch = pytest.importorskip('torch')

    def kind(fn):
        try:
            fn()
        except Exception as e:          # noqa: BLE001
            return type(e)
        return None

    for bad in [123, None, object(), tmp_path / 'missing.pt', tmp_path / 'no' / 'x.pt']:
        assert kind(lambda: tape.load(bad)) is kind(lambda: torch.load(bad)), bad
        assert kind(lambda: tape.save(tape.ones(1), bad)) is \
            kind(lambda: torch.save(torch.ones(1), bad)), bad
    for data in [b'', b'garbage bytes']:
        for wo in (True, False):
            assert kind(lambda: tape.load(io.BytesIO(data), weights_only=wo)) is \
                kind(lambda: torch.load(io.BytesIO(data), weights_only=wo)), (data, wo)


def test_torch_file_loads(tmp_path):
    # (tests/test_serialization_torch.py covers torch files in depth)
    torch = pytest.importorskip('torch')
    p = tmp_path / 'torch.pt'
    torch.save({'w': torch.ones(2)}, p)
    got = tape.load(p)
    assert list(got) == ['w'] and got['w'].tolist() == [1.0, 1.0]


def test_values_match_torch_after_same_sequence(tmp_path):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([3, 1, 2])
    for lib, name in ((torch, 'torch'), (tape, 'tape')):
        t = lib.tensor(a, requires_grad=True)
        obj = {'t': t, 'tt': t.t(), 'row': t[1], 'i': lib.tensor(idx), 'y': (t * 2)[:, 1:],
               'p': lib.nn.Parameter(lib.tensor(a[0])), 'e': 3, 'l': 0.5}
        lib.save(obj, tmp_path / f'{name}.pt')
    r_torch = torch.load(tmp_path / 'torch.pt')
    r_tape = tape.load(tmp_path / 'tape.pt')
    assert list(r_torch) == list(r_tape)
    for k, v in r_torch.items():
        if isinstance(v, torch.Tensor):
            w = r_tape[k]
            np.testing.assert_array_equal(w.detach()._data, v.detach().numpy(), err_msg=k)
            assert w.requires_grad == v.requires_grad, k
            assert isinstance(w, nn.Parameter) == isinstance(v, torch.nn.Parameter), k
            assert tuple(w.shape) == tuple(v.shape), k
        else:
            assert r_tape[k] == v


def test_top_level_exports():
    assert tape.save is tape.serialization.save and tape.load is tape.serialization.load
    assert pathlib.Path(tape.serialization.__file__).name == 'serialization.py'
