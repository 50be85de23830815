"""The ``torch`` namespace the distribution modules are written against.

The modules of this package follow PyTorch's ``torch/distributions`` sources
(BSD-3-Clause) and spell tape's functions ``torch.<name>``; this module hands
out tape's top-level names, plus the handful of private helpers those sources
call (``torch._is_all_true``, ``torch._standard_gamma``, ...), done here with
tape ops and tape's own generator (the one ``tape.manual_seed`` seeds).
"""
import functools
import warnings

import numpy as np

import tape as _tape
from tape import Tensor, Size, linalg  # torch.nn, torch.special, ...: through __getattr__

inf = float('inf')
nan = float('nan')

# ``torch.types`` aliases (annotations only)
_Number = int | float | bool
Number = int | float | bool
_size = Size


def __getattr__(name):
    return getattr(_tape, name)


def is_tensor_like(x):
    return isinstance(x, Tensor)


def deprecated(message, *, category=DeprecationWarning):
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            warnings.warn(message, category, stacklevel=2)
            return fn(*args, **kwargs)
        return inner
    return wrap


def _is_all_true(t):
    return _tape.tensor(bool(np.all(t._data)) if isinstance(t, Tensor) else bool(t))


class _CNamespace:
    @staticmethod
    def _get_tracing_state():
        return None

    @staticmethod
    def _infer_size(a, b):
        return Size(np.broadcast_shapes(tuple(a), tuple(b)))


_C = _CNamespace()


def _rng():
    return _tape._gen(None)


def _standard_gamma(concentration):
    """Gamma(concentration, 1) samples (not differentiable), in concentration's dtype."""
    c = np.asarray(concentration._data)
    # (np.asarray: for a 0-d parameter NumPy's draws are Python numbers)
    out = np.asarray(_rng().standard_gamma(c.astype(np.float64))).astype(c.dtype)
    out = np.maximum(out, np.finfo(c.dtype).tiny)
    return _tape.tensor(out, dtype=concentration.dtype)


def _sample_dirichlet(concentration):
    """Dirichlet samples (over the last dim) from normalized gamma draws."""
    c = np.asarray(concentration._data)
    g = _rng().standard_gamma(c.astype(np.float64))
    total = g.sum(-1, keepdims=True)
    with np.errstate(invalid='ignore', divide='ignore'):
        x = np.where(total > 0, g / np.where(total > 0, total, 1.0), 0.0)
    if np.any(total <= 0):  # all draws underflowed: put the mass on the largest concentration
        idx = np.argmax(c, axis=-1)
        onehot = np.eye(c.shape[-1])[idx]
        x = np.where(total > 0, x, onehot)
    tiny = np.finfo(c.dtype).tiny
    return _tape.tensor(np.clip(x, tiny, 1 - np.finfo(c.dtype).eps).astype(c.dtype),
                        dtype=concentration.dtype)


def binomial(count, prob, generator=None):
    c = np.asarray(count._data)
    p = np.asarray(prob._data)
    c, p = np.broadcast_arrays(c, p)
    out = np.asarray(_rng().binomial(np.round(c).astype(np.int64), np.clip(p, 0, 1)))
    return _tape.tensor(out.astype(p.dtype), dtype=prob.dtype)


def poisson(rates, generator=None):
    r = np.asarray(rates._data)
    return _tape.tensor(np.asarray(_rng().poisson(r.astype(np.float64))).astype(r.dtype),
                        dtype=rates.dtype)



def _np_gammainc(a, x):
    """Regularized lower incomplete gamma P(a, x) (series / continued fraction)."""
    import math
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    lg = np.frompyfunc(math.lgamma, 1, 1)
    for idx in np.ndindex(a.shape):
        ai, xi = float(a[idx]), float(x[idx])
        if np.isnan(ai) or np.isnan(xi) or ai < 0 or xi < 0:
            continue
        if xi == 0:
            out[idx] = 0.0 if ai > 0 else np.nan
            continue
        if ai == 0:
            out[idx] = 1.0
            continue
        if np.isinf(xi):
            out[idx] = 1.0
            continue
        logpre = -xi + ai * math.log(xi) - float(lg(ai))
        if xi < ai + 1:
            term = total = 1.0 / ai
            n = 1
            while n < 10000:
                term *= xi / (ai + n)
                total += term
                if abs(term) < abs(total) * 1e-17:
                    break
                n += 1
            out[idx] = min(1.0, total * math.exp(logpre))
        else:  # Lentz's continued fraction for Q(a, x)
            tiny = 1e-300
            b = xi + 1 - ai
            c = 1 / tiny
            d = 1 / b
            h = d
            for i in range(1, 10000):
                an = -i * (i - ai)
                b += 2
                d = an * d + b
                d = tiny if abs(d) < tiny else d
                c = b + an / c
                c = tiny if abs(c) < tiny else c
                d = 1 / d
                delta = d * c
                h *= delta
                if abs(delta - 1) < 1e-16:
                    break
            out[idx] = max(0.0, 1.0 - math.exp(logpre) * h)
    return out


class _GammaInc(_tape.autograd.Function):
    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a, x)
        dt = np.result_type(a._data, x._data)
        return _tape.tensor(_np_gammainc(a._data, x._data).astype(dt))

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        dx = _tape.exp((a - 1) * _tape.log(x) - x - _tape.lgamma(a))
        return None, grad * dx


class _NoGradInA(_tape.autograd.Function):
    """Zeros that raise PyTorch's error when a gradient reaches ``a``."""
    @staticmethod
    def forward(ctx, a):
        return _tape.zeros_like(a)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("the derivative for 'igamma: input' is not implemented.")


def gammainc(a, x):
    """``torch.special.gammainc``: differentiable in ``x`` only (as in PyTorch)."""
    out = _GammaInc.apply(a.detach(), x)
    return out + _NoGradInA.apply(a) if a.requires_grad else out


def cholesky_inverse(L, upper=False):
    """``torch.cholesky_inverse``: the inverse of ``L @ L.mT`` (``L.mT @ L`` for ``upper``).
    Differentiated, as in PyTorch, as a function of the whole matrix (no triangle
    projection of the gradient)."""
    return linalg.inv(L.mT @ L if upper else L @ L.mT)
