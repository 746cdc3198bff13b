"""One VJP step, shared by the eager tape and the autodiff pass.

Both sweeps (``tape.GradientTape`` on NumPy values, ``autodiff.backward`` on tracers)
call the same rules of the op records through this one function, so a custom
gradient, a per-input rule and a joint rule behave alike on both paths.
"""

from .ops.core import shape_of
from .ops.elementwise import conj_of, is_complex, unbroadcast
from .tensor import Tensor


def input_cotangents(prim, g, out, args, params, inputs, relevant, complex_g=None):
    """The VJP step of one op application, shared by the tape and the autodiff pass.

    ``inputs`` holds (input position, key) pairs; the result holds (key, cotangent) for
    each key in ``relevant`` whose cotangent is not a symbolic zero. A custom gradient
    (``prim.joint``) gives all inputs' cotangents in one call; a primitive has one rule
    per input.

    A holomorphic op's rules are written for a real cotangent: a complex one goes back
    as ``conj(rule(conj(g)))`` (API.md's convention: the rule is linear in g), here once
    for every rule. An op that broadcasts its inputs (``prim.broadcasts``) has each
    rule's result summed back to its input's shape here. ``complex_g``: whether ``g``
    is complex, when the caller knows.
    """
    if prim.holomorphic and (is_complex(g) if complex_g is None else complex_g):
        found = input_cotangents(prim, conj_of(g), out, args, params, inputs, relevant, False)
        return [(key, conj_of(ct)) for key, ct in found]
    cts = prim.joint_vjp(g, len(args)) if prim.joint else None
    found = []
    for k, key in inputs:
        if key not in relevant:
            continue
        if cts is not None:
            ct = cts[k]
        else:
            rule = prim.vjp[k]
            if rule is None:
                continue
            ct = rule(g, out, *args, **params) if params else rule(g, out, *args)
        if ct is not None:
            if prim.broadcasts:
                # (eagerly, shapes read from the values: no property call per rule)
                a = args[k]
                shape = a._value.shape if a.__class__ is Tensor else shape_of(a)
                if (ct._value.shape if ct.__class__ is Tensor else ct.shape) != shape:
                    ct = unbroadcast(ct, shape)
            found.append((key, ct))
    return found
