"""One VJP step, shared by the eager tape and the autodiff pass.

Both sweeps (``tape.GradientTape`` on NumPy values, ``autodiff.backward`` on tracers)
call the same rules of the op records through this one function, so a custom
gradient, a per-input rule and a joint rule behave alike on both paths.
"""


def input_cotangents(prim, g, out, args, params, inputs, relevant):
    """The VJP step of one op application, shared by the tape and the autodiff pass.

    ``inputs`` holds (input position, key) pairs; the result holds (key, cotangent) for
    each key in ``relevant`` whose cotangent is not a symbolic zero. A custom gradient
    (``prim.joint``) gives all inputs' cotangents in one call; a primitive has one rule
    per input.
    """
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
            found.append((key, ct))
    return found
