"""The graph a traced function becomes: an SSA op list with a readable text form.

A ``Graph`` holds input ``Var``s, ``Node``s (one primitive application each, with its
parameters and the user's source line) and output ``Var``s. Shapes are run-time,
ranks are compile-time (DESIGN.md rule 4): a ``Var``'s shape is a tuple of ``Dim``s.
A ``Dim`` is an ``int`` (the size seen while tracing, so shape rules and user code work
unchanged) that also knows how to compute itself at run time from the inputs' shapes:
``x.shape[1]``, products, differences, slice lengths. A size-1 axis is the plain int
1: which axes have size 1 is part of the signature, so it never changes.

The text speaks the user's vocabulary: inputs are named after the function's parameters
(``Var.name``), sizes are symbols (``n``, ``k``, ...) with a legend saying which input
axes they are (``SizeNames``), scalar constants print by value, and the nodes of the
backward pass say which forward op they differentiate (``GradWhere``).
"""

import itertools
import keyword
import operator
import re

import numpy as np


class Dim(int):
    """A size known while tracing, with the expression that computes it at run time.

    ``expr`` is a tuple tree: ``("in", k, axis)`` is axis ``axis`` of input ``k``;
    ``("+", a, b)``, ``("-", a, b)``, ``("*", a, b)``, ``("//", a, b)`` combine
    expressions or ints; ``("slice", n, start, stop, step)`` is the length of
    ``range(n)[start:stop:step]``.
    """

    def __new__(cls, value, expr):
        d = int.__new__(cls, value)
        d.expr = expr
        return d

    def __repr__(self):
        return int.__repr__(self)

    __str__ = __repr__

    def __reduce__(self):
        return (int, (int(self),))

    # arithmetic keeps the expression; comparisons and hashing are the int's
    def _combine(self, op, other, value, swap=False):
        if not isinstance(other, int) or isinstance(other, bool):
            return NotImplemented
        a, b = expr_of(self), expr_of(other)
        return derived(value, (op, b, a) if swap else (op, a, b))

    def __add__(self, other):
        return self._combine("+", other, int(self) + int(other)) if isinstance(other, int) else NotImplemented

    def __radd__(self, other):
        if type(other) is int and other == 0:       # (0.0 + n is a float, as in Python)
            return self
        return self._combine("+", other, int(other) + int(self), True) if isinstance(other, int) else NotImplemented

    def __sub__(self, other):
        return self._combine("-", other, int(self) - int(other)) if isinstance(other, int) else NotImplemented

    def __rsub__(self, other):
        return self._combine("-", other, int(other) - int(self), True) if isinstance(other, int) else NotImplemented

    def __mul__(self, other):
        if type(other) is int and other == 1:       # (n * 1.0 is a float, as in Python)
            return self
        return self._combine("*", other, int(self) * int(other)) if isinstance(other, int) else NotImplemented

    def __rmul__(self, other):
        if type(other) is int and other == 1:       # (n * 1.0 is a float, as in Python)
            return self
        return self._combine("*", other, int(other) * int(self), True) if isinstance(other, int) else NotImplemented

    def __floordiv__(self, other):
        if type(other) is int and other == 1:       # (n // 1.0 is a float, as in Python)
            return self
        return self._combine("//", other, int(self) // int(other)) if isinstance(other, int) else NotImplemented

    def __rfloordiv__(self, other):
        return self._combine("//", other, int(other) // int(self), True) if isinstance(other, int) else NotImplemented

    def __neg__(self):
        return Dim(-int(self), ("-", 0, self.expr))

    __hash__ = int.__hash__


def expr_of(d):
    """The run-time expression of a size: its tree for a Dim, the int itself otherwise."""
    return d.expr if isinstance(d, Dim) else int(d)


def is_static(d):
    return not isinstance(d, Dim)


def traced_size(shape):
    """The number of elements of ``shape`` in the traced call (a Dim is an int: its size
    then), what a size-dependent choice of the generated code goes by."""
    total = 1
    for d in shape:
        total *= int(d)
    return total


def slice_length(n, start, stop, step):
    """The length of ``range(n)[start:stop:step]``, symbolic when ``n`` (or a bound) is."""
    value = len(range(int(n))[slice(_int(start), _int(stop), _int(step))])
    if all(is_static(v) for v in (n, start, stop, step) if v is not None):
        return value
    if start is None and stop is None and step in (None, 1):
        return n
    return derived(value, ("slice", expr_of(n), _expr_or_none(start), _expr_or_none(stop),
                           _expr_or_none(step)))


def derived(value, expr):
    """A size computed from run-time sizes. A size of 1 is kept as the plain int 1, so that
    it broadcasts like the inputs' size-1 axes (which the signature fixes), and the
    generated code checks that it is still 1."""
    if value != 1:
        return Dim(value, expr)
    from .recording import current_trace
    trace = current_trace()
    if trace is not None:
        trace.require_equal("size", Dim(1, expr), 1)
    return 1


def _int(v):
    return None if v is None else int(v)


def _expr_or_none(v):
    return None if v is None else expr_of(v)


def render_expr(expr, input_name, size_of=None):
    """Python source for a size expression; ``input_name(k)`` names input k, and
    ``size_of(k, axis)``, if given, names its size along ``axis`` (else
    ``<input>.shape[axis]``)."""
    if isinstance(expr, int):
        return str(expr)
    if expr is None:
        return "None"
    kind = expr[0]
    if kind == "in":
        if size_of is not None:
            return size_of(expr[1], expr[2])
        return f"{input_name(expr[1])}.shape[{expr[2]}]"
    if kind == "slice":
        args = ", ".join(render_expr(e, input_name, size_of) for e in expr[1:])
        return f"slice_length({args})"
    a, b = (render_expr(e, input_name, size_of) for e in expr[1:])
    return f"({a} {kind} {b})"


_SIZE_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}


def eval_expr(expr, shape_of):
    """The value of a size expression, ``shape_of(k)`` the shape of input k."""
    if isinstance(expr, int) or expr is None:
        return expr
    kind = expr[0]
    if kind == "in":
        return shape_of(expr[1])[expr[2]]
    values = [eval_expr(e, shape_of) for e in expr[1:]]
    if kind == "slice":
        return slice_length(*values)
    return _SIZE_OPS[kind](*values)


def failed_check(graph, shape_of):
    """The message of the first size equality of ``graph`` that the inputs' shapes
    (``shape_of(k)``) fail, or None."""
    for key, message in graph.checks.items():
        if not is_bound(key) and eval_expr(key[0], shape_of) != eval_expr(key[1], shape_of):
            return message
    return None


# Size inequalities. Besides equalities (``(a, b)`` in ``Graph.checks``), a graph holds
# inequalities its ops need of run-time sizes: an int index below its axis's size, a
# reduction without identity over a non-empty axis. Their key is ``(kind, lo, hi)``
# (``kind`` "<" or "<=", ``lo`` and ``hi`` size expressions) and their value
# ``(error, template)``: the builtin error's name ("IndexError", "ValueError") and the
# message; an IndexError's (``errors.OutOfRange``) has ``{0}`` and ``{1}`` for the values
# of ``lo`` and ``hi`` in the failing call, a ValueError's is the message as it is. The
# kernel tests them on entry, each with its own raise.

BOUND_KINDS = ("<", "<=")


def is_bound(key):
    return len(key) == 3 and key[0] in BOUND_KINDS


def holds(kind, lo, hi):
    return lo < hi if kind == "<" else lo <= hi


def require_bound(kind, lo, hi, error, template):
    """Sizes ``lo`` and ``hi`` (ints or Dims) must satisfy ``lo < hi`` (``kind`` "<") or
    ``lo <= hi`` ("<=") in every call. While tracing, a relation between sizes that may
    change becomes a check of the kernel's entry; ``template`` (with the user's line
    appended here) is the message, ``{0}``/``{1}`` the values of ``lo``/``hi``. Returns
    whether it holds now: the caller raises the eager error if not."""
    ok = holds(kind, int(lo), int(hi))
    if not ok or (is_static(lo) and is_static(hi)):
        return ok
    from .recording import current_trace
    trace = current_trace()
    if trace is not None:
        from .errors import user_frame
        where = trace.where or user_frame()
        if where and error == "IndexError":         # (a template: braces are placeholders)
            where = where.replace("{", "{{").replace("}", "}}")
        message = template + (f" (at {where})" if where else "")
        trace.checks.setdefault((kind, expr_of(lo), expr_of(hi)), (error, message))
    return ok


def _raw_expr(expr):
    return render_expr(expr, lambda k: f"%{k}")


def shape_text(shape, sizes=None):
    """A shape as the graph text writes it: sizes known at run time by their symbols in
    ``sizes`` (a graph's ``SizeNames``), or as ``%<input>.shape[axis]`` without."""
    text = _raw_expr if sizes is None else sizes.text
    return ",".join(text(d.expr) if isinstance(d, Dim) else str(d) for d in shape)


# ---------------------------------------------------------------------------
# names: inputs, sizes, backward nodes

def identifier(name):
    """``name`` as a Python identifier (for a graph input and the generated code's
    variable): other characters become ``_``, a keyword gets a trailing ``_``."""
    name = re.sub(r"\W", "_", str(name)) or "_"
    if name[0].isdigit():
        name = "_" + name
    return name + "_" if keyword.iskeyword(name) else name


_SYMBOLS = ("n", "k", "m", "p", "q", "r", "s", "t", "u")


class SizeNames:
    """How a graph's text names the sizes of its inputs: one symbol (``n``, ``k``, ``m``,
    ...) per size, shared by the sizes the graph checks equal (the kernel tests every
    check on entry, so they are one number in any call that runs), and the legend line
    saying which input axes each symbol is. Symbols never equal an input's name."""

    def __init__(self, inputs, checks):
        self.inputs = inputs
        parent = {}

        def root(e):
            while parent.get(e, e) != e:
                e = parent[e]
            return e

        def union(a, b):
            a, b = root(a), root(b)
            if a != b:
                parent[max(a, b)] = min(a, b)

        for key in checks:
            if not is_bound(key) and all(_is_input_size(e) for e in key):
                union(*key)
        for k, v in enumerate(inputs):    # (passes.sizes writes one size of a class for all)
            for axis, d in enumerate(v.shape):
                if isinstance(d, Dim) and _is_input_size(d.expr):
                    union(("in", k, axis), d.expr)
        taken = {v.name for v in inputs if v.name}
        fresh = (s + (str(j) if j else "") for j in itertools.count() for s in _SYMBOLS)
        fresh = (s for s in fresh if s not in taken)
        by_root = {}
        self.symbol = {}               # ("in", k, axis) -> its symbol
        self.members = {}              # symbol -> the input sizes it names, in order
        for k, v in enumerate(inputs):
            for axis, d in enumerate(v.shape):
                e = ("in", k, axis)
                if not isinstance(d, Dim):
                    continue
                r = root(e)
                if r not in by_root:
                    by_root[r] = next(fresh)
                self.symbol[e] = by_root[r]
                self.members.setdefault(by_root[r], []).append(e)

    def input_ref(self, k):
        return repr(self.inputs[k])

    def raw(self, expr):
        """A size expression in terms of the inputs' shapes (``x.shape[0]``)."""
        return render_expr(expr, self.input_ref)

    def text(self, expr):
        """A size expression in terms of the symbols (``n``, ``(n * k)``)."""
        return render_expr(expr, self.input_ref,
                           lambda k, axis: self.symbol.get(("in", k, axis))
                           or f"{self.input_ref(k)}.shape[{axis}]")

    def legend(self):
        """``n = x.shape[0], k = x.shape[1] = w.shape[0]``, or "" without sizes."""
        return ", ".join(" = ".join([s] + [self.raw(e) for e in es])
                         for s, es in self.members.items())


def _is_input_size(e):
    return isinstance(e, tuple) and len(e) == 3 and e[0] == "in"


class GradWhere(str):
    """The source location of a backward node: the forward op's ``file:line`` (what error
    messages name), knowing the op it differentiates (``op``) for the graph text and the
    generated code's comments. A string, so that passes copying ``Node.where`` keep it."""

    def __new__(cls, where, op):
        s = str.__new__(cls, where or "")
        s.op = op
        return s

    def __reduce__(self):
        return (GradWhere, (str(self), self.op))


# ---------------------------------------------------------------------------
# values, nodes, graphs

class Var:
    """An SSA value: an id, a shape (ints and Dims) and a dtype."""

    __slots__ = ("id", "shape", "dtype", "node", "name")

    def __init__(self, id, shape, dtype, node=None, name=None):
        self.id = id
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.node = node             # the Node that computes it; None for inputs and constants
        self.name = name             # an input's name (an identifier unique in its graph)

    @property
    def ndim(self):
        return len(self.shape)

    def type_text(self, sizes=None):
        return f"{self.dtype.name}[{shape_text(self.shape, sizes)}]"

    def __repr__(self):
        return self.name or f"%{self.id}"


class Const:
    """A NumPy constant used by the graph (captured arrays, non-traced tensors)."""

    __slots__ = ("value", "var")

    def __init__(self, value, var):
        self.value = value
        self.var = var


class Node:
    """One primitive application: ``out = prim(*inputs, **params)``.

    ``inputs`` holds Vars and literals (weakly typed Python scalars and Dims).
    ``where`` is the user's ``file:line`` that applied the op, for comments and errors.
    """

    __slots__ = ("prim", "inputs", "params", "out", "where")

    def __init__(self, prim, inputs, params, out, where=None):
        self.prim = prim
        self.inputs = list(inputs)
        self.params = dict(params)
        self.out = out
        self.where = where

    def var_inputs(self):
        return [v for v in self.inputs if isinstance(v, Var)]

    @property
    def grad_of(self):
        """The name of the forward op this node differentiates, or None (a forward node)."""
        return getattr(self.where, "op", None)

    def where_text(self):
        """``file:line``, or ``grad of multiply at file:line`` for a backward node."""
        op = self.grad_of
        if op is None:
            return self.where or ""
        return f"grad of {op}" + (f" at {self.where}" if self.where else "")

    def text(self, sizes=None):
        """``%3: float64[n] = add(x, %2)``; ``sizes`` (the graph's ``SizeNames``) names
        run-time sizes by their symbols."""
        args = ", ".join(_operand_text(v, sizes) for v in self.inputs)
        params = "".join(f", {k}={_param_text(v, sizes)}" for k, v in sorted(self.params.items())
                         if k not in self.prim.regions)
        return f"{self.out!r}: {self.out.type_text(sizes)} = {self.prim.name}({args}{params})"

    def with_inputs(self, sub):
        """This node with each Var operand ``v`` replaced by ``sub(v)``, in its regions'
        bodies too (their inputs, nodes and outputs); its output is the same Var."""
        params = self.params
        if self.prim.regions:
            params = dict(params)
            for name in self.prim.regions:
                params[name] = params[name].with_inputs(sub)
        node = Node(self.prim, [sub(v) if isinstance(v, Var) else v for v in self.inputs],
                    params, self.out, self.where)
        self.out.node = node
        return node


def _operand_text(v, sizes=None):
    if isinstance(v, Var):
        return repr(v)
    if isinstance(v, Dim):
        return "size(" + (_raw_expr if sizes is None else sizes.text)(v.expr) + ")"
    return repr(v)


def _param_text(v, sizes=None):
    if isinstance(v, Dim):
        return (_raw_expr if sizes is None else sizes.text)(v.expr)
    if isinstance(v, tuple):
        inner = ", ".join(_param_text(x, sizes) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, np.dtype):
        return v.name
    return repr(v)


def ancestors(nodes, outputs):
    """The nodes of ``nodes`` (in order) that ``outputs`` depend on."""
    by_out = {n.out.id: n for n in nodes}
    needed, stack = set(), [v for v in outputs if isinstance(v, Var)]
    while stack:
        v = stack.pop()
        n = by_out.get(v.id)
        if n is not None and n.out.id not in needed:
            needed.add(n.out.id)
            stack.extend(n.var_inputs())
    return [n for n in nodes if n.out.id in needed]


class Graph:
    """Inputs, constants, nodes in order, outputs; ``text()`` is ``lower().graph``.

    Set by the compiler after the passes: ``writes`` (output index, the variable it is
    written back to), ``guards`` (output index, the branch value the graph was traced
    with), ``check_numerics`` (the generated code tests every value for NaN/inf),
    ``parallel`` (CPU code may run large loops on threads: ``jt.config.parallel``) and
    ``packing`` (inputs and outputs the kernel takes and returns stacked:
    ``passes.packing``); by code generation, ``messages`` (what the numbers its kernel
    raises mean: ``errors.located``).
    """

    writes = ()
    guards = ()
    check_numerics = False
    parallel = False
    packing = None                        # passes.packing.Packing: the kernel's convention
    messages = ()                         # what its kernel's raises mean (errors.located)
    _sizes = None                         # SizeNames, made at the first use

    def __init__(self, inputs, consts, nodes, outputs, name="f", checks=None, exact_sizes=False):
        self.checks = dict(checks or {})      # (size expr, size expr) -> error message;
        # (kind, size expr, size expr) -> (error, template): inequalities (see is_bound)
        self.exact_sizes = exact_sizes        # valid for the traced sizes only
        self.inputs = list(inputs)
        self.consts = list(consts)
        self.nodes = list(nodes)
        self.outputs = list(outputs)
        self.name = name

    @property
    def sizes(self):
        """The ``SizeNames`` of this graph's text (and of its code's comments)."""
        if self._sizes is None:
            self._sizes = SizeNames(self.inputs, self.checks)
        return self._sizes

    def text(self):
        sizes = self.sizes
        lines = [f"graph {self.name}("
                 + ", ".join(f"{v!r}: {v.type_text(sizes)}" for v in self.inputs) + ") {"]
        legend = sizes.legend()
        if legend:
            lines.append(f"  # sizes: {legend}")
        if self.packing is not None:
            lines += [f"  # {line}" for line in self.packing.notes(self.inputs, self.outputs)]
        if self.exact_sizes:
            lines.append("  # valid for the sizes it was traced with only: "
                         + ", ".join(str(tuple(int(d) for d in v.shape)) for v in self.inputs))
        for key in self.checks:
            a, op, b = (key[1], key[0], key[2]) if is_bound(key) else (key[0], "==", key[1])
            lines.append(f"  check {sizes.raw(a)} {op} {sizes.raw(b)}")
        for c in self.consts:
            lines.append(f"  {c.var!r}: {c.var.type_text(sizes)} = const {const_text(c.value)}")
        lines += self._node_lines(sizes, "  ")
        outs = ", ".join(repr(v) if isinstance(v, Var) else _operand_text(v, sizes)
                         for v in self.outputs)
        notes = [f"{self.outputs[k]!r} -> {_target_text(t)}" for k, t in self.writes]
        notes += [f"{self.outputs[k]!r} is {value}" for k, value in self.guards]
        if self.check_numerics:
            notes.append("every value is checked for NaN and inf")
        lines.append(f"  return {outs}" + (f"    # {'; '.join(notes)}" if notes else ""))
        lines.append("}")
        return "\n".join(lines)

    def _node_lines(self, sizes, indent):
        lines = []
        backward = False
        for node in self.nodes:
            if node.grad_of is not None and not backward and indent == "  ":
                backward = True
                lines.append(BACKWARD_MARK)
            where = node.where_text()
            text = node.text(sizes)
            for name in node.prim.regions:     # the body, indented, its own inputs named first
                body = node.params[name]
                own = body.inputs[:node.prim.bound(node, name)[0]]
                text += f" over {', '.join(repr(v) for v in own)} {{"
            lines.append(indent + text + (f"    # {where}" if where else ""))
            for name in node.prim.regions:
                body = node.params[name]
                lines += body._node_lines(sizes, indent + "  ")
                lines.append(f"{indent}  yield " + ", ".join(
                    repr(v) if isinstance(v, Var) else _operand_text(v, sizes)
                    for v in body.outputs))
                lines.append(indent + "}")
        return lines

    def with_inputs(self, sub):
        """This graph with each Var ``v`` it reads from outside replaced by ``sub(v)``."""
        nodes = [node.with_inputs(sub) for node in self.nodes]
        return Graph([sub(v) for v in self.inputs], self.consts, nodes,
                     [sub(v) if isinstance(v, Var) else v for v in self.outputs], self.name,
                     self.checks, self.exact_sizes)

    def all_nodes(self):
        """The nodes, with those of region bodies after their region node."""
        for node in self.nodes:
            yield node
            for name in node.prim.regions:
                yield from node.params[name].all_nodes()

    def key_text(self):
        """The text without source locations (nor the start of the backward pass, which
        they tell): what the disk cache hashes. It holds what the graph computes: names,
        the sizes' legend, scalar constants' values and array constants' digests."""
        return "\n".join(line.split("    # ")[0] for line in self.text().splitlines()
                         if line != BACKWARD_MARK)

    __str__ = text

    def validate(self, defined=None):
        """Every Var is defined once, before it is used (a region's body may read what is
        defined before its region node)."""
        defined = set() if defined is None else set(defined)
        defined |= {v.id for v in self.inputs} | {c.var.id for c in self.consts}
        for node in self.nodes:
            for name in node.prim.regions:
                node.params[name].validate(defined)
            for v in node.var_inputs():
                if v.id not in defined:
                    raise AssertionError(f"graph: {v!r} used before it is defined in {node.text()}")
            if node.out.id in defined:
                raise AssertionError(f"graph: {node.out!r} defined twice")
            defined.add(node.out.id)
        for v in self.outputs:
            if isinstance(v, Var) and v.id not in defined:
                raise AssertionError(f"graph: output {v!r} is not defined")
        return self


BACKWARD_MARK = "  # -- backward --"      # the graph text's line before the first backward node


def _target_text(target):
    return f"argument leaf {target}" if isinstance(target, int) else f"variable {target.name!r}"


def const_text(value):
    """A constant as the graph text writes it: a scalar (0-d or one element) by its value
    (the shortest text that reads back as the same number of its dtype, as NumPy prints
    it), a larger array by a digest of its bytes (its dtype and shape are in the type)."""
    value = np.asarray(value)
    if value.size == 1:
        return str(value.reshape(-1)[0])
    return f"#{_const_digest(value)}"


def _const_digest(value):
    import hashlib
    value = np.ascontiguousarray(value)
    h = hashlib.sha1(value.dtype.str.encode() + str(value.shape).encode() + value.tobytes())
    return h.hexdigest()[:12]
