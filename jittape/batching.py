"""Batching: ``jt.vmap``, a function mapped over an axis of its arguments, compiled as
one function whose ops work on the whole batch.

``vmap(f)`` is a compiled function (``jt.function``) whose body is ``batched_call``: it
traces ``f`` once on placeholders for one example of each mapped argument
(``BATCH_VALUE`` nodes, as a loop body's values are traced). The nodes that depend on a
placeholder are taken out of the trace (``regions._cut``); the others read only
unmapped values and stay, computed once for the batch. The nodes taken out are applied
again, in order, to the whole batch: each primitive's batching rule (``Primitive.batch``)
gives the op on values whose first axis is the batch's:

- an elementwise op: the example's operands broadcast as before, those of the batch
  given the example's rank after their batch axis;
- a reduction, a transpose, a reshape, a join: the same op with its axes one further;
- a matrix product: a matrix product over a stack of matrices (NumPy's ``matmul``
  broadcasts leading axes), never a loop of matrix-vector products; an einsum: one index
  more;
- indexing: a full slice in front (index arrays that do not depend on the example).

A rule that has no batched form for its case (an index array computed from the
example) returns None, and that op runs in a ``jt.scan`` over the batch. A region (a
loop, a branch) or a custom rule inside ``f`` has no batching rule: all of ``f`` then
runs in a ``jt.scan`` over the batch, one compiled loop. Either way the program is one
native call.

Called eagerly while a tape records, ``vmap(f)`` calls ``f`` once per example and stacks
the results, so that the tape sees every op (a compiled function is one call the tape
does not differentiate).
"""

import functools
import string
from typing import Any, Callable

import numpy as np

from . import ops, tree
from .ir import Var
from .errors import UnsupportedError, at_user_line
from .ops.core import REGISTRY, Primitive, normalize_axes
from .recording import current_trace, thread_tapes
from .regions import _cut, bound_record, effects, new_effects
from .trace import Tracer


BATCH_VALUE = bound_record(
    "vmap_mapped_argument", "a mapped argument of vmap",
    "the function is traced once for all examples of the batch, so it cannot take a branch "
    "per example. Use jt.where to choose between values (or jt.cond)")


# -- rules -------------------------------------------------------------------------------
# rule(args, batched, out, **params): ``args`` the operands (those of the batch with the
# batch axis first), ``batched`` which of them are, ``out`` the example's result (its
# Var: shape, dtype); returns the batch's result (batch axis first), or None when the
# case has no batched form (the op then runs in a loop over the batch).

def _rank(a, batched):
    shape = _shape(a)
    return len(shape) - 1 if batched else len(shape)


def _shape(a):
    return tuple(a._var.shape) if isinstance(a, Tracer) else np.shape(a)


def _lift(a, rank):
    """Batched ``a`` given per-example rank ``rank`` (unit axes after the batch axis)."""
    r = len(_shape(a)) - 1
    return ops.expand_dims(a, tuple(range(1, 1 + rank - r))) if rank > r else a


def _full(a, size):
    """Unbatched ``a`` repeated over a batch of ``size``."""
    return ops.broadcast_to(a, (size,) + tuple(_shape(a)))


def _size(args, batched):
    return next(_shape(a)[0] for a, b in zip(args, batched) if b)


def _elementwise_rule(prim):
    def rule(args, batched, out, **params):
        rank = len(out.shape)
        args = [_lift(a, rank) if b else a for a, b in zip(args, batched)]
        if "shape" in params:                                    # broadcast_to
            params = dict(params, shape=(_size(args, batched),) + tuple(params["shape"]))
        return prim.bind(*args, **params)
    return rule


def _reduction_rule(prim):
    def rule(args, batched, out, axis, keepdims):
        (x,) = args
        axes = normalize_axes(prim.name, axis, _rank(x, True))
        return prim.bind(x, axis=tuple(a + 1 for a in axes), keepdims=keepdims)
    return rule


def _along_axis_rule(prim):
    """An op along one axis (``cumsum``): the same op, the axis one further."""
    def rule(args, batched, out, axis, **params):
        return prim.bind(*args, axis=axis + 1, **params)
    return rule


def _matmul_rule(args, batched, out):
    """A matrix product of a batch: leading axes broadcast (``np.matmul``); a vector of the
    batch is a stack of one-row (or one-column) matrices, the unit axis squeezed after."""
    (x, y), (bx, by) = args, batched
    rx, ry = _rank(x, bx), _rank(y, by)
    if not by and rx == 1 and ry == 2:           # a batch of vectors times a matrix: rows
        return ops.matmul(x, y)
    if not bx and rx == 2 and ry == 1:           # a matrix times a batch of vectors
        return ops.matmul(y, ops.transpose(x, (1, 0)))
    as_rows = rx == 1 and (bx or (by and ry == 1))
    as_cols = ry == 1 and (by or (bx and rx == 1))
    if as_rows:
        x = ops.expand_dims(x, len(_shape(x)) - 1)
        rx = 2
    if as_cols:
        y = ops.expand_dims(y, len(_shape(y)))
        ry = 2
    rank = max(rx if rx >= 2 else 0, ry if ry >= 2 else 0)
    x = _lift(x, rank) if bx else x
    y = _lift(y, rank) if by else y
    result = ops.matmul(x, y)
    n = len(_shape(result))
    squeeze = ((n - 2,) if as_rows else ()) + ((n - 1,) if as_cols else ())
    return ops.squeeze(result, squeeze) if squeeze else result


def _einsum_rule(args, batched, out, spec):
    from .ops.linalg import parse_einsum
    ins, o = parse_einsum(spec, len(args))
    letter = next(c for c in string.ascii_letters if c not in spec)
    ins = [letter + s if b else s for s, b in zip(ins, batched)]
    return REGISTRY["einsum"].bind(*args, spec=",".join(ins) + "->" + letter + o)


def _reshape_rule(args, batched, out, shape):
    (x,) = args
    return REGISTRY["reshape"].bind(x, shape=(_shape(x)[0],) + tuple(shape))


def _transpose_rule(args, batched, out, axes):
    (x,) = args
    return REGISTRY["transpose"].bind(x, axes=(0,) + tuple(a + 1 for a in axes))


def _join_rule(prim, new_axis):
    def rule(args, batched, out, axis):
        size = _size(args, batched)
        rank = _rank(args[0], batched[0]) + new_axis
        args = [a if b else _full(a, size) for a, b in zip(args, batched)]
        return prim.bind(*args, axis=axis % rank + 1)
    return rule


def _advanced_apart(index, arrays, rank):
    """Whether an index's advanced items (index arrays, and ints beside them) are not
    next to each other: NumPy then puts their axes first (``getitem``'s shape rule)."""
    if not arrays:
        return False
    consumed = sum(1 for item in index if item[0] in ("slice", "int", "array"))
    items = []
    for item in index:
        items.extend([("slice",)] * (rank - consumed) if item[0] == "ellipsis" else [item])
    advanced = [k for k, item in enumerate(items) if item[0] in ("array", "int")]
    return advanced != list(range(advanced[0], advanced[-1] + 1))


def _index_shape(arrays):
    from .ops.core import broadcast_shapes
    return broadcast_shapes("getitem", *[_shape(a) for a in arrays])


def _getitem_rule(args, batched, out, index):
    (x, *arrays), (bx, *barrays) = args, batched
    if any(barrays):                   # index arrays computed from the example: a loop
        return None
    result = REGISTRY["getitem"].bind(x, *arrays, index=(("slice", None, None, None),) + index)
    if _advanced_apart(index, arrays, _rank(x, bx)):     # the batch axis came after theirs
        k = len(_index_shape(arrays))
        n = len(_shape(result))
        result = ops.transpose(result, (k,) + tuple(i for i in range(n) if i != k))
    return result


def _index_add_rule(args, batched, out, index, shape):
    (g, *arrays), (_, *barrays) = args, batched
    if any(barrays):
        return None
    if _advanced_apart(index, arrays, len(shape)):       # the batch axis after the arrays'
        k = len(_index_shape(arrays))
        n = len(_shape(g))
        order = list(range(1, n))
        order.insert(k, 0)
        g = ops.transpose(g, tuple(order))
    return REGISTRY["index_add"].bind(g, *arrays, index=(("slice", None, None, None),) + index,
                                      shape=(_shape(args[0])[0],) + tuple(shape))


def _set_row_rule(args, batched, out):
    """set_row of a batch at one row for all: the row axis moved first, one set_row of
    the batch's rows, moved back. A row per example is a loop (None)."""
    (x, v, i), (bx, bv, bi) = args, batched
    if bi:
        return None
    size = _size(args, batched)
    x = x if bx else _full(x, size)
    v = v if bv else _full(v, size)
    order = (1, 0) + tuple(range(2, len(_shape(x))))      # (its own inverse)
    return ops.transpose(REGISTRY["set_row"].bind(ops.transpose(x, order), v, i), order)


def _passing_rule(prim):
    """An op whose result is its operand's shape, each element on its own (a check)."""
    return lambda args, batched, out, **params: prim.bind(*args, **params)


def _matrices_rule(prim):
    """An op of a stack of matrices (np.linalg's): a batch is one more leading axis."""
    return lambda args, batched, out, **params: prim.bind(*args, **params)


def _solve_rule(args, batched, out):
    """solve of a batch: a stack of systems (leading axes broadcast, NumPy's rule); a batch
    of vector right-hand sides is a stack of one-column matrices, squeezed after."""
    (a, b), (ba, bb) = args, batched
    solve = REGISTRY["solve"]
    if _rank(b, bb) == 1 and not bb:            # one vector for every matrix of the batch
        return solve.bind(a, b)
    column = _rank(b, bb) == 1
    if column:
        b = ops.expand_dims(b, len(_shape(b)))
    rank = max(_rank(a, ba), _rank(b, bb))
    a = _lift(a, rank) if ba else a
    b = _lift(b, rank) if bb else b
    x = solve.bind(a, b)
    return ops.squeeze(x, len(_shape(x)) - 1) if column else x


def _along_pair_rule(prim):
    """An op of a value and its positions along one axis (``gather_along``): both of the
    batch (the one that is not, repeated), the axis one further."""
    def rule(args, batched, out, axis, **params):
        size = _size(args, batched)
        args = [a if b else _full(a, size) for a, b in zip(args, batched)]
        return prim.bind(*args, axis=axis + 1, **params)
    return rule


def _searchsorted_rule(args, batched, out, side):
    """searchsorted of a batch: values of the batch in one ``a``, the same op (its result
    has ``v``'s shape); a batch of sorted ``a``s, the count of each one's elements before
    each value (before or equal for 'right'), NaN last as in a sort."""
    (a, v), (ba, bv) = args, batched
    if not ba:
        return REGISTRY["searchsorted"].bind(a, v, side=side)
    rank = _rank(v, bv)
    if not bv:
        v = _full(v, _size(args, batched))
    a = ops.reshape(a, (_shape(a)[0],) + (1,) * rank + (_shape(a)[1],))
    v = ops.expand_dims(v, rank + 1)
    x, y = (a, v) if side == "left" else (v, a)
    before = ops.logical_or(ops.less(x, y), ops.logical_and(ops.isnan(y),
                                                            ops.logical_not(ops.isnan(x))))
    if side == "right":
        before = ops.logical_not(before)
    return ops.sum(ops.cast(before, np.int64), axis=rank + 1)


def declare_rules():
    """Give each primitive of the registry its batching rule (``Primitive.batch``)."""
    special = {"matmul": _matmul_rule, "einsum": _einsum_rule, "reshape": _reshape_rule,
               "transpose": _transpose_rule, "getitem": _getitem_rule,
               "index_add": _index_add_rule, "set_row": _set_row_rule,
               "concatenate": _join_rule(REGISTRY["concatenate"], 0),
               "stack": _join_rule(REGISTRY["stack"], 1),
               "check_labels": _passing_rule(REGISTRY["check_labels"]),
               **{name: _along_axis_rule(REGISTRY[name]) for name in ("cumsum", "cumprod")}}
    special["solve"] = _solve_rule
    special.update(argsort=_along_axis_rule(REGISTRY["argsort"]),
                   gather_along=_along_pair_rule(REGISTRY["gather_along"]),
                   scatter_along=_along_pair_rule(REGISTRY["scatter_along"]),
                   searchsorted=_searchsorted_rule)
    special.update((name, _matrices_rule(REGISTRY[name])) for name in (
        "inv", "det", "slogdet_sign", "logabsdet", "cholesky", "triangle", "eigvalsh",
        "eigh", "eigvals", "eig", "svdvals", "svd", "svd_vh", "qr", "qr_r", "pinv"))
    for name, prim in REGISTRY.items():
        if name in special:
            prim.batch = special[name]
        elif prim.kind == "elementwise":
            prim.batch = _elementwise_rule(prim)
        elif prim.kind == "reduction":
            prim.batch = _reduction_rule(prim)


# -- the transform -----------------------------------------------------------------------

def _prefix_axes(what, axes, probe, name, where):
    """One axis (int or None) per leaf of ``probe`` (a structure whose leaves are ints),
    in ``tree.flatten``'s order, from ``axes``: an int or None for everything below, or a
    tuple, list or dict of such entries matching ``probe``'s own (JAX's pytree prefix)."""
    if axes is None or isinstance(axes, int):
        return [axes] * len(tree.flatten(probe, keep_none=True)[0])
    if isinstance(axes, (tuple, list)) and isinstance(probe, (tuple, list)) and \
            len(axes) == len(probe):
        return [a for k, (entry, p) in enumerate(zip(axes, probe))
                for a in _prefix_axes(what, entry, p, name, f"{where}[{k}]")]
    if isinstance(axes, dict) and isinstance(probe, dict) and set(axes) == set(probe):
        return [a for k in sorted(probe)
                for a in _prefix_axes(what, axes[k], probe[k], name, f"{where}[{k!r}]")]
    shape = _describe(probe)
    raise ValueError(at_user_line(
        f"vmap({name}): {where} is {axes!r}, which does not match {shape}: give an int or "
        "None, or a tuple, list or dict of them with one entry per element"))


def _describe(probe):
    if isinstance(probe, (tuple, list)):
        return f"a {type(probe).__name__} of {len(probe)}"
    if isinstance(probe, dict):
        return f"a dict with keys {sorted(probe)}"
    return "one array" if isinstance(probe, int) else f"a {type(probe).__name__}"


def _probe(treedef):
    """``treedef``'s structure with each leaf's position as its value."""
    return tree.unflatten(treedef, list(range(treedef.num_leaves)))


def _check_axes(what, axes, name):
    ok = lambda a: a is None or (isinstance(a, int) and not isinstance(a, bool))  # noqa: E731
    for a in tree.flatten(axes, keep_none=True)[0] if isinstance(axes, (tuple, list, dict)) else [axes]:
        if not ok(a):
            raise TypeError(at_user_line(
                f"vmap({name}): {what} entries must be ints or None, got {a!r}"))


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def _mapped_leaves(args, in_axes, name):
    """The arguments' leaves (None kept as a leaf, never mapped), each with its axis
    normalized (None: not mapped), and the batch's size (the first mapped axis's)."""
    leaves_of = [tree.flatten(a, keep_none=True) for a in args]
    if isinstance(in_axes, (tuple, list)) and len(in_axes) != len(args):
        raise ValueError(at_user_line(
            f"vmap({name}): in_axes must be an int, None, or a tuple with one entry per "
            f"argument ({len(args)}), got {in_axes!r}"))
    probes = tuple(_probe(treedef) for _, treedef in leaves_of)
    axes = _prefix_axes("in_axes", tuple(in_axes) if isinstance(in_axes, list) else in_axes,
                        probes, name, "in_axes")
    sizes, flat, pos = [], [], 0
    for k, (leaves, _) in enumerate(leaves_of):
        for j, leaf in enumerate(leaves):
            axis = None if leaf is None else axes[pos]
            pos += 1
            if axis is not None:
                shape = np.shape(leaf)
                if not -len(shape) <= axis < len(shape):
                    where = f"argument {k}" + (f" (leaf {j})" if len(leaves) > 1 else "")
                    raise ValueError(at_user_line(
                        f"vmap({name}): in_axes {axis} is outside {where} of shape {shape}"))
                axis %= len(shape)
                sizes.append((k, j, len(leaves), int(shape[axis])))
            flat.append((k, leaf, axis))
    if not sizes:
        raise ValueError(at_user_line(
            f"vmap({name}): in_axes maps no argument (all None): nothing to map over"))
    if len({n for *_, n in sizes}) > 1:
        said = ", ".join(f"argument {k}" + (f" leaf {j}" if m > 1 else "") + f": {n}"
                         for k, j, m, n in sizes)
        raise ValueError(at_user_line(
            f"vmap({name}): the mapped axes have different sizes ({said})"))
    return leaves_of, flat, sizes[0][3]


def _call_args(leaves_of, leaves):
    """The arguments of ``fun`` from their flat leaves."""
    call_args, pos = [], 0
    for ls, treedef in leaves_of:
        call_args.append(tree.unflatten(treedef, leaves[pos:pos + len(ls)]))
        pos += len(ls)
    return call_args


def _moved(x, axis, to):
    n = len(_shape(x))
    if axis == to:
        return x
    order = [i for i in range(n) if i != axis]
    order.insert(to, axis)
    return ops.transpose(x, tuple(order))


def batched_call(fun, args, in_axes, out_axes):
    """``vmap(fun)(*args)`` in the trace being recorded (see the module)."""
    trace = current_trace()
    name = _name(fun)
    leaves_of, flat, _ = _mapped_leaves(args, in_axes, name)
    size = None
    moved, slots, start = [], [], None
    for k, leaf, axis in flat:
        if axis is None:
            moved.append(leaf)
            continue
        t = _moved(trace.tracer(np.asarray(leaf) if not hasattr(leaf, "dtype") else leaf), axis, 0)
        n = t._var.shape[0]
        if size is None:
            size = n
        else:
            trace.require_equal(f"vmap({name})", n, size, "the mapped axes have different sizes")
        moved.append(t)
    start = len(trace.nodes)
    for j, (t, (_, _, axis)) in enumerate(zip(moved, flat)):
        if axis is not None:
            slots.append((j, Tracer._of(trace._node(
                BATCH_VALUE, [], {"shape": tuple(t._var.shape[1:]), "dtype": t.dtype,
                                  "slot": j}), trace)))
    per_example = list(moved)
    for j, s in slots:
        per_example[j] = s
    before = effects(trace)
    out = fun(*_call_args(leaves_of, per_example))
    assigned, drawn = new_effects(trace, before)
    if assigned:
        raise UnsupportedError(at_user_line(
            f"vmap({name}): a variable assigned in a mapped function; return the new "
            "values (one per example) and assign after the call"))
    if drawn:
        raise UnsupportedError(at_user_line(
            f"vmap({name}): a random draw in a mapped function would be the same for "
            "every example; draw the batch's values outside and pass them mapped"))
    out_leaves, out_def = tree.flatten(out)
    out_leaves = [trace.tracer(np.asarray(v) if isinstance(v, (bool, int, float)) else v)
                  for v in out_leaves]
    local = {s._var.id: (moved[j], True) for j, s in slots}
    body, _ = _cut(trace, start, set(local))
    placeholders = {id(s._var.node) for _, s in slots}
    trace.nodes[:] = [n for n in trace.nodes if id(n) not in placeholders]
    env = _replay(trace, body, local)
    if env is None:                       # a node without a batching rule: f in a loop
        results = tree.flatten(_looped_call(fun, leaves_of, flat, moved))[0]
        # (what does not depend on a mapped argument was computed once, outside it)
        taken = {n.out.id for n in body} | set(local)
        out_leaves = [(r, True) if v._var.id in taken else (v, False)
                      for r, v in zip(results, out_leaves)]
    else:
        out_leaves = [env.get(v._var.id, (v, False)) for v in out_leaves]
    return _outputs(out_leaves, out_def, out_axes, size, name)


def _replay(trace, body, env):
    """Apply ``body``'s nodes to the batch, in order (``env``: Var id -> (value, batched)
    of the placeholders); the env of every node's value, or None when a node has no
    batching rule (a region, a custom rule)."""
    if any(not isinstance(n.prim, Primitive) or getattr(n.prim, "batch", None) is None
           for n in body):
        return None
    where = trace.where
    try:
        for node in body:
            trace.where = node.where
            args, batched = [], []
            for v in node.inputs:
                found = env.get(v.id) if isinstance(v, Var) else None
                if found is None:           # a value from outside, or a literal
                    args.append(Tracer._of(v, trace) if isinstance(v, Var) else v)
                    batched.append(False)
                else:
                    args.append(found[0])
                    batched.append(True)
            result = node.prim.batch(args, tuple(batched), node.out, **node.params)
            if result is None:
                result = _looped_op(node.prim, args, batched, node.params)
            env[node.out.id] = (result, True)
    finally:
        trace.where = where
    return env


def _looped_op(prim, args, batched, params):
    """``prim`` applied example by example in a ``jt.scan`` over the batch."""
    from .control import scan
    xs = [a for a, b in zip(args, batched) if b]

    def step(carry, rows):
        rows = iter(rows)
        return carry, prim.bind(*[next(rows) if b else a for a, b in zip(args, batched)],
                                **params)
    return scan(step, np.zeros((), np.int8), xs)[1]


def _looped_call(fun, leaves_of, flat, moved):
    """``fun`` called example by example in a ``jt.scan`` over the batch (its results
    stacked, batch axis first)."""
    from .control import scan
    xs = [t for t, (_, _, axis) in zip(moved, flat) if axis is not None]

    def step(carry, rows):
        rows = iter(rows)
        leaves = [next(rows) if axis is not None else t for t, (_, _, axis) in zip(moved, flat)]
        return carry, fun(*_call_args(leaves_of, leaves))
    return scan(step, np.zeros((), np.int8), xs)[1]


def _out_axes(out_def, out_axes, name):
    """One axis (int or None) per leaf of the result."""
    return _prefix_axes("out_axes", tuple(out_axes) if isinstance(out_axes, list) else out_axes,
                        _probe(out_def), name, "out_axes")


def _outputs(leaves, out_def, out_axes, size, name):
    """The results: each leaf's batch axis moved to its ``out_axes`` entry (an output
    that does not depend on a mapped argument repeated over the batch)."""
    result = []
    for k, ((value, batched), axis) in enumerate(zip(leaves, _out_axes(out_def, out_axes, name))):
        if axis is None:
            if batched:
                raise ValueError(at_user_line(
                    f"vmap({name}): out_axes is None for output {k}, which depends on the "
                    "mapped arguments (it has one value per example)"))
            result.append(value)
            continue
        if not batched:
            value = _full(value, size)
        rank = len(_shape(value))
        if not -rank <= axis < rank:
            raise ValueError(at_user_line(
                f"vmap({name}): out_axes {axis} is outside output {k} of rank {rank}"))
        result.append(_moved(value, 0, axis % rank))
    return tree.unflatten(out_def, result)


def _eager_loop(fun, args, in_axes, out_axes, name):
    """``vmap(fun)(*args)`` as a Python loop of calls, the results stacked (under a
    recording tape, outside compiled code: the tape sees each op). An output whose
    ``out_axes`` is None is the first example's (it must not depend on the example)."""
    leaves_of, flat, n = _mapped_leaves(args, in_axes, name)
    outs = []
    for i in range(n):
        leaves = [leaf if axis is None else ops.take(leaf, i, axis=axis) for _, leaf, axis in flat]
        outs.append(fun(*_call_args(leaves_of, leaves)))
    out_def = tree.flatten(outs[0])[1]
    axes = _out_axes(out_def, out_axes, name)
    columns = zip(*[tree.flatten(o)[0] for o in outs])
    stacked = [(col[0], False) if axis is None else (ops.stack(list(col), axis=0), True)
               for col, axis in zip(columns, axes)]
    return _outputs(stacked, out_def, out_axes, n, name)


def _batch_size(args, in_axes, name):
    return _mapped_leaves(args, in_axes, name)[2]


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """``fun`` mapped over an axis of its arguments (JAX's ``jax.vmap``): ``in_axes`` says
    which axis of each argument holds the examples (an int or None for all arguments,
    or a tuple with one entry per argument: an int, None for an argument shared by all
    examples, or a pytree of them), ``out_axes`` where the results put it (0: first).

    One compiled function: ``fun`` is traced for one example and its ops apply to the
    whole batch (a matrix product stays one matrix product), so that
    ``jt.vmap(jt.grad(loss), in_axes=(None, 0, 0))(w, X, y)`` gives per-example
    gradients in one native call. See ``jittape/batching.py`` for what runs in a loop."""
    from .compiler import function
    from .transforms import _kept
    if not callable(fun):
        raise TypeError(at_user_line(f"vmap: expected a function, got {type(fun).__name__}"))
    name = _name(fun)
    _check_axes("in_axes", in_axes, name)
    _check_axes("out_axes", out_axes, name)

    def make():
        @functools.wraps(fun, updated=())
        def body(*args):
            return batched_call(fun, args, in_axes, out_axes)
        # what ``fun`` reads from its globals and closure is read at each call (or traces
        # again when rebound), as for ``jt.function(fun)``: not frozen by the trace
        body._jittape_reads = (fun,)            # type: ignore[attr-defined]
        return function(body)
    key = ("vmap", repr(in_axes), repr(out_axes))
    compiled = _kept(fun, key, make)

    @functools.wraps(fun, updated=())
    def mapped(*args, **kwargs):
        if kwargs:
            raise TypeError(at_user_line(
                f"vmap({name}): keyword arguments ({', '.join(kwargs)}) are not supported: "
                "pass them positionally (in_axes gives each its axis)"))
        if current_trace() is None and thread_tapes() and _batch_size(args, in_axes, name):
            return _eager_loop(fun, args, in_axes, out_axes, name)
        return compiled(*args)
    mapped.compiled = compiled          # type: ignore[attr-defined]  # (its stats, kernel)
    return mapped


declare_rules()
