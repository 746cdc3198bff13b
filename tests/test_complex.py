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
    _refused(lambda: jt.arcsinh(z), "arcsinh")
    _refused(lambda: jnp.sort(z), "sort")
    _refused(lambda: z > 0, "greater")
    _refused(lambda: jt.maximum(z, np.complex64(1j)), "maximum")
    _refused(lambda: jt.floor(jt.constant(Z.astype(np.complex64))), "floor", "complex64")
    _refused(lambda: jt.cast(z, np.float64), "cast")                  # drops the imaginary part
    _refused(lambda: jt.function(lambda z: jt.arcsinh(z))(Z), "arcsinh")
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
