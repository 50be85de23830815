"""One op table drives the op tests (PyTorch's OpInfo idea).

Each row is an op written once as ``fn(m, *xs)`` for a module ``m`` that is
either ``tape`` or ``torch``, so the same line is the test of tape and the
PyTorch oracle (and checks that tape's API spells the call as PyTorch does).
Every row is run over its samples (shapes with broadcasting, size-1 dims, 0-d)
by these tests:

* ``test_gradcheck``: float64 full-Jacobian gradcheck (tape.autograd.gradcheck);
* ``test_gradgradcheck``: second derivatives, for rows marked ``gg``;
* ``test_float32_close_to_float64``: float32 keeps its dtype and its values
  within float32 tolerance of float64;
* ``test_compiled_equals_create_graph``: the Numba sweep and the
  differentiable (create_graph) path give the same gradients;
* ``test_torch_oracle``: values and gradients equal PyTorch's to 1e-6 in float64;
* ``test_every_rule_has_kernel_vjp_and_test_row``: the meta-test.

Then tables of bad inputs, NaN/inf cases and dtype promotion, each against
PyTorch, and a property-based test of random expression graphs.
"""
import inspect
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

import tape
from tape import _differentiable
from tape._rules import RULES

@dataclass
class Case:
    name: str
    fn: object                      # fn(m, *xs) -> Tensor, m is tape or torch
    samples: tuple                  # tuples of input shapes
    domain: object = 'real'         # 'real', 'pos', 'unit', 'prob', 'zeros', or one per input
    gg: bool = False                # run gradgradcheck on the first sample
    f32: bool = True                # float32 must stay close to float64
    torch_ok: bool = True           # compare with PyTorch
    atol: float = 1e-6
    tags: tuple = field(default_factory=tuple)


def C(name, fn, *samples, **kw):
    return Case(name, fn, tuple(samples), **kw)


def _domain_values(rng, shape, domain):
    if callable(domain):
        return domain(rng, shape)
    if domain == 'real':
        v = rng.uniform(-2, 2, shape)
        return np.where(np.abs(v) < 0.05, 0.3, v)      # away from kinks at 0
    if domain == 'pos':
        return rng.uniform(0.5, 2.0, shape)
    if domain == 'unit':
        return rng.uniform(-0.8, 0.8, shape)
    if domain == 'prob':
        return rng.uniform(0.1, 0.9, shape)
    if domain == 'zeros':                # real, with some exact zeros
        v = rng.uniform(-2, 2, shape)
        if v.size:
            v.reshape(-1)[rng.integers(0, v.size, max(1, v.size // 3))] = 0.0
        return v
    raise ValueError(domain)


def make_inputs(case, sample, seed=0):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed)
    doms = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(sample)
    return [np.asarray(_domain_values(rng, s, d), dtype=np.float64) for s, d in zip(sample, doms)]


# fixed integer data used inside rows (converted per module with m.tensor)
IDX3 = np.array([2, 0, 2])
GIDX = np.array([[1, 0, 2], [0, 0, 1]])
TGT = np.array([1, 0, 2, 1])
TGT_IGN = np.array([1, -100, 2, 0])
MASK23 = np.array([[True, False, True], [False, False, True]])
SCAT = np.array([[2, 0], [1, 2]])
W3 = np.array([0.5, 1.0, 2.0])
UNARY = ((3,), ), ((2, 3),), ((),)
BINARY = ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2))


def nnf(m):
    return m.nn.functional


CASES = [
    # ------------------------------------------------------- unary elementwise
    C('neg', lambda m, x: -x, *UNARY, gg=True),
    C('exp', lambda m, x: m.exp(x), *UNARY, gg=True),
    C('log', lambda m, x: m.log(x), *UNARY, domain='pos', gg=True),
    C('sqrt', lambda m, x: x.sqrt(), *UNARY, domain='pos', gg=True),
    C('sin', lambda m, x: m.sin(x), *UNARY),
    C('cos', lambda m, x: x.cos(), *UNARY),
    C('tanh', lambda m, x: x.tanh(), *UNARY, gg=True),
    C('sigmoid', lambda m, x: m.sigmoid(x), *UNARY, gg=True),
    C('relu', lambda m, x: m.relu(x), *UNARY),
    C('abs', lambda m, x: x.abs(), *UNARY),
    C('rsqrt', lambda m, x: m.rsqrt(x), *UNARY, domain='pos', gg=True),
    C('exp2', lambda m, x: m.exp2(x), *UNARY, gg=True),
    C('expm1', lambda m, x: x.expm1(), *UNARY, gg=True),
    C('log2', lambda m, x: m.log2(x), *UNARY, domain='pos', gg=True),
    C('log10', lambda m, x: x.log10(), *UNARY, domain='pos'),
    C('log1p', lambda m, x: m.log1p(x), *UNARY, domain='pos', gg=True),
    C('tan', lambda m, x: m.tan(x), *UNARY, domain='unit', gg=True),
    C('asin', lambda m, x: m.asin(x), *UNARY, domain='unit', gg=True),
    C('acos', lambda m, x: x.acos(), *UNARY, domain='unit', gg=True),
    C('atan', lambda m, x: m.atan(x), *UNARY, gg=True),
    C('sinh', lambda m, x: m.sinh(x), *UNARY, gg=True),
    C('cosh', lambda m, x: x.cosh(), *UNARY, gg=True),
    C('erf', lambda m, x: m.erf(x), *UNARY, gg=True),
    C('erfc', lambda m, x: m.erfc(x), *UNARY, gg=True),
    C('erfinv', lambda m, x: m.erfinv(x), *UNARY, domain='unit', gg=True),
    C('ndtri', lambda m, x: m.special.ndtri(x), *UNARY, domain='prob', gg=True),
    C('lgamma', lambda m, x: x.lgamma(), *UNARY, domain='pos', gg=True),
    C('digamma', lambda m, x: m.digamma(x), *UNARY, domain='pos', gg=True),
    C('polygamma', lambda m, x: m.polygamma(2, x), *UNARY, domain='pos', gg=True),
    C('reciprocal', lambda m, x: x.reciprocal(), *UNARY, domain='pos', gg=True),
    C('square', lambda m, x: m.square(x), *UNARY, gg=True),
    C('silu', lambda m, x: nnf(m).silu(x), *UNARY, gg=True),
    C('gelu', lambda m, x: nnf(m).gelu(x), *UNARY, gg=True),
    C('gelu_tanh', lambda m, x: nnf(m).gelu(x, approximate='tanh'), *UNARY, gg=True),
    C('leaky_relu', lambda m, x: nnf(m).leaky_relu(x, 0.1), *UNARY),
    C('elu', lambda m, x: nnf(m).elu(x, alpha=1.5), *UNARY, gg=True),
    C('softplus', lambda m, x: nnf(m).softplus(x), *UNARY, gg=True),
    C('softplus_threshold', lambda m, x: nnf(m).softplus(x, beta=2.0, threshold=1.0), *UNARY),
    C('sign', lambda m, x: m.sign(x), *UNARY),
    C('floor', lambda m, x: x.floor(), *UNARY),
    C('ceil', lambda m, x: m.ceil(x), *UNARY),
    C('round', lambda m, x: m.round(x), *UNARY),
    C('round_decimals', lambda m, x: m.round(x * 10, decimals=1), *UNARY, f32=False),
    C('trunc', lambda m, x: m.trunc(x), *UNARY),
    C('clamp', lambda m, x: x.clamp(-0.5, 0.7), *UNARY),
    C('hardtanh', lambda m, x: nnf(m).hardtanh(x, -0.5, 0.7), *UNARY),
    C('relu6', lambda m, x: nnf(m).relu6(x * 8), *UNARY),
    C('clamp_min', lambda m, x: m.clamp(x, min=0.2), *UNARY),
    C('clamp_max', lambda m, x: x.clamp(max=-0.2), *UNARY),
    C('clip', lambda m, x: m.clip(x, -1.0, 1.0), *UNARY),
    C('clamp_empty_range', lambda m, x: x.clamp(1.0, -1.0), *UNARY),
    C('clamp_tensor', lambda m, x, lo, hi: x.clamp(lo, hi), ((2, 3), (3,), (2, 1)),
      domain=('real', lambda r, s: r.uniform(-1.5, -0.5, s), lambda r, s: r.uniform(0.5, 1.5, s))),
    # ------------------------------------------------------ binary elementwise
    C('add', lambda m, a, b: a + b, *BINARY, gg=True),
    C('sub', lambda m, a, b: m.sub(a, b), *BINARY),
    C('mul', lambda m, a, b: a * b, *BINARY, gg=True),
    C('div', lambda m, a, b: a / b, *BINARY, domain=('real', 'pos'), gg=True),
    C('true_divide', lambda m, a, b: m.true_divide(a, b), BINARY[1], domain=('real', 'pos')),
    C('pow', lambda m, a, b: a ** b, *BINARY, domain=('pos', 'real'), gg=True),
    C('maximum', lambda m, a, b: m.maximum(a, b), *BINARY),
    C('minimum', lambda m, a, b: m.minimum(a, b), *BINARY),
    C('max_binary', lambda m, a, b: m.max(a, b), BINARY[1]),
    C('atan2', lambda m, a, b: m.atan2(a, b), *BINARY, gg=True),
    C('remainder', lambda m, a, b: m.remainder(a, b), *BINARY, domain=('real', 'pos')),
    C('mod_operator', lambda m, a, b: a % b, BINARY[1], domain=('real', 'pos')),
    C('fmod', lambda m, a, b: m.fmod(a, b), *BINARY, domain=('real', 'pos')),
    C('add_scalar', lambda m, x: x + 2.5, *UNARY),
    C('sub_scalar', lambda m, x: x - 2.5, *UNARY),
    C('radd_scalar', lambda m, x: 2.5 + x, *UNARY),
    C('rsub_scalar', lambda m, x: 2.5 - x, *UNARY),
    C('mul_scalar', lambda m, x: 3 * x, *UNARY),
    C('div_scalar', lambda m, x: x / 4.0, *UNARY),
    C('rdiv_scalar', lambda m, x: m.div(2.0, x), *UNARY, domain='pos', gg=True),
    C('rtruediv', lambda m, x: 2.0 / x, *UNARY, domain='pos', gg=True),     # reciprocal * 2
    C('pow_scalar', lambda m, x: x ** 2.5, *UNARY, domain='pos', gg=True),
    C('rpow_scalar', lambda m, x: 2.0 ** x, *UNARY, gg=True),
    C('remainder_scalar', lambda m, x: x % 1.5, *UNARY),
    C('fmod_scalar', lambda m, x: m.fmod(x, 1.5), *UNARY),
    C('where', lambda m, a, b: m.where(a > 0, a, b), ((2, 3), (2, 3)), ((2, 3), (3,)),
      ((3,), ()), gg=True),
    C('where_scalar', lambda m, a: m.where(a > 0, a, 0.5), *UNARY),
    C('masked_fill', lambda m, a: a.masked_fill(m.tensor(MASK23), -1.0), ((2, 3),)),
    C('masked_fill_tensor_value', lambda m, a, v: a.masked_fill(a < 0, v), ((2, 3), ())),
    # --------------------------------------------------------------- reductions
    C('sum', lambda m, x: x.sum(), *UNARY),
    C('sum_dims', lambda m, x: x.sum((0, 2), keepdim=True), ((2, 3, 2),)),
    C('mean_dim', lambda m, x: m.mean(x, 1), ((2, 3),), ((4, 1),)),
    C('prod', lambda m, x: x.prod(), ((4,),), ((2, 3),), ((),), gg=True),
    C('prod_zeros', lambda m, x: m.prod(x), ((5,),), ((2, 3),), domain='zeros'),
    C('prod_dim', lambda m, x: x.prod(1), ((2, 3),), ((2, 3, 2),), domain='zeros'),
    C('prod_keepdim', lambda m, x: m.prod(x, 0, keepdim=True), ((3, 2),)),
    C('cumsum', lambda m, x: x.cumsum(1), ((2, 3, 2),), ((2, 4),), gg=True),
    C('cumsum_0d', lambda m, x: m.cumsum(x, 0), ((),), ((4,),)),
    C('cumprod', lambda m, x: x.cumprod(1), ((2, 3, 2),), ((2, 4),), gg=True),
    C('cumprod_zeros', lambda m, x: m.cumprod(x, 0), ((6,),), ((4, 3),), domain='zeros', gg=True),
    C('max_all', lambda m, x: x.max(), ((2, 3),), ((),)),
    C('min_all', lambda m, x: m.min(x), ((2, 3),)),
    C('max_dim', lambda m, x: x.max(1).values, ((2, 3),), ((3, 1),)),
    C('max_dim_keepdim', lambda m, x: m.max(x, 0, keepdim=True)[0], ((2, 3),)),
    C('min_dim', lambda m, x: x.min(dim=1)[0], ((2, 3),)),
    C('amax', lambda m, x: x.amax((0, 2)), ((2, 3, 2),)),
    C('amin', lambda m, x: m.amin(x, 1, keepdim=True), ((2, 3),)),
    # two-way ties: the even share is what central differences give
    C('max_all_ties', lambda m, x: x.max(), ((2, 3),),
      domain=lambda rng, shape: np.array([[1.5, -0.7, 1.5], [0.3, -0.7, 1.2]])),
    C('min_all_ties', lambda m, x: x.min(), ((2, 3),),
      domain=lambda rng, shape: np.array([[1.5, -0.7, 1.5], [0.3, -0.7, 1.2]])),
    C('amin_all', lambda m, x: x.amin(), ((2, 3),)),
    C('median_all', lambda m, x: x.median(), ((2, 3),)),
    C('nanmedian_all', lambda m, x: x.nanmedian(), ((2, 3),)),
    C('var', lambda m, x: x.var(), ((2, 3),), gg=True),
    C('var_dim', lambda m, x: x.var(1, keepdim=True), ((2, 3),)),
    C('var_correction0', lambda m, x: m.var(x, 0, correction=0), ((3, 2),)),
    C('std', lambda m, x: x.std(), ((2, 3),), gg=True),
    C('std_dim', lambda m, x: m.std(x, dim=(0, 1)), ((2, 3, 2),)),
    C('norm', lambda m, x: x.norm(), ((2, 3),), gg=True),
    C('norm_dim', lambda m, x: m.norm(x, dim=1), ((2, 3),)),
    C('norm_p1', lambda m, x: x.norm(p=1), ((4,),)),
    C('norm_p3', lambda m, x: m.norm(x, p=3, dim=0, keepdim=True), ((3, 2),)),
    C('linalg_norm', lambda m, x: m.linalg.norm(x), ((2, 3),), ((3,),)),
    C('vector_norm_inf', lambda m, x: m.linalg.vector_norm(x, ord=float('inf')), ((2, 3),)),
    C('matrix_norm_1', lambda m, x: m.linalg.matrix_norm(x, ord=1), ((3, 3),)),
    C('matrix_norm_inf', lambda m, x: m.linalg.norm(x, ord=float('inf')), ((2, 3),)),
    C('logsumexp', lambda m, x: x.logsumexp(1), ((2, 3),), ((3, 1),), gg=True),
    C('logsumexp_dims', lambda m, x: m.logsumexp(x, (0, 2), keepdim=True), ((2, 3, 2),)),
    # ----------------------------------------------------------- linear algebra
    C('mm', lambda m, a, b: a.mm(b), ((2, 3), (3, 4)), gg=True),
    C('bmm', lambda m, a, b: m.bmm(a, b), ((2, 2, 3), (2, 3, 4)), gg=True),
    C('matmul_1x1', lambda m, a, b: a @ b, ((3,), (3,))),
    C('matmul_2x1', lambda m, a, b: m.matmul(a, b), ((2, 3), (3,))),
    C('matmul_1x2', lambda m, a, b: a @ b, ((3,), (3, 2))),
    C('matmul_3x2', lambda m, a, b: a @ b, ((2, 2, 3), (3, 2))),
    C('matmul_3x3', lambda m, a, b: a.matmul(b), ((2, 2, 3), (2, 3, 2))),
    C('matmul_bcast', lambda m, a, b: a @ b, ((1, 2, 3), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2))),
    C('matmul_1x3', lambda m, a, b: a @ b, ((3,), (2, 3, 2))),
    C('matmul_3x1', lambda m, a, b: a @ b, ((2, 2, 3), (3,))),
    C('dot', lambda m, a, b: m.dot(a, b), ((4,), (4,))),
    C('mv', lambda m, a, b: a.mv(b), ((2, 3), (3,))),
    C('outer', lambda m, a, b: m.outer(a, b), ((3,), (2,))),
    C('einsum_mm', lambda m, a, b: m.einsum('ij,jk->ik', a, b), ((2, 3), (3, 2))),
    C('einsum_bmm', lambda m, a, b: m.einsum('bij,bjk->bik', a, b), ((2, 2, 3), (2, 3, 2))),
    C('einsum_dot', lambda m, a, b: m.einsum('i,i->', a, b), ((3,), (3,))),
    C('einsum_outer', lambda m, a, b: m.einsum('i,j->ij', a, b), ((3,), (2,))),
    C('einsum_transpose', lambda m, a: m.einsum('ij->ji', a), ((2, 3),)),
    C('einsum_trace', lambda m, a: m.einsum('ii->', a), ((3, 3),)),
    C('einsum_diag', lambda m, a: m.einsum('ii->i', a), ((3, 3),)),
    C('einsum_sum', lambda m, a: m.einsum('ijk->ik', a), ((2, 3, 2),)),
    C('einsum_implicit', lambda m, a, b: m.einsum('ij,jk', a, b), ((2, 3), (3, 2))),
    C('einsum_ellipsis', lambda m, a, b: m.einsum('...ij,...jk->...ik', a, b),
      ((2, 2, 3), (2, 3, 2))),
    C('einsum_mixed', lambda m, a, b: m.einsum('bij,jk->bki', a, b), ((2, 2, 3), (3, 2))),
    C('einsum_three', lambda m, a, b, c: m.einsum('ij,jk,kl->il', a, b, c),
      ((2, 3), (3, 2), (2, 2))),
    # -------------------------------------------------------------------- shape
    C('reshape', lambda m, x: x.reshape(3, 2) * 1.5, ((2, 3),)),
    C('view', lambda m, x: x.view(-1), ((2, 3),)),
    C('flatten', lambda m, x: x.flatten(1), ((2, 3, 2),)),
    C('flatten_all', lambda m, x: m.flatten(x), ((2, 3),), ((),)),
    C('squeeze', lambda m, x: x.squeeze(), ((2, 1, 3),), ((1,),)),
    C('squeeze_dim', lambda m, x: m.squeeze(x, 1), ((2, 1, 3),)),
    C('squeeze_dims', lambda m, x: x.squeeze((1, 3)), ((2, 1, 3, 1),)),
    C('unsqueeze', lambda m, x: x.unsqueeze(-1), ((2, 3),), ((),)),
    C('transpose', lambda m, x: x.transpose(0, 2), ((2, 3, 2),)),
    C('permute', lambda m, x: x.permute(2, 0, 1), ((2, 3, 2),)),
    C('diagonal', lambda m, x: x.diagonal(-1, 0, 2), ((3, 2, 4),), ((2, 1, 5),)),
    C('t', lambda m, x: x.t(), ((2, 3),)),
    C('T', lambda m, x: x.T, ((2, 3),)),
    C('t_vector', lambda m, x: x.t() * 2, ((3,),), ((),)),
    C('reshape_strided', lambda m, x: x[:, 1:].reshape(2, 1, 2), ((2, 3),)),
    C('reshape_copy', lambda m, x: x.t().reshape(-1), ((2, 3),)),
    C('contiguous_view', lambda m, x: x.t().contiguous().view(-1), ((2, 3),)),
    C('expand', lambda m, x: x.expand(2, 3), ((3,),), ((2, 1),)),
    C('repeat', lambda m, x: x.repeat(2, 1, 2), ((2, 3),), ((3,),)),
    C('tile', lambda m, x: m.tile(x, (2,)), ((2, 3),)),
    C('flip', lambda m, x: x.flip(0), ((2, 3),)),
    C('flip_dims', lambda m, x: m.flip(x, (0, 2)), ((2, 3, 2),)),
    C('narrow', lambda m, x: x.narrow(1, 1, 2), ((2, 3),)),
    C('cat', lambda m, a, b: m.cat([a, b * 2], 1), ((2, 3), (2, 2))),
    C('cat_const', lambda m, a: m.cat([a, m.ones(1, 3, dtype=a.dtype)]), ((2, 3),)),
    C('stack', lambda m, a, b: m.stack([a, b], 1), ((2, 3), (2, 3))),
    C('split', lambda m, x: sum((i + 1.0) * p.sum() for i, p in enumerate(x.split(2, 1))),
      ((2, 5),)),
    C('split_sizes', lambda m, x: x.split([1, 2])[1] * 3, ((3, 2),)),
    C('chunk', lambda m, x: x.chunk(2)[1] * 2, ((5, 2),)),
    C('unbind', lambda m, x: x.unbind(1)[2] * 2, ((2, 3),)),
    C('movedim', lambda m, x: m.movedim(x, 0, 2), ((2, 3, 2),)),
    # ----------------------------------------------------------------- indexing
    C('getitem_int', lambda m, x: x[1], ((3, 2),)),
    C('getitem_slices', lambda m, x: x[:, 1::2], ((2, 5),)),
    C('getitem_none_ellipsis', lambda m, x: x[None, ..., 0], ((2, 3),)),
    C('getitem_alias', lambda m, x: x[..., :] * 2, ((2, 3),)),
    C('getitem_slice_none', lambda m, x: x[1:, None], ((3, 2),)),
    C('getitem_list', lambda m, x: x[[0, 2, 2]], ((3, 2),)),
    C('getitem_tensor', lambda m, x: x[m.tensor(IDX3)], ((3, 2),)),
    C('getitem_mask', lambda m, x: x[x > 0], ((2, 3),)),
    C('getitem_mask_tensor', lambda m, x: x[m.tensor(MASK23)], ((2, 3),)),
    C('gather', lambda m, x: x.gather(1, m.tensor(GIDX)), ((2, 3),)),
    C('index_select', lambda m, x: m.index_select(x, 0, m.tensor(IDX3)), ((3, 2),)),
    C('take', lambda m, x: m.take(x, m.tensor(IDX3)), ((2, 3),)),
    C('masked_select', lambda m, x: x.masked_select(m.tensor(MASK23)), ((2, 3),)),
    C('scatter', lambda m, x, s: x.scatter(1, m.tensor(SCAT), s), ((2, 3), (2, 2))),
    C('scatter_value', lambda m, x: m.scatter(x, 1, m.tensor(SCAT), 0.5), ((2, 3),)),
    C('scatter_add', lambda m, x, s: x.scatter_add(1, m.tensor(SCAT), s), ((2, 3), (2, 2))),
    C('setitem', lambda m, x, v: _setitem_rows(m, x, v), ((3, 3), (3,))),
    C('setitem_mask', lambda m, x: _setitem_mask(m, x), ((2, 3),)),
    C('setitem_index', lambda m, x, v: _setitem_index(m, x, v), ((3, 2), (2, 2))),
    # ------------------------------------------------------------ nn.functional
    C('softmax', lambda m, x: nnf(m).softmax(x, dim=1), ((2, 3),), ((1, 3),), gg=True),
    C('softmax_method', lambda m, x: x.softmax(0), ((2, 3),)),
    C('log_softmax', lambda m, x: nnf(m).log_softmax(x, dim=-1), ((2, 3),), gg=True),
    C('cross_entropy', lambda m, x: nnf(m).cross_entropy(x, m.tensor(TGT)), ((4, 3),), gg=True),
    C('cross_entropy_weight', lambda m, x: nnf(m).cross_entropy(
        x, m.tensor(TGT_IGN), weight=m.tensor(W3, dtype=x.dtype)), ((4, 3),)),
    C('cross_entropy_smoothing', lambda m, x: nnf(m).cross_entropy(
        x, m.tensor(TGT_IGN), label_smoothing=0.2), ((4, 3),)),
    C('cross_entropy_probs', lambda m, x, p: nnf(m).cross_entropy(x, nnf(m).softmax(p, 1)),
      ((4, 3), (4, 3))),
    C('cross_entropy_none', lambda m, x: nnf(m).cross_entropy(
        x, m.tensor(TGT), reduction='none'), ((4, 3),)),
    C('nll_loss', lambda m, x: nnf(m).nll_loss(x, m.tensor(TGT_IGN), reduction='sum'), ((4, 3),)),
    C('mse_loss', lambda m, a, b: nnf(m).mse_loss(a, b), ((2, 3), (2, 3)), gg=True),
    C('mse_loss_sum', lambda m, a, b: nnf(m).mse_loss(a, b, reduction='sum'), ((3,), (3,))),
    C('l1_loss', lambda m, a, b: nnf(m).l1_loss(a, b), ((2, 3), (2, 3))),
    C('bce', lambda m, p, t: nnf(m).binary_cross_entropy(p, t), ((2, 3), (2, 3)),
      domain='prob', gg=True),
    C('bce_weight', lambda m, p: nnf(m).binary_cross_entropy(
        p, m.tensor(MASK23, dtype=p.dtype), weight=m.tensor(W3, dtype=p.dtype),
        reduction='none'), ((2, 3),), domain='prob'),
    C('bce_with_logits', lambda m, x, t: nnf(m).binary_cross_entropy_with_logits(x, t),
      ((2, 3), (2, 3)), domain=('real', 'prob'), gg=True),
    C('bce_with_logits_pos_weight', lambda m, x, t: nnf(m).binary_cross_entropy_with_logits(
        x, t, pos_weight=m.tensor(W3, dtype=x.dtype)), ((2, 3), (2, 3)), domain=('real', 'prob')),
    C('linear', lambda m, x, w, b: nnf(m).linear(x, w, b), ((2, 3), (4, 3), (4,)), gg=True),
    C('linear_3d_nobias', lambda m, x, w: nnf(m).linear(x, w), ((2, 2, 3), (4, 3))),
]


def _setitem_rows(m, x, v):
    y = x * 1.0
    y[0] = v
    y[1:, 1] = 0.5
    return y * 2


def _setitem_mask(m, x):
    y = x * 1.0
    y[y > 0] = 0.0
    return y


def _setitem_index(m, x, v):
    y = x + 0.0
    y[m.tensor([2, 0])] = v
    return y


CASE_BY_NAME = {c.name: c for c in CASES}
assert len(CASE_BY_NAME) == len(CASES), 'two rows share a name'


def _params(only=None):
    out = []
    for c in CASES:
        if only is not None and not only(c):
            continue
        for i, s in enumerate(c.samples):
            out.append(pytest.param(c, s, id=f'{c.name}-{i}'))
    return out


def _leaves(arrays, dtype=tape.float64):
    return [tape.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


# ---------------------------------------------------------------- the tests
@pytest.mark.parametrize('case,sample', _params())
def test_gradcheck(case, sample):
    xs = _leaves(make_inputs(case, sample))
    assert tape.autograd.gradcheck(lambda *a: case.fn(tape, *a), xs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize('case', [pytest.param(c, id=c.name) for c in CASES if c.gg])
def test_gradgradcheck(case):
    xs = _leaves(make_inputs(case, case.samples[0]))
    assert tape.autograd.gradgradcheck(lambda *a: case.fn(tape, *a), xs, atol=1e-4)


@pytest.mark.parametrize('case,sample', _params(lambda c: c.f32))
def test_float32_close_to_float64(case, sample):
    arrays = make_inputs(case, sample)
    y64 = case.fn(tape, *_leaves(arrays))
    y32 = case.fn(tape, *_leaves(arrays, tape.float32))
    assert y32.dtype == tape.float32, f'float32 inputs gave {y32.dtype}'
    np.testing.assert_allclose(np.asarray(y32._data, np.float64), np.asarray(y64._data),
                               rtol=2e-4, atol=2e-5)


def _grads(y, xs, v, **kw):
    gs = tape.autograd.grad(y, xs, grad_outputs=tape.tensor(v, dtype=y.dtype),
                            allow_unused=True, **kw)
    return [None if g is None else np.asarray(g._data, np.float64) for g in gs]


@pytest.mark.parametrize('case,sample', _params())
def test_compiled_equals_create_graph(case, sample):
    xs = _leaves(make_inputs(case, sample))
    y = case.fn(tape, *xs)
    v = np.random.default_rng(1).standard_normal(y.shape)
    compiled = _grads(y, xs, v, retain_graph=True)
    differentiable = _grads(y, xs, v, create_graph=True)
    for a, b in zip(compiled, differentiable):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('case,sample', _params(lambda c: c.torch_ok))
def test_torch_oracle(case, sample, torch_or_skip):
    torch = torch_or_skip
    arrays = make_inputs(case, sample)
    xs = _leaves(arrays)
    txs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    y = case.fn(tape, *xs)
    ty = case.fn(torch, *txs)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(np.asarray(y._data), ty.detach().numpy(), rtol=1e-6,
                               atol=case.atol, err_msg='values differ from PyTorch')
    v = np.random.default_rng(2).standard_normal(tuple(ty.shape))
    y.backward(tape.tensor(v, dtype=tape.float64))
    ty.backward(torch.tensor(v))
    for i, (x, tx) in enumerate(zip(xs, txs)):
        want = np.zeros(tx.shape) if tx.grad is None else tx.grad.numpy()
        got = np.zeros(want.shape) if x.grad is None else np.asarray(x.grad._data)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=case.atol,
                                   err_msg=f'gradient of input {i} differs from PyTorch')


# ------------------------------------------------------------------ meta-test
def _ops_recorded(case):
    xs = _leaves(make_inputs(case, case.samples[0]))
    y = case.fn(tape, *xs)
    t = y._tape
    while t is not None and t.alias is not None:
        t = t.alias
    if t is None:
        return set()
    recs = np.frombuffer(bytes(t.rec), np.int64).reshape(-1, 8)
    return {int(op) & 0xFFFF for op in recs[:, 0]}


def test_every_rule_has_kernel_vjp_and_test_row():
    """Fails when a primitive lacks a kernel branch, a differentiable form, or a test row."""
    from compiler import codegen, kernels
    import compiler._sweep_generated as gen
    assert codegen.main(['--check']) == 0, 'the generated sweep is stale'
    from compiler import chunkgen
    assert chunkgen.main(['--check']) == 0, 'the generated chunk kernels are stale'
    from compiler import replaygen
    assert replaygen.main(['--check']) == 0, 'the generated forward replay is stale'
    import compiler._replay_generated as fwd_gen
    fwd_src = inspect.getsource(fwd_gen)
    src = inspect.getsource(gen)
    vjp_src = inspect.getsource(_differentiable._record_vjp)
    for r in RULES:
        if r.kind == 'python':
            continue
        assert f'op == {r.op}:  # {r.name}\n' in src or r.op in gen.COLD, \
            f'{r.name}: no branch in the sweep and no cold kernel'
        assert f'op == {r.op}:  # {r.name}\n' in fwd_src or r.op in fwd_gen.COLD_FWD, \
            f'{r.name}: no forward replay kernel'
        if r.kind == 'elementwise':
            assert r.fwd, f'{r.name}: no forward formula (fwd=...) in tape/_rules.py'
            assert set(_funcs_in(r)) <= set(_differentiable.FORMULA_NAMESPACE), r.name
            for fname in _funcs_in(r):
                numba_name = codegen._FUNCS[fname]
                assert '.' in numba_name or numba_name == 'abs' or hasattr(kernels, numba_name)
        else:
            assert f"'{r.kind}'" in vjp_src, f'{r.name}: kind {r.kind!r} has no differentiable form'
            assert r.kind in codegen._STRUCTURAL, f'{r.name}: kind {r.kind!r} has no kernel'
    covered = set()
    for c in CASES:
        covered |= _ops_recorded(c)
    missing = [r.name for r in RULES if r.op not in covered and r.kind != 'python']
    assert not missing, f'primitives without a test row: {missing}'


def _funcs_in(rule):
    import ast
    names = set()
    for f in filter(None, rule.vjps):
        for node in ast.walk(ast.parse(f, mode='eval')):
            if isinstance(node, ast.Call):
                names.add(node.func.id)
    return names


# ---------------------------------------------------------------- bad inputs
def _bad(name, fn, exc, *words):
    return pytest.param(fn, exc, words, id=name)


BAD = [
    _bad('add_broadcast', lambda m, x: x + m.ones(4, dtype=x.dtype), RuntimeError, 'add', '3'),
    _bad('mul_broadcast', lambda m, x: x.reshape(1, 3) * m.ones(2, 2, dtype=x.dtype),
         RuntimeError, 'mul'),
    _bad('where_broadcast', lambda m, x: m.where(x > 0, x, m.ones(2, dtype=x.dtype)),
         RuntimeError, 'where'),
    _bad('mm_inner', lambda m, x: x.reshape(1, 3).mm(m.ones(2, 2, dtype=x.dtype)),
         RuntimeError, 'mm', '1x3', '2x2'),
    _bad('matmul_inner', lambda m, x: x @ m.ones(4, 2, dtype=x.dtype), RuntimeError, 'matmul'),
    _bad('matmul_batched_inner', lambda m, x: m.ones(2, 2, 3, dtype=x.dtype) @
         m.ones(2, 4, 2, dtype=x.dtype), RuntimeError, 'mat'),
    _bad('bmm_batch', lambda m, x: m.bmm(m.ones(2, 2, 3, dtype=x.dtype),
                                         m.ones(3, 3, 2, dtype=x.dtype)), RuntimeError, 'bmm'),
    _bad('dot_size', lambda m, x: m.dot(x, m.ones(4, dtype=x.dtype)), RuntimeError, 'dot'),
    _bad('cat_sizes', lambda m, x: m.cat([x.reshape(1, 3), m.ones(1, 2, dtype=x.dtype)]),
         RuntimeError, 'cat', 'Sizes'),
    _bad('stack_sizes', lambda m, x: m.stack([x, m.ones(2, dtype=x.dtype)]), RuntimeError,
         'stack'),
    _bad('sum_dim', lambda m, x: x.sum(2), IndexError, 'Dimension out of range'),
    _bad('softmax_dim', lambda m, x: m.softmax(x, 3), IndexError, 'Dimension out of range'),
    _bad('cumsum_dim', lambda m, x: x.cumsum(-3), IndexError, 'Dimension out of range'),
    _bad('max_dim', lambda m, x: x.max(dim=1), IndexError, 'Dimension out of range'),
    _bad('unsqueeze_dim', lambda m, x: x.unsqueeze(3), IndexError, 'Dimension out of range'),
    _bad('transpose_dim', lambda m, x: x.reshape(1, 3).transpose(0, 2), IndexError,
         'Dimension out of range'),
    _bad('index_int', lambda m, x: x[5], IndexError, '5'),
    _bad('index_list', lambda m, x: x[[0, 7]], IndexError, '7'),
    _bad('index_select', lambda m, x: x.index_select(0, m.tensor([4])), IndexError),
    _bad('gather_range', lambda m, x: x.gather(0, m.tensor([5])), RuntimeError, '5'),
    _bad('narrow_length', lambda m, x: x.narrow(0, 2, 3), RuntimeError, 'exceeds'),
    _bad('nll_target', lambda m, x: m.nn.functional.nll_loss(x.reshape(1, 3), m.tensor([3])),
         IndexError, 'Target'),
    _bad('requires_grad_int', lambda m, x: m.tensor([1, 2]).requires_grad_(), RuntimeError,
         'floating point'),
]


@pytest.mark.parametrize('fn,exc,words', BAD)
def test_bad_input_raises_and_graph_stays_usable(fn, exc, words):
    x = tape.tensor([0.5, -1.0, 2.0], dtype=tape.float64, requires_grad=True)
    loss = (x * x).sum()                       # a graph built before the error
    with pytest.raises(exc) as info:
        fn(tape, x)
    msg = str(info.value)
    for w in words:
        assert w in msg, f'{w!r} not in {msg!r}'
    loss2 = loss + (x * 3).sum()               # the graph still records...
    loss2.backward()                           # ...and sweeps
    np.testing.assert_allclose(x.grad._data, 2 * x._data + 3)


@pytest.mark.parametrize('fn,exc,words', BAD)
def test_bad_input_matches_torch_exception(fn, exc, words, torch_or_skip):
    torch = torch_or_skip
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(exc):
        fn(torch, x)


# --------------------------------------------------------------- NaN and inf
INF, NAN = float('inf'), float('nan')
SPECIAL = [
    ('exp', lambda m, x: m.exp(x), [0.0, INF, -INF, NAN]),
    ('log', lambda m, x: m.log(x), [0.0, 1.0, INF, -1.0]),
    ('sqrt_at_zero', lambda m, x: m.sqrt(x), [0.0, 4.0]),
    ('relu_nan', lambda m, x: m.relu(x), [NAN, -1.0, 1.0]),
    ('clamp_nan', lambda m, x: x.clamp(-1.0, 1.0), [NAN, 3.0, 0.5]),
    ('max_nan', lambda m, x: x.max(), [1.0, NAN, 3.0]),
    ('amax_ties', lambda m, x: x.amax(), [3.0, 1.0, 3.0]),
    ('max_all_ties', lambda m, x: x.max(), [3.0, 3.0, 1.0]),
    ('softmax_neg_inf', lambda m, x: m.softmax(x, 0), [-INF, 0.0, 1.0]),
    ('log_softmax_big', lambda m, x: m.log_softmax(x, 0), [1000.0, 0.0, -1000.0]),
    ('logsumexp_all_neg_inf', lambda m, x: m.logsumexp(x, 0), [-INF, -INF]),
    ('where_inf_unchosen', lambda m, x: m.where(x > 0, x, m.log(x)), [0.0, 1.0, 2.0]),
    ('cumprod_zero', lambda m, x: m.cumprod(x, 0), [2.0, 0.0, 3.0, 0.0, 5.0]),
    ('prod_one_zero', lambda m, x: x.prod(), [2.0, 0.0, 3.0]),
    ('norm_zero_vector', lambda m, x: x.norm(), [0.0, 0.0]),
    ('std_constant', lambda m, x: x.std(), [1.0, 1.0, 1.0]),
    ('maximum_tie', lambda m, x: m.maximum(x, m.ones(3, dtype=x.dtype)), [1.0, 2.0, 0.0]),
    ('pow_zero_base', lambda m, x: x ** 2.0, [0.0, 1.0]),
    ('div_by_zero', lambda m, x: 1.0 / x, [0.0, -0.0, 2.0]),
    ('softplus_big', lambda m, x: m.nn.functional.softplus(x), [50.0, -50.0, 0.0]),
    ('bce_edges', lambda m, x: m.nn.functional.binary_cross_entropy(
        x, m.tensor([1.0, 0.0, 1.0], dtype=x.dtype)), [0.0, 1.0, 0.5]),
]


@pytest.mark.parametrize('fn,values', [pytest.param(f, v, id=n) for n, f, v in SPECIAL])
def test_nan_inf_match_torch(fn, values, torch_or_skip):
    torch = torch_or_skip
    x = tape.tensor(values, dtype=tape.float64, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    with np.errstate(all='ignore'):
        y = fn(tape, x)
        ty = fn(torch, tx)
        np.testing.assert_allclose(np.asarray(y._data), ty.detach().numpy(), rtol=1e-6)
        v = np.ones(tuple(ty.shape))
        y.backward(tape.tensor(v, dtype=tape.float64))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(np.asarray(x.grad._data), tx.grad.numpy(), rtol=1e-6)


# -------------------------------------------------------------------- dtypes
PROMOTION = [
    ('f32+f64', lambda m: m.ones(2) + m.ones(2, dtype=m.float64)),
    ('f64*f32', lambda m: m.ones(2, dtype=m.float64) * m.ones(2)),
    ('f32*f64_0d', lambda m: m.ones(2) * m.tensor(2.0, dtype=m.float64)),
    ('f64_0d*f32', lambda m: m.tensor(2.0, dtype=m.float64) * m.ones(2)),
    ('f32+scalar', lambda m: m.ones(2) + 2.5),
    ('int+scalar_float', lambda m: m.arange(3) + 2.5),
    ('int/int', lambda m: m.arange(3) / 2),
    ('int+f32', lambda m: m.arange(3) + m.ones(3)),
    ('int+f64_0d', lambda m: m.arange(3) + m.tensor(1.0, dtype=m.float64)),
    ('bool*int', lambda m: m.tensor([True, False]) * m.arange(2)),
    ('exp_int', lambda m: m.exp(m.arange(3))),
    ('where_f32_scalar', lambda m: m.where(m.tensor([True, False]), m.ones(2), 0.0)),
    ('cat_f32_f64', lambda m: m.cat([m.ones(2), m.ones(2, dtype=m.float64)])),
    ('compare_is_bool', lambda m: m.ones(2) < m.ones(2, dtype=m.float64)),
    ('floor_int', lambda m: m.floor(m.arange(3))),
    ('cumsum_int', lambda m: m.cumsum(m.arange(3, dtype=m.int32), 0)),
]


@pytest.mark.parametrize('fn', [pytest.param(f, id=n) for n, f in PROMOTION])
def test_dtype_promotion(fn, torch_or_skip):
    torch = torch_or_skip
    assert 'torch.' + str(fn(tape).dtype) == str(fn(torch).dtype)


def test_mixed_precision_gradients_keep_each_leaf_dtype():
    a = tape.ones(3, requires_grad=True)                       # float32
    b = tape.ones(3, dtype=tape.float64, requires_grad=True)
    y = (a * b).sum()
    assert y.dtype == tape.float64
    y.backward()
    assert a.grad.dtype == tape.float32 and b.grad.dtype == tape.float64


def test_integer_tensors_index_and_mask():
    x = tape.arange(6.0).reshape(2, 3).requires_grad_()
    idx = tape.tensor([1, 0])
    assert idx.dtype == tape.int64
    y = x[idx].sum() + x[x > 2].sum()
    y.backward()
    assert x.grad.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]


# ------------------------------------------------------ in-place item set
def test_setitem_plain_and_version():
    x = tape.zeros(3)
    v0 = x._version
    x[1] = 5.0
    x[tape.tensor([True, False, True])] = 2.0
    assert x.tolist() == [2.0, 5.0, 2.0]
    assert x._version == v0 + 2


def test_setitem_on_leaf_requiring_grad_raises():
    x = tape.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match='leaf Variable'):
        x[0] = 1.0
    with tape.no_grad():
        x[0] = 1.0
    assert x.tolist() == [1.0, 0.0, 0.0]


def test_setitem_records_on_non_leaf():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = tape.tensor(10.0, requires_grad=True)
    y = x * 2
    y[1] = v
    assert y.grad_fn.name() == 'torch::autograd::CopySlices'
    (y * tape.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 6.0]
    assert v.grad.item() == 2.0


def test_setitem_after_save_is_detected():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y * y                    # saves y
    y[0] = 0.0
    with pytest.raises(RuntimeError, match='inplace'):
        z.sum().backward()


def test_max_dim_returns_values_and_indices():
    x = tape.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], requires_grad=True)
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert x.max(1).indices.dtype == tape.int64
    assert x.argmax().item() == 3 and x.argmin(1).tolist() == [0, 1]


# ---------------------------------------------------------------- dropout
def test_dropout_seeded_scaled_and_differentiable():
    F = tape.nn.functional
    x = tape.ones(1000, dtype=tape.float64, requires_grad=True)
    y1 = F.dropout(x, 0.25, generator=tape.Generator().manual_seed(3))
    y2 = F.dropout(x, 0.25, generator=tape.Generator().manual_seed(3))
    assert np.array_equal(y1._data, y2._data)
    kept = y1._data != 0
    assert set(np.unique(y1._data)) <= {0.0, 1.0 / 0.75}
    assert 0.65 < kept.mean() < 0.85
    y1.sum().backward()
    np.testing.assert_allclose(x.grad._data, kept / 0.75)
    assert F.dropout(x, 0.5, training=False) is x
    with pytest.raises(ValueError):
        F.dropout(x, 1.5)


def test_import_functional_as_F():
    import tape.nn.functional as F
    assert F.softmax is tape.nn.functional.softmax


# ---------------------------------------------- new primitives, merged tapes
@pytest.mark.parametrize('fn', [
    lambda m, x: m.cumprod(x, 0), lambda m, x: m.cumsum(x, 0),
    lambda m, x: m.where(x > 0, x, 2 * x),
    lambda m, x: m.bmm(x.reshape(1, 2, 2), x.reshape(1, 2, 2)),
], ids=['cumprod', 'cumsum', 'where', 'bmm'])
def test_new_kinds_survive_tape_merges(fn):
    w = tape.tensor([1.5], dtype=tape.float64, requires_grad=True)
    h = w * 1.0
    for _ in range(80):                        # fill the open tape past its adoption limit
        h = h * 1.0
    x = tape.tensor([0.5, -1.0, 2.0, 3.0], dtype=tape.float64, requires_grad=True)
    y = fn(tape, x * 1.0)                      # on a younger tape
    assert y._tape is not h._tape
    (y.sum() * h.sum()).backward()             # merges the two
    x2 = tape.tensor([0.5, -1.0, 2.0, 3.0], dtype=tape.float64, requires_grad=True)
    fn(tape, x2 * 1.0).sum().backward()
    np.testing.assert_allclose(x.grad._data, 1.5 * x2.grad._data)


# --------------------------------------------------- random expression graphs
hypothesis = pytest.importorskip('hypothesis')
st = hypothesis.strategies

UNARY_SAFE = [
    ('exp_tanh', lambda m, z: m.exp(m.tanh(z))), ('log1p_sq', lambda m, z: m.log1p(z * z)),
    ('sin', lambda m, z: m.sin(z)), ('sigmoid', lambda m, z: m.sigmoid(z)),
    ('atan', lambda m, z: m.atan(z)), ('sqrt1', lambda m, z: m.sqrt(z * z + 1)),
    ('softplus', lambda m, z: m.nn.functional.softplus(z)),
    ('silu', lambda m, z: m.nn.functional.silu(z)),
    ('gelu', lambda m, z: m.nn.functional.gelu(z)), ('erf', lambda m, z: m.erf(z)),
    ('recip', lambda m, z: m.reciprocal(1 + z * z)), ('cosh_tanh', lambda m, z: m.cosh(m.tanh(z))),
    ('cumsum', lambda m, z: m.cumsum(z, -1)), ('flip', lambda m, z: m.flip(z, (-1,))),
    ('softmax', lambda m, z: m.softmax(z, -1)), ('scale', lambda m, z: z * 0.7 - 0.1),
]
BINARY_SAFE = [
    ('add', lambda m, a, b: a + b), ('sub', lambda m, a, b: a - b), ('mul', lambda m, a, b: a * b),
    ('div', lambda m, a, b: a / (1 + b * b)), ('atan2', lambda m, a, b: m.atan2(a, b + 3)),
    ('where', lambda m, a, b: m.where(a > b, a, b)),
    ('pow', lambda m, a, b: (1 + a * a) ** m.tanh(b)),
    ('cat_split', lambda m, a, b: m.cat([a, b], -1).split(a.shape[-1], -1)[1] * a),
]


@st.composite
def _programs(draw):
    shape = draw(st.sampled_from([(3,), (2, 3)]))
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 100), st.integers(0, 100),
                                    st.integers(0, 100)), min_size=1, max_size=6))
    seed = draw(st.integers(0, 2 ** 16))
    return shape, steps, seed


def _run_program(m, xs, steps):
    pool = list(xs)
    for binary, k, i, j in steps:
        if binary:
            _, f = BINARY_SAFE[k % len(BINARY_SAFE)]
            pool.append(f(m, pool[i % len(pool)], pool[j % len(pool)]))
        else:
            _, f = UNARY_SAFE[k % len(UNARY_SAFE)]
            pool.append(f(m, pool[i % len(pool)]))
    return sum((p * (q + 1.0)).sum() for q, p in enumerate(pool[len(xs):]))


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(_programs())
def test_random_graphs_match_torch(program):
    torch = pytest.importorskip('torch')
    shape, steps, seed = program
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1.5, 1.5, shape) for _ in range(2)]
    xs = _leaves(arrays)
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = _run_program(tape, xs, steps)
    ty = _run_program(torch, txs, steps)
    np.testing.assert_allclose(float(y.item()), float(ty.item()), rtol=1e-9, atol=1e-12)
    y.backward()
    ty.backward()
    for x, tx in zip(xs, txs):
        want = np.zeros(shape) if tx.grad is None else tx.grad.numpy()
        got = np.zeros(shape) if x.grad is None else np.asarray(x.grad._data)
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
