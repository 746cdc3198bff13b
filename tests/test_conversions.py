"""Implicit conversions to NumPy of tensors a recording tape follows lose their gradient:
they warn (once per call site, at the user's line, naming the call and its jittape
spelling), or raise with ``jt.config.strict``. Explicit conversions and tensors no tape
follows stay silent."""

import threading
import warnings

import numpy as np
import pytest
import scipy.special

import jittape as jt
from jittape.trace import TracerError


@pytest.fixture
def strict():
    jt.config.strict = True
    try:
        yield
    finally:
        jt.config.strict = False


def _lost(record):
    return [w for w in record if issubclass(w.category, jt.GradientLostWarning)]


def _line_of(text):
    """The line number of ``text`` in this file (for the warning's location)."""
    with open(__file__) as f:
        for k, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return k
    raise AssertionError(text)


def test_ndarray_dot_of_a_variable_warns_at_the_users_line():
    X = np.arange(6.0).reshape(3, 2)
    w = jt.Variable(np.array([0.5, -1.0]))
    with pytest.warns(jt.GradientLostWarning) as record:
        with jt.GradientTape() as tape:
            loss = jt.sum(X.dot(w) ** 2) + jt.sum(w * w)   # the lost term
        tape.gradient(loss, w)
    (warning,) = _lost(record)
    text = str(warning.message)
    assert "`X.dot(w)`" in text and "jt.dot(X, w) or X @ w" in text
    assert "variable 'Variable:0'" in text and ".numpy()" in text
    assert warning.filename == __file__
    assert warning.lineno == _line_of("loss = jt.sum(X.dot(w) ** 2)")
    assert f"{__file__}:{warning.lineno}" in text


def test_the_suggested_product_gives_the_whole_gradient():
    X = np.arange(6.0).reshape(3, 2)
    w = jt.Variable(np.array([0.5, -1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", jt.GradientLostWarning)
        with jt.GradientTape() as tape:
            loss = jt.sum((X @ w) ** 2) + jt.sum(w * w)
        g = tape.gradient(loss, w)
    v = w.numpy()
    np.testing.assert_allclose(g.numpy(), 2 * X.T @ (X @ v) + 2 * v)


def test_asarray_of_a_watched_tensor_warns():
    x = jt.constant(np.array([1.0, 2.0]))
    with pytest.warns(jt.GradientLostWarning, match=r"`np\.asarray\(x\)`.*Keep the tensor"):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.sum(jt.constant(np.asarray(x)) * x)
    assert tape.gradient(y, x) is not None


def test_a_value_computed_from_a_watched_one_warns():
    x = jt.constant(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        tape.watch(x)
        h = jt.tanh(x) * 3.0
        with pytest.warns(jt.GradientLostWarning, match=r"`np\.asarray\(h\)`"):
            np.exp(np.asarray(h))


def test_np_array_of_tensors_suggests_stack():
    x = jt.constant(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        tape.watch(x)
        stacked = r"`np\.array\(\[x\[0\], x\[1\]\]\)`.*jt\.stack\(\[x\[0\], x\[1\]\]\)"
        with pytest.warns(jt.GradientLostWarning, match=stacked):
            np.array([x[0], x[1]])
        y = jt.sum(jt.stack([x[0], x[1]]) ** 2)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * x.numpy())


def test_constant_of_a_list_of_watched_tensors_warns():
    x = jt.constant(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        tape.watch(x)
        with pytest.warns(jt.GradientLostWarning, match=r"`jt\.constant\(\[x\[0\], x\[1\]\]\)`"):
            jt.constant([x[0], x[1]])


def test_scipy_function_is_named_with_the_jittape_op():
    x = jt.constant(np.array([1.0, 2.0, 3.0]))
    with pytest.warns(jt.GradientLostWarning) as record:
        with jt.GradientTape() as tape:
            tape.watch(x)
            scipy.special.logsumexp(x)
    (warning,) = _lost(record)
    text = str(warning.message)
    assert "`scipy.special.logsumexp(x)`" in text and "in scipy.special" in text
    assert "jt.logsumexp" in text
    assert warning.filename == __file__          # not SciPy's file
    assert warning.lineno == _line_of("scipy.special.logsumexp(x)\n")


def test_np_vectorize_warns_once():
    x = jt.constant(np.array([1.0, 2.0]))
    with pytest.warns(jt.GradientLostWarning) as record:
        with jt.GradientTape() as tape:
            tape.watch(x)
            np.vectorize(lambda a: a * 2)(x)
    (warning,) = _lost(record)
    assert "np.vectorize" in str(warning.message) and warning.filename == __file__


def test_once_per_call_site():
    x = jt.constant(np.array([1.0, 2.0]))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        for _ in range(3):
            with jt.GradientTape() as tape:
                tape.watch(x)
                np.asarray(x)                    # one site
                np.asarray(x * 2.0)              # another
    assert len(_lost(record)) == 2


def test_strict_raises_naming_the_call(strict):
    X = np.arange(6.0).reshape(3, 2)
    w = jt.Variable(np.array([0.5, -1.0]))
    with jt.GradientTape():
        with pytest.raises(jt.GradientLostError, match=r"`X\.dot\(w\)`.*jt\.dot\(X, w\)") as err:
            X.dot(w)
    assert isinstance(err.value, jt.JittapeError)
    assert f"{__file__}:{_line_of('            X.dot(w)')}" in str(err.value)
    x = jt.constant(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        tape.watch(x)
        with pytest.raises(jt.GradientLostError, match="jt.stack"):
            np.array([x[0], x[1]])


def test_explicit_conversions_stay_silent():
    x = jt.constant(np.array([1.5]))
    v = jt.Variable(np.array([2.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", jt.GradientLostWarning)
        with jt.GradientTape() as tape:
            tape.watch(x)
            assert x.numpy()[0] == 1.5 and v.numpy()[0] == 2.5
            assert float(x) == 1.5 and int(v) == 2
            y = x * 2.0
            assert float(y) == 3.0
            assert bool(y > 0)


def test_tensors_no_tape_follows_stay_silent(strict):
    x = jt.constant(np.array([1.0, 2.0]))
    other = jt.constant(np.array([3.0, 4.0]))
    steps = jt.constant(np.array([1, 2]))
    fixed = jt.Variable(np.array([1.0]), trainable=False)
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])        # no tape
    with jt.GradientTape() as tape:
        tape.watch(x)
        np.asarray(other)                 # not watched
        np.asarray(steps * 2)             # an integer value carries no gradient
        np.asarray(fixed)                 # not trainable
        with tape.stop_recording():
            np.asarray(x)
    with jt.GradientTape(watch_accessed_variables=False):
        np.asarray(jt.Variable(np.array([1.0])))    # a tape that watches only what it is told


def test_a_tape_of_another_thread_does_not_count(strict):
    x = jt.constant(np.array([1.0, 2.0]))
    opened, done = threading.Event(), threading.Event()

    def record():
        with jt.GradientTape() as tape:
            tape.watch(x)
            opened.set()
            done.wait(10)

    thread = threading.Thread(target=record)
    thread.start()
    try:
        assert opened.wait(10)
        np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])
    finally:
        done.set()
        thread.join()


def test_compiled_functions_still_refuse_conversion():
    f = jt.function(lambda x: jt.sum(x * np.asarray(x)))
    with pytest.raises(TracerError, match="converting to a NumPy array"):
        f(np.ones(2))
