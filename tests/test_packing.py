"""Inputs a graph stacks are passed to the kernel stacked, and its stacked results split
into rows outside it (jittape/passes/packing.py): the same numbers as the eager tape
through every way of calling a compiled function, and a clear path for arguments that
do not fit the packed signature."""

import numpy as np
import pytest

import jittape as jt
from test_loops import _numeric

RNG = np.random.default_rng(11)


def mlp(layers, x):
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return np.mean(x * x)


def _layers(n, width, dtype=np.float64):
    return [((RNG.normal(size=(width, width)) * 0.4).astype(dtype),
             (RNG.normal(size=width) * 0.1).astype(dtype)) for _ in range(n)]


def _eager(fn, args, argnums=0):
    """(value, gradients) from the eager tape."""
    args = list(args)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    for i in nums:
        args[i] = jt.tree.map_leaves(jt.constant, args[i])
    with jt.GradientTape() as tape:
        tape.watch(jt.tree.leaves([args[i] for i in nums]))
        value = fn(*args)
    grads = tape.gradient(value, [args[i] for i in nums])
    grads = jt.tree.map_leaves(lambda g: np.asarray(g.numpy()), grads)
    return value.numpy(), grads[0] if isinstance(argnums, int) else tuple(grads)


def _close(got, want, rtol=1e-10, atol=1e-13):
    value, grads = got
    want_value, want_grads = want
    np.testing.assert_allclose(value, want_value, rtol=rtol)
    for g, w in zip(jt.tree.leaves(grads), jt.tree.leaves(want_grads)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def test_a_deep_network_takes_its_weights_stacked_and_gives_the_eager_gradients():
    layers, x = _layers(8, 5), RNG.normal(size=(3, 5))
    f = jt.value_and_grad(mlp)
    lowered = f.lower(layers, x)
    assert lowered.graph.startswith("graph mlp(layers_i_0: float64[8,n,n], "
                                    "layers_i_1: float64[8,n], x: float64[k,n])")
    assert "# layers_i_0 = stack(layers_0_0, layers_1_0, ..., layers_7_0): passed stacked" \
        in lowered.graph
    assert "# flattened outputs 1, 3, ..., 15 are the rows of" in lowered.graph
    # the kernel's checks of the sizes are the stacks' (not one per pair of layers)
    assert lowered.graph.count("  check ") <= 4
    want = _eager(mlp, (layers, x))
    _close(f(layers, x), want)            # the full path (the kernel's first call)
    _close(f(layers, x), want)            # the generated fast path
    assert "stacked((" in lowered.caller and "unpack(kernel(" in lowered.caller
    flat = lowered.python(*[a for pair in layers for a in pair], x)   # flat results
    _close((flat[0], list(flat[1:])), want)
    numeric = _numeric(lambda w: mlp([(w, layers[0][1])] + layers[1:], x), layers[0][0])
    np.testing.assert_allclose(f(layers, x)[1][0][0], numeric, rtol=1e-6)
    # gradients are rows of one stack, each the shape of its weight; writing one leaves
    # the others as they were
    grads = f(layers, x)[1]
    before = grads[1][0].copy()
    grads[0][0][...] = 7.0
    np.testing.assert_array_equal(grads[1][0], before)


def test_kernel_takes_and_returns_the_flattened_values():
    layers, x = _layers(6, 4), RNG.normal(size=(2, 4))
    f = jt.value_and_grad(mlp)
    kernel = f.kernel(layers, x)
    flat = [a for pair in layers for a in pair] + [x]
    out = kernel(*flat)
    value, grads = _eager(mlp, (layers, x))
    assert len(out) == 1 + len(flat) - 1
    np.testing.assert_allclose(out[0], value, rtol=1e-10)
    for got, want in zip(out[1:], jt.tree.leaves(grads)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


def test_other_sizes_other_dtypes_and_unequal_weights_take_their_own_variants():
    f = jt.value_and_grad(mlp)
    layers, x = _layers(6, 4), RNG.normal(size=(2, 4))
    _close(f(layers, x), _eager(mlp, (layers, x)))
    # other sizes, one signature: the same kernel (its sizes are the stacks')
    wide, xw = _layers(6, 7), RNG.normal(size=(5, 7))
    _close(f(wide, xw), _eager(mlp, (wide, xw)))
    # one weight of float32 through the fast path: not stacked into float64
    mixed = list(layers)
    mixed[2] = (layers[2][0].astype(np.float32), layers[2][1])
    got = f(mixed, x)
    assert got[1][2][0].dtype == np.float32
    _close(got, _eager(mlp, (mixed, x)), rtol=1e-5)
    # the weights of one layer of another width: a variant where no loop rolls them
    uneven = list(layers)
    uneven[3] = (RNG.normal(size=(4, 4)) * 0.4, RNG.normal(size=4) * 0.1)
    uneven[4] = (RNG.normal(size=(4, 3)) * 0.4, RNG.normal(size=3) * 0.1)
    uneven[5] = (RNG.normal(size=(3, 4)) * 0.4, RNG.normal(size=4) * 0.1)
    _close(f(uneven, x), _eager(mlp, (uneven, x)))
    _close(f(layers, x), _eager(mlp, (layers, x)))


def test_stacked_arguments_of_other_shapes_in_the_packed_variant_raise_size_mismatch():
    from jittape.errors import SizeMismatch
    from jittape.passes.packing import stacked
    with pytest.raises(SizeMismatch, match=r"shapes \(2,\), \(3,\) in this call"):
        stacked([np.ones(2), np.ones(3), np.ones(2)], np.dtype(np.float64))
    with pytest.raises(TypeError):
        stacked([np.ones(2), np.ones(2, np.float32), np.ones(2)], np.dtype(np.float64))


def test_weights_read_elsewhere_too_stay_arguments_and_captured_weights_are_constants():
    layers, x = _layers(8, 4), RNG.normal(size=(2, 4))

    def reused(layers, x):          # the first weight is read outside the stack too
        return mlp(layers, x) + np.sum(layers[0][0] ** 2)
    lowered = jt.value_and_grad(reused).lower(layers, x)
    assert "layers_0_0: float64[n,n]" in lowered.graph
    _close(jt.value_and_grad(reused)(layers, x), _eager(reused, (layers, x)))

    def closed(x):                  # items of a captured list: frozen, one constant stack
        return mlp(layers, x)
    f = jt.value_and_grad(closed)
    assert "passed stacked" not in f.lower(x).graph
    _close(f(x), _eager(closed, (x,)))
    _close(f(x), _eager(closed, (x,)))


def test_rows_returned_by_a_function_and_a_stack_of_scalars():
    @jt.function
    def rows(ws):
        s = np.stack(ws) * 2.0
        return [s[k] for k in range(len(ws))]
    ws = [RNG.normal(size=3) for _ in range(5)]
    assert "are the rows of" in rows.lower(ws).graph
    for _ in range(2):
        for got, w in zip(rows(ws), ws):
            np.testing.assert_array_equal(got, 2.0 * w)

    def scalars(a, b, c, d):
        return np.sum(np.stack([a, b, c, d]) ** 2)
    f = jt.value_and_grad(scalars, argnums=(0, 1, 2, 3))
    args = (1.5, np.float64(2.0), 3.0, np.float64(-1.0))
    assert "passed stacked" in f.lower(*args).graph
    for _ in range(2):
        value, grads = f(*args)
        assert value == pytest.approx(16.25)
        assert [float(g) for g in grads] == [3.0, 4.0, 6.0, -2.0]


def test_rows_counted_from_the_end_of_a_value_of_any_size_stay_rows():
    """Rows ``s[-3], s[-2], s[-1]`` of a value whose first axis is a size of the call
    are not packed as rows of the traced size (a regression: they came back as rows 0,
    1 and 2 of a larger value)."""
    @jt.function
    def last(x):
        s = x * 2.0
        return s[-3], s[-2], s[-1]
    for n in (3, 5, 8):
        x = np.arange(2.0 * n).reshape(n, 2)
        for got, want in zip(last(x), (2 * x[-3], 2 * x[-2], 2 * x[-1])):
            np.testing.assert_array_equal(got, want)
