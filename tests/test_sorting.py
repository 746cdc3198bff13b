"""Sorting and order statistics (jittape/ops/sorting.py): NumPy's answers eagerly, the
same compiled, gradients against finite differences, ties, NaN, dtypes and vmap.

The registry tests (test_ops, test_vmap, test_cuda) check every example of the ops; these
check what the examples do not: NumPy's own calls on tensors, NaN and ties, sizes that
change between calls, second derivatives."""

import numpy as np
import pytest

import jittape as jt
from jittape.tensor import Tensor

from opcheck import numeric_grad

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

c = jt.constant


def _rng(k=0):
    return np.random.default_rng(1234 + k)


def _with_nans():
    x = _rng(1).normal(size=(4, 5))
    x[0, 2] = np.nan
    x[2, :] = np.nan
    x[3, 0] = x[3, 4] = np.nan
    return x


# -- eager = NumPy ------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_sort_and_argsort_are_numpys_stable_ones(axis):
    x = _rng().integers(0, 3, size=(4, 6)).astype(np.float64)   # many ties
    x[1, 2] = np.nan
    x[3, 0] = np.nan
    got = np.sort(c(x), axis=axis)
    assert isinstance(got, Tensor)
    np.testing.assert_array_equal(got.numpy(), np.sort(x, axis=axis))
    order = np.argsort(c(x), axis=axis)
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order.numpy(), np.argsort(x, axis=axis, kind="stable"))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_sort_keeps_numpys_dtypes(dtype):
    x = (_rng().normal(size=(3, 4)) * 3).astype(dtype)
    got = np.sort(c(x), axis=0)
    assert got.dtype == np.sort(x, axis=0).dtype
    np.testing.assert_array_equal(got.numpy(), np.sort(x, axis=0))
    np.testing.assert_array_equal(c(x).argsort(axis=0).numpy(),
                                  np.argsort(x, axis=0, kind="stable"))


def test_tensors_have_argsort_but_no_in_place_sort():
    t = c(np.array([3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(t.argsort().numpy(), [1, 2, 0])
    assert not hasattr(t, "sort")


def test_searchsorted_left_right_nan_sorter_and_scalars():
    a = np.array([-1.0, 0.0, 0.0, 2.0, np.nan])
    v = np.array([[0.0, np.nan], [3.0, -2.0], [2.0, np.inf]])
    for side in ("left", "right"):
        got = np.searchsorted(c(a), c(v), side=side)
        assert got.dtype == np.int64 and got.shape == v.shape
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(a, v, side=side))
        assert int(np.searchsorted(c(a), 0.0, side=side)) == np.searchsorted(a, 0.0, side=side)
    shuffled = np.array([2.0, -1.0, 0.0])
    sorter = np.argsort(shuffled)
    np.testing.assert_array_equal(np.searchsorted(c(shuffled), c(v[:, 0]), sorter=sorter).numpy(),
                                  np.searchsorted(shuffled, v[:, 0], sorter=sorter))
    ints = np.array([1, 3, 3, 7])
    np.testing.assert_array_equal(np.searchsorted(c(ints), c(np.array([3, 4]))).numpy(),
                                  np.searchsorted(ints, [3, 4]))


def test_partition_is_a_valid_partition_with_numpys_kth_elements():
    x = _rng().normal(size=(3, 7))
    for kth in (2, (0, 4), -1):
        got = np.partition(c(x), kth, axis=1).numpy()
        want = np.partition(x, kth, axis=1)
        for k in np.atleast_1d(kth):
            np.testing.assert_array_equal(got[:, k], want[:, k])
        order = np.argpartition(c(x), kth, axis=1).numpy()
        np.testing.assert_array_equal(np.take_along_axis(x, order, 1), got)
    # (the order returned is the sorted one)
    np.testing.assert_array_equal(np.partition(c(x), 2, axis=0).numpy(), np.sort(x, axis=0))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False),
                                           ((2, 0), True), (-1, False)])
def test_median_and_quantiles_match_numpy(axis, keepdims):
    x = _rng(2).normal(size=(4, 3, 2))
    t = c(x)
    np.testing.assert_allclose(np.median(t, axis=axis, keepdims=keepdims).numpy(),
                               np.median(x, axis=axis, keepdims=keepdims), rtol=1e-14)
    for q in (0.37, [0.0, 0.5, 1.0], [[0.1], [0.9]]):
        for method in ("linear", "lower", "higher", "nearest", "midpoint", "hazen", "weibull",
                       "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf"):
            got = np.quantile(t, q, axis=axis, keepdims=keepdims, method=method)
            want = np.quantile(x, q, axis=axis, keepdims=keepdims, method=method)
            assert got.shape == want.shape, (q, method)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, err_msg=f"{q} {method}")
    np.testing.assert_allclose(np.percentile(t, [25, 75], axis=axis, keepdims=keepdims).numpy(),
                               np.percentile(x, [25, 75], axis=axis, keepdims=keepdims),
                               rtol=1e-13)


def test_statistics_follow_numpys_dtypes_and_nan():
    x32 = _rng().normal(size=(3, 4)).astype(np.float32)
    ints = np.array([[3, 1, 2, 8], [5, 5, 0, 1]])
    for f in (lambda a: np.median(a, axis=1), lambda a: np.quantile(a, 0.3, axis=1),
              lambda a: np.percentile(a, 40.0), lambda a: np.quantile(a, 0.3, method="lower"),
              lambda a: np.quantile(a, np.array([0.5, 0.2]), axis=0),
              lambda a: np.nanmedian(a, axis=0)):
        for x in (x32, ints):
            got, want = f(c(x)), f(x)
            assert got.dtype == np.asarray(want).dtype, (x.dtype, got.dtype, want)
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-7)
    x = _with_nans()
    np.testing.assert_array_equal(np.isnan(np.median(c(x), axis=1).numpy()),
                                  np.isnan(np.median(x, axis=1)))
    np.testing.assert_allclose(np.quantile(c(x), [0.2, 0.8], axis=0).numpy(),
                               np.quantile(x, [0.2, 0.8], axis=0))
    assert np.isnan(float(np.median(c(x))))
    assert np.isnan(float(np.median(c(np.zeros(0)))))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True), ((0, 1), True)])
def test_nan_statistics_leave_nans_out(axis, keepdims):
    x = _with_nans()
    t = c(x)
    np.testing.assert_allclose(np.nanmedian(t, axis=axis, keepdims=keepdims).numpy(),
                               np.nanmedian(x, axis=axis, keepdims=keepdims))
    for q in (0.3, [0.0, 0.45, 1.0]):
        np.testing.assert_allclose(
            np.nanquantile(t, q, axis=axis, keepdims=keepdims).numpy(),
            np.nanquantile(x, q, axis=axis, keepdims=keepdims), rtol=1e-13)
        np.testing.assert_allclose(
            np.nanquantile(t, q, axis=axis, keepdims=keepdims, method="hazen").numpy(),
            np.nanquantile(x, q, axis=axis, keepdims=keepdims, method="hazen"), rtol=1e-13)
    np.testing.assert_allclose(np.nanpercentile(t, 90, axis=axis).numpy(),
                               np.nanpercentile(x, 90, axis=axis))


# -- compiled = eager ---------------------------------------------------------------------

def _program(x, a, v):
    return (np.sort(x, axis=0), np.argsort(x, axis=1), np.searchsorted(a, v),
            np.searchsorted(a, v, side="right"), np.median(x, axis=1),
            np.quantile(x, [0.25, 0.5], axis=0, keepdims=True), np.nanmedian(x, axis=0),
            np.nanquantile(x, [0.1, 0.9], axis=1))


def test_compiled_and_generated_python_match_eager():
    x = _with_nans()
    x[1, 3] = x[1, 1]                                       # a tie
    a = np.array([-1.0, 0.0, 0.0, 2.0, np.nan])
    v = np.array([[0.0, np.nan, 3.0], [-2.0, 2.0, 0.5]])
    want = _program(c(x), c(a), c(v))
    f = jt.function(_program)
    lowered = f.lower(x, a, v)
    for got in (f(x, a, v), lowered.python(x, a, v)):
        for k, (g, w) in enumerate(zip(got, want)):
            assert np.asarray(g).dtype == w.dtype, k
            np.testing.assert_array_equal(np.asarray(g), w.numpy(), err_msg=f"output {k}")


def test_compiled_sort_reads_sizes_at_run_time():
    f = jt.function(lambda x: (np.sort(x, axis=1), np.argsort(x, axis=0), jt.sum(np.sort(x) * x)))
    for rows in (3, 5):
        x = _rng(rows).normal(size=(rows, 4)).astype(np.float32)
        got = f(x)
        np.testing.assert_array_equal(got[0], np.sort(x, axis=1))
        np.testing.assert_array_equal(got[1], np.argsort(x, axis=0, kind="stable"))
        assert got[2].dtype == np.float32
    assert len(f._cache) == 1 and len(next(iter(f._cache.values()))) == 1


# -- gradients ----------------------------------------------------------------------------

def _losses():
    w = _rng(7).normal(size=(4, 5))
    return {
        "sort": lambda x: (jt.sum(np.sort(x, axis=1) * w)
                           + jt.sum(np.sort(x, axis=None) * w.reshape(-1) ** 2)),
        "partition": lambda x: jt.sum(np.partition(x, 2, axis=0) * w),
        # (odd and even lengths: one element, or half to each of two)
        "median": lambda x: (jt.sum(np.median(x, axis=0) * w[0, :5]) + np.median(x) * 3.0
                             + jt.sum(np.median(x, axis=1) * w[:, 0])),
        "quantile": lambda x: (
            jt.sum(np.quantile(x, [0.1, 0.5, 0.93], axis=1) * w[:3, :4])
            + jt.sum(np.percentile(x, 35.0, axis=(0, 1), keepdims=True))
            + jt.sum(np.quantile(x, [0.3, 0.6], axis=0, method="midpoint") * w[:2])),
        "nan statistics": lambda x: (jt.sum(np.nanmedian(x, axis=1) * w[:, 0])
                                     + jt.sum(np.nanquantile(x, [0.2, 0.7], axis=0) * w[:2])),
    }


@pytest.mark.parametrize("name", sorted(_losses()))
def test_gradients_match_finite_differences_eager_and_compiled(name):
    loss = _losses()[name]
    x = _rng(3).normal(size=(4, 5))
    if name == "nan statistics":
        x[1, 2] = x[3, 0] = x[3, 1] = np.nan
    t = c(x)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = loss(t)
    eager = tape.gradient(y, t).numpy()

    def f(values):
        return float(loss(c(values[0])))
    fd = numeric_grad(f, [x], 0)
    nan = np.isnan(x)
    np.testing.assert_allclose(eager[~nan], fd[~nan], rtol=1e-6, atol=1e-8)
    assert np.all(eager[nan] == 0)
    compiled = jt.grad(loss)(x)
    np.testing.assert_allclose(compiled, eager, rtol=1e-12, atol=1e-14)


def test_gradient_of_ties_follows_the_stable_order():
    x = c(np.array([1.0, 1.0, 0.0, 1.0]))
    w = np.array([10.0, 20.0, 30.0, 40.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.sum(np.sort(x) * w)
    # sorted: x[2], x[0], x[1], x[3] (equal elements keep their order)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [20.0, 30.0, 10.0, 40.0])
    np.testing.assert_array_equal(jt.grad(lambda a: jt.sum(np.sort(a) * w))(x.numpy()),
                                  [20.0, 30.0, 10.0, 40.0])


def test_second_derivatives_of_median_and_sort():
    def loss(x):
        return np.median(x ** 3, axis=0)[1] + jt.sum(np.sort(jt.sin(x), axis=1)[:, 0] ** 2)
    x = _rng(5).normal(size=(4, 3))
    t = c(x)
    with jt.GradientTape() as outer:
        outer.watch(t)
        with jt.GradientTape() as inner:
            inner.watch(t)
            y = loss(t)
        g = inner.gradient(y, t)
        gv = jt.sum(g * np.arange(12.0).reshape(4, 3))
    hv = outer.gradient(gv, t).numpy()

    def grad_dot(values):
        v = c(values[0])
        with jt.GradientTape() as tape:
            tape.watch(v)
            y = loss(v)
        return float(np.sum(tape.gradient(y, v).numpy() * np.arange(12.0).reshape(4, 3)))
    np.testing.assert_allclose(hv, numeric_grad(grad_dot, [x], 0), rtol=1e-5, atol=1e-7)
    h = jt.hessian(loss)(x)
    np.testing.assert_allclose(np.einsum("ijkl,kl->ij", h, np.arange(12.0).reshape(4, 3)), hv,
                               rtol=1e-10, atol=1e-12)


def test_forward_mode_through_sort_and_quantile():
    x = _rng(6).normal(size=(3, 4))
    u = _rng(8).normal(size=(3, 4))
    t = c(x)

    def f(a):
        return jt.sum(np.quantile(a, [0.3, 0.75], axis=1) ** 2) + jt.sum(np.sort(a, axis=0)[0])
    with jt.ForwardAccumulator(t, u) as acc:
        y = f(t)
    eps = 1e-6
    fd = (float(f(c(x + eps * u))) - float(f(c(x - eps * u)))) / (2 * eps)
    np.testing.assert_allclose(float(acc.jvp(y)), fd, rtol=1e-6)


# -- vmap ---------------------------------------------------------------------------------

def test_vmap_of_sort_median_and_searchsorted():
    X = _rng(9).normal(size=(5, 6))
    rows = jt.vmap(lambda r: (np.sort(r), np.argsort(r), np.median(r), np.quantile(r, [0.2, 0.9])))
    got = rows(X)
    np.testing.assert_array_equal(got[0], np.sort(X, axis=1))
    np.testing.assert_array_equal(got[1], np.argsort(X, axis=1, kind="stable"))
    np.testing.assert_allclose(got[2], np.median(X, axis=1), rtol=1e-14)
    np.testing.assert_allclose(got[3], np.quantile(X, [0.2, 0.9], axis=1).T, rtol=1e-14)
    grads = jt.vmap(jt.grad(lambda r: np.median(r * r)))(X)
    middle = np.argsort(X * X, axis=1)[:, 2:4]            # (an even length: two halves)
    want = np.zeros_like(X)
    np.put_along_axis(want, middle, np.take_along_axis(X, middle, 1), 1)
    np.testing.assert_allclose(grads, want, rtol=1e-14)
    # a batch of sorted arrays, one value each; one sorted array, a batch of values
    A = np.sort(X, axis=1)
    A[0, -1] = np.nan
    V = np.array([0.0, np.nan, 1.0, -5.0, 0.2])
    sides = jt.vmap(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right"),
                                  np.searchsorted(A[1], v), np.searchsorted(A[1], v, "right")))
    got = sides(A, V)
    for k, side in enumerate(("left", "right")):
        np.testing.assert_array_equal(got[k], [np.searchsorted(a, v, side) for a, v in zip(A, V)])
        np.testing.assert_array_equal(got[2 + k], np.searchsorted(A[1], V, side))
