"""The Tensor object's Python API against PyTorch's: attributes, conversions,
dunders, copy/deepcopy/pickle, device and dtype helpers."""
import copy
import pickle

import numpy as np
import pytest

import tape


def _torch():
    return pytest.importorskip('torch')


# ------------------------------------------------------------ sizes and layout
def test_element_size_itemsize_nbytes():
    t = tape.zeros(2, 3)
    assert t.element_size() == 4 and t.itemsize == 4 and t.nbytes == 24
    assert tape.tensor([1, 2]).element_size() == 8
    assert tape.zeros(1, dtype=tape.bool).element_size() == 1
    torch = _torch()
    for L in (torch, tape):
        x = L.zeros(2, 3, dtype=L.float64)
        assert (x.element_size(), x.itemsize, x.nbytes) == (8, 8, 48)


@pytest.mark.parametrize('make', [
    lambda L: L.zeros(2, 3),
    lambda L: L.zeros(2, 3).t(),
    lambda L: L.zeros(3, 4)[:, None],
    lambda L: L.zeros(3, 4).unsqueeze(0),
    lambda L: L.zeros(3, 4).unsqueeze(-1),
    lambda L: L.zeros(2, 1, 3)[:, :, 1:],
    lambda L: L.zeros(0, 3),
    lambda L: L.zeros(1),
    lambda L: L.zeros(300, 300).t(),      # large (aligned) storage
])
def test_stride_matches_torch(make):
    torch = _torch()
    assert make(tape).stride() == make(torch).stride()
    assert make(tape).stride(-1) == make(torch).stride(-1)


def test_stride_values():
    x = tape.zeros(2, 3)
    assert x.stride() == (3, 1) and x.stride(0) == 3 and x.stride(-1) == 1
    assert x.t().stride() == (1, 3)
    assert tape.tensor(1.0).stride() == ()
    assert tape.arange(4.0).sum().stride() == ()
    with pytest.raises(IndexError):
        x.stride(2)


@pytest.mark.parametrize('make,expected', [
    (lambda L: L.arange(10.0), 0),
    (lambda L: L.arange(10.0)[3:], 3),
    (lambda L: L.arange(10.0)[2:][3:], 5),
    (lambda L: L.arange(10.0).view(2, 5)[1], 5),
    (lambda L: L.arange(10.0) * 2, 0),
    (lambda L: L.zeros(300, 300)[2:, 1:], 601),
    (lambda L: L.zeros(300, 300)[2], 600),
])
def test_storage_offset(make, expected):
    assert make(tape).storage_offset() == expected
    torch = _torch()
    assert make(torch).storage_offset() == expected


def test_data_ptr():
    t = tape.arange(4.0)
    assert isinstance(t.data_ptr(), int) and t.data_ptr() != 0
    assert t.view(2, 2).data_ptr() == t.data_ptr()
    assert t[1:].data_ptr() == t.data_ptr() + 4
    assert t.clone().data_ptr() != t.data_ptr()
    assert isinstance(t.sum().data_ptr(), int)          # a 0-d result


def test_is_complex_and_layout_flags():
    t = tape.ones(2)
    assert t.is_complex() is False and tape.is_complex(t) is False
    assert t.layout is tape.strided and repr(tape.strided) == 'tape.strided'
    assert t.is_cpu and not t.is_cuda and not t.is_sparse and not t.is_quantized
    assert not t.is_meta and not t.is_inference() and t.get_device() == -1
    assert not t.is_shared() and not t.is_pinned()
    torch = _torch()
    x = torch.ones(2)
    assert (x.is_cpu, x.is_cuda, x.is_sparse, x.is_quantized, x.is_meta, x.get_device()) == \
        (t.is_cpu, t.is_cuda, t.is_sparse, t.is_quantized, t.is_meta, t.get_device())


# ------------------------------------------------------------ device
def test_device_object():
    d = tape.zeros(2).device
    assert isinstance(d, tape.device)
    assert d.type == 'cpu' and d.index is None
    assert repr(d) == "device(type='cpu')" and str(d) == 'cpu'
    assert d == tape.device('cpu') and d == 'cpu'        # tape also equals the string
    assert {d: 1}[tape.device('cpu')] == 1
    assert str(tape.device('cuda', 1)) == 'cuda:1' and tape.device('cuda:1').index == 1
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(RuntimeError, match='device type'):
        tape.device('foo')
    torch = _torch()
    assert repr(torch.zeros(2).device) == repr(d)
    assert repr(torch.device('cuda', 1)) == repr(tape.device('cuda', 1))


def test_cpu_is_self_and_cuda_raises_like_torch_without_cuda():
    t = tape.ones(2)
    assert t.cpu() is t
    for move in (lambda x: x.cuda(), lambda x: x.to('cuda'), lambda x: x.to(device='cuda:0'),
                 lambda x: x.to(tape.device('cuda'))):
        with pytest.raises(AssertionError, match='not compiled with CUDA'):
            move(t)
    assert t.to(device='cpu') is t
    assert t.to(tape.device('cpu')) is t
    assert t.to(tape.device('cpu'), tape.float64).dtype == tape.float64
    assert t.to('cpu', tape.float64).dtype == tape.float64
    # (PyTorch's own error here depends on its build: AssertionError for a CPU
    # build, RuntimeError for a CUDA build on a machine without a driver)


# ------------------------------------------------------------ type conversions
@pytest.mark.parametrize('dtype,name', [
    ('float32', 'FloatTensor'), ('float64', 'DoubleTensor'), ('float16', 'HalfTensor'),
    ('int64', 'LongTensor'), ('int32', 'IntTensor'), ('int16', 'ShortTensor'),
    ('int8', 'CharTensor'), ('uint8', 'ByteTensor'), ('bool', 'BoolTensor')])
def test_type_names(dtype, name):
    assert tape.zeros(1, dtype=getattr(tape, dtype)).type() == 'torch.' + name
    torch = _torch()
    assert torch.zeros(1, dtype=getattr(torch, dtype)).type() == 'torch.' + name


def test_type_with_a_string_or_dtype():
    t = tape.tensor([1.5])
    assert t.type('torch.DoubleTensor').dtype == tape.float64
    assert t.type('tape.LongTensor').tolist() == [1]
    assert t.type(tape.float64).dtype == tape.float64
    assert t.type(tape.float32) is t and t.type('torch.FloatTensor') is t
    with pytest.raises(ValueError, match='invalid type'):
        t.type('float64')
    torch = _torch()
    assert torch.tensor([1.5]).type('torch.LongTensor').tolist() == [1]
    with pytest.raises(ValueError, match='invalid type'):
        torch.tensor([1.5]).type('float64')


def test_type_as():
    t = tape.tensor([1.5, 2.5])
    assert t.type_as(tape.tensor([1])).tolist() == [1, 2]
    assert t.type_as(tape.tensor([1])).dtype == tape.int64
    assert t.type_as(tape.ones(1)) is t
    w = tape.ones(2, requires_grad=True)
    (w.type_as(tape.zeros(1, dtype=tape.float64)) * 2).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]
    torch = _torch()
    assert torch.tensor([1.5, 2.5]).type_as(torch.tensor([1])).tolist() == [1, 2]


def test_half_short_char_byte():
    t = tape.tensor([1.7, 2.2])
    assert t.half().dtype == tape.float16 and t.short().dtype == tape.int16
    assert t.char().dtype == tape.int8 and t.byte().dtype == tape.uint8
    assert t.short().tolist() == [1, 2]
    assert tape.short == tape.int16
    assert repr(tape.tensor([1], dtype=tape.int8)) == 'tensor([1], dtype=tape.int8)'


def test_clone_memory_format_and_functions():
    t = tape.ones(2, 2, requires_grad=True)
    for mf in (tape.preserve_format, tape.contiguous_format):
        c = t.clone(memory_format=mf)
        assert c.tolist() == t.tolist() and c.grad_fn.name() == 'CloneBackward0'
    assert tape.clone(t).grad_fn.name() == 'CloneBackward0'
    tape.clone(t).sum().backward()
    assert t.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert t.t().contiguous(memory_format=tape.contiguous_format).stride() == (2, 1)
    assert pickle.loads(pickle.dumps(tape.preserve_format)) is tape.preserve_format
    assert tape.numel(tape.zeros(2, 3)) == 6
    d = tape.detach(t)
    assert not d.requires_grad and d.is_leaf and d.data_ptr() == t.data_ptr()
    torch = _torch()
    assert torch.numel(torch.zeros(2, 3)) == 6
    assert torch.clone(torch.ones(2, requires_grad=True)).grad_fn.name() == 'CloneBackward0'


# ------------------------------------------------------------ apply_ / map_
def test_apply_and_map():
    t = tape.tensor([1.0, 2.0])
    assert t.apply_(lambda v: v * 3) is t and t.tolist() == [3.0, 6.0]
    assert tape.tensor([1, 2]).apply_(lambda v: v * 2.7).tolist() == [2, 5]
    m = tape.arange(4.0).view(2, 2)
    m.t().apply_(lambda v: v * 10)            # through a non-contiguous view
    assert m.tolist() == [[0.0, 10.0], [20.0, 30.0]]
    assert tape.ones(2, 2).map_(tape.tensor([1.0, 2.0]), lambda a, b: a + b).tolist() == \
        [[2.0, 3.0], [2.0, 3.0]]
    with pytest.raises(RuntimeError, match='apply_'):
        tape.ones(2, requires_grad=True).apply_(lambda v: v)
    with pytest.raises(RuntimeError, match='map_'):
        tape.ones(2, requires_grad=True).map_(tape.ones(2), lambda a, b: a)
    torch = _torch()
    assert torch.tensor([1, 2]).apply_(lambda v: v * 2.7).tolist() == [2, 5]
    with pytest.raises(RuntimeError, match='apply_'):
        torch.ones(2, requires_grad=True).apply_(lambda v: v)


# ------------------------------------------------------------ Python conversions
@pytest.mark.parametrize('conv', [float, int, complex])
def test_scalar_conversion_of_many_elements_is_valueerror(conv):
    with pytest.raises(ValueError, match='only one element tensors'):
        conv(tape.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match='only one element tensors'):
        conv(tape.tensor([]))
    torch = _torch()
    with pytest.raises(ValueError, match='only one element tensors'):
        conv(torch.tensor([1.0, 2.0]))


def test_item_of_many_elements_stays_runtimeerror():
    with pytest.raises(RuntimeError, match='cannot be converted to Scalar'):
        tape.tensor([1.0, 2.0]).item()


def test_scalar_conversions():
    assert float(tape.tensor([2.5])) == 2.5 and int(tape.tensor(2.7)) == 2
    assert complex(tape.tensor(2.5)) == 2.5 + 0j
    assert [1, 2, 3][tape.tensor(1)] == 2 and [1, 2, 3][tape.tensor([2])] == 3
    assert [1, 2, 3][tape.tensor(True)] == 2
    for bad in (tape.tensor(1.0), tape.tensor([1, 2])):
        with pytest.raises(TypeError, match='only integer tensors of a single element'):
            [1, 2, 3][bad]
    torch = _torch()
    assert [1, 2, 3][torch.tensor(True)] == 2
    with pytest.raises(TypeError, match='only integer tensors of a single element'):
        [1, 2, 3][torch.tensor([1, 2])]


def test_bool_messages():
    with pytest.raises(RuntimeError, match='with no values is ambiguous'):
        bool(tape.tensor([]))
    with pytest.raises(RuntimeError, match='more than one value is ambiguous'):
        bool(tape.tensor([1.0, 2.0]))
    assert bool(tape.tensor([0.0])) is False
    torch = _torch()
    with pytest.raises(RuntimeError, match='with no values is ambiguous'):
        bool(torch.tensor([]))


def test_contains():
    t = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert 2.0 in t and 5 not in t and np.float32(3) in t
    assert tape.tensor([1.0, 2.0]) in t and tape.tensor([1.0, 9.0]) in t
    assert tape.tensor([7.0, 9.0]) not in t
    assert 2 in tape.tensor(2.0)
    for bad in ('a', None):
        with pytest.raises(RuntimeError, match='only supports Tensor or scalar'):
            bad in t
    torch = _torch()
    tt = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (torch.tensor([1.0, 9.0]) in tt) is True
    with pytest.raises(RuntimeError, match='only supports Tensor or scalar'):
        'a' in tt


def test_invert():
    assert (~tape.tensor([True, False])).tolist() == [False, True]
    assert (~tape.tensor([1, 2])).tolist() == [-2, -3]
    with pytest.raises(TypeError, match='only implemented on integer and Boolean'):
        ~tape.tensor([1.0])
    torch = _torch()
    with pytest.raises(TypeError, match='only implemented on integer and Boolean'):
        ~torch.tensor([1.0])


def test_unary_dunders_and_builtins():
    torch = _torch()
    for L in (tape, torch):
        t = L.tensor([1.5, -2.5, 0.26])
        assert (-t).tolist() == pytest.approx([-1.5, 2.5, -0.26])
        assert abs(t).tolist() == pytest.approx([1.5, 2.5, 0.26])
        assert (+t).tolist() == t.tolist()
        with pytest.raises(TypeError, match='__round__'):      # torch.Tensor has none either
            round(t)
        assert [x.item() for x in reversed(t)] == pytest.approx([0.26, -2.5, 1.5])
        assert f'{L.tensor(1.2345):.2f}' == '1.23'
        assert sum(L.tensor([1.0, 2.0, 3.0])).item() == 6.0
        assert any(L.tensor([0.0, 2.0])) and not all(L.tensor([0.0, 2.0]))
        assert [x.item() for x in sorted(L.tensor([3.0, 1.0, 2.0]))] == [1.0, 2.0, 3.0]
        assert max(L.tensor([3.0, 1.0, 2.0])).item() == 3.0
        assert [r.tolist() for r in L.tensor([[1.0, 2.0], [3.0, 4.0]])] == [[1.0, 2.0], [3.0, 4.0]]
        with pytest.raises(TypeError):
            len(L.tensor(1.0))
        t2 = L.tensor([1.0])
        assert hash(t2) == hash(t2) and t2 in {t2}


def test_numpy_scalar_on_the_left():
    t = tape.tensor([1.0, 2.0], requires_grad=True)
    for y in (np.float64(2) * t, np.float32(2) + t, np.float64(2) - t, np.float64(2) / t,
              np.float64(2) ** t):
        assert isinstance(y, tape.Tensor) and y.dtype == tape.float32 and y.requires_grad
    assert (np.int64(2) * tape.tensor([1, 2])).dtype == tape.int64
    assert (np.float64(2) > tape.tensor([1.0, 3.0])).tolist() == [True, False]


# ------------------------------------------------------------ copy / deepcopy / pickle
def test_copy_copy_shares_storage():
    t = tape.tensor([1.0, 2.0], requires_grad=True)
    c = copy.copy(t)
    assert c is not t and c.requires_grad and c.is_leaf and c.data_ptr() == t.data_ptr()
    y = t * 2
    cy = copy.copy(y)
    assert cy.is_leaf and cy.requires_grad             # as PyTorch: comes back a leaf
    torch = _torch()
    ty = torch.tensor([1.0], requires_grad=True) * 2
    assert copy.copy(ty).is_leaf and copy.copy(ty).requires_grad


def test_deepcopy_leaves():
    t = tape.tensor([1.0, 2.0], requires_grad=True)
    c = copy.deepcopy(t)
    assert c.tolist() == [1.0, 2.0] and c.requires_grad and c.is_leaf and c.grad is None
    assert c.data_ptr() != t.data_ptr()
    (t * 3).sum().backward()
    c = copy.deepcopy(t)
    assert c.grad.tolist() == [3.0, 3.0] and c.grad is not t.grad
    (c * 2).sum().backward()
    assert t.grad.tolist() == [3.0, 3.0] and c.grad.tolist() == [5.0, 5.0]
    plain = tape.tensor([1, 2])
    plain.tag = ['w']
    cp = copy.deepcopy(plain)
    assert cp.tolist() == [1, 2] and cp.dtype == tape.int64 and not cp.requires_grad
    assert cp.tag == ['w'] and cp.tag is not plain.tag
    a, b = copy.deepcopy([plain, plain])
    assert a is b
    assert copy.deepcopy(tape.arange(6.0).view(2, 3).t()).tolist() == \
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert copy.deepcopy(tape.tensor([1.0]) * 2).tolist() == [2.0]   # no grad: a leaf


def test_deepcopy_of_a_non_leaf_raises_like_torch():
    y = tape.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r'Only Tensors created explicitly by the user '
                                           r'\(graph leaves\) support the deepcopy'):
        copy.deepcopy(y)
    torch = _torch()
    with pytest.raises(RuntimeError, match=r'graph leaves\) support the deepcopy'):
        copy.deepcopy(torch.tensor([1.0], requires_grad=True) * 2)


def test_pickle_round_trip():
    t = tape.tensor([1.0, 2.0], dtype=tape.float64, requires_grad=True)
    (t * 2).sum().backward()
    t.register_hook(lambda g: g)                       # hooks are not pickled
    p = pickle.loads(pickle.dumps(t))
    assert p.tolist() == [1.0, 2.0] and p.dtype == tape.float64
    assert p.requires_grad and p.is_leaf and p.grad is None   # .grad is not pickled (torch)
    i = pickle.loads(pickle.dumps(tape.tensor([1, 2])))
    assert i.tolist() == [1, 2] and i.dtype == tape.int64 and not i.requires_grad
    assert pickle.loads(pickle.dumps(tape.tensor(3.5))).tolist() == 3.5
    assert pickle.loads(pickle.dumps(tape.arange(6.0).view(2, 3).t())).tolist() == \
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert pickle.loads(pickle.dumps(tape.arange(100000, dtype=tape.int64)[5:])).sum().item() == \
        sum(range(5, 100000))
    y = pickle.loads(pickle.dumps(tape.tensor([1.0], requires_grad=True) * 2))
    assert y.is_leaf and y.requires_grad and y.tolist() == [2.0]
    tagged = tape.ones(1)
    tagged.tag = 'w'
    assert pickle.loads(pickle.dumps(tagged)).tag == 'w'
    torch = _torch()
    tt = torch.tensor([1.0], requires_grad=True)
    (tt * 2).sum().backward()
    assert pickle.loads(pickle.dumps(tt)).grad is None


# ------------------------------------------------------------ unique, module functions
def test_unique():
    assert tape.tensor([3, 1, 3]).unique().tolist() == [1, 3]
    v, inv, cnt = tape.tensor([[3, 1], [3, 2]]).unique(return_inverse=True, return_counts=True)
    assert v.tolist() == [1, 2, 3] and inv.tolist() == [[2, 0], [2, 1]] and cnt.tolist() == [1, 1, 2]
    assert inv.dtype == tape.int64
    v, inv = tape.unique(tape.tensor([[3, 1], [3, 1], [0, 2]]), dim=0, return_inverse=True)
    assert v.tolist() == [[0, 2], [3, 1]] and inv.tolist() == [1, 1, 0]
    assert tape.unique(tape.tensor([2.0, 1.0, 2.0])).dtype == tape.float32
    torch = _torch()
    tv, tinv, tcnt = torch.tensor([[3, 1], [3, 2]]).unique(return_inverse=True, return_counts=True)
    assert (tv.tolist(), tinv.tolist(), tcnt.tolist()) == ([1, 2, 3], [[2, 0], [2, 1]], [1, 1, 2])


def test_is_tensor():
    assert tape.is_tensor(tape.ones(1)) and not tape.is_tensor(1.0)
    assert not tape.is_tensor(np.ones(1))
