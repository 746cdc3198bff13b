"""Time to solution of smooth problems: jittape's optimisers against SciPy with
hand-written gradients, JAX (``jax.scipy.optimize``, optax) and PyTorch, side by side.

    python benchmarks/optimize.py [--problems rosen10,rosen100,rosen10000,logreg]
                                  [--methods lbfgs,bfgs,newton-cg,adam]
                                  [--systems byhand,jt_minimize,jt_scipy,jax,torch]
                                  [--repeat N] [--quick] [--timeout S] [--json PATH]

Problems (float64 everywhere: JAX with ``jax_enable_x64``, PyTorch's tensors float64):

* ``rosen10``, ``rosen100``, ``rosen10000``: the chained Rosenbrock function
  ``sum(100 (x[1:] - x[:-1]**2)**2 + (1 - x[:-1])**2)`` (``scipy.optimize.rosen``) in 10,
  100 and 10^4 dimensions from ``x0 = linspace(0.5, 1.5, n)``; the optimum is ``x = 1``,
  ``f = 0``. Not from the classic ``[-1.2, 1, -1.2, 1, ...]``: from there SciPy's BFGS
  ends in the local minimum near ``x[0] = -1`` at n = 10, and SciPy's L-BFGS-B needs
  about 5n iterations at n = 10^4 (49,000: 43 s for one solve), so the columns would
  find different optima or one point would take minutes.
* ``logreg``: logistic regression, the mean log-loss plus ``0.5e-4 |w|^2`` (which makes
  the optimum unique), on 10^5 x 100 standard normal features with labels drawn from a
  logistic model (``numpy.random.default_rng(0)``; 80 MB), from ``w = 0``.

Method families, each compared like with like (one algorithm and stopping rule per row;
L-BFGS keeps 10 pairs and searches lines for the strong Wolfe conditions everywhere):

* ``lbfgs``, stop at ``max|grad| <= 1e-6`` (at most 10^4 iterations): SciPy's L-BFGS-B
  with the hand-written gradient (``ftol=0``, so that the gradient decides there too);
  SciPy's L-BFGS-B with ``jt.scipy.objective(loss, method="L-BFGS-B")``;
  ``jt.minimize(loss, x0, method="lbfgs", steps=10000, tol=1e-6)``; optax's ``lbfgs()``
  stepped by ``jax.lax.while_loop`` inside ``jax.jit`` (the loop of optax's
  documentation, stopping on the same norm); PyTorch's ``LBFGS(line_search_fn=
  "strong_wolfe", tolerance_grad=1e-6, tolerance_change=0)``, one ``step`` of up to
  10^4 iterations.
* ``bfgs``, stop at ``max|grad| <= 1e-6``: SciPy's BFGS with the hand-written gradient
  and with ``jt.scipy.objective``; ``jax.scipy.optimize.minimize(method="BFGS")`` inside
  ``jax.jit``. Not at n = 10^4 (a dense inverse Hessian: 800 MB, n^2 work per step).
* ``newton-cg``: SciPy's Newton-CG (``xtol=1e-8``) with the hand-written Hessian-vector
  product (``scipy.optimize.rosen_hess_prod``; NumPy for the logistic regression) and
  with ``jt.scipy.objective``'s (``jt.hvp``).
* ``adam``, a fixed number of steps at a fixed learning rate (b1 0.9, b2 0.999, eps
  1e-8; Rosenbrock 1000 steps at 1e-2, logistic regression 100 at 1e-2): a NumPy loop
  with the hand-written gradient, ``jt.minimize(loss, x0, method="adam", steps=N,
  learning_rate=lr)``, optax's ``adam`` in ``jax.lax.fori_loop`` inside ``jax.jit``,
  ``torch.optim.Adam`` in a Python loop. Adam has no convergence test: it is timed for
  N steps and its answer checked against the NumPy loop's.

The columns: ``byhand`` (SciPy, or the NumPy Adam loop, with hand-written gradients),
``jt_minimize``, ``jt_scipy`` (SciPy with ``jt.scipy.objective``), ``jax`` (JAX and
optax) and ``torch``. TensorFlow has no column (its L-BFGS and BFGS are in
tensorflow-probability); it is named as missing when it is not installed.

What is measured. Each point (problem, method, column) runs in a fresh process, pinned
to one core (``timing.pin_cores``: XLA's CPU runtime keeps a thread per core whatever
its flags say), with one thread for BLAS, Numba, XLA and PyTorch, an empty
``JITTAPE_CACHE_DIR`` and no JAX compilation cache. The data are made, and converted to
the column's arrays, before any clock. Then:

* cold: the first solve, from before the solver is made (``jax.jit``,
  ``jt.scipy.objective``, ...) to its answer: tracing and compiling included, the
  imports not (``import_s`` says what they took). jittape's first calls are tiered as a
  user's are (they run on NumPy while the kernel compiles in the background); how long
  the compiles ran on after the first solve had returned is ``background_compile_wait_s``;
* warm: after the first solve, after jittape's background compiles have finished (and
  its kernels compiled that had not begun to: on one core a compile waits until the
  calls have run a while on NumPy) and
  one more solve (untimed: the kernels' first calls), the same solve ``--repeat`` times
  with the solver already made, and again while the solves have taken under 0.2 s (at
  most 200: a solve of microseconds runs slower its first few times, in every column);
  the best time is reported (all are in the JSON).

Checks. The reference optimum is SciPy's: Rosenbrock's is ``x = 1``, ``f = 0`` (and SciPy's
L-BFGS-B reaches it); the logistic regression's is SciPy's Newton-CG with the
hand-written Hessian product at ``xtol=1e-14``, run in this process. Every answer (cold
and warm) is checked with the hand-written loss and gradient at the point returned: it
is WRONG when ``f - f*`` exceeds ``1e-6 max(1, |f*|)`` or ``max|x - x*|`` exceeds
``1e-3 max(1, max|x*|)``; "nc" (not converged) when the solver says it failed or the
gradient's largest element exceeds 10 times the tolerance (SciPy's Newton-CG stops on
its step, not on the gradient: there only its own flag counts). An Adam answer
"differs" when ``max|x - x_numpy|`` exceeds 10 times the distance that rounding alone
puts between two runs of the NumPy loop (every gradient scaled by ``1 +- 1e-15``; at
least ``1e-9 max(1, max|x_numpy|)``): Adam on Rosenbrock amplifies rounding, up to
``2e-3`` at n = 10^4 (see ``ADAM_PERTURB``).

The ``jittape`` package is copied from this tree when the run starts and every process
imports the copy, so edits during the run do not mix two versions; the JSON names the
commit and the files changed from it. jittape's runtime helpers are compiled before the
points (``python -m jittape warmup``, into the folder every point shares), as after an
install: no point's cold solve includes them.

Output: a markdown table (rows: problem and method; cells: warm milliseconds / cold
seconds), a table of the targets (``jt.minimize`` warm against the fastest peer whose
answer is right, cold against JAX) and ``benchmarks/results/optimize.json``. The exit
status is 1 when a point failed or an answer is off.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from timing import machine_info, pin_cores, pin_threads  # noqa: E402

MARK = "JITTAPE-OPTIMIZE "
GTOL = 1e-6              # lbfgs, bfgs: max|grad| at which every column stops
XTOL = 1e-8              # newton-cg: SciPy's step criterion, the same in both columns
MAXITER = 10_000
MEMORY = 10              # L-BFGS pairs
LAM = 1e-4               # the logistic regression's L2 penalty, 0.5 LAM |w|^2
ADAM = {"b1": 0.9, "b2": 0.999, "eps": 1e-8}
F_RTOL, X_RTOL, GRAD_SLACK = 1e-6, 1e-3, 10.0
# Adam on Rosenbrock amplifies rounding: it divides each step by sqrt(v), so a gradient
# element near zero carries its rounding into the step whole, and the valley's
# oscillation grows the difference step after step. Scaling every gradient of the NumPy
# loop by 1 +- 1e-15 (a few ulps) moves its answer after 1000 steps by 2e-15 at n = 10,
# 3e-6 at n = 100 and 2e-3 at n = 10^4 (the values: 0.142 to 0.167). An answer is
# checked against that spread (``adam_reference``), never less than ADAM_FLOOR.
ADAM_PERTURB, ADAM_SLACK, ADAM_FLOOR = 1e-15, 10.0, 1e-9

PROBLEMS = ("rosen10", "rosen100", "rosen10000", "logreg")
METHODS = ("lbfgs", "bfgs", "newton-cg", "adam")
SYSTEMS = {                    # key -> label (a column of the table)
    "byhand": "SciPy / NumPy, by hand",
    "jt_minimize": "jt.minimize",
    "jt_scipy": "SciPy + jt.scipy.objective",
    "jax": "JAX / optax",
    "torch": "PyTorch",
}
PEERS = ("byhand", "jax", "torch")            # what jittape's targets compare against
METHOD_LABEL = {"lbfgs": "L-BFGS", "bfgs": "BFGS", "newton-cg": "Newton-CG", "adam": "Adam"}
SCIPY_METHOD = {"lbfgs": "L-BFGS-B", "bfgs": "BFGS", "newton-cg": "Newton-CG"}
# the frameworks a column imports (besides NumPy and SciPy)
FRAMEWORKS = {"jt_minimize": ("jittape",), "jt_scipy": ("jittape",), "jax": ("jax", "optax"),
              "torch": ("torch",), "byhand": ()}


# -- the problems ------------------------------------------------------------------------


@dataclass
class Problem:
    """A problem's data (NumPy, float64), start and hand-written derivatives."""
    name: str
    kind: str                   # "rosen" or "logreg"
    description: str
    x0: object
    data: tuple = ()            # the loss's arguments after x
    repeat: int = 5             # warm solves per point (--repeat overrides)
    adam_steps: int = 1000
    adam_lr: float = 1e-2
    methods: tuple = METHODS
    skipped: dict = field(default_factory=dict)     # method -> why it does not run here
    reference: dict = None      # SciPy's optimum, once computed (for the report)
    adam_spread: float = None   # how far rounding moves the NumPy Adam's answer

    def value(self, x):
        import numpy as np
        from scipy.optimize import rosen
        if self.kind == "rosen":
            return float(rosen(x))
        X, y = self.data
        z = X @ x
        return float(np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * LAM * (x @ x))

    def grad(self, x):
        from scipy.optimize import rosen_der
        from scipy.special import expit
        if self.kind == "rosen":
            return rosen_der(x)
        X, y = self.data
        return X.T @ (expit(X @ x) - y) / len(y) + LAM * x

    def value_and_grad(self, x):
        import numpy as np
        from scipy.special import expit
        X, y = self.data
        z = X @ x
        value = np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * LAM * (x @ x)
        return float(value), X.T @ (expit(z) - y) / len(y) + LAM * x

    def hessp(self, x, p):
        from scipy.optimize import rosen_hess_prod
        from scipy.special import expit
        if self.kind == "rosen":
            return rosen_hess_prod(x, p)
        X, y = self.data
        s = expit(X @ x)
        return X.T @ (s * (1.0 - s) * (X @ p)) / len(y) + LAM * p

    def scipy_functions(self):
        """``fun``, ``jac``, ``hessp`` for ``scipy.optimize.minimize``, written by hand:
        SciPy's own Rosenbrock functions; the logistic regression's value and gradient
        in one function (they share ``X @ w``)."""
        from scipy.optimize import rosen, rosen_der
        if self.kind == "rosen":
            return {"fun": rosen, "jac": rosen_der, "hessp": self.hessp}
        return {"fun": self.value_and_grad, "jac": True, "hessp": self.hessp}


def make_problem(name):
    import numpy as np
    if name.startswith("rosen"):
        n = int(name[len("rosen"):])
        big = n >= 10_000
        return Problem(name, "rosen", f"chained Rosenbrock, n = {n}, x0 = linspace(0.5, 1.5, n)",
                       np.linspace(0.5, 1.5, n), repeat=3 if big else 5,
                       skipped={"bfgs": "a dense n x n inverse Hessian (800 MB, n^2 per step)"}
                       if big else {})
    if name == "logreg":
        from scipy.special import expit
        rng = np.random.default_rng(0)
        n, d = 100_000, 100
        X = rng.standard_normal((n, d))
        w_true = 2.0 * rng.standard_normal(d) / np.sqrt(d)
        y = (rng.random(n) < expit(X @ w_true)).astype(np.float64)
        return Problem(name, "logreg", f"logistic regression, {n} x {d} standard normal "
                       f"features, mean log-loss + 0.5 * {LAM:g} * |w|^2, w0 = 0",
                       np.zeros(d), (X, y), repeat=2, adam_steps=100)
    raise ValueError(f"unknown problem {name!r}; known: {', '.join(PROBLEMS)}")


def losses(B):
    """The problems' losses over a namespace of ops ``B`` (``sum``, ``mean``,
    ``softplus``): the same math, line for line, in every framework. ``x`` first, then
    the data."""

    def rosen(x):
        return B.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def logreg(w, X, y):
        z = X @ w
        return B.mean(B.softplus(z) - y * z) + 0.5 * LAM * B.sum(w * w)

    return {"rosen": rosen, "logreg": logreg}


def jittape_loss(problem):
    """The loss as a function of ``x`` alone (the data read from its closure: inputs of
    the kernel, passed by reference), written with ``jittape.numpy``."""
    from types import SimpleNamespace
    import jittape.numpy as jnp
    B = SimpleNamespace(sum=jnp.sum, mean=jnp.mean, softplus=lambda z: jnp.logaddexp(0.0, z))
    f = losses(B)[problem.kind]
    if not problem.data:
        return f
    X, y = problem.data
    return lambda x: f(x, X, y)


def jax_loss(problem):
    from types import SimpleNamespace
    import jax.numpy as jnp
    B = SimpleNamespace(sum=jnp.sum, mean=jnp.mean, softplus=lambda z: jnp.logaddexp(0.0, z))
    return losses(B)[problem.kind]


def torch_loss(problem):
    from types import SimpleNamespace
    import torch
    zero = torch.zeros((), dtype=torch.float64)
    B = SimpleNamespace(sum=torch.sum, mean=torch.mean,
                        softplus=lambda z: torch.logaddexp(zero, z))
    return losses(B)[problem.kind]


# -- the columns: each makes a solver, a function that solves and returns its answer ----


def _answer(x, fun, nit, nfev, success, message=""):
    import numpy as np
    return {"x": np.array(x, dtype=np.float64).reshape(-1), "fun": float(fun),
            "nit": None if nit is None else int(nit), "nfev": None if nfev is None else int(nfev),
            "success": None if success is None else bool(success), "message": str(message)}


def _scipy_options(method, tol):
    if method == "lbfgs":
        return {"gtol": tol, "ftol": 0.0, "maxcor": MEMORY, "maxiter": MAXITER,
                "maxfun": 2 * MAXITER}
    if method == "bfgs":
        return {"gtol": tol, "maxiter": MAXITER}          # (its norm: the largest element)
    return {"xtol": tol, "maxiter": MAXITER}


def _scipy_run(problem, method, tol, functions):
    from scipy.optimize import minimize
    if method != "newton-cg":
        functions = {k: v for k, v in functions.items() if k != "hessp"}
    options = _scipy_options(method, tol)

    def run():
        r = minimize(x0=problem.x0.copy(), method=SCIPY_METHOD[method], options=options,
                     **functions)
        return _answer(r.x, r.fun, r.nit, r.nfev, r.success, r.message)
    return run


def byhand_scipy(problem, data, method, tol):
    return _scipy_run(problem, method, tol, problem.scipy_functions())


def jt_scipy(problem, data, method, tol):
    import jittape as jt
    objective = jt.scipy.objective(jittape_loss(problem), method=SCIPY_METHOD[method])
    return _scipy_run(problem, method, tol, objective)


def _jt_result(r):
    return _answer(r.x, r.fun, getattr(r, "nit", None), getattr(r, "nfev", None),
                   getattr(r, "success", None), getattr(r, "message", ""))


def jt_minimize_lbfgs(problem, data, method, tol):
    import jittape as jt
    loss = jittape_loss(problem)
    return lambda: _jt_result(jt.minimize(loss, problem.x0.copy(), method="lbfgs",
                                          steps=MAXITER, tol=tol))


def jt_minimize_adam(problem, data, method, tol):
    import jittape as jt
    loss = jittape_loss(problem)
    return lambda: _jt_result(jt.minimize(loss, problem.x0.copy(), method="adam",
                                          steps=problem.adam_steps,
                                          learning_rate=problem.adam_lr))


def numpy_adam(problem, grad):
    """Adam as PyTorch and optax write it (``eps`` outside the square root), in NumPy,
    ``problem.adam_steps`` steps with the gradient ``grad(x)``; the last ``x``."""
    import numpy as np
    b1, b2, eps = ADAM["b1"], ADAM["b2"], ADAM["eps"]
    lr = problem.adam_lr
    x = problem.x0.copy()
    m, v = np.zeros_like(x), np.zeros_like(x)
    for t in range(1, problem.adam_steps + 1):
        g = grad(x)
        m = b1 * m + (1.0 - b1) * g
        v = b2 * v + (1.0 - b2) * (g * g)
        x = x - lr * (m / (1.0 - b1 ** t)) / (np.sqrt(v / (1.0 - b2 ** t)) + eps)
    return x


def byhand_adam(problem, data, method, tol):
    def run():
        x = numpy_adam(problem, problem.grad)
        return _answer(x, problem.value(x), problem.adam_steps, problem.adam_steps, None)
    return run


def optax_lbfgs(problem, data, method, tol):
    """optax's L-BFGS, the loop of its documentation: ``lax.while_loop`` inside
    ``jax.jit``, on the gradient the line search left in the state."""
    import jax
    import jax.numpy as jnp
    import optax
    import optax.tree_utils as otu
    loss = jax_loss(problem)
    opt = optax.lbfgs(memory_size=MEMORY)

    @jax.jit
    def solve(x0, *data):
        f = lambda x: loss(x, *data)                        # noqa: E731
        value_and_grad = optax.value_and_grad_from_state(f)

        def step(carry):
            x, state = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=f)
            return optax.apply_updates(x, updates), state

        def going(carry):
            _, state = carry
            k = otu.tree_get(state, "count")
            g = otu.tree_get(state, "grad")
            return (k == 0) | ((k < MAXITER) & (jnp.max(jnp.abs(g)) > tol))

        x, state = jax.lax.while_loop(going, step, (x0, opt.init(x0)))
        g = otu.tree_get(state, "grad")
        return x, otu.tree_get(state, "value"), otu.tree_get(state, "count"), jnp.max(jnp.abs(g))

    x0 = jnp.asarray(problem.x0)

    def run():
        x, value, count, gmax = jax.block_until_ready(solve(x0, *data))
        return _answer(x, value, count, None, float(gmax) <= tol)
    return run


def jax_bfgs(problem, data, method, tol):
    import jax
    import jax.numpy as jnp
    import jax.scipy.optimize  # noqa: F401  (not loaded with jax.scipy)
    loss = jax_loss(problem)

    @jax.jit
    def solve(x0, *data):
        return jax.scipy.optimize.minimize(lambda x: loss(x, *data), x0, method="BFGS",
                                           options={"gtol": tol, "maxiter": MAXITER})
    x0 = jnp.asarray(problem.x0)

    def run():
        r = jax.block_until_ready(solve(x0, *data))
        return _answer(r.x, r.fun, r.nit, r.nfev, r.success, f"status {int(r.status)}")
    return run


def optax_adam(problem, data, method, tol):
    import jax
    import jax.numpy as jnp
    import optax
    loss = jax_loss(problem)
    opt = optax.adam(problem.adam_lr, b1=ADAM["b1"], b2=ADAM["b2"], eps=ADAM["eps"])
    steps = problem.adam_steps

    @jax.jit
    def solve(x0, *data):
        f = lambda x: loss(x, *data)                        # noqa: E731
        grad = jax.grad(f)

        def body(i, carry):
            x, state = carry
            updates, state = opt.update(grad(x), state, x)
            return optax.apply_updates(x, updates), state

        x, _ = jax.lax.fori_loop(0, steps, body, (x0, opt.init(x0)))
        return x, f(x)
    x0 = jnp.asarray(problem.x0)

    def run():
        x, value = jax.block_until_ready(solve(x0, *data))
        return _answer(x, value, steps, steps, None)
    return run


def torch_lbfgs(problem, data, method, tol):
    import torch
    loss = torch_loss(problem)

    def run():
        x = torch.tensor(problem.x0, requires_grad=True)
        opt = torch.optim.LBFGS([x], lr=1.0, max_iter=MAXITER, max_eval=2 * MAXITER,
                                tolerance_grad=tol, tolerance_change=0.0,
                                history_size=MEMORY, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            value = loss(x, *data)
            value.backward()
            return value
        opt.step(closure)
        state = opt.state[x]
        with torch.no_grad():
            value = loss(x, *data).item()
        return _answer(x.detach().numpy(), value, state["n_iter"], state["func_evals"], None)
    return run


def torch_adam(problem, data, method, tol):
    import torch
    loss = torch_loss(problem)
    steps = problem.adam_steps

    def run():
        x = torch.tensor(problem.x0, requires_grad=True)
        opt = torch.optim.Adam([x], lr=problem.adam_lr, betas=(ADAM["b1"], ADAM["b2"]),
                               eps=ADAM["eps"])
        for _ in range(steps):
            opt.zero_grad()
            loss(x, *data).backward()
            opt.step()
        with torch.no_grad():
            value = loss(x, *data).item()
        return _answer(x.detach().numpy(), value, steps, steps, None)
    return run


# method -> column -> make(problem, data, method, tol) -> run() -> answer
SOLVERS = {
    "lbfgs": {"byhand": byhand_scipy, "jt_minimize": jt_minimize_lbfgs, "jt_scipy": jt_scipy,
              "jax": optax_lbfgs, "torch": torch_lbfgs},
    "bfgs": {"byhand": byhand_scipy, "jt_scipy": jt_scipy, "jax": jax_bfgs},
    "newton-cg": {"byhand": byhand_scipy, "jt_scipy": jt_scipy},
    "adam": {"byhand": byhand_adam, "jt_minimize": jt_minimize_adam, "jax": optax_adam,
             "torch": torch_adam},
}
FORMS = {
    ("lbfgs", "byhand"): "scipy.optimize.minimize(L-BFGS-B, rosen_der / NumPy gradient, ftol=0)",
    ("lbfgs", "jt_minimize"): "jt.minimize(method='lbfgs')",
    ("lbfgs", "jt_scipy"): "scipy.optimize.minimize(L-BFGS-B, **jt.scipy.objective(loss))",
    ("lbfgs", "jax"): "optax.lbfgs() in jax.lax.while_loop under jax.jit",
    ("lbfgs", "torch"): "torch.optim.LBFGS(line_search_fn='strong_wolfe', tolerance_change=0)",
    ("bfgs", "byhand"): "scipy.optimize.minimize(BFGS, hand-written gradient)",
    ("bfgs", "jt_scipy"): "scipy.optimize.minimize(BFGS, **jt.scipy.objective(loss))",
    ("bfgs", "jax"): "jax.scipy.optimize.minimize(method='BFGS') under jax.jit",
    ("newton-cg", "byhand"): "scipy.optimize.minimize(Newton-CG, hand-written hessp)",
    ("newton-cg", "jt_scipy"): "scipy.optimize.minimize(Newton-CG, **jt.scipy.objective(loss)) "
                               "(hessp: jt.hvp)",
    ("adam", "byhand"): "a NumPy loop, hand-written gradient",
    ("adam", "jt_minimize"): "jt.minimize(method='adam')",
    ("adam", "jax"): "optax.adam in jax.lax.fori_loop under jax.jit",
    ("adam", "torch"): "torch.optim.Adam in a Python loop",
}


def tolerance(method):
    return {"lbfgs": GTOL, "bfgs": GTOL, "newton-cg": XTOL}.get(method)


# -- one point, in a fresh process ----------------------------------------------------------


def load(system):
    """Import what ``system`` needs and limit its threads; its versions."""
    import scipy
    import scipy.optimize  # noqa: F401  (the hand-written functions, SciPy's minimize)
    import scipy.special  # noqa: F401
    if system == "jax":
        import jax
        import jax.scipy.optimize  # noqa: F401  (loaded on first use otherwise)
        import optax
        import optax.tree_utils  # noqa: F401
        jax.config.update("jax_enable_x64", True)
        return {"jax": jax.__version__, "optax": optax.__version__,
                "backend": jax.default_backend()}
    if system == "torch":
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        return {"torch": torch.__version__}
    if system.startswith("jt_"):
        import jittape as jt
        import numba
        numba.set_num_threads(1)
        if system == "jt_minimize" and not hasattr(jt, "minimize"):
            raise NotImplementedError("jt.minimize is not in this tree")
        return {"jittape": jt.__version__}
    return {"scipy": scipy.__version__}


def arrays(system, problem):
    """The problem's data as the column's arrays (made before any clock)."""
    if system == "jax":
        import jax.numpy as jnp
        return tuple(jnp.asarray(a) for a in problem.data)
    if system == "torch":
        import torch
        return tuple(torch.from_numpy(a) for a in problem.data)
    return problem.data


_MADE = {}


def solve(system, problem, method, tol, cold, data=None):
    """One solve by column ``system``: ``{"x", "fun", "nit", "nfev", "success",
    "message", "seconds"}``. ``cold``: the clock starts before the solver is made
    (``jax.jit``, ``jt.scipy.objective``, ...) and includes its first run, trace and
    compile; else it times a run of the solver made by an earlier call (made now,
    untimed, where there was none)."""
    key = (system, problem.name, method, tol)
    data = arrays(system, problem) if data is None else data
    start = time.perf_counter()
    if cold or key not in _MADE:
        _MADE[key] = SOLVERS[method][system](problem, data, method, tol)
        if not cold:
            start = time.perf_counter()
    answer = _MADE[key]()
    answer["seconds"] = time.perf_counter() - start
    return answer


def _finish_background_compiles():
    """Wait for the kernels jittape compiles in the background (tiered first calls), so
    that warm solves run compiled code; then tiered calls off, so that a kernel whose
    compile has not begun (on one core it begins once the calls have run a while on
    NumPy: ``compiler.cache.ONE_CORE_HOT``) compiles at its next call."""
    for thread in threading.enumerate():
        if thread.name.startswith("jittape compile"):
            thread.join()
    jittape = sys.modules.get("jittape")
    if jittape is not None:
        jittape.config.tiered = False


WARM_SECONDS = 0.2     # warm solves of a point: at least its repeat, more within this
WARM_MOST = 200


def point(system, problem_name, method, repeat, save):
    """Time one point: print its JSON line, save its answers' ``x`` to ``save``."""
    import numpy as np
    out = {"system": system, "problem": problem_name, "method": method}
    problem = make_problem(problem_name)
    t0 = time.perf_counter()
    out["versions"] = load(system)
    out["import_s"] = time.perf_counter() - t0
    data = arrays(system, problem)
    tol = tolerance(method)
    cold = solve(system, problem, method, tol, cold=True, data=data)
    t0 = time.perf_counter()
    _finish_background_compiles()
    out["background_compile_wait_s"] = time.perf_counter() - t0
    solve(system, problem, method, tol, cold=False, data=data)    # the kernels' first calls
    # at least ``repeat`` solves, and more while they fill WARM_SECONDS: the first few
    # solves of microseconds run slower (caches, predictors) in every column alike
    warm, ends = [], time.perf_counter() + WARM_SECONDS
    while len(warm) < repeat or (len(warm) < WARM_MOST and time.perf_counter() < ends):
        warm.append(solve(system, problem, method, tol, cold=False, data=data))
    np.savez(save, cold=cold.pop("x"), warm=warm[-1].pop("x"))
    for w in warm[:-1]:
        w.pop("x")
    out["cold"] = cold
    out["warm"] = warm[-1]
    out["warm_s"] = [w["seconds"] for w in warm]
    out["warm_best_s"] = min(out["warm_s"])
    print(MARK + json.dumps(out), flush=True)


# -- the parent ---------------------------------------------------------------------------


def _environment(cache_dir, tree):
    env = pin_threads(1, dict(os.environ))
    env.update(JITTAPE_CACHE_DIR=cache_dir, NUMBA_NUM_THREADS="1", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
               PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for var in ("NUMBA_DISABLE_JIT", "JAX_COMPILATION_CACHE_DIR", "JITTAPE_TIERED"):
        env.pop(var, None)
    return env


def run_point(system, problem, method, repeat, work, timeout):
    """One point in a fresh process with an empty jittape cache: its JSON, with
    ``status`` "ok", "timeout" or "error"."""
    tag = f"{system}-{problem}-{method}"
    cache = tempfile.mkdtemp(prefix=f"cache-{tag}-", dir=work)
    save = os.path.join(work, tag + ".npz")
    tree = os.path.join(work, "tree")
    cmd = [sys.executable, os.path.join(tree, "optimize.py"), "--point", system, problem,
           method, str(repeat), save]
    began = time.perf_counter()
    base = {"system": system, "problem": problem, "method": method}
    try:
        proc = subprocess.run(cmd, env=_environment(cache, tree), cwd=tree,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(base, status="timeout", timeout_s=timeout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
            result.update(status="ok", process_s=time.perf_counter() - began, saved=save)
            return result
    tail = proc.stderr.strip().splitlines()
    return dict(base, status="error", exit=proc.returncode,
                reason=tail[-1] if tail else f"exit status {proc.returncode}",
                stderr_tail="\n".join(tail[-30:]))


def reference(problem):
    """SciPy's optimum of ``problem``: ``{"x", "fun", "gmax", "how"}``."""
    import numpy as np
    from scipy.optimize import minimize
    if problem.kind == "rosen":
        x = np.ones_like(problem.x0)
        r = minimize(x0=problem.x0.copy(), method="L-BFGS-B",
                     options=_scipy_options("lbfgs", GTOL), **{
                         k: v for k, v in problem.scipy_functions().items() if k != "hessp"})
        if np.max(np.abs(r.x - x)) > X_RTOL:
            raise RuntimeError(f"{problem.name}: SciPy's L-BFGS-B ended at f = {r.fun}, not "
                               "at x = 1: the start leads elsewhere")
        return {"x": x, "fun": 0.0, "gmax": 0.0,
                "how": "x = 1 (SciPy's L-BFGS-B from x0 ends there)"}
    r = minimize(x0=problem.x0.copy(), method="Newton-CG",
                 options={"xtol": 1e-14, "maxiter": 1000}, **problem.scipy_functions())
    gmax = float(np.max(np.abs(problem.grad(r.x))))
    if not r.success or gmax > 1e-8:
        raise RuntimeError(f"{problem.name}: the reference solve did not converge "
                           f"({r.message}, max|grad| {gmax:.1e})")
    return {"x": r.x, "fun": float(problem.value(r.x)), "gmax": gmax,
            "how": "SciPy Newton-CG, hand-written hessp, xtol=1e-14"}


def adam_reference(problem):
    """The NumPy Adam loop's answer and how far rounding alone moves it: the largest
    distance to the answers of the loop with every gradient scaled by 1 +- ADAM_PERTURB."""
    import numpy as np
    x = numpy_adam(problem, problem.grad)
    spread = 0.0
    for sign in (1.0, -1.0):
        scale = 1.0 + sign * ADAM_PERTURB
        y = numpy_adam(problem, lambda z: problem.grad(z) * scale)
        spread = max(spread, float(np.max(np.abs(y - x))))
    return {"x": x, "spread": spread}


def check(problem, method, answer, x, ref, adam_ref):
    """The answer's figures at ``x`` (by the hand-written loss and gradient) and its
    verdict: "ok", "nc" (not converged), "WRONG" or, for Adam, "differs"."""
    import numpy as np
    f = problem.value(x)
    gmax = float(np.max(np.abs(problem.grad(x))))
    out = {"f": f, "grad_max": gmax, "solver_fun": answer.get("fun"),
           "solver_success": answer.get("success")}
    if not np.all(np.isfinite(x)):
        out["verdict"] = "WRONG"
        return out
    if method == "adam":
        if adam_ref is None:
            out["verdict"] = "unchecked"
            return out
        dev = float(np.max(np.abs(x - adam_ref["x"])))
        allowed = max(ADAM_FLOOR * max(1.0, float(np.max(np.abs(adam_ref["x"])))),
                      ADAM_SLACK * adam_ref["spread"])
        out.update(dx_to_numpy_adam=dev, dx_allowed=allowed, f_gap=f - ref["fun"],
                   verdict="ok" if dev <= allowed else "differs")
        return out
    out["f_gap"] = f - ref["fun"]
    out["dx"] = float(np.max(np.abs(x - ref["x"])))
    if (out["f_gap"] > F_RTOL * max(1.0, abs(ref["fun"]))
            or out["dx"] > X_RTOL * max(1.0, float(np.max(np.abs(ref["x"]))))):
        out["verdict"] = "WRONG"
    elif answer.get("success") is False or (method != "newton-cg"
                                            and gmax > GRAD_SLACK * tolerance(method)):
        out["verdict"] = "nc"
    else:
        out["verdict"] = "ok"
    return out


def _fmt_ms(s):
    ms = 1e3 * s
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _fmt_s(s):
    return f"{s:.2g}" if s < 1 else f"{s:.2f}" if s < 10 else f"{s:.1f}"


def cell(p):
    """A table cell: warm ms / cold s, and a mark where the answer is off."""
    if p is None:
        return ""
    if p["status"] != "ok":
        return p["status"]
    text = f"{_fmt_ms(p['warm_best_s'])} / {_fmt_s(p['cold']['seconds'])}"
    marks = {p["check"]["cold"]["verdict"], p["check"]["warm"]["verdict"]} - {"ok"}
    for mark in ("WRONG", "differs", "nc", "unchecked"):
        if mark in marks:
            return f"{text} {mark}"
    return text


def markdown(points, problems, methods, systems, unavailable):
    by = {(p["problem"], p["method"], p["system"]): p for p in points}
    head = ["problem", "method"] + [SYSTEMS[s] for s in systems]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for prob in problems:
        for method in methods:
            if not any((prob.name, method, s) in by for s in systems):
                continue
            label = METHOD_LABEL[method]
            if method == "adam":
                label += f", {prob.adam_steps} steps"
            cells = []
            for s in systems:
                if s not in SOLVERS[method]:
                    cells.append("")
                elif s in unavailable:
                    cells.append("missing")
                else:
                    cells.append(cell(by.get((prob.name, method, s))))
            rows.append(f"| {prob.name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# jt.minimize's targets: warm, this many times faster than the fastest peer; cold, no
# slower than JAX
WARM_TARGET = {"rosen10": 3.0, "rosen100": 3.0, "rosen10000": 1.0, "logreg": 1.0}


def targets(points, problems, methods):
    """Per row where jt.minimize ran: the fastest peer whose answer is right (warm), the
    speedup over it and the cold solve against JAX's, with the targets."""
    by = {(p["problem"], p["method"], p["system"]): p for p in points}
    out = []
    for prob in problems:
        for method in methods:
            jt = by.get((prob.name, method, "jt_minimize"))
            if not jt or jt["status"] != "ok":
                continue
            peers = [by.get((prob.name, method, s)) for s in PEERS]
            peers = [p for p in peers if p and p["status"] == "ok"
                     and p["check"]["warm"]["verdict"] == "ok"]
            row = {"problem": prob.name, "method": method,
                   "jt_minimize_warm_s": jt["warm_best_s"],
                   "jt_minimize_cold_s": jt["cold"]["seconds"],
                   "jt_minimize_verdict": jt["check"]["warm"]["verdict"],
                   "warm_target": WARM_TARGET[prob.name]}
            if peers:
                fastest = min(peers, key=lambda p: p["warm_best_s"])
                row.update(fastest_peer=fastest["system"],
                           fastest_peer_warm_s=fastest["warm_best_s"])
                row["warm_speedup"] = fastest["warm_best_s"] / jt["warm_best_s"]
                row["warm_met"] = row["warm_speedup"] >= row["warm_target"]
            jax = by.get((prob.name, method, "jax"))
            if jax and jax["status"] == "ok":
                row["jax_cold_s"] = jax["cold"]["seconds"]
                row["cold_over_jax"] = row["jt_minimize_cold_s"] / row["jax_cold_s"]
                row["cold_met"] = row["cold_over_jax"] <= 1.0
            out.append(row)
    return out


def targets_markdown(rows):
    def yes(met):
        return "" if met is None else (" (met)" if met else " (missed)")
    lines = ["| problem | method | fastest peer, warm ms | jt.minimize warm ms | "
             "speedup (target) | JAX cold s | jt.minimize cold s | cold / JAX (target <= 1) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        peer = (f"{SYSTEMS[r['fastest_peer']]} {_fmt_ms(r['fastest_peer_warm_s'])}"
                if "fastest_peer" in r else "none right")
        speed = (f"{r['warm_speedup']:.2f}x (>= {r['warm_target']:g}x){yes(r['warm_met'])}"
                 if "warm_speedup" in r else "")
        cold = (f"{r['cold_over_jax']:.2f}{yes(r['cold_met'])}" if "cold_over_jax" in r else "")
        mark = "" if r["jt_minimize_verdict"] == "ok" else f" {r['jt_minimize_verdict']}"
        lines.append(f"| {r['problem']} | {METHOD_LABEL[r['method']]} | {peer} | "
                     f"{_fmt_ms(r['jt_minimize_warm_s'])}{mark} | {speed} | "
                     f"{_fmt_s(r['jax_cold_s']) if 'jax_cold_s' in r else ''} | "
                     f"{_fmt_s(r['jt_minimize_cold_s'])} | {cold} |")
    return "\n".join(lines)


def _choose(option, known, what, parser):
    chosen = [x.strip() for x in option.split(",") if x.strip()]
    for x in chosen:
        if x not in known:
            parser.error(f"unknown {what} {x!r}; known: {', '.join(known)}")
    return chosen


def _available(systems, tree_jittape):
    """{column: why it cannot run} for the columns whose framework is missing."""
    out = {}
    for s in systems:
        for module in FRAMEWORKS[s]:
            if module != "jittape" and importlib.util.find_spec(module) is None:
                out[s] = f"{module} is not installed"
    if "jt_minimize" in systems and not hasattr(tree_jittape, "minimize"):
        out["jt_minimize"] = "jt.minimize is not in this tree yet"
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--point"]:
        pin_cores(1)
        system, problem, method, repeat, save = argv[1:6]
        point(system, problem, method, int(repeat), save)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--repeat", type=int, help="warm solves per point (default: 5, "
                        "3 for rosen10000, 2 for logreg)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: rosen10 and rosen100, one warm solve")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per point")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "optimize.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.problems, args.repeat = "rosen10,rosen100", args.repeat or 1
    names = _choose(args.problems, PROBLEMS, "problem", parser)
    methods = _choose(args.methods, METHODS, "method", parser)
    systems = _choose(args.systems, SYSTEMS, "system", parser)
    pin_threads(1)                      # (before NumPy loads: the references' BLAS)
    started = time.perf_counter()

    work = tempfile.mkdtemp(prefix="jittape-optimize-")
    tree = os.path.join(work, "tree")
    shutil.copytree(os.path.join(ROOT, "jittape"), os.path.join(tree, "jittape"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("optimize.py", "timing.py"):
        shutil.copy(os.path.join(HERE, name), os.path.join(tree, name))
    sys.path.insert(0, tree)
    import jittape
    unavailable = _available(systems, jittape)
    missing_frameworks = {m: "not installed" for m in ("tensorflow",)
                          if importlib.util.find_spec(m) is None}
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    tree_changes = subprocess.run(["git", "-C", ROOT, "status", "--short", "--", "jittape"],
                                  capture_output=True, text=True).stdout.splitlines()
    print("each point in a fresh process pinned to one core, one thread for BLAS, Numba, "
          "XLA and PyTorch; float64", flush=True)
    for s, why in unavailable.items():
        print(f"not run: {SYSTEMS[s]}: {why}", flush=True)

    problems, points = [], []
    try:
        if any(s.startswith("jt_") and s not in unavailable for s in systems):
            # jittape's runtime helpers compiled (once per machine, kept for every point's
            # process), as after an install and `python -m jittape warmup`
            cache = tempfile.mkdtemp(prefix="cache-warmup-", dir=work)
            subprocess.run([sys.executable, "-m", "jittape", "warmup", "--dtypes", "float64"],
                           env=_environment(cache, tree), cwd=tree, check=True)
        for name in names:
            prob = make_problem(name)
            ref = reference(prob)
            problems.append(prob)
            prob_points = []
            for method in methods:
                if method in prob.skipped:
                    print(f"{name} {method}: skipped ({prob.skipped[method]})", flush=True)
                    continue
                for s in systems:
                    if s not in SOLVERS[method] or s in unavailable:
                        continue
                    repeat = args.repeat or prob.repeat
                    p = run_point(s, name, method, repeat, work, args.timeout)
                    p["form"] = FORMS[(method, s)]
                    p["tolerance"] = tolerance(method)
                    prob_points.append(p)
                    if p["status"] != "ok":
                        print(f"{name} {method} {s}: {p['status']}: {p.get('reason', '')}",
                              flush=True)
                        if p.get("stderr_tail"):
                            print(p["stderr_tail"], file=sys.stderr, flush=True)
            import numpy as np
            saved = {}
            for p in prob_points:
                if p["status"] == "ok":
                    with np.load(p.pop("saved")) as z:
                        saved[(p["method"], p["system"])] = {k: z[k] for k in ("cold", "warm")}
            adam_ref = (adam_reference(prob) if any(p["method"] == "adam" for p in prob_points)
                        else None)
            if adam_ref is not None:
                prob.adam_spread = adam_ref["spread"]
            for p in prob_points:
                if p["status"] != "ok":
                    continue
                xs = saved[(p["method"], p["system"])]
                p["check"] = {k: check(prob, p["method"], p[k], xs[k], ref, adam_ref)
                              for k in ("cold", "warm")}
                c = p["check"]["warm"]
                print(f"{name} {p['method']} {p['system']}: warm {p['warm_best_s'] * 1e3:.3f} ms, "
                      f"cold {p['cold']['seconds']:.3f} s (import {p['import_s']:.2f} s), "
                      f"nit {p['warm'].get('nit')}, f {c['f']:.3e}, max|g| "
                      f"{c['grad_max']:.1e}: {c['verdict']}"
                      + ("" if c["verdict"] == p["check"]["cold"]["verdict"]
                         else f" (cold: {p['check']['cold']['verdict']})"), flush=True)
            prob.reference = {"fun": ref["fun"], "grad_max": ref["gmax"], "how": ref["how"]}
            points.extend(prob_points)
            prob.data = ()                  # (80 MB for logreg)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = markdown(points, problems, methods, systems, unavailable)
    goals = targets(points, problems, methods)
    print()
    print("warm ms (best of the warm solves) / cold s (first solve in a fresh process, "
          "compile included); nc: not converged, WRONG: not SciPy's optimum, differs: "
          "Adam's answer is not the NumPy loop's")
    print(table)
    print()
    goals_table = targets_markdown(goals) if goals else ""
    if goals:
        print("jt.minimize's targets: warm, faster than the fastest peer with a right answer "
              "(SciPy/NumPy by hand, JAX/optax, PyTorch); cold, against JAX")
        print(goals_table)
        print()
    bad = [p for p in points if p["status"] != "ok"
           or {p["check"]["cold"]["verdict"], p["check"]["warm"]["verdict"]} - {"ok"}]
    notes = [f"not run: {SYSTEMS[s]}: {why}" for s, why in unavailable.items()]
    notes += [f"TensorFlow: {why} (no column: its L-BFGS and BFGS are in "
              "tensorflow-probability)" for why in missing_frameworks.values()]
    for n in notes:
        print(n)

    report = {
        "benchmark": "time to solution of smooth problems: jittape against SciPy by hand, "
                     "JAX / optax and PyTorch",
        "command": "python benchmarks/optimize.py " + " ".join(argv),
        "head": head,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tree_changes": tree_changes,
        "machine": dict(machine_info(jittape), peers={
            k: v for p in points for k, v in p.get("versions", {}).items()}),
        "pinning": "each point's process on one core (sched_setaffinity)",
        "threads": "1 for BLAS, Numba, XLA (--xla_cpu_multi_thread_eigen=false) and PyTorch",
        "dtype": "float64 (JAX with jax_enable_x64)",
        "settings": {"gtol": GTOL, "newton_cg_xtol": XTOL, "maxiter": MAXITER,
                     "lbfgs_memory": MEMORY, "l2": LAM, "adam": ADAM,
                     "check": {"f_rtol": F_RTOL, "x_rtol": X_RTOL, "grad_slack": GRAD_SLACK,
                               "adam_perturbation": ADAM_PERTURB, "adam_slack": ADAM_SLACK,
                               "adam_floor": ADAM_FLOOR}},
        "problems": {p.name: {"description": p.description, "n": int(p.x0.size),
                              "warm_repeat": args.repeat or p.repeat,
                              "warm_seconds": WARM_SECONDS, "warm_most": WARM_MOST,
                              "adam": {"steps": p.adam_steps, "learning_rate": p.adam_lr,
                                       "rounding_spread": p.adam_spread},
                              "skipped": p.skipped, "reference": p.reference}
                     for p in problems},
        "systems": {s: {"label": SYSTEMS[s], "status": "missing" if s in unavailable
                        else "available", "reason": unavailable.get(s)} for s in systems},
        "missing_frameworks": missing_frameworks,
        "points": points,
        "targets": goals,
        "table_markdown": table,
        "targets_markdown": goals_table,
        "notes": notes,
        "failed": len(bad),
        "wall_s": time.perf_counter() - started,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {os.path.relpath(args.json, ROOT)} ({report['wall_s']:.0f} s)")
    if bad:
        print(f"{len(bad)} point(s) failed, did not converge or disagree: exit status 1")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
