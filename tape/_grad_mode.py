"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``; per thread."""
import functools
import inspect
import sys

import numpy as np

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
    ``is_inference_mode_enabled()`` tells whether one is on (``no_grad`` is not
    inference mode).  ``inference_mode(False)`` turns recording back on, as in
    PyTorch.  Tensors made inside are ordinary tensors (``is_inference()`` is
    False): PyTorch's errors for using them in a graph afterwards are not raised.

    >>> import tape
    >>> with tape.inference_mode():
    ...     y = tape.ones(2, requires_grad=True) * 2
    ...     tape.is_inference_mode_enabled()
    True
    >>> y.requires_grad
    False
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)          # @inference_mode without parentheses
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._value = not self.mode

    def __enter__(self):
        self._prev_inference = grad_mode.inference
        grad_mode.inference = self.mode
        return super().__enter__()

    def __exit__(self, *exc):
        grad_mode.inference = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = self.mode
        return _decorate(fn, lambda: inference_mode(mode))

    def clone(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled():
    """Whether an ``inference_mode`` block is on in this thread."""
    return grad_mode.inference


class enable_grad(_NoParamMode):
    """Enable recording inside the block, even within ``no_grad``; not within
    ``inference_mode``, which wins as in PyTorch (nothing is recorded there)."""
    _value = True

    def __enter__(self):
        self._prev = grad_mode.enabled
        set_grad_mode(not grad_mode.inference)
        return self


class set_grad_enabled(_Mode):
    """``set_grad_enabled(False)`` turns recording off now (and back on at the end of a
    ``with`` block or decorated call)."""

    def __init__(self, mode):
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f'set_grad_enabled(): argument \'mode\' (position 1) must be '
                            f'bool, not {type(mode).__name__}')
        self._value = bool(mode) and not grad_mode.inference    # (inference mode wins)
        self._prev = grad_mode.enabled
        set_grad_mode(self._value)

    def __enter__(self):
        set_grad_mode(self._value)      # (an object made earlier sets its mode again)
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False

    def __call__(self, fn):
        set_grad_mode(self._prev)     # as a decorator it must not switch now
        value = self._value
        return _decorate(fn, lambda: set_grad_enabled(value))
