"""A compiled gradient made inline at every step, as JAX code often does:

    for step in range(steps):
        g = jt.grad(loss)(w, x)

    python benchmarks/inline_wrapper.py --base HEAD~1 --json benchmarks/results/inline_wrapper.json

Measures, in a fresh process per tree, the time per step and how much the process's
resident memory (RSS) grows per step, after a warm-up that compiled the loss. With
``--base`` the same script runs on another commit's tree (``git archive``d, imported
through ``PYTHONPATH``) in the same run, for a side-by-side figure; a tree that traces
at every step gets fewer steps (``--base-steps``), since its cost is per step anyway.

Targets: under 50 us per step and under 20 MB of growth over 10^4 steps.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from compare import _export  # noqa: E402
from timing import machine_info  # noqa: E402

SCRIPT = textwrap.dedent("""
    import gc, json, os, sys, time
    import numpy as np
    import jittape as jt

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def loss(w, x):
        return jt.sum(jt.tanh(x @ w) ** 2)

    steps = int(sys.argv[1])
    w, x = np.ones(4), np.ones((3, 4))
    for _ in range(50):                      # compile, then warm up
        jt.grad(loss)(w, x)
    gc.collect()
    start, t0 = rss(), time.perf_counter()
    for _ in range(steps):
        g = jt.grad(loss)(w, x)
    per_step = (time.perf_counter() - t0) / steps
    gc.collect()
    print(json.dumps(dict(steps=steps, per_step_us=per_step * 1e6,
                          rss_growth_bytes=rss() - start,
                          rss_growth_per_step_bytes=(rss() - start) / steps,
                          jittape=jt.__file__)))
""")


def _run(tree, steps, cache):
    env = dict(os.environ, PYTHONPATH=tree, JITTAPE_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(steps)], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--base", help="a commit to run side by side")
    parser.add_argument("--base-steps", type=int, default=1000)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="jittape-inline-")
    results = {"head": _run(ROOT, args.steps, os.path.join(work, "cache-head"))}
    if args.base:
        base_tree = os.path.join(work, "base")
        os.makedirs(base_tree)
        commit = _export(args.base, base_tree)
        results["base"] = dict(_run(base_tree, args.base_steps, os.path.join(work, "cache-base")),
                               commit=commit)
    head = results["head"]
    results["targets"] = {
        "per_step_under_50us": head["per_step_us"] < 50,
        "rss_growth_under_20MB_per_10k_steps": head["rss_growth_per_step_bytes"] * 1e4 < 20e6}
    for name in ("head", "base"):
        if name in results:
            r = results[name]
            print(f"{name}: {r['per_step_us']:.1f} us per step, RSS +{r['rss_growth_bytes'] / 1e6:.2f} MB "
                  f"over {r['steps']} steps ({r['rss_growth_per_step_bytes'] / 1e3:.2f} KB per step)")
    print("targets:", results["targets"])
    if args.json:
        import jittape
        report = {"benchmark": "jt.grad(loss)(w, x) made inline at every step",
                  "command": "python benchmarks/inline_wrapper.py " + " ".join(argv or sys.argv[1:]),
                  "machine": machine_info(jittape), **results}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
