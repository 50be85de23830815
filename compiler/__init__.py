"""The Numba side of tape: scalar helper kernels and the generated reverse sweep.

Nothing here compiles at import: every kernel is ``@njit(cache=True)`` and is
compiled (or loaded from Numba's cache) on its first call.  ``codegen.py``
writes ``_sweep_generated.py`` (the reverse sweep), ``chunkgen.py``
``_chunk_generated.py`` (large-tensor VJP kernels) and ``replaygen.py``
``_replay_generated.py`` (the forward replay of a traced tape) from the rule
table in ``tape/_rules.py``; run ``make codegen`` after changing the table (a
test fails when a generated file is stale).
"""
