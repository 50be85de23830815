"""``tape.compile``: ``torch.compile``'s interface, running the code as written.

``torch.compile`` is an optimisation that must not change what a program
computes: TorchDynamo guards every assumption it makes (Python globals,
control flow, shapes) and falls back to eager code when one fails.  tape has
no such guarded compiler, so ``tape.compile`` keeps the semantics by running
the function eagerly: programs written with ``torch.compile`` run unchanged,
with tape's eager speed.  ``tape.jit`` is tape's own compiler (it traces a
function once and replays its forward in one Numba call), but it fixes Python
control flow and globals at the trace, so it is an explicit choice, not what
``compile`` does behind a user's back.

What does carry over is the shape of the result: a module comes back wrapped
in an ``OptimizedModule`` whose ``state_dict`` keys start with ``_orig_mod.``
(as PyTorch's do, a common surprise when saving a compiled model), which
forwards attribute access to the original module; a function comes back as a
wrapper with ``__wrapped__`` set.

>>> import tape
>>> model = tape.nn.Linear(2, 3)
>>> fast = tape.compile(model)
>>> type(fast).__name__, list(fast.state_dict())
('OptimizedModule', ['_orig_mod.weight', '_orig_mod.bias'])
>>> fast.weight is model.weight
True
>>> @tape.compile(mode='max-autotune')
... def double(x):
...     return x * 2
>>> double(tape.ones(2))
tensor([2., 2.])
"""
import functools

from .nn.modules import Module

__all__ = ['compile', 'OptimizedModule']

_BACKENDS = ('inductor', 'eager', 'aot_eager', 'cudagraphs', 'onnxrt', 'openxla', 'tvm')
_MODES = (None, 'default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs')


def compile(model=None, *, fullgraph=False, dynamic=None, backend='inductor',  # noqa: A001
            mode=None, options=None, name=None, disable=False, **kwargs):
    """``torch.compile(model)``: ``model`` itself, run eagerly (see the module
    docstring); a module is wrapped in an ``OptimizedModule``.  Used as
    ``@compile`` or ``@compile(...)`` too."""
    if mode not in _MODES:
        raise RuntimeError(f'Unrecognized mode={mode}, should be one of: '
                           + ', '.join(m for m in _MODES if m))
    if mode is not None and options is not None:
        raise RuntimeError('Either mode or options can be specified, but both can\'t be '
                           'specified at the same time.')
    if isinstance(backend, str) and backend not in _BACKENDS:
        raise RuntimeError(f'backend={backend!r} is not a registered backend; one of '
                           + ', '.join(_BACKENDS))
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                           mode=mode, options=options, name=name, disable=disable, **kwargs)
        return decorate
    if not callable(model):
        raise RuntimeError('model must be a callable')
    if isinstance(model, Module):
        return OptimizedModule(model)

    @functools.wraps(model)
    def compiled(*args, **kw):
        return model(*args, **kw)
    return compiled


class OptimizedModule(Module):
    """``torch.compile``'s wrapper of a module: its one submodule is ``_orig_mod``;
    calls and attributes it lacks go to that module."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules['_orig_mod'], name)
