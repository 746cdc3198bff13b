"""Indexing and joining: ``getitem`` (``x[...]``), ``take``, ``gather``, ``concatenate``
and ``stack`` (their VJPs are each other's: a slice, a scatter, a join).

``getitem`` takes ints, slices, ``None``, ``...`` and integer arrays (NumPy's basic
and advanced indexing); its VJP is ``index_add``, which scatters a cotangent into
zeros (adding where indices repeat), and whose own VJP is ``getitem`` again. Integer
indices are checked against the sizes once per call, index arrays at each access.
"""

import builtins
import operator

import numpy as np

from .. import ir
from ..errors import OutOfRange, ShapeError, UnsupportedError, at_user_line
from ..tensor import Tensor, holds_tensor
from . import elementwise as _ew
from .core import (Aval, Fixed, PerInput, Primitive, composite, ex, normalize_axes, numpy_dispatch,
                   pack, public, same_size, shape_of)
from .shape import (_as_size, _axes_in_order, _ndim, _shape, atleast_1d, atleast_2d, axis_index,
                    broadcast_to, exact_sizes, expand_dims, moveaxis, reshape, transpose)

# -- joining: concatenate, stack ------------------------------------------------------

def _joined_dtype(xs):
    """The dtype of a join: NumPy's promotion, a Python number weak (it does not widen a
    float32 tensor), as the eager op's operands give it."""
    return np.result_type(*[getattr(x, "dtype", x) for x in xs])


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
    dtype = _joined_dtype(xs)
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
                                   ex((3,), (4,), axis=0)], complex=True)


@public
@numpy_dispatch(np.concatenate)
def concatenate(xs, axis=0):
    """Join a sequence of tensors along an existing axis (``axis=None``: flattened
    first, as NumPy does)."""
    xs = [pack(x) for x in xs]
    if not xs:
        raise ValueError(at_user_line("concatenate: needs at least one tensor"))
    if axis is None:
        xs, axis = [reshape(x, (-1,)) for x in xs], 0
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
    return Aval(tuple(out), _joined_dtype(xs))


def _stack_vjp(k, g, out, *xs, axis):
    return getitem(g, (slice(None),) * axis + (k,))


# A primitive, not expand_dims + concatenate: its VJP is one view per input (``g[k]``),
# and a stack of the kernel's inputs is what the kernel takes packed (passes/packing.py):
# the weights of a deep network's layers, stacked where a rolled loop reads them by step.
_stack = Primitive("stack", lambda *xs, axis: np.stack(xs, axis=axis),
                   abstract=_stack_abstract, vjp=PerInput(_stack_vjp),
                   jvp=lambda ts, out, *xs, axis: _stack.bind(*_or_zeros(ts, xs), axis=axis), save=(False, False),
                   examples=[ex((2, 3), (2, 3), axis=0), ex((3,), (3,), (3,), axis=1), ex((), (), axis=0),
                             ex((2, 2), (2, 2), axis=2)], complex=True)


@public
@numpy_dispatch(np.stack)
def stack(xs, axis=0):
    """Join a sequence of same-shaped tensors along a new axis."""
    xs = [pack(x) for x in xs]
    if not xs:
        raise ValueError(at_user_line("stack: needs at least one tensor"))
    (axis,) = normalize_axes("stack", axis, _ndim(xs[0]) + 1)
    shapes = {_shape(x) for x in xs}
    if len(shapes) > 1:
        raise ShapeError(at_user_line(f"stack: all tensors need the same shape, got "
                                      f"{', '.join(str(_shape(x)) for x in xs)}"))
    if len(xs) == 1:
        return expand_dims(xs[0], axis)
    # a Python number is an array of the join's dtype (weak: a float32 tensor stays float32)
    dtype = _joined_dtype(xs)
    xs = [np.asarray(x, dtype) if isinstance(x, (bool, int, float)) else x for x in xs]
    return _stack.bind(*xs, axis=axis)


@public(jt=False, numpy=True)
def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """NumPy's ``np.array``: a list or tuple that holds tensors becomes their stack (their
    gradients kept, eager and compiled), a tensor stays itself (tensors are immutable: no
    copy is needed), cast to ``dtype`` if given, with ``ndmin`` leading axes; anything
    else is ``jt.constant``'s tensor of it."""
    if isinstance(object, Tensor):
        x = object
    elif object.__class__ in (list, tuple) and holds_tensor(object):
        x = pack(object)
    else:                 # (jt.constant's dtypes: a Python float is float32, as TensorFlow's)
        x = Tensor(object, dtype)
    if dtype is not None and np.dtype(dtype) != x.dtype:
        x = _ew.cast(x, np.dtype(dtype))
    for _ in range(int(ndmin) - _ndim(x)):
        x = expand_dims(x, 0)
    return x


@public(jt=False, numpy=True)
def asarray(a, dtype=None, order=None, *, like=None, copy=None):
    """NumPy's ``np.asarray``: ``array(a, dtype)`` (a tensor as it is)."""
    return array(a, dtype)


class _Concatenator:
    """NumPy's ``np.r_`` and ``np.c_`` on tensors: the items (tensors, lists of them,
    arrays, scalars, ranges given as slices) joined with jittape's ``concatenate``, so
    that the gradients reach the tensors; without a tensor among them, NumPy's own."""

    numpy_public = True
    jt_public = False

    def __init__(self, numpy_object, axis, ndmin, trans1d):
        self._numpy = numpy_object
        self._axis, self._ndmin, self._trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not holds_tensor(items):
            return self._numpy[key]
        axis, ndmin, trans1d = self._axis, self._ndmin, self._trans1d
        objs, kinds = [], []
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError(at_user_line("r_/c_: special directives must be the "
                                                  "first entry"))
                if item in ("r", "c"):
                    raise UnsupportedError(at_user_line(
                        f"r_/c_: the matrix directive {item!r} is not supported on tensors "
                        "(np.matrix); join them without it"))
                numbers = [int(v) for v in item.split(",")]
                axis = numbers[0]
                ndmin = numbers[1] if len(numbers) > 1 else ndmin
                trans1d = numbers[2] if len(numbers) > 2 else trans1d
                continue
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                obj = (np.linspace(start, item.stop, num=int(abs(step)))
                       if isinstance(step, (complex, np.complexfloating))
                       else np.arange(start, item.stop, step))
                if ndmin > 1:
                    obj = np.array(obj, ndmin=ndmin)
                    if trans1d != -1:
                        obj = obj.swapaxes(-1, trans1d)
            elif isinstance(item, (bool, int, float, complex, np.generic)):
                objs.append(item)
                kinds.append(item)
                continue
            else:
                obj = array(item)
                item_ndim = _ndim(obj)
                for _ in range(ndmin - item_ndim):
                    obj = expand_dims(obj, 0)
                if trans1d != -1 and item_ndim < ndmin:
                    # NumPy's placement of the item's axes among the new ones
                    k2, k1 = ndmin - item_ndim, trans1d
                    if k1 < 0:
                        k1 += k2 + 1
                    axes = list(range(ndmin))
                    obj = transpose(obj, axes[:k1] + axes[k2:] + axes[k1:k2])
            objs.append(obj)
            kinds.append(obj.dtype)
        dtype = np.result_type(*kinds)
        joined = []
        for obj in objs:
            if isinstance(obj, Tensor):
                joined.append(obj if obj.dtype == dtype else _ew.cast(obj, dtype))
            else:
                joined.append(np.array(obj, dtype=dtype, ndmin=max(ndmin, 1)))
        return concatenate(joined, axis=axis)


r_ = _Concatenator(np.r_, 0, 1, -1)
c_ = _Concatenator(np.c_, -1, 2, 0)


# -- indexing ---------------------------------------------------------------------------

def _as_index_array(item):
    if isinstance(item, Tensor) and item._value is None:      # a traced index array
        if item.dtype.kind not in "iu":
            raise UnsupportedError(at_user_line(
                f"getitem: index arrays must be integers, got {item.dtype} (boolean masks "
                "give data-dependent shapes and only work in eager code; in a compiled "
                "function use jt.where(mask, x, 0), or indices found outside it)"))
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
    ], kind="view", aliases=("cpu",), complex=True)


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
    ], complex=True)


def _set_row_impl(x, v, i):
    x = np.asarray(x)
    out = x.copy()
    try:
        out[operator.index(i)] = v
    except IndexError:
        raise OutOfRange(at_user_line(
            f"set_row: index {int(i)} is out of bounds for axis 0 with size {x.shape[0]}")) \
            from None
    return out


def _set_row_abstract(x, v, i):
    shape, row = shape_of(x), shape_of(v)
    if not shape or len(row) != len(shape) - 1:
        raise ShapeError(at_user_line(
            f"set_row: a row of shape {row} does not fit a tensor of shape {shape}"))
    for a, b in zip(shape[1:], row):
        same_size("set_row", a, b, "the row's shape is not the tensor's past its first axis")
    if shape_of(i) != () or np.dtype(getattr(i, "dtype", np.int64)).kind not in "iu":
        raise ShapeError(at_user_line(
            f"set_row: the index must be an integer scalar, got "
            f"{np.dtype(getattr(i, 'dtype', type(i))).name}{list(shape_of(i))}"))
    return Aval(shape, x.dtype)


def _zeros_like(v):
    from .creation import zeros_like
    return zeros_like(v)


# ``x.at[i].set(v)`` for one integer ``i`` (traced or not): ``x`` with row ``i`` (along
# the first axis; negative counts from the end) replaced by ``v`` of the row's shape and
# dtype. A copy of ``x`` with one row written, where ``where``/``index_add`` would write
# every element; and where ``x`` is a loop's carry that nothing reads after it, the
# compiled loop writes the row in place (codegen.cpu.Pool: a ring buffer or a
# preallocated output costs a row a step, not the whole array).
set_row = Primitive(
    "set_row", _set_row_impl, abstract=_set_row_abstract,
    vjp=PerInput(lambda k, g, out, x, v, i:
                 set_row.bind(g, _zeros_like(v), i) if k == 0
                 else getitem_prim.bind(g, i, index=(("array", 0),)) if k == 1 else None),
    jvp=[lambda t, out, x, v, i: set_row.bind(t, _zeros_like(v), i),
         lambda t, out, x, v, i: set_row.bind(_zeros_like(x), t, i)],
    save=((False, True, True), False),
    examples=[
        ex((4, 3), (3,), Fixed(np.int64(1))),
        ex((4, 3), (3,), Fixed(np.int64(-1))),
        ex((5,), (), Fixed(np.int64(3))),
        ex((3, 2, 2), (2, 2), Fixed(np.int64(0))),
    ], public=False, complex=True, holomorphic=True)


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


@composite(examples=[ex((3, 4), Fixed(np.array([[0, 3], [1, 1], [2, 0]])), axis=1),
                     ex((3, 2), Fixed(np.array([[2, 0]])), axis=0)],
           numpy=(np.take_along_axis,))
def take_along_axis(arr, indices, axis=-1):
    """``arr``'s elements at ``indices`` along ``axis``, the other axes matched (NumPy's
    ``take_along_axis``: ``np.argsort`` and ``np.argmax(keepdims=True)``'s partner)."""
    if axis is None:
        arr, axis = reshape(arr, (-1,)), 0
    ndim = _ndim(arr)
    if _ndim(indices) != ndim:
        raise ShapeError(at_user_line(
            f"take_along_axis: indices of shape {_shape(indices)} need the rank of the "
            f"array, shape {_shape(arr)}"))
    (axis,) = normalize_axes("take_along_axis", axis, ndim)
    exact_sizes()                            # (the other axes' positions: this size's)
    shape = [int(d) for d in _shape(arr)]
    index = tuple(indices if k == axis else
                  np.arange(shape[k]).reshape(tuple(shape[k] if j == k else 1
                                                    for j in range(ndim)))
                  for k in range(ndim))
    return getitem(arr, index)


@public
def gather(params, indices, axis=0):
    """TensorFlow's name for ``take`` (with its default ``axis=0``)."""
    return take(params, indices, axis=axis)



# -- joins and splits on concatenate and slices --------------------------------------------

def _as_dtype(xs, dtype):
    return xs if dtype is None else [_ew.cast(x, dtype) for x in xs]


def _sequence(op, tup):
    if isinstance(tup, (Tensor, np.ndarray)):     # (NumPy's: the rows of an array)
        if not _ndim(tup):
            raise TypeError(at_user_line(
                f"{op}: arrays to stack must be passed as a sequence (a list or tuple), got "
                "a 0-d tensor"))
        return [tup[i] for i in range(int(_shape(tup)[0]))]
    xs = list(tup)
    if not xs:
        raise ValueError(at_user_line(f"{op}: need at least one array to concatenate"))
    return xs


def _joined(xs, axis):
    # (concatenate of one tensor is that tensor: the composite returns it as it is)
    return concatenate(xs, axis)


@composite(examples=[ex((3,), (3,), ), ex((2, 3), (1, 3), )],
           numpy=(np.vstack,), call=lambda *xs: vstack(list(xs)))
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Tensors stacked as rows (along axis 0, 1-d ones as rows of one)."""
    xs = _as_dtype([atleast_2d(x) for x in _sequence("vstack", tup)], dtype)
    return _joined(xs, 0)


@composite(examples=[ex((3,), (2,), ), ex((2, 3), (2, 1), )],
           numpy=(np.hstack,), call=lambda *xs: hstack(list(xs)))
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Tensors joined as columns (along axis 1; 1-d ones end to end)."""
    xs = _as_dtype([atleast_1d(x) for x in _sequence("hstack", tup)], dtype)
    return _joined(xs, 0 if _ndim(xs[0]) == 1 else 1)


def _column(x):
    return reshape(x, (-1, 1)) if _ndim(x) < 2 else x


@composite(examples=[ex((3,), (3,), ), ex((3,), (3, 2), )],
           numpy=(np.column_stack,), call=lambda *xs: column_stack(list(xs)))
def column_stack(tup):
    """1-d tensors as the columns of a 2-d one (2-d ones joined as they are, along axis 1)."""
    return _joined([_column(x) for x in _sequence("column_stack", tup)], 1)


@composite(examples=[ex((2, 3), (2,)), ex((2, 3), (1, 3), axis=0)], numpy=(np.append,))
def append(arr, values, axis=None):
    """``values`` joined after ``arr`` along ``axis`` (both flattened if None)."""
    arr, values = pack(arr), pack(values)
    if axis is None:
        arr = reshape(arr, (-1,)) if _ndim(arr) != 1 else arr
        values = reshape(values, (-1,))
        axis = 0
    return concatenate([arr, values], axis)


def _split_points(op, n, indices_or_sections, shape):
    """The cut points of ``array_split``: NumPy's, for a count (parts as equal as can be,
    the first ones a row larger) or a list of indices."""
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ShapeError(at_user_line(
                f"{op}: number sections must be larger than 0, got {sections} (shape {shape})"))
        each, extras = divmod(n, sections)
        sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
        return list(np.cumsum(sizes)), True
    points = [operator.index(i) for i in indices_or_sections]
    return [0] + points + [n], False


def _flat_parts(parts):
    """A split's parts flattened and joined again, for the op tests (one tensor out)."""
    return concatenate([reshape(p, (-1,)) for p in parts], 0)


@composite(examples=[ex((5, 2), indices_or_sections=3)],
           numpy=(np.array_split,), call=lambda x, **p: _flat_parts(array_split(x, **p)))
def array_split(ary, indices_or_sections, axis=0):
    """``ary`` cut along ``axis`` into ``indices_or_sections`` parts (as equal as can be)
    or at the given indices: a list of views."""
    axis = axis_index("array_split", axis, _shape(ary))
    n = _shape(ary)[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        exact_sizes()                      # the parts' sizes follow the size of the axis
        n = int(n)
    points, _ = _split_points("array_split", n, indices_or_sections, _shape(ary))
    return [slice_axis(ary, axis, int(a) if not isinstance(a, ir.Dim) else a,
                       int(b) if not isinstance(b, ir.Dim) else b)
            for a, b in zip(points[:-1], points[1:])]


@composite(examples=[ex((2, 6), indices_or_sections=[2, 5], axis=-1)],
           numpy=(np.split,), call=lambda x, **p: _flat_parts(split(x, **p)))
def split(ary, indices_or_sections, axis=0):
    """``ary`` cut along ``axis`` into ``indices_or_sections`` equal parts, or at the
    given indices: a list of views."""
    axis = axis_index("split", axis, _shape(ary))
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(_shape(ary)[axis])
        if indices_or_sections > 0 and n % int(indices_or_sections):
            raise ShapeError(at_user_line(
                f"split: array split does not result in an equal division (axis {axis} of "
                f"size {n} into {int(indices_or_sections)}; shape {_shape(ary)})"))
    return array_split(ary, indices_or_sections, axis)


@composite(examples=[ex((4, 3), indices_or_sections=2)],
           numpy=(np.vsplit,), call=lambda x, **p: _flat_parts(vsplit(x, **p)))
def vsplit(ary, indices_or_sections):
    """``split`` along axis 0 (of a tensor of two or more axes)."""
    return split(_ranked("vsplit", ary, 2), indices_or_sections, 0)


def _ranked(op, ary, rank):
    """``ary``, which ``op`` needs of ``rank`` or more axes (NumPy's message otherwise)."""
    if _ndim(ary) < rank:
        raise ShapeError(at_user_line(
            f"{op}: {op} only works on arrays of {rank} or more dimensions (shape "
            f"{_shape(ary)})"))
    return ary


@composite(examples=[ex((2, 4), indices_or_sections=2),
                     ex((6,), indices_or_sections=[1])],
           numpy=(np.hsplit,), call=lambda x, **p: _flat_parts(hsplit(x, **p)))
def hsplit(ary, indices_or_sections):
    """``split`` along axis 1 (axis 0 of a 1-d tensor)."""
    return split(_ranked("hsplit", ary, 1), indices_or_sections, 1 if _ndim(ary) > 1 else 0)


@composite(examples=[ex((2, 2, 4), indices_or_sections=2)],
           numpy=(np.dsplit,), call=lambda x, **p: _flat_parts(dsplit(x, **p)))
def dsplit(ary, indices_or_sections):
    """``split`` along axis 2 (of a tensor of three or more axes)."""
    return split(_ranked("dsplit", ary, 3), indices_or_sections, 2)


@composite(examples=[ex((3,), (3,)), ex((2, 3), (2, 3)), ex((4, 3), (3,))])
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors (NumPy's ``cross``; the vectors broadcast), from the
    components' products: the vectors along ``axisa`` of ``a`` and ``axisb`` of ``b``, the
    result's along ``axisc`` (``axis``, if given, is all three)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, axis_index("cross", axisa, _shape(a)), -1)
    b = moveaxis(b, axis_index("cross", axisb, _shape(b)), -1)
    if _shape(a)[-1:] != (3,) or _shape(b)[-1:] != (3,):
        raise ShapeError(at_user_line(
            f"cross: the vectors must have 3 components (along axisa {axisa} and axisb "
            f"{axisb}; shapes with them last {_shape(a)} and {_shape(b)}); 2-vectors are not "
            "supported"))
    ax, ay, az = (getitem(a, (Ellipsis, k)) for k in range(3))
    bx, by, bz = (getitem(b, (Ellipsis, k)) for k in range(3))
    out = stack([_ew.subtract(_ew.multiply(ay, bz), _ew.multiply(az, by)),
                 _ew.subtract(_ew.multiply(az, bx), _ew.multiply(ax, bz)),
                 _ew.subtract(_ew.multiply(ax, by), _ew.multiply(ay, bx))], axis=-1)
    return moveaxis(out, -1, axis_index("cross", axisc, _shape(out)))


numpy_dispatch(np.cross)(cross)


# -- diagonals and triangles ------------------------------------------------------------

@composite(examples=[ex((2, 3)), ex((3, 4, 2), offset=-1, axis1=2, axis2=0)],
           numpy=(np.diagonal,))
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal at ``offset`` of the planes of axes ``axis1`` and ``axis2``: those two
    axes removed, the diagonal's added last (a gather; its gradient a scatter)."""
    return _diagonal("diagonal", a, offset, axis1, axis2)


def _diagonal(op, a, offset, axis1, axis2):
    shape = _shape(a)
    if len(shape) < 2:
        raise ShapeError(at_user_line(
            f"{op}: diag requires an array of at least two dimensions (shape {shape})"))
    a1 = axis_index(op, axis1, shape, "axis1")
    a2 = axis_index(op, axis2, shape, "axis2")
    if a1 == a2:
        raise ShapeError(at_user_line(
            f"{op}: axis1 and axis2 cannot be the same (axis {a1}, shape {shape})"))
    exact_sizes()                                   # which elements: the sizes decide
    offset = operator.index(offset)
    rows0, cols0 = builtins.max(-offset, 0), builtins.max(offset, 0)
    length = builtins.max(0, builtins.min(int(shape[a1]) - rows0, int(shape[a2]) - cols0))
    steps = np.arange(length)
    rest = [k for k in range(len(shape)) if k not in (a1, a2)]
    moved = transpose(a, rest + [a1, a2])
    return getitem(moved, (Ellipsis, steps + rows0, steps + cols0))


@composite(examples=[ex((2,), k=1), ex((3, 4), k=-1)], numpy=(np.diag,))
def diag(v, k=0):
    """A 1-d ``v`` as the ``k``-th diagonal of a square matrix; a 2-d ``v``'s ``k``-th
    diagonal."""
    ndim = _ndim(v)
    if ndim == 2:
        return diagonal(v, k)
    if ndim != 1:
        raise ShapeError(at_user_line(f"diag: Input must be 1- or 2-d (shape {_shape(v)})"))
    exact_sizes()
    k = operator.index(k)
    n = int(_shape(v)[0])
    size = n + builtins.abs(k)
    steps = np.arange(n)
    rows, cols = steps + builtins.max(-k, 0), steps + builtins.max(k, 0)
    return _index_add.bind(v, rows, cols, index=(("array", 0), ("array", 1)),
                           shape=(size, size))


@composite(examples=[ex((3, 3)), ex((2, 3, 4), offset=1, axis1=1, axis2=2)],
           numpy=(np.trace,))
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along the diagonal (of the planes of ``axis1`` and ``axis2``)."""
    from .reduce import _no_out, sum as _sum_over
    _no_out("trace", out)
    if dtype is not None:
        a = _ew.cast(a, dtype)
    return _sum_over(_diagonal("trace", a, offset, axis1, axis2), axis=-1)


def _triangle(op, m, k, lower):
    shape = _shape(m)
    if not shape:
        raise ShapeError(at_user_line(f"{op}: a 0-d value has no triangle (shape ())"))
    exact_sizes()
    k = operator.index(k)
    n, cols = (int(shape[-1]), int(shape[-1])) if len(shape) == 1 else (int(shape[-2]),
                                                                        int(shape[-1]))
    mask = np.tri(n, cols, k if lower else k - 1, dtype=bool)
    return _ew.where(mask, m, 0) if lower else _ew.where(mask, 0, m)


@composite(examples=[ex((3, 3)), ex((2, 3, 4), k=1), ex((3,), k=-1)], numpy=(np.tril,))
def tril(m, k=0):
    """``m`` with the elements above the ``k``-th diagonal set to zero."""
    return _triangle("tril", m, k, True)


@composite(examples=[ex((3, 3)), ex((3, 4), k=-1)], numpy=(np.triu,))
def triu(m, k=0):
    """``m`` with the elements below the ``k``-th diagonal set to zero."""
    return _triangle("triu", m, k, False)


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
    if out.ndim and len(arrays) == 1 and arrays[0].ndim == 0 and node.params["index"] == (("array", 0),):
        # one traced integer picking a block along the first axis (a row of L-BFGS's
        # history, a step's slice): checked, then a view, as NumPy's x[int] (a copy
        # would write the whole block at each step)
        before, reads, _ = _index_code(ctx, node, x.ndim, xn, arrays, out.ndim)
        (_, t, source, n, template), = reads
        return before + _cpu_reads(ctx)(t, source, n, template) + [f"{o} = {xn}[{t}]"]
    before, reads, index = _index_code(ctx, node, x.ndim, xn, arrays, out.ndim)
    lines = list(before)
    if out.ndim == 0:
        return lines + _nest([], reads, [f"{o} = {xn}[{index}]"], _cpu_reads(ctx))
    lines += ctx.new(out)
    body = [f"{o}[{', '.join(f'i{k}' for k in range(out.ndim))}] = {xn}[{index}]"]
    return lines + _nest([ctx.size(d) for d in out.shape], reads, body, _cpu_reads(ctx))


def _set_row_template(node):
    """The message of set_row's index out of range (``{0}``: the index, ``{1}``: the
    size), with the user's line."""
    where = f" (at {node.where})" if node.where else ""
    return ("set_row: index {0} is out of bounds for axis 0 with size {1}"
            + where.replace("{", "{{").replace("}", "}}"))


def _lower_set_row(ctx, node):
    x, v, i = node.inputs
    o, xn = ctx.name(node.out), ctx.name(x)
    t = ctx.tmp("ix")
    lines = _cpu_reads(ctx)(t, ctx.name(i) if isinstance(i, ir.Var) else repr(int(i)),
                            f"{xn}.shape[0]", _set_row_template(node))
    if node.out.id in getattr(ctx, "in_place", ()):
        lines.append(f"{o} = {xn}")   # a loop's carry, read by nothing after: its own buffer
    else:
        lines += ctx.new(node.out) + [f"put({o}, 0, {xn})"]
    return lines + [f"put({o}, {t}, {ctx.name(v)})"]


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
        lines += ctx.new(out)
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
        lines += ctx.new(out)
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


def _cuda_set_row(ctx, node):
    x, v, i = node.inputs
    out = node.out
    o, xn = ctx.name(out), ctx.name(x)
    t = ctx.tmp("ix")
    source = ctx.read(i, 0) if isinstance(i, ir.Var) else repr(int(i))
    inside = _checked_read(t, source, f"{xn}.shape[0]",
                           ctx.index_error(_set_row_template(node), t, f"{xn}.shape[0]")
                           + ["continue"])
    own = ", ".join(f"i{a}" for a in range(out.ndim))
    row = (f"{ctx.name(v)}[{', '.join(f'i{a}' for a in range(1, out.ndim))}]" if v.ndim
           else ctx.read(v, 0))
    body = inside + [f"{o}[{own}] = {row} if i0 == {t} else {xn}[{own}]"]
    return [ctx.buffer(out)] + ctx.per_element([f"{o}.shape[{a}]" for a in range(out.ndim)],
                                               body, node, ctx.error_names())


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
_index_add.places = True
set_row.updates = True
set_row.lowerings["cpu"] = _lower_set_row
set_row.lowerings["cuda"] = _cuda_set_row
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


# -- shape functions built on indexing and joining: flips, rolls, tiles, pads, diffs ----

def _flip_axes(x, axes):
    if not axes:
        return x
    return getitem(x, tuple(slice(None, None, -1) if a in axes else slice(None)
                            for a in range(max(axes) + 1)))


@composite(examples=[ex((2, 3)), ex((2, 3, 2), axis=1), ex((2, 3), axis=(0, -1))],
           numpy=(np.flip,))
def flip(m, axis=None):
    """``m`` with the order of its elements reversed along ``axis`` (all axes if None)."""
    if axis is None:
        return _flip_axes(m, tuple(range(_ndim(m))))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return _flip_axes(m, _axes_in_order("flip", axes, _shape(m), "axis"))


@composite(examples=[ex((2, 3))], numpy=(np.fliplr,))
def fliplr(m):
    """``m`` reversed along axis 1 (left to right)."""
    if _ndim(m) < 2:
        raise ShapeError(at_user_line(f"fliplr: Input must be >= 2-d (shape {_shape(m)})"))
    return _flip_axes(m, (1,))


@composite(examples=[ex((3,)), ex((2, 3))], numpy=(np.flipud,))
def flipud(m):
    """``m`` reversed along axis 0 (up to down)."""
    if _ndim(m) < 1:
        raise ShapeError(at_user_line(f"flipud: Input must be >= 1-d (shape {_shape(m)})"))
    return _flip_axes(m, (0,))


@composite(examples=[ex((2, 3)), ex((2, 3), k=2), ex((2, 3, 2), k=-1, axes=(1, 2))],
           numpy=(np.rot90,))
def rot90(m, k=1, axes=(0, 1)):
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``, from the first
    towards the second (NumPy's rot90)."""
    axes = tuple(axes)
    ndim = _ndim(m)
    if len(axes) != 2:
        raise ShapeError(at_user_line(f"rot90: len(axes) must be 2, got {axes}"))
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == ndim:
        raise ShapeError(at_user_line(f"rot90: Axes must be different, got {axes}"))
    if not all(-ndim <= a < ndim for a in axes):
        raise ShapeError(at_user_line(
            f"rot90: Axes={axes} out of range for array of ndim={ndim} (shape {_shape(m)})"))
    a0, a1 = axes[0] % ndim, axes[1] % ndim
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return _flip_axes(m, (a0, a1))
    perm = list(range(ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(_flip_axes(m, (a1,)), perm)
    return _flip_axes(transpose(m, perm), (a1,))


@composite(examples=[ex((2, 3), shift=4), ex((2, 3), shift=(1, -1), axis=(0, 1))],
           numpy=(np.roll,))
def roll(a, shift, axis=None):
    """Elements of ``a`` shifted by ``shift`` along ``axis`` (of the flattened ``a`` if
    None), those that leave one end coming back at the other."""
    if axis is None:
        return reshape(roll(reshape(a, (-1,)), shift, 0), _shape(a))
    try:
        pairs = np.broadcast(np.asarray(shift), np.asarray(axis))
    except ValueError:
        raise ShapeError(at_user_line(
            f"roll: shift {shift!r} and axis {axis!r} cannot be broadcast together "
            f"(shape {_shape(a)})")) from None
    shifts = {}
    for s, ax in pairs:
        ax = axis_index("roll", int(ax), _shape(a))
        shifts[ax] = shifts.get(ax, 0) + int(s)
    shape = _shape(a)
    exact_sizes()                          # where the cut falls depends on the size
    for ax, s in sorted(shifts.items()):
        n = int(shape[ax])
        s = s % n if n else 0
        if s:
            a = concatenate([slice_axis(a, ax, n - s, n), slice_axis(a, ax, 0, n - s)], ax)
    return a


@composite(examples=[ex((2, 3), reps=2), ex((2, 3), reps=(2, 1, 2)), ex((3,), reps=(2, 1))],
           numpy=(np.tile,))
def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis (NumPy's tile: ``A`` or ``reps``
    padded with leading ones to the same length)."""
    reps = tuple(operator.index(r) for r in (np.atleast_1d(np.asarray(reps))))
    if any(r < 0 for r in reps):
        raise ShapeError(at_user_line(f"tile: negative repetitions {reps} (shape {_shape(A)})"))
    shape = _shape(A)
    d = max(len(reps), len(shape))
    shape = (1,) * (d - len(shape)) + tuple(shape)
    reps = (1,) * (d - len(reps)) + reps
    # each axis n becomes (r, n), broadcast from (1, n): the gradient of a repeat is
    # broadcast_to's, a sum over the copies
    spread = tuple(v for n in shape for v in (1, n))
    copies = tuple(v for r, n in zip(reps, shape) for v in (r, n))
    out = broadcast_to(reshape(A, spread), copies)
    return reshape(out, tuple(r * n for r, n in zip(reps, shape)))


@composite(examples=[ex((2, 3), repeats=2), ex((2, 3), repeats=2, axis=1),
                     ex((2, 3), repeats=[1, 0, 3], axis=-1)], numpy=(np.repeat,))
def repeat(a, repeats, axis=None):
    """Each element of ``a`` repeated ``repeats`` times along ``axis`` (of the flattened
    ``a`` if None); ``repeats`` an int or one count per element of that axis."""
    if axis is None:
        a = reshape(a, (-1,))
        axis = 0
    shape = _shape(a)
    axis = axis_index("repeat", axis, shape)
    counts = np.asarray(repeats._value if isinstance(repeats, Tensor) and repeats._value
                        is not None else repeats)
    if counts.dtype.kind not in "iub" or counts.ndim > 1:
        raise UnsupportedError(at_user_line(
            f"repeat: repeats must be an int or a 1-d sequence of ints known when the "
            f"function is traced, got {counts.dtype} {counts.shape} (shape {shape})"))
    if np.any(counts < 0):
        raise ShapeError(at_user_line(f"repeat: negative repeats {counts.tolist()} "
                                      f"(shape {shape})"))
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(-1)[0])
        spread = shape[:axis + 1] + (1,) + shape[axis + 1:]
        copies = shape[:axis + 1] + (r,) + shape[axis + 1:]
        out = broadcast_to(reshape(a, spread), copies)
        return reshape(out, shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])
    exact_sizes()                            # one count per element: the sizes are fixed
    if counts.size != int(shape[axis]):
        raise ShapeError(at_user_line(
            f"repeat: {counts.size} repeats for axis {axis} of size {int(shape[axis])} "
            f"(shape {shape})"))
    return take(a, np.repeat(np.arange(counts.size), counts), axis=axis)


def _pad_pairs(op, width, ndim, shape, what):
    """NumPy's forms of a per-axis (before, after) argument as ``ndim`` pairs."""
    try:
        pairs = np.broadcast_to(np.asarray(width), (ndim, 2))
    except ValueError:
        raise ShapeError(at_user_line(
            f"{op}: {what} {width!r} cannot be broadcast to ({ndim}, 2) (shape {shape})")) from None
    return pairs


@composite(examples=[ex((2, 3), pad_width=((1, 0), (2, 2))),
                     ex((3,), pad_width=(0, 2), constant_values=1.5)], numpy=(np.pad,))
def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` padded with ``constant_values`` (0 unless given): ``pad_width`` in NumPy's
    forms (an int, ``(before, after)``, or one pair per axis). Only ``mode="constant"``."""
    shape = _shape(array)
    ndim = len(shape)
    if mode != "constant":
        raise UnsupportedError(at_user_line(
            f"pad: mode {mode!r} is not supported (shape {shape}); only mode='constant'"))
    unknown = set(kwargs) - {"constant_values"}
    if unknown:
        raise ValueError(at_user_line(
            f"pad: unsupported keyword arguments for mode 'constant': {sorted(unknown)} "
            f"(shape {shape})"))
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError(at_user_line(f"pad: `pad_width` must be of integral type, got "
                                     f"{widths.dtype} (shape {shape})"))
    widths = _pad_pairs("pad", widths, ndim, shape, "pad_width")
    if np.any(widths < 0):
        raise ShapeError(at_user_line(f"pad: index can't contain negative values "
                                      f"(pad_width {np.asarray(pad_width).tolist()}, shape "
                                      f"{shape})"))
    values = _pad_pairs("pad", kwargs.get("constant_values", 0), ndim, shape,
                        "constant_values")
    dtype = array.dtype if hasattr(array, "dtype") else np.asarray(array).dtype
    # axis by axis, as NumPy fills them: a later axis's pads cover the corners
    for ax in range(ndim):
        parts = []
        for side, width in enumerate(widths[ax]):
            if width:
                block = list(_shape(array))
                block[ax] = int(width)
                fill = np.asarray(values[ax][side]).astype(dtype)
                parts.append((side, broadcast_to(fill, tuple(block))))
        if parts:
            before = [p for side, p in parts if side == 0]
            after = [p for side, p in parts if side == 1]
            array = concatenate(before + [array] + after, ax)
    return array


_NO_VALUE = object()


@composite(examples=[ex((5,)), ex((2, 4), n=2, axis=0)],
           numpy=(np.diff,))
def diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    """The ``n``-th discrete difference along ``axis``: ``a[1:] - a[:-1]``, ``n`` times."""
    n = operator.index(n)
    if n < 0:
        raise ShapeError(at_user_line(
            f"diff: order must be non-negative but got {n} (shape {_shape(a)})"))
    if n == 0:
        return a
    shape = _shape(a)
    if not shape:
        raise ShapeError(at_user_line(
            "diff: diff requires input that is at least one dimensional (shape ())"))
    axis = axis_index("diff", axis, shape)
    parts = []
    for extra in (prepend, append):
        if extra is _NO_VALUE:
            parts.append(None)
            continue
        if not isinstance(extra, Tensor):
            extra = np.asarray(extra)          # (NumPy's: a Python float is a float64)
        if _ndim(extra) == 0:
            block = list(shape)
            block[axis] = 1
            extra = broadcast_to(extra, tuple(block))
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        a = concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis)
    for _ in range(n):
        a = _ew.subtract(slice_axis(a, axis, 1, None), slice_axis(a, axis, 0, -1))
    return a


def _gradient_call(f, **params):
    """``gradient``'s result as one tensor for the op tests (a tuple when several axes)."""
    out = gradient(f, **params)
    return stack(list(out)) if isinstance(out, tuple) else out


@composite(examples=[ex((5,)), ex((4, 3), axis=1), ex((3, 4), axis=0, edge_order=2),
                     ex((3, 4))], numpy=(np.gradient,), call=_gradient_call)
def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's ``gradient`` for evenly spaced samples: central differences inside, one-
    sided ones (of ``edge_order`` 1 or 2) at the ends, along each axis of ``axis`` (all by
    default; one tensor for one axis, a tuple otherwise, as NumPy's). ``varargs``: the spacing, one
    number for all axes or one per axis (coordinate arrays are not supported)."""
    shape = _shape(f)
    axes = (tuple(range(len(shape))) if axis is None else
            tuple(axis_index("gradient", a, shape) for a in
                  (axis if isinstance(axis, (tuple, list)) else (axis,))))
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(h) == 0 for h in varargs):
        spacings = list(varargs)
    else:
        raise UnsupportedError(at_user_line(
            f"gradient: the spacing must be one number or one per axis ({len(axes)}), got "
            f"{len(varargs)} values (coordinate arrays are not supported; shape {shape})"))
    if edge_order not in (1, 2):
        raise ValueError(at_user_line(f"gradient: edge_order {edge_order!r} is not 1 or 2"))
    if np.dtype(getattr(f, "dtype", None) or np.asarray(f).dtype).kind in "iub":
        f = _ew.cast(f, np.float64)                  # (NumPy's: integers give float64)
    out = []
    for k, h in zip(axes, spacings):
        n = int(shape[k])
        if n < edge_order + 1:
            raise ShapeError(at_user_line(
                f"gradient: shape {shape} is too small along axis {k} to calculate a "
                f"numerical gradient, at least (edge_order + 1) = {edge_order + 1} elements "
                "are required"))

        def at(i):                                # element i along axis k, kept as an axis
            return slice_axis(f, k, i, i + 1 if i != -1 else None)
        if edge_order == 1:
            first = _ew.subtract(at(1), at(0))
            last = _ew.subtract(at(-1), at(-2))
        else:
            first = _ew.add(_ew.add(_ew.multiply(at(0), -1.5), _ew.multiply(at(1), 2.0)),
                            _ew.multiply(at(2), -0.5))
            last = _ew.add(_ew.add(_ew.multiply(at(-3), 0.5), _ew.multiply(at(-2), -2.0)),
                           _ew.multiply(at(-1), 1.5))
        parts = [first]
        if n > 2:                                 # central differences inside
            parts.append(_ew.multiply(_ew.subtract(slice_axis(f, k, 2, None),
                                                   slice_axis(f, k, 0, -2)), 0.5))
        parts.append(last)
        value = concatenate(parts, k)
        out.append(value if isinstance(h, (int, float)) and h == 1 else _ew.divide(value, h))
    return out[0] if len(out) == 1 else tuple(out)


# -- lowerings ---------------------------------------------------------------------------
