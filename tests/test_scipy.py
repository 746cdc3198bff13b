"""``jt.scipy.objective``: SciPy's optimizers reach the optimum that SciPy finds with
hand-written derivatives, in float64 whatever the kernels compute in."""

import warnings

import numpy as np
import pytest
import scipy.optimize as so

import jittape as jt
from jittape import numpy as jnp


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


OBJECTIVE = jt.scipy.objective(rosen)


@pytest.mark.parametrize("n", [10, 100])
@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "CG", "Newton-CG", "trust-krylov",
                                    "trust-ncg"])
def test_scipy_reaches_the_optimum_it_reaches_with_rosen_der(method, n):
    x0 = np.linspace(-1.2, 1.0, n)
    # tolerances tight enough that both runs end at the optimum, not where one stalls
    tight = {"L-BFGS-B": {"ftol": 1e-15, "gtol": 1e-10}, "Newton-CG": {"xtol": 1e-12}}
    options = {"maxiter": 20000, **tight.get(method, {"gtol": 1e-9})}
    want = so.minimize(so.rosen, x0, jac=so.rosen_der, hessp=so.rosen_hess_prod
                       if method in ("Newton-CG", "trust-krylov", "trust-ncg") else None,
                       method=method, options=options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # (no hessp warning for methods without one)
        got = so.minimize(x0=x0, method=method, options=options,
                          **jt.scipy.objective(rosen, method=method))
    assert got.success == want.success, (got.message, want.message)
    np.testing.assert_allclose(got.x, want.x, atol=1e-5)
    np.testing.assert_allclose(got.x, np.ones(n), atol=1e-5)


def test_the_value_gradient_and_hessian_product_are_float64_and_right():
    x = np.linspace(-1.0, 1.5, 7)
    value, grad = OBJECTIVE["fun"](x)
    assert type(value) is float and grad.dtype == np.float64 and grad.shape == (7,)
    assert value == pytest.approx(so.rosen(x), rel=1e-13)
    np.testing.assert_allclose(grad, so.rosen_der(x), rtol=1e-12)
    p = np.arange(7.0)
    np.testing.assert_allclose(OBJECTIVE["hessp"](x, p), so.rosen_hess_prod(x, p), rtol=1e-12)


def test_float32_kernels_still_give_scipy_float64():
    # TensorFlow's rule makes a Python float float32; L-BFGS-B fails on a float32 gradient.
    # Through objective the kernels may compute in float32, SciPy still gets float64.
    obj = jt.scipy.objective(rosen, dtype=np.float32, method="L-BFGS-B")
    value, grad = obj["fun"](np.zeros(5))
    assert type(value) is float and grad.dtype == np.float64
    res = so.minimize(x0=np.zeros(5), method="L-BFGS-B", **obj)
    assert res.success, res.message
    np.testing.assert_allclose(res.x, np.ones(5), atol=5e-3)


def test_pytree_parameters_and_scipy_args():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X @ np.array([1.5, -2.0, 0.5]) + 0.3 > 0).astype(np.float64)

    def nll(p, X, y):
        z = X @ p["w"] + p["b"]
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 1e-3 * jnp.sum(p["w"] ** 2)

    like = {"w": np.zeros(3), "b": np.zeros(())}
    x0, unravel = jt.tree.ravel(like)
    got = so.minimize(x0=x0, args=(X, y), method="Newton-CG",
                      **jt.scipy.objective(nll, like=like))

    def ref(v):                        # v = (w, b), by hand
        z = X @ v[:3] + v[3]
        return np.mean(np.logaddexp(0.0, z) - y * z) + 1e-3 * np.sum(v[:3] ** 2)

    def ref_grad(v):
        z = X @ v[:3] + v[3]
        r = (1 / (1 + np.exp(-z)) - y) / len(y)
        return np.concatenate([X.T @ r + 2e-3 * v[:3], [r.sum()]])

    want = so.minimize(ref, np.zeros(4), jac=ref_grad, method="BFGS", options={"gtol": 1e-10})
    assert got.success
    found = unravel(got.x)                 # (the vector's order is the tree's: b, then w)
    assert found["w"].shape == (3,) and found["b"].shape == ()
    np.testing.assert_allclose(np.append(found["w"], found["b"]), want.x, atol=1e-5)


def test_objective_errors():
    with pytest.raises(TypeError, match="expected a function"):
        jt.scipy.objective(3)
    with pytest.raises(TypeError, match="floating"):
        jt.scipy.objective(rosen, dtype=np.int32)


def test_a_pytree_of_float32_or_integer_leaves_gets_scipys_point_whole():
    # the vector went through the leaves' dtypes: float32 rounded it, int64 truncated it
    def f(p):
        return jnp.sum((p["w"] - 0.5) ** 2)
    for leaf in (np.zeros(2, np.float32), np.zeros(2, np.int64)):
        value, grad = jt.scipy.objective(f, like={"w": leaf})["fun"](np.array([0.4, 0.6]))
        assert value == pytest.approx(0.02, rel=1e-12)
        np.testing.assert_allclose(grad, [-0.2, 0.2], rtol=1e-12)
