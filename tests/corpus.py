"""A corpus of small, realistic loss functions for checking gradients end to end.

Each entry of ``CASES`` is a :class:`Case`: a pure function returning a scalar tensor,
a recipe for its arguments, and ``argnums`` (what is differentiated, as in JAX's
``value_and_grad``). The same corpus drives three checks (tests/test_jit_corpus.py):
the eager tape against finite differences, float32 runs against float64 ones, and the
compiled ``jt.value_and_grad`` against the eager tape.

Arguments are NumPy arrays (floating ones in the requested dtype, integer labels and
indices as they are), Python floats, or nested dicts/lists/tuples of arrays. The
random draws do not depend on the dtype: a float32 argument is the float64 one
rounded. Domains keep every input away from kinks (``abs`` at 0, ties of ``max``,
``clip`` bounds, ``relu`` at 0) by more than the finite-difference steps, and the
arguments of ``sqrt``/``log``/``power`` positive.

Helpers: :func:`eager_value_and_grad` (value and gradients with ``jt.GradientTape``,
nested like JAX's), :func:`numeric_grad` (central differences in float64) and small
tree utilities (:func:`tree_map`, :func:`tree_leaves`, :func:`tree_structure`).
"""

import dataclasses
from typing import Callable, Tuple, Union

import numpy as np

import jittape as jt


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    make_args: Callable            # (rng, dtype) -> tuple of arguments
    argnums: Union[int, Tuple[int, ...]] = 0
    domain: str = ""               # notes on how the arguments avoid kinks / bad domains

    def __repr__(self):
        return f"Case({self.name})"


CASES = []


def case(args, argnums=0, domain=""):
    """Register the decorated loss function as a corpus case named after it."""
    def register(fn):
        CASES.append(Case(fn.__name__, fn, args, argnums, domain))
        return fn
    return register


# -- trees ---------------------------------------------------------------------------------

def tree_map(fn, tree):
    """``fn`` applied to every leaf of a nest of dicts, lists and tuples (kept as they are)."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(fn, v) for v in tree]
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, v) for v in tree)
    return fn(tree)


def tree_leaves(tree):
    """The leaves in a deterministic order (dicts by sorted key), as jittape flattens."""
    return jt.tree.flatten(tree)[0]


def tree_structure(tree):
    """A comparable description of the nesting: container types and dict keys."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, tree_structure(tree[k])) for k in sorted(tree)))
    if isinstance(tree, list):
        return ("list", tuple(tree_structure(v) for v in tree))
    if isinstance(tree, tuple):
        return ("tuple", tuple(tree_structure(v) for v in tree))
    return "*"


def argnums_tuple(argnums):
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def is_float_array(x):
    return isinstance(x, (np.ndarray, np.generic)) and np.asarray(x).dtype.kind == "f"


def cast_floats(args, dtype):
    """``args`` with every floating array converted to ``dtype`` (copies)."""
    return tree_map(lambda x: np.array(x, dtype=dtype) if is_float_array(x) else x, args)


def diff_args(case, args):
    """The differentiated arguments, nested as the gradients are."""
    if isinstance(case.argnums, int):
        return args[case.argnums]
    return tuple(args[i] for i in case.argnums)


# -- eager values and gradients ------------------------------------------------------------

def _eager_args(case, args, variables):
    """Arrays as jittape tensors; differentiated leaves as Variables or constants.

    Returns (converted args, list of the differentiated arguments' tensor nests).
    """
    diff = argnums_tuple(case.argnums)

    def source(x):
        x = np.asarray(x)
        return jt.Variable(x) if variables else jt.constant(x)

    def other(x):
        return jt.constant(np.asarray(x)) if isinstance(x, (np.ndarray, np.generic)) else x

    out = [tree_map(source if i in diff else other, a) for i, a in enumerate(args)]
    return out, [out[i] for i in diff]


def _numpy(x):
    return x.numpy() if isinstance(x, jt.Tensor) else x


def eager_value_and_grad(case, args, variables=False):
    """(value, grads) of ``case.fn(*args)`` computed with ``jt.GradientTape``, as NumPy.

    The differentiated leaves become ``jt.Variable``s (``variables=True``) or watched
    ``jt.constant``s. ``grads`` mirrors ``argnums`` as JAX does: an int gives the
    gradient of that argument with its nesting, a tuple gives a tuple of those.
    Unconnected leaves get zeros, as in JAX.
    """
    eager, sources = _eager_args(case, args, variables)
    with jt.GradientTape() as tape:
        if not variables:
            tape.watch(sources)
        value = case.fn(*eager)
    grads = tape.gradient(value, sources, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    grads = [tree_map(_numpy, g) for g in grads]
    grads = grads[0] if isinstance(case.argnums, int) else tuple(grads)
    return np.asarray(_numpy(value)), grads


def evaluate(case, args):
    """``float(case.fn(*args))`` in eager mode, without a tape."""
    eager, _ = _eager_args(case, args, variables=False)
    return float(case.fn(*eager))


def numeric_grad(case, args, eps=1e-3):
    """Central finite differences of ``case.fn`` in float64, nested like the gradients.

    The fourth-order central stencil (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / 12h
    with h = ``eps``: its truncation error is O(h^4), so a step of 1e-3 keeps the
    rounding error near 1e-13 relative and the result good to about 1e-10.
    """
    args = list(cast_floats(args, np.float64))
    diff = argnums_tuple(case.argnums)
    grads = []
    for i in diff:
        def grad_leaf(leaf, i=i):
            g = np.zeros(np.shape(leaf), np.float64)
            for k in range(g.size):
                orig = leaf.flat[k]
                f = []
                for step in (-2, -1, 1, 2):
                    leaf.flat[k] = orig + step * eps
                    f.append(evaluate(case, args))
                leaf.flat[k] = orig
                g.flat[k] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * eps)
            return g
        grads.append(tree_map(grad_leaf, args[i]))
    return grads[0] if isinstance(case.argnums, int) else tuple(grads)


# -- drawing arguments ------------------------------------------------------------------

def _normal(rng, shape, dtype, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def _uniform(rng, lo, hi, shape, dtype):
    return rng.uniform(lo, hi, shape).astype(dtype)


def _scalar(value, dtype):
    return np.asarray(value, dtype=dtype)


def _avoiding(rng, lo, hi, shape, points, margin=0.05):
    """Uniform float64 draws in [lo, hi) at least ``margin`` away from every kink in ``points``."""
    x = rng.uniform(lo, hi, shape)
    while True:
        bad = np.zeros(x.shape, bool)
        for p in points:
            bad |= np.abs(x - p) < margin
        if not bad.any():
            return x
        x[bad] = rng.uniform(lo, hi, int(bad.sum()))


def _distinct(rng, shape, dtype, gap=0.25):
    """Values without ties: a shuffled ladder with steps of ``gap`` (+- gap/5 of noise)."""
    n = int(np.prod(shape))
    ladder = (rng.permutation(n) - n / 2) * gap + rng.uniform(-gap / 5, gap / 5, n)
    return ladder.reshape(shape).astype(dtype)


def _until(rng, draw, ok, tries=1000):
    """Redraw all arguments until ``ok(args)`` holds (checked in float64)."""
    for _ in range(tries):
        args = draw(rng)
        if ok(*args):
            return args
    raise RuntimeError("no admissible draw")


# == the corpus ============================================================================

# -- the seed examples ----------------------------------------------------------------------

@case(args=lambda rng, dt: (_scalar(5.0, dt), _scalar(3.0, dt)), argnums=(0, 1))
def seed_toy(w1, w2):
    return 3 * w1 ** 2 + 2 * w1 * w2


@case(args=lambda rng, dt: (_uniform(rng, -2, 2, (3, 4), dt),))
def softplus_tanh_exp_chain(x):
    return jt.sum(jt.softplus(x) * jt.tanh(x) + jt.exp(-x * x))


# -- models -------------------------------------------------------------------------------

def _mlp_args(rng, dt):
    n, d, h, k = 5, 4, 6, 3
    params = {"W1": _normal(rng, (d, h), dt, 0.5), "b1": _normal(rng, (h,), dt, 0.1),
              "W2": _normal(rng, (h, k), dt, 0.5), "b2": _normal(rng, (k,), dt, 0.1)}
    x = _normal(rng, (n, d), dt)
    labels = rng.integers(0, k, n).astype(np.int32)
    return params, x, labels


@case(args=_mlp_args, argnums=0, domain="integer labels, not differentiated")
def mlp_softmax_cross_entropy(params, x, labels):
    h = jt.tanh(x @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    return jt.mean(jt.sparse_softmax_cross_entropy(labels, logits))


def _mlp_relu_args(rng, dt):
    def draw(rng):
        W1, b1 = _normal(rng, (3, 5), np.float64, 0.7), _normal(rng, (5,), np.float64, 0.2)
        W2, x, y = _normal(rng, (5, 2), np.float64, 0.7), _normal(rng, (4, 3), np.float64), \
            _normal(rng, (4, 2), np.float64)
        return W1, b1, W2, x, y
    args = _until(rng, draw, lambda W1, b1, W2, x, y: np.abs(x @ W1 + b1).min() > 0.05)
    return cast_floats(args, dt)


@case(args=_mlp_relu_args, argnums=(0, 1, 2), domain="pre-activations at least 0.05 from 0")
def mlp_relu_mse(W1, b1, W2, x, y):
    h = jt.relu(x @ W1 + b1)
    return jt.mean(jt.square(h @ W2 - y))


def _logreg_args(rng, dt):
    n, d = 8, 3
    w, b = _normal(rng, (d,), dt, 0.7), _scalar(rng.normal(0, 0.3), dt)
    X = _normal(rng, (n, d), dt)
    y = (rng.uniform(size=n) < 0.5).astype(dt)
    return w, b, X, y


@case(args=_logreg_args, argnums=(0, 1))
def logistic_regression_sigmoid(w, b, X, y):
    p = jt.sigmoid(X @ w + b)
    return -jt.mean(y * jt.log(p) + (1 - y) * jt.log(1 - p))


@case(args=_logreg_args, argnums=(0, 1))
def logistic_regression_softplus(w, b, X, y):
    z = X @ w + b
    return jt.mean(jt.softplus(z) - y * z)


def _linreg_args(rng, dt):
    return (_normal(rng, (3, 2), dt), _normal(rng, (2,), dt), _normal(rng, (6, 3), dt),
            _normal(rng, (6, 2), dt))


@case(args=_linreg_args, argnums=(0, 1))
def linear_regression_mse(W, b, X, Y):
    return jt.mean((X @ W + b - Y) ** 2)


def _ridge_args(rng, dt):
    return _normal(rng, (4,), dt), _normal(rng, (7, 4), dt), _normal(rng, (7,), dt), 0.1


@case(args=_ridge_args, argnums=0, domain="lam: a Python float, not differentiated")
def ridge_python_float(w, X, y, lam):
    return jt.mean(jt.square(X @ w - y)) + lam * jt.sum(w * w)


def _lasso_args(rng, dt):
    def draw(rng):
        w = rng.choice([-1, 1], 4) * rng.uniform(0.2, 1.0, 4)
        return w, rng.standard_normal((6, 4)), rng.standard_normal(6)
    w, X, y = _until(rng, draw, lambda w, X, y: np.abs(X @ w - y).min() > 0.05)
    return w.astype(dt), X.astype(dt), y.astype(dt), 0.05


@case(args=_lasso_args, argnums=0, domain="residuals and weights at least 0.05 from 0")
def lasso_l1(w, X, y, lam):
    return jt.mean(jt.abs(X @ w - y)) + lam * jt.sum(abs(w))


def _layer_norm_args(rng, dt):
    return (_normal(rng, (4, 6), dt), _uniform(rng, 0.5, 1.5, (6,), dt),
            _normal(rng, (6,), dt, 0.1), _normal(rng, (4, 6), dt))


@case(args=_layer_norm_args, argnums=(0, 1, 2))
def layer_norm(x, gamma, beta, target):
    mu = jt.mean(x, axis=-1, keepdims=True)
    var = jt.mean(jt.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) / jt.sqrt(var + 1e-5) * gamma + beta
    return jt.sum(jt.square(y - target))


def _attention_args(rng, dt):
    return (_normal(rng, (3, 4), dt), _normal(rng, (5, 4), dt), _normal(rng, (5, 2), dt),
            _normal(rng, (3, 2), dt))


@case(args=_attention_args, argnums=(0, 1, 2))
def attention(q, k, v, target):
    scores = q @ k.T / k.shape[-1] ** 0.5
    out = jt.softmax(scores, axis=-1) @ v
    return jt.sum((out - target) ** 2)


def _gaussian_args(rng, dt):
    return _normal(rng, (6,), dt), _normal(rng, (6,), dt, 0.3), _normal(rng, (6,), dt)


@case(args=_gaussian_args, argnums=(0, 1))
def gaussian_nll(mu, log_sigma, y):
    z = (y - mu) * jt.exp(-log_sigma)
    return jt.mean(0.5 * z * z + log_sigma)


def _poisson_args(rng, dt):
    return (_normal(rng, (5,), dt, 0.5), _normal(rng, (5, 2), dt),
            rng.poisson(2.0, 5).astype(dt))


@case(args=_poisson_args, argnums=(0, 1))
def poisson_log1p_expm1(theta, x, counts):
    rate = jt.exp(theta)
    nll = jt.sum(rate - counts * theta)
    return nll + jt.sum(jt.log1p(x * x)) + 0.1 * jt.sum(jt.expm1(x[:, 0] * theta))


def _cosine_args(rng, dt):
    return _normal(rng, (4, 3), dt), _normal(rng, (4, 3), dt)


@case(args=_cosine_args, argnums=(0, 1), domain="nonzero rows")
def cosine_similarity(a, b):
    num = jt.sum(a * b, axis=1)
    den = jt.sqrt(jt.sum(a * a, axis=1)) * jt.sqrt(jt.sum(b * b, axis=1))
    return jt.mean(1 - num / den)


def _kl_args(rng, dt):
    return _normal(rng, (3, 4), dt), _normal(rng, (3, 4), dt)


@case(args=_kl_args, argnums=(0, 1))
def kl_divergence(logits_p, logits_q):
    p = jt.softmax(logits_p)
    return jt.sum(p * (jt.log_softmax(logits_p) - jt.log_softmax(logits_q)))


def _conv_args(rng, dt):
    return _normal(rng, (10,), dt), _normal(rng, (3,), dt, 0.5), _normal(rng, (8,), dt)


@case(args=_conv_args, argnums=(0, 1))
def conv1d_slices(x, kernel, target):
    n = x.shape[0] - kernel.shape[0] + 1
    out = sum(kernel[k] * x[k:k + n] for k in range(kernel.shape[0]))
    return jt.sum((jt.tanh(out) - target) ** 2)


def _stop_args(rng, dt):
    return _normal(rng, (4, 5), dt, 2.0), _normal(rng, (4, 5), dt)


@case(args=_stop_args, argnums=(0, 1),
      domain="stop_gradient only where the true gradient is zero, so differences agree")
def stop_gradient_stable_softmax(x, y):
    # the max shift of a hand-written stable log-softmax, and a stopped mean in a variance:
    # both carry no gradient mathematically (d/dm vanishes)
    m = jt.stop_gradient(jt.max(x, axis=1, keepdims=True))
    logp = x - m - jt.log(jt.sum(jt.exp(x - m), axis=1, keepdims=True))
    mu = jt.stop_gradient(jt.mean(y))
    return -jt.sum(jt.softmax(y) * logp) + jt.mean(jt.square(jt.identity(y) - mu))


@case(args=lambda rng, dt: (_uniform(rng, -1.5, 1.5, (6,), dt),))
def rosenbrock(x):
    return jt.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


# -- indexing and shapes ------------------------------------------------------------------------

@case(args=lambda rng, dt: (_normal(rng, (11,), dt), _normal(rng, (11,), dt)), argnums=0)
def strided_slices(x, w):
    a = x[::2]            # 6
    b = x[1::2]           # 5
    c = x[1:-1]           # 9
    d = x[::-1]           # 11
    e = x[-2::-3]         # 4: x[9], x[6], x[3], x[0]
    return jt.sum(a[:5] * b) + jt.sum(jt.sin(c)) + jt.sum(d * w) + jt.sum(e ** 2) + x[3] * x[-1]


@case(args=lambda rng, dt: (_normal(rng, (5, 6), dt),))
def slices_2d(X):
    top = X[1:, ::-2]           # (4, 3)
    col = X[:, 2]               # (5,)
    row = X[-1]                 # (6,)
    blk = X[::2, 1:4]           # (3, 3)
    new = X[None, :, 0]         # (1, 5)
    last = X[..., -1]           # (5,)
    return (jt.sum(top ** 2) + jt.sum(col * last) + jt.sum(jt.tanh(row)) + jt.sum(blk @ blk)
            + jt.sum(new * col) + jt.sum(X[3:0:-2, -1:-4:-1]))


def _concat_args(rng, dt):
    return (_normal(rng, (3,), dt), _normal(rng, (4,), dt), _normal(rng, (2, 3), dt),
            _normal(rng, (2, 2), dt), _normal(rng, (10,), dt))


@case(args=_concat_args, argnums=(0, 1, 2, 3))
def concatenate(a, b, M, N, w):
    v = jt.concatenate([a, 2.0 * b, a ** 2])          # (10,)
    m = jt.concat([M, N, M[:, :1]], axis=1)            # (2, 6)
    r = jt.concatenate([M, jt.tanh(M)], axis=0)       # (4, 3)
    return jt.sum(v * w) + jt.sum(jt.sin(m)) + jt.sum(r[:, 1] * r[:, 2])


def _stack_args(rng, dt):
    return _normal(rng, (3, 4), dt), _normal(rng, (3, 4), dt), _normal(rng, (3, 3, 4), dt)


@case(args=_stack_args, argnums=(0, 1))
def stack(a, b, W):
    s = jt.stack([a, b, a * b], axis=1)               # (3, 3, 4)
    t = jt.stack([a, b])                               # (2, 3, 4)
    u = jt.stack([jt.sum(a), jt.sum(b * b)])          # (2,)
    return jt.sum(jt.tanh(s) * W) + jt.sum(t[0] * t[1]) + jt.sum(u * u)


def _gather_args(rng, dt):
    return (_normal(rng, (6, 3), dt), np.array([4, 0, 0, 5, 2]), np.array([2, 0, 2], np.int32),
            _normal(rng, (3,), dt))


@case(args=_gather_args, argnums=0, domain="integer indices (repeated), not differentiated")
def gather_take(emb, idx, cols, w):
    rows = jt.take(emb, idx, axis=0)                  # (5, 3)
    picked = jt.gather(emb, cols, axis=1)             # (6, 3)
    flat = jt.take(emb, idx)                          # (5,) of the flattened table
    fancy = emb[idx, 1]                               # (5,)
    return (jt.sum(jt.tanh(rows @ w)) + jt.sum(picked ** 2) + jt.sum(flat * fancy)
            + jt.sum(emb[cols] * 0.5))


def _embedding_args(rng, dt):
    return (_normal(rng, (7, 4), dt), np.array([[1, 3, 3], [6, 0, 2]]), _normal(rng, (4,), dt),
            np.array([1.0, -1.0]).astype(dt))


@case(args=_embedding_args, argnums=(0, 2), domain="2-D integer index array")
def embedding_bag_logistic(table, ids, w, y):
    bags = jt.mean(table[ids], axis=1)                # (2, 4)
    return jt.mean(jt.softplus(-y * (bags @ w)))


def _einsum1_args(rng, dt):
    return _normal(rng, (3, 4), dt), _normal(rng, (4, 3), dt)


@case(args=_einsum1_args, argnums=0)
def einsum_one_operand(x, W):
    col_sums = jt.einsum("ij->j", x)
    return (jt.sum(col_sums ** 2) + jt.sum(jt.einsum("ij->ji", x) * W)
            + jt.einsum("ij->", x * x) + jt.sum(jt.einsum("ij", jt.sin(x))))


def _einsum2_args(rng, dt):
    return _normal(rng, (5, 3), dt), _normal(rng, (3, 4), dt), _normal(rng, (4,), dt)


@case(args=_einsum2_args, argnums=(0, 1, 2))
def einsum_two_operands(x, W, v):
    h = jt.einsum("bi,ij->bj", x, W)
    s = jt.einsum("bj,j->b", jt.tanh(h), v)
    return jt.sum(s ** 2) + jt.einsum("ij,ij->", W, W) + jt.sum(jt.einsum("i,j->ij", v, v[::-1]))


def _bmm3_args(rng, dt):
    return _normal(rng, (2, 3, 4), dt), _normal(rng, (2, 4, 2), dt)


@case(args=_bmm3_args, argnums=(0, 1))
def batched_matmul_3d_3d(A, B):
    C = A @ B                                          # (2, 3, 2)
    return jt.sum(jt.sin(C)) + jt.sum(jt.matmul(B, C[:, :2, :]) ** 2)


def _bmm2_args(rng, dt):
    return _normal(rng, (2, 3, 4), dt), _normal(rng, (4, 5), dt), _normal(rng, (5,), dt)


@case(args=_bmm2_args, argnums=(0, 1, 2))
def batched_matmul_3d_2d(A, W, v):
    H = jt.tanh(A @ W)                                 # (2, 3, 5)
    return jt.sum((H @ v) ** 2) + jt.sum(jt.matmul(A, W[:, :1]))


def _dot_args(rng, dt):
    return _normal(rng, (4,), dt), _normal(rng, (3,), dt), _normal(rng, (4, 3), dt)


@case(args=_dot_args, argnums=(0, 1, 2))
def dot_outer(x, y, M):
    return jt.dot(x, M @ y) + jt.sum(jt.outer(x, y) * M) + jt.dot(x, x) * jt.dot(y, y)


def _reshape_args(rng, dt):
    return _normal(rng, (2, 3, 4), dt), _normal(rng, (6, 2), dt)


@case(args=_reshape_args, argnums=(0, 1))
def reshape_transpose(x, W):
    y = jt.reshape(x, (6, 4))
    z = jt.transpose(y)                                # (4, 6)
    t = jt.transpose(x, (2, 0, 1))                     # (4, 2, 3)
    u = x.reshape(4, -1).T                             # (6, 4)
    return jt.sum(jt.tanh(z @ W)) + jt.sum(t.reshape(4, 6) * u.T) + jt.sum(x.transpose(1, 0, 2)[0])


def _expand_args(rng, dt):
    return _normal(rng, (3, 4), dt), _normal(rng, (3,), dt)


@case(args=_expand_args, argnums=(0, 1))
def expand_squeeze(x, v):
    a = jt.expand_dims(v, 1)                           # (3, 1)
    b = jt.expand_dims(x, 0)                           # (1, 3, 4)
    c = jt.squeeze(b, axis=0)                          # (3, 4)
    d = jt.squeeze(jt.sum(x, axis=1, keepdims=True))   # (3,)
    return jt.sum((a * c) ** 2) + jt.sum(d * v) + jt.sum(jt.sin(jt.squeeze(b[:, :1, :])))


def _broadcast_args(rng, dt):
    return (_normal(rng, (3, 1), dt), _normal(rng, (1, 4), dt), _normal(rng, (4,), dt),
            _scalar(rng.normal(), dt), _normal(rng, (2, 1, 4), dt))


@case(args=_broadcast_args, argnums=(0, 1, 2, 3, 4))
def broadcasting_size1(a, b, c, d, e):
    x = (a * b + c) ** 2 / (1 + a ** 2)                # (3, 4)
    y = jt.tanh(e + x * d)                             # (2, 3, 4)
    return jt.sum(x) + jt.sum(y * c) + jt.sum(jt.broadcast_to(b, (3, 4)) * x)


# -- reductions ------------------------------------------------------------------------------

def _lse_args(rng, dt):
    return _normal(rng, (3, 5), dt, 2.0), _normal(rng, (5,), dt)


@case(args=_lse_args, argnums=0)
def logsumexp_axes(x, w):
    return (jt.sum(jt.logsumexp(x, axis=1)) + jt.logsumexp(x)
            - 0.5 * jt.mean(jt.logsumexp(x, axis=0, keepdims=True) * w))


def _softmax_args(rng, dt):
    t1 = rng.dirichlet(np.ones(5), 4).astype(dt)
    return _normal(rng, (4, 5), dt), t1, _normal(rng, (4, 5), dt)


@case(args=_softmax_args, argnums=0)
def softmax_log_softmax(x, t1, t2):
    p = jt.softmax(x)
    q = jt.log_softmax(x, axis=0)
    return jt.sum(p * t1) + jt.sum(q * t2) + jt.sum(jt.softmax(x, axis=0)[:, 1] ** 2)


def _xent_args(rng, dt):
    return _normal(rng, (3, 4), dt), rng.dirichlet(np.ones(4), 3).astype(dt)


@case(args=_xent_args, argnums=(0, 1), domain="labels: a distribution per row")
def softmax_cross_entropy_dense(logits, labels):
    return jt.mean(jt.softmax_cross_entropy(labels, logits))


def _huber_args(rng, dt):
    y = rng.standard_normal(8)
    mags = np.where(rng.uniform(size=8) < 0.5, rng.uniform(0.1, 0.8, 8), rng.uniform(1.2, 2.5, 8))
    pred = y + rng.choice([-1.0, 1.0], 8) * mags
    return pred.astype(dt), y.astype(dt), 1.0


@case(args=_huber_args, argnums=(0, 1), domain="|pred - y| in [0.1, 0.8] or [1.2, 2.5]: "
                                               "away from 0 and from delta = 1")
def huber_where(pred, y, delta):
    r = pred - y
    a = jt.abs(r)
    return jt.mean(jt.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta)))


def _maxmin_args(rng, dt):
    return _distinct(rng, (4, 5), dt), _normal(rng, (5,), dt)


@case(args=_maxmin_args, argnums=0, domain="no ties: values at least 0.15 apart")
def max_min_reductions(x, w):
    return (jt.sum(jt.max(x, axis=1)) - jt.min(x) + jt.sum(jt.reduce_max(x, axis=0, keepdims=True) * w)
            + jt.sum(jt.min(x, axis=1) ** 2) + jt.max(x[1:3, ::2]) * jt.reduce_min(x[0]))


def _maximum_args(rng, dt):
    def draw(rng):
        return rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x, y = _until(rng, draw, lambda x, y: min(np.abs(x - y).min(), np.abs(x - 0.5 * y).min(),
                                              np.abs(x).min()) > 0.05)
    return x.astype(dt), y.astype(dt)


@case(args=_maximum_args, argnums=(0, 1), domain="no ties between the compared values")
def maximum_minimum_elementwise(x, y):
    return (jt.sum(jt.maximum(x, y) ** 2) - jt.sum(jt.minimum(x, 0.5 * y))
            + jt.sum(jt.maximum(x, 0.0) * y))


def _prod_args(rng, dt):
    return _uniform(rng, 0.6, 1.4, (3, 4), dt), _normal(rng, (3, 1), dt)


@case(args=_prod_args, argnums=0, domain="values in [0.6, 1.4]")
def prod_axes(x, w):
    return (jt.sum(jt.prod(x, axis=0)) + 2 * jt.prod(x[0]) + jt.sum(jt.prod(x, axis=1, keepdims=True) * w)
            + jt.reduce_prod(x[:, :2]))


def _mean_args(rng, dt):
    return _normal(rng, (3, 4, 2), dt), _normal(rng, (1, 4, 2), dt)


@case(args=_mean_args, argnums=0)
def mean_keepdims(x, w):
    m = jt.mean(x, axis=(0, 2), keepdims=True)         # (1, 4, 1)
    c = x - m
    v = jt.mean(c * c, axis=0, keepdims=True)          # (1, 4, 2)
    return jt.sum(v * w) + jt.sum(jt.mean(x, axis=1) ** 2) + jt.reduce_mean(x * x) + x.mean()


def _shape_args(rng, dt):
    return _normal(rng, (6, 2), dt), _normal(rng, (6, 2), dt)


@case(args=_shape_args, argnums=0, domain="reads x.shape[0] and len(x)")
def mse_shape_mean(pred, y):
    n = pred.shape[0]
    return jt.sum((pred - y) ** 2) / n + jt.sum(pred) / len(pred) / pred.shape[1]


# -- elementwise math ------------------------------------------------------------------------

def _clip_args(rng, dt):
    return (_avoiding(rng, -2.0, 2.0, (8,), [-1.0, 1.0, -0.5, 0.5]).astype(dt),
            _normal(rng, (8,), dt))


@case(args=_clip_args, argnums=0, domain="x at least 0.05 from the bounds -1, -0.5, 0.5, 1")
def clip(x, w):
    return (jt.sum(jt.clip(x, -1.0, 1.0) ** 2 * w) + jt.sum(jt.clip(x, None, 0.5))
            + jt.sum(x.clip(-0.5, None) * x))


def _abs_args(rng, dt):
    return _avoiding(rng, -2.0, 2.0, (3, 3), [0.0]).astype(dt), _normal(rng, (3, 3), dt)


@case(args=_abs_args, argnums=0, domain="x at least 0.05 from 0")
def abs_values(x, w):
    return jt.sum(jt.abs(x) * w) + jt.sum(abs(x) ** 1.5) + jt.mean(jt.sign(x) * x ** 3)


def _sqrt_args(rng, dt):
    return _uniform(rng, 0.5, 3.0, (5,), dt), _uniform(rng, 0.2, 1.0, (5,), dt)


@case(args=_sqrt_args, argnums=(0, 1), domain="positive arguments of sqrt")
def sqrt_norms(x, w):
    return jt.sum(jt.sqrt(x)) + jt.sqrt(jt.sum(x * x)) + jt.sum(jt.sqrt(x * w + 1.0))


def _power_args(rng, dt):
    return _uniform(rng, 0.5, 2.0, (4,), dt), _uniform(rng, 0.5, 2.5, (4,), dt)


@case(args=_power_args, argnums=(0, 1), domain="positive bases")
def power(x, p):
    return (jt.sum(x ** 3) + jt.sum(x ** 0.5) + jt.sum(x ** p) + jt.sum(2.0 ** p)
            + jt.sum(jt.power(x, -1.5)) + jt.sum(jt.square(p) / x))


@case(args=lambda rng, dt: (_uniform(rng, -1.5, 1.5, (2, 3), dt),))
def trig_chain(x):
    return jt.sum(jt.tanh(jt.sin(x) * jt.cos(2.0 * x)) + jt.sin(jt.cos(jt.tanh(x)))
                  + jt.arctan(x) * jt.tan(0.5 * x))


# -- pytrees ---------------------------------------------------------------------------------

def _nested_args(rng, dt):
    params = {"layers": [{"w": _normal(rng, (3, 4), dt, 0.6), "b": _normal(rng, (4,), dt, 0.1)},
                         {"w": _normal(rng, (4, 2), dt, 0.6), "b": _normal(rng, (2,), dt, 0.1)}],
              "scale": _uniform(rng, 0.5, 1.5, (2,), dt)}
    return params, _normal(rng, (5, 3), dt), _normal(rng, (5, 2), dt)


@case(args=_nested_args, argnums=0, domain="dict holding a list of dicts")
def pytree_nested_params(params, x, y):
    h = x
    layers = params["layers"]
    for i, layer in enumerate(layers):
        h = h @ layer["w"] + layer["b"]
        if i < len(layers) - 1:
            h = jt.tanh(h)
    return jt.mean((h * params["scale"] - y) ** 2)


def _tuple_args(rng, dt):
    lst = [_normal(rng, (3,), dt), (_normal(rng, (2, 2), dt), _scalar(rng.normal(), dt))]
    d = {"u": _normal(rng, (2,), dt), "v": {"w": _normal(rng, (3,), dt)}}
    return lst, _normal(rng, (3,), dt), d


@case(args=_tuple_args, argnums=(0, 2), domain="a list holding a tuple, a nested dict")
def pytree_tuple_argnums(lst, x, d):
    a, (b, c) = lst
    return (jt.sum(a * d["v"]["w"]) * c + jt.sum(jt.tanh(b @ d["u"])) + jt.sum(x * a)
            + c * c)


# -- unmodified NumPy functions ----------------------------------------------------------------

def _np_softmax_args(rng, dt):
    W = rng.choice([-1, 1], (3, 4)) * rng.uniform(0.2, 1.0, (3, 4))
    X = rng.standard_normal((6, 3))
    Y = np.eye(4)[rng.integers(0, 4, 6)]
    return W.astype(dt), X.astype(dt), Y.astype(dt)


@case(args=_np_softmax_args, argnums=0, domain="weights at least 0.2 from 0 (np.maximum)")
def numpy_softmax_regression(W, X, Y):
    z = X @ W
    e = np.exp(z - np.max(z, axis=1, keepdims=True))
    p = e / np.sum(e, axis=1, keepdims=True)
    return -np.mean(np.sum(Y * np.log(p), axis=1)) + 0.01 * np.sum(np.maximum(W, 0) ** 2)


def _np_mlp_args(rng, dt):
    def draw(rng):
        return (rng.standard_normal((3, 5)) * 0.7, rng.standard_normal((5, 2)) * 0.7,
                rng.standard_normal((4, 3)), rng.standard_normal((4, 2)))
    args = _until(rng, draw, lambda W1, W2, X, y: np.abs(X @ W1).min() > 0.05)
    return cast_floats(args, dt)


@case(args=_np_mlp_args, argnums=(0, 1), domain="pre-activations at least 0.05 from 0")
def numpy_mlp(W1, W2, X, y):
    z = np.dot(X, W1)
    h = np.maximum(z, 0.1 * z)                          # leaky relu
    out = np.tanh(h) @ W2
    reg = np.sum(np.log(1.0 + np.square(W1))) + np.sum(np.sqrt(1.0 + W2 ** 2))
    return np.mean(np.square(out - y)) + 1e-2 * reg


def _np_shapes_args(rng, dt):
    def draw(rng):
        return rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    return cast_floats(_until(rng, draw, lambda a, b: np.abs(a - b.T).min() > 0.05), dt)


@case(args=_np_shapes_args, argnums=(0, 1), domain="a - b.T at least 0.05 from 0 (np.where)")
def numpy_shape_functions(a, b):
    c = np.concatenate([a, b.T], axis=0)               # (4, 3)
    s = np.stack([a, b.T], axis=-1)                    # (2, 3, 2)
    r = np.transpose(np.reshape(c, (3, 4)))            # (4, 3)
    e = np.expand_dims(np.squeeze(s[:, :1, :]), 0)     # (1, 2, 2)
    return (np.sum(np.cos(c) * r) + np.sum(np.outer(a[0], b[:, 1])) + np.sum(s ** 2)
            + np.sum(e * np.clip(e, -5.0, 5.0)) + np.sum(np.where(a > b.T, a, 2.0 * a))
            + np.sum(np.einsum("ij,jk->ik", a, b)))
