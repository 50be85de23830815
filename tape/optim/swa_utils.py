"""Stochastic weight averaging, as ``torch.optim.swa_utils``: ``AveragedModel``
(a running SWA or EMA copy of a model), the averaging functions, ``SWALR`` (anneal
the lr to a constant SWA lr) and ``update_bn`` (recompute BatchNorm statistics)."""
import itertools
import math
from copy import deepcopy

import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor, _leaf
from .lr_scheduler import LRScheduler, _format_param, _warn_get_lr_called_within_step

__all__ = ['AveragedModel', 'update_bn', 'SWALR', 'get_ema_multi_avg_fn',
           'get_swa_multi_avg_fn', 'get_ema_avg_fn', 'get_swa_avg_fn']


def _is_float(t):
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA update of lists of averaged parameters:
    ``ema = lerp(ema, current, 1 - decay)``."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f'Invalid decay value {decay} provided. Please provide a value in '
                         '[0,1] range.')

    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            if _is_float(ema_param_list[0]):
                for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running-mean update of lists of averaged parameters:
    ``avg = lerp(avg, current, 1 / (num_averaged + 1))``."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with no_grad():
            if _is_float(averaged_param_list[0]):
                w = 1 / (num_averaged + 1)
                if isinstance(w, Tensor):       # as PyTorch: a default-dtype weight tensor
                    w = float(w)
                for p_avg, p_model in zip(averaged_param_list, current_param_list,
                                          strict=True):
                    p_avg.lerp_(p_model, w)
            else:
                if isinstance(num_averaged, Tensor):
                    raise RuntimeError(
                        'Integer division with addcdiv is no longer supported, and in a '
                        'future  release addcdiv will perform a true division of tensor1 '
                        'and tensor2. The historic addcdiv behavior can be implemented as '
                        '(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) '
                        'for integer inputs and as (input + value * tensor1 / tensor2) for '
                        'float inputs. The future addcdiv behavior is just the latter '
                        'implementation: (input + value * tensor1 / tensor2), for all dtypes.')
                for p_avg, p_model in zip(averaged_param_list, current_param_list,
                                          strict=True):
                    p_avg.add_(p_model - p_avg, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An EMA update of one parameter: ``decay * ema + (1 - decay) * current``."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f'Invalid decay value {decay} provided. Please provide a value in '
                         '[0,1] range.')

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """A running-mean update of one parameter:
    ``avg + (current - avg) / (num_averaged + 1)``."""

    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def _group_by_dtype(avg_list, model_list):
    groups = {}
    for a, m in zip(avg_list, model_list):
        lists = groups.setdefault(a.dtype, ([], []))
        lists[0].append(a)
        lists[1].append(m)
    return groups


def _module_base():
    from ..nn.modules import Module
    return Module


class AveragedModel(_module_base()):
    """``torch.optim.swa_utils.AveragedModel``: a deep copy of ``model`` whose
    parameters (and buffers, with ``use_buffers``) ``update_parameters(model)``
    averages over the calls (SWA by default; ``avg_fn``/``multi_avg_fn`` for EMA
    or any other rule); ``n_averaged`` (a long buffer) counts the calls.

    >>> import tape
    >>> from tape.optim.swa_utils import AveragedModel
    >>> lin = tape.nn.Linear(1, 1, bias=False)
    >>> swa = AveragedModel(lin)
    >>> for v in (1.0, 2.0, 6.0):
    ...     _ = lin.weight.data.fill_(v)
    ...     swa.update_parameters(lin)
    >>> swa.module.weight.item(), int(swa.n_averaged)
    (3.0, 3)
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError('Only one of avg_fn and multi_avg_fn should be provided')
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer('n_averaged', _leaf(np.array(0, np.int64)))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold ``model``'s current parameters into the average."""
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers())
                      if self.use_buffers else self.parameters())
        model_param = (itertools.chain(model.parameters(), model.buffers())
                       if self.use_buffers else model.parameters())
        self_detached, model_detached = [], []
        with no_grad():
            copy_param = bool(self.n_averaged == 0)
            for p_averaged, p_model in zip(self_param, model_param):
                p_model_ = p_model.detach()
                self_detached.append(p_averaged.detach())
                model_detached.append(p_model_)
                if copy_param:
                    p_averaged.detach().copy_(p_model_)
            if int(self.n_averaged) > 0:
                if self.multi_avg_fn is not None or self.avg_fn is None:
                    for self_params, model_params in _group_by_dtype(
                            self_detached, model_detached).values():
                        if self.multi_avg_fn:
                            self.multi_avg_fn(self_params, model_params, self.n_averaged)
                        else:       # CPU: PyTorch's per-tensor running mean
                            avg_fn = get_swa_avg_fn()
                            for p_averaged, p_model in zip(self_params, model_params,
                                                           strict=True):
                                p_averaged.copy_(avg_fn(p_averaged, p_model,
                                                        self.n_averaged))
                else:
                    for p_averaged, p_model in zip(self_detached, model_detached,
                                                   strict=True):
                        p_averaged.detach().copy_(
                            self.avg_fn(p_averaged.detach(), p_model, self.n_averaged))
            if not self.use_buffers:
                # buffers are not averaged: keep them in sync with the source model
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(),
                                          strict=True):
                    b_swa.detach().copy_(b_model.detach())
            self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recompute the running statistics of every BatchNorm in ``model`` with one
    pass over ``loader`` (a cumulative average: ``momentum = None`` meanwhile)."""
    from ..nn._conv_modules import _BatchNorm
    with no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for input in loader:  # noqa: A001
            if isinstance(input, (list, tuple)):
                input = input[0]  # noqa: A001
            if device is not None:
                input = input.to(device)  # noqa: A001
            model(input)
        for bn_module in momenta:
            bn_module.momentum = momenta[bn_module]
        model.train(was_training)


class SWALR(LRScheduler):
    """``torch.optim.swa_utils.SWALR``: anneal each group's lr to its ``swa_lr``
    over ``anneal_epochs`` steps (``'cos'`` or ``'linear'``), then hold it.

    >>> import tape
    >>> opt = tape.optim.SGD([tape.zeros(1, requires_grad=True)], lr=1.0)
    >>> s = tape.optim.swa_utils.SWALR(opt, swa_lr=0.5, anneal_epochs=2,
    ...                                anneal_strategy='linear')
    >>> lrs = []
    >>> for _ in range(3):
    ...     opt.step(); s.step(); lrs.append(round(s.get_last_lr()[0], 6))
    >>> lrs
    [0.75, 0.5, 0.5]
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy='cos',
                 last_epoch=-1):
        swa_lrs = _format_param('swa_lr', optimizer, swa_lr)
        for swa_lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group['swa_lr'] = swa_lr
        if anneal_strategy not in ['cos', 'linear']:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f'{anneal_strategy}')
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f'anneal_epochs must be equal or greater than 0, got '
                             f'{anneal_epochs}')
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group['lr'], group['swa_lr'], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group['swa_lr'] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        if anneal_strategy == 'cos':
            self.anneal_func = self._cosine_anneal
        else:
            self.anneal_func = self._linear_anneal

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items()
                if key not in ('optimizer', 'anneal_func')}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
