"""``jt.scipy.stats``: SciPy's values (parameters out of range and points outside the
support included), compiled as eager, gradients in every argument by finite differences;
and what SciPy's own scipy.stats does with a tensor."""

import warnings

import numpy as np
import pytest
import scipy.stats as st

import jittape as jt
from jittape.errors import TracerError
from opcheck import numeric_grad

S = jt.scipy.stats

X = np.array([-0.8, 0.15, 0.45, 1.3])
Q = np.array([0.02, 0.3, 0.5, 0.91])
K = np.array([0.0, 1.0, 3.0, 6.0])
RNG = np.random.default_rng(7)
_M = RNG.normal(size=(3, 3))
COV = _M @ _M.T + np.eye(3)
POINTS = RNG.normal(size=(5, 3))
MEAN = np.array([0.2, -0.1, 0.4])
SIMPLEX = np.array([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]])
ALPHA = np.array([1.5, 2.0, 0.7])


def _calls(x, q, loc, scale, shape, k, points, mean, cov, simplex, alpha):
    """Every function once; ``shape`` a positive shape parameter (df, a, b, mu)."""
    n = S.norm
    return [n.logpdf(x, loc, scale), n.pdf(x, loc, scale), n.cdf(x, loc, scale),
            n.logcdf(x, loc, scale), n.sf(x, loc, scale), n.logsf(x, loc, scale),
            n.ppf(q, loc, scale), n.isf(q, loc, scale), n.logpdf(x),
            S.t.logpdf(x, shape, loc, scale), S.t.pdf(x, shape * 3),
            S.gamma.logpdf(x, shape, loc - 1.5, scale), S.gamma.pdf(x + 1.0, shape),
            S.beta.logpdf(q, shape, shape * 0.5 + 0.8), S.beta.pdf(x, shape + 1, 2.0, -1.0, 3.0),
            S.poisson.logpmf(k, shape), S.poisson.pmf(k, shape * 2),
            S.multivariate_normal.logpdf(points, mean, cov),
            S.multivariate_normal.pdf(points[0], mean, cov),
            S.multivariate_normal.logpdf(points, mean, cov[0] ** 2),
            S.multivariate_normal.logpdf(points[:, 0], 0.3, scale),
            S.dirichlet.logpdf(simplex, alpha), S.dirichlet.pdf(simplex[:, 0], alpha)]


def _reference(x, q, loc, scale, shape, k, points, mean, cov, simplex, alpha):
    n = st.norm
    return [n.logpdf(x, loc, scale), n.pdf(x, loc, scale), n.cdf(x, loc, scale),
            n.logcdf(x, loc, scale), n.sf(x, loc, scale), n.logsf(x, loc, scale),
            n.ppf(q, loc, scale), n.isf(q, loc, scale), n.logpdf(x),
            st.t.logpdf(x, shape, loc, scale), st.t.pdf(x, shape * 3),
            st.gamma.logpdf(x, shape, loc - 1.5, scale), st.gamma.pdf(x + 1.0, shape),
            st.beta.logpdf(q, shape, shape * 0.5 + 0.8),
            st.beta.pdf(x, shape + 1, 2.0, -1.0, 3.0),
            st.poisson.logpmf(k, shape), st.poisson.pmf(k, shape * 2),
            st.multivariate_normal.logpdf(points, mean, cov),
            st.multivariate_normal.pdf(points[0], mean, cov),
            st.multivariate_normal.logpdf(points, mean, cov[0] ** 2),
            st.multivariate_normal.logpdf(points[:, 0], 0.3, scale),
            st.dirichlet.logpdf(simplex, alpha), st.dirichlet.pdf(simplex[:, 0], alpha)]


ARGS = (X, Q, 0.3, 1.7, 2.4, K, POINTS, MEAN, COV, SIMPLEX, ALPHA)
# the differentiable arguments: x, q, loc, scale, shape, points, mean, cov, simplex, alpha
DIFF = (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)


def test_values_eager_and_compiled_as_scipy():
    want = _reference(*ARGS)
    eager = _calls(*[jt.constant(np.asarray(a, np.float64)) for a in ARGS])
    compiled = jt.function(lambda *a: tuple(_calls(*a)))(*ARGS)
    for j, (e, c, w) in enumerate(zip(eager, compiled, want)):
        assert e.shape == np.shape(w), (j, e.shape, np.shape(w))
        np.testing.assert_allclose(e.numpy(), w, rtol=1e-12, atol=1e-300, err_msg=f"call {j}")
        np.testing.assert_allclose(c, w, rtol=1e-12, atol=1e-300, err_msg=f"call {j}")


def _loss(*args):
    return sum(jt.sum(v * (0.3 + 0.1 * j)) for j, v in enumerate(_calls(*args)))


def test_gradients_in_every_argument():
    args = [np.asarray(a, np.float64) for a in ARGS]
    compiled = jt.grad(_loss, argnums=DIFF)(*args)
    variables = [jt.Variable(a) for a in args]
    with jt.GradientTape() as tape:
        value = _loss(*variables)
    eager = tape.gradient(value, [variables[k] for k in DIFF])
    for j, k in enumerate(DIFF):
        want = numeric_grad(lambda values: float(_loss(*values)), args, k)
        np.testing.assert_allclose(eager[j].numpy(), want, rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_allclose(compiled[j], eager[j].numpy(), rtol=1e-11, atol=1e-13,
                                   err_msg=k)


def test_out_of_range_parameters_and_support_as_scipy():
    with np.errstate(all="ignore"):
        scales = np.array([1.0, -1.0, 0.0, 2.0])
        np.testing.assert_allclose(S.norm.logpdf(X, 0.0, scales).numpy(),
                                   st.norm.logpdf(X, 0.0, scales))
        np.testing.assert_allclose(S.norm.cdf(X, 0.0, -1.0).numpy(), st.norm.cdf(X, 0.0, -1.0))
        np.testing.assert_allclose(S.t.logpdf(X, np.array([1.0, 0.0, -2.0, 5.0])).numpy(),
                                   st.t.logpdf(X, [1.0, 0.0, -2.0, 5.0]))
        for x in (np.array([-1.0, 0.0, 0.5, 3.0]),):
            for a in (0.5, 1.0, 2.0, -1.0):
                np.testing.assert_allclose(S.gamma.logpdf(x, a).numpy(), st.gamma.logpdf(x, a))
            for a, b in ((1.0, 1.0), (2.0, 3.0), (0.5, 0.5), (1.0, 2.0), (0.0, 1.0)):
                np.testing.assert_allclose(S.beta.logpdf(x * 0.5, a, b).numpy(),
                                           st.beta.logpdf(x * 0.5, a, b))
        k = np.array([-1.0, 0.0, 1.5, 2.0, 7.0])
        for mu in (0.0, 2.5, -1.0):
            np.testing.assert_allclose(S.poisson.logpmf(k, mu).numpy(), st.poisson.logpmf(k, mu))
        np.testing.assert_allclose(S.norm.ppf(np.array([0.0, 1.0, 1.5]), 1.0, 2.0).numpy(),
                                   st.norm.ppf([0.0, 1.0, 1.5], 1.0, 2.0))
        # far tails: the log of the distribution function, not of an underflowed 0
        np.testing.assert_allclose(S.norm.logcdf(np.array([-60.0, 60.0])).numpy(),
                                   st.norm.logcdf([-60.0, 60.0]), rtol=1e-13)
    # no NaN reaches the gradient of a parameter out of range, nor of a point outside
    scale, x = jt.Variable(np.array([1.0, -1.0])), jt.Variable(np.array([0.5, -2.0]))
    with jt.GradientTape() as tape:
        y = jt.sum(jt.where(jt.isnan(S.norm.logpdf(x, 0.0, scale)), 0.0,
                            S.norm.logpdf(x, 0.0, scale))
                   + jt.where(x < 0, 0.0, S.gamma.logpdf(x, 2.0)))
    for g in tape.gradient(y, [scale, x]):
        assert np.isfinite(g.numpy()).all()


def test_shapes_and_errors():
    assert S.multivariate_normal.logpdf(POINTS[0], MEAN, COV).shape == ()
    assert S.multivariate_normal.logpdf(POINTS[:1], MEAN, COV).shape == ()   # (squeezed)
    assert S.dirichlet.logpdf(SIMPLEX[:, 0], ALPHA).shape == ()
    with pytest.raises(jt.ShapeError, match=r"multivariate_normal.logpdf: cov of shape \(2, 2\)"):
        S.multivariate_normal.logpdf(POINTS, MEAN, np.eye(2))
    with pytest.raises(jt.ShapeError, match=r"multivariate_normal.logpdf: x of shape \(5, 3\)"):
        S.multivariate_normal.logpdf(POINTS, np.zeros(2), np.eye(2))
    with pytest.raises(jt.ShapeError, match="multivariate_normal.logpdf: mean must be a vector"):
        S.multivariate_normal.logpdf(POINTS, np.zeros((1, 3)), COV)
    with pytest.raises(jt.ShapeError, match=r"dirichlet.logpdf: alpha must be a vector"):
        S.dirichlet.logpdf(SIMPLEX.T, ALPHA)


def test_scipys_own_stats_on_a_tensor_says_the_gradient_is_lost():
    # scipy.stats's functions are not ufuncs: SciPy converts the tensor with np.asarray,
    # which jittape cannot follow. Without a tape that is a plain value; on a tape a
    # warning naming the SciPy function (an error under jt.config.strict); compiled, an
    # error (a traced value has no array).
    assert isinstance(st.norm.logpdf(jt.constant(X)), np.ndarray)
    v = jt.Variable(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with jt.GradientTape():
            st.norm.logpdf(v, 0.0, 1.0)
    assert any(issubclass(w.category, jt.GradientLostWarning) and "scipy.stats" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    # the advice points to jittape's own scipy.stats, down to the function called
    assert any("Write jt.scipy.stats.norm.logpdf(...)" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with jt.GradientTape():
            st.laplace.logpdf(v)
    assert any("Use jittape.scipy.stats" in str(w.message) and "norm" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    with pytest.raises(TracerError, match="converting to a NumPy array"):
        jt.function(lambda x: st.norm.logpdf(x))(X)


# -- the distribution functions of t, chi2, gamma, beta, poisson; multivariate_normal's
# allow_singular and entropy ------------------------------------------------------------

POS = np.array([0.4, 1.3, 2.2, 5.0])
UNIT = np.array([0.05, 0.3, 0.62, 0.97])
DF = np.array([1.0, 2.5, 4.0, 9.0])


def _cdfs(x, pos, unit, loc, scale, cov):
    """Each once: the gradients are in x, pos, unit, loc, scale (the quantiles and SciPy's
    loc and scale) and cov (entropy's); the shape parameters are constants."""
    mvn = S.multivariate_normal
    return [S.t.cdf(x, DF, loc, scale), S.t.logcdf(x, 3.0), S.chi2.cdf(pos, DF),
            S.chi2.cdf(pos, 3.0, loc * 0.1, scale), S.chi2.pdf(pos, DF), S.chi2.logpdf(pos, 2.0),
            S.gamma.cdf(pos, DF, loc * 0.1, scale), S.beta.cdf(unit, 2.0, DF),
            S.poisson.cdf(K, pos), S.poisson.cdf(K + 0.5, 2.5, 1.0), mvn.entropy(MEAN, cov),
            mvn.entropy(None, pos), mvn.logpdf(x[:3], MEAN, COV, allow_singular=True)]


def _cdfs_reference(x, pos, unit, loc, scale, cov):
    mvn = st.multivariate_normal
    return [st.t.cdf(x, DF, loc, scale), st.t.logcdf(x, 3.0), st.chi2.cdf(pos, DF),
            st.chi2.cdf(pos, 3.0, loc * 0.1, scale), st.chi2.pdf(pos, DF), st.chi2.logpdf(pos, 2.0),
            st.gamma.cdf(pos, DF, loc * 0.1, scale), st.beta.cdf(unit, 2.0, DF),
            st.poisson.cdf(K, pos), st.poisson.cdf(K + 0.5, 2.5, 1.0), mvn.entropy(MEAN, cov),
            mvn.entropy(None, np.diag(pos)),
            mvn.logpdf(x[:3], MEAN, COV, allow_singular=True)]


CDF_ARGS = (X, POS, UNIT, 0.3, 1.7, COV)


def test_distribution_functions_as_scipy_eager_and_compiled():
    want = _cdfs_reference(*CDF_ARGS)
    eager = _cdfs(*[jt.constant(np.asarray(a, np.float64)) for a in CDF_ARGS])
    compiled = jt.function(lambda *a: tuple(_cdfs(*a)))(*CDF_ARGS)
    for j, (e, c, w) in enumerate(zip(eager, compiled, want)):
        assert e.shape == np.shape(w), (j, e.shape, np.shape(w))
        np.testing.assert_allclose(e.numpy(), w, rtol=1e-12, atol=1e-300, err_msg=f"call {j}")
        np.testing.assert_allclose(c, w, rtol=1e-12, atol=1e-300, err_msg=f"call {j}")
    # outside the supports: SciPy's 0 and 1
    below = np.array([-1.0, 0.0, 1.5])
    for ours, theirs in ((S.chi2.cdf(below, 2.0), st.chi2.cdf(below, 2.0)),
                         (S.gamma.cdf(below, 1.5), st.gamma.cdf(below, 1.5)),
                         (S.beta.cdf(below, 2.0, 3.0), st.beta.cdf(below, 2.0, 3.0)),
                         (S.poisson.cdf(below - 1.0, 2.0), st.poisson.cdf(below - 1.0, 2.0))):
        np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-15)


def _cdf_loss(*args):
    return sum(jt.sum(v * (0.3 + 0.1 * j)) for j, v in enumerate(_cdfs(*args)))


def test_distribution_function_gradients():
    args = [np.asarray(a, np.float64) for a in CDF_ARGS]
    diff = tuple(range(len(args)))
    compiled = jt.grad(_cdf_loss, argnums=diff)(*args)
    variables = [jt.Variable(a) for a in args]
    with jt.GradientTape() as tape:
        value = _cdf_loss(*variables)
    eager = tape.gradient(value, variables)
    for k in diff:
        want = numeric_grad(lambda values: float(_cdf_loss(*values)), args, k)
        np.testing.assert_allclose(eager[k].numpy(), want, rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_allclose(compiled[k], eager[k].numpy(), rtol=1e-11, atol=1e-13,
                                   err_msg=k)


def test_singular_covariance_as_scipy():
    cov = np.diag([1.0, 2.0, 0.0])
    inside = np.array([[0.3, -0.2, 0.4], [1.0, 0.5, 0.4]])
    mean = np.array([0.1, 0.0, 0.4])
    for x in (inside, inside + np.array([0.0, 0.0, 0.1])):      # on the support, then off
        np.testing.assert_allclose(
            S.multivariate_normal.logpdf(x, mean, cov, allow_singular=True).numpy(),
            st.multivariate_normal.logpdf(x, mean, cov, allow_singular=True))
    got = jt.grad(lambda x: jt.sum(S.multivariate_normal.pdf(x, mean, cov,
                                                             allow_singular=True)))(inside)
    density = st.multivariate_normal.pdf(inside, mean, cov, allow_singular=True)
    want = -(inside - mean) / np.array([1.0, 2.0, np.inf]) * density[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    with pytest.raises(jt.UnsupportedError, match="allow_singular=True takes cov as a constant"):
        S.multivariate_normal.logpdf(inside, mean, jt.constant(cov), allow_singular=True)


def test_no_gradient_in_the_shape_parameters_of_distribution_functions():
    for call in (lambda d: S.t.cdf(X, d), lambda d: S.chi2.cdf(POS, d),
                 lambda d: S.gamma.cdf(POS, d), lambda d: S.beta.cdf(UNIT, d, 2.0)):
        with pytest.raises(jt.UnsupportedError, match="the gradient with respect to"):
            jt.grad(lambda d: jt.sum(call(d)))(DF)
