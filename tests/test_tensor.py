"""Tensors and Variables: dtype rules, printing, operators, NumPy interop, stability."""

import numpy as np
import pytest

import jittape as jt
import jittape.numpy as jnp


def test_dtype_rules():
    assert jt.constant(1.5).dtype == jt.float32
    assert jt.constant(2).dtype == jt.int32
    assert jt.constant(True).dtype == jt.bool_
    assert jt.constant([[1.0, 2.0]]).dtype == jt.float32
    assert jt.constant([1, 2]).dtype == jt.int32
    assert jt.constant(np.ones(2)).dtype == jt.float64          # NumPy arrays keep their dtype
    assert jt.constant(np.ones(2, np.int64)).dtype == jt.int64
    assert jt.constant([1, 2], dtype=jt.float64).dtype == jt.float64
    assert jt.constant([2**40]).dtype == jt.int64                # too big for int32
    x = jt.constant([1.0, 2.0])
    assert (x * 2.5).dtype == jt.float32                          # Python scalars never widen
    assert (x + 1).dtype == jt.float32
    assert (x + np.ones(2)).dtype == jt.float64                   # NumPy promotion otherwise
    assert (jt.constant([1, 2]) / 2).dtype == jt.float64          # true division of ints


def test_tensor_attributes_and_conversions():
    t = jt.constant([[1.0, 2.0, 3.0]])
    assert t.shape == (1, 3) and t.ndim == 2 and t.size == 3 and len(t) == 1
    assert t.T.shape == (3, 1)
    assert isinstance(t.numpy(), np.ndarray) and np.asarray(t).shape == (1, 3)
    assert float(jt.constant([[2.5]])) == 2.5 and int(jt.constant(3)) == 3
    assert bool(jt.constant(2.0) % 2 == 0)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t > 0)
    with pytest.raises(TypeError):
        hash(t)
    assert [float(r) for r in jt.constant([1.0, 2.0])] == [1.0, 2.0]


def test_printing_like_tensorflow():
    assert repr(jt.constant(36.0)) == "<jt.Tensor: shape=(), dtype=float32, numpy=36.0>"
    assert str(jt.constant(4.0)) == "jt.Tensor(4.0, shape=(), dtype=float32)"
    assert str(jt.constant([[56.246506, 14.48735, 55.163166]])) == \
        "jt.Tensor([[56.246506 14.48735  55.163166]], shape=(1, 3), dtype=float32)"
    assert repr(jt.constant([[1.0, 2.0, 3.0]])) == \
        "<jt.Tensor: shape=(1, 3), dtype=float32, numpy=array([[1., 2., 3.]], dtype=float32)>"
    assert str(jt.constant([[1, 2], [3, 4]])) == \
        "jt.Tensor(\n[[1 2]\n [3 4]], shape=(2, 2), dtype=int32)"


def test_variables():
    v = jt.Variable([1.0, 2.0], name="w")
    assert v.name == "w:0" and v.trainable and v.dtype == jt.float32
    assert jt.Variable(1.0).name == "Variable:0"
    assert not jt.Variable(1.0, trainable=False).trainable
    v.assign([3.0, 4.0])
    v.assign_add([1.0, 1.0])
    v.assign_sub(jt.constant([0.5, 0.5]))
    np.testing.assert_array_equal(v.numpy(), [3.5, 4.5])
    with pytest.raises(ValueError, match="cannot assign a value of shape"):
        v.assign([1.0, 2.0, 3.0])
    source = np.array([1.0, 2.0], np.float32)
    v.assign(source)
    source[0] = 100.0                                   # assign copies its argument
    assert v.numpy()[0] == 1.0
    snapshot = v.read_value()
    v.assign([9.0, 9.0])
    assert snapshot.numpy().tolist() == [1.0, 2.0]
    assert repr(jt.Variable(2.0, name="x")) == \
        "<jt.Variable 'x:0' shape=() dtype=float32, numpy=2.0>"


def test_operators():
    a = jt.constant([3.0, -4.0])
    b = jt.constant([2.0, 3.0])
    np.testing.assert_allclose((a + b).numpy(), [5, -1])
    np.testing.assert_allclose((a - b).numpy(), [1, -7])
    np.testing.assert_allclose((1 - b).numpy(), [-1, -2])
    np.testing.assert_allclose((a * b).numpy(), [6, -12])
    np.testing.assert_allclose((a / b).numpy(), [1.5, -4 / 3], rtol=1e-6)
    np.testing.assert_allclose((a // b).numpy(), [1, -2])
    np.testing.assert_allclose((a % b).numpy(), [1, 2])
    np.testing.assert_allclose((b ** 2).numpy(), [4, 9])
    np.testing.assert_allclose((2 ** b).numpy(), [4, 8])
    np.testing.assert_allclose((-a).numpy(), [-3, 4])
    np.testing.assert_allclose(abs(a).numpy(), [3, 4])
    assert (a < b).dtype == jt.bool_ and (a == a).numpy().all() and not (a != a).numpy().any()
    m = jt.constant(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose((m @ jt.ones((3,))).numpy(), [3, 12])
    assert m[1, ::2].numpy().tolist() == [3.0, 5.0]
    assert m[None, ..., -1].shape == (1, 2)
    assert m[[1, 0, 1]].shape == (3, 3)
    assert m[m > 2].numpy().tolist() == [3.0, 4.0, 5.0]        # boolean masks in eager code
    assert m.reshape(3, 2).shape == (3, 2) and m.sum(axis=0).numpy().tolist() == [3.0, 5.0, 7.0]


def test_gradient_through_indexing_with_repeated_indices():
    x = jt.Variable([1.0, 2.0, 3.0])
    with jt.GradientTape() as tape:
        y = jt.sum(x[[0, 0, 2]] * jt.constant([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [11.0, 0.0, 100.0])


def softmax_regression_loss(W, X, labels):
    """An unmodified NumPy function."""
    logits = X @ W
    logits = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(np.sum(log_probs * labels, axis=1))


def test_unmodified_numpy_function_on_the_tape():
    rng = np.random.default_rng(0)
    W0 = rng.normal(size=(4, 3))
    X = rng.normal(size=(5, 4))
    labels = np.eye(3)[rng.integers(0, 3, size=5)]
    W = jt.Variable(W0)
    with jt.GradientTape() as tape:
        loss = softmax_regression_loss(W, X, labels)
    assert isinstance(loss, jt.Tensor)
    np.testing.assert_allclose(float(loss), softmax_regression_loss(W0, X, labels), rtol=1e-12)
    g = tape.gradient(loss, W).numpy()
    logits = X @ W0
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(g, X.T @ (p - labels) / 5, rtol=1e-10)


def test_jittape_numpy_namespace_mirrors_numpy():
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    assert isinstance(jnp.exp(x), jt.Tensor)
    np.testing.assert_allclose(jnp.sum(x, axis=0).numpy(), [4.0, 6.0])
    np.testing.assert_allclose(jnp.logaddexp(x, x).numpy(), np.logaddexp(x.numpy(), x.numpy()),
                               rtol=1e-6)
    assert jnp.concatenate([x, x]).shape == (4, 2) and jnp.stack([x, x], axis=2).shape == (2, 2, 2)
    assert jnp.float32 is jt.float32


@pytest.mark.parametrize("value", [-1000.0, -100.0, 100.0, 1000.0])
def test_stable_functions_have_finite_values_and_gradients(value):
    x = jt.Variable([value, 0.0, -value / 2])
    with jt.GradientTape(persistent=True) as tape:
        outs = {
            "softplus": jt.softplus(x), "sigmoid": jt.sigmoid(x),
            "logsumexp": jt.logsumexp(x), "log_softmax": jt.log_softmax(x),
            "softmax": jt.softmax(x),
            "sparse_ce": jt.sparse_softmax_cross_entropy(jt.constant(1), x),
            "ce": jt.softmax_cross_entropy(jt.constant([0.2, 0.3, 0.5]), x),
        }
    for name, y in outs.items():
        assert np.all(np.isfinite(y.numpy())), name
        g = tape.gradient(y, x)
        assert np.all(np.isfinite(g.numpy())), name
    np.testing.assert_allclose(float(outs["logsumexp"]), max(value, 0.0, -value / 2), rtol=1e-6)


def test_cross_entropy_matches_definition():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 5))
    labels = rng.integers(0, 5, size=4)
    ce = jt.sparse_softmax_cross_entropy(jt.constant(labels), jt.constant(logits)).numpy()
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(ce, -np.log(p[np.arange(4), labels]), rtol=1e-12)


def test_creation_ops():
    assert jt.zeros((2, 3)).dtype == jt.float32 and jt.ones(3, jt.int32).dtype == jt.int32
    assert jt.full((2,), 7).dtype == jt.int32 and jt.full((2,), 0.5).dtype == jt.float32
    assert jt.eye(3).numpy().trace() == 3.0
    assert jt.arange(5).dtype == jt.int32 and jt.arange(0.0, 1.0, 0.25).shape == (4,)
    assert jt.linspace(-15.0, 15.0, 151).dtype == jt.float32
    assert jt.zeros_like(jt.constant([1, 2])).dtype == jt.int32
    assert np.zeros_like(jt.constant([1.0])).dtype == jt.float32


def test_linspace_of_tensor_endpoints_and_all_any_methods():
    # tensor endpoints: their dtype, NumPy's values, exact at both ends, with gradients
    a, b = jt.constant(np.float64(1.2)), jt.constant(np.float64(-3.4))
    np.testing.assert_allclose(jt.linspace(a, b, 5).numpy(), np.linspace(1.2, -3.4, 5),
                               rtol=1e-15)
    assert jt.linspace(a, b, 0).shape == (0,) and jt.linspace(a, b, 1).numpy()[0] == 1.2
    g = jt.grad(lambda a, b: jt.sum(jt.linspace(a, b, 5) * np.arange(5.0)), argnums=(0, 1))(
        1.2, -3.4)
    np.testing.assert_allclose(g, [np.sum((1 - np.linspace(0, 1, 5)) * np.arange(5.0)),
                                   np.sum(np.linspace(0, 1, 5) * np.arange(5.0))])
    t = jt.constant(np.array([[True, False], [True, True]]))
    assert not t.all() and t.any() and t.all(axis=1).numpy().tolist() == [False, True]
    assert jt.function(lambda x: (x > 0).any(axis=0, keepdims=True))(
        np.array([[1.0, -1.0]])).tolist() == [[True, False]]


def test_random_shapes_and_reproducibility():
    jt.random.set_seed(7)
    a = jt.random.normal((3, 2))
    b = jt.random.uniform((4,), minval=-1, maxval=1, dtype=jt.float64)
    jt.random.set_seed(7)
    assert np.array_equal(jt.random.normal((3, 2)).numpy(), a.numpy())
    assert a.dtype == jt.float32 and b.dtype == jt.float64 and np.all(np.abs(b.numpy()) <= 1)


def test_dense_layer():
    layer = jt.nn.Dense(3, activation=jt.tanh)
    x = jt.constant(np.ones((2, 4), np.float32))
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(layer(x))
    assert layer.kernel.shape == (4, 3) and layer.bias.shape == (3,)
    assert layer.kernel.name.endswith("/kernel:0")
    grads = tape.gradient(y, layer.trainable_variables)
    assert [g.shape for g in grads] == [(4, 3), (3,)]
    with pytest.raises(ValueError, match="unknown activation"):
        jt.nn.Dense(2, activation="swishy")
