"""``jt.scipy.special``: scipy.special's functions on tensors, eager and compiled, with
their gradients (``jittape/ops/special.py``; SciPy's ufuncs called on tensors reach the
same ops: ``scipy.special.erf(t)``).

``expit``, ``logsumexp``, ``softmax`` and ``log_softmax`` are jittape's ops under
SciPy's names and signatures: ``softmax(x)`` normalizes over all the elements (SciPy's
``axis=None``; ``jt.softmax`` takes the last axis), and ``logsumexp`` takes SciPy's
arguments in SciPy's order, ``return_sign=True`` included.
"""

from ..ops import elementwise as _ew
from ..ops import nn as _nn
from ..ops import reduce as _r
from ..ops import shape as _sh
from ..ops.core import normalize_axes, shape_of
from ..ops.elementwise import sigmoid as expit
from ..ops.special import (
    beta, betainc, betaln, digamma, entr, erf, erfc, erfcinv, erfinv, gamma, gammainc,
    gammaincc, gammaln, gammasgn, i0, i0e, i1, i1e, iv, ive, j0, j1, jv, kl_div, log_expit,
    log_ndtr, logit, multigammaln, ndtr, ndtri, polygamma, rel_entr, rgamma, boxcox, stdtr,
    xlog1py, xlogy, y0, y1, yn,
)

psi = digamma
jn = jv                       # (SciPy's other name for it)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``scipy.special.logsumexp``: ``log(sum(b * exp(a)))`` over ``axis`` (all axes by
    default) without overflow. With ``return_sign=True``, ``(log|s|, sign(s))`` of the
    sum ``s``, which negative weights ``b`` may make negative (its log is NaN
    otherwise, as SciPy's)."""
    if not return_sign:
        return _r.logsumexp(a, axis=axis, keepdims=keepdims, b=b)
    axes = normalize_axes("logsumexp", axis, len(shape_of(a)))
    m = _ew.stop_gradient(_r.max(a, axis=axes, keepdims=True))
    m = _ew.where(_ew.isfinite(m), m, 0)
    terms = _ew.exp(_ew.subtract(a, m))
    s = _r.sum(terms if b is None else _ew.multiply(terms, b), axis=axes, keepdims=True)
    out = _ew.add(_ew.log(_ew.abs(s)), m)
    sign = _ew.sign(s)
    if not keepdims:
        out, sign = _sh.squeeze(out, axis=axes), _sh.squeeze(sign, axis=axes)
    return out, sign


def softmax(x, axis=None):
    """``scipy.special.softmax``: ``exp(x)`` normalized over ``axis`` (all the elements
    by default, as SciPy's)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """``scipy.special.log_softmax``: ``log(softmax(x, axis))`` without overflow (all
    the elements by default, as SciPy's)."""
    return _nn.log_softmax(x, axis=axis)


__all__ = ["beta", "betainc", "betaln", "boxcox", "digamma", "entr", "erf", "erfc", "erfcinv",
           "erfinv", "expit", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0",
           "i0e", "i1", "i1e", "iv", "ive", "j0", "j1", "jn", "jv", "kl_div", "log_expit",
           "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "rel_entr", "rgamma", "softmax", "stdtr", "xlog1py", "xlogy",
           "y0", "y1", "yn"]
