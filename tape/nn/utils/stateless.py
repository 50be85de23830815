"""``tape.nn.utils.stateless``: the deprecated ``functional_call`` (PyTorch 2.0
moved it to ``torch.func.functional_call``; this one warns and calls
``tape.func.functional_call``)."""
import warnings as _warnings

__all__ = ['functional_call']


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with its parameters and buffers replaced by
    ``parameters_and_buffers`` (deprecated: use ``tape.func.functional_call``)."""
    _warnings.warn('`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 '
                   'and will be removed in a future version of PyTorch. Please use '
                   '`torch.func.functional_call` instead which is a drop-in replacement.',
                   FutureWarning, stacklevel=2)
    from ...func import functional_call as _fc
    return _fc(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
               strict=strict)
