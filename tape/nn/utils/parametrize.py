"""``tape.nn.utils.parametrize``, as ``torch.nn.utils.parametrize``: a tensor of a
module (``weight``) expressed as a function of other tensors, computed on each
access.

As in PyTorch, ``register_parametrization`` moves the tensor to
``module.parametrizations.<name>.original`` (or ``original0``, ``original1``, ...
when a ``right_inverse`` returns several tensors), swaps the module's class for
a generated subclass ``Parametrized<Class>`` and puts a property ``<name>`` on
that subclass, so ``module.weight`` runs the parametrizations and
``module.weight = X`` runs their ``right_inverse``.  ``tape.nn.Module`` is not
changed: the property is found by normal attribute lookup, before
``Module.__getattr__``, and assigning a plain tensor to it reaches the
property's setter through ``object.__setattr__``, as in PyTorch.

>>> import tape
>>> from tape import nn
>>> from tape.nn.utils import parametrize
>>> class Symmetric(nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).mT
>>> m = parametrize.register_parametrization(nn.Linear(3, 3), 'weight', Symmetric())
>>> type(m).__name__, list(m.state_dict())
('ParametrizedLinear', ['bias', 'parametrizations.weight.original'])
>>> bool((m.weight == m.weight.T).all())
True
"""
import collections.abc as _abc
import copy as _copy
import copyreg as _copyreg
from contextlib import contextmanager

from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..modules import Module, ModuleDict, ModuleList, Parameter

__all__ = ['cached', 'ParametrizationList', 'register_parametrization', 'is_parametrized',
           'remove_parametrizations', 'type_before_parametrizations',
           'transfer_parametrizations_and_params']

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Within this context, each parametrized tensor is computed once (on first
    access) and reused, as ``torch.nn.utils.parametrize.cached``."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, X):
    if isinstance(X, Parameter):
        module.register_parameter(name, X)
    else:
        module.register_buffer(name, X)


def _maybe_set(dest, src):
    # torch: dest.set_(src) -- dest takes src's storage (and shape); the tensor
    # object (held by optimizers) stays the same
    with no_grad():
        dest.data = src


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, with the unparametrized tensor(s)
    ``original`` (or ``original0``, ``original1``, ...)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError('ParametrizationList requires one or more modules.')
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape = original.shape
        original_dtype = original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, 'right_inverse'):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor) and not isinstance(new, _abc.Sequence):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f'(list, tuple...). Got {type(new).__name__}')
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError('When `right_inverse` outputs one tensor, it may not change the '
                                 f'dtype.\noriginal.dtype: {original.dtype}\n'
                                 f'right_inverse(original).dtype: {new.dtype}')
            if original.device != new.device:
                raise ValueError('When `right_inverse` outputs one tensor, it may not change the '
                                 f'device.\noriginal.device: {original.device}\n'
                                 f'right_inverse(original).device: {new.device}')
            _maybe_set(original, new)
            _register_parameter_or_buffer(self, 'original', original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f'tensors (list, tuple...). Got element {i} of the '
                                     f'sequence with type {type(originali).__name__}.')
                if isinstance(original, Parameter):
                    originali = Parameter(originali, original.requires_grad)
                originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f'original{i}', originali)
        if not self.unsafe:
            Z = self()
            if not isinstance(Z, Tensor):
                raise ValueError(f'A parametrization must return a tensor. Got {type(Z).__name__}.')
            if Z.dtype != original_dtype:
                raise ValueError('Registering a parametrization may not change the dtype of the '
                                 'tensor, unless `unsafe` flag is enabled.\n'
                                 f'unparametrized dtype: {original_dtype}\n'
                                 f'parametrized dtype: {Z.dtype}')
            if Z.shape != original_shape:
                raise ValueError('Registering a parametrization may not change the shape of the '
                                 'tensor, unless `unsafe` flag is enabled.\n'
                                 f'unparametrized shape: {original_shape}\n'
                                 f'parametrized shape: {Z.shape}')

    def __reversed__(self):
        return reversed(list(self._modules.values()))

    def right_inverse(self, value):
        """Run the parametrizations' ``right_inverse`` (last to first) on ``value``
        and store the result in ``original`` (or ``original0``, ...)."""
        with no_grad():
            for module in reversed(self):
                if hasattr(module, 'right_inverse'):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(f'parametrization {type(module).__name__} does not '
                                       'implement right_inverse.')
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f'`right_inverse` should return a tensor. Got '
                                     f'{type(value).__name__}')
                if value.dtype != self.original.dtype:
                    raise ValueError(f'The tensor returned by `right_inverse` has dtype '
                                     f'{value.dtype} while `original` has dtype '
                                     f'{self.original.dtype}')
                _maybe_set(self.original, value)
            else:
                if not isinstance(value, _abc.Sequence):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                     f'{type(value).__name__}.')
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of "
                                     f'length {self.ntensors}. Got a sequence of length '
                                     f'{len(value)}.')
                for i, tensor in enumerate(value):
                    original_i = getattr(self, f'original{i}')
                    if not isinstance(tensor, Tensor):
                        raise ValueError("'right_inverse' must return a sequence of tensors or "
                                         'reference-type opaques. Got element '
                                         f'{i} of type {type(tensor).__name__}.')
                    if original_i.dtype != tensor.dtype:
                        raise ValueError(f'Tensor {i} returned by `right_inverse` has dtype '
                                         f'{tensor.dtype} while `original{i}` has dtype '
                                         f'{original_i.dtype}')
                    _maybe_set(original_i, tensor)

    def forward(self):
        mods = iter(self._modules.values())
        first = next(mods)
        if self.is_tensor:
            x = first(self.original)
        else:
            x = first(*(getattr(self, f'original{i}') for i in range(self.ntensors)))
        for m in mods:
            x = m(x)
        return x


def _default_deepcopy(self, memo):
    obj = memo.get(id(self), None)
    if obj is not None:
        return obj
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    # Module.__setstate__ marks the copied parameters again (tape's Parameter
    # marker) and drops their .grad, as torch's Parameter.__deepcopy__
    Module.__setstate__(replica, _copy.deepcopy(self.__dict__, memo))
    for slot in _copyreg._slotnames(self.__class__):
        if hasattr(self, slot):
            setattr(replica, slot, _copy.deepcopy(getattr(self, slot), memo))
    return replica


def _getstate(self):
    raise RuntimeError(
        'Serialization of parametrized modules is only supported through state_dict(). See:\n'
        'https://pytorch.org/tutorials/beginner/saving_loading_models.html'
        '#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training')


def _inject_new_class(module):
    cls = module.__class__
    dct = {'__getstate__': _getstate}
    if not hasattr(cls, '__deepcopy__'):
        dct['__deepcopy__'] = _default_deepcopy
    module.__class__ = type(f'Parametrized{cls.__name__}', (cls,), dct)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            tensor = _cache.get(key)
            if tensor is None:
                tensor = parametrization()
                _cache[key] = tensor
            return tensor
        return parametrization()

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Register ``parametrization`` on ``module.<tensor_name>`` (a parameter, a
    buffer or an already parametrized tensor, whose parametrizations it then
    follows); returns ``module``."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            Y = getattr(module, tensor_name)
            X = parametrization(Y)
            if not isinstance(X, Tensor):
                raise ValueError(f'A parametrization must return a tensor. Got {type(X).__name__}.')
            if X.dtype != Y.dtype:
                raise ValueError('Registering a parametrization may not change the dtype of the '
                                 'tensor, unless the `unsafe` flag is enabled.\n'
                                 f'module.{tensor_name}.dtype: {Y.dtype}\n'
                                 f'parametrization(module.{tensor_name}).dtype: {X.dtype}')
            if X.shape != Y.shape:
                raise ValueError('Registering a parametrization may not change the shape of the '
                                 'tensor, unless the `unsafe` flag is enabled.\n'
                                 f'module.{tensor_name}.shape: {Y.shape}\n'
                                 f'parametrization(module.{tensor_name}).shape: {X.shape}')
            if hasattr(parametrization, 'right_inverse'):
                try:
                    Z = parametrization.right_inverse(X)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(Z, Tensor):
                        raise ValueError('parametrization.right_inverse must return a tensor. '
                                         f'Got: {type(Z).__name__}')
                    if Z.dtype != Y.dtype:
                        raise ValueError('The tensor returned by parametrization.right_inverse '
                                         f'must have the same dtype as module.{tensor_name}, '
                                         'unless the `unsafe` flag is enabled.\n'
                                         f'module.{tensor_name}.dtype: {Y.dtype}\n'
                                         f'returned dtype: {Z.dtype}')
                    if Z.shape != Y.shape:
                        raise ValueError('The tensor returned by parametrization.right_inverse '
                                         f'must have the same shape as module.{tensor_name}, '
                                         'unless the `unsafe` flag is enabled.\n'
                                         f'module.{tensor_name}.shape: {Y.shape}\n'
                                         f'returned shape: {Z.shape}')
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given)."""
    parametrizations = getattr(module, 'parametrizations', None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Remove the parametrizations on ``module.<tensor_name>``: it becomes a
    parameter (or buffer) again, holding the parametrized value
    (``leave_parametrized=True``) or the original one."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f'Module {module} does not have a parametrization on {tensor_name}')
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            _maybe_set(original, t)
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        original = Parameter(t) if t.requires_grad else t
    else:
        raise ValueError('Cannot leave unparametrized (`leave_parametrized=False`) a tensor '
                         'that is parametrized in terms of a sequence of tensors.')
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, 'parametrizations')
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class of ``module`` before any parametrization was registered."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations (all, or those of
    ``tensor_name``) on ``to_module``, sharing their original tensors."""
    if is_parametrized(from_module):
        names = from_module.parametrizations if tensor_name is None else [tensor_name]
        for parameter_name in names:
            if not hasattr(to_module, parameter_name):
                setattr(to_module, parameter_name,
                        Parameter(getattr(from_module, parameter_name)))
            for param_func in from_module.parametrizations[parameter_name]:
                register_parametrization(to_module, parameter_name, param_func)
            src = from_module.parametrizations[parameter_name]
            dst = to_module.parametrizations[parameter_name]
            if hasattr(src, 'original'):
                dst.original = src.original
            else:
                num = 0
                while hasattr(src, f'original{num}'):
                    setattr(dst, f'original{num}', getattr(src, f'original{num}'))
                    num += 1
    return to_module
