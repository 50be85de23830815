"""Node hooks on a node of several outputs that tape records one by one:
``split``/``chunk``/``unbind`` (a record per piece) and ``var_mean``/``std_mean``.

PyTorch's hook sees every output's gradient (None for an output nothing used)
and the input gradient summed over all of them, and runs once, whichever
pieces were used.  The first tests pin that without torch (values by hand);
the rest run the same programs on torch and tape and compare what the hooks
saw (``torch = pytest.importorskip``).
"""
import numpy as np
import pytest

import tape


def t64(values):
    return tape.tensor(np.array(values, dtype=np.float64), requires_grad=True)


def vals(gs):
    return [None if g is None else np.asarray(g.detach().numpy(), dtype=np.float64).tolist()
            for g in gs]


def test_split_hooks_see_every_piece_and_run_once():
    x = t64(np.arange(6.0))
    a, b, c = x.split(2)
    log = []
    a.grad_fn.register_prehook(lambda go: log.append(('pre', vals(go))))
    c.grad_fn.register_hook(lambda gi, go: log.append(('post', vals(gi), vals(go))))
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    assert log == [('pre', [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]),
                   ('post', [[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]],
                    [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])]
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_unused_pieces_are_none_and_the_hook_still_runs():
    x = t64(np.arange(6.0))
    a, b, c = x.split(2)
    log = []
    a.grad_fn.register_hook(lambda gi, go: log.append((vals(gi), vals(go))))
    (b * 2).sum().backward()
    assert log == [([[0.0, 0.0, 2.0, 2.0, 0.0, 0.0]], [None, [2.0, 2.0], None])]
    assert x.grad.tolist() == [0.0, 0.0, 2.0, 2.0, 0.0, 0.0]


def test_post_hook_replacement_is_what_the_input_gets():
    x = t64(np.arange(6.0))
    a, b, c = x.split(2)
    c.grad_fn.register_hook(lambda gi, go: (gi[0] * 10,))
    (a.sum() + 3 * c.sum()).backward()
    assert x.grad.tolist() == [10.0, 10.0, 0.0, 0.0, 30.0, 30.0]


def test_prehook_replaces_one_piece():
    x = t64(np.arange(6.0))
    a, b, c = x.split(2)
    b.grad_fn.register_prehook(lambda go: (go[0], go[1] * 100, go[2]))
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    assert x.grad.tolist() == [1.0, 1.0, 200.0, 200.0, 3.0, 3.0]


def test_removed_hook_leaves_the_plain_sweep():
    x = t64(np.arange(6.0))
    a, b, c = x.split(2)
    h = a.grad_fn.register_hook(lambda gi, go: (gi[0] * 0,))
    h.remove()
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize('create_graph', [False, True])
@pytest.mark.parametrize('node_hook', [False, True])
def test_pieces_tensor_hooks_run_in_first_registration_order(create_graph, node_hook):
    # PyTorch keeps one tensor pre-hook per output on the node, added when that
    # output's first hook is registered, and runs them in that order, then the
    # node's own hooks; a later hook on an output runs with its first one
    x = t64(np.arange(6.0))
    a, b, c = (x * 1).split(2)
    log = []
    c.register_hook(lambda g: log.append(('c1', g.tolist())))
    a.register_hook(lambda g: log.append(('a1', g.tolist())) or g * 10)
    b.retain_grad()
    b.register_hook(lambda g: log.append(('b1', g.tolist())) or g * 2)
    c.register_hook(lambda g: log.append(('c2', g.tolist())))
    a.register_hook(lambda g: log.append(('a2', g.tolist())))
    if node_hook:
        a.grad_fn.register_prehook(lambda go: log.append(('pre', vals(go))))
    loss = a.sum() + 2 * b.sum() + 3 * c.sum()
    if create_graph:
        g, = tape.autograd.grad(loss, x, create_graph=True)
    else:
        loss.backward()
        g = x.grad
    want = [('c1', [3.0, 3.0]), ('c2', [3.0, 3.0]), ('a1', [1.0, 1.0]),
            ('a2', [10.0, 10.0]), ('b1', [2.0, 2.0])]
    if node_hook:
        want.append(('pre', [[10.0, 10.0], [4.0, 4.0], [3.0, 3.0]]))
    assert log == want
    assert g.tolist() == [10.0, 10.0, 4.0, 4.0, 3.0, 3.0]
    if not create_graph:
        assert b.grad.tolist() == [4.0, 4.0]


def test_pieces_tensor_hooks_once_per_backward_with_retain_graph():
    x = t64(np.arange(4.0))
    a, b = (x * 2).unbind(0)[:2]
    log = []
    b.register_hook(lambda g: log.append('b'))
    a.register_hook(lambda g: log.append('a'))
    loss = a * b
    loss.backward(retain_graph=True)
    loss.backward()
    assert log == ['b', 'a', 'b', 'a']
    assert x.grad.tolist() == [8.0, 0.0, 0.0, 0.0]    # twice 2 * b, 2 * a


@pytest.mark.parametrize('create_graph', [False, True])
def test_hooks_of_an_unused_output_get_none_when_the_node_runs(create_graph):
    x = t64(np.arange(6.0))
    a, b, c = (x * x).split(2)
    log = []
    c.register_hook(lambda g: log.append(('c', g)))
    b.register_hook(lambda g: log.append(('b', g.tolist())))
    g, = tape.autograd.grad((b * 2).sum(), x, create_graph=create_graph)
    assert log == [('c', None), ('b', [2.0, 2.0])]
    assert g.tolist() == [0.0, 0.0, 8.0, 12.0, 0.0, 0.0]
    c.register_hook(lambda g: tape.ones(2))
    with pytest.raises(RuntimeError, match="can't replace a None gradient"):
        (b * 2).sum().backward()


def test_custom_function_unused_output_hook_gets_none():
    class Two(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)
    x = t64([0.0, 1.0, 2.0])
    p, q = Two.apply(x * x)
    log = []
    q.register_hook(lambda g: log.append(('q', g)))
    p.sum().backward(retain_graph=True)
    assert log == [('q', None)] and x.grad.tolist() == [0.0, 4.0, 8.0]
    (x * 1).sum().backward()            # another graph: q's node does not run
    assert log == [('q', None)]


def test_compiled_and_create_graph_sweeps_agree():
    def run(create_graph):
        x = t64(np.linspace(-1.0, 2.0, 9))
        p, q, r = (x * x).chunk(3)
        seen = []
        q.grad_fn.register_hook(lambda gi, go: seen.append(vals(gi)) or (gi[0] * 2,))
        g, = tape.autograd.grad((p * r).sum() + (q ** 3).sum(), x, create_graph=create_graph)
        return np.asarray(g.detach().numpy()), seen
    g1, s1 = run(False)
    g2, s2 = run(True)
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(s2[0][0]), np.array(s1[0][0]), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------- against torch
def L(g):
    if g is None:
        return None
    return np.asarray(g.detach().numpy(), dtype=np.float64).round(10).tolist()


def sums(gs):
    """Each gradient's sum (a large one's elements would make a long log)."""
    return [None if g is None else round(float(g.sum()), 6) for g in gs]


def logs_post(log):
    """A post hook that logs what it saw."""
    return lambda gi, go: log.append(('post', [L(g) for g in gi], [L(g) for g in go]))


def _case_split_all(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    parts = x.split(2)
    nd = parts[0].grad_fn
    nd.register_prehook(lambda go: log.append(('pre', [L(g) for g in go])))
    nd.register_hook(logs_post(log))
    sum((p * (i + 1)).sum() for i, p in enumerate(parts)).backward()
    log.append(('x.grad', L(x.grad)))


def _case_split_middle_only(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    a, b, c = x.split(2)
    a.grad_fn.register_hook(logs_post(log))
    (b * 2).sum().backward()
    log.append(('x.grad', L(x.grad)))


def _case_split_with_sizes_float32(lib, log):
    x = lib.tensor(np.arange(6.0), dtype=lib.float32, requires_grad=True)
    a, b, c = x.split([1, 2, 3])
    a.grad_fn.register_hook(lambda gi, go: log.append((
        'post', type(gi[0].grad_fn).__name__ if gi[0] is not None else None, [L(g) for g in gi],
        [None if g is None else (str(g.dtype).split('.')[-1], tuple(g.shape)) for g in go])))
    (b.sum() + c.sum() * 2).backward()
    log.append(('x.grad', L(x.grad)))


def _case_tensor_hooks_then_node_hooks(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    a, b, c = x.split(2)
    a.register_hook(lambda g: log.append(('a', L(g))) or g * 2)
    b.register_hook(lambda g: log.append(('b', L(g))))
    c.retain_grad()
    a.grad_fn.register_prehook(lambda go: log.append(('pre', [L(g) for g in go])))
    a.grad_fn.register_hook(logs_post(log))
    (a.sum() + 2 * b.sum() + 3 * c.sum()).backward()
    log.append(('x.grad', L(x.grad)))
    log.append(('c.grad', L(c.grad)))


def _case_pieces_tensor_hooks_order(lib, log):
    x = lib.tensor(np.arange(12.0), requires_grad=True)
    p = (x * 3).chunk(4)
    for i in (2, 0, 3, 2, 1, 0):
        p[i].register_hook(lambda g, i=i: log.append((i, L(g))) or g * (i + 1))
    sum(p[i].sum() * (i + 1) for i in range(4)).backward()
    log.append(('x.grad', L(x.grad)))


def _case_pieces_as_grad_inputs(lib, log):
    # autograd.grad with pieces (or the source) as inputs: the pieces' hooks
    # run once each, whichever piece's record the sweep stops at first
    for inputs, create_graph in (('b', False), ('bc', False), ('x', False), ('c', False),
                                 ('bc', True), ('x', True)):
        x = lib.tensor(np.arange(6.0), requires_grad=True)
        a, b, c = (x * x).split(2)
        c.register_hook(lambda g: log.append(('c', None if g is None else L(g))))
        b.register_hook(lambda g: log.append(('b', None if g is None else L(g))))
        loss = (b * 2).sum() + (c * 3).sum()
        gs = lib.autograd.grad(loss, [dict(b=b, c=c, x=x)[k] for k in inputs],
                               create_graph=create_graph)
        log.append((inputs, create_graph, [L(g) for g in gs]))


def _case_unbind(lib, log):
    x = lib.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    r = x.unbind(0)
    r[1].grad_fn.register_hook(logs_post(log))
    (r[0] * r[2]).sum().backward()
    log.append(('x.grad', L(x.grad)))


def _case_chunk_of_a_result(lib, log):
    w = lib.tensor(np.linspace(-1, 1, 8), requires_grad=True)
    p, q = (w * 3).tanh().chunk(2)
    q.grad_fn.register_hook(logs_post(log))
    ((p * q).sum() + q.sum()).backward()
    log.append(('w.grad', L(w.grad)))


def _case_var_mean(lib, log):
    x = lib.tensor(np.arange(6.0).reshape(2, 3) ** 1.5, requires_grad=True)
    v, m = lib.var_mean(x, 1)
    m.grad_fn.register_hook(logs_post(log))
    (v * 2 + m).sum().backward()
    log.append(('x.grad', L(x.grad)))


def _case_std_mean_one_output_used(lib, log):
    x = lib.tensor(np.arange(6.0).reshape(2, 3) ** 1.5, requires_grad=True)
    s, m = lib.std_mean(x, 1)
    s.grad_fn.register_prehook(lambda go: log.append(('pre', [L(g) for g in go])))
    m.sum().backward()
    log.append(('x.grad', L(x.grad)))


def _case_retain_graph_runs_each_time(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    a, b, c = x.split(2)
    a.grad_fn.register_hook(logs_post(log))
    loss = (a * b).sum() + c.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    log.append(('x.grad', L(x.grad)))


def _case_large_pieces(lib, log):
    x = lib.tensor(np.linspace(0, 1, 60000), requires_grad=True)
    a, b = (x * 1).split(30000)
    a.grad_fn.register_hook(lambda gi, go: log.append(('post', sums(gi), sums(go))))
    (a * 2).sum().backward(retain_graph=True)
    (b * 3).sum().backward()
    log.append(('x.grad', sums([x.grad, x.grad[:30000]])))


def _case_large_leaf_pieces(lib, log):
    # pieces of a large leaf: one node, though each piece is a large record
    x = lib.tensor(np.linspace(0, 1, 90000), requires_grad=True)
    a, b, c = x.split(30000)
    log.append(('one node', a.grad_fn is b.grad_fn is c.grad_fn, type(a.grad_fn).__name__))
    c.register_hook(lambda g: log.append('c'))
    a.register_hook(lambda g: log.append('a'))
    b.grad_fn.register_prehook(lambda go: log.append(('pre', sums(go))))
    (a * 2 + c).sum().backward(retain_graph=True)
    (c * 3 + a).sum().backward()
    log.append(('x.grad', sums([x.grad, x.grad[:30000]])))
    r = lib.tensor(np.ones((3, 30000)), requires_grad=True).unbind(0)
    log.append(('unbind', r[0].grad_fn is r[2].grad_fn, type(r[0].grad_fn).__name__))


def _case_create_graph(lib, log):
    x = lib.tensor(np.arange(1.0, 7.0), requires_grad=True)
    a, b, c = x.split(2)
    a.grad_fn.register_hook(lambda gi, go: log.append(('post', [L(g) for g in gi],
                                                       [L(g) for g in go])) or (gi[0] * 2,))
    g, = lib.autograd.grad((a * a).sum() + (c ** 3).sum(), x, create_graph=True)
    log.append(('g', L(g)))
    g.sum().backward()
    log.append(('x.grad', L(x.grad)))


def _case_autograd_grad(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    a, b, c = x.split(2)
    a.grad_fn.register_hook(logs_post(log))
    g, = lib.autograd.grad((a * 2).sum() + (c * 3).sum(), x)
    log.append(('g', L(g)))


def _case_nested_splits(lib, log):
    x = lib.tensor(np.arange(8.0), requires_grad=True)
    a, b = x.split(4)
    c, d = b.split(2)
    a.grad_fn.register_hook(lambda gi, go: log.append(('outer', [L(g) for g in gi],
                                                        [L(g) for g in go])))
    c.grad_fn.register_hook(lambda gi, go: log.append(('inner', [L(g) for g in gi],
                                                        [L(g) for g in go])))
    (a.sum() + 3 * c.sum() + 5 * d.sum()).backward()
    log.append(('x.grad', L(x.grad)))


def _case_backward_inputs(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    w = lib.tensor(2.0, requires_grad=True)
    a, b, c = (x * w).split(2)
    a.grad_fn.register_hook(logs_post(log))
    (a.sum() + 2 * b.sum()).backward(inputs=[x])
    log.append(('grads', L(x.grad), L(w.grad)))


def _case_graphs_merge_after_the_hook(lib, log):
    x = lib.tensor(np.arange(6.0), requires_grad=True)
    z = lib.tensor(np.ones(2), requires_grad=True)
    a, b, c = x.split(2)
    a.grad_fn.register_hook(logs_post(log))
    (a * (z * 5)).sum().backward()
    log.append(('grads', L(x.grad), L(z.grad)))


@pytest.mark.parametrize('case', [
    _case_split_all, _case_split_middle_only, _case_split_with_sizes_float32,
    _case_tensor_hooks_then_node_hooks, _case_pieces_tensor_hooks_order,
    _case_pieces_as_grad_inputs, _case_unbind, _case_chunk_of_a_result, _case_var_mean,
    _case_std_mean_one_output_used, _case_retain_graph_runs_each_time, _case_large_pieces,
    _case_large_leaf_pieces,
    _case_create_graph, _case_autograd_grad, _case_nested_splits, _case_backward_inputs,
    _case_graphs_merge_after_the_hook,
], ids=lambda c: c.__name__[6:])
def test_against_torch(case):
    torch = pytest.importorskip('torch')
    logs = {}
    for name, lib in (('torch', torch), ('tape', tape)):
        log = []
        case(lib, log)
        logs[name] = log
    assert logs['tape'] == logs['torch']
