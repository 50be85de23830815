"""Still more ``torch.nn`` modules, each a thin layer over the function of the same
name in ``tape.nn.functional``, with PyTorch's constructor arguments, parameter and
buffer names, initialisation and repr:

* activations ``SELU``, ``CELU``, ``GLU``, ``LogSigmoid``, ``Softmin``, ``Softshrink``,
  ``Hardshrink``, ``Tanhshrink``, ``Threshold``, ``Softmax2d``;
* losses ``MarginRankingLoss``, ``HingeEmbeddingLoss``, ``CosineEmbeddingLoss``,
  ``TripletMarginLoss``, ``TripletMarginWithDistanceLoss``, ``SoftMarginLoss``,
  ``MultiLabelSoftMarginLoss``, ``MultiMarginLoss``, ``MultiLabelMarginLoss`` (with
  ``F.multilabel_margin_loss``, defined here), ``PoissonNLLLoss``, ``GaussianNLLLoss``,
  ``CTCLoss`` (``F.ctc_loss`` is in ``_ctc.py``), ``NLLLoss2d`` (deprecated) and
  ``AdaptiveLogSoftmaxWithLoss``;
* normalization ``InstanceNorm1d/2d/3d`` and ``RMSNorm``;
* padding ``ConstantPad``, ``ZeroPad``, ``ReflectionPad``, ``ReplicationPad`` and
  ``CircularPad`` in 1, 2 and 3 dimensions;
* dropout ``Dropout1d/2d/3d``, ``AlphaDropout``, ``FeatureAlphaDropout``;
* ``LazyLinear`` (a ``Linear`` whose ``in_features`` the first input sets) and its
  ``UninitializedParameter``.

>>> import tape
>>> tape.nn.InstanceNorm2d(3)
InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
>>> tape.nn.ReflectionPad1d(2)
ReflectionPad1d((2, 2))
"""
import itertools as _itertools
import warnings as _warnings
from collections import namedtuple as _namedtuple
from collections.abc import Iterable as _Iterable

import numpy as np

from .. import _elementwise as _ew
from .. import _indexing as _ix
from .. import _ops
from .._grad_mode import no_grad
from .._tape import note_value_use
from .._tensor import Tensor, _leaf
from . import functional as F
from . import init
from ._conv_modules import (BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv1d, Conv2d, Conv3d,
                            ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, _NormBase)
from ._more_modules import PairwiseDistance
from .modules import (Linear, Module, ModuleList, NLLLoss, Parameter, Sequential, _dtype, _empty,
                      _Loss, _WeightedLoss)

__all__ = ['SELU', 'CELU', 'GLU', 'LogSigmoid', 'Softmin', 'Softshrink', 'Hardshrink',
           'Tanhshrink', 'Threshold', 'Softmax2d',
           'MarginRankingLoss', 'HingeEmbeddingLoss', 'CosineEmbeddingLoss',
           'TripletMarginLoss', 'TripletMarginWithDistanceLoss', 'SoftMarginLoss',
           'MultiLabelSoftMarginLoss', 'MultiMarginLoss', 'MultiLabelMarginLoss',
           'PoissonNLLLoss', 'GaussianNLLLoss', 'CTCLoss', 'NLLLoss2d',
           'AdaptiveLogSoftmaxWithLoss',
           'InstanceNorm1d', 'InstanceNorm2d', 'InstanceNorm3d', 'RMSNorm',
           'ConstantPad1d', 'ConstantPad2d', 'ConstantPad3d', 'ZeroPad1d', 'ZeroPad2d',
           'ZeroPad3d', 'ReflectionPad1d', 'ReflectionPad2d', 'ReflectionPad3d',
           'ReplicationPad1d', 'ReplicationPad2d', 'ReplicationPad3d', 'CircularPad1d',
           'CircularPad2d', 'CircularPad3d',
           'Dropout1d', 'Dropout2d', 'Dropout3d', 'AlphaDropout', 'FeatureAlphaDropout',
           'UninitializedParameter', 'LazyLinear']


# -- activations ---------------------------------------------------------------------
def _inplace_str(inplace, lead=''):
    return f'{lead}inplace=True' if inplace else ''


class Threshold(Module):
    """``value`` where ``input <= threshold``, else ``input``."""
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f'threshold={self.threshold}, value={self.value}' \
               f'{_inplace_str(self.inplace, ", ")}'


class SELU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace)


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f'alpha={self.alpha}{_inplace_str(self.inplace, ", ")}'


class GLU(Module):
    """``a * sigmoid(b)`` for the two halves ``a``, ``b`` of ``input`` along ``dim``."""
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f'dim={self.dim}'


class LogSigmoid(Module):
    def forward(self, input):  # noqa: A002
        return F.logsigmoid(input)


class Tanhshrink(Module):
    def forward(self, input):  # noqa: A002
        return F.tanhshrink(input)


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f'dim={self.dim}'


class Softshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):  # noqa: A002
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):  # noqa: A002
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f'{self.lambd}'


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""
    def forward(self, input):  # noqa: A002
        if input.dim() not in (3, 4):
            raise ValueError(f'Softmax2d: expected input to be 3D or 4D, got {input.dim()}D '
                             f'instead')
        return F.softmax(input, -3, _stacklevel=5)


# -- losses ----------------------------------------------------------------------------
_SCALAR_NAMES = {'int32': 'Int', 'int16': 'Short', 'int8': 'Char', 'uint8': 'Byte',
                 'bool': 'Bool', 'float32': 'Float', 'float64': 'Double', 'float16': 'Half'}


def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction='mean'):
    """``sum_{j, i} max(0, 1 - (x[y[j]] - x[i])) / C`` per sample, over the target
    classes ``y[j]`` (the indices before the first -1) and the classes ``i`` not among
    them; ``input`` is (C) or (N, C), ``target`` int64 of the same shape."""
    reduction = F._checked_reduction(size_average, reduce, reduction)
    x = F._t(input)
    if not isinstance(target, Tensor):
        target = F._t(target)
    sx = F._shape_of(x)
    yd = np.asarray(target._data)
    if yd.dtype != np.int64:
        name = _SCALAR_NAMES.get(yd.dtype.name, yd.dtype.name)
        raise RuntimeError(f'expected scalar type Long but found {name}')
    nd = len(sx)
    if nd <= 1:
        dim = 1 if nd == 0 else sx[0]
        if not (yd.ndim <= 1 and yd.size == dim):
            raise RuntimeError(f'inconsistent target size: {list(yd.shape)} for input of size: '
                               f'{list(sx)}')
        nb = 1
    elif nd == 2 and sx[1] != 0:
        nb, dim = sx
        if yd.shape != sx:
            raise RuntimeError(f'inconsistent target size: {list(yd.shape)} for input of size: '
                               f'{list(sx)}')
    else:
        raise RuntimeError(f'Expected non-empty vector or matrix with optional 0-dim batch size, '
                           f'but got: {list(sx)}')
    y = yd.reshape(nb, dim)
    if ((y < -1) | (y >= dim)).any():
        raise RuntimeError("argument #2 'target' is out of range")
    note_value_use('multilabel_margin_loss')    # (the target's masks are baked in)
    # the targets of a row are its indices before the first -1
    valid = np.cumprod(y >= 0, axis=1).astype(bool)
    is_target = np.zeros((nb, dim), bool)
    rows = np.broadcast_to(np.arange(nb)[:, None], y.shape)
    is_target[rows[valid], y[valid]] = True
    dt = np.asarray(x._data).dtype
    mask = (valid[:, :, None] & ~is_target[:, None, :]).astype(dt)
    x2 = _ops.reshape(x, (nb, dim))
    xy = _ix.gather(x2, 1, _leaf(np.where(valid, y, 0)))              # x[y[j]], (N, C)
    z = _ew.clamp_min(_ops.rsub(_ops.sub(_ops.reshape(xy, (nb, dim, 1)),
                                         _ops.reshape(x2, (nb, 1, dim))), 1.0), 0.0)
    loss = _ops.div(_ops.sum_(_ops.mul(z, _leaf(mask)), (1, 2)), float(dim))
    if nd <= 1:
        loss = _ops.reshape(loss, ())
    return F._reduce(loss, reduction, 'multilabel_margin_loss')


class MarginRankingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):  # noqa: A002
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                 reduce=None, reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f'TripletMarginLoss: expected margin to be greater than 0, got '
                             f'{margin} instead')
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction='mean'):
        super().__init__(None, None, reduction)
        if margin <= 0:
            raise ValueError(f'TripletMarginWithDistanceLoss: expected margin to be greater '
                             f'than 0, got {margin} instead')
        # the default is a PairwiseDistance child module, as in PyTorch (it shows in the repr)
        self.distance_function = distance_function if distance_function is not None \
            else PairwiseDistance()
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    def forward(self, input, target):  # noqa: A002
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction='mean'):
        super().__init__(weight, size_average, reduce, reduction)
        if p != 1 and p != 2:
            raise ValueError('only p == 1 and p == 2 supported')
        if weight is not None and weight.dim() != 1:
            raise ValueError(f'MultiMarginLoss: expected weight to be None or 1D tensor, got '
                             f'{weight.dim()}D instead')
        self.p = p
        self.margin = margin

    def forward(self, input, target):  # noqa: A002
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):  # noqa: A002
        return multilabel_margin_loss(input, target, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction='mean'):
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):  # noqa: A002
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated alias of ``NLLLoss`` (a FutureWarning when built)."""
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction='mean'):
        _warnings.warn('`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a '
                       'drop-in replacement and see https://pytorch.org/docs/main/nn.html'
                       '#torch.nn.NLLLoss for more details.', FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


_ASMoutput = _namedtuple('_ASMoutput', ['output', 'loss'])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax approximation (Grave et al., 2016), PyTorch's module: a
    ``head`` Linear over the shortlist ``[0, cutoffs[0])`` and one logit per
    cluster, and per cluster a ``tail`` of two bias-free Linears (in_features ->
    in_features // div_value ** (i + 1) -> cluster size).  ``forward(input,
    target)`` gives ``(output, loss)``: each target's log-probability and the
    mean negative of them; ``log_prob`` the full (N, n_classes) log-probabilities,
    ``predict`` their argmax.  The steps are PyTorch's (tape ops throughout)."""
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError('cutoffs should be a sequence of length larger than 0')
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 \
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError('cutoffs should be a sequence of unique, positive integers sorted '
                             'in an increasing order, where each value is between 1 and '
                             'n_classes-1')
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device,
                           dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(
                Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError('Input and target should have the same size in the batch '
                                   'dimension.')
            if input_.dim() != 2:
                raise RuntimeError(f'1D target tensor expects 2D input tensors, but found '
                                   f'inputs with size {input_.size()}')
        elif targ_dim == 0:
            if input_.dim() != 1:
                raise RuntimeError(f'0D target tensor expects 1D input tensors, but found '
                                   f'inputs with size {input_.size()}')
        else:
            raise RuntimeError('0D or 1D target tensor expected, multi-target not supported')
        batched = targ_dim > 0
        inp = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        note_value_use('AdaptiveLogSoftmaxWithLoss')    # (the clusters' rows are baked in)
        tg = np.asarray(target._data).astype(np.int64)
        batch_size = tg.shape[0]
        used_rows = 0
        gather_inds = np.empty(batch_size, np.int64)
        output = None
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            rows = np.flatnonzero((tg >= low) & (tg < high))
            if rows.size == 0:
                continue
            if i == 0:
                gather_inds[rows] = tg[rows]
            else:
                rel = _leaf((tg[rows] - low)[:, None])
                cluster_output = self.tail[i - 1](inp.index_select(0, _leaf(rows)))
                gather_inds[rows] = self.shortlist_size + i - 1
                local = F.log_softmax(cluster_output, dim=1).gather(1, rel).squeeze(1)
                part = inp.new_zeros(batch_size).index_add(0, _leaf(rows), local)
                output = part if output is None else output + part
            used_rows += rows.size
        if used_rows != batch_size:
            raise RuntimeError(f'Target values should be in [0, {self.n_classes - 1}], but '
                               f'values in range [{tg.min()}, {tg.max()}] were found. ')
        head_logprob = F.log_softmax(self.head(inp), dim=1)
        picked = head_logprob.gather(1, _leaf(gather_inds[:, None])).squeeze(1)
        output = picked if output is None else output + picked
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):  # noqa: A002
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, _ in enumerate(_itertools.pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob
                         + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        from .. import cat
        return cat(parts, 1)

    def log_prob(self, input):  # noqa: A002
        """The log-probabilities (N, n_classes) of every class."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):  # noqa: A002
        """The most probable class of each row (``log_prob(input).argmax(1)``)."""
        from .. import argmax
        head_output = self.head(input)
        output = argmax(head_output, dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return argmax(self._get_full_log_prob(input, head_output), dim=1)
        log_prob = self._get_full_log_prob(input[not_in_shortlist],
                                           head_output[not_in_shortlist])
        output[not_in_shortlist] = argmax(log_prob, dim=1)
        return output


class CTCLoss(_Loss):
    """The Connectionist Temporal Classification loss (``F.ctc_loss``)."""
    def __init__(self, blank=0, reduction='mean', zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


# -- normalization ---------------------------------------------------------------------
class _InstanceNorm(_NormBase):
    """PyTorch's ``_InstanceNorm``: no affine and no running statistics by default;
    with ``track_running_stats`` the eval mode normalizes with them.  Input
    without a batch dimension is taken as a batch of one."""
    _no_batch_dim = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        version = local_metadata.get('version', None)
        if version is None and not self.track_running_stats:
            # checkpoints from before 0.4 saved running stats that are not tracked now
            keys = [prefix + n for n in ('running_mean', 'running_var')
                    if prefix + n in state_dict]
            if keys:
                klass = type(self).__name__
                names = ' and '.join(f'"{k}"' for k in keys)
                error_msgs.append(
                    f'Unexpected running stats buffer(s) {names} for {klass} with '
                    f'track_running_stats=False. If state_dict is a checkpoint saved before '
                    f'0.4.0, this may be expected because {klass} does not track running stats '
                    f'by default since 0.4.0. Please remove these keys from state_dict. If the '
                    f'running stats are actually needed, instead set track_running_stats=True '
                    f'in {klass} to enable them. See the documentation of {klass} for details.')
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, assign)

    def _check_input_dim(self, input):  # noqa: A002
        n = self._no_batch_dim
        if input.dim() not in (n, n + 1):
            raise ValueError(f'expected {n}D or {n + 1}D input (got {input.dim()}D input)')

    def _apply_instance_norm(self, input):  # noqa: A002
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        size = input.size(feature_dim)
        if size != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f'num_features ({self.num_features}), but got: {size}.')
            _warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                           'You can silence this warning by not passing in num_features, which '
                           'is not used because affine=False', stacklevel=2)
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L) input."""
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W) input."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W) input."""
    _no_batch_dim = 4


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape``;
    ``eps=None`` is the input dtype's machine epsilon; weight ones."""
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty(self.normalized_shape, dtype)
        else:
            self.register_parameter('weight', None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f'{self.normalized_shape}, eps={self.eps}, '
                f'elementwise_affine={self.elementwise_affine}')


# -- padding ---------------------------------------------------------------------------
def _ntuple(x, n):
    """PyTorch's ``_ntuple(n)``: an iterable as a tuple (unchecked), else ``n`` copies."""
    if isinstance(x, _Iterable):
        return tuple(x)
    return (x,) * n


class _PadNd(Module):
    _mode = None
    _n = None           # 2, 4 or 6 padding sizes

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._n)

    def _check_input_dim(self, input):  # noqa: A002
        pass

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f'{self.padding}'


class _ConstantPadNd(Module):
    _n = None

    def __init__(self, padding, value):
        super().__init__()
        self.value = value
        self.padding = _ntuple(padding, self._n)

    def forward(self, input):  # noqa: A002
        return F.pad(input, self.padding, 'constant', self.value)

    def extra_repr(self):
        return f'padding={self.padding}, value={self.value}'


class ConstantPad1d(_ConstantPadNd):
    _n = 2


class ConstantPad2d(_ConstantPadNd):
    _n = 4


class ConstantPad3d(_ConstantPadNd):
    _n = 6


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f'{self.padding}'


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f'{self.padding}'


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f'{self.padding}'


class ReflectionPad1d(_PadNd):
    _mode, _n = 'reflect', 2


class ReflectionPad2d(_PadNd):
    _mode, _n = 'reflect', 4


class ReflectionPad3d(_PadNd):
    _mode, _n = 'reflect', 6


class ReplicationPad1d(_PadNd):
    _mode, _n = 'replicate', 2


class ReplicationPad2d(_PadNd):
    _mode, _n = 'replicate', 4


class ReplicationPad3d(_PadNd):
    _mode, _n = 'replicate', 6


class _CircularPadNd(_PadNd):
    _mode = 'circular'

    def _check_input_dim(self, input):  # noqa: A002
        k = self._n // 2
        if input.dim() not in (k + 1, k + 2):
            raise ValueError(f'expected {k + 1}D or {k + 2}D input (got {input.dim()}D input)')


class CircularPad1d(_CircularPadNd):
    _n = 2


class CircularPad2d(_CircularPadNd):
    _n = 4


class CircularPad3d(_CircularPadNd):
    _n = 6


# -- dropout ---------------------------------------------------------------------------
class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f'dropout probability has to be between 0 and 1, but got {p}')
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f'p={self.p}, inplace={self.inplace}'


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) input in training mode."""
    def forward(self, input):  # noqa: A002
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) input in training mode."""
    def forward(self, input):  # noqa: A002
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input in training mode."""
    def forward(self, input):  # noqa: A002
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's zero mean and unit variance (per element)."""
    def forward(self, input):  # noqa: A002
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """``AlphaDropout`` with one draw per (N, C) feature map."""
    def forward(self, input):  # noqa: A002
        return F.feature_alpha_dropout(input, self.p, self.training)


# -- lazy modules ------------------------------------------------------------------------
# the marker of an uninitialized parameter; no leading underscore, so that copy.deepcopy
# and pickle keep it (they keep a tensor's public attributes, and the Parameter mark)
_UNINIT = 'uninitialized_'


def _is_lazy(t):
    return isinstance(t, Tensor) and t.__dict__.get(_UNINIT, False)


class _UninitializedMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Parameter) and _is_lazy(obj)


class UninitializedParameter(metaclass=_UninitializedMeta):
    """A parameter with no shape yet, which a lazy module materializes on its first
    call.  As ``Parameter``, it is a plain ``tape.Tensor`` (empty, of the given dtype)
    with a marker, so ``isinstance(p, nn.Parameter)`` holds as in PyTorch; unlike
    PyTorch's, its repr and ``shape`` are those of the empty tensor."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        t = Parameter(_leaf(np.empty(0, _dtype(dtype))), requires_grad)
        t.__dict__[_UNINIT] = True
        return t


def _materialize(param, shape, dtype=None):
    """PyTorch's ``UninitializedParameter.materialize``: the same object becomes an
    (uninitialized-valued) parameter of ``shape``."""
    dt = np.dtype(param.dtype) if dtype is None else _dtype(dtype)
    param.data = np.empty(tuple(shape), dt)
    del param.__dict__[_UNINIT]


class _LazyModuleMixin:
    """PyTorch's ``LazyModuleMixin``: a forward pre-hook runs ``initialize_parameters``
    on the first call, then the module becomes ``cls_to_become``; a state dict with
    real tensors materializes the parameters it names."""
    cls_to_become = None

    def _lazy_init(self):
        # (the handle is not kept: a module holding one would not pickle)
        self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _remove_initialize_hook(self):
        for key, hook in list(self._forward_pre_hooks.items()):
            if getattr(hook, '__func__', None) is _LazyModuleMixin._infer_parameters:
                del self._forward_pre_hooks[key]
                self._forward_pre_hooks_with_kwargs.pop(key, None)

    def has_uninitialized_params(self):
        return any(_is_lazy(t) for t in list(self._parameters.values()) +
                   list(self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f'module {self._get_name()} has not been fully initialized')
        module._remove_initialize_hook()
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # an uninitialized parameter is saved as itself (PyTorch's does not detach)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or _is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or _is_lazy(b) else b.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        for name, param in list(self._parameters.items()) + list(self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and _is_lazy(param):
                value = state_dict[key]
                if not _is_lazy(value):
                    with no_grad():
                        _materialize(param, tuple(value.shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, assign)

    def _get_name(self):
        return type(self).__name__


class LazyLinear(_LazyModuleMixin, Linear):
    """A ``Linear`` whose ``in_features`` is the last dimension of its first input;
    it then becomes a ``Linear``, initialised as one."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_init()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):  # noqa: A002
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                _materialize(self.weight, (self.out_features, self.in_features))
                if self.bias is not None:
                    _materialize(self.bias, (self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f'The in_features inferred from input: {input.shape[-1]} '
                                     f'is not equal to in_features from self.weight: '
                                     f'{self.weight.shape[-1]}')
            self.in_features = input.shape[-1]


class _UninitializedBufferMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and not isinstance(obj, Parameter) and _is_lazy(obj)


class UninitializedBuffer(metaclass=_UninitializedBufferMeta):
    """A buffer with no shape yet (a lazy norm layer's running statistics), which
    the module materializes on its first call; a plain empty ``tape.Tensor`` with
    a marker, as ``UninitializedParameter``."""
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        t = _leaf(np.empty(0, _dtype(dtype)))
        if requires_grad:
            t.requires_grad_(True)
        t.__dict__[_UNINIT] = True
        t.__dict__['persistent'] = persistent
        return t


class _LazyConvXdMixin(_LazyModuleMixin):
    """PyTorch's ``_LazyConvXdMixin``: ``in_channels`` is the channel dimension of
    the first input (dim 1, or 0 for an unbatched one)."""

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        if self.has_uninitialized_params():
            with no_grad():
                self.in_channels = self._get_in_channels(input)
                if self.in_channels % self.groups != 0:
                    raise ValueError('in_channels must be divisible by groups')
                if self.transposed:
                    shape = (self.in_channels, self.out_channels // self.groups)
                else:
                    shape = (self.out_channels, self.in_channels // self.groups)
                _materialize(self.weight, shape + tuple(self.kernel_size))
                if self.bias is not None:
                    _materialize(self.bias, (self.out_channels,))
                self.reset_parameters()

    def _get_in_channels(self, input):  # noqa: A002
        n = self._dims + 1
        if input.dim() not in (n, n + 1):
            raise RuntimeError(f'Expected {n}D (unbatched) or {n + 1}D (batched) input to '
                               f'{type(self).__name__}, but got input of size: '
                               f'{input.shape}')
        return input.shape[1] if input.dim() == n + 1 else input.shape[0]

    def _lazy_weights(self, out_channels, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_init()


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode='zeros', device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device, dtype)
        self._lazy_weights(out_channels, bias, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode='zeros', device=None,
                 dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        self._lazy_weights(out_channels, bias, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A ``Conv1d`` whose ``in_channels`` is the channel size of its first input; it
    then becomes a ``Conv1d``, initialised as one."""
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A ``Conv2d`` whose ``in_channels`` is the channel size of its first input."""
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A ``Conv3d`` whose ``in_channels`` is the channel size of its first input."""
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ``ConvTranspose1d`` whose ``in_channels`` is the channel size of its first input."""
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ``ConvTranspose2d`` whose ``in_channels`` is the channel size of its first input."""
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ``ConvTranspose3d`` whose ``in_channels`` is the channel size of its first input."""
    cls_to_become = ConvTranspose3d


class _LazyNormBase(_LazyModuleMixin):
    """PyTorch's ``_LazyNormBase``: ``num_features`` is dim 1 of the first input;
    the affine parameters and running statistics are made then."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        # (affine, bias and the running statistics are off here, as in PyTorch, so
        # that no tensor is made only to be replaced)
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = _leaf(np.array(0, np.int64))
        self._lazy_init()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):  # noqa: A002
        if self.has_uninitialized_params():
            with no_grad():
                self.num_features = input.shape[1]
                if self.affine:
                    _materialize(self.weight, (self.num_features,))
                    if self.bias is not None:
                        _materialize(self.bias, (self.num_features,))
                if self.track_running_stats:
                    _materialize(self.running_mean, (self.num_features,))
                    _materialize(self.running_var, (self.num_features,))
                self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A ``BatchNorm1d`` whose ``num_features`` is dim 1 of its first input; it then
    becomes a ``BatchNorm1d``."""
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A ``BatchNorm2d`` whose ``num_features`` is dim 1 of its first input."""
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A ``BatchNorm3d`` whose ``num_features`` is dim 1 of its first input."""
    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    """An ``InstanceNorm1d`` whose ``num_features`` is dim 1 of its first input."""
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    """An ``InstanceNorm2d`` whose ``num_features`` is dim 1 of its first input."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    """An ``InstanceNorm3d`` whose ``num_features`` is dim 1 of its first input."""
    cls_to_become = InstanceNorm3d


__all__ += ['UninitializedBuffer', 'LazyConv1d', 'LazyConv2d', 'LazyConv3d',
            'LazyConvTranspose1d', 'LazyConvTranspose2d', 'LazyConvTranspose3d',
            'LazyBatchNorm1d', 'LazyBatchNorm2d', 'LazyBatchNorm3d',
            'LazyInstanceNorm1d', 'LazyInstanceNorm2d', 'LazyInstanceNorm3d']
