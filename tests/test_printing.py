"""The graph text and the generated code speak the user's vocabulary (DESIGN.md rule 3):
inputs named after the parameters, sizes as symbols with a legend, scalar constants by
value, the backward pass marked with the forward op each node differentiates; and
error messages whose first line is short. Golden strings: a change of the printed form
shows here first."""

import os

import numpy as np
import pytest

import jittape as jt
from jittape import ir
from jittape.trace import Trace, leaf_names


def linear_loss(w, x, y):
    err = x @ w - y
    return np.mean(err * err)


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"]
    return np.mean((out - y) ** 2)


def softmax_xent(w, x, onehot):
    z = x @ w
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * logp, axis=1))


THIS_FILE = os.path.abspath(__file__)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3))


def linear_args():
    return np.zeros(3), X, np.ones(8)


def mlp_args():
    f32 = np.float32
    params = {"w1": np.ones((3, 4), f32), "b1": np.zeros(4, f32), "w2": np.ones((4, 2), f32)}
    return params, X.astype(f32), np.ones((8, 2), f32)


def softmax_args():
    return np.zeros((3, 5)), X, np.eye(5)[np.arange(8) % 5]


def lowered(fn, args):
    """(graph text up to its closing brace, the kernel's source from ``def kernel``), with
    this file's path as ``test_printing.py``."""
    low = jt.grad(fn).lower(*args)
    graph = low.graph[:low.graph.index("\n}\n") + 2]
    source = low.source[low.source.index("def kernel"):]
    return graph.replace(THIS_FILE, "test_printing.py"), source.replace(THIS_FILE, "test_printing.py")


def test_linear_regression_graph_and_source(cache_dir):
    graph, source = lowered(linear_loss, linear_args())
    assert graph == LINEAR_GRAPH
    assert source == LINEAR_SOURCE


def test_mlp_graph_and_source(cache_dir):
    graph, source = lowered(mlp_loss, mlp_args())
    assert graph == MLP_GRAPH
    assert source == MLP_SOURCE


def test_softmax_cross_entropy_graph_and_kernel_entry(cache_dir):
    graph, source = lowered(softmax_xent, softmax_args())
    assert graph == SOFTMAX_GRAPH
    entry = source[:source.index("    # %")]      # the signature, the sizes, the checks
    assert entry == SOFTMAX_ENTRY


def test_leaf_names_follow_parameters_and_paths():
    def f(x, params, *rest):
        pass

    args = (1.0, {"w": 1, "layers": [2, (3, None)]}, 4, 5)
    assert leaf_names(f, args) == ["x", "params_layers_0", "params_layers_1_0", "params_w",
                                   "rest_0", "rest_1"]
    assert leaf_names(f, args, [None, None, None, None]) == ["x", "params", "rest_0", "rest_1"]
    assert leaf_names(max, (1, 2)) == ["arg0", "arg1"]         # no signature


def test_input_names_are_unique_identifiers():
    t = Trace("f")
    with t:
        for name in ("x", "x", "x_2", "lambda", "dense/kernel:0"):
            t.add_input(np.ones(2), len(t.inputs), name=name)
    assert [v.name for v in t.inputs] == ["x", "x_2", "x_2_2", "lambda_", "dense_kernel_0"]


def test_generated_names_never_clash_with_the_codes_own():
    def f(np, t4, range, x):        # named as the code's module, a temporary, a builtin
        return jt.sum(jt.exp(x) * t4 + np * range)

    low = jt.grad(f, argnums=3).lower(np.ones(3), np.ones(3), np.ones(3), np.ones(3))
    assert "t4 = exp_f64(x[i0])" in low.source
    assert "def kernel(np_, t4_, range_, x):" in low.source
    out = low.python(np.ones(3), np.full(3, 2.0), np.ones(3), np.zeros(3))
    np.testing.assert_allclose(out[0], 2.0)


def test_constants_print_by_value_and_arrays_by_digest():
    assert ir.const_text(np.float32(0.5)) == "0.5"
    assert ir.const_text(np.array([[2.0]])) == "2.0"
    assert ir.const_text(np.float64(0.1)) != ir.const_text(np.float64(0.1 + 1e-17 * 2))
    assert ir.const_text(np.arange(3.0)).startswith("#")
    assert ir.const_text(np.arange(3.0)) != ir.const_text(np.arange(1.0, 4.0))


def first_line(err):
    return str(err.value).split("\n")[0]


def test_size_mismatch_first_line_is_short(cache_dir):
    g = jt.grad(mlp_loss)
    params, x, y = mlp_args()
    g(params, x, y)
    kernel = g.kernel(params, x, y)
    bad = {"w1": np.ones((5, 4), np.float32), "b1": np.ones(6, np.float32),
           "w2": np.ones((7, 2), np.float32)}
    # the kernel called directly raises its check's number (its code holds no line of the
    # user's: programs of equal graphs share it) and says where to look
    with pytest.raises(jt.errors.SizeMismatch) as err:
        kernel(bad["b1"], bad["w1"], bad["w2"], x, np.ones((9, 3), np.float32))  # (flattened)
    assert len(first_line(err)) < 200 and "a call of the compiled function" in first_line(err)
    with pytest.raises(ValueError) as err:                  # the compiled function: which one
        g(bad, x, y)
    assert len(first_line(err)) < 200 and "test_printing.py" in first_line(err)


def test_out_of_range_first_line_is_short(cache_dir):
    def f(x):
        return x[3] * 2.0

    h = jt.function(f)
    h(np.ones(5))
    with pytest.raises(IndexError) as err:
        h(np.ones(2))
    assert len(first_line(err)) < 200 and "test_printing.py" in first_line(err)
    with pytest.raises(IndexError) as err:
        h.kernel(np.ones(5))(np.ones(2))
    assert len(first_line(err)) < 200 and "index 3" in first_line(err)


LINEAR_GRAPH = """\
graph linear_loss(w: float64[n], x: float64[k,n], y: float64[k]) {
  # sizes: n = w.shape[0] = x.shape[1], k = x.shape[0] = y.shape[0]
  check x.shape[1] == w.shape[0]
  check x.shape[0] == y.shape[0]
  %8: float64[] = const 1.0
  %3: float64[k] = matmul(x, w)    # test_printing.py:18
  %4: float64[k] = subtract(%3, y)    # test_printing.py:18
  # -- backward --
  %9: float64[] = divide(%8, size(k))    # grad of divide at test_printing.py:19
  %11: float64[k] = broadcast_to(%9, shape=(k,))    # grad of sum at test_printing.py:19
  %12: float64[k] = multiply(%11, %4)    # grad of multiply at test_printing.py:19
  %14: float64[k] = add(%12, %12)    # grad of multiply at test_printing.py:19
  %15: float64[k,1] = reshape(%14, shape=(k, 1))    # grad of matmul at test_printing.py:18
  %16: float64[n,k] = transpose(x, axes=(1, 0))    # grad of matmul at test_printing.py:18
  %17: float64[n,1] = matmul(%16, %15)    # grad of matmul at test_printing.py:18
  %18: float64[n] = reshape(%17, shape=(n,))    # grad of matmul at test_printing.py:18
  return %18
}"""

LINEAR_SOURCE = """\
def kernel(w, x, y):
    w_n, = w.shape
    x_k, x_n = x.shape
    y_k, = y.shape
    if any_equal((w_n, 1, x_k, 1, x_n, 1, y_k, 1,)):
        raise SignatureMismatch(0)   # the arguments' shapes do not match this kernel's signature
    if any_differ((x_n, w_n, x_k, y_k,)):
        raise SizeMismatch(1)   # sizes that must be equal differ in this call; one of these 2:
    # %3: float64[k] = matmul(x, w)  (test_printing.py:18)
    v3 = dot(x, w)
    # fused loop over a scalar:
    #   %9: float64[] = divide(%8, size(k))  (grad of divide at test_printing.py:19)
    t9 = (np.float64(1.0) / np.float64(x_k))
    v9 = t9
    # fused loop over k:
    #   %4: float64[k] = subtract(%3, y)  (test_printing.py:18)
    #   %11: float64[k] = broadcast_to(%9, shape=(k,))  (grad of sum at test_printing.py:19)
    #   %12: float64[k] = multiply(%11, %4)  (grad of multiply at test_printing.py:19)
    #   %14: float64[k] = add(%12, %12)  (grad of multiply at test_printing.py:19)
    v14 = empty((x_k,), np.float64)
    for i0 in range(x_k):
        t4 = (v3[i0] - y[i0])
        t11 = v9
        t12 = (t11 * t4)
        t14 = (t12 + t12)
        v14[i0] = t14
    # %15: float64[k,1] = reshape(%14, shape=(k, 1))  (grad of matmul at test_printing.py:18)
    v15 = reshape(v14, (x_k, 1))
    # %16: float64[n,k] = transpose(x, axes=(1, 0))  (grad of matmul at test_printing.py:18)
    v16 = x.T
    # %17: float64[n,1] = matmul(%16, %15)  (grad of matmul at test_printing.py:18)
    v17 = matmul2d(v16, v15, True)
    # %18: float64[n] = reshape(%17, shape=(n,))  (grad of matmul at test_printing.py:18)
    v18 = reshape(v17, (w_n,))
    return (v18,)
"""

MLP_GRAPH = """\
graph mlp_loss(params_b1: float32[n], params_w1: float32[k,n], params_w2: float32[n,m], x: float32[p,k], y: float32[p,m]) {
  # sizes: n = params_b1.shape[0] = params_w1.shape[1] = params_w2.shape[0], k = params_w1.shape[0] = x.shape[1], m = params_w2.shape[1] = y.shape[1], p = x.shape[0] = y.shape[0]
  check x.shape[1] == params_w1.shape[0]
  check params_w1.shape[1] == params_b1.shape[0]
  check params_b1.shape[0] == params_w2.shape[0]
  check x.shape[0] == y.shape[0]
  check params_w2.shape[1] == y.shape[1]
  %13: float32[] = const 1.0
  %5: float32[p,n] = matmul(x, params_w1)    # test_printing.py:23
  %6: float32[p,n] = add(%5, params_b1)    # test_printing.py:23
  %7: float32[p,n] = tanh(%6)    # test_printing.py:23
  %8: float32[p,m] = matmul(%7, params_w2)    # test_printing.py:24
  %9: float32[p,m] = subtract(%8, y)    # test_printing.py:25
  # -- backward --
  %14: float32[] = divide(%13, size((p * m)))    # grad of divide at test_printing.py:25
  %16: float32[p,m] = broadcast_to(%14, shape=(p, m))    # grad of sum at test_printing.py:25
  %17: float32[p,m] = multiply(%9, 2)    # grad of power at test_printing.py:25
  %18: float32[p,m] = multiply(%16, %17)    # grad of power at test_printing.py:25
  %19: float32[m,n] = transpose(params_w2, axes=(1, 0))    # grad of matmul at test_printing.py:24
  %20: float32[p,n] = matmul(%18, %19)    # grad of matmul at test_printing.py:24
  %21: float32[n,p] = transpose(%7, axes=(1, 0))    # grad of matmul at test_printing.py:24
  %22: float32[n,m] = matmul(%21, %18)    # grad of matmul at test_printing.py:24
  %23: float32[p,n] = multiply(%7, %7)    # grad of tanh at test_printing.py:23
  %24: float32[p,n] = subtract(1, %23)    # grad of tanh at test_printing.py:23
  %25: float32[p,n] = multiply(%20, %24)    # grad of tanh at test_printing.py:23
  %26: float32[n] = sum(%25, axis=(0,), keepdims=False)    # grad of add at test_printing.py:23
  %27: float32[k,p] = transpose(x, axes=(1, 0))    # grad of matmul at test_printing.py:23
  %28: float32[k,n] = matmul(%27, %25)    # grad of matmul at test_printing.py:23
  return %26, %28, %22
}"""

MLP_SOURCE = """\
def kernel(params_b1, params_w1, params_w2, x, y):
    params_b1_n, = params_b1.shape
    params_w1_k, params_w1_n = params_w1.shape
    params_w2_n, params_w2_m = params_w2.shape
    x_p, x_k = x.shape
    y_p, y_m = y.shape
    if any_equal((params_b1_n, 1, params_w1_k, 1, params_w1_n, 1, params_w2_n, 1, params_w2_m, 1, x_p, 1, x_k, 1, y_p, 1, y_m, 1,)):
        raise SignatureMismatch(0)   # the arguments' shapes do not match this kernel's signature
    if any_differ((x_k, params_w1_k, params_w1_n, params_b1_n, params_b1_n, params_w2_n, x_p, y_p, params_w2_m, y_m,)):
        raise SizeMismatch(1)   # sizes that must be equal differ in this call; one of these 5:
    # %5: float32[p,n] = matmul(x, params_w1)  (test_printing.py:23)
    v5 = matmul2d(x, params_w1, True)
    # fused loop over p,n:
    #   %6: float32[p,n] = add(%5, params_b1)  (test_printing.py:23)
    #   %7: float32[p,n] = tanh(%6)  (test_printing.py:23)
    v7 = empty((x_p, params_b1_n,), np.float32)
    for i0 in range(x_p):
        for i1 in range(params_b1_n):
            t6 = (v5[i0, i1] + params_b1[i1])
            t7 = tanh_f32(t6)
            v7[i0, i1] = t7
    # %8: float32[p,m] = matmul(%7, params_w2)  (test_printing.py:24)
    v8 = matmul2d(v7, params_w2, True)
    # fused loop over a scalar:
    #   %14: float32[] = divide(%13, size((p * m)))  (grad of divide at test_printing.py:25)
    t14 = (np.float32(1.0) / np.float32((x_p * params_w2_m)))
    v14 = t14
    # %19: float32[m,n] = transpose(params_w2, axes=(1, 0))  (grad of matmul at test_printing.py:24)
    v19 = params_w2.T
    # fused loop over p,m:
    #   %9: float32[p,m] = subtract(%8, y)  (test_printing.py:25)
    #   %16: float32[p,m] = broadcast_to(%14, shape=(p, m))  (grad of sum at test_printing.py:25)
    #   %17: float32[p,m] = multiply(%9, 2)  (grad of power at test_printing.py:25)
    #   %18: float32[p,m] = multiply(%16, %17)  (grad of power at test_printing.py:25)
    v18 = empty((x_p, params_w2_m,), np.float32)
    for i0 in range(x_p):
        for i1 in range(params_w2_m):
            t9 = (v8[i0, i1] - y[i0, i1])
            t16 = v14
            t17 = (t9 * np.float32(2.0))
            t18 = (t16 * t17)
            v18[i0, i1] = t18
    # %20: float32[p,n] = matmul(%18, %19)  (grad of matmul at test_printing.py:24)
    v20 = matmul2d(v18, v19, True)
    # %21: float32[n,p] = transpose(%7, axes=(1, 0))  (grad of matmul at test_printing.py:24)
    v21 = v7.T
    # %22: float32[n,m] = matmul(%21, %18)  (grad of matmul at test_printing.py:24)
    v22 = matmul2d(v21, v18, True)
    # %27: float32[k,p] = transpose(x, axes=(1, 0))  (grad of matmul at test_printing.py:23)
    v27 = x.T
    # fused loop over p,n:
    #   %23: float32[p,n] = multiply(%7, %7)  (grad of tanh at test_printing.py:23)
    #   %24: float32[p,n] = subtract(1, %23)  (grad of tanh at test_printing.py:23)
    #   %25: float32[p,n] = multiply(%20, %24)  (grad of tanh at test_printing.py:23)
    #   %26: float32[n] = sum(%25, axis=(0,), keepdims=False)  (grad of add at test_printing.py:23)
    v25 = empty((x_p, params_b1_n,), np.float32)
    v26 = full((params_b1_n,), np.float32(0.0), np.float32)
    for i0 in range(x_p):
        for i1 in range(params_b1_n):
            t23 = (v7[i0, i1] * v7[i0, i1])
            t24 = (np.float32(1.0) - t23)
            t25 = (v20[i0, i1] * t24)
            v25[i0, i1] = t25
            v26[i1] = v26[i1] + t25
    # %28: float32[k,n] = matmul(%27, %25)  (grad of matmul at test_printing.py:23)
    v28 = matmul2d(v27, v25, True)
    return (v26, v28, v22)
"""

SOFTMAX_GRAPH = """\
graph softmax_xent(w: float64[n,k], x: float64[m,n], onehot: float64[m,k]) {
  # sizes: n = w.shape[0] = x.shape[1], k = w.shape[1] = onehot.shape[1], m = x.shape[0] = onehot.shape[0]
  check x.shape[1] == w.shape[0]
  check x.shape[0] <= (x.shape[0] * w.shape[1])
  check onehot.shape[0] == x.shape[0]
  check onehot.shape[1] == w.shape[1]
  %15: float64[] = const 1.0
  %3: float64[m,k] = matmul(x, w)    # test_printing.py:29
  %4: float64[m,1] = max(%3, axis=(1,), keepdims=True)    # test_printing.py:30
  %5: float64[m,k] = subtract(%3, %4)    # test_printing.py:30
  %6: float64[m,k] = exp(%5)    # test_printing.py:31
  %7: float64[m,1] = sum(%6, axis=(1,), keepdims=True)    # test_printing.py:31
  # -- backward --
  %16: float64[] = negative(%15)    # grad of negative at test_printing.py:32
  %17: float64[] = divide(%16, size(m))    # grad of divide at test_printing.py:32
  %19: float64[m] = broadcast_to(%17, shape=(m,))    # grad of sum at test_printing.py:32
  %20: float64[m,1] = reshape(%19, shape=(m, 1))    # grad of sum at test_printing.py:32
  %21: float64[m,k] = broadcast_to(%20, shape=(m, k))    # grad of sum at test_printing.py:32
  %22: float64[m,k] = multiply(%21, onehot)    # grad of multiply at test_printing.py:32
  %23: float64[m,k] = negative(%22)    # grad of subtract at test_printing.py:31
  %24: float64[m] = sum(%23, axis=(1,), keepdims=False)    # grad of subtract at test_printing.py:31
  %25: float64[m,1] = reshape(%24, shape=(m, 1))    # grad of subtract at test_printing.py:31
  %26: float64[m,1] = divide(%25, %7)    # grad of log at test_printing.py:31
  %27: float64[m,k] = broadcast_to(%26, shape=(m, k))    # grad of sum at test_printing.py:31
  %28: float64[m,k] = multiply(%27, %6)    # grad of exp at test_printing.py:31
  %29: float64[m,k] = add(%22, %28)    # grad of exp at test_printing.py:31
  %30: float64[m,k] = negative(%29)    # grad of subtract at test_printing.py:30
  %31: float64[m] = sum(%30, axis=(1,), keepdims=False)    # grad of subtract at test_printing.py:30
  %32: float64[m,1] = reshape(%31, shape=(m, 1))    # grad of subtract at test_printing.py:30
  %33: bool[m,k] = equal(%3, %4)    # grad of max at test_printing.py:30
  %34: float64[m,k] = cast(%33, dtype=float64)    # grad of max at test_printing.py:30
  %35: float64[m,1] = sum(%34, axis=(1,), keepdims=True)    # grad of max at test_printing.py:30
  %36: float64[m,1] = divide(%32, %35)    # grad of max at test_printing.py:30
  %37: float64[m,k] = multiply(%36, %34)    # grad of max at test_printing.py:30
  %38: float64[m,k] = add(%29, %37)    # grad of max at test_printing.py:30
  %39: float64[n,m] = transpose(x, axes=(1, 0))    # grad of matmul at test_printing.py:29
  %40: float64[n,k] = matmul(%39, %38)    # grad of matmul at test_printing.py:29
  return %40
}"""

SOFTMAX_ENTRY = """\
def kernel(w, x, onehot):
    w_n, w_k = w.shape
    x_m, x_n = x.shape
    onehot_m, onehot_k = onehot.shape
    if any_equal((w_n, 1, w_k, 1, x_m, 1, x_n, 1, onehot_m, 1, onehot_k, 1,)):
        raise SignatureMismatch(0)   # the arguments' shapes do not match this kernel's signature
    if any_differ((x_n, w_n, onehot_m, x_m, onehot_k, w_k,)):
        raise SizeMismatch(1)   # sizes that must be equal differ in this call; one of these 3:
    if not x_m <= (x_m * w_k):
        raise KernelValueError(2)   # max: zero-size array to reduction operation maximum which has no identity (axis (1,) is empty in this call) (at test_printing.py:30)
"""
