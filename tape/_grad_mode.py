"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``; per thread."""
import functools
import inspect
import sys

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
        return _decorate(fn, self.__class__)


class _NoParamMode(_Mode):
    """A mode that also decorates without parentheses (``@no_grad``)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


def _decorate(fn, make_mode):
    """``fn`` run inside ``make_mode()``; a generator function gets the mode
    each time it resumes (and not while it is suspended), as in PyTorch."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with make_mode():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with make_mode():
                            gen.close()
                        raise
                    except BaseException:
                        with make_mode():
                            response = gen.throw(*sys.exc_info())
                    else:
                        with make_mode():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value
        return generator

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with make_mode():
            return fn(*args, **kwargs)
    return wrapped


class no_grad(_NoParamMode):
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
        return _decorate(fn, lambda: inference_mode(not value))


def is_inference_mode_enabled():
    return not grad_mode.enabled


class enable_grad(_NoParamMode):
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
        return _decorate(fn, lambda: set_grad_enabled(value))
