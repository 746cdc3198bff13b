"""GradientTape semantics beyond the seed tutorials: structures, jacobians, nesting,
custom gradients, memory, and the error paths."""

import gc
import os
import weakref

import numpy as np
import pytest

import jittape as jt

THIS_FILE = os.path.basename(__file__)


def test_watch_and_sources_accept_nested_structures():
    a, b, c = jt.constant(1.0), jt.constant(2.0), jt.constant(3.0)
    with jt.GradientTape() as tape:
        tape.watch({"a": a, "rest": [b, (c,)]})
        z = a * b * c
    g = tape.gradient(z, {"x": a, "y": [b, (c,)]})
    assert set(g) == {"x", "y"}
    assert float(g["x"]) == 6.0 and float(g["y"][0]) == 3.0 and float(g["y"][1][0]) == 2.0


def test_several_targets_are_summed_and_output_gradients_weight_them():
    x = jt.Variable([1.0, 2.0])
    with jt.GradientTape(persistent=True) as tape:
        y1 = x * 3.0
        y2 = x ** 2
    np.testing.assert_array_equal(tape.gradient([y1, y2], x).numpy(), [5.0, 7.0])
    g = tape.gradient([y1, y2], x, output_gradients=[jt.constant([1.0, 0.0]), None])
    np.testing.assert_array_equal(g.numpy(), [3.0 + 2.0, 0.0 + 4.0])
    with pytest.raises(ValueError, match="output_gradients"):
        tape.gradient(y1, x, output_gradients=jt.constant([1.0, 2.0, 3.0]))


def test_gradient_for_some_or_all_watched_values():
    # all watched values as sources (the backward sweep takes every entry) or only some
    # (it first finds the entries that depend on the sources): the same gradients
    w1, w2 = jt.Variable(5.0), jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        u = w1 * w2
        z = 3 * w1 ** 2 + u * w2
    assert [float(g) for g in tape.gradient(z, [w1, w2])] == [39.0, 30.0]
    assert float(tape.gradient(z, w1)) == 39.0
    assert float(tape.gradient(z, w2)) == 30.0
    assert float(tape.gradient(z, u)) == 3.0
    assert [float(g) for g in tape.gradient(z, [u, w2, w1])] == [3.0, 30.0, 39.0]


def test_unconnected_gradients_zero_has_source_shape_and_dtype():
    x = jt.Variable(np.ones((2, 3)))
    y = jt.Variable([1.0])
    with jt.GradientTape() as tape:
        z = jt.sum(x * 2)
    gx, gy = tape.gradient(z, [x, y], unconnected_gradients=jt.UnconnectedGradients.ZERO)
    assert gy.shape == (1,) and gy.dtype == jt.float32 and gy.numpy().tolist() == [0.0]
    assert gx.dtype == jt.float64
    with pytest.raises(ValueError, match="unconnected_gradients"):
        with jt.GradientTape() as t2:
            z = x * 2
        t2.gradient(z, x, unconnected_gradients="sometimes")


def test_integer_sources_and_targets_give_none():
    i = jt.Variable([1, 2, 3])
    f = jt.Variable([1.0, 2.0, 3.0])
    with pytest.warns(UserWarning, match="must be floating"):
        with jt.GradientTape(persistent=True) as tape:
            tape.watch(i)
            y = jt.sum(i * 2)
            z = jt.sum(f * jt.cast(i, jt.float32))
    assert y.dtype == jt.int32 and tape.gradient(y, i) is None
    assert tape.gradient(z, i) is None
    np.testing.assert_array_equal(tape.gradient(z, f).numpy(), [1.0, 2.0, 3.0])


def test_watch_accessed_variables_false():
    v = jt.Variable(2.0)
    w = jt.Variable(3.0)
    with jt.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(w)
        z = v * w
    gv, gw = tape.gradient(z, [v, w])
    assert gv is None and float(gw) == 2.0
    assert [x.name for x in tape.watched_variables()] == ["Variable:0"]


def test_watched_variables_in_creation_order():
    a = jt.Variable(1.0, name="a")
    b = jt.Variable(1.0, name="b")
    with jt.GradientTape() as tape:
        _ = b * a              # reads b first, then a
    assert [v.name for v in tape.watched_variables()] == ["a:0", "b:0"]


def test_jacobian_of_matrix_function():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 4))
    x = jt.constant(rng.normal(size=(4, 2)))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.matmul(jt.constant(A), x)              # (3, 2)
    J = tape.jacobian(y, x)
    assert J.shape == (3, 2, 4, 2)
    expected = np.einsum("ik,jl->ijkl", A, np.eye(2))
    np.testing.assert_allclose(J.numpy(), expected)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.jacobian(y, x)


def test_jacobian_unconnected():
    x = jt.constant([1.0, 2.0])
    u = jt.constant([3.0])
    with jt.GradientTape(persistent=True) as tape:
        tape.watch([x, u])
        y = x * 2
    assert tape.jacobian(y, u) is None
    z = tape.jacobian(y, u, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    assert z.shape == (2, 1) and not z.numpy().any()


def test_batch_jacobian():
    rng = np.random.default_rng(1)
    x = jt.constant(rng.normal(size=(5, 3)))
    W = jt.constant(rng.normal(size=(3, 2)))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.tanh(x @ W)                               # (5, 2)
    J = tape.batch_jacobian(y, x)
    assert J.shape == (5, 2, 3)
    d = 1 - np.tanh(x.numpy() @ W.numpy()) ** 2
    expected = d[:, :, None] * W.numpy().T[None, :, :]
    np.testing.assert_allclose(J.numpy(), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="batch sizes differ"):
        with jt.GradientTape() as t2:
            t2.watch(x)
            y2 = jt.sum(x, axis=0)
        t2.batch_jacobian(y2, x)


def test_hessian_with_nested_tapes_and_jacobian():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(3, 3))
    A = A + A.T
    x = jt.constant(rng.normal(size=3))
    with jt.GradientTape() as outer:
        outer.watch(x)
        with jt.GradientTape() as inner:
            inner.watch(x)
            f = 0.5 * jt.sum(x * (jt.constant(A) @ x)) + jt.sum(jt.sin(x))
        g = inner.gradient(f, x)
    H = outer.jacobian(g, x)
    np.testing.assert_allclose(H.numpy(), A - np.diag(np.sin(x.numpy())), rtol=1e-12, atol=1e-12)


def test_third_derivative_with_three_tapes():
    x = jt.Variable(0.7, dtype=jt.float64)
    with jt.GradientTape() as t3:
        with jt.GradientTape() as t2:
            with jt.GradientTape() as t1:
                y = jt.exp(2 * x) * jt.sin(x)
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    xv = 0.7
    # d3/dx3 of e^{2x} sin x = e^{2x} (2 sin x + 11 cos x)
    expected = np.exp(2 * xv) * (2 * np.sin(xv) + 11 * np.cos(xv))
    np.testing.assert_allclose(float(d3), expected, rtol=1e-12)


def test_persistent_tape_inside_its_context_records_its_own_gradient():
    x = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x ** 3
        dy = tape.gradient(y, x)                 # recorded on the same tape
    d2y = tape.gradient(dy, x)
    assert float(dy) == 27.0 and float(d2y) == 18.0


def test_non_persistent_tape_stops_recording_at_gradient():
    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x * x
        g = tape.gradient(y, x)
        z = y * 2                                  # no longer recorded
    assert float(g) == 6.0 and z is not None
    assert not tape._recording


def test_stop_recording_needs_a_recording_tape():
    tape = jt.GradientTape()
    with pytest.raises(ValueError, match="stop_recording"):
        with tape.stop_recording():
            pass


def test_reset_clears_the_tape():
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        _ = x * x              # recorded, then forgotten by reset()
        tape.reset()
        z = x * 5.0
    assert float(tape.gradient(z, x)) == 5.0


def test_variables_are_read_at_op_time():
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x * x
        x.assign(10.0)
    assert float(tape.gradient(y, x)) == 4.0
    assert float(x) == 10.0


def test_custom_gradient_is_differentiable_again():
    @jt.custom_gradient
    def cube(x):
        def grad(dy):
            return dy * 3 * x ** 2
        return x ** 3, grad

    x = jt.Variable(2.0)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            y = cube(x)
        g = inner.gradient(y, x)
    h = outer.gradient(g, x)
    assert float(y) == 8.0 and float(g) == 12.0 and float(h) == 12.0


def test_custom_gradient_with_several_inputs_checks_the_count():
    @jt.custom_gradient
    def mul(a, b):
        return a * b, lambda dy: (dy * b, dy * a)

    @jt.custom_gradient
    def broken(a, b):
        return a * b, lambda dy: dy

    a, b = jt.Variable(2.0), jt.Variable(5.0)
    with jt.GradientTape(persistent=True) as tape:
        y = mul(a, b)
        z = broken(a, b)
    assert [float(g) for g in tape.gradient(y, [a, b])] == [5.0, 2.0]
    with pytest.raises(ValueError, match="returned 1 gradients for 2 inputs"):
        tape.gradient(z, [a, b])


def test_non_persistent_tape_releases_its_records():
    x = jt.Variable(np.ones(1000))
    with jt.GradientTape() as tape:
        y = jt.sum(jt.exp(x * 2.0))
    assert len(tape._entries) == 3
    tape.gradient(y, x)
    assert tape._entries == []


def test_tape_keeps_only_what_the_backward_pass_needs():
    x = jt.Variable(np.ones(1000))
    with jt.GradientTape() as tape:
        a = x * 2.0            # multiply keeps its inputs, not its output
        b = a + 1.0            # add keeps nothing but shapes
        c = jt.exp(b)          # exp keeps its output, not its input
        loss = jt.sum(c)
    refs = [weakref.ref(a), weakref.ref(b), weakref.ref(c)]
    del a, b, c
    gc.collect()
    assert refs[0]() is None and refs[1]() is None     # not held by the tape
    assert refs[2]() is not None                         # exp's output is needed
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), 2 * np.exp(3.0) * np.ones(1000))


# -- error paths -----------------------------------------------------------------------------

def test_shape_mismatch_names_op_shapes_and_user_line():
    a = jt.ones((2, 3))
    b = jt.ones((4,))
    with pytest.raises(jt.ShapeError) as err:
        a + b
    msg = str(err.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg and THIS_FILE in msg


def test_matmul_mismatch_message():
    with pytest.raises(jt.ShapeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) are not aligned"):
        jt.ones((2, 3)) @ jt.ones((4, 5))


def test_reshape_and_concatenate_errors():
    with pytest.raises(jt.ShapeError, match=r"reshape: cannot reshape a tensor of shape \(2, 3\)"):
        jt.reshape(jt.ones((2, 3)), (4, 2))
    with pytest.raises(jt.ShapeError, match="concatenate"):
        jt.concatenate([jt.ones((2, 3)), jt.ones((2, 4))], axis=0)
    with pytest.raises(jt.ShapeError, match="axis 2 is out of bounds"):
        jt.sum(jt.ones((2, 3)), axis=2)


def test_non_tensor_sources_and_watch_arguments():
    x = jt.Variable(1.0)
    with jt.GradientTape() as tape:
        y = x * 2
    with pytest.raises(TypeError, match="sources must be jittape Tensors or Variables, got int"):
        tape.gradient(y, [x, 3])
    with pytest.raises(TypeError, match="can only watch jittape Tensors"):
        with jt.GradientTape() as t2:
            t2.watch(np.ones(3))


def test_unsupported_operand_type():
    with pytest.raises(jt.UnsupportedError, match="unsupported operand of type object"):
        jt.add(jt.ones(2), object())


def test_gradient_twice_on_non_persistent_tape():
    x = jt.Variable(1.0)
    with jt.GradientTape() as tape:
        y = x * 2
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        tape.gradient(y, x)
