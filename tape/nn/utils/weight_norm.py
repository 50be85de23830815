"""Legacy ``tape.nn.utils.weight_norm`` / ``remove_weight_norm``, as
``torch.nn.utils.weight_norm``: ``<name>_g`` and ``<name>_v`` parameters and a
forward pre-hook that recomputes ``<name>`` before each call (deprecated in
PyTorch in favour of ``parametrizations.weight_norm``; it warns as PyTorch does).
"""
import warnings as _warnings

from ..modules import Parameter
from .parametrizations import _norm_except_dim as norm_except_dim, _weight_norm

__all__ = ['WeightNorm', 'weight_norm', 'remove_weight_norm']


class WeightNorm:
    def __init__(self, name, dim):
        if dim is None:
            dim = -1
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + '_g')
        v = getattr(module, self.name + '_v')
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        _warnings.warn('`torch.nn.utils.weight_norm` is deprecated in favor of '
                       '`torch.nn.utils.parametrizations.weight_norm`.', FutureWarning,
                       stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError('Cannot register two weight_norm hooks on the same '
                                   f'parameter {name}')
        if dim is None:
            dim = -1
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + '_g', Parameter(norm_except_dim(weight, 2, dim).data))
        module.register_parameter(name + '_v', Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + '_g']
        del module._parameters[self.name + '_v']
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name='weight', dim=0):
    """Replace ``module.<name>`` by ``<name>_g * <name>_v / ||<name>_v||``
    (norm over every dim but ``dim``; ``dim=None``: the whole tensor)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name='weight'):
    """Undo ``weight_norm``: ``module.<name>`` is a parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
