"""Random tensors with TensorFlow 2's eager numbers, bit for bit, computed with NumPy.

After ``set_seed(s)`` the same sequence of calls returns exactly what TensorFlow returns
in eager mode after ``tf.random.set_seed(s)``, so a model ported from TensorFlow starts
from the same weights::

    tf.random.set_seed(1)                      jt.random.set_seed(1)
    tf.random.uniform((4, 3), -20, 20)    ==   jt.random.uniform((4, 3), -20, 20)
    tf.random.normal((2, 3))              ==   jt.random.normal((2, 3))

Each step of TensorFlow's recipe is reproduced where it happens here: the op seeds
(``get_seed``), the generator's key and counter (``_philox_stream``), the generator
(``_philox4x32``) and the distributions (``_uniform_array``, ``_normal_array``). Without
a seed (``set_seed(None)``, the default) the numbers come from OS entropy and are not
reproducible, as in TensorFlow.

In a function being compiled a draw is an input of the compiled code, drawn again with
the same arguments before each call (``_drawn``), so that compiled and eager functions
see the same numbers after ``set_seed(s)``. (Philox in generated code would save the
draw on the host, but would have to reproduce glibc's ``logf`` and ``sincosf`` to give
these numbers.)
"""

import math
import operator
import random as _pyrandom
import threading

import numpy as np

from ..errors import at_user_line
from ..recording import TRACES, current_trace
from ..tensor import constant

DEFAULT_GRAPH_SEED = 87654321          # TF's seed when only an op seed is given
_INT32_MAX = 2 ** 31 - 1
# TF's Philox kernels reserve 256 blocks per output element at every call
_BLOCKS_PER_ELEMENT = 256

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
# Philox-4x32's multipliers and key increments, by Random123's names
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85

_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


class _SeedState:
    """The global seed state, as TF's eager context keeps it."""

    def __init__(self):
        self.lock = threading.RLock()
        self.global_seed = None          # None: nondeterministic (no set_seed)
        self.op_seeds = None             # random.Random(global_seed): the op seeds
        self.kernel_offsets = {}         # TF's cached kernels: where each one's counter is
        self.entropy = None              # a NumPy generator, for unseeded draws


_STATE = _SeedState()


def set_seed(seed):
    """Set the global random seed, like ``tf.random.set_seed``.

    Args:
      seed: an integer, or None to go back to nondeterministic numbers.

    Resets the stream of op seeds and the kernels' counters (TF clears its kernel cache),
    so the same sequence of calls after ``set_seed(s)`` always returns the same values:
    the values TensorFlow returns.
    """
    if seed is not None:
        if isinstance(seed, bool):
            seed = int(seed)
        try:
            seed = operator.index(seed)
        except TypeError:
            array = np.asarray(seed)
            if array.ndim != 0 or not np.issubdtype(array.dtype, np.integer):
                raise TypeError(at_user_line(
                    f"set_seed: seed must be an integer or None, got {seed!r}")) from None
            seed = int(array)
    with _STATE.lock:
        _STATE.global_seed = seed
        _STATE.op_seeds = _pyrandom.Random(seed)
        _STATE.kernel_offsets.clear()


def get_seed(op_seed=None):
    """The seeds a random op runs with, like ``tf.compat.v1.random.get_seed``.

    Args:
      op_seed: the op's own seed, or None.

    Returns:
      ``(seed, seed2)``: the global seed and the op seed, each modulo 2**31 - 1 (``(0, 0)``
      becomes ``(0, 2**31 - 1)``). With a global seed and no op seed, the op seed is the
      next draw of ``randint(0, 2**31 - 1)`` from ``random.Random(global_seed)``, as every
      TF random op draws it; with an op seed only, the global seed is
      ``DEFAULT_GRAPH_SEED``; with neither, ``(None, None)``.
    """
    if op_seed is not None:
        op_seed = operator.index(op_seed)
    with _STATE.lock:
        global_seed = _STATE.global_seed
        if global_seed is not None:
            if op_seed is None:
                op_seed = _STATE.op_seeds.randint(0, _INT32_MAX)
            seeds = global_seed % _INT32_MAX, op_seed % _INT32_MAX
        elif op_seed is not None:
            seeds = DEFAULT_GRAPH_SEED, op_seed % _INT32_MAX
        else:
            seeds = None, None
    if seeds == (0, 0):
        return 0, _INT32_MAX
    return seeds


def _philox_stream(kernel, dtype, count, seeds):
    """Where a call of TF's ``kernel`` (for ``count`` values of ``dtype``) reads Philox.

    Returns ``(key, counter)``: the 64-bit key is ``seed``, the 128-bit counter of the
    first block has ``seed2`` as its high words. TF caches an eager kernel by op and
    attributes (the seeds among them), and a cached kernel's counter moves on by 256
    blocks per element at every call: the same op seed twice gives two different
    draws. That cache is kept here by kernel, dtype and seeds (an entry for each used,
    as TF's), and cleared by ``set_seed``. Without seeds, key and counter come from OS
    entropy (through NumPy's generator), as TF's do.
    """
    seed, seed2 = seeds
    if seed is None:
        with _STATE.lock:
            if _STATE.entropy is None:
                _STATE.entropy = np.random.default_rng()
            words = _STATE.entropy.integers(0, 2 ** 64, size=2, dtype=np.uint64)
        seed, seed2 = int(words[0]), int(words[1])
        if seed == 0 and seed2 == 0:       # TF would draw again
            seed2 = 1
        return seed, seed2 << 64
    cache_key = (kernel, np.dtype(dtype).str, seed, seed2)
    with _STATE.lock:
        offset = _STATE.kernel_offsets.get(cache_key, 0)
        _STATE.kernel_offsets[cache_key] = (offset + count * _BLOCKS_PER_ELEMENT) % (1 << 128)
    return seed, ((seed2 << 64) + offset) % (1 << 128)


# -- the generator -----------------------------------------------------------------------

def _philox4x32(key, counter, n_blocks):
    """Philox-4x32-10 for ``n_blocks`` consecutive counters.

    ``key`` is a 64-bit int (its words ``key & 0xffffffff``, ``key >> 32``), ``counter``
    the 128-bit counter of the first block (words little-endian). Returns a uint32 array
    ``(n_blocks, 4)``: the four words of each block. All blocks are computed at once in
    uint64 lanes, where a 32-bit product is exact.
    """
    n_blocks = int(n_blocks)
    if n_blocks <= 0:
        return np.zeros((0, 4), dtype=np.uint32)
    counter %= 1 << 128
    index = np.arange(n_blocks, dtype=np.uint64)
    low = index + np.uint64(counter & 0xFFFFFFFFFFFFFFFF)     # wraps mod 2**64
    high = np.full(n_blocks, counter >> 64, dtype=np.uint64)
    high += (low < index).astype(np.uint64)                  # the carry
    c0, c1 = low & _MASK32, low >> _SHIFT32
    c2, c3 = high & _MASK32, high >> _SHIFT32
    del index, low, high                                     # (large draws: memory)
    k0 = key & 0xFFFFFFFF
    k1 = (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0 = c0 * _PHILOX_M0
        p1 = c2 * _PHILOX_M1
        # the round: [hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0)], in place
        c1 ^= p1 >> _SHIFT32
        c1 ^= np.uint64(k0)
        c3 ^= p0 >> _SHIFT32
        c3 ^= np.uint64(k1)
        p1 &= _MASK32
        p0 &= _MASK32
        c0, c1, c2, c3 = c1, p1, c3, p0
        k0 = (k0 + _PHILOX_W0) & 0xFFFFFFFF
        k1 = (k1 + _PHILOX_W1) & 0xFFFFFFFF
    out = np.empty((n_blocks, 4), dtype=np.uint32)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = c0, c1, c2, c3
    return out


def _words(key, counter, count, width):
    """The words of ``count`` values of ``width`` words each, taken from consecutive
    blocks in order: an array ``(count,)`` for one word a value, else ``(count, width)``."""
    blocks = _philox4x32(key, counter, (count * width + 3) // 4)
    if width == 1:
        return blocks.reshape(-1)[:count]
    return blocks.reshape(-1, width)[:count]


def _uint32_to_float(x):
    """TF's ``Uint32ToFloat``: float32 in [0, 1) from the 23 low bits of each word."""
    bits = (x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(np.float32) - np.float32(1.0)


def _uint64_to_double(x0, x1):
    """TF's ``Uint64ToDouble``: float64 in [0, 1) from 52 bits, 20 of ``x0`` and 32 of ``x1``."""
    mantissa = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << _SHIFT32) | x1.astype(np.uint64)
    bits = mantissa | np.uint64(1023 << 52)
    return bits.view(np.float64) - 1.0


# -- glibc's logf and sincosf ------------------------------------------------------------
# TF's float32 Box-Muller calls the C library's logf and sincosf, which are not correctly
# rounded: np.log, np.sin and np.cos would give other last bits for some values. These are
# glibc's (2.28 and later) algorithms, table and polynomials in float64, transcribed from
# sysdeps/ieee754/flt-32/{e_logf.c, e_logf_data.c, s_sincosf.c, s_sincosf.h,
# sincosf_poly.h, s_sincosf_data.c} (x86_64: no TOINT_INTRINSICS). TF on macOS or Windows
# uses another C library, whose float32 normals these do not reproduce.

_hex = float.fromhex
_LOGF_INVC = np.array([_hex(s) for s in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0",
    "0x1.3c995b0b80385p+0", "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0",
    "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0", "0x1.0953f419900a7p+0",
    "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1",
    "0x1.767dcf5534862p-1")])
_LOGF_LOGC = np.array([_hex(s) for s in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2",
    "-0x1.b31d8a68224e9p-3", "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3",
    "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4", "-0x1.252f438e10c1ep-5",
    "0x0p+0", "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4",
    "0x1.526e57720db08p-3", "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2",
    "0x1.4043057b6ee09p-2")])
_LOGF_LN2 = _hex("0x1.62e42fefa39efp-1")
_LOGF_A0 = _hex("-0x1.00ea348b88334p-2")
_LOGF_A1 = _hex("0x1.5575b0be00b6ap-2")
_LOGF_A2 = _hex("-0x1.ffffef20a4123p-2")


def _glibc_logf(x):
    """glibc's ``logf`` of finite, normal, positive float32 values (an array)."""
    ix = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    tmp = ix - np.uint32(0x3F330000)
    i = (tmp >> np.uint32(19)) & np.uint32(15)
    k = (tmp.view(np.int32) >> np.int32(23)).astype(np.float64)
    iz = ix - (tmp & np.uint32(0x1FF << 23))
    z = iz.view(np.float32).astype(np.float64)
    r = z * _LOGF_INVC[i] - 1.0
    y0 = _LOGF_LOGC[i] + k * _LOGF_LN2
    r2 = r * r
    y = _LOGF_A1 * r + _LOGF_A2
    y = _LOGF_A0 * r2 + y
    y = y * r2 + (y0 + r)
    return y.astype(np.float32)


_SINCOSF_HPI_INV = _hex("0x1.45F306DC9C883p+23")     # 2/pi * 2**24
_SINCOSF_HPI = _hex("0x1.921FB54442D18p0")            # pi/2
_SINCOSF_C = (1.0, _hex("-0x1.ffffffd0c621cp-2"), _hex("0x1.55553e1068f19p-5"),
              _hex("-0x1.6c087e89a359dp-10"), _hex("0x1.99343027bf8c3p-16"))
_SINCOSF_S1 = _hex("-0x1.555545995a603p-3")
_SINCOSF_S2 = _hex("0x1.1107605230bc4p-7")
_SINCOSF_S3 = _hex("-0x1.994eb3774cf24p-13")


def _abstop12(x):
    """glibc's ``abstop12``: the top 12 bits of a float32's magnitude, as glibc compares them."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> np.uint32(20)) & np.uint32(0x7FF)


_TOP12_PIO4 = int(_abstop12(np.float32(_hex("0x1.921FB54442D18p-1"))))
_TOP12_TINY = int(_abstop12(np.float32(2.0 ** -12)))


def _glibc_sincosf(y):
    """glibc's ``sincosf`` of float32 values with 0 <= y < 120 (an array): ``(sin, cos)``."""
    y = np.ascontiguousarray(y, dtype=np.float32)
    x = y.astype(np.float64)
    top = _abstop12(y)
    small = top < _TOP12_PIO4
    # glibc's reduce_fast: n quarter turns, without TOINT_INTRINSICS
    n = ((x * _SINCOSF_HPI_INV).astype(np.int32) + np.int32(0x800000)) >> 24
    n[small] = 0
    xr = x - n * _SINCOSF_HPI
    xs = np.where((n & 3) == 1, -xr, xr)      # the sign of sin: {1, -1, -1, 1}[n & 3]
    xs = np.where((n & 3) == 2, -xr, xs)
    csign = np.where((n & 2) != 0, -1.0, 1.0)  # glibc's second table negates cos's polynomial
    x2 = xr * xr
    x4 = x2 * x2
    x3 = x2 * xs
    c2 = _SINCOSF_C[3] * csign + x2 * (_SINCOSF_C[4] * csign)
    s1 = _SINCOSF_S2 + x2 * _SINCOSF_S3
    c1 = _SINCOSF_C[0] * csign + x2 * (_SINCOSF_C[1] * csign)
    x5 = x3 * x2
    x6 = x4 * x2
    s = xs + x3 * _SINCOSF_S1
    c = c1 + x4 * (_SINCOSF_C[2] * csign)
    s_out = (s + x5 * s1).astype(np.float32)
    c_out = (c + x6 * c2).astype(np.float32)
    odd = (n & 1) != 0
    sin = np.where(odd, c_out, s_out)
    cos = np.where(odd, s_out, c_out)
    tiny = top < _TOP12_TINY
    if tiny.any():
        sin[tiny] = y[tiny]
        cos[tiny] = np.float32(1.0)
    return sin, cos


# -- arguments ---------------------------------------------------------------------------

def _as_shape(op, shape):
    """``shape`` (an int, a sequence of ints, or a 1-D integer array or tensor) as a tuple
    of non-negative ints."""
    if hasattr(shape, "numpy") and callable(shape.numpy):
        shape = shape.numpy()
    shown = " ".join(repr(shape).split())        # an array's repr on one line
    message = f"{op}: shape must be an int or a sequence of non-negative ints, got {shown}"
    if isinstance(shape, np.ndarray):
        if shape.ndim > 1 or (shape.size and not np.issubdtype(shape.dtype, np.integer)):
            raise ValueError(at_user_line(message))
        shape = shape.tolist()
    dims = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if any(isinstance(d, (bool, np.bool_)) for d in dims):    # ints to operator.index
        raise ValueError(at_user_line(message))
    try:
        dims = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise ValueError(at_user_line(message)) from None
    if any(d < 0 for d in dims):
        raise ValueError(at_user_line(message))
    return dims


def _as_dtype(op, dtype):
    """``dtype`` (None for float32, a NumPy dtype or a TF-like dtype object) as a NumPy
    dtype of those TF's random ops have: float32, float64, int32 and int64."""
    if dtype is None:
        return np.dtype(np.float32)
    for attribute in ("as_numpy_dtype", "np_dtype", "numpy_dtype"):
        if hasattr(dtype, attribute):
            dtype = getattr(dtype, attribute)
            break
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise ValueError(at_user_line(f"{op}: invalid dtype {dtype!r}")) from None
    if result not in _DTYPES:
        raise ValueError(at_user_line(f"{op}: dtype {result} is not supported; accepted "
                                      "dtypes are float32, float64, int32 and int64"))
    return result


def _as_value(op, name, value, dtype):
    """A bound or a moment (``minval``, ``mean``, ...) in ``dtype``: a Python int for integer
    dtypes (checked in range), else a finite NumPy value or array."""
    if hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise TypeError(at_user_line(f"{op}: {name} must be numeric, got {value!r}"))
    if dtype.kind == "i":
        if array.ndim != 0:
            raise ValueError(at_user_line(f"{op}: {name} must be a scalar for dtype {dtype}"))
        if array.dtype.kind == "f":
            raise TypeError(at_user_line(
                f"{op}: {name} must be an integer for dtype {dtype}, got {value!r}"))
        number = int(array)
        info = np.iinfo(dtype)
        if not info.min <= number <= info.max:
            raise ValueError(at_user_line(f"{op}: {name}={number} is out of range for {dtype}"))
        return number
    if not np.all(np.isfinite(array.astype(np.float64))):
        raise ValueError(at_user_line(f"{op}: {name} must be finite, got {value!r}"))
    return array.astype(dtype)


# -- the distributions, as NumPy arrays --------------------------------------------------

def _uniform_array(shape, minval=0, maxval=None, dtype=np.float32, seed=None):
    """``tf.random.uniform`` as a NumPy array (see ``uniform``)."""
    shape = _as_shape("uniform", shape)
    dtype = _as_dtype("uniform", dtype)
    if dtype.kind == "i":
        return _uniform_int(shape, minval, maxval, dtype, seed)
    return _uniform_float(shape, minval, maxval, dtype, seed)


def _uniform_int(shape, minval, maxval, dtype, seed):
    """TF's ``RandomUniformInt``: ``minval + x % (maxval - minval)`` in unsigned arithmetic,
    x one word a value for int32, two (low word first) for int64."""
    if maxval is None:
        raise ValueError(at_user_line(f"uniform: maxval is required for dtype {dtype}"))
    low = _as_value("uniform", "minval", minval, dtype)
    high = _as_value("uniform", "maxval", maxval, dtype)
    count = math.prod(shape)
    seeds = get_seed(seed)                  # TF draws the op seed before it checks the bounds
    if count > 0 and not low < high:
        raise ValueError(at_user_line(f"uniform: minval must be below maxval for dtype "
                                      f"{dtype}, got minval={low}, maxval={high}"))
    key, counter = _philox_stream("RandomUniformInt", dtype, count, seeds)
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    span = high - low                       # fits the unsigned type
    if dtype == np.int32:
        words = _words(key, counter, count, 1)
        offset = words.astype(np.int64) % span
        return (offset + low).astype(np.int32).reshape(shape)
    words = _words(key, counter, count, 2)
    bits = words[:, 0].astype(np.uint64) | (words[:, 1].astype(np.uint64) << _SHIFT32)
    values = bits % np.uint64(span) + np.uint64(low % (1 << 64))      # wraps mod 2**64
    return values.view(np.int64).reshape(shape)


def _uniform_float(shape, minval, maxval, dtype, seed):
    """TF's ``RandomUniform`` (one word a float32, two a float64), then scaled and shifted
    in ``dtype`` as ``random_ops.py`` does."""
    if maxval is None:
        maxval = 1
    # as random_ops.py: r * maxval where minval is the Python int 0, r itself where
    # maxval is the Python int 1 too, else r * (maxval - minval) + minval
    minval_is_zero = isinstance(minval, int) and minval == 0
    maxval_is_one = isinstance(maxval, int) and maxval == 1
    low = _as_value("uniform", "minval", minval, dtype)
    high = _as_value("uniform", "maxval", maxval, dtype)
    count = math.prod(shape)
    key, counter = _philox_stream("RandomUniform", dtype, count, get_seed(seed))
    if dtype == np.float32:
        unit = _uint32_to_float(_words(key, counter, count, 1))
    else:
        words = _words(key, counter, count, 2)
        unit = _uint64_to_double(words[:, 0], words[:, 1])
    unit = unit.reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        if not minval_is_zero:
            unit = unit * (high - low) + low
        elif not maxval_is_one:
            unit = unit * high
    return np.asarray(unit, dtype=dtype)


def _standard_normal(dtype, count, key, counter):
    """``count`` standard normal values: TF's Box-Muller, two values from each pair of
    uniforms ``u1 = max(U, 1e-7)``, ``v1 = 2 pi U``: ``sin(v1) r`` and ``cos(v1) r`` with
    ``r = sqrt(-2 log(u1))``. float32 takes a word per uniform and computes in float32 with
    glibc's functions; float64 takes two words per uniform (a whole block per pair) and
    NumPy's functions, glibc's where NumPy calls the C library (a NumPy build with SIMD
    routines of its own may differ from TF in the last bit, rarely)."""
    if dtype == np.float32:
        pairs = _words(key, counter, (count + 1) // 2, 2)
        u1 = np.maximum(_uint32_to_float(pairs[:, 0]), np.float32(1e-7))
        v1 = (2.0 * math.pi * _uint32_to_float(pairs[:, 1]).astype(np.float64)
              ).astype(np.float32)
        radius = np.sqrt(np.float32(-2.0) * _glibc_logf(u1))
        sin, cos = _glibc_sincosf(v1)
    else:
        blocks = _philox4x32(key, counter, (count + 1) // 2)
        u1 = np.maximum(_uint64_to_double(blocks[:, 0], blocks[:, 1]), 1e-7)
        v1 = 2.0 * math.pi * _uint64_to_double(blocks[:, 2], blocks[:, 3])
        radius = np.sqrt(-2.0 * np.log(u1))
        sin, cos = np.sin(v1), np.cos(v1)
    return np.stack([sin * radius, cos * radius], axis=1).reshape(-1)[:count]


def _normal_array(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None):
    """``tf.random.normal`` as a NumPy array (see ``normal``)."""
    shape = _as_shape("normal", shape)
    dtype = _as_dtype("normal", dtype)
    if dtype.kind != "f":
        raise ValueError(at_user_line(f"normal: dtype {dtype} is not supported; accepted "
                                      "dtypes are float32 and float64"))
    mean = _as_value("normal", "mean", mean, dtype)
    stddev = _as_value("normal", "stddev", stddev, dtype)
    count = math.prod(shape)
    key, counter = _philox_stream("RandomStandardNormal", dtype, count, get_seed(seed))
    values = _standard_normal(dtype, count, key, counter).reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        values = values * stddev + mean
    return np.asarray(values, dtype=dtype)


def _fans(shape):
    """Keras's ``_compute_fans``: ``(fan_in, fan_out)`` of a weight of ``shape``."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _glorot_uniform_array(shape, dtype=np.float32, seed=None):
    """Keras 2's ``GlorotUniform()(shape)`` as a NumPy array (see ``glorot_uniform``)."""
    shape = _as_shape("glorot_uniform", shape)
    dtype = _as_dtype("glorot_uniform", dtype)
    if dtype.kind != "f":
        raise ValueError(at_user_line(f"glorot_uniform: dtype {dtype} is not supported; "
                                      "accepted dtypes are float32 and float64"))
    fan_in, fan_out = _fans(shape)
    # Keras's VarianceScaling(scale=1, mode="fan_avg", distribution="uniform")
    scale = 1.0 / max(1.0, (fan_in + fan_out) / 2.0)
    limit = math.sqrt(3.0 * scale)
    return _uniform_array(shape, -limit, limit, dtype=dtype, seed=seed)


# -- the public functions ----------------------------------------------------------------

def _drawn(make, *args):
    """``make(*args)`` as a tensor. In a function being compiled the draw is an input of
    the compiled code, drawn anew with these arguments at every call (a constant would
    repeat the first draw forever): the generator advances as it does eagerly."""
    value = make(*args)
    if TRACES:
        trace = current_trace()
        if trace is not None:
            return trace.random_input(lambda: make(*args), value)
    return constant(value)


def uniform(shape, minval=0, maxval=None, dtype=np.float32, seed=None):
    """Uniform random values in ``[minval, maxval)``, like ``tf.random.uniform``.

    Args:
      shape: an int or a sequence of ints.
      minval, maxval: the bounds; ``maxval=None`` means 1 for floats, and integer dtypes
        require it, above ``minval``. Float bounds may be arrays broadcastable to ``shape``.
      dtype: float32 (the default), float64, int32 or int64.
      seed: an op seed, as TF's eager ops take it: calls with the same seed continue one
        stream, until ``set_seed``. Without it the call takes the next op seed of the
        ``set_seed`` stream.

    Returns:
      A tensor of ``shape`` and ``dtype``.
    """
    return _drawn(_uniform_array, shape, minval, maxval, dtype, seed)


def normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None):
    """Normal random values, like ``tf.random.normal``.

    Args:
      shape: an int or a sequence of ints.
      mean, stddev: the distribution's, scalars or arrays broadcastable to ``shape``.
      dtype: float32 (the default) or float64.
      seed: an op seed, as for ``uniform``.

    Returns:
      A tensor of ``shape`` and ``dtype``.
    """
    return _drawn(_normal_array, shape, mean, stddev, dtype, seed)


def glorot_uniform(shape, dtype=np.float32, seed=None):
    """Glorot (Xavier) uniform weights, like Keras 2's ``GlorotUniform()``: what an unseeded
    Keras 2 ``Dense`` layer draws for its kernel.

    Args:
      shape: the weight's shape, an int or a sequence of ints.
      dtype: float32 (the default) or float64.
      seed: an op seed, as for ``uniform``.

    Returns:
      ``uniform(shape, -limit, limit)``, a tensor of ``shape`` and ``dtype``, with
      ``limit = sqrt(3 / max(1, (fan_in + fan_out) / 2))`` (Keras's fans).
    """
    return _drawn(_glorot_uniform_array, shape, dtype, seed)
