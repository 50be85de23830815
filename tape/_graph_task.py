"""The backward call now running in this thread (PyTorch's "graph task"), for
hooks that act once per backward (``register_multi_grad_hook``).

A hook asks ``current()`` for the running backward's id and may queue a
callback with ``at_end(fn)``; the backward driver calls ``finish()`` when the
outermost backward call of the thread returns (running the callbacks) and
``abort()`` when it raises (dropping them, as PyTorch drops a failed graph
task's pending work).  The drivers test the module-level ``pending`` count
before calling either, so a backward that no such hook touched pays one
list lookup.
"""
import itertools
import threading


class _State(threading.local):
    depth = 0           # nested backward calls of the general driver (run)
    task = None         # the id of the backward now running, once asked for
    callbacks = None    # what to run when it finishes


state = _State()
pending = [0]           # callbacks queued in any thread and not yet run or dropped
_ids = itertools.count(1)
_lock = threading.Lock()


def current():
    """An id of the backward call now running in this thread (one per call)."""
    task = state.task
    if task is None:
        task = state.task = next(_ids)
    return task


def at_end(fn):
    """Run ``fn()`` when the backward now running has finished without error."""
    current()
    if state.callbacks is None:
        state.callbacks = []
    state.callbacks.append(fn)
    with _lock:
        pending[0] += 1


def finish():
    """The outermost backward of this thread returned: run its queued callbacks."""
    if state.depth:
        return
    callbacks = state.callbacks
    state.task = state.callbacks = None
    if callbacks:
        with _lock:
            pending[0] -= len(callbacks)
        for fn in callbacks:
            fn()


def abort():
    """The backward raised: drop its queued callbacks (and its id)."""
    if state.depth:
        return
    callbacks = state.callbacks
    state.task = state.callbacks = None
    if callbacks:
        with _lock:
            pending[0] -= len(callbacks)


def enter():
    state.depth += 1


def leave():
    state.depth -= 1
