"""``jittape.numpy``: the jittape ops under NumPy's names, for explicit use.

``import jittape.numpy as jnp`` then ``jnp.exp(x)``, ``jnp.sum(x, axis=0)`` ... give
jittape tensors that tapes record and tracers trace. The ops come from the registry
(``ops/numpy_api.py``, written by ``python -m jittape.ops.names``: every NumPy function
that dispatches to a jittape op); what is written here is not an op.
"""

import builtins as _builtins

import numpy as _np

try:
    from .ops.numpy_api import *  # noqa: F401,F403
except ImportError as _err:      # an op it names is gone: the registry's names
    from .ops import names as _names
    globals().update(_names.stale("numpy_api.py", _err, _names.numpy_namespace()))
from .tensor import (  # noqa: F401
    bool_, constant, float16, float32, float64, int8, int16, int32, int64, uint8,
)


def array(value, dtype=None):
    """``np.array``: a tensor of ``value``. A list (or tuple) holding tensors is their
    stack (``jnp.array([x, 2 * x])``), so the gradient flows through it, eagerly and
    compiled; anything else is ``jt.constant``'s."""
    if isinstance(value, (list, tuple)) and _holds_tensor(value):
        from .ops import cast, stack
        out = stack([array(v) if isinstance(v, (list, tuple)) else v for v in value])
        return out if dtype is None or out.dtype == _np.dtype(dtype) else cast(out, dtype)
    return constant(value, dtype)


def _holds_tensor(value):
    # (Python's any: this module's ``any`` is NumPy's name for jittape's reduce_any)
    from .tensor import Tensor
    return _builtins.any(isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and
                                                   _holds_tensor(v)) for v in value)


asarray = array


newaxis = None
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
