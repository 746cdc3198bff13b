"""Tests for jittape.ops.random: TensorFlow-2-compatible random numbers.

Every fixture below was produced by TensorFlow 2.21 (CPU, eager) with the
same call sequence; TensorFlow itself is not needed to run these tests.
Floats are written as Python doubles (``tensor.numpy().tolist()``), so
converting them back to float32 is exact.
"""

import hashlib
import math

import numpy as np
import pytest

from jittape.ops import random as jr


def f32(x):
    return np.array(x, dtype=np.float32)


def sha256(a):
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.astype(a.dtype.newbyteorder("<")).tobytes()
                          ).hexdigest()


def assert_bits_equal(actual, expected):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(np.atleast_1d(actual).view(np.uint8),
                                  np.atleast_1d(expected).view(np.uint8))


@pytest.fixture(autouse=True)
def _reset_seed():
    yield
    jr.set_seed(None)


# ---------------------------------------------------------------------------
# Tutorial numbers (printed by a TF2 tutorial, re-checked against TF 2.21)
# ---------------------------------------------------------------------------
TUTORIAL_UNIFORM = [[-13.394766, 16.05925, 5.238968],
                    [-2.6181564, -8.322439, 5.700083],
                    [19.031418, -2.5960197, 6.4040756],
                    [4.195833, 5.4652596, 4.5779514]]


def test_tutorial_uniform_float32():
    jr.set_seed(1)
    w = jr._uniform_array((4, 3), minval=-20, maxval=20, dtype=np.float32)
    # The printed values are float32 shortest reprs, so this is bit-exact.
    assert_bits_equal(w, f32(TUTORIAL_UNIFORM))


def test_tutorial_int32_matmul():
    jr.set_seed(1)
    w = jr._uniform_array((4, 3), minval=-20, maxval=20, dtype=np.int32)
    assert_bits_equal(w, np.array([[-18, 9, 7], [1, -2, 6], [6, 11, -4],
                                   [-2, 16, -18]], dtype=np.int32))
    b = np.ones(3, np.int32)
    out = np.array([[1, 2, 3, 4]], dtype=np.int32) @ w + b
    np.testing.assert_array_equal(out, [[-5, 103, -64]])


# Exact TF values of the tutorial's Dense kernels (the tutorial printed them
# rounded to 8 significant digits).
DENSE_1 = [[-0.5774045586585999, -0.572318971157074],
           [0.007955670356750488, 0.5992962121963501],
           [0.24269533157348633, 0.8154019117355347]]
DENSE_2 = [[0.46956396102905273, -0.7155747413635254, -0.8732330799102783,
            -0.6216001510620117],
           [0.5963418483734131, 0.4084925651550293, -0.1821305751800537,
            0.028549671173095703]]


def test_tutorial_dense_kernels():
    # After set_seed(1) the tutorial drew the (4, 3) uniform above, ran two
    # more random ops (which ones does not matter: each consumes one op
    # seed), then built Dense(2) on 3 features and Dense(4) on 2 features.
    # So the kernels are the 4th and 5th op seeds of the stream.
    jr.set_seed(1)
    jr._uniform_array((4, 3), minval=-20, maxval=20)
    jr._normal_array((7,))
    jr._uniform_array((1,), maxval=5, dtype=np.int32)
    k1 = jr._glorot_uniform_array((3, 2))
    k2 = jr._glorot_uniform_array((2, 4))
    assert_bits_equal(k1, f32(DENSE_1))
    assert_bits_equal(k2, f32(DENSE_2))
    printed_1 = [[-0.57740456, -0.572319], [0.00795567, 0.5992962],
                 [0.24269533, 0.8154019]]
    printed_2 = [[0.46956396, -0.71557474, -0.8732331, -0.62160015],
                 [0.59634185, 0.40849257, -0.18213058, 0.02854967]]
    np.testing.assert_allclose(k1, printed_1, rtol=0, atol=6e-8)
    np.testing.assert_allclose(k2, printed_2, rtol=0, atol=6e-8)


def test_glorot_is_uniform_with_glorot_limit():
    jr.set_seed(1)
    jr._uniform_array((4, 3), -20, 20)
    jr._uniform_array((2,))
    jr._uniform_array((2,))
    lim = math.sqrt(6.0 / (3 + 2))
    expected = jr._uniform_array((3, 2), -lim, lim)
    jr.set_seed(1)
    for _ in range(3):
        jr._uniform_array((1,))
    assert_bits_equal(jr._glorot_uniform_array((3, 2)), expected)


# ---------------------------------------------------------------------------
# More TF fixtures
# ---------------------------------------------------------------------------
def test_normal_float32_seed42():
    jr.set_seed(42)
    assert_bits_equal(jr._normal_array((2, 3)), f32(
        [[0.32746851444244385, -0.8426257967948914, 0.31943368911743164],
         [-1.407551884651184, -2.3880598545074463, -1.0392478704452515]]))
    assert_bits_equal(jr._normal_array((2, 3)), f32(
        [[0.08422458171844482, -0.8609037399291992, 0.37812304496765137],
         [-0.005196273792535067, -0.4945319592952728, 0.6178191900253296]]))


def test_second_call_after_set_seed():
    jr.set_seed(1)
    jr._uniform_array((4, 3), minval=-20, maxval=20)
    assert_bits_equal(jr._uniform_array((2, 3)), f32(
        [[0.5101070404052734, 0.44353175163269043, 0.40853309631347656],
         [0.9924923181533813, 0.6886639595031738, 0.3458496332168579]]))


def test_uniform_float64():
    jr.set_seed(5)
    assert_bits_equal(jr._uniform_array((2, 3), dtype=np.float64), np.array(
        [[0.011145436260557195, 0.06765832287909168, 0.7532301457963841],
         [0.5332004339742016, 0.29827224128313, 0.2205762269816247]]))
    assert_bits_equal(
        jr._uniform_array((3,), minval=-1.0, maxval=3.0, dtype=np.float64),
        np.array([1.454640709186851, 0.9346342021378415,
                  -0.04132804218674746]))


def test_uniform_int32_int64():
    jr.set_seed(5)
    assert_bits_equal(
        jr._uniform_array((2, 5), minval=-1000, maxval=1000, dtype=np.int32),
        np.array([[-930, -129, -632, 366, 147], [396, 949, 105, 721, 411]],
                 dtype=np.int32))
    assert_bits_equal(
        jr._uniform_array((2, 3), minval=-2 ** 40, maxval=2 ** 50,
                          dtype=np.int64),
        np.array([[52863142842765, 1063013738593552, 871712965252526],
                  [158430341070892, 1119606694215465, 706836550845240]],
                 dtype=np.int64))
    assert_bits_equal(
        jr._uniform_array((4,), minval=-2 ** 31, maxval=2 ** 31 - 1,
                          dtype=np.int32),
        np.array([1855575151, -223580972, -1165550523, 1782086420],
                 dtype=np.int32))


def test_normal_float64_with_mean_stddev():
    jr.set_seed(123)
    got = jr._normal_array((5,), mean=2.0, stddev=0.5, dtype=np.float64)
    assert got.dtype == np.float64
    # float64 normal uses NumPy's log/sin/cos; allow a last-ulp difference
    # from glibc's (they agree on the reference machine).
    np.testing.assert_allclose(
        got, [2.94188694151724, 0.7934600648382437, 2.087969202822935,
              1.6439487117760028, 1.5109455014476132], rtol=1e-15, atol=0)


def test_scalar_shapes():
    jr.set_seed(7)
    a = jr._uniform_array(())
    assert a.shape == () and a.dtype == np.float32
    assert_bits_equal(a, f32(0.834453821182251))
    assert_bits_equal(jr._normal_array(()), f32(-2.2733311653137207))
    assert_bits_equal(jr._uniform_array(5, maxval=10), f32(
        [2.5153684616088867, 3.015751838684082, 5.093775749206543,
         6.036474704742432, 9.555521965026855]))


def test_large_draws_match_tf_bit_for_bit():
    jr.set_seed(2024)
    assert sha256(jr._normal_array((1000, 1000))) == (
        "58f1b644c166588662fac7ba22f1b31d8583c8c7d836b553b1dad035fe7127c2")
    assert sha256(jr._uniform_array((999, 1001), minval=-3, maxval=4)) == (
        "fff4493cc8c3356205d6670caf4dc286644e5aca32abf46011fa1c35e6f50181")
    n64 = jr._normal_array((100003,), dtype=np.float64)
    np.testing.assert_allclose(n64.sum(), -95.2331112140632, rtol=1e-10)
    np.testing.assert_allclose((n64 * n64).sum(), 100260.53984425821,
                               rtol=1e-12)
    np.testing.assert_allclose(
        n64[-3:], [-0.9025172984572655, -1.9718279582627465,
                   -0.4519273508214474], rtol=1e-15)
    assert sha256(jr._uniform_array((100001,), dtype=np.float64)) == (
        "9d65f0aa1dbd17ebee05885d19599b5a07f20a63e8d4c033eee15dda87f17256")
    assert sha256(jr._uniform_array((100001,), minval=-7, maxval=100,
                                    dtype=np.int32)) == (
        "16a45cde7b3414c3ced081a8299d7ac9223d31082c8f840737c8532aa0307686")
    assert sha256(jr._uniform_array((100001,), minval=-7, maxval=2 ** 40,
                                    dtype=np.int64)) == (
        "966660a0879a44ce99d95e3821fa949067f4dc47b19bded37c2ccb6dcbe14fa5")


def test_explicit_op_seed_follows_tf_kernel_cache():
    # tf.random.uniform(shape, seed=3) in eager mode: a cached kernel whose
    # stream advances on every call; set_seed resets it.
    first = f32([0.7787856, 0.80119777, 0.72437465, 0.23089433, 0.72714126])
    second = f32([0.9094503, 0.28230965, 0.25853276, 0.87884915, 0.33375382])
    jr.set_seed(1)
    assert_bits_equal(jr._uniform_array((5,), seed=3), first)
    assert_bits_equal(jr._uniform_array((5,), seed=3), second)
    # other ops / dtypes are separate kernels, starting fresh
    assert_bits_equal(jr._normal_array((5,), seed=3), f32(
        [-0.67086124, 0.22357145, 0.79727304, 0.09617059, 0.72314787]))
    assert_bits_equal(jr._uniform_array((5,), seed=3, maxval=10,
                                        dtype=np.int32),
                      np.array([7, 2, 9, 4, 3], np.int32))
    assert_bits_equal(jr._uniform_array((5,), seed=3, maxval=10,
                                        dtype=np.int32),
                      np.array([8, 9, 0, 5, 4], np.int32))
    # explicit op seeds do not consume the global op-seed stream
    assert_bits_equal(jr._uniform_array((5,)), f32(
        [0.16513085, 0.9014813, 0.6309742, 0.4345461, 0.29193902]))
    jr.set_seed(1)
    assert_bits_equal(jr._uniform_array((5,), seed=3), first)


def test_op_seed_without_global_seed_uses_default_graph_seed():
    jr.set_seed(None)
    assert_bits_equal(jr._uniform_array((3,), seed=3), f32(
        [0.38692939281463623, 0.3600262403488159, 0.9768795967102051]))
    assert_bits_equal(jr._uniform_array((3,), seed=3), f32(
        [0.9421699047088623, 0.5801160335540771, 0.36421120166778564]))


def test_global_seed_zero():
    jr.set_seed(0)
    assert_bits_equal(jr._uniform_array((3,)), f32(
        [0.29197514057159424, 0.2065664529800415, 0.5353907346725464]))
    assert_bits_equal(jr._uniform_array((3,), seed=0), f32(
        [0.01975703239440918, 0.0070421695709228516, 0.189872145652771]))


def test_get_seed_stream():
    import random
    jr.set_seed(1)
    rng = random.Random(1)
    for _ in range(5):
        assert jr.get_seed() == (1, rng.randint(0, 2 ** 31 - 1) % (2 ** 31 - 1))
    assert jr.get_seed(7) == (1, 7)
    jr.set_seed(None)
    assert jr.get_seed() == (None, None)
    assert jr.get_seed(7) == (87654321, 7)


# ---------------------------------------------------------------------------
# glibc logf / sincosf emulation (TF's float32 Box-Muller calls glibc, whose
# results are not always correctly rounded).  Inputs below are points where
# glibc 2.36 differs from the correctly rounded result; values are bits.
# ---------------------------------------------------------------------------
GLIBC_POINTS = {
    "log": [(0x3f723818, 0xbd62a6a0), (0x3f7bbd36, 0xbc897f00),
            (0x3f4a7b0c, 0xbe702972), (0x3f5a0e3c, 0xbe244711)],
    "sin": [(0x403226c8, 0x3eb364de), (0x3e709109, 0x3e6e5c1b),
            (0x3f350edd, 0x3f265625), (0x406a8dc7, 0xbeffdf4d)],
    "cos": [(0x4091a5a9, 0xbe24118f), (0x4084d648, 0xbf08402d),
            (0x409a4240, 0x3ddd2864), (0x400c2c3a, 0xbf149edf)],
}


def _from_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


@pytest.mark.parametrize("name", ["log", "sin", "cos"])
def test_glibc_emulation_points(name):
    x = _from_bits([p[0] for p in GLIBC_POINTS[name]])
    want = np.array([p[1] for p in GLIBC_POINTS[name]], dtype=np.uint32)
    if name == "log":
        got = jr._glibc_logf(x)
    else:
        s, c = jr._glibc_sincosf(x)
        got = s if name == "sin" else c
    np.testing.assert_array_equal(got.view(np.uint32), want)


def test_glibc_emulation_accuracy():
    # Over the whole Box-Muller input range the emulation stays within one
    # ulp of the correctly rounded values.
    m = np.arange(0, 1 << 23, 97, dtype=np.uint32)
    u = jr._uint32_to_float(m)
    u1 = np.maximum(u, np.float32(1e-7))
    lg = jr._glibc_logf(u1).astype(np.float64)
    np.testing.assert_allclose(lg, np.log(u1.astype(np.float64)),
                               rtol=2 ** -23, atol=0)
    v = (2 * np.pi * u.astype(np.float64)).astype(np.float32)
    s, c = jr._glibc_sincosf(v)
    np.testing.assert_allclose(s, np.sin(v.astype(np.float64)),
                               rtol=0, atol=2 ** -24)
    np.testing.assert_allclose(c, np.cos(v.astype(np.float64)),
                               rtol=0, atol=2 ** -24)


def test_philox_known_answer():
    # Random123 known-answer test for philox4x32-10 (counter, key -> out).
    out = jr._philox4x32(0, 0, 1)
    np.testing.assert_array_equal(
        out[0], np.array([0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
                         dtype=np.uint32))
    ctr = 0x243f6a88 | 0x85a308d3 << 32 | 0x13198a2e << 64 | 0x03707344 << 96
    key = 0xa4093822 | 0x299f31d0 << 32
    np.testing.assert_array_equal(
        jr._philox4x32(key, ctr, 1)[0],
        np.array([0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
                 dtype=np.uint32))


def test_philox_counter_carry():
    # blocks are consecutive 128-bit counters, with carry across words
    start = (5 << 64) + (1 << 64) - 2
    blocks = jr._philox4x32(9, start, 4)
    for i in range(4):
        np.testing.assert_array_equal(blocks[i],
                                      jr._philox4x32(9, start + i, 1)[0])


# ---------------------------------------------------------------------------
# Determinism, shapes, dtypes, statistics
# ---------------------------------------------------------------------------
def test_reseeding_is_deterministic():
    def draw():
        return [jr._uniform_array((3, 4)), jr._normal_array((5,)),
                jr._uniform_array((6,), -5, 5, dtype=np.int64),
                jr._glorot_uniform_array((4, 4))]
    jr.set_seed(99)
    a = draw()
    jr.set_seed(99)
    b = draw()
    for x, y in zip(a, b):
        assert_bits_equal(x, y)
    jr.set_seed(100)
    assert not np.array_equal(draw()[0], a[0])


def test_consecutive_calls_differ():
    jr.set_seed(3)
    assert not np.array_equal(jr._uniform_array((10,)),
                              jr._uniform_array((10,)))


def test_unseeded_is_random():
    jr.set_seed(None)
    a = jr._uniform_array((16,))
    b = jr._uniform_array((16,))
    assert not np.array_equal(a, b)
    assert a.dtype == np.float32 and np.all((a >= 0) & (a < 1))


def test_set_seed_accepts_numpy_ints():
    jr.set_seed(np.int64(1))
    assert_bits_equal(jr._uniform_array((4, 3), -20, 20),
                      f32(TUTORIAL_UNIFORM))


@pytest.mark.parametrize("dtype,kw", [
    (np.float32, {}), (np.float64, {}),
    (np.int32, {"maxval": 10}), (np.int64, {"minval": -3, "maxval": 10}),
    ("float32", {}), ("int64", {"maxval": 2}),
])
@pytest.mark.parametrize("shape,expected", [
    ((2, 3), (2, 3)), ([4], (4,)), (5, (5,)), ((), ()), ((0, 3), (0, 3)),
    ((2, 1, 3), (2, 1, 3)),
])
def test_uniform_shape_and_dtype(dtype, kw, shape, expected):
    jr.set_seed(0)
    a = jr._uniform_array(shape, dtype=dtype, **kw)
    assert a.shape == expected
    assert a.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3), 7, (), (3, 0), (1, 2, 3)])
def test_normal_shape_and_dtype(dtype, shape):
    jr.set_seed(0)
    a = jr._normal_array(shape, dtype=dtype)
    assert a.shape == (shape if isinstance(shape, tuple) else (shape,))
    assert a.dtype == np.dtype(dtype)


def test_uniform_statistics():
    jr.set_seed(11)
    for dt in (np.float32, np.float64):
        a = jr._uniform_array((1000, 1000), dtype=dt)
        assert a.min() >= 0 and a.max() < 1
        assert abs(a.mean() - 0.5) < 3e-3
        assert abs(a.std() - math.sqrt(1 / 12)) < 3e-3
    a = jr._uniform_array(10 ** 6, minval=-2.0, maxval=6.0)
    assert a.min() >= -2 and a.max() < 6
    assert abs(a.mean() - 2.0) < 0.02


def test_uniform_int_statistics():
    jr.set_seed(12)
    for dt in (np.int32, np.int64):
        a = jr._uniform_array((10 ** 6,), minval=-5, maxval=5, dtype=dt)
        assert a.min() == -5 and a.max() == 4
        counts = np.bincount(a + 5, minlength=10)
        assert np.all(np.abs(counts / 1e5 - 1) < 0.02)


def test_normal_statistics():
    jr.set_seed(13)
    for dt in (np.float32, np.float64):
        a = jr._normal_array((10 ** 6,), dtype=dt)
        assert abs(a.mean()) < 5e-3
        assert abs(a.std() - 1) < 5e-3
        assert np.all(np.isfinite(a))
        assert abs(np.mean(np.abs(a) < 1) - 0.6827) < 3e-3
    a = jr._normal_array((10 ** 6,), mean=3.0, stddev=0.5)
    assert abs(a.mean() - 3) < 3e-3 and abs(a.std() - 0.5) < 3e-3


def test_glorot_limits_and_fans():
    jr.set_seed(4)
    for shape in [(3, 2), (100, 50), (3, 3, 16, 32), (10,)]:
        if len(shape) == 1:
            fi = fo = shape[0]
        elif len(shape) == 2:
            fi, fo = shape
        else:
            rf = int(np.prod(shape[:-2]))
            fi, fo = shape[-2] * rf, shape[-1] * rf
        lim = math.sqrt(6 / (fi + fo))
        w = jr._glorot_uniform_array(shape)
        assert w.shape == shape and w.dtype == np.float32
        assert np.all(np.abs(w) <= np.float32(lim))
    w = jr._glorot_uniform_array((200, 300), dtype=np.float64)
    assert w.dtype == np.float64
    assert abs(w.std() - math.sqrt(6 / 500) / math.sqrt(3)) < 2e-3


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
def test_int_uniform_requires_maxval():
    with pytest.raises(ValueError):
        jr._uniform_array((2,), dtype=np.int32)
    with pytest.raises(ValueError):
        jr._uniform_array((2,), minval=-3, dtype=np.int64)


def test_int_uniform_requires_minval_below_maxval():
    with pytest.raises(ValueError):
        jr._uniform_array((2,), minval=5, maxval=5, dtype=np.int32)
    with pytest.raises(ValueError):
        jr._uniform_array((2,), minval=6, maxval=5, dtype=np.int64)


def test_int_uniform_rejects_float_bounds_and_overflow():
    with pytest.raises(TypeError):
        jr._uniform_array((2,), minval=1.5, maxval=3, dtype=np.int32)
    with pytest.raises(ValueError):
        jr._uniform_array((2,), minval=0, maxval=2 ** 31, dtype=np.int32)


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.uint8,
                                   np.complex64, "not-a-dtype"])
def test_unsupported_dtypes(dtype):
    with pytest.raises(ValueError):
        jr._uniform_array((2,), maxval=1, dtype=dtype)


def test_normal_rejects_int_dtype():
    with pytest.raises(ValueError):
        jr._normal_array((2,), dtype=np.int32)


@pytest.mark.parametrize("shape", [(-1, 2), -3, (2.0, 3), 1.5, "abc",
                                   (True, 2), [[2, 3]]])
def test_bad_shapes(shape):
    with pytest.raises(ValueError):
        jr._uniform_array(shape)
    with pytest.raises(ValueError):
        jr._normal_array(shape)


def test_bad_seed():
    with pytest.raises(TypeError):
        jr.set_seed("abc")
    with pytest.raises(TypeError):
        jr.set_seed(1.5)


def test_non_finite_bounds():
    with pytest.raises(ValueError):
        jr._uniform_array((2,), minval=0.0, maxval=float("inf"))
    with pytest.raises(ValueError):
        jr._normal_array((2,), stddev=float("nan"))


# ---------------------------------------------------------------------------
# Public API (returns jittape Tensors)
# ---------------------------------------------------------------------------
def _to_numpy(t):
    if hasattr(t, "numpy") and callable(t.numpy):
        return np.asarray(t.numpy())
    return np.asarray(t)


def test_public_api_returns_tensors():
    pytest.importorskip("jittape.tensor")
    jr.set_seed(1)
    w = jr.uniform((4, 3), minval=-20, maxval=20)
    assert_bits_equal(_to_numpy(w), f32(TUTORIAL_UNIFORM))
    jr.set_seed(42)
    n = _to_numpy(jr.normal((2, 3)))
    assert n.dtype == np.float32 and n.shape == (2, 3)
    np.testing.assert_allclose(n[0, 0], 0.32746851444244385, rtol=0, atol=0)
    jr.set_seed(1)
    i = _to_numpy(jr.uniform((4, 3), -20, 20, dtype=np.int32))
    assert i.dtype == np.int32
    assert _to_numpy(jr.glorot_uniform((3, 2))).shape == (3, 2)
    assert _to_numpy(jr.uniform(3, dtype=np.float64)).dtype == np.float64
