"""Compiled code keeps the tape's semantics: stop_gradient, custom gradients (the seed
tutorial's examples, with its numbers), and concurrent first calls."""

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
