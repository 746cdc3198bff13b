"""The benchmark workloads in other frameworks: JAX, TensorFlow, PyTorch, HIPS autograd.

Each workload's loss is written once here over a small namespace of ops (``matmul``,
``relu``, ``softplus``, ``tanh``, ``exp``, ``mean``, ``sum``,
``sparse_softmax_cross_entropy``), the same math, line for line, as its jittape loss in
``workloads.py``; each framework fills the namespace with its own functions. The data
are the workload's NumPy arrays, converted once, before any timing, to the framework's
arrays in the workload's dtypes (float32 stays float32; PyTorch's cross-entropy wants
int64 labels, so the labels become int64 there). JAX computes where its default backend
is (a GPU when jaxlib has one), with float32 matrix products (precision "highest", not a
GPU's TF32); TensorFlow, PyTorch and autograd compute on the CPU.

A system (a column of the runner's table) is ``make(workload) -> (step, to_numpy)``:
``step()`` computes the value and the gradients of the differentiated arguments the
framework's usual way and returns them as the framework's arrays, finished (JAX's
asynchronous results are waited for); ``to_numpy(result)`` gives ``(value, flat
gradients)`` as NumPy arrays, gradients in the flat order of ``Workload.flat``, for the
check against jittape.

``load_framework(name, threads)`` imports a framework, limits its thread pools to
``threads`` (0: leave them) and returns its version; it raises when the framework is
missing or broken.
"""

import os
import sys
from types import SimpleNamespace

import numpy as np

from workloads import map_tree


def losses(B):
    """The workloads' losses written over the ops namespace ``B``, by workload name."""

    def seed_toy(w1, w2):
        return 3 * w1 ** 2 + 2 * w1 * w2

    def seed_linear(w, b, x):
        y = B.matmul(x, w) + b
        return B.mean(y ** 2)

    def mlp(params, x, labels):
        h = B.relu(B.matmul(x, params["W1"]) + params["b1"])
        logits = B.matmul(h, params["W2"]) + params["b2"]
        return B.mean(B.sparse_softmax_cross_entropy(labels, logits))

    def logreg(w, b, X, y):
        z = B.matmul(X, w) + b
        return B.mean(B.softplus(z) - y * z)

    def elementwise_chain(x):
        return B.sum(B.softplus(x) * B.tanh(x) + B.exp(-x * x))

    return {"seed_toy": seed_toy, "seed_linear": seed_linear, "mlp": mlp,
            "logreg": logreg, "elementwise_chain": elementwise_chain}


def loss_for(workload, B):
    try:
        return losses(B)[workload.name]
    except KeyError:
        raise NotImplementedError(f"no peer version of workload {workload.name!r}") from None


def _split(workload, diff, const):
    """The workload's arguments with ``diff`` applied to the leaves of the differentiated
    ones and ``const`` to the others; and the differentiated ones, nested as
    ``Workload.diff_args``."""
    nums = (workload.argnums,) if isinstance(workload.argnums, int) else workload.argnums
    inputs = [map_tree(diff if i in nums else const, a) for i, a in enumerate(workload.args)]
    sources = inputs[workload.argnums] if isinstance(workload.argnums, int) else \
        tuple(inputs[i] for i in nums)
    return inputs, sources


# -- loading ------------------------------------------------------------------------------

# framework -> (import name, pip package, label)
FRAMEWORKS = {
    "jax": ("jax", "jax", "JAX"),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "TensorFlow"),
    "torch": ("torch", "torch", "PyTorch"),
    "autograd": ("autograd", "autograd", "HIPS autograd"),
}


def prepare_environment(threads):
    """Environment the frameworks read when they load: quiet TensorFlow, and with
    ``threads`` == 1 single-threaded XLA (JAX) and inductor compiles in-process."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if threads == 1:
        if "jax" not in sys.modules and "XLA_FLAGS" not in os.environ:
            os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def load_framework(name, threads):
    """Import framework ``name``, limit its threads, return a version string."""
    module = FRAMEWORKS[name][0]
    if name == "jax":
        import jax
        # float32 matrix products on a GPU too (its default there is TF32)
        jax.config.update("jax_default_matmul_precision", "highest")
        return f"{jax.__version__} ({jax.default_backend()})"
    if name == "tensorflow":
        import tensorflow as tf
        tf.get_logger().setLevel("ERROR")       # not a retracing warning per workload
        if threads:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            except RuntimeError:        # its runtime had started already
                pass
        return tf.__version__
    if name == "torch":
        import torch
        if threads:
            torch.set_num_threads(threads)
            try:
                torch.set_num_interop_threads(threads)
            except RuntimeError:        # parallel work had started already
                pass
        return torch.__version__
    from importlib import import_module
    from importlib.metadata import version
    import_module(module)
    return version(FRAMEWORKS[name][1])


# -- JAX --------------------------------------------------------------------------------------


def jax_jit(workload):
    """``jax.jit(jax.value_and_grad(loss, argnums))`` on arrays placed on the device once."""
    import jax
    import jax.numpy as jnp

    def xent(labels, logits):
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1)[:, 0]

    B = SimpleNamespace(matmul=jnp.matmul, relu=jax.nn.relu, softplus=jax.nn.softplus,
                        tanh=jnp.tanh, exp=jnp.exp, mean=jnp.mean, sum=jnp.sum,
                        sparse_softmax_cross_entropy=xent)
    f = jax.jit(jax.value_and_grad(loss_for(workload, B), argnums=workload.argnums))
    args = tuple(map_tree(jnp.asarray, a) for a in workload.args)

    def step():
        return jax.block_until_ready(f(*args))

    def to_numpy(result):
        value, grads = result
        return np.asarray(value), workload.flat(map_tree(np.asarray, grads))

    return step, to_numpy


# -- TensorFlow ----------------------------------------------------------------------------


def _tf_step(workload, function):
    import tensorflow as tf

    def matmul(a, b):
        return tf.linalg.matvec(a, b) if len(b.shape) == 1 else tf.matmul(a, b)

    def xent(labels, logits):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    B = SimpleNamespace(matmul=matmul, relu=tf.nn.relu, softplus=tf.math.softplus,
                        tanh=tf.math.tanh, exp=tf.math.exp, mean=tf.reduce_mean,
                        sum=tf.reduce_sum, sparse_softmax_cross_entropy=xent)
    loss = loss_for(workload, B)
    inputs, sources = _split(workload, tf.Variable, tf.constant)

    def step():
        with tf.GradientTape() as tape:
            value = loss(*inputs)
        return value, tape.gradient(value, sources)

    def to_numpy(result):
        value, grads = result
        return value.numpy(), workload.flat(map_tree(lambda g: g.numpy(), grads))

    return (tf.function(step) if function else step), to_numpy


def tf_eager(workload):
    """``tf.GradientTape`` over ``tf.Variable`` parameters, run eagerly."""
    return _tf_step(workload, function=False)


def tf_function(workload):
    """The same tape step inside ``tf.function`` (a graph traced on the first call)."""
    return _tf_step(workload, function=True)


# -- PyTorch ----------------------------------------------------------------------------------


def _torch_step(workload, compile):
    import torch
    import torch.nn.functional as F

    def xent(labels, logits):
        return F.cross_entropy(logits, labels, reduction="none")

    B = SimpleNamespace(matmul=torch.matmul, relu=torch.relu, softplus=F.softplus,
                        tanh=torch.tanh, exp=torch.exp, mean=torch.mean, sum=torch.sum,
                        sparse_softmax_cross_entropy=xent)
    loss = loss_for(workload, B)

    def const(a):
        t = torch.tensor(np.asarray(a))
        return t.long() if t.dtype == torch.int32 else t      # cross_entropy's labels

    inputs, sources = _split(workload, lambda a: const(a).requires_grad_(True), const)
    leaves = _torch_leaves(sources)
    fn = torch.compile(loss) if compile else loss

    def step():
        value = fn(*inputs)
        return value, torch.autograd.grad(value, leaves)

    def to_numpy(result):
        value, grads = result
        return value.detach().numpy(), [g.numpy() for g in grads]

    return step, to_numpy


def _torch_leaves(sources):
    """The differentiated tensors in ``Workload.flat`` order (dicts in sorted key order)."""
    if isinstance(sources, dict):
        return [t for k in sorted(sources) for t in _torch_leaves(sources[k])]
    if isinstance(sources, (list, tuple)):
        return [t for s in sources for t in _torch_leaves(s)]
    return [sources]


def torch_eager(workload):
    """PyTorch autograd, eagerly: the loss, then ``torch.autograd.grad``."""
    return _torch_step(workload, compile=False)


def torch_compile(workload):
    """``torch.compile(loss)`` (TorchDynamo + inductor: forward and backward compiled on
    the first call), then ``torch.autograd.grad``."""
    return _torch_step(workload, compile=True)


# -- HIPS autograd ------------------------------------------------------------------------------


def autograd_vg(workload):
    """``autograd.value_and_grad(loss, argnum)`` on the NumPy arrays themselves."""
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    def xent(labels, logits):
        logp = logits - logsumexp(logits, axis=1, keepdims=True)
        return -logp[anp.arange(logits.shape[0]), labels]

    B = SimpleNamespace(matmul=anp.matmul, relu=lambda x: anp.maximum(x, 0.0),
                        softplus=lambda x: anp.logaddexp(0.0, x), tanh=anp.tanh,
                        exp=anp.exp, mean=anp.mean, sum=anp.sum,
                        sparse_softmax_cross_entropy=xent)
    f = autograd.value_and_grad(loss_for(workload, B), argnum=workload.argnums)
    args = workload.args

    def step():
        return f(*args)

    def to_numpy(result):
        value, grads = result
        return np.asarray(value), workload.flat(grads)

    return step, to_numpy


# system key -> (framework, label for tables, make)
PEERS = {
    "jax": ("jax", "jax.jit", jax_jit),
    "tf_eager": ("tensorflow", "tf eager", tf_eager),
    "tf_function": ("tensorflow", "tf.function", tf_function),
    "torch_eager": ("torch", "torch eager", torch_eager),
    "torch_compile": ("torch", "torch.compile", torch_compile),
    "autograd": ("autograd", "autograd", autograd_vg),
}
