"""Functions with derivative rules of the user's own: ``custom_gradient`` (TensorFlow's
interface), ``custom_vjp`` and ``custom_jvp`` (JAX's); ``checkpoint`` and
``custom_root`` (implicit differentiation of a root) on the same record.

All of them make one op record, ``CustomRule``: a call of the function is one tape entry,
or one graph node ``y = custom(y_inner, *x)`` whose value is ``y_inner`` (what the
function computed) and whose VJP is the user's rule, so neither the tape nor the
autodiff pass looks inside the function. The passes drop the node after autodiff (its
``simplify`` rule); the rule's own ops, recorded when the backward pass runs, are
differentiable again (Hessians).

A ``custom_jvp`` rule is a forward-mode rule; reverse mode transposes it: the tangent
it returns is linear in the input tangents, so the VJP of a cotangent ``g`` is the
gradient of ``sum(g * tangent_out)`` with respect to the tangents, taken by a tape over
the rule (eagerly, or over its traced nodes in a compiled function).

``custom_root`` records one such op whose input is the residual ``f(x)`` at the root
``x`` (a constant there) and whose value is ``x``: its VJP gives the residual the
cotangent ``-(∂f/∂x)⁻ᵀ g``, and the tape or the autodiff pass carries that through
``f``'s own ops to whatever ``f`` reads, so nothing needs to find ``f``'s closure.
"""

import contextlib
import functools
import threading
from typing import Any, Callable

import numpy as np

from . import ops
from .errors import ShapeError, UnsupportedError, at_user_line
from .ops.core import Aval, OpRecord, record
from .recording import ACTIVE_TAPES, TRACES, current_trace, thread_tapes
from .tape import GradientTape
from .tensor import Tensor
from .trace import Tracer


class CustomRule(OpRecord):
    """One call of a function with a derivative rule of its own.

    ``vjp_fn(g)`` returns the inputs' cotangents (one per input, None for none); on a
    graph, the node's first input is the function's own result, which gets none.
    """

    name = "custom_gradient"
    kind = "elementwise"            # on a graph, the value passes through
    joint = True
    lowerings = {"scalar": "{0}"}

    def __init__(self, vjp_fn, n_inputs, fn_name, traced, jvp=None):
        self.vjp_fn = vjp_fn
        self.n_inputs = n_inputs
        self.fn_name = fn_name
        self.traced = traced
        # jvp(tangents) -> the output's tangent, tangents one per input (None: zero); forward
        # mode calls it as a joint rule (``jvp.py``); without one it transposes the VJP
        self.tangent_fn = jvp
        if jvp is not None:
            self.jvp = self._jvp

    def _jvp(self, tangents, out, *args):
        return self.tangent_fn(tangents[1:] if self.traced else tangents)

    @staticmethod
    def impl(y, *args):
        return y

    def abstract(self, y, *args, **params):
        return Aval(y.shape, y.dtype)

    def simplify(self, node, producer):
        # autodiff has chosen the VJP: the node is its first input from here on
        return node.inputs[0]

    def joint_vjp(self, g, n_inputs):
        cts = self.vjp_fn(g)
        cts = list(cts) if isinstance(cts, (list, tuple)) else [cts]
        if len(cts) != self.n_inputs:
            raise ValueError(at_user_line(
                f"{self.name}: the gradient function of {self.fn_name} returned "
                f"{len(cts)} gradients for {self.n_inputs} inputs"))
        cts = [None if c is None else (c if isinstance(c, Tensor) else Tensor(c)) for c in cts]
        return [None] + cts if self.traced else cts

    def __repr__(self):
        return f"<{self.name} of {self.fn_name}>"


def _is_float(x):
    return (x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).kind in "fc"


@contextlib.contextmanager
def _unrecorded():
    """This thread's tapes set aside: what runs inside is on none of them."""
    tapes = thread_tapes()
    saved = tapes[:]
    del tapes[:]
    try:
        yield
    finally:
        tapes[:] = saved


def _apply(f_name, rule_name, args, forward, jvp=None):
    """Call ``forward(*args) -> (y, vjp_fn)`` unrecorded, and record one op for it."""
    with _unrecorded():
        y, vjp_fn = forward(*args)
    trace = current_trace() if TRACES else None
    if trace is not None:
        if isinstance(y, Tensor) and _is_float(y):
            rule = CustomRule(vjp_fn, len(args), f_name, traced=True, jvp=jvp)
            rule.name = rule_name
            return trace.bind(rule, [trace.tracer(y), *args], {})
        return y
    if not isinstance(y, Tensor):
        y = Tensor(y)
    if ACTIVE_TAPES and thread_tapes() and _is_float(y):
        rule = CustomRule(vjp_fn, len(args), f_name, traced=False, jvp=jvp)
        rule.name = rule_name
        record(rule, args, {}, y)
    return y


def custom_gradient(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``f(*x) -> (y, grad_fn)``; ``grad_fn(dy)`` returns the inputs' gradients.

    ``f``'s own operations are not recorded: tapes record one entry whose backward
    step is ``grad_fn``. ``grad_fn`` may use jittape ops, so outer tapes can
    differentiate it again. Compiled functions honour it the same way: the autodiff
    pass calls ``grad_fn`` on the traced cotangent.
    """
    name = getattr(f, "__name__", "function")

    @functools.wraps(f, updated=())
    def wrapper(*args):
        return _apply(name, "custom_gradient", args, f)
    return wrapper


def _scatter(n, positions, values):
    """``n`` cotangents: ``values`` at ``positions``, None (a symbolic zero) elsewhere."""
    out = [None] * n
    for k, value in zip(positions, values):
        out[k] = value
    return out


def _pullback(fn, inputs, g, n, positions):
    """The VJP of ``fn()`` (one array) at ``g`` with respect to ``inputs``, by a tape over
    it, as ``n`` cotangents with those of ``inputs`` at ``positions``: how reverse mode
    transposes a JVP rule and recomputes a checkpointed function."""
    with GradientTape() as tape:
        for x in inputs:
            tape.watch(x)
        y = fn()
    return _scatter(n, positions, tape.gradient(y, list(inputs), output_gradients=g))


class _RuleFunction:
    """A function with a rule of its own, JAX's way: the rule is given after
    (``defvjp``/``defjvp``); ``nondiff_argnums`` name arguments the rule takes first and
    that get no gradient."""

    kind = "custom"
    how = "the rule"

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.rule = None

    def _parts(self, args):
        """(name, the nondiff arguments in order, the positions of the others)."""
        name = getattr(self.fun, "__name__", "function")
        if self.rule is None:
            raise TypeError(at_user_line(
                f"{self.kind}: {name} has no rule; call {name}.{self.how} first"))
        for i in self.nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise ValueError(at_user_line(
                    f"{self.kind}({name}): nondiff_argnums holds {i}, but the function got "
                    f"{len(args)} arguments"))
        fixed = sorted({i % len(args) for i in self.nondiff_argnums})
        return name, [args[i] for i in fixed], [i for i in range(len(args)) if i not in fixed]


class custom_vjp(_RuleFunction):
    """A function with a reverse-mode rule of its own (JAX's ``jax.custom_vjp``).

    ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (y, residuals)`` computes the value and what
    the rule keeps; ``bwd(*nondiff_args, residuals, g) -> tuple`` gives one cotangent per
    differentiated argument (None for none). ``y`` is one array.
    """

    kind = "custom_vjp"
    how = "defvjp(fwd, bwd)"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self._in_fwd = threading.local()     # fwd may call the function: then it is plain

    def defvjp(self, fwd, bwd):
        self.rule = (fwd, bwd)
        return self

    def __call__(self, *args):
        if getattr(self._in_fwd, "active", False):
            return self.fun(*args)
        name, fixed_args, diff = self._parts(args)
        fwd, bwd = self.rule

        def forward(*xs):
            self._in_fwd.active = True
            try:
                y, residuals = fwd(*args)
            finally:
                self._in_fwd.active = False

            def vjp_fn(g):
                cts = bwd(*fixed_args, residuals, g)
                cts = list(cts) if isinstance(cts, (list, tuple)) else [cts]
                if len(cts) != len(diff):
                    raise ValueError(at_user_line(
                        f"custom_vjp: the bwd rule of {name} returned {len(cts)} cotangents "
                        f"for {len(diff)} differentiated arguments"))
                return _scatter(len(args), diff, cts)
            return y, vjp_fn
        return _apply(name, "custom_vjp", args, forward)


class custom_jvp(_RuleFunction):
    """A function with a forward-mode rule of its own (JAX's ``jax.custom_jvp``).

    ``f.defjvp(rule)``: ``rule(*nondiff_args, primals, tangents) -> (y, tangent_out)``
    with ``primals`` and ``tangents`` tuples of the other arguments; ``tangent_out`` must
    be linear in the tangents. Reverse mode (tapes, ``jt.grad``) transposes the rule (see
    the module).
    """

    kind = "custom_jvp"
    how = "defjvp(rule)"

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def __call__(self, *args):
        name, fixed_args, diff = self._parts(args)
        rule = self.rule

        def forward(*xs):
            y = self.fun(*args)

            def vjp_fn(g):
                primals = tuple(args[i] for i in diff)
                tangents = tuple(ops.zeros_like(a) for a in primals)
                floats = [k for k, a in enumerate(primals) if _is_float(a)]
                return _pullback(lambda: rule(*fixed_args, primals, tangents)[1],
                                 [tangents[k] for k in floats], g, len(args),
                                 [diff[k] for k in floats])
            return y, vjp_fn
        def tangent_fn(tangents):
            primals = tuple(args[i] for i in diff)
            ts = tuple(ops.zeros_like(args[i]) if tangents[i] is None else tangents[i]
                       for i in diff)
            return rule(*fixed_args, primals, ts)[1]
        return _apply(name, "custom_jvp", args, forward, jvp=tangent_fn)


def checkpoint(fun: Callable[..., Any], policy: Any = None) -> Callable[..., Any]:
    """``fun`` whose intermediate values the backward pass does not keep: it runs ``fun``
    again under a tape and differentiates that (``jax.checkpoint``), trading compute for
    the memory a tape holds. ``fun`` returns one array. ``policy``: None, recompute
    everything (the one policy yet). Compiled, the passes may find the recomputed values
    equal to the forward's and keep those instead: the same numbers either way."""
    if policy is not None:
        raise ValueError(at_user_line(
            f"checkpoint: policy {policy!r} is not supported; None recomputes everything"))
    name = getattr(fun, "__name__", "function")

    @functools.wraps(fun, updated=())
    def wrapper(*args):
        def forward(*xs):
            y = fun(*args)
            if not isinstance(y, (Tensor, np.ndarray, np.generic, float)):
                raise TypeError(at_user_line(
                    f"checkpoint({name}): the function must return one array, "
                    f"not a {type(y).__name__}"))

            def vjp_fn(g):
                tensors = [k for k, a in enumerate(args) if isinstance(a, Tensor) and _is_float(a)]
                return _pullback(lambda: fun(*args), [args[k] for k in tensors], g,
                                 len(args), tensors)
            return y, vjp_fn
        return _apply(name, "checkpoint", args, forward)
    return wrapper


def _shape(x):
    # a tracer's sizes read here are read by the library, not the user (Tracer.shape)
    return tuple(int(d) for d in (x._var.shape if isinstance(x, Tracer) else np.shape(x)))


def custom_root(f: Callable[[Any], Any], x0: Any, solve: Callable[..., Any]) -> Any:
    """The root ``x`` of ``f(x) = 0`` that ``solve(f, x0)`` finds, differentiated
    implicitly (``jax.lax.custom_root``'s derivatives).

    ``solve`` is any solver (bisection, Newton, a fixed-point iteration; Python loops,
    ``jt.while_loop``); its steps are not differentiated, as they carry no gradient a
    bisection could give. The derivatives of ``x`` with respect to what ``f`` reads
    besides ``x`` (its closure: watched tensors, Variables, the arguments of a compiled
    function) come from the implicit function theorem at the root,
    ``dx/dθ = -(∂f/∂x)⁻¹ ∂f/∂θ``: the backward pass builds ``∂f/∂x`` (one reverse sweep
    of ``f`` per element of ``x``) and solves with it, so it must be invertible there.
    ``x0`` gets no gradient.

    Args:
      f: ``f(x)`` returns an array of ``x``'s shape.
      x0: the first guess, a scalar or an array of floats.
      solve: ``solve(f, x0)`` returns the root, of ``x0``'s shape.

    Returns:
      The root ``solve`` found (its value unchanged).
    """
    name = getattr(f, "__name__", "function")
    if not hasattr(x0, "dtype"):                  # a Python number or a list
        x0 = np.asarray(x0, dtype=np.float64)[()]
    if not _is_float(x0):
        raise TypeError(at_user_line(
            f"custom_root({name}): x0 must be floating, not {np.dtype(x0.dtype).name}"))
    shape = _shape(x0)
    with _unrecorded():
        _check_root_shape(name, "f(x0)", f(x0), shape)
        found = solve(f, x0)
    _check_root_shape(name, "solve(f, x0)", found, shape)
    # the value the solver found, cut from its steps: the residual below then reads the
    # root as a constant, and its path to the parameters is all a tape records
    root = ops.stop_gradient(found)
    trace = current_trace() if TRACES else None
    if trace is not None:
        root = trace.tracer(root)          # a tape in the backward pass watches its Var
    elif not (ACTIVE_TAPES and thread_tapes()):
        return root
    residual = f(root)

    def forward(residual):
        def vjp_fn(g):
            # the cotangent of the residual: -(∂f/∂x)⁻ᵀ g; the tape (or the autodiff pass)
            # carries it through f's ops to f's parameters
            lam = _solve_transposed(f, root, g, shape)
            if lam.dtype != residual.dtype:
                lam = ops.cast(lam, residual.dtype)
            return [ops.negative(_first_order_only(name, lam))]
        return root, vjp_fn
    return _apply(name, "custom_root", (residual,), forward)


def _first_order_only(name, lam):
    """``lam``, whose derivative raises. The backward pass evaluates ``f`` at the root
    as a constant, so differentiating it again would miss how the root moves: an error
    rather than a wrong second derivative."""
    def forward(lam):
        def vjp_fn(g):
            raise UnsupportedError(at_user_line(
                f"custom_root({name}): second derivatives through a root are not "
                f"supported (the first are)"))
        return lam, vjp_fn
    return _apply(name, "custom_root", (lam,), forward)


def _check_root_shape(name, what, value, shape):
    found = _shape(value)
    if found != shape:
        raise ShapeError(at_user_line(
            f"custom_root({name}): {what} has shape {found}, x0 has shape {shape}; f must "
            f"return one value per element of x"))


def _solve_transposed(f, x, g, shape):
    """``z`` with ``(∂f/∂x)ᵀ z = g`` at ``x``, the Jacobian from one reverse sweep per
    element of ``f(x)`` (jittape ops: eager and traced alike)."""
    with GradientTape(persistent=True) as tape:
        tape.watch(x)
        fx = f(x)
    if not shape:
        d = tape.gradient(fx, x)
        return g / (ops.zeros_like(x) if d is None else d)
    n = int(np.prod(shape))
    trace = current_trace() if TRACES else None
    if trace is not None:
        trace.reads_sizes = True       # the sweeps and the solve are unrolled per element
    seeds = np.eye(n, dtype=fx.dtype)
    rows = []
    for k in range(n):
        row = tape.gradient(fx, x, output_gradients=seeds[k].reshape(shape))
        rows.append(ops.zeros((n,), x.dtype) if row is None else ops.reshape(row, (n,)))
    jac = ops.stack(rows)                          # jac[k, j] = ∂f_k / ∂x_j
    return ops.reshape(_solve(ops.transpose(jac), ops.reshape(g, (n,)), n), shape)


def _solve(m, b, n):
    """``z`` with ``m @ z = b`` (``m`` of shape ``(n, n)``) by Householder QR and back
    substitution, written with jittape ops so that compiled functions run it too. QR
    needs no pivoting (a data-dependent row order) to be backward stable."""
    dtype = m.dtype
    index = np.arange(n)
    unit = np.eye(n, dtype=dtype)
    two = np.asarray(2, dtype)
    for k in range(n - 1):
        # reflect m[k:, k] onto a multiple of e_k: the sign makes v = x - alpha e_k lose
        # no digits
        col = m[:, k] * (index >= k).astype(dtype)
        norm = ops.sqrt(ops.sum(col * col))
        alpha = ops.where(m[k, k] >= 0, -norm, norm)
        v = col - alpha * unit[k]
        scale = ops.divide(two, ops.sum(v * v))
        m = m - ops.outer(v, ops.matmul(v, m) * scale)
        b = b - v * (ops.dot(v, b) * scale)
    z = None
    for k in range(n - 1, -1, -1):
        known = 0 if z is None else ops.dot(m[k], z)
        step = ((b[k] - known) / m[k, k]) * unit[k]
        z = step if z is None else z + step
    return z
