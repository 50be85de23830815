"""``torch.autocast`` for tape, without lowering precision.

tape has no bfloat16 and NumPy's float16 matmul is slow, so an autocast region
does not change dtypes: ``autocast(device_type, enabled=True)`` runs the region
in the tensors' own dtypes while ``is_autocast_enabled(device_type)`` reports
True (and ``get_autocast_dtype`` the requested dtype), and warns once per process
(``UserWarning``) that it does so.  ``enabled=False`` is a plain no-op context.
As in torch on a machine without a GPU, ``device_type='cuda'`` warns that CUDA
is not available and disables the region.
"""
import collections.abc
import functools
import threading
import warnings

import numpy as np

__all__ = ['autocast', 'custom_fwd', 'custom_bwd', 'is_autocast_available',
           'is_autocast_enabled', 'get_autocast_dtype', 'set_autocast_enabled',
           'set_autocast_dtype']

_SUPPORTED_DEVICES = ('cpu', 'cuda')
_warned = [False]
_state = threading.local()   # autocast state is thread-local, as torch's


def _st():
    if not hasattr(_state, 'enabled'):
        _state.enabled = {}
        _state.dtype = {}
    return _state


def _default_dtype(device_type):
    # torch's defaults are float16 (cuda) and bfloat16 (cpu); tape has no bfloat16
    return np.dtype(np.float16)


def is_autocast_available(device_type):
    """Whether ``device_type`` accepts ``autocast`` (``'cpu'`` and ``'cuda'``)."""
    return device_type in _SUPPORTED_DEVICES


def is_autocast_enabled(device_type=None):
    """Whether an enabled autocast region for ``device_type`` is active
    (``device_type=None`` asks about CUDA, as torch's no-argument form)."""
    return bool(_st().enabled.get('cuda' if device_type is None else device_type, False))


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # torch's legacy one-argument form: set_autocast_enabled(enabled)
        device_type, enabled = 'cuda', device_type
    _st().enabled[device_type] = bool(enabled)


_DEVICE_TYPES = ('cpu', 'cuda', 'ipu', 'xpu', 'mkldnn', 'opengl', 'opencl', 'ideep', 'hip',
                 've', 'fpga', 'maia', 'xla', 'lazy', 'vulkan', 'mps', 'meta', 'hpu', 'mtia',
                 'privateuseone')


def get_autocast_dtype(device_type):
    """The dtype an autocast region for ``device_type`` asked for (float16 by default:
    tape has no bfloat16).  tape does not cast to it."""
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f'Expected one of {", ".join(_DEVICE_TYPES)} device type at start '
                           f'of device string: {device_type}')
    return _st().dtype.get(device_type, _default_dtype(device_type))


def set_autocast_dtype(device_type, dtype):
    _st().dtype[device_type] = dtype


class autocast:  # noqa: N801  (torch's name)
    """Context manager / decorator for autocast regions (``torch.autocast``).

    tape runs the region **without lowering precision**: ops keep the tensors' own
    dtypes.  With ``enabled=True`` (device ``'cpu'``) ``is_autocast_enabled('cpu')``
    reports True inside the region and one ``UserWarning`` per process says that
    precision is not lowered.  ``enabled=False`` is a no-op context.

    >>> import tape, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     with tape.autocast('cpu'):
    ...         y = tape.ones(2, 2) @ tape.ones(2, 2)
    ...         on = tape.is_autocast_enabled('cpu')
    >>> y.dtype, on, tape.is_autocast_enabled('cpu')
    (dtype('float32'), True, False)
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f'Expected `device_type` of type `str`, got: `{type(device_type)}`')
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(self.device):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{self.device}'")
        self._cache_enabled = True if cache_enabled is None else cache_enabled
        if enabled:
            if self.device == 'cuda':
                warnings.warn('CUDA is not available or torch_xla is imported. Disabling '
                              'autocast.', stacklevel=2)
                enabled = False
            elif not _warned[0]:
                _warned[0] = True
                warnings.warn('tape runs autocast regions without lowering precision: ops '
                              "keep their inputs' dtypes (tape has no bfloat16, and float16 "
                              'matmul is slow on NumPy).', UserWarning, stacklevel=2)
        self._enabled = bool(enabled)

    def __enter__(self):
        st = _st()
        self.prev = st.enabled.get(self.device, False)
        self.prev_fastdtype = st.dtype.get(self.device)
        st.enabled[self.device] = self._enabled
        st.dtype[self.device] = self.fast_dtype
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        st = _st()
        st.enabled[self.device] = self.prev
        if self.prev_fastdtype is None:
            st.dtype.pop(self.device, None)
        else:
            st.dtype[self.device] = self.prev_fastdtype
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f'autocast()(func) requires a callable, but got '
                            f'{type(func).__name__}. Did you mean to use autocast as a '
                            'context manager? For example:\n'
                            '    with torch.autocast(device_type=...):\n'
                            '        output = model(input)')

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with autocast(self.device, dtype=self.fast_dtype, enabled=self._enabled,
                          cache_enabled=self._cache_enabled):
                return func(*args, **kwargs)
        return decorate_autocast


def _cast(value, device_type, dtype):
    import tape
    if isinstance(value, tape.Tensor):
        eligible = (value.is_floating_point() and value.device.type == device_type
                    and value.dtype != np.float64)
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        it = (_cast(v, device_type, dtype) for v in value)
        return type(value)(it) if isinstance(value, (list, tuple)) else it
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom ``Function.forward`` (``torch.amp.custom_fwd``).  With
    ``cast_inputs`` and inside an enabled autocast region, floating (non-float64)
    tensor arguments are cast to ``cast_inputs`` (an explicit request) and forward
    runs with autocast disabled; otherwise forward runs as is."""
    if not isinstance(device_type, str):
        raise ValueError(f'Expected `device_type` of type `str`, got: `{type(device_type)}`')
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        on = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if on:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs),
                           **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom ``Function.backward``: runs it with the autocast state
    its forward saw (``torch.amp.custom_bwd``)."""
    if not isinstance(device_type, str):
        raise ValueError(f'Expected `device_type` of type `str`, got: `{type(device_type)}`')
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with _quiet_autocast(device_type, getattr(ctx, '_fwd_used_autocast', False),
                             getattr(ctx, '_dtype', None)):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _quiet_autocast(device_type, enabled, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return autocast(device_type=device_type, enabled=enabled, dtype=dtype)
