"""Graph passes: size canonicalization, simplification, dead-code elimination, common
subexpressions, fusion, buffer reuse."""

from .dce import dce  # noqa: F401
from .cse import cse  # noqa: F401
from .simplify import simplify  # noqa: F401
from .sizes import canonical_sizes  # noqa: F401
from .fuse import Group, Nest, nest, schedule  # noqa: F401
from .memory import plan_buffers  # noqa: F401


def optimize(graph):
    """The passes every compiled graph goes through, in order."""
    return dce(cse(simplify(dce(canonical_sizes(graph)))))
