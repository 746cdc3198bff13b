"""Compiled code keeps the tape's semantics: stop_gradient, custom gradients (the seed
tutorial's examples, with its numbers), tapes opened in a compiled function (watching
constants and variables), and concurrent first calls."""

import threading

import numpy as np
import pytest

import jittape as jt
from test_seeds import my_better_softplus, my_softplus   # the tutorial's own functions

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                         "ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.usefixtures("cache_dir")]


def eager_gradient(fn, x):
    x = jt.Variable(x)
    with jt.GradientTape() as tape:
        z = fn(x)
    return tape.gradient(z, [x])[0].numpy()


def test_stop_gradient_compiled_gives_the_tutorials_numbers():
    def f(w1, w2):
        return 3 * w1 ** 2 + jt.stop_gradient(2 * w1 * w2)

    value, (g1, g2) = jt.value_and_grad(f, argnums=(0, 1))(np.float32(5), np.float32(3))
    assert value == 105 and g1 == 30
    assert g2 == 0            # unconnected: zeros at the compiled API's boundary, as in JAX


def test_naive_softplus_gradient_is_nan_compiled_as_on_the_tape():
    g = jt.grad(my_softplus)(np.float32(100.0))
    assert np.isnan(g) and np.isnan(eager_gradient(my_softplus, 100.0))


def test_custom_gradient_is_honoured_compiled():
    f = jt.value_and_grad(my_better_softplus)
    value, g = f(np.float32(100.0))
    assert g == np.float32(1.0)                      # the tutorial's number
    assert value == np.inf                           # exp(100) overflows float32, as on the tape
    assert g == eager_gradient(my_better_softplus, 100.0)
    x = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(my_better_softplus(x)))(x),
                               1 / (1 + np.exp(-x)), rtol=1e-12)
    graph = jt.grad(my_better_softplus).lower(np.float32(1.0)).graph
    assert "= custom_gradient(" not in graph            # a marker for autodiff only


def test_custom_gradient_is_differentiated_again_for_hessians():
    h = jt.hessian(lambda x: jt.sum(my_better_softplus(x)))(np.array([-1.0, 0.0, 2.0]))
    s = 1 / (1 + np.exp(-np.array([-1.0, 0.0, 2.0])))
    np.testing.assert_allclose(h, np.diag(s * (1 - s)), rtol=1e-12, atol=1e-15)


def test_custom_gradient_with_a_none_and_a_constant_gradient():
    @jt.custom_gradient
    def scaled(x, scale):
        def grad(dy):
            return jt.clip(dy, -1.0, 1.0), None
        return x * scale, grad

    @jt.custom_gradient
    def straight_through(x):
        return jt.where(x > 0, 1.0, 0.0), lambda dy: jt.constant(np.ones(3))

    x = np.array([0.5, -2.0, 3.0])
    np.testing.assert_array_equal(jt.grad(lambda x: jt.sum(scaled(x, 3.0) * 5))(x), np.ones(3))
    np.testing.assert_array_equal(jt.grad(lambda x: jt.sum(straight_through(x)))(x), np.ones(3))


def test_concurrent_first_calls_compile_once_and_agree():
    f = jt.value_and_grad(lambda w, x: jt.sum(jt.tanh(x @ w) ** 2))
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3))
    xs = [rng.normal(size=(8 + k, 4)) for k in range(6)]
    want = []
    for x in xs:
        wt = jt.Variable(w)
        with jt.GradientTape() as tape:
            value = jt.sum(jt.tanh(jt.constant(x) @ wt) ** 2)
        want.append((value.numpy(), tape.gradient(value, wt).numpy()))
    results = [None] * len(xs)
    start = threading.Barrier(len(xs))

    def work(k):
        start.wait()
        for _ in range(20):
            results[k] = f(w, xs[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (value, grad), (want_value, want_grad) in zip(results, want):
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.disk_hits == 1
    assert info.hits == len(xs) * 20 - 1


def eager_and_compiled(fn, *args):
    """``fn`` run eagerly (its arguments as constants) and compiled, as NumPy values."""
    def numpy(x):
        return None if x is None else np.asarray(x)
    eager = jt.tree.map(numpy, fn(*[jt.constant(a) for a in args]))
    return eager, jt.tree.map(numpy, jt.function(fn)(*args))


@pytest.mark.parametrize("value", [1.0, np.float64(1.0), np.array(1.0), np.array([1.0, 2.0])],
                         ids=["float", "float64", "0-d", "1-d"])
def test_tape_watching_a_constant_in_a_compiled_function(value):
    def h(a):
        x = jt.constant(value)
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.sum(x ** 3 + a * x)      # x read twice: a NumPy scalar is two constants
        return tape.gradient(y, x)

    eager, compiled = eager_and_compiled(h, np.float64(2.0))
    np.testing.assert_allclose(compiled, 3 * np.asarray(value) ** 2 + 2, rtol=1e-6)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)


def test_tape_watching_constants_gradients_of_several_kinds():
    def h(a):
        x, z, one = jt.constant(1.5), jt.constant(1.5), jt.constant(1.0)
        with jt.GradientTape(persistent=True) as tape:
            tape.watch([x, one])
            y = x ** 2 * a + z * a           # z holds x's value and is not watched
            w = x * 3.0
        return (tape.gradient(y, [x, z]), tape.gradient(w, x), tape.gradient(x, x),
                tape.gradient(y, one), tape.gradient(y, one, unconnected_gradients="zero"),
                tape.gradient(w, x, output_gradients=jt.constant(2.0)))

    eager, compiled = eager_and_compiled(h, np.float64(2.0))
    assert compiled[0][1] is None and compiled[3] is None
    np.testing.assert_allclose(compiled[0][0], 6.0)
    assert [compiled[1], compiled[2], compiled[4], compiled[5]] == [3.0, 1.0, 0.0, 6.0]
    assert eager[0][1] is None and eager[3] is None
    assert [eager[0][0], eager[1], eager[2], eager[4], eager[5]] == \
        [compiled[0][0], compiled[1], compiled[2], compiled[4], compiled[5]]


def test_nested_tapes_watching_a_constant_give_the_second_derivative_compiled():
    def h(a):
        x = jt.constant(2.0)
        with jt.GradientTape() as outer:
            outer.watch(x)
            with jt.GradientTape() as inner:
                inner.watch(x)
                y = x ** 3 * a
            g = inner.gradient(y, x)
        return g, outer.gradient(g, x)

    eager, compiled = eager_and_compiled(h, np.float64(1.0))
    assert compiled == (12.0, 12.0) and eager == compiled       # 3x**2 and 6x at x = 2


@pytest.mark.parametrize("value", [1.5, np.array([1.0, 2.0, 3.0])], ids=["scalar", "vector"])
def test_tape_jacobian_at_a_constant_in_a_compiled_function(value):
    def h(a):
        x = jt.constant(value)
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.stack([x ** 2 * a, x * 3.0])
        return tape.jacobian(y, x)

    eager, compiled = eager_and_compiled(h, np.float64(2.0))
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)
    np.testing.assert_allclose(compiled[0], np.diag(np.atleast_1d(4.0 * np.asarray(value)))
                               .reshape(compiled[0].shape), rtol=1e-6)


def test_tape_watching_a_variable_in_a_compiled_function():
    v = jt.Variable(1.5)

    def h(a):
        w = jt.Variable(0.5, trainable=False)
        with jt.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch([v, w])
            y = v ** 3 + a * v * w + w
        return tape.gradient(y, [v, w])

    eager, compiled = eager_and_compiled(h, np.float64(2.0))
    np.testing.assert_allclose(compiled, [3 * 1.5 ** 2 + 1.0, 2.0 * 1.5 + 1], rtol=1e-6)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)


def test_two_constants_of_one_array_in_a_recorded_op_raise_compiled():
    def h(a):
        values = np.array([1.0, 2.0])
        x, z = jt.constant(values), jt.constant(values)     # one array: one graph value
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.sum(x * a * z)
        return tape.gradient(y, x)

    with pytest.raises(jt.UnsupportedError, match="multiply reads a NumPy array"):
        jt.function(h)(np.float64(2.0))
