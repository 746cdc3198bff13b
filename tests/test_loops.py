"""scan, fori_loop, while_loop, cond and switch with JAX's semantics: eager and compiled
agree with each other and with finite differences."""

import dataclasses

import numpy as np
import pytest

import jittape as jt


def _rnn(w, xs):
    def step(h, x):
        h = jt.tanh(h @ w + x)
        return h, jt.sum(h)
    h, ys = jt.scan(step, jt.zeros((2, 3), jt.float64), xs)
    return jt.sum(h * h) + jt.sum(ys)


def _numeric(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
    return g


def test_scan_eager_compiled_and_finite_differences_agree():
    rng = np.random.default_rng(0)
    w, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(5, 2, 3))
    t = jt.constant(w)
    with jt.GradientTape() as tape:
        tape.watch(t)
        loss = _rnn(t, xs)
    eager = tape.gradient(loss, t).numpy()
    value, compiled = jt.value_and_grad(_rnn)(w, xs)
    np.testing.assert_allclose(value, float(loss), rtol=1e-12)
    np.testing.assert_allclose(compiled, eager, rtol=1e-10)
    np.testing.assert_allclose(compiled, _numeric(lambda w: _rnn(w, xs), w), rtol=1e-6)


def test_scan_of_another_length_traces_again():
    f = jt.value_and_grad(_rnn)
    w = np.eye(3) * 0.3
    for n in (4, 7, 4):
        xs = np.ones((n, 2, 3)) * 0.1
        np.testing.assert_allclose(f(w, xs)[0], float(_rnn(jt.constant(w), xs)), rtol=1e-12)


def test_scan_reverse_pytrees_and_none_outputs():
    xs = {"a": np.arange(4.0), "b": np.arange(4.0) * 10}

    def step(c, x):
        return {"s": c["s"] + x["a"] * x["b"]}, (c["s"], None)

    carry, (seen, nothing) = jt.scan(step, {"s": jt.constant(0.0, jt.float64)}, xs,
                                     reverse=True)
    assert float(carry["s"]) == 140.0 and nothing is None
    np.testing.assert_array_equal(np.asarray(seen), [140.0, 130.0, 90.0, 0.0])
    carry, ys = jt.scan(lambda c, _: (c + 1, c), jt.constant(0.0), None, length=3)
    np.testing.assert_array_equal(np.asarray(ys), [0.0, 1.0, 2.0])


def test_a_carry_that_changes_shape_or_dtype_is_an_error():
    with pytest.raises(TypeError, match="carry leaf 0 changed from float64\\[3\\] to float64\\[1, 3\\]"):
        jt.scan(lambda c, x: (c[None], x), jt.zeros(3, jt.float64), np.ones((2, 3)))
    with pytest.raises(TypeError, match="float32"):
        jt.fori_loop(0, 2, lambda i, c: jt.cast(c, jt.float32), jt.zeros(3, jt.float64))


def test_fori_loop_and_dataclass_carries():
    @dataclasses.dataclass
    class State:
        x: object
        v: object

    def f(k):
        def body(i, s):
            return State(s.x + 0.1 * s.v, s.v - 0.1 * k * s.x)
        s = jt.fori_loop(0, 20, body, State(jt.constant(1.0, jt.float64),
                                            jt.constant(0.0, jt.float64)))
        return s.x

    eager = f(jt.constant(2.0, jt.float64))
    np.testing.assert_allclose(jt.function(f)(np.float64(2.0)), float(eager), rtol=1e-12)
    np.testing.assert_allclose(jt.grad(f)(np.float64(2.0)), _numeric(f, np.array(2.0)),
                               rtol=1e-6)


def test_while_loop_with_a_data_dependent_trip_count_differentiates():
    def newton_sqrt(a):
        def body(c):
            x, i = c
            return 0.5 * (x + a / x), i + 1
        x, _ = jt.while_loop(lambda c: jt.abs(c[0] * c[0] - a) > 1e-12 * a, body,
                             (a * 0 + 1.0, 0))
        return x

    f = jt.grad(newton_sqrt)
    for a in (2.0, 50.0, 2.0):              # another trip count: another variant
        np.testing.assert_allclose(jt.function(newton_sqrt)(np.float64(a)), np.sqrt(a),
                                   rtol=1e-12)
        np.testing.assert_allclose(f(np.float64(a)), 0.5 / np.sqrt(a), rtol=1e-8)


def test_cond_and_switch_run_one_branch_eager_and_compiled():
    def f(x):
        return jt.cond(jt.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)

    def g(x, k):
        return jt.switch(k, [lambda v: v, lambda v: v * v, lambda v: jt.sin(v)], x)

    x = np.array([1.0, -0.5])
    for sign in (1.0, -1.0, 1.0):
        np.testing.assert_allclose(jt.grad(lambda x: jt.sum(f(x)))(sign * x),
                                   np.full(2, 2.0 if sign > 0 else -1.0))
    for k, want in ((-3, np.ones(2)), (1, 2 * x), (2, np.cos(x)), (9, np.cos(x))):
        np.testing.assert_allclose(jt.grad(lambda x: jt.sum(g(x, k)))(x), want, rtol=1e-12)
    with pytest.raises(TypeError, match="scalar"):
        jt.cond(np.array([True, False]), lambda: 1, lambda: 2)
