"""L-BFGS with a strong-Wolfe line search, written with jittape's loops and branches.

The parameters are flattened into one vector ``x`` of ``n`` values. The curvature pairs
``s = x_new - x``, ``y = g_new - g`` are kept in circular buffers of shape
``(memory, n)``; the direction is the two-loop recursion over them (two
``jt.fori_loop``s of ``memory`` steps, the pairs not yet stored masked out), and the
step length comes from a line search that is one ``jt.while_loop``: bracketing, then
zoom (Nocedal & Wright, Algorithms 3.5 and 3.6) as two phases of one loop, each
iteration evaluating the function once. So a whole step, function evaluations
included, compiles into the kernel of the ``jt.function`` that calls it.
"""

from typing import Any, NamedTuple

import numpy as np

from .. import numpy as jnp
from .. import tree
from ..control import cond, fori_loop, while_loop
from ..errors import at_user_line
from ..ops import cast
from ..tensor import Tensor
from .base import (Optimizer, State, check_floating, check_range, dtype_of, full,
                   grads_like, in_dtype, is_traced, like_input, next_step, rate_at,
                   shape_of)


def _size(leaf):
    n = 1
    for d in shape_of(leaf):
        n = n * d                  # (a traced size stays a Dim: its expression is kept)
    return n


def _as(x, dtype):
    """``x`` as a tensor of ``dtype`` (a Python number converted exactly, not through
    float32 as ``jt.constant(1.0)`` would)."""
    if not isinstance(x, Tensor):
        return jnp.asarray(np.asarray(x, dtype))
    return x if x.dtype == dtype else cast(x, dtype)


def _all(*conditions):
    out = conditions[0]
    for c in conditions[1:]:
        out = jnp.logical_and(out, c)
    return out


def _any(*conditions):
    out = conditions[0]
    for c in conditions[1:]:
        out = jnp.logical_or(out, c)
    return out


def ravel(leaves, dtype):
    """The leaves as one vector of ``dtype``."""
    parts = [jnp.reshape(_as(leaf, dtype), (_size(leaf),)) for leaf in leaves]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def unravel(flat, leaves, treedef):
    """A pytree of the structure, shapes and dtypes of ``leaves`` from a vector."""
    out, start = [], 0
    for leaf in leaves:
        size = _size(leaf)
        # (one leaf: the whole vector, not a slice of it, which compiled code would copy)
        piece = jnp.reshape(flat if len(leaves) == 1 else flat[start:start + size],
                            shape_of(leaf))
        out.append(_as(piece, dtype_of(leaf)))
        start = start + size
    return tree.unflatten(treedef, out)


class LineSearch(NamedTuple):
    """The line search's loop carry. ``lo`` is the best step so far that satisfies the
    sufficient-decrease condition (0 at first; the accepted step at the end), ``hi``
    the other end of the bracket once one is found (``zoom``)."""
    count: Any          # int64: function evaluations so far
    done: Any           # bool: the last trial satisfied the strong Wolfe conditions
    zoom: Any           # bool: a bracket [lo, hi] holds a step that does
    alpha: Any          # the next trial step
    a_lo: Any
    f_lo: Any
    d_lo: Any           # the directional derivative at lo: g(x + a_lo d) . d
    g_lo: Any           # the gradient at lo (n values)
    a_hi: Any
    f_hi: Any
    d_hi: Any


def _interpolate(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi):
    """A trial step between ``a_lo`` and ``a_hi``: the minimizer of the cubic matching the
    values and slopes at both ends (Nocedal & Wright, eq. 3.59) when it lies in the
    middle 60% of the interval, else the minimizer of the quadratic through ``f_lo``,
    ``d_lo`` and ``f_hi`` when it lies in the middle 80%, else the midpoint."""
    delta = a_hi - a_lo
    nonzero = delta != 0
    safe = jnp.where(nonzero, delta, 1.0)
    width = jnp.abs(delta)
    low = jnp.minimum(a_lo, a_hi)
    high = jnp.maximum(a_lo, a_hi)

    def inside(a, margin):
        return _all(a >= low + margin * width, a <= high - margin * width)

    d1 = d_lo + d_hi - 3.0 * (f_hi - f_lo) / safe
    disc = d1 * d1 - d_lo * d_hi
    d2 = jnp.sign(delta) * jnp.sqrt(jnp.maximum(disc, 0.0))
    den = d_hi - d_lo + 2.0 * d2
    cubic = a_hi - delta * (d_hi + d2 - d1) / jnp.where(den != 0, den, 1.0)
    cubic_ok = _all(nonzero, disc >= 0, den != 0, inside(cubic, 0.2))
    curvature = 2.0 * (f_hi - f_lo - d_lo * delta)
    quadratic = a_lo - d_lo * delta * delta / jnp.where(curvature > 0, curvature, 1.0)
    quadratic_ok = _all(nonzero, curvature > 0, inside(quadratic, 0.1))
    return jnp.where(cubic_ok, cubic, jnp.where(quadratic_ok, quadratic, a_lo + 0.5 * delta))


def wolfe_line_search(evaluate, x, d, f0, g0, alpha0, c1=1e-4, c2=0.9, max_evaluations=20):
    """A step length ``a`` along ``d`` from ``x`` satisfying the strong Wolfe conditions
    ``f(x + a d) <= f0 + c1 a g0.d`` and ``|g(x + a d).d| <= c2 |g0.d|``.

    Bracketing (Nocedal & Wright, Algorithm 3.5; the trial step doubles while the
    function decreases and the slope stays negative), then zoom (Algorithm 3.6; trial
    steps from ``_interpolate``), as two phases of one ``jt.while_loop`` of at most
    ``max_evaluations`` evaluations. A NaN or infinite value counts as too large.

    Args:
      evaluate: ``evaluate(x) -> (f, g)`` on vectors, ``f`` a scalar of ``x``'s dtype.
      x, d: the point and a descent direction (``g0.d < 0``), vectors.
      f0, g0: the value and the gradient at ``x``.
      alpha0: the first trial step.

    Returns:
      ``(a, f, g, ok, evaluations)``: the step, the value and gradient at ``x + a d``,
      whether the conditions hold there, and the number of evaluations. Where no step
      satisfied them within ``max_evaluations``, ``a`` is the trial with the lowest value
      that satisfied sufficient decrease (0 if none did: ``f0`` and ``g0``).
    """
    dtype = dtype_of(x)
    x, d, f0, g0 = _as(x, dtype), _as(d, dtype), jnp.reshape(_as(f0, dtype), ()), _as(g0, dtype)
    zero = jnp.zeros((), dtype)
    dphi0 = jnp.sum(g0 * d)
    start = LineSearch(count=np.zeros((), np.int64), done=np.array(False),
                       zoom=np.array(False), alpha=_as(alpha0, dtype), a_lo=zero, f_lo=f0,
                       d_lo=dphi0, g_lo=g0, a_hi=zero, f_hi=f0, d_hi=dphi0)

    def searching(c):
        return _all(jnp.logical_not(c.done), c.count < max_evaluations)

    def trial(c):
        f, g = evaluate(x + c.alpha * d)
        f, g = jnp.reshape(_as(f, dtype), ()), _as(g, dtype)
        slope = jnp.sum(g * d)
        # too large: fails sufficient decrease (or is NaN), or is no lower than lo
        high = _any(jnp.logical_not(f <= f0 + c1 * c.alpha * dphi0),
                    _all(c.count > 0, f >= c.f_lo))
        wolfe = jnp.abs(slope) <= -c2 * dphi0
        accept = _all(jnp.logical_not(high), wolfe)
        # the trial becomes lo; where the slope says the minimum lies on the other side
        # of it, the old lo becomes hi (Algorithm 3.5's second zoom call, 3.6's swap)
        turn = _all(jnp.logical_not(_any(high, wolfe)), jnp.where(
            c.zoom, slope * (c.a_hi - c.a_lo) >= 0, slope >= 0))
        to_lo = jnp.logical_not(high)
        a_hi = jnp.where(high, c.alpha, jnp.where(turn, c.a_lo, c.a_hi))
        f_hi = jnp.where(high, f, jnp.where(turn, c.f_lo, c.f_hi))
        d_hi = jnp.where(high, slope, jnp.where(turn, c.d_lo, c.d_hi))
        a_lo = jnp.where(to_lo, c.alpha, c.a_lo)
        f_lo = jnp.where(to_lo, f, c.f_lo)
        d_lo = jnp.where(to_lo, slope, c.d_lo)
        g_lo = jnp.where(to_lo, g, c.g_lo)
        zoom = _any(c.zoom, high, turn)
        alpha = jnp.where(zoom, _interpolate(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi),
                          2.0 * c.alpha)
        return LineSearch(count=c.count + 1, done=accept, zoom=zoom, alpha=alpha, a_lo=a_lo,
                          f_lo=f_lo, d_lo=d_lo, g_lo=g_lo, a_hi=a_hi, f_hi=f_hi, d_hi=d_hi)

    end = while_loop(searching, trial, start)
    return end.a_lo, end.f_lo, end.g_lo, end.done, end.count


class LBFGS(Optimizer):
    """Limited-memory BFGS (Nocedal & Wright, Algorithm 7.4 and 7.5) with a strong-Wolfe
    line search.

    ``update(params, grads, state, value_and_grad=fn)``, ``fn(params) -> (value,
    grads)``, makes one iteration:

    1. ``d = -H g`` by the two-loop recursion over the last ``memory`` pairs
       ``(s_i, y_i)``, with ``H0 = (s.y / y.y) I`` from the newest pair (``I`` when none);
       where ``d`` is not a descent direction, the memory is cleared and ``d = -g``.
    2. ``a`` from ``wolfe_line_search`` (``c1``, ``c2``, at most ``max_linesearch``
       evaluations), first trial ``learning_rate`` (times ``min(1, 1/|g|_1)`` while the
       memory is empty, as PyTorch's first step). ``x = x + a d``.
    3. The pair ``s = a d``, ``y = g_new - g`` is stored unless ``s.y <= eps y.y`` (eps of
       the dtype: the curvature condition failed, as it may where the Wolfe conditions
       were not met); a line search that found no Wolfe step clears the memory.

    The state (``State.slots``) holds ``x``, ``value`` and ``grad`` (the point of the
    last update, its value and gradient: the next update starts there without calling
    ``fn`` when given those params, so a step costs the line search's evaluations
    only), ``s`` and ``y`` (``(memory, n)``), ``rho`` (``1 / s.y``), ``head`` (the row
    the next pair goes to), ``count`` (pairs stored) and ``evaluations`` (calls of
    ``fn`` so far). ``grads`` may be None: the state's gradient is used (computed by
    ``fn`` when ``params`` are not the state's point).
    """

    slot_names = ("count", "evaluations", "grad", "head", "rho", "s", "value", "x", "y")

    def __init__(self, learning_rate=1.0, memory=10, max_linesearch=20, c1=1e-4, c2=0.9):
        super().__init__(learning_rate)
        self.memory = int(memory)
        self.max_linesearch = int(max_linesearch)
        if self.memory < 1 or self.max_linesearch < 1:
            raise ValueError(at_user_line(
                f"LBFGS: memory and max_linesearch must be >= 1, got memory={memory}, "
                f"max_linesearch={max_linesearch}"))
        self.c1 = check_range("LBFGS", "c1", c1, 0.0, 1.0)
        self.c2 = check_range("LBFGS", "c2", c2, 0.0, 1.0)
        if not 0 < self.c1 < self.c2:
            raise ValueError(at_user_line(
                f"LBFGS: the Wolfe conditions need 0 < c1 < c2 < 1, got c1={c1}, c2={c2}"))

    def _config(self):
        return {"learning_rate": self.learning_rate, "memory": self.memory,
                "max_linesearch": self.max_linesearch, "c1": self.c1, "c2": self.c2}

    def init(self, params: Any) -> State:
        leaves = [params] if params.__class__ is np.ndarray else tree.flatten(params)[0]
        check_floating("LBFGS.init", leaves)
        if not leaves:
            raise ValueError(at_user_line("LBFGS.init: params hold no arrays"))
        if len(leaves) == 1 and leaves[0].__class__ is np.ndarray:    # (no tree walk)
            dtype, n = leaves[0].dtype, leaves[0].size
        else:
            dtype = np.result_type(*[dtype_of(leaf) for leaf in leaves])
            n = 0
            for leaf in leaves:
                n = n + _size(leaf)
        like = next((leaf for leaf in leaves if is_traced(leaf)), leaves[0])
        m = self.memory
        slots = {
            "x": full(like, (n,), np.nan, dtype),      # (no point yet: never equal)
            "value": full(like, (), np.nan, dtype),
            "grad": full(like, (n,), 0.0, dtype),
            "s": full(like, (m, n), 0.0, dtype),
            "y": full(like, (m, n), 0.0, dtype),
            "rho": full(like, (m,), 0.0, dtype),
            "head": np.int64(0),
            "count": np.int64(0),
            "evaluations": np.int64(0),
        }
        return State(step=np.int64(0), slots=slots)

    def _check(self, name, state, n, dtype):
        if not isinstance(state, State) or set(state.slots) != set(self.slot_names):
            got = (f"slots {sorted(state.slots)}" if isinstance(state, State)
                   else type(state).__name__)
            raise ValueError(at_user_line(
                f"{name}: state must be what LBFGS.init returned, got {got}"))
        sizes = {k: tuple(int(d) for d in shape_of(state.slots[k])) for k in ("x", "s")}
        if sizes["x"] != (int(n),) or sizes["s"] != (self.memory, int(n)):
            raise ValueError(at_user_line(
                f"{name}: the state is for {sizes['x'][0]} values with memory "
                f"{sizes['s'][0]}, the params have {int(n)} values and memory is "
                f"{self.memory}: the state was made by init for other params"))

    def update(self, params: Any, grads: Any, state: State, value_and_grad: Any = None):
        """One L-BFGS iteration: ``(new params, new state)``.

        Args:
          params: a pytree of float arrays.
          grads: the gradient at ``params`` (the structure of ``params``), or None to
            use the state's.
          state: what ``init`` or the last ``update`` returned.
          value_and_grad: ``fn(params) -> (value, grads)``, the objective and its
            gradient (e.g. ``jt.value_and_grad(loss)``, or a function with a tape).
        """
        name = "LBFGS.update"
        if value_and_grad is None or not callable(value_and_grad):
            raise TypeError(at_user_line(
                f"{name} needs value_and_grad=fn, fn(params) -> (value, grads): its line "
                "search evaluates the function (e.g. value_and_grad=jt.value_and_grad(loss))"))
        leaves, treedef = tree.flatten(params)
        check_floating(name, leaves)
        if not leaves:
            raise ValueError(at_user_line(f"{name}: params hold no arrays"))
        dtype = np.result_type(*[dtype_of(leaf) for leaf in leaves])
        n = 0
        for leaf in leaves:
            n = n + _size(leaf)
        self._check(name, state, n, dtype)
        slots = {k: _as(v, dtype) if k not in ("head", "count", "evaluations") else v
                 for k, v in state.slots.items()}

        def flat_grads(g, what):
            found = grads_like(name, params, g, what)     # (a None gradient is zero)
            return ravel([z if z is not None else full(leaf, shape_of(leaf), 0.0,
                                                          dtype_of(leaf))
                          for z, leaf in zip(found, leaves)], dtype)

        def evaluate(v):
            value, g = value_and_grad(unravel(v, leaves, treedef))
            if int(np.prod(shape_of(value))) != 1:
                raise ValueError(at_user_line(
                    f"{name}: value_and_grad must return a scalar value, got shape "
                    f"{tuple(int(d) for d in shape_of(value))}"))
            return jnp.reshape(_as(value, dtype), ()), flat_grads(g, "value_and_grad's gradients")

        x = ravel(leaves, dtype)
        same = jnp.sum(jnp.where(x == slots["x"], 0, 1)) == 0
        # x an operand of the branches: a branch's work that reads only outer values
        # is computed before the branch (as a loop body's is), so the evaluation would
        # run whichever branch is taken
        f0, g0 = cond(same, lambda v: (slots["value"], slots["grad"]), evaluate, x)
        evaluations = slots["evaluations"] + jnp.where(same, 0, 1)
        if grads is not None:
            g0 = flat_grads(grads, "grads")

        head, count = slots["head"], slots["count"]
        d = -self._two_loop(g0, slots["s"], slots["y"], slots["rho"], head, count)
        descent = jnp.sum(g0 * d) < 0
        d = jnp.where(descent, d, -g0)
        count = jnp.where(descent, count, 0)
        lr = _as(in_dtype(rate_at(self.learning_rate, state.step), dtype), dtype)
        norm1 = jnp.sum(jnp.abs(g0))
        first = jnp.where(norm1 > 1, 1.0 / jnp.where(norm1 > 1, norm1, 1.0), 1.0)
        alpha0 = lr * jnp.where(count == 0, first, 1.0)
        a, f1, g1, ok, used = wolfe_line_search(
            evaluate, x, d, f0, g0, alpha0, self.c1, self.c2, self.max_linesearch)

        # (no step: the point as it was; 0 * an infinite direction would be NaN)
        x1 = jnp.where(a == 0, x, x + a * d)
        s = x1 - x
        y = g1 - g0
        sy = jnp.sum(s * y)
        keep = _all(ok, sy > float(np.finfo(dtype).eps) * jnp.sum(y * y))
        rows = jnp.arange(self.memory)
        at = _all(rows == head, keep)
        S, Y = slots["s"], slots["y"]
        new = {
            "x": x1, "value": f1, "grad": g1,
            # one row written (in place in a compiled loop: codegen.cpu.Pool), where a
            # select over the whole history copied 2 x memory x n values a step
            "s": S.at[head].set(jnp.where(keep, s, S[head])),
            "y": Y.at[head].set(jnp.where(keep, y, Y[head])),
            "rho": jnp.where(at, 1.0 / jnp.where(keep, sy, 1.0), slots["rho"]),
            "head": jnp.where(keep, jnp.mod(head + 1, self.memory), head),
            "count": jnp.where(ok, jnp.where(keep, jnp.minimum(count + 1, self.memory), count),
                               0),
            "evaluations": evaluations + used,
        }
        new_state = State(step=next_step(state.step),
                          slots={k: like_input(v, state.slots[k]) for k, v in new.items()})
        new_params = unravel(x1, leaves, treedef)
        new_leaves = [like_input(p, old) for p, old in zip(tree.flatten(new_params)[0], leaves)]
        return tree.unflatten(treedef, new_leaves), new_state

    def _two_loop(self, g, S, Y, rho, head, count):
        """``H g`` for the L-BFGS inverse-Hessian approximation ``H`` of the ``count``
        newest pairs (rows ``head - 1``, ``head - 2``, ... of ``S`` and ``Y``, mod
        ``memory``); Nocedal & Wright, Algorithm 7.4."""
        m = self.memory
        rows = jnp.arange(m)
        newest = jnp.mod(head - 1, m)
        y_new = Y[newest]
        scale = rho[newest] * jnp.sum(y_new * y_new)          # y.y / s.y
        gamma = 1.0 / jnp.where(_all(count > 0, scale > 0), scale, 1.0)

        def newest_first(j, carry):
            q, alphas = carry
            i = jnp.mod(head - 1 - j, m)
            a = jnp.where(j < count, rho[i] * jnp.sum(S[i] * q), 0.0)
            return q - a * Y[i], jnp.where(rows == i, a, alphas)

        q, alphas = fori_loop(0, m, newest_first, (g, jnp.zeros((m,), dtype_of(g))))

        def oldest_first(j, r):
            i = jnp.mod(head - count + j, m)
            b = rho[i] * jnp.sum(Y[i] * r)
            return r + jnp.where(j < count, alphas[i] - b, 0.0) * S[i]

        return fori_loop(0, m, oldest_first, gamma * q)

    def apply_gradients(self, grads_and_vars):
        raise TypeError(at_user_line(
            "LBFGS.apply_gradients: L-BFGS needs function values for its line search; "
            "use update(params, grads, state, value_and_grad=fn)"))
