"""The linear algebra that generated kernels call (``ops/lapack.py``'s lowerings).

Numba's ``np.linalg`` (LAPACK through SciPy) compiled into a kernel costs the kernel's
compile seconds for every function it uses, and that code never changes from kernel to
kernel. Each function here runs one of them on one matrix (float32 or float64, any
layout) and is made with ``linkage.external``: compiled once, kept in the helpers'
disk cache, and called by kernels through a symbol (see ``linkage``'s docstring). The
lowerings loop over the batch axes and call them per matrix. Complex matrices (eigh,
eigvalsh, svd, svdvals) have helpers of their own (``*_complex``, complex64 and
complex128), whose eigenvalues and singular values are real.

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


# -- decompositions: eigh, svd, qr, pinv --------------------------------------------------
# Each computes in float64 (NumPy's linalg does so for float32 operands too) and returns
# arrays of the operand's dtype, C-contiguous, and a status last (1: LAPACK did not
# converge). A matrix holding a NaN or inf where the op reads gives NaN results.

@_jit
def _symmetric_from_lower(a):
    """The float64 symmetric matrix whose lower triangle is ``a``'s (what LAPACK's
    syevd reads with UPLO='L'), and whether that triangle is finite."""
    n = a.shape[0]
    s = np.empty((n, n), np.float64)
    finite = True
    for i in range(n):
        for j in range(i + 1):
            v = np.float64(a[i, j])
            if not np.isfinite(v):
                finite = False
            s[i, j] = v
            s[j, i] = v
    return s, finite


@_jit
def _lapack_eigh(a):
    """(eigenvalues ascending, eigenvectors as columns, status) of the symmetric matrix
    read from the lower triangle of ``a`` (syevd, as NumPy's eigh)."""
    n = a.shape[0]
    s, finite = _symmetric_from_lower(a)
    if not finite:
        return _nans((n,), a.dtype), _nans((n, n), a.dtype), 0
    try:
        w, v = np.linalg.eigh(s)
    except Exception:
        return np.zeros(n, a.dtype), np.zeros((n, n), a.dtype), 1
    return w.astype(a.dtype), np.ascontiguousarray(v).astype(a.dtype), 0


@_jit
def _lapack_eigvalsh(a):
    """(eigenvalues ascending, status) of the symmetric matrix read from the lower
    triangle of ``a``."""
    n = a.shape[0]
    s, finite = _symmetric_from_lower(a)
    if not finite:
        return _nans((n,), a.dtype), 0
    try:
        w = np.linalg.eigvalsh(s)
    except Exception:
        return np.zeros(n, a.dtype), 1
    return w.astype(a.dtype), 0


@_jit
def _lapack_svd(a, full_matrices):
    """(u, singular values descending, vh, status) of a matrix (gesdd, as NumPy's svd);
    ``full_matrices``: u and vh square, else of min(m, n) columns and rows."""
    m, n = a.shape
    k = min(m, n)
    um, vn = (m, n) if full_matrices else (k, k)
    if not _finite(a):
        return _nans((m, um), a.dtype), _nans((k,), a.dtype), _nans((vn, n), a.dtype), 0
    try:
        u, s, vh = np.linalg.svd(a.astype(np.float64), full_matrices)
    except Exception:
        return (np.zeros((m, um), a.dtype), np.zeros(k, a.dtype), np.zeros((vn, n), a.dtype),
                1)
    return (np.ascontiguousarray(u).astype(a.dtype), s.astype(a.dtype),
            np.ascontiguousarray(vh).astype(a.dtype), 0)


@_jit
def _lapack_svdvals(a):
    """(singular values descending, status) of a matrix."""
    k = min(a.shape[0], a.shape[1])
    if not _finite(a):
        return _nans((k,), a.dtype), 0
    try:
        s = np.linalg.svd(a.astype(np.float64), False)[1]
    except Exception:
        return np.zeros(k, a.dtype), 1
    return s.astype(a.dtype), 0


@_jit
def _lapack_qr(a, complete):
    """(q, r, status) of a matrix (geqrf and orgqr, as NumPy's qr): q of min(m, n)
    columns, or ``complete``: square. The complete q of a tall matrix is the reduced q
    of the matrix with zero columns appended (their reflectors are the identity), as
    orgqr extends it."""
    m, n = a.shape
    k = min(m, n)
    qn, rm = (m, m) if complete else (k, k)
    if not _finite(a):
        r = _nans((rm, n), a.dtype)
        for i in range(rm):
            for j in range(min(i, n)):
                r[i, j] = 0
        return _nans((m, qn), a.dtype), r, 0
    if complete and m > n:
        wide = np.zeros((m, m), np.float64)
        wide[:, :n] = a
        q, r = np.linalg.qr(wide)
        r = r[:, :n]
    else:
        q, r = np.linalg.qr(a.astype(np.float64))
    return (np.ascontiguousarray(q).astype(a.dtype), np.ascontiguousarray(r).astype(a.dtype),
            0)


@_jit
def _lapack_pinv(a, rcond):
    """(pseudo-inverse, status) of a matrix (its SVD, singular values at most ``rcond``
    times the largest dropped, as NumPy's pinv)."""
    m, n = a.shape
    if not _finite(a):
        return _nans((n, m), a.dtype), 0
    try:
        p = np.linalg.pinv(a.astype(np.float64), rcond)
    except Exception:
        return np.zeros((n, m), a.dtype), 1
    return np.ascontiguousarray(p).astype(a.dtype), 0


# -- complex operands: eigh (Hermitian: zheevd/cheevd's work, done in complex128) and svd
# (zgesdd); eigenvalues and singular values are real, float32 for complex64

@_jit
def _hermitian_from_lower(a, conj):
    """The complex128 Hermitian matrix whose strict lower triangle is ``a``'s (conjugated
    with ``conj``: ``a`` is the transpose of a matrix read from its upper triangle), its
    diagonal the real parts of ``a``'s (what LAPACK's heevd reads); and whether that
    triangle is finite (the diagonal's imaginary parts too, as the eager check reads)."""
    n = a.shape[0]
    s = np.empty((n, n), np.complex128)
    finite = True
    for i in range(n):
        for j in range(i):
            v = np.complex128(a[i, j])
            if conj:
                v = v.conjugate()
            if not (np.isfinite(v.real) and np.isfinite(v.imag)):
                finite = False
            s[i, j] = v
            s[j, i] = v.conjugate()
        d = np.complex128(a[i, i])
        if not (np.isfinite(d.real) and np.isfinite(d.imag)):
            finite = False
        s[i, i] = d.real
    return s, finite


@_jit
def _lapack_eigh_complex(a, conj):
    """(eigenvalues ascending, eigenvectors as columns, status) of the Hermitian matrix
    read from the lower triangle of ``a`` (see ``_hermitian_from_lower``)."""
    n = a.shape[0]
    real = a.real                          # (its dtype: the eigenvalues')
    s, finite = _hermitian_from_lower(a, conj)
    if not finite:
        return _nans((n,), real.dtype), _nans((n, n), a.dtype), 0
    try:
        w, v = np.linalg.eigh(s)
    except Exception:
        return np.zeros(n, real.dtype), np.zeros((n, n), a.dtype), 1
    return w.astype(real.dtype), np.ascontiguousarray(v).astype(a.dtype), 0


@_jit
def _lapack_eigvalsh_complex(a, conj):
    """(eigenvalues ascending, status) of the Hermitian matrix read from the lower
    triangle of ``a``."""
    n = a.shape[0]
    real = a.real
    s, finite = _hermitian_from_lower(a, conj)
    if not finite:
        return _nans((n,), real.dtype), 0
    try:
        w = np.linalg.eigvalsh(s)
    except Exception:
        return np.zeros(n, real.dtype), 1
    return w.astype(real.dtype), 0


@_jit
def _lapack_svd_complex(a, full_matrices):
    """(u, singular values descending, vh, status) of a complex matrix (gesdd)."""
    m, n = a.shape
    k = min(m, n)
    real = a.real
    um, vn = (m, n) if full_matrices else (k, k)
    if not _finite(a):
        return _nans((m, um), a.dtype), _nans((k,), real.dtype), _nans((vn, n), a.dtype), 0
    try:
        u, s, vh = np.linalg.svd(a.astype(np.complex128), full_matrices)
    except Exception:
        return (np.zeros((m, um), a.dtype), np.zeros(k, real.dtype), np.zeros((vn, n), a.dtype),
                1)
    return (np.ascontiguousarray(u).astype(a.dtype), s.astype(real.dtype),
            np.ascontiguousarray(vh).astype(a.dtype), 0)


@_jit
def _lapack_svdvals_complex(a):
    """(singular values descending, status) of a complex matrix."""
    k = min(a.shape[0], a.shape[1])
    real = a.real
    if not _finite(a):
        return _nans((k,), real.dtype), 0
    try:
        s = np.linalg.svd(a.astype(np.complex128), False)[1]
    except Exception:
        return np.zeros(k, real.dtype), 1
    return s.astype(real.dtype), 0


def _with(count, *scalars):
    return {key: sig + scalars for key, sig in _matrices(count).items()}


def _complex_with(*scalars):
    return {str(dt): (types.Array(dt, 2, "A"),) + scalars
            for dt in (types.complex64, types.complex128)}


lapack_eigh = external(_lapack_eigh, "lapack_eigh", _matrices(1), _dtype_key,
                       label="linear algebra (eigh)")
lapack_eigvalsh = external(_lapack_eigvalsh, "lapack_eigvalsh", _matrices(1), _dtype_key,
                           label="linear algebra (eigvalsh)")
lapack_svd = external(_lapack_svd, "lapack_svd", _with(1, types.boolean), _dtype_key,
                      label="linear algebra (svd)")
lapack_svdvals = external(_lapack_svdvals, "lapack_svdvals", _matrices(1), _dtype_key,
                          label="linear algebra (svd)")
lapack_qr = external(_lapack_qr, "lapack_qr", _with(1, types.boolean), _dtype_key,
                     label="linear algebra (qr)")
lapack_pinv = external(_lapack_pinv, "lapack_pinv", _with(1, types.float64), _dtype_key,
                       label="linear algebra (pinv)")
lapack_eigh_complex = external(_lapack_eigh_complex, "lapack_eigh_complex",
                               _complex_with(types.boolean), _dtype_key,
                               label="linear algebra (complex eigh)")
lapack_eigvalsh_complex = external(_lapack_eigvalsh_complex, "lapack_eigvalsh_complex",
                                   _complex_with(types.boolean), _dtype_key,
                                   label="linear algebra (complex eigvalsh)")
lapack_svd_complex = external(_lapack_svd_complex, "lapack_svd_complex",
                              _complex_with(types.boolean), _dtype_key,
                              label="linear algebra (complex svd)")
lapack_svdvals_complex = external(_lapack_svdvals_complex, "lapack_svdvals_complex",
                                  _complex_with(), _dtype_key,
                                  label="linear algebra (complex svd)")
