"""Tracing: run user code on tracer tensors and record a Graph.

A ``Tracer`` is a Tensor without a value: applying a primitive to one (directly, through
an operator, or through NumPy's ``__array_ufunc__``/``__array_function__``) appends a
``Node`` to the ``Trace`` and returns a new tracer whose shape and dtype come from the
primitive's own shape rule. Ops on constants alone are computed at once (constant
folding). The same primitives' VJP rules run on tracers in ``autodiff``.

Shapes are ``Dim``s (see ``ir``): reading a size gives an int that the generated code
recomputes at run time. User code that reads a size (``x.shape``, ``len(x)``) might
use it in a way no graph can see (``range(x.shape[0])``), so such a trace is marked
``reads_sizes`` and the caller keys its graph on the exact sizes.
"""

import os
import sys

import numpy as np

from . import ir
from .errors import _PACKAGE_DIR, TracerError, at_user_line, user_frame
from .ir import Dim, Var
from .ops import core
from .ops.core import Aval
from .tensor import Tensor, Variable, to_array
from . import config, recording
from .ops.core import record_traced

_PACKAGE = __name__.rsplit(".", 1)[0]


class Trace:
    """The graph being recorded: inputs, constants and nodes."""

    def __init__(self, name="f"):
        self.name = name
        self.inputs = []
        self.consts = []
        self._const_ids = {}
        self.nodes = []
        self.checks = {}           # (expr, expr) -> message: sizes that must be equal
        self.reads_sizes = False
        self.weak = set()          # ids of Vars typed weakly, as a Python float is (see bind)
        self.where = None          # set while the backward pass runs: the forward op's line
        self.input_values = []     # this call's values of the inputs (for guards)
        self.variables = {}        # Variable id -> _VariableState, in order of first use
        self.read_owner = {}       # Var id of a read of a Variable -> the Variable
        self.guards = []           # (bool Var, the value it had while tracing)
        self._values = {}          # Var id -> value computed while tracing (guards)
        self._tapes = []           # the tapes that were recording outside this trace
        self._next = 0
        self._names = set()        # the inputs' names so far (each is unique)
        # values read from outside the arguments (see CapturedValues): inputs after the
        # arguments, in order: Variables, captured arrays and floats, random draws
        self.captured = None
        self.implicit = []
        # while the user's function runs: NumPy's global generator's position, and the
        # line of the first op after it moved (a draw from np.random: see compiler/capture.py)
        self.random_mark = None
        self.random_where = None
        self.target = "cpu"        # the backend the graph is for (regions.compiles_as_loop)

    # -- values ------------------------------------------------------------------
    def new_var(self, shape, dtype, node=None):
        v = Var(self._next, shape, dtype, node)
        self._next += 1
        return v

    def add_input(self, value, k, exact=False, name=None):
        """A traced input for flattened argument ``k`` (an array or NumPy scalar); with
        ``exact`` its sizes are constants of the graph (a variable's shape never changes).
        ``name`` (see ``leaf_names``) names it in the graph and the generated code, made
        an identifier unique among the inputs (``x``, ``x_2``); without, it is ``%<id>``."""
        value = np.asarray(value)
        shape = tuple(n if (n == 1 or exact) else Dim(n, ("in", k, axis))
                      for axis, n in enumerate(value.shape))
        var = self.new_var(shape, value.dtype)
        if name is not None:
            var.name = self._unique_name(name)
        self.inputs.append(var)
        self.input_values.append(value)
        return Tracer._of(var, self)

    def _unique_name(self, name):
        base = name = ir.identifier(name)
        j = 1
        while name in self._names:
            j += 1
            name = f"{base}_{j}"
        self._names.add(name)
        return name

    # -- variables ---------------------------------------------------------------
    def variable_input(self, variable, argument=None):
        """Make ``variable`` an input of the graph: a Variable argument (``argument`` is
        its flattened position) or one the function reads from its enclosing scope."""
        state = self.variables.get(variable._id)
        if state is None:
            var = self.add_input(variable._value, len(self.inputs), exact=True,
                                 name=variable.name.rsplit(":", 1)[0])._var   # ("w:0": w)
            if argument is None:
                self.implicit.append(variable)
            state = self.variables[variable._id] = _VariableState(variable, var, argument)
            self.read_owner[var.id] = variable
        return state

    def read_variable(self, variable):
        """The Var a read of ``variable`` gives. After an assignment in this trace a read
        is a new value that gradients stop at, as TensorFlow's reads of a variable: a
        tape's gradient with respect to a variable sums over its reads."""
        state = self.variable_input(variable)
        if state.read is None:
            from .ops import stop_gradient
            state.read = self._node(stop_gradient, [state.value], {})
            state.reads.append(state.read)
            self.read_owner[state.read.id] = variable
        return state.read

    def assign_variable(self, variable, value, op):
        """``variable.assign(value)`` in a traced function: the new value is an output
        that the compiled function writes back to the variable after the call."""
        from . import ops
        state = self.variable_input(variable)
        t = value if isinstance(value, Tracer) else None
        if t is None:
            if isinstance(value, Variable):
                t = Tracer._of(self.read_variable(value), self)
            else:
                array = to_array(value, variable.dtype)
                t = Tracer._of(self.const(np.asarray(array)), self)
        if t.dtype != variable.dtype:
            t = ops.cast(t, variable.dtype)
        shape = t._var.shape
        if len(shape) != variable.ndim or any(int(d) != n for d, n in zip(shape, variable.shape)):
            raise ValueError(at_user_line(
                f"{op}: cannot assign a value of shape {tuple(int(d) for d in shape)} to "
                f"variable {variable.name!r} of shape {variable.shape}"))
        for d, n in zip(shape, variable.shape):
            if isinstance(d, Dim):
                self.require_equal(op, d, n)
        state.value = t._var
        state.read = None
        state.assigned = True
        return variable

    def const(self, value):
        """A graph constant for a NumPy value (one Var per distinct array object); an
        array the traced function read from its closure or globals is an input instead,
        read at each call (see CapturedValues)."""
        key = id(value)
        if self.captured is not None:
            found = self.captured.arrays.get(key)
            if found is not None and found.value is value:
                return self.captured_input(found)
        found = self._const_ids.get(key)
        if found is not None and found.value is value:
            return found.var
        array = np.asarray(value)
        var = self.new_var(array.shape, array.dtype)
        c = ir.Const(array, var)
        self.consts.append(c)
        self._const_ids[key] = c
        return var

    def captured_input(self, captured):
        """The input that holds a captured value (an array, a NumPy scalar or a Python
        float, see CapturedValues) at each call; made at its first use."""
        if captured.var is None:
            value = captured.value
            if value.__class__ is float:       # weak, as the Python float it stands for
                t = self.add_input(np.float64(value), len(self.inputs), name=captured.name)
                self.weak.add(t._var.id)
            else:                              # any size: sizes are read at run time
                t = self.add_input(value, len(self.inputs), name=captured.name)
            captured.var = t._var
            self.implicit.append(captured)
        return captured.var

    def random_input(self, draw, value):
        """A ``jt.random`` draw in a traced function: an input of its exact shape that
        ``draw()`` fills anew at each call (the call being traced uses ``value``)."""
        t = self.add_input(value, len(self.inputs), exact=True, name="draw")
        self.implicit.append(RandomDraw(draw, value))
        return t

    # -- ops -----------------------------------------------------------------------
    def bind(self, prim, args, params):
        """Apply ``prim`` to traced arguments: record a node, return its tracer."""
        if self.captured is not None:       # captured values stay symbolic: no folding
            args = self.captured.operands(self, prim, args)
        if (not any(isinstance(a, (Tracer, Variable)) for a in args)
                and not _symbolic(args, params) and prim.foldable
                and not (recording.ACTIVE_TAPES and _watched_constant(args))):  # this thread's
            return _fold(prim, args, params)
        weak_out = False
        if self.weak:
            args, weak_out = self._weak_operands(prim, args)
        inputs, avals = [], []
        for a in args:
            if isinstance(a, Tracer):
                if a._trace is not self:
                    raise TracerError(at_user_line(
                        f"{prim.name}: a traced value of another (finished) trace was used; "
                        "do not keep traced values outside the function being compiled"))
                inputs.append(a._var)
                avals.append(_aval(a._var))
            elif isinstance(a, Variable):
                var = self.read_variable(a)
                inputs.append(var)
                avals.append(_aval(var))
            elif isinstance(a, Tensor):
                var = self.const(a._value)
                inputs.append(var)
                avals.append(_aval(var))
            elif isinstance(a, (np.ndarray, np.generic)):
                var = self.const(a)
                inputs.append(var)
                avals.append(_aval(var))
            elif isinstance(a, Dim):
                inputs.append(a)
                avals.append(int(a))
            elif isinstance(a, (bool, int, float)):
                inputs.append(a)
                avals.append(a)
            elif isinstance(a, complex):
                # weak, as eagerly: a complex64 (or float32) operand beside it keeps the
                # result complex64
                var = self.const(np.asarray(a, _weak_complex_dtype(args)))
                inputs.append(var)
                avals.append(_aval(var))
            else:
                value = core.coerce_operand(a, prim.name)
                var = self.const(np.asarray(value))
                inputs.append(var)
                avals.append(_aval(var))
        aval = prim.abstract(*avals, **params)
        out = self._node(prim, inputs, params, aval)
        if weak_out and out.dtype.kind in "fc":
            self.weak.add(out.id)
        if recording.ACTIVE_TAPES:
            record_traced(prim, args, inputs, out, self)   # (this thread's tapes)
        return Tracer._of(out, self)

    def _weak_operands(self, prim, args):
        """Operands with weakly typed values (Python float arguments: float64 inputs,
        and what is computed from them alone) cast to the dtype a Python float takes
        beside the other operands (NumPy's rule: a float32 tensor stays float32), so the
        op computes what the eager tape computes with the Python number; and whether
        the result is weak too: Python's arithmetic on floats gives a float, but a
        function of one (``jt.exp(lr)``, ``np.exp(lr)``) a float64 array, as eagerly."""
        weak, strong = False, []
        for a in args:
            if isinstance(a, Tracer) and a._var.id in self.weak:
                weak = True
            elif isinstance(a, (Tensor, np.ndarray, np.generic)):
                strong.append(a.dtype)
        if not weak:
            return args, False
        if not strong:
            return args, prim.name in _PYTHON_ARITHMETIC
        # a weak complex (a Python complex argument) takes the complex dtype NumPy gives
        # 0j beside the operands: complex64 beside float32, never a real dtype
        real, cplx = np.result_type(*strong, 0.0), np.result_type(*strong, 0j)
        if real == np.float64 and cplx == np.complex128:
            return args, False
        from . import ops
        return [ops.cast(a, cplx if a.dtype.kind == "c" else real)
                if isinstance(a, Tracer) and a._var.id in self.weak
                and a.dtype != (cplx if a.dtype.kind == "c" else real) else a
                for a in args], False

    def _node(self, prim, inputs, params, aval=None):
        """Append ``prim(*inputs)`` (Vars and literals) to the graph; return its Var."""
        if aval is None:
            aval = prim.abstract(*[_aval(v) if isinstance(v, Var) else v for v in inputs],
                                 **params)
        out = self.new_var(aval.shape, aval.dtype)
        node = ir.Node(prim, inputs, params, out,
                       self.where if self.where is not None else user_frame())
        out.node = node
        self.nodes.append(node)
        if self.random_mark is not None and self.random_where is None:
            mark = _numpy_random_mark()
            if mark != self.random_mark:      # np.random was drawn from since the last op
                self.random_where = node.where
        return out

    def require_equal(self, op, a, b, why="operand shapes cannot be broadcast together"):
        """Sizes ``a`` and ``b`` must be equal at run time (an op combines them; ``why``
        says how, in the message)."""
        ea, eb = ir.expr_of(a), ir.expr_of(b)
        if ea != eb and (eb, ea) not in self.checks:
            where = self.where or user_frame()
            at = f" (at {where})" if where else ""
            if eb == 1:
                self.checks.setdefault((ea, eb), (
                    f"{op}: a size that was 1 when the function was traced is not 1 in this "
                    f"call{at}\nIt broadcasts differently: a compiled function traces again for "
                    "such sizes; a kernel from .kernel() serves the sizes it was made for."))
                return
            unnamed = []

            def name(k):
                if self.inputs[k].name:
                    return self.inputs[k].name
                unnamed.append(k)
                return f"input{k}"
            sizes = f"{ir.render_expr(ea, name)} != {ir.render_expr(eb, name)}"
            self.checks.setdefault((ea, eb), f"{op}: {why}: sizes {sizes} in this call{at}" + (
                                       "\ninput<k> is the k-th of the flattened arguments"
                                       if unnamed else ""))

    def var_of(self, x):
        """The Var of a value used in this trace: a tracer's, a read of a Variable, or a
        constant's."""
        if isinstance(x, Tracer):
            return x._var
        if isinstance(x, Variable):
            return self.read_variable(x)
        return self.const(np.asarray(x._value if isinstance(x, Tensor) else x))

    def tracer(self, x):
        """``x`` (a tracer, a Variable, a constant) as a tracer of this trace."""
        return x if isinstance(x, Tracer) else Tracer._of(self.var_of(x), self)

    def graph(self, outputs):
        return ir.Graph(self.inputs, self.consts, self.nodes, outputs, self.name,
                        checks=self.checks, exact_sizes=self.reads_sizes).validate()

    # -- guards: Python control flow on traced values ----------------------------------
    def guard(self, tracer):
        """``bool(tracer)``: the value it has in this call, recorded as a guard that the
        compiled function checks on every call (another value traces another variant)."""
        from . import ops
        var = tracer._var
        if any(int(d) != 1 for d in var.shape):
            raise ValueError(at_user_line(
                f"bool() of a traced value of shape {tuple(int(d) for d in var.shape)} is "
                "ambiguous (as in NumPy); reduce it first (jt.reduce_all, jt.reduce_any, "
                "jt.sum)"))
        if len(self.guards) >= config.max_guards:
            raise TracerError(at_user_line(
                f"more than {config.max_guards} Python branches on traced values in one "
                "trace: a `while` loop on a traced value is unrolled once per iteration. "
                "Raise jt.config.max_guards, or compute the loop with jittape ops "
                "(jt.where)"))
        value = bool(np.asarray(self.value_of(var)).reshape(()))
        if var.dtype != np.bool_:
            var = ops.not_equal(tracer, 0)._var
        if var.ndim:
            var = ops.reshape(Tracer._of(var, self), ())._var
        self.guards.append((var, value))
        return value

    def value_of(self, var):
        """The value ``var`` has in the call being traced, computed with the primitives'
        NumPy implementations from the inputs' values."""
        if var.id in self._values:
            return self._values[var.id]
        known = self._values
        for k, v in enumerate(self.inputs):
            known.setdefault(v.id, self.input_values[k])
        for c in self.consts:
            known.setdefault(c.var.id, c.value)
        needed, stack = [], [var]
        seen = set()
        while stack:                       # the nodes ``var`` depends on, not yet computed
            v = stack.pop()
            if v.id in known or v.id in seen:
                continue
            seen.add(v.id)
            needed.append(v.node)
            stack.extend(v.node.var_inputs())
        for node in sorted(needed, key=lambda n: n.out.id):
            impl = node.prim.impl
            if impl is None:
                raise TracerError(at_user_line(
                    f"a Python branch on a value computed by {node.prim.name}, which has no "
                    "value while tracing; use jt.where"))
            args = [known[v.id] if isinstance(v, Var) else (int(v) if isinstance(v, Dim) else v)
                    for v in node.inputs]
            params = {k: _concrete_param(p) for k, p in node.params.items()}
            known[node.out.id] = impl(*args, **params)
        return known[var.id]

    # -- context ---------------------------------------------------------------------
    def __enter__(self):
        # tapes recording outside see a compiled function as one opaque call: they do
        # not record what happens inside it (tapes opened inside it do)
        tapes = recording.thread_tapes()
        self._tapes = tapes[:]
        del tapes[:]
        recording.TRACES.append(self)
        recording.thread_traces().append(self)
        return self

    def __exit__(self, *exc):
        recording.thread_traces().remove(self)
        recording.TRACES.remove(self)
        recording.thread_tapes()[:] = self._tapes


class Captured:
    """A value the traced function reads from one of its closure cells (``where`` is the
    cell, ``key`` None) or from its globals (``where`` is the dict, ``key`` the name).
    ``var`` is the graph input that holds it at each call, once the trace used it."""

    __slots__ = ("name", "where", "key", "value", "var", "concrete")

    def __init__(self, name, where, key, value):
        self.name = name
        self.where = where
        self.key = key
        self.value = value
        self.var = None
        self.concrete = False      # a float also used as a Python value: guarded too

    def read(self):
        return self.where.cell_contents if self.key is None else self.where[self.key]

    def label(self):
        return f"{self.name} ({'closure' if self.key is None else 'global'})"


class CapturedValues:
    """The values a traced function reads besides its arguments, found by identity
    among the operands of its ops. An array (or NumPy float scalar) becomes an input
    read at each call; so does a Python float used as an operand of an elementwise op
    by the function itself (a weak float64, as the number is). The rest is guarded by
    the caller (compiler/capture.py)."""

    def __init__(self, captures, codes, literals):
        self.all = captures
        self.codes = codes            # the function's code objects, nested ones included
        self.arrays, self.floats = {}, {}
        for c in captures:
            v = c.value
            if v.__class__ is np.ndarray or isinstance(v, np.floating):
                self.arrays.setdefault(id(v), c)
            elif v.__class__ is float and id(v) not in literals:
                # (CPython shares equal float constants between the code objects of a
                # module: a literal 2.0 in the function is the global 2.0 object)
                self.floats.setdefault(id(v), c)

    def operands(self, trace, prim, args):
        """``args`` with captured arrays and floats as the tracers of their inputs."""
        out = None
        for i, a in enumerate(args):
            cls = a.__class__
            if cls is float:
                c = self.floats.get(id(a))
                if c is None or c.value is not a:
                    continue
                if "scalar" not in prim.lowerings or not _called_from(self.codes):
                    c.concrete = True         # a literal of the graph: guarded
                    continue
            elif cls is np.ndarray or isinstance(a, np.floating):
                c = self.arrays.get(id(a))
                if c is None or c.value is not a:
                    continue
            else:
                continue
            if out is None:
                out = list(args)
            out[i] = Tracer._of(trace.captured_input(c), trace)
        return args if out is None else out


_MT_WORDS = []


def _numpy_random_mark():
    """Where NumPy's global generator (MT19937) stands: its position and first word,
    read in place (a fraction of a microsecond; ``np.random.get_state()`` copies the
    whole state). Only says where a draw happened: whether one did is decided by
    comparing the whole states around the trace."""
    if not _MT_WORDS:
        try:
            import ctypes
            address = np.random.mtrand._rand._bit_generator.ctypes.state_address
            _MT_WORDS.append((ctypes.c_uint32 * 625).from_address(address))
        except Exception:                     # another NumPy: no line, the call's
            _MT_WORDS.append(None)
    words = _MT_WORDS[0]
    return None if words is None else (words[624], words[0])


def _called_from(codes):
    """Whether the innermost frame outside jittape runs one of ``codes``."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<jittape") or
                os.path.abspath(name).startswith(_PACKAGE_DIR + os.sep)):
            return frame.f_code in codes
        frame = frame.f_back
    return False


class RandomDraw:
    """A ``jt.random`` draw made while tracing: ``read()`` draws anew (from the same
    generator, with the same arguments, so a seed gives the eager sequence); its first
    read gives the value the trace drew."""

    __slots__ = ("draw", "first", "shape")

    def __init__(self, draw, value):
        self.draw = draw
        self.first = value
        self.shape = np.shape(value)

    def read(self):
        value, self.first = self.first, None
        if value is None:
            value = self.draw()
        return value if value.ndim else value[()]


# the primitives of Python's operators on numbers: on weak values, weak results
_PYTHON_ARITHMETIC = frozenset(["add", "subtract", "multiply", "divide", "floor_divide", "mod",
                                "power", "negative", "abs"])


class _VariableState:
    """A Variable used by a trace: its input, its current value, its reads."""

    __slots__ = ("variable", "input", "value", "read", "reads", "assigned", "argument")

    def __init__(self, variable, var, argument):
        self.variable = variable
        self.input = var           # the graph input holding its value at the call
        self.value = var           # its value now (an assignment replaces it)
        self.read = var            # what a read gives (None: make a new read)
        self.reads = [var]         # every read value: a gradient w.r.t. it sums over them
        self.assigned = False
        self.argument = argument   # flattened argument position, or None for a capture


def _concrete_param(p):
    if isinstance(p, Dim):
        return int(p)
    if isinstance(p, tuple):
        return tuple(_concrete_param(x) for x in p)
    return p


def _watched_constant(args):
    """Whether a tape opened in the traced function watches a constant among ``args``
    (then the op is recorded, not folded, so that the tape can differentiate it)."""
    for a in args:
        if isinstance(a, Tensor):
            for tape in recording.thread_tapes():
                if a._id in tape._watched:
                    return True
    return False


def _aval(var):
    a = object.__new__(Aval)
    a.shape = var.shape
    a.dtype = var.dtype
    return a


def _symbolic(args, params):
    """Whether a size that is only known at run time enters this op."""
    if any(isinstance(a, Dim) for a in args):
        return True
    for v in params.values():
        if isinstance(v, Dim) or (isinstance(v, tuple) and any(isinstance(d, Dim) for d in v)):
            return True
    return False


def _fold(prim, args, params):
    """An op on constants only, computed now (the eager path without tapes)."""
    values = [a._value if isinstance(a, Tensor) else core.coerce_operand(a, prim.name) for a in args]
    out = prim.impl(*values, **params)
    if isinstance(out, (bool, int, float, complex)):   # an operator on Python numbers: as
        out = np.asarray(out)[()]                       # the eager path, a NumPy scalar
    return Tensor._wrap(out)


def _reading_user_code():
    """True when the caller of the caller is user code (not jittape itself)."""
    name = sys._getframe(2).f_globals.get("__name__", "")
    return not (name == _PACKAGE or name.startswith(_PACKAGE + "."))


class Tracer(Tensor):
    """A tensor whose value is only known when the compiled function runs."""

    __slots__ = ("_var", "_trace")

    @classmethod
    def _of(cls, var, trace):
        t = object.__new__(cls)
        t._value = None
        t._id = next(_ids)
        t._var = var
        t._trace = trace
        return t

    @property
    def shape(self):
        if _reading_user_code():
            self._trace.reads_sizes = True
        return self._var.shape

    @property
    def dtype(self):
        return self._var.dtype

    @property
    def ndim(self):
        return len(self._var.shape)

    @property
    def size(self):
        if _reading_user_code():
            self._trace.reads_sizes = True
        n = 1
        for d in self._var.shape:
            n = n * d
        return n

    def __len__(self):
        if not self._var.shape:
            raise TypeError(at_user_line("len() of a 0-d tensor"))
        self._trace.reads_sizes = True
        return int(self._var.shape[0])

    def __iter__(self):
        if not self._var.shape:
            raise TypeError(at_user_line("iteration over a 0-d tensor"))
        self._trace.reads_sizes = True
        return (self[i] for i in range(int(self._var.shape[0])))

    def _concrete(self, what):
        raise TracerError(at_user_line(
            f"{what} of a traced value: its value is only known when the compiled function "
            f"runs ({self._var.type_text()} computed by "
            f"{self._var.node.prim.name if self._var.node else 'an input'}). Compute with "
            "jittape ops instead (jt.where for a choice between values)"
            + ("; a Python float argument is a run-time input: name it in static_argnums to "
               "make it a constant" if self._var.id in self._trace.weak else "")))

    def numpy(self):
        self._concrete("numpy()")

    def __array__(self, dtype=None, copy=None):
        self._concrete("converting to a NumPy array")

    def __bool__(self):
        return self._trace.guard(self)

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __index__(self):
        self._concrete("using as an index")

    def __str__(self):
        return f"jt.Tracer({self._var!r}: {self._var.type_text()})"

    __repr__ = __str__


_ids = __import__("jittape.tensor", fromlist=["_ids"])._ids


def leaf_names(fn, args, treedefs=None):
    """One name per flattened leaf of ``args`` (the arguments of a call of ``fn``, in
    ``tree.flatten`` order), for ``Trace.add_input``: a leaf that is a whole argument is
    named after ``fn``'s parameter (``x``), a leaf inside a structure by its path
    (``params["w"]`` is ``params_w``, ``layers[0]`` is ``layers_0``, a field ``p.w`` is
    ``p_w``); an argument without a parameter's name (``*args``, a builtin) is
    ``args_2`` or ``arg2``. ``treedefs[i]``, if given, is argument ``i``'s structure (a
    ``tree.TreeDef``, or None for an argument that is one leaf)."""
    import inspect
    from . import tree
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):                # builtins, some callables
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for i, a in enumerate(args):
        if i < len(positional):
            base = positional[i].name
        elif star is not None:
            base = f"{star}_{i - len(positional)}"
        else:
            base = f"arg{i}"
        td = tree.flatten(a)[1] if treedefs is None else treedefs[i]
        if td is None:
            names.append(base)
        else:
            _leaf_paths(td, base, names)
    return names


def _leaf_paths(td, path, names):
    """Append the names of the leaves of structure ``td``, in order."""
    kind = td.kind
    if kind == "leaf":
        names.append(path)
        return
    if kind == "dict":
        steps = td.meta
    elif kind == "namedtuple":
        steps = td.meta._fields
    elif kind == "dataclass":
        steps = td.meta[1]
    else:                                      # list, tuple, a registered class; None
        steps = range(len(td.children))
    for step, child in zip(steps, td.children):
        _leaf_paths(child, f"{path}_{step}", names)


def _weak_complex_dtype(args):
    """The dtype a Python complex operand takes beside the other operands (NumPy's
    promotion of a weak scalar)."""
    strong = [a.dtype for a in args if isinstance(a, (Tracer, Tensor, np.ndarray, np.generic))]
    return np.result_type(*strong, 0j) if strong else np.dtype(np.complex128)
