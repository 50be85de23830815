"""``tape.nn.utils.convert_parameters``: ``parameters_to_vector`` and
``vector_to_parameters`` (defined in ``tape.nn.utils``) under their PyTorch
module path."""
from . import parameters_to_vector, vector_to_parameters  # noqa: F401

__all__ = ['parameters_to_vector', 'vector_to_parameters']
