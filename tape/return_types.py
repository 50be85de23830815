"""``tape.return_types``: the named tuples that ops return, as ``torch.return_types``.

``torch.max(x, 1)`` returns a ``torch.return_types.max``: a tuple with named
fields (``values``, ``indices``) that prints one field a line.  ``make`` builds
each type once and keeps it as an attribute of this module, so a result
pickles by name and ``type(r).__name__`` is the op's name, as in PyTorch.
"""
import collections

__all__ = []


def make(name, fields):
    """The return type ``name`` with ``fields``, made on first use."""
    cls = globals().get(name)
    if isinstance(cls, type) and issubclass(cls, tuple):
        if cls._fields != tuple(fields):
            raise TypeError(f'return_types.{name} exists with fields {cls._fields}, '
                            f'not {tuple(fields)}')
        return cls

    def __repr__(self):
        body = ',\n'.join(f'{f}={v!r}' for f, v in zip(self._fields, self))
        return f'tape.return_types.{name}(\n{body})'

    cls = type(name, (collections.namedtuple(name, fields),),
               {'__slots__': (), '__repr__': __repr__, '__str__': __repr__,
                '__module__': __name__, '__qualname__': name})
    globals()[name] = cls
    __all__.append(name)
    return cls


_VALUES_INDICES = {}


def values_indices(name, values, indices):
    """``torch.return_types.<name>(values, indices)`` (max, min, sort, topk,
    kthvalue, median, mode, cummax, ...)."""
    cls = _VALUES_INDICES.get(name)
    if cls is None:
        cls = _VALUES_INDICES[name] = make(name, ('values', 'indices'))
    return cls(values, indices)
