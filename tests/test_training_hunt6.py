"""Differential hunt (optimizers, schedulers, data loading, serialization): the
discrepancies with PyTorch found and fixed, each pinned against torch."""
import numpy as np
import pytest

import tape

torch = pytest.importorskip("torch")


# -- default_collate_fn_map: filled at import, extensible, at torch's module path

def test_collate_fn_map_user_entry_keeps_defaults():
    from tape.utils.data._utils.collate import default_collate_fn_map, default_collate
    from torch.utils.data._utils.collate import (default_collate_fn_map as t_map,
                                                 default_collate as t_collate)

    class Custom:
        pass

    def fn(batch, *, collate_fn_map=None):
        return len(batch)

    saved, t_saved = dict(default_collate_fn_map), dict(t_map)
    default_collate_fn_map[Custom] = fn
    t_map[Custom] = fn
    try:
        got = default_collate([(Custom(), tape.ones(2), 1.5)] * 3)
        want = t_collate([(Custom(), torch.ones(2), 1.5)] * 3)
    finally:
        default_collate_fn_map.clear()
        default_collate_fn_map.update(saved)
        t_map.clear()
        t_map.update(t_saved)
    assert got[0] == want[0] == 3
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    assert got[2].dtype == tape.float64 and want[2].dtype == torch.float64


def test_collate_module_path_and_custom_map():
    import tape.utils.data._utils.collate as tc
    import torch.utils.data._utils.collate as oc
    assert set(tc.default_collate_fn_map) - {tape.Tensor} \
        == set(oc.default_collate_fn_map) - {torch.Tensor}
    batch = [{'a': 1, 's': 'x'}, {'a': 2, 's': 'y'}]
    got = tc.collate(batch, collate_fn_map=tc.default_collate_fn_map)
    want = oc.collate(batch, collate_fn_map=oc.default_collate_fn_map)
    assert got['a'].tolist() == want['a'].tolist() and got['s'] == want['s']
    # a map with only ints: floats are not collatable
    with pytest.raises(TypeError):
        tc.collate([1.5, 2.5], collate_fn_map={int: tc.collate_int_fn})
    with pytest.raises(TypeError):
        oc.collate([1.5, 2.5], collate_fn_map={int: oc.collate_int_fn})
    assert tape.utils.data._utils.collate.default_collate is tape.utils.data.default_collate


# -- Optimizer state_dict / load_state_dict hooks

def _hook_log(L):
    p = L.nn.Parameter(L.ones(2))
    o = L.optim.SGD([p], lr=.1, momentum=.9)
    log = []
    o.register_state_dict_pre_hook(lambda opt: log.append('sdpre'))
    o.register_state_dict_pre_hook(lambda opt: log.append('sdpre0'), prepend=True)

    def post(opt, sd):
        log.append('sdpost')
        sd['extra'] = 1
        return sd
    h = o.register_state_dict_post_hook(post)

    def ldpre(opt, sd):
        log.append(('ldpre', sorted(sd)))
        sd = dict(sd)
        sd.pop('extra', None)
        sd['param_groups'][0]['lr'] = 0.5
        return sd
    o.register_load_state_dict_pre_hook(ldpre)
    o.register_load_state_dict_post_hook(
        lambda opt: log.append(('ldpost', opt.param_groups[0]['lr'])))
    p.grad = L.ones(2)
    o.step()
    sd = o.state_dict()
    o.load_state_dict(sd)
    h.remove()
    sd2 = o.state_dict()
    return log, sorted(sd), sorted(sd2), o.param_groups[0]['lr']


def test_optimizer_state_dict_hooks_match_torch():
    assert _hook_log(tape) == _hook_log(torch)


# -- DistributedSampler (explicit num_replicas / rank: tape has no process group)

@pytest.mark.parametrize('n', [1, 2, 9, 10, 12])
@pytest.mark.parametrize('replicas', [1, 3, 4])
@pytest.mark.parametrize('drop_last', [False, True])
def test_distributed_sampler_unshuffled_matches_torch(n, replicas, drop_last):
    from torch.utils.data import DistributedSampler as TDS
    from tape.utils.data import DistributedSampler
    for r in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=False,
                               drop_last=drop_last)
        t = TDS(range(n), num_replicas=replicas, rank=r, shuffle=False, drop_last=drop_last)
        assert list(s) == list(t)
        assert len(s) == len(t) and s.total_size == t.total_size


def test_distributed_sampler_shuffle_partitions_and_epochs():
    from tape.utils.data import DataLoader, DistributedSampler
    from tape.utils.data.distributed import DistributedSampler as DS2
    assert DS2 is DistributedSampler
    shares = [list(DistributedSampler(range(10), num_replicas=3, rank=r, seed=5))
              for r in range(3)]
    assert all(len(s) == 4 for s in shares)
    flat = sum(shares, [])
    assert set(flat) == set(range(10)) and len(flat) == 12     # two indices repeated
    s = DistributedSampler(range(50), num_replicas=2, rank=0)
    e0 = list(s)
    assert list(s) == e0                                         # same epoch, same order
    s.set_epoch(1)
    assert list(s) != e0
    assert len(DataLoader(range(10), batch_size=2,
                          sampler=DistributedSampler(range(10), num_replicas=2, rank=0))) == 3
    with pytest.raises(ValueError):
        DistributedSampler(range(10), num_replicas=3, rank=3)
    with pytest.raises(ValueError):
        DistributedSampler(range(10), num_replicas=3, rank=-1)
    with pytest.raises(RuntimeError):              # no process group to ask
        DistributedSampler(range(10))


# -- Adafactor

_rng = np.random.default_rng(0)
_AF_P = [_rng.standard_normal(s) for s in [(3, 4), (5,), (2, 3, 4), (), (1, 6)]]
_AF_G = [[_rng.standard_normal(a.shape) for a in _AF_P] for _ in range(6)]


def _adafactor_run(L, kw, dtype, groups):
    dt = getattr(L, dtype)
    ps = [L.nn.Parameter(L.tensor(a.copy(), dtype=dt)) for a in _AF_P]
    params = [{'params': ps[:2]}, {'params': ps[2:], 'lr': 0.05}] if groups else ps
    o = L.optim.Adafactor(params, **kw)
    for s in range(6):
        for i, p in enumerate(ps):
            p.grad = None if (i == 1 and s % 2) else L.tensor(_AF_G[s][i].copy(), dtype=dt)
        o.step()
    return [p.detach().numpy() for p in ps], o.state_dict()


@pytest.mark.parametrize('kw', [{}, dict(lr=0.1), dict(weight_decay=0.1, maximize=True),
                                dict(eps=(1e-3, 1e-2), d=2.0, beta2_decay=-0.5)])
@pytest.mark.parametrize('dtype,tol', [('float64', 1e-10), ('float32', 1e-5)])
@pytest.mark.parametrize('groups', [False, True])
def test_adafactor_matches_torch(kw, dtype, tol, groups):
    got, sd = _adafactor_run(tape, kw, dtype, groups)
    want, tsd = _adafactor_run(torch, kw, dtype, groups)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.numpy() if hasattr(b, 'numpy') else b, rtol=tol, atol=tol)
    assert sd['state'].keys() == tsd['state'].keys()
    for k in tsd['state']:
        assert sorted(sd['state'][k]) == sorted(tsd['state'][k])
        for name, v in tsd['state'][k].items():
            assert tuple(sd['state'][k][name].shape) == tuple(v.shape)
            np.testing.assert_allclose(sd['state'][k][name].numpy(), v.numpy(),
                                       rtol=tol, atol=tol)
    for g, tg in zip(sd['param_groups'], tsd['param_groups']):
        assert g == tg


@pytest.mark.parametrize('bad', [dict(lr=-1), dict(beta2_decay=0.1), dict(eps=(-1, 1e-3)),
                                 dict(eps=(None, -1)), dict(d=0.5), dict(weight_decay=-1)])
def test_adafactor_argument_errors(bad):
    with pytest.raises(ValueError):
        torch.optim.Adafactor([torch.nn.Parameter(torch.ones(2))], **bad)
    with pytest.raises(ValueError):
        tape.optim.Adafactor([tape.nn.Parameter(tape.ones(2))], **bad)


def test_adafactor_state_dict_round_trip():
    def run(L):
        ps = [L.nn.Parameter(L.tensor(a.copy())) for a in _AF_P[:2]]
        o = L.optim.Adafactor(ps)
        for s in range(3):
            for i, p in enumerate(ps):
                p.grad = L.tensor(_AF_G[s][i])
            o.step()
        qs = [L.nn.Parameter(p.detach().clone()) for p in ps]
        o2 = L.optim.Adafactor(qs)
        o2.load_state_dict(o.state_dict())
        for s in range(3, 6):
            for i, p in enumerate(qs):
                p.grad = L.tensor(_AF_G[s][i])
            o2.step()
        return [q.detach().numpy() for q in qs]
    for a, b in zip(run(tape), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


# -- serialization: several saves in one file; storage offsets of loaded views

def _two_saves(L):
    import io
    b = io.BytesIO()
    L.save({'a': L.ones(2)}, b)
    mid = b.tell()
    L.save({'b': L.zeros(1)}, b)
    b.seek(0)
    first = L.load(b)
    b.seek(mid)
    second = L.load(b)
    return sorted(first), first[next(iter(first))].tolist(), sorted(second)


def test_load_reads_the_archive_at_the_current_position():
    assert _two_saves(tape) == _two_saves(torch) == (['a'], [1.0, 1.0], ['b'])


def test_sequential_loads_from_one_file(tmp_path):
    f = tmp_path / 'many.pt'
    with open(f, 'wb') as fh:
        for i in range(3):
            tape.save({'i': tape.tensor(i)}, fh)
    with open(f, 'rb') as fh:
        assert [tape.load(fh)['i'].item() for _ in range(3)] == [0, 1, 2]


@pytest.mark.parametrize('start', [1, 2, 3, 5])
def test_loaded_views_keep_storage_offsets(start):
    import io
    for L in (tape, torch):
        base = L.arange(10.)
        b = io.BytesIO()
        L.save({'b': base, 'v': base[start:7], 't': base[1::2]}, b)
        b.seek(0)
        r = L.load(b)
        assert r['v'].storage_offset() == start
        assert r['t'].storage_offset() == 1 and r['t'].stride() == (2,)
        r['v'][0] = -1.0
        assert r['b'][start].item() == -1.0


def test_loaded_torch_file_views_keep_storage_offsets(tmp_path):
    f = tmp_path / 't.pt'
    tb = torch.arange(10.)
    torch.save({'b': tb, 'v': tb[3:5]}, f)
    for _ in range(5):
        assert tape.load(f)['v'].storage_offset() == 3


def test_mmap_loaded_views_keep_storage_offsets(tmp_path):
    f, f2 = tmp_path / 'a.pt', tmp_path / 'b.pt'
    base = tape.arange(10.)
    tape.save({'b': base, 'v': base[3:5]}, f)
    r = tape.load(f, mmap=True)
    assert r['v'].storage_offset() == 3
    r['v'][0] = -5.0
    assert r['b'][3].item() == -5.0
    assert tape.load(f)['b'][3].item() == 3.0           # copy-on-write: the file is unchanged
    tb = torch.arange(10.)
    torch.save({'b': tb, 'v': tb[3:5]}, f2)
    r = tape.load(f2, mmap=True)
    assert r['v'].storage_offset() == torch.load(f2, mmap=True)['v'].storage_offset() == 3
    assert r['v'].tolist() == [3.0, 4.0]
