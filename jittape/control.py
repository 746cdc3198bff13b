"""Ops that make loops in generated code.

The first of them is the Jacobian loop: ``jacobian_rows`` runs one reverse sweep per
element of a target, and the generated code runs that sweep in a ``for`` loop whose
body is everything that depends on the loop index (``codegen.cpu`` finds it). Its parts
are op records of kind ``loop`` (``role``: the index, the one-hot seed, the stacking of
rows); they are never computed while tracing and never differentiated.
"""

from . import ops
from .autodiff import backward
from .ops.core import Aval, OpRecord


class LoopPart(OpRecord):
    """A part of a generated loop; not a registry primitive: users never apply it."""

    kind = "loop"
    differentiable = False
    foldable = False             # never computed while tracing, even without traced inputs

    def __init__(self, name, role, abstract, lower, lower_cuda):
        self.name = name
        self.role = role
        self.abstract = abstract
        self.lowerings = {"cpu": lower, "cuda": lower_cuda}


def _lower_nothing(ctx, node):
    # the index's loop is emitted around the nodes that depend on it, and the rows are
    # written in that loop: nothing happens at the node's own position
    return []


def _lower_onehot(ctx, node):
    k, like = node.inputs
    out = node.out
    name = ctx.name(out)
    return [f"{name} = zeros({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})",
            f"{name}.reshape(-1)[{ctx.name(k)}] = 1"]


def _cuda_onehot(ctx, node):
    return [ctx.buffer(node.out), f"onehot({ctx.name(node.out)}, {ctx.name(node.inputs[0])})"]


LOOP_INDEX = LoopPart("loop_index", "index", lambda count: Aval((), "int64"),
                      _lower_nothing, _lower_nothing)
ONEHOT = LoopPart("onehot", "seed", lambda k, like: Aval(like.shape, like.dtype),
                  _lower_onehot, _cuda_onehot)
LOOP_STACK = LoopPart("loop_stack", "stack",
                      lambda row, count: Aval((count,) + tuple(row.shape), row.dtype),
                      _lower_nothing, _lower_nothing)


def has_loop(nodes):
    """Whether ``nodes`` already hold a Jacobian loop (loops do not nest)."""
    return any(n.prim is LOOP_INDEX for n in nodes)


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
