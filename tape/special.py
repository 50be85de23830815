"""``torch.special``: the special functions under their SciPy-style names.

>>> import tape
>>> tape.special.gammaln(tape.tensor([4.0]))
tensor([1.7918])
"""
import math as _math

import tape as _tape

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
    """``x * log1p(y)``, 0 where x == 0 (unless y is NaN), as ``xlogy``; the
    gradient in x is log1p(y) (at x == 0 too), in y x / (1 + y)."""
    import numpy as np
    from . import _ops
    from ._composites import _float_input, _t
    if not isinstance(input, _tape.Tensor) and not isinstance(other, _tape.Tensor):
        raise TypeError(f"xlog1py(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    like = input if isinstance(input, _tape.Tensor) else other
    # (a Python float beside an integer tensor stays a float, as in xlogy)
    x, y = _float_input(_t(input, like)), _float_input(_t(other, like))
    xd, yd = np.asarray(x._data), np.asarray(y._data)
    shape = _ops.check_broadcast('xlog1py', x, y)
    log1p_y = _tape.log1p(y)
    with np.errstate(all='ignore'):
        # only where log1p(y) is not a finite number (y == -1, y < -1, y == inf)
        # does 0 * log1p(y) need the 0
        drop = (xd == 0) & ~np.isfinite(np.log1p(yd)) & ~np.isnan(yd)
    if np.any(drop):
        log1p_y = _tape.where(_tape.from_numpy(np.ascontiguousarray(np.broadcast_to(
            drop, shape))), 0.0, log1p_y)
    return x * log1p_y


# log_ndtr's asymptotic series for x < -20: log(1 - 1/x^2 + 3/x^4 - ...), to x^-10
_LOG_NDTR_SERIES = (-945.0, 105.0, -15.0, 3.0, -1.0)


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


def _give_out():
    """PyTorch's out= for every function here but softmax and log_softmax, which
    take none (an alias of a tape function that takes out= already keeps it)."""
    import inspect
    from ._out import honour_out
    g = globals()
    names = []
    for name in ('erf', 'erfc', 'erfinv', 'expit', 'logit', 'gammaln', 'digamma', 'psi',
                 'polygamma', 'log1p', 'expm1', 'exp2', 'xlogy', 'logsumexp', 'ndtr', 'ndtri',
                 'round', 'entr', 'xlog1py', 'log_ndtr'):
        try:
            params = inspect.signature(g[name]).parameters
        except (TypeError, ValueError):
            params = {}
        if 'out' not in params:
            names.append(name)
    honour_out(g, names, 'special_')


_give_out()
