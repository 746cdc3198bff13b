"""The user-facing compile: ``grad``, ``value_and_grad``, ``jacobian``, ``hessian``,
``function`` (``jit``).

A call of a compiled function looks up its signature (``signature``: argument
structure, dtypes, ranks, size-1 axes, static values) in the function's variant cache
(``cache``). On a miss it traces the function, differentiates and optimizes the graph,
generates a Numba kernel and builds it through the disk cache (``modes``); values the
function reads from outside its arguments are inputs or guards (``capture``). Later
calls with NumPy arrays and scalars run one generated Python frame around the kernel
(``fastpath``). Wrappers of one function share their compiled code (``sharing``).
``compiled`` holds the ``Compiled`` class that puts these together.
"""

from .compiled import (  # noqa: F401
    Compiled, Lowered, function, grad, hessian, jacobian, value_and_grad,
)
from .signature import ArgnumsError  # noqa: F401
from .cache import CacheInfo  # noqa: F401
