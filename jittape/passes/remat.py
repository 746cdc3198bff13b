"""Broadcast constants recomputed inside loop bodies rather than captured as arrays.

A region's body is what depends on the loop's values; everything else stays before the
loop and is captured (loop-invariant code moves out by construction). For most values
that is right: computed once, read each step. It is wrong for an array that is only a
scalar spread out, such as the cotangent seed of a ``sum`` in a loss traced inside a
loop (``broadcast_to(1.0, x.shape)``, then ``multiply(that, 100.0)``): captured, it is
an array of n equal numbers, written once and read from memory by every step's fused
loops, one more stream per use (at n = 10^4 two such arrays pushed jt.minimize's Adam
loop out of L2). Recomputed in the body, the fusion pass reads the scalar in registers
and the array never exists.

So a captured array whose value is a chain of cheap elementwise ops over values of one
element (broadcasts of scalars, arithmetic on them) is rebuilt at the top of the body
from those one-element values, where every reader of it in the body is itself a fused
op (elementwise or a reduction): a reader that needs a real array (a matrix product, a
nested region, a carry) would make the body write it each step instead of once.
"""

import itertools

from ..ir import Graph, Node, Var
from ..ops.core import CHEAP

_FUSED_READERS = ("elementwise", "reduction")
_MOST_NODES = 6          # a longer chain is not "a scalar spread out"


def fresh_ids(graph):
    """Var ids unused anywhere in ``graph`` (its bodies included), in increasing order."""
    top = max([v.id for v in graph.inputs] + [c.var.id for c in graph.consts]
              + [n.out.id for n in graph.all_nodes()]
              + [v.id for n in graph.all_nodes() for name in n.prim.regions
                 for v in n.params[name].inputs] + [0])
    return itertools.count(top + 1)


def _one_element(v):
    return all(int(d) == 1 and not hasattr(d, "expr") for d in v.shape)


def _chain(v, producer):
    """The outer nodes that make ``v`` from one-element values (in order), or None."""
    out, seen = [], set()

    def visit(var):
        if var.id in seen or _one_element(var):
            return True
        node = producer.get(var.id)
        if (node is None or node.prim.kind != "elementwise" or node.prim.cost != CHEAP
                or node.prim.regions or len(out) >= _MOST_NODES):
            return False
        if not all(visit(u) for u in node.var_inputs()):
            return False
        seen.add(var.id)
        out.append(node)
        return True

    return out if visit(v) else None


def _readers_all_fused(body, var_id):
    if any(isinstance(o, Var) and o.id == var_id for o in body.outputs):
        return False
    for node in body.nodes:
        reads = any(u.id == var_id for u in node.var_inputs())
        if node.prim.regions:
            inner = (u.id == var_id for name in node.prim.regions
                     for n in node.params[name].all_nodes() for u in n.var_inputs())
            if reads or any(inner):
                return False
        elif reads and node.prim.kind not in _FUSED_READERS:
            return False
    return True


def spread_into_bodies(node, feeds, producer, ids):
    """Rebuild in each body of region ``node`` the captured arrays that are scalars
    spread out (see the module's doc). ``feeds``: how many of the node's first inputs
    are not captured values; ``producer``: var id -> the outer node that makes it;
    ``ids``: fresh var ids. The one-element values they are made from become captured
    inputs (appended); the arrays' own captured inputs are left for the caller to drop
    where no body reads them any more."""
    chains = {}
    for v in node.inputs[feeds:]:
        if isinstance(v, Var) and not _one_element(v) and v.id not in chains:
            chain = _chain(v, producer)
            if chain:
                chains[v.id] = chain
    if not chains:
        return
    for name in node.prim.regions:
        body = node.params[name]
        wanted = [vid for vid in chains if _readers_all_fused(body, vid)]
        if not wanted:
            continue
        made, head = {}, []                 # outer var id -> its copy in the body
        for vid in wanted:
            for src in chains[vid]:
                if src.out.id in made:
                    continue
                copy = Var(next(ids), src.out.shape, src.out.dtype)
                node_copy = Node(src.prim, [made.get(u.id, u) if isinstance(u, Var) else u
                                            for u in src.inputs], src.params, copy, src.where)
                copy.node = node_copy
                made[src.out.id] = copy
                head.append(node_copy)
        for u in {u.id: u for n in head for u in n.var_inputs() if u.id not in
                  {c.id for c in made.values()}}.values():
            if not any(isinstance(w, Var) and w.id == u.id for w in node.inputs[feeds:]):
                node.inputs.append(u)
                for other in node.prim.regions:     # every body takes the node's captured
                    g = node.params[other]          # inputs, in the node's order
                    node.params[other] = Graph(g.inputs + [u], g.consts, g.nodes, g.outputs,
                                               g.name, g.checks, g.exact_sizes)
        body = node.params[name]
        swap = {vid: made[vid] for vid in wanted}

        def sub(v):
            return swap.get(v.id, v)
        node.params[name] = Graph(body.inputs, body.consts,
                                  head + [n.with_inputs(sub) for n in body.nodes],
                                  [sub(v) if isinstance(v, Var) else v for v in body.outputs],
                                  body.name, body.checks, body.exact_sizes)
