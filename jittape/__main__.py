"""``python -m jittape demo``: gradient examples on the eager tape and compiled,
a small model fitted with a compiled training step, eager against compiled time per
gradient step, and a plot. ``python -m jittape bench``: the benchmark against references
and other frameworks (``benchmarks/runner.py``). ``python -m jittape warmup``: compile
jittape's runtime helpers ahead. ``python -m jittape cache info|clear``: where the disk
cache is and what it holds, or empty it."""

import argparse
import os
import sys
import time
import timeit
import warnings

import numpy as np


def _section(title):
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def demo():
    import jittape as jt

    def f(w1, w2):
        return 3 * w1 ** 2 + 2 * w1 * w2

    _section("Gradients with a tape: f(w1, w2) = 3*w1**2 + 2*w1*w2 at (5, 3)")
    w1, w2 = jt.Variable(5.), jt.Variable(3.)
    with jt.GradientTape() as tape:
        z = f(w1, w2)
    print("gradients:", tape.gradient(z, [w1, w2]))
    eps = 1e-6
    print("finite differences:", (f(5 + eps, 3) - f(5, 3)) / eps, (f(5, 3 + eps) - f(5, 3)) / eps)

    _section("A non-persistent tape is used once")
    with jt.GradientTape() as tape:
        z = f(w1, w2)
    print("dz/dw1:", tape.gradient(z, w1))
    try:
        tape.gradient(z, w2)
    except RuntimeError as err:
        print("second call: RuntimeError:", err)
    with jt.GradientTape(persistent=True) as tape:
        z = f(w1, w2)
    print("persistent tape:", tape.gradient(z, w1), tape.gradient(z, w2))

    _section("Constants are not watched unless asked")
    c1, c2 = jt.constant(5.), jt.constant(3.)
    with jt.GradientTape() as tape:
        z = f(c1, c2)
    print("unwatched:", tape.gradient(z, [c1, c2]))
    with jt.GradientTape() as tape:
        tape.watch([c1, c2])
        z = f(c1, c2)
    print("watched:  ", tape.gradient(z, [c1, c2]))

    _section("stop_gradient, Hessians, custom gradients")
    with jt.GradientTape() as tape:
        z = 3 * w1 ** 2 + jt.stop_gradient(2 * w1 * w2)
    print("with stop_gradient:", tape.gradient(z, [w1, w2]))
    with jt.GradientTape(persistent=True) as outer:
        with jt.GradientTape() as inner:
            z = f(w1, w2)
        jacobians = inner.gradient(z, [w1, w2])
    print("Hessians:", [[None if h is None else float(h) for h in outer.gradient(j, [w1, w2])]
                        for j in jacobians])
    print("  (None: d2f/dw2^2 is unconnected, f being linear in w2; the tape says None as "
          "TensorFlow does, jt.hessian below gives 0.0)")
    x = jt.Variable([100.])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with jt.GradientTape() as tape:
            naive = jt.log(jt.exp(x) + 1.0)
        print("naive softplus gradient at 100:", tape.gradient(naive, x))
    with jt.GradientTape() as tape:
        stable = jt.softplus(x)
    print("stable softplus gradient at 100:", tape.gradient(stable, x))

    _section("The linear example: y = x @ w + b, loss = mean(y**2)")
    jt.random.set_seed(1)
    w = jt.Variable(jt.random.uniform((4, 3), minval=-20, maxval=20), name="w")
    b = jt.Variable(jt.ones(3), name="b")
    print(repr(w))
    x = jt.Variable([[1, 2, 3, 4]], dtype=jt.float32, name="x")
    with jt.GradientTape(persistent=True) as tape:
        y = x @ w + b
        loss = jt.reduce_mean(y ** 2)
    print("y:         ", y)
    print("loss:      ", loss)
    print("dy/dx:     ", tape.gradient(y, x))
    print("dloss/dy:  ", tape.gradient(loss, y))
    print("dloss/dx:  ", tape.gradient(loss, x))
    print("watched variables:", [v.name for v in tape.watched_variables()])

    _section("Dense layers")
    layer1 = jt.nn.Dense(2, activation="relu", name="dense_1")
    layer2 = jt.nn.Dense(4, activation="relu", name="dense_2")
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(layer2(layer1(jt.constant([[1., 2., 3.]]))) ** 2)
    variables = layer1.trainable_variables + layer2.trainable_variables
    for v, g in zip(variables, tape.gradient(loss, variables)):
        print(f"gradient of {v.name}: shape {g.shape}")

    _section("Eager tape overhead (f above: record + gradient)")

    def step():
        with jt.GradientTape() as tape:
            z = f(w1, w2)
        return tape.gradient(z, [w1, w2])

    n = 2000
    best = min(timeit.repeat(step, number=n, repeat=5)) / n * 1e6
    print(f"{best:.1f} us per record + gradient")
    return {"f": f, "linear": (w.numpy(), b.numpy(), x.numpy())}


def compiled_examples(seeds):
    """The examples again, compiled: the same numbers from one native call."""
    import jittape as jt

    _section("The same, compiled (jt.grad, jt.hessian, jt.value_and_grad)")
    f = seeds["f"]
    grad_f = jt.grad(f, argnums=(0, 1))
    print("compiled gradients at (5, 3):", [float(g) for g in grad_f(np.float32(5), np.float32(3))])
    hess = jt.hessian(f, argnums=(0, 1))(np.float32(5), np.float32(3))
    print("compiled Hessian:", [[float(h) for h in row] for row in hess])

    def linear_loss(w, b, x):
        return jt.reduce_mean((x @ w + b) ** 2)

    w, b, x = seeds["linear"]
    loss, (dw, db, dx) = jt.value_and_grad(linear_loss, argnums=(0, 1, 2))(w, b, x)
    print("compiled loss:     ", loss)
    print("compiled dloss/dx: ", dx)
    print("compiled dloss/db: ", db)


def _moons(n, rng):
    """Two interleaved half circles with noise: a small problem a line cannot separate."""
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    points = np.stack([x, y], axis=1) + rng.normal(0, 0.2, (n, 2))
    return points.astype(np.float32), upper.astype(np.int32)


def mlp_loss(params, x, labels):
    """A 2-16-16-2 tanh network with softmax cross-entropy."""
    import jittape as jt
    h = jt.tanh(x @ params["W1"] + params["b1"])
    h = jt.tanh(h @ params["W2"] + params["b2"])
    logits = h @ params["W3"] + params["b3"]
    return jt.reduce_mean(jt.sparse_softmax_cross_entropy(labels, logits))


def _init(rng):
    def glorot(m, n):
        return rng.uniform(-1, 1, (m, n)).astype(np.float32) * np.float32(np.sqrt(6 / (m + n)))
    return {"W1": glorot(2, 16), "b1": np.zeros(16, np.float32),
            "W2": glorot(16, 16), "b2": np.zeros(16, np.float32),
            "W3": glorot(16, 2), "b3": np.zeros(2, np.float32)}


def _progress(step, steps, loss, width=30):
    """A progress bar with the loss: redrawn in place on a terminal, a line per tenth of
    the steps in a log."""
    done = int(width * step / steps)
    bar = f"[{'#' * done}{'.' * (width - done)}] step {step:4d}/{steps}  loss {loss:.4f}"
    if sys.stdout.isatty():
        sys.stdout.write("\r" + bar + ("\n" if step == steps else ""))
    elif step % max(1, steps // 10) == 0 or step == steps:
        sys.stdout.write(bar + "\n")
    sys.stdout.flush()


def fit(steps=400, lr=0.02):
    """Fit the MLP on two moons with Adam and a compiled ``value_and_grad``; return the
    loss curve and the training accuracy."""
    import jittape as jt

    _section("Fitting a 2-16-16-2 MLP on two moons, compiled training step (Adam)")
    rng = np.random.default_rng(0)
    x, labels = _moons(512, rng)
    params = _init(rng)
    step_fn = jt.value_and_grad(mlp_loss)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    b1, b2, eps = 0.9, 0.999, 1e-8
    losses = []
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        loss, grads = step_fn(params, x, labels)
        for k, g in grads.items():
            m[k] = b1 * m[k] + (1 - b1) * g
            v[k] = b2 * v[k] + (1 - b2) * g * g
            update = lr * (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + eps)
            params[k] = (params[k] - update).astype(np.float32)
        losses.append(float(loss))
        _progress(t, steps, losses[-1])
    elapsed = time.perf_counter() - t0
    h = np.tanh(x @ params["W1"] + params["b1"])
    h = np.tanh(h @ params["W2"] + params["b2"])
    accuracy = float(np.mean(np.argmax(h @ params["W3"] + params["b3"], axis=1) == labels))
    info = step_fn.cache_info()
    print(f"{steps} steps in {elapsed:.2f} s (the first call traced it; the kernel compiled "
          "in the background, or came from the disk cache); "
          f"final loss {losses[-1]:.4f}, training accuracy {accuracy:.1%}")
    print(f"cache: {info.traces} trace, {info.compiles} compile, {info.disk_hits} loaded from "
          f"disk; {info.python_calls} steps ran on NumPy while the kernel compiled, "
          f"{info.hits} on the kernel")
    return losses, accuracy


def _per_call(step, seconds=0.2, repeat=5):
    """Best time per call (seconds) over ``repeat`` loops of about ``seconds`` each."""
    step()
    number = 1
    while True:
        t = timeit.timeit(step, number=number)
        if t > seconds / 4 or number >= 1 << 20:
            break
        number *= 4
    number = max(1, int(number * seconds / 4 / max(t, 1e-9)))
    return min(timeit.repeat(step, number=number, repeat=repeat)) / number


def timing_table(seeds):
    """Time per gradient step, eager tape against compiled, printed as a table."""
    import jittape as jt

    _section("Time per gradient step: eager tape vs compiled (best of 5)")
    f = seeds["f"]
    w, b, x = seeds["linear"]
    rng = np.random.default_rng(1)
    points, labels = _moons(512, rng)
    params = _init(rng)

    def linear_loss(w, b, x):
        return jt.reduce_mean((x @ w + b) ** 2)

    def eager(loss, args, argnums):
        def step():
            leaves = [jt.tree.map_leaves(jt.Variable, a) if k in argnums else a
                      for k, a in enumerate(args)]
            with jt.GradientTape() as tape:
                value = loss(*leaves)
            return tape.gradient(value, [leaves[k] for k in argnums])
        return step

    rows = []
    for name, loss, args, argnums in (
            ("toy f(w1, w2)", f, (np.float32(5), np.float32(3)), (0, 1)),
            ("linear, 1x4 @ 4x3", linear_loss, (w, b, x), (0, 1, 2)),
            ("MLP 2-16-16-2, batch 512", mlp_loss, (params, points, labels), (0,))):
        compiled = jt.value_and_grad(loss, argnums=argnums)
        t0 = time.perf_counter()
        compiled(*args)
        compiled.kernel(*args)     # (a tiered first call returns before its kernel is ready)
        first = time.perf_counter() - t0
        t_eager = _per_call(eager(loss, args, argnums))
        t_compiled = _per_call(lambda: compiled(*args))
        rows.append((name, t_eager, t_compiled, first))
    print(f"{'workload':28s} {'eager':>12s} {'compiled':>12s} {'speed-up':>9s} {'first call':>11s}")
    for name, t_eager, t_compiled, first in rows:
        print(f"{name:28s} {t_eager * 1e6:9.1f} us {t_compiled * 1e6:9.1f} us "
              f"{t_eager / t_compiled:8.1f}x {first:9.2f} s")
    print("(first call: trace, differentiate, generate and compile, or load from the disk cache)")
    from jittape.codegen.helpers_cache import helpers_dir
    from jittape.codegen.linkage import TIMES
    for (label, key), seconds in TIMES.items():      # what a first run on a machine costs
        how = ("compiled, once for this machine" if seconds > 1.0 else
               "loaded, compiled by an earlier run")
        print(f"jittape's runtime helpers ({label} for {key}): {seconds:.1f} s in this process, "
              f"{how} (kept in {helpers_dir()})")
    return rows


def pyplot():
    """matplotlib's pyplot on a backend that needs no screen, or None (and says so) when
    matplotlib is not installed: the demo and the benchmark runner plot to files."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[demo]'): no plot written")
        return None
    return plt


def plot(path, losses):
    """The loss curve, and the example functions with their gradients."""
    import jittape as jt
    plt = pyplot()
    if plt is None:
        return None
    x1 = jt.Variable(np.linspace(-15.0, 15.0, 151, dtype=np.float32))
    x2 = jt.Variable(np.linspace(-15.0, 15.0, 151, dtype=np.float32))
    with jt.GradientTape(persistent=True) as tape:
        res1 = 4 * x1 ** 2 + 3
        res2 = x2 ** 3
    d1, d2 = tape.gradient(res1, x1), tape.gradient(res2, x2)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].plot(np.arange(1, len(losses) + 1), losses)
    axes[0].set(title="MLP on two moons: training loss", xlabel="step", ylabel="loss", yscale="log")
    axes[1].plot(x1.numpy(), res1.numpy(), label="res1 = 4*x1**2 + 3")
    axes[1].plot(x1.numpy(), d1.numpy(), label="dres1/dx1")
    axes[2].plot(x2.numpy(), res2.numpy(), label="res2 = x2**3")
    axes[2].plot(x2.numpy(), d2.numpy(), label="dres2/dx2")
    axes[1].set(title="A function and its gradient (tape)", ylabel="value")
    axes[2].set(title="A cubic and its gradient (tape)", ylabel="value")
    for ax in axes[1:]:
        ax.set(xlabel="x")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot written to {os.path.abspath(path)}")
    return path


def run_demo(plot_path):
    seeds = demo()
    compiled_examples(seeds)
    losses, _ = fit()
    timing_table(seeds)
    _section("Plot")
    plot(plot_path, losses)


def _benchmarks_dir():
    """The repository's ``benchmarks/`` folder (workloads and the runner live there, next
    to their results), or a clear error for an installation without it."""
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(here, "benchmarks")
    if not os.path.isfile(os.path.join(path, "runner.py")):
        raise SystemExit("python -m jittape bench runs the workloads of the repository's "
                         "benchmarks/ folder, which this installation does not have: "
                         "clone the repository and install it with pip install -e .")
    return path


def bench(argv):
    path = _benchmarks_dir()
    if path not in sys.path:
        sys.path.insert(0, path)
    import runner
    return runner.main(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m jittape", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="run gradient examples on the eager "
                                 "tape and compiled, fit a small model, time eager against "
                                 "compiled steps, write a plot")
    demo_parser.add_argument("--plot", default="jittape_demo.png",
                             help="where to write the plot (default: %(default)s)")
    sub.add_parser("bench", add_help=False,
                   help="benchmark jittape against references and other frameworks "
                        "(python -m jittape bench --help)")
    warm = sub.add_parser("warmup", help="compile jittape's runtime helpers now (about 10 s a "
                          "dtype, once per machine), so that no first call waits for them")
    warm.add_argument("--dtypes", default="float32,float64",
                      help="comma-separated (default: %(default)s)")
    cache = sub.add_parser("cache", help="the disk cache: where it is and what it holds "
                           "(info), or empty it (clear)")
    cache.add_argument("action", choices=("info", "clear"))
    if argv[:1] == ["bench"]:
        return bench(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "demo":
        run_demo(args.plot)
    elif args.command == "warmup":
        return run_warmup(args.dtypes.split(","))
    elif args.command == "cache":
        return run_cache(args.action)
    return 0


def run_warmup(dtypes):
    import jittape as jt
    from jittape.codegen.helpers_cache import helpers_dir
    try:
        seconds = jt.warmup(dtypes)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    print(f"jittape's runtime helpers for {', '.join(dtypes)} are ready ({seconds:.1f} s); "
          f"kept in {helpers_dir()}")
    return 0


def _size(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def run_cache(action):
    from jittape.codegen import build
    if action == "clear":
        report = build.clear_cache()
        print(f"removed {report['entries']} compiled functions ({_size(report['bytes'])}) and "
              f"the runtime helpers' machine code ({_size(report['helpers_bytes'])})")
        return 0
    report = build.cache_report()
    if report["path"] is None:
        print("disk cache: off (JITTAPE_CACHE_DIR is empty or jt.config.disk_cache is False)")
    else:
        print(f"disk cache: {report['path']}")
        print(f"  compiled functions: {report['entries']} ({_size(report['bytes'])})")
    print(f"runtime helpers: {report['helpers_path']} ({_size(report['helpers_bytes'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
