"""tape.nn.utils.rnn (PackedSequence, pack/pad functions) and the recurrent modules
over packed input, side by side with torch.nn.utils.rnn: data, batch sizes, indices,
padded outputs, errors, and gradients to every input and parameter."""
import numpy as np
import pytest

import tape
from tape import nn
from tape.nn.utils import rnn as grnn
from tape.nn.utils.rnn import PackedSequence, pack_padded_sequence

torch = pytest.importorskip('torch')
trnn = torch.nn.utils.rnn

TOL = 1e-10


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(a, b, what=''):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    assert a.dtype == b.dtype, (what, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, err_msg=what)


def _same_packed(gp, tp):
    assert isinstance(gp, PackedSequence) and isinstance(gp, tuple)
    _close(gp.data, tp.data, 'data')
    _close(gp.batch_sizes, tp.batch_sizes, 'batch_sizes')
    for name in ('sorted_indices', 'unsorted_indices'):
        g, t = getattr(gp, name), getattr(tp, name)
        assert (g is None) == (t is None), name
        if g is not None:
            _close(g, t, name)


def _pair(x):
    return tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _weights(shape, seed=7):
    return np.random.default_rng(seed).standard_normal(shape)


# -- pack_padded_sequence / pad_packed_sequence -------------------------------------
@pytest.mark.parametrize('batch_first', [False, True])
@pytest.mark.parametrize('enforce_sorted,lengths', [
    (True, [5, 3, 3, 1]), (False, [3, 5, 1, 3]), (False, [2, 2, 2, 2]), (True, [4, 4, 2, 1])])
@pytest.mark.parametrize('lengths_as', ['list', 'tensor'])
@pytest.mark.parametrize('total_length', [None, 7])
def test_pack_pad_round_trip(batch_first, enforce_sorted, lengths, lengths_as, total_length):
    rng = np.random.default_rng(0)
    T, B = 5, 4
    x = rng.standard_normal((B, T, 2) if batch_first else (T, B, 2))
    gx, tx = _pair(x)
    gl = lengths if lengths_as == 'list' else tape.tensor(lengths)
    tl = lengths if lengths_as == 'list' else torch.tensor(lengths)
    gp = grnn.pack_padded_sequence(gx, gl, batch_first, enforce_sorted)
    tp = trnn.pack_padded_sequence(tx, tl, batch_first, enforce_sorted)
    _same_packed(gp, tp)
    gout, glen = grnn.pad_packed_sequence(gp, batch_first, -2.5, total_length)
    tout, tlen = trnn.pad_packed_sequence(tp, batch_first, -2.5, total_length)
    _close(gout, tout, 'padded')
    _close(glen, tlen, 'lengths')
    w = _weights(tuple(tout.shape))
    (gout * tape.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    _close(gx.grad, tx.grad, 'grad')


def test_pack_trailing_dims_and_2d_input():
    rng = np.random.default_rng(1)
    for shape in [(4, 3), (4, 3, 2, 2)]:
        x = rng.standard_normal(shape)
        gx, tx = _pair(x)
        gp = grnn.pack_padded_sequence(gx, [2, 4, 1], enforce_sorted=False)
        tp = trnn.pack_padded_sequence(tx, [2, 4, 1], enforce_sorted=False)
        _same_packed(gp, tp)
        (gp.data ** 2).sum().backward()
        (tp.data ** 2).sum().backward()
        _close(gx.grad, tx.grad)


def test_integer_data_and_float_lengths():
    seq = np.array([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    gp = grnn.pack_padded_sequence(tape.tensor(seq), tape.tensor([2.7, 1.0, 3.2]),
                                   batch_first=True, enforce_sorted=False)
    tp = trnn.pack_padded_sequence(torch.tensor(seq), torch.tensor([2.7, 1.0, 3.2]),
                                   batch_first=True, enforce_sorted=False)
    _same_packed(gp, tp)
    g, gl = grnn.pad_packed_sequence(gp, True, padding_value=-1.7)
    t, tl = trnn.pad_packed_sequence(tp, True, padding_value=-1.7)
    _close(g, t)
    _close(gl, tl)


def test_packed_sequence_object():
    gx = tape.tensor(np.arange(10.0).reshape(5, 2).astype('float32'))
    tx = torch.tensor(np.arange(10.0).reshape(5, 2).astype('float32'))
    gp = grnn.pack_padded_sequence(gx, [3, 5], enforce_sorted=False)
    tp = trnn.pack_padded_sequence(tx, [3, 5], enforce_sorted=False)
    assert repr(gp) == repr(tp)
    assert gp.is_cuda is False and gp.is_pinned() is False
    assert gp.to(tape.float32) is gp and gp.float() is gp and gp.cpu() is gp
    d = gp.double()
    assert isinstance(d, PackedSequence) and d.data.dtype == tape.float64
    assert d.batch_sizes is gp.batch_sizes and d.sorted_indices is gp.sorted_indices
    _close(gp.long().data, tp.long().data)
    data, bs, si, ui = gp
    assert data is gp.data and bs is gp.batch_sizes and si is gp.sorted_indices
    # the constructor forms: unsorted indices computed from sorted ones; (data, sizes)
    p = PackedSequence(gp.data, gp.batch_sizes, tape.tensor([2, 0, 1]))
    _close(p.unsorted_indices, torch.tensor([1, 2, 0]))
    p2 = PackedSequence((gp.data, gp.batch_sizes))
    assert p2.sorted_indices is None and p2.unsorted_indices is None
    with pytest.raises(AssertionError, match='list or tuple of length 2'):
        PackedSequence(gp.data)
    with pytest.raises(AssertionError):
        gp.cuda()
    _close(grnn.invert_permutation(tape.tensor([2, 0, 3, 1])),
           trnn.invert_permutation(torch.tensor([2, 0, 3, 1])))
    assert grnn.invert_permutation(None) is None


# -- pad_sequence / unpad_sequence / pack_sequence / unpack_sequence -----------------
@pytest.mark.parametrize('batch_first', [False, True])
@pytest.mark.parametrize('padding_side', ['right', 'left'])
def test_pad_sequence(batch_first, padding_side):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, 3)) for n in (2, 4, 1)]
    pairs = [_pair(a) for a in arrays]
    g = grnn.pad_sequence([p[0] for p in pairs], batch_first, 0.5, padding_side)
    t = trnn.pad_sequence([p[1] for p in pairs], batch_first, 0.5, padding_side)
    _close(g, t)
    w = _weights(tuple(t.shape))
    (g * tape.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    for (ga, ta) in pairs:
        _close(ga.grad, ta.grad)


def test_pad_sequence_dtypes_broadcast_and_iterables():
    a, b = np.arange(3.0), np.arange(2)
    g = grnn.pad_sequence((tape.tensor(a), tape.tensor(b)))   # cast to the first's dtype
    t = trnn.pad_sequence((torch.tensor(a), torch.tensor(b)))
    _close(g, t)
    x = np.arange(6.0).reshape(2, 3)
    _close(grnn.pad_sequence(tape.tensor(x)), trnn.pad_sequence(torch.tensor(x)))
    s = [np.ones((2, 3)), np.full((1, 1), 2.0)]                  # (1, 1) broadcasts
    _close(grnn.pad_sequence([tape.tensor(v) for v in s], True),
           trnn.pad_sequence([torch.tensor(v) for v in s], True))


@pytest.mark.parametrize('enforce_sorted,lens', [(True, (4, 2, 2)), (False, (2, 4, 1, 3))])
def test_pack_unpack_sequence(enforce_sorted, lens):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((n, 2)) for n in lens]
    pairs = [_pair(a) for a in arrays]
    gp = grnn.pack_sequence([p[0] for p in pairs], enforce_sorted)
    tp = trnn.pack_sequence([p[1] for p in pairs], enforce_sorted)
    _same_packed(gp, tp)
    gs = grnn.unpack_sequence(gp)
    ts = trnn.unpack_sequence(tp)
    assert len(gs) == len(ts)
    gl, tl = 0, 0
    for i, (g, t) in enumerate(zip(gs, ts)):
        _close(g, t)
        w = _weights(tuple(t.shape), seed=i)
        gl = gl + (g * tape.tensor(w)).sum()
        tl = tl + (t * torch.tensor(w)).sum()
    gl.backward()
    tl.backward()
    for ga, ta in pairs:
        _close(ga.grad, ta.grad)


@pytest.mark.parametrize('batch_first', [False, True])
def test_unpad_sequence(batch_first):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5, 2) if batch_first else (5, 3, 2))
    gx, tx = _pair(x)
    gs = grnn.unpad_sequence(gx, tape.tensor([5, 0, 3]), batch_first)
    ts = trnn.unpad_sequence(tx.clone(), torch.tensor([5, 0, 3]), batch_first)
    assert tuple(gx.shape) == x.shape      # tape does not transpose its input in place
    gl, tl = 0, 0
    for i, (g, t) in enumerate(zip(gs, ts)):
        _close(g, t)
        w = _weights(tuple(t.shape), seed=i)
        gl = gl + (g * tape.tensor(w)).sum()
        tl = tl + (t * torch.tensor(w)).sum()
    gl.backward()
    tl.backward()
    _close(gx.grad, tx.grad)


# -- errors ---------------------------------------------------------------------------
def _errors_match(fg, ft):
    with pytest.raises(Exception) as et:
        ft()
    with pytest.raises(Exception) as eg:
        fg()
    assert type(eg.value) is type(et.value), (eg.value, et.value)
    return str(eg.value), str(et.value)


def _inputs(shape=(4, 3, 2)):
    x = np.random.default_rng(5).standard_normal(shape)
    return tape.tensor(x), torch.tensor(x)


@pytest.mark.parametrize('case', [
    dict(lengths=[3, 4, 1]), dict(lengths=[3, 2, 0]), dict(lengths=[3, 0, 2], sort=False),
    dict(lengths=[3, 2]), dict(lengths=[3, 2, -1]), dict(lengths=[[3, 2, 1]]),
    dict(lengths=[3, 2, 1], shape=(0, 3)), dict(lengths=[3], shape=(4,)),
    dict(lengths=[3, 2, 1], shape=(4,), sort=False),
    dict(lengths=[3], shape=(4,), batch_first=True)])
def test_pack_padded_errors(case):
    gx, tx = _inputs(case.get('shape', (4, 3, 2)))
    kw = dict(enforce_sorted=case.get('sort', True), batch_first=case.get('batch_first', False))
    lg, lt = case['lengths'], case['lengths']
    g, t = _errors_match(lambda: grnn.pack_padded_sequence(gx, lg, **kw),
                         lambda: trnn.pack_padded_sequence(tx, lt, **kw))
    if isinstance(lg[0], int) and len(case.get('shape', 'xx')) > 1:
        assert g == t


def test_pack_sorted_error_message_and_long_length():
    gx, tx = _inputs()
    g, t = _errors_match(lambda: pack_padded_sequence(gx, tape.tensor([3, 4, 1])),
                         lambda: trnn.pack_padded_sequence(tx, torch.tensor([3, 4, 1])))
    assert g == t and g.startswith('`lengths` array must be sorted in decreasing order when '
                                   '`enforce_sorted` is True')
    with pytest.raises(RuntimeError, match='exceeds'):     # torch reads past the input
        pack_padded_sequence(gx, [5, 2, 1])


def test_pad_packed_and_pad_sequence_errors():
    gx, tx = _inputs()
    gp = grnn.pack_padded_sequence(gx, [1, 3, 2], enforce_sorted=False)
    tp = trnn.pack_padded_sequence(tx, [1, 3, 2], enforce_sorted=False)
    for tl in (2, 3.0):
        g, t = _errors_match(lambda: grnn.pad_packed_sequence(gp, total_length=tl),
                             lambda: trnn.pad_packed_sequence(tp, total_length=tl))
        assert g == t
    _errors_match(lambda: grnn.pad_packed_sequence(gx), lambda: trnn.pad_packed_sequence(tx))
    a, b = tape.randn(2, 3), tape.randn(3, 2)
    ta, tb = torch.randn(2, 3), torch.randn(3, 2)
    for fg, ft in [(lambda: grnn.pad_sequence([]), lambda: trnn.pad_sequence([])),
                   (lambda: grnn.pad_sequence(3), lambda: trnn.pad_sequence(3)),
                   (lambda: grnn.pad_sequence([a], padding_side='up'),
                    lambda: trnn.pad_sequence([ta], padding_side='up')),
                   (lambda: grnn.pad_sequence([a, b]), lambda: trnn.pad_sequence([ta, tb])),
                   (lambda: grnn.pad_sequence([tape.tensor(1.0)]),
                    lambda: trnn.pad_sequence([torch.tensor(1.0)])),
                   (lambda: grnn.pack_sequence([]), lambda: trnn.pack_sequence([])),
                   (lambda: grnn.pack_sequence([tape.randn(2), tape.randn(3)]),
                    lambda: trnn.pack_sequence([torch.randn(2), torch.randn(3)]))]:
        g, t = _errors_match(fg, ft)
        assert g == t
    _errors_match(lambda: grnn.unpad_sequence(tape.randn(4, 2), [3, 1]),
                  lambda: trnn.unpad_sequence(torch.randn(4, 2), [3, 1]))
    _errors_match(lambda: grnn.unpad_sequence(tape.randn(4, 2), tape.tensor([3, 1, 1])),
                  lambda: trnn.unpad_sequence(torch.randn(4, 2), torch.tensor([3, 1, 1])))


# -- recurrent modules over packed input ----------------------------------------------
def _modules(kind, layers, bidir, proj, bias=True):
    kw = dict(input_size=3, hidden_size=4, num_layers=layers, bidirectional=bidir, bias=bias)
    if proj:
        kw['proj_size'] = proj
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(**kw).double()
    m = getattr(nn, kind)(**kw, dtype='float64')
    m.load_state_dict({k: tape.tensor(v.detach().numpy().copy())
                       for k, v in tm.state_dict().items()})
    return tm, m


@pytest.mark.parametrize('kind,proj', [('RNN', 0), ('LSTM', 0), ('LSTM', 2), ('GRU', 0)])
@pytest.mark.parametrize('layers,bidir', [(1, False), (2, True), (1, True)])
@pytest.mark.parametrize('with_h0', [False, True])
def test_rnn_packed_against_torch(kind, proj, layers, bidir, with_h0):
    tm, m = _modules(kind, layers, bidir, proj)
    rng = np.random.default_rng(6)
    lens = [3, 5, 1, 3, 4]                    # unsorted, with a tie
    T, B, D = 5, len(lens), 2 if bidir else 1
    x = rng.standard_normal((B, T, 3))
    gx, tx = _pair(x)
    states = []
    if with_h0:
        states.append(_pair(rng.standard_normal((layers * D, B, proj or 4))))
        if kind == 'LSTM':
            states.append(_pair(rng.standard_normal((layers * D, B, 4))))

    def hx(i):
        if not states:
            return None
        return tuple(s[i] for s in states) if kind == 'LSTM' else states[0][i]

    gp = grnn.pack_padded_sequence(gx, lens, batch_first=True, enforce_sorted=False)
    tp = trnn.pack_padded_sequence(tx, lens, batch_first=True, enforce_sorted=False)
    gout, gh = m(gp, hx(0))
    tout, th = tm(tp, hx(1))
    _same_packed(gout, tout)
    gh = gh if kind == 'LSTM' else (gh,)
    th = th if kind == 'LSTM' else (th,)
    for g, t in zip(gh, th):
        _close(g, t, 'final state')
    gpad, _ = grnn.pad_packed_sequence(gout, batch_first=True)
    tpad, _ = trnn.pad_packed_sequence(tout, batch_first=True)
    _close(gpad, tpad, 'padded output')
    w = _weights(tuple(tpad.shape))
    gl = (gpad * tape.tensor(w)).sum() + sum((g * g).sum() * (i + 1.5) for i, g in enumerate(gh))
    tl = (tpad * torch.tensor(w)).sum() + sum((t * t).sum() * (i + 1.5) for i, t in enumerate(th))
    gl.backward()
    tl.backward()
    _close(gx.grad, tx.grad, 'input grad')
    for gs, ts in states:
        _close(gs.grad, ts.grad, 'state grad')
    for (gn, gw), (tn, tw) in zip(m.named_parameters(), tm.named_parameters()):
        assert gn == tn
        _close(gw.grad, tw.grad, gn)


@pytest.mark.parametrize('kind', ['RNN', 'GRU', 'LSTM'])
def test_rnn_packed_sorted_no_bias(kind):
    tm, m = _modules(kind, 2, False, 0, bias=False)
    arrays = [np.random.default_rng(i).standard_normal((n, 3)) for i, n in enumerate((4, 4, 2))]
    pairs = [_pair(a) for a in arrays]
    gout, _ = m(grnn.pack_sequence([p[0] for p in pairs]))
    tout, _ = tm(trnn.pack_sequence([p[1] for p in pairs]))
    _same_packed(gout, tout)
    gout.data.sum().backward()
    tout.data.sum().backward()
    for ga, ta in pairs:
        _close(ga.grad, ta.grad)


@pytest.mark.parametrize('kind', ['RNN', 'GRU', 'LSTM'])
def test_rnn_packed_errors(kind):
    tm, m = _modules(kind, 1, False, 0)
    x = np.random.default_rng(8).standard_normal((4, 3, 3))
    gp = grnn.pack_padded_sequence(tape.tensor(x), [3, 4, 1], enforce_sorted=False)
    tp = trnn.pack_padded_sequence(torch.tensor(x), [3, 4, 1], enforce_sorted=False)

    def st(lib, shape):
        z = lib.zeros(*shape, dtype=lib.float64)
        return (z, lib.zeros(1, 3, 4, dtype=lib.float64)) if kind == 'LSTM' else z

    cases = [(lambda: m(gp.float()), lambda: tm(tp.float())),
             (lambda: m(grnn.pack_padded_sequence(tape.randn(4, 3, 2).double(), [4, 3, 1])),
              lambda: tm(trnn.pack_padded_sequence(torch.randn(4, 3, 2).double(), [4, 3, 1])))]
    for shape in [(1, 2, 4), (1, 3, 5), (2, 3, 4)]:
        if kind == 'LSTM':
            # torch's LSTM checks these in C++ (RuntimeError), and can crash doing so
            with pytest.raises(RuntimeError):
                m(gp, st(tape, shape))
        else:
            cases.append((lambda s=shape: m(gp, st(tape, s)),
                          lambda s=shape: tm(tp, st(torch, s))))
    if kind != 'LSTM':
        cases.append((lambda: m(grnn.pack_padded_sequence(tape.randn(4, 3, 2, 3).double(),
                                                          [4, 3, 1])),
                      lambda: tm(trnn.pack_padded_sequence(torch.randn(4, 3, 2, 3).double(),
                                                           [4, 3, 1]))))
    for fg, ft in cases:
        g, t = _errors_match(fg, ft)
        if kind != 'LSTM':
            assert g == t


def test_import_forms():
    import tape.nn.utils.rnn as mod
    assert mod is tape.nn.utils.rnn is grnn
    assert tape.nn.utils.clip_grad_norm_ is not None and tape.nn.utils.parameters_to_vector
    assert set(trnn.__all__) == set(mod.__all__)
