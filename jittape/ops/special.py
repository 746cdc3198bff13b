"""scipy.special's functions as jittape ops.

Primitives: ``erf``, ``erfc``, ``gamma``, ``gammaln``, ``digamma``, ``polygamma``,
``erfinv``, ``ndtri``, ``log_ndtr``, the modified Bessel functions ``i0``, ``i1``,
``i0e``, ``i1e`` and the regularized incomplete gamma functions ``gammainc`` and
``gammaincc``. Composites of them (their gradients come from the parts and
differentiate again): ``xlogy``, ``xlog1py``, ``logit``, ``log_expit``, ``ndtr``,
``erfcinv``, ``betaln``, ``beta``, ``multigammaln``, ``entr``, ``rel_entr``,
``kl_div``, ``boxcox``.

SciPy's ufuncs called on tensors reach them (``scipy.special.erf(t)``), as NumPy's do;
``jt.scipy.special`` names them with ``expit``, ``logsumexp``, ``softmax`` and
``log_softmax`` (the ops of other families under SciPy's names and signatures).

The lowerings call Python's ``math`` (``erf``, ``erfc``, ``gamma``, ``lgamma``: the
CPU's and CUDA's alike); ``digamma``/``polygamma`` call ``codegen/special.py``'s series,
and ``erfinv``, ``ndtri``, ``log_ndtr``, the Bessel functions and ``gammainc``/
``gammaincc`` SciPy's own C functions (``codegen/special.py``: ``scipy_special``). Those
are CPU only: on CUDA they raise ``UnsupportedError``, and so do the gradients of
``gamma`` and ``gammaln`` (digamma). ``gammainc``'s gradient is with respect to ``x``
only, as PyTorch's: the derivative in ``a`` has no closed form (JAX and TensorFlow
compute it with a series of their own), and asking for it raises ``UnsupportedError``.
"""

import math

import numpy as np
from scipy import special

from ..errors import UnsupportedError, at_user_line
from ..tensor import UFUNC_TABLE
from . import elementwise as ew
from .core import Fixed, composite, ex, public, shape_of
from .elementwise import INPUTS, OUTPUT, UNARY_EXAMPLES, elementwise

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)


def _gauss(x):
    return ew.exp(ew.negative(ew.multiply(x, x)))


erf = elementwise("erf", special.erf, "np.{dtype}(math.erf({0}))", [
    lambda g, out, x: ew.multiply(g, ew.multiply(_gauss(x), _TWO_OVER_SQRT_PI)),
], save=INPUTS, costly=True, complex="eager")
erfc = elementwise("erfc", special.erfc, "np.{dtype}(math.erfc({0}))", [
    lambda g, out, x: ew.multiply(g, ew.multiply(_gauss(x), -_TWO_OVER_SQRT_PI)),
], save=INPUTS, costly=True, complex="eager")


def _polygamma_scalar(node):
    return f"polygamma_{{f}}({node.params['n']}, np.{{dtype}}({{0}}))"


def _polygamma_partial(g, out, x, n):
    return ew.multiply(g, polygamma_prim.bind(x, n=n + 1))


polygamma_prim = elementwise("polygamma", special.digamma, _polygamma_scalar,
                             [_polygamma_partial], save=INPUTS, domain=(0.5, 3.0),
                             impl=lambda x, n: special.polygamma(n, x).astype(
                                 np.result_type(x, np.float16)),
                             costly=True)
polygamma_prim.examples = [ex((3,), n=1), ex((2, 3), n=2), ex((), n=1)]
polygamma_prim.backends = ("cpu",)

digamma = elementwise("digamma", special.digamma, "digamma_{f}(np.{dtype}({0}))", [
    lambda g, out, x: ew.multiply(g, polygamma_prim.bind(x, n=1)),
], save=INPUTS, domain=(0.5, 3.0), costly=True)
digamma.backends = ("cpu",)
UFUNC_TABLE[special.psi] = digamma            # (SciPy's other name for it)

gammaln = elementwise("gammaln", special.gammaln, "np.{dtype}(math.lgamma({0}))", [
    lambda g, out, x: ew.multiply(g, digamma(x)),
], save=INPUTS, domain=(0.5, 3.0), costly=True)
gammaln.cuda_note = "value only (its gradient, digamma, on the CPU)"


@public
def polygamma(n, x):
    """``scipy.special.polygamma(n, x)``: the n-th derivative of digamma (``n`` an int,
    0 for digamma itself)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(at_user_line(
            f"polygamma: the order n must be a non-negative int, got {n!r}"))
    n = int(n)
    return digamma(x) if n == 0 else polygamma_prim.bind(x, n=n)


def _python_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.0, 2.0), (0.5, 2.0)))
def xlogy(x, y):
    """``x * log(y)``, 0 where ``x`` is 0 whatever ``y`` (as SciPy); its derivatives are
    JAX's: ``log(y)`` in ``x`` at ``x = 0`` (the true one, where ``y > 0``), and 0 there
    for ``y <= 0``, where the log is replaced by 0 (no NaN reaches either gradient)."""
    if _python_number(x) and x != 0:      # (Python's test of a constant: no ops for it)
        return ew.multiply(x, ew.log(y))
    zero = True if _python_number(x) else ew.equal(x, 0)
    safe = ew.where(ew.logical_and(zero, ew.less_equal(y, 0)), 1, y)
    return ew.multiply(x, ew.log(safe))


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.0, 2.0), (-0.5, 2.0)))
def xlog1py(x, y):
    """``x * log1p(y)``, 0 where ``x`` is 0 whatever ``y`` (derivatives as ``xlogy``'s)."""
    if _python_number(x) and x != 0:
        return ew.multiply(x, ew.log1p(y))
    zero = True if _python_number(x) else ew.equal(x, 0)
    safe = ew.where(ew.logical_and(zero, ew.less_equal(y, -1)), 0, y)
    return ew.multiply(x, ew.log1p(safe))


@composite(examples=UNARY_EXAMPLES[:3], domain=(0.1, 0.9))
def logit(p):
    """``log(p / (1 - p))``, the inverse of ``expit`` (sigmoid)."""
    return ew.subtract(ew.log(p), ew.log1p(ew.negative(p)))


# -- gamma, beta --------------------------------------------------------------------------

gamma = elementwise("gamma", special.gamma, "np.{dtype}(math.gamma({0}))", [
    lambda g, out, x: ew.multiply(g, ew.multiply(out, digamma(x))),
], save=(True, True), domain=(0.5, 3.0), costly=True)
gamma.cuda_note = "value only (its gradient, digamma, on the CPU)"


def _gamma_negative(x):
    """Where gamma(x) is negative: on (-1, 0), (-3, -2), ..."""
    return ew.logical_and(ew.less(x, 0), ew.equal(ew.mod(ew.floor(x), 2), 1))


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,)), ex((), (2,))],
           domain=((0.5, 3.0), (0.5, 3.0)))
def betaln(a, b):
    """``log |B(a, b)|`` = gammaln(a) + gammaln(b) - gammaln(a + b) (as SciPy's, the log
    of the absolute value for negative arguments)."""
    return ew.subtract(ew.add(gammaln(a), gammaln(b)), gammaln(ew.add(a, b)))


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.5, 3.0), (0.5, 3.0)))
def beta(a, b):
    """The beta function ``gamma(a) gamma(b) / gamma(a + b)``, as the exponential of
    ``betaln`` with the gamma functions' signs (no overflow of the gammas for large
    arguments)."""
    negative = ew.not_equal(ew.not_equal(_gamma_negative(a), _gamma_negative(b)),
                            _gamma_negative(ew.add(a, b)))
    magnitude = ew.exp(betaln(a, b))
    return ew.where(negative, ew.negative(magnitude), magnitude)


def _check_order(op, d):
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(at_user_line(f"{op}: the dimension d must be a positive int, got {d!r}"))
    return int(d)


@composite(examples=[ex((3,), d=1), ex((2, 3), d=3), ex((), d=2)], domain=(1.5, 4.0))
def multigammaln(a, d):
    """``scipy.special.multigammaln(a, d)``: the log of the multivariate gamma function
    of dimension ``d`` (an int), d (d - 1) / 4 log(pi) + sum of gammaln(a - j / 2) for j
    below d. SciPy raises where ``a <= (d - 1) / 2``; this checks it for values known
    when called (not a traced value, which gives gammaln's values there)."""
    d = _check_order("multigammaln", d)
    if not hasattr(a, "_trace"):      # (a tracer's value is known when the compiled code runs)
        low = np.asarray(getattr(a, "_value", a), np.float64)
        if np.any(low <= 0.5 * (d - 1)):
            raise ValueError(at_user_line(
                f"multigammaln: a (shape {shape_of(a)}) must be greater than (d - 1) / 2 = "
                f"{0.5 * (d - 1)}, got {float(np.min(low))}"))
    total = d * (d - 1) * 0.25 * math.log(math.pi)
    for j in range(d):
        total = ew.add(total, gammaln(ew.subtract(a, 0.5 * j)))
    return total


# -- the normal distribution's functions, erfinv --------------------------------------------

def _erfinv_partial(g, out, x):
    return ew.multiply(g, ew.multiply(ew.exp(ew.multiply(out, out)), _SQRT_PI_OVER_TWO))


def _ndtri_partial(g, out, p):
    return ew.multiply(g, ew.multiply(ew.exp(ew.multiply(ew.multiply(out, out), 0.5)), _SQRT_2PI))


def _log_ndtr_partial(g, out, x):
    # pdf / cdf in logs: finite far into the lower tail, where both underflow
    log_pdf = ew.subtract(ew.multiply(ew.multiply(x, x), -0.5), _HALF_LOG_2PI)
    return ew.multiply(g, ew.exp(ew.subtract(log_pdf, out)))


def _scipy_code(name):
    return "np.{dtype}(scipy_special(\"" + name + "\", " + "{0}))"


erfinv = elementwise("erfinv", special.erfinv, _scipy_code("erfinv"), [_erfinv_partial],
                     save=OUTPUT, domain=(-0.9, 0.9), costly=True)
ndtri = elementwise("ndtri", special.ndtri, _scipy_code("ndtri"), [_ndtri_partial],
                    save=OUTPUT, domain=(0.05, 0.95), costly=True)
log_ndtr = elementwise("log_ndtr", special.log_ndtr, _scipy_code("log_ndtr"),
                       [_log_ndtr_partial], save=(True, True), domain=(-6.0, 4.0),
                       costly=True)


@composite(examples=UNARY_EXAMPLES[:3], domain=(-3.0, 3.0))
def ndtr(x):
    """The standard normal distribution function, ``erfc(-x / sqrt(2)) / 2``."""
    return ew.multiply(erfc(ew.multiply(x, -_SQRT1_2)), 0.5)


@composite(examples=UNARY_EXAMPLES[:3], domain=(0.1, 1.9))
def erfcinv(y):
    """The inverse of ``erfc``, ``-ndtri(y / 2) / sqrt(2)`` (as SciPy computes it: exact
    near 0, where ``erfinv(1 - y)`` would have rounded ``1 - y``)."""
    return ew.multiply(ndtri(ew.multiply(y, 0.5)), -_SQRT1_2)


@composite(examples=UNARY_EXAMPLES[:3], domain=(-6.0, 6.0))
def log_expit(x):
    """``log(expit(x))``, ``-softplus(-x)``: no overflow or log of 0 at either end."""
    return ew.negative(ew.softplus(ew.negative(x)))


# -- modified Bessel functions of orders 0 and 1 ---------------------------------------------

def _safe_divisor(x):
    zero = ew.equal(x, 0)
    return zero, ew.where(zero, 1, x)


def _i1_partial(g, out, x):
    # i0(x) - i1(x) / x, and at 0 its limit 1/2 (no 0/0 on the selected-away side)
    zero, safe = _safe_divisor(x)
    return ew.multiply(g, ew.where(zero, 0.5, ew.subtract(i0(x), ew.divide(out, safe))))


def _i0e_partial(g, out, x):
    return ew.multiply(g, ew.subtract(i1e(x), ew.multiply(ew.sign(x), out)))


def _i1e_partial(g, out, x):
    zero, safe = _safe_divisor(x)
    slope = ew.subtract(ew.subtract(i0e(x), ew.divide(out, safe)), ew.multiply(ew.sign(x), out))
    return ew.multiply(g, ew.where(zero, 0.5, slope))


i0 = elementwise("i0", special.i0, _scipy_code("i0"),
                 [lambda g, out, x: ew.multiply(g, i1(x))], save=INPUTS, costly=True)
i1 = elementwise("i1", special.i1, _scipy_code("i1"), [_i1_partial], save=(True, True),
                 costly=True)
i0e = elementwise("i0e", special.i0e, _scipy_code("i0e"), [_i0e_partial], save=(True, True),
                  costly=True)
i1e = elementwise("i1e", special.i1e, _scipy_code("i1e"), [_i1e_partial], save=(True, True),
                  costly=True)


# -- the regularized incomplete gamma functions --------------------------------------------

def _incomplete_gamma_density(a, x):
    """x^(a-1) e^-x / gamma(a), the derivative of gammainc in x (in logs: no overflow of
    the power or the gamma function for large a). A float32 ``a`` beside a float64 ``x`` is
    widened first, so that gammaln(a) is not rounded to float32."""
    wide = np.result_type(getattr(a, "dtype", np.float16), getattr(x, "dtype", np.float16))
    if getattr(a, "dtype", wide) != wide:
        a = ew.cast(a, wide)
    return ew.exp(ew.subtract(ew.subtract(xlogy(ew.subtract(a, 1), x), x), gammaln(a)))


def _no_partial_in_a(op):
    def partial(g, out, a, x):
        raise UnsupportedError(at_user_line(
            f"{op}: the gradient with respect to a (shape {shape_of(a)}, with x of shape "
            f"{shape_of(x)}) is not implemented, only with respect to x; pass a as a "
            "constant, or through jt.stop_gradient(a)"))
    return partial


# (float32 values of a: a float32 x gives float32)
_GAMMAINC_EXAMPLES = [ex(Fixed(np.array([0.5, 1.5, 3.0], np.float32)), (3,)),
                      ex(Fixed(np.array(2.5, np.float32)), (2, 3)),
                      ex(Fixed(np.array([[0.7], [4.0]], np.float32)), (3,))]
gammainc = elementwise("gammainc", special.gammainc, _scipy_code("gammainc").replace(
    "{0}", "{0}, {1}"), [
    _no_partial_in_a("gammainc"),
    lambda g, out, a, x: ew.multiply(g, _incomplete_gamma_density(a, x)),
], save=(True, False), examples=_GAMMAINC_EXAMPLES, domain=((0.5, 3.0), (0.1, 4.0)),
    costly=True)
gammaincc = elementwise("gammaincc", special.gammaincc, _scipy_code("gammaincc").replace(
    "{0}", "{0}, {1}"), [
    _no_partial_in_a("gammaincc"),
    lambda g, out, a, x: ew.negative(ew.multiply(g, _incomplete_gamma_density(a, x))),
], save=(True, False), examples=_GAMMAINC_EXAMPLES, domain=((0.5, 3.0), (0.1, 4.0)),
    costly=True)
# -- Bessel functions of the first and second kinds, of any order ------------------------------

def _no_partial_in(op, what):
    """The rule of a parameter an op has no derivative in (an order, a shape parameter)."""
    def partial(g, out, *args):
        shapes = " and ".join(str(shape_of(a)) for a in args)
        raise UnsupportedError(at_user_line(
            f"{op}: the gradient with respect to {what} (operand shapes {shapes}) is not "
            f"implemented, only with respect to the last operand; pass {what} as a constant, "
            "or through jt.stop_gradient"))
    return partial


def _j1_partial(g, out, x):
    # j0(x) - j1(x) / x, and at 0 its limit 1/2 (no 0/0 on the selected-away side)
    zero, safe = _safe_divisor(x)
    return ew.multiply(g, ew.where(zero, 0.5, ew.subtract(j0(x), ew.divide(out, safe))))


def _y1_partial(g, out, x):
    # y0(x) - y1(x) / x (y1 has a pole at 0: -inf there, as its derivative's limit)
    return ew.multiply(g, ew.subtract(y0(x), ew.divide(out, x)))


def _order_partial(g, v, x, bessel, sign):
    """d/dx of a Bessel function of order v: (f(v - 1, x) + sign f(v + 1, x)) / 2."""
    lower = bessel(ew.subtract(v, 1), x)
    upper = bessel(ew.add(v, 1), x)
    both = ew.add(lower, upper) if sign > 0 else ew.subtract(lower, upper)
    return ew.multiply(g, ew.multiply(both, 0.5))


def _ive_partial(g, out, v, x):
    # ive = iv exp(-|x|): iv's rule on the scaled functions, less sign(x) ive
    both = ew.add(ive(ew.subtract(v, 1), x), ive(ew.add(v, 1), x))
    return ew.multiply(g, ew.subtract(ew.multiply(both, 0.5), ew.multiply(ew.sign(x), out)))


def _two(name):
    return _scipy_code(name).replace("{0}", "{0}, {1}")


# orders fixed (no gradient in them), x where the functions are smooth
# (float32 orders: a float32 x gives float32, as SciPy's)
_ORDER_EXAMPLES = [ex(Fixed(np.array([0.0, 1.0, 2.5], np.float32)), (3,)),
                   ex(Fixed(np.array(2.0, np.float32)), (2, 3)),
                   ex(Fixed(np.array([[1.0], [3.0]], np.float32)), (3,))]
_INTEGER_ORDER_EXAMPLES = [ex(Fixed(np.array([0.0, 1.0, 2.0], np.float32)), (3,)),
                           ex(Fixed(np.array(2.0, np.float32)), (2, 3))]

j0 = elementwise("j0", special.j0, _scipy_code("j0"),
                 [lambda g, out, x: ew.negative(ew.multiply(g, j1(x)))], save=INPUTS,
                 domain=(0.2, 8.0), costly=True)
j1 = elementwise("j1", special.j1, _scipy_code("j1"), [_j1_partial], save=(True, True),
                 domain=(0.2, 8.0), costly=True)
y0 = elementwise("y0", special.y0, _scipy_code("y0"),
                 [lambda g, out, x: ew.negative(ew.multiply(g, y1(x)))], save=INPUTS,
                 domain=(0.5, 8.0), costly=True)
y1 = elementwise("y1", special.y1, _scipy_code("y1"), [_y1_partial], save=(True, True),
                 domain=(0.5, 8.0), costly=True)
jv = elementwise("jv", special.jv, _two("jv"), [_no_partial_in("jv", "the order v"),
                                  lambda g, out, v, x: _order_partial(g, v, x, jv, -1)],
                 save=(True, False), examples=_ORDER_EXAMPLES, domain=((0.0, 3.0), (0.5, 6.0)),
                 costly=True)
yn = elementwise("yn", special.yn, _two("yn"), [_no_partial_in("yn", "the order n"),
                                  lambda g, out, n, x: _order_partial(g, n, x, yn, -1)],
                 save=(True, False), examples=_INTEGER_ORDER_EXAMPLES,
                 domain=((0.0, 3.0), (0.5, 6.0)), costly=True)
iv = elementwise("iv", special.iv, _two("iv"), [_no_partial_in("iv", "the order v"),
                                  lambda g, out, v, x: _order_partial(g, v, x, iv, 1)],
                 save=(True, False), examples=_ORDER_EXAMPLES, domain=((0.0, 3.0), (0.5, 6.0)),
                 costly=True)
ive = elementwise("ive", special.ive, _two("ive"), [_no_partial_in("ive", "the order v"),
                                                    _ive_partial],
                  save=(True, True), examples=_ORDER_EXAMPLES, domain=((0.0, 3.0), (0.5, 6.0)),
                  costly=True)

# -- 1 / gamma, the sign of gamma, the regularized incomplete beta function, Student's t ------

rgamma = elementwise("rgamma", special.rgamma, _scipy_code("rgamma"), [
    lambda g, out, x: ew.negative(ew.multiply(g, ew.multiply(out, digamma(x)))),
], save=(True, True), domain=(0.3, 3.0), costly=True)
gammasgn = elementwise("gammasgn", special.gammasgn, _scipy_code("gammasgn"),
                       differentiable=False, domain=(0.3, 3.0), costly=True)


def _widened(p, x):
    """``p`` in ``x``'s dtype where that is wider (a float32 shape parameter beside a
    float64 x: its gammaln is not rounded to float32)."""
    wide = np.result_type(getattr(p, "dtype", np.float16), getattr(x, "dtype", np.float16))
    return ew.cast(p, wide) if getattr(p, "dtype", wide) != wide else p


def _betainc_density(g, out, a, b, x):
    # x^(a-1) (1-x)^(b-1) / B(a, b), in logs (no overflow of B for large a, b)
    a, b = _widened(a, x), _widened(b, x)
    log_density = ew.subtract(ew.add(xlogy(ew.subtract(a, 1), x),
                                     xlog1py(ew.subtract(b, 1), ew.negative(x))), betaln(a, b))
    return ew.multiply(g, ew.exp(log_density))


_BETAINC_EXAMPLES = [ex(Fixed(np.array([0.5, 1.5, 3.0], np.float32)),
                        Fixed(np.array([2.0, 0.7, 1.2], np.float32)), (3,)),
                     ex(Fixed(np.array(2.5, np.float32)), Fixed(np.array(1.5, np.float32)),
                        (2, 3))]
betainc = elementwise("betainc", special.betainc, _scipy_code("betainc").replace(
    "{0}", "{0}, {1}, {2}"), [_no_partial_in("betainc", "a"), _no_partial_in("betainc", "b"),
                              _betainc_density],
    save=(True, False), examples=_BETAINC_EXAMPLES, domain=((0.5, 3.0), (0.5, 3.0), (0.1, 0.9)),
    costly=True)


def _stdtr_density(g, out, df, t):
    # Student's t density: exp(gammaln((df+1)/2) - gammaln(df/2)) / sqrt(df pi)
    # (1 + t^2/df)^(-(df+1)/2)
    df = _widened(df, t)
    half = ew.multiply(ew.add(df, 1), 0.5)
    log_density = ew.subtract(
        ew.subtract(gammaln(half), gammaln(ew.multiply(df, 0.5))),
        ew.add(ew.multiply(ew.log(ew.multiply(df, math.pi)), 0.5),
               ew.multiply(half, ew.log1p(ew.divide(ew.multiply(t, t), df)))))
    return ew.multiply(g, ew.exp(log_density))


stdtr = elementwise("stdtr", special.stdtr, _two("stdtr"), [
    _no_partial_in("stdtr", "the degrees of freedom df"), _stdtr_density],
    save=(True, False), examples=[ex(Fixed(np.array([1.0, 2.5, 7.0], np.float32)), (3,)),
                                  ex(Fixed(np.array(3.0, np.float32)), (2, 3))],
    domain=((1.0, 5.0), (-3.0, 3.0)), costly=True)


for _prim in (erfinv, ndtri, log_ndtr, i0, i1, i0e, i1e, gammainc, gammaincc,
              j0, j1, y0, y1, jv, yn, iv, ive, rgamma, gammasgn, betainc, stdtr):
    _prim.backends = ("cpu",)           # (SciPy's C functions: the host's)
del _prim


# -- information theory, Box-Cox ---------------------------------------------------------------

@composite(examples=UNARY_EXAMPLES[:3], domain=(0.1, 2.0))
def entr(x):
    """``-x log(x)`` for x > 0, 0 at 0, -inf below (SciPy's)."""
    return ew.where(ew.less(x, 0), -np.inf, ew.negative(xlogy(x, x)))


def _relative_parts(x, y):
    """(where both are positive, where x is 0 and y not negative, x and y made 1 outside
    the first: no log of 0 or of a negative on the side ``where`` drops)."""
    both = ew.logical_and(ew.greater(x, 0), ew.greater(y, 0))
    edge = ew.logical_and(ew.equal(x, 0), ew.greater_equal(y, 0))
    return both, edge, ew.where(both, x, 1), ew.where(both, y, 1)


def _nan_of(x, y, value):
    return ew.where(ew.logical_or(ew.isnan(x), ew.isnan(y)), np.nan, value)


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.1, 2.0), (0.1, 2.0)))
def rel_entr(x, y):
    """``x log(x / y)`` for positive x and y, 0 for x = 0 and y >= 0, inf elsewhere."""
    both, edge, xs, ys = _relative_parts(x, y)
    value = ew.multiply(xs, ew.log(ew.divide(xs, ys)))
    return _nan_of(x, y, ew.where(edge, 0.0, ew.where(both, value, np.inf)))


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.1, 2.0), (0.1, 2.0)))
def kl_div(x, y):
    """``x log(x / y) - x + y`` for positive x and y, y for x = 0 and y >= 0, inf
    elsewhere."""
    both, edge, xs, ys = _relative_parts(x, y)
    value = ew.add(ew.subtract(ew.multiply(xs, ew.log(ew.divide(xs, ys))), xs), ys)
    return _nan_of(x, y, ew.where(both, value, ew.where(edge, y, np.inf)))


@composite(examples=[ex((3,), (3,)), ex((2, 3), ()), ex((3,), 0.0)],
           domain=((0.2, 3.0), (-1.0, 1.0)))
def boxcox(x, lmbda):
    """The Box-Cox transform, ``(x**lmbda - 1) / lmbda`` (as ``expm1(lmbda log x) / lmbda``),
    ``log(x)`` where ``|lmbda| < 1e-19`` (SciPy's threshold; there as ``log x + lmbda
    log(x)**2 / 2``, the same value, so that the derivative in ``lmbda`` is right at 0)."""
    log_x = ew.log(x)
    if _python_number(lmbda):          # (a constant: no derivative in it, no ops for the test)
        if abs(lmbda) < 1e-19:
            return log_x
        return ew.divide(ew.expm1(ew.multiply(lmbda, log_x)), lmbda)
    near_zero = ew.add(log_x, ew.multiply(ew.multiply(lmbda, 0.5), ew.multiply(log_x, log_x)))
    small = ew.less(ew.abs(lmbda), 1e-19)
    general = ew.divide(ew.expm1(ew.multiply(lmbda, log_x)), ew.where(small, 1, lmbda))
    return ew.where(small, near_zero, general)


for _ufunc, _op in ((special.xlogy, xlogy), (special.xlog1py, xlog1py), (special.logit, logit),
                    (special.expit, ew.sigmoid), (special.log_expit, log_expit),
                    (special.ndtr, ndtr), (special.erfcinv, erfcinv), (special.betaln, betaln),
                    (special.beta, beta), (special.entr, entr), (special.rel_entr, rel_entr),
                    (special.kl_div, kl_div), (special.boxcox, boxcox)):
    UFUNC_TABLE[_ufunc] = _op
del _ufunc, _op

