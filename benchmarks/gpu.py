"""The CUDA target on a GPU: jittape compiled for CUDA against jittape compiled for the
CPU, JAX ``jit(value_and_grad)`` and PyTorch autograd on the same GPU, in one run.

Workloads (float32): the MLP loss of ``workloads.py`` (784-128-10, ReLU, sparse softmax
cross-entropy) at batch 4096, and the elementwise chain
``sum(softplus(x)*tanh(x) + exp(-x*x))`` on 10^7 values. Matrix products are float32 everywhere
(TF32 off in JAX and PyTorch). Steady-state time per gradient call: medians of ``--repeat`` timed loops of ``--number`` calls after warm-up, each
loop ended by a device synchronization. Every system's gradient is checked against
jittape's CPU result before it is timed. The run also counts device allocations per
call of jittape's CUDA calls after the first, on host and on device arguments (results on
the device come from a pool that reuses the arrays a loop drops).

    python benchmarks/gpu.py [--repeat 7] [--number 20] [--out benchmarks/results/gpu.json]

Needs a GPU (it refuses to run in the CUDA simulator); JAX and PyTorch are timed when
installed.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jittape as jt  # noqa: E402
from jittape.codegen import cuda_runtime  # noqa: E402
from workloads import chain_loss, mlp_loss  # noqa: E402

F32 = np.float32


def mlp_data(batch=4096):
    rng = np.random.default_rng(20240601)

    def glorot(fan_in, fan_out):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(F32)

    params = {"W1": glorot(784, 128), "b1": rng.normal(0, 0.1, 128).astype(F32),
              "W2": glorot(128, 10), "b2": rng.normal(0, 0.1, 10).astype(F32)}
    x = rng.random((batch, 784), dtype=F32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    return params, x, labels


def chain_data(n=10 ** 7):
    return ((2.0 * np.random.default_rng(3).standard_normal(n)).astype(F32),)


def timed(step, sync, repeat, number):
    """Median and minimum seconds per call over ``repeat`` loops of ``number`` calls
    (fewer calls per loop for a step that takes over 10 ms)."""
    t0 = time.perf_counter()
    step()
    sync()
    number = max(1, min(number, int(0.01 * number / max(time.perf_counter() - t0, 1e-9))))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            step()
        sync()
        times.append((time.perf_counter() - t0) / number)
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times)}


def flat_grads(g):
    if isinstance(g, dict):
        return [np.asarray(g[k]) for k in sorted(g)]
    return [np.asarray(g)]


def check(name, system, got, want, rtol=1e-3, atol=1e-5):
    for g, w in zip(got, want):
        scale = max(1.0, float(np.max(np.abs(w))))
        if not np.allclose(g, w, rtol=rtol, atol=atol * scale):
            raise AssertionError(f"{name}: {system}'s gradient differs from jittape's CPU "
                                 f"gradient (max |diff| {np.max(np.abs(g - w)):.3g})")


def allocations_per_call(f, args, calls=5):
    """Device allocations per call of ``f`` in a loop that drops each call's results
    (counted through ``cuda.device_array``, which all of jittape's device memory uses)."""
    made = []
    real = cuda_runtime.cuda.device_array
    cuda_runtime.cuda.device_array = lambda *a, **k: made.append(a) or real(*a, **k)
    try:
        for _ in range(calls):
            f(*args)
    finally:
        cuda_runtime.cuda.device_array = real
    return len(made) / calls


def run_workload(name, loss, args, repeat, number):
    from numba import cuda
    result = {}
    cpu = jt.value_and_grad(loss, target="cpu")
    t0 = time.perf_counter()
    want_value, want = cpu(*args)
    result["jittape_cpu_first_call_s"] = time.perf_counter() - t0
    cpu.kernel(*args)        # (waits for a compile still running: calls meanwhile run on NumPy)
    want = flat_grads(want)
    result["jittape_cpu"] = timed(lambda: cpu(*args), lambda: None, repeat, number)

    gpu = jt.value_and_grad(loss, target="cuda")
    t0 = time.perf_counter()
    value, grads = gpu(*args)
    result["jittape_cuda_first_call_s"] = time.perf_counter() - t0
    check(name, "jittape cuda (host arrays)", flat_grads(grads), want)
    result["jittape_cuda_host_arrays"] = timed(lambda: gpu(*args), cuda.synchronize, repeat, number)
    result["jittape_cuda_device_allocations_per_call"] = allocations_per_call(gpu, args)

    dev_args = jt.tree.map_leaves(
        lambda a: cuda.to_device(a) if isinstance(a, np.ndarray) else a, args)
    value, grads = gpu(*dev_args)
    got = [cuda_runtime.copy_to_host(g) for g in
           ([grads[k] for k in sorted(grads)] if isinstance(grads, dict) else [grads])]
    check(name, "jittape cuda (device arrays)", got, want)
    del value, grads
    result["jittape_cuda_device_arrays"] = timed(lambda: gpu(*dev_args), cuda.synchronize,
                                                 repeat, number)
    result["jittape_cuda_device_args_allocations_per_call"] = allocations_per_call(gpu, dev_args)
    try:
        result["jax_gpu"] = jax_time(name, args, want, repeat, number)
    except ImportError:
        result["jax_gpu"] = "not installed"
    try:
        result["torch_gpu"] = torch_time(name, args, want, repeat, number)
    except ImportError:
        result["torch_gpu"] = "not installed"
    return result


def jax_time(name, args, want, repeat, number):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", "highest")   # float32, not TF32

    if name == "mlp":
        def loss(params, x, labels):
            h = jax.nn.relu(x @ params["W1"] + params["b1"])
            logits = h @ params["W2"] + params["b2"]
            logp = jax.nn.log_softmax(logits)
            return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))
    else:
        def loss(x):
            return jnp.sum(jax.nn.softplus(x) * jnp.tanh(x) + jnp.exp(-x * x))
    f = jax.jit(jax.value_and_grad(loss))
    dev = jax.tree_util.tree_map(jnp.asarray, args)
    value, grads = f(*dev)
    check(name, "JAX", flat_grads(jax.tree_util.tree_map(np.asarray, grads)), want)
    last = {}
    return timed(lambda: last.__setitem__("r", f(*dev)),
                 lambda: jax.block_until_ready(last["r"]), repeat, number)


def torch_time(name, args, want, repeat, number):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False                  # float32, not TF32
    dev = torch.device("cuda")
    if name == "mlp":
        params, x, labels = args
        p = {k: torch.tensor(v, device=dev, requires_grad=True) for k, v in params.items()}
        xt = torch.tensor(x, device=dev)
        lt = torch.tensor(labels, device=dev, dtype=torch.long)
        leaves = [p[k] for k in sorted(p)]

        def step():
            h = torch.relu(xt @ p["W1"] + p["b1"])
            logits = h @ p["W2"] + p["b2"]
            loss = torch.nn.functional.cross_entropy(logits, lt)
            return torch.autograd.grad(loss, leaves)
    else:
        xt = torch.tensor(args[0], device=dev, requires_grad=True)
        leaves = [xt]

        def step():
            loss = torch.sum(torch.nn.functional.softplus(xt) * torch.tanh(xt) + torch.exp(-xt * xt))
            return torch.autograd.grad(loss, leaves)
    check(name, "PyTorch", [g.cpu().numpy() for g in step()], want)
    return timed(step, torch.cuda.synchronize, repeat, number)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu.json"))
    options = parser.parse_args()
    if cuda_runtime.simulator():
        sys.exit("benchmarks/gpu.py times a real GPU; unset NUMBA_ENABLE_CUDASIM")
    from numba import cuda
    report = {"device": cuda.get_current_device().name.decode()
              if isinstance(cuda.get_current_device().name, bytes) else str(cuda.get_current_device().name),
              "machine": platform.platform(), "repeat": options.repeat, "number": options.number,
              "workloads": {}}
    for name, loss, args in (("mlp", mlp_loss, mlp_data()), ("elementwise_chain", chain_loss, chain_data())):
        report["workloads"][name] = result = run_workload(name, loss, args, options.repeat, options.number)
        print(name)
        for system, r in result.items():
            print(f"  {system:42s} {r['median_ms']:9.3f} ms" if isinstance(r, dict) else f"  {system:42s} {r}")
    chain = report["workloads"]["elementwise_chain"]
    if isinstance(chain.get("jax_gpu"), dict):
        ratio = chain["jittape_cuda_device_arrays"]["median_ms"] / chain["jax_gpu"]["median_ms"]
        report["chain_cuda_over_jax"] = ratio
        print(f"elementwise chain, jittape CUDA / JAX GPU: {ratio:.2f} (target <= 2)")
    os.makedirs(os.path.dirname(options.out), exist_ok=True)
    with open(options.out, "w") as f:
        json.dump(report, f, indent=2)
    print("written to", options.out)


if __name__ == "__main__":
    main()
