"""Run-time configuration.

- ``disk_cache`` and ``JITTAPE_CACHE_DIR`` (read at each compile) name the disk cache;
  unset, it is the user cache directory (``$XDG_CACHE_HOME/jittape`` or
  ``~/.cache/jittape``); set to the empty string, or with ``jt.config.disk_cache =
  False``, nothing is written to disk. Only a directory of the user's own that group and
  others cannot write to is used (loading runs the code it holds); every file in it is
  checked against a hash before use, and a damaged entry is removed and compiled again,
  with one warning.
- ``disk_cache_max_bytes`` (default 512 MiB): when writing a new entry takes the disk
  cache over this size, the least recently used entries are removed; None for no limit.
- ``check_numerics``: when True, eager ops and compiled functions raise
  ``jt.NumericsError`` (a ``FloatingPointError``) on the first NaN or inf a
  floating-point op produces, naming the op and the user's file:line. Compiled
  functions compile a checked variant of their graph (the flag is part of the
  signature); it costs a test per value, so it is for debugging.
- ``parallel`` (default True; ``JITTAPE_PARALLEL=0`` in the environment makes it False):
  compiled CPU code runs large loops on Numba's threads (``numba.set_num_threads``
  sets how many). A fused loop with costly work (exp, log, tanh, ...) over 65536
  elements or more in the call that traced it gets a second, parallel version, taken
  by any call with 65536 elements or more; matrix products of 2^20 multiply-adds or
  more share their tiles among the threads. Sums are taken in fixed chunks, so results
  do not depend on the number of threads. A parallel version costs compile time (a
  second compile of its loop, seconds); with ``parallel = False`` functions compile
  without them. The flag is part of the signature, like ``check_numerics``. A process
  forked from one that ran parallel code on GNU OpenMP starts with it False (see
  ``_after_fork_in_child``).
- ``roll_loops`` (default True): in a compiled function for the CPU, runs of a Python
  loop's iterations that repeat exactly (same ops, shapes and lines, the same values
  threading through) become one loop of the generated code (``jittape/rolling.py``), so
  the compile does not grow with the trip count; False keeps every iteration as
  straight-line code. Part of the signature, like ``check_numerics``.
- ``tiered`` (default True; ``JITTAPE_TIERED=0`` in the environment makes it False): a
  CPU kernel that must compile (neither run in the process already nor found in the
  disk cache) compiles in a background thread, and the calls made meanwhile run its
  graph on NumPy, node by node (``f.lower(...).numpy``; the generated module as plain
  Python, ``f.lower(...).python``, where an op has no NumPy implementation): the first
  call returns without waiting for Numba. The first call after the compile takes the
  kernel. Results agree within rounding; guards, variable write-back and the checks of
  shapes, sizes and indices are the kernel's, so they behave alike. Any other error on
  this tier makes the call wait for the kernel and do what it does. With ``tiered =
  False`` every first call waits for its kernel (bitwise-reproducible runs); the CUDA
  target never tiers, and ``f.kernel(...)`` waits for the compile.
- ``JITTAPE_MALLOC`` (environment, default on): where the C library is glibc, the
  first compiled kernel of a process sets ``mallopt`` so that arrays of up to 32 MiB come
  from the heap and up to 64 MiB of freed memory stay with the process: a loop that
  stores its steps allocates megabytes per call, and glibc's defaults hand them back to
  the system and fault them in again page by page at every call.
  ``JITTAPE_MALLOC=0`` leaves glibc's defaults.
- ``max_guards``: how many Python branches on traced values (``if``/``while`` on a
  traced scalar) one trace may take; a ``while`` loop is unrolled once per iteration.
- ``max_variants``: how many variants (one per path through the branches) one signature
  of a compiled function may compile before it raises.
- ``recompile_warning`` (default 8): a compiled function that traces and compiles more
  often than this warns once (``jt.errors.RecompileWarning``, at the calling line),
  naming what changed between its last two signatures (a dtype, a rank, a size-1
  dimension, a static value, a guard); ``None`` turns the warning off.
- ``strict`` (default False): an implicit conversion to NumPy (``np.asarray(x)``,
  ``X.dot(w)`` with ``X`` an ndarray, ``np.array([t0, t1])``, a SciPy function) of a
  tensor that a recording ``GradientTape`` watches, or that is computed from one, loses
  the gradient through it; it warns (``jt.GradientLostWarning``, once per call site).
  With ``strict = True`` it raises ``jt.GradientLostError`` instead. Explicit
  conversions (``.numpy()``, ``float()``, ``int()``) never warn.
"""

import os
import sys
import types
import weakref

disk_cache = True
disk_cache_max_bytes = 512 * 2 ** 20
max_guards = 1000
max_variants = 16
recompile_warning = 8
strict = False

tiered = os.environ.get("JITTAPE_TIERED", "1").strip().lower() not in ("0", "false", "no", "off")

_check_numerics = False
_roll_loops = True
_parallel = os.environ.get("JITTAPE_PARALLEL", "1").strip().lower() not in ("0", "false", "no", "off")
# compiled functions, told when a flag of the signature changes (their fast paths do
# not look at it)
_COMPILED = weakref.WeakSet()


def _signature_flag(name):
    """A property for the module global ``name``, a flag that is part of compiled
    functions' signatures: setting it makes them look up their signature anew."""
    def get(self):
        return globals()[name]

    def set(self, value):
        globals()[name] = bool(value)
        for compiled in list(_COMPILED):
            compiled._forget_callers()

    return property(get, set)


class _Config(types.ModuleType):
    check_numerics = _signature_flag("_check_numerics")
    parallel = _signature_flag("_parallel")
    roll_loops = _signature_flag("_roll_loops")


sys.modules[__name__].__class__ = _Config


def _after_fork_in_child():
    """GNU OpenMP, Numba's threading layer where TBB is not installed, cannot run
    parallel code in a process forked from one that did: Numba stops such a child at
    its first parallel loop (and a pool of forked workers waits for it forever). A
    child forked from a process that started Numba's OpenMP threads therefore turns
    ``parallel`` off: its compiled functions look up their signatures anew and run
    serial kernels (from the disk cache, or compiled in the child)."""
    if not _parallel:
        return
    try:
        import numba
        layer = numba.threading_layer()
    except Exception:                      # no threads in the parent: the child may start
        return
    if layer == "omp":
        sys.modules[__name__].parallel = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def cache_dir():
    """The disk cache directory, or None when the disk cache is off."""
    if not disk_cache:
        return None
    path = os.environ.get("JITTAPE_CACHE_DIR")
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "jittape")
    return path or None
