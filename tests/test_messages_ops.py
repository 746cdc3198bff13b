"""Every message of the ops (jittape/ops/*.py), the loops and branches (control.py,
regions.py) that a user's mistake gets: its first line names the op (or the API called),
the values or sizes that disagree, and the user's file:line. One row per message; a test
walks the modules' ``raise`` statements and checks that each is covered by a row or
listed in ``NOT_USER_MESSAGES`` with the reason no user reaches it."""

import ast
import os

import numpy as np
import pytest

import jittape as jt
from jittape import numpy as jnp

from test_messages import assert_first_line_names

# "file.py: a part of the message": why no user's program reaches it
NOT_USER_MESSAGES = {
    "core.py: primitive {name!r} is declared twice":
        "ops are declared once, when jittape is imported: a mistake in jittape's own modules",
    "core.py: primitive {name!r}: kind {kind!r} is not one of":
        "the kind of a primitive declared in jittape's own modules",
    "core.py: op {name!r} is declared twice":
        "composite ops are declared once, when jittape is imported",
    "sorting.py: ShapeError(at_user_line(f'{op}: positions of shape":
        "gather_along and scatter_along take positions made by sort and nanmedian only",
    "sorting.py: ShapeError(at_user_line(f'searchsorted: a must be 1-D (and v":
        "the primitive's rule: np.searchsorted checks a's rank first and gives v an axis",
    "indexing.py: set_row: a row of shape":
        "x.at[i].set(v) broadcasts v to the row's shape (broadcast_to's message) first",
    "indexing.py: set_row: the index must be an integer scalar":
        "x.at[i] takes set_row's path for one integer index only",
    "fourier.py: ShapeError(at_user_line(f'{op}: axis {axis!r} is out of bounds":
        "the transforms' primitives take the axis that NumPy's functions checked",
    "fourier.py: ShapeError(at_user_line(f'irfft: {n} points need {bins} bins":
        "np.fft.irfft pads or truncates the bins to n // 2 + 1 before the primitive",
}

c = jt.constant
R = jt.random
L = np.array


def _numerics(call):
    jt.config.check_numerics = True
    try:
        with np.errstate(all="ignore"):
            return call()
    finally:
        jt.config.check_numerics = False


def _twice(f, good, bad):
    """A compiled function called with the sizes it is traced for, then with others: the
    kernel finds what is wrong and the call names the op's line."""
    f(*good)
    return f(*bad)


# Rows whose mistake is on a line of their own (the message names a line of the helper)

def _phase_loss():
    a = jt.constant(np.array([[2.0, 0.0], [1j, 1.0]]))
    with jt.GradientTape() as tape:
        tape.watch(a)
        y = jt.sum(jt.real(np.linalg.eigh(a)[1]))
    return tape.gradient(y, a)


def _tape_reads_an_alias():
    def f(a):
        array = np.array([1.0, 2.0])
        watched = jt.constant(array)
        with jt.GradientTape() as tape:
            tape.watch(watched)
            y = watched * a
            return array * y
    return jt.function(f)(np.ones(2))


def _branch_in_a_loop():
    def body(carry, x):
        if x > 0:
            return carry, x
        return carry, -x
    return jt.function(lambda a: jt.scan(body, 0.0, a)[0])(np.ones(3))


def _assigns_in_a_loop():
    v = jt.Variable(0.0)

    def body(carry, x):
        v.assign(x)
        return carry, x
    return jt.function(lambda a: jt.scan(body, 0.0, a)[0])(np.ones(3))


def _compiled_without_rocket_fft():
    import sys
    saved = sys.modules.get("rocket_fft")
    sys.modules["rocket_fft"] = None           # (import rocket_fft fails)
    try:
        return jt.grad(lambda a: jt.sum(jt.abs(np.fft.fft(a))))(np.ones(4))
    finally:
        if saved is None:
            del sys.modules["rocket_fft"]
        else:
            sys.modules["rocket_fft"] = saved


def _power(x):
    return jt.while_loop(lambda s: s[1] < 3, lambda s: (s[0] * x, s[1] + 1), (x, 0))[0]


# (name, call, error type, words the first line must hold). Each call is written on its
# own line, which the message must name.
CASES = [
    # -- ops/core.py
    ("check_numerics", lambda: _numerics(lambda: jnp.log(c(L([0.0, 1.0])))),
     jt.NumericsError, ["check_numerics", "log", "produced inf"]),
    ("check_numerics inherited", lambda: _numerics(lambda: jnp.exp(c(L([np.nan])))),
     jt.NumericsError, ["check_numerics", "exp", "produced NaN", "an input already held"]),
    ("repeated axis", lambda: jnp.sum(c(np.ones((2, 3))), axis=(0, 0)),
     jt.ShapeError, ["sum", "repeated axis", "(0, 0)"]),
    ("axis out of bounds", lambda: jnp.max(c(np.ones(3)), axis=-2),
     jt.ShapeError, ["max", "axis -2", "rank 1"]),
    ("broadcast", lambda: jnp.maximum(c(np.ones((2, 3))), c(np.ones(4))),
     jt.ShapeError, ["maximum", "(2, 3)", "(4,)", "axis -1: 3 vs 4"]),
    ("numpy's error", lambda: c(L([2])) ** -1,
     jt.ShapeError, ["power", "negative integer powers", "int64 (1,)", "-1"]),
    ("complex operand", lambda: jnp.maximum(c(np.ones(2)), c(L([1j, 2j]))),
     jt.UnsupportedError, ["maximum", "complex", "complex128"]),
    ("complex operand of one", lambda: jnp.floor(c(L([1j], np.complex64))),
     jt.UnsupportedError, ["floor", "complex", "complex64"]),
    ("complex operands", lambda: jt.concatenate([c(np.ones(2)), c(L([1j]))]) > 0,
     jt.UnsupportedError, ["greater", "complex", "complex128"]),
    ("complex to real", lambda: c(L([1j])).astype(np.float32),
     jt.UnsupportedError, ["cast", "complex128", "float32", "imaginary part"]),
    ("complex eager only", lambda: jt.function(jt.scipy.special.erf)(L([1j])),
     jt.UnsupportedError, ["erf", "complex128", "eager tape only"]),
    ("traced complex operand", lambda: jt.function(lambda a: jnp.sort(a * 1j))(np.ones(2)),
     jt.UnsupportedError, ["sort", "complex", "complex128"]),
    ("traced complex on cuda", lambda: jt.function(lambda a: a * 1j, target="cuda")(np.ones(2)),
     jt.UnsupportedError, ["multiply", "complex128", "target='cuda'"]),
    ("traced operand dtypes", lambda: jt.function(lambda a: -a)(L([True])),
     TypeError, ["negative", "unsupported operand dtypes", "(bool)"]),
    ("tape reads an alias", _tape_reads_an_alias,
     jt.UnsupportedError, ["GradientTape", "multiply", "NumPy array (float64[2])"]),
    # -- ops/random.py
    ("set_seed", lambda: R.set_seed(1.5), TypeError, ["set_seed", "integer", "1.5"]),
    ("shape array", lambda: R.uniform(np.ones((2, 2), int)),
     ValueError, ["uniform", "shape", "array([[1, 1], [1, 1]])"]),
    ("shape bool", lambda: R.uniform((2, True)), ValueError, ["uniform", "shape", "(2, True)"]),
    ("shape str", lambda: R.normal(("a",)), ValueError, ["normal", "shape", "('a',)"]),
    ("shape negative", lambda: R.uniform((2, -1)), ValueError, ["uniform", "shape", "(2, -1)"]),
    ("dtype invalid", lambda: R.uniform((2,), dtype="nope"),
     ValueError, ["uniform", "invalid dtype", "'nope'"]),
    ("dtype unsupported", lambda: R.uniform((2,), dtype=np.int8),
     ValueError, ["uniform", "dtype int8", "float32, float64, int32 and int64"]),
    ("not numeric", lambda: R.uniform((2,), minval="a"),
     TypeError, ["uniform", "minval", "numeric", "'a'"]),
    ("int bound not scalar", lambda: R.uniform((2,), minval=[0, 1], maxval=5, dtype=np.int32),
     ValueError, ["uniform", "minval", "scalar", "int32"]),
    ("int bound float", lambda: R.uniform((2,), minval=0.5, maxval=5, dtype=np.int32),
     TypeError, ["uniform", "minval", "integer", "int32", "0.5"]),
    ("int bound range", lambda: R.uniform((2,), maxval=2 ** 40, dtype=np.int32),
     ValueError, ["uniform", "maxval=1099511627776", "out of range for int32"]),
    ("not finite", lambda: R.normal((2,), mean=np.inf), ValueError, ["normal", "mean", "finite", "inf"]),
    ("maxval required", lambda: R.uniform((2,), dtype=np.int64),
     ValueError, ["uniform", "maxval", "required", "int64"]),
    ("empty range", lambda: R.uniform((2,), minval=5, maxval=5, dtype=np.int32),
     ValueError, ["uniform", "minval=5", "maxval=5"]),
    ("normal dtype", lambda: R.normal((2,), dtype=np.int32),
     ValueError, ["normal", "dtype int32", "float32 and float64"]),
    ("glorot dtype", lambda: R.glorot_uniform((2, 2), dtype=np.int64),
     ValueError, ["glorot_uniform", "dtype int64", "float32 and float64"]),
    # -- ops/indexing.py
    ("concatenate nothing", lambda: jnp.concatenate([]),
     ValueError, ["concatenate", "at least one tensor"]),
    ("concatenate 0-d", lambda: jnp.concatenate([c(1.0), c(2.0)]),
     jt.ShapeError, ["concatenate", "zero-dimensional", "shapes (), ()"]),
    ("concatenate shapes", lambda: jnp.concatenate([c(np.ones((2, 3))), c(np.ones((3, 2)))], axis=1),
     jt.ShapeError, ["concatenate", "(2, 3)", "(3, 2)", "outside axis 1"]),
    ("stack nothing", lambda: jnp.stack([]), ValueError, ["stack", "at least one tensor"]),
    ("stack shapes", lambda: jnp.stack([c(np.ones(2)), c(np.ones(3))]),
     jt.ShapeError, ["stack", "same shape", "(2,), (3,)"]),
    ("float index array", lambda: c(np.ones(3))[L([0.5])],
     jt.UnsupportedError, ["getitem", "integers or booleans", "float64"]),
    ("traced float index array", lambda: jt.function(lambda a, i: a[i])(np.ones(3), L([0.5])),
     jt.UnsupportedError, ["getitem", "must be integers", "float64"]),
    ("bare boolean index", lambda: c(np.ones(3))[True],
     jt.UnsupportedError, ["getitem", "bare boolean index (True)"]),
    ("index", lambda: c(np.ones((2, 3)))[1, 4],
     IndexError, ["getitem", "index 4", "axis 1", "size 3", "float64 (2, 3)"]),
    ("traced index", lambda: jt.function(lambda a: a[-4])(np.ones(3)),
     IndexError, ["getitem", "index -4", "size 3", "shape (3,)"]),
    ("compiled index array", lambda: _twice(jt.function(lambda a, i: a[i]), (np.ones(3), L([0])), (np.ones(3), L([0, 7]))),
     IndexError, ["getitem", "index 7", "axis 0", "size 3"]),
    ("compiled row update", lambda: _twice(jt.function(lambda a, i: a.at[i].set(1.0)),
                                           (np.ones((4, 2)), np.int64(0)), (np.ones((4, 2)), np.int64(4))),
     IndexError, ["set_row", "index 4", "is out of bounds for axis 0", "with size 4"]),
    # -- ops/linalg.py
    ("matmul 0-d", lambda: jnp.matmul(c(1.0), c(np.ones(2))),
     jt.ShapeError, ["matmul", "at least one axis", "() and (2,)"]),
    ("matmul vector", lambda: jnp.matmul(c(np.ones((2, 3))), c(np.ones(4))),
     jt.ShapeError, ["matmul", "(2, 3) and (4,)", "3 (last axis of the first) != 4 (only axis"]),
    ("compiled matmul sizes", lambda: _twice(jt.function(lambda a, b: a @ b), (np.ones((2, 3)), np.ones((3, 4))), (np.ones((2, 3)), np.ones((5, 4)))),
     ValueError, ["matmul", "(2, 3) and (5, 4)", "3 (last axis of the first) != 5"]),
    ("einsum options", lambda: np.einsum("ij->ji", c(np.ones((2, 3))), dtype=np.float32),
     jt.UnsupportedError, ["einsum", "dtype= not supported", "cast the operands first"]),
    ("sum keepdims", lambda: np.sum(c(np.ones(3)), 0, np.float32),
     TypeError, ["sum", "keepdims must be a bool", "dtype=..."]),
    ("sum out", lambda: np.sum(c(np.ones(3)), out=np.zeros(())),
     jt.UnsupportedError, ["sum", "out= is not supported"]),
    ("max where", lambda: np.max(c(np.ones(3)), where=np.array([True, False, True])),
     ValueError, ["max", "where= needs initial="]),
    ("einsum sublist type", lambda: np.einsum(c(np.ones((2, 3))), "ij", c(np.ones((3, 2))), [1, 2]),
     TypeError, ["einsum", "the axes after operand 0 must be a list", "str"]),
    ("einsum sublist axis", lambda: np.einsum(c(np.ones((2, 3))), [0, -1]),
     ValueError, ["einsum", "holds -1", "ints from 0 to 51"]),
    # -- ops/lapack.py: the decompositions
    ("eig not square", lambda: np.linalg.eig(c(np.ones((2, 3)))), jt.ShapeError, ["eig", "square", "(2, 3)"]),
    ("eigvals dtype", lambda: np.linalg.eigvals(c(np.array([["a"]]))), TypeError, ["eigvals", "unsupported dtype"]),
    ("eigh UPLO", lambda: np.linalg.eigh(c(np.eye(2)), "X"), ValueError, ["eigh", "UPLO", "'X'"]),
    ("eigh complex phases", _phase_loss, jt.UnsupportedError,
     ["eigh", "phases", "complex128 (2, 2)"]),
    ("svd complex compiled", lambda: jt.grad(lambda a: jt.sum(jt.abs(np.linalg.svd(a)[0])))(np.eye(2) * 1j),
     jt.UnsupportedError, ["svd", "eagerly only", "complex128 (2, 2)"]),
    ("eigh complex jvp", lambda: jt.jvp(lambda a: np.linalg.eigh(a)[1], (np.eye(2) * 1j,), (np.eye(2) * 1j,)),
     jt.UnsupportedError, ["eigh", "forward-mode", "complex128 (2, 2)"]),
    ("eigh not square", lambda: np.linalg.eigh(c(np.ones((2, 3)))), jt.ShapeError, ["eigh", "square", "(2, 3)"]),
    ("svd of a vector", lambda: np.linalg.svd(c(np.ones(3))), jt.ShapeError, ["svd", "at least two axes", "(3,)"]),
    ("svd full gradient", lambda: jt.grad(lambda a: jt.sum(np.linalg.svd(a)[0] ** 2))(np.eye(3, 2)),
     jt.UnsupportedError, ["svd", "full_matrices=True", "float64 (3, 2)", "pass full_matrices=False"]),
    ("qr wide gradient", lambda: jt.grad(lambda a: jt.sum(np.linalg.qr(a)[1]))(np.eye(2, 3)),
     jt.UnsupportedError, ["qr", "at least as many rows", "float64 (2, 3)"]),
    ("qr mode", lambda: np.linalg.qr(c(np.eye(2)), mode="raw"), jt.UnsupportedError, ["qr", "mode='raw'", "(2, 2)"]),
    ("pinv rcond per matrix", lambda: np.linalg.pinv(c(np.ones((2, 2, 2))), rcond=np.ones(2)),
     jt.UnsupportedError, ["pinv", "rcond must be one number", "(2,)"]),
    ("pinv rtol and rcond", lambda: np.linalg.pinv(c(np.eye(2)), 1e-10, rtol=1e-10), ValueError, ["pinv", "can't be both set", "(2, 2)"]),
    ("lstsq ranks", lambda: np.linalg.lstsq(c(np.ones((2, 3, 3))), c(np.ones(3))), jt.ShapeError, ["lstsq", "(2, 3, 3)", "(3,)"]),
    ("lstsq rows", lambda: np.linalg.lstsq(c(np.ones((3, 2))), c(np.ones(4))), jt.ShapeError, ["lstsq", "(3, 2)", "(4,)", "3 equations"]),
    ("matrix_power exponent", lambda: np.linalg.matrix_power(c(np.eye(2)), 1.5), TypeError, ["matrix_power", "integer", "1.5", "(2, 2)"]),
    ("multi_dot one array", lambda: np.linalg.multi_dot([c(np.eye(2))]), ValueError, ["multi_dot", "at least two arrays", "got 1"]),
    ("multi_dot 3-d", lambda: np.linalg.multi_dot([c(np.eye(2)), c(np.ones((2, 2, 2)))]), jt.ShapeError, ["multi_dot", "2-D", "(2, 2, 2)"]),
    ("multi_dot out", lambda: np.linalg.multi_dot([c(np.eye(2)), c(np.eye(2))], out=np.empty((2, 2))), jt.UnsupportedError, ["multi_dot", "out= is not supported"]),
    ("polygamma order", lambda: jt.scipy.special.polygamma(1.5, c(np.ones(2))),
     ValueError, ["polygamma", "non-negative int", "1.5"]),
    ("scipy.special ufunc", lambda: __import__("scipy.special").special.ellipk(c(np.ones(2))),
     jt.UnsupportedError, ["scipy.special.ellipk is not supported"]),
    ("logsumexp sign", lambda: jt.logsumexp(c(np.ones(2)), return_sign=True),
     jt.UnsupportedError, ["logsumexp", "return_sign=True"]),
    ("multigammaln order", lambda: jt.scipy.special.multigammaln(c(np.ones(2)), 0),
     ValueError, ["multigammaln", "dimension d must be a positive int", "0"]),
    ("multigammaln domain", lambda: jt.scipy.special.multigammaln(c(L([0.9, 3.0])), 3),
     ValueError, ["multigammaln", "(2,)", "greater than (d - 1) / 2 = 1.0", "0.9"]),
    ("gammainc gradient in a", lambda: jt.grad(lambda a: jt.sum(jt.gammainc(a, c(np.ones(3)))))(
        np.ones(3)), jt.UnsupportedError, ["gammainc", "with respect to a", "(3,)"]),
    ("multivariate_normal cov", lambda: jt.scipy.stats.multivariate_normal.logpdf(
        c(np.ones((4, 3))), c(np.ones(3)), c(np.eye(2))),
     jt.ShapeError, ["multivariate_normal.logpdf", "cov of shape (2, 2)", "3 dimensions"]),
    ("multivariate_normal x", lambda: jt.scipy.stats.multivariate_normal.logpdf(
        c(np.ones((4, 3))), c(np.ones(2)), c(np.eye(2))),
     jt.ShapeError, ["multivariate_normal.logpdf", "x of shape (4, 3)", "2 dimensions"]),
    ("multivariate_normal mean", lambda: jt.scipy.stats.multivariate_normal.logpdf(
        c(np.ones((4, 3))), c(np.ones((1, 3))), c(np.eye(3))),
     jt.ShapeError, ["multivariate_normal.logpdf", "mean must be a vector", "(1, 3)"]),
    ("dirichlet shapes", lambda: jt.scipy.stats.dirichlet.logpdf(c(np.ones((2, 3))), c(np.ones(3))),
     jt.ShapeError, ["dirichlet.logpdf", "alpha of shape (3,)", "x of shape (2, 3)"]),
    ("argmax keepdims", lambda: jnp.argmax(c(np.ones((2, 3))), keepdims=True),
     jt.UnsupportedError, ["argmax", "keepdims=True needs an axis"]),
    ("take_along_axis rank", lambda: jnp.take_along_axis(c(np.ones((2, 3))), L([0, 1]), axis=1),
     jt.ShapeError, ["take_along_axis", "(2,)", "(2, 3)"]),
    ("cross components", lambda: jnp.cross(c(np.ones(2)), c(np.ones(2))),
     jt.ShapeError, ["cross", "3 components", "(2,)"]),
    ("dsplit rank", lambda: jnp.dsplit(c(np.ones((2, 2))), 2),
     jt.ShapeError, ["dsplit", "3 or more dimensions", "(2, 2)"]),
    ("select lengths", lambda: jnp.select([c(np.ones(2)) > 0], []),
     ValueError, ["select", "1 conditions but 0 choices"]),
    ("einsum ellipsis rank", lambda: jnp.einsum("...ij->i", c(np.ones(2))),
     jt.ShapeError, ["einsum", "'...ij'", "more axes than its shape (2,)"]),
    ("einsum ellipsis operands", lambda: jnp.einsum("...i,i->i", c(np.ones(2))),
     jt.UnsupportedError, ["einsum", "names 2 operands, 1 given"]),
    ("einsum operands", lambda: jnp.einsum("i,i", c(np.ones(2)), c(np.ones(2)), c(np.ones(2))),
     jt.UnsupportedError, ["einsum", "'i,i'", "3 operands"]),
    ("einsum repeated output", lambda: jnp.einsum("i->ii", c(np.ones(2))),
     jt.UnsupportedError, ["einsum", "repeated index", "'ii'"]),
    ("einsum diagonal sizes", lambda: jnp.einsum("iij->j", c(np.ones((2, 3, 4)))),
     jt.ShapeError, ["einsum", "index 'i' of 'iij'", "sizes 2 and 3"]),
    ("einsum diagonal rank", lambda: jnp.einsum("iij->j", c(np.ones((2, 2)))),
     jt.ShapeError, ["einsum", "'iij'", "names 3 axes", "(2, 2)"]),
    ("einsum output", lambda: jnp.einsum("i->j", c(np.ones(2))),
     jt.ShapeError, ["einsum", "output index ['j']", "'i->j'"]),
    ("einsum rank", lambda: jnp.einsum("ij->i", c(np.ones(2))),
     jt.ShapeError, ["einsum", "'ij'", "2 indices", "shape (2,)", "rank 1"]),
    ("einsum sizes", lambda: jnp.einsum("ij,jk->ik", c(np.ones((2, 3))), c(np.ones((4, 2)))),
     jt.ShapeError, ["einsum", "index 'j'", "sizes 3 and 4", "(2, 3), (4, 2)"]),
    ("cuda matmul dtypes", lambda: jt.function(lambda a, b: a @ b, target="cuda")(np.ones((2, 2), int), np.ones((2, 2), int)),
     jt.UnsupportedError, ["target='cuda'", "matmul", "int64 and int64"]),
    # -- ops/shape.py
    ("reshape two -1", lambda: jnp.reshape(c(np.ones(6)), (-1, -1)),
     jt.ShapeError, ["reshape", "more than one -1", "(-1, -1)"]),
    ("reshape -1", lambda: jnp.reshape(c(np.ones(6)), (4, -1)),
     jt.ShapeError, ["reshape", "(6,)", "6 elements", "(4, -1)"]),
    ("reshape", lambda: c(np.ones((2, 3))).reshape((5,)),
     jt.ShapeError, ["reshape", "(2, 3)", "6 elements", "(5,)"]),
    ("transpose", lambda: jnp.transpose(c(np.ones((2, 3))), (1, 0, 0)),
     jt.ShapeError, ["transpose", "(1, 0, 0)", "(2, 3)"]),
    ("transpose axes", lambda: jnp.transpose(c(np.ones((2, 3))), (3, 2)),
     jt.ShapeError, ["transpose", "axes (3, 2) are out of range", "(2, 3)", "rank 2"]),
    ("broadcast_to", lambda: jnp.broadcast_to(c(np.ones((2, 3))), (3, 3)),
     jt.ShapeError, ["broadcast_to", "(2, 3)", "(3, 3)"]),
    ("squeeze", lambda: jnp.squeeze(c(np.ones((2, 3))), axis=1),
     jt.ShapeError, ["squeeze", "axis 1", "(2, 3)", "size 3"]),
    # -- ops/reduce.py
    ("max of empty", lambda: jnp.max(c(np.ones((0, 3))), axis=0),
     jt.ShapeError, ["max", "zero-size array", "maximum", "shape (0, 3)", "axis (0,)"]),
    ("compiled max of empty", lambda: _twice(jt.function(lambda a: a.max(axis=0)), (np.ones((2, 3)),), (np.ones((0, 3)),)),
     ValueError, ["max", "zero-size array", "axis (0,) is empty in this call"]),
    ("mean axis of 0-d", lambda: jnp.mean(c(1.0), axis=0),
     jt.ShapeError, ["mean", "axis 0", "rank 0"]),
    # -- ops/elementwise.py
    ("where one argument", lambda: jnp.where(c(np.ones(2))),
     jt.UnsupportedError, ["where", "one-argument form", "x and y"]),
    ("round into out", lambda: np.round(c(np.ones(2)), 1, out=np.empty(2)),
     jt.UnsupportedError, ["round", "out=", "shape (2,)"]),
    # -- ops/nn.py
    ("label", lambda: jt.sparse_softmax_cross_entropy(L([0, 3]), c(np.ones((2, 3)))),
     IndexError, ["sparse_softmax_cross_entropy", "label 3", "[0, 3)"]),
    ("traced float labels", lambda: jt.function(jt.sparse_softmax_cross_entropy)(L([0.0]), np.ones((1, 3))),
     TypeError, ["sparse_softmax_cross_entropy", "labels must be integers", "float64"]),
    ("compiled label", lambda: _twice(jt.function(lambda l, z: jt.sparse_softmax_cross_entropy(l, z)), (L([0]), np.ones((1, 3))), (L([4]), np.ones((1, 3)))),
     IndexError, ["sparse_softmax_cross_entropy", "label 4", "[0, 3)"]),
    ("label of a graph run on NumPy", lambda: jt.function(jt.sparse_softmax_cross_entropy).lower(L([0]), np.ones((1, 3))).numpy(L([-1]), np.ones((1, 3))),
     IndexError, ["sparse_softmax_cross_entropy", "label -1", "[0, 3)"]),
    # -- ops/creation.py
    ("full complex", lambda: jt.full((2,), 1j), jt.UnsupportedError, ["jt.full", "complex", "complex128"]),
    ("full_like complex", lambda: jt.full_like(c(np.ones(2)), np.complex64(1j)),
     jt.UnsupportedError, ["jt.full_like", "complex", "complex64"]),
    # -- control.py
    ("carry structure", lambda: jt.scan(lambda s, x: ((s, s), x), 0.0, np.ones(3)),
     TypeError, ["scan", "another structure", "step 0", "2 children", "expected"]),
    ("carry type", lambda: jt.fori_loop(0, 3, lambda i, s: s * np.ones(2), 1.0),
     TypeError, ["fori_loop", "carry leaf 0", "from float to float64[2]"]),
    ("xs without a leading axis", lambda: jt.scan(lambda s, x: (s, x), 0.0, [np.ones(2), 1.0]),
     ValueError, ["scan", "leading axis", "shapes (2,), ()"]),
    ("scan without length", lambda: jt.scan(lambda s, x: (s, x), 0.0, None),
     ValueError, ["scan", "length=", "xs is None"]),
    ("scan lengths", lambda: jt.scan(lambda s, x: (s, x), 0.0, np.ones(3), length=4),
     ValueError, ["scan", "leading sizes and length disagree", "[3, 4]"]),
    ("scan of nothing", lambda: jt.scan(lambda s, x: (s, x), 0.0, np.ones(0)),
     ValueError, ["scan", "length 0"]),
    ("scan checkpoint", lambda: jt.scan(lambda s, x: (s, x), 0.0, np.ones(3), checkpoint=0),
     ValueError, ["scan", "checkpoint=0"]),
    ("scan unroll and checkpoint", lambda: jt.function(lambda a: jt.scan(lambda s, x: (s + x, x), 0.0, a, unroll=2, checkpoint=2)[0])(np.ones(5)),
     ValueError, ["scan", "unroll or checkpoint", "unroll=2", "checkpoint=2"]),
    ("cond pred", lambda: jt.cond(np.ones(2), lambda: 1.0, lambda: 2.0),
     TypeError, ["cond", "pred", "scalar", "(2,)"]),
    ("switch without branches", lambda: jt.switch(0, []), ValueError, ["switch", "no branches"]),
    ("switch float index", lambda: jt.function(lambda i: jt.switch(i, [lambda: 1.0, lambda: 2.0]))(1.5),
     TypeError, ["switch", "index", "integer", "float64"]),
    # -- regions.py
    ("branch on a loop value", _branch_in_a_loop,
     jt.errors.TracerError, ["Python branch", "jt.scan", "jt.cond"]),
    ("second derivative of while_loop", lambda: jt.hessian(_power)(1.5),
     jt.UnsupportedError, ["jt.while_loop", "second derivative"]),
    ("scan body result", lambda: jt.function(lambda a: jt.scan(lambda s, x: s + x, 0.0, a))(np.ones(3)),
     TypeError, ["scan", "pair (carry, y)", "got float64[]"]),
    ("variable assigned in a loop", _assigns_in_a_loop,
     jt.UnsupportedError, ["scan", "variable assigned in a loop body"]),
    ("random draw in a loop", lambda: jt.function(lambda a: jt.scan(lambda s, x: (s + R.normal(()), x), 0.0, a)[0])(np.ones(3)),
     jt.UnsupportedError, ["scan", "random draw in a loop body"]),
    ("while_loop condition shape", lambda: jt.function(lambda a: jt.while_loop(lambda s: s < 3, lambda s: s + 1, a))(np.ones(2)),
     TypeError, ["while_loop", "cond_fun", "scalar", "shape (2,)"]),
    ("while_loop constant condition", lambda: jt.function(lambda a: jt.while_loop(lambda s: True, lambda s: s + 1, a))(1.0),
     ValueError, ["while_loop", "does not depend on the carry"]),
    ("cond branches", lambda: jt.function(lambda p, a: jt.cond(p > 0, lambda: a, lambda: a[:2]))(1.0, np.ones(3)),
     TypeError, ["cond", "true_fun returns", "float64[3]", "false_fun ['float64[2]']"]),
    ("switch branches", lambda: jt.function(lambda i, a: jt.switch(i, [lambda: a, lambda: a.sum()]))(L(1), np.ones(3)),
     TypeError, ["switch", "branch 1 returns", "float64[]", "branch 0 ['float64[3]']"]),
    # -- NumPy's shape functions, statistics, joins and splits (shape.py, reduce.py,
    # indexing.py, linalg.py)
    ("stack a 0-d tensor", lambda: jnp.vstack(c(np.float64(1.0))), TypeError, ["vstack", "sequence", "0-d tensor"]),
    ("hstack nothing", lambda: jnp.hstack([]), ValueError, ["hstack", "need at least one array"]),
    ("array_split sections", lambda: jnp.array_split(c(np.ones(4)), 0), jt.ShapeError, ["array_split", "number sections must be larger than 0", "(4,)"]),
    ("split unequal", lambda: jnp.split(c(np.ones((2, 3))), 2, axis=1), jt.ShapeError, ["split", "equal division", "size 3", "(2, 3)"]),
    ("vsplit 1-d", lambda: jnp.vsplit(c(np.ones(4)), 2), jt.ShapeError, ["vsplit", "2 or more dimensions", "(4,)"]),
    ("hsplit 0-d", lambda: jnp.hsplit(c(1.0), 2), jt.ShapeError, ["hsplit", "1 or more dimensions", "()"]),
    ("diagonal of a vector", lambda: jnp.diagonal(c(np.ones(3))), jt.ShapeError, ["diagonal", "at least two dimensions", "(3,)"]),
    ("trace same axes", lambda: jnp.trace(c(np.ones((2, 2))), 0, 1, -1), jt.ShapeError, ["trace", "axis1 and axis2 cannot be the same", "(2, 2)"]),
    ("diag of 3-d", lambda: jnp.diag(c(np.ones((2, 2, 2)))), jt.ShapeError, ["diag", "1- or 2-d", "(2, 2, 2)"]),
    ("triangle of 0-d", lambda: jnp.tril(c(1.0)), jt.ShapeError, ["tril", "0-d", "()"]),
    ("tensordot axes count", lambda: jnp.tensordot(c(np.ones((2, 3))), c(np.ones((3, 2))), axes=([1], [0, 1])), jt.ShapeError, ["tensordot", "shape-mismatch", "(2, 3)", "(3, 2)"]),
    ("tensordot sizes", lambda: jnp.tensordot(c(np.ones((2, 3))), c(np.ones((2, 3))), axes=1), jt.ShapeError, ["tensordot", "shape-mismatch", "(2, 3)"]),
    ("tensordot too many axes", lambda: jnp.tensordot(c(np.ones((1,) * 30)), c(np.ones((1,) * 30)), axes=0), jt.UnsupportedError, ["tensordot", "too many axes", "(1, 1"]),
    ("inner sizes", lambda: jnp.inner(c(np.ones((2, 3))), c(np.ones(2))), jt.ShapeError, ["inner", "(2, 3)", "(2,)", "not aligned"]),
    ("out=", lambda: jnp.var(c(np.ones(3)), out=np.empty(())), jt.UnsupportedError, ["var", "out= is not supported"]),
    ("average without axis", lambda: jnp.average(c(np.ones((2, 3))), weights=c(np.ones(3))), TypeError, ["average", "axis must be specified", "(2, 3)", "(3,)"]),
    ("average weights rank", lambda: jnp.average(c(np.ones((2, 3))), axis=1, weights=c(np.ones((1, 3)))), TypeError, ["average", "1D weights", "(1, 3)"]),
    ("average weights length", lambda: jnp.average(c(np.ones((2, 3))), axis=0, weights=c(np.ones(3))), jt.ShapeError, ["average", "Length of weights", "(2, 3)", "(3,)"]),
    ("moveaxis repeated", lambda: jnp.moveaxis(c(np.ones((2, 3))), (0, -2), (0, 1)), jt.ShapeError, ["moveaxis", "repeated axis", "source"]),
    ("moveaxis lengths", lambda: jnp.moveaxis(c(np.ones((2, 3))), (0, 1), 0), jt.ShapeError, ["moveaxis", "same number of elements", "(2, 3)"]),
    ("ravel order", lambda: jnp.ravel(c(np.ones((2, 3))), order="F"), jt.UnsupportedError, ["ravel", "order='F'", "(2, 3)"]),
    ("rollaxis start", lambda: jnp.rollaxis(c(np.ones((2, 3))), 0, 4), jt.ShapeError, ["rollaxis", "'start' arg requires -2 <= start < 3", "(2, 3)"]),
    ("fliplr 1-d", lambda: jnp.fliplr(c(np.ones(3))), jt.ShapeError, ["fliplr", ">= 2-d", "(3,)"]),
    ("flipud 0-d", lambda: jnp.flipud(c(1.0)), jt.ShapeError, ["flipud", ">= 1-d", "()"]),
    ("rot90 axes length", lambda: jnp.rot90(c(np.ones((2, 3))), axes=(0,)), jt.ShapeError, ["rot90", "len(axes) must be 2", "(0,)"]),
    ("rot90 same axes", lambda: jnp.rot90(c(np.ones((2, 3))), axes=(1, -1)), jt.ShapeError, ["rot90", "Axes must be different", "(1, -1)"]),
    ("rot90 axes range", lambda: jnp.rot90(c(np.ones((2, 3))), axes=(0, 3)), jt.ShapeError, ["rot90", "out of range for array of ndim=2", "(2, 3)"]),
    ("roll shift and axis", lambda: jnp.roll(c(np.ones((2, 3))), (1, 2, 3), axis=(0, 1)), jt.ShapeError, ["roll", "cannot be broadcast together", "(2, 3)"]),
    ("tile negative", lambda: jnp.tile(c(np.ones(3)), -1), jt.ShapeError, ["tile", "negative repetitions", "(3,)"]),
    ("repeat floats", lambda: jnp.repeat(c(np.ones(3)), 1.5), jt.UnsupportedError, ["repeat", "repeats must be an int", "float64", "(3,)"]),
    ("repeat negative", lambda: jnp.repeat(c(np.ones(3)), -1), jt.ShapeError, ["repeat", "negative repeats", "(3,)"]),
    ("repeat counts", lambda: jnp.repeat(c(np.ones(3)), [1, 2]), jt.ShapeError, ["repeat", "2 repeats for axis 0 of size 3", "(3,)"]),
    ("pad width form", lambda: jnp.pad(c(np.ones((2, 3))), ((1, 2, 3),)), jt.ShapeError, ["pad", "pad_width", "cannot be broadcast to (2, 2)", "(2, 3)"]),
    ("pad mode", lambda: jnp.pad(c(np.ones(3)), 1, mode="reflect"), jt.UnsupportedError, ["pad", "mode 'reflect'", "(3,)"]),
    ("pad keywords", lambda: jnp.pad(c(np.ones(3)), 1, stat_length=2), ValueError, ["pad", "unsupported keyword", "stat_length", "(3,)"]),
    ("pad width dtype", lambda: jnp.pad(c(np.ones(3)), 1.5), TypeError, ["pad", "integral type", "float64", "(3,)"]),
    ("pad negative", lambda: jnp.pad(c(np.ones(3)), -1), jt.ShapeError, ["pad", "negative values", "-1", "(3,)"]),
    ("diff order", lambda: jnp.diff(c(np.ones(3)), n=-1), jt.ShapeError, ["diff", "order must be non-negative", "-1", "(3,)"]),
    ("diff 0-d", lambda: jnp.diff(c(1.0)), jt.ShapeError, ["diff", "at least one dimensional", "()"]),
    ("cumsum axis", lambda: jnp.cumsum(c(np.ones((2, 3))), axis=2), jt.ShapeError, ["cumsum", "axis 2", "rank 2", "(2, 3)"]),
    # -- ops/sorting.py
    ("sort axis", lambda: np.sort(c(np.ones((2, 3))), axis=2), jt.ShapeError, ["sort", "axis 2", "rank 2", "(2, 3)"]),
    ("sort 0-d", lambda: np.sort(c(1.0)), jt.ShapeError, ["sort", "axis -1", "rank 0", "()"]),
    ("sort order", lambda: np.sort(c(np.ones(3)), order="x"), jt.UnsupportedError, ["sort", "order=", "(3,)"]),
    ("partition kth", lambda: np.partition(c(np.ones((2, 3))), 3), jt.ShapeError, ["partition", "kth(=3)", "(2, 3)"]),
    ("argpartition kth type", lambda: np.argpartition(c(np.ones(3)), 1.5), TypeError, ["argpartition", "kth must be integers", "1.5", "(3,)"]),
    ("searchsorted 2-d", lambda: np.searchsorted(c(np.ones((2, 2))), c(np.ones(3))), jt.ShapeError, ["searchsorted", "1-D", "(2, 2)", "(3,)"]),
    ("searchsorted side", lambda: np.searchsorted(c(np.ones(3)), 1.0, side="middle"), ValueError, ["searchsorted", "'left' or 'right'", "'middle'"]),
    ("median out=", lambda: np.median(c(np.ones(3)), out=np.empty(())), jt.UnsupportedError, ["median", "out= is not supported"]),
    ("median axis", lambda: np.median(c(np.ones((2, 3))), axis=(0, 2)), jt.ShapeError, ["median", "axis 2", "(2, 3)"]),
    ("quantile range", lambda: np.quantile(c(np.ones(3)), 1.5), ValueError, ["quantile", "range [0, 1]", "1.5"]),
    ("percentile range", lambda: np.percentile(c(np.ones(3)), [50, 101]), ValueError, ["percentile", "range [0, 100]", "101"]),
    ("quantile method", lambda: np.quantile(c(np.ones(3)), 0.5, method="inverted_cdf"), jt.UnsupportedError, ["quantile", "'inverted_cdf'", "(3,)"]),
    ("quantile weights", lambda: np.quantile(c(np.ones(3)), 0.5, weights=np.ones(3)), jt.UnsupportedError, ["quantile", "weights=", "(3,)"]),
    ("quantile traced q", lambda: jt.function(lambda a, q: np.quantile(a, q))(np.ones(3), np.float64(0.5)), jt.UnsupportedError, ["quantile", "q must be known", "()"]),
    ("quantile empty", lambda: np.quantile(c(np.ones((2, 0))), 0.5, axis=1), IndexError, ["quantile", "no element", "(2, 0)"]),
    ("quantile bool", lambda: np.quantile(c(np.ones(3, bool)), 0.5), TypeError, ["quantile", "unsupported dtype bool", "(3,)"]),
    ("r_ directive", lambda: jnp.r_[c(np.ones(2)), "0,2"], ValueError, ["r_/c_", "special directives must be the first"]),
    ("r_ matrix", lambda: jnp.r_["r", c(np.ones(2))], jt.UnsupportedError, ["r_/c_", "'r'", "np.matrix"]),
    ("gradient spacing", lambda: jnp.gradient(c(np.ones(4)), np.ones(4)), jt.UnsupportedError, ["gradient", "one number or one per axis", "(4,)"]),
    ("gradient edge order", lambda: jnp.gradient(c(np.ones(4)), edge_order=3), ValueError, ["gradient", "edge_order 3"]),
    ("gradient too small", lambda: jnp.gradient(c(np.ones(2)), edge_order=2), jt.ShapeError, ["gradient", "(2,)", "too small along axis 0", "at least (edge_order + 1) = 3"]),
    ("linspace traced axis", lambda: jnp.linspace(c(0.0), c(np.ones(2)), 3, axis=1), jt.UnsupportedError, ["linspace", "retstep and axis", "() and (2,)"]),
    ("real_if_close traced", lambda: jt.function(lambda z: jnp.real_if_close(z))(np.ones(2, np.complex128)), jt.UnsupportedError, ["real_if_close", "traced complex value", "(2,)"]),
    ("jv gradient in v", lambda: jt.grad(lambda v: jt.sum(jt.jv(v, c(np.ones(3)))))(np.ones(3)), jt.UnsupportedError, ["jv", "the order v", "(3,) and (3,)"]),
    ("nanquantile method", lambda: np.nanquantile(c(np.ones(3)), 0.5, method="lower"), jt.UnsupportedError, ["nanquantile", "'lower'", "(3,)"]),
    # -- ops/fourier.py
    ("fft dtype", lambda: np.fft.fft(c(np.ones(3, np.longdouble))), TypeError, ["fft", "unsupported dtype float128", "(3,)"]),
    ("fft empty axis", lambda: np.fft.fft(c(np.ones((2, 0)))), jt.ShapeError, ["fft", "Invalid number of FFT data points (0)", "(2, 0)"]),
    ("rfft complex", lambda: np.fft.rfft(c(L([1j, 2.0]))), TypeError, ["rfft", "complex", "complex128", "(2,)"]),
    ("fft out=", lambda: np.fft.fft(c(np.ones(3)), out=np.empty(3, complex)), jt.UnsupportedError, ["fft", "out= is not supported", "(3,)"]),
    ("fft norm", lambda: np.fft.ifft(c(np.ones(3)), norm="both"), ValueError, ["ifft", "Invalid norm value 'both'", "(3,)"]),
    ("fft n", lambda: np.fft.rfft(c(np.ones(3)), n=-1), jt.ShapeError, ["rfft", "Invalid number of FFT data points (-1)", "(3,)"]),
    ("fft n type", lambda: np.fft.fft(c(np.ones(3)), n=2.5), TypeError, ["fft", "must be an integer", "2.5", "(3,)"]),
    ("fftn s and axes", lambda: np.fft.fftn(c(np.ones((2, 3))), s=(2, 3), axes=(0,)), ValueError, ["fftn", "Shape and axes have different lengths", "(2, 3)"]),
    ("rfftn no axis", lambda: np.fft.rfftn(c(np.ones((2, 3))), axes=()), jt.ShapeError, ["rfftn", "no axis to transform", "(2, 3)"]),
    ("irfftn no axis", lambda: np.fft.irfftn(c(np.ones((2, 3))), axes=()), jt.ShapeError, ["irfftn", "no axis to transform", "(2, 3)"]),
    ("fft without rocket-fft", _compiled_without_rocket_fft, jt.UnsupportedError, ["fft", "pip install rocket-fft", "(4,)"]),
]

_SEEN = {}       # row name -> the message it raised (for the test of the raise sites)


def _raise(name, call, kind):
    with pytest.raises(kind) as err:
        call()
    _SEEN[name] = str(err.value)
    return err.value


@pytest.mark.parametrize("name, call, kind, words", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_names_the_op_the_sizes_and_the_users_line(name, call, kind, words):
    assert_first_line_names(_raise(name, call, kind), call, words, __file__)


# -- every raise site is a row's or named unreachable -------------------------------

_PACKAGE = os.path.dirname(jt.__file__)
MODULES = ["ops/core.py", "ops/random.py", "ops/indexing.py", "ops/linalg.py", "ops/shape.py",
           "ops/reduce.py", "ops/elementwise.py", "ops/nn.py", "ops/creation.py",
           "ops/methods.py", "ops/sorting.py", "ops/fourier.py", "control.py", "regions.py"]
# where the texts of raises that call a helper (complex_error) are written
HELPER_MODULES = MODULES + ["tensor.py"]
FRAGMENT = 12        # the shortest literal part of a message that identifies it


def _literals(node):
    return [n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) >= FRAGMENT]


def _functions():
    """Function name -> the literal parts of what its return statements return."""
    found = {}
    for module in HELPER_MODULES:
        with open(os.path.join(_PACKAGE, module)) as f:
            tree = ast.parse(f.read())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                for ret in ast.walk(fn):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        found.setdefault(fn.name, []).extend(_literals(ret.value))
    return found


def _raise_sites():
    """(file:line, the raise's source, its message's literal parts of >= FRAGMENT
    characters): those written in the raise, else those of the variable it raises with
    (assigned in its function) or of the helper function it calls."""
    helpers, sites = _functions(), []
    for module in MODULES:
        path = os.path.join(_PACKAGE, module)
        with open(path) as f:
            tree = ast.parse(f.read())
        scopes = [fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)] + [tree]
        for scope in scopes:
            inner = [n for fn in ast.iter_child_nodes(scope) for n in ast.walk(fn)
                     if isinstance(n, ast.FunctionDef)]
            nested = {id(n) for fn in inner for n in ast.walk(fn)}
            for node in ast.walk(scope):
                if not isinstance(node, ast.Raise) or node.exc is None or id(node) in nested:
                    continue
                parts = _literals(node.exc)
                if not parts:
                    names = {n.id for n in ast.walk(node.exc) if isinstance(n, ast.Name)}
                    for assign in ast.walk(scope):
                        if isinstance(assign, ast.Assign) and any(
                                isinstance(t, ast.Name) and t.id in names for t in assign.targets):
                            parts += _literals(assign.value)
                    for call in ast.walk(node.exc):
                        if isinstance(call, ast.Call):
                            func = call.func
                            parts += helpers.get(getattr(func, "id", getattr(func, "attr", None)), [])
                sites.append((f"{os.path.basename(module)}:{node.lineno}", ast.unparse(node.exc),
                              parts))
    return sorted(set((w, s, tuple(p)) for w, s, p in sites))


def test_every_raise_site_is_a_rows_or_not_the_users():
    for name, call, kind, _ in CASES:      # rows not run in this session (-k, one test)
        if name not in _SEEN:
            _raise(name, call, kind)
    messages = list(_SEEN.values())
    sites = _raise_sites()
    assert len(sites) >= 80                # (the walk finds them)
    listed_used = set()
    missing = []
    for where, source, parts in sites:
        listed = [key for key in NOT_USER_MESSAGES
                  if where.startswith(key.split(":")[0] + ":") and key.split(": ", 1)[1] in source]
        listed_used.update(listed)
        if listed:
            continue
        if not parts:
            missing.append(f"{where}: no literal text to recognise: {source}")
            continue
        absent = [p for p in parts if not any(p in m for m in messages)]
        if absent:
            missing.append(f"{where}: no row raises {absent!r}")
    assert not missing, "\n".join(missing)
    assert listed_used == set(NOT_USER_MESSAGES), set(NOT_USER_MESSAGES) - listed_used



def test_transpose_axes_in_range_count_from_the_end():
    # out-of-range axes were taken modulo the rank (a row above raises for them)
    assert jt.transpose(jt.constant(np.ones((2, 3))), (-1, 0)).shape == (3, 2)
