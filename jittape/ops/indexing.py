"""Indexing and joining: ``getitem`` (``x[...]``), ``take``, ``gather``, ``concatenate``
and ``stack`` (their VJPs are each other's: a slice, a scatter, a join).

``getitem`` takes ints, slices, ``None``, ``...`` and integer arrays (NumPy's basic
and advanced indexing); its VJP is ``index_add``, which scatters a cotangent into
zeros (adding where indices repeat), and whose own VJP is ``getitem`` again. Integer
indices are checked against the sizes once per call, index arrays at each access.
"""

import numpy as np

from .. import ir
from ..errors import OutOfRange, ShapeError, UnsupportedError, at_user_line
from ..tensor import Tensor
from . import elementwise as _ew
from .core import (Aval, Fixed, PerInput, Primitive, composite, ex, normalize_axes, numpy_dispatch,
                   public, same_size, shape_of)
from .shape import _as_size, _ndim, _shape, expand_dims, reshape

# -- joining: concatenate, stack ------------------------------------------------------

def _concat_abstract(*xs, axis):
    shapes = [shape_of(x) for x in xs]
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ShapeError(at_user_line(
                f"concatenate: shapes {', '.join(map(str, shapes))} differ outside axis {axis}"))
    for s in shapes[1:]:
        for i, (a, b) in enumerate(zip(s, first)):
            if i != axis:
                same_size("concatenate", a, b, "the sizes of the other axes differ")
    out = list(first)
    out[axis] = sum(s[axis] for s in shapes)
    dtype = np.result_type(*[x.dtype for x in xs])
    return Aval(tuple(out), dtype)


def _concat_vjp(k, g, out, *xs, axis):
    start = sum(x.shape[axis] for x in xs[:k])
    return slice_axis(g, axis, start, start + xs[k].shape[axis])


def _or_zeros(tangents, xs):
    """A joint JVP's tangents, zeros for the inputs without one (an op linear in all)."""
    from .creation import zeros_like
    return [zeros_like(x) if t is None else t for t, x in zip(tangents, xs)]


def slice_axis(x, axis, start, stop):
    """``x[..., start:stop, ...]`` along one axis."""
    return getitem(x, (slice(None),) * axis + (slice(start, stop),))


_concatenate = Primitive("concatenate", lambda *xs, axis: np.concatenate(xs, axis=axis),
                         abstract=_concat_abstract, vjp=PerInput(_concat_vjp),
                         jvp=lambda ts, out, *xs, axis: _concatenate.bind(*_or_zeros(ts, xs), axis=axis),
                         save=(False, False),
                         examples=[ex((2, 3), (1, 3), axis=0), ex((2, 3), (2, 1), (2, 2), axis=1),
                                   ex((3,), (4,), axis=0)])


@public
@numpy_dispatch(np.concatenate)
def concatenate(xs, axis=0):
    """Join a sequence of tensors along an existing axis."""
    xs = list(xs)
    if not xs:
        raise ValueError(at_user_line("concatenate: needs at least one tensor"))
    ndim = _ndim(xs[0])
    if ndim == 0:
        raise ShapeError(at_user_line(
            "concatenate: zero-dimensional tensors cannot be concatenated (shapes "
            f"{', '.join(str(_shape(x)) for x in xs)})"))
    (axis,) = normalize_axes("concatenate", axis, ndim)
    if len(xs) == 1:
        return xs[0] if isinstance(xs[0], Tensor) else _ew.identity(xs[0])
    return _concatenate.bind(*xs, axis=axis)


concat = concatenate


def _stack_abstract(*xs, axis):
    shapes = [shape_of(x) for x in xs]
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first):
            raise ShapeError(at_user_line(
                f"stack: all tensors need the same shape, got {', '.join(map(str, shapes))}"))
        for a, b in zip(s, first):
            same_size("stack", a, b, "the arrays' shapes differ")
    out = list(first)
    out.insert(axis, len(xs))
    return Aval(tuple(out), np.result_type(*[x.dtype for x in xs]))


def _stack_vjp(k, g, out, *xs, axis):
    return getitem(g, (slice(None),) * axis + (k,))


# A primitive, not expand_dims + concatenate: its VJP is one view per input (``g[k]``),
# and a stack of the kernel's inputs is what the kernel takes packed (passes/packing.py):
# the weights of a deep network's layers, stacked where a rolled loop reads them by step.
_stack = Primitive("stack", lambda *xs, axis: np.stack(xs, axis=axis),
                   abstract=_stack_abstract, vjp=PerInput(_stack_vjp),
                   jvp=lambda ts, out, *xs, axis: _stack.bind(*_or_zeros(ts, xs), axis=axis), save=(False, False),
                   examples=[ex((2, 3), (2, 3), axis=0), ex((3,), (3,), (3,), axis=1), ex((), (), axis=0),
                             ex((2, 2), (2, 2), axis=2)])


@public
@numpy_dispatch(np.stack)
def stack(xs, axis=0):
    """Join a sequence of same-shaped tensors along a new axis."""
    xs = list(xs)
    if not xs:
        raise ValueError(at_user_line("stack: needs at least one tensor"))
    (axis,) = normalize_axes("stack", axis, _ndim(xs[0]) + 1)
    shapes = {_shape(x) for x in xs}
    if len(shapes) > 1:
        raise ShapeError(at_user_line(f"stack: all tensors need the same shape, got "
                                      f"{', '.join(str(_shape(x)) for x in xs)}"))
    if len(xs) == 1:
        return expand_dims(xs[0], axis)
    return _stack.bind(*xs, axis=axis)



# -- indexing ---------------------------------------------------------------------------

def _as_index_array(item):
    if isinstance(item, Tensor) and item._value is None:      # a traced index array
        if item.dtype.kind not in "iu":
            raise UnsupportedError(at_user_line(
                f"getitem: index arrays must be integers, got {item.dtype} (boolean masks "
                "give data-dependent shapes and only work in eager code)"))
        return [item]
    value = item._value if isinstance(item, Tensor) else np.asarray(item)
    value = np.asarray(value)
    if value.dtype == bool:
        return list(np.nonzero(value))
    if value.dtype.kind not in "iu":
        raise UnsupportedError(at_user_line(
            f"getitem: index arrays must be integers or booleans, got {value.dtype}"))
    return [value]


def parse_index(index):
    """(static index spec, index arrays) for ``x[index]``."""
    if not isinstance(index, tuple):
        index = (index,)
    spec, arrays = [], []
    for item in index:
        if item is None:
            spec.append(("new",))
        elif item is Ellipsis:
            spec.append(("ellipsis",))
        elif isinstance(item, slice):
            spec.append(("slice",) + tuple(None if v is None else _as_size(v)
                                           for v in (item.start, item.stop, item.step)))
        elif isinstance(item, (bool, np.bool_)):
            raise UnsupportedError(at_user_line(
                f"getitem: a bare boolean index ({item}) is not supported"))
        elif isinstance(item, (int, np.integer)):
            spec.append(("int", int(item)))
        elif (isinstance(item, Tensor) and item._value is not None and item.ndim == 0
              and item.dtype.kind in "iu"):
            spec.append(("int", int(item)))       # (a traced one: a 0-d index array)
        else:
            for arr in _as_index_array(item):
                spec.append(("array", len(arrays)))
                arrays.append(arr)
    return tuple(spec), arrays


def build_index(spec, arrays):
    out = []
    for item in spec:
        kind = item[0]
        if kind == "slice":
            out.append(slice(*item[1:]))
        elif kind == "int":
            out.append(item[1])
        elif kind == "array":
            out.append(arrays[item[1]])
        elif kind == "new":
            out.append(None)
        else:
            out.append(Ellipsis)
    return tuple(out)


def _getitem_impl(x, *arrays, index):
    return np.asarray(x)[build_index(index, arrays)]


def _getitem_abstract(x, *arrays, index):
    shape = shape_of(x)
    probe = np.broadcast_to(np.empty((), np.int8), shape)
    dummies = [np.zeros(shape_of(a), np.intp) for a in arrays]
    try:
        result = probe[build_index(index, dummies)]
    except IndexError as err:
        raise OutOfRange(at_user_line(f"getitem: {err} (tensor of shape {shape})")) from None
    _require_int_bounds(shape, index)
    return Aval(_symbolic_index_shape(shape, arrays, index, result.shape), x.dtype)


def _require_int_bounds(shape, index):
    """An int index into an axis whose size is known only at run time (or an index that
    is itself such a size) must be in range in every call, not only in the one traced:
    an inequality the kernel checks on entry (``ir.require_bound``). Slices need none:
    their bounds clamp, as NumPy's do."""
    consumed = sum(1 for item in index if item[0] in ("slice", "int", "array"))
    axis = 0
    for item in index:
        kind = item[0]
        if kind == "ellipsis":
            axis += len(shape) - consumed
            continue
        if kind == "new":
            continue
        if kind == "int" and axis < len(shape):
            i, n = item[1], shape[axis]
            if isinstance(i, ir.Dim) or isinstance(n, ir.Dim):
                text = f"index {i}" if not isinstance(i, ir.Dim) else "index {0}"
                if int(i) >= 0:
                    ir.require_bound("<", i, n, "IndexError",
                                     f"getitem: {text} is out of bounds for axis {axis} with "
                                     "size {1}")
                else:
                    if isinstance(i, ir.Dim):
                        text = "index -{0}"
                    ir.require_bound("<=", -i, n, "IndexError",
                                     f"getitem: {text} is out of bounds for axis {axis} with "
                                     "size {1}")
        axis += 1


def _symbolic_index_shape(shape, arrays, index, concrete):
    """The result shape of an index, keeping sizes known only at run time symbolic.

    Follows NumPy: basic items (slices, ints, None) map axis by axis; advanced items
    (index arrays, and ints next to them) broadcast together and their axes go where
    the first of them is when they are adjacent, else first.
    """
    if not any(isinstance(d, ir.Dim) for d in shape) and not any(
            isinstance(d, ir.Dim) for a in arrays for d in shape_of(a)) and not any(
            isinstance(v, ir.Dim) for item in index for v in item[1:]):
        return concrete
    consumed = sum(1 for item in index if item[0] in ("slice", "int", "array"))
    items = []
    for item in index:
        if item[0] == "ellipsis":
            items.extend([("slice", None, None, None)] * (len(shape) - consumed))
        else:
            items.append(item)
    items.extend([("slice", None, None, None)] * (len(shape) - sum(
        1 for item in items if item[0] in ("slice", "int", "array"))))
    advanced = [k for k, item in enumerate(items) if item[0] == "array" or
                (arrays and item[0] == "int")]
    adv_shape = ()
    if arrays:
        from .core import broadcast_shapes
        adv_shape = broadcast_shapes("getitem", *[shape_of(a) for a in arrays])
    adjacent = advanced and advanced == list(range(advanced[0], advanced[-1] + 1))
    out, axis, placed = [], 0, False
    if advanced and not adjacent:
        out.extend(adv_shape)
        placed = True
    for k, item in enumerate(items):
        kind = item[0]
        if kind == "new":
            out.append(1)
            continue
        if k in advanced:
            if not placed:
                out.extend(adv_shape)
                placed = True
        elif kind == "slice":
            out.append(ir.slice_length(shape[axis], *item[1:]))
        axis += 1
    if tuple(int(d) for d in out) != tuple(concrete):   # a case this rule does not cover:
        from ..recording import current_trace            # key the graph on exact sizes
        trace = current_trace()
        if trace is not None:
            trace.reads_sizes = True
        return concrete
    return tuple(out)


def _getitem_vjp(g, out, x, *arrays, index):
    return _index_add.bind(g, *arrays, index=index, shape=x.shape)


getitem_prim = Primitive(
    "getitem", _getitem_impl, abstract=_getitem_abstract, vjp=PerInput(
        lambda k, g, out, x, *arrays, index: _getitem_vjp(g, out, x, *arrays, index=index)
        if k == 0 else None),
    jvp=[lambda t, out, x, *arrays, index: getitem_prim.bind(t, *arrays, index=index)],
    save=((False,), False),
    examples=[
        ex((4, 3), index=(("int", 1),)),
        ex((4, 3), index=(("slice", 1, None, 2), ("int", -1))),
        ex((4, 3), index=(("ellipsis",), ("new",), ("slice", None, 2, None))),
        ex((5,), index=(("slice", None, None, -2),)),
        ex((4, 3), Fixed(np.array([0, 2, 2, 3])), index=(("array", 0),)),
        ex((4, 3), Fixed(np.array([[1, 0]])), Fixed(np.array([2, 2])),
           index=(("array", 0), ("array", 1))),
        ex((2, 4, 3), Fixed(np.array([3, 0])), index=(("slice", None, None, None), ("array", 0))),
    ], kind="view", aliases=("cpu",))


def _index_add_impl(g, *arrays, index, shape):
    g = np.asarray(g)
    out = np.zeros(shape, g.dtype)
    idx = build_index(index, arrays)
    if arrays:
        np.add.at(out, idx, g)
    else:
        out[idx] = g
    return out


_index_add = Primitive(
    "index_add", _index_add_impl,
    abstract=lambda g, *arrays, index, shape: Aval(shape, g.dtype),
    vjp=PerInput(lambda k, g, out, ct, *arrays, index, shape:
                 getitem_prim.bind(g, *arrays, index=index) if k == 0 else None),
    jvp=[lambda t, out, g, *arrays, index, shape: _index_add.bind(t, *arrays, index=index,
                                                                  shape=shape)],
    save=((False,), False),
    examples=[
        ex((3,), index=(("int", 1),), shape=(4, 3)),
        ex((2, 3), index=(("slice", 1, None, 2),), shape=(4, 3)),
        ex((4, 3), Fixed(np.array([0, 2, 2, 3])), index=(("array", 0),), shape=(4, 3)),
    ])


@public
def getitem(x, index):
    """``x[index]`` with NumPy's indexing rules (boolean masks only in eager code)."""
    spec, arrays = parse_index(index)
    return getitem_prim.bind(x, *arrays, index=spec)


@composite(examples=[ex((5,), Fixed(np.array([4, 0, 0]))),
                     ex((3, 4), Fixed(np.array([1, 1, 3])), axis=1),
                     ex((3, 4), Fixed(np.array([[2], [0]])), axis=0)],
           numpy=(np.take,))
@public
def take(x, indices, axis=None):
    """Elements of ``x`` at ``indices`` along ``axis`` (of the flattened ``x`` when None)."""
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    (axis,) = normalize_axes("take", axis, _ndim(x))
    return getitem(x, (slice(None),) * axis + (indices,))


@public
def gather(params, indices, axis=0):
    """TensorFlow's name for ``take`` (with its default ``axis=0``)."""
    return take(params, indices, axis=axis)


# -- lowerings ---------------------------------------------------------------------------

def _index_code(ctx, node, src_ndim, src_name, arrays, loop_rank):
    """(lines before the loops, reads of index arrays, the source index in terms of the
    output loop indices).

    The loops run over the result of ``src[index]`` (indices ``i0, i1, ...``); the
    returned index picks the element of ``src`` that lands there. Each read of an index
    array is ``(depth, name, source, size, template)``: it goes in the loop nest after
    the loops over the first ``depth`` axes (the deepest one its own index uses, so an
    index broadcast along inner axes is read and checked once per row), and it must lie
    in ``[-size, size)`` (a negative index counts from the end); ``template`` is the
    message of ``errors.OutOfRange`` for one that does not.
    """
    spec = node.params["index"]
    consumed = sum(1 for item in spec if item[0] in ("slice", "int", "array"))
    items = []
    for item in spec:
        if item[0] == "ellipsis":
            items.extend([("slice", None, None, None)] * (src_ndim - consumed))
        else:
            items.append(item)
    while sum(1 for item in items if item[0] in ("slice", "int", "array")) < src_ndim:
        items.append(("slice", None, None, None))
    advanced = [k for k, item in enumerate(items) if item[0] == "array" or
                (arrays and item[0] == "int")]
    adjacent = bool(advanced) and advanced == list(range(advanced[0], advanced[-1] + 1))
    adv_rank = max((a.ndim for a in arrays), default=0)
    before, reads, index = [], [], []
    out_axis = adv_rank if (advanced and not adjacent) else 0
    adv_first = 0 if (advanced and not adjacent) else None
    axis = 0
    placed = False
    where = f" (at {node.where})" if node.where else ""
    where = where.replace("{", "{{").replace("}", "}}")
    for k, item in enumerate(items):
        kind = item[0]
        if kind == "new":
            out_axis += 1
            continue
        n = f"{src_name}.shape[{axis}]"
        if k in advanced:
            if not placed:
                adv_first = out_axis if adv_first is None else adv_first
                out_axis += adv_rank if adjacent else 0
                placed = True
            if kind == "int":             # (in range: checked on entry, ir.require_bound)
                value = ctx.size(item[1])
                index.append(f"({value} if {value} >= 0 else {n} + {value})")
            else:
                a = arrays[item[1]]
                lead = adv_rank - a.ndim
                used = [adv_first + lead + j for j, d in enumerate(a.shape)
                        if not (d == 1 and not hasattr(d, "expr"))]
                sub = [("0" if (d == 1 and not hasattr(d, "expr")) else f"i{adv_first + lead + j}")
                       for j, d in enumerate(a.shape)]
                t = ctx.tmp("ix")
                source = f"{ctx.name(a)}[{', '.join(sub)}]" if a.ndim else ctx.scalar(a)
                template = (f"getitem: index {{0}} is out of bounds for axis {axis} with size "
                            f"{{1}}{where}")
                reads.append((max(used, default=-1) + 1, t, source, n, template))
                index.append(t)
        elif kind == "int":
            value = ctx.size(item[1])
            index.append(f"({value} if {value} >= 0 else {n} + {value})")
        else:
            start, stop, step = (ctx.size(v) if v is not None else "None" for v in item[1:])
            s0, s1 = ctx.tmp("start"), ctx.tmp("step")
            before.append(f"{s0} = slice_start({n}, {start}, {stop}, {step})")
            before.append(f"{s1} = slice_step({n}, {start}, {stop}, {step})")
            index.append(f"{s0} + {s1} * i{out_axis}")
            out_axis += 1
        axis += 1
    return before, reads, ", ".join(index)


def _checked_read(t, source, n, on_error):
    """Lines reading index ``t`` from ``source`` and wrapping a negative one; one out of
    ``[-n, n)`` runs ``on_error`` (lines). The usual case costs one unsigned-style test."""
    return [f"{t} = {source}",
            f"if {t} < 0 or {t} >= {n}:",
            f"    if {t} < -{n} or {t} >= {n}:"] + ["        " + line for line in on_error] + [
            f"    {t} += {n}"]


def _nest(sizes, reads, body, read_lines):
    """The loop nest over ``sizes`` (sources) with each index read placed after the loops
    over its first ``depth`` axes, and ``body`` (lines) innermost."""
    lines = []
    for depth in range(len(sizes) + 1):
        pad = "    " * depth
        for d, t, source, n, template in reads:
            if min(d, len(sizes)) == depth:
                lines += [pad + line for line in read_lines(t, source, n, template)]
        if depth < len(sizes):
            lines.append(f"{pad}for i{depth} in range({sizes[depth]}):")
    pad = "    " * len(sizes)
    return lines + [pad + line for line in body]


def _cpu_reads(ctx):
    """``read_lines`` of ``_nest`` for the CPU: an index out of range raises its
    message's number (``Context.message``) with the index and the size."""
    def read(t, source, n, template):
        return _checked_read(t, source, n, [f"raise OutOfRange({ctx.message(template)}, {t}, {n})"])
    return read


def _lower_getitem(ctx, node):
    x, arrays = node.inputs[0], node.inputs[1:]
    out = node.out
    o, xn = ctx.name(out), ctx.name(x)
    if x.ndim == 0:
        return ctx.full(o, out.shape, xn, out.dtype) if out.ndim else [f"{o} = {xn}"]
    basic = _basic_index(node.params["index"]) if not arrays and out.ndim else None
    if basic is not None:            # ints and slices of literal bounds: a view, no loop
        return [f"{o} = {xn}[{basic}]"]
    before, reads, index = _index_code(ctx, node, x.ndim, xn, arrays, out.ndim)
    lines = list(before)
    if out.ndim == 0:
        return lines + _nest([], reads, [f"{o} = {xn}[{index}]"], _cpu_reads(ctx))
    lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
    body = [f"{o}[{', '.join(f'i{k}' for k in range(out.ndim))}] = {xn}[{index}]"]
    return lines + _nest([ctx.size(d) for d in out.shape], reads, body, _cpu_reads(ctx))


def _basic_index(index):
    """``x[...]`` source for an index of ints and slices with literal bounds (NumPy's
    basic indexing, which Numba makes a view of ``x``: a step's row of a stacked value,
    a cotangent's block), or None."""
    parts = []
    for item in index:
        if item[0] == "int" and isinstance(item[1], int):
            parts.append(str(item[1]))
        elif item[0] == "slice" and all(v is None or type(v) is int for v in item[1:]):
            parts.append(":".join("" if v is None else str(v) for v in item[1:]))
        else:
            return None
    return ", ".join(parts) or None


def _lower_index_add(ctx, node):
    g, arrays = node.inputs[0], node.inputs[1:]
    out = node.out
    o, gn = ctx.name(out), ctx.name(g)
    if out.ndim == 0:       # a 0-d x indexed by new axes only: g has one element
        return [f"{o} = {gn}[{', '.join(['0'] * g.ndim)}]" if g.ndim else f"{o} = {gn}"]
    lines = [f"{o} = zeros({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"]
    before, reads, index = _index_code(ctx, node, out.ndim, o, arrays, g.ndim)
    lines += before
    src = f"{gn}[{', '.join(f'i{k}' for k in range(g.ndim))}]" if g.ndim else gn
    body = [f"{o}[{index}] += {src}"]
    return lines + _nest([f"{gn}.shape[{k}]" for k in range(g.ndim)], reads, body, _cpu_reads(ctx))


def _lower_concatenate(ctx, node):
    out = node.out
    parts = []
    lines = []
    for v in node.inputs:
        name = ctx.name(v)
        if v.dtype != out.dtype:
            tmp = ctx.tmp()
            lines.append(f"{tmp} = {name}.astype({ctx.dtype(out.dtype)})")
            name = tmp
        parts.append(name)
    if node.params["axis"] == 0 and all(v.ndim for v in node.inputs):
        # rows after rows: a copy of each part into place (runtime.put), where Numba's
        # np.concatenate compiles anew for each number of parts, seconds for many
        o = ctx.name(out)
        lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
        fixed, sizes = 0, []          # the offset: literal sizes summed here, others added
        for v, name in zip(node.inputs, parts):
            offset = " + ".join(([str(fixed)] if fixed or not sizes else []) + sizes)
            lines.append(f"put({o}, {offset}, {name})")
            if not isinstance(v.shape[0], ir.Dim):      # (a Dim is an int: its value
                fixed += v.shape[0]                      # is the traced call's only)
            else:
                sizes.append(ctx.size(v.shape[0]))
        return lines
    lines.append(f"{ctx.name(out)} = np.concatenate(({', '.join(parts)},), "
                 f"axis={node.params['axis']})")
    return lines


def _lower_stack(ctx, node):
    out = node.out
    o = ctx.name(out)
    axis = node.params["axis"]
    lines, parts = [], []
    for v in node.inputs:
        name = ctx.name(v)
        if v.dtype != out.dtype:
            tmp = ctx.tmp()
            cast = f"{name}.astype({ctx.dtype(out.dtype)})" if v.ndim else f"{ctx.dtype(out.dtype)}({name})"
            lines.append(f"{tmp} = {cast}")
            name = tmp
        parts.append(name)
    if axis == 0:        # one copy per part into its row (runtime.put), as concatenate's
        lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
        lines += [f"put({o}, {k}, {name})" for k, name in enumerate(parts)]
        return lines
    lines.append(f"{o} = np.stack(({', '.join(parts)},), axis={axis})")
    return lines


# -- CUDA lowerings: ``ctx`` is codegen.cuda.CudaContext

def _cuda_concatenate(ctx, node):
    out = node.out
    o = ctx.name(out)
    axis = node.params["axis"]
    lines = [ctx.buffer(out), "offset = 0"]
    for k, v in enumerate(node.inputs):
        vn = ctx.name(v)
        idx = [f"i{a}" if a != axis else f"offset{k} + i{a}" for a in range(out.ndim)]
        body = [f"{o}[{', '.join(idx)}] = {ctx.dtype(out.dtype)}"
                f"({vn}[{', '.join(f'i{a}' for a in range(v.ndim))}])"]
        lines.append(f"offset{k} = offset")
        lines += ctx.per_element([f"{vn}.shape[{a}]" for a in range(v.ndim)], body, node,
                                 [f"offset{k}"])
        lines.append(f"offset += {vn}.shape[{axis}]")
    return lines


def _cuda_stack(ctx, node):
    out = node.out
    o = ctx.name(out)
    axis = node.params["axis"]
    lines = [ctx.buffer(out)]
    for k, v in enumerate(node.inputs):
        vn = ctx.name(v)
        own = [f"i{a}" for a in range(v.ndim)]
        idx = own[:axis] + [str(k)] + own[axis:]
        src = f"{vn}[{', '.join(own)}]" if v.ndim else ctx.read(v, 0)
        body = [f"{o}[{', '.join(idx)}] = {ctx.dtype(out.dtype)}({src})"]
        lines += ctx.per_element([f"{vn}.shape[{a}]" for a in range(v.ndim)], body, node)
    return lines


def _cuda_index_parts(ctx, node, src_ndim, src_name, arrays, loop_rank):
    """``_index_code`` for a kernel of one thread per element: (driver lines, the names
    they define, the kernel's reads of index arrays, the index). A kernel cannot raise:
    an index out of range is written to the module's error flag (``ctx.index_error``),
    which the driver reads once per call, and the thread skips its element."""
    before, reads, index = _index_code(ctx, node, src_ndim, src_name, arrays, loop_rank)
    inside = []
    for _, t, source, n, template in reads:
        inside += _checked_read(t, source, n, ctx.index_error(template, t, n) + ["continue"])
    return before, [line.split(" = ")[0] for line in before] + ctx.error_names(), inside, index


def _cuda_getitem(ctx, node):
    x, arrays = node.inputs[0], node.inputs[1:]
    out = node.out
    o, xn = ctx.name(out), ctx.name(x)
    lines = [ctx.buffer(out)]
    if x.ndim == 0:                    # new axes on a scalar
        if ctx.scalar_on_device(x):    # (a kernel: a copy to the host would wait for the GPU)
            target = f"{o}[{', '.join(['0'] * out.ndim) or '0'}]"
            return lines + ctx.per_element([], [f"{target} = {xn}[0]"], node)
        return lines + [f"fill({o}, {xn})"]
    before, temps, inside, index = _cuda_index_parts(ctx, node, x.ndim, xn, arrays, out.ndim)
    target = f"{o}[{', '.join(f'i{a}' for a in range(out.ndim)) or '0'}]"
    shape = [f"{o}.shape[{a}]" for a in range(out.ndim)]
    return lines + before + ctx.per_element(shape, inside + [f"{target} = {xn}[{index}]"],
                                            node, temps)


def _cuda_index_add(ctx, node):
    g, arrays = node.inputs[0], node.inputs[1:]
    out = node.out
    o, gn = ctx.name(out), ctx.name(g)
    if out.ndim == 0:       # a 0-d x indexed by new axes only: g has one element
        if g.ndim:          # (copied: a view of g would outlive g's buffer)
            return [ctx.buffer(out)] + ctx.per_element(
                [], [f"{o}[0] = {gn}[{', '.join(['0'] * g.ndim)}]"], node)
        ctx.alias(out, g)
        return [f"{o} = {gn}"]
    lines = [ctx.buffer(out), f"fill({o}, 0)"]
    before, temps, inside, index = _cuda_index_parts(ctx, node, out.ndim, o, arrays, g.ndim)
    src = f"{gn}[{', '.join(f'i{a}' for a in range(g.ndim))}]" if g.ndim else ctx.read(g, 0)
    target = index if out.ndim == 1 else f"({index},)"      # CUDA: an int for 1-D arrays
    body = inside + [f"cuda.atomic.add({o}, {target}, {src})"]       # repeated indices add up
    return lines + before + ctx.per_element([f"{gn}.shape[{a}]" for a in range(g.ndim)],
                                            body, node, temps)


getitem_prim.lowerings["cpu"] = _lower_getitem
getitem_prim.lowerings["cuda"] = _cuda_getitem
_index_add.lowerings["cpu"] = _lower_index_add
_index_add.lowerings["cuda"] = _cuda_index_add
_concatenate.lowerings["cuda"] = _cuda_concatenate
_concatenate.lowerings["cpu"] = _lower_concatenate
_stack.lowerings["cuda"] = _cuda_stack
_stack.lowerings["cpu"] = _lower_stack
_stack.stacks = True


def _row_of(node):
    """``x[k]`` with a literal int ``k`` and nothing else: row ``k`` (negative: from the
    end) of ``x``."""
    index = node.params["index"]
    if len(node.inputs) == 1 and len(index) == 1 and index[0][0] == "int":
        return index[0][1]
    return None


getitem_prim.row_of = _row_of
