"""Reductions over any set of axes, with ``keepdims``.

Integer sums and products keep their dtype (as in TensorFlow and JAX, where NumPy
would widen to int64); ``mean`` follows NumPy (integers give float64) while the
TensorFlow alias ``reduce_mean`` keeps an integer dtype, as TensorFlow does.
"""

import numpy as np

from .. import ir
from ..errors import ShapeError, UnsupportedError, at_user_line
from ..tensor import Tensor
from . import elementwise as _ew
from . import shape as _shape
from .core import (Aval, Primitive, composite, ex, normalize_axes, numpy_dispatch, pack, public,
                   shape_of)

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
    # that NumPy's pairwise summation keeps (complex64 in complex128 alike)
    return {np.dtype(np.float32): np.dtype(np.float64),
            np.dtype(np.complex64): np.dtype(np.complex128)}.get(np.dtype(dtype), np.dtype(dtype))


_sum = Primitive("sum", _sum_impl, abstract=_reduce_abstract("sum"), vjp=[
    lambda g, out, x, axis, keepdims: expand_reduced(g, x, axis, keepdims),
], jvp=[lambda t, out, x, axis, keepdims: _sum.bind(t, axis=axis, keepdims=keepdims)], save=(False, False), examples=REDUCE_EXAMPLES, kind="reduction", accumulate=_wide_float32,
                 complex=True)


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


# complex values: NumPy's lexicographic order (real parts, then imaginary parts); the
# element picked gets the cotangent, a selection whose rule is the same as for reals
_max = Primitive("max", lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
                 abstract=_reduce_abstract("max"), vjp=[_extremum_vjp], jvp=[_extremum_jvp], save=(True, True),
                 examples=REDUCE_EXAMPLES, kind="reduction", complex=True)
_min = Primitive("min", lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
                 abstract=_reduce_abstract("min"), vjp=[_extremum_vjp], jvp=[_extremum_jvp], save=(True, True),
                 examples=REDUCE_EXAMPLES, kind="reduction", complex=True)


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


# (holomorphic: a complex cotangent goes back through the conjugate of the rule)
_prod = Primitive("prod", _prod_impl, abstract=_reduce_abstract("prod"),
                  vjp=[_prod_vjp], jvp=[_prod_jvp], holomorphic=True,
                  save=(True, True), examples=REDUCE_EXAMPLES, domain=(0.5, 1.5), kind="reduction",
                  complex=True)


def _ndim(x):
    return np.ndim(x) if not hasattr(x, "ndim") else x.ndim


def _counted(x):
    """Booleans as NumPy sums and multiplies them: int64 (kept as bool, a sum was a
    logical or: the sum of [True, True, False] was True, its mean 1/3)."""
    if x.__class__ is Tensor:                     # (the eager tape's common case)
        return _ew.cast(x, np.int64) if x._value.dtype.kind == "b" else x
    x = pack(x)
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = np.asarray(x).dtype
    return _ew.cast(x, np.int64) if np.dtype(dtype) == np.bool_ else x


def _flag(keepdims):
    """``keepdims`` as a bool: None (TensorFlow's default) and NumPy's ``_NoValue`` (what
    NumPy's own Python functions pass on) are False."""
    return False if keepdims is None or keepdims is getattr(np, "_NoValue", None) \
        else bool(keepdims)


def _keywords(op, x, keepdims, dtype, out, where, identity):
    """``x`` ready for reduction ``op`` under NumPy's keywords: ``dtype`` (the input cast
    to it first, as NumPy accumulates in it), ``where`` (elements outside the mask
    replaced by ``identity``); ``out`` is refused (tensors are immutable)."""
    if dtype is None and out is None and where is None and keepdims.__class__ is bool:
        return pack(x) if x.__class__ in (list, tuple) else x   # (nothing to check or do)
    x = pack(x)
    if isinstance(keepdims, (type, np.dtype, str)):     # NumPy's dtype by position
        raise TypeError(at_user_line(
            f"{op}: keepdims must be a bool, got {keepdims!r} (jittape's {op} takes x, axis, "
            "keepdims by position: pass NumPy's dtype as dtype=...)"))
    if out is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: out= is not supported (tensors are immutable): use the result"))
    if dtype is not None:
        x = _ew.cast(x, np.dtype(dtype))
    if where is not None and where is not True:
        if identity is None:
            raise ValueError(at_user_line(
                f"{op}: where= needs initial= (a reduction of no elements has no value), "
                "as in NumPy"))
        x = _ew.where(where, x, identity)
    return x


@numpy_dispatch(np.sum)
def sum(x, axis=None, keepdims=False, *, dtype=None, out=None, initial=None, where=None):
    """Sum over ``axis`` (an int, a tuple, or None for all axes); NumPy's ``dtype``,
    ``initial`` and ``where``."""
    x = _keywords("sum", _counted(x), keepdims, dtype, out, where, 0)
    total = _sum.bind(x, axis=normalize_axes("sum", axis, _ndim(x)), keepdims=_flag(keepdims))
    return total if initial is None else _ew.add(total, initial)


@numpy_dispatch(np.max, np.amax)
def max(x, axis=None, keepdims=False, *, out=None, initial=None, where=None):
    x = _keywords("max", x, keepdims, None, out, where, initial)
    m = _max.bind(x, axis=normalize_axes("max", axis, _ndim(x)), keepdims=_flag(keepdims))
    return m if initial is None else _ew.maximum(m, initial)


@numpy_dispatch(np.min, np.amin)
def min(x, axis=None, keepdims=False, *, out=None, initial=None, where=None):
    x = _keywords("min", x, keepdims, None, out, where, initial)
    m = _min.bind(x, axis=normalize_axes("min", axis, _ndim(x)), keepdims=_flag(keepdims))
    return m if initial is None else _ew.minimum(m, initial)


@numpy_dispatch(np.prod)
def prod(x, axis=None, keepdims=False, *, dtype=None, out=None, initial=None, where=None):
    x = _keywords("prod", _counted(x), keepdims, dtype, out, where, 1)
    p = _prod.bind(x, axis=normalize_axes("prod", axis, _ndim(x)), keepdims=_flag(keepdims))
    return p if initial is None else _ew.multiply(p, initial)


def count(x, axis, op="mean"):
    """The number of elements a reduction over ``axis`` combines."""
    shape = np.shape(x) if not hasattr(x, "shape") else x.shape
    if not shape and isinstance(axis, (int, np.integer)):
        # NumPy's mean checks each axis against the rank before it counts: unlike its
        # sum, max, min and prod it rejects axis 0 and -1 on a 0-d value
        raise ShapeError(at_user_line(
            f"{op}: axis {int(axis)} is out of bounds for rank 0 (shape ())"))
    n = 1
    for a in normalize_axes(op, axis, len(shape)):
        n *= shape[a]
    return n


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 1, 4), axis=(0, 2), keepdims=True),
                     ex(())], numpy=(np.mean,))
def mean(x, axis=None, keepdims=False, *, dtype=None, out=None, where=None):
    """Arithmetic mean (NumPy's: integer inputs give float64); NumPy's ``dtype`` and
    ``where`` (the mean of the elements the mask selects)."""
    x = _keywords("mean", x, keepdims, dtype, out, None, None)
    if where is not None and where is not True:
        chosen = _shape.broadcast_to(_ew.cast(where, np.int64), shape_of(x))
        return _ew.divide(sum(x, axis, keepdims, where=where), sum(chosen, axis, keepdims))
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
def logsumexp(x, axis=None, keepdims=False, b=None, return_sign=False):
    """log(sum(exp(x))) computed stably (no overflow for large x); ``b``: weights,
    log(sum(b exp(x))) as SciPy's (non-negative: ``return_sign`` is not supported)."""
    if return_sign:
        raise UnsupportedError(at_user_line(
            "logsumexp: return_sign=True is not supported; give non-negative weights b"))
    axis = normalize_axes("logsumexp", axis, _ndim(x))     # so a bad axis names logsumexp
    m = _ew.stop_gradient(max(x, axis, keepdims=True))
    m = _ew.where(_ew.isfinite(m), m, 0)
    terms = _ew.exp(_ew.subtract(x, m))
    s = sum(terms if b is None else _ew.multiply(terms, b), axis, keepdims=True)
    out = _ew.add(_ew.log(s), m)
    if not keepdims:
        out = _shape.reshape(out, _reduced_shape(out.shape, axis, False))
    return out


# -- positions of extremes: argmax, argmin (no gradient) -----------------------------------

def _arg_extreme(op, extreme, x, axis, keepdims):
    """The first position along ``axis`` where ``x`` takes its ``extreme`` (a NaN's, as
    NumPy's): the least position among the hits, positions elsewhere past the end."""
    if axis is None:
        x, axis = _shape.reshape(x, (-1,)), 0
        if keepdims:
            raise UnsupportedError(at_user_line(f"{op}: keepdims=True needs an axis"))
    ndim = _ndim(x)
    (axis,) = normalize_axes(op, axis, ndim)
    _shape.exact_sizes()                      # (the positions are a constant of this size)
    n = int(x.shape[axis])
    positions = np.arange(n, dtype=np.int64).reshape(
        tuple(n if k == axis else 1 for k in range(ndim)))
    hit = _ew.logical_or(_ew.equal(x, extreme(x, axis, keepdims=True)), _ew.isnan(x))
    return min(_ew.where(hit, positions, n), axis, keepdims=keepdims)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 3), axis=0, keepdims=True)])
def argmax(a, axis=None, out=None, keepdims=False):
    """The position of the first maximum along ``axis`` (of the flattened ``a`` when
    None), as NumPy's; int64, without gradient."""
    _no_out("argmax", out)
    return _arg_extreme("argmax", max, a, axis, keepdims)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 3), axis=0, keepdims=True)])
def argmin(a, axis=None, out=None, keepdims=False):
    """The position of the first minimum along ``axis`` (NumPy's ``argmin``)."""
    _no_out("argmin", out)
    return _arg_extreme("argmin", min, a, axis, keepdims)


numpy_dispatch(np.argmax)(argmax)
numpy_dispatch(np.argmin)(argmin)


# -- statistics: compositions of sum, mean, max and min ----------------------------------

def _no_out(op, out):
    if out is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: out= is not supported (tensors are not written in place); use the "
            "returned value"))


def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return np.asarray(x).dtype if dtype is None else np.dtype(dtype)


def _statistic_input(x, dtype):
    """``x`` as NumPy's statistics compute with it: in ``dtype`` if given, integers and
    booleans as float64."""
    x = pack(x)
    if dtype is not None:
        x = _ew.cast(x, dtype)
    return _ew.cast(x, np.float64) if _dtype_of(x).kind in "iub" else x


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1, ddof=1),
                     ex((2, 1, 4), axis=(0, 2), keepdims=True)], numpy=(np.var,))
def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Variance: the squared deviations from the mean, summed over ``axis`` and divided
    by ``n - ddof`` (NumPy's var)."""
    _no_out("var", out)
    x = _statistic_input(x, dtype)
    axes = _shape.axes_of("var", axis, _shape._shape(x))
    n = count(x, axis, "var")
    d = _ew.subtract(x, mean(x, axes, keepdims=True))
    if not isinstance(ddof, (int, np.integer)):
        _shape.exact_sizes()            # a fractional divisor cannot follow the sizes
        n = int(n)
    # NumPy divides by max(n - ddof, 0): no degrees of freedom left gives inf or nan
    divisor = n - ddof if n - ddof > 0 else 0
    # complex: |d|^2, real (NumPy's d * conj(d), its real part)
    squares = _ew.real(_ew.multiply(d, _ew.conj_of(d))) if _ew.is_complex(d) else _ew.multiply(d, d)
    return _ew.divide(sum(squares, axes, keepdims), divisor)


@composite(examples=[ex((2, 3)), ex((3, 2), axis=-1, ddof=1, keepdims=True)],
           numpy=(np.std,))
def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Standard deviation: the square root of ``var`` (its gradient is infinite where
    all the elements are equal, as the square root's is at 0)."""
    _no_out("std", out)
    x = _statistic_input(x, dtype)
    _shape.axes_of("std", axis, _shape._shape(x))             # (a bad axis names std)
    n = count(x, axis, "std")
    v = var(x, axis, ddof=ddof, keepdims=keepdims)
    if isinstance(n, (int, np.integer)) and n == 1:
        # one element per result: the deviation is 0 whatever x, so the standard
        # deviation is constant, its derivative 0 (not sqrt's infinite slope at 0 times 0)
        v = _ew.stop_gradient(v)
    return _ew.sqrt(v)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1, keepdims=True)], numpy=(np.nansum,))
def nansum(x, axis=None, dtype=None, out=None, keepdims=False):
    """Sum with NaNs counted as zero (their gradient is zero)."""
    _no_out("nansum", out)
    if dtype is not None:
        x = _ew.cast(x, dtype)
    _shape.axes_of("nansum", axis, _shape._shape(x))
    if _dtype_of(x).kind in "fc":
        x = _ew.where(_ew.isnan(x), 0, x)
    return sum(x, axis, keepdims)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=0)], numpy=(np.nanmean,))
def nanmean(x, axis=None, dtype=None, out=None, keepdims=False):
    """Mean of the elements that are not NaN (NaN where all are; the NaNs' gradient is
    zero)."""
    _no_out("nanmean", out)
    if dtype is not None:
        x = _ew.cast(x, dtype)
    _shape.axes_of("nanmean", axis, _shape._shape(x))
    if _dtype_of(x).kind not in "fc":
        return mean(x, axis, keepdims)
    kept = _ew.logical_not(_ew.isnan(x))
    total = sum(_ew.where(kept, x, 0), axis, keepdims)
    return _ew.divide(total, sum(_ew.cast(kept, _dtype_of(x)), axis, keepdims))


@composite(examples=[ex((2, 3)), ex((2, 3), axis=0, keepdims=True)], numpy=(np.ptp,))
def ptp(x, axis=None, out=None, keepdims=False):
    """Range (peak to peak): ``max - min`` over ``axis``."""
    _no_out("ptp", out)
    axes = _shape.axes_of("ptp", axis, _shape._shape(x))
    return _ew.subtract(max(x, axes, keepdims), min(x, axes, keepdims))


def _average_call(a, weights=None, **params):
    return average(a, weights=weights, **params)


@composite(examples=[ex((2, 3)), ex((2, 3), (2, 3), axis=1, domain=((-2.0, 2.0), (0.5, 2.0))),
                     ex((2, 3), (3,), axis=-1, domain=((-2.0, 2.0), (0.5, 2.0))),
                     ex((2, 3), (2, 3), domain=((-2.0, 2.0), (0.5, 2.0)), keepdims=True)],
           numpy=(np.average,), call=_average_call)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Weighted mean: ``sum(a * weights) / sum(weights)`` over ``axis``; ``weights`` of
    ``a``'s shape, or 1-d along one ``axis``. With ``returned``, also the sum of the
    weights (broadcast to the result's shape)."""
    shape = np.shape(a) if not hasattr(a, "shape") else tuple(a.shape)
    axes = _shape.axes_of("average", axis, shape)
    n = count(a, axis, "average")
    if _dtype_of(a).kind in "iub":
        a = _ew.cast(a, np.result_type(_dtype_of(a), np.float64) if weights is None else
                     np.result_type(_dtype_of(a), _dtype_of(weights), np.float64))
    if weights is None:
        avg = mean(a, axes, keepdims)
        if not returned:
            return avg
        return avg, _shape.broadcast_to(_ew.cast(n, avg.dtype), avg.shape)
    wshape = np.shape(weights) if not hasattr(weights, "shape") else tuple(weights.shape)
    if wshape != shape:
        if axis is None:
            raise TypeError(at_user_line(
                f"average: axis must be specified when shapes of a and weights differ "
                f"({shape} and {wshape})"))
        if len(wshape) != 1 or len(axes) != 1:
            raise TypeError(at_user_line(
                f"average: 1D weights expected when shapes of a and weights differ "
                f"({shape} and {wshape}, axis {axis})"))
        if wshape[0] != shape[axes[0]]:
            raise ShapeError(at_user_line(
                f"average: Length of weights not compatible with specified axis "
                f"({shape} and {wshape}, axis {axis})"))
        spread = [1] * len(shape)
        spread[axes[0]] = wshape[0]
        weights = _shape.broadcast_to(_shape.reshape(weights, tuple(spread)), shape)
    total = sum(_ew.multiply(a, weights), axes, keepdims)
    scale = sum(weights, axes, keepdims)
    if _dtype_of(scale) != _dtype_of(total):
        scale = _ew.cast(scale, _dtype_of(total))
    avg = _ew.divide(total, scale)
    if not returned:
        return avg
    return avg, _shape.broadcast_to(scale, avg.shape)


# -- cumulative sums and products: primitives along one axis ----------------------------
# A composite (a sum of masked copies, a product of shifted ones) would be quadratic in
# the axis's length; the primitive is one pass, and its VJP a pass the other way.

def _cumulative_abstract(name):
    def abstract(x, axis, reverse=False):
        shape = shape_of(x)
        if not 0 <= axis < len(shape):
            raise ShapeError(at_user_line(
                f"{name}: axis {axis} is out of bounds for rank {len(shape)}"))
        return Aval(shape, x.dtype)
    return abstract


def _cumsum_impl(x, axis, reverse=False):
    x = np.asarray(x)
    if reverse:
        return np.ascontiguousarray(np.flip(np.cumsum(np.flip(x, axis), axis, x.dtype), axis))
    return np.cumsum(x, axis, x.dtype)


_cumsum = Primitive(
    "cumsum", _cumsum_impl, abstract=_cumulative_abstract("cumsum"),
    vjp=[lambda g, out, x, axis, reverse=False: _cumsum.bind(g, axis=axis, reverse=not reverse)],
    jvp=[lambda t, out, x, axis, reverse=False: _cumsum.bind(t, axis=axis, reverse=reverse)],
    save=(False, False), public=False,
    examples=[ex((4,), axis=0), ex((2, 3), axis=1), ex((2, 3, 2), axis=0)])


def _before_first_zero(x, axis):
    """Along ``axis``: where no zero has come yet (``before``), the first zero
    (``first``), the nonzeros between it and the next zero (``between``), ``x`` with ones
    from the first zero on (``head``), and ``x`` with ones up to and including it
    (``tail``)."""
    zero = _ew.equal(x, 0)
    seen = _cumsum.bind(_ew.cast(zero, x.dtype), axis=axis)   # (counts: exact in floats)
    before = _ew.equal(seen, 0)
    one = _ew.equal(seen, 1)
    first = _ew.logical_and(zero, one)
    between = _ew.logical_and(_ew.logical_not(zero), one)
    head = _ew.where(before, x, 1)
    tail = _ew.where(_ew.logical_or(before, first), 1, x)
    return before, first, between, head, tail


def _cumprod_vjp(g, out, x, axis):
    # d out_i / d x_k is the product of x_j, j <= i, j != k. Before the first zero of the
    # axis it is out_i / x_k: the reversed cumulative sum of g * out, over x. At the first
    # zero k0 it is prod(x_j, j < k0) * prod(x_j, k0 < j <= i): the prefix before the zero
    # times a cumulative product that starts after it. Past k0 every such product holds
    # x_k0 = 0: kept as a factor up to the next zero (so that the rule's own derivatives,
    # second derivatives, are right where an axis holds at most one zero), zero from the
    # second zero on (its derivatives too, two zero factors). Exact with zeros (PyTorch's
    # first-order rule), one pass each way.
    before, first, between, head, tail = _before_first_zero(x, axis)
    nonzero = _ew.divide(_cumsum.bind(_ew.multiply(g, out), axis=axis, reverse=True), head)
    after = _cumsum.bind(_ew.multiply(g, _cumprod.bind(tail, axis=axis)), axis=axis,
                         reverse=True)
    at_first = _ew.multiply(_cumprod.bind(head, axis=axis), after)
    # prod(x_j, j <= k0) for k past k0: the zero itself, a factor to differentiate
    through_zero = _cumprod.bind(_ew.where(_ew.logical_or(before, first), x, 1), axis=axis)
    past = _ew.divide(_ew.multiply(through_zero, after), _ew.where(between, x, 1))
    return _ew.where(before, nonzero, _ew.where(first, at_first,
                                                _ew.where(between, past, 0)))


def _cumprod_jvp(t, out, x, axis):
    # out_i times the sum of t_k / x_k before the first zero; from it on, only the first
    # zero's term: t_k0 * prod(x_j, j < k0) * prod(x_j, k0 < j <= i)
    before, first, _, head, tail = _before_first_zero(x, axis)
    nonzero = _ew.multiply(out, _cumsum.bind(_ew.divide(_ew.where(before, t, 0), head),
                                             axis=axis))
    lead = _ew.where(first, _ew.multiply(t, _cumprod.bind(head, axis=axis)), 0)
    at_zero = _ew.multiply(_cumsum.bind(lead, axis=axis), _cumprod.bind(tail, axis=axis))
    return _ew.where(before, nonzero, at_zero)


_cumprod = Primitive(
    "cumprod", lambda x, axis: np.cumprod(x, axis, np.asarray(x).dtype),
    abstract=_cumulative_abstract("cumprod"), vjp=[_cumprod_vjp], jvp=[_cumprod_jvp],
    save=(True, True), public=False, domain=(-1.5, 1.5),
    examples=[ex((4,), axis=0), ex((3, 2), axis=0)])


def _cumulative(op, prim, x, axis, dtype, out):
    _no_out(op, out)
    if dtype is not None:
        x = _ew.cast(x, dtype)
    source = _dtype_of(x)
    if source.kind in "iub":         # NumPy's: small integers and booleans add up in int64
        wide = np.cumsum(np.zeros(1, source)).dtype
        if wide != source:
            x = _ew.cast(x, wide)
    if axis is None:
        x = _shape.reshape(x, (-1,))
        axis = 0
    elif _ndim(x) == 0:              # a 0-d value along axis 0 or -1: NumPy's shape (1,)
        x = _shape.reshape(x, (1,))
    axis = _shape.axis_index(op, axis, _shape._shape(x))
    return prim.bind(x, axis=axis)


@numpy_dispatch(np.cumsum)
def cumsum(x, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (of the flattened ``x`` if None)."""
    return _cumulative("cumsum", _cumsum, x, axis, dtype, out)


@numpy_dispatch(np.cumprod)
def cumprod(x, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis`` (of the flattened ``x`` if None). Its gradient is
    exact where ``x`` holds zeros; its second derivatives where an axis holds at most one
    zero (forward mode: first order exact)."""
    return _cumulative("cumprod", _cumprod, x, axis, dtype, out)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 3), axis=0, keepdims=True)])
def reduce_all(a, axis=None, out=None, keepdims=False):
    """Whether every element along ``axis`` is true (non-zero): NumPy's ``all``,
    TensorFlow's ``reduce_all``; a bool tensor."""
    _no_out("all", out)
    return _ew.equal(min(_ew.cast(_ew.not_equal(a, 0), np.int8), axis, keepdims), 1)


@composite(examples=[ex((2, 3)), ex((2, 3), axis=1), ex((2, 3), axis=0, keepdims=True)])
def reduce_any(a, axis=None, out=None, keepdims=False):
    """Whether any element along ``axis`` is true (non-zero): NumPy's ``any``."""
    _no_out("any", out)
    return _ew.equal(max(_ew.cast(_ew.not_equal(a, 0), np.int8), axis, keepdims), 1)


numpy_dispatch(np.all)(reduce_all)
numpy_dispatch(np.any)(reduce_any)


@composite(examples=[ex((2, 3), (2, 3)), ex((3,), (2, 3))], numpy=(np.allclose,))
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """NumPy's ``allclose``: whether ``isclose`` holds everywhere (a bool tensor)."""
    return reduce_all(_ew.isclose(a, b, rtol, atol, equal_nan))

reduce_sum = sum
reduce_max = max
reduce_min = min
reduce_prod = prod
reduce_logsumexp = logsumexp


# -- lowerings ---------------------------------------------------------------------------
# Compiled code fuses a reduction into the loop over its input (passes/fuse.py):
# ``reduce`` gives the accumulator's start value for a dtype and its update.

def _lowest(dtype):
    # complex: -inf - inf j, below every complex number in NumPy's lexicographic order
    # (-inf + 0j is above -inf - 1j)
    if dtype.kind == "c":
        return complex(-np.inf, -np.inf)
    return -np.inf if dtype.kind == "f" else (False if dtype.kind == "b" else np.iinfo(dtype).min)


def _highest(dtype):
    if dtype.kind == "c":
        return complex(np.inf, np.inf)
    return np.inf if dtype.kind == "f" else (True if dtype.kind == "b" else np.iinfo(dtype).max)


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


def _cumulative_lowering(backend, init, step):
    """A loop along the axis per line of the other axes, an accumulator carried in the
    result's dtype (NumPy's cumsum of float32 adds in float32, in order); the VJP's
    reversed sum runs the loop backwards. CUDA: one thread per line."""
    def lower(ctx, node):
        x, out = node.inputs[0], node.out
        o, xn = ctx.name(out), ctx.name(x)
        axis = node.params["axis"]
        outer = [a for a in range(x.ndim) if a != axis]
        r = "r0" if backend == "cuda" else ctx.tmp("r")
        index = ", ".join(f"i{outer.index(a)}" if a != axis else r for a in range(x.ndim))
        size = f"{xn}.shape[{axis}]"
        along = f"range({size} - 1, -1, -1)" if node.params.get("reverse") else f"range({size})"
        acc = "acc" if backend == "cuda" else ctx.tmp("acc")
        body = [f"{acc} = {ctx.dtype(out.dtype)}({init})",
                f"for {r} in {along}:",
                f"    {acc} = {step.format(acc=acc, x=f'{xn}[{index}]')}",
                f"    {o}[{index}] = {acc}"]
        if backend == "cuda":
            return [ctx.buffer(out)] + ctx.per_element([f"{xn}.shape[{a}]" for a in outer],
                                                       body, node)
        lines = ctx.new(out)
        loops, pad = _shape._loops([f"{xn}.shape[{a}]" for a in outer])
        return lines + loops + [pad + line for line in body]
    return lower


for _prim, _init, _step in ((_cumsum, 0, "{acc} + {x}"), (_cumprod, 1, "{acc} * {x}")):
    _prim.lowerings["cpu"] = _cumulative_lowering("cpu", _init, _step)
    _prim.lowerings["cuda"] = _cumulative_lowering("cuda", _init, _step)
