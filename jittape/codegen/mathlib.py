"""Vectorizable math for generated CPU loops.

PyPI's llvmlite has no SVML, so ``np.exp(x)`` in a Numba loop is a call to the C
library's scalar ``exp``, and a loop that calls it cannot be vectorized. The functions
here are written with arithmetic, comparisons, ``floor``/``copysign`` and bit casts
only: once Numba inlines them, LLVM turns a fused loop of them into SIMD code.

Each function comes in float32 and float64 (``exp_f32``, ``exp_f64``, ...), takes and
returns its own type, and matches NumPy on the whole domain: overflow gives inf,
underflow 0 (through the subnormals), NaN propagates, and inf, -inf, 0 and -0 give what
NumPy gives. They are accurate to a few ulp (``tests/test_mathlib.py`` sweeps each one
against NumPy in extended precision and reports the maxima).

The algorithms are written once (``_make``) on typed constants: float32 code computes
in float32 (eight lanes to a 256-bit register) with polynomials of lower degree than
float64's. Integers move between float and int registers only by bit casts and the
"magic number" trick (adding 1.5 * 2^52, or 2^23, puts a small integer in the low bits),
because AVX2 has no vector conversion between int64 and floating point.

How each is computed (x is the argument):

- ``exp``: x = k ln2 + r with |r| <= ln2/2 (Cody and Waite: ln2 in two parts, the first
  with trailing zero bits so k*LN2_HI is exact), exp(r) by its Taylor polynomial, then
  the product with 2^k built from bits, in two halves so that results near overflow and
  in the subnormal range are rounded once.
- ``expm1``: the same reduction; expm1(r) by its polynomial, then
  2^k expm1(r) + (2^k - 1), which has no cancellation.
- ``log``: x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
  log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) with R the series of 2 atanh(s) / s - 2
  (as fdlibm does, with Taylor coefficients), plus e ln2 in two parts.
- ``log1p``: u = 1 + x rounded, log(u) x / (u - 1) (the rounding of u cancels).
- ``tanh``: e = expm1(2|x|), e / (e + 2), with x's sign.
- ``sigmoid``: z = exp(-|x|), 1 / (1 + z) or z / (1 + z).
- ``softplus``: max(x, 0) + log1p(exp(-|x|)), the log1p by log's series directly
  (its argument is in [0, 1]: no bits to take apart, one division).
- ``relu``: ``np.maximum(x, 0)`` as a select (a call to a compiled helper would keep
  the loop around it scalar).
- ``log2``, ``log10``: log's reduction and series, log(1 + f) kept as hi + lo with hi's
  low bits cleared, so that its products with the constants' leading parts (1/ln2,
  1/ln10, log10(2), each split in two, ``_split``) are exact, and the sum with the
  exponent's part compensated (as fdlibm's log2 and log10 do).
- ``exp2``: x = k + f with k an integer and |f| <= 1/2 (exact), 2^f by the series of
  exp(f ln2), times 2^k in two halves as exp.
- ``sinh``: below 1 its own series; up to ``tanh_one`` (e^-|x| below half an ulp beyond)
  (t + t / (t + 1)) / 2 with t = expm1(|x|); beyond, exp(|x|) / 2 from exp's reduction
  with the halving in the power of two, finite up to the last |x| whose sinh is.
- ``cosh``: (e + 1/e) / 2 with e = exp(|x|), beyond ``tanh_one`` as sinh.
- ``erf``: below 1, x + x Q(x^2); from 1 up to where erf rounds to 1, 1 - P(|x| - m) with
  P and m those of the interval of |x| (four for float64, two for float32, picked by
  selects), P a near-minimax fit of erfc there; no exp. The coefficients (``_ERF``)
  are Chebyshev fits made with mpmath to below a quarter of an ulp.
"""

import math
import os

import numba
import numpy as np
from llvmlite import binding
from llvmlite import ir as llvm
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, lower_builtin, type_callable

_inline = numba.njit(inline="always", error_model="numpy")
_FLOAT_OF = {32: types.float32, 64: types.float64}


@intrinsic
def float_bits(typingctx, x):
    """The bits of a float32 (float64) as an int32 (int64)."""
    if x not in (types.float32, types.float64):
        return None
    width = x.bitwidth

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm.IntType(width))

    return types.Integer(f"int{width}")(x), codegen


@intrinsic
def bits_float(typingctx, n, like):
    """The float of ``like``'s type whose bits are the low bits of the integer ``n``."""
    if not isinstance(n, types.Integer) or like not in (types.float32, types.float64):
        return None
    width = like.bitwidth

    def codegen(context, builder, signature, args):
        value = args[0]
        if n.bitwidth > width:
            value = builder.trunc(value, llvm.IntType(width))
        elif n.bitwidth < width:
            value = builder.sext(value, llvm.IntType(width))
        return builder.bitcast(value, llvm.DoubleType() if width == 64 else llvm.FloatType())

    return like(n, like), codegen


def _host_features():
    import llvmlite.binding as binding
    try:
        return set(binding.get_host_cpu_features().flatten().split(","))
    except Exception:                                  # pragma: no cover
        return set()


HAS_FMA = "+fma" in _host_features()
HAS_AVX512 = "+avx512f" in _host_features()


@intrinsic
def multiply_add(typingctx, a, b, c):
    """a * b + c: one fused multiply-add (one rounding) where the CPU has FMA, for the
    polynomials; a product and a sum elsewhere (llvm.fma would be a libm call there)."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, signature, args):
        if HAS_FMA:
            return builder.fma(*args)
        return builder.fadd(builder.fmul(args[0], args[1]), args[2])

    return a(a, b, c), codegen


def _taylor_exp(degree):
    """Coefficients of exp's Taylor polynomial from r^degree down to r^0."""
    return [1.0 / math.factorial(j) for j in range(degree, -1, -1)]


def _atanh_series(terms):
    """Coefficients of R(z) / z = 2/3 + 2/5 z + ..., from the highest down."""
    return [2.0 / (2 * j + 1) for j in range(terms, 0, -1)]


def _decimal(expr):
    """A constant to forty digits (``decimal``), for the splits below."""
    import decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        D = decimal.Decimal
        return {"1/ln2": 1 / D(2).ln(), "1/ln10": 1 / D(10).ln(),
                "log10(2)": D(2).ln() / D(10).ln(), "ln2": D(2).ln()}[expr]


def _split(name, bits, ftype):
    """(hi, lo): hi the constant truncated to ``bits`` significant bits, so that its
    product with a number of few bits is exact, and lo the rest, rounded to ftype."""
    import decimal
    value = _decimal(name)
    mantissa, exponent = math.frexp(float(value))
    hi = math.ldexp(math.floor(mantissa * 2.0 ** bits), exponent - bits)
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        lo = float(value - decimal.Decimal(hi))
    return ftype(hi), ftype(lo)


def _exp2_coefficients(degree):
    """Coefficients of 2^f = sum (ln2 f)^j / j!, from f^degree down to f^0."""
    import decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        ln2 = _decimal("ln2")
        return [float(ln2 ** j / math.factorial(j)) for j in range(degree, -1, -1)]


# per float type: the size of its fields, its limits and polynomial degrees
_TYPES = {
    np.float64: dict(int_type=np.int64, mantissa=52, bias=1023, magic=6755399441055744.0,
                     exp_max=710.0, exp_min=-746.0, expm1_big=700.0, expm1_min=-40.0,
                     tanh_one=22.0, tiny=2.2250738585072014e-308, subnormal_scale=54,
                     log1p_huge=2.0 ** 53,
                     ln2_hi=6.93147180369123816490e-01, ln2_lo=1.90821492927058770002e-10,
                     exp_degree=13, log_terms=10, split_bits=21, constant_bits=32,
                     sinh_max=711.0, sinh_terms=9, erf_one=6.0),
    np.float32: dict(int_type=np.int32, mantissa=23, bias=127, magic=12582912.0,
                     exp_max=89.0, exp_min=-104.0, expm1_big=80.0, expm1_min=-18.0,
                     tanh_one=9.5, tiny=1.1754943508222875e-38, subnormal_scale=25,
                     log1p_huge=2.0 ** 24,
                     ln2_hi=0.693359375, ln2_lo=-2.12194440e-4,
                     exp_degree=7, log_terms=5, split_bits=12, constant_bits=12,
                     sinh_max=90.0, sinh_terms=6, erf_one=4.0),
}

# erf's polynomials (coefficients from the highest degree down): erf(x) = x + x Q(x^2)
# below 1; above, erf(x) = 1 - P_j(x - mids[j]) with P_j near-minimax (Chebyshev)
# fits of erfc, on [edges[j], edges[j+1]), all of one degree (leading zeros); erf is 1
# from erf_one on
_ERF = {
    np.float64: dict(
        small=(
            5.957176147748911e-11, -1.1372848856791674e-09, 1.4659775274047436e-08,
            -1.6350312701054695e-07, 1.6461000484121368e-06, -1.4925595266831182e-05,
            0.0001205533111164271, -0.000854832698083379, 0.0052239776248180145,
            -0.026866170645076792, 0.11283791670954879, -0.3761263890318375,
            0.1283791670955126),
        edges=(1.0, 2.0, 3.0, 4.0), mids=(1.5, 2.5, 3.5, 5.0),
        poly=(
            (
                2.8346118565278276e-07, -1.4171216409416466e-06, -5.712902189436902e-07,
                1.4038638152371658e-05, -1.7961323135211212e-05, -7.767647032419676e-05,
                0.00025444927807681647, 9.291229551299306e-05, -0.0017098196278538453,
                0.002362677793021706, 0.004743053204878897, -0.019326172007209028,
                0.014866286152863747, 0.04459885845906473, -0.1387520040942334,
                0.17839543383544215, -0.11893028922362937, 0.033894853524689274),
            (
                0.0, -1.5476722238695814e-07, 6.193518162636853e-07,
                -1.9195896046829407e-07, -4.680983789404417e-06, 1.4082459537316957e-05,
                -5.1393581059377055e-06, -7.880165128871086e-05, 0.000250285700609799,
                -0.00026067014976109687, -0.000542410085044007, 0.0027984901560915835,
                -0.006117348212627071, 0.008622375078496586, -0.00835008954970233,
                0.0054457105758816855, -0.0021782842303526215, 0.0004069520174449589),
            (
                0.0, 0.0, 0.0, -8.422393159655474e-08, 3.0495000503454603e-07,
                -4.4684896316075923e-07, -4.4567924044165696e-07, 4.641608607876342e-06,
                -1.533060528268128e-05, 3.425911478234364e-05, -5.819276595399663e-05,
                7.774424958044693e-05, -8.211628147552697e-05, 6.77178107591103e-05,
                -4.229550977332881e-05, 1.8897993721341988e-05, -5.3994267772714075e-06,
                7.430983723414128e-07),
            (
                -5.71007705610724e-12, 3.005983570075221e-11, -8.509791716427474e-11,
                1.996335314314108e-10, -4.2742093575962434e-10, 7.984136205410669e-10,
                -1.2880917091400186e-09, 1.8180854905115246e-09, -2.24767559547721e-09,
                2.414556231766593e-09, -2.2322547005723704e-09, 1.7542077899777294e-09,
                -1.1507490981832716e-09, 6.13780855874189e-10, -2.559580469573351e-10,
                7.835414488800324e-11, -1.5670863069121574e-11, 1.5374609423981447e-12),
        )),
    np.float32: dict(
        small=(
            7.875875e-05, -0.00080168643, 0.0051890872, -0.026854211, 0.11283594,
            -0.37612626, 0.12837917),
        edges=(1.0, 2.25), mids=(1.625, 3.125),
        poly=(
            (
                0.0, -0.0012861758, 0.0008729848, 0.006141552, -0.014510705, 0.0021408915,
                0.049731914, -0.11484091, 0.1307668, -0.08047225, 0.021556271),
            (
                -9.050188e-06, -1.1250587e-05, 0.000115079245, -0.00027750668, 0.0004510605,
                -0.0005732482, 0.0005577439, -0.00040052872, 0.0002023644, -6.4739186e-05,
                9.896735e-06),
        )),
}


def _make(ftype):
    """The functions for one float type (a dict name -> jitted function)."""
    c = _TYPES[ftype]
    F = ftype
    LOG2E, MAGIC = F(1.4426950408889634), F(c["magic"])
    MAGIC_BITS = int(np.array(c["magic"], ftype).view(c["int_type"]))
    LN2_HI, LN2_LO = F(c["ln2_hi"]), F(c["ln2_lo"])
    MANTISSA, BIAS = c["mantissa"], c["bias"]
    MANTISSA_MASK = (1 << MANTISSA) - 1
    ONE_BITS = BIAS << MANTISSA
    EXPONENT_MASK = (1 << (c["int_type"](0).nbytes * 8 - 1 - MANTISSA)) - 1
    EXP_MAX, EXP_MIN = F(c["exp_max"]), F(c["exp_min"])
    EXPM1_BIG, EXPM1_MIN = F(c["expm1_big"]), F(c["expm1_min"])
    TANH_ONE, TINY = F(c["tanh_one"]), F(c["tiny"])
    SUBNORMAL = c["subnormal_scale"]
    SUBNORMAL_SCALE = F(2.0 ** SUBNORMAL)
    LOG1P_HUGE = F(c["log1p_huge"])
    SQRT2, ZERO, HALF, ONE, TWO = F(1.4142135623730951), F(0), F(0.5), F(1), F(2)
    SQRT2_MINUS_ONE = F(0.41421356237309503)
    INF, NAN = F(np.inf), F(np.nan)
    EXP_COEFFS = tuple(F(v) for v in _taylor_exp(c["exp_degree"]))
    EXPM1_COEFFS = EXP_COEFFS[:-2]                  # expm1(r) = r + r^2 (1/2 + r/6 + ...)
    LOG_COEFFS = tuple(F(v) for v in _atanh_series(c["log_terms"]))
    EXP2_COEFFS = tuple(F(v) for v in _exp2_coefficients(c["exp_degree"]))
    EXP2_MAX = F(c["bias"] + 1)                     # 2^x overflows from here
    EXP2_MIN = F(-(c["bias"] + MANTISSA + 1))       # and rounds to 0 up to here
    SINH_MAX = F(c["sinh_max"])
    SINH_COEFFS = tuple(F(1.0 / math.factorial(2 * j + 1)) for j in range(c["sinh_terms"], 0, -1))
    # log2, log10: log(1 + f) as hi + lo with hi of SPLIT_BITS bits, times constants of
    # CONSTANT_BITS bits: those products are exact
    SPLIT_MASK = -(1 << (MANTISSA + 1 - c["split_bits"]))
    IVLN2_HI, IVLN2_LO = _split("1/ln2", c["constant_bits"], F)
    IVLN10_HI, IVLN10_LO = _split("1/ln10", c["constant_bits"], F)
    LOG10_2_HI, LOG10_2_LO = _split("log10(2)", c["constant_bits"], F)
    e = _ERF[ftype]
    ERF_SMALL = tuple(F(v) for v in e["small"])
    ERF_ONE = F(c["erf_one"])
    # up to four intervals, as flat tuples (as horner's: LLVM unrolls loops over those),
    # the last repeated where there are fewer (its edge inf: never picked before it)
    pad = 4 - len(e["poly"])
    P0, P1, P2, P3 = tuple(tuple(F(v) for v in p) for p in e["poly"] + e["poly"][-1:] * pad)
    M0, M1, M2, M3 = tuple(F(v) for v in e["mids"] + e["mids"][-1:] * pad)
    E1, E2, E3 = tuple(F(v) for v in e["edges"][1:] + (np.inf,) * pad)
    HALF_DEGREE = len(P0) // 2

    @_inline
    def horner(r, coeffs):
        acc = coeffs[0]
        for k in coeffs[1:]:                       # a constant tuple: LLVM unrolls it
            acc = multiply_add(acc, r, k)
        return acc

    @_inline
    def small_int(n, like):
        """A float with the value of the small integer n, without an int-to-float
        conversion (the magic number's low bits)."""
        return bits_float(MAGIC_BITS + n, like) - MAGIC

    @_inline
    def reduce(x):
        """(k, n, r): x = k ln2 + r with k = n integral and |r| <= ln2/2 (garbage, but no
        undefined behaviour, where x is NaN or far out of range: callers select)."""
        t = x * LOG2E + MAGIC
        k = t - MAGIC
        n = float_bits(t) - MAGIC_BITS
        r = (x - k * LN2_HI) - k * LN2_LO
        return k, n, r

    @_inline
    def power_of_two(n, like):
        return bits_float((n + BIAS) << MANTISSA, like)

    @_inline
    def exp(x):
        k, n, r = reduce(x)
        p = horner(r, EXP_COEFFS)
        half = n >> 1
        y = p * power_of_two(half, x) * power_of_two(n - half, x)
        y = INF if x > EXP_MAX else y
        return ZERO if x < EXP_MIN else y

    @_inline
    def expm1_moderate(x):
        """expm1(x) for x <= EXPM1_BIG (larger x: garbage, for the caller to select away)."""
        k, n, r = reduce(x)
        p = r + r * r * horner(r, EXPM1_COEFFS)
        s = power_of_two(n, x)
        y = s * p + (s - ONE)
        y = x if x == ZERO else y                   # -0.0 stays -0.0
        return -ONE if x < EXPM1_MIN else y

    @_inline
    def expm1(x):
        y = expm1_moderate(x)
        return exp(x) if x > EXPM1_BIG else y       # 2^n may overflow there; expm1 = exp

    @_inline
    def log_reduce(x):
        """(k, f): x = 2^k (1 + f) with k integral and 1 + f in [sqrt(1/2), sqrt(2)]
        (garbage where x is not positive and finite: callers select)."""
        sub = x < TINY
        xs = x * SUBNORMAL_SCALE if sub else x
        bits = float_bits(xs)
        e = ((bits >> MANTISSA) & EXPONENT_MASK) - BIAS - (SUBNORMAL if sub else 0)
        m = bits_float((bits & MANTISSA_MASK) | ONE_BITS, x)             # [1, 2)
        big = m > SQRT2
        m = m * HALF if big else m
        return small_int(e + 1 if big else e, x), m - ONE

    @_inline
    def log_special(x, y):
        """y where x is positive and finite; what every logarithm gives elsewhere."""
        y = NAN if x < ZERO else y
        y = -INF if x == ZERO else y
        y = x if x == INF else y
        return x if x != x else y

    @_inline
    def log(x):
        k, f = log_reduce(x)
        s = f / (TWO + f)
        z = s * s
        R = z * horner(z, LOG_COEFFS)
        hfsq = HALF * f * f
        y = k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f)
        return log_special(x, y)

    @_inline
    def log1p(x):
        u = ONE + x
        huge = x > LOG1P_HUGE                      # log1p(x) = log(x) to rounding
        L = log(x if huge else u)
        y = L if huge else L * (x / (u - ONE))
        return x if u == ONE else y                # also -0.0 -> -0.0

    @_inline
    def tanh(x):
        a = abs(x)
        e = expm1_moderate(TWO * a)                 # (beyond TANH_ONE, t is 1)
        t = e / (e + TWO)
        t = ONE if a > TANH_ONE else t
        return math.copysign(t, x)

    @_inline
    def sigmoid(x):
        z = exp(-abs(x))
        s = ONE / (ONE + z)
        return s if x >= ZERO else z * s

    @_inline
    def log1p_unit(z):
        """log(1 + z) for z in [0, 1] (or NaN): log's series on f = z, or on
        f = (1 + z)/2 - 1 = (z - 1)/2 plus ln2; no bits, one division."""
        big = z > SQRT2_MINUS_ONE
        f = (z - ONE) * HALF if big else z
        k = ONE if big else ZERO
        s = f / (TWO + f)
        w = s * s
        R = w * horner(w, LOG_COEFFS)
        hfsq = HALF * f * f
        return k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f)

    @_inline
    def softplus(x):
        return (x if x > ZERO else ZERO) + log1p_unit(exp(-abs(x)))

    @_inline
    def relu(x):
        # np.maximum(x, 0): x where x > 0 or x is NaN, else +0 (also for -0)
        return x if (x > ZERO or x != x) else ZERO

    @_inline
    def log_split(f):
        """(hi, lo): log(1 + f) = hi + lo to more than the precision of one float, hi
        with its low bits zero (log's series, its leading terms kept apart)."""
        s = f / (TWO + f)
        z = s * s
        R = z * horner(z, LOG_COEFFS)
        hfsq = HALF * f * f
        hi = bits_float(float_bits(f - hfsq) & SPLIT_MASK, f)
        lo = ((f - hi) - hfsq) + s * (hfsq + R)
        return hi, lo

    @_inline
    def log2(x):
        k, f = log_reduce(x)
        hi, lo = log_split(f)
        y_hi = hi * IVLN2_HI                        # exact
        y_lo = (lo + hi) * IVLN2_LO + lo * IVLN2_HI
        w = k + y_hi                                # k, then the rest, summed with the
        y_lo += (k - w) + y_hi                      # rounding of k + y_hi kept
        return log_special(x, y_lo + w)

    @_inline
    def log10(x):
        k, f = log_reduce(x)
        hi, lo = log_split(f)
        y_hi = hi * IVLN10_HI
        k_hi = k * LOG10_2_HI                       # both exact
        y_lo = k * LOG10_2_LO + (lo + hi) * IVLN10_LO + lo * IVLN10_HI
        w = k_hi + y_hi
        y_lo += (k_hi - w) + y_hi
        return log_special(x, y_lo + w)

    @_inline
    def exp2(x):
        t = x + MAGIC
        k = t - MAGIC                               # x rounded to an integer
        n = float_bits(t) - MAGIC_BITS
        p = horner(x - k, EXP2_COEFFS)              # x - k is exact, in [-1/2, 1/2]
        half = n >> 1
        y = p * power_of_two(half, x) * power_of_two(n - half, x)
        y = INF if x >= EXP2_MAX else y
        return ZERO if x <= EXP2_MIN else y

    @_inline
    def exp_halved(a, n, p):
        """exp(a) / 2 from a's reduction (n, p = exp(r)), without overflow where
        exp(a) itself overflows but exp(a) / 2 does not."""
        half = (n - 1) >> 1
        return p * power_of_two(half, a) * power_of_two(n - 1 - half, a)

    @_inline
    def sinh(x):
        a = abs(x)
        k, n, r = reduce(a)
        pm = r + r * r * horner(r, EXPM1_COEFFS)    # expm1(r)
        s = power_of_two(n, a)
        t = s * pm + (s - ONE)                      # expm1(a), for a below TANH_ONE
        y = HALF * (t + t / (t + ONE))              # (e^a - e^-a) / 2 without cancellation
        # below 1, where t's rounding weighs most, by sinh's own series
        z = a * a
        y = a + a * z * horner(z, SINH_COEFFS) if a < ONE else y
        # beyond TANH_ONE e^-a is below half an ulp of e^a
        y = y if a < TANH_ONE else exp_halved(a, n, ONE + pm)
        y = INF if a > SINH_MAX else y
        return math.copysign(y, x)

    @_inline
    def cosh(x):
        a = abs(x)
        k, n, r = reduce(a)
        p = horner(r, EXP_COEFFS)
        e = p * power_of_two(n, a)                  # exp(a), for a below TANH_ONE
        y = HALF * e + HALF / e
        y = y if a < TANH_ONE else exp_halved(a, n, p)
        return INF if a > SINH_MAX else y

    @_inline
    def pick(a, v0, v1, v2, v3):
        """The value of the interval of erf's polynomials that holds a, by selects: an
        index, or a loop, would keep LLVM from unrolling the loop over the coefficients,
        and then the loop around erf would stay scalar."""
        return v3 if a >= E3 else (v2 if a >= E2 else (v1 if a >= E1 else v0))

    @_inline
    def erf(x):
        a = abs(x)
        small = x + x * horner(x * x, ERF_SMALL)
        u = a - pick(a, M0, M1, M2, M3)
        acc = pick(a, P0[0], P1[0], P2[0], P3[0])
        for i in range(1, HALF_DEGREE):             # (two loops: LLVM unrolls each)
            acc = multiply_add(acc, u, pick(a, P0[i], P1[i], P2[i], P3[i]))
        for i in range(HALF_DEGREE, len(P0)):
            acc = multiply_add(acc, u, pick(a, P0[i], P1[i], P2[i], P3[i]))
        y = small if a < ONE else math.copysign(ONE - acc, x)
        return math.copysign(ONE, x) if a >= ERF_ONE else y

    return dict(exp=exp, expm1=expm1, log=log, log1p=log1p, tanh=tanh, sigmoid=sigmoid,
                softplus=softplus, relu=relu, sinh=sinh, cosh=cosh, log2=log2, log10=log10,
                exp2=exp2, erf=erf)


def _flags():
    from numba.core.compiler import Flags
    flags = Flags()
    flags.error_model = "numpy"        # a division is a division: no zero check to branch on
    return flags


_FLAGS = _flags()


_SUBROUTINES = {}                      # (name, id of the target context) -> (library, symbol)


def _subroutine(context, builder, name, core, float_type):
    """The code library holding ``core`` compiled for ``float_type`` and its symbol: made
    once per process, from the LLVM IR kept in the disk cache when it is there (compiling
    these functions is most of what a new process would otherwise spend on them), else
    compiled now (``compile_subroutine``) and its IR kept for the next process."""
    key = (name, id(context))
    found = _SUBROUTINES.get(key)
    if found is not None:
        return found
    path = _ir_path(name)
    if path is not None and os.path.exists(path):
        try:
            with open(path) as f:
                symbol, text = f.read().split("\n", 1)
            library = context.codegen().create_library(f"jittape.mathlib.{name}")
            library.add_llvm_module(binding.parse_assembly(text))
            library.finalize()
            found = _SUBROUTINES[key] = (library, symbol)
            return found
        except Exception:                              # a stale or broken file: compile
            pass
    compiled = context.compile_subroutine(builder, core.py_func, float_type(float_type),
                                          flags=_FLAGS)
    found = _SUBROUTINES[key] = (compiled.library, compiled.fndesc.llvm_func_name)
    if path is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(found[1] + "\n" + compiled.library.get_llvm_str())
            os.replace(tmp, path)                      # whole or not at all
        except OSError:
            pass                                       # an unwritable cache: no file
    return found


def _ir_path(name):
    """Where the LLVM IR of ``name`` is kept, under a key of this module's source, the
    Numba and llvmlite versions and the CPU (name and features): with the
    compiled helpers, as Numba keeps ``runtime.py``'s (``helpers_cache``: never in the
    package), else in jittape's disk cache (None: none). It depends on jittape and the machine,
    not on any user function."""
    base = _install_cache()
    if base is None:
        from .. import config
        base = config.cache_dir()
    if not base:
        return None
    global _SOURCE_KEY
    if _SOURCE_KEY is None:
        import hashlib
        import llvmlite
        with open(__file__, "rb") as f:
            text = f.read() + numba.__version__.encode() + llvmlite.__version__.encode()
        # the IR names the CPU it was made for (target-cpu, target-features): an
        # installation shared by machines of different CPUs keeps one file for each
        cpu = binding.get_host_cpu_name() + binding.get_host_cpu_features().flatten()
        _SOURCE_KEY = hashlib.sha256(text + cpu.encode()).hexdigest()[:16]
    return os.path.join(base, "mathlib", f"{name}-{_SOURCE_KEY}.ll")


_SOURCE_KEY = None


def _install_cache():
    """The folder for compiled helpers (``helpers_cache``: the user's, never the
    package's), or None where it cannot be written."""
    from .helpers_cache import helpers_dir
    here = helpers_dir()
    return here if os.access(here, os.W_OK) else None


def _public(name, ftype, core):
    """``name`` as generated code calls it.

    In compiled code a call is typed and lowered directly (``type_callable``,
    ``lower_builtin``): a call of ``core`` compiled once per process (``_subroutine``,
    from the disk cache's LLVM IR when it has it) and linked into the calling module,
    the call marked ``alwaysinline``: LLVM inlines it into the loop and vectorizes it. A
    plain ``njit`` function would stay a call into another library, and an overload
    inlined by Numba (``inline="always"``) is typed again at every call site and makes
    Numba run its IR passes over the whole kernel once more per call, a cost each
    kernel's compile would pay. From Python (``f.lower(...).python``) it runs ``core``
    compiled on its own."""
    float_type = numba.from_dtype(np.dtype(ftype))

    def python(x):
        # (Numba returns a float32 as a Python float: the value in float64 arithmetic
        # from there, where code after it relies on float32's, as rint's 2**23 trick)
        return ftype(core(ftype(x)))

    python.__name__ = python.__qualname__ = name
    python.__doc__ = f"{name.split('_')[0]} for {np.dtype(ftype).name}, vectorizable (see jittape.codegen.mathlib)."

    @type_callable(python)
    def typer(context):
        def call(x):
            if isinstance(x, (types.Float, types.Integer, types.Boolean)):
                return float_type
        return call

    @lower_builtin(python, types.Any)
    def lower(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], float_type)
        library, callee = _subroutine(context, builder, name, core, float_type)
        context.active_code_library.add_linking_library(library)
        fnty = context.call_conv.get_function_type(float_type, [float_type])
        fn = cgutils.get_or_insert_function(builder.module, fnty, callee)
        _, result = context.call_conv.call_function(builder, fn, float_type, [float_type], [value])
        for block in builder.function.blocks:       # inlined whatever its size
            for instr in block.instructions:
                if isinstance(instr, llvm.CallInstr) and getattr(instr.callee, "name", None) == callee:
                    instr.attributes.add("alwaysinline")
        return result

    return python


FUNCTIONS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "relu", "sinh",
             "cosh", "log2", "log10", "exp2", "erf")
for _ftype, _suffix in ((np.float32, "f32"), (np.float64, "f64")):
    for _name, _fn in _make(_ftype).items():
        globals()[f"{_name}_{_suffix}"] = _public(f"{_name}_{_suffix}", _ftype, _fn)


def numpy_functions():
    """{name: NumPy's (or SciPy's) function on one number} for each function here: what
    they compute, run where Numba compiles nothing."""
    from scipy import special
    return {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
            "tanh": np.tanh, "sigmoid": special.expit,
            "softplus": lambda x: np.logaddexp(0, x), "relu": lambda x: np.maximum(x, 0),
            "sinh": np.sinh, "cosh": np.cosh, "log2": np.log2, "log10": np.log10,
            "exp2": np.exp2, "erf": special.erf}


def _numpy_versions():
    """The functions as NumPy computes them on one number, in its float type, for a
    process where Numba compiles nothing (``NUMBA_DISABLE_JIT``): the bit-level
    intrinsics they are written with have no Python implementation."""
    made = {}
    for ftype, suffix in ((np.float32, "f32"), (np.float64, "f64")):
        for name, fn in numpy_functions().items():
            def call(x, fn=fn, ftype=ftype):
                with np.errstate(all="ignore"):       # (inf and NaN, as NumPy's arrays)
                    return ftype(fn(ftype(x)))
            call.__name__ = f"{name}_{suffix}"
            made[call.__name__] = call
    return made


if numba.config.DISABLE_JIT:
    globals().update(_numpy_versions())


# NumPy's functions in the primitives' scalar lowerings, and their names here
VECTOR_FUNCTIONS = {f"np.{name}(": name for name in ("exp", "expm1", "log", "log1p", "tanh",
                                                     "sinh", "cosh", "log2", "log10", "exp2")}
VECTOR_FUNCTIONS["math.erf("] = "erf"               # (special.erf's lowering: math's)
# exp2 and log2 of float32 are lowered through float64 (elementwise._wide_code, for
# Numba's sake): here they stay float32
WIDE_FLOAT32 = {f"np.float32(np.{name}(np.float64(": f"np.float32({name}_f32(np.float32("
                for name in ("exp2", "log2")}


def vector_code(expr, dtype):
    """A scalar lowering's expression with NumPy's math functions replaced by this
    module's for ``dtype`` (float32 or float64 operands and result)."""
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(np.dtype(dtype))
    if suffix is None:
        return expr
    if suffix == "f32":
        for wide, narrow in WIDE_FLOAT32.items():
            expr = expr.replace(wide, narrow)
    for numpy_name, name in VECTOR_FUNCTIONS.items():
        expr = expr.replace(numpy_name, f"{name}_{suffix}(")
    return expr
