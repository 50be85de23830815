"""The ``Optimizer`` base class: parameter groups, per-parameter state,
``zero_grad``, ``state_dict``, and the in-place parameter write every
optimizer's ``step`` goes through.

Updates are NumPy expressions on the parameter's own array followed by one
version bump (``_tensor._bump_version``, the same counter tape's in-place ops
use), so a graph that saved the parameter before ``step()`` refuses to run
backward afterwards, as in PyTorch, and a step allocates no tensors.
"""
import functools
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from .._grad_mode import enable_grad, no_grad
from .._tensor import Tensor, _bump_version, _leaf
from .._views import forget_released_view_tapes

__all__ = ['Optimizer', 'required', 'register_optimizer_step_pre_hook',
           'register_optimizer_step_post_hook']

# hooks every optimizer's step runs (before its own): id -> hook
_global_pre_hooks = OrderedDict()
_global_post_hooks = OrderedDict()


def _handle(*dicts):
    from ..nn.modules import RemovableHandle
    return RemovableHandle(*dicts)


def register_optimizer_step_pre_hook(hook):
    """``hook(optimizer, args, kwargs)`` before every optimizer's ``step``; it may
    return new ``(args, kwargs)``.  Returns a handle with ``remove()``."""
    h = _handle(_global_pre_hooks)
    _global_pre_hooks[h.id] = hook
    return h


def register_optimizer_step_post_hook(hook):
    """``hook(optimizer, args, kwargs)`` after every optimizer's ``step``."""
    h = _handle(_global_post_hooks)
    _global_post_hooks[h.id] = hook
    return h


def _run_pre_hooks(opt, args, kwargs):
    for hooks in (_global_pre_hooks, opt.__dict__.get('_step_pre_hooks')):
        for hook in list((hooks or {}).values()):
            r = hook(opt, args, kwargs)
            if r is not None:
                if not (isinstance(r, tuple) and len(r) == 2):
                    raise RuntimeError(f'{hook} must return None or a tuple of (new_args, '
                                       f'new_kwargs), but got {r}.')
                args, kwargs = r
    return args, kwargs


def _with_step_hooks(step):
    """``step`` running the optimizer's and the global step hooks around it (what
    ``Optimizer.__init__`` puts on a class, once: PyTorch patches the same way)."""
    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        d = self.__dict__
        if not (_global_pre_hooks or _global_post_hooks or d.get('_step_pre_hooks')
                or d.get('_step_post_hooks')):
            return step(self, *args, **kwargs)
        args, kwargs = _run_pre_hooks(self, args, kwargs)
        out = step(self, *args, **kwargs)
        for hooks in (d.get('_step_post_hooks'), _global_post_hooks):
            for hook in list((hooks or {}).values()):
                hook(self, args, kwargs)
        return out
    hooked._step_hooked = True
    return hooked


class _RequiredParameter:
    """The default of an option that every parameter group must set itself."""

    def __repr__(self):
        return '<required parameter>'


required = _RequiredParameter()


def _typename(x):
    return x.type() if isinstance(x, Tensor) else type(x).__name__


def _scalar(x):
    """A Python float for an option given as a number or a one-element tensor."""
    return float(x._data) if isinstance(x, Tensor) else x


class Optimizer:
    """Base class of tape's optimizers, with ``torch.optim.Optimizer``'s interface.

    >>> import tape
    >>> w = tape.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = tape.optim.SGD([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([0., 0.], requires_grad=True)
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        cls = type(self)
        if not getattr(cls.step, '_step_hooked', False):
            cls.step = _with_step_hooks(cls.step)
        if isinstance(params, Tensor):
            raise TypeError('params argument given to the optimizer should be an iterable of '
                            'Tensors or dicts, but got ' + _typename(params))
        self.state = defaultdict(dict)       # keyed by the parameter (Tensor hashes by id)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError('optimizer got an empty parameter list')
        if not isinstance(param_groups[0], dict):
            param_groups = [{'params': param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # -- pickling and printing, as PyTorch
    def __getstate__(self):
        return {'defaults': self.defaults, 'state': self.state,
                'param_groups': self.param_groups}

    # options a group saved by an older PyTorch-style state may lack, per optimizer
    # (what each PyTorch optimizer's __setstate__ fills in)
    _group_defaults = {}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for group in self.param_groups:
            for key, value in self._group_defaults.items():
                group.setdefault(key, value)

    def __repr__(self):
        s = self.__class__.__name__ + ' ('
        for i, group in enumerate(self.param_groups):
            s += f'\nParameter Group {i}\n'
            for key in sorted(group.keys()):
                if key != 'params':
                    s += f'    {key}: {group[key]}\n'
        return s + ')'

    # -- step hooks
    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` before this optimizer's ``step``; it may
        return new ``(args, kwargs)``.  Returns a handle with ``remove()``."""
        hooks = self.__dict__.setdefault('_step_pre_hooks', OrderedDict())
        h = _handle(hooks)
        hooks[h.id] = hook
        return h

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` after this optimizer's ``step``."""
        hooks = self.__dict__.setdefault('_step_post_hooks', OrderedDict())
        h = _handle(hooks)
        hooks[h.id] = hook
        return h

    # -- state_dict / load_state_dict hooks, as PyTorch's
    def _register_hook(self, attr, hook, prepend):
        hooks = self.__dict__.setdefault(attr, OrderedDict())
        h = _handle(hooks)
        hooks[h.id] = hook
        if prepend:
            hooks.move_to_end(h.id, last=False)
        return h

    def _hooks(self, attr):
        return list(self.__dict__.get(attr, {}).values())

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer)`` before ``state_dict`` builds the dict.  Returns a
        handle with ``remove()``."""
        return self._register_hook('_optimizer_state_dict_pre_hooks', hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict)`` on the dict ``state_dict`` returns; a
        non-None result replaces it."""
        return self._register_hook('_optimizer_state_dict_post_hooks', hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict)`` before ``load_state_dict`` loads (a
        shallow copy of) the dict; a non-None result is loaded instead."""
        return self._register_hook('_optimizer_load_state_dict_pre_hooks', hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer)`` after ``load_state_dict`` has loaded."""
        return self._register_hook('_optimizer_load_state_dict_post_hooks', hook, prepend)

    # -- groups
    def add_param_group(self, param_group):
        """Add a dict of parameters (``'params'``) and options; missing options
        take the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f'param_group must be a dict, but got {type(param_group)}')
        params = param_group['params']
        if isinstance(params, Tensor):
            param_group['params'] = [params]
        elif isinstance(params, set):
            raise TypeError('optimizer parameters need to be organized in ordered collections, '
                            'but the ordering of tensors in sets will change between runs. '
                            'Please use a list instead.')
        else:
            param_group['params'] = list(params)
        tensors, names = [], []
        for param in param_group['params']:
            if isinstance(param, tuple):               # (name, tensor), as named_parameters()
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group['params'] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError('all optimizer params should be with/without names. Some param '
                                 'names are missing')
            param_group['param_names'] = names
        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError('optimizer can only optimize Tensors, but one of the params is '
                                + _typename(param))
            if not self.defaults.get('differentiable', None) \
                    and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError('parameter group didn\'t specify a value of required '
                                 f'optimization parameter {name}')
            param_group.setdefault(name, default)
        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            import warnings
            warnings.warn('optimizer contains a parameter group with duplicate parameters; in '
                          'future, this will cause an error; see '
                          'github.com/pytorch/pytorch/issues/40967 for more information',
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group['params'])
            if ('param_names' in param_group) != ('param_names' in group):
                txt = 'with names' if 'param_names' in param_group else 'without names'
                raise ValueError('all optimizer param groups should be with/without names. '
                                 f'cannot add param group {txt} to the optimizer')
        if not seen.isdisjoint(ids):
            raise ValueError('some parameters appear in more than one parameter group')
        self.param_groups.append(param_group)

    # -- gradients
    def zero_grad(self, set_to_none=True):
        """Drop every parameter's ``.grad`` (``set_to_none=True``) or fill it with zeros."""
        for group in self.param_groups:
            for p in group['params']:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if g._tape is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        raise NotImplementedError

    def _closure_loss(self, closure):
        """The closure's loss, computed with grad recording on (the update itself
        runs under ``no_grad``)."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- checkpoints
    def state_dict(self):
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}``:
        parameters replaced by their position across groups, as in PyTorch."""
        for hook in self._hooks('_optimizer_state_dict_pre_hooks'):
            hook(self)
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != 'params'}
            for i, p in enumerate(group['params'], start):
                mapping.setdefault(id(p), i)
            packed['params'] = [mapping[id(p)] for p in group['params']]
            start += len(packed['params'])
            return packed

        param_groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        out = {'state': state, 'param_groups': param_groups}
        for hook in self._hooks('_optimizer_state_dict_post_hooks'):
            r = hook(self, out)
            if r is not None:
                out = r
        return out

    def load_state_dict(self, state_dict):
        """Restore options and state saved by ``state_dict`` (of an optimizer over
        parameters of the same shapes, in the same order)."""
        state_dict = state_dict.copy()
        for hook in self._hooks('_optimizer_load_state_dict_pre_hooks'):
            r = hook(self, state_dict)
            if r is not None:
                state_dict = r
        groups = self.param_groups
        saved_groups = deepcopy(state_dict['param_groups'])
        if len(groups) != len(saved_groups):
            raise ValueError('loaded state dict has a different number of parameter groups')
        if any(len(g['params']) != len(s['params']) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g['params'] for g in saved_groups),
                          chain.from_iterable(g['params'] for g in groups)))

        def cast(param, value, key=None):
            # a state tensor takes its parameter's dtype, except the step count
            if isinstance(value, Tensor):
                if key != 'step' and param._data.dtype.kind in 'fc':
                    return value.to(param._data.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict['state'].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group['params'] = group['params']
            if 'param_names' in group and 'param_names' not in new_group:
                new_group['param_names'] = group['param_names']
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({'state': state, 'param_groups': param_groups})
        for hook in self._hooks('_optimizer_load_state_dict_post_hooks'):
            hook(self)

    # -- the update, shared by every optimizer
    @staticmethod
    def _grads(group):
        """(param, grad array) for each parameter of ``group`` that has a ``.grad``,
        the gradient negated for ``maximize`` (a new array: ``.grad`` is left as is)."""
        maximize = group.get('maximize', False)
        out = []
        for p in group['params']:
            g = p._grad
            if g is None:
                continue
            gd = np.asarray(g._data)
            if gd.dtype != p._data.dtype:
                raise RuntimeError(f'{type(p).__name__}: a gradient of dtype {gd.dtype} for a '
                                   f'parameter of dtype {p._data.dtype}')
            out.append((p, np.negative(gd) if maximize else gd))
        return out


def _check_adam_args(lr, eps, betas, weight_decay):
    """The argument checks the Adam family's constructors share, with PyTorch's messages."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError('Tensor lr must be 1-element')
    if not 0.0 <= lr:
        raise ValueError(f'Invalid learning rate: {lr}')
    if not 0.0 <= eps:
        raise ValueError(f'Invalid epsilon value: {eps}')
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f'Invalid beta parameter at index 0: {betas[0]}')
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f'Invalid beta parameter at index 1: {betas[1]}')
    if not 0.0 <= weight_decay:
        raise ValueError(f'Invalid weight_decay value: {weight_decay}')


def _zeros_state(d):
    """A new state tensor of zeros shaped and typed as the parameter array ``d``."""
    return _leaf(np.zeros(np.shape(d), np.asarray(d).dtype))


def _step_state():
    """The step count PyTorch keeps per parameter: a float32 0-d tensor."""
    return _leaf(np.zeros((), np.float32))


def _next_step(state):
    """Increment the stored step count in place and return it as a Python float."""
    s = state['step']
    arr = s._data
    if type(arr) is not np.ndarray:
        arr = s._data = np.array(arr, np.float32)
    arr += 1
    return float(arr)


def _writable(p):
    """The array to write ``p``'s new values into.  Normally ``p``'s own storage;
    a scratch copy when ``p`` carries extra state (a detached alias of a graph
    tensor, views of it that a graph saved, hooks): its write must go through
    tape's in-place op, which marks those graphs (``_commit``)."""
    d = p._data
    if p._extra is not None:
        forget_released_view_tapes(p)
    if type(d) is np.ndarray and p._extra is None:
        return d
    return np.array(d)


def _commit(p, d):
    """Finish an in-place update of ``p`` written into ``d`` (from ``_writable``):
    bump the version counter shared with every tensor over the same storage."""
    if d is p._data:
        _bump_version(p)
    else:
        with no_grad():
            p.copy_(_leaf(d))


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_kernels = None


def _fused_kernels(*arrays):
    """compiler/optim_kernels.py when ``arrays`` (a parameter, its gradient and
    its state) are flat-able C-contiguous arrays of one float dtype and size,
    so its one-pass updates apply; else None (the NumPy steps run)."""
    global _kernels
    d = arrays[0]
    dt = d.dtype
    if dt not in _FLOATS:
        return None
    n = d.size
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != dt or a.size != n \
                or not a.flags.c_contiguous:
            return None
    if _kernels is None:
        from compiler import optim_kernels
        _kernels = optim_kernels
    return _kernels


def _lerp_(a, b, w, tmp):
    """``a.lerp_(b, w)`` with PyTorch's CPU formula (it switches form at w = 0.5)."""
    np.subtract(b, a, out=tmp)
    if abs(w) < 0.5:
        tmp *= w
        a += tmp
    else:
        tmp *= 1 - w
        np.subtract(b, tmp, out=a)
