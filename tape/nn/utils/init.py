"""``tape.nn.utils.init``: ``skip_init``, as ``torch.nn.utils.init``."""
import inspect as _inspect

__all__ = ['skip_init']


def skip_init(module_cls, *args, **kwargs):
    """Instantiate ``module_cls(*args, **kwargs)`` without (meaningfully)
    initializing its parameters.

    PyTorch builds the module on the ``meta`` device and allocates empty storage
    (``to_empty``); tape has no meta device, so the constructor runs as usual
    and the global RNG state is restored afterwards, so that, as in PyTorch,
    ``skip_init`` draws no random numbers.  The values are whatever the
    constructor left (PyTorch's are uninitialized memory): treat them as
    uninitialized.
    """
    import tape
    from ..modules import Module
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f'Expected a Module; got {module_cls}')
    if 'device' not in _inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs.setdefault('device', 'cpu')
    state = tape.get_rng_state()
    try:
        return module_cls(*args, **kwargs)
    finally:
        tape.set_rng_state(state)
