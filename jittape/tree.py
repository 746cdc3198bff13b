"""Pytrees: nested structures of leaves, flattened to a list and rebuilt.

Nodes are lists, tuples, dicts, namedtuples, dataclasses (their ``init`` fields) and the
classes given to ``register``; ``None`` is an empty node; anything else is a leaf.
Dicts are flattened in sorted key order, so equal structures flatten alike.

What a class is (a node kind, or a leaf) is found once per class and kept in
``_KINDS``: ``flatten`` runs on every call of a compiled function and of
``GradientTape.gradient``, and one dict lookup per value is cheaper than walking
isinstance checks for each array.
"""

import dataclasses
from .errors import at_user_line


class TreeDef:
    """The structure of a nested value with its leaves taken out."""

    __slots__ = ("kind", "meta", "children", "num_leaves", "_key")

    def __init__(self, kind, meta, children, num_leaves=None):
        self.kind = kind          # 'leaf', 'none', 'list', 'tuple', 'namedtuple', 'dict',
        #                           'dataclass', 'custom'
        self.meta = meta          # dict keys / namedtuple class / (dataclass, field names)
        #                           / (registered class, aux_data)
        self.children = children
        if num_leaves is None:
            num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in children)
        self.num_leaves = num_leaves
        self._key = None

    def key(self):
        """A hashable description of the structure."""
        if self._key is None:
            self._key = (self.kind, self.meta if self.kind != "namedtuple" else id(self.meta),
                         tuple(c.key() for c in self.children))
        return self._key

    def __eq__(self, other):
        return isinstance(other, TreeDef) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        kind = self.kind
        if kind in ("namedtuple", "dataclass", "custom"):
            cls = self.meta if kind == "namedtuple" else self.meta[0]
            kind = cls.__qualname__
        return f"TreeDef({kind}, {len(self.children)} children, {self.num_leaves} leaves)"


_LEAF = TreeDef("leaf", None, ())
_NONE = TreeDef("none", None, ())


class _Registered:
    __slots__ = ("flatten", "unflatten")

    def __init__(self, flatten, unflatten):
        self.flatten = flatten
        self.unflatten = unflatten


_REGISTRY = {}                  # class -> _Registered
_FIELDS = {}                    # dataclass -> names of its init fields
_BUILTIN_KINDS = {list: "list", tuple: "tuple", dict: "dict", type(None): "none"}
_KINDS = dict(_BUILTIN_KINDS)   # class -> node kind, or None for a leaf class
_MAX_CLASSES = 4096             # classes made at run time must not pile up here
_FLAT = {}                      # (kind, n) -> the TreeDef of a list/tuple of n leaves
_MAX_FLAT = 64


def register(cls, flatten, unflatten):
    """Make instances of ``cls`` pytree nodes (JAX's ``register_pytree_node``).

    Args:
      cls: the class; only its exact instances are nodes (not its subclasses').
      flatten: ``flatten(obj) -> (children, aux_data)``: ``children`` an iterable of
        subtrees, ``aux_data`` hashable static data that equal structures share.
      unflatten: ``unflatten(aux_data, children) -> obj``, ``children`` a tuple.

    Raises:
      TypeError: ``cls`` is not a class, or ``flatten``/``unflatten`` not callable.
      ValueError: ``cls`` is registered already, or is list, tuple, dict or NoneType.
    """
    if not isinstance(cls, type):
        raise TypeError(at_user_line(f"jt.tree.register: the first argument must be a class, got "
                        f"{type(cls).__name__}"))
    name = _name(cls)
    for what, fn in (("flatten", flatten), ("unflatten", unflatten)):
        if not callable(fn):
            raise TypeError(at_user_line(f"jt.tree.register({name}): {what} must be callable, got "
                            f"{type(fn).__name__}"))
    if cls in _BUILTIN_KINDS:
        raise ValueError(at_user_line(f"jt.tree.register: {name} is a built-in pytree node and cannot "
                         "be registered"))
    if cls in _REGISTRY:
        raise ValueError(at_user_line(f"jt.tree.register: {name} is already registered"))
    _REGISTRY[cls] = _Registered(flatten, unflatten)
    _KINDS.pop(cls, None)


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _classify(cls):
    """The node kind of instances of ``cls`` (None: a leaf), kept in ``_KINDS``."""
    if cls in _REGISTRY:
        kind = "custom"
    elif issubclass(cls, dict):
        kind = "dict"
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
        kind = "namedtuple"
    elif issubclass(cls, list):
        kind = "list"
    elif issubclass(cls, tuple):
        kind = "tuple"
    elif dataclasses.is_dataclass(cls):
        kind = "dataclass"
    else:
        kind = None
    if len(_KINDS) >= _MAX_CLASSES:
        _KINDS.clear()
        _KINDS.update(_BUILTIN_KINDS)
        _FIELDS.clear()
    _KINDS[cls] = kind
    if kind == "dataclass":
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return kind


_UNSEEN = object()


def flatten(tree, keep_none=False):
    """Flatten a pytree.

    Args:
      tree: a pytree.
      keep_none: take ``None`` as a leaf, not as an empty node.

    Returns:
      ``(leaves, treedef)``: the leaves in order (dicts by sorted keys, dataclasses by
      field order), and the structure, which ``unflatten`` fills with new leaves.
    """
    leaves = []
    treedef = _flatten(tree, leaves, keep_none)
    return leaves, treedef


def _flatten(tree, leaves, keep_none):
    cls = tree.__class__
    kind = _KINDS.get(cls, _UNSEEN)
    if kind is _UNSEEN:
        kind = _classify(cls)
    if kind is None:
        leaves.append(tree)
        return _LEAF
    start = len(leaves)
    if kind == "list" or kind == "tuple":
        children = []
        flat = True
        for c in tree:
            if _KINDS.get(c.__class__, _UNSEEN) is None:
                leaves.append(c)          # a leaf of a class seen before
                children.append(_LEAF)
            else:
                td = _flatten(c, leaves, keep_none)
                flat = flat and td is _LEAF
                children.append(td)
        if flat:
            return _flat(kind, len(children))
        return TreeDef(kind, None, tuple(children), len(leaves) - start)
    if kind == "dict":
        keys = sorted(tree, key=_sort_key)
        children = []
        for k in keys:
            c = tree[k]
            if _KINDS.get(c.__class__, _UNSEEN) is None:
                leaves.append(c)
                children.append(_LEAF)
            else:
                children.append(_flatten(c, leaves, keep_none))
        return TreeDef("dict", tuple(keys), tuple(children), len(leaves) - start)
    if kind == "none":
        if keep_none:
            leaves.append(tree)
            return _LEAF
        return _NONE
    if kind == "namedtuple":
        children = tuple([_flatten(c, leaves, keep_none) for c in tree])
        return TreeDef("namedtuple", cls, children, len(leaves) - start)
    if kind == "dataclass":
        names = _field_names(cls)
        children = tuple([_flatten(getattr(tree, n), leaves, keep_none) for n in names])
        return TreeDef("dataclass", (cls, names), children, len(leaves) - start)
    subtrees, aux = _custom_flatten(cls, tree)
    children = tuple([_flatten(c, leaves, keep_none) for c in subtrees])
    return TreeDef("custom", (cls, aux), children, len(leaves) - start)


def _field_names(cls):
    names = _FIELDS.get(cls)
    if names is None:                     # _FIELDS was emptied since cls was classified
        _classify(cls)
        names = _FIELDS[cls]
    return names


def _flat(kind, n):
    """The shared TreeDef of a list or tuple of ``n`` leaves (its key made once)."""
    td = _FLAT.get((kind, n))
    if td is None:
        td = TreeDef(kind, None, (_LEAF,) * n, n)
        if n <= _MAX_FLAT:
            _FLAT[kind, n] = td
    return td


def _custom_flatten(cls, tree):
    out = _REGISTRY[cls].flatten(tree)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(at_user_line(f"jt.tree: the flatten function registered for {_name(cls)} must "
                        f"return a pair (children, aux_data), got {type(out).__name__}"))
    children, aux = out
    try:
        children = iter(children)
    except TypeError:
        raise TypeError(at_user_line(f"jt.tree: the flatten function registered for {_name(cls)} returned "
                        f"children of type {type(children).__name__}, which is not "
                        "iterable")) from None
    try:
        hash(aux)
    except TypeError:
        raise TypeError(at_user_line(f"jt.tree: the flatten function registered for {_name(cls)} returned "
                        f"aux_data of type {type(aux).__name__}, which is not hashable "
                        "(use a tuple, or keep arrays among the children)")) from None
    return children, aux


def _sort_key(k):
    return (type(k).__name__, k)


def unflatten(treedef, leaves):
    """Rebuild the structure ``treedef`` with ``leaves`` (a sequence or iterable) in order."""
    if isinstance(leaves, (list, tuple)) and len(leaves) != treedef.num_leaves:
        raise ValueError(at_user_line(f"jt.tree.unflatten: the structure has {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}"))
    return _unflatten(treedef, iter(leaves))


def _unflatten(td, it):
    kind = td.kind
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = [_unflatten(c, it) for c in td.children]
    if kind == "list":
        return children
    if kind == "tuple":
        return tuple(children)
    if kind == "dict":
        return dict(zip(td.meta, children))
    if kind == "namedtuple":
        return td.meta(*children)
    cls, data = td.meta
    if kind == "dataclass":
        return cls(**dict(zip(data, children)))
    return _REGISTRY[cls].unflatten(data, tuple(children))


def dataclass_fields(cls):
    """The names of the fields holding the children of ``cls``'s instances, in
    ``flatten``'s order, when they are dataclass nodes (a dataclass not registered);
    else None."""
    kind = _KINDS.get(cls, _UNSEEN)
    if kind is _UNSEEN:
        kind = _classify(cls)
    return _field_names(cls) if kind == "dataclass" else None


def leaves(tree):
    """The leaves of ``tree``, in ``flatten``'s order."""
    return flatten(tree)[0]


def structure(tree):
    """The TreeDef of ``tree``."""
    return flatten(tree)[1]


def map(fn, tree, *rest):
    """``fn`` applied to the leaves of ``tree`` (and the matching leaves of ``rest``).

    Args:
      fn: a function of ``1 + len(rest)`` leaves.
      tree: a pytree.
      *rest: pytrees with ``tree``'s structure; where ``tree`` has a leaf they may hold
        any value, a subtree or None included, which ``fn`` receives as it is.

    Returns:
      A pytree of ``tree``'s structure holding ``fn``'s results.

    Raises:
      ValueError: a tree of ``rest`` differs from ``tree`` in structure.
    """
    leaves, td = flatten(tree)
    if not rest:
        return _unflatten(td, iter([fn(x) for x in leaves]))
    others = []
    for k, other in enumerate(rest):
        found = []
        _flatten_up_to(td, other, found, "", k + 1)
        others.append(found)
    return _unflatten(td, iter([fn(*xs) for xs in zip(leaves, *others)]))


def _flatten_up_to(td, tree, out, path, which):
    """Append to ``out`` the subtrees of ``tree`` found at the leaves of ``td``."""
    kind = td.kind
    if kind == "leaf":
        out.append(tree)
        return
    cls = tree.__class__
    found = _KINDS.get(cls, _UNSEEN)
    if found is _UNSEEN:
        found = _classify(cls)
    if kind == "none":
        if tree is not None:
            _mismatch(which, path, "None", tree)
        return
    if found != kind:
        _mismatch(which, path, _describe(td), tree)
    if kind == "list" or kind == "tuple":
        if len(tree) != len(td.children):
            _mismatch(which, path, _describe(td), tree)
        items = [(f"[{j}]", c) for j, c in enumerate(tree)]
    elif kind == "dict":
        if set(tree) != set(td.meta):
            _mismatch(which, path, _describe(td), tree)
        items = [(f"[{k!r}]", tree[k]) for k in td.meta]
    elif kind == "namedtuple":
        if cls is not td.meta:
            _mismatch(which, path, _describe(td), tree)
        items = [(f".{n}", c) for n, c in zip(cls._fields, tree)]
    elif kind == "dataclass":
        if cls is not td.meta[0]:
            _mismatch(which, path, _describe(td), tree)
        items = [(f".{n}", getattr(tree, n)) for n in td.meta[1]]
    else:
        children, aux = _custom_flatten(cls, tree)
        children = tuple(children)
        if cls is not td.meta[0] or aux != td.meta[1] or len(children) != len(td.children):
            _mismatch(which, path, _describe(td), tree)
        items = [(f"<{j}>", c) for j, c in enumerate(children)]
    for c_td, (step, c) in zip(td.children, items):
        _flatten_up_to(c_td, c, out, path + step, which)


def _describe(td):
    kind = td.kind
    if kind in ("list", "tuple"):
        return f"a {kind} of {len(td.children)}"
    if kind == "dict":
        return f"a dict with keys {list(td.meta)}"
    cls = td.meta if kind == "namedtuple" else td.meta[0]
    if kind == "custom":
        return f"{cls.__qualname__} with aux_data {td.meta[1]!r}"
    return cls.__qualname__


def _mismatch(which, path, expected, got):
    if isinstance(got, (list, tuple)) and not hasattr(got, "_fields"):
        got = f"a {type(got).__name__} of {len(got)}"
    elif isinstance(got, dict):
        got = f"a dict with keys {list(got)}"
    else:
        got = "None" if got is None else type(got).__qualname__
    raise ValueError(at_user_line(f"jt.tree.map: tree {which} does not have the first tree's structure "
                     f"at {path or 'the top'}: expected {expected}, got {got}"))


def map_leaves(fn, tree):
    """``fn`` applied to each leaf of ``tree``: ``map(fn, tree)``."""
    return map(fn, tree)


def ravel(tree):
    """``(vector, unravel)``: the leaves of ``tree`` (arrays and numbers) flattened into one
    1-D array, and the function that turns such a vector back into ``tree``'s structure,
    shapes and dtypes (JAX's ``ravel_pytree``). The vector has the leaves' common dtype."""
    import numpy as np
    leaves, treedef = flatten(tree)
    arrays = [np.asarray(a) for a in leaves]
    shapes = [a.shape for a in arrays]
    dtypes = [a.dtype for a in arrays]
    sizes = [a.size for a in arrays]
    flat = (np.concatenate([a.reshape(-1) for a in arrays]) if arrays
            else np.zeros(0))

    def unravel(vector):
        vector = np.asarray(vector)
        if vector.shape != (sum(sizes),):
            raise ValueError(at_user_line(
                f"jt.tree.ravel: the vector has shape {vector.shape}; the tree's leaves "
                f"hold {sum(sizes)} elements"))
        parts, start = [], 0
        for shape, dtype, size in zip(shapes, dtypes, sizes):
            parts.append(vector[start:start + size].reshape(shape).astype(dtype, copy=False))
            start += size
        return unflatten(treedef, parts)
    return flat, unravel

