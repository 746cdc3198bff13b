"""Large graphs compiled in parts, parts shared by their code: compile time and memory.

    python benchmarks/parts.py [--layers 32,128] [--one-kernel 32] [--no-jax] [--tree PATH]

The program is an MLP of tanh layers of widths drawn at random (16 to 63, batch 64,
float64, ``value_and_grad`` of the mean square of the output), so that no loop rolls: a
graph of about 8 nodes a layer, straight through. Above ``codegen.cpu.PART_NODES`` nodes
it is compiled in parts; where it repeats itself (the layers, forward and backward) it
is cut at the repeats, so that the parts are the same code, compiled once and called
again.

Each point is a fresh process on one core with one BLAS thread, ``jt.config.tiered``
off (the first call waits for the compile), jittape's own runtime helpers compiled by
a process before (as after any earlier use):

* ``parts``: an empty disk cache; first call, steady call, peak RSS (``ru_maxrss``,
  the compile included), the distinct parts and their calls;
* ``one_kernel``: the same with ``PART_NODES`` unbounded: one Numba function (for
  ``--one-kernel`` sizes only: 128 layers take about two minutes);
* ``other_model``: after the ``parts`` point of the largest size, in a new process with
  that disk cache, a model with another loss (sum of absolute values) and a quarter
  more layers: it loads the layer parts and compiles its own;
* ``jax``: ``jax.jit(jax.value_and_grad(loss))`` of the same program, first and steady
  call (when JAX is installed).

Results go to ``benchmarks/results/parts.json``.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from timing import pin_cores, pin_threads  # noqa: E402

BATCH = 64


def _program(np, layers, head):
    rng = __import__("numpy").random.default_rng(0)
    # widths drawn at random: a sequence of widths that recurs (16 + 7i mod 48 does every
    # 48 layers) would be rolled into a loop whose body is 48 layers, compiled as one
    widths = [int(w) for w in rng.integers(16, 64, size=layers + 1)]
    params = [(rng.normal(size=(a, b)) / a ** 0.5, rng.normal(size=b) * 0.1)
              for a, b in zip(widths, widths[1:])]
    x = rng.normal(size=(BATCH, widths[0]))

    def loss(params, x):
        h = x
        for w, b in params:
            h = np.tanh(h @ w + b)
        return np.mean(h * h) if head == "mean" else np.sum(np.abs(h))
    return loss, params, x


def point(kind, layers, head):
    """Run one point in this process; print its JSON line."""
    pin_cores(1)
    out = {"kind": kind, "layers": layers, "head": head}
    if kind == "jax":
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        loss, params, x = _program(jnp, layers, head)
        f = jax.jit(jax.value_and_grad(loss))
        params, x = jax.tree_util.tree_map(jnp.asarray, (params, x))
        call = lambda: jax.block_until_ready(f(params, x))  # noqa: E731
    else:
        import numpy as np
        import jittape as jt
        from jittape.codegen import cpu
        jt.config.tiered = False
        if kind == "one_kernel":
            cpu.PART_NODES = 10 ** 9
        loss, params, x = _program(np, layers, head)
        f = jt.value_and_grad(loss)
        call = lambda: f(params, x)  # noqa: E731
    start = time.perf_counter()
    call()
    out["first_s"] = time.perf_counter() - start
    calls = max(3, min(200, int(0.5 / max(_time(call), 1e-6))))
    out["steady_ms"] = min(_time(call, calls) for _ in range(5)) * 1e3
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if kind != "jax":
        import re
        source = f.lower(params, x).source
        defined = re.findall(r"^def (part_\w+)\(", source, re.M)
        out["parts"] = len(defined)
        out["part_calls"] = sum(source.count(f"{name}(") - 1 for name in defined)
    print(json.dumps(out), flush=True)


def _time(call, n=1):
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def _run(tree, cache, kind, layers, head, timeout):
    env = pin_threads(1, dict(os.environ))
    env.update(JITTAPE_CACHE_DIR=cache, NUMBA_NUM_THREADS="1",
               PYTHONPATH=tree + os.pathsep + env.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--point", kind,
                               str(layers), head], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "layers": layers, "head": head, "error": f"over {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"kind": kind, "layers": layers, "head": head,
                "error": (done.stderr or done.stdout)[-2000:]}
    return json.loads(lines[-1])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--point"]:
        point(argv[1], int(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="32,128")
    parser.add_argument("--one-kernel", default="32", help="sizes to compile as one kernel too")
    parser.add_argument("--jax", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--tree", default=ROOT,
                        help="the repository whose jittape to measure (default: this one)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", default=os.path.join(HERE, "results", "parts.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.layers.split(",") if s]
    one_kernel = [int(s) for s in args.one_kernel.split(",") if s]
    work = tempfile.mkdtemp(prefix="jittape-parts-bench-")
    rows = []
    try:
        tree = os.path.join(work, "tree")         # a copy: edits during the run stay out
        shutil.copytree(os.path.join(args.tree, "jittape"), os.path.join(tree, "jittape"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        # Numba's cache of the copy's runtime helpers, filled as after any earlier use;
        # a graph in parts (PART_NODES is 160) with its own cache, thrown away
        _run(tree, os.path.join(work, "warm-up"), "parts", 24, "mean", args.timeout)
        for layers in sizes:
            cache = os.path.join(work, f"cache{layers}")
            runs = [("parts", layers, "mean", cache)]
            if layers == max(sizes):
                runs.append(("other_model", layers + layers // 4, "abs", cache))
            if layers in one_kernel:
                runs.append(("one_kernel", layers, "mean", os.path.join(work, f"one{layers}")))
            if args.jax:
                runs.append(("jax", layers, "mean", cache))
            for kind, n, head, where in runs:
                row = _run(tree, where, "parts" if kind == "other_model" else kind, n, head,
                           args.timeout)
                row["kind"] = kind
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    commit = subprocess.run(["git", "-C", args.tree, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    result = {"program": "MLP of tanh layers of widths drawn at random (16 to 63), batch 64, "
                         "float64, value_and_grad; tiered off; each point a fresh process "
                         "on one core", "tree": args.tree,
              "commit": commit, "points": rows}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"\n{'kind':12} {'layers':>6} {'first s':>8} {'steady ms':>10} {'peak MB':>8} "
          f"{'parts':>6} {'calls':>6}")
    for r in rows:
        if "error" in r:
            print(f"{r['kind']:12} {r['layers']:>6} error: {r['error'][:60]}")
            continue
        print(f"{r['kind']:12} {r['layers']:>6} {r['first_s']:8.2f} {r['steady_ms']:10.3f} "
              f"{r['peak_mb']:8.0f} {r.get('parts', ''):>6} {r.get('part_calls', ''):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
