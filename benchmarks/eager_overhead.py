"""Eager-tape overhead: record + gradient on the seed examples.

    python benchmarks/eager_overhead.py [--repeat 7] [--number 5000] [--out PATH]

Times, side by side in one process, the seed toy function ``3*w1**2 + 2*w1*w2``
(gradient of both variables) and the seed linear example (``x @ w + b``, mean of
squares, gradient of w and b), and writes the medians to
``benchmarks/results/eager_overhead.json``.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jittape as jt  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def toy_workload():
    w1, w2 = jt.Variable(5.), jt.Variable(3.)

    def step():
        with jt.GradientTape() as tape:
            z = 3 * w1 ** 2 + 2 * w1 * w2
        return tape.gradient(z, [w1, w2])

    return step


def linear_workload():
    jt.random.set_seed(1)
    w = jt.Variable(jt.random.uniform((4, 3), minval=-20, maxval=20), name="w")
    b = jt.Variable(jt.ones(3), name="b")
    x = jt.constant([[1., 2., 3., 4.]])

    def step():
        with jt.GradientTape() as tape:
            y = x @ w + b
            loss = jt.reduce_mean(y ** 2)
        return tape.gradient(loss, [w, b])

    return step


def numpy_toy():
    """The same arithmetic on NumPy scalars, by hand: the floor for Python code."""
    w1, w2 = np.float32(5.), np.float32(3.)

    def step():
        z = 3 * w1 ** 2 + 2 * w1 * w2
        return [6 * w1 + 2 * w2, 2 * w1], z

    return step


def measure(step, repeat, number):
    step()
    runs = timeit.repeat(step, number=number, repeat=repeat)
    per_call = [r / number * 1e6 for r in runs]
    return {"median_us": statistics.median(per_call), "min_us": min(per_call)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--out", default=os.path.join(RESULTS, "eager_overhead.json"))
    args = parser.parse_args(argv)

    results = {
        "seed_toy": measure(toy_workload(), args.repeat, args.number),
        "seed_linear": measure(linear_workload(), args.repeat, args.number),
        "numpy_toy_by_hand": measure(numpy_toy(), args.repeat, args.number),
    }
    report = {
        "benchmark": "eager tape: record + gradient",
        "target_us": {"seed_toy": 50.0},
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count()},
        "jittape": jt.__version__,
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    for name, r in results.items():
        print(f"{name:20s} median {r['median_us']:8.1f} us   min {r['min_us']:8.1f} us")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
