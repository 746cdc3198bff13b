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

A placement (``index_add`` of a value into zeros at ints and slices, the gradient of
``x[1:]`` or ``x[:, 0]``) joins a group over its output where the backend can read its
operand at shifted indices (``Policy.placements``): each element is the operand's
element or zero, so the gradients of ``x[1:]`` and ``x[:-1]`` and their sum are one
pass, not a zero fill and a scatter each. Its operand is read at other indices than
the loop's, so it is computed before the loop, never in the same one: the group that
computes it stays open for more work and is only emitted first (``Group.needs``), so
the rest of the backward pass over the operand's domain still joins its loop.

A group that reads an earlier one only through such placements of slices that start a
few elements in (``shifted``) can still share that group's loop, one element per
iteration, with the values it reads d iterations late carried in registers: ``follow``
moves it next to that group, and the CPU's code runs the two in one loop.
"""

from ..ir import Dim, expr_of, slice_length

def is_elementwise(node):
    return node.prim.kind == "elementwise"


def placement(node):
    """For a node whose op ``places`` its operand (``index_add``) at ints and slices
    with literal bounds (each output element receives at most one operand element), one entry per
    output axis: ``("int", i)``, ``("slice", start, stop, step)`` or None (the whole
    axis); otherwise None."""
    if not node.prim.places or len(node.inputs) != 1 or node.out.ndim == 0:
        return None
    src, out = node.inputs[0], node.out
    index = node.params["index"]
    if len(index) > out.ndim or not hasattr(src, "shape"):
        return None
    spec, picked = [], []
    for axis, item in enumerate(index):
        if item[0] == "int" and type(item[1]) is int and \
                -out.shape[axis] <= item[1] < out.shape[axis]:
            spec.append(("int", item[1]))
        elif item[0] == "slice" and all(v is None or type(v) is int for v in item[1:]) \
                and item[3] != 0:
            spec.append(item)
            picked.append(slice_length(out.shape[axis], *item[1:]))
        else:
            return None
    spec += [None] * (out.ndim - len(index))
    picked += list(out.shape[len(index):])
    # the operand fills the selection (no broadcasting of a smaller operand); sizes the
    # graph checks equal may print differently (``x[1:]`` and ``x[:-1]``), and the loop
    # reads the operand within its own extent whatever they are
    if len(picked) != src.ndim or any(
            isinstance(a, Dim) != isinstance(b, Dim) or int(a) != int(b)
            for a, b in zip(picked, src.shape)):
        return None
    return tuple(spec)


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
        self.registers = set()           # ids of values kept in a register for a row (Nest)
        self.placements = {}             # out id of a placement node -> its ``placement``
        self.needs = []                  # open groups to emit before this one

    @property
    def key(self):
        return domain_key(self.domain)

    def member_ids(self):
        return {n.out.id for n in self.nodes}

    def __repr__(self):
        names = ", ".join(f"{n.prim.name}->{n.out!r}" for n in self.nodes)
        tail = f" then {self.reduce.prim.name}->{self.reduce.out!r}" if self.reduce else ""
        return f"Group[{names}{tail}]"


def schedule(nodes, live_out, placements=False):
    """The generation order of ``nodes``: Nodes and Groups, each after everything it reads.

    ``live_out``: ids of values read after these nodes (the graph's outputs, or values
    a later section of the code reads); a group writes those to arrays. ``placements``:
    whether placements join groups (see the module's docstring).
    """
    order = []
    open_groups = {}                     # domain key -> open Group
    owner = {}                           # var id -> the open Group that computes it

    def close(group):
        if open_groups.get(group.key) is group:
            for first in group.needs:    # what its placements read: complete before it
                close(first)
            del open_groups[group.key]
            for n in group.nodes + ([group.reduce] if group.reduce else []):
                owner.pop(n.out.id, None)
            order.append(group)

    def needs(a, b):
        """Whether open group ``a`` must be emitted after ``b`` (the chains are short:
        a link per placement reading another open group)."""
        return a is b or any(needs(c, b) for c in a.needs if open_groups.get(c.key) is c)

    def still_open(group, key):
        return group if group is not None and open_groups.get(key) is group else None

    for node in nodes:
        readers = {id(owner[v.id]): owner[v.id] for v in node.var_inputs() if v.id in owner}
        placed = placement(node) if placements else None
        if is_elementwise(node) or placed is not None:
            key = domain_key(node.out.shape)
            group = open_groups.get(key)
            source = owner.get(node.inputs[0].id) if placed is not None else None
            if source is not None and group is not None and needs(source, group):
                close(group)                 # its operand, read at other indices: complete
                group = None
            if group is not None and group.reduce is not None and any(
                    v.id == group.reduce.out.id for v in node.var_inputs()):
                close(group)                 # it reads the reduction: after the loop
                group = None
            for other in readers.values():
                if other is not group and other is not source:
                    close(other)
            group = still_open(group, key)   # (closed first for what another read)
            if group is None:
                group = open_groups[key] = Group(node.out.shape)
            group.nodes.append(node)
            if placed is not None:
                group.placements[node.out.id] = placed
                if (source is not None and still_open(source, source.key)
                        and source not in group.needs):
                    group.needs.append(source)
            owner[node.out.id] = group
        elif node.prim.kind == "reduction" and node.inputs[0].ndim > 0:
            src = node.inputs[0]
            key = domain_key(src.shape)
            group = open_groups.get(key)
            if group is None or owner.get(src.id) is not group or group.reduce is not None:
                group = None
            for other in readers.values():
                if other is not group:
                    close(other)
            group = still_open(group, key)
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


SHIFT_LIMIT = 4        # the largest offset of a slice that a shifted placement may have


def shifted(a, b):
    """For groups ``a`` and ``b`` (in that order), how ``b`` can run in ``a``'s loop:
    ``{placement's out id: offset}`` where every value of
    ``a`` that ``b`` reads, it reads through a placement of a slice ``[start:stop]`` of
    ``b``'s one axis (start 0 to SHIFT_LIMIT, stop none or -1 to -SHIFT_LIMIT, step 1),
    whose element at index i is ``a``'s at j = i - start (the offset); else None.

    Such a ``b`` (the gradient of ``x[1:]`` and ``x[:-1]``, summed) has its element i
    computed in ``a``'s iteration i: its operands of offset 0 are that iteration's
    values, those of offset d the values d iterations before, carried in registers; the
    few elements past ``a``'s last (i >= len(a)) follow the loop. Each element is
    the same expression of the same values, so the same bits; what changes is that
    ``a``'s values go from registers to ``b`` instead of through arrays, a store and a
    load shifted by an element each (Adam on a 100-dimensional Rosenbrock: its step's
    gradient and the gradient's assembly, 171 -> 121 us per 1000 steps, hand-edited).

    ``b``'s reduction, if any, must give the same result in any order (of integers or
    booleans, to a scalar): it is one accumulator in ``a``'s loop, whatever ``a``'s own
    reduction does with lanes."""
    if not (isinstance(a, Group) and isinstance(b, Group) and a is not b
            and len(a.domain) == 1 and len(b.domain) == 1 and b.placements):
        return None
    red = b.reduce
    if red is not None and (red.out.ndim != 0 or red.out.dtype.kind not in "iub"):
        return None
    ours = a.member_ids()
    avoid = {a.reduce.out.id} if a.reduce is not None else set()
    offsets = {}
    for n in b.nodes + ([red] if red is not None else []):
        for v in n.var_inputs():
            if v.id in avoid:
                return None
            if v.id not in ours:
                continue
            spec = b.placements.get(n.out.id)
            if spec is None or len(spec) != 1 or spec[0] is None or spec[0][0] != "slice":
                return None
            _, start, stop, step = spec[0]
            start = 0 if start is None else start
            if not (step in (None, 1) and 0 <= start <= SHIFT_LIMIT
                    and (stop is None or -SHIFT_LIMIT <= stop < 0)):
                return None
            offsets[n.out.id] = start
    return offsets or None


def follow(order):
    """``order`` with each group that can run in an earlier group's loop (``shifted``)
    moved to just after it, where it reads nothing computed between them (a valid
    order: nothing between them reads what it computes). The scalar work between them
    that does not wait for the earlier group's loop goes before that loop (``_early``):
    it no longer runs after the moved group, where a step of a small loop would wait
    for it (Adam's bias corrections for its next step at n = 10: 62 against 69 us per
    1000 steps in the kernel, with the loops apart)."""
    order = list(order)
    i = 0
    while i < len(order):
        b = order[i]
        if isinstance(b, Group) and b.placements:
            reads = {v.id for n in item_nodes(b) for v in n.var_inputs()}
            for k in range(i - 1, -1, -1):
                a = order[k]
                if shifted(a, b) is not None:
                    if k + 1 < i:
                        del order[i]
                        early, between = _early(a, order[k + 1:i], order[:k])
                        order[k + 1:i] = [b] + between
                        order[k:k] = early
                        i += len(early) + len(between) - (i - k - 1)
                    break
                if any(n.out.id in reads for n in item_nodes(a)):
                    break            # it reads what this item computes: stays after it
        i += 1
    return order


def _early(a, between, before):
    """(The scalar groups' nodes among ``between``, the items after group ``a``, that
    read only what ``before``, the items before ``a``, and each other compute, as one
    scalar group to go before ``a`` (or none); ``between`` without them)."""
    done = {n.out.id for item in before for n in item_nodes(item)}
    later = {n.out.id for item in [a] + between for n in item_nodes(item)}
    moved, rest = [], []
    for item in between:
        if isinstance(item, Group) and item.domain == () and item.reduce is None:
            take = [n for n in item.nodes
                    if all(v.id not in later or v.id in done for v in n.var_inputs())
                    and not done.add(n.out.id)]
            if take:
                moved += take
                item.nodes = [n for n in item.nodes if n not in take]
                if not item.nodes:
                    continue
        rest.append(item)
    if not moved:
        return [], between
    group = Group(())
    group.nodes = moved
    ids = {n.out.id for n in moved}
    # what the rest reads of the moved values is written out, as the groups wrote what
    # was read outside them
    group.outputs = {v.id for item in [a] + rest for n in item_nodes(item)
                     for v in n.var_inputs() if v.id in ids}
    for item in between:
        if isinstance(item, Group):
            group.outputs |= item.outputs & ids
            item.outputs -= ids
    return [group], rest


class Nest:
    """Consecutive groups that share their outer loop (over the rows of their first axis)
    and read what an earlier one of them computes only at the same row: one loop over
    the rows, each group's inner loops in its body, in order. A softmax over rows (a
    row's max, then exp and its sum, then log) is one pass over the rows instead of
    several loops (each of which costs Numba compile time), and what a group computes
    once per row (a row's max, its sum) is read from a register by the groups after it
    (``row_values``), and kept in no array unless something after the nest reads it
    (``registers``).

    ``row_source``: reshapes between one value per row and another (``[n] -> [n, 1]``)
    of values the nest computes; inside the nest a read of such a view is a read of its
    source. The reshape is emitted after the nest only if something there reads it."""

    def __init__(self, size):
        self.size = size                 # the first axis of every group (an int or a Dim)
        self.groups = []
        self.views = []                  # the reshape nodes read through row_source
        self.row_source = {}             # var id of a view -> the var it shows
        self.row_values = set()          # ids of values computed once per row
        self.registers = set()           # those of them no array keeps

    def nodes(self):
        """Every node the nest computes or reads through."""
        return [n for g in self.groups for n in item_nodes(g)] + self.views

    def __repr__(self):
        return f"Nest[{', '.join(map(repr, self.groups))}]"


def one_per_row(v):
    """Whether ``v`` has one element per row: its axes after the first of literal size 1."""
    return v.ndim >= 1 and all(not isinstance(d, Dim) and d == 1 for d in v.shape[1:])


def row_reduction(group):
    """Whether the group's reduction leaves one value per row: it reduces every axis but
    the first (a row's sum, max, ...)."""
    red = group.reduce
    rank = len(group.domain)
    return red is not None and rank >= 2 and set(red.params["axis"]) == set(range(1, rank))


def item_nodes(item):
    """The nodes of an item of the order: a node, a group's nodes, a nest's."""
    if isinstance(item, Group):
        return item.nodes + ([item.reduce] if item.reduce else [])
    if isinstance(item, Nest):
        return item.nodes()
    return [item]


def nest(order, joinable, live_out):
    """``order`` (from ``schedule``) with runs of groups over the same rows made Nests.

    ``joinable(group, open_nest)``: whether the target can run the group inside the
    open nest (or, ``open_nest`` None, open one with it). A group joins the open nest if
    its first axis is the nest's and every value it reads from the nest is complete at
    the row being computed (of the group's rank, with that first axis; not a reduction
    along the rows). Nodes between the groups that read
    nothing the nest computes move before it; reshapes between one value per row and
    another are read through (``Nest.row_source``); any other node closes the nest."""
    out = []
    current = None
    pending = []                         # nodes between the nest's groups, in order
    complete = {}                        # var id -> whether complete at its row

    def finish():
        nonlocal current
        if current is None:
            return
        if len(current.groups) == 1:     # nothing shared: the order as it was
            out.append(current.groups[0])
            out.extend(pending)
        else:
            out.extend(n for n in pending if n not in current.views)
            out.append(current)
        current = None
        pending.clear()
        complete.clear()

    def fits(group, key):
        rank = len(group.domain)
        if any(n.out.id in group.placements and n.inputs[0].id in complete for n in group.nodes):
            return False                 # a placement reads its operand at other rows
        return all(complete[v.id] and v.ndim == rank and expr_of(v.shape[0]) == key
                   for n in item_nodes(group) for v in n.var_inputs() if v.id in complete)

    def add(group):
        current.groups.append(group)
        for n in group.nodes:
            complete[n.out.id] = True
        red = group.reduce
        if red is not None:              # a reduction along the rows is done after them
            complete[red.out.id] = red.out.ndim > 0 and 0 not in red.params["axis"]

    for item in order:
        if isinstance(item, Group):
            ok = len(item.domain) >= 1 and not _literal_one(item.domain[0])
            key = expr_of(item.domain[0]) if ok else None
            if (current is not None and ok and key == expr_of(current.size)
                    and fits(item, key) and joinable(item, current)):
                add(item)
                continue
            finish()
            if ok and joinable(item, None):
                current = Nest(item.domain[0])
                add(item)
            else:
                out.append(item)
        elif current is None:
            out.append(item)
        else:
            ins = [v for v in item.var_inputs() if v.id in complete]
            if not ins:
                pending.append(item)     # reads nothing the nest computes
            elif (item.prim.keeps_order and complete[ins[0].id] and one_per_row(ins[0])
                    and one_per_row(item.out) and expr_of(ins[0].shape[0]) == expr_of(current.size)
                    and expr_of(item.out.shape[0]) == expr_of(current.size)):
                current.views.append(item)
                current.row_source[item.out.id] = current.row_source.get(ins[0].id, ins[0])
                complete[item.out.id] = True
                pending.append(item)
            else:
                finish()
                out.append(item)
    finish()
    return _place_views_and_registers(out, live_out)


def _literal_one(d):
    return not isinstance(d, Dim) and d == 1


def _place_views_and_registers(order, live_out):
    """A nest's views that something after it reads are emitted after it (with the views
    they are made of); the values a nest computes once per row that nothing outside it
    reads stay in registers."""
    # Both questions (is a value read after this item? by an item other than this one?)
    # are answered from one count per value, so the pass stays linear in the order
    live_out = set(live_out)
    last_read = {}                              # value id -> the last item reading it
    for k, item in enumerate(order):
        for i in _reads(item):
            last_read[i] = k
    placed = []
    for k, item in enumerate(order):
        placed.append(item)
        if isinstance(item, Nest):
            needed = set()                      # views read by the views read later
            for n in reversed(item.views):      # a view read later, and the views it reads
                i = n.out.id
                if i in needed or i in live_out or last_read.get(i, -1) > k:
                    needed.add(i)
                    needed |= _reads(n)
            placed.extend(n for n in item.views if n.out.id in needed)
    reads = [_reads(item) for item in placed]
    readers = {}                                # value id -> how many placed items read it
    for r in reads:
        for i in r:
            readers[i] = readers.get(i, 0) + 1
    for k, item in enumerate(placed):
        if not isinstance(item, Nest):
            continue
        mine = reads[k]

        def outside(i):
            return i in live_out or readers.get(i, 0) > (1 if i in mine else 0)

        for g in item.groups:
            ids = [n.out.id for n in g.nodes if one_per_row(n.out)]
            if row_reduction(g) and one_per_row(g.reduce.out):
                ids.append(g.reduce.out.id)
            g.registers = {i for i in ids if not outside(i)}
            g.outputs -= g.registers
            item.row_values.update(ids)
            item.registers |= g.registers
    return placed


def _reads(item):
    """Ids of the values an item of the order (a node, a group, a nest) reads."""
    return {v.id for n in item_nodes(item) for v in n.var_inputs()}
