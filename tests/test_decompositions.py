"""np.linalg's decompositions on tensors: eigh, eigvalsh, svd, qr, pinv, lstsq, and what is
built of them (matrix_rank, cond, the norms 'nuc', 2 and -2, matrix_power, multi_dot),
eagerly and compiled (ops/lapack.py, codegen/lapack.py).

Eigenvectors and singular vectors are defined up to sign: the values compared here are
sign-invariant (reconstructions, projectors, squares of vectors) and the gradients are
those of sign-invariant losses, checked against finite differences."""

import numpy as np
import pytest

import jittape as jt

from opcheck import numeric_grad

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

c = jt.constant


def _spread(rng, *shape):
    """Matrices with well separated singular values (and eigenvalues, when symmetric):
    2, 5, 8, ... on the diagonal, the rest in [-0.5, 0.5]."""
    m, n = shape[-2:]
    d = np.zeros((m, n))
    k = np.arange(min(m, n))
    d[k, k] = 2.0 + 3.0 * k
    return d + rng.uniform(-0.5, 0.5, shape)


def _numeric_grad(f, args, k):
    return numeric_grad(lambda values: f(*values), list(args), k)


def decompositions(a, t, s, b):
    """Sign-invariant values of every decomposition, on NumPy's names: ``a`` (2, 3, 3) a
    stack of general matrices, ``t`` (4, 3) a tall one, ``s`` (3, 3) read as symmetric
    from its lower triangle, ``b`` (4,)."""
    w, v = np.linalg.eigh(s)
    wu = np.linalg.eigvalsh(s, UPLO="U")
    u, sv, vh = np.linalg.svd(t, full_matrices=False)
    ua, sa, vha = np.linalg.svd(a)
    q, r = np.linalg.qr(t)
    x = np.linalg.lstsq(t, b, rcond=None)[0]
    n = np.swapaxes
    return (w, wu, v * v, (v * w[None, :]) @ v.T, u @ n(u, -1, -2), sv,
            (ua * sa[..., None, :]) @ vha,
            np.abs(vha), q @ r, q @ q.T, np.linalg.pinv(t), x, np.linalg.cond(a),
            np.linalg.norm(a, "nuc", axis=(1, 2)), np.linalg.norm(t, 2), np.linalg.norm(t, -2),
            np.linalg.matrix_power(s, 3), np.linalg.matrix_power(s, -2),
            np.linalg.multi_dot([b, t, s, s]))


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [_spread(rng, 2, 3, 3), _spread(rng, 4, 3), _spread(rng, 3, 3), rng.normal(size=4)]


def test_eager_values_match_numpy():
    args = _inputs()
    want = decompositions(*args)
    got = decompositions(*[c(x) for x in args])
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, jt.Tensor), k
        assert g.shape == np.shape(w) and g.dtype == np.float64, k
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12, err_msg=str(k))
    assert float(np.linalg.matrix_rank(c(args[1]))) == 3


def test_results_are_numpys_named_tuples_and_shapes():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 5, 3))
    full = np.linalg.svd(c(a))
    assert full.U.shape == (2, 5, 5) and full.S.shape == (2, 3) and full.Vh.shape == (2, 3, 3)
    wide = np.linalg.svd(c(np.swapaxes(a, 1, 2)), full_matrices=False)
    assert wide.U.shape == (2, 3, 3) and wide.Vh.shape == (2, 3, 5)
    assert np.linalg.svd(c(a), compute_uv=False).shape == (2, 3)
    q, r = np.linalg.qr(c(a), mode="complete")
    assert q.shape == (2, 5, 5) and r.shape == (2, 5, 3)
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-12)
    assert np.linalg.qr(c(a), mode="r").shape == (2, 3, 3)
    res = np.linalg.eigh(c(a[:, :3]))
    assert res.eigenvalues.shape == (2, 3) and res.eigenvectors.shape == (2, 3, 3)
    # float32 stays float32; integers give float64
    assert np.linalg.eigvalsh(c(a[0, :3].astype(np.float32))).dtype == np.float32
    assert np.linalg.svd(c(a.astype(np.float32)))[0].dtype == np.float32
    assert np.linalg.pinv(c(np.eye(2, dtype=np.int64))).dtype == np.float64


def test_upper_triangle_is_read_with_uplo_u():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(3, 3))
    np.testing.assert_allclose(np.linalg.eigvalsh(c(a), UPLO="U").numpy(),
                               np.linalg.eigvalsh(a, UPLO="U"), rtol=1e-12)
    w, v = np.linalg.eigh(c(a), UPLO="u")
    sym = np.triu(a) + np.triu(a, 1).T
    np.testing.assert_allclose(((v * w[None, :]) @ v.T).numpy(), sym, atol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigh_gives_numpys_vectors_signs_and_phases_included(uplo, dtype):
    """LAPACK's syevd (heevd) reading the triangle NumPy reads, eagerly and compiled: the
    upper one's reduction gives other signs than the lower one of the transpose."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=(3, 6, 6))
    if dtype == np.complex128:
        a = a + 1j * rng.normal(size=a.shape)
    w0, v0 = np.linalg.eigh(a, uplo)
    compiled = jt.function(lambda x: tuple(np.linalg.eigh(x, uplo)))
    for w, v in (np.linalg.eigh(c(a), uplo), compiled(a)):
        # (the values: eigvalsh's, which LAPACK computes without the vectors)
        np.testing.assert_allclose(np.asarray(w), w0, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(np.asarray(v), v0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(jt.function(lambda x: np.linalg.eigvalsh(x, uplo))(a),
                               np.linalg.eigvalsh(a, uplo), rtol=1e-13, atol=1e-13)


def _finite_differences(f, a, eps=1e-6):
    """The gradient of the real ``f`` at ``a`` by central differences (for a complex
    ``a``: d/dx + i d/dy, jittape's convention)."""
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        for unit in (1,) if a.dtype.kind == "f" else (1, 1j):
            d = np.zeros_like(a)
            d[i] = eps * unit
            g[i] += unit * (f(a + d) - f(a - d)) / (2 * eps)
    return g


def test_eig_values_vectors_and_gradients_of_any_loss():
    """NumPy's eig (complex always), eagerly and compiled, and the gradient of the vectors
    LAPACK normalizes (unit norm, largest component real): a loss that reads their phases
    is differentiated too (for a real matrix a complex pair's sign is LAPACK's only)."""
    rng = np.random.default_rng(8)
    n = 4
    g1, g2 = rng.normal(size=(2, n, n))
    gw = rng.normal(size=n) + 1j * rng.normal(size=n)

    def phases(x):                                   # reads the phases, not the signs
        w, v = np.linalg.eig(x)
        return (np.sum(np.real(v) ** 2 * g1 + np.real(v) * np.imag(v) * g2)
                + np.sum(np.imag(w * gw)))

    def complex_phases(x):                           # reads the signs too
        w, v = np.linalg.eig(x)
        return np.sum(np.real(v * (g1 + 1j * g2))) + np.sum(np.real(w * gw))

    real = rng.normal(size=(n, n))
    cases = [(real, phases), (rng.normal(size=(2, n, n)), phases),
             (real + 1j * rng.normal(size=(n, n)), complex_phases)]
    for a, loss in cases:
        w0, v0 = np.linalg.eig(a)
        for w, v in (np.linalg.eig(c(a)), jt.function(lambda x: tuple(np.linalg.eig(x)))(a)):
            assert np.asarray(w).dtype == np.asarray(v).dtype == np.complex128
            np.testing.assert_allclose(np.asarray(w), w0, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(np.asarray(v), v0, rtol=1e-12, atol=1e-12)
        x = jt.Variable(a)
        with jt.GradientTape() as tape:
            y = loss(x)
        expected = _finite_differences(loss, a)
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), expected, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(jt.grad(loss)(a), expected, rtol=1e-6, atol=1e-7)
    # forward mode: the values' and the vectors' tangents (a complex matrix: no sign left)
    a, t = cases[2][0], rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
    w_t, v_t = jt.jvp(lambda x: tuple(np.linalg.eig(x)), (a,), (t,))[1]
    for got, k in ((w_t, 0), (v_t, 1)):
        want = (np.linalg.eig(a + 1e-6 * t)[k] - np.linalg.eig(a - 1e-6 * t)[k]) / 2e-6
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)
    # eigvals, float32 (complex64), a matrix holding a NaN (NaN, as the other ops)
    np.testing.assert_allclose(jt.function(np.linalg.eigvals)(real), np.linalg.eigvals(real),
                               rtol=1e-12)
    assert jt.function(np.linalg.eigvals)(real.astype(np.float32)).dtype == np.complex64
    bad = real.copy()
    bad[0, 0] = np.nan
    assert np.isnan(np.asarray(np.linalg.eigvals(c(bad)))).all()
    assert np.isnan(jt.function(np.linalg.eigvals)(bad)).all()


def test_compiled_values_match_eager():
    args = _inputs(3)
    f = jt.function(decompositions)
    eager = decompositions(*[c(x) for x in args])
    for k, (g, w) in enumerate(zip(f(*args), eager)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-10, atol=1e-12, err_msg=str(k))
    # float32 computes in float64, as NumPy's, and gives float32
    args32 = [x.astype(np.float32) for x in args]
    for k, (g, w) in enumerate(zip(f(*args32), decompositions(*args32))):
        assert g.dtype == np.float32, k
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=str(k))
    # a stack of another size: the same compile
    other = _inputs(4)
    other[0] = _spread(np.random.default_rng(5), 5, 3, 3)
    np.testing.assert_allclose(f(*other)[6], decompositions(*other)[6], atol=1e-12)


def loss(a, t, s, b):
    """Sign-invariant uses of each decomposition's gradient."""
    w, v = np.linalg.eigh(s)
    u, sv, vh = np.linalg.svd(t, full_matrices=False)
    ua, sa, vha = np.linalg.svd(a)
    q, r = np.linalg.qr(t)
    x, res, rank, _ = np.linalg.lstsq(t, b, rcond=None)
    return (np.sum(w * w) + np.sum(np.sin(v * v) * s) + np.sum(np.linalg.eigvalsh(s, "U") ** 3)
            + np.sum(np.cos(u * u)) + np.sum(sv ** 3) + np.sum(vh * vh * t[:3])
            + np.sum(np.sin(ua * ua)) + np.sum(np.exp(-sa)) + np.sum(vha ** 4)
            + np.sum(np.sin(q * q)) + np.sum(np.abs(r) * r) + np.sum(np.linalg.pinv(t) * t.T)
            + np.sum(x * x) + np.sum(res) + np.sum(np.linalg.cond(a))
            + np.linalg.norm(t, "nuc") + np.linalg.norm(t, 2) + np.linalg.norm(t, -2)
            + np.sum(np.linalg.matrix_power(s, -3)) + np.linalg.multi_dot([b, t, s, b[:3]]))


def test_gradients_match_finite_differences_eagerly_and_compiled():
    args = _inputs(6)
    ts = [c(x) for x in args]
    with jt.GradientTape() as tape:
        tape.watch(ts)
        value = loss(*ts)
    grads = tape.gradient(value, ts)
    expected = [_numeric_grad(loss, args, k) for k in range(4)]
    np.testing.assert_allclose(float(value), loss(*args), rtol=1e-12)
    for k, (g, want) in enumerate(zip(grads, expected)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=str(k))
    value, compiled = jt.value_and_grad(loss, argnums=(0, 1, 2, 3))(*args)
    np.testing.assert_allclose(value, loss(*args), rtol=1e-12)
    for k, (g, want) in enumerate(zip(compiled, grads)):
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-9, atol=1e-10, err_msg=str(k))


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_svd_gradient_of_square_tall_and_wide_matrices(shape):
    rng = np.random.default_rng(sum(shape))
    a = _spread(rng, *shape)
    k = min(shape)
    p = rng.normal(size=(shape[0], shape[0]))

    def f(x):            # projectors onto the singular subspaces: sign-invariant
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return np.sum((u @ np.swapaxes(u, -1, -2)) * p) + np.sum(s * np.arange(1, k + 1)) \
            + np.sum(np.swapaxes(vh, -1, -2)[:, :1] * vh[:1].T * 2.0)
    x = c(a)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), _numeric_grad(f, [a], 0),
                               rtol=1e-6, atol=1e-7)


def test_second_derivatives_of_eigvalsh_and_singular_values():
    rng = np.random.default_rng(7)
    s, t = _spread(rng, 3, 3), _spread(rng, 4, 3)
    u_s, u_t = rng.normal(size=s.shape), rng.normal(size=t.shape)

    def f(s, t):
        singular = np.linalg.svd(t, compute_uv=False)
        return np.sum(np.linalg.eigvalsh(s) ** 3) + np.sum(np.exp(singular / 4))

    def directional(s, t):          # <grad f, (u_s, u_t)>, eagerly
        xs = [c(s), c(t)]
        with jt.GradientTape() as tape:
            tape.watch(xs)
            y = f(*xs)
        gs, gt = tape.gradient(y, xs)
        return float(np.sum(gs.numpy() * u_s) + np.sum(gt.numpy() * u_t))

    xs = [c(s), c(t)]
    with jt.GradientTape() as outer:
        outer.watch(xs)
        with jt.GradientTape() as inner:
            inner.watch(xs)
            y = f(*xs)
        gs, gt = inner.gradient(y, xs)
        d = jt.sum(gs * u_s) + jt.sum(gt * u_t)
    hs, ht = outer.gradient(d, xs)
    for k, h in enumerate((hs, ht)):
        np.testing.assert_allclose(h.numpy(), _numeric_grad(directional, [s, t], k),
                                   rtol=1e-5, atol=1e-6)
    # compiled: the Hessian of the singular values' part
    h = jt.hessian(lambda t: jt.sum(jt.exp(np.linalg.svd(t, compute_uv=False) / 4)))(t)
    hv = np.tensordot(h, u_t, axes=2)
    np.testing.assert_allclose(hv, ht.numpy(), rtol=1e-8, atol=1e-10)


def test_vmap_of_eigvalsh_and_svd():
    rng = np.random.default_rng(8)
    stack = _spread(rng, 5, 3, 3)
    got = jt.vmap(lambda m: np.linalg.eigvalsh(m))(stack)
    np.testing.assert_allclose(got, np.linalg.eigvalsh(stack), rtol=1e-12)
    grads = jt.vmap(jt.grad(lambda m: jt.sum(np.linalg.svd(m, compute_uv=False) ** 2)))(stack)
    np.testing.assert_allclose(grads, 2 * stack, rtol=1e-10, atol=1e-10)   # d|A|_F^2 = 2A


def test_degenerate_eigenvalues_give_inf_or_nan_for_vectors_only():
    a = np.diag([1.0, 1.0, 2.0])
    g_values = jt.grad(lambda m: jt.sum(np.linalg.eigvalsh(m) ** 2))(a)
    np.testing.assert_allclose(g_values, 2 * a, atol=1e-12)
    g_vectors = jt.grad(lambda m: jt.sum(np.linalg.eigh(m)[1] ** 3))(a)
    assert not np.all(np.isfinite(g_vectors))


def test_nan_in_gives_nan_out_compiled_as_eagerly():
    a = np.array([[np.nan, 1.0], [1.0, 2.0]])

    def f(m):
        w, v = np.linalg.eigh(m)
        return (w, v, np.linalg.svd(m)[1], np.linalg.qr(m)[0], np.linalg.pinv(m),
                np.linalg.norm(m, 2))
    eager = f(c(a))
    compiled = jt.function(f)(a)
    for e, g in zip(eager, compiled):
        assert np.all(np.isnan(e.numpy())) and np.all(np.isnan(g))
    # a NaN in the triangle eigh does not read changes nothing
    upper = np.array([[2.0, np.nan], [1.0, 2.0]])
    np.testing.assert_allclose(np.linalg.eigvalsh(c(upper)).numpy(), [1.0, 3.0])


def test_a_compiled_svd_traces_again_when_the_matrix_turns():
    f = jt.grad(lambda m: jt.sum(np.linalg.svd(m, full_matrices=False)[0] ** 4))
    rng = np.random.default_rng(9)
    for shape in [(4, 3), (3, 4), (5, 2)]:
        a = rng.normal(size=shape)
        x = c(a)
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.sum(np.linalg.svd(x, full_matrices=False)[0] ** 4)
        np.testing.assert_allclose(f(a), tape.gradient(y, x).numpy(), rtol=1e-9, atol=1e-10)


def test_lstsq_and_pinv_match_numpy_and_say_the_rank():
    rng = np.random.default_rng(10)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    x, res, rank, s = np.linalg.lstsq(c(a), c(b), rcond=None)
    want = np.linalg.lstsq(a, b, rcond=None)
    for got, w in zip((x, res, rank, s), want):
        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-10, atol=1e-12)
    deficient = a.copy()
    deficient[:, 2] = deficient[:, 0]
    x, res, rank, _ = np.linalg.lstsq(c(deficient), c(b), rcond=None)
    np.testing.assert_allclose(x.numpy(), np.linalg.lstsq(deficient, b, rcond=None)[0], atol=1e-10)
    assert int(rank) == 2 and np.all(np.isnan(res.numpy()))     # NumPy: an empty array
    np.testing.assert_allclose(np.linalg.pinv(c(deficient)).numpy(), np.linalg.pinv(deficient),
                               atol=1e-10)
    np.testing.assert_allclose(np.linalg.pinv(c(a), rtol=None).numpy(),
                               np.linalg.pinv(a, rtol=None), atol=1e-12)


def test_matrix_rank_cond_and_powers():
    m = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert int(np.linalg.matrix_rank(c(m))) == 1 == np.linalg.matrix_rank(m)
    assert int(np.linalg.matrix_rank(c(m), hermitian=True)) == 1
    assert int(np.linalg.matrix_rank(c(np.zeros(3)))) == 0
    assert float(np.linalg.cond(c(np.zeros((2, 2))))) == np.inf
    assert np.isnan(float(np.linalg.cond(c(np.full((2, 2), np.nan)))))
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    for p in (None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(float(np.linalg.cond(c(a), p)), np.linalg.cond(a, p), rtol=1e-12)
    for n in (0, 1, 2, 3, 6, -1, -4):
        np.testing.assert_allclose(np.linalg.matrix_power(c(a), n).numpy(),
                                   np.linalg.matrix_power(a, n), rtol=1e-12)
    ints = np.linalg.matrix_power(c(np.array([[1, 1], [0, 1]])), 5)
    assert ints.dtype == np.int64 and ints.numpy().tolist() == [[1, 5], [0, 1]]


def test_errors_name_the_op_the_shapes_and_the_line():
    with pytest.raises(jt.ShapeError, match=r"eigvals: .*square.*\(3, 2\).*test_decomp"):
        np.linalg.eigvals(c(np.ones((3, 2))))
    with pytest.raises(jt.UnsupportedError, match=r"svd: .*\(3, 2\).*full_matrices=False.*test_decomp"):
        jt.grad(lambda a: jt.sum(np.linalg.svd(a)[0]))(np.ones((3, 2)))
    with pytest.raises(jt.UnsupportedError, match=r"qr: .*at least as many rows.*\(2, 3\)"):
        x = c(np.eye(2, 3))
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.sum(np.linalg.qr(x)[0])
        tape.gradient(y, x)
    with pytest.raises(jt.ShapeError, match=r"svd: .*two axes.*\(3,\).*test_decomp"):
        np.linalg.svd(c(np.ones(3)))
    with pytest.raises(jt.UnsupportedError, match="target='cuda': eig.* runs on the CPU"):
        jt.grad(lambda a: jt.sum(np.linalg.eigvalsh(a)), target="cuda")(np.eye(2))


def test_kernels_call_the_helpers():
    f = jt.value_and_grad(lambda a: jt.sum(np.linalg.svd(a, compute_uv=False))
                          + jt.sum(np.linalg.eigvalsh(a)))
    source = f.lower(np.eye(3)).source
    for helper in ("lapack_svdvals(", "lapack_svd(", "lapack_eigvalsh(", "lapack_eigh("):
        assert helper in source, helper
    assert "np.linalg" not in source
