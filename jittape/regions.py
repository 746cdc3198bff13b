"""Loops compiled as loops: in a compiled function, ``jt.scan`` is one region node.

The body is traced once, on placeholders for the carry and for one element of each
``xs`` (``LOOP_VALUE`` nodes, which have no value while tracing). The nodes that depend
on a placeholder become the region's body, an ``ir.Graph``; the others read only values
from outside the loop and stay before it, computed once (loop-invariant code moves out
by construction). The generated code runs the body in a loop, so neither the trace, the
passes nor the compile grow with the trip count.

A region's parts:

- ``scan``: inputs ``init + xs + captured``, parameters ``body`` (inputs: the carry's
  placeholders, the elements' placeholders, then the captured outer values; outputs:
  the new carry, then the per-step values ``ys``), ``length``, ``reverse``,
  ``carries`` and ``xs`` (how many of each);
- ``scan_output``: output ``index`` of a region: a final carry, or a ``y`` stacked over
  the steps (``length`` first).

Reverse mode (``scan_vjp``): the VJP of a scan is a scan in the other direction. The
body's own VJP rules run once on the body (``autodiff.backward``, seeded with
placeholders for the carry's and the ``y``'s cotangents); the backward nodes that read
a value of the forward body form the backward body, and each forward value they read is
a residual: the forward region outputs it stacked over the steps (a new ``scan_output``)
and the backward region reads one step of it. The cotangents of the captured values are
carries of the backward loop, summed step by step.

Code generation: each region has one lowering for both targets. The loop's structure
(steps, stacks, the test, the branches) is the lowering's; what its arrays are is the
backend context's (``enter``, ``step``, ``stack``, ``put``, ``row``, ``on_host``,
``result`` of ``codegen.cpu.Context``): Python names of NumPy arrays in a Numba function
on the CPU, device buffers in the host driver on CUDA (``codegen.cuda.CudaContext``),
where each step launches the body's kernels.
"""

from typing import Any, Callable, Optional

import numpy as np

from . import ir, ops, tree
from .autodiff import backward
from .errors import TracerError, UnsupportedError, at_user_line
from .ir import Var
from .ops.core import Aval, OpRecord
from .trace import RandomDraw, Tracer


class LoopPart(OpRecord):
    """A part of a generated loop; not a registry primitive: users never apply it.

    ``role``: ``index`` (the Jacobian loop's index while its body is traced), ``bound``
    (a loop's or branch's per-step value while its body is traced), ``seed`` (the
    one-hot cotangent at the index), ``region`` (the Jacobian loop), ``scan``, ``while``
    and ``switch`` (regions: their bodies are ``ir.Graph`` parameters named in
    ``regions``), ``output``/``scan_output`` (output ``params["index"]`` of a region).
    ``region_vjp(trace, node, cotangents, relevant)``, where set, differentiates a
    region: (input position, cotangent) pairs for the inputs whose ids are in
    ``relevant``. ``interpret(env, node)``, where set, runs the node on NumPy values
    (``codegen.interpret``: ``env`` holds the values and runs the bodies' nodes)."""

    kind = "loop"
    differentiable = False
    foldable = False             # never computed while tracing, even without traced inputs
    region_vjp: Optional[Callable[..., Any]] = None
    interpret: Optional[Callable[..., Any]] = None

    def __init__(self, name, role, abstract, lower, lower_cuda, regions=(), impl=None):
        self.name = name
        self.role = role
        self.projects = role in ("output", "scan_output")   # output params["index"] of a region
        self.abstract = abstract
        self.regions = regions
        self.impl = impl
        self.lowerings = {"cpu": lower, "cuda": lower_cuda}

    def bound(self, node, name="body"):
        """How many of region ``name``'s first inputs are the loop's own per-step values
        (the rest are captured outer values, the node's last inputs), and how many of
        the node's first inputs are not captured values."""
        p = node.params
        if self.role == "scan":
            n = p["carries"] + p["xs"]
            return n, n
        if self.role == "while":
            own = p["carries"] + (p.get("cotangents", 0) if name == "back" else 0)
            return own, p["carries"] + p.get("cotangents", 0)
        if self.role == "switch":
            return p["operands"], 1 + p["operands"]
        return 1, 0

    def live_out(self, node, name, used):
        """The ids of body ``name``'s values that the loop reads after the body runs
        (``schedule``): a scan's new carry and the per-step values the graph reads
        (``used``: the indices of the region's outputs read), every output of the
        other bodies."""
        body = node.params[name]
        if self.role == "scan":
            nc = node.params["carries"]
            return {v.id for j, v in enumerate(body.outputs)
                    if isinstance(v, Var) and (j < nc or j in used)}
        return {v.id for v in body.outputs if isinstance(v, Var)}

    def droppable(self, node):
        """The body outputs the loop need not compute when nothing reads them: a scan's
        per-step values (not its carries, which the next step reads)."""
        if self.role == "scan":
            return range(node.params["carries"], len(node.params["body"].outputs))
        return ()


def lower_nothing(ctx, node):
    """The lowering of a part that the loop around it emits."""
    return []


def bound_record(name, what, why):
    """The record of the placeholders of a body traced once for many steps (or
    examples): reading one's value (a Python branch on it) raises, saying it is computed
    from ``what`` and ``why`` that cannot be."""
    def no_value(**params):
        raise TracerError(at_user_line(
            f"a Python branch (if, while, bool()) on a value computed from {what}: {why}"))
    return LoopPart(name, "bound", lambda shape, dtype, slot: Aval(shape, dtype),
                    lower_nothing, lower_nothing, impl=no_value)


LOOP_VALUE = bound_record(
    "loop_value", "a loop's carry or element",
    "a jt.scan / fori_loop / while_loop body is traced once for every step, so it cannot "
    "take a branch per step. Use jt.cond or jt.switch (or jt.where to choose between values)")


def _fresh(body, v):
    """Whether body output ``v`` is an array the body made for itself (not an input, a
    captured value or a view of one): the loop's final carry may be returned as it is."""
    if not isinstance(v, Var) or v.node is None:
        return False
    made = {n.out.id for n in body.nodes}
    return v.id in made and "cpu" not in v.node.prim.aliases


def _lower_scan(ctx, node):
    p = node.params
    body, nc, nx, n = p["body"], p["carries"], p["xs"], p["length"]
    region = ctx.name(node.out)
    carries, elements = body.inputs[:nc], body.inputs[nc:nc + nx]
    new, ys = body.outputs[:nc], body.outputs[nc:]
    used = ctx.projected(node)
    lines = ctx.enter(carries, node.inputs[:nc])
    for j, y in enumerate(ys):
        if isinstance(y, Var) and nc + j in used:
            lines += ctx.stack(f"{region}_{nc + j}", ctx.shape((n,) + tuple(y.shape)), y.dtype)
    t = ctx.tmp("step")
    steps = f"range({n - 1}, -1, -1)" if p["reverse"] else f"range({n})"
    # (in the order the backend is asked: a row's lines say what the body reads)
    inner = [ctx.row(x, ctx.name(v), t) for x, v in zip(elements, node.inputs[nc:nc + nx])]
    stacked = [(j, y) for j, y in enumerate(ys) if isinstance(y, Var) and nc + j in used]
    pooled = ctx.pooled_block(node, "body", nc)
    inner += pooled.lines
    inner += [ctx.put(f"{region}_{nc + j}", t, y) for j, y in stacked]
    inner += ctx.step(carries, new) + pooled.after
    lines += pooled.before
    lines.append(f"for {t} in {steps}:   # {n} steps of the body below")
    lines += ["    " + line for line in inner]
    for j, (c, v) in enumerate(zip(carries, new)):
        if j in used:     # (a copy where the body's buffers are borrowed: see Pool)
            lines += ctx.result(f"{region}_{j}", c, _fresh(body, v) and not pooled.done)
    return lines + pooled.done


def _lower_output(ctx, node):
    return ctx.region_output(node)


def _region_abstract(*inputs, **params):
    """A region's own value: a token its outputs (``scan_output``) read; its values are
    theirs."""
    return Aval((), "bool")


def _stacked(env, rows, y, count):
    """A loop's per-step values of ``y`` (a body output) as one array."""
    if rows:
        return np.stack(rows)
    return np.empty((count,) + env.param(y.shape), y.dtype)


def _interpret_scan(env, node):
    p = node.params
    body, nc, nx, n = p["body"], p["carries"], p["xs"], env.param(p["length"])
    carries = [env.value(v) for v in node.inputs[:nc]]
    xs = [env.value(v) for v in node.inputs[nc:nc + nx]]
    ys = body.outputs[nc:]
    rows = [[] for _ in ys]
    for t in (range(n - 1, -1, -1) if p["reverse"] else range(n)):
        env.set(body.inputs[:nc], carries)
        env.set(body.inputs[nc:nc + nx], [x[t] for x in xs])
        env.run(body.nodes)
        for r, y in zip(rows, ys):
            if y is not None:
                r.append(env.value(y))
        carries = [env.value(v) for v in body.outputs[:nc]]
    if p["reverse"]:                       # row t is step t's, as the kernel stores it
        rows = [r[::-1] for r in rows]
    env.outputs(node, carries + [None if y is None else _stacked(env, r, y, n)
                                 for r, y in zip(rows, ys)])


def interpret_output(env, node):
    """Output ``index`` of a region, of the part's dtype."""
    value = env.values[(node.inputs[0].id, node.params["index"])]
    if getattr(value, "dtype", None) != node.out.dtype:
        value = np.asarray(value, node.out.dtype) if node.out.ndim else node.out.dtype.type(value)
    env.values[node.out.id] = value


SCAN = LoopPart("scan", "scan", _region_abstract, _lower_scan, _lower_scan, regions=("body",))
SCAN.interpret = _interpret_scan
SCAN_OUTPUT = LoopPart("scan_output", "scan_output", None, _lower_output, _lower_output)
SCAN_OUTPUT.interpret = interpret_output
RECORDS = (LOOP_VALUE, SCAN, SCAN_OUTPUT)


def compiles_as_loop(trace):
    """Whether a scan in ``trace`` becomes a region: in a compiled function (on either
    target: the CUDA driver runs the loop, launching the body's kernels each step), with
    no tape recording inside it (a tape records ops one by one)."""
    from .recording import thread_tapes
    return trace is not None and not thread_tapes()


def _slot(trace, shape, dtype, k):
    return Tracer._of(trace._node(LOOP_VALUE, [], {"shape": tuple(shape),
                                                   "dtype": np.dtype(dtype), "slot": k}), trace)


def _cut(trace, start, local, everything=False):
    """Take the nodes recorded since ``start`` that depend on a value whose id is in
    ``local`` out of the trace; the others stay (they run once, before the loop). With
    ``everything``, all of them go (a branch's: what only one branch computes must not
    run when another is taken: its index checks, its cost).
    Returns the taken nodes and the ids of the values outside them that they read."""
    added = trace.nodes[start:]
    inside = set(local)
    body, stay, reads = [], [], set()
    for node in added:
        if node.prim is LOOP_VALUE:
            continue
        ins = node.var_inputs()
        if everything or any(v.id in inside for v in ins):
            inside.add(node.out.id)
            body.append(node)
            reads.update(v.id for v in ins)
        else:
            stay.append(node)
    del trace.nodes[start:]
    trace.nodes.extend(stay)
    return body, reads


def _region(trace, body_nodes, carries, elements, ys, length, reverse, recompute=False):
    """Record a scan region and its outputs: ``carries`` are (placeholder, initial
    value, new value) triples, ``elements`` (placeholder, stacked outer value) pairs, ``ys``
    the body's per-step values. Returns the outputs' Vars: final carries, stacked ys."""
    bound = [c for c, _, _ in carries] + [x for x, _ in elements]
    outputs = [new for _, _, new in carries] + list(ys)
    captured = _captured([body_nodes], outputs, {v.id for v in bound})
    graph = ir.Graph(bound + captured, [], body_nodes, outputs, name="scan_body",
                     checks=trace.checks)
    inputs = [init for _, init, _ in carries] + [xs for _, xs in elements] + captured
    params = {"body": graph, "length": length, "reverse": reverse,
              "carries": len(carries), "xs": len(elements)}
    if recompute:
        params["recompute"] = True
    region = trace._node(SCAN, inputs, params, Aval((), "bool"))
    return _project(trace, region, [(tuple(v.shape) if j < len(carries) else
                                     (length,) + tuple(v.shape), v.dtype)
                                    for j, v in enumerate(outputs)])


def _project(trace, region, types):
    """The ``scan_output`` nodes of ``region``'s outputs, of ``types`` ((shape, dtype)
    each, in order): their Vars."""
    return [trace._node(SCAN_OUTPUT, [region], {"index": j}, Aval(shape, dtype))
            for j, (shape, dtype) in enumerate(types)]


def _captured(graphs_nodes, outputs, local):
    """The values that nodes (lists ``graphs_nodes``) and ``outputs`` read from outside
    them and ``local`` (ids): a region's captured inputs, in the order first read."""
    made = {n.out.id for nodes in graphs_nodes for n in nodes} | local
    captured, seen = [], set()
    for v in [v for nodes in graphs_nodes for n in nodes for v in n.var_inputs()] + \
            [v for v in outputs if isinstance(v, Var)]:
        if v.id not in made and v.id not in seen:
            seen.add(v.id)
            captured.append(v)
    return captured


def _wanted(relevant):
    """Whether an input's cotangent is wanted (its id in ``relevant``; all for None)."""
    if relevant is None:
        return lambda v: True
    return lambda v: isinstance(v, Var) and v.id in relevant


def _differentiate(trace, targets, wrt, nodes):
    """``autodiff.backward`` on a body's ``nodes``, keeping the trace's current line for
    the nodes made after it; the cotangents in their values' dtypes."""
    where = trace.where
    grads = backward(trace, targets, wrt, nodes)
    trace.where = where                       # (backward leaves it unset)
    return [g if g is None or g.dtype == w.dtype else ops.cast(g, w.dtype)
            for g, w in zip(grads, wrt)]


def _cotangent_carries(trace, seeds, cts_in, finals, inits, caps, caps_outer, cts_cap, k):
    """The carries of a loop's backward loop, as (placeholder, initial value, new value)
    Vars, and the positions among ``caps`` of those that sum a captured value's
    cotangent. ``seeds``: the placeholders of the carry's cotangents (one per entry of
    ``cts_in``, the body's cotangents of its carry, None for zero); ``finals``: the
    final carry's cotangents (None: zero); ``inits``: the carry's initial values (their
    shapes); ``cts_cap``: the body's cotangents of ``caps`` (the captured values inside
    the body; ``caps_outer``, outside), summed from zero step by step."""
    outer = lambda v: Tracer._of(v, trace)                             # noqa: E731
    carried = []
    for g, ct, final, init in zip(seeds, cts_in, finals, inits):
        zero = None if ct is not None and final is not None else ops.zeros_like(outer(init))
        carried.append((g._var, (final if final is not None else zero)._var,
                        (ct if ct is not None else zero)._var))
    summed = []
    for j, (cap, ct) in enumerate(zip(caps, cts_cap)):
        if ct is not None:
            acc = _slot(trace, cap.shape, cap.dtype, next(k))
            carried.append((acc._var, ops.zeros_like(outer(caps_outer[j]))._var,
                            ops.add(acc, ct)._var))
            summed.append(j)
    return carried, summed


def traced_scan(trace, f, init, xs, length, reverse, check_carry, recompute=False):
    """``jt.scan`` in ``trace``: the body traced once into a region (see the module's
    docstring). ``check_carry(init, new)`` checks the carry the body returns."""
    init_def = tree.flatten(init)[1]
    x_leaves, x_def = tree.flatten(xs)
    stacked = [trace.tracer(_operand(v)) for v in x_leaves]
    inits, (start, slots, new_leaves, y_leaves, y_def, y) = _trace_step(
        trace, f, init, stacked, x_def, check_carry)
    c_slots, x_slots = slots[:len(inits)], slots[len(inits):]
    local = {t._var.id for t in slots}
    body, _ = _cut(trace, start, local)
    outs = _region(trace, body,
                   [(c._var, i._var, v._var) for c, i, v in zip(c_slots, inits, new_leaves)],
                   [(x._var, s._var) for x, s in zip(x_slots, stacked)],
                   [v._var for v in y_leaves], length, reverse, recompute)
    outs = [Tracer._of(v, trace) for v in outs]
    carry = tree.unflatten(init_def, outs[:len(inits)])
    ys = tree.unflatten(y_def, outs[len(inits):]) if y_leaves else y
    return carry, ys


def _trace_step(trace, f, init, stacked, x_def, check_carry):
    """The carry's initial values as tracers and ``_trace_body``'s result. A Python
    number's carry is weak (as a Python float is in the trace): it takes the dtype the
    body gives it, as in JAX, and the body is traced again with that dtype."""
    init_leaves, init_def = tree.flatten(init)
    inits = [trace.tracer(_operand(v)) for v in init_leaves]
    weak = {k for k, a in enumerate(init_leaves)
            if isinstance(a, (bool, int, float)) and not isinstance(a, np.generic)}
    found = _trace_body(trace, f, init, inits, init_def, stacked, x_def, check_carry, weak)
    changed = [k for k in weak if found[2][k].dtype != inits[k].dtype]
    if changed:
        del trace.nodes[found[0]:]
        inits = [ops.cast(t, found[2][k].dtype) if k in changed else t
                 for k, t in enumerate(inits)]
        found = _trace_body(trace, f, init, inits, init_def, stacked, x_def, check_carry, ())
    return inits, found


def _trace_body(trace, f, init, inits, init_def, stacked, x_def, check_carry, weak):
    """Run ``f`` once on placeholders: (the position of its first node in the trace,
    the placeholders, the new carry's leaves, the y's leaves and structure, the y)."""
    start = len(trace.nodes)
    c_slots = [_slot(trace, t._var.shape, t.dtype, k) for k, t in enumerate(inits)]
    x_slots = [_slot(trace, t._var.shape[1:], t.dtype, len(inits) + k)
               for k, t in enumerate(stacked)]
    trace.weak.update(c_slots[k]._var.id for k in weak)
    before = effects(trace)
    carry = tree.unflatten(init_def, c_slots)
    x = tree.unflatten(x_def, x_slots) if stacked else None
    out = f(carry, x)
    if not (isinstance(out, tuple) and len(out) == 2):
        got = (f"a tuple of {len(out)}" if isinstance(out, tuple) else
               f"{out.dtype}{list(out.shape)}" if isinstance(out, Tracer) else type(out).__name__)
        raise TypeError(at_user_line(f"scan: the body must return a pair (carry, y), got {got}"))
    new, y = out
    check_carry(init, new)
    assigned, drawn = new_effects(trace, before)
    if assigned:
        raise UnsupportedError(at_user_line(
            "scan: a variable assigned in a loop body of a compiled function; return the "
            "new value in the carry and assign it after the loop"))
    if drawn:
        raise UnsupportedError(at_user_line(
            "scan: a random draw in a loop body of a compiled function would be the same "
            "at every step; draw all steps' values before the loop and pass them as xs"))
    new_leaves = [trace.tracer(_operand(v)) for v in tree.flatten(new)[0]]
    y_leaves, y_def = tree.flatten(y)
    y_leaves = [trace.tracer(_operand(v)) for v in y_leaves]
    return start, c_slots + x_slots, new_leaves, y_leaves, y_def, y


def effects(trace):
    """What a traced body may do besides computing (``new_effects``): the variables'
    states and the count of random draws so far."""
    return ({key: (st.value, st.assigned) for key, st in trace.variables.items()},
            sum(isinstance(d, RandomDraw) for d in trace.implicit))


def new_effects(trace, before):
    """(a variable was assigned, a random draw was made) since ``effects`` gave
    ``before``: a body traced once for many steps (or examples) cannot do either."""
    variables, draws = before
    assigned = any(trace.variables.get(key) is not None and
                   (trace.variables[key].value, trace.variables[key].assigned) != state
                   for key, state in variables.items()) or any(
                       st.assigned for key, st in trace.variables.items() if key not in variables)
    return assigned, sum(isinstance(d, RandomDraw) for d in trace.implicit) != draws


def _operand(v):
    """A carry or y leaf as an operand of the trace (a Python number: an array of its
    NumPy type, as the eager ops make it)."""
    return np.asarray(v) if isinstance(v, (bool, int, float, complex)) else v


def _floating(v):
    return isinstance(v, Var) and v.dtype.kind in "fc"


def scan_vjp(trace, node, cts, relevant=None):
    """The cotangents of a scan region's inputs, as (input position, Tracer) pairs, for
    the cotangents ``cts`` ({output index: Tracer}) of its outputs: a backward scan
    (see the module's docstring). ``relevant``: ids of the inputs whose cotangents are
    wanted (all, by default); the others are not computed."""
    p = node.params
    body, nc, nx, n = p["body"], p["carries"], p["xs"], p["length"]
    c_in, x_in, cap = body.inputs[:nc], body.inputs[nc:nc + nx], body.inputs[nc + nx:]
    init, xs, outer_cap = node.inputs[:nc], node.inputs[nc:nc + nx], node.inputs[nc + nx:]
    new, ys = body.outputs[:nc], body.outputs[nc:]
    start = len(trace.nodes)
    k = iter(range(1 << 30))
    fc = [j for j in range(nc) if _floating(c_in[j])]
    g_c = {j: _slot(trace, c_in[j].shape, c_in[j].dtype, next(k)) for j in fc}
    g_y = {j: _slot(trace, y.shape, y.dtype, next(k)) for j, y in enumerate(ys)
           if _floating(y) and cts.get(nc + j) is not None}
    nodes = body.nodes
    if p.get("recompute"):       # the backward body runs the forward body again (copies)
        mapping = {}
        nodes = _clone(trace, body.nodes, mapping)
        trace.nodes.extend(nodes)
        new = [mapping.get(v.id, v) if isinstance(v, Var) else v for v in new]
        ys = [mapping.get(v.id, v) if isinstance(v, Var) else v for v in ys]
    targets = [(new[j], g_c[j]) for j in fc if _floating(new[j])]
    targets += [(ys[j], g) for j, g in g_y.items()]
    wanted = _wanted(relevant)
    fx = [j for j in range(nx) if _floating(x_in[j]) and wanted(xs[j])]
    fcap = [j for j in range(len(cap)) if _floating(cap[j]) and wanted(outer_cap[j])]
    wrt = [c_in[j] for j in fc] + [x_in[j] for j in fx] + [cap[j] for j in fcap]
    grads = _differentiate(trace, targets, wrt, nodes)
    ct_c, ct_x, ct_cap = grads[:len(fc)], grads[len(fc):len(fc) + len(fx)], grads[len(fc) + len(fx):]
    # a loop in the body differentiated: the outputs it gained (its residuals) are the
    # forward body's values, stacked for this loop's backward like any other
    made = {nd.out.id for nd in body.nodes}
    moved = [nd for nd in trace.nodes[start:] if nd.prim.kind == "loop" and nd.prim.projects
             and nd.inputs[0].id in made]
    if moved:
        trace.nodes[start:] = [nd for nd in trace.nodes[start:] if nd not in moved]
        node.params["body"] = body = ir.Graph(body.inputs, body.consts, body.nodes + moved,
                                              body.outputs, body.name, body.checks,
                                              body.exact_sizes)
    carried, summed = _cotangent_carries(
        trace, [g_c[j] for j in fc], ct_c, [cts.get(j) for j in fc], [init[j] for j in fc],
        [cap[j] for j in fcap], [outer_cap[j] for j in fcap], ct_cap, k)
    ct_ys = [(j, g) for j, g in zip(fx, ct_x) if g is not None]
    forward = {v.id for v in c_in + x_in} | {nd.out.id for nd in body.nodes}
    local = {c[0].id for c in carried} | {g._var.id for g in g_y.values()}
    back, reads = _cut(trace, start, local | forward)
    reads |= {v.id for _, _, v in carried} | {g._var.id for _, g in ct_ys}
    # the forward values the backward body reads: one step of each, from the forward loop
    elements = [(g._var, cts[nc + j]._var) for j, g in g_y.items()]
    x_index = {v.id: j for j, v in enumerate(x_in)}
    stacks = {v.id: j for j, v in enumerate(body.outputs) if j >= nc and isinstance(v, Var)}
    added, projected = [], {}
    for v in [v for v in c_in + x_in + [nd.out for nd in body.nodes] if v.id in reads]:
        if v.id in x_index:                   # an element of xs: read from xs itself
            elements.append((v, xs[x_index[v.id]]))
            continue
        j = stacks.get(v.id)
        if j is None:                         # a new output of the forward loop
            j = stacks[v.id] = len(body.outputs) + len(added)
            added.append(v)
        if j not in projected:
            projected[j] = trace._node(SCAN_OUTPUT, [node.out], {"index": j},
                                       Aval((n,) + tuple(v.shape), v.dtype))
        elements.append((v, projected[j]))
    if added:
        node.params["body"] = ir.Graph(body.inputs, body.consts, body.nodes,
                                       body.outputs + added, body.name, body.checks,
                                       body.exact_sizes)
    outs = [Tracer._of(v, trace) for v in _region(
        trace, back, carried, elements, [g._var for _, g in ct_ys], n, not p["reverse"])]
    found = [(j, outs[m]) for m, j in enumerate(fc)]
    found += [(nc + nx + fcap[j], outs[len(fc) + m]) for m, j in enumerate(summed)]
    found += [(nc + j, outs[len(carried) + m]) for m, (j, _) in enumerate(ct_ys)]
    return found


def _clone(trace, nodes, mapping):
    """Copies of ``nodes`` with new values (``mapping``: var id -> the copy's Var, read
    for their operands and filled in), region bodies copied with them."""
    copies = []
    for nd in nodes:
        params = dict(nd.params)
        for name in nd.prim.regions:
            params[name] = _clone_graph(trace, nd.params[name], nd.prim.bound(nd, name)[0],
                                        mapping)
        out = trace.new_var(nd.out.shape, nd.out.dtype)
        copy = ir.Node(nd.prim, [mapping.get(v.id, v) if isinstance(v, Var) else v
                                 for v in nd.inputs], params, out, nd.where)
        out.node = copy
        mapping[nd.out.id] = out
        copies.append(copy)
    return copies


def _clone_graph(trace, graph, own, mapping):
    for v in graph.inputs[:own]:
        if v.id not in mapping:
            mapping[v.id] = trace.new_var(v.shape, v.dtype)
    nodes = _clone(trace, graph.nodes, mapping)
    sub = lambda v: mapping.get(v.id, v) if isinstance(v, Var) else v     # noqa: E731
    return ir.Graph([sub(v) for v in graph.inputs], graph.consts, nodes,
                    [sub(v) for v in graph.outputs], graph.name, graph.checks,
                    graph.exact_sizes)


SCAN.region_vjp = staticmethod(scan_vjp)


# -- while loops --------------------------------------------------------------------
#
# ``while_loop``: inputs ``init + captured``; regions ``cond`` (inputs: the carry's
# placeholders, then the captured values; output: the condition, a bool scalar) and
# ``body`` (same inputs; outputs: the new carry). Its VJP is one ``while_grad`` region:
# it runs the loop again, pushing each step's carry onto a stack that grows in the
# kernel (the trip count is known only at the end), then runs ``back`` over the stack in
# reverse: each step's forward again (on its carry) and its VJP, the captured values'
# cotangents summed as carries (``cotangents`` of them, with the carry's cotangents,
# first among the node's inputs after ``init``). Its outputs: those cotangents.

def _lower_while(ctx, node):
    p = node.params
    cond, body, nc = p["cond"], p["body"], p["carries"]
    region = ctx.name(node.out)
    carries = body.inputs[:nc]
    lines = ctx.enter(carries, node.inputs[:nc])
    grad = "back" in p
    if grad:
        count, size = ctx.tmp("count"), ctx.tmp("capacity")
        lines += [f"{count} = 0", f"{size} = 16"]
        stacks = [ctx.tmp("stack") for _ in carries]
        for st, c in zip(stacks, carries):
            lines += ctx.stack(st, _rows(ctx, size, c.shape), c.dtype, fixed=False)
    # (the test carries nothing to the next step: its pool swaps nothing)
    testing = ctx.pooled_block(node, "cond", 0)
    inner = list(testing.lines)
    read, test = ctx.on_host(cond.outputs[0])
    inner += read + [f"if not {test}:", "    break"]
    if grad:                          # the step's carry, kept for the backward loop
        inner += [f"if {count} == {size}:", f"    {size} = 2 * {size}"]
        inner += ["    " + ctx.grow(st, size) for st in stacks]
        inner += [ctx.put(st, count, c) for st, c in zip(stacks, carries)]
        inner.append(f"{count} += 1")
    step = ctx.pooled_block(node, "body", nc)
    inner += step.lines
    inner += ctx.step(carries, body.outputs) + step.after
    lines += testing.before + step.before
    lines.append("while True:   # the loop of jt.while_loop")
    lines += ["    " + line for line in inner]
    if not grad:     # (copied: a loop that ran no step leaves the initial value, an input)
        return lines + [line for j, c in enumerate(carries)
                        for line in ctx.result(f"{region}_{j}", c, False)] + testing.done + step.done
    lines += testing.done + step.done
    back, nb = p["back"], p["cotangents"]
    own = back.inputs[:nb]
    lines += ctx.enter(own, node.inputs[nc:nc + nb])
    t = ctx.tmp("step")
    inner = [ctx.row(c, st, t) for st, c in zip(stacks, back.inputs[nb:nb + nc])]
    pooled = ctx.pooled_block(node, "back", nb)
    inner += pooled.lines
    inner += ctx.step(own, back.outputs) + pooled.after
    lines += pooled.before
    lines.append(f"for {t} in range({count} - 1, -1, -1):   # the steps' VJPs, last first")
    lines += ["    " + line for line in inner]
    # (copied, as above: no step leaves the initial)
    return (lines + [line for j, g in enumerate(own) for line in ctx.result(f"{region}_{j}", g, False)]
            + pooled.done)


def _rows(ctx, count, shape):
    return "(" + ", ".join([count] + [ctx.size(d) for d in shape]) + ",)"


def _interpret_while(env, node):
    p = node.params
    cond, body, nc = p["cond"], p["body"], p["carries"]
    carries = [env.value(v) for v in node.inputs[:nc]]
    grad = "back" in p
    saved = []
    while True:
        env.set(cond.inputs[:nc], carries)
        env.set(body.inputs[:nc], carries)
        env.run(cond.nodes)
        if not env.value(cond.outputs[0]):
            break
        if grad:                          # the step's carry, for the backward loop
            saved.append(carries)
        env.run(body.nodes)
        carries = [env.value(v) for v in body.outputs]
    if not grad:
        env.outputs(node, carries)
        return
    back, nb = p["back"], p["cotangents"]
    own = [env.value(v) for v in node.inputs[nc:nc + nb]]
    for carries in reversed(saved):       # the steps' VJPs, last first
        env.set(back.inputs[:nb], own)
        env.set(back.inputs[nb:nb + nc], carries)
        env.run(back.nodes)
        own = [env.value(v) for v in back.outputs]
    env.outputs(node, own)


WHILE = LoopPart("while_loop", "while", _region_abstract, _lower_while, _lower_while,
                 regions=("cond", "body"))
WHILE_GRAD = LoopPart("while_grad", "while", _region_abstract, _lower_while, _lower_while,
                      regions=("cond", "body", "back"))
WHILE.interpret = WHILE_GRAD.interpret = _interpret_while
RECORDS = RECORDS + (WHILE, WHILE_GRAD)


def traced_while(trace, cond_fun, body_fun, init, check_carry):
    """``jt.while_loop`` in ``trace``: its condition and body traced once into a
    ``while_loop`` region (see above). Returns the final carry."""
    def step(carry, _):
        pred = cond_fun(carry)
        return body_fun(carry), pred
    init_def = tree.flatten(init)[1]
    inits, (start, slots, new_leaves, y_leaves, _, _) = _trace_step(
        trace, step, init, [], None, check_carry)
    pred = y_leaves[0] if len(y_leaves) == 1 else None
    if pred is None or any(int(d) != 1 for d in pred._var.shape):
        got = (f"{len(y_leaves)} values" if pred is None else
               f"shape {tuple(int(d) for d in pred._var.shape)}")
        raise TypeError(at_user_line(f"while_loop: cond_fun must return a scalar, got {got}"))
    if pred.dtype != np.bool_:
        pred = ops.not_equal(pred, 0)
    if pred._var.ndim:
        pred = ops.reshape(pred, ())
    local = {t._var.id for t in slots}
    nodes, _ = _cut(trace, start, local)
    cond_nodes = ir.ancestors(nodes, [pred._var])
    if not cond_nodes and pred._var.id not in local:
        constant = next((c.value for c in trace.consts if c.var is pred._var), None)
        if constant is not None and not bool(constant):
            return init                        # a condition false from the start
        raise ValueError(at_user_line(
            "while_loop: the condition does not depend on the carry: the loop would "
            "never end (or never start)"))
    mapping = {t._var.id: t._var for t in slots}
    step_nodes = _clone(trace, ir.ancestors(nodes, [v._var for v in new_leaves]), mapping)
    new = [mapping.get(v._var.id, v._var) for v in new_leaves]
    captured = _captured([cond_nodes, step_nodes], [pred._var] + new, local)
    inputs = [t._var for t in slots] + captured
    params = {"cond": ir.Graph(inputs, [], cond_nodes, [pred._var], name="while_cond",
                               checks=trace.checks),
              "body": ir.Graph(inputs, [], step_nodes, new, name="while_body",
                               checks=trace.checks),
              "carries": len(slots)}
    region = trace._node(WHILE, [t._var for t in inits] + captured, params, Aval((), "bool"))
    outs = _project(trace, region, [(tuple(v.shape), v.dtype) for v in new])
    return tree.unflatten(init_def, [Tracer._of(v, trace) for v in outs])


def while_vjp(trace, node, cts, relevant=None):
    """The cotangents of a while loop's inputs: one ``while_grad`` region (see above)."""
    p = node.params
    cond, body, nc = p["cond"], p["body"], p["carries"]
    init, cap_outer = node.inputs[:nc], node.inputs[nc:]
    cap = body.inputs[nc:]
    wanted = _wanted(relevant)
    start = len(trace.nodes)
    mapping = {}
    for v in body.inputs[:nc]:
        mapping[v.id] = trace.new_var(v.shape, v.dtype)
    cond2 = _clone_graph(trace, cond, nc, mapping)
    body2 = _clone_graph(trace, body, nc, mapping)
    slots = body2.inputs[:nc]
    again = {}
    nodes = _clone(trace, body2.nodes, again)          # the step run again, on its carry
    trace.nodes.extend(nodes)
    new = [again.get(v.id, v) if isinstance(v, Var) else v for v in body2.outputs]
    k = iter(range(1 << 30))
    fc = [j for j in range(nc) if _floating(slots[j])]
    g = {j: _slot(trace, slots[j].shape, slots[j].dtype, next(k)) for j in fc}
    fcap = [j for j in range(len(cap)) if _floating(cap[j]) and wanted(cap_outer[j])]
    grads = _differentiate(trace, [(new[j], g[j]) for j in fc if _floating(new[j])],
                           [slots[j] for j in fc] + [cap[j] for j in fcap], nodes)
    carried, summed = _cotangent_carries(
        trace, [g[j] for j in fc], grads[:len(fc)], [cts.get(j) for j in fc],
        [init[j] for j in fc], [cap[j] for j in fcap], [cap_outer[j] for j in fcap],
        grads[len(fc):], k)
    local = {c[0].id for c in carried} | {v.id for v in slots}
    back, _ = _cut(trace, start, local)
    outputs = [c[2] for c in carried]
    captured = _captured([cond2.nodes, body2.nodes, back], [cond2.outputs[0]] + body2.outputs
                         + outputs, local)
    inputs = list(slots) + captured
    params = {"cond": ir.Graph(inputs, [], cond2.nodes, cond2.outputs, name="while_cond",
                               checks=trace.checks),
              "body": ir.Graph(inputs, [], body2.nodes, body2.outputs, name="while_body",
                               checks=trace.checks),
              "back": ir.Graph([c[0] for c in carried] + inputs, [], back, outputs,
                               name="while_back", checks=trace.checks),
              "carries": nc, "cotangents": len(carried)}
    region = trace._node(WHILE_GRAD, list(init) + [c[1] for c in carried] + captured, params,
                         Aval((), "bool"))
    outs = _project(trace, region, [(tuple(c[0].shape), c[0].dtype) for c in carried])
    positions = fc + [nc + fcap[j] for j in summed]
    return [(k, Tracer._of(v, trace)) for k, v in zip(positions, outs)]


def _no_second_order(trace, node, cts, relevant=None):
    raise UnsupportedError(at_user_line(
        "differentiating the gradient of a jt.while_loop (a second derivative) is not "
        "supported in a compiled function; use jt.fori_loop or jt.scan where the trip "
        "count is known"))


WHILE.region_vjp = staticmethod(while_vjp)
WHILE_GRAD.region_vjp = staticmethod(_no_second_order)


# -- branches -----------------------------------------------------------------------
#
# ``switch_<n>``: ``jt.cond`` / ``jt.switch`` on a traced index in a compiled function.
# Inputs ``[index] + operands + captured``; regions ``branch0`` ... (inputs: the
# operands' placeholders, then the captured values; outputs: the branch's results, of
# one structure, shapes and dtypes in every branch). The generated code runs the branch
# of the index (clamped) only. Its VJP is a switch on the same index over the branches'
# VJPs, each running its branch again (on the operands) and differentiating it.

def _lower_switch(ctx, node):
    p = node.params
    n = p["operands"]
    region = ctx.name(node.out)
    names = [f"branch{k}" for k in range(len(node.prim.regions))]
    first = node.params[names[0]]
    lines = [ctx.bind(v, a) for v, a in zip(first.inputs[:n], node.inputs[1:1 + n])]
    read, index = ctx.on_host(node.inputs[0])
    lines += read
    for k, name in enumerate(names):
        graph = node.params[name]
        test = (f"if {index} <= 0:" if k == 0 else
                "else:" if k == len(names) - 1 else f"elif {index} <= {k}:")
        lines.append(test)
        inner = [ctx.bind(v, a) for v, a in zip(graph.inputs[:n], first.inputs[:n]) if v is not a]
        inner += ctx.block(node, name)
        for j, v in enumerate(graph.outputs):
            inner += ctx.result(f"{region}_{j}", v, _fresh(graph, v))
        lines += ["    " + line for line in inner or ["pass"]]
    return lines


def _interpret_switch(env, node):
    n = node.params["operands"]
    names = node.prim.regions
    k = min(max(int(env.value(node.inputs[0])), 0), len(names) - 1)   # clamped, as jt.switch
    graph = node.params[names[k]]
    env.set(graph.inputs[:n], [env.value(v) for v in node.inputs[1:1 + n]])
    env.run(graph.nodes)
    env.outputs(node, [env.value(v) for v in graph.outputs])


_SWITCHES = {}


def switch_record(n):
    """The record of a switch over ``n`` branches (one per count: its regions' names)."""
    found = _SWITCHES.get(n)
    if found is None:
        found = _SWITCHES[n] = LoopPart(f"switch_{n}", "switch", _region_abstract, _lower_switch,
                                        _lower_switch, regions=tuple(f"branch{k}" for k in range(n)))
        found.region_vjp = switch_vjp
        found.interpret = _interpret_switch
    return found


MAX_BRANCHES = 8


def traced_switch(trace, index, branches, operands, what):
    """``branches[index](*operands)`` in ``trace``, ``index`` a traced int scalar: one
    switch region (see above). Returns the branch's result."""
    leaves, op_def = tree.flatten(list(operands))
    values = [trace.tracer(_operand(v)) for v in leaves]
    graphs, outs_def, first = [], None, None
    for k, branch in enumerate(branches):
        start = len(trace.nodes)
        slots = [_slot(trace, v._var.shape, v.dtype, j) for j, v in enumerate(values)]
        result = branch(*tree.unflatten(op_def, slots))
        out_leaves, out_def = tree.flatten(result)
        out_leaves = [trace.tracer(_operand(v)) for v in out_leaves]
        types = [(v.dtype, tuple(int(d) for d in v._var.shape)) for v in out_leaves]
        if first is None:
            first, outs_def = types, out_def
        elif out_def != outs_def or types != first:
            this, other = (("false_fun", "true_fun")[k], "false_fun") if what == "cond" else (
                f"branch {k}", "branch 0")            # (cond's branches: false_fun, true_fun)
            raise TypeError(at_user_line(
                f"{what}: {this} returns {tree.structure(result)!r} of "
                f"{[f'{d.name}{list(s)}' for d, s in types]}, {other} "
                f"{[f'{d.name}{list(s)}' for d, s in first]}; the branches must return "
                "values of one structure, shapes and dtypes"))
        body, _ = _cut(trace, start, {t._var.id for t in slots}, everything=True)
        graphs.append(([t._var for t in slots], body, [v._var for v in out_leaves]))
    return tree.unflatten(outs_def, [Tracer._of(v, trace) for v in
                                     _switch(trace, index._var, [v._var for v in values], graphs)])


def _switch(trace, index, operands, graphs):
    """Record a switch region over ``graphs`` ((placeholders, nodes, outputs) each, the
    placeholders standing for ``operands``); its outputs' Vars."""
    local = {v.id for slots, _, _ in graphs for v in slots}
    captured = _captured([nodes for _, nodes, _ in graphs],
                         [v for _, _, outs in graphs for v in outs], local)
    params = {"operands": len(operands)}
    for k, (slots, nodes, outs) in enumerate(graphs):
        params[f"branch{k}"] = ir.Graph(list(slots) + captured, [], nodes, outs,
                                        name=f"branch{k}", checks=trace.checks)
    record = switch_record(len(graphs))
    region = trace._node(record, [index] + list(operands) + captured, params, Aval((), "bool"))
    return _project(trace, region, [(tuple(v.shape), v.dtype) for v in graphs[0][2]])


def switch_vjp(trace, node, cts, relevant=None):
    """The cotangents of a switch's operands and captured values: a switch on the same
    index over the branches' VJPs."""
    p = node.params
    n = p["operands"]
    names = [f"branch{k}" for k in range(len(node.prim.regions))]
    operands, captured = node.inputs[1:1 + n], node.inputs[1 + n:]
    wanted = _wanted(relevant)
    targets = [j for j, v in enumerate(operands) if _floating(v) and wanted(v)]
    targets += [n + j for j, v in enumerate(captured) if _floating(v) and wanted(v)]
    first = p[names[0]]
    outs = [trace.tracer(cts[j]) if cts.get(j) is not None else None
            for j in range(len(first.outputs))]
    seeds = [(j, c) for j, c in enumerate(outs) if c is not None and _floating(first.outputs[j])]
    outer = lambda v: Tracer._of(v, trace)                             # noqa: E731
    graphs = []
    for name in names:
        graph = p[name]
        start = len(trace.nodes)
        slots = [_slot(trace, v.shape, v.dtype, k)._var for k, v in enumerate(graph.inputs[:n])]
        g = [_slot(trace, c._var.shape, c.dtype, n + k)._var for k, (_, c) in enumerate(seeds)]
        mapping = {v.id: s for v, s in zip(graph.inputs[:n], slots)}
        nodes = _clone(trace, graph.nodes, mapping)
        trace.nodes.extend(nodes)
        results = [mapping.get(v.id, v) if isinstance(v, Var) else v for v in graph.outputs]
        wrt = [slots[k] if k < n else graph.inputs[k] for k in targets]
        grads = _differentiate(trace, [(results[j], outer(gv)) for (j, _), gv in zip(seeds, g)
                                       if _floating(results[j])], wrt, nodes)
        found = [(ct if ct is not None else ops.zeros_like(outer(node.inputs[1 + k])))._var
                 for k, ct in zip(targets, grads)]
        body, _ = _cut(trace, start, {v.id for v in slots + g}, everything=True)
        graphs.append((slots + g, body, found))
    values = list(operands) + [c._var for _, c in seeds]
    outs = _switch(trace, node.inputs[0], values, graphs)
    return [(1 + k, outer(v)) for k, v in zip(targets, outs)]


RECORDS = RECORDS + tuple(switch_record(n) for n in range(2, MAX_BRANCHES + 1))
