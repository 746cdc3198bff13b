"""The globals in which a generated CPU module runs as plain Python (a tiered call of a
graph that ``interpret`` cannot run on NumPy, see ``compiler/cache.py``): nothing in it
calls into Numba, so a call made while the kernel compiles in the background neither
compiles helpers nor waits for Numba's lock."""

import math
import types

import numba
import numpy as np

def python_globals():
    """Globals in which a generated CPU module runs as plain Python that calls nothing
    compiled by Numba, for the calls made while its kernel compiles: ``numba.njit``
    leaves functions as they are (``prange`` is ``range``); the runtime's helpers
    compiled with Numba are their Python functions; matrix products are NumPy's; the
    vectorizable math (mathlib, bit-level code Numba compiles) is Python's ``math`` and
    NumPy's, equal within rounding. Calling the helpers compiled by Numba from Python
    instead would compile each (seconds, on Numba's lock), the wait this avoids."""
    global _PYTHON_BUILTINS
    if _PYTHON_BUILTINS is None:
        import builtins
        from . import lapack, mathlib, runtime, special
        modules = {
            "numba": _PythonModule(numba, njit=_no_jit, prange=range),
            "jittape.codegen.runtime": _PythonModule(
                runtime, link=lambda helper, key: None, dot=np.dot,
                matmul2d=lambda a, b, threads=True: np.matmul(a, b)),
            "jittape.codegen.mathlib": _PythonModule(mathlib, **_python_math()),
            "jittape.codegen.lapack": _PythonModule(lapack),
            "jittape.codegen.special": _PythonModule(special),
        }

        def import_(name, globals=None, locals=None, fromlist=(), level=0):
            module = modules.get(name) if level == 0 else None
            if module is not None:
                return module
            return builtins.__import__(name, globals, locals, fromlist, level)

        _PYTHON_BUILTINS = dict(vars(builtins), __import__=import_)
    return {"__builtins__": _PYTHON_BUILTINS}


_PYTHON_BUILTINS = None


class _PythonModule(types.ModuleType):
    """A module standing for ``real``: its names, those compiled by Numba as their Python
    functions, unless given here."""

    def __init__(self, real, **names):
        super().__init__(real.__name__)
        vars(self).update(names)
        self._real = real

    def __getattr__(self, name):             # (names not given)
        value = getattr(self._real, name)
        if isinstance(value, numba.core.dispatcher.Dispatcher):
            return value.py_func
        external = getattr(value, "external", None)      # a helper linked by symbol
        if external is not None:
            return external.dispatcher.py_func
        return value


def _no_jit(*args, **options):
    """``numba.njit`` that compiles nothing, with or without options."""
    if args and callable(args[0]):           # @numba.njit, numba.njit(f, ...)
        return args[0]
    return lambda fn: fn                     # @numba.njit(...), numba.njit("sig", ...)


def _python_math():
    """mathlib's functions (``exp_f64``, ...) in Python: each takes a number and returns
    its own float type, NaN and inf as NumPy gives them."""
    from .mathlib import FUNCTIONS, numpy_functions
    from .runtime import make_helpers
    helpers = ("sigmoid", "softplus", "relu")
    out = {}
    for ftype, suffix in ((np.float32, "f32"), (np.float64, "f64")):
        # Python's math where it has the function (a NumPy call per number costs ten
        # times as much), NumPy's where math raises (inf, NaN) or has none
        made = {name: _total(ftype, getattr(math, name, fn), fn)
                for name, fn in numpy_functions().items() if name not in helpers}
        made.update(zip(helpers, make_helpers(ftype, made["exp"], made["log1p"], np.maximum,
                                              np.absolute)))
        out.update((f"{name}_{suffix}", made[name]) for name in FUNCTIONS)
    return out


def _total(ftype, fn, ufunc):
    def call(x):
        try:
            return ftype(fn(x))
        except (OverflowError, ValueError):   # where NumPy gives inf or nan
            return ufunc(ftype(x))
    return call
