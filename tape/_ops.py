"""The ops: each runs eagerly in NumPy and, when autograd is on, appends one record.

Every op here is a thin wrapper: compute the result with NumPy, then call one
of the ``_record_*`` helpers, which append the record and make the result
tensor.  The helpers are few on purpose (elementwise unary/binary/scalar, and
one per structural kind) so that the hot path stays short and the record
format lives in one place (see tape/_tape.py for the format).
"""
import importlib
import operator
import types
import warnings

import numpy as np

from . import _dtypes
from . import _fronts
from ._fpwarn import quietly
from ._out import into_out
from ._rules import OP, RULES
from ._big import BIG, BIG_FLAG, AxisOrder, BasicKey, BigRecord
from ._pool import pool
from ._tape import shift_slot as _shift_slot
from ._tape import grad_off as _OFF
from ._tape import PACK as _PACK, PACK_C as _PACK_C, PACK_CD as _PACK_CD
from ._tape import STALE as _STALE, grad_mode, merge, open_tape, resolve
from ._tensor import Tensor, _leaf, _norm_dim, _storage, _bump_version, _TNEW
from ._views import as_view as _as_view
from . import _views

_SAVES = []     # per opcode: bit 1 saves a, 2 saves b, 4 saves out
for _r in RULES:
    _SAVES.append(('a' in _r.saves) * 1 + ('b' in _r.saves) * 2 + ('out' in _r.saves) * 4)
_SAVES = tuple(_SAVES)

_I64 = np.int64
_scalar_types = (int, float, bool, np.number, np.bool_)


# ---------------------------------------------------------------- helpers
def _shape_str(s):
    return '[' + ', '.join(str(int(d)) for d in s) + ']'


def _const(x, like=None):
    """Wrap a non-Tensor operand (array, list, number) as a constant tensor."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return _leaf(x)
    arr = np.asarray(x)
    if arr.dtype == np.float64 and like is not None and like._data.dtype.kind == 'f':
        arr = arr.astype(like._data.dtype)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    return _leaf(arr)


def _result(data, tape, slot):
    """The result tensor of the record just appended at ``slot``.  The hottest
    paths (``_binary``, ``_unary``) write these five stores inline instead:
    the call costs about a tenth of a recorded scalar op."""
    t = _TNEW(Tensor)
    t._data = data
    t._rg = True
    t._tape = tape
    t._goff = slot
    t._rec = tape.n
    tape.n += 1
    return t


def _tape_of(a):
    tape = a._tape
    if tape is not None:
        if tape.alias is not None:
            tape = resolve(a)
        return tape
    return open_tape()


def _tape_of2(a, b):
    ta = a._tape
    tb = b._tape
    if ta is not None and ta.alias is not None:
        ta = resolve(a)
    if tb is not None and tb.alias is not None:
        tb = resolve(b)
    if ta is None:
        return tb if tb is not None else open_tape()
    if tb is None or tb is ta:
        return ta
    # two graphs meet: keep the older tape, move the younger's records onto it
    if tb.serial < ta.serial:
        ta, tb = tb, ta
    merge(ta, tb)
    resolve(a)
    resolve(b)
    return ta


def tape_of_all(tensors, new=True):
    """The one tape all of ``tensors`` record on (merging their tapes if needed);
    when none is on a tape, the open tape (``new``) or None."""
    tape = None
    for t in tensors:
        tt = t._tape
        if tt is None:
            continue
        if tt.alias is not None:
            tt = resolve(t)
        if tape is None:
            tape = tt
        elif tt is not tape:
            older, younger = (tape, tt) if tape.serial < tt.serial else (tt, tape)
            merge(older, younger)
            tape = older
    if tape is None:
        return open_tape() if new else None
    for t in tensors:
        if t._tape is not None and t._tape.alias is not None:
            resolve(t)
    return tape


def _slot(t, tape):
    if t._tape is tape:
        return t._goff
    if not t._rg:
        return -1
    if t._rec == tape.serial:       # leaf seen on this tape before
        return t._goff
    return tape.leaf_slot(t)


_ATTRS_CACHE = {}


def _broadcast_attrs(big_shape, small_shape):
    """A-array for _broadcast_index: ndim, big shape, small strides (0 where broadcast).

    Cached by shapes (read-only arrays): a training loop broadcasts the same
    shapes every step, and building the array costs more than the op."""
    key = (big_shape, small_shape)
    try:
        arr = _ATTRS_CACHE.get(key)
    except TypeError:                   # shapes given as lists
        return _make_broadcast_attrs(big_shape, small_shape)
    if arr is None:
        if len(_ATTRS_CACHE) > 4096:
            _ATTRS_CACHE.clear()
        arr = _ATTRS_CACHE[key] = _make_broadcast_attrs(big_shape, small_shape)
        arr.flags.writeable = False
    return arr


def _make_broadcast_attrs(big_shape, small_shape):
    nd = len(big_shape)
    small = (1,) * (nd - len(small_shape)) + tuple(small_shape)
    strides = [0] * nd
    acc = 1
    for d in range(nd - 1, -1, -1):
        if small[d] != 1 or big_shape[d] == 1:
            strides[d] = acc if small[d] != 1 else 0
        acc *= small[d]
    return np.array([nd, *big_shape, *strides], dtype=_I64)


_OP_EXPAND = OP['expand']
_OP_MM = OP['mm']
_OP_BROADCAST = OP['broadcast']


def _expand_slot(tape, slot, small_shape, big_shape, size_small, size_big):
    """Record an implicit broadcast of slot; return the slot of the expanded copy."""
    if size_big >= BIG:
        out = tape.alloc(size_big)
        meta = BigRecord.of({}, tuple(big_shape), np.dtype(np.float64), [tuple(small_shape)],
                            [None])
        tape.big.append(meta)
        tape.rec += _PACK(_OP_BROADCAST | BIG_FLAG, out, size_big, slot, -1, len(tape.big) - 1,
                          0, size_small)
        tape.n += 1
        return out
    out = tape.gpos
    tape.gpos = out + (size_big or 1)
    ax = 0 if size_small == 1 else tape.add_attrs(_broadcast_attrs(big_shape, small_shape))
    tape.rec += _PACK(_OP_BROADCAST, out, size_big, slot, -1, 0, ax, size_small)
    tape.n += 1
    return out


def _big_record(tape, op, out, n, g0, g1, meta, ax=0, x=0, const=None, const_d=None):
    """Append a big record (see tape/_big.py): saved arrays stay in ``meta``."""
    slot = tape.alloc(n)
    tape.big.append(meta)
    v = len(tape.big) - 1
    if const is None:
        tape.rec += _PACK(op | BIG_FLAG, slot, n, g0, g1, v, ax, x)
    elif const_d is not None:
        tape.rec += _PACK_CD(op | BIG_FLAG, slot, n, g0, g1, v, float(const_d), const)
    else:
        tape.rec += _PACK_C(op | BIG_FLAG, slot, n, g0, g1, v, ax, const)
    return _result(out, tape, slot)


def _saved_dict(op, a, b, out):
    sv = _SAVES[op]
    d = {}
    if sv & 1:
        d['a'] = a
    if sv & 2:
        d['b'] = b
    if sv & 4:
        d['out'] = out
    return d


# ------------------------------------------------------ record helpers
def _spread(d, shape, n):
    """``d`` broadcast to ``shape``: a copy when small (np.broadcast_to's view
    costs ~10 us of Python), a view when large (no memory)."""
    if n < _SMALL_COPY:
        out = np.empty(shape, d.dtype)
        out[...] = d
        return out
    return np.broadcast_to(d, shape)


def _record_binary(op, a, b, out):
    """Record elementwise ``out = op(a, b)``; a and b are Tensors."""
    tape = _tape_of2(a, b)
    g0 = _slot(a, tape)
    g1 = _slot(b, tape)
    ad = a._data
    bd = b._data
    shape = out.shape
    n = out.size
    sv = _SAVES[op]
    if ad.shape != shape:
        if g0 >= 0:
            g0 = _expand_slot(tape, g0, ad.shape, shape, ad.size, n)
        if sv & 1:                  # the expanded operand, only when saved
            ad = _spread(ad, shape, n)
    if bd.shape != shape:
        if g1 >= 0:
            g1 = _expand_slot(tape, g1, bd.shape, shape, bd.size, n)
        if sv & 2:
            bd = _spread(bd, shape, n)
    fo = RULES[op].for_other
    if n >= BIG:
        if a._tape is None and sv & 1 and (g1 >= 0 or not fo & 1):
            tape.save_box(a)
        if b._tape is None and sv & 2 and (g0 >= 0 or not fo & 2):
            tape.save_box(b)
        meta = BigRecord.of(_saved_dict(op, ad, bd, out), shape, _float_dtype(out.dtype),
                            [shape, shape], [_float_dtype(ad.dtype), _float_dtype(bd.dtype)])
        return _big_record(tape, op, out, n, g0, g1, meta)
    slot = tape.gpos
    tape.gpos = slot + (n or 1)     # an empty result still owns a slot
    v = tape.vpos
    if sv:
        if (sv & 1 and ad.dtype.kind != 'f') or (sv & 2 and bd.dtype.kind != 'f'):
            tape.nonfloat_saved = True
        saved = tape.saved
        if sv & 1:
            saved.append(ad)
            v += n
            if a._tape is None and (g1 >= 0 or not fo & 1):
                tape.save_box(a)
        if sv & 2:
            saved.append(bd)
            v += n
            if b._tape is None and (g0 >= 0 or not fo & 2):
                tape.save_box(b)
        if sv & 4:
            saved.append(out)
            v += n
    tape.rec += _PACK(op, slot, n, g0, g1, tape.vpos, 0, 0)
    tape.vpos = v
    return _result(out, tape, slot)


def _record_unary(op, a, out, const=None, const_d=None):
    """Record elementwise ``out = op(a)`` (with optional scalar constants c, d)."""
    tape = a._tape
    if tape is None:
        tape = open_tape()
        g0 = _slot(a, tape)
    else:
        if tape.alias is not None:
            tape = resolve(a)
        g0 = a._goff
    n = out.size
    if n >= BIG:
        if a._tape is None and _SAVES[op] & 1:
            tape.save_box(a)
        return _big_record(tape, op, out, n, g0, -1,
                           BigRecord.of(_saved_dict(op, a._data, None, out), out.shape,
                                        _float_dtype(out.dtype), [a._data.shape],
                                        [_float_dtype(a._data.dtype)]),
                           const=0.0 if const is None else const, const_d=const_d)
    slot = tape.gpos
    tape.gpos = slot + (n or 1)
    v = tape.vpos
    sv = _SAVES[op]
    saved = tape.saved
    if sv & 1:
        saved.append(a._data)
        v += n
        if a._tape is None:
            tape.save_box(a)
    if sv & 4:
        saved.append(out)
        v += n
    if const_d is None:
        tape.rec += _PACK_C(op, slot, n, g0, -1, tape.vpos, 0, 0.0 if const is None else const)
    else:
        tape.rec += _PACK_CD(op, slot, n, g0, -1, tape.vpos, const_d, const)
    tape.vpos = v
    return _result(out, tape, slot)


def _record_struct(op, a, out, x=0, attrs=None, saved=None, b=None, scale=None,
                   on_tape=None, in_slot=None, ax=0, big_attrs=None):
    """Record a structural op of ``a`` (and ``b`` for mm) with attributes/saved values.

    Reductions pass ``scale`` (1 for sum, 1/count for mean): it goes in the x
    field as a float, and the input's size in the v field, which they do not
    otherwise use.  ``on_tape``/``in_slot`` force the tape and a's slot (the
    differentiable sweep uses them to wire a leaf's view into a given tape)."""
    if on_tape is not None:
        tape = on_tape
        g0 = in_slot
        g1 = -1
    else:
        tape = _tape_of2(a, b) if b is not None else _tape_of(a)
        g0 = _slot(a, tape)
        g1 = _slot(b, tape) if b is not None else -1
    n = out.size
    if n >= BIG or a._data.size >= BIG or (b is not None and b._data.size >= BIG):
        ins = (a._data,) if b is None else (a._data, b._data)
        saved_d = dict(zip('ab', saved)) if saved is not None else {}
        battrs = big_attrs if big_attrs is not None else attrs
        if (type(out) is np.ndarray or isinstance(out, np.generic)) \
                and all(type(i) is np.ndarray for i in ins):
            # BigRecord's own inspection (np.shape, np.result_type) costs ~1 us
            # an array (a full sum's result is a NumPy scalar: shape (), a dtype)
            meta = BigRecord.of(saved_d, out.shape, _float_dtype(out.dtype),
                                [i.shape for i in ins], [_float_dtype(i.dtype) for i in ins],
                                battrs)
        else:
            meta = BigRecord(saved_d, out, ins, attrs=battrs)
        if scale is not None:
            return _big_record(tape, op, out, n, g0, g1, meta, ax=ax, const=scale)
        return _big_record(tape, op, out, n, g0, g1, meta, ax=ax, x=x)
    slot = tape.gpos
    tape.gpos = slot + (n or 1)
    if attrs is not None:
        ax = tape.add_attrs(attrs)
    v = tape.vpos
    if saved is not None:
        for s in saved:
            tape.saved.append(s)
            tape.vpos += np.size(s)
            if np.result_type(s).kind != 'f':
                tape.nonfloat_saved = True
    if scale is not None:
        tape.rec += _PACK_C(op, slot, n, g0, g1, x, ax, scale)
    else:
        tape.rec += _PACK(op, slot, n, g0, g1, v, ax, x)
    return _result(out, tape, slot)


# ------------------------------------------------------- elementwise ops
_POW_SIGN_MIN = 256     # elements: below, the sign trick's four calls cost more


def _pow_float(a, e, out=None):
    """``a ** e`` for a floating array ``a`` and a Python-number exponent.

    PyTorch computes 3 as x*x*x, -2 as 1/(x*x) and -0.5 as 1/sqrt(x), and these
    are exact formulas, so they are used here too.  NumPy's power of a negative
    base takes a scalar path about 30x slower than its vector one (45 ns an
    element): an integer exponent is applied to |a| and the sign restored,
    which gives the same numbers (pow(-x, n) is -pow(x, n) for odd n, pow(x, n)
    for even n, IEEE signed zeros and infinities included).
    """
    if out is None:
        if e == 2:
            return a * a
        if e == 1:
            return a.copy()             # pow(x, 1) is x, NaN and -0.0 included
        if e == 3:
            return a * a * a
        if e == 0.5:
            return np.sqrt(a)
        if e == -1:
            return np.reciprocal(a)
        if e == -2:
            return 1 / (a * a)
        if e == -0.5:
            return 1 / np.sqrt(a)
    elif e in (2, 3, 0.5, -1, -2, -0.5):
        if e == 0.5 or e == -0.5:
            np.sqrt(a, out=out)
        elif e == -1:
            np.reciprocal(a, out=out)
        else:
            np.multiply(a, a, out=out)
            if e == 3:
                np.multiply(out, a, out=out)
        if e < 0 and e != -1:
            np.reciprocal(out, out=out)
        return out
    if e % 1 == 0 and abs(e) <= 1 << 53 and a.size >= _POW_SIGN_MIN:
        neg = np.signbit(a)
        if neg.any():
            out = np.abs(a, out=out)
            np.power(out, e, out=out)
            if int(e) % 2:
                np.negative(out, out=out, where=neg)
            return out
    return np.power(a, e, out=out)


def _pow(a, b):
    """``a ** b``, through ``_pow_float`` for a floating array (not 0-d: NumPy
    returns scalars there) to a Python number."""
    tb = type(b)
    if (tb is float or tb is int) and type(a) is np.ndarray and a.ndim and a.dtype.kind == 'f':
        return _pow_float(a, b)
    return a ** b


_UFUNCS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
           operator.truediv: np.true_divide, _pow: np.power}


_SHAPES = {}     # operand shapes -> broadcast shape (np.broadcast_shapes costs ~10 us)

# Python numbers as read-only 0-d arrays, per float dtype: NumPy converts a
# Python-number operand on every call (an (8, 1) float32 array times 20: 0.69
# us, against 0.39 with a 0-d float32 array).  Under NEP 50 the number is cast
# to the array's dtype either way, so the values are the same.  Zeros (0.0 and
# -0.0 are one dict key) and NaN (no key finds it) are not cached.
_NUM_ARRAYS = {np.dtype(np.float32): {}, np.dtype(np.float64): {}}
_NUM_UFUNCS = frozenset({np.add, np.subtract, np.multiply, np.true_divide})


def _num_array(b, dt):
    """The Python number ``b`` as a cached 0-d array of dtype ``dt``, or ``b``
    itself where it is not cached (another dtype, a zero, NaN)."""
    cache = _NUM_ARRAYS.get(dt)
    if cache is None:
        return b
    c = cache.get(b)
    if c is None:
        if b == 0 or b != b:
            return b
        if len(cache) >= 1024:
            cache.clear()
        c = np.array(b, dt)
        c.flags.writeable = False
        cache[b] = c
    return c


def _float_dtype(dt):
    return dt if dt.kind == 'f' else np.dtype(np.float64)


# Results from this size on come from the pool (tape/_pool.py); smaller ones
# from NumPy's malloc, whose heap block comes back warm.  Below the pool's own
# threshold (1 MB) pool.empty only aligns a fresh malloc block, which measured
# 4% slower on the MLP step (a 784x256 float32 gradient and its lr * grad);
# a 1 MB exp's forward+backward measured 3-5% faster on NumPy's memory, a
# 4 MB one the same, a 16 MB one 35% slower (fresh pages), hence 4 MB.
POOL_FROM = 1 << 22      # bytes


_KERNEL_MODULES = {}


def kernels_of(name):
    """The module ``compiler.<name>``, imported on its first use (nothing
    compiles at import).  A ``from compiler.x import f`` inside an op costs
    ~600 ns a call even once imported; this lookup ~100 ns."""
    mod = _KERNEL_MODULES.get(name)
    if mod is None:
        mod = _KERNEL_MODULES[name] = importlib.import_module('compiler.' + name)
    return mod


def empty_for(x):
    """An uninitialised array of ``x``'s shape and dtype for a kernel's result:
    from the pool (tape/_pool.py) when large, as ``_pooled``'s are."""
    if x.nbytes < POOL_FROM:
        return np.empty(x.shape, x.dtype)
    return pool.empty(x.shape, x.dtype)


def _pooled(uf, npf, *args):
    """``npf(*args)`` for large operands, written into a buffer from the pool
    (tape/_pool.py) instead of fresh memory.

    Operands under ``POOL_FROM`` bytes take NumPy's own allocation: a
    buffer that size comes from malloc's heap, warm, and the pool's
    bookkeeping (a finalizer per array) would cost more than it saves.
    """
    if uf is None:
        return npf(*args)
    if len(args) == 2:
        # an array and a Python number (``lr * p.grad``): the result has the
        # array's shape and, for a float array, its dtype (NEP 50)
        a0, a1 = args
        t0 = type(a0)
        t1 = type(a1)
        arr = a0 if t0 is np.ndarray and (t1 is float or t1 is int) else \
            a1 if t1 is np.ndarray and (t0 is float or t0 is int) else None
        if arr is not None and arr.dtype.kind == 'f':
            if arr.nbytes < POOL_FROM:
                return npf(a0, a1)
            out = pool.empty(arr.shape, arr.dtype)
            if uf is np.power and arr is a0:
                return _pow_float(a0, a1, out)
            uf(a0, a1, out=out)
            return out
    if max([x.nbytes for x in args if type(x) is np.ndarray], default=POOL_FROM) < POOL_FROM:
        return npf(*args)
    power_of_number = uf is np.power and type(args[1]) in (int, float) and \
        type(args[0]) is np.ndarray and args[0].dtype.kind == 'f'
    shapes = tuple(x.shape if type(x) is np.ndarray else np.shape(x) for x in args)
    shape = _SHAPES.get(shapes)
    if shape is None:
        shape = np.broadcast_shapes(*shapes)        # raises for shapes that do not match
        if len(_SHAPES) > 4096:
            _SHAPES.clear()
        _SHAPES[shapes] = shape
    dtype = np.result_type(*args)
    if uf is np.true_divide and dtype.kind in 'iub':
        return npf(*args)
    out = pool.empty(shape, dtype)
    if power_of_number:
        return _pow_float(args[0], args[1], out)
    uf(*args, out=out)
    return out



# ops with a row-broadcast kernel (compiler/broadcast_kernels.py): (x op b, b op x)
_ROW_CODES = {'add': (0, 0), 'sub': (1, 4), 'mul': (2, 2), 'div': (3, 5)}
_ROW_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ROW_MIN = 2048         # elements: below, NumPy's call costs less than the kernel's
_row_kernels = None


def _row_broadcast(codes, ad, bd):
    """``ad op bd`` through a kernel when one operand is a C-contiguous float
    array (..., c) of at least _ROW_MIN elements and the other a vector (c,) of
    its dtype (a bias), else None (NumPy's broadcast then runs)."""
    global _row_kernels
    if bd.ndim == 1 and ad.ndim >= 2:
        x, v, code = ad, bd, codes[0]
    elif ad.ndim == 1 and bd.ndim >= 2:
        x, v, code = bd, ad, codes[1]
    else:
        return None
    c = v.shape[0]
    if x.shape[-1] != c or x.size < _ROW_MIN or x.dtype is not v.dtype \
            or x.dtype not in _ROW_DTYPES or not x.flags.c_contiguous \
            or not v.flags.c_contiguous:
        return None
    if _row_kernels is None:
        from compiler import broadcast_kernels
        _row_kernels = broadcast_kernels
    out = empty_for(x)
    _row_kernels.row_binary(x.reshape(-1, c), v, out.reshape(-1, c), code)
    return out


def _add_bias(out, bd):
    """out += bd for a fresh product out (m, n) and a bias bd (n,) of its dtype:
    the row kernel, 2.5x NumPy's broadcast add in place."""
    global _row_kernels
    if not (out.flags.c_contiguous and bd.flags.c_contiguous):
        np.add(out, bd, out=out)
        return
    if _row_kernels is None:
        from compiler import broadcast_kernels
        _row_kernels = broadcast_kernels
    _row_kernels.row_add_inplace(out, bd)


def _wrapped_int(b, ad):
    """A Python int out of the range of integer array ``ad``'s dtype (``uint8_t *
    300``, which NumPy refuses), as PyTorch takes it: wrapped to that dtype."""
    if type(b) is not int or ad.dtype.kind not in 'iu':
        raise
    return np.asarray(b).astype(ad.dtype)


def _binary(name, scalar_name, rscalar_name, npf):
    """Make ``op(a, b)`` and the reflected ``op(b, a)`` for a Tensor ``a``.

    The two common cases, a Python number on the right and two tensors of one
    shape on a live tape, are recorded inline: this is the hottest code in the
    library, and each avoided call or lookup is measurable on a scalar chain.
    """
    op = OP[name]
    sop = OP[scalar_name] if scalar_name else None
    rop = OP[rscalar_name] if rscalar_name else None
    s_saves_a = sop is not None and 'a' in RULES[sop].saves
    s_saves_out = sop is not None and 'out' in RULES[sop].saves
    b_saves = _SAVES[op]
    # an operand read only by the other's gradient (a product): its version
    # matters only when the other requires grad (Rule.for_other)
    a_for_b = RULES[op].for_other & 1
    b_for_a = RULES[op].for_other & 2
    uf = _UFUNCS.get(npf)
    num_uf = uf in _NUM_UFUNCS      # a Python number operand can be a cached 0-d array
    # the inline path records the constant in the record and saves nothing else
    slow_const = sop is None or s_saves_a or s_saves_out
    save_a_lane = sop is not None and s_saves_a and not s_saves_out
    slow_rconst = rop is None or 'a' in RULES[rop].saves or 'out' in RULES[rop].saves
    strict = False      # True in fwd.method (see _as_method)
    row_code = _ROW_CODES.get(name)

    def fwd(a, b):
        try:
            tb = type(b)
            if tb is float or tb is int:
                ad = a._data
                tape = a._tape
                # the fast lane: a is on a live tape (so it is a float tensor that
                # requires grad), recording is on, and the constant rides in the record
                if tape is not None and tape.alias is None and not slow_const and (
                        not _OFF[0] or grad_mode.enabled):
                    n = ad.size
                    if n < BIG:
                        out = npf(ad, b)
                        slot = tape.gpos
                        tape.gpos = slot + (n or 1)
                        tape.rec += _PACK_C(sop, slot, n, a._goff, -1, 0, 0, b)
                        t = _TNEW(Tensor)
                        t._data = out
                        t._rg = True
                        t._tape = tape
                        t._goff = slot
                        t._rec = tape.n
                        tape.n += 1
                        return t
                elif tape is not None and tape.alias is None and save_a_lane and (
                        not _OFF[0] or grad_mode.enabled):
                    # ``x ** 2``: as above, saving a (on the tape, so no version box)
                    n = ad.size
                    if n < BIG:
                        out = npf(ad, b)
                        slot = tape.gpos
                        tape.gpos = slot + (n or 1)
                        v = tape.vpos
                        tape.saved.append(ad)
                        tape.vpos = v + n
                        tape.rec += _PACK_C(sop, slot, n, a._goff, -1, v, 0, b)
                        t = _TNEW(Tensor)
                        t._data = out
                        t._rg = True
                        t._tape = tape
                        t._goff = slot
                        t._rec = tape.n
                        tape.n += 1
                        return t
                n = ad.size             # a Python number leaves the shape as it is
                try:
                    if n >= BIG:
                        out = _pooled(uf, npf, ad, b)
                    elif num_uf and type(ad) is np.ndarray:
                        out = uf(ad, _num_array(b, ad.dtype))
                    else:
                        out = npf(ad, b)
                except ValueError as e:     # an integer tensor ** a negative integer
                    raise RuntimeError(f'{name}: {e}') from None
                except OverflowError:
                    out = npf(ad, _wrapped_int(b, ad))
                if not (a._rg and (not _OFF[0] or grad_mode.enabled)):
                    if out.dtype is not a._data.dtype:      # an int tensor with a float
                        out = _dtypes.binary_result(name, a._data, b, out)
                    return _leaf(out)
                if sop is None:
                    return _record_binary(op, a, _const(b, a), out)
                return _record_unary(sop, a, out, b)
            if tb is Tensor or isinstance(b, Tensor):     # (a subclass takes this path too)
                ad = a._data
                bd = b._data
                ta = a._tape
                tbb = b._tape
                tape = ta if ta is not None else tbb
                if tape is None and (a._rg or b._rg) and bd.dtype is ad.dtype \
                        and ad.shape == bd.shape and (not _OFF[0] or grad_mode.enabled):
                    # two leaves (or a leaf and a constant) of one shape and dtype:
                    # the graph starts on the thread's open tape, as _record_binary's
                    # would, and takes the lane below
                    tape = open_tape()
                # the fast lane: an operand on a live tape (so the result requires
                # grad), the other on it too or not on any, recording on, one dtype,
                # and equal sizes: broadcasting at most added size-1 dims, which
                # keeps the flat C order, so the operands line up element by element
                if tape is not None and tape.alias is None and (tbb is None or tbb is tape) and (
                        not _OFF[0] or grad_mode.enabled) and bd.dtype is ad.dtype:
                    n = ad.size
                    small = n < BIG
                    if n == bd.size and (small or ad.shape == bd.shape):
                        # (a big record takes this lane for operands of one shape)
                        try:
                            out = npf(ad, bd) if small or ad.nbytes < POOL_FROM \
                                else _pooled(uf, npf, ad, bd)
                        except ValueError:
                            raise _broadcast_error(name, a, b) from None
                        if out.size != n:
                            return _record_binary(op, a, b, out)
                        # a leaf operand takes its cached slot on this tape (or registers)
                        if ta is tape:
                            g0 = a._goff
                        elif not a._rg:
                            g0 = -1
                        elif a._rec == tape.serial:
                            g0 = a._goff
                        else:
                            g0 = tape.leaf_slot(a)
                        if tbb is tape:
                            g1 = b._goff
                        elif not b._rg:
                            g1 = -1
                        elif b._rec == tape.serial:
                            g1 = b._goff
                        else:
                            g1 = tape.leaf_slot(b)
                        if small:
                            slot = tape.gpos
                            tape.gpos = slot + (n or 1)
                            v = tape.vpos
                            if b_saves:
                                saved = tape.saved
                                if b_saves & 1:
                                    saved.append(ad)
                                    v += n
                                    if ta is None and (g1 >= 0 or not a_for_b):   # inline save_box
                                        box = a._vbox
                                        if box is None:
                                            box = a._vbox = [0]
                                        tape.boxes.append((box, box[0], tape.n))
                                if b_saves & 2:
                                    saved.append(bd)
                                    v += n
                                    if tbb is None and (g0 >= 0 or not b_for_a):
                                        box = b._vbox
                                        if box is None:
                                            box = b._vbox = [0]
                                        tape.boxes.append((box, box[0], tape.n))
                                if b_saves & 4:
                                    saved.append(out)
                                    v += n
                            tape.rec += _PACK(op, slot, n, g0, g1, tape.vpos, 0, 0)
                            tape.vpos = v
                        else:
                            # a big record: the saved arrays go in its BigRecord
                            saved = {}
                            if b_saves:
                                if b_saves & 1:
                                    saved['a'] = ad
                                    if ta is None and (g1 >= 0 or not a_for_b):
                                        tape.save_box(a)
                                if b_saves & 2:
                                    saved['b'] = bd
                                    if tbb is None and (g0 >= 0 or not b_for_a):
                                        tape.save_box(b)
                                if b_saves & 4:
                                    saved['out'] = out
                            shape = out.shape
                            dt = out.dtype
                            big = tape.big
                            big.append(BigRecord.of(saved, shape, dt, [shape, shape], [dt, dt]))
                            slot = tape.bpos
                            tape.bpos = slot + n
                            tape.rec += _PACK(op | BIG_FLAG, slot, n, g0, g1, len(big) - 1, 0, 0)
                        t = _TNEW(Tensor)
                        t._data = out
                        t._rg = True
                        t._tape = tape
                        t._goff = slot
                        t._rec = tape.n
                        tape.n += 1
                        return t
                na = ad.size
                nb = bd.size
                try:
                    out = _row_broadcast(row_code, ad, bd) if row_code is not None else None
                    if out is None:
                        out = npf(ad, bd) if na < BIG and nb < BIG else _pooled(uf, npf, ad, bd)
                except ValueError:
                    if name != 'pow' or ad.dtype.kind not in 'biu' or bd.dtype.kind not in 'iu':
                        raise _broadcast_error(name, a, b) from None
                    try:
                        out = _integer_pow(ad, bd)  # (then PyTorch's promotion, below)
                    except ValueError:
                        raise _broadcast_error(name, a, b) from None
                except TypeError:
                    if name == 'sub' and ad.dtype.kind == 'b' and bd.dtype.kind == 'b':
                        raise RuntimeError(_dtypes.BOOL_SUB.format('two bool tensors')) from None
                    raise
                if not ((a._rg or b._rg) and (not _OFF[0] or grad_mode.enabled)):
                    if out.dtype is not ad.dtype or bd.dtype is not ad.dtype:
                        out = _dtypes.binary_result(name, ad, bd, out)
                    return _leaf(out)
                if bd.dtype is not ad.dtype:            # PyTorch's promotion, not NumPy's
                    out = _dtypes.binary_result(name, ad, bd, out)
                return _record_binary(op, a, b, out)
            if isinstance(b, (np.floating, np.integer)):
                return fwd(a, b.item())     # a NumPy number promotes like a Python one
            if isinstance(b, _scalar_types):
                if name == 'sub' and isinstance(b, (bool, np.bool_)):
                    raise RuntimeError(_dtypes.BOOL_SUB.format('a bool tensor'))    # x - True
                out = npf(a._data, b)
                if out.dtype is not a._data.dtype:          # int / True: PyTorch's dtype
                    out = _dtypes.binary_result(name, a._data, b, out)
                if a._rg and (not _OFF[0] or grad_mode.enabled):
                    if sop is None:
                        return _record_binary(op, a, _const(b, a), out)
                    return _record_unary(sop, a, out, float(b))
                return _leaf(out)
            if not _is_array_like(b):
                if strict:
                    raise TypeError(f"{name}(): argument 'other' (position 1) must be Tensor, not "
                                    f'{type(b).__name__}')
                return NotImplemented
            return fwd(a, _const(b, a))
        except RuntimeWarning as e:         # an inf or NaN (tape/_fpwarn.py)
            return quietly(e, fwd, a, b)

    def rfwd(a, b):                # b (op) a, with b not a Tensor
        try:
            tb = type(b)
            if (tb is float or tb is int) and not slow_rconst:
                tape = a._tape
                # the fast lane, as fwd's: ``0.5 * x`` of a tensor on a live tape
                if tape is not None and tape.alias is None and (not _OFF[0] or grad_mode.enabled):
                    ad = a._data
                    n = ad.size
                    if n < BIG:
                        out = uf(_num_array(b, ad.dtype), ad) if num_uf and type(ad) is \
                            np.ndarray else npf(b, ad)
                        slot = tape.gpos
                        tape.gpos = slot + (n or 1)
                        tape.rec += _PACK_C(rop, slot, n, a._goff, -1, 0, 0, b)
                        t = _TNEW(Tensor)
                        t._data = out
                        t._rg = True
                        t._tape = tape
                        t._goff = slot
                        t._rec = tape.n
                        tape.n += 1
                        return t
            if tb is float or tb is int or isinstance(b, _scalar_types):
                if isinstance(b, (np.floating, np.integer)):
                    b = b.item()
                elif name == 'sub' and isinstance(b, (bool, np.bool_)):
                    raise RuntimeError(_dtypes.BOOL_SUB.format('a bool tensor'))    # True - x
                ad = a._data
                try:
                    if ad.size >= BIG:
                        out = _pooled(uf, npf, b, ad)
                    elif num_uf and type(ad) is np.ndarray and type(b) is not bool:
                        out = uf(_num_array(b, ad.dtype), ad)
                    else:
                        out = npf(b, ad)
                except OverflowError:
                    out = npf(_wrapped_int(b, ad), ad)
                except ValueError:          # an integer ** an int tensor with negatives
                    if name != 'pow' or ad.dtype.kind not in 'biu':
                        raise
                    out = _integer_pow(np.asarray(b), ad)
                if a._rg and (not _OFF[0] or grad_mode.enabled):
                    if rop is None:
                        return _record_binary(op, _const(b, a), a, out)
                    return _record_unary(rop, a, out, b if type(b) in (int, float) else float(b))
                if out.dtype is not a._data.dtype:
                    out = _dtypes.binary_result(name, b, a._data, out)
                return _leaf(out)
            if not _is_array_like(b):
                return NotImplemented
            return fwd(_const(b, a), a)
        except RuntimeWarning as e:         # an inf or NaN (tape/_fpwarn.py)
            return quietly(e, rfwd, a, b)

    fwd.__name__ = name
    rfwd.__name__ = 'r' + name
    # the common lanes, specialized per operator (tape/_fronts.py); the front
    # calls fwd (or the strict fwd, for the method) for everything else
    make = _fronts.binary_front(
        name, op, sop, b_saves, a_for_b, b_for_a, npf, uf, not slow_const, save_a_lane,
        num_uf, _num_array)
    front = make(fwd)
    front.generic = fwd
    front.method = make(_as_method(fwd))
    rfront = rfwd
    if rop is not None:
        rfront = _fronts.reflected_front(name, rop, not slow_rconst, npf, uf, num_uf,
                                         _num_array)(rfwd)
        rfront.generic = rfwd
    return front, rfront


def _as_method(fwd):
    """``fwd`` for ``Tensor.<op>``: the same code and cells but ``strict``, so
    that where the operator returns NotImplemented (for Python to try the
    reflected operator) the method raises PyTorch's TypeError; no cost per call."""
    code = fwd.__code__
    cells = tuple(types.CellType(True) if v == 'strict' else c
                  for v, c in zip(code.co_freevars, fwd.__closure__))
    m = types.FunctionType(code, fwd.__globals__, fwd.__name__, fwd.__defaults__, cells)
    m.__qualname__ = fwd.__qualname__
    return m


def _integer_pow(ad, bd):
    """Integer ``ad ** bd`` where some exponents are negative, as PyTorch gives it:
    1 and -1 keep their magnitude, anything else to a negative power is 0."""
    ad, bd = np.broadcast_arrays(ad, bd)
    neg = bd < 0
    out = np.power(ad, np.where(neg, 0, bd))
    ones = np.where(bd % 2 == 0, 1, ad)         # (-1) ** odd is -1
    small = np.where(np.abs(ad) == 1, ones, 0)
    return np.where(neg, small, out).astype(np.result_type(ad, bd))


def _is_array_like(x):
    return isinstance(x, (np.ndarray, list, tuple))


def _broadcast_error(name, a, b):
    return shapes_error(name, np.shape(a._data), np.shape(b._data))


def shapes_error(name, sa, sb):
    """PyTorch's RuntimeError for shapes ``sa`` and ``sb`` that do not broadcast,
    naming the op, the first (rightmost) mismatching dimension and both shapes."""
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            return RuntimeError(
                f'{name}: The size of tensor a ({pa[i]}) must match the size of tensor b '
                f'({pb[i]}) at non-singleton dimension {i} (shapes {_shape_str(sa)} and '
                f'{_shape_str(sb)})')
    return RuntimeError(f'{name}: shapes {_shape_str(sa)} and {_shape_str(sb)} cannot be '
                        'broadcast together')


def check_broadcast(name, *xs):
    """The broadcast shape of ``xs`` (tensors, arrays or numbers; None skipped), or
    PyTorch's RuntimeError: composite ops call it before recording anything, so a
    mismatch leaves no half-made records behind."""
    return check_shapes(name, *[np.shape(x._data if isinstance(x, Tensor) else x)
                                for x in xs if x is not None])


def check_shapes(name, *shapes):
    """``check_broadcast`` for shapes given as tuples."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        acc = shapes[0]
        for s in shapes[1:]:
            try:
                acc = np.broadcast_shapes(acc, s)
            except ValueError:
                raise shapes_error(name, acc, s) from None
        raise


# operator.* rather than np.* ufuncs: on NumPy scalars the operator is ~10x faster
add, radd = _binary('add', 'add_scalar', 'add_scalar', operator.add)
sub, rsub = _binary('sub', 'sub_scalar', 'rsub_scalar', operator.sub)
mul, rmul = _binary('mul', 'mul_scalar', 'mul_scalar', operator.mul)
div, rdiv = _binary('div', 'div_scalar', 'rdiv_scalar', operator.truediv)
pow_, rpow = _binary('pow', 'pow_scalar', 'rpow_scalar', _pow)
maximum, _ = _binary('maximum', None, None, np.maximum)
minimum, _ = _binary('minimum', None, None, np.minimum)


def _unary(name, npf):
    op = OP[name]
    saves = _SAVES[op]
    uf = npf if isinstance(npf, np.ufunc) else None
    # a _kernel32 function's own NumPy ufunc, called straight for a small
    # operand (a NumPy scalar or an array of fewer than _KERNEL32_FROM
    # elements), where the wrapper would only pass it on (~0.15 us a call)
    small = getattr(npf, 'small', npf)
    no_bool = name == 'abs'         # PyTorch has no bool kernel (NumPy's abs keeps bools)

    def f(a, *, out=None):
        if out is not None:         # (PyTorch's out=: tape/_out.py)
            return into_out(f(a), out, name, a)
        try:
            if type(a) is not Tensor:
                a = _const(a)
            ad = a._data
            tape = a._tape
            # the fast lane: a is on a live tape (a float tensor that requires grad),
            # or a leaf that requires grad, whose graph starts on the thread's open
            # tape (as _record_unary's does); and recording is on
            if tape is not None:
                lane = tape.alias is None and (not _OFF[0] or grad_mode.enabled)
                g0 = a._goff
                leaf = False
            elif a._rg and (not _OFF[0] or grad_mode.enabled):
                lane = leaf = True
                tape = open_tape()
                g0 = a._goff if a._rec == tape.serial else tape.leaf_slot(a)
            else:
                lane = False
            if lane:
                n = ad.size
                if n < BIG:
                    out = small(ad) if n < _KERNEL32_FROM else npf(ad)
                    slot = tape.gpos
                    tape.gpos = slot + (n or 1)
                    v = tape.vpos
                    if saves & 1:
                        tape.saved.append(ad)
                        v += n
                        if leaf:
                            tape.save_box(a)
                    if saves & 4:
                        tape.saved.append(out)
                        v += n
                    tape.rec += _PACK(op, slot, n, g0, -1, tape.vpos, 0, 0)
                    tape.vpos = v
                    t = _TNEW(Tensor)
                    t._data = out
                    t._rg = True
                    t._tape = tape
                    t._goff = slot
                    t._rec = tape.n
                    tape.n += 1
                    return t
                # a big record: the saved arrays go in its BigRecord
                out = npf(ad) if uf is None else _pooled(uf, npf, ad)
                saved = {}
                if saves & 1:
                    saved['a'] = ad
                    if leaf:
                        tape.save_box(a)
                if saves & 4:
                    saved['out'] = out
                dt = out.dtype
                big = tape.big
                big.append(BigRecord.of(saved, out.shape, dt, [ad.shape], [dt]))
                slot = tape.bpos
                tape.bpos = slot + n
                tape.rec += _PACK(op | BIG_FLAG, slot, n, g0, -1, len(big) - 1, 0, 0)
                t = _TNEW(Tensor)
                t._data = out
                t._rg = True
                t._tape = tape
                t._goff = slot
                t._rec = tape.n
                tape.n += 1
                return t
            if no_bool and ad.dtype.kind == 'b':
                raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')
            try:
                out = npf(ad) if ad.size < BIG or uf is None else _pooled(uf, npf, ad)
            except TypeError:
                if name == 'neg':
                    raise RuntimeError('Negation, the `-` operator, on a bool tensor is not '
                                       'supported. If you are trying to invert a mask, use the `~` '
                                       'or `logical_not()` operator instead.') from None
                if ad.dtype.kind not in 'biu':
                    raise
                out = None          # sigmoid of a bool tensor (NumPy cannot negate it): below
            if not (a._rg and (not _OFF[0] or grad_mode.enabled)):
                if out is None or out.dtype is not ad.dtype:
                    # exp of an int tensor: computed in the default float dtype, as
                    # PyTorch's (NumPy's own promotion computes bool and 8-bit
                    # integers in float16, and sigmoid's -x wraps in uint8)
                    out = _dtypes.float_of_int(npf, ad, out)
                return _leaf(out)
            return _record_unary(op, a, out)
        except RuntimeWarning as e:         # an inf or NaN (tape/_fpwarn.py)
            return quietly(e, f, a, out=out)
    f.__name__ = name
    # the lane of an operand on a live tape, specialized (tape/_fronts.py)
    front = _fronts.unary_front(name, op, saves, npf, small, _KERNEL32_FROM)(f)
    front.generic = f
    return front


def _np_sigmoid(x):
    """1 / (1 + exp(-x)); exp overflows to inf for very negative x, giving 0."""
    if type(x) is np.ndarray and x.dtype == np.float32 \
            and x.flags.c_contiguous:
        # one compiled float32 pass (exp32, ~1 ulp like PyTorch's Sleef expf):
        # no float64 temporaries, no second pass over the exps
        out = empty_for(x)
        kernels_of('activation_kernels').sigmoid32_fwd(x.reshape(-1), out.reshape(-1))
        return out
    with np.errstate(over='ignore'):
        if type(x) is np.ndarray and x.size >= 256 and x.dtype.kind == 'f' \
                and x.dtype.itemsize >= 4 and x.flags.c_contiguous:    # (not float16)
            # NumPy's exp, then one in-place pass for 1 / (1 + e) instead of two
            # NumPy passes and their temporaries; the same float operations
            e = np.negative(x)
            np.exp(e, out=e)
            _recip1p(e.reshape(-1))
            return e
        return 1.0 / (1.0 + np.exp(-x))


def _recip1p(e):
    global _recip1p
    from compiler.kernels import recip1p
    _recip1p = recip1p                # import (and compile) on first use only
    recip1p(e)


def _np_relu(x):
    if type(x) is np.ndarray:
        dt = x.dtype
        if x.size >= _KERNEL32_FROM and (dt == np.float32 or dt == np.float64) \
                and x.flags.c_contiguous:
            # one compiled select (compiler/activation_kernels.py): np.maximum
            # takes 4x as long on an AVX2 CPU (256K float32: 220 -> 49 us)
            out = empty_for(x)
            kernels_of('activation_kernels').relu_fwd(x.reshape(-1), dt.type(0),
                                                      out.reshape(-1))
            return out
        return np.maximum(x, 0)
    return x if x > 0 else x * 0


# float32 exp, log, sin, cos and tanh of this many elements or more: one
# compiled float32 pass 16 lanes wide (compiler/activation_kernels.py, within
# ~1.6 ulp as PyTorch's Sleef ones) instead of NumPy's ~0.45 ns an element
# (256K elements: exp 125 -> 90 us, log 118 -> 109, sin 146 -> 108; tanh,
# scalar in NumPy on an AVX2 CPU, 1040 -> 310); below it the kernel call's
# overhead eats the gain.
_KERNEL32_FROM = 512


# NumPy's float64 exp, log, sin, cos and tanh are vectorized only on AVX-512
# CPUs; elsewhere they are scalar libm loops (~9-20 ns an element), and
# compiled float64 passes (compiler/activation_kernels.py's exp64, Sleef's;
# compiler/f64_kernels.py, fdlibm's and Cephes'; within 1.3 ulp) take 2-6x less.
_NP_SIMD_EXP64 = bool(getattr(getattr(np, '_core', None), '_multiarray_umath', None) and
                      np._core._multiarray_umath.__cpu_features__.get('AVX512F'))


def _kernel32(name, npf, name64=None):
    # name64: a float64 kernel, 'module.kernel' (compiler/) or one of
    # activation_kernels; it returns nonzero where NumPy's result is wanted
    mod64, _, name64 = name64.rpartition('.') if name64 else ('', '', None)
    mod64 = mod64 or 'activation_kernels'

    def f(x):
        if type(x) is np.ndarray and x.size >= _KERNEL32_FROM and x.flags.c_contiguous:
            if x.dtype == np.float32:
                out = empty_for(x)
                if not getattr(kernels_of('activation_kernels'), name)(x.reshape(-1),
                                                                       out.reshape(-1)):
                    return out
                # (sin and cos of an |x| beyond their kernel's range: NumPy's)
            elif name64 is not None and x.dtype == np.float64:
                out = empty_for(x)
                if not getattr(kernels_of(mod64), name64)(x.reshape(-1), out.reshape(-1)):
                    return out
                # (sin and cos of an |x| beyond their kernel's range: NumPy's)
        if type(x) is np.ndarray and x.nbytes >= POOL_FROM:
            return _pooled(npf, npf, x)      # into the pool, as _unary's ufuncs
        return npf(x)
    f.__name__ = '_np_' + npf.__name__
    f.small = npf       # what f computes below _KERNEL32_FROM elements (see _unary)
    return f


_np_exp = _kernel32('exp32_fwd', np.exp, None if _NP_SIMD_EXP64 else 'exp64_fwd')
_np_log = _kernel32('log32_fwd', np.log, None if _NP_SIMD_EXP64 else 'f64_kernels.log64_fwd')
_np_sin = _kernel32('sin32_fwd', np.sin, None if _NP_SIMD_EXP64 else 'f64_kernels.sin64_fwd')
_np_cos = _kernel32('cos32_fwd', np.cos, None if _NP_SIMD_EXP64 else 'f64_kernels.cos64_fwd')
_np_tanh = _kernel32('tanh32_fwd', np.tanh, None if _NP_SIMD_EXP64 else 'f64_kernels.tanh64_fwd')


neg = _unary('neg', np.negative)
exp = _unary('exp', _np_exp)
log = _unary('log', _np_log)
sqrt = _unary('sqrt', np.sqrt)
sin = _unary('sin', _np_sin)
cos = _unary('cos', _np_cos)
tanh = _unary('tanh', _np_tanh)
sigmoid = _unary('sigmoid', _np_sigmoid)
relu = _unary('relu', _np_relu)
abs_ = _unary('abs', np.abs)


# ------------------------------------------------------------ reductions
def _dims(dim, ndim, opname):
    try:
        if isinstance(dim, (list, tuple)):
            seen = [_norm_dim(operator.index(d), ndim, opname) for d in dim]
            ds = tuple(sorted(set(seen)))
            if len(ds) != len(seen):
                dup = next(d for i, d in enumerate(seen) if d in seen[:i])
                raise RuntimeError(f'dim {dup} appears multiple times in the list of dims')
        else:
            ds = (_norm_dim(operator.index(dim), ndim, opname),)
    except TypeError:
        bad = next((d for d in dim if not hasattr(d, '__index__')), dim) \
            if isinstance(dim, (list, tuple)) else dim
        raise TypeError(f"{opname}(): argument 'dim' must be int or tuple of ints, not "
                        f'{type(bad).__name__}') from None
    return ds


_REDUCE_CACHE = {}


def _reduce(name_all, name_dim, npf, scale_of):
    op_all = OP[name_all]
    op_dim = OP[name_dim]

    def f(a, dim=None, keepdim=False, dtype=None):
        try:
            a = a if type(a) is Tensor else _const(a)
            d = a._data
            if dim is None and dtype is None and not keepdim:
                tape = a._tape
                # the fast lane (a loss's sum or mean): a small non-empty a on a
                # live tape, recording on; _record_struct's record, inline
                if tape is not None and tape.alias is None and (
                        not _OFF[0] or grad_mode.enabled):
                    n = d.size
                    if 0 < n < BIG:
                        out = npf(d)
                        slot = tape.gpos
                        tape.gpos = slot + 1
                        tape.rec += _PACK_C(op_all, slot, 1, a._goff, -1, n, 0, scale_of(n))
                        t = _TNEW(Tensor)
                        t._data = out
                        t._rg = True
                        t._tape = tape
                        t._goff = slot
                        t._rec = tape.n
                        tape.n += 1
                        return t
            if dtype is not None:
                d = d.astype(dtype)
                if d.dtype.kind in 'biu' and d.dtype != _I64:
                    # sum(dtype=torch.int32) is int32 (NumPy's integer sum is int64)
                    return _leaf(np.asarray(f(_leaf(d), dim, keepdim)._data).astype(d.dtype))
            if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
                out = npf(d)
                if keepdim:
                    out = np.reshape(out, (1,) * d.ndim)
                if a._rg and (not _OFF[0] or grad_mode.enabled):
                    return _record_struct(op_all, a, out, x=d.size, scale=scale_of(d.size))
                return _leaf(out)
            # the dims, kept shape, count and attrs depend only on (shape, dim):
            # cached, they save ~2 us of Python a call.  Keyed with the types of
            # the dims so that a float (1.0 == 1) still reaches _dims' TypeError.
            td = type(dim)
            if td is int:
                key = (d.shape, dim)
            elif td is tuple:
                key = (d.shape, dim, *map(type, dim))
            else:
                key = None
            hit = _REDUCE_CACHE.get(key) if key is not None else None
            if hit is None:
                dims = _dims(dim, d.ndim, name_all)
                if d.ndim:
                    kept = tuple(1 if i in dims else sz for i, sz in enumerate(d.shape))
                    count = 1
                    for k in dims:
                        count *= d.shape[k]
                    attrs = _broadcast_attrs(d.shape, kept)
                else:
                    kept, count, attrs = (), 1, None
                hit = (dims, kept, count, attrs)
                if key is not None:
                    if len(_REDUCE_CACHE) > 4096:
                        _REDUCE_CACHE.clear()
                    _REDUCE_CACHE[key] = hit
            dims, kept, count, attrs = hit
            if d.ndim == 0:
                out = npf(d)
            else:
                out = npf(d, axis=dims, keepdims=keepdim)
            if a._rg and (not _OFF[0] or grad_mode.enabled):
                if attrs is None:
                    attrs = np.array([0], _I64)     # a fresh array: add_attrs may keep it
                return _record_struct(op_dim, a, out, x=d.size, attrs=attrs, scale=scale_of(count),
                                      big_attrs=kept)
            return _leaf(out)
        except RuntimeWarning as e:         # an inf or NaN (tape/_fpwarn.py)
            return quietly(e, f, a, dim, keepdim, dtype)
    f.__name__ = name_all
    return f


_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_F64 = np.dtype(np.float64)
_ROW_KERNEL_FROM = 4096     # elements; below, NumPy's call beats the kernel's dispatch
_rk = None


def _row_reduce(d, axis, keepdims, scale):
    """``sum(d, axis) * scale`` by the lane kernel (compiler/reduce_kernels.py)
    for a C-contiguous float32 ``d`` reduced over all or only its last axis, else
    None.  NumPy sums float32 rows with a scalar loop: 2x slower from 64x256."""
    global _rk
    if d.dtype is not _F32 and d.dtype != _F32:
        return None
    n = d.size
    if n < _ROW_KERNEL_FROM or not d.flags.c_contiguous:
        return None
    nd = d.ndim
    if axis is None:
        rows = 1
        shape = (1,) * nd if keepdims else ()
    else:
        if type(axis) is tuple:
            if len(axis) != 1:
                return None
            axis = axis[0]
        if axis != nd - 1 and axis != -1:
            return None
        c = d.shape[-1]
        if c == 0:
            return None
        rows = n // c
        shape = d.shape[:-1] + (1,) if keepdims else d.shape[:-1]
    if _rk is None:
        from compiler import reduce_kernels
        _rk = reduce_kernels
    out = np.empty(rows, _F32)
    _rk.row_sums(d.reshape(rows, n // rows), out, scale)
    return out.reshape(shape) if shape else out[0]


def _np_sum(d, axis=None, keepdims=False):
    r = _row_reduce(d, axis, keepdims, 1.0)
    if r is not None:
        return r
    # np.add.reduce skips np.sum's Python-level dispatch (~1 us per call)
    acc = _SUM_ACC.get(d.dtype.char)
    if acc is not None:
        # float16 accumulated in float32, as PyTorch's (NumPy's float16 sum along
        # a strided axis accumulates in float16); unsigned ints summed to int64
        # (NumPy gives uint64)
        out = np.add.reduce(d, axis=axis, dtype=acc, keepdims=keepdims)
        return out.astype(_F16) if d.dtype is _F16 else out
    return np.add.reduce(d, axis=axis, keepdims=keepdims)


# dtype chars _np_sum accumulates in another dtype than NumPy's
_SUM_ACC = {'e': np.float32, 'B': np.int64, 'H': np.int64, 'I': np.int64, 'L': np.int64,
            'Q': np.int64}


# PyTorch's names for dtypes in its error messages, by NumPy's dtype.str[1:]
_TORCH_DTYPE_NAMES = {'f2': 'Half', 'f4': 'Float', 'f8': 'Double', 'i1': 'Char', 'i2': 'Short',
                      'i4': 'Int', 'i8': 'Long', 'u1': 'Byte', 'b1': 'Bool'}


def _np_mean(d, axis=None, keepdims=False):
    # runs before anything is recorded, so the error leaves the tape as it was
    if d.dtype.kind not in 'fc':
        got = _TORCH_DTYPE_NAMES.get(d.dtype.str[1:], str(d.dtype))
        raise RuntimeError('mean(): could not infer output dtype. Input dtype must be either a '
                           f'floating point or complex dtype. Got: {got}')
    if d.dtype is _F32 and d.size >= _ROW_KERNEL_FROM:
        r = _row_reduce(d, axis, keepdims,
                        1.0 / (d.size if axis is None else d.shape[-1] or 1))
        if r is not None:
            return r
    if axis is None and not keepdims and d.size:
        # np.mean's own sum-then-divide, without its Python-level wrappers (~5 us)
        return np.add.reduce(d, axis=None) / d.size
    if type(axis) is tuple and d.size and (d.dtype is _F32 or d.dtype is _F64):
        # the same, along dims (float16 excluded: np.mean sums it in float32)
        count = 1
        for k in axis:
            count *= d.shape[k]
        return np.true_divide(np.add.reduce(d, axis=axis, keepdims=keepdims), count)
    if not d.size:
        # NaN as PyTorch gives it, without np.mean's 'Mean of empty slice' warnings
        with np.errstate(invalid='ignore', divide='ignore'), warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)
            return np.mean(d, axis=axis, keepdims=keepdims)
    return np.mean(d, axis=axis, keepdims=keepdims)


sum_ = _reduce('sum', 'sum_dim', _np_sum, lambda n: 1.0)
mean = _reduce('mean', 'mean_dim', _np_mean, lambda n: 1.0 / n if n else float('nan'))


# ------------------------------------------------------------------ shape
def _check_expand(a, shape, opname='expand'):
    src = a._data.shape
    if len(shape) < len(src):
        raise RuntimeError(
            f'{opname}: the number of sizes provided ({len(shape)}) must be greater or equal to '
            f'the number of dimensions in the tensor ({len(src)}); tensor shape {tuple(src)}')
    lead = len(shape) - len(src)
    full = list(shape)
    for i, s in enumerate(full):
        j = i - lead
        if s == -1:
            if j < 0:
                raise RuntimeError(f'{opname}: -1 is not allowed in a leading, non-existing '
                                   f'dimension {i}')
            full[i] = src[j]
        elif j >= 0 and src[j] != 1 and src[j] != s:
            raise RuntimeError(
                f'{opname}: The expanded size of the tensor ({s}) must match the existing size '
                f'({src[j]}) at non-singleton dimension {i}.  Target sizes: {list(shape)}.  '
                f'Tensor sizes: {list(src)}')
    return tuple(full)


def _sizes(args, opname='view', argname='size'):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return tuple(map(operator.index, args))
    except TypeError:
        raise size_type_error(opname, argname, args) from None


def size_type_error(opname, argname, args):
    """PyTorch's TypeError for a size or dims argument holding a non-integer."""
    if not isinstance(args, (tuple, list)):
        return TypeError(f"{opname}(): argument '{argname}' must be tuple of ints, "
                         f"not {type(args).__name__}")
    for i, s in enumerate(args):
        try:
            operator.index(s)
        except TypeError:
            return TypeError(f"{opname}(): argument '{argname}' must be tuple of ints, but "
                             f"found element of type {type(s).__name__} at pos {i}")
    return TypeError(f"{opname}(): argument '{argname}' must be tuple of ints")


_EXPANDS = {}        # (source shape, requested sizes) -> checked full shape
_SMALL_COPY = 4096   # below this many elements a copy beats np.broadcast_to's view


def expand(a, *sizes):
    d = a._data
    shape = sizes[0] if len(sizes) == 1 and type(sizes[0]) is tuple else _sizes(sizes, 'expand')
    if shape != d.shape:
        # the check is pure Python over the dims: remember shapes that passed
        key = (d.shape, shape)
        full = _EXPANDS.get(key)
        if full is None:
            full = _check_expand(a, shape)
            if len(_EXPANDS) > 4096:
                _EXPANDS.clear()
            _EXPANDS[key] = full
        shape = full
    n = 1
    for s in shape:
        n *= s
    if n <= _SMALL_COPY:
        out = np.empty(shape, d.dtype)
        out[...] = d
    else:
        out = np.broadcast_to(d, shape)
    if not (a._rg and (not _OFF[0] or grad_mode.enabled)):
        return _leaf(out)
    if shape == d.shape:
        return _record_struct(OP['view'], a, out)
    if n >= BIG:
        return _record_struct(_OP_EXPAND, a, out, x=d.size)
    tape = _tape_of(a)
    g0 = _slot(a, tape)
    slot = tape.gpos
    tape.gpos = slot + (n or 1)
    ax = 0 if d.size == 1 else tape.add_attrs(_broadcast_attrs(shape, d.shape))
    tape.rec += _PACK(_OP_EXPAND, slot, n, g0, -1, 0, ax, d.size)
    return _result(out, tape, slot)


def expand_as(a, other):
    return expand(a, other._data.shape if isinstance(other, Tensor) else np.shape(other))


def _view_record(a, out, name):
    if a._rg and (not _OFF[0] or grad_mode.enabled):
        return _record_struct(OP[name], a, out)
    return _leaf(out)


_INFERRED = {}       # (requested sizes, input size) -> the full shape


def _infer_shape(shape, size, opname, src_shape):
    """``shape`` (a tuple of ints, one of them maybe -1) for ``size`` elements, or
    PyTorch's error.  Remembered: a model reshapes to the same sizes every step."""
    key = (shape, size)
    full = _INFERRED.get(key)
    if full is not None:
        return full
    full = _infer_shape_uncached(shape, size, opname, src_shape)
    if len(_INFERRED) > 4096:
        _INFERRED.clear()
    _INFERRED[key] = full
    return full


def _infer_shape_uncached(shape, size, opname, src_shape):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError(f'{opname}: only one dimension can be inferred')
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or size % known:
            raise RuntimeError(f"{opname}: shape '{_shape_str(shape)}' is invalid for input of "
                               f'size {size}')
        shape[neg[0]] = size // known
    elif known != size:
        raise RuntimeError(f"{opname}: shape '{_shape_str(shape)}' is invalid for input of "
                           f'size {size} (input shape {tuple(src_shape)})')
    return tuple(shape)


def reshape(a, *shape):
    """A view when the strides allow one, else a copy, named as PyTorch names each:
    ViewBackward0 (contiguous input), ReshapeAliasBackward0 (a strided view that
    can still be viewed), UnsafeViewBackward0 (the elements had to be copied)."""
    d = a._data
    shape = _infer_shape(_sizes(shape, 'reshape', 'shape'), d.size, 'reshape', d.shape)
    out = d.reshape(shape) if type(d) is np.ndarray else np.reshape(d, shape)
    if type(d) is not np.ndarray or d.flags.c_contiguous:
        return _as_view(_view_record(a, out, 'reshape'), a, lambda m: m.reshape(shape))
    # NumPy copied exactly when no strides give the new shape (as torch decides)
    if np.may_share_memory(out, d):
        return _as_view(_view_record(a, out, 'reshape_alias'), a, lambda m: m.reshape(shape))
    return _view_record(a, out, 'unsafe_view')


def view(a, *shape):
    if len(shape) == 1 and isinstance(shape[0], (np.dtype, type, str)):
        return _view_dtype(a, shape[0])
    d = a._data
    shape = _infer_shape(_sizes(shape), d.size, 'view', d.shape)
    out = d.reshape(shape) if type(d) is np.ndarray else np.reshape(d, shape)
    if type(d) is np.ndarray and not d.flags.c_contiguous and not np.may_share_memory(out, d):
        # NumPy had to copy: no strides give the new shape.  View ops (t, transpose,
        # permute, slicing, expand) give the strides torch gives, but other ops may
        # lay their results out otherwise (NumPy keeps an input's order where torch's
        # softmax or cat write row-major), so refuse only views of a row-major buffer
        root = d
        while isinstance(root.base, np.ndarray):
            root = root.base
        if root is not d and root.flags.c_contiguous:
            raise RuntimeError("view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
    res = _view_record(a, out, 'view')
    if type(d) is np.ndarray and (d.flags.c_contiguous or np.may_share_memory(out, d)):
        _as_view(res, a, lambda m: m.reshape(shape))
    return res


def _view_dtype(a, dtype):
    """``a.view(dtype)``: a's bytes read as ``dtype`` (PyTorch's: the last dim scales
    by the ratio of the element sizes), sharing its storage and version counter,
    and outside the graph (PyTorch's is not differentiable either)."""
    dt = np.dtype(dtype)
    t = a.detach()
    d = np.asarray(t._data)
    src = d.dtype
    if dt.itemsize != src.itemsize:
        names = (_TORCH_DTYPE_NAMES.get(src.str[1:], str(src)),
                 _TORCH_DTYPE_NAMES.get(dt.str[1:], str(dt)))
        what = f'to view {names[0]} as {names[1]} (different element sizes)'
        if d.ndim == 0:
            raise RuntimeError(f'self.dim() cannot be 0 {what}')
        if d.strides[-1] != src.itemsize and d.shape[-1] != 1:
            raise RuntimeError(f'self.stride(-1) must be 1 {what}, but got '
                               f'{d.strides[-1] // src.itemsize}')
        ratio = dt.itemsize // src.itemsize
        if ratio > 1 and d.shape[-1] % ratio:
            raise RuntimeError(f'self.size(-1) must be divisible by {ratio} {what}, but got '
                               f'{d.shape[-1]}')
    t._data = d.view(dt)
    return t


_GRIDS = {}
_GRID_MAX = 1 << 20      # elements: larger grids are made for each use


def flat_index(shape):
    """``arange(size).reshape(shape)``, read-only and cached by shape: an index op
    picks its input positions from it.  Cached because a loop of ``x[i]`` would
    otherwise build a grid of all of ``x`` per op (and a row's positions, a view
    of that grid, would keep each one alive)."""
    g = _GRIDS.get(shape)
    if g is None:
        n = 1
        for s in shape:
            n *= int(s)
        g = np.arange(n, dtype=_I64).reshape(shape)
        if n <= _GRID_MAX:
            g.flags.writeable = False
            if len(_GRIDS) >= 256:
                _GRIDS.clear()
            _GRIDS[tuple(shape)] = g
    return g


def _take_record(a, out, name, key_fn, axes=None, key=None):
    """Record an op whose output elements are input elements picked by ``key_fn``
    (``axes``: it transposes ``a`` to that axis order; ``key``: it is ``a[key]``
    for a basic-indexing key)."""
    if a._rg and (not _OFF[0] or grad_mode.enabled):
        d = a._data
        if axes is not None and d.size >= BIG:
            # a large transpose (F.linear's weight.t()) keeps its axis order, not
            # an index map: building one copied an int64 grid of the tensor
            return _record_struct(OP[name], a, out, x=d.size, big_attrs=AxisOrder(axes))
        if key is not None and d.size >= BIG:
            # likewise a large slice keeps its key (see BasicKey)
            return _record_struct(OP[name], a, out, x=d.size,
                                  big_attrs=BasicKey(key, d.shape))
        if name == 't':     # (a weight's transpose, every step: its map is cached)
            idx = _t_index(d.shape)
        elif axes is not None:
            # (an attention head split's transpose or permute, every step: an
            # int64 gather of the whole grid, ~12 us at 8x16x64, cached too)
            idx = _axes_index(d.shape, tuple(axes))
        else:
            idx = np.ascontiguousarray(key_fn(flat_index(d.shape)), dtype=_I64).ravel()
        return _record_struct(OP[name], a, out, x=d.size, attrs=idx)
    return _leaf(out)


def t(a):
    d = a._data
    if d.ndim > 2:
        raise RuntimeError(f't() expects a tensor with <= 2 dimensions, but self is {d.ndim}D')
    if d.ndim < 2:
        res = _view_record(a, d, 't_vector') if a._rg and (not _OFF[0] or grad_mode.enabled) \
            else _leaf(d)
        return _as_view(res, a, _same)
    return _as_view(_take_record(a, d.T, 't', _transposed, (1, 0)), a, _transposed)


def _same(m):
    return m


def _transposed(m):
    return m.T


def transpose(a, dim0, dim1):
    d = a._data
    i = _norm_dim(dim0, d.ndim, 'transpose')
    j = _norm_dim(dim1, d.ndim, 'transpose')
    if d.ndim < 2 or i == j:
        res = _view_record(a, d, 'view') if a._rg and (not _OFF[0] or grad_mode.enabled) \
            else _leaf(d)
        return _as_view(res, a, _same)

    def swap(m):
        return np.swapaxes(m, i, j)
    order = list(range(d.ndim))
    order[i], order[j] = j, i
    return _as_view(_take_record(a, swap(d), 'transpose', swap, order), a, swap)


def permute(a, *dims):
    d = a._data
    dims = _sizes(dims, 'permute', 'dims')
    if len(dims) != d.ndim:
        raise RuntimeError(f'permute(sparse_coo): number of dimensions in the tensor input does '
                           f'not match the length of the desired ordering of dimensions i.e. '
                           f'input.dim() = {d.ndim} is not equal to len(dims) = {len(dims)}')
    dims = tuple(_norm_dim(x, d.ndim, 'permute') for x in dims)
    if sorted(dims) != list(range(d.ndim)):
        raise RuntimeError(f'permute(): duplicate dims are not allowed: {dims}')

    def perm(m):
        return np.transpose(m, dims)
    return _as_view(_take_record(a, perm(d), 'permute', perm, dims), a, perm)


def _unwrap_key(key):
    """``key`` (an index of getitem or setitem) in NumPy's terms."""
    if type(key) is list and _seq_as_tuple(key):
        warnings.warn('Using a non-tuple sequence for multidimensional indexing is deprecated; '
                      'use x[tuple(seq)] instead of x[seq]', UserWarning, stacklevel=4)
        key = tuple(key)
    return _unwrap_part(key)


def _seq_as_tuple(key):
    """PyTorch's (and old NumPy's) rule for a list key: it is a tuple of indices
    (``x[[rows, cols]]`` is ``x[rows, cols]``) when shorter than 32 and holding a
    tensor, a sequence, a slice, None or Ellipsis."""
    return len(key) < 32 and any(
        isinstance(k, (Tensor, list, tuple, slice, np.ndarray)) or k is None or k is Ellipsis
        for k in key)


def _unwrap_part(key):
    if isinstance(key, tuple):
        return tuple(_unwrap_part(k) for k in key)
    if isinstance(key, Tensor):
        k = np.asarray(key._data)
        if k.dtype.kind in 'iu' and k.dtype != np.int64 and k.dtype != np.int32:
            if k.dtype == np.uint8:     # a uint8 tensor is a mask, as a bool one
                warnings.warn('indexing with dtype torch.uint8 is now deprecated, please use '
                              'a dtype torch.bool instead.', UserWarning, stacklevel=4)
                return k.astype(np.bool_)
            raise IndexError(f'tensors used as indices must be long, int, byte or bool '
                             f'tensors (got {k.dtype} of shape {tuple(k.shape)})')
        if k.ndim == 0 and k.dtype.kind in 'iu':
            # a 0-d integer tensor indexes as the int it holds (PyTorch's: a view,
            # and a basic key for the large-record backward, which writes the
            # gradient into the region it picks)
            return int(k)
        return k
    if type(key) is slice and key.step is not None and key.step < 0:
        raise ValueError('step must be greater than zero (a slice with a negative step; '
                         'use flip() to reverse)')
    return key


def _index_error(e, key, d):
    """NumPy's IndexError in PyTorch's words (dimension, not axis), or PyTorch's
    TypeError for a key of a type no index takes (a string)."""
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if isinstance(k, (str, bytes)):
            return TypeError(f"index: invalid index type '{type(k).__name__}' "
                             f'(tensor of shape {tuple(d.shape)})')
    msg = str(e).replace(' for axis ', ' for dimension ').replace('indexing arrays',
                                                                   'indexing tensors')
    return IndexError(f'index: {msg} (tensor of shape {tuple(d.shape)})')


# A loop of x[:, 1:5] or x[i] gives the same key for the same shape every time:
# everything but the data depends on (key, shape) alone, so a plan is kept per
# pair: the NumPy key, the node name, the record's attributes and the view fn.
_PLANS = {}
_PLAN_MAX = 4096
_PLAN_BYTES = [0, 1 << 24]      # index maps held, and the most before a clear
_INT_TYPES = frozenset((int, np.int64, np.int32, np.intp))
_NONE = type(None)


_UNPLANNED = object()     # a key part that takes the general path


def _plan_part(x):
    """One part of a basic key in hashable form, or _UNPLANNED."""
    t = type(x)
    if t is slice:
        a, b, c = x.start, x.stop, x.step
        if (type(a) is int or a is None) and (type(b) is int or b is None) \
                and (type(c) is int or c is None):
            return ('s', a, b, c)
        return _UNPLANNED
    if t in _INT_TYPES:
        return int(x)
    if x is None or x is Ellipsis:
        return x
    return _UNPLANNED


def _plan_key(key):
    """A hashable stand-in for a basic key made only of ints, slices of ints,
    None and Ellipsis, or None for any other key (tensors, lists, bools, ...),
    which takes the general path.  Exact type checks: True == 1 and a 0-d
    tensor must not share an int's plan (slices are unhashable before 3.12).
    A key that is not a tuple stays apart from its one-part tuple (NumPy and
    the node names treat them alike, but the plan was made for one form)."""
    if type(key) is tuple:
        parts = tuple(map(_plan_part, key))
        return None if _UNPLANNED in parts else parts
    part = _plan_part(key)
    return None if part is _UNPLANNED else ('k', part)


class _Plan:
    """What ``getitem`` of a basic key needs besides the data, for one shape."""
    __slots__ = ('k', 'op', 'view', 'attrs', 'big', 'vfn')

    def __init__(self, k, name, size):
        self.k = k
        self.op = OP[name]
        self.view = name in ('alias', 'unsqueeze')
        self.big = size >= BIG
        self.attrs = None
        self.vfn = lambda m: m[k]


def _plan_attrs(plan, shape):
    """The record's attributes for a take: a large input keeps the key (see
    BasicKey), a small one the index map, read-only since records share it."""
    k = plan.k
    if plan.big:
        return BasicKey(k, shape)
    idx = np.ascontiguousarray(flat_index(shape)[k], dtype=_I64).ravel()
    if idx.base is not None or idx.flags.writeable:
        idx = idx.copy()
        idx.flags.writeable = False
    return idx


def getitem(a, key):
    d = a._data
    if type(d) is np.ndarray:
        pk = _plan_key(key)
        if a._rg and type(key) is tuple and (not _OFF[0] or grad_mode.enabled):
            # a key of several steps records one view per step, as PyTorch's
            # x[1:, :2] is SliceBackward0 of SliceBackward0
            if pk is not None:
                steps = _STEPS.get((pk, d.shape), _UNPLANNED)
                if steps is _UNPLANNED:
                    if len(_STEPS) >= _PLAN_MAX:
                        _STEPS.clear()
                    steps = _STEPS[(pk, d.shape)] = _index_steps(key, d.shape)
            else:           # (a 0-d index tensor, NumPy integers as slice bounds)
                k = _unwrap_key(key)
                steps = _index_steps(k, d.shape) if type(k) is tuple and _basic_key(k) \
                    else None
            if steps is not None:
                for step in steps:
                    a = getitem(a, step)
                return a
        if pk is not None:
            plan = _PLANS.get((pk, d.shape))
            if plan is not None:
                return _getitem_planned(a, d, plan)
            res = _getitem(a, key)
            _make_plan(a, d, key, pk)
            return res
    return _getitem(a, key)


_STEPS = {}      # (plan key, shape) -> the keys of its steps, or None for one step


def _index_steps(key, shape):
    """The one-step keys whose chain ``x[k1][k2]...`` is basic tuple key ``key`` on
    a tensor of ``shape``, in PyTorch's order (a select per integer, a slice per
    slice that does not keep its whole dimension, an unsqueeze per None), or
    None for a key of one step or less, or one that does not fit ``shape``
    (the one-step path then gives the error)."""
    consumed = sum(1 for p in key if p is not None and p is not Ellipsis)
    if consumed > len(shape) or sum(1 for p in key if p is Ellipsis) > 1:
        return None
    steps = []
    dim = 0         # the dimension of the chain's current tensor the next part indexes
    src = 0         # ... and of the original tensor
    for p in key:
        if p is None:
            steps.append((slice(None),) * dim + (None,))
            dim += 1
        elif p is Ellipsis:
            dim += len(shape) - consumed
            src += len(shape) - consumed
        elif type(p) is slice:
            if p.step is not None and p.step <= 0:
                return None
            size = shape[src]
            if p.indices(size) != (0, size, 1):
                steps.append((slice(None),) * dim + (p,))
            dim += 1
            src += 1
        else:
            if not -shape[src] <= p < shape[src]:
                return None
            steps.append((slice(None),) * dim + (p,))
            src += 1
    return steps if len(steps) > 1 else None


def _getitem_planned(a, d, plan):
    out = d[plan.k]
    if not (a._rg and (not _OFF[0] or grad_mode.enabled)):
        return _as_view(_leaf(out), a, plan.vfn)
    if plan.view:
        res = _record_struct(plan.op, a, out)
    elif plan.big:
        res = _record_struct(plan.op, a, out, x=d.size, big_attrs=plan.attrs)
    else:
        res = _record_struct(plan.op, a, out, x=d.size, attrs=plan.attrs)
    return _as_view(res, a, plan.vfn)


def _make_plan(a, d, key, pk):
    """Keep the plan of basic ``key`` on ``d``'s shape (which just succeeded)."""
    k = _unwrap_key(key)
    if type(d[k]) is not np.ndarray:
        k = (*k, Ellipsis) if isinstance(k, tuple) else (k, Ellipsis)
    plan = _Plan(k, _getitem_name(k, d), d.size)
    if not plan.view:
        plan.attrs = _plan_attrs(plan, d.shape)
    # a small input's index map is up to 128 KiB: bound the bytes as well
    held = _PLAN_BYTES[0] + (plan.attrs.nbytes if type(plan.attrs) is np.ndarray else 0)
    if len(_PLANS) >= _PLAN_MAX or held > _PLAN_BYTES[1]:
        _PLANS.clear()
        held -= _PLAN_BYTES[0]
    _PLAN_BYTES[0] = held
    _PLANS[(pk, d.shape)] = plan


def _getitem(a, key):
    k = _unwrap_key(key)
    d = a._data
    try:
        out = np.asarray(d)[k]
    except IndexError as e:
        raise _index_error(e, key, d) from None
    if type(out) is not np.ndarray:
        # every dimension picked by an integer: a 0-d view, as PyTorch's x[0]
        # (NumPy gives a scalar copy; the Ellipsis asks it for a view)
        k = (*k, Ellipsis) if isinstance(k, tuple) else (k, Ellipsis)
        out = np.asarray(d)[k]
    if not (a._rg and (not _OFF[0] or grad_mode.enabled)):
        res = _leaf(out)
        if type(d) is np.ndarray and out.base is not None and _basic_key(k):
            _as_view(res, a, lambda m: m[k])
        return res
    name = _getitem_name(k, d)
    if name in ('alias', 'unsqueeze'):  # all elements in order: a view record
        res = _view_record(a, out, name)
    else:
        res = _take_record(a, out, name, lambda m: m[k], key=None if name == 'index' else k)
    if name != 'index' and type(d) is np.ndarray:
        _as_view(res, a, lambda m: m[k])
    return res


def _getitem_name(k, d):
    """The node name of ``d[k]`` (``k`` unwrapped) in tape/_rules.py's terms."""
    # The node PyTorch shows is its last indexing step: select for an integer
    # (or 0-d integer tensor), slice, unsqueeze for None, index when any key is
    # advanced.  Inside a tuple a slice that keeps a whole dimension is skipped
    # (a[:, 1] is a select); when every step is skipped the result is an alias.
    keys = k if isinstance(k, tuple) else (k,)
    kinds = []
    for x in keys:
        if x is None:
            kinds.append('unsqueeze')
        elif x is Ellipsis:
            kinds.append('...')
        elif isinstance(x, slice):
            kinds.append('slice')
        elif (isinstance(x, (int, np.integer)) and not isinstance(x, bool)) or (
                isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in 'iu'):
            kinds.append('select')
        else:
            kinds.append('index')       # a list, an array, a bool
    if 'index' in kinds:
        name = 'index'
    elif not isinstance(k, tuple):
        name = {'unsqueeze': 'unsqueeze', '...': 'alias'}.get(kinds[0], kinds[0])
    else:
        shape = np.shape(d)
        dim = 0
        name = 'alias'
        picked = False                  # a select or a real slice came before
        for x, kind in zip(keys, kinds):
            if kind == '...':
                dim += len(shape) - sum(1 for q in kinds if q in ('select', 'slice'))
            elif kind == 'select':
                name, picked, dim = 'select', True, dim + 1
            elif kind == 'slice':
                try:
                    whole = ((x.start is None or operator.index(x.start) == 0)
                             and (x.step is None or operator.index(x.step) == 1)
                             and (x.stop is None or operator.index(x.stop) >= shape[dim]))
                except TypeError:
                    whole = False
                if not whole:
                    name, picked = 'slice', True
                dim += 1
            else:
                # (a None after a pick is a step of its own, recorded by getitem's
                # chain; a take by index map would serve one written in one key)
                name = 'index' if picked else 'unsqueeze'
    return name


def _basic_key(k):
    """Does key ``k`` (unwrapped) select a NumPy view (no advanced indexing)?"""
    for x in (k if isinstance(k, tuple) else (k,)):
        if not (x is None or x is Ellipsis or isinstance(x, slice) or (
                isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))) or (
                isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in 'iu')):
            return False
    return True


def take_flat(a, idx):
    """``a.reshape(-1)[idx]`` for an int64 index array (differentiable)."""
    d = np.reshape(a._data, -1)
    out = d[idx]
    if a._rg and (not _OFF[0] or grad_mode.enabled):
        return _record_struct(OP['index'], a, out, x=d.size,
                              attrs=np.ascontiguousarray(idx, dtype=_I64))
    return _leaf(out)


def put_block(a, key, shape, idx):
    """``zeros(shape)`` with ``a`` written into the region basic-indexing ``key``
    picks, flat (differentiable); ``idx`` gives that region's flat positions
    (an index map, read for small records only: a large one keeps the key)."""
    d = a._data
    size = 1
    for s in shape:
        size *= int(s)
    if size < BIG and d.size < BIG:
        return put_flat(a, idx() if callable(idx) else idx, size)
    out = np.zeros(shape, d.dtype)
    out[key] = d
    out = out.reshape(-1)
    if a._rg and (not _OFF[0] or grad_mode.enabled):
        return _record_struct(OP['put'], a, out, x=d.size, big_attrs=BasicKey(key, shape))
    return _leaf(out)


def put_flat(a, idx, size):
    """A flat tensor of ``size`` zeros with ``a``'s elements added at ``idx``."""
    d = np.reshape(a._data, -1)
    idx = np.ascontiguousarray(idx, dtype=_I64)
    out = np.bincount(idx, weights=d, minlength=size).astype(d.dtype, copy=False)
    if a._rg and (not _OFF[0] or grad_mode.enabled):
        return _record_struct(OP['put'], a, out, x=d.size, attrs=idx)
    return _leaf(out)


# ------------------------------------------------------- linear algebra
def mm(a, b):
    a0, b0 = a, b
    a = a if type(a) is Tensor else _const(a)
    b = b if type(b) is Tensor else _const(b, a)
    ad, bd = a._data, b._data
    sa, sb = ad.shape, bd.shape
    if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0] or ad.dtype != bd.dtype:
        _mm_error(ad, bd, a0, b0)
    # ndarray.dot, not @: the same BLAS call for 2-D operands (bit-equal), without
    # the matmul gufunc's dispatch (an (8, 1) @ (1, 1) product: 1.6 -> 0.35 us)
    try:
        out = ad.dot(bd)
    except RuntimeWarning as e:
        out = quietly(e, ad.dot, bd)
    if not ((a._rg or b._rg) and (not _OFF[0] or grad_mode.enabled)):
        return _leaf(out)
    m, k = sa
    n = m * sb[1]
    na = m * k
    nb = k * sb[1]
    if n >= BIG or na >= BIG or nb >= BIG:
        r = _record_struct(_OP_MM, a, out, x=k, saved=(ad, bd), b=b, ax=m)
        for x, other in ((a, b), (b, a)):
            if x._tape is None and other._rg:   # (read only for the other's gradient)
                r._tape.save_box(x, r._rec)
        return r
    # inline: the small products of a training step (m and k ride in the
    # record's a and x fields; the result's columns are its size / m)
    tape = _tape_of2(a, b)
    g0 = _slot(a, tape)
    g1 = _slot(b, tape)
    slot = tape.gpos
    tape.gpos = slot + (n or 1)
    v = tape.vpos
    saved = tape.saved
    saved.append(ad)
    saved.append(bd)
    tape.vpos = v + na + nb
    for x, gother in ((a, g1), (b, g0)):
        if x._tape is None and gother >= 0:     # inline save_box, read for the other's grad
            box = x._vbox
            if box is None:
                box = x._vbox = [0]
            tape.boxes.append((box, box[0], tape.n))
    tape.rec += _PACK(_OP_MM, slot, n, g0, g1, v, m, k)
    return _result(out, tape, slot)


_OP_T = OP['t']
_OP_ADD = OP['add']
_T_INDEX = {}       # weight shape -> the t record's index map (read-only, shared)
_LINEAR_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


_AXES_INDEX = {}


def _axes_index(shape, axes):
    """The flat index map of ``np.transpose`` of an array of ``shape`` to the axis
    order ``axes`` (read-only), cached by (shape, axes): below BIG elements, at
    most 128 kept."""
    key = (shape, axes)
    idx = _AXES_INDEX.get(key)
    if idx is None:
        idx = np.ascontiguousarray(np.transpose(flat_index(shape), axes), dtype=_I64).ravel()
        idx.flags.writeable = False
        if len(_AXES_INDEX) >= 128:
            _AXES_INDEX.clear()
        _AXES_INDEX[key] = idx
    return idx


def _t_index(shape):
    idx = _T_INDEX.get(shape)
    if idx is None:
        idx = np.ascontiguousarray(flat_index(shape).T, dtype=_I64).ravel()
        idx.flags.writeable = False
        if len(_T_INDEX) > 256:
            _T_INDEX.clear()
        _T_INDEX[shape] = idx
    return idx


def _jit_tracing():
    """tape.jit's thread-local tracing state (imported on first use: _jit imports
    this module; an import statement per call costs a microsecond)."""
    global _jit_tracing
    from ._jit import _tracing

    def _jit_tracing():
        return _tracing
    return _tracing


def linear_records(inp, w, bias):
    """``F.linear(inp, w, bias)`` for the common case of a layer's forward: an
    input of two or more dims, a leaf weight (requiring grad) and bias of its
    float dtype.

    Appends the records the composite ``t(w)``, ``mm``, ``add`` appends for a
    2-D input (t, mm, broadcast, add, in that order, small or big as their
    sizes make them), without making the intermediate tensors or the weight's view
    bookkeeping: the view ``w.t()`` never reaches the user, so what it did for
    in-place safety is a version note of ``w`` on the mm record, which reads
    ``w``'s memory for the input's gradient.  None where another case applies
    (the caller then runs the composite)."""
    ad = inp._data
    wd = w._data
    bd = bias._data
    if type(bias) is not Tensor or w._tape is not None or bias._tape is not None \
            or not w._rg or w._extra is not None or bias._extra is not None \
            or type(ad) is not np.ndarray \
            or type(wd) is not np.ndarray or type(bd) is not np.ndarray:
        return None
    dt = wd.dtype
    nd = ad.ndim
    if nd < 2 or wd.ndim != 2 or bd.ndim != 1 or ad.dtype is not dt \
            or bd.dtype is not dt or dt not in _LINEAR_DTYPES:
        return None
    if nd == 2:
        m, k = ad.shape
    else:
        # (..., k) input: the product of its rows, (m, k), in C order.  The
        # records read the input's gradient slot and saved values flat, so
        # the mm record takes the N-D input's slot as it is, with no view
        # record in between (the output is the flat (m, nout) result, shaped)
        k = ad.shape[-1]
        m = ad.size // k if k else 0
    nout = wd.shape[0]
    n = m * nout
    if wd.shape[1] != k or bd.shape[0] != nout or not n or not k:
        return None
    recording = not _OFF[0] or grad_mode.enabled
    if recording and getattr(_jit_tracing(), 'proxies', None) is not None:
        return None
    tape = inp._tape
    if tape is not None and tape.alias is not None:
        return None
    wt = wd.T
    if nd != 2:
        ad = ad.reshape(m, k)           # (a copy only for a strided input)
    out = ad.dot(wt)                # (ndarray.dot: see mm)
    _add_bias(out, bd)              # (the mm result is no one else's: add in place)
    if nd != 2:
        out = out.reshape(inp._data.shape[:-1] + (nout,))
    if not recording:
        return _leaf(out)
    if tape is None:
        tape = open_tape()
    # t: the weight's transpose, an index map (a large one: its axis order)
    wsize = wd.size
    gw = w._goff if w._rec == tape.serial else tape.leaf_slot(w)
    if wsize >= BIG:
        st = tape.alloc(wsize)
        tape.big.append(BigRecord.of({}, (k, nout), dt, [wd.shape], [dt], AxisOrder((1, 0))))
        tape.rec += _PACK(_OP_T | BIG_FLAG, st, wsize, gw, -1, len(tape.big) - 1, 0, wsize)
    else:
        st = tape.gpos
        tape.gpos = st + wsize
        tape.rec += _PACK(_OP_T, st, wsize, gw, -1, tape.vpos,
                          tape.add_attrs(_t_index(wd.shape)), wsize)
    tape.n += 1
    # mm: saves the input and the transposed weight (by reference)
    g0 = _slot(inp, tape)
    if inp._tape is None:               # the input, read for the weight's gradient
        tape.save_box(inp)
    if g0 >= 0:                         # the weight, read for the input's gradient
        tape.save_box(w)
    if n >= BIG or m * k >= BIG or wsize >= BIG:
        # a big record (tape/_big.py): the operands stay out of the arena
        sm = tape.alloc(n)
        tape.big.append(BigRecord.of({'a': ad, 'b': wt}, (m, nout), dt, [(m, k), (k, nout)],
                                     [dt, dt]))
        tape.rec += _PACK(_OP_MM | BIG_FLAG, sm, n, g0, st, len(tape.big) - 1, m, k)
    else:
        sm = tape.gpos
        tape.gpos = sm + n
        v = tape.vpos
        saved = tape.saved
        saved.append(ad)
        saved.append(wt)
        tape.strided_saved = True
        tape.vpos = v + m * k + k * nout
        tape.rec += _PACK(_OP_MM, sm, n, g0, st, v, m, k)
    tape.n += 1
    # add of the broadcast bias
    gb = _slot(bias, tape)
    if gb >= 0:
        gb = _expand_slot(tape, gb, bd.shape, out.shape, nout, n)
    if n >= BIG:
        slot = tape.alloc(n)
        tape.big.append(BigRecord.of({}, out.shape, dt, [out.shape, out.shape], [dt, dt]))
        tape.rec += _PACK(_OP_ADD | BIG_FLAG, slot, n, sm, gb, len(tape.big) - 1, 0, 0)
    else:
        slot = tape.gpos
        tape.gpos = slot + n
        tape.rec += _PACK(_OP_ADD, slot, n, sm, gb, tape.vpos, 0, 0)
    return _result(out, tape, slot)


def _mm_error(ad, bd, a0=None, b0=None):
    for arg, pos, x in (('input', 1, a0), ('mat2', 2, b0)):
        if x is not None and not isinstance(x, (Tensor, np.ndarray, list, tuple)):
            raise TypeError(f"mm(): argument '{arg}' (position {pos}) must be Tensor, not "
                            f'{type(x).__name__}')
    if ad.ndim != 2:
        raise RuntimeError(f'mm: self must be a matrix, got a {ad.ndim}-D tensor of shape '
                           f'{tuple(ad.shape)}')
    if bd.ndim != 2:
        raise RuntimeError(f'mm: mat2 must be a matrix, got a {bd.ndim}-D tensor of shape '
                           f'{tuple(bd.shape)}')
    if ad.shape[1] != bd.shape[0]:
        raise RuntimeError(f'mm: mat1 and mat2 shapes cannot be multiplied '
                           f'({ad.shape[0]}x{ad.shape[1]} and {bd.shape[0]}x{bd.shape[1]})')
    raise RuntimeError(f'mm: expected m1 and m2 to have the same dtype, but got: {ad.dtype} != '
                       f'{bd.dtype} (shapes {tuple(ad.shape)} and {tuple(bd.shape)})')


def matmul(a, b):
    a = a if type(a) is Tensor else _const(a)
    b = b if type(b) is Tensor else _const(b, a)
    na, nb = a._data.ndim, b._data.ndim
    if na == 2 and nb == 2:
        return mm(a, b)
    if na == 1 and nb == 1:
        if a._data.shape != b._data.shape:
            raise RuntimeError(f'dot: 1D tensors expected, but got inconsistent sizes '
                               f'{a._data.shape[0]} and {b._data.shape[0]}')
        r = _dot(a, b)
        if r._tape is not None:         # one DotBackward0 node of a and b
            from ._composite_nodes import name_result
            name_result(r, 'DotBackward0', (a, b))
        return r
    if na == 1 and nb == 2:         # SqueezeBackward4, as PyTorch's unsqueeze-mm-squeeze
        a1 = reshape(a, 1, -1)
        if a1._tape is not None:
            from ._composite_nodes import name_result
            name_result(a1, 'UnsqueezeBackward0', (a,))
        r = mm(a1, b)
        return _view_record(r, np.reshape(r._data, -1), 'squeeze_matmul')
    if na == 2 and nb == 1:         # MvBackward0 of a and b
        r = _mv(a, b)
        if r._tape is not None:
            from ._composite_nodes import name_result
            name_result(r, 'MvBackward0', (a, b))
        return r
    if na == 0 or nb == 0:
        raise RuntimeError('matmul: both arguments to matmul need to be at least 1D, but they '
                           f'are {na}D and {nb}D')
    raise NotImplementedError(f'matmul: batched operands ({na}D @ {nb}D) are not supported yet')


def _dot(a, b):
    p = mul(a, b)               # a sum of the product, in a record of its own
    out = np.add.reduce(p._data)
    if p._rg and (not _OFF[0] or grad_mode.enabled):
        return _record_struct(OP['dot'], p, out, x=p._data.size, scale=1.0)
    return _leaf(out)


def _mv(a, b):
    r = mm(a, reshape(b, -1, 1))
    return _view_record(r, np.reshape(r._data, -1), 'mv')


# --------------------------------------------------------------- others
def clone(a):
    out = np.array(a._data, copy=True)
    return _view_record(a, out, 'contiguous')     # the identity kind, named CloneBackward0


# --------------------------------------------------------------- in-place
_INPLACE = {
    'add': (add, np.add), 'sub': (sub, np.subtract), 'mul': (mul, np.multiply),
    'div': (div, np.true_divide),
}
_INPLACE_NODES = {'add': 'AddBackward0', 'sub': 'SubBackward0'}    # (of a tensor times alpha)


def inplace(a, name, other=None, alpha=None):
    """``a.<name>_(other)``: write into a's storage and bump its version."""
    if a._rg and (not _OFF[0] or grad_mode.enabled) and a._tape is None:
        raise RuntimeError('a leaf Variable that requires grad is being used in an in-place '
                           f'operation ({name}_ on a tensor of shape {tuple(a._data.shape)}).')
    _views.check_inplace(a, name + '_', not _OFF[0] or grad_mode.enabled)
    od = other._data if isinstance(other, Tensor) else other
    if alpha is not None:
        od = od * alpha
    d = _storage(a)
    if name == 'zero':
        value = np.zeros_like(d)
    elif name == 'fill':
        value = np.full_like(d, od)
    elif name == 'copy':
        try:
            value = np.broadcast_to(np.asarray(od, dtype=d.dtype), d.shape)
        except ValueError:
            if _is_array_like(od) or isinstance(od, np.generic):
                raise shapes_error('copy_', d.shape, np.shape(od)) from None
            raise
    else:
        # PyTorch computes in the promoted type and refuses to write it back into
        # a's dtype unless the cast is within a kind (int64 * 1.5 is Float: refused)
        rt = _dtypes.result_type(d, other._data if isinstance(other, Tensor) else other)
        if name == 'div' and rt is not None and rt.kind not in 'fc':
            rt = _dtypes.default_dtype[0]
        if name == 'sub' and (d.dtype == np.bool_ or np.result_type(od) == np.bool_):
            raise RuntimeError(_dtypes.BOOL_SUB.format(
                'two bool tensors' if d.dtype == np.bool_ and np.result_type(od) == np.bool_
                else 'a bool tensor'))
        # (PyTorch's rule is by category: uint8 += int64 is allowed, unlike NumPy's)
        if rt is not None and _dtypes.category(rt) > _dtypes.category(d.dtype):
            names = _TORCH_DTYPE_NAMES
            raise RuntimeError(f"result type {names.get(rt.str[1:], rt)} can't be cast to the "
                               f"desired output type {names.get(d.dtype.str[1:], d.dtype)}")
        try:
            try:
                value = _INPLACE[name][1](d, od)
            except RuntimeWarning as e:         # an inf or NaN (tape/_fpwarn.py)
                value = quietly(e, _INPLACE[name][1], d, od)
        except ValueError:
            raise _broadcast_error(name + '_', a, _const(od)) from None
        if np.shape(value) != d.shape:
            raise RuntimeError(f'{name}_: output with shape {_shape_str(d.shape)} doesn\'t match '
                               f'the broadcast shape {_shape_str(np.shape(value))}')
    recorded = None
    tape = a._tape
    if tape is not None:
        # records made so far that saved a's data by reference now see new values
        tape.add_dirty(a._goff, tape.n)
    elif a._extra is not None and 'alias_of' in a._extra:
        ref, slot = a._extra['alias_of']      # a detached view of a graph tensor
        alias_tape = ref()
        while alias_tape is not None and alias_tape.alias is not None \
                and alias_tape.alias is not _STALE:                      # merged since
            slot = _shift_slot(slot, alias_tape.gshift)
            alias_tape = alias_tape.alias
        if alias_tape is not None:
            alias_tape.add_dirty(slot, alias_tape.n)
    if (not _OFF[0] or grad_mode.enabled) and (a._tape is not None or (isinstance(other, Tensor) and other._rg)):
        # the in-place op enters the graph: record it out of place on a snapshot
        # of a, then rebind a to the new record's slot
        before = _leaf_view_of(a)
        # PyTorch's node for the write, over (a as it was, the other argument)
        node = None
        if name in _INPLACE:
            o = other
            if isinstance(o, Tensor) and (o is a or np.may_share_memory(o._data, d)):
                o = before if o is a else _leaf_view_of(o)   # x.mul_(x): the old values
            if alpha is not None and alpha != 1:
                if isinstance(o, Tensor):
                    # (alpha is an attribute of PyTorch's node, not an input)
                    if name in _INPLACE_NODES:
                        node = (_INPLACE_NODES[name], (before, o))
                    o = mul(o, alpha)
                else:
                    o = o * alpha
            recorded = _INPLACE[name][0](before, o)
        elif name == 'zero' or name == 'fill' and not (isinstance(other, Tensor) and other._rg):
            recorded = mul(before, 0.0)
            if name == 'fill':
                recorded = add(recorded, od)
            node = ('ZeroBackward0' if name == 'zero' else 'FillBackward2', (before,))
        else:
            # copy_, or fill_ with a 0-d tensor that requires grad
            src = other if isinstance(other, Tensor) else _const(other)
            if src._data.dtype != d.dtype:
                src = to(src, d.dtype)
            if src._data.shape != d.shape:
                src = expand(src, d.shape)
            recorded = add(mul(before, 0.0), src)
            node = ('CopyBackwards' if name == 'copy' else 'FillBackward3', (before, other))
        if node is not None and recorded._tape is not None:
            from ._composite_nodes import name_result
            name_result(recorded, *node)
    base_before = _views.snapshot_base(a, recorded is not None)
    d[...] = value
    _bump_version(a)
    if recorded is not None:
        rebind(a, recorded)
    _after_inplace(a, recorded, base_before)
    return a


def _after_inplace(a, recorded, base_before):
    """An in-place op wrote ``a`` (now ``recorded`` in the graph, or None):
    through a view, rewrite the base's graph; on a base, re-read its views."""
    ext = a._extra
    if ext is None:
        return
    if 'view' in ext:
        _views.write_through(a, recorded, base_before)
    elif 'views' in ext or 'view_tapes' in ext:
        _views.mark_dirty(a, a)     # records that saved a view of a read new values
        if recorded is not None:
            _views.refresh(a)


def inplace_apply(a, fn, *args, **kwargs):
    """``a.<fn>_(*args)``: ``fn`` applied to a as it is now, written back into a.

    Records made so far that saved a by reference are marked before ``fn``
    records its own op, whose input is a snapshot of a: the new record is not
    a stale reader, the old ones are (see Tape.check_versions).
    """
    if a._rg and (not _OFF[0] or grad_mode.enabled) and a._tape is None:
        raise RuntimeError('a leaf Variable that requires grad is being used in an in-place '
                           f'operation ({fn.__name__}_ on a tensor of shape '
                           f'{tuple(a._data.shape)}).')
    _views.check_inplace(a, fn.__name__ + '_', not _OFF[0] or grad_mode.enabled)
    d = _storage(a)
    tape = a._tape
    if tape is not None:
        tape.add_dirty(a._goff, tape.n)
    res = fn(_leaf_view_of(a), *args, **kwargs)
    value = np.asarray(res._data)
    if value.shape != d.shape:
        raise RuntimeError(f'{fn.__name__}_: output with shape {_shape_str(d.shape)} doesn\'t '
                           f'match the result shape {_shape_str(value.shape)}')
    if not np.can_cast(value.dtype, d.dtype, 'same_kind'):
        raise RuntimeError(f'{fn.__name__}_: result type {value.dtype} can\'t be cast to the '
                           f'desired output type {d.dtype}')
    base_before = _views.snapshot_base(a, res._tape is not None)
    d[...] = value
    _bump_version(a)
    recorded = res if res._tape is not None else None
    if recorded is not None:
        rebind(a, res)
    _after_inplace(a, recorded, base_before)
    return a


def rebind(a, recorded):
    """After an in-place op entered the graph: ``a`` now stands for ``recorded``'s slot.

    A ``retain_grad`` moves with it (``.grad`` is the gradient of the tensor's
    latest version, as in PyTorch); hooks stay with the version they were
    registered on."""
    ext = a._extra
    retains = ext is not None and ext.get('retain_grad') and a._tape is not None
    if retains:
        _drop_retain(a)
    a._tape = recorded._tape
    a._goff = recorded._goff
    a._rec = recorded._rec
    a._rg = True
    if retains:
        from ._hooks import retain_grad
        retain_grad(a)


def _drop_retain(a):
    tape = a._tape
    if tape.alias is not None:
        tape = resolve(a)
    per_rec = (tape.hooks or {}).get(a._rec)
    h = per_rec.get(a._goff) if per_rec else None
    if h is not None and h.retain is not None and h.retain() is a:
        h.retain = None


def _leaf_view_of(a):
    """``a`` as it is now, as an op input (a copy, since a is about to change)."""
    c = _TNEW(Tensor)
    c._data = np.array(a._data, copy=True)
    c._rg = a._rg
    c._tape = a._tape
    c._goff = a._goff
    c._rec = a._rec
    return c


def to(a, dtype):
    dtype = np.dtype(dtype)
    if a._data.dtype == dtype:
        return a
    try:
        out = a._data.astype(dtype)
    except RuntimeWarning as e:         # a float64 past float32's range: inf
        out = quietly(e, a._data.astype, dtype)
    if a._rg and (not _OFF[0] or grad_mode.enabled) and dtype.kind == 'f':
        # x marks a cast (its bits: 16, 32 or 64), which grad_fn names
        # ToCopyBackward0 (tape/_graph.py); at 32 tape.jit's replay, which
        # computes in float64, rounds there as astype does (compiler/replaygen.py)
        return _record_struct(OP['view'], a, out, x=dtype.itemsize * 8)
    return _leaf(out)
