"""Recording the structural primitives added for op coverage: where, cumsum, cumprod, bmm.

Each is one record whose kernel is written by hand in ``compiler/codegen.py``
(``_STRUCTURAL``) and whose differentiable form is in
``tape/_differentiable.py`` (``_record_vjp``).  Why each exists rather than a
composite of older primitives:

* ``where``: ``x * m + y * (1 - m)`` turns an inf on the unchosen side into a
  NaN gradient, and a take/put composite needs five records.
* ``cumsum``: as a composite it is a triangular matmul, O(L^2).
* ``cumprod``: ``exp(cumsum(log x))`` is wrong for zeros and negatives; the
  kernel is exact with zeros (O(L) a row).
* ``bmm``: a batch of mm records cannot share one result slot.

Record fields (see tape/_tape.py for the format): ``where`` keeps its mask in
A (offset in field a); ``cumsum``/``cumprod`` keep L in field a and the inner
size in field x (the outer size is n / (L * inner)); ``bmm`` keeps m in
field a and ``k << 32 | n`` in field x; ``cumprod`` and ``bmm`` save values in V.
"""
import numpy as np

from . import _ops
from ._big import BIG
from ._ops import _record_struct
from ._rules import OP
from ._tape import grad_mode
from ._tensor import _leaf

_I64 = np.int64

# tape._tape.merge shifts a record's fields by what each kind keeps there:
# 5 (like take) shifts field a (an offset into A), 7 (like mm) shifts field v
# (an offset into V) and keeps field a, 4 (like identity) shifts neither.

def record_where(name, mask, a, b, out):
    """Record ``out = where(mask, a, b)``; a and b are Tensors (constants get no gradient)."""
    if not ((a._rg or b._rg) and grad_mode.enabled):
        return _leaf(out)
    shape = np.shape(out)
    # operands expanded to the result's shape by expand records, so a big where
    # goes through _record_struct like every structural record
    if a._rg and np.shape(a._data) != shape:
        a = _ops.expand(a, shape)
    if b._rg and np.shape(b._data) != shape:
        b = _ops.expand(b, shape)
    if not a._rg:
        a, b, mask = b, a, ~np.asarray(mask)        # the recorded input goes first
    mask = np.asarray(mask)
    if mask.shape != shape:         # (np.broadcast_to costs ~8 us; a mask rarely needs it)
        mask = np.broadcast_to(mask, shape)
    if mask.size >= BIG:
        # a large record keeps the mask as booleans (tape/_big.py reads either)
        return _record_struct(OP[name], a, out, b=b if b._rg else None,
                              big_attrs=np.ascontiguousarray(mask, dtype=np.bool_).reshape(-1))
    m = np.ascontiguousarray(mask, dtype=_I64).reshape(-1)
    return _record_struct(OP[name], a, out, attrs=m, b=b if b._rg else None)


def _block(shape, dim):
    """(L, inner) of an (outer, L, inner) view of ``shape`` along ``dim``."""
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    return (shape[dim] if shape else 1), inner


def record_cumsum(a, out, dim):
    if not (a._rg and grad_mode.enabled):
        return _leaf(out)
    ln, inner = _block(a._data.shape, dim)
    return _record_struct(OP['cumsum'], a, out, x=inner, ax=ln)


def record_cumprod(a, out, dim):
    if not (a._rg and grad_mode.enabled):
        return _leaf(out)
    ln, inner = _block(a._data.shape, dim)
    return _record_struct(OP['cumprod'], a, out, x=inner, ax=ln, saved=(a._data, out))


def record_bmm(a, b, out):
    """Record ``out = a @ b`` for (batch, m, k) and (batch, k, n) arrays."""
    if not ((a._rg or b._rg) and grad_mode.enabled):
        return _leaf(out)
    _, m, k = a._data.shape
    n = b._data.shape[2]
    r = _record_struct(OP['bmm'], a, out, x=(k << 32) | n, ax=m,
                       saved=(a._data, b._data), b=b)
    tape = r._tape
    for x, other in ((a, b), (b, a)):
        if x._tape is None and other._rg:   # read only for the other's gradient
            tape.save_box(x, r._rec)
    return r
