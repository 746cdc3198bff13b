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
