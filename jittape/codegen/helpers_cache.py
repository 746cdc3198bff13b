"""Where the machine code of jittape's own runtime helpers is kept.

The helpers (the matrix products of ``gemm.py``, ``runtime.py``'s functions, the math
functions' LLVM IR of ``mathlib.py``) are compiled once per machine, and Numba keeps
``numba.njit(cache=True)`` machine code in a ``__pycache__`` beside the source: inside
the installed package, which may be read-only, shared by several users, or a
site-packages that should not change. A locator of jittape's own puts it under
``helpers_dir()`` instead:

- ``JITTAPE_HELPERS_DIR`` where it is set;
- else ``helpers/`` in the disk cache directory (``JITTAPE_CACHE_DIR``, by default
  ``~/.cache/jittape``);
- else, with the disk cache off (``JITTAPE_CACHE_DIR=""``), a temporary directory
  removed when the process exits: each process then compiles the helpers again.

The place is chosen once, when jittape is imported (Numba fixes a function's cache when
it is decorated), and made absolute. As for the disk cache, a folder that another user
owns, or that others may write, is not used (its files are pickles Numba loads): the
process's temporary folder serves instead, with a warning. Only the package's own
source files are located here: generated modules (in the disk cache already) and the
user's own ``@njit(cache=True)`` functions keep Numba's locators (``NUMBA_CACHE_DIR``
is left alone).
"""

import atexit
import os
import shutil
import stat
import tempfile
import warnings

from numba.core import caching

from .. import config

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_root = None          # the folder chosen (helpers_dir)
_scratch = None


def helpers_dir():
    """The directory of the helpers' machine code (see the module's docstring)."""
    global _root
    if _root is None:
        path = os.environ.get("JITTAPE_HELPERS_DIR")
        if not path:
            base = config.cache_dir()
            path = os.path.join(base, "helpers") if base else None
        _root = _safe(os.path.abspath(path)) if path else _scratch_dir()
    return _root


def _safe(path):
    """``path``, made private where it is new; the scratch folder (and a warning) where
    it is another user's or writable by others."""
    try:
        parent = os.path.dirname(path)
        for folder in (parent, path):          # (the cache root private, as _Store makes it)
            if not os.path.isdir(folder):
                os.makedirs(folder, mode=0o700, exist_ok=True)
        why = _unsafe(path)
    except OSError as err:
        why = str(err)
    if why is None:
        return path
    warnings.warn(f"jittape: its helpers' folder {path} is not used ({why}); they are "
                  "compiled in a temporary folder of this process", stacklevel=2)
    return _scratch_dir()


def _unsafe(path):
    """Why ``path`` is not safe to load pickles from, or None."""
    st = os.stat(path)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "it belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "others may write it"
    return None


def _scratch_dir():
    """A directory of this process's, removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="jittape-helpers-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def _ours(py_file):
    path = os.path.abspath(py_file)
    return path.startswith(_PACKAGE + os.sep) and os.path.exists(path)


class HelperLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba's cache locator for functions defined in jittape's own files."""

    def __init__(self, py_func, py_file, root):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    def ensure_cache_path(self):
        os.makedirs(self._cache_path, mode=0o700, exist_ok=True)
        super().ensure_cache_path()

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _ours(py_file):
            return None                      # not jittape's: Numba's own locators
        self = cls(py_func, py_file, helpers_dir())
        try:
            self.ensure_cache_path()
        except OSError:                      # unwritable: this process's scratch
            self = cls(py_func, py_file, _scratch_dir())
            self.ensure_cache_path()
        return self


def folder_of(py_file):
    """The folder of ``helpers_dir()`` that holds the helpers of source file ``py_file``."""
    return os.path.join(helpers_dir(), HelperLocator.get_suitable_cache_subpath(py_file))


def own_files():
    """The files of jittape's helpers in ``helpers_dir()``: Numba's index and data files
    of the package's modules, and ``mathlib``'s LLVM IR; nothing else that the folder
    may hold."""
    found = []
    for folder, _, files in os.walk(_PACKAGE):
        stems = {name[:-3] for name in files if name.endswith(".py")}
        here = folder_of(os.path.join(folder, "x.py"))
        try:
            names = os.listdir(here)
        except OSError:
            continue
        found += [os.path.join(here, n) for n in names
                  if n.endswith((".nbi", ".nbc")) and n.split(".", 1)[0] in stems]
    ir = os.path.join(helpers_dir(), "mathlib")
    if os.path.isdir(ir):
        found += [os.path.join(ir, n) for n in os.listdir(ir) if n.endswith(".ll")]
    return found


def install():
    """Put the locator first in Numba's list (once; before the helpers are defined)."""
    if HelperLocator not in caching.CacheImpl._locator_classes:
        caching.CacheImpl._locator_classes.insert(0, HelperLocator)
