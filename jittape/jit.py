"""Compiled functions: ``grad``, ``value_and_grad``, ``jacobian``, ``hessian``, ``function``.

A call looks up its signature (argument structure, dtypes, ranks, which axes have size
1, and the values of Python ``int``/``bool``/``float``/``str`` arguments that are not
differentiated) in a dict. On a miss it traces the function (``trace``), differentiates
the graph (``autodiff``), optimizes it (``passes``), generates a Numba function
(``codegen.cpu``), and builds it through the disk cache (``codegen.build``). Sizes are
not part of the signature: the generated code reads them from the arrays, so one
compile serves every batch size. A function that reads a size while tracing
(``x.shape[0]``) is keyed on exact sizes instead, so a graph never reuses a stale one.

Python scalars: a differentiated ``float`` argument is a float32 input; any other
Python number is part of the signature (a new value traces and compiles again, as in
``tf.function``), so pass values that change every call (a learning rate in a schedule)
as NumPy scalars or arrays, which are run-time inputs.

``function`` compiles a function as it is. Tapes opened in it record into the trace
(``tape.record_traced``) and their ``gradient``/``jacobian`` run the autodiff pass over
the nodes they recorded. Variables it reads from its enclosing scope become inputs (the
compiled function holds them, as ``tf.function`` does), Variables passed as arguments
too; ``assign``/``assign_add``/``assign_sub`` make the new values outputs, written back
to the variables after the call, so a training step is one native call.

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

import numpy as np

from . import autodiff, ir, ops, passes, tree
from ._version import __version__
from .codegen import build, cpu
from . import config
from .errors import JittapeError, SignatureMismatch, SizeMismatch, UnsupportedError, at_user_line
from .ops import core
from .tensor import Tensor, Variable
from .trace import Trace, Tracer, TracerError

CacheInfo = collections.namedtuple("CacheInfo", "traces compiles hits disk_hits misses")
Lowered = collections.namedtuple("Lowered", "graph source python")
Lowered.__doc__ = """What ``lower()`` returns: ``graph`` (the optimized op list as text),
``source`` (the generated module) and ``python`` (the generated function run as plain
Python, without Numba: kernel arguments in, kernel results out; for debugging)."""

_MODES = ("grad", "value_and_grad", "jacobian", "hessian", "function")
_ndarray = np.ndarray
_NUMPY_SCALARS = frozenset([np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                            np.int64, np.uint8, np.bool_])
_STATIC = (bool, int, float, str)
# no_cfunc_wrapper: kernels are called from Python and from njit code, never as
# first-class function values, so Numba need not make (and compile) their C wrapper
_NJIT_OPTIONS = {"error_model": "numpy", "nogil": True, "no_cfunc_wrapper": True}


class _Signature:
    """How one call's arguments map to kernel inputs."""

    __slots__ = ("treedefs", "kinds")

    def __init__(self, treedefs, kinds):
        self.treedefs = treedefs     # per argument
        self.kinds = kinds           # per leaf: 'array', 'scalar', 'pyfloat' (input) or 'static'


class _Entry:
    """One compiled variant of a signature: the kernel and how to call it.

    Kernel inputs: the flattened arguments, the values of the variables the function
    reads from its enclosing scope (``captures``), the array constants. Kernel outputs:
    the user's results (``pack`` makes them the user's structure), the new values of
    assigned variables (``writes``: output index, flattened argument position or the
    captured Variable), the branch conditions (``guards``: output index, the value the
    variant was traced with).
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


class Compiled:
    """A function compiled to a gradient (or value and gradient, jacobian, hessian)."""

    def __init__(self, fn, mode, argnums=0, has_aux=False, target="cpu"):
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
        if mode == "function":
            self.argnums = ()                 # nothing is differentiated
        self.has_aux = bool(has_aux)
        self.target = target
        self.name = getattr(fn, "__name__", "f")
        self._cache = {}
        self._fast = {}                   # argument classes -> generated caller
        self._hits = 0
        self._size_keyed = False
        self._lock = threading.RLock()
        self._stats = dict(traces=0, compiles=0, hits=0, disk_hits=0, misses=0)
        functools.update_wrapper(self, fn)
        config._COMPILED.add(self)

    # -- the call path ------------------------------------------------------------------
    def __new__(cls, *args, **kwargs):
        # A class of its own for each compiled function, so that ``_call`` can make the
        # newest signature's generated caller this object's ``__call__``: a call then
        # costs one Python frame around the native kernel.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        return object.__new__(own)

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
        key, leaves = self._key(args)
        entry, out = None, _MISS
        for entry in self._cache.get(key, ()):
            called = entry.called
            out = self._run(entry, leaves, key[1])
            if out is not _MISS:
                self._hits += called
                break
        if out is _MISS:
            entry, out = self._new_variant(key, args, leaves)
            key, leaves = self._key(args)
        variants = self._cache[key]
        if variants[0] is not entry:          # the variant used last is tried first
            variants.remove(entry)
            variants.insert(0, entry)
            self._forget_callers()
        result = entry.pack(out)
        if all(_fast_leaf(a) or _fast_tree(a) for a in args):
            caller = entry.caller
            if caller is None:
                caller = entry.caller = _caller(entry, args, Compiled.__call__)
            type(self).__call__ = caller          # the latest signature: the fastest path
            self._fast[_classes(args)] = caller
        return result

    def _run(self, entry, leaves, kinds, trust_guards=False):
        """Run one compiled variant: its outputs, or _MISS when a guard does not hold.
        Assigned variables are written back only when the guards hold."""
        inputs = _inputs(leaves, kinds) + [v._value for v in entry.captures]
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
                compiled = not entry.built.from_disk     # cache if it has them
            entry.called = True
            if compiled:
                self._stats["compiles"] += 1
            elif entry.built.from_disk:
                self._stats["disk_hits"] += 1
            return out

    def _new_variant(self, key, args, leaves):
        """Trace and compile the variant these arguments take (under the lock: a thread
        that waited for another's compile first tries what that one made)."""
        with self._lock:
            for entry in self._cache.get(key, ()):
                out = self._run(entry, leaves, key[1])
                if out is not _MISS:          # another thread compiled it meanwhile
                    self._hits += 1
                    return entry, out
            entry = self._compile(args, leaves, key)
            key, leaves = self._key(args)          # keyed on sizes if tracing read one
            variants = self._cache.setdefault(key, [])
            same = [e for e in variants if e.source == entry.source]
            if same:
                # the kernel computes a branch condition differently from NumPy while
                # tracing (rounding at the threshold): the variant traced for these
                # values is the right one, whatever its guards say
                entry = same[0]
            else:
                if len(variants) >= config.max_variants:
                    raise JittapeError(at_user_line(
                        f"{self.mode}({self.name}): more than {config.max_variants} variants "
                        "of one signature: each different path through Python branches on "
                        "traced values (if/while) compiles a variant. Compute the choice "
                        "with jt.where, or raise jt.config.max_variants"))
                variants.insert(0, entry)
            return entry, self._run(entry, leaves, key[1], trust_guards=True)

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
        for i in self.argnums:
            args[i] = tree.map_leaves(_as_tensor, args[i])
        with GradientTape() as tape:
            tape.watch([args[i] for i in self.argnums])
            result = self.fn(*args)
        value, aux = result if self.has_aux else (result, None)
        grads = tape.gradient(value, [args[i] for i in self.argnums],
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
        diff = self.argnums
        for i, a in enumerate(args):
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
        if isinstance(value, float) and differentiated:
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
        diff_inputs = []                   # (argnum, tracer) of differentiated leaves
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
                        if i in self.argnums:
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
                        if i in self.argnums:
                            diff_inputs.append((i, Tracer._of(state.input, trace)))
                        continue
                    if kind == "device":           # its values, for guards while tracing
                        from .codegen import cuda_runtime
                        array = cuda_runtime.copy_to_host(value)
                    else:
                        array = np.float32(value) if kind == "pyfloat" else np.asarray(value)
                    self._check_dtype(array.dtype, i)
                    t = trace.add_input(array, k)
                    k += 1
                    new.append(t)
                    if i in self.argnums:
                        if array.dtype.kind not in "fc":
                            raise TypeError(at_user_line(
                                f"{self.mode}({self.name}): argument {i} has dtype "
                                f"{array.dtype.name}; only floating-point arguments can be "
                                f"differentiated (argnums={self._argnums_text()})"))
                        diff_inputs.append((i, t))
                traced_args.append(new[0] if td is None else tree.unflatten(td, new))
            for i in (self.argnums if self.mode != "function" else ()):
                if i >= len(args) or i < -len(args):
                    raise TypeError(at_user_line(
                        f"{self.mode}({self.name}): argnums={self._argnums_text()} but the "
                        f"function was called with {len(args)} positional arguments"))
            result = self.fn(*traced_args)
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
        if dtype.kind not in "biufc":
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype {dtype}; compiled "
                "functions take boolean, integer, floating-point and complex values"))
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
        for i in self.argnums:
            n_inputs = sum(1 for j in range(sum(counts[:i]), sum(counts[:i + 1]))
                           if kinds[j] != "static")
            out.append((treedefs[i], n_inputs))
        return out

    # -- introspection ------------------------------------------------------------------
    def cache_info(self):
        return CacheInfo(**dict(self._stats, hits=self._hits))

    def cache_clear(self):
        """Forget the compiled signatures (the disk cache stays)."""
        with self._lock:
            self._cache.clear()
            self._forget_callers()

    def _entry_for(self, args):
        """The variant these arguments take, compiled but not run. Without guards a
        signature has one; with guards, tracing with these values tells which."""
        key, leaves = self._key(args)
        variants = self._cache.get(key)
        if variants and len(variants) == 1 and not variants[0].guards:
            return variants[0]
        with self._lock:
            entry = self._compile(args, leaves, key)
            key, leaves = self._key(args)
            variants = self._cache.setdefault(key, [])
            same = [e for e in variants if e.source == entry.source]
            if same:
                return same[0]
            variants.append(entry)
            return entry

    def lower(self, *args):
        """The optimized graph and the generated source for these arguments."""
        entry = self._entry_for(args)
        if self.target == "cuda":            # the driver is Python already
            driver, consts = entry.built.dispatcher, tuple(entry.consts)
            return Lowered(entry.graph.text(), entry.source,
                           lambda *args: driver(*args, *consts))
        namespace = {}                        # the generated module, run as plain Python
        exec(compile(entry.source, f"<generated {self.name}>", "exec"), namespace)
        py_func = namespace["kernel" if self.target == "cpu" else "driver"]
        consts = tuple(entry.consts)
        return Lowered(entry.graph.text(), entry.source,
                       lambda *args: py_func(*args, *consts))

    def kernel(self, *args):
        """The Numba dispatcher for these arguments' signature, callable from njit code.

        It takes the flattened array arguments in order (0-d values as scalars), then
        the values of the variables the function reads from its enclosing scope, and
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
            import numba
            options = {k: v for k, v in entry.built.dispatcher.targetoptions.items()
                       if k not in ("cache", "nopython")}   # (njit sets nopython itself)
            inner = numba.njit(cache=entry.built.cached, **options)(
                entry.built.dispatcher.py_func)
            entry.user_kernel = _bind_consts(entry, inner) if entry.consts else inner
        return entry.user_kernel

    def __repr__(self):
        return f"<jittape compiled {self.mode} of {self.name}>"


def _fast_leaf(a):
    """Whether the fast path takes ``a`` as a kernel argument by its class alone."""
    return a.__class__ in _NUMPY_SCALARS or (a.__class__ is _ndarray and a.ndim > 0)


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
    try:
        return entry.kernel(*inputs, *entry.consts)
    except TypeError:
        if not hasattr(entry.kernel, "disable_compile"):    # a CUDA driver: a real error
            raise
        with _LAYOUT_LOCK:
            entry.kernel.disable_compile(False)
            try:
                return entry.kernel(*inputs, *entry.consts)
            finally:
                entry.kernel.disable_compile()


_LAYOUT_LOCK = threading.Lock()


def _inputs(leaves, kinds):
    out = []
    for leaf, kind in zip(leaves, kinds):
        if kind == "array":
            out.append(leaf if leaf.ndim else leaf[()])
        elif kind == "scalar":
            out.append(leaf)
        elif kind == "pyfloat":
            out.append(np.float32(leaf))
        elif kind == "variable":
            out.append(leaf._value)
        elif kind == "device":
            out.append(leaf)
    return out


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
    captured = [f"V{k}._value" for k in range(len(entry.captures))]
    namespace = dict(zip(consts, entry.consts), kernel=entry.kernel, pack=entry.pack,
                     generic=generic, SignatureMismatch=SignatureMismatch,
                     SizeMismatch=SizeMismatch)
    namespace.update((f"V{k}", v) for k, v in enumerate(entry.captures))
    guard, leaves, checks = [], [], {}
    for k, a in enumerate(args):
        _access(f"a{k}", a, checks, guard, leaves)
    namespace.update(checks)
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
    def make(fn=None, argnums=0, has_aux=False, target="cpu"):
        if fn is None:
            return lambda f: Compiled(f, mode, argnums, has_aux, target)
        return Compiled(fn, mode, argnums, has_aux, target)
    make.__name__ = mode
    make.__doc__ = f"Compile ``fn`` to its {mode.replace('_', ' ')} (see API.md)."
    return make


def function(fn=None, target="cpu"):
    """Compile ``fn`` as it is: tapes, gradients and ``Variable.assign*`` inside it run
    in the compiled code, and variables it reads from its enclosing scope become inputs
    (their assignments are written back after each call). See API.md."""
    if fn is None:
        return lambda f: Compiled(f, "function", target=target)
    return Compiled(fn, "function", target=target)


grad = _decorator("grad")
value_and_grad = _decorator("value_and_grad")
jacobian = _decorator("jacobian")
hessian = _decorator("hessian")
