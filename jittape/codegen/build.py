"""Turn a generated module into a compiled kernel: once per process, once per machine.

In memory: one table for the whole process holds every kernel built, keyed by the
content digest of its module (and the cache directory). Compiled functions whose graphs
are the same (wrappers of one function, of a closure made anew at each step, of equal
code) share one kernel: the same Numba dispatcher and machine code, with no second
import, load or compile (each gets a ``Built`` that says whether it found the kernel
built). Numba never frees the machine code it compiles, so sharing it is what keeps
memory flat in a long-running process.

On disk (DESIGN.md rule 6): under ``JITTAPE_CACHE_DIR`` each entry is the generated
module (``jittape_generated_<digest>.py``), the files in which Numba keeps its machine
code for it (``__pycache__/jittape_generated_<digest>.*.nbi`` and ``.nbc``, from
``cache=True``), and a manifest (``jittape_generated_<digest>.manifest``) holding the
sha256 of the module and of each of Numba's files, written after Numba wrote them. A
new process that traces the same graph finds them and compiles nothing. Loading
unpickles and runs machine code, so nothing is loaded unverified:

- the module is executed from the source the process generated, and the file is
  rewritten when its bytes differ;
- before Numba loads, each of its files must match its hash in the manifest (a file the
  manifest does not name, from a writer that stopped before recording it, is removed);
  a file that does not match, an unreadable manifest, or a load that fails (an
  unpickling or LLVM error) removes the entry's files, warns once, and compiles again;
  the next process finds a sound entry and loads it silently;
- a cache directory that is not the user's own, or that group or others can write to,
  is not used at all (a warning, and kernels compile in memory).

Files are written to unique temporary names in the same directory, then renamed, so
concurrent writers (threads or processes) never see each other's partial files. The
entries in use are touched; once the directory holds more than
``jt.config.disk_cache_max_bytes``, writing a new entry removes the least recently used
entries whole. With the disk cache off (or unusable), CPU kernels compile from memory
with no file at all; CUDA drivers, whose kernels Numba caches only from a real file, go
to a private temporary directory removed at exit.

In the background (``jt.config.tiered``): a compiled function whose CPU kernel must
compile (``loadable`` is False) has it compiled in a thread of its own
(``compile_in_background``: what the first call would do, for the first call's argument
types) and runs the generated module as plain Python meanwhile, in ``python_globals``,
where nothing calls into Numba (``codegen/python_tier.py``). ``compiling`` says whether the thread is still at it;
a first call after it finds the kernel ready (``first_call`` waits for the thread where
it has not finished).
"""

import atexit
import contextlib
import hashlib
import json
import linecache
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
import types

import numba

from .._version import __version__
from ..errors import warn_at_user
from .. import config
from .linkage import _lean_cache_loads, _start_runtime, link_module  # noqa: F401
from .pipeline import KernelCompiler

_PREFIX = "jittape_generated_"
# Numba's own temporary files, being written by another process: neither verified nor
# removed (they are renamed into place when complete)
_NUMBA_TMP = ".tmp."


class _Kernel:
    """A kernel of the process-wide table: what every compiled function of its graph
    shares."""

    def __init__(self, dispatcher, path, cached, from_disk, parts=None):
        self.dispatcher = dispatcher
        # a kernel in parts: {name: the part's own kernel} (the Python that calls them
        # is the dispatcher); parts of equal code are one kernel, whoever calls them
        self.parts = parts or {}
        self.path = path
        self.cached = cached            # compiled with Numba's cache=True
        self.from_disk = from_disk      # the module file was already in the cache
        self.called = False             # its first call has run (compiled or loaded)
        self.lock = threading.Lock()    # held for the first call
        # a compile in a thread of its own while calls run the module as Python
        # (compile_in_background): running, whether it compiled (not loaded), its failure
        self.compiling = False
        self.background = None
        self.background_compiled = False
        self.error = None
        self.started = 0.0              # (time.perf_counter) when that compile began


class Built:
    """A compiled kernel as one compiled function sees it: the shared ``_Kernel``, and
    whether this request found it already built in the process (``shared``)."""

    __slots__ = ("kernel", "shared")

    def __init__(self, kernel, shared):
        self.kernel = kernel
        self.shared = shared

    @property
    def dispatcher(self):
        return self.kernel.dispatcher

    @property
    def path(self):
        return self.kernel.path

    @property
    def cached(self):
        return self.kernel.cached

    @property
    def from_disk(self):
        """Whether this request's code came from the disk cache (False for a kernel
        found in the process's table: it cost neither a compile nor a load)."""
        return self.kernel.from_disk and not self.shared


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
_TABLE = {}                      # (cache directory or None, key) -> _Kernel
_TABLE_LOCK = threading.RLock()  # held while a kernel is built (imported, not compiled)
# Held while a shared dispatcher compiles for a new memory layout (its compiling is
# disabled otherwise): compiled functions' new layouts take it too
LAYOUT_LOCK = threading.Lock()
_WARNED = set()                  # what has warned already: one warning each
_COUNTS = {"imports": 0}         # generated modules executed by this process


def build(source, func_name, key, njit_options, parts=()):
    """The kernel of ``source`` (a module defining ``func_name``; ``key``: its digest),
    from the process's table, the disk cache, or built now. With ``njit_options`` None
    the function is returned as it is (the CUDA target's driver, whose kernels the
    module compiles with ``cuda.jit(cache=True)``). With ``parts`` ((name, code of the
    part's own module), ...: a large graph, ``codegen.cpu``), each part is a kernel of
    its own, keyed by its code (so shared by every kernel that has it), and the module's
    ``func_name`` is left as the Python that calls them (the kernel's ``parts``)."""
    root = config.cache_dir()
    kernel = _TABLE.get((root, key))
    if kernel is not None:
        return Built(kernel, shared=True)
    with _TABLE_LOCK:
        kernel = _TABLE.get((root, key))
        if kernel is not None:
            return Built(kernel, shared=True)
        kernel = _build(root, source, func_name, key, njit_options, parts)
        _TABLE[(root, key)] = kernel
        return Built(kernel, shared=False)


def _keep_freed_memory():
    """Once per process, where the C library is glibc: arrays of up to 32 MiB come from
    the heap and up to 64 MiB of freed heap stay with the process (``mallopt``;
    ``JITTAPE_MALLOC=0`` in the environment leaves glibc's defaults). By default glibc
    gives a freed array of a few MiB back to the system and maps a new one at the next
    call, whose first writes then fault page by page: a loop storing its steps (a
    scan's residuals, 2 MiB at 1000 steps of an RNN) spent a third of each call there."""
    global _MALLOC_SET
    if _MALLOC_SET:
        return
    _MALLOC_SET = True
    if os.environ.get("JITTAPE_MALLOC", "1").strip() in ("0", "false", "no", "off"):
        return
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):          # not glibc
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_TRIM_THRESHOLD, 64 * 2 ** 20)
    mallopt(M_MMAP_THRESHOLD, 32 * 2 ** 20)


_MALLOC_SET = False


def _build(root, source, func_name, key, njit_options, parts=()):
    module_name = f"{_PREFIX}{key}"
    store, path, from_disk = None, f"<jittape generated {key}>", False
    if root:
        try:
            store = _Store.open(root)
            if store is not None:
                path, from_disk = store.prepare(module_name, source)
        except OSError as err:
            _warn_once(("unusable", root), f"jittape: the disk cache at {root} cannot be "
                       f"used ({err}); compiling without it")
            store = None
    if store is None and njit_options is None:
        store = _Store.scratch()           # CUDA kernels are cached from a real file only
        path, from_disk = store.prepare(module_name, source)
    module = _execute(module_name, source, path)
    func = getattr(module, func_name)
    guard = _Guard(store, module_name, source) if store is not None else None
    if njit_options is None:              # a CUDA driver: plain Python launching kernels
        if guard is not None:
            for value in list(vars(module).values()):
                py_func = getattr(value, "py_func", None)
                if getattr(py_func, "__module__", None) == module_name:  # its own kernels
                    guard.install(value, lean=False)
        return _Kernel(func, path, store is not None, from_disk)
    options = dict(njit_options)
    # Numba's thread pool up before a CPU kernel compiles or loads (cheap, once a process):
    # compiling a prange loop that calls a function Numba has not compiled yet, in a
    # process whose pool has not started, fails to link ("Symbol not found:
    # allocate_sched"), and parallel code loaded before it starts crashes
    numba.get_num_threads()
    _keep_freed_memory()
    parallel = getattr(module, "PARALLEL_OPTIONS", None)    # a CPU kernel with prange loops
    if parallel:   # as ParallelOptions: Numba empties a dict on the first compile, and
        # an empty dict means every option on for the next signature
        from numba.core.cpu_options import ParallelOptions
        options["parallel"] = ParallelOptions(dict(parallel))
    for name in getattr(module, "SUBFUNCTIONS", ()):   # pieces of large loop bodies: the
        # kernel calls them, each compiled on its own (and kept in the kernel's disk cache)
        setattr(module, name, numba.njit(cache=False, pipeline_class=KernelCompiler,
                                         **options)(getattr(module, name)))
    if parts:        # a large graph: parts, each a kernel of its own, called by Python
        kernels = {}
        for name, code in parts:
            kernels[name] = build(code, name, digest(code, "cpu part"), njit_options).kernel
            setattr(module, name, kernels[name].dispatcher)
        cached = store is not None and all(k.cached for k in kernels.values())
        return _Kernel(func, path, cached, from_disk, kernels)
    dispatcher, cached = _dispatcher(func, options, cache=store is not None)
    if cached:
        guard.install(dispatcher, lean=from_disk)
    return _Kernel(dispatcher, path, cached, from_disk)


def _dispatcher(func, options, cache):
    """(A Numba dispatcher of ``func``, whether it uses Numba's disk cache)."""
    if cache:
        try:
            return numba.njit(cache=True, pipeline_class=KernelCompiler, **options)(func), True
        except (OSError, RuntimeError):    # the file went away (removed by another
            pass                           # process's eviction): compile without it
    return numba.njit(cache=False, pipeline_class=KernelCompiler, **options)(func), False


def new_dispatcher(built):
    """A dispatcher of its own for ``built``'s kernel (free to compile for other
    argument types), reading the disk cache through the same checks. For a kernel in
    parts: the Python that calls them, calling dispatchers of its own."""
    kernel = built.kernel
    if kernel.parts:
        own = {name: _own_dispatcher(part.dispatcher, part.cached)
               for name, part in kernel.parts.items()}
        driver = kernel.dispatcher
        return types.FunctionType(driver.__code__, dict(driver.__globals__, **own),
                                  driver.__name__)
    return _own_dispatcher(kernel.dispatcher, kernel.cached)


def _own_dispatcher(disp, cached):
    """A new dispatcher of ``disp``'s function and options, with its disk cache."""
    options = {k: v for k, v in disp.targetoptions.items()
               if k not in ("cache", "nopython")}   # (njit sets nopython itself)
    copy, cached = _dispatcher(disp.py_func, options, cache=cached)
    guard = getattr(getattr(disp, "_cache", None), "_jittape_guard", None)
    if cached and guard is not None:
        guard.install(copy, lean=False)
    elif cached:
        copy, _ = _dispatcher(disp.py_func, options, cache=False)
    return copy


def _execute(module_name, source, path):
    """Run the generated source as module ``module_name`` with ``path`` as its file
    name. The source is the one this process generated, never what the file holds;
    Python's bytecode cache is not used."""
    if not os.path.isabs(path):          # no file: tracebacks and Numba's messages
        linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module      # Numba's cache locates functions by module
    exec(compile(source, path, "exec"), module.__dict__)
    _COUNTS["imports"] += 1
    return module


# -- the disk cache ------------------------------------------------------------------------

class _Store:
    """A cache directory: its entries' files, their manifests and the size limit."""

    _SCRATCH = None

    def __init__(self, root):
        self.root = root
        self.pycache = os.path.join(root, "__pycache__")
        self.lock = threading.Lock()

    @classmethod
    def open(cls, root):
        """The store at ``root`` (created if need be), or None if it is not safe to load
        from. Raises OSError where it cannot be created."""
        pycache = os.path.join(root, "__pycache__")
        # created private, so that the checks below hold for a cache jittape made
        os.makedirs(root, mode=0o700, exist_ok=True)
        os.makedirs(pycache, mode=0o700, exist_ok=True)
        for path in (root, pycache):
            problem = _unsafe(path)
            if problem:
                _warn_once(("unsafe", root), (
                    f"jittape: the disk cache at {root} is not used: {path} {problem}, and "
                    "loading from it runs what it holds; compiling in memory. Make it "
                    "yours and not writable by others (chmod go-w), or set "
                    "JITTAPE_CACHE_DIR to a directory of your own"))
                return None
        return cls(root)

    @classmethod
    def scratch(cls):
        """A private temporary store for this process, removed at exit."""
        if cls._SCRATCH is None:
            path = tempfile.mkdtemp(prefix="jittape-")
            atexit.register(_remove_scratch, path, os.getpid())
            cls._SCRATCH = cls(path)
        return cls._SCRATCH

    def module_path(self, name):
        return os.path.join(self.root, name + ".py")

    def manifest_path(self, name):
        return os.path.join(self.root, name + ".manifest")

    @contextlib.contextmanager
    def entry_lock(self, name):
        """Hold entry ``name`` against other processes (``flock`` on its lock file, where
        there is one): two processes that compile one module at once each save Numba's
        files and record their hashes, and one's save between the other's save and
        record would leave files that do not match the manifest (a warning, and the
        entry compiled again)."""
        try:
            import fcntl
        except ImportError:                   # (not POSIX: threads are still serialized)
            yield
            return
        try:
            fd = os.open(os.path.join(self.root, name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)                      # (closing releases the lock)

    def prepare(self, name, source):
        """Make the module file hold ``source``: (its path, whether it did already)."""
        path = self.module_path(name)
        data = source.encode()
        try:
            with open(path, "rb") as f:
                existing = f.read()
        except FileNotFoundError:
            existing = None
        if existing == data:
            _touch(self.manifest_path(name))          # used: the last to be evicted
            return path, True
        if existing is not None:
            self.damaged(name, self.pycache, "the module's text differs from its graph's")
        self.write(path, data)
        self.record(name, None, hashlib.sha256(data).hexdigest())
        return path, False

    def write(self, path, data):
        """Write ``data`` to ``path`` through a temporary file of this writer's own."""
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path),
                                   prefix=os.path.basename(path) + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)          # atomic: a concurrent reader sees all or nothing
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def numba_files(self, name, directory):
        """[(file name, path)] of Numba's files for module ``name`` in ``directory``."""
        try:
            names = os.listdir(directory)
        except OSError:
            return []
        return [(n, os.path.join(directory, n)) for n in sorted(names)
                if n.startswith(name + ".") and _NUMBA_TMP not in n]

    def verify(self, name, directory, source_hash):
        """Before Numba loads module ``name``'s files from ``directory``: True when each
        matches the manifest. Otherwise they are removed (with a warning if a recorded
        file or the manifest is damaged), so that Numba compiles, and False."""
        files = self.numba_files(name, directory)
        try:
            manifest = _read_manifest(self.manifest_path(name))
            recorded = manifest["numba"]
            ok = manifest["module"] == source_hash and isinstance(recorded, dict)
        except FileNotFoundError:
            manifest = None
        except (OSError, ValueError, KeyError, TypeError) as err:
            self.damaged(name, directory, f"its manifest cannot be read: {err}")
            return False
        if manifest is None or not files:
            _remove(path for _, path in files)    # unrecorded: never trusted
            return manifest is not None
        if not ok:
            self.damaged(name, directory, "its manifest does not match its module")
            return False
        unrecorded = []
        for file_name, path in files:
            want = recorded.get(file_name)
            if want is None:
                unrecorded.append(path)
                continue
            try:
                got = _file_hash(path)
            except FileNotFoundError:
                continue                           # removed meanwhile: Numba compiles
            if got != want:
                self.damaged(name, directory, f"{file_name} does not match its hash")
                return False
        if unrecorded:
            _remove(unrecorded)
            return False
        return True

    def record(self, name, directory, source_hash):
        """Write module ``name``'s manifest: the hash of its source and those of Numba's
        files in ``directory`` now. Then keep the directory within its size limit."""
        with self.lock:
            files = {}
            for file_name, path in (self.numba_files(name, directory) if directory else ()):
                try:
                    files[file_name] = _file_hash(path)
                except FileNotFoundError:
                    pass
            self.write(self.manifest_path(name), _manifest_bytes(source_hash, files))
        self.evict(keep=name)

    def damaged(self, name, directory, why):
        """Remove entry ``name``'s manifest and Numba's files, with one warning."""
        _warn_once(("damaged", self.root, name), (
            f"jittape: the disk cache entry {self.module_path(name)} is corrupt ({why}); "
            "it is removed and compiled again"))
        paths = [path for _, path in self.numba_files(name, directory or self.pycache)]
        _remove(paths + [self.manifest_path(name)])

    def entries(self):
        """{module name: [bytes, last use, paths]} of the entries in the directory."""
        entries = {}
        for directory in (self.root, self.pycache):
            try:
                scan = list(os.scandir(directory))
            except OSError:
                continue
            for item in scan:
                if not item.name.startswith(_PREFIX):
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                entry = entries.setdefault(item.name.split(".", 1)[0], [0, 0.0, []])
                entry[0] += st.st_size
                entry[2].append(item.path)
                if directory == self.root and not item.name.endswith(".tmp"):
                    entry[1] = max(entry[1], st.st_mtime)
        return entries

    def evict(self, keep):
        """Remove the least recently used entries (all their files) while the directory
        holds more than ``config.disk_cache_max_bytes``; never the entry ``keep``."""
        limit = config.disk_cache_max_bytes
        if limit is None:
            return
        entries = self.entries()
        total = sum(entry[0] for entry in entries.values())
        for name, (size, _, paths) in sorted(entries.items(), key=lambda kv: kv[1][1]):
            if total <= limit:
                break
            if name != keep:
                _remove(paths)
                total -= size


def cache_report():
    """What the disk cache holds: {"path", "entries" (compiled functions' modules),
    "bytes" (theirs), "helpers_path", "helpers_bytes" (jittape's own helpers' files)};
    ``path`` None with the disk cache off."""
    from .helpers_cache import helpers_dir, own_files
    root = config.cache_dir()
    entries = _Store(root).entries() if root else {}
    return {"path": root, "entries": len(entries),
            "bytes": sum(entry[0] for entry in entries.values()),
            "helpers_path": helpers_dir(), "helpers_bytes": _bytes(own_files())}


def clear_cache():
    """Remove every entry of the disk cache and the helpers' files (what jittape wrote
    there, nothing else; folders stay); what was removed, as ``cache_report`` says it."""
    from .helpers_cache import own_files
    report = cache_report()
    if report["path"]:
        for _, _, paths in _Store(report["path"]).entries().values():
            _remove(paths)
    _remove(own_files())
    return report


def _bytes(paths):
    total = 0
    for path in paths:
        try:
            total += os.lstat(path).st_size
        except OSError:
            pass
    return total


class _Guard:
    """Numba's cache of one generated module, checked: a dispatcher's loads verify its
    files first, a failed load heals the entry, a save records the files' hashes."""

    def __init__(self, store, name, source):
        self.store = store
        self.name = name
        self.source_hash = hashlib.sha256(source.encode()).hexdigest()

    def install(self, dispatcher, lean):
        from numba.core.caching import Cache
        cache = getattr(dispatcher, "_cache", None)
        if not isinstance(cache, Cache) or getattr(cache, "_jittape_guard", None):
            return
        cache._jittape_guard = self
        load, save = cache.load_overload, cache.save_overload
        inner = getattr(cache, "_load_overload", None)
        io_guard = getattr(cache, "_guard_against_spurious_io_errors", None)
        lean = lean and inner is not None and io_guard is not None

        namespace = getattr(getattr(dispatcher, "py_func", None), "__globals__", {})

        def load_overload(sig, target_context):
            # the helpers its code calls by symbol, defined first (linkage.link)
            link_module(namespace)
            directory = cache.cache_path
            with self.store.entry_lock(self.name):
                ok = self.store.verify(self.name, directory, self.source_hash)
            if not ok:
                return None                # Numba compiles, and saves afresh
            try:
                if not lean:
                    return load(sig, target_context)
                _start_runtime(target_context)
                with io_guard():
                    return inner(sig, target_context)
                return None                # (the guard swallowed an I/O error)
            except Exception as err:       # a damaged file: unpickling, LLVM, ...
                self.store.damaged(self.name, directory,
                                   f"Numba cannot load it: {type(err).__name__}: {err}")
                return None

        def save_overload(sig, data):
            try:
                with self.store.entry_lock(self.name):
                    # Numba's save reads the index back: checked first, as for a load
                    self.store.verify(self.name, cache.cache_path, self.source_hash)
                    save(sig, data)
                    self.store.record(self.name, cache.cache_path, self.source_hash)
            except Exception as err:       # the code runs from memory all the same
                _warn_once(("unwritable", self.store.root),
                           f"jittape: the disk cache at {self.store.root} cannot be "
                           f"written ({type(err).__name__}: {err}); compiled code is "
                           "kept in memory only")

        cache.load_overload = load_overload
        cache.save_overload = save_overload




def _unsafe(path):
    """Why ``path`` is not safe to load from (not the user's, or writable by group or
    others), or None."""
    if not hasattr(os, "geteuid"):
        return None
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return "belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "can be written by group or others"
    return None


def _manifest_bytes(source_hash, files):
    """A manifest: a JSON body, then a line with its own sha256 (so that any damage to
    the manifest shows, not only damage that breaks the JSON)."""
    body = json.dumps({"module": source_hash, "numba": files}, indent=0, sort_keys=True)
    return (body + "\n" + hashlib.sha256(body.encode()).hexdigest() + "\n").encode()


def _read_manifest(path):
    """A manifest's contents; ValueError if it is damaged."""
    with open(path, "rb") as f:
        text = f.read().decode()
    body, _, check = text.rstrip("\n").rpartition("\n")
    if hashlib.sha256(body.encode()).hexdigest() != check:
        raise ValueError("its checksum does not match")
    manifest = json.loads(body)
    if not isinstance(manifest, dict):
        raise ValueError("not a manifest")
    return manifest


def _file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _touch(path):
    with contextlib.suppress(OSError):
        os.utime(path)


def _remove(paths):
    for path in paths:
        with contextlib.suppress(OSError):
            os.remove(path)


def _remove_scratch(path, pid):
    if os.getpid() == pid:                 # not from a forked child: the parent's own
        shutil.rmtree(path, ignore_errors=True)


def _warn_once(what, message):
    if what in _WARNED:
        return
    _WARNED.add(what)
    warn_at_user(message, RuntimeWarning)     # the user's call, past jittape and Numba


# -- the first call ------------------------------------------------------------------------

def first_call(built, args):
    """A compiled function's first call of its kernel: compiles or loads it if this is
    the kernel's first call in the process (once, whatever the threads), then makes it
    compile nothing more (other argument types are other signatures).

    Returns (result, compiled): whether this call compiled (False: loaded from the
    disk cache, or the kernel had run already). An exception of the kernel's own (an
    ``IndexError`` of the user's program) propagates as it is: failures of the disk
    cache are dealt with where they happen, in its loads.
    """
    kernel = built.kernel
    if kernel.called:
        return call_shared(kernel.dispatcher, args, kernel.parts), False
    with kernel.lock:
        if kernel.called:                  # another thread's first call ran meanwhile
            return call_shared(kernel.dispatcher, args, kernel.parts), False
        disp = kernel.dispatcher
        if kernel.parts:                   # a kernel in parts: each compiled or loaded
            result, compiled = _run_parts(kernel, args)
        else:
            result = disp(*args)
            if hasattr(disp, "disable_compile"):
                disp.disable_compile()
                stats = getattr(disp, "stats", None)
                compiled = not (stats and sum(stats.cache_hits.values()))
            else:                          # a CUDA driver: its kernels cache themselves
                compiled = not kernel.from_disk
        kernel.called = True
    return result, compiled


def _part_dispatchers(kernel):
    """The dispatchers of a kernel's parts."""
    return [part.dispatcher for part in kernel.parts.values()]


def _run_parts(kernel, args):
    """The first run of a kernel in parts: its parts compile (or load) what the run
    needs, then compile nothing more (other types are other signatures). A part may be
    another kernel's too, and done already: compiling is allowed again for the run, under
    the lock that such changes hold (``call_shared``). (result, whether any part compiled
    now, not loaded)."""
    # (a part run as Python, as under NUMBA_DISABLE_JIT, has no compiling to switch)
    parts = [p for p in _part_dispatchers(kernel) if hasattr(p, "disable_compile")]
    with LAYOUT_LOCK:
        before = [sum(p.stats.cache_misses.values()) if hasattr(p, "stats") else 0
                  for p in parts]
        for part in parts:
            part.disable_compile(False)
        try:
            result = kernel.dispatcher(*args)
        finally:
            for part in parts:         # (a part after an error in the run compiled
                if part.signatures:    # nothing yet: it compiles at the next run)
                    part.disable_compile()
        compiled = any(sum(p.stats.cache_misses.values()) > n
                       for p, n in zip(parts, before) if hasattr(p, "stats"))
    return result, compiled


def call_shared(disp, args, parts=None):
    """Call a dispatcher whose compiling is disabled (or a kernel's Python calling its
    ``parts``, ``_Kernel.parts``); a new memory layout of the arguments (non-contiguous
    arrays) compiles a specialization."""
    try:
        return disp(*args)
    except TypeError:
        compilers = ([disp] if hasattr(disp, "disable_compile") else
                     [part.dispatcher for part in (parts or {}).values()])
        if not compilers:
            raise
        with LAYOUT_LOCK:
            for c in compilers:
                c.disable_compile(False)
            try:
                return disp(*args)
            finally:
                for c in compilers:
                    c.disable_compile()


# -- the kernel compiled in the background (tiered calls) -----------------------------------

def loadable(built):
    """Whether the first call of ``built``'s kernel needs no compile: the kernel has run
    in this process, or the disk cache holds Numba's files for its module, each recorded
    in the entry's manifest (a load, checked as ever when it happens)."""
    return _loadable(built.kernel)


def _loadable(kernel):
    if kernel.called:
        return True
    if kernel.parts:           # each part compiled in this process, or on disk
        return all(part.dispatcher.overloads or _loadable(part)
                   for part in kernel.parts.values())
    if not (kernel.cached and kernel.from_disk):
        return False
    root, name = os.path.split(kernel.path)
    name = name[:-len(".py")]
    try:
        recorded = _read_manifest(os.path.join(root, name + ".manifest"))["numba"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(recorded, dict):
        return False
    directory = os.path.join(root, "__pycache__")
    return (any(n.endswith(".nbi") for n in recorded)
            and all(os.path.exists(os.path.join(directory, n)) for n in recorded))


def link_helpers(built):
    """Define the symbols of the helpers ``built``'s kernel (and its parts) call, before
    its dispatcher goes to the user's own code: a function of theirs kept in Numba's
    cache that calls it loads without any load of ours (``linkage.link_module``)."""
    kernel = built.kernel
    for k in [kernel] + list((kernel.parts or {}).values()):
        py_func = getattr(k.dispatcher, "py_func", k.dispatcher)
        link_module(getattr(py_func, "__globals__", {}))


def running():
    """Whether any kernel is compiling in the background now."""
    return bool(_RUNNING)


def compiling(built):
    """Whether ``built``'s kernel is being compiled in the background."""
    return built.kernel.compiling


def compile_in_background(built, args):
    """Start compiling ``built``'s kernel for the types of ``args`` (its first call's
    arguments) in a thread of its own, unless it has run or is compiling already.
    Returns whether this request started it.

    The thread is not a daemon: a process that ends while it compiles waits for it, so
    that the kernel reaches the disk cache and the next process loads it (and Numba is
    not torn down in the middle of a compile)."""
    kernel = built.kernel
    with _BACKGROUND_LOCK:
        if kernel.called or kernel.compiling:
            return False
        disp = kernel.dispatcher
        try:                       # typed here, as the dispatcher types a call
            argtypes = (tuple(disp.typeof_pyval(a) for a in args) if not kernel.parts
                        else tuple(args))      # (a kernel in parts: run once on them)
        except Exception:          # (the first call raises it, compiling as ever)
            return False
        thread = threading.Thread(target=_compile_in_background, args=(kernel, argtypes),
                                  name=f"jittape compile of {os.path.basename(kernel.path)}")
        kernel.compiling, kernel.background, kernel.error = True, thread, None
        kernel.started = time.perf_counter()
        _RUNNING.add(kernel)
        _say_at_exit()
        thread.start()
        return True


_RUNNING = set()                 # kernels compiling in the background
_EXIT_REGISTERED = False


def _say_at_exit():
    """Once: at exit, before Python waits for the compile threads, say why it waits (a
    first run on a machine also compiles jittape's helpers: seconds of silence else)."""
    global _EXIT_REGISTERED
    register = getattr(threading, "_register_atexit", None)   # (runs before the joins)
    if _EXIT_REGISTERED or register is None:
        return
    _EXIT_REGISTERED = True
    try:
        register(_waiting)
    except RuntimeError:         # (the interpreter is shutting down already)
        pass


def _waiting():
    running = [k for k in list(_RUNNING) if k.compiling]
    if running:
        print(f"jittape: finishing {len(running)} compile{'s' if len(running) > 1 else ''} "
              "begun in the background, so that the next run loads "
              f"{'them' if len(running) > 1 else 'it'} from the disk cache",
              file=sys.stderr, flush=True)


def _compile_in_background(kernel, argtypes):
    """The thread's work: what a first call does, without the call (``first_call``). A
    failure is kept (``error``): the next call finds no compile running and compiles at
    its first call as before, which raises it there."""
    try:
        with kernel.lock:
            if kernel.called:
                return
            disp = kernel.dispatcher
            if kernel.parts:              # Python calling its parts: a run compiles them
                kernel.background_compiled = _run_parts(kernel, argtypes)[1]
                kernel.called = True
                return
            init = getattr(disp, "_compilation_chain_init_hook", None)
            if init is not None:          # (Numba's own calls run it before a compile)
                init()
            disp.compile(argtypes)
            disp.disable_compile()
            stats = getattr(disp, "stats", None)
            kernel.background_compiled = not (stats and sum(stats.cache_hits.values()))
            kernel.called = True
    except Exception as err:
        kernel.error = err
    finally:
        kernel.compiling = False
        _RUNNING.discard(kernel)


def wait(built, timeout=None):
    """Wait for a background compile of ``built``'s kernel, if one runs (at most
    ``timeout`` seconds)."""
    thread = built.kernel.background
    if thread is not None and built.kernel.compiling:
        thread.join(timeout)


def _before_fork():
    """A forked child has none of its parent's threads, and would find the locks that a
    compile holds (this module's and Numba's) taken for ever: a fork waits for the
    compiles running in the background to finish."""
    for kernel in list(_TABLE.values()):
        thread = kernel.background
        if kernel.compiling and thread is not None and thread is not threading.current_thread():
            thread.join()


_BACKGROUND_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)
