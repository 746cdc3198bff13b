"""Python loops rolled into loops of the generated code (jittape/rolling.py): found
where the iterations repeat exactly, left straight where they do not, and the same
numbers either way."""

import os
import re

import numpy as np
import pytest

import jittape as jt
from jittape import rolling
from test_loops import _numeric

THIS_FILE = os.path.abspath(__file__)
RNG = np.random.default_rng(3)
W = RNG.normal(size=(4, 4)) * 0.4
U = RNG.normal(size=(3, 4)) * 0.4
XS = RNG.normal(size=(12, 2, 3))
H0 = np.zeros((2, 4))


def rnn(w, u, xs):
    h = H0
    loss = 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ w + xs[t] @ u)
        loss = loss + np.sum(h * h)
    return loss + np.sum(h)


def mlp(layers, x):
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return np.mean(x * x)


def collected(w, u, xs):
    h, seen = H0, []
    for t in range(xs.shape[0]):
        h = np.sin(h @ w + xs[t] @ u)
        seen.append(h)
    return np.sum(np.stack(seen) ** 2)


def growing(w, xs):
    h = np.ones((2, 1))
    for t in range(6):                 # the state grows: no two steps alike
        h = np.concatenate([h, np.tanh(h[:, -1:] * t + xs[t, :, :1])], axis=1)
    return np.sum(h * h)


def _scans(fn, *args, argnums=0):
    graph = jt.value_and_grad(fn, argnums=argnums).lower(*args).ir
    return [n for n in graph.all_nodes() if n.prim.name == "scan"]


def _same_as_unrolled(fn, args, argnums):
    value, grads = jt.value_and_grad(fn, argnums=argnums)(*args)
    jt.config.roll_loops = False
    try:
        want_value, want = jt.value_and_grad(fn, argnums=argnums)(*args)
    finally:
        jt.config.roll_loops = True
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    for g, w in zip(jt.tree.leaves(grads), jt.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)
    return grads


def test_an_rnn_loop_is_rolled_and_gives_the_unrolled_gradients():
    scans = _scans(rnn, W, U, XS, argnums=(0, 1, 2))
    assert scans and scans[0].params["length"] >= 10
    grads = _same_as_unrolled(rnn, (W, U, XS), (0, 1, 2))
    np.testing.assert_allclose(grads[0], _numeric(lambda w: rnn(w, U, XS), W), rtol=1e-6)


def test_the_layers_of_a_deep_network_are_one_loop_over_their_stacked_weights():
    layers = [(RNG.normal(size=(5, 5)) * 0.5, RNG.normal(size=5) * 0.1) for _ in range(8)]
    x = RNG.normal(size=(3, 5))
    scans = _scans(mlp, layers, x)
    assert scans and scans[0].params["length"] >= 6
    grads = _same_as_unrolled(mlp, (layers, x), 0)
    w0 = layers[0][0]
    numeric = _numeric(lambda w: mlp([(w, layers[0][1])] + layers[1:], x), w0)
    np.testing.assert_allclose(grads[0][0], numeric, rtol=1e-6)


def test_values_collected_in_a_list_are_read_from_the_stacked_steps():
    assert _scans(collected, W, U, XS)
    _same_as_unrolled(collected, (W, U, XS), (0, 1, 2))


def test_a_body_that_changes_shape_per_step_stays_straight():
    assert not _scans(growing, W, XS)
    grads = _same_as_unrolled(growing, (W, XS), 1)
    np.testing.assert_allclose(grads, _numeric(lambda xs: growing(W, xs), XS), rtol=1e-6,
                               atol=1e-9)


def test_a_short_loop_is_not_rolled():
    def short(w, xs):
        h = H0
        for t in range(2):
            h = np.tanh(h @ w + xs[t] @ U)
        return np.sum(h)
    assert not _scans(short, W, XS)


def test_jacobian_and_function_of_a_rolled_loop():
    f = jt.function(lambda w: rnn(w, U, XS))
    jt.config.roll_loops = False
    try:
        want = jt.function(lambda w: rnn(w, U, XS))(W)
        jac_want = jt.jacobian(lambda xs: np.tanh(rnn(W, U, xs)) * np.ones(2))(XS)
    finally:
        jt.config.roll_loops = True
    np.testing.assert_allclose(f(W), want, rtol=1e-12)
    jac = jt.jacobian(lambda xs: np.tanh(rnn(W, U, xs)) * np.ones(2))(XS)
    np.testing.assert_allclose(jac, jac_want, rtol=1e-10, atol=1e-13)


ROLLED_GRAPH = """\
graph rnn_sum(w: float64[n,n], xs: float64[k,m,n], h0: float64[m,n]) {
  %39: float64[slice_length(k, 0, 8, 1),m,n] = getitem(xs, index=(('slice', 0, 8, 1),))    # test_rolling.py:L
  %42: bool[] = scan(h0, %39, w, carries=1, length=8, reverse=False, xs=1) over %36, %38 {    # test_rolling.py:L
    %37: float64[m,n] = matmul(%36, w)    # test_rolling.py:L
    %40: float64[m,n] = add(%37, %38)    # test_rolling.py:L
    %41: float64[m,n] = tanh(%40)    # test_rolling.py:L
    yield %41
  }
  %43: float64[m,n] = scan_output(%42, index=0)    # test_rolling.py:L
  %35: float64[] = sum(%43, axis=(0, 1), keepdims=False)    # test_rolling.py:L
  return %35
}
"""


def test_golden_text_of_a_rolled_loop():
    h0 = np.zeros((2, 4))

    def rnn_sum(w, xs):
        h = h0
        for t in range(8):
            h = np.tanh(h @ w + xs[t])
        return np.sum(h)

    text = jt.function(rnn_sum).lower(W, RNG.normal(size=(8, 2, 4))).graph
    text = text[:text.index("\n}\n") + 3].replace(THIS_FILE, "test_rolling.py")
    text = re.sub(r"test_rolling\.py:\d+", "test_rolling.py:L", text)
    text = "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith(("#", "check"))) + "\n"
    assert text == ROLLED_GRAPH


def test_a_loop_going_backwards_in_time_is_rolled():
    def backwards(w, u, xs):
        h = H0
        for t in reversed(range(xs.shape[0])):
            h = np.tanh(h @ w + xs[t] @ u)
        return np.sum(h * h)

    assert _scans(backwards, W, U, XS, argnums=(0, 1, 2))
    grads = _same_as_unrolled(backwards, (W, U, XS), (0, 1, 2))
    np.testing.assert_allclose(grads[2], _numeric(lambda xs: backwards(W, U, xs), XS),
                               rtol=1e-6, atol=1e-9)


def test_a_body_whose_op_changes_per_step_stays_straight():
    def powers(w, xs):
        h = np.tanh(xs[0] @ w)
        for t in range(8):
            h = np.tanh(h @ w) ** (t + 1) + 0.1 * h     # another exponent at every step
        return np.sum(h)

    x4 = RNG.normal(size=(2, 2, 4))
    assert not _scans(powers, W, x4)
    grads = _same_as_unrolled(powers, (W, x4), 0)
    np.testing.assert_allclose(grads, _numeric(lambda w: powers(w, x4), W), rtol=1e-6, atol=1e-9)


def test_x_t_of_another_array_per_step_or_of_a_carry_is_not_rolled_wrong():
    arrs = [RNG.normal(size=(8, 4)) for _ in range(8)]

    def per_step(w, *arrs):
        h = np.zeros(4)
        for t in range(8):
            h = np.tanh(h @ w + arrs[t][t])       # another array at every step
        return np.sum(h)

    def of_carry(w):
        h = np.tanh(np.ones((8, 4)) @ w)
        for t in range(6):
            h = np.tanh(h @ w) * 1.1 + np.sin(h[t]) * 0.3     # x[t] of the carry
        return np.sum(h * h)

    _same_as_unrolled(per_step, (W, *arrs), 0)
    _same_as_unrolled(of_carry, (W,), 0)


def _cycling(layers, x):
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return np.mean(x * x)


def _widths_layers(widths):
    rng = np.random.default_rng(9)
    return [(rng.normal(size=(a, b)) / np.sqrt(a), rng.normal(size=b) * 0.1)
            for a, b in zip(widths, widths[1:])]


def test_a_large_block_of_alike_layers_of_other_sizes_stays_unrolled():
    """Widths that recur every 20 layers make a run of 60-node blocks the loop rolling
    could roll; its layers are alike at other sizes, so it stays unrolled, and the
    layers compile as shared parts (rolling.ALIKE_BLOCK). Blocks of one layer roll."""
    cycle = [3 + k % 20 for k in range(61)]         # 60 layers, widths recurring every 20
    layers, x = _widths_layers(cycle), np.random.default_rng(1).normal(size=(2, 3))
    assert 20 * 3 >= rolling.ALIKE_BLOCK
    assert not _scans(_cycling, layers, x)
    _same_as_unrolled(_cycling, (layers, x), 0)
    same = _widths_layers([3] + [5] * 12)            # every layer alike, same sizes
    assert _scans(_cycling, same, x)
