"""The Numba side of tape: scalar helper kernels and the generated reverse sweep.

Nothing here compiles at import: every kernel is ``@njit(cache=True)`` and is
compiled (or loaded from Numba's cache) on its first call.  ``codegen.py``
writes ``_sweep_generated.py`` from the rule table in ``tape/_rules.py``;
run ``python -m compiler.codegen`` after changing the table (a test fails when
the committed file is stale).
"""
