"""Reverse-mode differentiation of a traced graph.

There is no second set of derivative rules: the backward sweep calls each primitive's
own VJP rules (the ones the eager tape runs) on tracers, so the backward computation
is recorded into the same trace as new nodes (DESIGN.md rule 2). Differentiating the
result again (Hessians) is the same sweep over a longer node list. A zero cotangent
is ``None`` throughout (DESIGN.md rule 7).
"""

import numpy as np

from . import ops
from .ir import Var
from .tape import input_cotangents
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
        if node.prim.differentiable and node.out.dtype.kind in "fc" and any(
                isinstance(v, Var) and v.id in relevant for v in node.inputs):
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
    for node in reversed(live):
        g = grads.get(node.out.id)
        if g is None:
            continue
        if node.out.id not in wrt_ids:
            del grads[node.out.id]
        args = [Tracer._of(v, trace) if isinstance(v, Var) else v for v in node.inputs]
        out = Tracer._of(node.out, trace)
        prim = node.prim
        trace.where = node.where
        inputs = [(k, v.id) for k, v in enumerate(node.inputs) if isinstance(v, Var)]
        for vid, ct in input_cotangents(prim, g, out, args, node.params, inputs, relevant):
            _accumulate(grads, vid, traced(trace, ct))


def traced(trace, ct):
    """A value as a tracer of ``trace`` (a custom gradient may return a constant)."""
    if isinstance(ct, Tracer):
        return ct
    value = ct._value if hasattr(ct, "_value") else ct
    return Tracer._of(trace.const(np.asarray(value)), trace)


def _accumulate(grads, key, ct):
    prev = grads.get(key)
    grads[key] = ct if prev is None else ops.add(prev, ct)


# ---------------------------------------------------------------------------
# Jacobians: one reverse sweep per element of the target, in one generated loop

class _LoopOp:
    """An op of the generated loop that runs one reverse sweep per target element.

    Not a registry primitive: users never apply it, only ``jacobian_rows`` does.
    """

    differentiable = False
    vjp = None
    always_traced = True          # never computed while tracing, even without tracer inputs

    def __init__(self, name, abstract, lower, lower_cuda):
        self.name = name
        self.abstract = abstract
        self.lowerings = {"cpu": lower, "cuda": lower_cuda}

    def __repr__(self):
        return f"<jittape loop op {self.name}>"


def _lower_loop_index(ctx, node):
    # the loop itself is emitted by codegen around the nodes that depend on this one
    return []


def _lower_onehot(ctx, node):
    k, like = node.inputs
    out = node.out
    name = ctx.name(out)
    return [f"{name} = zeros({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})",
            f"{name}.reshape(-1)[{ctx.name(k)}] = 1"]


def _lower_stack(ctx, node):
    # rows are written in the loop (see codegen); nothing happens at this position
    return []


def _abstract_index(count):
    from .ops.core import Aval
    return Aval((), "int64")


def _abstract_onehot(k, like):
    from .ops.core import Aval
    return Aval(like.shape, like.dtype)


def _abstract_stack(row, count):
    from .ops.core import Aval
    return Aval((count,) + tuple(row.shape), row.dtype)


def _cuda_onehot(ctx, node):
    return [ctx.buffer(node.out), f"onehot({ctx.name(node.out)}, {ctx.name(node.inputs[0])})"]


LOOP_INDEX = _LoopOp("loop_index", _abstract_index, _lower_loop_index, _lower_loop_index)
ONEHOT = _LoopOp("onehot", _abstract_onehot, _lower_onehot, _cuda_onehot)
LOOP_STACK = _LoopOp("loop_stack", _abstract_stack, _lower_stack, _lower_stack)


def jacobian_rows(trace, target, wrt, nodes=None, keep_none=False):
    """d target / d wrt, one row per element of ``target``: Tracers of shape
    ``(target.size,) + wrt[j].shape`` (zeros where unconnected, or None with
    ``keep_none``).

    The rows come from the reverse sweep seeded with the k-th unit vector; the generated
    code runs that sweep in a loop over k, with everything that does not depend on k
    computed once before it.
    """
    nodes = list(trace.nodes if nodes is None else nodes)
    count = 1
    for d in target._var.shape:
        count = count * d
    k = trace.bind(LOOP_INDEX, [], {"count": count})
    seed = trace.bind(ONEHOT, [k, target], {})
    cts = backward(trace, [(target._var, seed)], [w._var for w in wrt], nodes)
    rows = []
    for ct, w in zip(cts, wrt):
        if ct is None and keep_none:
            rows.append(None)
            continue
        if ct is None:
            # every row is zero: nothing depends on the loop index, so there is no loop
            # to stack rows in; the whole block is zeros
            rows.append(ops.broadcast_to(ops.expand_dims(ops.zeros_like(w), 0),
                                         (count,) + tuple(w._var.shape)))
            continue
        if ct.dtype != w.dtype:
            ct = ops.cast(ct, w.dtype)
        rows.append(trace.bind(LOOP_STACK, [ct], {"count": count}))
    return rows
