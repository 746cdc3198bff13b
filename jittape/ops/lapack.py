"""Linear algebra of ``np.linalg``: solve, inv, det, slogdet, cholesky, norm.

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
matrix norms ``'fro'``, 1, -1, inf and -inf (``'nuc'``, 2 and -2 need singular values:
``UnsupportedError``). The gradient of the 2-norm (and Frobenius norm) at zero is
taken as 0, a subgradient, where the formula would divide 0 by 0.

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
from .core import (Aval, Primitive, aval_of, broadcast_shapes, composite, ex, numpy_dispatch,
                   same_size, shape_of)

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


def _matrix_abstract(op, result):
    """The rule of an op of one stack of square matrices; ``result(shape)`` its shape."""
    def abstract(a):
        shape = shape_of(a)
        _square(op, shape)
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
    xt = _t(out)
    return _ew.negative(_la.matmul(xt, _la.matmul(g, xt)))


def _inv_jvp(t, out, a):
    return _ew.negative(_la.matmul(out, _la.matmul(t, out)))


_inv = _LinalgPrimitive(
    "inv", np.linalg.inv, abstract=_matrix_abstract("inv", lambda s: s),
    vjp=[_inv_vjp], jvp=[_inv_jvp], save=(False, True),
    examples=[ex((3, 3), domain=_well_posed(3)), ex((2, 4, 4), domain=_well_posed(4)),
              ex((1, 1), domain=_well_posed(1))],
    kind="opaque", backends=CPU_ONLY)


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
    kind="opaque", backends=CPU_ONLY, public=False)


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
        raise UnsupportedError(at_user_line(
            f"norm: the matrix norm ord={ord!r} needs singular values, which jittape does not "
            "compute; ord 'fro', 1, -1, inf and -inf are supported"))
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
    dtype = _dtype_of(x)
    if dtype.kind not in "f":
        x = _ew.cast(x, np.float64)
    ndim = _ndim(x)
    if axis is None:
        if ord is None:
            return _two_norm(x, tuple(range(ndim)), keepdims)
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
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) == 2:
        if axis[0] == axis[1]:
            raise ValueError(at_user_line(f"norm: duplicate axes given ({axis})"))
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError(at_user_line(f"norm: improper number of axes ({len(axis)}) to norm"))


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


_solve.lowerings["cpu"] = _lower_solve_cpu
_inv.lowerings["cpu"] = _lower_matrix("lapack_inv", "singular matrix")
_det.lowerings["cpu"] = _lower_matrix("lapack_det", scalar=True)
_slogdet_sign.lowerings["cpu"] = _lower_matrix("lapack_slogdet", pick=0, scalar=True)
_logabsdet.lowerings["cpu"] = _lower_matrix("lapack_slogdet", pick=1, scalar=True)
_cholesky.lowerings["cpu"] = _lower_matrix("lapack_cholesky", "matrix is not positive definite")
_triangle.lowerings["cpu"] = _lower_triangle
