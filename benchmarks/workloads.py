"""Benchmark workloads for compiled gradients, each with four ways to get its gradient.

A workload is a loss written with jittape ops, its data (fixed seeds, float32 unless
stated) and the arguments it is differentiated in (``argnums``, as for
``jt.value_and_grad``). It gives

* ``eager_step()``: a step that records the loss on ``jt.GradientTape`` with the
  differentiated arguments as ``jt.Variable``s and takes the gradient;
* ``reference_step()``: a step calling a hand-written Numba function (``@numba.njit``,
  no fast-math, explicit loops and ``np.dot``) that computes the value and the
  gradients the way an engineer would write them by hand;
* ``numpy_step()``: a step calling a hand-written NumPy function, vectorised (whole-array
  expressions and ``@``, no Python loops), the same derivation as the Numba one;
* ``flat(grads)``: gradients of any of these paths as a list of NumPy arrays.

Both references take the arguments flattened in order (dicts in sorted key order, as
jittape and JAX flatten them) and return ``(value, grad_0, grad_1, ...)``, the
gradients in the same flat order: the calling convention of ``f.kernel(*args)``.

Tolerances (``rtol``, ``atol``): a gradient ``g`` matches ``r`` when
``|g - r| <= atol * max|r| + rtol * |r|`` elementwise. ``atol`` is relative to the
array's largest entry because a float32 sum of n terms in a different order differs by
about ``sqrt(n) * eps * max|term|``, which is large relative to an entry that is
itself a near-cancelling sum. Each workload states why its tolerance is what it is.

    python benchmarks/workloads.py     # check both references against the eager tape
"""

import math
import os
import sys
from dataclasses import dataclass, field

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jittape as jt  # noqa: E402

# the benchmarks time compiled kernels (and their first calls' compiles): a first call
# waits for its kernel rather than run as plain Python meanwhile (benchmarks/tiered.py
# measures that)
jt.config.tiered = False

F32 = np.float32


# -- nested structures -------------------------------------------------------------


def leaves(tree):
    """Leaves of a nested list/tuple/dict (dicts in sorted key order), as jittape flattens."""
    return jt.tree.flatten(tree)[0]


def leaf_names(tree, prefix):
    """Names of the leaves of ``tree`` in ``leaves`` order, for reports."""
    if isinstance(tree, dict):
        return [n for k in sorted(tree) for n in leaf_names(tree[k], f"{prefix}[{k!r}]")]
    if isinstance(tree, (list, tuple)):
        return [n for i, c in enumerate(tree) for n in leaf_names(c, f"{prefix}[{i}]")]
    return [prefix]


def map_tree(fn, tree):
    """``tree`` with ``fn`` applied to each leaf, keeping the nesting."""
    if isinstance(tree, dict):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_tree(fn, c) for c in tree)
    return fn(tree)


# -- the workload record ----------------------------------------------------------


@dataclass
class Workload:
    name: str
    description: str
    loss: object              # the loss, written with jittape ops
    args: tuple               # its NumPy arguments, in order
    argnums: object           # int or tuple of ints, as for jt.value_and_grad
    reference: object         # Numba dispatcher: flat args -> (value, *flat grads)
    numpy_reference: object   # NumPy function, same calling convention
    rtol: float = 1e-4
    atol: float = 1e-6        # relative to max|reference gradient|, see the module doc
    tolerance_note: str = "float32 rounding of short sums: rtol 1e-4"
    arg_names: tuple = field(default=())

    def diff_args(self):
        """The differentiated arguments, nested as value_and_grad nests their gradients."""
        if isinstance(self.argnums, int):
            return self.args[self.argnums]
        return tuple(self.args[i] for i in self.argnums)

    def grad_names(self):
        names = self.arg_names or tuple(f"arg{i}" for i in range(len(self.args)))
        nums = (self.argnums,) if isinstance(self.argnums, int) else self.argnums
        return [n for i in nums for n in leaf_names(self.args[i], names[i])]

    def flat(self, grads):
        """Gradients (eager, compiled or reference) as a flat list of NumPy arrays."""
        return [np.asarray(g) for g in leaves(grads)]

    def eager_step(self):
        """A step recording the loss on a GradientTape over jt.Variable parameters.

        The Variables and the constant inputs are made once, outside the step, as in a
        training loop; the step returns ``(value, grads)`` with grads nested like
        ``diff_args()``.
        """
        nums = (self.argnums,) if isinstance(self.argnums, int) else tuple(self.argnums)
        inputs = []
        for i, a in enumerate(self.args):
            if i in nums:
                inputs.append(map_tree(lambda v: jt.Variable(v, dtype=np.asarray(v).dtype), a))
            else:
                inputs.append(map_tree(jt.constant, a))
        sources = inputs[self.argnums] if isinstance(self.argnums, int) else \
            tuple(inputs[i] for i in nums)
        loss = self.loss

        def step():
            with jt.GradientTape() as tape:
                value = loss(*inputs)
            return value, tape.gradient(value, sources)

        return step

    def reference_step(self):
        """A step calling the Numba reference on the flattened arguments."""
        return _flat_call(self.reference, leaves(self.args))

    def numpy_step(self):
        """A step calling the NumPy reference on the flattened arguments."""
        return _flat_call(self.numpy_reference, leaves(self.args))

    def reference_result(self):
        """``(value, flat grads)`` of the Numba reference."""
        return unpack_reference(self.reference_step()())

    def numpy_result(self):
        """``(value, flat grads)`` of the NumPy reference."""
        return unpack_reference(self.numpy_step()())


def _flat_call(fn, flat_args):
    def step():
        return fn(*flat_args)
    return step


def unpack_reference(out):
    """A reference's ``(value, grad_0, ...)`` as ``(value, [grad_0, ...])`` of NumPy values."""
    out = [_unbox(o) for o in out]
    return out[0], out[1:]


def _unbox(x):
    """Numba returns a float32 scalar as a Python float: make it float32 again."""
    return np.asarray(x, F32) if isinstance(x, float) else np.asarray(x)


def compare(got, want, rtol, atol):
    """Worst errors of ``got`` against ``want`` and whether they are within tolerance.

    Shapes must be equal, and so must dtypes (gradients have their source's dtype).
    Returns a dict: ``ok``, ``max_abs_err_rel_to_max`` (max|g-r| / max|r|),
    ``max_rel_err`` (over entries with |r| > atol*max|r|) and a ``problem`` message.
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return {"ok": False, "problem": f"shape {got.shape} != {want.shape}"}
    if got.dtype != want.dtype:
        return {"ok": False, "problem": f"dtype {got.dtype} != {want.dtype}"}
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not (np.isfinite(g).all() and np.isfinite(w).all()):
        same = np.array_equal(g, w, equal_nan=True)
        return {"ok": same, "problem": None if same else "non-finite values differ"}
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    err = np.abs(g - w)
    ok = bool(np.all(err <= atol * scale + rtol * np.abs(w)))
    big = np.abs(w) > atol * scale
    return {"ok": ok,
            "max_abs_err_rel_to_max": float(err.max() / scale) if scale else float(err.max()),
            "max_rel_err": float((err[big] / np.abs(w[big])).max()) if big.any() else 0.0,
            "problem": None if ok else f"beyond rtol={rtol}, atol={atol}*max|ref|"}


def check(workload, value, flat_grads, value_want, grads_want):
    """Compare ``value`` and ``flat_grads`` with wanted ones under the workload's tolerance."""
    out = {"value": compare(value, value_want, workload.rtol, 0.0)}
    if len(flat_grads) != len(grads_want):
        out["grads"] = {"ok": False, "problem": f"{len(flat_grads)} gradients, want {len(grads_want)}"}
    else:
        for name, g, w in zip(workload.grad_names(), flat_grads, grads_want):
            out[name] = compare(g, w, workload.rtol, workload.atol)
    out["ok"] = all(v["ok"] for v in out.values())
    return out


# -- seed_toy -------------------------------------------------------------------------


def toy_loss(w1, w2):
    return 3 * w1 ** 2 + 2 * w1 * w2


@numba.njit(cache=False)
def toy_reference(w1, w2):
    value = F32(3.0) * w1 * w1 + F32(2.0) * w1 * w2
    return value, F32(6.0) * w1 + F32(2.0) * w2, F32(2.0) * w1


def toy_numpy(w1, w2):
    value = F32(3.0) * w1 * w1 + F32(2.0) * w1 * w2
    return value, F32(6.0) * w1 + F32(2.0) * w2, F32(2.0) * w1


def seed_toy():
    return Workload(
        "seed_toy", "3*w1**2 + 2*w1*w2 at (5, 3), gradient of both float32 scalars",
        toy_loss, (F32(5.0), F32(3.0)), (0, 1), toy_reference, toy_numpy,
        rtol=1e-6, atol=0.0, tolerance_note="small integers: exact in float32",
        arg_names=("w1", "w2"))


# -- seed_linear ----------------------------------------------------------------------


def linear_loss(w, b, x):
    y = x @ w + b
    return jt.reduce_mean(y ** 2)


@numba.njit(cache=False)
def linear_reference(w, b, x):
    n, k = x.shape
    m = w.shape[1]
    y = np.empty((n, m), np.float32)
    total = F32(0.0)
    for i in range(n):
        for j in range(m):
            acc = b[j]
            for p in range(k):
                acc += x[i, p] * w[p, j]
            y[i, j] = acc
            total += acc * acc
    inv = F32(1.0) / F32(n * m)
    dw = np.zeros((k, m), np.float32)
    db = np.zeros(m, np.float32)
    for i in range(n):
        for j in range(m):
            dy = F32(2.0) * y[i, j] * inv
            db[j] += dy
            for p in range(k):
                dw[p, j] += x[i, p] * dy
    return total * inv, dw, db


def linear_numpy(w, b, x):
    y = x @ w + b
    dy = y * F32(2.0 / y.size)
    return np.mean(y * y), x.T @ dy, dy.sum(axis=0)


def seed_linear():
    # The seed tutorial's numbers (jt.random seed 1, as in eager_overhead.py), as NumPy.
    jt.random.set_seed(1)
    w = jt.random.uniform((4, 3), minval=-20, maxval=20).numpy()
    b = np.ones(3, F32)
    x = np.array([[1.0, 2.0, 3.0, 4.0]], F32)
    return Workload(
        "seed_linear", "x (1x4) @ w (4x3) + b, mean of squares; gradient of w and b",
        linear_loss, (w, b, x), (0, 1), linear_reference, linear_numpy,
        rtol=1e-5, atol=0.0, tolerance_note="sums of 4 terms: a few float32 ulps",
        arg_names=("w", "b", "x"))


# -- mlp ----------------------------------------------------------------------------


def mlp_loss(params, x, labels):
    h = jt.relu(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    return jt.reduce_mean(jt.sparse_softmax_cross_entropy(labels, logits))


@numba.njit(cache=False)
def mlp_reference(W1, W2, b1, b2, x, labels):
    """Arguments in flattened order: the params dict in sorted keys, then x, labels."""
    batch = x.shape[0]
    hidden = W1.shape[1]
    classes = W2.shape[1]
    h = np.dot(x, W1)
    for i in range(batch):
        for j in range(hidden):
            v = h[i, j] + b1[j]
            h[i, j] = v if v > F32(0.0) else F32(0.0)
    logits = np.dot(h, W2)
    inv = F32(1.0) / F32(batch)
    dlogits = np.empty((batch, classes), np.float32)
    total = 0.0                                   # float64 accumulator for the mean
    for i in range(batch):
        m = logits[i, 0] + b2[0]
        for c in range(classes):
            v = logits[i, c] + b2[c]
            logits[i, c] = v
            if v > m:
                m = v
        s = F32(0.0)
        for c in range(classes):
            e = np.exp(logits[i, c] - m)
            dlogits[i, c] = e
            s += e
        lse = m + np.log(s)
        total += lse - logits[i, labels[i]]
        scale = inv / s
        for c in range(classes):
            dlogits[i, c] *= scale
        dlogits[i, labels[i]] -= inv
    dW2 = np.dot(h.T, dlogits)
    db2 = np.zeros(classes, np.float32)
    for i in range(batch):
        for c in range(classes):
            db2[c] += dlogits[i, c]
    dh = np.dot(dlogits, W2.T)
    db1 = np.zeros(hidden, np.float32)
    for i in range(batch):
        for j in range(hidden):
            if h[i, j] > F32(0.0):
                db1[j] += dh[i, j]
            else:
                dh[i, j] = F32(0.0)
    dW1 = np.dot(x.T, dh)
    return F32(total / batch), dW1, dW2, db1, db2


def mlp_numpy(W1, W2, b1, b2, x, labels):
    """Arguments in flattened order, as ``mlp_reference``."""
    batch = x.shape[0]
    rows = np.arange(batch)
    pre = x @ W1 + b1
    h = np.maximum(pre, F32(0.0))
    logits = h @ W2 + b2
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    value = np.mean(m[:, 0] + np.log(s[:, 0]) - logits[rows, labels])
    dlogits = e * (F32(1.0 / batch) / s)           # softmax / batch
    dlogits[rows, labels] -= F32(1.0 / batch)
    dh = (dlogits @ W2.T) * (pre > 0)
    return value, x.T @ dh, h.T @ dlogits, dh.sum(axis=0), dlogits.sum(axis=0)


def mlp():
    rng = np.random.default_rng(20240601)
    batch, n_in, n_hidden, n_out = 256, 784, 128, 10

    def glorot(fan_in, fan_out):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(F32)

    params = {"W1": glorot(n_in, n_hidden), "b1": rng.normal(0, 0.1, n_hidden).astype(F32),
              "W2": glorot(n_hidden, n_out), "b2": rng.normal(0, 0.1, n_out).astype(F32)}
    x = rng.random((batch, n_in), dtype=F32)                  # pixel-like, in [0, 1)
    labels = rng.integers(0, n_out, batch).astype(np.int32)
    return Workload(
        "mlp", "MLP 784-128-10, batch 256, ReLU, sparse softmax cross-entropy; grad of 4 params",
        mlp_loss, (params, x, labels), 0, mlp_reference, mlp_numpy,
        rtol=1e-4, atol=1e-5,
        tolerance_note="float32 sgemm sums of up to 784 terms in different blockings "
                       "(NumPy's and SciPy's BLAS): rtol 1e-4, atol 1e-5*max|grad| for "
                       "entries that are near-cancelling sums over the batch",
        arg_names=("params", "x", "labels"))


# -- logreg -------------------------------------------------------------------------


def logreg_loss(w, b, X, y):
    z = X @ w + b
    return jt.reduce_mean(jt.softplus(z) - y * z)


@numba.njit(cache=False)
def logreg_reference(w, b, X, y):
    n = X.shape[0]
    z = np.dot(X, w)
    inv = F32(1.0) / F32(n)
    dz = np.empty(n, np.float32)
    total = 0.0                                   # float64 accumulators
    db = 0.0
    for i in range(n):
        zi = z[i] + b
        softplus = max(zi, F32(0.0)) + np.log1p(np.exp(-abs(zi)))
        total += softplus - y[i] * zi
        if zi >= F32(0.0):
            sig = F32(1.0) / (F32(1.0) + np.exp(-zi))
        else:
            e = np.exp(zi)
            sig = e / (F32(1.0) + e)
        d = (sig - y[i]) * inv
        dz[i] = d
        db += d
    dw = np.dot(X.T, dz)
    return F32(total / n), dw, F32(db)


def logreg_numpy(w, b, X, y):
    z = X @ w + b
    e = np.exp(-np.abs(z))                         # stable softplus and sigmoid
    softplus = np.maximum(z, F32(0.0)) + np.log1p(e)
    sig = np.where(z >= 0, F32(1.0) / (F32(1.0) + e), e / (F32(1.0) + e))
    dz = (sig - y) * F32(1.0 / X.shape[0])
    return np.mean(softplus - y * z), dz @ X, dz.sum()


def logreg():
    rng = np.random.default_rng(7)
    n, d = 10000, 100
    X = rng.normal(0, 1, (n, d)).astype(F32)
    w_true = rng.normal(0, 0.3, d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w_true)))).astype(F32)
    w = rng.normal(0, 0.1, d).astype(F32)
    b = F32(0.1)
    return Workload(
        "logreg", "logistic regression, X 10000x100, mean(softplus(z) - y*z); grad of w, b",
        logreg_loss, (w, b, X, y), (0, 1), logreg_reference, logreg_numpy,
        rtol=1e-4, atol=1e-5,
        tolerance_note="float32 sgemv sums of 10^4 terms in different orders and NumPy's "
                       "SIMD exp/log1p vs libm: rtol 1e-4, atol 1e-5*max|grad|",
        arg_names=("w", "b", "X", "y"))


# -- elementwise_chain ------------------------------------------------------------------


def chain_loss(x):
    return jt.reduce_sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x))


@numba.njit(cache=False)
def chain_reference(x):
    n = x.shape[0]
    dx = np.empty(n, np.float32)
    total = 0.0                                   # float64 accumulator
    for i in range(n):
        v = x[i]
        e = np.exp(-abs(v))
        softplus = max(v, F32(0.0)) + np.log1p(e)
        sig = F32(1.0) / (F32(1.0) + e) if v >= F32(0.0) else e / (F32(1.0) + e)
        t = np.tanh(v)
        g = np.exp(-v * v)
        total += softplus * t + g
        dx[i] = sig * t + softplus * (F32(1.0) - t * t) - F32(2.0) * v * g
    return F32(total), dx


def chain_numpy(x):
    e = np.exp(-np.abs(x))
    softplus = np.maximum(x, F32(0.0)) + np.log1p(e)
    sig = np.where(x >= 0, F32(1.0) / (F32(1.0) + e), e / (F32(1.0) + e))
    t = np.tanh(x)
    g = np.exp(-x * x)
    dx = sig * t + softplus * (F32(1.0) - t * t) - F32(2.0) * x * g
    return np.sum(softplus * t + g), dx


def elementwise_chain():
    rng = np.random.default_rng(3)
    x = (2.0 * rng.standard_normal(10 ** 6)).astype(F32)
    return Workload(
        "elementwise_chain", "sum(softplus(x)*tanh(x) + exp(-x*x)) on 10^6 float32; grad of x",
        chain_loss, (x,), 0, chain_reference, chain_numpy,
        rtol=1e-4, atol=1e-6,
        tolerance_note="elementwise: NumPy's SIMD exp/tanh/log1p vs libm differ by a few "
                       "ulps; the gradient cancels to ~0 near x=-0.6 and x=0, hence "
                       "atol 1e-6*max|grad|; the value is a sum of 10^6 terms (pairwise in "
                       "float32 vs a float64 accumulator): rtol 1e-4",
        arg_names=("x",))


WORKLOADS = {
    "seed_toy": seed_toy,
    "seed_linear": seed_linear,
    "mlp": mlp,
    "logreg": logreg,
    "elementwise_chain": elementwise_chain,
}


def build(name):
    """The workload called ``name`` (data made afresh, with its fixed seed)."""
    try:
        return WORKLOADS[name]()
    except KeyError:
        raise SystemExit(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None


def check_reference(workload, which="numba"):
    """A reference's value and gradients (``which``: "numba" or "numpy") against the
    eager tape's."""
    value, grads = workload.eager_step()()
    result = workload.numpy_result if which == "numpy" else workload.reference_result
    ref_value, ref_grads = result()
    return check(workload, np.asarray(value), workload.flat(grads), ref_value, ref_grads)


if __name__ == "__main__":
    bad = 0
    for name in WORKLOADS:
        w = build(name)
        for which in ("numba", "numpy"):
            result = check_reference(w, which)
            bad += not result["ok"]
            print(f"{name:18s} {which:6s} {'ok' if result['ok'] else 'MISMATCH'}")
            for key, r in result.items():
                if key != "ok":
                    print(f"    {key:16s} {r}")
    sys.exit(1 if bad else 0)
