"""The README's first command (``make demo``) must keep working: run the demo."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_demo_runs_and_its_classifier_learns():
    run = subprocess.run([sys.executable, os.path.join(ROOT, 'examples', 'demo.py')],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    accs = [float(a) for a in re.findall(r'accuracy (\d\.\d+)', run.stdout)]
    assert len(accs) == 5 and accs[-1] >= 0.9, run.stdout[-1500:]
    assert 'Linear(in_features=2, out_features=16, bias=True)' in run.stdout
