"""Partial sums in vector lanes, shared by the row kernels (softmax, norms,
reductions).

Without fastmath LLVM will not vectorize a floating-point reduction (that
would reorder the adds), so the kernels keep ``LANES`` partial sums in a small
array, ``acc[l] += x[j + l]``: an elementwise loop, which it does vectorize.
64 lanes, because LLVM fully unrolls a constant loop of 32 or fewer before its
loop vectorizer runs, and with no SLP pass the unrolled adds stay scalar.
``fold`` then adds the lanes as a tree.
"""
from numba import njit

LANES = 64


@njit(cache=True, error_model='numpy', inline='always')
def fold(acc):
    """The sum of the ``LANES`` lanes of ``acc`` as a tree of independent adds
    (halving in place), not one dependent chain of 64 adds (~100 ns a row)."""
    h = LANES
    while h > 1:
        h //= 2
        for k in range(h):
            acc[k] += acc[k + h]
    return acc[0]
