"""How jittape's own compile work grows with the program: trace, autodiff, passes and
code generation (``lower()`` with Numba's JIT off), for an RNN written as a Python loop.

    python benchmarks/pass_growth.py [--steps 25,100,200,500,1000] [--base REV]

Each point runs in a fresh process with the disk cache off. Numba's own compile is not
in these figures (``benchmarks/compiled.py`` has first calls): this is the part that
must stay linear in the program's size whatever Numba does. With ``--base``, the same
points for another commit's tree, run in turns with this tree's.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from compare import _export  # noqa: E402
from timing import machine_info  # noqa: E402

import jittape  # noqa: E402

POINT = r"""
import sys, time
import numpy as np
import jittape as jt

steps = int(sys.argv[1])

def loss(w, u, xs):
    h = jt.zeros((8, 32))
    for t in range(steps):
        h = jt.tanh(h @ w + xs[t] @ u)
    return jt.sum(h * h)

rng = np.random.default_rng(0)
w, u = rng.normal(size=(32, 32)) * 0.1, rng.normal(size=(4, 32)) * 0.1
xs = rng.normal(size=(steps, 8, 4))
f = jt.value_and_grad(loss, argnums=(0, 1))
start = time.perf_counter()
low = f.lower(w, u, xs)
print(time.perf_counter() - start, len(low.graph.splitlines()))
"""


def _point(tree, steps):
    env = dict(os.environ, PYTHONPATH=tree, NUMBA_DISABLE_JIT="1", JITTAPE_CACHE_DIR="")
    out = subprocess.run([sys.executable, "-c", POINT, str(steps)], env=env, cwd=tree,
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="25,100,200,500,1000")
    parser.add_argument("--base", help="a commit to run the same points for, in turns")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "pass_growth.json"))
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    trees = {"head": ROOT}
    work = tempfile.mkdtemp(prefix="jittape-growth-")
    try:
        base_commit = None
        if args.base:
            trees["base"] = os.path.join(work, "base")
            os.makedirs(trees["base"])
            base_commit = _export(args.base, trees["base"])
        points = []
        for n in steps:
            row = {"steps": n}
            for name in sorted(trees, reverse=True):      # the base first, then this tree
                seconds, lines = _point(trees[name], n)
                row[f"{name}_lower_s"] = round(seconds, 3)
                row[f"{name}_graph_lines"] = lines
            points.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    report = {"benchmark": "lower() with Numba's JIT off: trace, autodiff, passes, codegen",
              "program": "tanh RNN, hidden 32, batch 8, a Python for over the steps",
              "command": "python benchmarks/pass_growth.py " + " ".join(argv or sys.argv[1:]),
              "head": head, "base": base_commit, "machine": machine_info(jittape),
              "points": points}
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
