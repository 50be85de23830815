"""Per-op survey: each common op's forward, and forward + backward, on tape and
PyTorch at three sizes, as ratios torch time / tape time (below 1x: tape is
slower).  ``make bench`` times whole workloads; this finds which single op a
workload loses time on.

    python examples/op_survey.py                 # every op, sorted slowest first
    python examples/op_survey.py softmax conv    # only ops whose name contains these

Float32 (PyTorch's default), one thread on both sides.  A backward is
``y.backward(ones)`` from the op's output into inputs that all require grad.
Each timing is the median of calls repeated for about ``BUDGET`` seconds,
after two warm-up calls (tape's first call of a kernel loads or compiles it).
Small (32x10), medium (64x256: the first size on tape's big-record path) and
large (256x1024) shapes; layer-like ops take shapes of their own.
"""
import os
import statistics
import sys
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
os.environ.setdefault('MKL_NUM_THREADS', '1')
os.environ.setdefault('NUMBA_NUM_THREADS', '1')
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import numpy as np  # noqa: E402

import tape  # noqa: E402

BUDGET = 0.25       # seconds of calls per timing
SHAPES = [(32, 10), (64, 256), (256, 1024)]


def _median_us(f):
    f()
    f()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < BUDGET or len(times) < 15:
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _nn(lib):
    return lib.nn.functional


def cases():
    """(name, input shapes, fn(lib, *inputs), inputs positive?)"""
    out = []

    def case(name, shapes, fn, positive=False):
        out.append((name, shapes, fn, positive))

    for sh in SHAPES:
        for nm in ('exp', 'tanh', 'sigmoid', 'relu', 'log', 'sqrt', 'abs', 'sin'):
            case(nm, [sh], lambda L, x, nm=nm: getattr(L, nm)(x), positive=nm in ('log', 'sqrt'))
        for nm in ('gelu', 'silu', 'softplus'):
            case(nm, [sh], lambda L, x, nm=nm: getattr(_nn(L), nm)(x))
        case('leaky_relu', [sh], lambda L, x: _nn(L).leaky_relu(x, 0.1))
        case('softmax', [sh], lambda L, x: _nn(L).softmax(x, -1))
        case('log_softmax', [sh], lambda L, x: _nn(L).log_softmax(x, -1))
        case('mul', [sh, sh], lambda L, x, y: x * y)
        case('add_bcast', [sh, sh[1:]], lambda L, x, y: x + y)
        case('div', [sh, sh], lambda L, x, y: x / (y * y + 1))
        case('pow3', [sh], lambda L, x: x ** 3)
        case('clamp', [sh], lambda L, x: x.clamp(-0.5, 0.5))
        case('sum_dim0', [sh], lambda L, x: x.sum(0))
        case('mean_dim1', [sh], lambda L, x: x.mean(1))
        case('var_dim1', [sh], lambda L, x: x.var(1))
        case('max_dim1', [sh], lambda L, x: x.max(1)[0])
        case('norm', [sh], lambda L, x: x.norm())
        case('cumsum', [sh], lambda L, x: x.cumsum(1))
        case('t_mm', [sh, sh], lambda L, x, y: x.t() @ y)
        case('layer_norm', [sh], lambda L, x, n=sh[1]: _nn(L).layer_norm(x, (n,)))
        case('mse_loss', [sh, sh], lambda L, x, y: _nn(L).mse_loss(x, y))
        case('cross_entropy', [sh], lambda L, x, sh=sh: _nn(L).cross_entropy(
            x, L.tensor(np.arange(sh[0]) % sh[1])))
        case('cat', [sh, sh], lambda L, x, y: L.cat([x, y], 1))
        case('slice', [sh], lambda L, x: x[:, 1:5])
        case('where', [sh, sh], lambda L, x, y: L.where(x > 0, x, y))
    for b, n, d in [(8, 16, 64), (32, 64, 64)]:
        case('bmm', [(b, n, d), (b, d, n)], lambda L, x, y: x @ y)
        case('linear_3d', [(b, n, d), (d, d), (d,)], lambda L, x, w, c: _nn(L).linear(x, w, c))
        case('sdpa', [(b, 4, n, d // 4)] * 3,
             lambda L, q, k, v: _nn(L).scaled_dot_product_attention(q, k, v))
    for n, c, h in [(8, 3, 32), (32, 16, 14)]:
        case('conv2d', [(n, c, h, h), (16, c, 3, 3), (16,)],
             lambda L, x, w, bias: _nn(L).conv2d(x, w, bias, padding=1))
        case('max_pool2d', [(n, c, h, h)], lambda L, x: _nn(L).max_pool2d(x, 2))
        case('avg_pool2d', [(n, c, h, h)], lambda L, x: _nn(L).avg_pool2d(x, 2))
        case('batch_norm', [(n, c, h, h), (c,), (c,)],
             lambda L, x, w, bias: _nn(L).batch_norm(x, None, None, w, bias, training=True))
    case('embedding', [(1000, 64)],
         lambda L, w: _nn(L).embedding(L.tensor(np.arange(256) % 1000), w))
    return out


def _time(lib, fn, datas):
    ins = [lib.tensor(d, requires_grad=True) for d in datas]
    seed = lib.tensor(np.ones(tuple(fn(lib, *ins).shape), np.float32))

    def forward():
        fn(lib, *ins)

    def step():
        for i in ins:
            i.grad = None
        fn(lib, *ins).backward(seed)
    return _median_us(forward), _median_us(step)


def main(filters):
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = []
    for name, shapes, fn, positive in cases():
        if filters and not any(f in name for f in filters):
            continue
        datas = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        if positive:
            datas = [np.abs(d) + 0.1 for d in datas]
        tf, ts = _time(torch, fn, datas)
        af, ast = _time(tape, fn, datas)
        shape_text = ' '.join('x'.join(map(str, s)) for s in shapes)
        rows.append((ts / ast, name, shape_text, tf, af, ts, ast))
    print(f"{'op':14s} {'shapes':34s} {'fwd torch':>10s} {'tape':>9s} {'ratio':>6s}"
          f" {'fwd+bwd torch':>14s} {'tape':>9s} {'ratio':>6s}   (us)")
    for r, name, shape_text, tf, af, ts, ast in sorted(rows):
        print(f'{name:14s} {shape_text:34s} {tf:10.1f} {af:9.1f} {tf / af:5.2f}x'
              f' {ts:14.1f} {ast:9.1f} {r:5.2f}x')


if __name__ == '__main__':
    main(sys.argv[1:])
