"""jt.function: tapes, gradients and Variable updates inside compiled code; Python
control flow on traced values; check_numerics; the errors of compiled functions."""

import os
import re
import threading

import numpy as np
import pytest

import jittape as jt
import jittape.numpy as jnp

THIS_FILE = os.path.basename(__file__)

pytestmark = [pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning"),
              pytest.mark.usefixtures("cache_dir")]


@pytest.fixture
def numerics():
    jt.config.check_numerics = True
    yield
    jt.config.check_numerics = False


# -- a whole training step -------------------------------------------------------------

def make_data(n=64, d=4, h=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = np.tanh(x @ rng.normal(size=(d, 1)).astype(np.float32)) + 0.1
    params = [rng.normal(size=(d, h)).astype(np.float32) * 0.5, np.zeros(h, np.float32),
              rng.normal(size=(h, 1)).astype(np.float32) * 0.5, np.zeros(1, np.float32)]
    return x, y.astype(np.float32), params


def mlp_loss(variables, x, y):
    w1, b1, w2, b2 = variables
    hidden = jt.tanh(x @ w1 + b1)
    return jt.reduce_mean((hidden @ w2 + b2 - y) ** 2)


def sgd_step(variables, x, y, lr):
    with jt.GradientTape() as tape:
        loss = mlp_loss(variables, x, y)
    grads = tape.gradient(loss, variables)
    for v, g in zip(variables, grads):
        v.assign_sub(lr * g)
    return loss


def test_training_step_converges_to_the_eager_loops_parameters():
    x, y, init = make_data()
    eager_vars = [jt.Variable(p) for p in init]
    compiled_vars = [jt.Variable(p) for p in init]

    @jt.function
    def step(x, y):                      # reads the variables from the enclosing scope
        return sgd_step(compiled_vars, x, y, 0.1)

    eager_losses, compiled_losses = [], []
    for _ in range(200):
        eager_losses.append(float(sgd_step(eager_vars, x, y, 0.1)))
        compiled_losses.append(float(step(x, y)))
    assert compiled_losses[-1] < 0.5 * compiled_losses[0]        # it learns
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-4, atol=1e-6)
    for ve, vc in zip(eager_vars, compiled_vars):
        np.testing.assert_allclose(vc.numpy(), ve.numpy(), rtol=1e-4, atol=1e-5)
    info = step.cache_info()
    assert (info.traces, info.compiles, info.hits) == (1, 1, 199)   # one native call a step
    source = step.lower(x, y).source
    assert source.count("def kernel(") == 1


def test_variables_passed_as_arguments_are_written_back_to_the_ones_passed():
    @jt.function
    def update(v, delta):
        v.assign_add(delta)
        return v * 2

    a = jt.Variable(np.zeros(2))
    b = jt.Variable(np.ones(2))
    np.testing.assert_array_equal(update(a, np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(a.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(update(b, np.ones(2)), [4.0, 4.0])
    np.testing.assert_array_equal(b.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(a.numpy(), [1.0, 1.0])
    assert update.cache_info().traces == 1


def test_assign_assign_add_assign_sub_and_reads_in_order():
    v = jt.Variable(np.float32(1.0))
    log = jt.Variable(np.zeros(3, np.float32))

    @jt.function
    def f(x):
        before = v.read_value()
        v.assign(x)                       # a float64 value cast to the variable's float32
        v.assign_add(2.0)
        v.assign_sub(jt.constant(0.5))
        log.assign(jt.stack([before, v, v * 2]))
        return before

    assert f(np.float64(3.0)) == np.float32(1.0)
    assert v.numpy() == np.float32(4.5) and v.dtype == np.float32
    assert isinstance(v.numpy(), np.float32)
    np.testing.assert_array_equal(log.numpy(), [1.0, 4.5, 9.0])
    assert f(np.float64(1.0)) == np.float32(4.5)
    assert v.numpy() == np.float32(2.5)


def test_written_back_values_do_not_share_memory_with_arguments():
    v = jt.Variable(np.zeros(3))

    @jt.function
    def f(x):
        v.assign(x)
        return x

    x = np.arange(3.0)
    out = f(x)
    x[0] = 100.0
    assert v.numpy()[0] == 0.0 and out[0] == 0.0


def test_assigning_a_value_of_another_shape_names_the_variable_and_the_shapes():
    v = jt.Variable(np.zeros(3), name="weights")
    with pytest.raises(ValueError, match=rf"assign.*'weights:0' of shape \(3,\).*{THIS_FILE}:\d+"):
        jt.function(lambda x: v.assign(x))(np.zeros(4))


def test_python_floats_and_numpy_scalars_are_inputs_python_ints_part_of_the_signature():
    w = jt.Variable(np.ones(2, np.float32))

    @jt.function
    def scale(lr):
        w.assign(w * lr)
        return jt.reduce_sum(w)

    scale(2.0)
    scale(2.0)
    scale(3.0)                                 # a Python float: a run-time input
    assert scale.cache_info().traces == 1
    assert w.dtype == np.float32               # (and it never widens a float32 value)
    np.testing.assert_array_equal(w.numpy(), [12.0, 12.0])
    for lr in (0.5, 0.25, 2.0):                # NumPy scalars are run-time inputs
        scale(np.float32(lr))
    assert scale.cache_info().traces == 2
    np.testing.assert_array_equal(w.numpy(), [3.0, 3.0])
    scale(2)                                   # a Python int: part of the signature
    scale(3)
    assert scale.cache_info().traces == 4
    np.testing.assert_array_equal(w.numpy(), [18.0, 18.0])


def test_python_values_in_the_result_are_kept():
    @jt.function
    def f(x):
        return {"y": x * 2, "tag": "double", "n": 3, "none": None}

    out = f(np.ones(2))
    np.testing.assert_array_equal(out["y"], [2.0, 2.0])
    assert out["tag"] == "double" and out["n"] == 3 and out["none"] is None


def test_nested_results_are_rebuilt_by_one_expression_of_the_kernel_s_outputs():
    from jittape.optim import Adam
    opt = Adam(learning_rate=0.1)

    @jt.function
    def step(x, state):               # (params, optimizer state: a dataclass of dicts)
        g = 2 * x
        new_x, new_state = opt.update(x, g, state)
        return new_x, new_state, [jt.reduce_sum(x * x), "loss", None]

    x, state = np.array([1.0, -2.0]), opt.init(np.array([1.0, -2.0]))
    for _ in range(3):
        x, state, (loss, tag, nothing) = step(x, state)
    want_x, want_state = np.array([1.0, -2.0]), opt.init(np.array([1.0, -2.0]))
    for _ in range(3):
        want_x, want_state = opt.update(jt.constant(want_x), jt.constant(2 * want_x), want_state)
        want_x = want_x.numpy()
    np.testing.assert_allclose(x, want_x, rtol=1e-14)
    assert type(state) is type(want_state) and set(state.slots) == set(want_state.slots)
    assert isinstance(loss, np.float64) and (tag, nothing) == ("loss", None)
    assert step.cache_info().traces == 1


def test_nested_tapes_give_a_hessian_in_compiled_code():
    @jt.function
    def hessian(x):
        with jt.GradientTape() as outer:
            outer.watch(x)
            with jt.GradientTape() as inner:
                inner.watch(x)
                y = jt.reduce_sum(x ** 3)
            g = inner.gradient(y, x)
        return g, outer.jacobian(g, x)

    g, h = hessian(np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(g, [3.0, 12.0])
    np.testing.assert_allclose(h, [[6.0, 0.0], [0.0, 12.0]])


def test_hessian_of_a_variable_with_nested_tapes():
    v = jt.Variable(np.array([1.0, 2.0]))

    @jt.function
    def f():
        with jt.GradientTape() as outer:
            with jt.GradientTape() as inner:
                y = jt.reduce_sum(v ** 3)
            g = inner.gradient(y, v)
        return outer.jacobian(g, v)

    np.testing.assert_allclose(f(), [[6.0, 0.0], [0.0, 12.0]])


def test_tape_semantics_inside_compiled_code():
    x0 = jt.Variable(2.0)
    frozen = jt.Variable(3.0, trainable=False)

    @jt.function
    def f(c):
        with jt.GradientTape(persistent=True) as tape:
            y = x0 * x0 * frozen * c
            with tape.stop_recording():
                z = x0 * 5.0
        dx, dfrozen, dc = tape.gradient(y, [x0, frozen, c])
        dz = tape.gradient(z, x0, unconnected_gradients=jt.UnconnectedGradients.ZERO)
        watched = [v.name for v in tape.watched_variables()]
        return dx, dfrozen is None, dc is None, dz, watched[0]

    dx, frozen_none, c_none, dz, name = f(np.float32(2.0))
    assert dx == np.float32(24.0) and frozen_none and c_none and dz == 0.0
    assert name == x0.name


def test_the_gradient_with_respect_to_a_variable_sums_its_reads_as_in_tensorflow():
    v = jt.Variable(3.0)

    def body():
        with jt.GradientTape() as tape:
            v.assign(v * 2.0)             # the assignment is not differentiable
            y = v * 3.0
        return tape.gradient(y, v)

    eager = body()
    v.assign(3.0)
    compiled = jt.function(body)()
    assert float(eager) == float(compiled) == 3.0
    assert v.numpy() == 6.0


def test_batch_jacobian_in_compiled_code():
    def f(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = x ** 2 * jt.reduce_sum(x, axis=1, keepdims=True)
        return tape.batch_jacobian(y, x)

    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    np.testing.assert_allclose(jt.function(f)(x), f(jt.constant(x)).numpy(), rtol=1e-6)


def test_compiled_gradients_compose_inside_a_compiled_function():
    dloss = jt.grad(lambda w, x: jt.reduce_sum((x @ w) ** 2))
    w = jt.Variable(np.ones(3, np.float32))

    @jt.function
    def step(x):
        w.assign_sub(0.01 * dloss(w, x))
        return w

    x = np.eye(3, dtype=np.float32)
    out = step(x)
    np.testing.assert_allclose(out, [0.98, 0.98, 0.98])
    np.testing.assert_allclose(w.numpy(), out)


def test_an_inner_gradient_sees_each_argument_as_its_own_variable():
    # the same traced value passed twice, or passed and also read from the closure:
    # the inner gradient is with respect to the argument alone, as when called eagerly
    pair = lambda x: (lambda g: g[0] + g[1])(jt.grad(lambda y: y[0] * y[1])((x, x)))
    assert pair(10.0) == 20.0
    assert jt.function(pair)(np.float64(10.0)) == 20.0
    # d/dx [d(a * x)/da at a = x] = d/dx x = 1; d/dx [d(a * a * x)/da at a = x] = 4x
    assert jt.grad(lambda x: jt.grad(lambda a: a * x)(x))(3.0) == 1.0
    assert jt.grad(lambda x: jt.grad(lambda a: a * a * x)(x))(3.0) == 12.0
    np.testing.assert_allclose(
        jt.grad(lambda x: jt.sum(jt.grad(lambda a: jt.sum(a * x))(x)))(np.arange(3.0)),
        np.ones(3))


def test_custom_gradient_and_stop_gradient_in_a_training_step():
    @jt.custom_gradient
    def clipped_identity(x):
        return x, lambda dy: jt.clip(dy, -1.0, 1.0)

    w = jt.Variable(np.array([10.0, -10.0, 0.1]))

    @jt.function
    def step():
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(clipped_identity(w) ** 2 + jt.stop_gradient(w))
        w.assign_sub(tape.gradient(loss, w))
        return loss

    step()
    np.testing.assert_allclose(w.numpy(), [9.0, -9.0, -0.1])


# -- control flow on traced values -------------------------------------------------------

def test_seed_control_flow_compiled_with_the_tutorials_numbers():
    x1 = jt.Variable(3.0)
    x2 = jt.Variable(3.0)

    @jt.function
    def gradients(flag):
        with jt.GradientTape(persistent=True) as tape:
            tape.watch(x1)
            tape.watch(x2)
            tape.watch(flag)
            if flag % 2 == 0:
                res = 4 * (x1 ** 2) + 3
            else:
                res = x2 ** 3
        d1, d2 = tape.gradient(res, [x1, x2])
        return d1, d2

    d1, d2 = gradients(np.float32(2.0))
    assert str(jt.constant(d1)) == "jt.Tensor(24.0, shape=(), dtype=float32)" and d2 is None
    d1, d2 = gradients(np.float32(3.0))        # the other branch: a second variant
    assert d1 is None and str(jt.constant(d2)) == "jt.Tensor(27.0, shape=(), dtype=float32)"
    d1, d2 = gradients(np.float32(4.0))        # the first variant again: no new trace
    assert float(d1) == 24.0 and d2 is None
    info = gradients.cache_info()
    assert (info.traces, info.hits) == (2, 1)


def test_a_while_loop_on_a_traced_value_is_unrolled_per_trip_count():
    @jt.function
    def halve(x):
        steps = 0
        while jt.reduce_sum(x) > 1.0:
            x = x / 2
            steps += 1
        return x, steps

    assert halve(np.array([3.0])) == (np.array([0.75]), 2)
    assert halve(np.array([2.5])) == (np.array([0.625]), 2)
    assert halve(np.array([9.0])) == (np.array([0.5625]), 4)
    assert halve.cache_info().traces == 2
    assert "is True" in halve.lower(np.array([3.0])).graph


def test_a_variable_is_written_back_only_by_the_variant_that_ran():
    v = jt.Variable(np.zeros(1))

    @jt.function
    def f(x):
        if jt.reduce_sum(x) > 0:
            v.assign_add(x)
        else:
            v.assign_sub(1.0)
        return v

    f(np.ones(1))
    f(-np.ones(1))          # the first variant runs first: its guard fails, nothing is written
    f(np.ones(1))
    np.testing.assert_array_equal(v.numpy(), [1.0])


def test_too_many_branches_in_one_trace_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(jt.config, "max_guards", 10)

    def countdown(x):
        while x > 0:
            x = x - 1
        return x

    with pytest.raises(jt.JittapeError, match=rf"more than 10 Python branches.*{THIS_FILE}:\d+"):
        jt.function(countdown)(np.float64(100.0))


def test_too_many_variants_of_one_signature_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(jt.config, "max_variants", 3)

    @jt.function
    def countdown(x):
        while x > 0:
            x = x - 1
        return x

    for start in (1.0, 2.0, 3.0):
        countdown(np.float64(start))
    with pytest.raises(jt.JittapeError, match=r"more than 3 variants.*jt.where"):
        countdown(np.float64(4.0))


def test_bool_of_a_traced_array_is_ambiguous_as_in_numpy():
    with pytest.raises(ValueError, match=rf"shape \(3,\) is ambiguous.*{THIS_FILE}:\d+"):
        jt.function(lambda x: x if x > 0 else -x)(np.ones(3))


def test_concurrent_calls_taking_different_branches():
    @jt.function
    def f(x):
        if jt.reduce_sum(x) > 0:
            return x * 2
        return x * 3

    errors = []

    def work(sign):
        try:
            for _ in range(20):
                out = f(np.full(4, sign))
                np.testing.assert_array_equal(out, np.full(4, sign * (2 if sign > 0 else 3)))
        except Exception as err:          # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1.0, -1.0, 1.0, -1.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert f.cache_info().traces == 2


# -- check_numerics ------------------------------------------------------------------------

def log_loss(x):
    y = jt.log(x)
    return jt.reduce_sum(y * x)


LOG_LINE = log_loss.__code__.co_firstlineno + 1


def test_check_numerics_eager_names_the_op_and_line(numerics):
    x = jt.constant([1.0, -1.0])
    with pytest.raises(jt.NumericsError, match=rf"log produced NaN \(at .*{THIS_FILE}:{LOG_LINE}\)"):
        log_loss(x)


def test_check_numerics_eager_backward_names_the_gradient(numerics):
    x = jt.constant([1.0, 0.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(jt.sqrt(x))
    with pytest.raises(jt.NumericsError, match=r"produced inf.*in the gradient of sqrt"):
        tape.gradient(y, x)


def test_check_numerics_compiled_names_the_op_and_line(numerics):
    with pytest.raises(jt.NumericsError, match=rf"log produced NaN or inf \(at .*{THIS_FILE}:{LOG_LINE}\)"):
        jt.grad(log_loss)(np.array([1.0, -1.0]))
    with pytest.raises(jt.NumericsError, match="input 0 .* holds NaN or inf"):
        jt.grad(log_loss)(np.array([1.0, np.nan]))


def test_check_numerics_is_part_of_the_signature():
    g = jt.grad(log_loss)
    x = np.array([1.0, -1.0])
    assert np.isnan(g(x)[1])
    assert np.isnan(g(x)[1])               # the fast path
    jt.config.check_numerics = True
    try:
        with pytest.raises(jt.NumericsError):
            g(x)
    finally:
        jt.config.check_numerics = False
    assert np.isnan(g(x)[1])
    assert "checked for NaN" not in g.lower(x).graph


# -- errors at trace time --------------------------------------------------------------------

def test_a_variable_made_from_a_traced_value_is_a_clear_error():
    with pytest.raises(jt.UnsupportedError, match=rf"create variables outside.*{THIS_FILE}:\d+"):
        jt.function(lambda x: jt.Variable(x * 2))(np.ones(2))


def test_numpy_of_a_variable_in_a_traced_function_is_a_clear_error():
    v = jt.Variable(np.ones(2))
    with pytest.raises(TypeError, match=rf"numpy\(\) of variable 'Variable:0'.*{THIS_FILE}:\d+"):
        jt.function(lambda: v.numpy())()


def test_unsupported_argument_types_name_the_argument_and_type():
    for bad in ({1, 2}, object(), lambda: 0):
        with pytest.raises(jt.UnsupportedError,
                           match=rf"argument 1 holds a value of type {re.escape(type(bad).__name__)}"):
            jt.function(lambda x, o: x)(np.ones(2), bad)


def test_strings_are_part_of_the_signature():
    @jt.function
    def act(x, kind):
        return jt.relu(x) if kind == "relu" else jt.tanh(x)

    np.testing.assert_array_equal(act(np.array([-1.0, 1.0]), "relu"), [0.0, 1.0])
    np.testing.assert_allclose(act(np.array([-1.0, 1.0]), "tanh"), np.tanh([-1.0, 1.0]))
    assert act.cache_info().traces == 2


def test_a_variable_passed_twice_is_a_clear_error():
    v = jt.Variable(np.ones(2))
    with pytest.raises(jt.UnsupportedError, match="'Variable:0' is passed twice"):
        jt.function(lambda a, b: a + b)(v, v)


def test_integer_argument_to_grad_and_non_scalar_output_are_clear_errors():
    with pytest.raises(TypeError, match=rf"argument 0 has dtype int64.*{THIS_FILE}:\d+"):
        jt.grad(lambda x: jt.reduce_sum(x))(np.arange(3))
    with pytest.raises(TypeError, match=r"must return a scalar.*shape \(3,\).*jt.jacobian"):
        jt.grad(lambda x: x * 2)(np.ones(3))


def test_python_int_argument_to_grad_names_the_argument():
    with pytest.raises(TypeError, match=rf"argument 1 is a Python int.*argnums=\(0, 1\).*{THIS_FILE}"):
        jt.grad(lambda x, n: x * n, argnums=(0, 1))(1.0, 3)


def test_argument_dtypes_numba_cannot_compile_are_clear_errors():
    g = jt.function(lambda x: x * 2)
    with pytest.raises(jt.UnsupportedError, match=rf"argument 0 has dtype float16.*float32.*{THIS_FILE}"):
        g(np.ones(2, np.float16))
    with pytest.raises(jt.UnsupportedError, match=r"argument 0 has dtype object"):
        g(np.array([1.0, "a"], dtype=object))
    big_endian = np.arange(3.0).astype(">f8")          # converted to native order
    np.testing.assert_array_equal(g(big_endian), [0.0, 2.0, 4.0])


def test_shape_mismatch_in_a_compiled_function_names_op_shapes_and_line():
    with pytest.raises(jt.ShapeError, match=rf"matmul.*\(2, 3\).*\(2, 3\).*{THIS_FILE}:\d+"):
        jt.function(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((2, 3)))


def test_unsupported_numpy_function_in_a_compiled_function_names_it():
    with pytest.raises(jt.UnsupportedError, match=rf"numpy.unique.*{THIS_FILE}:\d+"):
        jt.function(lambda x: np.unique(x))(np.ones((2, 2)))


def test_tapes_and_traces_belong_to_their_thread():
    started, release = threading.Event(), threading.Event()

    @jt.function
    def slow(x):
        y = x * 2
        started.set()
        release.wait(10)                  # the main thread works while this one traces
        return y

    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("out", slow(np.ones(2))))
    worker.start()
    assert started.wait(10)
    try:
        x = jt.Variable(3.0)
        with jt.GradientTape() as tape:   # eager, in this thread: not part of the trace
            y = x * x
        assert isinstance(y, jt.Tensor) and float(y) == 9.0
        assert float(tape.gradient(y, x)) == 6.0
    finally:
        release.set()
        worker.join()
    np.testing.assert_array_equal(result["out"], [2.0, 2.0])


def test_a_reshape_to_literal_sizes_equal_when_traced_is_kept():
    """reshape(y, (5, -1)) of a y traced as (5, 10) is not a no-op: the 5 is the user's
    literal, y's 5 a size of the input; with 60 elements the result is (5, 12)."""
    c = np.arange(10.0)
    f = jt.function(lambda x: jt.sum(jt.reshape(jt.reshape(x, (-1, 10)) + c, (5, -1))[:, -4:]))
    for n in (50, 60, 100):
        x = np.arange(float(n))
        want = np.sum(np.reshape(np.reshape(x, (-1, 10)) + c, (5, -1))[:, -4:])
        assert float(f(x)) == want


def test_a_broadcast_to_a_literal_shape_is_checked_at_run_time():
    g = jt.function(lambda x: jt.broadcast_to(jt.reshape(x, (-1,)) * 2, (5,)))
    np.testing.assert_array_equal(g(np.ones(5)), np.full(5, 2.0))
    with pytest.raises(ValueError, match="broadcast_to"):
        g(np.ones(6))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stack_of_a_traced_value_and_a_python_number(dtype):
    # the Python number was a literal of the trace, which the join's shape rule and
    # lowering took for an array (AttributeError); it is weak, as eagerly
    f = jt.function(lambda x: jt.stack([x[0], 1.0]))
    got = f(np.full(3, 2.0, dtype))
    assert got.dtype == dtype and got.tolist() == [2.0, 1.0]
    assert jt.stack([jt.constant(np.full(2, 2.0, dtype))[0], 1.0]).dtype == dtype


def test_jnp_array_of_tensors_passes_the_gradient():
    # jnp.array stacks tensors (it lost the gradient); jittape.numpy's own `any` (NumPy's
    # name for reduce_any) once shadowed Python's in the check of its argument
    x = jt.constant(np.array(1.5))
    with jt.GradientTape() as tape:
        tape.watch(x)
        total = jnp.sum(jnp.array([x, x * 2.0, [x + 2.5][0]]))
    assert float(tape.gradient(total, x)) == 4.0
    assert jt.grad(lambda a: jnp.sum(jnp.array([[a[0], 1.0], [a[1] * 3, a[0]]])))(
        np.array([1.0, 2.0])).tolist() == [2.0, 3.0]
