"""Large graphs compiled in parts (codegen/cpu.py ``PART_NODES``): each part its own
Numba function, called in turn by Python; the same numbers and errors as one kernel
through every way of calling, the disk cache, tiered calls and other layouts."""

import numpy as np
import pytest

import jittape as jt
from jittape.compiler import cache
from jittape.codegen import build, cpu
from jittape import schedule
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
    assert "PARTS = ('part_" in lowered.source
    assert lowered.source.count("\ndef part_") >= 3
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
    _close(got, _eager(_uneven, (single, x.astype(np.float32))), rtol=1e-4, atol=1e-6)


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
    monkeypatch.setattr(cache, "_one_core", lambda: False)   # (the compile starts at once)
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


def _part_calls(source):
    """{part name: calls} of a generated module in parts."""
    import re
    defined = re.findall(r"^def (part_\w+)\(", source, re.M)
    return {name: source.count(f"{name}(") - 1 for name in defined}


def test_repeated_layers_are_one_part_called_again():
    """Layers of other widths generate the same code: the graph is cut at its repeats,
    and each distinct part is defined (and compiled) once, called for each run."""
    layers, x = _layers([3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3, 2, 3, 4]), RNG.normal(size=(2, 3))
    f = jt.value_and_grad(_uneven)
    calls = _part_calls(f.lower(layers, x).source)
    assert max(calls.values()) >= 3 and sum(calls.values()) > len(calls)
    _close(f(layers, x), _eager(_uneven, (layers, x)))


def _abs_head(layers, x):
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return np.sum(np.abs(x)) * 0.5


def test_another_model_made_of_the_same_layers_shares_their_parts(monkeypatch):
    """Parts are kernels of their own, keyed by their code: a model with another head
    and more layers finds the first model's layer parts built (in the process, and on
    disk in a new one) and compiles only its own."""
    layers, x = _layers([3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3]), RNG.normal(size=(2, 3))
    deeper = layers + _layers([3, 5, 4, 3])
    first, second = jt.value_and_grad(_uneven), jt.value_and_grad(_abs_head)
    first(layers, x)
    shared = set(_part_calls(first.lower(layers, x).source))
    shared &= set(_part_calls(second.lower(deeper, x).source))
    assert len(shared) >= 2
    _close(second(deeper, x), _eager(_abs_head, (deeper, x)))
    mine = first._entry_for((layers, x)).built.kernel.parts
    theirs = second._entry_for((deeper, x)).built.kernel.parts
    assert all(mine[name] is theirs[name] for name in shared)
    monkeypatch.setattr(build, "_TABLE", {})              # as a new process
    second.cache_clear()
    _close(second(deeper, x), _eager(_abs_head, (deeper, x)))


def test_errors_in_a_repeated_part_are_the_kernels_own():
    """A part's raises are numbered in the part; its calls map them to the kernel's
    messages: an index error in a later one of a run of layers names the op and line."""
    layers, x = _layers([3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3]), RNG.normal(size=(2, 3))

    def picking(layers, x, picks):
        for (w, b), i in zip(layers, picks):
            x = np.tanh(x @ w + jt.gather(b, i))
        return np.sum(x * x)
    f = jt.value_and_grad(picking)
    picks = [np.arange(len(b))[::-1].copy() for _, b in layers]
    want = _eager(lambda layers, x: picking(layers, x, picks), (layers, x))
    _close(f(layers, x, picks), want)
    calls = _part_calls(f.lower(layers, x, picks).source)
    assert max(calls.values()) >= 2 and "renumbered(err, (" in f.lower(layers, x, picks).source
    bad = [p.copy() for p in picks]
    bad[6][1] = 9
    for _ in range(2):                            # the full path, then the fast path
        with pytest.raises(IndexError, match=r"index 9 is out of bounds .*test_parts\.py:"):
            f(layers, x, bad)


class _Prim:
    regions = ()

    def __init__(self, name):
        self.name = name


class _Out:
    def __init__(self, k):
        self.id, self.dtype, self.ndim = k, np.dtype(np.float64), 2


class _Node:
    """What ``schedule.chunks`` reads of a node: its op, parameters, result and operands."""

    def __init__(self, k, op):
        self.prim, self.params, self.out, self.inputs = _Prim(op), {}, _Out(k), []


@pytest.mark.parametrize("seed", range(6))
def test_chunks_cover_the_nodes_in_order_and_cut_repeats_alike(seed):
    """``schedule.chunks`` on op sequences with a repeated run between other ops: every node
    once, in order, no chunk over PART_NODES, and the run's chunks (after a prefix of
    any length) cut at the same phase, so that they are equal op for op."""
    rng = np.random.default_rng(seed)
    period = [f"op{k}" for k in rng.integers(0, 4, size=int(rng.integers(3, 7)))]
    runs = []
    for prefix_length in (int(rng.integers(0, 9)), int(rng.integers(0, 9))):
        ops = [f"pre{k}" for k in rng.integers(0, 6, size=prefix_length)]
        ops += period * 12 + [f"post{k}" for k in rng.integers(0, 6, size=5)]
        nodes = [_Node(k, op) for k, op in enumerate(ops)]
        chunks = schedule.chunks(nodes, cpu.PART_NODES)
        assert [n for c in chunks for n in c] == nodes
        assert all(len(c) <= cpu.PART_NODES for c in chunks)
        runs.append({tuple(n.prim.name for n in c) for c in chunks
                     if len(c) >= len(period) and all(n.prim.name.startswith("op") for n in c)})
    assert runs[0] and runs[0] & runs[1]


def _cell(W, U, xs):
    def step(h, x):
        a = np.tanh(h @ W + x @ U)
        b = np.sin(a) * np.cos(a) + a * a
        c = np.exp(-b * b) + np.tanh(b @ W)
        return c * 0.5 + h * 0.5, np.sum(c)
    h, ys = jt.scan(step, np.zeros((4, 5)), xs)
    return np.sum(h * h) + np.sum(ys)


def _cell_args():
    return (RNG.normal(size=(5, 5)) * 0.3, RNG.normal(size=(3, 5)) * 0.3,
            RNG.normal(size=(7, 4, 3)))


def test_a_large_loop_body_is_compiled_in_pieces(monkeypatch):
    """A loop body of more than PART_NODES nodes (forward and backward) is cut into
    functions that Numba compiles on their own (``SUBFUNCTIONS``) and the loop calls:
    the eager gradients through every way of calling, and from the disk cache."""
    monkeypatch.setattr(schedule, "SMALL_BODY", 0)   # (its arrays are small: see below)
    args = _cell_args()
    f = jt.value_and_grad(_cell, argnums=(0, 1))
    lowered = f.lower(*args)
    assert lowered.source.count("\ndef body_") >= 3 and "SUBFUNCTIONS = (" in lowered.source
    want = _eager(_cell, args, argnums=(0, 1))
    _close(f(*args), want)
    _close(f(*args), want)
    for run in (lowered.python, lowered.numpy, f.kernel(*args)):
        out = run(*args)
        _close((out[0], list(out[1:])), want)
    monkeypatch.setattr(build, "_TABLE", {})              # as a new process
    f.cache_clear()
    _close(f(*args), want)
    info = f.cache_info()
    assert (info.compiles, info.disk_hits) == (1, 1)


def _long_step(x):
    for k in range(8):
        x = np.tanh(x * 0.9 + 0.1 * k) + np.sin(x) * 0.05
    return x


def test_a_loop_whose_body_is_in_pieces_weighs_its_calls_in_the_function_around_it(
        monkeypatch):
    """The function around a loop only calls its body's pieces: it is one compiled
    kernel, not Python calling parts (about 20 us a call before the loop's first step)."""
    monkeypatch.setattr(cpu, "PART_NODES", 30)     # (a body of about 50 nodes: 2 pieces)
    monkeypatch.setattr(schedule, "SMALL_BODY", 0)
    @jt.function
    def f(x):
        return jt.while_loop(lambda c: c[1] < 5, lambda c: (_long_step(c[0]), c[1] + 1),
                             (x, 0))[0]
    x = np.linspace(-1.0, 1.0, 7)
    source = f.lower(x).source
    assert "SUBFUNCTIONS = (" in source and "PARTS = (" not in source
    assert hasattr(f.kernel(x), "py_func")                  # a Numba dispatcher
    want = x
    for _ in range(5):
        want = _long_step(want)
    np.testing.assert_allclose(f(x), want, rtol=1e-14)


def test_a_body_over_small_arrays_takes_more_nodes_before_its_pieces(monkeypatch):
    """Where each array of a loop body was small when traced, the body (and the function
    around it) is one function up to SMALL_BODY_FACTOR times PART_NODES nodes: its
    steps are short, and a call of a piece costs a reference count up and down for each
    array it is handed."""
    monkeypatch.setattr(cpu, "PART_NODES", 30)     # (a body of about 50 nodes)

    def run(x):
        return jt.while_loop(lambda c: c[1] < 5, lambda c: (_long_step(c[0]), c[1] + 1),
                             (x, 0))[0]
    for n, pieces in ((7, False), (schedule.SMALL_BODY + 1, True)):
        f = jt.function(run)
        f.cache_clear()
        x = np.linspace(-1.0, 1.0, n)
        source = f.lower(x).source
        assert ("SUBFUNCTIONS = (" in source) is pieces, n
        assert "PARTS = (" not in source                # the function around: one kernel
        want = x
        for _ in range(5):
            want = _long_step(want)
        np.testing.assert_allclose(f(x), want, rtol=1e-14)


def test_a_while_loop_and_a_cond_with_large_bodies():
    def newton(a, x0):
        def cond(c):
            x, k = c
            return (k < 6) & (np.abs(x * x * x + np.sin(x) * a - a) > 1e-12)

        def body(c):
            x, k = c
            f = x * x * x + np.sin(x) * a - a + np.tanh(x) * 0.0
            df = 3.0 * x * x + np.cos(x) * a + np.exp(-x * x) * 0.0
            return x - f / df, k + 1
        x, _ = jt.while_loop(cond, body, (x0, 0))
        big = jt.cond(x > 0, lambda v: np.sin(v) * np.cos(v) + np.exp(-v) * v * v + np.tanh(v),
                      lambda v: np.cos(v) * 2.0 - v, x)
        return big * a
    f = jt.grad(newton, argnums=0)
    a = np.float64(1.3)
    assert "SUBFUNCTIONS = (" in f.lower(a, np.float64(0.8)).source
    got = f(a, np.float64(0.8))
    step = 1e-6
    want = (newton(a + step, np.float64(0.8)) - newton(a - step, np.float64(0.8))) / (2 * step)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_error_at_the_first_call_of_a_kernel_in_parts_is_the_users():
    """The first run stops in a part: the parts after it compiled nothing, and the
    error is the user's, not Numba's (a regression: an empty AssertionError from
    disabling the compile of a part without signatures)."""
    layers, x = _layers([3, 4, 5, 6, 5, 4]), RNG.normal(size=(2, 3))

    def picks(layers, x, i):
        return _uneven(layers, x) + jt.sum(jt.gather(layers[-1][1], i))
    f = jt.value_and_grad(picks)
    for _ in range(2):
        with pytest.raises(IndexError, match=r"index 9 is out of bounds .*test_parts\.py:"):
            f(layers, x, np.array([0, 9]))
    _close(f(layers, x, np.array([0, 3])),
           _eager(lambda layers, x: picks(layers, x, np.array([0, 3])), (layers, x)))


def test_an_error_in_a_piece_of_a_loop_body_in_a_part_keeps_its_message(monkeypatch):
    """A part's own raises have numbers of their own (negative); the pieces of a loop
    body that it calls raise the kernel's, which pass as they are (a regression: a
    piece's error took the message of one of the part's raises, another line)."""
    monkeypatch.setattr(cpu, "PART_NODES", 6)

    def f(x, i1, i2, i3, j):
        def small(v):
            return jt.gather(v, i1) + jt.gather(v, i2) * jt.gather(v, i3)
        def big(v):
            w = np.sin(v) * 2.0 + np.cos(v)
            w = np.tanh(w * w + v) * np.exp(-v)
            w = np.sin(w) + np.cos(w * 3.0) * w
            return jt.gather(w, j) * 1.5 + np.tanh(jt.gather(w, j))   # the bad index
        return np.sum(jt.cond(np.sum(x) > 0, small, big, x))
    g = jt.function(f)
    x, one = -np.ones(5), lambda k: np.array([k])
    g(x, one(0), one(1), one(2), one(3))
    source = g.lower(x, one(0), one(1), one(2), one(3)).source
    assert "SUBFUNCTIONS" in source and "renumbered(err" in source
    line = f.__code__.co_firstlineno + 7
    with pytest.raises(IndexError, match=rf"index 7 is out of bounds .*test_parts\.py:{line}\)"):
        g(x, one(0), one(1), one(2), one(7))
