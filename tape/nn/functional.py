"""``tape.nn.functional``: activations and losses, as in ``torch.nn.functional``.

All are composites of primitives except ``binary_cross_entropy`` (one rule, for
PyTorch's clamped logs) and the activations that are rules of their own.
``softmax``/``log_softmax`` shift by the (constant) row maximum, so large
inputs neither overflow nor lose their gradient.  ``pad``, ``embedding``, the
dropout variants and the normalizations (``batch_norm``, ``layer_norm``,
``group_norm``, ``instance_norm``, ``rms_norm``) are composites too; where one
bakes a tensor's values into its records (a target's masks, ``embedding``'s
indices) it says so, so that ``tape.jit`` runs it eagerly instead of replaying
stale values.

>>> import tape
>>> import tape.nn.functional as F
>>> F.softmax(tape.tensor([0.0, 0.0]), dim=0)
tensor([0.5000, 0.5000])
"""
import math as _math
import warnings as _warnings

import math

import numpy as np

from .. import _elementwise as _ew
from .. import _indexing as _ix
from .. import _ops
from .. import _reductions as _red
from .. import _shapes as _sh
from .._composite_nodes import name_result, node_named, through_transpose
from .._linalg import matmul
from .._rules import OP
from .._tape import grad_mode, note_value_use
from .._tensor import Tensor, _bump_version, _leaf, _norm_dim

# activations that are ops of their own
def relu(input, inplace=False):  # noqa: A002
    """``max(input, 0)``; ``inplace`` writes the result into ``input``."""
    return _maybe_inplace(_t(input), _ops.relu, inplace)
sigmoid = _ops.sigmoid
tanh = _ops.tanh
def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    return _maybe_inplace(_t(input), _ew.leaky_relu, inplace, negative_slope)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    return _maybe_inplace(_t(input), _ew.elu, inplace, alpha)
gelu = _ew.gelu
silu = _ew.silu
softplus = _ew.softplus
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    if min_val > max_val:
        raise ValueError(f'hardtanh: min_val cannot be greater than max_val (got min_val='
                         f'{min_val}, max_val={max_val})')
    return _maybe_inplace(_t(input), _ew.hardtanh, inplace, min_val, max_val)


def relu6(input, inplace=False):  # noqa: A002
    return _maybe_inplace(_t(input), _ew.relu6, inplace)

__all__ = ['softmax', 'log_softmax', 'cross_entropy', 'nll_loss', 'mse_loss', 'l1_loss',
           'binary_cross_entropy', 'binary_cross_entropy_with_logits', 'linear', 'dropout',
           'relu', 'sigmoid', 'tanh', 'leaky_relu', 'elu', 'gelu', 'silu', 'softplus',
           'hardtanh', 'relu6', 'logsigmoid', 'normalize']


def _t(x, like=None):
    return x if isinstance(x, Tensor) else _ops._const(x, like)


def _softmax_dim(ndim, name, stacklevel):
    """PyTorch's legacy implicit dim, with its deprecation warning."""
    _warnings.warn(f'Implicit dimension choice for {name} has been deprecated. Change the '
                   'call to include dim=X as an argument.', UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _float_input(a, dtype, kernel='softmax'):
    a = _t(a)
    if dtype is not None:
        a = _ops.to(a, dtype)
    elif np.asarray(a._data).dtype.kind not in 'fc':
        _not_for(a, 'iub', f'{kernel}_kernel_impl')     # PyTorch has no integer softmax
    return a


def _not_for(a, kinds, kernel):
    """PyTorch's NotImplementedError for a kernel that has no ``a``'s dtype."""
    dt = np.asarray(a._data).dtype
    if dt.kind in kinds:
        name = _ops._TORCH_DTYPE_NAMES.get(dt.str[1:], str(dt))
        raise NotImplementedError(f'"{kernel}" not implemented for \'{name}\'')


def _no_bool_sub(*ts):
    """PyTorch refuses ``-`` on bool tensors."""
    for t in ts:
        if np.asarray(t._data).dtype.kind == 'b':
            raise RuntimeError('Subtraction, the `-` operator, with a bool tensor is not '
                               'supported. If you are trying to invert a mask, use the `~` or '
                               '`logical_not()` operator instead.')


def _no_int_result(*ts):
    """PyTorch's error where a float loss would be written into an integer result."""
    for t in ts:
        dt = np.asarray(t._data).dtype
        if dt.kind in 'iub':
            name = _ops._TORCH_DTYPE_NAMES.get(dt.str[1:], str(dt))
            raise RuntimeError(f"result type Float can't be cast to the desired output type "
                               f"{name}")


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    if type(dim) is int and dtype is None and type(input) is Tensor:
        # the common call (a float32/float64 tensor, an int dim in range): straight
        # to the one-record form, without the general path's normalizations
        d = input._data
        if type(d) is np.ndarray and d.dtype in _SM_DTYPES:
            nd = d.ndim
            if nd and -nd <= dim < nd and d.size and getattr(
                    _TRACING or _tracing(), 'proxies', None) is None:
                return _sm.softmax(input, dim + nd if dim < 0 else dim)
    a = _float_input(input, dtype)
    nd = np.ndim(a._data)
    dim = _softmax_dim(nd, 'softmax', _stacklevel) if dim is None else \
        _norm_dim(dim, nd, 'softmax')
    if _one_node(a):
        return _sm.softmax(a, dim)
    with np.errstate(all='ignore'):
        return _ops.exp(_shifted_log_softmax(a, dim))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    if type(dim) is int and dtype is None and type(input) is Tensor:
        d = input._data                 # (softmax's shortcut)
        if type(d) is np.ndarray and d.dtype in _SM_DTYPES:
            nd = d.ndim
            if nd and -nd <= dim < nd and d.size and getattr(
                    _TRACING or _tracing(), 'proxies', None) is None:
                return _sm.log_softmax(input, dim + nd if dim < 0 else dim)
    a = _float_input(input, dtype, 'log_softmax')
    nd = np.ndim(a._data)
    dim = _softmax_dim(nd, 'log_softmax', _stacklevel) if dim is None else \
        _norm_dim(dim, nd, 'log_softmax')
    if _one_node(a):
        return _sm.log_softmax(a, dim)
    with np.errstate(all='ignore'):
        return _shifted_log_softmax(a, dim)


def _jit_tracing():
    """Is tape.jit tracing on this thread?  (Asked by each op with a one-record
    form: an import statement per call would cost a microsecond.)"""
    return getattr(_TRACING or _tracing(), 'proxies', None) is not None


# tape.jit's thread-local tracing state (tape/_jit.py's ``_tracing``), set on first
# use (_jit imports this package); hot paths read ``_TRACING or _tracing()`` inline
_TRACING = None


def _tracing():
    global _TRACING
    _TRACING = _ops._jit_tracing()
    return _TRACING


_SM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))   # = _softmax.DTYPES


def _one_node(a):
    """Does (log_)softmax of ``a`` take its one-record form (tape/nn/_softmax.py)?
    Float32/float64 only, and not while tape.jit traces: the composite's records
    replay in the generated kernel, where a custom Function would make the traced
    function run eagerly."""
    d = a._data
    return d.dtype in _sm.DTYPES and d.ndim and d.size and not _jit_tracing()


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


@node_named('LogSigmoidBackward0', 'input')
def logsigmoid(input):  # noqa: A002
    _not_for(_t(input), 'iub', 'log_sigmoid_cpu')
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
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``.

    Valid class indices take one record (tape/nn/_cross_entropy.py); anything
    else the composite below, which gives the result or PyTorch's error."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    inp = _t(input)
    if isinstance(weight, Tensor) and weight._rg:
        _weight_not_differentiable(inp)
    fast = _ce_indices_args(inp, target, weight, ignore_index, reduction)
    if fast is not None:
        return _nll_fast(inp, fast, ignore_index, reduction)
    return _nll_loss(inp, target, weight, ignore_index=ignore_index, reduction=reduction)


def _weight_not_differentiable(inp):
    """PyTorch's nll_loss kernels have no derivative for the class weights: a
    weight that requires grad is refused where the op would be recorded."""
    if grad_mode.enabled:
        fn = 'nll_loss_forward' if np.ndim(inp._data) <= 2 else 'nll_loss2d_forward'
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to "
                           f"argument 'weight'. This input cannot have requires_grad True.")


def _nll_fast(inp, fast, ignore_index, reduction):
    """nll_loss's one record, with PyTorch's nodes: NllLossBackward0 for a 1-D
    or 2-D input, NllLoss2DBackward0 for a 4-D one; any other (N, C, d1...)
    input is viewed as (N, C, 1, d) first, as PyTorch's nll_loss_nd does (a
    ViewBackward0 under the node, and one over a 'none' result)."""
    nd = inp._data.ndim
    if nd <= 2:
        return _nll_indices(inp, *fast, ignore_index, reduction)
    if nd == 4:
        return _nll_indices_2d(inp, *fast, ignore_index, reduction)
    shape = inp._data.shape
    out = _nll_indices_2d(_ops.reshape(inp, (shape[0], shape[1], 1, -1)), *fast,
                          ignore_index, reduction)
    if reduction == 'none':
        out = _ops.reshape(out, shape[:1] + shape[2:])
    return out


@node_named(lambda i: {0: 'NllLossBackward0', 1: 'NllLossBackward0', 2: 'NllLossBackward0',
                       4: 'NllLoss2DBackward0'}.get(np.ndim(getattr(i, '_data', i))), 'input')
def _nll_loss(input, target, weight=None, ignore_index=-100, reduction='mean'):  # noqa: A002
    """nll_loss in tape ops, for what the one record does not take (a weight
    that requires grad, under no_grad) and PyTorch's errors."""
    inp = _t(input)
    tgt = np.asarray(target._data if isinstance(target, Tensor) else target)
    if tgt.dtype.kind not in 'iu':
        raise RuntimeError(f'nll_loss: expected target of an integer dtype (class indices), got '
                           f'{tgt.dtype}')
    if tgt.dtype.char not in 'lqB' and isinstance(target, Tensor):
        # PyTorch takes class indices as int64 or uint8 only (a list is made int64)
        raise RuntimeError(f'expected target dtype to be Long or Byte, but got '
                           f'{_ops._TORCH_DTYPE_NAMES.get(tgt.dtype.str[1:], tgt.dtype)}')
    tgt = tgt.astype(np.int64)
    if tgt.ndim == 1 and np.ndim(inp._data) == 1:
        # PyTorch takes a target of one element for an unbatched input
        if tgt.shape[0] != 1:
            raise ValueError(f'For 1D input, 1D target must have size 1, but got target '
                             f'size: {tgt.shape[0]}')
        tgt = tgt.reshape(())
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
    # one position per sample (an ignored one picks class 0 of its own row), so
    # no position repeats: a large input's backward scatters, without a bincount
    picked = _red.take_as('index', inp, d.reshape(-1)[pos], pos, unique=True)
    if weight is not None:
        wd = np.asarray(weight._data if isinstance(weight, Tensor) else weight)
        if isinstance(weight, Tensor) and wd.dtype != d.dtype:
            # PyTorch refuses a weight of another dtype rather than convert it
            raise RuntimeError(f'nll_loss: expected scalar type {_dtype_name(d.dtype)} but '
                               f'found {_dtype_name(wd.dtype)} (weight of shape '
                               f'{tuple(wd.shape)}, input of shape {tuple(d.shape)})')
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
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f'cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: '
                           f'{label_smoothing}')
    inp = _t(input)
    if isinstance(weight, Tensor) and weight._rg and np.asarray(
            target._data if isinstance(target, Tensor) else target).dtype.kind != 'f':
        _weight_not_differentiable(inp)     # (class indices: PyTorch's nll_loss kernels)
    if not label_smoothing:
        fast = _ce_indices_args(inp, target, weight, ignore_index, reduction)
        if fast is not None:
            # one record with a fused backward (tape/nn/_cross_entropy.py)
            return _ce_indices(inp, *fast, ignore_index, reduction)
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


def _ce_indices_args(inp, target, weight, ignore_index, reduction):
    """(targets, weights) as arrays when cross_entropy can take the one-record
    path: float32/float64 logits, in-range integer class indices of the right
    shape (returned flattened, int64), a weight of the input's dtype and shape
    (C,), a known reduction.  None otherwise: the composite path then gives the
    result or PyTorch's error.  (Called once per training step on a small batch:
    each check here is a cheap attribute test, and the targets are checked in
    one compiled pass.)"""
    if _jit_tracing():
        # tape.jit is tracing: the composite's records replay, a custom Function
        # would make the whole call run eagerly
        return None
    d = np.asarray(inp._data)
    if d.dtype.char not in 'fd' or d.ndim == 0 or d.size == 0 \
            or reduction not in ('mean', 'sum', 'none'):
        return None
    td = np.asarray(target._data if isinstance(target, Tensor) else target)
    if td.dtype.char not in 'lqB':      # int64 or uint8; the composite path raises
        return None
    if d.ndim == 1:
        ncls = d.shape[0]
        if td.ndim != 0:
            return None
    else:
        ncls = d.shape[1]
        if td.shape != d.shape[:1] + d.shape[2:]:
            return None
    if type(ignore_index) is not int:
        if not isinstance(ignore_index, (int, np.integer)):
            return None
        ignore_index = int(ignore_index)
    if not -2 ** 63 <= ignore_index < 2 ** 63:
        return None
    if td.dtype.char != 'l' or td.ndim != 1 or not td.flags.c_contiguous:
        td = np.ascontiguousarray(td, dtype=np.int64).reshape(-1)
    if not _ce_kernels().ce_targets_ok(td, ncls, ignore_index):
        return None
    w = None
    if weight is not None:
        if not isinstance(weight, Tensor):
            return None
        w = np.asarray(weight._data)
        if w.dtype != d.dtype or w.shape != (ncls,):
            return None
        w = np.ascontiguousarray(w)
    return td, w


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


@node_named('MseLossBackward0', 'input', 'target')
def mse_loss(input, target, size_average=None, reduce=None, reduction='mean'):  # noqa: A002
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if type(input) is Tensor and type(target) is Tensor and (
            reduction == 'mean' or reduction == 'sum'):
        out = _mse_direct(input, target, reduction == 'mean')
        if out is not None:
            return out
    inp, tgt = _t(input), _t(target, input)
    _float_kernel(inp, tgt, 'mse_cpu')
    _same_shape(inp, tgt, 'mse_loss')
    diff = _ops.sub(inp, tgt)
    return _reduce(_ops.mul(diff, diff), reduction, 'mse_loss')


def _float_kernel(inp, tgt, kernel):
    """PyTorch's NotImplementedError for a loss kernel run in an integer or bool
    dtype (both operands non-float: the result dtype is theirs)."""
    di, dt = _dt_of(inp), _dt_of(tgt)
    if di.kind in 'iub' and dt.kind in 'iub':
        _not_for(_leaf(np.empty(0, np.result_type(di, dt))), 'iub', kernel)


def _mse_direct(inp, tgt, mean):
    """mse_loss's mean or sum of two float32 or float64 tensors of one shape and
    dtype, non-empty and C-contiguous: the values and the records of
    ``mean(mul(diff, diff))`` with ``diff = sub(inp, tgt)`` (SubBackward0,
    MulBackward0, MeanBackward0 or SumBackward0), made here without the ops'
    dispatch; the square's values, which nothing reads (its gradient needs only
    ``diff``, the reduction's only the shape), are not computed: the sum of
    squares is one pass over ``diff`` (float32: the float64 lanes of
    compiler/reduce_kernels.py; float64: a dot product).  None where this does
    not apply (and while tape.jit traces: the general path then)."""
    ad = inp._data
    bd = tgt._data
    if type(ad) is not np.ndarray or type(bd) is not np.ndarray:
        return None
    dt = ad.dtype
    if bd.dtype != dt or ad.shape != bd.shape or not ad.size or dt not in _SM_DTYPES \
            or not (ad.flags.c_contiguous and bd.flags.c_contiguous) \
            or getattr(_TRACING or _tracing(), 'proxies', None) is not None:
        return None
    try:
        diff = np.subtract(ad, bd)
    except RuntimeWarning as e:         # inf - inf
        diff = _ops.quietly(e, np.subtract, ad, bd)
    flat = diff.reshape(-1)
    n = flat.size
    if dt == _F32:
        s = (_red._reduce_kernels or _red._load_reduce_kernels()).sum_squares(flat)
    else:
        s = float(np.dot(flat, flat))
    out = dt.type(s / n if mean else s)
    if not ((inp._rg or tgt._rg) and grad_mode.enabled):
        return _leaf(out)
    dtt = _ops._record_binary(_OP_SUB, inp, tgt, diff)
    sq = _ops._record_binary(_OP_MUL, dtt, dtt, _red._placeholder(diff.shape, dt))
    if mean:
        return _ops._record_struct(_OP_MEAN, sq, out, x=n, scale=1.0 / n)
    return _ops._record_struct(_OP_SUM, sq, out, x=n, scale=1.0)


_OP_SUB, _OP_MUL, _OP_MEAN, _OP_SUM = OP['sub'], OP['mul'], OP['mean'], OP['sum']
_F32 = np.dtype(np.float32)


def l1_loss(input, target, size_average=None, reduce=None, reduction='mean'):  # noqa: A002
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    inp, tgt = _t(input), _t(target, input)
    _no_bool_sub(inp, tgt)
    _same_shape(inp, tgt, 'l1_loss')
    return _reduce(_ops.abs_(_ops.sub(inp, tgt)), reduction, 'l1_loss')


@node_named('BinaryCrossEntropyBackward0', 'input', 'target')
def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction='mean'):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    inp, tgt = _t(input), _t(target, input)
    si, st = np.shape(inp._data), np.shape(tgt._data)
    if si != st:
        raise ValueError(f'Using a target size ({st}) that is different to the input size ({si}) '
                         'is deprecated. Please ensure they have the same size.')
    d, td = np.asarray(inp._data), np.asarray(tgt._data)
    if isinstance(target, Tensor) and td.dtype != d.dtype:
        # PyTorch's kernel takes the target in the input's dtype only
        raise RuntimeError(f'Found dtype {_torch_dtype_name(td.dtype)} but expected '
                           f'{_torch_dtype_name(d.dtype)} (binary_cross_entropy: target of '
                           f'shape {tuple(st)}, input of shape {tuple(si)})')
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
        w = _t(weight, inp)
        if _dt_of(w) != d.dtype:            # (the result keeps the input's dtype)
            w = w.to(d.dtype)
        loss = _ops.mul(loss, w)
    return _reduce(loss, reduction, 'binary_cross_entropy')


def _torch_dtype_name(dt):
    return _ops._TORCH_DTYPE_NAMES.get(np.dtype(dt).str[1:], str(dt))


@node_named('BinaryCrossEntropyWithLogitsBackward0', 'input', 'target')
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction='mean', pos_weight=None):
    """``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)``: stable for any x."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    inp, tgt = _t(input), _t(target, input)
    si, st = np.shape(inp._data), np.shape(tgt._data)
    if si != st:
        raise ValueError(f'Target size ({st}) must be the same as input size ({si})')
    if _dt_of(tgt).kind in 'iu' and _dt_of(inp).kind == 'f':
        # PyTorch writes the loss into a tensor of the target's (integer) dtype
        raise RuntimeError(f"result type {_torch_dtype_name(_dt_of(inp))} can't be cast to the "
                           f"desired output type {_torch_dtype_name(_dt_of(tgt))} "
                           f"(binary_cross_entropy_with_logits: input of shape {tuple(si)})")
    _ops.check_broadcast('binary_cross_entropy_with_logits', tgt, pos_weight, weight)
    sp = _ew.softplus(_ops.neg(inp), 1.0, float('inf'))
    if pos_weight is not None:
        lw = _ops.add(_ops.mul(_ops.sub(_t(pos_weight, inp), 1.0), tgt), 1.0)
        sp = _ops.mul(sp, lw)
    loss = _ops.add(_ops.mul(_ops.rsub(tgt, 1.0), inp), sp)
    if weight is not None:
        loss = _ops.mul(loss, _t(weight, inp))
    return _reduce(loss, reduction, 'binary_cross_entropy_with_logits')


@node_named(lambda b, i, w: 'AddmmBackward0'
            if b is not None and np.ndim(getattr(i, '_data', i)) == 2 else None,
            'bias', 'input', 'weight', adjust=through_transpose(2))
def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``."""
    if type(input) is Tensor and bias is not None:
        out = _ops.linear_records(input, weight, bias)
        if out is not None:
            return out
    inp, w = _t(input), _t(weight, input)
    if np.ndim(w._data) == 1:
        out = matmul(inp, w)
    else:
        si, sw = np.shape(inp._data), np.shape(w._data)
        if not si or si[-1] != sw[-1]:
            raise RuntimeError(f'linear: mat1 and mat2 shapes cannot be multiplied '
                               f'({int(math.prod(si[:-1])) if si else 1}x'
                               f'{si[-1] if si else 1} and {sw[1]}x{sw[0]}); input '
                               f'{tuple(si)}, weight {tuple(sw)}')
        if bias is not None:
            _ops.check_shapes('linear', si[:-1] + sw[:1], np.shape(_t(bias, input)._data))
        out = matmul(inp, _ops.t(w))
    if bias is not None:
        b = _t(bias, input)
        if isinstance(bias, Tensor) and b._data.dtype != out._data.dtype:
            # PyTorch's addmm refuses a bias of another dtype rather than promote
            raise RuntimeError(f'linear: self and mat2 must have the same dtype, but got '
                               f'{_dtype_name(b._data.dtype)} and '
                               f'{_dtype_name(out._data.dtype)} (bias {tuple(b._data.shape)}, '
                               f'weight {tuple(np.shape(w._data))})')
        out = _ops.add(out, b)
    return out


def _dtype_name(dt):
    return {'float64': 'Double', 'float32': 'Float', 'float16': 'Half'}.get(str(dt), str(dt))


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
        mask = _leaf(np.zeros(d.shape, d.dtype))
    else:
        keep = _rng_of(generator).random(d.shape) >= p
        mask = _leaf((keep / (1.0 - p)).astype(d.dtype))
    if inplace:         # (x itself changed and returned, as PyTorch's)
        return _ops.inplace_apply(a, lambda t: _ops.mul(t, mask))
    return _ops.mul(a, mask)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    a = _t(input)
    if dim is not None and not isinstance(dim, (tuple, list)):
        _norm_dim(dim, np.ndim(a._data), 'normalize')     # (a 0-d input: [-1, 0])
    # PyTorch's steps: norm, clamp_min, expand_as, div (and so its nodes)
    n = _ops.expand_as(_ew.clamp_min(_red.vector_norm(a, p, dim, True), eps), a)
    if out is not None:         # (PyTorch's out=: the division's, tape/_out.py)
        from .._out import into_out
        return into_out(_ops.div(a, n), out, 'div', a)
    return _ops.div(a, n)


# ---------------------------------------------------------------------------
# More of torch.nn.functional, as composites of tape's differentiable ops.
# ---------------------------------------------------------------------------
__all__ += ['pad', 'one_hot', 'smooth_l1_loss', 'huber_loss', 'kl_div', 'cosine_similarity',
            'pairwise_distance', 'hardswish', 'hardsigmoid', 'mish', 'selu', 'celu', 'softsign',
            'tanhshrink', 'threshold', 'glu', 'softmin', 'softshrink', 'hardshrink', 'prelu',
            'margin_ranking_loss', 'hinge_embedding_loss', 'soft_margin_loss',
            'multilabel_soft_margin_loss', 'cosine_embedding_loss', 'poisson_nll_loss',
            'gaussian_nll_loss', 'triplet_margin_loss', 'embedding', 'dropout1d', 'dropout2d',
            'dropout3d', 'alpha_dropout', 'feature_alpha_dropout', 'layer_norm', 'rms_norm',
            'batch_norm', 'instance_norm', 'group_norm']


def _shape_of(a):
    return tuple(np.shape(a._data))


def _dt_of(a):
    return np.asarray(a._data).dtype


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's ``_Reduction.legacy_get_string``: the deprecated flags win when given."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = 'mean' if size_average and reduce else 'sum' if reduce else 'none'
    _warnings.warn(f"size_average and reduce args will be deprecated, please use "
                   f"reduction='{ret}' instead.", UserWarning, stacklevel=3)
    return ret


def _checked_reduction(size_average, reduce, reduction):
    """The reduction a loss uses (the legacy flags mapped to it), checked."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return reduction


def _check_reduction(reduction, msg=' is not a valid value for reduction'):
    if reduction not in ('none', 'mean', 'sum'):
        raise ValueError(f'{reduction}{msg}')


def _broadcast_pair(a, b, opname):
    """Expand ``a`` and ``b`` to their common shape (PyTorch's broadcast_tensors)."""
    sa, sb = _shape_of(a), _shape_of(b)
    if sa == sb:
        return a, b
    try:
        shape = np.broadcast_shapes(sa, sb)
    except ValueError:
        raise RuntimeError(_size_mismatch(sa, sb) + f' ({opname})') from None
    return (a if sa == shape else _ops.expand(a, *shape),
            b if sb == shape else _ops.expand(b, *shape))


def _size_mismatch(sa, sb):
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            return (f'The size of tensor a ({pa[i]}) must match the size of tensor b ({pb[i]}) '
                    f'at non-singleton dimension {i}')
    return f'shapes {sa} and {sb} do not broadcast'


def _target_size_warning(inp, tgt):
    si, st = _shape_of(inp), _shape_of(tgt)
    if si != st:
        _warnings.warn(f'Using a target size ({st}) that is different to the input size ({si}). '
                       'This will likely lead to incorrect results due to broadcasting. Please '
                       'ensure they have the same size.', UserWarning, stacklevel=3)


def _pass_through(t, value):
    """``t`` shown as ``value`` (a same-shaped array) with ``t``'s gradient unchanged:
    PyTorch's pattern of changing a clone in place under no_grad (clamp_min_ of
    the norms in cosine_similarity, of the variance in gaussian_nll_loss)."""
    note_value_use('clamp')                 # (whether and where it clamps is baked in)
    shift = np.asarray(value, dtype=_dt_of(t)) - np.asarray(t._data)
    if not shift.any():
        return t
    return _ops.add(t, _leaf(shift))


def _maybe_inplace(a, fn, inplace, *args):
    if inplace:
        return _ops.inplace_apply(a, fn, *args)
    return fn(a, *args)


# -- padding and encoding ----------------------------------------------------

_NONCONST_PAD = ('Supported combinations for non-constant padding:\n'
                 '  - 2D or 3D input: padding size = 2 (pads last dimension)\n'
                 '  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n'
                 '  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)')


def _pad_node(input, pad, mode):  # noqa: A002
    """PyTorch's node for F.pad: ConstantPadNdBackward0, ReflectionPad1DBackward0...
    (circular padding is a CopySlices chain there: the primitives' node here)."""
    if mode == 'constant':
        return 'ConstantPadNdBackward0', 1
    kind = {'reflect': 'Reflection', 'replicate': 'Replication'}.get(mode)
    return None if kind is None else (f'{kind}Pad{len(pad) // 2}DBackward0', 1)


@node_named(_pad_node, 'input', 'pad', 'mode')
def pad(input, pad, mode='constant', value=None):  # noqa: A002
    """``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs starting from the
    last dimension.  ``constant`` pads any number of dimensions (negative sizes crop);
    ``reflect``, ``replicate`` and ``circular`` pad the last 1-3 dimensions."""
    a = _t(input)
    shape = _shape_of(a)
    nd = len(shape)
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError('Padding length must be divisible by 2')
    k = len(pad) // 2
    if k > nd:
        raise RuntimeError(f'Padding length should be less than or equal to two times the input '
                           f'dimension but got padding length {len(pad)} and input of dimension '
                           f'{nd}')
    if mode not in ('constant', 'reflect', 'replicate', 'circular'):
        raise NotImplementedError(f'Unrecognised padding mode {mode}')
    pairs = [(nd - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(k)]
    if mode == 'constant':
        fill = 0 if value is None else value
        for dim, lo, hi in pairs:
            n = a._data.shape[dim]
            if n + lo + hi < 0:
                raise RuntimeError(f'The input size {shape[dim]}, plus negative padding {lo} and '
                                   f'{hi} resulted in a negative output size, which is invalid. '
                                   f'Check dimension {dim} of your input.')
            if lo < 0 or hi < 0:
                start = max(-lo, 0)
                length = n - start - max(-hi, 0)
                if length < 0:
                    raise RuntimeError('narrow(): length must be non-negative.')
                a = _sh.narrow(a, dim, start, length)
            parts = []
            for size in (max(lo, 0), max(hi, 0)):
                s = list(a._data.shape)
                s[dim] = size
                parts.append(_leaf(np.full(s, fill, _dt_of(a))) if size else None)
            if parts[0] is not None or parts[1] is not None:
                a = _sh.cat([p for p in (parts[0], a, parts[1]) if p is not None], dim)
        return a
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if not (k + 1 <= nd <= k + 2) or k > 3:
        raise NotImplementedError(f'Padding size {len(pad)} is not supported for {nd}D input '
                                  f'tensor.\n' + _NONCONST_PAD)
    if any(s == 0 for s in (shape[1:] if nd == k + 2 else shape)):
        raise RuntimeError(f'Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 '
                           f'batch size and other non-zero dimensions for input, but got: '
                           f'{list(shape)}')
    for dim, lo, hi in pairs:
        n = shape[dim]
        if mode == 'reflect':
            if lo >= n or hi >= n:
                raise RuntimeError(f'Argument #4: Padding size should be less than the '
                                   f'corresponding input dimension, but got: padding ({lo}, '
                                   f'{hi}) at dimension {dim} of input {list(shape)}')
            if n + lo + hi < 1:
                raise RuntimeError(f'input (W: {n}) is too small. Calculated output W: '
                                   f'{n + lo + hi}')
            pos = np.arange(-lo, n + hi)
            pos = np.abs(pos)
            pos = np.where(pos >= n, 2 * (n - 1) - pos, pos)
        elif mode == 'replicate':
            if n + lo + hi < 1:
                raise RuntimeError(f'input (W: {n}) is too small. Calculated output W: '
                                   f'{n + lo + hi}')
            pos = np.clip(np.arange(-lo, n + hi), 0, n - 1)
        else:
            if lo > n or hi > n:
                raise RuntimeError('Padding value causes wrapping around more than once.')
            if n + lo + hi < 0:
                raise RuntimeError('Negative padding value is resulting in an empty dimension.')
            start = max(-lo, 0)
            m = n - start - max(-hi, 0)             # crop first, then wrap the rest
            if m <= 0:
                pos = np.zeros(0, np.int64)
            else:
                pos = start + np.mod(np.arange(-max(lo, 0), m + max(hi, 0)), m)
        a = _ix.index_select(a, dim, pos.astype(np.int64))
    return a


def one_hot(tensor, num_classes=-1):
    """``torch.nn.functional.one_hot``: an int64 tensor of shape ``tensor.shape + (C,)``."""
    d = np.asarray(tensor._data if isinstance(tensor, Tensor) else tensor)
    if d.dtype != np.int64:
        raise RuntimeError('one_hot is only applicable to index tensor of type LongTensor.')
    num_classes = int(num_classes)
    if d.size == 0:
        if num_classes == -1:
            raise RuntimeError('Can not infer total number of classes from empty tensor.')
        return _leaf(np.zeros(d.shape + (num_classes,), np.int64))
    if d.min() < 0:
        raise RuntimeError('Class values must be non-negative.')
    if num_classes == -1:
        num_classes = int(d.max()) + 1
    elif d.max() >= num_classes:
        raise RuntimeError('Class values must be smaller than num_classes.')
    return _leaf((d[..., None] == np.arange(num_classes)).astype(np.int64))


# -- activations --------------------------------------------------------------

@node_named(lambda input, inplace: None if inplace else ('HardswishBackward0', 1),
            'input', 'inplace')
def hardswish(input, inplace=False):  # noqa: A002
    """``x * relu6(x + 3) / 6``."""
    _not_for(_t(input), 'iub', 'hardswish_cpu')

    def hardswish(x):
        return _ops.div(_ops.mul(x, _ew.hardtanh(_ops.add(x, 3.0), 0.0, 6.0)), 6.0)
    return _maybe_inplace(_t(input), hardswish, inplace)


@node_named(lambda input, inplace: None if inplace else ('HardsigmoidBackward0', 1),
            'input', 'inplace')
def hardsigmoid(input, inplace=False):  # noqa: A002
    """``relu6(x + 3) / 6``."""
    _not_for(_t(input), 'iub', 'hardsigmoid_cpu')

    def hardsigmoid(x):
        return _ops.div(_ew.hardtanh(_ops.add(x, 3.0), 0.0, 6.0), 6.0)
    return _maybe_inplace(_t(input), hardsigmoid, inplace)


@node_named(lambda input, inplace: None if inplace else ('MishBackward0', 1),
            'input', 'inplace')
def mish(input, inplace=False):  # noqa: A002
    """``x * tanh(softplus(x))``."""
    _not_for(_t(input), 'iub', 'mish_cpu')

    def mish(x):
        return _ops.mul(x, _ops.tanh(_ew.softplus(x)))
    return _maybe_inplace(_t(input), mish, inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@node_named(lambda input, inplace: None if inplace else ('EluBackward0', 1),
            'input', 'inplace')
def selu(input, inplace=False):  # noqa: A002
    """``scale * elu(x, alpha)`` with SELU's fixed constants."""
    _not_for(_t(input), 'iub', 'elu_cpu')

    def selu(x):
        return _ops.mul(_ew.elu(x, _SELU_ALPHA), _SELU_SCALE)
    return _maybe_inplace(_t(input), selu, inplace)


@node_named(lambda input, inplace: None if inplace else ('CeluBackward0', 1),
            'input', 'inplace')
def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)`` (PyTorch's form, also
    for a negative ``alpha``): ``relu(x) + alpha * expm1(min(x, 0) / alpha)``."""
    if alpha == 0:
        raise RuntimeError('ZeroDivisionError: alpha cannot be 0 for CELU')
    alpha = float(alpha)
    _not_for(_t(input), 'iub', 'elu_cpu')

    def celu(x):
        if alpha > 0:       # alpha * elu(x / alpha): elu's derivatives at 0, as PyTorch's
            return _ops.mul(_ew.elu(_ops.div(x, alpha), 1.0), alpha)
        neg = _ew.expm1(_ops.div(_ew.clamp(x, max=0.0), alpha))
        return _ops.add(_ops.relu(x), _ops.mul(neg, alpha))
    return _maybe_inplace(_t(input), celu, inplace)


def softsign(input):  # noqa: A002
    """``x / (1 + |x|)``."""
    a = _t(input)
    _not_for(a, 'b', 'abs_cpu')
    return _ops.div(a, _ops.add(_ops.abs_(a), 1.0))


def tanhshrink(input):  # noqa: A002
    """``x - tanh(x)``."""
    a = _t(input)
    _no_bool_sub(a)
    return _ops.sub(a, _ops.tanh(a))


@node_named(lambda input, inplace: None if inplace else ('ThresholdBackward0', 1),
            'input', 'inplace')
def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """``x`` where ``x > threshold``, else ``value``."""
    def threshold_(x):
        return _ew.where(_ew.gt(x, threshold), x, _leaf(np.asarray(value, _dt_of(x))))
    threshold_.__name__ = 'threshold'
    _not_for(_t(input), 'b', 'threshold_cpu')
    return _maybe_inplace(_t(input), threshold_, inplace)


@node_named('GluBackward0', 'input')
def glu(input, dim=-1):  # noqa: A002
    """``a * sigmoid(b)`` for the halves ``a, b`` of ``input`` along ``dim``."""
    a = _t(input)
    shape = _shape_of(a)
    _not_for(a, 'iub', 'glu_cpu')
    if not shape:
        raise RuntimeError('glu does not support scalars because halving size must be even')
    dim = _norm_dim(dim, len(shape), 'glu')
    if shape[dim] % 2:
        raise RuntimeError(f'Halving dimension must be even, but dimension {dim} is size '
                           f'{shape[dim]}')
    h = shape[dim] // 2
    return _ops.mul(_sh.narrow(a, dim, 0, h), _ops.sigmoid(_sh.narrow(a, dim, h, h)))


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """``softmax(-input)``."""
    a = _t(input)
    if dim is None:
        dim = _softmax_dim(np.ndim(a._data), 'softmin', _stacklevel)
    else:
        _norm_dim(dim, np.ndim(a._data), 'softmin')
    return softmax(_ops.neg(a), dim, dtype=dtype)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """``softmax((logits + g) / tau)`` for Gumbel(0, 1) noise ``g = -log(E)``,
    E ~ Exponential(1) (tape's generator); with ``hard`` the one-hot of each
    argmax, with the soft sample's gradient (straight-through), as PyTorch's."""
    if eps != 1e-10:
        _warnings.warn('`eps` parameter is deprecated and has no effect.', stacklevel=2)
    a = _t(logits)
    from .. import empty_like, zeros_like
    with _no_grad():
        gumbels = _ops.neg(empty_like(a).exponential_().log())
    y_soft = softmax(_ops.div(_ops.add(a, gumbels), tau), dim)
    if not hard:
        return y_soft
    note_value_use('gumbel_softmax')    # (which class is each argmax)
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(a).scatter_(dim, index, 1.0)
    return _ops.add(_ops.sub(y_hard, y_soft.detach()), y_soft)


__all__ += ['gumbel_softmax']


@node_named('SoftshrinkBackward0', 'input')
def softshrink(input, lambd=0.5):  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError(f'lambda must be greater or equal to 0, but found to be {lambd}.')
    a = _t(input)
    _not_for(a, 'iub', 'softshrink_check')
    return _ops.sub(a, _ew.clamp(a, -float(lambd), float(lambd)))


@node_named('HardshrinkBackward0', 'input')
def hardshrink(input, lambd=0.5):  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0."""
    a = _t(input)
    _not_for(a, 'iub', 'hardshrink_cpu')
    keep = _ew.logical_or(_ew.gt(a, lambd), _ew.lt(a, -lambd))
    return _ew.where(keep, a, _leaf(np.zeros((), _dt_of(a))))


def prelu(input, weight):  # noqa: A002
    """``x`` where positive, else ``weight * x``; ``weight`` has 1 or C (dim 1) elements."""
    a, w = _t(input), _t(weight, input)
    shape, ws = _shape_of(a), _shape_of(w)
    if isinstance(weight, Tensor) and _dt_of(w) != _dt_of(a) and _dt_of(a).kind == 'f':
        raise RuntimeError(f'prelu: Type promoting not supported. Got {_dtype_name(_dt_of(a))} '
                           f'and {_dtype_name(_dt_of(w))} (input of shape {list(shape)}, '
                           f'weight of shape {list(ws)})')
    if len(ws) > 1:
        raise RuntimeError(f'prelu: Expected `weight` to be a scalar or 1D tensor, but got: '
                           f'ndim = {len(ws)}')
    n = int(math.prod(ws))
    channels = shape[1] if len(shape) >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f'Mismatch of parameter numbers and input channel size. Found '
                           f'parameter numbers = {n} and channel size = {channels}.')
    if n == 1 or len(shape) < 2:
        wv = _ops.reshape(w, ()) if n == 1 else _ops.reshape(w, (n,))
    else:
        wv = _ops.reshape(w, (n,) + (1,) * (len(shape) - 2))
    out = _ew.where(_ew.gt(a, 0), a, _ops.mul(wv, a))
    if out._tape is not None:
        # PyTorch's one node, of the input and (for an input of 2 or more dims)
        # the weight's view
        name_result(out, 'PreluKernelBackward0', (a, w if len(shape) < 2 else wv))
    return out


# -- similarity and distance --------------------------------------------------

def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps), dim)``, as PyTorch computes it:
    each input divided by its own norm, the norms clamped at ``eps`` in value only."""
    a, b = _t(x1), _t(x2, x1)
    if _dt_of(a).kind not in 'fc' and _dt_of(b).kind not in 'fc':
        raise RuntimeError(f'expected common dtype to be floating point, yet common dtype is '
                           f'{np.result_type(_dt_of(a), _dt_of(b))}')
    if _dt_of(a).kind not in 'fc':
        a = _ops.to(a, np.float32 if _dt_of(b).kind not in 'fc' else _dt_of(b))
    if _dt_of(b).kind not in 'fc':
        b = _ops.to(b, _dt_of(a))
    a, b = _broadcast_pair(a, b, 'cosine_similarity')
    nd = len(_shape_of(a))
    dim = _norm_dim(dim, max(nd, 1), 'cosine_similarity') if nd else None
    na = _red.vector_norm(a, 2, dim, True)
    nb = _red.vector_norm(b, 2, dim, True)
    na = _pass_through(na, np.maximum(na._data, eps))
    nb = _pass_through(nb, np.maximum(nb._data, eps))
    return _ops.sum_(_ops.mul(_ops.div(a, na), _ops.div(b, nb)), dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``norm(x1 - x2 + eps, p)`` over the last dimension (PyTorch's nodes:
    NormBackward1 of AddBackward1, a tensor-and-scalar add)."""
    _no_bool_sub(*(x for x in (x1, x2) if isinstance(x, Tensor)))
    a, b = _t(x1), _t(x2, x1)
    d = _ops.sub(a, b)
    diff = _ops.add(d, float(eps))
    nd = len(_shape_of(diff))
    out = _red.vector_norm(diff, p, None if nd == 0 else nd - 1, nd != 0 and keepdim)
    if out._tape is not None:
        name_result(diff, 'AddBackward1', (d,))
        name_result(out, 'NormBackward1', (diff,))
    return out


# -- losses ---------------------------------------------------------------------

@node_named(lambda i, t, beta: None if beta == 0 else ('SmoothL1LossBackward0', 2),
            'input', 'target', 'beta')
def smooth_l1_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                   reduction='mean', beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``)."""
    inp, tgt = _t(input), _t(target, input)
    _target_size_warning(inp, tgt)
    reduction = _checked_reduction(size_average, reduce, reduction)
    _float_kernel(inp, tgt, 'smooth_l1_cpu')
    if beta < 0:
        raise RuntimeError('smooth_l1_loss does not support negative values for beta.')
    inp, tgt = _broadcast_pair(inp, tgt, 'smooth_l1_loss')
    ad = _ops.abs_(_ops.sub(inp, tgt))
    if beta == 0:
        return _reduce(ad, reduction, 'smooth_l1_loss')
    return _reduce(_ops.div(_huber(ad, beta), float(beta)), reduction, 'smooth_l1_loss')


def _huber(ad, delta):
    """Huber's ``0.5 d^2`` below ``delta``, ``delta (|d| - 0.5 delta)`` above, from
    ``|d|`` as ``m (|d| - 0.5 m)`` with ``m = min(|d|, delta)``: no comparison, so
    tape.jit can replay it, and its gradient is ``sign(d) m``."""
    m = _ew.clamp(ad, max=float(delta))
    return _ops.mul(m, _ops.sub(ad, _ops.mul(m, 0.5)))


@node_named(lambda i, t, w: None if w is not None else ('HuberLossBackward0', 2),
            'input', 'target', 'weight')
def huber_loss(input, target, reduction='mean', delta=1.0, weight=None):  # noqa: A002
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    inp, tgt = _t(input), _t(target, input)
    _not_for(inp, 'iub', 'huber_cpu')
    _target_size_warning(inp, tgt)
    if weight is not None and _shape_of(_t(weight, input)) != _shape_of(inp):
        raise ValueError('Weights and input must have the same size.')
    if weight is None:
        _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError('huber_loss does not support non-positive values for delta.')
    inp, tgt = _broadcast_pair(inp, tgt, 'huber_loss')
    loss = _huber(_ops.abs_(_ops.sub(inp, tgt)), delta)
    if weight is not None:
        loss = _ops.mul(loss, _t(weight, input))
        if reduction not in ('none', 'mean', 'sum'):
            raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', "
                             "'mean', 'sum'.")
    return _reduce(loss, reduction, 'huber_loss')


def _xlogy_self(t):
    """PyTorch's ``xlogy(t, t)``: ``t * log(t)``, 0 where ``t == 0``; its gradient
    (``tape._composites._xlogy_fns``) is NaN at t == 0 (``t / t``), as PyTorch's
    kl_div target gradient is there."""
    from .._composites import xlogy
    return xlogy(t, t)


def kl_div(input, target, size_average=None, reduce=None, reduction='mean',  # noqa: A002
           log_target=False):
    """Pointwise KL divergence ``target * (log(target) - input)`` (``input`` holds
    log-probabilities; so does ``target`` when ``log_target``)."""
    inp, tgt = _t(input), _t(target, input)
    if _dt_of(inp).kind in 'iub' or _dt_of(tgt).kind in 'iub':
        raise RuntimeError('kl_div: Integral inputs not supported.')
    _ops.check_broadcast('kl_div', inp, tgt)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    else:
        if reduction == 'mean':
            _warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                           "the support size.'batchmean' divides only by the batch size, and "
                           "aligns with the KL div math definition.'mean' will be changed to "
                           "behave the same as 'batchmean' in the next major release.",
                           UserWarning, stacklevel=2)
        if reduction != 'batchmean':
            _check_reduction(reduction)
    if log_target:
        loss = _ops.mul(_ops.exp(tgt), _ops.sub(tgt, inp))
    else:
        loss = _ops.sub(_xlogy_self(tgt), _ops.mul(tgt, inp))
    if reduction == 'batchmean':
        total = _ops.sum_(loss)
        nd = len(_shape_of(inp))
        return _ops.div(total, float(_shape_of(inp)[0])) if nd else total
    return _reduce(loss, reduction, 'kl_div')


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None,  # noqa: A002
                        reduce=None, reduction='mean'):
    """``max(0, -target * (input1 - input2) + margin)``."""
    a, b, y = _t(input1), _t(input2, input1), _t(target, input1)
    reduction = _checked_reduction(size_average, reduce, reduction)
    if not (len(_shape_of(a)) == len(_shape_of(b)) == len(_shape_of(y))):
        raise RuntimeError(f'margin_ranking_loss : All input tensors should have same dimension '
                           f'but got sizes: input1: {list(_shape_of(a))}, input2: '
                           f'{list(_shape_of(b))}, target: {list(_shape_of(y))} ')
    loss = _ew.clamp_min(_ops.add(_ops.mul(_ops.neg(y), _ops.sub(a, b)), float(margin)), 0.0)
    return _reduce(loss, reduction, 'margin_ranking_loss')


def hinge_embedding_loss(input, target, margin=1.0, size_average=None,  # noqa: A002
                         reduce=None, reduction='mean'):
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    x, y = _t(input), _t(target, input)
    reduction = _checked_reduction(size_average, reduce, reduction)
    _ops.check_broadcast('hinge_embedding_loss', x, y)
    zero = _leaf(np.zeros((), _dt_of(x)))
    note_value_use('hinge_embedding_loss')   # (the target's masks are baked in)
    yd = np.asarray(y._data)
    clamp = _ew.clamp_min(_ops.rsub(x, float(margin)), 0.0)
    loss = _ops.add(_ew.where(_leaf(yd != 1), clamp, zero),
                    _ew.where(_leaf(yd != -1), x, zero))
    return _reduce(loss, reduction, 'hinge_embedding_loss')


def soft_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                     reduction='mean'):
    """``log(1 + exp(-target * input))``."""
    x, y = _t(input), _t(target, input)
    _no_int_result(x)
    reduction = _checked_reduction(size_average, reduce, reduction)
    sx = tuple(_shape_of(x))
    out = tuple(_ops.check_shapes('soft_margin_loss', sx, tuple(_shape_of(y))))
    if out != sx:       # PyTorch's loss has the input's shape: the target broadcasts to it
        raise RuntimeError(f"output with shape {list(sx)} doesn't match the broadcast shape "
                           f'{list(out)}')
    with np.errstate(over='ignore'):
        loss = _ew.log1p(_ops.exp(_ops.neg(_ops.mul(x, y))))
    return _reduce(loss, reduction, 'soft_margin_loss')


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction='mean'):
    """Mean over classes of ``-(t log sigmoid(x) + (1 - t) log sigmoid(-x))``."""
    x, y = _t(input), _t(target, input)
    if not _shape_of(x):
        raise IndexError('Dimension specified as -1 but tensor has no dimensions')
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _ops.check_broadcast('multilabel_soft_margin_loss', x, y, weight)
    loss = _ops.neg(_ops.add(_ops.mul(y, logsigmoid(x)),
                             _ops.mul(_ops.rsub(y, 1.0), logsigmoid(_ops.neg(x)))))
    if weight is not None:
        loss = _ops.mul(loss, _t(weight, input))
    cdim = len(_shape_of(x)) - 1
    ncls = _shape_of(x)[cdim] if cdim >= 0 else 1
    loss = _ops.div(_ops.sum_(loss, cdim if cdim >= 0 else None), float(ncls))
    if reduction not in ('none', 'mean', 'sum'):
        raise ValueError(reduction + ' is not valid')
    return _reduce(loss, reduction, 'multilabel_soft_margin_loss')


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None,  # noqa: A002
                          reduce=None, reduction='mean'):
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where -1."""
    a, b, y = _t(input1), _t(input2, input1), _t(target, input1)
    reduction = _checked_reduction(size_average, reduce, reduction)
    td = len(_shape_of(y))
    if td > 1:
        raise RuntimeError(f'0D or 1D target tensor expected, multi-target not supported '
                           f'(target of shape {list(_shape_of(y))})')
    if td == 1 and not (len(_shape_of(a)) == 2 and len(_shape_of(b)) == 2):
        raise RuntimeError(f'1D target tensor expects 2D input tensors, but found inputs with '
                           f'sizes {list(_shape_of(a))} and {list(_shape_of(b))}.')
    if td == 0 and not (len(_shape_of(a)) == 1 and len(_shape_of(b)) == 1):
        raise RuntimeError(f'0D target tensor expects 1D input tensors, but found inputs with '
                           f'sizes {list(_shape_of(a))} and {list(_shape_of(b))}.')
    sab = _ops.check_broadcast('cosine_embedding_loss', a, b)
    _ops.check_shapes('cosine_embedding_loss', sab[:td], _shape_of(y))
    prod = _ops.sum_(_ops.mul(a, b), td)
    m1 = _ops.add(_ops.sum_(_ops.mul(a, a), td), 1e-12)
    m2 = _ops.add(_ops.sum_(_ops.mul(b, b), td), 1e-12)
    cos = _ops.div(prod, _ops.sqrt(_ops.mul(m1, m2)))
    zero = _leaf(np.zeros((), _dt_of(cos)))
    note_value_use('cosine_embedding_loss')  # (the target's masks are baked in)
    yd = np.asarray(y._data)
    loss = _ops.add(_ew.where(_leaf(yd == 1), _ops.rsub(cos, 1.0), zero),
                    _ew.where(_leaf(yd == -1), _ew.clamp_min(_ops.sub(cos, float(margin)), 0.0),
                              zero))
    return _reduce(loss, reduction, 'cosine_embedding_loss')


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,  # noqa: A002
                     eps=1e-8, reduce=None, reduction='mean'):
    """``exp(input) - target * input`` (or ``input - target * log(input + eps)``), plus
    Stirling's term where ``target > 1`` when ``full``."""
    x, y = _t(input), _t(target, input)
    _no_bool_sub(x)
    reduction = _checked_reduction(size_average, reduce, reduction)
    _ops.check_broadcast('poisson_nll_loss', x, y)
    with np.errstate(all='ignore'):
        if log_input:
            loss = _ops.sub(_ops.exp(x), _ops.mul(y, x))
        else:
            loss = _ops.sub(x, _ops.mul(y, _ops.log(_ops.add(x, float(eps)))))
        if full:
            note_value_use('poisson_nll_loss')
            yd = np.asarray(y._data)
            # PyTorch's stirling.masked_fill(target <= 1, 0) of the target itself:
            # the masked gradient, 0 times Stirling's, is NaN where that is not
            # finite (target <= 0), as PyTorch's target gradient is
            stirling = _ops.add(_ops.sub(_ops.mul(y, _ops.log(y)), y),
                                _ops.mul(_ops.log(_ops.mul(y, 2 * _math.pi)), 0.5))
            loss = _ops.add(loss, _ew.where(_leaf(~(yd <= 1)), stirling,
                                            _leaf(np.zeros((), _dt_of(stirling)))))
    return _reduce(loss, reduction, 'poisson_nll_loss')


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6,  # noqa: A002
                      reduction='mean'):
    """``0.5 (log(var) + (input - target)^2 / var)``, ``var`` clamped at ``eps`` in value."""
    x, y = _t(input), _t(target, input)
    _no_int_result(x)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        var = float(var)
        if var < 0:
            raise ValueError('var has negative entry/entries')
        v = _leaf(np.full(_shape_of(x), var, _dt_of(x)))
    else:
        v = _t(var, input)
        note_value_use('gaussian_nll_loss')
        if (np.asarray(v._data) < 0).any():
            raise ValueError('var has negative entry/entries')
    si, sv = _shape_of(x), _shape_of(v)
    if sv != si:
        if si[:-1] == sv:
            v = _sh.unsqueeze(v, -1)
        elif len(si) == len(sv) and sum(b for a, b in zip(si, sv) if a != b) == 1:
            pass
        else:
            raise ValueError('var is of incorrect size')
    if reduction not in ('none', 'mean', 'sum'):
        raise ValueError(reduction + ' is not valid')
    v = _pass_through(v, np.maximum(v._data, eps))
    d = _ops.sub(x, y)
    loss = _ops.mul(_ops.add(_ops.log(v), _ops.div(_ops.mul(d, d), v)), 0.5)
    if full:
        loss = _ops.add(loss, 0.5 * _math.log(2 * _math.pi))
    return _reduce(loss, reduction, 'gaussian_nll_loss')


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction='mean'):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``pairwise_distance``."""
    a, po, ne = _t(anchor), _t(positive, anchor), _t(negative, anchor)
    reduction = _checked_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f'margin must be greater than 0, got {margin}')
    da, dp, dn = len(_shape_of(a)), len(_shape_of(po)), len(_shape_of(ne))
    if not (da == dp == dn):
        raise RuntimeError(f'The anchor, positive, and negative tensors are expected to have the '
                           f'same number of dimensions, but got: anchor {da}D, positive {dp}D, '
                           f'and negative {dn}D inputs')
    d_pos = pairwise_distance(a, po, p, eps)
    d_neg = pairwise_distance(a, ne, p, eps)
    if swap:
        d_neg = _ops.minimum(d_neg, pairwise_distance(po, ne, p, eps))
    loss = _ew.clamp_min(_ops.sub(_ops.add(d_pos, float(margin)), d_neg), 0.0)
    return _reduce(loss, reduction, 'triplet_margin_loss')


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction='mean'):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``distance_function``
    (``pairwise_distance`` by default)."""
    if margin <= 0:
        raise ValueError(f'triplet_margin_with_distance_loss: expected margin to be greater '
                         f'than 0, got {margin} instead')
    _check_reduction(reduction)
    a, po, ne = _t(anchor), _t(positive, anchor), _t(negative, anchor)
    da, dp, dn = len(_shape_of(a)), len(_shape_of(po)), len(_shape_of(ne))
    if not (da == dp == dn):
        raise RuntimeError(f'The anchor, positive, and negative tensors are expected to have the '
                           f'same number of dimensions, but got: anchor {da}D, positive {dp}D, '
                           f'and negative {dn}D inputs')
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = _t(dist(a, po)), _t(dist(a, ne))
    if swap:
        d_neg = _ops.minimum(d_neg, _t(dist(po, ne)))
    loss = _ew.clamp_min(_ops.sub(_ops.add(d_pos, float(margin)), d_neg), 0.0)
    return _reduce(loss, reduction, 'triplet_margin_with_distance_loss')


def pdist(input, p=2):  # noqa: A002
    """The ``p``-norm distances between the rows of an (N, M) ``input``, pairs ``i < j``
    in row-major order (``N (N - 1) / 2`` of them)."""
    a = _t(input)
    if len(_shape_of(a)) != 2:
        raise RuntimeError(f'pdist only supports 2D tensors, got: {len(_shape_of(a))}D')
    n = _shape_of(a)[0]
    i, j = np.triu_indices(n, 1)
    diff = _ops.sub(a[_leaf(i.astype(np.int64))], a[_leaf(j.astype(np.int64))])
    return _red.vector_norm(diff, p, 1, False)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,  # noqa: A002
                      reduce=None, reduction='mean'):
    """``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` per sample (times ``weight[y]``)."""
    if p not in (1, 2):
        raise ValueError('only p == 1 and p == 2 supported')
    reduction = _checked_reduction(size_average, reduce, reduction)
    x = _t(input)
    shape = tuple(_shape_of(x))
    if len(shape) > 2 or (len(shape) == 2 and shape[1] == 0) or (len(shape) < 2
                                                                  and not math.prod(shape)):
        raise RuntimeError('Expected non-empty vector or matrix with optional 0-dim batch '
                           f'size, but got: {list(shape)}')
    one = len(shape) <= 1
    x2 = _ops.reshape(x, (1, -1)) if one else x
    y = np.asarray(_t(target)._data).reshape(-1).astype(np.int64)
    nb, c = _shape_of(x2)
    note_value_use('multi_margin_loss')   # (the target's indices are baked in)
    xy = _ix.gather(x2, 1, _leaf(y.reshape(-1, 1)))
    z = _ew.clamp_min(_ops.add(_ops.sub(x2, xy), float(margin)), 0.0)
    if p == 2:
        z = _ops.mul(z, z)
    if weight is not None:
        z = _ops.mul(z, _ops.reshape(_t(weight, x)[_leaf(y)], (-1, 1)))
    keep = np.ones((nb, c), dtype=np.asarray(x._data).dtype)
    keep[np.arange(nb), y] = 0
    loss = _ops.div(_ops.sum_(_ops.mul(z, _leaf(keep)), 1), float(c))
    if one:         # (the target's shape: () or (1,))
        loss = _ops.reshape(loss, np.shape(_t(target)._data))
    return _reduce(loss, reduction, 'multi_margin_loss')


def relu_(input):  # noqa: A002
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):  # noqa: A002
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    return leaky_relu(input, negative_slope, inplace=True)


def threshold_(input, threshold, value):  # noqa: A002
    return globals()['threshold'](input, threshold, value, inplace=True)


def celu_(input, alpha=1.0):  # noqa: A002
    return celu(input, alpha, inplace=True)


def selu_(input):  # noqa: A002
    return selu(input, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    return hardtanh(input, min_val, max_val, inplace=True)


__all__ += ['celu_', 'selu_', 'hardtanh_']


# -- embedding ------------------------------------------------------------------

def _sdpa_bias(q, k, v, attn_mask, is_causal, L, S):
    """The additive mask (or None) of sdpa's one-node form (tape/nn/_sdpa.py), as
    PyTorch's CPU build fuses it: 4-D q, k, v of one float32/float64 dtype, equal
    batch dims and one head size, a 2-D or 4-D mask that needs no grad; False
    where the composite runs (also while tape.jit traces)."""
    qd, kd, vd = q._data, k._data, v._data
    dt = qd.dtype
    if dt not in _sdpa_node.DTYPES or kd.dtype != dt or vd.dtype != dt or qd.ndim != 4 \
            or kd.ndim != 4 or vd.ndim != 4 or qd.shape[:2] != kd.shape[:2] \
            or kd.shape[:3] != vd.shape[:3] or not qd.shape[3] == kd.shape[3] == vd.shape[3] \
            or not (qd.size and kd.size and vd.size) \
            or _jit_tracing():
        return False
    if is_causal:
        return np.triu(np.full((L, S), -np.inf, dt), 1)
    if attn_mask is None:
        return None
    m = _t(attn_mask)
    md = np.asarray(m._data)
    if m._rg or md.ndim not in (2, 4) or any(
            a != 1 and a != b for a, b in zip(md.shape[::-1], (S, L) + qd.shape[1::-1])):
        return False
    note_value_use('attention mask')
    if md.dtype == np.bool_:
        return np.where(md, dt.type(0), dt.type(-np.inf))
    if md.dtype != dt:
        return False
    return md


def _meta_dtype_name(dt):
    # PyTorch's TypeMeta name of a dtype, as its C++ checks print it
    dt = np.dtype(dt)
    if dt.name == 'bfloat16':
        return 'c10::BFloat16'
    return {'f8': 'double', 'f4': 'float', 'f2': 'c10::Half', 'i8': 'long int', 'i4': 'int',
            'i2': 'short int', 'i1': 'signed char', 'u1': 'unsigned char', 'b1': 'bool',
            'c8': 'c10::complex<float>', 'c16': 'c10::complex<double>'}.get(
                dt.kind + str(dt.itemsize), str(dt))


def _sdpa_validate(q, k, v, attn_mask):
    """PyTorch's validate_sdpa_input, in its order and words: one dtype for q, k, v,
    at least 2-D each, and a mask of bool, float32 or q's dtype (an integer mask
    would otherwise be added to the scores as numbers)."""
    qt, kt, vt = _dt_of(q), _dt_of(k), _dt_of(v)
    if not qt == kt == vt:
        raise RuntimeError(f'Expected query, key, and value to have the same dtype, but got '
                           f'query.dtype: {_meta_dtype_name(qt)} key.dtype: '
                           f'{_meta_dtype_name(kt)} and value.dtype: {_meta_dtype_name(vt)} '
                           'instead.')
    dims = [len(_shape_of(a)) for a in (q, k, v)]
    if min(dims) < 2:
        raise RuntimeError(f'Expected query, key, and value to all be  at least 2 dimensional, '
                           f'but got query.dim: {dims[0]} key.dim: {dims[1]} and value.dim: '
                           f'{dims[2]} instead.')
    if attn_mask is not None:
        mt = _dt_of(_t(attn_mask))
        if mt not in (np.dtype(np.bool_), np.dtype(np.float32), qt):
            raise RuntimeError(f'Expected attn_mask dtype to be bool or float or to match '
                               f'query dtype, but got attn_mask.dtype: {_meta_dtype_name(mt)} '
                               f'and  query.dtype: {_meta_dtype_name(qt)} instead.')


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(q @ k^T * scale + bias, -1) @ v``, as PyTorch's reference math:
    ``is_causal`` masks above the diagonal with -inf, a bool ``attn_mask`` masks
    where it is False, a float one is added; ``enable_gqa`` repeats key/value heads."""
    q, k, v = _t(query), _t(key, query), _t(value, query)
    _sdpa_validate(q, k, v, attn_mask)
    L, S = _shape_of(q)[-2], _shape_of(k)[-2]
    if is_causal and attn_mask is not None:
        raise RuntimeError('_scaled_dot_product_attention: Explicit attn_mask should not be '
                           'set when is_causal=True')
    if enable_gqa and len(_shape_of(q)) >= 3:
        hq, hk = _shape_of(q)[-3], _shape_of(k)[-3]
        if hq % hk or hq % _shape_of(v)[-3]:
            # (PyTorch's message, cut short as it is there)
            raise RuntimeError('Number of heads in key and value must divide the number of '
                               'heads in ')
        if hk != hq:
            k = k.repeat_interleave(hq // hk, -3)
            v = v.repeat_interleave(hq // _shape_of(v)[-3], -3)
    s = 1.0 / _math.sqrt(_shape_of(q)[-1]) if scale is None else scale
    if dropout_p == 0.0:
        bias = _sdpa_bias(q, k, v, attn_mask, is_causal, L, S)
        if bias is not False:
            return _sdpa_node.sdpa(q, k, v, bias, s, True)
    att = _ops.mul(matmul(q, _ops.transpose(k, -2, -1)), s)
    if is_causal:
        att = att.masked_fill(_leaf(np.triu(np.ones((L, S), bool), 1)), float('-inf'))
    if attn_mask is not None:
        m = _t(attn_mask)
        if _dt_of(m) == np.bool_:
            att = att.masked_fill(m.logical_not(), float('-inf'))
        else:
            att = _ops.add(att, m)
    # PyTorch's safe softmax: a query whose every score is -inf gets zero weights, not NaN
    full = np.isneginf(np.asarray(att._data)).all(-1, keepdims=True) \
        if is_causal or attn_mask is not None else None
    if full is not None and full.any():
        note_value_use('attention mask')     # (which rows are fully masked is baked in)
        fm = _leaf(np.ascontiguousarray(np.broadcast_to(full, _shape_of(att)[:-1] + (1,))))
        zero = _leaf(np.zeros((), _dt_of(att)))
        att = _ew.where(fm, zero, softmax(_ew.where(fm, zero, att), dim=-1))
    else:
        att = softmax(att, dim=-1)
    if dropout_p > 0.0:
        att = dropout(att, dropout_p, True)
    return matmul(att, v)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``; the gradient goes to ``weight``
    (none to the row ``padding_idx``).  ``max_norm`` renormalizes the picked rows of
    ``weight`` in place first, as PyTorch does.

    One ``_Embedding`` record (a row pick by a Numba kernel, its backward a row
    scatter-add) instead of a take record of every picked element's position."""
    note_value_use('embedding')         # (the indices are baked in)
    idx = np.asarray(input._data if isinstance(input, Tensor) else input)
    w = _t(weight)
    if idx.dtype not in (np.int64, np.int32):
        names = {np.dtype(np.float32): 'FloatTensor', np.dtype(np.float64): 'DoubleTensor'}
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got "
                           f"{names.get(idx.dtype, str(idx.dtype))} instead (while checking "
                           f"arguments for embedding)")
    ws = _shape_of(w)
    if len(ws) != 2:
        raise RuntimeError(f"'weight' must be 2-D (got shape {list(ws)})")
    num = ws[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, 'Padding_idx must be within num_embeddings'
        elif padding_idx < 0:
            assert padding_idx >= -num, 'Padding_idx must be within num_embeddings'
            padding_idx = num + padding_idx
    if sparse:
        raise NotImplementedError('embedding: sparse gradients are not supported by tape; use '
                                  'sparse=False (the gradient is then dense)')
    flat = idx.reshape(-1)
    if max_norm is not None:
        if flat.size and (flat.min() < 0 or flat.max() >= num):
            raise IndexError('index out of range in self')
        _embedding_renorm(w, flat, max_norm, norm_type)
    if not _ix.fast_record_ok(w) or not _ix.kernel_dtype(w._data.dtype):
        return _embedding_take(w, idx, flat, num, ws, padding_idx, scale_grad_by_freq)
    return _embedding_pick(w, input, np.ascontiguousarray(flat), idx.shape,
                           -1 if padding_idx is None else int(padding_idx),
                           bool(scale_grad_by_freq))


def _embedding_renorm(w, flat, max_norm, norm_type):
    """PyTorch's embedding_renorm_: the picked rows of norm over ``max_norm`` scaled
    down to it, in place (bumps ``w``'s version)."""
    rows = np.unique(flat)
    wd = np.asarray(w._data)
    norms = np.linalg.norm(wd[rows].astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        rows = rows[big]
        scale = (max_norm / (norms[big] + 1e-7)).astype(wd.dtype)[:, None]
        with _no_grad():
            w[rows] = _leaf(wd[rows] * scale)


def _embedding_take(w, idx, flat, num, ws, padding_idx, scale_grad_by_freq):
    """embedding as tape ops (a take record, a where for ``padding_idx``, a rescale for
    ``scale_grad_by_freq``): the form forward-mode AD and tape.jit's replay take."""
    flat = flat.astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= num):
        raise IndexError('index out of range in self')
    out = _ix.index_select(w, 0, flat)
    out = _ops.reshape(out, idx.shape + (ws[1],))
    if scale_grad_by_freq and flat.size:
        counts = np.bincount(flat, minlength=num)[idx].astype(_dt_of(w))
        det = _leaf(np.asarray(out._data))
        out = _ops.add(det, _ops.mul(_ops.sub(out, det),
                                     _leaf((1.0 / counts)[..., None].astype(_dt_of(w)))))
    if padding_idx is not None and (idx == padding_idx).any():
        out = _ew.where(_leaf((idx == padding_idx)[..., None]), _leaf(np.asarray(out._data)), out)
    return out


class _Embedding(_ix.Function):
    """out = weight[idx] (``ctx.idx`` the flat indices), recorded by ``_ix.own_record``:
    the compiled sweep takes ``_backward_arrays`` (one kernel call); under
    ``create_graph`` ``backward`` scatters the gradient with a recorded ``put_flat``."""
    @staticmethod
    def _backward_arrays(ctx, g):
        ctx.saved_tensors           # (raises after the graph was freed, as PyTorch's)
        v, d = ctx.wshape
        gw = _ix.grad_zeros((v, d), ctx.dtype)
        idx = ctx.idx
        g = np.ascontiguousarray(g).reshape(idx.shape[0], d)
        _ix.kernels().embedding_backward(g, idx, gw, ctx.padding_idx, ctx.by_freq)
        return (gw,)

    @staticmethod
    def backward(ctx, gy):
        if not grad_mode.enabled:
            return _leaf(_Embedding._backward_arrays(ctx, np.asarray(gy._data))[0])
        ctx.saved_tensors
        # create_graph: the same scatter as recorded ops, so it differentiates again
        # (with scale_grad_by_freq's 1/count too, which PyTorch's double backward drops)
        v, d = ctx.wshape
        idx = ctx.idx.astype(np.int64)
        g = _ops.reshape(gy, (idx.shape[0] * d,))
        keep = idx != ctx.padding_idx
        if ctx.by_freq or not keep.all():
            scale = keep / np.maximum(np.bincount(idx, minlength=v), 1)[idx] if ctx.by_freq \
                else keep
            g = _ops.mul(g, _leaf(np.repeat(scale.astype(_dt_of(gy)), d)))
        pos = (idx[:, None] * d + np.arange(d)).reshape(-1)
        return _ops.reshape(_ops.put_flat(g, pos, v * d), (v, d))


_Embedding._backward_name = 'EmbeddingBackward0'


def _embedding_pick(w, index, idx, shape, padding_idx, by_freq):
    """weight[idx] by one kernel pass that also checks the indices, recorded as one
    ``_Embedding`` (PyTorch's EmbeddingBackward0)."""
    wd = w._data
    if not wd.flags.c_contiguous:
        wd = np.ascontiguousarray(wd)
    v, d = wd.shape
    m = idx.shape[0]
    out = np.empty((m, d), wd.dtype)
    if _ix.kernels().pick_rows(wd.reshape(1, v, d), idx, out.reshape(1, m, d)) >= 0:
        raise IndexError('index out of range in self')
    out = _leaf(out.reshape(shape + (d,)))
    if not (w._rg and grad_mode.enabled):
        return out
    ctx = _ix.new_ctx('EmbeddingBackward0')
    ctx.idx, ctx.padding_idx, ctx.by_freq, ctx.wshape, ctx.dtype = \
        _ix.keep_index(ctx, index, idx), padding_idx, by_freq, (v, d), wd.dtype
    return _ix.own_record(_Embedding, ctx, w, out)


def _no_grad():
    import tape
    return tape.no_grad()


# -- dropout variants -------------------------------------------------------------

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f'dropout probability has to be between 0 and 1, but got {p}')


def _feature_dropout(a, p, training, alpha, generator=None):
    """PyTorch's ``_dropout_impl``: one Bernoulli keep draw per (N, C) feature map
    (per element when ``a`` has under 2 dims), scaled by 1/(1-p); the alpha form
    keeps SELU's mean and variance."""
    d = np.asarray(a._data)
    if not training or p == 0.0 or d.size == 0:
        return a
    if p == 1.0:
        return _ops.mul(a, _leaf(np.zeros((), d.dtype)))
    shape = d.shape[:2] + (1,) * (d.ndim - 2) if d.ndim >= 2 else d.shape
    keep = (_rng_of(generator).random(shape) >= p).astype(d.dtype)
    if not alpha:
        return _ops.mul(a, _leaf((keep / (1.0 - p)).astype(d.dtype)))
    al = 1.7580993408473766
    aa = 1.0 / _math.sqrt((al * al * p + 1) * (1 - p))
    b = ((keep - 1) * (al * aa) + al * aa * p).astype(d.dtype)
    return _ops.add(_ops.mul(a, _leaf((keep * aa).astype(d.dtype))), _leaf(b))


def _dropout_apply(a, fn, inplace):
    if inplace:
        return _ops.inplace_apply(a, fn)
    return fn(a)


def dropout1d(input, p=0.5, training=True, inplace=False, generator=None):  # noqa: A002
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p``."""
    _check_p(p)
    a = _t(input)
    nd = len(_shape_of(a))
    if nd not in (2, 3):
        raise RuntimeError(f'dropout1d: Expected 2D or 3D input, but received a {nd}D input. '
                           'Note that dropout1d exists to provide channel-wise dropout on inputs '
                           'with 1 spatial dimension, a channel dimension, and an optional batch '
                           'dimension (i.e. 2D or 3D inputs).')

    def dropout1d(x):
        if nd == 2:
            return _sh.squeeze(_feature_dropout(_sh.unsqueeze(x, 0), p, training, False,
                                                generator), 0)
        return _feature_dropout(x, p, training, False, generator)
    return _dropout_apply(a, dropout1d, inplace)


def _warn_dims(name, nd, spatial):
    """PyTorch's warning for a channel dropout given an input of another rank."""
    _warnings.warn(f'{name}: Received a {nd}-D input to {name}, which is deprecated and will '
                   'result in an error in a future release. To retain the behavior and silence '
                   f'this warning, please use dropout instead. Note that {name} exists to '
                   f'provide channel-wise dropout on inputs with {spatial} spatial dimensions, '
                   'a channel dimension, and an optional batch dimension (i.e. '
                   f'{spatial + 1}D or {spatial + 2}D inputs).', UserWarning, stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False, generator=None):  # noqa: A002
    """Zero whole channels of (N, C, H, W) input with probability ``p``; a 3-D input is
    taken as (N, C, L), as PyTorch still does (with its warning)."""
    _check_p(p)
    a = _t(input)
    nd = len(_shape_of(a))
    if nd not in (3, 4):
        _warn_dims('dropout2d', nd, 2)
    if nd == 3:
        _warnings.warn('dropout2d: Received a 3D input to dropout2d and assuming that '
                       'channel-wise 1D dropout behavior is desired - input is interpreted as '
                       'shape (N, C, L), where C is the channel dim. This behavior will change in '
                       'a future release to interpret the input as one without a batch '
                       'dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout '
                       'behavior, please switch to using dropout1d instead.', UserWarning,
                       stacklevel=2)

    def dropout2d(x):
        return _feature_dropout(x, p, training, False, generator)
    return _dropout_apply(a, dropout2d, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False, generator=None):  # noqa: A002
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability ``p``."""
    _check_p(p)
    a = _t(input)
    nd = len(_shape_of(a))
    if nd not in (4, 5):
        _warn_dims('dropout3d', nd, 3)

    def dropout3d(x):
        if nd != 5:
            return _sh.squeeze(_feature_dropout(_sh.unsqueeze(x, 0), p, training, False,
                                                generator), 0)
        return _feature_dropout(x, p, training, False, generator)
    return _dropout_apply(a, dropout3d, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False, generator=None):  # noqa: A002
    """Dropout that keeps SELU's self-normalizing mean and variance (per element)."""
    _check_p(p)
    a = _t(input)

    def alpha_dropout(x):
        d = np.asarray(x._data)
        if not training or p == 0.0 or d.size == 0:
            return x
        if p == 1.0:
            return _ops.mul(x, _leaf(np.zeros((), d.dtype)))
        flat = _ops.reshape(x, (-1,))                 # one draw per element
        return _ops.reshape(_feature_dropout(flat, p, training, True, generator), d.shape)
    return _dropout_apply(a, alpha_dropout, inplace)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False,  # noqa: A002
                          generator=None):
    """``alpha_dropout`` with one draw per (N, C) feature map."""
    _check_p(p)
    a = _t(input)

    def feature_alpha_dropout(x):
        return _feature_dropout(x, p, training, True, generator)
    return _dropout_apply(a, feature_alpha_dropout, inplace)


# -- normalization ------------------------------------------------------------------

def _norm_shape(normalized_shape):
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


def _normalize_over(a, dims, eps):
    """``(a - mean) / sqrt(var + eps)`` over ``dims`` (biased variance)."""
    mean = _ops.mean(a, dims, True)
    c = _ops.sub(a, mean)
    var = _ops.mean(_ops.mul(c, c), dims, True)
    return _ops.div(c, _ops.sqrt(_ops.add(var, float(eps))))


def _affine(out, weight, bias, shape, like):
    if weight is not None:
        out = _ops.mul(out, _ops.reshape(_t(weight, like), shape))
    if bias is not None:
        out = _ops.add(out, _ops.reshape(_t(bias, like), shape))
    return out


def _norm_param_dtypes(opname, a, params):
    """PyTorch's CPU rule for a normalization's weight and bias (and batch_norm's
    running statistics): all of the input's dtype, or all float32 for a float16
    input (the mixed case, computed in float32 to a float16 result: True); any
    other mix raises rather than promote."""
    xd = _dt_of(a)
    given = [(n, np.asarray(p._data).dtype) for n, p in params if isinstance(p, Tensor)]
    if all(d == xd for _, d in given):
        return False
    if xd == np.float16 and all(d == np.float32 for _, d in given):
        return True
    raise RuntimeError(f'{opname}: mixed dtype (CPU): all inputs must share same datatype '
                       f'(input {xd} of shape {list(_shape_of(a))}, '
                       + ', '.join(f'{n} {d}' for n, d in given) + ')')


def _as_input_dtype(out, a):
    """``out`` cast to the input's dtype where the mixed case computed it wider."""
    return out.to(_dt_of(a)) if _dt_of(out) != _dt_of(a) else out


def _trailing(a, normalized_shape, star):
    """(normalized shape, a's shape, the trailing dims it names); PyTorch's error
    (whose text differs between layer_norm and rms_norm by ``star``) otherwise."""
    ns = _norm_shape(normalized_shape)
    shape = _shape_of(a)
    k = len(ns)
    if k == 0 or len(shape) < k or shape[len(shape) - k:] != ns:
        raise RuntimeError(f'Given normalized_shape={list(ns)}, expected input with shape '
                           f'[{star}{", ".join(map(str, ns))}], but got input of size'
                           f'{list(shape)}')
    return ns, shape, tuple(range(len(shape) - k, len(shape)))


_LN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))   # the Numba kernels' dtypes


# (x shape, dtype, normalized_shape, weight and bias shapes) -> (ns, n) for calls that
# passed layer_norm's checks and take the one-record form: the checks depend on
# nothing else, and cost ~4 us a call, as much as the kernel at (32, 10)
_LN_CHECKED = {}


def _ln_key(x, normalized_shape, weight, bias):
    """layer_norm's _LN_CHECKED key, or None where the call is not a plain one
    (a non-tensor argument, a normalized_shape that is not a tuple or int)."""
    xd = x._data
    if type(xd) is not np.ndarray or type(normalized_shape) not in (tuple, int):
        return None
    ws = bs = None
    if weight is not None:
        if not isinstance(weight, Tensor) or type(weight._data) is not np.ndarray \
                or weight._data.dtype != xd.dtype:
            return None
        ws = weight._data.shape
    if bias is not None:
        if not isinstance(bias, Tensor) or type(bias._data) is not np.ndarray \
                or bias._data.dtype != xd.dtype:
            return None
        bs = bias._data.shape
    return xd.shape, xd.dtype, normalized_shape, ws, bs


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize over the last ``len(normalized_shape)`` dimensions, then scale and shift."""
    key = _ln_key(input, normalized_shape, weight, bias) if isinstance(input, Tensor) else None
    if key is not None:
        try:
            hit = _LN_CHECKED.get(key)
        except TypeError:           # an unhashable normalized_shape entry: the checks say why
            hit = key = None
        if hit is not None and getattr(_TRACING or _tracing(), 'proxies', None) is None:
            return _layer_norm_fn(input, weight, bias, hit[0], float(eps), hit[1])
    a = _t(input)
    ns, shape, dims = _trailing(a, normalized_shape, '*, ')
    _not_for(a, 'iub', 'LayerNormKernelImpl')
    for name, p in (('weight', weight), ('bias', bias)):
        if p is not None and _shape_of(_t(p, input)) != ns:
            raise RuntimeError(f'Expected {name} to be of same shape as normalized_shape, but got '
                               f'{name} of shape {list(_shape_of(_t(p, input)))} and '
                               f'normalized_shape = {list(ns)}')
    mixed = _norm_param_dtypes('layer_norm', a, (('weight', weight), ('bias', bias)))
    xd = np.asarray(a._data)
    w = weight if weight is None or isinstance(weight, Tensor) else _t(weight, input)
    b = bias if bias is None or isinstance(bias, Tensor) else _t(bias, input)
    # while tape.jit traces, the composite: its records replay in the generated
    # kernel, where a custom Function would make the function run eagerly
    if xd.size and xd.dtype in _LN_DTYPES and not _jit_tracing() and all(
            p is None or np.asarray(p._data).dtype == xd.dtype for p in (w, b)):
        # one record with a fused backward (tape/nn/_layer_norm.py)
        if key is not None:
            if len(_LN_CHECKED) >= 256:
                _LN_CHECKED.clear()
            _LN_CHECKED[key] = (ns, math.prod(ns))
        return _layer_norm_fn(a, w, b, ns, float(eps))
    # float16 (alone or with float32 weights) or an empty input: the composite
    out = _affine(_normalize_over(a, dims, eps), weight, bias, ns, a)
    return _as_input_dtype(out, a) if mixed else out


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last ``len(normalized_shape)`` dims;
    ``eps`` defaults to the dtype's machine epsilon."""
    a = _t(input)
    ns, shape, dims = _trailing(a, normalized_shape, '*')
    _not_for(a, 'iub', 'rms_norm')
    if eps is None:
        eps = float(np.finfo(_dt_of(a)).eps)
    # PyTorch's steps (and nodes): x * rsqrt(mean(x ** 2) + eps), the add a
    # tensor-and-scalar one (AddBackward1)
    ms = _ops.mean(_ops.pow_(a, 2), dims, True)
    se = _ops.add(ms, float(eps))
    if se._tape is not None:
        name_result(se, 'AddBackward1', (ms,))
    out = _ops.mul(a, _ew.rsqrt(se))
    if weight is not None:          # (broadcast as it is: PyTorch's MulBackward0 of it)
        w = _t(weight, a)
        out = _ops.mul(out, w if _shape_of(w) == tuple(ns) else _ops.reshape(w, ns))
    # (PyTorch's result keeps the input's dtype whatever the weight's)
    return _as_input_dtype(out, a)


def _channel_shape(shape):
    return (1, shape[1]) + (1,) * (len(shape) - 2)


def _check_channels(t, n, name, like):
    if t is not None:
        size = math.prod(_shape_of(_t(t, like)))
        if size != n:
            raise RuntimeError(f'{name} should contain {n} elements not {size}')


def _update_running(running, stat, momentum):
    """``running = (1 - momentum) running + momentum stat``, in place, unrecorded."""
    if running is None:
        return
    if not isinstance(running, Tensor):
        raise TypeError('running statistics must be tensors')
    rd = np.asarray(running._data)
    new = (1.0 - momentum) * rd + momentum * np.asarray(stat).reshape(rd.shape)
    if type(running._data) is np.ndarray and running._tape is None and not running._rg \
            and running._extra is None and rd.flags.writeable and not _jit_tracing():
        # a plain buffer (no graph, views or hooks): what copy_ would do, less its
        # generality (~10 us, twice per training batch_norm)
        rd[...] = new
        _bump_version(running)
        return
    with _no_grad():
        running.copy_(_leaf(new.astype(rd.dtype)))


def _channels_of(a):
    """(shape, channels) of a normalization input: dim 1 must exist, as in PyTorch."""
    shape = _shape_of(a)
    if len(shape) < 2:
        raise IndexError(f'Dimension out of range (expected to be in range of '
                         f'[{-max(len(shape), 1)}, {max(len(shape), 1) - 1}], but got 1)')
    return shape, shape[1]


def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) by its batch statistics (``training``, which also
    updates ``running_mean``/``running_var`` in place, the variance unbiased) or by
    the running statistics (eval)."""
    a = _t(input)
    shape, c = _channels_of(a)
    _not_for(a, 'iub', 'batch_norm')
    n = shape[0] * int(math.prod(shape[2:]))
    if training:
        if n == 1:
            raise ValueError(f'Expected more than 1 value per channel when training, got input '
                             f'size {_torch_size(shape)}')
    elif running_mean is None:
        raise RuntimeError('running_mean must be defined in evaluation mode')
    elif running_var is None:
        raise RuntimeError('running_var must be defined in evaluation mode')
    _check_channels(running_mean, c, 'running_mean', a)
    _check_channels(running_var, c, 'running_var', a)
    _check_channels(weight, c, 'weight', a)
    _check_channels(bias, c, 'bias', a)
    mixed = _norm_param_dtypes('batch_norm', a, (('running_mean', running_mean),
                                                 ('running_var', running_var),
                                                 ('weight', weight), ('bias', bias)))
    cs = _channel_shape(shape)
    fast = _bn_fast(a, running_mean, running_var, weight, bias, training, momentum, eps, n)
    if fast is not None:
        return fast
    if training:
        dims = (0,) + tuple(range(2, len(shape)))
        mean = _ops.mean(a, dims, True)
        cen = _ops.sub(a, mean)
        var = _ops.mean(_ops.mul(cen, cen), dims, True)
        out = _ops.div(cen, _ops.sqrt(_ops.add(var, float(eps))))
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, mean._data, momentum)
            _update_running(running_var, np.asarray(var._data) * (n / (n - 1)), momentum)
    else:
        rm = _ops.reshape(_t(running_mean, a), cs)
        rv = _ops.reshape(_t(running_var, a), cs)
        out = _ops.div(_ops.sub(a, rm), _ops.sqrt(_ops.add(rv, float(eps))))
    out = _affine(out, weight, bias, cs, a)
    return _as_input_dtype(out, a) if mixed else out


def _bn_param(p, a):
    return p if p is None or isinstance(p, Tensor) else _t(p, a)


def _bn_fast(a, running_mean, running_var, weight, bias, training, momentum, eps, n):
    """batch_norm as one record with a fused backward (tape/nn/_batch_norm.py), or None
    where the composite is kept: while tape.jit traces (its records replay in the
    generated kernel), for float16 or an empty input, mixed dtypes (the composite
    promotes as PyTorch does), and in eval for running statistics of another dtype
    or that require grad (the composite differentiates through them)."""
    xd = np.asarray(a._data)
    dt = xd.dtype
    if not xd.size or dt not in _LN_DTYPES or _jit_tracing():
        return None
    w, b = _bn_param(weight, a), _bn_param(bias, a)
    for p in (w, b):
        if p is not None and np.asarray(p._data).dtype != dt:
            return None
    eps = float(eps)
    if training:
        stats = []
        y = _bn_fn(a, w, b, True, eps, stats)
        if running_mean is not None or running_var is not None:
            mean, var = stats
            _update_running(running_mean, mean, momentum)
            with np.errstate(all='ignore'):
                _update_running(running_var, var * (n / (n - 1)), momentum)
        return y
    rm, rv = _t(running_mean, a), _t(running_var, a)
    if rm._rg or rv._rg or np.asarray(rm._data).dtype != dt or np.asarray(rv._data).dtype != dt:
        return None
    return _bn_fn(a, w, b, False, eps, [np.asarray(rm._data, dtype=np.float64).reshape(-1),
                                       np.asarray(rv._data, dtype=np.float64).reshape(-1)])


def _torch_size(shape):
    return f'torch.Size({list(shape)})'


def instance_norm(input, running_mean=None, running_var=None, weight=None,  # noqa: A002
                  bias=None, use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) over its spatial dimensions; the running statistics,
    if given, are updated with the batch average of the per-instance ones."""
    a = _t(input)
    shape, c = _channels_of(a)
    _not_for(a, 'iub', 'batch_norm')
    if use_input_stats and int(math.prod(shape[2:])) == 1:
        raise ValueError(f'Expected more than 1 spatial element when training, got input size '
                         f'{_torch_size(shape)}')
    _check_channels(running_mean, c, 'running_mean', a)
    _check_channels(running_var, c, 'running_var', a)
    _check_channels(weight, c, 'weight', a)
    _check_channels(bias, c, 'bias', a)
    _norm_param_dtypes('instance_norm', a, (('weight', weight), ('bias', bias)))
    cs = _channel_shape(shape)
    if use_input_stats:
        dims = tuple(range(2, len(shape)))
        n = int(math.prod(shape[2:]))
        mean = _ops.mean(a, dims, True)
        cen = _ops.sub(a, mean)
        var = _ops.mean(_ops.mul(cen, cen), dims, True)
        out = _ops.div(cen, _ops.sqrt(_ops.add(var, float(eps))))
        with np.errstate(all='ignore'):
            _update_running(running_mean, np.asarray(mean._data).mean(0), momentum)
            _update_running(running_var, (np.asarray(var._data) * (n / (n - 1))).mean(0),
                            momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError('Expected running_mean and running_var to be defined when '
                               'use_input_stats is false')
        rm = _ops.reshape(_t(running_mean, a), cs)
        rv = _ops.reshape(_t(running_var, a), cs)
        out = _ops.div(_ops.sub(a, rm), _ops.sqrt(_ops.add(rv, float(eps))))
    # (the result keeps the input's dtype, whatever the running statistics')
    return _as_input_dtype(_affine(out, weight, bias, cs, a), a)


@node_named('NativeGroupNormBackward0', 'input', 'weight', 'bias')
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize each sample over groups of ``C / num_groups`` channels, then apply the
    per-channel affine."""
    a = _t(input)
    shape = _shape_of(a)
    if len(shape) < 2:
        raise RuntimeError(f'Expected at least 2 dimensions for input tensor but received '
                           f'{len(shape)}')
    c = shape[1]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f'Expected number of channels in input to be divisible by num_groups, '
                           f'but got input of shape {list(shape)} and num_groups={num_groups}')
    _check_channels(weight, c, 'weight', a)
    _check_channels(bias, c, 'bias', a)
    _not_for(a, 'iub', 'GroupNormKernelImpl')
    mixed = _norm_param_dtypes('group_norm', a, (('weight', weight), ('bias', bias)))
    # the group size spelled out: -1 is ambiguous for an empty batch
    g = _ops.reshape(a, (shape[0], num_groups,
                         c // num_groups * int(math.prod(shape[2:]))))
    out = _affine(_ops.reshape(_normalize_over(g, (2,), eps), shape), weight, bias,
                  _channel_shape(shape), a)
    return _as_input_dtype(out, a) if mixed else out


__all__ += ['bilinear']


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = input1 @ weight[o] @ input2 + bias[o]``, for ``input1`` of shape
    (*, in1), ``input2`` (*, in2) and ``weight`` (out, in1, in2)."""
    a, b, w = _t(input1), _t(input2, input1), _t(weight, input1)
    sa, sb, sw = _shape_of(a), _shape_of(b), _shape_of(w)
    if len(sw) != 3 or not sa or not sb or sa[:-1] != sb[:-1] or sa[-1] != sw[1] \
            or sb[-1] != sw[2]:
        raise RuntimeError(f'bilinear: expected input1 (*, in1), input2 (*, in2) with the same '
                           f'leading dimensions and weight (out, in1, in2); got input1 '
                           f'{tuple(sa)}, input2 {tuple(sb)}, weight {tuple(sw)}')
    lead = tuple(sa[:-1])
    n = int(math.prod(lead))
    a2 = _ops.reshape(a, (n, sa[-1]))
    b2 = _ops.reshape(b, (n, sb[-1]))
    # (out, n, in2): each sample's input1 through every weight slice, then
    # contracted with input2 over in2
    left = matmul(a2, w)
    out = _ops.mul(left, b2).sum(-1)                            # (out, n)
    out = _ops.reshape(_ops.t(out), lead + (sw[0],))
    if bias is not None:
        out = _ops.add(out, _t(bias, input1))
    return out


# convolution and pooling live in their own module; exported here as torch.nn.functional does
from ._layer_norm import layer_norm as _layer_norm_fn  # noqa: E402
from ._batch_norm import batch_norm as _bn_fn  # noqa: E402
from ._cross_entropy import cross_entropy_indices as _ce_indices  # noqa: E402
from ._cross_entropy import nll_loss_indices as _nll_indices  # noqa: E402
from ._cross_entropy import nll_loss2d_indices as _nll_indices_2d  # noqa: E402
from ._cross_entropy import _kernels as _ce_kernels  # noqa: E402
from . import _softmax as _sm  # noqa: E402
from . import _sdpa as _sdpa_node  # noqa: E402
from ._conv import (adaptive_avg_pool1d, adaptive_avg_pool2d,  # noqa: E402
                    adaptive_avg_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, conv1d, conv2d,
                    conv3d, conv_transpose1d, conv_transpose2d, max_pool1d, max_pool2d,
                    max_pool3d)
__all__ += ['conv1d', 'conv2d', 'conv3d', 'conv_transpose1d', 'conv_transpose2d',
            'max_pool1d', 'max_pool2d', 'max_pool3d', 'avg_pool1d', 'avg_pool2d',
            'avg_pool3d', 'adaptive_avg_pool1d', 'adaptive_avg_pool2d', 'adaptive_avg_pool3d']


def multi_head_attention_forward(*args, **kwargs):
    """``torch.nn.functional.multi_head_attention_forward`` (it lives in
    ``tape/nn/_attention.py``, with ``nn.MultiheadAttention``)."""
    from ._attention import multi_head_attention_forward as _mha
    return _mha(*args, **kwargs)


__all__ += ['multi_head_attention_forward']
from ._modules_more import multilabel_margin_loss  # noqa: E402
__all__ += ['multilabel_margin_loss']
from ._ctc import ctc_loss  # noqa: E402
__all__ += ['ctc_loss']
from ._fractional import (fractional_max_pool2d,  # noqa: E402
                          fractional_max_pool2d_with_indices, fractional_max_pool3d,
                          fractional_max_pool3d_with_indices)
__all__ += ['fractional_max_pool2d', 'fractional_max_pool2d_with_indices',
            'fractional_max_pool3d', 'fractional_max_pool3d_with_indices']
from ._spatial import (adaptive_max_pool1d, adaptive_max_pool1d_with_indices,  # noqa: E402
                       adaptive_max_pool2d, adaptive_max_pool2d_with_indices,
                       adaptive_max_pool3d, adaptive_max_pool3d_with_indices, channel_shuffle,
                       embedding_bag, fold, interpolate, local_response_norm, lp_pool1d,
                       lp_pool2d, lp_pool3d, max_pool1d_with_indices, max_pool2d_with_indices,
                       max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d,
                       pixel_shuffle, pixel_unshuffle, rrelu, rrelu_, unfold, upsample,
                       upsample_bilinear, upsample_nearest)
__all__ += ['interpolate', 'upsample', 'upsample_nearest', 'upsample_bilinear',
            'pixel_shuffle', 'pixel_unshuffle', 'channel_shuffle', 'unfold', 'fold',
            'adaptive_max_pool1d', 'adaptive_max_pool2d', 'adaptive_max_pool3d',
            'adaptive_max_pool1d_with_indices', 'adaptive_max_pool2d_with_indices',
            'adaptive_max_pool3d_with_indices', 'max_pool1d_with_indices',
            'max_pool2d_with_indices', 'max_pool3d_with_indices', 'max_unpool1d',
            'max_unpool2d', 'max_unpool3d', 'lp_pool1d', 'lp_pool2d', 'lp_pool3d',
            'local_response_norm', 'embedding_bag', 'rrelu', 'rrelu_']
from ._conv import conv_transpose3d  # noqa: E402
from ._grid import affine_grid, grid_sample  # noqa: E402
__all__ += ['conv_transpose3d', 'affine_grid', 'grid_sample']
