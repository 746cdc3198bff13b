"""jt.optim: each optimizer against its formula written out here in NumPy, eager and
compiled updates agree, pytrees and dtypes keep, schedules, saved states, L-BFGS on
Rosenbrock with its line search's Wolfe conditions, apply_gradients on Variables."""

import dataclasses
import math

import numpy as np
import pytest

import jittape as jt
import jittape.optim as optim
from jittape.optim import schedules

jnp = jt.numpy
pytestmark = pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")


@dataclasses.dataclass
class Params:
    w: object
    extra: object


# a separable quadratic: grad = K * p + Q, leaf by leaf
K = {"w": np.array([1.0, 2.0, 0.5]), "b": np.array([[3.0, 0.1], [1.0, 4.0]]),
     "h": np.array([1.0, 2.0, 3.0, 0.5], np.float32)}
Q = {"w": np.array([-1.0, 0.5, 2.0]), "b": np.array([[0.3, -2.0], [1.5, 0.0]]),
     "h": np.array([0.5, -1.0, 0.25, 2.0], np.float32)}


def _start():
    return Params(w=np.array([0.5, -1.0, 2.0]),
                  extra={"b": np.array([[1.0, -0.5], [0.25, 2.0]]),
                         "h": np.array([1.0, -2.0, 0.5, 3.0], np.float32)})


def _grads(p):
    """The gradient with jittape ops (traced in the compiled test) or NumPy."""
    return Params(w=K["w"] * p.w + Q["w"],
                  extra={"b": K["b"] * p.extra["b"] + Q["b"],
                         "h": K["h"] * p.extra["h"] + Q["h"]})


def _leaves(p):
    return [p.w, p.extra["b"], p.extra["h"]]


# ---------------------------------------------------------------------------------
# the formulas, written out in NumPy, one leaf at a time

def _ref_sgd(p, g, s, t, lr, momentum=0.0, nesterov=False, wd=0.0):
    g = g + wd * p
    if not momentum:
        return p - lr * g, s
    v = momentum * s.get("v", 0.0) + g
    d = g + momentum * v if nesterov else v
    return p - lr * d, {"v": v}


def _ref_adam(p, g, s, t, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return p - lr * (m_hat / (np.sqrt(v_hat) + eps) + wd * p), {"m": m, "v": v}


def _ref_rmsprop(p, g, s, t, lr, rho=0.9, eps=1e-8, momentum=0.0, centered=False):
    v = rho * s.get("v", 0.0) + (1 - rho) * g * g
    out = {"v": v}
    if centered:
        ga = rho * s.get("ga", 0.0) + (1 - rho) * g
        out["ga"] = ga
        d = g / (np.sqrt(v - ga * ga) + eps)
    else:
        d = g / (np.sqrt(v) + eps)
    if momentum:
        d = momentum * s.get("b", 0.0) + d
        out["b"] = d
    return p - lr * d, out


def _ref_adagrad(p, g, s, t, lr, init=0.1, eps=1e-7):
    a = s.get("a", init) + g * g
    return p - lr * g / (np.sqrt(a) + eps), {"a": a}


CASES = {   # name: (optimizer, reference with its hyperparameters)
    "sgd": (optim.SGD(0.1), lambda *a: _ref_sgd(*a, lr=0.1)),
    "momentum_decay": (optim.SGD(0.1, momentum=0.9, weight_decay=0.01),
                       lambda *a: _ref_sgd(*a, lr=0.1, momentum=0.9, wd=0.01)),
    "nesterov": (optim.SGD(0.05, momentum=0.8, nesterov=True),
                 lambda *a: _ref_sgd(*a, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (optim.Adam(0.05), lambda *a: _ref_adam(*a, lr=0.05)),
    "adam_b1_zero": (optim.Adam(0.05, b1=0.0), lambda *a: _ref_adam(*a, lr=0.05, b1=0.0)),
    "adamw": (optim.AdamW(0.05, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1),
              lambda *a: _ref_adam(*a, lr=0.05, b1=0.8, b2=0.99, eps=1e-6, wd=0.1)),
    "rmsprop": (optim.RMSprop(0.01), lambda *a: _ref_rmsprop(*a, lr=0.01)),
    "rmsprop_centered": (optim.RMSprop(0.01, decay=0.8, momentum=0.5, centered=True),
                         lambda *a: _ref_rmsprop(*a, lr=0.01, rho=0.8, momentum=0.5,
                                                 centered=True)),
    "adagrad": (optim.Adagrad(0.1), lambda *a: _ref_adagrad(*a, lr=0.1)),
    "adagrad_scheduled": (
        optim.Adagrad(schedules.exponential_decay(0.1, 0.5, 2.0)),
        lambda p, g, s, t: _ref_adagrad(p, g, s, t, lr=0.1 * 0.5 ** ((t - 1) / 2.0))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_first_three_steps_follow_the_formula(name):
    opt, ref = CASES[name]
    x = np.array([0.5, -1.0, 2.0])
    k, q = K["w"], Q["w"]
    state = opt.init(x)
    p, r_state = x, {}
    r = x
    for t in (1, 2, 3):
        p, state = opt.update(p, k * p + q, state)
        r, r_state = ref(r, k * r + q, r_state, float(t))
        assert isinstance(p, np.ndarray) and p.dtype == np.float64
        np.testing.assert_allclose(p, r, rtol=1e-13, atol=1e-15)
    assert int(state.step) == 3
    assert not np.allclose(p, x)


def test_adams_bias_corrections_are_within_a_few_ulp_of_exact():
    # 1 - b**t as -expm1(t * log(b)), eagerly and compiled; 1 - b**t in floats loses
    # the low bits of b**t near 1 (at b = 0.9999, t = 2: 1854 ulp)
    from decimal import Decimal, getcontext
    from jittape.optim.first_order import _bias_corrections
    getcontext().prec = 60
    t = np.array([1.0, 2.0, 3.0, 10.0, 57.0, 199.0, 1000.0, 5000.0, 1e5])
    for b1, b2 in ((0.9, 0.999), (0.5, 0.9999), (1e-3, 0.99)):
        compiled = jt.function(lambda t: _bias_corrections(b1, b2, t, np.float64))(t)
        eager = [c.numpy() for c in _bias_corrections(b1, b2, t, np.float64)]
        for b, *got in ((b1, compiled[0], eager[0]), (b2, compiled[1], eager[1])):
            exact = [1 - Decimal(b) ** int(k) for k in t]
            for values in got:
                for v, e in zip(values, exact):
                    assert abs(Decimal(float(v)) - e) <= 2 * Decimal(np.spacing(float(e))), (b, v)
    exact = 1 - Decimal(0.9999) ** 2
    assert abs(Decimal(1.0 - 0.9999 ** 2.0) - exact) > 1000 * Decimal(np.spacing(float(exact)))


def _eager_three_steps(opt, params):
    state = opt.init(params)
    for _ in range(3):
        params, state = opt.update(params, _grads(params), state)
    return params, state


@pytest.fixture(scope="module")
def compiled_three_steps():
    """One compiled function running every case's 3 steps (a fori_loop each)."""
    @jt.function
    def run(params, states):
        out = {}
        for name in sorted(CASES):
            opt = CASES[name][0]
            out[name] = jt.fori_loop(
                0, 3, lambda i, c, opt=opt: opt.update(c[0], _grads(c[0]), c[1]),
                (params, states[name]))
        return out
    return run


def test_eager_and_compiled_agree_on_pytrees_and_keep_float32(compiled_three_steps):
    params = _start()
    states = {name: CASES[name][0].init(params) for name in CASES}
    compiled = compiled_three_steps(params, states)
    for name in sorted(CASES):
        eager_p, eager_s = _eager_three_steps(CASES[name][0], params)
        comp_p, comp_s = compiled[name]
        assert isinstance(comp_p, Params) and sorted(comp_p.extra) == ["b", "h"]
        for e, c, start in zip(_leaves(eager_p), _leaves(comp_p), _leaves(params)):
            assert e.dtype == c.dtype == start.dtype, name
            assert isinstance(e, np.ndarray)
            if start.dtype == np.float64:
                np.testing.assert_allclose(c, e, rtol=1e-12, atol=1e-14, err_msg=name)
            else:       # float32: computed in float32 both ways (a kernel may fuse)
                np.testing.assert_allclose(c, e, rtol=2e-6, atol=1e-6, err_msg=name)
        assert int(comp_s.step) == int(eager_s.step) == 3
        for slot in eager_s.slots:
            for e, c in zip(_leaves(eager_s.slots[slot]), _leaves(comp_s.slots[slot])):
                assert e.dtype == c.dtype
                np.testing.assert_allclose(c, e, rtol=1e-5 if e.dtype == np.float32 else 1e-12,
                                           atol=1e-12)
    # the float64 leaves against the formula too
    r, s = params.w, {}
    for t in (1, 2, 3):
        r, s = _ref_adam(r, K["w"] * r + Q["w"], s, float(t), lr=0.05)
    np.testing.assert_allclose(compiled["adam"][0].w, r, rtol=1e-12)


def test_a_learning_rate_passed_to_a_compiled_function_compiles_once():
    @jt.function
    def step(x, g, lr):
        opt = optim.SGD(lr, momentum=0.5)
        return opt.update(x, g, opt.init(x))[0]
    x, g = np.array([1.0, 2.0], np.float32), np.array([0.5, -1.0], np.float32)
    for lr in (0.1, 0.25):
        out = step(x, g, lr)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, x - lr * g, rtol=1e-6)
    assert step.cache_info().traces == 1


def test_a_none_gradient_leaves_its_parameter_and_slots():
    opt = optim.Adam(0.1)
    params = {"a": np.ones(2), "b": np.ones(3)}
    state = opt.init(params)
    new, state = opt.update(params, {"a": np.full(2, 0.5), "b": None}, state)
    np.testing.assert_array_equal(new["b"], np.ones(3))
    np.testing.assert_array_equal(state.slots["m"]["b"], np.zeros(3))
    np.testing.assert_allclose(new["a"], 1 - 0.1 * 1 / (1 + 1e-8 / 0.5), rtol=1e-12)


def test_tensors_stay_tensors_and_tapes_see_through_an_update():
    opt = optim.SGD(0.5)
    w = jt.constant(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        tape.watch(w)
        new, _ = opt.update(w, w * w, opt.init(w))          # w - 0.5 w^2
        y = jnp.sum(new)
    assert isinstance(new, jt.Tensor)
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), 1 - np.array([1.0, 2.0]))


# ---------------------------------------------------------------------------------
# the loop in one kernel (docs/optim.md)

def _rosenbrock(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _np_rosenbrock(x):
    x = np.asarray(x, np.float64)
    value = np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    return value, g


ADAM = optim.Adam(1e-2)


@jt.function
def adam_run(params, state):
    def step(i, c):
        p, s = c
        with jt.GradientTape() as tape:
            tape.watch(p)
            y = _rosenbrock(p)
        g = tape.gradient(y, p)
        return ADAM.update(p, g, s)
    return jt.fori_loop(0, 100, step, (params, state))


def test_a_tape_and_an_update_in_a_fori_loop_compile_to_one_kernel():
    x0 = np.zeros(10)
    p, s = adam_run(x0, ADAM.init(x0))
    e, es = x0, ADAM.init(x0)
    for _ in range(100):
        e, es = ADAM.update(e, _np_rosenbrock(e)[1], es)
    np.testing.assert_allclose(p, e, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(s.slots["v"], es.slots["v"], rtol=1e-12)
    assert int(s.step) == 100
    p, s = adam_run(p, s)                      # the state goes around again
    assert int(s.step) == 200 and _np_rosenbrock(p)[0] < _np_rosenbrock(e)[0]
    info = adam_run.cache_info()
    assert info.traces == 1 and info.compiles == 1


# ---------------------------------------------------------------------------------
# schedules

def test_schedules_values():
    steps = [0, 1, 5, 9, 10, 11, 37, 100, 150]
    checks = [
        (schedules.constant(0.3), lambda s: 0.3),
        (schedules.exponential_decay(0.1, 0.5, 10.0), lambda s: 0.1 * 0.5 ** (s / 10)),
        (schedules.exponential_decay(0.1, 0.5, 10, staircase=True),
         lambda s: 0.1 * 0.5 ** math.floor(s / 10)),
        (schedules.cosine_decay(0.2, 100, alpha=0.1),
         lambda s: 0.2 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(s, 100) / 100)) + 0.1)),
        (schedules.warmup_cosine(0.0, 1.0, 10, 110, end=0.05),
         lambda s: s / 10 if s < 10 else
         0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min((s - 10) / 100, 1.0)))),
        (schedules.piecewise_constant([5, 37], [1.0, 0.5, 0.1]),
         lambda s: 1.0 if s <= 5 else 0.5 if s <= 37 else 0.1),
    ]
    for schedule, formula in checks:
        for s in steps:
            got = schedule(s)
            assert got.dtype == np.float64
            np.testing.assert_allclose(float(got), formula(s), rtol=1e-14, err_msg=repr(schedule))
        np.testing.assert_allclose(float(schedule(np.int64(37))), formula(37), rtol=1e-14)
    assert "warmup_steps=10.0" in repr(checks[4][0])


def test_schedule_arguments_are_checked():
    with pytest.raises(ValueError, match="2 boundaries need 3 values, got 2.*test_optim.py"):
        schedules.piecewise_constant([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="warmup_steps < decay_steps"):
        schedules.warmup_cosine(0.0, 1.0, 10, 5)
    with pytest.raises(ValueError, match="decay_steps must be > 0"):
        schedules.cosine_decay(1.0, 0)


# ---------------------------------------------------------------------------------
# saved states

def test_state_save_and_load_round_trip(tmp_path):
    opt = optim.Adam(0.1)
    params = {"w": np.array([1.0, -2.0]), "layers": [np.ones((2, 2), np.float32)]}
    grads = {"w": np.array([0.5, 0.25]), "layers": [np.full((2, 2), 0.1, np.float32)]}
    state = opt.init(params)
    p = params
    for _ in range(2):
        p, state = opt.update(p, grads, state)
    path = tmp_path / "adam.npz"
    optim.save_state(state, path)
    loaded = optim.load_state(path)
    assert isinstance(loaded, optim.State) and int(loaded.step) == 2
    assert loaded.slots["v"]["layers"][0].dtype == np.float32
    a, _ = opt.update(p, grads, state)
    b, _ = opt.update(p, grads, loaded)
    for x, y in zip(jt.tree.leaves(a), jt.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    # dataclass params: the file names the class; a template rebuilds it
    dstate = opt.init(_start())
    optim.save_state(dstate, tmp_path / "d.npz")
    with pytest.raises(ValueError, match="like=opt.init"):
        optim.load_state(tmp_path / "d.npz")
    again = optim.load_state(tmp_path / "d.npz", like=dstate)
    assert isinstance(again.slots["m"], Params)
    with pytest.raises(ValueError, match="structure differs"):
        optim.load_state(tmp_path / "d.npz", like=state)
    # L-BFGS's state: flat arrays and scalars; the next update is the same
    lbfgs = optim.LBFGS(memory=3)
    x, ls = np.zeros(4), lbfgs.init(np.zeros(4))
    for _ in range(4):
        x, ls = lbfgs.update(x, None, ls, value_and_grad=_np_rosenbrock)
    optim.save_state(ls, tmp_path / "lbfgs.npz")
    back = optim.load_state(tmp_path / "lbfgs.npz")
    assert isinstance(back.slots["count"], np.int64) and back.slots["s"].shape == (3, 4)
    a = lbfgs.update(x, None, ls, value_and_grad=_np_rosenbrock)
    b = lbfgs.update(x, None, back, value_and_grad=_np_rosenbrock)
    np.testing.assert_array_equal(a[0], b[0])
    assert int(b[1].slots["evaluations"]) == int(a[1].slots["evaluations"])
    (tmp_path / "junk.npz").write_bytes(b"not a state")
    with pytest.raises(ValueError, match="not a state written by jt.optim.save_state"):
        optim.load_state(tmp_path / "junk.npz")


# ---------------------------------------------------------------------------------
# L-BFGS

def _tape_value_and_grad(x):
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = _rosenbrock(x)
    return y, tape.gradient(y, x)


LBFGS = optim.LBFGS()


@pytest.fixture(scope="module")
def lbfgs_solve():
    """``rounds`` rounds of 5 L-BFGS steps (a fori_loop in a while_loop), stopping
    where the gradient's norm is below 1e-10: the whole solve is one kernel."""
    @jt.function
    def solve(x, state, rounds):
        def going(c):
            x, s, k = c
            g = s.slots["grad"]
            return jnp.logical_and(k < rounds, jnp.logical_or(k == 0, jnp.sum(g * g) > 1e-20))

        def round_(c):
            x, s, k = c
            x, s = jt.fori_loop(0, 5, lambda i, c: LBFGS.update(
                c[0], None, c[1], value_and_grad=_tape_value_and_grad), (x, s))
            return x, s, k + 1
        return jt.while_loop(going, round_, (x, state, np.zeros((), np.int64)))
    return solve


def test_lbfgs_eager_and_compiled_agree(lbfgs_solve):
    x0 = np.zeros(10)
    x, s, k = lbfgs_solve(x0, LBFGS.init(x0), np.int64(1))
    e, es = x0, LBFGS.init(x0)
    for _ in range(5):
        e, es = LBFGS.update(e, None, es, value_and_grad=_tape_value_and_grad)
    assert int(k) == 1 and int(s.step) == int(es.step) == 5
    np.testing.assert_allclose(x, e, rtol=1e-12, atol=1e-14)
    for name in ("value", "grad", "s", "y", "rho"):
        np.testing.assert_allclose(s.slots[name], es.slots[name], rtol=1e-10, atol=1e-14)
    for name in ("head", "count", "evaluations"):
        assert int(s.slots[name]) == int(es.slots[name]), name


@pytest.mark.parametrize("n", [10, 100])
def test_lbfgs_reaches_the_rosenbrock_optimum(lbfgs_solve, n):
    x0 = np.zeros(n)
    x, s, rounds = lbfgs_solve(x0, LBFGS.init(x0), np.int64(400))
    value, g = _np_rosenbrock(x)
    assert np.abs(x - 1).max() < 1e-6
    assert np.linalg.norm(g) < 1e-8 and value < 1e-14
    np.testing.assert_allclose(s.slots["grad"], g, atol=1e-12)
    # (SciPy's L-BFGS-B, memory 10: 75 and 541 iterations; this one 74 and 527)
    assert int(s.step) < (150 if n == 10 else 700)
    assert int(s.slots["evaluations"]) < 1.3 * int(s.step)


def test_lbfgs_accepted_steps_satisfy_the_strong_wolfe_conditions():
    opt = optim.LBFGS(c1=1e-4, c2=0.9)
    x = np.full(10, -0.5)
    state = opt.init(x)
    for _ in range(25):
        f, g = _np_rosenbrock(x)
        new, state = opt.update(x, g, state, value_and_grad=_np_rosenbrock)
        f_new, g_new = _np_rosenbrock(new)
        s = new - x
        assert f_new <= f + 1e-4 * g @ s            # sufficient decrease
        assert abs(g_new @ s) <= 0.9 * abs(g @ s)   # strong curvature
        assert g @ s < 0
        np.testing.assert_allclose(state.slots["value"], f_new, rtol=1e-12)
        x = new


def _quadratic_search(alpha0):
    def evaluate(v):        # f(x) = (x - 10)^2 along d = 1 from 0
        return (v[0] - 10.0) ** 2, 2.0 * (v - 10.0)
    x, d = np.zeros(1), np.ones(1)
    return optim.wolfe_line_search(evaluate, x, d, jnp.asarray(np.float64(100.0)),
                                   jnp.asarray(np.array([-20.0])), alpha0, c2=0.1)


def test_the_line_search_brackets_then_zooms():
    # doubling 1, 2, 4, 8 (slopes -18 ... -4, steeper than c2 |f'(0)| = 2), 16: f(16) >
    # f(8) brackets [8, 16]; the cubic through the ends of a quadratic is the quadratic:
    # its minimum 10, where the slope is 0
    a, f, g, ok, n = _quadratic_search(1.0)
    assert bool(ok) and int(n) == 6
    np.testing.assert_allclose(float(a), 10.0, rtol=1e-12)
    assert abs(float(f)) < 1e-20
    # too long: f(100) > f(0) brackets [0, 100] at once
    a, f, g, ok, n = _quadratic_search(100.0)
    assert bool(ok) and int(n) == 2
    np.testing.assert_allclose(float(a), 10.0, rtol=1e-12)


def test_lbfgs_keeps_float32_and_pytrees():
    opt = optim.LBFGS(memory=4)
    params = {"a": np.zeros(3, np.float32), "b": np.zeros((2, 2), np.float32)}

    def fn(p):
        x = jnp.concatenate([p["a"], jnp.reshape(p["b"], (4,))])
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = _rosenbrock(x)
        g = tape.gradient(y, x)
        return y, {"a": g[:3], "b": jnp.reshape(g[3:], (2, 2))}
    state = opt.init(params)
    for _ in range(60):
        params, state = opt.update(params, None, state, value_and_grad=fn)
    assert params["a"].dtype == params["b"].dtype == np.float32
    assert state.slots["s"].shape == (4, 7) and state.slots["s"].dtype == np.float32
    np.testing.assert_allclose(np.concatenate([params["a"], params["b"].ravel()]), 1.0,
                               atol=1e-3)


# ---------------------------------------------------------------------------------
# apply_gradients, TensorFlow's way

def _linear_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3))
    return x, x @ np.array([1.0, -2.0, 0.5]) + 0.25


def _linear_loss(w, b, x, y):
    return jt.reduce_mean((jnp.sum(x * w, axis=1) + b - y) ** 2)


def test_apply_gradients_eagerly_matches_update_and_skips_none():
    x, y = _linear_data()
    w = jt.Variable(np.zeros(3), name="w")
    b = jt.Variable(np.zeros(()), name="b")
    frozen = jt.Variable(np.ones(2), name="frozen")
    opt = optim.Adam(0.1)
    params, state = [np.zeros(3), np.zeros(())], optim.Adam(0.1).init([np.zeros(3), np.zeros(())])
    for _ in range(3):
        with jt.GradientTape() as tape:
            loss = _linear_loss(w, b, x, y)
        grads = tape.gradient(loss, [w, b, frozen])
        assert grads[2] is None
        opt.apply_gradients(zip(grads, [w, b, frozen]))
        params, state = optim.Adam(0.1).update(params, [g.numpy() for g in grads[:2]], state)
    np.testing.assert_allclose(w.numpy(), params[0], rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), params[1], rtol=1e-12)
    np.testing.assert_array_equal(frozen.numpy(), np.ones(2))
    assert int(opt.iterations.numpy()) == 3 and w.dtype == np.float64


def test_apply_gradients_on_a_dense_layers_trainable_variables():
    layer = jt.nn.Dense(2, activation="relu")
    x = jt.constant(np.array([[1.0, -2.0, 0.5]], np.float32))
    layer(x)
    before = [v.numpy().copy() for v in layer.trainable_variables]
    opt = optim.Adam(0.01)
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(layer(x) ** 2 + layer(x))
    grads = tape.gradient(loss, layer.trainable_variables)
    opt.apply_gradients(zip(grads, layer.trainable_variables))
    for v, old, g in zip(layer.trainable_variables, before, grads):
        g = g.numpy()
        # Adam's first step: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + eps)
        np.testing.assert_allclose(v.numpy(), old - 0.01 * g / (np.abs(g) + 1e-8), rtol=1e-6)
        assert v.dtype == np.float32
    names = [var.name for var in opt.variables]
    assert names == ["iterations:0"] + [f"{layer.name}/{v}/{s}:0" for v in ("kernel", "bias")
                                        for s in ("m", "v")]


def test_apply_gradients_in_a_compiled_training_step():
    x, y = _linear_data()
    w = jt.Variable(np.zeros(3, np.float32), name="w")
    b = jt.Variable(np.zeros((), np.float32), name="b")
    opt = optim.SGD(0.1, momentum=0.5)

    @jt.function
    def train_step(x, y):
        with jt.GradientTape() as tape:
            loss = _linear_loss(w, b, x, y)
        dw, db = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip([dw, db], [w, b]))
        return loss

    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    we, be = jt.Variable(np.zeros(3, np.float32)), jt.Variable(np.zeros((), np.float32))
    eager = optim.SGD(0.1, momentum=0.5)
    for _ in range(3):
        train_step(x32, y32)
        with jt.GradientTape() as tape:
            loss = _linear_loss(we, be, x32, y32)
        eager.apply_gradients(zip(tape.gradient(loss, [we, be]), [we, be]))
    assert w.dtype == np.float32 and int(opt.iterations.numpy()) == 3
    np.testing.assert_allclose(w.numpy(), we.numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.numpy(), be.numpy(), rtol=1e-5)
    for _ in range(200):
        loss = train_step(x32, y32)
    assert float(loss) < 1e-8 and train_step.cache_info().traces == 1
    np.testing.assert_allclose(w.numpy(), [1.0, -2.0, 0.5], atol=1e-4)


# ---------------------------------------------------------------------------------
# errors

def test_errors_name_the_mismatch_and_the_line():
    opt = optim.Adam()
    params = {"w": np.zeros(3), "b": np.zeros(2)}
    state = opt.init(params)
    with pytest.raises(ValueError, match=r"Adam.update: grads do not have the structure of "
                       r"params \(at the top: expected a dict with keys \['b', 'w'\].*"
                       r"test_optim.py:\d+"):
        opt.update(params, {"w": np.zeros(3)}, state)
    with pytest.raises(ValueError, match=r"grads leaf 1 has shape \(4,\), the parameter's is "
                       r"\(3,\).*test_optim.py"):
        opt.update(params, {"w": np.zeros(4), "b": np.zeros(2)}, state)
    with pytest.raises(ValueError, match=r"the state has slots \['m', 'v'\], SGD keeps "
                       r"\['velocity'\].*test_optim.py"):
        optim.SGD(momentum=0.9).update(params, params, state)
    with pytest.raises(ValueError, match=r"made by init for other params.*test_optim.py"):
        opt.update([np.zeros(3)], [np.zeros(3)], state)
    with pytest.raises(TypeError, match=r"LBFGS.update needs value_and_grad=fn.*test_optim.py"):
        optim.LBFGS().update(np.zeros(2), np.zeros(2), optim.LBFGS().init(np.zeros(2)))
    with pytest.raises(ValueError, match=r"state is for 2 values with memory 10, the params "
                       r"have 3 values.*test_optim.py"):
        optim.LBFGS().update(np.zeros(3), None, optim.LBFGS().init(np.zeros(2)),
                             value_and_grad=_np_rosenbrock)
    with pytest.raises(TypeError, match=r"item 0 pairs a gradient with a ndarray, not a "
                       r"jt.Variable.*test_optim.py"):
        opt.apply_gradients([(np.zeros(3), np.zeros(3))])
    with pytest.raises(ValueError, match=r"no gradients provided for any variable: "
                       r"\['v:0'\]"):
        opt.apply_gradients([(None, jt.Variable(np.zeros(1), name="v"))])
    with pytest.raises(TypeError, match=r"parameter leaf 0 is int64"):
        opt.init([np.zeros(2, np.int64)])
    with pytest.raises(ValueError, match=r"Adam: b1 must be in \[0.0, 1.0\), got 1.5"):
        optim.Adam(b1=1.5)
    with pytest.raises(ValueError, match=r"0 < c1 < c2 < 1"):
        optim.LBFGS(c1=0.5, c2=0.1)
