"""``torch.utils.benchmark`` for tape: time Python statements and tabulate the
results, following PyTorch's API.

``Timer`` runs a statement (with ``tape`` available in its globals) and returns
a ``Measurement`` (median, IQR, warnings, PyTorch's multi-line repr);
``Compare`` prints many Measurements as one table.  The modules in ``utils/``
are adapted from PyTorch's ``torch/utils/benchmark/utils`` sources,
BSD-3-Clause (their copyright notice and license are in ``LICENSE-PYTORCH``
beside this file).  Only Python statements are supported: C++ timing and
``Timer.collect_callgrind`` raise ``NotImplementedError``; the fuzzers and
Callgrind statistics classes of ``torch.utils.benchmark`` are not provided.

>>> from tape.utils.benchmark import Compare, Measurement, TaskSpec
>>> results = [
...     Measurement(1, [1.5e-6, 1.6e-6, 1.55e-6, 1.52e-6],
...                 TaskSpec("x + y", "pass", label="add", description=d))
...     for d in ("n=1", "n=1024")]
>>> print(Compare(results))
[----------- add ------------]
             |  n=1  |  n=1024
1 threads: -------------------
      x + y  |  1.5  |   1.5
<BLANKLINE>
Times are in microseconds (us).
<BLANKLINE>
"""
from .utils.common import *  # noqa: F401,F403
from .utils.timer import *  # noqa: F401,F403
from .utils.compare import *  # noqa: F401,F403
