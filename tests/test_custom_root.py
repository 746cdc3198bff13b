"""custom_root: the root a solver finds, differentiated by the implicit function theorem
(never through the solver's steps), on the tape and compiled, against central finite
differences."""

import numpy as np
import pytest

import jittape as jt


def _fd(fun, args, i, eps=1e-6):
    """Central differences of the scalar ``fun(*args)`` with respect to ``args[i]``."""
    args = [np.array(a, dtype=np.float64) for a in args]
    out = np.zeros_like(args[i])
    for idx in np.ndindex(args[i].shape):
        up = [a.copy() for a in args]
        down = [a.copy() for a in args]
        up[i][idx] += eps
        down[i][idx] -= eps
        out[idx] = (float(np.asarray(fun(*up))) - float(np.asarray(fun(*down)))) / (2 * eps)
    return out


def _eager_grads(fun, args):
    tensors = [jt.constant(np.asarray(a, dtype=np.float64)) for a in args]
    with jt.GradientTape() as tape:
        tape.watch(tensors)
        y = fun(*tensors)
    return [g.numpy() for g in tape.gradient(y, tensors)]


# -- a scalar root: x^3 + a x - b = 0 -------------------------------------------------

def bisect_while(f, x0):
    """Bisection on [x0 - 10, x0 + 10] with jt.while_loop and jt.where: 80 halvings."""
    def step(carry):
        lo, hi, i = carry
        mid = 0.5 * (lo + hi)
        above = f(mid) > 0
        return jt.where(above, lo, mid), jt.where(above, mid, hi), i + 1
    lo, hi, _ = jt.while_loop(lambda c: c[2] < 80, step, (x0 - 10.0, x0 + 10.0, 0))
    return 0.5 * (lo + hi)


def bisect_loop(f, x0):
    """The same bisection as a Python loop."""
    lo, hi = x0 - 10.0, x0 + 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        above = f(mid) > 0
        lo, hi = jt.where(above, lo, mid), jt.where(above, mid, hi)
    return 0.5 * (lo + hi)


def cubic_root(solve):
    def root(a, b):
        return jt.custom_root(lambda x: x ** 3 + a * x - b, 0.0, solve)
    return root


def _cubic_grads(a, b):
    x = _cubic_numpy(a, b)
    d = 3 * x ** 2 + a                      # dx/da = -x/d, dx/db = 1/d
    return x, -x / d, 1 / d


def _cubic_numpy(a, b):
    return float(np.real(max(r for r in np.roots([1.0, 0.0, a, -b]) if abs(r.imag) < 1e-12)))


@pytest.mark.parametrize("solve", [bisect_while, bisect_loop], ids=["while_loop", "python_loop"])
def test_bisection_root_gradients_eager_and_compiled(solve):
    root = cubic_root(solve)
    a, b = 2.0, 4.0
    x, dxda, dxdb = _cubic_grads(a, b)
    np.testing.assert_allclose(float(np.asarray(root(a, b))), x, rtol=1e-13)
    fd = [_fd(root, [a, b], 0), _fd(root, [a, b], 1)]
    np.testing.assert_allclose(fd, [dxda, dxdb], rtol=1e-6)
    np.testing.assert_allclose(_eager_grads(root, [a, b]), fd, rtol=1e-6)
    np.testing.assert_allclose(_eager_grads(root, [a, b]), [dxda, dxdb], rtol=1e-12)
    grad = jt.grad(root, argnums=(0, 1))
    np.testing.assert_allclose(grad(a, b), [dxda, dxdb], rtol=1e-12)
    value, grads = jt.value_and_grad(root, argnums=(0, 1))(1.5, 3.0)
    x, dxda, dxdb = _cubic_grads(1.5, 3.0)
    np.testing.assert_allclose(value, x, rtol=1e-13)
    np.testing.assert_allclose(grads, [dxda, dxdb], rtol=1e-12)


def newton(f, x0):
    """Newton's method to |f(x)| <= 1e-13, the slope from a tape: the solver may record
    on tapes of its own."""
    def step(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return x - y / tape.gradient(y, x)
    return jt.while_loop(lambda x: jt.abs(f(x)) > 1e-13, step, jt.constant(x0))


def test_newton_to_a_tolerance_eager():
    root = cubic_root(newton)
    for a, b in [(2.0, 4.0), (0.5, -1.0)]:
        x, dxda, dxdb = _cubic_grads(a, b)
        np.testing.assert_allclose(float(np.asarray(root(a, b))), x, rtol=1e-12)
        np.testing.assert_allclose(_eager_grads(root, [a, b]), [dxda, dxdb], rtol=1e-10)
        np.testing.assert_allclose(_eager_grads(root, [a, b]),
                                   [_fd(root, [a, b], 0), _fd(root, [a, b], 1)], rtol=1e-6)


def test_newton_to_a_tolerance_compiled():
    # the slope written out; the loop's condition is a guard per step (its trip count
    # keys the compiled variant)
    def root(a, b):
        def solve(f, x0):
            return jt.while_loop(lambda x: jt.abs(f(x)) > 1e-13,
                                 lambda x: x - f(x) / (3 * x ** 2 + a), x0)
        return jt.custom_root(lambda x: x ** 3 + a * x - b, 1.0, solve)
    grad = jt.grad(root, argnums=(0, 1))
    for a, b in [(2.0, 4.0), (2.5, 4.0), (0.5, -1.0)]:
        x, dxda, dxdb = _cubic_grads(a, b)
        np.testing.assert_allclose(grad(a, b), [dxda, dxdb], rtol=1e-10)
        np.testing.assert_allclose(jt.function(root)(a, b), x, rtol=1e-12)


def test_a_solver_that_leaves_jittape_is_not_differentiated():
    # a plain-Python bisection on floats: nothing of it is recorded, the gradient is the
    # implicit one all the same
    def solve(f, x0):
        lo, hi = x0 - 10.0, x0 + 10.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if float(np.asarray(f(mid))) > 0:
                hi = mid
            else:
                lo = mid
        return 0.5 * (lo + hi)
    root = cubic_root(solve)
    x, dxda, dxdb = _cubic_grads(2.0, 4.0)
    np.testing.assert_allclose(_eager_grads(root, [2.0, 4.0]), [dxda, dxdb], rtol=1e-10)


def test_the_value_is_the_solvers_and_x0_gets_no_gradient():
    a = jt.constant(2.0, dtype=jt.float64)
    x0 = jt.constant(0.5, dtype=jt.float64)
    found = bisect_while(lambda x: x ** 3 + 2.0 * x - 4.0, x0)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch([a, x0])
        x = jt.custom_root(lambda x: x ** 3 + a * x - 4.0, x0, bisect_while)
    assert float(x.numpy()) == float(found.numpy())
    assert tape.gradient(x, x0) is None
    np.testing.assert_allclose(tape.gradient(x, a), _cubic_grads(2.0, 4.0)[1], rtol=1e-12)


def test_trainable_variables_read_by_f_get_gradients():
    a = jt.Variable(2.0, dtype=jt.float64)
    b = jt.Variable(4.0, dtype=jt.float64)
    with jt.GradientTape() as tape:
        x = jt.custom_root(lambda x: x ** 3 + a * x - b, 0.0, bisect_while)
    _, dxda, dxdb = _cubic_grads(2.0, 4.0)
    np.testing.assert_allclose(tape.gradient(x, [a, b]), [dxda, dxdb], rtol=1e-12)


def test_second_derivatives_raise():
    # the backward pass holds the root constant: a second derivative would be wrong
    root = cubic_root(bisect_while)
    with pytest.raises(jt.UnsupportedError, match="second derivatives"):
        jt.hessian(root)(2.0, 4.0)
    a = jt.constant(2.0, dtype=jt.float64)
    with jt.GradientTape() as outer:
        outer.watch(a)
        with jt.GradientTape() as inner:
            inner.watch(a)
            x = root(a, 4.0)
        g = inner.gradient(x, a)
    np.testing.assert_allclose(g.numpy(), _cubic_grads(2.0, 4.0)[1], rtol=1e-12)
    with pytest.raises(jt.UnsupportedError, match="second derivatives"):
        outer.gradient(g, a)


# -- a vector fixed point: x = tanh(W x + b) -----------------------------------------

N = 4


def _weights():
    rng = np.random.default_rng(3)
    return 0.5 * rng.standard_normal((N, N)) / np.sqrt(N), rng.standard_normal(N)


def iterate(f, x0):
    """x <- x - f(x) = tanh(W x + b), a contraction here: 100 steps of jt.while_loop."""
    x, _ = jt.while_loop(lambda c: c[1] < 100, lambda c: (c[0] - f(c[0]), c[1] + 1), (x0, 0))
    return x


def fixed_point_loss(W, b):
    x = jt.custom_root(lambda x: x - jt.tanh(jt.matmul(W, x) + b), np.zeros(N), iterate)
    return jt.sum(x * np.arange(1.0, N + 1))


def test_vector_fixed_point_gradients_eager_and_compiled():
    W, b = _weights()
    fd = [_fd(fixed_point_loss, [W, b], 0), _fd(fixed_point_loss, [W, b], 1)]
    eager = _eager_grads(fixed_point_loss, [W, b])
    compiled = jt.grad(fixed_point_loss, argnums=(0, 1))(W, b)
    for got in (eager, compiled):
        np.testing.assert_allclose(got[0], fd[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(got[1], fd[1], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(compiled[1], eager[1], rtol=1e-12, atol=1e-15)


def test_vector_fixed_point_jacobian_matches_the_formula():
    W, b = _weights()

    def root(b):
        return jt.custom_root(lambda x: x - jt.tanh(jt.matmul(W, x) + b), np.zeros(N), iterate)
    x = root(b).numpy()
    D = np.diag(1 - x ** 2)
    expected = np.linalg.solve(np.eye(N) - D @ W, D)          # dx/db
    np.testing.assert_allclose(jt.jacobian(root)(b), expected, rtol=1e-10, atol=1e-14)
    t = jt.constant(b)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = root(t)
    np.testing.assert_allclose(tape.jacobian(y, t).numpy(), expected, rtol=1e-10, atol=1e-14)


def test_a_matrix_root_float32():
    # x of shape (2, 2): the Jacobian of f is built over the flattened x
    rng = np.random.default_rng(5)
    A = (np.eye(2) * 2 + 0.3 * rng.standard_normal((2, 2))).astype(np.float32)
    B = rng.standard_normal((2, 2)).astype(np.float32)

    def loss(A, B):
        f = lambda X: jt.matmul(A, X) + 0.1 * X ** 3 - B          # noqa: E731
        solve = lambda f, X0: jt.fori_loop(0, 60, lambda i, X: X - 0.3 * f(X), X0)  # noqa: E731
        return jt.sum(jt.custom_root(f, np.zeros((2, 2), A.dtype), solve) ** 2)
    g = jt.grad(loss, argnums=(0, 1))(A, B)
    assert g[0].dtype == np.float32
    f64 = lambda A, B: loss(A.astype(np.float64), B.astype(np.float64))  # noqa: E731
    np.testing.assert_allclose(g[0], _fd(f64, [A, B], 0), rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(g[1], _fd(f64, [A, B], 1), rtol=2e-3, atol=1e-4)


def test_f_of_another_shape_than_x0_raises():
    with pytest.raises(jt.ShapeError, match=r"f\(x0\) has shape \(\), x0 has shape \(3,\)") \
            as err:
        jt.custom_root(lambda x: jt.sum(x), np.zeros(3), iterate)
    assert "test_custom_root.py" in str(err.value)
    with pytest.raises(jt.ShapeError, match=r"solve\(f, x0\) has shape \(2,\)"):
        jt.custom_root(lambda x: x, np.zeros(3), lambda f, x0: np.zeros(2))
