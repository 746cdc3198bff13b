"""Functional updates ``x.at[idx].op(v)`` (``jittape/ops/updates.py``): NumPy's results,
gradients in ``x`` and ``v`` by finite differences, eager and compiled."""

import numpy as np
import pytest

import jittape as jt

from opcheck import numeric_grad

X = np.arange(1.0, 13.0).reshape(3, 4) / 7.0


def _numpy(x, index, op, v):
    y = x.copy()
    if op == "set":
        y[index] = v
    elif op == "add":
        np.add.at(y, index, v)
    elif op == "multiply":
        y[index] *= v
    elif op == "divide":
        y[index] /= v
    elif op == "power":
        y[index] **= v
    elif op == "min":
        y[index] = np.minimum(y[index], v)
    else:
        y[index] = np.maximum(y[index], v)
    return y


ROWS = [
    ((1, 2), "set", 0.5),
    ((slice(None), 0), "set", np.array([0.1, 0.2, 0.3])),
    ((0, [3, 1, 3]), "set", np.array([0.4, 0.5, 0.6])),     # a repeat: the last stored
    (([2, 2], slice(1, 3)), "add", np.array([[0.1, 0.2], [0.3, 0.4]])),   # accumulated
    ((Ellipsis, [0]), "multiply", 3.0),
    (([0, 0], 1), "multiply", np.array([2.0, 5.0])),          # x[idx] *= v: once, last
    ((1,), "divide", np.array([2.0, 4.0, 8.0, 0.5])),
    ((slice(0, 2), slice(None, None, 2)), "power", 2.0),
    ((2,), "min", 1.2),
    (([0, 1], [1, 2]), "max", np.array([1.0, 0.0])),
]


@pytest.mark.parametrize("index, op, v", ROWS)
def test_values_are_numpys(index, op, v):
    got = getattr(jt.constant(X).at[index], op)(v)
    np.testing.assert_allclose(got.numpy(), _numpy(X, index, op, v))
    assert np.array_equal(X, np.arange(1.0, 13.0).reshape(3, 4) / 7.0)   # x unchanged
    np.testing.assert_allclose(jt.constant(X).at[index].get().numpy(), X[index])


def _loss(rows):
    def loss(x, vs):
        total = 0.0
        for (index, op, _), v in zip(rows, vs):
            total = total + jt.sum(jt.sin(getattr(x.at[index], op)(v) * 1.3))
        return total
    return loss


def _fd(f, args, k):
    """Central differences of the scalar ``f(*args)`` in ``args[k]``."""
    return numeric_grad(lambda values: f(*values), list(args), k)


def test_gradients_in_x_and_v_eager_and_compiled():
    rows = [r for r in ROWS if r[1] != "min" and r[1] != "max"]   # (kinks: checked below)
    vs = [np.array(v, np.float64) for _, _, v in rows]
    loss = _loss(rows)

    def numeric(x, *vs):
        return float(loss(jt.constant(x), [jt.constant(v) for v in vs]))
    compiled = jt.grad(lambda x, vs: loss(x, vs), argnums=(0, 1))(X, vs)
    xv = jt.Variable(X)
    vv = [jt.Variable(v) for v in vs]
    with jt.GradientTape() as tape:
        value = loss(xv, vv)
    eager = tape.gradient(value, [xv] + vv)
    want_x = _fd(numeric, [X] + vs, 0)
    np.testing.assert_allclose(eager[0].numpy(), want_x, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(compiled[0], want_x, rtol=1e-6, atol=1e-8)
    for k in range(len(vs)):
        want = _fd(numeric, [X] + vs, k + 1)
        np.testing.assert_allclose(eager[k + 1].numpy(), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(compiled[1][k], want, rtol=1e-6, atol=1e-8)


def test_min_max_pass_the_gradient_to_the_chosen_value():
    x = jt.Variable(np.array([1.0, 5.0, 3.0]))
    v = jt.Variable(np.array([2.0, 4.0]))
    with jt.GradientTape() as tape:
        y = jt.sum(x.at[[0, 1]].max(v) * np.array([1.0, 10.0, 100.0]))
    gx, gv = tape.gradient(y, [x, v])
    np.testing.assert_allclose(gx.numpy(), [0.0, 10.0, 100.0])
    np.testing.assert_allclose(gv.numpy(), [1.0, 0.0])


def test_index_arrays_known_only_at_run_time():
    # an argument of the compiled function: a repeated index takes the mean of its values
    f = jt.function(lambda x, i, v: x.at[i].set(v))
    np.testing.assert_allclose(f(np.zeros(4), np.array([1, 3]), np.array([1.0, 5.0])),
                               [0.0, 1.0, 0.0, 5.0])
    np.testing.assert_allclose(f(np.zeros(4), np.array([1, 1, 3]), np.array([1.0, 3.0, 5.0])),
                               [0.0, 2.0, 0.0, 5.0])
    g = jt.function(lambda x, i: x.at[i].add(1.0))               # add accumulates, exactly
    np.testing.assert_allclose(g(np.zeros(3), np.array([2, 2, 0])), [1.0, 0.0, 2.0])


def test_updates_under_vmap_and_integer_tensors():
    rows = np.arange(6.0).reshape(2, 3)
    got = jt.vmap(lambda r, v: r.at[1].set(v))(rows, np.array([10.0, 20.0]))
    np.testing.assert_allclose(got, [[0.0, 10.0, 2.0], [3.0, 20.0, 5.0]])
    counts = jt.constant(np.zeros(3, np.int64)).at[[0, 0, 2]].add(1)
    assert counts.dtype == np.int64 and counts.numpy().tolist() == [2, 0, 1]


def _filling(extra=None):
    """A while loop writing row k of a carried buffer at step k (a preallocated output,
    as JAX code writes ``ys = ys.at[t].set(y)``); ``extra(k, b)`` is one more carry."""
    @jt.function
    def fill(buf, x):
        def body(c):
            k, b, e = c
            new = b.at[k].set(x * (k + 1.0))
            return k + 1, new, (e if extra is None else extra(k, b))
        return jt.while_loop(lambda c: c[0] < 4, body, (0, buf, np.zeros(())))[1:]
    return fill


def _filled(buf, x):
    want = buf.copy()
    for k in range(4):
        want[k] = x * (k + 1.0)
    return want


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_a_loop_writes_its_carried_buffer_in_place_and_never_the_callers(layout):
    base = np.arange(24.0).reshape(4, 6) / 5.0
    buf = {"C": base.copy(), "F": np.asfortranarray(base),
           "strided": np.arange(48.0).reshape(4, 12)[:, ::2] / 5.0}[layout]
    before = buf.copy()
    x = np.linspace(-1.0, 1.0, 6)
    fill = _filling()
    assert "updated in place by the loop" in fill.lower(buf, x).source
    for run in (fill, fill.lower(buf, x).python):
        got, _ = run(buf, x)
        np.testing.assert_array_equal(got, _filled(buf, x))
        np.testing.assert_array_equal(buf, before)          # the argument is untouched


def test_a_carry_read_after_its_update_is_copied_not_written_in_place():
    # the step's sum of the buffer is not an input of the update: it may run after the
    # write, so the update makes a new array (and the sum sees the step's old buffer)
    buf, x = np.ones((4, 3)), np.array([1.0, 2.0, 3.0])
    fill = _filling(lambda k, b: jt.numpy.sum(b))
    assert "updated in place" not in fill.lower(buf, x).source
    got, total = fill(buf, x)
    np.testing.assert_array_equal(got, _filled(buf, x))
    assert total == np.sum(_filled(buf, x)[:3]) + 1.0 * 3   # the buffer before step 4


def test_in_place_updates_keep_gradients_and_a_scan_body():
    def loss(buf, x):
        buf = jt.constant(buf) if isinstance(buf, np.ndarray) else buf   # (differences)

        def step(b, k):
            new = b.at[k].set(jt.sin(x) * b[k] + b[(k + 1) % 4])
            return new, jt.numpy.sum(new[k])
        b, ys = jt.scan(step, buf, np.arange(4))
        return jt.numpy.sum(b * b) + jt.numpy.sum(ys)
    buf, x = np.arange(12.0).reshape(4, 3) / 7.0, np.array([0.3, -0.2, 0.9])
    assert "updated in place by the loop" in jt.function(loss).lower(buf, x).source
    np.testing.assert_allclose(jt.function(loss)(buf, x), loss(buf, x).numpy(), rtol=1e-14)
    grad = jt.grad(loss, argnums=(0, 1))
    with jt.GradientTape() as tape:
        b, xv = jt.constant(buf), jt.constant(x)
        tape.watch([b, xv])
        eager = tape.gradient(loss(b, xv), [b, xv])
    got = grad(buf, x)
    for g, e, k in zip(got, eager, (0, 1)):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-12)
        np.testing.assert_allclose(g, _fd(loss, (buf, x), k), rtol=1e-6, atol=1e-8)
