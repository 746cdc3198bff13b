"""Python loops rolled into scans, on the forward trace before autodiff.

A Python ``for`` loop over traced values records the same nodes once per iteration:
the trace, the passes and Numba's compile grow with the trip count. ``roll`` finds runs
of blocks that repeat exactly and makes each run one scan region (``regions.py``),
which the backward pass then differentiates as a loop; what does not repeat (a first or
last step that differs, a body whose shapes or ops change from step to step) stays
straight-line code, as traced.

Blocks repeat when their nodes have the same signature, position by position: the op
and its parameters, the line of the user's code that made it, the operands' shapes and
dtypes (their literal values for non-array operands). Then each operand must play the
same part in every block:

- a value of the same block (at the same position);
- a value of the previous block: a carry, whose value before the first block (one for
  every operand reading it) is its initial value;
- the same value from before the run (captured);
- a value from before the run that differs per block, of one shape: the blocks read
  one element each of their stack (``ops.stack``: the weights of the layers of a deep
  network);
- for ``x[t]`` reads (``getitem`` with an int first index ``t``), ``t`` advancing by
  the same step (down too: ``reversed(range(T))``): the blocks read one element each
  of a slice of ``x``.

Values of the run read after it are the final carries, or the blocks' values stacked
(``ys``) and read at their step. A run is rolled from ``MIN_REPEATS`` blocks and
``MIN_NODES`` nodes on; values that guards or assigned variables hold are left as they
are (the run that makes them is not rolled), and so is a run whose block is large and
made of alike layers of other sizes (``ALIKE_BLOCK``: code generation shares them as
parts).
"""

from . import ir, ops, tree
from .ir import Var
from .passes import repeats
from .passes.cse import _key
from .ops.indexing import getitem_prim
from .regions import LOOP_VALUE, _region
from .trace import Tracer

MIN_REPEATS = 3
MIN_NODES = 24
TRIES = 4                   # later occurrences of a node's signature tried as its period
# A run whose block has this many nodes or more, made of alike layers of other sizes
# (``passes.repeats``: its tokens repeat inside it), stays unrolled up to UNROLLED_ALIKE
# nodes in all: its layers compile as parts shared by their code, where the rolled loop
# would be one body of them all, with every layer's weights and residuals as the loop's
# inputs and outputs (an MLP of 160 layers whose widths recur every 48: 25 s rolled)
ALIKE_BLOCK = 48
UNROLLED_ALIKE = 2048


def roll(trace, results):
    """Roll the repeated runs of ``trace.nodes`` in place; ``results`` are the Vars
    read after the trace (outputs). Returns {old var id: new Var} for the values of
    rolled runs that something after them reads."""
    nodes = trace.nodes
    if len(nodes) < MIN_REPEATS * 2:
        return {}
    pinned = _pinned(trace)
    sigs = [_signature(n) for n in nodes]
    pos = {n.out.id: k for k, n in enumerate(nodes)}
    nxt, last = [None] * len(nodes), {}
    for k in range(len(nodes) - 1, -1, -1):
        nxt[k] = last.get(sigs[k])
        last[sigs[k]] = k
    alike = _Alike(nodes)
    plans, i = [], 0
    while i < len(nodes):
        plan = _find(nodes, sigs, pos, nxt, i, alike)
        if plan is None:
            i += 1
            continue
        plans.append(plan)
        i = plan.end
    if not plans:
        return {}
    return _rewrite(trace, nodes, plans, pos, results, pinned)


def _pinned(trace):
    """Ids of values the trace holds besides its nodes: guards' conditions, variables'
    values and reads."""
    ids = {v.id for v, _ in trace.guards}
    for state in trace.variables.values():
        for v in [state.value, state.read] + list(state.reads):
            if v is not None:
                ids.add(v.id)
    return ids


def _signature(node):
    """What must be equal, position by position, in blocks that repeat."""
    params = node.params
    if node.prim is getitem_prim and _step_index(node) is not None:
        params = dict(params, index=("step",) + tuple(params["index"][1:]))
    # shapes by their sizes: a size of another input that is equal now is checked equal
    # at run time where the blocks' values are stacked (``ops.stack``)
    operands = tuple(("v", _sizes(v.shape), v.dtype.str) if isinstance(v, Var) else ("l", _key(v))
                     for v in node.inputs)
    try:
        items = tuple(sorted((k, _key(v)) for k, v in params.items()))
        hash(items)
    except TypeError:                  # an unhashable parameter: never the same
        items = ("node", id(node))
    return node.prim, node.where, operands, items, _sizes(node.out.shape), node.out.dtype.str


def _sizes(shape):
    return tuple(int(d) for d in shape)


def _step_index(node):
    """``t`` of ``x[t, ...]`` (a getitem whose first index is an int, without index
    arrays), or None."""
    index = node.params.get("index")
    if (len(node.inputs) == 1 and index and index[0][0] == "int"
            and node.inputs[0].ndim > 0):
        return index[0][1]
    return None


class _Plan:
    def __init__(self, start, period, repeats, slots, steps):
        self.start, self.period, self.repeats = start, period, repeats
        self.slots = slots            # (i, k) -> ("in", i') | ("carry", i', init) | ("same", v) | ("per",)
        self.steps = steps            # i -> (t0, step) for x[t] reads
        self.end = start + period * repeats

    def node(self, nodes, j, i):
        return nodes[self.start + j * self.period + i]


def _find(nodes, sigs, pos, nxt, a, alike):
    j, tries = nxt[a], 0
    while j is not None and tries < TRIES:
        p = j - a
        run = 0
        while j + run < len(nodes) and sigs[a + run] == sigs[j + run]:
            run += 1
        m = 1 + run // p
        if m >= MIN_REPEATS and p * m >= MIN_NODES:
            plan = _plan(nodes, pos, a, p, m)
            if plan is not None and not _alike_layers(alike, plan):
                return plan
        j, tries = nxt[j], tries + 1
    return None


class _Alike:
    """The size-free tokens of the trace's nodes (``passes.repeats``), made when a
    large block first asks."""

    def __init__(self, nodes):
        self.nodes = nodes
        self._windows = None

    def equal(self, i, j, n):
        if self._windows is None:
            self._windows = repeats.Windows(repeats.tokens(self.nodes))
        return self._windows.equal(i, j, n)


def _alike_layers(alike, plan):
    """Whether the run of ``plan`` stays unrolled: its block is large and made of alike
    layers (its tokens repeat inside it at a shorter period, its first layer aside: the
    first reads the run's input), and the run is not too long unrolled (ALIKE_BLOCK)."""
    a, p = plan.start, plan.period
    if p < ALIKE_BLOCK or p * plan.repeats > UNROLLED_ALIKE:
        return False
    return any(alike.equal(a + q, a + 2 * q, p - 2 * q) for q in range(1, p // 3 + 1))


def _plan(nodes, pos, a, p, m):
    """The parts the operands of blocks ``a + j*p`` (j < m) play, from the first two
    blocks, checked in the next ones (the run ends at the first that differs); None
    when fewer than MIN_REPEATS blocks agree."""
    def at(v):
        return pos.get(v.id, -1) if isinstance(v, Var) else None

    slots, steps = {}, {}
    for i in range(p):
        n0, n1 = nodes[a + i], nodes[a + p + i]
        if n0.prim.regions or n0.prim.kind == "loop":
            return None                      # (loops in loops: the inner one stays as it is)
        if n0.prim is getitem_prim and _step_index(n0) is not None:
            # x[t] rolls where x is one value from before the run (a slice of it is the
            # loop's xs); another array per step, a carry or a value of the step does not
            if n0.inputs[0] is not n1.inputs[0] or not at(n0.inputs[0]) < a:
                return None
            t0, t1 = _step_index(n0), _step_index(n1)
            if t0 < 0 or t1 == t0 or t1 < 0:
                return None
            steps[i] = (t0, t1 - t0)
        for k, (v0, v1) in enumerate(zip(n0.inputs, n1.inputs)):
            if not isinstance(v1, Var):
                continue
            q0, q1 = at(v0), at(v1)
            if a + p <= q1 < a + 2 * p:
                if q0 != q1 - p:
                    return None
                slots[i, k] = ("in", q1 - a - p)
            elif a <= q1 < a + p:
                if q0 >= a:
                    return None
                slots[i, k] = ("carry", q1 - a, v0)
            elif q1 < a and q0 < a:
                slots[i, k] = ("same", v0) if v0 is v1 else ("per",)
            else:
                return None
    inits = {}
    for slot in slots.values():
        if slot[0] == "carry" and inits.setdefault(slot[1], slot[2]) is not slot[2]:
            return None                      # one carry, two values before the run
    for j in range(2, m):
        if not _agrees(nodes, pos, a, p, j, slots, steps):
            m = j
            break
    for t0, step in steps.values():          # (x[t] going down: never below 0)
        while m and t0 + (m - 1) * step < 0:
            m -= 1
    if m < MIN_REPEATS or p * m < MIN_NODES:
        return None
    return _Plan(a, p, m, slots, steps)


def _agrees(nodes, pos, a, p, j, slots, steps):
    base = a + j * p
    for i in range(p):
        n = nodes[base + i]
        if i in steps:
            t0, s = steps[i]
            if _step_index(n) != t0 + j * s:
                return False
        for k, v in enumerate(n.inputs):
            slot = slots.get((i, k))
            if slot is None:
                continue
            q = pos.get(v.id, -1)
            kind = slot[0]
            if kind == "in" and q != base + slot[1]:
                return False
            if kind == "carry" and q != base - p + slot[1]:
                return False
            if kind == "same" and v is not slot[1]:
                return False
            if kind == "per" and q >= a:
                return False
    return True


def _rewrite(trace, nodes, plans, pos, results, pinned):
    """Replace each planned run by a scan region: ``trace.nodes`` rebuilt, and the
    substitution of the values read after the runs."""
    sub = {}

    def s(v):
        return sub.get(v.id, v) if isinstance(v, Var) else v

    reads = {}                                # var id -> node indices reading it
    for k, n in enumerate(nodes):
        for v in n.var_inputs():
            reads.setdefault(v.id, []).append(k)
    result_ids = {v.id for v in results} | pinned
    out, cursor = [], 0
    for plan in plans:
        made = {plan.node(nodes, j, i).out.id for j in range(plan.repeats)
                for i in range(plan.period)}
        if made & pinned:
            continue
        out += [n.with_inputs(s) if any(v.id in sub for v in n.var_inputs()) else n
                for n in nodes[cursor:plan.start]]
        saved_nodes, saved_where = trace.nodes, trace.where
        trace.nodes, trace.where = [], nodes[plan.start].where
        try:
            _build(trace, nodes, plan, s, sub, reads, result_ids)
            out += trace.nodes
        finally:
            trace.nodes, trace.where = saved_nodes, saved_where
        cursor = plan.end
    out += [n.with_inputs(s) if any(v.id in sub for v in n.var_inputs()) else n
            for n in nodes[cursor:]]
    trace.nodes[:] = out
    return sub


def _build(trace, nodes, plan, s, sub, reads, result_ids):
    """Record the region of ``plan`` (into ``trace.nodes``, empty here) and the reads of
    its values after it; fill ``sub``."""
    p, m = plan.period, plan.repeats

    def placeholder(shape, dtype):
        var = trace.new_var(tuple(shape), dtype)
        var.node = ir.Node(LOOP_VALUE, [], {"shape": tuple(shape), "dtype": dtype,
                                            "slot": var.id}, var, None)
        return var

    first = [plan.node(nodes, 0, i) for i in range(p)]
    carries = {}                               # source position -> placeholder
    for slot in plan.slots.values():
        if slot[0] == "carry" and slot[1] not in carries:
            v = first[slot[1]].out
            carries[slot[1]] = (placeholder(v.shape, v.dtype), slot[2])
    elements, per = [], {}
    for (i, k), slot in sorted(plan.slots.items()):
        if slot[0] == "per":
            v0 = first[i].inputs[k]
            ph = placeholder(v0.shape, v0.dtype)
            stacked = ops.stack([Tracer._of(s(plan.node(nodes, j, i).inputs[k]), trace)
                                 for j in range(m)])
            elements.append((ph, stacked._var))
            per[i, k] = ph
    body, made = [], {}
    for i, n in enumerate(first):
        if i in plan.steps:                    # x[t]: an element of a slice of x
            t0, step = plan.steps[i]
            x = s(n.inputs[0])
            row = placeholder(x.shape[1:], x.dtype)
            whole = not isinstance(x.shape[0], ir.Dim) and t0 == 0 and step == 1 \
                and int(x.shape[0]) == m
            last = t0 + (m - 1) * step
            stop = last + 1 if step > 0 else (last - 1 if last > 0 else None)
            part = x if whole else ops.getitem(Tracer._of(x, trace),
                                               slice(t0, stop, step))._var
            elements.append((row, part))
            rest = tuple(n.params["index"][1:])
            if rest:
                out = trace.new_var(n.out.shape, n.out.dtype)
                out.node = ir.Node(getitem_prim, [row], {"index": rest}, out, n.where)
                body.append(out.node)
                made[i] = out
            else:
                made[i] = row
            continue
        inputs = []
        for k, v in enumerate(n.inputs):
            slot = plan.slots.get((i, k))
            if slot is None:
                inputs.append(v)
            elif slot[0] == "in":
                inputs.append(made[slot[1]])
            elif slot[0] == "carry":
                inputs.append(carries[slot[1]][0])
            elif slot[0] == "same":
                inputs.append(s(v))
            else:
                inputs.append(per[i, k])
        out = trace.new_var(n.out.shape, n.out.dtype)
        out.node = ir.Node(n.prim, inputs, n.params, out, n.where)
        body.append(out.node)
        made[i] = out
    # which values of the run are read after it: a final carry, or a stack of them
    after = {}
    for j in range(m):
        for i in range(p):
            v = plan.node(nodes, j, i).out
            if v.id in result_ids or any(r >= plan.end for r in reads.get(v.id, ())):
                after.setdefault(i, []).append(j)
    order = sorted(carries)
    ys = [i for i in sorted(after) if not (after[i] == [m - 1] and i in carries)]
    outs = _region(trace, body,
                   [(carries[i][0], s(carries[i][1]), made[i]) for i in order],
                   elements, [made[i] for i in ys], m, False)
    final = dict(zip(order, outs[:len(order)]))
    stacked = dict(zip(ys, outs[len(order):]))
    for i, steps in after.items():
        for j in steps:
            old = plan.node(nodes, j, i).out
            if j == m - 1 and i in final:
                sub[old.id] = final[i]
            else:
                sub[old.id] = ops.getitem(Tracer._of(stacked[i], trace), j)._var


def substitute(trace, tree_value, sub):
    """``tree_value`` (a pytree of results) with its tracers' values replaced per ``sub``."""
    return tree.map_leaves(
        lambda x: Tracer._of(sub[x._var.id], trace)
        if isinstance(x, Tracer) and x._var.id in sub else x, tree_value)

