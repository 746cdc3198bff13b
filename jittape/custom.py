"""Functions with derivative rules of the user's own: ``custom_gradient`` (TensorFlow's
interface), ``custom_vjp`` and ``custom_jvp`` (JAX's).

All three make one op record, ``CustomRule``: a call of the function is one tape entry,
or one graph node ``y = custom(y_inner, *x)`` whose value is ``y_inner`` (what the
function computed) and whose VJP is the user's rule, so neither the tape nor the
autodiff pass looks inside the function. The passes drop the node after autodiff (its
``simplify`` rule); the rule's own ops, recorded when the backward pass runs, are
differentiable again (Hessians).

A ``custom_jvp`` rule is a forward-mode rule; reverse mode transposes it: the tangent
it returns is linear in the input tangents, so the VJP of a cotangent ``g`` is the
gradient of ``sum(g * tangent_out)`` with respect to the tangents, taken by a tape over
the rule (eagerly, or over its traced nodes in a compiled function).
"""

import functools
import threading

import numpy as np

from . import ops
from .errors import at_user_line
from .ops.core import Aval, OpRecord, record
from .recording import ACTIVE_TAPES, TRACES, current_trace, thread_tapes
from .tape import GradientTape
from .tensor import Tensor


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
        self.jvp = jvp

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


def _apply(f_name, rule_name, args, forward, jvp=None):
    """Call ``forward(*args) -> (y, vjp_fn)`` unrecorded, and record one op for it."""
    tapes = thread_tapes()
    saved = tapes[:]
    del tapes[:]
    try:
        y, vjp_fn = forward(*args)
    finally:
        tapes[:] = saved
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


def custom_gradient(f):
    """Decorate ``f(*x) -> (y, grad_fn)``; ``grad_fn(dy)`` returns the inputs' gradients.

    ``f``'s own operations are not recorded: tapes record one entry whose backward
    step is ``grad_fn``. ``grad_fn`` may use jittape ops, so outer tapes can
    differentiate it again. Compiled functions honour it the same way: the autodiff
    pass calls ``grad_fn`` on the traced cotangent.
    """
    name = getattr(f, "__name__", "function")

    @functools.wraps(f)
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
        functools.update_wrapper(self, fun)
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
        return _apply(name, "custom_jvp", args, forward, jvp=rule)


def checkpoint(fun, policy=None):
    """``fun`` whose intermediate values the backward pass does not keep: it runs ``fun``
    again under a tape and differentiates that (``jax.checkpoint``), trading compute for
    the memory a tape holds. ``fun`` returns one array. ``policy``: None, recompute
    everything (the one policy yet). Compiled, the passes may find the recomputed values
    equal to the forward's and keep those instead: the same numbers either way."""
    if policy is not None:
        raise ValueError(at_user_line(
            f"checkpoint: policy {policy!r} is not supported; None recomputes everything"))
    name = getattr(fun, "__name__", "function")

    @functools.wraps(fun)
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
