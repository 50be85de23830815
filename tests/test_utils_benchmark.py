"""``tape.utils.benchmark``: PyTorch's ``torch.utils.benchmark`` (Timer,
Measurement, Compare) for Python statements.

Timer tests check what the measurement loops guarantee (how often the statement
runs, the number of replicates, the stopping rules), never how fast anything
is.  Measurement statistics, reprs and Compare tables are checked against
PyTorch's own classes on the same constructed raw times.
"""
import dataclasses
import re
import subprocess
import sys

import pytest

import tape
import tape.utils.benchmark as benchmark
from tape.utils.benchmark import Compare, Language, Measurement, TaskSpec, Timer

torch = pytest.importorskip('torch')
tb = pytest.importorskip('torch.utils.benchmark')

_ADDRESS = re.compile(r'^<(.*)\.Measurement object at 0x[0-9a-fA-F]+>$')


def _pair(number_per_run, raw_times, **spec):
    """The same Measurement built by tape and by PyTorch."""
    spec.setdefault('stmt', 'x + y')
    spec.setdefault('setup', 'pass')
    return (Measurement(number_per_run, list(raw_times), TaskSpec(**spec)),
            tb.Measurement(number_per_run, list(raw_times), tb.TaskSpec(**spec)))


def _split_repr(m):
    first, _, rest = repr(m).partition('\n')
    match = _ADDRESS.match(first)
    assert match, first
    return match.group(1), rest


# ----------------------------------------------------------------------------
# Package layout
# ----------------------------------------------------------------------------
def test_package_exposes_pytorchs_names_without_importing_torch():
    assert tape.utils.benchmark is benchmark
    for name in ('Timer', 'timer', 'Language', 'Measurement', 'TaskSpec', 'select_unit',
                 'unit_to_english', 'trim_sigfig', 'ordered_unique', 'set_torch_threads',
                 'Compare', 'Colorize'):
        assert hasattr(benchmark, name), name
    assert benchmark.Timer.__module__ == 'tape.utils.benchmark.utils.timer'
    assert [lang.name for lang in Language] == [lang.name for lang in tb.Language]
    code = ("import sys, tape; m = tape.utils.benchmark.Timer('x + 1', 'x = tape.ones(2)')"
            ".timeit(3); print(m.number_per_run); assert 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == '3'


# ----------------------------------------------------------------------------
# Timer
# ----------------------------------------------------------------------------
def test_timeit_runs_stmt_warmup_plus_number_times_with_setup_and_tape_global():
    calls = []
    t = Timer('calls.append(tape.add(x, 1))', setup='x = tape.ones(3)', globals={'calls': calls},
              label='add one')
    m = t.timeit(number=250)
    # Warmup runs max(number // 100, 2) times, then the timed run `number` times.
    assert len(calls) == 2 + 250
    assert calls[-1].tolist() == [2.0, 2.0, 2.0]
    assert isinstance(m, Measurement)
    assert m.number_per_run == 250 and len(m.raw_times) == 1 and m.raw_times[0] > 0
    assert m.times == [m.raw_times[0] / 250]
    assert m.median == m.mean == m.times[0] and m.iqr == 0
    assert m.task_spec == TaskSpec('calls.append(tape.add(x, 1))', 'x = tape.ones(3)', label='add one')
    assert m.label == 'add one' and m.title == 'add one' and m.num_threads == 1


def test_timeit_large_number_warms_up_with_one_percent():
    calls = []
    Timer('calls.append(1)', globals={'calls': calls}).timeit(number=1000)
    assert len(calls) == 10 + 1000


def test_blocked_autorange_replicates_cover_min_run_time_and_call_callback():
    seen = []
    t = Timer('tape.mul(x, y).sum()', setup='x = tape.randn(16)\ny = tape.randn(16)')
    m = t.blocked_autorange(callback=lambda number, time: seen.append((number, time)),
                            min_run_time=0.02)
    assert m.number_per_run >= 1 and len(m.raw_times) >= 1
    assert all(r > 0 for r in m.raw_times)
    # The loop only stops once the replicates add up to min_run_time.
    assert sum(m.raw_times) >= 0.02
    assert seen == [(m.number_per_run, r) for r in m.raw_times]
    assert 0 < m.median and m.iqr >= 0 and m.significant_figures in (1, 2, 3, 4)


def test_adaptive_autorange_stops_on_confidence_or_max_run_time():
    t = Timer('x @ x', setup='x = tape.randn(4, 4)')
    m = t.adaptive_autorange(threshold=0.5, min_run_time=0.005, max_run_time=0.3)
    assert m.number_per_run >= 1 and all(r > 0 for r in m.raw_times)
    confident = len(m.raw_times) > 3 and m.meets_confidence(0.5) and sum(m.raw_times) >= 0.005
    assert confident or sum(m.raw_times) > 0.3


def test_estimated_block_size_is_a_power_of_ten():
    m = Timer('pass').blocked_autorange(min_run_time=0.01)
    assert str(m.number_per_run).rstrip('0') == '1'


def test_num_threads_is_set_while_timing_and_restored():
    prior = tape.get_num_threads()
    seen = set()
    t = Timer('seen.add(tape.get_num_threads())', globals={'seen': seen}, num_threads=3)
    t.timeit(5)
    t.blocked_autorange(min_run_time=0.005)
    assert seen == {3}
    assert tape.get_num_threads() == prior
    assert repr(t.timeit(5)).splitlines()[-1].endswith('3 threads')


def test_globals_are_copied_and_user_tape_is_kept():
    g = {'x': 2}
    Timer('x + 1', globals=g).timeit(3)
    assert g == {'x': 2}          # neither `tape` nor `__builtins__` leaks back
    marker = object()
    out = []
    Timer('out.append(tape)', globals={'tape': marker, 'out': out}).timeit(2)
    assert out and all(o is marker for o in out)


def test_stmt_and_setup_normalization_matches_pytorch():
    cases = [
        ('x + 1', 'pass'),
        ('\n    a = 1\n    b = a + 2\n', '\n    import math\n    x = 1\n'),
        ('    y = 3   ', 'x = 1'),
    ]
    for stmt, setup in cases:
        ours = Timer(stmt, setup, label='L', sub_label='s', description='d', env='e', num_threads=2)
        theirs = tb.Timer(stmt, setup, label='L', sub_label='s', description='d', env='e', num_threads=2)
        assert dataclasses.astuple(ours._task_spec) == dataclasses.astuple(theirs._task_spec)


def test_timer_errors():
    with pytest.raises(ValueError, match='only a `str` stmt'):
        Timer(lambda: None)
    with pytest.raises(ValueError, match='global_setup is C\\+\\+ only'):
        Timer('pass', global_setup='#include <x>')
    with pytest.raises(ValueError, match='Invalid language `rust`'):
        Timer('pass', language='rust')
    for lang in ('cpp', 'c++', Language.CPP):
        with pytest.raises(NotImplementedError, match='only times Python statements'):
            Timer('pass', language=lang)
    t = Timer('pass', language='py')
    with pytest.raises(NotImplementedError, match='blocked_autorange'):
        t.repeat()
    with pytest.raises(NotImplementedError, match='blocked_autorange'):
        t.autorange()
    with pytest.raises(NotImplementedError, match='Callgrind'):
        t.collect_callgrind()
    with pytest.raises(NameError):
        Timer('undefined_name + 1').timeit(1)


# ----------------------------------------------------------------------------
# Measurement against PyTorch
# ----------------------------------------------------------------------------
RAW_TIMES = [
    ('one', 100, [3.7e-3]),
    ('two', 10, [1e-6, 3e-6]),
    ('three', 1, [5e-9, 7e-9, 6e-9]),
    ('four-gross-warning', 100, [4e-4, 5e-4, 6e-4, 7e-4]),
    ('mild-warning', 1, [1.00, 1.05, 1.12, 1.18, 1.2, 1.09, 1.15, 1.01]),
    ('tight', 1000, [1.234e-3 * (1 + 1e-4 * i) for i in range(40)]),
    ('ties', 1, [2e-5] * 9 + [9e-5]),
    ('power-of-ten-median', 1, [1e-6, 1e-6, 1e-6, 1e-6, 1e-6]),
    ('seconds', 1, [12.5, 13.0, 12.75, 12.6, 12.9]),
    ('unsorted', 7, [9.1e-5, 1.3e-5, 4.4e-5, 2.2e-5, 7.7e-5, 3.1e-5]),
    ('sigfig-floor', 1, [1.0, 1.0 + 1e-7, 1.0 - 1e-7, 1.0, 1.0]),
    # log10(median / CI) sits just below 2: only PyTorch's float32 std gives 2 here
    ('float32-std-boundary', 1, [0.5, 1.0, 1.0173431890311948, 3.0]),
]


@pytest.mark.parametrize('name,number,raw', RAW_TIMES, ids=[r[0] for r in RAW_TIMES])
def test_measurement_statistics_match_pytorch(name, number, raw):
    ours, theirs = _pair(number, raw)
    assert ours.times == theirs.times
    assert ours.median == theirs.median
    assert ours.iqr == theirs.iqr
    assert ours.mean == pytest.approx(theirs.mean, rel=1e-13, abs=0)
    assert ours.significant_figures == theirs.significant_figures
    assert ours.has_warnings == theirs.has_warnings
    for threshold in (0.01, 0.1, 0.25, 1.0):
        assert ours.meets_confidence(threshold) == theirs.meets_confidence(threshold)


def test_measurement_statistics_cases_cover_the_interesting_outcomes():
    pairs = [_pair(number, raw) for _, number, raw in RAW_TIMES]
    assert {ours.significant_figures for ours, _ in pairs} >= {1, 2, 3, 4}
    warnings = ['\n'.join(ours._warnings) for ours, _ in pairs if ours.has_warnings]
    assert any('environmental influence' in w for w in warnings)
    assert any('system fluctuation' in w for w in warnings)


REPR_SPECS = [
    dict(),
    dict(label='Broadcasting add', sub_label='(4x8)', description='float32'),
    dict(stmt='a = x + y\nb = a * 2', setup='x = 1\ny = 2', num_threads=4),
    dict(stmt='a = x + y\nb = a * 2', sub_label='mine', setup=''),
    dict(setup='x = tape.ones(4)', env='A', description='n=4'),
]


@pytest.mark.parametrize('spec', REPR_SPECS)
@pytest.mark.parametrize('name,number,raw', RAW_TIMES, ids=[r[0] for r in RAW_TIMES])
def test_measurement_repr_matches_pytorch(spec, name, number, raw):
    ours, theirs = _pair(number, raw, **spec)
    our_path, our_rest = _split_repr(ours)
    their_path, their_rest = _split_repr(theirs)
    assert our_path == 'tape.utils.benchmark.utils.common'
    assert their_path == 'torch.utils.benchmark.utils.common'
    assert our_rest == their_rest


def test_measurement_repr_literal():
    m = Measurement(100, [4e-4, 5e-4, 6e-4, 7e-4], TaskSpec('x + y', 'pass', label='add'))
    assert _split_repr(m)[1] == (
        'add\n'
        '  Median: 5.50 us\n'
        '  IQR:    1.50 us (4.75 to 6.25)\n'
        '  4 measurements, 100 runs per measurement, 1 thread\n'
        '  WARNING: Interquartile range is 27.3% of the median measurement.\n'
        '           This suggests significant environmental influence.')


def test_measurement_attribute_forwarding_matches_pytorch():
    for spec in REPR_SPECS:
        ours, theirs = _pair(10, [1e-5, 2e-5], **spec)
        for attr in ('stmt', 'setup', 'label', 'sub_label', 'description', 'num_threads',
                     'title', 'as_row_name', 'env'):
            assert getattr(ours, attr) == getattr(theirs, attr), attr
    m = Measurement(1, [1.0], TaskSpec('pass', 'pass'), metadata={'k': 1})
    assert m.metadata == {'k': 1}
    with pytest.raises(AttributeError):
        m.not_an_attribute


def test_merge_matches_pytorch():
    spec_a = dict(stmt='x + y', setup='pass', label='add', description='n=1')
    spec_b = dict(stmt='x * y', setup='pass', label='mul', description='n=1')
    runs = [(10, [1e-5, 2e-5], spec_a), (100, [3e-4], spec_b), (1, [1.5e-6, 2.5e-6], spec_a)]
    ours = Measurement.merge([Measurement(n, r, TaskSpec(**s), metadata={'x': 1}) for n, r, s in runs])
    theirs = tb.Measurement.merge([tb.Measurement(n, r, tb.TaskSpec(**s)) for n, r, s in runs])
    assert len(ours) == len(theirs) == 2
    for o, t in zip(ours, theirs):
        assert o.number_per_run == t.number_per_run == 1
        assert o.raw_times == t.raw_times
        assert dataclasses.astuple(o.task_spec) == dataclasses.astuple(t.task_spec)
        assert o.metadata is None
        assert o.median == t.median


def test_select_unit_and_trim_sigfig_match_pytorch():
    values = [10.0 ** k * f for k in range(-12, 4) for f in (1.0, 1 - 1e-9, 1 + 1e-9, 2.5, 9.99, 3.14159)]
    for v in values:
        assert benchmark.select_unit(v) == tb.select_unit(v), v
        for n in range(1, 6):
            assert benchmark.trim_sigfig(v, n) == tb.trim_sigfig(v, n), (v, n)
    assert benchmark.select_unit(5e-7) == ('ns', 1e-9)
    assert benchmark.select_unit(5e-2) == ('ms', 1e-3)
    assert benchmark.trim_sigfig(123456.0, 2) == 120000.0
    with pytest.raises(AssertionError, match='must be an integer'):
        benchmark.trim_sigfig(1.0, 1.5)
    assert [benchmark.unit_to_english(u) for u in ('ns', 'us', 'ms', 's')] == \
        [tb.unit_to_english(u) for u in ('ns', 'us', 'ms', 's')]
    assert benchmark.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]


# ----------------------------------------------------------------------------
# Compare against PyTorch
# ----------------------------------------------------------------------------
def _grid():
    """Two labels, two thread counts, three sizes, a missing cell and noisy rows."""
    out = []
    for label, base in (('add', 1.0e-6), ('matmul', 3.0e-5)):
        for threads in (1, 4):
            for sub_label, scale in (('float', 1.0), ('double', 1.9)):
                for j, desc in enumerate(('n=1', 'n=64', 'n=4096')):
                    if label == 'matmul' and sub_label == 'double' and desc == 'n=64':
                        continue
                    median = base * scale * 10 ** j / threads ** 0.5
                    spread = 0.6 if (sub_label == 'double' and j == 2) else 0.004
                    raw = [median * (1 + spread * ((7 * i) % 10) / 10) * 100 for i in range(10)]
                    out.append((100, raw, dict(stmt='f(x)', setup='pass', label=label, sub_label=sub_label,
                                               description=desc, num_threads=threads)))
    return out


def _tables(runs, configure):
    ours = Compare([Measurement(n, r, TaskSpec(**s)) for n, r, s in runs])
    theirs = tb.Compare([tb.Measurement(n, r, tb.TaskSpec(**s)) for n, r, s in runs])
    configure(ours)
    configure(theirs)
    return ours, theirs


CONFIGS = {
    'plain': lambda c: None,
    'trim': lambda c: c.trim_significant_figures(),
    'columnwise': lambda c: c.colorize(),
    'rowwise': lambda c: c.colorize(rowwise=True),
    'warnings': lambda c: c.highlight_warnings(),
    'all': lambda c: (c.trim_significant_figures(), c.colorize(), c.highlight_warnings()),
}


@pytest.mark.parametrize('config', CONFIGS, ids=list(CONFIGS))
def test_compare_table_matches_pytorch(config, capsys):
    ours, theirs = _tables(_grid(), CONFIGS[config])
    text = str(ours)
    assert text == str(theirs)
    assert text.count('threads: ') == 4 and '[' in text and 'matmul' in text
    assert ('(! ' in text) == (config in ('warnings', 'all'))
    assert ('\033[' in text) == (config in ('columnwise', 'rowwise', 'all'))
    ours.print()
    theirs.print()
    printed = capsys.readouterr().out
    assert printed == text + '\n' + text + '\n'


def test_compare_with_envs_and_replicates_matches_pytorch():
    runs = []
    for env, factor in (('A', 1.0), ('B-env', 1.3)):
        for desc in ('small', 'large'):
            for rep in range(2):   # replicates are merged by Compare
                raw = [(2e-3 if desc == 'large' else 2e-6) * factor * (1 + 0.01 * (rep + i)) for i in range(5)]
                runs.append((10, raw, dict(stmt='g(x)', setup='pass', label='g', description=desc, env=env)))
    ours, theirs = _tables(runs, lambda c: c.trim_significant_figures())
    assert str(ours) == str(theirs)
    assert '(B-env)' in str(ours)


def test_compare_literal_and_extend_results():
    m = Measurement(1, [1.5e-6, 1.6e-6, 1.55e-6, 1.52e-6], TaskSpec('x + y', 'pass', label='add', description='n=1'))
    c = Compare([m])
    assert str(c) == (
        '[------ add ------]\n'
        '             |  n=1\n'
        '1 threads: --------\n'
        '      x + y  |  1.5\n'
        '\n'
        'Times are in microseconds (us).\n')
    c.extend_results([Measurement(1, [3e-6], TaskSpec('x * y', 'pass', label='add', description='n=1'))])
    assert 'x * y  |  3.0' in str(c)
    with pytest.raises(ValueError, match='Expected an instance of `Measurement`'):
        c.extend_results([1.0])
