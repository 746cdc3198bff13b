"""The main job: ``python -m jittape demo`` runs end to end and prints the seed numbers."""

import subprocess
import sys


def test_demo_runs_and_prints_the_seed_results():
    out = subprocess.run([sys.executable, "-m", "jittape", "demo"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "numpy=36.0>" in out and "numpy=10.0>" in out
    assert "RuntimeError: A non-persistent GradientTape can only be used" in out
    assert "unwatched: [None, None]" in out
    assert "Hessians: [[6.0, 2.0], [2.0, None]]" in out
    assert "jt.Tensor([[56.246506 14.48735  55.163166]], shape=(1, 3), dtype=float32)" in out
    assert "[+] watched variables: ['w:0', 'b:0', 'x:0']" in out
    assert "dense_2/bias:0, (4,)" in out
    assert "us per record + gradient" in out
