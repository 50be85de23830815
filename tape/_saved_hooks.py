"""Hooks for saved tensors: ``tape.autograd.graph.saved_tensors_hooks``.

Inside ``with saved_tensors_hooks(pack_hook, unpack_hook):`` every value a
record saves for the backward is passed (as a tensor) to ``pack_hook`` when it
is saved, and whatever ``pack_hook`` returned goes to ``unpack_hook`` when a
backward needs the value: the backward computes with the tensor
``unpack_hook`` returns, as in PyTorch.

How it reaches the recorder without a test on its hot paths: a record saves
by ``tape.saved.append(array)`` (tape/_ops.py) or, for a large record,
``tape.big.append(meta)``.  Entering a hook context swaps those two lists of
every live tape, and of each tape opened while a context is open, for the
list subclasses below, whose ``append`` packs.  A tape keeps such a list
after the context ends (its ``append`` then packs only while some context
is open in the thread).  The packed objects sit beside the values:

- a small record's value stays in ``tape.saved`` (the recorder's in-place
  checks read it during the forward); ``HookedSaved.packs`` maps its index
  to ``(packed, unpack_hook)``, and ``pack()`` (tape/_sweep.py) builds the
  sweep's values from ``unpacked()``, calling ``unpack_hook`` once per
  backward;
- a large record's ``BigRecord.packs`` maps its saved names to
  ``(packed, unpack_hook)``; each backward's ``pack()`` replaces
  ``meta.saved`` by the unpacked values (so the arrays ``pack_hook`` was
  given are not kept by the tape once a backward has run).

What is not covered: ``tape.jit`` replays (a traced function runs eagerly
while a hook context is open), and the buffers the library's fused nn nodes
keep for their own backward (convolution columns, recurrent layers'
gates): those are not handed to the hooks.  Custom Functions'
``ctx.save_for_backward`` tensors are (tape/autograd/function.py).
"""
import threading

import numpy as np

from ._tape import grad_mode, live_tapes, saved_hooks_active as active


class _State(threading.local):
    stack = ()              # (pack_hook, unpack_hook) pairs, innermost last
    disabled = None         # the message while disable_saved_tensors_hooks is on


state = _State()
# (``active``: contexts open in any thread; open_tape gives new tapes the
# packing lists while it is above 0)
_lock = threading.Lock()


def current():
    """The innermost (pack_hook, unpack_hook) of this thread, or None."""
    stack = state.stack
    return stack[-1] if stack else None


def _as_tensor(value):
    from ._tensor import _leaf
    return _leaf(np.asarray(value))


def unpacked_value(packed, unpack, like):
    """``unpack(packed)`` as the array the sweep reads in place of ``like``."""
    from ._tensor import Tensor
    t = unpack(packed)
    if not isinstance(t, Tensor):
        raise TypeError(f'Output of saved tensor unpack_hook expected to be a Tensor but got '
                        f'result of type {type(t).__name__}')
    arr = np.asarray(t._data)
    shape = np.shape(like)
    if arr.size != np.size(like):
        raise RuntimeError(f'saved tensor unpack_hook returned a tensor of shape '
                           f'{list(arr.shape)} where the saved tensor had shape {list(shape)}')
    dtype = like.dtype if isinstance(like, (np.ndarray, np.generic)) else arr.dtype
    return np.ascontiguousarray(arr.reshape(shape), dtype=dtype)


class HookedSaved(list):
    """``tape.saved`` whose ``append`` packs (see the module docstring)."""
    __slots__ = ('packs', 'tape')

    def __init__(self, items, tape):
        super().__init__(items)
        self.packs = {}                 # index -> (packed, unpack_hook)
        self.tape = tape                # a weakref

    def append(self, value):
        hooks = state.stack
        if hooks:
            pack, unpack = hooks[-1]
            try:
                packed = pack(_as_tensor(value))
            except BaseException:
                self._rollback()
                raise
            list.append(self, value)
            self.packs[len(self) - 1] = (packed, unpack)
            tape = self.tape()
            if tape is not None:
                tape.hooked = True
        else:
            list.append(self, value)

    def _rollback(self):
        """A pack hook raised in the middle of an op: drop what that op appended
        before it (its record was never written), so that the values line up
        with the records' offsets again."""
        tape = self.tape()
        if tape is None:
            return
        used = tape.freed[0] if tape.freed is not None else 0
        keep = 0
        for value in self:
            size = int(np.size(value))
            if used + size > tape.vpos:
                break
            used += size
            keep += 1
        del self[keep:]
        for i in [i for i in self.packs if i >= keep]:
            del self.packs[i]

    def unpacked(self):
        """The values with each packed one replaced by its ``unpack_hook`` result."""
        out = list(self)
        for i, (packed, unpack) in self.packs.items():
            out[i] = unpacked_value(packed, unpack, out[i])
        return out

    def adopt(self, packs, offset):
        """Packed values of a tape merged into this one, whose values now start at
        index ``offset`` here."""
        for i, entry in packs.items():
            self.packs[i + offset] = entry


class HookedBig(list):
    """``tape.big`` whose ``append`` packs a large record's saved arrays."""
    __slots__ = ('tape',)

    def __init__(self, items, tape):
        super().__init__(items)
        self.tape = tape                # a weakref

    def append(self, meta):
        hooks = state.stack
        if hooks and meta.saved:
            pack, unpack = hooks[-1]
            meta.packs = {name: (pack(_as_tensor(arr)), unpack)
                          for name, arr in meta.saved.items()}
            tape = self.tape()
            if tape is not None:
                tape.hooked = True
        list.append(self, meta)


def install(tape):
    """Give ``tape`` the packing lists (once)."""
    import weakref
    if type(tape.saved) is list:
        ref = weakref.ref(tape)
        tape.saved = HookedSaved(tape.saved, ref)
        tape.big = HookedBig(tape.big, ref)


def unpacked_saved(tape):
    """``tape.saved`` for a sweep: unpacked where hooks packed (also refreshes the
    large records' ``meta.saved`` from their packed values)."""
    for meta in tape.big:
        packs = getattr(meta, 'packs', None)
        if packs and meta.saved:
            meta.saved = {name: unpacked_value(packed, unpack, meta.saved[name])
                          for name, (packed, unpack) in packs.items()}
    saved = tape.saved
    if type(saved) is HookedSaved and saved.packs:
        return saved.unpacked()
    return saved


def merge_packs(dst, src_saved, offset):
    """``merge`` moved ``src_saved``'s values to ``dst.saved`` from ``offset`` on:
    move their packed values too."""
    packs = getattr(src_saved, 'packs', None)
    if not packs:
        return
    if type(dst.saved) is list:
        install(dst)
    dst.saved.adopt(packs, offset)
    dst.hooked = True


class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor)`` for every value saved for backward
    inside it, ``unpack_hook(packed)`` (returning a tensor) when a backward reads
    it.  Only the innermost pair applies; per thread, as in PyTorch.

    >>> import tape
    >>> from tape.autograd.graph import saved_tensors_hooks
    >>> packed = []
    >>> a = tape.ones(3, requires_grad=True)
    >>> with saved_tensors_hooks(lambda t: packed.append(t) or len(packed) - 1,
    ...                          lambda i: packed[i] * 2):
    ...     y = (a * a).sum()
    >>> len(packed)
    2
    >>> y.backward()            # the backward sees 2 * a for each saved a
    >>> a.grad
    tensor([4., 4., 4.])
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if state.disabled is not None:
            raise RuntimeError(state.disabled)
        state.stack = state.stack + ((self.pack_hook, self.unpack_hook),)
        with _lock:
            active[0] += 1
        for tape in live_tapes():
            install(tape)
        # graphs that start inside get tapes of their own, not the thread's open
        # tape of graphs recorded before (whose backward would unpack their values)
        grad_mode.open_tape = None
        return self

    def __exit__(self, *exc):
        state.stack = state.stack[:-1]
        with _lock:
            active[0] -= 1
        return False


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors on the CPU: every tensor here is on the CPU already, so
    this packs each saved tensor as a copy (PyTorch copies device tensors to
    the CPU and back; ``pin_memory`` and ``device_type`` are accepted and
    have nothing to do)."""

    def __init__(self, pin_memory=False, device_type='cuda'):
        def pack(t):
            return t.detach().clone()

        def unpack(t):
            return t
        super().__init__(pack, unpack)
        self.pin_memory = pin_memory
        self.device_type = device_type


class disable_saved_tensors_hooks:
    """While on, entering ``saved_tensors_hooks`` (or ``save_on_cpu``) raises
    ``RuntimeError(error_message)``; so does entering it while such hooks are
    on already, as in PyTorch.  A context manager and a decorator."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if state.stack:
            raise RuntimeError(self.error_message)
        self._prev = state.disabled
        state.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        state.disabled = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with disable_saved_tensors_hooks(self.error_message):
                return fn(*args, **kwargs)
        return wrapped
