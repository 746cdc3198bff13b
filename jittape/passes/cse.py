"""Common-subexpression elimination: one node per distinct (op, operands, parameters)."""

import numpy as np

from ..ir import Dim, Graph, Var


def _key(value):
    """A hashable key that tells a run-time size from a constant of the same value."""
    if isinstance(value, Var):
        return ("var", value.id)
    if isinstance(value, Dim):
        return ("dim", value.expr)
    if isinstance(value, tuple):
        return ("tuple",) + tuple(_key(v) for v in value)
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    if isinstance(value, float):
        return ("float", value.hex() if value == value else "nan")
    return (type(value).__name__, value)


def cse(graph):
    rename = {}              # var id -> the Var that replaces it
    seen = {}
    nodes = []

    def sub(v):
        return rename.get(v.id, v) if isinstance(v, Var) else v

    for node in graph.nodes:
        inputs = [sub(v) for v in node.inputs]
        key = (node.prim, tuple(_key(v) for v in inputs),
               tuple(sorted((k, _key(v)) for k, v in node.params.items())))
        try:
            found = seen.get(key)
        except TypeError:              # an unhashable parameter: keep the node as it is
            found, key = None, None
        if found is not None:
            rename[node.out.id] = found
            continue
        nodes.append(node.with_inputs(sub))
        if key is not None:
            seen[key] = node.out
    outputs = [sub(v) for v in graph.outputs]
    return Graph(graph.inputs, graph.consts, nodes, outputs, graph.name, graph.checks, graph.exact_sizes)
