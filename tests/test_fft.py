"""np.fft on tensors: values equal NumPy's, eagerly and compiled; gradients (the complex
convention of API.md: dL/dx + i dL/dy) equal central differences, for real and complex
inputs, every norm, lengths that pad and truncate, and chosen axes. Compiled code needs
the optional package rocket-fft; without it compiling raises, naming the package."""

import sys

import numpy as np
import pytest

import jittape as jt
import jittape.numpy as jnp

HERE = __file__.rsplit("/", 1)[-1]


def _real(*shape):
    return lambda rng: rng.normal(size=shape)


def _complex(*shape):
    return lambda rng: rng.normal(size=shape) + 1j * rng.normal(size=shape)


F = np.fft
# (name, NumPy's function, its keyword arguments, the input's draw)
CASES = [
    ("fft", F.fft, {}, _real(3, 4)),
    ("fft_complex_pad_axis0_ortho", F.fft, dict(n=6, axis=0, norm="ortho"), _complex(3, 4)),
    ("fft_truncate_forward", F.fft, dict(n=2, norm="forward"), _complex(3, 4)),
    ("ifft", F.ifft, {}, _complex(2, 5)),
    ("ifft_real_pad_axis0", F.ifft, dict(n=7, axis=0), _real(3, 2)),
    ("rfft_odd", F.rfft, {}, _real(3, 5)),
    ("rfft_truncate_axis0_ortho", F.rfft, dict(n=3, axis=0, norm="ortho"), _real(5, 2)),
    ("rfft_pad_even_forward", F.rfft, dict(n=8, norm="forward"), _real(2, 5)),
    ("irfft", F.irfft, {}, _complex(3, 4)),
    ("irfft_odd_truncate_ortho", F.irfft, dict(n=5, norm="ortho"), _complex(2, 4)),
    ("irfft_pad_axis0_forward", F.irfft, dict(n=9, axis=0, norm="forward"), _complex(3, 2)),
    ("irfft_real_input", F.irfft, dict(n=4), _real(2, 3)),
    ("fft2", F.fft2, {}, _complex(2, 3, 4)),
    ("ifft2_s_axes", F.ifft2, dict(s=(3, 5), axes=(0, 2)), _real(2, 3, 4)),
    ("fftn", F.fftn, {}, _complex(2, 3, 2)),
    ("fftn_s_axes_ortho", F.fftn, dict(s=(2, 5), axes=(2, 0), norm="ortho"), _complex(3, 2, 4)),
    ("fftn_repeated_axis", F.fftn, dict(axes=(1, 1)), _complex(2, 3)),
    ("ifftn_one_axis_forward", F.ifftn, dict(axes=(1,), norm="forward"), _real(2, 3, 2)),
    ("rfft2", F.rfft2, {}, _real(3, 4)),
    ("rfftn", F.rfftn, {}, _real(3, 3, 3)),
    ("rfftn_s_axes", F.rfftn, dict(s=(4, 3), axes=(0, 2)), _real(3, 2, 5)),
    ("irfft2", F.irfft2, {}, _complex(3, 4)),
    ("irfftn", F.irfftn, {}, _complex(2, 3, 3)),
    ("irfftn_s_axes_ortho", F.irfftn, dict(s=(4, 5), axes=(0, 2), norm="ortho"),
     _complex(3, 2, 4)),
    ("hfft", F.hfft, {}, _complex(2, 4)),
    ("ihfft_ortho", F.ihfft, dict(norm="ortho"), _real(2, 5)),
    ("fftshift", F.fftshift, {}, _real(3, 4)),
    ("fftshift_axes", F.fftshift, dict(axes=1), _complex(2, 5)),
    ("ifftshift", F.ifftshift, {}, _real(5, 3)),
    ("ifftshift_axes", F.ifftshift, dict(axes=(0,)), _complex(3, 2)),
]
IDS = [c[0] for c in CASES]


def _input(case):
    return case[3](np.random.default_rng(sum(map(ord, case[0]))))


def _weight(case, x):
    """A fixed weight of the result's shape (complex for a complex result): the loss is
    real(sum(f(x) * w))."""
    out = case[1](x, **case[2])
    rng = np.random.default_rng(len(case[0]))
    w = rng.normal(size=out.shape)
    return w + 1j * rng.normal(size=out.shape) if out.dtype.kind == "c" else w


def _loss(case, w, f=None):
    fn = f or case[1]
    return lambda x: jt.real(jt.sum(fn(x, **case[2]) * w))


def _numpy_loss(case, w):
    return lambda x: float(np.real(np.sum(case[1](x, **case[2]) * w)))


def numeric(loss, z, eps=1e-6):
    """dL/dx + i dL/dy by central differences (dL/dx alone for a real z)."""
    g = np.zeros(z.shape, z.dtype)
    for i in np.ndindex(z.shape):
        for unit in ((1.0, 1j) if z.dtype.kind == "c" else (1.0,)):
            up, down = z.copy(), z.copy()
            up[i] += eps * unit
            down[i] -= eps * unit
            g[i] += unit * (loss(up) - loss(down)) / (2 * eps)
    return g


def tape_grad(loss, x):
    t = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = loss(t)
    return y, tape.gradient(y, t).numpy()


# -- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_equal_numpy_through_dispatch_and_jittape_numpy(case):
    name, fn, kwargs, _ = case
    x = _input(case)
    want = fn(x, **kwargs)
    for got in (fn(jt.constant(x), **kwargs),                  # NumPy's dispatch
                getattr(jnp.fft, fn.__name__)(x, **kwargs),     # jittape.numpy.fft
                getattr(jt, fn.__name__)(jt.constant(x), **kwargs)):
        assert isinstance(got, jt.Tensor), name
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=name)


def test_float32_and_complex64_keep_their_precision():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    for fn, v in ((F.fft, x), (F.ifft, z), (F.rfft, x), (F.irfft, z), (F.fftn, z),
                  (F.rfftn, x), (F.irfftn, z), (F.fftshift, z)):
        got, want = fn(jt.constant(v)), fn(v)
        assert got.dtype == want.dtype, (fn.__name__, got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    g = jt.grad(lambda v: jt.sum(jt.abs(np.fft.rfft(v, n=6)) ** 2))(x)
    assert g.dtype == np.float32
    g = jt.grad(lambda v: jt.sum(np.fft.irfft(v) ** 2))(z)
    assert g.dtype == np.complex64


def test_integer_input_is_transformed_as_float64():
    k = np.arange(6).reshape(2, 3)
    got = np.fft.fft(jt.constant(k))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got.numpy(), np.fft.fft(k), atol=1e-12)


def test_fftfreq_is_numpys():
    assert jnp.fft.fftfreq is np.fft.fftfreq and jnp.fft.rfftfreq is np.fft.rfftfreq
    from jittape.numpy.fft import rfft as imported      # importable as a module
    assert imported is jt.rfft


# -- gradients ------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tape_gradient_matches_finite_differences(case):
    x = _input(case)
    w = _weight(case, x)
    value, g = tape_grad(_loss(case, w), x)
    np.testing.assert_allclose(float(value), _numpy_loss(case, w)(x), rtol=1e-12)
    assert g.dtype == x.dtype
    np.testing.assert_allclose(g, numeric(_numpy_loss(case, w), x), rtol=1e-6, atol=1e-7,
                               err_msg=case[0])


def test_irfft_gives_no_imaginary_gradient_to_the_bins_it_reads_as_real():
    z = _complex(2, 5)(np.random.default_rng(3))
    _, g = tape_grad(lambda v: jt.sum(np.fft.irfft(v, n=8) ** 3), z)
    assert np.all(g[:, 0].imag == 0) and np.all(g[:, 4].imag == 0)
    assert np.all(g[:, 1:4].imag != 0)


def test_second_derivative_through_a_transform():
    x = _real(6)(np.random.default_rng(4))

    def loss(v):
        return jt.sum(jt.abs(np.fft.rfft(v * v)) ** 2)

    def grad_u(v):                                      # <grad loss, u>
        return float(np.sum(jt.grad(loss)(v) * u))
    u = np.linspace(-1, 1, 6)
    h = jt.hessian(loss)(x)
    np.testing.assert_allclose(h @ u, numeric(grad_u, x), rtol=1e-5, atol=1e-6)


def test_forward_mode_on_a_complex_input():
    z = _complex(2, 4)(np.random.default_rng(5))
    t = _complex(2, 4)(np.random.default_rng(6))
    eps = 1e-6
    for fn, kwargs in ((F.fft, dict(n=5, norm="ortho")), (F.irfft, dict(n=6)),
                       (F.ifftn, {})):
        zt = jt.constant(z)
        with jt.ForwardAccumulator(zt, jt.constant(t)) as acc:
            out = fn(zt, **kwargs)
        want = (fn(z + eps * t, **kwargs) - fn(z - eps * t, **kwargs)) / (2 * eps)
        np.testing.assert_allclose(acc.jvp(out).numpy(), want, rtol=1e-6, atol=1e-8)


def test_vmap_batches_a_transform():
    x = _real(4, 6)(np.random.default_rng(7))
    got = jt.vmap(lambda v: jt.abs(np.fft.rfft(v, n=8)))(x)
    np.testing.assert_allclose(got, np.abs(np.fft.rfft(x, n=8, axis=1)), atol=1e-12)


# -- compiled -------------------------------------------------------------------------------

def _all_cases_loss(inputs):
    total = 0.0
    for case, x in zip(CASES, inputs):
        total = total + _loss(case, _weight(case, _input(case)))(x)
    return total


def _expected():
    inputs = tuple(_input(c) for c in CASES)
    want_value = sum(_numpy_loss(c, _weight(c, x))(x) for c, x in zip(CASES, inputs))
    want_grads = [tape_grad(_loss(c, _weight(c, x)), x)[1] for c, x in zip(CASES, inputs)]
    return inputs, want_value, want_grads


def _check(value, grads, want_value, want_grads, inputs, path):
    np.testing.assert_allclose(float(np.real(value)), want_value, rtol=1e-10, err_msg=path)
    for case, x, g, want in zip(CASES, inputs, grads, want_grads):
        g = np.asarray(g)
        assert g.shape == x.shape and g.dtype == x.dtype, (path, case[0])
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-11,
                                   err_msg=f"{case[0]} ({path})")


def test_compiled_values_and_gradients_equal_the_tape():
    """One compile for every case: Numba (through rocket-fft), the generated code run as
    Python and the graph run on NumPy give the tape's gradients."""
    pytest.importorskip("rocket_fft")
    inputs, want_value, want_grads = _expected()
    f = jt.value_and_grad(_all_cases_loss)
    value, grads = f(inputs)
    _check(value, grads, want_value, want_grads, inputs, "compiled")
    lowered = f.lower(inputs)
    assert "np.fft.rfft(" in lowered.source and "np.fft.irfft(" in lowered.source
    flat = jt.tree.flatten(inputs)[0]
    out = lowered.python(*flat)
    _check(out[0], out[1:], want_value, want_grads, inputs, "generated Python")


def test_compiled_function_values_equal_numpy():
    pytest.importorskip("rocket_fft")
    x = _real(3, 4)(np.random.default_rng(8)).astype(np.float32)
    f = jt.function(lambda v: (np.fft.rfft2(v, s=(4, 6)), np.fft.fftshift(np.fft.ifft(v)),
                               np.fft.irfft(np.fft.rfft(v), n=4)))
    for got, want in zip(f(x), (np.fft.rfft2(x, s=(4, 6)), np.fft.fftshift(np.fft.ifft(x)),
                                np.fft.irfft(np.fft.rfft(x), n=4))):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_without_rocket_fft_compiling_names_the_package_and_eager_still_works(monkeypatch):
    monkeypatch.setitem(sys.modules, "rocket_fft", None)     # (import rocket_fft fails)
    x = _real(2, 4)(np.random.default_rng(9))

    def loss(v):
        return jt.sum(jt.abs(np.fft.fft(v)) ** 2)
    with pytest.raises(jt.UnsupportedError, match="pip install rocket-fft") as info:
        jt.grad(loss)(x)
    assert "fft" in str(info.value) and HERE in str(info.value)
    _, g = tape_grad(loss, x)
    np.testing.assert_allclose(g, numeric(lambda v: float(np.sum(np.abs(np.fft.fft(v)) ** 2)),
                                          x), rtol=1e-6)
    # a shift is a roll: it needs no extra package
    np.testing.assert_allclose(jt.function(np.fft.fftshift)(x), np.fft.fftshift(x))


def test_cuda_names_the_op():
    with pytest.raises(jt.UnsupportedError, match="target='cuda'.*fft"):
        jt.grad(lambda v: jt.sum(jt.abs(np.fft.fft(v))), target="cuda")(np.ones(4))


# -- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call,error,pattern", [
    (lambda t: np.fft.fft(t, norm="both"), ValueError, "fft: Invalid norm value 'both'"),
    (lambda t: np.fft.fft(t, n=0), ValueError, r"fft: Invalid number of FFT data points \(0\)"),
    (lambda t: np.fft.irfft(t[:, :1]), ValueError, r"irfft: Invalid number of FFT data points"),
    (lambda t: np.fft.fft(t, n=2.5), TypeError, "fft: the number of points must be an integer"),
    (lambda t: np.fft.fft(t, out=np.empty((2, 3), complex)), jt.UnsupportedError,
     "fft: out= is not supported"),
    (lambda t: np.fft.rfft(t * 1j), TypeError, r"rfft: the operand is complex \(complex128"),
    (lambda t: np.fft.fftn(t, s=(2, 3), axes=(0,)), ValueError,
     "fftn: Shape and axes have different lengths"),
    (lambda t: np.fft.fft(t, axis=2), ValueError, "fft: axis 2 is out of bounds for rank 2"),
    (lambda t: np.fft.fftshift(t, axes=3), ValueError, "fftshift: axis 3 is out of bounds"),
    (lambda t: np.fft.fft(jt.cast(t, np.longdouble)), TypeError,
     "fft: unsupported dtype float128"),
    (lambda t: np.fft.rfftn(t, axes=()), ValueError, "rfftn: no axis to transform"),
])
def test_errors_name_the_op_and_the_users_line(call, error, pattern):
    t = jt.constant(np.ones((2, 3)))
    with pytest.raises(error, match=pattern) as info:
        call(t)
    assert HERE in str(info.value)
