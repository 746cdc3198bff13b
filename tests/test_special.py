"""scipy.special's functions (``jittape/ops/special.py``, ``jt.scipy.special``): SciPy's
values, SciPy's ufuncs reaching the ops on tensors, gradients by finite differences,
eager and compiled. (Each op's examples also go through the registry tests.)"""

import numpy as np
import pytest
import scipy.special as sp

import jittape as jt
from jittape.codegen.special import digamma_f64, polygamma_f64

S = jt.scipy.special


def test_digamma_and_polygamma_match_scipy():
    xs = np.concatenate([np.linspace(-7.3, 30, 301), [1e-8, 0.5, 1e3, 1e6, -0.5, -2.5]])
    for x in xs:
        want = sp.digamma(x)
        assert abs(digamma_f64(x) - want) <= 1e-13 * max(1.0, abs(want)), x
        for n in (1, 2, 3):
            want = sp.polygamma(n, x)
            assert abs(polygamma_f64(n, x) - want) <= 1e-13 * abs(want), (n, x)
    # the poles give what SciPy gives
    for n, x in ((0, 0.0), (0, -2.0), (1, 0.0), (2, -1.0), (3, -3.0)):
        np.testing.assert_equal(polygamma_f64(n, x), sp.polygamma(n, x))


def _calls(x, y):
    return [S.erf(x), S.erfc(x), S.gammaln(y), S.digamma(y), S.polygamma(1, y),
            S.polygamma(2, y), S.xlogy(y, y), S.xlog1py(x * x, y), S.logit(y * 0.3),
            S.expit(x), S.logsumexp(x), S.softmax(x), S.log_softmax(x)]


def _reference(x, y):
    return [sp.erf(x), sp.erfc(x), sp.gammaln(y), sp.digamma(y), sp.polygamma(1, y),
            sp.polygamma(2, y), sp.xlogy(y, y), sp.xlog1py(x * x, y), sp.logit(y * 0.3),
            sp.expit(x), sp.logsumexp(x), sp.softmax(x), sp.log_softmax(x)]


X = np.array([-1.3, -0.2, 0.4, 1.7])
Y = np.array([0.3, 0.9, 1.6, 2.8])


def test_values_eager_and_compiled():
    want = _reference(X, Y)
    eager = _calls(jt.constant(X), jt.constant(Y))
    compiled = jt.function(lambda x, y: tuple(_calls(x, y)))(X, Y)
    for k, (e, c, w) in enumerate(zip(eager, compiled, want)):
        np.testing.assert_allclose(e.numpy(), w, rtol=1e-12, atol=1e-14, err_msg=f"call {k}")
        np.testing.assert_allclose(c, w, rtol=1e-12, atol=1e-14, err_msg=f"call {k}")


def test_scipys_ufuncs_reach_the_ops():
    t = jt.constant(Y)
    for f in (sp.erf, sp.erfc, sp.gammaln, sp.digamma, sp.psi, sp.expit, sp.logit):
        got = f(t * 0.3)
        assert isinstance(got, jt.Tensor), f
        np.testing.assert_allclose(got.numpy(), f(Y * 0.3), rtol=1e-12)
    assert isinstance(sp.xlogy(t, t), jt.Tensor) and isinstance(sp.xlog1py(t, t), jt.Tensor)


def test_gradients_match_finite_differences():
    def loss(x, y):
        return sum(jt.sum(v * (k + 1)) for k, v in enumerate(_calls(x, y)))

    def numeric(x, y):
        return float(loss(jt.constant(x), jt.constant(y)))
    gx, gy = jt.grad(loss, argnums=(0, 1))(X, Y)
    xv, yv = jt.Variable(X), jt.Variable(Y)
    with jt.GradientTape() as tape:
        value = loss(xv, yv)
    ex, ey = tape.gradient(value, [xv, yv])
    eps = 1e-6
    for k, (got, tape_got, base) in enumerate(((gx, ex, X), (gy, ey, Y))):
        want = np.zeros_like(base)
        for i in range(base.size):
            plus, minus = [X.copy(), Y.copy()], [X.copy(), Y.copy()]
            plus[k][i] += eps
            minus[k][i] -= eps
            want[i] = (numeric(*plus) - numeric(*minus)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(tape_got.numpy(), want, rtol=1e-6, atol=1e-7)


def test_xlogy_is_zero_with_zero_gradients_where_x_is_zero():
    x, y = jt.Variable(np.array([0.0, 2.0])), jt.Variable(np.array([0.0, 3.0]))
    with jt.GradientTape() as tape:
        z = jt.sum(S.xlogy(x, y))
    gx, gy = tape.gradient(z, [x, y])
    assert np.isfinite(gx.numpy()).all() and np.isfinite(gy.numpy()).all()
    np.testing.assert_allclose(gy.numpy(), [0.0, 2.0 / 3.0])
    # d/dx at x = 0 is log(y), as JAX's (0 where y = 0: outside the log's domain)
    x2, y2 = jt.Variable(np.array([0.0, 0.0])), jt.Variable(np.array([2.0, -1.0]))
    with jt.GradientTape() as tape:
        z = jt.sum(S.xlogy(x2, y2)) + jt.sum(S.xlog1py(x2, y2 - 0.5))
    np.testing.assert_allclose(tape.gradient(z, x2).numpy(), [np.log(2.0) + np.log1p(1.5), 0.0])
    np.testing.assert_allclose(S.xlogy(x2, y2).numpy(), [0.0, 0.0])


def test_edges_compiled_as_eager():
    f = jt.function(lambda a, b: (S.digamma(a), S.digamma(b), S.polygamma(1, b)))
    neg_zero, flags = np.array([-0.0, 0.0]), np.array([True, False])
    d0, db, pb = f(neg_zero, flags)
    np.testing.assert_equal(d0, sp.digamma(neg_zero))          # +inf at -0, -inf at +0
    np.testing.assert_allclose(db, sp.digamma(flags.astype(float)))
    np.testing.assert_allclose(pb, sp.polygamma(1, flags.astype(float)))
    ints = np.array([1, 2], np.int8)
    assert jt.function(lambda a: S.expit(a))(ints).dtype == sp.expit(ints).dtype


def test_digamma_on_cuda_says_it_is_cpu_only():
    with pytest.raises(jt.UnsupportedError, match="digamma"):
        jt.function(lambda y: S.digamma(y), target="cuda")(Y)
