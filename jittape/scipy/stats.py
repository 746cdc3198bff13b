"""``jt.scipy.stats``: scipy.stats's densities and distribution functions on tensors,
eager and compiled, with their gradients in every argument (the quantiles, ``loc``,
``scale`` and the shape parameters), as autograd's ``autograd.scipy.stats``.

```python
from jittape.scipy.stats import norm
loss = -jt.sum(norm.logpdf(data, mu, sigma))
```

Each is a composition of jittape ops (``jittape/ops/special.py`` for gammaln, ndtr,
log_ndtr, ndtri, xlogy, betaln, the linear algebra for ``multivariate_normal``), written
as SciPy writes it, with SciPy's ``loc`` and ``scale``: ``f(x, ..., loc, scale)`` is
``f((x - loc) / scale, ...) / scale``. As SciPy's, they give NaN where a parameter is
out of its range (a scale or shape not positive, a negative Poisson mean) and the
log-density ``-inf`` outside the support; the gradient there is 0, not NaN. SciPy's
own ``scipy.stats.norm.logpdf(t)`` converts a tensor to a NumPy array (scipy.stats's
functions are not ufuncs): the tape cannot follow it, and jittape says so.

Distributions: ``norm`` (logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf), ``t`` (logpdf,
pdf, cdf, logcdf), ``chi2`` (logpdf, pdf, cdf), ``gamma`` (logpdf, pdf, cdf), ``beta``
(logpdf, pdf, cdf), ``poisson`` (logpmf, pmf, cdf), ``multivariate_normal`` (logpdf, pdf,
``allow_singular`` for a constant cov, entropy), ``dirichlet`` (logpdf, pdf). The
distribution functions of t, chi2, gamma and beta have no gradient in their shape
parameters (df, a, b), as autograd's: asking for it raises ``UnsupportedError``.
"""

import math
import numbers

import numpy as np

from ..errors import ShapeError, UnsupportedError, at_user_line
from ..tensor import Tensor
from ..ops import elementwise as _ew
from ..ops import indexing as _ix
from ..ops import lapack as _la
from ..ops import linalg as _lin
from ..ops import reduce as _r
from ..ops import shape as _sh
from ..ops import special as _sp
from ..ops.core import shape_of

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2PI = math.log(2.0 * math.pi)


def _number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class _Checks:
    """The parameter ranges of one call: a parameter given as a Python number is checked
    now (no op in the graph for a constant); a tensor's test is applied to the result
    (``masked``: NaN where it fails), and the value computed with a harmless stand-in
    there so that no NaN reaches the gradient of the parameter."""

    def __init__(self):
        self.tests = []
        self.failed = False

    def check(self, p, test, stand_in=1.0):
        if _number(p):
            if not test(p):
                self.failed = True
                return stand_in
            return p
        ok = test(p)
        self.tests.append(ok)
        return _ew.where(ok, p, stand_in)

    def positive(self, p):
        return self.check(p, lambda v: v > 0)

    def masked(self, value):
        if self.failed:
            return _ew.add(_ew.multiply(_ew.stop_gradient(value), 0.0), np.nan)
        if not self.tests:
            return value
        ok = self.tests[0]
        for test in self.tests[1:]:
            ok = _ew.logical_and(ok, test)
        return _ew.where(ok, value, np.nan)


def _standardized(x, loc, scale, checks):
    """((x - loc) / scale, log(scale)), skipping the ops of a loc of 0 and a scale of 1."""
    scale = checks.positive(scale)
    # (Python's operators: a number stays a number, and a constant adds no op)
    z = x if _number(loc) and loc == 0 else x - loc
    if _number(scale) and scale == 1:
        return z, 0.0
    return z / scale, (math.log(scale) if _number(scale) else _ew.log(scale))


def _minus(value, log_scale):
    return value if _number(log_scale) and log_scale == 0 else _ew.subtract(value, log_scale)


def _inside(z, test, stand_in, log_density):
    """``log_density(z)`` where ``test(z)`` holds, -inf elsewhere (computed at
    ``stand_in`` there)."""
    ok = test(z)
    return _ew.where(ok, log_density(_ew.where(ok, z, stand_in)), -np.inf)


class _Norm:
    """The normal distribution: ``scipy.stats.norm``'s functions of (x, loc, scale)."""

    def logpdf(self, x, loc=0.0, scale=1.0):
        checks = _Checks()
        z, log_scale = _standardized(x, loc, scale, checks)
        value = _ew.subtract(_ew.multiply(_ew.multiply(z, z), -0.5), _HALF_LOG_2PI)
        return checks.masked(_minus(value, log_scale))

    def pdf(self, x, loc=0.0, scale=1.0):
        return _ew.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0.0, scale=1.0):
        checks = _Checks()
        return checks.masked(_sp.ndtr(_standardized(x, loc, scale, checks)[0]))

    def logcdf(self, x, loc=0.0, scale=1.0):
        checks = _Checks()
        return checks.masked(_sp.log_ndtr(_standardized(x, loc, scale, checks)[0]))

    def sf(self, x, loc=0.0, scale=1.0):
        checks = _Checks()
        return checks.masked(_sp.ndtr(_ew.negative(_standardized(x, loc, scale, checks)[0])))

    def logsf(self, x, loc=0.0, scale=1.0):
        checks = _Checks()
        z = _standardized(x, loc, scale, checks)[0]
        return checks.masked(_sp.log_ndtr(_ew.negative(z)))

    def ppf(self, q, loc=0.0, scale=1.0):
        checks = _Checks()
        scale = checks.positive(scale)
        return checks.masked(_ew.add(_ew.multiply(_sp.ndtri(q), scale), loc))

    def isf(self, q, loc=0.0, scale=1.0):
        checks = _Checks()
        scale = checks.positive(scale)
        return checks.masked(_ew.subtract(loc, _ew.multiply(_sp.ndtri(q), scale)))


class _T:
    """Student's t distribution: ``scipy.stats.t``'s densities of (x, df, loc, scale)."""

    def logpdf(self, x, df, loc=0.0, scale=1.0):
        checks = _Checks()
        df = checks.positive(df)
        z, log_scale = _standardized(x, loc, scale, checks)
        half = (df + 1) * 0.5
        value = (_sp.gammaln(half) - _sp.gammaln(df * 0.5)
                 - (_ew.log(df * math.pi) * 0.5 + half * _ew.log1p(z * z / df)))
        return checks.masked(_minus(value, log_scale))

    def pdf(self, x, df, loc=0.0, scale=1.0):
        return _ew.exp(self.logpdf(x, df, loc, scale))

    def cdf(self, x, df, loc=0.0, scale=1.0):
        """The distribution function (SciPy's ``stdtr``); no gradient in ``df``."""
        checks = _Checks()
        df = checks.positive(df)
        return checks.masked(_sp.stdtr(df, _standardized(x, loc, scale, checks)[0]))

    def logcdf(self, x, df, loc=0.0, scale=1.0):
        return _ew.log(self.cdf(x, df, loc, scale))


class _Chi2:
    """The chi-squared distribution: ``scipy.stats.chi2``'s functions of (x, df, loc,
    scale); the distribution function has no gradient in ``df``."""

    def logpdf(self, x, df, loc=0.0, scale=1.0):
        checks = _Checks()
        df = checks.positive(df)
        z, log_scale = _standardized(x, loc, scale, checks)
        half = df * 0.5

        def log_density(v):
            return (_sp.xlogy(half - 1, v) - v * 0.5 - _sp.gammaln(half)
                    - half * math.log(2.0))
        value = _inside(z, lambda v: _ew.greater_equal(v, 0), 1.0, log_density)
        return checks.masked(_minus(value, log_scale))

    def pdf(self, x, df, loc=0.0, scale=1.0):
        return _ew.exp(self.logpdf(x, df, loc, scale))

    def cdf(self, x, df, loc=0.0, scale=1.0):
        checks = _Checks()
        df = checks.positive(df)
        z = _standardized(x, loc, scale, checks)[0]
        # (0 below the support: gammainc of a negative x is NaN)
        inside = _ew.greater(z, 0)
        value = _sp.gammainc(df * 0.5, _ew.where(inside, z, 1.0) * 0.5)
        return checks.masked(_ew.where(inside, value, 0.0))


class _Gamma:
    """The gamma distribution: ``scipy.stats.gamma``'s densities of (x, a, loc, scale)."""

    def logpdf(self, x, a, loc=0.0, scale=1.0):
        checks = _Checks()
        a = checks.positive(a)
        z, log_scale = _standardized(x, loc, scale, checks)
        value = _inside(z, lambda v: _ew.greater_equal(v, 0), 1.0,
                        lambda v: _sp.xlogy(a - 1, v) - v - _sp.gammaln(a))
        return checks.masked(_minus(value, log_scale))

    def pdf(self, x, a, loc=0.0, scale=1.0):
        return _ew.exp(self.logpdf(x, a, loc, scale))

    def cdf(self, x, a, loc=0.0, scale=1.0):
        """The distribution function, ``gammainc(a, (x - loc) / scale)``; no gradient in
        ``a``."""
        checks = _Checks()
        a = checks.positive(a)
        z = _standardized(x, loc, scale, checks)[0]
        inside = _ew.greater(z, 0)
        value = _sp.gammainc(a, _ew.where(inside, z, 1.0))
        return checks.masked(_ew.where(inside, value, 0.0))


class _Beta:
    """The beta distribution: ``scipy.stats.beta``'s densities of (x, a, b, loc, scale)."""

    def logpdf(self, x, a, b, loc=0.0, scale=1.0):
        checks = _Checks()
        a, b = checks.positive(a), checks.positive(b)
        z, log_scale = _standardized(x, loc, scale, checks)

        def log_density(v):
            return _sp.xlog1py(b - 1, -v) + _sp.xlogy(a - 1, v) - _sp.betaln(a, b)
        value = _inside(z, lambda v: _ew.logical_and(_ew.greater_equal(v, 0),
                                                     _ew.less_equal(v, 1)), 0.5, log_density)
        return checks.masked(_minus(value, log_scale))

    def pdf(self, x, a, b, loc=0.0, scale=1.0):
        return _ew.exp(self.logpdf(x, a, b, loc, scale))

    def cdf(self, x, a, b, loc=0.0, scale=1.0):
        """The distribution function, ``betainc(a, b, (x - loc) / scale)`` (0 below the
        support, 1 above); no gradient in ``a`` or ``b``."""
        checks = _Checks()
        a, b = checks.positive(a), checks.positive(b)
        z = _standardized(x, loc, scale, checks)[0]
        inside = _ew.logical_and(_ew.greater(z, 0), _ew.less(z, 1))
        value = _sp.betainc(a, b, _ew.where(inside, z, 0.5))
        return checks.masked(_ew.where(inside, value, _ew.where(_ew.greater_equal(z, 1), 1.0,
                                                                 0.0)))


class _Poisson:
    """The Poisson distribution: ``scipy.stats.poisson``'s mass of (k, mu, loc); -inf
    (mass 0) at a k that is negative or not an integer. The gradient is in ``mu``."""

    def logpmf(self, k, mu, loc=0):
        checks = _Checks()
        mu = checks.check(mu, lambda v: v >= 0)
        if not (_number(loc) and loc == 0):
            k = k - loc

        def log_mass(v):
            return _sp.xlogy(v, mu) - _sp.gammaln(v + 1) - mu
        value = _inside(k, lambda v: _ew.logical_and(_ew.greater_equal(v, 0),
                                                     _ew.equal(_ew.floor(v), v)), 0, log_mass)
        return checks.masked(value)

    def pmf(self, k, mu, loc=0):
        return _ew.exp(self.logpmf(k, mu, loc))

    def cdf(self, k, mu, loc=0):
        """The distribution function, ``gammaincc(floor(k) + 1, mu)`` (0 below k = 0); its
        derivative in ``mu`` is ``-pmf(floor(k), mu)``."""
        checks = _Checks()
        mu = checks.check(mu, lambda v: v >= 0)
        if not (_number(loc) and loc == 0):
            k = k - loc
        whole = _ew.floor(k)
        inside = _ew.greater_equal(whole, 0)
        # (at mu = 0 every mass is at k = 0: gammaincc(a, 0) is 1)
        value = _sp.gammaincc(_ew.where(inside, whole, 0.0) + 1, mu)
        return checks.masked(_ew.where(inside, value, 0.0))


class _MultivariateNormal:
    """The multivariate normal distribution: ``scipy.stats.multivariate_normal``'s
    density of (x, mean, cov), ``cov`` a matrix (through its Cholesky factor), a vector
    (a diagonal) or a number (a multiple of the identity), as SciPy takes them. The
    points are ``x``'s last axis; the result has SciPy's shape (size-1 axes squeezed)."""

    def logpdf(self, x, mean=None, cov=1.0, allow_singular=False):
        """``allow_singular=True``: a positive semi-definite ``cov`` as SciPy takes it (the
        density on the subspace it spans, through its eigendecomposition; -inf off it),
        for a constant ``cov`` only (no gradient in it, as autograd's)."""
        cov_shape = shape_of(cov)
        if mean is not None:
            mean_shape = shape_of(mean)
            if len(mean_shape) > 1:
                raise ShapeError(at_user_line(
                    f"multivariate_normal.logpdf: mean must be a vector, got shape {mean_shape}"))
            d = mean_shape[0] if mean_shape else 1
        else:
            d = cov_shape[0] if len(cov_shape) == 2 else 1
        if cov_shape not in ((), (d,), (d, d)):
            raise ShapeError(at_user_line(
                f"multivariate_normal.logpdf: cov of shape {cov_shape} does not fit {d} "
                f"dimensions (a number, a vector of {d} or a {d}x{d} matrix)"))
        x_shape = shape_of(x)
        if len(x_shape) == 0 or (len(x_shape) == 1 and d == 1):
            x = _sh.reshape(x, x_shape + (1,))      # (one value per point, SciPy's reading)
            x_shape = x_shape + (1,)
        if x_shape[-1] != d:
            raise ShapeError(at_user_line(
                f"multivariate_normal.logpdf: x of shape {x_shape} does not hold points of "
                f"{d} dimensions on its last axis"))
        diff = x if mean is None else _ew.subtract(x, mean)
        batch = x_shape[:-1]
        if allow_singular:
            return self._singular_logpdf(diff, cov, d, batch)
        if len(cov_shape) == 2:
            factor = _la.cholesky(cov)
            rows = _sh.reshape(diff, (int(np.prod(batch, dtype=np.int64)), d))
            whitened = _la.solve(factor, _sh.transpose(rows))
            maha = _sh.reshape(_r.sum(_ew.multiply(whitened, whitened), axis=0), batch)
            log_det = _ew.multiply(_r.sum(_ew.log(_ix.diagonal(factor))), 2.0)
        elif len(cov_shape) == 1:
            maha = _r.sum(_ew.divide(_ew.multiply(diff, diff), cov), axis=-1)
            log_det = _r.sum(_ew.log(cov))
        else:
            maha = _ew.divide(_r.sum(_ew.multiply(diff, diff), axis=-1), cov)
            log_det = _ew.multiply(_ew.log(cov), float(d)) if not _number(cov) else (
                d * math.log(cov) if cov > 0 else math.nan)
        value = _ew.multiply(_ew.add(_ew.add(maha, log_det), d * _LOG_2PI), -0.5)
        return _sh.squeeze(value) if 1 in shape_of(value) else value

    def pdf(self, x, mean=None, cov=1.0, allow_singular=False):
        return _ew.exp(self.logpdf(x, mean, cov, allow_singular))

    def _singular_logpdf(self, diff, cov, d, batch):
        if isinstance(cov, Tensor):
            raise UnsupportedError(at_user_line(
                f"multivariate_normal.logpdf: allow_singular=True takes cov as a constant "
                f"(a NumPy array, not a tensor of shape {shape_of(cov)}): the density of a "
                "singular covariance has no gradient in it; pass cov.numpy() or use "
                "allow_singular=False"))
        matrix = np.asarray(cov, np.float64)
        matrix = (np.diag(matrix) if matrix.ndim == 1 else
                  matrix * np.eye(d) if matrix.ndim == 0 else matrix)
        # SciPy's _PSD: eigenvalues below a cutoff relative to the largest count as zero
        s, u = np.linalg.eigh(matrix)
        eps = 1e6 * np.finfo(np.float64).eps * np.max(np.abs(s))
        if np.min(s) < -eps:
            raise ValueError(at_user_line(
                "multivariate_normal.logpdf: cov must be symmetric positive semi-definite"))
        kept = s > eps
        whiten = u[:, kept] / np.sqrt(s[kept])
        rows = _sh.reshape(diff, (int(np.prod(batch, dtype=np.int64)), d))
        white = _lin.matmul(rows, whiten)
        maha = _sh.reshape(_r.sum(_ew.multiply(white, white), axis=-1), batch)
        value = _ew.multiply(_ew.add(maha, int(kept.sum()) * _LOG_2PI
                                     + float(np.sum(np.log(s[kept])))), -0.5)
        if not kept.all():
            off = _lin.matmul(rows, u[:, ~kept])
            residual = _sh.reshape(_r.sum(_ew.multiply(off, off), axis=-1), batch)
            # (SciPy's test: the norm of the part off the subspace below 1e3 eps)
            value = _ew.where(_ew.less(residual, (1e3 * eps) ** 2), value, -np.inf)
        return _sh.squeeze(value) if 1 in shape_of(value) else value

    def entropy(self, mean=None, cov=1.0):
        """The differential entropy, ``(d (log(2 pi) + 1) + log det cov) / 2`` (``mean``
        does not enter it)."""
        cov_shape = shape_of(cov)
        if len(cov_shape) == 2:
            d = cov_shape[0]
            log_det = _ew.multiply(_r.sum(_ew.log(_ix.diagonal(_la.cholesky(cov)))), 2.0)
        elif len(cov_shape) == 1:
            d = cov_shape[0]
            log_det = _r.sum(_ew.log(cov))
        else:
            d = shape_of(mean)[0] if mean is not None and shape_of(mean) else 1
            log_det = _ew.multiply(_ew.log(cov), float(d))
        return _ew.multiply(_ew.add(log_det, d * (_LOG_2PI + 1.0)), 0.5)


class _Dirichlet:
    """The Dirichlet distribution: ``scipy.stats.dirichlet``'s density of (x, alpha),
    the components on ``x``'s first axis (as SciPy's: ``x`` of shape (K,) or (K, N)).
    Unlike SciPy, ``x`` is not checked to lie in the simplex (a traced value cannot be)."""

    def logpdf(self, x, alpha):
        alpha_shape, x_shape = shape_of(alpha), shape_of(x)
        if len(alpha_shape) != 1 or not x_shape or x_shape[0] != alpha_shape[0]:
            raise ShapeError(at_user_line(
                f"dirichlet.logpdf: alpha must be a vector of the K components and x hold "
                f"them on its first axis, got alpha of shape {alpha_shape} and x of shape "
                f"{x_shape}"))
        log_norm = _ew.subtract(_r.sum(_sp.gammaln(alpha)), _sp.gammaln(_r.sum(alpha)))
        column = _sh.reshape(alpha, alpha_shape + (1,) * (len(x_shape) - 1))
        return _ew.subtract(_r.sum(_sp.xlogy(_ew.subtract(column, 1), x), axis=0), log_norm)

    def pdf(self, x, alpha):
        return _ew.exp(self.logpdf(x, alpha))


norm = _Norm()
t = _T()
chi2 = _Chi2()
gamma = _Gamma()
beta = _Beta()
poisson = _Poisson()
multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
