"""The CUDA target: every registry op and corpus loss (each must lower), jacobians and
hessians, device arrays, buffers kept per signature, the disk cache and the errors.

Without a GPU these run in Numba's CUDA simulator (``conftest.py`` sets
``NUMBA_ENABLE_CUDASIM=1`` unless it is set); on a machine with a GPU, run them there with
``NUMBA_ENABLE_CUDASIM=0 python -m pytest tests/test_cuda.py``.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jittape as jt
from jittape.codegen import cuda_runtime
from corpus import CASES
from test_jit_corpus import NAMES, check_compiled
from test_ops import _close, _eager, _op_program, all_ops
import test_loops as loops

pytestmark = [pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning"),
              pytest.mark.usefixtures("cache_dir")]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMULATOR = cuda_runtime.simulator()


# ops that run on CUDA whose gradient needs a CPU-only op (docs/api.md says so)
GRADIENT_ON_THE_CPU = {"gammaln": "digamma", "gamma": "digamma", "beta": "digamma",
                       "betaln": "digamma", "multigammaln": "digamma", "erfcinv": "ndtri"}


@pytest.mark.parametrize("name", sorted(all_ops()))
def test_op_on_cuda_matches_the_eager_tape(name):
    loss, arrays, argnums = _op_program(name)
    record = all_ops()[name]        # (a composite says its backends on its function)
    backends = (getattr(record, "backends", None)
                or getattr(getattr(record, "fn", None), "backends", None) or ("cuda",))
    cpu_only = name if "cuda" not in backends else GRADIENT_ON_THE_CPU.get(name)
    if cpu_only:                     # CPU-only (np.linalg, digamma): CUDA says which op,
        # or, for np.fft's, that its complex values are refused there (naming the op)
        match = f"target='cuda': {cpu_only} |complex values .* not supported with target='cuda'"
        with pytest.raises(jt.UnsupportedError, match=match):
            if argnums:
                jt.value_and_grad(loss, argnums=argnums, has_aux=True, target="cuda")(*arrays)
            else:
                jt.value_and_grad(lambda s, *a: loss(*a)[0] + s, argnums=0, target="cuda")(
                    np.float64(0.0), *arrays)
        return
    parts, grads = _eager(loss, arrays, argnums)
    if not argnums:                          # no floating input (e.g. only index arrays)
        f = jt.value_and_grad(lambda s, *a: loss(*a)[0] + s, argnums=0, target="cuda")
        value, _ = f(np.float64(0.0), *arrays)
        _close(value, parts[0] + parts[1], np.float32, name)
        return
    f = jt.value_and_grad(loss, argnums=argnums, has_aux=True, target="cuda")
    (_, got_parts), got_grads = f(*arrays)
    _close(got_parts[0], parts[0], np.float64, f"{name} float64 value")
    _close(got_parts[1], parts[1], np.float32, f"{name} float32 value")
    _close(got_parts[2], parts[2], np.float64, f"{name} float64 tangent")
    _close(got_parts[3], parts[3], np.float32, f"{name} float32 tangent")
    for k, g, want in zip(argnums, got_grads, grads):
        want = np.zeros_like(arrays[k]) if want is None else want
        assert np.shape(g) == arrays[k].shape and np.asarray(g).dtype == arrays[k].dtype, (name, k)
        _close(g, want, arrays[k].dtype, f"{name} gradient {k}")


@pytest.mark.parametrize("case", CASES, ids=NAMES)
def test_corpus_on_cuda_matches_the_eager_tape(case):
    check_compiled(case, "cuda")


def logistic(w, b, x, y):
    z = x @ w + b
    return jt.mean(jt.softplus(z) - y * z)


def logistic_data(n=40, d=5, dtype=np.float32):
    rng = np.random.default_rng(n)
    return (rng.normal(size=d).astype(dtype), dtype(0.1),
            rng.normal(size=(n, d)).astype(dtype), (rng.random(n) > 0.5).astype(dtype))


def test_device_arrays_are_used_without_a_copy_and_results_stay_on_the_device():
    from numba import cuda
    w, b, x, y = logistic_data()
    f = jt.value_and_grad(logistic, argnums=(0, 1), target="cuda")
    want_value, (want_w, want_b) = f(w, b, x, y)
    dw, dx, dy = (cuda.to_device(a) for a in (w, x, y))
    value, (gw, gb) = f(dw, b, dx, dy)
    for result in (value, gw, gb):             # scalars too: reading one would wait
        assert cuda_runtime.is_device_array(result) and not isinstance(result, np.ndarray)
    assert value.shape == () and gb.shape == () and gw.shape == w.shape
    np.testing.assert_allclose(cuda_runtime.copy_to_host(gw), want_w, rtol=1e-6)
    assert cuda_runtime.copy_to_host(value) == want_value
    assert cuda_runtime.copy_to_host(gb) == want_b
    assert f.cache_info().traces == 2          # device and host arguments: two signatures


def test_device_results_belong_to_the_caller_and_dropped_ones_are_reused(monkeypatch):
    from numba import cuda
    w, b, x, y = logistic_data()
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    f = jt.value_and_grad(logistic, target="cuda")
    _, g1 = f(cuda.to_device(w), b, dx, dy)
    first = cuda_runtime.copy_to_host(g1)
    _, g2 = f(cuda.to_device(2 * w), b, dx, dy)      # g1 is held: g2 is another array
    np.testing.assert_array_equal(cuda_runtime.copy_to_host(g1), first)
    assert not np.allclose(cuda_runtime.copy_to_host(g2), first)
    head = g2[:2]                                    # a view keeps g2's memory
    second = cuda_runtime.copy_to_host(head)
    del g1, g2
    for _ in range(2):
        f(cuda.to_device(3 * w), b, dx, dy)
    np.testing.assert_array_equal(cuda_runtime.copy_to_host(head), second)
    del head
    dw = cuda.to_device(w)
    for _ in range(2):                               # the loop's steady state
        value, g = f(dw, b, dx, dy)
    made = []
    real = cuda_runtime.cuda.device_array
    monkeypatch.setattr(cuda_runtime.cuda, "device_array",
                        lambda *a, **k: made.append(a) or real(*a, **k))
    for _ in range(3):                               # last step's results are dropped
        value, g = f(dw, b, dx, dy)
    assert made == []
    np.testing.assert_allclose(cuda_runtime.copy_to_host(g), first, rtol=1e-6)


def test_an_optimisation_loop_allocates_no_device_memory_per_step(monkeypatch):
    w, b, x, y = logistic_data()
    f = jt.value_and_grad(logistic, argnums=(0, 1), target="cuda")
    f(w, b, x, y)
    made = []
    real = cuda_runtime.cuda.device_array
    monkeypatch.setattr(cuda_runtime.cuda, "device_array",
                        lambda *a, **k: made.append(a) or real(*a, **k))
    for _ in range(3):
        value, (gw, gb) = f(w, b, x, y)
        w = w - 0.1 * gw
    assert made == []
    f(w, b, x[:20], y[:20])                    # new sizes: their buffers, once
    assert made
    count = len(made)
    f(w, b, x[:20], y[:20])
    assert len(made) == count


def test_a_training_step_with_variables_on_cuda():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32)
    w_cpu = jt.Variable(np.zeros(3, np.float32))
    w_gpu = jt.Variable(np.zeros(3, np.float32))

    def make_step(w, target):
        @jt.function(target=target)
        def step(x, y):
            with jt.GradientTape() as tape:
                loss = jt.reduce_mean((x @ w - y) ** 2)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss
        return step

    cpu, gpu = make_step(w_cpu, "cpu"), make_step(w_gpu, "cuda")
    for _ in range(5):
        np.testing.assert_allclose(gpu(x, y), cpu(x, y), rtol=1e-5)
    np.testing.assert_allclose(w_gpu.numpy(), w_cpu.numpy(), rtol=1e-5)


def test_the_generated_cuda_module_is_readable():
    w, b, x, y = logistic_data()
    source = jt.value_and_grad(logistic, target="cuda").lower(w, b, x, y).source
    assert "@cuda.jit" in source and "def driver(" in source
    assert "BUFFERS.get(sizes" in source          # buffers made once per sizes
    assert "cuda.shared.array" in source          # the block reduction
    assert "matmul2d(" in source


PROBE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import numpy as np
    import jittape as jt
    def loss(w, x):
        return jt.sum(jt.tanh(x @ w) ** 2)
    f = jt.grad(loss, target="cuda")
    g = f(np.ones(3, np.float32), np.ones((4, 3), np.float32))
    info = f.cache_info()
    print(info.compiles, info.disk_hits, float(g.sum()))
""")


def test_the_disk_cache_serves_a_new_process(cache_dir):
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(cache_dir))
    runs = [subprocess.run([sys.executable, "-c", PROBE.format(root=ROOT)], env=env,
                           capture_output=True, text=True, timeout=600) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (r.stdout.split() for r in runs)
    assert first[:2] == ["1", "0"] and second[:2] == ["0", "1"]
    assert first[2] == second[2]


def test_no_gpu_and_no_simulator_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cuda_runtime.cuda, "is_available", lambda: False)
    with pytest.raises(jt.JittapeError, match=r"NVIDIA GPU.*pip install numba-cuda.*NUMBA_ENABLE_CUDASIM=1"):
        jt.grad(logistic, target="cuda")


def test_jacobian_and_hessian_on_cuda_match_the_cpu():
    x = np.array([0.5, -1.0, 2.0])

    def f(x):
        return jt.tanh(x) * jt.sum(x ** 2)

    def g(x, y):
        return jt.sum(jt.sin(x) * x[0] * y)

    np.testing.assert_allclose(jt.jacobian(f, target="cuda")(x), jt.jacobian(f)(x), rtol=1e-12)
    for got, want in zip(jt.hessian(g, argnums=(0, 1), target="cuda")(x, x[::-1].copy()),
                         jt.hessian(g, argnums=(0, 1))(x, x[::-1].copy())):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_check_numerics_on_cuda_is_a_clear_error():
    jt.config.check_numerics = True
    try:
        with pytest.raises(jt.UnsupportedError, match=r"target='cuda': .*check_numerics.*cpu"):
            jt.grad(lambda x: jt.sum(x * x), target="cuda")(np.ones(3))
    finally:
        jt.config.check_numerics = False


def test_partial_reductions_with_no_output_elements_on_cuda():
    f = jt.function(lambda x: (jt.sum(x * 2, axis=1), jt.sum(x, axis=0)), target="cuda")
    rows, cols = f(np.zeros((0, 5), np.float32))
    assert rows.shape == (0,) and cols.shape == (5,) and np.all(cols == 0)
    source = f.lower(np.zeros((0, 5), np.float32)).source
    assert "max(1, min(n, MAX_BLOCKS))" in source     # never a grid of no blocks


_LOOP_RNG = np.random.default_rng(4)
W_LOOP = _LOOP_RNG.normal(size=(3, 3)) * 0.5
XS_LOOP = _LOOP_RNG.normal(size=(5, 2, 3))
H0_LOOP = _LOOP_RNG.normal(size=(2, 3))


def _newton_sqrt(a):
    x, _ = jt.while_loop(lambda c: jt.abs(c[0] * c[0] - a) > 1e-12 * a,
                         lambda c: (0.5 * (c[0] + a / c[0]), c[1] + 1), (a * 0 + 1.0, 0))
    return x


def _mixed(w, xs, h0):
    h, ys = jt.scan(lambda h, x: (jt.tanh(h @ w + x), jt.sum(h)), h0, xs)
    h = jt.fori_loop(0, 3, lambda i, h: jt.sin(h) * 0.9, h)
    h, _ = jt.while_loop(lambda c: c[1] < 2, lambda c: (c[0] * 1.1, c[1] + 1), (h, 0))
    return jt.sum(h * h) + jt.sum(ys)


@pytest.mark.parametrize("loss, args", [
    (_mixed, (W_LOOP, XS_LOOP, H0_LOOP)),
    (loops._pytree_reverse, (W_LOOP, XS_LOOP, H0_LOOP)),
    (loops._fori, (W_LOOP, loops.XS, H0_LOOP)),
    (loops._int_carry, (W_LOOP, H0_LOOP)),
    (loops._nested, (W_LOOP, XS_LOOP[:3], H0_LOOP)),
    (loops._checkpointed(3, True), (W_LOOP, loops.XS, H0_LOOP)),
    (loops._branchy, (W_LOOP, XS_LOOP, H0_LOOP)),
    (loops._damped, (W_LOOP * 0.6, H0_LOOP)),
    (lambda a: _newton_sqrt(a * a) + 0.0, (np.float64(3.0),)),
], ids=["mixed", "pytree-reverse", "fori", "int-carry", "nested", "checkpointed", "cond-switch",
        "while-data", "newton"])
def test_loops_on_cuda_are_loops_and_match_the_cpu(loss, args):
    """On the CUDA target a scan, fori_loop, while_loop or cond is a region, as on the
    CPU: the driver runs its steps, launching the body's kernels (one set of kernels
    whatever the trip count), with the CPU's values and gradients."""
    argnums = tuple(range(len(args)))
    cpu = jt.value_and_grad(loss, argnums=argnums)(*args)
    f = jt.value_and_grad(loss, argnums=argnums, target="cuda")
    assert any(n.prim.kind == "loop" for n in f.lower(*args).ir.all_nodes())
    gpu = f(*args)
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-10)
    for a, b in zip(gpu[1], cpu[1]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_a_cuda_while_loop_of_another_trip_count_is_the_same_kernel():
    """The trip count is read on the host at each call (not fixed when traced)."""
    f = jt.grad(_newton_sqrt, target="cuda")
    for a in (2.0, 50.0, 1e6):
        np.testing.assert_allclose(f(np.float64(a)), 0.5 / np.sqrt(a), rtol=1e-8)
    assert f.cache_info().traces == 1
    source = f.lower(np.float64(2.0)).source
    assert "while True:" in source and "host_value(" in source


def test_a_cuda_scan_compiles_its_body_once_whatever_its_length():
    def rnn(w, xs, h0):
        h, _ = jt.scan(lambda h, x: (jt.tanh(h @ w + x), None), h0, xs)
        return jt.sum(h * h)

    kernels = []
    for n in (4, 40):
        xs = np.resize(XS_LOOP, (n, 2, 3))
        f = jt.value_and_grad(rnn, argnums=(0, 2), target="cuda")
        kernels.append(f.lower(W_LOOP, xs, H0_LOOP).source.count("@cuda.jit"))
        got = f(W_LOOP, xs, H0_LOOP)
        want = jt.value_and_grad(rnn, argnums=(0, 2))(W_LOOP, xs, H0_LOOP)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert kernels[0] == kernels[1]


def test_an_index_computed_on_the_device_reads_its_value():
    """A rank-0 index computed by a kernel is a one-element device array: the gather
    reads its element (a regression: it compared the array itself with the bounds)."""
    x, y = np.arange(12.0).reshape(4, 3), np.array([1.0, 0.0, 2.0, 0.0])
    f = lambda x, y: jt.sum(x[jt.cast(jt.sum(y), jt.int64)])   # noqa: E731
    assert float(jt.function(f, target="cuda")(x, y)) == float(jt.function(f)(x, y)) == 30.0


@pytest.mark.parametrize("f", [
    lambda a: jt.cond(jt.sum(a) > 0, lambda a: True, lambda a: jt.sum(a) < -5, a),
    lambda a: jt.cond(jt.sum(a) > 0, lambda a: jt.sum(a), lambda a: 2.0, a),
    lambda a: jt.cond(jt.sum(a) > 0, lambda s: s * 2.0, lambda s: s * 3.0, jt.sum(a)),
    lambda a: jt.cond(jt.sum(a) < 0, lambda s: s, lambda s: -s, np.float64(1.5)),
], ids=["bool-literal", "float-literal", "device-scalar-operand", "host-scalar-operand"])
def test_cuda_branches_of_scalars_match_the_cpu(f):
    """Regressions: a branch's rank-0 result that is a host value was copied after the
    if/else (the last branch's always won, or the driver did not parse), and a rank-0
    operand computed on the device was read in the branch as a host scalar."""
    x = np.array([0.5, -1.0, -2.0])
    assert float(jt.function(f, target="cuda")(x)) == float(jt.function(f)(x))


def test_a_cuda_branch_returning_its_operand_owns_its_result():
    """Regression: the branch aliased its operand, whose buffer the plan then gave to a
    later value (a wrong result, no error)."""
    def f(a):
        t1, t2 = jt.exp(a), jt.cos(a)
        r = jt.cond(jt.sum(a) > 0, lambda t1, t2: t1, lambda t1, t2: t1 * t2, t1, t2)
        y = jt.sin(a)
        return r + y * jt.sum(y * y)

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(jt.function(f, target="cuda")(x), jt.function(f)(x), rtol=1e-12)
    g = lambda a: jt.sum(jt.cond(jt.sum(a) > 0, lambda s: jt.sum(s * s), lambda s: jt.sum(jt.sin(s)), a)  # noqa: E731
                         * a)
    np.testing.assert_allclose(jt.grad(g, target="cuda")(x), jt.grad(g)(x), rtol=1e-12)


def test_scalar_results_of_loops_stay_on_the_device_for_device_arguments():
    from numba import cuda
    f = jt.value_and_grad(lambda s, xs: jt.scan(lambda c, e: (c * e, None), s, xs)[0],
                          argnums=(0, 1), target="cuda")
    xs = np.array([0.5, -1.0, 2.0])
    value, (gs, gx) = f(np.float64(1.5), cuda.to_device(xs))
    assert all(cuda_runtime.is_device_array(r) for r in (value, gs, gx))
    assert value.shape == gs.shape == ()
    np.testing.assert_allclose(cuda_runtime.copy_to_host(gx), [-3.0, 1.5, -0.75])
    assert float(cuda_runtime.copy_to_host(value)) == -1.5
