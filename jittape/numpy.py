"""``jittape.numpy``: the jittape ops under NumPy's names, for explicit use.

``import jittape.numpy as jnp`` then ``jnp.exp(x)``, ``jnp.sum(x, axis=0)`` ... give
jittape tensors that tapes record and tracers trace.
"""

import numpy as _np

from .tensor import bool_, constant, float16, float32, float64, int8, int16, int32, int64, uint8  # noqa: F401
from .ops import (  # noqa: F401
    abs, add, arange, arctan, broadcast_to, clip, concatenate, cos, divide, dot, einsum, equal, exp,
    expand_dims, expm1, eye, floor_divide, full, full_like, greater, greater_equal, isfinite, isnan,
    less, less_equal, linspace, log, log1p, logical_and, logical_not, logical_or, matmul, max,
    maximum, mean, min, minimum, multiply, negative, not_equal, ones, ones_like, outer, power, prod,
    reshape, sign, sin, sqrt, square, squeeze, stack, subtract, sum, take, tan, tanh, transpose,
    where, zeros, zeros_like, ndim, shape, size, swapaxes,
)
from .ops import mod as remainder, mod  # noqa: F401
from .ops import logsumexp as _logsumexp

absolute = abs
true_divide = divide
amax = max
amin = min
concat = concatenate


def array(value, dtype=None):
    return constant(value, dtype)


asarray = array


def logaddexp(x, y):
    """log(exp(x) + exp(y)), stably."""
    return _logsumexp(stack([x, y]), axis=0)


newaxis = None
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
