"""Sorting and order statistics: ``sort``, ``argsort``, ``searchsorted``, ``partition``,
``argpartition``, ``median``, ``quantile``, ``percentile``, ``nanmedian``,
``nanquantile`` and ``nanpercentile``.

Three primitives do the work, each along one axis:

- ``argsort``: the positions that sort each line, NumPy's stable order (``kind='stable'``,
  a merge sort: equal elements keep their order) whatever ``kind`` says, NaN last;
  int64, without gradient;
- ``gather_along``: ``x`` read at positions along an axis (``take_along_axis`` of an
  index array that has the other axes' sizes), and ``scatter_along``, its transpose,
  which adds each element at its position into zeros. Each is the other's VJP (and
  its own JVP: both are linear), so gradients through a sort differentiate again;
- ``searchsorted``: where each of ``v`` goes in a sorted 1-D ``a`` (a binary search,
  NaN after every number as NumPy sorts it); int64, without gradient.

``sort`` is ``gather_along(a, argsort(a))``: its gradient scatters the cotangent back
through the permutation, and follows the returned order, so tied elements get the
cotangents of the places the stable order gives them (JAX's rule). ``partition`` and
``argpartition`` return the full sort (a valid partition for every ``kth``: NumPy leaves
the order within the parts unspecified, and this one is the sorted one); their
gradient is the sort's.

``median``, ``quantile`` and ``percentile`` are compositions: the sorted lines read at
positions that follow from the axis's length (the graph is keyed on the exact sizes,
as for ``take_along_axis``) and NumPy's interpolation of the two neighbours, so their
gradients reach the one or two elements each result reads (``median`` of an even count:
half to each middle element). A line holding NaN gives NaN, as NumPy. ``nanmedian``,
``nanquantile`` and ``nanpercentile`` count each line's numbers at run time and read the
sorted line (NaNs last) at positions computed from that count.

Compiled on the CPU, ``argsort`` is a merge sort per line written as loops (stable, NaN
last: NumPy's order; Numba's own stable ``np.argsort`` costs seconds of compile in each
kernel). On CUDA each line is one thread's insertion sort: stable, but quadratic in the
axis's length (for the short axes of statistics).
"""

import math
import warnings

import numpy as np

from ..errors import ShapeError, UnsupportedError, at_user_line
from ..tensor import Tensor
from . import elementwise as _ew
from . import reduce as _rd
from . import shape as _sh
from .core import Aval, Fixed, Primitive, composite, ex, numpy_dispatch, shape_of
from .indexing import take


# -- primitives ----------------------------------------------------------------------------

def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return np.asarray(x).dtype if dtype is None else np.dtype(dtype)


def _argsort_abstract(x, axis):
    shape = shape_of(x)
    _sh.axis_index("argsort", axis, shape)
    return Aval(shape, np.int64)


_argsort = Primitive(
    "argsort", lambda x, axis: np.argsort(x, axis=axis, kind="stable"),
    abstract=_argsort_abstract, differentiable=False,
    examples=[ex((5,), axis=0), ex((2, 4), axis=1), ex((3, 2), axis=0), ex((2, 3, 2), axis=1)],
    kind="opaque", public=False)


def _check_along(op, x, idx, axis):
    """``idx`` indexes ``x`` along ``axis``: an integer array of ``x``'s rank whose other
    axes have ``x``'s sizes (made by this module's ops, never by a user)."""
    sx, si = shape_of(x), shape_of(idx)
    if (len(sx) != len(si) or not 0 <= axis < len(sx) or _dtype_of(idx).kind not in "iu"
            or any(int(a) != int(b) for k, (a, b) in enumerate(zip(sx, si)) if k != axis)):
        raise ShapeError(at_user_line(
            f"{op}: positions of shape {tuple(si)} ({_dtype_of(idx)}) do not index shape "
            f"{tuple(sx)} along axis {axis}"))


def _gather_abstract(x, idx, axis):
    _check_along("gather_along", x, idx, axis)
    return Aval(shape_of(idx), x.dtype)


def _gather_impl(x, idx, axis):
    return np.take_along_axis(np.asarray(x), idx, axis)


def _scatter_abstract(g, idx, axis, size):
    _check_along("scatter_along", g, idx, axis)
    shape = list(shape_of(g))
    shape[axis] = size
    return Aval(shape, g.dtype)


def _scatter_impl(g, idx, axis, size):
    g = np.asarray(g)
    shape = list(g.shape)
    shape[axis] = size
    out = np.zeros(shape, g.dtype)
    # the other axes' positions, broadcast against idx: every element once
    index = tuple(idx if k == axis else
                  np.arange(g.shape[k]).reshape([-1 if j == k else 1 for j in range(g.ndim)])
                  for k in range(g.ndim))
    np.add.at(out, index, g)
    return out


_gather = Primitive(
    "gather_along", _gather_impl, abstract=_gather_abstract,
    vjp=[lambda g, out, x, idx, axis: _scatter.bind(g, idx, axis=axis, size=x.shape[axis]),
         None],
    jvp=[lambda t, out, x, idx, axis: _gather.bind(t, idx, axis=axis), None],
    save=((False,), False),
    examples=[ex((4,), Fixed(np.array([2, 0, 3, 1])), axis=0),
              ex((2, 3), Fixed(np.array([[2, 0, 1], [1, 1, 0]])), axis=1),
              ex((3, 2), Fixed(np.array([[2, 0]])), axis=0)],
    kind="opaque", public=False)

_scatter = Primitive(
    "scatter_along", _scatter_impl, abstract=_scatter_abstract,
    vjp=[lambda g, out, ct, idx, axis, size: _gather.bind(g, idx, axis=axis), None],
    jvp=[lambda t, out, ct, idx, axis, size: _scatter.bind(t, idx, axis=axis, size=size),
         None],
    save=((False,), False),
    examples=[ex((4,), Fixed(np.array([2, 0, 3, 1])), axis=0, size=4),
              ex((2, 3), Fixed(np.array([[2, 0, 1], [1, 1, 0]])), axis=1, size=3),
              ex((1, 2), Fixed(np.array([[2, 0]])), axis=0, size=3)],
    kind="opaque", public=False)


def _searchsorted_abstract(a, v, side):
    sa, sv = shape_of(a), shape_of(v)
    if len(sa) != 1 or len(sv) == 0:
        raise ShapeError(at_user_line(
            f"searchsorted: a must be 1-D (and v at least 1-D here), got a of shape "
            f"{tuple(sa)} and v of shape {tuple(sv)}"))
    return Aval(sv, np.int64)


_searchsorted = Primitive(
    "searchsorted", lambda a, v, side: np.searchsorted(a, v, side=side),
    abstract=_searchsorted_abstract, differentiable=False,
    examples=[ex(Fixed(np.array([-1.0, 0.0, 0.0, 0.5, 1.5])), (4,), side="left"),
              ex(Fixed(np.array([-1.0, 0.0, 0.0, 0.5, 1.5])), (2, 3), side="right")],
    kind="opaque", public=False)


# -- sort, argsort, partition, searchsorted -------------------------------------------------

def _no_order(op, order, a):
    if order is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: order= (fields of a structured array) is not supported: tensors hold "
            f"numbers (shape {_sh._shape(a)})"))


def _sort_input(op, a, axis):
    """(``a``, the axis) for a sort along ``axis``: None sorts the flattened ``a``."""
    if axis is None:
        return _sh.reshape(a, (-1,)), 0
    shape = _sh._shape(a)
    return a, _sh.axis_index(op, axis, shape)


def _argsort_of(a, axis):
    # (booleans sort as their bytes: the same order)
    keys = _ew.cast(a, np.uint8) if _dtype_of(a) == np.bool_ else a
    return _argsort.bind(keys, axis=axis)


@composite(examples=[ex((5,)), ex((2, 4), axis=0), ex((2, 3, 2), axis=1), ex((2, 3), axis=None)],
           numpy=(np.sort,))
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's ``np.sort``: ``a`` sorted along ``axis`` (the flattened ``a`` if None), NaN
    last; a new tensor (there is no in-place ``Tensor.sort``). The gradient goes back
    through the permutation of the stable order (``argsort``): a tie's elements get the
    cotangents of the places that order gives them."""
    _no_order("sort", order, a)
    a, axis = _sort_input("sort", a, axis)
    return _gather.bind(a, _argsort_of(a, axis), axis=axis)


@numpy_dispatch(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's ``np.argsort``: the int64 positions that sort ``a`` along ``axis`` (of the
    flattened ``a`` if None), always in the stable order (equal elements keep their
    order: NumPy's ``kind='stable'``, whatever ``kind`` says), NaN last. No gradient."""
    _no_order("argsort", order, a)
    a, axis = _sort_input("argsort", a, axis)
    return _argsort_of(a, axis)


def _kth(op, kth, a, axis):
    """Check ``kth`` (an int or a sequence of ints) against the axis's length, as NumPy
    (a compiled function keyed on the sizes, so that each call's is checked)."""
    _sh.exact_sizes()
    n = int(_sh._shape(a)[axis])
    for k in np.atleast_1d(np.asarray(kth)).ravel():
        if np.asarray(k).dtype.kind not in "iu":
            raise TypeError(at_user_line(
                f"{op}: kth must be integers, got {kth!r} (shape {_sh._shape(a)})"))
        if not -n <= int(k) < n:
            raise ShapeError(at_user_line(
                f"{op}: kth(={int(k)}) out of bounds ({n}) for shape "
                f"{tuple(int(d) for d in _sh._shape(a))}"))


@composite(examples=[ex((5,), kth=2), ex((4, 2), kth=(0, 3), axis=0)], numpy=(np.partition,))
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's ``np.partition``: here the full sort along ``axis`` (every ``kth`` element
    is in its sorted place, smaller ones before it, larger after: a valid partition,
    the parts in sorted order). Its gradient is ``sort``'s."""
    _no_order("partition", order, a)
    a, axis = _sort_input("partition", a, axis)
    _kth("partition", kth, a, axis)
    return sort(a, axis)


@composite(examples=[ex((5,), kth=2), ex((4, 2), kth=-1, axis=0)], numpy=(np.argpartition,))
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's ``np.argpartition``: here ``argsort``'s stable positions (a valid
    partition for every ``kth``). int64, no gradient."""
    _no_order("argpartition", order, a)
    a, axis = _sort_input("argpartition", a, axis)
    _kth("argpartition", kth, a, axis)
    return _argsort_of(a, axis)


@numpy_dispatch(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """NumPy's ``np.searchsorted``: for each of ``v``, the position in the sorted 1-D ``a``
    where it would go (``side='left'``: before the equal elements, ``'right'``: after
    them; NaN after every number). ``sorter``: the positions that sort ``a``
    (``argsort(a)``). int64 of ``v``'s shape, no gradient."""
    if side not in ("left", "right"):
        raise ValueError(at_user_line(
            f"searchsorted: side must be 'left' or 'right', got {side!r} (a: "
            f"{_sh._shape(a)}, v: {_sh._shape(v)})"))
    if len(_sh._shape(a)) != 1:
        raise ShapeError(at_user_line(
            f"searchsorted: a must be 1-D, got shape {_sh._shape(a)} (v: {_sh._shape(v)})"))
    if sorter is not None:
        a = take(a, sorter)
    if not isinstance(v, Tensor):
        v = np.asarray(v)
    if len(_sh._shape(v)) == 0:           # one value: the primitive takes at least one axis
        return _sh.reshape(_searchsorted.bind(a, _sh.reshape(v, (1,)), side=side), ())
    return _searchsorted.bind(a, v, side=side)


# -- order statistics ------------------------------------------------------------------------

def _lines(op, a, axis):
    """``a`` with the axes of ``axis`` (None: all) moved last and merged into one:
    (lines, the shape of the other axes, the shape keepdims gives, the lines' length)."""
    shape = _sh._shape(a)
    ndim = len(shape)
    axes = _sh.axes_of(op, axis, shape)
    if axis is not None:
        _rd.count(a, axis, op)            # (NumPy's: no int axis on a 0-d value)
    _sh.exact_sizes()                     # (the positions read follow from the sizes)
    sizes = [int(d) for d in shape]
    rest = [k for k in range(ndim) if k not in axes]
    order = rest + list(axes)
    if order != list(range(ndim)):
        a = _sh.transpose(a, tuple(order))
    rest_shape = tuple(sizes[k] for k in rest)
    n = math.prod(sizes[k] for k in axes)
    if len(axes) != 1 or ndim == 0:
        a = _sh.reshape(a, rest_shape + (n,))
    keep = tuple(1 if k in axes else sizes[k] for k in range(ndim))
    return a, rest_shape, keep, n


def _no_out(op, out):
    if out is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: out= is not supported (tensors are not written in place); use the "
            "returned value"))


def _result_dtype(op, probe, a, *args, **kwargs):
    """The dtype NumPy's ``probe`` gives for ``a``'s dtype (and these arguments)."""
    dtype = _dtype_of(a)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(probe(np.zeros(1, dtype), *args, **kwargs)).dtype
    except TypeError as err:
        raise TypeError(at_user_line(
            f"{op}: unsupported dtype {dtype} (shape {_sh._shape(a)}): {err}")) from None


def _nan_lines(s, result, rest_shape, extra):
    """``result`` (shape ``rest_shape`` + ``extra`` axes) NaN where a sorted line of
    ``s`` ends in NaN (holds one), as NumPy's statistics give."""
    if _dtype_of(s).kind != "f":
        return result
    last = take(s, -1, axis=len(rest_shape))
    has_nan = _sh.reshape(_ew.isnan(last), rest_shape + (1,) * extra)
    return _ew.where(has_nan, np.array(np.nan, _dtype_of(result)), result)


def _finish(result, rest_shape, keep, q_shape, keepdims):
    """Results of shape ``rest_shape + q_shape`` as NumPy gives them: ``q``'s axes first,
    then the kept axes (``keep`` with keepdims)."""
    nr, nq = len(rest_shape), len(q_shape)
    if nq and nr:
        result = _sh.transpose(result, tuple(range(nr, nr + nq)) + tuple(range(nr)))
    if keepdims:
        result = _sh.reshape(result, tuple(q_shape) + keep)
    return result


@composite(examples=[ex((5,)), ex((2, 4), axis=1), ex((3, 2, 2), axis=(0, 2), keepdims=True),
                     ex((4, 3), axis=0)], numpy=(np.median,))
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's ``np.median`` along ``axis`` (an int, a tuple, or None for all): the middle
    element of each sorted line, the mean of the two middle ones for an even length
    (each gets half the gradient); NaN where a line holds NaN; float64 for integers."""
    _no_out("median", out)
    dtype = _result_dtype("median", np.median, a)
    x, rest, keep, n = _lines("median", a, axis)
    if _dtype_of(x) != dtype:
        x = _ew.cast(x, dtype)
    if n == 0:                  # NumPy's: the mean of nothing, NaN (with its warning)
        return _finish(_rd.mean(x, axis=-1), rest, keep, (), keepdims)
    s = sort(x, axis=-1)
    axis_s = len(rest)
    lo, hi = (n - 1) // 2, n // 2
    result = take(s, lo, axis=axis_s)
    if hi != lo:
        result = _ew.divide(_ew.add(result, take(s, hi, axis=axis_s)), 2)
    return _finish(_nan_lines(s, result, rest, 0), rest, keep, (), keepdims)


# NumPy's methods whose positions do not depend on the values: (alpha, beta) of the
# virtual position n q + alpha + q (1 - alpha - beta) - 1 (Hyndman and Fan), or a rule
_CONTINUOUS = {"linear": None, "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
               "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0),
               "interpolated_inverted_cdf": (0.0, 1.0)}
_DISCRETE = ("lower", "higher", "nearest", "midpoint")


def _q_value(op, q):
    """``q`` as a NumPy value: numbers, or a tensor whose value is known now (the positions
    read follow from it; it gets no gradient)."""
    if isinstance(q, Tensor):
        if q._value is None:
            raise UnsupportedError(at_user_line(
                f"{op}: q must be known when the function is traced (numbers or a NumPy "
                f"array), got a traced tensor of shape {q.shape}; pass it as a constant "
                "(it gets no gradient)"))
        q = q._value
    return q


def _quantiles(op, q, scale):
    """``q`` over ``scale`` as a float64 array, each in [0, 1] (NumPy's check)."""
    qs = np.asarray(q, np.float64) / scale
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError(at_user_line(
            f"{op}: Quantiles must be in the range [0, {int(scale)}], got {q!r}"))
    return qs


def _positions(method, n, q):
    """(previous, next, weight of next) positions along a line of length n for the
    quantiles q (float64 arrays), NumPy's rule for ``method``."""
    if method == "linear":
        virtual = (n - 1) * q
    elif method in _CONTINUOUS:
        alpha, beta = _CONTINUOUS[method]
        virtual = n * q + (alpha + q * (1 - alpha - beta)) - 1
    elif method == "lower":
        virtual = np.floor((n - 1) * q)
    elif method == "higher":
        virtual = np.ceil((n - 1) * q)
    elif method == "nearest":
        virtual = np.around((n - 1) * q)
    else:                                            # midpoint
        virtual = 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))
    lo = np.clip(np.floor(virtual), 0, n - 1)
    hi = np.clip(lo + 1, 0, n - 1)
    gamma = np.where(virtual >= n - 1, 0.0, np.clip(virtual - lo, 0.0, 1.0))
    if method == "midpoint":
        gamma = np.where(virtual % 1 == 0, 0.0, 0.5)
    return lo.astype(np.int64), hi.astype(np.int64), gamma


def _lerp(a, b, t, dtype):
    """NumPy's interpolation ``a + (b - a) t``, taken from ``b``'s side for t >= 1/2 (so
    that t = 1 gives ``b`` exactly); ``t`` constant."""
    t = np.asarray(t, np.float64)
    rest = (1 - t).astype(dtype)              # (in float64 first, as NumPy's weak scalar)
    d = _ew.subtract(b, a)
    up = t >= 0.5
    if not up.any():
        return _ew.add(a, _ew.multiply(d, t.astype(dtype)))
    if up.all():
        return _ew.subtract(b, _ew.multiply(d, rest))
    return _ew.where(up, _ew.subtract(b, _ew.multiply(d, rest)),
                     _ew.add(a, _ew.multiply(d, t.astype(dtype))))


def _check_method(op, a, method, interpolation, weights):
    if interpolation is not None:
        method = interpolation          # NumPy's old name of the argument
    if weights is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: weights= is not supported (shape {_sh._shape(a)}); use the methods "
            "without weights"))
    if method not in _CONTINUOUS and method not in _DISCRETE:
        raise UnsupportedError(at_user_line(
            f"{op}: method={method!r} is not supported (shape {_sh._shape(a)}): its positions "
            f"jump with the data; supported: {', '.join(list(_CONTINUOUS) + list(_DISCRETE))}"))
    return method


def _quantile(op, probe, a, q, scale, axis, method, keepdims, interpolation, weights):
    method = _check_method(op, a, method, interpolation, weights)
    q_given = _q_value(op, q)
    qs = _quantiles(op, q_given, scale)
    dtype = _result_dtype(op, probe, a, q_given, method=method)
    x, rest, keep, n = _lines(op, a, axis)
    if n == 0:
        raise IndexError(at_user_line(
            f"{op}: no element to take a quantile of (shape {_sh._shape(a)}, axis {axis})"))
    if _dtype_of(x) != dtype:
        x = _ew.cast(x, dtype)
    s = sort(x, axis=-1)
    lo, hi, gamma = _positions(method, n, qs)
    axis_s = len(rest)
    below = take(s, lo if lo.ndim else int(lo), axis=axis_s)
    if np.all(gamma == 0):
        result = below
    else:
        above = take(s, hi if hi.ndim else int(hi), axis=axis_s)
        result = _lerp(below, above, gamma, dtype)
    result = _nan_lines(s, result, rest, qs.ndim)
    return _finish(result, rest, keep, qs.shape, keepdims)


def _F32(q):
    # (examples: float32 levels, so that float32 data stays float32 as NumPy keeps it; a
    # float64 array of levels gives float64, as NumPy's)
    return np.array(q, np.float32)


def _quantile_call(a, **params):
    return quantile(a, **params)


@composite(examples=[ex((5,), q=0.3), ex((2, 5), q=_F32([0.1, 0.5, 1.0]), axis=1),
                     ex((3, 4), q=0.75, axis=0, keepdims=True),
                     ex((2, 3, 2), q=_F32([[0.2], [0.9]]), axis=(0, 2), method="midpoint"),
                     ex((6,), q=0.45, method="hazen")],
           numpy=(np.quantile,), call=_quantile_call)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """NumPy's ``np.quantile``: the ``q``-th quantiles (numbers in [0, 1], known when
    traced) along ``axis``, ``q``'s axes first; ``method`` one whose positions do not
    depend on the values ('linear', 'lower', 'higher', 'nearest', 'midpoint', 'hazen',
    'weibull', 'median_unbiased', 'normal_unbiased', 'interpolated_inverted_cdf'). The
    gradient reaches the one or two elements each quantile interpolates."""
    _no_out("quantile", out)
    return _quantile("quantile", np.quantile, a, q, 1.0, axis, method, keepdims,
                     interpolation, weights)


def _percentile_call(a, **params):
    return percentile(a, **params)


@composite(examples=[ex((5,), q=30.0), ex((2, 4), q=_F32([10.0, 50.0]), axis=0, method="nearest")],
           numpy=(np.percentile,), call=_percentile_call)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    """NumPy's ``np.percentile``: ``quantile`` of ``q / 100`` (``q`` in [0, 100])."""
    _no_out("percentile", out)
    return _quantile("percentile", np.percentile, a, q, 100.0, axis, method, keepdims,
                     interpolation, weights)


# -- the NaN-ignoring statistics: positions from each line's count of numbers ---------------

def _nan_statistic(op, a, axis, keepdims, qs, method, dtype):
    """The statistic of each line's numbers (NaNs left out): the sorted line (NaNs last)
    read at positions computed at run time from its count of numbers. ``qs``: the
    quantiles (float64 array), None for the median."""
    x, rest, keep, n = _lines(op, a, axis)
    if _dtype_of(x) != dtype:
        x = _ew.cast(x, dtype)
    last = len(rest)
    if n == 0:
        return _finish(_rd.mean(x, axis=-1) if qs is None else
                       _sh.broadcast_to(np.array(np.nan, dtype), rest + qs.shape),
                       rest, keep, () if qs is None else qs.shape, keepdims)
    s = sort(x, axis=last)
    count = _rd.sum(_ew.logical_not(_ew.isnan(x)), axis=last, keepdims=True)    # int64
    if qs is None:
        lo = _ew.maximum(_ew.floor_divide(_ew.subtract(count, 1), 2), 0)
        hi = _ew.minimum(_ew.floor_divide(count, 2), n - 1)
        result = _ew.divide(_ew.add(_gather.bind(s, lo, axis=last),
                                    _gather.bind(s, hi, axis=last)), 2)
        return _finish(_sh.reshape(result, rest), rest, keep, (), keepdims)
    flat = qs.reshape(-1)
    countf = _ew.cast(count, np.float64)                       # (rest..., 1)
    if method == "linear":
        virtual = _ew.multiply(_ew.subtract(countf, 1), flat)   # (rest..., len(flat))
    else:
        alpha, beta = _CONTINUOUS[method]
        virtual = _ew.subtract(_ew.add(_ew.multiply(countf, flat),
                                       alpha + flat * (1 - alpha - beta)), 1)
    top = _ew.maximum(_ew.subtract(countf, 1), 0)
    base = _ew.minimum(_ew.maximum(_ew.floor(virtual), 0), top)
    lo = _ew.cast(base, np.int64)
    hi = _ew.cast(_ew.minimum(_ew.add(base, 1), top), np.int64)
    weight = _ew.minimum(_ew.maximum(_ew.subtract(virtual, base), 0), 1)     # float64
    below = _gather.bind(s, lo, axis=last)
    above = _gather.bind(s, hi, axis=last)
    d = _ew.subtract(above, below)
    # NumPy's interpolation (_lerp), its weights rounded to the dtype from float64
    result = _ew.where(_ew.greater_equal(weight, 0.5),
                       _ew.subtract(above, _ew.multiply(d, _ew.cast(_ew.subtract(1, weight),
                                                                     dtype))),
                       _ew.add(below, _ew.multiply(d, _ew.cast(weight, dtype))))
    result = _sh.reshape(result, rest + qs.shape)
    return _finish(result, rest, keep, qs.shape, keepdims)


@composite(examples=[ex((5,)), ex((2, 4), axis=1), ex((3, 2, 2), axis=(0, 2), keepdims=True)],
           numpy=(np.nanmedian,))
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's ``np.nanmedian``: the median of each line's numbers, NaNs left out (NaN
    where a line holds none); the NaNs get no gradient."""
    _no_out("nanmedian", out)
    dtype = _result_dtype("nanmedian", np.nanmedian, a)
    return _nan_statistic("nanmedian", a, axis, keepdims, None, None, dtype)


def _nan_quantile(op, probe, a, q, scale, axis, method, keepdims, interpolation, weights):
    method = _check_method(op, a, method, interpolation, weights)
    if method not in _CONTINUOUS:
        raise UnsupportedError(at_user_line(
            f"{op}: method={method!r} is not supported (shape {_sh._shape(a)}); the "
            "interpolating methods are: "
            f"{', '.join(_CONTINUOUS)}"))
    q_given = _q_value(op, q)
    qs = _quantiles(op, q_given, scale)
    dtype = _result_dtype(op, probe, a, q_given, method=method)
    return _nan_statistic(op, a, axis, keepdims, qs, method, dtype)


def _nanquantile_call(a, **params):
    return nanquantile(a, **params)


@composite(examples=[ex((5,), q=0.3), ex((2, 5), q=_F32([0.1, 0.5, 1.0]), axis=1, keepdims=True)],
           numpy=(np.nanquantile,), call=_nanquantile_call)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """NumPy's ``np.nanquantile``: ``quantile`` of each line's numbers, NaNs left out
    (interpolating methods: 'linear', 'hazen', 'weibull', ...)."""
    _no_out("nanquantile", out)
    return _nan_quantile("nanquantile", np.nanquantile, a, q, 1.0, axis, method, keepdims,
                         interpolation, weights)


def _nanpercentile_call(a, **params):
    return nanpercentile(a, **params)


@composite(examples=[ex((2, 4), q=_F32([10.0, 50.0]), axis=0)], numpy=(np.nanpercentile,),
           call=_nanpercentile_call)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    """NumPy's ``np.nanpercentile``: ``nanquantile`` of ``q / 100``."""
    _no_out("nanpercentile", out)
    return _nan_quantile("nanpercentile", np.nanpercentile, a, q, 100.0, axis, method, keepdims,
                         interpolation, weights)


# -- lowerings ---------------------------------------------------------------------------------

def _at(ndim, axis, along, outer="i"):
    """The index of an element: the loop indices of the other axes (i0, i1, ...: numbered
    over those axes only), ``along`` on ``axis``."""
    names, k = [], 0
    for a in range(ndim):
        if a == axis:
            names.append(along)
        else:
            names.append(f"{outer}{k}")
            k += 1
    return ", ".join(names)


def _full_at(ndim, axis, along):
    """The index of an element with a loop index per axis (i0, i1, ...), ``along``
    replacing the one of ``axis``."""
    return ", ".join(along if a == axis else f"i{a}" for a in range(ndim))


def _outer_sizes(name, ndim, axis):
    return [f"{name}.shape[{a}]" for a in range(ndim) if a != axis]


def _less(x, y):
    """Source of NumPy's sort order ``x < y``: NaN after every number."""
    return f"({x} < {y} or ({y} != {y} and {x} == {x}))"


def _lower_argsort_cpu(ctx, node):
    """A bottom-up merge sort of each line's positions (stable: of equal elements the
    left run's first), merging runs of 1, 2, 4, ... through a scratch line. Written as
    loops: Numba's own ``np.argsort(kind='mergesort')`` costs seconds of compile in
    every kernel that holds one."""
    (x,) = node.inputs
    out, axis = node.out, node.params["axis"]
    o, xn = ctx.name(out), ctx.name(x)
    n, w, width, lo, mid, hi, i, j, k, r = (ctx.tmp(p) for p in (
        "n", "w", "width", "lo", "mid", "hi", "i", "j", "k", "r"))
    at = lambda p: _at(x.ndim, axis, p)      # noqa: E731
    loops, pad = _sh._loops(_outer_sizes(xn, x.ndim, axis))
    right_first = _less(f"{xn}[{at(f'{o}[{at(j)}]')}]", f"{xn}[{at(f'{o}[{at(i)}]')}]")
    body = [f"for {r} in range({n}):",
            f"    {o}[{at(r)}] = {r}",
            f"{width} = 1",
            f"while {width} < {n}:",
            f"    for {lo} in range(0, {n}, 2 * {width}):",
            f"        {mid} = min({lo} + {width}, {n})",
            f"        {hi} = min({lo} + 2 * {width}, {n})",
            f"        {i} = {lo}",
            f"        {j} = {mid}",
            f"        for {k} in range({lo}, {hi}):",
            f"            if {j} < {hi} and ({i} >= {mid} or {right_first}):",
            f"                {w}[{k}] = {o}[{at(j)}]",
            f"                {j} += 1",
            "            else:",
            f"                {w}[{k}] = {o}[{at(i)}]",
            f"                {i} += 1",
            f"    for {r} in range({n}):",
            f"        {o}[{at(r)}] = {w}[{r}]",
            f"    {width} *= 2"]
    return ([f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})",
             f"{n} = {xn}.shape[{axis}]",
             f"{w} = empty({n}, np.int64)"] + loops + [pad + line for line in body])


def _lower_argsort_cuda(ctx, node):
    """A stable insertion sort of the line's positions, one thread per line."""
    (x,) = node.inputs
    out, axis = node.out, node.params["axis"]
    o, xn = ctx.name(out), ctx.name(x)
    at = lambda r: _at(x.ndim, axis, r)      # noqa: E731
    before = f"{xn}[{at(o + '[' + at('r2') + ']')}]"     # the element at position r2
    body = [f"for r0 in range({xn}.shape[{axis}]):",
            f"    {o}[{at('r0')}] = r0",
            f"for r1 in range(1, {xn}.shape[{axis}]):",
            f"    r3 = {o}[{at('r1')}]",
            f"    r4 = {xn}[{at('r3')}]",
            "    r2 = r1 - 1",
            f"    while r2 >= 0 and {_less('r4', before)}:",
            f"        {o}[{at('r2 + 1')}] = {o}[{at('r2')}]",
            "        r2 -= 1",
            f"    {o}[{at('r2 + 1')}] = r3"]
    return [ctx.buffer(out)] + ctx.per_element(_outer_sizes(xn, x.ndim, axis), body, node)


def _lower_gather(backend):
    def lower(ctx, node):
        x, idx = node.inputs
        out, axis = node.out, node.params["axis"]
        o, xn, ixn = ctx.name(out), ctx.name(x), ctx.name(idx)
        nd = out.ndim
        every = _full_at(nd, axis, f"i{axis}")
        line = f"{o}[{every}] = {xn}[{_full_at(nd, axis, f'{ixn}[{every}]')}]"
        sizes = [f"{ixn}.shape[{a}]" for a in range(nd)]
        if backend == "cuda":
            return [ctx.buffer(out)] + ctx.per_element(sizes, [line], node)
        loops, pad = _sh._loops(sizes)
        return ([f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"] + loops
                + [pad + line])
    return lower


def _lower_scatter(backend):
    def lower(ctx, node):
        g, idx = node.inputs
        out, axis = node.out, node.params["axis"]
        o, gn, ixn = ctx.name(out), ctx.name(g), ctx.name(idx)
        nd = out.ndim
        zero = ctx.literal(0, out.dtype)
        if backend == "cuda":               # one thread per line: no two add at once
            at = lambda r: _at(nd, axis, r)  # noqa: E731
            body = [f"for r0 in range({o}.shape[{axis}]):",
                    f"    {o}[{at('r0')}] = {zero}",
                    f"for r1 in range({gn}.shape[{axis}]):",
                    f"    {o}[{at(ixn + '[' + at('r1') + ']')}] += {gn}[{at('r1')}]"]
            return [ctx.buffer(out)] + ctx.per_element(_outer_sizes(gn, nd, axis), body, node)
        every = _full_at(nd, axis, f"i{axis}")
        loops, pad = _sh._loops([f"{gn}.shape[{a}]" for a in range(nd)])
        return ([f"{o} = zeros({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"] + loops
                + [f"{pad}{o}[{_full_at(nd, axis, f'{ixn}[{every}]')}] += {gn}[{every}]"])
    return lower


def _lower_searchsorted(backend):
    """A binary search per element of ``v``: the first position whose element is not
    before it (left) or is after it (right), in NumPy's order (NaN last)."""
    def lower(ctx, node):
        a, v = node.inputs
        out = node.out
        o, an, vn = ctx.name(out), ctx.name(a), ctx.name(v)
        nd = out.ndim
        every = ", ".join(f"i{k}" for k in range(nd))
        if node.params["side"] == "left":
            goes_on = _less(f"{an}[r2]", "r3")             # a[mid] < value
        else:
            goes_on = f"not {_less('r3', f'{an}[r2]')}"    # not value < a[mid]
        body = [f"r3 = {vn}[{every}]",
                "r0 = 0",
                f"r1 = {an}.shape[0]",
                "while r0 < r1:",
                "    r2 = (r0 + r1) // 2",
                f"    if {goes_on}:",
                "        r0 = r2 + 1",
                "    else:",
                "        r1 = r2",
                f"{o}[{every}] = r0"]
        sizes = [f"{vn}.shape[{k}]" for k in range(nd)]
        if backend == "cuda":
            return [ctx.buffer(out)] + ctx.per_element(sizes, body, node)
        loops, pad = _sh._loops(sizes)
        return ([f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"] + loops
                + [pad + line for line in body])
    return lower


_argsort.lowerings["cpu"] = _lower_argsort_cpu
_argsort.lowerings["cuda"] = _lower_argsort_cuda
for _backend in ("cpu", "cuda"):
    _gather.lowerings[_backend] = _lower_gather(_backend)
    _scatter.lowerings[_backend] = _lower_scatter(_backend)
    _searchsorted.lowerings[_backend] = _lower_searchsorted(_backend)
del _backend
