"""Numba kernels behind row picks: embedding, index_select and gather (``tape/nn/functional.py``,
``tape/_indexing.py``).

A row pick ``out[o, j, :] = a[o, idx[j], :]`` (a viewed as (outer, n, inner),
embedding's weight as (1, V, D)) was a take record: an int64 map of every picked
element's flat position (as large as the output), built by NumPy, then two
NumPy passes over the indices (min and max) to validate them, and a backward
``bincount`` over that map in float64.  Here a row index and the row length are
all a kernel needs:

- the forward copies rows and checks each index as it reads it (one pass, no
  map); it returns the position of the first bad index, or -1, and the caller
  raises (Numba kernels cannot raise PyTorch's messages);
- the backward adds gradient rows into a zeroed gradient in the input's dtype,
  in index order (PyTorch's CPU index_add / embedding_dense_backward also
  accumulate in the input's dtype), with embedding's ``padding_idx`` row left
  at zero and ``scale_grad_by_freq``'s 1/count per row.

Nothing here compiles at import: callers import this module inside functions.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def pick_rows(a, idx, out):
    """out[o, j, :] = a[o, idx[j], :] for a (outer, n, inner), out (outer, m, inner);
    the position in ``idx`` of the first index outside [0, n), or -1 (then nothing
    is written).  (Plain 3-d indexing, not row slices: a slice is an array
    struct per row, ~20 ns, which dominated rows of one element.)"""
    n = a.shape[1]
    m = idx.shape[0]
    inner = a.shape[2]
    for j in range(m):
        r = idx[j]
        if r < 0 or r >= n:
            return j
    if inner == 1:
        # (a pick along the last dim: without the one-trip inner loop, ~2x faster)
        for o in range(a.shape[0]):
            for j in range(m):
                out[o, j, 0] = a[o, idx[j], 0]
        return -1
    for o in range(a.shape[0]):
        for j in range(m):
            r = idx[j]
            for k in range(inner):
                out[o, j, k] = a[o, r, k]
    return -1


@njit(cache=True)
def add_rows(g, idx, ga):
    """ga[o, idx[j], :] += g[o, j, :] (ga zeroed by the caller; indices valid)."""
    m = idx.shape[0]
    inner = g.shape[2]
    if inner == 1:
        for o in range(g.shape[0]):
            for j in range(m):
                ga[o, idx[j], 0] += g[o, j, 0]
        return
    for o in range(g.shape[0]):
        for j in range(m):
            r = idx[j]
            for k in range(inner):
                ga[o, r, k] += g[o, j, k]


@njit(cache=True)
def embedding_backward(g, idx, gw, padding_idx, by_freq):
    """gw[idx[j], :] += g[j, :] / count(idx[j]) (``by_freq``, else 1), except at the
    row ``padding_idx`` (-1: none); gw (V, D) zeroed by the caller."""
    m = idx.shape[0]
    d = g.shape[1]
    if by_freq:
        counts = np.zeros(gw.shape[0], np.int64)
        for j in range(m):
            counts[idx[j]] += 1
    for j in range(m):
        r = idx[j]
        if r == padding_idx:
            continue
        if by_freq:
            s = 1.0 / counts[r]
            for k in range(d):
                gw[r, k] += g[j, k] * s
        else:
            for k in range(d):
                gw[r, k] += g[j, k]


@njit(cache=True)
def gather_rows(a, idx, out, pos):
    """out[o, j, i] = a[o, idx[o, j, i], i] (a (outer, n, inner), idx and out
    (outer, m, inner)), and, when ``pos`` is not empty, each picked element's flat
    position in ``a`` (the map of a take record); the flat position in ``idx`` of
    the first index outside [0, n), or -1."""
    n = a.shape[1]
    m = idx.shape[1]
    inner = a.shape[2]
    if inner == 1:
        for o in range(a.shape[0]):
            for j in range(m):
                r = idx[o, j, 0]
                if r < 0 or r >= n:
                    return o * m + j
                out[o, j, 0] = a[o, r, 0]
    else:
        for o in range(a.shape[0]):
            for j in range(m):
                for i in range(inner):
                    r = idx[o, j, i]
                    if r < 0 or r >= n:
                        return (o * m + j) * inner + i
                    out[o, j, i] = a[o, r, i]
    if pos.shape[0] > 0:
        q = 0
        for o in range(a.shape[0]):
            for j in range(m):
                for i in range(inner):
                    pos[q] = (o * n + idx[o, j, i]) * inner + i
                    q += 1
    return -1


@njit(cache=True)
def scatter_rows(g, idx, ga):
    """ga[o, idx[o, j, i], i] += g[o, j, i] (ga zeroed by the caller; indices valid)."""
    m = idx.shape[1]
    inner = g.shape[2]
    if inner == 1:
        for o in range(g.shape[0]):
            for j in range(m):
                ga[o, idx[o, j, 0], 0] += g[o, j, 0]
        return
    for o in range(g.shape[0]):
        for j in range(m):
            for i in range(inner):
                ga[o, idx[o, j, i], i] += g[o, j, i]
