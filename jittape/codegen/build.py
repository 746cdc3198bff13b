"""Write a generated module to a file, import it and compile it with Numba.

The disk cache (DESIGN.md rule 6): under ``JITTAPE_CACHE_DIR`` each generated module is
a file named by a hash of (graph text, target, jittape version, Numba version), compiled
with Numba's ``cache=True`` so that Numba keeps the machine code next to it. A new
process that traces the same graph finds the file and Numba's cache and compiles
nothing. A corrupt or unwritable cache falls back to compiling, with a warning.
"""

import hashlib
import importlib.util
import os
import sys
import tempfile
import warnings

import numba

from .._version import __version__
from .. import config
from .pipeline import KernelCompiler


class Built:
    """A compiled kernel: the Numba dispatcher and where it came from."""

    def __init__(self, dispatcher, path, from_disk, cached):
        self.dispatcher = dispatcher
        self.cached = cached                # compiled with Numba's cache=True
        self.path = path
        self.from_disk = from_disk          # the module file was already in the cache


def digest(graph_text, target):
    h = hashlib.sha256()
    for part in (graph_text, target, __version__, numba.__version__, _codegen_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _codegen_version():
    """A hash of the code generators' own source, so a changed generator misses the cache."""
    global _CODEGEN_VERSION
    if _CODEGEN_VERSION is None:
        here = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(os.path.join(here, name), "rb") as f:
                    h.update(f.read())
        _CODEGEN_VERSION = h.hexdigest()[:16]
    return _CODEGEN_VERSION


_CODEGEN_VERSION = None
_SCRATCH = None


def _scratch_dir():
    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = tempfile.mkdtemp(prefix="jittape-")
    return _SCRATCH


def build(source, func_name, key, njit_options):
    """Compile ``source`` (a module defining ``func_name``); ``key`` names the file.
    With ``njit_options`` None the function is returned as it is (the CUDA target's
    driver, whose kernels the module compiles with ``cuda.jit(cache=True)``)."""
    cache_dir = config.cache_dir()
    if cache_dir:
        try:
            return _build_in(cache_dir, source, func_name, key, njit_options, use_cache=True)
        except _CacheError as err:
            warnings.warn(f"jittape: the disk cache at {cache_dir} cannot be used ({err}); "
                          "compiling without it", RuntimeWarning, stacklevel=4)
    return _build_in(_scratch_dir(), source, func_name, key, njit_options, use_cache=False)


class _CacheError(Exception):
    pass


def _build_in(root, source, func_name, key, njit_options, use_cache):
    module_name = f"jittape_generated_{key}"
    path = os.path.join(root, f"{module_name}.py")
    from_disk = False
    try:
        os.makedirs(root, exist_ok=True)
        existing = None
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                existing = f.read()
        if existing == source:
            from_disk = True
        else:
            if existing is not None:
                warnings.warn(f"jittape: the cached module {path} is corrupt; rewriting it",
                              RuntimeWarning, stacklevel=5)
                _drop_numba_cache(root, module_name)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(tmp, path)          # atomic: a concurrent reader sees all or nothing
    except OSError as err:
        if use_cache:
            raise _CacheError(str(err)) from err
        raise
    module = _import(module_name, path)
    func = getattr(module, func_name)
    if njit_options is None:              # a CUDA driver: plain Python launching kernels
        return Built(func, path, from_disk, use_cache)
    options = dict(njit_options)
    # Numba's thread pool up before a CPU kernel compiles or loads (4 ms, once):
    # compiling a prange loop that calls a function Numba has not compiled yet, in a
    # process whose pool has not started, fails to link ("Symbol not found:
    # allocate_sched"), and parallel code loaded before it starts crashes
    numba.get_num_threads()
    parallel = getattr(module, "PARALLEL_OPTIONS", None)    # a CPU kernel with prange loops
    if parallel:   # as ParallelOptions: Numba empties a dict on the first compile, and
        # an empty dict means every option on for the next signature
        from numba.core.cpu_options import ParallelOptions
        options["parallel"] = ParallelOptions(dict(parallel))
    dispatcher = numba.njit(cache=use_cache, pipeline_class=KernelCompiler, **options)(func)
    return Built(dispatcher, path, from_disk, use_cache)


def _import(module_name, path):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[module_name] = module      # Numba's cache locates functions by module
    return module


def _drop_numba_cache(root, module_name):
    cache = os.path.join(root, "__pycache__")
    if not os.path.isdir(cache):
        return
    for name in os.listdir(cache):
        if name.startswith(module_name):
            try:
                os.remove(os.path.join(cache, name))
            except OSError:
                pass


def _lean_cache_loads(disp):
    """Numba refreshes its target context before it loads machine code from its cache:
    in a new process that imports and registers every implementation Numba has (NumPy's
    functions, linear algebra, SciPy's BLAS, typed containers, ...), about 0.35 s,
    most of a first call from the disk cache, and none of it needed to run code that is
    compiled already. This dispatcher's loads start Numba's runtime only (allocation and
    boxing, which the code calls); a compile, of this dispatcher or any other, refreshes
    the context in full as it always does. (Numba's cache object is private API: where
    it is not as expected, loads stay as they are.)"""
    cache = getattr(disp, "_cache", None)
    load = getattr(cache, "_load_overload", None)
    guard = getattr(cache, "_guard_against_spurious_io_errors", None)
    if load is None or guard is None:
        return
    from numba.core.runtime import nrt

    def load_overload(sig, target_context):
        nrt.rtsys.initialize(target_context)
        with guard():
            return load(sig, target_context)
        return None                        # (the guard swallowed an I/O error)

    cache.load_overload = load_overload


def first_call(built, args):
    """Call a fresh dispatcher; on a broken Numba cache entry, drop it and compile again.

    Returns (result, compiled): whether Numba compiled (False: loaded from its cache).
    """
    disp = built.dispatcher
    try:
        if built.from_disk:
            _lean_cache_loads(disp)
        result = disp(*args)
    except Exception as err:
        if not _is_cache_failure(err) or not hasattr(disp, "targetoptions"):
            raise                          # (a CUDA driver: its kernels cache themselves)
        warnings.warn(f"jittape: Numba's cache for {built.path} is corrupt ({err}); "
                      "compiling again", RuntimeWarning, stacklevel=4)
        _drop_numba_cache(os.path.dirname(built.path),
                          os.path.splitext(os.path.basename(built.path))[0])
        disp = built.dispatcher = numba.njit(cache=False, **disp.targetoptions)(disp.py_func)
        result = disp(*args)
    stats = getattr(disp, "stats", None)
    loaded = bool(stats and sum(stats.cache_hits.values()))
    return result, not loaded


def _is_cache_failure(err):
    text = f"{type(err).__name__}: {err}"
    return any(word in text for word in ("pickle", "Pickle", "EOFError", "cache", "index"))
