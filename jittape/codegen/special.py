"""scipy.special's digamma and polygamma for generated CPU code (the derivatives of
``gammaln``), on Python's math functions, in float64 (the float32 versions round the
float64 result).

- ``digamma``: for x < 0 the reflection psi(x) = psi(1 - x) - pi / tan(pi x); then the
  recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, and the asymptotic series
  ln x - 1/(2x) - sum B_2k / (2k x^2k) (seven terms: below float64's rounding there).
- ``polygamma(n, x)``, n >= 1: (-1)^(n+1) n! zeta(n + 1, x), Hurwitz's zeta by the
  recurrence (the terms (x + k)^-s, which also bring a negative x up) until x >= 10 + s,
  then the Euler-Maclaurin tail with eight Bernoulli terms.

At the poles (x a non-positive integer) they give what SciPy gives: digamma -inf at
+0 (+inf at -0) and NaN at the negative integers, polygamma +inf for odd n and -inf for even n.

``scipy_special("erfinv", x)`` calls SciPy's own C function (``erfinv``, ``ndtri``,
``log_ndtr``, the Bessel functions ``i0``, ``i1``, ``i0e``, ``i1e``, ``j0``, ``j1``,
``y0``, ``y1``, ``jv``, ``yn``, ``iv``, ``ive``, ``rgamma``, ``gammasgn``, ``gammainc``,
``gammaincc``, ``betainc`` and ``stdtr``): the values are SciPy's to the last bit, and the series, continued
fractions and asymptotic expansions SciPy chose for each range come with them. Numba
cannot call ``scipy.special`` itself; ``scipy.special.cython_special`` exports each
function's C entry point as a capsule. Its address is registered with LLVM as a named
symbol when this module is imported (``linkage.capsule_symbol``), and compiled code
calls that symbol by name rather than through a constant address. Called from Python (a kernel run
without JIT) it is scipy.special's ufunc. CPU only: CUDA code cannot call the host's C.
"""

import math

import numpy as np
from llvmlite import ir as llvm
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload
from scipy import special as _scipy_special
from scipy.special import cython_special

from .linkage import capsule_symbol
from .runtime import _jit

# B_2k / (2k) for the digamma series, and B_2k / (2k)! for the zeta tail
_PSI = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)
_ZETA = (1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
         -691.0 / 1307674368000, 1.0 / 74724249600, -3617.0 / 10670622842880000)


@_jit
def digamma_f64(x):
    x = float(x)
    if x <= 0.0 and x == math.floor(x):
        return -math.copysign(math.inf, x) if x == 0.0 else math.nan
    shift = 0.0
    if x < 0.0:                   # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        shift = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        shift -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = 0.0
    power = inv2
    for c in _PSI:
        series += c * power
        power *= inv2
    return shift + math.log(x) - 0.5 / x - series


@_jit
def polygamma_f64(n, x):
    x = float(x)
    if n == 0:
        return digamma_f64(x)
    s = n + 1.0
    if x <= 0.0 and x == math.floor(x):
        return math.inf if n % 2 == 1 else -math.inf
    total = 0.0
    while x < 10.0 + s:            # zeta(s, x) = x^-s + zeta(s, x + 1)
        total += x ** -s
        x += 1.0
    # Euler-Maclaurin: x^(1-s)/(s-1) + x^-s/2 + sum B_2k/(2k)! (s)_(2k-1) x^(-s-2k+1)
    tail = x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** -s
    rising = s                      # s (s+1) ... (s + 2k - 2)
    power = x ** (-s - 1.0)
    for k in range(len(_ZETA)):
        tail += _ZETA[k] * rising * power
        rising *= (s + 2 * k + 1.0) * (s + 2 * k + 2.0)
        power /= x * x
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * (total + tail)


@_jit
def digamma_f32(x):
    return np.float32(digamma_f64(x))


@_jit
def polygamma_f32(n, x):
    return np.float32(polygamma_f64(n, x))


# name -> (its capsule in cython_special, its number of arguments); the capsules of fused
# functions carry their variants' numbers, the double one's is taken
_C_FUNCTIONS = {
    "erfinv": ("__pyx_fuse_0erfinv", 1), "ndtri": ("ndtri", 1),
    "log_ndtr": ("__pyx_fuse_1log_ndtr", 1), "i0": ("i0", 1), "i1": ("i1", 1),
    "i0e": ("i0e", 1), "i1e": ("i1e", 1), "gammainc": ("gammainc", 2),
    "gammaincc": ("gammaincc", 2), "j0": ("j0", 1), "j1": ("j1", 1), "y0": ("y0", 1),
    "y1": ("y1", 1), "jv": ("__pyx_fuse_1jv", 2), "yn": ("__pyx_fuse_0yn", 2),
    "iv": ("__pyx_fuse_1iv", 2), "ive": ("__pyx_fuse_1ive", 2),
    "rgamma": ("__pyx_fuse_1rgamma", 1), "gammasgn": ("gammasgn", 1),
    "betainc": ("__pyx_fuse_0betainc", 3), "stdtr": ("__pyx_fuse_0stdtr", 2),
}


def _symbol(name):
    return f"jittape.scipy.special.{name}"


def _register():
    for name, (key, nargs) in _C_FUNCTIONS.items():
        # (checked: SciPy's C signature is still the one the calls below assume)
        capsule_symbol(_symbol(name), cython_special.__pyx_capi__[key],
                       "double (" + "double, " * nargs + "int __pyx_skip_dispatch)")


_register()


def scipy_special(name, *args):
    """SciPy's function ``name`` (a string literal in compiled code) of ``args``, in
    float64 whatever the arguments' types (as SciPy computes them)."""
    return getattr(_scipy_special, name)(*args)


_CALLS = {}


def _c_call(name, nargs):
    """An intrinsic calling SciPy's C function ``name`` by its symbol, on a tuple of
    ``nargs`` numbers (each converted to float64)."""
    if name not in _CALLS:
        symbol = _symbol(name)

        @intrinsic
        def call(typingctx, args):
            def codegen(context, builder, signature, llargs):
                double = llvm.DoubleType()
                fnty = llvm.FunctionType(double, [double] * nargs + [llvm.IntType(32)])
                fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
                values = [context.cast(builder, builder.extract_value(llargs[0], k),
                                       args[k], types.float64) for k in range(nargs)]
                # (the last argument is Cython's skip_dispatch flag of cpdef functions)
                return builder.call(fn, values + [llvm.Constant(llvm.IntType(32), 0)])
            return types.float64(args), codegen

        _CALLS[name] = call
    return _CALLS[name]


@overload(scipy_special)
def _scipy_special_compiled(name, *args):
    if not isinstance(name, types.StringLiteral):
        return None                     # (Numba then retries with the literal's type)
    function = name.literal_value
    if function not in _C_FUNCTIONS or _C_FUNCTIONS[function][1] != len(args):
        raise TypeError(f"scipy_special: no compiled {function!r} of {len(args)} arguments")
    if not all(isinstance(a, (types.Float, types.Integer, types.Boolean)) for a in args):
        return None
    call = _c_call(function, len(args))

    def impl(name, *args):
        return call(args)
    return impl
