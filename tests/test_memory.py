"""Memory and cost of compiled functions used as JAX code often uses them: a wrapper made
inline at every step (``jt.grad(loss)(w)``) finds the compiled code of the previous
step, so memory stays flat and a step costs a lookup (one trace in all). Measured in a
subprocess (RSS); the time per step is benchmarks/inline_wrapper.py's."""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import gc, json, os, resource, sys, time
    import numpy as np
    import jittape as jt

    def rss():
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:                     # no /proc: the peak, in KB (bytes on macOS)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return peak if sys.platform == "darwin" else peak * 1024

    def loss(w, x):
        return jt.sum(jt.tanh(x @ w) ** 2)

    w, x = np.ones(4), np.ones((3, 4))
    for _ in range(500):                    # compile, then warm up
        jt.grad(loss)(w, x)
        jt.grad(lambda w: jt.sum(w * w))(w)
    gc.collect()
    start, t0 = rss(), time.perf_counter()
    steps = 10000
    for _ in range(steps):
        g = jt.grad(loss)(w, x)
    per_step = (time.perf_counter() - t0) / steps
    for _ in range(steps):                  # a new lambda object each step: the same code
        jt.grad(lambda w: jt.sum(w * w))(w)
    gc.collect()
    print(json.dumps(dict(growth=rss() - start, per_step=per_step,
                          traces=jt.grad(loss).cache_info().traces,
                          grad=g.tolist())))
""")


def test_a_wrapper_made_inline_at_every_step_keeps_memory_flat_and_costs_a_lookup(tmp_path):
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["traces"] == 1                         # one trace for all the wrappers
    t = math.tanh(4.0)                                # x @ w = 4 in each of 3 rows
    assert out["grad"] == pytest.approx([3 * 2 * t * (1 - t * t)] * 4)
    assert out["growth"] < 20e6, f"RSS grew by {out['growth'] / 1e6:.1f} MB over 2 x 10^4 steps"
    # (the time a step costs is measured by benchmarks/inline_wrapper.py, not here)
