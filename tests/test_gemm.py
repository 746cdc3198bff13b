"""The packed matrix product of generated CPU code (``codegen/gemm.py``): exact enough
against extended precision for every shape class (full tiles, edge rows and columns,
inner dimensions across several blocks, empty), every layout (C, Fortran, transposed,
negative and odd strides), both float types; deterministic; other dtypes through
``np.dot``; and the micro-kernel's IR."""

import subprocess
import sys

import numba
import numpy as np
import pytest
from llvmlite import binding

from jittape.codegen import gemm
from jittape.codegen.runtime import matmul2d

SHAPES = [(1, 1, 1), (5, 7, 3), (6, 4, 16), (7, 300, 17), (13, 257, 33), (97, 513, 8),
          (256, 784, 128), (12, 1000, 40), (3, 2000, 1)]


def _layouts(a, b):
    yield "C", a, b
    yield "F", np.asfortranarray(a), np.asfortranarray(b)
    yield "transposed", np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    yield "reversed", a[::-1].copy()[::-1], b[:, ::-1].copy()[:, ::-1]
    yield "every other", np.repeat(a, 2, axis=1)[:, ::2], np.repeat(b, 2, axis=0)[::2]
    # b's rows contiguous but stored last to first: its panels packed from a negative stride
    yield "rows reversed", a, b[::-1].copy()[::-1]


def _check(a, b, got):
    exact = a.astype(np.longdouble) @ b.astype(np.longdouble)
    eps = np.finfo(a.dtype).eps
    scale = np.abs(a).astype(np.longdouble) @ np.abs(b).astype(np.longdouble)
    assert got.dtype == a.dtype and got.shape == exact.shape
    # a sum of k products, each term rounded at most twice: k * eps of the absolute sum
    bound = (a.shape[1] + 2) * eps * scale
    assert np.all(np.abs(got - exact) <= bound + np.finfo(a.dtype).tiny)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_matches_extended_precision_in_every_layout(shape, dtype):
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    for name, x, y in _layouts(a, b):
        np.testing.assert_array_equal(x, a)
        got = gemm._gemm(x, y)
        _check(a, b, got)
        assert got.flags.c_contiguous, name


def test_rows_with_strides_that_are_not_whole_elements():
    buf = np.zeros(400, np.uint8)
    a = np.ndarray((5, 6), np.float32, buf, strides=(26, 4))   # 26-byte rows
    a[...] = np.arange(30, dtype=np.float32).reshape(5, 6)
    b = np.linspace(-1, 1, 6 * 20, dtype=np.float32).reshape(6, 20)
    _check(a, b, gemm._gemm(a, b))


@pytest.mark.parametrize("shape", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (0, 0, 0)])
def test_empty_products_are_zeros_of_their_shape(shape):
    m, k, n = shape
    got = gemm._gemm(np.ones((m, k), np.float32), np.ones((k, n), np.float32))
    assert got.shape == (m, n) and got.dtype == np.float32 and not got.any()


def test_results_are_the_same_on_every_call():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((97, 1500)).astype(np.float32)
    b = rng.standard_normal((1500, 37)).astype(np.float32)
    first = gemm._gemm(a, b)
    for _ in range(3):
        np.testing.assert_array_equal(gemm._gemm(a, b), first)


def test_special_values_propagate_like_a_sum():
    a = np.ones((7, 5), np.float64)
    b = np.ones((5, 17), np.float64)
    a[2, 3] = np.nan
    b[1, 4] = np.inf
    got = gemm._gemm(a, b)
    want = a @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isfinite(want)], want[np.isfinite(want)])
    assert np.isinf(got[0, 4])


def test_other_dtypes_go_to_numpy_dot():
    @numba.njit
    def call(a, b):
        return gemm.product(a, b)

    a = (np.arange(12) + 1j).reshape(3, 4)
    b = (np.arange(20) - 2j).reshape(4, 5)
    np.testing.assert_allclose(call(a, b), a @ b)
    x = np.ones((40, 50), np.float32)
    np.testing.assert_array_equal(call(x, x.T), np.full((40, 40), 50, np.float32))


def test_matmul2d_small_and_large_products_and_misaligned_shapes():
    small = matmul2d(np.ones((1, 4)), np.ones((4, 3)))
    np.testing.assert_array_equal(small, np.full((1, 3), 4.0))
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(matmul2d(a, a), np.full((64, 64), 64, np.float32))
    with pytest.raises(ValueError, match="not aligned"):
        matmul2d(np.ones((2, 3)), np.ones((4, 2)))


SMALL_SHAPES = [(1, 1, 8), (4, 32, 32), (8, 32, 32), (8, 16, 32), (32, 8, 32), (13, 5, 19),
                (7, 256, 16), (100, 3, 40), (2, 40, 8)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=["x".join(map(str, s)) for s in SMALL_SHAPES])
def test_small_products_are_the_packed_products_bits_in_every_layout(shape, dtype):
    """``_gemm_small`` reads b in place and tiles the last rows without padding: each
    element is the same sum in the same order as ``_gemm``'s, so the same bits."""
    m, k, n = shape
    rng = np.random.default_rng(m * 100 + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = gemm._gemm(a, b)
    for name, x, y in _layouts(a, b):
        got = gemm._gemm_small(x, y)
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert got.flags.c_contiguous and got.dtype == dtype, name
    _check(a, b, want)


def test_small_products_of_empty_operands():
    for m, k, n in [(0, 3, 8), (3, 0, 8), (3, 4, 0)]:
        got = gemm._gemm_small(np.ones((m, k)), np.ones((k, n)))
        assert got.shape == (m, n) and not got.any()


def test_products_pick_the_small_path_where_b_is_small():
    """The RNN's step products (8 x 32 @ 32 x 32 and its gradients) take the unpacked
    path; it gives what BLAS gives within rounding, fewer rows than a tile included."""
    @numba.njit
    def call(a, b):
        return gemm.product(a, b, False)

    rng = np.random.default_rng(3)
    w = rng.standard_normal((32, 32))
    for a, b in [(rng.standard_normal((8, 32)), w), (rng.standard_normal((8, 32)), w.T),
                 (rng.standard_normal((32, 8)).T.copy().T, rng.standard_normal((8, 32))),
                 (rng.standard_normal((3, 32)), w)]:
        assert a.shape[1] <= gemm.KC and b.size <= gemm.IN_PLACE
        np.testing.assert_array_equal(call(a, b), gemm._gemm_small(a, b))
        np.testing.assert_allclose(call(a, b), a @ b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("fma", [True, False])
def test_the_tile_ir_is_valid_and_vector_wide(bits, fma):
    lanes = gemm.LANES[bits]
    for rows in (None, *range(1, gemm.MR + 1)):       # the packed kernel, the in-place ones
        text = gemm.tile_ir(bits, fma=fma, rows=rows)
        binding.parse_assembly(text).verify()
        assert f"<{lanes} x {'float' if bits == 32 else 'double'}>" in text
        assert ("@llvm.fma" in text.split("declare")[0]) == fma
        # one accumulator a register of the tile: rows x two halves of NR
        assert text.count("= phi <") == 3 * 2 * (rows or gemm.MR)
        # the packed panel's stride is a constant; the in-place kernels take theirs
        assert ("%ldb" in text) == (rows is not None)
    tiles = gemm.tiles_ir(bits)
    binding.parse_assembly(tiles).verify()
    assert all(f"@{gemm.tile_symbol(bits, rows)}(" in tiles for rows in range(1, gemm.MR + 1))


@pytest.mark.parametrize("bits", [32, 64])
def test_the_panel_ir_is_valid_and_copies_by_vectors(bits):
    text = gemm.panel_ir(bits)
    binding.parse_assembly(text).verify()
    vec = f"<{gemm.LANES[bits]} x {'float' if bits == 32 else 'double'}>"
    assert text.count(f"load {vec}") == 2 and text.count(f"store {vec}") == 2


def test_panels_of_b_are_packed_from_rows_in_place_and_from_strided_rows():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((20, 37)).astype(np.float32)
    wide = rng.standard_normal((37, 3 * 16 + 5)).astype(np.float32)   # whole panels, an edge
    for b in (wide, wide[:, ::2], np.asfortranarray(wide), wide[:, 1:], wide[::-1]):
        x = a[:, :b.shape[0]]
        _check(x, b, gemm._gemm(x, b))
        np.testing.assert_array_equal(gemm._gemm_parallel(x, b), gemm._gemm(x, b))


@pytest.mark.parametrize("threads", sorted({1, numba.config.NUMBA_NUM_THREADS}))
def test_threads_share_the_work_and_give_the_same_bits(threads):
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        # the parallel compile orders its tasks by the threads it has now
        assert gemm._several_threads() == (threads > 1)
        rng = np.random.default_rng(11)
        for m, k, n in [(256, 784, 128), (100, 300, 70), (7, 1000, 33)]:
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            serial = gemm._gemm(a, b)
            np.testing.assert_array_equal(gemm._gemm_parallel(a, b), serial)
            np.testing.assert_array_equal(gemm._gemm_parallel(a.T.copy().T, b), serial)
            np.testing.assert_array_equal(gemm._gemm_parallel(a, b[::-1].copy()[::-1]), serial)
    finally:
        numba.set_num_threads(before)


def test_products_large_and_small_on_one_thread_and_on_all():
    @numba.njit
    def call(a, b):
        return gemm.product(a, b)

    big = np.ones((128, 128), np.float32)            # 2^21 multiply-adds
    small = np.ones((32, 32), np.float32)
    assert 128 ** 3 >= gemm.PARALLEL > 32 ** 3
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            np.testing.assert_array_equal(call(big, big), np.full((128, 128), 128, np.float32))
            np.testing.assert_array_equal(call(small, small), np.full((32, 32), 32, np.float32))
    finally:
        numba.set_num_threads(before)


def test_the_parallel_and_plain_compiles_keep_separate_disk_caches():
    assert gemm._gemm.py_func.__qualname__ != gemm._gemm_parallel.py_func.__qualname__
    assert gemm._gemm.py_func.__code__ is gemm._gemm_parallel.py_func.__code__


def test_matmul2d_stays_cacheable_on_disk():
    """Generated kernels link matmul2d: anything in it that Numba cannot keep in its
    disk cache (a runtime address, e.g. from numba.get_num_threads()) would make every
    kernel with a matrix product compile again in each process."""
    a = np.ones((64, 300), np.float32)
    matmul2d(a, a.T)
    matmul2d(np.ones((300, 300)), np.ones((300, 300)))
    for cres in gemm._matmul2d.overloads.values():
        assert not cres.library.has_dynamic_globals


def test_the_thread_count_loads_from_the_disk_cache_in_a_new_process():
    """The parallel product asks the thread pool how many threads it has, through a
    symbol the pool defines: machine code loaded from Numba's cache before the pool is
    up would jump to nothing. Its reload hook starts the pool first."""
    gemm._several_threads()                                     # in Numba's cache now
    code = ("import numba.np.ufunc.parallel as p\n"
            "from jittape.codegen import gemm\n"
            "assert not p._is_initialized\n"
            "print(gemm._several_threads(), sum(gemm._several_threads.stats.cache_hits.values()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    several, hits = proc.stdout.split()
    assert hits == "1" and several == str(numba.config.NUMBA_NUM_THREADS > 1)


@numba.njit
def _result_only(a, b):
    return np.empty((a.shape[0], b.shape[1]), a.dtype)


@numba.njit
def _compiled_product(a, b):       # as kernels call it: the product for arrays of layout A
    return matmul2d(a, b, True)


@pytest.mark.parametrize("order", ["C", "F"])
def test_blas_products_take_ordered_operands_without_copies(order):
    """Skinny products go to BLAS; the product's operands are of layout A, which Numba's
    np.dot would copy every time (the gradient of x @ w for a tall x: 4 MB a step). An
    operand that is C or Fortran ordered is passed as it is: the result is all the
    product allocates."""
    from numba.core.runtime import _nrt_python as memsys, rtsys
    x = np.asarray(np.random.default_rng(3).standard_normal((2000, 50)), np.float32, order=order)
    v = np.ones((2000, 1), np.float32)
    want = x.T @ v
    np.testing.assert_allclose(_compiled_product(x.T, v), want, rtol=1e-4, atol=1e-3)
    _result_only(x.T, v)
    enabled = memsys.memsys_stats_enabled()
    memsys.memsys_enable_stats()
    try:
        def allocations(fn):                # the arguments' wrappers count too
            before = rtsys.get_allocation_stats().alloc
            out = fn(x.T, v)
            return rtsys.get_allocation_stats().alloc - before, out
        baseline, _ = allocations(_result_only)
        count, got = allocations(_compiled_product)
        assert count == baseline
    finally:
        if not enabled:
            memsys.memsys_disable_stats()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    strided = _compiled_product(x[::2].T, v[::2])                 # neither order: copies
    np.testing.assert_allclose(strided, x[::2].T @ v[::2], rtol=1e-4, atol=1e-3)


@numba.njit
def _batched_matrix_vector(x, v):
    out = np.empty((x.shape[0], x.shape[1]), x.dtype)
    for b in range(x.shape[0]):
        out[b] = gemm.dot(x[b, :, :], v)       # a slice of layout A, C ordered
    return out


@numba.njit
def _batched_result_only(x, v):
    return np.empty((x.shape[0], x.shape[1]), x.dtype)


def test_batched_matrix_vector_products_do_not_copy_the_slices():
    from numba.core.runtime import _nrt_python as memsys, rtsys
    x = np.random.default_rng(4).standard_normal((8, 300, 200)).astype(np.float32)
    v = np.ones(200, np.float32)
    np.testing.assert_allclose(_batched_matrix_vector(x, v), x @ v, rtol=1e-4, atol=1e-3)
    _batched_result_only(x, v)
    enabled = memsys.memsys_stats_enabled()
    memsys.memsys_enable_stats()
    try:
        counts = []
        for fn in (_batched_result_only, _batched_matrix_vector):
            before = rtsys.get_allocation_stats().alloc
            fn(x, v)
            counts.append(rtsys.get_allocation_stats().alloc - before)
    finally:
        if not enabled:
            memsys.memsys_disable_stats()
    assert counts[1] == counts[0] + x.shape[0]     # each product's result, no copies


@numba.njit
def _matrix_vector(a, v):          # as kernels call it: operands of layout A
    return gemm.dot(a[:, :], v[:])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_vector_products_in_every_layout(dtype):
    """Rows contiguous (BLAS), columns contiguous with or without gaps between them
    (``matvec_columns``), neither (a copy), one row, one column."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 70)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    for a in (x, x.T, x[:, :50].T, x[::2], x[::2].T, np.asfortranarray(x), x[:1], x[:, :1],
              x[:1].T, x[::-1].T):
        v = rng.standard_normal(a.shape[1]).astype(dtype)
        exact = a.astype(np.float64) @ v.astype(np.float64)
        np.testing.assert_allclose(_matrix_vector(a, v), exact, rtol=tol,
                                   atol=tol * np.abs(exact).max())


def test_the_columns_loop_adds_the_columns_in_order():
    """X.T @ r is a sum over X's rows in their order (the bits a Dask step relies on),
    whatever the gaps between the columns."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((500, 40)).astype(np.float32)
    for a in (x.T, x[:, :30].T):
        r = rng.standard_normal(a.shape[1]).astype(np.float32)
        want = np.zeros(a.shape[0], np.float32)
        for i in range(a.shape[1]):
            want = want + a[:, i] * r[i]
        np.testing.assert_array_equal(_matrix_vector(a, r), want)
