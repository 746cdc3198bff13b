"""``jt.optim``: optimizers on pytrees of arrays and on ``jt.Variable``s.

``state = opt.init(params)`` and ``params, state = opt.update(params, grads, state)``
are pure and written with jittape ops, so the same update runs eagerly and compiled
(inside ``jt.function`` and in a ``jt.fori_loop`` body, in the caller's kernel);
``opt.apply_gradients(zip(grads, variables))`` is TensorFlow's form. ``schedules``
holds the learning-rate schedules; ``save_state``/``load_state`` write and read
states. The reference is ``docs/optim.md`` in the source repository.
"""

from . import schedules  # noqa: F401
from .base import Optimizer, State  # noqa: F401
from .first_order import SGD, Adagrad, Adam, AdamW, RMSprop  # noqa: F401
from .io import load_state, save_state  # noqa: F401
from .lbfgs import LBFGS, wolfe_line_search  # noqa: F401

__all__ = ["Optimizer", "State", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS",
           "wolfe_line_search", "schedules", "save_state", "load_state"]
