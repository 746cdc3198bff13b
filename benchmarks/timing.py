"""Timing helpers shared by the benchmark scripts (``compiled.py``, ``runner.py``).

* ``measure``: interleaved rounds. Every step is timed once per round, round after
  round, so a noisy machine slows every column alike and ratios hold when absolute
  times drift. Each timing runs a step ``number`` times, ``number`` chosen per step
  (``calibrate``) so that one timing takes about ``seconds``.
* ``pin_threads``: one thread for every BLAS (set in the environment, read when NumPy
  loads: see ``compiled.py`` for what two spinning OpenBLAS pools did to interleaved
  timings on a 2-core machine).
* ``machine_info``: versions and the machine, for the JSON reports.

Importing it makes every process a benchmark starts share jittape's runtime helpers
(``JITTAPE_HELPERS_DIR``, the user's, unless set): they are compiled once per machine,
as after an install and ``python -m jittape warmup``, whatever the fresh
``JITTAPE_CACHE_DIR`` a point uses for its own compiled functions.
"""

import os
import platform
import timeit

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

os.environ.setdefault("JITTAPE_HELPERS_DIR", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "jittape", "helpers"))


def pin_threads(n, environ=None):
    """Set the BLAS thread variables of ``environ`` (default ``os.environ``) to ``n``.

    They take effect in a process that has not loaded NumPy yet.
    """
    environ = os.environ if environ is None else environ
    for var in BLAS_THREAD_VARS:
        environ[var] = str(n)
    return environ


def pin_cores(n):
    """Run this process (and the threads it starts) on ``n`` of the cores it may use;
    returns them (empty where the platform cannot pin).

    Thread variables are not enough: XLA's CPU runtime runs its own pool of one thread
    per core whatever ``XLA_FLAGS`` says (JAX used 2 s of CPU per second of wall time on
    a 2-core machine with ``--xla_cpu_multi_thread_eigen=false``). On ``n`` cores every
    column gets the same hardware.
    """
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):              # pragma: no cover - not Linux
        return []
    cores = allowed[:n]
    os.sched_setaffinity(0, cores)
    return cores


def threads_pinned(n):
    """Whether every BLAS thread variable already says ``n``."""
    return all(os.environ.get(var) == str(n) for var in BLAS_THREAD_VARS)


def calibrate(step, seconds):
    """How many calls of ``step`` take about ``seconds`` (at least 1)."""
    number = 1
    while True:
        t = timeit.timeit(step, number=number)
        if t >= min(0.02, seconds / 5):
            return max(1, round(number * seconds / t))
        number *= 10 if t < 0.002 else 2


def measure(steps, repeat, seconds):
    """{key: per-call times in us}, each key timed once per round, rounds interleaved.

    Returns ``(times, numbers)``: the per-round times of each key and the number of
    calls per timing chosen for it.
    """
    numbers = {key: calibrate(step, seconds) for key, step in steps.items()}
    times = {key: [] for key in steps}
    for _ in range(repeat):
        for key, step in steps.items():
            n = numbers[key]
            times[key].append(timeit.timeit(step, number=n) / n * 1e6)
    return times, numbers


def ratio(a, b):
    """``a / b``, or None when either is missing or zero."""
    return a / b if a and b else None


def machine_info(jt):
    """Platform, processor (and the CPU LLVM compiles for), CPU count, versions of Python
    and the numeric stack."""
    import llvmlite
    import numba
    import numpy as np
    import scipy
    from llvmlite import binding
    return {"python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "llvmlite": llvmlite.__version__,
            "scipy": scipy.__version__, "jittape": jt.__version__,
            "processor": platform.processor() or platform.machine(),
            "cpu": cpu_info(binding.get_host_cpu_name()),
            "platform": platform.platform(), "cpus": os.cpu_count(),
            "blas_threads": {v: os.environ.get(v) for v in BLAS_THREAD_VARS}}


def cpu_info(llvm_name, path="/proc/cpuinfo"):
    """The CPU's model and family as the kernel reports them (where it does), and the
    name LLVM gives its micro-architecture (``znver3``, ``skylake``, ...): timings of
    one benchmark on two machines compare only with these equal."""
    info = {"llvm": llvm_name}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in info:
                    info[key] = value.strip()
                if not line.strip():             # the first processor's block only
                    break
    except OSError:
        pass
    return info
