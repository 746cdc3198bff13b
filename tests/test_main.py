"""The main job: ``python -m jittape demo`` runs end to end and prints the seed numbers."""

import os
import re
import subprocess
import sys


def test_demo_runs_and_prints_the_seed_results(tmp_path):
    plot = tmp_path / "demo.png"
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-m", "jittape", "demo", "--plot", str(plot)],
                         capture_output=True, text=True, timeout=600, check=True, env=env,
                         cwd=tmp_path).stdout
    assert "numpy=36.0>" in out and "numpy=10.0>" in out
    assert "RuntimeError: A non-persistent GradientTape can only be used" in out
    assert "unwatched: [None, None]" in out
    assert "Hessians: [[6.0, 2.0], [2.0, None]]" in out
    assert "jt.Tensor([[56.246506 14.48735  55.163166]], shape=(1, 3), dtype=float32)" in out
    assert "watched variables: ['w:0', 'b:0', 'x:0']" in out and "[+]" not in out
    assert "gradient of dense_2/bias:0: shape (4,)" in out
    assert "jt.hessian below gives 0.0" in out
    assert "us per record + gradient" in out
    # the same numbers compiled
    assert "compiled gradients at (5, 3): [36.0, 10.0]" in out
    assert "compiled Hessian: [[6.0, 2.0], [2.0, 0.0]]" in out
    # the fit: a progress bar with the loss, one trace and compile, the loss going down
    losses = [float(v) for v in re.findall(r"step +\d+/400  loss (\S+)", out)]
    assert len(losses) == 10 and losses[-1] < losses[0] / 5
    assert "cache: 1 trace, 1 compile, 0 loaded from disk; 0 steps ran on NumPy while the " \
           "kernel compiled, 399 on the kernel" in out        # (the suite runs untiered)
    accuracy = float(re.search(r"training accuracy (\S+)%", out).group(1))
    assert accuracy > 90
    # the table: eager and compiled time per step for each workload
    rows = re.findall(r"^(toy|linear|MLP).* ([\d.]+) us +([\d.]+) us +([\d.]+)x", out, re.M)
    assert len(rows) == 3 and all(float(r[1]) > 0 and float(r[2]) > 0 for r in rows)
    assert f"plot written to {plot}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10000
