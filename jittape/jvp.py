"""One JVP step, shared by the forward accumulator on NumPy values and in traced
functions (``forward.ForwardAccumulator``).

A primitive declares its forward-mode rules next to its VJP rules (``Primitive.jvp``):
one rule per input, ``rule(t, out, *args, **params)``, giving that input's part of the
output's tangent for the input's tangent ``t`` (a value that broadcasts to the output's
shape); the parts are summed. Or one rule for all inputs, ``rule(tangents, out, *args,
**params)`` with None for an input without a tangent (a concatenation, a custom_jvp). A record without a rule for an input (a custom gradient,
a rule not written yet) transposes its VJP rule instead: the VJP ``g -> J^T g`` is linear
in ``g``, so its own VJP at any ``g`` applied to ``t`` is ``J t``. A tape over the rule
takes it, on NumPy values or on tracers alike (it costs one more backward step, and
needs the VJP rule to be differentiable, as Hessians need already).
"""

from typing import Any, Callable, List, Optional

from .errors import UnsupportedError, at_user_line


def output_tangent(prim, tangents, out, args, params):
    """The tangent of ``out = prim(*args, **params)`` for the inputs' ``tangents`` (one
    per argument, None for a zero), or None for a zero."""
    from . import ops
    if not prim.differentiable or out.dtype.kind not in "fc":
        return None
    if prim.name == "custom_root":       # (its VJP's solve cannot be transposed again)
        raise UnsupportedError(at_user_line(
            f"forward mode through jt.custom_root ({getattr(prim, 'fn_name', '?')}) is not "
            "supported: differentiate through the root in reverse mode (jt.grad, a tape)"))
    rules = prim.jvp
    if callable(rules):                    # one rule for all inputs (linear in all)
        total = rules(tangents, out, *args, **params) if params else rules(tangents, out, *args)
        return _fit(ops, total, out)
    total = None
    transposed = []
    for k, t in enumerate(tangents):
        if t is None:
            continue
        try:
            rule = rules[k] if rules is not None else None
        except IndexError:
            rule = None
        if rule is None:
            transposed.append(k)
            continue
        part = rule(t, out, *args, **params) if params else rule(t, out, *args)
        if part is not None:
            total = part if total is None else ops.add(total, part)
    if transposed:
        part = _transposed_vjp(prim, tangents, transposed, out, args, params)
        if part is not None:
            total = part if total is None else ops.add(total, part)
    return _fit(ops, total, out)


def _fit(ops, total, out):
    """A tangent of the output's shape and dtype (a part may broadcast to it, or be a
    Python number of a rule)."""
    if total is None:
        return None
    if getattr(total, "shape", None) != out.shape:
        total = ops.broadcast_to(total, out.shape)
    if total.dtype != out.dtype:
        total = ops.cast(total, dtype=out.dtype)
    return total


def _transposed_vjp(prim, tangents, positions, out, args, params):
    """``sum_k J_k t_k`` over ``positions``, from the VJP rules (``forward.py`` sets
    ``TRANSPOSE``: the transposition takes a tape, and tapes sit above this module)."""
    if not prim.joint and prim.vjp is None:
        raise UnsupportedError(at_user_line(
            f"forward mode: {prim.name} has neither a JVP nor a VJP rule"))
    transpose = TRANSPOSE[0]
    assert transpose is not None, "jittape.forward sets it when jittape is imported"
    return transpose(prim, tangents, positions, out, args, params)


# the VJP transposed by a tape (``forward.transposed_vjp``)
TRANSPOSE: List[Optional[Callable[..., Any]]] = [None]
