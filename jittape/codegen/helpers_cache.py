"""Where the machine code of jittape's own runtime helpers is kept.

The helpers (the matrix products of ``gemm.py``, ``runtime.py``'s functions) are
``numba.njit(cache=True)`` functions, and Numba keeps such machine code in a
``__pycache__`` beside the source: inside the installed package, which may be
read-only, shared by several users, or a site-packages that should not change. A
locator of jittape's own puts it under ``helpers_dir()`` instead:

- ``JITTAPE_HELPERS_DIR`` where it is set;
- else ``helpers/`` in the disk cache directory (``JITTAPE_CACHE_DIR``, by default
  ``~/.cache/jittape``);
- else, with the disk cache off (``JITTAPE_CACHE_DIR=""``, ``jt.config.disk_cache =
  False`` before import), a temporary directory removed when the process exits: each
  process then compiles the helpers again.

The place is read once, when jittape is imported (Numba fixes a function's cache when
it is decorated). Only the package's own source files are located here: generated
modules (in the disk cache already) and the user's own ``@njit(cache=True)`` functions
keep Numba's locators (``NUMBA_CACHE_DIR`` is left alone).
"""

import atexit
import os
import shutil
import tempfile

from numba.core import caching

from .. import config

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_scratch = None


def helpers_dir():
    """The directory of the helpers' machine code (see the module's docstring)."""
    path = os.environ.get("JITTAPE_HELPERS_DIR")
    if path:
        return path
    base = config.cache_dir()
    return os.path.join(base, "helpers") if base else _scratch_dir()


class HelperLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba's cache locator for functions defined in jittape's own files."""

    def __init__(self, py_func, py_file, root):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        path = os.path.abspath(py_file)
        if os.path.commonpath([path, _PACKAGE]) != _PACKAGE or not os.path.exists(path):
            return None                      # not jittape's: Numba's own locators
        self = cls(py_func, py_file, helpers_dir())
        try:
            self.ensure_cache_path()
        except OSError:                      # unwritable: this process's scratch
            self = cls(py_func, py_file, _scratch_dir())
            self.ensure_cache_path()
        return self


def _scratch_dir():
    """A directory of this process's, removed at exit."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="jittape-helpers-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def install():
    """Put the locator first in Numba's list (once; before the helpers are defined)."""
    if HelperLocator not in caching.CacheImpl._locator_classes:
        caching.CacheImpl._locator_classes.insert(0, HelperLocator)
