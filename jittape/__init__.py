"""jittape: fast gradients for NumPy code.

An eager ``GradientTape`` with TensorFlow's semantics, and compiled gradients
(``grad``, ``value_and_grad``, ``function``) on the same primitives. The reference is
``docs/api.md`` in the source repository (README.md there starts with a quickstart);
``help(jittape.grad)`` and the other functions' docstrings say the same in short.
"""

from ._version import __version__  # noqa: F401
from .errors import (  # noqa: F401
    GradientLostError, GradientLostWarning, JittapeError, NumericsError, ShapeError,
    UnsupportedError,
)
from .tensor import (  # noqa: F401
    Tensor, Variable, bool_, constant, float16, float32, float64, int8, int16, int32, int64,
    is_tensor, uint8,
)
from .tape import GradientTape, UnconnectedGradients  # noqa: F401
from .custom import checkpoint, custom_gradient, custom_jvp, custom_root, custom_vjp  # noqa: F401
from .control import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import ops
if _TYPE_CHECKING:            # (what a type checker reads: the names api.py lists)
    from .ops import api as _api
    from .ops.api import *  # noqa: F401,F403
else:
    from .ops import *  # noqa: F401,F403  (the ops of ops/api.py, from the registry)
from .compiler import function, grad, hessian, jacobian, value_and_grad  # noqa: F401
from .compiler import function as jit  # noqa: F401  (the JAX-style name of function)
from .forward import ForwardAccumulator  # noqa: F401
from .transforms import hvp, jacfwd, jacrev, jvp, linearize  # noqa: F401
from .batching import vmap  # noqa: F401
from .ops import updates as _updates  # noqa: F401  (x.at[idx].set(v): Tensor.at)
from .codegen.runtime import warmup  # noqa: F401  (compile the runtime helpers ahead)
from .ops import random  # noqa: F401
from . import config  # noqa: F401
from . import nn  # noqa: F401
from . import numpy  # noqa: F401
from . import scipy  # noqa: F401  (jt.scipy.objective: gradients for scipy.optimize)
from . import optim  # noqa: F401
from .optimize import minimize  # noqa: F401

if _TYPE_CHECKING:
    from . import dask  # noqa: F401


def __getattr__(name):
    # jt.dask is loaded on first use: importing jittape imports nothing of Dask (and
    # jt.dask itself only when called: without Dask it raises an ImportError saying
    # what to install)
    if name == "dask":
        import importlib
        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# what ``from jittape import *`` and type checkers take as the public names: these and
# the ops (``ops/api.py``)
__all__ = [
    "__version__", "GradientLostError", "GradientLostWarning", "JittapeError", "NumericsError",
    "ShapeError", "UnsupportedError", "Tensor", "Variable", "bool_", "constant", "float16",
    "float32", "float64", "int8", "int16", "int32", "int64", "is_tensor", "uint8",
    "GradientTape", "UnconnectedGradients", "checkpoint", "custom_gradient", "custom_jvp",
    "custom_root", "custom_vjp", "cond", "fori_loop", "scan", "switch", "while_loop",
    "function", "grad", "hessian", "jacobian", "value_and_grad", "jit", "warmup", "random",
    "ForwardAccumulator", "hvp", "jacfwd", "jacrev", "jvp", "linearize", "vmap",
    "config", "nn", "numpy", "scipy", "optim", "minimize",
]
if _TYPE_CHECKING:
    __all__ += _api.__all__
else:
    __all__ += ops.__all__
