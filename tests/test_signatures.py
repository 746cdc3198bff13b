"""What makes a compiled function trace again: Python floats are run-time inputs, a new
shape retraces rather than failing, wrappers of one function share their compiled code,
and too many compiles warn, naming what changed."""

import collections
import gc
import os
import warnings
import weakref

import numpy as np
import pytest

import jittape as jt
from jittape.errors import RecompileWarning

THIS_FILE = os.path.basename(__file__)

pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")

X32 = np.linspace(0.1, 1.0, 5).astype(np.float32)


# -- Python floats ---------------------------------------------------------------------

def test_a_python_float_is_a_run_time_input_that_never_widens_float32():
    def step(x, lr):
        return x - lr * jt.square(x) / (lr + 1.0) + jt.where(x > lr, lr, x)

    f = jt.function(step)
    for lr in (0.1, 0.2, 0.35, 1e-3, 3.3, 0.1):
        out = f(X32, lr)
        want = step(jt.constant(X32), lr).numpy()
        assert out.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(out, want)      # what the tape computes, exactly
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.disk_hits == 1
    assert "float64[]" in f.lower(X32, 0.5).graph     # one input, whatever its value


def test_arithmetic_on_a_python_float_stays_weak_a_function_of_it_is_float64():
    cases = [lambda x, p: x * (p * 2 + 1) / (p ** 2) - abs(-p),   # Python's arithmetic
             lambda x, p: x * np.exp(-p),                         # float64, as on the tape
             lambda x, p: x * jt.exp(p)]
    for fn in cases:
        f = jt.function(fn)
        for p in (1.5, 0.1):
            out, want = f(X32, p), fn(jt.constant(X32), p).numpy()
            assert out.dtype == want.dtype
            np.testing.assert_array_equal(out, want)
    assert [f.cache_info().traces for f in map(jt.function, cases)] == [1, 1, 1]
    assert jt.function(cases[0])(X32, 1.5).dtype == np.float32


def test_a_learning_rate_schedule_compiles_once():
    def loss(w, x):
        return jt.sum(jt.tanh(x * w) ** 2)

    @jt.function
    def sgd(w, x, lr):
        with jt.GradientTape() as tape:
            tape.watch(w)
            value = loss(w, x)
        return w - lr * tape.gradient(value, w)

    w = X32.copy()
    for lr in (0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625):
        new = sgd(w, X32, lr)
        wt = jt.constant(w)
        with jt.GradientTape() as tape:
            tape.watch(wt)
            value = loss(wt, jt.constant(X32))
        np.testing.assert_allclose(new, w - lr * tape.gradient(value, wt).numpy(), rtol=1e-6)
        assert new.dtype == np.float32
        w = new
    assert sgd.cache_info().traces == 1


def test_the_gradient_of_a_python_float_argument():
    g = jt.grad(lambda x, s: jt.sum(jt.square(x * s)), argnums=(0, 1))
    for s in (0.5, 2.0):
        gx, gs = g(X32, s)
        assert gx.dtype == np.float32 and gs.dtype == np.float32    # the loss's dtype
        np.testing.assert_allclose(gx, 2 * X32 * s * s, rtol=1e-6)
        np.testing.assert_allclose(gs, 2 * s * np.sum(X32.astype(np.float64) ** 2), rtol=1e-6)
    assert g.cache_info().traces == 1
    # on float64 arguments a float is float64 all the way
    np.testing.assert_allclose(jt.grad(lambda s, x: jt.sum(x * s))(0.1, X32.astype(np.float64)),
                               np.sum(X32.astype(np.float64)))


def test_python_floats_in_a_list_and_a_branch_on_one():
    @jt.function
    def f(x, coefs):
        y = coefs[0] * x + coefs[1]
        if coefs[1] > 0:                              # a guard on a run-time input
            return y
        return -y

    for coefs in ([2.0, 1.0], [3.0, 1.5], [2.0, -1.0], [3.0, -2.0]):
        np.testing.assert_array_equal(f(X32, coefs),
                                      f.fn(jt.constant(X32), coefs).numpy())
    assert f.cache_info().traces == 2                 # one per branch


def test_a_python_float_in_a_conversion_names_static_argnums():
    f = jt.function(lambda x, n: x * float(n))
    with pytest.raises(TypeError, match="static_argnums"):
        f(X32, 2.0)
    g = jt.function(lambda x, n: x * float(n), static_argnums=1)
    np.testing.assert_array_equal(g(X32, 2.0), X32 * 2)


# -- a new shape retraces ---------------------------------------------------------------

def fuzzed(x0, x1):
    return jt.dot(x0, jt.logsumexp(x1, -1, keepdims=True))[::2, None, -1]


def test_a_size_computed_from_the_arguments_that_was_1_retraces():
    f = jt.function(fuzzed)
    rng = np.random.default_rng(0)
    for n in (2, 5, 2):
        x0, x1 = rng.normal(size=(n, n, n)), rng.normal(size=(n, n))
        out = f(x0, x1)
        want = fuzzed(jt.constant(x0), jt.constant(x1)).numpy()
        assert out.shape == want.shape
        np.testing.assert_allclose(out, want, rtol=1e-12)
    g = jt.grad(lambda x0, x1: jt.sum(fuzzed(x0, x1)), argnums=(0, 1))
    for n in (2, 3):
        x0, x1 = rng.normal(size=(n, n, n)), rng.normal(size=(n, n))
        t0, t1 = jt.constant(x0), jt.constant(x1)
        with jt.GradientTape() as tape:
            tape.watch([t0, t1])
            value = jt.sum(fuzzed(t0, t1))
        for got, want in zip(g(x0, x1), tape.gradient(value, [t0, t1])):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_arguments_that_do_not_fit_still_raise_naming_the_op():
    f = jt.grad(lambda x, w: jt.sum(x @ w))
    x, w = np.ones((3, 2)), np.ones((2, 4))
    np.testing.assert_allclose(f(x, w), np.full((3, 2), 4.0))
    for _ in range(2):
        with pytest.raises(jt.errors.SizeMismatch, match=rf"^matmul: .*\(3, 2\).*\(3, 4\).*"
                           rf"{THIS_FILE}:\d+"):
            f(x, np.ones((3, 4)))
    np.testing.assert_allclose(f(x, 2 * w), np.full((3, 2), 8.0))
    assert f.cache_info().traces == 1                 # the failed calls kept nothing


# -- wrappers of one function share their compiled code -----------------------------------

def test_a_wrapper_made_again_finds_the_compiled_code():
    def loss(w):
        return jt.sum(w * w)

    for _ in range(5):
        np.testing.assert_array_equal(jt.grad(loss)(X32), 2 * X32)
    assert jt.grad(loss).cache_info().traces == 1
    assert jt.value_and_grad(loss).cache_info().traces == 0    # other options: its own
    for _ in range(3):
        jt.grad(lambda w: jt.sum(w * w * w))(X32)             # a new lambda, the same code
    assert jt.grad(lambda w: jt.sum(w * w * w)).cache_info().traces == 0   # other code


def test_a_dropped_wrapper_is_freed_once_others_have_been_made(monkeypatch):
    from jittape.compiler import sharing
    monkeypatch.setattr(sharing, "_KEEP", 2)
    monkeypatch.setattr(sharing, "_RECENT", collections.OrderedDict())

    def loss(w):
        return jt.sum(w * 3.0)

    g = jt.grad(loss)
    np.testing.assert_array_equal(g(X32), np.full(5, 3.0, np.float32))
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert jt.grad(loss) is ref()                     # still among the recent ones
    assert jt.grad(loss).cache_info().traces == 1
    for k in range(3):                                # others, made later
        jt.grad(lambda w: jt.sum(w), argnums=0, has_aux=bool(k % 2), target="cpu")
        jt.value_and_grad(loss, argnums=k)
    gc.collect()
    assert ref() is None                              # nothing of it is held any more
    assert jt.grad(loss).cache_info().traces == 0


def test_wrappers_of_closures_over_other_values_are_distinct():
    def make(power, scale=1.0):
        def loss(w, s=scale):
            return jt.sum(w ** power) * s
        return loss

    np.testing.assert_allclose(jt.grad(make(2))(X32), 2 * X32, rtol=1e-6)
    np.testing.assert_allclose(jt.grad(make(3))(X32), 3 * X32 ** 2, rtol=1e-6)
    np.testing.assert_allclose(jt.grad(make(2, 2.0))(X32), 4 * X32, rtol=1e-6)


# -- the recompile warning ----------------------------------------------------------------

def _warns_once(monkeypatch, f, calls, match):
    monkeypatch.setattr(jt.config, "recompile_warning", len(calls) - 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in calls:
            f(*args)
        f(*calls[-1])
    found = [w for w in caught if issubclass(w.category, RecompileWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert os.path.basename(found[0].filename) == THIS_FILE
    assert "recompile_warning" in str(found[0].message)
    assert match in str(found[0].message), str(found[0].message)


def test_more_compiles_than_the_limit_warn_once_naming_a_static_value(monkeypatch):
    f = jt.function(lambda x, n: x * n)               # a Python int: part of the signature
    _warns_once(monkeypatch, f, [(X32, 1), (X32, 2), (X32, 3)],
                "argument 1 is a static value: 2 -> 3")


def test_the_recompile_warning_names_a_dtype_a_rank_and_a_size_1_dimension(monkeypatch):
    f = jt.function(lambda x: x * 2)
    _warns_once(monkeypatch, f, [(np.ones(3),), (np.ones((3, 3)),), (np.ones((3, 3), np.float32),)],
                "argument 0 changed dtype: float64 -> float32")
    f = jt.function(lambda x: x * 2)
    _warns_once(monkeypatch, f, [(np.ones(3),), (np.ones(3, np.float32),), (np.ones((3, 3)),)],
                "argument 0 changed dtype: float32 -> float64; argument 0 changed rank: 1 -> 2")
    f = jt.function(lambda x: x * 2)
    _warns_once(monkeypatch, f, [(np.ones(3),), (np.ones((3, 3)),), (np.ones((1, 3)),)],
                "argument 0 has a size-1 dimension where it had none or the reverse (axis 0)")


def test_the_recompile_warning_names_a_guard(monkeypatch):
    @jt.function
    def f(x):
        if jt.sum(x) > 0:
            return x
        return -x

    _warns_once(monkeypatch, f, [(np.ones(3, np.float32),), (np.ones(3),), (-np.ones(3),)],
                "a Python branch on a traced value (a guard)")


def test_no_recompile_warning_below_the_limit_or_when_off(monkeypatch):
    f = jt.function(lambda x, n: x * n)
    monkeypatch.setattr(jt.config, "recompile_warning", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(12):
            f(X32, n)
    assert jt.config.recompile_warning is None
    monkeypatch.undo()
    assert jt.config.recompile_warning == 8


class _Model:
    scale = 2.0

    def loss(self, x):
        return jt.sum(x * x) * self.scale


_CONFIG = {"scale": 2.0}
_HELPER_SCALE = 2.0


def _scaled(x):
    return x * _HELPER_SCALE


def _helper_loss(x):
    return jt.sum(_scaled(x))


def test_a_wrapper_made_anew_sees_what_a_trace_would_have_frozen():
    # attributes, container items and the globals of called functions are frozen by a
    # trace: wrappers of functions that read them are not shared, so a wrapper made
    # anew traces and sees their new values
    global _HELPER_SCALE
    x = np.ones(2)
    m = _Model()
    np.testing.assert_allclose(jt.grad(m.loss)(x), [4.0, 4.0])
    m.scale = 5.0
    np.testing.assert_allclose(jt.grad(m.loss)(x), [10.0, 10.0])
    f = lambda x: jt.sum(x * _CONFIG["scale"])                     # noqa: E731
    np.testing.assert_allclose(jt.grad(f)(x), [2.0, 2.0])
    _CONFIG["scale"] = 5.0
    try:
        np.testing.assert_allclose(jt.grad(f)(x), [5.0, 5.0])
        np.testing.assert_allclose(jt.grad(_helper_loss)(x), [2.0, 2.0])
        _HELPER_SCALE = 5.0
        np.testing.assert_allclose(jt.grad(_helper_loss)(x), [5.0, 5.0])
    finally:
        _CONFIG["scale"], _HELPER_SCALE = 2.0, 2.0


def test_argnums_of_any_sequence_are_keyed_by_value():
    f = lambda a, b: jt.sum(2 * a + 3 * b)                        # noqa: E731
    x = np.ones(2)
    got = [jt.grad(f, argnums=range(k, k + 1))(x, x)[0] for k in (0, 1)]
    np.testing.assert_allclose(got, [[2.0, 2.0], [3.0, 3.0]])
