"""Reductions over any set of axes, with ``keepdims``.

Integer sums and products keep their dtype (as in TensorFlow and JAX, where NumPy
would widen to int64); ``mean`` follows NumPy (integers give float64) while the
TensorFlow alias ``reduce_mean`` keeps an integer dtype, as TensorFlow does.
"""

import numpy as np

from .. import ir
from ..errors import ShapeError, at_user_line
from . import elementwise as _ew
from . import shape as _shape
from .core import Aval, Primitive, composite, ex, normalize_axes, numpy_dispatch, public, shape_of

REDUCE_EXAMPLES = [
    ex((2, 3), axis=(0, 1), keepdims=False), ex((2, 3), axis=(1,), keepdims=False),
    ex((2, 3), axis=(0,), keepdims=True), ex((2, 1, 4), axis=(0, 2), keepdims=True),
    ex((3,), axis=(0,), keepdims=False), ex((), axis=(), keepdims=False),
    ex((2, 3, 2), axis=(1,), keepdims=False),
]


def _reduced_shape(shape, axis, keepdims):
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _reduce_abstract(name):
    def abstract(x, axis, keepdims):
        shape = shape_of(x)
        normalize_axes(name, axis, len(shape))
        if name in _NO_IDENTITY:
            _require_nonempty(name, shape, axis)
        return Aval(_reduced_shape(shape, axis, keepdims), x.dtype)
    return abstract


_NO_IDENTITY = {"max": "maximum", "min": "minimum"}


def _require_nonempty(name, shape, axis):
    """A reduction without identity (max, min) of an empty axis raises ValueError as
    NumPy's does, unless the result is empty too (NumPy's rule: the kept axes hold no
    element). Sizes known only at run time make it a check of the kernel's entry:
    ``kept <= kept * reduced`` holds exactly when ``reduced >= 1`` or ``kept == 0``."""
    import math
    reduced = math.prod([shape[a] for a in axis])
    kept = math.prod([d for a, d in enumerate(shape) if a not in axis])
    message = (f"{name}: zero-size array to reduction operation {_NO_IDENTITY[name]} which "
               "has no identity")
    if int(reduced) == 0 and int(kept) != 0:
        raise ShapeError(at_user_line(
            f"{message} (shape {tuple(int(d) for d in shape)}, axis {axis})"))
    if not any(isinstance(shape[a], ir.Dim) for a in axis):
        return                               # a reduced size that cannot change
    if not isinstance(kept, ir.Dim):
        kept = 1                             # (a constant number of results, not 0)
    ir.require_bound("<=", kept, kept * reduced, "ValueError",
                     f"{message} (axis {axis} is empty in this call)")


def _keepdims_shape(x, axis):
    return tuple(1 if i in axis else d for i, d in enumerate(x.shape))


def expand_reduced(g, x, axis, keepdims):
    """A reduction's cotangent broadcast back to the input's shape."""
    if not keepdims:
        g = _shape.reshape(g, _keepdims_shape(x, axis))
    return _shape.broadcast_to(g, x.shape)


def _sum_impl(x, axis, keepdims):
    x = np.asarray(x)
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype if x.dtype.kind in "iub" else None)



def _wide_float32(dtype):
    # float32 sums accumulate in float64: a float32 total of many terms loses digits
    # that NumPy's pairwise summation keeps
    return np.dtype(np.float64) if np.dtype(dtype) == np.float32 else np.dtype(dtype)


_sum = Primitive("sum", _sum_impl, abstract=_reduce_abstract("sum"), vjp=[
    lambda g, out, x, axis, keepdims: expand_reduced(g, x, axis, keepdims),
], jvp=[lambda t, out, x, axis, keepdims: _sum.bind(t, axis=axis, keepdims=keepdims)], save=(False, False), examples=REDUCE_EXAMPLES, kind="reduction", accumulate=_wide_float32)


def _extremum_vjp(g, out, x, axis, keepdims):
    # The gradient is shared equally among the elements that attain the extremum.
    if not keepdims:
        out = _shape.reshape(out, _keepdims_shape(x, axis))
        g = _shape.reshape(g, out.shape)
    mask = _ew.cast(_ew.equal(x, out), x.dtype)
    count = _sum.bind(mask, axis=axis, keepdims=True)
    return _ew.multiply(_ew.divide(g, count), mask)


def _extremum_jvp(t, out, x, axis, keepdims):
    # the tangents of the elements that attain the extremum, averaged (the VJP's sharing)
    weights = _extremum_vjp(_full_ones(out), out, x, axis, keepdims)
    return _sum.bind(_ew.multiply(t, weights), axis=axis, keepdims=keepdims)


def _full_ones(out):
    from .creation import ones_like
    return ones_like(out)


_max = Primitive("max", lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
                 abstract=_reduce_abstract("max"), vjp=[_extremum_vjp], jvp=[_extremum_jvp], save=(True, True),
                 examples=REDUCE_EXAMPLES, kind="reduction")
_min = Primitive("min", lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
                 abstract=_reduce_abstract("min"), vjp=[_extremum_vjp], jvp=[_extremum_jvp], save=(True, True),
                 examples=REDUCE_EXAMPLES, kind="reduction")


def _prod_impl(x, axis, keepdims):
    x = np.asarray(x)
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype if x.dtype.kind in "iub" else None)


def _prod_vjp(g, out, x, axis, keepdims):
    # d prod / d x_i is the product of the other elements; prod / x_i is that only where
    # no element is zero. Each x_j = a_j * b_j with a = x where x != 0 (else 1) and b = x
    # where x == 0 (else 1), so the product of the others is (A / a_i) * (b's others),
    # A = prod(a) (no zero: the division is safe). b's others are B = prod(b) for a nonzero
    # x_i, and for a zero x_i the product of the other zeros: 1 with no other zero, the
    # other zero itself (S - x_i, S the sum of the zeros) with one, 0 with more. Written
    # with the zeros' values in them, the rule's own derivatives (second derivatives) are
    # right too (third and higher are, but at points with three or more zeros).
    zero = _ew.equal(x, 0)
    a = _ew.where(zero, 1, x)
    b = _ew.where(zero, x, 1)
    A = _prod.bind(a, axis=axis, keepdims=True)
    B = _prod.bind(b, axis=axis, keepdims=True)
    count = _sum.bind(_ew.cast(zero, x.dtype), axis=axis, keepdims=True)
    S = _sum.bind(_ew.where(zero, x, 0), axis=axis, keepdims=True)
    other_zeros = _ew.where(_ew.equal(count, 1), 1,
                            _ew.where(_ew.equal(count, 2), _ew.subtract(S, x), 0))
    others = _ew.multiply(_ew.divide(A, a), _ew.where(zero, other_zeros, B))
    return _ew.multiply(expand_reduced(g, x, axis, keepdims), others)


def _prod_jvp(t, out, x, axis, keepdims):
    # sum of t_i times the product of the others (the VJP's, for a cotangent of ones)
    others = _prod_vjp(_full_ones(out), out, x, axis, keepdims)
    return _sum.bind(_ew.multiply(t, others), axis=axis, keepdims=keepdims)


_prod = Primitive("prod", _prod_impl, abstract=_reduce_abstract("prod"), vjp=[_prod_vjp], jvp=[_prod_jvp],
                  save=(True, True), examples=REDUCE_EXAMPLES, domain=(0.5, 1.5), kind="reduction")


def _ndim(x):
    return np.ndim(x) if not hasattr(x, "ndim") else x.ndim


def _counted(x):
    """Booleans as NumPy sums and multiplies them: int64 (kept as bool, a sum was a
    logical or: the sum of [True, True, False] was True, its mean 1/3)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = np.asarray(x).dtype
    return _ew.cast(x, np.int64) if np.dtype(dtype) == np.bool_ else x


@numpy_dispatch(np.sum)
def sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple, or None for all axes)."""
    return _sum.bind(_counted(x), axis=normalize_axes("sum", axis, _ndim(x)),
                     keepdims=bool(keepdims))


@numpy_dispatch(np.max, np.amax)
def max(x, axis=None, keepdims=False):
    return _max.bind(x, axis=normalize_axes("max", axis, _ndim(x)), keepdims=bool(keepdims))


@numpy_dispatch(np.min, np.amin)
def min(x, axis=None, keepdims=False):
    return _min.bind(x, axis=normalize_axes("min", axis, _ndim(x)), keepdims=bool(keepdims))


@numpy_dispatch(np.prod)
def prod(x, axis=None, keepdims=False):
    return _prod.bind(_counted(x), axis=normalize_axes("prod", axis, _ndim(x)),
                      keepdims=bool(keepdims))


def count(x, axis):
    """The number of elements a reduction over ``axis`` combines."""
    shape = np.shape(x) if not hasattr(x, "shape") else x.shape
    if not shape and isinstance(axis, (int, np.integer)):
        # NumPy's mean checks each axis against the rank before it counts: unlike its
        # sum, max, min and prod it rejects axis 0 and -1 on a 0-d value
        raise ShapeError(at_user_line(f"mean: axis {int(axis)} is out of bounds for rank 0"))
    n = 1
    for a in normalize_axes("mean", axis, len(shape)):
        n *= shape[a]
    return n


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 1, 4), axis=(0, 2), keepdims=True),
                     ex(())], numpy=(np.mean,))
def mean(x, axis=None, keepdims=False):
    """Arithmetic mean (NumPy's: integer inputs give float64)."""
    n = count(x, axis)
    return _ew.divide(sum(x, axis, keepdims), n)


@public
def reduce_mean(x, axis=None, keepdims=False):
    """TensorFlow's mean: like ``mean``, but integer inputs keep their dtype (floor division)."""
    if np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).kind in "iu":
        n = count(x, axis)
        return _ew.floor_divide(sum(x, axis, keepdims), n)
    return mean(x, axis, keepdims)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 3), axis=0, keepdims=True),
                     ex((4,), axis=-1), ex((2, 1, 3), axis=(0, 2))], domain=(-3.0, 3.0))
def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably (no overflow for large x)."""
    axis = normalize_axes("logsumexp", axis, _ndim(x))     # so a bad axis names logsumexp
    m = _ew.stop_gradient(max(x, axis, keepdims=True))
    m = _ew.where(_ew.isfinite(m), m, 0)
    s = sum(_ew.exp(_ew.subtract(x, m)), axis, keepdims=True)
    out = _ew.add(_ew.log(s), m)
    if not keepdims:
        out = _shape.reshape(out, _reduced_shape(out.shape, axis, False))
    return out


reduce_sum = sum
reduce_max = max
reduce_min = min
reduce_prod = prod
reduce_logsumexp = logsumexp


# -- lowerings ---------------------------------------------------------------------------
# Compiled code fuses a reduction into the loop over its input (passes/fuse.py):
# ``reduce`` gives the accumulator's start value for a dtype and its update.

def _lowest(dtype):
    return -np.inf if dtype.kind in "fc" else (False if dtype.kind == "b" else np.iinfo(dtype).min)


def _highest(dtype):
    return np.inf if dtype.kind in "fc" else (True if dtype.kind == "b" else np.iinfo(dtype).max)


_sum.lowerings["reduce"] = (lambda dtype: 0, "{acc} + {x}")
_prod.lowerings["reduce"] = (lambda dtype: 1, "{acc} * {x}")
_max.lowerings["reduce"] = (_lowest, "np.maximum({acc}, {x})")
_min.lowerings["reduce"] = (_highest, "np.minimum({acc}, {x})")


def _lower_scalar_reduction(ctx, node):
    # a reduction of a 0-d value (no axes) is the value itself
    return [f"{ctx.name(node.out)} = {ctx.name(node.inputs[0])}"]


def _lower_scalar_reduction_cuda(ctx, node):
    ctx.alias(node.out, node.inputs[0])
    return _lower_scalar_reduction(ctx, node)


for _prim in (_sum, _prod, _max, _min):
    _prim.lowerings["cpu"] = _lower_scalar_reduction
    _prim.lowerings["cuda"] = _lower_scalar_reduction_cuda
