"""np.linalg on tensors: solve, inv, det, slogdet, cholesky, norm, eagerly under a tape
and compiled, their errors, and that kernels call the linear algebra helpers instead of
compiling LAPACK's bindings into themselves (ops/lapack.py, codegen/lapack.py)."""

import time

import numpy as np
import pytest

import jittape as jt

from opcheck import numeric_grad

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _dominant(rng, *shape):
    """Well-conditioned matrices: the diagonal 3, the rest in [-0.5, 0.5]."""
    n = shape[-1]
    return rng.uniform(-0.5, 0.5, shape) + 3.0 * np.eye(n)


def _numeric_grad(f, args, k):
    """Central differences of the scalar ``f(*args)`` in ``args[k]``."""
    return numeric_grad(lambda values: f(*values), list(args), k)


def loss(a, b, c, m, v):
    """Many np.linalg calls: written on NumPy's names, so that it runs on NumPy arrays
    too (the reference) and on jittape tensors (eager and compiled)."""
    x = np.linalg.solve(a, b)                        # a vector right-hand side
    y = np.linalg.solve(a, c)                        # a matrix right-hand side
    z = np.linalg.solve(m, c)                        # a stack of systems, c broadcast
    w = np.linalg.solve(m, v)                        # a stack, one vector for each
    spd = a @ np.swapaxes(a, -1, -2)
    chol = np.linalg.cholesky(spd)
    sign, logdet = np.linalg.slogdet(m)
    return (np.sum(x * x) + np.sum(np.sin(y)) + np.sum(z * z) + np.sum(w)
            + np.sum(np.linalg.inv(a) * c[:, :1]) + np.linalg.det(a)
            + np.sum(logdet * sign) + np.sum(chol * chol[::-1])
            + np.linalg.norm(x) + np.linalg.norm(y, ord=1))


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [_dominant(rng, 3, 3), rng.normal(size=3), rng.normal(size=(3, 2)),
            _dominant(rng, 2, 3, 3), rng.normal(size=3)]


def test_values_match_numpy_eagerly():
    rng = np.random.default_rng(1)
    a, m = _dominant(rng, 3, 3), _dominant(rng, 2, 1, 3, 3)
    b, c = rng.normal(size=3), rng.normal(size=(4, 3, 2))
    t = jt.constant
    cases = [(np.linalg.solve, (a, b)), (np.linalg.solve, (m, c)), (np.linalg.solve, (a, c)),
             (np.linalg.inv, (m,)), (np.linalg.det, (m,)), (np.linalg.cholesky, (a @ a.T,)),
             (lambda x: np.linalg.cholesky(x, upper=True), (a @ a.T,)),
             (np.linalg.norm, (c,)), (lambda x: np.linalg.norm(x, -np.inf), (b,)),
             (lambda x: np.linalg.norm(x, 0), (b,)),
             (lambda x: np.linalg.norm(x, "fro", axis=(2, 0), keepdims=True), (c,)),
             (lambda x: np.linalg.norm(x, -1, axis=(0, 1)), (c,))]
    for f, args in cases:
        got = f(*[t(x) for x in args])
        assert isinstance(got, jt.Tensor)
        want = f(*args)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    sign, logdet = np.linalg.slogdet(t(-a))
    want = np.linalg.slogdet(-a)
    assert float(sign) == want.sign and np.isclose(float(logdet), want.logabsdet)
    # float32 stays float32, integers give float64 (NumPy's rule)
    assert np.linalg.inv(t(a.astype(np.float32))).dtype == np.float32
    ints = np.linalg.solve(t(np.eye(2, dtype=np.int64) * 2), t(np.ones(2, np.int64)))
    assert ints.dtype == np.float64


def test_gradients_on_the_tape_match_finite_differences():
    args = _args()
    ts = [jt.constant(x) for x in args]
    with jt.GradientTape() as tape:
        tape.watch(ts)
        value = loss(*ts)
    grads = tape.gradient(value, ts)
    np.testing.assert_allclose(float(value), loss(*args), rtol=1e-12)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g.numpy(), _numeric_grad(loss, args, k), rtol=1e-6, atol=1e-7)


def test_one_compiled_gradient_of_many_calls():
    args = _args()
    f = jt.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))
    value, grads = f(*args)
    np.testing.assert_allclose(value, loss(*args), rtol=1e-12)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g, _numeric_grad(loss, args, k), rtol=1e-6, atol=1e-7)
    # one compile serves other sizes of the batch
    other = _args(2)
    other[3] = _dominant(np.random.default_rng(3), 5, 3, 3)
    value, _ = f(*other)
    np.testing.assert_allclose(value, loss(*other), rtol=1e-12)


def test_vmap_of_solve_and_forward_mode():
    rng = np.random.default_rng(4)
    a, bs = _dominant(rng, 3, 3), rng.normal(size=(5, 3))
    got = jt.vmap(lambda b: np.linalg.solve(a, b))(bs)
    np.testing.assert_allclose(got, np.linalg.solve(a, bs.T).T, rtol=1e-12)
    da = rng.normal(size=(3, 3))
    ta = jt.constant(a)
    with jt.ForwardAccumulator(ta, da) as acc:
        d = np.linalg.det(ta)
    want = np.linalg.det(a) * np.trace(np.linalg.solve(a, da))
    np.testing.assert_allclose(float(acc.jvp(d)), want, rtol=1e-10)


def test_norm_of_zero_has_gradient_zero():
    for f in (jt.grad(lambda x: np.linalg.norm(x)), jt.grad(lambda x: np.linalg.norm(x, "fro"))):
        assert not np.any(f(np.zeros((2, 3))))
    x = jt.constant(np.zeros(3))
    with jt.GradientTape() as tape:
        tape.watch(x)
        n = np.linalg.norm(x)
    np.testing.assert_array_equal(tape.gradient(n, x).numpy(), 0.0)


def test_a_singular_matrix_raises_linalgerror_naming_op_and_line():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match=r"solve: .*test_linalg\.py:\d+"):
        np.linalg.solve(jt.constant(singular), jt.constant(np.ones(2)))

    def f(a):
        return np.sum(np.linalg.inv(a))
    with pytest.raises(np.linalg.LinAlgError, match=r"inv: singular matrix .*test_linalg\.py:\d+"):
        jt.grad(f)(singular)
    with pytest.raises(np.linalg.LinAlgError,
                       match=r"cholesky: .*not positive definite.*test_linalg"):
        jt.grad(lambda a: np.sum(np.linalg.cholesky(a)))(-np.eye(2))
    np.testing.assert_allclose(jt.grad(f)(np.eye(2) * 2), -np.full((2, 2), 0.25))


def test_shape_errors_name_op_and_shapes():
    with pytest.raises(jt.ShapeError,
                       match=r"solve: the last two axes of a must be square, got shape \(2, 3\)"):
        np.linalg.solve(jt.constant(np.ones((2, 3))), jt.constant(np.ones(2)))
    with pytest.raises(jt.ShapeError, match=r"solve: a of shape \(3, 3\) and b of shape \(2,\)"):
        jt.grad(lambda a, b: np.sum(np.linalg.solve(a, b)))(np.eye(3), np.ones(2))
    with pytest.raises(jt.ShapeError, match=r"det: .*\(4,\).*test_linalg"):
        jt.grad(lambda a: np.linalg.det(a))(np.ones(4))
    with pytest.raises(jt.ShapeError, match=r"eigh: .*square.*\(2, 3\).*test_linalg"):
        np.linalg.eigh(jt.constant(np.ones((2, 3))))


def test_cuda_names_the_op():
    with pytest.raises(jt.UnsupportedError, match="target='cuda': solve"):
        jt.grad(lambda a, b: np.sum(np.linalg.solve(a, b)), target="cuda")(np.eye(2), np.ones(2))


def test_kernels_call_the_helper_and_compile_no_lapack_of_their_own():
    a, b = np.eye(3) * 3 + 0.1, np.ones((3, 2))
    seconds = []
    for k, fn in enumerate((np.sin, np.cos)):
        f = jt.grad(lambda a, b, fn=fn: np.sum(fn(np.linalg.solve(a, b))))
        source = f.lower(a, b).source
        assert "lapack_solve(" in source and "np.linalg" not in source
        start = time.perf_counter()
        f(a, b)
        seconds.append(time.perf_counter() - start)
    # the first may compile (or load) the helper; the second compiles its kernel only
    print(f"first kernel calling solve: {seconds[0]:.2f} s; a second one: {seconds[1]:.2f} s")


def test_nan_in_gives_nan_out_compiled_as_eagerly():
    # Numba's linalg refuses NaN and inf (raised "singular matrix"); NumPy computes on
    a = np.array([[np.nan, 1.0], [2.0, 3.0]])
    f = jt.function(lambda m, v: (np.linalg.det(m), np.linalg.inv(m), np.linalg.solve(np.eye(2), v),
                                  np.linalg.slogdet(m)[1]))
    det, inv, x, logdet = f(a, np.array([np.nan, 1.0]))
    assert np.isnan(det) and np.isnan(inv).any() and np.isnan(x).any() and np.isnan(logdet)
    assert np.isnan(float(np.linalg.det(jt.constant(a))))


EINSUMS = ["...ij,jk->...ik", "...ij,jk", "ijk,kl,lm->im", "ijk,kl,lj", "i...,i...->...",
           "...j->...", "ab,bc,cd,de->ae"]


@pytest.mark.parametrize("spec", EINSUMS)
def test_einsum_ellipses_and_many_operands(spec):
    rng = np.random.default_rng(len(spec))
    shapes = {"...ij,jk->...ik": [(2, 3, 4), (4, 5)], "...ij,jk": [(2, 3, 4), (4, 5)],
              "ijk,kl,lm->im": [(2, 3, 4), (4, 5), (5, 3)], "ijk,kl,lj": [(2, 3, 4), (4, 5), (5, 3)],
              "i...,i...->...": [(2, 3, 4), (2, 3, 4)], "...j->...": [(2, 3, 4)],
              "ab,bc,cd,de->ae": [(2, 3), (3, 4), (4, 5), (5, 2)]}[spec]
    ops = [rng.normal(size=s) for s in shapes]
    want = np.einsum(spec, *ops)
    np.testing.assert_allclose(np.einsum(spec, *[jt.constant(o) for o in ops]).numpy(), want)

    def loss(*a):
        return jt.sum(np.einsum(spec, *a) ** 2)
    got = jt.grad(loss, argnums=0)(*ops)
    np.testing.assert_allclose(got, _numeric_grad(lambda *a: float(loss(*map(jt.constant, a))),
                                                  ops, 0), rtol=1e-6, atol=1e-8)



def test_einsum_with_axes_lists_after_the_operands():
    # NumPy's second form: einsum(a, [0, 1], b, [1, 2], [0, 2]), ... for unnamed axes
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5))
    for args in ([a, [Ellipsis, 1], b, [1, 2]], [a, [0, 1, 2], b, [2, 3], [3, 0]]):
        want = np.einsum(*args)
        ours = [jt.constant(x) if isinstance(x, np.ndarray) else x for x in args]
        np.testing.assert_allclose(np.einsum(*ours).numpy(), want, rtol=1e-12)
    g = jt.grad(lambda a: jt.sum(np.einsum(a, [0, 1, 2], b, [2, 3], [3, 0]) ** 2))(a)
    np.testing.assert_allclose(g, _numeric_grad(
        lambda a: float(jt.sum(np.einsum(jt.constant(a), [0, 1, 2], b, [2, 3], [3, 0]) ** 2)),
        [a], 0), rtol=1e-6, atol=1e-8)
