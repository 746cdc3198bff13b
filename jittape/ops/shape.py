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
                               ex((6,), shape=(1, 2, 3)), ex((), shape=(1, 1)), ex((1,), shape=())], kind="view", aliases=("cpu", "cuda"), keeps_order=True,
                     complex=True)


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


_transpose = Primitive("transpose", lambda x, axes: x.transpose(axes) if x.__class__ is np.ndarray
                       else np.transpose(x, axes),
                       abstract=_transpose_abstract,
                       vjp=[lambda g, out, x, axes: _transpose.bind(g, axes=tuple(np.argsort(axes)))],
                       jvp=[lambda t, out, x, axes: _transpose.bind(t, axes=axes)],
                       save=(False, False),
                       examples=[ex((2, 3), axes=(1, 0)), ex((2, 3, 4), axes=(2, 0, 1)),
                                 ex((3,), axes=(0,)), ex((1, 2, 1), axes=(1, 2, 0))], kind="view", aliases=("cpu",),
                       complex=True)


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
                                    ex((), shape=(3,)), ex((1, 3), shape=(2, 2, 3))], kind="elementwise",
                          complex=True)
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
    lines = ctx.new(out)
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
