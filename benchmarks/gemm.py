"""Matrix products: jittape's packed product (``codegen/gemm.py``) against BLAS and XLA.

    python benchmarks/gemm.py [--repeat 7] [--seconds 0.2] [--out PATH]

Times, side by side in interleaved rounds (``timing.measure``), on the shapes that
matter to the benchmarks' losses (the MLP's forward product x @ W1, its gradient
x.T @ dh with a transposed operand, a square product, the same in float64, and the
small products of an RNN's step and its gradient, and the matrix-vector products of a
logistic regression's loss and gradient; each is called from Python, whose
call costs about a microsecond for a Numba function and a few hundred nanoseconds for
NumPy's ``@``, so those two rows measure the call more than the product: inside a
kernel, ``_gemm_small`` takes 0.41 us for the first, NumPy's BLAS 0.39 us, as
``docs/performance-notes.md`` records):

- ``jittape``: ``codegen.gemm.matmul2d(a, b, threads=False)``, one thread (for a
  vector ``b``: ``codegen.gemm.dot``, what a kernel calls);
- ``jittape_threads``: the same with threads, on all of Numba's threads;
- ``numpy``: ``a @ b`` (NumPy's OpenBLAS), one BLAS thread;
- ``numba_dot``: ``np.dot`` inside Numba (SciPy's OpenBLAS: what generated code
  called before), one BLAS thread;
- ``jax``: ``jax.jit(lambda a, b: a @ b)`` on the process's cores, when JAX is
  installed (extra ``peers``).

The process runs on one core unless ``--threads N`` says more (``timing.pin_cores``:
XLA ignores its thread flags); the threaded column needs ``--threads 2`` or more to
mean anything. Results (medians in microseconds, GFLOP/s, ratios to ``numpy``) go to
``benchmarks/results/gemm.json``.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from timing import machine_info, measure, pin_cores, pin_threads, threads_pinned  # noqa: E402

SHAPES = [  # name, m, k, n, transpose a (read x.T of a stored (k, m) array), dtype
    ("mlp x@W1 f32", 256, 784, 128, False, "float32"),
    ("mlp x.T@dh f32", 784, 256, 128, True, "float32"),
    ("square 512 f32", 512, 512, 512, False, "float32"),
    ("mlp x@W1 f64", 256, 784, 128, False, "float64"),
    ("rnn h@W f64", 8, 32, 32, False, "float64"),          # an RNN step's products:
    ("rnn h.T@g f64", 32, 8, 32, True, "float64"),         # b read in place (_gemm_small)
    # matrix-vector products (n None: b a vector) of a data-fitting loss: X @ w by BLAS,
    # X.T @ r by matvec_columns; the cache holds the first two, not the next two
    ("X@w 1e4x100 f32", 10000, 100, None, False, "float32"),
    ("X.T@r 1e4x100 f32", 100, 10000, None, True, "float32"),
    ("X@w 1e5x100 f64", 100000, 100, None, False, "float64"),
    ("X.T@r 1e5x100 f64", 100, 100000, None, True, "float64"),
    ("X.T@r 1e3x1e3 f32", 1000, 1000, None, True, "float32"),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1, help="cores to run on (default 1)")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gemm.json"))
    args = parser.parse_args(argv)
    if not threads_pinned(1):
        import subprocess
        env = pin_threads(1, dict(os.environ))       # one BLAS thread, set before NumPy
        return subprocess.call([sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                               env=env)
    cores = pin_cores(args.threads)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    import numba
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, ".."))
    import jittape as jt
    from jittape.codegen import gemm

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)      # float64 stays float64
        xla = jax.jit(lambda a, b: a @ b)
    except ImportError:
        jax = None

    @numba.njit(cache=True)
    def numba_dot(a, b):
        return np.dot(a, b)

    rng = np.random.default_rng(0)
    report = {"benchmark": "matrix products, microseconds per product (median)",
              "command": " ".join([os.path.basename(__file__)] + sys.argv[1:]),
              "machine": machine_info(jt), "cores": cores,
              "numba_threads": numba.get_num_threads(), "shapes": {}}
    steps, flops = {}, {}
    for name, m, k, n, transpose, dtype in SHAPES:
        a = rng.standard_normal((k, m) if transpose else (m, k)).astype(dtype)
        a = a.T if transpose else a
        b = rng.standard_normal((k,) if n is None else (k, n)).astype(dtype)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        if n is None:          # what a kernel's a @ b calls: matvec (no threads of its own)
            cases = {"jittape": lambda a=a, b=b: gemm.dot(a, b),
                     "jittape_threads": lambda a=a, b=b: gemm.dot(a, b)}
        else:
            cases = {"jittape": lambda a=a, b=b: gemm.matmul2d(a, b, False),
                     "jittape_threads": lambda a=a, b=b: gemm.matmul2d(a, b, True)}
        cases.update({"numpy": lambda a=a, b=b: a @ b,
                      "numba_dot": lambda a=a, b=b: numba_dot(a, b)})
        if jax is not None:
            ja, jb = jnp.asarray(a), jnp.asarray(b)
            cases["jax"] = lambda ja=ja, jb=jb: xla(ja, jb).block_until_ready()
        for system, step in cases.items():
            out = np.asarray(step())
            scale = np.abs(exact).max()
            err = float(np.abs(out - exact).max() / scale)
            assert err < (1e-5 if dtype == "float32" else 1e-12), (name, system, err)
            steps[(name, system)] = step
        flops[name] = 2.0 * m * k * (n or 1)
    times, numbers = measure(steps, args.repeat, args.seconds)
    for (name, system), ts in times.items():
        med = statistics.median(ts)
        entry = report["shapes"].setdefault(name, {})
        entry[system] = {"median_us": med, "gflops": flops[name] / med / 1e3, "times_us": ts}
    print(f"{'product':18s}" + "".join(f"{s:>17s}" for s in next(iter(report["shapes"].values()))))
    for name, entry in report["shapes"].items():
        base = entry["numpy"]["median_us"]
        for system in entry:
            entry[system]["vs_numpy"] = entry[system]["median_us"] / base
        print(f"{name:18s}" + "".join(f"{e['median_us']:9.4g} us {e['vs_numpy']:4.2f}x"
                                      for e in entry.values()))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
