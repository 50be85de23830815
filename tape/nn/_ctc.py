"""``F.ctc_loss`` (and ``nn.CTCLoss`` in ``_modules_more.py``): the Connectionist
Temporal Classification loss, as PyTorch's CPU kernel computes it.

``log_probs`` (T, N, C) (or (T, C) unbatched), ``targets`` padded (N, S) or
concatenated (sum(target_lengths),), the lengths as tensors or sequences of
ints.  The forward is the log-space alpha recursion of Graves et al. (2006)
over the extended labels ``l'`` (a blank before, between and after the target's
labels), in NumPy over the batch and the extended positions at once, one step a
frame; the backward runs the beta recursion the same way and returns PyTorch's
gradient

    grad[t, n, c] = (exp(lp[t, n, c]) - sum_{s: l'_s = c} exp(alpha + beta - lp + nll)) * g[n]

for t < input_length (zero after), which is the gradient of the loss with respect
to the logits when ``log_probs`` is their ``log_softmax`` (the ``exp(lp)`` term,
whose sum over a frame is 1, vanishes through log_softmax's backward) -- the
same quirk as PyTorch's, so gradients agree with it for leaf log-probabilities
too.  An impossible alignment (target longer than the input allows) gives an
infinite loss and NaN gradients, or zeros with ``zero_infinity``.  As in
PyTorch the gradient is not differentiable again.  The recursions run in
float64 whatever the input's dtype; the loss is cast back to it.
"""
import numpy as np

from .. import _ops
from .._tape import grad_mode, note_value_use
from .._tensor import Tensor, _leaf
from ..autograd.function import Function, _OnceDifferentiable, once_differentiable

__all__ = ['ctc_loss']


def _lse3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) elementwise, -inf where all three are -inf."""
    m = np.maximum(np.maximum(a, b), c)
    ms = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.log(np.exp(a - ms) + np.exp(b - ms) + np.exp(c - ms)) + ms


def _shift(a, k):
    """``a`` (N, L) moved k places right along the last axis (k < 0: left), -inf filled."""
    out = np.full_like(a, -np.inf)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out


def _alpha(lpe, valid, skip):
    T = lpe.shape[0]
    alpha = np.full(lpe.shape, -np.inf)
    alpha[0, :, :2] = lpe[0, :, :2]
    alpha[0][~valid] = -np.inf
    for t in range(1, T):
        a = alpha[t - 1]
        a2 = np.where(skip, _shift(a, 2), -np.inf)
        row = _lse3(a, _shift(a, 1), a2) + lpe[t]
        row[~valid] = -np.inf
        alpha[t] = row
    return alpha


def _beta(lpe, valid, skip, il, tl):
    T, N, L = lpe.shape
    beta = np.full(lpe.shape, -np.inf)
    # skip_next[n, s]: position s + 2 may be reached from s (skipping a blank)
    skip_next = _shift(np.where(skip, 0.0, -np.inf), -2) == 0.0
    rows = np.arange(N)
    end = 2 * tl
    nxt = np.full((N, L), -np.inf)
    for t in range(T - 1, -1, -1):
        rec = _lse3(nxt, _shift(nxt, -1), np.where(skip_next, _shift(nxt, -2), -np.inf)) \
            + lpe[t]
        rec[~valid] = -np.inf
        init = np.full((N, L), -np.inf)
        init[rows, end] = lpe[t, rows, end]
        has = tl > 0
        init[rows[has], end[has] - 1] = lpe[t, rows[has], end[has] - 1]
        row = np.where((t == il - 1)[:, None], init, np.where((t < il - 1)[:, None], rec, -np.inf))
        beta[t] = row
        nxt = row
    return beta


def _setup(lp, tg, il, tl, blank):
    """Extended labels and their emissions: (lpe (T, N, L), ext (N, L), valid, skip)."""
    N = lp.shape[1]
    smax = int(tl.max()) if N else 0
    L = 2 * smax + 1
    ext = np.full((N, L), blank, np.int64)
    ext[:, 1::2] = tg[:, :smax]
    pos = np.arange(L)
    valid = pos[None, :] < (2 * tl + 1)[:, None]
    skip = np.zeros((N, L), bool)
    skip[:, 2:] = (ext[:, 2:] != ext[:, :-2]) & (pos[2:] % 2 == 1)
    lpe = lp[:, np.arange(N)[:, None], ext]
    return lpe, ext, valid, skip


def _nll(alpha, il, tl):
    N = alpha.shape[1]
    nll = np.empty(N)
    for n in range(N):
        t_end, e = int(il[n]) - 1, 2 * int(tl[n])
        if t_end < 0:
            nll[n] = 0.0 if tl[n] == 0 else np.inf
            continue
        a = alpha[t_end, n, e]
        b = alpha[t_end, n, e - 1] if e > 0 else -np.inf
        nll[n] = -np.logaddexp(a, b)
    return nll


class _CTCLoss(Function):
    """Per-sample negative log-likelihoods (N,) of log_probs (T, N, C)."""
    @staticmethod
    def forward(ctx, log_probs, tg, il, tl, blank, zero_infinity):
        lp = np.asarray(log_probs._data, dtype=np.float64)
        lpe, ext, valid, skip = _setup(lp, tg, il, tl, blank)
        alpha = _alpha(lpe, valid, skip) if lp.shape[0] else np.full(lpe.shape, -np.inf)
        nll = _nll(alpha, il, tl)
        dt = np.asarray(log_probs._data).dtype
        ctx.state = (lp, lpe, ext, valid, skip, alpha, nll, tg, il, tl, zero_infinity, dt)
        ctx.log_probs = log_probs
        out = np.where(np.isinf(nll), 0.0, nll) if zero_infinity else nll
        return _leaf(out.astype(dt))

    @staticmethod
    def backward(ctx, g):
        grad = _CTCLoss._grad(ctx, g)
        # the gradient depends on log_probs too: differentiating it raises (as
        # PyTorch's _ctc_loss_backward), where once_differentiable alone would
        # see only g and give a second derivative of 0
        deps = [t for t in (g, ctx.log_probs) if isinstance(t, Tensor) and t._rg]
        if grad_mode.enabled and deps:
            grad = _OnceDifferentiable.apply(grad, *deps)
        return grad, None, None, None, None, None

    @staticmethod
    @once_differentiable
    def _grad(ctx, g):
        lp, lpe, ext, valid, skip, alpha, nll, tg, il, tl, zero_infinity, dt = ctx.state
        T, N, C = lp.shape
        gd = np.asarray(g._data, dtype=np.float64).reshape(N)
        beta = _beta(lpe, valid, skip, il, tl)
        with np.errstate(invalid='ignore', over='ignore'):
            q = np.exp(alpha + beta - lpe + nll[None, :, None])
        q[:, ~valid] = 0.0
        # sum q over the extended positions of each label: one bincount over (t, n, c)
        flat = (np.arange(T)[:, None, None] * N + np.arange(N)[None, :, None]) * C + ext[None]
        post = np.bincount(flat.ravel(), weights=q.ravel(), minlength=T * N * C)
        grad = np.exp(lp) - post.reshape(T, N, C)
        bad = np.isinf(nll)
        if not zero_infinity:
            grad[:, bad, :] = np.nan                    # as PyTorch: NaN where impossible
        grad *= gd[None, :, None]
        grad[np.arange(T)[:, None] >= il[None, :]] = 0.0
        if zero_infinity:
            grad[:, bad, :] = 0.0
        return _leaf(grad.astype(dt))


def _lengths(x, name):
    if isinstance(x, Tensor):
        a = np.asarray(x._data)
        if a.dtype.kind not in 'iu':
            raise RuntimeError(f'{name} must be integral')
    else:
        a = np.asarray(x)
        if a.dtype.kind not in 'iu':
            raise RuntimeError(f'{name} must be integral')
    return a.astype(np.int64).reshape(-1)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
             reduction='mean', zero_infinity=False):
    """``torch.nn.functional.ctc_loss``."""
    from .functional import _checked_reduction
    reduction = _checked_reduction(None, None, reduction)
    lp = log_probs
    ld = np.asarray(lp._data)
    if ld.dtype.kind != 'f':
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for '
                                  f'\'{_TYPE_NAMES.get(ld.dtype.name, ld.dtype.name)}\'')
    batched = ld.ndim == 3
    if ld.ndim == 2:
        lp = lp.unsqueeze(1)
        ld = ld[:, None, :]
    elif ld.ndim != 3:
        raise RuntimeError(f'Expected 3-dimensional tensor, but got {ld.ndim}-dimensional '
                           f"tensor for argument #1 'log_probs' (while checking arguments "
                           f'for ctc_loss_allocate_outputs)')
    T, N, C = ld.shape
    il = _lengths(input_lengths, 'input_lengths')
    tl = _lengths(target_lengths, 'target_lengths')
    tgd = np.asarray(targets._data if isinstance(targets, Tensor) else targets)
    if isinstance(targets, Tensor) or isinstance(input_lengths, Tensor) \
            or isinstance(target_lengths, Tensor):
        note_value_use('ctc_loss')          # (targets and lengths are baked in)
    if not 0 <= blank < C:
        raise RuntimeError('blank must be in label range')
    if il.shape[0] != N:
        raise RuntimeError('input_lengths must be of size batch_size')
    if tl.shape[0] != N:
        raise RuntimeError('target_lengths must be of size batch_size')
    ctx = ' (while checking arguments for ctc_loss_allocate_outputs)'
    for n in range(N):
        if tl[n] < 0:
            raise RuntimeError(f'Expected target_lengths to have value at least 0, but got '
                               f'value {tl[n]}{ctx}')
        if il[n] < 0:
            raise RuntimeError(f'Expected input_lengths to have value at least 0, but got '
                               f'value {il[n]}{ctx}')
        if il[n] > T:
            raise RuntimeError(f'Expected input_lengths to have value at most {T}, but got '
                               f'value {il[n]}{ctx}')
    tgd = tgd.astype(np.int64)
    if tgd.ndim == 1 and batched or (not batched and tgd.ndim == 1):
        total = int(tl.sum())
        if tgd.shape[0] != total:
            raise RuntimeError(f'Expected tensor to have size {total} at dimension 0, but got '
                               f'size {tgd.shape[0]} for argument #2 \'targets\'{ctx}')
        smax = int(tl.max()) if N else 0
        tg = np.zeros((N, smax), np.int64)
        off = 0
        for n in range(N):
            tg[n, :tl[n]] = tgd[off:off + tl[n]]
            off += tl[n]
    else:
        if tgd.ndim != 2:
            raise RuntimeError(f'Expected tensor to have 1 or 2 dimensions for argument #2 '
                               f"'targets', but got {tgd.ndim}{ctx}")
        if tgd.shape[0] != N:
            raise RuntimeError(f'Expected tensor to have size {N} at dimension 0, but got '
                               f'size {tgd.shape[0]} for argument #2 \'targets\'{ctx}')
        smax = int(tl.max()) if N else 0
        if tgd.shape[1] < smax:
            raise RuntimeError(f'Expected tensor to have size at least {smax} at dimension 1, '
                               f'but got size {tgd.shape[1]} for argument #2 \'targets\'{ctx}')
        tg = tgd[:, :smax]
    for n in range(N):
        row = tg[n, :tl[n]]
        if row.size and (row.min() < 0 or row.max() >= C):
            raise IndexError(f'ctc_loss: target index out of range for {C} classes '
                             f'(targets of sample {n}: {row.tolist()})')
    loss = _CTCLoss.apply(lp, tg, il, tl, int(blank), bool(zero_infinity))
    if reduction == 'mean':
        denom = _leaf(np.maximum(tl, 1).astype(ld.dtype))
        return _ops.mean(_ops.div(loss, denom)) if N else _ops.mean(loss)
    if reduction == 'sum':
        return _ops.sum_(loss)
    return loss if batched else loss.squeeze(0)


_TYPE_NAMES = {'int64': 'Long', 'int32': 'Int', 'int16': 'Short', 'int8': 'Char',
               'uint8': 'Byte', 'bool': 'Bool'}
