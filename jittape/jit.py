"""Compiled functions: ``grad``, ``value_and_grad``, ``jacobian``, ``hessian``, ``function``.

A call looks up its signature (argument structure, dtypes, ranks, which axes have size
1, the values of Python ``int``/``bool``/``str`` arguments and of those named in
``static_argnums``) in a dict. On a miss it traces the function (``trace``), differentiates
the graph (``autodiff``), optimizes it (``passes``), generates a Numba function
(``codegen.cpu``), and builds it through the disk cache (``codegen.build``). Sizes are
not part of the signature: the generated code reads them from the arrays, so one
compile serves every batch size. A function that reads a size while tracing
(``x.shape[0]``) is keyed on exact sizes instead, so a graph never reuses a stale one.

Python scalars: a ``float`` argument is a run-time input (a new value does not
recompile: a learning rate in a schedule), a float64 scalar typed weakly as NumPy types
the number itself (``trace.Trace.weak``): where it meets a float32 tensor it is cast to
float32 first, so ``x * lr`` stays float32 and equals the eager tape's result; the
gradient of one has the dtype of the function's value. ``int``, ``bool`` and ``str``
arguments are part of the signature (they may feed ``range``, shapes and axes), and so
are the arguments named in ``static_argnums`` (hashable values; a float there is a
constant of the graph). More than ``config.recompile_warning`` traces of one function
warn once, naming what changed between the last two signatures (``_signature_change``).

A signature whose kernel finds sizes it cannot serve (a size computed from the
arguments' was 1 when it was traced, or code was generated for the sizes seen) gets a
variant traced for this call's sizes, kept beside the first (``_size_variant``); when
that trace fails, its error names the op and the shapes. Only a variant that cannot
serve the sizes it was traced with makes the function keyed on exact sizes.

Wrappers are shared: ``Compiled(fn, ...)`` for a function with the same code object,
closure cells, globals dict, defaults and options as a live one returns that one
(``_share_key``; the last ``_KEEP`` made are held, the rest weakly), so
``jt.grad(loss)(w)`` written inside a loop costs a lookup, not a trace, and memory stays
flat. Numba never frees the machine code it compiles: sharing (here, and the loaded
kernels' table of ``codegen.build``) is what bounds the memory of compiled functions.

``function`` compiles a function as it is. Tapes opened in it record into the trace
(``tape.record_traced``) and their ``gradient``/``jacobian`` run the autodiff pass over
the nodes they recorded. Variables it reads from its enclosing scope become inputs (the
compiled function holds them, as ``tf.function`` does), Variables passed as arguments
too; ``assign``/``assign_add``/``assign_sub`` make the new values outputs, written back
to the variables after the call, so a training step is one native call.

Values read from outside the arguments (``_captured_values``): the closure cells of the
function and the globals its code names (nested code objects included: lambdas,
comprehensions) are found by identity among the operands of the traced ops
(``trace.CapturedValues``). An array is an input of the kernel, read from its cell or
global at each call and passed by reference (rebinding and changes in place are seen;
its dtype and shape are checked); a Python float that is an operand of the function's
own elementwise ops is a weak float64 input, guarded by value too (Python code may also
use it: a new value traces again, and compiles only if the graph differs); any other
captured int, bool, str, tuple, float or array is a guard (``_capture_checks``): the
fast path compares it (a load and a class test, a set lookup or an identity test each)
and another value traces again. Attributes (``self.w``, ``module.x``), items of
containers and the globals of the functions it calls stay frozen at trace time;
``lower().graph`` says which is which. Wrappers of one function are one object
(``_share_key``) only where nothing is frozen that a wrapper made anew would read. ``jt.random`` draws are inputs drawn anew at
each call, so a seed gives the eager sequence; a trace that draws from ``np.random`` or
``random`` warns.

Python control flow on a traced value (``if jt.sum(x) > 0:``) takes the branch that the
value has in the call being traced (computed with the primitives' NumPy
implementations) and records a guard: the condition is an output of the kernel, and a
call where it comes out otherwise traces and compiles that variant, kept beside the
first (``config.max_variants``). A ``while`` loop is unrolled per trip count
(``config.max_guards``).
"""

import collections
import functools
import os
import sys
import threading
import types
import warnings
import weakref
import random as _pyrandom

import numpy as np

from . import autodiff, ir, ops, passes, tree
from ._version import __version__
from .codegen import build, cpu
from . import config
from .errors import (JittapeError, ShapeError, SignatureMismatch, SizeMismatch, UnsupportedError,
                     RecompileWarning, at_user_line, caller_frames)
from .ops import core
from .tensor import Tensor, Variable
from .trace import (Captured, CapturedValues, RandomDraw, Trace, Tracer, TracerError,
                    _numpy_random_mark)

CacheInfo = collections.namedtuple("CacheInfo", "traces compiles hits disk_hits misses")
Lowered = collections.namedtuple("Lowered", "graph source python")
Lowered.__doc__ = """What ``lower()`` returns: ``graph`` (the optimized op list as text),
``source`` (the generated module) and ``python`` (the generated function run as plain
Python, without Numba: the flattened arguments in (the values read from outside them are
read at each call, as the compiled call reads them), kernel results out; for debugging)."""

_MODES = ("grad", "value_and_grad", "jacobian", "hessian", "function")
_ndarray = np.ndarray
_NUMPY_SCALARS = frozenset([np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                            np.int64, np.uint8, np.bool_])
_FAST_SCALARS = _NUMPY_SCALARS | {float}
_STATIC = (bool, int, float, str)
# no_cfunc_wrapper: kernels are called from Python and from njit code, never as
# first-class function values, so Numba need not make (and compile) their C wrapper
_NJIT_OPTIONS = {"error_model": "numpy", "nogil": True, "no_cfunc_wrapper": True}


class ArgnumsError(JittapeError, ValueError, TypeError):
    """``argnums`` that do not name distinct arguments of a call (out of range, or one
    argument twice once negative positions are resolved). A ValueError as in the rest of
    jittape, and a TypeError as a call with too few arguments is in Python and JAX."""


class _Signature:
    """How one call's arguments map to kernel inputs."""

    __slots__ = ("treedefs", "kinds")

    def __init__(self, treedefs, kinds):
        self.treedefs = treedefs     # per argument
        self.kinds = kinds           # per leaf: 'array', 'scalar', 'pyfloat' (input) or 'static'


class _Entry:
    """One compiled variant of a signature: the kernel and how to call it.

    Kernel inputs: the flattened arguments, the values read from outside them
    (``implicit``, in the order of the graph's inputs: the variables the function reads
    from its enclosing scope, ``captures``; its captured arrays and floats; its
    ``jt.random`` draws), the array constants. Kernel outputs: the user's results
    (``pack`` makes them the user's structure), the new values of assigned variables
    (``writes``: output index, flattened argument position or the captured Variable),
    the branch conditions (``guards``: output index, the value the variant was traced
    with). ``checks``: what the captured values must be for this variant (see
    ``_capture_checks``).
    """

    def __init__(self, graph, source, built, consts, pack, captures=(), writes=(), guards=()):
        self.graph = graph
        self.source = source
        self.built = built
        self.kernel = built.dispatcher
        self.consts = consts
        self.pack = pack
        self.captures = list(captures)
        self.writes = list(writes)
        self.guards = list(guards)
        self.called = False
        self.user_kernel = None       # what kernel() returns, made on demand
        self.caller = None            # the generated fast-path call (see _caller)
        self.implicit = []
        self.checks = []
        self.capture_text = ""


class Compiled:
    """A function compiled to a gradient (or value and gradient, jacobian, hessian)."""

    def __init__(self, fn, mode, argnums=0, has_aux=False, target="cpu", static_argnums=()):
        if "_stats" in self.__dict__:     # an existing wrapper of the same function (__new__)
            return
        if mode not in _MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if target not in ("cpu", "cuda"):
            raise ValueError(f"target={target!r}: use target='cpu' or target='cuda'")
        if target == "cuda":
            from .codegen import cuda_runtime
            cuda_runtime.available()
        if not callable(fn):
            raise TypeError(f"{mode}: expected a function, got {type(fn).__name__}")
        self.fn = fn
        self.mode = mode
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        if not all(isinstance(a, int) for a in self.argnums) or not self.argnums:
            raise TypeError(f"{mode}: argnums must be an int or a non-empty tuple of ints, "
                            f"got {argnums!r}")
        if len(set(self.argnums)) != len(self.argnums):
            raise ValueError(f"{mode}: argnums={argnums!r} names an argument twice")
        if mode == "function":
            self.argnums = ()                 # nothing is differentiated
        self._resolved = {}                   # positional argument count -> argnums
        static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        if not all(isinstance(a, int) for a in static):
            raise TypeError(f"{mode}: static_argnums must be an int or a tuple of ints, "
                            f"got {static_argnums!r}")
        self.static_argnums = static
        self.has_aux = bool(has_aux)
        self.target = target
        self.name = getattr(fn, "__name__", "f")
        self._cache = {}
        self._fast = {}                   # argument classes -> generated caller
        self._hits = 0
        self._size_keyed = False
        self._lock = threading.RLock()
        self._warned = False              # the recompile warning is given once
        self._last_key = None
        functools.update_wrapper(self, fn)
        self._stats = dict(traces=0, compiles=0, hits=0, disk_hits=0, misses=0)
        config._COMPILED.add(self)
        if self._share is not None:
            with _SHARED_LOCK:
                _SHARED[self._share] = self
                _keep(self._share, self)

    # -- the call path ------------------------------------------------------------------
    def __new__(cls, fn=None, mode=None, argnums=0, has_aux=False, target="cpu",
                static_argnums=()):
        # Wrappers of one function (same code, closure cells, globals, defaults) with the
        # same options are one object: ``jt.grad(loss)(w)`` written in a loop finds the
        # compiled signatures of the previous step (a lookup, no trace, no new class).
        key = _share_key(fn, mode, argnums, has_aux, target, static_argnums) \
            if cls is Compiled else None
        if key is not None:
            with _SHARED_LOCK:
                found = _SHARED.get(key)
                if found is not None:
                    _keep(key, found)
                    return found
        # A class of its own for each compiled function, so that ``_call`` can make the
        # newest signature's generated caller this object's ``__call__``: a call then
        # costs one Python frame around the native kernel.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        self = object.__new__(own)
        self._share = key
        return self

    def __call__(self, *args):
        # The fast path for NumPy arrays and scalars: the generated caller of the
        # signature last used with these argument classes (see ``_caller``).
        n = len(args)
        if n == 2:
            classes = (args[0].__class__, args[1].__class__)
        elif n == 3:
            classes = (args[0].__class__, args[1].__class__, args[2].__class__)
        else:
            classes = tuple(map(type, args))
        caller = self._fast.get(classes)
        if caller is not None:
            return caller(self, *args)
        return self._call(args)

    def _call(self, args):
        """The full path: flatten the arguments, find their signature's variant whose
        guards hold (tracing and compiling one if none does), run it."""
        if core.TRACES and core.current_trace() is not None:   # called while tracing
            return self._inline(args)
        try:
            return self._lookup(args)
        except SizeMismatch:
            if self._size_keyed:
                raise
            return self._retrace_exact(args)

    def _retrace_exact(self, args):
        """A variant traced for this call's sizes does not serve them (see
        ``_size_variant``): from now on the function is keyed on exact sizes, as when
        tracing reads a size, and this call traces for its own sizes. When that trace
        fails too, the arguments do not fit the function: its error names the op and the
        shapes."""
        with self._lock:
            saved = self._cache, self._size_keyed, dict(self._stats)
            self._cache, self._size_keyed = {}, True
            self._forget_callers()
            try:
                return self._lookup(args)
            except BaseException as err:       # nothing of the failed trace is kept
                self._cache, self._size_keyed = saved[:2]
                self._stats.update(saved[2])
                self._forget_callers()
                if isinstance(err, ShapeError):
                    raise SizeMismatch(str(err)) from None
                raise

    def _lookup(self, args):
        key, leaves = self._key(args)
        entry, out, mismatch = None, _MISS, False
        for entry in self._cache.get(key, ()):
            called = entry.called
            try:
                out = self._run(entry, leaves, key[1])
            except SizeMismatch:         # traced for other sizes: another variant may fit
                mismatch = True
                continue
            if out is not _MISS:
                self._hits += called
                break
        if out is _MISS:
            if mismatch:
                entry, out = self._size_variant(key, args, leaves)
            else:
                entry, out = self._new_variant(key, args, leaves)
            key, leaves = self._key(args)
        variants = self._cache[key]
        if variants[0] is not entry:          # the variant used last is tried first
            variants.remove(entry)
            variants.insert(0, entry)
            self._forget_callers()
        result = entry.pack(out)
        if not self.static_argnums and all(_fast_leaf(a) or _fast_tree(a) for a in args):
            caller = entry.caller
            if caller is None:
                caller = entry.caller = _caller(entry, args, Compiled.__call__)
            type(self).__call__ = caller          # the latest signature: the fastest path
            self._fast[_classes(args)] = caller
        return result

    def _run(self, entry, leaves, kinds, trust_guards=False):
        """Run one compiled variant: its outputs, or _MISS when a guard does not hold.
        Assigned variables are written back only when the guards hold."""
        if entry.checks and not trust_guards and not _checks_hold(entry.checks):
            return _MISS                  # captured values this variant was not traced for
        inputs = _inputs(leaves, kinds)
        if entry.implicit:
            inputs += _implicit_inputs(entry.implicit)
        try:
            out = self._call_kernel(entry, inputs)
        except SizeMismatch as err:       # the kernel checks its sizes at once: which one
            message = ir.failed_check(entry.graph, lambda k: np.shape(inputs[k]))
            raise SizeMismatch(message or str(err)) from None
        if not trust_guards:
            for k, expected in entry.guards:
                if bool(out[k]) is not expected:
                    return _MISS
        for k, target in entry.writes:
            variable = leaves[target] if target.__class__ is int else target
            value = out[k]
            variable._value = value if value.__class__ is _ndarray else variable.dtype.type(value)
        return out

    def _call_kernel(self, entry, inputs):
        """The kernel's outputs; its first call compiles it (or loads it from the disk)."""
        if entry.called:
            return _execute(entry, inputs)
        with self._lock:               # the first call compiles (or loads) the kernel
            if entry.called:           # another thread did it while this one waited
                self._hits += 1
                return _execute(entry, inputs)
            out, compiled = build.first_call(entry.built, inputs + list(entry.consts))
            entry.kernel = entry.built.dispatcher
            if self.target == "cpu":
                entry.kernel.disable_compile()     # other types: other signatures
            else:       # the kernels compile at their first launch, from Numba's
                compiled = compiled and not entry.built.from_disk   # cache if it has them
            entry.called = True
            if compiled:
                self._stats["compiles"] += 1
            elif entry.built.from_disk:
                self._stats["disk_hits"] += 1
            return out

    def _size_variant(self, key, args, leaves):
        """No variant of the signature serves these sizes, though the signature is the
        same: a size computed from the arguments' sizes was 1 when they were traced and is
        not now, or code generation chose for the sizes it saw (a row held in registers).
        A variant traced for these sizes is kept beside them. When that trace fails, the
        arguments do not fit the function: its error names the op and the shapes, and
        nothing of it is kept."""
        with self._lock:
            stats = dict(self._stats)
            try:
                return self._new_variant(key, args, leaves, sizes=True)
            except ShapeError as err:
                self._stats.update(stats)
                raise SizeMismatch(str(err)) from None

    def _new_variant(self, key, args, leaves, sizes=False):
        """Trace and compile the variant these arguments take (under the lock: a thread
        that waited for another's compile first tries what that one made)."""
        with self._lock:
            for entry in self._cache.get(key, ()):
                try:
                    out = self._run(entry, leaves, key[1])
                except SizeMismatch:
                    continue
                if out is not _MISS:          # another thread compiled it meanwhile
                    self._hits += 1
                    return entry, out
            entry = self._compile(args, leaves, key)
            key, leaves = self._key(args)          # keyed on sizes if tracing read one
            variants = self._cache.setdefault(key, [])
            same = [e for e in variants if e.source == entry.source]
            if same:
                # captured values changed that do not change the graph; or the kernel
                # computes a branch condition differently from NumPy while tracing
                # (rounding at the threshold): the variant traced for these values is
                # the right one, whatever its guards say
                entry = _reuse(same[0], entry)
                if entry is not same[0]:
                    variants[variants.index(same[0])] = entry
                self._forget_callers()
            else:
                if len(variants) >= config.max_variants:    # drop the variants traced for
                    variants[:] = [e for e in variants       # captured values now gone
                                   if not e.checks or _checks_hold(e.checks)]
                if len(variants) >= config.max_variants:
                    raise JittapeError(at_user_line(
                        f"{self.mode}({self.name}): more than {config.max_variants} variants "
                        "of one signature: each different path through Python branches on "
                        "traced values (if/while) compiles a variant, and so do sizes that "
                        "the variants traced before cannot serve. Compute the choice "
                        "with jt.where, or raise jt.config.max_variants"))
                variants.insert(0, entry)
            self._note_compile(key, sizes)
            return entry, self._run(entry, leaves, key[1], trust_guards=True)

    def _note_compile(self, key, sizes):
        """Warn once when the function has compiled more than
        ``config.recompile_warning`` variants, naming what changed in the last."""
        last, self._last_key = self._last_key, key
        limit = config.recompile_warning
        if self._warned or limit is None or self._stats["misses"] <= limit:
            return
        self._warned = True
        frame = caller_frames(sys._getframe(1))[0]
        message = (f"{self.mode}({self.name}) has traced and compiled "
                   f"{self._stats['misses']} times (more than jt.config.recompile_warning = "
                   f"{limit}); the last time {_signature_change(last, key, sizes)}. Pass "
                   "values that change as NumPy arrays or scalars (run-time inputs), keep "
                   "dtypes and ranks fixed, or compute branches with jt.where")
        if frame is None:
            warnings.warn(message, RecompileWarning, stacklevel=2)
        else:
            warnings.warn_explicit(message, RecompileWarning, frame.f_code.co_filename,
                                   frame.f_lineno, frame.f_globals.get("__name__"),
                                   frame.f_globals.setdefault("__warningregistry__", {}))

    def _inline(self, args):
        """A compiled function called while another function is traced: its function
        (differentiated with a tape for the gradient modes) becomes part of that trace."""
        from .tape import GradientTape, UnconnectedGradients
        if self.mode == "function":
            return self.fn(*args)
        if self.mode not in ("grad", "value_and_grad"):
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}) called inside a compiled function: only "
                "grad, value_and_grad and function compose; use a GradientTape there"))
        args = list(args)
        diff = self._diff(len(args))
        for i in diff:
            args[i] = tree.map_leaves(_as_tensor, args[i])
        with GradientTape() as tape:
            tape.watch([args[i] for i in diff])
            result = self.fn(*args)
        value, aux = result if self.has_aux else (result, None)
        grads = tape.gradient(value, [args[i] for i in diff],
                              unconnected_gradients=UnconnectedGradients.ZERO)
        grads = grads[0] if self.single else tuple(grads)
        if self.mode == "grad":
            return (grads, aux) if self.has_aux else grads
        return ((value, aux), grads) if self.has_aux else (value, grads)

    def _forget_callers(self):
        self._fast.clear()
        if "__call__" in type(self).__dict__:
            del type(self).__call__

    def _key(self, args):
        """(signature key, flattened leaves)."""
        leaves, treedefs, kinds = [], [], []
        parts = []
        diff = self._diff(len(args)) if self.argnums else ()
        static = self._static(len(args)) if self.static_argnums else ()
        for i, a in enumerate(args):
            if i in static:               # a constant of the graph: part of the signature
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(at_user_line(
                        f"{self.mode}({self.name}): argument {i} is in static_argnums but a "
                        f"{type(a).__name__} is not hashable; pass a tuple (or a Python "
                        "number), or make it a run-time argument")) from None
                leaves.append(a)
                treedefs.append(None)
                kinds.append("static")
                parts.append(("static", type(a).__name__, a))
                continue
            if a.__class__ is np.ndarray:
                if not a.dtype.isnative:            # Numba reads native byte order only
                    a = a.astype(a.dtype.newbyteorder("="))
                leaves.append(a)
                treedefs.append(None)
                kinds.append("array")
                parts.append((a.dtype.char, tuple(d == 1 for d in a.shape)) if not self._size_keyed
                             else (a.dtype.char, a.shape))
                continue
            sub, td = tree.flatten(a)
            treedefs.append(None if td.kind == "leaf" else td)
            for leaf in sub:
                kind, part = self._leaf(leaf, i in diff, i)
                if kind == "array" and isinstance(leaf, Tensor):
                    leaf = leaf._value
                elif kind == "array" and leaf.__class__ is not _ndarray:
                    leaf = np.asarray(leaf)
                leaves.append(leaf)
                kinds.append(kind)
                parts.append(part)
        return (tuple(treedefs), tuple(kinds), tuple(parts), config._check_numerics,
                config._parallel), leaves

    def _leaf(self, leaf, differentiated, argnum):
        if not isinstance(leaf, (Tensor, np.ndarray, np.generic)) and _is_device_array(leaf):
            if self.target != "cuda":
                raise UnsupportedError(at_user_line(
                    f"{self.mode}({self.name}): argument {argnum} is a GPU array; compile "
                    "with target='cuda', or copy it to the host"))
            shape = tuple(leaf.shape)
            return "device", (np.dtype(leaf.dtype).char, shape if self._size_keyed
                              else tuple(d == 1 for d in shape))
        if isinstance(leaf, Variable):
            return "variable", ("V", leaf.dtype.char, leaf.shape)
        value = leaf._value if isinstance(leaf, Tensor) else leaf
        if isinstance(value, np.ndarray):
            return "array", (value.dtype.char, value.shape if self._size_keyed
                             else tuple(d == 1 for d in value.shape))
        if isinstance(value, np.generic):
            return "scalar", (value.dtype.char, ())
        if value.__class__ is float:          # a run-time input (a learning rate)
            return "pyfloat", ("f", ())
        if isinstance(value, _STATIC):
            return "static", (type(value).__name__, value)
        if isinstance(value, Tracer):
            raise TracerError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} is a traced value of a function "
                "that is no longer being traced; do not keep traced values"))
        if hasattr(value, "__array__") and not isinstance(leaf, Tracer):
            return "array", self._leaf(np.asarray(value), differentiated, argnum)[1]
        raise UnsupportedError(at_user_line(
            f"{self.mode}({self.name}): argument {argnum} holds a value of type "
            f"{type(leaf).__name__}; arguments must be NumPy arrays or scalars, Python "
            "numbers, jittape tensors, or lists/tuples/dicts of them"))

    # -- compiling ------------------------------------------------------------------------
    def _compile(self, args, leaves, key):
        self._stats["misses"] += 1
        graph, pack, trace = self._trace(args, leaves, key)
        if trace.reads_sizes and not self._size_keyed:
            self._size_keyed = True
            self._cache.clear()
            self._forget_callers()
        entry = self._build(graph, pack)
        entry.captures = [st.variable for st in trace.variables.values() if st.argument is None]
        entry.implicit = list(trace.implicit)
        entry.checks = _capture_checks(trace)
        entry.capture_text = _capture_text(trace, entry.checks)
        return entry

    def _build(self, graph, pack):
        if self.target == "cuda":
            from .codegen import cuda
            source, func = cuda.generate(graph, f"{self.mode} of {self.name}", __version__)
        else:
            source, func = cpu.generate(graph, f"{self.mode} of {self.name}", __version__)
        debug = os.environ.get("JITTAPE_DEBUG", "")
        if debug in ("1", "2"):                # DESIGN.md rule 8: show the IR (and the code)
            print(graph.text(), file=sys.stderr)
            if debug == "2":
                print(source, file=sys.stderr)
        consts = [c.value for c in graph.consts if c.value.ndim > 0]
        # the file is named by the whole text, source lines included: two functions with
        # equal graphs at different lines have different comments in their modules
        # (and by the source: what codegen chose, e.g. parallel loops for large traces)
        built = build.build(source, func, build.digest(graph.text() + source, self.target),
                            _NJIT_OPTIONS if self.target == "cpu" else None)
        return _Entry(graph, source, built, consts, pack, writes=graph.writes,
                      guards=graph.guards)

    def _trace(self, args, leaves, key):
        self._stats["traces"] += 1
        kinds = key[1]
        trace = Trace(self.name)
        trace.reads_sizes = self._size_keyed        # keyed on exact sizes: valid for those only
        diff_inputs = []                   # (argnum, tracer) of differentiated leaves
        diff = self._diff(len(args)) if self.argnums else ()
        with trace:
            traced_args, k, pos = [], 0, 0
            for i, a in enumerate(args):
                td = key[0][i]
                sub = [a] if td is None else tree.flatten(a)[0]
                new = []
                for leaf in sub:
                    kind = kinds[pos]
                    value = leaves[pos]
                    pos += 1
                    if kind == "static":
                        if i in diff:
                            raise TypeError(at_user_line(
                                f"{self.mode}({self.name}): argument {i} is a Python "
                                f"{type(value).__name__}; only floating-point arguments can be "
                                f"differentiated (argnums={self._argnums_text()})"))
                        new.append(value)
                        continue
                    if kind == "variable":
                        if value._id in trace.variables:
                            raise UnsupportedError(at_user_line(
                                f"{self.mode}({self.name}): variable {value.name!r} is passed "
                                "twice; pass each variable once"))
                        state = trace.variable_input(value, argument=pos - 1)
                        k += 1
                        new.append(value)
                        if i in diff:
                            diff_inputs.append((i, Tracer._of(state.input, trace)))
                        continue
                    if kind == "device":           # its values, for guards while tracing
                        from .codegen import cuda_runtime
                        array = cuda_runtime.copy_to_host(value)
                    else:
                        array = np.float64(value) if kind == "pyfloat" else np.asarray(value)
                    self._check_dtype(array.dtype, i)
                    t = trace.add_input(array, k)
                    if kind == "pyfloat":         # never widens a float32 tensor
                        trace.weak.add(t._var.id)
                    k += 1
                    new.append(t)
                    if i in diff:
                        if array.dtype.kind not in "fc":
                            raise TypeError(at_user_line(
                                f"{self.mode}({self.name}): argument {i} has dtype "
                                f"{array.dtype.name}; only floating-point arguments can be "
                                f"differentiated (argnums={self._argnums_text()})"))
                        diff_inputs.append((i, t))
                traced_args.append(new[0] if td is None else tree.unflatten(td, new))
            # gradients come in the order of argnums (a stable sort: leaves in order)
            diff_inputs.sort(key=lambda pair: diff.index(pair[0]))
            trace.captured = _captured_values(self.fn)
            drawn = _global_random_state()
            trace.random_mark = _numpy_random_mark()
            result = self.fn(*traced_args)
            trace.random_mark = None
            if drawn != _global_random_state():
                _warn_global_random(self.fn, self.mode, self.name, trace.random_where)
            if self.mode == "function":
                outputs, pack = _function_outputs(trace, result, self.name, self.target)
            else:
                outputs, pack = self._differentiate(trace, result, diff_inputs, key, args)
            writes, guards = [], []
            for state in trace.variables.values():
                if state.assigned:
                    target = state.variable if state.argument is None else state.argument
                    writes.append((len(outputs), target))
                    outputs.append(state.value)
            for var, value in trace.guards:
                guards.append((len(outputs), value))
                outputs.append(var)
        graph = passes.optimize(trace.graph(outputs))
        graph.writes, graph.guards, graph.check_numerics = writes, guards, key[3]
        graph.parallel = key[4]
        return graph, pack, trace

    def _check_dtype(self, dtype, argnum):
        if dtype.kind == "c":
            from .tensor import complex_error
            raise complex_error(f"{self.mode}({self.name}): argument {argnum}", dtype)
        if dtype.kind not in "biuf":
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype {dtype}; compiled "
                "functions take boolean, integer and floating-point values"))
        if dtype == np.float16:
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype float16, which Numba "
                "cannot compile; cast it to float32 (or use the eager tape)"))
        if not dtype.isnative:
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has non-native byte order "
                f"{dtype.str}; convert it with .astype({dtype.name!r})"))

    def _argnums_text(self):
        return str(self.argnums[0]) if self.single else str(self.argnums)

    def _diff(self, n):
        """The differentiated argument positions for a call with ``n`` positional
        arguments, in the order given (a negative argnum counts from the end, as in JAX)."""
        diff = self._resolved.get(n)
        if diff is None:
            diff = tuple(i + n if i < 0 else i for i in self.argnums)
            bad = [i for i, j in zip(self.argnums, diff) if not 0 <= j < n]
            if bad:
                raise ArgnumsError(at_user_line(
                    f"{self.mode}({self.name}): argnums={self._argnums_text()} is out of range "
                    f"for a call with {n} positional argument{'s' * (n != 1)} (argnum {bad[0]})"))
            if len(set(diff)) != len(diff):
                raise ArgnumsError(at_user_line(
                    f"{self.mode}({self.name}): argnums={self._argnums_text()} names one "
                    f"argument twice for a call with {n} positional argument{'s' * (n != 1)} "
                    f"(resolved: {diff})"))
            self._resolved[n] = diff
        return diff

    def _static(self, n):
        """The positions of ``static_argnums`` for a call with ``n`` positional arguments."""
        static = self._resolved.get(("static", n))
        if static is None:
            static = frozenset(i + n if i < 0 else i for i in self.static_argnums)
            if any(not 0 <= i < n for i in static):
                raise ValueError(at_user_line(
                    f"{self.mode}({self.name}): static_argnums={self.static_argnums} is out of "
                    f"range for a call with {n} positional argument{'s' * (n != 1)}"))
            both = static & set(self._diff(n) if self.argnums else ())
            if both:
                raise ValueError(at_user_line(
                    f"{self.mode}({self.name}): argument {min(both)} is in both argnums and "
                    "static_argnums; a constant cannot be differentiated"))
            self._resolved[("static", n)] = static
        return static

    def _differentiate(self, trace, result, diff_inputs, key, args):
        if self.has_aux:
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(at_user_line(
                    f"{self.mode}({self.name}) with has_aux=True: the function must return "
                    f"a pair (value, aux), got {type(result).__name__}"))
            result, aux = result
        else:
            aux = None
        value = _as_tracer(trace, result, self.mode, self.name)
        if self.mode in ("grad", "value_and_grad") and value._var.ndim != 0:
            raise TypeError(at_user_line(
                f"{self.mode}({self.name}): the function must return a scalar, got a value of "
                f"shape {tuple(int(d) for d in value._var.shape)} (use jt.jacobian for "
                "non-scalar outputs)"))
        if value.dtype.kind not in "fc":
            raise TypeError(at_user_line(
                f"{self.mode}({self.name}): the function's output has dtype "
                f"{value.dtype.name}; only floating-point outputs can be differentiated"))
        if self.mode == "jacobian":
            return _jacobian_outputs(self, trace, value, diff_inputs, aux)
        if self.mode == "hessian":
            return _hessian_outputs(self, trace, value, diff_inputs, aux)
        seed = Tracer._of(trace.const(np.ones((), value.dtype)), trace)   # d value / d value
        cts = autodiff.backward(trace, [(value._var, seed)], [t._var for _, t in diff_inputs])
        grads = [_grad_or_zeros(ct, t) for ct, (_, t) in zip(cts, diff_inputs)]
        # the gradient of a Python float has the value's dtype (a float32 loss: float32),
        # as a watched Python float on the tape would
        grads = [ops.cast(g, value.dtype) if t._var.id in trace.weak and value.dtype.kind == "f"
                 and g.dtype != value.dtype else g for g, (_, t) in zip(grads, diff_inputs)]
        aux_leaves, aux_def = tree.flatten(aux)
        aux_vars = [_as_tracer(trace, a, self.mode, self.name)._var for a in aux_leaves]
        outputs = ([value._var] if self.mode == "value_and_grad" else []) + aux_vars + \
            [g._var for g in grads]
        dtypes = [v.dtype for v in outputs]
        grad_defs = self._grad_structure(key)
        mode, has_aux, single = self.mode, self.has_aux, self.single
        n_aux = len(aux_vars)
        ranks = [v.ndim for v in outputs]
        if not has_aux and all(td is None or _expressible(td, n) for td, n in grad_defs):
            return outputs, _flat_packer(mode, single, dtypes, ranks, self.target, grad_defs)

        def pack(out):
            out = [_numpy(x, dt) for x, dt in zip(out, dtypes)]
            pos = 1 if mode == "value_and_grad" else 0
            aux_value = tree.unflatten(aux_def, out[pos:pos + n_aux])
            grads = _unflatten_grads(grad_defs, out[pos + n_aux:], single)
            if mode == "value_and_grad":
                return ((out[0], aux_value), grads) if has_aux else (out[0], grads)
            return (grads, aux_value) if has_aux else grads

        return outputs, pack

    def _grad_structure(self, key):
        """Per differentiated argument: (its treedef or None for a bare array, leaf count)."""
        out = []
        treedefs, kinds = key[0], key[1]
        counts = [1 if td is None else td.num_leaves for td in treedefs]
        for i in self._diff(len(treedefs)):
            n_inputs = sum(1 for j in range(sum(counts[:i]), sum(counts[:i + 1]))
                           if kinds[j] != "static")
            out.append((treedefs[i], n_inputs))
        return out

    # -- introspection ------------------------------------------------------------------
    def cache_info(self):
        return CacheInfo(**dict(self._stats, hits=self._hits))

    def cache_clear(self):
        """Forget the compiled signatures (the disk cache stays), and whether the
        function is keyed on exact sizes."""
        with self._lock:
            self._cache.clear()
            self._size_keyed = False
            self._forget_callers()

    def _entry_for(self, args):
        """The variant these arguments take, compiled but not run. Without guards a
        signature has one; with guards, tracing with these values tells which."""
        key, leaves = self._key(args)
        variants = self._cache.get(key)
        if (variants and len(variants) == 1 and not variants[0].guards
                and (not variants[0].checks or _checks_hold(variants[0].checks))):
            return variants[0]
        with self._lock:
            entry = self._compile(args, leaves, key)
            key, leaves = self._key(args)
            variants = self._cache.setdefault(key, [])
            same = [e for e in variants if e.source == entry.source]
            if same:
                self._forget_callers()
                entry = _reuse(same[0], entry)
                if entry is not same[0]:
                    variants[variants.index(same[0])] = entry
                return entry
            variants.append(entry)
            return entry

    def lower(self, *args):
        """The optimized graph and the generated source for these arguments, and
        ``python``, the generated function run as plain Python: it takes the flattened
        arguments (0-d values as NumPy scalars) and, as a call of the compiled function
        does, reads the values from outside them (captured arrays and floats, variables
        of the enclosing scope, ``jt.random`` draws) at each call. It checks no guard and
        writes no variable back: it returns the kernel's results."""
        entry = self._entry_for(args)
        text = entry.graph.text()
        if entry.capture_text:               # what is read at each call, guarded, frozen
            text = text.rstrip("\n") + "\n" + entry.capture_text + "\n"
        if entry.implicit:                   # what kernel() takes after the arguments
            text = text.rstrip("\n") + "\n" + _kernel_inputs_text(entry)
        if self.target == "cuda":            # the driver is Python already
            run = entry.built.dispatcher
        else:
            namespace = {}                    # the generated module, run as plain Python
            exec(compile(entry.source, f"<generated {self.name}>", "exec"), namespace)
            run = namespace["kernel" if self.target == "cpu" else "driver"]
        consts, implicit = tuple(entry.consts), entry.implicit
        if implicit:
            return Lowered(text, entry.source,
                           lambda *args: run(*args, *_implicit_inputs(implicit), *consts))
        return Lowered(text, entry.source, lambda *args: run(*args, *consts))

    def kernel(self, *args):
        """The Numba dispatcher for these arguments' signature, callable from njit code.

        It takes the flattened array (and Python float) arguments in order (0-d values
        as NumPy scalars), then the values read from outside them, which the caller
        passes: the current values of the variables the function reads from its
        enclosing scope, its captured arrays and floats, and arrays standing for its
        ``jt.random`` draws, in the order the ``# kernel inputs after the arguments``
        line of ``lower(*args).graph`` names them (none when it has no such line).
        ``lower(*args).python`` takes the arguments alone and reads the rest itself. It
        returns a tuple: ``(value, grad_0, ...)`` for value_and_grad, ``(grad_0, ...)``
        for grad, the flattened results for function; then the new values of assigned
        variables and the branch conditions (see ``lower().graph``). Graph constants that
        are arrays are bound into it.
        """
        entry = self._entry_for(args)
        if self.target == "cuda":          # the host driver that launches the kernels
            return entry.built.dispatcher
        if entry.user_kernel is None:
            # a dispatcher of its own, free to compile for the caller's array layouts
            inner = build.new_dispatcher(entry.built)
            entry.user_kernel = _bind_consts(entry, inner) if entry.consts else inner
        return entry.user_kernel

    def __repr__(self):
        return f"<jittape compiled {self.mode} of {self.name}>"


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
    value, anything else by identity), the bound object of a method, and the options.
    None for a callable that is not a Python function or method. The objects named by
    identity stay alive while the key is in use: the compiled function holds its
    function, which holds them."""
    # a method reads its object's attributes, frozen by a trace: each wrapper traces
    if fn.__class__ is not types.FunctionType or not _reads_nothing_frozen(fn, True, set()):
        return None
    if not all(isinstance(a, int) for a in ((argnums,) if isinstance(argnums, int)
                                            else argnums if isinstance(argnums, (tuple, list))
                                            else (None,))):
        return None                                    # (__init__ says what is wrong)
    if not isinstance(static_argnums, (int, tuple, list)):
        return None
    bound = None
    cells = fn.__closure__
    kwdefaults = fn.__kwdefaults__
    # (and the disk cache in use: as the table of loaded kernels, build._TABLE, does)
    key = (config.disk_cache, os.environ.get("JITTAPE_CACHE_DIR"),
           fn.__code__, id(fn.__globals__), tuple(map(id, cells)) if cells else (),
           _default_key(fn.__defaults__ or ()),
           tuple((k, _default_key((v,))) for k, v in sorted(kwdefaults.items()))
           if kwdefaults else (), bound, mode,
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
    call or guarded (``_captured_values``, for the top-level function) or cannot change
    (library modules, classes, functions that themselves read nothing else). A wrapper
    made anew would trace again and see a changed attribute (``self.s``, ``cfg["s"]``,
    ``module.x``) or a global of a function it calls: sharing must not freeze what a new
    wrapper would have read, so such a function is not shared."""
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
        elif isinstance(v, Compiled):
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


def _signature_change(old, new, sizes=False):
    """What differs between two signature keys, in words (``sizes``: the variant was
    traced for sizes the others could not serve)."""
    if old is None:
        return "the signature was new"
    if sizes:
        return ("the variants traced before could not serve the sizes of the arguments "
                "(a size computed from them was 1 when they were traced, or the code was "
                "generated for the sizes seen)")
    if old == new:
        return ("a Python branch on a traced value (a guard) went the other way for the "
                "same signature")
    if old[0] != new[0] or len(old[2]) != len(new[2]):
        return "the arguments' structure changed (their number, nesting or leaves)"
    counts = [1 if td is None else td.num_leaves for td in new[0]]
    argnum = [i for i, n in enumerate(counts) for _ in range(n)]
    changes = []
    for k, (ka, kb, a, b) in enumerate(zip(old[1], new[1], old[2], new[2])):
        if ka == kb and a == b:
            continue
        where = f"argument {argnum[k]}" + (f" (leaf {k})" if counts[argnum[k]] > 1 else "")
        if ka != kb:
            changes.append(f"{where} changed kind: {_part_text(ka, a)} -> {_part_text(kb, b)}")
            continue
        if ka == "static":
            changes.append(f"{where} is a static value: {a[-1]!r} -> {b[-1]!r}")
            continue
        da, db = a[ka == "variable"], b[ka == "variable"]       # (a Variable's: "V", dtype)
        if da != db:
            changes.append(f"{where} changed dtype: {np.dtype(da).name} -> {np.dtype(db).name}")
        if len(a[-1]) != len(b[-1]):
            changes.append(f"{where} changed rank: {len(a[-1])} -> {len(b[-1])}")
        elif a[-1] == b[-1]:
            continue
        elif all(x.__class__ is bool for x in a[-1] + b[-1]):
            axes = [j for j, (x, y) in enumerate(zip(a[-1], b[-1])) if x != y]
            changes.append(f"{where} has a size-1 dimension where it had none or the reverse "
                           f"(axis {', '.join(map(str, axes))})")
        else:
            changes.append(f"{where} changed size: {a[-1]} -> {b[-1]} (the function is keyed on "
                           "exact sizes: it reads a size while tracing, x.shape or len(x), or "
                           "a size computed from its arguments' sizes was 1)")
    if old[3:5] != new[3:5]:
        changes.append("jt.config.check_numerics or jt.config.parallel changed")
    if old[5:] != new[5:]:
        changes.append("a value read from outside the arguments changed (a guard)")
    return "; ".join(changes) or "the signature changed"


def _part_text(kind, part):
    if kind == "static":
        return f"the static value {part[-1]!r}"
    if kind == "pyfloat":
        return "a Python float"
    if kind == "variable":
        return f"a Variable of dtype {np.dtype(part[1]).name}"
    name = np.dtype(part[0]).name
    return f"{name} of rank {len(part[-1])}" if kind in ("array", "device") else f"a {name} scalar"


def _default_key(values):
    out = []
    for v in values:
        if v.__class__ is float:
            out.append((float, v.hex()))             # -0.0 and 0.0 bake different constants
        elif v is None or v.__class__ in (bool, int, str):
            out.append((v.__class__, v))
        else:
            out.append(("id", id(v)))
    return tuple(out)


def _fast_leaf(a):
    """Whether the fast path takes ``a`` as a kernel argument by its class alone (a
    Python float is a float64 input)."""
    return a.__class__ in _FAST_SCALARS or (a.__class__ is _ndarray and a.ndim > 0)


def _fast_tree(a):
    """Whether ``a`` is a dict, list or tuple (nested) of such leaves only."""
    if a.__class__ is dict:
        return bool(a) and all(_fast_leaf(v) or _fast_tree(v) for v in a.values())
    if a.__class__ in (list, tuple):
        return bool(a) and all(_fast_leaf(v) or _fast_tree(v) for v in a)
    return False


def _access(source, value, names, guard, leaves):
    """Guard conditions and leaf expressions reading ``value`` (found at ``source`` in
    the caller's arguments) as the fast path does: the structure checked on the way, the
    leaves in ``tree.flatten``'s order."""
    cls = value.__class__
    if cls is dict:
        keys = sorted(value, key=tree._sort_key)
        names[f"K{len(names)}"] = frozenset(keys)
        guard.append(f"{source}.__class__ is dict and {source}.keys() == K{len(names) - 1}")
        for k in keys:                    # keys by name: any hashable, whatever its repr
            key = f"K{len(names)}"
            names[key] = k
            _access(f"{source}[{key}]", value[k], names, guard, leaves)
    elif cls in (list, tuple):
        guard.append(f"{source}.__class__ is {cls.__name__} and len({source}) == {len(value)}")
        for j, item in enumerate(value):
            _access(f"{source}[{j}]", item, names, guard, leaves)
    else:
        name = f"C{len(names)}"
        names[name] = cls
        guard.append(f"{source}.__class__ is {name}")
        leaves.append(source)


def _classes(args):
    """The fast path's key (as ``__call__`` spells it out for two and three arguments)."""
    return tuple(map(type, args)) if len(args) not in (2, 3) else tuple(a.__class__ for a in args)


class _Miss:
    def __repr__(self):
        return "<a guard did not hold>"


_MISS = _Miss()


def _execute(entry, inputs):
    """Call an entry's kernel on arguments of its signature; Numba compiles a new
    specialization only for a new memory layout (non-contiguous arrays)."""
    return build.call_shared(entry.kernel, list(inputs) + list(entry.consts))


def _inputs(leaves, kinds):
    out = []
    for leaf, kind in zip(leaves, kinds):
        if kind == "array":
            out.append(leaf if leaf.ndim else leaf[()])
        elif kind == "variable":
            out.append(leaf._value)
        elif kind != "static":                  # a NumPy scalar, a Python float, a GPU array
            out.append(leaf)
    return out


# -- values read from outside the arguments -------------------------------------------

# what a captured value may be to be read at each call or guarded (hashable values are
# compared by value; anything else the function reads was frozen when it was traced)
_GUARDED = (bool, int, float, str, bytes, type(None), tuple, np.integer, np.bool_, np.floating)
# functions are guarded by identity (what they compute went into the graph); their own
# globals stay frozen (see the module docstring)
_BY_IDENTITY = (types.FunctionType, types.MethodType, functools.partial)


def _captured_values(fn):
    """The values ``fn`` reads from its closure cells and from the globals it names (the
    names of its nested code objects too: lambdas, comprehensions; not those of the
    functions it calls), for the trace (``trace.CapturedValues``); None for a callable
    that is not a Python function."""
    while isinstance(fn, Compiled):
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
        value = scope.get(name, _MISSING)
        if value is not _MISSING and _capturable(value):
            captures.append(Captured(name, scope, name, value))
    return CapturedValues(captures, codes, literals)


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
    if isinstance(value, (Compiled,) + _BY_IDENTITY):   # a helper it calls: rebinding
        return True                                # the name to another one traces again
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
    ``float``/``scalar``: an input, of its
    class; ``value``: a constant of the graph (an int, a string, a float that is not an
    operand of the function's own ops), of its class and in a set of values that all
    trace to this graph; ``same``: an array or tensor used otherwise than as an operand
    (its values went into the graph), that very object."""
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
        elif v.__class__ is _ndarray or isinstance(v, (Tensor, Compiled) + _BY_IDENTITY):
            checks.append((c, "same", v))
        else:
            checks.append((c, "value", (v.__class__, {v})))
    return checks


def _checks_hold(checks):
    """Whether the captured values are what a variant was traced for (the full path;
    ``_caller`` spells the same checks out for the fast path)."""
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
        if how in ("array", "float", "scalar"):
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


def _warn_global_random(fn, mode, name, op_line=None):
    """Once per line: the trace drew from np.random / random, so its numbers are
    constants of the compiled code. The warning points to the first op traced after
    NumPy's generator moved (``op_line``), else to the line calling the function."""
    from .errors import user_frame
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


def _as_tracer(trace, x, mode, name):
    if isinstance(x, Tracer):
        return x
    if isinstance(x, (Tensor, np.ndarray, np.generic, bool, int, float)):
        value = x._value if isinstance(x, Tensor) else np.asarray(x)
        if isinstance(x, float):
            value = np.float32(x)
        return Tracer._of(trace.const(np.asarray(value)), trace)
    raise TypeError(at_user_line(
        f"{mode}({name}): the function returned a value of type {type(x).__name__}; it must "
        "return a jittape tensor (or a NumPy value)"))


def _is_device_array(x):
    """A GPU array (``__cuda_array_interface__``, or the CUDA simulator's arrays)."""
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def _as_tensor(x):
    """A leaf of a differentiated argument, as a tensor a tape can watch."""
    if isinstance(x, Tensor):
        return x
    return Tensor(np.float32(x) if isinstance(x, float) else x)


def _function_outputs(trace, result, name, target):
    """Outputs and a packer for ``function``: the result's structure with its tensors
    (and NumPy values) as kernel outputs; other leaves (Python values) are kept as they
    were while tracing."""
    leaves, treedef = tree.flatten(result)
    outputs, slots, statics = [], [], {}
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, (Tensor, np.ndarray, np.generic)):
            var = trace.var_of(leaf)
            slots.append(len(outputs))
            outputs.append(var)
        elif isinstance(leaf, (bool, int, float, str, bytes)) or leaf is None:
            slots.append(None)
            statics[k] = leaf
        else:
            raise TypeError(at_user_line(
                f"function({name}): the function returned a value of type "
                f"{type(leaf).__name__}; results must be tensors, NumPy values, Python "
                "numbers or strings, or lists/tuples/dicts of them"))
    dtypes = [v.dtype for v in outputs]
    ranks = [v.ndim for v in outputs]
    if treedef.kind == "leaf" and not statics:
        names = {}
        body = "out[0]" if ranks[0] else _scalar_code("out[0]", dtypes[0], names, target)
        return outputs, _expr_packer(body, names)

    def pack(out):
        values = [statics[k] if slot is None else _numpy(out[slot], dtypes[slot])
                  for k, slot in enumerate(slots)]
        return tree.unflatten(treedef, values)

    return outputs, pack


def _grad_or_zeros(ct, t):
    if ct is None:                      # a symbolic zero, materialized at the boundary
        return ops.zeros_like(t)
    if ct.dtype != t.dtype:
        ct = ops.cast(ct, t.dtype)
    return ct


def _expressible(td, count):
    """Whether gradients of this structure can be built by one expression (dicts, lists,
    tuples and leaves, every leaf differentiable)."""
    if td.kind == "leaf":
        return True
    return (td.kind in ("dict", "list", "tuple") and td.num_leaves == count
            and all(_expressible(c, c.num_leaves) for c in td.children))


def _tree_code(td, items, names):
    """Source building the structure ``td`` from the item sources (consumed in order);
    dict keys are bound in ``names``."""
    if td.kind == "leaf":
        return items.pop(0)
    parts = [_tree_code(c, items, names) for c in td.children]
    if td.kind == "dict":
        keys = []
        for k in td.meta:
            keys.append(f"KEY{len(names)}")
            names[keys[-1]] = k
        return "{" + ", ".join(f"{k}: {p}" for k, p in zip(keys, parts)) + "}"
    if td.kind == "list":
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _flat_packer(mode, single, dtypes, ranks, target, grad_defs=None):
    """A packer written out as one expression (it runs every call): results as they
    are, 0-d ones as NumPy scalars, gradients of nested arguments (``grad_defs``) rebuilt
    as dict, list and tuple displays.

    The expression is kept (``pack.expr``, over ``out``, with the names in
    ``pack.names``) so that ``_caller`` can inline it after the kernel call.
    """
    names = {}
    items = []
    for k, (dt, rank) in enumerate(zip(dtypes, ranks)):
        items.append(f"out[{k}]" if rank else _scalar_code(f"out[{k}]", dt, names, target))
    if mode == "value_and_grad":
        value, grads = items[0], items[1:]
    else:
        value, grads = None, items
    if grad_defs and any(td is not None for td, _ in grad_defs):
        grads = [_tree_code(td, grads, names) if td is not None else grads.pop(0)
                 for td, _ in grad_defs]
    grads_code = grads[0] if single else "(" + ", ".join(grads) + ("," if len(grads) == 1 else "") + ")"
    body = f"({value}, {grads_code})" if value is not None else grads_code
    return _expr_packer(body, names)


def _expr_packer(body, names):
    """A packer returning the expression ``body`` over ``out`` (with ``names``)."""
    source = f"def pack(out):\n    return {body}\n"
    exec(compile(source, "<jittape packer>", "exec"), names)
    pack = names.pop("pack")
    names.pop("__builtins__", None)
    pack.expr, pack.names = body, names
    return pack


def _scalar_code(x, dtype, names, target="cpu"):
    """Source turning a Numba result (a Python number for a 0-d value) into a NumPy scalar
    of ``dtype``. For floats, a product with a typed 1: NumPy keeps the typed operand's
    dtype (a Python float is weak), the value is exact (it came from that dtype), and it
    costs a third of ``np.float32(x)``. On the CUDA target a 0-d result computed on
    device arguments is a device array, and stays one."""
    dtype = np.dtype(dtype)
    if target == "cuda":
        names["numpy_result"], names[f"DTYPE_{dtype.name}"] = _numpy, dtype
        return f"numpy_result({x}, DTYPE_{dtype.name})"
    if dtype.kind == "f":
        names[f"ONE_{dtype.name}"] = dtype.type(1)
        return f"ONE_{dtype.name} * {x}"
    names[f"T_{dtype.name}"] = dtype.type
    return f"T_{dtype.name}({x})"


class _Missing:
    def __repr__(self):
        return "<no argument>"


_MISSING = _Missing()


def _caller(entry, args, generic):
    """The generated fast path of one signature whose arguments are all NumPy arrays and
    scalars: a ``__call__`` that checks the argument classes, calls the kernel on them,
    the captured variables' values and the entry's array constants, checks the guards,
    writes assigned variables back and packs the results, in one Python frame.

    Numba checks dtypes and ranks (it compiles nothing new for a kernel: a mismatch is a
    TypeError) and the kernel checks the rest of its signature (SignatureMismatch) and
    its sizes (SizeMismatch); any of them, or a guard that does not hold, sends the call
    down the full path (``_call``), which raises what applies. Other
    argument classes go to ``generic`` (``Compiled.__call__``), which finds their own
    caller.
    """
    n = len(args)
    names = [f"a{k}" for k in range(n)]
    consts = [f"c{k}" for k in range(len(entry.consts))]
    namespace = dict(zip(consts, entry.consts), kernel=entry.kernel, pack=entry.pack,
                     generic=generic, SignatureMismatch=SignatureMismatch,
                     SizeMismatch=SizeMismatch)
    namespace.update((f"V{k}", v) for k, v in enumerate(entry.captures))
    guard, leaves, checks = [], [], {}
    for k, a in enumerate(args):
        _access(f"a{k}", a, checks, guard, leaves)
    namespace.update(checks)
    captured, held = _implicit_code(entry, namespace)
    guard += held
    expr = getattr(entry.pack, "expr", None)
    if expr is None:
        expr = "pack(out)"
    else:
        namespace.update(entry.pack.names)
    # Positional parameters with a default that fails the guard: an exact-arity call
    # builds no argument tuple.
    params = "".join(f"{a}=_MISSING, " for a in names)
    given = f"[a for a in ({', '.join(names)}{',' if n == 1 else ''}) if a is not _MISSING] + list(rest)"
    namespace["_MISSING"] = _MISSING
    tuple_args = f"({', '.join(names)}{',' if n == 1 else ''})"
    lines = [f"def __call__(self, {params}*rest):",
             f"    if {' and '.join(guard + ['not rest'])}:",
             "        try:",
             f"            out = kernel({', '.join(leaves + captured + consts)})",
             "        except (TypeError, SignatureMismatch, SizeMismatch):",
             f"            return self._call({tuple_args})"]
    if entry.guards:
        held = " and ".join(f"out[{k}]" if value else f"not out[{k}]"
                            for k, value in entry.guards)
        lines += [f"        if not ({held}):      # another branch: another variant",
                  f"            return self._call({tuple_args})"]
    for k, variable in entry.writes:            # captured variables only
        name = f"V{[c is variable for c in entry.captures].index(True)}"   # (arguments are
        # not NumPy arrays: a call with a Variable argument has no fast path)
        if variable.ndim:
            lines.append(f"        {name}._value = out[{k}]")
        else:
            namespace[f"T{k}"] = variable.dtype.type
            lines.append(f"        {name}._value = T{k}(out[{k}])")
    top = " and ".join([f"a{k}.__class__ is A{k}" for k in range(n)] + ["True"])
    namespace.update((f"A{k}", a.__class__) for k, a in enumerate(args))
    lines += ["        self._hits += 1",
              f"        return {expr}",
              f"    if {top} and not rest:        # the same classes, another structure inside",
              f"        return self._call({tuple_args})",
              f"    return generic(self, *({given}))"]
    exec(compile("\n".join(lines) + "\n", "<jittape caller>", "exec"), namespace)
    return namespace["__call__"]


def _implicit_code(entry, namespace):
    """For ``_caller``: the kernel arguments that read the values from outside the
    arguments (captured variables, arrays and floats, random draws) and the conditions
    the captured values must meet (``_checks_hold``, spelled out: a load, a class test,
    a set lookup or an identity test each). Names go into ``namespace``."""
    conditions, reads = [], {}
    for j, (c, how, what) in enumerate(entry.checks):
        namespace[f"Q{j}"] = c.where
        read = f"Q{j}.cell_contents" if c.key is None else f"Q{j}[{c.key!r}]"
        if how == "array":                 # its dtype: Numba checks it
            # the array it was traced with (the entry held it as a constant before)
            # passes on one identity test; another one of an accepted shape on more
            namespace[f"QK{j}"], namespace["ndarray"] = c.value, _ndarray
            namespace[f"QS{j}"] = what[1]       # (a set that grows: see _merge_checks)
            conditions.append(f"((q{j} := {read}) is QK{j} or (q{j}.__class__ is ndarray "
                              f"and q{j}.shape in QS{j}))")
            reads[id(c)] = f"q{j}" + ("" if c.value.ndim else "[()]")
        elif how == "same":
            namespace[f"QV{j}"] = what
            conditions.append(f"{read} is QV{j}")
        else:
            if how == "value":                # the traced object: one identity test
                namespace[f"QK{j}"], namespace[f"QC{j}"] = c.value, what[0]
                namespace[f"QS{j}"] = what[1]       # (a set that grows: see _merge_checks)
                conditions.append(f"((q{j} := {read}) is QK{j} or (q{j}.__class__ is QC{j} "
                                  f"and q{j} in QS{j}))")
            else:
                namespace[f"QC{j}"] = what
                conditions.append(f"(q{j} := {read}).__class__ is QC{j}")
            reads[id(c)] = f"q{j}"
    exprs = []
    for src in entry.implicit:
        if isinstance(src, Variable):
            exprs.append(f"V{[v is src for v in entry.captures].index(True)}._value")
        elif isinstance(src, RandomDraw):
            namespace[f"R{len(exprs)}"] = src.read
            exprs.append(f"R{len(exprs)}()")
        else:
            exprs.append(reads[id(src)])
    return exprs, conditions


def _numpy(x, dtype):
    """A kernel result for the user: arrays (host or device) as they are, scalars typed."""
    if isinstance(x, np.ndarray) or _is_device_array(x):
        return x
    return dtype.type(x)


def _unflatten_grads(grad_defs, flat, single):
    out, pos = [], 0
    for td, n in grad_defs:
        part = flat[pos:pos + n]
        pos += n
        out.append(part[0] if td is None else tree.unflatten(td, part))
    return out[0] if single else tuple(out)


def _bind_consts(entry, inner):
    """The kernel with its array constants bound (Numba freezes them into the code)."""
    import numba
    args = [f"a{k}" for k in range(len(entry.graph.inputs))]
    consts = [f"c{k}" for k in range(len(entry.consts))]
    namespace = dict(zip(consts, entry.consts), inner=inner)
    source = (f"def bound({', '.join(args)}):\n"
              f"    return inner({', '.join(args + consts)})\n")
    exec(compile(source, "<jittape kernel with constants>", "exec"), namespace)
    return numba.njit(**_NJIT_OPTIONS)(namespace["bound"])


def _jacobian_outputs(compiled, trace, value, diff_inputs, aux):
    """Outputs d value / d x_j, each of shape value.shape + x_j.shape."""
    wrt = [t for _, t in diff_inputs]
    rows = autodiff.jacobian_rows(trace, value, wrt)
    jacs = [ops.reshape(r, tuple(value._var.shape) + tuple(t._var.shape))
            for r, t in zip(rows, wrt)]
    return _structured_outputs(compiled, trace, jacs, aux, [len(jacs)])


def _hessian_outputs(compiled, trace, value, diff_inputs, aux):
    """Outputs d2 value / d x_i d x_j (nested like JAX: H[i][j] for tuple argnums)."""
    if value._var.ndim != 0:
        raise TypeError(at_user_line(
            f"hessian({compiled.name}): the function must return a scalar, got shape "
            f"{tuple(int(d) for d in value._var.shape)}"))
    wrt = [t for _, t in diff_inputs]
    seed = Tracer._of(trace.const(np.ones((), value.dtype)), trace)
    grads = [_grad_or_zeros(ct, t) for ct, t in zip(
        autodiff.backward(trace, [(value._var, seed)], [t._var for t in wrt]), wrt)]
    flat = ops.concatenate([ops.reshape(g, (-1,)) for g in grads]) if len(grads) > 1 \
        else ops.reshape(grads[0], (-1,))
    rows = autodiff.jacobian_rows(trace, flat, wrt)
    blocks, start = [], 0
    for g in grads:
        size = 1
        for d in g._var.shape:
            size = size * d
        stop = start + size
        for r, t in zip(rows, wrt):
            part = r if len(grads) == 1 else r[start:stop]
            blocks.append(ops.reshape(part, tuple(g._var.shape) + tuple(t._var.shape)))
        start = stop
    return _structured_outputs(compiled, trace, blocks, aux, [len(wrt)] * len(grads))


def _structured_outputs(compiled, trace, results, aux, groups):
    """Outputs and a packer for jacobian/hessian results (one level per argnums tuple)."""
    aux_leaves, aux_def = tree.flatten(aux)
    aux_vars = [_as_tracer(trace, a, compiled.mode, compiled.name)._var for a in aux_leaves]
    outputs = [r._var for r in results] + aux_vars
    dtypes = [v.dtype for v in outputs]
    n = len(results)
    single, has_aux, nested = compiled.single, compiled.has_aux, compiled.mode == "hessian"

    def pack(out):
        out = [_numpy(x, dt) for x, dt in zip(out, dtypes)]
        res = out[:n]
        if nested:                       # H[i][j]
            width = groups[0]
            res = [tuple(res[i * width:(i + 1) * width]) for i in range(len(groups))]
            res = res[0][0] if single else tuple(res)
        else:
            res = res[0] if single else tuple(res)
        if has_aux:
            return res, tree.unflatten(aux_def, out[n:])
        return res

    return outputs, pack


# -- the public decorators ---------------------------------------------------------------

def _decorator(mode):
    def make(fn=None, argnums=0, has_aux=False, target="cpu", static_argnums=()):
        if fn is None:
            return lambda f: Compiled(f, mode, argnums, has_aux, target, static_argnums)
        return Compiled(fn, mode, argnums, has_aux, target, static_argnums)
    make.__name__ = mode
    make.__doc__ = (f"Compile ``fn`` to its {mode.replace('_', ' ')} (see API.md). The "
                    "arguments named in ``static_argnums`` are constants of the compiled "
                    "code (part of its signature, hashable) rather than run-time inputs.")
    return make


def function(fn=None, target="cpu", static_argnums=()):
    """Compile ``fn`` as it is: tapes, gradients and ``Variable.assign*`` inside it run
    in the compiled code, and variables it reads from its enclosing scope become inputs
    (their assignments are written back after each call). The arguments named in
    ``static_argnums`` are constants of the compiled code (part of its signature,
    hashable) rather than run-time inputs. See API.md."""
    if fn is None:
        return lambda f: Compiled(f, "function", target=target, static_argnums=static_argnums)
    return Compiled(fn, "function", target=target, static_argnums=static_argnums)


grad = _decorator("grad")
value_and_grad = _decorator("value_and_grad")
jacobian = _decorator("jacobian")
hessian = _decorator("hessian")
