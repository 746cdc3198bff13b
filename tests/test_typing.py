"""The public API is typed (``py.typed``): mypy finds no error in the public modules,
and a user's program checked with ``mypy --strict`` type-checks its calls of jittape:
the right ones pass, a wrong argument is found."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = ["jittape/compiler/compiled.py", "jittape/control.py", "jittape/tape.py",
          "jittape/custom.py", "jittape/codegen/runtime.py", "jittape/forward.py",
          "jittape/transforms.py", "jittape/optimize.py"]

pytest.importorskip("mypy")


def _mypy(tmp_path, *args):
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"),
                           "--follow-imports=silent", "--ignore-missing-imports", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    return proc.returncode, proc.stdout


def test_the_public_modules_type_check(tmp_path):
    code, out = _mypy(tmp_path, *PUBLIC)
    assert code == 0, out


USER = '''
import numpy as np
import jittape as jt


def loss(w: np.ndarray, x: np.ndarray) -> jt.Tensor:
    return jt.mean((x @ w - 1.0) ** 2)


grad = jt.grad(loss)
both = jt.value_and_grad(loss, argnums=(0, 1))
step = jt.function(lambda w: w * 2.0)


@jt.value_and_grad(argnums=0)
def decorated(w: np.ndarray) -> jt.Tensor:
    return jt.sum(w * w)


def body(h: jt.Tensor, x: jt.Tensor) -> tuple[jt.Tensor, None]:
    return jt.tanh(h + x), None


carry, ys = jt.scan(body, np.zeros(3), np.ones((4, 3)))
count = jt.fori_loop(0, 3, lambda i, c: c + 1, 0)
with jt.GradientTape(persistent=True) as tape:
    v = jt.Variable(2.0)
    y = v * v
g = tape.gradient(y, v)
seconds: float = jt.warmup(("float64",))
'''


def test_a_users_program_type_checks_and_a_wrong_call_is_found(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent(USER))
    code, out = _mypy(tmp_path, "--strict", str(good))
    assert code == 0, out
    wrong = ['wrong = jt.grad(loss, argnums="w")',
             "late = jt.fori_loop(0, 3.5, lambda i, c: c, 0)",
             'tape2 = jt.GradientTape(persistent="yes")']
    text = textwrap.dedent(USER) + "\n".join(wrong) + "\n"
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    line = {w: text.splitlines().index(w) + 1 for w in wrong}
    code, out = _mypy(tmp_path, "--strict", str(bad))
    assert code == 1 and out.count(": error:") == 3, out
    assert f'bad.py:{line[wrong[0]]}: error: No overload variant of "__call__"' in out, out
    assert (f'bad.py:{line[wrong[1]]}: error: Argument 2 to "fori_loop" has incompatible '
            'type "float"') in out, out
    assert f'bad.py:{line[wrong[2]]}: error: Argument "persistent" to "GradientTape"' in out, out
