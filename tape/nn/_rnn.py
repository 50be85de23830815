"""Recurrent layers, as in ``torch.nn``: ``RNN`` (tanh or relu), ``LSTM`` (with
``proj_size``), ``GRU`` and the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

The constructor arguments, parameter names and order (``weight_ih_l0``,
``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, ``weight_hr_l0``, a ``_reverse``
suffix for the backward direction), gate order (LSTM i, f, g, o; GRU r, z, n),
shapes of inputs, states and outputs, and reprs are PyTorch's, so a PyTorch
``state_dict`` loads as is. Every parameter is initialised U(-1/sqrt(hidden),
1/sqrt(hidden)) from tape's generator, in parameter order, as PyTorch does.

Each layer and direction of ``RNN``, ``LSTM`` and ``GRU`` is one node
(``_FusedLayer``, shown as PyTorch's CPU LSTM shows its fused layer,
``MkldnnRnnLayerBackward0``), as PyTorch's fused kernels are: the input
projection of every step is one matrix product, then a loop over the steps runs
``h W_hh^T`` in BLAS and the rest of the step in one Numba kernel
(``compiler/rnn_kernels.py``), keeping the gates; its backward is
backpropagation through time in the same form, giving the gradients of the
input, the initial states and every weight and bias in one call.  Under
``create_graph`` that backward is the composite below (linear, sigmoid, tanh,
slicing, stack, cat in tape ops) recomputed from the saved inputs and
differentiated with ``create_graph``, so the layers differentiate to any order;
while ``tape.jit`` traces, and for dtypes other than float32/float64, the
layers record that composite directly.  The cells are the composite.
``RNN``, ``LSTM`` and ``GRU`` take a ``PackedSequence`` (``tape.nn.utils.rnn``) as
PyTorch does: the initial states are permuted by its ``sorted_indices``, each step
runs the sequences still going, and the result is a ``PackedSequence`` and final
states taken at each sequence's own last step, in the caller's batch order.

>>> import tape
>>> _ = tape.manual_seed(0)
>>> lstm = tape.nn.LSTM(3, 4, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(tape.randn(5, 7, 3))
>>> out.shape, h.shape, c.shape
(tape.Size([5, 7, 4]), tape.Size([2, 5, 4]), tape.Size([2, 5, 4]))
"""
import math as _math
import numbers as _numbers
import warnings as _warnings

import math

import numpy as np

from .. import _shapes as _sh
from .._tape import grad_mode
from .._tensor import DTYPE_NAMES, _leaf
from ..autograd.function import Function, _Saved
from . import functional as F
from . import init
from .modules import Module, _empty
from .utils.rnn import PackedSequence

__all__ = ['RNNBase', 'RNN', 'LSTM', 'GRU', 'RNNCellBase', 'RNNCell', 'LSTMCell', 'GRUCell']

_GATES = {'RNN_TANH': 1, 'RNN_RELU': 1, 'LSTM': 4, 'GRU': 3}


def _zeros(shape, like):
    # a constant state in the input's dtype (PyTorch's default h0/c0)
    return _leaf(np.zeros(shape, np.asarray(like._data).dtype))


def _dt_name(t):
    return 'torch.' + DTYPE_NAMES.get(np.dtype(t.dtype), str(t.dtype)).split('.')[-1]


def _scalar_name(t):
    # PyTorch's ScalarType name ('Double', 'Float', ...)
    return {'float64': 'Double', 'float32': 'Float', 'float16': 'Half',
            'bfloat16': 'BFloat16'}.get(str(np.dtype(t.dtype)), str(t.dtype))


def _permute(state, permutation):
    """``state.index_select(1, permutation)``, with PyTorch's RuntimeError for an index
    past the batch."""
    perm = np.asarray(permutation._data).astype(np.int64).reshape(-1)
    if state.dim() >= 2 and perm.size and perm.max() >= state.size(1):
        bad = int(perm[perm >= state.size(1)][0])
        raise RuntimeError(f'INDICES element is out of DATA bounds, id={bad} '
                           f'axis_dim={state.size(1)}')
    return state.index_select(1, permutation)


def _step(mode, xp, h, c, w_hh, b_hh, w_hr, hs):
    """One time step of one direction of one layer. ``xp`` is the input's
    projection ``x @ W_ih^T + b_ih`` (computed for every step at once by the caller);
    returns the new (h, c) (c is None but for the LSTM)."""
    hp = F.linear(h, w_hh, b_hh)
    if mode == 'RNN_TANH':
        return (xp + hp).tanh(), None
    if mode == 'RNN_RELU':
        return (xp + hp).relu(), None
    if mode == 'LSTM':
        g = xp + hp
        i = g[..., 0:hs].sigmoid()
        f = g[..., hs:2 * hs].sigmoid()
        gg = g[..., 2 * hs:3 * hs].tanh()
        o = g[..., 3 * hs:4 * hs].sigmoid()
        c2 = f * c + i * gg
        h2 = o * c2.tanh()
        if w_hr is not None:
            h2 = F.linear(h2, w_hr)
        return h2, c2
    # GRU: the reset gate multiplies the hidden projection including its bias b_hn,
    # as PyTorch (and cuDNN) do
    r = (xp[..., 0:hs] + hp[..., 0:hs]).sigmoid()
    z = (xp[..., hs:2 * hs] + hp[..., hs:2 * hs]).sigmoid()
    n = (xp[..., 2 * hs:3 * hs] + r * hp[..., 2 * hs:3 * hs]).tanh()
    return (1 - z) * n + z * h, None


def _composite_layer(mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                     batch_sizes):
    """One direction of one layer in tape ops: time-major ``x`` (T, N, I) when
    ``batch_sizes`` is None, else packed data (sum(batch_sizes), I) whose step t holds
    the first ``batch_sizes[t]`` sequences.  Returns (out, h_n, c_n) (c_n None but
    for the LSTM), the final state of each row taken at its own last step."""
    xp = F.linear(x, w_ih, b_ih)        # the input projection of every step at once
    args = (w_hh, b_hh, w_hr, hs)
    if batch_sizes is None:
        steps = x.size(0)
        h, c = h0, c0
        seq = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            h, c = _step(mode, xp[t], h, c, *args)
            seq[t] = h
        return _sh.stack(seq, 0), h, c
    bs = list(batch_sizes)
    steps = len(bs)
    off = np.concatenate([[0], np.cumsum(bs)]).tolist()
    full = h0.size(0)
    seq = [None] * steps
    if not reverse:
        # the batch shrinks: rows that stop are set aside as final states
        h, c, cur = h0, c0, full
        done_h, done_c = [], []
        for t in range(steps):
            b = bs[t]
            if b < cur:
                done_h.append(h[b:cur])
                h = h[:b]
                if c is not None:
                    done_c.append(c[b:cur])
                    c = c[:b]
                cur = b
            h, c = _step(mode, xp[off[t]:off[t + 1]], h, c, *args)
            seq[t] = h
        if done_h:
            h = _sh.cat([h] + done_h[::-1], 0)
            if c is not None:
                c = _sh.cat([c] + done_c[::-1], 0)
    else:
        # backwards the batch grows: a sequence starts from its h0 row
        cur = bs[-1]
        h = h0 if cur == full else h0[:cur]
        c = c0 if c0 is None or cur == full else c0[:cur]
        for t in range(steps - 1, -1, -1):
            b = bs[t]
            if b > cur:
                h = _sh.cat([h, h0[cur:b]], 0)
                if c is not None:
                    c = _sh.cat([c, c0[cur:b]], 0)
                cur = b
            h, c = _step(mode, xp[off[t]:off[t + 1]], h, c, *args)
            seq[t] = h
    return _sh.cat(seq, 0), h, c


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fused_ok(x):
    """Does a layer over ``x`` take its one-node form?  Float32/float64 only, and
    not while tape.jit traces: the composite's records replay in the generated
    kernel, where a custom Function would make the traced function run eagerly."""
    from .._jit import _tracing
    return np.dtype(x.dtype) in _FUSED_DTYPES and getattr(_tracing, 'proxies', None) is None


def _array(t, dt):
    return None if t is None else np.asarray(t._data, dtype=dt)


def _layer(mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, batch_sizes,
           lead=False, batch_first=False):
    """One direction of one layer, fused when it can be (see ``_fused_ok``).  With
    ``lead`` the states come and go with a leading dimension of 1, (1, N, H): the
    whole (L*D, N, H) state of a one-layer one-direction module, which then needs
    no indexing or stacking around the layer.  With ``batch_first`` ``x`` and the
    output are (N, T, .), which the fused layer reads and writes as they are."""
    if _fused_ok(x):
        bs = None if batch_sizes is None else tuple(int(b) for b in batch_sizes)
        res = _FusedLayer.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, reverse, bs,
                                lead, batch_first)
        return res if mode == 'LSTM' else (res[0], res[1], None)
    return _composite_as_fused(mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                               batch_sizes, lead, batch_first)


def _composite_as_fused(mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                        batch_sizes, lead, batch_first):
    """``_composite_layer`` taking and giving what ``_FusedLayer`` does (states with a
    leading 1 when ``lead``, batch-first input and output when ``batch_first``)."""
    if lead:
        h0, c0 = h0[0], None if c0 is None else c0[0]
    if batch_first:
        x = x.transpose(0, 1)
    out, h, c = _composite_layer(mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                                 batch_sizes)
    if batch_first:
        out = out.transpose(0, 1)
    if lead:
        h, c = h.unsqueeze(0), None if c is None else c.unsqueeze(0)
    return out, h, c


def _schedule(x_shape, batch_sizes, reverse, batch_first):
    """(steps in the order they run, first row of each step, rows of each step,
    the stride between a step's rows, each step's rows as a slice) of the
    sequence buffers: (N*T, .) with row n*T + t when ``batch_first``, else
    (T*N, .) or packed, a step's rows one after another."""
    if batch_sizes is None:
        steps, n = (x_shape[1], x_shape[0]) if batch_first else (x_shape[0], x_shape[1])
        bs = [n] * steps
        stride = steps if batch_first else 1
        off = [t * (1 if batch_first else n) for t in range(steps)]
    else:
        bs = list(batch_sizes)
        steps = len(bs)
        stride = 1
        off = [0] * steps
        for t in range(1, steps):
            off[t] = off[t - 1] + bs[t - 1]
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    rows = [slice(lo, lo + (b - 1) * stride + 1, stride) for lo, b in zip(off, bs)]
    return order, off, bs, stride, rows


class _FusedLayer(Function):
    """One direction of one recurrent layer over the whole sequence, one node.

    Inputs: ``x`` (T, N, I) time-major ((N, T, I) when ``batch_first``), or
    packed data (sum(batch_sizes), I); the initial states ``h0`` (N, H_out) and,
    for the LSTM, ``c0`` (N, H), each with a leading dimension of 1 when ``lead``;
    the layer's weights and biases (None where absent).  Outputs: the hidden state
    of every step, shaped as ``x`` with H_out features, the final h and, for the
    LSTM, the final c, shaped as h0 and c0.  The node's name is the one PyTorch's
    CPU build gives its fused LSTM layer (``MkldnnRnnLayerBackward0``; cuDNN's is
    ``CudnnRnnBackward0``).
    """
    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, mode, reverse, batch_sizes,
                lead, batch_first):
        from compiler import rnn_kernels as K
        xd = np.asarray(x._data)
        dt = xd.dtype
        x2 = np.ascontiguousarray(xd).reshape(-1, xd.shape[-1])
        order, off, bs, stride, rows = _schedule(xd.shape, batch_sizes, reverse,
                                                 batch_first)
        n_rows = x2.shape[0]
        wih, whh, whr = _array(w_ih, dt), _array(w_hh, dt), _array(w_hr, dt)
        gate_size, h_out_size = whh.shape
        # the input projection of every step, and the biases, at once
        gates = x2 @ wih.T
        if b_ih is not None:
            if mode == 'GRU':
                gates += _array(b_ih, dt)
            else:
                gates += _array(b_ih, dt) + _array(b_hh, dt)
        h_state = np.array(h0._data, dtype=dt, order='C').reshape(-1, h_out_size)
        hh = np.empty((h_state.shape[0], gate_size), dt)
        h_prev = np.empty((n_rows, h_out_size), dt)
        out = np.empty((n_rows, h_out_size), dt)
        # W_hh^T laid out contiguously: OpenBLAS's small products run twice as fast
        # on it as on the transposed view
        whh_t = np.ascontiguousarray(whh.T)
        c_state = None
        if mode == 'LSTM':
            hs = gate_size // 4
            proj = whr is not None
            c_state = np.array(c0._data, dtype=dt, order='C').reshape(-1, hs)
            c_prev = np.empty((n_rows, hs), dt)
            tanh_c = np.empty((n_rows, hs), dt)
            h_cell = np.empty((n_rows, hs), dt) if proj else out
            whr_t = np.ascontiguousarray(whr.T) if proj else None
            for t in order:
                b, lo = bs[t], off[t]
                np.matmul(h_state[:b], whh_t, out=hh[:b])
                K.lstm_forward_step(gates, hh, c_state, c_prev, tanh_c, h_state, h_prev,
                                    h_cell, lo, b, stride, proj)
                if proj:
                    step_out = out[rows[t]]
                    np.matmul(h_cell[rows[t]], whr_t, out=step_out)
                    h_state[:b] = step_out
            ctx.arrays = (gates, c_prev, tanh_c, h_prev, h_cell if proj else None)
        elif mode == 'GRU':
            bhh = _array(b_hh, dt) if b_hh is not None else np.zeros(gate_size, dt)
            hh_n = np.empty((n_rows, gate_size // 3), dt)
            for t in order:
                b, lo = bs[t], off[t]
                np.matmul(h_state[:b], whh_t, out=hh[:b])
                K.gru_forward_step(gates, hh, bhh, hh_n, h_state, h_prev, out, lo, b, stride)
            ctx.arrays = (gates, hh_n, h_prev)
        else:
            relu = mode == 'RNN_RELU'
            for t in order:
                b, lo = bs[t], off[t]
                np.matmul(h_state[:b], whh_t, out=hh[:b])
                K.rnn_forward_step(gates, hh, h_state, h_prev, out, lo, b, stride, relu)
            # the outputs, kept apart from the returned tensor that may be changed in place
            ctx.arrays = (out.copy(), h_prev)
        ctx.mode, ctx.reverse, ctx.batch_sizes = mode, reverse, batch_sizes
        ctx.lead, ctx.batch_first = lead, batch_first
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr)
        # The biases apart: BPTT never reads them, so (as in PyTorch, whose graph
        # keeps the gates, not the biases) a bias changed in place after forward
        # still backpropagates; only the create_graph recompute unpacks them.
        ctx.biases = tuple(None if b is None else _Saved(b) for b in (b_ih, b_hh))
        res = (_leaf(out.reshape(xd.shape[:-1] + (h_out_size,))),
               _leaf(h_state.reshape(h0.shape)))
        return res + (_leaf(c_state.reshape(c0.shape)),) if mode == 'LSTM' else res

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        if grad_mode.enabled:
            biases = tuple(None if b is None else b.unpack(ctx._fn_name) for b in ctx.biases)
            return _fused_backward_tensors(ctx, saved[:5] + biases + saved[5:], grads)
        return _fused_backward(ctx, saved[:5] + (None, None) + saved[5:], grads)


def _fused_backward(ctx, saved, grads):
    """Backpropagation through time in NumPy and the step kernels; returns the
    gradients of _FusedLayer's inputs."""
    from compiler import rnn_kernels as K
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = saved
    mode = ctx.mode
    need = ctx.needs_input_grad
    xd = np.asarray(x._data)
    dt = xd.dtype
    order, off, bs, stride, rows = _schedule(xd.shape, ctx.batch_sizes, ctx.reverse,
                                             ctx.batch_first)
    whh = _array(w_hh, dt)
    gate_size, h_out_size = whh.shape
    n_rows = int(math.prod(xd.shape[:-1]))
    g_out, g_h = grads[0], grads[1]
    dout = np.zeros((n_rows, h_out_size), dt) if g_out is None else \
        np.ascontiguousarray(np.asarray(g_out._data, dtype=dt)).reshape(n_rows, h_out_size)
    n = h0.shape[-2]
    dh = np.zeros((n, h_out_size), dt) if g_h is None else \
        np.array(g_h._data, dtype=dt, order='C').reshape(n, h_out_size)
    dgates = np.empty((n_rows, gate_size), dt)
    dgates_h = dgates          # the hidden projection's pre-activation gradient
    dc = None
    g_whr = None
    if mode == 'LSTM':
        gates, c_prev, tanh_c, h_prev, h_cell = ctx.arrays
        hs = gate_size // 4
        g_c = grads[2]
        dc = np.zeros((n, hs), dt) if g_c is None else \
            np.array(g_c._data, dtype=dt, order='C').reshape(n, hs)
        if h_cell is not None:
            whr = _array(w_hr, dt)
            dh_full = np.empty((n_rows, h_out_size), dt)
            dh_cell = np.empty((n_rows, hs), dt)
            zeros = np.zeros((n, hs), dt)
            for t in reversed(order):
                b, lo = bs[t], off[t]
                step_dh = dh_full[rows[t]]
                np.add(dh[:b], dout[rows[t]], out=step_dh)
                np.matmul(step_dh, whr, out=dh_cell[rows[t]])
                K.lstm_backward_step(gates, c_prev, tanh_c, zeros, dh_cell, dc, dgates, lo, b,
                                     stride)
                np.matmul(dgates[rows[t]], whh, out=dh[:b])
            if need[7]:
                g_whr = dh_full.T @ h_cell
        else:
            for t in reversed(order):
                b, lo = bs[t], off[t]
                K.lstm_backward_step(gates, c_prev, tanh_c, dh, dout, dc, dgates, lo, b, stride)
                np.matmul(dgates[rows[t]], whh, out=dh[:b])
    elif mode == 'GRU':
        gates, hh_n, h_prev = ctx.arrays
        dgates_h = np.empty((n_rows, gate_size), dt)
        tmp = np.empty((n, h_out_size), dt)
        for t in reversed(order):
            b, lo = bs[t], off[t]
            K.gru_backward_step(gates, hh_n, h_prev, dh, dout, dgates, dgates_h, lo, b, stride)
            np.matmul(dgates_h[rows[t]], whh, out=tmp[:b])
            dh[:b] += tmp[:b]
    else:
        h_out, h_prev = ctx.arrays
        relu = mode == 'RNN_RELU'
        for t in reversed(order):
            b, lo = bs[t], off[t]
            K.rnn_backward_step(h_out, dh, dout, dgates, lo, b, stride, relu)
            np.matmul(dgates[rows[t]], whh, out=dh[:b])
    g_x = g_wih = g_whh = g_bih = g_bhh = None
    if need[0]:
        g_x = _leaf((dgates @ _array(w_ih, dt)).reshape(xd.shape))
    if need[3]:
        g_wih = _leaf(dgates.T @ np.ascontiguousarray(xd).reshape(n_rows, -1))
    if need[4]:
        g_whh = _leaf(dgates_h.T @ h_prev)
    if need[5]:
        g_bih = _leaf(dgates.sum(0))
    if need[6]:
        # the LSTM's and the RNN's two biases have one gradient
        g_bhh = _leaf(g_bih._data.copy() if dgates_h is dgates and need[5]
                      else dgates_h.sum(0))
    return (g_x, _leaf(dh.reshape(h0.shape)) if need[1] else None,
            _leaf(dc.reshape(c0.shape)) if dc is not None and need[2] else None,
            g_wih, g_whh, g_bih, g_bhh, None if g_whr is None else _leaf(g_whr),
            None, None, None, None, None)


def _fused_backward_tensors(ctx, saved, grads):
    """_FusedLayer's backward under create_graph: the composite layer recomputed
    in tape ops from the saved inputs and differentiated with create_graph, so
    the gradient is itself recorded, to any order."""
    from .. import autograd
    need = ctx.needs_input_grad
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = saved
    hs = w_hh.shape[0] // _GATES[ctx.mode]
    outs = _composite_as_fused(ctx.mode, hs, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr,
                               ctx.reverse, ctx.batch_sizes, ctx.lead, ctx.batch_first)
    pairs = [(o, g) for o, g in zip(outs, grads) if o is not None and g is not None]
    wrt = [i for i in range(8) if need[i]]
    res = [None] * 13
    if not pairs or not wrt:
        return tuple(res)
    got = autograd.grad([o for o, _ in pairs], [saved[i] for i in wrt],
                        [g for _, g in pairs], create_graph=True, allow_unused=True)
    for i, g in zip(wrt, got):
        res[i] = g
    return tuple(res)


# the node PyTorch's CPU build records for its fused LSTM layer
_FusedLayer._backward_name = 'MkldnnRnnLayerBackward0'


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters, their init, the argument checks
    and the layer/direction loop."""
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        # PyTorch's checks and messages, in its order
        if not isinstance(dropout, _numbers.Number) or not 0 <= dropout <= 1 \
                or isinstance(dropout, bool):
            raise ValueError('dropout should be a number in range [0, 1] representing the '
                             'probability of an element being zeroed')
        if dropout > 0 and num_layers == 1:
            _warnings.warn('dropout option adds dropout after all but last recurrent layer, '
                           'so non-zero dropout expects num_layers greater than 1, but got '
                           f'dropout={dropout} and num_layers={num_layers}', stacklevel=3)
        if not isinstance(bias, bool):
            raise TypeError(f'bias should be of type bool, got: {type(bias).__name__}')
        if not isinstance(batch_first, bool):
            raise TypeError(f'batch_first should be of type bool, got: '
                            f'{type(batch_first).__name__}')
        if not isinstance(input_size, int):
            raise TypeError(f'input_size should be of type int, got: {type(input_size).__name__}')
        if input_size <= 0:
            raise ValueError('input_size must be greater than zero')
        if not isinstance(hidden_size, int):
            raise TypeError(f'hidden_size should be of type int, got: '
                            f'{type(hidden_size).__name__}')
        if hidden_size <= 0:
            raise ValueError('hidden_size must be greater than zero')
        if num_layers <= 0:
            raise ValueError('num_layers must be greater than zero')
        if proj_size < 0:
            raise ValueError('proj_size should be a positive integer or zero to disable '
                             'projections')
        if proj_size >= hidden_size:
            raise ValueError('proj_size has to be smaller than hidden_size')
        if mode not in _GATES:
            raise ValueError('Unrecognized RNN mode: ' + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        num_directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = '_reverse' if direction == 1 else ''
                params = [('weight_ih', (gate_size, layer_input)),
                          ('weight_hh', (gate_size, real_hidden))]
                if bias:
                    params += [('bias_ih', (gate_size,)), ('bias_hh', (gate_size,))]
                if proj_size > 0:
                    params += [('weight_hr', (proj_size, hidden_size))]
                names = []
                for base, shape in params:
                    name = f'{base}_l{layer}{suffix}'
                    setattr(self, name, _empty(shape, dtype))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / _math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self):
        # read from the module each time, so an assigned or loaded weight is used
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op kept for PyTorch code that calls it (it matters for cuDNN only)."""

    def extra_repr(self):
        s = '{input_size}, {hidden_size}'
        if self.proj_size != 0:
            s += ', proj_size={proj_size}'
        if self.num_layers != 1:
            s += ', num_layers={num_layers}'
        if self.bias is not True:
            s += ', bias={bias}'
        if self.batch_first is not False:
            s += ', batch_first={batch_first}'
        if self.dropout != 0:
            s += ', dropout={dropout}'
        if self.bidirectional is not False:
            s += ', bidirectional={bidirectional}'
        return s.format(**self.__dict__)

    # -- forward ---------------------------------------------------------------
    def _check_input(self, input):  # noqa: A002
        w = self._flat_weights[0]
        if np.dtype(input.dtype) != np.dtype(w.dtype):
            raise ValueError(f'RNN input dtype ({_dt_name(input)}) does not match weight dtype '
                             f'({_dt_name(w)}). Convert input: input.to({_dt_name(w)}), or '
                             f'convert model: model.to({_dt_name(input)})')
        if input.size(-1) != self.input_size:
            raise RuntimeError(f'input.size(-1) must be equal to input_size. Expected '
                               f'{self.input_size}, got {input.size(-1)}')

    def _expected_hidden(self, input, hidden_size):  # noqa: A002
        batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), batch, hidden_size)

    @staticmethod
    def _check_hidden(hx, expected, msg='Expected hidden size {}, got {}'):
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def _check_state_dtype(self, h0):
        # PyTorch's first product of a step is h0 @ W_hh^T, which fails on a state of
        # another dtype; the fused layer would otherwise cast the state silently
        w = self._flat_weights[0]
        if np.dtype(h0.dtype) != np.dtype(w.dtype):
            raise RuntimeError(f'mat1 and mat2 must have the same dtype, but got '
                               f'{_scalar_name(h0)} and {_scalar_name(w)}')

    def _run(self, x, h0, c0, batch_first=False):
        """The stacked, possibly bidirectional recurrence over time-major ``x``
        (T, N, I), or (N, T, I) when ``batch_first``, from the states ``h0`` (and
        ``c0``) of shape (L*D, N, H); returns the output (T, N, D*H), or (N, T, D*H),
        and the final states, stacked as h0."""
        return self._stack_layers(x, None, h0, c0, 2, batch_first)

    def _run_packed(self, data, batch_sizes, h0, c0):
        """The recurrence over packed ``data`` (sum(batch_sizes), I), whose step t
        holds the first ``batch_sizes[t]`` sequences (sorted, longest first), from the
        states ``h0`` (and ``c0``) of shape (L*D, B, H); returns the packed output
        (sum(batch_sizes), D*H) and the final states, each row taken at its
        sequence's last step."""
        return self._stack_layers(data, [int(b) for b in batch_sizes], h0, c0, 1)

    def _stack_layers(self, x, batch_sizes, h0, c0, feature_dim, batch_first=False):
        """The layer/direction loop shared by ``_run`` and ``_run_packed``: each
        direction's outputs are concatenated along ``feature_dim``, and dropout
        applies between layers in training."""
        num_directions = 2 if self.bidirectional else 1
        if self.num_layers == 1 and num_directions == 1:
            # the states are the layer's own, with their leading dimension of 1
            p = {n.split('_l')[0]: getattr(self, n) for n in self._all_weights[0]}
            return _layer(self.mode, self.hidden_size, x, h0, c0, p['weight_ih'],
                          p['weight_hh'], p.get('bias_ih'), p.get('bias_hh'),
                          p.get('weight_hr'), False, batch_sizes, lead=True,
                          batch_first=batch_first)
        h_last, c_last = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                k = layer * num_directions + direction
                p = {n.split('_l')[0]: getattr(self, n) for n in self._all_weights[k]}
                out, h, c = _layer(self.mode, self.hidden_size, layer_in, h0[k],
                                   c0[k] if c0 is not None else None, p['weight_ih'],
                                   p['weight_hh'], p.get('bias_ih'), p.get('bias_hh'),
                                   p.get('weight_hr'), direction == 1, batch_sizes,
                                   batch_first=batch_first)
                outs.append(out)
                h_last.append(h)
                c_last.append(c)
            layer_in = outs[0] if num_directions == 1 else _sh.cat(outs, feature_dim)
            # dropout between layers, on every output but the last layer's, in training
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        h_n = _sh.stack(h_last, 0)
        c_n = _sh.stack(c_last, 0) if c0 is not None else None
        return layer_in, h_n, c_n

    def _forward_packed(self, packed, hx, kind):
        """``_forward`` for a PackedSequence input, as PyTorch: the states are
        permuted into the sorted batch order, and the final ones back."""
        lstm = kind == 'LSTM'
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        bs = np.asarray(batch_sizes._data if hasattr(batch_sizes, '_data') else batch_sizes)
        bs = bs.astype(np.int64).reshape(-1)
        max_batch = int(bs[0]) if bs.size else 0
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        n_states = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            states = [_zeros((n_states, max_batch, real_hidden), data)]
            if lstm:
                states.append(_zeros((n_states, max_batch, self.hidden_size), data))
        else:
            states = list(hx) if lstm else [hx]
            if sorted_indices is not None:
                states = [_permute(s, sorted_indices) for s in states]
        w = self._flat_weights[0]
        if np.dtype(data.dtype) != np.dtype(w.dtype):
            if lstm:    # PyTorch's LSTM leaves this check to its matmul
                raise RuntimeError(f'mat1 and mat2 must have the same dtype, but got '
                                   f'{_scalar_name(data)} and {_scalar_name(w)}')
            self._check_input(data)
        if data.dim() != 2:
            raise RuntimeError(f'input must have 2 dimensions, got {data.dim()}')
        self._check_input(data)
        expected = (n_states, max_batch, real_hidden)
        if lstm:
            self._check_hidden(states[0], expected, 'Expected hidden[0] size {}, got {}')
            self._check_hidden(states[1], (n_states, max_batch, self.hidden_size),
                               'Expected hidden[1] size {}, got {}')
        else:
            self._check_hidden(states[0], expected)
        self._check_state_dtype(states[0])
        out, h_n, c_n = self._run_packed(data, bs, states[0], states[1] if lstm else None)
        if unsorted_indices is not None:
            h_n = _permute(h_n, unsorted_indices)
            c_n = _permute(c_n, unsorted_indices) if c_n is not None else None
        out = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        return (out, (h_n, c_n)) if lstm else (out, h_n)

    def _forward(self, input, hx, kind):  # noqa: A002
        """Shared by RNN/GRU (``hx`` a tensor) and LSTM (``hx`` a pair)."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx, kind)
        lstm = kind == 'LSTM'
        if input.dim() not in (2, 3):
            if lstm:
                raise ValueError(f'LSTM: Expected input to be 2D or 3D, got {input.dim()}D '
                                 'instead')
            raise ValueError(f'{kind}: Expected input to be 2D or 3D, got {input.dim()}D '
                             'tensor instead')
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)  # noqa: A001
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is not None:
            states = list(hx) if lstm else [hx]
            want = 3 if batched else 2
            if any(s.dim() != want for s in states):
                if lstm:
                    raise RuntimeError(
                        f'For {"batched 3" if batched else "unbatched 2"}-D input, hx and cx '
                        f'should also be {want}-D but got ({states[0].dim()}-D, '
                        f'{states[1].dim()}-D) tensors')
                raise RuntimeError(f'For {"batched 3" if batched else "unbatched 2"}-D input, '
                                   f'hx should also be {want}-D but got {states[0].dim()}-D '
                                   'tensor')
            if not batched:
                states = [s.unsqueeze(1) for s in states]
        self._check_input(input)
        if hx is None:
            states = [_zeros(self._expected_hidden(input, real_hidden), input)]
            if lstm:
                states.append(_zeros(self._expected_hidden(input, self.hidden_size), input))
        if lstm:
            self._check_hidden(states[0], self._expected_hidden(input, real_hidden),
                               'Expected hidden[0] size {}, got {}')
            self._check_hidden(states[1], self._expected_hidden(input, self.hidden_size),
                               'Expected hidden[1] size {}, got {}')
        else:
            self._check_hidden(states[0], self._expected_hidden(input, self.hidden_size))
        self._check_state_dtype(states[0])
        # the fused layers read and write batch-first sequences as they are
        fused_bf = self.batch_first and _fused_ok(input)
        x = input.transpose(0, 1) if self.batch_first and not fused_bf else input
        if x.size(1 if fused_bf else 0) == 0:
            raise RuntimeError('Expected sequence length to be larger than 0 in RNN')
        out, h_n, c_n = self._run(x, states[0], states[1] if lstm else None, fused_bf)
        if self.batch_first and not fused_bf:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        return (out, (h_n, c_n)) if lstm else (out, h_n)


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, act tanh or
    relu (``nonlinearity``). ``forward(input, hx=None)`` returns (output, h_n)."""
    def __init__(self, *args, **kwargs):
        if 'proj_size' in kwargs:
            raise ValueError('proj_size argument is only supported for LSTM, not RNN or GRU')
        # nonlinearity is the 4th positional argument, as in PyTorch
        if len(args) > 3:
            self.__dict__['nonlinearity'] = args[3]
            args = args[:3] + args[4:]
        else:
            self.__dict__['nonlinearity'] = kwargs.pop('nonlinearity', 'tanh')
        if self.nonlinearity == 'tanh':
            mode = 'RNN_TANH'
        elif self.nonlinearity == 'relu':
            mode = 'RNN_RELU'
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):  # noqa: A002
        return self._forward(input, hx, 'RNN')


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o; with ``proj_size`` > 0 the hidden
    state is projected by ``weight_hr``. ``forward(input, (h0, c0)=None)`` returns
    (output, (h_n, c_n))."""
    def __init__(self, *args, **kwargs):
        super().__init__('LSTM', *args, **kwargs)

    def forward(self, input, hx=None):  # noqa: A002
        return self._forward(input, hx, 'LSTM')


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n with
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.
    ``forward(input, hx=None)`` returns (output, h_n)."""
    def __init__(self, *args, **kwargs):
        if 'proj_size' in kwargs:
            raise ValueError('proj_size argument is only supported for LSTM, not RNN or GRU')
        super().__init__('GRU', *args, **kwargs)

    def forward(self, input, hx=None):  # noqa: A002
        return self._forward(input, hx, 'GRU')


# -- cells ---------------------------------------------------------------------------
class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = _empty((num_chunks * hidden_size, input_size), dtype)
        self.weight_hh = _empty((num_chunks * hidden_size, hidden_size), dtype)
        if bias:
            self.bias_ih = _empty((num_chunks * hidden_size,), dtype)
            self.bias_hh = _empty((num_chunks * hidden_size,), dtype)
        else:
            self.register_parameter('bias_ih', None)
            self.register_parameter('bias_hh', None)
        self.reset_parameters()

    def extra_repr(self):
        s = '{input_size}, {hidden_size}'
        if 'bias' in self.__dict__ and self.bias is not True:
            s += ', bias={bias}'
        if 'nonlinearity' in self.__dict__ and self.nonlinearity != 'tanh':
            s += ', nonlinearity={nonlinearity}'
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / _math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @staticmethod
    def _check_input_dim(input, name):  # noqa: A002
        # before the states' checks, as in PyTorch
        if input.dim() not in (1, 2):
            raise ValueError(f'{name}: Expected input to be 1D or 2D, got {input.dim()}D '
                             'instead')

    def _prepare(self, input, states, name):  # noqa: A002
        """Checks dimensions, adds the batch dimension to unbatched input and states and
        makes zero states where none were given; returns (batched, input, states).
        The states' batch and hidden sizes are checked as PyTorch's cell ops do
        (``hidden{i}``), so a mismatched state fails there, not in a broadcast."""
        self._check_input_dim(input, name)
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)  # noqa: A001
        if input.size(1) != self.input_size:
            raise RuntimeError(f'input has inconsistent input_size: got {input.size(1)} '
                               f'expected {self.input_size}')
        out = []
        for i, s in enumerate(states):
            if s is None:
                out.append(_zeros((input.size(0), self.hidden_size), input))
                continue
            s = s if batched else s.unsqueeze(0)
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} "
                                   f'batch size {s.size(0)}')
            if s.size(1) != self.hidden_size:
                raise RuntimeError(f'hidden{i} has inconsistent hidden_size: got {s.size(1)}, '
                                   f'expected {self.hidden_size}')
            out.append(s)
        return batched, input, out

    def _project(self, input, h):  # noqa: A002
        return (F.linear(input, self.weight_ih, self.bias_ih),
                F.linear(h, self.weight_hh, self.bias_hh))


class RNNCell(RNNCellBase):
    """``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``, act tanh or relu."""
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity='tanh', device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input_dim(input, 'RNNCell')
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f'RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D '
                             'instead')
        batched, x, (h,) = self._prepare(input, [hx], 'RNNCell')
        if self.nonlinearity not in ('tanh', 'relu'):
            raise RuntimeError(f'Unknown nonlinearity: {self.nonlinearity}')
        xp, hp = self._project(x, h)
        out = (xp + hp).tanh() if self.nonlinearity == 'tanh' else (xp + hp).relu()
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``forward(input, (h, c)=None)`` returns (h', c')."""
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input_dim(input, 'LSTMCell')
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f'LSTMCell: Expected hx[{idx}] to be 1D or 2D, got '
                                     f'{value.dim()}D instead')
        batched, x, (h, c) = self._prepare(input, list(hx) if hx is not None else [None, None],
                                           'LSTMCell')
        xp = F.linear(x, self.weight_ih, self.bias_ih)
        h2, c2 = _step('LSTM', xp, h, c, self.weight_hh, self.bias_hh, None, self.hidden_size)
        return (h2, c2) if batched else (h2.squeeze(0), c2.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n): ``forward(input, hx=None)`` returns h'."""
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input_dim(input, 'GRUCell')
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f'GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D '
                             'instead')
        batched, x, (h,) = self._prepare(input, [hx], 'GRUCell')
        xp = F.linear(x, self.weight_ih, self.bias_ih)
        h2, _ = _step('GRU', xp, h, None, self.weight_hh, self.bias_hh, None, self.hidden_size)
        return h2 if batched else h2.squeeze(0)
