"""The kernel's calling convention: inputs that a graph stacks, passed stacked.

A deep network written as a Python loop over a list of layers is rolled into one loop
(``rolling``) that reads the layers' weights by step from their stack
(``stack(W_0, ..., W_31)``), and its gradients come out of the backward loop as one
stack again, one view ``g[k]`` per layer. Passed one by one, each weight is a parameter
of the Numba kernel, read, checked and returned on its own: for 32 layers that was
seconds of compile (Numba unboxes, reference-counts and boxes every array argument and
result, and tests each size against the others) for a few memcpys at run time.

``pack_arguments`` makes the stack itself the kernel's input where a graph stacks
inputs that nothing else reads, and makes the stack the kernel's output where the
graph's results are its rows ``g[0], ..., g[m - 1]``. The Python that calls the kernel
does the rest (``Packing``): ``np.stack`` of the flattened arguments, a copy the kernel
made before; and the rows of the stacked results, views as before. The kernel's sizes
are then the stack's (``("in", p, axis + 1)`` for the ``axis`` of each stacked input),
so the checks that made each weight's sizes equal to its neighbours' are one check.
"""

import numpy as np

from ..errors import SizeMismatch
from ..ir import Dim, Var, is_bound
from .dce import dce
from .sizes import rewrite_sizes

# fewer inputs than this in a stack stay the kernel's own arguments
MIN_PACKED = 3


def stacked(parts, dtype):
    """The kernel's input packed from the flattened ones: their stack along a new first
    axis, of their dtype exactly (``TypeError`` for another: the call takes another
    signature). Parts of other shapes raise ``SizeMismatch``: the variant was traced for
    equal ones."""
    try:
        return np.stack(parts, dtype=dtype, casting="no")
    except ValueError:
        shapes = sorted({np.shape(p) for p in parts})
        raise SizeMismatch(f"arguments stacked into one kernel input have shapes "
                           f"{', '.join(map(str, shapes))} in this call; they were traced "
                           "with one shape") from None


class Packing:
    """How the kernel's inputs and outputs stand for the flattened ones.

    ``inputs``: per kernel input, the index of the flattened input it is, or the tuple of
    the indices it stacks (``dtypes``: their dtype). ``outputs``: per flattened output,
    ``(kernel output, row)``: the kernel's output itself (row None) or that row of it."""

    def __init__(self, inputs, dtypes, outputs, names):
        self.names = names                  # per kernel input: its members' names
        self.inputs = inputs
        self.dtypes = dtypes
        self.outputs = outputs
        self.flat_of = {j: k for k, (j, row) in enumerate(outputs) if row is None}

    def pack(self, flat):
        """The kernel's inputs from the flattened ones."""
        return [flat[i] if i.__class__ is int else stacked([flat[j] for j in i], dtype)
                for i, dtype in zip(self.inputs, self.dtypes)]

    def unpack(self, out):
        """The flattened outputs from the kernel's."""
        return tuple(out[j] if row is None else out[j][row] for j, row in self.outputs)

    def code(self, flat, names):
        """Source of the kernel's inputs from the sources ``flat`` of the flattened ones
        (the generated caller; ``names`` gets the dtypes and ``stacked``)."""
        names["stacked"] = stacked
        out = []
        for p, (i, dtype) in enumerate(zip(self.inputs, self.dtypes)):
            if i.__class__ is int:
                out.append(flat[i])
            else:
                names[f"PD{p}"] = dtype
                out.append(f"stacked(({', '.join(flat[j] for j in i)},), PD{p})")
        return out

    def notes(self, inputs, outputs):
        """Lines for the graph's text: which inputs each packed one stacks, which
        outputs are rows of a stacked one."""
        lines = []
        for v, i, names in zip(inputs, self.inputs, self.names):
            if i.__class__ is not int:
                members = _spans(names) if all(names) else f"flattened inputs {_spans(i)}"
                lines.append(f"{v!r} = stack({members}): passed stacked")
        rows = {}
        for flat, (j, row) in enumerate(self.outputs):
            if row is not None:
                rows.setdefault(j, []).append(flat)
        lines += [f"flattened outputs {_spans(flats)} are the rows of {outputs[j]!r}"
                  for j, flats in rows.items()]
        return lines


def _spans(items):
    """``0, 2, ..., 62``: the first two and the last of more than three items."""
    items = list(items)
    if len(items) > 3:
        return f"{items[0]}, {items[1]}, ..., {items[-1]}"
    return ", ".join(map(str, items))


def pack_arguments(graph):
    """``graph`` with its stacked inputs and unstacked outputs packed (see the module's
    text), its ``packing`` set; or ``graph`` itself where there is nothing to pack."""
    groups = _input_groups(graph)
    rows = _output_rows(graph)
    if not groups and not rows:
        return graph
    # the kernel's inputs: each group's stack where its first member was
    first = {node.inputs[0].id: node for node in groups}
    members = {v.id for node in groups for v in node.inputs}
    position = {v.id: k for k, v in enumerate(graph.inputs)}
    inputs, kernel_inputs, dtypes, names, where = [], [], [], [], {}
    for k, v in enumerate(graph.inputs):
        node = first.get(v.id)
        if node is not None:
            p = len(inputs)
            for member in node.inputs:
                where[position[member.id]] = p
            inputs.append(node.out)
            kernel_inputs.append(tuple(position[m.id] for m in node.inputs))
            dtypes.append(node.out.dtype)
            names.append([m.name for m in node.inputs])
        elif v.id not in members:
            where[k] = len(inputs)
            inputs.append(v)
            kernel_inputs.append(k)
            dtypes.append(None)
            names.append(None)
    stacked_at = {position[m.id] for node in groups for m in node.inputs}

    def remap(e):
        if not isinstance(e, tuple):
            return e
        if e[0] == "in":
            k, axis = e[1], e[2]
            return ("in", where[k], axis + 1 if k in stacked_at else axis)
        return (e[0],) + tuple(remap(x) for x in e[1:])

    def size(d, literal=True):
        return Dim(int(d), remap(d.expr)) if isinstance(d, Dim) else d

    for node in groups:                 # the stack's own sizes: those of its first member
        member = node.inputs[0]
        node.out.shape = (len(node.inputs),) + member.shape
        node.out.name = _common_name([m.name for m in node.inputs])
    checks = {}
    for key, message in graph.checks.items():
        new = (key[0], remap(key[1]), remap(key[2])) if is_bound(key) else tuple(map(remap, key))
        if is_bound(new) or new[0] != new[1]:      # equal sizes of one stack: one size
            checks.setdefault(new, message)
    dropped = {node.out.id for node in groups}
    kept = [node for node in graph.nodes if node.out.id not in dropped]
    out_graph = graph.__class__(graph.inputs, graph.consts, kept, graph.outputs, graph.name,
                                graph.checks, graph.exact_sizes)
    new = rewrite_sizes(out_graph, size, inputs, checks)
    # the outputs: each stacked one where its first row was
    outputs, flat = [], []
    placed = {}
    for k, v in enumerate(graph.outputs):
        row = rows.get(k)
        if row is None:
            flat.append((len(outputs), None))
            outputs.append(new.outputs[k])
            continue
        source, r = row
        if source.id not in placed:
            placed[source.id] = len(outputs)
            outputs.append(source)
        flat.append((placed[source.id], r))
    new.outputs = outputs
    result = dce(new)
    result.writes = [(flat[k][0], target) for k, target in graph.writes]
    result.guards = [(flat[k][0], value) for k, value in graph.guards]
    result.check_numerics, result.parallel = graph.check_numerics, graph.parallel
    result.packing = Packing(kernel_inputs, dtypes, flat, names)
    return result


def _readers(graph):
    """{var id: how many times the graph's nodes and outputs read it}."""
    count = {}
    for node in graph.nodes:
        for v in node.var_inputs():
            count[v.id] = count.get(v.id, 0) + 1
    for v in graph.outputs:
        if isinstance(v, Var):
            count[v.id] = count.get(v.id, 0) + 1
    return count


def _input_groups(graph):
    """The stack nodes (along a new first axis) of at least ``MIN_PACKED`` distinct
    inputs of one dtype and one kind of shape (literal sizes equal, the others sizes)
    that nothing else reads."""
    inputs = {v.id for v in graph.inputs}
    count = _readers(graph)
    groups = []
    for node in graph.nodes:
        if not (node.prim.stacks and node.params["axis"] == 0
                and len(node.inputs) >= MIN_PACKED):
            continue
        parts = node.inputs
        if not all(isinstance(v, Var) and v.id in inputs and count.get(v.id) == 1
                   and v.dtype == node.out.dtype for v in parts):
            continue
        if len({v.id for v in parts}) != len(parts):
            continue
        kinds = {tuple(None if isinstance(d, Dim) else int(d) for d in v.shape) for v in parts}
        if len(kinds) == 1:
            groups.append(node)
    return groups


def _output_rows(graph):
    """{output index: (stacked Var, row)} for the results (not assigned variables nor
    branch conditions) that are the rows ``s[0], ..., s[m - 1]`` of one value ``s``,
    every row once, for ``m`` of at least ``MIN_PACKED``."""
    last = len(graph.outputs) - len(graph.writes) - len(graph.guards)
    found = {}
    for k, v in enumerate(graph.outputs[:last]):
        node = getattr(v, "node", None) if isinstance(v, Var) else None
        row = node.prim.row_of(node) if node is not None and node.prim.row_of else None
        if row is None:
            continue
        source = node.inputs[0]
        # a literal number of rows (a Dim is an int too: its value is the traced call's)
        if isinstance(source, Var) and source.ndim and not isinstance(source.shape[0], Dim):
            found.setdefault(source.id, (source, []))[1].append((k, row))
    rows = {}
    for source, members in found.values():
        m = source.shape[0]
        if m >= MIN_PACKED and sorted(r % m for _, r in members) == list(range(m)):
            for k, r in members:
                rows[k] = (source, r % m)
    return rows


def _common_name(names):
    """``params_i_0`` for ``params_0_0, params_1_0, ...``: the names' ``_``-separated
    parts, those that differ written ``i``; None where the names have no such form."""
    if not all(names):
        return None
    split = [n.split("_") for n in names]
    if len({len(s) for s in split}) != 1:
        return None
    parts = [p[0] if len(set(p)) == 1 else "i" for p in zip(*split)]
    return "_".join(parts) if parts != split[0] else None
