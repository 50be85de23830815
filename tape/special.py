"""``torch.special``: the special functions under their SciPy-style names.

>>> import tape
>>> tape.special.gammaln(tape.tensor([4.0]))
tensor([1.7918])
"""
import math as _math

import tape as _tape
from ._composite_nodes import node_named

erf = _tape.erf
erfc = _tape.erfc
erfinv = _tape.erfinv
expit = _tape.sigmoid
logit = _tape.logit
gammaln = _tape.lgamma
digamma = psi = _tape.digamma
polygamma = _tape.polygamma
log1p = _tape.log1p
expm1 = _tape.expm1
exp2 = _tape.exp2
xlogy = _tape.xlogy
logsumexp = _tape.logsumexp


def softmax(input, dim, *, dtype=None):  # noqa: A002
    return _tape.softmax(input, dim) if dtype is None else _tape.softmax(input.to(dtype), dim)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    return _tape.log_softmax(input, dim) if dtype is None else _tape.log_softmax(input.to(dtype), dim)


def _tensor(input, name):  # noqa: A002
    """``input``, which PyTorch's special functions take as a Tensor only."""
    if not isinstance(input, _tape.Tensor):
        raise TypeError(f"special_{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    return input


def ndtr(input):  # noqa: A002
    """The standard normal CDF, ``0.5 * erfc(-x / sqrt(2))``."""
    return 0.5 * _tape.erfc(_tensor(input, 'ndtr') * (-1.0 / _math.sqrt(2.0)))


def ndtri(input):  # noqa: A002
    """The inverse of ``ndtr``, one primitive (tape/_rules.py): ``sqrt(2) *
    erfinv(2p - 1)`` cancels in the lower tail."""
    from . import _elementwise
    return _elementwise.ndtri(input)


round = _tape.round  # noqa: A001


_ENTR = []


def _entr_fn():
    """entr as one Function: PyTorch's gradient is ``-(1 + log x)`` everywhere
    (inf at 0, NaN for x < 0, -inf at inf), which no masked composite of -x log x
    gives (0 * log 0 and inf * 0 are NaN); the backward is in tape ops, so it
    differentiates again (``-1 / x``)."""
    if not _ENTR:
        import numpy as np
        from .autograd import Function
        from ._tensor import _leaf

        class SpecialEntr(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                d = np.asarray(x._data)
                with np.errstate(all='ignore'):
                    val = np.where(d > 0, -d * np.log(np.where(d > 0, d, 1)),
                                   np.where(d == 0, 0, np.where(d < 0, -np.inf, d)))
                return _leaf(np.ascontiguousarray(val, dtype=d.dtype))

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * -(_tape.log(x) + 1.0)
        SpecialEntr._backward_name = 'SpecialEntrBackward0'
        _ENTR.append(SpecialEntr)
    return _ENTR[0]


def entr(input):  # noqa: A002
    """``-x log x`` for x > 0, 0 at 0, -inf for x < 0 (NaN stays NaN)."""
    from ._composites import _float_input
    return _entr_fn().apply(_float_input(_tensor(input, 'entr')))


def xlog1py(input, other):  # noqa: A002
    """``x * log1p(y)``, 0 where x == 0 (unless y is NaN), as ``xlogy``, with
    PyTorch's gradients (``tape._composites._xlogy_fns``): in x ``xlog1py(grad,
    y)``, 0 where x == 0 and y <= -1; in y ``grad * x / (1 + y)``."""
    from . import _ops
    from ._composites import _float_input, _t, _xlogy_fns
    if not isinstance(input, _tape.Tensor) and not isinstance(other, _tape.Tensor):
        raise TypeError(f"xlog1py(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    like = input if isinstance(input, _tape.Tensor) else other
    # (a Python float beside an integer tensor stays a float, as in xlogy)
    x, y = _float_input(_t(input, like)), _float_input(_t(other, like))
    _ops.check_broadcast('xlog1py', x, y)
    kind = 0 if isinstance(input, _tape.Tensor) and isinstance(other, _tape.Tensor) else \
        (2 if isinstance(input, _tape.Tensor) else 1)
    return _xlogy_fns(True)[kind].apply(x, y)


# log_ndtr's asymptotic series for x < -20: log(1 - 1/x^2 + 3/x^4 - ...), to x^-10
_LOG_NDTR_SERIES = (-945.0, 105.0, -15.0, 3.0, -1.0)


@node_named('SpecialLogNdtrBackward0', 'input')
def log_ndtr(input):  # noqa: A002
    """``log(ndtr(x))``: ``log1p(-ndtr(-x))`` for x > 0, through erfc down to
    x = -20 (in float64 for float32 input), and by the asymptotic series ``-x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - ...)`` below (where
    ndtr underflows; the series' truncation is under 1e-11 there)."""
    import numpy as np
    from . import _ops
    x = _tensor(input, 'log_ndtr')
    d = np.asarray(x._data)
    if d.dtype.kind == 'f' and d.dtype != np.float64:
        # in float64, cast back: float32's ndtr underflows from x = -14 (-inf, where
        # the series below starts at -20), and the square of it in the second
        # derivative from x = -10
        return _ops.to(log_ndtr(_ops.to(x, np.float64)), d.dtype)
    with np.errstate(invalid='ignore'):
        tail = np.ascontiguousarray(d < -20)
    with np.errstate(invalid='ignore'):
        upper = np.ascontiguousarray(d > 0)
    if upper.any():
        # log(1 - ndtr(-x)) for x > 0: log1p keeps what log of a rounded 1 loses
        u = _tape.from_numpy(upper)
        up = _tape.log1p(-ndtr(-_tape.where(u, x, 1.0)))
        rest = _tape.where(u, -1.0, x)
        return _tape.where(u, up, log_ndtr(rest))
    if not tail.any():
        return _tape.log(ndtr(x))
    t = _tape.from_numpy(tail)
    near = _tape.where(t, 0.0, x)                   # (0 where the series applies)
    far = _tape.where(t, x, -30.0)                  # (-30 where it does not)
    inv2 = 1.0 / (far * far)
    s = inv2 * _LOG_NDTR_SERIES[0]
    for c in _LOG_NDTR_SERIES[1:]:
        s = (s + c) * inv2
    series = -0.5 * far * far - _tape.log(-far) - 0.5 * _math.log(2 * _math.pi) \
        + _tape.log1p(s)
    return _tape.where(t, series, _tape.log(ndtr(near)))


# -- erfcx, zeta, gammainc/gammaincc, the Bessel and Airy functions and the
# orthogonal polynomials: values from compiler/special_more_kernels.py (torch's
# Cephes-derived kernels, in float64, rounded to the result dtype)

_MORE = {}

# the functions that are not differentiable in PyTorch: their results never
# require grad (input x, or x and the degree n for the polynomials)
_UNARY_PLAIN = ('bessel_j0', 'bessel_j1', 'bessel_y0', 'bessel_y1', 'modified_bessel_i0',
                'modified_bessel_i1', 'modified_bessel_k0', 'modified_bessel_k1',
                'scaled_modified_bessel_k0', 'scaled_modified_bessel_k1',
                'spherical_bessel_j0', 'airy_ai')
_POLYNOMIALS = ('chebyshev_polynomial_t', 'chebyshev_polynomial_u', 'chebyshev_polynomial_v',
                'chebyshev_polynomial_w', 'shifted_chebyshev_polynomial_t',
                'shifted_chebyshev_polynomial_u', 'shifted_chebyshev_polynomial_v',
                'shifted_chebyshev_polynomial_w', 'hermite_polynomial_h',
                'hermite_polynomial_he', 'laguerre_polynomial_l', 'legendre_polynomial_p')


def _kernels():
    from compiler import special_more_kernels
    return special_more_kernels


def _data(a):
    import numpy as np
    return np.asarray(a._data) if isinstance(a, _tape.Tensor) else a


def _float_result(*args):
    """PyTorch's result dtype of ``args`` (tensors and Python numbers), an integer
    or bool one promoted to the default float dtype."""
    from ._dtypes import default_dtype, result_type
    dt = result_type(*[_data(a) for a in args])
    return dt if dt.kind == 'f' else default_dtype[0]


def _two_numbers(name, a, b):
    if not isinstance(a, _tape.Tensor) and not isinstance(b, _tape.Tensor):
        raise TypeError(f'special_{name}() received an invalid combination of arguments - got '
                        f'({type(a).__name__}, {type(b).__name__}), but expected one of: '
                        f'(Tensor, Tensor), (Number, Tensor), (Tensor, Number)')


def _functions():
    """The autograd Functions (built once): erfcx (differentiable to any order),
    zeta (whose backward raises, as PyTorch's) and gammainc/gammaincc
    (differentiable in ``other`` only)."""
    if _MORE:
        return _MORE
    from ._tensor import _leaf
    from .autograd import Function
    from .autograd.function import _register_node_class

    def named(cls, node):
        cls.__name__ = cls.__qualname__ = node[:-len('Backward0')]
        cls._backward_name = node
        _register_node_class(node)
        return cls

    class Erfcx(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return _leaf(_kernels().unary('erfcx', _data(x)))

        @staticmethod
        def backward(ctx, g):
            # d/dx erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi), in tape ops (erfcx through
            # this Function again), so that it differentiates again
            x, = ctx.saved_tensors
            return g * (2.0 * x * _MORE['erfcx'].apply(x) - 2.0 / _math.sqrt(_math.pi))

    class Zeta(Function):
        @staticmethod
        def forward(ctx, x, q):
            return _leaf(_kernels().binary('zeta', _data(x), _data(q), _data(x).dtype))

        @staticmethod
        def backward(ctx, g):
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")

    def igamma(name, upper):
        class Igamma(Function):
            @staticmethod
            def forward(ctx, a, x):
                ctx.save_for_backward(a, x)
                k = 'gammaincc' if upper else 'gammainc'
                return _leaf(_kernels().binary(k, _data(a), _data(x), _data(a).dtype))

            @staticmethod
            def backward(ctx, g):
                a, x = ctx.saved_tensors
                if ctx.needs_input_grad[0]:
                    raise NotImplementedError(f"the derivative for '{name}: input' is not "
                                              'implemented.')
                # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) = -d/dx Q(a, x), PyTorch's formula
                d = ((a - 1.0) * _tape.log(x) - x - _tape.lgamma(a)).exp()
                return None, (-g * d if upper else g * d)
        return Igamma

    _MORE['erfcx'] = named(Erfcx, 'SpecialErfcxBackward0')
    _MORE['zeta'] = named(Zeta, 'SpecialZetaBackward0')
    _MORE['gammainc'] = named(igamma('igamma', False), 'IgammaBackward0')
    _MORE['gammaincc'] = named(igamma('igammac', True), 'IgammacBackward0')
    return _MORE


def erfcx(input):  # noqa: A002
    """The scaled complementary error function ``exp(x^2) erfc(x)``, finite where
    erfc underflows; differentiable (``2 x erfcx(x) - 2/sqrt(pi)``).

    >>> import tape
    >>> tape.special.erfcx(tape.tensor([0.0, 1.0, 30.0]))
    tensor([1.0000, 0.4276, 0.0188])
    """
    from ._composites import _float_input
    return _functions()['erfcx'].apply(_float_input(_tensor(input, 'erfcx')))


def zeta(input, other):  # noqa: A002
    """The Hurwitz zeta function ``sum_k (k + other)^-input`` (the Riemann zeta at
    ``other = 1``); either argument may be a Python number.  Not differentiable:
    a backward through it raises NotImplementedError, as PyTorch's.

    >>> import tape
    >>> tape.special.zeta(tape.tensor([2.0, 4.0]), 1.0)
    tensor([1.6449, 1.0823])
    """
    import numpy as np
    from . import _ops
    _two_numbers('zeta', input, other)
    dt = _float_result(input, other)
    x, q = (_ops.to(a, dt) if isinstance(a, _tape.Tensor) else _tape.tensor(a, dtype=dt)
            for a in (input, other))
    if x.requires_grad or q.requires_grad:
        if tuple(x.shape) != tuple(q.shape):
            x, q = _tape.broadcast_tensors(x, q)
        return _functions()['zeta'].apply(x, q)
    return _tape.from_numpy(_kernels().binary('zeta', np.asarray(x._data),
                                              np.asarray(q._data), dt))


def _gamma_inc(name, input, other):  # noqa: A002
    from . import _ops
    from ._dtypes import result_type
    from ._out import _NAMES
    for arg, pos, what in ((input, 1, 'input'), (other, 2, 'other')):
        if not isinstance(arg, _tape.Tensor):
            raise TypeError(f"special_{name}(): argument '{what}' (position {pos}) must be "
                            f'Tensor, not {type(arg).__name__}')
    dt = result_type(_data(input), _data(other))
    if dt.kind != 'f':
        raise RuntimeError(f'"igamma_cpu" not implemented for '
                           f"'{_NAMES.get(dt.str[1:], dt)}'")
    a, x = _ops.to(input, dt), _ops.to(other, dt)
    if tuple(a.shape) != tuple(x.shape):
        a, x = _tape.broadcast_tensors(a, x)
    return _functions()[name].apply(a, x)


def gammainc(input, other):  # noqa: A002
    """The regularized lower incomplete gamma function ``P(input, other)``
    (``torch.igamma``); differentiable in ``other`` only (the gradient in ``input``
    raises NotImplementedError, as PyTorch's).

    >>> import tape
    >>> tape.special.gammainc(tape.tensor([1.0, 2.0]), tape.tensor([1.0, 1.0]))
    tensor([0.6321, 0.2642])
    """
    return _gamma_inc('gammainc', input, other)


def gammaincc(input, other):  # noqa: A002
    """The regularized upper incomplete gamma function ``Q = 1 - P``
    (``torch.igammac``); differentiable in ``other`` only."""
    return _gamma_inc('gammaincc', input, other)


def _plain_unary(name, doc):
    def fn(input):  # noqa: A002
        from ._dtypes import default_dtype
        d = _data(_tensor(input, name))
        dt = d.dtype if d.dtype.kind == 'f' else default_dtype[0]
        return _tape.from_numpy(_kernels().unary(name, d, dt))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + ' Not differentiable: the result never requires grad (as PyTorch).'
    return fn


def _polynomial(name, doc):
    def fn(input, n):  # noqa: A002
        _two_numbers(name, input, n)
        dt = _float_result(input, n)
        return _tape.from_numpy(_kernels().binary(name, _data(input), _data(n), dt))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + (' ``input`` and ``n`` may be tensors (broadcast) or one of them a '
                        'Python number; ``n`` is truncated to an integer, and a negative one '
                        '(or NaN) gives 0, as in PyTorch.  Not differentiable: the result '
                        'never requires grad.')
    return fn


_DOCS = {
    'bessel_j0': 'The Bessel function of the first kind of order 0, ``J0(x)``.',
    'bessel_j1': 'The Bessel function of the first kind of order 1, ``J1(x)``.',
    'bessel_y0': 'The Bessel function of the second kind of order 0, ``Y0(x)`` (NaN for '
                 'x < 0, -inf at 0).',
    'bessel_y1': 'The Bessel function of the second kind of order 1, ``Y1(x)`` (NaN for '
                 'x < 0, -inf at 0).',
    'modified_bessel_i0': 'The modified Bessel function of the first kind of order 0, '
                          '``I0(x)``.',
    'modified_bessel_i1': 'The modified Bessel function of the first kind of order 1, '
                          '``I1(x)``.',
    'modified_bessel_k0': 'The modified Bessel function of the second kind of order 0, '
                          '``K0(x)`` (NaN for x < 0, inf at 0).',
    'modified_bessel_k1': 'The modified Bessel function of the second kind of order 1, '
                          '``K1(x)`` (NaN for x < 0, inf at 0).',
    'scaled_modified_bessel_k0': '``exp(x) K0(x)``.',
    'scaled_modified_bessel_k1': '``exp(x) K1(x)``.',
    'spherical_bessel_j0': 'The spherical Bessel function of the first kind of order 0, '
                           '``sin(x) / x``.',
    'airy_ai': 'The Airy function ``Ai(x)`` (NaN at +-inf, as PyTorch).',
    'chebyshev_polynomial_t': 'The Chebyshev polynomial of the first kind ``T_n(input)``.',
    'chebyshev_polynomial_u': 'The Chebyshev polynomial of the second kind ``U_n(input)``.',
    'chebyshev_polynomial_v': 'The Chebyshev polynomial of the third kind ``V_n(input)``.',
    'chebyshev_polynomial_w': 'The Chebyshev polynomial of the fourth kind ``W_n(input)``.',
    'shifted_chebyshev_polynomial_t': 'The shifted Chebyshev polynomial ``T*_n(input) = '
                                      'T_n(2 input - 1)``.',
    'shifted_chebyshev_polynomial_u': 'The shifted Chebyshev polynomial ``U*_n(input) = '
                                      'U_n(2 input - 1)``.',
    'shifted_chebyshev_polynomial_v': 'The shifted Chebyshev polynomial ``V*_n(input) = '
                                      'V_n(2 input - 1)``.',
    'shifted_chebyshev_polynomial_w': 'The shifted Chebyshev polynomial ``W*_n(input) = '
                                      'W_n(2 input - 1)``.',
    'hermite_polynomial_h': "The physicists' Hermite polynomial ``H_n(input)`` (NaN above "
                            'degree 512 in float64, 128 in float32, as PyTorch).',
    'hermite_polynomial_he': "The probabilists' Hermite polynomial ``He_n(input)`` (NaN "
                             'above degree 512 in float64, 128 in float32, as PyTorch).',
    'laguerre_polynomial_l': 'The Laguerre polynomial ``L_n(input)``.',
    'legendre_polynomial_p': 'The Legendre polynomial ``P_n(input)``.',
}

for _name in _UNARY_PLAIN:
    globals()[_name] = _plain_unary(_name, _DOCS[_name])
for _name in _POLYNOMIALS:
    globals()[_name] = _polynomial(_name, _DOCS[_name])
del _name


def _give_out():
    """PyTorch's out= for every function here but softmax and log_softmax, which
    take none (an alias of a tape function that takes out= already keeps it)."""
    import inspect
    from ._out import honour_out
    g = globals()
    names = []
    for name in ('erf', 'erfc', 'erfinv', 'expit', 'logit', 'gammaln', 'digamma', 'psi',
                 'polygamma', 'log1p', 'expm1', 'exp2', 'xlogy', 'logsumexp', 'ndtr', 'ndtri',
                 'round', 'entr', 'xlog1py', 'log_ndtr', 'erfcx', 'zeta', 'gammainc',
                 'gammaincc') + _UNARY_PLAIN + _POLYNOMIALS:
        try:
            params = inspect.signature(g[name]).parameters
        except (TypeError, ValueError):
            params = {}
        if 'out' not in params:
            names.append(name)
    honour_out(g, names, 'special_')


_give_out()
