"""Eager-tape overhead: record + gradient on the seed examples.

    python benchmarks/eager_overhead.py [--repeat 7] [--number 5000] [--out PATH]

Times, side by side in one process, the seed toy function ``3*w1**2 + 2*w1*w2``
(gradient of both variables) and the seed linear example (``x @ w + b``, mean of
squares, gradient of w and b), and writes the medians to
``benchmarks/results/eager_overhead.json``.

The toy is also timed on PyTorch's eager autograd and HIPS autograd when they are
installed (extra ``peers``). The repeats of all workloads are interleaved, so a noisy
machine slows them alike and the ratios hold even when the absolute times drift.
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


def torch_toy():
    """PyTorch's eager autograd on the toy (None when PyTorch is not installed)."""
    try:
        import torch
    except ImportError:
        return None
    w1 = torch.tensor(5., requires_grad=True)
    w2 = torch.tensor(3., requires_grad=True)

    def step():
        z = 3 * w1 ** 2 + 2 * w1 * w2
        return torch.autograd.grad(z, [w1, w2])

    assert [float(g) for g in step()] == [36.0, 10.0]
    return step


def autograd_toy():
    """HIPS autograd on the toy (None when it is not installed)."""
    try:
        import autograd
    except ImportError:
        return None
    grad = autograd.grad(lambda w: 3 * w[0] ** 2 + 2 * w[0] * w[1])
    w = np.array([5., 3.], np.float32)

    def step():
        return grad(w)

    assert step().tolist() == [36.0, 10.0]
    return step


def measure_all(steps, repeat, number):
    """Time each step ``repeat`` times, interleaving the workloads round by round."""
    times = {name: [] for name in steps}
    for step in steps.values():
        step()
    for _ in range(repeat):
        for name, step in steps.items():
            times[name].append(timeit.timeit(step, number=number) / number * 1e6)
    return {name: {"median_us": statistics.median(t), "min_us": min(t)}
            for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--out", default=os.path.join(RESULTS, "eager_overhead.json"))
    args = parser.parse_args(argv)

    steps = {
        "seed_toy": toy_workload(),
        "seed_linear": linear_workload(),
        "numpy_toy_by_hand": numpy_toy(),
        "torch_eager_toy": torch_toy(),
        "hips_autograd_toy": autograd_toy(),
    }
    missing = [name for name, step in steps.items() if step is None]
    results = measure_all({k: v for k, v in steps.items() if v is not None},
                          args.repeat, args.number)
    ratios = {f"seed_toy / {name}": results["seed_toy"]["median_us"] / results[name]["median_us"]
              for name in ("torch_eager_toy", "hips_autograd_toy") if name in results}
    report = {
        "benchmark": "eager tape: record + gradient",
        "target_us": {"seed_toy": 50.0},
        "not_installed": missing,
        "median_ratios": ratios,
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
    for name, r in ratios.items():
        print(f"{name:38s} {r:6.2f}")
    if missing:
        print("not installed:", ", ".join(missing))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
