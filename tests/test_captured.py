"""Values a compiled function reads besides its arguments: closure cells and the globals
it names are read at every call (arrays by reference, floats as run-time inputs) or
guarded (ints, strings: another value traces again); draws from np.random warn; jt.random
draws advance at every call."""

import os
import random
import sys
import warnings

import numpy as np
import pytest

import jittape as jt

THIS_FILE = os.path.basename(__file__)

pytestmark = [pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")]

SCALE = 2.0
POWER = 2
W_GLOBAL = np.array([1.0, 2.0, 3.0])
THREE = 3.0


def scaled_loss(w):
    return jt.sum(w * w) * SCALE


def eager_grad(f, w):
    w = jt.constant(w)
    with jt.GradientTape() as tape:
        tape.watch(w)
        value = f(w)
    return tape.gradient(value, w).numpy()


def test_global_float_changed_gives_the_new_gradient_without_compiling_again():
    global SCALE
    g = jt.grad(scaled_loss)
    w = np.array([1.0, -2.0, 0.5])
    try:
        np.testing.assert_allclose(g(w), 4.0 * w)
        compiles = g.cache_info().compiles
        SCALE = 5.0
        np.testing.assert_allclose(g(w), 10.0 * w)
        np.testing.assert_allclose(g(w), eager_grad(scaled_loss, w))
        SCALE = -1.5
        np.testing.assert_allclose(g(w), -3.0 * w)
        assert g.cache_info().compiles == compiles
        # each new value traces again (the code might also use it in Python), and
        # finds the same graph: nothing compiles; a value seen before traces nothing
        assert g.cache_info().traces == 3
        SCALE = 5.0
        np.testing.assert_allclose(g(w), 10.0 * w)
        assert g.cache_info().traces == 3
    finally:
        SCALE = 2.0


def test_captured_float_never_widens_a_float32_tensor():
    global SCALE
    g = jt.grad(scaled_loss)
    w = np.array([1.0, -2.0, 0.1], np.float32)
    try:
        SCALE = 0.1
        out = g(w)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, eager_grad(scaled_loss, w))
        SCALE = 0.3
        np.testing.assert_array_equal(g(w), eager_grad(scaled_loss, w))
    finally:
        SCALE = 2.0


def power_loss(w):
    return jt.sum(w ** POWER)


def test_global_int_changed_traces_again():
    global POWER
    g = jt.grad(power_loss)
    w = np.array([1.0, 2.0, 3.0])
    try:
        np.testing.assert_allclose(g(w), 2 * w)
        assert g.cache_info().traces == 1
        POWER = 3
        np.testing.assert_allclose(g(w), 3 * w ** 2)
        assert g.cache_info().traces == 2
        POWER = 2                       # the first variant again: no trace
        np.testing.assert_allclose(g(w), 2 * w)
        assert g.cache_info().traces == 2
    finally:
        POWER = 2


def test_closure_array_rebound_is_seen():
    weights = np.array([1.0, 1.0, 1.0])

    def loss(w):
        return jt.sum(w * weights)

    g = jt.value_and_grad(loss)
    w = np.array([1.0, 2.0, 3.0])
    value, grad = g(w)
    assert value == 6.0
    np.testing.assert_allclose(grad, [1.0, 1.0, 1.0])
    weights = np.array([0.0, 2.0, -1.0])          # a new array in the cell
    value, grad = g(w)
    assert value == 1.0
    np.testing.assert_allclose(grad, [0.0, 2.0, -1.0])
    weights = np.array([5.0, 5.0, 5.0, 5.0])      # another size: traced again, and
    with pytest.raises(ValueError, match="broadcast"):   # the shapes do not fit
        g(w)
    assert g.cache_info().compiles == 1


def test_a_size_read_from_a_captured_array_is_not_stale():
    weights = np.array([1.0, 2.0, 3.0])

    def loss(w):
        return jt.sum(w[:, None] * weights) / weights.shape[0]

    g = jt.grad(loss)
    w = np.ones(2)
    np.testing.assert_allclose(g(w), [2.0, 2.0])
    weights = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_allclose(g(w), [3.0, 3.0])
    weights = np.array([2.0, 4.0, 6.0])            # the first shape again: no trace
    traces = g.cache_info().traces
    np.testing.assert_allclose(g(w), [4.0, 4.0])
    assert g.cache_info().traces == traces


def global_array_loss(w):
    return jt.sum(w * W_GLOBAL)


def test_global_array_rebound_and_changed_in_place_are_seen():
    global W_GLOBAL
    g = jt.grad(global_array_loss)
    w = np.ones(3)
    try:
        np.testing.assert_allclose(g(w), [1.0, 2.0, 3.0])
        W_GLOBAL[:] = [7.0, 8.0, 9.0]             # in place
        np.testing.assert_allclose(g(w), [7.0, 8.0, 9.0])
        W_GLOBAL = np.array([-1.0, 0.0, 1.0])     # rebound
        np.testing.assert_allclose(g(w), [-1.0, 0.0, 1.0])
        assert g.cache_info().traces == 1
        W_GLOBAL = np.array([4.0])                # a size-1 axis: broadcasts, traces again
        np.testing.assert_allclose(g(w), [4.0, 4.0, 4.0])
        W_GLOBAL = np.array([1.0, 2.0, 3.0], np.float32)    # another dtype: traces again
        np.testing.assert_allclose(g(w), [1.0, 2.0, 3.0])
        assert g.cache_info().traces == 3
    finally:
        W_GLOBAL = np.array([1.0, 2.0, 3.0])


def helper_with_literal(w):
    return w * 3.0                 # the same float object as THREE (CPython shares it)


def literal_loss(w):
    return jt.sum(w * 3.0) + jt.sum(helper_with_literal(w)) + jt.sum(w * THREE)


def test_a_literal_equal_to_a_captured_float_stays_a_literal():
    global THREE
    g = jt.grad(literal_loss)
    w = np.ones(2)
    try:
        np.testing.assert_allclose(g(w), [9.0, 9.0])
        THREE = 1.0
        np.testing.assert_allclose(g(w), [7.0, 7.0])
        np.testing.assert_allclose(g(w), eager_grad(literal_loss, w))
    finally:
        THREE = 3.0


def test_closure_float_in_a_lambda_is_read_at_each_call():
    rate = 0.5

    def loss(w):
        return jt.sum(jt.stack([(lambda v: v * rate)(w), w]))

    g = jt.grad(loss)
    w = np.zeros(2)
    np.testing.assert_allclose(g(w), [1.5, 1.5])
    rate = 2.0
    np.testing.assert_allclose(g(w), [3.0, 3.0])


def test_np_random_in_a_trace_warns_with_the_users_line():
    def loss(w):
        noise = np.random.rand(3)
        return jt.sum(w * noise)

    g = jt.grad(loss)
    with pytest.warns(UserWarning, match=r"np\.random.*jt\.random") as record:
        g(np.ones(3))
    messages = [w for w in record if "np.random" in str(w.message)]
    assert len(messages) == 1
    assert os.path.basename(messages[0].filename) == THIS_FILE
    assert messages[0].lineno == loss.__code__.co_firstlineno + 2
    with warnings.catch_warnings():               # once per line
        warnings.simplefilter("error", UserWarning)
        jt.grad(loss)(np.ones(3))


def test_stdlib_random_in_a_trace_warns_at_the_calling_line():
    def loss(w):
        return jt.sum(w * random.random())

    with pytest.warns(UserWarning, match="np.random or random.*jt.random") as record:
        jt.grad(loss)(np.ones(2)); line = sys._getframe().f_lineno  # noqa: E702
    assert (os.path.basename(record[0].filename), record[0].lineno) == (THIS_FILE, line)


def test_no_warning_without_global_random():
    def loss(w):
        return jt.sum(w * jt.random.uniform((3,), dtype=np.float64))

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        jt.grad(loss)(np.ones(3))


def test_jt_random_in_function_draws_anew_at_each_call_as_eagerly():
    def noisy(x):
        return x + jt.random.normal((4,), dtype=np.float64)

    jt.random.set_seed(7)
    eager = [noisy(np.zeros(4)).numpy() for _ in range(3)]
    f = jt.function(noisy)
    jt.random.set_seed(7)
    first = [f(np.zeros(4)) for _ in range(3)]
    jt.random.set_seed(7)
    again = [f(np.zeros(4)) for _ in range(3)]
    assert not np.array_equal(first[0], first[1])
    assert not np.array_equal(first[1], first[2])
    for a, b, c in zip(eager, first, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(b, c)
    assert f.cache_info().compiles == 1


def test_jt_random_in_grad_advances():
    def loss(w):
        return jt.sum(w * jt.random.uniform((3,), dtype=np.float64))

    g = jt.grad(loss)
    jt.random.set_seed(1)
    a, b = g(np.ones(3)), g(np.ones(3))
    assert not np.array_equal(a, b)
    jt.random.set_seed(1)
    np.testing.assert_array_equal(g(np.ones(3)), a)
    np.testing.assert_array_equal(g(np.ones(3)), b)


class Model:
    def __init__(self):
        self.w = np.array([1.0, 2.0])


def test_lower_says_what_is_read_guarded_and_frozen():
    model = Model()

    def loss(w):
        return jt.sum(w * W_GLOBAL[:2] * model.w) * SCALE + POWER

    text = jt.grad(loss).lower(np.ones(2)).graph
    line = [ln for ln in text.splitlines() if "captured values" in ln][0]
    assert "read at each call: SCALE (global): float input" in line
    assert "POWER (global) == 2" in line
    assert "W_GLOBAL (global) is the ndarray it was traced with" in line
    assert "frozen when traced: attributes" in line
    assert "model" not in line


def test_attribute_stays_frozen_as_documented():
    model = Model()

    def loss(w):
        return jt.sum(w * model.w)

    g = jt.grad(loss)
    np.testing.assert_allclose(g(np.ones(2)), [1.0, 2.0])
    model.w = np.array([5.0, 5.0])
    np.testing.assert_allclose(g(np.ones(2)), [1.0, 2.0])


VERBOSE = 0


def logged_loss(w):
    if VERBOSE > 5:
        print("tracing")
    return jt.sum(w * w)


def test_a_guard_that_does_not_change_the_graph_compiles_nothing():
    global VERBOSE
    g = jt.grad(logged_loss)
    w = np.ones(2)
    try:
        g(w)
        VERBOSE = 1                     # traced again: the same graph, no compile
        np.testing.assert_allclose(g(w), [2.0, 2.0])
        assert g.cache_info().traces == 2 and g.cache_info().compiles == 1
        for VERBOSE in (0, 1, 0):       # both values are known now: no trace
            np.testing.assert_allclose(g(w), [2.0, 2.0])
        assert g.cache_info().traces == 2
    finally:
        VERBOSE = 0


def test_function_with_captured_variable_array_and_numpy_scalars():
    v = jt.Variable(np.zeros(2))
    shift = np.array([1.0, 2.0])
    step = np.float32(0.5)
    offset = np.array(10.0)                      # 0-d

    @jt.function
    def update(x):
        v.assign_add(x * step + shift)
        return jt.sum(v) + offset

    np.testing.assert_allclose(update(np.ones(2)), 14.0)          # v = [1.5, 2.5]
    shift = np.array([0.0, -1.0])
    step = np.float32(2.0)
    offset = np.array(0.0)
    np.testing.assert_allclose(update(np.ones(2)), 7.0)           # v = [3.5, 3.5]
    np.testing.assert_allclose(v.numpy(), [3.5, 3.5])
    assert update.cache_info().traces == 1


def test_cuda_target_reads_captured_values_and_draws_anew():
    # (Numba's CUDA simulator unless NUMBA_ENABLE_CUDASIM=0: see tests/test_cuda.py)
    global SCALE
    g = jt.grad(scaled_loss, target="cuda")
    w = np.array([1.0, 2.0])
    try:
        np.testing.assert_allclose(np.asarray(g(w)), 4.0 * w)
        SCALE = 0.5
        np.testing.assert_allclose(np.asarray(g(w)), 1.0 * w)
        assert g.cache_info().compiles <= 1       # (traced again for the value, same graph)
    finally:
        SCALE = 2.0

    def noisy(x):
        return x + jt.random.uniform((3,), dtype=np.float64)

    f = jt.function(noisy, target="cuda")
    jt.random.set_seed(5)
    compiled = [np.asarray(f(np.zeros(3))) for _ in range(2)]
    jt.random.set_seed(5)
    eager = [noisy(np.zeros(3)).numpy() for _ in range(2)]
    np.testing.assert_array_equal(compiled, eager)
    assert not np.array_equal(compiled[0], compiled[1])


def test_captured_index_array_rebound_is_seen():
    index = np.array([0, 2])

    def loss(w):
        return jt.sum(w[index] ** 2)

    g = jt.grad(loss)
    w = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(g(w), [2.0, 0.0, 6.0])
    index = np.array([1, 1])
    np.testing.assert_allclose(g(w), [0.0, 8.0, 0.0])
    index[0] = 0                                    # in place
    np.testing.assert_allclose(g(w), [2.0, 4.0, 0.0])
    assert g.cache_info().compiles == 1


def _first_rows(x, i):
    return x[i]


def test_a_helper_function_rebound_is_seen():
    # the wrapper's code is the same, the function its name holds is not: what that
    # function computed is in the graph, so another function traces again
    global _first_rows
    x, i = np.random.rand(2, 3, 3), np.array([0, 1])
    f = jt.function(lambda x, i: _first_rows(x, i) * 1.0)
    saved = _first_rows
    try:
        assert f(x, i).shape == (2, 3, 3)
        _first_rows = lambda x, i: x[i, 1:]                               # noqa: E731
        np.testing.assert_array_equal(f(x, i), x[i, 1:])
    finally:
        _first_rows = saved
    shapes = []
    for helper in (lambda x, i: x[i], lambda x, i: x[i, 1:]):            # a closure cell
        shapes.append(jt.function(lambda x, i: helper(x, i) * 1.0)(x, i).shape)
    assert shapes == [(2, 3, 3), (2, 2, 3)]


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_lower_python_takes_the_arguments_and_reads_captured_values_at_each_call(target):
    rate = 0.5
    weights = np.array([1.0, 2.0, 3.0])

    def loss(w):
        return jt.sum(jt.sin(w * weights) * rate)

    g = jt.grad(loss, target=target)
    w = np.array([0.1, 0.2, 0.3])
    python = g.lower(w).python
    np.testing.assert_allclose(np.asarray(python(w)[0]), rate * weights * np.cos(w * weights))
    np.testing.assert_allclose(np.asarray(python(w)[0]), np.asarray(g(w)))
    rate = 2.0
    weights[:] = [-1.0, 0.5, 4.0]
    np.testing.assert_allclose(np.asarray(python(w)[0]), rate * weights * np.cos(w * weights))
    np.testing.assert_allclose(np.asarray(python(w)[0]), np.asarray(g(w)))
    weights = np.array([3.0, 3.0, 3.0])          # rebound
    np.testing.assert_allclose(np.asarray(python(w)[0]), np.asarray(g(w)))
    assert g.cache_info().traces == 2              # the new rate traced again: the same graph


def test_lower_python_reads_variables_and_draws_anew():
    v = jt.Variable(np.array([1.0, -1.0, 2.0]))

    def noisy(x):
        return x * v + jt.random.uniform((3,), dtype=np.float64)

    x = np.array([0.5, 1.0, 2.0])
    jt.random.set_seed(5)
    eager = [noisy(x).numpy() for _ in range(2)]
    f = jt.function(noisy)
    jt.random.set_seed(5)
    python = f.lower(x).python                       # (the trace makes the first draw)
    np.testing.assert_array_equal([python(x)[0] for _ in range(2)], eager)
    v.assign(np.zeros(3))
    assert np.all(python(x)[0] < 1.0)                # uniform draws and v read anew


def test_kernel_takes_the_captured_values_after_the_arguments_as_lower_names_them():
    import numba

    rate = 0.5
    weights = np.array([1.0, 2.0, 3.0])

    def loss(w):
        return jt.sum(jt.sin(w * weights) * rate)

    g = jt.grad(loss)
    w = np.array([0.1, 0.2, 0.3])
    line = [ln for ln in g.lower(w).graph.splitlines() if ln.startswith("# kernel inputs")][0]
    assert line.index("weights (closure)") < line.index("rate (closure)")
    kernel = g.kernel(w)

    @numba.njit
    def call(w, weights, rate):
        return kernel(w, weights, rate)[0]

    np.testing.assert_allclose(call(w, weights, rate), g(w))
    np.testing.assert_allclose(call(w, weights, 2.0), 4 * g(w))


HALF = 2.0
LIMIT = 2.0


def test_a_captured_float_also_used_in_python_is_never_stale():
    # the float is an operand (a kernel input) and feeds Python code the trace cannot
    # see: a new value traces again, so both uses take it
    global HALF, LIMIT
    g = jt.grad(lambda x: jt.sum(x * HALF) * (HALF / 2))
    h = jt.grad(lambda x: jt.sum(x * LIMIT) * (10.0 if LIMIT > 3 else 1.0))
    x = np.ones(2)
    try:
        np.testing.assert_allclose(g(x), [2.0, 2.0])
        np.testing.assert_allclose(h(x), [2.0, 2.0])
        HALF, LIMIT = 4.0, 5.0
        np.testing.assert_allclose(g(x), [8.0, 8.0])
        np.testing.assert_allclose(h(x), [50.0, 50.0])
    finally:
        HALF, LIMIT = 2.0, 2.0


RESULT_TAG = 1
STEP_VARIABLE = jt.Variable([1.0, 1.0])


def test_a_variant_traced_again_keeps_its_own_results_and_variables():
    # the same graph traced for another captured value: the new trace's Python results
    # and captured variables are the ones used, not those of the first trace
    global RESULT_TAG, STEP_VARIABLE
    f = jt.function(lambda x: (x * 2.0, RESULT_TAG))
    step = jt.function(lambda x: jt.sum(STEP_VARIABLE * x))
    x = np.ones(2)
    saved = STEP_VARIABLE
    try:
        assert f(x)[1] == 1
        RESULT_TAG = 7
        assert f(x)[1] == 7
        np.testing.assert_allclose(step(np.full(2, 4.0)), 8.0)
        STEP_VARIABLE = jt.Variable([10.0, 10.0])
        np.testing.assert_allclose(step(np.full(2, 1.1)), 22.0)
    finally:
        RESULT_TAG, STEP_VARIABLE = 1, saved


def _apply_activation(a):
    return ACTIVATION(a)


def test_a_rebound_ufunc_op_or_builtin_traces_again():
    # a NumPy ufunc, a jittape op or a builtin read from a global or closure: rebinding
    # the name gave the first one's results (silently: only Python functions were guarded)
    global ACTIVATION
    x = np.array([1.0, 2.0])
    f = jt.function(_apply_activation)
    for activation in (np.sin, np.cos, jt.tanh, jt.exp):
        ACTIVATION = activation
        np.testing.assert_allclose(f(x), np.asarray(activation(x)))
    results = [jt.function(lambda a: op(a))(x) for op in (jt.sin, jt.cos)]
    np.testing.assert_allclose(results[1], np.cos(x))


ACTIVATION = np.sin
