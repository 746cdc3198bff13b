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

import sys

import numpy as np

from . import ir
from .errors import JittapeError, UnsupportedError, at_user_line, user_frame
from .ir import Dim, Var
from .ops import core
from .ops.core import Aval
from .tensor import Tensor, Variable, to_array

_PACKAGE = __name__.rsplit(".", 1)[0]


class TracerError(JittapeError, TypeError):
    """A traced value was used where a concrete Python value is needed."""


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
        self.where = None          # set while the backward pass runs: the forward op's line
        self._next = 0

    # -- values ------------------------------------------------------------------
    def new_var(self, shape, dtype, node=None):
        v = Var(self._next, shape, dtype, node)
        self._next += 1
        return v

    def add_input(self, value, k):
        """A traced input for flattened argument ``k`` (an array or NumPy scalar)."""
        value = np.asarray(value)
        shape = tuple(1 if n == 1 else Dim(n, ("in", k, axis)) for axis, n in enumerate(value.shape))
        var = self.new_var(shape, value.dtype)
        self.inputs.append(var)
        return Tracer._of(var, self)

    def const(self, value):
        """A graph constant for a NumPy value (one Var per distinct array object)."""
        key = id(value)
        found = self._const_ids.get(key)
        if found is not None and found.value is value:
            return found.var
        array = np.asarray(value)
        var = self.new_var(array.shape, array.dtype)
        c = ir.Const(array, var)
        self.consts.append(c)
        self._const_ids[key] = c
        return var

    # -- ops -----------------------------------------------------------------------
    def bind(self, prim, args, params):
        """Apply ``prim`` to traced arguments: record a node, return its tracer."""
        if (not any(isinstance(a, Tracer) for a in args) and not _symbolic(args, params)
                and not getattr(prim, "always_traced", False)):
            return _fold(prim, args, params)
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
                raise UnsupportedError(at_user_line(
                    f"{prim.name}: a jt.Variable read inside a compiled gradient function; "
                    "pass its value as an argument (or compile the whole step with "
                    "jt.function)"))
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
            else:
                value = core.coerce_operand(a, prim.name)
                var = self.const(np.asarray(value))
                inputs.append(var)
                avals.append(_aval(var))
        aval = prim.abstract(*avals, **params)
        out = self.new_var(aval.shape, aval.dtype)
        node = ir.Node(prim, inputs, params, out, self.where or user_frame())
        out.node = node
        self.nodes.append(node)
        return Tracer._of(out, self)

    def require_equal(self, op, a, b):
        """Sizes ``a`` and ``b`` must be equal at run time (an op combines them)."""
        ea, eb = ir.expr_of(a), ir.expr_of(b)
        if ea != eb and (eb, ea) not in self.checks:
            where = self.where or user_frame()
            if eb == 1:
                self.checks.setdefault((ea, eb), (
                    "a size that was 1 when the function was traced is not 1 in this call; "
                    "it broadcasts differently: call the function's .cache_clear() or pass "
                    "arguments whose size-1 axes match") + (f" (at {where})" if where else ""))
                return
            flat = lambda k: f"input{k}"                       # noqa: E731
            sizes = f"{ir.render_expr(ea, flat)} != {ir.render_expr(eb, flat)}"
            self.checks.setdefault((ea, eb), f"{op}: operand shapes cannot be broadcast together "
                                   f"(sizes {sizes} in this call; inputs are the flattened "
                                   f"arguments)" + (f" (at {where})" if where else ""))

    def graph(self, outputs):
        return ir.Graph(self.inputs, self.consts, self.nodes, outputs, self.name,
                        checks=self.checks, exact_sizes=self.reads_sizes).validate()

    # -- context ---------------------------------------------------------------------
    def __enter__(self):
        core.TRACES.append(self)
        return self

    def __exit__(self, *exc):
        core.TRACES.remove(self)


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
    return Tensor._wrap(prim.impl(*values, **params))


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
            raise TypeError("len() of a 0-d tensor")
        self._trace.reads_sizes = True
        return int(self._var.shape[0])

    def __iter__(self):
        if not self._var.shape:
            raise TypeError("iteration over a 0-d tensor")
        self._trace.reads_sizes = True
        return (self[i] for i in range(int(self._var.shape[0])))

    def _concrete(self, what):
        raise TracerError(at_user_line(
            f"{what} of a traced value: its value is only known when the compiled function "
            f"runs ({self._var.type_text()} computed by "
            f"{self._var.node.prim.name if self._var.node else 'an input'}). Compute with "
            "jittape ops instead (jt.where for a choice between values)"))

    def numpy(self):
        self._concrete("numpy()")

    def __array__(self, dtype=None, copy=None):
        self._concrete("converting to a NumPy array")

    def __bool__(self):
        self._concrete("bool() (a Python `if`/`while` on a traced value)")

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


def input_value(x):
    """A flattened argument as the NumPy value a graph input takes."""
    if isinstance(x, Tensor):
        return x._value
    return to_array(x) if not isinstance(x, np.ndarray) else x
