"""``python -m jittape demo``: the seed tutorials' examples, run on jittape's eager tape."""

import argparse
import sys
import timeit
import warnings


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
    print("[+] tensor_y:       ", y)
    print("[+] tensor_loss:    ", loss)
    print("[+] tensor_dy_dx:   ", tape.gradient(y, x))
    print("[+] tensor_dloss_dy:", tape.gradient(loss, y))
    print("[+] tensor_dloss_dx:", tape.gradient(loss, x))
    print("[+] watched variables:", [v.name for v in tape.watched_variables()])

    _section("Dense layers")
    layer1 = jt.nn.Dense(2, activation="relu", name="dense_1")
    layer2 = jt.nn.Dense(4, activation="relu", name="dense_2")
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(layer2(layer1(jt.constant([[1., 2., 3.]]))) ** 2)
    variables = layer1.trainable_variables + layer2.trainable_variables
    for v, g in zip(variables, tape.gradient(loss, variables)):
        print(f"[+] variable name, shape: {v.name}, {g.shape}")

    _section("Eager tape overhead (seed toy: record + gradient)")

    def step():
        with jt.GradientTape() as tape:
            z = f(w1, w2)
        return tape.gradient(z, [w1, w2])

    n = 2000
    best = min(timeit.repeat(step, number=n, repeat=5)) / n * 1e6
    print(f"{best:.1f} us per record + gradient")


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
    sub.add_parser("demo", help="run the seed tutorials' examples on the eager tape and "
                   "compiled, fit a small model, time eager against compiled steps")
    sub.add_parser("bench", add_help=False,
                   help="benchmark jittape against references and other frameworks "
                        "(python -m jittape bench --help)")
    if argv[:1] == ["bench"]:
        return bench(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
