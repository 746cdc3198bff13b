"""``jittape.numpy``: the jittape ops under NumPy's names, for explicit use.

``import jittape.numpy as jnp`` then ``jnp.exp(x)``, ``jnp.sum(x, axis=0)`` ... give
jittape tensors that tapes record and tracers trace. The ops come from the registry
(``ops/numpy_api.py``, written by ``python -m jittape.ops.names``: every NumPy function
that dispatches to a jittape op); what is written here is not an op.
"""

import sys as _sys

import numpy as _np

try:
    from .ops.numpy_api import *  # noqa: F401,F403
except ImportError as _err:      # an op it names is gone: the registry's names
    from .ops import names as _names
    globals().update(_names.stale("numpy_api.py", _err, _names.numpy_namespace()))
from .tensor import (  # noqa: F401
    bool_, constant, float16, float32, float64, int8, int16, int32, int64, uint8,
)

from .ops import fourier as _fourier

# ``jittape.numpy.fft``: np.fft's names (importable as a module too)
fft = _fourier.numpy_namespace(__name__ + ".fft")
_sys.modules[fft.__name__] = fft


newaxis = None
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
