"""Shape primitives: reshape, transpose, broadcast_to, and the composites on them
(expand_dims, squeeze, swapaxes, moveaxis, flip, roll, tile, repeat, pad, diff, ...).
Indexing and joining are ``indexing.py``."""

import math
import operator

import numpy as np

from .. import ir
from ..errors import ShapeError, UnsupportedError, at_user_line
from ..recording import TRACES, current_trace
from ..tensor import Tensor
from . import elementwise as _ew
from .core import (Aval, Primitive, composite, ex, normalize_axes, numpy_dispatch, public,
                   same_size, shape_of)


def _ndim(x):
    return x.ndim if hasattr(x, "ndim") else np.ndim(x)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _same_shape(a, b):
    """Whether shapes ``a`` and ``b`` are the same at run time, not only now: sizes known
    only at run time compared by their expressions (a traced size of 5 is not the
    literal 5)."""
    return len(a) == len(b) and all(ir.expr_of(x) == ir.expr_of(y) for x, y in zip(a, b))


def _as_size(d):
    """An int from a size argument; an ir.Dim (a size known at run time) is kept as it is."""
    return d if isinstance(d, int) and not isinstance(d, bool) else operator.index(d)


# -- reshape ----------------------------------------------------------------------

def _reshape_abstract(x, shape):
    old = shape_of(x)
    if math.prod(old) != math.prod(shape):
        raise ShapeError(at_user_line(f"reshape: cannot reshape a tensor of shape {old} into "
                                      f"shape {shape}"))
    return Aval(shape, x.dtype)


_reshape = Primitive("reshape", lambda x, shape: np.reshape(x, shape), abstract=_reshape_abstract,
                     vjp=[lambda g, out, x, shape: reshape(g, x.shape)],
                     jvp=[lambda t, out, x, shape: _reshape.bind(t, shape=shape)], save=(False, False),
                     examples=[ex((2, 3), shape=(3, 2)), ex((2, 3), shape=(6,)),
                               ex((6,), shape=(1, 2, 3)), ex((), shape=(1, 1)), ex((1,), shape=())], kind="view", aliases=("cpu", "cuda"), keeps_order=True)


def resolve_shape(op, old, shape):
    """A target shape with its one ``-1`` replaced; a ShapeError if sizes do not match."""
    # _as_size keeps a traced size (an ir.Dim) symbolic; math.prod multiplies Dims
    shape = ((_as_size(shape),) if isinstance(shape, (int, np.integer))
             else tuple(_as_size(d) for d in shape))
    size = math.prod(old)
    if shape.count(-1) > 1:
        raise ShapeError(at_user_line(f"{op}: more than one -1 in shape {shape}"))
    if -1 in shape:
        rest = math.prod(d for d in shape if d != -1)
        if rest == 0 or size % rest:
            raise ShapeError(at_user_line(
                f"{op}: cannot reshape a tensor of shape {tuple(old)} ({size} elements) into "
                f"shape {shape}"))
        shape = tuple(size // rest if d == -1 else d for d in shape)
    if math.prod(shape) != size or any(d < 0 for d in shape):
        raise ShapeError(at_user_line(
            f"{op}: cannot reshape a tensor of shape {tuple(old)} ({size} elements) into "
            f"shape {shape}"))
    return shape


@public
@numpy_dispatch(np.reshape)
def reshape(x, shape):
    """``x`` with a new shape of the same size (one entry may be -1)."""
    shape = resolve_shape("reshape", _shape(x), shape)
    if isinstance(x, Tensor) and _same_shape(_shape(x), shape):
        return x
    return _reshape.bind(x, shape=shape)


# -- transpose --------------------------------------------------------------------

def _transpose_abstract(x, axes):
    shape = shape_of(x)
    if sorted(axes) != list(range(len(shape))):
        raise ShapeError(at_user_line(f"transpose: axes {axes} are not a permutation of the "
                                      f"axes of a tensor of shape {shape}"))
    return Aval(tuple(shape[a] for a in axes), x.dtype)


_transpose = Primitive("transpose", lambda x, axes: np.transpose(x, axes),
                       abstract=_transpose_abstract,
                       vjp=[lambda g, out, x, axes: _transpose.bind(g, axes=tuple(np.argsort(axes)))],
                       jvp=[lambda t, out, x, axes: _transpose.bind(t, axes=axes)],
                       save=(False, False),
                       examples=[ex((2, 3), axes=(1, 0)), ex((2, 3, 4), axes=(2, 0, 1)),
                                 ex((3,), axes=(0,)), ex((1, 2, 1), axes=(1, 2, 0))], kind="view", aliases=("cpu",))


@public
@numpy_dispatch(np.transpose)
def transpose(x, axes=None):
    """Permute axes (reverse them when ``axes`` is None)."""
    ndim = _ndim(x)
    given = axes
    if axes is not None and any(not -ndim <= int(a) < ndim for a in axes):
        raise ShapeError(at_user_line(             # (NumPy's AxisError: not wrapped around)
            f"transpose: axes {tuple(given)} are out of range for a tensor of shape "
            f"{_shape(x)} (rank {ndim})"))
    axes = tuple(range(ndim))[::-1] if axes is None else tuple(int(a) % max(ndim, 1) for a in axes)
    if len(axes) != ndim or sorted(axes) != list(range(ndim)):
        raise ShapeError(at_user_line(
            f"transpose: axes {tuple(given)} are not a permutation of the axes of a tensor of "
            f"shape {_shape(x)}"))
    if axes == tuple(range(ndim)):
        return x
    return _transpose.bind(x, axes=axes)




# -- broadcast_to -------------------------------------------------------------------

def _broadcast_to_abstract(x, shape):
    old = shape_of(x)
    ok = len(old) <= len(shape) and all(
        d == 1 or d == n for d, n in zip(old[::-1], shape[::-1]))
    if not ok:
        raise ShapeError(at_user_line(f"broadcast_to: cannot broadcast shape {old} to {shape}"))
    for d, n in zip(old[::-1], shape[::-1]):
        if d != 1:
            same_size("broadcast_to", d, n)
    return Aval(shape, x.dtype)


_broadcast_to = Primitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                          abstract=_broadcast_to_abstract,
                          vjp=[lambda g, out, x, shape: _ew.unbroadcast(g, x.shape)],
                          jvp=[lambda t, out, x, shape: _broadcast_to.bind(t, shape=shape)],
                          save=(False, False),
                          examples=[ex((3,), shape=(2, 3)), ex((2, 1), shape=(2, 4)),
                                    ex((), shape=(3,)), ex((1, 3), shape=(2, 2, 3))], kind="elementwise")
# fused as an elementwise read: the loop reads the operand at the broadcast index
_broadcast_to.lowerings["scalar"] = "{0}"


def _broadcast_simplify(node, producer):
    """``broadcast_to(reshape(x, (1, ..., 1) + x.shape), shape)`` is ``broadcast_to(x, shape)``:
    broadcasting aligns trailing axes, so leading size-1 axes change nothing. The reshape
    (the backward pass of every reduction makes one) then usually becomes dead, and a 0-d
    value broadcast straight into a fused loop costs no array at all."""
    x = node.inputs[0]
    src = producer.get(x.id) if isinstance(x, ir.Var) else None
    if src is None or src.prim is not _reshape or not isinstance(src.inputs[0], ir.Var):
        return None
    inner = src.inputs[0]
    lead = src.out.ndim - inner.ndim
    if lead >= 0 and all(d == 1 and not hasattr(d, "expr") for d in src.out.shape[:lead]) and (
            [ir.expr_of(d) for d in src.out.shape[lead:]] == [ir.expr_of(d) for d in inner.shape]):
        return ir.Node(node.prim, [inner] + node.inputs[1:], node.params, node.out, node.where)
    return None


_broadcast_to.simplify = _broadcast_simplify


@public
@numpy_dispatch(np.broadcast_to)
def broadcast_to(x, shape):
    shape = ((_as_size(shape),) if isinstance(shape, (int, np.integer))
             else tuple(_as_size(d) for d in shape))
    if isinstance(x, Tensor) and _same_shape(_shape(x), shape):
        return x
    if isinstance(x, (bool, int, float)):
        x = np.asarray(x)         # as NumPy takes it: the shape rule reads its dtype
    return _broadcast_to.bind(x, shape=shape)


@composite(examples=[ex((2, 3), axis=0), ex((3,), axis=1), ex((2, 2), axis=(0, 3))],
           numpy=(np.expand_dims,))
@public
def expand_dims(x, axis):
    """Insert size-1 axes at ``axis`` (an int or tuple, positions in the result)."""
    shape = list(_shape(x))
    axes = normalize_axes("expand_dims", axis, len(shape) + (1 if isinstance(axis, int) else len(axis)))
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


@composite(examples=[ex((1, 3)), ex((2, 1, 1), axis=1), ex((1, 1), axis=(0, 1))],
           numpy=(np.squeeze,))
@public
def squeeze(x, axis=None):
    """Remove size-1 axes (all of them, or those in ``axis``)."""
    shape = _shape(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = normalize_axes("squeeze", axis, len(shape))
        bad = [a for a in axes if shape[a] != 1]
        if bad:
            raise ShapeError(at_user_line(
                f"squeeze: axis {bad[0]} of a tensor of shape {shape} has size {shape[bad[0]]}, not 1"))
    return reshape(x, tuple(d for i, d in enumerate(shape) if i not in axes))


def exact_sizes():
    """Key the graph under trace (if any) on the exact sizes of its inputs: an op whose
    structure follows the sizes (where a roll cuts, how many rows a split gives each part,
    which elements a diagonal reads) cannot be recomputed from them at run time, as user
    code that reads ``x.shape`` cannot."""
    if TRACES:
        trace = current_trace()
        if trace is not None:
            trace.reads_sizes = True


def axis_index(op, axis, shape, what="axis"):
    """One axis of a value of ``shape`` as a non-negative int; out of bounds, an error
    that NumPy's AxisError catchers catch (a ValueError) naming the op and the shape."""
    a = operator.index(axis)
    ndim = len(shape)
    if not -ndim <= a < ndim:
        name = "axis" if what == "axis" else f"{what}: axis"
        raise ShapeError(at_user_line(f"{op}: {name} {a} is out of bounds for rank {ndim} "
                                      f"(shape {tuple(int(d) for d in shape)})"))
    return a % ndim


def axes_of(op, axis, shape):
    """``normalize_axes`` (None: all axes), an axis out of bounds named with the shape."""
    if axis is not None and not (not shape and isinstance(axis, (int, np.integer))):
        for a in ((axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)):
            axis_index(op, a, shape)
    return normalize_axes(op, axis, len(shape))


def _axes_in_order(op, axes, shape, what):
    """A sequence of axes (or one) as non-negative ints in the order given, no repeats."""
    axes = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = [axis_index(op, a, shape, what) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(at_user_line(f"{op}: repeated axis in `{what}` argument {tuple(axes)}"))
    return out


@composite(examples=[ex((2, 3)), ex(())], numpy=(np.ravel,))
def ravel(x, order="C"):
    """``x`` as a 1-d tensor, in row-major order."""
    if order not in ("C", "A", "K"):
        raise UnsupportedError(at_user_line(
            f"ravel: order={order!r} is not supported (shape {_shape(x)}); only row-major "
            "order 'C'"))
    return reshape(x, (-1,))


@composite(examples=[ex((2, 3), axis1=0, axis2=1), ex((2, 3, 4), axis1=-1, axis2=0)],
           numpy=(np.swapaxes,))
def swapaxes(x, axis1, axis2):
    """``x`` with axes ``axis1`` and ``axis2`` interchanged."""
    ndim = _ndim(x)
    a = axis_index("swapaxes", axis1, _shape(x), "axis1")
    b = axis_index("swapaxes", axis2, _shape(x), "axis2")
    perm = list(range(ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


@composite(examples=[ex((2, 3, 4), source=0, destination=-1),
                     ex((2, 3, 4), source=(0, 1), destination=(2, 0))], numpy=(np.moveaxis,))
def moveaxis(x, source, destination):
    """``x`` with axes ``source`` moved to positions ``destination`` (the others keep
    their order)."""
    ndim = _ndim(x)
    source = _axes_in_order("moveaxis", source, _shape(x), "source")
    destination = _axes_in_order("moveaxis", destination, _shape(x), "destination")
    if len(source) != len(destination):
        raise ShapeError(at_user_line(
            f"moveaxis: `source` and `destination` arguments must have the same number of "
            f"elements (shape {_shape(x)}: {source} and {destination})"))
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(x, order)


@composite(examples=[ex((2, 3, 4), axis=2), ex((2, 3, 4), axis=0, start=2)],
           numpy=(np.rollaxis,))
def rollaxis(x, axis, start=0):
    """``x`` with axis ``axis`` moved to just before position ``start`` (NumPy's rollaxis)."""
    n = _ndim(x)
    axis = axis_index("rollaxis", axis, _shape(x))
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise ShapeError(at_user_line(
            f"rollaxis: 'start' arg requires {-n} <= start < {n + 1} (shape {_shape(x)})"))
    if axis < start:
        start -= 1
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return transpose(x, axes)


def _at_least(op, arys, shape_of_one):
    out = [reshape(a, shape_of_one(_shape(a))) for a in arys]
    return out[0] if len(out) == 1 else tuple(out)


@composite(examples=[ex(()), ex((3,))], numpy=(np.atleast_1d,))
def atleast_1d(*arys):
    """Each argument with at least one axis (a 0-d value becomes shape (1,))."""
    return _at_least("atleast_1d", arys, lambda s: s if len(s) >= 1 else (1,))


@composite(examples=[ex(()), ex((3,)), ex((2, 3))], numpy=(np.atleast_2d,))
def atleast_2d(*arys):
    """Each argument with at least two axes (shape (n,) becomes (1, n))."""
    return _at_least("atleast_2d", arys, lambda s: s if len(s) >= 2 else (1,) * (2 - len(s)) + s)


def _three(s):
    if len(s) == 0:
        return (1, 1, 1)
    if len(s) == 1:
        return (1, s[0], 1)
    if len(s) == 2:
        return s + (1,)
    return s


@composite(examples=[ex((3,)), ex((2, 3))], numpy=(np.atleast_3d,))
def atleast_3d(*arys):
    """Each argument with at least three axes (NumPy's: (n,) becomes (1, n, 1), (m, n)
    becomes (m, n, 1))."""
    return _at_least("atleast_3d", arys, _three)


def _flip_axes(x, axes):
    from .indexing import getitem
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
    from .indexing import concatenate, slice_axis
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
    from .indexing import take
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
    from .indexing import concatenate
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
    from .indexing import concatenate, slice_axis
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


# -- lowerings ---------------------------------------------------------------------------

def _lower_reshape(ctx, node):
    x, out = node.inputs[0], node.out
    o, xn = ctx.name(out), ctx.name(x)
    if x.ndim == 0:
        return ctx.full(o, out.shape, xn, out.dtype)
    if out.ndim == 0:
        return [f"{o} = {xn}[{', '.join(['0'] * x.ndim)}]"]
    return [f"{o} = reshape({xn}, {ctx.shape(out.shape)})"]     # runtime.reshape: a view if C-ordered


def _loops(shape_code_items):
    lines = []
    for k, n in enumerate(shape_code_items):
        lines.append("    " * k + f"for i{k} in range({n}):")
    return lines, "    " * len(shape_code_items)


def _lower_transpose(ctx, node):
    x, out = node.inputs[0], node.out
    o, xn = ctx.name(out), ctx.name(x)
    if x.ndim <= 1:
        return [f"{o} = {xn}"]
    if x.ndim == 2:                 # a view; np.dot reads it without a copy (BLAS 'T')
        return [f"{o} = {xn}.T"]
    # N-D: a copy in a loop nest (Numba's np.transpose is slow to compile)
    axes = node.params["axes"]
    lines = [f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"]
    loops, pad = _loops([f"{o}.shape[{k}]" for k in range(out.ndim)])
    src = [""] * x.ndim
    for k, a in enumerate(axes):
        src[a] = f"i{k}"
    lines += loops
    lines.append(f"{pad}{o}[{', '.join(f'i{k}' for k in range(out.ndim))}] = {xn}[{', '.join(src)}]")
    return lines


# -- CUDA lowerings: ``ctx`` is codegen.cuda.CudaContext (device arrays, one-element
# arrays for rank-0 values computed on the device, kernels of one thread per element)

def _cuda_reshape(ctx, node):
    x, out = node.inputs[0], node.out
    o, xn = ctx.name(out), ctx.name(x)
    if x.ndim == 0 and not ctx.scalar_on_device(x):
        return [ctx.buffer(out), f"fill({o}, {xn})"]
    if out.ndim == 0:
        ctx.device_scalars.add(out.id)
        return [f"{o} = {xn}.reshape(1)"]
    return [f"{o} = {xn}.reshape({ctx.shape(out.shape)})"]     # device arrays are C-ordered


def _cuda_transpose(ctx, node):
    x, out = node.inputs[0], node.out
    if x.ndim <= 1:
        ctx.alias(out, x)
        return [f"{ctx.name(out)} = {ctx.name(x)}"]
    src = [""] * out.ndim
    for k, a in enumerate(node.params["axes"]):
        src[a] = f"i{k}"
    o = ctx.name(out)
    body = [f"{o}[{', '.join(f'i{a}' for a in range(out.ndim))}] = {ctx.name(x)}[{', '.join(src)}]"]
    return [ctx.buffer(out)] + ctx.per_element([f"{o}.shape[{a}]" for a in range(out.ndim)],
                                               body, node)


_reshape.lowerings["cpu"] = _lower_reshape
_reshape.lowerings["cuda"] = _cuda_reshape
_transpose.lowerings["cuda"] = _cuda_transpose
_transpose.lowerings["cpu"] = _lower_transpose
