"""``python -m jittape bench``: jittape's gradients against hand-written code and other
frameworks, side by side.

    python -m jittape bench [--workloads a,b] [--systems s,t] [--repeat N] [--seconds S]
                            [--quick] [--threads N] [--json PATH] [--plot PATH]

What is measured. For each workload of ``benchmarks/workloads.py`` (a loss, its data,
the arguments it is differentiated in) and each system (a column), the steady-state
time of one call that computes the loss's value and its gradients, in microseconds per
call: the median over ``--repeat`` rounds (default 7). Inputs are made once, before
timing, in each system's own array type, as in a training loop; a call returns the
system's own arrays (no conversion to NumPy is timed).

The columns:

* ``jt eager``: jittape's ``GradientTape`` recording the loss over ``jt.Variable``
  parameters, then ``tape.gradient`` (``Workload.eager_step``).
* ``jt compiled``: ``jt.value_and_grad(loss, argnums)(*args)``, NumPy in and out, after
  the first call that traced and compiled it. The ratios in the table are to this column.
* ``jt cuda``: the same with ``target="cuda"``, arguments copied to the GPU once and a
  device synchronization after each call; only on a real GPU (not in Numba's simulator).
* ``numpy``: a hand-written, vectorised NumPy value-and-gradient (``workloads.py``).
* ``numba``: a hand-written ``@numba.njit`` value-and-gradient (``workloads.py``).
* ``jax.jit``: ``jax.jit(jax.value_and_grad(loss, argnums))`` on device arrays, waited
  for (``block_until_ready``).
* ``tf eager``: ``tf.GradientTape`` over ``tf.Variable`` parameters, eagerly;
  ``tf.function``: the same step inside ``tf.function``.
* ``torch eager``: the loss on tensors with ``requires_grad``, then
  ``torch.autograd.grad``; ``torch.compile``: the same with ``torch.compile(loss)``.
* ``autograd``: HIPS ``autograd.value_and_grad(loss, argnum)`` on the NumPy arrays.

The peers' losses (``benchmarks/peers.py``) are the jittape losses' math, in float32
where the workload is float32. A peer that is not installed is named in a note (``pip
install -e '.[peers]'`` installs them all); one that fails to load or to run is
reported with the reason, and the rest still runs.

How.

* Everything runs in one process. First every system is prepared for every workload
  and called once: that first call (tracing and compiling, for the systems that
  compile) is timed alone and reported separately (``first call``, milliseconds), never
  mixed into the steady state. jittape and inductor (``torch.compile``) compile into a
  fresh temporary directory (``JITTAPE_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``), so
  their first calls are cold compiles; so are JAX's (no persistent cache unless asked)
  and the Numba reference's (``cache=False``).
* The first call's value and gradients are checked against the jittape eager tape's
  with the workload's tolerance (``workloads.check``). A system that disagrees is
  reported as FAILED and not timed, and the exit status is 1; so it is when jittape's
  own columns or the references raise.
* Then all steps of all workloads are timed in interleaved rounds
  (``timing.measure``): each step once per round, so noise on a shared machine slows
  every column alike. One timing repeats a step for about ``--seconds`` (0.15 s;
  ``--quick``: 0.01 s).
* Threads (``--threads``, default 1): the process runs on that many cores
  (``timing.pin_cores``: XLA's CPU runtime keeps a thread per core whatever its flags
  say, so without this JAX used two cores where the others used one), with one thread
  for every BLAS (set before NumPy loads; run as ``python -m jittape``, the runner
  starts itself anew for that), for PyTorch's and TensorFlow's thread pools, XLA's
  Eigen pool, inductor's compile workers and Numba's threads (jittape's parallel
  loops and matrix products). Every column does the same work on the same cores.
  ``--threads 0`` leaves every library's default and all cores.

Output: a table (workloads x systems) printed to stdout, the steady-state median under
each system with, below it, the ratio of its time to jittape compiled (above 1: slower
than jittape compiled); a table of first calls; notes on failures and missing peers.
``--json PATH`` writes every figure (per-round times, minimums, calls per timing, first
calls, checks) with the machine (platform, CPU count, Python, NumPy, Numba, the peers'
versions), the command line and the date. ``--plot PATH`` saves a bar chart of the
medians with a logarithmic time axis (matplotlib, Agg backend).
"""

import argparse
import datetime
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from timing import machine_info, measure, pin_cores, pin_threads, ratio, threads_pinned  # noqa: E402

PROG_VAR = "JITTAPE_BENCH_PROG"
PEERS_HINT = "pip install -e '.[peers]'"
QUICK_SECONDS = 0.01
# compile caches pointed at a fresh directory for the run, so first calls compile cold
COMPILE_CACHES = {"JITTAPE_CACHE_DIR": "jittape", "TORCHINDUCTOR_CACHE_DIR": "torchinductor"}
BASELINE = "eager"      # every system's value and gradients are checked against this one
RATIO_TO = "compiled"   # every system's time is divided by this one's


# -- the systems ---------------------------------------------------------------------------


@dataclass
class System:
    """A column: ``make(workload) -> (step, to_numpy)`` as in ``peers.py``."""
    key: str
    label: str
    kind: str                 # "jittape", "reference" or "peer"
    make: object
    framework: str = None     # peers: a key of peers.FRAMEWORKS


def _tree_to_numpy(workload, value, grads, leaf=None):
    import numpy as np
    from workloads import map_tree
    leaf = leaf or np.asarray
    return leaf(value), workload.flat(map_tree(leaf, grads))


def jittape_eager(w):
    return w.eager_step(), lambda r: _tree_to_numpy(w, *r)


def jittape_compiled(w):
    import jittape as jt
    f = jt.value_and_grad(w.loss, argnums=w.argnums)
    args = w.args
    return (lambda: f(*args)), lambda r: _tree_to_numpy(w, *r)


def cuda_unavailable():
    """Why the CUDA column cannot run here, or None when a real GPU is there."""
    try:
        from jittape.codegen import cuda_runtime
    except Exception as e:
        return f"numba-cuda is not usable ({type(e).__name__}: {e})"
    if cuda_runtime.simulator():
        return "NUMBA_ENABLE_CUDASIM is set: kernels would run in Numba's CPU simulator"
    try:
        ok = cuda_runtime.cuda.is_available()
    except Exception:
        ok = False
    return None if ok else "no CUDA GPU (numba.cuda.is_available() is False)"


def jittape_cuda(w):
    import numpy as np
    import jittape as jt
    from jittape.codegen import cuda_runtime
    from numba import cuda
    from workloads import map_tree
    f = jt.value_and_grad(w.loss, argnums=w.argnums, target="cuda")
    args = tuple(map_tree(lambda a: cuda.to_device(a) if isinstance(a, np.ndarray) else a,
                          w.args))

    def step():
        result = f(*args)
        cuda.synchronize()
        return result

    return step, lambda r: _tree_to_numpy(w, *r, leaf=cuda_runtime.copy_to_host)


def numpy_reference(w):
    from workloads import unpack_reference
    return w.numpy_step(), unpack_reference


def numba_reference(w):
    from workloads import unpack_reference
    return w.reference_step(), unpack_reference


def _peer(key):
    def make(w):
        import peers
        return peers.PEERS[key][2](w)
    return make


SYSTEMS = {s.key: s for s in [
    System("eager", "jt eager", "jittape", jittape_eager),
    System("compiled", "jt compiled", "jittape", jittape_compiled),
    System("cuda", "jt cuda", "jittape", jittape_cuda),
    System("numpy", "numpy", "reference", numpy_reference),
    System("numba", "numba", "reference", numba_reference),
    System("jax", "jax.jit", "peer", _peer("jax"), "jax"),
    System("tf_eager", "tf eager", "peer", _peer("tf_eager"), "tensorflow"),
    System("tf_function", "tf.function", "peer", _peer("tf_function"), "tensorflow"),
    System("torch_eager", "torch eager", "peer", _peer("torch_eager"), "torch"),
    System("torch_compile", "torch.compile", "peer", _peer("torch_compile"), "torch"),
    System("autograd", "autograd", "peer", _peer("autograd"), "autograd"),
]}


def load_frameworks(names, threads):
    """{framework: {"version": ...} or {"missing": reason} or {"broken": reason}}."""
    import peers
    out = {}
    for name in names:
        try:
            out[name] = {"version": peers.load_framework(name, threads)}
        except ModuleNotFoundError as e:
            top = peers.FRAMEWORKS[name][0]
            key = "missing" if e.name and e.name.split(".")[0] == top else "broken"
            out[name] = {key: f"{type(e).__name__}: {e}"}
        except Exception as e:
            out[name] = {"broken": f"{type(e).__name__}: {e}"}
    return out


# -- checking ----------------------------------------------------------------------------------


def verify(workload, value, grads, baseline):
    """``workloads.check`` of ``(value, grads)`` against the ``baseline`` pair, with a
    one-line ``summary`` of what disagrees."""
    import workloads
    result = workloads.check(workload, value, grads, *baseline)
    bad = [f"{k}: {v.get('problem')}" + (f" (max |err|/max|ref| {v['max_abs_err_rel_to_max']:.1e})"
                                         if "max_abs_err_rel_to_max" in v else "")
           for k, v in result.items() if k != "ok" and not v["ok"]]
    result["summary"] = "agrees" if result["ok"] else "; ".join(bad)
    return result


def _reason(e):
    """An exception in one line: its first line, and its last where they differ (a
    TensorFlow error names its cause last, after the user's stack)."""
    lines = [line.strip() for line in f"{type(e).__name__}: {e}".splitlines() if line.strip()]
    text = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return text if len(text) <= 400 else text[:400] + " ..."


def prepare(w, systems):
    """Make, call once (timed: the first call) and check each system on workload ``w``.

    Returns ``(entry, steps)``: the workload's report entry and the steps to time.
    """
    entry = {"description": w.description, "argnums": w.argnums,
             "tolerance": {"rtol": w.rtol, "atol_rel_to_max": w.atol, "why": w.tolerance_note},
             "results": {}}
    steps, baseline = {}, None
    for s in systems:
        res = entry["results"][s.key] = {}
        try:
            step, to_numpy = s.make(w)
            t0 = time.perf_counter()
            out = step()
            res["first_call_s"] = time.perf_counter() - t0
            value, grads = to_numpy(out)
        except Exception as e:
            res.update(status="error", reason=_reason(e))
            continue
        if s.key == BASELINE:
            baseline = (value, grads)
            res.update(status="ok", check="the baseline")
        elif baseline is None:
            res.update(status="error", reason=f"no baseline: {BASELINE} did not run")
            continue
        else:
            check = verify(w, value, grads, baseline)
            res["check"] = {k: v for k, v in check.items() if k not in ("ok", "summary")}
            if not check["ok"]:
                res.update(status="failed", reason=f"disagrees with jt eager: {check['summary']}")
                continue
            res["status"] = "ok"
        steps[s.key] = step
    return entry, steps


def summarise(entry, times, numbers):
    results = entry["results"]
    for key, t in times.items():
        results[key].update(median_us=statistics.median(t), min_us=min(t), rounds_us=t,
                            number=numbers[key])
    base = times.get(RATIO_TO)
    for key, t in times.items():
        r = results[key]
        r["ratio_to_compiled"] = ratio(r["median_us"], results.get(RATIO_TO, {}).get("median_us"))
        r["paired_ratio_to_compiled"] = (statistics.median(a / b for a, b in zip(t, base))
                                         if base else None)


# -- report ----------------------------------------------------------------------------------

CELL = 14


def _us(v):
    if v >= 1e5:
        return f"{v:,.0f}"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _times(x):
    if x is None:
        return "-"
    if x < 0.1:
        return f"{x:.2g}x"          # two significant digits: 0.0029x
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x" if x < 100 else f"{x:,.0f}x"


def _cell(res, what):
    status = (res or {}).get("status")
    if status is None:
        return "n/a"
    if status != "ok":
        return {"failed": "FAILED", "error": "error"}.get(status, status)
    if what == "time":
        return _us(res["median_us"]) if "median_us" in res else "-"
    if what == "ratio":
        return _times(res.get("ratio_to_compiled"))
    return f"{1e3 * res['first_call_s']:.1f}" if "first_call_s" in res else "-"


def table(report, keys, what):
    """Rows of one table: a header, then per workload a line (two with ratios)."""
    labels = [report["systems"][k]["label"] for k in keys]
    rows = [f"{'workload':18s}" + "".join(f"{x:>{CELL}s}" for x in labels)]
    for name, e in report["workloads"].items():
        cells = [_cell(e["results"].get(k), what) for k in keys]
        rows.append(f"{name:18s}" + "".join(f"{c:>{CELL}s}" for c in cells))
        if what == "time":
            cells = [_cell(e["results"].get(k), "ratio") for k in keys]
            rows.append(f"{'':18s}" + "".join(f"{c:>{CELL}s}" for c in cells))
    return rows


def notes(report):
    lines = []
    for name, e in report["workloads"].items():
        for key, res in e["results"].items():
            if res.get("status") in ("failed", "error"):
                label = report["systems"][key]["label"]
                lines.append(f"{res['status'].upper()}: {name}, {label}: {res['reason']}")
    for key, s in report["systems"].items():
        if s["status"] == "unavailable" and s["kind"] != "peer":
            lines.append(f"not run: {s['label']}: {s['reason']}")
    for name, f in report["frameworks"].items():
        if "broken" in f:
            lines.append(f"peer {f['label']} could not be loaded: {f['broken']}")
    missing = [f"{f['label']} ({f['package']})" for f in report["frameworks"].values()
               if "missing" in f]
    if missing:
        lines.append(f"peers not installed: {', '.join(missing)}; install them with "
                     f"{PEERS_HINT}")
    return lines


def print_report(report):
    keys = [k for k, s in report["systems"].items() if s["status"] == "available"]
    print()
    print(f"steady state: microseconds per value-and-gradient call, median of "
          f"{report['repeat']} interleaved rounds")
    print("second line: time / jittape compiled (above 1: slower than jittape compiled)")
    print("\n".join(table(report, keys, "time")))
    print()
    print("first call, milliseconds (tracing and compiling, for the systems that compile)")
    print("\n".join(table(report, keys, "first")))
    lines = notes(report)
    if lines:
        print()
        print("\n".join(lines))


def plot(report, path):
    """Bar chart of the medians, log time axis; False (and says why) without matplotlib."""
    from jittape.__main__ import pyplot
    plt = pyplot()
    if plt is None:
        return False
    import numpy as np
    names = list(report["workloads"])
    keys = [k for k in report["systems"]
            if any("median_us" in e["results"].get(k, {}) for e in report["workloads"].values())]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.22 * len(names) * len(keys) + 3), 5.5))
    width = 0.85 / max(1, len(keys))
    colors = plt.get_cmap("tab20" if len(keys) > 10 else "tab10")
    for j, key in enumerate(keys):
        xs = [i for i, n in enumerate(names) if "median_us" in report["workloads"][n]["results"].get(key, {})]
        ys = [report["workloads"][names[i]]["results"][key]["median_us"] for i in xs]
        ax.bar(np.array(xs) + (j - (len(keys) - 1) / 2) * width, ys, width,
               label=report["systems"][key]["label"], color=colors(j))
    ax.set_yscale("log")
    low = min(r["median_us"] for e in report["workloads"].values()
              for r in e["results"].values() if "median_us" in r)
    ax.set_ylim(bottom=10 ** np.floor(np.log10(low) - 0.3))
    ax.set_ylabel("microseconds per value-and-gradient call (log scale)")
    ax.set_xticks(range(len(names)), names)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    m = report["machine"]
    ax.set_title(f"median of {report['repeat']} rounds; {m['processor']}, {m['cpus']} CPUs, "
                 f"{report['threads'] or 'default'} thread(s)", fontsize="medium")
    ax.legend(ncol=min(len(keys), 6), fontsize="small", loc="upper center",
              bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_json(report, path):
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        json.dump(report, fh, indent=2, default=str)
    os.replace(path + ".tmp", path)


# -- main ---------------------------------------------------------------------------------


def make_parser(prog):
    doc = __doc__.replace("``", "").split("\n\n")
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=doc[0], epilog="\n\n".join(doc[2:]) + "\n\nsystems (for --systems): "
        + ", ".join(SYSTEMS))
    parser.add_argument("--workloads", help="comma-separated workloads (default: all of "
                        "benchmarks/workloads.py)")
    parser.add_argument("--systems", help="comma-separated systems (default: all that can "
                        "run here)")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--seconds", type=float, default=0.15,
                        help="duration of one timing of one step (default 0.15)")
    parser.add_argument("--quick", action="store_true",
                        help=f"short timings (--seconds {QUICK_SECONDS}), for a smoke test")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for BLAS and the peers' pools (default 1; 0: each "
                             "library's default)")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--plot", help="save a bar chart (PNG) here")
    return parser


def main(argv=None, prog="python -m jittape bench"):
    """Run the benchmark; returns the exit status (1 when a system disagrees or jittape fails)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = make_parser(prog)
    args = parser.parse_args(argv)
    if args.threads > 0 and not threads_pinned(args.threads):
        if "numpy" in sys.modules:
            # OpenBLAS has read its thread count already: run anew with it set.
            env = pin_threads(args.threads, dict(os.environ))
            env[PROG_VAR] = prog
            return subprocess.call([sys.executable, os.path.abspath(__file__), *argv], env=env)
        pin_threads(args.threads)
    cores = pin_cores(args.threads) if args.threads > 0 else []
    if args.quick:
        args.seconds = QUICK_SECONDS

    cache = tempfile.mkdtemp(prefix="jittape-bench-")
    fresh = {var: os.path.join(cache, sub) for var, sub in COMPILE_CACHES.items()}
    saved = {var: os.environ.get(var) for var in fresh}
    os.environ.update(fresh)
    try:
        return run(args, parser, f"{prog} {shlex.join(argv)}".strip(), cores)
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        shutil.rmtree(cache, ignore_errors=True)


def _choose(option, known, what, parser):
    if not option:
        return list(known)
    chosen = [x.strip() for x in option.split(",") if x.strip()]
    for x in chosen:
        if x not in known:
            parser.error(f"unknown {what} {x!r}; known: {', '.join(known)}")
    return chosen


def run(args, parser, command, cores=()):
    started = time.perf_counter()
    import peers
    peers.prepare_environment(args.threads)
    import jittape as jt
    import numba
    import workloads

    if args.threads > 0:        # jittape's parallel loops and products: the same cores
        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))

    names = _choose(args.workloads, workloads.WORKLOADS, "workload", parser)
    chosen = _choose(args.systems, SYSTEMS, "system", parser)
    # the baseline runs (and is checked against) whether or not it is timed
    systems = [SYSTEMS[BASELINE]] + [SYSTEMS[k] for k in chosen if k != BASELINE]

    frameworks = load_frameworks(sorted({s.framework for s in systems if s.framework},
                                        key=list(peers.FRAMEWORKS).index), args.threads)
    for name, f in frameworks.items():
        f.update(label=peers.FRAMEWORKS[name][2], package=peers.FRAMEWORKS[name][1])
    report = {
        "benchmark": "value and gradients per call: jittape, hand-written references, peers",
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(jt), "threads": args.threads,
        "cores": list(cores), "repeat": args.repeat,
        "seconds_per_timing": args.seconds, "frameworks": frameworks, "systems": {},
        "workloads": {}}
    report["machine"]["peers"] = {n: f.get("version") for n, f in frameworks.items()}
    runnable = []
    for s in systems:
        reason = None
        if s.framework:
            f = frameworks[s.framework]
            reason = f.get("missing") or f.get("broken")
        elif s.key == "cuda":
            reason = cuda_unavailable()
        entry = {"label": s.label, "kind": s.kind, "framework": s.framework,
                 "status": "unavailable" if reason else "available", "reason": reason}
        if s.key == BASELINE and BASELINE not in chosen:
            entry["status"] = "baseline only"
        report["systems"][s.key] = entry
        if not reason:
            runnable.append(s)
    if "cuda" in report["systems"] and report["systems"]["cuda"]["status"] == "available":
        from numba import cuda
        report["machine"]["gpu"] = str(cuda.get_current_device().name)

    all_steps = {}
    for name in names:
        print(f"preparing {name}: first calls and checks ...", flush=True)
        w = workloads.build(name)
        entry, steps = prepare(w, runnable)
        report["workloads"][name] = entry
        for key, step in steps.items():
            if report["systems"][key]["status"] == "available":
                all_steps[(name, key)] = step
    for key in list(report["systems"]):
        if report["systems"][key]["status"] == "baseline only":
            for e in report["workloads"].values():
                e["results"].pop(key, None)

    estimate = len(all_steps) * args.seconds * (args.repeat + 1)
    print(f"timing {len(all_steps)} steps in {args.repeat} interleaved rounds "
          f"(about {estimate:.{0 if estimate >= 10 else 1}f} s) ...", flush=True)
    times, numbers = measure(all_steps, args.repeat, args.seconds)
    for name, entry in report["workloads"].items():
        summarise(entry, {k: t for (n, k), t in times.items() if n == name},
                  {k: c for (n, k), c in numbers.items() if n == name})

    failed = [f"{n}: {k}: {r['reason']}" for n, e in report["workloads"].items()
              for k, r in e["results"].items()
              if r.get("status") == "failed"
              or (r.get("status") == "error" and report["systems"][k]["kind"] != "peer")]
    report["failed"] = failed
    report["missing_peers"] = [f["label"] for f in frameworks.values() if "missing" in f]
    report["wall_s"] = time.perf_counter() - started
    print_report(report)
    if args.json:
        write_json(report, args.json)
        print(f"\nJSON written to {os.path.abspath(args.json)}")
    if args.plot and plot(report, args.plot):
        print(f"plot saved to {os.path.abspath(args.plot)}")
    print(f"({report['wall_s']:.0f} s)")
    if failed:
        print(f"{len(failed)} system(s) failed: exit status 1")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(prog=os.environ.get(PROG_VAR) or "python benchmarks/runner.py"))
