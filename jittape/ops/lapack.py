"""Linear algebra of ``np.linalg``: solve, inv, det, slogdet, cholesky, norm, and the
decompositions eig, eigvals, eigh, eigvalsh, svd, qr, pinv, lstsq with what is built of them
(matrix_rank, cond, matrix_power, multi_dot).

Each op works on stacks of matrices (the last two axes), as NumPy's do; ``solve``'s
right-hand side follows NumPy 2: a 1-D ``b`` is a vector, anything else a stack of
matrices, and the leading axes of ``a`` and ``b`` broadcast. float32 operands give
float32, other real dtypes float64 (NumPy's rule).

The eager path is NumPy's own function. A matrix LAPACK cannot factor raises
``np.linalg.LinAlgError`` naming the op and the user's line, eagerly and in compiled
code; a matrix that is not square, or operands whose sizes do not match, raise
``ShapeError`` (at trace time in a compiled function).

Gradients are the standard ones, written with jittape ops so that they differentiate
again: for ``x = solve(a, b)``, ``b`` gets ``solve(a.T, g)`` and ``a`` minus that times
``x.T``; ``inv`` gives ``-A^-T G A^-T``; ``slogdet`` ``inv(A)^T``, ``det`` that times
the determinant (so a singular matrix has no gradient there: inv raises). NumPy's
``cholesky`` reads the lower triangle of ``a`` only, and its gradient is that of the
function it computes: the upper triangle gets zero (the formula of Murray 2016, as
JAX's ``cholesky_jvp``, with the symmetric tangent made from the lower triangle).
Triangular solves are done with ``solve`` for now.

``norm`` is a composition of elementwise ops and reductions: vector norms of any order,
matrix norms ``'fro'``, 1, -1, inf and -inf, and ``'nuc'``, 2 and -2 of the singular
values. The gradient of the 2-norm (and Frobenius norm) at zero is taken as 0, a
subgradient, where the formula would divide 0 by 0.

A decomposition with several results is a primitive per result, as slogdet is, each a
LAPACK call of its own: ``eigh`` (the vectors) and ``eigvalsh``; ``svd`` (U), ``svdvals``
and ``svd_vh``; ``qr`` (Q) and ``qr_r``. The gradient rule of one calls the others' (a
compiled graph computes each once). Their gradients are the standard ones (JAX's
rules): eigenvectors' and singular vectors' need distinct values, and give inf or NaN
for equal ones, as JAX's and PyTorch's; svd's U and Vh of a matrix that is not square
need ``full_matrices=False``, qr's gradient m >= n, else ``UnsupportedError`` when
differentiated. ``pinv`` is a primitive whose gradient is that of a pseudo-inverse of
constant rank (Golub and Pereyra); ``lstsq``'s solution is ``pinv(a) @ b``. A matrix
holding NaN or inf (where the op reads) gives NaN results, eagerly and compiled, where
NumPy's LAPACK raises for some ("SVD did not converge"). ``eig`` and ``eigvals`` give
complex results always (JAX's choice: NumPy's dtype depends on the values), with the
gradient of NumPy's normalized vectors (see the eig section). ``inv``, ``eig``,
``eigvals``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals`` and ``norm`` take complex
matrices (Hermitian ones for eigh, its diagonal's real part read,
as LAPACK's heevd): their rules are the real ones with conjugate transposes, and a
cotangent of complex vectors must not depend on their phases (``_phase_free``). Which of m and n is smaller fixes svd's and qr's
shapes: a compiled function traces again when it changes (``_smaller``).

Compiled, on the CPU only: each op calls a helper of ``codegen/lapack.py`` per matrix,
compiled once and called through a symbol, so that a kernel does not compile LAPACK's
bindings into itself (seconds per kernel).
"""

import collections

import numpy as np

from ..errors import ShapeError, UnsupportedError, at_user_line
from . import elementwise as _ew
from . import linalg as _la
from . import reduce as _rd
from . import shape as _sh
from ..ir import expr_of, is_static
from . import creation as _cr
from .core import (Aval, Primitive, aval_of, broadcast_shapes, composite, ex, numpy_dispatch, pack,
                   public, same_size, shape_of)

CPU_ONLY = ("cpu",)


# -- shape and dtype rules ---------------------------------------------------------------

def _dtype(op, *operands):
    """NumPy's linear algebra dtype: float32 if every operand is, float64 otherwise."""
    dtypes = [np.dtype(o.dtype) if hasattr(o, "dtype") else np.asarray(o).dtype for o in operands]
    for d in dtypes:
        if d.kind not in "biuf":
            raise TypeError(at_user_line(f"{op}: unsupported dtype {d} (real numbers only)"))
    return np.dtype(np.float32) if all(d == np.float32 for d in dtypes) else np.dtype(np.float64)


def _square(op, shape, what="the matrix"):
    """The size of the square matrices of ``shape`` (its last two axes), or a ShapeError."""
    if len(shape) < 2:
        raise ShapeError(at_user_line(
            f"{op}: {what} must have at least two axes (a stack of square matrices), "
            f"got shape {tuple(shape)}"))
    if shape[-1] != shape[-2]:
        raise ShapeError(at_user_line(
            f"{op}: the last two axes of {what} must be square, got shape {tuple(shape)}"))
    same_size(op, shape[-2], shape[-1], "the matrix is not square")
    return shape[-1]


def _solve_abstract(a, b):
    sa, sb = shape_of(a), shape_of(b)
    n = _square("solve", sa, "a")
    if len(sb) == 0:
        raise ShapeError(at_user_line(
            f"solve: b must be a vector or a stack of matrices, got shape {tuple(sb)} "
            f"(a: {tuple(sa)})"))
    rows = sb[0] if len(sb) == 1 else sb[-2]
    if rows != n:
        raise ShapeError(at_user_line(
            f"solve: a of shape {tuple(sa)} and b of shape {tuple(sb)} do not match: "
            f"{n} equations, {rows} rows in b"))
    same_size("solve", n, rows, "a's rows and b's differ")
    if len(sb) == 1:                     # NumPy 2: only a 1-D b is a vector
        shape = tuple(sa[:-1])
    else:
        shape = broadcast_shapes("solve", sa[:-2], sb[:-2]) + (n, sb[-1])
    return Aval(shape, _dtype("solve", a, b))


def _matrix_abstract(op, result, complex=False):
    """The rule of an op of one stack of square matrices; ``result(shape)`` its shape;
    ``complex``: a complex operand gives its complex dtype (complex64 stays)."""
    def abstract(a):
        shape = shape_of(a)
        _square(op, shape)
        dtype = _dtype_of(a)
        if complex and dtype.kind == "c":
            return Aval(result(tuple(shape)), np.dtype(
                np.complex64 if dtype == np.complex64 else np.complex128))
        return Aval(result(tuple(shape)), _dtype(op, a))
    return abstract


class _LinalgPrimitive(Primitive):
    """A primitive whose NumPy failure may be a ``LinAlgError`` (a ValueError that is not
    about shapes): raised as that, naming the op and the user's line."""

    def explain(self, args, params, err):
        if not isinstance(err, np.linalg.LinAlgError):
            return super().explain(args, params, err)
        avals = [aval_of(a) for a in args]
        try:
            self.abstract(*avals, **params)
        except ShapeError as shape_err:
            return shape_err
        shapes = ", ".join(f"{a.dtype} {a.shape}" for a in avals if isinstance(a, Aval))
        return np.linalg.LinAlgError(at_user_line(f"{self.name}: {err} (operands: {shapes})"))


# -- helpers of the rules: matrices as jittape ops ----------------------------------------

def _ndim(x):
    return len(shape_of(x)) if hasattr(x, "shape") else np.ndim(x)


def _t(x):
    """The matrices of a stack transposed."""
    return _sh.swapaxes(x, -1, -2)


def _h(x):
    """The matrices of a stack conjugate-transposed (transposed, for real ones)."""
    return _ew.conj_of(_sh.swapaxes(x, -1, -2))


def _column(v):
    """(..., n) -> (..., n, 1)."""
    return _sh.expand_dims(v, _ndim(v))


def _uncolumn(m):
    """(..., n, 1) -> (..., n)."""
    return _sh.squeeze(m, _ndim(m) - 1)


def _per_matrix(x):
    """A value per matrix (shape ``(...)``) with two unit axes, to multiply a stack."""
    return _sh.reshape(x, tuple(shape_of(x)) + (1, 1))


def _trace_of_product(p, t):
    """sum over the last two axes of p * t: trace(p^T t) per matrix."""
    n = _ndim(t)
    return _rd.sum(_ew.multiply(p, t), axis=(n - 2, n - 1))


# -- solve ---------------------------------------------------------------------------------

def _solve_adjoint(g, a, b):
    """solve(a^T, g): the cotangent of b before its broadcast axes are summed."""
    if _ndim(b) == 1 and _ndim(g) > 1:
        return _uncolumn(_solve.bind(_t(a), _column(g)))
    return _solve.bind(_t(a), g)


def _solve_vjp_a(g, out, a, b):
    gb = _solve_adjoint(g, a, b)
    if _ndim(b) == 1:          # an outer product per matrix
        ga = _la.matmul(_column(gb), _sh.expand_dims(out, _ndim(out) - 1))
    else:
        ga = _la.matmul(gb, _t(out))
    return _ew.unbroadcast(_ew.negative(ga), a.shape)


def _solve_vjp_b(g, out, a, b):
    return _ew.unbroadcast(_solve_adjoint(g, a, b), b.shape)


def _solve_jvp_a(t, out, a, b):
    # d x = -a^-1 (da x)
    if _ndim(b) == 1:
        return _ew.negative(_uncolumn(_solve.bind(a, _la.matmul(t, _column(out)))))
    return _ew.negative(_solve.bind(a, _la.matmul(t, out)))


def _solve_jvp_b(t, out, a, b):
    return _solve.bind(a, t)


# Matrices that LAPACK factors well from any draw of the tests: diagonally dominant, the
# diagonal in [2.5, 3.5] and the rest in [-0.5, 0.5] (a domain per element)
def _dominant(n):
    eye = np.eye(n)
    return (3.0 * eye - 0.5, 3.0 * eye + 0.5)


def _well_posed(n, *others):
    """The domain of examples whose first operand is an n-by-n matrix."""
    return (_dominant(n),) + tuple(others)


_solve = _LinalgPrimitive(
    "solve", np.linalg.solve, abstract=_solve_abstract,
    vjp=[_solve_vjp_a, _solve_vjp_b], jvp=[_solve_jvp_a, _solve_jvp_b],
    examples=[ex((3, 3), (3,), domain=_well_posed(3, (-2.0, 2.0))),
              ex((3, 3), (3, 2), domain=_well_posed(3, (-2.0, 2.0))),
              ex((2, 3, 3), (3,), domain=_well_posed(3, (-2.0, 2.0))),
              ex((2, 3, 3), (2, 3, 1), domain=_well_posed(3, (-2.0, 2.0))),
              ex((3, 3), (2, 3, 2), domain=_well_posed(3, (-2.0, 2.0))),
              ex((2, 1, 2, 2), (3, 2, 2), domain=_well_posed(2, (-2.0, 2.0)))],
    kind="opaque", backends=CPU_ONLY)


@numpy_dispatch(np.linalg.solve)
def solve(a, b):
    """x with ``a @ x = b``: ``a`` of shape (..., n, n); ``b`` of shape (n,) (a vector) or
    (..., n, k) (NumPy 2's rule), leading axes broadcast. Raises ``np.linalg.LinAlgError``
    for a singular ``a``."""
    return _solve.bind(a, b)


# -- inv -----------------------------------------------------------------------------------

def _inv_vjp(g, out, a):
    xh = _h(out)
    return _ew.negative(_la.matmul(xh, _la.matmul(g, xh)))


def _inv_jvp(t, out, a):
    return _ew.negative(_la.matmul(out, _la.matmul(t, out)))


_inv = _LinalgPrimitive(
    "inv", np.linalg.inv, abstract=_matrix_abstract("inv", lambda s: s, complex=True),
    vjp=[_inv_vjp], jvp=[_inv_jvp], save=(False, True),
    examples=[ex((3, 3), domain=_well_posed(3)), ex((2, 4, 4), domain=_well_posed(4)),
              ex((1, 1), domain=_well_posed(1))],
    kind="opaque", backends=CPU_ONLY, complex=True)


@numpy_dispatch(np.linalg.inv)
def inv(a):
    """The inverse of each matrix of ``a`` (..., n, n). Raises ``np.linalg.LinAlgError``
    for a singular matrix."""
    return _inv.bind(a)


# -- det and slogdet ----------------------------------------------------------------------

def _det_vjp(g, out, a):
    return _ew.multiply(_per_matrix(_ew.multiply(g, out)), _t(_inv.bind(a)))


def _det_jvp(t, out, a):
    return _ew.multiply(out, _trace_of_product(_t(_inv.bind(a)), t))


_det = _LinalgPrimitive(
    "det", np.linalg.det, abstract=_matrix_abstract("det", lambda s: s[:-2]),
    vjp=[_det_vjp], jvp=[_det_jvp],
    examples=[ex((3, 3), domain=_well_posed(3)), ex((2, 2, 2), domain=_well_posed(2))],
    kind="opaque", backends=CPU_ONLY)


@numpy_dispatch(np.linalg.det)
def det(a):
    """The determinant of each matrix of ``a`` (..., n, n)."""
    return _det.bind(a)


def _logabsdet_vjp(g, out, a):
    return _ew.multiply(_per_matrix(g), _t(_inv.bind(a)))


def _logabsdet_jvp(t, out, a):
    return _trace_of_product(_t(_inv.bind(a)), t)


_slogdet_sign = _LinalgPrimitive(
    "slogdet_sign", lambda a: np.linalg.slogdet(a)[0],
    abstract=_matrix_abstract("slogdet", lambda s: s[:-2]), differentiable=False,
    examples=[ex((3, 3)), ex((2, 2, 2))], kind="opaque", backends=CPU_ONLY)
_logabsdet = _LinalgPrimitive(
    "logabsdet", lambda a: np.linalg.slogdet(a)[1],
    abstract=_matrix_abstract("slogdet", lambda s: s[:-2]),
    vjp=[_logabsdet_vjp], jvp=[_logabsdet_jvp], save=(True, False),
    examples=[ex((3, 3), domain=_well_posed(3)), ex((2, 2, 2), domain=_well_posed(2)),
              ex((3, 3), domain=(tuple(-x for x in reversed(_dominant(3))),))],
    kind="opaque", backends=CPU_ONLY)

SlogdetResult = collections.namedtuple("SlogdetResult", "sign logabsdet")
SlogdetResult.__doc__ = "(sign, logabsdet) of ``slogdet``, as NumPy's result names them."


@numpy_dispatch(np.linalg.slogdet)
def slogdet(a):
    """(sign, log of the absolute determinant) of each matrix of ``a`` (..., n, n): a
    pair of tensors (``SlogdetResult``). The sign has no gradient; a singular matrix
    gives (0, -inf)."""
    return SlogdetResult(_slogdet_sign.bind(a), _logabsdet.bind(a))


# -- cholesky ------------------------------------------------------------------------------

def _triangle_abstract(x, diagonal):
    shape = shape_of(x)
    if len(shape) < 2:
        raise ShapeError(at_user_line(
            f"triangle: needs at least two axes, got shape {tuple(shape)}"))
    return Aval(shape, x.dtype)


def _triangle_impl(x, diagonal):
    n, m = x.shape[-2:]
    mask = (np.tri(n, m, -1, dtype=x.dtype)
            + np.asarray(diagonal, x.dtype) * np.eye(n, m, dtype=x.dtype))
    return (x * mask).astype(x.dtype, copy=False)


# The lower triangle of the last two axes, its diagonal times ``diagonal`` (1: tril, 0.5:
# the Phi of the Cholesky derivative, 0: the strict lower triangle). Linear: its VJP and
# JVP are itself.
_triangle = Primitive(
    "triangle", _triangle_impl, abstract=_triangle_abstract,
    vjp=[lambda g, out, x, diagonal: _triangle.bind(g, diagonal=diagonal)],
    jvp=[lambda t, out, x, diagonal: _triangle.bind(t, diagonal=diagonal)],
    save=(False, False),
    examples=[ex((3, 3), diagonal=1.0), ex((2, 3, 4), diagonal=0.5), ex((4, 2), diagonal=0.0)],
    kind="opaque", backends=CPU_ONLY, public=False, complex=True)


def _lower_solve(l, x):
    """l^-1 x for a lower triangular l (a general solve for now)."""
    return _solve.bind(l, x)


def _right_lower_solve(x, l):
    """x l^-1 for a lower triangular l."""
    return _t(_solve.bind(_t(l), _t(x)))


def _cholesky_jvp(t, out, a):
    # the symmetric tangent whose lower triangle is t's (cholesky reads only that)
    s = _ew.add(_triangle.bind(t, diagonal=1.0), _t(_triangle.bind(t, diagonal=0.0)))
    p = _t(_lower_solve(out, _t(_lower_solve(out, s))))      # L^-1 S L^-T
    return _la.matmul(out, _triangle.bind(p, diagonal=0.5))


def _cholesky_vjp(g, out, a):
    m = _triangle.bind(_la.matmul(_t(out), g), diagonal=0.5)  # Phi(L^T G)
    s = _right_lower_solve(_solve.bind(_t(out), m), out)      # L^-T M L^-1
    # the symmetric tangent's transpose: the lower triangle of s + s^T, the diagonal once
    return _ew.add(_triangle.bind(s, diagonal=1.0), _triangle.bind(_t(s), diagonal=0.0))


_cholesky = _LinalgPrimitive(
    "cholesky", np.linalg.cholesky, abstract=_matrix_abstract("cholesky", lambda s: s),
    vjp=[_cholesky_vjp], jvp=[_cholesky_jvp], save=(False, True),
    examples=[ex((3, 3), domain=_well_posed(3)), ex((2, 4, 4), domain=_well_posed(4))],
    kind="opaque", backends=CPU_ONLY)


@numpy_dispatch(np.linalg.cholesky)
def cholesky(a, upper=False):
    """The Cholesky factor of each matrix of ``a`` (..., n, n), from its lower triangle:
    lower (``upper=True``: its transpose). Raises ``np.linalg.LinAlgError`` for a matrix
    that is not positive definite."""
    factor = _cholesky.bind(a)
    return _t(factor) if upper else factor


# -- norm ---------------------------------------------------------------------------------

def _two_norm(x, axis, keepdims):
    """sqrt(sum(x**2)), its gradient 0 at zero: the square root reads 1 where the sum is
    0 (the other branch of the where), so no 0/0 reaches the gradient."""
    s = _rd.sum(_ew.multiply(x, x), axis=axis, keepdims=keepdims)
    positive = _ew.greater(s, 0)
    return _ew.where(positive, _ew.sqrt(_ew.where(positive, s, 1)), 0)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return _two_norm(x, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(at_user_line(f"norm: invalid norm order {ord!r} for vectors"))
    absx = _ew.abs(x)
    if ord == np.inf:
        return _rd.max(absx, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return _rd.min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _rd.sum(_ew.cast(_ew.not_equal(x, 0), _dtype_of(x)), axis=axis, keepdims=keepdims)
    if ord == 1:
        return _rd.sum(absx, axis=axis, keepdims=keepdims)
    p = float(ord)
    return _ew.power(_rd.sum(_ew.power(absx, p), axis=axis, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        out = _two_norm(x, (row, col), False)
    elif ord in (1, -1, np.inf, -np.inf) and not isinstance(ord, str):
        pick = _rd.max if ord > 0 else _rd.min
        if ord in (1, -1):               # the largest (smallest) column sum
            if col > row:
                col -= 1
            out = pick(_rd.sum(_ew.abs(x), axis=row), axis=col)
        else:                            # the largest (smallest) row sum
            if row > col:
                row -= 1
            out = pick(_rd.sum(_ew.abs(x), axis=col), axis=row)
    elif ord in ("nuc", 2, -2):
        n = _ndim(x)
        s = _svdvals.bind(_sh.moveaxis(x, (row, col), (n - 2, n - 1)))
        out = {"nuc": _rd.sum, 2: _rd.max, -2: _rd.min}[ord](s, axis=-1)
    else:
        raise ValueError(at_user_line(f"norm: invalid norm order {ord!r} for matrices"))
    if keepdims:
        shape = list(shape_of(x))
        shape[axes[0]] = 1
        shape[axes[1]] = 1
        out = _sh.reshape(out, tuple(shape))
    return out


def _dtype_of(x):
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


@composite(examples=[ex((5,)), ex((3, 4)), ex((2, 3), axis=1), ex((2, 3), axis=0, ord=1),
                     ex((3, 4), ord=np.inf, axis=1), ex((4,), ord=-np.inf), ex((4,), ord=3),
                     ex((2, 3, 4), axis=(2, 0), ord="fro", keepdims=True),
                     ex((3, 4), ord=1), ex((3, 4), ord=-np.inf), ex((2, 3, 4), axis=(0, 2), ord=-1),
                     ex((2, 3), keepdims=True)],
           numpy=(np.linalg.norm,))
def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's ``np.linalg.norm``: vector norms (``ord`` None, 2, 1, inf, -inf, 0 or any
    p) along one axis, matrix norms (None/'fro', 1, -1, inf, -inf) over two; with
    ``axis=None`` the 2-norm of all elements (``ord=None``), or the vector or matrix norm
    of a 1-D or 2-D ``x``. The gradient of the 2-norm at zero is 0."""
    x = pack(x)               # (a list of tensors: their stack, as NumPy's array of it)
    dtype = _dtype_of(x)
    if dtype.kind not in "fc":
        x = _ew.cast(x, np.float64)
    ndim = _ndim(x)
    # complex: every norm but the spectral ones (2, -2, 'nuc' of matrices, from the
    # singular values of the complex matrix) is the norm of the magnitudes, as NumPy's
    magnitudes = _ew.abs if dtype.kind == "c" else (lambda v: v)
    if axis is None:
        if ord is None:
            return _two_norm(magnitudes(x), tuple(range(ndim)), keepdims)
        if ndim not in (1, 2):
            raise ValueError(at_user_line(
                f"norm: ord={ord!r} with axis=None needs a 1-D or 2-D operand, got rank {ndim}"))
        axis = tuple(range(ndim))
    elif isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    else:
        axis = tuple(int(a) for a in axis)
    for a in axis:
        if not -ndim <= a < ndim:
            raise ShapeError(at_user_line(f"norm: axis {a} is out of bounds for rank {ndim}"))
    axis = tuple(a % ndim for a in axis)
    if len(axis) == 1:
        return _vector_norm(magnitudes(x), ord, axis, keepdims)
    if len(axis) == 2:
        if axis[0] == axis[1]:
            raise ValueError(at_user_line(f"norm: duplicate axes given ({axis})"))
        spectral = isinstance(ord, str) and ord == "nuc" or ord in (2, -2)
        return _matrix_norm(x if spectral else magnitudes(x), ord, axis, keepdims)
    raise ValueError(at_user_line(f"norm: improper number of axes ({len(axis)}) to norm"))


# -- decompositions: eigh, svd, qr, pinv --------------------------------------------------

def _rows_cols(op, shape):
    """(rows, columns) of the matrices of ``shape`` (its last two axes), or a ShapeError."""
    if len(shape) < 2:
        raise ShapeError(at_user_line(
            f"{op}: the operand must have at least two axes (a stack of matrices), got shape "
            f"{tuple(shape)}"))
    return shape[-2], shape[-1]


def _smaller(m, n):
    """min(m, n): the size of the singular values, of qr's reduced factors. Which of the
    two is smaller fixes the results' shapes and the gradient's formula, so a traced
    function whose matrices may turn the other way at run time is keyed on the exact
    sizes (it traces again for others)."""
    if expr_of(m) == expr_of(n):
        return m
    if not (is_static(m) and is_static(n)):
        _sh.exact_sizes()
    return min(m, n)


def _decomposition_abstract(op, result, square=False, real=False):
    """The rule of an op of a stack of matrices: ``result(m, n, **params)`` the shape of
    one matrix's result. A complex operand (eigh, svd) gives complex128 results, or
    complex64 for complex64, as NumPy's; ``real``: the result is real (eigenvalues of a
    Hermitian matrix, singular values), float32 for complex64."""
    def abstract(a, **params):
        shape = tuple(shape_of(a))
        if square:
            _square(op, shape)
        m, n = _rows_cols(op, shape)
        dtype = np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype
        if dtype.kind == "c":
            dtype = np.dtype(np.complex64 if dtype == np.complex64 else np.complex128)
            if real:
                dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
        else:
            dtype = _dtype(op, a)
        return Aval(shape[:-2] + tuple(result(m, n, **params)), dtype)
    return abstract


def _phase_free(op, what, x, scale):
    """The cotangent of complex eigenvectors or singular vectors is defined only for a
    loss that does not depend on their phases (each is LAPACK's up to a factor e^(i phi)):
    then the imaginary parts of the diagonal of V^H g (``x``) are zero. A loss that reads
    the phases (or a compiled function, where the values are not known while the rule is
    traced) raises UnsupportedError instead of giving a gradient of another phase
    convention than LAPACK's."""
    value = getattr(x, "_value", None)
    if value is None:
        raise UnsupportedError(at_user_line(
            f"{op}: the gradient through complex {what} ({x.dtype} {tuple(shape_of(x))}) is "
            "computed eagerly only (it checks that the loss does not depend on their "
            "phases, which are arbitrary); use a GradientTape, or differentiate through "
            "the eigenvalues or singular values"))
    value = np.asarray(value)
    d = np.abs(np.diagonal(value, axis1=-2, axis2=-1).imag)
    bound = 100 * np.sqrt(np.finfo(value.dtype).eps) * (np.max(np.abs(value), initial=0) + scale)
    if d.size and np.max(d) > bound:
        raise UnsupportedError(at_user_line(
            f"{op}: the loss depends on the phases of the complex {what} ({value.dtype} "
            f"{value.shape}; each is defined "
            "up to a factor e^(i phi), and LAPACK's choice has no derivative formula); "
            "make the loss invariant to them (abs(v), v @ v^H, ...)"))



def _guarded(f, a, read=None, fill=None):
    """``f(a)`` of a stack of matrices (one result or a tuple), NaN for each matrix holding
    a NaN or inf in the part ``f`` reads (``read(a)``): NumPy's LAPACK raises there ("did
    not converge") or gives numbers. ``fill(result)``: what such a matrix's result is,
    NaN everywhere unless given."""
    bad = ~np.isfinite(a if read is None else read(a)).all(axis=(-2, -1))
    if not bad.any():
        return f(a)
    a = np.array(a, copy=True)
    a[bad] = 0                            # a zero matrix: every decomposition converges
    out = f(a)
    for r in out if isinstance(out, tuple) else (out,):
        r[bad] = np.nan if fill is None else fill(r[bad])
    return out


def _eye_like(x):
    """The identity matrices of the shape of ``x``'s (a stack of square matrices): its
    sizes are run-time sizes, as ``x``'s."""
    ones = _cr.full_like(x, 1)
    return _ew.subtract(_triangle.bind(ones, diagonal=1.0), _triangle.bind(ones, diagonal=0.0))


def _row(v):
    """(..., n) -> (..., 1, n)."""
    return _sh.expand_dims(v, _ndim(v) - 1)


def _gaps_reciprocal(w):
    """F with F[i, j] = 1 / (w[j] - w[i]) off the diagonal and 0 on it (of each stack
    member): inf where two values are equal (a degenerate gradient, as JAX's and
    PyTorch's)."""
    d = _ew.subtract(_row(w), _column(w))
    eye = _eye_like(d)
    return _ew.subtract(_ew.reciprocal(_ew.add(d, eye)), eye)


def _mm(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = _la.matmul(out, x)
    return out


def _check_uplo(op, UPLO):
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise ValueError(at_user_line(f"{op}: UPLO argument must be 'L' or 'U', got {UPLO!r}"))
    return UPLO.upper()


def _read_triangle(UPLO):
    """The part of a matrix that eigh reads: its lower (or upper) triangle."""
    return np.triu if UPLO == "U" else np.tril


def _eigvalsh_impl(a, UPLO):
    return _guarded(lambda x: np.linalg.eigvalsh(x, UPLO), a, _read_triangle(UPLO))


def _eigh_vectors_impl(a, UPLO):
    return _guarded(lambda x: np.linalg.eigh(x, UPLO)[1], a, _read_triangle(UPLO))


def _real_diagonal(x):
    """The diagonal matrices of the real parts of ``x``'s diagonals (LAPACK reads only
    the real part of a Hermitian matrix's diagonal)."""
    return _ew.real(_ew.subtract(_triangle.bind(x, diagonal=1.0), _triangle.bind(x, diagonal=0.0)))


def _symmetric_tangent(t, UPLO):
    """The symmetric (Hermitian) matrix eigh reads from a tangent ``t``: its lower (or
    upper) triangle mirrored (conjugated; the diagonal's real part)."""
    if UPLO == "U":
        t = _h(t)
    if _ew.is_complex(t):
        strict = _triangle.bind(t, diagonal=0.0)
        return _ew.add(_ew.add(strict, _h(strict)), _real_diagonal(t))
    return _ew.add(_triangle.bind(t, diagonal=1.0), _t(_triangle.bind(t, diagonal=0.0)))


def _symmetric_cotangent(g, UPLO):
    """The adjoint of ``_symmetric_tangent``: a gradient ``g`` with respect to the
    symmetric (Hermitian) matrix read, as one with respect to ``a`` (zero in the triangle
    not read, and in the imaginary parts of a complex diagonal)."""
    if _ew.is_complex(g):
        out = _ew.add(_triangle.bind(_ew.add(g, _h(g)), diagonal=0.0), _real_diagonal(g))
    else:
        out = _ew.add(_triangle.bind(g, diagonal=1.0), _triangle.bind(_t(g), diagonal=0.0))
    return _h(out) if UPLO == "U" else out


def _eigvalsh_vjp(g, out, a, UPLO):
    v = _eigh_vectors.bind(a, UPLO=UPLO)
    return _symmetric_cotangent(_mm(_ew.multiply(v, _row(g)), _h(v)), UPLO)


def _eigvalsh_jvp(t, out, a, UPLO):
    v = _eigh_vectors.bind(a, UPLO=UPLO)
    s = _symmetric_tangent(t, UPLO)
    # v_i^H s v_i, real for a Hermitian s
    return _ew.real(_rd.sum(_ew.multiply(_ew.conj_of(v), _mm(s, v)), axis=-2))


def _no_complex_vectors_jvp(op, what, out):
    if _ew.is_complex(out):
        raise UnsupportedError(at_user_line(
            f"{op}: forward-mode derivatives of complex {what} ({out.dtype} "
            f"{tuple(shape_of(out))}) are not supported: their phases are arbitrary, so "
            "their tangents are not defined; use reverse mode (a GradientTape), or the "
            "eigenvalues or singular values"))


def _eigh_vectors_vjp(g, out, a, UPLO):
    f = _gaps_reciprocal(_eigvalsh.bind(a, UPLO=UPLO))
    x = _mm(_h(out), g)
    if _ew.is_complex(x):
        _phase_free("eigh", "eigenvectors", x, 0.0)
    return _symmetric_cotangent(_mm(out, _ew.multiply(f, x), _h(out)), UPLO)


def _eigh_vectors_jvp(t, out, a, UPLO):
    _no_complex_vectors_jvp("eigh", "eigenvectors", out)
    f = _gaps_reciprocal(_eigvalsh.bind(a, UPLO=UPLO))
    s = _symmetric_tangent(t, UPLO)
    return _mm(out, _ew.multiply(f, _mm(_t(out), s, out)))


# symmetric matrices with distinct eigenvalues (the gradient of the vectors needs them):
# diagonals 0, 3, 6, ... and the rest in [-0.5, 0.5] (a domain per element)
def _spread(m, n=None):
    n = m if n is None else n
    d = np.zeros((m, n))
    k = np.arange(min(m, n))
    d[k, k] = 2.0 + 3.0 * k
    return (d - 0.5, d + 0.5)


_eigvalsh = _LinalgPrimitive(
    "eigvalsh", _eigvalsh_impl,
    abstract=_decomposition_abstract("eigvalsh", lambda m, n, UPLO: (n,), square=True, real=True),
    vjp=[_eigvalsh_vjp], jvp=[_eigvalsh_jvp], save=(True, False),
    examples=[ex((3, 3), UPLO="L"), ex((2, 4, 4), UPLO="U"), ex((1, 1), UPLO="L")],
    kind="opaque", backends=CPU_ONLY, complex=True)
_eigh_vectors = _LinalgPrimitive(
    "eigh", _eigh_vectors_impl,
    abstract=_decomposition_abstract("eigh", lambda m, n, UPLO: (n, n), square=True),
    vjp=[_eigh_vectors_vjp], jvp=[_eigh_vectors_jvp],
    examples=[ex((3, 3), UPLO="L", domain=(_spread(3),)),
              ex((2, 4, 4), UPLO="U", domain=(_spread(4),))],
    kind="opaque", backends=CPU_ONLY, complex=True)

EighResult = collections.namedtuple("EighResult", "eigenvalues eigenvectors")
EighResult.__doc__ = "(eigenvalues, eigenvectors) of ``eigh``, as NumPy's result names them."


@numpy_dispatch(np.linalg.eigh)
def eigh(a, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors (columns) of each symmetric matrix of
    ``a`` (..., n, n), read from its lower triangle (``UPLO='U'``: the upper one): an
    ``EighResult`` (w, v), NumPy's (LAPACK's syevd or heevd reading that triangle, so
    the vectors' signs and phases are NumPy's). The gradient of ``v``
    needs distinct eigenvalues: two equal ones give inf or NaN (as JAX and PyTorch);
    that of ``w`` alone is always defined."""
    UPLO = _check_uplo("eigh", UPLO)
    v = _eigh_vectors.bind(a, UPLO=UPLO)          # (first: its shape error names eigh)
    return EighResult(_eigvalsh.bind(a, UPLO=UPLO), v)


@numpy_dispatch(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix of ``a`` (..., n, n), read from
    its lower (``UPLO='U'``: upper) triangle; the gradient is ``v diag(g) v^T``."""
    return _eigvalsh.bind(a, UPLO=_check_uplo("eigvalsh", UPLO))


# -- eig: a general matrix's eigenvalues and eigenvectors, complex ------------------------
# The values are holomorphic functions of the matrix: dw = diag(V^-1 dA V), so the
# cotangent is V^-H diag(g) V^H (JAX's and autograd's rule, with jittape's convention
# for complex gradients). The vectors have NumPy's (LAPACK's geev's) normalization: unit
# norm, and the component of largest modulus real. JAX's tangent V (F o (V^-1 dA V))
# with the norm's part removed keeps the norm; a multiple of i v of each vector then
# keeps its largest component real (``_eig_gauge``): the derivative of the vectors NumPy
# returns, so that any loss of them, not only one blind to their phases, is
# differentiated (where the largest component stays the same one).

def _eig_dtype(op, a):
    """complex64 for float32 and complex64 operands, else complex128 (NumPy's eig
    computes in double precision and gives single for single)."""
    dtype = np.dtype(a.dtype) if hasattr(a, "dtype") else np.asarray(a).dtype
    if dtype.kind != "c":
        dtype = _dtype(op, a)
    return np.dtype(np.complex64 if dtype in (np.float32, np.complex64) else np.complex128)


def _eig_abstract(op, vectors):
    def abstract(a):
        shape = tuple(shape_of(a))
        _square(op, shape)
        return Aval(shape if vectors else shape[:-1], _eig_dtype(op, a))
    return abstract


def _eigvals_impl(a):
    dtype = _eig_dtype("eigvals", a)
    return _guarded(lambda x: np.linalg.eigvals(x).astype(dtype), a)


def _eig_vectors_impl(a):
    dtype = _eig_dtype("eig", a)
    return _guarded(lambda x: np.linalg.eig(x)[1].astype(dtype), a)


def _like_operand(g, a):
    """A cotangent of the complex results as one of ``a``: its real part for a real
    ``a`` (whose perturbations are real)."""
    return g if _ew.is_complex(a) else _ew.real(g)


def _eig_largest(v):
    """(mask, r): 1 at each vector's component of largest modulus (a constant), and that
    component's value (real by LAPACK's normalization), a row per stack member."""
    size = _ew.abs(v)
    mask = _ew.cast(_ew.equal(size, _rd.max(size, axis=-2, keepdims=True)), size.dtype)
    return mask, _row(_ew.real(_rd.sum(_ew.multiply(mask, v), axis=-2)))


def _eig_vjp_values(g, out, a):
    v = _eig_vectors.bind(a)
    ga = _mm(_h(_inv.bind(v)), _ew.multiply(_column(g), _h(v)))
    return _like_operand(ga, a)


def _eig_jvp_values(t, out, a):
    v = _eig_vectors.bind(a)
    # diag(V^-1 T V) = sum over the rows of (V^-1)^T o (T V)
    return _rd.sum(_ew.multiply(_t(_inv.bind(v)), _mm(t, v)), axis=-2)


def _eig_vjp_vectors(g, out, a):
    v = out
    mask, r = _eig_largest(v)
    # the gauge's adjoint: i mask Im(v_i^H g_i) / r_i added to each column
    phase = _ew.imag(_rd.sum(_ew.multiply(_ew.conj_of(g), v), axis=-2))
    g = _ew.add(g, _ew.multiply(_ew.multiply(mask, _ew.divide(_row(phase), r)), 1j))
    # the norm's adjoint: g - v Re(diag(v^H g))
    g = _ew.subtract(g, _ew.multiply(v, _row(_ew.real(_rd.sum(
        _ew.multiply(_ew.conj_of(v), g), axis=-2)))))
    f = _ew.conj_of(_gaps_reciprocal(_eigvals.bind(a)))
    ga = _mm(_h(_inv.bind(v)), _ew.multiply(f, _mm(_h(v), g)), _h(v))
    return _like_operand(ga, a)


def _eig_jvp_vectors(t, out, a):
    v = out
    f = _gaps_reciprocal(_eigvals.bind(a))
    dv = _mm(v, _ew.multiply(f, _mm(_inv.bind(v), t, v)))
    # unit norm kept: dv - v Re(diag(v^H dv))
    dv = _ew.subtract(dv, _ew.multiply(v, _row(_ew.real(_rd.sum(
        _ew.multiply(_ew.conj_of(v), dv), axis=-2)))))
    # the largest component kept real: dv - i v Im(dv_k) / r
    mask, r = _eig_largest(v)
    turn = _ew.divide(_row(_rd.sum(_ew.multiply(mask, _ew.imag(dv)), axis=-2)), r)
    return _ew.subtract(dv, _ew.multiply(_ew.multiply(v, turn), 1j))


# general matrices with distinct eigenvalues: real ones near 2, 5, 8 (the spread of
# eigh's examples), and 2 x 2 blocks near [[1, -2], [2, 1]] (eigenvalues near 1 +- 2i)
def _rotation():
    centre = np.array([[1.0, -2.0], [2.0, 1.0]])
    return (centre - 0.1, centre + 0.1)


_eigvals = _LinalgPrimitive(
    "eigvals", _eigvals_impl, abstract=_eig_abstract("eigvals", vectors=False),
    vjp=[_eig_vjp_values], jvp=[_eig_jvp_values], save=(True, False),
    examples=[ex((3, 3), domain=(_spread(3),)), ex((2, 2, 2), domain=(_rotation(),)),
              ex((1, 1))],
    kind="opaque", backends=CPU_ONLY, complex=True)
_eig_vectors = _LinalgPrimitive(
    "eig", _eig_vectors_impl, abstract=_eig_abstract("eig", vectors=True),
    vjp=[_eig_vjp_vectors], jvp=[_eig_jvp_vectors],
    examples=[ex((3, 3), domain=(_spread(3),)), ex((2, 2, 2), domain=(_rotation(),))],
    kind="opaque", backends=CPU_ONLY, complex=True)

EigResult = collections.namedtuple("EigResult", "eigenvalues eigenvectors")
EigResult.__doc__ = "(eigenvalues, eigenvectors) of ``eig``, as NumPy's result names them."


@numpy_dispatch(np.linalg.eig)
def eig(a):
    """Eigenvalues and right eigenvectors (columns) of each square matrix of ``a``
    (..., n, n): an ``EigResult`` (w, v), complex always (NumPy gives real arrays when
    every eigenvalue is real, which a compiled function cannot know when it is traced;
    JAX's choice), in LAPACK's order. Each vector has unit norm and its component of
    largest modulus real, as NumPy's, and its gradient is that of those vectors, for any
    loss; it needs distinct eigenvalues (inf or NaN for equal ones)."""
    v = _eig_vectors.bind(a)                      # (first: its shape error names eig)
    return EigResult(_eigvals.bind(a), v)


@numpy_dispatch(np.linalg.eigvals)
def eigvals(a):
    """The eigenvalues of each square matrix of ``a`` (..., n, n), complex always (see
    ``eig``); the gradient is ``V^-H diag(g) V^H``, its real part for a real ``a``."""
    return _eigvals.bind(a)


def _described(a):
    return f"{_dtype_of(a)} {tuple(shape_of(a))}"


# -- svd

def _full_only_square(op, a, full_matrices):
    m, n = shape_of(a)[-2:]
    if full_matrices and int(m) != int(n):
        raise UnsupportedError(at_user_line(
            f"{op}: the gradient of full_matrices=True for a matrix that is not square "
            f"({_described(a)}) is not defined by the reduced factors; pass "
            "full_matrices=False"))


def _svd_reduced(a):
    return (_svd_u.bind(a, full_matrices=False), _svdvals.bind(a),
            _svd_vh.bind(a, full_matrices=False))


def _svd_gaps(s):
    """F[i, j] = 1 / (s[j]**2 - s[i]**2) off the diagonal."""
    return _gaps_reciprocal(_ew.multiply(s, s))


def _svdvals_vjp(g, out, a):
    u, _, vh = _svd_reduced(a)
    return _mm(_ew.multiply(u, _row(g)), vh)


def _svdvals_jvp(t, out, a):
    u, _, vh = _svd_reduced(a)
    # Re(u_i^H t v_i)
    return _ew.real(_rd.sum(_ew.multiply(_ew.conj_of(u), _mm(t, _h(vh))), axis=-2))


# Complex matrices (PyTorch's svd_backward, whose convention for complex gradients is
# jittape's): transposes become conjugate transposes; the cotangent of U or Vh alone must
# not depend on the singular vectors' phases (``_phase_free``), and then the diagonal
# term of the phases is zero.
def _svd_u_vjp(g, out, a, full_matrices):
    _full_only_square("svd", a, full_matrices)
    u, s, vh = _svd_reduced(a)
    uhg = _mm(_h(u), g)
    if _ew.is_complex(uhg):
        _phase_free("svd", "singular vectors (U)", uhg, 0.0)
    x = _ew.multiply(_svd_gaps(s), uhg)
    grad = _mm(u, _ew.multiply(_ew.add(x, _h(x)), _row(s)), vh)
    m, n = shape_of(a)[-2:]
    if m > n:                             # the part of g off u's columns
        off = _ew.subtract(g, _mm(u, _h(u), g))
        grad = _ew.add(grad, _mm(_ew.divide(off, _row(s)), vh))
    return grad


def _svd_vh_vjp(g, out, a, full_matrices):
    _full_only_square("svd", a, full_matrices)
    u, s, vh = _svd_reduced(a)
    vhg = _mm(vh, _h(g))
    if _ew.is_complex(vhg):
        _phase_free("svd", "singular vectors (Vh)", vhg, 0.0)
    y = _ew.multiply(_svd_gaps(s), vhg)
    grad = _mm(u, _ew.multiply(_column(s), _ew.add(y, _h(y))), vh)
    m, n = shape_of(a)[-2:]
    if n > m:                             # the part of g off vh's rows
        off = _ew.subtract(g, _mm(g, _h(vh), vh))
        grad = _ew.add(grad, _mm(_ew.divide(u, _row(s)), off))
    return grad


def _svd_u_jvp(t, out, a, full_matrices):
    _no_complex_vectors_jvp("svd", "singular vectors", out)
    _full_only_square("svd", a, full_matrices)
    u, s, vh = _svd_reduced(a)
    p = _mm(_t(u), t, _t(vh))
    du = _mm(u, _ew.multiply(_svd_gaps(s), _ew.add(_ew.multiply(p, _row(s)),
                                                   _ew.multiply(_column(s), _t(p)))))
    m, n = shape_of(a)[-2:]
    if m > n:
        tv = _mm(t, _t(vh))
        du = _ew.add(du, _ew.divide(_ew.subtract(tv, _mm(u, _t(u), tv)), _row(s)))
    return du


def _svd_vh_jvp(t, out, a, full_matrices):
    _no_complex_vectors_jvp("svd", "singular vectors", out)
    _full_only_square("svd", a, full_matrices)
    u, s, vh = _svd_reduced(a)
    p = _mm(_t(u), t, _t(vh))
    dv = _mm(_t(vh), _ew.multiply(_svd_gaps(s), _ew.add(_ew.multiply(_column(s), p),
                                                        _ew.multiply(_t(p), _row(s)))))
    m, n = shape_of(a)[-2:]
    if n > m:
        tu = _mm(_t(t), u)
        dv = _ew.add(dv, _ew.divide(_ew.subtract(tu, _mm(_t(vh), vh, tu)), _row(s)))
    return _t(dv)


def _svd_shapes(part):
    def shape(m, n, full_matrices=False):
        k = _smaller(m, n)
        if part == "s":
            return (k,)
        if part == "u":
            return (m, m if full_matrices else k)
        return (n if full_matrices else k, n)
    return shape


_svdvals = _LinalgPrimitive(
    "svdvals", lambda a: _guarded(lambda x: np.linalg.svd(x, compute_uv=False), a),
    abstract=_decomposition_abstract("svd", _svd_shapes("s"), real=True),
    vjp=[_svdvals_vjp], jvp=[_svdvals_jvp], save=(True, False),
    examples=[ex((3, 3)), ex((4, 2)), ex((2, 2, 3)), ex((3, 2, 2), domain=(_spread(2),))],
    kind="opaque", backends=CPU_ONLY, complex=True)
_svd_u = _LinalgPrimitive(
    "svd", lambda a, full_matrices: _guarded(
        lambda x: np.linalg.svd(x, full_matrices=full_matrices)[0], a),
    abstract=_decomposition_abstract("svd", _svd_shapes("u")),
    vjp=[_svd_u_vjp], jvp=[_svd_u_jvp], save=(True, False),
    examples=[ex((3, 3), full_matrices=True, domain=(_spread(3),)),
              ex((4, 2), full_matrices=False, domain=(_spread(4, 2),)),
              ex((2, 2, 3), full_matrices=False, domain=(_spread(2, 3),))],
    kind="opaque", backends=CPU_ONLY, complex=True)
_svd_vh = _LinalgPrimitive(
    "svd_vh", lambda a, full_matrices: _guarded(
        lambda x: np.linalg.svd(x, full_matrices=full_matrices)[2], a),
    abstract=_decomposition_abstract("svd", _svd_shapes("vh")),
    vjp=[_svd_vh_vjp], jvp=[_svd_vh_jvp], save=(True, False),
    examples=[ex((3, 3), full_matrices=False, domain=(_spread(3),)),
              ex((4, 2), full_matrices=False, domain=(_spread(4, 2),)),
              ex((2, 2, 3), full_matrices=False, domain=(_spread(2, 3),))],
    kind="opaque", backends=CPU_ONLY, complex=True)

SVDResult = collections.namedtuple("SVDResult", "U S Vh")
SVDResult.__doc__ = "(U, S, Vh) of ``svd``, as NumPy's result names them."


@numpy_dispatch(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition of each matrix of ``a`` (..., m, n): an
    ``SVDResult`` (U, S, Vh) with ``a = U diag(S) Vh``, or the singular values alone
    (descending) with ``compute_uv=False``. The gradient of U and Vh needs distinct
    singular values (equal ones give inf or NaN), nonzero ones for a matrix that is not
    square, and ``full_matrices=False`` for a matrix that is not square (the extra columns
    are not determined: UnsupportedError); that of S alone is ``U diag(g) Vh``, always
    defined. ``hermitian`` is accepted and computes the general SVD."""
    if not compute_uv:
        return _svdvals.bind(a)
    return SVDResult(_svd_u.bind(a, full_matrices=bool(full_matrices)), _svdvals.bind(a),
                     _svd_vh.bind(a, full_matrices=bool(full_matrices)))


@public
@numpy_dispatch(*((np.linalg.svdvals,) if hasattr(np.linalg, "svdvals") else ()))
def svdvals(x):
    """The singular values (descending) of each matrix of ``x`` (..., m, n)."""
    return _svdvals.bind(x)


# -- qr

def _qr_supported(a, complete):
    m, n = shape_of(a)[-2:]
    if m < n or (complete and int(m) != int(n)):
        raise UnsupportedError(at_user_line(
            f"qr: the gradient is defined for a matrix with at least as many rows as "
            f"columns, mode='reduced' (operand: {_described(a)}, mode="
            f"{'complete' if complete else 'reduced'!r})"))


def _right_upper_solve(x, r):
    """x r^-1 for an upper triangular r (a general solve for now)."""
    return _t(_solve.bind(_t(r), _t(x)))


def _qr_back(grad_b, grad_c, q, r):
    """The cotangent of a from those of B = dA R^-1 and C = Q^T B."""
    total = _ew.add(grad_b, _mm(q, grad_c)) if grad_b is not None else _mm(q, grad_c)
    return _t(_solve.bind(r, _t(total)))                  # total R^-T


def _qr_q_vjp(g, out, a, complete):
    _qr_supported(a, complete)
    r = _qr_r.bind(a, complete=complete)
    n_ = _mm(_t(out), g)
    grad_c = _ew.subtract(_triangle.bind(_ew.subtract(n_, _t(n_)), diagonal=0.0), n_)
    return _qr_back(g, grad_c, out, r)


def _qr_r_vjp(g, out, a, complete):
    _qr_supported(a, complete)
    q = _qr_q.bind(a, complete=complete)
    m_ = _mm(g, _t(out))
    grad_c = _ew.subtract(m_, _triangle.bind(_ew.subtract(m_, _t(m_)), diagonal=0.0))
    return _qr_back(None, grad_c, q, out)


def _qr_tangents(t, a, complete):
    """(dQ, dR) along ``t`` (JAX's qr_jvp_rule): with B = t R^-1 and C = Q^T B,
    dQ = Q (W - C) + B and dR = (C - W) R, W the skew part of C's strict lower triangle."""
    _qr_supported(a, complete)
    q, r = _qr_q.bind(a, complete=complete), _qr_r.bind(a, complete=complete)
    b = _right_upper_solve(t, r)
    c = _mm(_t(q), b)
    low = _triangle.bind(c, diagonal=0.0)
    w = _ew.subtract(low, _t(low))
    return _ew.add(_mm(q, _ew.subtract(w, c)), b), _mm(_ew.subtract(c, w), r)


def _qr_shapes(part):
    def shape(m, n, complete=False):
        k = m if complete else _smaller(m, n)
        return (m, k) if part == "q" else (k, n)
    return shape


def _qr_r_impl(a, complete):
    return _guarded(lambda x: np.linalg.qr(x, "complete" if complete else "reduced")[1], a,
                    fill=lambda r: np.triu(np.full_like(r, np.nan)))


_qr_q = _LinalgPrimitive(
    "qr", lambda a, complete: _guarded(
        lambda x: np.linalg.qr(x, "complete" if complete else "reduced")[0], a),
    abstract=_decomposition_abstract("qr", _qr_shapes("q")),
    vjp=[_qr_q_vjp], jvp=[lambda t, out, a, complete: _qr_tangents(t, a, complete)[0]],
    examples=[ex((3, 3), complete=False, domain=(_spread(3),)),
              ex((4, 2), complete=False, domain=(_spread(4, 2),)),
              ex((2, 3, 3), complete=True, domain=(_spread(3),))],
    kind="opaque", backends=CPU_ONLY)
_qr_r = _LinalgPrimitive(
    "qr_r", _qr_r_impl, abstract=_decomposition_abstract("qr", _qr_shapes("r")),
    vjp=[_qr_r_vjp], jvp=[lambda t, out, a, complete: _qr_tangents(t, a, complete)[1]],
    examples=[ex((3, 3), complete=False, domain=(_spread(3),)),
              ex((4, 2), complete=False, domain=(_spread(4, 2),)),
              ex((2, 3, 3), complete=True, domain=(_spread(3),))],
    kind="opaque", backends=CPU_ONLY)

QRResult = collections.namedtuple("QRResult", "Q R")
QRResult.__doc__ = "(Q, R) of ``qr``, as NumPy's result names them."


@numpy_dispatch(np.linalg.qr)
def qr(a, mode="reduced"):
    """The QR decomposition of each matrix of ``a`` (..., m, n): a ``QRResult`` (Q, R)
    (``mode='reduced'``: Q of min(m, n) columns; ``'complete'``: Q square) or R alone
    (``mode='r'``). The gradient is defined for m >= n (reduced; complete when square)
    and a full-rank matrix; others raise UnsupportedError when differentiated."""
    if mode not in ("reduced", "complete", "r"):
        raise UnsupportedError(at_user_line(
            f"qr: mode={mode!r} is not supported (operand: {_described(a)}); use 'reduced', "
            "'complete' or 'r'"))
    complete = mode == "complete"
    r = _qr_r.bind(a, complete=complete)
    if mode == "r":
        return r
    return QRResult(_qr_q.bind(a, complete=complete), r)


# -- pinv, lstsq

def _pinv_vjp(g, out, a, rcond):
    # the derivative of the pseudo-inverse where the rank does not change (Golub and
    # Pereyra): -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P, transposed
    pt, gt = _t(out), _t(g)
    first = _ew.negative(_mm(pt, g, pt))
    x = _mm(gt, out, pt)
    second = _ew.subtract(x, _mm(a, out, x))
    y = _mm(pt, out, gt)
    third = _ew.subtract(y, _mm(y, out, a))
    return _ew.add(first, _ew.add(second, third))


def _pinv_jvp(t, out, a, rcond):
    tt = _t(t)
    first = _ew.negative(_mm(out, t, out))
    x = _mm(out, _t(out), tt)
    second = _ew.subtract(x, _mm(x, a, out))
    y = _mm(tt, _t(out), out)
    third = _ew.subtract(y, _mm(out, a, y))
    return _ew.add(first, _ew.add(second, third))


_pinv = _LinalgPrimitive(
    "pinv", lambda a, rcond: _guarded(lambda x: np.linalg.pinv(x, rcond=rcond), a),
    abstract=_decomposition_abstract("pinv", lambda m, n, rcond: (n, m)),
    vjp=[_pinv_vjp], jvp=[_pinv_jvp],
    examples=[ex((3, 3), rcond=1e-15, domain=(_spread(3),)),
              ex((4, 2), rcond=1e-15, domain=(_spread(4, 2),)),
              ex((2, 2, 3), rcond=1e-15, domain=(_spread(2, 3),))],
    kind="opaque", backends=CPU_ONLY)

_NO_VALUE = object()


def _float_param(op, name, value):
    if hasattr(value, "shape") and tuple(value.shape) != ():
        raise UnsupportedError(at_user_line(
            f"{op}: {name} must be one number (one cut-off for every matrix), got shape "
            f"{tuple(value.shape)}"))
    return float(value)


@numpy_dispatch(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    """The pseudo-inverse of each matrix of ``a`` (..., m, n), from its SVD: singular
    values at most ``rcond`` (default 1e-15; ``rtol=None``: max(m, n) times the dtype's
    epsilon) times the largest are dropped, as NumPy's. Its gradient is that of the
    pseudo-inverse of constant rank (exact where no singular value crosses the cut-off;
    the standard formula, as JAX's). ``hermitian`` is accepted and computes the general
    SVD."""
    if rcond is None:
        if rtol is _NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            m, n = _rows_cols("pinv", tuple(shape_of(a)))
            rcond = max(int(m), int(n)) * float(np.finfo(_dtype("pinv", a)).eps)
        else:
            rcond = rtol
    elif rtol is not _NO_VALUE:
        raise ValueError(at_user_line(
            f"pinv: `rtol` and `rcond` can't be both set (operand: {_described(a)})"))
    return _pinv.bind(a, rcond=_float_param("pinv", "rcond", rcond))


@numpy_dispatch(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """The least-squares solution of ``a @ x = b`` (``a`` (m, n), ``b`` (m,) or (m, k)) as
    NumPy's: (x, residuals, rank, s). ``x`` is ``pinv(a, rcond) @ b`` (singular values at
    most ``rcond`` times the largest dropped; default max(m, n) times float64's epsilon),
    the minimum-norm solution, differentiable where the rank does not change (the
    pseudo-inverse's gradient). ``residuals``: the squared norms of ``b - a @ x`` per
    column for m > n, where NumPy gives an empty array for a rank-deficient ``a`` this
    gives NaN (a shape that depends on the values cannot be compiled); ``rank`` (an int64
    tensor) and ``s`` (the singular values) have no gradient through ``rank``."""
    sa, sb = tuple(shape_of(a)), tuple(shape_of(b))
    if len(sa) != 2 or len(sb) not in (1, 2):
        raise ShapeError(at_user_line(
            f"lstsq: a must be a matrix and b a vector or a matrix, got shapes {sa} and {sb}"))
    m, n = sa
    if sb[0] != m:
        raise ShapeError(at_user_line(
            f"lstsq: a of shape {sa} and b of shape {sb} do not match: {m} equations, "
            f"{sb[0]} rows in b"))
    same_size("lstsq", m, sb[0], "a's rows and b's differ")
    if rcond is None:
        rcond = float(np.finfo(np.float64).eps) * max(int(m), int(n))
    rcond = _float_param("lstsq", "rcond", rcond)
    dtype = _dtype("lstsq", a, b)
    a, b = _ew.cast(a, dtype), _ew.cast(b, dtype)
    x = _la.matmul(_pinv.bind(a, rcond=rcond), b)
    s = _svdvals.bind(a)
    rank = _rd.sum(_ew.greater(s, _ew.multiply(_rd.max(s, axis=-1, keepdims=True), rcond)),
                   axis=-1)
    if m > n:
        r = _ew.subtract(b, _la.matmul(a, x))
        squares = _rd.sum(_ew.multiply(r, r), axis=0, keepdims=len(sb) == 1)
        residuals = _ew.where(_ew.equal(rank, n), squares, np.nan)
    else:
        residuals = _cr.zeros((0,), dtype)
    return x, residuals, rank, s


# -- compositions: matrix_rank, cond, matrix_power, multi_dot

@numpy_dispatch(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """The number of singular values of each matrix of ``A`` above ``tol`` (default: the
    largest times ``rtol``, itself max(m, n) times the dtype's epsilon), as NumPy's; an
    int64 tensor, without gradient. A 1-D ``A``: 1 unless all zero."""
    if _ndim(A) < 2:
        return _ew.cast(_rd.reduce_any(_ew.not_equal(A, 0)), np.int64)
    s = _ew.abs(_eigvalsh.bind(A, UPLO="L")) if hermitian else _svdvals.bind(A)
    if tol is None:
        if rtol is None:
            m, n = shape_of(A)[-2:]
            rtol = max(int(m), int(n)) * float(np.finfo(_dtype("matrix_rank", A)).eps)
        else:
            rtol = _sh.expand_dims(rtol, _ndim(rtol)) if _ndim(rtol) else rtol
        tol = _ew.multiply(_rd.max(s, axis=-1, keepdims=True), rtol)
    else:
        tol = _sh.expand_dims(tol, _ndim(tol)) if _ndim(tol) else tol
    return _rd.sum(_ew.greater(s, tol), axis=-1)


@public(jt=False)               # (jt.cond is the conditional of control flow)
@numpy_dispatch(np.linalg.cond)
def linalg_cond(x, p=None):
    """The condition number of each matrix of ``x`` (..., m, n) in the norm ``p``: for
    None, 2 and -2 the ratio of its extreme singular values (inf for a singular matrix,
    as NumPy's); for 'fro', 'nuc', 1, -1, inf and -inf (square matrices)
    ``norm(x) * norm(inv(x))``, where a singular matrix raises LinAlgError (NumPy
    gives inf)."""
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = _svdvals.bind(x)
        big, small = _rd.max(s, axis=-1), _rd.min(s, axis=-1)
        r = _ew.divide(small, big) if p == -2 else _ew.divide(big, small)
        # 0/0 (a zero matrix) is inf, unless x itself holds a NaN (NumPy's rule)
        n = _ndim(x)
        clean = _ew.logical_not(_rd.reduce_any(_ew.isnan(x), axis=(n - 2, n - 1)))
        return _ew.where(_ew.logical_and(_ew.isnan(r), clean), np.inf, r)
    _square("cond", tuple(shape_of(x)))
    n = _ndim(x)
    return _ew.multiply(norm(x, p, axis=(n - 2, n - 1)), norm(_inv.bind(x), p, axis=(n - 2, n - 1)))


@composite(examples=[ex((3, 3), n=3), ex((2, 2, 2), n=5), ex((2, 3, 3), n=0)],
           numpy=(np.linalg.matrix_power,))
def matrix_power(a, n):
    """``a`` (..., m, m) to the integer power ``n``: products of ``a`` (binary
    decomposition, NumPy's order), the identity for 0, powers of ``inv(a)`` for negative
    ``n``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(at_user_line(
            f"matrix_power: exponent must be an integer, got {n!r} (operand: {_described(a)})"))
    _square("matrix_power", tuple(shape_of(a)))
    n = int(n)
    if n == 0:                           # the identity: its size is the graph's constant
        _sh.exact_sizes()
        shape = tuple(shape_of(a))
        eye = np.eye(int(shape[-1]), dtype=_dtype_of(a))
        return _sh.broadcast_to(eye, tuple(int(d) for d in shape))
    if n < 0:
        a, n = _inv.bind(a), -n
    if n <= 3:
        out = a
        for _ in range(n - 1):
            out = _la.matmul(out, a)
        return out
    z = result = None
    while n > 0:
        z = a if z is None else _la.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _la.matmul(result, z)
    return result


def _chain_order(sizes):
    """The best parenthesisation of a chain of matrix products (NumPy's dynamic program
    on the sizes as traced: another order at run time costs time, not accuracy)."""
    n = len(sizes) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return _la.matmul(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


@composite(examples=[ex((2, 3), (3, 4), (4, 2)), ex((3,), (3, 4), (4, 2), (2,)),
                     ex((2, 3), (3,))],
           call=lambda *arrays: multi_dot(list(arrays)))
def multi_dot(arrays, *, out=None):
    """The product of ``arrays`` (2-D, the first and last may be 1-D), in the order of
    fewest multiplications (NumPy's)."""
    if out is not None:
        raise UnsupportedError(at_user_line(
            "multi_dot: out= is not supported (tensors are not written in place); use the "
            "returned value"))
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(at_user_line(
            f"multi_dot: expecting at least two arrays, got {len(arrays)}"))
    shapes = [tuple(shape_of(x)) for x in arrays]
    first_vector, last_vector = len(shapes[0]) == 1, len(shapes[-1]) == 1
    if first_vector:
        arrays[0] = _sh.expand_dims(arrays[0], 0)
    if last_vector:
        arrays[-1] = _sh.expand_dims(arrays[-1], 1)
    if any(_ndim(x) != 2 for x in arrays):
        raise ShapeError(at_user_line(
            f"multi_dot: the arrays must be 2-D (the first and last may be 1-D), got shapes "
            f"{', '.join(str(s) for s in shapes)}"))
    sizes = [int(shape_of(arrays[0])[0])] + [int(shape_of(x)[1]) for x in arrays]
    out = _chain(arrays, _chain_order(sizes), 0, len(arrays) - 1)
    if first_vector and last_vector:
        return _sh.reshape(out, ())
    if first_vector:
        return _sh.squeeze(out, 0)
    if last_vector:
        return _sh.squeeze(out, 1)
    return out


numpy_dispatch(np.linalg.multi_dot)(multi_dot)


# -- CPU lowerings: a helper of codegen/lapack.py per matrix ----------------------------------

def _where(node):
    return f" (at {node.where})" if node.where else ""


def _operand(ctx, v, dtype, lines):
    """The source of ``v`` as an array of ``dtype`` (cast once, before the loops)."""
    name = ctx.name(v)
    if v.dtype != dtype:
        tmp = ctx.tmp()
        lines.append(f"{tmp} = {name}.astype({ctx.dtype(dtype)})")
        return tmp
    return name


def _view(v, name, batch, tail):
    """``name`` (of Var ``v``) at the batch indices b0, b1, ... of a result with ``batch``
    leading axes: its own leading axes aligned from the right, size-1 ones broadcast."""
    lead = v.ndim - tail
    items = ["0" if v.shape[a] == 1 else f"b{batch - lead + a}" for a in range(lead)]
    return f"{name}[{', '.join(items + [':'] * tail)}]" if items else name


def _loops(ctx, out, batch):
    return ["    " * k + f"for b{k} in range({ctx.size(out.shape[k])}):" for k in range(batch)]


def _at(batch):
    return ", ".join(f"b{k}" for k in range(batch))


def _checked(ctx, call, result, status, message, pad):
    return [f"{pad}{result}, {status} = {call}",
            f"{pad}if {status} != 0:",
            f"{pad}    raise LinAlgError({ctx.message(message)})"]


def _lower_solve_cpu(ctx, node):
    a, b = node.inputs
    out = node.out
    lines = []
    an, bn = (_operand(ctx, v, out.dtype, lines) for v in (a, b))
    vector = b.ndim == 1
    batch = out.ndim - (1 if vector else 2)
    ctx.link("lapack_solve", out.dtype.name)
    o = ctx.name(out)
    x, status = ctx.tmp("x"), ctx.tmp("status")
    message = f"solve: singular matrix{_where(node)}"
    b_view = f"{bn}[:, None]" if vector else _view(b, bn, batch, 2)
    call = f"lapack_solve({_view(a, an, batch, 2)}, {b_view})"
    if batch == 0:
        lines += _checked(ctx, call, x, status, message, "")
        lines.append(f"{o} = {x}[:, 0].copy()" if vector else f"{o} = {x}")
        return lines
    lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
    lines += _loops(ctx, out, batch)
    pad = "    " * batch
    lines += _checked(ctx, call, x, status, message, pad)
    lines.append(f"{pad}{o}[{_at(batch)}] = {x}" + ("[:, 0]" if vector else ""))
    return lines


def _lower_matrix(helper, what=None, pick=None, scalar=False):
    """The lowering of an op of one stack of square matrices calling ``helper``: with
    ``what`` (the failure's words), it returns (result, status); ``pick``: the item of
    its result that is the op's; ``scalar``: one number per matrix."""
    def lower(ctx, node):
        (a,) = node.inputs
        out = node.out
        lines = []
        an = _operand(ctx, a, out.dtype, lines)
        batch = out.ndim - (0 if scalar else 2)
        ctx.link(helper, out.dtype.name)
        o = ctx.name(out)
        call = f"{helper}({_view(a, an, batch, 2)})" + (f"[{pick}]" if pick is not None else "")
        target = f"{o}[{_at(batch)}]" if batch else o
        pad = "    " * batch
        if batch:
            lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
            lines += _loops(ctx, out, batch)
        if what is None:
            lines.append(f"{pad}{target} = {call}")
            return lines
        r, status = ctx.tmp("r"), ctx.tmp("status")
        lines += _checked(ctx, call, r, status, f"{node.prim.name}: {what}{_where(node)}", pad)
        lines.append(f"{pad}{target} = {r}")
        return lines
    return lower


def _lower_triangle(ctx, node):
    """A loop over every element: the lower triangle kept, the diagonal scaled."""
    (x,) = node.inputs
    out = node.out
    o, xn = ctx.name(out), ctx.name(x)
    nd = out.ndim
    lines = [f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})"]
    for k in range(nd):
        lines.append("    " * k + f"for i{k} in range({ctx.size(out.shape[k])}):")
    at = ", ".join(f"i{k}" for k in range(nd))
    i, j = f"i{nd - 2}", f"i{nd - 1}"
    scale = ctx.literal(node.params["diagonal"], out.dtype)
    zero = ctx.literal(0, out.dtype)
    lines.append("    " * nd + f"{o}[{at}] = ({xn}[{at}] if {j} < {i} else "
                 f"({xn}[{at}] * {scale} if {j} == {i} else {zero}))")
    return lines


def _lower_decomposition(helper, pick, count, what, tail=2, extra=None, real_operand=None):
    """The lowering of a decomposition's result: ``helper`` called per matrix returns
    ``count`` items, the op's result at ``pick`` and a status last (non-zero: LAPACK did
    not converge, ``what`` the op's name in the message); ``tail``: the axes of one
    matrix's result; ``extra(params)``: the source of the helper's other arguments. The
    helpers of eigh and eigvalsh take whether they read the upper triangle (UPLO='U').
    ``real_operand(out dtype)``: the dtype a real operand is given in, where it is not the
    result's (eig's complex results of a real matrix)."""
    def lower(ctx, node):
        (a,) = node.inputs
        out = node.out
        lines = []
        batch = out.ndim - tail
        if a.dtype.kind == "c":
            # the complex helper of the operand's dtype (its results may be real)
            dtype = np.dtype(np.complex64 if out.dtype in (np.complex64, np.float32)
                             else np.complex128)
            an = _operand(ctx, a, dtype, lines)
            name = helper + "_complex"
            ctx.link(name, dtype.name)
        else:
            dtype = out.dtype if real_operand is None else real_operand(out.dtype)
            an = _operand(ctx, a, dtype, lines)
            name = helper
            ctx.link(helper, dtype.name)
        more = [repr(node.params["UPLO"] == "U")] if "UPLO" in node.params else []
        o = ctx.name(out)
        args = ", ".join([_view(a, an, batch, 2)] + more
                         + ([extra(node.params)] if extra else []))
        r = ctx.tmp("r")
        pad = "    " * batch
        if batch:
            lines.append(f"{o} = empty({ctx.shape(out.shape)}, {ctx.dtype(out.dtype)})")
            lines += _loops(ctx, out, batch)
        message = ctx.message(f"{what}: the decomposition did not converge{_where(node)}")
        lines += [f"{pad}{r} = {name}({args})",
                  f"{pad}if {r}[{count - 1}] != 0:",
                  f"{pad}    raise LinAlgError({message})",
                  f"{pad}{o}[{_at(batch)}] = {r}[{pick}]" if batch else f"{o} = {r}[{pick}]"]
        return lines
    return lower


_solve.lowerings["cpu"] = _lower_solve_cpu
_inv.lowerings["cpu"] = _lower_matrix("lapack_inv", "singular matrix")
_det.lowerings["cpu"] = _lower_matrix("lapack_det", scalar=True)
_slogdet_sign.lowerings["cpu"] = _lower_matrix("lapack_slogdet", pick=0, scalar=True)
_logabsdet.lowerings["cpu"] = _lower_matrix("lapack_slogdet", pick=1, scalar=True)
_cholesky.lowerings["cpu"] = _lower_matrix("lapack_cholesky", "matrix is not positive definite")
_triangle.lowerings["cpu"] = _lower_triangle
_eigvalsh.lowerings["cpu"] = _lower_decomposition("lapack_eigvalsh", 0, 2, "eigvalsh", tail=1)
_eigh_vectors.lowerings["cpu"] = _lower_decomposition("lapack_eigh", 1, 3, "eigh")
_svdvals.lowerings["cpu"] = _lower_decomposition("lapack_svdvals", 0, 2, "svd", tail=1)
_svd_u.lowerings["cpu"] = _lower_decomposition(
    "lapack_svd", 0, 4, "svd", extra=lambda p: repr(bool(p["full_matrices"])))
_svd_vh.lowerings["cpu"] = _lower_decomposition(
    "lapack_svd", 2, 4, "svd", extra=lambda p: repr(bool(p["full_matrices"])))
_qr_q.lowerings["cpu"] = _lower_decomposition(
    "lapack_qr", 0, 3, "qr", extra=lambda p: repr(bool(p["complete"])))
_qr_r.lowerings["cpu"] = _lower_decomposition(
    "lapack_qr", 1, 3, "qr", extra=lambda p: repr(bool(p["complete"])))
_eig_vectors.lowerings["cpu"], _eigvals.lowerings["cpu"] = (
    _lower_decomposition("lapack_eig", pick, 3, "eig", tail=tail,
                         extra=lambda p, vectors=vectors: repr(vectors),
                         real_operand=lambda d: np.dtype(np.float32 if d == np.complex64
                                                         else np.float64))
    for pick, tail, vectors in ((1, 2, True), (0, 1, False)))
_pinv.lowerings["cpu"] = _lower_decomposition(
    "lapack_pinv", 0, 2, "pinv", extra=lambda p: repr(float(p["rcond"])))
