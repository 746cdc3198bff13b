"""Elementwise primitives: arithmetic, math functions, comparisons and logic.

Each op follows NumPy broadcasting and dtype promotion (a Python scalar never
widens a tensor).

An elementwise op's derivative is diagonal: each input's rule, ``rule(g, out, *args)``,
multiplies ``g`` by the partial derivative element by element (or selects it). The one
rule serves both modes: applied to a tangent it is the input's part of the output's
tangent (JVP), and applied to a cotangent, summed back to the input's shape with
``unbroadcast`` (``Primitive.broadcasts``: the VJP step does it), it is the input's
cotangent (VJP).
"""

import math
import operator

import numpy as np
from scipy import special

from ..errors import UnsupportedError, at_user_line, numpy_warnings_at_user
from ..tensor import UFUNC_TABLE, Tensor, Variable
from .core import (CHEAP, COSTLY, REGISTRY, Aval, Fixed, Primitive, broadcast_shapes, composite,
                   ex, numpy_dispatch, public, shape_of, ufunc_dtype)

UNARY_EXAMPLES = [ex((3,)), ex((2, 3)), ex(()), ex((1, 4)), ex((2, 1, 3))]
BINARY_EXAMPLES = [ex((2, 3), (2, 3)), ex((2, 3), (3,)), ex((4, 1), (1, 3)), ex((), (2, 2)),
                   ex((2, 1, 3), (4, 1)), ex((3,), 1.5), ex(0.5, (2, 2))]


def _abstract(name, ufunc):
    def abstract(*operands, **params):
        shape = broadcast_shapes(name, *[shape_of(o) for o in operands])
        return Aval(shape, ufunc_dtype(name, ufunc, operands))
    return abstract


def unbroadcast(g, shape):
    """Sum a broadcast cotangent back to ``shape`` (depends on ranks and size-1 axes only)."""
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and gshape[lead + i] != 1)
    # the sum and reshape primitives are declared by reduce.py and shape.py, which build
    # on this module: a rule finds them in the registry when it runs
    if axes:
        g = REGISTRY["sum"].bind(g, axis=axes, keepdims=False)
    if g.shape != shape:
        g = REGISTRY["reshape"].bind(g, shape=tuple(shape))
    return g


def elementwise(name, ufunc, scalar, partials=None, *, save=None, examples=None, domain=(-2.0, 2.0),
                differentiable=True, impl=None, fast=None, costly=False, warns=False, also=(),
                complex=False):
    """Declare an elementwise primitive.

    ``ufunc`` is the NumPy ufunc the op answers to and whose dtype rule it follows; where
    NumPy has no ufunc for the op, ``impl`` is the implementation and ``ufunc`` only a
    ufunc with the same dtype rule (the op then answers to no NumPy name).

    ``fast`` is Python's operator for the op: on arrays it calls the same ufunc, and on
    NumPy scalars (the values of 0-d tensors) it is ten times faster than the ufunc.

    ``scalar`` is the op's lowering for compiled code: a Python expression on scalars,
    with ``{0}``, ``{1}``, ... for the operands, ``{dtype}`` for the result's NumPy type
    name and ``{f}`` for the helper suffix of its float type (``f32``/``f64``, see
    ``codegen/runtime.py``). Generated loops apply it element by element.

    ``costly``: the op is a math function (tens of cycles an element, not one): a fused
    loop with one is worth running on threads when it is large (``codegen/cpu.py``).

    ``warns``: the op warns on ordinary finite operands (a zero divisor, a log of zero,
    an overflowing exp): NumPy's warning names the user's line outside tapes too
    (``errors.numpy_warnings_at_user``).

    ``partials``: one diagonal rule per input (see the module), the op's JVP rules, and
    its VJP rules once summed back to the input's shape; ``zero_partial`` for an input
    whose derivative is zero wherever it exists (copysign's sign).

    ``also``: more NumPy ufuncs the op answers to, NumPy's aliases that are objects of
    their own (``np.degrees`` is not ``np.rad2deg``).

    ``complex``: the op takes complex values and is holomorphic there; its partials are
    then the complex derivative times the tangent, and its VJP rules the conjugate of the
    rule applied to the conjugate cotangent (``Primitive.holomorphic``: the rules
    themselves are written for real cotangents).
    """
    vjp = jvp = None
    if partials is not None:
        # (the VJP step sums each rule's result back to its input's shape: broadcasts)
        jvp = vjp = list(partials)
    run = fast or impl or ufunc
    prim = Primitive(name, numpy_warnings_at_user(run) if warns else run, abstract=_abstract(name, ufunc), vjp=vjp, jvp=jvp,
                     save=save,
                     kind="elementwise", cost=COSTLY if costly else CHEAP,
                     examples=examples if examples is not None else
                     (UNARY_EXAMPLES if ufunc.nin == 1 else BINARY_EXAMPLES),
                     domain=domain, differentiable=differentiable,
                     numpy=(ufunc, *also) if impl is None else (), ufunc=True, complex=complex,
                     holomorphic=bool(complex) and partials is not None,
                     broadcasts=ufunc.nin > 1)
    prim.lowerings["scalar"] = scalar
    return prim


def zero_partial(g, out, *args, **params):
    """The rule of an input the output does not vary with: a zero (None) in both modes."""
    return None


def is_complex(x):
    """Whether a tensor, tracer, array or Python number holds complex values."""
    if x.__class__ is complex:
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind == "c"


def conj_of(x):
    """The complex conjugate of ``x``; a real ``x`` itself (no op)."""
    return _conj.bind(x) if is_complex(x) else x


NOTHING = (False, False)         # VJP needs only the shapes of the inputs
INPUTS = (True, False)           # VJP reads the inputs
OUTPUT = (False, True)           # VJP reads the output

# -- arithmetic ---------------------------------------------------------------

add = elementwise("add", np.add, "({0} + {1})", [
    lambda g, out, x, y: g,
    lambda g, out, x, y: g,
], save=NOTHING, fast=operator.add, complex=True)

subtract = elementwise("subtract", np.subtract, "({0} - {1})", [
    lambda g, out, x, y: g,
    lambda g, out, x, y: negative(g),
], save=NOTHING, fast=operator.sub, complex=True)

multiply = elementwise("multiply", np.multiply, "({0} * {1})", [
    lambda g, out, x, y: _mul(g, y),
    lambda g, out, x, y: _mul(g, x),
], save=INPUTS, fast=operator.mul, complex=True)
_mul = multiply.bind       # (a bound bind for the rules that run on every tape: methods.py)

divide = elementwise("divide", np.true_divide, "({0} / {1})", [
    lambda g, out, x, y: divide(g, y),
    lambda g, out, x, y: negative(divide(multiply(g, out), y)),
], save=((False, True), True), examples=BINARY_EXAMPLES,
    domain=((-2.0, 2.0), (0.5, 2.0)), fast=operator.truediv, warns=True, complex=True)


def _power_scalar(node):
    # a literal exponent 2 is a product (no pow call; it vectorizes)
    y = node.inputs[1]
    if y.__class__ in (int, float) and y == 2:
        return "({0} * {0})"
    return "({0} ** {1})"


_PY_NUMBERS = (int, float)


def _power_vjp_x(g, out, x, y):
    # y - 1 in Python for a Python exponent: an op on two Python scalars would give a
    # strongly typed int64 tensor and widen a float32 cotangent.
    if isinstance(y, Tensor):
        return multiply(g, multiply(y, power(x, subtract(y, 1))))
    # (a NumPy exponent may hold many elements: no truth value; y - 1 is NumPy's; a
    # Python number, the common case, is told apart without np.ndim's cost)
    scalar = y.__class__ in _PY_NUMBERS or np.ndim(y) == 0
    if scalar and y == 2:
        slope = x
    elif scalar and y == 0:                # (x**0 is 1: its slope 0, also at x = 0)
        return multiply(g, 0)
    else:
        slope = power(x, y - 1 if scalar else np.subtract(y, 1))
    return _mul(g, _mul(slope, y))


def _power_vjp_y(g, out, x, y):
    if out.dtype.kind == "c":
        # out * log(x) on the principal branch (a real base taken as complex: a negative
        # one has a logarithm there), 0 where x is 0 (the slope of 0**y in y)
        if isinstance(x, Tensor):
            xc = x if is_complex(x) else cast(x, out.dtype)
            zero = equal(xc, 0)
            safe_log = where(zero, 0, log(where(zero, 1, xc)))
        else:
            xc = np.asarray(x, out.dtype)
            with np.errstate(divide="ignore", invalid="ignore"):
                safe_log = np.where(xc == 0, 0, np.log(np.where(xc == 0, 1, xc))).astype(out.dtype)
        return multiply(g, multiply(out, safe_log))
    if isinstance(x, Tensor):
        positive = greater(x, 0)
        safe_log = where(positive, log(where(positive, x, 1)), 0)
    else:                                # a constant base: its log is a constant too
        x = np.asarray(x)
        safe_log = np.where(x > 0, np.log(np.where(x > 0, x, 1)), 0).astype(out.dtype)
    return multiply(g, multiply(out, safe_log))


power = elementwise("power", np.power, lambda node: _power_scalar(node), [_power_vjp_x, _power_vjp_y], save=(True, True),
                    examples=BINARY_EXAMPLES[:5] + [ex((3,), 2), ex((2, 2), 3.0), ex(1.5, (3,))],
                    domain=((0.5, 2.0), (-1.5, 1.5)), fast=operator.pow, costly=True, warns=True,
                    complex=True)

maximum = elementwise("maximum", np.maximum, "np.maximum({0}, {1})", [
    lambda g, out, x, y: where(greater_equal(x, y), g, 0),
    lambda g, out, x, y: where(less(x, y), g, 0),
], save=INPUTS)

minimum = elementwise("minimum", np.minimum, "np.minimum({0}, {1})", [
    lambda g, out, x, y: where(less_equal(x, y), g, 0),
    lambda g, out, x, y: where(greater(x, y), g, 0),
], save=INPUTS)

mod = elementwise("mod", np.remainder, "({0} % {1})", [
    lambda g, out, x, y: g,
    lambda g, out, x, y: negative(multiply(g, floor_divide(x, y))),
], save=INPUTS, domain=((2.1, 2.9), (1.1, 1.9)), fast=operator.mod, warns=True)

floor_divide = elementwise("floor_divide", np.floor_divide, "({0} // {1})", differentiable=False, fast=operator.floordiv,
                            warns=True)

# -- unary math -------------------------------------------------------------------

negative = elementwise("negative", np.negative, "(-{0})", [lambda g, out, x: negative(g)], save=NOTHING, fast=operator.neg,
                      complex=True)


def _unit(z):
    """z / |z| of a complex z, 0 at 0."""
    r = abs(z)
    return divide(z, where(equal(r, 0), 1, r))


def _abs_vjp(g, out, x):
    # |z| is real and not holomorphic: d|z|/dx + i d|z|/dy = z / |z| (0 at 0, as the
    # real rule's sign)
    return multiply(g, _unit(x)) if is_complex(x) else multiply(g, sign(x))


def _abs_jvp(t, out, x):
    # d|z| = Re(conj(z / |z|) dz)
    return real(multiply(t, conj_of(_unit(x)))) if is_complex(x) else multiply(t, sign(x))


abs = elementwise("abs", np.absolute, "np.abs({0})", [_abs_vjp], save=INPUTS, complex=True)
# (|z| is not holomorphic: its rules take complex cotangents as they are)
abs.vjp, abs.jvp, abs.holomorphic = (_abs_vjp,), (_abs_jvp,), False
sign = elementwise("sign", np.sign, "np.sign({0})", differentiable=False)
exp = elementwise("exp", np.exp, "np.exp({0})", [lambda g, out, x: multiply(g, out)], save=OUTPUT, costly=True,
                  warns=True, complex=True)
expm1 = elementwise("expm1", np.expm1, "np.expm1({0})", [lambda g, out, x: multiply(g, add(out, 1))], save=OUTPUT,
                    costly=True, warns=True, complex=True)
log = elementwise("log", np.log, "np.log({0})", [lambda g, out, x: divide(g, x)], save=INPUTS, domain=(0.5, 3.0), costly=True,
                  warns=True, complex=True)
log1p = elementwise("log1p", np.log1p, "np.log1p({0})", [lambda g, out, x: divide(g, add(x, 1))], save=INPUTS,
                    domain=(-0.5, 2.0), costly=True, warns=True, complex=True)
sqrt = elementwise("sqrt", np.sqrt, "np.sqrt({0})", [lambda g, out, x: divide(g, multiply(out, 2))], save=OUTPUT,
                   domain=(0.5, 3.0), warns=True, complex=True)
square = elementwise("square", np.square, "({0} * {0})", [lambda g, out, x: multiply(g, multiply(x, 2))],
                     save=INPUTS, complex=True)
sin = elementwise("sin", np.sin, "np.sin({0})", [lambda g, out, x: multiply(g, cos(x))], save=INPUTS, costly=True,
                  complex=True)
cos = elementwise("cos", np.cos, "np.cos({0})", [lambda g, out, x: negative(multiply(g, sin(x)))], save=INPUTS, costly=True,
                  complex=True)
tan = elementwise("tan", np.tan, "np.tan({0})", [lambda g, out, x: multiply(g, add(multiply(out, out), 1))],
                  save=OUTPUT, domain=(-1.2, 1.2), costly=True, complex=True)
tanh = elementwise("tanh", np.tanh, "np.tanh({0})", [lambda g, out, x: multiply(g, subtract(1, multiply(out, out)))],
                   save=OUTPUT, costly=True, complex=True)
arctan = elementwise("arctan", np.arctan, "np.arctan({0})", [lambda g, out, x: divide(g, add(multiply(x, x), 1))],
                     save=INPUTS, costly=True, complex=True)
arcsinh = elementwise("arcsinh", np.arcsinh, "np.arcsinh({0})",
                      [lambda g, out, x: divide(g, sqrt(add(multiply(x, x), 1)))],
                      save=INPUTS, domain=(-3.0, 3.0), costly=True, complex=True)

# Numerically stable forms: no overflow for large |x|, finite gradients at +-100 and beyond.
sigmoid = elementwise("sigmoid", np.exp, "sigmoid_{f}({0})", [
    lambda g, out, x: multiply(g, multiply(out, subtract(1, out))),
], save=OUTPUT, domain=(-6.0, 6.0), impl=special.expit, costly=True)
sigmoid.abstract = _abstract("sigmoid", special.expit)   # (its dtypes: an int8 gives float64)
softplus = elementwise("softplus", np.exp, "softplus_{f}({0})", [lambda g, out, x: multiply(g, sigmoid(x))],
                       save=INPUTS, domain=(-6.0, 6.0), impl=lambda x: np.logaddexp(0, x), costly=True)
relu = elementwise("relu", np.positive, "relu_{f}({0})", [lambda g, out, x: where(greater(out, 0), g, 0)],
                   save=OUTPUT, impl=lambda x: np.maximum(x, 0))

# -- more of NumPy's math functions --------------------------------------------------

LN2, LN10 = math.log(2.0), math.log(10.0)


def _one_minus_square(x):
    # (1 - x)(1 + x): 1 - x*x would lose digits where |x| is near 1
    return multiply(subtract(1, x), add(x, 1))


def _wide_code(fn, x, dtype):
    """Scalar code of ``np.<fn>(x)`` for exp2 and log2, whose float32 fails in Numba next
    to a float64 one (both declare one LLVM intrinsic ``llvm.<fn>`` of the module, typed
    by the first use): float32 goes through float64, rounded once more."""
    if np.dtype(dtype) == np.float32:
        return f"np.float32(np.{fn}(np.float64({x})))"
    return f"np.{fn}({x})"


# At |x| = 1 the derivatives of arcsin and arccos are g / 0, inf as the formula (and
# JAX) gives, not NaN; outside [-1, 1] NaN as the value.
arcsin = elementwise("arcsin", np.arcsin, "np.arcsin({0})",
                     [lambda g, out, x: divide(g, sqrt(_one_minus_square(x)))],
                     save=INPUTS, domain=(-0.9, 0.9), costly=True, warns=True, complex=True)
arccos = elementwise("arccos", np.arccos, "np.arccos({0})",
                     [lambda g, out, x: negative(divide(g, sqrt(_one_minus_square(x))))],
                     save=INPUTS, domain=(-0.9, 0.9), costly=True, warns=True, complex=True)


def _arccosh_partial(g, out, x):
    # complex: sqrt(z - 1) sqrt(z + 1), the principal branch's slope; sqrt(z*z - 1) has
    # the opposite sign where Re z < 0
    if is_complex(x):
        return divide(g, multiply(sqrt(subtract(x, 1)), sqrt(add(x, 1))))
    return divide(g, sqrt(multiply(subtract(x, 1), add(x, 1))))


arccosh = elementwise("arccosh", np.arccosh, "np.arccosh({0})", [_arccosh_partial],
                      save=INPUTS, domain=(1.2, 3.0), costly=True, warns=True, complex=True)
arctanh = elementwise("arctanh", np.arctanh, "np.arctanh({0})",
                      [lambda g, out, x: divide(g, _one_minus_square(x))],
                      save=INPUTS, domain=(-0.9, 0.9), costly=True, warns=True, complex=True)
sinh = elementwise("sinh", np.sinh, "np.sinh({0})", [lambda g, out, x: multiply(g, cosh(x))],
                   save=INPUTS, costly=True, warns=True, complex=True)
cosh = elementwise("cosh", np.cosh, "np.cosh({0})", [lambda g, out, x: multiply(g, sinh(x))],
                   save=INPUTS, costly=True, warns=True, complex=True)
log2 = elementwise("log2", np.log2, lambda node: _wide_code("log2", "{0}", node.out.dtype),
                   [lambda g, out, x: divide(g, multiply(x, LN2))],
                   save=INPUTS, domain=(0.5, 3.0), costly=True, warns=True, complex=True)
log10 = elementwise("log10", np.log10, "np.log10({0})",
                    [lambda g, out, x: divide(g, multiply(x, LN10))],
                    save=INPUTS, domain=(0.5, 3.0), costly=True, warns=True, complex=True)
exp2 = elementwise("exp2", np.exp2, lambda node: _wide_code("exp2", "{0}", node.out.dtype),
                   [lambda g, out, x: multiply(g, multiply(out, LN2))],
                   save=OUTPUT, costly=True, warns=True, complex=True)
reciprocal = elementwise("reciprocal", np.reciprocal, "(np.{dtype}(1) / {0})",
                         [lambda g, out, x: negative(multiply(g, multiply(out, out)))],
                         save=OUTPUT, domain=(0.5, 2.0), warns=True, complex=True)
# infinite slope at 0: the examples keep away from it on both sides
cbrt = elementwise("cbrt", np.cbrt, "np.cbrt({0})",
                   [lambda g, out, x: divide(g, multiply(multiply(out, out), 3))],
                   save=OUTPUT, domain=(0.3, 2.0),
                   examples=UNARY_EXAMPLES + [ex((2, 3), domain=(-2.0, -0.3))], costly=True)
fabs = elementwise("fabs", np.fabs, "np.fabs({0})", [lambda g, out, x: multiply(g, sign(x))], save=INPUTS)
deg2rad = elementwise("deg2rad", np.deg2rad, "np.radians({0})",
                      [lambda g, out, x: multiply(g, math.pi / 180.0)], save=NOTHING, also=(np.radians,))
rad2deg = elementwise("rad2deg", np.rad2deg, "np.degrees({0})",
                      [lambda g, out, x: multiply(g, 180.0 / math.pi)], save=NOTHING, also=(np.degrees,))


def _sinc_partial(g, out, x):
    # (cos(pi x) - sinc(x)) / x, and at 0 its limit 0 (the divisor made 1 there so that
    # no NaN reaches the selected-away side, nor its derivatives)
    zero = equal(x, 0)
    slope = divide(subtract(cos(multiply(x, math.pi)), out), where(zero, 1, x))
    # (at 0: -pi^2/3 x, whose value is the limit 0 and whose slope sinc's second
    # derivative there, for Hessians)
    return multiply(g, where(zero, multiply(x, -math.pi ** 2 / 3), slope))


# NumPy's sinc: sin(pi x) / (pi x), 1 at 0 (np.sinc is a function, not a ufunc: np.sin
# gives its dtype rule)
sinc = elementwise("sinc", np.sin, "(np.sin(np.{dtype}(3.141592653589793) * {0}) / "
                   "(np.{dtype}(3.141592653589793) * {0}) if {0} != 0 else np.{dtype}(1))",
                   [_sinc_partial], save=(True, True), impl=np.sinc, costly=True)
numpy_dispatch(np.sinc)(sinc)
sinc.abstract = _abstract("sinc", np.sinc)      # (an integer or bool gives float64)


def _ignoring_nan(prefer):
    """fmax's (fmin's) rules: ``prefer(x, y)`` picks x where maximum (minimum) would, and
    x also where y is NaN (NumPy's result is then x); y gets the rest."""
    def x_rule(g, out, x, y):
        return where(logical_or(prefer(x, y), isnan(y)), g, 0)

    def y_rule(g, out, x, y):
        return where(logical_or(prefer(x, y), isnan(y)), 0, g)
    return [x_rule, y_rule]


# Selects on the operands, not calls: CUDA's math has no fmax, and a select vectorizes
fmax = elementwise("fmax", np.fmax, "({0} if ({0} >= {1} or {1} != {1}) else {1})",
                   _ignoring_nan(lambda x, y: greater_equal(x, y)), save=INPUTS)
fmin = elementwise("fmin", np.fmin, "({0} if ({0} <= {1} or {1} != {1}) else {1})",
                   _ignoring_nan(lambda x, y: less_equal(x, y)), save=INPUTS)


def _weight(x, out, exp_fn):
    # exp(x - out) in (0, 1]: no overflow; where x is out (both +inf) the weight is 1
    # rather than exp(inf - inf)
    return exp_fn(where(equal(x, out), 0, subtract(x, out)))


# NumPy's algorithm, as scalar code: the larger operand plus log1p of exp of minus the
# difference; at a tie (infinities too) x + ln2; NaN through the difference
logaddexp = elementwise(
    "logaddexp", np.logaddexp,
    "(({0} + np.{dtype}(0.6931471805599453)) if {0} == {1} else "
    "(({0} + np.log1p(np.exp({1} - {0}))) if {0} > {1} else "
    "(({1} + np.log1p(np.exp({0} - {1}))) if {0} < {1} else ({0} - {1}))))", [
        lambda g, out, x, y: multiply(g, _weight(x, out, exp)),
        lambda g, out, x, y: multiply(g, _weight(y, out, exp)),
    ], save=(True, True), domain=(-6.0, 6.0), costly=True)


def _logaddexp2_scalar(node):
    # as logaddexp, in base 2: log2(1 + v) is log1p(v) / ln2
    dtype = node.out.dtype
    return ("(({0} + np.{dtype}(1)) if {0} == {1} else "
            "(({0} + np.{dtype}(1.4426950408889634) * np.log1p(%s)) if {0} > {1} else "
            "(({1} + np.{dtype}(1.4426950408889634) * np.log1p(%s)) if {0} < {1} else "
            "({0} - {1}))))") % (_wide_code("exp2", "{1} - {0}", dtype),
                                  _wide_code("exp2", "{0} - {1}", dtype))


logaddexp2 = elementwise(
    "logaddexp2", np.logaddexp2, _logaddexp2_scalar, [
        lambda g, out, x, y: multiply(g, _weight(x, out, exp2)),
        lambda g, out, x, y: multiply(g, _weight(y, out, exp2)),
    ], save=(True, True), domain=(-6.0, 6.0), costly=True)


def _squared_norm(y, x):
    # a Python operand squared in Python: an op on two Python scalars would be a strongly
    # typed float64 tensor and widen a float32 cotangent
    return add(*[v * v if v.__class__ in (int, float) else multiply(v, v) for v in (y, x)])


# arctan2(y, x): the domain keeps y > 0, off the branch cut (y = 0, x < 0) and the origin
# (the operands cast to the result's dtype: Numba's float32 x int32 loop computes in
# float32 where NumPy's result is float64)
arctan2 = elementwise("arctan2", np.arctan2, "np.arctan2(np.{dtype}({0}), np.{dtype}({1}))", [
    lambda g, out, y, x: divide(multiply(g, x), _squared_norm(y, x)),
    lambda g, out, y, x: negative(divide(multiply(g, y), _squared_norm(y, x))),
], save=INPUTS, domain=((0.2, 2.0), (-2.0, 2.0)), costly=True)


def _hypot_partial(k):
    # x / hypot(x, y), with 0 at the origin (JAX's choice) where it would be 0 / 0
    def rule(g, out, x, y):
        return divide(multiply(g, (x, y)[k]), where(equal(out, 0), 1, out))
    return rule


hypot = elementwise("hypot", np.hypot, "np.hypot(np.{dtype}({0}), np.{dtype}({1}))", [_hypot_partial(0), _hypot_partial(1)],
                    save=(True, True), costly=True)

# copysign(x, y) = |x| with y's sign: the slope in x is sign(x) times that sign, which
# is sign(out) * sign(x) (0 at x = 0, as abs's); none in y (a jump at 0, flat elsewhere)
copysign = elementwise("copysign", np.copysign, "np.copysign({0}, {1})", [
    lambda g, out, x, y: multiply(g, multiply(sign(x), sign(out))),
    zero_partial,
], save=((True, False), True))

# -- rounding (no gradient) -------------------------------------------------------------

# Adding 2^52 (2^23 in float32) to a smaller magnitude rounds it to an integer, to even
# at a tie, as rint does: arithmetic only (math, and so CUDA's kernels, have no rint,
# and a select vectorizes where a call would not)
_ROUNDER = {np.dtype(np.float64): "4503599627370496.0", np.dtype(np.float32): "8388608.0"}


def _rint_code(x, dtype):
    """Scalar code of NumPy's rint of the expression ``x`` of float ``dtype``."""
    big = f"np.{dtype.name}({_ROUNDER[dtype]})"
    size = f"np.abs({x})"
    return f"np.copysign((({size} + {big}) - {big}) if {size} < {big} else {size}, {x})"


def _rint_scalar(node):
    dtype = node.out.dtype
    return _rint_code("{0}", dtype) if dtype in _ROUNDER else "np.rint({0})"


floor = elementwise("floor", np.floor, "np.floor({0})", differentiable=False)
ceil = elementwise("ceil", np.ceil, "np.ceil({0})", differentiable=False)
# (floor or ceil by the sign: CUDA's simulator cannot take math.trunc of a NumPy float32)
trunc = elementwise("trunc", np.trunc, "(np.floor({0}) if {0} >= 0 else np.ceil({0}))",
                    differentiable=False)
rint = elementwise("rint", np.rint, _rint_scalar, differentiable=False)


def _round_impl(x, decimals=0):
    return np.round(x, decimals)


def _round_scalar(node):
    """NumPy's round: rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d for d < 0, in
    the value's dtype; an integer is kept for d >= 0 (and rounded in float64 else)."""
    d = node.params.get("decimals", 0)
    dtype = node.out.dtype
    if dtype.kind != "f" and d >= 0:
        return "{0}"
    work = dtype if dtype in _ROUNDER else np.dtype(np.float64)
    try:
        power = float(10.0 ** abs(d))
    except OverflowError:                  # (|decimals| > 308: NumPy's inf, then NaN)
        power = math.inf
    scale = _float_code(power, work)
    x = f"np.{work.name}({{0}})" if work != dtype else "{0}"
    if d == 0:
        code = _rint_code(x, work)
    elif d > 0:
        code = f"({_rint_code(f'({x} * {scale})', work)} / {scale})"
    else:
        code = f"({_rint_code(f'({x} / {scale})', work)} * {scale})"
    return code if work == dtype else f"np.{dtype.name}({code})"


_round = elementwise("round", np.positive, _round_scalar, differentiable=False, impl=_round_impl,
                     examples=[ex((2, 3), decimals=0), ex((3,), decimals=2), ex((), decimals=1),
                               ex((2, 1, 3), decimals=-1)], domain=(-60.0, 60.0))


@numpy_dispatch(np.round, np.around)
def round(a, decimals=0, out=None):
    """``a`` rounded to ``decimals`` decimals (negative: to tens, hundreds, ...), halves
    to even, as NumPy rounds; no gradient (a zero one)."""
    if out is not None:
        raise UnsupportedError(at_user_line(
            f"round: out= is not supported on jittape tensors (a of shape {shape_of(a)}): a "
            "tensor is never written in place; use the result"))
    return _round.bind(a, decimals=operator.index(decimals))


around = round

# -- comparisons and logic (no gradient) ----------------------------------------------

# (complex values compare equal or not; NumPy orders them lexicographically, which the
# ordering comparisons refuse)
equal = elementwise("equal", np.equal, "({0} == {1})", differentiable=False, fast=operator.eq, complex=True)
not_equal = elementwise("not_equal", np.not_equal, "({0} != {1})", differentiable=False, fast=operator.ne,
                        complex=True)
greater = elementwise("greater", np.greater, "({0} > {1})", differentiable=False, fast=operator.gt)
greater_equal = elementwise("greater_equal", np.greater_equal, "({0} >= {1})", differentiable=False, fast=operator.ge)
less = elementwise("less", np.less, "({0} < {1})", differentiable=False, fast=operator.lt)
less_equal = elementwise("less_equal", np.less_equal, "({0} <= {1})", differentiable=False, fast=operator.le)
logical_and = elementwise("logical_and", np.logical_and, "(bool({0}) and bool({1}))", differentiable=False)
logical_or = elementwise("logical_or", np.logical_or, "(bool({0}) or bool({1}))", differentiable=False)
logical_not = elementwise("logical_not", np.logical_not, "(not {0})", differentiable=False)
isfinite = elementwise("isfinite", np.isfinite, "np.isfinite({0})", differentiable=False)
isnan = elementwise("isnan", np.isnan, "np.isnan({0})", differentiable=False)

# -- selection, casts, identity ---------------------------------------------------------


def _where_abstract(cond, x, y):
    shape = broadcast_shapes("where", shape_of(cond), shape_of(x), shape_of(y))
    return Aval(shape, ufunc_dtype("where", np.add, (x, y)))   # np.add promotes as np.where does


_COND = Fixed(np.array([[True, False, True], [False, False, True]]))
_WHERE_PARTIALS = [None, lambda g, out, c, x, y: _where.bind(c, g, 0),
                   lambda g, out, c, x, y: _where.bind(c, 0, g)]
_where = Primitive("where", np.where, abstract=_where_abstract, jvp=_WHERE_PARTIALS,
                   vjp=_WHERE_PARTIALS, broadcasts=True, save=((True, False, False), False), examples=[
    ex(_COND, (2, 3), (2, 3)), ex(_COND, (3,), (2, 1)), ex(_COND, (), 0.5),
    ex(Fixed(np.array([True, False])), (3, 2), (2,)),
], kind="elementwise", complex=True)


_where.lowerings["scalar"] = "({1} if {0} else {2})"


@numpy_dispatch(np.where)
def where(condition, x=None, y=None):
    """Elements of ``x`` where ``condition`` holds, of ``y`` elsewhere (broadcast together)."""
    if x is None or y is None:
        raise UnsupportedError(at_user_line(
            "where: the one-argument form (indices of nonzero elements) is not supported; "
            "pass both x and y"))
    return _where.bind(condition, x, y)


def _check_cast(source, dtype):
    if source.kind == "c" and dtype.kind != "c":
        raise UnsupportedError(at_user_line(
            f"cast: a complex value ({source.name}) to {dtype.name} would drop the imaginary "
            "part (NumPy warns with a ComplexWarning and drops it); take jt.real(z) or "
            "jt.abs(z)"))


def _cast_impl(x, dtype):
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x, dtype)


def _cast_abstract(x, dtype):
    if isinstance(x, Aval):
        _check_cast(x.dtype, dtype)
    return Aval(shape_of(x), dtype)


def _cast_vjp(g, out, x, dtype):
    if x.dtype.kind not in "fc":
        return None
    if x.dtype.kind == "f" and is_complex(g):   # a real value made complex: its real part
        g = _real_part.bind(g)
    return _cast.bind(g, dtype=x.dtype)


_cast = Primitive("cast", _cast_impl, abstract=_cast_abstract,
                  vjp=[_cast_vjp], jvp=[lambda t, out, x, dtype: _cast.bind(t, dtype=dtype)],
                  save=NOTHING,
                  examples=[ex((2, 3), dtype=np.dtype(np.float32)), ex((), dtype=np.dtype(np.float64))], kind="elementwise",
                  complex=True)


_cast.lowerings["scalar"] = "np.{dtype}({0})"


@public
def cast(x, dtype):
    """``x`` converted to ``dtype`` (the gradient is cast back; a real value made complex
    gets the real part of its gradient). A complex ``x`` to a real dtype raises: NumPy
    would drop the imaginary part (with a ComplexWarning)."""
    dtype = np.dtype(dtype)
    if is_complex(x):
        _check_cast(np.dtype(x.dtype) if hasattr(x, "dtype") else np.dtype(np.complex128), dtype)
    return _cast.bind(x, dtype=dtype)


identity = Primitive("identity", lambda x: x, abstract=lambda x: Aval(shape_of(x), x.dtype),
                     vjp=[lambda g, out, x: g], jvp=[lambda t, out, x: t], save=NOTHING, examples=UNARY_EXAMPLES, kind="elementwise", aliases=("cpu",),
                     complex=True)

stop_gradient = Primitive("stop_gradient", lambda x: x,
                          abstract=lambda x: Aval(shape_of(x), x.dtype), differentiable=False,
                          examples=UNARY_EXAMPLES, kind="elementwise", aliases=("cpu",), complex=True)
identity.lowerings["scalar"] = stop_gradient.lowerings["scalar"] = "{0}"


@composite(examples=[ex((2, 3), -0.5, 0.5), ex((4,), None, 0.3), ex((2, 2), -0.2, None),
                     ex((3,), (3,), 1.0)], numpy=(np.clip,))
def clip(x, a_min=None, a_max=None):
    """Values limited to [a_min, a_max]; either bound may be None."""
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def _nan_to_num_impl(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _float_code(value, dtype):
    with np.errstate(over="ignore"):       # (a bound beyond float32's range is its inf)
        value = dtype.type(value)
    if np.isnan(value):
        return f"np.{dtype.name}(np.nan)"
    if np.isinf(value):
        return f"np.{dtype.name}({'-' if value < 0 else ''}np.inf)"
    return f"np.{dtype.name}({float(dtype.type(value))!r})"


def _nan_to_num_scalar(node):
    dtype = node.out.dtype
    if dtype.kind != "f":
        return "{0}"
    p, info = node.params, np.finfo(dtype)
    posinf = info.max if p.get("posinf") is None else p["posinf"]
    neginf = info.min if p.get("neginf") is None else p["neginf"]
    return (f"({{0}} if np.isfinite({{0}}) else ({_float_code(p.get('nan', 0.0), dtype)} "
            f"if {{0}} != {{0}} else ({_float_code(posinf, dtype)} if {{0}} > 0 else "
            f"{_float_code(neginf, dtype)})))")


# The gradient passes where the value is kept (finite), and is zero where a constant
# replaced it
_nan_to_num = elementwise("nan_to_num", np.positive, _nan_to_num_scalar,
                          [lambda g, out, x, **params: where(isfinite(x), g, 0)],
                          save=INPUTS, impl=_nan_to_num_impl)


@numpy_dispatch(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``x`` with NaN replaced by ``nan``, inf by ``posinf`` and -inf by ``neginf`` (None:
    the dtype's largest and smallest finite values), as NumPy's; the gradient passes
    through the finite elements and is zero at the replaced ones. ``copy`` is accepted
    for NumPy's signature (a tensor is never changed in place)."""
    return _nan_to_num.bind(x, nan=float(nan), posinf=None if posinf is None else float(posinf),
                            neginf=None if neginf is None else float(neginf))


# -- the parts of complex values ---------------------------------------------------------
# Under the convention of API.md (the gradient of a real loss in z = x + iy is
# dL/dx + i dL/dy), a real cotangent g of Re z goes back as g + 0i, of Im z as 0 + gi,
# and a cotangent of conj z as its conjugate. On real values the primitives are what
# NumPy gives (the value, zeros, the value); the public functions skip them there.

def _part_dtype(x):
    return np.empty(0, x.dtype).real.dtype


def _conj_scalar(node):
    if node.out.dtype.kind != "c":
        return "{0}"
    return "np.{dtype}(complex({0}.real, -{0}.imag))"


def _real_part_vjp(g, out, x):
    return _cast.bind(g, dtype=x.dtype) if x.dtype.kind == "c" else g


def _imag_part_vjp(g, out, x):
    return multiply(_cast.bind(g, dtype=x.dtype), 1j) if x.dtype.kind == "c" else None


_real_part = Primitive("real_part", np.real, abstract=lambda x: Aval(shape_of(x), _part_dtype(x)),
                       vjp=[_real_part_vjp], jvp=[lambda t, out, x: _real_part.bind(t)],
                       save=NOTHING, examples=UNARY_EXAMPLES[:2], kind="elementwise",
                       complex=True)
_imag_part = Primitive("imag_part", np.imag, abstract=lambda x: Aval(shape_of(x), _part_dtype(x)),
                       vjp=[_imag_part_vjp], jvp=[lambda t, out, x: _imag_part.bind(t)],
                       save=NOTHING, examples=UNARY_EXAMPLES[:2], kind="elementwise",
                       complex=True)
_conj = Primitive("conj", np.conjugate, abstract=lambda x: Aval(shape_of(x), x.dtype),
                  vjp=[lambda g, out, x: conj_of(g)], jvp=[lambda t, out, x: conj_of(t)],
                  save=NOTHING, examples=UNARY_EXAMPLES[:2], kind="elementwise", complex=True)
_real_part.lowerings["scalar"] = "{0}.real"
_imag_part.lowerings["scalar"] = "{0}.imag"
_conj.lowerings["scalar"] = _conj_scalar


@composite(examples=UNARY_EXAMPLES[:2], numpy=(np.real,))
def real(val):
    """``np.real``: the real part of a complex tensor (its dtype's real dtype); a real
    tensor itself."""
    return _real_part.bind(val) if is_complex(val) else val


@composite(examples=UNARY_EXAMPLES[:2], numpy=(np.real_if_close,))
def real_if_close(a, tol=100):
    """``np.real_if_close``: a real tensor itself; a complex one's real part where every
    imaginary part is within ``tol`` machine epsilons of 0 (a test of the values: eager
    only, a traced complex value raises)."""
    if not is_complex(a):
        return a
    value = getattr(a, "_value", None)
    if value is None:
        raise UnsupportedError(at_user_line(
            f"real_if_close: whether a traced complex value (shape {shape_of(a)}) is real "
            "is known only when the compiled code runs; use jt.real(x) to take its real part"))
    if tol > 1:
        tol = tol * np.finfo(value.dtype).eps
    return _real_part.bind(a) if np.all(np.abs(value.imag) < tol) else a


@composite(examples=UNARY_EXAMPLES[:2], numpy=(np.imag,))
def imag(val):
    """``np.imag``: the imaginary part of a complex tensor; of a real tensor zeros of its
    dtype (``x < x`` is False everywhere, NaN and inf included), with no gradient."""
    if is_complex(val):
        return _imag_part.bind(val)
    return cast(less(val, val), val.dtype)


@composite(examples=UNARY_EXAMPLES[:2])
def conjugate(x):
    """``np.conjugate`` (``np.conj``): the complex conjugate; a real tensor itself."""
    return conj_of(x)


@composite(examples=UNARY_EXAMPLES[:2], numpy=(np.angle,))
def angle(z, deg=False):
    """``np.angle``: the argument of a complex value, ``arctan2(imag, real)`` (0 at 0,
    its gradient there NaN); of a real tensor pi where it is negative, else 0 (NaN
    kept), with no gradient (it is constant between its jumps); in degrees with ``deg``."""
    half_turn = 180.0 if deg else math.pi
    if is_complex(z):
        a = arctan2(_imag_part.bind(z), _real_part.bind(z))
        return multiply(a, half_turn / math.pi) if deg else a
    # (the step in z's dtype times a Python number: a float32 tensor stays float32)
    return where(isnan(z), z, multiply(cast(less(z, 0), z.dtype), half_turn))


conj = conjugate
UFUNC_TABLE[np.conjugate] = conjugate


# -- comparisons of closeness, and choices among several values ------------------------------

@composite(examples=[ex((2, 3), (2, 3)), ex((3,), (2, 3))])
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """NumPy's ``isclose``: ``|a - b| <= atol + rtol |b|`` where both are finite, equality
    where either is not (infinities of one sign are close); no gradient."""
    finite = logical_and(isfinite(a), isfinite(b))
    # (the difference of the finite pairs only: inf - inf would warn)
    fa, fb = where(finite, a, 0), where(finite, b, 0)
    near = less_equal(abs(subtract(fa, fb)), add(atol, multiply(rtol, abs(fb))))
    close = where(finite, near, equal(a, b))
    return logical_or(close, logical_and(isnan(a), isnan(b))) if equal_nan else close


def _select_call(c, x, y):
    return select([greater(c, 0)], [x], y)


@composite(examples=[ex((2, 3), (2, 3), (2, 3))], call=_select_call)
def select(condlist, choicelist, default=0):
    """NumPy's ``select``: each element from the first choice whose condition holds,
    ``default`` where none does (a chain of ``where``, the last condition innermost)."""
    if len(condlist) != len(choicelist):
        raise ValueError(at_user_line(
            f"select: {len(condlist)} conditions but {len(choicelist)} choices"))
    out = default
    for cond, choice in zip(reversed(list(condlist)), reversed(list(choicelist))):
        out = where(cond, choice, out)
    return out


numpy_dispatch(np.isclose)(isclose)
numpy_dispatch(np.select)(select)
