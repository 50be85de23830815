"""``torch.testing`` for tape: ``assert_close``, ``assert_allclose`` and ``make_tensor``.

The comparison rules and messages follow ``torch/testing/_comparison.py``: the same
pair types (``None``, booleans, Python/NumPy numbers, tensor-likes), the same
recursion through sequences and mappings, the same default tolerances per dtype and
the same ``AssertionError`` text (with ``tape`` in place of ``torch`` where a dtype or
a ``Size`` is printed).

>>> import tape
>>> from tape.testing import assert_close
>>> assert_close(tape.tensor([1.0, 2.0]), tape.tensor([1.0, 2.0 + 1e-7]))
>>> assert_close(tape.tensor([1.0, 4.0, 5.0]), tape.tensor([1.0, 2.0, 3.0]))
Traceback (most recent call last):
...
AssertionError: Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 2 / 3 (66.7%)
Greatest absolute difference: 2.0 at index (1,) (up to 1e-05 allowed)
Greatest relative difference: 1.0 at index (1,) (up to 1.3e-06 allowed)
"""
import cmath
import collections.abc
import contextlib
import functools
import math
import warnings

import numpy as np

__all__ = ['assert_close', 'assert_allclose', 'make_tensor']


def _tape():
    import tape
    return tape


def _fmt_dtype(dt):
    """``tape.float32`` (torch prints ``torch.float32``; a tape dtype is NumPy's)."""
    try:
        return f'tape.{np.dtype(dt).name}'
    except TypeError:
        return str(dt)


# {dtype: (rtol, atol)} as torch's table (tape has no bfloat16 / complex32 / quantized)
_DTYPE_PRECISIONS = {
    np.dtype(np.float16): (0.001, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    np.dtype(np.complex64): (1.3e-6, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-7),
}


class ErrorMeta(Exception):
    """Internal: carries the error type and message until ``assert_close`` raises it."""

    def __init__(self, type, msg, *, id=()):  # noqa: A002
        super().__init__('internal tape.testing error; use ErrorMeta.to_error()')
        self.type = type
        self.msg = msg
        self.id = id

    def to_error(self, msg=None):
        if not isinstance(msg, str):
            generated_msg = self.msg
            if self.id:
                generated_msg += ("\n\nThe failure occurred for item "
                                  f"{''.join(str([item]) for item in self.id)}")
            msg = msg(generated_msg) if callable(msg) else generated_msg
        return self.type(msg)


def default_tolerances(*inputs, dtype_precisions=None):
    """The loosest default ``(rtol, atol)`` of the inputs' dtypes (torch's table)."""
    Tensor = _tape().Tensor
    dtypes = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            dtypes.append(np.dtype(inp.dtype))
        else:
            try:
                dtypes.append(np.dtype(inp))
            except TypeError:
                raise TypeError(f'Expected a torch.Tensor or a torch.dtype, but got {type(inp)} '
                                'instead.') from None
    dtype_precisions = dtype_precisions or _DTYPE_PRECISIONS
    rtols, atols = zip(*[dtype_precisions.get(d, (0.0, 0.0)) for d in dtypes])
    return max(rtols), max(atols)


def get_tolerances(*inputs, rtol, atol, id=()):  # noqa: A002
    if (rtol is None) ^ (atol is None):
        raise ErrorMeta(ValueError,
                        "Both 'rtol' and 'atol' must be either specified or omitted, "
                        f"but got no {'rtol' if rtol is None else 'atol'}.", id=id)
    if rtol is not None and atol is not None:
        return rtol, atol
    return default_tolerances(*inputs)


def _make_mismatch_msg(*, default_identifier, identifier=None, extra=None, abs_diff,
                       abs_diff_idx=None, atol, rel_diff, rel_diff_idx=None, rtol):
    equality = rtol == 0 and atol == 0

    def make_diff_msg(*, type, diff, idx, tol):  # noqa: A002
        if idx is None:
            msg = f'{type.title()} difference: {diff}'
        else:
            msg = f'Greatest {type} difference: {diff} at index {idx}'
        if not equality:
            msg += f' (up to {tol} allowed)'
        return msg + '\n'

    if identifier is None:
        identifier = default_identifier
    elif callable(identifier):
        identifier = identifier(default_identifier)
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f'{extra.strip()}\n'
    msg += make_diff_msg(type='absolute', diff=abs_diff, idx=abs_diff_idx, tol=atol)
    msg += make_diff_msg(type='relative', diff=rel_diff, idx=rel_diff_idx, tol=rtol)
    return msg.strip()


def make_scalar_mismatch_msg(actual, expected, *, rtol, atol, identifier=None):
    abs_diff = abs(actual - expected)
    rel_diff = float('inf') if expected == 0 else abs_diff / abs(expected)
    return _make_mismatch_msg(default_identifier='Scalars', identifier=identifier,
                              extra=f'Expected {expected} but got {actual}.',
                              abs_diff=abs_diff, atol=atol, rel_diff=rel_diff, rtol=rtol)


def _max_with_index(values):
    i = int(np.argmax(values))  # first maximum; a NaN counts as the maximum, as torch.max
    return values[i].item(), i


def make_tensor_mismatch_msg(actual, expected, matches, *, rtol, atol, identifier=None):
    """``actual``, ``expected``: NumPy arrays of one dtype; ``matches``: their bool mask."""
    shape = matches.shape

    def unravel(flat):
        if not shape:
            return ()
        return tuple(int(i) for i in np.unravel_index(flat, shape))

    n = matches.size
    total_mismatches = n - int(matches.sum())
    extra = (f'Mismatched elements: {total_mismatches} / {n} '
             f'({total_mismatches / n:.1%})')
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    m = matches.reshape(-1)
    floating = a.dtype.kind in 'fc'
    if not floating:
        a = a.astype(np.int64)
        e = e.astype(np.int64)
    with np.errstate(all='ignore'):
        abs_diff = np.abs(a - e)
        abs_diff[m] = 0
        max_abs, abs_idx = _max_with_index(abs_diff)
        denom = np.abs(e)
        if floating:
            rel_diff = abs_diff / denom
        else:  # torch's true division of int64 tensors gives the default float32
            rel_diff = abs_diff.astype(np.float32) / denom.astype(np.float32)
        rel_diff[m] = 0
        max_rel, rel_idx = _max_with_index(rel_diff)
    return _make_mismatch_msg(default_identifier='Tensor-likes', identifier=identifier,
                              extra=extra, abs_diff=max_abs, abs_diff_idx=unravel(abs_idx),
                              atol=atol, rel_diff=max_rel, rel_diff_idx=unravel(rel_idx),
                              rtol=rtol)


class UnsupportedInputs(Exception):
    """A pair type cannot handle the inputs; the next one is tried."""


class Pair:
    def __init__(self, actual, expected, *, id=(), **unknown_parameters):  # noqa: A002
        self.actual = actual
        self.expected = expected
        self.id = id
        self._unknown_parameters = unknown_parameters

    @staticmethod
    def _inputs_not_supported():
        raise UnsupportedInputs

    @staticmethod
    def _check_inputs_isinstance(*inputs, cls):
        if not all(isinstance(i, cls) for i in inputs):
            Pair._inputs_not_supported()

    def _fail(self, type, msg, *, id=()):  # noqa: A002
        raise ErrorMeta(type, msg, id=self.id if not id and hasattr(self, 'id') else id)

    def compare(self):
        raise NotImplementedError

    def extra_repr(self):
        return []

    def __repr__(self):
        body = [f'    {name}={value!s},' for name, value in
                [('id', self.id), ('actual', self.actual), ('expected', self.expected),
                 *[(x, getattr(self, x)) for x in self.extra_repr()]]]
        return '\n'.join((f'{type(self).__name__}(', *body, ')'))


class NonePair(Pair):
    def __init__(self, actual, expected, **other_parameters):
        if not (actual is None or expected is None):
            self._inputs_not_supported()
        super().__init__(actual, expected, **other_parameters)

    def compare(self):
        if not (self.actual is None and self.expected is None):
            self._fail(AssertionError, f'None mismatch: {self.actual} is not {self.expected}')


class BooleanPair(Pair):
    def __init__(self, actual, expected, *, id, **other_parameters):  # noqa: A002
        self._check_inputs_isinstance(actual, expected, cls=(bool, np.bool_))
        actual, expected = (bool(x) for x in (actual, expected))
        super().__init__(actual, expected, **other_parameters)

    def compare(self):
        if self.actual is not self.expected:
            self._fail(AssertionError, f'Booleans mismatch: {self.actual} is not {self.expected}')


class NumberPair(Pair):
    _TYPE_TO_DTYPE = {int: np.dtype(np.int64), float: np.dtype(np.float64),
                      complex: np.dtype(np.complex128)}
    _NUMBER_TYPES = tuple(_TYPE_TO_DTYPE)

    def __init__(self, actual, expected, *, id=(), rtol=None, atol=None,  # noqa: A002
                 equal_nan=False, check_dtype=False, **other_parameters):
        self._check_inputs_isinstance(actual, expected, cls=(*self._NUMBER_TYPES, np.number))
        actual, expected = (x.item() if isinstance(x, np.number) else x
                            for x in (actual, expected))
        super().__init__(actual, expected, id=id, **other_parameters)
        self.rtol, self.atol = get_tolerances(
            *[self._TYPE_TO_DTYPE[type(x)] for x in (actual, expected)],
            rtol=rtol, atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_dtype = check_dtype

    def compare(self):
        if self.check_dtype and type(self.actual) is not type(self.expected):
            self._fail(AssertionError, f'The (d)types do not match: {type(self.actual)} != '
                                       f'{type(self.expected)}.')
        if self.actual == self.expected:
            return
        if self.equal_nan and cmath.isnan(self.actual) and cmath.isnan(self.expected):
            return
        abs_diff = abs(self.actual - self.expected)
        tolerance = self.atol + self.rtol * abs(self.expected)
        if cmath.isfinite(abs_diff) and abs_diff <= tolerance:
            return
        self._fail(AssertionError, make_scalar_mismatch_msg(
            self.actual, self.expected, rtol=self.rtol, atol=self.atol))

    def extra_repr(self):
        return ('rtol', 'atol', 'equal_nan', 'check_dtype')


def _isclose(a, b, rtol, atol, equal_nan):
    """``torch.isclose`` on two NumPy arrays of one dtype."""
    with np.errstate(all='ignore'):
        close = a == b
        floating = a.dtype.kind in 'fc'
        if floating and equal_nan:
            close = close | (np.isnan(a) & np.isnan(b))
        if (not floating and rtol == 0 and atol == 0) or a.dtype.kind == 'b':
            return close
        if not floating:
            a, b = a.astype(np.float64), b.astype(np.float64)
        allowed = atol + np.abs(rtol * b)
        err = np.abs(a - b)
        return close | (np.isfinite(err) & (err <= allowed))


class TensorLikePair(Pair):
    def __init__(self, actual, expected, *, id=(), allow_subclasses=True,  # noqa: A002
                 rtol=None, atol=None, equal_nan=False, check_device=True, check_dtype=True,
                 check_layout=True, check_stride=False, **other_parameters):
        tape = _tape()
        related = isinstance(actual, type(expected)) or isinstance(expected, type(actual))
        if not related:
            self._inputs_not_supported()
        if not allow_subclasses and type(actual) is not type(expected):
            self._inputs_not_supported()
        actual, expected = (self._to_tensor(tape, x) for x in (actual, expected))
        super().__init__(actual, expected, id=id, **other_parameters)
        self.rtol, self.atol = get_tolerances(actual, expected, rtol=rtol, atol=atol,
                                              id=self.id)
        self.equal_nan = equal_nan
        self.check_device = check_device
        self.check_dtype = check_dtype
        self.check_layout = check_layout
        self.check_stride = check_stride

    def _to_tensor(self, tape, x):
        if isinstance(x, tape.Tensor):
            return x
        try:
            return tape.as_tensor(x)
        except Exception:
            self._inputs_not_supported()

    def compare(self):
        a, e = self.actual, self.expected
        self._compare_attributes(a, e)
        self._compare_values(*self._equalize_attributes(a, e))

    def _compare_attributes(self, a, e):
        def mismatch(name, av, ev):
            self._fail(AssertionError,
                       f"The values for attribute '{name}' do not match: {av} != {ev}.")

        if a.shape != e.shape:
            mismatch('shape', a.shape, e.shape)
        if a.layout != e.layout:
            if self.check_layout:
                mismatch('layout', a.layout, e.layout)
        elif self.check_stride and a.stride() != e.stride():
            mismatch('stride()', a.stride(), e.stride())
        if self.check_device and a.device != e.device:
            mismatch('device', a.device, e.device)
        if self.check_dtype and a.dtype != e.dtype:
            mismatch('dtype', _fmt_dtype(a.dtype), _fmt_dtype(e.dtype))

    def _equalize_attributes(self, a, e):
        ad = np.asarray(a.detach()._data)
        ed = np.asarray(e.detach()._data)
        if ad.dtype != ed.dtype:
            t1 = np.dtype(np.int64) if ad.dtype in (np.uint16, np.uint32, np.uint64) else ad.dtype
            t2 = np.dtype(np.int64) if ed.dtype in (np.uint16, np.uint32, np.uint64) else ed.dtype
            try:
                dt = np.dtype(_tape().promote_types(t1, t2))
            except Exception:
                dt = np.promote_types(t1, t2)
            ad, ed = ad.astype(dt), ed.astype(dt)
        return ad, ed

    def _compare_values(self, a, e):
        matches = _isclose(a, e, self.rtol, self.atol, self.equal_nan)
        if np.all(matches):
            return
        if a.shape == ():
            msg = make_scalar_mismatch_msg(a.item(), e.item(), rtol=self.rtol, atol=self.atol)
        else:
            msg = make_tensor_mismatch_msg(a, e, matches, rtol=self.rtol, atol=self.atol)
        self._fail(AssertionError, msg)

    def extra_repr(self):
        return ('rtol', 'atol', 'equal_nan', 'check_device', 'check_dtype', 'check_layout',
                'check_stride')


def originate_pairs(actual, expected, *, pair_types,
                    sequence_types=(collections.abc.Sequence,),
                    mapping_types=(collections.abc.Mapping,), id=(), **options):  # noqa: A002
    if (isinstance(actual, sequence_types) and not isinstance(actual, str)
            and isinstance(expected, sequence_types) and not isinstance(expected, str)):
        if len(actual) != len(expected):
            raise ErrorMeta(AssertionError, 'The length of the sequences mismatch: '
                                            f'{len(actual)} != {len(expected)}', id=id)
        pairs = []
        for idx in range(len(actual)):
            pairs.extend(originate_pairs(actual[idx], expected[idx], pair_types=pair_types,
                                         sequence_types=sequence_types,
                                         mapping_types=mapping_types, id=(*id, idx),
                                         **options))
        return pairs
    if isinstance(actual, mapping_types) and isinstance(expected, mapping_types):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise ErrorMeta(AssertionError,
                            'The keys of the mappings do not match:\n'
                            f'Missing keys in the actual mapping: '
                            f'{sorted(expected_keys - actual_keys)}\n'
                            f'Additional keys in the actual mapping: '
                            f'{sorted(actual_keys - expected_keys)}', id=id)
        keys = actual_keys
        with contextlib.suppress(Exception):
            keys = sorted(keys)
        pairs = []
        for key in keys:
            pairs.extend(originate_pairs(actual[key], expected[key], pair_types=pair_types,
                                         sequence_types=sequence_types,
                                         mapping_types=mapping_types, id=(*id, key),
                                         **options))
        return pairs
    for pair_type in pair_types:
        try:
            return [pair_type(actual, expected, id=id, **options)]
        except UnsupportedInputs:
            continue
        except ErrorMeta:
            raise
        except Exception as error:
            raise RuntimeError(
                f"Originating a {pair_type.__name__}() at item "
                f"{''.join(str([item]) for item in id)} with\n\n"
                f"{type(actual).__name__}(): {actual}\n\nand\n\n"
                f"{type(expected).__name__}(): {expected}\n\n"
                "resulted in the unexpected exception above.") from error
    raise ErrorMeta(TypeError, 'No comparison pair was able to handle inputs of type '
                               f'{type(actual)} and {type(expected)}.', id=id)


def not_close_error_metas(actual, expected, *, pair_types=(), sequence_types=(
        collections.abc.Sequence,), mapping_types=(collections.abc.Mapping,), **options):
    __tracebackhide__ = True
    try:
        pairs = originate_pairs(actual, expected, pair_types=pair_types,
                                sequence_types=sequence_types, mapping_types=mapping_types,
                                **options)
    except ErrorMeta as error_meta:
        raise error_meta.to_error() from None
    error_metas = []
    for pair in pairs:
        try:
            pair.compare()
        except ErrorMeta as error_meta:
            error_metas.append(error_meta)
        except Exception as error:
            raise RuntimeError(f'Comparing\n\n{pair}\n\nresulted in the unexpected exception '
                               'above.') from error
    return error_metas


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    r"""Assert that ``actual`` and ``expected`` are close (``torch.testing.assert_close``).

    Tensors are close when ``|actual - expected| <= atol + rtol * |expected|``
    elementwise (``inf`` only equal to itself, ``NaN`` equal only with
    ``equal_nan=True``) and their shape, device, dtype (``check_dtype``), layout
    (``check_layout``) and stride (``check_stride``, off by default) match.  Default
    tolerances follow torch's table: float16 ``(1e-3, 1e-5)``, float32
    ``(1.3e-6, 1e-5)``, float64 ``(1e-7, 1e-7)``, complex64 ``(1.3e-6, 1e-5)``,
    complex128 ``(1e-7, 1e-7)``, others ``(0, 0)``; with two dtypes the looser one.
    Python numbers (``int``/``float``/``complex`` as int64/float64/complex128),
    NumPy numbers and arrays, and nested sequences/mappings are compared like torch.
    ``msg`` replaces the message (a ``str``) or rewrites it (a callable).

    >>> import tape
    >>> assert_close(1.0, 1, check_dtype=False)
    >>> assert_close(tape.tensor(float('nan')), tape.tensor(float('nan')), equal_nan=True)
    >>> assert_close(tape.tensor([1.0]), tape.tensor([2.0]), msg='Argh!')
    Traceback (most recent call last):
    ...
    AssertionError: Argh!
    """
    __tracebackhide__ = True
    error_metas = not_close_error_metas(
        actual, expected, pair_types=(NonePair, BooleanPair, NumberPair, TensorLikePair),
        allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
        check_device=check_device, check_dtype=check_dtype, check_layout=check_layout,
        check_stride=check_stride, msg=msg)
    if error_metas:
        raise error_metas[0].to_error(msg)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=''):
    """Deprecated (``torch.testing.assert_allclose``): warns ``FutureWarning`` and calls
    ``assert_close`` with its old defaults (``equal_nan=True``, ``check_dtype=False``,
    looser tolerances: float16 ``(1e-3, 1e-3)``, float32 ``(1e-4, 1e-5)``, float64
    ``(1e-5, 1e-8)``)."""
    warnings.warn(
        '`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a '
        'future release. Please use `torch.testing.assert_close()` instead. You can find '
        'detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.',
        FutureWarning, stacklevel=2)
    tape = _tape()
    if not isinstance(actual, tape.Tensor):
        actual = tape.tensor(actual)
    if not isinstance(expected, tape.Tensor):
        expected = tape.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = default_tolerances(actual, expected, dtype_precisions={
            np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1e-4, 1e-5),
            np.dtype(np.float64): (1e-5, 1e-8)})
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, check_stride=False, msg=msg or None)


# ------------------------------------------------------------------ make_tensor
def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` filled with values drawn uniformly from ``[low, high)``
    (``torch.testing.make_tensor``), from tape's default generator (``manual_seed``).

    Defaults: bool ``[0, 2)``, unsigned ``[0, 10)``, signed integers ``[-9, 10)``,
    floating ``[-9, 9)``; bounds outside the dtype's range are clamped.
    ``noncontiguous=True`` returns a strided view (every other element of a doubled
    last dimension) when there are at least two elements; ``exclude_zero`` replaces
    zeros by 1 (bool/integer) or the dtype's ``tiny``.  tape has no complex, bfloat16
    or float8 dtypes, so those are not supported.

    >>> import tape
    >>> t = make_tensor(2, 3, dtype=tape.float32, device='cpu', low=-1, high=1)
    >>> t.shape, bool(((t >= -1) & (t < 1)).all())
    (tape.Size([2, 3]), True)
    """
    tape = _tape()
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in 'biuf':
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        'torch.testing.make_tensor(). To request support, file an issue at: '
                        'https://github.com/pytorch/pytorch/issues')
    is_bool_or_int = dt.kind in 'biu'

    def modify_low_high(low, high, *, lowest_inclusive, highest_exclusive, default_low,
                        default_high):
        def clamp(a, lo, hi):
            return min(max(a, lo), hi)

        low = low if low is not None else default_low
        high = high if high is not None else default_high
        if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
            raise ValueError(f'`low` and `high` cannot be NaN, but got low={low} and high={high}')
        elif low == high and dt.kind == 'f':
            warnings.warn('Passing `low==high` to `torch.testing.make_tensor` for floating or '
                          'complex types is deprecated since 2.1 and will be removed in 2.3. '
                          'Use `torch.full(...)` instead.', FutureWarning, stacklevel=3)
        elif low >= high:
            raise ValueError(f'`low` must be less than `high`, but got {low} >= {high}')
        elif high < lowest_inclusive or low >= highest_exclusive:
            raise ValueError(f'The value interval specified by `low` and `high` is [{low}, '
                             f'{high}), but {_fmt_dtype(dt)} only supports '
                             f'[{lowest_inclusive}, {highest_exclusive})')
        low = clamp(low, lowest_inclusive, highest_exclusive)
        high = clamp(high, lowest_inclusive, highest_exclusive)
        if is_bool_or_int:
            return math.ceil(low), math.ceil(high)
        return low, high

    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError('The parameters `noncontiguous` and `memory_format` are mutually '
                         f'exclusive, but got noncontiguous={noncontiguous} and '
                         f'memory_format={memory_format}')
    if requires_grad and is_bool_or_int:
        raise ValueError('`requires_grad=True` is not supported for boolean and integral '
                         f'dtypes, but got dtype={_fmt_dtype(dt)}')
    noncontiguous = noncontiguous and functools.reduce(lambda x, y: x * y, shape, 1) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    rng = tape._rng[0]
    if dt.kind == 'b':
        low, high = modify_low_high(low, high, lowest_inclusive=0, highest_exclusive=2,
                                    default_low=0, default_high=2)
        data = rng.integers(low, high, size=shape).astype(dt)
    elif is_bool_or_int:
        info = np.iinfo(dt)
        low, high = modify_low_high(
            low, high, lowest_inclusive=int(info.min),
            highest_exclusive=int(info.max) + (1 if dt != np.int64 else 0),
            default_low=-9, default_high=10)
        data = rng.integers(low, high, size=shape, dtype=np.int64 if dt.kind == 'i' or
                            dt.itemsize < 8 else dt).astype(dt)
    else:
        info = np.finfo(dt)
        low, high = modify_low_high(low, high, lowest_inclusive=float(info.min),
                                    highest_exclusive=float(info.max), default_low=-9,
                                    default_high=9)
        u = rng.random(size=shape)
        if high - low >= float(info.max):
            data = (2.0 * (low / 2 + (high / 2 - low / 2) * u)).astype(dt)
        else:
            data = (low + (high - low) * u).astype(dt)
    data = np.array(data, dtype=dt)  # a fresh C-contiguous copy (0-d stays 0-d)
    if exclude_zero:
        data[data == 0] = 1 if is_bool_or_int else np.finfo(dt).tiny
    result = tape.tensor(data, dtype=dt)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if dt.kind == 'f':
        result.requires_grad = requires_grad
    return result
