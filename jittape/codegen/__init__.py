"""Code generation: a scheduled graph becomes the Python source of one Numba function."""

# before any module of the package defines a helper with Numba's disk cache
from .helpers_cache import install as _install

_install()
