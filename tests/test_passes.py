"""Tracing, the graph IR and the passes, checked on the graphs themselves."""

import numpy as np
import pytest

import jittape as jt
from jittape import autodiff, passes
from jittape.ir import Dim
from jittape.passes import Group, Nest, nest, plan_buffers, schedule
from jittape.trace import Trace, TracerError


def trace(fn, *arrays):
    t = Trace(getattr(fn, "__name__", "f"))
    with t:
        ins = [t.add_input(a, k) for k, a in enumerate(arrays)]
        out = fn(*ins)
    return t, ins, out


def names(graph):
    return [n.prim.name for n in graph.nodes]


def test_inputs_have_run_time_sizes_and_static_ones():
    t, (x,), _ = trace(lambda x: x, np.ones((5, 1, 3)))
    d0, d1, d2 = x.shape
    assert isinstance(d0, Dim) and d0 == 5 and d0.expr == ("in", 0, 0)
    assert d1 == 1 and not isinstance(d1, Dim)
    assert isinstance(d2 * d0, Dim) and (d2 * d0).expr == ("*", ("in", 0, 2), ("in", 0, 0))
    assert (d0 * 1) is d0 and (0 + d0) is d0


def test_graph_text_is_stable_and_readable():
    def f(x, y):
        return jt.sum(jt.exp(x) * y)

    a, b = trace(f, np.ones((2, 3)), np.ones(3)), trace(f, np.ones((7, 3)), np.ones(3))
    text_a = a[0].graph([a[2]._var]).key_text()
    text_b = b[0].graph([b[2]._var]).key_text()
    assert text_a == text_b                                # sizes are not in the graph
    assert "exp(%0)" in text_a and "float64[n,k]" in text_a    # (unnamed inputs: %<id>)
    assert "# sizes: n = %0.shape[0], k = %0.shape[1] = %1.shape[0]" in text_a
    assert "sum(%3, axis=(0, 1), keepdims=False)" in text_a


def test_operations_on_constants_are_folded_while_tracing():
    t, _, out = trace(lambda x: x * (jt.constant(2.0) + 3.0), np.ones(2, np.float32))
    assert names(t.graph([out._var])) == ["multiply"]


def test_dce_drops_what_no_output_reads():
    t, (x,), _ = trace(lambda x: x, np.ones(3))
    with t:
        unused = jt.sin(x)                                        # noqa: F841
        y = jt.cos(x)
    g = passes.dce(t.graph([y._var]))
    assert names(g) == ["cos"]


def test_sizes_checked_equal_get_one_expression():
    def f(x, w, b):
        return x @ w + b

    t, _, out = trace(f, np.ones((2, 4)), np.ones((4, 3)), np.ones(3))
    g = t.graph([out._var])
    assert (("in", 0, 1), ("in", 1, 0)) in g.checks and (("in", 1, 1), ("in", 2, 0)) in g.checks
    g = passes.canonical_sizes(g)
    exprs = {d.expr for v in [n.out for n in g.nodes] + g.inputs for d in v.shape
             if isinstance(d, Dim)}
    assert exprs == {("in", 0, 0), ("in", 0, 1), ("in", 1, 1)}   # b's size is w's
    assert g.checks                                # the kernel still checks them on entry


def test_a_size_checked_equal_to_a_literal_becomes_the_literal():
    """Labels compared with a constant of 10 classes: the logits' class axis is checked
    equal to 10 on entry, and is 10 everywhere after. The loops over (batch, classes)
    are then one domain and fuse; the kernel still rejects 11 classes."""
    def loss(logits, labels):
        onehot = jt.cast(jt.equal(jt.reshape(labels, (-1, 1)), jt.constant(np.arange(10))),
                         jt.float32)
        return jt.sum(onehot * jt.exp(logits))

    logits, labels = np.ones((6, 10), np.float32), np.arange(6) % 10
    t, _, out = trace(loss, logits, labels)
    g = passes.canonical_sizes(t.graph([out._var]))
    assert any(a == 10 or b == 10 for a, b in g.checks)
    exp_node = next(n for n in g.nodes if n.prim.name == "exp")
    assert exp_node.out.shape[1] == 10 and not isinstance(exp_node.out.shape[1], Dim)
    f = jt.grad(loss)
    source = f.lower(logits, labels).source
    assert source.count("fused loop over") == 1
    np.testing.assert_allclose(f(logits, labels), (labels[:, None] == np.arange(10)) * np.e,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        f(np.ones((6, 11), np.float32), labels)


def test_canonical_sizes_let_a_dead_buffer_serve_an_equal_shape():
    def loss(w, b, x):
        y = x @ w + b
        return jt.mean(y ** 2)

    f = jt.value_and_grad(loss, argnums=(0, 1))
    w, b, x = np.ones((4, 3), np.float32), np.ones(3, np.float32), np.ones((1, 4), np.float32)
    source = f.lower(w, b, x).source
    assert "reuses a dead buffer" in source
    value, (gw, gb) = f(w, b, x)
    np.testing.assert_allclose(gb, 2 * 5 / 3 * np.ones(3), rtol=1e-6)
    # b no longer matches w: the kernel's entry check fails, and tracing for these sizes
    # names the op, the shapes and the line
    with pytest.raises(ValueError, match=r"add: shapes \(1, 3\) and \(5,\) cannot be "
                                         r"broadcast together .*test_passes.py:101"):
        f(w, np.ones(5, np.float32), x)


def test_cse_merges_equal_nodes_but_not_different_sizes():
    t, (x, y), _ = trace(lambda x, y: x, np.ones(3), np.ones(3))
    with t:
        a = jt.exp(x) + jt.exp(x)
        b = jt.sum(x) / x.shape[0] + jt.sum(y) / y.shape[0]    # same value, other sizes
    g = passes.optimize(t.graph([a._var, b._var]))
    assert names(g).count("exp") == 1
    assert names(g).count("divide") == 2


def test_simplify_broadcasts_scalars_without_a_reshape():
    t, (x,), out = trace(lambda x: jt.mean(x ** 2), np.ones((4, 3)))
    with t:
        (g,) = autodiff.backward(t, [(out._var, jt.constant(1.0))], [x._var])
    graph = passes.optimize(t.graph([g._var]))
    assert "reshape" not in names(graph)
    assert "broadcast_to" in names(graph)


def test_elementwise_chains_and_their_reduction_fuse_into_one_loop():
    def f(x):
        return jt.sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x))

    t, (x,), out = trace(f, np.ones(10, np.float32))
    graph = passes.optimize(t.graph([out._var]))
    order = schedule(graph.nodes, {out._var.id})
    assert len(order) == 1 and isinstance(order[0], Group)
    assert order[0].reduce is not None and not order[0].outputs   # nothing written to memory


def test_backward_of_the_chain_is_one_more_loop_and_keeps_no_extra_arrays():
    def f(x):
        return jt.sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x))

    t, (x,), out = trace(f, np.ones(10, np.float32))
    with t:
        (g,) = autodiff.backward(t, [(out._var, jt.constant(np.float32(1)))], [x._var])
    graph = passes.optimize(t.graph([g._var]))
    order = schedule(graph.nodes, {g._var.id})
    loops = [item for item in order if isinstance(item, Group) and item.domain]
    assert len(loops) == 1                      # grad only: the forward sum is dead
    assert loops[0].outputs == {g._var.id}


def _xent_graph(n=6, classes=5):
    def f(logits, onehot):
        return jt.reduce_mean(jt.sum(onehot * (jt.logsumexp(logits, axis=1, keepdims=True)
                                               - logits), axis=1))

    t, (x, y), out = trace(f, np.ones((n, classes), np.float32),
                           np.ones((n, classes), np.float32))
    with t:
        (g,) = autodiff.backward(t, [(out._var, jt.constant(np.float32(1)))], [x._var])
    live = {out._var.id, g._var.id}
    return passes.optimize(t.graph([out._var, g._var])), live


def test_loops_over_the_same_rows_share_one_loop():
    # a softmax cross-entropy: a row's max, its sum of exp, its log, the loss per row
    # and the total of the rows, then the gradient's rows: loops over the same rows
    graph, live = _xent_graph()
    order = nest(schedule(graph.nodes, live), lambda group, open_nest: True, live)
    nests = [item for item in order if isinstance(item, Nest)]
    assert nests and len(nests[0].groups) >= 4
    # what a row computes once (its max, its sum) is read from a register
    row_max = next(g.reduce.out for g in nests[0].groups
                   if g.reduce is not None and g.reduce.prim.name == "max")
    assert row_max.id in nests[0].registers
    groups = [g for item in order for g in (item.groups if isinstance(item, Nest) else
                                            [item] if isinstance(item, Group) else [])]
    assert all(not (g.outputs & g.registers) for g in groups)     # registers: no arrays


def test_a_reduction_along_the_rows_is_read_only_after_their_loop():
    # s sums t along its rows (axis 0): its rows are not done until every row is, so
    # the group reading s is not in the loop that computes it
    def f(x, z):
        t = x + jt.transpose(x)              # the two sizes checked equal: rows of s are rows
        return jt.sum(t, axis=0) * z

    t, (x, z), out = trace(f, np.ones((4, 4)), np.ones(4))
    graph = passes.optimize(t.graph([out._var]))
    order = nest(schedule(graph.nodes, {out._var.id}), lambda group, open_nest: True,
                 {out._var.id})
    assert not any(isinstance(item, Nest) for item in order)
    x = np.arange(16.0).reshape(4, 4)
    z = np.arange(4.0)
    np.testing.assert_allclose(jt.function(f)(x, z), (x + x.T).sum(axis=0) * z)


def test_nodes_that_read_nothing_of_a_nest_move_before_it():
    # the labels' check and reshape sit between the loops over the logits' rows: they
    # move before them instead of splitting them
    def f(logits, labels):
        return jt.reduce_mean(jt.sparse_softmax_cross_entropy(labels, logits))

    t, (x, y), out = trace(f, np.ones((6, 5), np.float32), np.zeros(6, np.int32))
    with t:
        (g,) = autodiff.backward(t, [(out._var, jt.constant(np.float32(1)))], [x._var])
    live = {out._var.id, g._var.id}
    graph = passes.optimize(t.graph([out._var, g._var]))
    plain = schedule(graph.nodes, live)
    order = nest(schedule(graph.nodes, live), lambda group, open_nest: True, live)
    k = next(i for i, item in enumerate(order) if isinstance(item, Nest))
    check = next(item for item in plain if not isinstance(item, Group)
                 and item.prim.name == "check_labels" and item.inputs[0] is y._var)
    labels = next(item for item in plain if not isinstance(item, Group)
                  and item.prim.name == "reshape" and item.inputs[0] is check.out)
    assert plain.index(check) > 0 and isinstance(plain[plain.index(check) - 1], Group)
    assert check in order[:k] and labels in order[:k]
    assert len(order[k].groups) >= 4


def test_dead_buffers_are_reused():
    def f(x):
        a = jt.exp(x) @ x                      # matmul: the loops around it are separate
        b = jt.sin(a) @ x
        return jt.cos(b) @ x

    t, (x,), out = trace(f, np.ones((4, 4)))
    graph = passes.optimize(t.graph([out._var]))
    order = schedule(graph.nodes, {out._var.id})
    materialized = {n.out.id for item in order if isinstance(item, Group) for n in item.nodes}
    reuse = plan_buffers(graph, order, materialized)
    assert reuse                                  # a later loop writes into a dead array


def test_size_checks_are_recorded_for_broadcasting_different_inputs():
    t, (x, y), out = trace(lambda x, y: x * y, np.ones(3), np.ones(3))
    graph = t.graph([out._var])
    assert (("in", 0, 0), ("in", 1, 0)) in graph.checks or \
        (("in", 1, 0), ("in", 0, 0)) in graph.checks
    assert "check %0.shape[0] == %1.shape[0]" in graph.text() or \
        "check %1.shape[0] == %0.shape[0]" in graph.text()


def test_reading_sizes_in_user_code_marks_the_trace():
    t, _, _ = trace(lambda x: x * x.shape[0], np.ones(3))
    assert t.reads_sizes
    t, _, _ = trace(lambda x: jt.mean(x), np.ones(3))         # jittape's own reads: no
    assert not t.reads_sizes


def test_traced_values_cannot_become_python_values():
    with pytest.raises(TracerError, match="numpy"):
        trace(lambda x: x.numpy(), np.ones(2))
    with pytest.raises(TracerError, match="float"):
        trace(lambda x: float(jt.sum(x)), np.ones(2))


def _grad_graph(f, x):
    t, (xv,), out = trace(f, x)
    with t:
        (g,) = autodiff.backward(t, [(out._var, jt.constant(np.float64(1)))], [xv._var])
    return passes.optimize(t.graph([g._var])), g._var


def test_gradients_of_shifted_slices_are_one_loop_of_reads():
    # the chained Rosenbrock: x[1:] and x[:-1] scatter their gradients back into x
    def rosen(x):
        return jt.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    graph, g = _grad_graph(rosen, np.linspace(0.5, 1.5, 10))
    order = schedule(graph.nodes, {g.id}, placements=True)
    placing = [item for item in order if isinstance(item, Group) and item.placements]
    assert len(placing) == 1 and len(placing[0].placements) == 3
    assert not [item for item in order if not isinstance(item, Group)
                and item.prim.name == "index_add"]
    # without placements (CUDA's policy), each is a scatter of its own
    plain = schedule(graph.nodes, {g.id})
    assert sum(1 for item in plain if not isinstance(item, Group)
               and item.prim.name == "index_add") == 3


INDEXES = [np.s_[1:], np.s_[:-1], np.s_[::2], np.s_[5:0:-2], np.s_[::-1], np.s_[2], np.s_[-1],
           np.s_[1:, -2], np.s_[:, ::3], np.s_[-3:, 1:4], np.s_[4:1, :]]


def test_placements_agree_with_numpy():
    # every kind of placement into one loop over x's shape (one compile)
    x = np.random.default_rng(3).normal(size=(6, 7))

    def loss(x):
        return sum(jt.sum(jt.sin(x[i]) * x[i]) * (k + 1) for k, i in enumerate(INDEXES))

    want = np.zeros_like(x)
    for k, i in enumerate(INDEXES):
        np.add.at(want, i, (np.cos(x[i]) * x[i] + np.sin(x[i])) * (k + 1))
    value, grad = jt.value_and_grad(loss)(x)
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)


def _spread_loop(reader):
    """A while loop whose body reads ``b``, a scalar input spread to x's shape before
    the loop (invariant: it is captured), through ``reader(x, b)``."""
    @jt.function
    def f(x, c):
        b = jt.numpy.broadcast_to(c * 2.0, x.shape)

        def body(carry):
            k, y = carry
            return k + 1, reader(y, b)
        return jt.while_loop(lambda cr: cr[0] < 3, body, (jt.numpy.zeros((), np.int64), x))[1]
    return f


def _region_inputs(f, *args):
    graph = f.lower(*args).graph
    head = [line for line in graph.splitlines() if "while_loop(" in line]
    assert len(head) == 1, graph
    return head[0], graph


def test_a_loop_body_recomputes_a_spread_scalar_rather_than_reading_an_array():
    f = _spread_loop(lambda y, b: y * b + 1.0)
    x, c = np.arange(5.0), np.float64(0.25)
    head, graph = _region_inputs(f, x, c)
    # the loop captures the scalar; the broadcast is made (fused, no array) in its body
    captured = head.split("while_loop(")[1].split(", carries")[0].split(", ")[2:]
    assert len(captured) == 1 and "float64[]" in graph.split(captured[0] + ":")[1].split("\n")[0]
    assert graph.index("broadcast_to") > graph.index("while_loop")
    want = x.copy()
    for _ in range(3):
        want = want * 0.5 + 1.0
    np.testing.assert_array_equal(f(x, c), want)


def test_a_spread_scalar_that_a_matrix_product_reads_stays_one_array_before_the_loop():
    f = _spread_loop(lambda y, b: jt.matmul(b, y) * 0.1)
    x, c = np.ones((3, 3)), np.float64(0.5)
    head, graph = _region_inputs(f, x, c)
    assert graph.index("broadcast_to") < graph.index("while_loop")   # made once, not per step
    want = x.copy()
    for _ in range(3):
        want = np.full((3, 3), 1.0) @ want * 0.1
    np.testing.assert_allclose(f(x, c), want, rtol=1e-14)
