"""Graph nodes for ``grad_fn``: made on demand, so recording never pays for them."""
from ._rules import RULES


class Node:
    """The backward of one record, as ``tensor.grad_fn`` shows it."""
    __slots__ = ('_tape', '_rec', '__weakref__')

    def __init__(self, tape, rec):
        self._tape = tape
        self._rec = rec

    def _rule(self):
        return RULES[self._tape.record(self._rec)[0]]

    def name(self):
        return self._rule().node

    def __repr__(self):
        return f'<{self.name()} object at {id(self):#x}>'


def node_for(t):
    from ._tape import resolve
    tape = t._tape
    if tape.alias is not None:
        tape = resolve(t)
    return Node(tape, t._rec)
