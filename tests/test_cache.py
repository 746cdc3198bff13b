"""The disk cache and the process's table of kernels: damaged files heal with one
warning, unsafe directories are not loaded from, a size limit evicts the least recently
used entries, concurrent builds share one kernel, and a kernel's own exceptions are
never mistaken for a damaged cache."""

import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import jittape as jt
from jittape.codegen import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")

# A new process: compiles (or loads) the functions named in argv and prints what it
# saw as JSON: per function the value, the gradient and cache_info(), and the warnings.
PROBE = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    sys.path.insert(0, {root!r})
    import jittape as jt

    def first(w, x):
        return jt.mean(jt.tanh(x @ w) ** 2)

    def second(w, x):
        return jt.mean(jt.sigmoid(x @ w) * 3.0)

    def third(w, x):
        return jt.mean(jt.exp(x @ w) - 1.0)

    if len(sys.argv) > 2:
        jt.config.disk_cache_max_bytes = int(sys.argv[2])
    w, x = np.array([0.5, -1.0, 2.0]), np.arange(12.0).reshape(4, 3) / 10
    out = {{}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in sys.argv[1].split(","):
            f = jt.value_and_grad(globals()[name])
            value, g = f(w, x)
            if name == "first":              # a new memory layout after the first call
                _, gf = f(w, np.asfortranarray(x))
                assert np.allclose(gf, g, rtol=1e-12, atol=0), (gf, g)
            out[name] = dict(f.cache_info()._asdict(), value=float(value), grad=g.tolist())
    out["warnings"] = [str(c.message) for c in caught if "jittape" in str(c.message)]
    print(json.dumps(out))
""")


def _probe(cache, names="first", limit=None, env=None):
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(cache), **(env or {}))
    argv = [sys.executable, "-c", PROBE.format(root=ROOT), names]
    if limit is not None:
        argv.append(str(limit))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr      # never a crash (SIGILL, SIGSEGV, ...)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected(name):
    w, x = np.array([0.5, -1.0, 2.0]), np.arange(12.0).reshape(4, 3) / 10
    z = x @ w
    if name == "first":
        return np.mean(np.tanh(z) ** 2), x.T @ (2 * np.tanh(z) * (1 - np.tanh(z) ** 2)) / 4
    if name == "second":
        s = 1 / (1 + np.exp(-z))
        return np.mean(3 * s), x.T @ (3 * s * (1 - s)) / 4
    return np.mean(np.exp(z) - 1), x.T @ np.exp(z) / 4


def _check(out, name):
    value, grad = _expected(name)
    assert out[name]["value"] == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(out[name]["grad"], grad, rtol=1e-12)


def _files(cache, kind):
    """The cache's files of one kind: module, manifest, index (Numba's .nbi) or data
    (Numba's machine code, .nbc)."""
    pattern = {"module": "jittape_generated_*.py", "manifest": "jittape_generated_*.manifest",
               "index": "__pycache__/jittape_generated_*.nbi",
               "data": "__pycache__/jittape_generated_*.nbc"}[kind]
    return sorted(glob.glob(os.path.join(str(cache), pattern)))


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A disk cache holding ``first`` (compiled by a process of its own)."""
    cache = tmp_path_factory.mktemp("filled")
    out = _probe(cache)
    assert out["first"]["compiles"] == 1 and out["warnings"] == []
    _check(out, "first")
    for kind in ("module", "manifest", "index"):
        assert len(_files(cache, kind)) == 1, (kind, os.listdir(cache))
    assert len(_files(cache, "data")) == 2        # C and Fortran layouts
    return cache


def _flip(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "flipped byte"])
@pytest.mark.parametrize("kind", ["module", "manifest", "index", "data"])
def test_a_damaged_file_warns_once_and_the_entry_heals(filled, tmp_path, kind, damage):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    path = _files(cache, kind)[0]
    if damage == "garbage":
        open(path, "wb").write(b"garbage\n")
    else:
        _flip(path)
    out = _probe(cache)
    _check(out, "first")
    assert len(out["warnings"]) == 1 and "corrupt" in out["warnings"][0], out["warnings"]
    assert os.path.basename(_files(cache, "module")[0]) in out["warnings"][0]
    assert out["first"]["compiles"] == 1
    healed = _probe(cache)                       # the next process loads it silently
    _check(healed, "first")
    assert healed["warnings"] == []
    assert healed["first"]["compiles"] == 0 and healed["first"]["disk_hits"] == 1


@pytest.mark.parametrize("kind", ["index", "data"])
def test_a_file_that_verifies_but_does_not_load_heals(filled, tmp_path, kind):
    """A file whose manifest records its damage too (as a crash between the two writes
    could leave it): Numba's load fails, and that heals the entry the same way."""
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    path = _files(cache, kind)[0]
    open(path, "wb").write(b"\x80\x04garbage that does not unpickle")
    manifest_path, = _files(cache, "manifest")
    manifest = build._read_manifest(manifest_path)
    manifest["numba"][os.path.basename(path)] = build._file_hash(path)
    open(manifest_path, "wb").write(build._manifest_bytes(manifest["module"], manifest["numba"]))
    out = _probe(cache)
    _check(out, "first")
    assert len(out["warnings"]) == 1 and "Numba cannot load it" in out["warnings"][0]
    healed = _probe(cache)
    assert healed["warnings"] == [] and healed["first"]["disk_hits"] == 1


def test_a_missing_manifest_means_nothing_is_loaded_but_no_warning(filled, tmp_path):
    """Numba's files without a record of their hashes (a writer that stopped before
    writing it) are not trusted: removed quietly, compiled again."""
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    os.remove(_files(cache, "manifest")[0])
    out = _probe(cache)
    _check(out, "first")
    assert out["warnings"] == [] and out["first"]["compiles"] == 1
    assert _probe(cache)["first"]["disk_hits"] == 1


@pytest.mark.parametrize("where", ["", "__pycache__"])
def test_a_cache_others_can_write_is_not_loaded(filled, tmp_path, where):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    before = {p: open(p, "rb").read() for p in glob.glob(f"{cache}/**", recursive=True)
              if os.path.isfile(p)}
    os.chmod(cache / where, 0o777)
    out = _probe(cache)
    _check(out, "first")
    assert out["first"]["compiles"] == 1 and out["first"]["disk_hits"] == 0
    assert len(out["warnings"]) == 1 and "not used" in out["warnings"][0]
    assert "written by group or others" in out["warnings"][0]
    after = {p: open(p, "rb").read() for p in glob.glob(f"{cache}/**", recursive=True)
             if os.path.isfile(p)}
    assert after == before                       # neither read into Numba nor written


def test_a_cache_of_another_user_is_not_loaded(cache_dir, monkeypatch):
    cache_dir.mkdir(mode=0o700)
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    f = jt.grad(lambda x: jt.sum(jt.sin(x) * x))
    with pytest.warns(RuntimeWarning, match="belongs to another user"):
        g = f(np.array([0.5, 1.0]))
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-12)
    assert os.listdir(cache_dir / "__pycache__") == [] and \
        not glob.glob(str(cache_dir / "jittape_generated_*"))


def test_the_least_recently_used_entries_are_evicted(tmp_path):
    cache = tmp_path / "cache"
    out = _probe(cache, "first,second")
    _check(out, "first")
    _check(out, "second")
    modules = _files(cache, "module")
    assert len(modules) == 2

    def entry_bytes():
        sizes = {}
        for path in glob.glob(f"{cache}/jittape_generated_*") + \
                glob.glob(f"{cache}/__pycache__/jittape_generated_*"):
            name = os.path.basename(path).split(".")[0]
            sizes[name] = sizes.get(name, 0) + os.path.getsize(path)
        return sizes

    sizes = entry_bytes()
    # room for these two and a bit: a third evicts one, the least recently used
    limit = sum(sizes.values()) + min(sizes.values()) // 2
    out = _probe(cache, "first,third", limit)   # uses first (from the disk), then third
    _check(out, "first")
    _check(out, "third")
    assert out["first"]["disk_hits"] == 1 and out["third"]["compiles"] == 1
    after = entry_bytes()
    assert len(after) == 2 and sum(after.values()) <= limit
    (second,) = set(sizes) - {n for n in sizes if n in after}   # second's entry went
    assert not glob.glob(f"{cache}/{second}.*") and \
        not glob.glob(f"{cache}/__pycache__/{second}.*")    # all its files
    again = _probe(cache, "first,third", limit)
    assert again["warnings"] == [] and again["first"]["disk_hits"] == 1 and \
        again["third"]["disk_hits"] == 1


def test_a_size_limit_of_none_keeps_everything(cache_dir, monkeypatch):
    monkeypatch.setattr(jt.config, "disk_cache_max_bytes", None)
    for k in range(3):
        jt.grad(lambda x, k=k: jt.sum(x ** (k + 2)))(np.arange(3.0))
    assert len(glob.glob(str(cache_dir / "jittape_generated_*.py"))) == 3


def test_two_threads_compile_one_function_at_once(cache_dir):
    def make():
        act = jt.tanh                 # a closure cell of its own: a wrapper of its own

        def loss(w, x):
            return jt.mean(act(x @ w) ** 2)
        return loss

    w, x = np.array([0.5, -1.0, 2.0]), np.arange(12.0).reshape(4, 3) / 10
    wrappers = [jt.value_and_grad(make()) for _ in range(2)]
    assert wrappers[0] is not wrappers[1]
    start = threading.Barrier(2)
    results, errors = [None, None], []

    def work(k):
        try:
            start.wait()
            results[k] = wrappers[k](w, x)
        except Exception as err:          # reported below
            errors.append(err)

    imports = build._COUNTS["imports"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    value, grad = _expected("first")
    for got_value, got_grad in results:
        assert got_value == pytest.approx(value, rel=1e-12)
        np.testing.assert_allclose(got_grad, grad, rtol=1e-12)
    infos = [f.cache_info() for f in wrappers]
    assert sum(i.compiles for i in infos) == 1 and sum(i.traces for i in infos) == 2
    assert build._COUNTS["imports"] == imports + 1      # one module, one dispatcher
    names = os.listdir(cache_dir) + os.listdir(cache_dir / "__pycache__")
    assert not [n for n in names if "tmp" in n], names
    assert len(glob.glob(str(cache_dir / "jittape_generated_*.py"))) == 1


def test_two_processes_compile_into_one_cache_at_once(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", PROBE.format(root=ROOT), "first"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        out = json.loads(stdout.strip().splitlines()[-1])
        _check(out, "first")
        assert out["warnings"] == []
    later = _probe(cache)
    assert later["warnings"] == [] and later["first"]["disk_hits"] == 1
    assert not [n for n in os.listdir(cache) + os.listdir(cache / "__pycache__") if "tmp" in n]


def test_wrappers_of_one_graph_share_one_kernel(cache_dir):
    """A wrapper made anew (here: of a new closure each step) finds the kernel built for
    the previous one: no second import, compile or load."""
    def make():
        act = jt.sigmoid

        def loss(w):
            return jt.sum(act(w) * w)
        return loss

    w = np.array([0.25, -0.5, 1.0])
    s = 1 / (1 + np.exp(-w))
    imports = build._COUNTS["imports"]
    infos = []
    for step in range(4):
        f = jt.grad(make())
        np.testing.assert_allclose(f(w), s * (1 - s) * w + s, rtol=1e-12)
        infos.append(f.cache_info())
    assert infos[0].compiles == 1
    assert all(i.compiles == 0 and i.disk_hits == 0 for i in infos[1:]), infos
    assert build._COUNTS["imports"] == imports + 1


def test_a_kernel_from_the_disk_compiles_new_layouts_in_full(filled, tmp_path):
    """A process that loads a kernel from the disk (loads start Numba lean) and then
    calls it with a Fortran-ordered array compiles that layout with all of Numba
    (the probe does so for ``first``)."""
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    out = _probe(cache)
    assert out["first"]["disk_hits"] == 1 and out["warnings"] == []
    _check(out, "first")


def test_a_kernels_index_error_on_its_first_call_propagates_unchanged(cache_dir):
    """The kernel's first call raises IndexError (an index out of range, its message
    saying 'index'): the user's error, raised as it is, not taken for a damaged cache."""
    f = jt.grad(lambda x, i: jt.sum(jt.gather(x, i) * 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(IndexError, match=r"index 9 is out of bounds for axis 0 with size 4"):
            f(np.ones(4), np.array([1, 9]))
        np.testing.assert_array_equal(f(np.ones(4), np.array([1, 1])), [0, 4, 0, 0])
    assert f.cache_info().compiles == 1


def test_a_kernels_own_exception_on_its_first_call_propagates_unchanged(cache_dir,
                                                                        monkeypatch):
    """The kernel raises (check_numerics: log of a negative number) on its first call,
    with this file's name, 'test_cache.py', in its message: it is the user's error,
    raised as it is, not taken for a damaged cache."""
    monkeypatch.setattr(jt.config, "check_numerics", True)
    f = jt.value_and_grad(lambda x: jt.sum(jt.log(x)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(jt.NumericsError, match=r"log produced NaN.*test_cache\.py:"):
            f(np.array([-1.0, 2.0]))
        np.testing.assert_allclose(f(np.array([4.0, 2.0]))[1], [0.25, 0.5])
    assert f.cache_info().compiles == 1
    with pytest.raises(jt.NumericsError):          # compiled, it raises again
        f(np.array([1.0, -2.0]))


def test_the_disk_cache_off_leaves_no_files(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        import numpy as np
        import jittape as jt
        g = jt.grad(lambda x: jt.sum(jt.tanh(x) * x))(np.ones(3))
        h = jt.grad(lambda x: jt.sum(jt.tanh(x) * x), target="cuda")(np.ones(3))
        print(float(g.sum()), float(np.asarray(h).sum()))
    """)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, JITTAPE_CACHE_DIR="", TMPDIR=str(tmp), NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    want = 3 * (np.tanh(1) + 1 - np.tanh(1) ** 2)
    assert [float(v) for v in proc.stdout.split()] == pytest.approx([want, want])
    assert os.listdir(tmp) == []


def test_cache_files_are_private_to_the_user(cache_dir):
    jt.grad(lambda x: jt.sum(x * 5.0))(np.ones(2))
    for path in (cache_dir, cache_dir / "__pycache__"):
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    for path in _files(cache_dir, "module") + _files(cache_dir, "manifest"):
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


def _defined(source, filename):
    """The function ``source`` defines, compiled as if from ``filename``."""
    namespace = {"jt": jt, "np": np}
    exec(compile(source, filename, "exec"), namespace)
    return next(v for k, v in namespace.items() if callable(v) and k not in ("jt",))


LOSS_A = """
def loss(w, x, i):
    return jt.sum(jt.tanh(x @ w) ** 2) + jt.sum(jt.gather(w[0], i))
"""

LOSS_B = """


# the same ops in another file, at other lines, with other names
def objective(weights, inputs, picks):
    return jt.sum(jt.tanh(inputs @ weights) ** 2) + jt.sum(jt.gather(weights[0], picks))
"""


def test_equal_graphs_at_other_lines_and_names_share_one_compiled_module(cache_dir,
                                                                        monkeypatch):
    """The disk cache keys a module by its code alone: no file, line or name of the user's
    program is in it (the kernel raises its messages' numbers). A program of the same
    ops in another file loads the first one's kernel; each still names its own line when
    an index is out of range."""
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(3, 3)), rng.normal(size=(4, 3))
    good, bad = np.array([0, 2]), np.array([0, 7])
    f = jt.value_and_grad(_defined(LOSS_A, "/models/a.py"))
    value, grad = f(w, x, good)
    assert f.cache_info().compiles == 1
    monkeypatch.setattr(build, "_TABLE", {})              # as a new process: on disk
    g = jt.value_and_grad(_defined(LOSS_B, "/models/b.py"))
    other_value, other_grad = g(w, x, good)
    assert (g.cache_info().compiles, g.cache_info().disk_hits) == (0, 1)
    assert other_value == value and np.array_equal(other_grad, grad)
    source_a, source_b = f.lower(w, x, good).source, g.lower(w, x, good).source
    assert "def kernel(w, x, i)" in source_a and "def kernel(weights, inputs, picks)" in source_b
    assert "a.py:3" in source_a and "b.py:6" in source_b           # (in the comments)
    for fn, where in ((f, r"a\.py:3"), (g, r"b\.py:6")):
        for _ in range(2):                        # the full path, then the fast path
            with pytest.raises(IndexError, match=r"index 7 is out of bounds for axis 0 "
                               rf"with size 3 .*{where}"):
                fn(w, x, bad)
            fn(w, x, good)
    files = glob.glob(os.path.join(str(cache_dir), "**", "*.py"), recursive=True)
    assert files
    for path in files:                             # what is on disk: code alone
        with open(path) as file:
            text = file.read()
        assert "a.py" not in text and "b.py" not in text and "weights" not in text
