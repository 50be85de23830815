"""NumPy's floating-point warnings, which PyTorch does not give.

NumPy warns of the infs and NaNs that tape's arrays compute (log of 0, an
overflowing exp, inf - inf); PyTorch computes the same values silently.  At
import tape installs one warnings filter that ignores these RuntimeWarnings
when raised from tape's and compiler's own code (NumPy attributes a ufunc's
warning to its caller), so a user's NumPy code warns as before; an
``np.errstate`` around each op would cost ~1.5 us an op.

A filter the user adds later (``warnings.simplefilter('error')``, pytest's
``-W error``) goes in front of tape's, and turns the warning into an
exception raised from inside the op.  The ops therefore catch it where it can
arise: the hot ones with a try block (free until it raises) that computes
again under ``np.errstate(all='ignore')`` (``quietly``), and the backward,
whose Python-run records accumulate in place and cannot be run twice, under
that errstate from the start when such a filter is in place (``raises``:
checked once per backward, ~50 ns).
"""
import warnings

import numpy as np

warnings.filterwarnings('ignore', message='(divide by zero|overflow|underflow|invalid value) '
                        'encountered in ', category=RuntimeWarning,
                        module=r'(tape|compiler)(\.|$)')
FILTER = warnings.filters[0]


def fp_warning(e):
    """Is ``e`` NumPy's floating-point RuntimeWarning ("overflow encountered in
    multiply") raised as an exception?"""
    return 'encountered in' in str(e)


def quietly(e, fn, *args, **kw):
    """``fn(*args, **kw)`` again without NumPy's floating-point warnings, after
    it raised ``e`` (re-raised unless it is one: see ``fp_warning``)."""
    if not fp_warning(e):
        raise e
    with np.errstate(all='ignore'):
        return fn(*args, **kw)


def raises():
    """Would a NumPy floating-point warning raised in tape's code be an
    exception now: does an 'error' filter for RuntimeWarning come before
    tape's?"""
    filters = warnings.filters
    if filters and filters[0] is FILTER:
        return False
    for f in filters:
        if f is FILTER or f == FILTER:
            return False
        action, _msg, category, _mod, _line = f
        if issubclass(RuntimeWarning, category):
            return action == 'error'
    return False
