"""Reverse-mode differentiation of a traced graph.

There is no second set of derivative rules: the backward sweep calls each primitive's
own VJP rules (the ones the eager tape runs) on tracers, so the backward computation
is recorded into the same trace as new nodes (DESIGN.md rule 2). Differentiating the
result again (Hessians) is the same sweep over a longer node list. A zero cotangent
is ``None`` throughout (DESIGN.md rule 7).
"""

import numpy as np

from . import ops
from .errors import UnsupportedError, at_user_line
from .ir import GradWhere, Var
from .vjp import input_cotangents
from .trace import Tracer


def backward(trace, targets, wrt, nodes=None):
    """Cotangents of ``wrt`` (Vars) for ``targets``: a list of (Var, seed Tracer).

    Returns one Tracer or None (a symbolic zero) per ``wrt``. ``nodes`` is the part of
    the trace to differentiate (all nodes recorded so far by default).
    """
    nodes = list(trace.nodes if nodes is None else nodes)
    wrt_ids = {v.id for v in wrt}
    # Forward: which values depend on a differentiated input.
    relevant = set(wrt_ids)
    live = []
    for node in nodes:
        reads = any(isinstance(v, Var) and v.id in relevant for v in node.inputs)
        # a loop is followed too: a cotangent reaching it raises (``_sweep``), where
        # taking it for a constant would give a zero gradient
        if reads and (node.prim.kind == "loop" or
                      node.prim.differentiable and node.out.dtype.kind in "fc"):
            relevant.add(node.out.id)
            live.append(node)
    grads = {}
    for var, seed in targets:
        if var.id in relevant:
            _accumulate(grads, var.id, seed)
    # Backward: the primitives' VJP rules, applied to tracers.
    try:
        _sweep(trace, live, grads, relevant, wrt_ids)
    finally:
        trace.where = None
    return [grads.get(v.id) for v in wrt]


def _sweep(trace, live, grads, relevant, wrt_ids):
    bundles = {}                   # region var id -> {output index: cotangent}
    for node in reversed(live):
        prim = node.prim
        if prim.kind == "loop" and _region_part(trace, node, grads, bundles, relevant):
            continue
        g = grads.get(node.out.id)
        if g is None:
            continue
        if node.out.id not in wrt_ids:
            del grads[node.out.id]
        args = [Tracer._of(v, trace) if isinstance(v, Var) else v for v in node.inputs]
        out = Tracer._of(node.out, trace)
        # the nodes of this VJP are the backward of ``node``: its line, and its op
        trace.where = GradWhere(node.where, prim.name)
        inputs = [(k, v.id) for k, v in enumerate(node.inputs) if isinstance(v, Var)]
        for vid, ct in input_cotangents(prim, g, out, args, node.params, inputs, relevant):
            _accumulate(grads, vid, traced(trace, _real_for(ct, vid, node.inputs)))


def _real_for(ct, vid, inputs):
    """A complex cotangent of a real input: its real part (API.md: the gradient of a real
    value is dL/dx, TensorFlow's rule)."""
    if getattr(ct, "dtype", None) is None or ct.dtype.kind != "c":
        return ct
    for v in inputs:
        if isinstance(v, Var) and v.id == vid:
            return ops.real(ct) if v.dtype.kind != "c" else ct
    return ct


def _region_part(trace, node, grads, bundles, relevant):
    """A loop's part in the backward sweep: an output's cotangent is kept for its
    region, and the region's record differentiates it with all of them at once
    (``region_vjp``). A loop without one (a Jacobian's) raises where a cotangent reaches
    it: taking it for a constant would give a zero gradient. True when handled."""
    output = node.prim.projects
    region = node.inputs[0].node if output else node
    if region.prim.region_vjp is None:
        if grads.get(node.out.id) is None:
            return True
        raise UnsupportedError(at_user_line(
            f"differentiating through a {node.prim.name} (a Jacobian computed in the "
            "same function) is not supported; take second derivatives with jt.hessian"))
    if output:
        g = grads.pop(node.out.id, None)
        if g is not None:
            found = bundles.setdefault(region.out.id, {})
            k = node.params["index"]
            found[k] = g if k not in found else ops.add(found[k], g)
        return True
    cts = bundles.pop(node.out.id, None)
    if cts:
        trace.where = GradWhere(node.where, node.prim.name)
        for k, ct in region.prim.region_vjp(trace, node, cts, relevant):
            v = node.inputs[k]
            if isinstance(v, Var) and v.id in relevant:
                _accumulate(grads, v.id, traced(trace, ct))
    return True


def traced(trace, ct):
    """A value as a tracer of ``trace`` (a custom gradient may return a constant)."""
    if isinstance(ct, Tracer):
        return ct
    value = ct._value if hasattr(ct, "_value") else ct
    return Tracer._of(trace.const(np.asarray(value)), trace)


def _accumulate(grads, key, ct):
    prev = grads.get(key)
    grads[key] = ct if prev is None else ops.add(prev, ct)


def forward(trace, nodes, tangents):
    """The forward sweep: the tangents of ``nodes``' values (a dict Var id -> Tracer,
    updated and returned) from ``tangents``, the seeds, by each primitive's JVP rules
    on tracers (``jvp.output_tangent``: the rules the forward accumulator runs). A loop
    region has none: a tangent reaching one raises."""
    from .jvp import output_tangent
    try:
        for node in nodes:
            inputs = node.inputs
            ts = [tangents.get(v.id) if isinstance(v, Var) else None for v in inputs]
            if not any(t is not None for t in ts):
                continue
            prim = node.prim
            if prim.kind == "loop":
                raise UnsupportedError(at_user_line(
                    f"forward mode over the graph: {prim.name} (a loop) has no JVP rule"))
            trace.where = GradWhere(node.where, prim.name)
            args = [Tracer._of(v, trace) if isinstance(v, Var) else v for v in inputs]
            t = output_tangent(prim, ts, Tracer._of(node.out, trace), args, node.params)
            if t is not None:
                tangents[node.out.id] = traced(trace, t)
    finally:
        trace.where = None
    return tangents
