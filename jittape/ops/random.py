"""TensorFlow-2-compatible stateful random ops (eager mode), in pure NumPy.

After ``set_seed(s)`` the functions in this module return, for the same
sequence of calls, exactly the numbers TensorFlow 2 returns in eager mode
after ``tf.random.set_seed(s)``::

    tf.random.set_seed(1)                      jt.random.set_seed(1)
    tf.random.uniform((4, 3), -20, 20)    ==   jt.random.uniform((4, 3), -20, 20)
    tf.random.normal((2, 3))              ==   jt.random.normal((2, 3))

How TensorFlow does it (and how it is reproduced here)
------------------------------------------------------
* Seeds.  ``tf.random.set_seed(g)`` stores the global seed ``g`` and creates a
  Python ``random.Random(g)``.  Every random op called *without* an explicit
  ``seed`` draws its op seed from that stream with
  ``randint(0, 2**31 - 1)``; the kernel then runs with
  ``(seed, seed2) = (g % (2**31 - 1), op_seed % (2**31 - 1))``
  (``(0, 0)`` is replaced by ``(0, 2**31 - 1)``).  With an explicit op seed
  and no global seed, ``seed = 87654321`` (``DEFAULT_GRAPH_SEED``).
* Generator.  Philox-4x32-10 with key ``(seed & 0xffffffff, seed >> 32)`` and
  a 128-bit counter whose two high words are ``seed2``; block ``i`` of an
  op's output uses counter ``i``; each block yields four uint32 words.
* Kernel cache.  TF caches eager kernels by op and attributes (including
  ``seed``/``seed2``), and a cached kernel's generator moves forward by
  ``256 * num_elements`` blocks on every call.  So calling
  ``tf.random.uniform(shape, seed=3)`` twice gives two different results.
  This is reproduced (the cache is keyed by op kind, dtype, seed and seed2,
  and is cleared by ``set_seed``, as TF clears its kernel cache).  It holds
  one small dict entry per distinct (op, dtype, seed pair) used, so it grows
  with the number of seeded calls until the next ``set_seed`` (as TF's does).
* Distributions (``tsl/lib/random/random_distributions*.h``):
  - uniform float32: ``bitcast(0x3f800000 | (x & 0x7fffff)) - 1``, one word
    per value; float64: 52 mantissa bits from two words
    ``(x0 & 0xfffff) << 32 | x1``.  The op then applies
    ``r * (maxval - minval) + minval`` in the output dtype (or ``r * maxval``
    when ``minval`` is the Python int ``0``, as ``random_ops.py`` does).
  - uniform int32: ``minval + x % (maxval - minval)`` (unsigned modulo, one
    word per value); int64: ``minval + (x0 | x1 << 32) % range``.
  - normal float32: Box-Muller on word pairs ``(x0, x1)``:
    ``u1 = max(U(x0), 1e-7)``, ``v1 = float32(2*pi*U(x1))``,
    ``r = sqrtf(-2 * logf(u1))``, outputs ``sinf(v1) * r, cosf(v1) * r``,
    then ``* stddev + mean`` in float32.  TF calls glibc's ``logf`` and
    ``sincosf``, which are *not* correctly rounded (about 1% of results are
    one ulp away from ``float32(math.log(x))``), so this module contains a
    NumPy transcription of glibc's (>= 2.28) ``logf``/``sincosf`` algorithms
    (table + polynomial evaluated in float64).  It was checked against the
    real glibc 2.36 for all 2**23 possible inputs with zero differences.
    (TF's own float32 normals depend on the C library: this matches TF on
    Linux/glibc >= 2.28; TF on macOS or Windows uses another libm.)
  - normal float64: Box-Muller on whole blocks ``(x0, x1, x2, x3)`` with
    ``log``/``sin``/``cos`` in float64 (NumPy's; identical to glibc on the
    test machine, but NumPy builds with their own SIMD float64 routines may
    differ from TF in the last ulp in rare cases).

No global seed
--------------
Without ``set_seed`` (or after ``set_seed(None)``) and without an op seed,
TF draws fresh random Philox seeds from the OS.  Here the Philox key and
counter are drawn from ``numpy.random.default_rng()``, itself seeded from OS
entropy when first needed; results are then not reproducible (as in TF).

Only the NumPy array helpers (``_uniform_array``, ``_normal_array``,
``_glorot_uniform_array``) are used by the public functions, which wrap the
array with ``jittape.tensor.constant`` (imported lazily).

In compiled code
----------------
In a function being traced, a draw is an input of the compiled code
(``Trace.random_input``), drawn again with the same arguments by the host before
every call of the kernel: the op-seed stream and the emulated kernel cache
advance exactly as they do eagerly, so after ``set_seed(s)`` a compiled function
returns the numbers the eager function returns. (Philox in generated code would
save the host draw, but would have to reproduce glibc's ``logf``/``sincosf`` to
give these numbers.)
"""

import math
import operator
import random as _pyrandom
import threading

import numpy as np

from . import core

__all__ = ["set_seed", "get_seed", "uniform", "normal", "glorot_uniform"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2 ** 31 - 1
# TF's PhiloxRandomOp / RandomUniformIntOp reserve 256 blocks per output
# element on every call of a (cached) kernel.
_RESERVE_MULTIPLIER = 256

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85

_SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64),
                     np.dtype(np.int32), np.dtype(np.int64))


# --------------------------------------------------------------------------
# Global seed state (mirrors tensorflow/python/eager/context.py)
# --------------------------------------------------------------------------
class _SeedState:
    def __init__(self):
        self.lock = threading.RLock()
        self.global_seed = None       # None: nondeterministic (no set_seed)
        self.op_rng = None            # random.Random(global_seed)
        self.kernel_offsets = {}      # emulated eager kernel cache
        self.entropy = None           # np.random.Generator, for unseeded ops


_STATE = _SeedState()


def set_seed(seed):
    """Set the global random seed, like ``tf.random.set_seed``.

    Resets the op-seed stream (``random.Random(seed)``) and the emulated
    kernel cache, so the same sequence of random calls after ``set_seed(s)``
    always returns the same values -- the values TensorFlow returns.
    ``set_seed(None)`` goes back to nondeterministic behaviour.
    """
    if seed is not None:
        if isinstance(seed, bool):
            seed = int(seed)
        try:
            seed = operator.index(seed)
        except TypeError:
            arr = np.asarray(seed)
            if arr.ndim != 0 or not np.issubdtype(arr.dtype, np.integer):
                raise TypeError(
                    "seed must be an integer or None, got %r" % (seed,))
            seed = int(arr)
    with _STATE.lock:
        _STATE.global_seed = seed
        _STATE.op_rng = _pyrandom.Random(seed)
        _STATE.kernel_offsets.clear()


def _truncate_seed(seed):
    return seed % _MAXINT32


def get_seed(op_seed=None):
    """Return ``(seed, seed2)`` like ``tf.compat.v1.random.get_seed``.

    With a global seed set and ``op_seed=None`` this consumes one draw of the
    op-seed stream (exactly as every TF random op does).  Returns
    ``(None, None)`` when neither a global nor an op seed is set.
    """
    if op_seed is not None:
        op_seed = operator.index(op_seed)
    with _STATE.lock:
        global_seed = _STATE.global_seed
        if global_seed is not None:
            if op_seed is None:
                op_seed = _STATE.op_rng.randint(0, _MAXINT32)
            seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
        elif op_seed is not None:
            seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
        else:
            seeds = None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds


def _philox_stream(op_kind, dtype, num_elements, seeds):
    """Return ``(key, start_counter)`` for one call of a random op.

    ``seeds`` is the ``(seed, seed2)`` pair from ``get_seed``;
    ``start_counter`` is the 128-bit Philox counter of the first block.
    """
    seed, seed2 = seeds
    if seed is None:
        # Nondeterministic: fresh random 64-bit Philox seeds (TF: OS random).
        with _STATE.lock:
            if _STATE.entropy is None:
                _STATE.entropy = np.random.default_rng()
            words = _STATE.entropy.integers(0, 2 ** 64, size=2,
                                            dtype=np.uint64)
        seed, seed2 = int(words[0]), int(words[1])
        if seed == 0 and seed2 == 0:  # TF would reseed; vanishingly rare
            seed2 = 1
        return seed, seed2 << 64
    cache_key = (op_kind, np.dtype(dtype).str, seed, seed2)
    with _STATE.lock:
        offset = _STATE.kernel_offsets.get(cache_key, 0)
        _STATE.kernel_offsets[cache_key] = (
            offset + num_elements * _RESERVE_MULTIPLIER) % (1 << 128)
    return seed, ((seed2 << 64) + offset) % (1 << 128)


# --------------------------------------------------------------------------
# Philox-4x32-10, vectorised
# --------------------------------------------------------------------------
def _philox4x32(key, counter, n_blocks):
    """Philox-4x32-10 outputs for ``n_blocks`` consecutive counters.

    key: 64-bit int (key words ``key & 0xffffffff``, ``key >> 32``).
    counter: 128-bit int, counter of the first block (words little-endian).
    Returns a uint32 array of shape ``(n_blocks, 4)``.
    """
    n_blocks = int(n_blocks)
    if n_blocks <= 0:
        return np.zeros((0, 4), dtype=np.uint32)
    counter %= 1 << 128
    idx = np.arange(n_blocks, dtype=np.uint64)
    lo = idx + np.uint64(counter & 0xFFFFFFFFFFFFFFFF)   # wraps mod 2**64
    hi = np.full(n_blocks, counter >> 64, dtype=np.uint64)
    hi += (lo < idx).astype(np.uint64)                   # carry
    c0 = lo & _MASK32
    c1 = lo >> _SHIFT32
    c2 = hi & _MASK32
    c3 = hi >> _SHIFT32
    del idx, lo, hi
    k0 = key & 0xFFFFFFFF
    k1 = (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0 = c0 * _PHILOX_M0            # < 2**64: exact
        p1 = c2 * _PHILOX_M1
        # result = [hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0]
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
    out[:, 0] = c0
    out[:, 1] = c1
    out[:, 2] = c2
    out[:, 3] = c3
    return out


def _uint32_to_float(x):
    """TF's Uint32ToFloat: 23 random mantissa bits -> float32 in [0, 1)."""
    bits = (x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(np.float32) - np.float32(1.0)


def _uint64_to_double(x0, x1):
    """TF's Uint64ToDouble: 52 mantissa bits (20 from x0, 32 from x1)."""
    man = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << _SHIFT32) \
        | x1.astype(np.uint64)
    bits = man | np.uint64(1023 << 52)
    return bits.view(np.float64) - 1.0


# --------------------------------------------------------------------------
# glibc (>= 2.28) logf and sincosf, transcribed to NumPy float64.
# TF's float32 Box-Muller calls these; they are not correctly rounded, so
# np.log / np.sin / np.cos would differ from TF in ~1% of the outputs.
# Source: sysdeps/ieee754/flt-32/{e_logf.c,e_logf_data.c,s_sincosf.c,
# s_sincosf.h,sincosf_poly.h,s_sincosf_data.c} (no TOINT_INTRINSICS, x86_64).
# --------------------------------------------------------------------------
_hx = float.fromhex
_LOGF_INVC = np.array([_hx(s) for s in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0",
    "0x1.3c995b0b80385p+0", "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0",
    "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0", "0x1.0953f419900a7p+0",
    "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1",
    "0x1.767dcf5534862p-1")])
_LOGF_LOGC = np.array([_hx(s) for s in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2",
    "-0x1.b31d8a68224e9p-3", "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3",
    "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4", "-0x1.252f438e10c1ep-5",
    "0x0p+0", "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4",
    "0x1.526e57720db08p-3", "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2",
    "0x1.4043057b6ee09p-2")])
_LOGF_LN2 = _hx("0x1.62e42fefa39efp-1")
_LOGF_A0 = _hx("-0x1.00ea348b88334p-2")
_LOGF_A1 = _hx("0x1.5575b0be00b6ap-2")
_LOGF_A2 = _hx("-0x1.ffffef20a4123p-2")


def _glibc_logf(x):
    """glibc logf for finite, normal, positive float32 ``x`` (array)."""
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


_SC_HPI_INV = _hx("0x1.45F306DC9C883p+23")   # 2/pi * 2**24
_SC_HPI = _hx("0x1.921FB54442D18p0")          # pi/2
_SC_C = (1.0, _hx("-0x1.ffffffd0c621cp-2"), _hx("0x1.55553e1068f19p-5"),
         _hx("-0x1.6c087e89a359dp-10"), _hx("0x1.99343027bf8c3p-16"))
_SC_S1 = _hx("-0x1.555545995a603p-3")
_SC_S2 = _hx("0x1.1107605230bc4p-7")
_SC_S3 = _hx("-0x1.994eb3774cf24p-13")


def _abstop12(x):
    return (np.asarray(x, dtype=np.float32).view(np.uint32)
            >> np.uint32(20)) & np.uint32(0x7FF)


_TOP12_PIO4 = int(_abstop12(np.float32(_hx("0x1.921FB54442D18p-1"))))
_TOP12_TINY = int(_abstop12(np.float32(2.0 ** -12)))


def _glibc_sincosf(y):
    """glibc sincosf for float32 ``y`` with 0 <= y < 120 (array)."""
    y = np.ascontiguousarray(y, dtype=np.float32)
    x = y.astype(np.float64)
    top = _abstop12(y)
    small = top < _TOP12_PIO4
    # reduce_fast (non-TOINT_INTRINSICS variant)
    n = ((x * _SC_HPI_INV).astype(np.int32) + np.int32(0x800000)) >> 24
    n[small] = 0
    xr = x - n * _SC_HPI
    xs = np.where((n & 3) == 1, -xr, xr)      # sign = {1, -1, -1, 1}[n & 3]
    xs = np.where((n & 3) == 2, -xr, xs)
    csign = np.where((n & 2) != 0, -1.0, 1.0)  # table 1 negates cos poly
    x2 = xr * xr
    x4 = x2 * x2
    x3 = x2 * xs
    c2 = _SC_C[3] * csign + x2 * (_SC_C[4] * csign)
    s1 = _SC_S2 + x2 * _SC_S3
    c1 = _SC_C[0] * csign + x2 * (_SC_C[1] * csign)
    x5 = x3 * x2
    x6 = x4 * x2
    s = xs + x3 * _SC_S1
    c = c1 + x4 * (_SC_C[2] * csign)
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


# --------------------------------------------------------------------------
# Argument handling
# --------------------------------------------------------------------------
def _as_shape(shape):
    if hasattr(shape, "numpy") and callable(shape.numpy):
        shape = shape.numpy()
    if isinstance(shape, np.ndarray):
        if shape.ndim > 1 or (shape.size and
                              not np.issubdtype(shape.dtype, np.integer)):
            raise ValueError("shape must be an int or a 1-D sequence of "
                             "ints, got %r" % (shape,))
        shape = shape.tolist()
    if isinstance(shape, (list, tuple)):
        dims = []
        for d in shape:
            if isinstance(d, (bool, np.bool_)) or isinstance(
                    d, (float, np.floating)):
                raise ValueError("shape entries must be ints, got %r"
                                 % (shape,))
            try:
                dims.append(operator.index(d))
            except TypeError:
                raise ValueError("shape entries must be ints, got %r"
                                 % (shape,)) from None
        shape = tuple(dims)
    else:
        if isinstance(shape, (bool, np.bool_)):
            raise ValueError("shape must be an int or a tuple of ints")
        try:
            shape = (operator.index(shape),)
        except TypeError:
            raise ValueError("shape must be an int or a tuple of ints, "
                             "got %r" % (shape,)) from None
    if any(d < 0 for d in shape):
        raise ValueError("shape dimensions must be non-negative, got %r"
                         % (shape,))
    return shape


def _as_dtype(dtype):
    if dtype is None:
        return np.dtype(np.float32)
    for attr in ("as_numpy_dtype", "np_dtype", "numpy_dtype"):
        if hasattr(dtype, attr):
            dtype = getattr(dtype, attr)
            break
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError("invalid dtype %r" % (dtype,)) from None
    if dt not in _SUPPORTED_DTYPES:
        raise ValueError(
            "dtype %s is not supported; accepted dtypes are float32, "
            "float64, int32 and int64" % (dt,))
    return dt


def _as_value(v, dt, name):
    """minval/maxval/mean/stddev -> NumPy value of dtype ``dt``."""
    if hasattr(v, "numpy") and callable(v.numpy):
        v = v.numpy()
    arr = np.asarray(v)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError("%s must be numeric, got %r" % (name, v))
    if dt.kind == "i":
        if arr.ndim != 0:
            raise ValueError("%s must be a scalar for integer dtypes" % name)
        if arr.dtype.kind == "f":
            raise TypeError("%s must be an integer for dtype %s, got %r"
                            % (name, dt, v))
        iv = int(arr)
        info = np.iinfo(dt)
        if not info.min <= iv <= info.max:
            raise ValueError("%s=%d out of range for %s" % (name, iv, dt))
        return iv
    if not np.all(np.isfinite(arr.astype(np.float64))):
        raise ValueError("%s must be finite, got %r" % (name, v))
    return arr.astype(dt)


def _n_elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# --------------------------------------------------------------------------
# NumPy-array implementations
# --------------------------------------------------------------------------
def _uniform_array(shape, minval=0, maxval=None, dtype=np.float32,
                   seed=None):
    """``tf.random.uniform`` as a NumPy array (see ``uniform``)."""
    shape = _as_shape(shape)
    dt = _as_dtype(dtype)
    n = _n_elements(shape)
    if dt.kind == "i":
        if maxval is None:
            raise ValueError("Must specify maxval for integer dtype %s" % dt)
        lo = _as_value(minval, dt, "minval")
        hi = _as_value(maxval, dt, "maxval")
        # TF draws the op seed before its kernel rejects bad bounds.
        seeds = get_seed(seed)
        if n > 0 and not lo < hi:
            raise ValueError("Need minval < maxval for integer dtypes, got "
                             "minval=%d, maxval=%d" % (lo, hi))
        key, counter = _philox_stream("RandomUniformInt", dt, n, seeds)
        if n == 0:
            return np.zeros(shape, dtype=dt)
        rng = hi - lo                                  # fits the unsigned type
        if dt == np.int32:
            words = _philox4x32(key, counter, (n + 3) // 4).reshape(-1)[:n]
            off = words.astype(np.int64) % rng         # unsigned 32-bit modulo
            return (off + lo).astype(np.int32).reshape(shape)
        words = _philox4x32(key, counter, (n + 1) // 2).reshape(-1, 2)[:n]
        bits = words[:, 0].astype(np.uint64) | \
            (words[:, 1].astype(np.uint64) << _SHIFT32)
        off = bits % np.uint64(rng)
        out = off + np.uint64(lo % (1 << 64))          # wraps mod 2**64
        return out.view(np.int64).reshape(shape)

    if maxval is None:
        maxval = 1
    # random_ops.py skips the affine transform for Python-int 0 / 1 bounds.
    minval_is_zero = isinstance(minval, int) and minval == 0
    maxval_is_one = isinstance(maxval, int) and maxval == 1
    lo = _as_value(minval, dt, "minval")
    hi = _as_value(maxval, dt, "maxval")
    key, counter = _philox_stream("RandomUniform", dt, n, get_seed(seed))
    if dt == np.float32:
        words = _philox4x32(key, counter, (n + 3) // 4).reshape(-1)[:n]
        rnd = _uint32_to_float(words)
    else:
        words = _philox4x32(key, counter, (n + 1) // 2).reshape(-1, 2)[:n]
        rnd = _uint64_to_double(words[:, 0], words[:, 1])
    rnd = rnd.reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        if minval_is_zero:
            if not maxval_is_one:
                rnd = rnd * hi
        else:
            rnd = rnd * (hi - lo) + lo
    return np.asarray(rnd, dtype=dt)


def _standard_normal_flat(dt, n, key, counter):
    if dt == np.float32:
        words = _philox4x32(key, counter, (n + 3) // 4).reshape(-1, 2)
        words = words[:(n + 1) // 2]
        u1 = np.maximum(_uint32_to_float(words[:, 0]), np.float32(1e-7))
        v1 = (2.0 * math.pi
              * _uint32_to_float(words[:, 1]).astype(np.float64)
              ).astype(np.float32)
        r = np.sqrt(np.float32(-2.0) * _glibc_logf(u1))
        s, c = _glibc_sincosf(v1)
        out = np.empty((len(words), 2), dtype=np.float32)
        out[:, 0] = s * r
        out[:, 1] = c * r
        return out.reshape(-1)[:n]
    words = _philox4x32(key, counter, (n + 1) // 2)
    u1 = np.maximum(_uint64_to_double(words[:, 0], words[:, 1]), 1e-7)
    v1 = 2.0 * math.pi * _uint64_to_double(words[:, 2], words[:, 3])
    r = np.sqrt(-2.0 * np.log(u1))
    out = np.empty((len(words), 2), dtype=np.float64)
    out[:, 0] = np.sin(v1) * r
    out[:, 1] = np.cos(v1) * r
    return out.reshape(-1)[:n]


def _normal_array(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None):
    """``tf.random.normal`` as a NumPy array (see ``normal``)."""
    shape = _as_shape(shape)
    dt = _as_dtype(dtype)
    if dt.kind != "f":
        raise ValueError("normal supports float32 and float64 only, got %s"
                         % dt)
    mean = _as_value(mean, dt, "mean")
    stddev = _as_value(stddev, dt, "stddev")
    n = _n_elements(shape)
    key, counter = _philox_stream("RandomStandardNormal", dt, n,
                                  get_seed(seed))
    rnd = _standard_normal_flat(dt, n, key, counter).reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        out = rnd * stddev + mean
    return np.asarray(out, dtype=dt)


def _compute_fans(shape):
    """Keras ``_compute_fans``: (fan_in, fan_out) of a weight shape."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    return shape[-2] * receptive, shape[-1] * receptive


def _glorot_uniform_array(shape, dtype=np.float32, seed=None):
    """Keras-2 ``GlorotUniform()(shape)`` as a NumPy array."""
    shape = _as_shape(shape)
    dt = _as_dtype(dtype)
    if dt.kind != "f":
        raise ValueError("glorot_uniform supports float32 and float64 only, "
                         "got %s" % dt)
    fan_in, fan_out = _compute_fans(shape)
    # keras VarianceScaling(scale=1, mode="fan_avg", distribution="uniform")
    scale = 1.0 / max(1.0, (fan_in + fan_out) / 2.0)
    limit = math.sqrt(3.0 * scale)
    return _uniform_array(shape, -limit, limit, dtype=dt, seed=seed)


# --------------------------------------------------------------------------
# Public API (returns jittape Tensors)
# --------------------------------------------------------------------------
def _to_tensor(arr):
    from ..tensor import constant  # lazy: tensor.py imports may import us
    return constant(arr)


def _drawn(make, *args):
    """``make(*args)`` as a tensor. In a function being compiled the draw is an input of
    the compiled code that is drawn anew, with these arguments, at every call (a
    constant would repeat the first draw forever): the generator advances as it does
    eagerly, so a seed gives the same sequence of values compiled and eager."""
    value = make(*args)
    if core.TRACES:
        trace = core.current_trace()
        if trace is not None:
            return trace.random_input(lambda: make(*args), value)
    return _to_tensor(value)


def uniform(shape, minval=0, maxval=None, dtype=np.float32, seed=None):
    """Uniform random values in ``[minval, maxval)``, like ``tf.random.uniform``.

    shape: int or tuple/list of ints.  dtype: float32 (default), float64,
    int32 or int64.  ``maxval=None`` means 1 for floats; integer dtypes
    require ``maxval`` (ValueError otherwise) and ``minval < maxval``.
    Float ``minval``/``maxval`` may be arrays broadcastable to ``shape``.
    seed: optional op-level seed with TF eager semantics (repeated calls with
    the same seed continue the same stream; reset by ``set_seed``).
    Consumes one op seed from the ``set_seed`` stream when ``seed`` is None.
    """
    return _drawn(_uniform_array, shape, minval, maxval, dtype, seed)


def normal(shape, mean=0.0, stddev=1.0, dtype=np.float32, seed=None):
    """Normal random values, like ``tf.random.normal`` (float32/float64)."""
    return _drawn(_normal_array, shape, mean, stddev, dtype, seed)


def glorot_uniform(shape, dtype=np.float32, seed=None):
    """Glorot/Xavier uniform initializer, like Keras 2's ``GlorotUniform()``.

    Draws ``uniform(shape, -limit, limit)`` with
    ``limit = sqrt(3 / max(1, (fan_in + fan_out) / 2))`` (= sqrt(6 / (fan_in +
    fan_out))), consuming one op seed of the ``set_seed`` stream; this is what
    an unseeded ``tf.keras`` (Keras 2) Dense layer does when it builds its
    kernel.
    """
    return _drawn(_glorot_uniform_array, shape, dtype, seed)
