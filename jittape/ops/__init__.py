"""The primitives, one module per family, and the registry that lists them all.

``api.py`` (written from the registry by ``python -m jittape.ops.names``) names the
public ops; ``methods.py`` gives ``Tensor`` its operators.
"""

from typing import TYPE_CHECKING

from . import core, creation, elementwise, indexing, linalg, nn, reduce, shape  # noqa: F401
from .core import COMPOSITES, REGISTRY, Aval, Primitive  # noqa: F401
from .elementwise import unbroadcast  # noqa: F401
from . import random  # noqa: F401
from . import lapack  # noqa: F401  (np.linalg)
from . import special  # noqa: F401  (scipy.special)
from . import sorting  # noqa: F401  (np.sort, np.median, ...)
from . import fourier  # noqa: F401  (np.fft)
from . import methods  # noqa: F401  (Tensor's operators and methods)

if TYPE_CHECKING:                # (type checkers read the names api.py lists)
    from .api import *  # noqa: F401,F403
    from .api import __all__  # noqa: F401
else:
    try:
        from .api import *  # noqa: F401,F403
        from .api import __all__  # noqa: F401
    except ImportError as _err:      # api.py names an op that is gone: the registry's names
        from . import names as _names
        globals().update(_names.stale("api.py", _err, _names.jt_namespace()))
        __all__ = sorted(_names.jt_namespace())
