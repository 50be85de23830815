"""examples/op_survey.py runs: every case builds on both libraries and the
gradients it times agree (a survey of a broken op would time an error path)."""
import importlib.util
import os

import numpy as np
import pytest

import tape

torch = pytest.importorskip('torch')

_PATH = os.path.join(os.path.dirname(__file__), '..', 'examples', 'op_survey.py')


def _survey():
    spec = importlib.util.spec_from_file_location('op_survey', _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SURVEY = _survey()


@pytest.mark.parametrize('case', SURVEY.cases(), ids=lambda c: f'{c[0]}-{c[1][0]}')
def test_each_case_gives_torchs_gradients(case):
    name, shapes, fn, positive = case
    rng = np.random.default_rng(1)
    datas = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if positive:
        datas = [np.abs(d) + 0.1 for d in datas]
    grads = []
    for lib in (torch, tape):
        ins = [lib.tensor(d, requires_grad=True) for d in datas]
        out = fn(lib, *ins)
        out.backward(lib.tensor(np.ones(tuple(out.shape), np.float32)))
        grads.append([i.grad.numpy() for i in ins])
    for g_torch, g_tape in zip(*grads):
        np.testing.assert_allclose(g_tape, g_torch, rtol=2e-3, atol=2e-3, err_msg=name)


def test_main_prints_a_sorted_table(capsys, monkeypatch):
    monkeypatch.setattr(SURVEY, 'BUDGET', 0.0)
    SURVEY.main(['pow3'])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('op') and len(lines) == 4
    ratios = [float(line.split()[-1].rstrip('x')) for line in lines[1:]]
    assert ratios == sorted(ratios)
