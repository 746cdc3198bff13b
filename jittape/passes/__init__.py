"""Graph passes: size canonicalization, simplification, dead-code elimination, common
subexpressions, fusion, buffer reuse."""

from .dce import dce  # noqa: F401
from .cse import cse  # noqa: F401
from .simplify import simplify  # noqa: F401
from .sizes import canonical_sizes  # noqa: F401
from .fuse import Group, Nest, nest, schedule  # noqa: F401
from .memory import plan_buffers  # noqa: F401
from ..ir import Var


def optimize(graph):
    """The passes every compiled graph goes through, in order; a region's body goes
    through them first, on its own (its nodes depend on the loop's index, so nothing
    of it merges with the nodes around it)."""
    graph = canonical_sizes(graph)
    for node in graph.nodes:
        if node.prim.regions:
            _optimize_regions(node)
    return dce(cse(simplify(dce(graph))))


def _optimize_regions(node):
    """Optimize the node's bodies in place; its inputs become the outer values they
    still read."""
    read, made = set(), set()
    for name in node.prim.regions:
        body = node.params[name] = dce(cse(simplify(dce(node.params[name]))))
        made |= {body.inputs[0].id} | {n.out.id for n in body.all_nodes()}
        read |= {v.id for n in body.all_nodes() for v in n.var_inputs()}
        read |= {v.id for v in body.outputs if isinstance(v, Var)}
    node.inputs = [v for v in node.inputs if not isinstance(v, Var) or v.id in read - made]
