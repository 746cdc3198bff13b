"""Out-of-range indices, bad labels and empty reductions raise, eager and compiled (CPU
and CUDA), instead of reading past a buffer or returning a number; and the gradients
that went wrong on a few small programs (a product holding a zero, a NumPy exponent of
several elements, new axes on a scalar)."""

import re

import numpy as np
import pytest

import jittape as jt

pytestmark = [pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning"),
              pytest.mark.usefixtures("cache_dir")]
HERE = re.escape(__file__.rsplit("/", 1)[-1])


def traces(f):
    return f.cache_info().traces


# -- int indices ------------------------------------------------------------------------

def test_int_index_out_of_range_eager_raises_index_error():
    x = jt.constant(np.ones(3))
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 3"):
        x[7]
    with pytest.raises(IndexError):
        np.ones(3)[7]                      # (the same as NumPy)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_int_index_in_range_when_traced_raises_when_out_of_range(target):
    g = jt.grad(lambda x: jt.sum(x[7] * x), target=target)
    np.testing.assert_allclose(g(np.ones(10)), [1, 1, 1, 1, 1, 1, 1, 11, 1, 1])
    with pytest.raises(IndexError, match=rf"getitem: index 7 is out of bounds for axis 0 with "
                                         rf"size 3 \(at .*{HERE}:\d+\)"):
        g(np.ones(3))
    with pytest.raises(IndexError, match="size 7"):
        g(np.ones(7))
    x = np.arange(8.0)
    np.testing.assert_allclose(g(x), x[7] + np.eye(8)[7] * x.sum())     # d(x7 * sum x)
    assert traces(g) == 1                  # an error, not a new trace


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_negative_int_index_checked_against_the_axis(target):
    f = jt.function(lambda x: x[:, -4] * 2, target=target)
    np.testing.assert_allclose(f(np.arange(10.0).reshape(2, 5)), [2, 12])
    np.testing.assert_allclose(f(np.arange(8.0).reshape(2, 4)), [0, 8])
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 1 with size 3"):
        f(np.ones((2, 3)))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_slices_with_constant_bounds_clamp_as_numpy(target):
    f = jt.function(lambda x: (x[2:5] * 2, x[-3:] + 1, x[::-2] * 1), target=target)
    g = jt.grad(lambda x: jt.sum(x[2:5] ** 2), target=target)
    for n in (10, 4, 3, 2, 0):
        x = np.arange(float(n))
        for got, want in zip(f(x), (x[2:5] * 2, x[-3:] + 1, x[::-2] * 1)):
            assert np.shape(got) == want.shape, n
            np.testing.assert_allclose(got, want)
        expected = np.zeros(n)
        expected[2:5] = 2 * x[2:5]
        if n >= 3:        # (n - 2 is 1 or 0 below: size-1 lengths are another signature)
            np.testing.assert_allclose(g(x), expected)


# -- index arrays, take -----------------------------------------------------------------

@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_take_out_of_range_raises_and_the_next_call_works(target):
    g = jt.grad(lambda x, i: jt.sum(jt.take(x, i) ** 2), target=target)
    np.testing.assert_allclose(g(np.arange(6.0), np.array([0, 2, 5])), [0, 0, 4, 0, 0, 10])
    with pytest.raises(IndexError, match=rf"index 5 is out of bounds for axis 0 with size 4 "
                                         rf"\(at .*{HERE}:\d+\)"):
        g(np.arange(4.0), np.array([0, 2, 5]))
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 0 with size 4"):
        g(np.arange(4.0), np.array([-5, 1]))
    np.testing.assert_allclose(g(np.arange(4.0), np.array([-4, 3])), [0, 0, 0, 6])


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_index_array_rows_match_numpy_and_are_checked(target):
    x = np.arange(12.0).reshape(3, 4)
    f = jt.function(lambda x, i: x[i] * 1.0, target=target)
    g = jt.grad(lambda x, i: jt.sum(x[:, i] ** 2), target=target)
    i = np.array([[0, 2], [-1, 1]])
    np.testing.assert_allclose(f(x, i), x[i])
    expected = np.zeros_like(x)
    np.add.at(expected, (slice(None), i), 2 * x[:, i])
    np.testing.assert_allclose(g(x, i), expected)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        f(x, np.array([[0, 3], [1, 1]]))
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        g(x, np.array([[0, 4], [1, 1]]))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_traced_row_index_is_checked_and_its_row_read_in_place(target):
    # x[i] with i a traced integer: a view of row i (no copy of the row), checked
    x = np.arange(12.0).reshape(3, 4)
    f = jt.function(lambda x, i: x[i] * 2.0 + x[i], target=target)
    g = jt.grad(lambda x, i: jt.sum(x[i] ** 2), target=target)
    for i in (0, 2, -1, -3):
        np.testing.assert_allclose(f(x, np.int64(i)), 3 * x[i])
        expected = np.zeros_like(x)
        expected[i] = 2 * x[i]
        np.testing.assert_allclose(g(x, np.int64(i)), expected)
    with pytest.raises(IndexError, match=rf"index 3 is out of bounds for axis 0 with size 3 "
                                         rf"\(at .*{HERE}:\d+\)"):
        f(x, np.int64(3))
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        g(x, np.int64(-4))
    # inside a loop, where the row of a carried history is read at each step
    def rows(x):
        return jt.fori_loop(0, 3, lambda k, acc: acc + x[2 - k] * (k + 1.0), jt.zeros_like(x[0]))
    np.testing.assert_allclose(jt.function(rows, target=target)(x), x[2] + 2 * x[1] + 3 * x[0])
    if target == "cpu":                 # the row is a view: a plain x[ix] after the check
        source = f.lower(x, np.int64(0)).source
        assert re.search(r"^ *v\d+ = \w+\[ix\d+\]$", source, re.M), source


def test_index_array_out_of_range_eager_raises():
    x = jt.Variable(np.ones((3, 4)))
    with pytest.raises(IndexError):
        with jt.GradientTape():
            jt.take(x, np.array([0, 3]), axis=0)


# -- labels -------------------------------------------------------------------------------

def test_label_out_of_range_eager_raises_naming_op_label_and_classes():
    logits = jt.Variable(np.zeros((2, 3)))
    with pytest.raises(IndexError, match=rf"sparse_softmax_cross_entropy: label 3 is outside "
                                         rf"the valid range \[0, 3\).*{HERE}"):
        with jt.GradientTape():
            jt.sparse_softmax_cross_entropy(np.array([0, 3]), logits)
    with pytest.raises(IndexError, match="label -1 "):
        jt.sparse_softmax_cross_entropy(np.array([-1, 0]), logits)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_label_out_of_range_compiled_raises(target):
    g = jt.grad(lambda logits, labels: jt.sum(jt.sparse_softmax_cross_entropy(labels, logits)),
                target=target)
    third = 1.0 / 3.0
    np.testing.assert_allclose(g(np.zeros((2, 3)), np.array([0, 2])),
                               [[third - 1, third, third], [third, third, third - 1]])
    with pytest.raises(IndexError, match=rf"label 3 is outside the valid range \[0, 3\) .*"
                                         rf"\(at .*{HERE}:\d+\)"):
        g(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(IndexError, match=r"label -1 is outside the valid range \[0, 3\)"):
        g(np.zeros((5, 3)), np.array([-1, 2, 0, 1, 1]))
    np.testing.assert_allclose(g(np.zeros((1, 2)), np.array([1]))[0], [0.5, -0.5])


def test_label_constant_in_compiled_code_raises_when_traced():
    labels = np.array([0, 5])
    f = jt.function(lambda logits: jt.sparse_softmax_cross_entropy(labels, logits))
    with pytest.raises(IndexError, match=r"label 5 is outside the valid range \[0, 3\)"):
        f(np.zeros((2, 3)))


def test_labels_of_a_variable_are_checked_at_every_call():
    labels = jt.Variable(np.array([0, 2]))
    f = jt.function(lambda logits: jt.sum(jt.sparse_softmax_cross_entropy(labels, logits)))
    np.testing.assert_allclose(f(np.zeros((2, 3))), 2 * np.log(3))
    labels.assign(np.array([0, 3]))
    with pytest.raises(IndexError, match=r"label 3 is outside the valid range \[0, 3\)"):
        f(np.zeros((2, 3)))


# -- reductions of empty arrays ------------------------------------------------------------

EMPTY = "zero-size array to reduction operation {} which has no identity"


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("op,name", [(jt.max, "maximum"), (jt.min, "minimum"),
                                     (np.max, "maximum"), (np.amin, "minimum")])
def test_max_min_of_an_empty_array_raise_as_numpy(op, name, target):
    with pytest.raises(ValueError, match=EMPTY.format(name)):
        op(np.zeros(0))
    with pytest.raises(ValueError, match=EMPTY.format(name)):
        op(jt.constant(np.zeros(0)))
    f = jt.function(lambda x: op(x) * 2, target=target)
    assert f(np.array([1.0, -3.0])) == 2 * op(np.array([1.0, -3.0]))
    with pytest.raises(ValueError, match=EMPTY.format(name) + rf".*{HERE}"):
        f(np.zeros(0))
    with pytest.raises(ValueError, match=EMPTY.format(name)):      # traced on it
        jt.function(lambda x: op(x))(np.zeros(0))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_max_along_an_axis_raises_only_for_non_empty_results(target):
    f = jt.function(lambda x: jt.max(x, axis=1) + 0.0, target=target)
    np.testing.assert_allclose(f(np.arange(6.0).reshape(2, 3)), [2, 5])
    assert f(np.zeros((0, 3))).shape == np.zeros((0, 3)).max(axis=1).shape == (0,)
    with pytest.raises(ValueError, match=EMPTY.format("maximum")):
        f(np.zeros((2, 0)))
    with pytest.raises(ValueError):
        np.zeros((2, 0)).max(axis=1)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_sum_and_mean_of_empty_arrays_keep_numpy_results(target):
    f = jt.function(lambda x: (jt.sum(x), jt.mean(x), jt.sum(x, axis=0)), target=target)
    f(np.ones((3, 2)))
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = (np.sum(np.zeros((0, 2))), np.mean(np.zeros((0, 2))), np.zeros((0, 2)).sum(0))
    with np.errstate(invalid="ignore"):
        got = f(np.zeros((0, 2)))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


# -- gradients found wrong by random programs ---------------------------------------------

def _tape_grad(fn, x):
    v = jt.Variable(np.asarray(x, dtype=float))
    with jt.GradientTape() as tape:
        y = fn(v)
    return tape.gradient(y, v).numpy()


@pytest.mark.parametrize("x,want", [([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]),
                                    ([0.0, 2.0, 0.0], [0.0, 0.0, 0.0]),
                                    ([1.0, 2.0, 3.0], [6.0, 3.0, 2.0])])
def test_prod_gradient_with_zeros(x, want):
    np.testing.assert_array_equal(_tape_grad(jt.prod, x), want)
    np.testing.assert_array_equal(jt.grad(jt.prod)(np.array(x)), want)


def test_prod_gradient_with_zeros_along_an_axis_and_second_derivative():
    x = np.array([[0.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 4.0]])
    want = [[6, 0, 0], [6, 3, 2], [0, 0, 0]]
    loss = lambda x: jt.sum(jt.prod(x, axis=1))           # noqa: E731
    np.testing.assert_array_equal(_tape_grad(loss, x), want)
    np.testing.assert_array_equal(jt.grad(loss)(x), want)
    # d2/dx0 dx1 of x0 * x1 * x2 at (0, 2, 3) is x2 = 3; the Hessian's row of x0: [0, 3, 2]
    h = jt.hessian(jt.prod)(np.array([0.0, 2.0, 3.0]))
    np.testing.assert_allclose(h, [[0, 3, 2], [3, 0, 0], [2, 0, 0]])
    h = jt.hessian(jt.prod)(np.array([0.0, 0.0, 3.0]))          # two zeros
    np.testing.assert_allclose(h, [[0, 3, 0], [3, 0, 0], [0, 0, 0]])


def test_power_with_a_numpy_exponent_of_several_elements():
    y = np.array([[1.5], [2.0]])
    x = np.array([1.0, 2.0])
    want = np.sum(y * x ** (y - 1), axis=0)
    loss = lambda x: jt.sum(x ** y)                        # noqa: E731
    np.testing.assert_allclose(_tape_grad(loss, x), want)
    np.testing.assert_allclose(jt.grad(loss)(x), want)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_new_axis_on_a_scalar(target):
    g = jt.grad(lambda x: jt.sum(x[None]), target=target)(np.float64(2.0))
    assert np.shape(g) == () and g == 1.0
    g2 = jt.grad(lambda x: jt.sum(x[None, None] * x), target=target)(np.float64(3.0))
    assert np.shape(g2) == () and g2 == 6.0
    f = jt.function(lambda x: (x @ x)[None], target=target)
    out = f(np.array([1.0, 2.0, 3.0]))
    assert out.shape == (1,) and out[0] == 14.0
    assert _tape_grad(lambda x: jt.sum(x[None]), 2.0).shape == ()


# -- axes of a 0-d value, and reductions over no axes ---------------------------------------

REDUCTIONS_OF_0D = [(jt.sum, np.sum), (jt.max, np.max), (jt.min, np.min), (jt.prod, np.prod),
                    (jt.logsumexp, lambda v, axis, keepdims: np.log(np.exp(v)))]


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("axis", [0, -1])
def test_reductions_of_a_0d_value_take_axis_0_and_minus_1_as_numpy(axis, target):
    x = np.float64(0.7)
    for op, np_op in REDUCTIONS_OF_0D:
        for keepdims in (False, True):
            want = np_op(np.asarray(x), axis=axis, keepdims=keepdims)
            got = op(jt.constant(x), axis=axis, keepdims=keepdims).numpy()
            assert got.shape == np.shape(want) == ()
            np.testing.assert_allclose(got, want)
    f = jt.function(lambda t: [op(t, axis=axis) * 2.0 for op, _ in REDUCTIONS_OF_0D], target=target)
    np.testing.assert_allclose(f(x), [2.0 * x, 2.0 * x, 2.0 * x, 2.0 * x, 2.0 * x])
    g = jt.grad(lambda t: sum(op(t, axis=axis) for op, _ in REDUCTIONS_OF_0D) * t, target=target)
    np.testing.assert_allclose(g(x), 2 * 5 * x)
    assert _tape_grad(lambda t: jt.max(t, axis=axis) * t, x) == 2 * x


def test_axes_out_of_bounds_on_a_0d_value_raise_as_numpy():
    x = np.array(0.7)
    for axis in [(0,), (-1,), 1, -2]:
        with pytest.raises(np.exceptions.AxisError):
            np.sum(x, axis=axis)
        with pytest.raises(ValueError, match=rf"sum: axis .* out of bounds for rank 0 .*{HERE}"):
            jt.sum(jt.constant(x), axis=axis)
        with pytest.raises(ValueError, match=rf"logsumexp: axis .* out of bounds for rank 0"):
            jt.function(lambda t: jt.logsumexp(t, axis=axis))(x)
    for axis in [0, -1]:                  # NumPy's mean, unlike its sum, rejects these
        with pytest.raises(np.exceptions.AxisError):
            np.mean(x, axis=axis)
        with pytest.raises(ValueError, match=rf"mean: axis {axis} is out of bounds for rank 0 .*{HERE}"):
            jt.mean(jt.constant(x), axis=axis)
        with pytest.raises(ValueError, match=rf"mean: axis {axis} is out of bounds for rank 0"):
            jt.grad(lambda t: jt.mean(t, axis=axis))(x)
    np.testing.assert_allclose(jt.mean(jt.constant(x), axis=()).numpy(), np.mean(x, axis=()))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_reductions_over_no_axes_are_the_identity(target):
    x = np.array([0.85, 1.25])
    for op, np_op in [(jt.max, np.max), (jt.prod, np.prod), (jt.logsumexp, None)]:
        g = jt.grad(lambda t: jt.sum(jt.sin(op(t, axis=())) * 2.0), target=target)
        np.testing.assert_allclose(g(x), 2.0 * np.cos(x))
        if np_op is not None:
            f = jt.function(lambda t: op(t, axis=(), keepdims=True) * 2.0, target=target)
            np.testing.assert_allclose(f(x), np_op(x, axis=(), keepdims=True) * 2.0)
    # a sum over no axes that stays a reduction of its own (not fused into its reader)
    w = np.array([0.3, 0.2])
    g = jt.grad(lambda t: jt.sum(jt.tan(jt.sum(t, axis=())) * w), target=target)
    np.testing.assert_allclose(g(x), w / np.cos(x) ** 2)
