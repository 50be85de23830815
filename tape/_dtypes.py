"""PyTorch's type promotion, for the few places NumPy's differs.

NumPy and PyTorch agree when both operands share a dtype, and for a float
tensor with a Python number.  They differ in three ways, fixed here:

* an integer tensor with a float (tensor or Python number) gives the float's
  dtype in PyTorch (float32 for a Python float: the default dtype); NumPy
  gives float64 for int64 with float32;
* a 0-d tensor does not raise a dimensioned tensor's dtype within its
  category (float32 (3,) * float64 () is float32 in PyTorch);
* true division (and atan2) of integers gives the default float dtype.

The ops call ``binary_result`` only when the dtypes they see differ, so the
common same-dtype case pays one identity test.
"""
import numpy as np

default_dtype = [np.dtype(np.float32)]      # tape.set_default_dtype writes here

_F64 = np.dtype(np.float64)


def category(dt):
    """0 bool, 1 integer, 2 floating (PyTorch's promotion categories)."""
    k = dt.kind
    return 2 if k in 'fc' else 1 if k in 'iu' else 0


def promote_types(d1, d2):
    """``torch.promote_types``: the higher category wins; within one, NumPy's rule."""
    d1, d2 = np.dtype(d1), np.dtype(d2)
    c1, c2 = category(d1), category(d2)
    if c1 == c2:
        return np.promote_types(d1, d2)
    return d1 if c1 > c2 else d2


def result_type(*operands):
    """``torch.result_type`` of arrays (dimensioned or 0-d) and Python numbers."""
    dims = zero = scal = None
    for x in operands:
        if isinstance(x, (bool, np.bool_)):
            d = np.dtype(np.bool_)
            scal = d if scal is None else promote_types(scal, d)
        elif isinstance(x, (int, float)) and not isinstance(x, np.generic):
            d = np.dtype(np.int64) if isinstance(x, int) else default_dtype[0]
            scal = d if scal is None else promote_types(scal, d)
        else:
            d = np.dtype(x.dtype)
            if np.ndim(x):
                dims = d if dims is None else promote_types(dims, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
    r = dims
    for tier in (zero, scal):
        if tier is None:
            continue
        if r is None or category(tier) > category(r):
            if r is not None and tier is scal and category(tier) == 2:
                tier = default_dtype[0]
            r = tier
    return r


# binary ops whose result is a float for integer and bool operands too
_FLOAT_RESULT = frozenset({'div', 'true_divide', 'atan2'})


BOOL_SUB = ('Subtraction, the `-` operator, with {} is not supported. If you are trying '
            'to invert a mask, use the `~` or `logical_not()` operator instead.')


def binary_result(name, ad, bd, out):
    """``out`` (NumPy's result of ``name(ad, bd)``) cast to PyTorch's dtype."""
    if name == 'sub' and (getattr(ad, 'dtype', None) == np.bool_
                          or getattr(bd, 'dtype', None) == np.bool_):
        raise RuntimeError(BOOL_SUB.format('a bool tensor'))
    dt = result_type(ad, bd)
    if name in _FLOAT_RESULT and dt.kind not in 'fc':
        dt = default_dtype[0]
    if out.dtype.kind == 'b' or dt is None or out.dtype == dt:
        return out
    return out.astype(dt)


def float_of_int(f, ad, out):
    """``f(ad)`` for a float function ``f`` (exp, sqrt, ...) of an integer or bool
    ``ad``, given NumPy's result ``out`` (None where NumPy refused): computed on
    ``ad`` converted to the default float dtype, as PyTorch's."""
    if np.dtype(ad.dtype).kind not in 'biu' or out is not None and out.dtype.kind != 'f':
        return out
    return f(ad.astype(default_dtype[0]))




def sequence_dtype(items):
    """PyTorch's dtype for a tensor made from ``items`` (a nested list's elements,
    some NumPy numbers or arrays): ``promote_types`` over the items' dtypes, a
    NumPy number or array giving its own, a Python bool bool, int int64 and float
    the default dtype (``[np.int8(1), 2]`` is int64, ``[np.float16(1), 2]`` float16)."""
    r = None
    for x in items:
        if isinstance(x, (np.generic, np.ndarray)):
            d = x.dtype
        elif isinstance(x, bool):
            d = np.dtype(np.bool_)
        elif isinstance(x, int):
            d = np.dtype(np.int64)
        elif isinstance(x, float):
            d = default_dtype[0]
        else:
            d = np.asarray(x).dtype
        r = d if r is None else promote_types(r, d)
    return r


def ints_into(data, dt):
    """``data`` (Python ints, some out of the integer dtype ``dt``'s range) in ``dt``,
    as torch.tensor(data, dtype=dt) gives it: an unsigned dtype takes negatives
    down to -max, wrapped (-1 is 255 in uint8); anything else out of range is
    PyTorch's RuntimeError."""
    info = np.iinfo(dt)
    lo = -int(info.max) if dt.kind == 'u' else int(info.min)
    try:
        wide = np.array(data, np.int64)
    except OverflowError:
        raise ValueError('Overflow when unpacking long long') from None    # past 64 bits
    if wide.size and (int(wide.min()) < lo or int(wide.max()) > int(info.max)):
        raise RuntimeError(f'value cannot be converted to type {dt} without overflow '
                           f'(tensor of {np.shape(data)} Python ints into {dt})')
    return wide.astype(dt)


def check_alpha(name, a, b, alpha):
    """PyTorch's RuntimeError for ``add``/``sub`` of integer or bool operands
    (tensors or numbers) with a floating ``alpha``."""
    if not isinstance(alpha, float):
        return
    for x in (a, b):
        d = getattr(x, '_data', x)
        if isinstance(d, float) or np.result_type(d).kind in 'fc':
            return
    raise RuntimeError(f'{name}: For integral input tensors, argument alpha must not be a '
                       f'floating point number (got alpha={alpha})')
