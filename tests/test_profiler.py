"""``tape.profiler`` and ``tape.autograd.profiler``: PyTorch's profiler API over
timing wrappers that exist only while a profile runs (tape/profiler.py)."""
import json

import numpy as np
import pytest

import tape
import tape.nn as nn
from tape.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                           schedule, tensorboard_trace_handler)


def _model():
    tape.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 2))


def test_profile_records_ops_nested_ranges_and_removes_its_wrappers():
    mul, linear, total = tape.Tensor.__mul__, tape.nn.functional.linear, tape.sum
    m = _model()
    x = tape.randn(8, 10)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function('model_inference'):
            y = m(x)
        (y * 2).sum().backward()
    assert tape.Tensor.__mul__ is mul and tape.nn.functional.linear is linear
    assert tape.sum is total
    keys = [e.key for e in prof.key_averages()]
    assert keys == ['model_inference', 'tape::linear', 'tape::relu', 'tape::mul', 'tape::sum',
                    'tape::backward']
    avg = {e.key: e for e in prof.key_averages()}
    assert avg['tape::linear'].count == 2
    events = prof.events()
    top = [e for e in events if e.cpu_parent is None]
    assert [e.name for e in top] == ['model_inference', 'tape::mul', 'tape::sum',
                                     'tape::backward']
    inner = top[0].cpu_children
    assert [e.name for e in inner] == ['tape::linear', 'tape::relu', 'tape::linear']
    assert all(e.self_cpu_time_total >= 0 for e in events)
    assert top[0].self_cpu_time_total == pytest.approx(
        top[0].cpu_time_total - sum(c.cpu_time_total for c in inner))
    # the self times add up to the time of the top-level events
    assert events.self_cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in top))
    shapes = prof.key_averages(group_by_input_shape=True)
    assert [e.input_shapes for e in shapes if e.key == 'tape::linear'] == \
        [[[8, 10], [20, 10], [20]], [[8, 20], [2, 20], [2]]]
    # nothing is recorded (or wrapped) afterwards
    (x * 3).sum()
    assert len(prof.events()) == len(events)


def test_table_has_torchs_columns_and_footer():
    torch = pytest.importorskip('torch')
    x = tape.ones(3, requires_grad=True)
    with profile(record_shapes=True) as prof:
        (x * 2).sum().backward()
    ours = prof.key_averages(group_by_input_shape=True).table(
        sort_by='self_cpu_time_total', row_limit=2).splitlines()
    with torch.profiler.profile(record_shapes=True) as tprof:
        (torch.ones(3, requires_grad=True) * 2).sum().backward()
    theirs = tprof.key_averages(group_by_input_shape=True).table(
        sort_by='self_cpu_time_total', row_limit=2).splitlines()
    assert 'Input Shapes' not in prof.key_averages().table()
    assert ours[1].split() == theirs[1].split()       # the column titles
    assert ours[0].startswith('-') and set(ours[0]) == {'-', ' '}
    assert len(ours) == 3 + 2 + 2 and ours[-1].startswith('Self CPU time total: ')
    assert theirs[-1].startswith('Self CPU time total: ')
    rows = ours[3:5]
    assert all(r.rstrip().endswith(']') for r in rows)          # input shapes
    assert all('%' in r for r in rows)


def test_schedule_cycles_and_on_trace_ready():
    fn = schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [fn(s) for s in range(11)] == [
        ProfilerAction.NONE, ProfilerAction.NONE, ProfilerAction.WARMUP,
        ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE,
        ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE,
        ProfilerAction.NONE, ProfilerAction.NONE]
    torch = pytest.importorskip('torch')
    tfn = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [fn(s).name for s in range(11)] == [tfn(s).name for s in range(11)]
    traces = []
    x = tape.ones(2, requires_grad=True)
    with profile(schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=lambda p: traces.append(
                     [e.name for e in p.events()])) as prof:
        for step in range(8):
            with record_function(f'step{step}'):
                (x * step).sum()
            prof.step()
    # two cycles of 4 steps: steps 2-3 and 6-7 recorded
    assert traces == [['step2', 'tape::mul', 'tape::sum', 'step3', 'tape::mul', 'tape::sum'],
                      ['step6', 'tape::mul', 'tape::sum', 'step7', 'tape::mul', 'tape::sum']]


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    x = tape.ones(2, requires_grad=True)
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path / 'tb'))) as prof:
        with record_function('block'):
            (x * 2).exp().sum().backward()
    prof.export_chrome_trace(str(tmp_path / 'trace.json'))
    data = json.loads((tmp_path / 'trace.json').read_text())
    names = [e['name'] for e in data['traceEvents']]
    assert names == ['block', 'tape::mul', 'tape::exp', 'tape::sum', 'tape::backward']
    assert data['traceEvents'][0]['cat'] == 'user_annotation'
    assert all(e['ph'] == 'X' and e['dur'] >= 0 for e in data['traceEvents'])
    written = list((tmp_path / 'tb').iterdir())
    assert len(written) == 1 and written[0].name.endswith('.pt.trace.json')


def test_exception_inside_profile_ends_events_and_restores():
    mul = tape.Tensor.__mul__
    a, b = tape.ones(2, 3), tape.ones(2, 3)
    with pytest.raises(RuntimeError, match='mm'):
        with profile() as prof:
            a.mm(b)
    assert tape.Tensor.__mul__ is mul
    ev, = prof.events()
    assert ev.name == 'tape::mm' and ev.cpu_time_total >= 0
    # a profile can run again afterwards, and ops still work unwrapped
    with profile() as again:
        a + 1
    assert [e.name for e in again.events()] == ['tape::add']
    assert (tape.ones(2) * 2).tolist() == [2.0, 2.0]


def test_record_function_decorator_and_outside_a_profile():
    @record_function('helper')
    def helper(t):
        return t.relu()
    assert helper(tape.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]     # a no-op here
    v = tape.tensor([-1.0, 2.0])
    with profile() as prof:
        helper(v)
    assert [e.name for e in prof.events()] == ['helper', 'tape::relu']
    with pytest.raises(RuntimeError, match='not recorded'):
        profile().events()


def test_autograd_profiler_interface():
    x = tape.ones(3, requires_grad=True)
    with tape.autograd.profiler.profile(record_shapes=True) as prof:
        y = (x * 2).sum()
        y.backward()
    names = [e.name for e in prof.function_events]
    assert names == ['tape::mul', 'tape::sum', 'tape::backward']
    text = prof.table(sort_by='cpu_time_total')
    assert 'tape::backward' in text and 'Self CPU time total' in text
    assert str(prof) == str(prof.function_events)
    total = prof.total_average()
    assert total.key == 'Total' and total.count == 3
    assert prof.self_cpu_time_total == pytest.approx(
        sum(e.self_cpu_time_total for e in prof.function_events))
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    with tape.autograd.profiler.profile(enabled=False) as off:
        x * 2
    with pytest.raises(RuntimeError, match="didn't finish"):
        off.table()


def test_profiled_training_step_matches_unprofiled():
    m1, m2 = _model(), _model()
    x = tape.randn(8, 10)
    t = tape.tensor(np.arange(8) % 2)
    for m, prof in ((m1, True), (m2, False)):
        opt = tape.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            if prof:
                with profile():
                    loss = nn.functional.cross_entropy(m(x), t)
                    loss.backward()
            else:
                loss = nn.functional.cross_entropy(m(x), t)
                loss.backward()
            opt.step()
            opt.zero_grad()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
