"""Forward mode and its uses, compiled: ``jvp``, ``linearize``, ``hvp``, ``jacfwd``, ``jacrev``.

Each is a compiled function (``jt.function``) around a ``ForwardAccumulator``: the
accumulator's tangent ops are traced with the function's own, so the value and its
directional derivative come from one native call. ``hvp`` opens a tape inside the
accumulator (forward-over-reverse: the gradient's ops get tangents). ``jacfwd`` runs
the accumulator in a ``jt.scan`` over the rows of an identity: one loop body whatever
the input's size, and the function's own values, which do not depend on the direction,
are computed once, before the loop.

The compiled function of each (function, transform, options) is kept, so calling
``jt.jvp(f, ...)`` in a loop traces ``f`` once per signature, as ``jt.grad(f)`` does.
"""

import functools
import weakref
from typing import Any, Callable, Dict, Tuple

import numpy as np

from . import ops, tree
from .compiler import function, jacobian as _jacobian_rev
from .control import scan
from .errors import at_user_line
from .forward import ForwardAccumulator
from .tape import GradientTape, UnconnectedGradients
from .tensor import Tensor

_KEPT: "weakref.WeakKeyDictionary[Callable[..., Any], Dict[Any, Any]]" = weakref.WeakKeyDictionary()


def _kept(f, key, make):
    """The compiled function ``make()`` for ``f`` and ``key``, made once; anew for a
    callable that reads what a trace freezes (a bound method's ``self.w``, a global of
    a function it calls): a wrapper made again must see what it reads now, as a new
    ``jt.grad(f)`` does (``sharing._reads_nothing_frozen``)."""
    import types
    from .compiler.sharing import _reads_nothing_frozen
    if f.__class__ is not types.FunctionType or not _reads_nothing_frozen(f, True, set()):
        return make()
    try:
        table = _KEPT.setdefault(f, {})
    except TypeError:                    # (not weakly referable: made anew each time)
        return make()
    found = table.get(key)
    if found is None:
        found = table[key] = make()
    return found


def _as_tensor(x):
    """A leaf of a differentiated argument as a tensor: a Python float as float64 (what
    ``jvp`` differentiates is the user's number, and float32 would round it); a Python
    int or bool stays a Python number (an index, a count: it has no tangent)."""
    if isinstance(x, Tensor) or isinstance(x, (bool, int)):
        return x
    return Tensor(np.asarray(x, dtype=np.float64) if isinstance(x, float) else x)


def _floats(leaves):
    return [k for k, x in enumerate(leaves) if _dtype(x).kind in "fc"]


def _dtype(x):
    return x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype


def _zeros_for(y):
    return ops.zeros_like(y)


# -- jvp --------------------------------------------------------------------------------

def jvp(f: Callable[..., Any], primals: Tuple[Any, ...], tangents: Tuple[Any, ...]) -> Tuple[Any, Any]:
    """``(f(*primals), J tangents)``: ``f``'s value and its derivative in the direction
    ``tangents`` (JAX's ``jax.jvp``), computed together by one compiled call.

    ``primals`` and ``tangents`` are tuples with one entry per argument of ``f``, each a
    pytree of arrays of the same structure and shapes. Integer arguments get no tangent
    (theirs must be zeros). The result's tangent has the structure of ``f``'s result;
    outputs that do not depend on the primals get zeros."""
    primals, tangents = _check_pairs("jvp", f, primals, tangents)
    compiled = _kept(f, ("jvp",), lambda: function(_jvp_body(f)))
    return compiled(primals, tangents)


def _check_pairs(what, f, primals, tangents):
    if not callable(f):
        raise TypeError(at_user_line(f"{what}: expected a function, got {type(f).__name__}"))
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(at_user_line(
            f"{what}: primals and tangents must be tuples (one entry per argument of the "
            f"function), got {type(primals).__name__} and {type(tangents).__name__}"))
    if len(primals) != len(tangents):
        raise ValueError(at_user_line(
            f"{what}: {len(primals)} primals but {len(tangents)} tangents"))
    for k, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_def = tree.flatten(p)
        t_leaves, t_def = tree.flatten(t)
        if p_def != t_def:
            raise ValueError(at_user_line(
                f"{what}: tangent {k} has structure {t_def}, its primal {p_def}"))
        for j, (a, b) in enumerate(zip(p_leaves, t_leaves)):
            if np.shape(a) != np.shape(b):
                raise ValueError(at_user_line(
                    f"{what}: tangent {k} (leaf {j}) has shape {np.shape(b)}, its primal "
                    f"{np.shape(a)}"))
            if (_dtype(a).kind not in "fc" and not isinstance(b, Tensor)
                    and np.any(np.asarray(b) != 0)):
                raise ValueError(at_user_line(
                    f"{what}: primal {k} (leaf {j}) is an integer ({_dtype(a)}): it has no "
                    "tangent, and its tangent must be zero"))
    return tuple(primals), tuple(tangents)


def _jvp_body(f):
    @functools.wraps(f, updated=())
    def body(primals, tangents):
        value, out = _traced_jvp(f, primals, tangents)
        return value, out
    return body


def _traced_jvp(f, primals, tangents):
    """(value, tangent) of ``f(*primals)`` under an accumulator (eagerly or traced)."""
    p_leaves, p_def = tree.flatten(list(primals))
    t_leaves = tree.flatten(list(tangents))[0]
    p_leaves = [_as_tensor(x) for x in p_leaves]
    floats = _floats(p_leaves)
    with ForwardAccumulator([p_leaves[k] for k in floats],
                            [ops.cast(_as_tensor(t_leaves[k]), p_leaves[k].dtype)
                             for k in floats]) as acc:
        value = f(*tree.unflatten(p_def, p_leaves))
    return value, _output_tangents(acc, value)


def _output_tangents(acc, value):
    leaves, treedef = tree.flatten(value)
    out = []
    for y in leaves:
        y = _as_tensor(y)
        t = acc.jvp(y) if y.dtype.kind in "fc" else None
        out.append(_zeros_for(y) if t is None else t)
    return tree.unflatten(treedef, out)


# -- linearize ----------------------------------------------------------------------------

def linearize(f: Callable[..., Any], *primals: Any) -> Tuple[Any, Callable[..., Any]]:
    """``(f(*primals), f_jvp)`` with ``f_jvp(*tangents)`` the derivative of ``f`` at
    ``primals`` in the direction ``tangents`` (JAX's ``jax.linearize``). ``f_jvp`` is one
    compiled call; it computes ``f``'s values at ``primals`` again with the tangents
    (what depends on the primals only, the compiled code cannot keep between calls)."""
    if not callable(f):
        raise TypeError(at_user_line(f"linearize: expected a function, got {type(f).__name__}"))
    # (copies: f_jvp is the derivative at the point given, whatever later becomes of
    # the caller's arrays)
    fixed = tuple(tree.map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, p)
                  for p in primals)
    zeros = tuple(tree.map(lambda x: np.zeros(np.shape(x), getattr(x, "dtype", np.float64)), p)
                  for p in fixed)
    value, _ = jvp(f, fixed, zeros)

    def f_jvp(*tangents):
        return jvp(f, fixed, _check_pairs("linearize", f, fixed, tangents)[1])[1]
    f_jvp.__name__ = f"linearized_{getattr(f, '__name__', 'function')}"
    return value, f_jvp


# -- hvp ----------------------------------------------------------------------------------

def _argnums(what, argnums):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums or not all(isinstance(a, int) for a in nums):
        raise TypeError(at_user_line(
            f"{what}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"))
    return single, nums


def hvp(f: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    """``hvp(f)(*args, v)``: the Hessian of the scalar ``f`` at ``args`` times ``v``
    (forward-over-reverse: the tangent of the gradient in the direction ``v``), one
    compiled call. ``v`` has the structure of argument ``argnums`` (a tuple of such for a
    tuple ``argnums``); the result has it too."""
    single, nums = _argnums("hvp", argnums)

    def make():
        @functools.wraps(f, updated=())
        def body(*args):
            *args, v = args
            args = list(args)
            diff = [_resolve(i, len(args), "hvp", f) for i in nums]
            vs = (v,) if single else tuple(v)
            if len(vs) != len(diff):
                raise ValueError(at_user_line(
                    f"hvp({_name(f)}): {len(diff)} differentiated arguments but {len(vs)} "
                    "directions"))
            for i in diff:
                args[i] = tree.map(_as_tensor, args[i])
            sources = [args[i] for i in diff]
            with ForwardAccumulator(sources, [tree.map(_as_tensor, t) for t in vs]) as acc:
                with GradientTape() as tape:
                    tape.watch(sources)
                    y = f(*args)
                _check_scalar("hvp", f, y)
                grads = tape.gradient(y, sources, unconnected_gradients=UnconnectedGradients.ZERO)
            out = [tree.map(lambda g: _or_zeros(acc.jvp(g), g), g) for g in grads]
            return out[0] if single else tuple(out)
        return function(body)
    compiled = _kept(f, ("hvp", nums, single), make)

    def call(*args):
        if not args:
            raise TypeError(at_user_line(f"hvp({_name(f)}): call it as hvp(f)(*args, v)"))
        return compiled(*args)
    return call


def _or_zeros(t, like):
    return ops.zeros_like(like) if t is None else t


def _name(f):
    return getattr(f, "__name__", "function")


def _resolve(i, n, what, f):
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise ValueError(at_user_line(
            f"{what}({_name(f)}): argnums {i} is out of range for a call with {n} "
            "arguments"))
    return j


def _check_scalar(what, f, y):
    shape = getattr(y, "shape", ())
    if tuple(shape) != ():
        raise TypeError(at_user_line(
            f"{what}({_name(f)}): the function must return a scalar, got a value of shape "
            f"{tuple(shape)}"))


# -- Jacobians ----------------------------------------------------------------------------

def jacfwd(f: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by forward mode, of shape ``out.shape + in.shape`` (a tuple
    over a tuple ``argnums``): one JVP per input element, as a loop over the identity's
    rows (JAX's ``jax.jacfwd``). Cheaper than ``jacrev`` when ``f`` has more outputs than
    inputs."""
    single, nums = _argnums("jacfwd", argnums)

    def make():
        @functools.wraps(f, updated=())
        def body(*args):
            args = list(args)
            diff = [_resolve(i, len(args), "jacfwd", f) for i in nums]
            for i in diff:
                args[i] = _as_tensor(args[i])
                if not isinstance(args[i], Tensor) or args[i].dtype.kind not in "fc":
                    raise TypeError(at_user_line(
                        f"jacfwd({_name(f)}): argument {i} must be one floating-point array "
                        f"(got {type(args[i]).__name__}; for a pytree, differentiate its "
                        "leaves as separate arguments)"))
            cols = [_columns(f, args, i) for i in diff]
            return cols[0] if single else tuple(cols)
        return function(body)
    return _kept(f, ("jacfwd", nums, single), make)


def _columns(f, args, i):
    """d f / d args[i], by a scan of JVPs over the identity's rows: for each leaf of
    ``f``'s result, an array of shape ``leaf.shape + args[i].shape``."""
    x = args[i]
    trace = getattr(x, "_trace", None)
    if trace is not None:      # the loop's length and the identity are this size's
        trace.reads_sizes = True
    shape, n = tuple(int(d) for d in x.shape), int(np.prod(x.shape, dtype=np.int64))
    positions = np.arange(n)
    out_def = []

    def step(carry, k):
        # the k-th row of the identity, made in the loop (no n x n constant)
        direction = ops.reshape(ops.cast(ops.equal(positions, k), x.dtype), shape)
        with ForwardAccumulator(x, direction) as acc:
            y = f(*args[:i], x, *args[i + 1:])
        leaves, treedef = tree.flatten(y)
        out_def[:] = [treedef, [_as_tensor(v) for v in leaves]]
        tangents = []
        for v in out_def[1]:
            t = acc.jvp(v) if v.dtype.kind in "fc" else None
            tangents.append(ops.zeros_like(v) if t is None else t)
        return carry, tangents

    if n == 0:                 # (no direction: an empty Jacobian per output)
        with ForwardAccumulator(x, ops.zeros_like(x)):
            y = f(*args[:i], x, *args[i + 1:])
        leaves, treedef = tree.flatten(y)
        return tree.unflatten(treedef, [ops.zeros(tuple(int(d) for d in np.shape(v)) + shape,
                                                  _as_tensor(v).dtype) for v in leaves])
    _, rows = scan(step, np.zeros((), x.dtype), positions)   # each (n, *out_shape)
    cols = []
    for r in rows:
        out_ndim = r.ndim - 1
        perm = tuple(range(1, out_ndim + 1)) + (0,)
        c = ops.transpose(r, perm)                          # (*out_shape, n)
        cols.append(ops.reshape(c, tuple(int(d) for d in c.shape[:out_ndim]) + shape))
    return tree.unflatten(out_def[0], cols)


def jacrev(f: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode (``jt.jacobian``; JAX's ``jax.jacrev``):
    one backward pass per output element. Cheaper than ``jacfwd`` when ``f`` has fewer
    outputs than inputs."""
    return _jacobian_rev(f, argnums=argnums)
