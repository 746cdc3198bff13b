"""Forward mode: ``ForwardAccumulator``, TensorFlow's ``tf.autodiff.ForwardAccumulator``.

Opened on primals and their tangents, it computes, for every op applied to a value that
has a tangent, the tangent of the op's result, at once (``jvp.output_tangent``: the
primitive's JVP rules), and ``jvp(y)`` gives it. It sits with the tapes of its thread
(``recording``), so the hooks that feed tapes feed it too: on NumPy values
(``ops.core.record``), and in a traced function (``ops.core.record_traced``), where the
tangents are traced values and the compiled function computes them with the rest.

It composes with tapes both ways. A tape opened inside it whose gradient is taken
inside it gives gradients whose tangents the accumulator knows (forward-over-reverse: a
Hessian-vector product); an accumulator inside a tape computes its tangents with ops the
tape records (reverse-over-forward). While it computes a tangent it does not record its
own ops (an accumulator outside it does: higher-order forward mode).
"""

import weakref
from typing import Any, Dict

from . import ops, tree
from .errors import at_user_line, numpy_errors
from .ir import Var
from . import jvp as jvp_module
from .jvp import output_tangent
from .tape import GradientTape
from .vjp import input_cotangents
from .recording import ACTIVE_TAPES, current_trace, thread_tapes
from .tensor import Tensor


class ForwardAccumulator:
    """Computes Jacobian-vector products of the ops run inside its ``with`` block.

    ``primals``: a tensor or variable, or a pytree of them; ``tangents``: arrays of the
    same structure and shapes (the direction). ``jvp(target)`` is the directional
    derivative of ``target`` (any pytree of tensors): None where the target does not
    depend on the primals (zeros with ``unconnected_gradients="zero"``).
    """

    _forward = True                   # (GradientTape: False; record() tells them apart)
    _watch_accessed = False
    _persistent = True

    def __init__(self, primals: Any, tangents: Any) -> None:
        p_leaves, p_def = tree.flatten(primals)
        t_leaves, t_def = tree.flatten(tangents)
        if p_def != t_def:
            raise ValueError(at_user_line(
                f"ForwardAccumulator: tangents must have the primals' structure: primals "
                f"{p_def}, tangents {t_def}"))
        self._by_id: Dict[int, Any] = {}     # tensor or variable id -> tangent
        self._by_var: Dict[Any, Any] = {}    # Var of a traced value -> tangent
        self._refs: Dict[int, Any] = {}      # id -> weak reference to the computed value
        self._trace = current_trace()
        self._recording = False
        self._busy = False
        self._errors: Any = None
        for k, (p, t) in enumerate(zip(p_leaves, t_leaves)):
            if not isinstance(p, Tensor):
                raise TypeError(at_user_line(
                    f"ForwardAccumulator: primals must be jittape Tensors or Variables, got "
                    f"{type(p).__name__} (primal {k} of the flattened primals)"))
            if p.dtype.kind not in "fc":
                raise TypeError(at_user_line(
                    f"ForwardAccumulator: primal {k} has dtype {p.dtype}; only floating-point "
                    "values have tangents"))
            t = _tangent_value(t, p, k)
            if self._get(p) is not None:
                raise ValueError(at_user_line(
                    f"ForwardAccumulator: primal {k} is given twice (the same tensor): "
                    "give each primal once, with the sum of its tangents"))
            self._set(p, t)

    # `watched` for the checks that tapes share: a tangent is lost with its value too
    @property
    def _watched(self):
        return _Keys(self)

    def _set(self, p, t):
        var = getattr(p, "_var", None)
        if var is not None:
            self._by_var[var] = t
        else:
            self._by_id[p._id] = t

    def _get(self, x, var=None):
        if var is None:
            var = getattr(x, "_var", None)
        if var is not None and var.__class__ is Var:
            t = self._by_var.get(var)
            if t is not None:
                return t
            trace = self._trace
            owner = trace.read_owner.get(var.id) if trace is not None else None
            if owner is not None:
                return self._by_id.get(owner._id)
        if isinstance(x, Tensor):
            return self._by_id.get(x._id)
        return None

    # -- context ----------------------------------------------------------------
    def __enter__(self) -> "ForwardAccumulator":
        if self._recording:
            raise ValueError(at_user_line("this ForwardAccumulator is already recording"))
        if current_trace() is not self._trace:
            raise RuntimeError(at_user_line(
                "ForwardAccumulator: made outside a compiled function and entered inside "
                "one (or the other way round); make it where it is used"))
        ACTIVE_TAPES.append(self)
        thread_tapes().append(self)
        self._recording = True
        # NumPy's floating-point warnings of the ops at the user's lines (as tapes do)
        self._errors = numpy_errors()
        self._errors.enter()
        return self

    def __exit__(self, *exc):
        if self._errors is not None:
            self._errors.exit()
            self._errors = None
        if self._recording:
            ACTIVE_TAPES.remove(self)
            tapes = thread_tapes()
            if self in tapes:
                tapes.remove(self)
            self._recording = False

    # -- the hooks (ops.core) -----------------------------------------------------
    def _record(self, prim, args, params, result):
        """An op applied to NumPy values (``ops.core.record``)."""
        if self._busy:
            return
        tangents = [self._by_id.get(a._id) if isinstance(a, Tensor) else None for a in args]
        if not any(t is not None for t in tangents):
            return
        self._busy = True
        try:
            t = output_tangent(prim, tangents, result, args, params)
        finally:
            self._busy = False
        if t is not None:
            by_id, key = self._by_id, result._id
            by_id[key] = t
            # the tangent lives as long as its value (TensorFlow's accumulator holds
            # them weakly too): a long eager loop does not keep every step's tangent
            self._refs[key] = weakref.ref(result, lambda _, key=key, by_id=by_id,
                                          refs=self._refs: (by_id.pop(key, None),
                                                            refs.pop(key, None)))

    def _record_traced(self, prim, args, inputs, out, trace):
        """An op applied in a traced function (``ops.core.record_traced``)."""
        from .trace import Tracer
        if self._busy or trace is not self._trace:
            return
        tangents = [self._get(a, v if v.__class__ is Var else None) if isinstance(a, Tensor)
                    or v.__class__ is Var else None for a, v in zip(args, inputs)]
        if not any(t is not None for t in tangents):
            return
        if prim.kind == "loop":
            # (scan, while_loop, cond and switch carry tangents themselves: control.py)
            from .errors import UnsupportedError
            raise UnsupportedError(at_user_line(
                f"forward mode: {prim.name}, a loop of the compiled code that carries no "
                "tangents (a Jacobian's loop over its rows, a tape's loop inside the "
                "accumulator); compute it outside the accumulator"))
        values = [Tracer._of(v, trace) if v.__class__ is Var else v for v in inputs]
        self._busy = True
        try:
            t = output_tangent(prim, tangents, Tracer._of(out, trace), values, out.node.params)
        finally:
            self._busy = False
        if t is not None:
            self._by_var[out] = t

    # -- results ----------------------------------------------------------------
    def jvp(self, primals: Any, unconnected_gradients: Any = "none") -> Any:
        """The tangent of each tensor in ``primals`` (a pytree), None where it does not
        depend on the accumulator's primals (zeros with ``unconnected_gradients``
        ``"zero"``)."""
        from .tape import UnconnectedGradients, _unconnected
        zero = _unconnected(unconnected_gradients) is UnconnectedGradients.ZERO
        leaves, treedef = tree.flatten(primals)
        out = []
        for k, x in enumerate(leaves):
            if not isinstance(x, Tensor):
                raise TypeError(at_user_line(
                    f"ForwardAccumulator.jvp: expected jittape Tensors, got "
                    f"{type(x).__name__} (leaf {k} of the flattened primals)"))
            t = self._get(x)
            if t is None and zero:
                t = ops.zeros_like(x)
            out.append(t)
        return tree.unflatten(treedef, out)


class _Keys:
    """``x._id in accumulator._watched``: whether a value has a tangent here."""

    def __init__(self, acc):
        self.acc = acc

    def __contains__(self, key):
        return key in self.acc._by_id or key in self.acc._by_var

    def add(self, key):            # (what a tape's watch would do: nothing here)
        pass


def _tangent_value(t, p, k):
    """A tangent as a tensor of its primal's shape and dtype."""
    import numpy as np
    if not isinstance(t, Tensor):
        t = Tensor(np.asarray(t, dtype=p.dtype))
    if tuple(t.shape) != tuple(p.shape):
        raise ValueError(at_user_line(
            f"ForwardAccumulator: tangent {k} has shape {tuple(t.shape)}, its primal "
            f"{tuple(p.shape)}"))
    if t.dtype != p.dtype:
        t = ops.cast(t, dtype=p.dtype)
    return t


def transposed_vjp(prim, tangents, positions, out, args, params):
    """``sum_k J_k t_k`` over ``positions``, from the VJP rules: the gradient of
    ``sum(t_k * vjp_k(g))`` with respect to ``g`` (the rules are linear in ``g``)."""
    g = ops.zeros_like(out)
    with GradientTape() as tape:
        tape.watch(g)
        keys = [(k, k) for k in positions]
        found = input_cotangents(prim, g, out, args, params, keys, set(positions))
        if not found:
            return None
        total = None
        for k, ct in found:
            term = ops.sum(ops.multiply(ct, tangents[k]))
            total = term if total is None else ops.add(total, term)
    return tape.gradient(total, g)


jvp_module.TRANSPOSE[0] = transposed_vjp
