"""One-pass optimizer updates (tape/optim): Adam's and SGD's per-element
arithmetic in one loop over the parameter, its gradient and its state.

NumPy spends a pass and a call per operation on them: Adam's update is eleven
(three for the lerp of ``m``, two for ``v``, five for the denominator and the
step, one to apply it), each ~1 us of call on a small parameter and a full
sweep of memory on a large one.  These loops do the same float operations in
the same order, in the arrays' dtype, with the Python scalars rounded to that
dtype first as NumPy does (NEP 50), so the results are equal bit for bit
(without ``fastmath`` LLVM neither reorders nor contracts into FMAs).

Flat C-contiguous arrays of one dtype.  Compiled on first use (``cache=True``),
never at import.
"""
import math

from numba import njit


@njit(cache=True, error_model='numpy')
def adam_update(d, g, m, v, sc, lerp_low):
    """One Adam step in place, as tape/optim/adam.py's NumPy steps, with
    ``sc`` = (w, beta2, 1 - beta2, bc2_sqrt, eps, -step_size) in d's dtype:

        m = lerp(m, g, w)     (PyTorch's CPU form: m + w (g - m) for |w| < 0.5,
                               else g - (1 - w) (g - m); ``w`` is the factor used)
        v = v * beta2 + (g * g) * (1 - beta2)
        d = d + (m / (sqrt(v) / bc2_sqrt + eps)) * -step_size
    """
    w = sc[0]
    beta2 = sc[1]
    one_minus_beta2 = sc[2]
    bc2_sqrt = sc[3]
    eps = sc[4]
    neg_step_size = sc[5]
    if lerp_low:
        for i in range(d.shape[0]):
            gi = g[i]
            mi = m[i]
            mi = mi + (gi - mi) * w
            m[i] = mi
            vi = v[i] * beta2 + (gi * gi) * one_minus_beta2
            v[i] = vi
            d[i] = d[i] + (mi / (math.sqrt(vi) / bc2_sqrt + eps)) * neg_step_size
    else:
        for i in range(d.shape[0]):
            gi = g[i]
            mi = m[i]
            mi = gi - (gi - mi) * w
            m[i] = mi
            vi = v[i] * beta2 + (gi * gi) * one_minus_beta2
            v[i] = vi
            d[i] = d[i] + (mi / (math.sqrt(vi) / bc2_sqrt + eps)) * neg_step_size


@njit(cache=True, error_model='numpy')
def sgd_update(d, g, lr):
    """d -= lr * g (the product rounded, then the difference: NumPy's two steps)."""
    for i in range(d.shape[0]):
        d[i] = d[i] - lr * g[i]


@njit(cache=True, error_model='numpy')
def sgd_momentum_update(d, g, b, sc, nesterov):
    """SGD with momentum in place, as tape/optim/sgd.py's NumPy steps, with
    ``sc`` = (momentum, 1 - dampening, lr) in d's dtype:

        b = b * momentum + (1 - dampening) * g
        d = d - lr * (g + momentum * b if nesterov else b)
    """
    momentum = sc[0]
    keep = sc[1]
    lr = sc[2]
    if nesterov:
        for i in range(d.shape[0]):
            gi = g[i]
            bi = b[i] * momentum + keep * gi
            b[i] = bi
            d[i] = d[i] - lr * (gi + momentum * bi)
    else:
        for i in range(d.shape[0]):
            bi = b[i] * momentum + keep * g[i]
            b[i] = bi
            d[i] = d[i] - lr * bi
