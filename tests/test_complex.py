"""Complex values are refused at the first op (eager) or at trace time (compiled) with
an UnsupportedError naming the op or argument and the dtype: never a wrong gradient."""

import numpy as np
import pytest

import jittape as jt

NOT_YET = "complex numbers are not supported yet"
HERE = __file__.rsplit("/", 1)[-1]


def _refused(fn, what, dtype="complex128"):
    with pytest.raises(jt.UnsupportedError) as err:
        fn()
    text = str(err.value)
    assert NOT_YET in text and what in text and f"dtype {dtype}" in text, text
    assert HERE in text, text                  # the user's line
    return text


def test_compiled_gradient_of_a_complex_argument_raises():
    g = jt.grad(lambda z: jt.sum(jt.abs(z * z)))
    _refused(lambda: g(np.array([1 + 2j])), "grad(<lambda>): argument 0")
    _refused(lambda: g(np.complex64(1 + 2j)), "argument 0", "complex64")


def test_tape_gradient_of_a_complex_value_raises():
    def loss():
        z = jt.constant(np.array([1 + 2j]))
        with jt.GradientTape() as tape:
            tape.watch(z)
            y = jt.sum(jt.abs(z * z))
        return tape.gradient(y, z)
    _refused(loss, "jt.constant")
    _refused(lambda: jt.Variable(np.array([1j, 2.0])), "jt.Variable")
    _refused(lambda: jt.Variable(1j), "jt.Variable")


def test_complex_operands_of_eager_ops_raise():
    x = jt.constant(np.array([1.0, 2.0]))
    _refused(lambda: jt.abs(np.array([1 + 2j])), "abs")
    _refused(lambda: x * np.array([1j, 2j]), "multiply")
    _refused(lambda: x + 1j, "add")
    _refused(lambda: x - np.complex64(1j), "subtract", "complex64")
    _refused(lambda: jt.where(x > 1.0, x, np.array([1j, 1j])), "where")


def test_complex_dtypes_asked_for_raise():
    x = jt.constant(np.array([1.0, 2.0]))
    _refused(lambda: jt.cast(x, np.complex128), "cast")
    _refused(lambda: x.astype(np.complex64), "cast", "complex64")
    _refused(lambda: jt.zeros(3, np.complex128), "jt.zeros")
    _refused(lambda: jt.full(2, 1j), "jt.full")
    _refused(lambda: jt.full(2, 1j, dtype=np.float32), "jt.full")      # not a silent cast
    _refused(lambda: jt.full_like(x, 1j), "jt.full_like")
    _refused(lambda: jt.constant(np.array([1j]), dtype=np.float64), "jt.constant")


def test_assigning_a_complex_value_raises():
    v = jt.Variable(np.array([1.0]))
    _refused(lambda: v.assign(np.array([2j])), "Variable.assign")
    np.testing.assert_array_equal(v.numpy(), [1.0])


def test_complex_values_in_compiled_functions_raise_at_trace_time():
    captured = np.array([1j, 2j])
    _refused(lambda: jt.function(lambda x: x * 1j)(np.ones(2)), "multiply")
    _refused(lambda: jt.function(lambda x: x + captured)(np.ones(2)), "add")
    _refused(lambda: jt.grad(lambda x: jt.sum(jt.abs(jt.cast(x, np.complex128))))(np.ones(2)),
             "cast")
    _refused(lambda: jt.function(lambda z: z)(np.ones(2, np.complex64)), "argument 0",
             "complex64")


def test_real_values_keep_working():
    x = np.array([1.0, -2.0])
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(jt.abs(x * x)))(x), 2 * x)
    t = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = jt.sum(jt.abs(t * t))
    np.testing.assert_allclose(tape.gradient(y, t).numpy(), 2 * x)
