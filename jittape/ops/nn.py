"""Neural-network ops, composed from primitives and numerically stable for any logits.

``log_softmax`` subtracts a (gradient-stopped) maximum, so logits of +-1000 give
finite values and gradients; the cross-entropies are written with it.
"""

import numpy as np

from . import elementwise as _ew
from . import reduce as _r
from . import shape as _sh
from .core import Fixed, composite, ex

LOGIT_EXAMPLES = [ex((2, 3)), ex((4,)), ex((2, 3), axis=0), ex((2, 2, 3), axis=-1)]


@composite(examples=LOGIT_EXAMPLES, domain=(-3.0, 3.0))
def log_softmax(logits, axis=-1):
    """log(softmax(logits)) along ``axis``, computed without overflow."""
    return _ew.subtract(logits, _r.logsumexp(logits, axis=axis, keepdims=True))


@composite(examples=LOGIT_EXAMPLES, domain=(-3.0, 3.0))
def softmax(logits, axis=-1):
    """exp(logits) normalised along ``axis``."""
    m = _ew.stop_gradient(_r.max(logits, axis=axis, keepdims=True))
    e = _ew.exp(_ew.subtract(logits, _ew.where(_ew.isfinite(m), m, 0)))
    return _ew.divide(e, _r.sum(e, axis=axis, keepdims=True))


def _one_hot(labels, depth, dtype):
    from .creation import arange
    labels = _sh.expand_dims(labels, -1)
    return _ew.cast(_ew.equal(labels, arange(depth)), dtype)


@composite(examples=[ex(Fixed(np.array([0, 2])), (2, 3)), ex(Fixed(np.array(1)), (4,)),
                     ex(Fixed(np.array([[1, 0, 2]])), (1, 3, 3))], domain=(-3.0, 3.0))
def sparse_softmax_cross_entropy(labels, logits):
    """Per-example cross-entropy of integer ``labels`` against ``logits`` (last axis: classes).

    Same as ``tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)``.
    """
    logp = log_softmax(logits, axis=-1)
    onehot = _one_hot(labels, logits.shape[-1], logp.dtype)
    return _ew.negative(_r.sum(_ew.multiply(onehot, logp), axis=-1))


@composite(examples=[ex((2, 3), (2, 3)), ex((3,), (3,))], domain=(-3.0, 3.0))
def softmax_cross_entropy(labels, logits, axis=-1):
    """Per-example cross-entropy of a label distribution against ``logits`` along ``axis``."""
    return _ew.negative(_r.sum(_ew.multiply(labels, log_softmax(logits, axis=axis)), axis=axis))
