"""``jt.minimize``: whole optimisation loops in one native call per chunk, the same
optimum SciPy finds with hand-written gradients, and the Python-driven mode."""

import importlib
import re
import time

import numpy as np
import pytest
import scipy.optimize as so

import jittape as jt
from jittape import numpy as jnp

optimize = importlib.import_module("jittape.optimize")



def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("n", [10, 100])
def test_lbfgs_reaches_scipys_optimum(n):
    x0 = np.linspace(-1.2, 1.0, n)
    want = so.minimize(so.rosen, x0, jac=so.rosen_der, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000})
    got = jt.minimize(rosen, x0, method="lbfgs", steps=5000, tol=1e-8)
    assert got.success and got.status == 0, got.message
    assert np.max(np.abs(got.jac)) <= 1e-8
    np.testing.assert_allclose(got.x, want.x, atol=1e-6)
    np.testing.assert_allclose(got.x, np.ones(n), atol=1e-7)
    assert got.fun == pytest.approx(so.rosen(got.x), abs=1e-15)
    assert 0 < got.nit <= got.nfev


def test_one_kernel_serves_every_size_and_each_size_is_right():
    # a size frozen into the kernel by the loop's own code gave a wrong answer, silently,
    # for a second size (the kernel is shared across sizes)
    found = {}
    for n in (10, 60, 10):
        found[n] = jt.minimize(rosen, np.linspace(-1.2, 1.0, n), tol=1e-8, steps=5000)
        assert found[n].success, (n, found[n].message)
        np.testing.assert_allclose(found[n].x, np.ones(n), atol=1e-7)


def test_python_driven_mode_runs_the_same_algorithm():
    x0 = np.linspace(-1.2, 1.0, 10)
    vg = jt.value_and_grad(rosen)
    native = jt.minimize(rosen, x0, tol=1e-8)
    driven = jt.minimize(rosen, x0, tol=1e-8, value_and_grad=vg)
    assert driven.success and driven.nit == native.nit and driven.nfev == native.nfev
    np.testing.assert_allclose(driven.x, native.x, rtol=1e-9, atol=1e-12)


def test_python_driven_mode_with_a_pytree_of_parameters():
    # L-BFGS unravels its flat vector into tensors: the user's gradient gets NumPy leaves
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = (rng.random(60) < 0.5).astype(np.float64)

    def nll(p, X, y):
        z = X @ p["w"] + p["b"]
        return jnp.sum(jnp.logaddexp(0.0, z) - y * z) + 0.1 * jnp.sum(p["w"] ** 2)

    seen = []

    def vg(p, X, y):
        seen.extend(type(leaf) for leaf in jt.tree.leaves(p))
        return jt.value_and_grad(nll)(p, X, y)

    p0 = {"w": np.zeros(3), "b": np.zeros(())}
    lbfgs = jt.minimize(nll, p0, args=(X, y), tol=1e-8, value_and_grad=vg)
    adam = jt.minimize(nll, p0, method="adam", learning_rate=0.1, steps=2000, args=(X, y),
                       tol=1e-6, value_and_grad=jt.value_and_grad(nll))
    assert lbfgs.success and adam.success
    assert seen and all(issubclass(t, (np.ndarray, np.generic)) for t in seen), set(seen)
    x0, unravel = jt.tree.ravel(p0)

    def flat(x):
        v, g = jt.value_and_grad(nll)(unravel(x), X, y)
        return float(v), jt.tree.ravel(g)[0]
    want = unravel(so.minimize(flat, x0, jac=True, method="BFGS", options={"gtol": 1e-10}).x)
    for got, tol in ((lbfgs, 1e-7), (adam, 1e-5)):
        assert set(got.x) == {"w", "b"}
        np.testing.assert_allclose(got.x["w"], want["w"], atol=tol)
        np.testing.assert_allclose(got.x["b"], want["b"], atol=tol)


def test_adam_steps_match_a_loop_of_updates():
    x0 = np.linspace(-1.2, 1.0, 6)
    got = jt.minimize(rosen, x0, method="adam", steps=300, tol=0.0, learning_rate=1e-2)
    opt, vg = jt.optim.Adam(1e-2), jt.value_and_grad(rosen)
    x, state = x0, opt.init(x0)
    for _ in range(300):
        _, g = vg(x)
        x, state = opt.update(x, g, state)
    assert got.nit == 300 and got.status == 1
    np.testing.assert_allclose(got.x, x, rtol=1e-10, atol=1e-12)


def test_pytrees_args_and_callbacks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X @ np.array([1.0, -2.0, 0.5, 0.0]) > 0).astype(np.float64)

    def nll(p, X, y):
        z = X @ p["w"] + p["b"]
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 1e-2 * jnp.sum(p["w"] ** 2)

    seen = []
    got = jt.minimize(nll, {"w": np.zeros(4), "b": np.zeros(())}, args=(X, y), tol=1e-9,
                      callback=lambda r: seen.append(r.nit), callback_every=2)
    obj = jt.scipy.objective(nll, like={"w": np.zeros(4), "b": np.zeros(())})
    x0, unravel = jt.tree.ravel({"w": np.zeros(4), "b": np.zeros(())})
    want = unravel(so.minimize(x0=x0, args=(X, y), method="BFGS", options={"gtol": 1e-10},
                               **{k: v for k, v in obj.items() if k != "hessp"}).x)
    assert got.success
    np.testing.assert_allclose(got.x["w"], want["w"], atol=1e-6)
    assert float(got.x["b"]) == pytest.approx(float(want["b"]), abs=1e-6)
    assert seen[:-1] == list(range(2, 2 * len(seen) - 1, 2))   # every 2, then the end


def test_a_callback_stops_and_ctrl_c_returns_the_best_point():
    x0 = np.linspace(-1.2, 1.0, 10)
    stopped = jt.minimize(rosen, x0, callback=lambda r: r.nit >= 3, callback_every=1)
    assert stopped.status == 4 and stopped.nit == 3 and not stopped.success

    def interrupt(r):
        if r.nit >= 4:
            raise KeyboardInterrupt
    got = jt.minimize(rosen, x0, callback=interrupt, callback_every=2)
    assert got.status == 5 and "interrupted" in got.message and got.nit == 4
    assert got.fun == pytest.approx(float(rosen(jt.constant(got.x))))


def test_progress_says_where_it_is(capsys):
    jt.minimize(rosen, np.linspace(-1.2, 1.0, 10), progress=True, callback_every=20)
    err = capsys.readouterr().err
    assert "jt.minimize" in err and "fun" in err


def test_minimize_errors():
    with pytest.raises(ValueError, match="unknown method 'newton'"):
        jt.minimize(rosen, np.zeros(3), method="newton")
    with pytest.raises(TypeError, match="belong to the optimizer"):
        jt.minimize(rosen, np.zeros(3), method=jt.optim.Adam(), learning_rate=0.1)
    with pytest.raises(TypeError, match="minimize\\(method='adam'\\)"):
        jt.minimize(rosen, np.zeros(3), method="adam", momentum=0.9)


# -- regressions --------------------------------------------------------------------------

TARGET = np.array([1.0, 2.0])


def _to_target(x):
    return jnp.sum((x - TARGET) ** 2)


def test_what_the_loss_reads_is_read_at_each_call():
    # the loop's kernel froze the globals and closure of the loss: rebinding them
    # returned the old optimum
    global TARGET
    first = jt.minimize(_to_target, np.zeros(2), tol=1e-10)
    np.testing.assert_allclose(first.x, [1.0, 2.0], atol=1e-8)
    saved = TARGET
    try:
        TARGET = np.array([7.0, 8.0])
        np.testing.assert_allclose(jt.minimize(_to_target, np.zeros(2), tol=1e-10).x,
                                   [7.0, 8.0], atol=1e-8)
    finally:
        TARGET = saved
    scale = 1.0

    def scaled(x):
        return scale * jnp.sum((x - 3.0) ** 2)
    assert jt.minimize(scaled, np.zeros(1), method="adam", learning_rate=0.1,
                       steps=500, tol=1e-9).x == pytest.approx(3.0, abs=1e-3)
    scale = 0.0                                      # a flat loss: nothing to do
    flat = jt.minimize(scaled, np.zeros(1), method="adam", steps=5)
    assert flat.success and flat.nit == 0 and flat.x == pytest.approx(0.0)


def test_a_nan_gradient_ends_the_loop_and_nan_tol_is_refused():
    def f(x):                                        # finite value, NaN gradient at x0
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(jnp.abs(x)), 0.0) + (x - 3.0) ** 2) + \
            0.0 * jnp.sqrt(x[0])
    got = jt.minimize(f, np.array([-1.0, 2.0]), method="adam", steps=100)
    assert got.status == 3 and not got.success
    with pytest.raises(ValueError, match="tol must be a number"):
        jt.minimize(rosen, np.zeros(2), tol=float("nan"))


def test_adams_step_shares_a_loop_and_computes_its_next_corrections_first():
    # the gradient's assembly from its slices runs in the loop of the loss's gradient
    # (passes.fuse.shifted), and the next step's bias corrections go before that loop,
    # not after it, where the next step would wait for them (passes.fuse.follow)
    opt = optimize._optimizer("adam", 0.01, {})
    chunk = optimize._native_step(rosen, opt)
    x = np.linspace(0.5, 1.5, 10)
    source = chunk.lower(x, opt.init(x), np.int64(5), np.float64(1e-6)).source
    body = source[source.index("while True:"):]
    assert body.count("and in the same loop") == 1
    assert 0 < body.index("expm1_f64(") < body.index("and in the same loop")
    # the update writes x, m and v into their own buffers (codegen.cpu.Pool.into_carry),
    # and the loss's gradient stores only the gradient, not its slices' parts, which
    # the assembly reads from registers (codegen.cpu._registers_only)
    assert body.count("into its carry's buffer") == 3
    shared = body[body.index("and in the same loop"):body.index("past the loop's last")]
    assert len(re.findall(r"\bv\d+\[i0\] = ", shared)) == 2        # (the lanes' runs and the rest)


CONVERGENCE_CASES = [
    [0.5, -0.2], [0.5, -2.0], [0.0, 0.0], [1e-300, -1e-300], [np.nan, 5.0], [0.5, np.nan],
    [np.inf, 0.0], [-np.inf, np.nan], [0.1, 0.1000001], [-0.0],
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tol", [0.1, 0.0, 1.0])
def test_the_test_of_convergence_is_the_largest_components_without_computing_it(tol, dtype):
    # the loops test convergence with small integer codes (a sum or maximum of floats is
    # costlier there); ``== 1`` must hold exactly where max(|g|) > tol does, NaN included
    for case in CONVERGENCE_CASES:
        g = np.array(case, dtype)
        want = bool(np.max(np.abs(g)) > tol)       # False where a component is NaN
        tree = {"a": g, "b": np.abs(g[::-1])}
        want_tree = bool(max(np.max(np.abs(g)), np.max(np.abs(g[::-1]))) > tol)
        assert bool(optimize._beyond(jt.constant(g), tol) == 1) == want, case
        compiled = jt.function(lambda v, t: optimize._beyond(v, t) == 1)
        assert bool(compiled(g, np.float64(tol))) == want, case
        both = jt.function(lambda v, t: optimize._beyond(v, t) == 1)
        assert bool(both(tree, np.float64(tol))) == want_tree, case


@pytest.mark.parametrize("method", ["adam", "lbfgs"])
def test_a_loop_stops_at_tol_on_its_largest_component(method):
    # the step at which the loop stops is the first whose gradient is within tol
    def f(x):
        return jnp.sum((x - jnp.asarray([1.0, -2.0, 3.0])) ** 2)
    got = jt.minimize(f, np.zeros(3), method=method, steps=5000, tol=1e-3,
                      **({"learning_rate": 0.05} if method == "adam" else {}))
    assert got.success and np.max(np.abs(got.jac)) <= 1e-3
    if method == "adam":
        before = jt.minimize(f, np.zeros(3), method=method, steps=got.nit - 1, tol=1e-3,
                             learning_rate=0.05)
        assert not before.success and np.max(np.abs(before.jac)) > 1e-3


def test_the_result_is_the_last_point_with_its_own_status():
    def f(x):
        return jnp.sum(x ** 4 - 2 * x ** 2 + 0.3 * x)
    a = jt.minimize(f, np.array([-2.0]), method="sgd", learning_rate=0.01, momentum=0.9,
                    callback_every=1, steps=2000)
    b = jt.minimize(f, np.array([-2.0]), method="sgd", learning_rate=0.01, momentum=0.9,
                    steps=2000)
    for r in (a, b):
        assert r.success and np.max(np.abs(r.jac)) <= 1e-6
    np.testing.assert_allclose(a.x, b.x, rtol=1e-9)


def test_loss_errors_and_interrupts():
    with pytest.raises(TypeError, match=r"the loss must be a floating-point scalar, got float64\[3\]"):
        jt.minimize(lambda x: x ** 2, np.zeros(3), method="adam")
    with pytest.raises(TypeError, match="floating-point scalar, got int64"):
        jt.minimize(lambda x: jnp.sum(x > 0.5), np.zeros(3), method="adam")
    # Numba turns a Ctrl-C during a native call into a SystemError caused by it
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as cause:
            raise SystemError("returned a result with an exception set") from cause
    except SystemError as err:
        with pytest.raises(KeyboardInterrupt):
            optimize._reraise_interrupt(err)
    optimize._reraise_interrupt(SystemError("another"))        # (not one: raised as it is)


def test_an_optimizer_instance_is_its_own_kernel():
    class Clipped(jt.optim.SGD):
        def __init__(self, learning_rate, clip):
            super().__init__(learning_rate)
            self.clip = clip

        def _rule(self, p, g, slots, lr, t):
            return p - lr * jnp.clip(g, -self.clip, self.clip), {}

    def f(x):
        return jnp.sum(-10.0 * x)
    one = jt.minimize(f, np.zeros(1), method=Clipped(1.0, 1.0), steps=1)
    ten = jt.minimize(f, np.zeros(1), method=Clipped(1.0, 10.0), steps=1)
    assert one.x == pytest.approx(1.0) and ten.x == pytest.approx(10.0)


def test_built_in_optimizers_share_a_kernel_by_their_settings():
    # the settings are the key: equal numbers share one kernel, another number has its
    # own (a learning rate baked into a shared kernel would be a wrong step, silently),
    # and a schedule is keyed by what it says, not by the object
    from jittape import optimize

    def f(x):
        return jnp.sum(-10.0 * x)
    table = optimize._CHUNKS.setdefault(f, {})
    a = jt.minimize(f, np.zeros(1), method="sgd", learning_rate=0.5, steps=1)
    b = jt.minimize(f, np.zeros(1), method="sgd", learning_rate=0.5, steps=1)
    assert len(table) == 1 and a.x == b.x == pytest.approx(5.0)
    c = jt.minimize(f, np.zeros(1), method="sgd", learning_rate=0.25, steps=1)
    assert len(table) == 2 and c.x == pytest.approx(2.5)
    for _ in range(2):
        jt.minimize(f, np.zeros(1), method="sgd", steps=1,
                    learning_rate=jt.optim.schedules.exponential_decay(0.5, 0.5, 10))
    assert len(table) == 3
    # a method named with numbers makes its optimizer (and checks it) once; another
    # setting, another optimizer; options are part of the settings
    made = optimize._optimizer("adam", 0.01, {})
    assert optimize._optimizer("adam", 0.01, {}) is made
    assert optimize._optimizer("adam", 0.02, {}) is not made
    assert optimize._optimizer("adam", 0.01, {"b1": 0.5}).b1 == 0.5
    with pytest.raises(ValueError, match="b1 must be in"):
        optimize._optimizer("adam", 0.01, {"b1": 1.5})
    with pytest.raises(ValueError, match="b1 must be in"):   # (not kept: checked again)
        optimize._optimizer("adam", 0.01, {"b1": 1.5})


def test_the_pace_of_chunks_on_numpy_does_not_size_later_calls(monkeypatch):
    # while the kernel compiles (tiered calls run the graph on NumPy) the chunks go at
    # NumPy's pace; sizing a later call's chunks by it would cut that call, which runs
    # the kernel, into many short chunks
    from jittape import optimize
    budgets, compiling = [], [3]
    real = optimize._python_step

    class Tiered:
        """A chunk whose first three calls run on 'NumPy' (1 ms an iteration) while
        'its kernel compiles'; then 'the kernel' (0.1 ms an iteration)."""

        def __init__(self, chunk):
            self.chunk = chunk

        def __call__(self, x, state, budget, tol, *args):
            budgets.append(int(budget))
            on_numpy = compiling[0] > 0
            compiling[0] -= 1
            time.sleep((1e-3 if on_numpy else 1e-4) * int(budget))
            return self.chunk(x, state, budget, tol, *args)

        def _background_compiles(self):
            return ["a kernel"] if compiling[0] > 0 else []

    made = []
    monkeypatch.setattr(optimize, "_python_step",
                        lambda *a: made.append(Tiered(real(*a))) or made[-1])
    monkeypatch.setattr(optimize, "FIRST_CHUNK", 20)
    monkeypatch.setattr(optimize, "CHUNK_SECONDS", 0.02)
    vg = jt.value_and_grad(lambda x: jnp.sum(x * x))
    vg(np.ones(3))                       # (compiled before: the chunks time only themselves)
    def solve(steps):
        jt.minimize(lambda x: jnp.sum(x * x), np.ones(3), method="sgd", learning_rate=1e-4,
                    steps=steps, tol=0, value_and_grad=lambda x: vg(x))
        return optimize._speeds(made[-1])
    first = solve(40)                  # (chunks of 20 or a little less: three at most)
    assert first == {} and len(budgets) <= 3, (first, budgets)   # all on NumPy: no pace kept
    # the kernel's pace, kept (loose for a loaded machine: sleeps only ever run long)
    (pace,) = solve(100).values()
    assert pace < 1e-3, pace


def test_lbfgs_takes_no_step_into_an_infinite_gradient():
    def g(x):                                        # gradient [inf, -3.5] at [0, 1]
        return jnp.sum(jnp.sqrt(x) + (x - 3.0) ** 2)
    opt = jt.optim.LBFGS()
    x0 = np.array([0.0, 1.0])
    x, state = opt.update(x0, None, opt.init(x0), value_and_grad=jt.value_and_grad(g))
    assert np.all(np.isfinite(x))


@pytest.mark.parametrize("method", ["lbfgs", "adam"])
def test_a_first_state_made_once_is_never_written(method):
    from jittape import optimize

    def loss(x):
        return jnp.sum((x - 2.0) ** 2 * jnp.arange(1.0, 5.0))
    x0 = np.zeros(4)
    first = jt.minimize(loss, x0, method=method, steps=200, tol=1e-10)
    again = jt.minimize(loss, x0, method=method, steps=200, tol=1e-10)
    np.testing.assert_array_equal(first.x, again.x)
    opt = optimize._optimizer(method, None, {})
    (state,) = optimize._FIRST[optimize._native_step(loss, opt)].values()
    fresh = opt.init(x0)                 # the cached state still holds init's values
    for name, want in fresh.slots.items():
        np.testing.assert_array_equal(state.slots[name], want)
    assert state.step == fresh.step == 0
