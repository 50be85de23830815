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


def ndtr(input):  # noqa: A002
    """The standard normal CDF, ``0.5 * erfc(-x / sqrt(2))``."""
    return 0.5 * _tape.erfc(input * (-1.0 / _math.sqrt(2.0)))


def ndtri(input):  # noqa: A002
    """The inverse of ``ndtr``: ``sqrt(2) * erfinv(2p - 1)``."""
    return _tape.erfinv(input * 2.0 - 1.0) * _math.sqrt(2.0)
