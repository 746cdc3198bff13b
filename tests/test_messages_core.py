"""Every message of the core modules (the tape, tensors, traces, pytrees, custom rules,
serialization, layers, and the compiled functions' signatures, modes, variants and
captured values): its first line names the op or API, the values or sizes that disagree
and the user's file:line. One row per message, each checked to come from its raise site;
and an AST walk that finds every raise and warning in those modules and asks that each is
a row's or listed, with the reason, as out of a user's reach."""

import ast
import contextlib
import inspect
import json
import os
import traceback
import warnings

import numpy as np
import pytest

import jittape as jt
from jittape import config, serialize
from jittape import numpy as jnp
from jittape.errors import RecompileWarning, SizeMismatch, TracerError

PACKAGE = os.path.dirname(os.path.abspath(jt.__file__))
MODULES = ["tape.py", "tensor.py", "trace.py", "tree.py", "custom.py", "serialize.py", "nn.py",
           "compiler/signature.py", "compiler/modes.py", "compiler/compiled.py",
           "compiler/cache.py", "compiler/capture.py"]

# Raise sites no mistake in a user's program reaches, named as the rows name theirs (the
# ``site`` of CASES), with the reason.
NOT_USER_MESSAGES = {
    "compiler/compiled.py: unknown mode": "the API functions (jt.grad, jt.function, ...) "
    "pass one of the modes; Compiled is not public",
    "compiler/signature.py: is a traced value of a function": "dead: a Tracer is a Tensor, "
    "so _leaf reads its _value (None) and a stale traced argument gets the message 'holds "
    "a value of type Tracer' (row 'traced argument')",
    "serialize.py: serialize: a parameter of type": "the registry's ops hold parameters of "
    "the encoded kinds only (tests/test_serialize.py round-trips the corpus)",
    "serialize.py: is not a registry op": "the passes drop custom-rule nodes before any graph "
    "a user can get (f.lower(...).ir); only a Trace built by hand holds one "
    "(tests/test_serialize.py)",
    "compiler/cache.py (_run): raise SizeMismatch(message or str(err)) from None": "a cached "
    "variant's checks: _lookup and _new_variant catch it and trace for the call's sizes, "
    "and the user sees the trace's ShapeError through _retrace_exact (row 'size mismatch "
    "after a compile'); a variant just traced for the sizes passes its checks",
    "compiler/cache.py (_size_variant): raise SizeMismatch(str(err)) from None": "caught by "
    "_call, which retraces on exact sizes (_retrace_exact, row 'size mismatch after a "
    "compile'); a function keyed on exact sizes traces a new key instead",
    "compiler/cache.py (_call): raise": "re-raises the error it caught, unchanged",
    "compiler/cache.py (_retrace_exact): raise": "re-raises the error it caught, unchanged",
    "compiler/cache.py (_call_python): raise": "re-raises the kernel's checks, unchanged",
    "tensor.py (coerce_operand): raise OperandHoldsTensors(op)": "a signal, not an error: "
    "the op catches it and applies itself to the stack of the list's tensors "
    "(ops.core.pack)",
}

# Reachable, and kept word for word without a location (test below).
KEPT_WORD_FOR_WORD = {
    "tape.py: A non-persistent GradientTape can only be used": "TensorFlow's text, which the "
    "tutorials print",
}


@contextlib.contextmanager
def _config(**settings):
    saved = {k: getattr(config, k) for k in settings}
    for k, v in settings.items():
        setattr(config, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(config, k, v)


class _Stop(Exception):
    pass


class _ComplexArray:
    def __array__(self, dtype=None, copy=None):
        return np.array([1j])


class _DeviceArray:                     # what a CuPy array shows of itself
    __cuda_array_interface__ = {}
    shape, dtype = (2,), np.dtype(np.float64)


x = jt.Variable(np.ones(3))


# -- helpers: mistakes that take more than a line ---------------------------------------

def _tape_reentered_outside_its_trace():
    box = []

    def f(a):
        tape = jt.GradientTape()
        with tape:
            tape.watch(a)
            a * 2.0
        box.append(tape)
        raise _Stop
    with pytest.raises(_Stop):
        jt.function(f)(np.ones(2))
    with box[0]:
        pass


def _entered_twice():
    tape = jt.GradientTape()
    with tape:
        with tape:
            pass


def _output_gradients_count():
    with jt.GradientTape() as tape:
        y, z = x * 2.0, x * 3.0
    tape.gradient([y, z], x, output_gradients=[np.ones(3)])


def _output_gradients_shape():
    with jt.GradientTape() as tape:
        y = x * 2.0
    tape.gradient(y, x, output_gradients=np.ones(4))


def _traced_output_gradients_shape(a):
    with jt.GradientTape() as tape:
        tape.watch(a)
        y = a * 2.0
    return tape.gradient(y, a, output_gradients=np.ones(4))


def _numerics_in_a_gradient():
    v = jt.Variable(np.array([0.0, 1.0]))
    with _config(check_numerics=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # NumPy's own, besides
        with jt.GradientTape() as tape:
            y = jnp.sqrt(v)
        tape.gradient(y, v)


def _jacobian_of_a_list():
    with jt.GradientTape() as tape:
        y = x * 2.0
    tape.jacobian([y], x)


def _two_jacobians(a):
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(a)
        y = a * 2.0
    tape.jacobian(y, a)
    return tape.jacobian(y * 3.0, a)


def _batch_jacobian_of_a_scalar():
    with jt.GradientTape() as tape:
        y = jnp.sum(x)
    tape.batch_jacobian(y, x)


def _batch_jacobian_sizes():
    v = jt.Variable(np.ones((2, 3)))
    with jt.GradientTape() as tape:
        y = jnp.ones((3, 3)) * jnp.sum(v)
    tape.batch_jacobian(y, v)


def _source_not_a_tensor():
    with jt.GradientTape() as tape:
        y = x * 2.0
    tape.gradient(y, [x, np.ones(2)])


def _strict_conversion():
    with _config(strict=True), jt.GradientTape():
        np.asarray(x * 2.0)


def _stale_tracer():
    box = []
    jt.function(lambda a: box.append(a * 2.0) or a)(np.ones(2))
    return box[0]


def _finished_trace():
    stale = _stale_tracer()
    jt.function(lambda a: a + stale)(1.0)


def _guards():
    def f(a):
        while a < 10.0:
            a = a + 1.0
        return a
    with _config(max_guards=3):
        jt.function(f)(0.0)


def _branch_on_a_scan(a):
    c, _ = jt.scan(lambda c, v: (c + v, c), 0.0, a)
    return a if c > 0 else -a


def _registered_twice():
    class Point:
        pass
    jt.tree.register(Point, lambda p: ((), None), lambda aux, children: Point())
    jt.tree.register(Point, lambda p: ((), None), lambda aux, children: Point())


def _flattened(flatten):
    class Point:
        pass
    jt.tree.register(Point, flatten, lambda aux, children: Point())
    jt.tree.flatten([Point()])


def _custom_gradient_count():
    @jt.custom_gradient
    def f(a, b):
        return a * b, lambda g: g * b
    u, v = jt.Variable(np.ones(2)), jt.Variable(np.ones(2))
    with jt.GradientTape() as tape:
        y = f(u, v)
    tape.gradient(y, [u, v])


def _nondiff_argnums():
    f = jt.custom_vjp(lambda a, b: a * b, nondiff_argnums=(3,))
    f.defvjp(lambda a, b: (a * b, (a, b)), lambda res, g: (g,))
    f(np.ones(2), np.ones(2))


def _bwd_count():
    f = jt.custom_vjp(lambda a, b: a * b)
    f.defvjp(lambda a, b: (a * b, (a, b)), lambda res, g: (g,))
    u, v = jt.Variable(np.ones(2)), jt.Variable(np.ones(2))
    with jt.GradientTape() as tape:
        y = f(u, v)
    tape.gradient(y, [u, v])


def _second_derivative_of_a_root():
    theta = jt.Variable(2.0)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            root = jt.custom_root(lambda a: a * a - theta, 1.0, lambda f, x0: np.sqrt(2.0))
        g = inner.gradient(root, theta)
    outer.gradient(g, theta)


def _blob(**change):
    """A serialized graph, one field of its first node changed."""
    data = json.loads(serialize.dumps(jt.grad(lambda a: jnp.sum(a * 2.5)).lower(np.ones(3)).ir))
    data["nodes"][0].update(change)
    return json.dumps(data)


def _graph_writing_a_variable():
    def f(a):
        x.assign(a)
        return a * 2.0
    serialize.dumps(jt.function(f).lower(np.ones(3)).ir)


def _size_mismatch_after_a_compile():
    add = jt.function(lambda a, b: a + b)
    add(np.ones(3), np.ones(3))
    add(np.ones(3), np.ones(4))


def _variants():
    with _config(max_variants=1):
        f = jt.function(lambda a: a * 2.0 if a > 0 else a * 3.0)
        f(1.0)
        f(-1.0)


def _recompiles():
    with _config(recompile_warning=1):
        f = jt.function(lambda a: a * 2.0)
        f(np.ones(2, np.float32))
        f(np.ones(2, np.float64))


def _watch_an_integer():
    with jt.GradientTape() as tape:
        tape.watch(jt.constant(np.arange(3)))


def _draw_while_traced():
    state = np.random.get_state()           # (other tests' draws stay as they were)
    try:
        jt.function(lambda a: a * np.random.rand())(np.ones(2))
    finally:
        np.random.set_state(state)


def _lost_gradient():
    with jt.GradientTape():
        np.asarray(x * 2.0)


# (name, call, error type, words the first line must hold, site). Each call is written on
# its own line (a helper: on its lines), which the first line must name. ``site`` names
# the raise: "file: text", the text 12 characters or more of a literal piece of the
# message; "file (function): text" where other raises share the text; and for a raise
# without such a piece (a bare ``raise`` too), "file (function): its first source line".
# The error, or one it replaced, was raised there.
CASES = [
    # -- tape.py
    ("tape entered twice", _entered_twice, ValueError, ["GradientTape", "already recording"],
     "tape.py: is already recording"),
    ("tape across a trace", _tape_reentered_outside_its_trace, RuntimeError,
     ["GradientTape", "traced function", "re-entered"], "tape.py: cannot be re-entered outside"),
    ("stop_recording", lambda: jt.GradientTape().stop_recording().__enter__(), ValueError,
     ["stop_recording()", "recording"], "tape.py: needs a tape that is recording"),
    ("watch", lambda: jt.GradientTape().watch(np.ones(2)), TypeError,
     ["GradientTape.watch", "ndarray"], "tape.py: can only watch jittape Tensors"),
    ("output_gradients count", _output_gradients_count, ValueError,
     ["GradientTape.gradient", "1 output_gradients", "2 targets"],
     "tape.py: they must have the target's structure"),
    ("output_gradients shape", _output_gradients_shape, ValueError,
     ["GradientTape.gradient", "(4,)", "(3,)"], "tape.py (_backprop): output_gradients of shape"),
    ("traced output_gradients shape",
     lambda: jt.function(_traced_output_gradients_shape)(np.ones(3)), ValueError,
     ["GradientTape.gradient", "(4,)", "(3,)"],
     "tape.py (_traced_backprop): output_gradients of shape"),
    ("numerics in a gradient", _numerics_in_a_gradient, jt.NumericsError,
     ["divide produced inf, in the gradient of sqrt"], "tape.py: , in the gradient of "),
    ("jacobian of a list", _jacobian_of_a_list, TypeError,
     ["GradientTape.jacobian", "Tensor", "got list"], "tape.py: the target must be a Tensor"),
    ("two traced jacobians", lambda: jt.function(_two_jacobians)(np.ones(3)),
     jt.UnsupportedError, ["GradientTape.jacobian", "one jacobian"],
     "tape.py: a compiled function can compute one jacobian"),
    ("batch_jacobian of a scalar", _batch_jacobian_of_a_scalar, ValueError,
     ["GradientTape.batch_jacobian", "batch axis", "target shape ()", "source shape (3,)"],
     "tape.py: need a leading batch axis"),
    ("batch_jacobian sizes", _batch_jacobian_sizes, ValueError,
     ["GradientTape.batch_jacobian", "(3, 3)", "(2, 3)"], "tape.py: batch sizes differ"),
    ("unconnected_gradients",
     lambda: jt.GradientTape().gradient(x, x, unconnected_gradients="bad"), ValueError,
     ["unconnected_gradients", "'bad'"], "tape.py: UnconnectedGradients.NONE or .ZERO"),
    ("source not a tensor", _source_not_a_tensor, TypeError,
     ["GradientTape.gradient", "ndarray", "source 1"], "tape.py: sources must be jittape"),
    # -- tensor.py
    ("constant of an object", lambda: jt.constant(object()), jt.UnsupportedError,
     ["jt.constant", "object"], "tensor.py: cannot convert a value of type"),
    ("complex to a real dtype", lambda: jt.constant(np.array([1j]), dtype=np.float64),
     jt.UnsupportedError, ["jt.constant", "complex128", "float64"],
     "tensor.py (to_array): the imaginary part would be dropped"),
    ("unsupported operand", lambda: jt.constant(1.0) + object(), jt.UnsupportedError,
     ["add", "object"], "tensor.py: unsupported operand of type"),
    ("len", lambda: len(jt.constant(1.0)), TypeError, ["len()", "0-d"],
     "tensor.py: len() of a 0-d tensor"),
    ("iter", lambda: iter(jt.constant(1.0)), TypeError, ["iteration", "0-d"],
     "tensor.py: iteration over a 0-d tensor"),
    ("float of an array", lambda: float(jt.constant(np.ones(3))), ValueError,
     ["float()", "(3,)", "size-1"], "tensor.py: is ambiguous: only size-1"),
    ("float index", lambda: [1, 2][jt.constant(1.0)], TypeError, ["index", "float32"],
     "tensor.py: only integer tensors can be used as an index"),
    ("ufunc method", lambda: np.add.reduce(jt.constant(np.ones(3))), jt.UnsupportedError,
     ["numpy.add.reduce"], "tensor.py (__array_ufunc__): is not supported on jittape tensors"),
    ("numpy function", lambda: np.unwrap(jt.constant(np.ones(3))), jt.UnsupportedError,
     ["numpy.unwrap"], "tensor.py (__array_function__): is not supported on jittape tensors"),
    ("assign shape", lambda: x.assign(np.ones(4)), ValueError,
     ["assign", "(4,)", "(3,)"], "tensor.py: cannot assign a value of shape"),
    ("strict conversion", _strict_conversion, jt.GradientLostError,
     ["np.asarray(x * 2.0)", "(3,)", "jt.config.strict"], "tensor.py: jt.config.strict is on"),
    ("variable of a traced value", lambda: jt.function(lambda a: jt.Variable(a * 2))(np.ones(2)),
     jt.UnsupportedError, ["jt.Variable", "traced value"],
     "tensor.py: the initial value is a traced value"),
    ("variable's numpy while traced", lambda: jt.function(lambda a: x.numpy())(np.ones(2)),
     TracerError, ["numpy()", "variable 'Variable:0'"], "tensor.py: in a traced function: its "),
    # -- trace.py
    ("traced assign shape", lambda: jt.function(lambda a: x.assign(np.ones(4)))(np.ones(2)),
     ValueError, ["assign", "(4,)", "(3,)"], "trace.py: cannot assign a value of shape"),
    ("traced value of a finished trace", _finished_trace, TracerError,
     ["add", "another (finished) trace"], "trace.py: a traced value of another"),
    ("bool of a traced array", lambda: jt.function(lambda a: 1 if a > 0 else 0)(np.ones(3)),
     ValueError, ["bool()", "(3,)"], "trace.py: is ambiguous (as in NumPy)"),
    ("too many guards", _guards, TracerError,
     ["more than 3 Python branches", "max_guards"], "trace.py: Python branches on traced"),
    ("branch on a scan", lambda: jt.function(_branch_on_a_scan)(np.ones(3)), TracerError,
     ["Python branch", "scan", "jt.where"], "trace.py: which has no value while tracing"),
    ("traced len", lambda: jt.function(lambda a: len(a))(1.0), TypeError, ["len()", "0-d"],
     "trace.py: len() of a 0-d tensor"),
    ("traced iter", lambda: jt.function(lambda a: list(a))(1.0), TypeError,
     ["iteration", "0-d"], "trace.py: iteration over a 0-d tensor"),
    ("traced numpy", lambda: jt.function(lambda a: a.numpy())(np.ones(2)), TracerError,
     ["numpy()", "traced value", "float64["], "trace.py: of a traced value: its value is only"),
    # -- tree.py
    ("register a non-class", lambda: jt.tree.register(3, None, None), TypeError,
     ["jt.tree.register", "int"], "tree.py: the first argument must be a class"),
    ("register a non-callable", lambda: jt.tree.register(_Stop, None, None), TypeError,
     ["jt.tree.register", "_Stop", "flatten", "NoneType"], "tree.py: must be callable, got "),
    ("register list", lambda: jt.tree.register(list, len, len), ValueError,
     ["jt.tree.register", "list", "built-in"], "tree.py: is a built-in pytree node"),
    ("register twice", _registered_twice, ValueError, ["jt.tree.register", "Point"],
     "tree.py: is already registered"),
    ("flatten not a pair", lambda: _flattened(lambda p: [1]), TypeError,
     ["jt.tree", "Point", "pair", "got list"], "tree.py: must return a pair (children"),
    ("children not iterable", lambda: _flattened(lambda p: (3, None)), TypeError,
     ["jt.tree", "Point", "int", "not iterable"], "tree.py: which is not iterable"),
    ("aux_data not hashable", lambda: _flattened(lambda p: ((), [1])), TypeError,
     ["jt.tree", "Point", "list", "not hashable"], "tree.py: which is not hashable"),
    ("unflatten", lambda: jt.tree.unflatten(jt.tree.flatten([1, 2])[1], [1]), ValueError,
     ["jt.tree.unflatten", "2 leaves", "got 1"], "tree.py: the structure has"),
    ("map", lambda: jt.tree.map(lambda a, b: a, [1, 2], [1]), ValueError,
     ["jt.tree.map", "list of 2", "list of 1"], "tree.py: does not have the first tree's"),
    ("unravel", lambda: jt.tree.ravel([np.ones(2), 1.0])[1](np.ones(4)), ValueError,
     ["jt.tree.ravel", "(4,)", "3 elements"], "tree.py: the tree's leaves hold"),
    # -- custom.py
    ("custom_gradient count", _custom_gradient_count, ValueError,
     ["custom_gradient", "f", "1 gradients", "2 inputs"], "custom.py: the gradient function of"),
    ("no rule", lambda: jt.custom_vjp(lambda a: a)(1.0), TypeError,
     ["custom_vjp", "no rule", "defvjp"], "custom.py: has no rule; call"),
    ("nondiff_argnums", _nondiff_argnums, ValueError,
     ["custom_vjp", "nondiff_argnums holds 3", "2 arguments"],
     "custom.py: nondiff_argnums holds"),
    ("bwd count", _bwd_count, ValueError,
     ["custom_vjp", "1 cotangents", "2 differentiated"], "custom.py: differentiated arguments"),
    ("checkpoint policy", lambda: jt.checkpoint(lambda a: a, policy="dots"), ValueError,
     ["checkpoint", "'dots'"], "custom.py: is not supported; None recomputes"),
    ("checkpoint of a pair", lambda: jt.checkpoint(lambda a: (a, a))(jt.constant(1.0)),
     TypeError, ["checkpoint(<lambda>)", "tuple"], "custom.py: the function must return one "),
    ("integer root", lambda: jt.custom_root(lambda a: a, np.arange(2), lambda f, x0: x0),
     TypeError, ["custom_root(<lambda>)", "int64"], "custom.py: x0 must be floating"),
    ("root shape", lambda: jt.custom_root(lambda a: a[:1], np.ones(2), lambda f, x0: x0),
     jt.ShapeError, ["custom_root(<lambda>)", "f(x0)", "(1,)", "(2,)"],
     "custom.py: f must return one value per element"),
    ("second derivative of a root", _second_derivative_of_a_root, jt.UnsupportedError,
     ["custom_root(<lambda>)", "second derivatives"], "custom.py: second derivatives through"),
    # -- serialize.py
    ("serialize an unknown tag", lambda: serialize.loads(_blob(params={"bogus": 1})),
     ValueError, ["serialize", "'bogus'"], "serialize.py: serialize: unknown tag"),
    ("serialize writes", _graph_writing_a_variable, jt.UnsupportedError,
     ["serialize", "jt.Variables"], "serialize.py: a graph that writes to jt.Variables"),
    ("serialize format", lambda: serialize.loads(b'{"format": 2}'), ValueError,
     ["serialize", "format 2", "expected 1"], "serialize.py: serialize: format "),
    ("serialize an unknown op", lambda: serialize.loads(_blob(op="nope")), jt.UnsupportedError,
     ["serialize", "'nope'"], "serialize.py: this process has no op"),
    # -- nn.py
    ("Dense activation name", lambda: jt.nn.Dense(3, activation="nope"), ValueError,
     ["Dense", "'nope'"], "nn.py: Dense: unknown activation"),
    ("Dense activation", lambda: jt.nn.Dense(3, activation=3), TypeError,
     ["Dense", "got 3"], "nn.py: activation must be a name or a callable"),
    # -- compiler/signature.py
    ("argnums type", lambda: jt.grad(lambda a: a, argnums="a"), TypeError,
     ["grad", "argnums", "'a'"], "compiler/signature.py: argnums must be an int or a non-empty"),
    ("argnums twice", lambda: jt.grad(lambda a: a, argnums=(0, 0)), ValueError,
     ["grad", "argnums=(0, 0)"], "compiler/signature.py: names an argument twice"),
    ("static_argnums type", lambda: jt.function(lambda a: a, static_argnums="a"), TypeError,
     ["function", "static_argnums", "'a'"], "compiler/signature.py: static_argnums must be an"),
    ("static argument unhashable",
     lambda: jt.function(lambda a, b: a, static_argnums=1)(np.ones(2), [1]), TypeError,
     ["function(<lambda>)", "argument 1", "list"], "compiler/signature.py: is not hashable; "),
    ("GPU array", lambda: jt.function(lambda a: a)(_DeviceArray()), jt.UnsupportedError,
     ["function(<lambda>)", "argument 0", "GPU array"], "compiler/signature.py: is a GPU array"),
    ("argument type", lambda: jt.function(lambda a: a)(object()), jt.UnsupportedError,
     ["function(<lambda>)", "argument 0", "object"], "compiler/signature.py: holds a value of"),
    ("traced argument", lambda: jt.function(lambda a: a)(_stale_tracer()), jt.UnsupportedError,
     ["function(<lambda>)", "argument 0", "Tracer"], "compiler/signature.py: holds a value of"),
    ("complex argument on cuda", lambda: jt.function(lambda a: a, target="cuda")(np.ones(2, complex)),
     jt.UnsupportedError, ["function(<lambda>): argument 0", "complex128", "target='cuda'"],
     "compiler/signature.py (_check_dtype): complex values are not supported with target='cuda'"),
    ("string argument", lambda: jt.function(lambda a: a)(np.array(["a"])), jt.UnsupportedError,
     ["function(<lambda>)", "argument 0", "<U1"], "compiler/signature.py: compiled functions take"),
    ("float16 argument", lambda: jt.function(lambda a: a)(np.ones(2, np.float16)),
     jt.UnsupportedError, ["function(<lambda>)", "argument 0", "float16"],
     "compiler/signature.py: which Numba cannot compile"),
    ("byte order", lambda: jt.function(lambda a: a[0])([np.ones(2, ">f8")]), jt.UnsupportedError,
     ["function(<lambda>)", "argument 0", ">f8"], "compiler/signature.py: non-native byte order"),
    ("argnums out of range",
     lambda: jt.grad(lambda a, b: jnp.sum(a), argnums=3)(np.ones(2), np.ones(2)), ValueError,
     ["grad(<lambda>)", "argnums=3", "2 positional arguments"],
     "compiler/signature.py (_diff): is out of range for a call with"),
    ("argnums resolved twice",
     lambda: jt.grad(lambda a, b: jnp.sum(a), argnums=(0, -2))(np.ones(2), np.ones(2)),
     ValueError, ["grad(<lambda>)", "argnums=(0, -2)", "(0, 0)"],
     "compiler/signature.py: argument twice for a call with"),
    ("static_argnums out of range", lambda: jt.function(lambda a: a, static_argnums=2)(1.0),
     ValueError, ["function(<lambda>)", "static_argnums=(2,)", "1 positional argument"],
     "compiler/signature.py (_static): is out of range for a call with"),
    ("static and differentiated",
     lambda: jt.grad(lambda a, b: jnp.sum(a), static_argnums=0)(np.ones(2), np.ones(2)),
     ValueError, ["grad(<lambda>)", "argument 0", "argnums and static_argnums"],
     "compiler/signature.py: is in both argnums and"),
    # -- compiler/modes.py
    ("hessian inside a compiled function",
     lambda: jt.function(lambda a: jt.hessian(lambda b: jnp.sum(b * b))(a))(np.ones(2)),
     jt.UnsupportedError, ["hessian(<lambda>)", "inside a compiled function"],
     "compiler/modes.py: called inside a compiled function"),
    ("differentiating an int", lambda: jt.grad(lambda a: a * 2.0)(3), TypeError,
     ["grad(<lambda>)", "argument 0", "Python int", "argnums=0"],
     "compiler/modes.py: only floating-point arguments can be"),
    ("variable twice", lambda: jt.function(lambda a, b: a + b)(x, x), jt.UnsupportedError,
     ["function(<lambda>)", "'Variable:0'", "twice"], "compiler/modes.py: is passed twice"),
    ("integer argument", lambda: jt.grad(lambda a: a * 2)(np.ones(3, dtype=np.int64)),
     TypeError, ["grad(<lambda>)", "argument 0", "int64", "argnums=0"],
     "compiler/modes.py: only floating-point arguments can be"),
    ("has_aux", lambda: jt.grad(lambda a: jnp.sum(a), has_aux=True)(np.ones(2)), TypeError,
     ["grad(<lambda>)", "has_aux=True", "pair"], "compiler/modes.py: a pair (value, aux)"),
    ("non-scalar loss", lambda: jt.grad(lambda a: a * 2.0)(np.ones(3)), TypeError,
     ["grad(<lambda>)", "scalar", "(3,)"], "compiler/modes.py: use jt.jacobian for"),
    ("boolean loss", lambda: jt.grad(lambda a: a[0] > 0)(np.ones(2)), TypeError,
     ["grad(<lambda>)", "bool"], "compiler/modes.py: only floating-point outputs"),
    ("loss of a string", lambda: jt.grad(lambda a: "x")(np.ones(2)), TypeError,
     ["grad(<lambda>)", "str"], "compiler/modes.py: it must return a jittape tensor"),
    ("result of an object", lambda: jt.function(lambda a: object())(np.ones(2)), TypeError,
     ["function(<lambda>)", "object"], "compiler/modes.py: results must be tensors"),
    ("hessian of a vector", lambda: jt.hessian(lambda a: a * 2.0)(np.ones(2)), TypeError,
     ["hessian(<lambda>)", "scalar", "(2,)"], "compiler/modes.py: the function must return a "
     "scalar, got shape"),
    # -- compiler/compiled.py
    ("target", lambda: jt.function(lambda a: a, target="tpu"), ValueError,
     ["target='tpu'", "'cpu'"], "compiler/compiled.py: use target='cpu' or"),
    ("not a function", lambda: jt.grad(3), TypeError, ["grad", "int"],
     "compiler/compiled.py: expected a function"),
    # -- compiler/cache.py
    ("size mismatch after a compile", _size_mismatch_after_a_compile, SizeMismatch,
     ["add", "(3,)", "(4,)", "3 vs 4"],
     "compiler/cache.py (_retrace_exact): raise SizeMismatch(str(err)) from None"),
    ("too many variants", _variants, jt.JittapeError,
     ["function(<lambda>)", "more than 1 variants", "max_variants"],
     "compiler/cache.py: variants of one signature"),
]


# (name, call, warning category, words the first line must hold, site): the warning is
# issued at the user's line (its filename and lineno).
WARNINGS = [
    ("watch an integer", _watch_an_integer, UserWarning,
     ["GradientTape.watch", "int64", "None"], "tape.py: The dtype of the watched tensor"),
    ("gradient lost", _lost_gradient, jt.GradientLostWarning,
     ["np.asarray(x * 2.0)", "(3,)", "NumPy"], "tensor.py: so the gradient through it is lost"),
    ("recompiles", _recompiles, RecompileWarning,
     ["function(<lambda>)", "2 times", "recompile_warning = 1", "float32 -> float64"],
     "compiler/cache.py: has traced and compiled"),
    ("np.random while traced", _draw_while_traced, UserWarning, ["function(<lambda>)", "np.random", "jt.random"],
     "compiler/capture.py: while it was traced: the numbers drawn"),
]


def _lines(call):
    """The lines of ``call`` (a lambda's one, a helper's all) and of the helpers of this
    file that it names (where the mistake is a line of theirs)."""
    first = call.__code__.co_firstlineno
    lines = {first} if call.__name__ == "<lambda>" else set(
        range(first, first + len(inspect.getsourcelines(call)[0])))
    for name in call.__code__.co_names:
        helper = globals().get(name)
        if inspect.isfunction(helper) and helper.__module__ == __name__ and helper is not call:
            lines |= _lines(helper)
    return lines


def _raised_at(err, site):
    """Whether ``err`` (or an error it replaced) was raised at ``site``: in its file (and
    function, where the site names one), with its text in the message or its source line
    the raise's."""
    head, _, text = site.partition(": ")
    path, _, function = head.partition(" (")
    while err is not None:
        last = traceback.extract_tb(err.__traceback__)[-1]
        if (os.path.relpath(last.filename, PACKAGE) == path
                and (not function or last.name == function[:-1])
                and (text in str(err) or last.line.startswith(text))):
            return True
        err = err.__context__
    return False


@pytest.mark.parametrize("name, call, kind, words, site", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_names_the_op_the_values_and_the_users_line(name, call, kind, words, site):
    with pytest.raises(kind) as err:
        call()
    first = str(err.value).splitlines()[0]
    for word in words:
        assert word in first, (word, first)
    assert any(f"(at {__file__}:{n})" in first for n in _lines(call)), first
    assert first.count("(at ") == 1, first                  # said once
    assert _raised_at(err.value, site), (site, traceback.format_exception(err.value))


@pytest.mark.parametrize("name, call, category, words, site", WARNINGS,
                         ids=[w[0] for w in WARNINGS])
def test_a_warning_names_the_op_the_values_and_the_users_line(name, call, category, words,
                                                              site):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    found = [w for w in seen if issubclass(w.category, category)
             and site.partition(": ")[2] in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in seen]
    (w,) = found
    first = str(w.message).splitlines()[0]
    for word in words:
        assert word in first, (word, first)
    assert w.filename == __file__ and w.lineno in _lines(call), (w.filename, w.lineno)


LOGGED = "tape.py: on a persistent tape inside its context"


def test_a_gradient_inside_a_persistent_tapes_block_is_logged_at_the_users_line(caplog):
    with jt.GradientTape(persistent=True) as tape:
        y = x * 2.0
        line = inspect.currentframe().f_lineno + 1
        tape.gradient(y, x)
    (record,) = [r for r in caplog.records if r.name == "jittape"]
    assert record.levelname == "WARNING"
    first = record.getMessage().splitlines()[0]
    assert "GradientTape.gradient" in first and LOGGED.partition(": ")[2] in first
    assert f"(at {__file__}:{line})" in first, first


def test_a_used_tape_keeps_tensorflows_words():
    tape = jt.GradientTape()
    with tape:
        y = x * 2.0
    tape.gradient(y, x)
    with pytest.raises(RuntimeError) as err:
        tape.gradient(y, x)
    assert str(err.value) == ("A non-persistent GradientTape can only be used to compute one "
                              "set of gradients (or jacobians)")


# -- every raise and warning of the modules is a row's or listed -------------------------

_WARN = ("warn", "warn_at_user", "warn_explicit", "warning")        # (logger.warning)


def _strings(node, assigned):
    """The literal pieces of the message ``node`` builds (those of the names it reads
    assigned in its function too)."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.append(sub.value)
        elif isinstance(sub, ast.Name) and sub is not node:
            for value in assigned.get(sub.id, ()):
                out.extend(_strings(value, {}))
    return [s for s in out if len(s) >= 12]


def _sites():
    """(file, function, first source line, literal pieces, is a warning) of each raise
    and warning call in the modules."""
    sites = []
    for path in MODULES:
        with open(os.path.join(PACKAGE, path)) as f:
            source = f.read()
        lines = source.splitlines()

        def visit(node, function, assigned):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                function, assigned = node.name, {}
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Assign):
                        for t in sub.targets:
                            if isinstance(t, ast.Name):
                                assigned.setdefault(t.id, []).append(sub.value)
                    elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                        assigned.setdefault(sub.target.id, []).append(sub.value)
            warn = isinstance(node, ast.Call) and (getattr(node.func, "attr", None) in _WARN
                                                   or getattr(node.func, "id", None) in _WARN)
            if isinstance(node, ast.Raise) or warn:
                body = node.exc if isinstance(node, ast.Raise) else node
                pieces = _strings(body, assigned) if body is not None else []
                sites.append((path, function, lines[node.lineno - 1].strip(), pieces, warn))
            for child in ast.iter_child_nodes(node):
                visit(child, function, assigned)
        visit(ast.parse(source), None, {})
    return sites


def _covers(key, path, function, line, pieces):
    head, _, text = key.partition(": ")
    file, _, fn = head.partition(" (")
    if file != path:
        return False
    if fn and fn[:-1] != function:
        return False
    if line == text:                     # a bare `raise`, named by its function
        return True
    return len(text) >= 12 and (any(text in p for p in pieces)
                                or bool(fn) and line.startswith(text))


def test_every_raise_and_warning_is_a_row_or_out_of_the_users_reach():
    rows = [c[4] for c in CASES] + [w[4] for w in WARNINGS] + [LOGGED]
    listed = list(NOT_USER_MESSAGES) + list(KEPT_WORD_FOR_WORD)
    sites = _sites()
    assert len(sites) > 100
    missing = [s[:3] for s in sites
               if not any(_covers(k, *s[:4]) for k in rows + listed)]
    assert not missing, missing
    # a listed message is one of the modules' (not a stale entry)
    for key in listed + rows:
        assert any(_covers(key, *s[:4]) for s in sites), key
    # and a message a row reaches is not listed as out of reach
    for key in NOT_USER_MESSAGES:
        assert not any(_covers(key, *s[:4]) and _covers(r, *s[:4])
                       for s in sites for r in rows), key
