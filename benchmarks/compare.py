"""Steady-state call times of this tree against another commit, side by side.

    python benchmarks/compare.py --base HEAD~3 --json benchmarks/results/compare.json

A change that adds checks or reads to compiled code must not slow the calls that an
optimisation loop makes. Comparing against a figure recorded on another day says little
on a shared machine, so this script runs ``python -m jittape bench --systems
compiled,numba`` for both trees in turns (base, this tree, base, ...: ``--rounds``
pairs, each a fresh process), and reports per workload the median of each tree's
medians, the ratio of this tree to the base, and the same ratio for the hand-written
Numba column, which neither tree changes: where that one drifts too, the machine did.

The base tree is ``git archive``d into a temporary folder and imported from there
(``PYTHONPATH``), with its own benchmarks/ folder, so each tree times its own code.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from timing import machine_info  # noqa: E402

import jittape  # noqa: E402  (this tree: the machine report names its version)


def _export(ref, dest):
    """The tree of ``ref`` under ``dest`` (its commit id is returned)."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", ref], check=True,
                            capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return commit


def _bench(tree, out, args, cache):
    env = dict(os.environ, PYTHONPATH=tree, JITTAPE_CACHE_DIR=cache)
    cmd = [sys.executable, "-m", "jittape", "bench", "--systems", args.systems,
           "--repeat", str(args.repeat), "--json", out]
    if args.workloads:
        cmd += ["--workloads", args.workloads]
    subprocess.run(cmd, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["workloads"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of bench runs")
    parser.add_argument("--repeat", type=int, default=5, help="bench's --repeat")
    parser.add_argument("--workloads", default="", help="bench's --workloads")
    parser.add_argument("--systems", default="compiled,numba",
                        help="bench's --systems (numba, which neither tree changes, is added)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s and s != "numba"] + ["numba"]
    args.systems = ",".join(systems)

    work = tempfile.mkdtemp(prefix="jittape-compare-")
    try:
        base_tree = os.path.join(work, "base")
        os.makedirs(base_tree)
        base_commit = _export(args.base, base_tree)
        trees = {"base": base_tree, "head": ROOT}
        runs = {"base": [], "head": []}
        for r in range(args.rounds):
            for name in ("base", "head"):     # the base first in each pair
                cache = os.path.join(work, f"cache-{name}")  # compiled once per tree
                out = os.path.join(work, f"{name}-{r}.json")
                runs[name].append(_bench(trees[name], out, args, cache))
                print(f"round {r + 1}/{args.rounds}: {name} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = {}
    for workload in runs["head"][0]:
        row = {}
        for system in systems:
            per = {}
            for name in ("base", "head"):
                medians = [run[workload]["results"][system]["median_us"] for run in runs[name]
                           if run[workload]["results"][system].get("status") == "ok"]
                per[name] = {"median_us": statistics.median(medians), "runs_us": medians}
            per["ratio_head_to_base"] = per["head"]["median_us"] / per["base"]["median_us"]
            row[system] = per
        table[workload] = row

    for system in systems[:-1]:
        print(f"\n{system + ':':<22} {'base us':>10} {'head us':>10} {'head/base':>10} "
              f"{'numba h/b':>10}")
        for workload, row in table.items():
            c = row[system]
            print(f"{workload:<22} {c['base']['median_us']:>10.2f} "
                  f"{c['head']['median_us']:>10.2f} {c['ratio_head_to_base']:>10.3f} "
                  f"{row['numba']['ratio_head_to_base']:>10.3f}")
    if args.json:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        report = {"benchmark": "steady-state call time, this tree against a base commit",
                  "command": "python benchmarks/compare.py " + " ".join(argv or sys.argv[1:]),
                  "base": base_commit, "head": head,
                  "head_has_uncommitted_changes": bool(subprocess.run(
                      ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                      capture_output=True, text=True).stdout.strip()),
                  "machine": machine_info(jittape), "rounds": args.rounds, "workloads": table}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
