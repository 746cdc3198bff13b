"""Dead-code elimination: drop nodes (and constants) no output depends on."""

from ..ir import Graph, Var


def dce(graph):
    needed = {v.id for v in graph.outputs if isinstance(v, Var)}
    kept = []
    for node in reversed(graph.nodes):
        if node.out.id in needed:
            kept.append(node)
            needed.update(v.id for v in node.var_inputs())
    kept.reverse()
    consts = [c for c in graph.consts if c.var.id in needed]
    return Graph(graph.inputs, consts, kept, graph.outputs, graph.name, graph.checks, graph.exact_sizes)
