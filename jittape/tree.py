"""Nested structures (list, tuple, dict, namedtuple) of leaves: flatten and rebuild.

Dicts are flattened in sorted key order, so equal structures flatten alike.
"""


class TreeDef:
    """The structure of a nested value with its leaves taken out."""

    __slots__ = ("kind", "meta", "children", "num_leaves", "_key")

    def __init__(self, kind, meta, children):
        self.kind = kind          # 'leaf', 'none', 'list', 'tuple', 'namedtuple', 'dict'
        self.meta = meta          # dict keys / namedtuple class
        self.children = children
        self.num_leaves = (1 if kind == "leaf" else sum(c.num_leaves for c in children))
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
        return f"TreeDef({self.kind}, {len(self.children)} children, {self.num_leaves} leaves)"


_LEAF = TreeDef("leaf", None, ())
_NONE = TreeDef("none", None, ())


def flatten(tree, keep_none=False):
    """(leaves, treedef). ``None`` is an empty subtree unless ``keep_none``."""
    leaves = []
    treedef = _flatten(tree, leaves, keep_none)
    return leaves, treedef


def _flatten(tree, leaves, keep_none):
    if isinstance(tree, dict):
        keys = sorted(tree, key=_sort_key)
        return TreeDef("dict", tuple(keys), tuple(_flatten(tree[k], leaves, keep_none) for k in keys))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return TreeDef("namedtuple", type(tree), tuple(_flatten(c, leaves, keep_none) for c in tree))
    if isinstance(tree, (list, tuple)):
        kind = "list" if isinstance(tree, list) else "tuple"
        return TreeDef(kind, None, tuple(_flatten(c, leaves, keep_none) for c in tree))
    if tree is None and not keep_none:
        return _NONE
    leaves.append(tree)
    return _LEAF


def _sort_key(k):
    return (type(k).__name__, k)


def unflatten(treedef, leaves):
    """Rebuild the structure ``treedef`` with ``leaves`` in order."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    return out


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
    if kind == "namedtuple":
        return td.meta(*children)
    return dict(zip(td.meta, children))


def map_leaves(fn, tree):
    leaves, td = flatten(tree)
    return unflatten(td, [fn(x) for x in leaves])
