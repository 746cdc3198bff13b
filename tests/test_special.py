"""scipy.special's functions (``jittape/ops/special.py``, ``jt.scipy.special``): SciPy's
values, SciPy's ufuncs reaching the ops on tensors, gradients by finite differences,
eager and compiled. (Each op's examples also go through the registry tests.)"""

import numpy as np
import pytest
import scipy.special as sp

import jittape as jt
from opcheck import numeric_grad
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


# -- erfinv, ndtri, log_ndtr, the Bessel functions, gammainc and the composites ---------------

def _more(x, p, a):
    """Each new function once, on x in (-2, 2), p in (0, 1) and a in (0.5, 3)."""
    return [S.erfinv(x * 0.45), S.erfcinv(p * 1.8), S.ndtri(p), S.ndtr(x), S.log_ndtr(x * 3),
            S.log_expit(x * 4), S.gamma(a - 0.2), S.beta(a, p + 0.3), S.betaln(a, a * p),
            S.multigammaln(a + 1, 2), S.i0(x), S.i1(x), S.i0e(x), S.i1e(x),
            S.gammainc(1.7, a * 2), S.gammaincc(0.6, a), S.entr(p), S.rel_entr(p, a),
            S.kl_div(a, p), S.boxcox(a, x * 0.3)]


def _more_reference(x, p, a):
    return [sp.erfinv(x * 0.45), sp.erfcinv(p * 1.8), sp.ndtri(p), sp.ndtr(x), sp.log_ndtr(x * 3),
            sp.log_expit(x * 4), sp.gamma(a - 0.2), sp.beta(a, p + 0.3), sp.betaln(a, a * p),
            sp.multigammaln(a + 1, 2), sp.i0(x), sp.i1(x), sp.i0e(x), sp.i1e(x),
            sp.gammainc(1.7, a * 2), sp.gammaincc(0.6, a), sp.entr(p), sp.rel_entr(p, a),
            sp.kl_div(a, p), sp.boxcox(a, x * 0.3)]


P = np.array([0.05, 0.3, 0.62, 0.97])
A = np.array([0.6, 1.1, 2.2, 2.9])


def _values_match_scipy(calls, reference):
    """``calls(x, p, a)`` (a list of scipy.special calls) eager and compiled against
    ``reference`` (the same calls on NumPy values)."""
    want = reference(X, P, A)
    eager = calls(jt.constant(X), jt.constant(P), jt.constant(A))
    compiled = jt.function(lambda x, p, a: tuple(calls(x, p, a)))(X, P, A)
    for k, (e, c, w) in enumerate(zip(eager, compiled, want)):
        np.testing.assert_allclose(e.numpy(), w, rtol=1e-13, atol=1e-15, err_msg=f"call {k}")
        np.testing.assert_allclose(c, w, rtol=1e-13, atol=1e-15, err_msg=f"call {k}")


def _gradients_match_finite_differences(calls):
    """The gradient of a weighted sum of ``calls(x, p, a)``, eager and compiled, against
    central differences."""
    def loss(x, p, a):
        return sum(jt.sum(v * (0.5 + 0.1 * k)) for k, v in enumerate(calls(x, p, a)))

    points = [X, P, A]
    compiled = jt.grad(loss, argnums=(0, 1, 2))(*points)
    variables = [jt.Variable(v) for v in points]
    with jt.GradientTape() as tape:
        value = loss(*variables)
    eager = tape.gradient(value, variables)
    for k in range(len(points)):
        want = numeric_grad(lambda values: float(loss(*map(jt.constant, values))), points, k)
        np.testing.assert_allclose(eager[k].numpy(), want, rtol=1e-6, atol=1e-7, err_msg=k)
        np.testing.assert_allclose(compiled[k], want, rtol=1e-6, atol=1e-7, err_msg=k)
        np.testing.assert_allclose(compiled[k], eager[k].numpy(), rtol=1e-12, err_msg=k)


def test_more_values_eager_and_compiled():
    _values_match_scipy(_more, _more_reference)


def test_more_gradients_match_finite_differences_eager_and_compiled():
    _gradients_match_finite_differences(_more)


@pytest.mark.parametrize("f, x, second", [
    (S.erfinv, np.array([-0.6, 0.1, 0.8]), lambda x: 2 * sp.erfinv(x) * (
        np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(x) ** 2)) ** 2),
    (S.ndtri, np.array([0.1, 0.5, 0.9]), lambda p: sp.ndtri(p) * (
        np.sqrt(2 * np.pi) * np.exp(sp.ndtri(p) ** 2 / 2)) ** 2),
    (S.i0, np.array([-1.5, 0.0, 2.0]), lambda x: sp.i0(x) - np.where(
        x == 0, 0.5, sp.i1(x) / np.where(x == 0, 1, x))),
    (S.log_ndtr, np.array([-30.0, -1.0, 2.0]), None),
    (lambda x: S.gammainc(2.5, x), np.array([0.3, 1.0, 4.0]), lambda x: np.exp(
        1.5 * np.log(x) - x - sp.gammaln(2.5)) * (1.5 / x - 1)),
])
def test_second_derivatives(f, x, second):
    def first(v):
        t = jt.Variable(v)
        with jt.GradientTape() as tape:
            y = jt.sum(f(t))
        return tape.gradient(y, t)

    t = jt.Variable(x)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            y = jt.sum(f(t))
        g = inner.gradient(y, t)
    got = outer.gradient(g, t).numpy()
    eps = 1e-5
    numeric = (first(x + eps).numpy() - first(x - eps).numpy()) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7)
    if second is not None:
        np.testing.assert_allclose(got, second(x), rtol=1e-10, atol=1e-12)


EDGES = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 40.0, -40.0, 800.0, np.inf, -np.inf, np.nan])


def _edges(x, y):
    return [S.erfinv(x), S.erfcinv(x), S.ndtri(x), S.ndtr(x), S.log_ndtr(x), S.log_expit(x),
            S.gamma(x), S.i0(x), S.i1(x), S.i0e(x), S.i1e(x), S.gammainc(y, x),
            S.gammaincc(y, x), S.entr(x), S.rel_entr(x, y), S.kl_div(x, y), S.boxcox(x, y)]


def _edges_reference(x, y):
    return [sp.erfinv(x), sp.erfcinv(x), sp.ndtri(x), sp.ndtr(x), sp.log_ndtr(x),
            sp.log_expit(x), sp.gamma(x), sp.i0(x), sp.i1(x), sp.i0e(x), sp.i1e(x),
            sp.gammainc(y, x), sp.gammaincc(y, x), sp.entr(x), sp.rel_entr(x, y),
            sp.kl_div(x, y), sp.boxcox(x, y)]


def test_edges_eager_and_compiled_as_scipy():
    # domain edges (erfinv(+-1), ndtri(0), poles, 0 * log 0), infinities and NaN, against
    # each of the other operands (y: the same values reversed)
    x, y = EDGES, EDGES[::-1].copy()
    with np.errstate(all="ignore"):
        want = _edges_reference(x, y)
        eager = _edges(jt.constant(x), jt.constant(y))
    compiled = jt.function(lambda a, b: tuple(_edges(a, b)))(x, y)
    for k, (e, c, w) in enumerate(zip(eager, compiled, want)):
        np.testing.assert_allclose(e.numpy(), w, rtol=1e-13, err_msg=f"call {k}")
        np.testing.assert_allclose(c, w, rtol=1e-13, err_msg=f"call {k}")


def test_new_scipy_ufuncs_reach_the_ops():
    t = jt.constant(P)
    for f in (sp.erfinv, sp.erfcinv, sp.ndtri, sp.ndtr, sp.log_ndtr, sp.log_expit, sp.gamma,
              sp.i0, sp.i1, sp.i0e, sp.i1e, sp.entr):
        got = f(t)
        assert isinstance(got, jt.Tensor), f
        np.testing.assert_allclose(got.numpy(), f(P), rtol=1e-13)
    for f in (sp.gammainc, sp.gammaincc, sp.beta, sp.betaln, sp.rel_entr, sp.kl_div, sp.boxcox):
        got = f(t + 1, t)
        assert isinstance(got, jt.Tensor), f
        np.testing.assert_allclose(got.numpy(), f(P + 1, P), rtol=1e-13)


def test_float32_stays_float32():
    x = np.float32([0.2, 0.7])
    for name in ("erfinv", "ndtri", "i0e", "i1", "log_ndtr", "gamma"):
        got = getattr(S, name)(jt.constant(x))
        assert got.dtype == np.float32, name
        np.testing.assert_allclose(got.numpy(), getattr(sp, name)(x), rtol=1e-6)
    # (SciPy's rule: a Python float makes gammainc float64, a float32 a does not)
    assert S.gammainc(1.5, jt.constant(x)).dtype == sp.gammainc(1.5, x).dtype == np.float64
    assert S.gammainc(np.float32(1.5), jt.constant(x)).dtype == np.float32


def test_gammainc_has_no_gradient_in_a():
    a, x = jt.Variable(np.array([1.5, 2.0])), jt.Variable(np.array([0.5, 3.0]))
    with jt.GradientTape(persistent=True) as tape:
        y = jt.sum(S.gammainc(a, x) + S.gammaincc(a, 2.0))
    # in x it is the density x^(a-1) e^-x / gamma(a)
    want = np.exp(0.5 * np.log([0.5, 3.0]) * [1, 2] - [0.5, 3.0] - sp.gammaln([1.5, 2.0]))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-13)
    with pytest.raises(jt.UnsupportedError, match=r"gammaincc?: the gradient with respect to a"):
        tape.gradient(y, a)
    with pytest.raises(jt.UnsupportedError, match="with respect to a"):
        jt.grad(lambda a: jt.sum(S.gammaincc(a, 1.0)))(np.array([1.5]))


def test_logsumexp_softmax_take_scipys_arguments():
    a = np.array([[0.5, -1.0, 2.0], [3.0, 0.1, -0.4]])
    b = np.array([1.0, -2.0, 0.5])
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            np.testing.assert_allclose(S.logsumexp(a, axis, np.abs(b), keepdims).numpy(),
                                       sp.logsumexp(a, axis, np.abs(b), keepdims), rtol=1e-13)
            got = S.logsumexp(a, axis, b, keepdims, return_sign=True)
            want = sp.logsumexp(a, axis, b, keepdims, return_sign=True)
            for g, w in zip(got, want):
                assert g.shape == np.shape(w)
                np.testing.assert_allclose(g.numpy(), w, rtol=1e-13)
    for axis in (None, 0, -1):
        np.testing.assert_allclose(S.softmax(a, axis).numpy(), sp.softmax(a, axis), rtol=1e-13)
        np.testing.assert_allclose(S.log_softmax(a, axis=axis).numpy(),
                                   sp.log_softmax(a, axis=axis), rtol=1e-13)
    # the gradient of the log of |sum| with signed weights
    t = jt.Variable(a)
    with jt.GradientTape() as tape:
        value, sign = S.logsumexp(t, b=b, return_sign=True)
    s = np.sum(b * np.exp(a))
    np.testing.assert_allclose(tape.gradient(value, t).numpy(), b * np.exp(a) / s, rtol=1e-12)


def test_multigammaln_checks_its_domain_and_order():
    with pytest.raises(ValueError, match=r"multigammaln: a \(shape \(2,\)\) must be greater"):
        S.multigammaln(np.array([0.9, 3.0]), 3)
    with pytest.raises(ValueError, match="multigammaln: the dimension d must be a positive int"):
        S.multigammaln(2.0, 0)


def test_scipy_c_functions_on_cuda_say_they_are_cpu_only():
    with pytest.raises(jt.UnsupportedError, match="erfinv runs on the CPU target only"):
        jt.function(lambda y: S.erfinv(y), target="cuda")(P)


def test_beta_edges_and_negative_arguments():
    # (beta and betaln are sums of gammaln: at the infinities and where SciPy takes the
    # limit of a ratio of poles, beta(2, -40), they give NaN; their docstrings say so)
    a = np.array([0.0, 1e-300, 1e-8, 0.5, 7.0, 150.0, -0.5, -1.5, -2.7])
    b = np.array([2.5, 1.0, 3.0, 1e-8, 0.25, 170.0, 1.75, 0.6, 1.2])
    np.testing.assert_allclose(S.beta(a, b).numpy(), sp.beta(a, b), rtol=1e-12)
    np.testing.assert_allclose(S.betaln(a, b).numpy(), sp.betaln(a, b), rtol=1e-12)


# -- Bessel functions of the first and second kinds, rgamma, gammasgn, betainc, stdtr ---------

def _bessel(x, p, a):
    """Each once, on x in (-2, 2), p in (0, 1) and a in (0.5, 3); orders and shape
    parameters constant (no gradient in them)."""
    r = a * 2.0 + 0.3                                # (0.5, 3) -> (1.3, 6.3)
    return [S.j0(r), S.j1(r), S.j1(x), S.y0(r), S.y1(r), S.jv(2.0, r), S.jn(np.array(
        [0.0, 1.0, 2.5, 3.0]), r), S.yn(2, r), S.iv(2.0, x), S.iv(np.array([0.0, 1.0, 2.0, 3.0]),
                                                              r), S.ive(2.0, x * 3),
            S.rgamma(a - 0.2), S.gammasgn(x * 3), S.betainc(2.0, 3.5, p),
            S.betainc(np.array([0.5, 1.5, 3.0, 0.8]), 1.2, p), S.stdtr(3.0, x * 2),
            S.stdtr(np.array([1.0, 2.5, 7.0, 30.0]), x)]


def _bessel_reference(x, p, a):
    r = a * 2.0 + 0.3
    return [sp.j0(r), sp.j1(r), sp.j1(x), sp.y0(r), sp.y1(r), sp.jv(2.0, r), sp.jv(np.array(
        [0.0, 1.0, 2.5, 3.0]), r), sp.yn(2, r), sp.iv(2.0, x), sp.iv(np.array([0.0, 1.0, 2.0, 3.0]),
                                                                     r), sp.ive(2.0, x * 3),
            sp.rgamma(a - 0.2), sp.gammasgn(x * 3), sp.betainc(2.0, 3.5, p),
            sp.betainc(np.array([0.5, 1.5, 3.0, 0.8]), 1.2, p), sp.stdtr(3.0, x * 2),
            sp.stdtr(np.array([1.0, 2.5, 7.0, 30.0]), x)]


def test_bessel_and_distribution_functions_as_scipy_eager_and_compiled():
    _values_match_scipy(_bessel, _bessel_reference)


def test_bessel_and_distribution_gradients_match_finite_differences():
    _gradients_match_finite_differences(_bessel)


def test_j1_slope_at_zero_and_scipy_ufuncs_reach_the_ops():
    assert jt.grad(lambda x: jt.sum(S.j1(x)))(np.array([0.0]))[0] == 0.5
    x = jt.constant(np.array([0.5, 2.0]))
    for f in (sp.j0, sp.j1, sp.y0, sp.y1, sp.rgamma, sp.gammasgn):
        np.testing.assert_allclose(f(x).numpy(), f(x.numpy()), rtol=1e-15)
    for f in (sp.jv, sp.jn, sp.iv, sp.ive, sp.stdtr):
        np.testing.assert_allclose(f(1.5, x).numpy(), f(1.5, x.numpy()), rtol=1e-15)
    np.testing.assert_allclose(sp.yn(2, x).numpy(), sp.yn(2, x.numpy()), rtol=1e-15)
    np.testing.assert_allclose(sp.betainc(2.0, 1.5, x * 0.4).numpy(),
                               sp.betainc(2.0, 1.5, x.numpy() * 0.4), rtol=1e-15)


@pytest.mark.parametrize("call, what", [
    (lambda v: S.jv(v, 1.5), "jv: the gradient with respect to the order v"),
    (lambda v: S.yn(v, 1.5), "yn: the gradient with respect to the order n"),
    (lambda v: S.iv(v, 1.5), "iv: the gradient with respect to the order v"),
    (lambda v: S.ive(v, 1.5), "ive: the gradient with respect to the order v"),
    (lambda v: S.betainc(v, 2.0, 0.3), "betainc: the gradient with respect to a"),
    (lambda v: S.betainc(2.0, v, 0.3), "betainc: the gradient with respect to b"),
    (lambda v: S.stdtr(v, 0.3), "stdtr: the gradient with respect to the degrees"),
])
def test_no_gradient_in_orders_and_shape_parameters(call, what):
    with pytest.raises(jt.UnsupportedError, match=what):
        jt.grad(lambda v: jt.sum(call(v)))(np.array([1.5, 2.5]))
    v = jt.Variable(np.array([1.5, 2.5]))
    with jt.GradientTape() as tape:
        y = jt.sum(call(v))
    with pytest.raises(jt.UnsupportedError, match=what):
        tape.gradient(y, v)
