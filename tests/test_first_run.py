"""A first run: jittape's helpers compiled where the user's cache is (never into the
installed package), a long compile that says what it does, ``jt.warmup`` and the
``python -m jittape warmup`` and ``cache info|clear`` commands."""

import os
import subprocess
import sys
import textwrap

import numba
import pytest
from numba import types

import jittape as jt
from jittape.codegen import gemm, helpers_cache, linkage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "jittape")


def _run(code, env):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_the_helpers_cache_is_the_users_never_the_package(tmp_path):
    where = "from jittape.codegen import gemm; print(gemm._gemm._cache._cache_path)"
    assert gemm._gemm._cache._cache_path.startswith(os.environ["JITTAPE_HELPERS_DIR"])
    env = {k: v for k, v in os.environ.items() if k != "JITTAPE_HELPERS_DIR"}
    env["JITTAPE_CACHE_DIR"] = str(tmp_path / "cache")
    path = _run(where, env)
    assert path.startswith(str(tmp_path / "cache" / "helpers"))
    # the disk cache off: a folder of the process's, gone when it exits
    env["JITTAPE_CACHE_DIR"] = ""
    path = _run(where, env)
    assert not path.startswith(PACKAGE) and not os.path.exists(path)
    # the user's own cached functions keep Numba's locators
    mine = os.path.join(tmp_path, "mine.py")
    with open(mine, "w") as f:
        f.write("import numba\n@numba.njit(cache=True)\ndef g(x):\n    return x + 1\n")
    env["PYTHONPATH"] = str(tmp_path)
    path = _run("import jittape, mine; print(mine.g._cache._cache_path)", env)
    assert path == os.path.join(str(tmp_path), "__pycache__")


def _toy(name):
    dispatcher = numba.njit(lambda x: x + 1.0)
    return linkage.external(dispatcher, name, {"float64": (types.float64,)},
                            lambda x: "float64", label="toy helpers").external


def test_a_long_helper_compile_says_what_it_does(capsys, monkeypatch):
    _toy("toy_quick").link("float64")                # quicker than Progress.AFTER: silent
    assert capsys.readouterr().err == ""
    _toy("toy_said").link("float64", announce=True)  # as one past AFTER is
    err = capsys.readouterr().err
    assert "jittape: compiling its runtime helpers (toy helpers for float64)" in err
    assert "python -m jittape warmup" in err and helpers_cache.helpers_dir() in err
    assert "jittape: runtime helpers (toy helpers for float64) done in" in err


def test_warmup_compiles_the_products_ahead():
    assert jt.warmup(("float64",)) >= 0.0              # (warm here: loaded, or linked)
    assert "float64" in gemm.matmul2d.external._linked
    with pytest.raises(ValueError, match="float32 and float64, not 'float16'"):
        jt.warmup(("float16",))


def test_the_cache_commands_say_where_it_is_and_empty_it(tmp_path):
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"))
    _run("""
        import numpy as np, jittape as jt
        jt.grad(lambda x: jt.sum(jt.sin(x)))(np.ones(3))
        print("ok")""", env)

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "jittape", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    info = cli("cache", "info")
    assert f"disk cache: {tmp_path / 'cache'}" in info and "compiled functions: 1 (" in info
    assert "runtime helpers: " in info
    assert "removed 1 compiled functions" in cli("cache", "clear")
    assert "compiled functions: 0 (0 bytes)" in cli("cache", "info")
    assert not [n for n in os.listdir(tmp_path / "cache") if n.startswith("jittape_generated")]
    env["JITTAPE_CACHE_DIR"] = ""
    assert "disk cache: off" in cli("cache", "info")


def test_warmup_command():
    proc = subprocess.run([sys.executable, "-m", "jittape", "warmup", "--dtypes", "float64"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "runtime helpers for float64 are ready" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "jittape", "warmup", "--dtypes", "int8"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "not 'int8'" in proc.stderr
