"""Compiled gradients on the CPU: results, signatures and caches, kernel(), errors."""

import os
import re
import subprocess
import sys
import textwrap
import warnings

import numba
import numpy as np
import pytest

import jittape as jt

THIS_FILE = os.path.basename(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")


def logistic(w, b, x, y):
    z = x @ w + b
    return jt.mean(jt.softplus(z) - y * z)


def data(n, rng=None, dtype=np.float32):
    rng = rng or np.random.default_rng(n)
    x = rng.normal(size=(n, 5)).astype(dtype)
    y = (rng.random(n) > 0.5).astype(dtype)
    return x, y


def eager_grads(fn, args, argnums):
    tensors = [jt.constant(a) for a in args]
    with jt.GradientTape() as tape:
        for k in argnums:
            tape.watch(tensors[k])
        value = fn(*tensors)
    return value.numpy(), [g.numpy() for g in tape.gradient(value, [tensors[k] for k in argnums])]


# -- results -------------------------------------------------------------------------

def test_value_and_grad_matches_the_tape(cache_dir):
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=5).astype(np.float32), np.float32(0.3)
    x, y = data(40, rng)
    f = jt.value_and_grad(logistic, argnums=(0, 1))
    value, (gw, gb) = f(w, b, x, y)
    want_value, (want_w, want_b) = eager_grads(logistic, (w, b, x, y), (0, 1))
    assert value.dtype == np.float32 and gw.dtype == np.float32 and gb.dtype == np.float32
    np.testing.assert_allclose(value, want_value, rtol=2e-6)
    np.testing.assert_allclose(gw, want_w, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(gb, want_b, rtol=2e-5, atol=1e-7)


def test_grad_with_pytrees_has_aux_and_python_scalars(cache_dir):
    def loss(params, x, scale):
        h = jt.tanh(x @ params["w"] + params["b"])
        return scale * jt.sum(h ** 2), {"mean": jt.mean(h)}

    rng = np.random.default_rng(1)
    params = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    x = rng.normal(size=(4, 3))
    g, aux = jt.grad(loss, has_aux=True)(params, x, 0.5)
    assert set(g) == {"w", "b"} and set(aux) == {"mean"}
    tensors = {k: jt.constant(v) for k, v in params.items()}
    with jt.GradientTape() as tape:
        tape.watch(tensors)
        value, eager_aux = loss(tensors, jt.constant(x), 0.5)
    want = tape.gradient(value, tensors)
    for k in params:
        np.testing.assert_allclose(g[k], want[k].numpy(), rtol=1e-12)
    np.testing.assert_allclose(aux["mean"], eager_aux["mean"].numpy(), rtol=1e-12)
    (value2, aux2), g2 = jt.value_and_grad(loss, has_aux=True)(params, x, 0.5)
    np.testing.assert_allclose(value2, value.numpy(), rtol=1e-12)


def test_grad_of_a_python_float_argument(cache_dir):
    g = jt.grad(lambda a, x: jt.sum(jt.sin(a * x)))
    x = np.linspace(0, 1, 5).astype(np.float32)
    out = g(0.7, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.sum(x * np.cos(np.float32(0.7) * x)), rtol=1e-5)


def test_an_unmodified_numpy_function_compiles(cache_dir):
    def loss(w, x):
        z = np.maximum(x @ w, 0.0)
        return np.sum(np.exp(-z) * z) / x.shape[0]

    rng = np.random.default_rng(2)
    w, x = rng.normal(size=(3,)), rng.normal(size=(6, 3))
    got = jt.grad(loss)(w, x)
    _, (want,) = eager_grads(loss, (w, x), (0,))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_nan_and_inf_behave_as_in_numpy(cache_dir):
    def f(x):
        return jt.sum(jt.log(x) + 1.0 / x)

    x = np.array([0.0, 1.0, np.inf, np.nan])
    value, g = jt.value_and_grad(f)(x)
    with np.errstate(all="ignore"):
        want_value, (want_g,) = eager_grads(f, (x,), (0,))
    assert np.isnan(value) and np.isnan(want_value)
    np.testing.assert_array_equal(g, want_g)


def test_float32_constants_keep_float32_code(cache_dir):
    f = jt.value_and_grad(lambda x: jt.sum(jt.exp(x * 0.1 + 3.0)))
    x = np.ones(4, np.float32)
    value, g = f(x)
    assert value.dtype == np.float32 and g.dtype == np.float32
    source = f.lower(x).source.split("def kernel")[1]
    assert "np.float32(0.1)" in source
    # float64 only for the accumulators of a full float32 sum (NumPy sums pairwise),
    # and the parallel loop's partial sums
    assert all("acc" in line or "total" in line or "part" in line
               for line in source.splitlines() if "float64" in line)


def softmax_loss(w, x, labels):
    logits = jt.tanh(x @ w)
    return jt.reduce_mean(jt.sparse_softmax_cross_entropy(labels, logits))


@pytest.mark.parametrize("classes", [7, 300])
def test_loops_over_the_rows_of_a_softmax_share_one_loop(cache_dir, classes):
    # 7 classes: a row's max, sum, log and loss in one loop over the rows, the row
    # values in registers; 300: the rows' reductions on lanes, loops of their own. Both
    # as the tape, for batch sizes from one compile
    f = jt.value_and_grad(softmax_loss)
    compiled = f.cache_info().compiles      # (the other case's wrapper is this one)
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, classes)).astype(np.float32)
    for n in (2, 5, 64):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        labels = rng.integers(0, classes, n).astype(np.int32)
        value, g = f(w, x, labels)
        want_value, (want_g,) = eager_grads(softmax_loss, (w, x, labels), (0,))
        np.testing.assert_allclose(value, want_value, rtol=1e-5)
        np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-6)
    assert f.cache_info().compiles == compiled + 1
    kernel = f.lower(w, x, labels).source.split("def kernel")[1]
    if classes == 7:
        assert "# one loop over the rows" in kernel
        assert kernel.count("for i0 in range(") < 5
        # the 7 classes (a literal, checked against w's columns on entry) bound the
        # loops as w's size: a loop of constant length LLVM would unroll fully
        assert re.search(r"in range\(w_[a-z]\)", kernel) and "in range(7)" not in kernel
    else:                                   # long rows: each reduced on lanes, in a loop of its own
        assert kernel.count("for lane in range(") >= 4


def reductions_of_rows(x, y):
    # a float64 sum and max, a float32 sum (kept in float64), a product, along rows, in
    # a loop's body
    def step(k, acc):
        return acc + (jt.reduce_sum(x * x * k) + jt.reduce_max(jt.abs(x) * k)
                      + jt.reduce_prod(1.0 + 0.01 * x * k)
                      + jt.cast(jt.reduce_sum(y * y * jt.cast(k, jt.float32)), jt.float64))
    return jt.fori_loop(1, 3, step, jt.zeros((), jt.float64))


def test_short_rows_reduce_as_their_lanes_would(cache_dir):
    # traced on a short row, a loop's body also reduces short rows with one accumulator;
    # the lanes of a body traced on a long row give the same bits at every length
    rng = np.random.default_rng(5)
    short_first = jt.function(reductions_of_rows)
    long_first = jt.function(lambda x, y: reductions_of_rows(x, y))
    x10, y10 = rng.normal(size=10), rng.normal(size=10).astype(np.float32)
    x300, y300 = rng.normal(size=300), rng.normal(size=300).astype(np.float32)
    assert short_first.lower(x10, y10).source.count("a short row") == 4
    assert "a short row" not in long_first.lower(x300, y300).source
    assert "a short row" not in jt.function(lambda x: jt.reduce_sum(x)).lower(x10).source
    for n in (1, 10, 16, 17, 63, 64, 65, 300, 5000):
        x, y = rng.normal(size=n), rng.normal(size=n).astype(np.float32)
        x[n // 2] = -0.0
        a, b = short_first(x, y), long_first(x, y)
        assert a.tobytes() == b.tobytes(), n
        want = sum(np.sum(x * x * k) + np.max(np.abs(x) * k) + np.prod(1.0 + 0.01 * x * k)
                   + np.float64(np.sum(y * y * np.float32(k), dtype=np.float64))
                   for k in (1, 2))
        np.testing.assert_allclose(a, want, rtol=1e-6)
    nan = np.full(10, np.nan)
    assert np.isnan(short_first(nan, y10)) and np.isnan(long_first(nan, y10))


def test_complex_short_rows_keep_their_lanes(cache_dir):
    # (1+0j) * x is not x where x has a zero part: one accumulator would change the
    # bits of a complex product (a lane starts at 1+0j)
    def rows(x):
        return jt.fori_loop(0, 1, lambda k, acc: acc + jt.reduce_prod(x, axis=-1),
                            jt.zeros((2,), np.complex128))
    short_first, long_first = jt.function(rows), jt.function(lambda x: rows(x))
    assert "a short row" not in short_first.lower(np.ones((2, 10), complex)).source
    long_first(np.ones((2, 100), complex))          # its kernel traced on long rows
    x = np.array([[complex(0.0, -2.0), complex(-0.0, -0.0)],
                  [complex(-0.0, 0.0), complex(1.0, -0.0)]])
    assert short_first(x).tobytes() == long_first(x).tobytes()
    assert long_first.cache_info().traces == 1


def rosenbrock_terms(x):
    return jt.reduce_sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def three_point_terms(x):          # slices [2:], [1:-1], [:-2]: offsets 2, 1 and 0
    return jt.reduce_sum(jt.sin(x[2:]) * x[:-2] + x[1:-1] * x[2:] - 0.5 * x[:-2] * x[1:-1])


def four_point_terms(x):           # offsets 3, 2, 1 and 0 in one loop over n - 3
    return jt.reduce_sum(x[3:] * x[:-3] - jt.cos(x[2:-1]) * x[1:-2])


def both_terms(x):                 # the gradient's assembly reads two loops, over n - 1 and n - 2
    return rosenbrock_terms(x) + three_point_terms(x)


def stencils(terms, x, tol):
    with jt.GradientTape() as tape:
        tape.watch(x)
        v = terms(x)
    g = tape.gradient(v, x)
    code = jt.reduce_max(jt.cast(jt.abs(g) > tol, np.int8) + jt.cast(jt.isnan(g), np.int8) * 2)
    return v, g, code


def _numpy_gradient(terms, x):
    g = np.zeros_like(x)
    if terms in (rosenbrock_terms, both_terms) and x.size >= 2:
        d = x[1:] - x[:-1] ** 2
        g[1:] += 200.0 * d
        g[:-1] += -400.0 * d * x[:-1] - 2.0 * (1.0 - x[:-1])
    if terms is four_point_terms and x.size >= 4:
        g[3:] += x[:-3]
        g[:-3] += x[3:]
        g[2:-1] += np.sin(x[2:-1]) * x[1:-2]
        g[1:-2] += -np.cos(x[2:-1])
    if terms in (three_point_terms, both_terms) and x.size >= 3:
        g[2:] += np.cos(x[2:]) * x[:-2] + x[1:-1]
        g[:-2] += np.sin(x[2:]) - 0.5 * x[1:-1]
        g[1:-1] += x[2:] - 0.5 * x[:-2]
    return g


@pytest.mark.parametrize("terms", [rosenbrock_terms, three_point_terms, four_point_terms,
                                   both_terms])
def test_a_slices_gradient_runs_in_the_loop_that_computes_it(terms, cache_dir, monkeypatch):
    # the gradient of x[1:] and x[:-1], summed, runs in the loop computing what it places
    # (its operands of offset d carried d iterations in registers): the same bits as the
    # loops apart, at every length, with its own integer reduction, in a loop's body too
    def looped(x, tol):
        return jt.fori_loop(0, 3, lambda k, c: stencils(terms, x + 0.001 * jt.cast(k, np.float64), tol),
                            stencils(terms, x, tol))
    fused, fused_looped = jt.function(lambda x, tol: stencils(terms, x, tol)), jt.function(looped)
    x = np.linspace(0.5, 1.5, 100)
    assert "and in the same loop" in fused.lower(x, 0.5).source
    assert "and in the same loop" in fused_looped.lower(x, 0.5).source
    import jittape.passes.fuse as fuse_pass
    monkeypatch.setattr(fuse_pass, "shifted", lambda a, b: None)
    apart = jt.function(lambda x, tol: stencils(terms, x, tol))
    apart_looped = jt.function(lambda x, tol: looped(x, tol))
    assert "and in the same loop" not in apart.lower(x, 0.5).source
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 5, 10, 17, 63, 64, 65, 66, 100, 300):
        x = rng.normal(size=n)
        if n > 5:
            x[n // 2] = -0.0
        for tol in (0.5, 1e9):
            for a, b in ((fused, apart), (fused_looped, apart_looped)):
                got, want = a(x, tol), b(x, tol)
                assert all(np.asarray(u).tobytes() == np.asarray(w).tobytes()
                           for u, w in zip(got, want)), (n, tol)
            g = _numpy_gradient(terms, x)
            np.testing.assert_allclose(fused(x, tol)[1], g, rtol=1e-12, atol=1e-12)
            want_code = 1 if np.any(np.abs(g) > tol) else 0
            assert int(fused(x, tol)[2]) == want_code, (n, tol)
    x = rng.normal(size=40)
    x[7] = np.nan
    assert int(fused(x, 0.5)[2]) == 2 and int(apart(x, 0.5)[2]) == 2


def reversed_view_gradient(x):
    # the loop over n - 1 reads R through a reversed view; R's buffer is free after that
    # loop, so the gradient's assembly may take it: run in that loop, it would write
    # R[i] before the loop read it as W[n - 2 - i]
    r = jt.exp(x * 0.5)
    w = r[:0:-1]
    with jt.GradientTape() as tape:
        tape.watch(x)
        v = jt.reduce_sum(w * x[1:]) + jt.reduce_sum(w * x[:-1])
    return tape.gradient(v, x)


def test_a_follower_never_writes_a_buffer_its_leader_reads(cache_dir):
    f = jt.function(reversed_view_gradient)
    for n in (2, 3, 8, 70):
        x = np.linspace(-1.0, 1.0, n)
        w = np.exp(x * 0.5)[:0:-1]
        want = np.zeros(n)
        want[1:] += w
        want[:-1] += w
        np.testing.assert_allclose(f(x), want, rtol=1e-13)


def placed_values(x, then):
    # c (over n - 1) is read by the next loop only through its placement at [1:], from
    # the shared loop's register: that loop stores it only where something else reads it
    c = jt.sin(x[1:]) * x[:-1]
    with jt.GradientTape() as tape:
        tape.watch(x)
        tail = x[1:]
    g = tape.gradient(tail, x, output_gradients=c) * 2.0 + x
    if then == "returned":
        return g, c
    if then == "later":                       # a later op reads it
        return g, jt.numpy.cumsum(c)
    if then == "buffer":                      # a later array of its shape takes its buffer
        return g, jt.numpy.cumsum(jt.exp(x[1:]) * g[-1])
    return g


@pytest.mark.parametrize("then, stored", [("nothing", False), ("returned", True),
                                          ("later", True), ("buffer", True)])
def test_a_loop_stores_what_only_its_follower_reads_nowhere(then, stored, cache_dir):
    f = jt.function(lambda x: placed_values(x, then))
    x = np.linspace(-1.0, 2.0, 13)
    source = f.lower(x).source
    assert "and in the same loop" in source
    assert ("v4[i0] = t4" in source) == stored, source
    assert ("= v4  # reuses a dead buffer" in source) == (then == "buffer"), source
    c = np.sin(x[1:]) * x[:-1]
    g = x.copy()
    g[1:] += 2.0 * c
    want = {"nothing": (g,), "returned": (g, c), "later": (g, np.cumsum(c)),
            "buffer": (g, np.cumsum(np.exp(x[1:]) * g[-1]))}[then]
    got = f(x)
    for got, w in zip(got if isinstance(got, tuple) else (got,), want):
        np.testing.assert_allclose(got, w, rtol=1e-14)


def test_only_an_order_free_reduction_follows_into_a_loop(cache_dir):
    # a float reduction of the placed values has an order of its own (lanes): its loop
    # stays apart; so does one whose slice places its operand ahead (x[:-1] read at i + 1)
    def summed(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            v = jt.reduce_sum(jt.sin(x[1:]) * x[:-1])
        g = tape.gradient(v, x)
        return jt.reduce_sum(g * g)
    x = np.linspace(0.1, 2.0, 50)
    f = jt.function(summed)
    assert "and in the same loop" not in f.lower(x).source
    g = np.zeros_like(x)
    g[1:] += np.cos(x[1:]) * x[:-1]
    g[:-1] += np.sin(x[1:])
    np.testing.assert_allclose(f(x), np.sum(g * g), rtol=1e-12)


# -- signatures and the in-memory cache -------------------------------------------------

def test_batch_sizes_trace_and_compile_once(cache_dir):
    f = jt.value_and_grad(logistic, argnums=(0, 1))
    w, b = np.ones(5, np.float32), np.float32(0.0)
    for n in (7, 32, 1000):
        x, y = data(n)
        value, (gw, gb) = f(w, b, x, y)
        want_value, (want_w, want_b) = eager_grads(logistic, (w, b, x, y), (0, 1))
        np.testing.assert_allclose(value, want_value, rtol=1e-5)
        np.testing.assert_allclose(gw, want_w, rtol=1e-4, atol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and info.compiles == 1 and info.misses == 1 and info.hits == 2


def test_dtype_and_rank_changes_trace_again(cache_dir):
    f = jt.grad(lambda x: jt.sum(x * x))
    f(np.ones(3, np.float32))
    f(np.ones(5, np.float32))
    assert f.cache_info().traces == 1
    f(np.ones(3, np.float64))
    assert f.cache_info().traces == 2
    f(np.ones((2, 3), np.float32))
    assert f.cache_info().traces == 3
    f(np.ones((1, 3), np.float32))             # a size-1 axis broadcasts: a new signature
    assert f.cache_info().traces == 4
    f(np.ones((4, 3), np.float32))
    assert f.cache_info().traces == 4


def test_the_fast_call_path_serves_each_signature_it_compiled(cache_dir):
    f = jt.value_and_grad(lambda x, y: jt.sum(x * y), argnums=(0, 1))
    x32, y32 = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    x64, y64 = x32.astype(np.float64), y32.astype(np.float64)
    for _ in range(3):                         # alternating signatures, both from memory
        value, (gx, gy) = f(x32, y32)
        assert value.dtype == np.float32 and isinstance(value, np.float32) and value == 3
        assert gx.dtype == np.float32
        np.testing.assert_array_equal(gy, x32)
        value, (gx, gy) = f(x64, y64)
        assert isinstance(value, np.float64) and gx.dtype == np.float64
    value, _ = f(jt.constant(x32), y32)        # a Tensor argument: the full path
    assert value == 3
    info = f.cache_info()
    assert info.traces == 2 and info.compiles == 2 and info.hits == 5
    with pytest.raises(TypeError, match=r"argnums=\(0, 1\) is out of range for a call with 1 "):
        f(x32)                                 # (checked before tracing: no trace)
    f.cache_clear()
    f(x32, y32)
    assert f.cache_info().traces == 3


def test_the_fast_call_path_takes_dicts_lists_and_tuples_of_arrays(cache_dir, monkeypatch):
    def loss(params, x):
        h = jt.tanh(x @ params["w"] + params["b"][0])
        return jt.sum(h * params["b"][1])

    f = jt.value_and_grad(loss)
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(3, 2)).astype(np.float32),
              "b": [np.zeros(2, np.float32), np.float32(2.0)]}
    x = rng.normal(size=(5, 3)).astype(np.float32)
    value, grads = f(params, x)
    slow = []
    monkeypatch.setattr(type(f), "_call", lambda self, args: slow.append(args) or
                        jt.compiler.Compiled._call(self, args))
    for _ in range(3):
        again, grads_again = f(params, x)
    assert slow == []                             # one generated frame per call
    assert again == value and set(grads_again) == {"w", "b"}
    assert isinstance(grads_again["b"], list) and grads_again["b"][1].__class__ is np.float32
    np.testing.assert_array_equal(grads_again["w"], grads["w"])
    # another structure with the same top-level classes goes down the full path, right
    other = {"w": params["w"].astype(np.float64), "b": params["b"]}
    value64, grads64 = f(other, x)
    assert slow and grads64["w"].dtype == np.float64
    np.testing.assert_allclose(value64, value, rtol=1e-5)
    with pytest.raises(KeyError):                 # a missing key reaches the function
        f({"w": params["w"]}, x)


@pytest.mark.parametrize("keys", [(np.str_("a"), np.str_("b")), (1.5, float("inf")),
                                  (("t", 1), ("t", 2))], ids=["numpy-str", "float", "tuple"])
def test_dict_keys_of_any_kind_in_the_fast_path_and_the_gradients(cache_dir, keys):
    import enum
    f = jt.value_and_grad(lambda p: jt.sum(p[keys[0]] * p[keys[1]]))
    a, b = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    for _ in range(3):                            # the full path, then the generated one
        value, grads = f({keys[0]: a, keys[1]: b})
        assert value == 3 and set(grads) == set(keys)
        np.testing.assert_array_equal(grads[keys[0]], b)
        np.testing.assert_array_equal(grads[keys[1]], a)
    Color = enum.Enum("Color", "RED GREEN")
    g = jt.grad(lambda p: jt.sum(p[Color.RED] ** 2))
    for _ in range(2):
        np.testing.assert_array_equal(g({Color.RED: a})[Color.RED], 2 * a)


def test_the_fast_call_path_returns_numpy_scalars_of_the_graph_dtype(cache_dir):
    f = jt.grad(lambda a, b: a * b, argnums=(0, 1))
    for dtype in (np.float32, np.float64):
        for _ in range(2):
            ga, gb = f(dtype(2.0), dtype(-0.0))
            assert type(ga) is dtype and type(gb) is dtype
            assert ga == 0 and np.signbit(ga) and gb == 2
    ga, gb = f(np.float32(np.inf), np.float32(np.nan))
    assert np.isnan(ga) and gb == np.inf


def test_python_floats_and_numpy_scalars_are_inputs_python_ints_part_of_the_signature(
        cache_dir):
    f = jt.grad(lambda x, scale: scale * jt.sum(x * x))
    x = np.ones(3)
    np.testing.assert_array_equal(f(x, 2.0), 4 * x)
    np.testing.assert_array_equal(f(x, 3.0), 6 * x)
    assert f.cache_info().traces == 1
    np.testing.assert_array_equal(f(x, np.float64(5.0)), 10 * x)   # a NumPy scalar: an input
    np.testing.assert_array_equal(f(x, np.float64(7.0)), 14 * x)
    assert f.cache_info().traces == 2
    np.testing.assert_array_equal(f(x, 2), 4 * x)                   # an int: a constant
    np.testing.assert_array_equal(f(x, 3), 6 * x)
    assert f.cache_info().traces == 4


def test_reading_a_size_while_tracing_never_reuses_a_stale_one(cache_dir):
    def loss(x):
        total = 0.0
        for i in range(x.shape[0]):          # a Python loop over a traced size
            total = total + x[i] * (i + 1)
        return jt.sum(total)

    f = jt.grad(loss)
    np.testing.assert_array_equal(f(np.ones((2, 3))), [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(f(np.ones((3, 3))), [[1, 1, 1], [2, 2, 2], [3, 3, 3]])
    assert f.cache_info().traces == 2


def test_sizes_used_in_arithmetic_are_read_at_run_time(cache_dir):
    f = jt.grad(lambda x: jt.mean(jt.reshape(x, (-1,)) ** 2))
    for n in (2, 5):
        x = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
        np.testing.assert_allclose(f(x), 2 * x / x.size)
    assert f.cache_info().traces == 1


def test_lower_shows_the_graph_and_the_source(cache_dir):
    f = jt.value_and_grad(logistic, argnums=(0, 1))
    x, y = data(8)
    lowered = f.lower(np.ones(5, np.float32), np.float32(0), x, y)
    assert "matmul" in lowered.graph and "softplus" in lowered.graph
    assert f"{THIS_FILE}:" in lowered.graph           # ops name the user's line
    assert "def kernel(w, b, x, y):" in lowered.source      # the parameters' names
    assert "fused loop" in lowered.source and "matmul2d" not in lowered.graph


# -- the disk cache -----------------------------------------------------------------------

PROBE = textwrap.dedent("""
    import json, sys, numpy as np
    sys.path.insert(0, {root!r})
    import jittape as jt
    def loss(w, x):
        return jt.mean(jt.tanh(x @ w) ** 2)
    f = jt.value_and_grad(loss)
    value, g = f(np.ones(3), np.arange(12.0).reshape(4, 3) / 10)
    print(json.dumps(dict(f.cache_info()._asdict(), value=float(value))))
""")


def _probe(cache):
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", PROBE.format(root=ROOT)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_second_process_loads_from_the_disk_cache(tmp_path):
    first, _ = _probe(tmp_path)
    second, _ = _probe(tmp_path)
    assert first["compiles"] == 1 and first["disk_hits"] == 0
    assert second["compiles"] == 0 and second["disk_hits"] == 1
    assert second["value"] == first["value"]


AFTER_LOAD = textwrap.dedent("""
    import json, sys, numba, numpy as np
    sys.path.insert(0, {root!r})
    import jittape as jt
    def loss(w, x):
        return jt.mean(jt.tanh(x @ w) ** 2)
    f = jt.value_and_grad(loss)
    value, g = f(np.ones(3), np.arange(12.0).reshape(4, 3) / 10)     # from the disk
    # then everything that needs Numba's full context: a new compile of jittape's,
    # the kernel inside the caller's own njit code, and Numba code of the caller's
    h = jt.grad(lambda x: jt.sum(jt.exp(x) * x ** 3))(np.array([3.0, 1.0, 2.0]))
    kernel = f.kernel(np.ones(3), np.ones((4, 3)))
    @numba.njit
    def mine(w, x):
        return kernel(w, x)[0] + np.linalg.norm(x) + np.searchsorted(w, 0.5)
    print(json.dumps(dict(f.cache_info()._asdict(), value=float(value), h=h.tolist(),
                          mine=float(mine(np.ones(3), np.ones((4, 3)))))))
""")


def test_after_a_load_from_the_disk_numba_compiles_as_ever(tmp_path):
    """A first call from the disk cache starts Numba's context lean
    (``build._lean_cache_loads``): what compiles after it must find all of Numba."""
    first, _ = _probe(tmp_path)
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", AFTER_LOAD.format(root=ROOT)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["disk_hits"] == 1 and out["value"] == first["value"]
    x3 = np.array([3.0, 1.0, 2.0])
    np.testing.assert_allclose(out["h"], np.exp(x3) * (x3 ** 3 + 3 * x3 ** 2))
    w, x = np.ones(3), np.ones((4, 3))
    want = float(np.mean(np.tanh(x @ w) ** 2)) + float(np.linalg.norm(x)) + 0   # searchsorted: 0
    assert out["mine"] == pytest.approx(want)


def test_a_kernel_from_the_disk_compiles_new_layouts_in_full(cache_dir):
    """A signature a kernel must compile after its first call (here a Fortran-ordered
    argument) compiles, for every wrapper of its graph. (Loaded from the disk in a new
    process, then compiling a new layout: tests/test_cache.py.)"""
    def loss(w, x):
        return jt.mean(jt.tanh(x @ w) ** 2 + jt.maximum(x @ w, 0.5))

    w, x = np.ones(3), np.arange(12.0).reshape(4, 3) / 10
    first = jt.value_and_grad(loss)
    want = first(w, x)
    again = jt.value_and_grad(loss)                 # the same graph: the same kernel
    got = again(w, x)
    assert sum(f.cache_info().compiles for f in {first, again}) == 1
    np.testing.assert_array_equal(got[1], want[1])
    fortran = again(w, np.asfortranarray(x))
    np.testing.assert_allclose(fortran[1], want[1], rtol=1e-12)
    third = jt.value_and_grad(loss)                 # its first call compiles a layout
    fortran = third(w, np.asfortranarray(x[:, ::-1])[:, ::-1])
    np.testing.assert_allclose(fortran[1], want[1], rtol=1e-12)


def test_a_corrupt_cache_file_is_recovered_from(tmp_path):
    first, _ = _probe(tmp_path)
    modules = list(tmp_path.glob("jittape_generated_*.py"))
    assert len(modules) == 1
    modules[0].write_text("this is not Python (\n")
    for index in tmp_path.glob("__pycache__/*"):
        index.write_bytes(b"garbage")
    second, stderr = _probe(tmp_path)
    assert second["value"] == first["value"] and second["compiles"] == 1
    assert "corrupt" in stderr


def test_an_unwritable_cache_directory_falls_back_with_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(blocker / "cache"))
    f = jt.grad(lambda x: jt.sum(x ** 3))
    with pytest.warns(RuntimeWarning, match="disk cache"):
        g = f(np.arange(3.0))
    np.testing.assert_array_equal(g, 3 * np.arange(3.0) ** 2)


def test_the_disk_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jt.config, "disk_cache", False)
    jt.grad(lambda x: jt.sum(x * 4.0))(np.ones(2))
    assert not (tmp_path / "cache").exists()


# -- kernel() inside the user's own njit code ----------------------------------------------

def test_kernel_runs_inside_a_users_njit_loop(cache_dir):
    def loss(w, x, y):
        return jt.mean((x @ w - y) ** 2)

    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 3))
    y = x @ np.array([1.0, -2.0, 0.5])
    w0 = np.zeros(3)
    f = jt.value_and_grad(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # the kernel's options: nothing to warn of
        kernel = f.kernel(w0, x, y)

    @numba.njit
    def descend(w, x, y, steps, lr):
        for _ in range(steps):
            value, g = kernel(w, x, y)
            w = w - lr * g
        return w, value

    w_njit, value_njit = descend(w0, x, y, 200, 0.1)
    w = w0
    for _ in range(200):
        value, g = f(w, x, y)
        w = w - 0.1 * g
    np.testing.assert_allclose(w_njit, w, rtol=1e-12)
    np.testing.assert_allclose(value_njit, value, rtol=1e-12)
    np.testing.assert_allclose(w, [1.0, -2.0, 0.5], atol=1e-3)


# -- errors at trace time ---------------------------------------------------------------------

def test_integer_argument_to_grad_names_it(cache_dir):
    with pytest.raises(TypeError, match=r"argument 0 has dtype int64"):
        jt.grad(lambda x: jt.sum(x))(np.arange(3))


def test_non_scalar_output_of_grad(cache_dir):
    with pytest.raises(TypeError, match=r"must return a scalar.*shape \(3,\)"):
        jt.grad(lambda x: x * 2)(np.ones(3))


def test_unsupported_argument_type(cache_dir):
    with pytest.raises(jt.UnsupportedError, match="argument 1 holds a value of type object"):
        jt.grad(lambda x, o: jt.sum(x))(np.ones(2), object())


def test_shape_mismatch_names_the_op_the_shapes_and_the_line(cache_dir):
    with pytest.raises(jt.ShapeError, match=rf"add: shapes \(3,\) and \(4,\).*{THIS_FILE}:\d+"):
        jt.grad(lambda x, y: jt.sum(x + y))(np.ones(3), np.ones(4))


def test_python_if_on_a_traced_value_compiles_one_variant_per_branch(cache_dir):
    def f(x):
        if jt.sum(x) > 0:
            return jt.sum(x * x)
        return -jt.sum(x)

    g = jt.grad(f)
    np.testing.assert_allclose(g(np.ones(2)), [2.0, 2.0])
    np.testing.assert_allclose(g(-np.ones(2)), [-1.0, -1.0])
    np.testing.assert_allclose(g(np.full(2, 3.0)), [6.0, 6.0])
    np.testing.assert_allclose(g(np.full(2, -3.0)), [-1.0, -1.0])
    info = g.cache_info()
    assert (info.traces, info.hits) == (2, 2)


def test_unsupported_numpy_function_names_itself_while_tracing(cache_dir):
    with pytest.raises(jt.UnsupportedError, match="numpy.unwrap"):
        jt.grad(lambda x: jt.sum(np.unwrap(x)))(np.ones(4))


def test_run_time_size_mismatch_raises_instead_of_reading_out_of_bounds(cache_dir):
    f = jt.grad(lambda x, y: jt.sum(x * y))
    f(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="broadcast"):
        f(np.ones(3), np.ones(4))


def test_a_view_of_a_view_of_a_row_value_read_after_the_rows_loop(cache_dir):
    # s (a row sum) and its views e, q are read inside the loop over the rows through
    # s; q is read after it too: q, and the view it is made of, are made after the loop
    W = jt.Variable(np.ones((2, 3)))                # a literal width: the row loops share

    def f(x):
        h = x @ W
        s = jt.sum(h, axis=1)
        e = jt.expand_dims(s, 1)
        q = jt.squeeze(e, 1)
        return jt.sum(jt.exp(e) * h) + jt.dot(q, q)

    for n in (2, 5):
        x = np.arange(2.0 * n).reshape(n, 2) / 10
        np.testing.assert_allclose(jt.function(f)(x), f(jt.constant(x)).numpy(), rtol=1e-12)
    assert "# one loop over the rows" in jt.function(f).lower(x).source


def test_a_size_mismatch_names_the_check_that_failed(cache_dir):
    # the kernel tests its sizes in one condition; the message names the op and line of
    # the one that failed, on the fast path and the full one; the kernel called directly
    # raises the check's number (its code holds no line of the user's) and says where
    # to look
    def f(x, y, w):
        return jt.sum((x * y) @ w)

    x, w = np.ones((3, 2)), np.ones((2, 4))
    g = jt.grad(f)
    g(x, x, w)
    for _ in range(2):                              # (the second: the fast path)
        with pytest.raises(jt.errors.SizeMismatch, match=rf"^matmul: .*{THIS_FILE}:\d+"):
            g(x, x, np.ones((3, 4)))
        with pytest.raises(ValueError, match=rf"^multiply: .*{THIS_FILE}:\d+"):
            g(x, np.ones((3, 5)), w)
    kernel = g.kernel(x, x, w)
    with pytest.raises(jt.errors.SizeMismatch, match=r"a call of the compiled function says"):
        kernel(x, np.ones((3, 5)), np.ones((3, 4)))
    np.testing.assert_allclose(g(2 * x, x, w), 4 * x)     # and the right sizes still run


def test_no_numba_traceback_for_a_bad_argnums(cache_dir):
    with pytest.raises(ValueError, match="argnums=2"):
        jt.grad(lambda x: jt.sum(x), argnums=2)(np.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jt.grad(lambda x: jt.sum(x))(np.ones(2))


# -- jacobians and hessians ---------------------------------------------------------------

def test_jacobian_matches_the_tape_for_matrix_outputs_and_several_arguments(cache_dir):
    def f(w, x):
        return jt.tanh(x @ w) * x[:, :1]

    rng = np.random.default_rng(4)
    w, x = rng.normal(size=(3, 2)), rng.normal(size=(4, 3))
    jw, jx = jt.jacobian(f, argnums=(0, 1))(w, x)
    assert jw.shape == (4, 2, 3, 2) and jx.shape == (4, 2, 4, 3)
    W, X = jt.constant(w), jt.constant(x)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch([W, X])
        y = f(W, X)
    np.testing.assert_allclose(jw, tape.jacobian(y, W).numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jx, tape.jacobian(y, X).numpy(), rtol=1e-12, atol=1e-14)


def test_jacobian_serves_every_size_from_one_compile(cache_dir):
    J = jt.jacobian(lambda x: jt.sin(x) * jt.sum(x))
    for n in (2, 5):
        x = np.linspace(0.1, 1, n)
        want = np.diag(np.cos(x) * x.sum()) + np.sin(x)[:, None]
        np.testing.assert_allclose(J(x), want, rtol=1e-12)
    assert J.cache_info().traces == 1
    assert "for v" in J.lower(np.ones(3)).source          # the rows come from one loop


def test_hessian_matches_nested_tapes(cache_dir):
    def f(x):
        return jt.sum(jt.exp(x[:2] * x[1:])) + jt.sum(x ** 3)

    x = np.array([0.3, -0.2, 0.5])
    X = jt.constant(x)
    with jt.GradientTape() as outer:
        outer.watch(X)
        with jt.GradientTape() as inner:
            inner.watch(X)
            y = f(X)
        g = inner.gradient(y, X)
    want = outer.jacobian(g, X).numpy()
    np.testing.assert_allclose(jt.hessian(f)(x), want, rtol=1e-12)


def test_hessian_with_several_arguments_is_nested(cache_dir):
    def f(a, b):
        return jt.sum(a * a * b) + jt.sum(b ** 3)

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (haa, hab), (hba, hbb) = jt.hessian(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(haa, np.diag(2 * b))
    np.testing.assert_allclose(hab, np.diag(2 * a))
    np.testing.assert_allclose(hba, np.diag(2 * a))
    np.testing.assert_allclose(hbb, np.diag(6 * b))


def test_jittape_debug_prints_the_graph_and_the_code(cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("JITTAPE_DEBUG", "2")
    jt.grad(lambda x: jt.sum(jt.exp(x)))(np.ones(2))
    err = capsys.readouterr().err
    assert "exp(x)" in err and "def kernel(x):" in err


def test_concatenate_rows_follow_each_calls_sizes(cache_dir):
    """The parts' row offsets are the call's sizes, not those traced (a regression: an
    offset summed at generation time read a size as the number it had when traced)."""
    f = jt.function(lambda a, b: np.concatenate([a * 1.0, b * 1.0, a * 2.0], axis=0))
    for rows in ((2, 3), (4, 5), (1, 7)):
        a = np.arange(2.0 * rows[0]).reshape(rows[0], 2)
        b = np.full((rows[1], 2), 9.0)
        np.testing.assert_array_equal(f(a, b), np.concatenate([a, b, 2 * a]))
    assert f.cache_info().traces <= 2          # (rows of 1: another signature)


def test_narrow_integers_wrap_as_numpy_does(cache_dir):
    """uint8 and int32 arithmetic wraps at its own width, as NumPy's (a regression: the
    kernel computed them in 64 bits, 2**64 - 1 for a uint8 0 - 1)."""
    def g(x):
        d = x[0] * 2 - np.uint8(1)                   # uint8: 255
        return d.astype(np.float64) + 0.5

    def h(i):
        return (i[0] * np.int32(40000) * np.int32(2)).astype(np.float64)

    with np.errstate(all="ignore"):
        for fn, arg in ((g, np.array([0, 7, 200], np.uint8)),
                        (h, np.array([70000, 3], np.int32))):
            assert jt.function(fn)(arg) == fn(arg)


def test_run_time_size_checks_say_what_the_sizes_are_to_the_op():
    """A check of sizes that only a call knows names the op's own reason: a product's
    inner sizes, a concatenation's other axes (not "cannot be broadcast")."""
    prod = jt.function(lambda a, b: a @ b).lower(np.ones((3, 4)), np.ones((4, 2)))
    assert "matmul: the inner sizes of the product differ: sizes a.shape[1] != b.shape[0]" \
        in prod.source
    cat = jt.function(lambda a, b: jt.concatenate([a, b])).lower(np.ones((3, 4)), np.ones((2, 4)))
    assert "concatenate: the sizes of the other axes differ: sizes" in cat.source
    add = jt.function(lambda a, b: a + b).lower(np.ones((3, 4)), np.ones(4))
    assert "add: operand shapes cannot be broadcast together: sizes" in add.source
