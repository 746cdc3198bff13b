"""Fusion: elementwise chains (with broadcasting), and reductions of them, become one
loop nest each.

``schedule`` turns the node list into the order code is generated in: single nodes
(matrix products, reshapes, indexing, ...) and ``Group``s. A group is a set of
elementwise nodes over one loop domain (the output shape, its sizes compared by their
run-time expressions), with at most one reduction of a value of that domain. A
value computed in a group is written to an array only if something outside the group
(or the caller) reads it; otherwise it lives in a register for one loop iteration.

A reduction does not close its group: elementwise work over the same domain that does
not read the reduction's result joins the same loop. That is how a loss and its
gradient share one pass over memory: the backward pass of ``sum(f(x))`` needs only the
seed, not the sum, so ``f``'s derivative is computed in the loop that sums ``f``.
"""

from ..ir import expr_of

REDUCTIONS = ("sum", "max", "min", "prod")


def is_elementwise(node):
    return "scalar" in node.prim.lowerings or node.prim.name == "broadcast_to"


def domain_key(shape):
    return tuple(expr_of(d) for d in shape)


class Group:
    """Elementwise nodes over one domain and at most one reduction of one of them (the
    reduction's result is read only after the group)."""

    def __init__(self, domain):
        self.domain = domain             # the loop shape (ints and Dims)
        self.nodes = []
        self.reduce = None               # a reduction node closing the group
        self.outputs = set()             # ids of member values read outside the group

    @property
    def key(self):
        return domain_key(self.domain)

    def member_ids(self):
        return {n.out.id for n in self.nodes}

    def __repr__(self):
        names = ", ".join(f"{n.prim.name}->{n.out!r}" for n in self.nodes)
        tail = f" then {self.reduce.prim.name}->{self.reduce.out!r}" if self.reduce else ""
        return f"Group[{names}{tail}]"


def schedule(nodes, live_out):
    """The generation order of ``nodes``: Nodes and Groups, each after everything it reads.

    ``live_out``: ids of values read after these nodes (the graph's outputs, or values
    a later section of the code reads); a group writes those to arrays.
    """
    order = []
    open_groups = {}                     # domain key -> open Group
    owner = {}                           # var id -> the open Group that computes it

    def close(group):
        if open_groups.get(group.key) is group:
            del open_groups[group.key]
            for n in group.nodes + ([group.reduce] if group.reduce else []):
                owner.pop(n.out.id, None)
            order.append(group)

    for node in nodes:
        readers = {id(owner[v.id]): owner[v.id] for v in node.var_inputs() if v.id in owner}
        if is_elementwise(node):
            key = domain_key(node.out.shape)
            group = open_groups.get(key)
            if group is not None and group.reduce is not None and any(
                    v.id == group.reduce.out.id for v in node.var_inputs()):
                close(group)                 # it reads the reduction: after the loop
                group = None
            for other in readers.values():
                if other is not group:
                    close(other)
            if group is None:
                group = open_groups[key] = Group(node.out.shape)
            group.nodes.append(node)
            owner[node.out.id] = group
        elif node.prim.name in REDUCTIONS and node.inputs[0].ndim > 0:
            src = node.inputs[0]
            key = domain_key(src.shape)
            group = open_groups.get(key)
            if group is None or owner.get(src.id) is not group or group.reduce is not None:
                group = None
            for other in readers.values():
                if other is not group:
                    close(other)
            if group is None:                # a reduction of a value computed elsewhere
                group = Group(src.shape)
                group.reduce = node
                order.append(group)
            else:                            # stays open for work not reading the result
                group.reduce = node
                owner[node.out.id] = group
        else:
            for other in readers.values():
                close(other)
            order.append(node)
    for group in list(open_groups.values()):
        close(group)
    # which member values the rest of the program reads
    group_of = {}
    for item in order:
        if isinstance(item, Group):
            for n in item.nodes:
                group_of[n.out.id] = item
    for item in order:
        nodes = item.nodes + ([item.reduce] if item.reduce else []) if isinstance(item, Group) else [item]
        for n in nodes:
            for v in n.var_inputs():
                g = group_of.get(v.id)
                if g is not None and g is not item:
                    g.outputs.add(v.id)
    for vid in live_out:
        if vid in group_of:
            group_of[vid].outputs.add(vid)
    return order
