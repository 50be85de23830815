"""Benchmarks W1-W8 of DESIGN.md and model training steps (M0-M3): tape against
PyTorch (and JAX, HIPS autograd).

Run with ``make bench`` (or ``python examples/bench.py``). Options:

    --quick          very few repeats (a smoke test, numbers are noisy)
    --only W1,W6     run only these workloads (W5 selects its three rows, M the
                     four model steps)

What it measures
    Each workload is written once as a function of a module-like ``lib``
    (``tape`` or ``torch``; their APIs match) and timed in this process, both
    libraries side by side.  Every library runs single-threaded: PyTorch through
    ``torch.set_num_threads(1)``; NumPy's BLAS and Numba through the
    ``*_NUM_THREADS`` variables set below before NumPy is imported.  A timing
    is the median over repeats of the time per call; each repeat runs the call
    enough times to last at least ``target`` seconds, the libraries' repeats
    taken in turn so that a machine slowing down for a while slows both sides
    of a ratio, after a warm-up (tape's
    first backward loads or compiles the Numba sweep; that cost is W8's
    subject, not the other rows').  Before timing, tape's gradients are
    compared with PyTorch's from the same inputs (after two calls, so W2's
    update and W5's accumulation are covered too); a "MISMATCH" note says
    when they differ.

How to read the table
    ``torch`` and ``tape`` are the time of one call (W4: of one training
    iteration), ``ratio`` is torch time / tape time, so above 1x means tape is
    faster.  JAX and HIPS autograd columns appear only where importable; JAX
    is timed compiled (``jit``), after compilation.  "n/a" means the library
    failed on that workload (the reason is in the notes under the table);
    "-" means this script has no version of the workload for that library.

    W3 also prints the memory bandwidth of a plain copy measured in the same
    run and the backward-only times against the "bandwidth floor" of its
    backward.  W8 runs fresh processes; its rows are whole-process wall times
    (interpreter start included; the notes give the interpreter's own start
    time and the import / first-gradient split).
"""
import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS',
             'NUMBA_NUM_THREADS', 'VECLIB_MAXIMUM_THREADS'):
    os.environ.setdefault(_var, '1')

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# Workload sizes, as DESIGN.md fixes them.
W1_STEPS = 100
W3_N = 4_000_000
W4_BATCH = 8
W5_SHAPE = (100, 100)
W6_STEPS = 1000
W7_DIM = 100


class Config:
    """How hard to time: repeats per measurement and the least duration of one repeat."""

    def __init__(self, quick):
        self.quick = quick
        self.repeats = 2 if quick else 11
        self.target = 0.002 if quick else 0.03      # seconds per repeat, at least
        self.warmup = 1 if quick else 3
        self.w4_iters = 100 if quick else 2000      # W4 iterations per repeat
        self.w8_warm = 1 if quick else 3            # fresh processes per W8 row
        self.w8_cold = 1 if quick else 2


# ----------------------------------------------------------------- libraries
def _import(name):
    try:
        return importlib.import_module(name), None
    except Exception as e:  # noqa: BLE001  (any import failure means "not installed")
        return None, f'{type(e).__name__}: {e}'


def _fresh_data():
    """One set of NumPy inputs, shared by every library so gradients can be compared."""
    rng = np.random.default_rng(1234)
    f32 = np.float32
    return {
        'w1_x': rng.standard_normal(16), 'w1_w': rng.standard_normal(16) * 0.5,
        'w1_b': rng.standard_normal(16) * 0.1,
        'w2_X': rng.standard_normal((64, 784)).astype(f32),
        'w2_Y': rng.standard_normal((64, 10)).astype(f32),
        'w2_W1': (rng.standard_normal((784, 256)) / np.sqrt(784)).astype(f32),
        'w2_b1': np.zeros(256, f32),
        'w2_W2': (rng.standard_normal((256, 10)) / np.sqrt(256)).astype(f32),
        'w2_b2': np.zeros(10, f32),
        'w3_x': rng.standard_normal(W3_N),
        'w4_x': (rng.random((W4_BATCH, 1)) * 20).astype(f32),
        'w4_y': None,  # filled below from w4_x
        'w4_w': rng.random((1, 1)).astype(f32), 'w4_b': np.zeros((1, 1), f32),
        'w5_x': rng.standard_normal(W5_SHAPE).astype(f32),
        'w6_h': 0.5,
        'w7_x': rng.standard_normal(W7_DIM), 'w7_v': rng.standard_normal(W7_DIM),
        # model steps (M rows), drawn after the W data so that stays as it was
        'm_mlp_x': rng.standard_normal((32, 20)).astype(f32),
        'm_mlp_y': rng.integers(0, 3, 32),
        'm_lstm_x': rng.standard_normal((16, 20, 32)).astype(f32),
        'm_lstm_y': rng.standard_normal((16, 1)).astype(f32),
        'm_cnn_x': rng.standard_normal((32, 1, 28, 28)).astype(f32),
        'm_cnn_y': rng.integers(0, 10, 32),
        'm_tfm_x': rng.standard_normal((8, 16, 64)).astype(f32),
    }


def _data():
    d = _fresh_data()
    rng = np.random.default_rng(99)
    d['w4_y'] = (d['w4_x'] * 2 + (1 + rng.standard_normal((W4_BATCH, 1))) * 3).astype(np.float32)
    return d


def _T(lib, arr, requires_grad=False):
    return lib.tensor(arr, requires_grad=requires_grad)


def _np(t):
    """A tensor (or array) as a NumPy array; None stays None."""
    if t is None:
        return None
    if hasattr(t, 'detach'):
        return np.array(t.detach().numpy(), copy=True)
    return np.array(t, copy=True)


# ------------------------------------------------------------------ workloads
# A build function takes (lib, d) and returns (step, grads): step() runs one
# timed call, grads() returns the gradients of the last call as NumPy arrays.

def w1_build(lib, d):
    """W1 chain: 100 steps of h = tanh(h*w + b) on (16,) float64, then h.sum().backward()."""
    x = _T(lib, d['w1_x'])
    w = _T(lib, d['w1_w'], True)
    b = _T(lib, d['w1_b'], True)

    def step():
        w.grad = None
        b.grad = None
        h = x
        for _ in range(W1_STEPS):
            h = lib.tanh(h * w + b)
        h.sum().backward()
    return step, lambda: [_np(w.grad), _np(b.grad)]


def _jit(lib):
    """tape.jit for tape; PyTorch runs the same function eagerly (its rows stay eager)."""
    return lib.jit if getattr(lib, '__name__', '') == 'tape' else (lambda f: f)


def w1j_build(lib, d):
    """W1 with the chain and its sum under tape.jit (traced once, then replayed)."""
    x = _T(lib, d['w1_x'])
    w = _T(lib, d['w1_w'], True)
    b = _T(lib, d['w1_b'], True)

    @_jit(lib)
    def chain(w, b, x):
        h = x
        for _ in range(W1_STEPS):
            h = lib.tanh(h * w + b)
        return h.sum()

    def step():
        w.grad = None
        b.grad = None
        chain(w, b, x).backward()
    return step, lambda: [_np(w.grad), _np(b.grad)]


def w2_build(lib, d):
    """W2 MLP step: float32, tanh hidden layer of 256, MSE, backward, SGD under no_grad."""
    X, Y = _T(lib, d['w2_X']), _T(lib, d['w2_Y'])
    params = [_T(lib, d[k], True) for k in ('w2_W1', 'w2_b1', 'w2_W2', 'w2_b2')]
    W1, b1, W2, b2 = params
    lr = 0.01

    def step():
        for p in params:          # optimizer.zero_grad(set_to_none=True)
            p.grad = None
        h = lib.tanh(X.mm(W1) + b1)
        out = h.mm(W2) + b2
        loss = ((out - Y) ** 2).mean()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= lr * p.grad
    return step, lambda: [_np(p.grad) for p in params]


def w2m_build(lib, d):
    """W2 written with the module and optimizer APIs: nn.Linear stores its weight as
    (out, in) and computes x @ W.t() + b; optim.SGD updates the parameters."""
    X, Y = _T(lib, d['w2_X']), _T(lib, d['w2_Y'])
    lin1, lin2 = lib.nn.Linear(784, 256), lib.nn.Linear(256, 10)
    with lib.no_grad():        # the same initial values as W2 (the weights transposed)
        for lin, w, b in ((lin1, 'w2_W1', 'w2_b1'), (lin2, 'w2_W2', 'w2_b2')):
            lin.weight.copy_(_T(lib, np.ascontiguousarray(d[w].T)))
            lin.bias.copy_(_T(lib, d[b]))
    model = lib.nn.Sequential(lin1, lib.nn.Tanh(), lin2)
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = lib.nn.MSELoss()

    def step():
        opt.zero_grad()
        loss_fn(model(X), Y).backward()
        opt.step()
    return step, lambda: [_np(p.grad) for p in model.parameters()]


def _w3_forward(lib, x):
    return (x ** 2 * lib.exp(x)).sum()


def w3_build(lib, d):
    """W3 big elementwise: x of 4M float64, (x**2*exp(x)).sum().backward()."""
    x = _T(lib, d['w3_x'], True)

    def step():
        x.grad = None
        _w3_forward(lib, x).backward()
    return step, lambda: [_np(x.grad)]


def w3_split(lib, d):
    """W3 for the backward-only timing: (prepare, timed) where timed(prepare()) backwards."""
    x = _T(lib, d['w3_x'], True)

    def prepare():
        x.grad = None
        return _w3_forward(lib, x)

    def timed(y):
        y.backward()
    return prepare, timed


def _w4_loop(lib, get_fake_data, w, b, lr):
    x, y = get_fake_data()
    y_pred = x.mm(w) + b.expand_as(y)
    loss = 0.5 * (y_pred - y) ** 2
    loss = loss.sum()
    loss.backward()
    w.data.sub_(lr * w.grad.data)
    b.data.sub_(lr * b.grad.data)
    w.grad.data.zero_()
    b.grad.data.zero_()


def w4j_build(lib, d):
    """W4 with the seed's loss (mm, expand_as, the squared error, sum) under tape.jit;
    data and the update stay eager."""
    lib.manual_seed(1000)

    def get_fake_data(batch_size=W4_BATCH):
        x = lib.rand(batch_size, 1) * 20
        y = x * 2 + (1 + lib.randn(batch_size, 1)) * 3
        return x, y

    @_jit(lib)
    def loss_of(w, b, x, y):
        y_pred = x.mm(w) + b.expand_as(y)
        return (0.5 * (y_pred - y) ** 2).sum()

    w = lib.rand(1, 1, requires_grad=True)
    b = lib.zeros(1, 1, requires_grad=True)
    lr = 0.001

    def step():
        x, y = get_fake_data()
        loss_of(w, b, x, y).backward()
        w.data.sub_(lr * w.grad.data)
        b.data.sub_(lr * b.grad.data)
        w.grad.data.zero_()
        b.grad.data.zero_()
    return step, None


def w4j_check(lib, d):
    x, y = _T(lib, d['w4_x']), _T(lib, d['w4_y'])
    w, b = _T(lib, d['w4_w'], True), _T(lib, d['w4_b'], True)

    @_jit(lib)
    def loss_of(w, b, x, y):
        y_pred = x.mm(w) + b.expand_as(y)
        return (0.5 * (y_pred - y) ** 2).sum()
    loss_of(w, b, x, y)                       # the trace
    loss_of(w, b, x, y).backward()            # a replay
    return [_np(w.grad), _np(b.grad)]


def w4_build(lib, d):
    """W4 the seed's linear regression (one call = one iteration; the seed runs 8000).

    The seed's ``x, y = V(x), V(y)`` is left out: ``Variable`` has returned a
    plain tensor since PyTorch 0.4, and the plotting every 1000 steps too.
    """
    lib.manual_seed(1000)

    def get_fake_data(batch_size=W4_BATCH):
        x = lib.rand(batch_size, 1) * 20
        y = x * 2 + (1 + lib.randn(batch_size, 1)) * 3
        return x, y

    w = lib.rand(1, 1, requires_grad=True)
    b = lib.zeros(1, 1, requires_grad=True)
    lr = 0.001

    def step():
        _w4_loop(lib, get_fake_data, w, b, lr)
    return step, None


def w4_check(lib, d):
    """W4's gradients for one iteration on fixed data (the timed loop draws random data)."""
    x, y = _T(lib, d['w4_x']), _T(lib, d['w4_y'])
    w, b = _T(lib, d['w4_w'], True), _T(lib, d['w4_b'], True)
    y_pred = x.mm(w) + b.expand_as(y)
    loss = (0.5 * (y_pred - y) ** 2).sum()
    loss.backward()
    return [_np(w.grad), _np(b.grad)]


def _sigmoid_function(lib):
    """The seed's custom autograd.Function (forward saves its output)."""
    class Sigmoid(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            output = 1 / (1 + lib.exp(-x))
            ctx.save_for_backward(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            output, = ctx.saved_tensors
            return output * (1 - output) * grad_output
    return Sigmoid


def _w5_build(variant):
    def build(lib, d):
        if variant == 'function':
            f = _sigmoid_function(lib).apply
        elif variant == 'naive':
            def f(x):
                return 1 / (1 + lib.exp(-x))
        else:
            f = lib.sigmoid
        x = _T(lib, d['w5_x'], True)   # float32, as the seed's t.randn(100, 100)
        ones = lib.ones(x.size())
        state = {'first': True}

        def step():
            # like the seed's %timeit, x.grad accumulates across calls; only the
            # checked (first) call starts from None
            if state['first']:
                x.grad = None
                state['first'] = False
            y = f(x)
            y.backward(ones)
        return step, lambda: [_np(x.grad)]
    return build


def w6j_build(lib, d):
    """W6 with the 1000-step chain under tape.jit."""
    h0 = lib.tensor(d['w6_h'], dtype=lib.float64, requires_grad=True)

    @_jit(lib)
    def chain(h):
        for _ in range(W6_STEPS):
            h = h * 1.0001 + 0.001
        return h

    def step():
        h0.grad = None
        chain(h0).backward()
    return step, lambda: [_np(h0.grad)]


def w6_build(lib, d):
    """W6 scalar chain: 0-d float64, 1000 steps of h = h*1.0001 + 0.001, then backward."""
    h0 = lib.tensor(d['w6_h'], dtype=lib.float64, requires_grad=True)

    def step():
        h0.grad = None
        h = h0
        for _ in range(W6_STEPS):
            h = h * 1.0001 + 0.001
        h.backward()
    return step, lambda: [_np(h0.grad)]


def _same_params(lib, model):
    """Give ``model``'s parameters the same values in either library (their own
    initialisations draw from different generators): by position, from NumPy."""
    with lib.no_grad():
        for i, p in enumerate(model.parameters()):
            shape = tuple(p.shape)
            fan = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            values = np.random.default_rng([7, i]).standard_normal(shape) / np.sqrt(fan)
            p.copy_(_T(lib, values.astype(np.float32)))
    return model


def _model_step(model, opt, loss_of):
    def step():
        opt.zero_grad()
        loss_of().backward()
        opt.step()
    return step, lambda: [_np(p.grad) for p in model.parameters()]


def m_mlp_build(lib, d):
    """M0: a small classifier, (32,20)-64-64-3 with ReLU, cross entropy, SGD with momentum."""
    nn = lib.nn
    model = _same_params(lib, nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64),
                                            nn.ReLU(), nn.Linear(64, 3)))
    x, y = _T(lib, d['m_mlp_x']), _T(lib, d['m_mlp_y'])
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return _model_step(model, opt, lambda: nn.functional.cross_entropy(model(x), y))


def m_lstm_build(lib, d):
    """M1: an LSTM(32, 64) over (16, 20, 32), a linear head on the last step, MSE, Adam."""
    nn = lib.nn
    lstm, head = nn.LSTM(32, 64, batch_first=True), nn.Linear(64, 1)
    model = _same_params(lib, nn.ModuleList([lstm, head]))
    x, y = _T(lib, d['m_lstm_x']), _T(lib, d['m_lstm_y'])
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def loss():
        out, _ = lstm(x)
        return ((head(out[:, -1]) - y) ** 2).mean()
    return _model_step(model, opt, loss)


def m_cnn_build(lib, d):
    """M2: a LeNet-sized CNN on (32, 1, 28, 28): two 3x3 conv + ReLU + 2x2 max pool, a
    linear layer, cross entropy, SGD."""
    nn = lib.nn
    model = _same_params(lib, nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 10)))
    x, y = _T(lib, d['m_cnn_x']), _T(lib, d['m_cnn_y'])
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    return _model_step(model, opt, lambda: nn.functional.cross_entropy(model(x), y))


def m_tfm_build(lib, d):
    """M3: one TransformerEncoderLayer(64, 4 heads, 128, no dropout) on (8, 16, 64), Adam."""
    model = _same_params(lib, lib.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0,
                                                             batch_first=True))
    x = _T(lib, d['m_tfm_x'])
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    return _model_step(model, opt, lambda: (model(x) ** 2).mean())


def _rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def w7_build(lib, d):
    """W7 Hessian-vector product of the 100-dim Rosenbrock function by double backward."""
    x = _T(lib, d['w7_x'], True)
    v = _T(lib, d['w7_v'])
    out = {}

    def step():
        g, = lib.autograd.grad(_rosenbrock(x), x, create_graph=True)
        hv, = lib.autograd.grad((g * v).sum(), x)
        out['hv'] = hv
    return step, lambda: [_np(out['hv'])]


# ------------------------------------------- JAX and HIPS autograd versions
# Optional columns, used only when the package imports.  Same inputs, same
# math; JAX is jit-compiled (W6 uses lax.fori_loop: unrolling 1000 steps under
# jit would take minutes to compile).

def _jax():
    import jax
    import jax.numpy as jnp
    jax.config.update('jax_enable_x64', True)
    return jax, jnp


def _jax_result(jax, fn, *args):
    out = {}

    def step():
        out['g'] = jax.block_until_ready(fn(*args))

    def grads():
        g = out['g']
        return [np.asarray(a) for a in (g if isinstance(g, (tuple, list)) else [g])]
    return step, grads


def jax_w1(d):
    jax, jnp = _jax()

    def f(w, b, x):
        h = x
        for _ in range(W1_STEPS):
            h = jnp.tanh(h * w + b)
        return jnp.sum(h)
    g = jax.jit(jax.grad(f, argnums=(0, 1)))
    return _jax_result(jax, g, jnp.asarray(d['w1_w']), jnp.asarray(d['w1_b']),
                       jnp.asarray(d['w1_x']))


def jax_w2(d):
    jax, jnp = _jax()
    lr = 0.01

    def loss(params, X, Y):
        W1, b1, W2, b2 = params
        h = jnp.tanh(X @ W1 + b1)
        return jnp.mean((h @ W2 + b2 - Y) ** 2)

    @jax.jit
    def update(params, X, Y):
        g = jax.grad(loss)(params, X, Y)
        return [p - lr * gp for p, gp in zip(params, g)], g
    state = {'p': [jnp.asarray(d[k]) for k in ('w2_W1', 'w2_b1', 'w2_W2', 'w2_b2')]}
    X, Y = jnp.asarray(d['w2_X']), jnp.asarray(d['w2_Y'])

    def step():
        state['p'], state['g'] = jax.block_until_ready(update(state['p'], X, Y))
    return step, lambda: [np.asarray(a) for a in state['g']]


def jax_w3(d):
    jax, jnp = _jax()
    g = jax.jit(jax.grad(lambda x: jnp.sum(x ** 2 * jnp.exp(x))))
    return _jax_result(jax, g, jnp.asarray(d['w3_x']))


def jax_w6(d):
    jax, jnp = _jax()

    def f(h0):
        return jax.lax.fori_loop(0, W6_STEPS, lambda i, h: h * 1.0001 + 0.001, h0)
    return _jax_result(jax, jax.jit(jax.grad(f)), jnp.asarray(d['w6_h'], dtype=jnp.float64))


def jax_w7(d):
    jax, jnp = _jax()
    hvp = jax.jit(jax.grad(lambda x, v: jnp.sum(jax.grad(_rosenbrock)(x) * v)))
    return _jax_result(jax, hvp, jnp.asarray(d['w7_x']), jnp.asarray(d['w7_v']))


def _hips():
    import autograd
    import autograd.numpy as anp
    return autograd.grad, anp


def _hips_result(fn, *args):
    out = {}

    def step():
        out['g'] = fn(*args)

    def grads():
        g = out['g']
        return [np.asarray(a) for a in (g if isinstance(g, (tuple, list)) else [g])]
    return step, grads


def hips_w1(d):
    grad, anp = _hips()
    x = d['w1_x']

    def f(p):
        w, b = p
        h = x
        for _ in range(W1_STEPS):
            h = anp.tanh(h * w + b)
        return anp.sum(h)
    return _hips_result(grad(f), (d['w1_w'], d['w1_b']))


def hips_w2(d):
    grad, anp = _hips()
    X, Y = d['w2_X'], d['w2_Y']
    lr = np.float32(0.01)

    def loss(params):
        W1, b1, W2, b2 = params
        h = anp.tanh(anp.dot(X, W1) + b1)
        return anp.mean((anp.dot(h, W2) + b2 - Y) ** 2)
    g = grad(loss)
    state = {'p': [d[k].copy() for k in ('w2_W1', 'w2_b1', 'w2_W2', 'w2_b2')]}

    def step():
        gs = g(state['p'])
        state['g'] = gs
        state['p'] = [p - lr * gp for p, gp in zip(state['p'], gs)]
    return step, lambda: [np.asarray(a) for a in state['g']]


def hips_w3(d):
    grad, anp = _hips()
    return _hips_result(grad(lambda x: anp.sum(x ** 2 * anp.exp(x))), d['w3_x'])


def hips_w6(d):
    grad, anp = _hips()

    def f(h):
        for _ in range(W6_STEPS):
            h = h * 1.0001 + 0.001
        return h
    return _hips_result(grad(f), float(d['w6_h']))


def hips_w7(d):
    grad, anp = _hips()
    v = d['w7_v']
    hvp = grad(lambda x: anp.sum(grad(_rosenbrock)(x) * v))
    return _hips_result(hvp, d['w7_x'])


# key, row label, build(lib, d), check(lib, d) or None, tolerance dtype,
# {extra library: build(d)}
WORKLOADS = [
    ('W1', 'W1 chain, 100x tanh(h*w+b) on (16,) f64', w1_build, None, 'f64',
     {'jax': jax_w1, 'autograd': hips_w1}),
    ('W1', 'W1j the W1 chain under tape.jit (torch eager)', w1j_build, None, 'f64', {}),
    ('W2', 'W2 MLP step 64x784-256-10 f32 + SGD', w2_build, None, 'f32',
     {'jax': jax_w2, 'autograd': hips_w2}),
    ('W2', 'W2m the W2 MLP with nn.Linear + optim.SGD', w2m_build, None, 'f32', {}),
    ('W3', 'W3 (x**2*exp(x)).sum() fwd+bwd, 4M f64', w3_build, None, 'f64',
     {'jax': jax_w3, 'autograd': hips_w3}),
    ('W4', 'W4 seed linear regression, per iteration', w4_build, w4_check, 'f32', {}),
    ('W4', 'W4j its loss under tape.jit (torch eager), per iteration', w4j_build, w4j_check,
     'f32', {}),
    ('W5', 'W5a sigmoid (100,100) f32, custom Function', _w5_build('function'), None, 'f32', {}),
    ('W5', 'W5b sigmoid (100,100) f32, naive 1/(1+exp(-x))', _w5_build('naive'), None, 'f32',
     {}),
    ('W5', 'W5c sigmoid (100,100) f32, builtin sigmoid', _w5_build('builtin'), None, 'f32', {}),
    ('W6', 'W6 scalar chain, 1000x h*1.0001+0.001, 0-d f64', w6_build, None, 'f64',
     {'jax': jax_w6, 'autograd': hips_w6}),
    ('W6', 'W6j the W6 chain under tape.jit (torch eager)', w6j_build, None, 'f64', {}),
    ('W7', 'W7 Rosenbrock-100 HVP by double backward', w7_build, None, 'f64',
     {'jax': jax_w7, 'autograd': hips_w7}),
    # training steps of small models written with nn and optim (not DESIGN.md's)
    ('M', 'M0 MLP classifier step, (32,20)-64-64-3, CE + SGD', m_mlp_build, None, 'f32', {}),
    ('M', 'M1 LSTM(32,64) step on (16,20,32) + Adam', m_lstm_build, None, 'f32', {}),
    ('M', 'M2 CNN step, LeNet-sized on (32,1,28,28) + SGD', m_cnn_build, None, 'f32', {}),
    ('M', 'M3 TransformerEncoderLayer(64,4) step on (8,16,64) + Adam', m_tfm_build, None,
     'f32', {}),
]

DISPLAY = {'jax': 'JAX (jit)', 'autograd': 'HIPS autograd'}

TOL = {'f64': (1e-9, 1e-12), 'f32': (1e-4, 1e-5)}   # rtol, atol as a fraction of max|ref|


# -------------------------------------------------------------------- timing
def _run_n(step, n):
    gc.collect()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return time.perf_counter() - t0


def measure(step, cfg, inner=None):
    """Median seconds per call of ``step`` over ``cfg.repeats`` repeats.

    Each repeat runs ``inner`` calls, or (when None) as many as make it last
    ``cfg.target`` seconds, estimated from one call after the warm-up.
    """
    for _ in range(cfg.warmup):
        step()
    if inner is None:
        t1 = max(_run_n(step, 1), 1e-7)
        inner = max(1, int(np.ceil(cfg.target / t1)))
    return statistics.median(_run_n(step, inner) / inner for _ in range(cfg.repeats))


def measure_interleaved(steps, cfg, inner=None):
    """Median seconds per call of each library's step, the libraries' repeats
    taken in turn (torch, tape, torch, tape, ...): a machine that slows down
    for a few seconds then slows both sides of a ratio, not one.

    Returns (medians, failures): a library whose step raises is dropped, its
    exception in ``failures``."""
    counts, failures = {}, {}
    steps = dict(steps)
    for name, step in list(steps.items()):
        try:
            for _ in range(cfg.warmup):
                step()
            if inner is None:
                t1 = max(_run_n(step, 1), 1e-7)
                counts[name] = max(1, int(np.ceil(cfg.target / t1)))
            else:
                counts[name] = inner
        except Exception as e:  # noqa: BLE001  (report and go on)
            failures[name] = e
            del steps[name]
    times = {name: [] for name in steps}
    for _ in range(cfg.repeats):
        for name, step in list(steps.items()):
            try:
                times[name].append(_run_n(step, counts[name]) / counts[name])
            except Exception as e:  # noqa: BLE001
                failures[name] = e
                del steps[name]
                del times[name]
    return {name: statistics.median(ts) for name, ts in times.items()}, failures


def measure_split(prepare, timed, cfg):
    """Median seconds of ``timed(prepare())``, not counting ``prepare``."""
    for _ in range(cfg.warmup):
        timed(prepare())
    times = []
    for _ in range(cfg.repeats):
        a = prepare()
        gc.collect()
        t0 = time.perf_counter()
        timed(a)
        times.append(time.perf_counter() - t0)
        del a
    return statistics.median(times)


def fmt_time(s):
    if s is None:
        return 'n/a'
    if s < 1e-3:
        return f'{s * 1e6:.1f} us'
    if s < 1.0:
        return f'{s * 1e3:.2f} ms'
    return f'{s:.2f} s'


def _one_line(e):
    msg = str(e).strip().splitlines()
    msg = msg[0] if msg else ''
    if len(msg) > 160:
        msg = msg[:157] + '...'
    return f'{type(e).__name__}: {msg}'


def _failure(lib_name, label, e):
    # a missing public name or module is a feature not written yet; any other
    # error (an AttributeError inside tape included) is a failure
    missing = (isinstance(e, (NotImplementedError, ImportError))
               or (isinstance(e, AttributeError) and str(e).startswith('module ')))
    kind = 'not implemented yet' if missing else 'failed'
    return f'{label}: {lib_name} {kind} ({_one_line(e)})'


def _compare(ref, got, tol):
    """None when ``got`` matches ``ref`` (lists of arrays), else a short reason."""
    rtol, atol_rel = tol
    if len(ref) != len(got):
        return f'{len(got)} gradients, expected {len(ref)}'
    for i, (r, g) in enumerate(zip(ref, got)):
        if r is None or g is None:
            if r is None and g is None:
                continue
            return f'gradient {i} is None in {"reference" if r is None else "this library"}'
        r = np.asarray(r, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        if r.shape != g.shape:
            return f'gradient {i} has shape {g.shape}, expected {r.shape}'
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        if not np.allclose(g, r, rtol=rtol, atol=atol_rel * max(scale, 1e-30), equal_nan=True):
            err = float(np.max(np.abs(g - r)))
            return f'gradient {i}: max |diff| {err:.3g} (max |ref| {scale:.3g})'
    return None


# ----------------------------------------------------------------- W3 extras
def copy_bandwidth(cfg):
    """Bytes/second of np.copyto of a 4M float64 array into a preallocated one (read+write)."""
    src = np.random.default_rng(0).random(W3_N)
    dst = np.empty_like(src)

    def step():
        np.copyto(dst, src)
    t = measure(step, cfg)
    return 2 * src.nbytes / t, t


# W3's backward must at least read the saved arrays and write x.grad.  The
# distinct saved arrays are x (pow's input), x**2 and exp(x) (mul's inputs;
# exp's rule needs its output, the same exp(x) array): 3 arrays read + 1
# written = 4 x 32 MB = 128 MB.  The floor is those bytes at the bandwidth of
# the plain copy above (the copy's bytes counted as read + written, ignoring
# write-allocate traffic in both).  A backward that copies the saved arrays or
# makes one pass per op moves several times more.
W3_FLOOR_ARRAYS = 4


# ------------------------------------------------------------------------ W8
_W8_CHILD = '''
import time
t0 = time.perf_counter()
import {mod} as lib
{setup}
t1 = time.perf_counter()
v = [i / 7.5 - 1.0 for i in range(16)]
x = lib.tensor(v, dtype=lib.float64)
w = lib.tensor([0.5 * e for e in v], dtype=lib.float64, requires_grad=True)
b = lib.tensor([0.1 * e for e in v], dtype=lib.float64, requires_grad=True)
h = x
for _ in range({steps}):
    h = lib.tanh(h * w + b)
h.sum().backward()
s = float(w.grad.sum())
t2 = time.perf_counter()
print(repr(t1 - t0), repr(t2 - t1), repr(s))
'''


def _w8_process(mod, env_extra=None):
    """(wall seconds, import seconds, first-gradient seconds, checksum) of one fresh process."""
    code = _W8_CHILD.format(mod=mod, steps=W1_STEPS,
                            setup='lib.set_num_threads(1)' if mod == 'torch' else '')
    env = dict(os.environ)
    env.update(env_extra or {})
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                       timeout=900)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ['(no stderr)'])[-1]
        raise RuntimeError(f'child exited with {p.returncode}: {tail}')
    imp, first, chk = (float(s) for s in p.stdout.strip().splitlines()[-1].split())
    return wall, imp, first, chk


def _w8_runs(mod, n, cold):
    runs = []
    for _ in range(n):
        if cold:
            cache = tempfile.mkdtemp(prefix='bench_numba_cache_')
            try:
                runs.append(_w8_process(mod, {'NUMBA_CACHE_DIR': cache}))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        else:
            runs.append(_w8_process(mod))
    return tuple(statistics.median(r[i] for r in runs) for i in range(3)) + (runs[0][3],)


def _python_start():
    t = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, '-c', 'pass'], check=True)
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


# ---------------------------------------------------------------------- main
# the ratios the project's issues ask for (PyTorch time / tape time)
TARGETS = {'W1 ': 5, 'W2 ': 0.9, 'W3 (': 3, 'W4 ': 4, 'W5c ': 2, 'W6 ': 10}


class Report:
    def __init__(self, libs):
        self.libs = libs           # column names, tape first
        self.rows = []             # (label, {lib: seconds | None | '-'})
        self.notes = []

    def row(self, label, cells):
        self.rows.append((label, cells))

    def note(self, text):
        self.notes.append(text)

    def print(self):
        cols = ['workload'] + [c for c in ('torch', 'tape') if c in self.libs]
        if 'torch' in self.libs:
            cols += ['ratio torch/tape', 'target']
        extras = [c for c in self.libs if c not in ('torch', 'tape')]
        cols += [DISPLAY.get(c, c) for c in extras]
        print('| ' + ' | '.join(cols) + ' |')
        print('| ' + ' | '.join(['---'] + ['---:'] * (len(cols) - 1)) + ' |')
        for label, cells in self.rows:
            out = [label]
            for c in ('torch', 'tape'):
                if c in self.libs:
                    out.append(_cell(cells.get(c, '-')))
            if 'torch' in self.libs:
                t, m = cells.get('torch'), cells.get('tape')
                ok = isinstance(t, float) and isinstance(m, float) and m > 0
                out.append(f'{t / m:.2f}x' if ok else 'n/a')
                target = next((v for k, v in TARGETS.items() if label.startswith(k)), None)
                out.append(f'>= {target}x' if target else '')
            out += [_cell(cells.get(c, '-')) for c in extras]
            print('| ' + ' | '.join(out) + ' |')
        if self.notes:
            print('\nNotes:')
            for n in self.notes:
                print(f'- {n}')


def _cell(v):
    if isinstance(v, float):
        return fmt_time(v)
    return 'n/a' if v is None else str(v)


def run_workloads(selected, libs, mods, d, cfg, rep):
    for key, label, build, check, tol, extra in WORKLOADS:
        if key not in selected:
            continue
        print(f'  {label} ...', file=sys.stderr, flush=True)
        cells = {}
        grads = {}
        inner = cfg.w4_iters if key == 'W4' else None
        steps = {}
        for name in libs:
            if name in mods:
                mod = mods[name]
                make = (lambda b=build, m=mod: b(m, d))
                make_check = ((lambda c=check, m=mod: c(m, d)) if check is not None else None)
            elif name in extra:
                make = (lambda f=extra[name]: f(d))
                make_check = None
            else:
                cells[name] = '-'
                continue
            try:
                if make_check is not None:
                    grads[name] = make_check()
                else:
                    # two calls: the second sees the first's side effects (W2's SGD
                    # update, W5's accumulation into x.grad)
                    step, get = make()
                    step()
                    step()
                    grads[name] = get()
                steps[name] = make()[0]
            except Exception as e:  # noqa: BLE001  (report and go on)
                cells[name] = None
                grads.pop(name, None)
                rep.note(_failure(name, label, e))
        medians, failures = measure_interleaved(steps, cfg, inner)
        cells.update(medians)
        for name, e in failures.items():
            cells[name] = None
            grads.pop(name, None)
            rep.note(_failure(name, label, e))
        ref = grads.get('torch')
        for name, g in grads.items():
            if name == 'torch':
                continue
            if ref is None:
                if 'torch' in libs:
                    rep.note(f'{label}: {name} gradients not checked (torch failed)')
                continue
            why = _compare(ref, g, TOL[tol])
            if why is not None:
                rep.note(f'MISMATCH {label}: {name} vs torch, {why}')
        if key == 'W4' and not label.startswith('W4j'):
            rep.note(f'W4: {cfg.w4_iters} iterations per repeat (the seed runs 8000), '
                     'time per iteration including get_fake_data; gradients checked on '
                     'one iteration with fixed data.')
        rep.row(label, cells)
        if key == 'W3':
            w3_extras(libs, mods, d, cfg, rep)
        if key == 'W7':
            rep.note('W7: one call = grad(f, x, create_graph=True) then grad((g*v).sum(), x).')


def w3_extras(libs, mods, d, cfg, rep):
    try:
        bw, tcopy = copy_bandwidth(cfg)
    except Exception as e:  # noqa: BLE001
        rep.note(f'W3 bandwidth: failed ({_one_line(e)})')
        return
    floor = W3_FLOOR_ARRAYS * W3_N * 8 / bw
    rep.note(f'W3 memory bandwidth (np.copyto of 4M float64, 64 MB read+written in '
             f'{fmt_time(tcopy)}): {bw / 1e9:.1f} GB/s. Backward floor estimate: read the 3 '
             f'saved arrays (x, x**2, exp(x)) + write x.grad = {W3_FLOOR_ARRAYS} x 32 MB at '
             f'that bandwidth = {fmt_time(floor)}.')
    cells = {}
    for name in ('torch', 'tape'):
        if name not in mods:
            continue
        try:
            prepare, timed = w3_split(mods[name], d)
            cells[name] = measure_split(prepare, timed, cfg)
            rep.note(f'W3 backward only, {name}: {fmt_time(cells[name])} = '
                     f'{cells[name] / floor:.2f}x the bandwidth floor')
        except Exception as e:  # noqa: BLE001
            cells[name] = None
            rep.note(_failure(name, 'W3 backward only', e))
    rep.row('W3 backward only (forward not timed)', cells)


def run_w8(mods, cfg, rep):
    print('  W8 time to first gradient (fresh processes) ...', file=sys.stderr, flush=True)
    try:
        start = _python_start()
        rep.note(f'W8: rows are the wall time of a fresh `python -c` process that imports the '
                 f'library and runs W1 once; an empty interpreter starts in {fmt_time(start)}. '
                 f'Median of {cfg.w8_warm} (warm) / {cfg.w8_cold} (cold) processes.')
    except Exception as e:  # noqa: BLE001
        rep.note(f'W8: could not time an empty interpreter ({_one_line(e)})')
    sums = {}
    torch_cell = None
    if 'torch' in mods:
        try:
            wall, imp, first, chk = _w8_runs('torch', cfg.w8_warm, cold=False)
            torch_cell, sums['torch'] = wall, chk
            rep.note(f'W8 torch: import {fmt_time(imp)}, first gradient {fmt_time(first)} '
                     '(no compilation cache; the same value is shown in both rows)')
        except Exception as e:  # noqa: BLE001
            rep.note(_failure('torch', 'W8', e))
    for cold in (False, True):
        label = 'W8 time to first gradient, ' + ('cold Numba cache' if cold else 'warm cache')
        cells = {'torch': torch_cell} if 'torch' in mods else {}
        try:
            if not cold:
                _w8_process('tape')            # make sure the on-disk cache is populated
            n = cfg.w8_cold if cold else cfg.w8_warm
            wall, imp, first, chk = _w8_runs('tape', n, cold=cold)
            cells['tape'] = wall
            sums['tape'] = chk
            rep.note(f'{label}, tape: import {fmt_time(imp)}, first gradient {fmt_time(first)}'
                     + (' (NUMBA_CACHE_DIR set to a fresh empty directory)' if cold else ''))
        except Exception as e:  # noqa: BLE001
            cells['tape'] = None
            rep.note(_failure('tape', label, e))
        rep.row(label, cells)
    if 'torch' in sums and 'tape' in sums and not np.isclose(sums['torch'], sums['tape'],
                                                              rtol=1e-9):
        rep.note(f'MISMATCH W8: sum of w.grad {sums["tape"]!r} (tape) vs '
                 f'{sums["torch"]!r} (torch)')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='very few repeats (smoke test)')
    ap.add_argument('--only', default='', help='comma-separated workloads, e.g. W1,W6')
    args = ap.parse_args(argv)
    cfg = Config(args.quick)
    known = sorted({w[0] for w in WORKLOADS} | {'W8'})
    selected = set(known)
    if args.only:
        selected = {s.strip().upper() for s in args.only.split(',') if s.strip()}
        unknown = selected - set(known)
        if unknown:
            ap.error(f'unknown workload(s) {", ".join(sorted(unknown))}; '
                     f'choose from {", ".join(known)}')

    mods, notes = {}, []
    tape, err = _import('tape')
    if tape is None:
        print(f'cannot import tape: {err}')
        return 1
    mods['tape'] = tape
    torch, err = _import('torch')
    if torch is not None:
        torch.set_num_threads(1)
        mods['torch'] = torch
    else:
        notes.append(f'torch not importable ({err}): tape times alone, gradients unchecked')
    libs = ['tape'] + (['torch'] if torch is not None else [])
    for name in ('jax', 'autograd'):
        m, _ = _import(name)
        if m is not None:
            libs.append(name)

    print(f'# tape benchmarks ({"quick" if cfg.quick else "full"} run)\n')
    versions = [f'tape {getattr(tape, "__version__", "?")}', f'numpy {np.__version__}']
    for name in libs[1:]:
        m = sys.modules.get(name)
        versions.append(f'{name} {getattr(m, "__version__", "?")}')
    print(f'Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; '
          + ', '.join(versions))
    print(f'median of {cfg.repeats} repeats, each >= {cfg.target * 1e3:g} ms; one thread\n',
          flush=True)

    rep = Report(libs)
    for n in notes:
        rep.note(n)
    d = _data()
    run_workloads(selected, libs, mods, d, cfg, rep)
    if 'W8' in selected:
        run_w8(mods, cfg, rep)
    rep.print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
