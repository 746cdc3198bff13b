"""Parallel loops of compiled CPU code (``jt.config.parallel``): which loops get a
parallel version, the same bits on one thread and on several, close to the serial
code's results, small calls on the serial path, the switch, and forked children."""

import multiprocessing
import os
import re

import numba
import numpy as np
import pytest

import jittape as jt
from jittape import config
from jittape.codegen import cpu


def chain(x):
    return jt.reduce_sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x))


def rows(x):                      # a reduction along the last axis, per row
    return jt.reduce_sum(jt.log1p(jt.reduce_sum(jt.exp(x) * x, axis=1) ** 2))


def elementwise(x):               # no reduction in the costly loop
    return jt.sigmoid(x) * jt.tanh(x)


@pytest.fixture(autouse=True, scope="module")
def fresh_cache(tmp_path_factory):
    """A disk cache of this module's own: the tests count compiles."""
    mp = pytest.MonkeyPatch()
    mp.setenv("JITTAPE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture
def threads():
    """Run with each of 1 and all of Numba's threads; restores the count."""
    before = numba.get_num_threads()
    yield [1, numba.config.NUMBA_NUM_THREADS]
    numba.set_num_threads(before)


def _source(f, *args):
    return f.lower(*args).source


def test_a_costly_loop_traced_large_gets_a_parallel_version():
    big = np.ones(cpu.PARALLEL_ELEMENTS, np.float32)
    f = jt.value_and_grad(chain)
    src = _source(f, big)
    assert "numba.prange(" in src and f"if x_n >= {cpu.PARALLEL_ELEMENTS} and threads() > 1:" in src
    assert "PARALLEL_OPTIONS = " in src
    cheap = jt.value_and_grad(lambda x: jt.reduce_sum(x * 2.0 + 1.0))
    assert "prange" not in _source(cheap, big)
    small = jt.value_and_grad(chain)      # traced small: no second compile of the loop
    assert small is f                     # (one object per function and options:
    small.cache_clear()                   # forget what it traced large)
    assert "prange" not in _source(small, np.ones(1000, np.float32))


def test_a_parallel_sum_keeps_each_tasks_lanes_on_its_own_stack():
    # a row of a heap array shared by the tasks may alias the arrays the loop writes,
    # and LLVM then runs the loop without its lanes in registers (3x slower on one thread)
    f = jt.value_and_grad(chain)
    f.cache_clear()                   # (traced small by the test above)
    src = _source(f, np.ones(cpu.PARALLEL_ELEMENTS, np.float32))
    task = src[src.index("numba.prange("):]
    task = task[:task.index("\n        for chunk")]         # up to the partials' sum
    assert f"= scratch({cpu.LANES}, " in task
    assert not re.search(r"lanes\d+ = empty\(", src)


@pytest.mark.parametrize("fn, shape, dtype", [
    (chain, (200_003,), np.float32), (chain, (200_003,), np.float64),
    (rows, (3001, 37), np.float32), (elementwise, (70_001,), np.float32)],
    ids=["whole sum", "whole sum float64", "row sums", "elementwise"])
def test_the_same_bits_on_any_number_of_threads(fn, shape, dtype, threads):
    # (on one thread the chunks run in order in the kernel, not as prange tasks)
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    f = jt.value_and_grad(lambda x: jt.reduce_sum(fn(x))) if fn is elementwise else jt.value_and_grad(fn)
    results = []
    for n in threads:
        numba.set_num_threads(n)
        value, grad = f(x)
        results.append((np.asarray(value), np.asarray(grad)))
    for value, grad in results[1:]:
        np.testing.assert_array_equal(value, results[0][0])
        np.testing.assert_array_equal(grad, results[0][1])
    # and the same as the serial code up to float32 rounding of the sums
    config.parallel = False
    try:
        serial = jt.value_and_grad(fn if fn is not elementwise else lambda x: jt.reduce_sum(fn(x)))
        s_value, s_grad = serial(x)
        assert "prange" not in _source(serial, x)
    finally:
        config.parallel = True
    np.testing.assert_allclose(results[0][0], s_value, rtol=1e-5)
    np.testing.assert_allclose(results[0][1], s_grad, rtol=1e-5, atol=1e-6)


def test_small_calls_take_the_serial_loop_with_its_results():
    f = jt.value_and_grad(chain)
    f.cache_clear()                   # (the wrapper of the tests above: trace it anew)
    f(np.ones(cpu.PARALLEL_ELEMENTS, np.float32))          # traced large
    assert "prange" in _source(f, np.ones(cpu.PARALLEL_ELEMENTS, np.float32))
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    config.parallel = False
    try:
        want = jt.value_and_grad(chain)(x)
    finally:
        config.parallel = True
    got = f(x)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    np.testing.assert_array_equal(got[1], want[1])


def test_check_numerics_keeps_loops_serial():
    config.check_numerics = True
    try:
        f = jt.value_and_grad(chain)
        assert "prange" not in _source(f, np.ones(cpu.PARALLEL_ELEMENTS, np.float32))
    finally:
        config.check_numerics = False


def test_the_switch_is_part_of_the_signature():
    f = jt.function(lambda x: jt.reduce_sum(jt.exp(x)))
    x = np.ones(cpu.PARALLEL_ELEMENTS, np.float32)
    f(x)
    config.parallel = False
    try:
        f(x)
    finally:
        config.parallel = True
    f(x)
    assert f.cache_info().compiles == 2


_FORKED = None


def _in_child(_):
    return float(_FORKED(np.ones(cpu.PARALLEL_ELEMENTS * 2, np.float32))), config.parallel


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_serial_kernels_instead_of_hanging():
    """GNU OpenMP stops a forked child at its first parallel loop (and a pool waits for
    it forever): a child of a process that ran parallel code turns parallel off."""
    global _FORKED
    _FORKED = jt.function(lambda x: jt.reduce_sum(jt.exp(x) * jt.tanh(x)))
    x = np.ones(cpu.PARALLEL_ELEMENTS * 2, np.float32)
    want = float(_FORKED(x))                           # parallel code, in this process
    with multiprocessing.get_context("fork").Pool(1) as pool:
        [(value, parallel)] = pool.map_async(_in_child, [0]).get(timeout=240)
    assert value == pytest.approx(want, rel=1e-6)
    assert parallel is (numba.threading_layer() != "omp")
    assert config.parallel                             # this process keeps its threads
