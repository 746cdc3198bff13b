"""The loss-function corpus (tests/corpus.py) through the eager tape and the compiler.

(a) the eager tape against central finite differences in float64;
(b) float32 runs keep float32 (no widening) and agree with float64 to rounding;
(c) the compiled ``jt.value_and_grad`` against the eager tape, in float64 to 1e-9 and in
    float32 to rounding. It is skipped until ``jt.value_and_grad`` exists.
"""

import zlib

import numpy as np
import pytest

import jittape as jt
from corpus import (CASES, cast_floats, diff_args, eager_value_and_grad, evaluate,
                    is_float_array, numeric_grad, tree_leaves, tree_map, tree_structure)

NAMES = [c.name for c in CASES]
F32_EPS = float(np.finfo(np.float32).eps)

# float32 against float64 (test b) and compiled float32 against eager float32 (test c):
# elementwise |got - want| <= RTOL32 * (|want| + max(1, max |want| over the array)).
# 1e-5 is about 84 float32 ulps; the eager float32 errors measured on this corpus stay
# below 2 ulps on that scale, which leaves room for another summation order or fusion.
RTOL32 = 1e-5


def make_args(case, dtype):
    """The case's arguments; the same draws for every dtype (seeded by the case's name)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    return case.make_args(rng, dtype)


def assert_close(got, want, rtol, atol_rel, what):
    """|got - want| <= rtol |want| + atol_rel * max(1, max |want|), elementwise."""
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol_rel * scale,
                               err_msg=what)


def check_grad_structure(grads, args, case, dtype):
    """Gradients nest like the differentiated arguments; leaves are NumPy arrays of the
    arguments' shapes and dtypes."""
    sources = diff_args(case, args)
    assert tree_structure(grads) == tree_structure(sources)
    for g, x in zip(tree_leaves(grads), tree_leaves(sources)):
        assert isinstance(g, (np.ndarray, np.generic)) and not isinstance(g, jt.Tensor), type(g)
        assert np.shape(g) == np.shape(x)
        assert np.asarray(g).dtype == np.asarray(x).dtype == dtype


def test_corpus_is_large_and_well_formed():
    assert len(CASES) >= 32
    assert len(set(NAMES)) == len(NAMES)
    for case in CASES:
        args = make_args(case, np.float64)
        assert isinstance(args, tuple)
        assert all(0 <= i < len(args) for i in ((case.argnums,) if isinstance(case.argnums, int)
                                                else case.argnums))
        # every differentiated leaf is a floating array
        assert all(is_float_array(x) for x in tree_leaves(diff_args(case, args))), case.name


@pytest.mark.parametrize("case", CASES, ids=NAMES)
def test_eager_matches_finite_differences(case):
    args = make_args(case, np.float64)
    value, grads = eager_value_and_grad(case, args)
    assert value.shape == () and value.dtype == np.float64
    assert float(value) == evaluate(case, args)            # the tape changes no value
    check_grad_structure(grads, args, case, np.float64)
    numeric = numeric_grad(case, args)
    assert tree_structure(numeric) == tree_structure(grads)
    for k, (g, n) in enumerate(zip(tree_leaves(grads), tree_leaves(numeric))):
        assert np.max(np.abs(n)) > 1e-3, f"{case.name}: leaf {k} has no gradient to check"
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8, err_msg=f"{case.name} leaf {k}")
    # trainable Variables instead of watched constants: the same numbers
    value_v, grads_v = eager_value_and_grad(case, args, variables=True)
    assert float(value_v) == float(value)
    assert tree_structure(grads_v) == tree_structure(grads)
    for g, gv in zip(tree_leaves(grads), tree_leaves(grads_v)):
        np.testing.assert_array_equal(gv, g)


@pytest.mark.parametrize("case", CASES, ids=NAMES)
def test_eager_float32_keeps_dtypes(case):
    args = make_args(case, np.float32)
    args64 = make_args(case, np.float64)
    for a, a64 in zip(tree_leaves(args), tree_leaves(args64)):
        if is_float_array(a64):
            assert a.dtype == np.float32
            np.testing.assert_array_equal(a, a64.astype(np.float32))
    value, grads = eager_value_and_grad(case, args)
    assert value.shape == () and value.dtype == np.float32
    check_grad_structure(grads, args, case, np.float32)
    # float64 at the same (rounded) inputs: the float32 run differs by rounding only
    ref_value, ref_grads = eager_value_and_grad(case, cast_floats(args, np.float64))
    assert_close(value, ref_value, RTOL32, RTOL32, f"{case.name} value")
    for k, (g, r) in enumerate(zip(tree_leaves(grads), tree_leaves(ref_grads))):
        assert_close(g, r, RTOL32, RTOL32, f"{case.name} leaf {k}")


compiled = pytest.mark.skipif(not hasattr(jt, "value_and_grad"),
                              reason="compiled gradients (jt.value_and_grad) have not landed")


@compiled
@pytest.mark.parametrize("case", CASES, ids=NAMES)
def test_compiled_matches_eager(case):
    check_compiled(case, "cpu")


def check_compiled(case, target):
    """The case compiled for ``target`` against the eager tape, in float64 and float32."""
    for dtype, rtol, atol_rel in ((np.float64, 1e-9, 1e-12), (np.float32, RTOL32, RTOL32)):
        args = make_args(case, dtype)
        want_value, want_grads = eager_value_and_grad(case, args)
        given = tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, args)
        value, grads = jt.value_and_grad(case.fn, argnums=case.argnums, target=target)(*given)
        # NumPy in, NumPy out; the inputs are left as they were
        for a, b in zip(tree_leaves(given), tree_leaves(args)):
            np.testing.assert_array_equal(a, b)
        assert not isinstance(value, jt.Tensor), type(value)
        assert np.shape(value) == () and np.asarray(value).dtype == dtype
        what = f"{case.name} ({np.dtype(dtype).name}, {target})"
        assert_close(value, want_value, rtol, atol_rel, f"{what} value")
        check_grad_structure(grads, args, case, dtype)
        for k, (g, w) in enumerate(zip(tree_leaves(grads), tree_leaves(want_grads))):
            assert_close(g, w, rtol, atol_rel, f"{what} leaf {k}")
