"""Every message a user's mistake gets: its first line names the op (or the API called),
the sizes or values that disagree, and the user's file:line; and NumPy's floating-point
warnings name the user's line, not jittape's. One row per message."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import jittape as jt
from jittape import numpy as jnp

A, B = np.ones((2, 3)), np.ones((4, 5))
x = jt.Variable(np.ones(3))


def _used_twice():
    tape = jt.GradientTape()
    with tape:
        y = x * 2.0
    tape.gradient(y, x)
    return tape.gradient(y, x)


def _entered_twice():
    tape = jt.GradientTape()
    with tape:
        with tape:
            pass


# (name, call, error type, words the first line must hold). Each call is written on its
# own line, which the message must name.
CASES = [
    ("matmul", lambda: jnp.matmul(jt.constant(A), jt.constant(B)),
     jt.ShapeError, ["matmul", "(2, 3)", "(4, 5)", "3", "4"]),
    ("broadcast", lambda: jt.constant(np.ones(3)) + jt.constant(np.ones(4)),
     jt.ShapeError, ["add", "(3,)", "(4,)", "3 vs 4"]),
    ("reshape", lambda: jnp.reshape(jt.constant(np.ones(6)), (4, 2)),
     jt.ShapeError, ["reshape", "(6,)", "(4, 2)"]),
    ("axis", lambda: jnp.sum(jt.constant(np.ones(3)), axis=2),
     jt.ShapeError, ["sum", "axis 2", "rank 1"]),
    ("index", lambda: jt.constant(np.ones(3))[5],
     IndexError, ["getitem", "index 5", "size 3"]),
    ("concatenate", lambda: jnp.concatenate([jt.constant(A), jt.constant(np.ones((2, 4)))]),
     jt.ShapeError, ["concatenate", "(2, 3)", "(2, 4)"]),
    ("where", lambda: jnp.where(jt.constant(np.ones(3)) > 0, jt.constant(np.ones(4)), 0.0),
     jt.ShapeError, ["where", "(3,)", "(4,)"]),
    ("transpose", lambda: jnp.transpose(jt.constant(A), (0, 0)),
     jt.ShapeError, ["transpose", "(0, 0)", "(2, 3)"]),
    ("broadcast_to", lambda: jnp.broadcast_to(jt.constant(np.ones(3)), (4,)),
     jt.ShapeError, ["broadcast_to", "(3,)", "(4,)"]),
    ("len", lambda: len(jt.constant(1.0)), TypeError, ["len()", "0-d"]),
    ("iter", lambda: iter(jt.constant(1.0)), TypeError, ["iteration", "0-d"]),
    ("float index", lambda: [1, 2][jt.constant(1.0)], TypeError, ["index", "float32"]),
    ("tape entered twice", _entered_twice, ValueError, ["already recording"]),
    ("stop_recording", lambda: jt.GradientTape().stop_recording().__enter__(),
     ValueError, ["stop_recording()", "recording"]),
    ("watch", lambda: jt.GradientTape().watch(np.ones(2)),
     TypeError, ["GradientTape.watch", "ndarray"]),
    ("unconnected", lambda: jt.GradientTape().gradient(x, x, unconnected_gradients="bad"),
     ValueError, ["unconnected_gradients", "'bad'"]),
    ("not a function", lambda: jt.grad(3), TypeError, ["grad", "int"]),
    ("target", lambda: jt.function(lambda a: a, target="tpu"), ValueError, ["target='tpu'"]),
    ("argnums twice", lambda: jt.grad(lambda a: a, argnums=(0, 0)),
     ValueError, ["grad", "argnums=(0, 0)"]),
    ("argnums type", lambda: jt.grad(lambda a: a, argnums="a"), TypeError, ["argnums", "'a'"]),
    ("non-scalar loss", lambda: jt.grad(lambda a: a * 2.0)(np.ones(3)),
     TypeError, ["grad(<lambda>)", "scalar", "(3,)"]),
    ("integer argument", lambda: jt.grad(lambda a: a * 2)(np.ones(3, dtype=np.int64)),
     TypeError, ["grad(<lambda>)", "int64", "argnums=0"]),
    ("compiled matmul", lambda: jt.grad(lambda a, b: (a @ b).sum())(A, B),
     jt.ShapeError, ["matmul", "(2, 3)", "(4, 5)"]),
    ("compiled index", lambda: jt.function(lambda a, i: a[i])(np.ones(3), 7),
     IndexError, ["getitem", "index 7", "size 3"]),
    ("scan carry", lambda: jt.scan(lambda c, v: (np.ones(2), v), 0.0, np.ones(3)),
     TypeError, ["scan", "carry", "float64[2]"]),
    ("tree.unflatten", lambda: jt.tree.unflatten(jt.tree.flatten([1, 2])[1], [1]),
     ValueError, ["jt.tree.unflatten", "2 leaves", "got 1"]),
    ("tree.map", lambda: jt.tree.map(lambda a, b: a, [1, 2], [1]),
     ValueError, ["jt.tree.map", "list of 2", "list of 1"]),
    ("tree.register", lambda: jt.tree.register(3, None, None),
     TypeError, ["jt.tree.register", "int"]),
    ("Dense", lambda: jt.nn.Dense(3, activation="nope"), ValueError, ["Dense", "'nope'"]),
]


def assert_first_line_names(err, call, words, here):
    """The first line of ``err`` holds ``words`` and names the line of ``call`` in the
    test file ``here`` (a lambda's own line; some line of a helper function)."""
    first = str(err).splitlines()[0]
    for word in words:
        assert word in first, (word, first)
    if call.__name__ == "<lambda>":          # the line of the call
        assert f"(at {here}:{call.__code__.co_firstlineno})" in first, first
    else:                                    # a line of the helper
        assert f"(at {here}:" in first, first


@pytest.mark.parametrize("name, call, kind, words", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_names_the_op_the_sizes_and_the_users_line(name, call, kind, words):
    with pytest.raises(kind) as err:
        call()
    assert_first_line_names(err.value, call, words, __file__)


def test_a_used_tape_says_what_tensorflow_says():
    # the one message kept word for word: the tutorials print TensorFlow's
    with pytest.raises(RuntimeError) as err:
        _used_twice()
    assert str(err.value) == ("A non-persistent GradientTape can only be used to compute one "
                              "set of gradients (or jacobians)")


# -- NumPy's floating-point warnings -----------------------------------------------

def test_numpy_warnings_in_a_tape_name_the_users_line_each_line_once():
    v = jt.Variable(np.array([0.0, 1.0]))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        with jt.GradientTape() as tape:
            a = jnp.log(v)                      # line A
            b = np.log(v)                       # line B: a second line warns too
            for _ in range(3):
                c = jnp.log(v)                  # line C: once, however often it runs
            total = a + b + c
        tape.gradient(total, v)                 # 1/0 in log's gradient
    here = [(w.filename, w.lineno, str(w.message)) for w in seen
            if issubclass(w.category, RuntimeWarning)]
    assert all(f == __file__ for f, _, _ in here), here
    texts = {_source(n).strip().split("#")[0].strip(): m for _, n, m in here}
    assert texts["a = jnp.log(v)"] == "divide by zero encountered in log"
    assert texts["b = np.log(v)"] == "divide by zero encountered in log"
    assert texts["c = jnp.log(v)"] == "divide by zero encountered in log"
    assert "divide by zero" in texts["tape.gradient(total, v)"], texts
    assert len(here) == len(texts)               # one warning per line


@pytest.mark.parametrize("op, arg", [("log", 0.0), ("sqrt", -1.0), ("log1p", -2.0), ("exp", 1e4)])
def test_numpy_warnings_outside_a_tape_name_the_users_line(op, arg):
    # the ops that warn on ordinary finite operands report at the user's line without a
    # tape too; the user's settings around them stay (ignore, raise)
    x = jt.constant(np.array([arg, 1.0]))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        getattr(jnp, op)(x)
        1.0 / jt.constant(np.array([0.0]))
        x ** -1.5 if op == "sqrt" else None
    here = [w for w in seen if issubclass(w.category, RuntimeWarning)]
    assert here and all(w.filename == __file__ for w in here), [(w.filename, w.message) for w in here]
    assert any(str(w.message).endswith(f"in {op}") for w in here), [str(w.message) for w in here]
    assert any(str(w.message) == "divide by zero encountered in divide" for w in here)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        getattr(jnp, op)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            getattr(jnp, op)(x)
    assert np.geterr()["divide"] == "warn" and np.geterrcall() is None


def test_compiled_code_gives_inf_without_warning():
    # as JAX's: compiled code (on either tier) gives NumPy's inf/nan and does not warn
    g = jt.grad(lambda a: np.sum(np.log(a)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(2):
            assert np.array_equal(g(np.array([0.0, 1.0])), [np.inf, 1.0])


def _source(line):
    with open(__file__) as f:
        return f.read().splitlines()[line - 1]


def test_the_users_numpy_settings_are_kept():
    v = jt.Variable(np.array([0.0, 1.0]))
    with np.errstate(divide="raise"):
        with jt.GradientTape():
            with pytest.raises(FloatingPointError):
                jnp.log(v)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            with jt.GradientTape():
                jnp.log(v)
    calls = []
    with np.errstate(divide="call", call=lambda kind, flag: calls.append(kind)):
        with jt.GradientTape():
            jnp.log(v)
    assert calls == ["divide by zero"]
    assert np.geterr()["divide"] == "warn" and np.geterrcall() is None
    # a setting made inside the block stays (the block's own reporting is undone)
    with jt.GradientTape():
        np.seterr(divide="ignore")
    try:
        assert np.geterr() == {"divide": "ignore", "over": "warn", "under": "ignore",
                               "invalid": "warn"} and np.geterrcall() is None
    finally:
        np.seterr(divide="warn")
    # blocks exited out of order leave NumPy's settings as the user's
    outer = np.errstate(divide="ignore")
    outer.__enter__()
    tape = jt.GradientTape()
    tape.__enter__()
    outer.__exit__(None, None, None)
    tape.__exit__(None, None, None)
    assert np.geterr()["divide"] == "warn" and np.geterrcall() is None


def test_the_users_own_numpy_call_in_a_tape_is_named():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with jt.GradientTape():
            np.log(np.array([0.0]))
    (w,) = [w for w in seen if issubclass(w.category, RuntimeWarning)]
    assert w.filename == __file__
    assert str(w.message) == "divide by zero encountered in `np.log(np.array([0.0]))`"


def test_a_warning_at_the_users_line_from_python_dash_c():
    # warnings of a `python -c` program: no source file to read, and no crash
    code = ("import numpy as np, jittape as jt\n"
            "x = jt.Variable(np.array([0.0, 1.0]))\n"
            "with jt.GradientTape() as t:\n"
            "    y = np.asarray(x * 2.0)\n"
            "    z = jt.numpy.log(x)\n")
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "<string>:4: GradientLostWarning" in run.stderr, run.stderr
    assert "<string>:5: RuntimeWarning: divide by zero encountered in log" in run.stderr
