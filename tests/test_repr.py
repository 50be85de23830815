"""repr(Tensor) is PyTorch's repr, character for character.

Each case builds the same tensor in both libraries from the same NumPy data and
compares the two reprs, with torch's dtype names written as tape's
(``dtype=tape.float64``).  Skipped without torch.
"""
import numpy as np
import pytest

import tape

_rng = np.random.default_rng(0)
_R = _rng.standard_normal

# name -> (NumPy data, dtype name or None for the constructor's default)
_DATA = {
    # floats: integer-valued, fixed 4 decimals, scientific
    'int_valued': ([1.0, 2.0, -3.0], None),
    'int_valued_wide': ([1.0, -200.0, 30.0], None),
    'zeros': ([0.0, 0.0], None),
    'neg_zero': ([-0.0, 1.0], None),
    'fractional': ([0.1, 0.25, 1 / 3], None),
    'fractional_neg': ([-0.1, 12.5, 3.0], None),
    'ratio_999': ([1.5, 999.0 * 1.5], None),
    'ratio_1001': ([1.0, 1001.0], None),
    'ratio_1001_frac': ([1.5, 1001.5], None),
    'sci_small': ([1e-5, 1.0], None),
    'sci_tiny_only': ([1e-5, 2e-5], None),
    'sci_big': ([1e9, 1.0], None),
    'big_int_valued': ([1e8, 1.0], None),
    'just_over_1e8': ([1.5e8, 2e8], None),
    'sci_negative': ([-1e-6, 3.0, 250.0], None),
    'threshold_min_1e-4': ([1e-4, 2e-4], None),
    # non-finite values
    'inf_mixed': ([float('inf'), 1.0, -2.5], None),
    'nan_inf_int_valued': ([float('inf'), 1.0, float('nan')], None),
    'only_nonfinite': ([float('nan'), float('-inf')], None),
    'nan_with_zero': ([float('nan'), 0.0], None),
    'inf_sci': ([float('inf'), 1e-7, 1.0], None),
    # 0-d
    '0d': (3.25, None),
    '0d_neg': (-0.5, None),
    '0d_int_valued': (4.0, None),
    '0d_sci': (1e-9, None),
    '0d_nan': (float('nan'), None),
    '0d_int': (7, 'int64'),
    '0d_bool': (True, 'bool'),
    # other dtypes
    'float64': ([0.1, 0.25], 'float64'),
    'float64_precise': ([1 / 3, 2 / 3, 1e-3], 'float64'),
    'float16': ([0.1, 2.0], 'float16'),
    'int64': ([3, -4], 'int64'),
    'int64_wide': ([1, -12345, 7], 'int64'),
    'int32': ([3, -4], 'int32'),
    'uint8': ([3, 250], 'uint8'),
    'bool': ([True, False], 'bool'),
    'bool_all_true': ([True, True], 'bool'),
    'bool_2d': ([[True, False], [False, True]], 'bool'),
    # shapes and line wrapping at 80 columns
    'row_2d': ([[1.5, 2.0]], None),
    '2d': ([[1.0, 2.0], [3.0, 4.0]], None),
    '2d_frac': (_R((3, 4)), None),
    '3d': (_R((2, 3, 2)), None),
    '4d': (np.arange(16.0).reshape(2, 2, 2, 2), None),
    'long_row': (np.arange(30) / 7, None),
    'long_row_int': (np.arange(40), 'int64'),
    'long_row_2d': (_R((3, 20)), None),
    'long_row_3d': (_R((2, 2, 15)), None),
    'long_row_sci': (np.arange(1, 21) * 1e-6, None),
    'long_bool': (np.arange(20) % 3 == 0, 'bool'),
    'long_float64': (_R(25), 'float64'),
    # summarized beyond 1000 elements, edgeitems=3
    'summarized': (np.arange(2000.0), None),
    'summarized_int': (np.arange(1001), 'int64'),
    'summarized_frac': (np.arange(1500) / 3, None),
    'summarized_2d': (np.arange(2000.0).reshape(40, 50), None),
    'summarized_2d_narrow': (_R((500, 3)), None),
    'summarized_2d_wide': (_R((3, 500)), None),
    'summarized_3d': (np.arange(3000.0).reshape(10, 10, 30) / 7, None),
    'summarized_edges_decide_format': (np.r_[np.arange(3.0), np.full(1000, 0.5), [4, 5, 6]],
                                        None),
    'summarized_bool': (np.arange(1200) % 2 == 0, 'bool'),
    'exactly_1000': (np.arange(1000.0), None),
}


def _make(m, data, dtype, requires_grad=False):
    dt = None if dtype is None else getattr(m, dtype)
    arr = np.asarray(data)
    if dtype is None:
        arr = arr.astype(np.float32)
        dt = m.float32
    return m.tensor(arr.tolist(), dtype=dt, requires_grad=requires_grad)


def _same(fn, torch):
    want = repr(fn(torch)).replace('torch.', 'tape.')
    got = repr(fn(tape))
    assert got == want, f'\n--- tape:\n{got}\n--- torch:\n{want}'


@pytest.mark.parametrize('name', list(_DATA))
def test_repr_matches_torch(name, torch_or_skip):
    data, dtype = _DATA[name]
    _same(lambda m: _make(m, data, dtype), torch_or_skip)


_FLOATS = [n for n, (d, dt) in _DATA.items()
           if (dt is None or dt.startswith('float')) and np.ndim(d) > 0]


@pytest.mark.parametrize('name', _FLOATS)
def test_repr_with_requires_grad_matches_torch(name, torch_or_skip):
    data, dtype = _DATA[name]
    _same(lambda m: _make(m, data, dtype, requires_grad=True), torch_or_skip)


@pytest.mark.parametrize('name', _FLOATS)
def test_repr_with_grad_fn_matches_torch(name, torch_or_skip):
    data, dtype = _DATA[name]
    _same(lambda m: _make(m, data, dtype, requires_grad=True) * 1, torch_or_skip)


_BUILT = [
    ('empty', lambda m: m.zeros(0)),
    ('empty_2d', lambda m: m.zeros(2, 0)),
    ('empty_int', lambda m: m.zeros(0, dtype=m.int64)),
    ('empty_float64_2d', lambda m: m.zeros(0, 3, dtype=m.float64)),
    ('empty_requires_grad', lambda m: m.zeros(0, 2, requires_grad=True)),
    ('ones_3x4', lambda m: m.ones(3, 4)),
    ('ones_3x4_requires_grad', lambda m: m.ones(3, 4, requires_grad=True)),
    ('ones_3x4_grad_fn', lambda m: m.ones(3, 4, requires_grad=True).add(m.zeros(3, 4))),
    ('zeros_2x3_float64', lambda m: m.zeros(2, 3, dtype=m.float64)),
    ('float64_grad_fn_long', lambda m: m.arange(12, dtype=m.float64, requires_grad=True) / 7),
    ('suffix_wraps', lambda m: (m.arange(9, dtype=m.float64, requires_grad=True) / 7).sum(0)),
    ('int_arange', lambda m: m.arange(10)),
    ('arange_2000', lambda m: m.arange(2000, dtype=m.float32)),
    ('arange_2000_grad_fn', lambda m: m.arange(2000, dtype=m.float32, requires_grad=True) * 2),
    ('sum_0d_grad_fn', lambda m: (m.tensor([1.5, 2.0], requires_grad=True) * 2).sum()),
    ('eye', lambda m: m.eye(3)),
    ('transposed', lambda m: m.arange(6, dtype=m.float32).view(2, 3).t()),
    ('linspace', lambda m: m.linspace(-1, 1, 9)),
]


@pytest.mark.parametrize('fn', [pytest.param(f, id=n) for n, f in _BUILT])
def test_repr_of_built_tensors_matches_torch(fn, torch_or_skip):
    _same(fn, torch_or_skip)


def test_str_is_repr():
    x = tape.ones(2, 2, requires_grad=True)
    assert str(x) == repr(x)


def test_repr_multiline_suffix_on_last_line():
    x = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert repr(x) == 'tensor([[1., 2.],\n        [3., 4.]], requires_grad=True)'


def test_repr_follows_default_dtype(torch_or_skip):
    torch = torch_or_skip
    old_tape, old_torch = tape.get_default_dtype(), torch.get_default_dtype()
    try:
        tape.set_default_dtype(tape.float64)
        torch.set_default_dtype(torch.float64)
        for fn in (lambda m: m.tensor([0.5, 1.0]), lambda m: m.tensor([0.5], dtype=m.float32),
                   lambda m: m.zeros(0), lambda m: m.zeros(0, dtype=m.float32)):
            _same(fn, torch)
    finally:
        tape.set_default_dtype(old_tape)
        torch.set_default_dtype(old_torch)
