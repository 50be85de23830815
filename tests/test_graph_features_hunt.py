"""Adversarial checks of three graph features against PyTorch: tensors of a
released graph used again (tape/_reroot.py), backwards that run only the
records on a path to their inputs (tape/_sweep.py ``needed_for``), and
diagonal views.  Each program runs on tape and on torch with the same float64
inputs; values, gradients and error messages must agree."""
import gc

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 3))
B = RNG.standard_normal((3, 4))
X = RNG.standard_normal((2, 4))
BIG = RNG.standard_normal(20000)
C3 = RNG.standard_normal((3, 4, 5))


def T(lib, a, rg=True):
    return lib.tensor(np.array(a, dtype=np.float64), requires_grad=rg)


def _np(x):
    if isinstance(x, (tape.Tensor, torch.Tensor)):
        return np.array(x.detach().numpy(), dtype=np.float64)
    if isinstance(x, (list, tuple)):
        return [_np(y) for y in x]
    return x


def _run(prog, lib):
    out = []
    try:
        prog(lib, out)
    except Exception as e:      # noqa: BLE001 - the oracle decides what is right
        return out, (type(e).__name__, str(e)[:60])
    return out, None


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and a.shape == b.shape \
            and np.allclose(a, b, rtol=1e-6, atol=1e-9)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return np.isclose(a, b, rtol=1e-9)
    return a == b


def check(prog):
    want, want_err = _run(prog, torch)
    got, got_err = _run(prog, tape)
    assert got_err == want_err, (got_err, want_err)
    assert len(got) == len(want), (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert _same(_np(g), _np(w)), (i, _np(g), _np(w))


PROGRAMS = {}


def program(f):
    PROGRAMS[f.__name__] = f
    return f


# -- tensors of a released graph, used again --------------------------------

@program
def tied_views_stay_connected(lib, out):
    # V2 comes from V1: moved one by one, V2 used to read a copy of V1's history
    W = T(lib, A)
    V1 = W.t()
    V2 = V1[0]
    (V2.sum() + V1.sum()).backward()
    V1.register_hook(lambda g: out.append(g.clone()))
    V1.retain_grad()
    (V2 * V2).sum().backward()
    out.extend([W.grad, V1.grad])
    out.append(lib.autograd.grad((V2 * V2).sum(), V1))
    W.grad = None
    (V2 * V2).sum().backward(inputs=[V1])
    out.extend([W.grad, V1.grad])


@program
def grad_toward_a_tensor_of_a_released_graph(lib, out):
    W = T(lib, A)
    V = W.t()
    y = V.sum()
    y.backward()
    out.append(lib.autograd.grad(y, [V]))
    out.append(lib.autograd.grad(y, [W]))


@program
def grad_toward_released_input_raises_second_backward(lib, out):
    # grad toward U frees the mul; V (a view of W) must not move off y's tape
    W, U = T(lib, A), T(lib, B)
    V = W.t()
    y = (V * U).sum()
    out.append(lib.autograd.grad(y, [U]))
    out.append(lib.autograd.grad(y, [V]))


@program
def tied_across_steps_and_merges(lib, out):
    W, U = T(lib, A), T(lib, X)
    Wt = W.t()
    Wt0 = Wt[0]
    for i in range(3):
        h = U * (i + 1)                     # an older live graph: Wt merges into it
        y = (h.exp() @ W).sum() + (h @ W @ Wt).sum()
        y.backward()
        out.extend([W.grad.clone(), U.grad.clone()])
        out.append(lib.autograd.grad((Wt0 * Wt0).sum(), Wt))


@program
def tied_weight_merged_then_used_again(lib, out):
    # Wt merged into a live graph's tape, that tape released, Wt used again
    W, U = T(lib, A), T(lib, X)
    Wt = W.t()
    Wt.sum().backward()
    for i in range(3):
        h = U * (i + 1)
        (h @ Wt.t()).sum().backward()
        out.append(W.grad.clone())


@program
def cross_step_chain(lib, out):
    W = T(lib, A)
    V1 = W.t()
    V2 = V1[0]
    V3 = V1 + 1
    (V1.sum() + V2.sum() + V3.sum()).backward()
    (V1 * V1).sum().backward()              # only V1 in this step
    out.append(W.grad.clone())
    V1.register_hook(lambda g: out.append(g.clone()))
    (V2 * V3[0]).sum().backward()
    out.append(W.grad.clone())
    out.append(lib.autograd.grad((V3 * V2).sum(), [V1, W]))


@program
def custom_function_saving_nothing_runs_again(lib, out):
    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    W = T(lib, A)
    V = Twice.apply(W)
    y = V.sum()
    y.backward()
    y.backward()
    for _ in range(2):
        (V.t() * V.t().detach()).sum().backward()
    out.append(W.grad)


@program
def custom_function_saved_tensors_freed(lib, out):
    class Sq(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * g * x

    W = T(lib, A)
    y = Sq.apply(W).sum()
    y.backward(retain_graph=True)
    y.backward()
    out.append(W.grad)
    y.backward()


@program
def view_of_leaf_saved_then_leaf_changed_under_no_grad(lib, out):
    W = T(lib, A)
    V = W.t()
    (V * V).sum().backward()
    y = (V * V).sum()
    with lib.no_grad():
        W.mul_(0.5)
    y.backward()


@program
def diagonal_of_leaf_saved_then_leaf_changed(lib, out):
    W = T(lib, A)
    y = (W.diagonal() ** 2).sum()
    with lib.no_grad():
        W.diagonal().zero_()
    y.backward()


@program
def select_view(lib, out):
    W = T(lib, A)
    V = W.select(1, -1)
    out.append(type(V.grad_fn).__name__)
    for _ in range(2):
        (V * V).sum().backward()
        out.append(W.grad.clone())
    out.append(lib.select(W, 0, 2))


@program
def select_out_of_range(lib, out):
    T(lib, A).select(0, 4)


# -- only the records on a path to the inputs run ---------------------------

@program
def custom_function_off_the_path_does_not_run(lib, out):
    class Sq(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            out.append('ran')
            x, = ctx.saved_tensors
            return 2 * g * x

    a, b, c = T(lib, A), T(lib, A * 2), T(lib, A - 1)
    y = (Sq.apply(a) * 2).sum() + (Sq.apply(c) * b).sum()
    out.append(lib.autograd.grad(y, [a]))
    out.append(lib.autograd.grad(y, [c]))
    out.append(lib.autograd.grad(y, [b]))


@program
def hooks_off_the_path_do_not_run(lib, out):
    a, b, c = T(lib, A), T(lib, A * 2), T(lib, A - 1)
    h1, h2 = a * b, c * b
    h1.register_hook(lambda g: out.append(('h1', float(g.sum()))))
    h2.register_hook(lambda g: out.append(('h2', float(g.sum()))))
    y = (h1.exp() + h2.exp()).sum()
    out.append(lib.autograd.grad(y, [a]))
    out.append(lib.autograd.grad(y, [c]))
    out.append(lib.autograd.grad(y, [b]))   # raises before any hook runs


@program
def backward_inputs_accumulate_in_place(lib, out):
    a, b, c = T(lib, A), T(lib, A * 2), T(lib, A - 1)
    y = ((a * 2).sin() + (c * 3).cos() + b).sum()
    y.backward(inputs=[a, b])
    out.extend([a.grad, b.grad, c.grad])
    y.backward(inputs=[c])
    y.backward(inputs=[b])
    out.append(b.grad)


@program
def large_backward_inputs_on_another_branch(lib, out):
    a, b, c = T(lib, BIG), T(lib, BIG * 2), T(lib, BIG[::-1])
    y = ((a * 2).sin() + (c * 3).cos() + b).sum()
    y.backward(inputs=[a, b])
    y.backward(inputs=[c])
    y.backward(inputs=[b])
    out.extend([a.grad, b.grad, c.grad])
    y.backward(inputs=[a])


# -- diagonal views -----------------------------------------------------------

@program
def diagonal_views_through_in_place(lib, out):
    x = T(lib, C3)
    h = x * 1
    d = h.transpose(0, 2).diagonal(1, 1, -1)
    d.mul_(3)
    e = h[1].diagonal(-1)[1:]
    e.add_(d[:2, 0])
    out.append(h)
    (h.sin()).sum().backward()
    out.append(x.grad)


@pytest.mark.parametrize('name', sorted(PROGRAMS))
def test_against_torch(name):
    check(PROGRAMS[name])


def test_tied_weight_history_does_not_grow():
    """Tensors of one history kept over a loop (some used only now and then)
    leave no chain of old tapes behind."""
    from tape._tape import Tape
    W, U = T(tape, A), T(tape, X)
    Wt = W.t()
    Wt0, Wt1 = Wt[0], Wt[1]
    (Wt.sum() + Wt0.sum() + Wt1.sum()).backward()

    def tapes():
        gc.collect()
        return sum(type(o) is Tape for o in gc.get_objects())
    counts = []
    for i in range(40):
        h = U * (i + 1)
        y = (h @ Wt.t()).sum() + ((h @ W @ Wt).sum() if i % 2 else 0) \
            + (Wt1.sum() if i % 3 == 0 else 0)
        y.backward()
        if i % 5 == 0:
            tape.autograd.grad((Wt0 * Wt).sum(), Wt)
        del h, y
        if i in (19, 39):
            counts.append(tapes())
    assert counts[1] <= counts[0] + 1, counts
