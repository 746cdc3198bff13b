"""Scalar helpers that generated code calls (compiled by Numba, inlined into the loops).

Each takes and returns the dtype of its argument: the float32 and float64 versions
differ only in their constants' types, so that float32 code stays float32.
"""

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed, lower_builtin
from numba.core.typing.templates import signature
from numba.extending import type_callable
from numba.np.arrayobj import make_array, populate_array

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


def reshape(a, shape):
    """``a`` with a new shape (C order), a view when ``a`` is C-contiguous: generated
    code's reshape.

    Numba's ``ndarray.reshape`` compiles a helper of its own (about 0.4 s, once per
    process) and ``np.ascontiguousarray`` an implementation per type; here a
    C-contiguous array of layout C, the kernels' usual case, becomes a new array header
    on the same data, lowered directly. Arrays of other layouts go through
    ``np.ascontiguousarray(a).reshape(shape)``, a copy where needed."""
    return np.ascontiguousarray(a).reshape(shape)


@type_callable(reshape)
def _reshape_type(context):
    def typer(a, shape):
        if (isinstance(a, types.Array) and isinstance(shape, types.BaseTuple) and len(shape)
                and all(isinstance(d, types.Integer) for d in shape)):
            return types.Array(a.dtype, len(shape), "C")
    return typer


@lower_builtin(reshape, types.Array, types.BaseTuple)
def _reshape_lower(context, builder, sig, args):
    aryty, shapety = sig.args
    if aryty.layout != "C":
        shape = types.UniTuple(types.intp, len(shapety))
        value = context.cast(builder, args[1], shapety, shape)
        return context.compile_internal(builder, reshape,        # its Python body
                                        signature(sig.return_type, aryty, shape),
                                        [args[0], value])
    ary = make_array(aryty)(context, builder, args[0])
    dims = [context.cast(builder, d, t, types.intp)
            for d, t in zip(cgutils.unpack_tuple(builder, args[1]), shapety)]
    size = context.get_constant(types.intp, 1)
    strides = []
    for d in reversed(dims):          # C order: each stride the size of what follows
        strides.insert(0, builder.mul(size, ary.itemsize))
        size = builder.mul(size, d)
    with builder.if_then(builder.icmp_signed("!=", size, ary.nitems), likely=False):
        context.call_conv.return_user_exc(
            builder, ValueError, ("reshape: the new shape's size differs from the array's",))
    out = make_array(sig.return_type)(context, builder)
    populate_array(out, data=ary.data, shape=dims, strides=strides, itemsize=ary.itemsize,
                   meminfo=ary.meminfo, parent=ary.parent)
    return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())
