"""NumPy's shape functions, statistics, joins, splits, diagonals and products, called by
NumPy's own names on tensors: values against NumPy, gradients against finite
differences, eagerly under a tape and compiled (one ``jt.grad`` for all the rows)."""

import re

import numpy as np
import pytest

import jittape as jt
import jittape.numpy as jnp

HERE = re.escape(__file__.rsplit("/", 1)[-1])

RNG = np.random.default_rng(7)
A = RNG.uniform(-2, 2, (3, 4))
B = RNG.uniform(0.5, 2, (4,))
C = RNG.uniform(-2, 2, (2, 3, 4))
M = RNG.uniform(-2, 2, (4, 2))
ZEROS = np.array([[1.5, 0.0, 2.0, -0.5], [0.0, 0.7, 0.0, 2.0], [1.1, -1.3, 0.9, 0.0]])

def _xp(a):
    """jittape.numpy for tensors (lists of them reach no NumPy dispatch), NumPy otherwise."""
    return jnp if isinstance(a, jt.Tensor) else np


# (id, function of NumPy values or tensors, its arguments)
ROWS = [
    ("var", lambda a: np.var(a, axis=1, ddof=1), (A,)),
    ("var_all", lambda a: np.var(a), (A,)),
    ("std", lambda a: np.std(a, axis=0, keepdims=True), (A,)),
    ("nansum", lambda a: np.nansum(a, axis=1), (A,)),
    ("nanmean", lambda a: np.nanmean(a, axis=(0, 1)), (A,)),
    ("ptp", lambda a: np.ptp(a, axis=-1), (A,)),
    ("average", lambda a, w: np.average(a, axis=1, weights=w), (A, B)),
    ("average_full", lambda a, w: np.average(a, weights=w * a * a + 1.0), (A, A)),
    ("cumsum", lambda a: np.cumsum(a, axis=0), (A,)),
    ("cumsum_flat", lambda a: np.cumsum(a), (A,)),
    ("cumprod", lambda a: np.cumprod(a, axis=1), (A,)),
    ("cumprod_zeros", lambda a: np.cumprod(a, axis=-1), (ZEROS,)),
    ("cumprod_flat", lambda a: np.cumprod(a * 0.5), (ZEROS,)),
    ("ravel", lambda a: np.ravel(a), (C,)),
    ("moveaxis", lambda a: np.moveaxis(a, 0, -1), (C,)),
    ("moveaxis_pairs", lambda a: np.moveaxis(a, (0, 1), (2, 0)), (C,)),
    ("rollaxis", lambda a: np.rollaxis(a, 2, 1), (C,)),
    ("swapaxes", lambda a: np.swapaxes(a, 0, -1), (C,)),
    ("atleast_1d", lambda a: np.atleast_1d(a[0, 0]), (A,)),
    ("atleast_2d", lambda a: np.atleast_2d(a[0]), (A,)),
    ("atleast_3d", lambda a: np.atleast_3d(a), (A,)),
    ("flip", lambda a: np.flip(a, axis=(0, 2)), (C,)),
    ("fliplr", lambda a: np.fliplr(a), (A,)),
    ("flipud", lambda a: np.flipud(a), (A,)),
    ("rot90", lambda a: np.rot90(a), (A,)),
    ("rot90_k3", lambda a: np.rot90(a, 3, axes=(2, 1)), (C,)),
    ("roll", lambda a: np.roll(a, 2, axis=1), (A,)),
    ("roll_flat", lambda a: np.roll(a, -5), (A,)),
    ("tile", lambda a: np.tile(a, (2, 1, 2)), (A,)),
    ("repeat", lambda a: np.repeat(a, 2, axis=0), (A,)),
    ("repeat_counts", lambda a: np.repeat(a, [1, 0, 2, 1], axis=1), (A,)),
    ("pad", lambda a: np.pad(a, ((1, 0), (2, 2))), (A,)),
    ("pad_values", lambda a: np.pad(a, 1, constant_values=((0.5, 1.0), (2.0, 3.0))), (A,)),
    ("diff", lambda a: np.diff(a, axis=0), (A,)),
    ("diff_n2", lambda a: np.diff(a, n=2, prepend=0.5), (A,)),
    ("vstack", lambda a, b: np.vstack([a, b]), (A, B)),
    ("hstack", lambda a: np.hstack([a, a[:, :1]]), (A,)),
    ("column_stack", lambda a, b: np.column_stack([b, a.T]), (A, B)),
    ("append", lambda a, b: np.append(a, b), (A, B)),
    ("append_axis", lambda a: np.append(a, a[:1], axis=0), (A,)),
    ("split", lambda a: np.split(a, 2, axis=1)[1], (A,)),
    ("array_split", lambda a: np.array_split(a, 3, axis=1)[2], (A,)),
    ("vsplit", lambda a: np.vsplit(a, [1])[1], (A,)),
    ("hsplit", lambda a: np.hsplit(a, 2)[0], (A,)),
    ("diag", lambda b: np.diag(b, 1), (B,)),
    ("diag_of_matrix", lambda a: np.diag(a, -1), (A,)),
    ("diagonal", lambda c: np.diagonal(c, 1, 2, 1), (C,)),
    ("trace", lambda a: np.trace(a, -1), (A,)),
    ("tril", lambda a: np.tril(a, -1), (A,)),
    ("triu", lambda a: np.triu(a, 1), (A,)),
    ("inner", lambda a, b: np.inner(a, b), (A, B)),
    ("tensordot", lambda a, m: np.tensordot(a, m, axes=1), (A, M)),
    ("tensordot_pairs", lambda c, a: np.tensordot(c, a, axes=([1, 2], [0, 1])), (C, A)),
    ("kron", lambda a, m: np.kron(a, m), (A, M)),
    ("cross_axes", lambda a, c: np.cross(a[:, :3], c[0, :, :3], axisa=0, axisb=1, axisc=0), (A, C)),
    ("cross_axis", lambda c: np.cross(c, c[::-1] * 0.5, axis=1), (C,)),
    ("gradient", lambda c: np.gradient(c, axis=2, edge_order=2) + np.gradient(c, 0.5, axis=0),
     (C,)),
    ("gradient_axes", lambda a: np.gradient(a)[0] * np.gradient(a, 2.0, 3.0)[1], (A,)),
    ("dot_nd", lambda b, c: np.dot(b, c.transpose(0, 2, 1)), (B, C)),
    ("dot_nd_matrix", lambda a, c: np.dot(a, c.transpose(0, 2, 1)), (A, C)),
    ("einsum_diagonal", lambda a, c: np.einsum("jii,kj->ik", c[:, :3, :3], a[:, :2]), (A, C)),
    ("einsum_trace", lambda a: np.einsum("ii", a[:, :3] * a[:, 1:]), (A,)),
    ("std_of_one", lambda a: np.std(a[:1], axis=0) + np.std(a[0, 0]), (A,)),
    ("linspace", lambda a: np.linspace(a[0, 0], a[1, 2], 5), (A,)),
    ("linspace_rows", lambda a: np.linspace(a[0], a[1] * 2.0, 3, endpoint=False), (A,)),
    # lists and tuples holding tensors: their stack (NumPy's np.mean([x, y]) converts
    # them; jittape.numpy's functions keep the gradients)
    ("mean_list", lambda a: _xp(a).mean([a[0, 0], a[1, 1] * 2.0]), (A,)),
    ("var_tuple", lambda a: _xp(a).var((a[0], a[1] * a[2], a[2])), (A,)),
    ("append_list", lambda a: _xp(a).append([a[0, 0], a[0, 1]], a[1]), (A,)),
    ("array_list", lambda a: _xp(a).array([[a[0, 0], 1.5], [a[1, 1], a[2, 3] * 2.0]]), (A,)),
    ("asarray_ndmin", lambda a: _xp(a).array(a[0], ndmin=3) * 2.0, (A,)),
    ("r_", lambda a, b: _xp(a).r_[a[0], b, 1:3, 0.5], (A, B)),
    ("r_directive", lambda a, b: _xp(a).r_["0,2,0", a[0], b], (A, B)),
    ("c_", lambda a, b: _xp(a).c_[a.T, b, b * a[0]], (A, B)),
    ("methods", lambda a: (a.var(1) + a.std(0)[:3] + a.cumsum(1)[:, 0] + a.cumprod(0)[0, :3]
                           + a.swapaxes(0, 1)[0] + a.trace() + a.diagonal()
                           + a.repeat(2)[:3] + a.ravel()[:3] + a.flatten()[3:6]), (A,)),
]


def _weights(shape, k):
    return np.random.default_rng(k).normal(size=shape)


def _numeric_grad(f, args, k, eps=1e-6):
    x = args[k]
    grad = np.zeros_like(x)
    for i in range(x.size):
        moved = [a.copy() for a in args]
        moved[k].reshape(-1)[i] += eps
        plus = f(*moved)
        moved[k].reshape(-1)[i] -= 2 * eps
        grad.reshape(-1)[i] = (plus - f(*moved)) / (2 * eps)
    return grad


@pytest.mark.parametrize("name,fn,args", ROWS, ids=[r[0] for r in ROWS])
def test_eager_values_and_gradients(name, fn, args):
    want = fn(*args)
    w = _weights(np.shape(want), len(name))
    tensors = [jt.constant(a) for a in args]
    with jt.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        out = fn(*tensors)
        loss = jt.sum(out * w)
    assert isinstance(out, jt.Tensor), name
    assert out.shape == np.shape(want) and out.dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12, err_msg=name)
    grads = tape.gradient(loss, tensors)
    for k, g in enumerate(grads):
        expected = _numeric_grad(lambda *a: float(np.sum(fn(*a) * w)), list(args), k)
        got = np.zeros_like(args[k]) if g is None else g.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7, err_msg=f"{name} input {k}")


def test_compiled_gradient_of_all_rows_matches_the_tape():
    """One compiled function for every row: a loss summing each row's weighted result."""
    weights = [_weights(np.shape(fn(*args)), len(name)) for name, fn, args in ROWS]
    inputs = [A, B, C, M, ZEROS]
    slots = [[next(k for k, x in enumerate(inputs) if x is a) for a in args]
             for _, _, args in ROWS]

    def loss(*xs):
        total = 0.0
        for (name, fn, _), w, where in zip(ROWS, weights, slots):
            total = total + jt.sum(fn(*[xs[k] for k in where]) * w)
        return total

    tensors = [jt.constant(x) for x in inputs]
    with jt.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        value = loss(*tensors)
    want = tape.gradient(value, tensors)
    got = jt.grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"input {k}")


def test_cumprod_gradient_with_zeros_second_order():
    """The cumulative product's VJP is exact at zeros, and so is its own derivative where
    an axis holds one zero (with two, the mixed derivative of the two zeros is not)."""
    x = np.array([1.2, 0.0, 1.5, -2.0, 0.7, -0.5])
    u = np.array([0.3, -1.0, 0.7, 0.2, 1.1, -0.4])

    def directional(v):
        t = jt.constant(v)
        with jt.GradientTape() as tape:
            tape.watch(t)
            loss = jt.sum(np.cumprod(t) * np.arange(1.0, 7.0))
        return float(np.sum(tape.gradient(loss, t).numpy() * u))

    t = jt.constant(x)
    with jt.GradientTape() as outer:
        outer.watch(t)
        with jt.GradientTape() as inner:
            inner.watch(t)
            loss = jt.sum(np.cumprod(t) * np.arange(1.0, 7.0))
        g = inner.gradient(loss, t)
        gu = jt.sum(g * u)
    h = outer.gradient(gu, t)
    np.testing.assert_allclose(h.numpy(), _numeric_grad(directional, [x], 0), rtol=1e-6,
                               atol=1e-6)


def test_integer_inputs_promote_as_numpy():
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = jt.constant(i)
    for fn in (lambda a: np.var(a, axis=0), lambda a: np.cumsum(a), lambda a: np.average(a),
               lambda a: np.nanmean(a, axis=1), lambda a: np.cumprod(a, axis=1)):
        want = fn(i)
        got = fn(t)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)


T = jt.constant(A)
AXIS_ERRORS = [
    ("var", lambda a: np.var(a, axis=2)),
    ("std", lambda a: np.std(a, axis=(0, -3))),
    ("nansum", lambda a: np.nansum(a, axis=2)),
    ("nanmean", lambda a: np.nanmean(a, axis=-3)),
    ("ptp", lambda a: np.ptp(a, axis=2)),
    ("average", lambda a: np.average(a, axis=2)),
    ("cumsum", lambda a: np.cumsum(a, axis=2)),
    ("cumprod", lambda a: np.cumprod(a, axis=-3)),
    ("swapaxes", lambda a: np.swapaxes(a, 0, 2)),
    ("moveaxis", lambda a: np.moveaxis(a, 2, 0)),
    ("rollaxis", lambda a: np.rollaxis(a, 2)),
    ("flip", lambda a: np.flip(a, 2)),
    ("roll", lambda a: np.roll(a, 1, axis=2)),
    ("repeat", lambda a: np.repeat(a, 2, axis=-3)),
    ("diff", lambda a: np.diff(a, axis=2)),
    ("array_split", lambda a: np.array_split(a, 2, axis=2)),
    ("diagonal", lambda a: np.diagonal(a, axis1=2)),
    ("trace", lambda a: np.trace(a, axis2=-3)),
]


@pytest.mark.parametrize("op,fn", AXIS_ERRORS, ids=[e[0] for e in AXIS_ERRORS])
def test_axis_out_of_bounds_raises_as_numpy(op, fn):
    # (NumPy's array_split raises IndexError, its others AxisError: both a ValueError and
    # an IndexError; jittape's is a ValueError)
    with pytest.raises((np.exceptions.AxisError, IndexError)):
        fn(A)
    with pytest.raises(ValueError, match=rf"{op}: .*axis -?\d is out of bounds for rank 2 "
                                         rf"\(shape \(3, 4\)\).*{HERE}"):
        fn(T)


def test_compiled_axis_error_names_the_op():
    with pytest.raises(ValueError, match=rf"cumsum: axis 2 is out of bounds .*\(3, 4\).*{HERE}"):
        jt.grad(lambda a: jt.sum(np.cumsum(a, axis=2)))(A)


def test_other_errors():
    with pytest.raises(jt.UnsupportedError, match=rf"pad: mode 'reflect' is not supported.*{HERE}"):
        np.pad(T, 1, mode="reflect")
    with pytest.raises(ValueError, match=rf"split: array split does not result in an equal "
                                         rf"division.*{HERE}"):
        np.split(T, 3, axis=1)
    with pytest.raises(ValueError, match=rf"tensordot: shape-mismatch for sum.*{HERE}"):
        np.tensordot(T, T, axes=1)
    with pytest.raises(ValueError, match=rf"fliplr: Input must be >= 2-d.*{HERE}"):
        np.fliplr(jt.constant(B))
    with pytest.raises(ValueError, match=rf"average: Length of weights.*{HERE}"):
        np.average(T, axis=0, weights=B)
    with pytest.raises(jt.UnsupportedError, match=rf"var: out= is not supported.*{HERE}"):
        np.var(T, out=np.empty(()))
