"""Floating-point exceptions in tape's own arrays (log of 0, sqrt of a negative,
an overflowing exp, a division by zero) give inf/NaN silently, as in PyTorch,
while a user's own NumPy code still warns.  Run in a fresh interpreter with
RuntimeWarnings as errors: pytest resets the warnings filters around each test."""
import subprocess
import sys

SCRIPT = r'''
import numpy as np
import tape
for dt in (tape.float32, tape.float64):
    for shape in ((4,), (64, 256)):
        v = np.resize(np.array([0.0, -1.0, 1e30, 2.0]), shape)
        x = tape.tensor(v, dtype=dt, requires_grad=True)
        y = (tape.log(x) + tape.exp(x * 1e10) + x / 0 + tape.sqrt(x) + x ** -1.5).sum()
        y.backward()
        assert np.isinf(x.grad.numpy()).any() and np.isnan(x.grad.numpy()).any()
        with tape.no_grad():
            tape.log(tape.tensor(v, dtype=dt)) / 0
try:
    np.log(np.zeros(1))
except RuntimeWarning:
    print('user warns')
'''


def test_tape_arrays_do_not_warn_but_user_numpy_does():
    p = subprocess.run([sys.executable, '-W', 'error::RuntimeWarning', '-c', SCRIPT],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().endswith('user warns')
