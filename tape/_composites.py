"""Ops written in the primitives (no rule of their own): their gradients come
from the records of the primitives they are made of.

``FUNCTIONS`` are exported as ``tape.<name>``, ``METHODS`` bound as
``Tensor.<name>`` (see the end of tape/__init__.py).
"""

FUNCTIONS = {}
METHODS = {}
