"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``; per thread."""
import functools

from ._tape import grad_mode, set_grad_mode


def is_grad_enabled():
    """Whether ops are being recorded in this thread."""
    return grad_mode.enabled


class _Mode:
    """A context manager that is also a decorator."""
    _value = None

    def __enter__(self):
        self._prev = grad_mode.enabled
        set_grad_mode(self._value)
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapped


class no_grad(_Mode):
    """Disable recording inside the block (or the decorated function).

    >>> import tape
    >>> x = tape.ones(2, requires_grad=True)
    >>> with tape.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """
    _value = False


class inference_mode(_Mode):
    """``inference_mode()`` (or ``inference_mode(False)``): like ``no_grad`` here,
    since nothing else is needed for speed when no graph is recorded.

    >>> import tape
    >>> with tape.inference_mode():
    ...     y = tape.ones(2, requires_grad=True) * 2
    >>> y.requires_grad
    False
    """

    def __init__(self, mode=True):
        self._value = not mode

    def __call__(self, fn):
        value = self._value

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with inference_mode(not value):
                return fn(*args, **kwargs)
        return wrapped


def is_inference_mode_enabled():
    return not grad_mode.enabled


class enable_grad(_Mode):
    """Enable recording inside the block, even within ``no_grad``."""
    _value = True


class set_grad_enabled(_Mode):
    """``set_grad_enabled(False)`` turns recording off now (and back on at the end of a
    ``with`` block or decorated call)."""

    def __init__(self, mode):
        self._value = bool(mode)
        self._prev = grad_mode.enabled
        set_grad_mode(self._value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False

    def __call__(self, fn):
        set_grad_mode(self._prev)     # as a decorator it must not switch now
        value = self._value

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_grad_enabled(value):
                return fn(*args, **kwargs)
        return wrapped
