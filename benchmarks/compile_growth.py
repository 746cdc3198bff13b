"""How the cost of a first call grows with the program, jittape against JAX.

    python benchmarks/compile_growth.py [--quick] [--points rnn_scan,rnn_loop,mlp]
                                        [--jax | --no-jax] [--timeout S] [--json PATH]

Programs, each differentiated with respect to its parameters (float64 everywhere: JAX
runs with ``jax_enable_x64`` so both compute the same thing):

* ``rnn_loop``: a tanh RNN (hidden 32, batch 8, input 16), ``h = tanh(h @ W + xs[t] @ U)``
  in a Python ``for t in range(T)``, loss ``sum(h * h)`` of the final state, at 10, 50,
  200 and 1000 steps; jittape on NumPy code, JAX ``jax.jit(jax.value_and_grad)`` on the
  same loop (both unroll it while tracing);
* ``rnn_scan``: the same RNN with ``jt.scan`` and ``jax.lax.scan``;
* ``mlp``: 2, 8 and 32 tanh layers of width 64 on a batch of 128, separate weights per
  layer (a list of ``(W, b)``), loss ``mean(h * h)``.

Every point (program, size, system) runs in a fresh Python process with a new, empty
``JITTAPE_CACHE_DIR``, and reports:

* ``import_s``: importing jittape (with Numba) or JAX, before any clock below;
* ``first_s``: the first call, from just before it to its return (trace, differentiate,
  compile, run; JAX's results waited for);
* ``wall100_s``: from before the first call to the return of the 100th, what an
  optimisation loop of 100 steps waits for;
* ``steady_us``: the median call after those 100 (at least 20 calls, about 1 s); for
  jittape after ``f.kernel(...)`` has waited for a compile still running, so that it
  times the compiled kernel (``kernel_ready_s``: when it was ready, from before the
  first call).

With ``jt.config.tiered`` on, the first calls run the generated module as Python while
Numba compiles in a thread, so ``first_s`` is no longer the compile's cost and
``wall100_s`` (with ``kernel_ready_s``) is the figure to read; ``cache_info`` says how
many calls ran as Python (``python_calls``) and ``call_ms`` has each of the 100 calls.
``--config tiered=False`` (any ``jt.config`` attribute, a Python literal) sets it in
every jittape process.

jittape's runtime helpers are compiled once per machine and kept in one folder that
every point shares (``JITTAPE_HELPERS_DIR``, set by ``timing``), as after an install
and ``python -m jittape warmup``, and a warm-up process per jittape program makes sure
they are before the points run. JAX has no
persistent cache unless configured, so each of its processes compiles from scratch.

The ``jittape`` package is copied from this tree when the run starts, and every
process imports the copy, so that edits to the tree during a run (which takes minutes)
do not mix two versions into one table; the JSON names the tree's commit and the
package's files changed from it (``tree_changes``).

Each process runs on one core (``taskset -c 0`` where there is ``taskset``), with one
thread for BLAS, Numba and XLA. A process past ``--timeout`` seconds is killed and its
point recorded as ``"timeout"``.

Every process saves its value and gradients; the parent checks each point against the
JAX ``lax.scan`` (RNN) or JAX (MLP) result of the same size (rtol 1e-8) and prints a
mismatch loudly (exit status 1). Results go to ``benchmarks/results/compile_growth.json``.
"""

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "JITTAPE-GROWTH "
RTOL = 1e-8

SIZES = {"rnn_loop": (10, 50, 200, 1000), "rnn_scan": (10, 50, 200, 1000), "mlp": (2, 8, 32)}
QUICK_SIZES = {"rnn_loop": (10, 50), "rnn_scan": (10, 50), "mlp": (2, 8)}
SIZE_NAME = {"rnn_loop": "steps", "rnn_scan": "steps", "mlp": "layers"}
# the JAX program each jittape program is compared with, by the same name
JAX_FORM = {"rnn_loop": "jax.jit(value_and_grad), Python loop",
            "rnn_scan": "jax.jit(value_and_grad), jax.lax.scan",
            "mlp": "jax.jit(value_and_grad)"}
HIDDEN, BATCH, INPUT = 32, 8, 16
WIDTH, MLP_BATCH = 64, 128


# -- one point (run in a fresh process) -------------------------------------------------


def _data(program, size):
    """The point's arguments as NumPy float64 arrays, the same in every process."""
    import numpy as np
    rng = np.random.default_rng(0)
    if program == "mlp":
        params = [(rng.normal(size=(WIDTH, WIDTH)) / np.sqrt(WIDTH), rng.normal(size=WIDTH) * 0.1)
                  for _ in range(size)]
        return params, rng.normal(size=(MLP_BATCH, WIDTH))
    W = rng.normal(size=(HIDDEN, HIDDEN)) * 0.1
    U = rng.normal(size=(INPUT, HIDDEN)) * 0.1
    return W, U, rng.normal(size=(size, BATCH, INPUT))


def _losses(np, scan):
    """The three losses over a NumPy-like namespace ``np`` and a ``scan``."""

    def rnn_loop(W, U, xs):
        h = np.zeros((BATCH, HIDDEN))
        for t in range(xs.shape[0]):
            h = np.tanh(h @ W + xs[t] @ U)
        return np.sum(h * h)

    def rnn_scan(W, U, xs):
        def step(h, x):
            return np.tanh(h @ W + x @ U), None
        h, _ = scan(step, np.zeros((BATCH, HIDDEN)), xs)
        return np.sum(h * h)

    def mlp(params, x):
        h = x
        for W, b in params:
            h = np.tanh(h @ W + b)
        return np.mean(h * h)

    return {"rnn_loop": rnn_loop, "rnn_scan": rnn_scan, "mlp": mlp}


def _argnums(program):
    return 0 if program == "mlp" else (0, 1)


def point(system, program, size, save, settings=()):
    """Time one point; print its JSON line; save value and gradients to ``save``."""
    import numpy as np
    out = {"system": system, "program": program, "size": size, "pid": os.getpid()}
    t0 = time.perf_counter()
    if system == "jax":
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        out["import_s"] = time.perf_counter() - t0
        loss = _losses(jnp, jax.lax.scan)[program]
        f = jax.jit(jax.value_and_grad(loss, argnums=_argnums(program)))
        # arrays on the device (and the backend started) before the clock
        args = jax.tree_util.tree_map(jnp.asarray, _data(program, size))
        call = lambda: jax.block_until_ready(f(*args))          # noqa: E731
        flat = lambda tree: [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]  # noqa: E731
    else:
        import jittape as jt
        import numba
        numba.set_num_threads(1)
        out["import_s"] = time.perf_counter() - t0
        for key, value in settings:
            setattr(jt.config, key, value)
        out["config"] = {k: getattr(jt.config, k) for k in ("tiered", "roll_loops", "parallel")
                         if hasattr(jt.config, k)}
        f = jt.value_and_grad(_losses(np, jt.scan)[program], argnums=_argnums(program))
        args = _data(program, size)
        call = lambda: f(*args)                                  # noqa: E731
        flat = lambda tree: [np.asarray(a) for a in jt.tree.flatten(tree)[0]]  # noqa: E731
    start = time.perf_counter()
    result = call()
    ends = [time.perf_counter() - start]
    for _ in range(99):
        call()
        ends.append(time.perf_counter() - start)
    out["first_s"], out["wall100_s"] = ends[0], ends[-1]
    out["call_ms"] = [round((b - a) * 1e3, 3) for a, b in zip([0.0] + ends, ends)]
    if system == "jittape" and hasattr(f, "kernel"):
        f.kernel(*args)                      # a compile still running, waited for
        out["kernel_ready_s"] = time.perf_counter() - start
    times = []
    begin = time.perf_counter()
    while len(times) < 20 or (time.perf_counter() - begin < 1.0 and len(times) < 5000):
        t = time.perf_counter()
        last = call()
        times.append(time.perf_counter() - t)
    out["steady_us"] = statistics.median(times) * 1e6
    out["steady_calls"] = len(times)
    if system == "jittape" and hasattr(f, "cache_info"):
        info = f.cache_info()
        out["cache_info"] = info._asdict() if hasattr(info, "_asdict") else repr(info)
    # the steady (compiled) result is the one checked against the other systems; the
    # first call's (a Python tier's, when tiered) against it here
    first = [np.asarray(result[0])] + flat(result[1])
    final = [np.asarray(last[0])] + flat(last[1])
    out["first_vs_steady_rel_err"] = _rel_err(first, final)
    np.savez(save, *final[1:], value=final[0])
    print(MARK + json.dumps(out), flush=True)


# -- the parent -------------------------------------------------------------------------


def _environment(cache_dir, tree):
    env = dict(os.environ, JITTAPE_CACHE_DIR=cache_dir, NUMBA_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
               PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_DISABLE_JIT", None)
    env.pop("JAX_ENABLE_X64", None)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def run_point(system, program, size, work, pin, timeout, settings=""):
    """One point in a fresh process with an empty jittape cache: its JSON (``"timeout"``
    or ``"error"`` in place of times when it failed)."""
    tag = f"{system}-{program}-{size}"
    cache = tempfile.mkdtemp(prefix=f"cache-{tag}-", dir=work)
    save = os.path.join(work, tag + ".npz")
    tree = os.path.join(work, "tree")             # the package's copy (see the docstring)
    cmd = pin + [sys.executable, os.path.join(tree, "compile_growth.py"), "--point", system,
                 program,
                 str(size), save] + ([settings] if settings and system == "jittape" else [])
    began = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=_environment(cache, tree), cwd=tree,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"system": system, "program": program, "size": size,
                "status": "timeout", "timeout_s": timeout}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
            result["status"] = "ok"
            result["process_s"] = time.perf_counter() - began
            result["saved"] = save
            return result
    return {"system": system, "program": program, "size": size, "status": "error",
            "exit": proc.returncode, "stderr_tail": proc.stderr.strip()[-3000:]}


def _load(path):
    import numpy as np
    with np.load(path) as z:
        return [z["value"]] + [z[f"arr_{i}"] for i in range(len(z.files) - 1)]


def _rel_err(got, want):
    """The largest relative difference between two lists of arrays, each element's
    against ``want``'s magnitude plus 1e-4 of the array's largest (so that elements near
    zero do not dominate: 1e-12 of the largest, at rtol 1e-8); inf when the lists or
    shapes differ."""
    import numpy as np
    if len(got) != len(want) or any(np.shape(g) != np.shape(w) for g, w in zip(got, want)):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want):
        scale = max(float(np.max(np.abs(w))), 1e-300)
        err = np.abs(g - w) / (np.abs(w) + 1e-12 * scale / RTOL)
        worst = max(worst, float(np.max(err)))
    return worst


def _check(result, reference):
    """Whether ``result``'s saved value and gradients agree with ``reference``'s
    (rtol 1e-8), and with its own first call."""
    worst = _rel_err(_load(result["saved"]), _load(reference["saved"]))
    own = result.get("first_vs_steady_rel_err", 0.0)
    return {"ok": worst <= RTOL and own <= RTOL, "max_rel_err": worst,
            "first_vs_steady_rel_err": own,
            "against": f"{reference['system']} {reference['program']}"}


def _ratio(a, b):
    return round(a / b, 3) if a and b else None


def _versions():
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for name in ("jax", "jaxlib"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _fmt(row, key, scale=1.0, digits=3):
    v = row.get(key)
    if row.get("status") != "ok":
        return row.get("status", "?")
    if key not in row:
        return ""
    return f"{v * scale:.{digits}f}" if v is not None else "-"


def table(points, ratios):
    lines = [f"{'program':9} {'size':>5} {'system':8} {'import s':>9} {'first s':>9} "
             f"{'steady us':>10} {'wall100 s':>10} {'kernel s':>9} {'py calls':>8} {'first/JAX':>9} {'steady/JAX':>10} "
             f"{'wall100/JAX':>11} {'agree':>6}"]
    for p in points:
        r = ratios.get((p["program"], p["size"]), {}) if p["system"] == "jittape" else {}
        check = p.get("check")
        agree = "-" if check is None else ("yes" if check["ok"] else "NO")
        info = p.get("cache_info")
        py = info.get("python_calls", "") if isinstance(info, dict) else ""
        lines.append(
            f"{p['program']:9} {p['size']:>5} {p['system']:8} {_fmt(p, 'import_s'):>9} "
            f"{_fmt(p, 'first_s'):>9} {_fmt(p, 'steady_us', digits=1):>10} "
            f"{_fmt(p, 'wall100_s'):>10} {_fmt(p, 'kernel_ready_s'):>9} {py:>8} "
            f"{str(r.get('first', '')):>9} "
            f"{str(r.get('steady', '')):>10} {str(r.get('wall100', '')):>11} {agree:>6}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--point"]:
        system, program, size, save = argv[1:5]
        point(system, program, int(size), save, json.loads(argv[5]) if len(argv) > 5 else ())
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer points: RNN at 10 and 50 steps, MLP of 2 and 8 layers")
    parser.add_argument("--points", default="rnn_loop,rnn_scan,mlp",
                        help="programs to run, of " + ",".join(SIZES))
    parser.add_argument("--jax", action=argparse.BooleanOptionalAction, default=True,
                        help="run JAX's matching programs too (default: yes)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="set jt.config.KEY to the Python literal VALUE in jittape's "
                             "processes (repeatable), e.g. tiered=False")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "compile_growth.json"))
    args = parser.parse_args(argv)
    programs = [p for p in args.points.split(",") if p]
    unknown = sorted(set(programs) - set(SIZES))
    if unknown:
        parser.error(f"unknown points {unknown}; choose from {','.join(SIZES)}")
    sizes = QUICK_SIZES if args.quick else SIZES
    settings = []
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--config wants KEY=VALUE, got {item!r}")
        try:
            settings.append((key.strip(), ast.literal_eval(value.strip())))
        except (ValueError, SyntaxError):
            parser.error(f"--config {item!r}: the value is not a Python literal")
    settings = json.dumps(settings) if settings else ""
    systems = ["jittape", "jax"] if args.jax else ["jittape"]
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    print("each point in a fresh process, "
          + ("pinned to CPU 0 with taskset -c 0" if pin else "not pinned (no taskset)")
          + ", one thread for BLAS, Numba and XLA; float64", flush=True)

    work = tempfile.mkdtemp(prefix="jittape-compile-growth-")
    shutil.copytree(os.path.join(ROOT, "jittape"), os.path.join(work, "tree", "jittape"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(work, "tree"))       # the copy every process imports
    from timing import machine_info
    import jittape
    shutil.copy(os.path.abspath(__file__), os.path.join(work, "tree", "compile_growth.py"))
    tree_changes = subprocess.run(["git", "-C", ROOT, "status", "--short", "--", "jittape"],
                                  capture_output=True, text=True).stdout.splitlines()
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    points, failed_checks = [], []
    try:
        # Numba's cache of the copy's runtime helpers, filled as after any earlier use
        for program in programs:
            run_point("jittape", program, sizes[program][0], work, pin, args.timeout,
                      settings)
        for program in programs:
            for size in sizes[program]:
                row = {}
                for system in systems:
                    p = run_point(system, program, size, work, pin, args.timeout, settings)
                    row[system] = p
                    points.append(p)
                    shown = {k: (round(v, 4) if isinstance(v, float) else v)
                             for k, v in p.items() if k in ("import_s", "first_s",
                                                            "steady_us", "wall100_s",
                                                            "kernel_ready_s", "status")}
                    print(f"{program} {SIZE_NAME[program]}={size} {system}: {shown}", flush=True)
                    if p["status"] == "error":
                        print(p["stderr_tail"], file=sys.stderr, flush=True)
        # each point against JAX's scan (RNN) or JAX (MLP) of its size; without JAX,
        # the Python-loop RNN against jt.scan
        by = {(p["system"], p["program"], p["size"]): p for p in points if p["status"] == "ok"}
        for p in points:
            if p["status"] != "ok":
                continue
            refs = ([("jax", "rnn_scan"), ("jax", "rnn_loop"), ("jittape", "rnn_scan")]
                    if p["program"] != "mlp" else [("jax", "mlp")])
            for system, program in refs:
                ref = by.get((system, program, p["size"]))
                if ref is not None and ref is not p:
                    p["check"] = _check(p, ref)
                    if not p["check"]["ok"]:
                        failed_checks.append(p)
                        print(f"\n!!!! MISMATCH: {p['system']} {p['program']} size "
                              f"{p['size']} against {p['check']}\n", file=sys.stderr, flush=True)
                    break
            own = p.get("first_vs_steady_rel_err", 0.0)
            if "check" not in p and own > RTOL:
                failed_checks.append(p)
                print(f"\n!!!! MISMATCH: {p['system']} {p['program']} size {p['size']}: first "
                      f"call against steady call, rel err {own}\n", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in points:
        p.pop("saved", None)
        p.pop("pid", None)

    ratios = {}
    by = {(p["system"], p["program"], p["size"]): p for p in points}
    for p in points:
        if p["system"] != "jittape":
            continue
        j = by.get(("jax", p["program"], p["size"]))
        if j is None:
            continue
        ratios[(p["program"], p["size"])] = {
            k.replace("_s", "").replace("_us", ""): _ratio(p.get(k), j.get(k))
            for k in ("first_s", "steady_us", "wall100_s")}
    growth = {}
    for system in systems:
        for program in programs:
            lo, hi = sizes[program][0], sizes[program][-1]
            a, b = by.get((system, program, lo), {}), by.get((system, program, hi), {})
            growth[f"{system} {program} first call, {hi} / {lo} {SIZE_NAME[program]}"] = \
                _ratio(b.get("first_s"), a.get("first_s"))

    print()
    print(table(points, ratios))
    print("\nratios: jittape / JAX's matching program (rnn_scan: lax.scan; rnn_loop: "
          "Python loop under jax.jit; mlp: jax.jit)")
    print("growth of the first call, largest size / smallest:")
    for k, v in growth.items():
        print(f"  {k}: {v}")
    if failed_checks:
        print(f"\n!!!! {len(failed_checks)} point(s) disagree with the reference: see above",
              file=sys.stderr)

    report = {
        "benchmark": "first call, steady call and 100 calls in fresh processes, jittape "
                     "against JAX, as the program grows",
        "command": "python benchmarks/compile_growth.py " + " ".join(argv),
        "head": head,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tree_changes": tree_changes,
        "machine": dict(machine_info(jittape), **_versions(),
                        blas_threads={v: "1" for v in ("OPENBLAS_NUM_THREADS",
                                                       "OMP_NUM_THREADS", "MKL_NUM_THREADS")}),
        "config": dict(settings and json.loads(settings) or []),
        "pinning": " ".join(pin) or None,
        "threads": "1 for BLAS, Numba (NUMBA_NUM_THREADS) and XLA",
        "dtype": "float64 (JAX with jax_enable_x64)",
        "programs": {
            "rnn_loop": f"tanh RNN, hidden {HIDDEN}, batch {BATCH}, input {INPUT}, a Python "
                        "for over the steps, loss sum(h*h) of the final state; "
                        "grad wrt (W, U)",
            "rnn_scan": "the same RNN with jt.scan / jax.lax.scan",
            "mlp": f"tanh layers of width {WIDTH}, batch {MLP_BATCH}, a list of (W, b); "
                   "loss mean(h*h); grad wrt the list"},
        "jax_programs": JAX_FORM,
        "timeout_s": args.timeout,
        "check": {"rtol": RTOL, "reference": "JAX lax.scan (RNN) or JAX (MLP) of the same "
                  "size", "failed": len(failed_checks)},
        "points": points,
        "ratios_to_jax": [dict(program=k[0], size=k[1], **v) for k, v in ratios.items()],
        "first_call_growth": growth,
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {os.path.relpath(args.json, ROOT)}")
    return 1 if failed_checks else 0


if __name__ == "__main__":
    sys.exit(main())
