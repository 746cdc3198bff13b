"""The linear algebra that generated kernels call (``ops/lapack.py``'s lowerings).

Numba's ``np.linalg`` (LAPACK through SciPy) compiled into a kernel costs the kernel's
compile seconds for every function it uses, and that code never changes from kernel to
kernel. Each function here runs one of them on one matrix (float32 or float64, any
layout) and is made with ``linkage.external``: compiled once, kept in the helpers'
disk cache, and called by kernels through a symbol (see ``linkage``'s docstring). The
lowerings loop over the batch axes and call them per matrix.

A matrix that LAPACK cannot factor (a singular one for solve and inv, one that is not
positive definite for cholesky) is not raised here: the helper returns a non-zero
status, and the kernel raises ``LinAlgError`` with its message's number (naming the op
and the user's line, ``Context.message``). The try/except catches Numba's own raise,
whose text names no op.
"""

import numba
import numpy as np
from numba import types

from .linkage import external

LinAlgError = np.linalg.LinAlgError      # (generated code raises it: imported from here)

_jit = numba.njit(cache=True)


@_jit
def _finite(a):
    """Whether every element of ``a`` is finite: Numba's linalg refuses NaN and inf
    (NumPy's LAPACK computes on with them), so the helpers answer NaN themselves."""
    for v in a.ravel():
        if not np.isfinite(v):
            return False
    return True


@_jit
def _nans(shape, dtype):
    out = np.empty(shape, dtype)
    out[...] = np.nan
    return out


@_jit
def _lapack_solve(a, b):
    """(x, status) with ``a @ x = b`` for a square matrix ``a`` and a matrix ``b``
    (LAPACK's gesv, as NumPy's solve); status 1 where ``a`` is singular; all NaN where
    ``a`` or ``b`` holds a NaN or inf."""
    if not (_finite(a) and _finite(b)):
        return _nans((b.shape[0], b.shape[1]), a.dtype), 0
    try:
        x = np.linalg.solve(a, b)
    except Exception:
        return np.zeros((b.shape[0], b.shape[1]), a.dtype), 1
    return np.ascontiguousarray(x), 0


@_jit
def _lapack_inv(a):
    """(inverse, status) of a square matrix: gesv on the identity, as NumPy's inv (so
    that the two round alike); status 1 where ``a`` is singular."""
    n = a.shape[0]
    if not _finite(a):
        return _nans((n, n), a.dtype), 0
    eye = np.zeros((n, n), a.dtype)
    for i in range(n):
        eye[i, i] = 1
    try:
        x = np.linalg.solve(a, eye)
    except Exception:
        return np.zeros((n, n), a.dtype), 1
    return np.ascontiguousarray(x), 0


@_jit
def _lapack_det(a):
    """The determinant of a square matrix (LU, getrf, as NumPy's det); NaN for a matrix
    holding a NaN or inf."""
    if not _finite(a):
        return a.dtype.type(np.nan)
    return np.linalg.det(a)


@_jit
def _lapack_slogdet(a):
    """(sign, log of the absolute determinant) of a square matrix (as NumPy's slogdet:
    (0, -inf) for a singular one; (1, NaN), as NumPy's, for a matrix holding a NaN or
    inf)."""
    if not _finite(a):
        return a.dtype.type(1), a.dtype.type(np.nan)
    return np.linalg.slogdet(a)


@_jit
def _lapack_cholesky(a):
    """(lower Cholesky factor, status) of a matrix, from its lower triangle (potrf, as
    NumPy's cholesky); status 1 where it is not positive definite."""
    n = a.shape[0]
    if not _finite(a):
        return _nans((n, n), a.dtype), 0
    try:
        c = np.linalg.cholesky(a)
    except Exception:
        return np.zeros((n, n), a.dtype), 1
    return np.ascontiguousarray(c), 0


def _dtype_key(a, *rest):
    return str(a.dtype) if isinstance(a, types.Array) else None


def _matrices(count):
    return {str(dt): tuple(types.Array(dt, 2, "A") for _ in range(count))
            for dt in (types.float32, types.float64)}


lapack_solve = external(_lapack_solve, "lapack_solve", _matrices(2), _dtype_key,
                        label="linear algebra (solve)")
lapack_inv = external(_lapack_inv, "lapack_inv", _matrices(1), _dtype_key,
                      label="linear algebra (inv)")
lapack_det = external(_lapack_det, "lapack_det", _matrices(1), _dtype_key,
                      label="linear algebra (det)")
lapack_slogdet = external(_lapack_slogdet, "lapack_slogdet", _matrices(1), _dtype_key,
                          label="linear algebra (slogdet)")
lapack_cholesky = external(_lapack_cholesky, "lapack_cholesky", _matrices(1), _dtype_key,
                           label="linear algebra (cholesky)")
