"""Buffer reuse: an array whose value is dead gives its memory to a later array of the
same shape and dtype.

Works on the generation order of ``fuse.schedule`` or ``fuse.nest`` (a nest is one step:
its arrays are all made before its loop and live to its end). Views (reshape, transpose,
basic indexing) share their source's memory, so a buffer is free only when its value and
every view of it are dead; inputs, constants and outputs are never reused.
"""

from ..ir import Var
from .fuse import Group, Nest, domain_key, item_nodes

def materialized(order, shared=lambda prim: False):
    """Ids of the values the generated code allocates as arrays of their own: group
    outputs and reductions, and single nodes except those for whose op ``shared(prim)``
    holds (their lowering returns a view, or a scalar)."""
    out = set()
    for item in order:
        for part in (item.groups if isinstance(item, Nest) else [item]):
            if isinstance(part, Group):
                out |= part.outputs
                if part.reduce is not None and part.reduce.out.id not in part.registers:
                    out.add(part.reduce.out.id)
            elif not shared(part.prim):
                out.add(part.out.id)
    return out


def view_roots(nodes, backend):
    """{var id: the var id of the array it lives in} for the values of ``nodes`` (in
    order) that are views, on ``backend``, of another value (through chains of views)."""
    root = {}
    for n in nodes:
        if backend in n.prim.aliases and isinstance(n.inputs[0], Var):
            root[n.out.id] = root.get(n.inputs[0].id, n.inputs[0].id)
    return root


def output_ids(graph):
    """The ids of ``graph``'s outputs (``plan_buffers``'s ``outputs``)."""
    return {v.id for v in graph.outputs if isinstance(v, Var)}


def plan_buffers(graph, order, materialized, backend="cpu", live=(), outputs=None):
    """{var id: var id of the earlier array whose buffer it takes over}.

    ``materialized`` is the set of var ids that the generated code allocates as new
    arrays (group outputs and reductions kept as arrays); ``live``, the ids of values
    read after ``order`` (by a later part of the kernel), whose buffers stay theirs;
    ``outputs``, ``output_ids(graph)`` where the caller has it (a graph in parts plans
    each part: the work stays linear in the graph's size, not in parts x outputs).
    """
    last_use = {}
    for pos, item in enumerate(order):
        for n in item_nodes(item):
            for v in n.var_inputs():
                last_use[v.id] = pos
    root = view_roots((n for item in order for n in item_nodes(item)), backend)
    # never reused: the graph's outputs and ``live`` values, and the buffers they view
    # (inputs and constants are never reused either: they are not ``materialized``)
    if outputs is None:
        outputs = output_ids(graph)
    pinned = {root.get(i, i) for i in live}
    pinned |= {b for v, b in root.items() if v in outputs}
    pinned |= {n.out.id for item in order for n in item_nodes(item) if n.out.id in outputs}
    # a buffer stays live until the last use of any value living in it
    buffer_end = {}
    for vid, pos in last_use.items():
        b = root.get(vid, vid)
        buffer_end[b] = max(buffer_end.get(b, -1), pos)
    var_of = {n.out.id: n.out for item in order for n in item_nodes(item)}
    free = {}                         # (shape key, dtype) -> [buffer var ids]
    reuse = {}
    released = set()
    for pos, item in enumerate(order):
        # allocate this item's new arrays from buffers freed before it
        for n in item_nodes(item):
            v = n.out
            if v.id in materialized and v.ndim > 0:
                slot = (domain_key(v.shape), v.dtype.str)
                pool = free.get(slot)
                if pool:
                    reuse[v.id] = pool.pop()
        # release buffers whose last reader is this item
        for n in item_nodes(item):
            for v in n.var_inputs() + [n.out]:
                b = root.get(v.id, v.id)
                if b in released or b in pinned or b not in materialized:
                    continue
                if buffer_end.get(b, -1) <= pos:
                    released.add(b)
                    var = var_of.get(b)
                    if var is not None and var.ndim > 0:
                        free.setdefault((domain_key(var.shape), var.dtype.str), []).append(b)
    return reuse
