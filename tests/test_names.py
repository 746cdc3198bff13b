"""The public names come from the registry: the committed namespaces and docs op list
are what ``python -m jittape.ops.names`` writes now."""

import numpy as np

import jittape as jt
import jittape.numpy as jnp
from jittape.ops import api, names, numpy_api
from jittape.ops.core import REGISTRY


def test_the_committed_namespaces_match_the_registry():
    stale = [str(path) for path, text in names.outputs().items()
             if not path.exists() or path.read_text() != text]
    assert not stale, ("out of date with the registry: run `python -m jittape.ops.names` "
                       f"({', '.join(stale)})")


def test_every_public_primitive_is_exported_under_its_name():
    for name, prim in REGISTRY.items():
        if name in api.__all__:
            assert getattr(jt, name) is getattr(api, name)
    assert jt.exp is REGISTRY["exp"] and jnp.exp is jt.exp


def test_numpy_names_dispatch_to_the_same_ops():
    for name in numpy_api.__all__:
        assert hasattr(np, name), name
        assert getattr(jnp, name) is getattr(numpy_api, name)
    assert jnp.absolute is jt.abs and jnp.amax is jt.max and jnp.ones is jt.ones
    x = jt.constant(np.arange(3.0))
    np.testing.assert_allclose(jnp.sum(jnp.exp(x)), np.exp(np.arange(3.0)).sum())


def test_a_stale_namespace_warns_and_the_registry_stands_in():
    import pytest
    with pytest.warns(UserWarning, match="run `python -m jittape.ops.names`"):
        found = names.stale("api.py", ImportError("cannot import name 'gone'"),
                            names.jt_namespace())
    assert found == {name: getattr(api, name) for name in api.__all__}
