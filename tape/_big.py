"""Records over large tensors: swept in Python with NumPy, in the tensors' own dtype.

A record is *big* when any tensor it touches has ``BIG`` or more elements.
Copying such tensors into the float64 value arena ``V`` (and their gradients
into the float64 arena ``G``) would cost more than the sweep itself, and
would turn float32 matrix products into float64 ones.  So a big record keeps
its saved arrays by reference in ``Tape.big`` (its v field indexes that list),
its opcode carries the ``BIG_FLAG`` bit, the compiled sweep hands it back to
Python, and the handlers here run its vector-Jacobian product: BLAS for
matrix products, NumPy for reductions and index maps, the compiled kernel's
own branch on a private arena for the rest, and for runs of elementwise
records per-rule Numba kernels applied chunk by chunk (``sweep_chain``),
generated from the same formula text as the sweep (``compiler/chunkgen.py``).

Gradients of big slots live in ``Grads.big`` (flat arrays in the slot's
dtype); small slots stay in ``G``.  Big slots are numbered in a space of their
own (from ``BIG_BASE``), so ``G`` is only as large as the small slots.
"""
import struct

import numpy as np

from ._pool import ALIGN_MIN as _ALIGN_MIN, pool
from ._rules import OP, RULES

BIG = 16384            # elements
BIG_FLAG = 1 << 20     # or-ed into the opcode of a big record
# Big slots are numbered from here, in a space of their own: G and the reach
# flags cover small slots only, so a graph over large tensors does not make
# every sweep allocate (and fault in) an arena as large as those tensors.
BIG_BASE = 1 << 40
_T_BIG = OP['t'] | BIG_FLAG


class BigRecord:
    """What a big record needs at backward: saved arrays, shapes, dtypes."""
    __slots__ = ('saved', 'out_shape', 'out_dtype', 'in_shapes', 'in_dtypes', 'attrs', 'packs')

    def __init__(self, saved, out, ins, attrs=None):
        self.packs = None                   # name -> (packed, unpack_hook): _saved_hooks.py
        self.saved = saved                  # name -> array ('a', 'b', 'out')
        self.out_shape = np.shape(out)
        self.out_dtype = _float(np.result_type(out))
        self.in_shapes = [np.shape(i) for i in ins]
        self.in_dtypes = [_float(np.result_type(i)) for i in ins]
        self.attrs = attrs
        if self.out_dtype == _F16 or _F16 in self.in_dtypes:
            _widen16(self)

    @classmethod
    def of(cls, saved, out_shape, out_dtype, in_shapes, in_dtypes, attrs=None):
        """A record from known shapes and dtypes (skips __init__'s inspection)."""
        meta = object.__new__(cls)
        meta.packs = None
        meta.saved = saved
        meta.out_shape = out_shape
        meta.out_dtype = out_dtype
        meta.in_shapes = in_shapes
        meta.in_dtypes = in_dtypes
        meta.attrs = attrs
        if out_dtype == _F16 or _F16 in in_dtypes:
            _widen16(meta)
        return meta


_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _widen16(meta):
    """A big record of float16 tensors is swept in float32: Numba has no float16
    type, so its kernels take float32 copies of the saved arrays and write
    float32 gradients, which delivery rounds to each leaf's float16 (PyTorch's
    CPU float16 kernels also compute in float32)."""
    meta.saved = {k: v.astype(_F32) if getattr(v, 'dtype', None) == _F16 else v
                  for k, v in meta.saved.items()}
    if meta.out_dtype == _F16:
        meta.out_dtype = _F32
    meta.in_dtypes = [_F32 if d == _F16 else d for d in meta.in_dtypes]


class AxisOrder(tuple):
    """``meta.attrs`` of a big transpose or permute record: the input's axes in
    the output's order (``out = np.transpose(input, order)``).  Kept instead of
    an index map, which would cost an int64 copy of the tensor to build and a
    bincount to sweep: the backward transposes the gradient back."""
    __slots__ = ()


class BasicKey:
    """``meta.attrs`` of a big take or put record whose positions a basic-indexing
    key (ints, slices, None, Ellipsis: a NumPy view) picks: ``out = a[key]`` for
    a take (slice, select, split, narrow, unbind), ``out[key] = a`` in zeros of
    the output's shape for a put (a piece of cat).  Kept instead of an index map,
    which costs an int64 copy to build, and a bincount (in float64) to sweep a
    take: the backward writes the gradient into that region instead."""
    __slots__ = ('key', 'shape')

    def __init__(self, key, shape):
        self.key = key
        self.shape = tuple(shape)       # of the array the key indexes

    def index_map(self):
        """The index map a small record would keep."""
        from ._ops import flat_index
        return np.ascontiguousarray(flat_index(self.shape)[self.key], dtype=np.int64).ravel()


class UniqueIndex(np.ndarray):
    """``meta.attrs`` of a big take record whose flat index map has no repeated
    position (nll_loss's pick of one class per sample): the backward scatters
    the gradient straight into zeros of the input's dtype (``gi[idx] = g``, exact
    without duplicates) instead of a float64 ``bincount`` over the whole input
    and a cast.  Anything else reads it as the plain int64 index map it is."""
    __slots__ = ()


def _float(dt):
    return dt if dt.kind == 'f' else np.dtype(np.float64)


class Grads:
    """Gradient storage for one sweep: the arena G (and its reach flags) for
    small slots, arrays in ``big`` (and the set ``bigreach``) for big ones."""
    __slots__ = ('G', 'reach', 'big', 'bigreach', '__weakref__')     # (NodeHooks.ran)

    def __init__(self, G, reach):
        self.G = G
        self.reach = reach
        self.big = {}
        self.bigreach = set()

    def reached(self, slot):
        if slot >= BIG_BASE:
            return slot in self.bigreach
        return bool(self.reach[slot])

    def mark(self, slot):
        if slot >= BIG_BASE:
            self.bigreach.add(slot)
        else:
            self.reach[slot] = 1

    def reached_records(self, R):
        """Per record of R: was its result slot reached?"""
        outs = R[:, 1]
        small = outs < BIG_BASE
        if small.all():
            return self.reach[outs] != 0
        mask = np.zeros(len(R), bool)
        mask[small] = self.reach[outs[small]] != 0
        for i in np.nonzero(~small)[0]:
            mask[i] = int(outs[i]) in self.bigreach
        return mask

    def all_reached(self, tape):
        """Did the sweep reach every slot of the tape (so every record)?"""
        reach = self.reach
        return ((np.count_nonzero(reach) if len(reach) else 0) + len(self.bigreach)
                == tape.n + len(tape.leaves) + tape.xslots)

    def get(self, slot, size, shape=None):
        """The gradient of a slot as an array (a view; None if the slot holds none)."""
        if slot >= BIG_BASE:
            g = self.big.get(slot)
            if g is None:
                return None
        else:
            g = self.G[slot:slot + size]
        return g if shape is None else g.reshape(shape)

    def add(self, slot, size, value, dtype=None, owned=False):
        """Accumulate ``value`` (any shape with ``size`` elements) into a slot."""
        if slot >= BIG_BASE:
            self.bigreach.add(slot)
            cur = self.big.get(slot)
            flat = np.ravel(value)
            if cur is not None and not cur.flags.writeable:
                cur = self.big[slot] = cur + flat      # was a broadcast view
                return
            if cur is None:
                if dtype is not None and flat.dtype != dtype:
                    flat = flat.astype(dtype)
                elif not (owned and isinstance(value, np.ndarray) and value.base is None
                          and value.flags.c_contiguous and value.flags.writeable):
                    # not ours to write to (a caller's seed, a view of something
                    # else): a read-only view, which a later add replaces
                    # (see above) rather than writes into
                    flat = flat.view()
                    flat.flags.writeable = False
                self.big[slot] = flat
            else:
                cur += flat
        else:
            # (reshape and slice assignment: half the cost of np.ravel and np.copyto)
            flat = value.reshape(-1) if type(value) is np.ndarray else np.ravel(value)
            if self.reach[slot]:
                self.G[slot:slot + size] += flat
            else:
                # the slot's first gradient: a casting copy beats NumPy's mixed-dtype +=
                self.reach[slot] = 1
                self.G[slot:slot + size] = flat

    def set(self, slot, size, value):
        """Replace a slot's gradient (a hook's returned tensor)."""
        if slot >= BIG_BASE:
            self.big[slot] = np.array(np.ravel(value), copy=True)
        else:
            self.G[slot:slot + size] = np.ravel(value)

    def drop(self, slot, size):
        """Forget a slot's gradient, unreached again (node hooks ran the records
        that read it: tape/_node_hooks.py)."""
        if slot >= BIG_BASE:
            self.bigreach.discard(slot)
            self.big.pop(slot, None)
        else:
            self.reach[slot] = 0
            self.G[slot:slot + size] = 0


class SlotGrads:
    """``Grads`` without an arena: gradients as flat arrays by slot, for a sweep
    that runs Python records only (tape/_sweep.py ``_run_python``), where an
    arena would be allocated, zeroed, written and read back for nothing.

    A stored array is never written to in place (it may be a caller's seed or
    what a Function's backward returned): a second gradient for a slot makes
    a new sum.  ``owned`` holds the slots whose array nothing else refers to,
    which a leaf may adopt as its ``.grad`` instead of copying."""
    __slots__ = ('g', 'owned')

    def __init__(self):
        self.g = {}
        self.owned = set()

    def reached(self, slot):
        return slot in self.g

    def get(self, slot, size, shape=None):
        g = self.g.get(slot)
        return g if shape is None or g is None else g.reshape(shape)

    def add(self, slot, size, value, dtype=None, owned=False):
        flat = value.reshape(-1) if type(value) is np.ndarray else np.ravel(value)
        if dtype is not None and flat.dtype != dtype:
            flat = flat.astype(dtype)
            owned = True
        cur = self.g.get(slot)
        if cur is None:
            self.g[slot] = flat
            if owned:
                self.owned.add(slot)
        else:
            self.g[slot] = cur + flat
            self.owned.add(slot)

    def set(self, slot, size, value):
        self.g[slot] = np.array(np.ravel(value), copy=True)
        self.owned.add(slot)

    def drop(self, slot, size):
        self.g.pop(slot, None)
        self.owned.discard(slot)


def sweep_record(tape, k, R, A, grads, keep=(), needed=None):
    """Run big record k: read its output's gradient, add its inputs' gradients.

    ``keep``: slots whose gradient the caller reads (autograd.grad's inputs);
    ``needed``: per record, is it on a path to an input (None: all are)."""
    op, go, n, g0, g1, v, ax, x = R[k].tolist()
    if not grads.reached(go):
        return
    op &= ~BIG_FLAG
    rule = RULES[op]
    meta = tape.big[v]
    kind = rule.kind
    if kind == 'sum_all' and go < BIG_BASE and type(grads) is Grads:
        g = grads.G[go]       # (the one element: what g.ravel()[0] below reads)
    else:
        g = grads.get(go, n, meta.out_shape)
        if g is None:
            return
    if kind == 'sum_all':
        c = _AS_FLOAT(_AS_INT(x))[0]      # (field 7's float64 bits)
        size = v_size(meta)
        value = (g if g.ndim == 0 else g.ravel()[0]) * c
        cur = grads.big.get(g0)
        if cur is not None and cur.flags.writeable:
            cur += value
        elif cur is not None and cur.strides == (0,):      # two sums of one tensor
            grads.big[g0] = _filled(cur[0] + value, size)
        elif cur is not None:
            grads.big[g0] = cur + value
        else:
            # the gradient of a full sum is one number everywhere: a zero-stride
            # view, materialised only if something adds into it in place
            grads.mark(g0)
            grads.big[g0] = _filled(value, size)
        return
    if kind == 'reduce':
        c = _AS_FLOAT(_AS_INT(x))[0]      # (field 7's float64 bits)
        # a big reduce keeps, in meta.attrs, its output shape with reduced dims as 1.
        # g (small) may have come through the float64 arena: cast it, not the
        # large result, to the input's dtype (no float64 round trip of float32)
        g = g.astype(meta.in_dtypes[0], copy=False)
        gi = np.broadcast_to(np.reshape(g, meta.attrs), meta.in_shapes[0]) * c
        grads.add(g0, v_size(meta), gi, meta.in_dtypes[0], owned=True)
        return
    if kind == 'lse':
        xs, out = meta.saved['a'], meta.saved['b']        # out keeps the reduced dims
        g = g.astype(meta.in_dtypes[0], copy=False)       # (as for reduce above)
        with np.errstate(invalid='ignore', over='ignore'):
            gi = np.reshape(g, np.shape(out)) * np.exp(xs - out)
        grads.add(g0, xs.size, gi, meta.in_dtypes[0], owned=True)
        return
    if kind == 'expand':
        small = meta.in_shapes[0]
        gi = _sum_to(g, small)
        grads.add(g0, x, gi, meta.in_dtypes[0], owned=gi is not g)
        return
    if kind == 'identity':
        grads.add(g0, n, g, meta.in_dtypes[0])
        return
    if kind == 'take':
        idx = meta.attrs
        if type(idx) is AxisOrder:
            gi = np.ascontiguousarray(np.transpose(g, np.argsort(idx)))
            grads.add(g0, x, gi, meta.in_dtypes[0], owned=True)
            return
        if type(idx) is BasicKey:
            _add_region(grads, g0, x, idx.shape, idx.key, g, meta.in_dtypes[0])
            return
        if type(idx) is UniqueIndex:
            gi = np.zeros(x, meta.in_dtypes[0])
            gi[idx.view(np.ndarray)] = g.ravel()
            grads.add(g0, x, gi, meta.in_dtypes[0], owned=True)
            return
        gi = np.bincount(idx, weights=g.ravel(), minlength=x)
        grads.add(g0, x, gi, meta.in_dtypes[0], owned=True)
        return
    if kind == 'put':
        if type(meta.attrs) is BasicKey:        # a piece of cat: its block of g
            gi = g.reshape(meta.attrs.shape)[meta.attrs.key]
            grads.add(g0, x, gi, meta.in_dtypes[0], owned=False)
            return
        gi = g.ravel()[meta.attrs]
        grads.add(g0, x, gi, meta.in_dtypes[0], owned=True)
        return
    if kind == 'mm':
        a, b = meta.saved['a'], meta.saved['b']
        # BLAS in the operands' dtype (float32 stays float32): cast the gradient,
        # which may have come through a float64 arena or chunk buffer
        g = g.astype(np.result_type(a.dtype, b.dtype), copy=False)
        if g0 >= 0:
            grads.add(g0, a.size, g @ b.T, meta.in_dtypes[0], owned=True)
        if g1 >= 0:
            src = _transposed_source(tape, R, g1, keep, needed)
            if src is not None:
                # b is W.t() of a large W (F.linear's weight): W's gradient
                # (a.T @ g).T is g.T @ a, which BLAS writes in W's layout; the
                # transpose record, its output left unreached, does not run
                grads.add(src[0], b.size, g.T @ a, src[1], owned=True)
            else:
                grads.add(g1, b.size, a.T @ g, meta.in_dtypes[1], owned=True)
        return
    if kind == 'where':
        # the mask (meta.attrs, flat) picks the first input's elements, else the
        # second's: selections of g in its dtype, not the kernel on float64 copies
        mask = meta.attrs
        if mask.dtype != np.bool_:
            mask = mask != 0
        gf = g.reshape(-1)
        zero = np.zeros((), gf.dtype)
        if gf.dtype.kind == 'f' and gf.flags.c_contiguous and mask.flags.c_contiguous \
                and mask.size == gf.size:
            # one compiled select each (np.where takes ~2 ns an element on an
            # AVX2 CPU: 256K float32 1.3 ms -> 60 us)
            from compiler import activation_kernels as k
            z = gf.dtype.type(0)
            if g0 >= 0:
                out = pool.empty(n, gf.dtype) if gf.nbytes >= _ALIGN_MIN else np.empty(n, gf.dtype)
                k.keep_where_fwd(mask, gf, z, out)
                grads.add(g0, n, out, meta.in_dtypes[0], owned=True)
            if g1 >= 0:
                out = pool.empty(n, gf.dtype) if gf.nbytes >= _ALIGN_MIN else np.empty(n, gf.dtype)
                k.fill_where_fwd(mask, z, gf, out)
                grads.add(g1, n, out, meta.in_dtypes[1], owned=True)
            return
        if g0 >= 0:
            grads.add(g0, n, np.where(mask, gf, zero), meta.in_dtypes[0], owned=True)
        if g1 >= 0:
            grads.add(g1, n, np.where(mask, zero, gf), meta.in_dtypes[1], owned=True)
        return
    if kind == 'bmm':
        a, b = meta.saved['a'], meta.saved['b']
        # BLAS in the operands' dtype, batch by batch (np.matmul), as for mm
        g = g.astype(np.result_type(a.dtype, b.dtype), copy=False)
        if g0 >= 0:
            grads.add(g0, a.size, np.matmul(g, np.swapaxes(b, 1, 2)), meta.in_dtypes[0],
                      owned=True)
        if g1 >= 0:
            grads.add(g1, b.size, np.matmul(np.swapaxes(a, 1, 2), g), meta.in_dtypes[1],
                      owned=True)
        return
    if kind == 'cat':
        # the output as rows (outer, wa + wb): each input gets its columns of g,
        # in g's dtype (not the kernel's float64 copies)
        wa, wb = ax, x & ((1 << 40) - 1)
        g2 = g.reshape(-1, wa + wb) if wa + wb else g.reshape(0, 0)
        if g0 >= 0:
            grads.add(g0, g2.shape[0] * wa, g2[:, :wa], meta.in_dtypes[0])
        if g1 >= 0:
            grads.add(g1, g2.shape[0] * wb, g2[:, wa:], meta.in_dtypes[1])
        return
    if (kind == 'cumsum' or kind == 'cumprod') and g0 >= 0 and ax > 0 and x > 0:
        _cum_grad(kind, meta, g, grads, g0, n, ax, x)
        return
    _via_kernel(k, R, meta, g, grads)


_cum = None


def _cum_grad(kind, meta, g, grads, g0, n, ln, inner):
    """cumsum / cumprod: a kernel along the axis on the arrays themselves (no
    private arena, no float64 copies of the saved arrays)."""
    global _cum
    if _cum is None:
        from compiler import cumgrad
        _cum = cumgrad
    dtype = meta.in_dtypes[0]
    gf = g.reshape(-1)
    bcast = gf.size > 1 and gf.strides[0] == 0
    if bcast:
        gf = gf[:1]
    elif not gf.flags.c_contiguous:
        gf = np.ascontiguousarray(gf)
    gi = np.empty(n, _float(np.dtype(dtype)))
    outer = n // (ln * inner)
    if kind == 'cumsum':
        _cum.cumsum_grad(gf, bcast, gi, outer, ln, inner)
    else:
        xs = [np.ravel(meta.saved[key]) for key in ('a', 'b', 'out') if key in meta.saved]
        _cum.cumprod_grad(gf, bcast, xs[0], xs[1], gi, outer, ln, inner)
    grads.add(g0, n, gi, dtype, owned=True)


def _filled(value, size):
    """``np.broadcast_to(np.float64(value), (size,))`` (a read-only zero-stride
    view of one float64), built directly: broadcast_to costs 3-15 us."""
    arr = np.ndarray((size,), _F64, np.array((value,), _F64), 0, (0,))
    arr.flags.writeable = False
    return arr


def _add_region(grads, slot, size, shape, key, g, dtype):
    """Add ``g`` into the region ``key`` picks of the slot's gradient (``shape``):
    in place where the slot already holds an array of its own (the other pieces
    of a split), else into zeros."""
    if slot >= BIG_BASE:
        cur = grads.big.get(slot)
        if cur is not None and cur.flags.writeable and cur.flags.c_contiguous \
                and cur.size == size:
            region = cur.reshape(shape)[key]
            region += np.reshape(g, region.shape)
            return
    gi = np.zeros(shape, dtype)
    region = gi[key]
    region[...] = np.reshape(g, region.shape)
    grads.add(slot, size, gi, dtype, owned=True)


def _transposed_source(tape, R, slot, keep, needed):
    """(slot, dtype) of W when big slot ``slot`` holds ``W.t()`` and nothing but
    the sweep reads that slot's gradient (no hook, not an input of
    autograd.grad), else None."""
    if slot < BIG_BASE or slot in keep:
        return None
    ks = np.flatnonzero(R[:, 1] == slot)
    if len(ks) != 1:
        return None
    kt = int(ks[0])
    if R[kt, 0] != _T_BIG or R[kt, 3] < 0 or (needed is not None and not needed[kt]) \
            or (tape.hooks is not None and kt in tape.hooks):
        return None
    meta = tape.big[int(R[kt, 5])]
    if type(meta.attrs) is not AxisOrder or meta.attrs != (1, 0):
        return None
    return int(R[kt, 3]), meta.in_dtypes[0]


def _via_kernel(k, R, meta, g, grads):
    """Any other kind: run the compiled kernel's own branch on a private arena.

    The record is re-laid as a small one (its output's gradient, then its
    inputs', in a local G; its saved arrays in a local V) so the one kernel
    written for the kind serves big tensors too, at the price of copies.
    """
    from ._sweep import kernel
    op, go, n, g0, g1, v, ax, x = R[k].tolist()
    sizes = [int(np.prod(s)) for s in meta.in_shapes]
    s0 = sizes[0] if g0 >= 0 else 0
    s1 = sizes[1] if g1 >= 0 and len(sizes) > 1 else 0
    LG = np.zeros(n + s0 + s1)
    LG[:n] = np.ravel(g)
    parts = [np.ravel(meta.saved[key]) for key in ('a', 'b', 'out') if key in meta.saved]
    LV = np.concatenate(parts, axis=None, dtype=np.float64) if parts else np.zeros(1)
    if meta.attrs is not None:
        LA = np.ascontiguousarray(np.ravel(meta.attrs), dtype=np.int64)
        ax = 0
    else:
        LA = np.zeros(1, np.int64)
    row = np.array([[op & ~BIG_FLAG, 0, n, n if g0 >= 0 else -1,
                     n + s0 if g1 >= 0 else -1, 0, ax, x]], dtype=np.int64)
    reach = np.zeros(n + s0 + s1 + 1, np.uint8)
    reach[0] = 1
    if kernel(row)(row, LG, LV, LA, reach, 0, -1) >= 0:
        from ._sweep import _cold       # a kernel the sweep leaves to Python
        fn = _cold().get(int(row[0, 0]))
        if fn is None or fn(row.view(np.float64), LG, LV, LA, 0, *(int(f) for f in row[0, 1:])) >= 0:
            raise NotImplementedError(f'no large-tensor rule for {RULES[op & ~BIG_FLAG].name}')
    if g0 >= 0:
        grads.add(g0, s0, LG[n:n + s0], meta.in_dtypes[0], owned=False)
    if g1 >= 0:
        grads.add(g1, s1, LG[n + s0:n + s0 + s1], meta.in_dtypes[1], owned=False)


def v_size(meta):
    s = 1
    for d in meta.in_shapes[0]:
        s *= d
    return s


_sum_axes = {}       # (g's shape, the target shape) -> the axes _sum_to reduces


def _sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (undoing broadcasting)."""
    key = (g.shape, tuple(shape) if type(shape) is not tuple else shape)
    axes = _sum_axes.get(key)
    if axes is None:
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                          if s == 1 and g.shape[i + lead] != 1)
        if len(_sum_axes) > 4096:
            _sum_axes.clear()
        _sum_axes[key] = axes
    # np.add.reduce: ndarray.sum's own reduction without its Python wrapper
    out = np.add.reduce(g, axis=axes, keepdims=True) if axes else g
    return out.reshape(shape)


# ------------------------------------------------ chunked elementwise runs
CHUNK = 32768          # elements per chunk: a few of these fit in L2
_EMPTY = np.zeros(0)
_kernels = None


def _chunk_kernels():
    global _kernels
    if _kernels is None:
        from compiler import _chunk_generated
        _kernels = _chunk_generated
    return _kernels


def sweep_chain(tape, k, R, grads, stop, keep=(), needed=None):
    """Run the big elementwise records k, k-1, ... (down to stop+1) of one size
    together, chunk by chunk; return the lowest record index handled.

    Gradients of slots made and used only inside the run stay in cache-sized
    scratch buffers, so the run streams each saved array once and writes only
    the gradients that leave it: the fused one-pass backward DESIGN.md
    measured at the memory-bandwidth floor.  ``needed`` (per record, or
    None): records off every path to autograd.grad's inputs are not run.
    """
    row = R[k].tolist()
    n = row[2]
    if k - 1 <= stop or not _continues(R, k - 1, n):
        # a lone record (``sigmoid(x).backward(g)``, the usual medium graph):
        # no run to plan
        if not grads.reached(row[1]) or (needed is not None and not needed[k]):
            return k
        rule = RULES[row[0] & ~BIG_FLAG]
        meta = tape.big[row[5]]
        for s in (row[3], row[4]):
            if s >= 0:
                grads.mark(s)
        if not meta.saved and rule.saves:
            # freed by an earlier backward
            from ._sweep import SECOND_BACKWARD
            raise RuntimeError(SECOND_BACKWARD)
        if _sweep_one(row, rule, meta, R, k, grads, n):
            return k
        if row[1] in grads.big and _sweep_fused(tape, [k], {k: row}, R.view(np.float64),
                                                grads, n, _NO_SLOTS):
            # (a broadcast output gradient: a full sum's.  The one slot the run
            # makes has a gradient, so none stays inside it: no scratch)
            return k
    RF = R.view(np.float64)
    run = []
    fields = {}                 # record -> its fields as Python ints
    produced = set()            # the run's result slots
    j = k
    while j > stop:
        # the rows as Python ints, a few at a time (one tolist, not one a row)
        lo = max(stop + 1, j - 7)
        rows = R[lo:j + 1].tolist()
        ended = False
        for row in reversed(rows):
            op = row[0]
            if not op & BIG_FLAG or row[2] != n or RULES[op & ~BIG_FLAG].kind != 'elementwise':
                ended = True
                break
            run.append(j)
            fields[j] = row
            produced.add(row[1])
            j -= 1
        if ended:
            break
    lowest = run[-1]
    # which records are reached, and which slots never leave the run
    live = []
    if type(grads) is Grads:
        # (Grads.reached and Grads.mark, inline)
        bigreach = grads.bigreach
        reach = grads.reach
        for j in run:
            row = fields[j]
            go = row[1]
            if not (go in bigreach if go >= BIG_BASE else reach[go]) \
                    or (needed is not None and not needed[j]):
                continue
            live.append(j)
            for s in (row[3], row[4]):
                if s >= BIG_BASE:
                    bigreach.add(s)
                elif s >= 0:
                    reach[s] = 1
    else:
        for j in run:
            go = fields[j][1]
            if not grads.reached(go) or (needed is not None and not needed[j]):
                continue
            live.append(j)
            for s in (fields[j][3], fields[j][4]):
                if s >= 0:
                    grads.mark(s)
    metas = tape.big
    for j in live:
        if not metas[fields[j][5]].saved and RULES[fields[j][0] & ~BIG_FLAG].saves:
            # a record this sweep needs was freed by an earlier backward
            from ._sweep import SECOND_BACKWARD
            raise RuntimeError(SECOND_BACKWARD)
    big = grads.big
    scratch_slots = {s for s in produced if s not in big and s not in keep}
    if live and _sweep_fused(tape, live, fields, RF, grads, n, scratch_slots):
        return lowest
    kern = _chunk_kernels()
    plan = []
    full = {}
    fresh = []
    for j in live:
        op = fields[j][0] & ~BIG_FLAG
        rule = RULES[op]
        meta = tape.big[fields[j][5]]
        shape = meta.out_shape
        saved = {name: _flat_as(arr, shape) for name, arr in meta.saved.items()}
        consts = [float(RF[j, f]) for f in (7, 6)]
        targets = []
        for pos, s in enumerate((fields[j][3], fields[j][4])):
            if s < 0 or pos >= len(rule.vjps) or rule.vjps[pos] is None:
                targets.append(None)
            elif s in scratch_slots:
                targets.append(('scratch', s))
            else:
                if s not in full:
                    cur = grads.big.get(s)
                    if cur is None:
                        # a gradient the run creates: pooled memory, which its
                        # first writer stores into (see below)
                        cur = pool.empty(n, np.float64)
                        fresh.append(s)
                    elif cur.dtype != np.float64 or not cur.flags.writeable:
                        cur = np.array(cur, np.float64).ravel()
                    full[s] = cur.reshape(-1)
                targets.append(('full', s))
        go = fields[j][1]
        src = ('scratch', go) if go in scratch_slots else ('full', go)
        if src[0] == 'full' and go not in full:
            g = grads.big.get(go)
            # reshape, not ravel: a broadcast (zero-stride) gradient stays a view
            full[go] = g.reshape(-1) if g is not None else np.zeros(n)
        plan.append([getattr(kern, 'vjp_' + rule.name), src, saved.get('a', _EMPTY),
                     saved.get('b', _EMPTY), saved.get('out', _EMPTY), consts, targets,
                     False, False])
    # the first writer of a gradient the run creates (a fresh full array or a
    # scratch buffer) stores instead of adding: no zero-fill, no read
    unwritten = set(scratch_slots)
    for key in [('full', s) for s in fresh] + [('scratch', s) for s in scratch_slots]:
        for entry in plan:
            if key in entry[6]:
                entry[7 + entry[6].index(key)] = True
                unwritten.discard(key[1])
                break
    scratch = {s: np.empty(min(CHUNK, n)) for s in scratch_slots}
    bcast = np.empty(min(CHUNK, n))
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        m = hi - lo
        for s in unwritten:           # read but never written: a zero gradient
            scratch[s][:m] = 0.0
        for fn, src, a, b, o, (c, d), targets, set_a, set_b in plan:
            g = scratch[src[1]][:m] if src[0] == 'scratch' else full[src[1]][lo:hi]
            if g.strides[0] == 0:         # a broadcast gradient: make the chunk real
                bcast[:m] = g[0]
                g = bcast[:m]
            views = []
            for t in targets:
                if t is None:
                    views.append(_EMPTY)
                elif t[0] == 'scratch':
                    views.append(scratch[t[1]][:m])
                else:
                    views.append(full[t[1]][lo:hi])
            fn(g, a[lo:hi] if a.size else _EMPTY, b[lo:hi] if b.size else _EMPTY,
               o[lo:hi] if o.size else _EMPTY, c, d, views[0], views[1], set_a, set_b)
    for s, arr in full.items():
        grads.big[s] = arr
    return lowest


def _continues(R, j, n):
    """Does big elementwise record j, of n elements, continue a run?"""
    op = int(R[j, 0])
    return bool(op & BIG_FLAG) and R[j, 2] == n and RULES[op & ~BIG_FLAG].kind == 'elementwise'


def _sweep_one(row, rule, meta, R, k, grads, n):
    """A lone big elementwise record: its chunk kernel over whole arrays, in their dtypes.

    No scratch, no plan, and a float32 input gets a float32 gradient without
    a float64 round trip.  Returns False, having done nothing, where the
    general path must run (a broadcast or missing output gradient).
    """
    big = grads.big
    g = big.get(row[1])
    if g is None or g.size != n or not g.flags.c_contiguous:
        return False
    kern = _vjp.get(rule.name)
    if kern is None:
        kern = _vjp[rule.name] = getattr(_chunk_kernels(), 'vjp_' + rule.name)
    vjps = rule.vjps
    in_dtypes = meta.in_dtypes
    t0 = t1 = _EMPTY
    fresh0 = fresh1 = False
    for pos in (0, 1):
        s = row[3 + pos]
        if s < 0 or pos >= len(vjps) or vjps[pos] is None:
            continue
        dtype = in_dtypes[pos] if pos < len(in_dtypes) else None
        dtype = _F64 if dtype is None else dtype
        # (x op x: the second input finds the array the first stored below)
        cur = big.get(s)
        fresh = cur is None
        if fresh:
            # (pool.empty's own small-array test, without its call)
            cur = np.empty(n, dtype) if isinstance(dtype, np.dtype) \
                and n * dtype.itemsize < _ALIGN_MIN else pool.empty(n, dtype)
        else:
            if cur.size != n or cur.dtype != dtype or not cur.flags.writeable \
                    or not cur.flags.c_contiguous:
                cur = np.array(np.broadcast_to(cur.reshape(-1), (n,)), dtype)
            cur = cur.reshape(-1)
        big[s] = cur
        if pos:
            t1, fresh1 = cur, fresh
        else:
            t0, fresh0 = cur, fresh
    saved = meta.saved
    shape = meta.out_shape
    a = saved.get('a')
    a = _EMPTY if a is None else _flat_as(a, shape)
    b = saved.get('b')
    b = _EMPTY if b is None else _flat_as(b, shape)
    o = saved.get('out')
    o = _EMPTY if o is None else _flat_as(o, shape)
    d, c = _AS_FLOATS(_AS_INTS(row[6], row[7]))   # (the fields' float64 bits)
    kern(g.reshape(-1), a, b, o, c, d, t0, t1, fresh0, fresh1)
    return True


_NO_SLOTS = frozenset()
_AS_INT = struct.Struct('q').pack
_AS_FLOAT = struct.Struct('d').unpack
_AS_INTS = struct.Struct('2q').pack
_AS_FLOATS = struct.Struct('2d').unpack
_vjp = {}       # rule name -> its chunk kernel (compiler/_chunk_generated.py)


def _flat_as(arr, shape):
    """``arr`` broadcast to ``shape``, flat (np.broadcast_to costs ~5 us: only when needed)."""
    if type(arr) is np.ndarray and arr.shape == shape:
        return arr.reshape(-1)
    if np.shape(arr) != tuple(shape):
        arr = np.broadcast_to(arr, shape)
    return np.ravel(arr)


_fuse = None
# A run's recipe (see _fused_recipe), by its key: the per-step cost of the
# fused path is then a key, a few dict reads and the kernel call, not a plan
# rebuilt and hashed per backward.  Holds no arrays (slots, dtypes, the kernel).
_recipes = {}
_recipes_of = [None, None, None]        # the fuse state the recipes were made under
MAX_RECIPES = 1024


def _fuse_module():
    global _fuse
    if _fuse is None:
        from compiler import fuse
        _fuse = fuse
    return _fuse


def _slot_state(big, s):
    """What a run's recipe depends on of slot s's gradient: 0 none, 1 an array,
    2 one value broadcast (a zero-stride view, read as ``g[:1]``)."""
    cur = big.get(s)
    if cur is None:
        return 0
    if cur.ndim != 1:
        cur = cur.reshape(-1)
    return 2 if cur.strides[0] == 0 and cur.size > 1 else 1


def _sweep_fused(tape, live, fields, RF, grads, n, scratch_slots):
    """Sweep the live records of a run in one generated pass (compiler/fuse.py).

    Returns False, having done nothing, when the run has no compiled kernel
    yet (the chunked loop in ``sweep_chain`` handles it then).
    """
    fuse = _fuse or _fuse_module()
    if len(live) > fuse.MAX_RECORDS:
        return False
    if fuse.FUSE_AFTER is None:         # (fusing off: no recipe is kept or used)
        recipe = _fused_recipe(fuse, tape, live, fields, grads, scratch_slots)
        return recipe is not None and _run_recipe(recipe, tape, live, fields, RF, grads, n)
    if _recipes_of[0] is not fuse.kernel or _recipes_of[1] is not fuse._by_plan \
            or _recipes_of[2] is not fuse._loaded or len(_recipes) > MAX_RECIPES:
        # (a test swapped fuse's caches or its kernel lookup: start over)
        _recipes.clear()
        _recipes_of[:] = fuse.kernel, fuse._by_plan, fuse._loaded
    # the key: everything the recipe depends on (the records' opcodes, slots
    # and dtypes, which saved arrays are one array, which gradients exist or
    # are broadcast, which slots stay inside the run), no values
    big = grads.big
    metas = tape.big
    ids = {}
    key = [n]
    for j in live:
        f = fields[j]
        meta = metas[f[5]]
        go, g0, g1 = f[1], f[3], f[4]
        key.append((f[0], go, g0, g1,
                    3 if go in scratch_slots else _slot_state(big, go),
                    3 if g0 in scratch_slots else (_slot_state(big, g0) if g0 >= 0 else -1),
                    3 if g1 in scratch_slots else (_slot_state(big, g1) if g1 >= 0 else -1),
                    tuple(meta.in_dtypes)))
        for name, arr in meta.saved.items():
            key.append((name, ids.setdefault(id(arr), len(ids)), getattr(arr, 'dtype', None)))
    key = tuple(key)
    recipe = _recipes.get(key)
    if recipe is None:
        recipe = _fused_recipe(fuse, tape, live, fields, grads, scratch_slots)
        if recipe is None:
            return False
        _recipes[key] = recipe
    return _run_recipe(recipe, tape, live, fields, RF, grads, n)


def _run_recipe(recipe, tape, live, fields, RF, grads, n):
    """Call a run's fused kernel on this sweep's arrays, as its recipe says."""
    big = grads.big
    metas = tape.big
    fn, ins_spec, outs_spec, saved_spec, consts_spec, zeros = recipe
    out_arrays = []
    for s, dt, fresh in outs_spec:
        if fresh:
            cur = np.empty(n, dt) if n * dt.itemsize < _ALIGN_MIN else pool.empty(n, dt)
        else:
            cur = big[s]
            if cur.dtype != dt or not cur.flags.writeable or not cur.flags.c_contiguous:
                cur = np.array(cur, dt).reshape(-1)
            else:
                cur = cur.reshape(-1)           # a view: the run adds in place
        out_arrays.append(cur)
    args = [n]
    for s, bcast in ins_spec:
        if bcast is None:
            args.append(out_arrays[s])          # the array the run adds to
        else:
            g = big[s].reshape(-1)
            args.append(g[:1] if bcast else g)
    args += out_arrays
    for i, name in saved_spec:
        meta = metas[fields[live[i]][5]]
        args.append(_flat_as(meta.saved[name], meta.out_shape))
    for i, col in consts_spec:
        args.append(float(RF[live[i], col]))
    fn(*args)
    for (s, _, _), arr in zip(outs_spec, out_arrays):
        big[s] = arr
    for s in zeros:
        big[s] = np.zeros(n)
    return True


def _fused_recipe(fuse, tape, live, fields, grads, scratch_slots):
    """How to call a run's fused kernel: (kernel, ins, outs, saved, consts, zeros)
    with ins (slot, broadcast) or (index into outs, None), outs (slot, dtype,
    fresh), saved (i, name), consts (i, R column) for the i-th live record
    (not its place on the tape, which another tape with this key may not
    share), zeros (slots given a zero gradient); None when the run has no
    compiled kernel yet."""
    run = fuse.Run()
    outs = {}                   # slot -> index into run.outs
    inner = {}                  # inner slot -> local number, in order met: the
                                # kernel must not depend on where the tape put slots
    rows = []
    out_dtypes = []             # per out: its tensor's dtype (float32 stays float32)
    for j in live:
        rule = RULES[fields[j][0] & ~BIG_FLAG]
        in_dtypes = tape.big[fields[j][5]].in_dtypes
        targets = []
        for pos, s in enumerate((fields[j][3], fields[j][4])):
            if s < 0 or pos >= len(rule.vjps) or rule.vjps[pos] is None:
                targets.append(None)
            elif s in scratch_slots:
                targets.append(('local', inner.setdefault(s, len(inner))))
            else:
                if s not in outs:
                    outs[s] = len(outs)
                    dt = in_dtypes[pos] if pos < len(in_dtypes) else None
                    out_dtypes.append(_F64 if dt is None else np.dtype(dt))
                targets.append(('out', outs[s]))
        rows.append((j, rule, tuple(targets)))
    # which arrays the run writes are fresh (stored into: no zero-fill, no read)
    out_slots = [None] * len(outs)
    for s, k in outs.items():
        out_slots[k] = s
    run.out_fresh = [grads.big.get(s) is None for s in out_slots]
    ins_spec = []
    saved_ids = {}
    saved_spec = []
    zeros = []
    consts_spec = []
    for i, (j, rule, targets) in enumerate(rows):
        go = fields[j][1]
        if go in scratch_slots:
            src = [('local', inner.setdefault(go, len(inner)))]
        else:
            src = []
            if go in outs:
                k = outs[go]
                if not run.out_fresh[k]:
                    # the existing gradient is read from the array the run adds to
                    ins_spec.append((k, None))
                    run.in_bcast.append(False)
                    src.append(('in', len(ins_spec) - 1))
                src.append(('out', k))
            else:
                g = grads.big.get(go)
                if g is None:
                    zeros.append(go)
                else:
                    g = g.reshape(-1)
                    bcast = bool(g.strides[0] == 0 and g.size > 1)
                    ins_spec.append((go, bcast))
                    run.in_bcast.append(bcast)
                    src.append(('in', len(ins_spec) - 1))
        meta = tape.big[fields[j][5]]
        saved = {}
        for name, arr in meta.saved.items():
            k = saved_ids.get(id(arr))
            if k is None:
                k = saved_ids[id(arr)] = len(saved_spec)
                saved_spec.append((i, name))
            saved[name] = k
        consts_spec += [(i, 7 if c == 'c' else 6) for c in rule.consts]
        run.records.append((rule, tuple(src), targets, tuple(sorted(saved.items()))))
    run.ins = ins_spec                  # (kernel() reads only how many)
    run.saved = saved_spec
    # all float32 (the gradients it writes, the arrays it reads): the kernel
    # may evaluate its formulas in float32, as PyTorch does (compiler/fuse.py)
    run.f32 = all(dt == _F32 for dt in out_dtypes) and all(
        getattr(tape.big[fields[live[i]][5]].saved[name], 'dtype', None) == _F32
        for i, name in saved_spec)
    fn = fuse.kernel(run)
    if fn is None:
        return None
    outs_spec = [(s, dt, fresh) for s, dt, fresh in zip(out_slots, out_dtypes, run.out_fresh)]
    return fn, tuple(ins_spec), tuple(outs_spec), tuple(saved_spec), tuple(consts_spec), \
        tuple(zeros)
