"""Tiered calls (``jt.config.tiered``): a first call runs the generated module as
Python while its kernel compiles in a background thread; later calls take the kernel.

The background compile waits on a gate that each test opens when it wants the kernel
(``gate``), so what runs where never depends on timing.
"""

import os
import threading

import numpy as np
import pytest

import jittape as jt
from jittape.codegen import build, interpret, python_tier
from jittape.compiler import cache

pytestmark = pytest.mark.usefixtures("cache_dir")     # nothing on disk to load from


@pytest.fixture
def gate(monkeypatch):
    """Tiered calls on; background compiles wait until ``gate.set()``. Records the
    compiles started in ``gate.started``."""
    monkeypatch.setattr(jt.config, "tiered", True)
    monkeypatch.setattr(cache, "_one_core", lambda: False)   # (a core to spare: at once)
    opened = threading.Event()
    opened.started = []
    compile_kernel = build._compile_in_background

    def gated(kernel, argtypes):
        opened.started.append(kernel)
        opened.wait()
        compile_kernel(kernel, argtypes)

    monkeypatch.setattr(build, "_compile_in_background", gated)
    yield opened
    opened.set()
    for kernel in opened.started:
        if kernel.background is not None:
            kernel.background.join()


def _entry(f):
    (variants,) = f._cache.values()
    return variants[0]


def mlp_loss(params, x):
    h = x
    for w in params:
        h = jt.tanh(h @ w)
    return jt.sum(h * h)


def _mlp(dtype=np.float64):
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((8, 8)) * 0.5).astype(dtype) for _ in range(2)]
    return params, rng.standard_normal((5, 8)).astype(dtype)


def _close(a, b, rtol):
    for x, y in zip(jt.tree.flatten(a)[0], jt.tree.flatten(b)[0]):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=0)
        assert np.asarray(x).dtype == np.asarray(y).dtype


def test_first_call_runs_python_later_calls_the_kernel(gate):
    f = jt.value_and_grad(mlp_loss)
    params, x = _mlp()
    first = f(params, x)                     # returns with the compile held at the gate
    assert build.compiling(_entry(f).built)
    second = f(params, x)
    info = f.cache_info()
    assert (info.python_calls, info.compiles, info.hits) == (2, 0, 0)
    assert "__call__" not in type(f).__dict__       # no fast path before the kernel
    gate.set()
    build.wait(_entry(f).built)
    third = f(params, x)                     # the kernel's first call
    fourth = f(params, x)
    info = f.cache_info()
    assert (info.python_calls, info.compiles, info.hits, info.traces) == (2, 1, 1, 1)
    assert "__call__" in type(f).__dict__           # the kernel's fast path
    _close(first, third, 1e-12)
    _close(second, fourth, 1e-12)


def test_cache_info_keeps_its_fields_in_order():
    assert cache.CacheInfo._fields == ("traces", "compiles", "hits", "disk_hits", "misses",
                                       "python_calls")


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_python_tier_equals_the_kernel(gate, dtype, rtol):
    def loss(w, x):
        z = x @ w
        parts = (jt.exp(-z * z), jt.log1p(jt.exp(z)), jt.sigmoid(z), jt.softplus(z),
                 jt.relu(z), jt.tanh(z), jt.log(z * z + 1), jt.expm1(z))
        return sum(jt.sum(p) for p in parts) + jt.max(z)

    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal((6, 4)).astype(dtype)
    f = jt.value_and_grad(loss, argnums=(0, 1))
    tiered = f(w, x)
    assert f.cache_info().python_calls == 1
    gate.set()
    build.wait(_entry(f).built)
    compiled = f(w, x)
    assert f.cache_info().python_calls == 1
    _close(tiered, compiled, rtol)


def test_scan_on_the_python_tier(gate):
    def loss(params, xs):
        wx, wh = params

        def step(h, x):
            h = jt.tanh(x @ wx + h @ wh)
            return h, jt.sum(h * h)
        _, ys = jt.scan(step, np.zeros((3, 4)), xs)
        return jt.sum(ys)

    rng = np.random.default_rng(2)
    params = (rng.standard_normal((2, 4)) * 0.5, rng.standard_normal((4, 4)) * 0.5)
    xs = rng.standard_normal((7, 3, 2))
    f = jt.value_and_grad(loss)
    tiered = f(params, xs)
    gate.set()
    assert f.cache_info().python_calls == 1
    build.wait(_entry(f).built)
    _close(tiered, f(params, xs), 1e-12)


def test_tiered_off_waits_for_the_kernel(gate):
    jt.config.tiered = False                 # (the fixture restores it)
    f = jt.value_and_grad(mlp_loss)
    f(*_mlp())
    info = f.cache_info()
    assert (info.python_calls, info.compiles) == (0, 1)
    assert gate.started == []


def test_errors_are_the_kernels(gate):
    take = jt.function(lambda x, i: x[i] * 2.0)
    x = np.arange(5.0)
    np.testing.assert_array_equal(take(x, np.array([1, 4])), [2.0, 8.0])
    with pytest.raises(jt.errors.OutOfRange, match="index 7 is out of bounds"):
        take(x, np.array([1, 7]))            # raised by the module run as Python
    assert build.compiling(_entry(take).built)

    mul = jt.function(lambda x, y: x * y)
    mul(np.ones((3, 4)), np.ones(4))
    with pytest.raises(jt.errors.SizeMismatch, match="cannot be broadcast together"):
        mul(np.ones((3, 4)), np.ones(5))
    assert mul.cache_info().python_calls == 1


def test_other_errors_of_the_python_tier_wait_for_the_kernel(gate):
    f = jt.grad(mlp_loss)
    params, x = _mlp()
    expected = f(params, x)
    entry = _entry(f)

    def fails(*args):
        raise ZeroDivisionError
    entry.python = fails                     # the kernel decides: here, it succeeds
    gate.set()
    _close(f(params, x), expected, 1e-12)
    assert (f.cache_info().python_calls, f.cache_info().compiles) == (1, 1)


def test_variables_are_written_back(gate):
    total = jt.Variable(np.zeros(3))

    @jt.function
    def accumulate(x, count):
        total.assign_add(x)
        count.assign_add(1.0)
        return jt.sum(total)

    count = jt.Variable(np.float64(0.0))
    x = np.array([1.0, 2.0, 3.0])
    for k in range(1, 3):                    # as Python
        assert float(accumulate(x, count)) == pytest.approx(6.0 * k)
    assert accumulate.cache_info().python_calls == 2
    gate.set()
    build.wait(_entry(accumulate).built)
    assert float(accumulate(x, count)) == pytest.approx(18.0)   # the kernel
    np.testing.assert_allclose(total.numpy(), 3 * x)
    assert float(count.numpy()) == 3.0
    assert accumulate.cache_info().python_calls == 2


def test_guards_choose_the_variant_as_python(gate):
    @jt.function
    def f(x):
        if jt.sum(x) > 0:
            return x * 2.0
        return -x

    np.testing.assert_array_equal(f(np.ones(3)), 2 * np.ones(3))
    np.testing.assert_array_equal(f(-np.ones(3)), np.ones(3))
    np.testing.assert_array_equal(f(np.ones(3)), 2 * np.ones(3))
    info = f.cache_info()
    assert (info.traces, info.python_calls) == (2, 3)


def test_kernel_waits_for_the_background_compile(gate):
    f = jt.value_and_grad(mlp_loss)
    params, x = _mlp()
    value, _ = f(params, x)
    threading.Timer(0.01, gate.set).start()
    kernel = f.kernel(params, x)             # blocks until the gate opens and it compiles
    assert not build.compiling(_entry(f).built)
    assert kernel(*params, x)[0] == pytest.approx(value, rel=1e-12)


def test_kernels_that_load_do_not_tier(gate, monkeypatch):
    jt.config.tiered = False
    f = jt.value_and_grad(mlp_loss)
    f(*_mlp())
    jt.config.tiered = True
    f.cache_clear()
    f(*_mlp())                               # the same kernel, found in the process
    monkeypatch.setattr(build, "_TABLE", {})              # as a new process: on disk
    f.cache_clear()
    f(*_mlp())
    info = f.cache_info()
    assert (info.python_calls, info.compiles, info.disk_hits, info.traces) == (0, 1, 1, 3)
    assert gate.started == []


def test_large_arguments_wait(gate, monkeypatch):
    monkeypatch.setattr(cache, "PYTHON_ELEMENTS", 10)
    monkeypatch.setattr(interpret, "ELEMENTS", 10)
    f = jt.value_and_grad(mlp_loss)
    f(*_mlp())
    info = f.cache_info()
    assert (info.python_calls, info.compiles) == (0, 1)


def test_the_graph_runs_on_numpy_and_the_module_as_python_where_it_cannot(gate, monkeypatch):
    f = jt.value_and_grad(mlp_loss)
    first = f(*_mlp())
    assert isinstance(_entry(f).python, interpret.Run)      # node by node, on NumPy
    monkeypatch.setattr(interpret, "EVALUATIONS", 0)          # as for a record without
    g = jt.value_and_grad(lambda p, x: mlp_loss(p, x) * 1.0)  # an impl: the module
    second = g(*_mlp())
    assert not isinstance(_entry(g).python, interpret.Run)
    assert g.cache_info().python_calls == 1
    _close(first, second, 1e-12)


def test_a_failed_background_compile_compiles_at_the_next_call(gate, monkeypatch):
    def fails(kernel, argtypes):
        gate.wait()
        kernel.error = RuntimeError("no compile")
        kernel.compiling = False
    monkeypatch.setattr(build, "_compile_in_background", fails)
    f = jt.value_and_grad(mlp_loss)
    first = f(*_mlp())
    gate.set()
    build.wait(_entry(f).built)
    assert not _entry(f).built.kernel.called
    second = f(*_mlp())
    info = f.cache_info()
    assert (info.python_calls, info.compiles) == (1, 1)
    _close(first, second, 1e-12)


def test_on_one_core_the_compile_waits_until_the_calls_are_hot(gate, monkeypatch):
    # on one core a compile would take half of it from the calls: it begins once they
    # have run ONE_CORE_HOT seconds on NumPy, so that a short run ends at NumPy's speed
    monkeypatch.setattr(cache, "_one_core", lambda: True)
    monkeypatch.setattr(cache, "ONE_CORE_HOT", 1e9)
    f = jt.value_and_grad(mlp_loss)
    params, x = _mlp()
    first = f(params, x)
    f(params, x)
    assert gate.started == [] and not build.compiling(_entry(f).built)
    assert f.cache_info().python_calls == 2
    monkeypatch.setattr(cache, "ONE_CORE_HOT", 0.0)       # as after enough of them
    f(params, x)
    assert len(gate.started) == 1 and build.compiling(_entry(f).built)
    gate.set()
    build.wait(_entry(f).built)
    _close(f(params, x), first, 1e-12)
    info = f.cache_info()
    assert (info.python_calls, info.compiles) == (3, 1)


def test_one_core_is_the_process_affinity(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert cache._one_core()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert not cache._one_core()
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert not cache._one_core()


def test_threads_share_the_python_tier_and_the_kernel(gate):
    f = jt.value_and_grad(mlp_loss)
    params, x = _mlp()
    results, errors = [], []

    def call():
        try:
            for _ in range(3):
                results.append(f(params, x))
        except Exception as err:             # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert errors == []
    build.wait(_entry(f).built)
    results.append(f(params, x))
    for r in results:
        _close(r, results[0], 1e-12)
    info = f.cache_info()
    assert (info.traces, info.compiles) == (1, 1)
    assert info.python_calls + info.hits <= 13


@pytest.mark.parametrize("ftype", [np.float32, np.float64])
def test_python_math_gives_numpys_special_values(ftype):
    math = python_tier._python_math()
    suffix = "f32" if ftype is np.float32 else "f64"
    values = np.array([0.0, -0.0, 1.0, -1.0, 1000.0, -1000.0, np.inf, -np.inf, np.nan], ftype)
    numpy = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
             "tanh": np.tanh, "relu": lambda v: np.maximum(v, ftype(0)),
             "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "softplus": lambda v: np.logaddexp(v, 0)}
    with np.errstate(all="ignore"):
        for name, fn in numpy.items():
            got = np.array([math[f"{name}_{suffix}"](v) for v in values])
            assert got.dtype == ftype, name
            np.testing.assert_allclose(got, fn(values).astype(ftype), rtol=1e-6, err_msg=name)


def test_stacked_weights_on_the_python_tier(gate):
    """A rolled deep network takes its weights stacked (passes/packing.py) as Python too."""
    rng = np.random.default_rng(2)
    layers = [(rng.standard_normal((4, 4)) * 0.5, rng.standard_normal(4) * 0.1)
              for _ in range(8)]
    x = rng.standard_normal((3, 4))

    def deep(layers, x):
        for w, b in layers:
            x = jt.tanh(x @ w + b)
        return jt.sum(x * x)

    f = jt.value_and_grad(deep)
    assert "passed stacked" in f.lower(layers, x).graph
    tiered = f(layers, x)
    assert f.cache_info().python_calls == 1
    gate.set()
    build.wait(_entry(f).built)
    _close(tiered, f(layers, x), 1e-12)
    assert f.cache_info().python_calls == 1


def test_check_numerics_raises_on_the_tier_too(gate, monkeypatch):
    """With check_numerics, calls made while the kernel compiles raise NumericsError as
    the kernel does (the generated module's checks; the graph on NumPy has none)."""
    monkeypatch.setattr(jt.config, "check_numerics", True)
    f = jt.function(lambda x: jt.log(x) * 2.0)
    with pytest.raises(jt.NumericsError, match="log produced NaN"):
        f(np.array([1.0, -1.0, 2.0]))
    assert not isinstance(_entry(f).python, interpret.Run)
    assert f.lower(np.ones(3)).numpy is None


def test_the_graph_on_numpy_takes_its_inputs_and_constants_only():
    g = jt.function(lambda x: x * np.array([1.0, 2.0, 3.0]) + 1.0)
    lowered = g.lower(np.ones(3))
    np.testing.assert_array_equal(lowered.numpy(np.ones(3))[0], [2.0, 3.0, 4.0])
    with pytest.raises(TypeError, match="takes 1 inputs and 1 array constants"):
        lowered.numpy(np.ones(3), np.zeros(3))


def test_results_on_numpy_never_alias_the_arguments(gate):
    """A region that returns its input (a cond's branch, a while loop that runs no
    step) or a view of an argument: the kernel copies it, and so does the graph on
    NumPy (a regression: the first, tiered call returned the argument itself)."""
    x = np.array([0.5, -0.3, 0.2])
    programs = [lambda x: jt.cond(jt.sum(x) > 0, lambda v: v, lambda v: v * 2, x),
                lambda x: jt.while_loop(lambda c: jt.sum(c) > 10.0, lambda c: c * 2, x),
                lambda x: jt.switch(1, [lambda v: v * 2, lambda v: v[::-1]], x)]
    for program in programs:
        f = jt.function(program)
        first = f(x)                              # on NumPy
        assert f.cache_info().python_calls == 1
        assert not np.shares_memory(first, x)
        np.testing.assert_array_equal(first, program(x))


def test_a_broadcast_view_on_numpy_is_copied(gate):
    """``np.broadcast_to`` on NumPy is a read-only view of the argument; the first,
    tiered call returns a copy, as the kernel does."""
    x = np.array([0.5, -0.3, 0.2])
    f = jt.function(lambda x: np.broadcast_to(x, (2, 3)))
    first = f(x)
    assert f.cache_info().python_calls == 1
    assert not np.shares_memory(first, x) and first.flags.writeable
