"""Every example of the seed tutorials (../shared/seeds), replayed with jittape.

The printed numbers in the tutorials are TensorFlow's; jittape must print the same
numbers (to float32 rounding), the same shapes and dtypes, the same ``None``s, the
same errors and the same variable names.
"""

import re

import numpy as np
import pytest

import jittape as jt

NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|-?inf")


def numbers(text):
    return np.array([float(x) for x in NUMBER.findall(text)])


def assert_prints(value, expected):
    """``str(value)`` matches TensorFlow's printed text, numbers to float32 rounding.

    ``expected`` is the tutorial's text with 'tf.' where jittape prints 'jt.'.
    """
    if expected is None:
        assert value is None
        return
    assert value is not None, f"expected {expected!r}, got None"
    got = str(value).replace("jt.", "tf.")
    head = lambda s: re.sub(r"\(.*", "", s.strip(), flags=re.S)        # 'tf.Tensor'
    tail = lambda s: re.search(r"shape=.*$", s.strip(), flags=re.S).group(0)
    assert head(got) == head(expected), (got, expected)
    assert tail(got) == tail(expected), (got, expected)
    body = lambda s: s[:s.rindex("shape=")]
    want = numbers(body(expected))
    # float32 rounding: TensorFlow's kernels sum in another order, and a dot product with
    # cancellation differs by a few ulps of its largest terms, not of its result.
    scale = np.max(np.abs(want), initial=0.0)
    np.testing.assert_allclose(numbers(body(got)), want, rtol=3e-7,
                               atol=4 * np.finfo(np.float32).eps * scale,
                               err_msg=f"{got} vs {expected}")


def assert_prints_repr(value, expected):
    """``repr(value)`` is the tutorial's text (its indentation was lost: compare words)."""
    assert repr(value).replace("jt.", "tf.").split() == expected.split()


def f(w1, w2):
    return 3 * w1 ** 2 + 2 * w1 * w2


# -- 003: why autodiff ---------------------------------------------------------------------

def test_003_finite_differences():
    w1, w2 = 5, 3
    eps = 1e-6
    assert (f(w1 + eps, w2) - f(w1, w2)) / eps == 36.000003007075065
    assert (f(w1, w2 + eps) - f(w1, w2)) / eps == 10.000000003174137


def test_003_gradient_tape():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape() as tape:
        z = f(w1, w2)
    gradients = tape.gradient(z, [w1, w2])
    assert isinstance(gradients, list) and len(gradients) == 2
    assert repr(gradients[0]) == "<jt.Tensor: shape=(), dtype=float32, numpy=36.0>"
    assert repr(gradients[1]) == "<jt.Tensor: shape=(), dtype=float32, numpy=10.0>"


# -- 001: the tape is erased after gradient(); persistent tapes; constants ---------------------

def test_001_second_gradient_raises():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape() as tape:
        z = f(w1, w2)
    dz_dw1 = tape.gradient(z, w1)
    assert float(dz_dw1) == 36.0
    with pytest.raises(RuntimeError, match="A non-persistent GradientTape can only be used to "
                                           r"compute one set of gradients \(or jacobians\)"):
        tape.gradient(z, w2)


def test_001_persistent_tape():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape(persistent=True) as tape:
        z = f(w1, w2)
    assert float(tape.gradient(z, w1)) == 36.0
    assert float(tape.gradient(z, w2)) == 10.0
    del tape


def test_001_constants_are_not_watched():
    c1, c2 = jt.constant(5.), jt.constant(3.)
    with jt.GradientTape() as tape:
        z = f(c1, c2)
    assert tape.gradient(z, [c1, c2]) == [None, None]


def test_001_stop_recording():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape() as tape:
        z = f(w1, w2)
        with tape.stop_recording():
            unrecorded = w1 * 100.0
        extra = z + unrecorded
    assert float(extra) == 605.0
    grads = tape.gradient(extra, [w1, w2])
    assert [float(g) for g in grads] == [36.0, 10.0]


# -- 000 / 002: watch, vector targets, jacobians, Hessians, stop_gradient, NaN softplus --------

def test_000_watch_constants():
    c1, c2 = jt.constant(5.), jt.constant(3.)
    with jt.GradientTape() as tape:
        tape.watch(c1)
        tape.watch(c2)
        z = f(c1, c2)
    gradients = tape.gradient(z, [c1, c2])
    assert [float(g) for g in gradients] == [36.0, 10.0]


def test_000_gradient_of_a_vector_is_gradient_of_its_sum():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape(persistent=True) as tape:
        losses = jt.stack([f(w1, w2), w1 * w2, w1 ** 2])
        total = jt.reduce_sum(losses)
    g_vec = tape.gradient(losses, [w1, w2])
    g_sum = tape.gradient(total, [w1, w2])
    assert [float(g) for g in g_vec] == [float(g) for g in g_sum] == [36 + 3 + 10, 10 + 5]


def test_000_jacobian_gives_individual_gradients():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape() as tape:
        losses = jt.stack([f(w1, w2), w1 * w2, w1 ** 2])
    j1, j2 = tape.jacobian(losses, [w1, w2])
    assert j1.shape == (3,) and j1.dtype == jt.float32
    np.testing.assert_array_equal(j1.numpy(), [36.0, 3.0, 10.0])
    np.testing.assert_array_equal(j2.numpy(), [10.0, 5.0, 0.0])


def test_000_hessians_with_nested_tapes():
    # The notebook's example: the Hessians of f at (5, 3) are [[6, 2], [2, 0]].
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape(persistent=True) as hessian_tape:
        with jt.GradientTape() as jacobian_tape:
            z = f(w1, w2)
        jacobians = jacobian_tape.gradient(z, [w1, w2])
    hessians = [hessian_tape.gradient(jacobian, [w1, w2]) for jacobian in jacobians]
    del hessian_tape
    assert [float(h) if h is not None else None for row in hessians for h in row] == \
        [6.0, 2.0, 2.0, None]          # d2z/dw2dw2 is None in TensorFlow too (unconnected)


def test_000_stop_gradient():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)

    def g(w1, w2):
        return 3 * w1 ** 2 + jt.stop_gradient(2 * w1 * w2)

    with jt.GradientTape() as tape:
        z = g(w1, w2)
    assert float(z) == float(f(w1, w2))       # same result as without stop_gradient()
    gradients = tape.gradient(z, [w1, w2])
    assert float(gradients[0]) == 30.0 and gradients[1] is None


def my_softplus(z):
    return jt.log(jt.exp(z) + 1.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_000_naive_softplus_gradient_is_nan():
    x = jt.Variable([100.])
    with jt.GradientTape() as tape:
        z = my_softplus(x)
    (g,) = tape.gradient(z, [x])
    assert repr(g) == "<jt.Tensor: shape=(1,), dtype=float32, numpy=array([nan], dtype=float32)>"


@jt.custom_gradient
def my_better_softplus(z):
    exp = jt.exp(z)

    def my_softplus_gradients(grad):
        return grad / (1 + 1 / exp)

    return jt.log(exp + 1), my_softplus_gradients


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_000_custom_gradient_softplus():
    x = jt.Variable([100.])
    with jt.GradientTape() as tape:
        z = my_better_softplus(x)
    (g,) = tape.gradient(z, [x])
    assert g.numpy().tolist() == [1.0]
    # and the stable primitive needs no custom gradient
    with jt.GradientTape() as tape:
        z = jt.softplus(x)
    assert float(z) == 100.0 and tape.gradient(z, x).numpy().tolist() == [1.0]


# -- 004: the longer tutorial ----------------------------------------------------------------

def test_004_non_persistent_tape():
    tensor_x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        tensor_y1 = tensor_x ** 2
        tensor_y2 = tensor_x ** 3
    assert_prints(tape.gradient(tensor_y1, tensor_x), "tf.Tensor(4.0, shape=(), dtype=float32)")
    with pytest.raises(RuntimeError) as err:
        tape.gradient(tensor_y2, tensor_x)
    assert str(err.value) == ("A non-persistent GradientTape can only be used to compute one set "
                              "of gradients (or jacobians)")


def test_004_persistent_tape():
    tensor_x = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        tensor_y1 = tensor_x ** 2
        tensor_y2 = tensor_x ** 3
        tensor_y3 = 4 * tensor_x + 1
    assert_prints(tape.gradient(tensor_y1, tensor_x), "tf.Tensor(4.0, shape=(), dtype=float32)")
    assert_prints(tape.gradient(tensor_y2, tensor_x), "tf.Tensor(12.0, shape=(), dtype=float32)")
    assert_prints(tape.gradient(tensor_y3, tensor_x), "tf.Tensor(4.0, shape=(), dtype=float32)")
    assert str(tape.gradient(tensor_y1, tensor_x)) == "jt.Tensor(4.0, shape=(), dtype=float32)"
    del tape


def make_w_b(dtype=jt.float32):
    jt.random.set_seed(1)
    tensor_w = jt.Variable(jt.random.uniform((4, 3), minval=-20, maxval=20, dtype=dtype), name='w')
    tensor_b = jt.Variable(jt.ones(3, dtype=dtype), name='b')
    return tensor_w, tensor_b


def test_004_random_weights_print_like_tensorflow():
    tensor_w, _ = make_w_b()
    expected = """<tf.Variable 'w:0' shape=(4, 3) dtype=float32, numpy=
array([[-13.394766 ,  16.05925  ,   5.238968 ],
       [ -2.6181564,  -8.322439 ,   5.700083 ],
       [ 19.031418 ,  -2.5960197,   6.4040756],
       [  4.195833 ,   5.4652596,   4.5779514]], dtype=float32)>"""
    assert repr(tensor_w).replace("jt.", "tf.") == expected


def make_x(case):
    if case == 1:
        return jt.Variable([[1, 2, 3, 4]], dtype=jt.float32, name='x')
    if case == 2:
        return jt.Variable([[1, 2, 3, 4]], dtype=jt.int32, name='x')
    if case == 3:
        return jt.Variable([[1, 2, 3, 4]], dtype=jt.float32, trainable=False)
    if case == 4:
        return jt.constant([[1, 2, 3, 4]], dtype=jt.float32)
    return jt.Variable([[1, 2, 3, 4]], dtype=jt.float32, name='x') + 1.0


def run_case(case, watch):
    # Case 2 draws integer weights, as the tutorial's rerun did.
    tensor_w, tensor_b = make_w_b(jt.int32 if case == 2 else jt.float32)
    tensor_x = make_x(case)
    with jt.GradientTape(persistent=True) as tape:
        if watch:
            if case == 2:
                with pytest.warns(UserWarning, match="must be floating"):
                    tape.watch(tensor_x)
            else:
                tape.watch(tensor_x)
        tensor_y = tensor_x @ tensor_w + tensor_b
        tensor_loss = jt.reduce_mean(tensor_y ** 2)
    return dict(
        tape=tape, x=tensor_x, w=tensor_w, b=tensor_b, y=tensor_y, loss=tensor_loss,
        dy_dx=tape.gradient(tensor_y, tensor_x), dloss_dy=tape.gradient(tensor_loss, tensor_y),
        dloss_dx=tape.gradient(tensor_loss, tensor_x))


Y = "tf.Tensor([[56.246506 14.48735  55.163166]], shape=(1, 3), dtype=float32)"
LOSS = "tf.Tensor(2138.8425, shape=(), dtype=float32)"
DY_DX = "tf.Tensor([[ 7.903452 -5.240513 22.839474 14.239044]], shape=(1, 4), dtype=float32)"
DLOSS_DY = "tf.Tensor([[37.497673  9.658234 36.775444]], shape=(1, 3), dtype=float32)"
DLOSS_DX = "tf.Tensor([[-154.50319    31.068237  924.07367   378.47495 ]], shape=(1, 4), dtype=float32)"
Y5 = "tf.Tensor([[63.46084  25.093401 77.08424 ]], shape=(1, 3), dtype=float32)"
LOSS5 = "tf.Tensor(3532.9792, shape=(), dtype=float32)"
DLOSS_DY5 = "tf.Tensor([[42.307224 16.728935 51.389496]], shape=(1, 3), dtype=float32)"
DLOSS_DX5 = "tf.Tensor([[ -28.813324   42.9319   1090.8401    504.20065 ]], shape=(1, 4), dtype=float32)"
Y2 = "tf.Tensor([[ -5 103 -64]], shape=(1, 3), dtype=int32)"
LOSS2 = "tf.Tensor(4910, shape=(), dtype=int32)"

# case -> (y, loss, dy_dx, dloss_dy, dloss_dx) without watch, then with watch
UNWATCHED = {
    1: (Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX),
    2: (Y2, LOSS2, None, None, None),
    3: (Y, LOSS, None, DLOSS_DY, None),
    4: (Y, LOSS, None, DLOSS_DY, None),
    5: (Y5, LOSS5, None, DLOSS_DY5, None),
}
WATCHED = {
    1: (Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX),
    2: (Y2, LOSS2, None, None, None),
    3: (Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX),
    4: (Y, LOSS, DY_DX, DLOSS_DY, DLOSS_DX),
    5: (Y5, LOSS5, DY_DX, DLOSS_DY5, DLOSS_DX5),
}


@pytest.mark.parametrize("watch", [False, True])
@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_004_five_cases_of_tensor_x(case, watch):
    r = run_case(case, watch)
    expected = (WATCHED if watch else UNWATCHED)[case]
    for key, text in zip(("y", "loss", "dy_dx", "dloss_dy", "dloss_dx"), expected):
        assert_prints(r[key], text)


@pytest.mark.parametrize("case,names", [
    (1, ['w:0', 'b:0', 'x:0']), (2, ['w:0', 'b:0', 'x:0']), (3, ['w:0', 'b:0', 'Variable:0']),
    (4, ['w:0', 'b:0']), (5, ['w:0', 'b:0']),
])
def test_004_watched_variables(case, names):
    r = run_case(case, watch=True)
    assert [v.name for v in r["tape"].watched_variables()] == names


def test_004_sources_as_list_and_dict_targets_as_dict():
    r = run_case(1, watch=False)
    tape = r["tape"]
    dw = """tf.Tensor(
[[ 37.497673   9.658234  36.775444]
 [ 74.995346  19.316467  73.55089 ]
 [112.49302   28.9747   110.32633 ]
 [149.99069   38.632935 147.10178 ]], shape=(4, 3), dtype=float32)"""
    db = "tf.Tensor([37.497673  9.658234 36.775444], shape=(3,), dtype=float32)"
    tensor_dloss_dw, tensor_dloss_db = tape.gradient(r["loss"], [r["w"], r["b"]])
    assert_prints(tensor_dloss_dw, dw)
    assert_prints(tensor_dloss_db, db)
    assert str(tensor_dloss_dw).startswith("jt.Tensor(\n[[")

    dic_vars = {'tensor_w': r["w"], 'tensor_b': r["b"]}
    tensor_dloss_dwdb_dic = tape.gradient(r["loss"], dic_vars)
    assert set(tensor_dloss_dwdb_dic) == {'tensor_w', 'tensor_b'}
    assert_prints(tensor_dloss_dwdb_dic['tensor_w'], dw)
    assert_prints(tensor_dloss_dwdb_dic['tensor_b'], db)

    tensor_dydloss_dx = tape.gradient({'tensor_y': r["y"], 'tensor_loss': r["loss"]}, r["x"])
    assert_prints(tensor_dydloss_dx,
                  "tf.Tensor([[-146.5997    25.82772  946.9131   392.71396]], shape=(1, 4), "
                  "dtype=float32)")
    assert [v.name for v in tape.watched_variables()] == ['w:0', 'b:0', 'x:0']

    # a gradient has the shape of its source
    shapes = [r["x"].shape, r["dy_dx"].shape, r["y"].shape, r["dloss_dy"].shape,
              r["w"].shape, tensor_dloss_dw.shape, r["b"].shape, tensor_dloss_db.shape]
    assert [str(s) for s in shapes] == ["(1, 4)", "(1, 4)", "(1, 3)", "(1, 3)", "(4, 3)", "(4, 3)",
                                        "(3,)", "(3,)"]


def test_004_dense_layers_trainable_variables():
    # The tutorial's kernels were drawn by the 4th and 5th random ops after set_seed(1):
    # its tensor_w came first, and two other random ops ran in between.
    jt.random.set_seed(1)
    jt.random.uniform((4, 3), minval=-20, maxval=20)
    jt.random.uniform((4, 3), minval=-20, maxval=20, dtype=jt.int32)
    jt.random.normal((2,))
    layer1 = jt.nn.Dense(2, activation='relu', name="dense_1")
    layer2 = jt.nn.Dense(4, activation='relu', name="dense_2")
    tensor_x = jt.constant([[1., 2., 3.]])
    with jt.GradientTape(persistent=True) as tape:
        tensor_h = layer1(tensor_x)
        tensor_y = layer2(tensor_h)
        tensor_loss = jt.reduce_mean(tensor_y ** 2)
    assert [v.name for v in layer1.trainable_variables] == ['dense_1/kernel:0', 'dense_1/bias:0']
    assert [v.name for v in layer2.trainable_variables] == ['dense_2/kernel:0', 'dense_2/bias:0']
    assert_prints_repr(layer1.trainable_variables, """[<tf.Variable 'dense_1/kernel:0' shape=(3, 2) dtype=float32, numpy=
array([[-0.57740456, -0.572319  ],
[ 0.00795567,  0.5992962 ],
[ 0.24269533,  0.8154019 ]], dtype=float32)>, <tf.Variable 'dense_1/bias:0' shape=(2,) dtype=float32, numpy=array([0., 0.], dtype=float32)>]""")
    assert_prints_repr(layer2.trainable_variables, """[<tf.Variable 'dense_2/kernel:0' shape=(2, 4) dtype=float32, numpy=
array([[ 0.46956396, -0.71557474, -0.8732331 , -0.62160015],
[ 0.59634185,  0.40849257, -0.18213058,  0.02854967]],
dtype=float32)>, <tf.Variable 'dense_2/bias:0' shape=(4,) dtype=float32, numpy=array([0., 0., 0., 0.], dtype=float32)>]""")
    k1, b1 = layer1.trainable_variables
    assert k1.shape == (3, 2) and k1.dtype == jt.float32 and b1.numpy().tolist() == [0.0, 0.0]
    limit1 = np.sqrt(6 / (3 + 2))
    assert np.all(np.abs(k1.numpy()) <= limit1)
    assert repr(b1) == "<jt.Variable 'dense_1/bias:0' shape=(2,) dtype=float32, numpy=array([0., 0.], dtype=float32)>"
    grads1 = tape.gradient(tensor_loss, layer1.trainable_variables)
    grads2 = tape.gradient(tensor_loss, layer2.trainable_variables)
    lines = ["Dense 1:"] + [f"[+] variable name, shape: {v.name}, {g.shape}"
                            for v, g in zip(layer1.trainable_variables, grads1)]
    lines += ["Dense 2:"] + [f"[+] variable name, shape: {v.name}, {g.shape}"
                             for v, g in zip(layer2.trainable_variables, grads2)]
    assert "\n".join(lines) == """Dense 1:
[+] variable name, shape: dense_1/kernel:0, (3, 2)
[+] variable name, shape: dense_1/bias:0, (2,)
Dense 2:
[+] variable name, shape: dense_2/kernel:0, (2, 4)
[+] variable name, shape: dense_2/bias:0, (4,)"""
    assert set(tape.watched_variables()) if False else \
        [v.name for v in tape.watched_variables()] == ['dense_1/kernel:0', 'dense_1/bias:0',
                                                       'dense_2/kernel:0', 'dense_2/bias:0']


def control_flow():
    tensor_x1 = jt.Variable(3.0)
    tensor_x2 = jt.Variable(3.0)
    tensor_flag = jt.constant(2.0)      # a tensor to use in the if condition; must be float
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(tensor_x1)
        tape.watch(tensor_x2)
        tape.watch(tensor_flag)
        if tensor_flag % 2 == 0:
            tensor_res_1 = 4 * (tensor_x1 ** 2) + 3
        else:
            tensor_res_1 = tensor_x2 ** 3
    with jt.GradientTape(persistent=True) as tape2:
        tape2.watch(tensor_x1)
        tape2.watch(tensor_x2)
        if jt.equal(tensor_res_1, 4 * (tensor_x1 ** 2) + 3).numpy().all():
            tensor_res_2 = tensor_x2 ** 3
        else:
            tensor_res_2 = 4 * (tensor_x1 ** 2) + 3
    return tensor_x1, tensor_x2, tensor_res_1, tensor_res_2, tape, tape2


def test_004_control_flow():
    tensor_x1, tensor_x2, tensor_res_1, tensor_res_2, tape, tape2 = control_flow()
    tensor_dres1_dx1, tensor_dres1_dx2 = tape.gradient(tensor_res_1, [tensor_x1, tensor_x2])
    assert_prints(tensor_dres1_dx1, "tf.Tensor(24.0, shape=(), dtype=float32)")
    assert tensor_dres1_dx2 is None

    tensor_dres2_dx1, tensor_dres2_dx2 = tape2.gradient(tensor_res_2, [tensor_x1, tensor_x2])
    assert tensor_dres2_dx1 is None
    assert_prints(tensor_dres2_dx2, "tf.Tensor(27.0, shape=(), dtype=float32)")

    # tensor_res_2 was not computed in `tape`'s context: both None
    tmp1, tmp2 = tape.gradient(tensor_res_2, [tensor_x1, tensor_x2])
    assert tmp1 is None and tmp2 is None


def test_004_plot_a_function_and_its_gradient():
    tensor_x1 = jt.linspace(-15.0, 15.0, 150 + 1)
    tensor_x2 = jt.linspace(-15.0, 15.0, 150 + 1)
    assert tensor_x1.dtype == jt.float32 and tensor_x1.shape == (151,)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(tensor_x1)
        tape.watch(tensor_x2)
        tensor_res_1 = 4 * (tensor_x1 ** 2) + 3
        tensor_res_2 = tensor_x2 ** 3
    tensor_dres1_dx1 = tape.gradient(tensor_res_1, tensor_x1)
    tensor_dres2_dx2 = tape.gradient(tensor_res_2, tensor_x2)
    x = tensor_x1.numpy()
    np.testing.assert_allclose(tensor_dres1_dx1.numpy(), 8 * x, rtol=1e-6)
    np.testing.assert_allclose(tensor_dres2_dx2.numpy(), 3 * x ** 2, rtol=1e-6)
    # tensors plot directly (they convert with __array__)
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot(tensor_x1, tensor_res_1, label='res1')
    ax.plot(tensor_x1, tensor_dres1_dx1, label='dres1')
    np.testing.assert_allclose(ax.lines[1].get_ydata(), 8 * x, rtol=1e-6)
    plt.close(fig)


def test_004_unconnected_gradients_zero():
    tensor_x1, tensor_x2, tensor_res_1, _, tape, _ = control_flow()
    g1, g2 = tape.gradient(tensor_res_1, [tensor_x1, tensor_x2],
                           unconnected_gradients=jt.UnconnectedGradients.ZERO)
    assert float(g1) == 24.0
    assert_prints(g2, "tf.Tensor(0.0, shape=(), dtype=float32)")
