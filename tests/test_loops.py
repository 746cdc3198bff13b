"""scan, fori_loop, while_loop, cond and switch with JAX's semantics: eager and compiled
agree with each other and with finite differences."""

import dataclasses

import numpy as np
import pytest

import jittape as jt
from jittape import tree
from jittape.errors import TracerError, UnsupportedError


def _rnn(w, xs):
    def step(h, x):
        h = jt.tanh(h @ w + x)
        return h, jt.sum(h)
    h, ys = jt.scan(step, jt.zeros((2, 3), jt.float64), xs)
    return jt.sum(h * h) + jt.sum(ys)


def _numeric(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
    return g


def test_scan_eager_compiled_and_finite_differences_agree():
    rng = np.random.default_rng(0)
    w, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(5, 2, 3))
    t = jt.constant(w)
    with jt.GradientTape() as tape:
        tape.watch(t)
        loss = _rnn(t, xs)
    eager = tape.gradient(loss, t).numpy()
    value, compiled = jt.value_and_grad(_rnn)(w, xs)
    np.testing.assert_allclose(value, float(loss), rtol=1e-12)
    np.testing.assert_allclose(compiled, eager, rtol=1e-10)
    np.testing.assert_allclose(compiled, _numeric(lambda w: _rnn(w, xs), w), rtol=1e-6)


def test_scan_of_another_length_traces_again():
    f = jt.value_and_grad(_rnn)
    w = np.eye(3) * 0.3
    for n in (4, 7, 4):
        xs = np.ones((n, 2, 3)) * 0.1
        np.testing.assert_allclose(f(w, xs)[0], float(_rnn(jt.constant(w), xs)), rtol=1e-12)


def test_scan_reverse_pytrees_and_none_outputs():
    xs = {"a": np.arange(4.0), "b": np.arange(4.0) * 10}

    def step(c, x):
        return {"s": c["s"] + x["a"] * x["b"]}, (c["s"], None)

    carry, (seen, nothing) = jt.scan(step, {"s": jt.constant(0.0, jt.float64)}, xs,
                                     reverse=True)
    assert float(carry["s"]) == 140.0 and nothing is None
    np.testing.assert_array_equal(np.asarray(seen), [140.0, 130.0, 90.0, 0.0])
    carry, ys = jt.scan(lambda c, _: (c + 1, c), jt.constant(0.0), None, length=3)
    np.testing.assert_array_equal(np.asarray(ys), [0.0, 1.0, 2.0])


def test_a_carry_that_changes_shape_or_dtype_is_an_error():
    with pytest.raises(TypeError, match="carry leaf 0 changed from float64\\[3\\] to float64\\[1, 3\\]"):
        jt.scan(lambda c, x: (c[None], x), jt.zeros(3, jt.float64), np.ones((2, 3)))
    with pytest.raises(TypeError, match="float32"):
        jt.fori_loop(0, 2, lambda i, c: jt.cast(c, jt.float32), jt.zeros(3, jt.float64))


def test_fori_loop_and_dataclass_carries():
    @dataclasses.dataclass
    class State:
        x: object
        v: object

    def f(k):
        def body(i, s):
            return State(s.x + 0.1 * s.v, s.v - 0.1 * k * s.x)
        s = jt.fori_loop(0, 20, body, State(jt.constant(1.0, jt.float64),
                                            jt.constant(0.0, jt.float64)))
        return s.x

    eager = f(jt.constant(2.0, jt.float64))
    np.testing.assert_allclose(jt.function(f)(np.float64(2.0)), float(eager), rtol=1e-12)
    np.testing.assert_allclose(jt.grad(f)(np.float64(2.0)), _numeric(f, np.array(2.0)),
                               rtol=1e-6)


def test_while_loop_with_a_data_dependent_trip_count_differentiates():
    def newton_sqrt(a):
        def body(c):
            x, i = c
            return 0.5 * (x + a / x), i + 1
        x, _ = jt.while_loop(lambda c: jt.abs(c[0] * c[0] - a) > 1e-12 * a, body,
                             (a * 0 + 1.0, 0))
        return x

    f = jt.grad(newton_sqrt)
    for a in (2.0, 50.0, 2.0):              # another trip count: another variant
        np.testing.assert_allclose(jt.function(newton_sqrt)(np.float64(a)), np.sqrt(a),
                                   rtol=1e-12)
        np.testing.assert_allclose(f(np.float64(a)), 0.5 / np.sqrt(a), rtol=1e-8)


def test_cond_and_switch_run_one_branch_eager_and_compiled():
    def f(x):
        return jt.cond(jt.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)

    def g(x, k):
        return jt.switch(k, [lambda v: v, lambda v: v * v, lambda v: jt.sin(v)], x)

    x = np.array([1.0, -0.5])
    for sign in (1.0, -1.0, 1.0):
        np.testing.assert_allclose(jt.grad(lambda x: jt.sum(f(x)))(sign * x),
                                   np.full(2, 2.0 if sign > 0 else -1.0))
    for k, want in ((-3, np.ones(2)), (1, 2 * x), (2, np.cos(x)), (9, np.cos(x))):
        np.testing.assert_allclose(jt.grad(lambda x: jt.sum(g(x, k)))(x), want, rtol=1e-12)
    with pytest.raises(TypeError, match="scalar"):
        jt.cond(np.array([True, False]), lambda: 1, lambda: 2)


# -- compiled loops are loops: one region, whatever the trip count -------------------

def _check_all_paths(loss, args, rtol=1e-6):
    """Eager tape = no-JIT generated Python = compiled = central finite differences for
    value_and_grad of ``loss`` with respect to every argument."""
    argnums = tuple(range(len(args)))
    vg = jt.value_and_grad(loss, argnums=argnums)
    value, grads = vg(*args)
    tensors = [jt.constant(a) for a in args]
    with jt.GradientTape() as tape:
        tape.watch(tensors)
        eager_value = loss(*tensors)
    eager = tape.gradient(eager_value, tensors)
    python = vg.lower(*args).python(*args)
    np.testing.assert_allclose(value, float(eager_value), rtol=1e-12)
    np.testing.assert_allclose(python[0], value, rtol=1e-12)
    for k, a in enumerate(args):
        np.testing.assert_allclose(grads[k], eager[k].numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(python[1 + k], grads[k], rtol=1e-10, atol=1e-12)
        numeric = _numeric(lambda z: loss(*[z if j == k else b for j, b in enumerate(args)]), a)
        np.testing.assert_allclose(grads[k], numeric, rtol=rtol, atol=1e-8)


def _scans(graph):
    return sum(1 for n in graph.all_nodes() if n.prim.name == "scan")


def test_a_compiled_scan_is_one_region_whatever_its_length():
    w = np.eye(3) * 0.3
    sizes = []
    for n in (3, 300):
        graph = jt.value_and_grad(_rnn).lower(w, np.ones((n, 2, 3))).ir
        assert _scans(graph) == 2                    # the forward loop and its VJP
        sizes.append(len(list(graph.all_nodes())))
    assert sizes[0] == sizes[1]


RNG = np.random.default_rng(5)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(7, 2, 3))
H0 = RNG.normal(size=(2, 3))


def _pytree_reverse(w, xs, h0):
    def step(c, x):
        h, s = c
        h = jt.tanh(h @ w + x)
        return (h, s + jt.mean(h)), {"a": h * 2.0, "b": jt.sum(h)}
    (h, s), ys = jt.scan(step, (h0, 0.0), xs, reverse=True)
    return jt.sum(h * h) + s + jt.sum(ys["a"][2]) + jt.sum(ys["b"] * ys["b"])


def _no_xs(w, h0):
    def step(h, _):
        return jt.sin(h @ w), None
    h, ys = jt.scan(step, h0, None, length=5)
    assert ys is None
    return jt.sum(h * h * h)


def _unrolled(w, xs, h0, unroll=3, reverse=False):
    def step(h, x):
        h = jt.tanh(h @ w + x)
        return h, h[0]
    h, ys = jt.scan(step, h0, xs, unroll=unroll, reverse=reverse)
    return jt.sum(h * h) + jt.sum(ys * np.arange(3.0))


def _fori(w, xs, h0):
    def body(i, h):
        return jt.tanh(h @ w + xs[i] * i)       # a traced index into a captured array
    return jt.sum(jt.fori_loop(1, 6, body, h0) ** 2)


def _int_carry(w, h0):
    def step(c, _):
        h, k = c
        return (jt.tanh(h @ w) * (1.0 + 0.1 * jt.cast(k, jt.float64)), k + 1), k
    (h, k), ks = jt.scan(step, (h0, np.int64(0)), None, length=4)
    return jt.sum(h * h) + jt.cast(k + jt.sum(ks), jt.float64)


def _nested(w, xs, h0):
    def outer(h, x):
        inner, _ = jt.scan(lambda g, _: (jt.tanh(g @ w + x), None), h, None, length=2)
        return inner, None
    h, _ = jt.scan(outer, h0, xs)
    return jt.sum(h * h)


@pytest.mark.parametrize("loss, args", [
    (_pytree_reverse, (W, XS, H0)),
    (_no_xs, (W, H0)),
    (_unrolled, (W, XS, H0)),
    (lambda w, xs, h0: _unrolled(w, xs, h0, unroll=2, reverse=True), (W, XS, H0)),
    (_fori, (W, XS, H0)),
    (_int_carry, (W, H0)),
    (_nested, (W, XS, H0)),
], ids=["pytree-reverse", "no-xs", "unroll", "unroll-reverse", "fori", "int-carry", "nested"])
def test_compiled_loops_agree_with_eager_python_and_finite_differences(loss, args):
    _check_all_paths(loss, args)


def test_hessian_through_a_scan():
    xs = XS[:, :1]

    def f(h0):
        h, _ = jt.scan(lambda h, x: (jt.tanh(h @ W + x), None), h0, xs)
        return jt.sum(h * h)

    h0 = H0[:1]
    hess = np.asarray(jt.hessian(f)(h0)).reshape(3, 3)
    g = jt.grad(f)
    numeric = np.stack([(np.asarray(g(h0 + e)) - np.asarray(g(h0 - e))).ravel() / 2e-6
                        for e in np.eye(3)[:, None, :] * 1e-6])
    np.testing.assert_allclose(hess, numeric, rtol=1e-6, atol=1e-8)


def test_a_python_branch_in_a_compiled_loop_body_names_cond():
    def f(x):
        def step(c, v):
            if jt.sum(c) > 0:                       # one trace for every step: no guard
                return c + v, None
            return c - v, None
        return jt.scan(step, x, np.ones((3, 2)))[0]

    with pytest.raises(TracerError, match="jt.cond"):
        jt.function(f)(np.ones(2))


def test_a_variable_assigned_or_a_draw_in_a_compiled_loop_body_is_an_error():
    v = jt.Variable(np.zeros(2))

    def assigns(x):
        def step(c, _):
            v.assign(c)
            return c + 1.0, None
        return jt.scan(step, x, None, length=3)[0]

    with pytest.raises(UnsupportedError, match="variable assigned in a loop body"):
        jt.function(assigns)(np.ones(2))

    def draws(x):
        return jt.scan(lambda c, _: (c + jt.random.normal((2,)), None), x, None, length=3)[0]

    with pytest.raises(UnsupportedError, match="random draw"):
        jt.function(draws)(np.ones(2))


def test_a_python_number_carry_takes_the_dtype_of_the_body():
    def f(x):
        return jt.scan(lambda s, v: (s + jt.sum(v), None), 0.0, x)[0]

    x = np.ones((4, 3), np.float32)
    out = jt.function(f)(x)
    assert out.dtype == np.float32 and float(out) == 12.0
    np.testing.assert_allclose(jt.grad(f)(x), np.ones((4, 3)))


def _checkpointed(policy, reverse=False):
    def loss(w, xs, h0):
        def step(h, x):
            h = jt.tanh(h @ w + x)
            return h, jt.sum(h * x)
        h, ys = jt.scan(step, h0, xs, checkpoint=policy, reverse=reverse)
        return jt.sum(h * h) + jt.sum(ys * np.arange(1.0, 8.0))
    return loss


@pytest.mark.parametrize("policy, reverse", [(True, False), (3, False), (3, True), (7, False)])
def test_checkpointed_scans_give_the_same_gradients(policy, reverse):
    _check_all_paths(_checkpointed(policy, reverse), (W, XS, H0))
    graph = jt.value_and_grad(_checkpointed(policy, reverse), argnums=(0, 1, 2)).lower(W, XS, H0).ir
    recomputing = [n for n in graph.all_nodes() if n.prim.name == "scan" and n.params.get("recompute")]
    assert recomputing


def test_a_bad_checkpoint_policy_is_an_error():
    with pytest.raises(ValueError, match="checkpoint="):
        jt.scan(lambda c, x: (c, x), 0.0, np.ones(3), checkpoint="sometimes")


def _damped(w, x0):
    """Iterate x <- tanh(w x) + x0 / 2 until the step is small: a trip count that
    depends on the data (about 30 steps here: past the stack's first growth)."""
    def cond(c):
        x, dx, k = c
        return (jt.sum(dx * dx) > 1e-20) & (k < 200)

    def body(c):
        x, _, k = c
        new = jt.tanh(x @ w) * 0.5 + x0 * 0.5
        return new, new - x, k + 1
    x, _, k = jt.while_loop(cond, body, (x0, x0 + 1.0, 0))
    return jt.sum(x * x) + 0.0 * jt.cast(k, jt.float64)


def test_a_compiled_while_loop_is_one_region_and_differentiates():
    w = RNG.normal(size=(3, 3)) * 0.3
    x0 = RNG.normal(size=(2, 3))
    graph = jt.value_and_grad(_damped, argnums=(0, 1)).lower(w, x0).ir
    names = [n.prim.name for n in graph.all_nodes()]
    assert "while_loop" in names and "while_grad" in names
    _check_all_paths(_damped, (w, x0), rtol=1e-5)
    f = jt.value_and_grad(_damped, argnums=(0, 1))
    f(w, x0)
    f(w * 0.1, x0)                       # another trip count: the same kernel
    assert f.cache_info().traces == 1


def test_second_derivatives_through_a_compiled_while_loop_raise():
    def f(x):
        return jt.while_loop(lambda c: c[1] < 3, lambda c: (jt.sin(c[0]), c[1] + 1), (x, 0))[0]
    with pytest.raises(UnsupportedError, match="while_loop"):
        jt.hessian(lambda x: jt.sum(f(x)))(np.ones(2))


def _branchy(w, xs, h0):
    def step(h, x):
        h = jt.cond(jt.sum(x) > 0, lambda a, b: jt.tanh(a @ w + b), lambda a, b: jt.sin(a) - b,
                    h, x)
        k = jt.cast(jt.sum(h) * 3.0, jt.int64)
        h = jt.switch(k, [lambda a: a * 0.5, lambda a: jt.cos(a), lambda a: a * a * 0.3], h)
        return h, None
    return jt.sum(jt.scan(step, h0, xs)[0] ** 2)


def test_cond_and_switch_in_a_compiled_loop_body_are_regions():
    graph = jt.value_and_grad(_branchy, argnums=(0, 1, 2)).lower(W, XS, H0).ir
    names = {n.prim.name for n in graph.all_nodes()}
    assert {"switch_2", "switch_3", "scan"} <= names
    _check_all_paths(_branchy, (W, XS, H0), rtol=1e-5)


def test_branches_of_another_shape_are_an_error():
    def f(x):
        return jt.cond(jt.sum(x) > 0, lambda v: v, lambda v: v[:1], x)
    with pytest.raises(TypeError, match="one structure, shapes and dtypes"):
        jt.function(f)(np.ones(2))


def test_hessian_through_a_compiled_cond():
    def f(x):
        return jt.sum(jt.cond(jt.sum(x) > 0, lambda v: jt.sin(v) * v, lambda v: v ** 3, x))

    for x in (np.array([0.3, 0.7]), np.array([-0.3, -0.7])):
        hess = np.asarray(jt.hessian(f)(x))
        want = np.diag(2 * np.cos(x) - x * np.sin(x)) if x.sum() > 0 else np.diag(6 * x)
        np.testing.assert_allclose(hess, want, rtol=1e-10, atol=1e-12)


def test_a_while_loop_that_runs_no_step_leaves_its_inputs_alone():
    x, s = np.array([0.5, -0.3, 0.2]), np.array(0.7)

    def f(s, x):
        return jt.sum(jt.while_loop(lambda c: c[0] > 10.0, lambda c: (c[0] * 2, c[1] * s),
                                    (s, x))[1])

    value, (gs, gx) = jt.value_and_grad(f, argnums=(0, 1))(s, x)
    np.testing.assert_array_equal(x, [0.5, -0.3, 0.2])      # (a result never aliases it)
    assert float(value) == pytest.approx(0.4) and float(gs) == 0.0
    np.testing.assert_array_equal(gx, np.ones(3))
    y = jt.function(lambda x: jt.while_loop(lambda c: jt.sum(c) > 10.0, lambda c: c * 2, x))(x)
    assert not np.shares_memory(y, x)


def _corrected(x, lr, start):
    # a step count, a halving carry and the scalars made from them (as Adam's bias
    # corrections) before the step's array work
    def body(c):
        x, k, decay = c
        t = jt.cast(k, jt.float64) + 1.0
        scale = lr * decay / (1.0 - 0.9 ** t) / jt.sqrt(1.0 - 0.999 ** t)
        return x - scale * jt.sin(x), k + 1, decay * 0.5
    return jt.while_loop(lambda c: c[1] < 20, body, (x, start, jt.ones((), np.float64)))[0]


def _while_regions(f, args):
    """The while regions of compiled ``f``'s optimized graph for ``args``."""
    graph = f._entry_for(args).graph
    return [n for n in graph.all_nodes() if getattr(n.prim, "role", None) == "while"]


@pytest.mark.parametrize("nesting", ["alone", "in a fori_loop"])
def test_scalars_of_a_loops_counters_are_computed_a_step_ahead(monkeypatch, nesting):
    # the chain from the counters (the step count, the halving carry, the captured
    # rate) is a carry computed by the step before: the same operations on the same
    # values, the same bits as without the pass, and no step more or less
    def f(x, lr, start):
        if nesting == "alone":
            return _corrected(x, lr, start)
        return jt.fori_loop(0, 2, lambda i, y: _corrected(y, lr, start), x)

    args = (np.array([0.5, -1.2, 2.0]), np.float64(0.1), np.int64(0))
    ahead = jt.function(f)
    got = ahead(*args)
    (loop,) = _while_regions(ahead, args)
    assert loop.params["carries"] > 3
    monkeypatch.setattr(jt.passes, "steps_ahead", lambda graph, ids: graph)
    plain = jt.function(lambda *a: f(*a))
    assert got.tobytes() == plain(*args).tobytes()
    (loop,) = _while_regions(plain, args)
    assert loop.params["carries"] == 3
    for start in (np.int64(5), np.int64(20), np.int64(25)):   # fewer steps, none
        more = (args[0], args[1], start)
        assert ahead(*more).tobytes() == plain(*more).tobytes()
    if nesting == "alone":
        np.testing.assert_array_equal(ahead(args[0], args[1], np.int64(20)), args[0])
        eager = _corrected(jt.constant(args[0]), jt.constant(args[1]), jt.constant(args[2]))
        np.testing.assert_allclose(got, eager.numpy(), rtol=1e-13)


def test_check_numerics_keeps_a_loops_scalars_in_their_step(monkeypatch):
    # its checks would see the chain's values a step past the loop's end
    monkeypatch.setattr(jt.config, "check_numerics", True)
    args = (np.array([0.5, -1.2, 2.0]), np.float64(0.1), np.int64(0))
    f = jt.function(_corrected)
    assert np.all(np.isfinite(f(*args)))
    (loop,) = _while_regions(f, args)
    assert loop.params["carries"] == 3


def test_a_size_times_a_float_is_a_float_in_a_body():
    """``n * 1.0``, ``1.0 * n``, ``0.0 + n`` and ``n // 1.0`` of a traced size are floats, as in
    Python (a regression: they came back as the size itself, and a scan's y was int64)."""
    def sc(x):
        def body(c, xi):
            n = xi.shape[0]
            return c + xi, (n * 1.0, 1.0 * n, 0.0 + n, n // 1.0)
        return jt.scan(body, np.zeros(x.shape[1]), x)[1]
    x = np.ones((2, 3))
    for ys in (jt.function(sc)(x), [y.numpy() for y in sc(jt.constant(x))]):
        for y in ys:
            assert y.dtype == np.float64
            np.testing.assert_array_equal(y, [3.0, 3.0])


def _fib_like(a, b, n):
    def body(c):
        k, a, b = c
        return k + 1, b, a + jt.sin(b)          # a carry passed on to another carry
    return jt.while_loop(lambda c: c[0] < n, body, (0, a, b))


def _shifts(x, n):
    def body(k, x):
        y = x * 0.5
        return y + jt.concatenate([y[-1:], y[:-1]]) + 1.0   # read at other indices
    return jt.fori_loop(0, n, body, x)


def test_loop_buffers_made_once_keep_every_step_s_values():
    a, b = np.linspace(0, 1, 5), np.linspace(1, 2, 5)
    for fn, args in ((_fib_like, (a, b, 7)), (_shifts, (a, 9))):
        compiled = jt.function(fn)
        want = fn(*[jt.constant(v) if isinstance(v, np.ndarray) else v for v in args])
        got = compiled(*args)
        for w, g in zip(tree.leaves(want), tree.leaves(got)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14)
        # the results are the caller's: a second call does not write into the first's
        again = compiled(*args)
        for g, h in zip(tree.leaves(got), tree.leaves(again)):
            assert np.asarray(g) is not np.asarray(h) or np.ndim(g) == 0
            np.testing.assert_array_equal(np.asarray(g), np.asarray(h))
    # every array of the step is made before the loop (the fused loops' and
    # concatenate's), and the step sees them borrowed (no reference counts); their
    # owners live past the loop
    source = jt.function(_shifts).lower(a, 9).source
    loop = source.split("steps of the body below")[1].split("return")[0]
    assert loop.count("empty(") == 0 and "= pool" in loop
    before = source.split("steps of the body below")[0]
    assert "= borrow(owner" in before and "keep(owner" in loop
    # a carry passed on to a carry: the values carries hold are made at each step
    swap = jt.function(_fib_like).lower(a, b, 7).source
    assert "empty(" in swap.split("while True")[1]


# A carry's next value made by an elementwise loop is written into the carry's own
# buffer (codegen/cpu.py: ``unseen_writes``, ``Pool.into_carry``) only where no read
# can see the write: each body below is one where writing in place would change the
# result, but the first.

def _moments(x, m, n):            # Adam's shape: each carry read at its own element only
    def body(k, c):
        x, m = c
        m = 0.9 * m + 0.1 * jt.sin(x)
        return x - 0.05 * m / (jt.sqrt(m * m) + 1.0), m
    return jt.fori_loop(0, n, body, (x, m))


def _read_after(x, m, n):         # x also read by a sum that the update does not wait for
    def body(k, c):
        x, m = c
        return x * 0.5 + 1.0, m + jt.sum(x)
    return jt.fori_loop(0, n, body, (x, m))


def _reversed(x, m, n):           # x read through a reversed view in the update's loop
    def body(k, c):
        x, m = c
        return x + 0.5 * x[::-1], m * 0.5
    return jt.fori_loop(0, n, body, (x, m))


def _placed(x, m, n):             # x read at the element before, through a placement
    def body(k, c):                # (a slice's gradient: x[:-1] placed at [1:], in the loop)
        x, m = c
        with jt.GradientTape() as tape:
            tape.watch(x)
            tail = x[1:]
        return 0.5 * x + tape.gradient(tail, x, output_gradients=x[:-1]), m * 0.5
    return jt.fori_loop(0, n, body, (x, m))


def _twice(x, m, n):              # one new value for two carries: one buffer would serve both
    def body(k, c):
        x, m = c
        y = x * 0.5 + m
        return y, y
    return jt.fori_loop(0, n, body, (x, m))


@pytest.mark.parametrize("fn, in_place", [(_moments, 2), (_read_after, 1), (_reversed, 1),
                                          (_placed, 1), (_twice, 0)])
def test_a_loop_writes_a_carry_in_place_only_where_no_read_sees_it(fn, in_place):
    x, m = np.linspace(-1.0, 2.0, 11), np.linspace(0.5, 1.5, 11)
    x0, m0 = x.copy(), m.copy()
    compiled = jt.function(fn)
    source = compiled.lower(x, m, 6).source
    assert source.count("into its carry's buffer") == in_place
    want = [x, m]
    for _ in range(6):            # the loop's steps in NumPy, as the body reads them
        want = list(tree.leaves(fn(jt.constant(want[0]), jt.constant(want[1]), 1)))
        want = [np.asarray(w.numpy() if hasattr(w, "numpy") else w) for w in want]
    for got in (compiled(x, m, 6), compiled.lower(x, m, 6).python(x, m)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(x, x0)                  # the caller's arrays untouched
    np.testing.assert_array_equal(m, m0)


@pytest.mark.parametrize("update", ["elementwise", "row"])
def test_a_carry_a_gather_reads_as_its_index_is_not_written_before_the_gather(update):
    # the gather z[idx] reads the step's old idx where it runs, after the loop making
    # the new idx (which it waits for): idx must not be written in place (a regression:
    # a view's index arrays were not counted as reads of the carry)
    def f(idx, y):
        def body(k, c):
            idx, y = c
            new = (idx + 1) % 5 if update == "elementwise" else idx.at[0].set((idx[0] + 1) % 5)
            z = y + jt.sum(new) * 0.0
            return new, z[idx]
        return jt.fori_loop(0, 3, body, (idx, y))
    idx, y = np.array([0, 2, 4, 1, 3]), np.linspace(0.0, 1.0, 5)
    compiled = jt.function(f)
    assert "into its carry's buffer" not in compiled.lower(idx, y).source
    want = f(jt.constant(idx), jt.constant(y))
    for got in (compiled(idx, y), compiled.lower(idx, y).python(idx, y)):
        np.testing.assert_array_equal(np.asarray(got[0]), want[0].numpy())
        np.testing.assert_array_equal(np.asarray(got[1]), want[1].numpy())
    np.testing.assert_array_equal(idx, [0, 2, 4, 1, 3])
