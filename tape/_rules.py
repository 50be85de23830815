"""The rule table: every primitive the tape can record, and its derivative.

One row per primitive. A row gives the opcode (its index in ``RULES``), the
PyTorch node name that ``grad_fn`` shows, and the vector-Jacobian product.

Elementwise rows write their VJP as formulas, one per tensor input, over the
names ``grad`` (upstream gradient), ``out`` (the op's result), the tensor
inputs ``a``/``b`` and the scalar constants ``c``/``d`` (record fields 7 and
6).  Both derivative paths come from that one string:

* ``compiler/codegen.py`` turns it into a loop body of the Numba sweep
  (``compiler/_sweep_generated.py``), and
* ``tape._differentiable`` evaluates it with Tensors, so ``create_graph``
  records the backward itself.

Which values a record must save for its backward is read off the formulas, so
a rule cannot forget to save what it uses.

Each elementwise row also gives its forward, ``fwd``: the result as a formula
over ``a``/``b`` and the constants ``c``/``d``, in float64, computing what the
eager op (``tape/_ops.py``, ``tape/_elementwise.py``) computes with NumPy, NaN
and inf included.  ``compiler/replaygen.py`` turns it into the forward replay
kernel (``compiler/_replay_generated.py``), which recomputes a traced tape's
records from new leaf values (``tape.jit``).  Structural rows (reductions,
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
    # digamma(x); polygamma(n, x) is its n-th derivative (n a whole float)
    'digamma', 'polygamma',
})
# Functions only forward formulas may call (they have Numba versions in
# compiler/kernels.py, or are math.* functions, but no Tensor versions: the
# differentiable path never evaluates a forward).  Each computes what the NumPy
# function of the eager op computes: maximum/minimum(x, y) propagate NaN as
# np.maximum/np.minimum do; gt(x, y) is 1.0 where x > y else 0.0; rint rounds
# half to even (np.round); round_decimals(x, n) is np.round(x, n);
# remainder/fmod are np.remainder/np.fmod; logaddexp0(y) is np.logaddexp(0, y);
# power(x, y) is ``array ** y`` with NumPy's fast paths (x*x for 2, sqrt for 0.5,
# 1/x for -1); the rest are the math module's functions.
FWD_ONLY_FUNCS = frozenset({
    'tan', 'asin', 'acos', 'atan', 'atan2', 'expm1', 'log1p', 'log2', 'log10', 'exp2',
    'ceil', 'rint', 'round_decimals', 'maximum', 'minimum', 'gt', 'remainder', 'fmod',
    'logaddexp0', 'power', 'lgamma', 'erfc', 'erfinv', 'ndtri',
})
FWD_FUNCS = FORMULA_FUNCS | FWD_ONLY_FUNCS
TENSOR_NAMES = ('a', 'b')
SAVED_ORDER = ('a', 'b', 'out')       # layout of saved arrays in V
CONST_NAMES = ('c', 'd')   # stored in record fields 7 and 6


class Rule:
    """One primitive: opcode, node name, kind, and (for elementwise) formulas."""
    __slots__ = ('op', 'name', 'node', 'kind', 'inputs', 'consts', 'vjps',
                 'saves', 'saves_consts', 'fwd', 'frees', 'for_other')

    def __init__(self, name, node, kind, inputs=(), consts=(), vjps=(), fwd=None, frees=False):
        self.name = name
        # PyTorch's node saves something (a wrapped scalar, indices, a mask) that
        # the tape keeps in the record instead, and frees it after a backward:
        # a second backward through the record raises, as there
        self.frees = frees
        self.node = node
        self.kind = kind
        self.inputs = tuple(inputs)
        self.consts = tuple(consts)
        self.vjps = tuple(vjps)
        self.fwd = fwd          # forward formula (elementwise rules), see the module doc
        self.op = -1
        self.saves = ()
        self.saves_consts = ()
        # bit 0: the saved ``a`` is read only by b's gradient, bit 1: ``b`` only
        # by a's (a product): PyTorch saves such an operand only when the other
        # needs a gradient, so only then does an in-place change of it matter
        self.for_other = 3 if kind in ('mm', 'bmm') else 0

    def __repr__(self):
        return f'Rule({self.name!r}, op={self.op}, node={self.node!r})'


def _names_in(formula, rule_name, funcs=FORMULA_FUNCS):
    try:
        tree = ast.parse(formula, mode='eval')
    except SyntaxError as e:
        raise SyntaxError(f'rule {rule_name!r}: bad formula {formula!r}: {e}') from None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in funcs:
                raise ValueError(f'rule {rule_name!r}: formula {formula!r} calls '
                                 f'an unknown function; allowed: {sorted(funcs)}')
        elif isinstance(node, ast.Name) and node.id not in funcs:
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
    if len(rule.inputs) == 2 and None not in rule.vjps:
        reads = [_names_in(f, rule.name) for f in rule.vjps]
        a, b = rule.inputs
        rule.for_other = ((a not in reads[0] and a in reads[1])
                          | (b not in reads[1] and b in reads[0]) << 1)
    rule.saves_consts = rule.consts   # constants are always stored (one float each)
    if rule.fwd is not None:
        allowed = set(rule.inputs) | set(rule.consts)
        unknown = _names_in(rule.fwd, rule.name, FWD_FUNCS) - allowed
        if unknown:
            raise ValueError(f'rule {rule.name!r}: forward {rule.fwd!r} names unknown '
                             f'input(s) {sorted(unknown)}; it may use {sorted(allowed)}')


def E(name, node, inputs, vjps, consts=(), fwd=None, frees=False):
    return Rule(name, node, 'elementwise', inputs, consts, vjps, fwd, frees)


def S(name, node, kind, frees=False):
    return Rule(name, node, kind, frees=frees)


RULES = [
    # --- binary elementwise (operands already expanded to one shape) ---
    E('add', 'AddBackward0', 'ab', ('grad', 'grad'), fwd='a + b'),
    E('sub', 'SubBackward0', 'ab', ('grad', '-grad'), fwd='a - b'),
    E('mul', 'MulBackward0', 'ab', ('grad * b', 'grad * a'), fwd='a * b'),
    # (a / b) / b, as PyTorch's div_tensor_other_backward: b * b under- or
    # overflows (b = 1e-200, 1e200) where the quotients do not
    E('div', 'DivBackward0', 'ab', ('grad / b', '-grad * (a / b / b)'), fwd='a / b'),
    # PyTorch's masks: no gradient to the base where the exponent is 0, nor to the
    # exponent where the base is 0 and the exponent >= 0 (so 0 ** 0 gives no NaN);
    # where_pos keeps the Tensor form of pow_grad (create_graph) from 0 * inf there,
    # and a NaN gradient from passing where the exponent is 0 (PyTorch selects 0)
    E('pow', 'PowBackward1', 'ab', ('where_pos(eq(b, 0.0), 0.0, grad * pow_grad(a, b))',
                                    'grad * xlogy_safe(out, a)'),
      fwd='pow(a, b)'),
    # ties split the gradient in half and a NaN on either side passes it to both,
    # as PyTorch does: each side gets it unless it is the strictly losing one.
    # Masked-off gradients are selected away (where_pos), not multiplied by 0, so
    # an incoming NaN or inf gradient leaves 0 there, as PyTorch's masked_fill does
    # (the same for relu, clamp and hardtanh below)
    E('maximum', 'MaximumBackward0', 'ab',
      ('where_pos(1.0 - ge_half(b, a), grad * (1.0 - ge_half(b, a)), 0.0)',
       'where_pos(1.0 - ge_half(a, b), grad * (1.0 - ge_half(a, b)), 0.0)'),
      fwd='maximum(a, b)'),
    E('minimum', 'MinimumBackward0', 'ab',
      ('where_pos(1.0 - ge_half(a, b), grad * (1.0 - ge_half(a, b)), 0.0)',
       'where_pos(1.0 - ge_half(b, a), grad * (1.0 - ge_half(b, a)), 0.0)'),
      fwd='minimum(a, b)'),
    # 0 where a * a + b * b is 0 (the origin, or underflow), as PyTorch masks it
    E('atan2', 'Atan2Backward0', 'ab', ('grad * b * inv0(a * a + b * b)',
                                        '-grad * a * inv0(a * a + b * b)'), fwd='atan2(a, b)'),
    E('remainder', 'RemainderBackward1', 'ab', ('grad', '-grad * floor(a / b)'),
      fwd='remainder(a, b)'),
    E('fmod', 'FmodBackward1', 'ab', ('grad', '-grad * trunc(a / b)'), fwd='fmod(a, b)'),
    # a = probability, b = target; logs clamped at -100 and the denominator at
    # 1e-12, as PyTorch does, so a = 0 or 1 gives a finite gradient
    E('binary_cross_entropy', 'BinaryCrossEntropyBackward0', 'ab', (
        'grad * (a - b) / where_pos(a * (1.0 - a) - 1e-12, a * (1.0 - a), 1e-12)',
        'grad * (where_pos(log(1.0 - a) + 100.0, log(1.0 - a), -100.0)'
        ' - where_pos(log(a) + 100.0, log(a), -100.0))'),
      fwd='-(b * maximum(log(a), -100.0) + (1.0 - b) * maximum(log1p(-a), -100.0))'),
    # --- tensor with a Python scalar c ---
    E('add_scalar', 'AddBackward0', 'a', ('grad',), consts='c', fwd='a + c'),
    E('sub_scalar', 'SubBackward0', 'a', ('grad',), consts='c', fwd='a - c'),
    E('rsub_scalar', 'RsubBackward1', 'a', ('-grad',), consts='c', fwd='c - a'),
    E('mul_scalar', 'MulBackward0', 'a', ('grad * c',), consts='c', fwd='a * c', frees=True),
    E('div_scalar', 'DivBackward0', 'a', ('grad / c',), consts='c', fwd='a / c', frees=True),
    # c / a as div(c, a) records it (PyTorch's DivBackward0 of a wrapped number and a;
    # the operator c / a is reciprocal(a) * c there and here, tape/__init__.py)
    E('rdiv_scalar', 'DivBackward0', 'a', ('-grad * out / a',), consts='c', fwd='c / a'),
    E('pow_scalar', 'PowBackward0', 'a', ('where_pos(eq(c, 0.0), 0.0, grad * pow_grad(a, c))',),
      consts='c',
      fwd='power(a, c)'),
    # out * log(c), but 0 where c == 0 and a >= 0 (out <= 1), as PyTorch masks it;
    # c + zero(out) is c as a Tensor like out, which the Tensor form of xlogy_safe takes
    E('rpow_scalar', 'PowBackward2', 'a', ('grad * xlogy_safe(out, c + zero(out))',),
      consts='c', fwd='pow(c, a)'),
    E('remainder_scalar', 'RemainderBackward0', 'a', ('grad',), consts='c',
      fwd='remainder(a, c)'),
    E('fmod_scalar', 'FmodBackward0', 'a', ('grad',), consts='c', fwd='fmod(a, c)'),
    # --- unary elementwise ---
    E('neg', 'NegBackward0', 'a', ('-grad',), fwd='-a'),
    E('exp', 'ExpBackward0', 'a', ('grad * out',), fwd='exp(a)'),
    E('log', 'LogBackward0', 'a', ('grad / a',), fwd='log(a)'),
    E('sqrt', 'SqrtBackward0', 'a', ('grad / (2.0 * out)',), fwd='sqrt(a)'),
    E('sin', 'SinBackward0', 'a', ('grad * cos(a)',), fwd='sin(a)'),
    E('cos', 'CosBackward0', 'a', ('-grad * sin(a)',), fwd='cos(a)'),
    E('tanh', 'TanhBackward0', 'a', ('grad * (1.0 - out * out)',), fwd='tanh(a)'),
    E('sigmoid', 'SigmoidBackward0', 'a', ('grad * out * (1.0 - out)',), fwd='sigmoid(a)'),
    # 0 where out <= 0; NaN passes the gradient, as PyTorch's threshold_backward does
    E('relu', 'ReluBackward0', 'a', ('where_pos(1.0 - ge(0.0, out), grad, 0.0)',),
      fwd='maximum(a, 0.0)'),
    # sign(NaN) is 0 in PyTorch (eq(a, a) is 0 only there), so NaN passes no gradient
    E('abs', 'AbsBackward0', 'a', ('grad * where_pos(eq(a, a), sign(a), 0.0)',), fwd='abs(a)'),
    E('rsqrt', 'RsqrtBackward0', 'a', ('-0.5 * grad * out * out * out',), fwd='1.0 / sqrt(a)'),
    E('exp2', 'Exp2Backward0', 'a', ('grad * out * 0.6931471805599453',), fwd='exp2(a)'),
    E('expm1', 'Expm1Backward0', 'a', ('grad * (out + 1.0)',), fwd='expm1(a)'),
    E('log2', 'Log2Backward0', 'a', ('grad / (a * 0.6931471805599453)',), fwd='log2(a)'),
    E('log10', 'Log10Backward0', 'a', ('grad / (a * 2.302585092994046)',), fwd='log10(a)'),
    E('log1p', 'Log1PBackward0', 'a', ('grad / (a + 1.0)',), fwd='log1p(a)'),
    E('tan', 'TanBackward0', 'a', ('grad * (1.0 + out * out)',), fwd='tan(a)'),
    E('asin', 'AsinBackward0', 'a', ('grad / sqrt(1.0 - a * a)',), fwd='asin(a)'),
    E('acos', 'AcosBackward0', 'a', ('-grad / sqrt(1.0 - a * a)',), fwd='acos(a)'),
    E('atan', 'AtanBackward0', 'a', ('grad / (1.0 + a * a)',), fwd='atan(a)'),
    E('sinh', 'SinhBackward0', 'a', ('grad * cosh(a)',), fwd='sinh(a)'),
    E('cosh', 'CoshBackward0', 'a', ('grad * sinh(a)',), fwd='cosh(a)'),
    E('erf', 'ErfBackward0', 'a', ('grad * 1.1283791670955126 * exp(-a * a)',), fwd='erf(a)'),
    E('erfc', 'ErfcBackward0', 'a', ('-grad * 1.1283791670955126 * exp(-a * a)',), fwd='erfc(a)'),
    E('erfinv', 'ErfinvBackward0', 'a', ('grad * 0.886226925452758 * exp(out * out)',),
      fwd='erfinv(a)'),
    # sqrt(2 pi) exp(out^2 / 2): the reciprocal of the normal density at out
    E('ndtri', 'SpecialNdtriBackward0', 'a', ('grad * 2.5066282746310002 * exp(0.5 * out * out)',),
      fwd='ndtri(a)'),
    E('lgamma', 'LgammaBackward0', 'a', ('grad * digamma(a)',), fwd='lgamma(a)'),
    E('digamma', 'DigammaBackward0', 'a', ('grad * polygamma(1.0, a)',), fwd='digamma(a)'),
    # c is n
    E('polygamma', 'PolygammaBackward0', 'a', ('grad * polygamma(c + 1.0, a)',), consts='c',
      fwd='polygamma(c, a)'),
    E('reciprocal', 'ReciprocalBackward0', 'a', ('-grad * out * out',), fwd='1.0 / a'),
    E('silu', 'SiluBackward0', 'a', ('grad * sigmoid(a) * (1.0 + a * (1.0 - sigmoid(a)))',),
      fwd='a * sigmoid(a)'),
    # PyTorch's d/dx of the exact gelu: Phi(x) + x * phi(x)
    E('gelu', 'GeluBackward0', 'a', (
        'grad * (0.5 * (1.0 + erf(a * 0.7071067811865476))'
        ' + a * 0.3989422804014327 * exp(-0.5 * a * a))',),
      fwd='0.5 * a * (1.0 + erf(a * 0.7071067811865475))'),     # eager's 1 / math.sqrt(2.0)
    # gelu(approximate='tanh'): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
    # The backward uses 0.5 (1 + tanh u) = sigmoid(2u) and 1 - tanh(u)^2 =
    # 4 sigmoid(2u) sigmoid(-2u): sigmoid is built on vexp, so the sweep and chunk
    # loops have no libm tanh call (three per element before) and vectorize.
    # sigmoid(-2u) rather than 1 - sigmoid(2u), which cancels where u > 0 (1e-14 off
    # at x = 7); this way the result is within 2.3e-16 of the exact value and within
    # 3e-15 of the tanh form's, which is that form's own error (up to 2.5e-15).
    # 1.5957691216057308 is 2 sqrt(2/pi).
    E('gelu_tanh', 'GeluBackward0', 'a', (
        'grad * (sigmoid(1.5957691216057308 * (a + 0.044715 * a * a * a))'
        ' + 2.0 * a * sigmoid(1.5957691216057308 * (a + 0.044715 * a * a * a))'
        ' * sigmoid(-1.5957691216057308 * (a + 0.044715 * a * a * a))'
        ' * 0.7978845608028654 * (1.0 + 0.134145 * a * a))',),
      fwd='0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))'),
    # c is the negative slope; x == 0 takes the negative side, as in PyTorch
    E('leaky_relu', 'LeakyReluBackward0', 'a', ('grad * where_pos(a, 1.0, c)',), consts='c',
      fwd='where_pos(a, a, a * c)'),
    # c is alpha; below 0, d/dx alpha*(exp(x)-1) = out + alpha (no exp of a large x);
    # at x == 0 the constant alpha, as PyTorch's double backward is 0 there
    E('elu', 'EluBackward0', 'a', ('grad * where_pos(a, 1.0, where_pos(-a, out + c, c))',),
      consts='c',
      fwd='where_pos(a, a, c * expm1(minimum(a, 0.0)))'),
    # c is beta, d the threshold (the forward's; softplus returns x itself where
    # beta x > threshold).  Above the threshold out == a; below it out == a only
    # where sigmoid(beta x) already rounds to 1.  At beta x == threshold the value is
    # the constant sigmoid(d): PyTorch's double backward is 0 there.  A NaN input
    # gives a NaN gradient, as PyTorch's exp(x) / (exp(x) + 1) does (eq(a, a) is 0)
    E('softplus', 'SoftplusBackward0', 'a',
      ('grad * where_pos(eq(a, a), where_pos(eq(out, a), 1.0, where_pos(d - a * c, '
       'sigmoid(a * c), sigmoid(d))), a)',),
      consts='cd',
      # the eager forward's two forms: log1p(exp(beta x)) / beta under a finite
      # threshold (PyTorch's softplus), max(y, 0) + log1p(exp(-|y|)) without one
      fwd='where_pos(gt(a * c, d), a, where_pos(gt(d, 1.7976931348623157e308),'
          ' maximum(a * c, 0.0) + log1p(exp(-abs(a * c))), log1p(exp(a * c))) / c)'),
    # sign(-0.0) is 0.0 in NumPy; the helper keeps the zero's sign, hence + 0.0;
    # sign(NaN) is 0, as in PyTorch
    E('sign', 'SignBackward0', 'a', ('zero(grad)',), fwd='where_pos(eq(a, a), sign(a), 0.0) + 0.0'),
    E('floor', 'FloorBackward0', 'a', ('zero(grad)',), fwd='floor(a)'),
    E('ceil', 'CeilBackward0', 'a', ('zero(grad)',), fwd='ceil(a)'),
    E('round', 'RoundBackward0', 'a', ('zero(grad)',), fwd='rint(a)'),
    # c is the number of decimals
    E('round_decimals', 'RoundBackward1', 'a', ('zero(grad)',), consts='c',
      fwd='round_decimals(a, c)'),
    E('trunc', 'TruncBackward0', 'a', ('zero(grad)',), fwd='trunc(a)'),
    # clamp(x, lo, hi) with c = lo and d = hi (-inf / inf when not given): the
    # gradient passes where lo <= x <= hi (NaN gives 0, as in PyTorch), and
    # nowhere when lo > hi.  Read from x alone, as PyTorch saves only x: an
    # in-place change of the result afterwards is then no error
    E('clamp', 'ClampBackward1', 'a', ('where_pos(ge(d, c) * ge(a, c) * ge(d, a), grad, 0.0)',),
      consts='cd',
      fwd='minimum(maximum(a, c), d)'),
    # hardtanh/relu6: clamp, but the gradient passes only strictly inside (c, d),
    # as PyTorch's hardtanh_backward (0 at NaN, as its float64 kernel gives; its
    # float32 kernel passes it there); from x alone, as clamp
    E('hardtanh', 'HardtanhBackward0', 'a',
      ('where_pos(eq(a, a) * (1.0 - ge(c, a)) * (1.0 - ge(a, d)), grad, 0.0)',), consts='cd',
      fwd='minimum(maximum(a, c), d)'),
    # out = a ** c for a >= 0 (a sum of |x|^p); 0 gradient at a == 0, as PyTorch's
    # norm backward masks the zero vector.  At a = inf, c a^(c-1) rather than
    # c out / a, which is inf / inf = NaN there (PyTorch's x / norm gives 0 for
    # the finite elements); elsewhere out / a, which rounds as x / norm does
    E('norm_root', 'LinalgVectorNormBackward0', 'a',
      ('grad * c * where_pos(ge(a, 1.7976931348623157e308), a ** (c - 1.0), out * inv0(a))',),
      consts='c',
      fwd='where_pos(eq(c, 0.5), sqrt(a), pow(a, c))'),
    E('std_root', 'StdBackward0', 'a', ('grad * 0.5 * inv0(out)',), fwd='sqrt(a)'),  # of a var
    # c = 1 / (N - correction) for the backward, d = N - correction: eager divides by d
    E('var_scale', 'VarBackward0', 'a', ('grad * c',), consts='cd', fwd='a / d'),
    # --- structural: kernels written by hand, once per kind ---
    S('sum', 'SumBackward0', 'sum_all'),           # grad_in[i] += c * grad_out[0]
    S('mean', 'MeanBackward0', 'sum_all'),
    S('sum_dim', 'SumBackward1', 'reduce'),        # grad_in[i] += c * grad_out[map(i)]
    S('mean_dim', 'MeanBackward1', 'reduce'),
    # log(sum(exp(a))) over dims: grad_in[i] += grad_out[map(i)] * exp(a[i] - out[map(i)])
    S('logsumexp', 'LogsumexpBackward0', 'lse'),
    S('expand', 'ExpandBackward0', 'expand'),      # grad_in[map(i)] += grad_out[i]
    S('broadcast', 'ExpandBackward0', 'expand'),   # implicit, by a broadcasting op
    S('view', 'ViewBackward0', 'identity'),        # same elements, new shape
    S('reshape', 'ViewBackward0', 'identity'),
    S('index', 'IndexBackward0', 'take', frees=True),          # grad_in[idx[i]] += grad_out[i]
    S('slice', 'SliceBackward0', 'take'),
    S('select', 'SelectBackward0', 'take'),
    S('t', 'TBackward0', 'take'),
    S('transpose', 'TransposeBackward0', 'take'),
    S('permute', 'PermuteBackward0', 'take'),
    S('put', 'IndexPutBackward0', 'put'),          # out[idx[i]] += in[i]; the adjoint of take
    S('mm', 'MmBackward0', 'mm'),
    # out[i] = a[i] if mask[i] else b[i]; the mask (int64) in A; a and b expanded
    S('where', 'WhereBackward0', 'where', frees=True),
    S('masked_fill', 'MaskedFillBackward0', 'where', frees=True),
    # along one axis of an (outer, L, inner) block; A = [outer, L, inner]
    S('cumsum', 'CumsumBackward0', 'cumsum'),     # grad_in = reversed cumsum of grad_out
    S('cumprod', 'CumprodBackward0', 'cumprod'),  # saves input and output; exact with zeros
    S('bmm', 'BmmBackward0', 'bmm'),              # A = [batch, m, k, n]; saves a and b
    # composite ops whose last record is an existing kind, named as PyTorch names it
    S('gather', 'GatherBackward0', 'take', frees=True),
    S('index_select', 'IndexSelectBackward0', 'take', frees=True),
    S('flip', 'FlipBackward0', 'take'),
    S('repeat', 'RepeatBackward0', 'take'),
    S('split', 'SplitBackward0', 'take'),
    S('max_dim', 'MaxBackward0', 'take', frees=True),          # values at the arg-max
    S('min_dim', 'MinBackward0', 'take', frees=True),
    S('prod', 'ProdBackward0', 'take'),            # the last element of a cumprod
    S('prod_dim', 'ProdBackward1', 'take'),
    S('squeeze', 'SqueezeBackward1', 'identity'),
    S('unsqueeze', 'UnsqueezeBackward0', 'identity'),
    S('scatter', 'ScatterBackward0', 'where', frees=True),     # where(scattered, put(src), self)
    S('setitem', 'CopySlices', 'where'),           # x[key] = value on a recorded x
    S('dot', 'DotBackward0', 'sum_all'),           # 1-D @ 1-D: the sum of a product
    S('mv', 'MvBackward0', 'identity'),            # 2-D @ 1-D: the mm result, flattened
    S('squeeze_matmul', 'SqueezeBackward4', 'identity'),   # 1-D @ 2-D: likewise
    S('t_vector', 'TBackward0', 'identity'),       # t() of a 0-d or 1-D tensor
    S('alias', 'AliasBackward0', 'identity'),      # a[...], a[:, :]: indexing that picks all
    S('reshape_alias', 'ReshapeAliasBackward0', 'identity'),   # reshape of a strided view
    S('unsafe_view', 'UnsafeViewBackward0', 'identity'),       # reshape that copies
    S('contiguous', 'CloneBackward0', 'identity'),  # contiguous() of a strided view: a copy
    S('diagonal', 'DiagonalBackward0', 'take'),
    S('python', 'PythonBackward', 'python'),       # runs Python: custom Function, hooks
    # out = concatenate((a, b), axis) seen as (outer, wa + wb): each row is wa
    # elements of a then wb of b.  wa in field a; field 7 holds wb | count << 40,
    # count the number of cat's inputs the record joins (0 for the inner records
    # of a cat of more than two: a balanced tree, see tape/_shapes.py cat), which
    # next_functions reads to list every input.  Each input's gradient is its
    # columns of the output's: nothing saved, no index map
    S('cat', 'CatBackward0', 'cat'),
    S('stack', 'StackBackward0', 'cat'),           # the inputs themselves, not unsqueezed
    # reductions named as PyTorch names them (tape/_reductions.py _evenly): a
    # unique extreme of all elements is a take of its position; ties share the
    # gradient as sum(a * w), whose sum carries the name
    S('max_all', 'MaxBackward1', 'take', frees=True),
    S('min_all', 'MinBackward1', 'take', frees=True),
    S('max_even', 'MaxBackward1', 'sum_all'),
    S('min_even', 'MinBackward1', 'sum_all'),
    S('amax_even', 'AmaxBackward0', 'sum_all'),
    S('amax_even_dim', 'AmaxBackward0', 'reduce'),
    S('amin_even', 'AminBackward0', 'sum_all'),
    S('amin_even_dim', 'AminBackward0', 'reduce'),
    S('median_even', 'MedianBackward0', 'sum_all'),
    S('nanmedian_even', 'NanmedianBackward0', 'sum_all'),
    S('unbind', 'UnbindBackward0', 'take'),        # unbind, iterating a tensor
    S('split_with_sizes', 'SplitWithSizesBackward0', 'take'),
    S('squeeze_all', 'SqueezeBackward0', 'identity'),     # squeeze() with no dim
    S('squeeze_dims', 'SqueezeBackward2', 'identity'),    # squeeze((d0, d1))
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
    'lse': (True, True, True),            # saves the input, then the output
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
    'cat': (False, False, False),
}
STRUCTURAL_KINDS = tuple(k for k in KIND_FIELDS if k != 'elementwise')
TWO_INPUT_KINDS = ('mm', 'bmm', 'where', 'cat')     # structural kinds with a second input (field 4)
for _r in RULES:
    if _r.kind not in KIND_FIELDS:
        raise ValueError(f'rule {_r.name!r}: unknown kind {_r.kind!r}')
