"""How jittape's own compile work grows with the program: trace, autodiff, passes and
code generation (``lower()`` with Numba's JIT off), for an RNN written as a Python loop
(``--program rnn``, which rolls into a loop) or a deep MLP that nothing rolls
(``--program layers``: widths that change every layer, ``roll_loops`` off, so the graph
is straight-line code of about 19 nodes a layer, generated in parts).

    python benchmarks/pass_growth.py [--program rnn|layers] [--steps 25,100,200,500,1000]
                                     [--base REV]

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

LAYERS = r"""
import sys, time
import numpy as np
import jittape as jt

jt.config.roll_loops = False
layers = int(sys.argv[1])
rng = np.random.default_rng(0)
ws = [rng.normal(size=(4 + k % 7, 4 + (k + 1) % 7)) * 0.3 for k in range(layers)]

def loss(ws, x):
    for w in ws:
        x = jt.tanh(x @ w) + jt.sin(x @ w) * 0.1
    return jt.sum(x * x)

f = jt.value_and_grad(loss)
start = time.perf_counter()
low = f.lower(ws, rng.normal(size=(3, 4)))
print(time.perf_counter() - start, len(low.graph.splitlines()))
"""
PROGRAMS = {"rnn": (POINT, "tanh RNN, hidden 32, batch 8, a Python for over the steps"),
            "layers": (LAYERS, "MLP of tanh layers of widths 4 to 10 changing every layer, "
                               "batch 3, roll_loops off: straight-line code")}


def _point(tree, steps, program="rnn"):
    env = dict(os.environ, PYTHONPATH=tree, NUMBA_DISABLE_JIT="1", JITTAPE_CACHE_DIR="")
    code = PROGRAMS[program][0]
    out = subprocess.run([sys.executable, "-c", code, str(steps)], env=env, cwd=tree,
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", choices=sorted(PROGRAMS), default="rnn")
    parser.add_argument("--steps", default="25,100,200,500,1000",
                        help="steps of the RNN, or layers of the MLP")
    parser.add_argument("--base", help="a commit to run the same points for, in turns")
    parser.add_argument("--json", help="default: results/pass_growth.json (rnn), "
                                       "results/pass_growth_layers.json")
    args = parser.parse_args(argv)
    if args.json is None:
        suffix = "" if args.program == "rnn" else "_" + args.program
        args.json = os.path.join(HERE, "results", f"pass_growth{suffix}.json")
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
                seconds, lines = _point(trees[name], n, args.program)
                row[f"{name}_lower_s"] = round(seconds, 3)
                row[f"{name}_graph_lines"] = lines
            points.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    report = {"benchmark": "lower() with Numba's JIT off: trace, autodiff, passes, codegen",
              "program": PROGRAMS[args.program][1],
              "command": "python benchmarks/pass_growth.py " + " ".join(argv or sys.argv[1:]),
              "head": head, "base": base_commit, "machine": machine_info(jittape),
              "points": points}
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
