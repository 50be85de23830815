"""One table of core ops drives every gradient test.

Each row names an op, a function written once against the torch-like API
(called with ``tape`` or ``torch`` as ``m``), the input shapes (broadcasting,
size-1 dims, 0-d scalars), the input domain and which inputs require grad.
The table drives:

1. float64 finite-difference gradcheck (full Jacobian via ``autograd.grad``,
   and ``backward(v)`` against ``v @ J``);
2. PyTorch as an oracle for values, gradients and the ``grad_fn`` name
   (skipped without torch);
3. float32: the result and gradients stay float32 and agree with float64 to
   float32 precision.

Adding an op means adding a row here.
"""
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import tape

from conftest import check_grad


@dataclass(frozen=True)
class Case:
    name: str
    fn: object                      # fn(m, *tensors) with m = tape or torch
    shapes: tuple                   # one shape per tensor input
    domain: str = 'real'            # real | positive | nonzero
    rg: tuple = None                # which inputs require grad (default: all)
    bug: str = None                 # a known bug: value/gradient tests xfail (strict)

    def requires(self):
        return self.rg if self.rg is not None else (True,) * len(self.shapes)


def C(name, fn, *shapes, domain='real', rg=None, bug=None):
    return Case(name, fn, tuple(shapes), domain, rg, bug)


S = ()   # a 0-d tensor

CASES = [
    # ---- binary arithmetic, same shape, broadcasting, 0-d, constants
    C('add', lambda m, a, b: a + b, (2, 3), (2, 3)),
    C('add_bcast_row', lambda m, a, b: a + b, (2, 3), (3,)),
    C('add_bcast_outer', lambda m, a, b: a + b, (3, 1), (1, 4)),
    C('add_bcast_lead', lambda m, a, b: a + b, (4,), (2, 3, 4)),
    C('add_0d', lambda m, a, b: a + b, S, (2, 3)),
    C('add_0d_0d', lambda m, a, b: a + b, S, S),
    C('add_method', lambda m, a, b: a.add(b), (2, 1), (2, 3)),
    C('add_fn', lambda m, a, b: m.add(a, b), (3,), (2, 3)),
    C('add_const', lambda m, a, b: a + b, (2, 3), (3,), rg=(True, False)),
    C('add_same', lambda m, a: a + a, (2, 3)),
    C('sub', lambda m, a, b: a - b, (2, 3), (2, 3)),
    C('sub_bcast', lambda m, a, b: a - b, (2, 1, 3), (4, 1)),
    C('sub_const_left', lambda m, a, b: a - b, (3,), (2, 3), rg=(False, True)),
    C('sub_same', lambda m, a: a - a * a, (4,)),
    C('mul', lambda m, a, b: a * b, (2, 3), (2, 3)),
    C('mul_bcast', lambda m, a, b: a * b, (2, 3), (2, 1)),
    C('mul_0d', lambda m, a, b: a * b, (3,), S),
    C('mul_same', lambda m, a: a * a, (2, 3)),
    C('mul_const', lambda m, a, b: a * b, (2, 3), (2, 3), rg=(False, True)),
    C('div', lambda m, a, b: a / b, (2, 3), (2, 3), domain='nonzero'),
    C('div_bcast', lambda m, a, b: a / b, (2, 3), (3,), domain='nonzero'),
    C('div_0d', lambda m, a, b: a / b, S, (2, 2), domain='nonzero'),
    C('div_const_num', lambda m, a, b: a / b, (2, 3), (3,), domain='nonzero',
      rg=(False, True)),
    C('pow_tensor', lambda m, a, b: a ** b, (2, 3), (2, 3), domain='positive'),
    C('pow_tensor_bcast', lambda m, a, b: a ** b, (2, 3), (3,), domain='positive'),
    C('pow_method', lambda m, a, b: a.pow(b), (3,), S, domain='positive'),
    # equal sizes, different shapes: (3,) with (3, 1) broadcasts to (3, 3); a fast
    # path that compared sizes only once got these wrong
    C('bcast_equal_size_add', lambda m, a, b: a.exp() + b, (3,), (3, 1)),
    C('bcast_equal_size_mul', lambda m, a, b: a.tanh() * b, (1, 3), (3, 1)),
    C('bcast_equal_size_div', lambda m, a, b: a / (b * 2.0), (2, 1), (2,), domain='nonzero'),
    C('bcast_equal_size_const', lambda m, a, b: (a * 2.0) - b, (2,), (2, 1), rg=(True, False)),
    # ---- Python scalars on either side
    C('add_scalar', lambda m, a: a + 2.5, (2, 3)),
    C('radd_scalar', lambda m, a: 2 + a, (2, 3)),
    C('sub_scalar', lambda m, a: a - 1.5, (3,)),
    C('rsub_scalar', lambda m, a: 1.5 - a, (3,)),
    C('mul_scalar', lambda m, a: a * 3, (2, 3)),
    C('rmul_scalar', lambda m, a: -0.5 * a, (2, 3)),
    C('div_scalar', lambda m, a: a / 4.0, (2, 3)),
    C('rdiv_scalar', lambda m, a: m.div(2.0, a), (2, 3), domain='nonzero'),
    C('rtruediv', lambda m, a: 2.0 / a, (2, 3), domain='nonzero'),     # reciprocal * 2
    C('pow_scalar_2', lambda m, a: a ** 2, (2, 3)),
    C('pow_scalar_3', lambda m, a: a ** 3, (2, 3)),
    C('pow_scalar_half', lambda m, a: a ** 0.5, (2, 3), domain='positive'),
    C('pow_scalar_neg', lambda m, a: a ** -1.5, (2, 3), domain='positive'),
    C('rpow_scalar', lambda m, a: 2.0 ** a, (2, 3)),
    C('scalar_0d', lambda m, a: 3 * a - 1 / (a + 4), S, domain='positive'),
    C('neg', lambda m, a: -a, (2, 3)),
    C('neg_method', lambda m, a: a.neg(), S),
    # ---- unary
    C('exp', lambda m, a: m.exp(a), (2, 3)),
    C('exp_method', lambda m, a: a.exp(), S),
    C('log', lambda m, a: m.log(a), (2, 3), domain='positive'),
    C('log_method', lambda m, a: a.log(), (4,), domain='positive'),
    C('tanh', lambda m, a: m.tanh(a), (2, 3)),
    C('tanh_method', lambda m, a: a.tanh(), S),
    C('sigmoid', lambda m, a: m.sigmoid(a), (2, 3)),
    C('sigmoid_method', lambda m, a: a.sigmoid(), (5,)),
    C('relu', lambda m, a: m.relu(a), (2, 3), domain='nonzero'),
    C('relu_method', lambda m, a: a.relu(), (5,), domain='nonzero'),
    # ---- reductions
    C('sum_all', lambda m, a: a.sum(), (2, 3)),
    C('sum_fn', lambda m, a: m.sum(a), (3, 1)),
    C('sum_0d', lambda m, a: a.sum(), S),
    C('sum_dim0', lambda m, a: a.sum(0), (2, 3)),
    C('sum_dim_neg', lambda m, a: a.sum(dim=-1), (2, 3, 2)),
    C('sum_dim_tuple', lambda m, a: a.sum(dim=(0, 2)), (2, 3, 2)),
    C('sum_keepdim', lambda m, a: a.sum(1, keepdim=True), (2, 3, 2)),
    C('sum_tuple_keepdim', lambda m, a: a.sum((0, -1), keepdim=True), (2, 3, 2)),
    C('sum_size1_dim', lambda m, a: a.sum(1), (3, 1)),
    C('sum_fn_dim', lambda m, a: m.sum(a, 1, keepdim=True), (2, 3)),
    C('mean_all', lambda m, a: a.mean(), (2, 3)),
    C('mean_0d', lambda m, a: a.mean(), S),
    C('mean_dim', lambda m, a: a.mean(0), (4, 3)),
    C('mean_dim_tuple', lambda m, a: a.mean(dim=(0, 1)), (2, 3, 2)),
    C('mean_keepdim', lambda m, a: a.mean(-1, keepdim=True), (2, 3)),
    C('mean_fn', lambda m, a: m.mean(a, dim=0, keepdim=True), (3, 2)),
    # ---- matrix products
    C('mm', lambda m, a, b: m.mm(a, b), (2, 3), (3, 4)),
    C('mm_method', lambda m, a, b: a.mm(b), (3, 1), (1, 1)),
    C('mm_const_a', lambda m, a, b: a.mm(b), (2, 3), (3, 2), rg=(False, True)),
    C('mm_const_b', lambda m, a, b: a.mm(b), (2, 3), (3, 2), rg=(True, False)),
    C('mm_large', lambda m, a, b: a.mm(b), (40, 30), (30, 35)),   # BLAS path in Python
    C('mm_large_const', lambda m, a, b: a.mm(b), (40, 30), (30, 35), rg=(False, True)),
    C('matmul_2d_2d', lambda m, a, b: a @ b, (2, 3), (3, 2)),
    C('matmul_1d_1d', lambda m, a, b: a @ b, (4,), (4,)),
    C('matmul_2d_1d', lambda m, a, b: a @ b, (2, 3), (3,)),
    C('matmul_1d_2d', lambda m, a, b: a @ b, (3,), (3, 2)),
    C('matmul_fn', lambda m, a, b: m.matmul(a, b), (2, 3), (3,)),
    C('matmul_method', lambda m, a, b: a.matmul(b), (3,), (3, 2)),
    # ---- expand / view / reshape / t
    C('expand', lambda m, a: a.expand(2, 3), (1, 3)),
    C('expand_lead', lambda m, a: a.expand(2, 3, 4), (3, 1)),
    C('expand_minus1', lambda m, a: a.expand(-1, 4), (3, 1)),
    C('expand_0d', lambda m, a: a.expand(2, 2), S),
    C('expand_noop', lambda m, a: a.expand(2, 3) * 2, (2, 3)),
    C('expand_as', lambda m, a, b: a.expand_as(b), (3, 1), (3, 4), rg=(True, False)),
    C('expand_as_mul', lambda m, a, b: a.expand_as(b) * b, (1, 4), (3, 4)),
    C('view', lambda m, a: a.view(3, 2), (2, 3)),
    C('view_minus1', lambda m, a: a.view(-1), (2, 3)),
    C('view_tuple', lambda m, a: a.view((1, 6)) * 2, (2, 3)),
    C('view_0d', lambda m, a: a.view(1, 1), S),
    C('reshape', lambda m, a: a.reshape(2, -1), (3, 2)),
    C('reshape_to_0d', lambda m, a: a.reshape(()), (1,)),
    C('reshape_fn', lambda m, a: m.reshape(a, (6,)), (2, 3)),
    C('t', lambda m, a: a.t(), (2, 3)),
    C('t_fn', lambda m, a: m.t(a), (3, 2)),
    C('t_1d', lambda m, a: a.t(), (3,)),
    C('t_mm', lambda m, a, b: a.t().mm(b), (3, 2), (3, 4)),
    C('t_then_reshape', lambda m, a: a.t().reshape(-1), (2, 3)),
    # ---- basic indexing and slicing
    C('index_int', lambda m, a: a[1], (3, 2)),
    C('index_neg', lambda m, a: a[-1], (4,)),
    C('index_two_ints', lambda m, a: a[0, 1], (2, 3)),
    C('slice', lambda m, a: a[1:3], (4, 2)),
    C('slice_step', lambda m, a: a[::2], (5,)),
    C('slice_cols', lambda m, a: a[:, 1], (2, 3)),
    C('slice_2d', lambda m, a: a[1:, :2], (3, 3)),
    C('slice_ellipsis', lambda m, a: a[..., 0], (2, 2, 3)),
    C('index_none', lambda m, a: a[None], (2, 3)),
    C('index_repeat', lambda m, a: a[0] * a[1] + a[0], (2, 3)),
    C('iterate', lambda m, a: sum(x * x for x in a), (3,)),
    # ---- compositions that exercise the tape across many records
    C('linear_tanh', lambda m, x, w, b: m.tanh(x.mm(w) + b).sum(), (4, 3), (3, 2), (2,)),
    C('mse', lambda m, p, y: ((p - y) ** 2).mean(), (4, 1), (4, 1), rg=(True, False)),
    C('softplus', lambda m, a: m.log(1 + m.exp(a)), (2, 3)),
    C('seed_f', lambda m, a: a ** 2 * m.exp(a), (3, 4)),
    C('logistic_loss', lambda m, x, w: -m.log(m.sigmoid(x @ w)).mean(), (5, 3), (3,),
      rg=(False, True)),
    C('two_layer', lambda m, x, w1, w2: m.relu(x.mm(w1)).mm(w2).sum(1), (3, 2), (2, 4), (4, 1)),
    C('broadcast_chain', lambda m, a, b, c: ((a * b + c) / (1 + b * b)).sum(0), (3, 1), (4,), S),
    C('reuse_many', lambda m, a: (a * a.sum() - a.mean(0, keepdim=True)).sum(-1), (3, 2)),
]

IDS = [c.name for c in CASES]
assert len(set(IDS)) == len(IDS), 'two op cases share a name'


def _params():
    """The cases as pytest params; a case with a known bug xfails strictly."""
    return [pytest.param(c, id=c.name, marks=pytest.mark.xfail(reason=c.bug, strict=True)
                         if c.bug else ()) for c in CASES]


def make_inputs(case, dtype=np.float64, seed=None):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) if seed is None else seed)
    arrays = []
    for shape in case.shapes:
        if case.domain == 'positive':
            x = rng.uniform(0.5, 2.0, shape)
        elif case.domain == 'nonzero':
            x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            x = rng.standard_normal(shape)
        arrays.append(np.asarray(x, dtype=dtype))
    return arrays


def call(case, m, tensors):
    return case.fn(m, *tensors)


# ------------------------------------------------------------- gradcheck
@pytest.mark.parametrize('case', _params())
def test_gradcheck_float64(case):
    arrays = make_inputs(case)
    inputs = [tape.tensor(a, dtype=tape.float64, requires_grad=r)
              for a, r in zip(arrays, case.requires())]
    check_grad(lambda *xs: call(case, tape, xs), inputs)


# ------------------------------------------------------- PyTorch oracle
def _run(m, case, arrays, v_seed=1):
    """Forward and backward with a random upstream gradient; returns values, grads, node."""
    if m is tape:
        xs = [tape.tensor(a, dtype=tape.float64, requires_grad=r)
              for a, r in zip(arrays, case.requires())]
    else:
        xs = [m.tensor(a, dtype=m.float64, requires_grad=r)
              for a, r in zip(arrays, case.requires())]
    y = call(case, m, xs)
    v = np.random.default_rng(v_seed).standard_normal(tuple(y.shape))
    y.backward(m.tensor(v, dtype=m.float64))
    grads = [None if x.grad is None else np.array(x.grad.detach().numpy()) for x in xs]
    node = y.grad_fn.name() if y.grad_fn is not None else None
    return np.array(y.detach().numpy()), tuple(y.shape), grads, node


@pytest.mark.parametrize('case', _params())
def test_matches_torch_float64(case, torch_or_skip):
    torch = torch_or_skip
    arrays = make_inputs(case)
    val, shape, grads, _ = _run(tape, case, arrays)
    tval, tshape, tgrads, _ = _run(torch, case, arrays)
    assert shape == tshape, f'shape {shape} != torch {tshape}'
    np.testing.assert_allclose(val, tval, rtol=1e-6, atol=1e-6)
    for i, (g, tg) in enumerate(zip(grads, tgrads)):
        assert (g is None) == (tg is None), f'input {i}: grad {g} vs torch {tg}'
        if g is not None:
            assert g.shape == tg.shape
            np.testing.assert_allclose(g, tg, rtol=1e-6, atol=1e-6,
                                       err_msg=f'gradient of input {i}')


# grad_fn names that differ from PyTorch's (each is a real, if cosmetic, divergence)
_NODE_NAME_BUGS = {}


def _node_params():
    out = []
    for c in CASES:
        marks = ()
        if c.name in _NODE_NAME_BUGS:
            marks = pytest.mark.xfail(reason=_NODE_NAME_BUGS[c.name], strict=True)
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


@pytest.mark.parametrize('case', _node_params())
def test_grad_fn_name_matches_torch(case, torch_or_skip):
    torch = torch_or_skip
    arrays = make_inputs(case)
    xs = [tape.tensor(a, dtype=tape.float64, requires_grad=r)
          for a, r in zip(arrays, case.requires())]
    txs = [torch.tensor(a, dtype=torch.float64, requires_grad=r)
           for a, r in zip(arrays, case.requires())]
    y = call(case, tape, xs)
    ty = call(case, torch, txs)
    assert not y.is_leaf and y.grad_fn is not None
    assert y.grad_fn.name() == ty.grad_fn.name()
    assert f'grad_fn=<{ty.grad_fn.name()}>' in repr(y)


# ---------------------------------------------------------------- float32
@pytest.mark.parametrize('case', _params())
def test_float32_matches_float64(case):
    a64 = make_inputs(case)
    a32 = [a.astype(np.float32) for a in a64]
    # evaluate float64 at the float32-rounded inputs so only arithmetic differs
    a64 = [a.astype(np.float64) for a in a32]
    x32 = [tape.tensor(a, requires_grad=r) for a, r in zip(a32, case.requires())]
    x64 = [tape.tensor(a, requires_grad=r) for a, r in zip(a64, case.requires())]
    assert all(x.dtype == tape.float32 for x in x32)
    y32 = call(case, tape, x32)
    y64 = call(case, tape, x64)
    assert y32.dtype == tape.float32, f'float32 inputs gave a {y32.dtype} result'
    assert y64.dtype == tape.float64
    scale = max(1.0, float(np.max(np.abs(y64.detach().numpy()))))
    np.testing.assert_allclose(y32.detach().numpy(), y64.detach().numpy(),
                               rtol=1e-5, atol=1e-5 * scale)
    v = np.random.default_rng(2).standard_normal(tuple(y64.shape))
    y32.backward(tape.tensor(v.astype(np.float32)))
    y64.backward(tape.tensor(v))
    for i, (p, q) in enumerate(zip(x32, x64)):
        if q.grad is None:
            assert p.grad is None
            continue
        assert p.grad.dtype == tape.float32, f'input {i}: float32 leaf got a {p.grad.dtype} grad'
        gscale = max(1.0, float(np.max(np.abs(q.grad.numpy()))))
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4,
                                   atol=1e-5 * gscale, err_msg=f'gradient of input {i}')


# ---------------------------------------------- fixed points where rules branch
_EDGE = [
    ('relu_at_zero', lambda m, a: m.relu(a), [-1.0, 0.0, 2.0], None),
    ('pow2_at_zero', lambda m, a: a ** 2, [0.0, -1.0, 3.0], None),
    ('pow0', lambda m, a: a ** 0, [0.0, -1.0, 3.0], None),
    ('pow1_at_zero', lambda m, a: a ** 1, [0.0, 2.0], None),
    ('pow_half_at_zero', lambda m, a: a ** 0.5, [0.0, 4.0], None),
    ('pow_neg_at_zero', lambda m, a: a ** -1, [0.0, 4.0], None),
    ('sigmoid_saturated', lambda m, a: m.sigmoid(a), [-40.0, 0.0, 40.0], None),
    ('tanh_saturated', lambda m, a: m.tanh(a), [-30.0, 0.0, 30.0], None),
    ('exp_large', lambda m, a: m.exp(a), [-50.0, 0.0, 50.0], None),
    ('exp_overflow_times_zero', lambda m, a: m.exp(a) * 0, [1000.0], None),
    ('mul_zero', lambda m, a: a * 0, [1.0, -2.0], None),
    ('mul_nan', lambda m, a: a * float('nan'), [1.0], None),
    ('sum_empty_dim', lambda m, a: a.view(2, 0).sum(1), [], None),
    ('index_last_of_1', lambda m, a: a[0].sum(), [5.0], None),
    # division by zero in a VJP gives inf/nan as in torch (not ZeroDivisionError)
    ('rdiv_at_zero', lambda m, a: 1.0 / a, [0.0, 2.0], None),
    ('div_tensor_zero', lambda m, a: a / (a * 0), [1.0, 2.0], None),
    ('div_scalar_zero', lambda m, a: a / 0, [1.0, 2.0], None),
    ('log_at_zero', lambda m, a: m.log(a), [0.0, 1.0], None),
]


@pytest.mark.parametrize('fn,values', [
    pytest.param(f, v, id=n, marks=pytest.mark.xfail(reason=bug, strict=True) if bug else ())
    for n, f, v, bug in _EDGE])
def test_edge_values_match_torch(fn, values, torch_or_skip):
    torch = torch_or_skip
    x = tape.tensor(values, dtype=tape.float64, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    with np.errstate(all='ignore'):
        y = fn(tape, x)
    ty = fn(torch, tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    g = np.ones(tuple(ty.shape))
    y.backward(tape.tensor(g, dtype=tape.float64))
    ty.backward(torch.tensor(g, dtype=torch.float64))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=0)


def test_every_core_rule_has_a_case():
    """A meta-test: each core primitive the engine records appears in the op table.

    Reads the recorded primitives off the tape's readable dump (``print(tape)``
    lists one record per line: index, rule name, slots)."""
    import re
    from tape._rules import RULES
    from tape._tape import resolve
    core = {'add', 'sub', 'mul', 'div', 'pow', 'add_scalar', 'sub_scalar', 'rsub_scalar',
            'mul_scalar', 'div_scalar', 'rdiv_scalar', 'pow_scalar', 'rpow_scalar', 'neg',
            'exp', 'log', 'tanh', 'sigmoid', 'relu', 'sum', 'mean', 'sum_dim', 'mean_dim',
            'expand', 'view', 'reshape', 'slice', 'select', 't', 'mm'}
    names = {r.name for r in RULES}
    assert core <= names, f'rules missing from the table: {sorted(core - names)}'
    line = re.compile(r'^\s+\d+\s+(\w+)\s+slot\b', re.M)
    seen = set()
    for case in CASES:
        arrays = make_inputs(case)
        xs = [tape.tensor(a, dtype=tape.float64, requires_grad=r)
              for a, r in zip(arrays, case.requires())]
        y = call(case, tape, xs)
        seen |= set(line.findall(str(resolve(y))))
    assert seen, 'could not read any record names from the tape dump'
    assert seen <= names
    assert not (core - seen), f'no op case records {sorted(core - seen)}'


# ------------------------------------------------- randomized (hypothesis)
from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

_BINARY = {
    'add': lambda a, b: a + b,
    'sub': lambda a, b: a - b,
    'mul': lambda a, b: a * b,
    'div': lambda a, b: a / (1.5 + b * b),
    'pow': lambda a, b: (1.0 + a * a) ** b,
}


def _torch_and_tape_grads(torch, fn, arrays, requires):
    res = []
    for m in (tape, torch):
        xs = [m.tensor(a, dtype=m.float64, requires_grad=r) for a, r in zip(arrays, requires)]
        y = fn(m, *xs)
        v = np.random.default_rng(3).standard_normal(tuple(y.shape))
        y.backward(m.tensor(v, dtype=m.float64))
        res.append((y.detach().numpy().copy(),
                    [None if x.grad is None else x.grad.numpy().copy() for x in xs]))
    return res


@settings(max_examples=60, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                 max_side=3),
       op=st.sampled_from(sorted(_BINARY)),
       requires=st.sampled_from([(True, True), (True, False), (False, True)]),
       seed=st.integers(0, 2**16))
def test_random_broadcast_binary_matches_torch(shapes, op, requires, seed):
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes.input_shapes]
    f = _BINARY[op]
    (val, grads), (tval, tgrads) = _torch_and_tape_grads(
        torch, lambda m, a, b: f(a, b), arrays, requires)
    np.testing.assert_allclose(val, tval, rtol=1e-10, atol=1e-12)
    for g, tg in zip(grads, tgrads):
        assert (g is None) == (tg is None)
        if g is not None:
            assert g.shape == tg.shape
            np.testing.assert_allclose(g, tg, rtol=1e-10, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3),
       data=st.data(), keepdim=st.booleans(), reduce=st.sampled_from(['sum', 'mean']))
def test_random_reductions_match_torch(shape, data, keepdim, reduce):
    torch = pytest.importorskip('torch')
    nd = len(shape)
    dims = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                              unique_by=lambda d: d % nd))
    dim = dims[0] if len(dims) == 1 and data.draw(st.booleans()) else tuple(dims)
    arrays = [np.random.default_rng(len(shape)).standard_normal(shape)]
    (val, grads), (tval, tgrads) = _torch_and_tape_grads(
        torch, lambda m, a: getattr(a, reduce)(dim=dim, keepdim=keepdim) * a.sum(),
        arrays, (True,))
    assert val.shape == tval.shape
    np.testing.assert_allclose(val, tval, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grads[0], tgrads[0], rtol=1e-10, atol=1e-12)


_POOL_SHAPES = [(2, 3), (3,), (), (2, 1)]       # all broadcast to (2, 3)
_UNARY_STEPS = [
    lambda m, a: a.tanh(), lambda m, a: m.sigmoid(a), lambda m, a: a.tanh().exp(),
    lambda m, a: m.relu(a), lambda m, a: -a, lambda m, a: a * 0.5, lambda m, a: 1.5 - a,
    lambda m, a: a.sum(-1, keepdim=True) if a.dim() else a, lambda m, a: a.mean(),
    lambda m, a: (a * a + 1).log(), lambda m, a: a ** 2, lambda m, a: 2.0 / (2 + a * a),
]


@settings(max_examples=40, deadline=None)
@given(program=st.lists(st.tuples(st.booleans(), st.integers(0, 100), st.integers(0, 100),
                                  st.integers(0, 100)), min_size=1, max_size=10),
       seed=st.integers(0, 2**16))
def test_random_programs_match_torch(program, seed):
    """Random straight-line programs over leaves of broadcastable shapes: the tape
    records merges, broadcasts, scalars and reductions in arbitrary orders."""
    torch = pytest.importorskip('torch')
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in _POOL_SHAPES]
    binops = sorted(_BINARY)

    def run(m, *leaves):
        pool = list(leaves)
        for is_binary, i, j, k in program:
            a = pool[i % len(pool)]
            if is_binary:
                b = pool[j % len(pool)]
                pool.append(_BINARY[binops[k % len(binops)]](a, b))
            else:
                pool.append(_UNARY_STEPS[k % len(_UNARY_STEPS)](m, a))
        return sum(p.sum() for p in pool[len(leaves):]) + leaves[0].sum()

    (val, grads), (tval, tgrads) = _torch_and_tape_grads(
        torch, run, arrays, (True, True, False, True))
    np.testing.assert_allclose(val, tval, rtol=1e-9, atol=1e-12)
    for g, tg in zip(grads, tgrads):
        assert (g is None) == (tg is None)
        if g is not None:
            np.testing.assert_allclose(g, tg, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize('shapes', [
    ((0, 3), (3, 2)),
    ((2, 0), (0, 3)),
    ((2, 3), (3, 0)),
], ids=['zero_rows', 'zero_inner', 'zero_cols'])
def test_mm_with_an_empty_dimension_matches_torch(shapes, torch_or_skip):
    torch = torch_or_skip
    res = []
    for m in (tape, torch):
        a = m.ones(*shapes[0], dtype=m.float64, requires_grad=True)
        b = m.ones(*shapes[1], dtype=m.float64, requires_grad=True)
        y = a.mm(b)
        (y.sum() + (a * 1.0).sum()).backward()
        res.append((tuple(y.shape), a.grad.numpy().copy(), b.grad.numpy().copy()))
    assert res[0][0] == res[1][0]
    for x, y in zip(res[0][1:], res[1][1:]):
        assert x.shape == y.shape
        np.testing.assert_array_equal(x, y)


# Random straight-line programs over views, indexing, expand, mm and elementwise
# ops, on leaves of several shapes; each op is kept only if torch accepts it.
_S_UNARY = [
    lambda m, a: a.t(), lambda m, a: a.view(-1),
    lambda m, a: a.reshape(tuple(a.shape)[::-1]) if a.dim() else a.reshape(1),
    lambda m, a: a[0], lambda m, a: a[1:], lambda m, a: a[:, 1:], lambda m, a: a[::2],
    lambda m, a: a[..., 0], lambda m, a: a[None],
    lambda m, a: a.tanh().exp(), lambda m, a: m.sigmoid(a), lambda m, a: m.relu(a),
    lambda m, a: a.sum(0), lambda m, a: a.sum(-1, keepdim=True), lambda m, a: a.mean(),
    lambda m, a: a.mean((0,), keepdim=True),
    lambda m, a: a.expand(2, *a.shape) if a.dim() < 3 else a,
    lambda m, a: a ** 2, lambda m, a: 1 - a * 0.5, lambda m, a: 1 / (1 + a * a),
    lambda m, a: (a * a + 1).log(), lambda m, a: -a,
    lambda m, a: sum(list(a)) if a.dim() and len(a) < 4 else a,
]
_S_BINARY = [
    lambda m, a, b: a + b, lambda m, a, b: a * b, lambda m, a, b: a - b,
    lambda m, a, b: a / (2 + b * b), lambda m, a, b: a.mm(b),
    lambda m, a, b: a @ b if a.dim() <= 2 and b.dim() <= 2 else a.mm(b),
    lambda m, a, b: a.expand_as(b) * b,
]
_S_SHAPES = [(2, 3), (3, 2), (3,), (2, 1), (), (1, 3), (3, 3)]


@pytest.mark.parametrize('seed', range(40))
def test_random_structural_programs_match_torch(seed, torch_or_skip):
    import random
    torch = torch_or_skip
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in _S_SHAPES]
    req = [True] + [rnd.random() < 0.8 for _ in _S_SHAPES[1:]]
    T = [torch.tensor(a, requires_grad=r) for a, r in zip(arrays, req)]
    P = [tape.tensor(a, dtype=tape.float64, requires_grad=r) for a, r in zip(arrays, req)]
    program = []
    for _ in range(rnd.randint(1, 14)):
        if rnd.random() < 0.5:
            k, i = rnd.randrange(len(_S_UNARY)), rnd.randrange(len(T))
            args = (i,)
            f = _S_UNARY[k]
        else:
            k, i, j = rnd.randrange(len(_S_BINARY)), rnd.randrange(len(T)), rnd.randrange(len(T))
            args = (i, j)
            f = _S_BINARY[k]
        try:
            tr = f(torch, *[T[x] for x in args])
        except Exception:
            continue                       # torch refuses it: not a valid program step
        program.append((f, args))
        pr = f(tape, *[P[x] for x in args])
        assert tuple(pr.shape) == tuple(tr.shape), program
        np.testing.assert_allclose(pr.detach().numpy(), tr.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        T.append(tr)
        P.append(pr)

    def loss(xs):
        outs = [x for x in xs[len(_S_SHAPES):] if x.requires_grad] + [xs[0]]
        return sum((o * (k + 1)).sum() for k, o in enumerate(outs))

    lt, lp = loss(T), loss(P)
    if seed % 3 == 0:                      # autograd.grad with retain_graph first
        ins = [i for i, r in enumerate(req) if r]
        gt = torch.autograd.grad(lt, [T[i] for i in ins], retain_graph=True, allow_unused=True)
        gp = tape.autograd.grad(lp, [P[i] for i in ins], retain_graph=True, allow_unused=True)
        for a, b in zip(gp, gt):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-10)
    lt.backward()
    lp.backward()
    for a, b in zip(P[:len(_S_SHAPES)], T[:len(_S_SHAPES)]):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-10)
