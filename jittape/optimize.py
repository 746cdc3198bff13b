"""``jt.minimize``: a whole optimisation loop in native code.

The loop is a ``jt.while_loop`` inside one compiled function (``jt.function``): each
iteration evaluates the loss and its gradient (a tape over ``fun``, compiled with the
rest) and applies ``jt.optim``'s update, L-BFGS's line search included, until the
gradient is small enough, the step budget is spent, or L-BFGS cannot go lower. One call
of that function runs a chunk of iterations; Python sees the state between chunks only:
it keeps the best point so far, updates the progress bar, calls the callback, and
returns that best point if Ctrl-C arrives. Chunks are sized to take about
``CHUNK_SECONDS`` each from the speed the last chunk of this kernel at these sizes
measured (the first run's first chunk is short, and measures it), so a long run answers
Ctrl-C within a fraction of a second and a short one is one native call.

``value_and_grad=`` runs the same algorithms driven by Python with a gradient that is
not a jittape kernel (a ``jt.dask`` gradient, a user's callback); their updates then run
eagerly on NumPy values.
"""

import math
import sys
import time
import weakref
from typing import Any, Callable, Dict, Optional

import numpy as np
from scipy.optimize import OptimizeResult

from . import optim, tree
from .ops import cast as _cast
from .optim.lbfgs import unravel
from .compiler import function
from .control import while_loop
from .errors import at_user_line
from .tape import GradientTape, UnconnectedGradients
from .tensor import Tensor

CHUNK_SECONDS = 0.2      # the aim for one native chunk after the first
FIRST_CHUNK = 256        # iterations of a first chunk of unknown speed (it measures it)

_METHODS = {
    "lbfgs": (optim.LBFGS, 1.0),
    "l-bfgs": (optim.LBFGS, 1.0),
    "adam": (optim.Adam, 1e-3),
    "adamw": (optim.AdamW, 1e-3),
    "sgd": (optim.SGD, 1e-2),
    "rmsprop": (optim.RMSprop, 1e-2),
    "adagrad": (optim.Adagrad, 1e-2),
}

_BUILT_IN = frozenset(make for make, _ in _METHODS.values())
_PLAIN = frozenset([int, float, bool])
_PLAIN_OR_NONE = _PLAIN | {type(None)}
_NAMED: Dict[Any, Any] = {}     # (method, learning_rate, options) -> its optimizer
_CHUNKS: "weakref.WeakKeyDictionary[Callable[..., Any], Dict[Any, Any]]" = weakref.WeakKeyDictionary()
# seconds per iteration of a chunk function, by the sizes and dtypes of its arguments
_SPEEDS: "weakref.WeakKeyDictionary[Callable[..., Any], Dict[Any, float]]" = weakref.WeakKeyDictionary()
# a native chunk's first states, by the shape and dtype of x (``_first_state``)
_FIRST: "weakref.WeakKeyDictionary[Callable[..., Any], Dict[Any, Any]]" = weakref.WeakKeyDictionary()


def minimize(fun: Callable[..., Any], x0: Any, method: Any = "lbfgs", *, steps: int = 1000,
             tol: float = 1e-6, args: tuple = (), learning_rate: Any = None,
             callback: Optional[Callable[[OptimizeResult], Any]] = None,
             callback_every: Optional[int] = None, progress: bool = False,
             value_and_grad: Optional[Callable[..., Any]] = None,
             **options: Any) -> OptimizeResult:
    """Minimize the scalar ``fun(x, *args)`` from ``x0`` (an array or any pytree of float
    arrays) and return SciPy's ``OptimizeResult``: ``x`` (in ``x0``'s structure),
    ``fun``, ``jac``, ``nit``, ``nfev``, ``success``, ``status``, ``message``.

    Args:
      method: ``"lbfgs"`` (default), ``"adam"``, ``"adamw"``, ``"sgd"``, ``"rmsprop"``,
        ``"adagrad"``, or a ``jt.optim`` optimizer (then ``learning_rate`` and
        ``options`` are its own).
      steps: the most iterations (L-BFGS: iterations, each a line search).
      tol: success when the largest gradient component is at most ``tol``.
      args: more arguments of ``fun`` (run-time inputs of the compiled loop).
      learning_rate, options: the optimizer's (``memory=``, ``b1=``, ``momentum=``, ...).
      callback: called between chunks with the result so far; return True to stop.
      callback_every: iterations per chunk (else chunks of about 0.2 s).
      progress: a progress bar on stderr (tqdm when installed, else a line per chunk).
      value_and_grad: ``fn(x, *args) -> (value, grads)``, for a gradient that is not
        jittape's own (the loop then runs in Python, the updates eagerly).
    """
    opt = _optimizer(method, learning_rate, options)
    steps = int(steps)
    if steps < 1:
        raise ValueError(at_user_line(f"minimize: steps must be >= 1, got {steps}"))
    if not callable(fun):
        raise TypeError(at_user_line(f"minimize: expected a function, got {type(fun).__name__}"))
    if not tol >= 0:
        raise ValueError(at_user_line(f"minimize: tol must be a number >= 0, got {tol}"))
    if callback_every is not None and int(callback_every) < 1:
        raise ValueError(at_user_line(f"minimize: callback_every must be >= 1, got {callback_every}"))
    if x0.__class__ is np.ndarray and x0.dtype.kind == "f":
        x = np.array(x0)                   # (the usual case: a copy, no tree walk)
    else:
        leaves, treedef = tree.flatten(x0)
        x = tree.unflatten(treedef, [np.array(a, dtype=np.result_type(a, np.float64)
                                              if np.asarray(a).dtype.kind != "f" else None)
                                     for a in leaves])
    args = tuple(args)
    if value_and_grad is not None:
        step = _python_step(opt, value_and_grad, args)
        state = opt.init(x)                # (updated eagerly: its own)
    else:
        step = _native_step(fun, opt)
        state = _first_state(step, opt, x)
    return _drive(step, opt, x, state, steps, float(tol), args, callback, callback_every,
                  progress)


def _optimizer(method, learning_rate, options):
    """The optimizer ``method`` names (or is). One named with plain numbers is kept by
    its settings: a loop of small solves makes it once (with its checks), not per call.
    (``minimize`` uses its pure interface only, which keeps nothing in it.)"""
    if method.__class__ is str and learning_rate.__class__ in _PLAIN_OR_NONE and (
            not options or all(v.__class__ in _PLAIN for v in options.values())):
        key = (method, learning_rate, tuple(sorted(options.items())))
        opt = _NAMED.get(key)
        if opt is None:
            if len(_NAMED) >= 256:         # (a sweep over settings: keep the table small)
                _NAMED.clear()
            opt = _NAMED[key] = _new_optimizer(method, learning_rate, options)
            opt._chunk_key = _chunk_key(opt)   # (settings no one else can change)
        return opt
    return _new_optimizer(method, learning_rate, options)


def _new_optimizer(method, learning_rate, options):
    if isinstance(method, optim.Optimizer):
        if learning_rate is not None or options:
            raise TypeError(at_user_line(
                "minimize: learning_rate and options belong to the optimizer given as "
                "method; set them there"))
        return method
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ValueError(at_user_line(
            f"minimize: unknown method {method!r}; use one of "
            f"{sorted(set(_METHODS) - {'l-bfgs'})} or a jt.optim optimizer"))
    make, rate = _METHODS[method.lower()]
    try:
        return make(learning_rate=rate if learning_rate is None else learning_rate, **options)
    except TypeError as err:
        raise TypeError(at_user_line(f"minimize(method={method!r}): {err}")) from None


def _is_lbfgs(opt):
    return isinstance(opt, optim.LBFGS)


def _max_abs(g):
    """``max(|g|)`` over the leaves of ``g`` (NaN where a component is NaN): computed
    in the chunk's kernel after its loop, for the driver's tests of convergence and of
    a finite gradient, where a pass of NumPy's over the gradient cost 1.2 of the 10 us
    of Python around a small solve."""
    from . import numpy as jnp
    out = None
    for leaf in tree.leaves(g):
        top = jnp.max(jnp.abs(leaf))
        out = top if out is None else jnp.maximum(out, top)
    return out


def _beyond(g, tol):
    """The loop's test of convergence: 1 where some component of ``g`` exceeds ``tol``
    in magnitude, 0 where none does, 2 where one is NaN (an int8 scalar). So ``== 1``
    holds exactly where ``max(|g|) > tol`` does (a NaN compares False). The largest
    of small integers, not of the floats: a lane reduction of ints vectorizes where
    the NaN-propagating float maximum stayed scalar, and a short row's chain of integer
    maxima is shorter. Adam's kernel on Rosenbrock, 1000 steps: 187-191 -> 168-172 us
    at n = 100, 68-70 -> 62-64 us at n = 10 (the same iterates, bit for bit)."""
    from . import numpy as jnp
    out = None
    for leaf in tree.leaves(g):
        size = jnp.abs(leaf)
        code = jnp.max(_cast(size > tol, np.int8) + _cast(jnp.isnan(size), np.int8) * 2)
        out = code if out is None else jnp.maximum(out, code)
    return out


# -- one chunk, native ----------------------------------------------------------------

def _native_step(fun, opt):
    """A compiled chunk: ``chunk(x, state, budget, tol, *args) -> (x, state, value, grad,
    max(|grad|), iterations, stalled, evaluations)``, kept per (fun, optimizer
    configuration)."""
    key = opt.__dict__.get("_chunk_key") or _chunk_key(opt)
    try:
        table = _CHUNKS.setdefault(fun, {})
    except TypeError:
        table = {}
    compiled = table.get(key)
    if compiled is None:
        compiled = table[key] = function(_chunk(fun, opt))
    return compiled


def _chunk_key(opt):
    """What a chunk's kernel depends on of ``opt``. A built-in optimizer is its
    configuration (a new one per call shares the kernel); another is itself (its
    settings may be its own, beyond what repr shows)."""
    if type(opt) in _BUILT_IN:
        config = tuple(opt._config().items())
        # numbers are their own key (no repr to format at each call); a schedule is
        # its repr, so that a new one of the same settings shares the kernel
        return (type(opt), config) if all(v.__class__ in _PLAIN for _, v in config) \
            else (type(opt), repr(opt))
    return ("instance", id(opt), opt)


def _chunk(fun, opt):
    from . import numpy as jnp
    lbfgs = _is_lbfgs(opt)

    def chunk(x, state, budget, tol, *args):
        def value_and_grad(p):
            p = tree.map(lambda a: a if isinstance(a, Tensor) else Tensor(a), p)
            with GradientTape() as tape:
                tape.watch(p)
                v = fun(p, *args)
            _check_loss(fun, v)
            return v, tape.gradient(v, p, unconnected_gradients=UnconnectedGradients.ZERO)

        if lbfgs:
            return _lbfgs_loop(opt, x, state, budget, tol, value_and_grad)
        v0, g0 = value_and_grad(x)

        # the test of convergence is a carry, computed in the body where the gradient
        # is (its loop fuses with the gradient's last one), not by a pass of its own
        # over the gradient in the condition
        def cond(c):
            _, _, v, _, beyond, k, _ = c
            return (k < budget) & (beyond == 1) & jnp.isfinite(v)

        def body(c):
            x, s, v, g, _, k, nfev = c
            x2, s2 = opt.update(x, g, s)
            v2, g2 = value_and_grad(x2)
            return (x2, s2, _cast(v2, v.dtype), g2, _beyond(g2, tol), k + 1, nfev + 1)

        init = (x, state, _cast(v0, _dtype(x)), g0, _beyond(g0, tol), jnp.zeros((), np.int64),
                jnp.zeros((), np.int64) + 1)
        x, state, v, g, _, k, nfev = while_loop(cond, body, init)
        return x, state, v, g, _max_abs(g), k, jnp.zeros((), np.int64), nfev
    chunk.__name__ = f"minimize_{getattr(fun, '__name__', 'function')}"
    # what ``fun`` reads from its globals and closure is read at each call (or traces
    # again when rebound), as for ``jt.value_and_grad(fun)``: not frozen in the loop
    chunk._jittape_reads = (fun,)
    return chunk


def _lbfgs_loop(opt, x, state, budget, tol, value_and_grad):
    """L-BFGS's chunk: its state holds the value and gradient at its point (the first
    update computes them), so the loss is traced twice (that evaluation and the line
    search's), not three times."""
    from . import numpy as jnp
    before = state.slots["evaluations"]

    def cond(c):
        _, s, k, stalled = c
        going = ((_beyond(s.slots["grad"], tol) == 1) & jnp.isfinite(s.slots["value"])
                 & (stalled == 0))
        return (k < budget) & ((k == 0) | going)

    def body(c):
        x, s, k, _ = c
        x2, s2 = opt.update(x, None, s, value_and_grad=value_and_grad)
        # no lower point found: the line search cannot make progress from here (a
        # NaN before the first update compares False)
        stalled = _cast(s2.slots["value"] >= s.slots["value"], np.int64)
        return x2, s2, k + 1, stalled

    x, state, k, stalled = while_loop(cond, body, (x, state, jnp.zeros((), np.int64),
                                                   jnp.zeros((), np.int64)))
    return (x, state, jnp.reshape(state.slots["value"], ()),
            _unflat_like(state.slots["grad"], x), _max_abs(state.slots["grad"]), k, stalled,
            state.slots["evaluations"] - before)


def _check_loss(fun, v):
    if not hasattr(v, "shape"):
        v = np.asarray(v)
    shape, dtype = tuple(int(d) for d in v.shape), np.dtype(v.dtype)
    if shape != () or dtype.kind != "f":
        raise TypeError(at_user_line(
            f"minimize({getattr(fun, '__name__', 'function')}): the loss must be a "
            f"floating-point scalar, got {dtype.name}{list(shape)}"))


def _dtype(x):
    return np.result_type(*[getattr(a, "dtype", np.float64) for a in tree.leaves(x)])


def _unflat_like(flat, like):
    """L-BFGS's flat gradient in ``like``'s structure. (Its sizes stay the traced
    ``Dim``s: an ``int`` of one would freeze this trace's sizes into the kernel.)"""
    leaves, treedef = tree.flatten(like)
    return unravel(flat, leaves, treedef)


# -- one chunk, driven by Python ----------------------------------------------------------

def _python_step(opt, value_and_grad, args):
    """A chunk run by Python with the user's gradient, the same signature as the native
    chunk's."""
    def evaluate(p):
        # L-BFGS hands its point as jittape tensors (unraveled from its flat vector); the
        # user's gradient is not a jittape kernel and takes NumPy values
        v, g = value_and_grad(_as_numpy(p), *args)
        _check_loss(value_and_grad, v)
        return np.asarray(v, np.float64)[()], tree.map(np.asarray, g)

    def chunk(x, state, budget, tol, *_):
        if _is_lbfgs(opt):             # (as the native chunk: the state's own evaluations)
            before = int(state.slots["evaluations"])
            k, stalled, v, g = 0, 0, float("nan"), None
            while k < budget and (k == 0 or _np_max_abs(g) > tol and np.isfinite(v)
                                  and not stalled):
                v_before = float(np.asarray(state.slots["value"]))
                x, state = opt.update(x, None, state, value_and_grad=evaluate)
                x = _as_numpy(x)
                v = float(np.asarray(state.slots["value"]))
                g = _np_unflat_like(np.asarray(state.slots["grad"]), x)
                stalled, k = int(v >= v_before), k + 1
            return (x, state, v, g, _np_max_abs(g), k, stalled,
                    int(state.slots["evaluations"]) - before)
        v, g = evaluate(x)
        nfev, k = 1, 0
        while k < budget and _np_max_abs(g) > tol and np.isfinite(v):
            x2, state = opt.update(x, g, state)
            v, g = evaluate(x2)
            x, k, nfev = _as_numpy(x2), k + 1, nfev + 1
        return x, state, v, g, _np_max_abs(g), k, 0, nfev
    return chunk


def _as_numpy(x):
    if x.__class__ is np.ndarray:          # (the usual case, at every chunk)
        return x
    return tree.map(lambda a: a.numpy() if isinstance(a, Tensor) else np.asarray(a), x)


def _np_max_abs(g):
    if g.__class__ is np.ndarray:          # (the usual case, at every chunk)
        return float(np.abs(g).max())
    return max(float(np.max(np.abs(np.asarray(leaf)))) for leaf in tree.leaves(g))


def _np_unflat_like(flat, like):
    leaves, treedef = tree.flatten(like)
    out, start = [], 0
    for leaf in leaves:
        a = np.asarray(leaf)
        out.append(flat[start:start + a.size].reshape(a.shape).astype(a.dtype))
        start += a.size
    return tree.unflatten(treedef, out)


# -- the driver ------------------------------------------------------------------------------

def _drive(chunk, opt, x, state, steps, tol, args, callback, callback_every, progress):
    last = None                     # (value, x, grad) where the last chunk ended
    best = None                     # the lowest of those (what Ctrl-C returns)
    nit = nfev = 0
    status, message = 1, "the iteration limit was reached"
    bar = _Progress(steps) if progress else None
    speeds, sizes = _speeds(chunk), _sizes(x, args)
    per = speeds.get(sizes)
    if callback_every:
        size = int(callback_every)
    elif per:
        size = max(1, min(steps, int(CHUNK_SECONDS / per)))
    else:
        size = min(FIRST_CHUNK, steps)
    interrupted = False
    try:
        while True:
            budget = min(size, steps - nit)
            before = _compiling(chunk)
            start = time.perf_counter()
            try:
                x, state, v, g, gmax, k, stalled, used = chunk(
                    x, state, np.int64(budget), np.float64(tol), *args)
            except SystemError as err:
                _reraise_interrupt(err)
                raise
            seconds = time.perf_counter() - start
            k, v = int(k), float(v)
            per = seconds / max(k, 1)
            # (a chunk run on NumPy, its kernel compiling when it began or when it ended,
            # says nothing of the kernel's speed)
            compiling = _compiling(chunk)
            if not compiling and not before:
                speeds[sizes] = per
            nit += k
            nfev += int(used)
            x = _as_numpy(x)
            last = (v, x, g if g.__class__ is np.ndarray else tree.map(np.asarray, g))
            if best is None or not v >= best[0]:     # (NaN is never best)
                best = last
            if bar is not None:
                bar.update(nit, v)
            gmax = float(gmax)
            if gmax <= tol:
                status, message = 0, "the gradient is below tol"
                break
            if not math.isfinite(v) or not math.isfinite(gmax):
                status, message = 3, (f"the value became {v}" if not math.isfinite(v)
                                      else "the gradient is not finite")
                break
            if int(stalled):
                status, message = 2, "the line search found no lower point (precision loss)"
                break
            if nit >= steps:
                break
            if callback is not None and callback(_result(last, nit, nfev, 1, "running")):
                status, message = 4, "the callback asked to stop"
                break
            if not callback_every:     # chunks of about CHUNK_SECONDS from here
                size = max(1, int(CHUNK_SECONDS / per) if per > 0 else steps)
    except KeyboardInterrupt:
        interrupted = True
        status, message = 5, "interrupted (Ctrl-C): the lowest point a chunk ended at"
    finally:
        if bar is not None:
            bar.close()
    if best is None:
        if interrupted:
            raise KeyboardInterrupt
        last = (float("nan"), x, None)
    # the last point, with its own status; Ctrl-C gives the lowest one seen
    result = _result(best if interrupted else last, nit, nfev, status, message)
    if callback is not None and not interrupted:
        callback(result)
    return result


def _first_state(chunk, opt, x):
    """``opt.init(x)``, made once per shape and dtype for a built-in optimizer's native
    chunk (4 of L-BFGS's 25 us of Python per small solve): a kernel never writes its
    inputs (a carry it updates in place is copied first) nor does the NumPy tier, and
    the state never leaves jt.minimize."""
    if x.__class__ is not np.ndarray or type(opt) not in _BUILT_IN:
        return opt.init(x)
    try:
        made = _FIRST.setdefault(chunk, {})
    except TypeError:
        return opt.init(x)
    key = (x.shape, x.dtype)
    state = made.get(key)
    if state is None:
        state = made[key] = opt.init(x)
    return state


def _compiling(chunk):
    """The kernels of ``chunk`` compiling in the background (its chunks meanwhile run
    on NumPy: ``config.tiered``); none for a Python-driven chunk. (Shorter chunks while
    it compiles, for the kernel to take over sooner, were tried: on one core they cost
    a cold solve on NumPy 10-20%, and a loop's kernel compiles for a second or more.)"""
    pending = getattr(chunk, "_background_compiles", None)
    return pending() if pending is not None else []


def _speeds(chunk):
    try:
        return _SPEEDS.setdefault(chunk, {})
    except TypeError:
        return {}


def _sizes(x, args):
    """What a chunk's speed depends on besides its function: its arguments' shapes and
    dtypes (Python numbers as their types)."""
    if not args and isinstance(x, np.ndarray):        # (the usual case, at every call)
        return x.shape, x.dtype
    return tuple((np.shape(a), getattr(a, "dtype", type(a))) for a in tree.leaves((x, args)))


def _reraise_interrupt(err):
    """Ctrl-C during a native call: Numba turns the KeyboardInterrupt raised while it
    converts the results into a SystemError; it is the user's interrupt again. (A
    ``try``, not a context manager: its object and calls were 0.3 us a chunk.)"""
    cause = err
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        cause = cause.__cause__ or cause.__context__


def _result(best, nit, nfev, status, message):
    value, x, g = best
    return OptimizeResult(x=x, fun=value, jac=g, nit=nit, nfev=nfev, status=status,
                          success=status == 0, message=message)


class _Progress:
    """tqdm's bar when installed, else a line per chunk on stderr."""

    def __init__(self, total):
        self.done = 0
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, desc="jt.minimize", unit="it", file=sys.stderr)

    def update(self, nit, value):
        if self.bar is not None:
            self.bar.update(nit - self.done)
            self.bar.set_postfix(fun=f"{value:.6g}")
        else:
            print(f"jt.minimize: {nit} iterations, fun = {value:.6g}", file=sys.stderr,
                  flush=True)
        self.done = nit

    def close(self):
        if self.bar is not None:
            self.bar.close()
