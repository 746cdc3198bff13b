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
from numba.extending import overload
from scipy.linalg import cython_lapack
from scipy.linalg import lapack as _scipy_lapack

from .linkage import capsule_symbol, external

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

# LAPACK's syevd and heevd called as NumPy's eigh calls them, with the triangle it reads
# ('L' or 'U'): Numba's np.linalg.eigh reads the lower one only, and the upper one's
# reduction gives other eigenvectors (their signs, and phases). SciPy's, by symbol.
# (geev, for eig, too: Numba's np.linalg.eig refuses a real matrix whose eigenvalues are
# complex)
for _name in ("dsyevd", "zheevd", "dgeev", "zgeev"):
    capsule_symbol(f"jittape.lapack.{_name}", cython_lapack.__pyx_capi__[_name])
_dsyevd = types.ExternalFunction("jittape.lapack.dsyevd", types.void(*[types.voidptr] * 11))
_zheevd = types.ExternalFunction("jittape.lapack.zheevd", types.void(*[types.voidptr] * 13))
_dgeev = types.ExternalFunction("jittape.lapack.dgeev", types.void(*[types.voidptr] * 14))
_zgeev = types.ExternalFunction("jittape.lapack.zgeev", types.void(*[types.voidptr] * 14))


@_jit
def _fortran_copy(a, dtype):
    """A Fortran-ordered copy of the matrix ``a`` in ``dtype`` (what LAPACK reads)."""
    n, m = a.shape
    out = np.empty((m, n), dtype).T
    for j in range(m):
        for i in range(n):
            out[i, j] = a[i, j]
    return out


@_jit
def _triangle_finite(a, upper):
    """Whether the triangle of ``a`` that eigh reads (with the diagonal) is finite."""
    n = a.shape[0]
    for i in range(n):
        for j in range(i, n) if upper else range(i + 1):
            if not np.isfinite(a[i, j]):
                return False
    return True


def _evd_call(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info):
    """syevd (``a`` float64: no ``rwork``) or heevd (complex128) on these arrays. Run as
    Python (NUMBA_DISABLE_JIT=1), SciPy's wrapper of the same routine does the work (it
    sizes its own workspace: the size query answers 1)."""
    if lwork[0] == -1:
        work[0] = rwork[0] = iwork[0] = 1
        info[0] = 0
        return
    routine = _scipy_lapack.dsyevd if a.dtype == np.float64 else _scipy_lapack.zheevd
    values, vectors, info[0] = routine(a, compute_v=int(jobz[0] == 86), lower=int(uplo[0] == 76))
    w[:] = values
    if jobz[0] == 86:
        a[...] = vectors


@overload(_evd_call)
def _evd_call_impl(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork,
                   info):
    if a.dtype == types.float64:
        def impl(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info):
            _dsyevd(jobz.ctypes, uplo.ctypes, n.ctypes, a.ctypes, lda.ctypes, w.ctypes,
                    work.ctypes, lwork.ctypes, iwork.ctypes, liwork.ctypes, info.ctypes)
    else:
        def impl(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info):
            _zheevd(jobz.ctypes, uplo.ctypes, n.ctypes, a.ctypes, lda.ctypes, w.ctypes,
                    work.ctypes, lwork.ctypes, rwork.ctypes, lrwork.ctypes, iwork.ctypes,
                    liwork.ctypes, info.ctypes)
    return impl


@_jit
def _evd(a, vectors, upper):
    """(eigenvalues, LAPACK's info) of the symmetric (Hermitian) matrix read from the
    upper or lower triangle of the float64 (complex128) Fortran-ordered matrix ``a``,
    which ``vectors`` overwrites with the eigenvectors (syevd or heevd, as NumPy's eigh
    with jobz 'V', eigvalsh with 'N')."""
    n = a.shape[0]
    w = np.empty(n, np.float64)
    jobz = np.array([86 if vectors else 78], np.uint8)                # 'V' or 'N'
    uplo = np.array([85 if upper else 76], np.uint8)                  # 'U' or 'L'
    size = np.array([n], np.int32)
    lda = np.array([max(1, n)], np.int32)
    query = np.array([-1], np.int32)
    info = np.zeros(1, np.int32)
    iwork = np.zeros(1, np.int32)
    rwork = np.zeros(1, np.float64)
    work = np.zeros(1, a.dtype)
    for attempt in range(2):          # the workspace's size asked first, then the work
        if attempt:
            lwork = np.array([max(1, int(work[0].real))], np.int32)
            lrwork = np.array([max(1, int(rwork[0]))], np.int32)
            liwork = np.array([max(1, iwork[0])], np.int32)
            work = np.zeros(lwork[0], a.dtype)
            rwork = np.zeros(lrwork[0], np.float64)
            iwork = np.zeros(liwork[0], np.int32)
        else:
            lwork = lrwork = liwork = query
        _evd_call(jobz, uplo, size, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork,
                  info)
        if info[0] != 0:
            break
    return w, info[0]


@_jit
def _lapack_eigh(a, upper):
    """(eigenvalues ascending, eigenvectors as columns, status) of the symmetric matrix
    read from the lower (``upper``: upper) triangle of ``a`` (syevd, as NumPy's eigh)."""
    n = a.shape[0]
    if not _triangle_finite(a, upper):
        return _nans((n,), a.dtype), _nans((n, n), a.dtype), 0
    s = _fortran_copy(a, np.float64)
    w, info = _evd(s, True, upper)
    if info != 0:
        return np.zeros(n, a.dtype), np.zeros((n, n), a.dtype), 1
    return w.astype(a.dtype), np.ascontiguousarray(s).astype(a.dtype), 0


@_jit
def _lapack_eigvalsh(a, upper):
    """(eigenvalues ascending, status) of the symmetric matrix read from the lower
    (``upper``: upper) triangle of ``a``."""
    n = a.shape[0]
    if not _triangle_finite(a, upper):
        return _nans((n,), a.dtype), 0
    w, info = _evd(_fortran_copy(a, np.float64), False, upper)
    if info != 0:
        return np.zeros(n, a.dtype), 1
    return w.astype(a.dtype), 0


def _as_complex_of(x, a):
    """``x`` (complex128) as complex64 where ``a`` is float32 or complex64."""
    return x.astype(np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128)


@overload(_as_complex_of)
def _as_complex_of_impl(x, a):
    target = np.complex64 if a.dtype in (types.float32, types.complex64) else np.complex128
    return lambda x, a: x.astype(target)


def _geev_call(jobvr, n, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info):
    """geev with no left vectors: dgeev (``a`` float64: values in ``wr``, ``wi``) or
    zgeev (complex128: values in ``wr``; ``wi`` unused, ``rwork`` its workspace). As
    Python (NUMBA_DISABLE_JIT=1): SciPy's wrapper of the same routine."""
    if lwork[0] == -1:
        work[0] = 1
        info[0] = 0
        return
    vectors = int(jobvr[0] == 86)
    if a.dtype == np.float64:
        wr[:], wi[:], _, right, info[0] = _scipy_lapack.dgeev(a, compute_vl=0,
                                                              compute_vr=vectors)
    else:
        wr[:], _, right, info[0] = _scipy_lapack.zgeev(a, compute_vl=0, compute_vr=vectors)
    if vectors:
        vr[...] = right


@overload(_geev_call)
def _geev_call_impl(jobvr, n, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info):
    if a.dtype == types.float64:
        def impl(jobvr, n, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info):
            _dgeev(_NO.ctypes, jobvr.ctypes, n.ctypes, a.ctypes, lda.ctypes, wr.ctypes,
                   wi.ctypes, vr.ctypes, _ONE.ctypes, vr.ctypes, ldvr.ctypes, work.ctypes,
                   lwork.ctypes, info.ctypes)
    else:
        def impl(jobvr, n, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info):
            _zgeev(_NO.ctypes, jobvr.ctypes, n.ctypes, a.ctypes, lda.ctypes, wr.ctypes,
                   vr.ctypes, _ONE.ctypes, vr.ctypes, ldvr.ctypes, work.ctypes, lwork.ctypes,
                   rwork.ctypes, info.ctypes)
    return impl


_NO = np.array([78], np.uint8)            # 'N': no left eigenvectors
_ONE = np.array([1], np.int32)            # their leading dimension, unused


@_jit
def _geev(a, vectors):
    """(eigenvalues, right eigenvectors as columns, LAPACK's info) of the float64 or
    complex128 Fortran-ordered matrix ``a`` (overwritten), by geev as NumPy's eig calls
    it (jobvr 'V'; ``vectors`` False: 'N', as eigvals, and no vectors). A real matrix's
    complex pairs are assembled as NumPy assembles them: v_j = x_j + i x_j+1 for the
    value of positive imaginary part, its conjugate for the next."""
    n = a.shape[0]
    jobvr = np.array([86 if vectors else 78], np.uint8)
    size = np.array([n], np.int32)
    lda = np.array([max(1, n)], np.int32)
    ldvr = np.array([max(1, n) if vectors else 1], np.int32)
    wr = np.zeros(n, a.dtype)
    wi = np.zeros(n, np.float64)
    vr = np.zeros((n, n) if vectors else (1, 1), a.dtype).T
    rwork = np.zeros(2 * n, np.float64)
    info = np.zeros(1, np.int32)
    work = np.zeros(1, a.dtype)
    lwork = np.array([-1], np.int32)
    _geev_call(jobvr, size, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info)
    if info[0] == 0:
        lwork[0] = max(1, int(work[0].real))
        work = np.zeros(lwork[0], a.dtype)
        _geev_call(jobvr, size, a, lda, wr, wi, vr, ldvr, work, lwork, rwork, info)
    w = np.empty(n, np.complex128)
    v = np.zeros((n, n) if vectors else (0, 0), np.complex128)
    for j in range(n):
        w[j] = wr[j] + 1j * wi[j]
    if vectors:
        j = 0
        while j < n:
            if wi[j] != 0 and j + 1 < n:
                for i in range(n):
                    v[i, j] = vr[i, j] + 1j * vr[i, j + 1]
                    v[i, j + 1] = vr[i, j] - 1j * vr[i, j + 1]
                j += 2
            else:
                for i in range(n):
                    v[i, j] = vr[i, j]
                j += 1
    return w, v, info[0]


def _geev_copy(a):
    """The Fortran-ordered copy geev works on: float64, complex128 for a complex ``a``."""
    return _fortran_copy(a, np.complex128 if a.dtype.kind == "c" else np.float64)


@overload(_geev_copy)
def _geev_copy_impl(a):
    work = np.complex128 if isinstance(a.dtype, types.Complex) else np.float64
    return lambda a: _fortran_copy(a, work)


@_jit
def _lapack_eig(a, vectors):
    """(eigenvalues, eigenvectors as columns (none without ``vectors``), status) of a
    square matrix, complex (dgeev in float64 for a real one, zgeev in complex128, as
    NumPy's eig); status 1 where LAPACK did not converge; NaN for a matrix holding a NaN
    or inf."""
    n = a.shape[0]
    m = n if vectors else 0
    if not _finite(a):
        return (_as_complex_of(_nans((n,), np.complex128), a),
                _as_complex_of(_nans((m, m), np.complex128), a), 0)
    w, v, info = _geev(_geev_copy(a), vectors)
    if info != 0:
        return (_as_complex_of(np.zeros(n, np.complex128), a),
                _as_complex_of(np.zeros((m, m), np.complex128), a), 1)
    return _as_complex_of(w, a), _as_complex_of(v, a), 0


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
def _lapack_eigh_complex(a, upper):
    """(eigenvalues ascending, eigenvectors as columns, status) of the Hermitian matrix
    read from the lower (``upper``: upper) triangle of ``a`` (heevd, in complex128)."""
    n = a.shape[0]
    real = a.real                          # (its dtype: the eigenvalues')
    if not _triangle_finite(a, upper):
        return _nans((n,), real.dtype), _nans((n, n), a.dtype), 0
    s = _fortran_copy(a, np.complex128)
    w, info = _evd(s, True, upper)
    if info != 0:
        return np.zeros(n, real.dtype), np.zeros((n, n), a.dtype), 1
    return w.astype(real.dtype), np.ascontiguousarray(s).astype(a.dtype), 0


@_jit
def _lapack_eigvalsh_complex(a, upper):
    """(eigenvalues ascending, status) of the Hermitian matrix read from the lower
    (``upper``: upper) triangle of ``a``."""
    n = a.shape[0]
    real = a.real
    if not _triangle_finite(a, upper):
        return _nans((n,), real.dtype), 0
    w, info = _evd(_fortran_copy(a, np.complex128), False, upper)
    if info != 0:
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


lapack_inv = external(_lapack_inv, "lapack_inv", {**_matrices(1), **_complex_with()},
                      _dtype_key, label="linear algebra (inv)")
lapack_eigh = external(_lapack_eigh, "lapack_eigh", _with(1, types.boolean), _dtype_key,
                       label="linear algebra (eigh)")
lapack_eigvalsh = external(_lapack_eigvalsh, "lapack_eigvalsh", _with(1, types.boolean),
                           _dtype_key, label="linear algebra (eigvalsh)")
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
lapack_eig = external(_lapack_eig, "lapack_eig", _with(1, types.boolean), _dtype_key,
                      label="linear algebra (eig)")
lapack_eig_complex = external(_lapack_eig, "lapack_eig_complex",
                              _complex_with(types.boolean), _dtype_key,
                              label="linear algebra (complex eig)")
lapack_svdvals_complex = external(_lapack_svdvals_complex, "lapack_svdvals_complex",
                                  _complex_with(), _dtype_key,
                                  label="linear algebra (complex svd)")
