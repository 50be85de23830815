"""One-pass float32/float64 forwards of activations (tape/_elementwise.py).

NumPy spends several passes (and temporaries) on what these do in one loop:
``np.where(x > 0, x, x * slope)`` for leaky_relu takes ~4 ns an element on a
random sign pattern (its select branches), ``np.maximum`` then ``np.minimum``
for clamp reads and writes the array twice.  Each loop does the same float
operations, in the array's own dtype, as the NumPy expression it replaces, so
results are equal element by element, NaN included.  Flat C-contiguous arrays.

Compiled on first use (``cache=True``), never at import.
"""
from numba import njit


@njit(cache=True, error_model='numpy')
def leaky_relu_fwd(x, slope, out):
    """out = x where x > 0, else x * slope (slope in x's dtype; NaN stays NaN)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v if v > 0 else v * slope


@njit(cache=True, error_model='numpy')
def clamp_fwd(x, lo, hi, out):
    """out = minimum(maximum(x, lo), hi) with NumPy's NaN propagation (a NaN in x
    stays NaN; lo and hi, in x's dtype, are not NaN)."""
    for i in range(x.shape[0]):
        v = x[i]
        v = lo if v < lo else v
        out[i] = hi if v > hi else v

