"""Region ops: ops whose parameters hold a body sub-graph that the generated code runs
in a loop.

The first of them is the Jacobian loop. ``jacobian_rows`` runs one reverse sweep per
element ``k`` of a target: the sweep is traced once, seeded with a one-hot vector at a
loop index, and the nodes that depend on the index become the body of one
``jacobian_loop`` node (the rest, computed once, stay before it). The body's inputs are
the index and the outer values it reads (the node's inputs); its outputs are one row of
each Jacobian, and ``loop_output`` nodes are the stacked rows. Loops do not nest, and
nothing differentiates through one (``autodiff`` says so rather than return zeros).
"""

import operator
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np

from . import ir, ops, regions, tree
from .autodiff import backward
from .ops.core import Aval, record_traced
from .regions import LoopPart, lower_nothing
from .errors import at_user_line
from .recording import ACTIVE_TAPES, current_trace
from .tensor import Tensor
from .trace import Tracer


def _lower_onehot(ctx, node):
    k, like = node.inputs
    out = node.out
    name = ctx.name(out)
    return [f"{name} = zeros({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})",
            f"{name}.reshape(-1)[{ctx.name(k)}] = 1"]


def _cuda_onehot(ctx, node):
    return [ctx.buffer(node.out), f"onehot({ctx.name(node.out)}, {ctx.name(node.inputs[0])})"]


def _interpret_onehot(env, node):
    like = node.inputs[1]
    seed = np.zeros(env.param(like.shape), node.out.dtype)
    seed.reshape(-1)[int(env.value(node.inputs[0]))] = 1
    env.values[node.out.id] = seed


def _interpret_jacobian(env, node):
    body = node.params["body"]
    count = env.param(node.params["count"])
    rows = [[] for _ in body.outputs]
    for k in range(count):                # one reverse sweep per target element
        env.values[body.inputs[0].id] = np.int64(k)
        env.run(body.nodes)
        for r, y in zip(rows, body.outputs):
            r.append(env.value(y))
    env.outputs(node, [regions._stacked(env, r, y, count) for r, y in zip(rows, body.outputs)])


LOOP_INDEX = LoopPart("loop_index", "index", lambda count: Aval((), "int64"),
                      lower_nothing, lower_nothing)
LOOP_INDEX.interpret = lambda env, node: None        # (the loop sets its value)
ONEHOT = LoopPart("onehot", "seed", lambda k, like: Aval(like.shape, like.dtype),
                  _lower_onehot, _cuda_onehot)
ONEHOT.interpret = _interpret_onehot
JACOBIAN_LOOP = LoopPart("jacobian_loop", "region", lambda *captured, count, body: Aval((), "bool"),
                         lower_nothing, lower_nothing, regions=("body",))
JACOBIAN_LOOP.interpret = _interpret_jacobian
LOOP_OUTPUT = LoopPart("loop_output", "output", None, lower_nothing, lower_nothing)
LOOP_OUTPUT.interpret = regions.interpret_output
RECORDS = (LOOP_INDEX, ONEHOT, JACOBIAN_LOOP, LOOP_OUTPUT) + regions.RECORDS


def has_loop(nodes):
    """Whether ``nodes`` already hold a Jacobian loop (loops do not nest)."""
    return any(n.prim is JACOBIAN_LOOP or n.prim is LOOP_INDEX for n in nodes)


def region_of(graph):
    """``(before, region node, output nodes, after)`` of a graph with a loop, or None."""
    region = next((n for n in graph.nodes if n.prim.kind == "loop" and n.prim.role == "region"),
                  None)
    if region is None:
        return None
    before, outputs, after = [], [], []
    seen = False
    for n in graph.nodes:
        if n is region:
            seen = True
        elif n.prim.kind == "loop" and n.prim.role == "output":
            outputs.append(n)
        else:
            (after if seen else before).append(n)
    return before, region, outputs, after


def _record(trace, prim, inputs, out):
    """Let tapes recording in the traced function see a node made here: a tape that
    watches what the loop reads must not take its rows for constants."""
    if ACTIVE_TAPES:
        record_traced(prim, [Tracer._of(v, trace) for v in inputs], inputs, out, trace)


def jacobian_rows(trace, target, wrt, nodes=None, keep_none=False):
    """d target / d wrt, one row per element of ``target``: Tracers of shape
    ``(target.size,) + wrt[j].shape`` (zeros where unconnected, or None with
    ``keep_none``).

    The rows come from the reverse sweep seeded with the k-th unit vector; the generated
    code runs that sweep in a loop over k, with everything that does not depend on k
    computed once before it.
    """
    nodes = list(trace.nodes if nodes is None else nodes)
    count = _size(target)
    start = len(trace.nodes)
    k = trace.bind(LOOP_INDEX, [], {"count": count})
    seed = trace.bind(ONEHOT, [k, target], {})
    cts = backward(trace, [(target._var, seed)], [w._var for w in wrt], nodes)
    cts = [ct if ct is None or ct.dtype == w.dtype else ops.cast(ct, w.dtype)
           for ct, w in zip(cts, wrt)]
    stacked = _index_loop(trace, start, k, count, cts)
    rows = []
    for ct, w in zip(cts, wrt):
        if ct is None and keep_none:
            rows.append(None)
        else:
            rows.append(_stacked_or_repeated(stacked, ct, w, count))
    return rows


def jacobian_columns(trace, target, w, nodes=None):
    """d target / d w by forward mode, one column per element of ``w``: a Tracer of shape
    ``(w.size,) + target.shape``. The forward sweep (``autodiff.forward``: the
    primitives' JVP rules) seeded with the k-th unit vector, in a loop over k: cheaper
    than rows when ``target`` has more elements than ``w``."""
    from .autodiff import forward
    nodes = list(trace.nodes if nodes is None else nodes)
    count = _size(w)
    start = len(trace.nodes)
    k = trace.bind(LOOP_INDEX, [], {"count": count})
    seed = trace.bind(ONEHOT, [k, w], {})
    found = forward(trace, nodes, {w._var.id: seed})
    t = found.get(target._var.id)
    if t is not None and t.dtype != target.dtype:
        t = ops.cast(t, target.dtype)
    stacked = _index_loop(trace, start, k, count, [t])
    return _stacked_or_repeated(stacked, t, target, count)


def _size(x):
    count = 1
    for d in x._var.shape:
        count = count * d
    return count


def _stacked_or_repeated(stacked, value, like, count):
    if value is None or value._var.id not in stacked:
        # nothing depends on the index (all zero, or all the same): no loop to stack
        # them in; the block is the value repeated
        row = ops.zeros_like(like) if value is None else value
        return ops.broadcast_to(ops.expand_dims(row, 0), (count,) + tuple(like._var.shape))
    return stacked[value._var.id]


def _index_loop(trace, start, k, count, results):
    """The nodes recorded since ``start`` that depend on the index ``k`` become one loop
    over k (the others stay, computed once before it); ``{id: stacked Tracer}`` of each
    of ``results`` (Tracers or None) computed in it, ``(count,) + shape``."""
    added = trace.nodes[start:]
    in_loop = {k._var.id}
    body, outside = [], []
    for n in added:
        if n.out is k._var:
            continue
        if any(v.id in in_loop for v in n.var_inputs()):
            in_loop.add(n.out.id)
            body.append(n)
        else:
            outside.append(n)
    del trace.nodes[start:]
    trace.nodes.extend(outside)
    looped = [r for r in results if r is not None and r._var.id in in_loop]
    made = {n.out.id for n in body}
    captured, seen = [], set()
    for v in [v for n in body for v in n.var_inputs()] + [r._var for r in looped]:
        if v.id not in made and v.id != k._var.id and v.id not in seen:
            seen.add(v.id)
            captured.append(v)
    stacked = {}
    if looped:
        graph = ir.Graph([k._var] + captured, [], body, [r._var for r in looped],
                         name="jacobian_row", checks=trace.checks)
        region = trace._node(JACOBIAN_LOOP, captured, {"count": count, "body": graph},
                             Aval((), "bool"))
        _record(trace, JACOBIAN_LOOP, captured, region)
        for j, r in enumerate(looped):
            out = trace._node(LOOP_OUTPUT, [region], {"index": j},
                              Aval((count,) + tuple(r._var.shape), r.dtype))
            _record(trace, LOOP_OUTPUT, [region], out)
            stacked[r._var.id] = Tracer._of(out, trace)
    return stacked


# ---------------------------------------------------------------------------
# loops and branches with JAX's interface
#
# Eagerly they run as Python (tapes record each step). In a compiled function (CPU or
# CUDA), ``scan``, ``fori_loop`` and ``while_loop`` trace their body once into a region
# (``regions.py``): a loop in the generated code, whatever the trip count; ``cond`` and
# ``switch`` on a traced value trace each branch once into a region that runs one.
# While a tape records inside the compiled function, each step is straight-line code and a branch on a traced value is a guard (the variant traced
# takes the branch the values take, another call taking the other branch traces that
# one), as a Python loop or ``if`` would. A Python ``if`` on a traced value in a loop
# body, where there is one trace for every step, raises and names jt.cond. Their
# results, carries and gradients are JAX's.

def _leaf_type(x):
    """``(dtype name, shape)`` of a carry leaf; a Python number is weak, as in JAX:
    ``(kind, ())``, which a 0-d array of that kind (``"f"``, ``"i"``, ``"b"``) matches."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, (Tensor, np.generic)):
        return ("b" if isinstance(x, bool) else "i" if isinstance(x, int) else "f"), ()
    if isinstance(x, Tracer):                   # (its ``shape`` would mark the trace)
        return x.dtype.name, tuple(int(d) for d in x._var.shape)
    shape = tuple(int(d) for d in getattr(x, "shape", np.shape(x)))
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype if dtype is not None else np.asarray(x).dtype).name, shape


def _type_text(t):
    name, shape = t
    if len(name) == 1:
        return {"b": "bool", "i": "int", "f": "float"}[name]
    return f"{name}{list(shape)}"


def _same_type(a, b):
    if a == b:
        return True
    (na, sa), (nb, sb) = a, b
    if len(na) == 1 or len(nb) == 1:           # a Python number: a 0-d array of its kind
        kinds = [n if len(n) == 1 else np.dtype(n).kind.replace("u", "i") for n in (na, nb)]
        return sa == sb == () and kinds[0] == kinds[1]
    return False


def _check_carry(what, init, new, step):
    """The carry keeps its structure, shapes and dtypes from step to step (as in JAX)."""
    leaves, treedef = tree.flatten(init)
    new_leaves, new_def = tree.flatten(new)
    if new_def != treedef:
        raise TypeError(at_user_line(
            f"{what}: the body returned a carry of another structure at step {step} "
            f"({tree.structure(new)!r}, expected {tree.structure(init)!r})"))
    for k, (a, b) in enumerate(zip(leaves, new_leaves)):
        ta, tb = _leaf_type(a), _leaf_type(b)
        if not _same_type(ta, tb):
            raise TypeError(at_user_line(
                f"{what}: carry leaf {k} changed from {_type_text(ta)} to {_type_text(tb)} "
                f"at step {step}; a carry keeps its shape and dtype (cast it in the body)"))


def scan(f: Callable[[Any, Any], Tuple[Any, Any]], init: Any, xs: Any = None,
         length: Optional[int] = None, reverse: bool = False, unroll: Union[int, bool] = 1,
         checkpoint: Union[None, bool, int] = None) -> Tuple[Any, Any]:
    """``f(carry, x) -> (carry, y)`` over the leading axis of ``xs`` (any pytree of
    arrays, or None with ``length``): returns ``(carry, ys)``, ``ys`` the ``y``s stacked
    (a pytree of arrays, or None where ``f`` returns None), as ``jax.lax.scan``.
    ``reverse`` runs from the last element; ``ys`` keep the elements' order.

    Compiled, the body is compiled once, whatever the length; ``unroll=k`` runs ``k``
    steps per iteration of the loop (``True``: every step straight-line). The backward
    pass reads what each step's VJP needs, stored by the forward loop (``checkpoint``
    None). ``checkpoint=True`` stores the carries only, and each backward step runs its
    forward step again; ``checkpoint=k`` (an int) stores every k-th carry, and the
    backward pass runs each block of ``k`` steps forward again, keeping that block's
    values only: memory of ``length / k`` carries and ``k`` steps' values (``k`` near
    ``sqrt(length)`` for the least). Eagerly the tape keeps every step's values."""
    x_leaves, x_def = tree.flatten(xs)
    if any(not np.ndim(x) for x in x_leaves):
        shapes = ", ".join(str(np.shape(x)) for x in x_leaves)
        raise ValueError(at_user_line(
            f"scan: every leaf of xs needs a leading axis to scan over (shapes {shapes})"))
    lengths = {int(np.shape(x)[0]) for x in x_leaves}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ValueError(at_user_line(
            "scan: " + ("give length= when xs is None" if not lengths else
                        f"xs' leading sizes and length disagree: {sorted(lengths)}")))
    (n,) = lengths
    if n == 0:
        raise ValueError(at_user_line("scan: nothing to scan over (length 0)"))
    if not (checkpoint is None or checkpoint is True or
            isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint > 0):
        raise ValueError(at_user_line(
            f"scan: checkpoint={checkpoint!r}; use None (store what the backward pass "
            "reads), True (store the carries) or an int k (store every k-th carry)"))
    for x in x_leaves:
        if isinstance(x, Tracer):          # the trip count is a size: the trace holds for it only
            x._trace.reads_sizes = True     # type: ignore[attr-defined]  # (set by the trace)
    trace = current_trace()
    unroll = n if unroll is True else max(int(unroll), 1)
    acc = _forward_only(trace)
    if acc is not None and unroll == 1 and not checkpoint:
        check = lambda a, b: _check_carry("scan", a, b, 0)        # noqa: E731
        return _forward_scan(acc, trace, f, init, xs, n, reverse, check)
    if regions.compiles_as_loop(trace) and unroll < n:
        check = lambda a, b: _check_carry("scan", a, b, 0)        # noqa: E731
        if checkpoint is True or checkpoint == 1 or checkpoint and checkpoint >= n:
            return regions.traced_scan(trace, f, init, xs, n, reverse, check, recompute=True)
        if checkpoint:
            if unroll > 1:
                raise ValueError(at_user_line(
                    f"scan: give unroll or checkpoint, not both (unroll={unroll}, "
                    f"checkpoint={checkpoint})"))

            def block(carry, leaves, indices):   # a loop of its own, stored per step
                part = tree.unflatten(x_def, leaves) if x_leaves else None
                return scan(f, carry, part, length=len(indices), reverse=reverse)
            return _scan_blocks(trace, init, x_leaves, x_def, n, reverse, checkpoint, block,
                                check, recompute=True)
        if unroll == 1:
            return regions.traced_scan(trace, f, init, xs, n, reverse, check)

        def straight(carry, leaves, indices):      # straight-line steps
            k = len(indices)
            return _scan_steps(f, carry, leaves, x_def, range(k - 1, -1, -1) if reverse else range(k))
        return _scan_blocks(trace, init, x_leaves, x_def, n, reverse, unroll, straight, check)
    return _scan_steps(f, init, x_leaves, x_def, range(n - 1, -1, -1) if reverse else range(n))


def _scan_steps(f, init, x_leaves, x_def, steps):
    """The scan's steps ``steps`` (element indices, in order) one after the other:
    ``(carry, {index: y})``."""
    carry = init
    ys = {}
    for step, t in enumerate(steps):
        x = tree.unflatten(x_def, [leaf[t] for leaf in x_leaves]) if x_leaves else None
        new, ys[t] = f(carry, x)
        _check_carry("scan", carry, new, step)
        carry = new
    return carry, _stack_ys([ys[t] for t in sorted(ys)])


def _stack_ys(ys):
    y_leaves = [tree.flatten(y)[0] for y in ys]
    y_def = tree.flatten(ys[0])[1]
    stacked = [ops.stack([leaves[j] for leaves in y_leaves]) for j in range(len(y_leaves[0]))]
    return tree.unflatten(y_def, stacked) if stacked else ys[0]


def _scan_blocks(trace, init, x_leaves, x_def, n, reverse, k, block, check, recompute=False):
    """A compiled scan as a loop over blocks of ``k`` steps, each ``block(carry, leaves,
    steps)`` (the block's slices of the xs' leaves, and its element indices); the
    ``n % k`` last elements are one more block after the loop (before it, reversed)."""
    blocks = n // k
    rolled = blocks * k
    lead = [ops.reshape(leaf[:rolled] if rolled < n else leaf, (blocks, k) + tuple(
        leaf._var.shape[1:] if isinstance(leaf, Tracer) else np.shape(leaf)[1:]))
        for leaf in x_leaves]
    carry, tail = init, None
    rest = range(rolled, n)
    if reverse and rest:
        carry, tail = block(carry, [leaf[rolled:] for leaf in x_leaves], rest)
    carry, ys = regions.traced_scan(
        trace, lambda c, b: block(c, tree.flatten(b)[0] if x_leaves else [], range(k)),
        carry, tree.unflatten(x_def, lead) if x_leaves else None, blocks, reverse, check,
        recompute)
    if not reverse and rest:
        carry, tail = block(carry, [leaf[rolled:] for leaf in x_leaves], rest)
    if ys is None:
        return carry, None
    ys = tree.map_leaves(lambda y: ops.reshape(y, (rolled,) + tuple(y._var.shape[2:])), ys)
    if tail is not None:
        leaves, y_def = tree.flatten(ys)
        ys = tree.unflatten(y_def, [ops.concatenate([a, b])          # (the elements' order)
                                    for a, b in zip(leaves, tree.flatten(tail)[0])])
    return carry, ys


def fori_loop(lower: int, upper: int, body: Callable[[Any, Any], Any], init: Any) -> Any:
    """``body(i, carry) -> carry`` for ``i`` in ``range(lower, upper)`` (Python ints, as
    the bounds must be here), as ``jax.lax.fori_loop``."""
    lower, upper = operator.index(lower), operator.index(upper)
    trace = current_trace()
    acc = _forward_only(trace)
    if (regions.compiles_as_loop(trace) or acc is not None) and upper - lower > 1:
        # a scan over the indices: the body's ``i`` is a traced int64 scalar
        check = lambda a, b: _check_carry("fori_loop", a, b, 0)    # noqa: E731
        one = lambda c, i: (body(i, c), None)                      # noqa: E731
        if acc is not None:
            return _forward_scan(acc, trace, one, init, np.arange(lower, upper),
                                 upper - lower, False, check)[0]
        carry, _ = regions.traced_scan(trace, one, init, np.arange(lower, upper),
                                       upper - lower, False, check)
        return carry
    carry = init
    for step, i in enumerate(range(lower, upper)):
        new = body(i, carry)
        _check_carry("fori_loop", carry, new, step)
        carry = new
    return carry


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
               init: Any) -> Any:
    """``body_fun(carry) -> carry`` while ``cond_fun(carry)`` holds, as
    ``jax.lax.while_loop``, and differentiable in reverse mode here, the trip count
    depending on the data: compiled, the loop is one region whose backward pass runs it
    again keeping each step's carry on a stack that grows in the kernel, then the steps'
    VJPs in reverse (``regions.while_vjp``)."""
    trace = current_trace()
    check = lambda a, b: _check_carry("while_loop", a, b, 0)       # noqa: E731
    acc = _forward_only(trace)
    if acc is not None:
        return _forward_while(acc, trace, cond_fun, body_fun, init, check)
    if regions.compiles_as_loop(trace):
        return regions.traced_while(trace, cond_fun, body_fun, init, check)
    carry = init
    step = 0
    while cond_fun(carry):
        new = body_fun(carry)
        _check_carry("while_loop", carry, new, step)
        carry = new
        step += 1
    return carry


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``; only that branch
    runs (``jax.lax.cond``). ``pred`` is a scalar. Compiled (CPU), on a traced ``pred``
    both branches are traced into one region that runs the one ``pred`` picks: one
    kernel for both, inside a loop body too; the branches return values of one structure,
    shapes and dtypes."""
    if np.ndim(pred) if not isinstance(pred, Tensor) else pred.ndim:
        raise TypeError(at_user_line(f"cond: pred must be a scalar, not of shape {np.shape(pred)}"))
    trace = current_trace()
    acc = _forward_only(trace)
    if isinstance(pred, Tracer) and (regions.compiles_as_loop(trace) or acc is not None):
        index = ops.cast(ops.not_equal(pred, 0), np.int64)
        return _switch_region(acc, trace, index, [false_fun, true_fun], operands, "cond")
    return true_fun(*operands) if pred else false_fun(*operands)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[index](*operands)``, ``index`` clamped into range (``jax.lax.switch``);
    compiled, on a traced index, one region as for ``cond`` (up to
    ``regions.MAX_BRANCHES`` branches; more are guards)."""
    branches = list(branches)
    if not branches:
        raise ValueError(at_user_line("switch: no branches"))
    trace = current_trace()
    acc = _forward_only(trace)
    if (isinstance(index, Tracer) and (regions.compiles_as_loop(trace) or acc is not None)
            and 2 <= len(branches) <= regions.MAX_BRANCHES):
        if index.dtype.kind not in "iub":
            raise TypeError(at_user_line(f"switch: the index must be an integer, not {index.dtype}"))
        return _switch_region(acc, trace, ops.cast(index, np.int64), branches, operands,
                              "switch")
    for k, branch in enumerate(branches[:-1]):
        if index <= k:                      # a guard per comparison on a traced index
            return branch(*operands)
    return branches[-1](*operands)


# -- forward mode through loops -------------------------------------------------------
#
# Compiled, a loop run under a forward accumulator (and no tape) stays a loop: the
# accumulator's tangents ride along as more carries (and more elements, for an xs that
# has tangents). Its body registers the tangent placeholders with the accumulator, runs
# the user's body (the accumulator computes its ops' tangents there, also for values
# the body reads from outside, whose tangents it knows) and returns the new carries'
# tangents beside them. The region itself is not recorded by the accumulator (it has
# no JVP rule of its own): its outputs get the tangents the loop computed.

def _forward_only(trace):
    """The one forward accumulator of this thread when it records alone in ``trace``
    (no tape: a tape records a loop's steps one by one), else None."""
    if trace is None:
        return None
    from .recording import thread_tapes
    tapes = thread_tapes()
    if len(tapes) == 1 and tapes[0]._forward and tapes[0]._trace is trace:
        return tapes[0]
    return None


def _tangent_slots(acc, leaves, every_float):
    """The tangent of each leaf: the accumulator's, zeros for a float leaf without one
    when ``every_float`` (a carry may gain one), None for the others."""
    out = []
    for leaf in leaves:
        t = acc._get(leaf) if isinstance(leaf, Tensor) else None
        if t is None and every_float and np.dtype(_dtype_of(leaf)).kind in "fc":
            # a Python number's carry takes the body's dtype: its tangent starts float64
            # (cast to the carry's dtype after the loop, ``_register``)
            t = ops.zeros_like(leaf) if isinstance(leaf, Tensor) else np.zeros((), np.float64)
        out.append(t)
    return out


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def _register(acc, leaves, tangents):
    for leaf, t in zip(leaves, tangents):
        if t is not None and isinstance(leaf, Tensor):
            if t.dtype != leaf.dtype:
                t = ops.cast(t, leaf.dtype)
            acc._set(leaf, t)


def _tangents_of(acc, leaves, like=None):
    """The accumulator's tangents of ``leaves`` (zeros where it has none, for floats)."""
    out = []
    for k, leaf in enumerate(leaves):
        if like is not None and like[k] is None:
            out.append(None)
            continue
        t = acc._get(leaf) if isinstance(leaf, Tensor) else None
        out.append(ops.zeros_like(leaf) if t is None else t)
    return out


class _Recording:
    """The accumulator records inside the body and not around the region."""

    def __init__(self, acc, on):
        self.acc, self.on = acc, on

    def __enter__(self):
        self.before = self.acc._busy
        self.acc._busy = not self.on

    def __exit__(self, *exc):
        self.acc._busy = self.before


def _forward_scan(acc, trace, f, init, xs, n, reverse, check):
    c_leaves, c_def = tree.flatten(init)
    x_leaves, x_def = tree.flatten(xs)
    tc = _tangent_slots(acc, c_leaves, True)
    tx = _tangent_slots(acc, x_leaves, False)
    c_keep = [k for k, t in enumerate(tc) if t is not None]
    x_keep = [k for k, t in enumerate(tx) if t is not None]

    def body(carry, x):
        cs, tcs = carry
        xl, txs = x
        _register(acc, cs, _spread(tcs, c_keep, len(cs)))
        _register(acc, xl, _spread(txs, x_keep, len(xl)))
        with _Recording(acc, True):
            new, y = f(tree.unflatten(c_def, cs), tree.unflatten(x_def, xl) if x_leaves else None)
        new_leaves = tree.flatten(new)[0]
        y_leaves, y_def = tree.flatten(y)
        with _Recording(acc, True):
            t_new = _tangents_of(acc, new_leaves)
            t_y = _tangents_of(acc, y_leaves, [None if np.dtype(_dtype_of(v)).kind not in "fc"
                                               else True for v in y_leaves])
        shapes[0] = y_def
        # (a tangent carry keeps its dtype: a Python number's carry takes the body's)
        return ((new_leaves, [ops.cast(t_new[k], t.dtype) if t_new[k].dtype != t.dtype else t_new[k]
                              for k, t in zip(c_keep, tcs)]),
                (y_leaves, [t for t in t_y if t is not None]))

    shapes = [None]
    with _Recording(acc, False):
        (cs, tcs), (ys, tys) = regions.traced_scan(
            trace, body, (c_leaves, [tc[k] for k in c_keep]),
            (x_leaves, [tx[k] for k in x_keep]), n, reverse,
            lambda a, b: check(tree.unflatten(c_def, a[0]), tree.unflatten(c_def, b[0])))
    _register(acc, cs, _spread(tcs, c_keep, len(cs)))
    floats = [k for k, v in enumerate(ys) if np.dtype(_dtype_of(v)).kind in "fc"]
    _register(acc, ys, _spread(tys, floats, len(ys)))
    carry = tree.unflatten(c_def, cs)
    return carry, (tree.unflatten(shapes[0], ys) if shapes[0] is not None else None)


def _spread(values, positions, n):
    out = [None] * n
    for k, v in zip(positions, values):
        out[k] = v
    return out


def _forward_while(acc, trace, cond_fun, body_fun, init, check):
    c_leaves, c_def = tree.flatten(init)
    tc = _tangent_slots(acc, c_leaves, True)
    keep = [k for k, t in enumerate(tc) if t is not None]

    def cond(carry):
        with _Recording(acc, False):
            return cond_fun(tree.unflatten(c_def, carry[0]))

    def body(carry):
        cs, tcs = carry
        _register(acc, cs, _spread(tcs, keep, len(cs)))
        with _Recording(acc, True):
            new_leaves = tree.flatten(body_fun(tree.unflatten(c_def, cs)))[0]
            t_new = _tangents_of(acc, new_leaves)
        return new_leaves, [ops.cast(t_new[k], t.dtype) if t_new[k].dtype != t.dtype else t_new[k]
                            for k, t in zip(keep, tcs)]

    with _Recording(acc, False):
        cs, tcs = regions.traced_while(
            trace, cond, body, (c_leaves, [tc[k] for k in keep]),
            lambda a, b: check(tree.unflatten(c_def, a[0]), tree.unflatten(c_def, b[0])))
    _register(acc, cs, _spread(tcs, keep, len(cs)))
    return tree.unflatten(c_def, cs)


def _switch_region(acc, trace, index, branches, operands, what):
    """``traced_switch``, with the accumulator's tangents carried through the branches
    when ``acc`` is given."""
    if acc is None:
        return regions.traced_switch(trace, index, branches, operands, what)
    leaves, op_def = tree.flatten(list(operands))
    tangents = _tangent_slots(acc, leaves, False)
    keep = [k for k, t in enumerate(tangents) if t is not None]
    shapes = [None]

    def wrap(branch):
        def run(ops_leaves, t_leaves):
            _register(acc, ops_leaves, _spread(t_leaves, keep, len(ops_leaves)))
            with _Recording(acc, True):
                out = branch(*tree.unflatten(op_def, ops_leaves))
                out_leaves, out_def = tree.flatten(out)
                t_out = _tangents_of(acc, out_leaves)
            floats = [k for k, v in enumerate(out_leaves) if np.dtype(_dtype_of(v)).kind in "fc"]
            shapes[0] = (out_def, floats)
            return out_leaves, [t_out[k] for k in floats]
        return run

    with _Recording(acc, False):
        outs, t_outs = regions.traced_switch(trace, index, [wrap(b) for b in branches],
                                             (leaves, [tangents[k] for k in keep]), what)
    out_def, floats = shapes[0]
    _register(acc, outs, _spread(t_outs, floats, len(outs)))
    return tree.unflatten(out_def, outs)
