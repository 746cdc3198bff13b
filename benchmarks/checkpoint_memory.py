"""Peak memory of a scan's gradient, with and without checkpointing.

A scan of ``--steps`` steps over a state of ``--size`` float64 elements (an explicit
integrator step, elementwise: ``h + dt * tanh(a * h + x_t)``), differentiated in
reverse mode with respect to ``a`` and the initial state. Each policy runs in a fresh
process: the compiled gradient is called once (compile), the process's peak resident
set (``VmHWM``) is reset (``/proc/self/clear_refs``), and the second call's peak above
the resident set before it is the call's own peak. The gradients of all policies must
agree. Results: ``benchmarks/results/checkpoint_memory.json``.

    python benchmarks/checkpoint_memory.py [--steps 10000] [--size 10000]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time
import numpy as np
import jittape as jt

steps, size, policy = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)

def loss(a, h0, xs):
    def step(h, x):
        return h + 0.01 * jt.tanh(a * h + x), None
    h, _ = jt.scan(step, h0, xs, checkpoint=policy)
    return jt.sum(h * h)

rng = np.random.default_rng(0)
a = np.float64(0.9)
h0 = rng.normal(size=size)
xs = rng.normal(size=(steps, size)) * 0.1
vg = jt.value_and_grad(loss, argnums=(0, 1))
t = time.perf_counter()
vg(a, h0, xs)
first = time.perf_counter() - t
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t = time.perf_counter()
value, (ga, gh) = vg(a, h0, xs)
call = time.perf_counter() - t
peak = status("VmHWM") - before
print(json.dumps({"policy": policy, "first_call_s": first, "call_s": call,
                  "peak_bytes": peak, "value": float(value), "grad_a": float(ga),
                  "grad_h0_norm": float(np.linalg.norm(gh))}))
"""


def run(steps, size, policy):
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(size), json.dumps(policy)],
                         capture_output=True, text=True, timeout=1200)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--size", type=int, default=10000)
    args = parser.parse_args()
    k = max(1, int(round(args.steps ** 0.5)))
    rows = [run(args.steps, args.size, policy) for policy in (None, True, k)]
    base = rows[0]
    for row in rows:
        row["peak_ratio_to_stored"] = row["peak_bytes"] / base["peak_bytes"]
        agree = (abs(row["grad_a"] - base["grad_a"]) <= 1e-9 * abs(base["grad_a"]) and
                 abs(row["grad_h0_norm"] - base["grad_h0_norm"]) <= 1e-9 * base["grad_h0_norm"])
        row["same_gradient"] = bool(agree)
    print(f"scan of {args.steps} steps over {args.size} float64 elements, value_and_grad:")
    print(f"{'checkpoint':>12} {'peak MB':>9} {'ratio':>7} {'call s':>7} {'first s':>8} same")
    for row in rows:
        print(f"{str(row['policy']):>12} {row['peak_bytes'] / 2**20:9.1f} "
              f"{row['peak_ratio_to_stored']:7.3f} {row['call_s']:7.3f} {row['first_call_s']:8.2f} "
              f"{row['same_gradient']}")
    result = {"steps": args.steps, "size": args.size, "date": time.strftime("%Y-%m-%d"),
              "cpus": os.cpu_count(), "rows": rows}
    path = os.path.join(HERE, "results", "checkpoint_memory.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print("written", path)


if __name__ == "__main__":
    main()
