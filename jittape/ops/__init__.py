"""The primitives, one module per family, and the registry that lists them all."""

from .core import COMPOSITES, REGISTRY, Aval, Primitive  # noqa: F401
from .elementwise import (  # noqa: F401
    abs, add, arctan, cast, clip, cos, divide, equal, exp, expm1, floor_divide, greater,
    greater_equal, identity, isfinite, isnan, less, less_equal, log, log1p, logical_and,
    logical_not, logical_or, maximum, minimum, mod, multiply, negative, not_equal, power, relu,
    sigmoid, sign, sin, softplus, sqrt, square, stop_gradient, subtract, tan, tanh, unbroadcast,
    where,
)
from .reduce import (  # noqa: F401
    logsumexp, max, mean, min, prod, reduce_logsumexp, reduce_max, reduce_mean, reduce_min,
    reduce_prod, reduce_sum, sum,
)
from .shape import (  # noqa: F401
    broadcast_to, concat, concatenate, expand_dims, gather, getitem, reshape, squeeze, stack,
    swapaxes, take, transpose,
)
from .linalg import dot, einsum, matmul, outer  # noqa: F401
from .nn import log_softmax, softmax, softmax_cross_entropy, sparse_softmax_cross_entropy  # noqa: F401
from .creation import (  # noqa: F401
    arange, eye, full, full_like, linspace, ndim, ones, ones_like, shape, size, zeros, zeros_like,
)
from . import random  # noqa: F401

from .. import tape as _tape  # noqa: E402

_tape._bind_ops()
