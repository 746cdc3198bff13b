"""Creation ops: constants of a shape, ranges, and ``*_like`` fills.

These have no gradient. A Python float fill gives float32 and a Python int int32,
as in TensorFlow; explicit dtypes win.
"""

import numpy as np

from ..errors import UnsupportedError, at_user_line
from ..tensor import Tensor, as_dtype, complex_error, float32, int32
from .core import REGISTRY, Aval, Primitive, ex, numpy_dispatch, public, shape_of


def _shape_arg(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _real_fill(value, op):
    """A complex fill value is rejected, not cast to a real dtype (which would drop its
    imaginary part)."""
    if value.__class__ in (int, float, bool):
        return
    if isinstance(value, complex) or np.iscomplexobj(value):
        raise complex_error(op, np.asarray(value).dtype)


def _scalar_dtype(value, dtype):
    if dtype is not None:
        return as_dtype(dtype)
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, int):
        return int32
    if isinstance(value, float):
        return float32
    return np.asarray(value).dtype


@public(numpy=True)
def zeros(shape, dtype=float32):
    return Tensor._wrap(np.zeros(_shape_arg(shape), as_dtype(dtype)))


@public(numpy=True)
def ones(shape, dtype=float32):
    return Tensor._wrap(np.ones(_shape_arg(shape), as_dtype(dtype)))


@public(numpy=True)
def full(shape, fill_value, dtype=None):
    _real_fill(fill_value, "jt.full")
    return Tensor._wrap(np.full(_shape_arg(shape), fill_value, _scalar_dtype(fill_value, dtype)))


@public(numpy=True)
def eye(n, m=None, dtype=float32):
    return Tensor._wrap(np.eye(int(n), None if m is None else int(m), dtype=as_dtype(dtype)))


@public(numpy=True)
def arange(start, stop=None, step=1, dtype=None):
    """Evenly spaced values in [start, stop); Python ints give int32, floats float32."""
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = float32 if any(isinstance(v, float) for v in (start, stop, step)) else int32
    return Tensor._wrap(np.arange(start, stop, step, dtype=as_dtype(dtype)))


range = arange


@public(numpy=True)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``num`` evenly spaced values from ``start`` to ``stop`` (inclusive unless
    ``endpoint=False``), float32 by default from Python numbers. Tensor endpoints (arrays
    of them too, along a new first axis) give a tensor with their gradients, in their
    dtype, NumPy's values."""
    if not (isinstance(start, Tensor) or isinstance(stop, Tensor)):
        dtype = float32 if dtype is None else as_dtype(dtype)
        values = np.linspace(start, stop, int(num), endpoint=endpoint, retstep=retstep,
                             dtype=dtype, axis=axis)
        if retstep:
            return Tensor._wrap(values[0]), values[1]
        return Tensor._wrap(values)
    if retstep or axis != 0:
        raise UnsupportedError(at_user_line(
            "linspace: retstep and axis are not supported with tensor endpoints (shapes "
            f"{shape_of(start)} and {shape_of(stop)}); move the axis with jt.moveaxis"))
    wide = np.result_type(*[v.dtype if isinstance(v, Tensor) else np.asarray(v).dtype
                            for v in (start, stop)], np.float16)
    out = wide if dtype is None else as_dtype(dtype)
    num = int(num)
    rank = max(len(shape_of(start)), len(shape_of(stop)))
    steps = np.arange(num, dtype=wide if wide.kind == "f" else np.float64).reshape(
        (num,) + (1,) * rank)
    div = num - 1 if endpoint else num
    # NumPy's arithmetic, to its last bit: start + i (stop - start) / div, then the last
    # value set to stop (the fractions' axis first, the endpoints' shapes after it; the
    # elementwise family builds on this module: its ops are found in the registry)
    add, multiply, subtract = (REGISTRY[name].bind for name in ("add", "multiply", "subtract"))
    delta = subtract(stop, start)
    step = REGISTRY["divide"].bind(delta, div) if div > 0 else multiply(delta, 0.0)
    values = add(multiply(steps, step), start)
    if endpoint and num > 1:
        last = np.arange(num).reshape((num,) + (1,) * rank) == num - 1
        values = REGISTRY["where"].bind(last, stop, values)
    return values if values.dtype == out else REGISTRY["cast"].bind(values, dtype=out)


numpy_dispatch(np.linspace)(linspace)


def _full_like_impl(x, fill_value, dtype):
    return np.full(np.shape(x), fill_value, dtype)


full_like_prim = Primitive(
    "full_like", _full_like_impl,
    abstract=lambda x, fill_value, dtype: Aval(shape_of(x), dtype),
    differentiable=False,
    examples=[ex((2, 3), fill_value=0.0, dtype=np.dtype(np.float64)),
              ex((), fill_value=1, dtype=np.dtype(np.int32))], kind="elementwise", complex=True)


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else _scalar_dtype(x, None)


@numpy_dispatch(np.full_like)
def full_like(x, fill_value, dtype=None):
    _real_fill(fill_value, "jt.full_like")
    return full_like_prim.bind(x, fill_value=fill_value,
                               dtype=as_dtype(dtype) if dtype is not None else _dtype_of(x))


@numpy_dispatch(np.zeros_like)
def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


@numpy_dispatch(np.ones_like)
def ones_like(x, dtype=None):
    return full_like(x, 1, dtype)


@public(jt=False, numpy=True)
@numpy_dispatch(np.shape)
def shape(x):
    return tuple(x.shape)


@public(jt=False, numpy=True)
@numpy_dispatch(np.ndim)
def ndim(x):
    return x.ndim


@public(jt=False, numpy=True)
@numpy_dispatch(np.size)
def size(x):
    return int(np.prod(x.shape, dtype=np.int64))


def _lower_full_like(ctx, node):
    out = node.out
    fill = ctx.literal(node.params["fill_value"], out.dtype)
    if out.ndim == 0:
        return [f"{ctx.name(out)} = {fill}"]
    return ctx.full(ctx.name(out), out.shape, fill, out.dtype)


full_like_prim.lowerings["cpu"] = _lower_full_like
# inside a fused loop: the fill value, a typed constant
full_like_prim.lowerings["scalar"] = lambda node: _typed_fill(node.params["fill_value"], node.out.dtype)


def _typed_fill(value, dtype):
    from ..codegen.names import literal_code
    return literal_code(value, dtype).replace("{", "{{").replace("}", "}}")
