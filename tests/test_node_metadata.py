"""``grad_fn.metadata`` persists: a dict of the user's kept with the record, as
PyTorch's, though nodes are made on demand and cached weakly (tape/_graph.py)."""
import gc
import weakref

import pytest

import tape


def test_metadata_survives_the_node_object_and_merges():
    a = tape.ones(2, requires_grad=True)
    y = a * 2
    y.grad_fn.metadata['tag'] = 1           # (the node is not held by anyone here)
    gc.collect()
    assert y.grad_fn.metadata == {'tag': 1}
    s = y.sum()
    assert s.grad_fn.next_functions[0][0].metadata == {'tag': 1}
    assert s.grad_fn.metadata == {}
    # a graph on another tape, joined to this one: both dicts follow their records
    (a * 5).sum().backward()
    b = tape.ones(2, requires_grad=True)
    u = b * 3
    u.grad_fn.metadata['u'] = 2
    z = y + u
    nf = z.grad_fn.next_functions
    assert nf[0][0].metadata == {'tag': 1} and nf[1][0].metadata == {'u': 2}
    z.sum().backward()
    assert y.grad_fn.metadata == {'tag': 1}


def test_metadata_does_not_keep_the_graph_alive():
    a = tape.ones(3, requires_grad=True)
    y = (a * 2).exp()
    y.grad_fn.metadata['x'] = 'kept'
    ref = weakref.ref(y._tape)
    was = gc.isenabled()
    gc.disable()
    try:
        del y
        assert ref() is None        # freed by reference counting, no cycle through the dict
    finally:
        if was:
            gc.enable()


def test_metadata_like_torch():
    torch = pytest.importorskip('torch')
    for L in (torch, tape):
        x = L.ones(2, requires_grad=True)
        y = x * 2
        md = y.grad_fn.metadata
        assert md == {} and isinstance(md, dict)
        md['k'] = [1]
        assert y.grad_fn.metadata is md
        z = y.sum()
        assert z.grad_fn.next_functions[0][0].metadata is md
