"""``jt.vmap``: batching rules against a loop over the examples.

Registry-driven: every primitive declares a batching rule, and each op's examples,
mapped over a batch of three (each array input mapped alone, then all together), give
what the op gives example by example. Those programs run on the graph interpreter (the
batched graph is what matters there; the ops' lowerings are tested by ``test_ops``);
the programs below them are compiled by Numba.
"""

import numpy as np
import pytest

import jittape as jt
from jittape.codegen import build
from jittape.errors import TracerError
from jittape.ops.core import REGISTRY

from opcheck import apply, make_inputs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture
def interpreted(monkeypatch, cache_dir):
    """Compiled functions run their graph on the interpreter (tiered calls whose kernel
    is never compiled)."""
    monkeypatch.setattr(jt.config, "tiered", True)
    monkeypatch.setattr(build, "_compile_in_background", lambda kernel, argtypes: None)


def _graph(f):
    (variants,) = f._cache.values()
    return variants[0].graph


def _loops(graph):
    return [n.prim.name for n in graph.nodes if n.prim.kind == "loop"]


def test_every_primitive_declares_a_batching_rule():
    missing = [n for n, p in REGISTRY.items() if not callable(getattr(p, "batch", None))]
    assert not missing, f"primitives without a batching rule: {missing}"


def _batch_program(name):
    """Every example of op ``name`` mapped over a batch of 3, for each choice of mapped
    array inputs: (program, arrays, expected outputs, whether an index array is mapped)."""
    op = REGISTRY[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    arrays, calls, expected = [], [], []
    for ex in op.examples:
        values, diff = make_inputs(op, ex, rng)
        positions = [k for k, v in enumerate(values) if isinstance(v, np.ndarray)]
        patterns = [(k,) for k in positions] + ([tuple(positions)] if len(positions) > 1 else [])
        for pattern in patterns:
            rows = []
            for _ in range(3):                 # each example: new floats, the same indices
                drawn, _ = make_inputs(op, ex, rng)
                rows.append([drawn[k] if k in pattern else values[k] for k in range(len(values))])
            start = len(arrays)
            for k in pattern:
                arrays.append(np.stack([r[k] for r in rows]))
            expected.append(np.stack([np.asarray(apply(op, r, ex.params)) for r in rows]))
            calls.append((values, pattern, start, ex.params))

    def program(*args):
        outs = []
        for values, pattern, start, params in calls:
            def one(*mapped, values=values, pattern=pattern, params=params):
                full = list(values)
                for k, m in zip(pattern, mapped):
                    full[k] = m
                return apply(op, full, params)
            outs.append(jt.vmap(one)(*args[start:start + len(pattern)]))
        return tuple(outs)
    return program, arrays, expected


@pytest.mark.usefixtures("interpreted")
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_batching_rule_matches_a_loop_over_examples(name):
    program, arrays, expected = _batch_program(name)
    f = jt.function(program)
    got = f(*arrays)
    for k, (g, want) in enumerate(zip(got, expected)):
        assert g.shape == want.shape and g.dtype == want.dtype, (name, k, g.shape, want.shape)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12, err_msg=f"{name} call {k}")
    loops = _loops(_graph(f))
    # only an index array that depends on the example runs in a loop (set_row's row)
    assert not loops or name in ("getitem", "index_add", "set_row"), (name, loops)


# -- compiled by Numba ----------------------------------------------------------------

def _logistic_loss(w, x, t):
    z = np.dot(x, w[:-1]) + w[-1]
    return np.log1p(np.exp(-t * z)) + 0.01 * np.sum(w * w)


def test_per_example_gradients_equal_a_loop_of_grad_calls():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(7, 4)), rng.normal(size=5)
    t = np.sign(rng.normal(size=7))
    per_example = jt.vmap(jt.grad(_logistic_loss), in_axes=(None, 0, 0))
    got = per_example(w, x, t)
    want = np.stack([jt.grad(_logistic_loss)(w, x[i], t[i]) for i in range(7)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert not _loops(_graph(per_example.compiled))       # one kernel, no loop over examples


def _mlp(params, x, t):
    w1, w2 = params
    return np.sum((np.tanh(x @ w1) @ w2 - t) ** 2)


def test_a_matrix_product_stays_a_matrix_product():
    rng = np.random.default_rng(1)
    params = [rng.normal(size=(3, 4)), rng.normal(size=(4, 2))]
    x, t = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    g = jt.vmap(jt.grad(_mlp), in_axes=(None, 0, 0))
    got = g(params, x, t)
    for k in range(2):
        want = np.stack([jt.grad(_mlp)(params, x[i], t[i])[k] for i in range(6)])
        np.testing.assert_allclose(got[k], want, rtol=1e-12, atol=1e-14)
    graph = _graph(g.compiled)
    assert not _loops(graph)
    # the forward pass: the batch of rows times each weight matrix, one product each
    products = [n for n in graph.nodes if n.prim.name == "matmul"]
    firsts = [n for n in products if any(getattr(v, "name", None) == "x" for v in n.inputs)]
    assert firsts and len(firsts[0].out.shape) == 2


def test_contractions_indexing_and_joins_compiled():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(5, 3, 4)), rng.normal(size=(5, 4))
    m, v = rng.normal(size=(4, 2)), rng.normal(size=(3,))
    idx = np.array([2, 0, 0])

    def f(a, b):
        return (a @ b,                        # matrix times vector, both mapped
                b @ m,                        # mapped vector times a matrix
                v @ a,                        # a vector times a mapped matrix
                np.einsum("ij,j->i", a, b),
                a[:, idx],                    # an index array beside a slice
                a[idx, 1:],                   # an index array, an int-free slice
                jt.concatenate([b, m[:, 0]], axis=0),
                jt.stack([b, m[:, 1]], axis=1),
                jt.transpose(a),
                jt.reshape(a, (2, 6)),
                jt.max(a, axis=-1),
                jt.broadcast_to(b, (2, 4)))
    g = jt.vmap(f)
    got = g(a, b)
    want = [np.stack(col) for col in zip(*[[np.asarray(o) for o in f(jt.constant(a[i]),
                                                                    jt.constant(b[i]))]
                                            for i in range(5)])]
    for k, (x, y) in enumerate(zip(got, want)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14, err_msg=f"output {k}")
    assert not _loops(_graph(g.compiled))


def test_gradient_through_vmap_and_of_index_gathers():
    rng = np.random.default_rng(3)
    table, ids = rng.normal(size=(6, 3)), np.array([[0, 5], [2, 2], [1, 4]])
    w = rng.normal(size=3)

    def loss(table, w):      # the rows an example names: an index array mapped (a loop)
        rows = jt.vmap(lambda i: table[i] @ w)(ids)
        return jt.sum(jt.tanh(rows))

    def by_hand(table, w):
        return jt.sum(jt.tanh(table[ids] @ w))
    got = jt.grad(loss, argnums=(0, 1))(table, w)
    want = jt.grad(by_hand, argnums=(0, 1))(table, w)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def test_axes_pytrees_and_outputs():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 4))
    d = {"a": a, "b": np.arange(3.0)}
    got = jt.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 1, "b": None},))(d)
    np.testing.assert_allclose(got, (a * np.arange(3.0)[:, None]).T)
    got = jt.vmap(lambda r: (r * 2, jt.sum(r), 1.5), out_axes=(1, 0, 0))(a)
    np.testing.assert_allclose(got[0], (a * 2).T)
    np.testing.assert_allclose(got[1], a.sum(axis=1))
    np.testing.assert_allclose(got[2], np.full(3, 1.5))           # repeated over the batch
    shared = jt.vmap(lambda r, c: (r + c, c * 2), in_axes=(0, None), out_axes=(0, None))
    np.testing.assert_allclose(shared(a, np.ones(4))[1], np.full(4, 2.0))
    inner = jt.vmap(jt.vmap(lambda x: x * x), in_axes=-1)        # nested, a negative axis
    np.testing.assert_allclose(inner(a), (a * a).T)


def test_what_the_function_reads_is_read_at_each_call():
    x = np.ones((2, 3))
    scale = 1.0
    f = jt.vmap(lambda r: r * scale)
    f(x)
    scale = 2.0                        # a rebound closure value: read again, as jt.function
    np.testing.assert_allclose(f(x), 2 * x)

    class Model:
        def __init__(self, w):
            self.w = w

        def f(self, r):
            return jt.sum(r * self.w)
    m = Model(np.ones(3))
    jt.vmap(m.f)(x)
    m.w = np.full(3, 2.0)             # a method's attribute: a new vmap(m.f) traces again
    np.testing.assert_allclose(jt.vmap(m.f)(x), [6.0, 6.0])


def test_none_leaves_dict_axes_and_shared_outputs():
    d = {"a": np.ones(3), "b": None}
    np.testing.assert_allclose(jt.vmap(lambda d: d["a"] * 2, in_axes=({"a": 0, "b": None},))(d),
                               np.full(3, 2.0))
    got = jt.vmap(lambda a: {"a": a, "b": a * 2}, out_axes={"a": 0, "b": 1})(np.ones((3, 2)))
    assert got["a"].shape == (3, 2) and got["b"].shape == (2, 3)
    # a loop inside: the function runs in a loop over the batch, and what does not
    # depend on the example is still computed once
    f = jt.vmap(lambda x, c: (jt.scan(lambda h, _: (h * 0.5, None), x, None, length=2)[0], c * 2),
                in_axes=(0, None), out_axes=(0, None))
    looped, shared = f(np.ones((3, 2)), np.ones(2))
    np.testing.assert_allclose(looped, np.full((3, 2), 0.25))
    np.testing.assert_allclose(shared, [2.0, 2.0])


def test_a_loop_inside_runs_the_function_in_a_loop_over_the_batch():
    rng = np.random.default_rng(5)
    h0, xs = rng.normal(size=(4, 2)), rng.normal(size=(4, 6, 2))

    def rnn(h, xs):
        return jt.scan(lambda h, x: (jt.tanh(0.5 * h + x), None), h, xs)[0]
    g = jt.vmap(rnn)
    want = np.stack([rnn(jt.constant(h0[i]), jt.constant(xs[i])).numpy() for i in range(4)])
    np.testing.assert_allclose(g(h0, xs), want, rtol=1e-12)


def test_eagerly_under_a_tape_the_tape_sees_every_example():
    rng = np.random.default_rng(6)
    w, x = jt.Variable(rng.normal(size=3)), rng.normal(size=(5, 3))
    with jt.GradientTape() as tape:
        total = jt.sum(jt.vmap(lambda r: jt.tanh(r @ w))(x))
    want = jt.grad(lambda w: jt.sum(jt.tanh(x @ w)))(w.numpy())
    np.testing.assert_allclose(tape.gradient(total, w).numpy(), want, rtol=1e-12)
    with jt.GradientTape() as tape:
        tape.watch(w)
        shared = jt.vmap(lambda r, w: (r * w, w * 2), in_axes=(0, None), out_axes=(0, None))
        rows, doubled = shared(x, w)
        empty = jt.vmap(lambda r: r * w)(np.zeros((0, 3)))      # no example: no call
    assert rows.shape == (5, 3) and doubled.shape == (3,) and empty.shape == (0, 3)
    np.testing.assert_allclose(tape.gradient(doubled, w).numpy(), np.full(3, 2.0))


_COUNT = jt.Variable(0.0)


@pytest.mark.parametrize("call, kind, words", [
    (lambda: jt.vmap(lambda a, b: a + b)(np.ones((3, 2)), np.ones((4, 2))), ValueError,
     ["vmap(<lambda>)", "different sizes", "argument 0: 3", "argument 1: 4"]),
    (lambda: jt.vmap(lambda a: a, in_axes=2)(np.ones((3, 2))), ValueError,
     ["in_axes 2", "argument 0 of shape (3, 2)"]),
    (lambda: jt.vmap(lambda a: a, in_axes=None)(np.ones(3)), ValueError, ["maps no argument"]),
    (lambda: jt.vmap(lambda a: a, in_axes=(0, 0))(np.ones(3)), ValueError,
     ["in_axes must be", "one entry per argument (1)"]),
    (lambda: jt.vmap(lambda a: a, in_axes=1.0), TypeError, ["ints or None", "1.0"]),
    (lambda: jt.vmap(lambda a: a * 2, out_axes=None)(np.ones(3)), ValueError,
     ["out_axes is None for output 0", "depends on the mapped"]),
    (lambda: jt.vmap(lambda a: a if a > 0 else -a)(np.ones(3)), TracerError,
     ["vmap", "branch", "jt.where"]),
    (lambda: jt.vmap(lambda a: a + jt.random.normal(()))(np.ones(3)), jt.UnsupportedError,
     ["random draw", "same for every example"]),
    (lambda: jt.vmap(3), TypeError, ["expected a function", "int"]),
    (lambda: jt.vmap(lambda a, b: a * b)(np.ones(3), b=np.ones(3)), TypeError,
     ["vmap(<lambda>)", "keyword arguments (b)", "positionally"]),
    (lambda: jt.vmap(lambda a: a, out_axes=(0,))(np.ones((3, 2))), ValueError,
     ["out_axes is (0,)", "does not match one array"]),
    (lambda: jt.vmap(lambda a: {"a": a}, out_axes={"c": 0})(np.ones(3)), ValueError,
     ["out_axes is {'c': 0}", "a dict with keys ['a']"]),
    (lambda: jt.vmap(lambda a: _COUNT.assign_add(jt.sum(a)))(np.ones((2, 3))),
     jt.UnsupportedError, ["vmap(<lambda>)", "variable assigned"]),
])
def test_messages(call, kind, words):
    with pytest.raises(kind) as err:
        call()
    first = str(err.value).splitlines()[0]
    for w in words:
        assert w in first, (w, first)
    assert __file__ in first or "test_vmap.py" in first
