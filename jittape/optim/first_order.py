"""First-order optimizers: SGD (with momentum), Adam, AdamW, RMSprop, Adagrad.

Each is a leaf rule on one parameter ``p``, its gradient ``g`` and its slots, written
with jittape ops. In the formulas ``lr`` is the learning rate of this update (a
schedule's value at ``step``, the number of updates made before it) and ``t = step + 1``.
"""

import math

from .. import numpy as jnp
from ..ops import cast
from ..errors import at_user_line
from .base import Optimizer, check_range, dtype_of, full, shape_of


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and Nesterov momentum as in PyTorch.

    ::

        g  = g + weight_decay * p            (L2 added to the gradient)
        v  = momentum * v + g                (slot "velocity", 0 at first)
        p  = p - lr * (g + momentum * v)     (nesterov)
        p  = p - lr * v                      (momentum, not nesterov)
        p  = p - lr * g                      (momentum 0: no slot)

    TensorFlow's momentum form (``v = momentum * v - lr * g; p = p + v``) is the same
    while ``lr`` is constant; under a schedule this one scales the whole velocity by
    this step's rate, as PyTorch does.
    """

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(learning_rate)
        self.momentum = check_range("SGD", "momentum", momentum, 0.0, 1.0, high_open=False)
        self.nesterov = bool(nesterov)
        self.weight_decay = check_range("SGD", "weight_decay", weight_decay, 0.0, float("inf"))
        if self.nesterov and self.momentum == 0:
            raise ValueError(at_user_line("SGD: nesterov=True needs momentum > 0"))
        self.slot_names = ("velocity",) if self.momentum else ()

    def _rule(self, p, g, slots, lr, t):
        if self.weight_decay:
            g = g + self.weight_decay * p
        if not self.momentum:
            return p - lr * g, {}
        v = self.momentum * slots["velocity"] + g
        direction = g + self.momentum * v if self.nesterov else v
        return p - lr * direction, {"velocity": v}

    def _config(self):
        return {"learning_rate": self.learning_rate, "momentum": self.momentum,
                "nesterov": self.nesterov, "weight_decay": self.weight_decay}


def _bias_corrections(b1, b2, t, dtype):
    """``1 - b1**t`` and ``1 - b2**t`` in float64, then in the parameter's dtype.

    Computed as ``-expm1(t * log(b))``: within 1.3 ulp of the exact value for ``b`` in
    0.001 to 0.9999 and ``t`` up to 10^5, where ``1 - b**t`` loses the low bits of
    ``b**t`` near 1 (1854 ulp off at worst; ``tests/test_optim.py``); and in a compiled
    step an inlined function, where ``b**t`` is two calls of the C library's ``pow``:
    a quarter of Adam's step on a 10-dimensional Rosenbrock (52 -> 45 us per 1000
    steps)."""
    return cast(_one_less_power(b1, t), dtype), cast(_one_less_power(b2, t), dtype)


def _one_less_power(b, t):
    if b == 0.0:                       # (log(0): 1 - 0**t is 1 from the first step)
        return 1.0 - b ** t
    return -jnp.expm1(t * math.log(b))


class Adam(Optimizer):
    """Adam (Kingma & Ba), in PyTorch's and optax's form: ``eps`` outside the square root,
    added to the bias-corrected ``sqrt(v_hat)``.

    ::

        m = b1 * m + (1 - b1) * g            (slot "m", 0 at first)
        v = b2 * v + (1 - b2) * g**2         (slot "v", 0 at first)
        m_hat = m / (1 - b1**t),  v_hat = v / (1 - b2**t)
        p = p - lr * m_hat / (sqrt(v_hat) + eps)

    (TensorFlow folds the corrections into the rate and adds ``eps`` to ``sqrt(v)``:
    the same while ``eps`` is negligible.)
    """

    slot_names = ("m", "v")

    def __init__(self, learning_rate=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        super().__init__(learning_rate)
        name = type(self).__name__
        self.b1 = check_range(name, "b1", b1, 0.0, 1.0)
        self.b2 = check_range(name, "b2", b2, 0.0, 1.0)
        self.eps = check_range(name, "eps", eps, 0.0, float("inf"))

    def _moments(self, p, g, slots, t):
        m = self.b1 * slots["m"] + (1.0 - self.b1) * g
        v = self.b2 * slots["v"] + (1.0 - self.b2) * (g * g)
        c1, c2 = _bias_corrections(self.b1, self.b2, t, p.dtype)
        # m_hat / (sqrt(v_hat) + eps) arranged as PyTorch's Adam arranges it: the
        # corrections are scalars, so 1 / c1 and 1 / sqrt(c2) are computed once and each
        # element pays one division, not three (divisions bound the update's loop: 5 of
        # the 13.5 us of a step at n = 10^4). Equal to the textbook form within rounding.
        return m, v, (m * (1.0 / c1)) / (jnp.sqrt(v) * (1.0 / jnp.sqrt(c2)) + self.eps)

    def _rule(self, p, g, slots, lr, t):
        m, v, direction = self._moments(p, g, slots, t)
        return p - lr * direction, {"m": m, "v": v}

    def _config(self):
        return {"learning_rate": self.learning_rate, "b1": self.b1, "b2": self.b2,
                "eps": self.eps}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as PyTorch's and optax's
    ``adamw``: the decay is not part of the gradient, so the moments never see it.

    ::

        m, v, m_hat, v_hat as in Adam
        p = p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)

    (PyTorch writes it ``p *= 1 - lr * weight_decay`` before the Adam step: the same.)
    """

    def __init__(self, learning_rate=1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-2):
        super().__init__(learning_rate, b1, b2, eps)
        self.weight_decay = check_range("AdamW", "weight_decay", weight_decay, 0.0,
                                        float("inf"))

    def _rule(self, p, g, slots, lr, t):
        m, v, direction = self._moments(p, g, slots, t)
        return p - lr * (direction + self.weight_decay * p), {"m": m, "v": v}

    def _config(self):
        return dict(super()._config(), weight_decay=self.weight_decay)


class RMSprop(Optimizer):
    """RMSprop (Hinton), in PyTorch's form (``eps`` outside the square root) with
    TensorFlow's default ``decay=0.9``.

    ::

        v  = decay * v + (1 - decay) * g**2             (slot "v", 0 at first)
        ga = decay * ga + (1 - decay) * g               (centered: slot "mean_grad")
        d  = g / (sqrt(v - ga**2) + eps)                (centered)
        d  = g / (sqrt(v) + eps)                        (not centered)
        b  = momentum * b + d;  p = p - lr * b          (momentum > 0: slot "momentum")
        p  = p - lr * d                                 (momentum 0)
    """

    def __init__(self, learning_rate=1e-2, decay=0.9, eps=1e-8, momentum=0.0, centered=False):
        super().__init__(learning_rate)
        self.decay = check_range("RMSprop", "decay", decay, 0.0, 1.0)
        self.eps = check_range("RMSprop", "eps", eps, 0.0, float("inf"))
        self.momentum = check_range("RMSprop", "momentum", momentum, 0.0, 1.0,
                                    high_open=False)
        self.centered = bool(centered)
        self.slot_names = (("v",) + (("mean_grad",) if self.centered else ())
                           + (("momentum",) if self.momentum else ()))

    def _rule(self, p, g, slots, lr, t):
        rho = self.decay
        v = rho * slots["v"] + (1.0 - rho) * (g * g)
        out = {"v": v}
        if self.centered:
            ga = rho * slots["mean_grad"] + (1.0 - rho) * g
            out["mean_grad"] = ga
            d = g / (jnp.sqrt(v - ga * ga) + self.eps)
        else:
            d = g / (jnp.sqrt(v) + self.eps)
        if self.momentum:
            d = self.momentum * slots["momentum"] + d
            out["momentum"] = d
        return p - lr * d, out

    def _config(self):
        return {"learning_rate": self.learning_rate, "decay": self.decay, "eps": self.eps,
                "momentum": self.momentum, "centered": self.centered}


class Adagrad(Optimizer):
    """Adagrad (Duchi, Hazan & Singer), as TensorFlow 2's ``Adagrad``: the accumulator
    starts at ``initial_accumulator`` and ``eps`` is added outside the square root.

    ::

        a = a + g**2                        (slot "accumulator", initial_accumulator at first)
        p = p - lr * g / (sqrt(a) + eps)
    """

    slot_names = ("accumulator",)

    def __init__(self, learning_rate=1e-2, initial_accumulator=0.1, eps=1e-7):
        super().__init__(learning_rate)
        self.initial_accumulator = check_range("Adagrad", "initial_accumulator",
                                               initial_accumulator, 0.0, float("inf"))
        self.eps = check_range("Adagrad", "eps", eps, 0.0, float("inf"))

    def _initial(self, name, p):
        return full(p, shape_of(p), self.initial_accumulator, dtype_of(p))

    def _rule(self, p, g, slots, lr, t):
        a = slots["accumulator"] + g * g
        return p - lr * g / (jnp.sqrt(a) + self.eps), {"accumulator": a}

    def _config(self):
        return {"learning_rate": self.learning_rate,
                "initial_accumulator": self.initial_accumulator, "eps": self.eps}
