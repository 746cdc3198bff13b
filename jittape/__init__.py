"""jittape: fast gradients for NumPy code.

An eager ``GradientTape`` with TensorFlow's semantics, and compiled gradients
(``grad``, ``value_and_grad``, ``function``) on the same primitives. See API.md.
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
from .tape import GradientTape, UnconnectedGradients, custom_gradient  # noqa: F401
from .ops import (  # noqa: F401
    abs, add, arange, arctan, broadcast_to, cast, clip, concat, concatenate, cos, divide, dot,
    einsum, equal, exp, expand_dims, expm1, eye, floor_divide, full, full_like, gather, getitem,
    greater, greater_equal, identity, isfinite, isnan, less, less_equal, linspace, log, log1p,
    log_softmax, logical_and, logical_not, logical_or, logsumexp, matmul, max, maximum, mean, min,
    minimum, mod, multiply, negative, not_equal, ones, ones_like, outer, power, prod, reduce_logsumexp,
    reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, relu, reshape, sigmoid, sign, sin,
    softmax, softmax_cross_entropy, softplus, sparse_softmax_cross_entropy, sqrt, square, squeeze,
    stack, stop_gradient, subtract, sum, take, tan, tanh, transpose, where, zeros, zeros_like,
)
from .jit import function, grad, hessian, jacobian, value_and_grad  # noqa: F401
from .ops import random  # noqa: F401
from . import config  # noqa: F401
from . import nn  # noqa: F401
from . import numpy  # noqa: F401
