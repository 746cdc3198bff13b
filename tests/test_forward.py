"""Forward mode: ``ForwardAccumulator`` (TensorFlow's semantics, on the eager path and in
compiled functions), and the compiled transforms built on it: ``jvp``, ``linearize``,
``hvp``, ``jacfwd`` and ``jacrev``. Every number is checked against finite differences
(per-op checks are registry tests in test_ops.py)."""

import dataclasses

import numpy as np
import pytest

import jittape as jt
from jittape import numpy as jnp

X = np.array([0.3, 0.7, 1.2])
W = np.array([1.0, 2.0, -1.0])
V = np.array([1.0, -2.0, 0.5])
EPS = 1e-6


def loss(x, w):
    return jnp.sum(jnp.sin(x) * jnp.exp(x) / (1.0 + x ** 2)) + jnp.tanh(x) @ w


def _fd(f, x, v, eps=EPS):
    return (np.asarray(f(x + eps * v)) - np.asarray(f(x - eps * v))) / (2 * eps)


# -- ForwardAccumulator ------------------------------------------------------------------

def test_accumulator_gives_the_directional_derivative():
    x = jt.constant(X)
    with jt.ForwardAccumulator(x, V) as acc:
        y = loss(x, W)
    np.testing.assert_allclose(acc.jvp(y).numpy(), _fd(lambda z: loss(z, W), X, V), rtol=1e-8)
    np.testing.assert_array_equal(acc.jvp(x).numpy(), V)        # a primal's own tangent


def test_accumulator_unconnected_and_pytrees():
    x, z = jt.constant(X), jt.constant(W)
    with jt.ForwardAccumulator({"x": x}, {"x": V}) as acc:
        y = jnp.sum(x * 2.0)
        other = z * 3.0
    assert acc.jvp(other) is None
    np.testing.assert_array_equal(acc.jvp(other, unconnected_gradients="zero").numpy(),
                                  np.zeros(3))
    got = acc.jvp({"a": y, "b": [x]})
    assert float(got["a"]) == pytest.approx(2.0 * V.sum())
    np.testing.assert_array_equal(got["b"][0].numpy(), V)


def test_accumulator_on_variables_and_float32():
    w = jt.Variable(np.array([1.0, 2.0], np.float32))
    with jt.ForwardAccumulator(w, np.array([1.0, 0.0])) as acc:
        y = jnp.sum(w * w)
    t = acc.jvp(y)
    assert t.dtype == np.float32 and float(t) == pytest.approx(2.0)


def test_forward_over_reverse_is_a_hessian_vector_product():
    x = jt.constant(X)
    with jt.ForwardAccumulator(x, V) as acc:
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = loss(x, W)
        g = tape.gradient(y, x)
    grad = jt.grad(loss)
    np.testing.assert_allclose(acc.jvp(g).numpy(), _fd(lambda z: grad(z, W), X, V), rtol=1e-7)


def test_reverse_over_forward_differentiates_the_tangent():
    x = jt.constant(X)
    with jt.GradientTape() as tape:
        tape.watch(x)
        with jt.ForwardAccumulator(x, V) as acc:
            y = loss(x, W)
        t = acc.jvp(y)
    h = tape.gradient(t, x)                      # d/dx <grad, v> = H v
    grad = jt.grad(loss)
    np.testing.assert_allclose(h.numpy(), _fd(lambda z: grad(z, W), X, V), rtol=1e-7)


def test_nested_accumulators_give_second_directional_derivatives():
    x = jt.constant(X)
    u = np.array([0.5, 0.1, -1.0])
    with jt.ForwardAccumulator(x, u) as outer:
        with jt.ForwardAccumulator(x, V) as inner:
            y = loss(x, W)
        t = inner.jvp(y)
    second = outer.jvp(t)                        # u^T H v
    grad = jt.grad(loss)
    want = float(np.dot(_fd(lambda z: grad(z, W), X, V), u))
    assert float(second) == pytest.approx(want, rel=1e-6)


def test_custom_rules_in_forward_mode():
    calls = []

    @jt.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append(1)
        (x,), (t,) = primals, tangents
        return jnp.sin(x), jnp.cos(x) * t

    @jt.custom_gradient
    def g(x):
        return jnp.exp(x), lambda dy: dy * jnp.exp(x)

    x = jt.constant(X)
    with jt.ForwardAccumulator(x, V) as acc:
        a, b = f(x), g(x)
    assert calls                                 # the user's rule, not a transposed VJP
    np.testing.assert_allclose(acc.jvp(a).numpy(), np.cos(X) * V, rtol=1e-12)
    # a custom gradient has no forward rule: its VJP transposed
    np.testing.assert_allclose(acc.jvp(b).numpy(), np.exp(X) * V, rtol=1e-12)


def test_accumulator_inside_a_compiled_function():
    @jt.function
    def f(x, v):
        with jt.ForwardAccumulator(x, v) as acc:
            y = loss(x, W)
        return y, acc.jvp(y)
    value, t = f(X, V)
    assert value == pytest.approx(float(loss(jt.constant(X), W)))
    assert t == pytest.approx(float(_fd(lambda z: loss(z, W), X, V)), rel=1e-7)


@pytest.mark.parametrize("make, error, words", [
    (lambda: jt.ForwardAccumulator(jt.constant(X), np.ones(4)), ValueError, ["tangent 0", "(4,)", "(3,)"]),
    (lambda: jt.ForwardAccumulator([jt.constant(X)], (V,)), ValueError, ["structure"]),
    (lambda: jt.ForwardAccumulator(X, V), TypeError, ["Tensors", "ndarray"]),
    (lambda: jt.ForwardAccumulator(jt.constant(np.arange(3)), V), TypeError, ["int64"]),
])
def test_accumulator_errors(make, error, words):
    with pytest.raises(error) as err:
        make()
    text = str(err.value)
    assert all(w in text for w in words) and __file__ in text, text


# -- jvp, linearize -----------------------------------------------------------------------

@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: np.ndarray


def model(p, x):
    return {"out": jnp.tanh(x @ p.w + p.b), "norm": jnp.sum(p.w ** 2)}


def test_jvp_of_pytrees_against_finite_differences():
    rng = np.random.default_rng(0)
    p = Params(rng.normal(size=(3, 2)), rng.normal(size=2))
    dp = Params(rng.normal(size=(3, 2)), rng.normal(size=2))
    x = rng.normal(size=(4, 3))
    value, tangent = jt.jvp(model, (p, x), (dp, np.zeros_like(x)))

    def at(s):
        return model(Params(p.w + s * EPS * dp.w, p.b + s * EPS * dp.b), x)
    for key in ("out", "norm"):
        want = (np.asarray(at(1)[key]) - np.asarray(at(-1)[key])) / (2 * EPS)
        np.testing.assert_allclose(np.asarray(tangent[key]), want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(np.asarray(value[key]), np.asarray(model(p, x)[key]), rtol=1e-12)


def test_jvp_keeps_float32_and_skips_integer_arguments():
    x = X.astype(np.float32)

    def f(x, n):                     # n: an index, no tangent
        return x * x[n]

    value, t = jt.jvp(f, (x, np.int64(1)), (V.astype(np.float32), np.int64(0)))
    assert np.asarray(t).dtype == np.float32 and np.asarray(value).dtype == np.float32
    np.testing.assert_allclose(t, V * X[1] + X * V[1], rtol=1e-6)


def test_linearize_evaluates_the_derivative_at_the_point():
    value, f_jvp = jt.linearize(loss, X, W)
    assert value == pytest.approx(float(loss(jt.constant(X), W)))
    for v in (V, np.array([0.0, 1.0, 0.0])):
        want = _fd(lambda z: loss(z, W), X, v)
        assert f_jvp(v, np.zeros(3)) == pytest.approx(float(want), rel=1e-7)


def test_jvp_errors_name_the_mismatch():
    with pytest.raises(ValueError, match=r"tangent 0 \(leaf 0\) has shape \(4,\), its primal \(3,\)"):
        jt.jvp(loss, (X, W), (np.ones(4), W))
    with pytest.raises(TypeError, match="must be tuples"):
        jt.jvp(loss, X, V)


# -- hvp, jacfwd, jacrev -----------------------------------------------------------------

def test_hvp_matches_finite_differences_of_the_gradient():
    grad = jt.grad(loss)
    np.testing.assert_allclose(jt.hvp(loss)(X, W, V), _fd(lambda z: grad(z, W), X, V), rtol=1e-7)
    hv_w = jt.hvp(loss, argnums=1)(X, W, V)      # loss is linear in w: zero curvature
    np.testing.assert_allclose(hv_w, np.zeros(3), atol=1e-12)
    both = jt.hvp(loss, argnums=(0, 1))(X, W, (V, V))
    g0 = jt.grad(loss, argnums=(0, 1))
    want = _fd(lambda z: np.concatenate(g0(z[:3], z[3:])), np.concatenate([X, W]),
               np.concatenate([V, V]))
    np.testing.assert_allclose(np.concatenate(both), want, rtol=1e-6, atol=1e-9)


def test_hvp_through_loops():
    def f(x):
        c, ys = jt.scan(lambda c, xi: (c * jnp.sin(xi) + xi, c * xi), 1.0, x)
        c = jt.while_loop(lambda s: s[1] < 3, lambda s: (s[0] * 0.9 + jnp.sin(s[0]), s[1] + 1),
                          (c, 0))[0]
        return c + jnp.sum(ys)
    grad = jt.grad(f)
    np.testing.assert_allclose(jt.hvp(f)(X, V), _fd(grad, X, V), rtol=1e-6)
    _, t = jt.jvp(f, (X,), (V,))
    assert float(t) == pytest.approx(float(_fd(f, X, V)), rel=1e-7)


def vector(x):
    return jnp.stack([jnp.sum(x ** 2), jnp.prod(x), jnp.max(x), x[0] * x[1]])


def test_jacfwd_and_jacrev_agree_with_finite_differences():
    want = np.stack([_fd(vector, X, e) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(jt.jacfwd(vector)(X), want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(jt.jacrev(vector)(X), want, rtol=1e-7, atol=1e-9)


def test_jacfwd_of_matrices_and_tuple_argnums():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3,))

    def f(a, b):
        return jnp.tanh(a @ b)

    ja, jb = jt.jacfwd(f, argnums=(0, 1))(a, b)
    assert ja.shape == (2, 2, 3) and jb.shape == (2, 3)
    ra, rb = jt.jacrev(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ja, ra, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jb, rb, rtol=1e-10, atol=1e-12)
    d = 1 - np.tanh(a @ b) ** 2
    np.testing.assert_allclose(jb, d[:, None] * a, rtol=1e-10)


# -- loops stay loops under forward mode ----------------------------------------------

def _loops(x):
    c, ys = jt.scan(lambda c, xi: (c * jnp.sin(xi) + xi, c * xi), 1.0, x)
    d = jt.fori_loop(0, 4, lambda i, d: jnp.tanh(d * 1.1 + x), x)
    e = jt.while_loop(lambda s: s[1] < 3, lambda s: (s[0] * 0.9 + jnp.sin(s[0]) * x, s[1] + 1),
                      (x, 0))[0]
    f = jt.cond(jnp.sum(x) > 0, lambda: d ** 2, lambda: -d)
    return c + jnp.sum(ys) + jnp.sum(f * e)


def test_jvp_through_compiled_loops_matches_finite_differences():
    _, t = jt.jvp(_loops, (X,), (V,))
    assert float(t) == pytest.approx(float(_fd(_loops, X, V)), rel=1e-7)
    x = jt.constant(X)
    with jt.ForwardAccumulator(x, V) as acc:           # eagerly: the same number
        y = _loops(x)
    assert float(acc.jvp(y)) == pytest.approx(float(t), rel=1e-12)


def test_a_loop_under_an_accumulator_is_compiled_once_whatever_its_length(monkeypatch):
    # (without rolling: an unrolled loop is not rolled back into one here)
    monkeypatch.setattr(jt.config, "roll_loops", False)

    def program(x, v):
        with jt.ForwardAccumulator(x, v) as acc:
            c, _ = jt.scan(lambda c, xi: (c * jnp.sin(xi) + xi, None), 1.0, x)
        return acc.jvp(c)

    f = jt.function(program)
    sizes = []
    for n in (4, 64):
        x, v = np.linspace(0.1, 1.0, n), np.ones(n)
        lowered = f.lower(x, v)
        sizes.append(len(lowered.ir.nodes))
        assert any(node.prim.name == "scan" for node in lowered.ir.nodes)
        got = f(x, v)

        def value(z):
            return jt.scan(lambda c, xi: (c * jnp.sin(xi) + xi, None), 1.0, jt.constant(z))[0]
        assert float(got) == pytest.approx(float(_fd(value, x, v)), rel=1e-6)
    assert sizes[0] == sizes[1], sizes


def test_jacfwd_of_a_loop():
    def f(x):
        return jt.scan(lambda c, xi: (c + xi * c, c), 1.0, x)[1]
    want = np.stack([_fd(f, X, e) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(jt.jacfwd(f)(X), want, rtol=1e-7, atol=1e-9)


# -- regressions ------------------------------------------------------------------------

def test_transforms_of_compiled_functions_nest():
    # a compiled function wrapping another took over the inner one's state (its
    # function, mode and cache): jt.grad(jt.grad(f)) returned the first derivative
    assert jt.grad(jt.grad(lambda x: x ** 3))(3.0) == pytest.approx(18.0)
    assert jt.grad(jt.function(lambda x: x ** 3))(2.0) == pytest.approx(12.0)

    def f(x):
        return jnp.sum(jnp.sin(x) * x ** 2)
    x = np.array([1.0, 2.0, 3.0])
    want = jt.hessian(f)(x)
    np.testing.assert_allclose(jt.jacfwd(jt.jacrev(f))(x), want, rtol=1e-12)
    np.testing.assert_allclose(jt.jacfwd(jt.grad(f))(x), want, rtol=1e-12)
    np.testing.assert_allclose(jt.jvp(jt.grad(f), (x,), (V,))[1], want @ V, rtol=1e-12)
    np.testing.assert_allclose(jt.hvp(jt.function(f))(x, V), want @ V, rtol=1e-12)


def test_jacfwd_serves_each_size_and_output_structure():
    J = jt.jacfwd(lambda x: jnp.exp(jnp.sin(x)) * 2.0)
    for n in (3, 5):
        x = np.linspace(0.1, 1.0, n)
        np.testing.assert_allclose(J(x), np.diag(2 * np.cos(x) * np.exp(np.sin(x))), rtol=1e-12)
    a, b = jt.jacfwd(lambda x: (x * 2.0, jnp.sum(x)))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(a, 2 * np.eye(2))
    np.testing.assert_array_equal(b, np.ones(2))
    assert jt.jacfwd(lambda x: x * 2.0)(np.zeros(0)).shape == (0, 0)


def test_integer_arguments_have_no_tangent():
    _, t = jt.jvp(lambda x, n: x[:n], (X, 2), (V, 0))
    np.testing.assert_array_equal(t, V[:2])
    _, t = jt.jvp(lambda x, n: x * n, (2.0, 3), (1.0, 0))
    assert t == 3.0
    with pytest.raises(ValueError, match="primal 1 .* is an integer"):
        jt.jvp(lambda x, n: x * n, (2.0, np.int64(3)), (1.0, np.int64(1)))


def test_forward_mode_limits_say_so():
    def residual(x, a):
        return x ** 3 - a

    a = jt.constant(np.array([8.0]))
    with pytest.raises(jt.UnsupportedError, match="forward mode through jt.custom_root"):
        with jt.ForwardAccumulator(a, np.ones(1)):
            jt.custom_root(lambda x: residual(x, a), np.array([1.0]),
                           lambda f, x0: np.array([2.0]))
    with pytest.raises(ValueError, match="given twice"):
        jt.ForwardAccumulator([a, a], [np.ones(1), np.ones(1)])


def test_linearize_keeps_the_point_it_was_given():
    x = X.copy()
    _, f_jvp = jt.linearize(lambda z: z ** 2, x)
    x[:] = 10.0
    np.testing.assert_allclose(f_jvp(V), 2 * X * V, rtol=1e-12)


def test_accumulator_warnings_name_the_users_line(recwarn):
    import warnings
    warnings.simplefilter("default")
    x = jt.constant(np.array([0.0]))
    with jt.ForwardAccumulator(x, np.ones(1)):
        jnp.log(x)
    found = [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert found and all(w.filename == __file__ for w in found), [(w.filename, str(w.message)) for w in found]


def test_tangents_live_as_long_as_their_values():
    x = jt.constant(np.linspace(0.0, 1.0, 1000))
    with jt.ForwardAccumulator(x, np.ones(1000)) as acc:
        y = x
        for _ in range(50):
            y = jnp.sin(y)
        kept = len(acc._by_id)
    assert kept <= 3, kept                  # x and y, not 50 steps' tangents
    want = np.ones(1000)
    z = np.linspace(0.0, 1.0, 1000)
    for _ in range(50):
        want, z = want * np.cos(z), np.sin(z)
    np.testing.assert_allclose(acc.jvp(y).numpy(), want, rtol=1e-12)


def test_jacobian_takes_forward_mode_when_the_value_has_more_axes():
    def outer(x):                                  # R^n -> R^(n x n): n columns, n^2 rows
        return jnp.sin(x)[:, None] * x[None, :]

    J = jt.jacobian(outer)
    for n in (3, 6):
        x = np.linspace(0.1, 1.0, n)
        want = np.stack([_fd(outer, x, e) for e in np.eye(n)], axis=-1)
        np.testing.assert_allclose(J(x), want, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(J(x), jt.jacrev(outer)(x), rtol=1e-12)
    assert J.cache_info().traces == 1                 # sizes are not read
    graph = J.lower(np.ones(4)).graph
    assert "jacobian_loop(" in str(graph)             # a loop over the input's elements

    def pair(a, b):
        return jnp.tanh(a[:, None] * b[None, :] + a[:, None])

    a, b = np.array([0.1, 0.2]), np.array([0.3, 0.4, 0.5])
    ja, jb = jt.jacobian(pair, argnums=(0, 1))(a, b)   # rank 2 = 1 + 1: by rows
    fa, fb = jt.jacfwd(pair, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ja, fa, rtol=1e-12)
    np.testing.assert_allclose(jb, fb, rtol=1e-12)
