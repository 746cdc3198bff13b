"""A first run: jittape's helpers compiled where the user's cache is (never into the
installed package), a long compile that says what it does, ``jt.warmup`` and the
``python -m jittape warmup`` and ``cache info|clear`` commands."""

import os
import subprocess
import sys
import textwrap
import threading
import time

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
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
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


USER_CACHED = """
import sys, numpy as np, numba, jittape as jt
rng = np.random.default_rng(0)
w, x = rng.standard_normal((16, 12)), rng.standard_normal((8, 16))
f = jt.function(lambda w, x: jt.sum(jt.tanh(x @ w)))
kernel = f.kernel(w, x)

@numba.njit(cache=True)
def mine(w, x):
    return kernel(w, x)[0] * 2

print(float(mine(w, x)) - 2 * float(np.tanh(x @ w).sum()))
"""

INTERRUPTED = """
import numpy as np, jittape as jt
from jittape.codegen import gemm
rng = np.random.default_rng(0)
w, x = rng.standard_normal((16, 12)), rng.standard_normal((8, 16))
f = jt.function(lambda w, x: jt.sum(jt.tanh(x @ w)))
ext = gemm.matmul2d.external
real, state = type(ext)._define, []

def flaky(self, key, symbol):
    if self is ext and not state:
        state.append(1)
        raise KeyboardInterrupt("Ctrl-C during the helpers' compile")
    return real(self, key, symbol)

type(ext)._define = flaky
try:
    f(w, x)
except KeyboardInterrupt:
    pass
print(float(f(w, x)) - float(np.tanh(x @ w).sum()))
"""


@pytest.mark.parametrize("script, runs", [(USER_CACHED, 2), (INTERRUPTED, 2)],
                         ids=["users-cached-njit", "interrupted-link"])
def test_machine_code_never_loads_before_the_helpers_it_calls(script, runs, tmp_path):
    """Regressions (each a segfault): the user's own cached njit function calling
    ``f.kernel()`` loaded in a new process before the product it calls was defined; a
    helpers' compile interrupted once was never done again. The second process loads
    the kernel from the disk cache, its helpers cold where the first was interrupted."""
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path,
               JITTAPE_HELPERS_DIR=str(tmp_path / "helpers"))
    (tmp_path / "prog.py").write_text(script)
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert abs(float(proc.stdout.split()[-1])) < 1e-9


def test_a_helpers_folder_of_others_is_not_used_and_clear_removes_only_ours(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)                             # writable by others: not loaded
    env = {k: v for k, v in os.environ.items()}
    env["JITTAPE_HELPERS_DIR"] = str(shared)
    proc = subprocess.run([sys.executable, "-c", "from jittape.codegen import helpers_cache as h;"
                           " print(h.helpers_dir())"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert "others may write it" in proc.stderr and str(shared) not in proc.stdout
    # clear: jittape's files only, never other files or folders there
    mine = tmp_path / "mine"
    (mine / "other_project" / "__pycache__").mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    (mine / "other_project" / "__pycache__" / "g-3.py311.nbi").write_text("x")
    (mine / "empty").mkdir()
    os.chmod(mine, 0o700)
    env["JITTAPE_HELPERS_DIR"] = str(mine)
    env["JITTAPE_CACHE_DIR"] = str(tmp_path / "cache")
    _run("import jittape as jt; jt.warmup(('float64',)); print('ok')", env)
    assert helpers_cache.HelperLocator.get_suitable_cache_subpath(gemm.__file__) in os.listdir(mine)
    subprocess.run([sys.executable, "-m", "jittape", "cache", "clear"], env=env, cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    left = sorted(os.path.relpath(os.path.join(d, n), mine) for d, ds, fs in os.walk(mine)
                  for n in ds + fs)
    assert "notes.txt" in left and "empty" in left
    assert os.path.join("other_project", "__pycache__", "g-3.py311.nbi") in left
    assert not [n for n in left if n.endswith((".nbi", ".nbc")) and n.startswith("codegen")]


def test_the_helpers_folder_is_chosen_once_and_absolute(tmp_path, monkeypatch):
    chosen = helpers_cache.helpers_dir()
    assert os.path.isabs(chosen) and chosen == gemm._gemm._cache._cache_path.rsplit(os.sep, 1)[0]
    monkeypatch.setenv("JITTAPE_HELPERS_DIR", str(tmp_path))        # (read at import only)
    monkeypatch.setattr(jt.config, "disk_cache", False)
    assert helpers_cache.helpers_dir() == chosen


def test_a_process_that_waits_for_a_compile_at_exit_says_so(tmp_path):
    """A tiered first call returns at once; the process then waits at exit for the
    compile it began (so that the next run loads it), and says why."""
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"), JITTAPE_TIERED="1")
    # (a process with a core to spare: on one core the compile would begin only once
    # the calls had run a while, test_tiered)
    proc = subprocess.run([sys.executable, "-c", "import numpy as np, jittape as jt\n"
                           "jt.compiler.cache._one_core = lambda: False\n"
                           "print(float(jt.grad(lambda x: jt.sum(jt.sin(x) * x))(np.ones(3))[0]))"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "jittape: finishing 1 compile begun in the background, so that the next run " \
           "loads it from the disk cache" in proc.stderr
    again = subprocess.run([sys.executable, "-c", "import numpy as np, jittape as jt\n"
                            "f = jt.grad(lambda x: jt.sum(jt.sin(x) * x)); f(np.ones(3))\n"
                            "print(f.cache_info().disk_hits)"],
                           env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.stdout.split()[-1] == "1" and "finishing" not in again.stderr


def test_a_background_compile_the_main_thread_waits_for_says_so(capsys, monkeypatch):
    from numba.core.compiler_lock import global_compiler_lock
    monkeypatch.setattr(linkage.Progress, "AFTER", 0.05)
    started, release = threading.Event(), threading.Event()

    def background():
        with global_compiler_lock:
            with linkage.Progress.of("a test helper", 1) as progress:
                started.set()
                release.wait(10)
                progress.step()

    quiet = threading.Thread(target=background)
    quiet.start()
    started.wait(10)
    time.sleep(0.4)                    # the main thread is busy elsewhere: nothing said
    assert "a test helper" not in capsys.readouterr().err
    threading.Timer(0.6, release.set).start()
    with global_compiler_lock:         # the main thread waits for the compile
        pass
    quiet.join(10)
    err = capsys.readouterr().err
    assert "compiling its runtime helpers (a test helper)" in err, err
