"""The differentiable sweep: backward recorded as ops, for ``create_graph=True``.

It walks the same records as the compiled sweep, in the same order, but
computes each vector-Jacobian product with Tensor ops, so the backward itself
lands on the tape and can be differentiated again, to any order.

Every slot's gradient is kept as a flat 1-D Tensor of the slot's size: records
know sizes, not shapes, and elementwise rules do not care.  Structural rules
use the index maps and sizes stored in the record's attributes.

Elementwise rules evaluate the very formula text that ``compiler/codegen.py``
turns into the Numba kernel (``tape/_rules.py``); the helper functions those
formulas call are defined here for Tensors.
"""
import math

import numpy as np

from . import _elementwise as _ew
from . import _linalg
from . import _ops
from . import _reductions as _red
from . import _shapes as _shape
from ._big import BIG as _BIG, BIG_FLAG, AxisOrder, BasicKey
from ._rules import OP, RULES
from ._tape import inplace_epoch, resolve
from ._tensor import Tensor, _leaf, _TNEW

_CAT_WB = (1 << 40) - 1     # a cat record's wb, below its count (tape/_rules.py)


# ---------------------------------------------------- formula functions
def _const_like(x, values):
    return _leaf(np.asarray(values, dtype=np.result_type(x._data, np.float32)))


def _data(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


def _mask_of(args, values):
    """``values`` (a mask or a piecewise constant computed from ``args``) as a
    Tensor: a function of the first argument that requires grad, with zero
    derivative, so that a gradient made of it stays in the graph and its own
    derivative is 0, as PyTorch's backward of relu or hardtanh gives (not an
    error for a tensor that does not require grad)."""
    like = next((x for x in args if isinstance(x, Tensor)), None)
    if like is None:
        return float(values)
    c = _const_like(like, values)
    src = next((x for x in args if isinstance(x, Tensor) and x._rg), None)
    if src is None:
        return c
    return _ew.where(np.ones(np.shape(c._data), bool), c, src)


def _step(x):
    return _mask_of((x,), (_data(x) > 0).astype(np.float64))


def _sign(x):
    # kept in the graph (derivative 0) like PyTorch's sgn(x): abs's gradient then
    # requires grad, and a second grad gives zeros rather than an error
    return _mask_of((x,), np.sign(_data(x))) if isinstance(x, Tensor) else float(np.sign(x))


def _ge_half(x, y):
    dx, dy = _data(x), _data(y)
    return _mask_of((x, y), np.where(dx > dy, 1.0, np.where(dx == dy, 0.5, 0.0)))


def _pow_grad(x, y):
    if not isinstance(y, Tensor):
        if y == 0:
            return _ops.mul(x, 0.0)
        # x ** 1.0 is recorded even though its value is x: PyTorch's gradient
        # of x**2 is 2 * x.pow(1), whose own gradient x.pow(0) still depends
        # on x, so every derivative of a power requires grad until it is 0
        return _ops.mul(_ops.pow_(x, y - 1.0), y)
    return _ops.mul(y, _ops.pow_(x, _ops.sub(y, 1.0)))


def _xlogy_safe(out, x):
    mask = (_data(x) == 0) & (_data(out) <= 1)
    if not np.any(mask):
        return _ops.mul(out, _ops.log(x))
    safe_x = _ops.add(x, _const_like(x, mask.astype(np.float64)))   # log(1) = 0 where masked
    return _ops.mul(_ops.mul(out, _ops.log(safe_x)), _const_like(x, ~mask))


def _abs(x):
    return _ops.abs_(x)


def _piecewise_const(npf, on_numbers=None):
    # floor/trunc/ge/eq have zero derivative; ``on_numbers`` computes one of
    # plain numbers (a rule's constant: eq(c, 0.0)) without NumPy's overhead
    def f(*args):
        if on_numbers is not None and not any(isinstance(x, Tensor) for x in args):
            return on_numbers(*args)
        return _mask_of(args, npf(*(_data(x) for x in args)))
    return f


def _where_pos(cond, x, y):
    if not isinstance(cond, Tensor):
        return x if cond > 0 else y
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        return _mask_of((cond,), np.where(_data(cond) > 0, x, y))    # leaky_relu's slope
    dt = np.result_type(cond._data, np.float32)       # constants keep the values' precision
    x = x if isinstance(x, Tensor) else _leaf(np.asarray(x, dt))
    y = y if isinstance(y, Tensor) else _leaf(np.asarray(y, dt))
    out = _ew.where(_data(cond) > 0, x, y)
    if not out._rg and cond._rg:
        # a gradient selected by a mask (relu's, clamp's) stays a function of the
        # mask's input with zero derivative, as PyTorch's does (see _mask_of)
        out = _ew.where(np.ones(np.shape(out._data), bool), out, cond)
    return out


def _scalar_ok(tensor_fn, math_fn):
    # a formula may apply a function to a constant (log(c)): compute it in float64
    def f(x, *rest):
        if isinstance(x, Tensor) or rest:
            return tensor_fn(x, *rest)
        return math_fn(float(x))
    return f


def _inv0(x):
    if not isinstance(x, Tensor):
        return 1.0 / x if x != 0 else 0.0
    zero = _data(x) == 0
    if not np.any(zero):
        return _ew.reciprocal(x)
    safe = _ops.add(x, _const_like(x, zero.astype(np.float64)))     # 1/1 where masked
    return _ops.mul(_ew.reciprocal(safe), _const_like(x, (~zero).astype(np.float64)))


def _zero(x):
    return _const_like(x, np.zeros(np.shape(_data(x)))) if isinstance(x, Tensor) else 0.0


def _kernels():
    import compiler.kernels
    return compiler.kernels


FORMULA_NAMESPACE = {
    'exp': _scalar_ok(_ops.exp, math.exp), 'log': _scalar_ok(_ops.log, math.log),
    'sqrt': _scalar_ok(_ops.sqrt, math.sqrt), 'sin': _scalar_ok(_ops.sin, math.sin),
    'cos': _scalar_ok(_ops.cos, math.cos), 'tanh': _scalar_ok(_ops.tanh, math.tanh),
    'sigmoid': _scalar_ok(_ops.sigmoid, lambda v: 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0),
    'abs': _abs, 'pow': _ops.pow_,
    'step': _step, 'sign': _sign, 'ge_half': _ge_half, 'pow_grad': _pow_grad,
    'xlogy_safe': _xlogy_safe,
    'sinh': _scalar_ok(_ew.sinh, math.sinh), 'cosh': _scalar_ok(_ew.cosh, math.cosh),
    'erf': _scalar_ok(_ew.erf, math.erf),
    'floor': _piecewise_const(np.floor), 'trunc': _piecewise_const(np.trunc),
    'ge': _piecewise_const(lambda x, y: (np.asarray(x) >= y).astype(np.float64),
                           lambda x, y: float(x >= y)),
    'eq': _piecewise_const(lambda x, y: (np.asarray(x) == y).astype(np.float64),
                           lambda x, y: float(x == y)),
    'where_pos': _where_pos, 'inv0': _inv0, 'zero': _zero,
    'digamma': lambda x: _ew.digamma(x) if isinstance(x, Tensor) else _kernels().digamma(float(x)),
    'polygamma': lambda n, x: (_ew.polygamma(n, x) if isinstance(x, Tensor)
                               else _kernels().polygamma(float(n), float(x))),
}
_COMPILED = {}


def _formula(text):
    code = _COMPILED.get(text)
    if code is None:
        code = _COMPILED[text] = compile(text, '<rule>', 'eval')
    return code


_PYTHON = OP['python']

# Per elementwise opcode, how its recorded backward runs: each formula compiled
# once into a function of (grad, *saves, *consts) (a call costs less than
# eval with a fresh env dict), and each save's row field (where its slot is).
_SAVE_FIELD = {'a': 0, 'b': 1, 'out': 2}   # index into (g0, g1, go)
_PLANS = {}


def _elementwise_plan(op, rule):
    plan = _PLANS.get(op)
    if plan is None:
        params = ('grad',) + tuple(rule.saves) + tuple(rule.consts)
        fns = []
        for formula in rule.vjps:
            if formula is None:
                fns.append(None)
            elif formula.strip() == 'grad':
                fns.append(True)            # the output's gradient itself, no call
            else:
                src = f"lambda {', '.join(params)}: ({formula})"
                fns.append(eval(compile(src, '<rule>', 'eval'), FORMULA_NAMESPACE))  # noqa: S307
        plan = _PLANS[op] = (tuple(_SAVE_FIELD[name] for name in rule.saves),
                             tuple(zip(rule.consts, (7, 6))), tuple(fns))
    return plan


# ------------------------------------------------------------- handles
def _handle(tape, slot, value, leaf_of):
    """A Tensor for ``slot`` holding ``value`` (flat), wired into the graph."""
    if slot < 0:
        return _leaf(value)
    leaf = leaf_of.get(slot)
    if leaf is not None and leaf._data.size == np.size(value):
        # record a flattening view of the leaf straight onto this tape
        return _ops._record_struct(OP['view'], leaf, np.reshape(leaf._data, -1), on_tape=tape,
                                   in_slot=slot)
    t = _TNEW(Tensor)
    t._data = value
    t._rg = True
    t._tape = tape
    t._goff = slot
    t._rec = -1
    return t


def _flat(t):
    if t._data.ndim == 1:
        return t
    return _shaped(t, (-1,))


def _product(op, a, b):
    """A matrix product of a gradient and a saved operand: the gradient may be
    float64 where the operand is float32 (see README), and the products take
    one dtype, so the narrower side is widened first."""
    da, db = a._data.dtype, b._data.dtype
    if da != db:
        dt = np.promote_types(da, db)
        a = a if da == dt else _ops.to(a, dt)
        b = b if db == dt else _ops.to(b, dt)
    return op(a, b)


def _add(acc, slot, g):
    cur = acc.get(slot)
    acc[slot] = g if cur is None else _ops.add(cur, g)


# ------------------------------------------------------------ the sweep
class _Sweep:
    """A marker of one differentiable sweep, held weakly by what must run once in it.
    ``pruned``: records off every path to the inputs are not run, so an output
    without a gradient may have been used."""
    __slots__ = ('pruned', '__weakref__')


def backward_differentiable(outputs, grad_tensors, seeds, retain_graph, inputs):
    """Backward from ``outputs`` with Tensor ops.  Accumulates into leaves' ``.grad``
    (``inputs is None``) or returns the gradients of ``inputs``."""
    from . import _graph_task
    _graph_task.enter()
    try:
        result = _backward_differentiable(outputs, grad_tensors, seeds, retain_graph, inputs)
    except BaseException:
        _graph_task.leave()
        if _graph_task.pending[0]:
            _graph_task.abort()
        raise
    _graph_task.leave()
    if _graph_task.pending[0]:
        _graph_task.finish()        # hooks that act once per backward
    return result


def _backward_differentiable(outputs, grad_tensors, seeds, retain_graph, inputs):
    from ._sweep import SECOND_BACKWARD, _graph_of, needed_for, pack
    gts = list(grad_tensors) if grad_tensors is not None else [None] * len(outputs)
    # everything the sweep touches must sit on one tape before it starts
    tape = _graph_of(list(outputs) + [g for g in gts if isinstance(g, Tensor) and g._rg])
    if tape is not None:
        if any(o._tape is tape and tape.is_dead(o._rec) for o in outputs):
            raise RuntimeError(SECOND_BACKWARD)
        R, V, A = pack(tape)
    acc = {}
    leaf_roots = []
    for o, g, seed in zip(outputs, gts, seeds):
        # a seed made here is only ever used flat: make it flat (no reshape record)
        gt = g if isinstance(g, Tensor) else _leaf(np.full(o._data.size, seed, o._data.dtype)
                                                   if type(seed) is float else
                                                   seed.astype(o._data.dtype).reshape(-1))
        if o._tape is None:
            leaf_roots.append((o, gt))
            continue
        if o._tape.alias is not None:
            resolve(o)
        _add(acc, o._goff, _flat(gt))
    if tape is not None:
        RF = R.view(np.float64)
        if tape.epoch != inplace_epoch[0]:
            # conservatively, every record counts (before the sweep appends its own)
            tape.check_versions(R, np.ones(len(R), bool))
        leaf_of = {}
        for leaf, s in tape.leaves:
            leaf_of.setdefault(s, leaf)
        start = max(o._rec for o in outputs if o._tape is tape)
        hooks = tape.hooks
        dead = tape.dead_mask()     # records an earlier backward freed (None: none)
        # with inputs, only the records on a path to them run (PyTorch's engine)
        needed = needed_for(tape, R, inputs) if inputs is not None else None
        # plain lists: indexing them per record costs less than NumPy scalars
        rows = R[:start + 1].tolist()
        if needed is not None:
            needed = needed[:start + 1].tolist()
        if dead is not None:
            dead = dead[:start + 1].tolist()
        # records that made an input: not run when off every path, but the input's
        # own tensor hooks (and retain_grad) still see its gradient, as in PyTorch
        ends = {x._rec for x in inputs if x._tape is tape} if needed is not None else ()
        sweep = _Sweep()        # (split pieces' hooks run once a sweep: NodeHooks.ran)
        sweep.pruned = needed is not None
        for k in range(start, -1, -1):
            if needed is not None and not needed[k]:
                if k in ends and hooks is not None and k in hooks:
                    from ._node_hooks import run_pieces_differentiable
                    for h in list(hooks[k].values()):
                        if h.slot not in acc:
                            continue
                        if h.node is not None and h.node.spans:
                            run_pieces_differentiable(h.node, acc, sweep)
                        elif h.fns or h.retain is not None:
                            acc[h.slot] = h.run_differentiable(acc[h.slot])
                continue
            row = rows[k]
            if row[0] != _PYTHON:
                # a record whose result got no gradient contributes nothing
                g = acc.get(row[1])
                reached = g is not None and g._data.size == row[2]
            else:
                reached = True      # it checks its own outputs' slots
            if dead is not None and dead[k] and reached and row[0] != _PYTHON:
                raise RuntimeError(SECOND_BACKWARD)     # it would read freed values
            if hooks is not None and k in hooks:
                from ._node_hooks import run_record_differentiable
                if run_record_differentiable(hooks[k], tape, k, R, RF, V, A, acc, leaf_of,
                                             sweep):
                    continue        # node hooks ran the record themselves
                reached = True      # the hooks may have changed acc: let the record look
            if reached:
                _record_vjp(tape, k, R, RF, V, A, acc, leaf_of, row)
        if not retain_graph:
            from ._sweep import release
            slots = np.array([s for s in acc if isinstance(s, int)], dtype=np.int64)
            used = np.isin(R[:, 1], slots)
            release(tape, used if needed is None else used & needed, R)
    for o, gt in leaf_roots:
        _add(acc, ('leaf', id(o)), _flat(gt))
    if inputs is not None:
        return [_gradient_of(tape, x, acc) for x in inputs]
    if tape is not None:
        seen = {}
        for leaf, s in tape.leaves:
            g = acc.get(s)
            if g is not None:
                seen[id(leaf)] = (leaf, g if id(leaf) not in seen else _ops.add(seen[id(leaf)][1], g))
        for leaf, g in seen.values():
            _accumulate_tensor(leaf, g)
    for o, gt in leaf_roots:
        _accumulate_tensor(o, _flat(gt))
    return None


def _shaped(g, shape):
    """The flat gradient ``g`` given its input's shape.  Records know sizes, not
    shapes, so a small one is the same slot seen with that shape: no view record,
    and its ``grad_fn`` is the op that computed it (``MulBackward0``, as PyTorch
    shows) rather than the flattening's ``ViewBackward0``.  A large record keeps
    its arrays' shapes, so a large gradient gets a real reshape."""
    if (g._tape is None or g._data.size >= _BIG or type(g) is not Tensor
            or type(g._data) is not np.ndarray or not g._data.flags.c_contiguous):
        return _ops.reshape(g, shape)     # a copy's memory is no longer the slot's
    t = _TNEW(Tensor)
    t._data = np.reshape(g._data, shape)
    t._rg = g._rg
    t._tape = g._tape
    t._goff = g._goff
    t._rec = g._rec
    return t


def _gradient_of(tape, x, acc):
    g = None
    if x._tape is not None and x._tape is tape:
        g = acc.get(x._goff)
    elif tape is not None:
        for leaf, s in tape.leaves:
            if leaf is x and s in acc:
                g = acc[s] if g is None else _ops.add(g, acc[s])
    leaf_g = acc.get(('leaf', id(x)))
    if leaf_g is not None:
        g = leaf_g if g is None else _ops.add(g, leaf_g)
    if g is None:
        return None
    if g._data.shape != x._data.shape:
        g = _shaped(g, x._data.shape)
    if g._data.dtype != x._data.dtype and x._data.dtype.kind == 'f':
        g = _ops.to(g, x._data.dtype)       # computed in float64 (see README), returned as x's
    if x._tape is None and x._extra is not None and x._extra.get('hooks'):
        from ._hooks import run_leaf_hooks  # a leaf's tensor hooks see what grad() returns
        g = run_leaf_hooks(x, g, grad_enabled=True, tensor_hooks_only=True)
    return g


def _accumulate_tensor(leaf, g):
    from ._hooks import run_leaf_hooks
    if not leaf._rg:                # stopped requiring grad after the graph was built
        return
    if g._data.shape != leaf._data.shape:
        g = _shaped(g, leaf._data.shape)
    g = run_leaf_hooks(leaf, g, grad_enabled=True)
    if g is None:
        return
    if g._data.dtype != leaf._data.dtype:
        g = _ops.to(g, leaf._data.dtype)
    cur = leaf._grad
    leaf._grad = g if cur is None else _ops.add(cur, g)
    if leaf._extra is not None and 'post_accumulate' in leaf._extra:
        from ._hooks import run_post_accumulate_hooks
        run_post_accumulate_hooks(leaf)


def _out_grad(acc, go, n):
    """The gradient of a record's result (slot ``go``, ``n`` elements), or None."""
    g = acc.get(go)
    return g if g is not None and g._data.size == n else None


def _record_vjp(tape, k, R, RF, V, A, acc, leaf_of, row=None):
    op, go, n, g0, g1, v, ax, x = R[k].tolist() if row is None else row
    if op == _PYTHON:       # n is 0: the record checks its own outputs' slots
        tape.py[ax].backward_differentiable(acc, tape, leaf_of)
        return
    g = _out_grad(acc, go, n)
    if g is None:
        return
    if op in _PLANS:        # an elementwise rule seen before (the common case)
        fields, consts, fns = _PLANS[op]
        args = [g]
        if fields:
            slots = (g0, g1, go)
            for f in fields:
                args.append(_handle(tape, slots[f], V[v:v + n], leaf_of))
                v += n
        for _name, f in consts:
            args.append(float(RF[k, f]))
        for slot, fn in zip((g0, g1), fns):
            if slot < 0 or fn is None:
                continue
            gi = g if fn is True else fn(*args)
            if not isinstance(gi, Tensor):
                gi = _leaf(np.full(n, gi))
            cur = acc.get(slot)
            acc[slot] = gi if cur is None else _ops.add(cur, gi)
        return
    raw = (op, v)           # where the record's saved arrays are (_saved_operands)
    if op & BIG_FLAG:
        # a big record keeps its saved arrays and index maps in tape.big;
        # lay them out as a small record's V and A would hold them
        op &= ~BIG_FLAG
        V, A, v, ax = _big_as_small(tape.big[v], RULES[op], ax)
    rule = RULES[op]
    kind = rule.kind
    if kind == 'python':
        tape.py[ax].backward_differentiable(acc, tape, leaf_of)
        return
    if kind == 'elementwise' and not raw[0] & BIG_FLAG:   # compile its plan, then run it
        _elementwise_plan(op, rule)
        _record_vjp(tape, k, R, RF, V, A, acc, leaf_of, (op, go, n, g0, g1, v, ax, x))
        return
    if kind == 'elementwise':
        env = {'grad': g}
        pos = 0
        for name in rule.saves:
            value = V[v + pos * n:v + (pos + 1) * n]
            slot = {'a': g0, 'b': g1, 'out': go}[name]
            env[name] = _handle(tape, slot, value, leaf_of)
            pos += 1
        for name, field in zip(rule.consts, (7, 6)):
            env[name] = float(RF[k, field])
        for j, formula in enumerate(rule.vjps):
            slot = (g0, g1)[j]
            if slot < 0 or formula is None:
                continue
            gi = eval(_formula(formula), FORMULA_NAMESPACE, env)  # noqa: S307 (table text)
            if not isinstance(gi, Tensor):
                gi = _leaf(np.full(n, gi))
            _add(acc, slot, gi)
        return
    if kind == 'sum_all':
        c = float(RF[k, 7])
        gi = _ops.expand(g if g._data.shape == (1,) else _ops.reshape(g, 1), v)
        if c != 1.0:
            gi = _ops.mul(gi, c)
        _add(acc, g0, gi)
        return
    if kind == 'reduce':
        c = float(RF[k, 7])
        idx = _broadcast_map(A, ax, v)
        gi = _ops.take_flat(g, idx)
        if c != 1.0:
            gi = _ops.mul(gi, c)
        _add(acc, g0, gi)
        return
    if kind == 'lse':
        idx = _broadcast_map(A, ax, x)
        xs = _handle(tape, g0, V[v:v + x], leaf_of)
        out = _handle(tape, go, V[v + x:v + x + n], leaf_of)
        gi = _ops.mul(_ops.take_flat(g, idx),
                      _ops.exp(_ops.sub(xs, _ops.take_flat(out, idx))))
        _add(acc, g0, gi)
        return
    if kind == 'expand':
        if x == 1:
            _add(acc, g0, _ops.reshape(_ops.sum_(g), 1))
        else:
            _add(acc, g0, _ops.put_flat(g, _broadcast_map(A, ax, n), x))
        return
    if kind == 'identity':
        _add(acc, g0, g)
        return
    if kind == 'take':
        _add(acc, g0, _ops.put_flat(g, A[ax:ax + n], x))
        return
    if kind == 'put':
        _add(acc, g0, _ops.take_flat(g, A[ax:ax + x]))
        return
    if kind == 'mm':
        m, kk = ax, x
        if m:
            nn = n // m
        else:       # an empty a: the result's size says nothing of b's; its saved array does
            ops = _saved_operands(tape, raw, lambda a, b: a.shape == (0, kk) and b.ndim == 2
                                  and b.shape[0] == kk)
            nn = 0 if ops is None else ops[1].shape[1]
        g2 = _ops.reshape(g, m, nn)
        if g0 >= 0:
            hb = _handle(tape, g1, V[v + m * kk:v + m * kk + kk * nn], leaf_of)
            _add(acc, g0, _shaped(_product(_ops.mm, g2, _ops.t(_ops.reshape(hb, kk, nn))),
                                  (-1,)))
        if g1 >= 0:
            ha = _handle(tape, g0, V[v:v + m * kk], leaf_of)
            _add(acc, g1, _shaped(_product(_ops.mm, _ops.t(_ops.reshape(ha, m, kk)), g2),
                                  (-1,)))
        return
    if kind == 'where':
        mask = A[ax:ax + n] != 0
        if g0 >= 0:
            _add(acc, g0, _ew.where(mask, g, 0.0))
        if g1 >= 0:
            _add(acc, g1, _ew.where(mask, 0.0, g))
        return
    if kind in ('cumsum', 'cumprod'):
        ln, inner = ax, x
        outer = n // (ln * inner) if n else 0
        g3 = _ops.reshape(g, outer, ln, inner)
        if kind == 'cumsum':       # a reversed cumsum along the axis
            _add(acc, g0, _ops.reshape(_shape.flip(_red.cumsum(_shape.flip(g3, 1), 1), 1), -1))
        else:
            _add(acc, g0, _cumprod_vjp(_handle(tape, g0, V[v:v + n], leaf_of), g3,
                                       outer, ln, inner))
        return
    if kind == 'bmm':
        m, kk, nn = ax, x >> 32, x & 0xFFFFFFFF
        if n:
            bb = n // (m * nn)
        else:       # an empty result says nothing of the batch; the saved operands do
            ops = _saved_operands(tape, raw, lambda a, b: a.ndim == 3 and b.ndim == 3 and
                                  a.shape[1:] == (m, kk) and b.shape == (a.shape[0], kk, nn))
            bb = 0 if ops is None else ops[0].shape[0]
        g3 = _ops.reshape(g, bb, m, nn)
        sa, sb = bb * m * kk, bb * kk * nn
        if g0 >= 0:
            hb = _ops.reshape(_handle(tape, g1, V[v + sa:v + sa + sb], leaf_of), bb, kk, nn)
            _add(acc, g0, _shaped(_product(_linalg.bmm, g3, _ops.transpose(hb, 1, 2)), (-1,)))
        if g1 >= 0:
            ha = _ops.reshape(_handle(tape, g0, V[v:v + sa], leaf_of), bb, m, kk)
            _add(acc, g1, _shaped(_product(_linalg.bmm, _ops.transpose(ha, 1, 2), g3), (-1,)))
        return
    if kind == 'cat':         # each input's columns of g, seen as (outer, wa + wb)
        wa, wb = ax, x & _CAT_WB
        w = wa + wb
        outer = n // w if w else 0
        g2 = _ops.reshape(g, outer, w)
        if g0 >= 0:
            _add(acc, g0, _ops.reshape(_ops.getitem(g2, (slice(None), slice(0, wa))), -1))
        if g1 >= 0:
            _add(acc, g1, _ops.reshape(_ops.getitem(g2, (slice(None), slice(wa, w))), -1))
        return
    raise NotImplementedError(f'create_graph: no differentiable rule for kind {kind!r} '
                              f'({rule.name})')


def _big_as_small(meta, rule, ax):
    """(V, A, v, ax) equivalents of a big record's saved values and attributes."""
    kind = rule.kind
    if kind == 'elementwise':
        parts = [np.ravel(np.broadcast_to(meta.saved[name], meta.out_shape))
                 for name in rule.saves]
        return (np.concatenate(parts) if parts else np.zeros(0)), None, 0, 0
    if kind == 'mm':          # ax holds m
        return np.concatenate([np.ravel(meta.saved['a']), np.ravel(meta.saved['b'])]), None, 0, ax
    if kind in ('take', 'put', 'where'):     # the index map (where: the mask)
        idx = meta.attrs
        if type(idx) is AxisOrder:          # a transpose keeps its axis order only
            from ._ops import flat_index
            idx = np.transpose(flat_index(tuple(meta.in_shapes[0])), idx)
        elif type(idx) is BasicKey:         # a basic-indexing key: the map it picks
            idx = idx.index_map()
        return None, np.ascontiguousarray(np.ravel(idx), dtype=np.int64), 0, 0
    if kind in ('cumprod', 'bmm'):      # saves a and b (cumprod: input and output)
        return np.concatenate([np.ravel(meta.saved['a']), np.ravel(meta.saved['b'])]), \
            None, 0, ax
    if kind in ('cumsum', 'cat'):       # ax holds L (cat: wa), x the rest: nothing else
        return None, None, 0, ax
    in_shape = tuple(meta.in_shapes[0])
    if kind == 'lse':         # the input, then the output (kept dims), as a small record
        from ._ops import _broadcast_attrs
        V = np.concatenate([np.ravel(meta.saved['a']), np.ravel(meta.saved['b'])])
        return V, _broadcast_attrs(in_shape, tuple(meta.attrs)), 0, 0
    if kind == 'sum_all':
        return None, None, int(math.prod(in_shape)), 0
    if kind == 'reduce':
        big, small = in_shape, tuple(meta.attrs)
    elif kind == 'expand':
        big, small = tuple(meta.out_shape), in_shape
    else:
        return None, None, 0, 0
    from ._ops import _broadcast_attrs
    A = _broadcast_attrs(big, small)
    return None, A, int(math.prod(in_shape)) if kind == 'reduce' else 0, 0


def _saved_operands(tape, raw, like):
    """The arrays (with their shapes) that a matrix product (mm, bmm) saved, for
    a product with an empty operand or result, whose record's sizes leave a
    dimension open.  ``like(a, b)`` says whether two arrays fit the record.

    A small record's values sit in ``tape.saved`` at offset v; zero-size
    arrays of other records may sit there too, so the pair is the one that
    fits, one with values before an empty one (only this record's operands
    can start at v and hold values).  None when both are empty (the open
    dimension then changes no gradient's size)."""
    op, v = raw             # the record's opcode and v field, as recorded
    if op & BIG_FLAG:
        saved = tape.big[v].saved
        if 'a' not in saved:
            from ._sweep import SECOND_BACKWARD
            raise RuntimeError(SECOND_BACKWARD)
        return saved['a'], saved['b']
    pos = tape.freed[0] if tape.freed is not None else 0
    arrays = tape.saved
    for i in range(len(arrays) - 1):
        if pos > v:
            break
        a, b = arrays[i], arrays[i + 1]
        if pos == v and type(a) is np.ndarray and type(b) is np.ndarray \
                and (a.size or b.size) and like(a, b):
            return a, b
        pos += np.size(a)
    return None


def _cumprod_vjp(xflat, g3, outer, ln, inner):
    """d/dx of cumprod, written with ops so it can be differentiated again.

    grad_x[i] = sum_{j >= i} g[j] * P[i, j] with P[i, j] = prod_{k <= j, k != i} x[k]:
    P is a cumprod along j of x with x[i] replaced by 1 in row i.  No division,
    so zeros need no special case; O(L^2) memory, which only create_graph pays.
    """
    x4 = _ops.reshape(xflat, outer, 1, ln, inner)
    eye = np.eye(ln, dtype=bool)[None, :, :, None]
    p = _red.cumprod(_ew.where(eye, 1.0, x4), 2)
    upper = np.triu(np.ones((ln, ln), dtype=bool))[None, :, :, None]      # j >= i
    w = _ew.where(upper, _ops.mul(p, _ops.reshape(g3, outer, 1, ln, inner)), 0.0)
    return _shaped(_ops.sum_(w, 2), (-1,))


def _broadcast_map(A, ax, count):
    """For i < count (elements of the big array), the index into the small one."""
    nd = int(A[ax])
    shape = [int(s) for s in A[ax + 1:ax + 1 + nd]]
    strides = np.asarray(A[ax + 1 + nd:ax + 1 + 2 * nd], dtype=np.int64)
    if nd == 0:
        return np.zeros(count, np.int64)
    idx = np.indices(shape).reshape(nd, -1)
    return (idx * strides[:, None]).sum(axis=0).astype(np.int64)
