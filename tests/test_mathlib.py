"""The vectorizable math of generated CPU loops (``codegen/mathlib.py``): accuracy in ulp
against NumPy in extended precision over each function's whole domain, NumPy's values
at the special points, and the loops really vectorizing.

The sweep prints its maxima (``pytest -s tests/test_mathlib.py``); the README of the
benchmarks quotes them.
"""

import re

import numba
import numpy as np
import pytest
from scipy import special

from jittape.codegen import mathlib

LONG = np.longdouble
MAX_ULP = 4.0


def _softplus(x):
    return np.logaddexp(x.dtype.type(0), x)


_TWO_OVER_SQRT_PI = LONG("1.128379167095512573896158903121545172")
_ONE_OVER_SQRT_PI = LONG("0.5641895835477562869480794515607725858")


def _erf(x):
    """erf in extended precision (NumPy has none; SciPy's is float64): e^-a^2 times erf's
    series of positive terms, (2/sqrt(pi)) sum (2a^2)^n a / (2n+1)!!, below 3, where it
    cancels nothing; 1 - erfc by erfc's continued fraction from 3 to 7; 1 beyond.
    (Against mpmath it is within a few units of extended precision's last place.)"""
    dtype = x.dtype
    x = x.astype(LONG)
    a = np.abs(x)
    y = np.ones_like(a)
    for low, high, terms in ((0, 1, 30), (1, 3, 90)):
        inside = (a >= low) & (a < high)
        b = a[inside]
        term, total = b.copy(), b.copy()
        for n in range(1, terms):
            term = term * (2 * b * b) / (2 * n + 1)
            total += term
        y[inside] = _TWO_OVER_SQRT_PI * np.exp(-b * b) * total
    inside = (a >= 3) & (a < 7)
    b = a[inside]
    f = b.copy()
    for k in range(120, 0, -1):
        f = b + LONG(k) / 2 / f
    y[inside] = 1 - _ONE_OVER_SQRT_PI * np.exp(-b * b) / f
    y = np.copysign(np.where(np.isnan(x), x, y), x)
    return y if dtype == LONG else y.astype(dtype)


REFERENCES = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
              "tanh": np.tanh, "sigmoid": special.expit, "softplus": _softplus,
              "relu": lambda x: np.maximum(x, x.dtype.type(0)), "sinh": np.sinh,
              "cosh": np.cosh, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
              "erf": _erf}
SUFFIX = {np.float32: "f32", np.float64: "f64"}


def _loop(fn):
    @numba.njit(error_model="numpy")
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i])
        return out
    return apply


def _sweep(name, dtype, rng):
    """Arguments covering the domain: uniform on wide and narrow ranges, log-spaced
    magnitudes from the smallest subnormal to the largest finite value, both signs,
    and the neighbourhoods of the thresholds where the algorithms switch."""
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    parts = [rng.uniform(-1, 1, 200_000), rng.uniform(-50, 50, 200_000),
             rng.uniform(-800, 800, 50_000),
             np.geomspace(tiny, float(info.max), 200_000),
             np.array([0.5 * np.log(2), np.log(2), 0.34657359, 9.5, 18.0, 22.0, 40.0,
                       80.0, 88.72, 89.0, 700.0, 709.78, 710.0, -103.97, -104.0, -745.13,
                       -746.0, 1.0, 2.0, 0.5, np.sqrt(2.0), np.sqrt(0.5),
                       # sinh's and cosh's overflow, exp2's, erf's intervals and its 1
                       89.415985, 710.4758600739439, 128.0, 1024.0, -149.0, -150.0,
                       -1074.0, -1075.0, 2.25, 3.0, 4.0, 5.921, 6.0])]
    x = np.concatenate(parts)
    x = np.concatenate([x, -x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    x = x[np.isfinite(x)]
    if name in ("log", "log2", "log10"):
        x = np.abs(x)
    if name == "erf":                  # (1 beyond 6: fewer of those, for the reference's sake)
        x = np.concatenate([x[np.abs(x) < 7][::2], x[np.abs(x) >= 7][::16]])
    if name == "log1p":
        x = x[x > -1]
    return x


def _ulp_errors(name, dtype, x, got):
    """|got - exact| in units of the last place of the exact value rounded to dtype."""
    with np.errstate(all="ignore"):
        exact = REFERENCES[name](x.astype(LONG))
        rounded = exact.astype(dtype)
        ulp = np.spacing(np.abs(rounded)).astype(LONG)
        ulp = np.where(rounded == 0, LONG(np.finfo(dtype).smallest_subnormal), ulp)
        err = np.abs(got.astype(LONG) - exact) / ulp
    finite = np.isfinite(rounded)
    assert np.array_equal(np.isfinite(got[finite]), np.ones(finite.sum(), bool)), name
    return err[finite]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", mathlib.FUNCTIONS)
def test_accuracy_over_the_domain(name, dtype):
    fn = getattr(mathlib, f"{name}_{SUFFIX[dtype]}")
    x = _sweep(name, dtype, np.random.default_rng(sum(map(ord, name))))
    got = _loop(fn)(x)
    assert got.dtype == dtype
    err = _ulp_errors(name, dtype, x, got)
    worst = float(err.max())
    print(f"{name}_{SUFFIX[dtype]}: max error {worst:.2f} ulp over {x.size} arguments")
    assert worst <= MAX_ULP, f"{name} {np.dtype(dtype).name}: {worst:.2f} ulp at x={x[np.argmax(err)]!r}"


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-320, -1e-320, 1e-45, -1e-45,
            1e300, -1e300, 3e38, -3e38, 800.0, -800.0, 100.0, -100.0, 1.0, -1.0, -1.5]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", mathlib.FUNCTIONS)
def test_special_values_match_numpy(name, dtype):
    with np.errstate(all="ignore"):
        x = np.array(SPECIALS).astype(dtype)
        want = REFERENCES[name](x).astype(dtype)
        if name in ("sigmoid", "softplus"):       # SciPy's float32 expit flushes to 0
            want = REFERENCES[name](x.astype(LONG)).astype(dtype)
    got = _loop(getattr(mathlib, f"{name}_{SUFFIX[dtype]}"))(x)
    for xi, g, w in zip(x, got, want):
        if np.isnan(w) or np.isinf(w) or w == 0:
            assert (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w)), \
                f"{name}({xi!r}) = {g!r}, NumPy gives {w!r}"
        else:
            assert abs(g - w) <= MAX_ULP * np.spacing(abs(w)), f"{name}({xi!r}) = {g!r} vs {w!r}"


@pytest.mark.parametrize("name", mathlib.FUNCTIONS)
def test_a_loop_of_it_vectorizes(name):
    loop = _loop(getattr(mathlib, f"{name}_f32"))
    loop(np.ones(64, np.float32))
    ir = loop.inspect_llvm(loop.signatures[0])
    # eight lanes of AVX2, or sixteen where LLVM targets AVX-512 (Zen 4, Skylake-X)
    assert re.search(r"<(8|16) x float>", ir), f"a loop of {name}_f32 did not vectorize"


def test_a_loop_of_the_float64_ones_vectorizes():
    # all of them in one loop, the way a fused loss would use them
    @numba.njit(error_model="numpy")
    def loop(x):
        out = np.empty_like(x)
        for i in range(x.size):
            v = x[i]
            out[i] = (mathlib.sinh_f64(v) + mathlib.cosh_f64(v) + mathlib.exp2_f64(v)
                      + mathlib.log2_f64(v) + mathlib.log10_f64(v) + mathlib.erf_f64(v))
        return out
    loop(np.ones(64))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert re.search(r"<(4|8) x double>", ir), "a loop of the float64 functions did not vectorize"
    assert not re.search(r"call .*@(sinh|cosh|exp2|log2|log10|erf)\b", ir)


def test_vector_code_rewrites_the_lowerings_of_the_new_functions():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert mathlib.vector_code("np.sinh(a) + np.cosh(b) + np.log10(c)", f64) == \
        "sinh_f64(a) + cosh_f64(b) + log10_f64(c)"
    # exp2 and log2 of float32 go through float64 in their lowerings: here in float32
    assert mathlib.vector_code("np.float32(np.log2(np.float64(a - b)))", f32) == \
        "np.float32(log2_f32(np.float32(a - b)))"
    assert mathlib.vector_code("np.exp2(a)", f64) == "exp2_f64(a)"
    assert mathlib.vector_code("np.float32(math.erf(a)) + np.float32(math.erfc(a))", f32) == \
        "np.float32(erf_f32(a)) + np.float32(math.erfc(a))"
    assert mathlib.vector_code("np.sinh(a)", np.dtype(np.int64)) == "np.sinh(a)"


def test_callable_from_python_with_the_same_results():
    x = np.linspace(-5, 5, 11)
    for name in mathlib.FUNCTIONS:
        fn = getattr(mathlib, f"{name}_f64")
        looped = _loop(fn)(np.abs(x) if name.startswith("log") else x)
        plain = [fn(v) for v in (np.abs(x) if name.startswith("log") else x)]
        np.testing.assert_array_equal(looped, plain)


def test_called_from_python_a_float32_function_gives_a_float32():
    # a regression found by the fuzzer: Numba returns a float32 as a Python float, so the
    # generated Python went on in float64 where the kernel goes on in float32, and
    # rint's float32 rounding trick (add and subtract 2**23) did not round:
    # rint(log10(1.47)) was 0.166 in f.lower(...).python, 0 in the kernel and eagerly
    import jittape as jt
    for name in mathlib.FUNCTIONS:
        assert type(getattr(mathlib, f"{name}_f32")(np.float32(0.5))) is np.float32, name
    x = np.array(1.465794324874878, np.float32)
    lowered = jt.function(lambda x: np.rint(np.log10(x)) + np.rint(np.exp2(x))).lower(x)
    want = np.rint(np.log10(x)) + np.rint(np.exp2(x))
    for run in (lowered.python, lowered.numpy):
        (got,) = run(x)
        assert np.asarray(got).dtype == np.float32 and got == want


def test_generated_loops_call_it():
    import jittape as jt
    f = jt.value_and_grad(lambda x: jt.sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x)))
    source = f.lower(np.ones(8, np.float32)).source
    for name in ("softplus_f32(", "tanh_f32(", "exp_f32(", "sigmoid_f32("):
        assert name in source
    assert "np.exp(" not in source and "np.tanh(" not in source


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_generated_loops_call_the_new_functions(dtype):
    import jittape as jt
    suffix = SUFFIX[dtype]

    def loss(x):
        return jt.sum(jt.sinh(x) * jt.cosh(x) + jt.log2(x) + jt.log10(x) + jt.exp2(x)
                      + jt.erf(x))
    f = jt.value_and_grad(loss)
    x = np.linspace(0.5, 2.0, 8).astype(dtype)
    source = f.lower(x).source
    for name in ("sinh", "cosh", "log2", "log10", "exp2", "erf"):
        assert f"{name}_{suffix}(" in source, name
    for name in ("np.sinh(", "np.cosh(", "np.log2(", "np.log10(", "np.exp2(", "math.erf("):
        assert name not in source, name
    value, grad = f(x)
    with np.errstate(all="ignore"):
        want = np.sum(np.sinh(x) * np.cosh(x) + np.log2(x) + np.log10(x) + np.exp2(x)
                      + special.erf(x))
    np.testing.assert_allclose(value, want, rtol=1e-5 if dtype == np.float32 else 1e-13)


def test_a_new_process_takes_the_compiled_functions_from_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys
    script = (
        "import sys, numpy as np, numba\n"
        "from jittape.codegen import mathlib\n"
        "if sys.argv[1] == 'cached':\n"
        "    from numba.core.base import BaseContext\n"
        "    def again(*args, **kwargs):\n"
        "        raise AssertionError('compiled again')\n"
        "    BaseContext.compile_subroutine = again\n"
        "@numba.njit(error_model='numpy')\n"
        "def f(x):\n"
        "    return mathlib.softplus_f32(x[0]) + np.float32(mathlib.exp_f64(1.0))\n"
        "print(repr(f(np.ones(1, np.float32))))\n")
    env = dict(os.environ, JITTAPE_HELPERS_DIR=str(tmp_path / "jittape"))   # the helpers'
    first = subprocess.run([sys.executable, "-c", script, "fresh"], env=env, check=True,
                           capture_output=True, text=True).stdout
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "jittape" / "mathlib").iterdir()) == \
        ["exp_f64", "softplus_f32"]
    second = subprocess.run([sys.executable, "-c", script, "cached"], env=env,
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout == first
    folder = tmp_path / "jittape" / "mathlib"
    (folder / os.listdir(folder)[0]).write_text("garbage")
    third = subprocess.run([sys.executable, "-c", script, "fresh"], env=env, check=True,
                           capture_output=True, text=True).stdout
    assert third == first                          # a broken file: compiled again
