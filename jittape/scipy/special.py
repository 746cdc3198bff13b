"""``jt.scipy.special``: scipy.special's functions on tensors, eager and compiled, with
their gradients (``jittape/ops/special.py``; SciPy's ufuncs called on tensors reach the
same ops: ``scipy.special.erf(t)``)."""

from ..ops.elementwise import sigmoid as expit  # noqa: F401
from ..ops.nn import log_softmax, softmax  # noqa: F401
from ..ops.reduce import logsumexp  # noqa: F401
from ..ops.special import (  # noqa: F401
    digamma, erf, erfc, gammaln, logit, polygamma, xlog1py, xlogy,
)

psi = digamma

__all__ = ["digamma", "erf", "erfc", "expit", "gammaln", "log_softmax", "logit", "logsumexp",
           "polygamma", "psi", "softmax", "xlog1py", "xlogy"]
