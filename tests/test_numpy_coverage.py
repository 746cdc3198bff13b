"""Coverage of NumPy and SciPy on tensors: one table, every row differentiated eagerly
and compiled against NumPy's own value and finite differences in float64.

``ROWS`` holds the NumPy functions that reach jittape ops (docs/numpy.md lists them),
with their axis and keyword variants, the ndarray methods, every indexing form, the
functional updates ``x.at[idx].set/add/multiply/...``, ``np.linalg``, ``scipy.special``
and complex inputs. Each row is a function of one or more float64 (or complex128)
arrays, the arrays (drawn away from kinks, ties and the edges of domains: finite
differences must not cross them) and a kind:

- ``diff``: the value equals NumPy's (the row's ``ref``, NumPy's function itself unless
  the row calls a jittape name), and the gradient of ``sum(f(x) * w)`` (``w`` a fixed
  random array of the result's shape, so that every element counts) on the tape equals
  central finite differences of NumPy's function; compiled, it equals the tape's.
- ``nondiff``: an integer, boolean or piecewise-constant result (rounding, comparisons,
  ``argmax``, ``argsort``, ``searchsorted``, ...): the value equals NumPy's and the
  gradient is ``None`` on the tape and zeros compiled, as in TensorFlow. docs/numpy.md
  lists them, column *gradient* = no.
- ``eager-only``: a boolean mask computed from a traced value (a data-dependent shape):
  checked as ``diff`` on the tape; compiled, the trace raises ``UnsupportedError``
  pointing to ``jt.where``.
- ``unsupported``: raises the row's error (eager, under a tape with
  ``jt.config.strict``, and compiled), with the reason the row gives.

The compiled half does not compile a function per row: the rows are dealt into a few
groups and each group is one ``jt.value_and_grad`` of the sum of its rows' losses, taking
the tuple of every row's inputs, whose gradients must equal the tape's row by row. Every
group is traced, differentiated and printed, and its generated code runs as plain Python
(and its graph node by node on NumPy); Numba compiles one row in eight
(``JITTAPE_COVERAGE_NUMBA_EVERY=1`` compiles them all: about four minutes). A row marked
``xfail`` (a known defect, named in its reason) is a strict xfail eagerly and left out
of the compiled groups.
"""

import dataclasses
import os
import re
import zlib
from typing import Any, Callable, Optional, Tuple

import numpy as np
import pytest
import scipy.special as sp

import jittape as jt
import jittape.scipy.special as jsp
from corpus import _avoiding

HERE = __file__.rsplit("/", 1)[-1]


# -- inputs ---------------------------------------------------------------------------------

def U(lo, hi, *shape):
    """Uniform draws in [lo, hi)."""
    return lambda rng: rng.uniform(lo, hi, shape)


def away(lo, hi, *shape, points=(0.0,), margin=0.1):
    """Uniform draws in [lo, hi) at least ``margin`` from every point (kinks, bounds)."""
    return lambda rng: _avoiding(rng, lo, hi, shape, points, margin)


def distinct(*shape, gap=0.25):
    """No two values closer than about ``gap``: max, sort, median and ties stay put."""
    def draw(rng):
        n = int(np.prod(shape))
        ladder = (rng.permutation(n) - n / 2) * gap + rng.uniform(-gap / 5, gap / 5, n)
        return ladder.reshape(shape)
    return draw


def spectrum(*values, cols=None):
    """A matrix with the given singular values (eigenvalues when square and ``cols`` is
    None: then symmetric positive definite)."""
    def draw(rng):
        n = len(values)
        q1, _ = np.linalg.qr(rng.normal(size=(n, n)))
        if cols is None:
            return (q1 * np.asarray(values)) @ q1.T
        q2, _ = np.linalg.qr(rng.normal(size=(cols, n)))
        return (q2 * np.asarray(values)) @ q1.T
    return draw


def well(n):
    """A general square matrix far from singular."""
    return lambda rng: rng.normal(size=(n, n)) + 3 * np.eye(n)


def cplx(*shape):
    """Complex values in the right half-plane, away from 0 and the branch cut of angle."""
    return lambda rng: rng.uniform(0.5, 2, shape) + 1j * rng.uniform(-1.5, 1.5, shape)


def with_nans(*shape):
    """Every third value NaN (nansum, nanmean, nan_to_num)."""
    def draw(rng):
        x = rng.uniform(-2, 2, shape)
        x.reshape(-1)[::3] = np.nan
        return x
    return draw


def with_infs(*shape):
    """NaN, inf and -inf among finite values."""
    def draw(rng):
        x = rng.uniform(-2, 2, shape)
        x.reshape(-1)[1::4] = np.nan
        x.reshape(-1)[2::5] = np.inf
        x.reshape(-1)[3::7] = -np.inf
        return x
    return draw


def apart(*shape, margin=0.1):
    """Two arrays whose elements differ by more than ``margin`` (maximum, fmin, where)."""
    def draw(rng):
        x = rng.uniform(-2, 2, shape)
        y = x + rng.choice([-1.0, 1.0], shape) * rng.uniform(margin, 1.5, shape)
        return x, y
    return draw


# -- the table ------------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    name: str
    fn: Callable
    draws: Tuple[Callable, ...]
    kind: str = "diff"
    ref: Optional[Callable] = None          # NumPy's function where fn is not one
    raises: Any = None                      # unsupported: (exception, message pattern)
    xfail: str = ""                         # a known defect, checked eagerly only
    args: tuple = ()

    def __repr__(self):
        return f"Row({self.name})"


ROWS = []


def row(name, fn, *draws, kind="diff", ref=None, raises=None, xfail=""):
    ROWS.append(Row(name, fn, draws, kind, ref, raises, xfail))


X = U(-2, 2, 3, 4)
X3 = U(-2, 2, 2, 3, 4)
POS = U(0.2, 3, 3, 4)
UNIT = U(-0.9, 0.9, 3, 4)
MASK = np.array([[True, False, True, False], [False, False, True, True],
                 [True, True, False, False]])

# elementwise, one argument
row("sin", np.sin, X)
row("cos", np.cos, X)
row("tan", np.tan, U(-1.2, 1.2, 3, 4))
row("arcsin", np.arcsin, UNIT)
row("arccos", np.arccos, UNIT)
row("arctan", np.arctan, X)
row("arcsinh", np.arcsinh, X)
row("arccosh", np.arccosh, U(1.2, 3, 3, 4))
row("arctanh", np.arctanh, UNIT)
row("sinh", np.sinh, X)
row("cosh", np.cosh, X)
row("tanh", np.tanh, X)
row("exp", np.exp, X)
row("expm1", np.expm1, X)
row("exp2", np.exp2, X)
row("log", np.log, POS)
row("log2", np.log2, POS)
row("log10", np.log10, POS)
row("log1p", np.log1p, U(-0.5, 2, 3, 4))
row("sqrt", np.sqrt, POS)
row("cbrt", np.cbrt, away(-2, 2, 3, 4))
row("square", np.square, X)
row("reciprocal", np.reciprocal, away(-2, 2, 3, 4, margin=0.3))
row("abs", np.abs, away(-2, 2, 3, 4))
row("absolute", np.absolute, away(-2, 2, 3, 4))
row("fabs", np.fabs, away(-2, 2, 3, 4))
row("negative", np.negative, X)
row("sinc", np.sinc, X)
row("deg2rad", np.deg2rad, X)
row("rad2deg", np.rad2deg, X)
row("degrees", np.degrees, X)
row("radians", np.radians, X)
row("nan_to_num", lambda x: np.nan_to_num(x, posinf=10.0, neginf=-10.0), with_infs(3, 4))
row("nan_to_num_nan", lambda x: np.nan_to_num(x, nan=0.5), with_nans(3, 4))
row("sign_times_x", lambda x: np.sign(x) * x, away(-2, 2, 3, 4))

# elementwise, two arguments
row("add", np.add, X, X)
row("add_broadcast", np.add, X, U(-2, 2, 4))
row("subtract", np.subtract, X, U(-2, 2, 3, 1))
row("multiply", np.multiply, U(-2, 2, 3, 1), U(-2, 2, 1, 4))
row("divide", np.divide, X, away(-2, 2, 3, 4, margin=0.3))
row("true_divide", np.true_divide, X, U(0.5, 2, 4))
row("power", np.power, POS, X)
row("power_scalar", lambda x: np.power(x, 3), X)
row("maximum", np.maximum, apart(3, 4))
row("minimum", np.minimum, apart(3, 4))
row("maximum_scalar", lambda x: np.maximum(x, 0.0), away(-2, 2, 3, 4))
row("fmax", np.fmax, apart(3, 4))
row("fmin", np.fmin, apart(3, 4))
row("logaddexp", np.logaddexp, X, X)
row("logaddexp2", np.logaddexp2, X, U(-2, 2, 4))
row("arctan2", np.arctan2, away(-2, 2, 3, 4, margin=0.3), away(-2, 2, 3, 4, margin=0.3))
row("hypot", np.hypot, away(-2, 2, 3, 4), X)
row("copysign", np.copysign, away(-2, 2, 3, 4), away(-2, 2, 3, 4))
row("remainder", np.remainder, U(0.1, 0.9, 3, 4), U(1.5, 2, 3, 4))
row("mod", lambda x: np.mod(x, 0.75), away(0.1, 2, 3, 4, points=(0.75, 1.5)))
row("op_add", lambda x, y: x + y, X, U(-2, 2, 4))
row("op_radd", lambda x: 1.5 + x, X)
row("op_sub", lambda x, y: x - y, X, X)
row("op_rsub", lambda x: 2.0 - x, X)
row("op_mul", lambda x, y: x * y, X, U(-2, 2, 3, 1))
row("op_div", lambda x, y: x / y, X, U(0.5, 2, 3, 4))
row("op_rdiv", lambda x: 1.0 / x, U(0.5, 2, 3, 4))
row("op_pow", lambda x, y: x ** y, POS, X)
row("op_pow_int", lambda x: x ** 2, X)
row("op_rpow", lambda x: 2.0 ** x, X)
row("op_neg", lambda x: -x, X)
row("op_matmul", lambda a, b: a @ b, X, U(-2, 2, 4, 2))

# the documented non-differentiable functions
row("floor", np.floor, X, kind="nondiff")
row("ceil", np.ceil, X, kind="nondiff")
row("round", np.round, X, kind="nondiff")
row("round_decimals", lambda x: np.round(x, 1), X, kind="nondiff")
row("around", lambda x: np.around(x, 2), X, kind="nondiff")
row("rint", np.rint, X, kind="nondiff")
row("trunc", np.trunc, X, kind="nondiff")
row("sign", np.sign, away(-2, 2, 3, 4), kind="nondiff")
row("floor_divide", np.floor_divide, X, U(0.5, 2, 3, 4), kind="nondiff")
row("argmax", np.argmax, distinct(3, 4), kind="nondiff")
row("argmax_axis", lambda x: np.argmax(x, axis=1), distinct(3, 4), kind="nondiff")
row("argmin_axis", lambda x: np.argmin(x, axis=0), distinct(3, 4), kind="nondiff")
row("argsort", lambda x: np.argsort(x, axis=1), distinct(3, 4), kind="nondiff")
row("argpartition", lambda x: np.argpartition(x, 1, axis=0), distinct(3, 4), kind="nondiff")
row("searchsorted", lambda x: np.searchsorted(np.array([-1.0, 0.0, 1.0]), x),
    away(-2, 2, 3, 4, points=(-1, 0, 1)), kind="nondiff")
row("greater", np.greater, apart(3, 4), kind="nondiff")
row("greater_equal", np.greater_equal, apart(3, 4), kind="nondiff")
row("less", np.less, apart(3, 4), kind="nondiff")
row("less_equal", np.less_equal, apart(3, 4), kind="nondiff")
row("equal", lambda x: np.equal(x, x[:1]), X, kind="nondiff")
row("not_equal", lambda x: np.not_equal(x[:, :1], x), X, kind="nondiff")
row("op_gt", lambda x: x > 0.5, away(-2, 2, 3, 4, points=(0.5,)), kind="nondiff")
row("isclose", lambda x, y: np.isclose(x, y, atol=0.5), X, X, kind="nondiff")
row("isfinite", np.isfinite, with_infs(3, 4), kind="nondiff")
row("isnan", np.isnan, with_nans(3, 4), kind="nondiff")
row("logical_and", lambda x, y: np.logical_and(x > 0, y > 0),
    away(-2, 2, 3, 4), away(-2, 2, 3, 4), kind="nondiff")
row("logical_or", lambda x: np.logical_or(x > 0.5, x < -0.5),
    away(-2, 2, 3, 4, points=(0.5, -0.5)), kind="nondiff")
row("logical_not", lambda x: np.logical_not(x > 0), away(-2, 2, 3, 4), kind="nondiff")
row("all", lambda x: np.all(x > -1.0, axis=0), away(-2, 2, 3, 4, points=(-1,)), kind="nondiff")
row("any", lambda x: np.any(x > 1.0), away(-2, 2, 3, 4, points=(1,)), kind="nondiff")
row("allclose", lambda x, y: np.allclose(x, y), X, X, kind="nondiff")
row("full_like", lambda x: np.full_like(x, 2.0), X, kind="nondiff")
row("zeros_like", np.zeros_like, X, kind="nondiff")
row("ones_like", np.ones_like, X, kind="nondiff")
row("argmax_keepdims", lambda x: np.argmax(x, axis=0, keepdims=True), distinct(3, 4),
    kind="nondiff")
row("matrix_rank", np.linalg.matrix_rank, well(3), kind="nondiff")
row("method_argmax", lambda x: x.argmax(axis=0), distinct(3, 4), kind="nondiff")
row("method_argmin", lambda x: x.argmin(), distinct(3, 4), kind="nondiff")
row("method_argsort", lambda x: x.argsort(axis=0), distinct(3, 4), kind="nondiff")

# choices and bounds
row("where", lambda x, y: np.where(x > 0.5, x, y), away(-2, 2, 3, 4, points=(0.5,)), X)
row("where_scalar", lambda x: np.where(x > 0, x * x, 0.0), away(-2, 2, 3, 4))
row("where_one_argument", lambda x: np.where(x > 0)[0], X, kind="unsupported",
    raises=(jt.UnsupportedError, "the one-argument form"))
row("select", lambda x: np.select([x < -0.5, x > 0.5], [x * 2, x * x], 0.1),
    away(-2, 2, 3, 4, points=(0.5, -0.5)))
row("clip", lambda x: np.clip(x, -0.5, 0.7), away(-2, 2, 3, 4, points=(-0.5, 0.7)))
row("clip_upper", lambda x: np.clip(x, None, 0.5), away(-2, 2, 3, 4, points=(0.5,)))
row("clip_arrays", lambda x, lo: np.clip(x, lo, 1.0),
    away(-2, 2, 3, 4, points=(1.0, -1.0, -0.5)), U(-0.9, -0.6, 4))

# reductions
D = distinct(3, 4)
D3 = distinct(2, 3, 4)
row("sum", np.sum, X)
row("sum_axis0", lambda x: np.sum(x, axis=0), X)
row("sum_axes_keepdims", lambda x: np.sum(x, axis=(0, 2), keepdims=True), X3)
row("mean", np.mean, X)
row("mean_axis", lambda x: np.mean(x, axis=-1), X3)
row("max", np.max, D)
row("max_axis_keepdims", lambda x: np.max(x, axis=1, keepdims=True), D)
row("min_axis", lambda x: np.min(x, axis=0), D)
row("amax", lambda x: np.amax(x, axis=(0, 2)), D3)
row("amin", np.amin, D)
row("prod", np.prod, U(0.5, 1.5, 3, 4))
row("prod_axis", lambda x: np.prod(x, axis=1), X)
row("var", np.var, X)
row("var_axis_ddof", lambda x: np.var(x, axis=0, ddof=1), X)
row("var_keepdims", lambda x: np.var(x, axis=(1, 2), keepdims=True), X3)
row("std", np.std, X)
row("std_axis_keepdims", lambda x: np.std(x, axis=1, keepdims=True), X)
row("std_ddof", lambda x: np.std(x, ddof=1), X)
row("cumsum", np.cumsum, X)
row("cumsum_axis", lambda x: np.cumsum(x, axis=1), X)
row("cumsum_neg_axis", lambda x: np.cumsum(x, axis=-2), X3)
row("cumprod", np.cumprod, U(0.5, 1.5, 3, 4))
row("cumprod_axis", lambda x: np.cumprod(x, axis=0), X)
row("nansum", np.nansum, with_nans(3, 4))
row("nansum_axis", lambda x: np.nansum(x, axis=1), with_nans(3, 4))
row("nanmean", np.nanmean, with_nans(3, 4))
row("nanmean_axis", lambda x: np.nanmean(x, axis=0, keepdims=True), with_nans(3, 4))
row("ptp", np.ptp, D)
row("ptp_axis", lambda x: np.ptp(x, axis=1), D)
row("median", np.median, D)
row("median_axis", lambda x: np.median(x, axis=0), D)
row("median_axis_keepdims", lambda x: np.median(x, axis=1, keepdims=True), D)
row("nanmedian", lambda x: np.nanmedian(x, axis=1), with_nans(3, 4))
row("quantile", lambda x: np.quantile(x, 0.3, axis=1), D)
row("percentile", lambda x: np.percentile(x, [25, 80]), D)
row("nanquantile", lambda x: np.nanquantile(x, [0.2, 0.7]), with_nans(3, 4))
row("nanpercentile", lambda x: np.nanpercentile(x, 30, axis=0), with_nans(3, 4))
row("median_axes", lambda x: np.median(x, axis=(0, 2)), D3)
row("prod_keepdims", lambda x: np.prod(x, axis=0, keepdims=True), X)
row("cumsum_dtype", lambda x: np.cumsum(x, dtype=np.float64), X)
row("average", np.average, X)
row("average_weights", lambda x, w: np.average(x, axis=1, weights=w), X, U(0.5, 2, 4))
row("average_weights_full", lambda x, w: np.average(x, weights=w), X, U(0.5, 2, 3, 4))

# shapes
row("reshape", lambda x: np.reshape(x, (2, 6)), X)
row("reshape_neg", lambda x: np.reshape(x, (-1,)), X3)
row("transpose", np.transpose, X)
row("transpose_axes", lambda x: np.transpose(x, (1, 2, 0)), X3)
row("squeeze", np.squeeze, U(-2, 2, 3, 1, 4))
row("squeeze_axis", lambda x: np.squeeze(x, axis=1), U(-2, 2, 3, 1, 1))
row("expand_dims", lambda x: np.expand_dims(x, 1), X)
row("expand_dims_axes", lambda x: np.expand_dims(x, (0, -1)), X)
row("ravel", np.ravel, X3)
row("swapaxes", lambda x: np.swapaxes(x, 0, 2), X3)
row("moveaxis", lambda x: np.moveaxis(x, 0, -1), X3)
row("moveaxis_pairs", lambda x: np.moveaxis(x, (0, 1), (2, 0)), X3)
row("rollaxis", lambda x: np.rollaxis(x, 2), X3)
row("rollaxis_start", lambda x: np.rollaxis(x, 2, 1), X3)
row("atleast_1d", np.atleast_1d, U(-2, 2))
row("atleast_2d", np.atleast_2d, U(-2, 2, 4))
row("atleast_3d", np.atleast_3d, X)
row("broadcast_to", lambda x: np.broadcast_to(x, (2, 3, 4)), U(-2, 2, 3, 1))

# joining, splitting, rearranging
row("concatenate", lambda x, y: np.concatenate([x, y]), X, U(-2, 2, 2, 4))
row("concatenate_axis", lambda x, y: np.concatenate((x, y), axis=1), X, U(-2, 2, 3, 2))
row("concatenate_none", lambda x, y: np.concatenate([x, y], axis=None), X, U(-2, 2, 5))
row("stack", lambda x, y: np.stack([x, y]), X, X)
row("stack_axis", lambda x, y: np.stack([x, y], axis=-1), X, X)
row("vstack", lambda x, y: np.vstack([x, y]), X, U(-2, 2, 4))
row("hstack", lambda x, y: np.hstack([x, y]), X, U(-2, 2, 3, 2))
row("hstack_1d", lambda x, y: np.hstack([x, y]), U(-2, 2, 3), U(-2, 2, 2))
row("column_stack", lambda x, y: np.column_stack([x, y]), U(-2, 2, 3), X)
row("tile", lambda x: np.tile(x, 2), X)
row("tile_reps", lambda x: np.tile(x, (2, 1, 3)), X)
row("repeat", lambda x: np.repeat(x, 2), X)
row("repeat_axis", lambda x: np.repeat(x, 3, axis=0), X)
row("repeat_counts", lambda x: np.repeat(x, [2, 0, 1, 3], axis=1), X)
row("flip", np.flip, X3)
row("flip_axis", lambda x: np.flip(x, axis=1), X3)
row("flip_axes", lambda x: np.flip(x, axis=(0, 2)), X3)
row("flip_none", lambda x: np.flip(x, axis=None), X)
row("fliplr", np.fliplr, X)
row("flipud", np.flipud, X)
row("rot90", np.rot90, X)
row("rot90_k", lambda x: np.rot90(x, k=3, axes=(2, 1)), X3)
row("roll", lambda x: np.roll(x, 5), X)
row("roll_axis", lambda x: np.roll(x, -1, axis=1), X)
row("roll_axes", lambda x: np.roll(x, (1, 2), axis=(0, 2)), X3)
row("pad", lambda x: np.pad(x, 1), X)
row("pad_widths", lambda x: np.pad(x, ((1, 0), (2, 3))), X)
row("pad_value", lambda x: np.pad(x, (2, 1), constant_values=0.5), X)
row("pad_edge", lambda x: np.pad(x, 1, mode="edge"), X, kind="unsupported",
    raises=(jt.UnsupportedError, "mode 'edge' is not supported"))
row("split", lambda x: np.split(x, 2, axis=1)[1], X)
row("split_indices", lambda x: np.split(x, [1, 3])[2], U(-2, 2, 4, 3))
row("array_split", lambda x: np.array_split(x, 3, axis=1)[0], X)
row("vsplit", lambda x: np.vsplit(x, [1])[1], X)
row("hsplit", lambda x: np.hsplit(x, 2)[0], X)
row("dsplit", lambda x: np.dsplit(x, [1, 3])[1], X3)
row("split_array_indices", lambda x: np.split(x, np.array([1, 2]), axis=1)[1], X)
row("split_all", lambda x: np.stack(np.split(x, 2, axis=1), axis=0)
    * np.arange(1.0, 3.0)[:, None, None], X)
row("append", np.append, X, U(-2, 2, 3))
row("append_axis", lambda x, y: np.append(x, y, axis=0), X, U(-2, 2, 1, 4))

# diagonals and differences
row("diag_vector", np.diag, U(-2, 2, 4))
row("diag_vector_k", lambda v: np.diag(v, -1), U(-2, 2, 3))
row("diag_matrix", np.diag, X)
row("diag_matrix_k", lambda x: np.diag(x, 1), X)
row("diagonal", np.diagonal, X)
row("diagonal_offset_axes", lambda x: np.diagonal(x, 1, 2, 1), X3)
row("trace", np.trace, X)
row("trace_offset", lambda x: np.trace(x, -1), X)
row("trace_axes", lambda x: np.trace(x, axis1=0, axis2=2), U(-2, 2, 3, 2, 3))
row("tril", np.tril, X)
row("tril_k", lambda x: np.tril(x, 1), X3)
row("triu", np.triu, X)
row("triu_k", lambda x: np.triu(x, -1), X)
row("diff", np.diff, X)
row("diff_n_axis", lambda x: np.diff(x, n=2, axis=0), U(-2, 2, 4, 3))
row("diff_prepend", lambda x: np.diff(x, prepend=0.5, append=-1.0), X)
row("gradient", lambda x: np.gradient(x, axis=1), X)
row("gradient_axes_spacing", lambda x: np.gradient(x, 0.5, 2.0, edge_order=2)[1], X)
row("sort", np.sort, D)
row("sort_axis0", lambda x: np.sort(x, axis=0), D)
row("sort_flat", lambda x: np.sort(x, axis=None), D3)
row("partition", lambda x: np.partition(x, 1, axis=1), D)

# products
row("dot_vectors", np.dot, U(-2, 2, 4), U(-2, 2, 4))
row("dot_matrices", np.dot, X, U(-2, 2, 4, 2))
row("dot_matrix_vector", np.dot, X, U(-2, 2, 4))
row("dot_scalar", lambda x: np.dot(x, 2.5), X)
row("matmul", np.matmul, X, U(-2, 2, 4, 2))
row("matmul_batched", np.matmul, X3, U(-2, 2, 4, 2))
row("matmul_vector", np.matmul, U(-2, 2, 3), X)
row("inner", np.inner, X, U(-2, 2, 2, 4))
row("outer", np.outer, U(-2, 2, 3), U(-2, 2, 4))
row("tensordot", lambda a, b: np.tensordot(a, b, axes=1), X, U(-2, 2, 4, 2))
row("tensordot_pairs", lambda a, b: np.tensordot(a, b, axes=([1, 2], [0, 1])), X3, X)
row("tensordot_2", lambda a, b: np.tensordot(a, b), X3, X)
row("kron", np.kron, U(-2, 2, 2, 3), U(-2, 2, 2, 2))
row("cross", np.cross, U(-2, 2, 4, 3), U(-2, 2, 4, 3))
row("einsum_matmul", lambda a, b: np.einsum("ij,jk->ik", a, b), X, U(-2, 2, 4, 2))
row("einsum_implicit", lambda a, b: np.einsum("ij,kj", a, b), X, U(-2, 2, 2, 4))
row("einsum_ellipsis", lambda a, b: np.einsum("...ij,...jk->...ik", a, b), X3, U(-2, 2, 2, 4, 2))
row("einsum_ellipsis_transpose", lambda a: np.einsum("...ij->...ji", a), X3)
row("einsum_three", lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c),
    X, U(-2, 2, 4, 2), U(-2, 2, 2, 3))
row("einsum_four", lambda a, b, c, d: np.einsum("i,ij,jk,k->", a, b, c, d),
    U(-2, 2, 3), X, U(-2, 2, 4, 2), U(-2, 2, 2))
row("einsum_reduce", lambda a: np.einsum("ijk->j", a), X3)
row("einsum_scalar", lambda a, b: np.einsum("ij,ij->", a, b), X, X)
row("einsum_outer", lambda a, b: np.einsum("i,j->ij", a, b), U(-2, 2, 3), U(-2, 2, 4))
row("einsum_sublists", lambda a, b: np.einsum(a, [0, 1], b, [2, 1], [0, 2]), X, U(-2, 2, 2, 4))
row("einsum_optimize", lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c, optimize=True),
    X, U(-2, 2, 4, 2), U(-2, 2, 2, 3))
row("einsum_diagonal", lambda a: np.einsum("ii->i", a), U(-2, 2, 3, 3))
row("einsum_diagonal_product", lambda a, b: np.einsum("iij,kj->ik", a, b), U(-2, 2, 3, 3, 4),
    U(-2, 2, 2, 4))
row("dot_nd", np.dot, X, U(-2, 2, 2, 4, 3))
row("real_if_close", np.real_if_close, X)
row("cross_axes", lambda a, b: np.cross(a, b, axisa=0, axisc=0), U(-2, 2, 3, 4), U(-2, 2, 4, 3))
row("multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), X, U(-2, 2, 4, 2), U(-2, 2, 2, 3))

# np.linalg
SPD = spectrum(1.0, 2.0, 4.0)
TALL = spectrum(3.0, 2.0, 1.0, cols=4)
row("inv", np.linalg.inv, well(3))
row("inv_batched", np.linalg.inv, lambda rng: rng.normal(size=(2, 3, 3)) + 3 * np.eye(3))
row("solve_vector", np.linalg.solve, well(3), U(-2, 2, 3))
row("solve_matrix", np.linalg.solve, well(3), U(-2, 2, 3, 2))
row("det", np.linalg.det, well(3))
row("slogdet", lambda a: np.linalg.slogdet(a)[1], well(3))
row("slogdet_sign", lambda a: np.linalg.slogdet(a)[0], well(3), kind="nondiff")
row("cholesky", np.linalg.cholesky, SPD)
row("eigh_values", lambda a: np.linalg.eigh(a)[0], SPD)
row("eigh_vectors", lambda a: np.linalg.eigh(a)[1] ** 2, SPD)
row("eigvalsh", np.linalg.eigvalsh, SPD)
row("eig_values", lambda a: np.real(np.linalg.eig(a)[0]) + 2 * np.imag(np.linalg.eig(a)[0]),
    well(3))
row("eig_vectors", lambda a: np.abs(np.linalg.eig(a)[1]) ** 2, well(3))   # (signs: LAPACK's)
row("eigvals", lambda a: np.imag(np.linalg.eigvals(a)) ** 2 + np.real(np.linalg.eigvals(a)),
    well(3))
row("svd_values", lambda a: np.linalg.svd(a, compute_uv=False), TALL)
row("svd_u", lambda a: np.linalg.svd(a, full_matrices=False)[0] ** 2, TALL)
row("svd_vh", lambda a: np.linalg.svd(a, full_matrices=False)[2] ** 2, TALL)
row("svdvals", np.linalg.svdvals, TALL)
row("norm", np.linalg.norm, X)
row("norm_axis", lambda x: np.linalg.norm(x, axis=1), X)
row("norm_axis_keepdims", lambda x: np.linalg.norm(x, axis=0, keepdims=True), X)
row("norm_ord1_vector", lambda x: np.linalg.norm(x, 1), away(-2, 2, 5))
row("norm_inf_vector", lambda x: np.linalg.norm(x, np.inf), distinct(5))
row("norm_fro", lambda x: np.linalg.norm(x, "fro"), X)
row("norm_nuc", lambda x: np.linalg.norm(x, "nuc"), TALL)
row("norm_2", lambda x: np.linalg.norm(x, 2), TALL)
row("norm_inf_matrix", lambda x: np.linalg.norm(x, np.inf),
    lambda rng: rng.uniform(0.5, 1, (3, 4)) * np.array([[1.0], [2.0], [3.0]]))
row("pinv", np.linalg.pinv, TALL)
row("qr_q", lambda a: np.linalg.qr(a)[0] * np.diagonal(np.linalg.qr(a)[1]), TALL)
row("qr_r", lambda a: np.linalg.qr(a)[1] ** 2, TALL)
row("qr_mode_r", lambda a: np.linalg.qr(a, mode="r") ** 2, TALL)
row("matrix_power", lambda a: np.linalg.matrix_power(a, 3), U(-1, 1, 3, 3))
row("matrix_power_neg", lambda a: np.linalg.matrix_power(a, -2), well(3))
row("lstsq", lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], TALL, U(-2, 2, 4))
row("cond", np.linalg.cond, well(3))

# np.fft (jittape/ops/fourier.py): lengths that pad and truncate, axes, norms
row("fft", np.fft.fft, X)
row("fft_n_axis_ortho", lambda z: np.fft.fft(z, n=5, axis=0, norm="ortho"), cplx(3, 2))
row("ifft_truncate_forward", lambda z: np.fft.ifft(z, n=2, norm="forward"), cplx(3, 4))
row("rfft_n_axis", lambda x: np.fft.rfft(x, n=5, axis=0), X)
row("irfft_n_ortho", lambda z: np.fft.irfft(z, n=7, norm="ortho"), cplx(2, 3))
row("fftn_s_axes", lambda z: np.fft.fftn(z, s=(4, 3), axes=(0, 2)), cplx(2, 3, 2))
row("rfft2", np.fft.rfft2, X)
row("irfftn", np.fft.irfftn, cplx(2, 3, 3))
row("fftshift_ifftshift", lambda z: np.fft.fftshift(z, axes=1) + np.fft.ifftshift(z), cplx(3, 5))

# scipy.special (SciPy's ufuncs on tensors; its Python functions through jt.scipy.special)
row("expit", sp.expit, X)
row("logit", sp.logit, U(0.1, 0.9, 3, 4))
row("erf", sp.erf, X)
row("erfc", sp.erfc, X)
row("gammaln", sp.gammaln, U(0.5, 4, 3, 4))
row("digamma", sp.digamma, U(0.5, 4, 3, 4))
row("psi", sp.psi, U(0.5, 4, 3, 4))
row("xlogy", sp.xlogy, X, U(0.2, 3, 3, 4))
row("xlog1py", sp.xlog1py, X, U(-0.5, 2, 3, 4))
row("ndtr", sp.ndtr, X)
row("log_expit", sp.log_expit, X)
row("erfinv", sp.erfinv, UNIT)
row("erfcinv", sp.erfcinv, U(0.2, 1.8, 3, 4))
row("ndtri", sp.ndtri, U(0.1, 0.9, 3, 4))
row("log_ndtr", sp.log_ndtr, X)
row("gamma", sp.gamma, U(0.5, 4, 3, 4))
row("beta", sp.beta, U(0.5, 3, 3, 4), U(0.5, 3, 4))
row("betaln", sp.betaln, U(0.5, 3, 3, 4), U(0.5, 3, 3, 4))
row("boxcox", lambda x: sp.boxcox(x, 0.5), POS)
row("entr", sp.entr, POS)
row("rel_entr", sp.rel_entr, POS, POS)
row("kl_div", sp.kl_div, POS, POS)
row("gammainc", lambda x: sp.gammainc(2.0, x), POS)
row("gammaincc", lambda x: sp.gammaincc(1.5, x), POS)
row("i0", sp.i0, X)
row("i0e", sp.i0e, away(-2, 2, 3, 4))
row("i1", sp.i1, X)
row("i1e", sp.i1e, away(-2, 2, 3, 4))
row("j0", sp.j0, U(0.2, 8, 3, 4))
row("j1", sp.j1, X)
row("y0", sp.y0, U(0.5, 8, 3, 4))
row("y1", sp.y1, U(0.5, 8, 3, 4))
row("jv", lambda x: sp.jv(2.5, x), U(0.5, 6, 3, 4))
row("jn", lambda x: sp.jn(2, x), U(0.5, 6, 3, 4))
row("yn", lambda x: sp.yn(1, x), U(0.5, 6, 3, 4))
row("iv", lambda x: sp.iv(1.5, x), POS)
row("ive", lambda x: sp.ive(1.5, x), POS)
row("rgamma", sp.rgamma, U(0.3, 3, 3, 4))
row("gammasgn", sp.gammasgn, U(0.3, 3, 3, 4), kind="nondiff")
row("betainc", lambda x: sp.betainc(2.0, 1.5, x), U(0.1, 0.9, 3, 4))
row("stdtr", lambda x: sp.stdtr(3.0, x), X)
row("polygamma", lambda x: jsp.polygamma(1, x), U(0.5, 4, 3, 4), ref=lambda x: sp.polygamma(1, x))
row("scipy_polygamma", lambda x: sp.polygamma(1, x), U(0.5, 4, 3, 4), kind="unsupported",
    raises=(jt.GradientLostError, "the gradient through it is lost"))
row("softmax", lambda x: jsp.softmax(x, axis=1), X, ref=lambda x: sp.softmax(x, axis=1))
row("softmax_all", jsp.softmax, X, ref=sp.softmax)
row("log_softmax", lambda x: jsp.log_softmax(x, axis=0), X,
    ref=lambda x: sp.log_softmax(x, axis=0))
row("logsumexp", jsp.logsumexp, X, ref=sp.logsumexp)
row("logsumexp_axis", lambda x: jsp.logsumexp(x, axis=1, keepdims=True), X,
    ref=lambda x: sp.logsumexp(x, axis=1, keepdims=True))
row("logsumexp_b", lambda x, b: jsp.logsumexp(x, axis=0, b=b), X, U(0.5, 2, 3, 4),
    ref=lambda x, b: sp.logsumexp(x, axis=0, b=b))
row("jt_logsumexp", lambda x: jt.logsumexp(x, axis=-1), X3, ref=lambda x: sp.logsumexp(x, axis=-1))
row("scipy_logsumexp", sp.logsumexp, X, kind="unsupported",
    raises=(jt.GradientLostError, "the gradient through it is lost"))

# ndarray methods
row("method_sum", lambda x: x.sum(axis=1), X)
row("method_mean", lambda x: x.mean(axis=(0, 1), keepdims=True), X3)
row("method_max", lambda x: x.max(axis=0), D)
row("method_min", lambda x: x.min(), D)
row("method_prod", lambda x: x.prod(axis=0), X)
row("method_var", lambda x: x.var(axis=1, ddof=1), X)
row("method_std", lambda x: x.std(), X)
row("method_cumsum", lambda x: x.cumsum(axis=0), X)
row("method_cumprod", lambda x: x.cumprod(), U(0.5, 1.5, 3, 4))
row("method_ravel", lambda x: x.ravel(), X3)
row("method_flatten", lambda x: x.flatten(), X3)
row("method_reshape", lambda x: x.reshape(4, 3), X)
row("method_reshape_tuple", lambda x: x.reshape((2, -1)), X3)
row("method_T", lambda x: x.T, X3)
row("method_transpose", lambda x: x.transpose(2, 0, 1), X3)
row("method_swapaxes", lambda x: x.swapaxes(0, 1), X)
row("method_squeeze", lambda x: x.squeeze(), U(-2, 2, 1, 4))
row("method_dot", lambda x, y: x.dot(y), X, U(-2, 2, 4))
row("method_clip", lambda x: x.clip(-0.5, 0.5), away(-2, 2, 3, 4, points=(-0.5, 0.5)))
row("method_clip_min", lambda x: x.clip(min=0.2), away(-2, 2, 3, 4, points=(0.2,)))
row("method_diagonal", lambda x: x.diagonal(), X)
row("method_trace", lambda x: x.trace(), X)
row("method_repeat", lambda x: x.repeat(2, axis=1), X)
row("method_astype", lambda x: x.astype(np.float64), X)
row("method_real", lambda x: x.real, X)
row("method_imag", lambda x: x.imag + x, X)
row("method_conj", lambda x: x.conj(), X)
row("method_conjugate", lambda x: x.conjugate(), X)
row("method_round", lambda x: x.round(1), X, kind="nondiff")
row("method_sort", lambda x: x.sort(), X, kind="unsupported",
    raises=(AttributeError, "sort"))    # ndarray.sort sorts in place: docs/api.md

# real, imag, conj, angle of real tensors, and of complex ones
row("real", np.real, X)
row("imag", lambda x: np.imag(x) + x, X)
row("conj", np.conj, X)
row("conjugate", np.conjugate, X)
row("angle", np.angle, away(-2, 2, 3, 4))         # 0 or pi: a zero gradient
row("complex_real", np.real, cplx(3, 2))
row("complex_imag", np.imag, cplx(3, 2))
row("complex_conj", np.conj, cplx(3, 2))
row("complex_angle", np.angle, cplx(3, 2))
row("complex_angle_deg", lambda z: np.angle(z, deg=True), cplx(3, 2))
row("complex_abs", np.abs, cplx(3, 2))
row("complex_method_real", lambda z: z.real * z.imag, cplx(3, 2))
row("complex_method_conj", lambda z: z.conj() * z, cplx(3, 2))
row("complex_exp_sum", lambda z: np.sum(np.exp(z) * np.conj(z), axis=0), cplx(3, 2))

# indexing
row("index_slice", lambda x: x[1:3], X)
row("index_slice_step", lambda x: x[::2, 1:], X)
row("index_negative_step", lambda x: x[::-1], X)
row("index_negative_steps", lambda x: x[2:0:-1, ::-2], X)
row("index_negative_start", lambda x: x[-2:, :-1], X)
row("index_int", lambda x: x[1], X)
row("index_ints", lambda x: x[-1, 2], X)
row("index_int_slice", lambda x: x[1, :, ::2], X3)
row("index_none", lambda x: x[None], X)
row("index_none_mid", lambda x: x[:, None, 1:], X)
row("index_newaxis_ellipsis", lambda x: x[np.newaxis, ..., 0], X3)
row("index_ellipsis", lambda x: x[..., 1], X3)
row("index_ellipsis_mid", lambda x: x[0, ..., 2:], X3)
row("index_int_array", lambda x: x[np.array([0, 2, 2])], X)
row("index_int_list", lambda x: x[[2, 0]], X)
row("index_negative_array", lambda x: x[np.array([-1, 0, -3])], X)
row("index_int_array_2d", lambda x: x[np.array([[0, 1], [2, 0]])], X)
row("index_fancy_pair", lambda x: x[[0, 2, 0], [1, 3, 1]], X)
row("index_fancy_broadcast", lambda x: x[np.array([[0], [2]]), np.array([1, 3])], X)
row("index_slice_array", lambda x: x[1:, [0, 2]], X)
row("index_array_slice", lambda x: x[:, [3, 0, 3]], X)
row("index_arrays_separated", lambda x: x[[1, 0], :, [2, 3]], X3)
row("index_arrays_adjacent", lambda x: x[:, [0, 2], [1, 3]], X3)
row("index_int_and_array", lambda x: x[1, [0, 2]], X3)
row("index_array_none", lambda x: x[[0, 1], None, 2], X)
row("index_constant_mask", lambda x: x[MASK], X)
row("index_constant_mask_axis", lambda x: x[:, MASK[0]], X)
row("take", lambda x: np.take(x, [0, 2, 2], axis=1), X)
row("take_flat", lambda x: np.take(x, [5, 0, 11]), X)
row("take_along_axis", lambda x: np.take_along_axis(x, np.array([[0, 3], [1, 1], [2, 0]]), 1), X)
row("mask", lambda x: x[x > 0.5], away(-2, 2, 3, 4, points=(0.5,)), kind="eager-only")
row("mask_rows", lambda x: x[x[:, 0] > 0], away(-2, 2, 3, 4), kind="eager-only")
row("mask_and_slice", lambda x: x[x[:, 0, 0] > 0, 1:], away(-2, 2, 2, 3, 4),
    kind="eager-only")

# functional updates: x.at[idx]


def _at(how, idx):
    """NumPy's form of ``x.at[idx].<how>(y)``."""
    def ref(x, y=None):
        out = x.copy()
        value = y if y is not None else _AT_VALUES[how]
        if how == "set":
            out[idx] = value
        elif how == "add":
            np.add.at(out, idx, value)
        elif how == "multiply":             # x[idx] *= v: once, where an index repeats
            out[idx] = out[idx] * value
        elif how == "divide":
            out[idx] = out[idx] / value
        elif how == "power":
            out[idx] = out[idx] ** value
        return out
    return ref


_AT_VALUES = {"set": 0.5, "add": 1.5, "multiply": 2.5, "divide": 4.0, "power": 2.0}

row("at_set", lambda x: x.at[1].set(0.5), X, ref=_at("set", 1))
row("at_set_array", lambda x, y: x.at[[2, 0], 1].set(y), X, U(-2, 2, 2),
    ref=_at("set", ([2, 0], 1)))
row("at_set_slice", lambda x, y: x.at[:, ::-2].set(y), X, U(-2, 2, 3, 2),
    ref=_at("set", (slice(None), slice(None, None, -2))))
row("at_add", lambda x, y: x.at[:, 2].add(y), X, U(-2, 2, 3), ref=_at("add", (slice(None), 2)))
row("at_add_repeated", lambda x, y: x.at[[0, 2, 0]].add(y), X, U(-2, 2, 3, 4),
    ref=_at("add", [0, 2, 0]))
row("at_add_scalar", lambda x: x.at[..., -1].add(1.5), X3, ref=_at("add", (Ellipsis, -1)))
row("at_multiply", lambda x, y: x.at[1:, ::2].multiply(y), X, U(-2, 2, 2, 2),
    ref=_at("multiply", (slice(1, None), slice(None, None, 2))))
row("at_multiply_repeated", lambda x: x.at[[1, 1], [0, 0]].multiply(2.5), X,
    ref=_at("multiply", ([1, 1], [0, 0])))
row("at_divide", lambda x: x.at[0].divide(4.0), X, ref=_at("divide", 0))
row("at_power", lambda x: x.at[2, 1:].power(2.0), POS, ref=_at("power", (2, slice(1, None))))
row("at_get", lambda x: x.at[[1, 2], 0].get(), X, ref=lambda x: x[[1, 2], 0])

# keyword variants NumPy takes that tensors refuse without naming the op
row("sum_where", lambda x: np.sum(x, axis=0, where=MASK), X)
row("mean_dtype", lambda x: np.mean(x, axis=0, dtype=np.float64), X)
row("sum_dtype", lambda x: np.sum(x, axis=1, dtype=np.float64), X)
row("max_initial", lambda x: np.max(x, axis=0, initial=-5.0), D)

# a realistic mix: several of the above in one expression
row("mix_normalize", lambda x: (x - x.mean(axis=1, keepdims=True)) / np.sqrt(
    x.var(axis=1, keepdims=True) + 1e-3), X)
row("mix_attention", lambda q, k: jsp.softmax(q @ k.T, axis=-1) @ k, X, U(-1, 1, 5, 4),
    ref=lambda q, k: sp.softmax(q @ k.T, axis=-1) @ k)

NAMES = [r.name for r in ROWS]
assert len(set(NAMES)) == len(NAMES), "row names must be unique"
KINDS = ("diff", "nondiff", "eager-only", "unsupported")
assert all(r.kind in KINDS for r in ROWS)

for _r in ROWS:
    _rng = np.random.default_rng(zlib.crc32(_r.name.encode()))
    _args = []
    for _d in _r.draws:
        _v = _d(_rng)
        _args.extend(_v if isinstance(_v, tuple) else (_v,))
    _r.args = tuple(np.asarray(a, dtype=np.result_type(a, np.float64)) for a in _args)


# -- helpers --------------------------------------------------------------------------------

def reference(r, args):
    return (r.ref or r.fn)(*args)


def weights(r):
    """A fixed weight of the result's shape: the loss is sum(f(x) * w)."""
    shape = np.shape(reference(r, r.args))
    return np.random.default_rng(zlib.crc32(r.name.encode()) + 1).uniform(0.5, 1.5, shape) * \
        np.random.default_rng(zlib.crc32(r.name.encode()) + 2).choice([-1.0, 1.0], shape)


WEIGHTS = {}


def weight(r):
    if r.name not in WEIGHTS:
        WEIGHTS[r.name] = weights(r)
    return WEIGHTS[r.name]


def numpy_loss(r, args):
    return float(np.real(np.sum(np.asarray(reference(r, args)) * weight(r))))


def numeric_grad(r, k, eps=1e-6):
    """Central differences of NumPy's loss; for a complex input, d/dRe + i d/dIm (the
    convention of docs/api.md)."""
    args = [a.copy() for a in r.args]
    x = args[k]
    grad = np.zeros_like(x)
    steps = (1.0, 1j) if np.iscomplexobj(x) else (1.0,)
    for i in range(x.size):
        orig = x.flat[i]
        for step in steps:
            x.flat[i] = orig + eps * step
            plus = numpy_loss(r, args)
            x.flat[i] = orig - eps * step
            minus = numpy_loss(r, args)
            x.flat[i] = orig
            grad.flat[i] += step * (plus - minus) / (2 * eps)
    return grad


def tape_run(r):
    """(result, gradients) of the row's loss on the eager tape."""
    tensors = [jt.constant(a) for a in r.args]
    with jt.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        out = r.fn(*tensors)
        loss = jt.sum(out * weight(r))
    return out, tape.gradient(loss, tensors)


def check_value(r, out):
    want = np.asarray(reference(r, r.args))
    assert isinstance(out, jt.Tensor), f"{r.name}: {type(out).__name__}, not a Tensor"
    got = out.numpy()
    assert got.shape == want.shape, f"{r.name}: shape {got.shape}, NumPy's {want.shape}"
    assert got.dtype == want.dtype, f"{r.name}: dtype {got.dtype}, NumPy's {want.dtype}"
    if r.kind == "nondiff":
        np.testing.assert_array_equal(got, want, err_msg=r.name)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=r.name)


def tolerance(expected):
    return dict(rtol=1e-6, atol=1e-7 * max(1.0, float(np.max(np.abs(expected), initial=0.0))))


def _param(r):
    marks = [pytest.mark.xfail(strict=True, reason=r.xfail)] if r.xfail else []
    return pytest.param(r, id=r.name, marks=marks)


# -- eager ----------------------------------------------------------------------------------

@pytest.mark.parametrize("r", [_param(r) for r in ROWS if r.kind in ("diff", "eager-only")])
def test_eager_gradient_against_finite_differences(r):
    out, grads = tape_run(r)
    check_value(r, out)
    for k, g in enumerate(grads):
        expected = numeric_grad(r, k)
        got = np.zeros_like(r.args[k]) if g is None else g.numpy()
        assert got.dtype == r.args[k].dtype, f"{r.name} input {k}: gradient dtype {got.dtype}"
        np.testing.assert_allclose(got, expected, **tolerance(expected),
                                   err_msg=f"{r.name}: gradient of input {k}")


@pytest.mark.parametrize("r", [_param(r) for r in ROWS if r.kind == "nondiff"])
def test_eager_nondifferentiable_value_and_no_gradient(r):
    out, grads = tape_run(r)
    check_value(r, out)
    assert all(g is None for g in grads), f"{r.name}: the tape gave a gradient"


@pytest.mark.parametrize("r", [_param(r) for r in ROWS if r.kind == "unsupported"])
def test_eager_unsupported_raises(r, monkeypatch):
    monkeypatch.setattr(jt.config, "strict", True)
    exc, pattern = r.raises
    with pytest.raises(exc, match=pattern):
        tape_run(r)


# -- compiled -------------------------------------------------------------------------------

COMPILED = [r for r in ROWS if r.kind in ("diff", "nondiff") and not r.xfail]
GROUP_SIZE = 56
GROUPS = [COMPILED[i:i + GROUP_SIZE] for i in range(0, len(COMPILED), GROUP_SIZE)]
# Numba takes about half a second per row (a group's compile grows with its code, so
# grouping saves the tracing, not Numba's time): every group runs as generated Python,
# and one row in NUMBA_EVERY is also compiled by Numba (1: every row).
NUMBA_EVERY = int(os.environ.get("JITTAPE_COVERAGE_NUMBA_EVERY", "8"))
SAMPLE = COMPILED[::NUMBA_EVERY]
NUMBA_GROUPS = [SAMPLE[i:i + GROUP_SIZE // 2] for i in range(0, len(SAMPLE), GROUP_SIZE // 2)]


def _group_loss(group):
    def loss(inputs):
        total = 0.0
        for r, args in zip(group, inputs):
            total = total + jt.sum(r.fn(*args) * weight(r))
        return total
    return loss


def _row_of_line(group, message):
    """The row whose lambda sits at the file:line an error message names."""
    lines = {r.fn.__code__.co_firstlineno: r.name for r in group
             if getattr(getattr(r.fn, "__code__", None), "co_filename", "") == __file__}
    found = [lines[int(n)] for n in re.findall(re.escape(HERE) + r":(\d+)", message)
             if int(n) in lines]
    return found[0] if found else "?"


def _check_group(group, value, grads, path):
    """The group's loss against NumPy's and each row's gradients against the tape's."""
    want = sum(numpy_loss(r, r.args) for r in group)
    np.testing.assert_allclose(np.real(value), want, rtol=1e-10, err_msg=f"{path}: the loss")
    failures = []
    for r, got in zip(group, grads):
        _, eager = tape_run(r)
        for i, (g, e) in enumerate(zip(got, eager)):
            e = np.zeros_like(r.args[i]) if e is None else e.numpy()
            g = np.asarray(g)
            if g.shape != e.shape or g.dtype != e.dtype:
                failures.append(f"{r.name} input {i}: {path} gives {g.dtype}{g.shape}, "
                                f"the tape {e.dtype}{e.shape}")
            elif r.kind == "nondiff" and np.any(g != 0):
                failures.append(f"{r.name} input {i}: a nonzero gradient ({path})")
            elif not np.allclose(g, e, rtol=1e-9, atol=1e-11 * max(1.0, np.max(np.abs(e)))):
                failures.append(f"{r.name} input {i}: {path} {np.ravel(g)[:4]}..., "
                                f"tape {np.ravel(e)[:4]}...")
    assert not failures, "\n".join(failures)


def _lower(group):
    inputs = tuple(r.args for r in group)
    f = jt.value_and_grad(_group_loss(group))
    try:
        return f, inputs, f.lower(inputs)
    except Exception as e:
        raise AssertionError(f"row {_row_of_line(group, str(e))}: {type(e).__name__}: {e}") from e


def _regroup(group, flat):
    """Per-row tuples of the flat gradients (leaves in the inputs' order)."""
    out, k = [], 0
    for r in group:
        out.append(tuple(flat[k:k + len(r.args)]))
        k += len(r.args)
    return out


@pytest.mark.parametrize("k", range(len(GROUPS)),
                         ids=[f"{g[0].name}..{g[-1].name}" for g in GROUPS])
def test_compiled_group_as_generated_python_matches_the_tape(k):
    """The group's traced, differentiated and optimized graph, printed as the code Numba
    compiles, run as Python; and the same graph run node by node on NumPy."""
    group = GROUPS[k]
    _, inputs, lowered = _lower(group)
    flat = [a if a.ndim else a[()] for a in jt.tree.flatten(inputs)[0]]
    out = lowered.python(*flat)
    _check_group(group, out[0], _regroup(group, out[1:]), "generated Python")
    if lowered.numpy is not None:
        out = lowered.numpy(*flat)
        _check_group(group, out[0], _regroup(group, out[1:]), "graph on NumPy")


@pytest.mark.parametrize("k", range(len(NUMBA_GROUPS)),
                         ids=[f"{g[0].name}..{g[-1].name}" for g in NUMBA_GROUPS])
def test_compiled_by_numba_matches_the_tape(k):
    group = NUMBA_GROUPS[k]
    f, inputs, _ = _lower(group)
    value, grads = f(inputs)
    _check_group(group, value, grads, "compiled")


@pytest.mark.parametrize("r", [_param(r) for r in ROWS if r.kind == "eager-only"])
def test_compiled_boolean_mask_points_to_where(r):
    def loss(*args):
        return jt.sum(r.fn(*args) * weight(r))
    with pytest.raises(jt.UnsupportedError, match=r"jt\.where") as info:
        jt.grad(loss, argnums=tuple(range(len(r.args))))(*r.args)
    assert HERE in str(info.value), "the error names the user's line"


@pytest.mark.parametrize("r", [_param(r) for r in ROWS if r.kind == "unsupported"])
def test_compiled_unsupported_raises(r):
    exc, pattern = r.raises
    if exc is jt.GradientLostError:       # compiled, any conversion of a traced value raises
        exc, pattern = jt.errors.TracerError, "converting to a NumPy array of a traced value"

    def loss(*args):
        return jt.sum(r.fn(*args) * weight(r))
    with pytest.raises(exc, match=pattern):
        jt.grad(loss, argnums=tuple(range(len(r.args))))(*r.args)


def test_table_counts():
    """Every kind has rows, and the compiled groups stay few (each is one compile)."""
    counts = {kind: sum(r.kind == kind for r in ROWS) for kind in KINDS}
    assert all(counts.values()), counts
    assert len(GROUPS) <= 8 and (len(NUMBA_GROUPS) <= 2 or NUMBA_EVERY < 8)
