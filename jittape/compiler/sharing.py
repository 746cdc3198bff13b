"""Wrappers are shared: ``Compiled(fn, ...)`` for a function with the same code object,
closure cells, globals dict, defaults and options as a live one returns that one
(``_share_key``; the last ``_KEEP`` made are held, the rest weakly), so
``jt.grad(loss)(w)`` written inside a loop costs a lookup, not a trace, and memory stays
flat. Numba never frees the machine code it compiles: sharing (here, and the loaded
kernels' table of ``codegen.build``) is what bounds the memory of compiled functions.

A function is shared only where nothing it reads is frozen by a trace
(``_reads_nothing_frozen``): a wrapper made anew would trace again and see a changed
attribute, container item or global of a function it calls.
"""

import collections
import functools
import os
import threading
import types
import weakref

import numpy as np

from .. import config
from .capture import Wrapper, _capturable, _nested_codes
from .signature import _default_key

# Compiled functions by what makes two wrappers equivalent (see _share_key), held
# weakly; the most recently made or found are held strongly too, so that a wrapper
# created and dropped at every step is found again at the next.
_SHARED = weakref.WeakValueDictionary()
_RECENT = collections.OrderedDict()
_KEEP = 64
_SHARED_LOCK = threading.Lock()


def _keep(key, compiled):
    """Hold ``compiled`` among the most recent (under _SHARED_LOCK)."""
    _RECENT[key] = compiled
    _RECENT.move_to_end(key)
    if len(_RECENT) > _KEEP:
        _RECENT.popitem(last=False)


def _share_key(fn, mode, argnums, has_aux, target, static_argnums):
    """What two wrappers must have in common to share their compiled code: the
    function's code object, its closure cells and globals dict (by identity: the values
    they hold are read at each call), its defaults (Python numbers and strings by
    value, anything else by identity), and the options. None for a callable that is not
    a Python function (a method reads its object's attributes, frozen by a trace: each
    wrapper traces). The objects named by identity stay alive while the key is in use:
    the compiled function holds its function, which holds them."""
    if fn.__class__ is not types.FunctionType or not _reads_nothing_frozen(fn, True, set()):
        return None
    if not all(isinstance(a, int) for a in ((argnums,) if isinstance(argnums, int)
                                            else argnums if isinstance(argnums, (tuple, list))
                                            else (None,))):
        return None                                    # (__init__ says what is wrong)
    if not isinstance(static_argnums, (int, tuple, list)):
        return None
    cells = fn.__closure__
    kwdefaults = fn.__kwdefaults__
    # (and the disk cache in use: as the table of loaded kernels, build._TABLE, does)
    key = (config.disk_cache, os.environ.get("JITTAPE_CACHE_DIR"),
           fn.__code__, id(fn.__globals__), tuple(map(id, cells)) if cells else (),
           _default_key(fn.__defaults__ or ()),
           tuple((k, _default_key((v,))) for k, v in sorted(kwdefaults.items()))
           if kwdefaults else (), mode,
           argnums if isinstance(argnums, int) else ("tuple",) + tuple(argnums),
           bool(has_aux), target,
           static_argnums if isinstance(static_argnums, int)
           else ("tuple",) + tuple(static_argnums))
    try:
        hash(key)
    except TypeError:
        return None
    return key


# modules whose attributes a function may read and still share its compiled code: the
# numeric libraries' functions, not values a program changes
_LIBRARIES = frozenset({"numpy", "jittape", "math", "cmath", "scipy", "numba", "functools",
                        "operator", "itertools", "builtins"})


def _reads_nothing_frozen(fn, top, seen, depth=0):
    """Whether everything ``fn`` reads from its closure cells and globals is read at each
    call or guarded (``capture._captured_values``, for the top-level function) or cannot
    change (library modules, classes, functions that themselves read nothing else). A
    wrapper made anew would trace again and see a changed attribute (``self.s``,
    ``cfg["s"]``, ``module.x``) or a global of a function it calls: sharing must not
    freeze what a new wrapper would have read, so such a function is not shared."""
    if fn in seen:
        return True
    seen.add(fn)
    if depth > 8:
        return False
    code = fn.__code__
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:                        # a cell not bound yet
            pass
    names = set().union(*(c.co_names for c in _nested_codes(code)))
    scope = fn.__globals__
    values += [scope[n] for n in names if n in scope]
    for v in values:
        if isinstance(v, types.ModuleType):
            if v.__name__.partition(".")[0] not in _LIBRARIES:
                return False
        elif isinstance(v, type):
            continue
        elif isinstance(v, Wrapper):
            if not isinstance(v.fn, types.FunctionType) or \
                    not _reads_nothing_frozen(v.fn, False, seen, depth + 1):
                return False
        elif isinstance(v, types.FunctionType):
            if not _reads_nothing_frozen(v, False, seen, depth + 1):
                return False
        elif isinstance(v, (types.MethodType, functools.partial)):
            return False                          # (their object's or arguments' values)
        elif isinstance(v, (types.BuiltinFunctionType, np.ufunc)) or (
                callable(v) and type(v).__module__.partition(".")[0] in _LIBRARIES):
            continue                              # (np.sum imported by name)
        elif not (top and _capturable(v)):        # read or guarded at each call: the
            return False                          # top-level function's values only
    return True
