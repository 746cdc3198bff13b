"""HIPS autograd's own test suite, run against jittape.

What it measures: the share of autograd 1.9.1's tests (the ``tests/`` folder of its
sdist) that pass when ``autograd`` is an adapter over jittape, once with eager tapes and
once with jittape's compiled transforms.

How:
1. ``pip download autograd==1.9.1 --no-deps --no-binary :all:`` (or ``--sdist PATH``);
   only the sdist's ``tests/`` folder is extracted, into a temporary directory.
2. A package named ``autograd`` is written into another temporary directory and put
   first on the path of a pytest subprocess. It holds none of autograd's code:
   ``autograd.numpy`` is NumPy's namespace in which a function of ``jittape.numpy``'s
   runs whenever an argument is a jittape tensor (NumPy's own otherwise, as autograd's
   wrappers do for values it does not trace; NumPy functions that jittape has no name
   for reach it through ``__array_function__``/``__array_ufunc__``); ``autograd.scipy``
   is SciPy with ``jt.scipy.special``'s functions; ``make_vjp`` and ``make_jvp`` are a
   persistent ``GradientTape`` with ``output_gradients`` and a ``ForwardAccumulator``
   (eager), or ``jt.grad`` of the output's inner product with the cotangent and
   ``jt.jvp`` (compiled, run as generated Python: ``NUMBA_DISABLE_JIT=1``); ``grad``,
   ``jacobian``, ``hessian``... are autograd's compositions of those two; and
   ``autograd.test_util`` is autograd's checking logic (random projections against
   central differences) rewritten on them. Complex gradients are conjugated: jittape's
   convention is TensorFlow's, ``dL/dx + i dL/dy``, autograd's its conjugate.
3. Tests of autograd's own machinery (its tracer, vector spaces, primitive registry,
   utilities and wrapper metadata) are not applicable: ``NOT_APPLICABLE`` lists them
   with the reason. A test the adapter cannot express for lack of a jittape feature
   (complex numbers, an op) is applicable and counts as failed.
4. Per-test outcomes come from pytest's ``--junitxml``; a plugin of this script gives
   each test a time limit and records the gradients jittape reported lost
   (``GradientLostWarning``), which explain many wrong-gradient failures.

Results: ``benchmarks/results/autograd_suite.json`` (per mode: applicable, passed,
failed, errors, pass rate, each failure's id and first line, the failures grouped by
cause) and a summary on stdout.

    python benchmarks/autograd_suite.py [--mode eager|compiled|both] [--sdist PATH] [-k EXPR]
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

AUTOGRAD_VERSION = "1.9.1"
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "autograd_suite.json")

# Test files and tests that exercise autograd's own machinery rather than the
# differentiation of NumPy code, with the reason each one is left out.
NOT_APPLICABLE = {
    "test_vspaces.py": "autograd's VSpace classes (autograd.core.vspace): its internal "
                       "vector-space representation of values",
    "test_tests.py": "checks that check_grads catches wrong VJPs defined with autograd's "
                     "primitive/defvjp (autograd's primitive registry)",
    "test_misc.py": "autograd.misc (const_graph caches autograd's traced graph; flatten is "
                    "autograd's own utility) and autograd.tracer.primitive",
    "test_logic.py::test_no_vjp_def": "autograd.extend.primitive without a VJP (autograd's "
                                      "primitive registry)",
    "test_logic.py::test_no_jvp_def": "autograd.extend.primitive without a JVP (autograd's "
                                      "primitive registry)",
    "test_logic.py::test_unimplemented_falseyness": "removes an entry of autograd.core."
                                                    "primitive_vjps (autograd's registry)",
    "test_wrappers.py::test_deprecated_defgrad_wrapper": "autograd.core.primitive's "
                                                         "deprecated defgrad method",
    "test_wrappers.py::test_deprecated_defvjp_wrapper": "autograd.core.primitive's "
                                                        "deprecated defvjp method",
    "test_wrappers.py::test_deprecated_defvjp_is_zero_wrapper": "autograd.core.primitive's "
                                                                "deprecated defvjp_is_zero",
    "test_wrappers.py::test_deprecated_quick_grad_check_wrapper": "autograd.util."
                                                                  "quick_grad_check, a "
                                                                  "deprecated autograd helper",
    "test_wrappers.py::test_wrapped_name_and_docs": "the __name__ and __doc__ autograd's "
                                                    "wrappers give grad and its results",
    "test_wrappers.py::test_custom_where_dtypes": "result types of autograd.numpy.where on "
                                                  "plain values (autograd's wrapper of "
                                                  "NumPy, no tensor or gradient involved)",
    "test_wrappers.py::test_custom_where": "autograd.numpy.where's keyword forms on plain "
                                           "values (autograd's wrapper of NumPy, no tensor "
                                           "or gradient involved)",
    "test_numpy.py::test_make_diagonal": "autograd.numpy.make_diagonal, autograd's own "
                                         "function (NumPy has none)",
    "test_scipy.py::test_convolve_generalization": "the axes/dot_axes arguments of autograd's "
                                                   "own convolve (SciPy's has none)",
    "test_scipy.py::test_convolve_ignore": "the axes/dot_axes arguments of autograd's own "
                                           "convolve (SciPy's has none)",
    "test_scipy.py::test_convolve_ignore_dot": "the axes/dot_axes arguments of autograd's own "
                                               "convolve (SciPy's has none)",
    "test_fft.py::test_rfftn_odd_not_implemented": "expects autograd's NotImplementedError for "
                                                   "rfftn's gradient over an odd last axis "
                                                   "(autograd's gap: jittape computes it)",
}

# The adapter. One module holds all of it so that the rest of the shim package is
# re-exports; the mode comes from the environment of the pytest subprocess.
ADAPTER = r'''
"""jittape behind autograd's interface (written by benchmarks/autograd_suite.py)."""
import os
import warnings
from functools import partial
from itertools import product

import numpy as onp

import jittape as jt

MODE = os.environ.get("AUTOGRAD_SUITE_MODE", "eager")
# How many make_vjp/make_jvp calls are under way: values leave the adapter as NumPy
# arrays only at the outermost level; inside, they stay tensors (or tracers), so that
# an enclosing tape, accumulator or trace sees what is done with them.
_depth = [0]


class NotApplicable(NotImplementedError):
    """An internal of autograd that the adapter does not provide."""


def _internal(name):
    def stub(*args, **kwargs):
        raise NotApplicable(f"{name} is an internal of autograd; the jittape adapter has none")
    stub.__name__ = name
    return stub


# ---- pytrees: autograd's containers are tuples, lists and dicts ----

def _map(f, tree):
    if isinstance(tree, dict):
        return {k: _map(f, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)) and not hasattr(tree, "_fields"):
        return type(tree)(_map(f, v) for v in tree)
    if isinstance(tree, tuple):                         # a named tuple (eigh's result)
        return type(tree)(*(_map(f, v) for v in tree))
    return f(tree)


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for k in tree for leaf in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def _has_tensor(tree, depth=0):
    if isinstance(tree, jt.Tensor):
        return True
    if depth < 3 and isinstance(tree, (tuple, list)):
        return any(_has_tensor(v, depth + 1) for v in tree)
    if depth < 3 and isinstance(tree, dict):
        return any(_has_tensor(v, depth + 1) for v in tree.values())
    return False


def _inexact(v):
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        return isinstance(v, (float, complex))
    return onp.dtype(dtype).kind in "fc"


def _is_complex(v):
    dtype = getattr(v, "dtype", None)
    return isinstance(v, complex) if dtype is None else onp.dtype(dtype).kind == "c"


def _conj(v):
    # autograd's cotangent of a complex value is the conjugate of jittape's
    # (TensorFlow's dL/dx + i dL/dy): conjugate on the way in and out
    return onp.conjugate(v) if _is_complex(v) else v


def _export(tree):
    if _depth[0]:
        return tree
    return _map(lambda v: v.numpy() if isinstance(v, jt.Tensor) else v, tree)


def _dtype(v):
    dtype = getattr(v, "dtype", None)
    return onp.dtype(dtype) if dtype is not None else onp.asarray(v).dtype


def _zeros_like(v):
    return onp.zeros(onp.shape(v), dtype=_dtype(v))


# ---- autograd's vector spaces, for the checks and the compositions ----

class VSpace:
    iscomplex = False

    def __init__(self, value):
        self.shape = tuple(onp.shape(value))
        self.dtype = _dtype(value)

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __repr__(self):
        return f"{type(self).__name__}_{self.__dict__}"

    @property
    def size(self):
        return int(onp.prod(self.shape))

    @property
    def ndim(self):
        return len(self.shape)

    def zeros(self):
        return onp.zeros(self.shape, dtype=self.dtype)

    def ones(self):
        return onp.ones(self.shape, dtype=self.dtype)

    def standard_basis(self):
        for idxs in onp.ndindex(*self.shape):
            vect = onp.zeros(self.shape, dtype=self.dtype)
            vect[idxs] = 1
            yield vect

    def randn(self):
        return onp.array(onp.random.randn(*self.shape)).astype(self.dtype)

    def add(self, x, y):
        return x + y

    def scalar_mul(self, x, a):
        return x * a

    def inner_prod(self, x, y):
        return onp.dot(onp.ravel(_export(x)), onp.ravel(_export(y)))

    def covector(self, x):
        return x


class ComplexVSpace(VSpace):
    iscomplex = True

    @property
    def size(self):
        return int(onp.prod(self.shape)) * 2

    def ones(self):
        return onp.ones(self.shape, dtype=self.dtype) + 1.0j * onp.ones(self.shape, dtype=self.dtype)

    def standard_basis(self):
        for idxs in onp.ndindex(*self.shape):
            for v in [1.0, 1.0j]:
                vect = onp.zeros(self.shape, dtype=self.dtype)
                vect[idxs] = v
                yield vect

    def randn(self):
        return (onp.array(onp.random.randn(*self.shape)).astype(self.dtype)
                + 1.0j * onp.array(onp.random.randn(*self.shape)).astype(self.dtype))

    def inner_prod(self, x, y):
        return onp.real(onp.dot(onp.conj(onp.ravel(_export(x))), onp.ravel(_export(y))))

    def covector(self, x):
        return onp.conj(x)


class ContainerVSpace:
    iscomplex = False

    def __init__(self, value):
        self.seq_type = type(value)
        if isinstance(value, dict):
            self.keys = list(value)
            self.shape = [vspace(value[k]) for k in self.keys]
        else:
            self.keys = list(range(len(value)))
            self.shape = [vspace(v) for v in value]

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __repr__(self):
        return f"{type(self).__name__}_{self.__dict__}"

    def _build(self, values):
        if self.seq_type is dict or issubclass(self.seq_type, dict):
            return dict(zip(self.keys, values))
        return self.seq_type(values)

    def _items(self, x):
        return [x[k] for k in self.keys]

    @property
    def size(self):
        return sum(vs.size for vs in self.shape)

    def zeros(self):
        return self._build([vs.zeros() for vs in self.shape])

    def ones(self):
        return self._build([vs.ones() for vs in self.shape])

    def randn(self):
        return self._build([vs.randn() for vs in self.shape])

    def standard_basis(self):
        zeros = [vs.zeros() for vs in self.shape]
        for i, vs in enumerate(self.shape):
            for x in vs.standard_basis():
                yield self._build(zeros[:i] + [x] + zeros[i + 1:])

    def add(self, xs, ys):
        return self._build([vs.add(x, y) for vs, x, y in zip(self.shape, self._items(xs), self._items(ys))])

    def scalar_mul(self, xs, a):
        return self._build([vs.scalar_mul(x, a) for vs, x in zip(self.shape, self._items(xs))])

    def inner_prod(self, xs, ys):
        return sum(vs.inner_prod(x, y) for vs, x, y in zip(self.shape, self._items(xs), self._items(ys)))

    def covector(self, xs):
        return self._build([vs.covector(x) for vs, x in zip(self.shape, self._items(xs))])


def vspace(value):
    if isinstance(value, (tuple, list, dict)):
        return ContainerVSpace(value)
    if isinstance(value, jt.Tensor) or isinstance(value, (onp.ndarray, onp.generic, float, complex)):
        return ComplexVSpace(value) if _is_complex(value) else VSpace(value)
    raise TypeError(f"Can't find vector space for value {value!r} of type {type(value)}")


# ---- reverse and forward mode ----

def _to_tensor(v):
    # a tensor of an enclosing tape or accumulator gets a fresh identity, so that one
    # tensor given twice is two primals
    if isinstance(v, jt.Tensor):
        return jt.identity(v)
    if _inexact(v):
        return jt.constant(onp.asarray(v))
    return v


def _pairs(ans, g):
    """Output leaves that carry a gradient, each with its cotangent."""
    out = []
    for y, gy in zip(_leaves(ans), _leaves(g) if g is not None else [None] * len(_leaves(ans))):
        if _inexact(y):
            out.append((y, gy))
    return out


def _eager_make_vjp(fun, x):
    _depth[0] += 1
    try:
        xt = _map(_to_tensor, x)
        sources = [v for v in _leaves(xt) if isinstance(v, jt.Tensor) and _inexact(v)]
        tape = jt.GradientTape(persistent=True, watch_accessed_variables=False)
        with tape:
            tape.watch(sources)
            ans = fun(xt)
    finally:
        _depth[0] -= 1

    def vjp(g):
        _depth[0] += 1
        try:
            pairs = [(y, gy) for y, gy in _pairs(ans, g) if isinstance(y, jt.Tensor)]
            if pairs and sources:
                grads = tape.gradient([y for y, _ in pairs], sources,
                                      output_gradients=[_conj(gy) for _, gy in pairs],
                                      unconnected_gradients=jt.UnconnectedGradients.ZERO)
            else:
                grads = [_zeros_like(s) for s in sources]
            found = {id(s): _conj(d) for s, d in zip(sources, grads)}
            result = _map(lambda v: found[id(v)] if id(v) in found else _zeros_like(v), xt)
        finally:
            _depth[0] -= 1
        return _export(result)

    return vjp, _export(ans)


def _eager_make_jvp(fun, x):
    def jvp(g):
        _depth[0] += 1
        try:
            xt = _map(_to_tensor, x)
            pairs = [(p, t) for p, t in zip(_leaves(xt), _leaves(g))
                     if isinstance(p, jt.Tensor) and _inexact(p)]
            if not pairs:
                ans = fun(xt)
                tangent = _map(_zeros_like, ans)
            else:
                with jt.ForwardAccumulator([p for p, _ in pairs], [t for _, t in pairs]) as acc:
                    ans = fun(xt)
                    tangent = _map(lambda y: acc.jvp(y, unconnected_gradients="zero")
                                   if isinstance(y, jt.Tensor) else _zeros_like(y), ans)
        finally:
            _depth[0] -= 1
        return _export(ans), _export(tangent)

    return jvp


def _compiled_make_vjp(fun, x):
    ans = fun(x)

    def vjp(g):
        pairs = _pairs(ans, g)
        if not pairs or not any(_inexact(v) for v in _leaves(x)):
            return _map(_zeros_like, x)

        def inner(xx, gg):
            # autograd's VJP is conj of jittape's gradient of Re <conj(conj g), y>:
            # Re(sum(g * y)) for each output leaf that carries a gradient
            total = 0.0
            for y, gy in _pairs(fun(xx), gg):
                term = onp.sum(gy * y)
                total = total + (onp.real(term) if _is_complex(term) else term)
            return total

        _depth[0] += 1
        try:
            grads = jt.grad(inner, argnums=0)(x, g)
        finally:
            _depth[0] -= 1
        return _map(_conj, grads)

    return vjp, ans


def _compiled_make_jvp(fun, x):
    def jvp(g):
        _depth[0] += 1
        try:
            ans, tangent = jt.jvp(fun, (x,), (g,))
        finally:
            _depth[0] -= 1
        return ans, tangent

    return jvp


make_vjp_unary = _compiled_make_vjp if MODE == "compiled" else _eager_make_vjp
make_jvp_unary = _compiled_make_jvp if MODE == "compiled" else _eager_make_jvp


# ---- autograd.wrap_util ----

get_name = lambda f: getattr(f, "__name__", "[unknown name]")
get_doc = lambda f: getattr(f, "__doc__", "")


def subvals(x, ivs):
    x_ = list(x)
    for i, v in ivs:
        x_[i] = v
    return tuple(x_)


def wraps(fun, namestr="{fun}", docstr="{doc}", **kwargs):
    def _wraps(f):
        try:
            f.__name__ = namestr.format(fun=get_name(fun), **kwargs)
            f.__doc__ = docstr.format(fun=get_name(fun), doc=get_doc(fun), **kwargs)
        except BaseException:
            pass
        return f
    return _wraps


def unary_to_nary(unary_operator):
    def nary_operator(fun, argnum=0, *nary_op_args, **nary_op_kwargs):
        assert type(argnum) in (int, tuple, list), argnum

        def nary_f(*args, **kwargs):
            @wraps(fun)
            def unary_f(x):
                if isinstance(argnum, int):
                    subargs = subvals(args, [(argnum, x)])
                else:
                    subargs = subvals(args, zip(argnum, x))
                return fun(*subargs, **kwargs)

            if isinstance(argnum, int):
                x = args[argnum]
            else:
                x = tuple(args[i] for i in argnum)
            return unary_operator(unary_f, x, *nary_op_args, **nary_op_kwargs)

        nary_f.__name__ = f"{get_name(unary_operator)}_of_{get_name(fun)}_wrt_argnum_{argnum}"
        return nary_f

    nary_operator.__name__ = get_name(unary_operator)
    nary_operator.__doc__ = get_doc(unary_operator)
    return nary_operator


# ---- autograd's differential operators: its compositions of make_vjp and make_jvp ----

make_vjp = unary_to_nary(make_vjp_unary)
make_jvp = unary_to_nary(make_jvp_unary)


@unary_to_nary
def grad(fun, x):
    vjp, ans = make_vjp_unary(fun, x)
    if not vspace(ans).size == 1:
        raise TypeError("Grad only applies to real scalar-output functions. "
                        "Try jacobian, elementwise_grad or holomorphic_grad.")
    return vjp(vspace(ans).ones())


@unary_to_nary
def elementwise_grad(fun, x):
    vjp, ans = make_vjp_unary(fun, x)
    if vspace(ans).iscomplex:
        raise TypeError("Elementwise_grad only applies to real-output functions.")
    return vjp(vspace(ans).ones())


@unary_to_nary
def deriv(fun, x):
    return make_jvp_unary(fun, x)(vspace(x).ones())[1]


def _np():
    import autograd.numpy as anp
    return anp


@unary_to_nary
def jacobian(fun, x):
    vjp, ans = make_vjp_unary(fun, x)
    ans_vspace = vspace(ans)
    jacobian_shape = ans_vspace.shape + vspace(x).shape
    grads = map(vjp, ans_vspace.standard_basis())
    return _np().reshape(_np().stack(list(grads)), jacobian_shape)


@unary_to_nary
def holomorphic_grad(fun, x):
    if not vspace(x).iscomplex:
        warnings.warn("Input to holomorphic_grad is not complex")
    return grad(lambda x: _np().real(fun(x)))(x)


def grad_named(fun, argname):
    import inspect
    return grad(fun, inspect.getfullargspec(fun).args.index(argname))


@unary_to_nary
def hessian(fun, x):
    return jacobian(jacobian(fun))(x)


@unary_to_nary
def make_hvp(fun, x):
    return make_vjp_unary(grad(fun), x)


def hessian_tensor_product(fun, argnum=0):
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return _np().tensordot(fun_grad(*args, **kwargs), vector, onp.ndim(vector))

    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    def vector_dot_fun(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return _np().tensordot(vector, fun(*args, **kwargs), axes=onp.ndim(vector))

    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


def make_ggnvp(f, g=lambda x: 1.0 / 2 * _np().sum(x ** 2, axis=-1), f_argnum=0):
    @unary_to_nary
    def _make_ggnvp(f, x):
        f_vjp, f_x = make_vjp_unary(f, x)
        g_hvp, grad_g_x = make_vjp_unary(grad(g), f_x)
        f_jvp, _ = make_vjp_unary(f_vjp, vspace(grad_g_x).zeros())

        def ggnvp(v):
            return f_vjp(g_hvp(f_jvp(v)))

        return ggnvp

    return _make_ggnvp(f, f_argnum)


@unary_to_nary
def value_and_grad(fun, x):
    vjp, ans = make_vjp_unary(fun, x)
    if not vspace(ans).size == 1:
        raise TypeError("value_and_grad only applies to real scalar-output functions. "
                        "Try jacobian, elementwise_grad or holomorphic_grad.")
    return ans, vjp(vspace(ans).ones())


@unary_to_nary
def grad_and_aux(fun, x):
    vjp, (ans, aux) = make_vjp_unary(lambda x: tuple(fun(x)), x)
    return vjp((vspace(ans).ones(), vspace(aux).zeros())), aux


def checkpoint(fun):
    return jt.checkpoint(fun)


# ---- autograd.test_util: autograd's checks, on the functions above ----

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6


def scalar_close(a, b):
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def make_numerical_jvp(f, x):
    y = f(x)
    x_vs, y_vs = vspace(x), vspace(y)

    def jvp(v):
        f_x_plus = f(x_vs.add(x, x_vs.scalar_mul(v, EPS / 2)))
        f_x_minus = f(x_vs.add(x, x_vs.scalar_mul(v, -EPS / 2)))
        neg_f_x_minus = y_vs.scalar_mul(f_x_minus, -1.0)
        return y_vs.scalar_mul(y_vs.add(f_x_plus, neg_f_x_minus), 1.0 / EPS)

    return jvp


def check_vjp(f, x):
    vjp, y = make_vjp_unary(f, x)
    jvp = make_numerical_jvp(f, x)
    x_vs, y_vs = vspace(x), vspace(y)
    x_v, y_v = x_vs.randn(), y_vs.randn()

    vjp_y = x_vs.covector(vjp(y_vs.covector(y_v)))
    assert vspace(vjp_y) == x_vs, f"VSpace mismatch of the VJP: {vspace(vjp_y)} for {x_vs}"
    vjv_exact = x_vs.inner_prod(x_v, vjp_y)
    vjv_numeric = y_vs.inner_prod(y_v, jvp(x_v))
    assert scalar_close(vjv_numeric, vjv_exact), (
        "Derivative (VJP) check of {} failed with arg {}:\nanalytic: {}\nnumeric:  {}".format(
            get_name(f), x, vjv_exact, vjv_numeric))


def check_jvp(f, x):
    jvp = make_jvp_unary(f, x)
    jvp_numeric = make_numerical_jvp(f, x)
    x_v = vspace(x).randn()
    check_equivalent(jvp(x_v)[1], jvp_numeric(x_v))


def check_equivalent(x, y):
    x, y = _export(x), _export(y)
    x_vs, y_vs = vspace(x), vspace(y)
    assert x_vs == y_vs, f"VSpace mismatch:\nx: {x_vs}\ny: {y_vs}"
    v = x_vs.randn()
    assert scalar_close(x_vs.inner_prod(x, v), x_vs.inner_prod(y, v)), f"Value mismatch:\nx: {x}\ny: {y}"


@unary_to_nary
def check_grads(f, x, modes=["fwd", "rev"], order=2):
    assert all(m in ["fwd", "rev"] for m in modes)
    if "fwd" in modes:
        check_jvp(f, x)
        if order > 1:
            grad_f = lambda x, v: make_jvp_unary(f, x)(v)[1]
            grad_f.__name__ = f"jvp_{get_name(f)}"
            v = vspace(x).randn()
            check_grads(grad_f, (0, 1), modes, order=order - 1)(x, v)
    if "rev" in modes:
        check_vjp(f, x)
        if order > 1:
            grad_f = lambda x, v: make_vjp_unary(f, x)[0](v)
            grad_f.__name__ = f"vjp_{get_name(f)}"
            v = vspace(f(x)).randn()
            check_grads(grad_f, (0, 1), modes, order=order - 1)(x, v)


def combo_check(fun, *args, **kwargs):
    _check_grads = lambda f: check_grads(f, *args, **kwargs)

    def _combo_check(*args, **kwargs):
        kwarg_key_vals = [[(k, x) for x in xs] for k, xs in kwargs.items()]
        for _args in product(*args):
            for _kwargs in product(*kwarg_key_vals):
                _check_grads(fun)(*_args, **dict(_kwargs))

    return _combo_check


# ---- namespaces: NumPy's or SciPy's names, jittape's function where it has one ----

def dispatching(numpy_fn, jittape_fn):
    """``jittape_fn`` when an argument is a jittape tensor, ``numpy_fn`` otherwise (as
    autograd's wrappers call NumPy on values they do not trace)."""
    def fn(*args, **kwargs):
        if _has_tensor(args) or _has_tensor(tuple(kwargs.values())):
            return jittape_fn(*args, **kwargs)
        return numpy_fn(*args, **kwargs)
    fn.__name__ = getattr(numpy_fn, "__name__", "fn")
    fn.__doc__ = getattr(numpy_fn, "__doc__", None)
    return fn


def fill_namespace(namespace, source, overrides):
    for name in dir(source):
        if not name.startswith("__"):
            namespace[name] = getattr(source, name)
    for name in dir(overrides):
        if name.startswith("_") or name not in namespace:
            continue
        ours, theirs = getattr(overrides, name), namespace[name]
        if not callable(ours) and hasattr(ours, "__getitem__") and getattr(ours, "numpy_public", 0):
            namespace[name] = ours      # an index object (np.r_): NumPy's without a tensor
            continue
        if ours is theirs or isinstance(theirs, type) or not callable(ours) or not callable(theirs):
            continue
        namespace[name] = dispatching(theirs, ours)
'''

SHIM = {
    "autograd/__init__.py": '''
from ._adapter import (checkpoint, deriv, elementwise_grad, grad, grad_and_aux, grad_named,
                       hessian, hessian_tensor_product, hessian_vector_product,
                       holomorphic_grad, jacobian, make_ggnvp, make_hvp, make_jvp, make_vjp,
                       tensor_jacobian_product, value_and_grad, vector_jacobian_product)
from .builtins import dict, isinstance, list, tuple, type
''',
    "autograd/_adapter.py": ADAPTER,
    # Python's own containers: jittape differentiates through them as they are.
    # autograd's isinstance sees through its boxes; this one through tensors
    "autograd/builtins.py": '''
import builtins as _b
import numpy as _np
import jittape as _jt
dict, list, tuple, type = _b.dict, _b.list, _b.tuple, _b.type
def isinstance(obj, types):
    if _b.isinstance(obj, _jt.Tensor):
        classes = types if _b.isinstance(types, _b.tuple) else (types,)
        if any(_b.isinstance(c, _b.type) and issubclass(_np.ndarray, c) for c in classes):
            return True
    return _b.isinstance(obj, types)
''',
    "autograd/wrap_util.py": "from ._adapter import get_name, unary_to_nary, wraps\n",
    "autograd/test_util.py": '''
from ._adapter import (EPS, RTOL, TOL, check_equivalent, check_grads, check_jvp, check_vjp,
                       combo_check, make_numerical_jvp, scalar_close)
''',
    "autograd/differential_operators.py": "from . import *\n",
    # the public make_vjp/make_jvp (test_core imports them from here); autograd's
    # machinery is stubs that raise, for the modules that import it beside applicable tests
    "autograd/core.py": '''
from ._adapter import _internal, make_jvp_unary as make_jvp, make_vjp_unary as make_vjp
primitive = _internal("autograd.core.primitive")
defvjp = _internal("autograd.core.defvjp")
vspace = _internal("autograd.core.vspace")
primitive_vjps = {}
''',
    "autograd/extend.py": '''
from ._adapter import _internal
primitive = _internal("autograd.extend.primitive")
defvjp = _internal("autograd.extend.defvjp")
defjvp = _internal("autograd.extend.defjvp")
''',
    # isbox asks whether a value is one autograd traces: here, a jittape tensor
    "autograd/tracer.py": '''
import jittape as _jt
from ._adapter import _internal
primitive = _internal("autograd.tracer.primitive")
def isbox(x):
    return isinstance(x, _jt.Tensor)
''',
    "autograd/numpy/__init__.py": '''
import sys as _sys
import numpy as _np
import jittape.numpy as _jnp
from .._adapter import fill_namespace as _fill
_fill(globals(), _np, _jnp)
__version__ = _np.__version__
# autograd's own function, which test_diagonal calls on plain arrays before testing
# np.diagonal; its own test is not applicable
def make_diagonal(D, offset=0, axis1=-1, axis2=-2):
    assert offset == 0 and (axis1, axis2) == (-1, -2), "only the form the tests use"
    return D[..., None] * _np.eye(D.shape[-1])
# NumPy's fft and linalg are in the namespace now: import ours over them
import importlib as _importlib
fft = _importlib.import_module(__name__ + ".fft")
linalg = _importlib.import_module(__name__ + ".linalg")
random = _np.random
_sys.modules[__name__ + ".random"] = _np.random
''',
    "autograd/numpy/linalg.py": '''
import numpy as _np
import numpy.linalg as _la
from jittape.tensor import FUNCTION_TABLE as _table
from .._adapter import dispatching as _dispatching
globals().update({k: getattr(_la, k) for k in dir(_la) if not k.startswith("__")})
# the function NumPy's dispatch reaches on a tensor, reached on a list of tensors too
for _k in dir(_la):
    _f = getattr(_la, _k)
    if not _k.startswith("_") and callable(_f) and not isinstance(_f, type) and _f in _table:
        globals()[_k] = _dispatching(_f, _table[_f])
# autograd.numpy.linalg's two helpers, which test_linalg uses
_dot = _np.matmul
def T(x):
    return _np.swapaxes(x, -1, -2)
''',
    "autograd/numpy/fft.py": '''
import numpy.fft as _fft
globals().update({k: getattr(_fft, k) for k in dir(_fft) if not k.startswith("__")})
''',
    "autograd/scipy/__init__.py": "from . import integrate, linalg, signal, special, stats\n",
    "autograd/scipy/special.py": '''
import scipy.special as _sp
import jittape.scipy.special as _jsp
from .._adapter import fill_namespace as _fill
_fill(globals(), _sp, _jsp)
''',
    "autograd/scipy/linalg.py": '''
import scipy.linalg as _m
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})
''',
    "autograd/scipy/signal.py": '''
import scipy.signal as _m
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})
''',
    "autograd/scipy/integrate.py": '''
import scipy.integrate as _m
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})
''',
    # autograd.scipy.stats.<distribution> are modules; SciPy's are objects with the
    # same functions: a namespace of each, jittape.scipy.stats's functions taking tensors
    "autograd/scipy/stats/__init__.py": '''
import sys as _sys
from types import SimpleNamespace as _Namespace
import scipy.stats as _m
import jittape.scipy.stats as _ours
from ..._adapter import dispatching as _dispatching
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})
for _name in ("beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"):
    _theirs, _mine = getattr(_m, _name), getattr(_ours, _name, None)
    _module = _Namespace(**{k: getattr(_theirs, k) for k in dir(_theirs) if not k.startswith("_")})
    for _k in dir(_mine) if _mine is not None else ():
        if not _k.startswith("_") and hasattr(_theirs, _k) and callable(getattr(_mine, _k)):
            setattr(_module, _k, _dispatching(getattr(_theirs, _k), getattr(_mine, _k)))
    _sys.modules[__name__ + "." + _name] = _module
    globals()[_name] = _module
''',
    # the plugin of the pytest run: a time limit per test and the gradients jittape
    # reported lost, recorded as junit properties
    "autograd_suite_plugin.py": '''
import os
import signal
import warnings

import pytest

LIMIT = float(os.environ.get("AUTOGRAD_SUITE_TIMEOUT", "120"))


class TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise TestTimeout(f"the test ran past the limit of {LIMIT:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT)
    try:
        with warnings.catch_warnings(record=True) as caught:
            # every occurrence, not once per call site over the whole run
            warnings.simplefilter("always")
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    lost = {str(w.message).split(" converts ")[0] for w in caught
            if type(w.message).__name__ == "GradientLostWarning"}
    for text in sorted(lost):
        item.user_properties.append(("gradient_lost", text))
''',
}


def get_sdist(path, workdir):
    """The sdist's path: ``path``, or one pip downloads into ``workdir``."""
    if path:
        return path
    subprocess.run([sys.executable, "-m", "pip", "download", f"autograd=={AUTOGRAD_VERSION}",
                    "--no-deps", "--no-binary", ":all:", "-d", workdir], check=True)
    for name in os.listdir(workdir):
        if name.endswith((".tar.gz", ".zip")):
            return os.path.join(workdir, name)
    raise FileNotFoundError(f"pip left no sdist of autograd {AUTOGRAD_VERSION} in {workdir}")


def extract_tests(sdist, dest):
    """Only the sdist's ``tests/`` folder, flattened into ``dest``; returns ``dest``."""
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) > 2 and parts[1] == "tests" and (member.isfile() or member.isdir()):
                member.name = "/".join(parts[2:])
                members.append(member)
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(dest, members=members, **kwargs)
    # an empty configuration keeps the sdist's pytest options (coverage, -n auto) and
    # any configuration above the temporary directory out of the run
    with open(os.path.join(dest, "pytest.ini"), "w") as f:
        f.write("[pytest]\n")
    return dest


def write_shim(dest):
    for relpath, text in SHIM.items():
        path = os.path.join(dest, relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text.lstrip("\n"))
    return dest


def run_mode(mode, tests_dir, shim_dir, work, keyword, timeout):
    """Runs pytest on the extracted tests in a subprocess; returns the junit path and
    the seconds taken."""
    junit = os.path.join(work, f"junit-{mode}.xml")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([shim_dir, tests_dir] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["AUTOGRAD_SUITE_MODE"] = mode
    env["AUTOGRAD_SUITE_TIMEOUT"] = str(timeout)
    # a run leaves nothing in the user's jittape cache, and reads nothing from it
    env["JITTAPE_CACHE_DIR"] = ""
    if mode == "compiled":
        # the tracing, autodiff and generated code are under test; Numba's machine code
        # is tested elsewhere, and hundreds of Numba compiles would take hours
        env["NUMBA_DISABLE_JIT"] = "1"
        env["JITTAPE_TIERED"] = "0"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
           "-p", "autograd_suite_plugin", f"--junitxml={junit}", "-o", "junit_family=xunit1",
           "--rootdir", tests_dir, "-c", os.path.join(tests_dir, "pytest.ini")]
    try:
        import xdist  # noqa: F401  (-n 0 is an option only where xdist is installed)
        cmd += ["-n", "0"]
    except ImportError:
        pass
    for entry in NOT_APPLICABLE:
        cmd.append(f"--deselect={entry}" if "::" in entry else f"--ignore={entry}")
    if keyword:
        cmd += ["-k", keyword]
    print(f"[{mode}] {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tests_dir, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    tail = proc.stdout.strip().splitlines()[-3:]
    print(f"[{mode}] pytest exit {proc.returncode} after {seconds:.0f} s: {' | '.join(tail)}",
          flush=True)
    if not os.path.exists(junit):
        raise RuntimeError(f"pytest wrote no junit report:\n{proc.stdout[-4000:]}")
    return junit, seconds


_NOISE = [
    (re.compile(r" \(at [^()]*:\d+\)"), ""),               # the user's file:line
    (re.compile(r"; use the jittape ops.*"), ""),            # the advice after a cause
    (re.compile(r" with arg .*"), ""),                       # check_grads' argument dump
    (re.compile(r"check of \S+ failed"), "check failed"),     # the checked function's name
    (re.compile(r" of shape \([^)]*\)"), ""),
    (re.compile(r" \(spec '[^']*'\)"), ""),
    (re.compile(r"0x[0-9a-f]+"), "0x…"),
    (re.compile(r"/tmp/[^\s:]+/"), ""),                      # temporary directories
]


def cause_of(first_line, lost):
    """The grouping key of a failure: the error's first line without what varies from
    test to test, or the lost gradient where a check found a wrong value after one."""
    text = first_line
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    if text.startswith("TracerError: converting to a NumPy array of a traced value"):
        return "TracerError: converting to a NumPy array of a traced value"
    if "Unsupported" in text and "complex values are not supported by" in text:
        op = text.split("complex values are not supported by ", 1)[1].split(" ", 1)[0]
        return f"UnsupportedError: {op} of complex values"
    if "Unsupported" in text and "complex" in text:
        return "UnsupportedError: complex numbers (other)"
    if lost and text.startswith("AssertionError"):
        where = re.search(r"\(in ([^)]*)\)", lost[0])
        if where:
            return f"gradient lost: NumPy/SciPy code converts a tensor (in {where.group(1)})"
        if lost[0].startswith("`jittape_fn("):
            return "gradient lost: a jittape.numpy function converts a tensor to NumPy"
        return f"gradient lost: {lost[0]}"
    return text.strip()


def parse_junit(path):
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".") + [case.get("name")]
        name = "::".join([parts[0] + ".py"] + parts[1:]) if parts[0] else case.get("name")
        lost = [p.get("value") for p in case.iter("property") if p.get("name") == "gradient_lost"]
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = node.get("message") or (node.text or "").strip()
                break
        lines = [line.strip() for line in message.strip().splitlines()] or [""]
        # pytest's failure message is "module.Error: text"; keep the class's short name
        first = re.sub(r"^(\w+\.)+(?=\w+(Error|Exception|Timeout|Warning)\b)", "", lines[0])
        # "VSpace mismatch:" says what mismatched on the next lines
        error = " ".join([first] + lines[1:3])[:400] if first.endswith(":") else first
        tests.append({"id": name, "outcome": outcome, "first": first, "error": error,
                      "gradient_lost": lost, "seconds": float(case.get("time", 0))})
    return tests


def summarize(tests, seconds):
    counts = collections.Counter(t["outcome"] for t in tests)
    applicable = counts["passed"] + counts["failed"] + counts["error"]
    failures = [t for t in tests if t["outcome"] in ("failed", "error")]
    causes = collections.Counter(cause_of(t["first"], t["gradient_lost"]) for t in failures)
    return {
        "applicable": applicable,
        "passed": counts["passed"],
        "failed": counts["failed"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "pass_rate": round(counts["passed"] / applicable, 4) if applicable else None,
        "seconds": round(seconds, 1),
        "causes": [{"cause": c, "tests": n} for c, n in causes.most_common()],
        "failures": [{"id": t["id"], "error": t["error"], "cause": cause_of(t["first"], t["gradient_lost"]),
                      **({"gradient_lost": t["gradient_lost"]} if t["gradient_lost"] else {})}
                     for t in failures],
        "skips": [{"id": t["id"], "reason": t["error"]} for t in tests if t["outcome"] == "skipped"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("eager", "compiled", "both"), default="both")
    parser.add_argument("--sdist", help="autograd's sdist (default: pip downloads it)")
    parser.add_argument("-k", dest="keyword", help="pytest's -k expression (a partial run)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("--output", default=RESULTS, help="the JSON file of results")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="autograd_suite_")
    try:
        sdist = get_sdist(args.sdist, os.path.join(work, "download"))
        tests_dir = extract_tests(sdist, os.path.join(work, "tests"))
        shim_dir = write_shim(os.path.join(work, "shim"))
        modes = ["eager", "compiled"] if args.mode == "both" else [args.mode]
        results = {}
        for mode in modes:
            junit, seconds = run_mode(mode, tests_dir, shim_dir, work, args.keyword, args.timeout)
            results[mode] = summarize(parse_junit(junit), seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report = {
        "autograd": AUTOGRAD_VERSION,
        "sdist": os.path.basename(sdist),
        "keyword": args.keyword,
        "timeout_per_test_s": args.timeout,
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "not_applicable": [{"test": k, "reason": v} for k, v in NOT_APPLICABLE.items()],
        "modes": results,
    }
    previous = {}
    if os.path.exists(args.output):
        try:
            with open(args.output) as f:
                previous = json.load(f)
        except ValueError:
            previous = {}
    # a run of one mode keeps the other mode's figures, when they come from the same
    # selection of tests
    if args.mode != "both" and previous.get("keyword") == args.keyword:
        report["modes"] = {**previous.get("modes", {}), **results}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")

    print(f"\nautograd {AUTOGRAD_VERSION}'s tests against jittape"
          + (f" (-k {args.keyword})" if args.keyword else ""))
    print(f"{'mode':10} {'applicable':>10} {'passed':>7} {'failed':>7} {'errors':>7} "
          f"{'skipped':>8} {'pass rate':>10} {'time':>8}")
    for mode, r in results.items():
        rate = f"{100 * r['pass_rate']:.1f}%" if r["pass_rate"] is not None else "-"
        print(f"{mode:10} {r['applicable']:>10} {r['passed']:>7} {r['failed']:>7} "
              f"{r['errors']:>7} {r['skipped']:>8} {rate:>10} {r['seconds']:>7.0f}s")
    print(f"not applicable: {len(NOT_APPLICABLE)} files and tests (see {os.path.relpath(args.output)})")
    for mode, r in results.items():
        print(f"\n{mode}: failures by cause")
        for c in r["causes"]:
            print(f"  {c['tests']:4d}  {c['cause'][:150]}")


if __name__ == "__main__":
    main()
