"""The notebooks in ``notebooks/`` run from top to bottom and print what they say.

Each notebook is executed with nbclient in a fresh kernel that runs this interpreter
(``sys.executable``, through a kernel spec written to a temporary folder, so a Jupyter
kernel installed elsewhere is never picked up), with ``notebooks/`` as its working
directory, matplotlib's ``Agg`` backend and a private ``JITTAPE_CACHE_DIR``, so parallel
workers do not share compiled code. Any cell error or output on stderr fails the test;
then the outputs are checked against the numbers the notebook is about.
"""

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")
pytest.importorskip("ipykernel", reason="the test extra installs ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
CELL_TIMEOUT_S = 300        # a cold Numba compile on a loaded 2-core machine takes seconds
KERNEL_NAME = "jittape-test-python"


# -- running a notebook -----------------------------------------------------------------


def kernel_manager(tmp_path):
    """A kernel manager whose only kernel runs ``sys.executable`` with the test env."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = tmp_path / "kernels"
    (kernels / KERNEL_NAME).mkdir(parents=True)
    pythonpath = os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (jittape tests)",
        "language": "python",
        "env": {
            "MPLBACKEND": "Agg",
            "JITTAPE_CACHE_DIR": str(tmp_path / "jittape-cache"),
            "PYTHONPATH": pythonpath,
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",    # no debugger warning on stderr
        },
    }
    (kernels / KERNEL_NAME / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def execute(path, tmp_path):
    """Run the notebook at ``path``; return the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    km = kernel_manager(tmp_path)
    client = nbclient.NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT_S, startup_timeout=120, allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute(cleanup_kc=True)
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb


def outputs(nb, name="stdout"):
    """The notebook's text output: a stream's text and the plain text of cell results."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == name:
                parts.append(out.text)
            elif name == "stdout" and out.output_type in ("execute_result", "display_data"):
                parts.append(out.data.get("text/plain", "") + "\n")
    return "".join(parts)


# -- comparing printed numbers ----------------------------------------------------------

NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|-?inf")
VERBATIM = re.compile(r"(shape=\([^)]*\)|dtype=\w+|[\w/]+:\d+)")   # shapes, dtypes, names


def split_numbers(line):
    """(template, numbers) of a printed line: its text with '#' for each number, and the
    numbers; shapes, dtypes and variable names stay in the template verbatim."""
    line = line.replace("tf.", "jt.")
    template, numbers = [], []
    for i, part in enumerate(VERBATIM.split(line)):
        if i % 2:
            template.append(part)
        else:
            numbers += [float(x) for x in NUMBER.findall(part)]
            template.append(NUMBER.sub("#", part))
    # NumPy pads columns with spaces: whitespace is not compared
    return "".join("".join(template).split()), np.array(numbers)


def same_line(got, want):
    """``got`` prints what the tutorial's ``want`` printed, numbers to float32 rounding
    (TensorFlow sums in another order: a few ulps of the line's largest number)."""
    t_got, n_got = split_numbers(got)
    t_want, n_want = split_numbers(want)
    if t_got != t_want or n_got.shape != n_want.shape:
        return False
    scale = np.max(np.abs(n_want[np.isfinite(n_want)]), initial=0.0)
    return bool(np.allclose(n_got, n_want, rtol=3e-7, atol=4 * np.finfo(np.float32).eps * scale,
                            equal_nan=True))


def assert_printed(text, wanted):
    """Every line of ``wanted`` (the tutorial's output) is a line of ``text``."""
    lines = [line.strip() for line in text.splitlines()]
    missing = [w for w in wanted.strip().splitlines()
               if not any(same_line(line, w.strip()) for line in lines)]
    assert not missing, "not printed by the notebook:\n" + "\n".join(missing)


# -- what each notebook must print ------------------------------------------------------

# The seed tutorials' printed output (../shared/seeds), as TensorFlow printed it.
TUTORIAL_LINES = """
36.000003007075065
10.000000003174137
tf.Tensor(4.0, shape=(), dtype=float32)
tf.Tensor(12.0, shape=(), dtype=float32)
<tf.Variable 'w:0' shape=(4, 3) dtype=float32, numpy=
array([[-13.394766 ,  16.05925  ,   5.238968 ],
[ -2.6181564,  -8.322439 ,   5.700083 ],
[ 19.031418 ,  -2.5960197,   6.4040756],
[  4.195833 ,   5.4652596,   4.5779514]], dtype=float32)>
[+] tensor_dloss_dw:  tf.Tensor(
[[ 37.497673   9.658234  36.775444]
[ 74.995346  19.316467  73.55089 ]
[112.49302   28.9747   110.32633 ]
[149.99069   38.632935 147.10178 ]], shape=(4, 3), dtype=float32)
[+] tensor_dloss_db:  tf.Tensor([37.497673  9.658234 36.775444], shape=(3,), dtype=float32)
[+] tensor_dydloss_dx:  tf.Tensor([[-146.5997    25.82772  946.9131   392.71396]], shape=(1, 4), dtype=float32)
array([[-0.57740456, -0.572319  ],
[ 0.00795567,  0.5992962 ],
[ 0.24269533,  0.8154019 ]], dtype=float32)>, <tf.Variable 'dense_1/bias:0' shape=(2,) dtype=float32, numpy=array([0., 0.], dtype=float32)>]
array([[ 0.46956396, -0.71557474, -0.8732331 , -0.62160015],
[ 0.59634185,  0.40849257, -0.18213058,  0.02854967]],
dtype=float32)>, <tf.Variable 'dense_2/bias:0' shape=(4,) dtype=float32, numpy=array([0., 0., 0., 0.], dtype=float32)>]
[+] variable name, shape: dense_1/kernel:0, (3, 2)
[+] variable name, shape: dense_1/bias:0, (2,)
[+] variable name, shape: dense_2/kernel:0, (2, 4)
[+] variable name, shape: dense_2/bias:0, (4,)
[+] tensor_dres1_dx1:  tf.Tensor(24.0, shape=(), dtype=float32)
[+] tensor_dres1_dx2 None
[+] tensor_dres2_dx1:  None
[+] tensor_dres2_dx2 tf.Tensor(27.0, shape=(), dtype=float32)
[+] tensor_dres2_dx1_tmp:  None
[+] tensor_dres2_dx2_tmp:  None
"""

TUTORIAL_SNIPPETS = [
    "<jt.Tensor: shape=(), dtype=float32, numpy=36.0>",
    "<jt.Tensor: shape=(), dtype=float32, numpy=10.0>",
    "RuntimeError: A non-persistent GradientTape can only be used to compute one set of "
    "gradients (or jacobians)",
    "[None, None]",
    "[<jt.Tensor: shape=(), dtype=float32, numpy=30.0>, None]",
    "numpy=array([nan], dtype=float32)>",
    "[[6.0, 2.0], [2.0, None]]",
    "Case 1: [+] watched variables:  ['w:0', 'b:0', 'x:0']",
    "Case 2: [+] watched variables:  ['w:0', 'b:0', 'x:0']",
    "Case 3: [+] watched variables:  ['w:0', 'b:0', 'Variable:0']",
    "Case 4: [+] watched variables:  ['w:0', 'b:0']",
    "Case 5: [+] watched variables:  ['w:0', 'b:0']",
]

Y = "[+] tensor_y:  tf.Tensor([[56.246506 14.48735  55.163166]], shape=(1, 3), dtype=float32)"
LOSS = "[+] tensor_loss:  tf.Tensor(2138.8425, shape=(), dtype=float32)"
DY_DX = ("[+] tensor_dy_dx:  tf.Tensor([[ 7.903452 -5.240513 22.839474 14.239044]], "
         "shape=(1, 4), dtype=float32)")
DLOSS_DY = ("[+] tensor_dloss_dy:  tf.Tensor([[37.497673  9.658234 36.775444]], shape=(1, 3), "
            "dtype=float32)")
DLOSS_DX = ("[+] tensor_dloss_dx:  tf.Tensor([[-154.50319    31.068237  924.07367   378.47495 ]], "
            "shape=(1, 4), dtype=float32)")
CASE2 = ["[+] tensor_y:  tf.Tensor([[ -5 103 -64]], shape=(1, 3), dtype=int32)",
         "[+] tensor_loss:  tf.Tensor(4910, shape=(), dtype=int32)",
         "[+] tensor_dy_dx:  None", "[+] tensor_dloss_dy:  None", "[+] tensor_dloss_dx:  None"]
Y5 = "[+] tensor_y:  tf.Tensor([[63.46084  25.093401 77.08424 ]], shape=(1, 3), dtype=float32)"
LOSS5 = "[+] tensor_loss:  tf.Tensor(3532.9792, shape=(), dtype=float32)"
DLOSS_DY5 = ("[+] tensor_dloss_dy:  tf.Tensor([[42.307224 16.728935 51.389496]], shape=(1, 3), "
             "dtype=float32)")
DLOSS_DX5 = ("[+] tensor_dloss_dx:  tf.Tensor([[ -28.813324   42.9319   1090.8401    504.20065 ]], "
             "shape=(1, 4), dtype=float32)")
NO_DY_DX, NO_DLOSS_DX = "[+] tensor_dy_dx:  None", "[+] tensor_dloss_dx:  None"

# The tutorial's five cases of tensor_x, without tape.watch(tensor_x), then with it.
CASES = [
    [Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX],
    CASE2,
    [Y, LOSS, NO_DY_DX, DLOSS_DY, NO_DLOSS_DX],
    [Y, LOSS, NO_DY_DX, DLOSS_DY, NO_DLOSS_DX],
    [Y5, LOSS5, NO_DY_DX, DLOSS_DY5, NO_DLOSS_DX],
    [Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX],
    CASE2,
    [Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX],
    [Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX],
    [Y5, LOSS5, DY_DX, DLOSS_DY5, DLOSS_DX5],
]


def check_autodiff(text):
    for snippet in TUTORIAL_SNIPPETS:
        assert snippet in text, snippet
    assert_printed(text, TUTORIAL_LINES)
    blocks = re.findall(r"^Case (\d):\n((?:(?:\[\+\]|warning:).*\n)+)", text, flags=re.M)
    assert [int(case) for case, _ in blocks] == [1, 2, 3, 4, 5] * 2
    for (case, block), wanted in zip(blocks, CASES):
        got = [line for line in block.splitlines() if not line.startswith("warning:")]
        assert len(got) == len(wanted), (case, block)
        for g, w in zip(got, wanted):
            assert same_line(g, w), f"case {case}:\n  got  {g}\n  want {w}"
    # the integer tensor of case 2 is watched with a warning, as in TensorFlow
    assert "warning: The dtype of the watched tensor must be floating" in text
    # the plotted derivatives match their closed forms
    errors = [float(e) for e in re.findall(r"max \|tape - closed form\| = (\S+)", text)]
    assert len(errors) == 3 and max(errors) < 1e-5, errors
    assert "dres1/dx1 == 8*x1:    True" in text and "dres2/dx2 == 3*x2**2: True" in text


def check_compiled_optimisation(text):
    assert "graph loss(" in text and "def kernel(" in text, "the graph and the source are shown"
    first, last = map(float, re.search(r"loss: first (\S+), last (\S+)", text).groups())
    assert last < first / 5, (first, last)
    validation = float(re.search(r"validation (\S+)", text).group(1))
    assert validation > 0.9
    diffs = [float(d) for d in re.findall(r"max \|eager - compiled\| = (\S+)", text)]
    assert len(diffs) == 4 and max(diffs) < 1e-5, diffs
    infos = [tuple(map(int, m)) for m in
             re.findall(r"CacheInfo\(traces=(\d+), compiles=(\d+), hits=(\d+)", text)]
    assert len(infos) == 2, infos
    (traces, compiles, hits), (traces2, compiles2, hits2) = infos
    assert (traces, compiles, traces2, compiles2) == (1, 1, 1, 1), infos
    assert hits >= 600 and hits2 == hits + 1, infos   # another batch size is a hit


def check_benchmark(text):
    agree = [float(x) for x in re.findall(r"gradients agree with the tape to (\S+)", text)]
    assert len(agree) == 4 and max(agree) < 1e-5, agree
    rows = re.findall(r"^(.+?\))\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$",
                      text, flags=re.M)
    assert len(rows) == 4, text
    times = {name: np.array(row, dtype=float) for name, *row in rows}
    assert all(np.all(t > 0) for t in times.values())
    compile_s, eager, compiled, kernel, ratio = times["seed toy (2 scalars)"]
    assert kernel < eager, "the compiled kernel beats the eager tape on the seed toy"


CHECKS = {
    "01_autodiff_with_jittape": check_autodiff,
    "02_compiled_optimisation": check_compiled_optimisation,
    "03_benchmark_compiled_vs_eager": check_benchmark,
}


# -- the tests --------------------------------------------------------------------------


def test_the_notebooks_are_there():
    assert set(CHECKS) <= {p.stem for p in PATHS}


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name}: clear the outputs before committing"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs(path, tmp_path):
    nb = execute(path, tmp_path)
    # (what a first run on a machine says while jittape's helpers compile: whether a
    # notebook's kernel is the first to compile them depends on the order tests run in)
    errors = "".join(line for line in outputs(nb, "stderr").splitlines(keepends=True)
                     if not line.startswith(("jittape: compiling its runtime helpers",
                                             "jittape: runtime helpers")))
    assert errors == "", f"{path.name} wrote to stderr:\n{errors}"
    check = CHECKS.get(path.stem)
    if check is not None:
        check(outputs(nb))
