"""Learning-rate schedules: callables ``step -> rate``.

``step`` is the number of updates made before this one (0 for the first), a Python
number, a NumPy scalar or a traced int64 scalar (the state's ``step`` in a compiled
loop); the rate is a float64 scalar tensor, computed with jittape ops so that a schedule
compiles into the update. An optimizer takes a schedule wherever it takes a
``learning_rate``.
"""

import math

from .. import numpy as jnp
from ..errors import at_user_line
from ..ops import cast
from ..tensor import Tensor, float64


def _step(step):
    if not isinstance(step, Tensor):
        step = jnp.asarray(step, float64)
    return step if step.dtype == float64 else cast(step, float64)


def _positive(name, what, value):
    value = float(value)
    if not value > 0:
        raise ValueError(at_user_line(f"{name}: {what} must be > 0, got {value}"))
    return value


class Schedule:
    """A named schedule: calling it gives the rate at a step; ``repr`` shows its
    arguments."""

    def __init__(self, name, rate, **args):
        self._name = name
        self._rate = rate
        self.args = args

    def __call__(self, step):
        return self._rate(_step(step))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"jt.optim.schedules.{self._name}({args})"


def constant(value):
    """``value`` at every step."""
    value = float(value)
    return Schedule("constant", lambda s: jnp.full((), value, float64), value=value)


def exponential_decay(init, decay_rate, decay_steps, staircase=False):
    """``init * decay_rate ** (step / decay_steps)`` (TensorFlow's ``ExponentialDecay``);
    with ``staircase`` the exponent is ``floor(step / decay_steps)``."""
    init, decay_rate = float(init), float(decay_rate)
    decay_steps = _positive("exponential_decay", "decay_steps", decay_steps)

    def rate(s):
        p = jnp.floor_divide(s, decay_steps) if staircase else s / decay_steps
        return init * decay_rate ** p
    return Schedule("exponential_decay", rate, init=init, decay_rate=decay_rate,
                    decay_steps=decay_steps, staircase=bool(staircase))


def cosine_decay(init, decay_steps, alpha=0.0):
    """TensorFlow's ``CosineDecay``: ``init * ((1 - alpha) * c + alpha)`` with
    ``c = (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2``: from ``init`` down
    to ``alpha * init`` at ``decay_steps``, constant after."""
    init, alpha = float(init), float(alpha)
    decay_steps = _positive("cosine_decay", "decay_steps", decay_steps)

    def rate(s):
        c = 0.5 * (1.0 + jnp.cos(math.pi * jnp.minimum(s, decay_steps) / decay_steps))
        return init * ((1.0 - alpha) * c + alpha)
    return Schedule("cosine_decay", rate, init=init, decay_steps=decay_steps, alpha=alpha)


def warmup_cosine(init, peak, warmup_steps, decay_steps, end=0.0):
    """optax's ``warmup_cosine_decay_schedule``: linear from ``init`` to ``peak`` over
    ``warmup_steps``, then a cosine from ``peak`` to ``end``, reached at ``decay_steps``
    (counted from step 0, warmup included), constant after::

        step < warmup_steps:  init + (peak - init) * step / warmup_steps
        otherwise:            end + (peak - end) * (1 + cos(pi * f)) / 2,
                              f = min((step - warmup_steps) / (decay_steps - warmup_steps), 1)
    """
    init, peak, end = float(init), float(peak), float(end)
    warmup_steps = float(warmup_steps)
    decay_steps = float(decay_steps)
    if not 0 <= warmup_steps < decay_steps:
        raise ValueError(at_user_line(
            f"warmup_cosine: needs 0 <= warmup_steps < decay_steps, got warmup_steps="
            f"{warmup_steps:g}, decay_steps={decay_steps:g}"))
    span = decay_steps - warmup_steps

    def rate(s):
        f = jnp.minimum(jnp.maximum(s - warmup_steps, 0.0) / span, 1.0)
        cosine = end + (peak - end) * 0.5 * (1.0 + jnp.cos(math.pi * f))
        if warmup_steps == 0:
            return cosine
        warm = init + (peak - init) * (s / warmup_steps)
        return jnp.where(s < warmup_steps, warm, cosine)
    return Schedule("warmup_cosine", rate, init=init, peak=peak, warmup_steps=warmup_steps,
                    decay_steps=decay_steps, end=end)


def piecewise_constant(boundaries, values):
    """TensorFlow's ``PiecewiseConstantDecay``: ``values[0]`` while
    ``step <= boundaries[0]``, ``values[k]`` while
    ``boundaries[k-1] < step <= boundaries[k]``, ``values[-1]`` after the last
    boundary. ``len(values) == len(boundaries) + 1``; boundaries increase."""
    boundaries = [float(b) for b in boundaries]
    values = [float(v) for v in values]
    if len(values) != len(boundaries) + 1:
        raise ValueError(at_user_line(
            f"piecewise_constant: {len(boundaries)} boundaries need {len(boundaries) + 1} "
            f"values, got {len(values)}"))
    if any(b >= c for b, c in zip(boundaries, boundaries[1:])):
        raise ValueError(at_user_line(
            f"piecewise_constant: boundaries must increase, got {boundaries}"))

    def rate(s):
        out = jnp.full((), values[-1], float64)
        for b, v in zip(reversed(boundaries), reversed(values[:-1])):
            out = jnp.where(s <= b, v, out)
        return out
    return Schedule("piecewise_constant", rate, boundaries=boundaries, values=values)
