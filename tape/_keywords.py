"""PyTorch's other spellings of arguments: a tensor passed as ``input=``
(``torch.sum(input=x)``), NumPy's ``axis=``/``keepdims=`` where PyTorch takes
them (``x.sum(axis=1)``), and leading arguments by keyword (``x.flip(dims=(0,))``,
``torch.reshape(x, shape=(6,))``).

Each name listed here gets one wrapper that rewrites such keywords and calls
the function.  The hot elementwise and product functions and methods
(``mul``, ``matmul``, ``mm``, ...) are left out: each call would pay it.
"""
import functools

# reductions and dim ops that take axis=/keepdims=, as functions and methods
DIM_OPS = ('sum', 'mean', 'std', 'var', 'prod', 'amax', 'amin', 'median', 'nanmedian',
           'logsumexp', 'all', 'any', 'nansum', 'nanmean', 'cumsum', 'cumprod', 'cummax',
           'cummin', 'logcumsumexp', 'softmax', 'log_softmax', 'sort', 'argsort', 'kthvalue',
           'mode', 'quantile', 'nanquantile', 'unbind', 'diff', 'count_nonzero', 'aminmax',
           'var_mean', 'std_mean', 'unsqueeze', 'squeeze', 'cat', 'concat', 'concatenate',
           'stack', 'max', 'min', 'argmax', 'argmin', 'topk', 'chunk', 'cumulative_trapezoid')

# methods' arguments after self, by keyword
METHOD_KEYWORDS = {
    'flip': ('dims',), 'permute': ('dims',), 'reshape': ('shape',), 'view': ('dtype',),
    'expand': ('size',), 'repeat': ('repeats',), 'tile': ('dims',), 'new_zeros': ('size',),
    'new_ones': ('size',), 'new_empty': ('size',), 'new_full': ('size', 'fill_value'),
    'split': ('split_size',), 'pow': ('exponent',), 'bmm': ('mat2',), 'allclose': ('other',),
    'isclose': ('other',), 'maximum': ('other',), 'minimum': ('other',), 'eq': ('other',),
    'ne': ('other',), 'lt': ('other',), 'le': ('other',), 'gt': ('other',), 'ge': ('other',)}

# functions of the namespace that take their tensor first, also as input= (with
# the varargs after it by keyword, where they have some)
FUNCTION_KEYWORDS = {name: () for name in (
    'clamp', 'clip', 'gather', 'flip', 'transpose', 'norm', 'isnan', 'isinf', 'isfinite',
    'isclose', 'allclose', 'nonzero', 'searchsorted', 'masked_select', 'index_select',
    'scatter', 'scatter_add', 'scatter_reduce', 'take', 'movedim', 'swapaxes', 'full_like',
    'zeros_like', 'ones_like', 'rand_like', 'randn_like', 'empty_like', 'repeat_interleave',
    'flatten', 'narrow', 'select', 'roll', 'tril', 'triu', 'diag', 'diagonal', 'masked_fill',
    'abs', 'neg', 'square', 'sign')}
FUNCTION_KEYWORDS.update(reshape=('shape',), permute=('dims',))


def _rename(kw, numpy_name, name, fn):
    if numpy_name in kw:
        if name in kw:
            raise TypeError(f"{fn.__name__}() got multiple values for argument '{name}' "
                            f"(as '{numpy_name}' and '{name}')")
        kw[name] = kw.pop(numpy_name)


def accepting(fn, positional=(), numpy_dims=False):
    """``fn(tensor, ...)`` also taking the tensor as ``input=``, the arguments after
    it by the keywords ``positional`` (a sequence for a method of varargs is
    passed as one argument, which those take as PyTorch's do), and, with
    ``numpy_dims``, ``axis=``/``keepdims=`` for ``dim=``/``keepdim=``."""
    @functools.wraps(fn)
    def f(*args, **kw):
        if kw:
            if 'input' in kw and not args:
                args = (kw.pop('input'),)
            for i, name in enumerate(positional, 1):
                if name in kw:
                    if len(args) != i:
                        raise TypeError(f"{fn.__name__}() got multiple values for argument "
                                        f"'{name}'" if len(args) > i else
                                        f"{fn.__name__}() missing an argument before "
                                        f"'{name}'")
                    args += (kw.pop(name),)
            if numpy_dims:
                _rename(kw, 'axis', 'dim', fn)
                _rename(kw, 'keepdims', 'keepdim', fn)
        return fn(*args, **kw)
    return f


def install(namespace, tensor_class):
    """Wrap the listed functions of ``namespace`` (tape's globals) and methods of
    ``tensor_class``, each once."""
    for name in set(DIM_OPS) | set(FUNCTION_KEYWORDS):
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type):
            namespace[name] = accepting(fn, FUNCTION_KEYWORDS.get(name, ()), name in DIM_OPS)
    for name in set(DIM_OPS) | set(METHOD_KEYWORDS):
        m = tensor_class.__dict__.get(name)
        if callable(m):
            setattr(tensor_class, name,
                    accepting(m, METHOD_KEYWORDS.get(name, ()), name in DIM_OPS))
