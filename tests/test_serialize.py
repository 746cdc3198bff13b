"""Graphs serialize by registry names and parameters, and come back the same graph."""

import numpy as np
import pytest

import jittape as jt
from jittape import serialize
from jittape.errors import UnsupportedError

from corpus import CASES


def _graph(f, *args, **kw):
    return jt.grad(f, **kw).lower(*args).ir


def _roundtrip(graph):
    blob = serialize.dumps(graph)
    back = serialize.loads(blob)
    assert back.key_text() == graph.key_text()
    assert serialize.dumps(back) == blob
    return back


@pytest.mark.parametrize("case", CASES[:12], ids=lambda c: c.name)
def test_corpus_graphs_round_trip(case):
    args = case.make_args(np.random.default_rng(0), np.float64)
    f = jt.grad(case.fn, argnums=case.argnums)
    _roundtrip(f.lower(*args).ir)


def test_a_round_tripped_graph_computes_the_same():
    def loss(w, x):
        return jt.sum(jt.tanh(x @ w) ** 2) + 0.5 * jt.sum(w[1:, ::2])

    w, x = np.random.default_rng(1).normal(size=(2, 4, 3))[0], np.ones((5, 4))
    low = jt.grad(loss).lower(w, x)
    back = _roundtrip(low.ir)
    assert serialize.digest(back) == serialize.digest(low.ir)
    assert serialize.digest(_graph(lambda w, x: jt.sum(w * x), w, x[:4, :3])) != \
        serialize.digest(low.ir)


def test_a_graph_holding_a_custom_rule_says_why_it_cannot_be_serialized():
    @jt.custom_gradient
    def f(x):
        return x * 2, lambda g: g * 2

    from jittape.trace import Trace
    trace = Trace("f")
    with trace:
        y = f(trace.add_input(np.ones(3), 0))
    with pytest.raises(UnsupportedError, match="custom_gradient"):
        serialize.dumps(trace.graph([y._var]))


def test_graphs_with_loops_and_branches_round_trip():
    rng = np.random.default_rng(2)
    w, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(6, 2, 3))

    def loss(w, xs):
        def step(h, x):
            h = jt.cond(jt.sum(x) > 0, lambda a: jt.tanh(a @ w + x), lambda a: a * 0.5, h)
            return h, jt.sum(h)
        h, ys = jt.scan(step, jt.zeros((2, 3), jt.float64), xs)
        h, _ = jt.while_loop(lambda c: c[1] < 3, lambda c: (jt.sin(c[0]), c[1] + 1), (h, 0))
        return jt.sum(h * h) + jt.sum(ys)

    low = jt.grad(loss).lower(w, xs)
    names = {n.prim.name for n in low.ir.all_nodes()}
    assert {"scan", "while_grad", "switch_2"} <= names
    back = _roundtrip(low.ir)
    assert serialize.digest(back) == serialize.digest(low.ir)
