"""A graph run node by node with the ops' NumPy implementations: the tiered calls.

While a kernel compiles in the background (``config.tiered``), calls run its graph
here: each node is its op's ``impl`` (what the eager tape runs) on whole arrays, and
each region (``scan``, ``while_loop``, ``switch``, the Jacobian loop) runs its bodies
in a Python loop through its record's ``interpret`` slot. A call costs a few
microseconds per node evaluated and NumPy's time per element, where the generated
module run as plain Python (``python_tier``, the fallback for graphs with other
records) costs a Python statement per element and op.

The call has the kernel's convention (the kernel's inputs, then its array constants;
a tuple of its outputs) and opens with the kernel's checks: the signature (which axes
are 1), the sizes that must be equal and the bounds (``SignatureMismatch``,
``SizeMismatch``, ``OutOfRange``), raised alike.
"""

import bisect
import itertools

import numpy as np
from numpy.lib.array_utils import byte_bounds

from .. import ir
from ..errors import OutOfRange, SignatureMismatch, SizeMismatch
from ..ir import Dim, Graph, Var

# a graph whose run evaluates more nodes than this (loops' bodies once per step, a
# while loop's 16 times) or computes more elements than ``ELEMENTS``, waits for its kernel.
# NumPy computes about a billion elements a second on whole arrays: a run of ``ELEMENTS``
# takes about a second, less than the compile it hides (an optimiser's loop of line
# searches over a 10^5 x 100 regression: 14 s), and the estimate counts every while
# loop 16 times, nested ones 16 x 16 (a line search takes one to three steps)
EVALUATIONS = 50_000
ELEMENTS = 2 ** 30


def runner(graph):
    """A function running ``graph`` as its kernel would be called, or None where a
    node's record has no NumPy implementation, the run would be long (see
    ``EVALUATIONS``, ``ELEMENTS``) or the graph checks every value for NaN and inf
    (``check_numerics``: the generated module's checks do that)."""
    if graph.check_numerics:
        return None
    evaluations, elements = _cost(graph.nodes, 1)
    if evaluations is None or evaluations > EVALUATIONS or elements > ELEMENTS:
        return None
    return Run(graph)


def _cost(nodes, trips):
    """(node evaluations, elements computed) of ``nodes`` run ``trips`` times; (None,
    None) where one cannot run here."""
    evaluations = elements = 0
    for node in nodes:
        prim = node.prim
        if prim.regions or prim.kind == "loop":
            if getattr(prim, "interpret", None) is None:
                return None, None
        elif prim.impl is None:
            return None, None
        size = 1
        for d in node.out.shape:
            size *= int(d)
        evaluations += trips
        elements += trips * size
        for name in prim.regions:
            # a branch runs once (one of them); a loop its length, or 16 steps guessed
            steps = 1 if getattr(prim, "role", None) == "switch" else int(
                node.params.get("length", node.params.get("count", 16)))
            e, n = _cost(node.params[name].nodes, trips * steps)
            if e is None:
                return None, None
            evaluations += e
            elements += n
    return evaluations, elements


class Run:
    """One graph's runs: ``run(*inputs, *array constants)`` -> the outputs."""

    def __init__(self, graph):
        self.graph = graph
        self.count = len(graph.inputs)
        self.arrays = [c for c in graph.consts if c.value.ndim > 0]
        self.scalars = [c for c in graph.consts if c.value.ndim == 0]

    def __call__(self, *args):
        graph = self.graph
        if len(args) != self.count + len(self.arrays):
            raise TypeError(f"the kernel takes {self.count} inputs and {len(self.arrays)} "
                            f"array constants, {len(args)} values given")
        inputs = args[:self.count]
        shapes = [np.shape(a) for a in inputs]
        _check(graph, shapes)
        env = Env(lambda k: shapes[k])
        for v, a in zip(graph.inputs, inputs):
            env.values[v.id] = a
        for c, a in zip(self.arrays, args[self.count:]):
            env.values[c.var.id] = a
        for c in self.scalars:
            env.values[c.var.id] = c.value[()]
        env.run(graph.nodes)
        return _unshared(tuple(env.value(v) for v in graph.outputs), args)


def _unshared(outs, args):
    """``outs`` with a copy of each array that shares memory with an array of ``args``,
    as the kernel returns them: an argument, a view of one (``np.broadcast_to``'s, read
    only), a loop's carry where no step ran, a branch's operand. By the arrays' byte
    ranges: one sort of the arguments', one search per output."""
    spans = sorted(byte_bounds(a) for a in args if isinstance(a, np.ndarray) and a.size)
    if not spans:
        return outs
    starts = [lo for lo, _ in spans]
    reach = list(itertools.accumulate((hi for _, hi in spans), max))
    out = list(outs)
    for k, x in enumerate(out):
        if isinstance(x, np.ndarray) and x.size:
            lo, hi = byte_bounds(x)
            j = bisect.bisect_left(starts, hi) - 1     # arguments starting before x ends
            if j >= 0 and reach[j] > lo:               # one of them ends after x starts
                out[k] = x.copy()
    return tuple(out)


class Env:
    """The values of one run, by Var id (a region's outputs by ``(region id, index)``),
    and the sizes of its inputs (``shape_of(k)``)."""

    def __init__(self, shape_of):
        self.values = {}
        self.shape_of = shape_of
        self.sizes = {}
        self.steps = {}           # node -> how it runs in this call (``_step``)

    def size(self, d):
        found = self.sizes.get(d.expr)
        if found is None:
            found = self.sizes[d.expr] = ir.eval_expr(d.expr, self.shape_of)
        return found

    def value(self, v):
        """An operand's value: a Var's, a size's, or the literal."""
        if isinstance(v, Var):
            return self.values[v.id]
        if isinstance(v, Dim):
            return self.size(v)
        return v

    def param(self, p):
        """A parameter with its run-time sizes (a shape of Dims: this call's sizes)."""
        if isinstance(p, Dim):
            return self.size(p)
        if isinstance(p, tuple):
            return tuple(self.param(x) for x in p)
        return p

    def set(self, targets, values):
        """Assign a body's inputs (or carries) at once."""
        for v, x in zip(targets, values):
            self.values[v.id] = x

    def run(self, nodes):
        values, steps = self.values, self.steps
        for node in nodes:
            step = steps.get(node)
            if step is None:                  # (a loop's body: prepared at its first step)
                step = steps[node] = self._step(node)
            impl, operands, params, out, dtype, rank = step
            if impl is None:                  # a region, or a part of one
                operands(self, node)
                continue
            result = impl(*[values[x] if var else x for var, x in operands], **params)
            if getattr(result, "dtype", None) != dtype:
                result = np.asarray(result, dtype) if rank else dtype.type(result)
            values[out] = result

    def _step(self, node):
        """(impl, operands as (is a Var, its id or value), parameters with this call's
        sizes, output id, dtype, rank); (None, the record's interpret, ...) for regions."""
        prim = node.prim
        interpret = getattr(prim, "interpret", None)
        if interpret is not None:
            return None, interpret, None, None, None, None
        operands = [(True, v.id) if isinstance(v, Var) else (False, self.value(v))
                    for v in node.inputs]
        params = {k: p if isinstance(p, Graph) else self.param(p) for k, p in node.params.items()}
        return prim.impl, operands, params, node.out.id, node.out.dtype, node.out.ndim

    def outputs(self, node, results):
        """Region ``node``'s outputs, for its projections (``scan_output``) to read."""
        for j, x in enumerate(results):
            self.values[(node.out.id, j)] = x


def _check(graph, shapes):
    """The kernel's opening checks (codegen.cpu ``_signature_checks``, ``_size_checks``)."""
    for k, v in enumerate(graph.inputs):
        for axis, d in enumerate(v.shape):
            size = shapes[k][axis] if axis < len(shapes[k]) else None
            if (size == 1) if isinstance(d, Dim) and not graph.exact_sizes else size != int(d):
                raise SignatureMismatch("the arguments' shapes do not match this kernel's "
                                        "signature")
    message = ir.failed_check(graph, lambda k: shapes[k])
    if message is not None:
        raise SizeMismatch(message)
    for key, (error, template) in ((k, m) for k, m in graph.checks.items() if ir.is_bound(k)):
        kind, lo, hi = key
        lo, hi = (ir.eval_expr(e, lambda k: shapes[k]) for e in (lo, hi))
        if not ir.holds(kind, lo, hi):
            if error == "IndexError":
                raise OutOfRange(template, lo, hi)
            raise ValueError(template)
