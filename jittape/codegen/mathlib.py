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


def _host_has_fma():
    import llvmlite.binding as binding
    try:
        return "+fma" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:                                  # pragma: no cover
        return False


HAS_FMA = _host_has_fma()


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


# per float type: the size of its fields, its limits and polynomial degrees
_TYPES = {
    np.float64: dict(int_type=np.int64, mantissa=52, bias=1023, magic=6755399441055744.0,
                     exp_max=710.0, exp_min=-746.0, expm1_big=700.0, expm1_min=-40.0,
                     tanh_one=22.0, tiny=2.2250738585072014e-308, subnormal_scale=54,
                     log1p_huge=2.0 ** 53,
                     ln2_hi=6.93147180369123816490e-01, ln2_lo=1.90821492927058770002e-10,
                     exp_degree=13, log_terms=10),
    np.float32: dict(int_type=np.int32, mantissa=23, bias=127, magic=12582912.0,
                     exp_max=89.0, exp_min=-104.0, expm1_big=80.0, expm1_min=-18.0,
                     tanh_one=9.5, tiny=1.1754943508222875e-38, subnormal_scale=25,
                     log1p_huge=2.0 ** 24,
                     ln2_hi=0.693359375, ln2_lo=-2.12194440e-4,
                     exp_degree=7, log_terms=5),
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
    def log(x):
        sub = x < TINY
        xs = x * SUBNORMAL_SCALE if sub else x
        bits = float_bits(xs)
        e = ((bits >> MANTISSA) & EXPONENT_MASK) - BIAS - (SUBNORMAL if sub else 0)
        m = bits_float((bits & MANTISSA_MASK) | ONE_BITS, x)             # [1, 2)
        big = m > SQRT2
        m = m * HALF if big else m
        k = small_int(e + 1 if big else e, x)
        f = m - ONE
        s = f / (TWO + f)
        z = s * s
        R = z * horner(z, LOG_COEFFS)
        hfsq = HALF * f * f
        y = k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f)
        y = NAN if x < ZERO else y
        y = -INF if x == ZERO else y
        y = x if x == INF else y
        return x if x != x else y

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

    return dict(exp=exp, expm1=expm1, log=log, log1p=log1p, tanh=tanh, sigmoid=sigmoid,
                softplus=softplus, relu=relu)


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
        return core(ftype(x))

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


FUNCTIONS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "relu")
for _ftype, _suffix in ((np.float32, "f32"), (np.float64, "f64")):
    for _name, _fn in _make(_ftype).items():
        globals()[f"{_name}_{_suffix}"] = _public(f"{_name}_{_suffix}", _ftype, _fn)


def _numpy_versions():
    """The functions as NumPy computes them on one number, in its float type, for a
    process where Numba compiles nothing (``NUMBA_DISABLE_JIT``): the bit-level
    intrinsics they are written with have no Python implementation."""
    from scipy import special
    made = {}
    for ftype, suffix in ((np.float32, "f32"), (np.float64, "f64")):
        for name, fn in (("exp", np.exp), ("expm1", np.expm1), ("log", np.log),
                         ("log1p", np.log1p), ("tanh", np.tanh), ("sigmoid", special.expit),
                         ("softplus", lambda x: np.logaddexp(0, x)),
                         ("relu", lambda x: np.maximum(x, 0))):
            def call(x, fn=fn, ftype=ftype):
                with np.errstate(all="ignore"):       # (inf and NaN, as NumPy's arrays)
                    return ftype(fn(ftype(x)))
            call.__name__ = f"{name}_{suffix}"
            made[call.__name__] = call
    return made


if numba.config.DISABLE_JIT:
    globals().update(_numpy_versions())


# NumPy's functions in the primitives' scalar lowerings, and their names here
VECTOR_FUNCTIONS = {f"np.{name}(": name for name in ("exp", "expm1", "log", "log1p", "tanh")}


def vector_code(expr, dtype):
    """A scalar lowering's expression with NumPy's math functions replaced by this
    module's for ``dtype`` (float32 or float64 operands and result)."""
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(np.dtype(dtype))
    if suffix is None:
        return expr
    for numpy_name, name in VECTOR_FUNCTIONS.items():
        expr = expr.replace(numpy_name, f"{name}_{suffix}(")
    return expr
