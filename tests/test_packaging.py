"""The package as a user gets it: a wheel and an sdist that ``python -m build`` makes and
``twine check`` passes, holding the license, the changelog and ``py.typed``; the wheel
installed into a fresh virtual environment runs the README's quickstart from outside
the repository, and writes nothing into the installed package but Python's own."""

import glob
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _quickstart():
    """The README's quickstart, as it is written there."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index("## Quickstart"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_a_wheel_installed_in_a_fresh_environment_runs_the_quickstart(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), ROOT], check=True,
                   capture_output=True, text=True, timeout=900, cwd=tmp_path)
    wheel, = glob.glob(str(dist / "*.whl"))
    sdist, = glob.glob(str(dist / "*.tar.gz"))
    check = subprocess.run([sys.executable, "-m", "twine", "check", wheel, sdist],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and check.stdout.count("PASSED") == 2, check.stdout
    names = zipfile.ZipFile(wheel).namelist()
    assert "jittape/py.typed" in names and any(n.endswith("licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    members = tarfile.open(sdist).getnames()
    for name in ("LICENSE", "CHANGELOG.md", "README.md", "jittape/py.typed"):
        assert any(m.endswith("/" + name) for m in members), name
    assert not os.path.exists(os.path.join(ROOT, "build"))     # (nothing left in the tree)

    # a fresh environment: the wheel installed on its own, its dependencies the ones
    # this environment has (a .pth file: no download)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                   check=True, capture_output=True, timeout=300)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(site, "dependencies.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "quickstart.py").write_text(_quickstart() + "print('value', float(value))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JITTAPE_HELPERS_DIR")}
    env["JITTAPE_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run([python, "quickstart.py"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "36.0" in run.stdout and "10.0" in run.stdout          # the tape's gradients
    assert float(run.stdout.split("value")[-1]) < 0.01             # the loop fitted w
    located = subprocess.run([python, "-c", "import jittape; print(jittape.__file__)"],
                             cwd=work, env=env, capture_output=True, text=True).stdout
    package = os.path.dirname(located.strip())
    assert package.startswith(site)                                # the installed copy
    written = [os.path.join(d, n) for d, _, files in os.walk(package) for n in files
               if n.endswith((".nbi", ".nbc"))]
    assert written == []                                           # no machine code there
    assert glob.glob(str(tmp_path / "cache" / "helpers" / "*" / "*.nbi"))
