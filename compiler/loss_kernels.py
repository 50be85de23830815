"""Numba kernels behind ``F.cross_entropy`` and ``F.nll_loss`` with
class-index targets (``tape/nn/_cross_entropy.py``): the target check, the two
halves of cross_entropy's forward and its backward, nll_loss's forward and
backward, each one call where NumPy took a dozen (each microseconds on the
small batches a training step feeds a loss).

The logits are viewed as (n, c, d): samples, classes, positions (d = 1 for a
(N, C) input); sample i = a * d + b of the flat targets is the column
``x[a, :, b]``.  The forward is ``shift`` (each column's maximum subtracted, in
the input's dtype, and each target's shifted logit picked), NumPy's exp in
place (vectorized in float32 as well as float64: several times faster than a
Numba loop, which calls libm per element, there being no SVML here), then
``reduce``.  Sums, logs and weights are float64; the arrays the caller keeps
have the input's dtype.  Nothing here compiles at import: the caller imports
this module inside its functions.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def ce_targets_ok(t, ncls, ignore_index):
    """True when every target is a class (0 <= t < ncls) or ``ignore_index``:
    cross_entropy can take its one-record path (else the composite raises)."""
    for i in range(t.shape[0]):
        v = t[i]
        if (v < 0 or v >= ncls) and v != ignore_index:
            return False
    return True


@njit(cache=True, error_model='numpy')
def _row_max(x, m):
    """The largest of the 1-d ``x``, with eight running maxima (which LLVM keeps
    in one vector register) so the loop is not one chain of dependent compares.
    NaN is never taken: it reaches the sum of exps, and through it the loss, by
    itself.  ``m``: scratch of 8, x's dtype."""
    c = x.shape[0]
    c8 = c - c % 8
    m[:] = -np.inf
    for j in range(0, c8, 8):
        for k in range(8):
            v = x[j + k]
            m[k] = v if v > m[k] else m[k]
    r = -np.inf
    for j in range(c8, c):
        r = x[j] if x[j] > r else r
    for k in range(8):
        r = m[k] if m[k] > r else r
    return r


@njit(cache=True, error_model='numpy')
def _row_sum(e):
    """The float64 sum of the 1-d ``e``, four partial sums at a time."""
    c = e.shape[0]
    c4 = c - c % 4
    a0 = a1 = a2 = a3 = 0.0
    for j in range(0, c4, 4):
        a0 += e[j]
        a1 += e[j + 1]
        a2 += e[j + 2]
        a3 += e[j + 3]
    for j in range(c4, c):
        a0 += e[j]
    return (a0 + a1) + (a2 + a3)


@njit(cache=True, error_model='numpy')
def ce_shift(x, t, ignore_index, e, rows):
    """e = x - (its column's maximum), in x's dtype; rows[0, i] = e at sample i's
    target (0 where ignored).  x, e (n, c, d); t (n * d,); rows (3, n * d)."""
    n, c, d = x.shape
    picked = rows[0]
    if d == 1:
        x2 = x.reshape(n, c)            # (rows contiguous: the loops vectorize)
        e2 = e.reshape(n, c)
        scratch = np.empty(8, x.dtype)
        for a in range(n):
            xa = x2[a]
            ea = e2[a]
            m = _row_max(xa, scratch)
            for j in range(c):
                ea[j] = xa[j] - m
    else:
        # a plane (c, d) at a time: the inner loops run along d, elementwise
        m = np.empty(d, x.dtype)
        for a in range(n):
            m[:] = -np.inf
            for j in range(c):
                for b in range(d):
                    v = x[a, j, b]
                    m[b] = v if v > m[b] else m[b]
            for j in range(c):
                for b in range(d):
                    e[a, j, b] = x[a, j, b] - m[b]
    for i in range(n * d):
        ti = t[i]
        a = i // d
        picked[i] = 0.0 if ti == ignore_index else e[a, ti, i - a * d]


@njit(cache=True, error_model='numpy')
def ce_reduce(e, t, w, ignore_index, reduction, rows, loss):
    """After e = exp(x - max), with rows[0] from ce_shift: s[i] = rows[1, i] the sum of sample i's column of e, its loss
    (log s[i] - picked[i]) * w[t[i]] (w of size 0: weights of 1; 0 where ignored,
    whatever the logits), scale[i] its weight (over the weights' total for
    reduction 2, 'mean'; 0 where ignored) in rows[2] and, for reduction 0 ('none'),
    loss[i].  Returns the losses' sum (1) or mean (2), else their sum.

    Every sample ignored gives a mean of 0 / 0 = NaN with scale 0, as in
    PyTorch; a weights' total of 0 otherwise a scale of inf or NaN, as there."""
    n, c, d = e.shape
    picked, s, scale = rows[0], rows[1], rows[2]
    if d == 1:
        e2 = e.reshape(n, c)
        for a in range(n):
            s[a] = _row_sum(e2[a])
    else:
        for a in range(n):
            sa = s[a * d:(a + 1) * d]
            sa[:] = 0.0
            for j in range(c):
                for b in range(d):
                    sa[b] += e[a, j, b]
    total = 0.0
    acc = 0.0
    counted = 0
    for i in range(n * d):
        ti = t[i]
        if ti == ignore_index:
            scale[i] = 0.0
            if reduction == 0:
                loss[i] = 0.0
            continue
        wi = 1.0 if w.shape[0] == 0 else np.float64(w[ti])
        li = (np.log(s[i]) - picked[i]) * wi
        scale[i] = wi
        total += wi
        acc += li
        counted += 1
        if reduction == 0:
            loss[i] = li
    if reduction != 2:
        return acc
    if counted > 0:
        for i in range(n * d):
            scale[i] = scale[i] / total
    return acc / total


@njit(cache=True, error_model='numpy')
def ce_backward(e, rows, t, ignore_index, g, gx):
    """The input's gradient gx (n, c, d) from the output's g (one value, or one
    per sample for 'none'): gx = e * (coef / s) - onehot(t) * coef with
    coef = g * scale (0 for an ignored sample, whatever g; its gradient is then
    0, or NaN where its logits hold NaN or inf, as in PyTorch).  s = rows[1] and
    scale = rows[2] from ce_reduce."""
    n, c, d = e.shape
    s, scale = rows[1], rows[2]
    one = g.shape[0] == 1
    coef = np.empty(d)
    r = np.empty(d)
    e2 = e.reshape(n, c * d)                # rows contiguous: d == 1's loop vectorizes
    g2 = gx.reshape(n, c * d)
    for a in range(n):
        for b in range(d):
            i = a * d + b
            coef[b] = 0.0 if t[i] == ignore_index else \
                scale[i] * np.float64(g[0] if one else g[i])
            r[b] = coef[b] / s[i]
        if d == 1:
            ea = e2[a]
            ga = g2[a]
            for j in range(c):
                ga[j] = ea[j] * r[0]
        else:
            for j in range(c):
                for b in range(d):
                    gx[a, j, b] = e[a, j, b] * r[b]
        for b in range(d):
            ti = t[a * d + b]
            if ti != ignore_index:
                gx[a, ti, b] = e[a, ti, b] * r[b] - coef[b]


@njit(cache=True, error_model='numpy')
def nll_reduce(x, t, w, ignore_index, reduction, scale, loss):
    """nll_loss of log-probabilities x (n, c, d): sample i's loss is
    -x[a, t[i], b] * w[t[i]] (w of size 0: weights of 1; 0 where ignored,
    whatever x holds); scale[i] its weight (over the weights' total for
    reduction 2, 'mean'; 0 where ignored) and, for reduction 0 ('none'),
    loss[i].  Returns the losses' sum (1) or mean (2), else their sum.  As
    ce_reduce: every sample ignored gives 0 / 0 = NaN with scales of 0."""
    n, c, d = x.shape
    total = 0.0
    acc = 0.0
    counted = 0
    for a in range(n):
        for b in range(d):
            i = a * d + b
            ti = t[i]
            if ti == ignore_index:
                scale[i] = 0.0
                if reduction == 0:
                    loss[i] = 0.0
                continue
            wi = 1.0 if w.shape[0] == 0 else np.float64(w[ti])
            li = -np.float64(x[a, ti, b]) * wi
            scale[i] = wi
            total += wi
            acc += li
            counted += 1
            if reduction == 0:
                loss[i] = li
    if reduction != 2:
        return acc
    if counted > 0:
        for i in range(n * d):
            if t[i] != ignore_index:
                scale[i] = scale[i] / total
    return acc / total


@njit(cache=True, error_model='numpy')
def nll_backward(t, ignore_index, scale, g, gx):
    """The input's gradient gx (n, c, d), zeros on entry, from the output's g
    (one value, or one per sample for 'none'): -g * scale[i] at each counted
    sample's target, nothing elsewhere (an ignored sample's gradient is 0)."""
    n, c, d = gx.shape
    one = g.shape[0] == 1
    for a in range(n):
        for b in range(d):
            i = a * d + b
            ti = t[i]
            if ti != ignore_index:
                gx[a, ti, b] = -(np.float64(g[0] if one else g[i]) * scale[i])
