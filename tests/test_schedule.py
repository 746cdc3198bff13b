"""The schedule (``jittape/schedule.py``): what the printers print, made before any code
is printed. Loops' bodies are blocks of their own, large graphs are pieces that each
keep only their own values for later ones, and the printers ask nothing of fusion or
buffer planning."""

import numpy as np
import pytest

import jittape as jt
from jittape import schedule
from jittape.codegen import cpu, cuda
from test_layers import import_graph


def _rnn(w, xs, h0):
    h, ys = jt.scan(lambda h, x: (jt.tanh(h @ w + x), jt.sum(h)), h0, xs)
    h, _ = jt.while_loop(lambda c: c[1] < 3, lambda c: (jt.sin(c[0]), c[1] + 1), (h, 0))
    return jt.sum(h * h) + jt.sum(ys)


RNG = np.random.default_rng(0)
ARGS = (RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(6, 2, 3)), RNG.normal(size=(2, 3)))


@pytest.mark.parametrize("policy", [cpu.policy(), cuda.POLICY], ids=["cpu", "cuda"])
def test_every_region_body_is_a_block_leaving_what_its_loop_reads(policy):
    graph = jt.value_and_grad(_rnn, argnums=(0, 1, 2)).lower(*ARGS).ir
    program = schedule.plan(graph, policy)
    regions = [n for n in graph.all_nodes() if n.prim.regions]
    assert {n.prim.name for n in regions} >= {"scan", "while_loop"}
    for node in regions:
        for name in node.prim.regions:
            block = program.body(node, name)
            body = node.params[name]
            assert block.reuse == {}                       # (a body's buffers are its own)
            if node.prim.name == "scan":                   # new carry + the ys read after
                nc = node.params["carries"]
                used = program.used(node)
                want = {v.id for j, v in enumerate(body.outputs)
                        if v is not None and (j < nc or j in used)}
            else:
                want = {v.id for v in body.outputs if hasattr(v, "id")}
            assert block.live_out == want
    # every node of the graph is scheduled once, in the main block or a body
    scheduled = []

    def walk(block):
        for piece in block.pieces or [block]:
            for item in piece.items:
                scheduled.extend(schedule.item_nodes(item))
    walk(program.main)
    for block in program.bodies.values():
        walk(block)
    assert sorted(n.out.id for n in scheduled) == sorted(n.out.id for n in graph.all_nodes())


def test_a_large_graph_is_pieces_each_keeping_its_own_values_for_later_ones():
    ws = [RNG.normal(size=(4 + k % 3, 4 + (k + 1) % 3)) * 0.3 for k in range(12)]

    def mlp(ws, x):
        for w in ws:
            x = jt.tanh(x @ w)
        return jt.sum(x * x)

    jt.config.roll_loops = False
    try:
        graph = jt.value_and_grad(mlp).lower(ws, RNG.normal(size=(3, 4))).ir
    finally:
        jt.config.roll_loops = True
    program = schedule.plan(graph, schedule.Policy("cpu", part_nodes=20))
    pieces = program.main.pieces
    assert pieces is not None and len(pieces) > 3
    later = {v.id for v in graph.outputs if hasattr(v, "id")}
    for piece in reversed(pieces):
        own = {n.out.id for item in piece.items for n in schedule.item_nodes(item)}
        assert piece.live_out <= own                  # (its own values only: linear)
        assert piece.live_out == own & later
        later |= {v.id for item in piece.items for n in schedule.item_nodes(item)
                  for v in n.var_inputs()}


def test_the_printers_ask_nothing_of_fusion_or_buffer_planning():
    graph = import_graph()
    for printer in ("jittape.codegen.cpu", "jittape.codegen.cuda"):
        assert "jittape.passes.memory" not in graph[printer]
        assert "jittape.schedule" in graph[printer]
    source = open(cpu.__file__).read() + open(cuda.__file__).read()
    for call in ("schedule(nodes", "nest(order", "plan_buffers(", "materialized("):
        assert call not in source
