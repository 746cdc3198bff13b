"""Tiered calls: time to the first result and to the 100th, tiered on and off.

    python benchmarks/tiered.py --json benchmarks/results/tiered.json

Each measurement is a fresh process with a fresh disk cache (``JITTAPE_CACHE_DIR``), so
every kernel compiles cold, as in a first run. It imports jittape, makes the arguments,
then calls a compiled ``value_and_grad`` 100 times and notes when each result came back
(from just before the first call: tracing, code generation and the first call
included; the import not). ``jt.config.tiered`` is on (calls run the graph on NumPy
while the kernel compiles in a thread) or off (the first call waits for the compile).
Workloads:

* ``mlp``: two tanh layers of 64 and a linear read-out, batch 128, float64.
* ``rnn``: ``jt.scan`` over 50 steps of a tanh cell of hidden size 32 (input 8, batch
  16), the sum of squared hidden states, float64.

Calls that run the generated module as plain Python (graphs with an op that has no
NumPy implementation) run for at most a share of the time since the compile began
(``jittape.compiler.cache.PYTHON_SHARE``, 0.25): Numba's compiler needs the GIL too.
``--shares 0.5,1`` also measures calls with other shares; the graphs on NumPy of these
workloads are not held to it.

A third kind of process (``njit``) makes the first call, then compiles and calls a
small ``@numba.njit`` function of its own: tiered on, it waits for Numba's compiler
lock, which the background compile holds.

Reported per workload and mode, the median over ``--repeats`` processes (run in turns,
on and off, so that noise on a shared machine falls on both): ``first_s`` (the first
result), ``hundred_s`` (the 100th), ``switch_call`` (the first call that took the
kernel), ``python_calls``, and ``process_s`` (the whole process as the parent saw it,
its start and the import included, and its exit, which waits for a compile still
running). BLAS runs on one thread.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CALLS = 100


def _mlp():
    import numpy as np

    import jittape as jt

    def loss(params, x, y):
        w1, b1, w2, b2, w3 = params
        h = jt.tanh(x @ w1 + b1)
        h = jt.tanh(h @ w2 + b2)
        return jt.mean((h @ w3 - y) ** 2)

    rng = np.random.default_rng(0)
    params = [rng.standard_normal((64, 64)) * 0.2, np.zeros(64),
              rng.standard_normal((64, 64)) * 0.2, np.zeros(64),
              rng.standard_normal((64, 1)) * 0.2]
    x, y = rng.standard_normal((128, 64)), rng.standard_normal((128, 1))
    return jt.value_and_grad(loss), (params, x, y)


def _rnn():
    import numpy as np

    import jittape as jt

    def loss(params, xs):
        wx, wh, b = params

        def step(h, x):
            h = jt.tanh(x @ wx + h @ wh + b)
            return h, jt.sum(h * h)
        _, ys = jt.scan(step, np.zeros((xs.shape[1], wh.shape[0])), xs)
        return jt.sum(ys)

    rng = np.random.default_rng(0)
    params = (rng.standard_normal((8, 32)) * 0.3, rng.standard_normal((32, 32)) * 0.3,
              np.zeros(32))
    return jt.value_and_grad(loss), (params, rng.standard_normal((50, 16, 8)))


WORKLOADS = {"mlp": _mlp, "rnn": _rnn}


def child(workload, mode, kind):
    """One measurement, in this process: prints its figures as JSON."""
    t_start = time.perf_counter()
    import jittape as jt
    from jittape.compiler import cache
    import_s = time.perf_counter() - t_start
    tiered = mode != "off"
    jt.config.tiered = tiered
    if mode.startswith("share="):
        cache.PYTHON_SHARE = float(mode[len("share="):])
    f, args = WORKLOADS[workload]()
    out = dict(import_s=import_s)
    t0 = time.perf_counter()
    f(*args)
    out["first_s"] = time.perf_counter() - t0
    if kind == "njit":
        import numba
        import numpy as np
        t1 = time.perf_counter()
        numba.njit(lambda a: (a * 2.0).sum())(np.ones(10))
        out["user_njit_s"] = time.perf_counter() - t1
    else:
        switch = None
        for k in range(1, CALLS):
            before = f.cache_info().python_calls
            f(*args)
            if switch is None and f.cache_info().python_calls == before:
                switch = k + 1
        out["hundred_s"] = time.perf_counter() - t0
        out["switch_call"] = switch if tiered else 1
    info = f.cache_info()
    out.update(python_calls=info.python_calls, compiles=info.compiles)
    print(json.dumps(out))


def _run(workload, mode, kind):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    with tempfile.TemporaryDirectory(prefix="jittape-tiered-") as cache:
        env["JITTAPE_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", workload, mode, kind],
                              env=env, capture_output=True, text=True, timeout=600)
        process_s = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{workload} {mode}: {proc.stderr.strip()}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = process_s
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workloads", default="mlp,rnn")
    parser.add_argument("--shares", default="",
                        help="also run tiered calls with these shares of the time that "
                             "calls may run as Python while the kernel compiles "
                             "(jittape.compiler.cache.PYTHON_SHARE; '' for none)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    sys.path.insert(0, HERE)
    from timing import machine_info

    import jittape as jt

    runs = {}
    for r in range(args.repeats):
        for workload in args.workloads.split(","):
            for kind in ("calls", "njit"):
                modes = ["on", "off"] + [f"share={x}" for x in args.shares.split(",")
                                         if x and kind == "calls"]
                for mode in (modes if r % 2 == 0 else modes[::-1]):
                    key = f"{workload} {kind} {mode}"
                    runs.setdefault(key, []).append(_run(workload, mode, kind))
                    print(key, runs[key][-1], flush=True)
    summary = {}
    for key, results in runs.items():
        summary[key] = {name: _median([r[name] for r in results]) for name in results[0]}
    print("\nmedians of", args.repeats, "processes")
    for key, figures in summary.items():
        print(f"{key:22s}", "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in figures.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(machine=machine_info(jt), command=sys.argv,
                           date=time.strftime("%Y-%m-%d %H:%M:%S"), calls=CALLS,
                           medians=summary, runs=runs), f, indent=1)
            f.write("\n")


def _median(values):
    """The median of the values given (``switch_call`` is None in a process whose calls
    all ran before the kernel was ready), or None."""
    given = [v for v in values if v is not None]
    return statistics.median(given) if given else None


if __name__ == "__main__":
    main()
