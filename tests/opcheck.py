"""Helpers shared by the registry-driven tests: build an op's example inputs, apply it,
and check gradients numerically."""

import numpy as np

import jittape as jt
from jittape.ops.core import COMPOSITES, REGISTRY, Fixed, Primitive


def all_ops():
    """Every registered op: primitives and composites, by name."""
    return {**REGISTRY, **COMPOSITES}


def cases(differentiable_only=False):
    """(name, example index) for every example of every op."""
    out = []
    for name, op in sorted(all_ops().items()):
        if differentiable_only and not op.differentiable:
            continue
        out.extend((name, i) for i in range(len(op.examples)))
    return out


def domain_of(op, example, k):
    dom = example.domain or op.domain
    return dom[k] if isinstance(dom[0], tuple) else dom


def make_inputs(op, example, rng, dtype=np.float64):
    """(values, differentiable positions) for an example; random floats for shapes."""
    values, diff = [], []
    for k, spec in enumerate(example.inputs):
        if isinstance(spec, tuple):
            lo, hi = domain_of(op, example, k)
            values.append(rng.uniform(lo, hi, spec).astype(dtype))
            diff.append(k)
        elif isinstance(spec, Fixed):
            values.append(np.asarray(spec.value))
        else:
            values.append(spec)
    return values, diff


def apply(op, args, params):
    out = op.bind(*args, **params) if isinstance(op, Primitive) else op.call(*args, **params)
    if getattr(out, "dtype", None) is not None and out.dtype.kind == "c":
        # a complex result (np.fft's) is checked through its real and imaginary parts
        out = jt.stack([jt.real(out), jt.imag(out)])
    return out


def numeric_grad(f, values, k, eps=1e-6):
    """Central differences of the scalar ``f(values)`` w.r.t. ``values[k]``."""
    x = values[k]
    grad = np.zeros_like(x, dtype=np.float64)
    flat = grad.reshape(-1)
    for i in range(x.size):
        plus = [v.copy() if j == k else v for j, v in enumerate(values)]
        minus = [v.copy() if j == k else v for j, v in enumerate(values)]
        plus[k].reshape(-1)[i] += eps
        minus[k].reshape(-1)[i] -= eps
        flat[i] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def projected(op, params, v):
    """The scalar loss sum(op(*args) * v) as a function of NumPy values."""
    def f(values):
        out = apply(op, [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values], params)
        return float(np.sum(np.asarray(out, np.float64) * v))
    return f


def tape_grads(op, values, diff, params, v):
    """Gradients of sum(op(*args) * v) on the eager tape, for the differentiable inputs."""
    args = [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values]
    with jt.GradientTape() as tape:
        for k in diff:
            tape.watch(args[k])
        out = apply(op, args, params)
        loss = jt.sum(out * v)
    return out, tape.gradient(loss, [args[k] for k in diff])
