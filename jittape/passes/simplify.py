"""Algebraic simplification, by the ops' own rules.

An op record may hold a ``simplify(node, producer)`` rule (``producer``: var id -> the
node that makes it): it returns a better node, an operand that is the node's value (the
node is dropped), or None. The rules live with their ops (``ops/``), e.g. a broadcast
that drops a reshape adding leading size-1 axes, and the custom-rule markers, whose
only job (choosing the VJP) ends with autodiff.
"""

from ..ir import Graph, Node, Var


def simplify(graph):
    producer = {n.out.id: n for n in graph.nodes}
    rename = {}                  # var id -> the Var that replaces it

    def sub(v):
        return rename.get(v.id, v) if isinstance(v, Var) else v

    nodes = []
    for node in graph.nodes:
        if any(isinstance(v, Var) and v.id in rename for v in node.inputs):
            node = node.with_inputs(sub)
        rule = node.prim.simplify
        if rule is not None:
            better = rule(node, producer)
            if isinstance(better, Node):
                node = better.with_inputs(sub)
            elif better is not None:          # the node's value is this operand
                rename[node.out.id] = sub(better)
                continue
        producer[node.out.id] = node          # rules see the rewritten producers
        nodes.append(node)
    return Graph(graph.inputs, graph.consts, nodes, [sub(v) for v in graph.outputs],
                 graph.name, graph.checks, graph.exact_sizes)
