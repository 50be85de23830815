"""Backward of cumsum and cumprod over large tensors (tape/_big.py).

The sweep's kernels (``_k_cumsum``/``_k_cumprod``) work on flat float64
arenas, so a big record reached them through copies into a private arena.
These run on the arrays themselves, in their dtypes, accumulating in float64
as those kernels do: ``g`` is the output's gradient, or one value broadcast
(``bcast``: ``g[0]`` everywhere, a full sum's gradient), ``gi`` the input's
gradient, written (not added).  The tensor is (outer, ln, inner) around the
axis; for inner > 1 the loop over inner is innermost (contiguous).
"""
import numpy as np
from numba import njit


@njit(cache=True, error_model='numpy')
def cumsum_grad(g, bcast, gi, outer, ln, inner):
    if inner == 1:
        for o in range(outer):
            a = 0.0
            for j in range(ln - 1, -1, -1):
                p = o * ln + j
                a += g[0] if bcast else g[p]
                gi[p] = a
        return
    acc = np.zeros(inner)
    for o in range(outer):
        acc[:] = 0.0
        for j in range(ln - 1, -1, -1):
            base = (o * ln + j) * inner
            for q in range(inner):
                acc[q] += g[0] if bcast else g[base + q]
                gi[base + q] = acc[q]


@njit(cache=True, error_model='numpy')
def cumprod_grad(g, bcast, x, out, gi, outer, ln, inner):
    # as _k_cumprod: before a row's first zero, reversed cumsum of g * out over x;
    # at the first zero, the sum of g times the products that skip it; after, 0
    for o in range(outer):
        for q in range(inner):
            base = o * ln * inner + q
            z = ln
            for j in range(ln):
                if x[base + j * inner] == 0.0:
                    z = j
                    break
            acc = 0.0
            for j in range(ln - 1, z, -1):
                gi[base + j * inner] = 0.0
            for j in range(z - 1, -1, -1):
                p = base + j * inner
                acc += (g[0] if bcast else g[p]) * np.float64(out[p])
                gi[p] = acc / x[p]
            if z < ln:
                run = 1.0 if z == 0 else np.float64(out[base + (z - 1) * inner])
                acc = 0.0
                for j in range(z, ln):
                    p = base + j * inner
                    if j > z:
                        run *= x[p]
                    acc += (g[0] if bcast else g[p]) * run
                gi[base + z * inner] = acc


@njit(cache=True, error_model='numpy')
def cumsum_fwd(x, out, outer, ln, inner):
    """out = cumsum of the flat C-contiguous x along the axis, accumulated in
    float64 and rounded into out's dtype per element: PyTorch's CPU cumsum
    accumulates float32 in double (NumPy's in float32, and ~2 ns an element
    along a last axis).  Along a last axis four rows run side by side, four
    independent dependency chains instead of one add's latency per element."""
    if inner == 1:
        o = 0
        while o + 4 <= outer:
            b0 = o * ln
            b1 = b0 + ln
            b2 = b1 + ln
            b3 = b2 + ln
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for j in range(ln):
                a0 += x[b0 + j]
                a1 += x[b1 + j]
                a2 += x[b2 + j]
                a3 += x[b3 + j]
                out[b0 + j] = a0
                out[b1 + j] = a1
                out[b2 + j] = a2
                out[b3 + j] = a3
            o += 4
        while o < outer:
            b0 = o * ln
            a0 = 0.0
            for j in range(ln):
                a0 += x[b0 + j]
                out[b0 + j] = a0
            o += 1
        return
    acc = np.zeros(inner)
    for o in range(outer):
        acc[:] = 0.0
        for j in range(ln):
            base = (o * ln + j) * inner
            for q in range(inner):
                acc[q] += x[base + q]
                out[base + q] = acc[q]
