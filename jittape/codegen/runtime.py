"""The helpers generated code calls, besides mathlib's functions.

- Scalar helpers (sigmoid, softplus, relu: ``make_helpers``): each takes and returns the
  dtype of its argument; the float32 and float64 versions differ only in their
  constants' types, so that float32 code stays float32.
- Slice arithmetic (``slice_length``, ...), compiled with Numba.
- Size checks (``any_equal``, ``any_differ``) and arrays (``empty``, ``zeros``,
  ``full``, ``fill``, ``reshape``), typed and lowered directly (see below).
- The matrix products (``dot``, ``matmul2d``, from gemm.py).
"""

from typing import Sequence

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref, lower_builtin
from numba.core.typing.templates import signature
from numba.extending import type_callable
from numba.np.arrayobj import make_array, populate_array, store_item

from .gemm import dot, matmul2d  # noqa: F401  (generated code imports them from here)
from .linkage import link  # noqa: F401

_jit = numba.njit(cache=True)


def warmup(dtypes: Sequence[str] = ("float32", "float64")) -> float:
    """Compile jittape's runtime helpers for ``dtypes`` now (or load them from their
    cache, ``helpers_cache``), so that no first call waits for them: the matrix
    products, about 10 s per dtype on a first run on a machine. Returns the seconds it
    took. (With ``NUMBA_DISABLE_JIT`` there is nothing to compile.)"""
    import time
    start = time.perf_counter()
    ext = getattr(matmul2d, "external", None)
    if ext is not None:
        for dtype in dtypes:
            key = str(np.dtype(dtype))
            if key not in ext.signatures:
                raise ValueError(f"warmup: jittape's helpers are for float32 and float64, "
                                 f"not {dtype!r}")
            ext.link(key)
    return time.perf_counter() - start


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


def any_equal(pairs):
    """Whether any pair (a, b) of ``pairs`` (a flat tuple of integers: a0, b0, a1, b1, ...)
    has a == b. Generated code checks sizes with it: lowered directly, a comparison per
    pair and no branch, where each ``==`` and ``|`` of the same test would be typed and
    lowered by Numba one by one, each a cost in compile time."""
    return any(a == b for a, b in zip(pairs[::2], pairs[1::2]))


def any_differ(pairs):
    """Whether any pair (a, b) of ``pairs`` (as for ``any_equal``) has a != b."""
    return any(a != b for a, b in zip(pairs[::2], pairs[1::2]))


def _size_test(fn, predicate):
    @type_callable(fn)
    def typer(context):
        def call(pairs):
            if (isinstance(pairs, types.BaseTuple) and len(pairs) % 2 == 0
                    and all(isinstance(t, types.Integer) for t in pairs)):
                return types.boolean
        return call

    @lower_builtin(fn, types.BaseTuple)
    def lower(context, builder, sig, args):
        values = [context.cast(builder, v, t, types.intp)
                  for v, t in zip(cgutils.unpack_tuple(builder, args[0]), sig.args[0])]
        out = cgutils.false_bit
        for a, b in zip(values[::2], values[1::2]):
            out = builder.or_(out, builder.icmp_signed(predicate, a, b))
        return out


_size_test(any_equal, "==")
_size_test(any_differ, "!=")


# Array helpers. Generated kernels call these instead of np.empty, np.zeros, np.full,
# ``a[...] = value`` and ``a.reshape`` (and gemm's dot and matmul2d instead of np.dot).
# Each is typed and lowered directly (``type_callable``, ``lower_builtin``): a new array
# header and an allocation from Numba's runtime, a loop over the elements, in the
# kernel's own IR. Numba's versions compile an implementation per argument type (np.empty
# typed at each call site, np.full and ``reshape`` through helpers compiled per process),
# and njit functions loaded from Numba's cache are linked into each kernel and optimized
# again with it: either way each cold compile pays again for code that never changes.
# Called from Python (``f.lower(...).python``, NUMBA_DISABLE_JIT) they are NumPy's.

def empty(shape, dtype):
    """np.empty(shape, dtype), C ordered."""
    return np.empty(shape, dtype)


def zeros(shape, dtype):
    """np.zeros(shape, dtype), C ordered."""
    return np.zeros(shape, dtype)


def full(shape, value, dtype):
    """np.full(shape, value, dtype), C ordered."""
    return np.full(shape, value, dtype)


def scratch(size, value, dtype):
    """np.full(size, value, dtype) for a literal ``size``, in the kernel's stack frame:
    an array that never leaves the kernel (a lane reduction's accumulators) costs no
    allocation from Numba's runtime per call. It lives until the kernel returns; a
    second call at the same place (a loop) reuses its memory, filled again."""
    return np.full(size, value, dtype)


def threads():
    """numba.get_num_threads(): the threads a prange loop of this thread would use. In a
    kernel, a call of the symbol Numba's threading layer registers (as its own parallel
    loops do): Numba's ``get_num_threads`` in a kernel reads a ctypes pointer, and a
    kernel holding one is not kept in Numba's disk cache."""
    return numba.get_num_threads()


def natural(i):
    """``i``, an index LLVM is told is never negative (``llvm.assume``). Numba adds the
    length to a negative index at each access; where a loop starts at a run-time bound
    (a chunk's first row) LLVM cannot prove the index is not negative, and that select
    at each load and store kept such loops from vectorizing (the lane reduction of a
    logistic regression's loss over 10^5 rows: 7.8 against 5.2 ms a call)."""
    return i


def borrow(a):
    """``a`` without its owner: the same memory, shape and strides, with no reference
    count. A loop's step makes its arrays in buffers made before the loop (``Pool`` in
    codegen/cpu.py); each time a step binds one to a name, slices it or swaps a carry,
    Numba counts a reference up or down with an atomic instruction: most of a small
    step's time. A borrowed buffer costs none of that. Its owner must outlive it
    (``keep`` after the loop), and it must not leave the kernel (a loop's results are
    copies of it)."""
    return a


def keep(a):
    """Nothing: a use of ``a`` that keeps the owner of borrowed buffers alive to here."""
    return None


def fill(a, value):
    """Every element of ``a`` (C ordered) set to ``value`` (cast to its dtype); ``a``."""
    a[...] = value
    return a


def reshape(a, shape):
    """``a`` with a new shape (C order): a view when ``a`` is C-contiguous (layout C, the
    kernels' usual case); ``np.ascontiguousarray(a).reshape(shape)`` for arrays of
    other layouts, a copy where needed."""
    return np.ascontiguousarray(a).reshape(shape)


def _ndim(shape):
    if isinstance(shape, types.Integer):
        return 1
    if isinstance(shape, types.BaseTuple) and all(isinstance(d, types.Integer) for d in shape):
        return len(shape)
    return None


def _dtype(t):
    if isinstance(t, types.NumberClass):
        return t.instance_type
    return t.dtype if isinstance(t, types.DType) else None


def _is_scalar(t):
    return isinstance(t, (types.Number, types.Boolean))


@type_callable(empty)
@type_callable(zeros)
def _type_new(context):
    def typer(shape, dtype):
        nd, dt = _ndim(shape), _dtype(dtype)
        if nd is not None and dt is not None:
            return types.Array(dt, nd, "C")
    return typer


@type_callable(full)
def _type_full(context):
    def typer(shape, value, dtype):
        nd, dt = _ndim(shape), _dtype(dtype)
        if nd is not None and dt is not None and _is_scalar(value):
            return types.Array(dt, nd, "C")
    return typer


@type_callable(natural)
def _type_natural(context):
    def typer(i):
        if isinstance(i, types.Integer) and i.signed:
            return i
    return typer


@lower_builtin(natural, types.Integer)
def _lower_natural(context, builder, sig, args):
    (i,) = args
    assume = builder.module.declare_intrinsic(
        "llvm.assume", fnty=ir.FunctionType(ir.VoidType(), [ir.IntType(1)]))
    builder.call(assume, [builder.icmp_signed(">=", i, ir.Constant(i.type, 0))])
    return i


@type_callable(threads)
def _type_threads(context):
    def typer():
        return types.intp
    return typer


@lower_builtin(threads)
def _lower_threads(context, builder, sig, args):
    # the symbol is there once the threading layer is up: build.py starts it before a
    # CPU kernel compiles or loads
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(cgutils.intp_t, []),
                                        "get_num_threads")
    return builder.call(fn, [])


@type_callable(scratch)
def _type_scratch(context):
    def typer(size, value, dtype):
        dt = _dtype(dtype)
        if isinstance(size, types.IntegerLiteral) and dt is not None and _is_scalar(value):
            return types.Array(dt, 1, "C")
    return typer


@type_callable(borrow)
def _type_borrow(context):
    def typer(a):
        if isinstance(a, types.Array):
            return a
    return typer


@type_callable(keep)
def _type_keep(context):
    def typer(a):
        if isinstance(a, types.Array):
            return types.none
    return typer


@type_callable(fill)
def _type_fill(context):
    def typer(a, value):
        if isinstance(a, types.Array) and a.layout == "C" and _is_scalar(value):
            return a
    return typer


@type_callable(reshape)
def _type_reshape(context):
    def typer(a, shape):
        nd = _ndim(shape)
        if isinstance(a, types.Array) and isinstance(shape, types.BaseTuple) and nd is not None:
            return types.Array(a.dtype, nd, "C")
    return typer


def _dims(context, builder, shapety, shape):
    """The sizes of a shape argument (an integer or a tuple of them), as intp values."""
    if isinstance(shapety, types.Integer):
        return [context.cast(builder, shape, shapety, types.intp)]
    return [context.cast(builder, d, t, types.intp)
            for d, t in zip(cgutils.unpack_tuple(builder, shape), shapety)]


def _c_order(context, builder, dims, itemsize):
    """(strides of a C-ordered array of ``dims``, its number of elements)."""
    size = context.get_constant(types.intp, 1)
    strides = []
    for d in reversed(dims):
        strides.insert(0, builder.mul(size, itemsize))
        size = builder.mul(size, d)
    return strides, size


def _new(context, builder, arrtype, dims):
    """A new C-ordered array of ``dims`` (uninitialized); (array, number of elements)."""
    ary = make_array(arrtype)(context, builder)
    datatype = context.get_data_type(arrtype.dtype)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(datatype))
    strides, size = _c_order(context, builder, dims, itemsize)
    meminfo = context.nrt.meminfo_alloc_aligned(
        builder, builder.mul(size, itemsize),
        context.get_preferred_array_alignment(arrtype.dtype))
    data = builder.bitcast(context.nrt.meminfo_data(builder, meminfo), datatype.as_pointer())
    populate_array(ary, data=data, shape=dims, strides=strides, itemsize=itemsize,
                   meminfo=meminfo)
    return ary, size


def _set_all(context, builder, arrtype, ary, size, valuety, value):
    value = context.cast(builder, value, valuety, arrtype.dtype)
    with cgutils.for_range(builder, size) as loop:
        store_item(context, builder, arrtype, value, builder.gep(ary.data, [loop.index]))


@lower_builtin(empty, types.Any, types.Any)
def _lower_empty(context, builder, sig, args):
    ary, _ = _new(context, builder, sig.return_type,
                  _dims(context, builder, sig.args[0], args[0]))
    return impl_ret_new_ref(context, builder, sig.return_type, ary._getvalue())


@lower_builtin(zeros, types.Any, types.Any)
def _lower_zeros(context, builder, sig, args):
    ary, size = _new(context, builder, sig.return_type,
                     _dims(context, builder, sig.args[0], args[0]))
    cgutils.memset(builder, ary.data, builder.mul(size, ary.itemsize), 0)
    return impl_ret_new_ref(context, builder, sig.return_type, ary._getvalue())


@lower_builtin(full, types.Any, types.Any, types.Any)
def _lower_full(context, builder, sig, args):
    arrtype = sig.return_type
    ary, size = _new(context, builder, arrtype, _dims(context, builder, sig.args[0], args[0]))
    _set_all(context, builder, arrtype, ary, size, sig.args[1], args[1])
    return impl_ret_new_ref(context, builder, arrtype, ary._getvalue())


@lower_builtin(scratch, types.IntegerLiteral, types.Any, types.Any)
def _lower_scratch(context, builder, sig, args):
    arrtype = sig.return_type
    count = sig.args[0].literal_value
    datatype = context.get_data_type(arrtype.dtype)
    data = cgutils.alloca_once(builder, datatype, size=count)    # in the entry block
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(datatype))
    ary = make_array(arrtype)(context, builder)
    size = context.get_constant(types.intp, count)
    populate_array(ary, data=data, shape=[size], strides=[itemsize], itemsize=itemsize,
                   meminfo=None)                  # no owner: nothing to count or free
    _set_all(context, builder, arrtype, ary, size, sig.args[1], args[1])
    return impl_ret_borrowed(context, builder, arrtype, ary._getvalue())


@lower_builtin(borrow, types.Array)
def _lower_borrow(context, builder, sig, args):
    arrtype = sig.args[0]
    ary = make_array(arrtype)(context, builder, args[0])
    out = make_array(arrtype)(context, builder)
    populate_array(out, data=ary.data, shape=cgutils.unpack_tuple(builder, ary.shape),
                   strides=cgutils.unpack_tuple(builder, ary.strides),
                   itemsize=ary.itemsize, meminfo=None)    # no owner: nothing to count
    return impl_ret_borrowed(context, builder, arrtype, out._getvalue())


@lower_builtin(keep, types.Array)
def _lower_keep(context, builder, sig, args):
    return context.get_dummy_value()


@lower_builtin(fill, types.Array, types.Any)
def _lower_fill(context, builder, sig, args):
    arrtype = sig.args[0]
    ary = make_array(arrtype)(context, builder, args[0])
    _set_all(context, builder, arrtype, ary, ary.nitems, sig.args[1], args[1])
    return impl_ret_borrowed(context, builder, arrtype, args[0])


@lower_builtin(reshape, types.Array, types.BaseTuple)
def _lower_reshape(context, builder, sig, args):
    aryty, shapety = sig.args
    if aryty.layout != "C":
        shape = types.UniTuple(types.intp, len(shapety))
        value = context.cast(builder, args[1], shapety, shape)
        return context.compile_internal(builder, reshape,        # its Python body
                                        signature(sig.return_type, aryty, shape),
                                        [args[0], value])
    ary = make_array(aryty)(context, builder, args[0])
    dims = _dims(context, builder, shapety, args[1])
    strides, size = _c_order(context, builder, dims, ary.itemsize)
    with builder.if_then(builder.icmp_signed("!=", size, ary.nitems), likely=False):
        context.call_conv.return_user_exc(
            builder, ValueError, ("reshape: the new shape's size differs from the array's",))
    out = make_array(sig.return_type)(context, builder)
    populate_array(out, data=ary.data, shape=dims, strides=strides, itemsize=ary.itemsize,
                   meminfo=ary.meminfo, parent=ary.parent)
    return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())


@_jit
def grown(stack, size):
    """``stack`` (C-ordered) with room for ``size`` rows, its rows copied: a loop's stack
    of steps whose number is known only at its end (a while loop's)."""
    out = np.empty((size,) + stack.shape[1:], stack.dtype)
    out[:stack.shape[0]] = stack
    return out


def put(stack, t, value):
    """``stack[t] = value`` for a C-ordered ``stack`` and a ``value`` of the shape of
    ``stack[t]`` (or a scalar, for a 1-d stack): how loops store one step's value; or
    ``stack[t:t + len(value)] = value`` for a ``value`` of ``stack``'s rank (rows after
    rows: a concatenation along the first axis).
    Numba's own ``stack[t] = value`` compiles its broadcasting assignment into every
    kernel, seconds of compile for a copy; this is a ``memcpy`` (a contiguous copy of a
    value of another layout first)."""
    if np.ndim(value) == stack.ndim:
        stack[t:t + len(value)] = value
    else:
        stack[t] = value


@type_callable(put)
def _type_put(context):
    def typer(stack, t, value):
        if not (isinstance(stack, types.Array) and stack.layout == "C"
                and isinstance(t, types.Integer)):
            return None
        if _is_scalar(value) and stack.ndim == 1:
            return types.none
        if (isinstance(value, types.Array) and value.ndim in (stack.ndim - 1, stack.ndim)
                and value.dtype == stack.dtype):
            return types.none
    return typer


def _contiguous(a):
    return np.ascontiguousarray(a)


@lower_builtin(put, types.Array, types.Integer, types.Any)
def _lower_put(context, builder, sig, args):
    stackty, tty, valuety = sig.args
    stack = make_array(stackty)(context, builder, args[0])
    t = context.cast(builder, args[1], tty, types.intp)
    if not isinstance(valuety, types.Array):
        value = context.cast(builder, args[2], valuety, stackty.dtype)
        store_item(context, builder, stackty, value, builder.gep(stack.data, [t]))
        return context.get_dummy_value()
    source = args[2]
    if valuety.layout != "C":
        contig = types.Array(valuety.dtype, valuety.ndim, "C")
        source = context.compile_internal(builder, _contiguous, signature(contig, valuety),
                                          [source])
        valuety = contig
    value = make_array(valuety)(context, builder, source)
    row = cgutils.unpack_tuple(builder, stack.strides)[0]
    start = builder.gep(builder.bitcast(stack.data, cgutils.voidptr_t), [builder.mul(t, row)])
    cgutils.raw_memcpy(builder, start, builder.bitcast(value.data, cgutils.voidptr_t),
                       builder.mul(value.nitems, value.itemsize), 1)
    if source is not args[2]:
        context.nrt.decref(builder, valuety, source)
    return context.get_dummy_value()
