"""Pytrees: the registry, dataclasses, and their use by the tape and compiled functions."""

import collections
import dataclasses

import numpy as np
import pytest

import jittape as jt
from jittape import tree

pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")


@dataclasses.dataclass
class Params:
    w: object
    b: object = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: object
    y: object


@dataclasses.dataclass
class WithDerived:
    a: object
    size: int = dataclasses.field(init=False)

    def __post_init__(self):
        self.size = np.size(self.a)


Pair = collections.namedtuple("Pair", "first second")


class Linear:
    """A registered class: two arrays as children, a name as static data."""

    def __init__(self, w, b, name):
        self.w, self.b, self.name = w, b, name


tree.register(Linear, lambda m: ((m.w, m.b), m.name),
              lambda name, children: Linear(*children, name))


# -- the registry ----------------------------------------------------------------------

def test_round_trip_of_nested_nodes_of_every_kind():
    value = {"p": Params(1, [2, 3]), "f": Frozen(Pair(4, None), Linear({"q": 5}, 6, "lin")),
             "t": (7,)}
    leaves, td = tree.flatten(value)
    # dicts by sorted key, dataclasses and namedtuples by field, registered classes by children
    assert leaves == [4, 5, 6, 1, 2, 3, 7]
    out = tree.unflatten(td, [x * 10 for x in leaves])
    assert isinstance(out["p"], Params) and out["p"] == Params(10, [20, 30])
    assert isinstance(out["f"], Frozen) and out["f"].x == Pair(40, None)
    lin = out["f"].y
    assert isinstance(lin, Linear) and lin.w == {"q": 50} and lin.b == 60 and lin.name == "lin"
    assert out["t"] == (70,)
    assert td.num_leaves == 7


def test_dataclass_children_are_its_init_fields():
    assert tree.dataclass_fields(WithDerived) == ("a",)
    assert tree.dataclass_fields(Linear) is None and tree.dataclass_fields(dict) is None
    leaves, td = tree.flatten(WithDerived(np.ones(3)))
    assert len(leaves) == 1
    out = tree.unflatten(td, [np.ones(5)])
    assert out.size == 5                     # made again by __post_init__


def test_frozen_dataclass_is_rebuilt():
    out = tree.map(lambda v: v + 1, Frozen(1.0, [2.0]))
    assert out == Frozen(2.0, [3.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.x = 0


def test_a_dataclass_class_and_a_registered_subclass_are_leaves():
    class Sub(Linear):
        pass
    assert tree.leaves(Params) == [Params]
    sub = Sub(1, 2, "s")
    assert tree.leaves(sub) == [sub]


def test_classes_made_at_run_time_do_not_pile_up(monkeypatch):
    monkeypatch.setattr(tree, "_MAX_CLASSES", 8)
    for k in range(20):
        cls = dataclasses.make_dataclass(f"D{k}", ["x", "y"])
        empty = dataclasses.make_dataclass(f"E{k}", [])
        leaves, td = tree.flatten([cls(k, [k]), empty(), Params(k)])
        assert leaves == [k, k, k]
        assert tree.unflatten(td, leaves) == [cls(k, [k]), empty(), Params(k)]
    assert len(tree._KINDS) <= 8


def test_structures_are_equal_and_hash_alike_when_equal():
    a = tree.structure([Params(np.ones(2), np.ones(3)), Linear(1, 2, "l")])
    b = tree.structure([Params(np.zeros(4), np.zeros(1)), Linear(3, 4, "l")])
    assert a == b and hash(a) == hash(b) and a.key() == b.key()
    assert tree.structure(Linear(1, 2, "other")) != tree.structure(Linear(1, 2, "l"))
    assert tree.structure(Params(1, 2)) != tree.structure(Frozen(1, 2))
    assert tree.structure(Params(1, 2)) != tree.structure(Params(1, None))
    assert tree.structure(Params(1, 2)) != tree.structure({"w": 1, "b": 2})


def test_keep_none_takes_none_as_a_leaf():
    leaves, td = tree.flatten(Params(1, None), keep_none=True)
    assert leaves == [1, None]
    assert tree.unflatten(td, [2, 3]) == Params(2, 3)


def test_map_over_several_trees():
    out = tree.map(lambda p, g: p - g, Params(np.ones(2), 3.0), Params(np.ones(2), 1.0))
    assert isinstance(out, Params) and out.b == 2.0
    # where the first tree has a leaf the others may hold anything, None included
    assert tree.map(lambda p, g: g is None, [1, 2], [None, 3]) == [True, False]
    with pytest.raises(ValueError, match=r"tree 1 .* at \[1\]: expected Params, got Frozen"):
        tree.map(lambda a, b: a, [1, Params(1, 2)], [1, Frozen(1, 2)])
    with pytest.raises(ValueError, match=r"at \[0\]\.w: expected a list of 2, got a list of 1"):
        tree.map(lambda a, b: a, [Params([1, 2])], [Params([1])])
    with pytest.raises(ValueError, match="Linear with aux_data 'a'"):
        tree.map(lambda a, b: a, Linear(1, 2, "a"), Linear(1, 2, "b"))


def test_map_leaves_and_leaves():
    assert tree.map_leaves(str, {"a": Params(1)}) == {"a": Params("1")}
    assert tree.leaves(Pair(Params(1, 2), 3)) == [1, 2, 3]


def test_unflatten_checks_the_number_of_leaves():
    td = tree.structure(Params(1, 2))
    with pytest.raises(ValueError, match="2 leaves, got 3"):
        tree.unflatten(td, [1, 2, 3])


def test_register_errors_name_the_class():
    class Twice:
        pass
    tree.register(Twice, lambda t: ((), None), lambda aux, children: Twice())
    with pytest.raises(ValueError, match="Twice is already registered"):
        tree.register(Twice, lambda t: ((), None), lambda aux, children: Twice())
    with pytest.raises(ValueError, match="built-in pytree node"):
        tree.register(list, list, list)
    with pytest.raises(TypeError, match="must be a class"):
        tree.register(Twice(), list, list)
    with pytest.raises(TypeError, match=r"register\(.*Uncallable\): unflatten must be callable"):
        tree.register(type("Uncallable", (), {}), lambda t: ((), None), None)


@pytest.mark.parametrize("flatten, message", [
    (lambda t: 1, "NotIterable must return a pair \\(children, aux_data\\), got int"),
    (lambda t: (1, None), "NotIterable returned children of type int, which is not iterable"),
    (lambda t: ((1,), [2]), "NotIterable returned aux_data of type list, which is not hashable"),
])
def test_a_bad_flatten_function_raises_naming_the_class(flatten, message):
    cls = type("NotIterable", (), {})
    tree.register(cls, flatten, lambda aux, children: cls())
    with pytest.raises(TypeError, match=message):
        tree.flatten([cls()])


# -- the tape --------------------------------------------------------------------------

def _loss(p, x):
    return jt.reduce_sum((jt.matmul(x, p.w) + p.b) ** 2)


X = np.arange(6.0).reshape(2, 3)
W = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
B = np.array([0.5, -0.5])


def _expected_grads():
    r = X @ W + B
    return X.T @ (2 * r), (2 * r).sum(axis=0)


def test_tape_gradient_of_a_dataclass_of_variables():
    p = Params(jt.Variable(W), jt.Variable(B))
    with jt.GradientTape() as tape:
        loss = _loss(p, X)
    g = tape.gradient(loss, p)
    assert isinstance(g, Params)
    gw, gb = _expected_grads()
    np.testing.assert_allclose(g.w.numpy(), gw)
    np.testing.assert_allclose(g.b.numpy(), gb)


def test_tape_watches_a_frozen_dataclass_of_tensors():
    @dataclasses.dataclass(frozen=True)
    class Model:
        w: object
        b: object
        unused: object

    m = Model(jt.constant(W), jt.constant(B), jt.constant(np.ones(4)))
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(m)
        loss = _loss(m, X)
        y = jt.matmul(X, m.w)
    g = tape.gradient(loss, m)
    assert isinstance(g, Model) and g.unused is None
    np.testing.assert_allclose(g.b.numpy(), _expected_grads()[1])
    z = tape.gradient(loss, m, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    assert z.unused.shape == (4,) and not z.unused.numpy().any()
    jac = tape.jacobian(y, m)
    assert isinstance(jac, Model) and jac.w.shape == (2, 2, 3, 2) and jac.unused is None


def test_tape_with_a_registered_class_and_output_gradients_of_a_dataclass():
    lin = Linear(jt.Variable(W), jt.Variable(B), "layer")
    with jt.GradientTape() as tape:
        y = jt.matmul(X, lin.w) + lin.b
    seed = np.array([[1.0, 0.0], [0.0, 2.0]])
    g = tape.gradient(Params(y), lin, output_gradients=Params(seed))
    assert isinstance(g, Linear) and g.name == "layer"
    np.testing.assert_allclose(g.w.numpy(), X.T @ seed)
    np.testing.assert_allclose(g.b.numpy(), seed.sum(axis=0))


def test_tape_sources_must_be_tensors():
    x = jt.Variable(1.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x * 2
    with pytest.raises(TypeError, match="sources must be jittape Tensors"):
        tape.gradient(y, np.ones(3))
    with pytest.raises(TypeError, match="got ndarray \\(source 0"):
        tape.gradient(y, Params(np.ones(3), x))


# -- compiled functions ----------------------------------------------------------------
# These go through the compiler's general path (its fast path takes dicts, lists and
# tuples only), which flattens and rebuilds arguments and results with jt.tree.

@pytest.mark.usefixtures("cache_dir")
def test_compiled_grad_of_a_dataclass_of_arrays():
    grad = jt.grad(_loss)
    gw, gb = _expected_grads()
    for _ in range(2):                      # compiled, then from the cache
        g = grad(Params(W, B), X)
        assert isinstance(g, Params)
        np.testing.assert_allclose(g.w, gw)
        np.testing.assert_allclose(g.b, gb)
    assert grad.cache_info().traces == 1
    g = grad(Linear(W, B, "lin"), X)
    assert isinstance(g, Linear) and g.name == "lin"
    np.testing.assert_allclose(g.w, gw)
    # other structures and dtypes in turn: each call gets its own signature's result
    frozen = dataclasses.make_dataclass("FrozenParams", ["w", "b"], frozen=True)
    for p in [Params(W, B), Params(W.astype(np.float32), B), frozen(W, B), Params(W, B),
              Params(W, 0.5), Linear(W, B, "lin")]:
        g = grad(p, X)
        assert type(g) is type(p) and g.w.dtype == p.w.dtype
        np.testing.assert_allclose(g.w, X.T @ (2 * (X @ W + p.b)), rtol=1e-5)


@pytest.mark.usefixtures("cache_dir")
def test_compiled_value_and_grad_with_aux():
    def loss(p, x):
        return _loss(p, x), {"b": p.b * 2}

    (value, aux), g = jt.value_and_grad(loss, has_aux=True)(Params(W, B), X)
    np.testing.assert_allclose(value, ((X @ W + B) ** 2).sum())
    np.testing.assert_allclose(aux["b"], 2 * B)
    assert isinstance(g, Params)
    np.testing.assert_allclose(g.b, _expected_grads()[1])
    value, g = jt.value_and_grad(lambda ps, x: _loss(ps[0], x) * ps[1])([Params(W, B), 2.0], X)
    assert isinstance(g[0], Params) and g[1] == pytest.approx(value / 2)


@pytest.mark.usefixtures("cache_dir")
def test_compiled_function_takes_and_returns_dataclasses():
    f = jt.function(lambda p: Frozen(p.w * 2.0, Params(p.b + 1.0)))
    for _ in range(2):
        out = f(Params(W, B))
        assert isinstance(out, Frozen) and isinstance(out.y, Params) and out.y.b is None
        np.testing.assert_allclose(out.x, 2 * W)
        np.testing.assert_allclose(out.y.w, B + 1)
