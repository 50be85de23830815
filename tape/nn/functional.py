"""``tape.nn.functional``: activations and losses, as in ``torch.nn.functional``.

All are composites of primitives except ``binary_cross_entropy`` (one rule, for
PyTorch's clamped logs) and the activations that are rules of their own.
``softmax``/``log_softmax`` shift by the (constant) row maximum, so large
inputs neither overflow nor lose their gradient.

>>> import tape
>>> import tape.nn.functional as F
>>> F.softmax(tape.tensor([0.0, 0.0]), dim=0)
tensor([0.5000, 0.5000])
"""
import numpy as np

from .. import _elementwise as _ew
from .. import _ops
from .. import _reductions as _red
from .._linalg import matmul
from .._rules import OP
from .._tape import grad_mode
from .._tensor import Tensor, _leaf, _norm_dim

# activations that are ops of their own
relu = _ops.relu
sigmoid = _ops.sigmoid
tanh = _ops.tanh
leaky_relu = _ew.leaky_relu
elu = _ew.elu
gelu = _ew.gelu
silu = _ew.silu
softplus = _ew.softplus
hardtanh = _ew.hardtanh
relu6 = _ew.relu6

__all__ = ['softmax', 'log_softmax', 'cross_entropy', 'nll_loss', 'mse_loss', 'l1_loss',
           'binary_cross_entropy', 'binary_cross_entropy_with_logits', 'linear', 'dropout',
           'relu', 'sigmoid', 'tanh', 'leaky_relu', 'elu', 'gelu', 'silu', 'softplus',
           'hardtanh', 'relu6', 'logsigmoid', 'normalize']


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like)


def _softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1        # PyTorch's legacy implicit choice


def _float_input(a, dtype):
    a = _t(a)
    if dtype is not None:
        a = _ops.to(a, dtype)
    elif np.asarray(a._data).dtype.kind not in 'fc':
        a = _ops.to(a, np.float32)
    return a


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    a = _float_input(input, dtype)
    nd = np.ndim(a._data)
    dim = _softmax_dim(nd) if dim is None else _norm_dim(int(dim), nd, 'softmax')
    with np.errstate(all='ignore'):
        return _ops.exp(_shifted_log_softmax(a, dim))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    a = _float_input(input, dtype)
    nd = np.ndim(a._data)
    dim = _softmax_dim(nd) if dim is None else _norm_dim(int(dim), nd, 'log_softmax')
    with np.errstate(all='ignore'):
        return _shifted_log_softmax(a, dim)


def _shifted_log_softmax(a, dim):
    """``a - logsumexp(a)``, and where that loses precision, shifted once more.

    The result's small part is lost to the rounding of ``L = logsumexp(a)``
    when ``|L|`` is large (float32 [1e8, 1e8] would give softmax [1, 1]).
    ``s = a - L`` is then within that rounding error of the answer, so
    ``s - logsumexp(s)`` is exact: the shift-invariance PyTorch gets by
    subtracting the row maximum.  Both shifts are records, not constants, so
    tape.jit replays either form (each is right for any input; the replay
    computes in float64).  Up to ``|L| = 16`` the single pass is within 8 ulps
    of 1 and costs half as much.  The second form's gradient through the first
    shift is ``sum(grad_s)``, which is 0 up to rounding."""
    lse = _red.logsumexp(a, dim, True)
    s = _ops.sub(a, lse)
    if not (np.abs(lse._data) > 16.0).any():      # (NaN, where the result is NaN anyway)
        return s
    return _ops.sub(s, _red.logsumexp(s, dim, True))


def logsigmoid(input):  # noqa: A002
    return _ops.neg(_ew.softplus(_ops.neg(_t(input)), 1.0, float('inf')))


def _reduce(loss, reduction, opname):
    if reduction == 'mean':
        return _ops.mean(loss)
    if reduction == 'sum':
        return _ops.sum_(loss)
    if reduction == 'none':
        return loss
    raise ValueError(f'{opname}: {reduction} is not a valid value for reduction')


def _class_shapes(inp, target, opname):
    """Check (N, C, d1...) against (N, d1...); return (C, class dim)."""
    si, st = np.shape(inp._data), np.shape(target._data)
    if len(si) == 0:
        raise ValueError(f'{opname}: input must have at least 1 dimension, got 0-D')
    cdim = 0 if len(si) == 1 else 1
    want = si[:cdim] + si[cdim + 1:]
    if tuple(st) != tuple(want):
        if len(si) >= 2 and len(st) >= 1 and st[0] != si[0]:
            raise ValueError(f'{opname}: Expected input batch_size ({si[0]}) to match target '
                             f'batch_size ({st[0]}) (input {tuple(si)}, target {tuple(st)}).')
        raise RuntimeError(f'{opname}: expected target of shape {tuple(want)} for input of '
                           f'shape {tuple(si)}, got {tuple(st)}')
    return si[cdim], cdim


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction='mean'):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``."""
    inp = _t(input)
    tgt = np.asarray(target._data if isinstance(target, Tensor) else target)
    if tgt.dtype.kind not in 'iu':
        raise RuntimeError(f'nll_loss: expected target of an integer dtype (class indices), got '
                           f'{tgt.dtype}')
    tgt = tgt.astype(np.int64)
    ncls, cdim = _class_shapes(inp, _leaf(tgt), 'nll_loss')
    ignore = tgt == ignore_index
    bad = (~ignore) & ((tgt < 0) | (tgt >= ncls))
    if bad.any():
        raise IndexError(f'nll_loss: Target {tgt[bad].reshape(-1)[0]} is out of bounds '
                         f'(input of shape {tuple(np.shape(inp._data))}, {ncls} classes).')
    safe = np.where(ignore, 0, tgt)
    d = np.asarray(inp._data)
    pos = np.take_along_axis(_red._flat_index(d.shape), np.expand_dims(safe, cdim),
                             axis=cdim).squeeze(cdim) if d.ndim > 1 else safe
    picked = _red.take_as('index', inp, d.reshape(-1)[pos], pos)
    if weight is not None:
        wd = np.asarray(weight._data if isinstance(weight, Tensor) else weight)
        if wd.shape != (ncls,):
            raise RuntimeError(f'nll_loss: weight tensor should be defined either for all '
                               f'{ncls} classes or no classes but got weight tensor of shape: '
                               f'{list(wd.shape)}')
        w = wd[safe].astype(d.dtype)
    else:
        w = np.ones(safe.shape, d.dtype)
    w = np.where(ignore, 0, w).astype(d.dtype)
    loss = _ops.mul(picked, _leaf(-w))
    if reduction == 'mean':
        if ignore.all():
            return _nan_mean(_ops.sum_(loss))
        with np.errstate(all='ignore'):
            return _ops.div(_ops.sum_(loss), float(w.sum()))
    return _reduce(loss, reduction, 'nll_loss')


def _nan_mean(total):
    """The mean over no counted targets (every one ignored): NaN, as in PyTorch,
    whose gradient is 0 rather than the NaN of ``total / 0`` (a class weight of
    0 on counted targets still gives NaN, as PyTorch's does)."""
    return _ops.add(_ops.mul(total, 0.0), float('nan'))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction='mean', label_smoothing=0.0):
    """``nll_loss(log_softmax(input))`` for class indices; probabilities (a float
    ``target`` shaped like ``input``) and ``label_smoothing`` as in PyTorch."""
    inp = _t(input)
    si = np.shape(inp._data)
    cdim = 0 if len(si) == 1 else 1
    logp = log_softmax(inp, cdim)
    tgt = target if isinstance(target, Tensor) else _ops._const(target)
    td = np.asarray(tgt._data)
    ncls = si[cdim] if si else 1
    wshape = tuple(ncls if i == cdim else 1 for i in range(len(si)))
    wt = None
    if weight is not None:
        wt = _ops.reshape(_t(weight), wshape)
    if td.dtype.kind == 'f':                    # class probabilities
        if td.shape != si:
            raise RuntimeError(f'cross_entropy: expected probability target of shape {si}, '
                               f'got {td.shape}')
        if label_smoothing:
            tgt = _ops.add(_ops.mul(tgt, 1.0 - label_smoothing), label_smoothing / ncls)
        prod = _ops.mul(logp, tgt)
        if wt is not None:
            prod = _ops.mul(prod, wt)
        loss = _ops.neg(_ops.sum_(prod, cdim))
        if reduction == 'mean':
            n = loss._data.size
            return _ops.div(_ops.sum_(loss), float(n)) if n else _ops.sum_(loss)
        return _reduce(loss, reduction, 'cross_entropy')
    nll = nll_loss(logp, tgt, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    ignore = td == ignore_index
    terms = logp if wt is None else _ops.mul(logp, wt)
    smooth = _ops.neg(_ops.sum_(terms, cdim))
    smooth = _ops.mul(smooth, _leaf((~ignore).astype(np.asarray(logp._data).dtype)))
    if reduction == 'mean' and ignore.all():
        smooth = _nan_mean(_ops.sum_(smooth))
    elif reduction == 'mean':
        if weight is not None:
            wd = np.asarray(weight._data if isinstance(weight, Tensor) else weight)
            denom = float(wd[np.where(ignore, 0, td)][~ignore].sum())
        else:
            denom = float((~ignore).sum())
        with np.errstate(all='ignore'):         # (class weights of 0: NaN, as in PyTorch)
            smooth = _ops.div(_ops.sum_(smooth), denom)
    else:
        smooth = _reduce(smooth, reduction, 'cross_entropy')
    return _ops.add(_ops.mul(nll, 1.0 - label_smoothing),
                    _ops.mul(smooth, label_smoothing / ncls))


def _same_shape(inp, tgt, opname):
    si, st = np.shape(inp._data), np.shape(tgt._data)
    if si != st:
        try:
            np.broadcast_shapes(si, st)
        except ValueError:
            raise RuntimeError(f'{opname}: The size of tensor a ({list(si)}) must match the size '
                               f'of tensor b ({list(st)}): input {tuple(si)}, target '
                               f'{tuple(st)}') from None
        import warnings
        warnings.warn(f'Using a target size ({st}) that is different to the input size ({si}). '
                      'This will likely lead to incorrect results due to broadcasting. Please '
                      'ensure they have the same size.', UserWarning, stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction='mean'):  # noqa: A002
    inp, tgt = _t(input), _t(target, input)
    _same_shape(inp, tgt, 'mse_loss')
    diff = _ops.sub(inp, tgt)
    return _reduce(_ops.mul(diff, diff), reduction, 'mse_loss')


def l1_loss(input, target, size_average=None, reduce=None, reduction='mean'):  # noqa: A002
    inp, tgt = _t(input), _t(target, input)
    _same_shape(inp, tgt, 'l1_loss')
    return _reduce(_ops.abs_(_ops.sub(inp, tgt)), reduction, 'l1_loss')


def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction='mean'):
    inp, tgt = _t(input), _t(target, input)
    si, st = np.shape(inp._data), np.shape(tgt._data)
    if si != st:
        raise ValueError(f'Using a target size ({st}) that is different to the input size ({si}) '
                         'is deprecated. Please ensure they have the same size.')
    d, td = np.asarray(inp._data), np.asarray(tgt._data)
    if np.any((d < 0) | (d > 1)):
        raise RuntimeError('binary_cross_entropy: all elements of input should be between 0 '
                           f'and 1 (input of shape {tuple(si)})')
    with np.errstate(all='ignore'):
        out = -(td * np.maximum(np.log(d), -100) + (1 - td) * np.maximum(np.log1p(-d), -100))
    out = np.asarray(out, dtype=d.dtype)
    if (inp._rg or tgt._rg) and grad_mode.enabled:
        loss = _ops._record_binary(OP['binary_cross_entropy'], inp, tgt, out)
    else:
        loss = _leaf(out)
    if weight is not None:
        loss = _ops.mul(loss, _t(weight, inp))
    return _reduce(loss, reduction, 'binary_cross_entropy')


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction='mean', pos_weight=None):
    """``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)``: stable for any x."""
    inp, tgt = _t(input), _t(target, input)
    si, st = np.shape(inp._data), np.shape(tgt._data)
    if si != st:
        raise ValueError(f'Target size ({st}) must be the same as input size ({si})')
    sp = _ew.softplus(_ops.neg(inp), 1.0, float('inf'))
    if pos_weight is not None:
        lw = _ops.add(_ops.mul(_ops.sub(_t(pos_weight, inp), 1.0), tgt), 1.0)
        sp = _ops.mul(sp, lw)
    loss = _ops.add(_ops.mul(_ops.rsub(tgt, 1.0), inp), sp)
    if weight is not None:
        loss = _ops.mul(loss, _t(weight, inp))
    return _reduce(loss, reduction, 'binary_cross_entropy_with_logits')


def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``."""
    inp, w = _t(input), _t(weight, input)
    if np.ndim(w._data) == 1:
        out = matmul(inp, w)
    else:
        si, sw = np.shape(inp._data), np.shape(w._data)
        if not si or si[-1] != sw[-1]:
            raise RuntimeError(f'linear: mat1 and mat2 shapes cannot be multiplied '
                               f'({int(np.prod(si[:-1], dtype=np.int64)) if si else 1}x'
                               f'{si[-1] if si else 1} and {sw[1]}x{sw[0]}); input '
                               f'{tuple(si)}, weight {tuple(sw)}')
        out = matmul(inp, _ops.t(w))
    if bias is not None:
        out = _ops.add(out, _t(bias, input))
    return out


def _rng_of(generator):
    if generator is None:
        import tape
        return tape._rng[0]
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    rng = getattr(generator, '_rng', None) or getattr(generator, 'rng', None)
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(f'dropout: generator must be a tape.Generator, a numpy Generator or an '
                    f'int seed, not {type(generator).__name__}')


def dropout(input, p=0.5, training=True, inplace=False, generator=None):  # noqa: A002
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p).

    ``generator`` (a ``tape.Generator``, a NumPy ``Generator`` or an int seed)
    makes the mask reproducible; without it the global generator seeded by
    ``tape.manual_seed`` is used."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f'dropout probability has to be between 0 and 1, but got {p}')
    a = _t(input)
    if not training or p == 0.0:
        return a
    d = np.asarray(a._data)
    if p == 1.0:
        return _ops.mul(a, _leaf(np.zeros(d.shape, d.dtype)))
    keep = _rng_of(generator).random(d.shape) >= p
    return _ops.mul(a, _leaf((keep / (1.0 - p)).astype(d.dtype)))


def normalize(input, p=2.0, dim=1, eps=1e-12):  # noqa: A002
    a = _t(input)
    n = _red.vector_norm(a, p, dim, True)
    return _ops.div(a, _ew.clamp(n, min=eps))
