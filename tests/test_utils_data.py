"""tape.utils.data against torch.utils.data."""
import collections
import warnings

import numpy as np
import pytest

import tape
from tape.utils import data as D

torch = pytest.importorskip('torch')
TD = torch.utils.data


def _np(x):
    return x.detach().numpy() if hasattr(x, 'detach') else np.asarray(x)


def _dt(t):
    """A tensor's dtype name, the same for both libraries ('float32', 'int64')."""
    return str(t.dtype).replace('torch.', '').replace('tape.', '')


def _same(a, b):
    """Collated structures equal: same container types, tensor dtypes/shapes/values."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, tape.Tensor), type(a)
        assert _dt(a) == _dt(b) and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(_np(a), b.numpy())
    elif isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in b:
            _same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (type(a), type(b))
        for u, v in zip(a, b):
            _same(u, v)
    else:
        assert type(a) is type(b) and a == b


def test_training_loop_matches_torch():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 5)).astype(np.float32)
    Y = rng.standard_normal((50, 2)).astype(np.float32)
    W1 = rng.standard_normal((8, 5)).astype(np.float32) * 0.3
    W2 = rng.standard_normal((2, 8)).astype(np.float32) * 0.3

    def run(lib, data):
        m = lib.nn.Sequential(lib.nn.Linear(5, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(W1))
            m[0].bias.zero_()
            m[2].weight.copy_(lib.tensor(W2))
            m[2].bias.zero_()
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        ds = data.TensorDataset(lib.tensor(X), lib.tensor(Y))
        loader = data.DataLoader(ds, batch_size=16, shuffle=False)
        losses, batches = [], []
        for epoch in range(3):
            for xb, yb in loader:
                batches.append((tuple(xb.shape), _np(yb)[:, 0].copy()))
                opt.zero_grad()
                loss = lib.nn.functional.mse_loss(m(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses, batches, len(loader)

    tl, tb, tn = run(tape, D)
    rl, rb, rn = run(torch, TD)
    assert tn == rn == 4
    assert [s for s, _ in tb] == [s for s, _ in rb] == [(16, 5)] * 3 + [(2, 5)] + \
        [(16, 5)] * 3 + [(2, 5)] + [(16, 5)] * 3 + [(2, 5)]
    for (_, a), (_, b) in zip(tb, rb):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(tl, rl, rtol=1e-5)


Point = collections.namedtuple('Point', 'x y')


def _samples(lib):
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    return {
        'tensor_f32': [lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])],
        'tensor_i64_2d': [lib.ones(2, 3, dtype=lib.int64), lib.zeros(2, 3, dtype=lib.int64)],
        'int': [1, 2, 3],
        'bool': [True, False],
        'float': [1.5, 2.5],
        'str': ['a', 'b'],
        'bytes': [b'a', b'b'],
        'np_f32': [np.ones(3, np.float32), np.zeros(3, np.float32)],
        'np_i16': [arr, arr + 1],
        'np_f64_scalar': [np.float64(1.0), np.float64(2.0)],
        'np_i32_scalar': [np.int32(1), np.int32(2)],
        'np_f16_scalar': [np.float16(1.0), np.float16(2.0)],
        'np_bool_scalar': [np.bool_(True), np.bool_(False)],
        'np_u8_scalar': [np.uint8(3), np.uint8(4)],
        'np_0d': [np.array(1.5), np.array(2.5)],
        'dict': [{'a': 1, 'b': lib.tensor([1.0])}, {'a': 2, 'b': lib.tensor([2.0])}],
        'tuple': [(1, 2.0, 'x'), (3, 4.0, 'y')],
        'list': [[1, 2.0], [3, 4.0]],
        'namedtuple': [Point(1, 2.0), Point(3, 4.0)],
        'nested': [{'p': Point(lib.tensor(1.0), [np.float32(2)]), 's': ('u', 1)},
                   {'p': Point(lib.tensor(3.0), [np.float32(4)]), 's': ('v', 2)}],
    }


@pytest.mark.parametrize('kind', list(_samples(tape)))
def test_default_collate_matches_torch(kind):
    got = D.default_collate(_samples(tape)[kind])
    want = TD.default_collate(_samples(torch)[kind])
    _same(got, want)


@pytest.mark.parametrize('kind', ['np_f32', 'np_i32_scalar', 'np_0d', 'tuple', 'namedtuple',
                                  'dict', 'str'])
def test_default_convert_matches_torch(kind):
    for a, b in zip(_samples(tape)[kind], _samples(torch)[kind]):
        _same(D.default_convert(a), TD.default_convert(b))
    s = np.array(['a', 'b'])
    assert D.default_convert(s) is s


@pytest.mark.parametrize('bad', [[object(), object()], [None, None],
                                 [np.array(['a']), np.array(['b'])],
                                 [np.array([object()]), np.array([object()])]])
def test_default_collate_errors_match_torch(bad):
    with pytest.raises(TypeError) as want:
        TD.default_collate(bad)
    with pytest.raises(TypeError) as got:
        D.default_collate(bad)
    assert str(got.value) == str(want.value)
    assert 'default_collate: batch must contain tensors' in str(got.value)


def test_default_collate_uneven_lists():
    with pytest.raises(RuntimeError, match='each element in list of batch should be of equal '
                                           'size'):
        D.default_collate([[1, 2], [3]])


def test_collated_batches_and_stack_of_grad_tensors():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    b = D.default_collate([x * 2, x * 3])
    assert tuple(b.shape) == (2, 2) and b.requires_grad
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


@pytest.mark.parametrize('n,bs,drop', [(10, 3, False), (10, 3, True), (9, 3, True),
                                       (2, 5, False), (2, 5, True), (7, 1, False)])
def test_dataloader_len_drop_last_and_batches(n, bs, drop):
    xs = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    tl = D.DataLoader(D.TensorDataset(tape.tensor(xs)), batch_size=bs, drop_last=drop)
    rl = TD.DataLoader(TD.TensorDataset(torch.tensor(xs)), batch_size=bs, drop_last=drop)
    assert len(tl) == len(rl)
    got, want = list(tl), list(rl)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same(a, b)


def test_dataloader_batch_size_none_sampler_and_batch_sampler():
    ds = list(range(10))
    _same(list(D.DataLoader(ds, batch_size=None)), list(TD.DataLoader(ds, batch_size=None)))
    s = [3, 1, 4, 1, 5]
    _same(list(D.DataLoader(ds, batch_size=2, sampler=s)),
          list(TD.DataLoader(ds, batch_size=2, sampler=s)))
    bsamp = [[0, 9], [2, 3, 4]]
    _same(list(D.DataLoader(ds, batch_sampler=bsamp)),
          list(TD.DataLoader(ds, batch_sampler=bsamp)))
    tl = D.DataLoader(ds, batch_size=4, collate_fn=lambda b: sum(b))
    assert list(tl) == list(TD.DataLoader(ds, batch_size=4, collate_fn=lambda b: sum(b)))
    tl = D.DataLoader(ds, batch_size=3, num_workers=2, pin_memory=True, persistent_workers=True,
                      prefetch_factor=4, worker_init_fn=lambda i: None)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        assert [b.tolist() for b in tl] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert D.get_worker_info() is None


class _Stream(D.IterableDataset):
    def __init__(self, n, with_len=True):
        self.n = n
        self.with_len = with_len

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.with_len:
            raise TypeError('no len')
        return self.n


class _TStream(TD.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


@pytest.mark.parametrize('bs,drop', [(3, False), (3, True), (None, False), (1, False)])
def test_iterable_dataset(bs, drop):
    tl = D.DataLoader(_Stream(7), batch_size=bs, drop_last=drop)
    rl = TD.DataLoader(_TStream(7), batch_size=bs, drop_last=drop)
    assert len(tl) == len(rl)
    _same(list(tl), list(rl))
    _same(list(D.DataLoader(D.ChainDataset([_Stream(2), _Stream(3)]), batch_size=2)),
          list(TD.DataLoader(TD.ChainDataset([_TStream(2), _TStream(3)]), batch_size=2)))
    assert len(_Stream(2) + _Stream(3)) == 5


def test_iterable_dataset_longer_than_len_warns():
    class Liar(_Stream):
        def __len__(self):
            return 2
    loader = D.DataLoader(Liar(4), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match='was reported to be 2'):
        assert list(loader) == [0, 1, 2, 3]


def test_dataloader_argument_errors_match_torch():
    ds, it = list(range(4)), _Stream(3)
    tit = _TStream(3)
    cases = [
        (dict(num_workers=-1), ds, ds),
        (dict(timeout=-1), ds, ds),
        (dict(prefetch_factor=2), ds, ds),
        (dict(persistent_workers=True), ds, ds),
        (dict(shuffle=True, sampler=[0, 1]), ds, ds),
        (dict(batch_sampler=[[0]], batch_size=2), ds, ds),
        (dict(batch_sampler=[[0]], drop_last=True), ds, ds),
        (dict(batch_size=None, drop_last=True), ds, ds),
        (dict(shuffle=True), it, tit),
        (dict(sampler=[0]), it, tit),
        (dict(multiprocessing_context='fork'), ds, ds),
    ]
    for kw, tds, rds in cases:
        with pytest.raises(ValueError) as want:
            TD.DataLoader(rds, **kw)
        with pytest.raises(ValueError) as got:
            D.DataLoader(tds, **kw)
        if 'sampler' in kw and kw.get('sampler') == [0]:
            assert 'expected unspecified sampler option' in str(got.value)
        else:
            assert str(got.value) == str(want.value), kw
    loader = D.DataLoader(ds)
    with pytest.raises(ValueError, match='batch_size attribute should not be set after '
                                         'DataLoader is initialized'):
        loader.batch_size = 3


def test_shuffle_is_a_permutation_seeded_by_tape():
    ds = list(range(20))
    tape.manual_seed(5)
    a = [x for b in D.DataLoader(ds, batch_size=4, shuffle=True) for x in b.tolist()]
    tape.manual_seed(5)
    b = [x for b in D.DataLoader(ds, batch_size=4, shuffle=True) for x in b.tolist()]
    assert a == b and sorted(a) == ds and a != ds
    g1, g2 = tape.Generator().manual_seed(1), tape.Generator().manual_seed(1)
    c = [x for b in D.DataLoader(ds, batch_size=4, shuffle=True, generator=g1) for x in b.tolist()]
    d = [x for b in D.DataLoader(ds, batch_size=4, shuffle=True, generator=g2) for x in b.tolist()]
    assert c == d and sorted(c) == ds


def test_deterministic_samplers_match_torch():
    ds = list(range(10))
    assert list(D.SequentialSampler(ds)) == list(TD.SequentialSampler(ds))
    assert len(D.SequentialSampler(ds)) == 10
    for bs, drop in [(3, False), (3, True), (5, True), (11, False)]:
        a = D.BatchSampler(D.SequentialSampler(ds), bs, drop)
        b = TD.BatchSampler(TD.SequentialSampler(ds), bs, drop)
        assert list(a) == list(b) and len(a) == len(b)
    assert list(D.BatchSampler([5, 4, 3], 2, False)) == [[5, 4], [3]]


def test_random_samplers_properties():
    ds = list(range(10))
    g = tape.Generator().manual_seed(0)
    assert sorted(D.RandomSampler(ds, generator=g)) == ds
    s = D.RandomSampler(ds, num_samples=25, generator=g)
    drawn = list(s)
    assert len(s) == 25 and len(drawn) == 25
    assert sorted(drawn[:10]) == ds and sorted(drawn[10:20]) == ds       # whole permutations
    r = list(D.RandomSampler(ds, replacement=True, num_samples=70, generator=g))
    assert len(r) == 70 and set(r) <= set(ds) and len(set(r)) < 70
    sub = D.SubsetRandomSampler([7, 8, 9], generator=g)
    assert sorted(sub) == [7, 8, 9] and len(sub) == 3
    w = list(D.WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 50, generator=g))
    assert set(w) == {1, 3} and len(w) == 50
    w = list(D.WeightedRandomSampler([0.1, 0.9, 0.4, 5.0], 4, replacement=False, generator=g))
    assert sorted(w) == [0, 1, 2, 3]
    a = list(D.RandomSampler(ds, generator=tape.Generator().manual_seed(3)))
    b = list(D.RandomSampler(ds, generator=tape.Generator().manual_seed(3)))
    assert a == b


def test_sampler_errors_match_torch():
    cases = [
        (lambda m: m.RandomSampler([1, 2], replacement=1), TypeError),
        (lambda m: m.RandomSampler([1, 2], num_samples=0), ValueError),
        (lambda m: m.RandomSampler([], ), ValueError),
        (lambda m: m.WeightedRandomSampler([1.0], 0), ValueError),
        (lambda m: m.WeightedRandomSampler([1.0], True), ValueError),
        (lambda m: m.WeightedRandomSampler([1.0], 1, replacement=0), ValueError),
        (lambda m: m.WeightedRandomSampler([[1.0]], 1), ValueError),
        (lambda m: m.BatchSampler([1], 0, False), ValueError),
        (lambda m: m.BatchSampler([1], 2, 1), ValueError),
    ]
    for make, exc in cases:
        with pytest.raises(exc) as want:
            make(TD)
        with pytest.raises(exc) as got:
            make(D)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize('n,lengths', [(10, [3, 7]), (10, [0.5, 0.5]), (11, [0.5, 0.5]),
                                       (10, [0.3, 0.3, 0.4]), (7, [0.1, 0.2, 0.7]),
                                       (5, [1 / 3, 1 / 3, 1 / 3]), (3, [0.1, 0.9])])
def test_random_split_lengths_match_torch(n, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        got = D.random_split(range(n), lengths, generator=tape.Generator().manual_seed(0))
        want = TD.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in got] == [len(s) for s in want]
    assert sorted(x for s in got for x in s) == list(range(n))
    assert all(isinstance(s, D.Subset) for s in got)


def test_random_split_errors_and_warning():
    with pytest.raises(ValueError, match='Sum of input lengths does not equal'):
        D.random_split(range(5), [2, 2])
    with pytest.raises(ValueError, match='Fraction at index 1 is not between 0 and 1'):
        D.random_split(range(5), [0.5, 1.5, -1.0])
    with pytest.warns(UserWarning, match='Length of split at index 1 is 0'):
        assert [len(s) for s in D.random_split(range(1), [0.1, 0.9])] == [1, 0]
    tape.manual_seed(2)
    a = [list(s) for s in D.random_split(range(9), [4, 5])]
    tape.manual_seed(2)
    assert a == [list(s) for s in D.random_split(range(9), [4, 5])]


def test_datasets_match_torch():
    a = np.arange(12, dtype=np.float32).reshape(6, 2)
    td = D.TensorDataset(tape.tensor(a), tape.arange(6))
    rd = TD.TensorDataset(torch.tensor(a), torch.arange(6))
    assert len(td) == len(rd) == 6
    _same(td[2], rd[2])
    with pytest.raises(AssertionError, match='Size mismatch between tensors'):
        D.TensorDataset(tape.ones(3), tape.ones(4))
    c = D.ConcatDataset([list(range(3)), list(range(10, 14))])
    rc = TD.ConcatDataset([list(range(3)), list(range(10, 14))])
    assert len(c) == 7 and [c[i] for i in range(-7, 7)] == [rc[i] for i in range(-7, 7)]
    assert c.cumulative_sizes == rc.cumulative_sizes == [3, 7]
    with pytest.raises(ValueError, match='absolute value of index should not exceed'):
        c[-8]
    with pytest.raises(AssertionError, match='datasets should not be an empty iterable'):
        D.ConcatDataset([])
    with pytest.raises(AssertionError, match='ConcatDataset does not support IterableDataset'):
        D.ConcatDataset([_Stream(2)])
    both = D.Subset(list(range(10)), [1, 3]) + D.Subset(list(range(10)), [5])
    assert isinstance(both, D.ConcatDataset) and list(both) == [1, 3, 5]
    s = D.Subset(td, [4, 0])
    assert len(s) == 2 and s[0][1].item() == 4
    _same(list(D.DataLoader(s, batch_size=2)), list(TD.DataLoader(TD.Subset(rd, [4, 0]),
                                                                  batch_size=2)))
    st = D.StackDataset(x=list(range(3)), y=['a', 'b', 'c'])
    assert st[1] == {'x': 1, 'y': 'b'} and len(st) == 3
    with pytest.raises(NotImplementedError, match='Subclasses of Dataset should implement'):
        D.Dataset()[0]
    with pytest.raises(AssertionError, match='ChainDataset only supports IterableDataset'):
        list(D.ChainDataset([[1, 2]]))


def test_exposed_like_torch():
    import tape.utils.data.dataloader
    import tape.utils.data.dataset
    import tape.utils.data.sampler
    for name in ('Dataset', 'IterableDataset', 'TensorDataset', 'ConcatDataset',
                 'ChainDataset', 'Subset', 'random_split', 'Sampler', 'SequentialSampler',
                 'RandomSampler', 'SubsetRandomSampler', 'WeightedRandomSampler',
                 'BatchSampler', 'DataLoader', 'default_collate', 'default_convert',
                 'get_worker_info'):
        assert hasattr(tape.utils.data, name) and hasattr(TD, name), name
    assert tape.utils.data.dataloader.default_collate is D.default_collate
    assert issubclass(D.IterableDataset, D.Dataset)
