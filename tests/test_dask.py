"""jt.dask: data-parallel gradients on a LocalCluster of two worker processes.

The cluster is started once for the module. What is checked: the gradient equals the
single-process one within rounding (ragged and one-row chunks included, each worker
compiling one kernel); scipy's L-BFGS-B and jt.minimize reach the single-process optimum;
a worker killed in the middle of a step changes nothing; the result is bitwise the same
on 1, 2 and 3 workers and on the threaded, synchronous and process schedulers; wrong
chunkings, shapes and dtypes name the chunk and the argument.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (a dependency of distributed)
import dask.array as da  # noqa: E402
import scipy.optimize  # noqa: E402

import jittape as jt  # noqa: E402
from jittape import numpy as jnp  # noqa: E402

# (the workers cannot import this file: its functions travel by value)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N, D = 1001, 5
CHUNKS = (300, 300, 250, 150, 1)        # ragged, and a chunk of one row
LAM = 1e-2


def logloss(w, X, y):
    z = X @ w["coef"] + w["bias"]
    return jnp.sum(jnp.logaddexp(0.0, z) - y * z)


def mean_logloss(w, X, y):
    z = X @ w
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z)


def ridge(w):
    return 0.5 * LAM * jnp.sum(w * w)


def full_mean_objective(w, X, y):
    return mean_logloss(w, X, y) + ridge(w)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    w_true = rng.normal(size=D)
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ w_true))).astype(np.float64)
    return X, y


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _dask_data(X, y, chunks=CHUNKS):
    return da.from_array(X, chunks=(chunks, (D,))), da.from_array(y, chunks=(chunks,))


def _kernels_built():
    """The worker's kernels (programs of one code share one: jt.dask.grad and
    value_and_grad of a loss, other chunkings)."""
    from jittape.dask import worker
    return len({id(p.built.kernel) for p in worker.PROGRAMS.values() if p.built is not None})


def test_matches_one_process_and_compiles_once_per_worker(client, data):
    X, y = data
    Xd, yd = _dask_data(X, y)
    Xd, yd = Xd.persist(), yd.persist()
    w = {"coef": np.linspace(-0.5, 0.5, D), "bias": np.float64(0.1)}
    value, grads = jt.dask.value_and_grad(logloss)(w, Xd, yd)
    ref_value, ref_grads = jt.value_and_grad(logloss)(w, X, y)
    np.testing.assert_allclose(value, ref_value, rtol=1e-13)
    np.testing.assert_allclose(grads["coef"], ref_grads["coef"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads["bias"], ref_grads["bias"], rtol=1e-12)
    assert set(grads) == {"coef", "bias"} and isinstance(value, np.float64)
    g_only = jt.dask.grad(logloss)(w, Xd, yd)
    np.testing.assert_array_equal(g_only["coef"], grads["coef"])

    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean", regularizer=ridge)
    v, g = vg(w["coef"], Xd, yd)
    rv, rg = jt.value_and_grad(full_mean_objective)(w["coef"], X, y)
    np.testing.assert_allclose(v, rv, rtol=1e-13)
    np.testing.assert_allclose(g, rg, rtol=1e-12, atol=1e-14)
    # ragged and one-row chunks took the kernel of the others: one per loss per worker
    built = client.run(_kernels_built)
    assert all(k == 2 for k in built.values()), built
    assert len(vg._plans) == 1 and len(next(iter(vg._plans.values()))[0].records) == 1


def test_scipy_lbfgs_and_minimize_reach_the_one_process_optimum(client, data):
    X, y = data
    Xd, yd = (a.persist() for a in _dask_data(X, y))
    w0 = np.zeros(D)
    ref = scipy.optimize.minimize(x0=w0, args=(X, y), method="L-BFGS-B",
                                  options={"gtol": 1e-9},
                                  **jt.scipy.objective(full_mean_objective, method="L-BFGS-B"))
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean", regularizer=ridge)
    res = scipy.optimize.minimize(x0=w0, args=(Xd, yd), method="L-BFGS-B",
                                  options={"gtol": 1e-9}, **vg.objective())
    assert res.success and ref.success
    np.testing.assert_allclose(res.x, ref.x, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(res.fun, ref.fun, rtol=1e-12)
    mine = jt.minimize(full_mean_objective, w0, value_and_grad=vg, args=(Xd, yd), tol=1e-9)
    assert mine.success
    np.testing.assert_allclose(mine.x, ref.x, rtol=1e-6, atol=1e-8)


class _KillOnce(distributed.WorkerPlugin):
    """Ends the worker's process the first time it starts a chunk's task (one worker of
    the cluster: the first to create the marker file)."""

    def __init__(self, marker):
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        name = key if isinstance(key, str) else str(key)
        if finish == "executing" and name.startswith("jittape-partial"):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os._exit(1)


def _six_step_fit(data):
    """(the gradient, SciPy's arguments of a six-step L-BFGS-B fit on the persisted
    chunks, that fit's result): what a lost worker must not change."""
    X, y = data
    Xd, yd = (a.persist() for a in _dask_data(X, y))
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean", regularizer=ridge)
    fit = dict(x0=np.zeros(D), args=(Xd, yd), method="L-BFGS-B",
               options={"gtol": 1e-9, "maxiter": 6}, **vg.objective())
    return vg, fit, scipy.optimize.minimize(**fit)


def test_a_worker_lost_in_a_step_changes_nothing(client, data, tmp_path, monkeypatch):
    monkeypatch.setattr(jt.dask, "RUNNERS", False)       # the steps as tasks
    vg, fit, before = _six_step_fit(data)
    marker = str(tmp_path / "killed")
    client.register_plugin(_KillOnce(marker), name="kill-once")
    try:
        after = scipy.optimize.minimize(**fit)
    finally:
        client.unregister_worker_plugin("kill-once")
    assert os.path.exists(marker)            # a worker did die in a step
    np.testing.assert_array_equal(after.x, before.x)
    assert after.fun == before.fun and after.nit == before.nit
    client.wait_for_workers(2, timeout=60)


def _until_the_runners_take_it(vg, *args):
    """Steps until one goes by the workers' runners (the first may go as tasks: it
    copies a chunk's y block next to its X block where the two were apart)."""
    for _ in range(5):
        out = vg(*args)
        if vg._where:
            return out
    raise AssertionError("no step went by the workers' runners")


def _kill_in_partials(marker):
    """On a worker: its process ends at its first chunks of a step (the first worker to
    create the marker file, which says the thread that ran them)."""
    import threading
    from jittape.dask import worker
    original = worker.partials

    def partials(*args):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return original(*args)
        os.write(fd, threading.current_thread().name.encode())
        os.close(fd)
        os._exit(1)
    partials.original = original
    worker.partials = partials


def _restore_partials():
    from jittape.dask import worker
    worker.partials = getattr(worker.partials, "original", worker.partials)


def test_a_worker_lost_in_a_runner_call_changes_nothing(client, data, tmp_path):
    vg, fit, before = _six_step_fit(data)
    Xd, yd = fit["args"]
    _until_the_runners_take_it(vg, fit["x0"], Xd, yd)
    calls = []
    on_runners = vg._on_runners
    vg._on_runners = lambda *a: calls.append(on_runners(*a)) or calls[-1]
    marker = str(tmp_path / "killed")
    client.run(_kill_in_partials, marker)
    try:
        after = scipy.optimize.minimize(**fit)
    finally:
        client.run(_restore_partials)
        del vg._on_runners
    with open(marker) as f:                  # a worker died in its runner's call
        assert f.read().startswith("jittape-runner")
    assert calls[0] is None                  # that step went as tasks, Dask retrying
    np.testing.assert_array_equal(after.x, before.x)
    assert after.fun == before.fun and after.nit == before.nit
    client.wait_for_workers(2, timeout=60)
    calls.clear()
    vg._on_runners = lambda *a: calls.append(on_runners(*a)) or calls[-1]
    try:                    # the runners go on, the new worker's too
        again = [vg(before.x, Xd, yd) for _ in range(3)]
    finally:
        del vg._on_runners
    assert calls[-1] is not None
    assert all(v == again[0][0] and np.array_equal(g, again[0][1]) for v, g in again)


def test_a_chunk_not_where_the_runner_looks_goes_as_tasks(client, data):
    X, y = data
    Xd, yd = (a.persist() for a in _dask_data(X, y))
    distributed.wait([Xd, yd])
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean")
    w = np.linspace(-0.3, 0.3, D)
    want = _until_the_runners_take_it(vg, w, Xd, yd)
    calls = []
    on_runners = vg._on_runners
    vg._on_runners = lambda *a: calls.append(on_runners(*a)) or calls[-1]
    (where_key, groups), = vg._where.items()
    every = sorted(i for g in groups.values() for i in g)
    # a worker that does not hold every chunk
    first = next(a for a in sorted(client.scheduler_info()["workers"])
                 if groups.get(a) != every)
    try:
        # where the chunks were, as kept from the last step, stale: every chunk on that
        # worker; its runner misses some, the step asks the scheduler again
        vg._where[where_key] = {first: every}
        kept = vg(w, Xd, yd)
        assert calls[0] is None and calls[-1] is not None and len(calls) == 2
        assert vg._where[where_key] == groups
        # the scheduler's own answer, stale: the step goes as tasks
        calls.clear()
        vg._where.clear()
        who_has = client.who_has
        client.who_has = lambda futures: {k: [first] for k in who_has(futures)}
        try:
            got = vg(w, Xd, yd)
        finally:
            del client.who_has
    finally:
        del vg._on_runners
    assert calls == [None] and not vg._where
    for v, g in (kept, got):
        assert v == want[0] and np.array_equal(g, want[1])


def test_runners_called_through_the_schedulers_proxy(client, data):
    X, y = data
    # a client of the same cluster by its address, which does not talk to workers itself
    other = distributed.Client(client.scheduler.address, direct_to_workers=False,
                               set_as_default=False)
    try:
        Xd, yd = (other.persist(a) for a in _dask_data(X, y))
        vg = jt.dask.value_and_grad(mean_logloss, reduce="mean", regularizer=ridge)
        w = np.linspace(-0.3, 0.3, D)
        with dask.config.set(scheduler=other.get):
            got = _until_the_runners_take_it(vg, w, Xd, yd)
            jt.dask.RUNNERS = False
            try:
                want = vg(w, Xd, yd)
            finally:
                jt.dask.RUNNERS = True
    finally:
        other.close()
    assert got[0] == want[0] and np.array_equal(got[1], want[1])


def test_an_error_on_a_worker_comes_back_from_its_runner(client, data):
    X, y = data
    Xd, yd = _dask_data(X, y)
    wrong = Xd.map_blocks(lambda b, block_id=None: b.astype(np.float32)
                          if block_id[0] == 1 else b, dtype=np.float64).persist()
    yd = yd.persist()
    distributed.wait([wrong, yd])
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean")
    w = np.zeros(D)
    calls = []
    on_runners = vg._on_runners

    def watched(*a):
        try:
            calls.append(on_runners(*a))
        except TypeError:
            calls.append("raised")
            raise
        return calls[-1]
    vg._on_runners = watched
    try:
        # (the first step may go as tasks: X's and y's blocks of a chunk on two workers)
        for _ in range(3):
            with pytest.raises(TypeError, match=r"chunk 1 of argument 1 \(X\) has dtype "
                               r"float32.*test_dask"):
                vg(w, wrong, yd)
    finally:
        del vg._on_runners
    assert "raised" in calls and set(calls) <= {None, "raised"}


def test_errors_name_the_chunk_and_the_argument(data):
    X, y = data
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean")
    w = np.zeros(D)
    with dask.config.set(scheduler="threads"):
        with pytest.raises(jt.ShapeError, match=r"argument 1 \(X\).*chunked along axis 1.*test_dask"):
            vg(w, da.from_array(X, chunks=(500, 2)), da.from_array(y, chunks=500))
        with pytest.raises(jt.ShapeError, match=r"argument 2 \(y\) has row chunks \(600, 401\) but "
                           r"argument 1 \(X\) has \(500, 500, 1\)"):
            vg(w, da.from_array(X, chunks=(500, D)), da.from_array(y, chunks=600))
        Xd, yd = _dask_data(X, y)
        wrong_dtype = Xd.map_blocks(lambda b, block_id=None: b.astype(np.float32)
                                    if block_id[0] == 0 else b, dtype=np.float64)
        with pytest.raises(TypeError, match=r"chunk 0 of argument 1 \(X\) has dtype float32.*"
                           r"says dtype float64.*test_dask"):
            vg(w, wrong_dtype, yd)
        wrong_shape = yd.map_blocks(lambda b: b[:-1] if len(b) == 250 else b, dtype=np.float64)
        with pytest.raises(jt.ShapeError, match=r"chunk 2 of argument 2 \(y\) has shape \(249,\); "
                           r"the dask array's chunks say \(250,\)"):
            vg(w, Xd, wrong_shape)
        with pytest.raises(TypeError, match="no argument is a dask.array"):
            vg(w, X, y)
        with pytest.raises(TypeError, match=r"argument 1 \(X\) is a dask.array but is differentiated"):
            jt.dask.grad(mean_logloss, argnums=1)(w, Xd, yd)
        with pytest.raises(ValueError, match="reduce='max'"):
            jt.dask.value_and_grad(mean_logloss, reduce="max")


def test_a_loss_that_reads_sizes(data):
    X, y = data
    Xd, yd = _dask_data(X[:11], y[:11], chunks=(4, 4, 3))

    def by_shape(w, X, y):            # a Python float: a constant of each size's graph
        z = X @ w
        return jnp.sum(jnp.logaddexp(0.0, z) - y * z) / float(X.shape[0])

    def reshaped(w, X, y):            # the sizes flow into the graph as sizes
        z = jnp.reshape(X, (X.shape[0], -1)) @ w
        return jnp.sum(jnp.logaddexp(0.0, z) - y * z) / X.shape[0] * 11

    w = np.linspace(-1, 1, D)
    with dask.config.set(scheduler="threads"):
        for loss, kernels in ((by_shape, 2), (reshaped, 1)):
            vg = jt.dask.value_and_grad(loss, reduce="mean")
            v, g = vg(w, Xd, yd)
            rv, rg = jt.value_and_grad(mean_logloss)(w, X[:11], y[:11])
            rv, rg = (rv, rg) if loss is by_shape else (rv * 11, rg * 11)
            np.testing.assert_allclose(v, rv, rtol=1e-13)
            np.testing.assert_allclose(g, rg, rtol=1e-12, atol=1e-14)
            assert len(next(iter(vg._plans.values()))[0].records) == kernels


def test_sizes_whose_graphs_agree_share_a_kernel_and_each_other_has_its_own(data):
    X, y = data
    w = np.linspace(-1, 1, D)

    def stepped(w, X):              # sizes 5 and 4 trace one graph, 2 another
        return jnp.sum(jnp.tanh(X @ w) ** 2) * (1.0 if X.shape[0] > 3 else 2.0)

    def branches_at_one_size(w, X):
        if X.shape[0] == 2 and jnp.sum(w) > 0:
            return jnp.sum(X @ w)
        return jnp.sum(X @ w)

    with dask.config.set(scheduler="sync"):
        Xd = da.from_array(X[:11], chunks=((5, 4, 2), (D,)))
        vg = jt.dask.value_and_grad(stepped)
        v, g = vg(w, Xd)
        rv, rg = 0.0, 0.0
        for a, b in ((0, 5), (5, 9), (9, 11)):
            t, scale = np.tanh(X[a:b] @ w), 1.0 if b - a > 3 else 2.0
            rv, rg = rv + scale * np.sum(t ** 2), rg + scale * X[a:b].T @ (2 * t * (1 - t ** 2))
        np.testing.assert_allclose(v, rv, rtol=1e-13)
        np.testing.assert_allclose(g, rg, rtol=1e-12)
        plan = next(iter(vg._plans.values()))[0]
        assert len(plan.records) == 2 and plan.by_size[5] == plan.by_size[4] != plan.by_size[2]
        with pytest.raises(jt.UnsupportedError, match="branches in Python"):
            jt.dask.value_and_grad(branches_at_one_size)(w, Xd)
        # a NumPy argument of a chunk's length: the one-row chunk says what is wrong
        Xd, yd = _dask_data(X[:9], y[:9], chunks=(4, 4, 1))
        with pytest.raises(jt.ShapeError, match=r"(?s)on chunk 2 \(1 row, run as 2 equal rows\) "
                           r"of the data.*make it a dask array chunked like the data.*test_dask"):
            jt.dask.value_and_grad(mean_logloss)(w, Xd, y[:4])


def test_a_persisted_array_is_read_as_persisted_and_plans_keep_no_data(data):
    import gc
    import weakref
    X, y = data
    calls = []

    def counted(block):
        calls.append(len(block))
        return block.copy()        # (a chunk of its own, not the source's)

    w = np.linspace(-0.3, 0.3, D)
    with dask.config.set(scheduler="threads"):
        Xs = da.from_array(X, chunks=(250, D)).map_blocks(counted, dtype=X.dtype)
        ys = da.from_array(y, chunks=250)
        vg = jt.dask.value_and_grad(mean_logloss, reduce="mean")
        before = vg(w, Xs, ys)
        Xp = Xs.persist()
        n = len(calls)
        assert sum(1 for c in calls if c) == 2 * len(Xs.chunks[0])    # a step, persist
        for _ in range(2):
            after = vg(w, Xp, ys)          # (same name as Xs: the persisted chunks)
        assert len(calls) == n
        assert after[0] == before[0] and np.array_equal(after[1], before[1])
        chunk = weakref.ref(next(v for v in Xp.__dask_graph__().values()
                                 if isinstance(v, np.ndarray)))
        del Xp
        gc.collect()
        assert chunk() is None             # the user let go of it: so did the gradient
        for k in range(jt.dask.PLANS + 3):       # (a loop over chunkings)
            vg(w, Xs[:20 + k].rechunk(10), ys[:20 + k].rechunk(10))
        assert len(vg._plans) == jt.dask.PLANS


def test_tensors_are_taken_as_numpy_and_jt_minimize_takes_a_pytree(data):
    X, y = data
    Xd, yd = _dask_data(X[:200], y[:200], chunks=(120, 80))

    def reg(w):
        return 0.5 * LAM * (jnp.sum(w["coef"] ** 2) + w["bias"] ** 2)

    def full(w, X, y):
        return logloss(w, X, y) + reg(w)

    p0 = {"coef": np.zeros(D), "bias": np.float64(0.0)}
    with dask.config.set(scheduler="sync"):
        vg = jt.dask.value_and_grad(logloss, regularizer=reg)
        v, g = vg(p0, Xd, yd)
        vt, gt = vg({"coef": jt.constant(p0["coef"]), "bias": jt.constant(0.0)}, Xd, yd)
        assert v == vt and np.array_equal(g["coef"], gt["coef"]) and g["bias"] == gt["bias"]
        # L-BFGS hands the point as tensors; Adam as NumPy values
        # (tol: a gradient norm well above what the sum of 200 rows' losses of about 79
        # resolves; at 1e-8 a line search may find no lower point, one rounding apart)
        got = jt.minimize(full, p0, value_and_grad=vg, args=(Xd, yd), tol=1e-6)
        adam = jt.minimize(full, p0, "adam", learning_rate=0.1, steps=2, value_and_grad=vg,
                           args=(Xd, yd))
        with pytest.raises(jt.UnsupportedError, match=r"argument 0 \(w\) holds a traced tensor"):
            jt.function(lambda c: vg({"coef": c, "bias": 0.0}, Xd, yd)[0])(p0["coef"])
    want = jt.minimize(full, p0, value_and_grad=jt.value_and_grad(full),
                       args=(X[:200], y[:200]), tol=1e-6)
    assert got.success and want.success and adam.nit == 2
    np.testing.assert_allclose(got.x["coef"], want.x["coef"], atol=1e-6)


def test_data_that_is_not_a_top_level_dask_argument_is_refused(data):
    X, y = data
    Xd, yd = _dask_data(X, y)
    w = np.zeros(D)

    def in_a_dict(w, X, d):
        return mean_logloss(w, X, d["y"])

    def captured(w, X):
        return mean_logloss(w, X, yd)

    with dask.config.set(scheduler="sync"):
        with pytest.raises(TypeError, match=r"argument 2 \(d\) holds a dask array of shape "
                           r"\(1001,\) at \['y'\]; data must be top-level.*test_dask"):
            jt.dask.value_and_grad(in_a_dict)(w, Xd, {"y": yd})
        with pytest.raises(TypeError, match=r"reads the dask array yd \(closure\) of shape "
                           r"\(1001,\).*top-level arguments.*test_dask"):
            jt.dask.value_and_grad(captured)(w, Xd)
        with pytest.raises(jt.ShapeError, match=r"argument 2 \(y\) is a NumPy array of shape "
                           r"\(1001,\), as many rows as the data.*should be a dask array"):
            jt.dask.value_and_grad(mean_logloss)(w, Xd, y)
        with pytest.raises(TypeError, match=r"jt.dask.value_and_grad\(<lambda>\): the loss must "
                           r"return a scalar.*shape \(300,\).*data \(argument 1 \(X\) of shape "
                           r"\(1001, 5\)\)"):
            jt.dask.value_and_grad(lambda w, X: X @ w)(w, Xd)


def test_a_kernel_error_of_another_constructor_keeps_its_type_or_its_text():
    from jittape.dask import worker

    class TwoArguments(Exception):
        def __init__(self, code, text):
            super().__init__(code, text)

    err = worker._located(ValueError("bad"), "f(loss): chunk 3: bad", "user.py:7")
    assert type(err) is ValueError and str(err) == "f(loss): chunk 3: bad (at user.py:7)"
    original = TwoArguments(5, "bad")
    err = worker._located(original, "f(loss): chunk 3: bad", "user.py:7")
    assert err is original and err.__notes__ == ["f(loss): chunk 3: bad (at user.py:7)"]


def test_import_is_lazy_and_says_what_to_install():
    code = ("import sys, jittape\n"
            "assert 'dask' not in sys.modules\n"
            "assert jittape.dask.value_and_grad and 'dask' not in sys.modules\n"
            "sys.modules['dask'] = None\n"
            "try:\n"
            "    jittape.dask.value_and_grad(lambda w, X: (w * X).sum())\n"
            "except ImportError as err:\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'jittape[dask]'" in out.stdout


def _scale(client, n):
    client.cluster.scale(n)
    deadline = time.monotonic() + 60
    while len(client.scheduler_info(n_workers=-1)["workers"]) != n:
        assert time.monotonic() < deadline, f"the cluster did not reach {n} workers"
        time.sleep(0.05)


def test_bitwise_the_same_for_any_number_of_workers(client, data):
    X, y = data
    chunks = (150, 150, 150, 150, 150, 150, 100, 1)
    Xd, yd = _dask_data(X, y, chunks)
    w = np.linspace(-0.3, 0.3, D)
    vg = jt.dask.value_and_grad(mean_logloss, reduce="mean", regularizer=ridge)
    results = {"2 processes": vg(w, Xd, yd)}
    for n in (3, 1):
        _scale(client, n)
        results[f"{n} processes"] = vg(w, Xd, yd)
        # persisted: one task per worker, its chunks' partial results in chunk order
        Xp, yp = Xd.persist(), yd.persist()
        distributed.wait([Xp, yp])
        grouped, called = [], []
        by_worker, on_runners = vg._by_worker, vg._on_runners
        vg._by_worker = lambda *a: grouped.append(by_worker(*a)) or grouped[-1]
        vg._on_runners = lambda *a: called.append(on_runners(*a)) or called[-1]
        try:
            results[f"{n} processes, persisted"] = vg(w, Xp, yp)
            # (a chunk whose X and y blocks were on two workers went as a task, which
            # copied y's next to X's: the runners take it now)
            results[f"{n} processes, persisted, again"] = vg(w, Xp, yp)
            results[f"{n} processes, persisted, kept"] = vg(w, Xp, yp)
        finally:
            del vg._by_worker, vg._on_runners
        assert grouped[0] is not None and len(grouped[0]) == len(chunks)
        assert any(c is not None for c in called[1:])     # the workers' runners did it
        assert len(client.scheduler_info(n_workers=-1)["workers"]) == n
    for scheduler, workers in (("threads", 3), ("sync", 1), ("processes", 2)):
        with dask.config.set(scheduler=scheduler, num_workers=workers):
            results[f"{scheduler} {workers}"] = vg(w, Xd, yd)
    _scale(client, 2)
    value, grad = results["2 processes"]
    for name, (v, g) in results.items():
        assert v == value and np.array_equal(g, grad), name
