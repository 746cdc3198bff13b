"""scipy.special's functions: ``erf``, ``erfc``, ``gammaln``, ``digamma``, ``polygamma``
as elementwise primitives, and ``xlogy``, ``xlog1py``, ``logit`` as composites.

SciPy's ufuncs called on tensors reach them (``scipy.special.erf(t)``), as NumPy's do;
``jt.scipy.special`` names them with ``expit``, ``logsumexp``, ``softmax`` and
``log_softmax`` (the ops of other families under SciPy's names).

The lowerings call Python's ``math`` (``erf``, ``erfc``, ``lgamma``: the CPU's and
CUDA's alike) and, for ``digamma``/``polygamma``, ``codegen/special.py`` (CPU only: on
CUDA they raise ``UnsupportedError``, and so does the gradient of ``gammaln``).
"""

import math

import numpy as np
from scipy import special

from ..errors import at_user_line
from ..tensor import UFUNC_TABLE
from . import elementwise as ew
from .core import composite, ex, public
from .elementwise import INPUTS, UNARY_EXAMPLES, elementwise

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _gauss(x):
    return ew.exp(ew.negative(ew.multiply(x, x)))


erf = elementwise("erf", special.erf, "np.{dtype}(math.erf({0}))", [
    lambda g, out, x: ew.multiply(g, ew.multiply(_gauss(x), _TWO_OVER_SQRT_PI)),
], save=INPUTS, costly=True)
erfc = elementwise("erfc", special.erfc, "np.{dtype}(math.erfc({0}))", [
    lambda g, out, x: ew.multiply(g, ew.multiply(_gauss(x), -_TWO_OVER_SQRT_PI)),
], save=INPUTS, costly=True)


def _polygamma_scalar(node):
    return f"polygamma_{{f}}({node.params['n']}, np.{{dtype}}({{0}}))"


def _polygamma_partial(g, out, x, n):
    return ew.multiply(g, polygamma_prim.bind(x, n=n + 1))


polygamma_prim = elementwise("polygamma", special.digamma, _polygamma_scalar,
                             [_polygamma_partial], save=INPUTS, domain=(0.5, 3.0),
                             impl=lambda x, n: special.polygamma(n, x).astype(
                                 np.result_type(x, np.float16)),
                             costly=True)
polygamma_prim.examples = [ex((3,), n=1), ex((2, 3), n=2), ex((), n=1)]
polygamma_prim.backends = ("cpu",)

digamma = elementwise("digamma", special.digamma, "digamma_{f}(np.{dtype}({0}))", [
    lambda g, out, x: ew.multiply(g, polygamma_prim.bind(x, n=1)),
], save=INPUTS, domain=(0.5, 3.0), costly=True)
digamma.backends = ("cpu",)
UFUNC_TABLE[special.psi] = digamma            # (SciPy's other name for it)

gammaln = elementwise("gammaln", special.gammaln, "np.{dtype}(math.lgamma({0}))", [
    lambda g, out, x: ew.multiply(g, digamma(x)),
], save=INPUTS, domain=(0.5, 3.0), costly=True)
gammaln.cuda_note = "value only (its gradient, digamma, on the CPU)"


@public
def polygamma(n, x):
    """``scipy.special.polygamma(n, x)``: the n-th derivative of digamma (``n`` an int,
    0 for digamma itself)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(at_user_line(
            f"polygamma: the order n must be a non-negative int, got {n!r}"))
    n = int(n)
    return digamma(x) if n == 0 else polygamma_prim.bind(x, n=n)


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.0, 2.0), (0.5, 2.0)))
def xlogy(x, y):
    """``x * log(y)``, 0 where ``x`` is 0 whatever ``y`` (as SciPy); its derivatives are
    JAX's: ``log(y)`` in ``x`` at ``x = 0`` (the true one, where ``y > 0``), and 0 there
    for ``y <= 0``, where the log is replaced by 0 (no NaN reaches either gradient)."""
    safe = ew.where(ew.logical_and(ew.equal(x, 0), ew.less_equal(y, 0)), 1, y)
    return ew.multiply(x, ew.log(safe))


@composite(examples=[ex((3,), (3,)), ex((2, 3), (3,))], domain=((0.0, 2.0), (-0.5, 2.0)))
def xlog1py(x, y):
    """``x * log1p(y)``, 0 where ``x`` is 0 whatever ``y`` (derivatives as ``xlogy``'s)."""
    safe = ew.where(ew.logical_and(ew.equal(x, 0), ew.less_equal(y, -1)), 0, y)
    return ew.multiply(x, ew.log1p(safe))


@composite(examples=UNARY_EXAMPLES[:3], domain=(0.1, 0.9))
def logit(p):
    """``log(p / (1 - p))``, the inverse of ``expit`` (sigmoid)."""
    return ew.subtract(ew.log(p), ew.log1p(ew.negative(p)))


for _ufunc, _op in ((special.xlogy, xlogy), (special.xlog1py, xlog1py), (special.logit, logit),
                    (special.expit, ew.sigmoid)):
    UFUNC_TABLE[_ufunc] = _op
del _ufunc, _op

