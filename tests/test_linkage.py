"""Helpers called through a symbol (``codegen/linkage.py``): a kernel that multiplies
matrices declares the product's symbol instead of compiling the product into itself;
compiled calls of every layout give the product, raise its errors and fall back to the
dispatcher for other dtypes; a kernel kept on disk finds the symbol in a new process;
and a process whose Numba cache holds the parallel product runs it from Python first
(its thread pool started before the code is loaded)."""

import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import jittape as jt
from jittape.codegen import gemm
from jittape.codegen.runtime import matmul2d

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mlp(w1, w2, x):
    return jt.sum(jt.tanh(x @ w1) @ w2)


def _mlp_args(dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((20, 16)).astype(dtype),
            rng.standard_normal((16, 12)).astype(dtype),
            rng.standard_normal((8, 20)).astype(dtype))


def test_a_kernel_declares_the_product_and_does_not_compile_it_in(cache_dir):
    f = jt.value_and_grad(mlp, argnums=(0, 1))
    args = _mlp_args()
    source = f.lower(*args).source
    assert "link(matmul2d, 'float32')" in source
    kernel = f.kernel(*args)
    kernel(*args)
    text = kernel.inspect_llvm(kernel.signatures[0])
    assert "declare" in text and "jittape.extern.matmul2d.float32" in text
    defined = [line for line in text.splitlines() if line.startswith("define")]
    assert not any("_gemm" in line or "_matmul2d" in line for line in defined)
    value, (g1, g2) = f(*args)
    with jt.GradientTape() as tape:
        w1, w2 = jt.Variable(args[0]), jt.Variable(args[1])
        loss = mlp(w1, w2, args[2])
    e1, e2 = tape.gradient(loss, [w1, w2])
    np.testing.assert_allclose(value, loss.numpy(), rtol=1e-5)
    np.testing.assert_allclose(g1, e1.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g2, e2.numpy(), rtol=1e-4, atol=1e-5)


@numba.njit
def _products(a, b):
    return (matmul2d(a, b, True), matmul2d(a.T.copy().T, b, False),
            matmul2d(a[:, ::2], b[::2], True), matmul2d(np.asfortranarray(a), b.T.copy().T, True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_calls_of_any_layout(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((30, 40)).astype(dtype)
    b = rng.standard_normal((40, 24)).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    full, fortran, strided, mixed = _products(a, b)
    for got in (full, fortran, mixed):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(strided, a[:, ::2] @ b[::2], rtol=tol, atol=tol)
    np.testing.assert_array_equal(matmul2d(a, b, True), full)      # Python: the same code


def test_compiled_calls_raise_the_products_errors():
    @numba.njit
    def bad(a, b):
        return matmul2d(a, b, True)

    with pytest.raises(ValueError, match="not aligned"):
        bad(np.ones((3, 4), np.float32), np.ones((5, 4), np.float32))


def test_other_dtypes_call_the_dispatcher():
    @numba.njit
    def product(a, b):
        return matmul2d(a, b, True)

    a = (np.arange(12.0).reshape(3, 4) + 1j).astype(np.complex64)
    b = np.ones((4, 2), np.complex64)
    np.testing.assert_allclose(product(a, b), a @ b)
    assert gemm.matmul2d.external.match(tuple(numba.typeof(v) for v in (a, b, True))) is None


PROCESS = textwrap.dedent("""
    import json, sys, numba, numpy as np
    sys.path.insert(0, {root!r})
    import jittape as jt
    from jittape.codegen.runtime import matmul2d
    out = {{}}
    if "direct" in sys.argv:  # from Python first: the parallel product
        a = np.ones((256, 784), np.float32)
        out["direct"] = float(matmul2d(a, np.ones((784, 128), np.float32), True).sum())
    if "kernel" in sys.argv:
        def loss(w1, w2, x):
            return jt.sum(jt.tanh(x @ w1) @ w2)
        rng = np.random.default_rng(0)
        args = (rng.standard_normal((20, 16)).astype(np.float32),
                rng.standard_normal((16, 12)).astype(np.float32),
                rng.standard_normal((8, 20)).astype(np.float32))
        f = jt.value_and_grad(loss, argnums=(0, 1))
        value, (g1, g2) = f(*args)
        kernel = f.kernel(*args)
        @numba.njit
        def mine(w1, w2, x):
            return kernel(w1, w2, x)[0] * 2
        out.update(f.cache_info()._asdict(), value=float(value), g1=float(g1.sum()),
                   mine=float(mine(*args)))
    print(json.dumps(out))
""")


def test_new_processes_with_warm_caches_load_and_run(tmp_path):
    """Processes that share Numba's and jittape's caches, in the order that once
    crashed: a kernel compiles the product, a process calls it from Python (compiling
    that signature), the next one loads it from Numba's cache and ran its parallel code
    before Numba's thread pool had started (a jump to an address the pool defines).
    Then a kernel loaded from jittape's disk cache finds the product's symbol, in
    jittape and inside the caller's own njit code."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               JITTAPE_CACHE_DIR=str(tmp_path / "jittape"),
               JITTAPE_HELPERS_DIR=str(tmp_path / "helpers"))
    env.pop("NUMBA_DISABLE_JIT", None)
    runs = []
    for parts in (["kernel"], ["direct"], ["direct"], ["direct", "kernel"]):
        proc = subprocess.run([sys.executable, "-c", PROCESS.format(root=ROOT), *parts],
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (parts, proc.returncode, proc.stderr[-3000:])
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, _, direct, last = runs
    assert first["compiles"] == 1 and last["compiles"] == 0 and last["disk_hits"] == 1
    assert direct["direct"] == last["direct"] == 256 * 128 * 784
    for name in ("value", "g1", "mine"):
        assert last[name] == first[name]
    assert last["mine"] == 2 * last["value"]


def test_with_numba_disabled_the_product_is_plain_python():
    """NUMBA_DISABLE_JIT=1 (debugging in Python): the runtime imports and the product
    runs as a plain function."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r)\n"
            "from jittape.codegen.runtime import link, matmul2d\n"
            "link(matmul2d, 'float32')\n"
            "print(matmul2d(np.ones((8, 8)), np.ones((8, 8)), True).sum())\n" % ROOT)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "512.0"


def _without_jit(code, cache_dir):
    """``code`` run by a new Python with NUMBA_DISABLE_JIT=1 and its own disk cache; it
    must succeed."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", JITTAPE_CACHE_DIR=str(cache_dir))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_with_numba_disabled_a_kernel_in_parts_runs_as_python(tmp_path):
    """NUMBA_DISABLE_JIT=1: a kernel too large for one function (in parts) runs its
    parts as plain Python functions (it crashed switching their compiling off)."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r)\n"
            "import jittape as jt\n"
            "def f(x):\n"
            "    for k in range(60):\n"
            "        x = jt.tanh(x * (1.0 + k / 100)) + jt.sin(x) * 0.1\n"
            "    return jt.sum(x * x)\n"
            "x = np.linspace(-1, 1, 5)\n"
            "g = jt.grad(f)(x)\n"
            "t = jt.constant(x)\n"
            "with jt.GradientTape() as tape:\n"
            "    tape.watch(t)\n"
            "    y = f(t)\n"
            "print(float(np.abs(g - tape.gradient(y, t).numpy()).max()))\n" % ROOT)
    proc = _without_jit(code, tmp_path)
    assert float(proc.stdout.split()[-1]) < 1e-12


def test_with_numba_disabled_lapack_by_symbol_runs_scipys_wrappers(tmp_path):
    """NUMBA_DISABLE_JIT=1: the helpers that call LAPACK through a symbol (eigh, eig) run
    as Python, through SciPy's wrappers of the same routines; they left the results
    unwritten (silently wrong eigenvalues)."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r)\n"
            "import jittape as jt\n"
            "a = np.random.default_rng(0).normal(size=(2, 5, 5))\n"
            "f = jt.function(lambda x: (np.linalg.eigh(x, 'U'), np.linalg.eigvalsh(x),\n"
            "                           np.linalg.eig(x), np.linalg.eigvals(x + 1j * x)))\n"
            "(w, v), wl, (we, ve), wc = f(a)\n"
            "w0, v0 = np.linalg.eigh(a, 'U')\n"
            "we0, ve0 = np.linalg.eig(a)\n"
            "print(max(np.abs(w - w0).max(), np.abs(v - v0).max(),\n"
            "          np.abs(wl - np.linalg.eigvalsh(a)).max(), np.abs(we - we0).max(),\n"
            "          np.abs(ve - ve0).max(), np.abs(wc - np.linalg.eigvals(a + 1j * a)).max()))\n"
            % ROOT)
    proc = _without_jit(code, tmp_path)
    assert float(proc.stdout.split()[-1]) < 1e-12


def test_with_numba_disabled_the_fast_path_checks_dtypes_and_ranks(tmp_path):
    """NUMBA_DISABLE_JIT=1: Numba no longer rejects another dtype at a kernel's door, so
    the fast path checks it: a complex array reached the float64 variant's Python kernel
    (sum(z * z) was 0.0, with only a ComplexWarning)."""
    code = ("import sys, warnings, numpy as np; sys.path.insert(0, %r)\n"
            "warnings.simplefilter('error')\n"
            "import jittape as jt\n"
            "f = jt.function(lambda x: jt.sum(x * x))\n"
            "x = np.linspace(-1, 1, 5)\n"
            "for _ in range(3):\n"
            "    f(x)\n"
            "z = x + 1j * x[::-1]\n"
            "print(f(z) == np.sum(z * z), f(x.reshape(5, 1)) == np.sum(x * x), f(x) == np.sum(x * x))\n"
            % ROOT)
    proc = _without_jit(code, tmp_path)
    assert proc.stdout.split()[-3:] == ["True", "True", "True"]
