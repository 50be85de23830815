"""The reverse sweep driver: pack a tape, run the compiled sweep, deliver gradients.

``run`` turns the tape's lists into three arrays (``R`` records, ``V`` saved
values, ``A`` integer attributes) and calls the one Numba kernel in
``compiler/_sweep_generated.py`` over the gradient arena ``G``.  The kernel
returns to Python only at records that need it (custom Functions, hooks, large
matrix products); Python runs that record and calls the kernel again from the
next one.  Without ``retain_graph`` the tape is released afterwards and a
second backward raises; with it, the packed arrays are kept so the next sweep
starts at once (the sweep never writes to them: each sweep gets a fresh ``G``,
which is the "clone" of the tape's mutable state).
"""
import numpy as np

from ._rules import RULES
from ._tape import REC, resolve
from ._tensor import Tensor, _leaf

SECOND_BACKWARD = (
    'Trying to backward through the graph a second time (or directly access saved tensors '
    'after they have already been freed). Saved intermediate values of the graph are freed '
    'when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to '
    'backward through the graph a second time or if you need to access saved tensors after '
    'calling backward.')

_EMPTY_F = np.zeros(1)
_EMPTY_I = np.zeros(1, dtype=np.int64)
_kernel = None


def kernel():
    """The compiled sweep, imported (and compiled or loaded from cache) on first use."""
    global _kernel
    if _kernel is None:
        from compiler._sweep_generated import sweep
        _kernel = sweep
    return _kernel


class _Pool:
    """Reused G and reach buffers: allocation is slow here, zero-filling is not."""
    __slots__ = ('G', 'reach', 'busy')

    def __init__(self):
        self.G = np.zeros(0)
        self.reach = np.zeros(0, np.uint8)
        self.busy = False

    def take(self, n):
        if self.busy:                 # a Python record started a nested backward
            return np.zeros(n), np.zeros(n, np.uint8), False
        if self.G.size < n:
            size = max(n, 2 * self.G.size, 1024)
            self.G = np.zeros(size)
            self.reach = np.zeros(size, np.uint8)
            G, reach = self.G[:n], self.reach[:n]
        else:
            G, reach = self.G[:n], self.reach[:n]
            G.fill(0.0)
            reach.fill(0)
        self.busy = True
        return G, reach, True


_pool = _Pool()


def pack(tape):
    packed = tape.packed
    if packed is not None and packed[0] == tape.n:
        return packed[1:]
    R = np.array(tape.rec, dtype=np.int64).reshape(-1, REC)
    V = np.concatenate(tape.saved, axis=None, dtype=np.float64) if tape.saved else _EMPTY_F
    A = np.concatenate(tape.attrs, axis=None, dtype=np.int64) if tape.attrs else _EMPTY_I
    C = np.array(tape.consts, dtype=np.float64) if tape.consts else _EMPTY_F
    return R, V, A, C


def _graph_of(roots):
    tape = None
    for r in roots:
        t = r._tape
        if t is None:
            continue
        if t.alias is not None:
            t = resolve(r)
        if tape is None:
            tape = t
        elif t is not tape:
            from ._tape import merge
            older, younger = (tape, t) if tape.serial < t.serial else (t, tape)
            merge(older, younger)
            tape = older
            for x in roots:
                if x._tape is not None:
                    resolve(x)
    return tape


def _python_record(tape, k, R, G, V, A, reach):
    rule = RULES[R[k, 0]]
    if rule.kind == 'mm':
        go, g0, g1, v, ax = R[k, 1], R[k, 3], R[k, 4], R[k, 5], R[k, 6]
        m, kk, nn = A[ax], A[ax + 1], A[ax + 2]
        gout = G[go:go + m * nn].reshape(m, nn)
        if g0 >= 0:
            b = V[v + m * kk:v + m * kk + kk * nn].reshape(kk, nn)
            G[g0:g0 + m * kk] += (gout @ b.T).ravel()
        if g1 >= 0:
            a = V[v:v + m * kk].reshape(m, kk)
            G[g1:g1 + kk * nn] += (a.T @ gout).ravel()
        return
    tape.py[R[k, 6]].backward(G, reach)


def run(roots, grads, retain_graph, inputs=None, accumulate=True):
    """Sweep the tape of ``roots`` seeded with ``grads`` (arrays, one per root).

    Accumulates into the ``.grad`` of reached leaves when ``accumulate``; returns
    the gradients of ``inputs`` (None where unreached) when given.
    """
    tape = _graph_of(roots)
    if tape is None:
        # every root is a leaf: its gradient is the seed itself
        return _leaf_only(roots, grads, inputs, accumulate)
    if tape.released:
        raise RuntimeError(SECOND_BACKWARD)
    tape.check_versions()
    R, V, A, C = pack(tape)
    G, reach, pooled = _pool.take(tape.gpos)
    try:
        start = -1
        for r, g in zip(roots, grads):
            if r._tape is None:
                continue
            s = r._goff
            G[s:s + g.size] += g.ravel()
            reach[s] = 1
            if r._rec > start:
                start = r._rec
        sweep = kernel()
        k = start
        while k >= 0:
            k = sweep(R, G, V, A, C, reach, k, -1)
            if k < 0:
                break
            _python_record(tape, k, R, G, V, A, reach)
            k -= 1
        result = None
        if inputs is not None:
            result = [_grad_of(tape, x, G, reach) for x in inputs]
        if accumulate:
            _deliver(tape, G, reach)
        for r, g in zip(roots, grads):
            if r._tape is None and accumulate:
                _accumulate(r, g)
    finally:
        if pooled:
            _pool.busy = False
    if retain_graph:
        tape.packed = (tape.n, R, V, A, C)
    else:
        release(tape)
    return result


def release(tape):
    tape.released = True
    tape.saved = []
    tape.attrs = []
    tape.consts = []
    tape.packed = None


def _grad_of(tape, x, G, reach):
    if x._tape is tape:
        s = x._goff
        if not reach[s]:
            return None
        return G[s:s + x._data.size].reshape(x._data.shape).astype(x._data.dtype)
    total = None
    for leaf, s in tape.leaves:
        if leaf is x and reach[s]:
            g = G[s:s + x._data.size]
            total = g.copy() if total is None else total + g
    if total is None:
        return None
    return total.reshape(x._data.shape).astype(x._data.dtype)


def _deliver(tape, G, reach):
    for leaf, s in tape.leaves:
        if reach[s]:
            d = leaf._data
            _accumulate(leaf, G[s:s + d.size].reshape(d.shape))


def _accumulate(leaf, g):
    d = leaf._data
    cur = leaf._grad
    if cur is None:
        leaf._grad = _leaf(np.array(g, dtype=d.dtype, copy=True).reshape(d.shape))
    else:
        cd = cur._data
        if type(cd) is np.ndarray and cd.flags.writeable:
            cd += g.reshape(cd.shape)
        else:
            cur._data = np.asarray(cd + g.reshape(np.shape(cd)), dtype=d.dtype)


def _leaf_only(roots, grads, inputs, accumulate):
    for r, g in zip(roots, grads):
        if accumulate and r._rg:
            _accumulate(r, g)
    if inputs is None:
        return None
    out = []
    for x in inputs:
        tot = None
        for r, g in zip(roots, grads):
            if r is x:
                tot = g.copy() if tot is None else tot + g
        out.append(None if tot is None else tot.reshape(x._data.shape).astype(x._data.dtype))
    return out
