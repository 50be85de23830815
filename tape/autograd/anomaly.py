"""Anomaly mode (``detect_anomaly``, ``set_detect_anomaly``): while it is on, a
backward checks each node's gradients and raises at the first node that returns
NaN, naming it as PyTorch does.  Per thread, like grad mode.

The check hooks every node of the graph (``grad_fn.register_hook``) for the one
backward, so each node's gradients are seen as it returns them; the sweep then
runs records one by one, which is slow, as anomaly mode is in PyTorch.

>>> import tape
>>> x = tape.zeros(1, requires_grad=True)
>>> with tape.autograd.detect_anomaly():
...     (x.sqrt() * 0).sum().backward()
Traceback (most recent call last):
    ...
RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
"""
import contextlib
import functools
import threading
import warnings

import numpy as np

__all__ = ['detect_anomaly', 'set_detect_anomaly', 'is_anomaly_enabled',
           'is_anomaly_check_nan_enabled']


class _AnomalyMode(threading.local):
    enabled = False
    check_nan = True
    watching = False            # a backward of this thread has its hooks in place


_mode = _AnomalyMode()


def is_anomaly_enabled():
    """Whether anomaly mode is on in this thread."""
    return _mode.enabled


def is_anomaly_check_nan_enabled():
    """The check_nan flag of this thread (as in PyTorch, True by default and read
    independently of whether anomaly mode is on)."""
    return _mode.check_nan


def _set(enabled, check_nan):
    prev = (_mode.enabled, _mode.check_nan)
    _mode.enabled, _mode.check_nan = bool(enabled), bool(check_nan)
    return prev


class detect_anomaly:
    """A context manager (and decorator) that turns anomaly mode on.

    >>> import tape
    >>> with tape.autograd.detect_anomaly():
    ...     tape.autograd.is_anomaly_enabled()
    True
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn('Anomaly Detection has been enabled. This mode will increase the '
                      'runtime and should only be enabled for debugging.', stacklevel=2)

    def __enter__(self):
        self._prev = _set(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapped


class set_detect_anomaly:
    """Turn anomaly mode on or off: at once when called, and back to what it was
    when used as a context manager and left.

    >>> import tape
    >>> with tape.autograd.set_detect_anomaly(True):
    ...     tape.autograd.is_anomaly_enabled()
    True
    >>> tape.autograd.is_anomaly_enabled()
    False
    """

    def __init__(self, mode, check_nan=True):
        self._prev = _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False


def _nodes(roots):
    """Every node reachable from the roots' ``grad_fn`` (iteratively: deep graphs)."""
    seen, stack, out = set(), [], []
    for r in roots:
        fn = getattr(r, 'grad_fn', None)
        if fn is not None:
            stack.append(fn)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        out.append(fn)
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return out


def _nan_check(name):
    def check(grad_inputs, grad_outputs):
        for i, g in enumerate(grad_inputs):
            if g is not None and np.isnan(np.asarray(getattr(g, '_data', g))).any():
                raise RuntimeError(f"Function '{name}' returned nan values in its {i}th "
                                   f"output.")
    return check


@contextlib.contextmanager
def watching(roots):
    """Around one backward from ``roots``: hook each node with the NaN check when
    anomaly mode asks for it (once per thread, however the backward nests)."""
    if not (_mode.enabled and _mode.check_nan) or _mode.watching:
        yield
        return
    handles = []
    _mode.watching = True
    try:
        for fn in _nodes(roots):
            if type(fn).__name__ != 'AccumulateGrad':
                handles.append(fn.register_hook(_nan_check(fn.name())))
        yield
    finally:
        _mode.watching = False
        for h in handles:
            h.remove()
