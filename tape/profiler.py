"""``tape.profiler``: time the ops a block of code runs, with PyTorch's API.

    >>> import tape
    >>> from tape.profiler import profile, record_function, ProfilerActivity
    >>> x = tape.ones(4, 3, requires_grad=True)
    >>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    ...     with record_function('model'):
    ...         y = (x @ x.t()).relu().sum()
    ...     y.backward()
    >>> [e.key for e in prof.key_averages()]
    ['model', 'tape::t', 'tape::matmul', 'tape::relu', 'tape::sum', 'tape::backward']
    >>> print(prof.key_averages().table(sort_by='cpu_time_total'))  # doctest: +SKIP

How it measures, and why.  PyTorch's profiler records every ATen call from
C++.  tape's ops are Python functions, so a profile installs a timing wrapper
on the public ops while it runs, and removes them when it stops, so code
outside a profile pays nothing.  The wrapped names are tape's functions,
``tape.nn.functional``, ``tape.linalg``, ``tape.special``, the ``Tensor``
methods and operators, and ``tape.autograd.backward``/``grad``.  The events are named
``tape::<op>`` (``x * y`` is ``tape::mul``), not ``aten::``: there is no ATen
underneath.  What an op calls inside the library is part of its own time,
not separate events, since those calls do not go through the public names;
a wrapped op that calls another public op by its public name nests, as ATen's
do.  A backward is one event, ``tape::backward``, because the compiled sweep
runs the whole tape in one call.  ``record_function`` adds a named range of
the user's own.  Memory, stacks, FLOPs and device activities are accepted as
options and not recorded.

``tape.autograd.profiler.profile`` is the older interface over the same events
(``prof.table()``, ``prof.function_events``).
"""
import enum
import functools
import json
import os
import socket
import threading
import time
import types

__all__ = ['profile', 'record_function', 'ProfilerActivity', 'ProfilerAction', 'schedule',
           'tensorboard_trace_handler', 'supported_activities', 'EventList', 'FunctionEvent',
           'FunctionEventAvg']


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


def supported_activities():
    """The activities this machine can record: the CPU."""
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """PyTorch's ``torch.profiler.schedule``: per ``prof.step()``, skip ``skip_first``
    steps, then cycle through ``wait`` idle, ``warmup`` and ``active`` recorded
    steps (``repeat`` cycles, 0 for no limit); the last active step of a cycle
    hands the trace to ``on_trace_ready``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError('Invalid profiler schedule arguments')

    def schedule_fn(step):
        if step < 0:
            raise ValueError(f'Invalid step: {step}')
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait and step < wait:
            step += wait        # (the first cycle's wait is skipped)
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 \
            else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes each trace as Chrome-trace JSON into
    ``dir_name`` (``<worker>.<ms>.pt.trace.json``, gzipped with ``use_gzip``)."""
    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f'{socket.gethostname()}_{os.getpid()}'
        name = f'{worker}.{time.time_ns() // 1_000_000}.pt.trace.json'
        if use_gzip:
            name += '.gz'
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler_fn


# -- events ------------------------------------------------------------------------------
def _format_time(time_us):
    if time_us >= 1e6:
        return f'{time_us / 1e6:.3f}s'
    if time_us >= 1e3:
        return f'{time_us / 1e3:.3f}ms'
    return f'{time_us:.3f}us'


def _format_time_share(time_us, total_us):
    if total_us == 0:
        return 'NaN'
    return f'{time_us * 100.0 / total_us:.2f}%'


class _Interval:
    __slots__ = ('start', 'end')

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent:
    """One call of a profiled op (or one ``record_function`` range); times in us."""

    def __init__(self, id, name, thread, start_us, input_shapes, cpu_parent,  # noqa: A002
                 user=False):
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = _Interval(start_us, start_us)
        self.input_shapes = input_shapes
        self.cpu_parent = cpu_parent
        self.cpu_children = []
        self.count = 1
        self.device_type = 'CPU'
        self.user = user            # a record_function range
        self.open = True            # not ended yet

    key = property(lambda self: self.name)
    cpu_time_total = property(lambda self: self.time_range.elapsed_us())
    cpu_time = cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f'<FunctionEvent id={self.id} name={self.name} thread={self.thread} '
                f'cpu_time={_format_time(self.cpu_time_total)} '
                f'self_cpu_time_total={_format_time(self.self_cpu_time_total)} '
                f'input_shapes={self.input_shapes}>')


class FunctionEventAvg:
    """The events of one key (and input shapes, when grouped by them), summed."""

    def __init__(self, key=None, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_type = 'CPU'

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        return self

    __iadd__ = add

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    def __repr__(self):
        return (f'<FunctionEventAvg key={self.key} self_cpu_time='
                f'{_format_time(self.self_cpu_time_total)} cpu_time='
                f'{_format_time(self.cpu_time)} input_shapes={self.input_shapes}>')


class EventList(list):
    """A list of events (or of averages, from ``key_averages``), printed as a table."""

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """One ``FunctionEventAvg`` per key (and input shapes), in order of first call."""
        groups = {}
        for e in self:
            k = (e.key, str(e.input_shapes)) if group_by_input_shapes else e.key
            avg = groups.get(k)
            if avg is None:
                avg = groups[k] = FunctionEventAvg(e.key, e.input_shapes)
            avg.add(e)
        if not group_by_input_shapes:
            for avg in groups.values():
                avg.input_shapes = ''       # (PyTorch's: the table then has no shapes column)
        return EventList(groups.values())

    def total_average(self):
        total = FunctionEventAvg('Total')
        for e in self:
            total.add(e)
        total.key = 'Total'
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """PyTorch's profiler table: self and total CPU time, their shares of the
        total self time, the average and the number of calls, per row."""
        events = list(self)
        if top_level_events_only:
            events = [e for e in events if getattr(e, 'cpu_parent', None) is None]
        if sort_by is not None:
            events.sort(key=lambda e: getattr(e, sort_by.replace('cuda', 'device')),
                        reverse=True)
        total = sum(e.self_cpu_time_total for e in events)
        shapes = any(e.input_shapes for e in events)
        name_w = max([len(e.key) for e in events] + [4]) + 4
        if max_name_column_width is not None:
            name_w = min(name_w, max_name_column_width)
        cols = [('Name', name_w), ('Self CPU %', 12), ('Self CPU', 12), ('CPU total %', 12),
                ('CPU total', 12), ('CPU time avg', 12), ('# of Calls', 12)]
        if shapes:
            w = max([len(str(e.input_shapes)) for e in events] + [12]) + 4
            if max_shapes_column_width is not None:
                w = min(w, max_shapes_column_width)
            cols.append(('Input Shapes', w))
        row = ''.join('{:>' + str(w) + '}  ' for _, w in cols)
        sep = ''.join('-' * w + '  ' for _, w in cols)
        out = []
        if header is not None:
            out += ['=' * (len(sep) - 2), header]
        out += [sep, row.format(*[c for c, _ in cols]), sep]
        for e in events[:row_limit] if row_limit is not None and row_limit >= 0 else events:
            name = e.key
            if len(name) >= name_w - 3:
                name = name[:name_w - 3] + '...'
            vals = [name, _format_time_share(e.self_cpu_time_total, total),
                    _format_time(e.self_cpu_time_total),
                    _format_time_share(e.cpu_time_total, total), _format_time(e.cpu_time_total),
                    _format_time(e.cpu_time), e.count]
            if shapes:
                s = str(e.input_shapes)
                if len(s) >= cols[-1][1] - 3:
                    s = s[:cols[-1][1] - 3] + '...'
                vals.append(s)
            out.append(row.format(*vals))
        out += [sep, f'Self CPU time total: {_format_time(total)}', '']
        return '\n'.join(out)

    def export_chrome_trace(self, path):
        """Write the events as Chrome-trace JSON (chrome://tracing, Perfetto)."""
        pid = os.getpid()
        trace = [{'ph': 'X', 'cat': 'user_annotation' if e.user
                  else 'cpu_op', 'name': e.name, 'pid': pid, 'tid': e.thread,
                  'ts': e.time_range.start, 'dur': e.cpu_time_total,
                  'args': {'Input Dims': e.input_shapes or []}} for e in self]
        text = json.dumps({'traceEvents': trace, 'displayTimeUnit': 'ms'})
        if path.endswith('.gz'):
            import gzip
            with gzip.open(path, 'wt') as f:
                f.write(text)
        else:
            with open(path, 'w') as f:
                f.write(text)


# -- recording ---------------------------------------------------------------------------
class _Recorder:
    """The events of one recording: per thread, the stack of open events."""

    def __init__(self, record_shapes):
        self.events = []
        self.record_shapes = record_shapes
        self._local = threading.local()
        self.t0 = time.perf_counter_ns()

    def _stack(self):
        s = getattr(self._local, 'stack', None)
        if s is None:
            s = self._local.stack = []
        return s

    def begin(self, name, args, user=False):
        stack = self._stack()
        parent = stack[-1] if stack else None
        shapes = None
        if self.record_shapes:
            from ._tensor import Tensor
            shapes = [list(a.shape) if isinstance(a, Tensor) else [] for a in args]
        ev = FunctionEvent(len(self.events), name, threading.get_ident(),
                           (time.perf_counter_ns() - self.t0) / 1e3, shapes, parent, user)
        self.events.append(ev)
        if parent is not None:
            parent.cpu_children.append(ev)
        stack.append(ev)
        return ev

    def end(self, ev):
        ev.time_range.end = (time.perf_counter_ns() - self.t0) / 1e3
        ev.open = False
        stack = self._stack()
        if stack and stack[-1] is ev:
            stack.pop()
        elif ev in stack:
            stack.remove(ev)

    def finish(self):
        """The events, those still open ended now (a profile stopped inside an op)."""
        now = (time.perf_counter_ns() - self.t0) / 1e3
        for e in self.events:
            if e.open:
                e.time_range.end = now
                e.open = False
        return EventList(self.events)


_recording = None           # the _Recorder events go to, or None
_install_lock = threading.Lock()
_installed = {'depth': 0, 'saved': None}

# operators and the op names their events get
_DUNDER = {
    '__add__': 'add', '__radd__': 'add', '__iadd__': 'add_', '__sub__': 'sub',
    '__rsub__': 'rsub', '__isub__': 'sub_', '__mul__': 'mul', '__rmul__': 'mul',
    '__imul__': 'mul_', '__truediv__': 'div', '__rtruediv__': 'div', '__itruediv__': 'div_',
    '__floordiv__': 'floor_divide', '__rfloordiv__': 'floor_divide', '__mod__': 'remainder',
    '__rmod__': 'remainder', '__pow__': 'pow', '__rpow__': 'pow', '__ipow__': 'pow_',
    '__matmul__': 'matmul', '__rmatmul__': 'matmul', '__neg__': 'neg', '__abs__': 'abs',
    '__invert__': 'bitwise_not', '__and__': 'bitwise_and', '__or__': 'bitwise_or',
    '__xor__': 'bitwise_xor', '__lshift__': 'bitwise_left_shift',
    '__rshift__': 'bitwise_right_shift', '__eq__': 'eq', '__ne__': 'ne', '__lt__': 'lt',
    '__le__': 'le', '__gt__': 'gt', '__ge__': 'ge', '__getitem__': 'index',
    '__setitem__': 'index_put_',
}
# public functions that read or set metadata, register hooks or convert: not ops
_NOT_OPS = frozenset({
    'size', 'dim', 'ndimension', 'stride', 'numel', 'nelement', 'element_size',
    'is_contiguous', 'is_floating_point', 'is_complex', 'is_signed', 'data_ptr',
    'storage_offset', 'get_device', 'tolist', 'numpy', 'requires_grad_', 'register_hook',
    'register_post_accumulate_grad_hook', 'retain_grad', 'untyped_storage', 'storage',
    'type', 'is_set_to', 'is_shared', 'is_pinned', 'share_memory_', 'pin_memory',
    'dim_order', 'is_inference', 'has_names', 'apply_', 'map_', 'manual_seed', 'seed',
    'initial_seed', 'compile', 'save', 'load', 'show_tape', 'typename', 'jit', 'vmap',
    'is_tensor', 'is_storage', 'result_type', 'promote_types', 'can_cast',
    'from_numpy', 'frombuffer', 'asarray', 'as_tensor',
})


def _public_ops():
    """(owner, attribute, event name) of every public op a profile times."""
    import tape
    from tape import autograd, linalg, special
    from tape.nn import functional
    from ._tensor import Tensor
    out = []
    for mod, prefix in ((tape, ''), (functional, ''), (linalg, 'linalg_'),
                        (special, 'special_')):
        for name, fn in list(vars(mod).items()):
            if name.startswith('_') or name in _NOT_OPS or \
                    name.startswith(('is_', 'get_', 'set_', 'use_')) or \
                    not isinstance(fn, types.FunctionType) or \
                    not (fn.__module__ or '').startswith('tape'):
                continue
            out.append((mod, name, 'tape::' + prefix + name))
    for name, fn in list(vars(Tensor).items()):
        if not isinstance(fn, types.FunctionType) or name in _NOT_OPS or \
                name.startswith('is_') or (name.startswith('_') and name not in _DUNDER):
            continue
        out.append((Tensor, name, 'tape::' + _DUNDER.get(name, name)))
    out.append((autograd, 'backward', 'tape::backward'))
    out.append((autograd, 'grad', 'tape::autograd_grad'))
    return out


def _timed(fn, event):
    def timed(*args, **kwargs):
        rec = _recording
        if rec is None:
            return fn(*args, **kwargs)
        ev = rec.begin(event, args)
        try:
            return fn(*args, **kwargs)
        finally:
            rec.end(ev)
    functools.update_wrapper(timed, fn)
    return timed


def _install(step):
    """Put the timing wrappers on (step 1) or take them off (step -1); counted, so
    nested profiles install and restore once."""
    with _install_lock:
        depth = _installed['depth']
        if step > 0 and depth == 0:
            saved = []
            for owner, name, event in _public_ops():
                real = vars(owner)[name]
                saved.append((owner, name, real))
                setattr(owner, name, _timed(real, event))
            _installed['saved'] = saved
        elif step < 0 and depth == 1:
            for owner, name, real in reversed(_installed['saved']):
                setattr(owner, name, real)
            _installed['saved'] = None
        _installed['depth'] = depth + step


class record_function:
    """A named range in the profile (a context manager or a decorator); a no-op
    when no profile is recording."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._event = None
        self._recorder = None

    def __enter__(self):
        rec = _recording
        if rec is not None:
            self._recorder = rec
            self._event = rec.begin(self.name, (), user=True)
        return self

    def __exit__(self, *exc):
        if self._event is not None:
            self._recorder.end(self._event)
            self._event = self._recorder = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapped


class _Session:
    """Installs the wrappers and owns the recorder of one profile."""

    def __init__(self, record_shapes):
        self.record_shapes = record_shapes
        self.recorder = None
        self.started = False

    def start(self):
        _install(1)
        self.started = True

    def record(self):
        global _recording
        if _recording is not None and _recording is not self.recorder:
            raise RuntimeError("Can't profile: a profiler is already recording")
        self.recorder = _Recorder(self.record_shapes)
        _recording = self.recorder

    def pause(self):
        """Stop recording; the events recorded since ``record``."""
        global _recording
        rec = self.recorder
        if rec is None:
            return None
        if _recording is rec:
            _recording = None
        self.recorder = None
        return rec.finish()

    def stop(self):
        events = self.pause()
        if self.started:
            self.started = False
            _install(-1)
        return events


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """PyTorch's ``torch.profiler.profile``: records the ops run inside the block
    (or between ``start()`` and ``stop()``, per ``schedule`` when given, which
    ``step()`` advances); see the module docstring for what an event is."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.step_num = 0
        self.current_action = None
        self._session = _Session(record_shapes)
        self._events = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _action(self):
        return self.schedule(self.step_num) if self.schedule is not None \
            else ProfilerAction.RECORD

    def start(self):
        self._session.start()
        self.current_action = self._action()
        if self.current_action in _RECORDING:
            self._session.record()

    def stop(self):
        recording = self.current_action in _RECORDING
        events = self._session.stop()
        if recording and events is not None:
            self._events = events
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self.current_action = None

    def step(self):
        """Advance the schedule by one step (one training iteration)."""
        prev = self.current_action
        self.step_num += 1
        action = self._action()
        if prev == ProfilerAction.RECORD_AND_SAVE or (prev in _RECORDING
                                                        and action not in _RECORDING):
            events = self._session.pause()
            if prev == ProfilerAction.RECORD_AND_SAVE and events is not None:
                self._events = events
                if self.on_trace_ready is not None:
                    self.on_trace_ready(self)
        if action in _RECORDING and self._session.recorder is None:
            self._session.record()
        self.current_action = action

    def events(self):
        """The events of the last recording (an ``EventList``)."""
        if self._events is None:
            raise RuntimeError('The profiler has not recorded anything yet: call events() '
                               'after the profile (or an active schedule cycle) ends')
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        self.events().export_chrome_trace(path)

    def export_stacks(self, path, metric='self_cpu_time_total'):
        raise NotImplementedError('export_stacks: tape records no stacks (with_stack is '
                                  'accepted and ignored)')
