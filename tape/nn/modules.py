"""``tape.nn`` modules: PyTorch's ``nn.Module`` layer, so model code written with
``torch.nn`` runs on tape with its import changed.

>>> import tape
>>> from tape import nn
>>> _ = tape.manual_seed(0)
>>> model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
>>> [name for name, _ in model.named_parameters()]
['0.weight', '0.bias', '2.weight', '2.bias']
>>> loss = nn.MSELoss()(model(tape.ones(5, 3)), tape.zeros(5, 1))
>>> loss.backward()
>>> model[0].weight.grad.shape
tape.Size([4, 3])

Why ``Parameter`` is not a subclass of ``Tensor``
--------------------------------------------------
tape's hot paths test ``type(x) is Tensor`` (the fast lanes of ``tape/_ops.py``,
the inline leaf delivery of the sweep, the optimizer-style in-place fast path),
so a Tensor subclass would leave every op on a parameter to the general path.
Worse, a subclass on the right of a binary op (``x * p``, x a plain Tensor)
recurses without end in the binary ``fwd`` of ``tape/_ops.py`` at present.
Measured (8 elements, 1000 ``p * x``): the subclass cost 7% more per op; the
marked plain tensor costs nothing.
So ``Parameter(data)`` returns a plain ``Tensor`` leaf that requires grad and
carries one marker attribute, ``_is_param``, in its instance ``__dict__``.  The
marker is not kept in the tensor's ``_extra`` dict on purpose: a non-None
``_extra`` takes a leaf off the sweep's inline delivery and off the in-place
fast path that ``p.add_(...)`` in an optimizer step uses.

``isinstance(t, nn.Parameter)`` is true for marked tensors (a metaclass
``__instancecheck__``), and a marked tensor prints as PyTorch's
``Parameter containing:`` (``Tensor.__repr__`` reads the marker).
``type(p) is nn.Parameter`` is false, and ``p.detach()``, ``p.data``,
``p.clone()`` or ``copy.deepcopy(p)`` of a lone tensor are plain tensors, as
derived tensors are in PyTorch; a deep-copied or unpickled ``Module`` marks its
parameters again (``Module.__setstate__``).
"""
import itertools as _itertools
import math as _math
import sys as _sys
import warnings as _warnings
import weakref as _weakref
from collections import OrderedDict as _OrderedDict
from collections import namedtuple as _namedtuple

import numpy as np

from .._grad_mode import no_grad
from .._tensor import DTYPE_NAMES, Tensor, _default_dtype, _leaf, _storage
from . import functional as F
from . import init
from . import _module_hooks as _mh
from ._module_hooks import _global_any

__all__ = ['Parameter', 'Buffer', 'Module', 'Sequential', 'ModuleList', 'ModuleDict', 'ParameterList',
           'Linear', 'Bilinear', 'Embedding', 'LayerNorm', 'Dropout', 'Flatten', 'Identity',
           'ReLU', 'Tanh', 'Sigmoid', 'GELU', 'SiLU', 'ELU', 'LeakyReLU', 'Softplus', 'Softmax',
           'LogSoftmax', 'MSELoss', 'L1Loss', 'CrossEntropyLoss', 'NLLLoss', 'BCELoss',
           'BCEWithLogitsLoss']

_MARK = '_is_param'


# -- Parameter ----------------------------------------------------------------
def _is_parameter(t):
    return type(t) is Tensor and t.__dict__.get(_MARK, False)


def _mark(t):
    t.__dict__[_MARK] = True
    return t


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return _is_parameter(obj)


class Parameter(metaclass=_ParameterMeta):
    """A tensor that a ``Module`` registers as a parameter when assigned to it.

    ``Parameter(t)`` shares ``t``'s storage, as in PyTorch, and is a leaf that
    requires grad (unless ``requires_grad=False``).  It is a plain ``tape.Tensor``
    with a marker, so it keeps the fast paths (see the module docstring).

    >>> import tape
    >>> p = tape.nn.Parameter(tape.zeros(2))
    >>> p
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    >>> isinstance(p, tape.nn.Parameter), type(p) is tape.Tensor
    (True, True)
    """
    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _leaf(np.empty(0, _default_dtype[0]))
        elif not isinstance(data, Tensor):
            raise TypeError(f'Parameter: data must be a Tensor, not {type(data).__name__}')
        # a new leaf over the same array: Parameter(t) shares t's storage
        t = _leaf(_storage(data))
        if requires_grad:
            t.requires_grad_(True)
        return _mark(t)




# -- Buffer -------------------------------------------------------------------
_BUFFER = '_is_buffer'


class _BufferMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.__dict__.get(_BUFFER, False)


class Buffer(metaclass=_BufferMeta):
    """PyTorch's ``nn.Buffer``: a tensor that a ``Module`` registers as a buffer
    (persistent in ``state_dict()`` unless ``persistent=False``) when assigned to
    it.  As ``Parameter``, a plain ``tape.Tensor`` (``data`` detached) with a marker.

    >>> import tape
    >>> m = tape.nn.Module()
    >>> m.steps = tape.nn.Buffer(tape.zeros(2), persistent=False)
    >>> list(m.named_buffers()), list(m.state_dict())
    ([('steps', tensor([0., 0.]))], [])
    """
    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _leaf(np.empty(0, _default_dtype[0]))
        elif not isinstance(data, Tensor):
            raise TypeError(f'Buffer: data must be a Tensor, not {type(data).__name__}')
        t = data.detach().requires_grad_(data.requires_grad)
        t.__dict__['persistent'] = persistent
        t.__dict__[_BUFFER] = True
        return t


_EXTRA_STATE = '_extra_state'      # the state-dict key of get_extra_state's value


# -- hooks ----------------------------------------------------------------------
class RemovableHandle:
    """What ``register_*_hook`` returns: ``handle.remove()`` unregisters the hook
    (also as a context manager)."""
    _ids = _itertools.count()

    def __init__(self, *dicts):
        self.id = next(RemovableHandle._ids)
        self._dicts = [_weakref.ref(d) for d in dicts]

    def remove(self):
        for ref in self._dicts:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks, hook, prepend, *flag_dicts):
    """Register ``hook`` in the ordered dict ``hooks``; each dict of ``flag_dicts``
    (a set of flags stored as a dict, so the handle can drop the entry) gets the id
    too."""
    handle = RemovableHandle(hooks, *flag_dicts)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    for d in flag_dicts:
        d[handle.id] = True
    return handle


class _IncompatibleKeys(_namedtuple('IncompatibleKeys', ['missing_keys', 'unexpected_keys'])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return '<All keys matched successfully>'
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    """Indent every line of ``text`` but the first by ``spaces``."""
    first, *rest = text.split('\n')
    if not rest:
        return text
    pad = ' ' * spaces
    return first + '\n' + '\n'.join(pad + line for line in rest)


def _parse_to(args, kwargs):
    """The dtype ``Module.to(...)`` asks for, or None (devices are all the CPU)."""
    dtype = kwargs.pop('dtype', None)
    kwargs.pop('device', None)
    kwargs.pop('non_blocking', None)
    kwargs.pop('copy', None)
    kwargs.pop('memory_format', None)
    if kwargs:
        raise TypeError(f'to() got unexpected keyword arguments {sorted(kwargs)}')
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, str) or a is None or type(a).__name__ == 'device':
            continue            # 'cpu' or a device: tape has only the CPU
        else:
            dtype = a
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype.kind not in 'fc':
            raise TypeError(f'nn.Module.to only accepts floating point or complex dtypes, but '
                            f'got desired dtype={DTYPE_NAMES.get(dtype, dtype)}')
    return dtype


# -- Module -----------------------------------------------------------------------
class Module:
    """Base class of every layer: attributes that are Parameters, Modules or
    buffers are registered, so ``parameters()``, ``state_dict()``, ``train()``,
    ``to()`` and the rest reach them, in PyTorch's order and with its names.

    >>> import tape
    >>> class Affine(tape.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.scale = tape.nn.Parameter(tape.ones(2))
    ...         self.register_buffer('shift', tape.zeros(2))
    ...     def forward(self, x):
    ...         return x * self.scale + self.shift
    >>> list(Affine().state_dict())
    ['scale', 'shift']
    """
    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f'{type(self).__name__}.__init__() got unexpected arguments '
                            f'{args} {kwargs}')
        # written to __dict__ directly: our own __setattr__ reads these dicts.
        # The hook tables are OrderedDicts because a handle holds them weakly
        # (a plain dict cannot be weakly referenced)
        d = self.__dict__
        d['training'] = True
        d['_parameters'] = {}
        d['_buffers'] = {}
        d['_non_persistent_buffers_set'] = set()
        d['_modules'] = {}
        d['_forward_hooks'] = _OrderedDict()
        d['_forward_hooks_with_kwargs'] = _OrderedDict()
        d['_forward_hooks_always_called'] = _OrderedDict()
        d['_forward_pre_hooks'] = _OrderedDict()
        d['_forward_pre_hooks_with_kwargs'] = _OrderedDict()
        d['_backward_hooks'] = _OrderedDict()
        d['_backward_pre_hooks'] = _OrderedDict()
        d['_is_full_backward_hook'] = None
        d['_state_dict_hooks'] = _OrderedDict()
        d['_state_dict_pre_hooks'] = _OrderedDict()
        d['_load_state_dict_pre_hooks'] = _OrderedDict()
        d['_load_state_dict_post_hooks'] = _OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # -- calling -------------------------------------------------------------
    # Until a backward hook or a global hook is first registered (anywhere),
    # ``__call__`` tests the forward hook tables only; the first such
    # registration switches every module to ``_call_all`` (_use_all_hooks), which
    # tests the backward and global tables too (about 70 ns more a call).
    def __call__(self, *args, **kwargs):
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)        # the common case: no hooks
        return self._call_with_hooks(args, kwargs)

    def _call_all(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or \
                self._backward_pre_hooks or _global_any:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        # torch.nn.Module._call_impl: global hooks run before the module's own
        result = None
        called = set()
        try:
            full_backward_hooks, non_full_backward_hooks = [], []
            backward_pre_hooks = []
            if self._backward_pre_hooks or _mh._global_backward_pre_hooks:
                backward_pre_hooks = self._get_backward_pre_hooks()
            if self._backward_hooks or _mh._global_backward_hooks:
                full_backward_hooks, non_full_backward_hooks = self._get_backward_hooks()
            pre_with_kwargs = self._forward_pre_hooks_with_kwargs
            for hid, hook in (*_mh._global_forward_pre_hooks.items(),
                              *self._forward_pre_hooks.items()):
                if hid in pre_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if not (isinstance(res, tuple) and len(res) == 2):
                            raise RuntimeError('forward pre-hook must return None or a tuple '
                                               f'of (new_args, new_kwargs), but got {res}.')
                        args, kwargs = res
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
            bw_hook = None
            if full_backward_hooks or backward_pre_hooks:
                bw_hook = _mh.BackwardHook(self, full_backward_hooks, backward_pre_hooks)
                args = bw_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            if bw_hook is not None:
                bw_hook.check_inputs()
            g_always = _mh._global_forward_hooks_always_called
            g_kwargs = _mh._global_forward_hooks_with_kwargs
            for hid, hook in (*_mh._global_forward_hooks.items(), *self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called or hid in g_always:
                    called.add(hid)
                if hid in self._forward_hooks_with_kwargs or hid in g_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
            if bw_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    _warnings.warn('For backward hooks to be called, module output should be a '
                                   'Tensor or a tuple of Tensors but received '
                                   f'{type(result)}', stacklevel=3)
                result = bw_hook.setup_output_hook(result)
            if non_full_backward_hooks:
                var = result
                while not isinstance(var, Tensor):
                    if isinstance(var, dict):
                        var = next(v for v in var.values() if isinstance(v, Tensor))
                    else:
                        var = var[0]
                grad_fn = var.grad_fn
                if grad_fn is not None:
                    for hook in non_full_backward_hooks:
                        grad_fn.register_hook(_mh._WrappedHook(hook, self))
                    _mh.maybe_warn_non_full_backward_hook(args, result, grad_fn)
            return result
        except Exception:
            # hooks registered with always_call=True run even when forward raised
            for hid, hook in list(_mh._global_forward_hooks.items()):
                if hid in _mh._global_forward_hooks_always_called and hid not in called:
                    try:
                        res = hook(self, args, result)
                        if res is not None:
                            result = res
                    except Exception as e:      # noqa: BLE001 (the forward's error is raised)
                        _warnings.warn('global module forward hook with ``always_call=True`` '
                                       'raised an exception that was silenced as another error '
                                       f'was raised in forward: {e}', stacklevel=2)
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called and hid not in called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            res = hook(self, args, kwargs, result)
                        else:
                            res = hook(self, args, result)
                        if res is not None:
                            result = res
                    except Exception as e:      # noqa: BLE001 (the forward's error is raised)
                        _warnings.warn('module forward hook with ``always_call=True`` raised an '
                                       'exception that was silenced as another error was raised '
                                       f'in forward: {e}', stacklevel=2)
            raise

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with
        ``with_kwargs``) runs before ``forward``; a non-None result replaces the
        arguments."""
        flags = (self._forward_pre_hooks_with_kwargs,) if with_kwargs else ()
        return _add_hook(self._forward_pre_hooks, hook, prepend, *flags)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``)
        runs after ``forward``; a non-None result replaces the output."""
        flags = ((self._forward_hooks_with_kwargs,) if with_kwargs else ()) + \
            ((self._forward_hooks_always_called,) if always_call else ())
        return _add_hook(self._forward_hooks, hook, prepend, *flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` runs when the gradients of the module's
        outputs are computed; a non-None result (a tuple as long as
        ``grad_output``) replaces them.  Non-tensor outputs, and outputs that got
        no gradient, are None in ``grad_output``."""
        _use_all_hooks()
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the ``grad_fn``
        of the module's (first) output, so it sees that node's gradients only;
        use ``register_full_backward_hook``."""
        _use_all_hooks()
        if self._is_full_backward_hook is True:
            raise RuntimeError('Cannot use both regular backward hooks and full backward hooks '
                               'on a single Module. Please use only one of them.')
        self._is_full_backward_hook = False
        return _add_hook(self._backward_hooks, hook, False)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` runs when the gradients of the
        module's inputs are computed (of its outputs, when no input requires
        grad); a non-None result (a tuple as long as ``grad_input``) replaces
        ``grad_input``.  Non-tensor arguments are None in ``grad_input``; keyword
        arguments are not in it.  ``forward`` gets, and the caller receives, new
        tensor objects over the same storage (PyTorch's views); changing them in
        place raises."""
        _use_all_hooks()
        if self._is_full_backward_hook is False:
            raise RuntimeError('Cannot use both regular backward hooks and full backward hooks '
                               'on a single Module. Please use only one of them.')
        self._is_full_backward_hook = True
        return _add_hook(self._backward_hooks, hook, prepend)

    def _get_backward_hooks(self):
        full, non_full = [], []
        if _mh._global_is_full_backward_hook[0] is True:
            full += _mh._global_backward_hooks.values()
        if self._is_full_backward_hook is True:
            full += self._backward_hooks.values()
        if _mh._global_is_full_backward_hook[0] is False:
            non_full += _mh._global_backward_hooks.values()
        if self._is_full_backward_hook is False:
            non_full += self._backward_hooks.values()
        return full, non_full

    def _get_backward_pre_hooks(self):
        return [*_mh._global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    # -- registration ----------------------------------------------------------
    def _check_name(self, name, kind, table):
        if not isinstance(name, str):
            raise TypeError(f'{kind} name should be a string. Got {type(name).__name__}')
        if name == '':
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if '.' in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if hasattr(self, name) and name not in table:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter, or None for an absent one) as ``name``."""
        if '_parameters' not in self.__dict__:
            raise AttributeError('cannot assign parameter before Module.__init__() call')
        self._check_name(name, 'parameter', self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        if param is not None and param._tape is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f'parameters must be created explicitly. To express \'{name}\' '
                             'as a function of another Tensor, compute the value in the '
                             'forward() method.')
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register ``tensor`` (or None) as a buffer: in ``state_dict()`` unless
        ``persistent=False``, converted by ``to()``, not a parameter."""
        if '_buffers' not in self.__dict__:
            raise AttributeError('cannot assign buffer before Module.__init__() call')
        self._check_name(name, 'buffer', self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Register ``module`` (or None) as the child ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f'{type(module).__name__} is not a Module subclass')
        if not isinstance(name, str):
            raise TypeError(f'module name should be a string. Got {type(name).__name__}')
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if '.' in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == '':
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def compile(self, *args, **kwargs):
        """``torch.nn.Module.compile``: accepted with ``torch.compile``'s arguments;
        the module keeps running eagerly (tape/_compile.py says why)."""
        from .._compile import compile as _compile
        _compile(self.forward, *args, **kwargs)

    def __getattr__(self, name):
        # only called when normal lookup fails: the registered names
        d = self.__dict__
        for table in ('_parameters', '_buffers', '_modules'):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get('_parameters')

        def drop(*tables):
            for t in tables:
                if name in t:
                    del t[name]
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError('cannot assign parameters before Module.__init__() call')
            d.pop(name, None)
            drop(self._buffers, self._modules)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                f"'{name}' (torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            modules = d.get('_modules')
            if modules is None:
                raise AttributeError('cannot assign module before Module.__init__() call')
            d.pop(name, None)
            drop(params, self._buffers)
            self._non_persistent_buffers_set.discard(name)
            modules[name] = value
        elif d.get('_modules') is not None and name in d['_modules']:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (torch.nn.Module or None expected)")
            d['_modules'][name] = value
        elif isinstance(value, Buffer):
            if hasattr(self, name) and name not in self._buffers:
                raise KeyError(f"attribute '{name}' already exists")
            self.register_buffer(name, value, value.persistent)
        elif d.get('_buffers') is not None and name in d['_buffers']:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                '(torch.Tensor or None expected)')
            d['_buffers'][name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for table in ('_parameters', '_buffers', '_modules'):
            t = self.__dict__.get(table)
            if t is not None and name in t:
                del t[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__)
        keys |= set(self._parameters) | set(self._modules) | set(self._buffers)
        return sorted(k for k in keys if not k[:1].isdigit())

    # deepcopy and pickle copy __dict__; the copies of the parameters are plain
    # tensors (the marker is not a user attribute), so mark them again.  A copied
    # Parameter has no .grad, as PyTorch's Parameter.__deepcopy__: an optimizer
    # over a deep-copied model must not apply the original's stale gradients
    def __setstate__(self, state):
        self.__dict__.update(state)
        d = self.__dict__
        for name in ('_forward_pre_hooks', '_forward_pre_hooks_with_kwargs', '_forward_hooks',
                     '_forward_hooks_with_kwargs', '_forward_hooks_always_called',
                     '_backward_hooks', '_backward_pre_hooks', '_state_dict_hooks',
                     '_state_dict_pre_hooks', '_load_state_dict_pre_hooks',
                     '_load_state_dict_post_hooks'):
            if name not in d:           # pickled before these tables existed
                d[name] = _OrderedDict()
        d.setdefault('_is_full_backward_hook', None)
        if d['_backward_hooks'] or d['_backward_pre_hooks']:
            _use_all_hooks()
        for p in self.__dict__.get('_parameters', {}).values():
            if type(p) is Tensor:
                _mark(p)
                p._grad = None

    # -- traversal --------------------------------------------------------------
    def named_modules(self, memo=None, prefix='', remove_duplicate=True):
        """(name, module) for this module and every descendant, depth first, each
        module once (unless ``remove_duplicate=False``)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ('.' if prefix else '') + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        seen = set()
        for mprefix, module in mods:
            for name, v in getattr(module, table).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mprefix + ('.' if mprefix else '') + name, v

    def named_parameters(self, prefix='', recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs, PyTorch's order; a shared parameter once."""
        yield from self._named_members('_parameters', prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix='', recurse=True, remove_duplicate=True):
        yield from self._named_members('_buffers', prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        """The descendant at the dotted path ``target`` ('' is this module)."""
        mod = self
        if target == '':
            return mod
        for item in target.split('.'):
            if not hasattr(mod, item):
                raise AttributeError(f'{mod._get_name()} has no attribute `{item}`')
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f'`{item}` is not an nn.Module')
        return mod

    def set_submodule(self, target, module, strict=False):
        """Put ``module`` at the dotted path ``target``; with ``strict`` the attribute
        must exist already."""
        if target == '':
            raise ValueError('Cannot set the submodule without a target name!')
        path, _, name = target.rpartition('.')
        parent = self.get_submodule(path)
        if not isinstance(module, Module):
            raise ValueError(f'`module` is not an nn.Module, found {type(module)}')
        if hasattr(parent, name):
            if not isinstance(getattr(parent, name), Module):
                raise AttributeError(f'`{name}` is not an nn.Module')
        elif strict:
            raise AttributeError(f'{parent._get_name()} has no attribute `{name}`')
        setattr(parent, name, module)

    def get_parameter(self, target):
        path, _, name = target.rpartition('.')
        mod = self.get_submodule(path)
        # PyTorch's two messages: no such attribute, or one that is not a Parameter
        if not hasattr(mod, name):
            raise AttributeError(f'{mod._get_name()} has no attribute `{name}`')
        if name not in mod._parameters:
            raise AttributeError(f'`{name}` is not an nn.Parameter')
        return mod._parameters[name]

    def get_buffer(self, target):
        """The buffer at the dotted path ``target``, with PyTorch's two messages: no
        such attribute, or one that is not a buffer."""
        path, _, name = target.rpartition('.')
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f'{mod._get_name()} has no attribute `{name}`')
        if name not in mod._buffers:
            raise AttributeError(f'`{name}` is not a buffer')
        return mod._buffers[name]

    # -- modes and gradients ----------------------------------------------------
    def train(self, mode=True):
        """Set training mode (what Dropout reads) here and in every descendant."""
        if not isinstance(mode, bool):
            raise ValueError('training mode is expected to be boolean')
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drop (or, with ``set_to_none=False``, zero) every parameter's ``.grad``."""
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def apply(self, fn):
        """Call ``fn`` on every descendant (children first) and on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- dtype conversion -----------------------------------------------------------
    def _apply(self, fn):
        for m in self.children():
            m._apply(fn)
        for p in self._parameters.values():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
            # PyTorch swaps .data, so the Parameter objects (which optimizers hold) stay
            p.data = new._data
            if p.grad is not None:
                with no_grad():
                    p.grad = _leaf(fn(p.grad)._data)
        for k, b in self._buffers.items():
            if b is not None:
                self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)`` (also a device, ignored: tape runs on the CPU, or a tensor,
        for its dtype) converts the floating-point parameters and buffers in place."""
        dtype = _parse_to(args, dict(kwargs))
        if dtype is None:
            return self

        def convert(t):
            return t.to(dtype) if np.dtype(t.dtype).kind in 'fc' else t
        return self._apply(convert)

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def half(self):
        return self.to(np.float16)

    def cpu(self):
        return self

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    # -- state -----------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def get_extra_state(self):
        """Override (with ``set_extra_state``) to keep a picklable value in the
        state dict, under ``'<prefix>_extra_state'``."""
        raise RuntimeError('Reached a code path in Module.get_extra_state() that should never '
                           'be called.')

    def set_extra_state(self, state):
        """Override (with ``get_extra_state``) to restore the value it saved."""
        raise RuntimeError('Reached a code path in Module.set_extra_state() that should never '
                           'be called.')

    def state_dict(self, *args, destination=None, prefix='', keep_vars=False):
        """An ordered dict of dotted names to (detached) parameters and persistent
        buffers.  A shared parameter appears under each of its names, as in PyTorch."""
        if args:        # the deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = _OrderedDict()
            # each module's version under its prefix, as PyTorch's (load_state_dict
            # passes it to _load_from_state_dict: BatchNorm's count, InstanceNorm)
            destination._metadata = _OrderedDict()
        local_metadata = {'version': self._version}
        if hasattr(destination, '_metadata'):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + '.',
                                  keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if getattr(hook, '_from_public_api', False):
                if res is not None:
                    raise RuntimeError('state_dict post-hook must return None')
            elif res is not None:
                destination = res
        return destination

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` runs before ``state_dict()`` saves
        this module's values."""
        return _add_hook(self._state_dict_pre_hooks, hook, False)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` runs after
        ``state_dict()`` saved this module's values; it may change ``state_dict``
        in place and must return None."""
        hook._from_public_api = True
        return _add_hook(self._state_dict_hooks, hook, False)

    def _register_state_dict_hook(self, hook):
        """The private form of ``register_state_dict_post_hook``: a non-None
        result replaces the state dict."""
        if getattr(hook, '_from_public_api', False):
            raise RuntimeError('Cannot register the same function as the state dict post hook '
                               'that was previously registered via '
                               'register_state_dict_post_hook')
        return _add_hook(self._state_dict_hooks, hook, False)

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before ``load_state_dict`` loads this
        module's values."""
        return _add_hook(self._load_state_dict_pre_hooks, hook, False)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` runs after ``load_state_dict``
        loaded this module (children first); it may change
        ``incompatible_keys``' lists in place and must return None."""
        return _add_hook(self._load_state_dict_post_hooks, hook, False)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in _itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  'torch.Tensor or Tensor-like object from checkpoint but '
                                  f'received {type(value)}')
                continue
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f'size mismatch for {key}: copying a param with shape '
                                  f'{value.shape} from checkpoint, the shape in current model '
                                  f'is {param.shape}.')
                continue
            try:
                if assign:
                    if name in self._parameters:
                        new = Parameter(value, requires_grad=param.requires_grad)
                        self._parameters[name] = new
                    else:
                        self._buffers[name] = value
                else:
                    with no_grad():
                        param.copy_(value)
            except Exception as ex:     # noqa: BLE001 (reported with the key, as PyTorch does)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f'in the model are {param.shape} and whose dimensions in the '
                                  f'checkpoint are {value.shape}, an exception occurred : '
                                  f'{ex.args}.')
        extra = type(self).set_extra_state is not Module.set_extra_state
        if extra:
            key = prefix + _EXTRA_STATE
            if key in state_dict:
                self.set_extra_state(state_dict[key])
            elif strict:
                missing_keys.append(key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    first = key[len(prefix):].split('.', 1)[0]
                    if first not in self._modules and first not in local and not (
                            extra and first == _EXTRA_STATE):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy ``state_dict``'s values into the parameters and buffers (in place).
        With ``strict``, missing and unexpected keys raise PyTorch's RuntimeError;
        returns ``(missing_keys, unexpected_keys)``."""
        if not hasattr(state_dict, 'keys') or not hasattr(state_dict, '__getitem__'):
            raise TypeError(f'Expected state_dict to be dict-like, got {type(state_dict)}.')
        missing, unexpected, errors = [], [], []
        # a copy a module's _load_from_state_dict may complete (BatchNorm's count);
        # torch's state dicts carry per-module versions in _metadata
        metadata = getattr(state_dict, '_metadata', None)
        state_dict = _OrderedDict(state_dict)
        for prefix, module in self._prefixed_modules():
            local = {} if metadata is None else metadata.get(prefix[:-1], {})
            for hook in module._load_state_dict_pre_hooks.values():
                hook(module, state_dict, prefix, local, True, missing, unexpected, errors)
            module._load_from_state_dict(state_dict, prefix, local, True, missing, unexpected,
                                         errors, assign)
        incompatible = _IncompatibleKeys(missing, unexpected)
        for prefix, module in reversed(list(self._prefixed_modules())):
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        'Hooks registered with ``register_load_state_dict_post_hook`` are not'
                        'expected to return new values, if incompatible_keys need to be modified,'
                        'it should be done inplace.')
        if strict:
            if unexpected:
                errors.insert(0, 'Unexpected key(s) in state_dict: {}. '.format(
                    ', '.join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, 'Missing key(s) in state_dict: {}. '.format(
                    ', '.join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError('Error(s) in loading state_dict for {}:\n\t{}'.format(
                self._get_name(), '\n\t'.join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def _prefixed_modules(self, prefix=''):
        # every module under each of its names (not deduplicated), as the
        # state_dict lists a shared module's values under each name
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module._prefixed_modules(prefix + name + '.')

    # -- repr --------------------------------------------------------------------
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside this module's parentheses in ``repr``: override it."""
        return ''

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split('\n') if extra else []
        child_lines = [f'({key}): ' + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ''
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = '\n  ' + '\n  '.join(lines) + '\n'
        return f'{self._get_name()}({body})'



def _use_all_hooks():
    """Make ``Module.__call__`` test every hook table (see ``Module.__call__``)."""
    if Module.__dict__['__call__'] is not Module._call_all:
        Module.__call__ = Module._call_all


# -- global module hooks (torch.nn.modules.module.register_module_*) ----------------
def register_module_forward_pre_hook(hook):
    """``hook(module, args)`` before every module's ``forward`` (before the
    module's own pre-hooks); a non-None result replaces the arguments."""
    _use_all_hooks()
    return _add_hook(_mh._global_forward_pre_hooks, hook, False, _mh._global_any)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """``hook(module, args, output)`` after every module's ``forward`` (before the
    module's own hooks); a non-None result replaces the output."""
    _use_all_hooks()
    flags = ((_mh._global_forward_hooks_with_kwargs,) if with_kwargs else ()) + \
        ((_mh._global_forward_hooks_always_called,) if always_call else ())
    return _add_hook(_mh._global_forward_hooks, hook, False, _mh._global_any, *flags)


def register_module_backward_hook(hook):
    """Deprecated: a non-full backward hook on every module."""
    _use_all_hooks()
    if _mh._global_is_full_backward_hook[0] is True:
        raise RuntimeError('Cannot use both regular backward hooks and full backward hooks as a '
                           'global Module hook. Please use only one of them.')
    _mh._global_is_full_backward_hook[0] = False
    return _add_hook(_mh._global_backward_hooks, hook, False, _mh._global_any)


def register_module_full_backward_pre_hook(hook):
    """A ``register_full_backward_pre_hook`` on every module (run before the
    module's own)."""
    _use_all_hooks()
    return _add_hook(_mh._global_backward_pre_hooks, hook, False, _mh._global_any)


def register_module_full_backward_hook(hook):
    """A ``register_full_backward_hook`` on every module (run before the
    module's own)."""
    _use_all_hooks()
    if _mh._global_is_full_backward_hook[0] is False:
        raise RuntimeError('Cannot use both regular backward hooks and full backward hooks as a '
                           'global Module hook. Please use only one of them.')
    _mh._global_is_full_backward_hook[0] = True
    return _add_hook(_mh._global_backward_hooks, hook, False, _mh._global_any)


# ``torch.nn.modules.module`` is where PyTorch keeps these: the same names here
module = _sys.modules[__name__]
_sys.modules.setdefault(__name__ + '.module', module)


# -- containers --------------------------------------------------------------------
def _index(idx, n, kind):
    idx = int(idx.__index__()) if not isinstance(idx, int) else idx
    if not -n <= idx < n:
        raise IndexError(f'index {idx} is out of range')
    return idx % n


class Sequential(Module):
    """Modules applied in order: ``Sequential(a, b)(x) == b(a(x))``; also built
    from an ``OrderedDict`` of names to modules."""
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], _OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):  # noqa: A002
        for module in self._modules.values():
            input = module(input)  # noqa: A001
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(_OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), 'Sequential')]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self), 'Sequential')]
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                del self._modules[key]
        else:
            del self._modules[list(self._modules)[_index(idx, len(self), 'Sequential')]]
        # renumber, so the names stay 0..n-1 as in PyTorch
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError('add operator supports only objects of Sequential class, but '
                             f'{type(other)} is given.')
        out = Sequential()
        for m in _itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        """Remove and return the module (or a Sequential of the modules) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f'module should be of type: {Module}')
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f'Index out of range: {index}')
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self


class ModuleList(Module):
    """A list of modules, each registered (its parameters are the model's)."""
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), 'ModuleList'))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), 'ModuleList')), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                del self._modules[str(k)]
        else:
            del self._modules[str(_index(idx, len(self), 'ModuleList'))]
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        out = ModuleList()
        for m in _itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        """Remove and return the module (or a ModuleList of the modules) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        # (any iterable of modules, a ModuleList or Sequential too, as PyTorch's)
        if isinstance(modules, Tensor) or not hasattr(modules, '__iter__'):
            raise TypeError('ModuleList.extend should be called with an iterable, but got '
                            + type(modules).__name__)
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __repr__(self):
        # PyTorch 2 folds runs of equal children: "(0-1): 2 x Tanh()"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + '()'
        runs = []                       # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for first, last, r in runs:
            line = f'({first}): {r}' if first == last else \
                f'({first}-{last}): {last - first + 1} x {r}'
            lines.append(_addindent(line, 2))
        return self._get_name() + '(\n  ' + '\n  '.join(lines) + '\n)'


class ModuleDict(Module):
    """A dict of names to modules, each registered, in insertion order."""
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, 'items') else modules
        for j, kv in enumerate(items):
            if hasattr(modules, 'items'):
                key, m = kv
            else:
                if len(kv) != 2:
                    raise ValueError(f'ModuleDict update sequence element #{j} has length '
                                     f'{len(kv)}; 2 is required')
                key, m = kv
            self[key] = m


class ParameterList(Module):
    """A list of parameters, each registered (a plain tensor is made a Parameter)."""
    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for k in range(self._size)[idx]:
                out.append(self._parameters[str(k)])
            return out
        return self._parameters[str(_index(idx, self._size, 'ParameterList'))]

    def __setitem__(self, idx, param):
        idx = _index(idx, self._size, 'ParameterList')
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self._parameters[str(k)] for k in range(self._size))

    def __iadd__(self, params):
        return self.extend(params)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, '__iter__'):
            raise TypeError('ParameterList.extend should be called with an iterable, but got '
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        lines = []
        for k, p in enumerate(self):
            kind = 'Parameter' if isinstance(p, Parameter) else 'Tensor'
            size = 'x'.join(str(s) for s in p.shape)
            dt = DTYPE_NAMES.get(np.dtype(p.dtype), str(p.dtype))
            lines.append(f'  ({k}): {kind} containing: [{dt} of size {size}]')
        return '\n'.join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError('ParameterList should not be called.')


# -- layers --------------------------------------------------------------------------
def _dtype(dtype):
    return np.dtype(dtype) if dtype is not None else _default_dtype[0]


def _empty(shape, dtype):
    return Parameter(_leaf(np.empty(shape, _dtype(dtype))))


def _affine_params(module, shape, affine, bias, dtype):
    """A normalization's ``weight`` and ``bias`` of ``shape`` (set by
    ``_reset_affine``), or None for each the options leave out, registered as
    PyTorch registers them (so they appear, as None, among the parameters)."""
    if affine:
        module.weight = _empty(shape, dtype)
        if bias:
            module.bias = _empty(shape, dtype)
        else:
            module.register_parameter('bias', None)
    else:
        module.register_parameter('weight', None)
        module.register_parameter('bias', None)


def _reset_affine(module):
    """A normalization's initial scale (ones) and shift (zeros)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class Identity(Module):
    """Returns its input; takes (and ignores) any arguments."""
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``, initialised as PyTorch does (from tape's
    generator): weight ~ kaiming_uniform(a=sqrt(5)), that is U(-1/sqrt(in), 1/sqrt(in)),
    and bias ~ U(-1/sqrt(in), 1/sqrt(in))."""
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = _empty((out_features, in_features), dtype)
        if bias:
            self.bias = _empty((out_features,), dtype)
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=_math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / _math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):  # noqa: A002
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f'in_features={self.in_features}, out_features={self.out_features}, '
                f'bias={self.bias is not None}')


class Bilinear(Module):
    """``y[..., o] = x1 @ weight[o] @ x2 + bias[o]``; weight and bias ~ U(-1/sqrt(in1), 1/sqrt(in1))."""
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = _empty((out_features, in1_features, in2_features), dtype)
        if bias:
            self.bias = _empty((out_features,), dtype)
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / _math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f'in1_features={self.in1_features}, in2_features={self.in2_features}, '
                f'out_features={self.out_features}, bias={self.bias is not None}')


class Embedding(Module):
    """A lookup table: row ``i`` of ``weight`` for index ``i``; weight ~ N(0, 1),
    the ``padding_idx`` row zero (and it gets no gradient)."""
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, 'Padding_idx must be within num_embeddings'
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, 'Padding_idx must be within num_embeddings'
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = _empty((num_embeddings, embedding_dim), dtype)
            if _freeze:
                self.weight.requires_grad_(False)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError('Shape of weight does not match num_embeddings and '
                                     'embedding_dim')
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):  # noqa: A002
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f'{self.num_embeddings}, {self.embedding_dim}'
        if self.padding_idx is not None:
            s += f', padding_idx={self.padding_idx}'
        if self.max_norm is not None:
            s += f', max_norm={self.max_norm}'
        if self.norm_type != 2:
            s += f', norm_type={self.norm_type}'
        if self.scale_grad_by_freq is not False:
            s += f', scale_grad_by_freq={self.scale_grad_by_freq}'
        if self.sparse is not False:
            s += ', sparse=True'
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise AssertionError('Embeddings parameter is expected to be 2-dimensional')
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dimensions, then scale by
    ``weight`` (ones) and shift by ``bias`` (zeros)."""
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_params(self, self.normalized_shape, elementwise_affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):  # noqa: A002
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f'{self.normalized_shape}, eps={self.eps}, '
                f'elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}')


class Dropout(Module):
    """Zero each element with probability ``p`` (scaling the rest by 1/(1-p)) in
    training mode; the identity after ``eval()``."""
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f'dropout probability has to be between 0 and 1, but got {p}')
        self.p = p
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f'p={self.p}, inplace={self.inplace}'


class Flatten(Module):
    """Flatten dimensions ``start_dim..end_dim`` into one."""
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):  # noqa: A002
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f'start_dim={self.start_dim}, end_dim={self.end_dim}'


# -- activations -------------------------------------------------------------------------
def _inplace_repr(inplace):
    return 'inplace=True' if inplace else ''


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class Tanh(Module):
    def forward(self, input):  # noqa: A002
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):  # noqa: A002
        return F.sigmoid(input)


class GELU(Module):
    def __init__(self, approximate='none'):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):  # noqa: A002
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f'approximate={self.approximate!r}'


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_repr(self.inplace)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f'alpha={self.alpha}' + (', inplace=True' if self.inplace else '')


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):  # noqa: A002
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f'negative_slope={self.negative_slope}' + (', inplace=True' if self.inplace else '')


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):  # noqa: A002
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f'beta={self.beta}, threshold={self.threshold}'


class _AlongDim(Module):
    """A module applying ``_fn`` (F.softmax, F.log_softmax) along ``dim``."""
    _fn = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return self._fn(input, self.dim, _stacklevel=5)     # (as PyTorch's modules call it)

    def extra_repr(self):
        return f'dim={self.dim}'


class Softmax(_AlongDim):
    _fn = staticmethod(F.softmax)


class LogSoftmax(_AlongDim):
    _fn = staticmethod(F.log_softmax)


# -- losses ------------------------------------------------------------------------------
class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction='mean'):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction='mean'):
        super().__init__(size_average, reduce, reduction)
        # a buffer, so to(dtype) converts it and state_dict lists it, as in PyTorch
        self.register_buffer('weight', weight)


class MSELoss(_Loss):
    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction='mean'):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction='mean', label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(input, target, weight=self.weight,
                               ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class BCELoss(_WeightedLoss):
    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction='mean',
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer('weight', weight)
        self.register_buffer('pos_weight', pos_weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)
