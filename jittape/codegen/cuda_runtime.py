"""What generated CUDA modules call: device versions of the scalar helpers, the launch
configuration, device buffers kept per signature, staging of arguments, and matrix
products (cuBLAS through CuPy when it is installed, a tiled shared-memory kernel
otherwise).

The scalar helpers (sigmoid, softplus, relu) are ``runtime.make_helpers``'s formulas on
CUDA's math functions, compiled as device functions: the same stable forms as the CPU's
(``mathlib``).
"""

import math
import sys

import numpy as np
from numba import cuda

from . import runtime

def simulator():
    """Whether kernels run in Numba's CUDA simulator (one Python thread per GPU thread:
    small blocks keep tests fast there)."""
    from numba import config
    return bool(config.ENABLE_CUDASIM)


THREADS = 8 if simulator() else 256      # threads per block (elementwise, reductions)
MAX_BLOCKS = 2 if simulator() else 4096   # grid-stride loops cover larger domains
TILE = 2 if simulator() else 16          # the matrix product's tile edge
FEW_ROWS = 4 * THREADS    # fewer rows than this keep too few blocks busy at one thread a
                          # row: a block reduces each row

_device = cuda.jit(device=True, inline=True)
for _name, _fn in zip(runtime.HELPER_NAMES,
                      runtime.make_helpers(np.float32, math.exp, math.log1p, np.maximum, abs)
                      + runtime.make_helpers(np.float64, math.exp, math.log1p, np.maximum, abs)):
    globals()[_name] = _device(_fn)


@_device
def sign(x):
    """np.sign for a real scalar, in its type (zeros and NaN are returned as they are)."""
    if x > 0:
        return x * 0 + 1
    if x < 0:
        return x * 0 - 1
    return x - x                  # +0 for either zero (as NumPy), NaN for NaN


if hasattr(cuda, "cbrt"):          # CUDA's cube root (numba-cuda types no math.cbrt)
    @_device
    def cbrt(x):
        """np.cbrt for a real scalar. (``cuda.cbrt`` is typed where it is read from the
        module, ``cuda.cbrt(x)``: numba-cuda 0.30 could not type the stub bound to a name
        of the generated module, "Untyped global name 'cbrt'", on a GPU.)"""
        return cuda.cbrt(x)
else:                              # the simulator's kernels are plain Python
    @_device
    def cbrt(x):
        """np.cbrt for a real scalar."""
        return math.copysign(abs(x) ** (1.0 / 3.0), x)


def blocks(n):
    """Blocks for a grid-stride loop over ``n`` elements."""
    return max(1, min(MAX_BLOCKS, (int(n) + THREADS - 1) // THREADS))


def available():
    """Raise a clear error unless a GPU (or Numba's CUDA simulator) can run kernels."""
    from ..errors import JittapeError
    try:
        ok = cuda.is_available()
    except Exception:                       # pragma: no cover - a broken driver install
        ok = False
    if not ok:
        raise JittapeError(
            "target='cuda' needs an NVIDIA GPU with its driver and numba-cuda (pip install "
            "numba-cuda), or Numba's CUDA simulator for testing "
            "without one (set NUMBA_ENABLE_CUDASIM=1 before importing jittape)")


def is_device_array(x):
    """Whether ``x`` is a GPU array (Numba, CuPy, PyTorch: ``__cuda_array_interface__``)."""
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def copy_to_host(x):
    """A GPU array's values as a NumPy array."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    return cuda.as_cuda_array(x).copy_to_host()


class Buffers:
    """Device memory of one generated module: per signature of sizes, the buffers of its
    intermediates (made on the first call with those sizes, then reused), staging
    buffers for host arguments, device copies of the constants, and pools of result
    arrays for calls on device arguments."""

    POOL = 4                         # result arrays kept per output

    def __init__(self):
        self.by_sizes = {}
        self.consts = {}
        self.results = {}            # (output slot, shape, dtype) -> [[array, references]]

    def result(self, k, shape, dtype):
        """A device array for output ``k`` that nobody else holds: one this pool made
        earlier whose caller has let go of it (and of every view of it), or a new one.
        An optimisation loop that drops last step's gradient reuses its memory; one
        that keeps its results gets fresh arrays."""
        pool = self.results.get((k, shape, dtype))
        if pool is None:
            pool = self.results[(k, shape, dtype)] = []
        for entry in pool:
            array, count = entry
            if _references(array) == count:
                return array
        array = cuda.device_array(shape, dtype)
        entry = [array, None]
        if len(pool) >= self.POOL:
            pool.pop(0)                  # the caller keeps that one alive if it wants it
        pool.append(entry)
        entry[1] = _references(array)
        return array

    def get(self, sizes, specs):
        """The buffers for ``specs`` [(shape, dtype)], made once per ``sizes``."""
        found = self.by_sizes.get(sizes)
        if found is None:
            found = self.by_sizes[sizes] = [cuda.device_array(shape, dtype) for shape, dtype in specs]
        return found

    def const(self, k, value):
        found = self.consts.get(k)
        if found is None:
            found = self.consts[k] = cuda.to_device(np.ascontiguousarray(value))
        return found


class Errors:
    """The error flag of one generated module: a device array that a kernel finding an
    index out of range writes (which check, counted from 1; the index; the size) into.
    The driver reads it once per call, after its last launch (one small copy, where a
    check after each launch would wait for the GPU each time), and raises the first
    check's error; the flag is cleared for the next call."""

    def __init__(self):
        self.array = None

    def flag(self):
        if self.array is None:
            self.array = cuda.to_device(np.zeros(3, np.int64))
        return self.array

    def check(self, templates):
        found = self.array.copy_to_host()
        if found[0]:
            from ..errors import OutOfRange
            self.array.copy_to_device(np.zeros(3, np.int64))
            raise OutOfRange(templates[int(found[0]) - 1], int(found[1]), int(found[2]))


def stage(x, buf):
    """A host array copied into its staging buffer (device arrays are used as they are)."""
    if is_device_array(x):
        return x
    buf.copy_to_device(np.ascontiguousarray(x))
    return buf


def to_host(x, on_device, buffers, k):
    """A result that is a view of another array: a fresh host array, or (when the
    arguments were on the device) a copy in an array of ``buffers.result``'s pool for
    output ``k``, so that the caller never holds memory a later call overwrites."""
    if on_device:
        out = buffers.result(k, x.shape, x.dtype)
        out.copy_to_device(x)
        return out
    return x.copy_to_host()


def _references(array):
    """How many references the array and its memory have (views hold the memory): the
    same count as when the pool stored it means that nobody outside holds either."""
    memory = getattr(array, "gpu_data", None)          # a Numba device array
    if memory is None:
        memory = getattr(array, "_ary", array)         # the simulator's host array
    owner = getattr(memory, "_mem", None)              # views count on their owner
    return (sys.getrefcount(array), sys.getrefcount(memory), getattr(owner, "refct", 0))


def result(x, on_device, ndim):
    """A result taken from ``Buffers.result`` (on the device) or computed in a buffer
    (copied to a fresh host array; a 0-d result as a NumPy scalar)."""
    if on_device:
        return x.reshape(()) if ndim == 0 else x
    if ndim == 0:
        return x.copy_to_host()[0]
    return x.copy_to_host()


def scalar_result(x, on_device, buffers, k, dtype):
    """A 0-d result held in a one-element device array that is not the result's own (a
    region's output, or a view): a NumPy scalar, or (when the arguments were on the
    device) a copy in a 0-d array of ``buffers.result``'s pool for output ``k``."""
    if on_device:
        out = buffers.result(k, (1,), dtype)
        out.copy_to_device(x.reshape(1))
        return out.reshape(())
    return dtype.type(x.copy_to_host()[0])


# -- matrix products ------------------------------------------------------------------

try:                                                  # pragma: no cover - optional
    import cupy as _cupy
except Exception:                                     # pragma: no cover
    _cupy = None


def _make_matmul(dtype):
    """The tiled matrix-product kernel for one dtype: each block computes a TILE x TILE
    tile of ``c = a @ b``, reading tiles of ``a`` and ``b`` through shared memory."""
    import numba
    zero = dtype.type(0)
    element = numba.from_dtype(dtype)

    @cuda.jit
    def matmul_tiled(a, b, c):
        sa = cuda.shared.array((TILE, TILE), dtype=element)
        sb = cuda.shared.array((TILE, TILE), dtype=element)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        m = a.shape[0]
        k = a.shape[1]
        n = b.shape[1]
        acc = zero
        for t in range((k + TILE - 1) // TILE):
            kk = t * TILE
            sa[ty, tx] = a[row, kk + tx] if (row < m and kk + tx < k) else zero
            sb[ty, tx] = b[kk + ty, col] if (kk + ty < k and col < n) else zero
            cuda.syncthreads()
            for j in range(TILE):
                acc += sa[ty, j] * sb[j, tx]
            cuda.syncthreads()
        if row < m and col < n:
            c[row, col] = acc

    return matmul_tiled


_MATMUL = {}


@cuda.jit
def _matmul_rows(a, b, c):
    """c = a @ b, one output element per step of a grid-stride loop (no shared memory)."""
    n = c.shape[1]
    for f in range(cuda.grid(1), c.shape[0] * n, cuda.gridsize(1)):
        i = f // n
        j = f % n
        acc = a[i, 0] * b[0, j]
        for k in range(1, a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


def matmul2d(a, b, c):
    """c[:] = a @ b (2-D device arrays of one float dtype)."""
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return c
    if k == 0:
        return fill(c, 0)
    if _cupy is not None and not simulator():                     # pragma: no cover
        _cupy.matmul(_cupy.asarray(a), _cupy.asarray(b), out=_cupy.asarray(c))
        return c
    if simulator():                      # few threads: the simulator runs each in Python
        _matmul_rows[blocks(m * n), THREADS](a, b, c)
        return c
    dtype = np.dtype(c.dtype)
    kernel = _MATMUL.get(dtype)
    if kernel is None:
        kernel = _MATMUL[dtype] = _make_matmul(dtype)
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    kernel[grid, (TILE, TILE)](a, b, c)
    return c


@cuda.jit
def _fill(x, value):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        x[i] = value


@cuda.jit
def _copy_row(dst, offset, src):
    for i in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        dst[offset + i] = src[i]


@cuda.jit
def _set_one(x, k):
    x[k] = 1


def copy_row(stack, k, row, size):
    """stack[k] = row (the row a jacobian's k-th reverse sweep computed)."""
    src = row.reshape(int(size)) if hasattr(row, "reshape") else None
    if src is None:                                        # a host scalar
        fill_at(stack.reshape(stack.size), k, row)
        return
    _copy_row[blocks(size), THREADS](stack.reshape(stack.size), k * int(size), src)


@cuda.jit
def _fill_at(x, k, value):
    x[k] = value


def fill_at(x, k, value):
    _fill_at[1, 1](x, k, value)


def onehot(x, k):
    """x = the k-th unit vector of its shape (the seed of a jacobian's k-th sweep)."""
    fill(x, 0)
    _set_one[1, 1](x.reshape(x.size), k)
    return x


def fill(x, value):
    flat = x.reshape(x.size)
    _fill[blocks(x.size), THREADS](flat, value)
    return x


# -- loops: the driver runs a loop's steps, launching the body's kernels each step ------

def host_value(x):
    """A loop's test or a switch's index as a host value: a one-element device array is
    read back (the driver waits for the kernels before it), a host scalar is itself."""
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()[0]
    return x


def device_empty(shape, dtype):
    """A new device array: a while loop's stack of steps, whose size is known only as the
    loop runs."""
    return cuda.device_array(shape, dtype)


def grown(stack, size):
    """``stack`` with room for ``size`` rows, its rows copied (a while loop's stack of
    steps, doubled when full)."""
    out = cuda.device_array((size,) + stack.shape[1:], stack.dtype)
    if stack.size:
        _copy_row[blocks(stack.size), THREADS](out.reshape(out.size), 0,
                                               stack.reshape(stack.size))
    return out

