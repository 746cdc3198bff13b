"""Large graphs compiled in parts (codegen/cpu.py ``PART_NODES``): each part its own
Numba function, called in turn by Python; the same numbers and errors as one kernel
through every way of calling, the disk cache, tiered calls and other layouts."""

import numpy as np
import pytest

import jittape as jt
from jittape.codegen import build, cpu
from test_packing import _close, _eager

pytestmark = pytest.mark.usefixtures("cache_dir")
RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    monkeypatch.setattr(cpu, "PART_NODES", 12)


def _layers(widths):
    return [(RNG.normal(size=(a, b)) * 0.5, RNG.normal(size=b) * 0.1)
            for a, b in zip(widths, widths[1:])]


def _uneven(layers, x):         # layers of other widths: nothing rolls, one long graph
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return np.mean(x * x)


def test_a_long_graph_runs_in_parts_with_the_eager_gradients():
    layers, x = _layers([3, 4, 5, 6, 7, 5, 4]), RNG.normal(size=(2, 3))
    f = jt.value_and_grad(_uneven)
    lowered = f.lower(layers, x)
    assert "PARTS = ('part0', 'part1'," in lowered.source
    assert lowered.source.count("\ndef part") >= 3
    want = _eager(_uneven, (layers, x))
    _close(f(layers, x), want)                  # the full path: compiles the parts
    _close(f(layers, x), want)                  # the fast path
    flat = [a for pair in layers for a in pair] + [x]
    for run in (lowered.python, lowered.numpy, f.kernel(layers, x)):
        out = run(*flat)
        _close((out[0], list(out[1:])), want)
    assert f.cache_info().compiles == 1


def test_parts_load_from_the_disk_in_a_new_process(monkeypatch):
    layers, x = _layers([2, 3, 4, 5, 4, 3]), RNG.normal(size=(4, 2))
    f = jt.value_and_grad(_uneven)
    first = f(layers, x)
    monkeypatch.setattr(build, "_TABLE", {})              # as a new process
    f.cache_clear()
    _close(f(layers, x), first)
    info = f.cache_info()
    assert (info.compiles, info.disk_hits) == (1, 1)


def test_loops_packing_writes_and_guards_across_parts():
    deep = [(RNG.normal(size=(4, 4)) * 0.4, RNG.normal(size=4) * 0.1) for _ in range(6)]
    head = RNG.normal(size=(4, 3)) * 0.5
    v = jt.Variable(np.zeros(3))

    @jt.function
    def step(deep, head, x):
        with jt.GradientTape() as tape:
            tape.watch(head)
            h = x
            for w, b in deep:               # rolled: a scan over the stacked weights
                h = np.tanh(h @ w + b)
            out = np.sin(h @ head) * 2.0 + np.cos(h @ head)
            loss = np.sum(out * out) + np.sum(v * v)
        g = tape.gradient(loss, head)
        if np.sum(g) > 0:                   # a guard
            v.assign_add(np.sum(g, axis=0))
        else:
            v.assign_sub(np.sum(g, axis=0))
        return loss
    x = RNG.normal(size=(5, 4))
    assert "PARTS" in step.lower(deep, head, x).source
    v.assign(np.zeros(3))
    got = [float(step(deep, head, x)) for _ in range(3)]
    got_v = v.numpy()
    jt.config.roll_loops = False                # (another signature, in one kernel)
    try:
        v.assign(np.zeros(3))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cpu, "PART_NODES", 10 ** 6)
            want = [float(step(deep, head, x)) for _ in range(3)]
    finally:
        jt.config.roll_loops = True
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got_v, v.numpy(), rtol=1e-12)


def test_other_layouts_and_dtypes_in_parts():
    layers, x = _layers([3, 4, 5, 6, 5, 4]), RNG.normal(size=(3, 2)).T.copy()
    f = jt.value_and_grad(_uneven)
    _close(f(layers, x), _eager(_uneven, (layers, x)))
    strided = np.asfortranarray(x)              # another layout: the parts compile it
    _close(f(layers, strided), _eager(_uneven, (layers, strided)))
    single = [(w.astype(np.float32), b.astype(np.float32)) for w, b in layers]
    got = f(single, x.astype(np.float32))       # float32: its own signature
    assert got[1][0][0].dtype == np.float32
    _close(got, _eager(_uneven, (single, x.astype(np.float32))), rtol=1e-4)


def test_an_error_in_a_later_part_names_its_line():
    layers, x = _layers([3, 4, 5, 6, 5, 4]), RNG.normal(size=(2, 3))

    def picks(layers, x, i):
        return _uneven(layers, x) + jt.sum(jt.gather(layers[-1][1], i))
    f = jt.value_and_grad(picks)
    f(layers, x, np.array([0, 3]))
    for _ in range(2):                            # the full path, then the fast path
        with pytest.raises(IndexError, match=r"index 9 is out of bounds .*test_parts\.py:"):
            f(layers, x, np.array([0, 9]))


def test_tiered_calls_then_the_parts(monkeypatch):
    monkeypatch.setattr(jt.config, "tiered", True)
    layers, x = _layers([3, 5, 4, 6, 3, 2]), RNG.normal(size=(2, 3))
    f = jt.value_and_grad(_uneven)
    first = f(layers, x)                          # on NumPy; the parts compile meanwhile
    build.wait(f._entry_for((layers, x)).built)
    _close(f(layers, x), first, rtol=1e-10)
    info = f.cache_info()
    assert info.python_calls == 1 and info.compiles == 1


def test_a_float32_scalar_stays_float32_from_part_to_part(monkeypatch):
    """A 0-d value passed between parts keeps its type (a regression: Python received a
    float32 scalar as a float, and the next part computed in float64)."""
    monkeypatch.setattr(cpu, "PART_NODES", 1)

    def cancel(x):
        s = np.sum(x)                                     # float32: 1.0
        return (s + np.float32(1e8)) - np.float32(1e8)    # float32 rounds it away: 0.0
    f = jt.function(cancel)
    x = np.array([0.25, 0.75, 0.0], np.float32)
    assert "np.float32(" in f.lower(x).source and "PARTS" in f.lower(x).source
    got = f(x)
    assert got.dtype == np.float32 and got == cancel(x) == np.float32(0.0)


def test_kernel_of_a_kernel_in_parts_compiles_into_dispatchers_of_its_own():
    """``kernel()`` called with other dtypes compiles its own parts: the compiled
    function's float32 call still takes a float32 variant (a regression: it came back
    float64 from the float64 kernel's parts)."""
    def g(x):
        s = jt.sum(jt.sin(x) * 2.0)
        return jt.sum(jt.exp(x * s)) / 3.0 + jt.sum(jt.cos(x) ** 2) * jt.sum(x)
    x = np.array([0.25, 0.75, 0.5])
    f = jt.value_and_grad(g)
    f(x)
    assert "PARTS" in f.lower(x).source
    f.kernel(x)(x.astype(np.float32))
    value, grad = f(x.astype(np.float32))
    assert value.dtype == np.float32 and grad.dtype == np.float32
    assert f.cache_info().traces == 2
