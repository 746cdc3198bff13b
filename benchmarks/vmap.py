"""Per-example gradients: ``jt.vmap(jt.grad(loss))`` against JAX, PyTorch and loops.

    python benchmarks/vmap.py [--batches 64,512,4096] [--json PATH]

The loss is a one-hidden-layer tanh network's squared error for one example (input 32,
hidden 64, output 4, float64), differentiated with respect to its weights, mapped over
a batch of examples (weights shared, ``in_axes=(None, 0, 0)``). Columns:

* ``jittape``: ``jt.vmap(jt.grad(loss), in_axes=(None, 0, 0))``, one compiled call;
* ``jittape_loop``: a Python loop of ``jt.grad(loss)`` calls, one per example (the
  smallest batch only: it is the cost vmap removes);
* ``jax``: ``jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))``;
* ``torch``: ``torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))``, eager.

Each system runs in its own process on one core with one thread (``timing``), on the
same data; ``first_s`` is the first call (tracing and compiling included; jittape's
first call may run on NumPy while its kernel compiles, ``jt.config.tiered``), ``us`` the
median of interleaved timings after a call has waited for the kernel. Every result is
checked against a NumPy loop of hand-written gradients (rtol 1e-9).
Results: ``benchmarks/results/vmap.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import timing

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (32, 64, 4)


def data(batch):
    import numpy as np
    rng = np.random.default_rng(0)
    n_in, n_hidden, n_out = SIZES
    params = [rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in),
              rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden)]
    return params, rng.standard_normal((batch, n_in)), rng.standard_normal((batch, n_out))


def by_hand(params, x, t):
    """Per-example gradients written with NumPy: the reference."""
    import numpy as np
    w1, w2 = params
    h = np.tanh(x @ w1)                       # (B, H)
    r = 2 * (h @ w2 - t)                      # (B, O)
    g2 = h[:, :, None] * r[:, None, :]        # (B, H, O)
    dh = (r @ w2.T) * (1 - h * h)             # (B, H)
    g1 = x[:, :, None] * dh[:, None, :]       # (B, I, H)
    return [g1, g2]


def run_system(system, batch):
    """Time one system in this process; returns its row."""
    import numpy as np
    timing.pin_cores(1)
    params, x, t = data(batch)
    if system.startswith("jittape"):
        import jittape as jt

        def loss(params, x, t):
            w1, w2 = params
            return jt.sum((jt.tanh(x @ w1) @ w2 - t) ** 2)
        if system == "jittape":
            f = jt.vmap(jt.grad(loss), in_axes=(None, 0, 0))
            call = lambda: f(params, x, t)                                  # noqa: E731
        else:
            g = jt.grad(loss)
            call = lambda: [np.stack(c) for c in zip(*[g(params, x[i], t[i])  # noqa: E731
                                                     for i in range(batch)])]
    elif system == "jax":
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def loss(params, x, t):
            w1, w2 = params
            return jnp.sum((jnp.tanh(x @ w1) @ w2 - t) ** 2)
        f = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
        jp, jx, jt_ = [jnp.asarray(p) for p in params], jnp.asarray(x), jnp.asarray(t)
        call = lambda: [np.asarray(g) for g in jax.block_until_ready(f(jp, jx, jt_))]  # noqa: E731
    else:
        import torch
        torch.set_num_threads(1)
        from torch.func import grad, vmap

        def loss(params, x, t):
            w1, w2 = params
            return torch.sum((torch.tanh(x @ w1) @ w2 - t) ** 2)
        f = vmap(grad(loss), in_dims=(None, 0, 0))
        tp = [torch.from_numpy(p) for p in params]
        tx, tt = torch.from_numpy(x), torch.from_numpy(t)
        call = lambda: [g.numpy() for g in f(tp, tx, tt)]                    # noqa: E731
    start = time.perf_counter()
    got = call()
    first = time.perf_counter() - start
    if system == "jittape":                     # (wait for a compile still running)
        f.compiled.kernel(params, x, t)
    elif system == "jittape_loop":
        g.kernel(params, x[0], t[0])
    want = by_hand(params, x, t)
    ok = all(np.allclose(np.asarray(a), b, rtol=1e-9, atol=1e-12) for a, b in zip(got, want))
    times, _ = timing.measure({"step": call}, repeat=7, seconds=0.2)
    return {"system": system, "batch": batch, "first_s": first,
            "us": sorted(times["step"])[len(times["step"]) // 2], "correct": ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="64,512,4096")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "vmap.json"))
    parser.add_argument("--point", help=argparse.SUPPRESS)      # system:batch, in a child
    args = parser.parse_args()
    if args.point:
        system, batch = args.point.split(":")
        print(json.dumps(run_system(system, int(batch))))
        return 0
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    env = timing.pin_threads(1, dict(os.environ))
    for batch in batches:
        systems = ["jittape", "jax", "torch"] + (["jittape_loop"] if batch == batches[0] else [])
        for system in systems:
            env["JITTAPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="jittape-vmap-bench-")
            run = subprocess.run([sys.executable, __file__, "--point", f"{system}:{batch}"],
                                 capture_output=True, text=True, env=env, timeout=900)
            if run.returncode != 0:
                rows.append({"system": system, "batch": batch, "error": run.stderr[-2000:]})
                print(f"{system:13} batch {batch:5}: failed\n{run.stderr[-600:]}")
                continue
            row = json.loads(run.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{system:13} batch {batch:5}: {row['us']:12.1f} us   first call "
                  f"{row['first_s']:6.2f} s   correct {row['correct']}")
    import jittape as jt
    out = {"machine": timing.machine_info(jt), "sizes": SIZES, "rows": rows,
           "note": "one core, one thread per process; us = median of 7 interleaved timings"}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"written to {args.json}")
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
