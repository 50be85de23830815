"""The rule table: every primitive the tape can record, and its derivative.

One row per primitive. A row gives the opcode (its index in ``RULES``), the
PyTorch node name that ``grad_fn`` shows, and the vector-Jacobian product.

Elementwise rows write their VJP as formulas, one per tensor input, over the
names ``grad`` (upstream gradient), ``out`` (the op's result), the tensor
inputs ``a``/``b`` and the scalar constants ``c``.  Both derivative paths come
from that one string:

* ``compiler/codegen.py`` turns it into a loop body of the Numba sweep
  (``compiler/_sweep_generated.py``), and
* ``tape._differentiable`` evaluates it with Tensors, so ``create_graph``
  records the backward itself.

Which values a record must save for its backward is read off the formulas, so
a rule cannot forget to save what it uses.  Structural rows (reductions,
broadcasting, indexing, matrix products) name a kernel ``kind`` that is written
by hand once in ``compiler/codegen.py`` and once in ``tape/_differentiable.py``.

Why a table of strings rather than Python functions: the Numba kernel must be
a real ``.py`` file for ``cache=True``, so the formula has to be text that the
generator can splice into a loop; evaluating the same text with Tensors keeps
the two paths from drifting apart.  A malformed row fails at import with the
op's name.
"""
import ast

# Scalar helper functions a formula may call.  pow_grad(x, y) is
# y * x**(y-1) but 0 where y == 0 (PyTorch's convention, so x = 0 gives no NaN);
# xlogy_safe(out, x) is out*log(x) but 0 where x == 0 and out <= 1;
# ge_half(x, y) is 1 where x > y, 0.5 at ties, 0 below; step(x) is 1 where
# x > 0.  Each has a Numba version in compiler/kernels.py and a Tensor version
# in tape/_differentiable.py.
FORMULA_FUNCS = frozenset({
    'exp', 'log', 'sqrt', 'sin', 'cos', 'tanh', 'sigmoid', 'pow', 'step',
    'sign', 'abs', 'ge_half', 'pow_grad', 'xlogy_safe',
    # ge(x, y) / eq(x, y) are 1.0 where x >= y / x == y, else 0.0; where_pos(c, x, y)
    # is x where c > 0 else y (only the chosen side is used, so an inf on the other
    # side gives no NaN); inv0(x) is 1/x but 0 at x == 0; zero(x) is 0.0.
    'sinh', 'cosh', 'erf', 'floor', 'trunc', 'ge', 'eq', 'where_pos', 'inv0', 'zero',
})
TENSOR_NAMES = ('a', 'b')
SAVED_ORDER = ('a', 'b', 'out')       # layout of saved arrays in V
CONST_NAMES = ('c', 'd')   # stored in record fields 7 and 6


class Rule:
    """One primitive: opcode, node name, kind, and (for elementwise) formulas."""
    __slots__ = ('op', 'name', 'node', 'kind', 'inputs', 'consts', 'vjps',
                 'saves', 'saves_consts')

    def __init__(self, name, node, kind, inputs=(), consts=(), vjps=()):
        self.name = name
        self.node = node
        self.kind = kind
        self.inputs = tuple(inputs)
        self.consts = tuple(consts)
        self.vjps = tuple(vjps)
        self.op = -1
        self.saves = ()
        self.saves_consts = ()

    def __repr__(self):
        return f'Rule({self.name!r}, op={self.op}, node={self.node!r})'


def _names_in(formula, rule_name):
    try:
        tree = ast.parse(formula, mode='eval')
    except SyntaxError as e:
        raise SyntaxError(f'rule {rule_name!r}: bad formula {formula!r}: {e}') from None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FORMULA_FUNCS:
                raise ValueError(f'rule {rule_name!r}: formula {formula!r} calls '
                                 f'an unknown function; allowed: {sorted(FORMULA_FUNCS)}')
        elif isinstance(node, ast.Name) and node.id not in FORMULA_FUNCS:
            names.add(node.id)
    return names


def _check(rule):
    if rule.kind != 'elementwise':
        return
    if len(rule.vjps) != len(rule.inputs):
        raise ValueError(f'rule {rule.name!r} gives {len(rule.vjps)} gradient formula(s) '
                         f'for {len(rule.inputs)} input(s)')
    allowed = {'grad', 'out'} | set(rule.inputs) | set(rule.consts)
    used = set()
    for f in rule.vjps:
        if f is None:
            continue
        names = _names_in(f, rule.name)
        unknown = names - allowed
        if unknown:
            raise ValueError(f'rule {rule.name!r}: formula {f!r} names unknown input(s) '
                             f'{sorted(unknown)}; it may use {sorted(allowed)}')
        used |= names
    rule.saves = tuple(n for n in SAVED_ORDER if n in used)
    rule.saves_consts = rule.consts   # constants are always stored (one float each)


def E(name, node, inputs, vjps, consts=()):
    return Rule(name, node, 'elementwise', inputs, consts, vjps)


def S(name, node, kind):
    return Rule(name, node, kind)


RULES = [
    # --- binary elementwise (operands already expanded to one shape) ---
    E('add', 'AddBackward0', 'ab', ('grad', 'grad')),
    E('sub', 'SubBackward0', 'ab', ('grad', '-grad')),
    E('mul', 'MulBackward0', 'ab', ('grad * b', 'grad * a')),
    E('div', 'DivBackward0', 'ab', ('grad / b', '-grad * a / (b * b)')),
    E('pow', 'PowBackward1', 'ab', ('grad * pow_grad(a, b)', 'grad * xlogy_safe(out, a)')),
    # ties split the gradient in half, as PyTorch does
    E('maximum', 'MaximumBackward0', 'ab', ('grad * ge_half(a, b)', 'grad * ge_half(b, a)')),
    E('minimum', 'MinimumBackward0', 'ab', ('grad * ge_half(b, a)', 'grad * ge_half(a, b)')),
    E('atan2', 'Atan2Backward0', 'ab', ('grad * b / (a * a + b * b)',
                                        '-grad * a / (a * a + b * b)')),
    E('remainder', 'RemainderBackward1', 'ab', ('grad', '-grad * floor(a / b)')),
    E('fmod', 'FmodBackward1', 'ab', ('grad', '-grad * trunc(a / b)')),
    # a = probability, b = target; logs clamped at -100 and the denominator at
    # 1e-12, as PyTorch does, so a = 0 or 1 gives a finite gradient
    E('binary_cross_entropy', 'BinaryCrossEntropyBackward0', 'ab', (
        'grad * (a - b) / where_pos(a * (1.0 - a) - 1e-12, a * (1.0 - a), 1e-12)',
        'grad * (where_pos(log(1.0 - a) + 100.0, log(1.0 - a), -100.0)'
        ' - where_pos(log(a) + 100.0, log(a), -100.0))')),
    # --- tensor with a Python scalar c ---
    E('add_scalar', 'AddBackward0', 'a', ('grad',), consts='c'),
    E('sub_scalar', 'SubBackward0', 'a', ('grad',), consts='c'),
    E('rsub_scalar', 'RsubBackward1', 'a', ('-grad',), consts='c'),
    E('mul_scalar', 'MulBackward0', 'a', ('grad * c',), consts='c'),
    E('div_scalar', 'DivBackward0', 'a', ('grad / c',), consts='c'),
    E('rdiv_scalar', 'MulBackward0', 'a', ('-grad * out / a',), consts='c'),
    E('pow_scalar', 'PowBackward0', 'a', ('grad * pow_grad(a, c)',), consts='c'),
    E('rpow_scalar', 'PowBackward2', 'a', ('grad * out * log(c)',), consts='c'),
    E('remainder_scalar', 'RemainderBackward0', 'a', ('grad',), consts='c'),
    E('fmod_scalar', 'FmodBackward0', 'a', ('grad',), consts='c'),
    # --- unary elementwise ---
    E('neg', 'NegBackward0', 'a', ('-grad',)),
    E('exp', 'ExpBackward0', 'a', ('grad * out',)),
    E('log', 'LogBackward0', 'a', ('grad / a',)),
    E('sqrt', 'SqrtBackward0', 'a', ('grad / (2.0 * out)',)),
    E('sin', 'SinBackward0', 'a', ('grad * cos(a)',)),
    E('cos', 'CosBackward0', 'a', ('-grad * sin(a)',)),
    E('tanh', 'TanhBackward0', 'a', ('grad * (1.0 - out * out)',)),
    E('sigmoid', 'SigmoidBackward0', 'a', ('grad * out * (1.0 - out)',)),
    # 0 where out <= 0; NaN passes the gradient, as PyTorch's threshold_backward does
    E('relu', 'ReluBackward0', 'a', ('grad * (1.0 - ge(0.0, out))',)),
    E('abs', 'AbsBackward0', 'a', ('grad * sign(a)',)),
    E('rsqrt', 'RsqrtBackward0', 'a', ('-0.5 * grad * out * out * out',)),
    E('exp2', 'Exp2Backward0', 'a', ('grad * out * 0.6931471805599453',)),
    E('expm1', 'Expm1Backward0', 'a', ('grad * (out + 1.0)',)),
    E('log2', 'Log2Backward0', 'a', ('grad / (a * 0.6931471805599453)',)),
    E('log10', 'Log10Backward0', 'a', ('grad / (a * 2.302585092994046)',)),
    E('log1p', 'Log1PBackward0', 'a', ('grad / (a + 1.0)',)),
    E('tan', 'TanBackward0', 'a', ('grad * (1.0 + out * out)',)),
    E('asin', 'AsinBackward0', 'a', ('grad / sqrt(1.0 - a * a)',)),
    E('acos', 'AcosBackward0', 'a', ('-grad / sqrt(1.0 - a * a)',)),
    E('atan', 'AtanBackward0', 'a', ('grad / (1.0 + a * a)',)),
    E('sinh', 'SinhBackward0', 'a', ('grad * cosh(a)',)),
    E('cosh', 'CoshBackward0', 'a', ('grad * sinh(a)',)),
    E('erf', 'ErfBackward0', 'a', ('grad * 1.1283791670955126 * exp(-a * a)',)),
    E('reciprocal', 'ReciprocalBackward0', 'a', ('-grad * out * out',)),
    E('silu', 'SiluBackward0', 'a', ('grad * sigmoid(a) * (1.0 + a * (1.0 - sigmoid(a)))',)),
    # PyTorch's d/dx of the exact gelu: Phi(x) + x * phi(x)
    E('gelu', 'GeluBackward0', 'a', (
        'grad * (0.5 * (1.0 + erf(a * 0.7071067811865476))'
        ' + a * 0.3989422804014327 * exp(-0.5 * a * a))',)),
    # gelu(approximate='tanh'): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    E('gelu_tanh', 'GeluBackward0', 'a', (
        'grad * (0.5 * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))'
        ' + 0.5 * a * (1.0 - tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))'
        ' * tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))'
        ' * 0.7978845608028654 * (1.0 + 0.134145 * a * a))',)),
    # c is the negative slope; x == 0 takes the negative side, as in PyTorch
    E('leaky_relu', 'LeakyReluBackward0', 'a', ('grad * where_pos(a, 1.0, c)',), consts='c'),
    # c is alpha; below 0, d/dx alpha*(exp(x)-1) = out + alpha (no exp of a large x)
    E('elu', 'EluBackward0', 'a', ('grad * where_pos(a, 1.0, out + c)',), consts='c'),
    # c is beta.  Above the threshold softplus returns x itself, so out == a there;
    # below it out == a only where sigmoid(beta x) already rounds to 1.  This keeps
    # the threshold out of the record (a record has room for one float constant).
    E('softplus', 'SoftplusBackward0', 'a', ('grad * where_pos(eq(out, a), 1.0, sigmoid(a * c))',),
      consts='c'),
    E('sign', 'SignBackward0', 'a', ('zero(grad)',)),
    E('floor', 'FloorBackward0', 'a', ('zero(grad)',)),
    E('ceil', 'CeilBackward0', 'a', ('zero(grad)',)),
    E('round', 'RoundBackward0', 'a', ('zero(grad)',)),
    E('round_decimals', 'RoundBackward1', 'a', ('zero(grad)',)),
    E('trunc', 'TruncBackward0', 'a', ('zero(grad)',)),
    # clamp(x, lo, hi): gradient where lo <= x <= hi, i.e. where the result is x
    # itself (NaN gives 0, as in PyTorch); c is 0.0 when lo > hi (no x survives)
    E('clamp', 'ClampBackward1', 'a', ('grad * c * eq(out, a)',), consts='c'),
    # out = a ** c for a >= 0 (a sum of |x|^p); 0 gradient at a == 0, as PyTorch's
    # norm backward masks the zero vector
    E('norm_root', 'LinalgVectorNormBackward0', 'a', ('grad * c * out * inv0(a)',), consts='c'),
    E('std_root', 'StdBackward0', 'a', ('grad * 0.5 * inv0(out)',)),   # sqrt of a variance
    E('var_scale', 'VarBackward0', 'a', ('grad * c',), consts='c'),    # c = 1 / (N - correction)
    # --- structural: kernels written by hand, once per kind ---
    S('sum', 'SumBackward0', 'sum_all'),           # grad_in[i] += c * grad_out[0]
    S('mean', 'MeanBackward0', 'sum_all'),
    S('sum_dim', 'SumBackward1', 'reduce'),        # grad_in[i] += c * grad_out[map(i)]
    S('mean_dim', 'MeanBackward1', 'reduce'),
    S('expand', 'ExpandBackward0', 'expand'),      # grad_in[map(i)] += grad_out[i]
    S('broadcast', 'ExpandBackward0', 'expand'),   # implicit, by a broadcasting op
    S('view', 'ViewBackward0', 'identity'),        # same elements, new shape
    S('reshape', 'ViewBackward0', 'identity'),
    S('index', 'IndexBackward0', 'take'),          # grad_in[idx[i]] += grad_out[i]
    S('slice', 'SliceBackward0', 'take'),
    S('select', 'SelectBackward0', 'take'),
    S('t', 'TBackward0', 'take'),
    S('transpose', 'TransposeBackward0', 'take'),
    S('permute', 'PermuteBackward0', 'take'),
    S('put', 'IndexPutBackward0', 'put'),          # out[idx[i]] += in[i]; the adjoint of take
    S('mm', 'MmBackward0', 'mm'),
    # out[i] = a[i] if mask[i] else b[i]; the mask (int64) in A; a and b expanded
    S('where', 'WhereBackward0', 'where'),
    S('masked_fill', 'MaskedFillBackward0', 'where'),
    # along one axis of an (outer, L, inner) block; A = [outer, L, inner]
    S('cumsum', 'CumsumBackward0', 'cumsum'),     # grad_in = reversed cumsum of grad_out
    S('cumprod', 'CumprodBackward0', 'cumprod'),  # saves input and output; exact with zeros
    S('bmm', 'BmmBackward0', 'bmm'),              # A = [batch, m, k, n]; saves a and b
    # composite ops whose last record is an existing kind, named as PyTorch names it
    S('gather', 'GatherBackward0', 'take'),
    S('index_select', 'IndexSelectBackward0', 'take'),
    S('flip', 'FlipBackward0', 'take'),
    S('repeat', 'RepeatBackward0', 'take'),
    S('split', 'SplitBackward0', 'take'),
    S('max_dim', 'MaxBackward0', 'take'),          # values at the arg-max
    S('min_dim', 'MinBackward0', 'take'),
    S('prod', 'ProdBackward0', 'take'),            # the last element of a cumprod
    S('prod_dim', 'ProdBackward1', 'take'),
    S('squeeze', 'SqueezeBackward1', 'identity'),
    S('unsqueeze', 'UnsqueezeBackward0', 'identity'),
    S('scatter', 'ScatterBackward0', 'where'),     # where(scattered, put(src), self)
    S('setitem', 'CopySlices', 'where'),           # x[key] = value on a recorded x
    S('dot', 'DotBackward0', 'sum_all'),           # 1-D @ 1-D: the sum of a product
    S('mv', 'MvBackward0', 'identity'),            # 2-D @ 1-D: the mm result, flattened
    S('squeeze_matmul', 'SqueezeBackward4', 'identity'),   # 1-D @ 2-D: likewise
    S('t_vector', 'TBackward0', 'identity'),       # t() of a 0-d or 1-D tensor
    S('alias', 'AliasBackward0', 'identity'),      # a[...], a[:, :]: indexing that picks all
    S('unsqueeze_take', 'UnsqueezeBackward0', 'take'),   # a[1:, None]: a None last
    S('reshape_alias', 'ReshapeAliasBackward0', 'identity'),   # reshape of a strided view
    S('unsafe_view', 'UnsafeViewBackward0', 'identity'),       # reshape that copies
    S('contiguous', 'CloneBackward0', 'identity'),  # contiguous() of a strided view: a copy
    S('python', 'PythonBackward', 'python'),       # runs Python: custom Function, hooks
]

for _i, _r in enumerate(RULES):
    _r.op = _i
    _check(_r)

BY_NAME = {r.name: r for r in RULES}
if len(BY_NAME) != len(RULES):
    raise ValueError('rule table: two rows share a name')
OP = {r.name: r.op for r in RULES}
# What a kind keeps in the record's v and a fields (tape/_tape.py has the
# layout): an offset into V / A (which merging tapes must shift), or a plain
# number (a size, a float constant's bits).  'saves' marks kinds whose backward
# reads saved input or output values, which in-place changes must not touch.
KIND_FIELDS = {
    #  kind          v is a V offset  a is an A offset  saves values
    'elementwise': (True, False, True),
    'sum_all': (False, False, False),
    'reduce': (False, True, False),
    'expand': (False, True, False),
    'identity': (False, False, False),
    'take': (False, True, False),
    'put': (False, True, False),
    'mm': (True, False, True),
    'python': (False, False, True),       # a indexes Tape.py instead
    'where': (False, True, False),
    'cumsum': (False, False, False),
    'cumprod': (True, False, True),
    'bmm': (True, False, True),
}
STRUCTURAL_KINDS = tuple(k for k in KIND_FIELDS if k != 'elementwise')
TWO_INPUT_KINDS = ('mm', 'bmm', 'where')     # structural kinds with a second input (field 4)
for _r in RULES:
    if _r.kind not in KIND_FIELDS:
        raise ValueError(f'rule {_r.name!r}: unknown kind {_r.kind!r}')
