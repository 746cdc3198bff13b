"""Region ops: the Jacobian loop is one node whose parameter holds its body sub-graph."""

import numpy as np
import pytest

import jittape as jt
from jittape import control, serialize


def _f(x, w):
    return jt.tanh(x * w) * jt.sum(x)


def test_the_jacobian_loop_is_a_region_with_its_body():
    x, w = np.linspace(-1, 1, 4), np.full(4, 0.5)
    low = jt.jacobian(_f, argnums=(0, 1)).lower(x, w)
    regions = [n for n in low.ir.nodes if n.prim.regions]
    assert len(regions) == 1 and regions[0].prim is control.JACOBIAN_LOOP
    body = regions[0].params["body"]
    assert body.inputs[0].dtype == np.int64                     # the loop's index
    assert len(body.outputs) == 2                               # a row of each Jacobian
    assert all(any(v is u for u in body.inputs) for v in regions[0].inputs)
    assert "jacobian_loop(" in low.graph and " over %" in low.graph and "yield" in low.graph
    jx, jw = jt.jacobian(_f, argnums=(0, 1))(x, w)
    t = np.tanh(x * w)
    want_x = np.diag((1 - t * t) * w) * x.sum() + t[:, None]
    np.testing.assert_allclose(jx, want_x, rtol=1e-12)
    np.testing.assert_allclose(jw, np.diag((1 - t * t) * x) * x.sum(), rtol=1e-12)


def test_a_region_serializes_with_its_body():
    x = np.linspace(-1, 1, 3)
    graph = jt.hessian(lambda x: jt.sum(jt.sin(x) * x))(x) is not None and \
        jt.hessian(lambda x: jt.sum(jt.sin(x) * x)).lower(x).ir
    back = serialize.loads(serialize.dumps(graph))
    assert back.key_text() == graph.key_text()
    (region,) = [n for n in back.nodes if n.prim.regions]
    assert region.params["body"].nodes


def test_differentiating_through_a_jacobian_says_so():
    @jt.function
    def f(x):
        with jt.GradientTape() as outer:
            outer.watch(x)
            with jt.GradientTape() as inner:
                inner.watch(x)
                y = jt.sin(x)
            j = inner.jacobian(y, x)
            s = jt.sum(j)
        return outer.gradient(s, x)

    with pytest.raises(jt.UnsupportedError, match="jacobian_loop|Jacobian"):
        f(np.ones(3))


def test_a_jacobian_the_result_does_not_use_blocks_nothing():
    def f(x):
        with jt.GradientTape() as t:
            t.watch(x)
            y = jt.tanh(x) * 2.0
        return jt.sum(x ** 2), t.jacobian(y, x)

    x = np.linspace(-1, 1, 3)
    (value, jac), g = jt.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, 2 * x)
    np.testing.assert_allclose(jac, np.diag(2 * (1 - np.tanh(x) ** 2)), rtol=1e-12)

    @jt.function
    def h(x):
        with jt.GradientTape() as outer:
            outer.watch(x)
            with jt.GradientTape() as inner:
                inner.watch(x)
                y = jt.tanh(x) * 2.0
            jac = inner.jacobian(y, x)
            loss = jt.sum(y)
        return outer.gradient(loss, x), jac

    g, _ = h(x)
    np.testing.assert_allclose(g, 2 * (1 - np.tanh(x) ** 2), rtol=1e-12)


def test_a_branch_not_taken_does_not_run():
    # a branch's work that read only outer values was computed before the branch, so
    # an index the other branch guards raised (and a costly branch always ran)
    @jt.function
    def pick(x, i):
        return jt.cond(i < 3, lambda: x[i], lambda: x[0] * 0.0)

    x = np.arange(3.0)
    assert pick(x, np.int64(1)) == 1.0 and pick(x, np.int64(5)) == 0.0
    g = jt.grad(lambda x, i: jt.cond(i < 3, lambda: x[i] ** 2, lambda: jt.numpy.sum(x)))
    np.testing.assert_array_equal(g(x, np.int64(2)), [0.0, 0.0, 4.0])
    np.testing.assert_array_equal(g(x, np.int64(7)), [1.0, 1.0, 1.0])
