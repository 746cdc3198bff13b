"""argnums and static_argnums of compiled gradients, as in JAX: negative positions count
from the end, repeated or out-of-range ones are errors, gradients come in the order
given."""

import os

import numpy as np
import pytest

import jittape as jt

THIS_FILE = os.path.basename(__file__)

pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")


def loss(w, x):
    return jt.sum(w * x * x)


def eager_grads(fn, args, argnums):
    args = [jt.constant(a) for a in args]
    with jt.GradientTape() as tape:
        for i in argnums:
            tape.watch(args[i])
        value = fn(*args)
    return [g.numpy() for g in tape.gradient(value, [args[i] for i in argnums])]


W, X = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])


def test_a_negative_argnum_counts_from_the_end():
    g = jt.grad(loss, argnums=-1)
    np.testing.assert_allclose(g(W, X), eager_grads(loss, (W, X), [1])[0])
    np.testing.assert_allclose(g(W, X), 2 * W * X)
    g2 = jt.value_and_grad(loss, argnums=(-2, -1))
    value, (gw, gx) = g2(W, X)
    np.testing.assert_allclose(value, loss(jt.constant(W), jt.constant(X)).numpy())
    np.testing.assert_allclose(gw, X * X)
    np.testing.assert_allclose(gx, 2 * W * X)


def test_gradients_come_in_the_order_of_argnums():
    gx, gw = jt.grad(loss, argnums=(1, 0))(W, X)
    want_x, want_w = eager_grads(loss, (W, X), [1, 0])
    np.testing.assert_allclose(gx, want_x)
    np.testing.assert_allclose(gw, want_w)
    # nested arguments, the same
    def f(p, x):
        return jt.sum(p["a"] * x) + jt.sum(p["b"] ** 2)

    gx, gp = jt.grad(f, argnums=(-1, 0))({"a": W, "b": X}, X)
    np.testing.assert_allclose(gx, W)
    np.testing.assert_allclose(gp["a"], X)
    np.testing.assert_allclose(gp["b"], 2 * X)


def test_a_repeated_argnum_raises_naming_it():
    with pytest.raises(ValueError, match=r"argnums=\(1, 1\) names an argument twice"):
        jt.grad(loss, argnums=(1, 1))
    g = jt.grad(loss, argnums=(0, -2))               # the same argument once resolved
    with pytest.raises(ValueError, match=rf"argnums=\(0, -2\) names one argument twice for a "
                       rf"call with 2 positional arguments \(resolved: \(0, 0\)\).*{THIS_FILE}"):
        g(W, X)


def test_an_out_of_range_argnum_raises_naming_the_count():
    for argnums in (2, -3, (0, 5)):
        with pytest.raises(ValueError, match=rf"out of range for a call with 2 positional "
                           rf"arguments.*{THIS_FILE}:\d+"):
            jt.grad(loss, argnums=argnums)(W, X)
    with pytest.raises(ValueError, match="1 positional argument "):
        jt.grad(lambda x: jt.sum(x), argnums=1)(W)


def test_static_argnums_are_constants_of_the_signature():
    f = jt.function(lambda x, scale: x * scale, static_argnums=1)
    x = np.ones(2, np.float32)
    for scale in (0.5, 0.25, 0.5):
        out = f(x, scale)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, x * scale)
    assert f.cache_info().traces == 2                 # one per value
    assert "float64" not in f.lower(x, 0.5).graph     # a constant, not an input
    g = jt.grad(lambda x, n, s: jt.sum(x ** n) * s, static_argnums=(-1,))
    np.testing.assert_allclose(g(W, 2, 0.5), W)
    np.testing.assert_allclose(g(W, 3, 0.5), 1.5 * W ** 2)


def test_static_argnums_errors():
    with pytest.raises(ValueError, match=r"argument 0 is in both argnums and static_argnums"):
        jt.grad(lambda x: jt.sum(x), static_argnums=0)(W)
    with pytest.raises(TypeError, match=rf"argument 1 is in static_argnums but a ndarray is "
                       rf"not hashable.*{THIS_FILE}"):
        jt.function(lambda x, y: x, static_argnums=1)(W, W)
    with pytest.raises(ValueError, match="static_argnums=\\(3,\\) is out of range"):
        jt.function(lambda x: x, static_argnums=3)(W)
