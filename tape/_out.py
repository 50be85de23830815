"""PyTorch's ``out=`` argument: a function's result written into a given tensor.

One wrapper (``accepting_out``) gives ``out=`` to the functions of the
``tape`` namespace that PyTorch gives it to (``OUT_FUNCTIONS``): the result is
computed as without ``out``, then written into it (``into_out``).  The
elementwise unary ops take ``out`` themselves (tape/_ops.py ``_unary``), so
that ``tape.tanh(h)`` in a loop pays no extra call.  Tensor methods are not
wrapped: PyTorch's methods take no ``out``.
"""
import builtins
import functools
import inspect
import warnings

import numpy as np

from . import _dtypes
from ._grad_mode import no_grad
from ._tape import grad_mode
from ._tensor import Tensor, _leaf

_NAMES = {'f2': 'Half', 'f4': 'Float', 'f8': 'Double', 'i1': 'Char', 'i2': 'Short',
          'i4': 'Int', 'i8': 'Long', 'u1': 'Byte', 'b1': 'Bool'}


def into_out(result, out, name, *inputs):
    """``result`` written into ``out`` (PyTorch's ``out=``), which is returned;
    ``result`` itself where ``out`` is None.  As PyTorch: no autograd through it,
    no float result into an integer ``out``, a resize (with its warning) where
    the shapes differ.  A tuple result (``sort``'s values and indices) goes into
    a tuple ``out`` of as many tensors, and comes back as the same kind of tuple."""
    if out is None:
        return result
    if isinstance(result, (tuple, list)):     # (split_copy's list too)
        if not isinstance(out, (tuple, list)) or len(out) != len(result) or \
                not builtins.all(isinstance(o, Tensor) for o in out):
            raise TypeError(f"{name}(): argument 'out' must be tuple of {len(result)} Tensors, "
                            f'not {type(out).__name__}')
        keep = _check_grad(name, out, inputs, result)
        outs = [_write(r, o, name, keep) for r, o in zip(result, out)]
        fields = getattr(type(result), '_fields', None)
        return type(result)(*outs) if fields is not None else tuple(outs)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    keep = _check_grad(name, (out,), inputs, (result,))
    return _write(result, out, name, keep)


def _check_grad(name, outs, inputs, results):
    """PyTorch's refusal of out= under autograd; True where, as PyTorch's composite
    ops do, the result is copied into ``out`` with its graph (``COMPOSITE``)."""
    if not grad_mode.enabled or name in NOT_DIFFERENTIABLE or not builtins.any(
            _dtypes.category(np.asarray(r._data if isinstance(r, Tensor) else r).dtype) >= 2
            for r in results):          # (integer and bool results have no gradient)
        return False
    in_rg = builtins.any(isinstance(t, Tensor) and t._rg for t in _flat(inputs))
    if builtins.any(o._rg for o in outs) or (in_rg and name not in COMPOSITE):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")
    return in_rg


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _write(result, out, name, keep_graph=False):
    r = result._data if isinstance(result, Tensor) else np.asarray(result)
    od = np.asarray(out._data)
    _check_dtype(name, r.dtype, od.dtype)
    with no_grad():
        if od.shape != r.shape:
            if od.size and name not in NO_RESIZE_WARNING:
                warnings.warn(f'An output with one or more elements was resized since it had '
                              f'shape {list(od.shape)}, which does not match the required '
                              f'output shape {list(r.shape)}.', UserWarning, stacklevel=4)
            out.resize_(*r.shape)
        if not (keep_graph and isinstance(result, Tensor) and result._rg):
            out.copy_(_leaf(r))
            return out
    return out.copy_(result)            # (PyTorch's composite ops: the graph goes on)


def _type_names(dt):
    """PyTorch's two names of a dtype: ('Float', 'float')."""
    dt = np.dtype(dt)
    code = dt.str[1:]
    big = _NAMES.get(code, {'c8': 'ComplexFloat', 'c16': 'ComplexDouble'}.get(code, str(dt)))
    return big, _CPP_NAMES.get(dt.str[1:], str(dt))


def _check_dtype(name, rdt, odt):
    """PyTorch's errors for an ``out`` of the wrong dtype: every op refuses a result
    its dtype cannot hold (a float result into an integer ``out``); the ops of
    ``EXACT_DTYPE`` want the result's dtype exactly; their words are the op's own."""
    castable = _dtypes.category(rdt) <= _dtypes.category(odt) or name in ANY_DTYPE
    exact, cast, exc = DTYPE_ERRORS.get(name, (None, None, RuntimeError))
    if castable and (exact is None or np.dtype(rdt) == np.dtype(odt)):
        return
    msg = (cast if not castable and cast is not None else exact) or \
        "result type {R} can't be cast to the desired output type {O}"
    (R, r), (O, o) = _type_names(rdt), _type_names(odt)
    raise exc(msg.format(R=R, r=r, O=O, o=o, flag=np.dtype(rdt) == np.int32))


_CPP_NAMES = {'f2': 'c10::Half', 'f4': 'float', 'f8': 'double', 'i1': 'signed char',
              'i2': 'short int', 'i4': 'int', 'i8': 'long int', 'u1': 'unsigned char',
              'b1': 'bool', 'c8': 'c10::complex<float>', 'c16': 'c10::complex<double>'}


def _dtype_errors():
    """name: (the error where out's dtype is not the result's, or None where any
    castable dtype does; the error where it cannot hold the result, or None for
    the first; the exception class), as torch 2.13 words them."""
    found = 'Found dtype {O} but expected {R}'
    expected = 'Expected out tensor to have dtype {r}, but got {o} instead'
    t = {}

    def add(names, exact, cast=None, exc=RuntimeError):
        for n in names.split():
            t[n] = (exact, cast, exc)
    add('abs absolute ceil fix floor frac neg negative round sgn sign trunc bitwise_not '
        'special_round clamp_max clamp_min', found)
    add('addmm addmv baddbmm bmm cross linalg_cross diag gather inverse matmul mm msort mv '
        'renorm take_along_dim tril triu aminmax max min sort topk kthvalue index_add '
        'index_copy lu_solve lu_unpack linalg_lu_solve linalg_slogdet slogdet linalg_cholesky '
        'linalg_det linalg_eigvalsh linalg_eigh linalg_inv linalg_solve linalg_svdvals '
        'linalg_vector_norm norm unbind_copy split_copy split_with_sizes_copy', expected)
    add('matrix_power linalg_matrix_power', expected,
        'matrix_power: Expected result to be safely castable from {R} dtype, but got result '
        'with dtype {O}')
    for n, label in (('cholesky', 'cholesky'), ('cholesky_inverse', 'cholesky_inverse'),
                     ('cholesky_solve', 'cholesky_solve'), ('linalg_cond', 'linalg.cond'),
                     ('linalg_pinv', 'linalg.pinv'), ('linalg_tensorinv', 'tensorinv'),
                     ('linalg_tensorsolve', 'tensorsolve'),
                     ('linalg_householder_product', 'torch.linalg.householder_product'),
                     ('linalg_matrix_rank', 'torch.linalg.matrix_rank')):
        add(n, None, label + ': Expected result to be safely castable from {R} dtype, but got '
            'result with dtype {O}')
    add('amax amin', "Expected the dtype for input and out to match, but got {R} for input's "
        "dtype and {O} for out's dtype.")
    add('float_power', "the output given to float_power has dtype {O} but the operation's "
        'result requires dtype {R}')
    add('cat concat concatenate column_stack dstack hstack row_stack stack vstack', None,
        "torch.cat(): input types can't be cast to the desired output type {O}", TypeError)
    add('mean', None, "mean.dtype_out(): input types can't be cast to the desired output type {O}")
    add('logsumexp special_logsumexp', None,
        'logsumexp(): Expected floating point type for result tensor, but got: {O}')
    add('logcumsumexp cummax cummin', 'expected scalar_type {R} but found {O}')
    add('linalg_solve_triangular', 'expected scalar type {R} but found {O}')
    add('heaviside', 'heaviside is not yet implemented for tensors with different dtypes.')
    t['index_select'] = ('index_select(): self and result must have the same scalar type',
                         None, RuntimeError)
    t['masked_select'] = ('masked_select(): self and result must have the same scalar type',
                          None, RuntimeError)
    add('linalg_matrix_norm', 'linalg.matrix_norm expected out tensor dtype {R} but got: {O}')
    add('linalg_norm', 'linalg.norm expected out tensor dtype {R} but got: {O}')
    add('linalg_vecdot', 'linalg.vecdot: Expected out of dtype{R} but found {O}')
    add('linalg_multi_dot chain_matmul', 'multi_dot(): expected out tensor to have dtype {r} '
        'but got {o}')
    add('nan_to_num', 'nan_to_num: dtype of out: {O} should be same as input: {R}')
    add('nonzero', 'nonzero: Expected out tensor to have scalar type {R} but got scalar type{O}')
    add('quantile nanquantile', 'quantile() out tensor must be same dtype as the input tensor')
    add('dot vdot', 'result dtype {O} does not match input dtype {R}')
    add('inner tensordot', 'tensordot: Expected the output tensor to have dtype {R}, but got an '
        'output tensor with dtype {O}')
    add('histc histogram', 'torch.histogram: input tensor and hist tensor should have the same '
        'dtype, but got input {r} and hist {o}')
    add('where', 'Expected out type to be {R} but got {O}')
    add('searchsorted bucketize', "torch.searchsorted(): output tensor's dtype is wrong, it can "
        "only be Int(int32) or Long(int64) depending on whether out_int32 flag is True, but we "
        "got output tensor's dtype {O} and out_int32 flag is {flag}")
    add('narrow_copy', 'Expected self.dtype() == output.dtype() to be true, but got false.  '
        '(Could this error message be improved?  If so, please report an enhancement request '
        'to PyTorch.)')
    add('frexp', 'torch.frexp() expects mantissa to have dtype {r} but got {o}')
    add('ldexp', None, "ldexp can't be cast to the desired output type {O}")
    return t


DTYPE_ERRORS = _dtype_errors()

# PyTorch's ops whose out= writes no graph and refuses none (no derivative at all)
NOT_DIFFERENTIABLE = set(
    'histc special_airy_ai special_bessel_j0 special_bessel_j1 special_bessel_y0 '
    'special_bessel_y1 special_modified_bessel_i0 special_modified_bessel_i1 '
    'special_modified_bessel_k0 special_modified_bessel_k1 special_scaled_modified_bessel_k0 '
    'special_scaled_modified_bessel_k1 special_spherical_bessel_j0 '
    'special_chebyshev_polynomial_t special_chebyshev_polynomial_u '
    'special_chebyshev_polynomial_v special_chebyshev_polynomial_w '
    'special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_u '
    'special_shifted_chebyshev_polynomial_v special_shifted_chebyshev_polynomial_w '
    'special_hermite_polynomial_h special_hermite_polynomial_he special_laguerre_polynomial_l '
    'special_legendre_polynomial_p floor_divide heaviside histogram'.split())
# PyTorch's composite ops: an input that requires grad is no error; the result goes
# into ``out`` with its graph (``out.copy_(result)``)
COMPOSITE = set(
    'diag inner tensordot quantile nanquantile linalg_cond linalg_matrix_norm linalg_norm '
    'linalg_tensorinv linalg_tensorsolve special_ndtr lu conj_physical nuclear_norm softmax '
    'log_softmax slice_scatter alias_copy detach_copy diagonal_copy expand_copy permute_copy '
    'select_copy squeeze_copy t_copy transpose_copy unsqueeze_copy unfold_copy view_copy '
    'unbind_copy split_copy split_with_sizes_copy'.split())
# PyTorch's ops whose out= call returns None (a list out)
RETURNS_NONE = {'unbind_copy', 'split_copy', 'split_with_sizes_copy'}
# PyTorch's ops that resize a wrong-shaped out without the warning
NO_RESIZE_WARNING = set(
    'empty zeros ones eye full linspace logspace rand randn randint randperm addbmm '
    'narrow_copy lu bernoulli multinomial'.split())
# PyTorch's ops that write any dtype of out (the result cast to it)
ANY_DTYPE = {'bernoulli', 'lu'}
# PyTorch's ops that compute in out's dtype where no dtype is given
DTYPE_FROM_OUT = set('sum prod cumsum cumprod empty eye full linspace logspace'.split())


# The functions of PyTorch's namespace that take out= (torch 2.13's docs), as
# far as tape has them; those that already take it are left as they are.
OUT_FUNCTIONS = (
    'abs acos acosh addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax any '
    'arange argmax argmin argsort asin asinh atan atan2 atanh baddbmm bitwise_and bitwise_not bitwise_or '
    'bitwise_xor bmm bucketize cat ceil clamp clip column_stack concat concatenate copysign '
    'cos cosh cross cummax cummin cumprod cumsum deg2rad diag diff digamma dot dstack empty '
    'eq erf erfc erfinv exp exp2 expm1 eye fix float_power floor floor_divide fmax fmin '
    'frac full gather gcd ge ger greater greater_equal gt heaviside histc hstack hypot '
    'index_add index_copy index_select inner inverse isneginf isposinf kron kthvalue lcm le '
    'lerp less less_equal '
    'lgamma linspace log log10 log1p log2 logaddexp logaddexp2 logcumsumexp logical_and '
    'logical_not logical_or logical_xor logit logspace logsumexp lt masked_select matmul '
    'max min mean median mm mode msort mv mvlgamma nan_to_num nanmean nansum ne neg negative '
    'nonzero norm normal not_equal ones outer polygamma pow prod rad2deg rand randint randn '
    'reciprocal renorm round row_stack rsqrt searchsorted sgn sigmoid sign signbit sin sinc '
    'sinh sort sqrt square stack std sum take take_along_dim tan tanh tensordot topk tril triu trunc '
    'var vdot vstack '
    'where xlogy zeros '
    'clamp_max clamp_min isin multinomial nanmedian nuclear_norm frobenius_norm scatter bernoulli '
    'hardshrink threshold softmax log_softmax slice_scatter slogdet').split()

# Aliases bound before their function got out= (tape.arccosh is the acosh of
# tape/_composites.py): given it here, under the name PyTorch's errors use.
OUT_ALIASES = {'arccosh': 'acosh', 'arcsinh': 'asinh', 'arctanh': 'atanh', 'arctan2': 'atan2'}

# Functions that declare out= (or take **kwargs) but compute without it: wrapped
# whatever their signature says.
OUT_IGNORED = (
    'angle bitwise_left_shift bitwise_right_shift conj_physical frexp histogram igamma igammac '
    'ldexp narrow_copy nextafter randperm alias_copy detach_copy diagonal_copy expand_copy '
    'permute_copy select_copy squeeze_copy t_copy transpose_copy unsqueeze_copy unfold_copy '
    'view_copy split_copy split_with_sizes_copy unbind_copy slogdet').split()


def accepting_out(fn, name):
    """``fn`` with PyTorch's keyword-only ``out=``."""
    @functools.wraps(fn)
    def f(*args, out=None, **kw):
        if out is None:
            return fn(*args, **kw)
        if name in DTYPE_FROM_OUT and kw.get('dtype') is None and isinstance(out, Tensor):
            kw['dtype'] = out.dtype         # (PyTorch computes in out's dtype)
        r = into_out(fn(*args, **kw), out, name, *args, *kw.values())
        return None if name in RETURNS_NONE else r
    return f


def honour_out(namespace, names, prefix=''):
    """``out=`` for the functions ``names`` of ``namespace`` (a module's globals),
    which declare it (as PyTorch's do) but compute without it: each is wrapped to
    write its result into ``out`` (``prefix + name``, less a leading underscore,
    names the op in the errors)."""
    for name in names:
        namespace[name] = accepting_out(namespace[name], prefix + name.lstrip('_'))


def install(namespace):
    """Give ``out=`` to the functions of ``namespace`` (tape's) named in
    OUT_FUNCTIONS that do not take it yet."""
    for name in OUT_FUNCTIONS:
        fn = namespace.get(name)
        if fn is None or not callable(fn):
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if 'out' in params or builtins.any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        namespace[name] = accepting_out(fn, name)
    for name in OUT_IGNORED:
        if callable(namespace.get(name)):
            namespace[name] = accepting_out(namespace[name], name)
    for alias, name in OUT_ALIASES.items():
        fn = namespace.get(alias)
        if callable(fn) and 'out' not in _params(fn):
            namespace[alias] = accepting_out(fn, name)
    for sub, names in SUBMODULE_OUT.items():
        module = namespace.get(sub)
        for name, label in names.items():
            fn = getattr(module, name, None)
            if callable(fn) and 'out' not in _params(fn):
                setattr(module, name, accepting_out(fn, label))


# tape.special and tape.linalg functions that are tape functions without out=
# (set by tape/__init__.py): name: the name PyTorch's errors use
SUBMODULE_OUT = {'special': {'sinc': 'sinc'},
                 'linalg': {'matmul': 'matmul', 'lstsq': 'linalg_lstsq'}}


def _params(fn):
    try:
        return inspect.signature(fn, follow_wrapped=False).parameters
    except (TypeError, ValueError):
        return {}
