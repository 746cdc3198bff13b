"""Scalar helpers that generated code calls (compiled by Numba, inlined into the loops).

Each takes and returns the dtype of its argument: the float32 and float64 versions
differ only in their constants' types, so that float32 code stays float32.
"""

import numba
import numpy as np

from .gemm import dot, matmul2d  # noqa: F401  (generated code imports them from here)
from .linkage import link  # noqa: F401

_jit = numba.njit(cache=True)


def make_helpers(ftype, exp, log1p, maximum, absolute):
    """The helpers for one float type, written on the functions a target compiles
    (NumPy's on the CPU; CUDA's math functions there, see cuda_runtime)."""
    one = ftype(1.0)
    zero = ftype(0.0)

    def sigmoid(x):
        # no overflow: exp of a non-positive number only
        if x >= zero:
            return one / (one + exp(-x))
        z = exp(x)
        return z / (one + z)

    def softplus(x):
        # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))
        return maximum(x, zero) + log1p(exp(-absolute(x)))

    def relu(x):
        return maximum(x, zero)

    return sigmoid, softplus, relu


HELPER_NAMES = [f"{name}_{suffix}" for suffix in ("f32", "f64")
                for name in ("sigmoid", "softplus", "relu")]

# On the CPU all three come from mathlib (the same formulas, inlined into the loops so
# that they vectorize); CUDA kernels compile make_helpers on CUDA's functions.


@_jit
def slice_length(n, start, stop, step):
    """len(range(n)[start:stop:step]) (None bounds allowed), as Python computes it."""
    first, end, by = slice(start, stop, step).indices(n)
    if by > 0:
        return max(0, (end - first + by - 1) // by)
    return max(0, (first - end - by - 1) // -by)


@_jit
def slice_start(n, start, stop, step):
    """The first index that range(n)[start:stop:step] visits."""
    return slice(start, stop, step).indices(n)[0]


@_jit
def slice_step(n, start, stop, step):
    return slice(start, stop, step).indices(n)[2]


# Array helpers. Generated kernels call these instead of np.empty / np.zeros / np.full
# (and gemm's dot and matmul2d instead of np.dot): each specialization is compiled once
# and kept in Numba's disk cache, so a new kernel does not compile Numba's
# implementations of them again (most of a cold compile).

@numba.njit(cache=True)
def empty(shape, dtype):
    return np.empty(shape, dtype)


@numba.njit(cache=True)
def zeros(shape, dtype):
    return np.zeros(shape, dtype)


@numba.njit(cache=True)
def fill(a, value):
    """Every element of ``a`` set to ``value`` (cast to its dtype); ``a``."""
    a[...] = value
    return a


@numba.njit(cache=True)
def full(shape, value, dtype):
    """np.full(shape, value, dtype)."""
    return fill(np.empty(shape, dtype), value)
