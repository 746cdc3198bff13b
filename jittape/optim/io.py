"""Saving and loading optimizer states: ``.npz`` files of the arrays and a JSON text of
the structure, read back without pickle (no code is loaded)."""

import json
import os
from typing import Any, Dict, Optional

import numpy as np

from .. import tree
from ..errors import at_user_line
from .base import State, dtype_of, is_traced, shape_of

_FORMAT = "jittape.optim.state/1"
_STATE = f"{State.__module__}.{State.__qualname__}"


def _qualname(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _key(k, where):
    if k is None or isinstance(k, (str, bool, int, float)):
        return k
    raise TypeError(at_user_line(
        f"save_state: dict key {k!r} at {where or 'the top'} is a {type(k).__name__}; "
        "keys must be str, int, float, bool or None to be saved"))


def _encode(td, where=""):
    """The JSON form of a TreeDef: leaves as "leaf", nodes by kind (classes by name)."""
    kind = td.kind
    if kind == "leaf":
        return "leaf"
    if kind == "none":
        return None
    if kind in ("list", "tuple"):
        return {kind: [_encode(c, f"{where}[{j}]") for j, c in enumerate(td.children)]}
    if kind == "dict":
        return {"dict": [[_key(k, where), _encode(c, f"{where}[{k!r}]")]
                         for k, c in zip(td.meta, td.children)]}
    if kind == "dataclass":
        cls, names = td.meta
        return {"dataclass": _qualname(cls), "fields": list(names),
                "children": [_encode(c, f"{where}.{n}") for n, c in zip(names, td.children)]}
    cls = td.meta if kind == "namedtuple" else td.meta[0]
    return {kind: _qualname(cls),
            "children": [_encode(c, f"{where}<{j}>") for j, c in enumerate(td.children)]}


def _decode(node, leaves, path):
    """A pytree of ``leaves`` (an iterator) from ``_encode``'s form. Builds lists,
    tuples, dicts and ``State``; any other class needs ``like``."""
    if node == "leaf":
        return next(leaves)
    if node is None:
        return None
    if "list" in node:
        return [_decode(c, leaves, path) for c in node["list"]]
    if "tuple" in node:
        return tuple(_decode(c, leaves, path) for c in node["tuple"])
    if "dict" in node:
        return {k: _decode(c, leaves, path) for k, c in node["dict"]}
    if node.get("dataclass") == _STATE:
        children = [_decode(c, leaves, path) for c in node["children"]]
        return State(**dict(zip(node["fields"], children)))
    cls = next(v for k, v in node.items() if k != "children" and k != "fields")
    raise ValueError(at_user_line(
        f"load_state({path!r}): the state holds a {cls}, which is rebuilt from a template "
        "only (no code is loaded from the file): pass like=opt.init(params)"))


def save_state(state: Any, path: "str | os.PathLike") -> None:
    """Write an optimizer's state (any pytree of arrays) to ``path``, an ``.npz`` file
    (the name is used as it is), readable by ``load_state``.

    Raises:
      TypeError: a leaf is a traced value (save outside the compiled function), or a
        dict key is not a str, int, float, bool or None.
    """
    leaves, td = tree.flatten(state)
    arrays: Dict[str, Any] = {}
    for k, leaf in enumerate(leaves):
        if is_traced(leaf):
            raise TypeError(at_user_line(
                "save_state: the state holds traced values; save the state a compiled "
                "function returns, outside it"))
        arrays[f"leaf_{k}"] = np.asarray(leaf)
    header = json.dumps({"format": _FORMAT, "structure": _encode(td), "leaves": len(leaves)})
    with open(path, "wb") as f:
        np.savez(f, __header__=np.array(header), **arrays)


def load_state(path: "str | os.PathLike", like: Optional[Any] = None) -> Any:
    """Read a state written by ``save_state``: NumPy arrays in the saved structure.

    Args:
      path: the file.
      like: a state of the same structure (``opt.init(params)``): needed when the
        params are dataclasses, namedtuples or registered classes (the file names the
        classes; it does not load them); the arrays are checked against its shapes and
        dtypes.

    Raises:
      ValueError: the file is not a saved state, or does not match ``like``.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["__header__"]))
            if header.get("format") != _FORMAT:
                raise KeyError("format")
            leaves = [data[f"leaf_{k}"] for k in range(header["leaves"])]
    except (KeyError, ValueError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(at_user_line(
            f"load_state({str(path)!r}): not a state written by jt.optim.save_state "
            f"({type(e).__name__}: {e})")) from None
    leaves = [a[()] if a.ndim == 0 else a for a in leaves]   # (scalars, as states hold them)
    if like is None:
        return _decode(header["structure"], iter(leaves), str(path))
    like_leaves, like_td = tree.flatten(like)
    if _encode(like_td) != header["structure"]:
        raise ValueError(at_user_line(
            f"load_state({str(path)!r}): the saved state's structure differs from like's "
            f"({like_td!r})"))
    for k, (a, b) in enumerate(zip(leaves, like_leaves)):
        shape, dtype = tuple(int(d) for d in shape_of(b)), dtype_of(b)
        if a.shape != shape or a.dtype != dtype:
            raise ValueError(at_user_line(
                f"load_state({str(path)!r}): saved leaf {k} is {a.dtype.name}{list(a.shape)}, "
                f"like's is {dtype.name}{list(shape)}"))
    return tree.unflatten(like_td, leaves)
