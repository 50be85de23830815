"""tape.load of files written by torch.save (torch is only the oracle that writes them)."""
import io
import pathlib
import pickle
import warnings

import numpy as np
import pytest

import tape
import tape.nn as nn

torch = pytest.importorskip('torch')


def _save(obj, tmp_path, name='f.pt', **kw):
    p = tmp_path / name
    torch.save(obj, p, **kw)
    return p


def _same(tp, tt):
    """A tape tensor equal to a torch tensor: values, dtype, shape, requires_grad."""
    assert isinstance(tp, tape.Tensor), type(tp)
    assert tuple(tp.shape) == tuple(tt.shape)
    a = tp._data
    assert a.dtype == tt.numpy(force=True).dtype if tt.dtype != torch.bfloat16 \
        else a.dtype == np.float32
    want = tt.detach().float().numpy() if tt.dtype == torch.bfloat16 else tt.detach().numpy()
    np.testing.assert_array_equal(a, want)
    assert tp.requires_grad == tt.requires_grad


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc = torch.nn.Linear(3 * 4 * 4, 5)
        self.lstm = torch.nn.LSTM(5, 6, num_layers=2, batch_first=True)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        y = self.fc(h.flatten(1))
        out, _ = self.lstm(y.unsqueeze(1).repeat(1, 3, 1))
        return out


class _TapeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 4 * 4, 5)
        self.lstm = nn.LSTM(5, 6, num_layers=2, batch_first=True)

    def forward(self, x):
        h = tape.relu(self.bn(self.conv(x)))
        y = self.fc(h.flatten(1))
        out, _ = self.lstm(y.unsqueeze(1).repeat(1, 3, 1))
        return out


@pytest.mark.parametrize('legacy', [False, True])
def test_state_dict_into_tape_model(tmp_path, legacy):
    torch.manual_seed(0)
    tm = _TorchNet()
    x = torch.randn(2, 2, 4, 4)
    tm.train()
    tm(x)                                   # running stats and num_batches_tracked move
    tm.eval()
    p = _save(tm.state_dict(), tmp_path, _use_new_zipfile_serialization=not legacy)
    sd = tape.load(p)
    assert list(sd) == list(tm.state_dict())
    nbt = sd['bn.num_batches_tracked']
    assert nbt._data.dtype == np.int64 and nbt.shape == () and nbt.item() == 1
    for k, v in tm.state_dict().items():
        _same(sd[k], v)
    m = _TapeNet()
    m.load_state_dict(sd)
    m.eval()
    with torch.no_grad():
        want = tm(x).numpy()
    got = m(tape.tensor(x.numpy())).detach()._data
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert m.bn.num_batches_tracked.item() == 1


def test_checkpoint_with_nested_containers(tmp_path):
    obj = {'model': torch.nn.Linear(2, 3).state_dict(), 'epoch': 7, 'lr': 0.5,
           'name': 'run', 'hist': [1, 2.5, ('a', None, True)], 'nested': {'t': (torch.ones(2),)},
           'size': torch.Size([2, 3]), 'dtype': torch.float64, 'dev': torch.device('cpu'),
           'b': b'raw', 'set': {1, 2}}
    r = tape.load(_save(obj, tmp_path))
    assert r['epoch'] == 7 and r['lr'] == 0.5 and r['name'] == 'run'
    assert r['hist'] == [1, 2.5, ('a', None, True)]
    assert r['b'] == b'raw' and r['set'] == {1, 2}
    _same(r['nested']['t'][0], torch.ones(2))
    assert isinstance(r['size'], tape.Size) and r['size'] == (2, 3)
    assert r['dtype'] == tape.float64
    assert r['dev'] == tape.device('cpu')
    assert type(r['model']).__name__ == 'OrderedDict'
    lin = nn.Linear(2, 3)
    lin.load_state_dict(r['model'])
    _same(lin.weight.detach(), obj['model']['weight'])


@pytest.mark.parametrize('legacy', [False, True])
def test_all_dtypes(tmp_path, legacy):
    ts = {
        'f32': torch.tensor([1.5, -2.0]), 'f64': torch.tensor([1e-300, 3.0], dtype=torch.float64),
        'f16': torch.tensor([0.5, 65504.0], dtype=torch.float16),
        'i8': torch.tensor([-128, 127], dtype=torch.int8),
        'i16': torch.tensor([-30000, 2], dtype=torch.int16),
        'i32': torch.tensor([-2**31, 5], dtype=torch.int32),
        'i64': torch.tensor([-2**63, 2**62]), 'u8': torch.tensor([0, 255], dtype=torch.uint8),
        'bool': torch.tensor([True, False]),
        'c64': torch.tensor([1 + 2j], dtype=torch.complex64),
    }
    r = tape.load(_save(ts, tmp_path, _use_new_zipfile_serialization=not legacy))
    for k, v in ts.items():
        a = r[k]._data
        assert a.dtype == v.numpy().dtype, k
        np.testing.assert_array_equal(a, v.numpy())


def test_uint16_uses_rebuild_v3(tmp_path):
    t = torch.tensor([1, 60000], dtype=torch.int32).to(torch.uint16)
    r = tape.load(_save({'u': t, 'u32': torch.tensor([7]).to(torch.uint32)}, tmp_path))
    assert r['u']._data.dtype == np.uint16 and r['u']._data.tolist() == [1, 60000]
    assert r['u32']._data.dtype == np.uint32 and r['u32']._data.tolist() == [7]


@pytest.mark.parametrize('legacy', [False, True])
def test_bfloat16_loads_as_float32_with_a_warning(tmp_path, legacy):
    b = torch.tensor([[1.5, -2.25], [3e38, 1e-3]], dtype=torch.bfloat16)
    p = _save({'b': b, 'bt': b.t(), 'dt': torch.bfloat16}, tmp_path,
              _use_new_zipfile_serialization=not legacy)
    with pytest.warns(UserWarning, match='bfloat16'):
        r = tape.load(p)
    assert r['b']._data.dtype == np.float32
    np.testing.assert_array_equal(r['b']._data, b.float().numpy())
    np.testing.assert_array_equal(r['bt']._data, b.t().float().numpy())
    assert np.shares_memory(r['b']._data, r['bt']._data)
    assert r['dt'] == tape.float32


def test_unsupported_dtype_is_a_clear_error(tmp_path):
    p = _save({'f8': torch.zeros(2, dtype=torch.float8_e4m3fn)}, tmp_path)
    with pytest.raises(RuntimeError, match='float8'):
        tape.load(p)


@pytest.mark.parametrize('legacy', [False, True])
def test_shared_storage_and_views(tmp_path, legacy):
    base = torch.arange(24.).reshape(4, 6)
    obj = {'base': base, 'row': base[1], 'cols': base[:, 1:5:2], 'tr': base.t(),
           'same': base, 'flat': base.view(-1)[3:9]}
    r = tape.load(_save(obj, tmp_path, _use_new_zipfile_serialization=not legacy))
    for k, v in obj.items():
        _same(r[k], v)
    assert r['same'] is r['base']
    for k in ('row', 'cols', 'tr', 'flat'):
        assert np.shares_memory(r['base']._data, r[k]._data), k
    assert r['cols']._data.strides == (24, 8)       # torch's element strides (6, 2) * 4
    assert r['tr']._data.strides == (4, 24)
    r['base'].data[1, 1] = -1.0                     # one memory, as in torch
    assert r['row'][1].item() == -1.0 and r['cols'][1, 0].item() == -1.0
    assert r['tr'][1, 1].item() == -1.0


def test_saved_slice_keeps_its_offset(tmp_path):
    base = torch.arange(10.)
    r = tape.load(_save({'s': base[7:]}, tmp_path))     # the whole storage is in the file
    assert r['s']._data.tolist() == [7., 8., 9.]


def test_zero_dim_and_empty(tmp_path):
    obj = {'s': torch.tensor(3.5), 'i': torch.tensor(2), 'e': torch.empty(0),
           'e2': torch.zeros(3, 0, 2), 'el': torch.empty(0, dtype=torch.int64)}
    r = tape.load(_save(obj, tmp_path))
    for k, v in obj.items():
        _same(r[k], v)
    assert r['s'].item() == 3.5 and r['s'].dim() == 0


@pytest.mark.parametrize('legacy', [False, True])
def test_parameters_and_requires_grad(tmp_path, legacy):
    p = torch.nn.Parameter(torch.ones(2, 2))
    q = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
    w = torch.nn.Parameter(torch.ones(1))
    w.tag = 'x'                                     # _rebuild_parameter_with_state
    rg = torch.ones(2, requires_grad=True)
    t = torch.ones(2)
    t.note = 5                                      # _rebuild_from_type_v2
    r = tape.load(_save({'p': p, 'q': q, 'w': w, 'rg': rg, 't': t, 'plain': torch.ones(1)},
                        tmp_path, _use_new_zipfile_serialization=not legacy))
    assert isinstance(r['p'], nn.Parameter) and r['p'].requires_grad
    assert isinstance(r['q'], nn.Parameter) and not r['q'].requires_grad
    assert isinstance(r['w'], nn.Parameter) and r['w'].tag == 'x'
    assert not isinstance(r['rg'], nn.Parameter) and r['rg'].requires_grad and r['rg'].is_leaf
    assert r['t'].note == 5 and not isinstance(r['t'], nn.Parameter)
    assert not r['plain'].requires_grad
    (r['p'] * 2).sum().backward()
    np.testing.assert_array_equal(r['p'].grad._data, np.full((2, 2), 2.0, np.float32))


class Custom:
    def __init__(self, v):
        self.v = v


def test_weights_only_refuses_other_globals(tmp_path):
    p = _save({'c': Custom(3), 't': torch.ones(1)}, tmp_path)
    with pytest.raises(pickle.UnpicklingError, match=r'(?s)Weights only load failed.*Custom'):
        tape.load(p)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(p)                               # as torch does
    r = tape.load(p, weights_only=False)
    assert isinstance(r['c'], Custom) and r['c'].v == 3
    with tape.serialization.safe_globals([Custom]):
        assert tape.load(p)['c'].v == 3


def test_whole_module_refused_without_torch(tmp_path):
    p = _save(torch.nn.Linear(2, 2), tmp_path)
    with pytest.raises(pickle.UnpicklingError, match='torch.nn.modules.linear.Linear'):
        tape.load(p)
    with pytest.raises(RuntimeError, match=r'torch global torch\.nn\.modules.*state_dict'):
        tape.load(p, weights_only=False)


def test_numpy_global_refused_by_default(tmp_path):
    p = _save({'a': np.float64(1.5)}, tmp_path)
    with pytest.raises(pickle.UnpicklingError, match='numpy'):
        tape.load(p)
    assert tape.load(p, weights_only=False)['a'] == 1.5


def test_sources_path_pathlib_fileobj_bytesio(tmp_path):
    obj = {'w': torch.arange(4.)}
    p = _save(obj, tmp_path)
    for src in (str(p), pathlib.Path(p)):
        _same(tape.load(src)['w'], obj['w'])
    with open(p, 'rb') as fh:
        _same(tape.load(fh)['w'], obj['w'])
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    _same(tape.load(buf)['w'], obj['w'])
    # a file object positioned after other bytes
    buf2 = io.BytesIO(b'xyz' + buf.getvalue())
    buf2.seek(3)
    _same(tape.load(buf2)['w'], obj['w'])
    lbuf = io.BytesIO()
    torch.save(obj, lbuf, _use_new_zipfile_serialization=False)
    lbuf.seek(0)
    _same(tape.load(lbuf)['w'], obj['w'])


def test_archive_root_name_does_not_matter(tmp_path):
    p = tmp_path / 'my_weights.pt'
    torch.save({'w': torch.ones(2)}, p)
    import zipfile
    root = zipfile.ZipFile(p).namelist()[0].split('/')[0]
    assert root == 'my_weights'                     # torch names it after the file
    _same(tape.load(p)['w'], torch.ones(2))


def test_map_location_and_mmap(tmp_path):
    t = torch.arange(6.).reshape(2, 3)
    p = _save({'t': t, 'v': t[:, 1]}, tmp_path)
    for loc in ('cpu', tape.device('cpu'), torch.device('cpu'), {'cpu': 'cpu'},
                lambda s, loc: s):
        _same(tape.load(p, map_location=loc)['t'], t)
    with pytest.raises(RuntimeError, match='CUDA'):
        tape.load(p, map_location='cuda')
    r = tape.load(p, mmap=True)
    _same(r['t'], t)
    assert np.shares_memory(r['t']._data, r['v']._data)
    r['t'].data[0, 0] = 9.                          # copy-on-write: the file is unchanged
    _same(tape.load(p)['t'], t)


def test_cuda_location_needs_map_location(tmp_path):
    p = _save({'w': torch.ones(2)}, tmp_path)
    import zipfile
    # rewrite the location of the storage as torch would on a GPU machine
    src = zipfile.ZipFile(p)
    q = tmp_path / 'gpu.pt'
    with zipfile.ZipFile(q, 'w') as dst:
        for n in src.namelist():
            data = src.read(n)
            if n.endswith('data.pkl'):
                data = data.replace(b'X\x03\x00\x00\x00cpu', b'X\x06\x00\x00\x00cuda:0')
            dst.writestr(n, data)
    with pytest.raises(RuntimeError, match='CUDA'):
        tape.load(q)
    _same(tape.load(q, map_location='cpu')['w'], torch.ones(2))


def test_legacy_file_with_pickle_module_and_weights_only_false(tmp_path):
    p = _save({'w': torch.arange(3.), 'n': 4}, tmp_path, _use_new_zipfile_serialization=False)
    r = tape.load(p, weights_only=False, pickle_module=pickle)
    _same(r['w'], torch.arange(3.))
    assert r['n'] == 4


@pytest.mark.filterwarnings('ignore::DeprecationWarning')
def test_torchscript_archive_is_refused(tmp_path):
    m = torch.jit.script(torch.nn.Linear(2, 2))
    p = tmp_path / 'ts.pt'
    torch.jit.save(m, p)
    with pytest.raises(RuntimeError, match='TorchScript'):
        tape.load(p)


def test_tape_format_still_roundtrips(tmp_path):
    p = tmp_path / 'tape.pt'
    x = tape.arange(6.).reshape(2, 3)
    tape.save({'x': x, 'v': x[:, 1]}, p)
    r = tape.load(p)
    np.testing.assert_array_equal(r['x']._data, x._data)
    assert np.shares_memory(r['x']._data, r['v']._data)


def test_no_torch_import(tmp_path):
    """tape.load of a torch file in a fresh interpreter never imports torch."""
    import subprocess
    import sys
    p = _save({'w': torch.nn.Parameter(torch.ones(2)), 'b': torch.ones(1, dtype=torch.bfloat16)},
              tmp_path)
    code = ('import sys, warnings, tape; warnings.simplefilter("ignore"); '
            f'r = tape.load({str(p)!r}); '
            'assert isinstance(r["w"], tape.nn.Parameter); '
            'assert "torch" not in sys.modules, "torch was imported"')
    subprocess.run([sys.executable, '-c', code], check=True, timeout=120)


def test_warning_only_once_per_load(tmp_path):
    p = _save({'a': torch.ones(1, dtype=torch.bfloat16),
               'b': torch.ones(2, dtype=torch.bfloat16)}, tmp_path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        tape.load(p)
    assert sum('bfloat16' in str(x.message) for x in w) == 1


def test_top_level_tensor_and_list(tmp_path):
    _same(tape.load(_save(torch.arange(5), tmp_path)), torch.arange(5))
    r = tape.load(_save([torch.ones(1), (2, torch.zeros(2, dtype=torch.float64))], tmp_path))
    _same(r[0], torch.ones(1))
    _same(r[1][1], torch.zeros(2, dtype=torch.float64))


def _to_big_endian(p, q, itemsize):
    """The archive ``p`` rewritten as a big-endian machine writes it."""
    import zipfile
    src = zipfile.ZipFile(p)
    with zipfile.ZipFile(q, 'w') as dst:
        for n in src.namelist():
            data = src.read(n)
            if n.endswith('/byteorder'):
                data = b'big'
            elif '/data/' in n:
                data = np.frombuffer(data, f'<u{itemsize}').astype(f'>u{itemsize}').tobytes()
            dst.writestr(n, data)


@pytest.mark.parametrize('dtype,itemsize', [(torch.float32, 4), (torch.int64, 8),
                                            (torch.bfloat16, 2)])
def test_big_endian_archive(tmp_path, dtype, itemsize):
    t = torch.tensor([[1.5, -2.0, 3.0], [4.0, 5.0, -6.0]]).to(dtype)
    p = _save({'t': t, 'v': t[:, 1]}, tmp_path)
    q = tmp_path / 'big.pt'
    _to_big_endian(p, q, itemsize)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        r = tape.load(q)
    _same(r['t'], t)
    _same(r['v'], t[:, 1])
    assert np.shares_memory(r['t']._data, r['v']._data)
    assert r['t']._data.dtype.isnative


def test_pre_0_4_tar_format_is_a_clear_error():
    import tarfile
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode='w', format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo('storages')
        info.size = 1
        t.addfile(info, io.BytesIO(b'x'))
    b.seek(0)
    with pytest.raises(RuntimeError, match='tar archive'):
        tape.load(b)
