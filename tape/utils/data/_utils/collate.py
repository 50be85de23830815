"""``torch.utils.data._utils.collate``: tape's collate functions (defined in
``tape/utils/data/_collate.py``) under PyTorch's module path.

>>> import tape
>>> from tape.utils.data._utils.collate import collate, default_collate_fn_map
>>> collate([(1, 'a'), (2, 'b')], collate_fn_map=default_collate_fn_map)
[tensor([1, 2]), ('a', 'b')]
"""
from .._collate import (collate, collate_float_fn, collate_int_fn,  # noqa: F401
                        collate_numpy_array_fn, collate_numpy_scalar_fn, collate_str_fn,
                        collate_tensor_fn, default_collate, default_collate_err_msg_format,
                        default_collate_fn_map, default_convert, np_str_obj_array_pattern)
