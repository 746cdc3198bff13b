"""Algebraic simplification: drop reshapes that only put size-1 axes in front of a value
that is then broadcast (the backward pass of every reduction makes one), and the
``custom_gradient`` markers, whose only job (choosing the VJP) ends with autodiff.

``broadcast_to(reshape(x, (1, ..., 1) + x.shape), shape)`` is ``broadcast_to(x, shape)``:
broadcasting aligns trailing axes, so leading size-1 axes change nothing. The reshape
then usually becomes dead, and a 0-d value broadcast straight into a fused loop costs no
array at all.
"""

from ..ir import Graph, Node, Var, expr_of


def _adds_leading_ones(node):
    x = node.inputs[0]
    if not isinstance(x, Var):
        return False
    lead = node.out.ndim - x.ndim
    return (lead >= 0 and all(d == 1 and not hasattr(d, "expr") for d in node.out.shape[:lead])
            and [expr_of(d) for d in node.out.shape[lead:]] == [expr_of(d) for d in x.shape])


def simplify(graph):
    producer = {n.out.id: n for n in graph.nodes}
    rename = {}                  # var id -> the Var that replaces it

    def sub(v):
        return rename.get(v.id, v) if isinstance(v, Var) else v

    nodes = []
    for node in graph.nodes:
        if node.prim.name == "custom_gradient":
            rename[node.out.id] = sub(node.inputs[0])
            continue
        if any(isinstance(v, Var) and v.id in rename for v in node.inputs):
            node = Node(node.prim, [sub(v) for v in node.inputs], node.params, node.out,
                        node.where)
            node.out.node = node
        if node.prim.name == "broadcast_to" and isinstance(node.inputs[0], Var):
            src = producer.get(node.inputs[0].id)
            if src is not None and src.prim.name == "reshape" and _adds_leading_ones(src):
                node = Node(node.prim, [src.inputs[0]] + node.inputs[1:], node.params,
                            node.out, node.where)
                node.out.node = node
        nodes.append(node)
    return Graph(graph.inputs, graph.consts, nodes, [sub(v) for v in graph.outputs],
                 graph.name, graph.checks, graph.exact_sizes)
