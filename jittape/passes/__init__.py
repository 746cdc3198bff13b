"""Graph passes: size canonicalization, simplification, dead-code elimination, common
subexpressions, loops' counter chains a step ahead, fusion, buffer reuse, and the
kernel's packed inputs and outputs."""

from .dce import dce  # noqa: F401
from .cse import cse  # noqa: F401
from .simplify import simplify  # noqa: F401
from .sizes import canonical_sizes, implied_bounds_dropped  # noqa: F401
from .fuse import Group, Nest, nest, schedule  # noqa: F401
from .memory import plan_buffers  # noqa: F401
from .packing import pack_arguments  # noqa: F401
from .ahead import steps_ahead
from .remat import fresh_ids, spread_into_bodies
from ..ir import Graph, Var


def optimize(graph, check_numerics=False):
    """The passes every compiled graph goes through, in order; a region's body goes
    through them first, on its own (its nodes depend on the loop's values, so nothing
    of it merges with the nodes around it), once the outputs of the region that
    nothing reads are dropped from it. Then, but under ``check_numerics``, the scalars
    that while loops compute from their counters are computed a step ahead (``ahead``)."""
    graph = dce(canonical_sizes(implied_bounds_dropped(graph)))
    ids = fresh_ids(graph)
    _optimize_regions(graph, ids)
    if not check_numerics:
        graph = steps_ahead(graph, ids)
    return dce(cse(simplify(graph)))


def projections(graph):
    """{region var id: the indices of its outputs that ``graph`` reads} (its
    ``scan_output`` nodes, in bodies too)."""
    used = {}
    for node in graph.all_nodes():
        if node.prim.kind == "loop" and node.prim.projects:
            used.setdefault(node.inputs[0].id, set()).add(node.params["index"])
    return used


def _optimize_regions(graph, ids):
    """Optimize the bodies of ``graph``'s regions in place (inner regions first); a
    region's inputs become the outer values its bodies still read. (``ids``: fresh var
    ids, for the broadcast constants a body recomputes: ``remat``.)"""
    used = projections(graph)
    producer = {n.out.id: n for n in graph.nodes}
    for node in graph.nodes:
        if not node.prim.regions:
            continue
        spread_into_bodies(node, node.prim.bound(node)[1], producer, ids)
        read, made = set(), set()
        for name in node.prim.regions:
            own = node.prim.bound(node, name)[0]
            body = node.params[name]
            drop = set(node.prim.droppable(node)) - used.get(node.out.id, set())
            if drop:                              # per-step values nothing reads: not kept
                body = Graph(body.inputs, body.consts, body.nodes,
                             [None if j in drop else v for j, v in enumerate(body.outputs)],
                             body.name, body.checks, body.exact_sizes)
            body = dce(cse(simplify(dce(body))))
            _optimize_regions(body, ids)
            node.params[name] = body
            made |= {v.id for v in body.inputs[:own]} | {n.out.id for n in body.all_nodes()}
            read |= {v.id for n in body.all_nodes() for v in n.var_inputs()}
            read |= {v.id for v in body.outputs if isinstance(v, Var)}
        feeds = node.prim.bound(node)[1]
        captured = [k for k in range(feeds, len(node.inputs))
                    if not isinstance(node.inputs[k], Var) or node.inputs[k].id in read - made]
        for name in node.prim.regions:            # the body's captured inputs follow the node's
            own = node.prim.bound(node, name)[0]
            body = node.params[name]
            node.params[name] = Graph(
                body.inputs[:own] + [body.inputs[own - feeds + k] for k in captured],
                body.consts, body.nodes, body.outputs, body.name, body.checks,
                body.exact_sizes)
        node.inputs = node.inputs[:feeds] + [node.inputs[k] for k in captured]
