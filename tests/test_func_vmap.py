"""tape.func.vmap, jacfwd, hessian, jvp, linearize and functional_call, run side by
side with torch.func on the programs of its tutorials (float64, tight)."""
import numpy as np
import pytest

import tape
import tape.nn.functional as F
from tape.func import (functional_call, grad, hessian, jacfwd, jacrev, jvp, linearize, vjp,
                       vmap)

torch = pytest.importorskip('torch')
tf = torch.func
TF = torch.nn.functional


def pair(a):
    a = np.asarray(a, dtype=np.float64)
    return tape.tensor(a), torch.tensor(a)


def close(t, ref, rtol=1e-12, atol=1e-12):
    if isinstance(ref, (tuple, list)):
        assert type(t) is type(ref) and len(t) == len(ref)
        for a, b in zip(t, ref):
            close(a, b, rtol, atol)
        return
    if isinstance(ref, dict):
        assert isinstance(t, dict) and list(t) == list(ref)
        for k in ref:
            close(t[k], ref[k], rtol, atol)
        return
    assert isinstance(t, tape.Tensor), type(t)
    assert tuple(t.shape) == tuple(ref.shape), (tuple(t.shape), tuple(ref.shape))
    np.testing.assert_allclose(t.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)


rng = np.random.default_rng(0)


# ---- the per-sample-gradients tutorial ---------------------------------------------------

def _mlps():
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(),
                             torch.nn.Linear(7, 3)).double()
    mm = tape.nn.Sequential(tape.nn.Linear(5, 7), tape.nn.Tanh(), tape.nn.Linear(7, 3)).double()
    with torch.no_grad():
        for (n, p), (n2, q) in zip(tm.named_parameters(), mm.named_parameters()):
            assert n == n2
            q.data = tape.tensor(p.numpy().copy())
    return mm, tm


def test_per_sample_gradients_tutorial():
    mm, tm = _mlps()
    xs, txs = pair(rng.standard_normal((6, 5)))
    ys, tys = tape.tensor(rng.integers(0, 3, 6)), torch.tensor(rng.integers(0, 3, 6))
    ys, tys = tape.tensor(tys.numpy()), tys

    def make(mod, lib_F, fc, lib):
        params = {k: v.detach() for k, v in mod.named_parameters()}
        buffers = {k: v.detach() for k, v in mod.named_buffers()}

        def compute_loss(params, buffers, sample, target):
            batch, targets = sample.unsqueeze(0), target.unsqueeze(0)
            return lib_F.cross_entropy(fc(mod, (params, buffers), (batch,)), targets)
        return params, buffers, compute_loss

    p, b, loss = make(mm, F, functional_call, tape)
    tp, tb, tloss = make(tm, TF, tf.functional_call, torch)
    got = vmap(grad(loss), in_dims=(None, None, 0, 0))(p, b, xs, ys)
    ref = tf.vmap(tf.grad(tloss), in_dims=(None, None, 0, 0))(tp, tb, txs, tys)
    close(got, ref)
    assert got['0.weight'].shape == (6, 7, 5)
    # the per-sample gradients are the per-example gradients of a loop
    g2 = grad(loss)(p, b, xs[2], ys[2])
    close(g2['2.bias'], ref['2.bias'][2])
    # the parameters are the module's own again
    assert mm[0].weight is dict(mm.named_parameters())['0.weight']
    assert isinstance(mm[0].weight, tape.nn.Parameter)


def test_model_ensembling_style_stack_and_vmap():
    mm, tm = _mlps()
    x, tx = pair(rng.standard_normal((4, 5)))
    params = {k: tape.stack([v.detach(), v.detach() * 2]) for k, v in mm.named_parameters()}
    tparams = {k: torch.stack([v.detach(), v.detach() * 2]) for k, v in tm.named_parameters()}
    got = vmap(lambda p, x: functional_call(mm, p, (x,)), in_dims=(0, None))(params, x)
    ref = tf.vmap(lambda p, x: tf.functional_call(tm, p, (x,)), in_dims=(0, None))(tparams, tx)
    close(got, ref)


# ---- Jacobians, Hessians, batched dot products -------------------------------------------

def test_jacobians_tutorial():
    w, tw = pair(rng.standard_normal((4, 3)))
    b, tb = pair(rng.standard_normal(4))
    x, tx = pair(rng.standard_normal(3))
    xs, txs = pair(rng.standard_normal((5, 3)))

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    def tpredict(weight, bias, x):
        return TF.linear(x, weight, bias).tanh()
    close(jacrev(predict, argnums=2)(w, b, x), tf.jacrev(tpredict, argnums=2)(tw, tb, tx))
    close(jacfwd(predict, argnums=2)(w, b, x), tf.jacfwd(tpredict, argnums=2)(tw, tb, tx))
    close(jacfwd(predict, argnums=(0, 1))(w, b, x),
          tf.jacfwd(tpredict, argnums=(0, 1))(tw, tb, tx))
    # batched Jacobians: vmap over jacrev, and jacrev of a batched function
    close(vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(w, b, xs),
          tf.vmap(tf.jacrev(tpredict, argnums=2), in_dims=(None, None, 0))(tw, tb, txs))
    close(jacrev(lambda xs: vmap(predict, in_dims=(None, None, 0))(w, b, xs))(xs),
          tf.jacrev(lambda xs: tf.vmap(tpredict, in_dims=(None, None, 0))(tw, tb, xs))(txs))
    # has_aux and dict inputs
    j, aux = jacfwd(lambda d: (d['a'].sin() * d['b'], d['a'].sum()), has_aux=True)(
        {'a': x, 'b': x * 2})
    tj, taux = tf.jacfwd(lambda d: (d['a'].sin() * d['b'], d['a'].sum()), has_aux=True)(
        {'a': tx, 'b': tx * 2})
    close(j, tj)
    close(aux, taux)


def test_hessians():
    x, tx = pair(rng.standard_normal(4))
    xs, txs = pair(rng.standard_normal((3, 4)))

    def f(x):
        return (x.sin() * x.cos().sum() + x ** 3).sum()

    def g(x, y):
        return (x * y.exp()).sum() + (x ** 2 * y).sum()
    close(hessian(f)(x), tf.hessian(f)(tx))
    close(jacrev(jacrev(f))(x), tf.jacrev(tf.jacrev(f))(tx))
    close(jacfwd(jacrev(f))(x), tf.jacfwd(tf.jacrev(f))(tx))
    close(hessian(g, argnums=(0, 1))(x, x * 0.5), tf.hessian(g, argnums=(0, 1))(tx, tx * 0.5))
    close(vmap(hessian(f))(xs), tf.vmap(tf.hessian(f))(txs))
    # a vector-valued function: output.shape + input.shape + input.shape
    h = hessian(lambda x: x.sin() * x.sum())(x)
    assert h.shape == (4, 4, 4)
    close(h, tf.hessian(lambda x: x.sin() * x.sum())(tx))


def test_batched_dot_and_nested_vmap():
    x, tx = pair(rng.standard_normal((3, 5)))
    y, ty = pair(rng.standard_normal((4, 5)))
    close(vmap(tape.dot)(x, x * 2), tf.vmap(torch.dot)(tx, tx * 2))
    outer = vmap(vmap(tape.dot, in_dims=(None, 0)), in_dims=(0, None))(x, y)
    close(outer, tf.vmap(tf.vmap(torch.dot, in_dims=(None, 0)), in_dims=(0, None))(tx, ty))
    np.testing.assert_allclose(outer.numpy(), x.numpy() @ y.numpy().T, rtol=1e-12)
    # matrix-vector products, batched over a non-leading dim
    m, tm = pair(rng.standard_normal((5, 2, 5)))
    close(vmap(tape.mv, in_dims=(1, 0))(m, x[:2]), tf.vmap(torch.mv, in_dims=(1, 0))(tm, tx[:2]))


# ---- in_dims / out_dims ------------------------------------------------------------------

def test_in_dims_out_dims_pytrees():
    a, ta = pair(rng.standard_normal((3, 4)))
    b, tb = pair(rng.standard_normal((4, 3)))
    c, tc = pair(rng.standard_normal(2))

    def f(d, pair_, scale, k=1.0):
        u, v = pair_
        return {'s': (d['x'] + d['y']) * scale * k, 't': [u * 2, v.sum()]}
    args = ({'x': a, 'y': b}, (a, b), 3.0)
    targs = ({'x': ta, 'y': tb}, (ta, tb), 3.0)
    dims = ({'x': 0, 'y': -1}, (0, 1), None)
    close(vmap(f, in_dims=dims)(*args, k=c.sum()),
          tf.vmap(f, in_dims=dims)(*targs, k=tc.sum()))
    ins = ({'x': a, 'y': b.t()}, (a, b), 3.0)
    tins = ({'x': ta, 'y': tb.t()}, (ta, tb), 3.0)
    odims = {'s': 1, 't': [-1, 0]}
    got = vmap(f, in_dims=(0, (0, 1), None), out_dims=odims)(*ins)
    ref = tf.vmap(f, in_dims=(0, (0, 1), None), out_dims=odims)(*tins)
    close(got, ref)
    assert got['s'].shape == (4, 3)
    # out_dims None for unbatched outputs, negative out_dims, a non-tensor output
    got = vmap(lambda x, y: (x * 2, y * 2, 7), in_dims=(0, None), out_dims=(-1, None, None))(a, c)
    ref = tf.vmap(lambda x, y: (x * 2, y * 2, 7), in_dims=(0, None), out_dims=(-1, None, None))(
        ta, tc)
    close(got[:2], ref[:2])
    assert got[2] == ref[2] == 7
    # a batch of size 0
    e, te = pair(np.zeros((0, 3)))
    close(vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(e),
          tf.vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(te))
    # a 1-d input mapped to 0-d slices
    close(vmap(lambda s: s * s + 1)(c), tf.vmap(lambda s: s * s + 1)(tc))


def test_gradients_flow_through_vmap():
    x, tx = pair(rng.standard_normal((4, 3)))
    w, tw = pair(rng.standard_normal(4))
    x.requires_grad_()
    w.requires_grad_()
    tx.requires_grad_()
    tw.requires_grad_()

    def f(row, w):
        return (row.sin() * w).sum() * row

    y = vmap(f, in_dims=(1, None), out_dims=1)(x, w)
    ty = tf.vmap(f, in_dims=(1, None), out_dims=1)(tx, tw)
    close(y, ty)
    assert y.requires_grad
    (y ** 2).sum().backward()
    (ty ** 2).sum().backward()
    close(x.grad, tx.grad)
    close(w.grad, tw.grad)
    # and transforms around vmap
    xd, txd = x.detach(), tx.detach()
    close(grad(lambda x: vmap(f, in_dims=(1, None))(x, w.detach()).pow(2).sum())(xd),
          tf.grad(lambda x: tf.vmap(f, in_dims=(1, None))(x, tw.detach()).pow(2).sum())(txd))
    out, pull = vjp(lambda x: vmap(tape.sin)(x), xd)
    tout, tpull = tf.vjp(lambda x: tf.vmap(torch.sin)(x), txd)
    close(pull(out), tpull(tout))


# ---- jvp, linearize ----------------------------------------------------------------------

def test_jvp_and_linearize():
    x, tx = pair(rng.standard_normal(4))
    y, ty = pair(rng.standard_normal(4))
    v, tv = pair(rng.standard_normal(4))
    u, tu = pair(rng.standard_normal(4))

    def f(a, b):
        return (a.sin() * b, (a * b).sum())
    close(jvp(f, (x, y), (v, u)), tf.jvp(f, (tx, ty), (tv, tu)))
    o, jv, aux = jvp(lambda a: (a.exp(), a.sum()), (x,), (v,), has_aux=True)
    to, tjv, taux = tf.jvp(lambda a: (a.exp(), a.sum()), (tx,), (tv,), has_aux=True)
    close((o, jv, aux), (to, tjv, taux))
    # an output that does not depend on the input has a zero tangent
    close(jvp(lambda a: (a * 2, y * 1), (x,), (v,)), tf.jvp(lambda a: (a * 2, ty * 1), (tx,), (tv,)))
    # jvp composes with grad (forward-over-reverse Hessian-vector product)
    g = lambda a: (a ** 3 * a.cos()).sum()   # noqa: E731
    close(jvp(grad(g), (x,), (v,)), tf.jvp(tf.grad(g), (tx,), (tv,)))
    close(grad(lambda a: jvp(lambda z: z.sin() * z, (a,), (v,))[1].sum())(x),
          tf.grad(lambda a: tf.jvp(lambda z: z.sin() * z, (a,), (tv,))[1].sum())(tx))
    out, fn = linearize(lambda a: a.tanh() * 3, x)
    tout, tfn = tf.linearize(lambda a: a.tanh() * 3, tx)
    close(out, tout)
    close(fn(v), tfn(tv))
    close(fn(u), tfn(tu))


# ---- functional_call ---------------------------------------------------------------------

def test_functional_call_swaps_and_restores():
    lin, tlin = tape.nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    x, tx = pair(rng.standard_normal((4, 3)))
    w, tw = pair(rng.standard_normal((2, 3)))
    old_w, old_b = lin.weight, lin.bias
    close(functional_call(lin, {'weight': w}, x), tf.functional_call(tlin, {'weight': tw}, tx)
          - tlin.bias.detach() + torch.tensor(old_b.detach().numpy()))
    assert lin.weight is old_w and lin.bias is old_b
    # gradients reach the substituted tensors
    w.requires_grad_()
    functional_call(lin, {'weight': w, 'bias': tape.zeros(2, dtype=tape.float64)},
                    (x,)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.numpy().sum(0), (2, 1)), rtol=1e-12)
    assert old_w.grad is None
    # restored even when the call raises
    with pytest.raises(Exception):
        functional_call(lin, {'weight': tape.zeros(5, 5, dtype=tape.float64)}, (x,))
    assert lin.weight is old_w
    # errors, as torch's
    bad = {'weight': w.detach(), 'bogus': tape.zeros(1)}
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\): 'bogus'.\n\tMissing key\(s\): "
                       r"'bias'") as e:
        functional_call(lin, bad, (x,), strict=True)
    with pytest.raises(RuntimeError) as te:
        tf.functional_call(tlin, {'weight': tw, 'bogus': torch.zeros(1)}, (tx,), strict=True)
    assert str(e.value) == str(te.value)
    with pytest.raises(ValueError, match='appeared in multiple dictionaries'):
        functional_call(lin, ({'weight': w}, {'weight': w}), (x,))
    with pytest.raises(ValueError, match='appeared in multiple dictionaries'):
        tf.functional_call(tlin, ({'weight': tw}, {'weight': tw}), (tx,))


def test_functional_call_tied_weights_and_buffers():
    class Tied(tape.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = tape.nn.Linear(2, 2, bias=False)
            self.b = tape.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer('shift', tape.ones(2))

        def forward(self, x):
            return self.b(self.a(x)) + self.shift
    m = Tied()
    x = tape.tensor([[1.0, 2.0]])
    eye = tape.eye(2)
    out = functional_call(m, {'a.weight': eye * 2, 'shift': tape.zeros(2)}, x)
    np.testing.assert_allclose(out.numpy(), [[4.0, 8.0]])
    out = functional_call(m, {'a.weight': eye * 2}, x, tie_weights=False)
    np.testing.assert_allclose(out.detach().numpy(),
                               (m.a.weight.detach() @ (2 * x.t())).t().numpy() + 1,
                               rtol=1e-6)
    assert m.b.weight is m.a.weight and m.shift.numpy().tolist() == [1.0, 1.0]


# ---- randomness --------------------------------------------------------------------------

def test_randomness_modes():
    x = tape.ones(4, 3)
    with pytest.raises(RuntimeError, match='randomness error mode'):
        vmap(lambda r: r * tape.rand(()))(x)
    with pytest.raises(RuntimeError, match='randomness error mode'):
        vmap(lambda r: F.dropout(r, 0.5))(x)
    with pytest.raises(RuntimeError, match='randomness error mode'):
        tf.vmap(lambda r: r * torch.rand(()))(torch.ones(4, 3))
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(tape.sin, randomness='bogus')
    tape.manual_seed(0)
    state = tape.get_rng_state()
    vmap(tape.sin)(x)                              # no draw: no error, generator untouched
    assert (tape.get_rng_state() == state).all()
    diff = vmap(lambda r: r * tape.rand(3), randomness='different')(x)
    assert len({tuple(row) for row in diff.numpy().tolist()}) == 4
    tape.manual_seed(1)
    same = vmap(lambda r: r * tape.rand(3), randomness='same')(x)
    after_same = tape.rand(3)
    assert len({tuple(row) for row in same.numpy().tolist()}) == 1
    tape.manual_seed(1)
    once = tape.rand(3)
    np.testing.assert_array_equal(same[0].numpy(), once.numpy())
    np.testing.assert_array_equal(after_same.numpy(), tape.rand(3).numpy())  # drawn once


# ---- errors ------------------------------------------------------------------------------

def _both_raise(make, exc, phrase):
    x, tx = pair(rng.standard_normal((3, 4)))
    y, ty = pair(rng.standard_normal((5, 4)))
    lib = {'tape': (tape, vmap, x, y), 'torch': (torch, tf.vmap, tx, ty)}
    msgs = []
    for name in ('tape', 'torch'):
        with pytest.raises(exc, match=phrase) as e:
            make(*lib[name])
        msgs.append(str(e.value))
    return msgs


@pytest.mark.parametrize('make, exc, phrase, exact', [
    (lambda L, vm, x, y: vm(L.add)(x, y), ValueError,
     'same size in the mapped dimension, got sizes \\[3, 5\\]', True),
    (lambda L, vm, x, y: vm(L.add, in_dims=(0,))(x, x), ValueError,
     'in_dims is not compatible with the structure of `inputs`', False),
    (lambda L, vm, x, y: vm(L.add, in_dims=[0, 0])(x, x), ValueError,
     'expected `in_dims` to be int or a \\(potentially nested\\) tuple', False),
    (lambda L, vm, x, y: vm(L.add, in_dims=(0, 2))(x, x), ValueError,
     'expected in_dim to satisfy -2 <= in_dim < 2', False),
    (lambda L, vm, x, y: vm(L.add, in_dims=(0, -3))(x, x), ValueError,
     'Got in_dim=-3 for some input', False),
    (lambda L, vm, x, y: vm(L.add, in_dims=(0, 0.5))(x, x), ValueError,
     'in_dim must be either an integer dimension or None', False),
    (lambda L, vm, x, y: vm(lambda a, n: a * n, in_dims=(0, 0))(x, 2), ValueError,
     'We cannot vmap over non-Tensor arguments', True),
    (lambda L, vm, x, y: vm(lambda a, n: a * n, in_dims=(None, None))(x, 2), ValueError,
     'Expected at least one Tensor to vmap over', True),
    (lambda L, vm, x, y: vm(lambda: x)(), ValueError, 'got no inputs', True),
    (lambda L, vm, x, y: vm(lambda a: (a, 3))(x), ValueError,
     'must only return Tensors, got type <class \'int\'>', True),
    (lambda L, vm, x, y: vm(lambda a: a * 2, out_dims=None)(x), ValueError,
     'can not return a BatchedTensor when out_dim is None', True),
    (lambda L, vm, x, y: vm(lambda a: a * 2, out_dims=(0, 0))(x), ValueError,
     'out_dims is not compatible with the structure of `outputs`', False),
    (lambda L, vm, x, y: vm(lambda a: a * 2, out_dims='a')(x), ValueError,
     '`out_dims` must be an int, None or a python collection of ints', True),
    (lambda L, vm, x, y: vm(lambda a: a * 2, chunk_size=0)(x), ValueError,
     'chunk_size should be None or greater than 0', True),
    (lambda L, vm, x, y: vm(lambda a: a * 2, out_dims=5)(x), IndexError,
     'Dimension out of range', False),
    (lambda L, vm, x, y: vm(lambda a: a.sum())(x.sum()), ValueError,
     'Tensor of dimensionality 0', False),
])
def test_vmap_errors_match_torch(make, exc, phrase, exact):
    ours, theirs = _both_raise(make, exc, phrase)
    if exact:
        assert ours == theirs


def test_jvp_errors_match_torch():
    x, tx = pair(rng.standard_normal(3))
    for lib, f, a in ((tape, jvp, x), (torch, tf.jvp, tx)):
        with pytest.raises(RuntimeError, match='Expected primals to be a tuple'):
            f(lib.sin, a, (a,))
        with pytest.raises(RuntimeError, match='same python structure'):
            f(lib.sin, (a,), (a, a))
        with pytest.raises(RuntimeError, match='different size than that of the original'):
            f(lib.sin, (a,), (a[:2],))
