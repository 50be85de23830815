"""``tape.func.vmap``: map a function over a batch dimension, torch.func style.

This is a loop-and-stack implementation, and says so: the batched arguments
are split along their ``in_dims`` (``unbind``, a recorded op), ``func`` runs
once per batch element on the slices, and the results are put back together
with ``stack`` along ``out_dims``.  No op is batched, so it costs what the
Python loop costs (``B`` calls of ``func``), but every step is an ordinary
tape op: the result is differentiable, gradients flow from it back to the
inputs, and it composes with ``grad``, ``jacrev``, ``vjp`` and nested
``vmap`` in any order.  ``func`` may use Python control flow that depends on
the values of a slice (PyTorch's vmap refuses data-dependent control flow);
such programs are simply run per element here.

What follows torch.func: the ``in_dims``/``out_dims`` conventions (an int,
None, or a pytree of tuples, lists and dicts that is a prefix of the
arguments' / outputs' structure; negative dims; non-tensor arguments with
``None``; keyword arguments never mapped), the ValueErrors for bad
``in_dims``, mismatched batch sizes, non-tensor outputs and unbatched
outputs, a batch of size 0, and ``randomness``:

- ``'error'`` (the default): RuntimeError when ``func`` draws from tape's
  global generator (``tape.rand``, ``randn``, ``dropout``, ``nn.init`` ...),
  detected by comparing the generator's state around each call (the draw has
  happened by then; the generator is put back as it was).  Draws from an
  explicit ``tape.Generator`` or from NumPy's/Python's own generators are not
  seen.
- ``'different'``: each element draws its own numbers (the loop draws in turn).
- ``'same'``: every element sees the same numbers (the generator is reset to
  the same state before each element; afterwards it is where one call left it).

Differences from PyTorch: ``out_dims=None`` for a tensor output is accepted
when every element returned the same tensor object, or tensors equal in
value (PyTorch decides by whether the output is batched, which a loop cannot
see); ``chunk_size`` is validated and otherwise has no effect (the loop runs
one element at a time anyway).
"""
import functools

import numpy as np

from ._tensor import Tensor

__all__ = ['vmap']


def _is_node(x):
    return isinstance(x, (tuple, list, dict))


def _leaves(tree):
    if isinstance(tree, dict):
        out = []
        for v in tree.values():
            out.extend(_leaves(v))
        return out
    if isinstance(tree, (tuple, list)):
        out = []
        for v in tree:
            out.extend(_leaves(v))
        return out
    return [tree]


def _rebuild(tree, it):
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        vals = [_rebuild(v, it) for v in tree]
        if hasattr(tree, '_fields'):            # a namedtuple
            return type(tree)(*vals)
        return type(tree)(vals)
    return next(it)


def _spec(tree):
    """A short description of a pytree's structure, for error messages."""
    if isinstance(tree, dict):
        return 'dict{' + ', '.join(f'{k!r}: {_spec(v)}' for k, v in tree.items()) + '}'
    if isinstance(tree, tuple) and hasattr(tree, '_fields'):     # a namedtuple, as torch's
        return (type(tree).__name__ + '('
                + ', '.join(f'{f}={_spec(v)}' for f, v in zip(tree._fields, tree)) + ')')
    if isinstance(tree, tuple):
        return '(' + ', '.join(_spec(v) for v in tree) + (',)' if len(tree) == 1 else ')')
    if isinstance(tree, list):
        return '[' + ', '.join(_spec(v) for v in tree) + ']'
    return '*'


def _same_structure(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(
            _same_structure(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same_structure(x, y) for x, y in zip(a, b)))
    return not _is_node(b)


class _Mismatch(Exception):
    pass


def _broadcast(dims, tree):
    """One dim per leaf of ``tree``: ``dims`` is a prefix pytree of ``tree``."""
    if dims is None or not _is_node(dims):
        return [dims] * len(_leaves(tree))
    if isinstance(dims, dict):
        if not isinstance(tree, dict) or set(dims) != set(tree):
            raise _Mismatch
        out = []
        for k, v in tree.items():
            out.extend(_broadcast(dims[k], v))
        return out
    if type(dims) is not type(tree) or len(dims) != len(tree):
        if not (isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list))
                and hasattr(tree, '_fields') and isinstance(dims, tuple)
                and len(dims) == len(tree)):
            raise _Mismatch
    out = []
    for d, v in zip(dims, tree):
        out.extend(_broadcast(d, v))
    return out


def _fname(func):
    return getattr(func, '__name__', None) or repr(func)


def _global_rng():
    from . import _rng
    return _rng


_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either "
                 "use the 'same' or 'different' randomness flags on vmap or perform the "
                 "randomness operation out of vmap")


def _check_out_dims(out_dims, name):
    def ok(d):
        if d is None or (isinstance(d, int) and not isinstance(d, bool)):
            return True
        if isinstance(d, (tuple, list)):
            return all(ok(x) for x in d)
        if isinstance(d, dict):
            return all(ok(x) for x in d.values())
        return False
    if not ok(out_dims):
        raise ValueError(f'vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, '
                         'None or a python collection of ints representing where in the '
                         'outputs the vmapped dimension should appear.')


def vmap(func, in_dims=0, out_dims=0, randomness='error', *, chunk_size=None):
    """As ``torch.func.vmap``: ``func`` mapped over a dimension of its arguments.

    ``in_dims`` says, per positional argument (an int or None for all of them,
    or a tuple with one entry per argument, itself possibly a pytree matching
    the argument's tuples, lists and dicts), which dimension to map over
    (None: pass the argument whole to every call).  ``out_dims`` says where
    the mapped dimension goes in each output.  Implemented as a loop over the
    batch that calls ``func`` per element and stacks the results with tape
    ops, so the result is differentiable and transforms nest (see the module
    docstring for randomness and the few differences from PyTorch).

    >>> import tape
    >>> from tape.func import vmap
    >>> vmap(tape.dot)(tape.tensor([[1.0, 2.0], [3.0, 4.0]]), tape.tensor([[1.0, 1.0], [0.0, 1.0]]))
    tensor([3., 4.])
    >>> vmap(lambda x, w: x * w, in_dims=(1, None))(tape.ones(2, 3), tape.tensor(2.0)).shape
    tape.Size([3, 2])
    """
    if randomness not in ('error', 'different', 'same'):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f'vmap: chunk_size should be None or greater than 0. (got {chunk_size})')
    name = _fname(func)
    _check_out_dims(out_dims, name)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, name, in_dims, out_dims, randomness, args, kwargs)
    return wrapped


def _vmap_call(func, name, in_dims, out_dims, randomness, args, kwargs):
    from . import stack, zeros
    where = f'vmap({name}, in_dims={in_dims}, ...)(<inputs>)'
    if not args:
        raise ValueError(f'vmap({name})(<inputs>): got no inputs. Maybe you forgot to add '
                         'inputs, or you are trying to vmap over a function with no inputs. '
                         'The latter is unsupported.')
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f'{where}: expected `in_dims` to be int or a (potentially nested) '
                         'tuple matching the structure of inputs, got: '
                         f'{type(in_dims)}.')
    try:
        dims = _broadcast(in_dims, tuple(args))
    except _Mismatch:
        raise ValueError(f'{where}: in_dims is not compatible with the structure of `inputs`. '
                         f'in_dims has structure {_spec(in_dims)} but inputs has structure '
                         f'{_spec(tuple(args))}.') from None
    leaves = _leaves(tuple(args))
    sizes, norm = [], []
    for x, d in zip(leaves, dims):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f'{where}: Got in_dim={d} for an input but in_dim must be either '
                             'an integer dimension or None.')
        if not isinstance(x, Tensor):
            raise ValueError(f'{where}: Got in_dim={d} for an input but the input is of type '
                             f'{type(x)}. We cannot vmap over non-Tensor arguments, please use '
                             'None as the respective in_dim')
        n = x.dim()
        if not -n <= d < n:
            raise ValueError(f'{where}: Got in_dim={d} for some input, but that input is a '
                             f'Tensor of dimensionality {n} so expected in_dim to satisfy '
                             f'-{n} <= in_dim < {n}.')
        d = d % n
        norm.append(d)
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError('vmap: Expected at least one Tensor to vmap over')
    if len(set(sizes)) != 1:
        raise ValueError('vmap: Expected all tensors to have the same size in the mapped '
                         f'dimension, got sizes {sizes} for the mapped dimension')
    B = sizes[0]

    # the slices of each batched argument: one recorded unbind per argument
    if B == 0:
        pieces = [None if d is None else
                  [zeros(tuple(s for k, s in enumerate(x.shape) if k != d), dtype=x.dtype)]
                  for x, d in zip(leaves, norm)]
        count = 1
    else:
        pieces = [None if d is None else x.unbind(d) for x, d in zip(leaves, norm)]
        count = B

    rng = _global_rng()
    gen0 = rng[0]
    state0 = gen0.bit_generator.state

    def drew():
        return rng[0] is not gen0 or rng[0].bit_generator.state != state0

    results = []
    after = None
    for i in range(count):
        if randomness == 'same' and i > 0:
            rng[0] = gen0
            gen0.bit_generator.state = state0
        it = iter([x if p is None else p[i] for x, p in zip(leaves, pieces)])
        call_args = _rebuild(tuple(args), it)
        out = func(*call_args, **kwargs)
        if randomness == 'error' and drew():
            rng[0] = gen0
            gen0.bit_generator.state = state0
            raise RuntimeError(_RANDOM_ERROR)
        if randomness == 'same' and i == 0:
            after = (rng[0], rng[0].bit_generator.state)
        results.append(out)
    if randomness == 'same' and after is not None:
        rng[0] = after[0]
        after[0].bit_generator.state = after[1]

    first = results[0]
    try:
        odims = _broadcast(out_dims, first)
    except _Mismatch:
        raise ValueError(f'vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not '
                         'compatible with the structure of `outputs`. out_dims has structure '
                         f'{_spec(out_dims)} but outputs has structure {_spec(first)}.') from None
    per = []
    for r in results:
        if not _same_structure(first, r):
            raise ValueError(f'vmap({name}, ...): `{name}` returned outputs of different '
                             'structures for different elements of the batch')
        per.append(_leaves(r))
    outs = []
    for j, d in enumerate(odims):
        vals = [p[j] for p in per]
        v0 = vals[0]
        if d is None:
            if isinstance(v0, Tensor) and B > 0:
                same = all(v is v0 for v in vals) or all(
                    isinstance(v, Tensor) and v.shape == v0.shape
                    and np.array_equal(v._data, v0._data, equal_nan=True) for v in vals)
                if not same:
                    raise ValueError(f'vmap({name}, ...): `{name}` can not return a '
                                     'BatchedTensor when out_dim is None')
            outs.append(v0)
            continue
        if not isinstance(v0, Tensor) or not all(isinstance(v, Tensor) for v in vals):
            bad = next(type(v) for v in vals if not isinstance(v, Tensor))
            raise ValueError(f'vmap({name}, ...): `{name}` must only return Tensors, got type '
                             f'{bad}. Did you mean to set out_dims= to None for output?')
        n = v0.dim() + 1
        if not -n <= d < n:
            # (checked here, not by stack, for torch's message: it names no op)
            raise IndexError(f'Dimension out of range (expected to be in range of '
                             f'[{-n}, {n - 1}], but got {d})')
        if B == 0:
            shape = list(v0.shape)
            shape.insert(d % n, 0)
            outs.append(zeros(tuple(shape), dtype=v0.dtype))
        else:
            outs.append(stack(vals, dim=d))
    return _rebuild(first, iter(outs))
