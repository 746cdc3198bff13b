"""NumPy's elementwise functions called by their own names on tensors (``np.arcsin(t)``):
values as NumPy's, gradients as finite differences, eagerly under a tape and compiled
(one compiled function for all rows), and the points where a careless rule gives NaN
or inf (logaddexp of large values, hypot at the origin, sinc at 0)."""

import warnings

import numpy as np
import pytest

import jittape as jt

# name: (NumPy function, domain of each operand); one row each
UNARY = {
    "arcsin": (np.arcsin, (-0.9, 0.9)), "arccos": (np.arccos, (-0.9, 0.9)),
    "arccosh": (np.arccosh, (1.2, 3.0)), "arctanh": (np.arctanh, (-0.9, 0.9)),
    "sinh": (np.sinh, (-2.0, 2.0)), "cosh": (np.cosh, (-2.0, 2.0)),
    "log2": (np.log2, (0.5, 3.0)), "log10": (np.log10, (0.5, 3.0)),
    "exp2": (np.exp2, (-2.0, 2.0)), "reciprocal": (np.reciprocal, (0.5, 2.0)),
    "cbrt": (np.cbrt, (-2.0, -0.3)), "fabs": (np.fabs, (0.2, 2.0)),
    "sinc": (np.sinc, (-2.0, 2.0)), "deg2rad": (np.deg2rad, (-90.0, 90.0)),
    "rad2deg": (np.rad2deg, (-2.0, 2.0)), "degrees": (np.degrees, (-2.0, 2.0)),
    "radians": (np.radians, (-90.0, 90.0)),
    "floor": (np.floor, (-3.0, 3.0)), "ceil": (np.ceil, (-3.0, 3.0)),
    "rint": (np.rint, (-3.0, 3.0)), "trunc": (np.trunc, (-3.0, 3.0)),
    "round": (lambda x: np.round(x, 1), (-3.0, 3.0)),
    "around": (lambda x: np.around(x, -1), (-60.0, 60.0)),
    "nan_to_num": (np.nan_to_num, (-2.0, 2.0)),
}
BINARY = {
    "fmax": np.fmax, "fmin": np.fmin, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
    "hypot": np.hypot, "copysign": np.copysign,
    "arctan2": np.arctan2,
}
NOT_DIFFERENTIABLE = {"floor", "ceil", "rint", "trunc", "round", "around"}


def _inputs():
    """{name: (function, [arrays])}, the same values for every test."""
    rng = np.random.default_rng(7)
    rows = {}
    for name, (fn, (lo, hi)) in UNARY.items():
        rows[name] = (fn, [rng.uniform(lo, hi, (2, 3))])
    for name, fn in BINARY.items():
        y_low = 0.2 if name == "arctan2" else -2.0        # (off arctan2's branch cut)
        rows[name] = (fn, [rng.uniform(y_low, 2.0, (2, 3)), rng.uniform(-2.0, 2.0, (3,))])
    return rows


ROWS = _inputs()
WEIGHTS = {name: np.random.default_rng(len(name)).normal(size=(2, 3)) for name in ROWS}


def _numeric(fn, arrays, k, v, eps=1e-6):
    grad = np.zeros_like(arrays[k])
    for i in np.ndindex(arrays[k].shape):
        moved = []
        for sign in (1, -1):
            a = [x.copy() for x in arrays]
            a[k][i] += sign * eps
            moved.append(np.sum(fn(*a) * v))
        grad[i] = (moved[0] - moved[1]) / (2 * eps)
    return grad


def _tape(fn, arrays, v):
    args = [jt.constant(a) for a in arrays]
    with jt.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        out = fn(*args)
        loss = jt.sum(out * v)
    return out, tape.gradient(loss, args)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_numpy_name_on_a_tensor_under_a_tape(name):
    fn, arrays = ROWS[name]
    v = WEIGHTS[name]
    out, grads = _tape(fn, arrays, v)
    assert isinstance(out, jt.Tensor)
    np.testing.assert_allclose(out.numpy(), fn(*arrays), rtol=1e-12, atol=1e-12, err_msg=name)
    for k, g in enumerate(grads):
        if name in NOT_DIFFERENTIABLE or (name == "copysign" and k == 1):
            assert g is None, (name, k)
            continue
        np.testing.assert_allclose(g.numpy(), _numeric(fn, arrays, k, v), rtol=1e-6, atol=1e-8,
                                   err_msg=f"{name} input {k}")


def _every_row(*flat):
    """sum over the rows of sum(f(*inputs) * v), and each row's value."""
    total, values, i = 0.0, [], 0
    for name in sorted(ROWS):
        fn, arrays = ROWS[name]
        out = fn(*flat[i:i + len(arrays)])
        i += len(arrays)
        total = total + jt.sum(out * WEIGHTS[name])
        values.append(out)
    return total, tuple(values)


FLAT = [a for name in sorted(ROWS) for a in ROWS[name][1]]


def test_one_compiled_function_of_every_row_matches_the_tape():
    f = jt.value_and_grad(_every_row, argnums=tuple(range(len(FLAT))), has_aux=True)
    (_, values), grads = f(*FLAT)
    args = [jt.constant(a) for a in FLAT]
    with jt.GradientTape() as tape:
        for a in args:
            tape.watch(a)
        total, _ = _every_row(*args)
    want = tape.gradient(total, args)
    i = 0
    for name, value in zip(sorted(ROWS), values):
        fn, arrays = ROWS[name]
        np.testing.assert_allclose(value, fn(*arrays), rtol=1e-12, atol=1e-12, err_msg=name)
        for k in range(len(arrays)):
            expected = np.zeros_like(arrays[k]) if want[i + k] is None else want[i + k].numpy()
            np.testing.assert_allclose(grads[i + k], expected, rtol=1e-10, atol=1e-12,
                                       err_msg=f"{name} input {k}")
        i += len(arrays)


# -- the careful points, eager and compiled ---------------------------------------------

def _careful(x, y, z, w, u):
    """logaddexp of values whose exp overflows, hypot at the origin, sinc at 0, fmax and
    fmin by a NaN and a tie, copysign by signs, nan_to_num of NaN and infinities."""
    return (jt.sum(np.logaddexp(x, y)) + jt.sum(np.hypot(x * 0.0, x * 0.0)) + jt.sum(np.sinc(z))
            + jt.sum(np.fmax(w, z) * 2.0) + jt.sum(np.fmin(w, z) * 3.0)
            + jt.sum(np.copysign(z, w) * 5.0)
            + jt.sum(np.nan_to_num(u * 7.0, nan=1.5, posinf=4.0, neginf=-4.0)))


X = np.array([1000.0, -1000.0, 5.0, 700.0])
Y = np.array([1000.5, -999.0, -np.inf, 700.0])
Z = np.array([0.0, 1.5, -2.0, 2.0])
W = np.array([np.nan, 3.0, -3.0, 2.0])
U = np.array([np.nan, np.inf, -np.inf, 2.0])


def _careful_grads():
    gx = 1 / (1 + np.exp(Y - X))                   # logaddexp's weights: sigmoid(x - y)
    gy = 1 - gx
    gx += 0.0                                      # hypot at the origin: 0, not NaN
    gz = np.zeros(4)                               # sinc'(0) = 0; elsewhere
    gz[1:] = (np.cos(np.pi * Z[1:]) - np.sinc(Z[1:])) / Z[1:]   # (cos(pi z) - sinc(z)) / z
    # fmax(w, z): a NaN w gives z; the tie (2, 2) gives w; fmin likewise
    gz += 2.0 * np.array([1, 0, 1, 0]) + 3.0 * np.array([1, 1, 0, 0])
    gw = 2.0 * np.array([0, 1, 0, 1]) + 3.0 * np.array([0, 0, 1, 1])
    gz += 5.0 * np.sign(Z) * np.where(np.signbit(W), -1, 1)     # copysign(z, w); none in w
    gu = 7.0 * np.isfinite(U)                      # nan_to_num: the finite elements only
    return gx, gy, gz, gw, gu


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_careful_points(compiled):
    arrays = (X, Y, Z, W, U)
    if compiled:
        value, grads = jt.value_and_grad(_careful, argnums=(0, 1, 2, 3, 4))(*arrays)
        grads = [np.asarray(g) for g in grads]
    else:
        args = [jt.constant(a) for a in arrays]
        with jt.GradientTape() as tape:
            for a in args:
                tape.watch(a)
            value = _careful(*args)
        grads = [g.numpy() for g in tape.gradient(value, args)]
    want = (np.sum(np.logaddexp(X, Y)) + np.sum(np.sinc(Z))
            + 2 * np.sum(np.fmax(W, Z)) + 3 * np.sum(np.fmin(W, Z))
            + 5 * np.sum(np.copysign(Z, W))
            + np.sum(np.nan_to_num(U * 7.0, nan=1.5, posinf=4.0, neginf=-4.0)))
    assert float(value) == pytest.approx(want, rel=1e-12)
    for g, expected, what in zip(grads, _careful_grads(), "xyzwu"):
        np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-12, err_msg=what)


def test_arcsin_and_arccos_at_one_have_infinite_slopes():
    """As NumPy's formula 1 / sqrt(1 - x^2) gives (and JAX): inf, not NaN."""
    x = jt.constant(np.array([1.0, -1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with jt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            a, c = jt.sum(np.arcsin(x)), jt.sum(np.arccos(x))
        assert np.array_equal(tape.gradient(a, x).numpy(), [np.inf, np.inf])
        assert np.array_equal(tape.gradient(c, x).numpy(), [-np.inf, -np.inf])


def test_round_halves_to_even_and_by_decimals_as_numpy():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.675, 1234.5, np.nan, np.inf])
    f = jt.function(lambda a: (np.round(a), np.round(a, 2), np.around(a, -2), np.rint(a)))
    for got, want in zip(f(x), (np.round(x), np.round(x, 2), np.around(x, -2), np.rint(x))):
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))   # -0.0 stays -0.0
    for values in (x, x.astype(np.float32)):
        np.testing.assert_array_equal(np.round(jt.constant(values), 2).numpy(), np.round(values, 2))


def test_edges_compiled_as_numpy():
    # found in review: each gave another dtype, a NameError or an OverflowError compiled
    x32 = np.array([0.7, -1.3], np.float32)
    ints = np.array([1, 2], np.int32)
    f = jt.function(lambda a, i, s: (np.hypot(a, i), np.arctan2(a, i), np.sinc(s),
                                     np.nan_to_num(a * np.inf, posinf=1e300, neginf=-1e300),
                                     np.round(a, 400)))
    small = np.array([1, 2], np.int8)
    hyp, atan, sinc, finite, rounded = f(x32, ints, small)
    np.testing.assert_allclose(hyp, np.hypot(x32, ints), rtol=1e-15)   # (float64: was float32)
    np.testing.assert_allclose(atan, np.arctan2(x32, ints), rtol=1e-15)
    assert sinc.dtype == np.sinc(small).dtype == np.float64
    np.testing.assert_allclose(sinc, np.sinc(small), atol=1e-15)
    np.testing.assert_array_equal(finite, np.nan_to_num(x32 * np.inf, posinf=1e300, neginf=-1e300))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(rounded, np.round(x32, 400))


def test_sinc_second_derivative_at_zero():
    d2 = jt.grad(lambda z: jt.sum(jt.grad(lambda y: jt.sum(np.sinc(y)))(z)))
    np.testing.assert_allclose(d2(np.array([0.0, 1e-5])), -np.pi ** 2 / 3, rtol=1e-6)
