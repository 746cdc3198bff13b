"""What the optimizers share: their state, the leaf-by-leaf update and ``apply_gradients``.

An update is written with jittape ops and no Python branch on an array value, so one
``update`` runs eagerly (on NumPy arrays and tensors) and traced (in ``jt.function``, in
a ``jt.fori_loop`` body), where it compiles into the caller's kernel. Python branches
here are on hyperparameters and structures only, which are fixed for a trace.
"""

import dataclasses
from typing import Any, Callable, Dict, Tuple, Union

import numpy as np

from .. import numpy as jnp
from .. import tree
from ..errors import at_user_line
from ..ops import cast
from ..tensor import Tensor, Variable, constant, float64
from ..trace import Tracer

LearningRate = Union[float, Callable[[Any], Any]]


@dataclasses.dataclass
class State:
    """An optimizer's state: a pytree of arrays, so loops carry it and ``save_state``
    writes it.

    Attributes:
      step: int64 scalar, the number of updates made so far (a schedule's argument).
        Scalars of a state are NumPy scalars, as a compiled function returns them, so
        that a state handed back to it matches the signature it was traced with.
      slots: dict of slot name -> arrays: for the first-order optimizers each slot is
        a pytree of the params' structure (Adam's ``m`` and ``v``); LBFGS's are flat
        arrays (see ``LBFGS``).
    """

    step: Any
    slots: Dict[str, Any]


def is_traced(x):
    return isinstance(x, Tracer)


def as_tensor(x):
    """A tensor of ``x``; Python numbers keep NumPy's float64/int64 (a parameter given as
    ``1.0`` is not narrowed to float32 as ``jt.constant(1.0)`` would be)."""
    return x if isinstance(x, Tensor) else constant(np.asarray(x))


def like_input(out, ref):
    """Eager results for NumPy inputs come back as NumPy arrays (a NumPy scalar for a
    NumPy scalar); tensors and traced values stay as they are (a tape may be recording
    through them)."""
    if isinstance(ref, Tensor) or not isinstance(out, Tensor) or isinstance(out, Tracer):
        return out
    value = out.numpy()
    return value[()] if isinstance(ref, np.generic) else value


def shape_of(x):
    """The sizes of ``x`` as ints (a traced value's sizes are ``Dim``s, which are ints
    that keep the expression reading them at run time)."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


def full(like_value, shape, value, dtype):
    """An array of ``value``: a NumPy array eagerly, a traced one where ``like_value``
    is traced (an ``init`` called inside a compiled function)."""
    if is_traced(like_value):
        return jnp.full(shape, value, dtype)
    if value == 0:                         # (np.full is Python over np.empty: a few
        out = np.zeros(shape, dtype)       # times np.zeros' cost, at each jt.minimize)
    else:
        out = np.empty(shape, dtype)
        out.fill(value)
    return out[()] if out.ndim == 0 else out


def next_step(step):
    if isinstance(step, Tensor):
        return step + 1
    return np.int64(step + 1)


def rate_at(learning_rate, step):
    """The learning rate of the update made at ``step``: the number, or the schedule's
    value (a float64 scalar)."""
    if callable(learning_rate):
        return learning_rate(step)
    return learning_rate


def in_dtype(value, dtype):
    """A scalar hyperparameter for arithmetic with arrays of ``dtype``: a Python float
    as it is (weak: it never widens a float32 array), a tensor cast to ``dtype``."""
    if isinstance(value, Tensor):
        return value if value.dtype == dtype else cast(value, dtype)
    return float(value)


def check_rate(name, learning_rate):
    """A schedule, a traced scalar (an optimizer made inside a compiled function from
    one of its arguments) or a float >= 0."""
    if callable(learning_rate):
        return learning_rate
    if is_traced(learning_rate):
        if learning_rate.ndim != 0 or learning_rate.dtype.kind != "f":
            raise TypeError(at_user_line(
                f"{name}: learning_rate must be a float scalar, got "
                f"{learning_rate.dtype.name} of {learning_rate.ndim} dimensions"))
        return learning_rate
    if isinstance(learning_rate, Tensor):
        learning_rate = learning_rate.numpy()
    try:
        value = float(learning_rate)
    except (TypeError, ValueError):
        raise TypeError(at_user_line(
            f"{name}: learning_rate must be a number or a schedule (a callable step -> "
            f"rate), got {type(learning_rate).__name__}")) from None
    if not value >= 0:
        raise ValueError(at_user_line(f"{name}: learning_rate must be >= 0, got {value}"))
    return value


def check_range(name, what, value, low, high, high_open=True):
    """``low <= value < high`` (``<= high`` with ``high_open=False``), or ValueError."""
    value = float(value)
    ok = low <= value and (value < high if high_open else value <= high)
    if not ok:
        bound = f"[{low}, {high})" if high_open else f"[{low}, {high}]"
        raise ValueError(at_user_line(f"{name}: {what} must be in {bound}, got {value}"))
    return value


def _mismatch_detail(error):
    """The part of ``jt.tree.map``'s message that says where two trees differ."""
    text = str(error).split(" (at ")[0]
    marker = "structure at "
    return "at " + text.split(marker, 1)[1] if marker in text else text


class _Box:
    """Holds one gradient as a leaf, so that a None gradient keeps its place."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def grads_like(name, params, grads, what="grads"):
    """The leaves of ``grads`` at the leaves of ``params`` (None where a gradient is None),
    or ValueError naming where the structures differ."""
    try:
        boxed = tree.map(lambda p, g: _Box(g), params, grads)
    except ValueError as e:
        raise ValueError(at_user_line(
            f"{name}: {what} do not have the structure of params ({_mismatch_detail(e)})")
        ) from None
    return [b.value for b in tree.flatten(boxed)[0]]


def check_floating(name, leaves):
    for k, leaf in enumerate(leaves):
        dtype = dtype_of(leaf)
        if dtype.kind != "f":
            raise TypeError(at_user_line(
                f"{name}: parameter leaf {k} is {dtype.name}; optimizers update "
                "floating-point arrays (cast it, or keep it out of params)"))


def check_shapes(name, leaves, others, what):
    for k, (a, b) in enumerate(zip(leaves, others)):
        if b is None:
            continue
        sa, sb = tuple(int(d) for d in shape_of(a)), tuple(int(d) for d in shape_of(b))
        if sa != sb:
            raise ValueError(at_user_line(
                f"{name}: {what} leaf {k} has shape {sb}, the parameter's is {sa}"))


class Optimizer:
    """The interface every optimizer has:

    ``state = opt.init(params)``, ``params, state = opt.update(params, grads, state)``
    (pure: nothing kept in ``opt``), and TensorFlow's
    ``opt.apply_gradients(zip(grads, variables))`` on ``jt.Variable``s (state kept in
    ``opt``, one slot variable per variable and slot).

    A first-order optimizer is a leaf rule ``_rule(p, g, slots, lr, t)`` (``t`` is the
    1-based number of this update, a float64 scalar) and the names of its slots.
    """

    slot_names: Tuple[str, ...] = ()

    def __init__(self, learning_rate: LearningRate):
        self.learning_rate = check_rate(type(self).__name__, learning_rate)
        self._iterations = None
        self._variables: Dict[int, Any] = {}   # id(variable) -> (variable, {slot: Variable})

    # -- the pure interface ---------------------------------------------------------
    def init(self, params: Any) -> State:
        """The state of a first update of ``params`` (any pytree of float arrays):
        step 0 and each slot's initial arrays, of the params' shapes and dtypes."""
        if params.__class__ is np.ndarray:      # (one array: no tree walk)
            check_floating(f"{type(self).__name__}.init", [params])
            slots = {name: self._initial(name, params) for name in self.slot_names}
            return State(step=np.int64(0), slots=slots)
        leaves, treedef = tree.flatten(params)
        check_floating(f"{type(self).__name__}.init", leaves)
        slots = {name: tree.unflatten(treedef, [self._initial(name, p) for p in leaves])
                 for name in self.slot_names}
        return State(step=np.int64(0), slots=slots)

    def _initial(self, name, p):
        return full(p, shape_of(p), 0.0, dtype_of(p))

    def update(self, params: Any, grads: Any, state: State, value_and_grad: Any = None):
        """One step: ``(new params, new state)``.

        Args:
          params: a pytree of float arrays (NumPy arrays, tensors or traced values).
          grads: the gradients, in the structure of ``params``; a None gradient leaves
            its parameter and slots as they are (as TensorFlow skips it).
          state: what ``init`` (or the last ``update``) returned.
          value_and_grad: ignored by first-order optimizers (LBFGS needs it), so that
            one loop drives any optimizer.

        Returns:
          The new params in the structure and dtypes of ``params`` (NumPy arrays for
          NumPy inputs eagerly), and the new state.
        """
        name = f"{type(self).__name__}.update"
        leaves, treedef = tree.flatten(params)
        check_floating(name, leaves)
        g_leaves = grads_like(name, params, grads)
        check_shapes(name, leaves, g_leaves, "grads")
        slots = self._state_slots(name, state, treedef, leaves)
        step = state.step
        lr = rate_at(self.learning_rate, step)
        t = cast(as_tensor(step), float64) + 1.0
        new_leaves: list = []
        new_slots: Dict[str, list] = {k: [] for k in self.slot_names}
        for j, (p, g) in enumerate(zip(leaves, g_leaves)):
            mine = {k: slots[k][j] for k in self.slot_names}
            if g is None:
                new_leaves.append(p)
                for k in self.slot_names:
                    new_slots[k].append(mine[k])
                continue
            pt = as_tensor(p)
            gt = as_tensor(g)
            if gt.dtype != pt.dtype:
                gt = cast(gt, pt.dtype)
            new_p, out = self._rule(pt, gt, {k: as_tensor(v) for k, v in mine.items()},
                                    in_dtype(lr, pt.dtype), t)
            new_leaves.append(like_input(new_p, p))
            for k in self.slot_names:
                new_slots[k].append(like_input(out[k], mine[k]))
        new_state = State(step=next_step(step),
                          slots={k: tree.unflatten(treedef, v) for k, v in new_slots.items()})
        return tree.unflatten(treedef, new_leaves), new_state

    def _rule(self, p, g, slots, lr, t):
        raise NotImplementedError

    def _state_slots(self, name, state, treedef, leaves):
        """The state's slot leaves, each a list aligned with the params' leaves."""
        if not isinstance(state, State):
            raise TypeError(at_user_line(
                f"{name}: state must be what {type(self).__name__}.init returned (a "
                f"jt.optim.State), got {type(state).__name__}"))
        if set(state.slots) != set(self.slot_names):
            raise ValueError(at_user_line(
                f"{name}: the state has slots {sorted(state.slots)}, "
                f"{type(self).__name__} keeps {sorted(self.slot_names)}: it was made by "
                "another optimizer's (or another configuration's) init"))
        out = {}
        for k in self.slot_names:
            slot_leaves, slot_def = tree.flatten(state.slots[k])
            if slot_def != treedef:
                raise ValueError(at_user_line(
                    f"{name}: the state's slot {k!r} has the structure {slot_def!r}, params "
                    f"have {treedef!r}: the state was made by init for other params"))
            check_shapes(name, leaves, slot_leaves, f"the state's slot {k!r}")
            out[k] = slot_leaves
        return out

    # -- TensorFlow's interface -----------------------------------------------------
    @property
    def iterations(self):
        """The number of ``apply_gradients`` calls made (an int64 ``jt.Variable``)."""
        if self._iterations is None:
            self._iterations = Variable(np.zeros((), np.int64), trainable=False,
                                        name="iterations")
        return self._iterations

    @property
    def variables(self):
        """``iterations`` and the slot variables ``apply_gradients`` made, in the order
        it made them (Keras's ``optimizer.variables``)."""
        return [self.iterations] + [var for _, slots in self._variables.values()
                                    for var in slots.values()]

    def apply_gradients(self, grads_and_vars):
        """Update ``jt.Variable``s in place, as TensorFlow's ``apply_gradients``.

        Args:
          grads_and_vars: pairs ``(gradient, variable)``, e.g.
            ``zip(tape.gradient(loss, variables), variables)``. A None gradient is
            skipped (its variable and slots are left as they are).

        The optimizer keeps each variable's slots as non-trainable ``jt.Variable``s and
        its step count in ``iterations`` (one per optimizer, as TensorFlow's), and
        writes with ``assign``: inside ``jt.function`` the new values are written back
        after each call, so a whole training step is one native call.

        Returns:
          ``iterations``.
        """
        name = f"{type(self).__name__}.apply_gradients"
        pairs = []
        for k, pair in enumerate(grads_and_vars):
            try:
                g, v = pair
            except (TypeError, ValueError):
                raise TypeError(at_user_line(
                    f"{name}: item {k} is not a (gradient, variable) pair: "
                    f"{type(pair).__name__}")) from None
            if not isinstance(v, Variable):
                raise TypeError(at_user_line(
                    f"{name}: item {k} pairs a gradient with a {type(v).__name__}, not a "
                    "jt.Variable (for arrays and pytrees, use update)"))
            pairs.append((g, v))
        kept = [(g, v) for g, v in pairs if g is not None]
        if not kept:
            raise ValueError(at_user_line(
                f"{name}: no gradients provided for any variable: "
                f"{[v.name for _, v in pairs]}"))
        variables = [v for _, v in kept]
        if len({id(v) for v in variables}) != len(variables):
            raise ValueError(at_user_line(f"{name}: a variable appears twice"))
        slots = {k: [] for k in self.slot_names}
        for v in variables:
            entry = self._variables.get(id(v))
            if entry is None:
                base = v.name.rsplit(":", 1)[0]
                entry = self._variables[id(v)] = (v, {k: Variable(
                    self._initial(k, v), trainable=False, name=f"{base}/{k}")
                    for k in self.slot_names})
            for k in self.slot_names:
                slots[k].append(entry[1][k])
        state = State(step=self.iterations, slots=slots)
        new_params, new_state = self.update(variables, [g for g, _ in kept], state)
        for v, value in zip(variables, new_params):
            v.assign(value)
        for k in self.slot_names:
            for var, value in zip(slots[k], new_state.slots[k]):
                var.assign(value)
        self.iterations.assign(new_state.step)
        return self.iterations

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self._config().items())
        return f"jt.optim.{type(self).__name__}({fields})"

    def _config(self):
        return {"learning_rate": self.learning_rate}
