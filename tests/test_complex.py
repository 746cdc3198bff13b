"""Complex values: the gradient of a real loss L of z = x + iy is dL/dx + i dL/dy
(API.md; TensorFlow's and PyTorch's convention), on the tape and in compiled code alike,
checked against central differences in x and y. An op that does not take complex values
raises UnsupportedError naming the op, the dtype and the user's line."""

import numpy as np
import pytest

import jittape as jt
from jittape import numpy as jnp

HERE = __file__.rsplit("/", 1)[-1]
rng = np.random.default_rng(7)
Z = rng.normal(size=3) + 1j * rng.normal(size=3)
W = rng.normal(size=3) + 1j * rng.normal(size=3)
A = rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))
B = rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))


def numeric(loss, z, eps=1e-6):
    """dL/dx + i dL/dy by central differences (dL/dx alone for a real z)."""
    z = np.asarray(z)
    g = np.zeros(z.shape, complex)
    for i in np.ndindex(z.shape):
        for unit in ((1.0, 1j) if z.dtype.kind == "c" else (1.0,)):
            up, down = z.astype(complex), z.astype(complex)
            up[i] += eps * unit
            down[i] -= eps * unit
            if z.dtype.kind != "c":
                up, down = up.real, down.real
            g[i] += unit * (float(loss(up)) - float(loss(down))) / (2 * eps)
    return g if z.dtype.kind == "c" else g.real


def tape_grad(loss, z):
    t = jt.constant(z)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = loss(t)
    return tape.gradient(y, t).numpy()


def value(loss):
    return lambda v: loss(jt.constant(v)).numpy()


LOSSES = {       # one loss per supported op, each a real value of complex inputs
    "abs of a product, squared": lambda z: jt.sum(jt.abs(z * W) ** 2),
    "real of exp times conj": lambda z: jt.real(jt.sum(jt.exp(z) * jt.conj(z))),
    "angle": lambda z: jt.sum(jt.angle(z)) + jt.sum(jnp.angle(z, deg=True)) / 100,
    "imag of a square": lambda z: jt.sum(jt.imag(jt.square(z) - z / W)),
    "log, sqrt, division": lambda z: jt.sum(jt.abs(W / z + jt.sqrt(z) - jt.log(z))),
    "sin cos tanh, powers": lambda z: jt.sum(jt.real(
        jt.sin(z) * jt.cos(z) + jt.tanh(z) - jt.reciprocal(z) + z ** 3 + z ** 1.5 - (-z))),
    "prod, mean": lambda z: jt.abs(jt.prod(z)) + jt.real(jt.mean(z * z)) + jt.imag(jt.mean(z)),
    "indexing, joining, views": lambda z: jt.real(jt.sum(
        z[0] * jt.concatenate([z, z])[1:4] * jt.stack([z, W])[0] * jt.reshape(z, (3, 1))[:, 0]
        * jt.broadcast_to(z, (2, 3))[1] * jt.where(jt.abs(z) > 1, z, 2j * z))),
    "a Python complex, equality": lambda z: jt.sum(jt.abs(z * (1 - 2j) + 0.5j)
                                                   * jt.cast(jt.not_equal(z, 1j), np.float64)),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_tape_gradient_is_dL_dx_plus_i_dL_dy(name):
    loss = LOSSES[name]
    g = tape_grad(loss, Z)
    assert g.dtype == np.complex128
    np.testing.assert_allclose(g, numeric(value(loss), Z), rtol=1e-6, atol=1e-8)


def test_compiled_gradients_equal_the_tape_and_finite_differences():
    # one compile for all the losses
    f = jt.grad(lambda z: sum(loss(z) for loss in LOSSES.values()))
    total = lambda v: sum(float(value(loss)(v)) for loss in LOSSES.values())   # noqa: E731
    g = f(Z)
    assert g.dtype == np.complex128
    np.testing.assert_allclose(g, numeric(total, Z), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g, sum(tape_grad(loss, Z) for loss in LOSSES.values()),
                               rtol=1e-10, atol=1e-12)


def test_matmul_einsum_of_complex_matrices():
    def loss(a):
        return (jt.sum(jt.abs(a @ B) ** 2) + jt.real(jt.sum(jt.einsum("ij,jk->ik", a, B)))
                + jt.imag(jt.sum(jt.dot(a[0], B[:, 1]))))
    want = numeric(value(loss), A)
    np.testing.assert_allclose(tape_grad(loss, A), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jt.grad(loss)(A), want, rtol=1e-6, atol=1e-8)


def test_mixed_real_and_complex_operands_promote_and_real_inputs_get_the_real_part():
    x = rng.normal(size=3)
    x32 = x.astype(np.float32)
    assert (jt.constant(x32) * 1j).dtype == np.complex64        # NumPy's promotion
    assert (jt.constant(x32) * np.complex128(1j)).dtype == np.complex128

    def loss(x, z):
        return jt.sum(jt.abs(x * z + x) ** 2) + jt.sum(jt.abs(jt.cast(x, np.complex128) * W))

    gx, gz = jt.grad(loss, argnums=(0, 1))(x, Z)
    assert gx.dtype == np.float64 and gz.dtype == np.complex128
    np.testing.assert_allclose(gx, numeric(lambda v: value(lambda t: loss(t, Z))(v), x),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gz, numeric(lambda v: value(lambda t: loss(x, t))(v), Z),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tape_grad(lambda t: loss(t, Z), x), gx, rtol=1e-10)


def test_complex64_keeps_its_dtype():
    z = Z.astype(np.complex64)
    loss = LOSSES["abs of a product, squared"]
    g = tape_grad(loss, z)
    assert g.dtype == np.complex64 and jt.grad(loss)(z).dtype == np.complex64
    np.testing.assert_allclose(g, numeric(value(loss), Z), rtol=1e-4, atol=1e-4)


def test_a_complex_target_is_differentiated_as_its_real_part():
    # TensorFlow's rule: the seed is 1 (+0i), which is the gradient of real(target)
    t = jt.constant(Z)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(t)
        y = jt.sum(t * t)
        r = jt.real(y)
    np.testing.assert_allclose(tape.gradient(y, t).numpy(), tape.gradient(r, t).numpy())
    np.testing.assert_allclose(tape.gradient(y, t).numpy(), np.conj(2 * Z))


def test_variables_and_second_derivatives():
    v = jt.Variable(Z.copy())
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            y = jt.sum(jt.abs(v) ** 4)
        g = inner.gradient(y, v)                   # 4 |z|^2 z
        s = jt.sum(jt.real(g))
    h = outer.gradient(s, v).numpy()
    np.testing.assert_allclose(g.numpy(), 4 * np.abs(Z) ** 2 * Z)
    np.testing.assert_allclose(h, numeric(lambda z: np.sum((4 * np.abs(z) ** 2 * z).real), Z),
                               rtol=1e-6, atol=1e-8)
    v.assign(np.zeros(3, complex))
    with pytest.raises(jt.UnsupportedError, match="imaginary part would be dropped"):
        jt.Variable(np.ones(2)).assign(np.array([1j, 2]))


def _refused(fn, op, dtype="complex128"):
    with pytest.raises(jt.UnsupportedError) as err:
        fn()
    text = str(err.value)
    assert op in text and dtype in text and HERE in text, text


def test_ops_without_complex_support_raise_naming_op_dtype_and_line():
    z = jt.constant(Z)
    _refused(lambda: jt.floor(z), "floor")
    _refused(lambda: jnp.sort(z), "sort")
    _refused(lambda: z > 0, "greater")
    _refused(lambda: jt.maximum(z, np.complex64(1j)), "maximum")
    _refused(lambda: jt.floor(jt.constant(Z.astype(np.complex64))), "floor", "complex64")
    _refused(lambda: jt.cast(z, np.float64), "cast")                  # drops the imaginary part
    _refused(lambda: jt.function(lambda z: jt.floor(z))(Z), "floor")
    _refused(lambda: jt.function(lambda z: jt.scipy.special.erf(z))(Z), "erf")   # eager only
    _refused(lambda: jt.grad(lambda x: jt.sum(jnp.sort(x * 1j).real))(np.ones(2)), "sort")
    _refused(lambda: jt.function(lambda z: z * 2, target="cuda")(Z), "target='cuda'")


def test_real_values_keep_working():
    x = np.array([1.0, -2.0])
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(jt.abs(x * x)))(x), 2 * x)
    np.testing.assert_allclose(tape_grad(lambda t: jt.sum(jt.abs(t * t)), x), 2 * x)
    assert jt.real(jt.constant(x)).dtype == np.float64
    np.testing.assert_array_equal(jt.imag(jt.constant(x)).numpy(), [0.0, 0.0])


def test_an_unused_complex_argument_gets_zeros():
    gx, gz = jt.grad(lambda x, z: jt.sum(x), argnums=(0, 1))(np.ones(2), np.array([1j, 2]))
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    assert gz.dtype == np.complex128 and not gz.any()
    assert jt.ones_like(jt.constant(np.ones(2)), dtype=np.complex64).dtype == np.complex64


# -- holomorphic math functions, Python complex arguments, max/min, var, norms, eigh, svd --

HOLOMORPHIC = ["tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
               "arctanh", "exp2", "expm1", "log2", "log10", "log1p"]
# arccosh's slope on the principal branch is 1 / (sqrt(z - 1) sqrt(z + 1)), which is not
# 1 / sqrt(z*z - 1) where Re z < 0: points on both sides of the imaginary axis
ZH = np.array([0.7 + 0.4j, -0.6 + 0.8j, -1.3 - 0.5j, 1.9 - 1.1j])


def _holomorphic_loss(name):
    f = getattr(jt, name)
    return lambda z: jt.sum(jt.abs(f(z) * (1 + 0.3j)) ** 2) + jt.real(jt.sum(f(z)))


@pytest.mark.parametrize("name", HOLOMORPHIC)
def test_holomorphic_functions_eager_and_compiled(name):
    loss = _holomorphic_loss(name)
    want = numeric(value(loss), ZH)
    g = tape_grad(loss, ZH)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jt.grad(loss)(ZH), g, rtol=1e-10, atol=1e-12)
    f = getattr(np, name)
    for z in (ZH, ZH.astype(np.complex64)):
        got = jt.function(lambda z: getattr(jt, name)(z))(z)
        assert got.dtype == f(z).dtype
        np.testing.assert_allclose(got, f(z), rtol=1e-5 if z.dtype == np.complex64 else 1e-12)
    # forward mode: the holomorphic slope times the tangent
    t = np.array([1.0, 1j, 0.5 - 0.5j, 2.0])
    _, tangent = jt.jvp(lambda z: getattr(jt, name)(z), (ZH,), (t,))
    h = 1e-7
    np.testing.assert_allclose(tangent, (f(ZH + h * t) - f(ZH - h * t)) / (2 * h), rtol=1e-6)


def test_erf_erfc_of_complex_values_on_the_tape():
    from scipy import special
    for name in ("erf", "erfc"):
        f = getattr(jt.scipy.special, name)
        loss = lambda z: jt.sum(jt.abs(f(z)) ** 2)      # noqa: E731
        np.testing.assert_allclose(f(jt.constant(Z)).numpy(), getattr(special, name)(Z))
        np.testing.assert_allclose(tape_grad(loss, Z), numeric(value(loss), Z), rtol=1e-6, atol=1e-8)


def test_python_complex_arguments_of_compiled_functions():
    z = 1.5 - 0.7j
    g = jt.grad(lambda z: jt.real(jt.sin(z)) + jt.abs(z * z))(z)
    np.testing.assert_allclose(g, np.conj(np.cos(z)) + 2 * z, rtol=1e-12)
    assert g.dtype == np.complex128
    x32 = np.ones(3, np.float32)
    f = jt.function(lambda x, c: x * c)
    assert f(x32, 2j).dtype == np.complex64                 # weak, as NumPy's 0j
    np.testing.assert_array_equal(f(x32, 3 + 1j), x32 * (3 + 1j))
    assert f(x32.astype(np.float64), 1j).dtype == np.complex128
    np.testing.assert_allclose(jt.function(lambda c: jt.exp(c) + c * c)(2j), np.exp(2j) - 4)
    gx, gc = jt.grad(lambda x, c: jt.sum(jt.abs(x * c) ** 2), argnums=(0, 1))(x32, 1 + 1j)
    assert gx.dtype == np.float32 and gc.dtype == np.complex64
    np.testing.assert_allclose(gx, 4 * x32, rtol=1e-6)
    np.testing.assert_allclose(gc, 6 + 6j, rtol=1e-6)
    _refused(lambda: jt.function(lambda c: c * 2, target="cuda")(1j), "target='cuda'")


def test_max_min_of_complex_values_are_lexicographic():
    a = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    a[0, 1] = a[0, 2].real + 1j * (a[0, 2].imag + 0.5)     # equal real parts: imag decides
    a[1, :] = -np.inf - 1j * np.arange(4)                  # below -inf + 0j
    for red in ("max", "min"):
        for axis in (None, 0, 1):
            want = getattr(np, red)(a, axis=axis)
            np.testing.assert_array_equal(getattr(jnp, red)(jt.constant(a), axis=axis).numpy(), want)
            np.testing.assert_array_equal(jt.function(lambda a: getattr(jnp, red)(a, axis=axis))(a),
                                          want)
    b = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    for red in ("max", "min"):
        loss = lambda z: jt.sum(jt.abs(getattr(jnp, red)(z * (1 + 2j), axis=1)) ** 2)   # noqa: E731
        g = tape_grad(loss, b)
        np.testing.assert_allclose(g, numeric(value(loss), b), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jt.grad(loss)(b), g, rtol=1e-10)


def test_var_and_std_of_complex_values_are_real():
    for fn in ("var", "std"):
        got = getattr(jnp, fn)(jt.constant(A), axis=1, ddof=1)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got.numpy(), getattr(np, fn)(A, axis=1, ddof=1))
        loss = lambda z: jt.sum(getattr(jnp, fn)(z, axis=0))             # noqa: E731
        g = tape_grad(loss, A)
        np.testing.assert_allclose(g, numeric(value(loss), A), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jt.grad(loss)(A), g, rtol=1e-10)


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, np.inf, -np.inf, "nuc", 2, -2])
def test_matrix_norms_of_complex_values(ord):
    loss = lambda a: jt.norm(a, ord)                     # noqa: E731
    assert loss(jt.constant(A)).dtype == np.float64
    np.testing.assert_allclose(loss(jt.constant(A)).numpy(), np.linalg.norm(A, ord))
    g = tape_grad(loss, A)
    np.testing.assert_allclose(g, numeric(value(loss), A), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jt.grad(loss)(A), g, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("ord", [None, 1, 3, np.inf, -np.inf])
def test_vector_norms_of_complex_values(ord):
    loss = lambda z: jt.norm(z, ord)                     # noqa: E731
    np.testing.assert_allclose(loss(jt.constant(Z)).numpy(), np.linalg.norm(Z, ord))
    g = tape_grad(loss, Z)
    np.testing.assert_allclose(g, numeric(value(loss), Z), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jt.grad(loss)(Z), g, rtol=1e-8, atol=1e-10)


H = rng.normal(size=(2, 4, 4)) + 1j * rng.normal(size=(2, 4, 4))     # not Hermitian: eigh
W4 = rng.normal(size=(4, 4))                                           # reads one triangle


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_complex_matrices(uplo):
    w0, v0 = np.linalg.eigh(H, uplo)
    for run in (lambda a: tuple(jt.eigh(jt.constant(a), uplo)),
                jt.function(lambda a: tuple(jt.eigh(a, uplo)))):
        w, v = (np.asarray(getattr(r, "numpy", lambda r=r: r)()) for r in run(H))
        assert w.dtype == np.float64 and v.dtype == np.complex128
        np.testing.assert_allclose(w, w0, atol=1e-12)
        np.testing.assert_allclose(np.abs(v), np.abs(v0), atol=1e-10)   # phases: LAPACK's
    h = H[0]
    loss = lambda a: (jt.sum(jt.eigh(a, uplo)[0] * W4[0])                      # noqa: E731
                      + jt.sum(jt.abs(jt.eigh(a, uplo)[1]) * W4))
    np.testing.assert_allclose(tape_grad(loss, h), numeric(value(loss), h), rtol=1e-6, atol=1e-7)
    values = lambda a: jt.sum(jt.eigvalsh(a, uplo) * W4[1])                    # noqa: E731
    g = tape_grad(values, h)
    np.testing.assert_allclose(g, numeric(value(values), h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jt.grad(values)(h), g, rtol=1e-10, atol=1e-12)
    assert jt.function(lambda a: jt.eigvalsh(a, uplo))(H.astype(np.complex64)).dtype == np.float32


def test_complex_singular_values_and_vectors():
    for shape in ((3, 5), (5, 3), (2, 4, 4)):
        a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
        k = min(shape[-2:])
        u0, s0, vh0 = np.linalg.svd(a, full_matrices=False)
        u, s, vh = jt.function(lambda a: tuple(jt.svd(a, full_matrices=False)))(a)
        assert u.dtype == np.complex128 and s.dtype == np.float64
        np.testing.assert_allclose(s, s0, atol=1e-12)
        np.testing.assert_allclose(np.abs(u), np.abs(u0), atol=1e-10)
        np.testing.assert_allclose(np.abs(vh), np.abs(vh0), atol=1e-10)
        wu = rng.normal(size=shape[:-1] + (k,))
        wv = rng.normal(size=shape[:-2] + (k, shape[-1]))
        ws = rng.normal(size=shape[:-2] + (k,))

        def loss(a):
            u, s, vh = jt.svd(a, full_matrices=False)
            return jt.sum(jt.abs(u) * wu) + jt.sum(s * ws) + jt.sum(jt.abs(vh) * wv)

        np.testing.assert_allclose(tape_grad(loss, a), numeric(value(loss), a),
                                   rtol=1e-6, atol=1e-7)
        values = lambda a: jt.sum(jt.svdvals(a) * ws)                     # noqa: E731
        g = tape_grad(values, a)
        np.testing.assert_allclose(g, numeric(value(values), a), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jt.grad(values)(a), g, rtol=1e-10, atol=1e-12)


def test_complex_vector_gradients_refuse_phase_dependent_losses():
    # a singular vector or eigenvector is LAPACK's up to a factor e^(i phi): a loss that
    # reads the phase has no gradient; compiled code cannot check it while tracing
    h = H[0]
    _refused(lambda: tape_grad(lambda a: jt.sum(jt.real(jt.eigh(a)[1])), h), "phases")
    _refused(lambda: tape_grad(lambda a: jt.sum(jt.imag(jt.svd(a)[0])), h), "phases")
    _refused(lambda: tape_grad(lambda a: jt.sum(jt.real(jt.svd(a)[2])), h), "phases")
    _refused(lambda: jt.grad(lambda a: jt.sum(jt.abs(jt.eigh(a)[1])))(h), "eigh")
    _refused(lambda: jt.grad(lambda a: jt.sum(jt.abs(jt.svd(a)[0])))(h), "svd")
    _refused(lambda: jt.jvp(lambda a: jt.eigh(a)[1], (h,), (h,)), "forward-mode")
