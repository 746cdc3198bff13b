"""The eager GradientTape, with TensorFlow's semantics.

Every op applied while a tape records, and that reads a tensor the tape watches,
appends an entry to the tape: the primitive, its parameters, what its VJP rules
need (as declared by the primitive's ``save``), and the identities of its inputs
and output. ``gradient`` sweeps the entries backwards, calling the primitives' own
VJP rules, which are written with jittape ops: when another tape is recording, it
records the backward computation too, which is how nested tapes give Hessians.

A zero gradient is ``None`` throughout (DESIGN.md rule 7); zeros are only made at
the API boundary, for ``UnconnectedGradients.ZERO``.
"""

import contextlib
import enum
import logging
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from . import autodiff, control, ops, tree
from .errors import (NumericsError, at_user_line, numpy_errors_enter, numpy_errors_exit,
                     numpy_warnings_at_user,
                     user_frame, warn_at_user)
from .ops import elementwise as _elementwise
from .ops.core import Aval
from .recording import ACTIVE_TAPES, current_trace, thread_tapes
from .tensor import Tensor, Variable
from .vjp import input_cotangents

_add = _elementwise.add.bind     # (the sum of cotangents: a bound bind, see ops/methods.py)

logger = logging.getLogger("jittape")

class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for a source the target does not depend on."""
    NONE = "none"
    ZERO = "zero"


_ONES: Dict[Any, Any] = {}


def _one(dtype):
    """A NumPy scalar 1 of ``dtype`` (made once: NumPy's scalar constructors are slow)."""
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = dtype.type(1)
    return one


def _is_float(x):
    return x.dtype.kind in "fc"


def _real_cotangents(found, args, inputs):
    """The cotangents of an op with a complex result, with the real part of those that
    go to a real input (API.md: the gradient of a real value is dL/dx, TensorFlow's rule)."""
    kinds = {i: args[k].dtype.kind for k, i in inputs}
    return [(i, ops.real(ct) if kinds.get(i, "c") != "c" and getattr(ct, "dtype", None) is not None
             and ct.dtype.kind == "c" else ct) for i, ct in found]


class GradientTape:
    """Records operations for automatic differentiation (``tf.GradientTape``'s semantics).

    Args:
      persistent: if False (the default) the tape can compute one set of gradients
        (or one jacobian) and then releases what it recorded.
      watch_accessed_variables: if True (the default) trainable Variables read while
        the tape records are watched automatically.
    """

    _forward = False                  # (a ForwardAccumulator sits with tapes: True)

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = bool(persistent)
        self._watch_accessed = bool(watch_accessed_variables)
        self._entries: List[Any] = []
        self._watched: Set[Any] = set()   # ids of watched values and of values computed from them
        self._roots: Set[Any] = set()     # ids watched directly (watch, variables read)
        self._variables: Dict[Any, Variable] = {}   # id -> Variable, for watched_variables()
        self._constants: Dict[Any, Any] = {}  # in a trace: watched constant's id -> its uses' Vars
        self._recording = False
        self._used = False
        self._trace = None              # the trace this tape records in (see record_traced)
        self._errors: Any = None        # the with block's numpy_errors context

    # -- context ------------------------------------------------------------
    def __enter__(self) -> "GradientTape":
        if self._recording:
            raise ValueError(at_user_line("this GradientTape is already recording"))
        self._push()
        # NumPy's floating-point warnings of the recorded ops at the user's lines
        self._errors = numpy_errors_enter()
        return self

    def __exit__(self, exc_type, exc, tb):
        errors, self._errors = self._errors, None
        if errors is not None:
            numpy_errors_exit(*errors)
        if self._recording:
            self._pop()

    def _push(self):
        trace = current_trace()
        if trace is not self._trace:
            if self._entries:
                raise RuntimeError(at_user_line("a GradientTape used in a traced function cannot be "
                                   "re-entered outside it (and the other way round)"))
            self._trace = trace
        ACTIVE_TAPES.append(self)
        thread_tapes().append(self)
        self._recording = True

    def _pop(self):
        ACTIVE_TAPES.remove(self)
        tapes = thread_tapes()
        if self in tapes:                # (a trace set this thread's tapes aside)
            tapes.remove(self)
        self._recording = False

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stop recording operations on this tape."""
        if not self._recording:
            raise ValueError(at_user_line("stop_recording() needs a tape that is recording "
                             "(use it inside the tape's `with` block)"))
        position = thread_tapes().index(self)
        self._pop()
        try:
            yield
        finally:
            thread_tapes().insert(position, self)
            ACTIVE_TAPES.append(self)
            self._recording = True

    def reset(self) -> None:
        """Clear everything recorded and watched; the tape can be used again."""
        self._entries = []
        self._watched = set()
        self._roots = set()
        self._variables = {}
        self._constants = {}
        self._used = False

    # -- watching -------------------------------------------------------------
    def watch(self, tensor: Any) -> None:
        """Watch a tensor or variable, or each leaf of a pytree of them (lists, tuples,
        dicts, dataclasses, classes given to ``jt.tree.register``)."""
        for t in tree.flatten(tensor)[0]:
            if not isinstance(t, Tensor):
                raise TypeError(at_user_line(
                    f"GradientTape.watch: can only watch jittape Tensors and Variables, "
                    f"got {type(t).__name__}"))
            if not _is_float(t):
                # TensorFlow's words first (the tutorials print them), then the API
                warn_at_user(
                    f"The dtype of the watched tensor must be floating (e.g. float32), "
                    f"got {t.dtype.name}: its gradients will be None (GradientTape.watch)",
                    UserWarning)
            if isinstance(t, Variable):
                self._watch_variable(t)
            else:
                # a tracer: its Var
                key = t._var if t._value is None else t._id  # type: ignore[attr-defined]
                self._watched.add(key)
                self._roots.add(key)

    def _watch_variable(self, var):
        self._watched.add(var._id)
        self._roots.add(var._id)
        self._variables[var._id] = var

    def watched_variables(self) -> Tuple[Any, ...]:
        """The variables this tape watches, in the order they were created."""
        return tuple(self._variables[k] for k in sorted(self._variables))

    # -- gradients ------------------------------------------------------------
    def _begin_use(self, what):
        if self._used and not self._persistent:
            # TensorFlow's words exactly, as the tutorials print them (no location added)
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one "
                               "set of gradients (or jacobians)")
        if self._recording:
            if not self._persistent:
                self._pop()
            else:
                logger.warning(at_user_line(
                    f"Calling GradientTape.{what} on a persistent tape inside its context "
                    "records the gradient computation too, which is less efficient"))
        self._used = True

    def _end_use(self):
        if not self._persistent:
            self._entries = []          # release what was recorded

    @numpy_warnings_at_user
    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: Any = UnconnectedGradients.NONE) -> Any:
        """The gradient of ``target`` (summed over all its tensors) w.r.t. each source.

        The result has the structure of ``sources`` (any pytree: a dataclass of
        variables gives that dataclass of gradients); ``output_gradients``, when given,
        has the target's leaves. Each gradient has its source's shape and dtype, or is
        None (zeros with ``UnconnectedGradients.ZERO``) when the target does not depend
        on it, the source was not watched, or is not floating.
        """
        unconnected = unconnected_gradients if unconnected_gradients is UnconnectedGradients.NONE \
            else _unconnected(unconnected_gradients)
        src_leaves, src_def = _sources(sources, "gradient")
        self._begin_use("gradient")
        try:
            if output_gradients is None:
                targets = _flatten(target)[0]
                seeds = [None] * len(targets)
            else:
                # None counts on both sides (as in tf.nest), so that a None field of
                # a target structure lines up with a None of output_gradients
                targets = tree.flatten(target, keep_none=True)[0]
                seeds = tree.flatten(output_gradients, keep_none=True)[0]
                if len(seeds) != len(targets):
                    raise ValueError(at_user_line(
                        f"GradientTape.gradient: {len(seeds)} output_gradients for "
                        f"{len(targets)} targets; they must have the target's structure"))
            if self._trace is not None:
                grads = self._traced_backprop(targets, seeds, src_leaves)
            else:
                grads = self._backprop(targets, seeds, src_leaves)
        finally:
            self._end_use()
        for k, s in enumerate(src_leaves):
            g = grads[k]
            # (a gradient of its source's dtype, the usual case, as it is: no call)
            if g is None or g._value is None or s._value is None or \
                    g._value.dtype is not s._value.dtype:
                grads[k] = _finish(g, s, unconnected)
        if src_def is _ONE:
            return grads[0]
        if src_def is _FLAT_LISTS.get(len(grads)):
            return grads
        return tuple(grads) if src_def is _FLAT_TUPLES.get(len(grads)) else tree.unflatten(src_def, grads)

    def _backprop(self, targets, seeds, sources):
        """Reverse sweep; returns one gradient (a Tensor or None) per source."""
        grads = {}
        for t, seed in zip(targets, seeds):
            if not isinstance(t, Tensor):
                continue
            v = t._value
            if v.dtype.kind not in "fc":
                continue
            if seed is None:
                if v.ndim == 0:
                    one = _ONES.get(v.dtype)
                    seed = Tensor._wrap(one if one is not None else _one(v.dtype))
                else:
                    seed = Tensor._wrap(np.ones(v.shape, v.dtype))
            else:
                if not isinstance(seed, Tensor):
                    seed = Tensor(np.asarray(seed, dtype=v.dtype))
                if seed.shape != v.shape:
                    raise ValueError(at_user_line(
                        f"GradientTape.gradient: output_gradients of shape {seed.shape} for a "
                        f"target of shape {t.shape}"))
            prev = grads.get(t._id)
            grads[t._id] = seed if prev is None else _add(prev, seed)

        watched = self._watched          # a source the tape did not watch gets no gradient
        source_ids = {s._id for s in sources if s._id in watched and s._value.dtype.kind in "fc"}
        # a persistent tape recording its own gradient appends while we read: snapshot it
        entries = list(self._entries) if self._recording else self._entries
        # Forward: which values depend on a source (only those need cotangents). When
        # every value the tape watched directly is a source, that is every value it
        # recorded (an entry is recorded only when it reads a watched value).
        if self._roots <= source_ids:
            relevant, live = watched, entries
        else:
            relevant = set(source_ids)
            live = []
            for entry in entries:
                for _, i in entry[4]:
                    if i in relevant:
                        relevant.add(entry[5])
                        live.append(entry)
                        break
        # Backward: the primitives' VJP rules.
        for prim, params, saved, out, inputs, out_id in reversed(live):
            g = grads.get(out_id)
            if g is None:
                continue
            if out_id not in source_ids:
                del grads[out_id]
            # only float values are relevant: integer sources are excluded above and
            # integer results are never recorded
            # (eagerly: a tensor, its value read)
            complex_g = (g._value.dtype.kind == "c" if g.__class__ is Tensor
                         else getattr(g, "dtype", None) is not None and g.dtype.kind == "c")
            try:
                found = input_cotangents(prim, g, out, saved, params, inputs, relevant, complex_g)
            except NumericsError as err:
                # the op's message names the same user line: said once, at the end
                message, where = str(err), f" (at {user_frame()})"
                if message.endswith(where):
                    message = message[:-len(where)]
                raise NumericsError(at_user_line(
                    f"{message}, in the gradient of {prim.name}")) from None
            if complex_g:
                found = _real_cotangents(found, saved, inputs)
            for i, ct in found:
                prev = grads.get(i)
                grads[i] = ct if prev is None else _add(prev, ct)
        return [grads.get(s._id) if s._id in source_ids else None for s in sources]

    def _traced_backprop(self, targets, seeds, sources):
        """``_backprop`` in a traced function: the autodiff pass over the nodes this tape
        recorded, which records the backward computation into the trace."""
        trace = self._trace
        pairs = []
        for t, seed in zip(targets, seeds):
            if not isinstance(t, Tensor) or not _is_float(t):
                continue
            var = self._traced_var(t)
            if seed is None and var.ndim and var.dtype.kind == "c":
                # ones of a complex dtype: ones of its real part, cast
                seed = ops.cast(ops.ones_like(ops.real(autodiff.Tracer._of(var, trace))),
                                var.dtype)
            elif seed is None:
                seed = (ops.ones_like(autodiff.Tracer._of(var, trace)) if var.ndim
                        else autodiff.Tracer._of(trace.const(np.ones((), var.dtype)), trace))
            else:
                seed = trace.tracer(seed) if isinstance(seed, Tensor) else \
                    autodiff.traced(trace, np.asarray(seed, dtype=var.dtype))
                if tuple(int(d) for d in seed._var.shape) != tuple(int(d) for d in var.shape):
                    raise ValueError(at_user_line(
                        f"GradientTape.gradient: output_gradients of shape {seed.shape} for a "
                        f"target of shape {t.shape}"))
            pairs.append((var, seed))
        wrt, groups = self._traced_sources(sources)
        cts = autodiff.backward(trace, pairs, wrt, nodes=self._entries) if wrt else []
        return _sum_groups(cts, groups)

    def _traced_var(self, t):
        """The Var of ``t`` in this tape's trace; for a watched constant Tensor, the Var
        of its first use (see ``record_traced``), so that a target that is the source
        itself meets it."""
        if t._value is not None and not isinstance(t, Variable) and t._id in self._watched:
            reads = self._constants.setdefault(t._id, [])
            if not reads:
                reads.append(self._trace.var_of(t))
            return reads[0]
        return self._trace.var_of(t)

    def _traced_sources(self, sources):
        """The Vars to differentiate with respect to for each source, flattened: a watched
        tracer's Var, every read of a watched Variable, the Var of every use of a watched
        constant (the trace may make one per use)."""
        trace = self._trace
        watched = self._watched
        wrt, groups = [], []
        for s in sources:
            if not _is_float(s):
                vars_ = []
            elif isinstance(s, Variable):
                state = trace.variables.get(s._id)
                vars_ = list(state.reads) if state is not None and s._id in watched else []
            elif s._value is None:
                vars_ = [s._var] if s._var in watched else []
            else:
                vars_ = list(self._constants.get(s._id, ())) if s._id in watched else []
            groups.append(len(vars_))
            wrt.extend(vars_)
        return wrt, groups

    @numpy_warnings_at_user
    def jacobian(self, target: Any, sources: Any,
                 unconnected_gradients: Any = UnconnectedGradients.NONE,
                 parallel_iterations: Optional[int] = None,
                 experimental_use_pfor: bool = True) -> Any:
        """d target[i...] / d source[j...], of shape ``target.shape + source.shape``."""
        unconnected = _unconnected(unconnected_gradients)
        src_leaves, src_def = _sources(sources, "jacobian")
        self._begin_use("jacobian")
        try:
            rows = self._rows(target, src_leaves, target.shape if isinstance(target, Tensor) else ())
        finally:
            self._end_use()
        out = []
        for s, col in zip(src_leaves, rows):
            shape = tuple(target.shape) + tuple(s.shape)
            if col is None:
                out.append(_finish(None, Aval(shape, s.dtype), unconnected))
            else:
                out.append(ops.reshape(col, shape))
        return tree.unflatten(src_def, out)

    def _rows(self, target, sources, shape, batch=False):
        """Stacked gradients of each element of ``target`` (per batch row if ``batch``)."""
        if not isinstance(target, Tensor):
            raise TypeError(at_user_line(f"GradientTape.jacobian: the target must be a Tensor, "
                                         f"got {type(target).__name__}"))
        if not _is_float(target):
            return [None] * len(sources)
        if self._trace is not None:
            return self._traced_rows(target, sources, batch)
        n = int(np.prod(shape[1:] if batch else shape, dtype=np.int64))
        cols = [[] for _ in sources]
        connected = [False] * len(sources)
        for k in range(n):
            seed = np.zeros(target.shape, target.dtype)
            if batch:
                seed.reshape(target.shape[0], -1)[:, k] = 1
            else:
                seed.reshape(-1)[k] = 1
            grads = self._backprop([target], [Tensor(seed)], sources)
            for j, (g, s) in enumerate(zip(grads, sources)):
                if g is not None:
                    connected[j] = True
                cols[j].append(g)
        out = []
        for j, s in enumerate(sources):
            if not connected[j]:
                out.append(None)
                continue
            parts = [g if g is not None else ops.zeros_like(s) for g in cols[j]]
            if not parts:
                out.append(ops.zeros((0,) + tuple(s.shape), s.dtype))
            else:
                out.append(ops.stack([ops.cast(p, s.dtype) for p in parts], axis=1 if batch else 0))
        return out

    def _traced_rows(self, target, sources, batch):
        """``_rows`` in a traced function: one reverse sweep per target element, run in a
        loop by the generated code (``control.jacobian_rows``). For ``batch_jacobian``
        the rows are summed over the source's batch axis, which holds one nonzero block
        per row under batch_jacobian's assumption."""
        trace = self._trace
        if control.has_loop(trace.nodes):
            from .errors import UnsupportedError
            raise UnsupportedError(at_user_line(
                "GradientTape.jacobian: a compiled function can compute one jacobian (it "
                "becomes the generated code's loop); compute the others eagerly or stack "
                "the targets into one"))
        wrt, groups = self._traced_sources(sources)
        t = autodiff.Tracer._of(self._traced_var(target), trace)
        tracers = [autodiff.Tracer._of(v, trace) for v in wrt]
        rows = control.jacobian_rows(trace, t, tracers, self._entries, keep_none=True) \
            if wrt else []
        out = []
        for r, s in zip(_sum_groups(rows, groups), sources):
            if r is None or not batch:
                out.append(r)
                continue
            # rows: (B*T, B, S...) -> (B, T, S...), summed over the source's batch axis
            r = ops.reshape(r, (t._var.shape[0], -1) + tuple(s.shape))
            out.append(ops.reshape(ops.sum(r, axis=2), (t._var.shape[0], -1) + tuple(s.shape[1:])))
        return out

    @numpy_warnings_at_user
    def batch_jacobian(self, target: Any, source: Any,
                       unconnected_gradients: Any = UnconnectedGradients.NONE,
                       parallel_iterations: Optional[int] = None,
                       experimental_use_pfor: bool = True) -> Any:
        """Per-example jacobians: ``target[b, i...]`` w.r.t. ``source[b, j...]``.

        Assumes row ``b`` of the target depends only on row ``b`` of the source; the
        result has shape ``(B,) + target.shape[1:] + source.shape[1:]``.
        """
        unconnected = _unconnected(unconnected_gradients)
        (src,), _ = _sources(source, "batch_jacobian")
        if not isinstance(target, Tensor) or target.ndim < 1 or src.ndim < 1:
            raise ValueError(at_user_line(
                "GradientTape.batch_jacobian: target and source need a leading batch axis "
                f"(target shape {getattr(target, 'shape', type(target).__name__)}, source "
                f"shape {src.shape})"))
        if target.shape[0] != src.shape[0]:
            raise ValueError(at_user_line(
                f"GradientTape.batch_jacobian: batch sizes differ: target {target.shape}, "
                f"source {src.shape}"))
        self._begin_use("batch_jacobian")
        try:
            (col,) = self._rows(target, [src], target.shape, batch=True)
        finally:
            self._end_use()
        shape = tuple(target.shape) + tuple(src.shape[1:])
        if col is None:
            return _finish(None, Aval(shape, src.dtype), unconnected)
        return ops.reshape(col, shape)


def _unconnected(value):
    if value is UnconnectedGradients.NONE or value is UnconnectedGradients.ZERO:
        return value
    try:
        return UnconnectedGradients(value.value if isinstance(value, UnconnectedGradients) else value)
    except ValueError:
        raise ValueError(at_user_line(f"unconnected_gradients must be UnconnectedGradients.NONE or .ZERO, "
                         f"got {value!r}")) from None


def _sources(sources, what):
    leaves, treedef = _flatten(sources)
    if treedef is _ONE or treedef is _FLAT_LISTS.get(len(leaves)) or \
            treedef is _FLAT_TUPLES.get(len(leaves)):
        return leaves, treedef               # the fast path checked every leaf already
    for k, s in enumerate(leaves):
        if not isinstance(s, Tensor):
            raise TypeError(at_user_line(
                f"GradientTape.{what}: sources must be jittape Tensors or Variables, got "
                f"{type(s).__name__} (source {k} of the flattened sources)"))
    return leaves, treedef


def _flatten(x):
    """tree.flatten with a fast path for a tensor and a flat list of tensors."""
    if isinstance(x, Tensor):
        return [x], _ONE
    cls = x.__class__
    if (cls is list or cls is tuple) and len(x) in _FLAT_LISTS and \
            all(isinstance(t, Tensor) for t in x):
        return (x, _FLAT_LISTS[len(x)]) if cls is list else (list(x), _FLAT_TUPLES[len(x)])
    return tree.flatten(x)


# Objects of their own, not tree.flatten's: ``is`` against them tells the fast path's
# results (every leaf a Tensor) from tree.flatten's, whose leaves are unchecked.
_ONE = tree.TreeDef("leaf", None, ())
_FLAT_LISTS = {n: tree.TreeDef("list", None, (_ONE,) * n) for n in range(1, 9)}
_FLAT_TUPLES = {n: tree.TreeDef("tuple", None, (_ONE,) * n) for n in range(1, 9)}


def _finish(grad, source, unconnected):
    """A gradient at the API boundary: the source's dtype, zeros for ZERO."""
    if grad is None:
        if unconnected is UnconnectedGradients.ZERO:
            return ops.zeros(source.shape, source.dtype)
        return None
    value, like = grad._value, source._value
    if (value is None or like is None or value.dtype is not like.dtype) and \
            grad.dtype != source.dtype:
        grad = ops.cast(grad, source.dtype)
    return grad


def _sum_groups(values, groups):
    """One value per group of consecutive ``values`` (their sum; None for none)."""
    out, pos = [], 0
    for n in groups:
        found = [v for v in values[pos:pos + n] if v is not None]
        pos += n
        total = None
        for v in found:
            total = v if total is None else ops.add(total, v)
        out.append(total)
    return out
