"""The documentation: README's links resolve, its Python examples run, and its two
set-up commands are the ones the project runs."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + [os.path.join("docs", name) for name in
                         sorted(os.listdir(os.path.join(ROOT, "docs")))
                         if name.endswith(".md")]


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def anchor(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    text = read(page)
    links = re.findall(r"\]\(([^)#\s]*)(#[^)\s]*)?\)", text)
    assert links or page != "README.md"
    for target, fragment in links:
        if re.match(r"[a-z]+://", target):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target)) if target else page
        assert os.path.exists(os.path.join(ROOT, path)), f"{page}: broken link {target}"
        if fragment and path.endswith(".md"):
            headings = re.findall(r"^#+ (.*)$", read(path), re.M)
            assert fragment[1:] in {anchor(h) for h in headings}, f"{page}: no {target}{fragment}"


# docs/api.md's blocks list signatures (``f(x, ...)``); the other pages' blocks are examples
EXAMPLES = [page for page in PAGES if page != os.path.join("docs", "api.md")]


@pytest.mark.parametrize("page", EXAMPLES)
def test_the_python_examples_run(page, tmp_path):
    """Each page's Python blocks, in order, as one session (later ones use earlier names)."""
    runnable = re.findall(r"```python\n(.*?)```", read(page), re.S)
    if not runnable:
        return
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", "\n".join(runnable) + "\nprint('ran')"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.endswith("ran\n"), (page, done.stderr[-2000:])


BLOCKS = [(page, k, block) for page in EXAMPLES
          for k, block in enumerate(re.findall(r"```python\n(.*?)```", read(page), re.S))]


@pytest.mark.parametrize("page, k, block", BLOCKS,
                         ids=[f"{page}-{k}" for page, k, _ in BLOCKS])
def test_each_python_example_runs_on_its_own(page, k, block, tmp_path):
    """Every block as it is written, alone (a reader copies one, not the page)."""
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", block + "\nprint('ran')"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.endswith("ran\n"), (page, k, done.stderr[-2000:])


def test_the_quickstart_prints_the_tutorials_gradients(tmp_path):
    block = re.findall(r"```python\n(.*?)```", read("README.md"), re.S)[0]
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", block + "\nprint(value)"], env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "numpy=36.0>" in out and "numpy=10.0>" in out
    assert float(out.splitlines()[-1]) < 0.01              # the loop fitted w


def test_the_two_commands_are_the_ones_ci_runs():
    readme = read("README.md")
    demo = ("python -m venv .venv && . .venv/bin/activate && pip install -e '.[demo]' "
            "&& python -m jittape demo")
    tests = ("python -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
             "&& python -m pytest -q")
    assert demo in readme and tests in readme
    ci = read(os.path.join(".ci", "run"))
    assert "pip install -q -e '.[test]'" in ci and "python -m pytest -q" in ci
