"""``tape.autograd.profiler``: PyTorch's older profiler interface, over the events
of ``tape.profiler`` (see there for what an event is and how ops are timed).

    >>> import tape
    >>> x = tape.ones(3, requires_grad=True)
    >>> with tape.autograd.profiler.profile() as prof:
    ...     (x * 2).sum().backward()
    >>> [e.name for e in prof.function_events]
    ['tape::mul', 'tape::sum', 'tape::backward']
"""
from ..profiler import (EventList, FunctionEvent, FunctionEventAvg, _Session,  # noqa: F401
                        record_function)

__all__ = ['profile', 'record_function', 'EventList', 'FunctionEvent', 'FunctionEventAvg',
           'emit_nvtx', 'emit_itt']


class profile:
    """Record the ops run inside the block; afterwards ``function_events``,
    ``key_averages()``, ``table()``, ``total_average()`` and
    ``export_chrome_trace`` read them."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.function_events = None
        self.entered = False
        self._session = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError('Profiler context manager is not reentrant')
        self.entered = True
        self._session = _Session(self.record_shapes)
        self._session.start()
        try:
            self._session.record()
        except BaseException:
            self._session.stop()
            raise
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        self.function_events = self._session.stop()
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def __str__(self):
        self._check_finish()
        return str(self.function_events)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def export_chrome_trace(self, path):
        self._check_finish()
        self.function_events.export_chrome_trace(path)


class emit_nvtx:
    """PyTorch's NVTX ranges for NVIDIA's profilers: nothing to emit on a CPU."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


emit_itt = emit_nvtx
