"""Values a compiled function reads from outside its arguments.

The closure cells of the function and the globals its code names (nested code objects
included: lambdas, comprehensions) are found by identity among the operands of the
traced ops (``_captured_values``, ``trace.CapturedValues``). An array is an input of the
kernel, read from its cell or global at each call and passed by reference (rebinding
and changes in place are seen; its dtype and shape are checked); a Python float that is
an operand of the function's own elementwise ops is a weak float64 input, guarded by
value too (Python code may also use it: a new value traces again, and compiles only if
the graph differs); any other captured int, bool, str, tuple, float or array is a guard
(``_capture_checks``): the fast path compares it (a load and a class test, a set lookup
or an identity test each) and another value traces again. Attributes (``self.w``,
``module.x``), items of containers and the globals of the functions it calls stay
frozen at trace time; ``lower().graph`` says which is which (``_capture_text``).
Wrappers of one function are one object (``sharing``) only where nothing is frozen that
a wrapper made anew would read.

Variables the function reads from its enclosing scope are inputs too, and ``jt.random``
draws are inputs drawn anew at each call, so a seed gives the eager sequence; a trace
that draws from ``np.random`` or ``random`` warns (``_warn_global_random``).
"""

import functools
import random as _pyrandom
import types
import warnings

import numpy as np

from ..errors import user_frame
from ..tensor import Tensor, Variable
from ..trace import Captured, CapturedValues, RandomDraw

_ndarray = np.ndarray


class Wrapper:
    """The base of ``compiled.Compiled``: what the modules below it know of a compiled
    function, ``fn``, the function it compiles. A function that calls one reads it as
    it reads a helper function (by identity)."""


# what a captured value may be to be read at each call or guarded (hashable values are
# compared by value; anything else the function reads was frozen when it was traced)
_GUARDED = (bool, int, float, str, bytes, type(None), tuple, np.integer, np.bool_, np.floating)
# functions are guarded by identity (what they compute went into the graph); their own
# globals stay frozen (see the module docstring)
_BY_IDENTITY = (types.FunctionType, types.MethodType, functools.partial)


def _by_identity(value):
    """Whether a captured value is guarded as that very object: arrays used otherwise
    than as operands, and every callable but a class (a function, a method, a NumPy
    ufunc ``np.sin``, a builtin, a jittape op ``jt.sin``, a compiled function): what it
    computes went into the graph, so rebinding the name to another one traces again."""
    return (isinstance(value, (Tensor, Wrapper) + _BY_IDENTITY) or value.__class__ is _ndarray
            or (callable(value) and not isinstance(value, type)))


def _captured_values(fn):
    """The values ``fn`` reads from its closure cells and from the globals it names (the
    names of its nested code objects too: lambdas, comprehensions; not those of the
    functions it calls), for the trace (``trace.CapturedValues``); None for a callable
    that is not a Python function. A function jittape makes around a user's function
    (``jt.minimize``'s loop) names it in ``_jittape_reads``: what that one reads counts
    too, as if it were compiled itself."""
    parts = [p for p in map(_captured_parts, [fn, *getattr(fn, "_jittape_reads", ())])
             if p is not None]
    if not parts:
        return None
    return CapturedValues([c for p in parts for c in p[0]], set().union(*(p[1] for p in parts)),
                          set().union(*(p[2] for p in parts)))


def _captured_parts(fn):
    """(captures, code objects, ids of float literals) of ``fn``, or None."""
    while isinstance(fn, Wrapper):
        fn = fn.fn
    fn = getattr(fn, "__func__", fn)              # a bound method: its function
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    captures = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:                        # a cell not bound yet
            continue
        if _capturable(value):
            captures.append(Captured(name, cell, None, value))
    codes, literals = _nested_codes(code), set()
    names = set().union(*(c.co_names for c in codes))
    for c in codes:
        consts = list(c.co_consts)
        while consts:
            k = consts.pop()
            if k.__class__ is float:
                literals.add(id(k))
            elif isinstance(k, (tuple, frozenset)):
                consts.extend(k)
    scope = getattr(fn, "__globals__", None) or {}
    for name in sorted(names):
        if name in scope and _capturable(scope[name]):
            captures.append(Captured(name, scope, name, scope[name]))
    return captures, codes, literals


def _nested_codes(code):
    """``code`` and the code objects nested in it (lambdas, comprehensions, inner
    functions), each once."""
    codes, stack = set(), [code]
    while stack:
        c = stack.pop()
        if c not in codes:
            codes.add(c)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return codes


def _capturable(value):
    if value.__class__ is _ndarray or isinstance(value, Tensor):
        return True
    if _by_identity(value):                         # a helper it calls: rebinding
        return True                                 # the name to another one traces again
    if not isinstance(value, _GUARDED):
        return False
    if isinstance(value, tuple):                  # a shape, a few options: compared
        if len(value) > 32:
            return False
        try:
            hash(value)
        except TypeError:
            return False
    return True


def _capture_checks(trace):
    """What each captured value must be for a variant to apply: (capture, how, what).
    ``array``: an input, of its dtype and in a set of shapes that all trace to this
    graph (the code may have read a size as a Python int: ``W.shape[0]``, which no trace
    sees; a new shape traces again, and compiles only if the graph differs);
    ``scalar``: an input (a NumPy scalar), of its class; ``value``: a Python float
    input, or a constant of the graph (an int, a string, a float that is not an operand
    of the function's own ops), of its class and in a set of values that all trace to
    this graph; ``same``: an array or tensor used otherwise than as an operand (its
    values went into the graph), that very object."""
    captured = trace.captured
    if captured is None:
        return []
    checks = []
    for c in captured.all:
        v = c.value
        if c.var is not None and not c.concrete:
            if v.__class__ is float:
                # read at each call, and guarded by value too: code may also use it in
                # Python (``if scale > 1``, ``scale / 2``), which no trace sees. Another
                # value traces again, and compiles only if the graph differs.
                checks.append((c, "value", (float, {v})))
            elif isinstance(v, np.generic):
                checks.append((c, "scalar", v.__class__))
            else:
                checks.append((c, "array", (v.dtype, {v.shape})))
        elif _by_identity(v):
            checks.append((c, "same", v))
        else:
            checks.append((c, "value", (v.__class__, {v})))
    return checks


def _checks_hold(checks):
    """Whether the captured values are what a variant was traced for (the full path;
    ``fastpath.caller`` spells the same checks out for the fast path)."""
    for c, how, what in checks:
        try:
            v = c.read()
        except (KeyError, ValueError):            # deleted: tracing again says so
            return False
        cls = v.__class__
        if how == "array":
            if cls is not _ndarray or v.dtype != what[0] or v.shape not in what[1]:
                return False
        elif how == "value":
            try:
                if cls is not what[0] or v not in what[1]:
                    return False
            except TypeError:                     # (a tuple now holding a list)
                return False
        elif how == "same":
            if v is not what:
                return False
        elif cls is not what:
            return False
    return True


def _merge_checks(entry, new):
    """An entry traced again for other captured values gave the same graph: the values
    of ``new`` join the entry's accepted ones (True), or, where they cannot (another
    class, another object), the caller replaces the entry (False)."""
    if len(entry.checks) != len(new.checks):
        return False
    for (c, how, what), (c2, how2, what2) in zip(entry.checks, new.checks):
        if c.name != c2.name or how != how2:
            return False
        if how in ("value", "array") and what[0] != what2[0]:     # a class, a dtype
            return False
        if how == "same" and what is not what2:
            return False
    for (c, how, what), (_, _, what2) in zip(entry.checks, new.checks):
        if how in ("value", "array"):
            if len(what[1]) >= 256:              # a value that changes every call: bounded
                what[1].clear()
            what[1].update(what2[1])
    return True


def _reuse(entry, new):
    """``entry``, whose graph ``new`` traced again (for other captured values, or where
    a branch condition rounds differently from NumPy's), made to take what ``new`` was
    traced for: its captured values join the accepted ones or replace them, and its
    first run uses the random numbers that ``new``'s trace drew. Where the two are not
    called alike (another captured variable, results packed with other Python values),
    ``new`` itself, which the caller puts in ``entry``'s place (its kernel is the same
    one: build's table shares it)."""
    if not _called_alike(entry, new):
        return new
    if new.checks and not _merge_checks(entry, new):
        entry.checks, entry.capture_text = new.checks, new.capture_text
        entry.caller = None                   # it spelled out the old checks
    for mine, theirs in zip(entry.implicit, new.implicit):
        if isinstance(mine, RandomDraw) and isinstance(theirs, RandomDraw):
            mine.first = theirs.first
    return entry


def _called_alike(a, b):
    """Whether two entries of one graph take their inputs from the same places and make
    the same results of the kernel's outputs."""
    if [id(v) for v in a.captures] != [id(v) for v in b.captures]:
        return False
    if [(k, t if t.__class__ is int else id(t)) for k, t in a.writes] != \
            [(k, t if t.__class__ is int else id(t)) for k, t in b.writes]:
        return False
    if len(a.implicit) != len(b.implicit):
        return False
    for x, y in zip(a.implicit, b.implicit):
        if isinstance(x, RandomDraw) and isinstance(y, RandomDraw):
            continue
        if isinstance(x, Captured) and isinstance(y, Captured):
            if (x.name, x.key, id(x.where)) != (y.name, y.key, id(y.where)):
                return False
        elif x is not y:
            return False
    # a packer written as one expression compares by its text and names; any other
    # holds Python values of its trace (a function's non-tensor results), unknown here
    expr = getattr(a.pack, "expr", None)
    return expr is not None and expr == getattr(b.pack, "expr", None) and \
        _same_names(a.pack.names, b.pack.names)


def _same_names(x, y):
    try:
        return x.keys() == y.keys() and all(
            type(x[k]) is type(y[k]) and bool(x[k] == y[k]) for k in x)
    except (TypeError, ValueError):
        return False


def _implicit_inputs(implicit):
    """The kernel inputs read from outside the arguments, at this call."""
    out = []
    for src in implicit:
        if isinstance(src, Variable):
            out.append(src._value)
        else:
            value = src.read()
            out.append(value[()] if value.__class__ is _ndarray and not value.ndim else value)
    return out


def _kernel_inputs_text(entry):
    """The line of ``lower().graph`` naming the kernel inputs that follow the flattened
    arguments (what a caller of ``kernel()`` passes after them), in order."""
    names = []
    for src, var in zip(entry.implicit, entry.graph.inputs[-len(entry.implicit):]):
        if isinstance(src, Variable):
            what = f"variable {src.name!r}"
        elif isinstance(src, RandomDraw):
            what = f"a jt.random draw of shape {src.shape}"
        else:
            what = src.label()
        names.append(f"{var!r} = {what}")
    return "# kernel inputs after the arguments: " + ", ".join(names) + "\n"


def _capture_text(trace, checks):
    """The line of ``lower().graph`` that says what the compiled code reads at each call,
    what it guards and what it froze."""
    if trace.captured is None and not trace.implicit:
        return ""
    read, guarded = [], []
    for src in trace.implicit:
        if isinstance(src, Variable):
            read.append(f"variable {src.name!r}")
    draws = sum(isinstance(src, RandomDraw) for src in trace.implicit)
    for c, how, what in checks:
        if how in ("array", "scalar"):
            read.append(f"{c.label()}: {how} input")
        elif how == "value" and c.var is not None and not c.concrete:
            read.append(f"{c.label()}: float input")
            guarded.append(f"{c.label()} == {c.value!r}")
        elif how == "value":
            guarded.append(f"{c.label()} == {c.value!r}")
        else:
            guarded.append(f"{c.label()} is the {type(c.value).__name__} it was traced with")
    if draws:
        read.append(f"{draws} jt.random draw{'s' * (draws != 1)}, drawn anew")
    return ("# captured values: read at each call: " + (", ".join(read) or "none")
            + "; guarded (another value traces again): " + (", ".join(guarded) or "none")
            + "; frozen when traced: attributes (self.w, module.x), items of containers, "
            "and the globals of the functions it calls")


def _global_random_state():
    """A fingerprint of NumPy's and the random module's global generators (compared
    around a trace; another thread drawing meanwhile would make a false alarm)."""
    state = np.random.get_state()
    return state[1].tobytes(), state[2:], _pyrandom.getstate()


_RANDOM_WARNED = set()


def _warn_global_random(fn, mode, name, op_line):
    """Once per line: the trace drew from np.random / random, so its numbers are
    constants of the compiled code. The warning points to the first op traced after
    NumPy's generator moved (``op_line``), else to the line calling the function."""
    where = op_line or user_frame()
    if where in _RANDOM_WARNED:
        return
    _RANDOM_WARNED.add(where)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    defined = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""
    drawn = ("drew from np.random before the op on this line" if op_line else
             "drew from np.random or random")
    message = (f"{mode}({name}){defined} {drawn} while it was traced: the numbers drawn are "
               "constants of the compiled code, the same at every call. Draw with "
               "jt.random (jt.random.uniform, jt.random.normal: drawn anew at each call), "
               "or pass the random values as arguments")
    if where is None:
        warnings.warn(message, UserWarning, stacklevel=2)
        return
    filename, _, line = where.rpartition(":")
    warnings.warn_explicit(message, UserWarning, filename, int(line))
