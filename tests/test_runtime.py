"""The array helpers generated CPU code calls (``codegen/runtime.py``), lowered directly
in compiled code, and as plain Python (``f.lower(...).python``): NumPy's results."""

import numba
import numpy as np
import pytest

from jittape.codegen.runtime import (empty, fill, full, natural, reshape, scratch,
                                     threads, zeros)


@numba.njit(cache=False)
def _reshape_rows(a, n):
    return reshape(a, (n, 1))


@numba.njit(cache=False)
def _reshape_2x3(a):
    return reshape(a, (2, 3))


def test_reshape_of_a_c_ordered_array_is_a_view():
    a = np.arange(6.0)
    out = _reshape_rows(a, 6)
    assert out.shape == (6, 1) and out.strides == (8, 8)
    assert _reshape_rows.nopython_signatures[0].return_type.layout == "C"
    out[2, 0] = -1.0
    assert a[2] == -1.0                        # the same memory
    two = _reshape_2x3(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(two, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert two.strides == (12, 4)


def test_reshape_of_other_layouts_copies_when_it_must():
    a = np.arange(12.0)
    every_other = a[::2]                       # layout A, not contiguous
    out = _reshape_2x3(every_other)
    np.testing.assert_array_equal(out, every_other.reshape(2, 3))
    out[0, 0] = 99.0
    assert a[0] == 0.0                         # a copy
    fortran = np.asfortranarray(np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(_reshape_2x3(fortran), fortran.reshape(2, 3))


def test_reshape_to_another_size_raises():
    with pytest.raises(ValueError, match="size"):
        _reshape_rows(np.arange(6.0), 5)


def test_reshape_in_plain_python_is_numpy_s():
    a = np.arange(6.0)
    out = reshape(a, (6, 1))
    assert out.base is a
    np.testing.assert_array_equal(reshape(a[::2], (3, 1)), a[::2].reshape(3, 1))


@numba.njit(cache=False)
def _made(n, m):
    a = empty((n, m), np.float32)
    a[:] = 1.5
    z = zeros((n, m, 2), np.float64)
    f = full(n, 7, np.int32)
    b = full((m, n), True, np.bool_)
    s = full((), 2.5, np.float32)
    return a, z, f, b, s


@pytest.mark.parametrize("n, m", [(3, 4), (0, 5), (1, 1)])
def test_new_arrays_are_numpy_s(n, m):
    a, z, f, b, s = _made(n, m)
    for got, want in [(a, np.full((n, m), 1.5, np.float32)), (z, np.zeros((n, m, 2))),
                      (f, np.full(n, 7, np.int32)), (b, np.ones((m, n), np.bool_)),
                      (s, np.full((), 2.5, np.float32))]:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.c_contiguous and got.flags.owndata is not None
        np.testing.assert_array_equal(got, want)


@numba.njit(cache=False)
def _refill(a, value):
    return fill(a, value)


def test_fill_sets_every_element_and_returns_its_array():
    a = np.arange(12.0).reshape(3, 4)
    out = _refill(a, -2)
    assert out is not None and np.shares_memory(out, a)
    np.testing.assert_array_equal(a, np.full((3, 4), -2.0))
    i = np.zeros(5, np.int64)
    _refill(i, 3.9)                            # cast to the array's dtype, as NumPy does
    np.testing.assert_array_equal(i, np.full(5, 3))


def test_new_arrays_are_freed():
    from numba.core.runtime import _nrt_python as memsys, rtsys
    _made(4, 4)                                # compiled
    enabled = memsys.memsys_stats_enabled()
    memsys.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        for _ in range(10):
            _made(4, 4)
        after = rtsys.get_allocation_stats()
    finally:
        if not enabled:
            memsys.memsys_disable_stats()
    assert after.alloc - before.alloc == after.free - before.free == 50


@numba.njit(cache=False)
def _lane_sums(x, rounds):
    """Sums of x's elements by position mod 8, ``rounds`` times, each in scratch
    accumulators made again in the loop (as a lane reduction inside a loop does)."""
    out = np.empty((rounds, 8))
    for r in range(rounds):
        lanes = scratch(8, np.float64(r), np.float64)
        for i in range(x.shape[0]):
            lanes[i % 8] += x[i]
        for j in range(8):
            out[r, j] = lanes[j]
    return out


@numba.njit(cache=False)
def _out_only(x, rounds):
    return np.empty((rounds, 8))


def _allocations(fn, *args):
    from numba.core.runtime import _nrt_python as memsys, rtsys
    fn(*args)                                  # compiled
    enabled = memsys.memsys_stats_enabled()
    memsys.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        fn(*args)
        after = rtsys.get_allocation_stats()
    finally:
        if not enabled:
            memsys.memsys_disable_stats()
    return after.alloc - before.alloc, after.free - before.free


def test_scratch_is_filled_on_the_stack_and_filled_again_each_time():
    x = np.arange(20.0)
    got = _lane_sums(x, 3)
    want = np.array([[r + x[j::8].sum() for j in range(8)] for r in range(3)])
    np.testing.assert_array_equal(got, want)
    # what a function making ``out`` alone allocates (and its argument's boxing)
    assert _allocations(_lane_sums, x, 3) == _allocations(_out_only, x, 3)
    np.testing.assert_array_equal(scratch(4, 2, np.int32), np.full(4, 2, np.int32))


def test_scratch_needs_a_literal_size():
    @numba.njit(cache=False)
    def runtime_size(n):
        return scratch(n, 0.0, np.float64)
    with pytest.raises(numba.TypingError):
        runtime_size(4)


def test_helpers_in_plain_python():
    assert empty((2, 3), np.float32).shape == (2, 3)
    np.testing.assert_array_equal(zeros(3, np.int8), np.zeros(3, np.int8))
    np.testing.assert_array_equal(full((2,), 4.0, np.float64), [4.0, 4.0])
    a = np.ones(3)
    assert fill(a, 0.5) is a and (a == 0.5).all()


@numba.njit(cache=False)
def _threads():
    return threads()


@numba.njit(cache=False)
def _sum_from(a, lo):
    total = 0.0
    for i in range(lo, a.shape[0]):
        total += a[natural(i)]
    return total


def test_threads_in_a_kernel_is_numbas_count_and_keeps_the_kernel_cacheable():
    before = numba.get_num_threads()
    try:
        assert _threads() == before == threads()
        numba.set_num_threads(1)
        assert _threads() == 1
    finally:
        numba.set_num_threads(before)
    # a symbol, not Numba's get_num_threads and its ctypes pointer: a kernel holding
    # one is not written to Numba's disk cache
    library = _threads.overloads[_threads.signatures[0]].library
    assert not library.has_dynamic_globals


def test_natural_is_its_index():
    a = np.arange(10.0)
    assert _sum_from(a, 3) == a[3:].sum() == sum(a[natural(i)] for i in range(3, 10))
    with pytest.raises(numba.TypingError):         # an index, not a float
        numba.njit(lambda x: natural(x))(1.5)
