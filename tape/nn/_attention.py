"""Attention and Transformer modules, as in ``torch.nn``: ``MultiheadAttention``,
``TransformerEncoderLayer``, ``TransformerEncoder``, ``TransformerDecoderLayer``,
``TransformerDecoder``, ``Transformer``, and ``multi_head_attention_forward``
(exported by ``tape.nn.functional``).

Constructor arguments, parameter names and registration order
(``in_proj_weight`` or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``
when ``kdim``/``vdim`` differ from ``embed_dim``, ``in_proj_bias``, ``bias_k``,
``bias_v``, ``out_proj``; the layers' ``self_attn``, ``multihead_attn``,
``linear1``, ``linear2``, ``norm1..3``), initialisation (xavier_uniform_ on the
input projections, zeros on their biases and on ``out_proj.bias``,
xavier_normal_ on ``bias_k``/``bias_v``; a ``Transformer`` re-initialises every
matrix with xavier_uniform_) and mask semantics are PyTorch's, so a PyTorch
``state_dict`` loads as is. The forward follows ``torch.nn.functional.
multi_head_attention_forward`` step by step: bool masks become additive -inf
masks, ``need_weights=True`` computes softmax(q k^T / sqrt(d) + mask) and
returns the weights (averaged over heads unless ``average_attn_weights=False``),
``need_weights=False`` is PyTorch's ``scaled_dot_product_attention`` path (a
query whose every key is masked gets zeros there, as PyTorch's safe softmax
gives, where the weights path gives NaN, as PyTorch's does).

Everything is written with tape ops (linear, matmul, softmax, reshape,
transpose, cat, layer_norm), so the modules differentiate to any order. PyTorch's
fused inference fast paths and nested tensors have no counterpart: the
composite path always runs (same results up to rounding), and
``TransformerEncoder`` does not warn about ``enable_nested_tensor``.

>>> import tape
>>> _ = tape.manual_seed(0)
>>> mha = tape.nn.MultiheadAttention(8, 2, batch_first=True)
>>> x = tape.randn(3, 5, 8)
>>> out, w = mha(x, x, x)
>>> out.shape, w.shape
(tape.Size([3, 5, 8]), tape.Size([3, 5, 5]))
>>> [k for k in mha.state_dict()]
['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']
"""
import copy as _copy
import math as _math

import numpy as np

from .. import _ops
from .. import _shapes as _sh
from .._elementwise import where as _where
from .._linalg import matmul
from .._grad_mode import is_grad_enabled
from .._jit import _tracing
from .._tape import note_value_use
from .._tensor import Tensor, _default_dtype, _leaf
from . import functional as F
from . import _sdpa as _sdpa_node
from . import init
from .modules import Dropout, LayerNorm, Linear, Module, ModuleList, _empty

__all__ = ['MultiheadAttention', 'TransformerEncoderLayer', 'TransformerEncoder',
           'TransformerDecoderLayer', 'TransformerDecoder', 'Transformer']


def _dt(t):
    return np.dtype(np.asarray(t._data).dtype)


# -- the functional form ---------------------------------------------------------------
def _none_or_dtype(t):
    if t is None:
        return None
    if isinstance(t, Tensor):
        return _dt(t)
    raise RuntimeError('input to _none_or_dtype() must be None or torch.Tensor')


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """PyTorch's ``_canonical_mask``: a bool mask becomes a float mask of
    ``target_type`` with -inf where it is True; a float mask is returned as is."""
    if mask is None:
        return None
    dt = _dt(mask)
    if dt != np.bool_ and dt.kind != 'f':
        raise AssertionError(f'only bool and floating types of {mask_name} are supported')
    if check_other and other_type is not None and dt != other_type:
        import warnings
        warnings.warn(f'Support for mismatched {mask_name} and {other_name} is deprecated. '
                      'Use same type for both instead.', stacklevel=3)
    if dt == np.bool_:
        note_value_use('attention mask')     # (the mask's values are baked in)
        m = np.asarray(mask._data)
        return _leaf(np.where(m, -np.inf, 0.0).astype(np.dtype(target_type)))
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError('For batched (3-D) `query`, expected `key` and `value` to be '
                                 f'3-D but found {key.dim()}-D and {value.dim()}-D tensors '
                                 'respectively')
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError('For batched (3-D) `query`, expected `key_padding_mask` to be '
                                 f'`None` or 2-D but found {key_padding_mask.dim()}-D tensor '
                                 'instead')
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError('For batched (3-D) `query`, expected `attn_mask` to be `None`, '
                                 f'2-D or 3-D but found {attn_mask.dim()}-D tensor instead')
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError('For unbatched (2-D) `query`, expected `key` and `value` to be '
                                 f'2-D but found {key.dim()}-D and {value.dim()}-D tensors '
                                 'respectively')
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError('For unbatched (2-D) `query`, expected `key_padding_mask` to '
                                 f'be `None` or 1-D but found {key_padding_mask.dim()}-D tensor '
                                 'instead')
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError('For unbatched (2-D) `query`, expected `attn_mask` to be '
                                     f'`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor '
                                     'instead')
            if attn_mask.dim() == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(f'Expected `attn_mask` shape to be {expected} but got '
                                         f'{attn_mask.shape}')
        return False
    raise AssertionError('query should be unbatched 2D or batched 3D tensor but received '
                         f'{query.dim()}-D query tensor')


def _in_projection_packed(q, k, v, w, b=None):
    """q, k, v projected by the packed ``w`` (3E, E): one matmul for
    self-attention, two for encoder-decoder attention (k is v), else three."""
    E = q.size(-1)
    if k is v:
        if q is k:
            proj = F.linear(q, w, b)
            return proj[..., :E], proj[..., E:2 * E], proj[..., 2 * E:]
        b_q = b_kv = None
        if b is not None:
            b_q, b_kv = b[:E], b[E:]
        kv = F.linear(k, w[E:], b_kv)
        return F.linear(q, w[:E], b_q), kv[..., :E], kv[..., E:]
    w_q, w_k, w_v = w.chunk(3)
    b_q = b_k = b_v = None
    if b is not None:
        b_q, b_k, b_v = b.chunk(3)
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    for name, w, want in (('query', w_q, (Eq, Eq)), ('key', w_k, (Eq, Ek)),
                          ('value', w_v, (Eq, Ev))):
        if tuple(w.shape) != want:
            raise AssertionError(f'expecting {name} weights shape of {want}, but got {w.shape}')
    for name, bb in (('query', b_q), ('key', b_k), ('value', b_v)):
        if bb is not None and tuple(bb.shape) != (Eq,):
            raise AssertionError(f'expecting {name} bias shape of {(Eq,)}, but got {bb.shape}')
    return F.linear(q, w_q, b_q), F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)


def _sdpa(q, k, v, attn_mask, dropout_p, is_causal):
    """PyTorch's scaled_dot_product_attention as MultiheadAttention's
    ``need_weights=False`` path runs it: a row whose every score is masked
    to -inf gets zero weights (PyTorch's safe softmax), not NaN."""
    L, S, hd = q.size(-2), k.size(-2), q.size(-1)
    att = matmul(q * (1.0 / _math.sqrt(hd)), k.transpose(-2, -1))
    full = None
    if is_causal:
        att = att.masked_fill(_leaf(np.triu(np.ones((L, S), bool), 1)), float('-inf'))
    if attn_mask is not None:
        att = att + attn_mask
        note_value_use('attention mask')     # (which rows are fully masked is baked in)
        full = np.isneginf(np.asarray(attn_mask._data)).all(-1, keepdims=True)
        full = np.broadcast_to(full, tuple(att.shape[:-1]) + (1,))
        if not full.any():
            full = None
    if full is not None:
        fm = _leaf(np.ascontiguousarray(full))
        zero = _leaf(np.zeros((), _dt(att)))
        att = F.softmax(_where(fm, zero, att), dim=-1)
        att = _where(fm, zero, att)
    else:
        att = F.softmax(att, dim=-1)
    if dropout_p > 0.0:
        att = F.dropout(att, dropout_p, True)
    return matmul(att, v)


def _heads_of(x, static, name, batch_heads, head_dim):
    """Keys or values (L, N, E) as (N * heads, L, head_dim), or the caller's
    ``static`` tensor of that shape after torch's checks."""
    if static is None:
        return x.reshape(x.shape[0], batch_heads, head_dim).transpose(0, 1)
    if static.size(0) != batch_heads:
        raise AssertionError(f'expecting {name}.size(0) of {batch_heads}, but got '
                             f'{static.size(0)}')
    if static.size(2) != head_dim:
        raise AssertionError(f'expecting {name}.size(2) of {head_dim}, but got '
                             f'{static.size(2)}')
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """``torch.nn.functional.multi_head_attention_forward``: sequence-first
    query (L, N, E) (or unbatched (L, E)), key and value (S, N, E*); returns
    (output, weights or None)."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = tuple(query.shape)
    src_len = key.shape[0]
    qdt = _dt(query)
    key_padding_mask = _canonical_mask(key_padding_mask, 'key_padding_mask',
                                       _none_or_dtype(attn_mask), 'attn_mask', qdt)
    if is_causal and attn_mask is None:
        raise RuntimeError('Need attn_mask if specifying the is_causal hint. You may use the '
                           'Transformer module method `generate_square_subsequent_mask` to '
                           'create this mask.')
    if is_causal and key_padding_mask is None and not need_weights:
        # the sdpa path masks causally by itself
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, 'attn_mask', None, '', qdt, check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f'was expecting embedding dimension of {embed_dim_to_check}, but '
                             f'got {embed_dim}')
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f'embed_dim {embed_dim} not divisible by num_heads {num_heads}')
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f'key shape {key.shape} does not match value shape {value.shape}')

    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError('use_separate_proj_weight is False but in_proj_weight is None')
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for name, w in (('q', q_proj_weight), ('k', k_proj_weight), ('v', v_proj_weight)):
            if w is None:
                raise AssertionError(f'use_separate_proj_weight is True but {name}_proj_weight '
                                     'is None')
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight,
                                 v_proj_weight, b_q, b_k, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f'The shape of the 2D attn_mask is {attn_mask.shape}, but '
                                   f'should be {(tgt_len, src_len)}.')
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f'The shape of the 3D attn_mask is {attn_mask.shape}, but '
                                   f'should be {(bsz * num_heads, tgt_len, src_len)}.')
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError('bias cannot be added to static key.')
        if static_v is not None:
            raise AssertionError('bias cannot be added to static value.')
        k = _sh.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _sh.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError('bias_k is set but bias_v is None')
    elif bias_v is not None:
        raise AssertionError('bias_v is set but bias_k is None')

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads_of(k, static_k, 'static_k', bsz * num_heads, head_dim)
    v = _heads_of(v, static_v, 'static_v', bsz * num_heads, head_dim)

    if add_zero_attn:
        zeros = _leaf(np.zeros((bsz * num_heads, 1, head_dim), _dt(k)))
        k = _sh.cat([k, zeros], 1)
        v = _sh.cat([v, _leaf(np.zeros((bsz * num_heads, 1, head_dim), _dt(v)))], 1)
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))

    src_len = k.size(1)
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f'Expected key_padded_mask.shape[0] to be {bsz}, but got '
                                 f'{key_padding_mask.shape[0]}')
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f'Expected key_padded_mask.shape[1] to be {src_len}, but got '
                                 f'{key_padding_mask.shape[1]}')
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len) \
            .expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0

    if need_weights:
        E = q.shape[-1]
        q_scaled = q * _math.sqrt(1.0 / float(E))
        if is_causal and attn_mask is None:
            raise AssertionError('FIXME: is_causal not implemented for need_weights')
        w = matmul(q_scaled, k.transpose(-2, -1))
        if attn_mask is not None:
            w = attn_mask + w
        w = F.softmax(w, dim=-1)
        if dropout_p > 0.0:
            w = F.dropout(w, p=dropout_p)
        out = matmul(w, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias)
        out = out.reshape(tgt_len, bsz, out.size(1))
        w = w.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(dim=1)
        if not is_batched:
            out = out.squeeze(1)
            w = w.squeeze(0)
        return out, w

    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = _sdpa(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = F.linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.size(1))
    if not is_batched:
        out = out.squeeze(1)
    return out, None


# -- MultiheadAttention ----------------------------------------------------------------
class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear`` under PyTorch's name for ``MultiheadAttention.out_proj``."""


class MultiheadAttention(Module):
    """Multi-head attention (``Attention Is All You Need``):
    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    (output, weights or None)."""
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f'embed_dim and num_heads must be greater than 0, got '
                             f'embed_dim={embed_dim} and num_heads={num_heads} instead')
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError('embed_dim must be divisible by num_heads')
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = _empty((embed_dim, embed_dim), dtype)
            self.k_proj_weight = _empty((embed_dim, self.kdim), dtype)
            self.v_proj_weight = _empty((embed_dim, self.vdim), dtype)
            self.register_parameter('in_proj_weight', None)
        else:
            self.in_proj_weight = _empty((3 * embed_dim, embed_dim), dtype)
            self.register_parameter('q_proj_weight', None)
            self.register_parameter('k_proj_weight', None)
            self.register_parameter('v_proj_weight', None)
        if bias:
            self.in_proj_bias = _empty((3 * embed_dim,), dtype)
        else:
            self.register_parameter('in_proj_bias', None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = _empty((1, 1, embed_dim), dtype)
            self.bias_v = _empty((1, 1, embed_dim), dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        is_batched = query.dim() == 3
        qdt = _dt(query)
        key_padding_mask = _canonical_mask(key_padding_mask, 'key_padding_mask',
                                           _none_or_dtype(attn_mask), 'attn_mask', qdt)
        attn_mask = _canonical_mask(attn_mask, 'attn_mask', None, '', qdt, check_other=False)
        if not need_weights and query is key and key is value:
            out = self._packed_self_attention(query, key_padding_mask, attn_mask, is_causal)
            if out is not None:
                return out, None
        if self.batch_first and is_batched:
            # keep the identities (self-attention, k is v) that the projection uses
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        kw = dict(training=self.training, key_padding_mask=key_padding_mask,
                  need_weights=need_weights, attn_mask=attn_mask,
                  average_attn_weights=average_attn_weights, is_causal=is_causal)
        if not self._qkv_same_embed_dim:
            kw.update(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                      k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, **kw)
        if self.batch_first and is_batched:
            out = out.transpose(1, 0)
        return out, weights

    def _packed_self_attention(self, x, key_padding_mask, attn_mask, is_causal):
        """Self-attention without weights (a Transformer layer's call) in four nodes:
        the packed input projection, one attention node from its rows to the merged
        heads (``tape/nn/_sdpa.py``), the output projection and a reshape; the
        values are the general path's up to rounding.  None for every case it does
        not cover (dropout, bias_kv, zero attention, separate projection weights,
        masks that require grad or of another dtype, unbatched input, float16, a
        tape.jit trace, shapes the general path rejects)."""
        w = self.in_proj_weight
        if (type(x) is not Tensor or w is None or self.bias_k is not None
                or self.bias_v is not None or self.add_zero_attn
                or (self.training and self.dropout > 0.0)):
            return None
        d = x._data
        dt = d.dtype
        if dt not in _sdpa_node.DTYPES or d.ndim != 3 or w._data.dtype != dt \
                or d.shape[2] != self.embed_dim or not d.size:
            return None
        if self.batch_first:
            n, L, E = d.shape
        else:
            L, n, E = d.shape
        heads = self.num_heads
        for m in (key_padding_mask, attn_mask):
            if m is not None and (type(m) is not Tensor or m._rg or m._data.dtype != dt):
                return None
        if getattr(_tracing, 'proxies', None) is not None:
            return None
        if is_causal and attn_mask is None:
            return None                             # (the general path raises)
        if is_causal and key_padding_mask is None:
            bias = np.triu(np.full((L, L), -np.inf, dt), 1)
        else:
            bias = None
            if attn_mask is not None:
                am = attn_mask._data
                if am.shape == (L, L):
                    bias = am
                elif am.shape == (n * heads, L, L):
                    bias = am.reshape(n, heads, L, L)
                else:
                    return None                     # (the general path raises)
            if key_padding_mask is not None:
                kp = key_padding_mask._data
                if kp.shape != (n, L):
                    return None
                kp = kp.reshape(n, 1, 1, L)
                bias = kp if bias is None else bias + kp
            if bias is not None:
                note_value_use('attention mask')     # (which rows are fully masked is baked in)
        rows = _ops.reshape(x, (n * L, E))
        proj = F.linear(rows, w, self.in_proj_bias)
        o = _sdpa_node.packed_self_attention(proj, n, L, heads, bias,
                                        1.0 / _math.sqrt(E // heads), True, self.batch_first)
        out = F.linear(o, self.out_proj.weight, self.out_proj.bias)
        return _ops.reshape(out, tuple(d.shape))

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """PyTorch's helper for its fused path: (merged mask, mask type 0/1/2)."""
        mask_type = merged = None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch_size, seq_len, _ = tuple(query.shape)
            mask_type = 2
            if attn_mask.dim() == 3:
                expanded = attn_mask.reshape(batch_size, -1, seq_len, seq_len)
            else:
                expanded = attn_mask.reshape(1, 1, seq_len, seq_len) \
                    .expand(batch_size, self.num_heads, -1, -1)
            merged = expanded
            if key_padding_mask is not None:
                kpm = key_padding_mask.reshape(batch_size, 1, 1, seq_len) \
                    .expand(-1, self.num_heads, -1, -1)
                merged = expanded + kpm
        return merged, mask_type


# -- Transformer -----------------------------------------------------------------------
def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    dt = np.dtype(dtype) if dtype is not None else _default_dtype[0]
    return _leaf(np.triu(np.full((sz, sz), -np.inf, dt), 1))


def _get_seq_len(src, batch_first):
    if src.dim() == 2:
        return src.size(0)
    return src.size(1 if batch_first else 0)


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.size(-2)
        causal = _generate_square_subsequent_mask(sz, dtype=_dt(mask))
        if tuple(mask.shape) == tuple(causal.shape):
            note_value_use('causal mask detection')
            make_causal = bool(np.array_equal(np.asarray(mask._data), np.asarray(causal._data)))
        else:
            make_causal = False
    return make_causal


def _get_clones(module, n):
    return ModuleList([_copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == 'relu':
        return F.relu
    if activation == 'gelu':
        return F.gelu
    raise RuntimeError(f'activation should be relu/gelu, not {activation}')


def _relu_or_gelu(activation):
    from .modules import GELU, ReLU
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection
    and LayerNorm (after it, or before it with ``norm_first``)."""
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(activation)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, 'src_key_padding_mask',
                                               _none_or_dtype(src_mask), 'src_mask', _dt(src))
        src_mask = _canonical_mask(src_mask, 'src_mask', None, '', _dt(src), check_other=False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask,
                                   is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask,
                                              is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's ``memory``, then a
    feed-forward block, each with a residual connection and LayerNorm."""
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        if isinstance(activation, str):
            self.activation = _get_activation_fn(activation)
        else:
            self.activation = activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


def _why_not_nested(layer):
    """PyTorch's reason (set at construction) not to use nested tensors, or ''."""
    name = 'encoder_layer'
    if not isinstance(layer, TransformerEncoderLayer):
        return f'{name} was not TransformerEncoderLayer'
    if layer.norm_first:
        return f'{name}.norm_first was True'
    if not layer.self_attn.batch_first:
        return (f'{name}.self_attn.batch_first was not True'
                '(use batch_first for better inference performance)')
    if not layer.self_attn._qkv_same_embed_dim:
        return f'{name}.self_attn._qkv_same_embed_dim was not True'
    if layer.self_attn.in_proj_bias is None:
        return f'{name}.self_attn was passed bias=False'
    if not layer.activation_relu_or_gelu:
        return f'{name}.activation_relu_or_gelu was not True'
    if layer.norm1.eps != layer.norm2.eps:
        return f'{name}.norm1.eps was not equal to {name}.norm2.eps'
    if layer.self_attn.num_heads % 2 == 1:
        return f'{name}.self_attn.num_heads is odd'
    return ''


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then ``norm`` if given."""
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        # PyTorch's sparsity fast path: under it (eval, no grad, a left-aligned
        # src_key_padding_mask, no mask) the layers run on a nested tensor of the
        # unpadded tokens, so the padded positions come out as zeros.  tape has no
        # nested tensors; it runs the general path and zeroes those positions.
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            import warnings
            warnings.warn(f'enable_nested_tensor is True, but self.use_nested_tensor is False '
                          f'because {why}', stacklevel=2)
            self.use_nested_tensor = False

    def _nested_valid(self, src, src_key_padding_mask, mask):
        """The (N, S) bool array of kept tokens when PyTorch would take its nested-tensor
        path for this call, else None."""
        first = self.layers[0]
        if (not getattr(self, 'use_nested_tensor', False) or first.training or src.dim() != 3
                or src_key_padding_mask is None or mask is not None):
            return None
        valid = np.asarray(src_key_padding_mask._data) == 0    # logical_not of the float mask
        if getattr(self, 'mask_check', True):
            # left-aligned: each row's kept tokens come first
            if not (valid[:, 1:] <= valid[:, :-1]).all():
                return None
        if is_grad_enabled():
            sa, n1, n2 = first.self_attn, first.norm1, first.norm2
            args = (src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight,
                    sa.out_proj.bias, n1.weight, n1.bias, n2.weight, n2.bias,
                    first.linear1.weight, first.linear1.bias, first.linear2.weight,
                    first.linear2.bias)
            if any(t is not None and t.requires_grad for t in args):
                return None
        return valid

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, 'src_key_padding_mask',
                                               _none_or_dtype(mask), 'mask', _dt(src))
        mask = _canonical_mask(mask, 'mask', None, '', _dt(src), check_other=False)
        batch_first = self.layers[0].self_attn.batch_first
        valid = self._nested_valid(src, src_key_padding_mask, mask)
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if valid is not None:
            # (a nested tensor's to_padded_tensor(0.0): an all-padded row is zeros too)
            output = _where(_leaf(valid[:, :, None]), output,
                            _leaf(np.zeros((), _dt(output))))
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given."""
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder Transformer: ``forward(src, tgt, src_mask=None,
    tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, ...)``."""
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        if not self.batch_first and src.size(1) != tgt.size(1) and is_batched:
            raise RuntimeError('the batch number of src and tgt must be equal')
        if self.batch_first and src.size(0) != tgt.size(0) and is_batched:
            raise RuntimeError('the batch number of src and tgt must be equal')
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError('the feature number of src and tgt must be equal to d_model')
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float (sz, sz) mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
