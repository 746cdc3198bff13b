"""Neural-network ops, composed from primitives and numerically stable for any logits.

``log_softmax`` subtracts a (gradient-stopped) maximum, so logits of +-1000 give
finite values and gradients; the cross-entropies are written with it.
"""

import numpy as np

from . import elementwise as _ew
from . import reduce as _r
from . import shape as _sh
from ..errors import at_user_line
from ..recording import current_trace
from ..tensor import Tensor, Variable
from .core import Aval, Fixed, Primitive, composite, ex, shape_of

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


# -- labels in range ----------------------------------------------------------------
# A label outside [0, classes) would give a one-hot row of zeros: a loss and a zero
# gradient, silently. TensorFlow raises; so does jittape: at once for labels known now
# (eager, or constants of a trace), and in compiled code for labels passed in, with
# ``check_labels``: the labels as they are, after a loop testing each (on CUDA, one
# thread per label, recording a bad one in the error flag the driver reads).

def _label_message(op, label, depth):
    return f"{op}: label {label} is outside the valid range [0, {depth}) of the classes"


def _check_labels_impl(labels, depth, op):
    labels = np.asarray(labels)
    bad = (labels < 0) | (labels >= depth)
    if bad.any():
        raise IndexError(at_user_line(_label_message(op, labels[bad].flat[0], depth)))
    return labels


def _check_labels_abstract(labels, depth, op):
    if np.dtype(labels.dtype).kind not in "iu":
        raise TypeError(at_user_line(f"{op}: labels must be integers, got {labels.dtype}"))
    return Aval(shape_of(labels), labels.dtype)


check_labels = Primitive("check_labels", _check_labels_impl, abstract=_check_labels_abstract,
                         differentiable=False,
                         examples=[ex(Fixed(np.array([0, 2])), depth=3, op="labels"),
                                   ex(Fixed(np.array([[1], [0]])), depth=2, op="labels")], aliases=("cpu", "cuda"), public=False)


def _checked_labels(labels, depth, op):
    """``labels``, checked to lie in [0, depth): now if their values are known, else in
    the compiled code (a ``check_labels`` node)."""
    value = labels._value if isinstance(labels, Tensor) else labels
    if value is None or (isinstance(labels, Variable) and current_trace() is not None):
        return check_labels.bind(labels, depth=depth, op=op)    # checked at run time
    value = np.asarray(value)
    if value.dtype.kind in "iu":
        bad = (value < 0) | (value >= int(depth))
        if bad.any():
            raise IndexError(at_user_line(_label_message(op, value[bad].flat[0], int(depth))))
    return labels


def _label_template(node):
    """The message a kernel formats with the bad label and the class count: the op, and
    the user's line (its braces kept literal)."""
    where = f" (at {node.where})" if node.where else ""
    return (_label_message(node.params["op"], "{0}", "{1}")
            + where.replace("{", "{{").replace("}", "}}"))


def _cpu_check_labels(ctx, node):
    labels, out = node.inputs[0], node.out
    name, depth = ctx.name(labels), ctx.size(node.params["depth"])
    template = _label_template(node)
    t = ctx.tmp("label")
    lines, pad = [], ""
    for a, d in enumerate(labels.shape):
        lines.append(f"{pad}for i{a} in range({ctx.size(d)}):")
        pad += "    "
    index = ", ".join(f"i{a}" for a in range(labels.ndim))
    lines += [f"{pad}{t} = {name}[{index}]" if labels.ndim else f"{pad}{t} = {name}",
              f"{pad}if {t} < 0 or {t} >= {depth}:",
              f"{pad}    raise OutOfRange({ctx.message(template)}, {t}, {depth})"]
    return lines + [f"{ctx.name(out)} = {name}"]       # a view (its record: aliases)


def _cuda_check_labels(ctx, node):
    labels, out = node.inputs[0], node.out
    name, depth = ctx.name(labels), ctx.size(node.params["depth"])
    template = _label_template(node)
    ctx.alias(out, labels)
    done = [f"{ctx.name(out)} = {name}"]
    if labels.ndim == 0 and not ctx.scalar_on_device(labels):      # a host scalar
        return [f"if not 0 <= {name} < {depth}:",
                f"    raise OutOfRange({template!r}, {name}, {depth})"] + done
    d, t = ctx.tmp("depth"), ctx.tmp("label")
    index = ", ".join(f"i{a}" for a in range(labels.ndim)) or "0"
    body = [f"{t} = {name}[{index}]",
            f"if {t} < 0 or {t} >= {d}:"]
    body += ["    " + line for line in ctx.index_error(template, t, d)]
    shape = [f"{name}.shape[{a}]" for a in range(labels.ndim)]
    return ([f"{d} = {depth}"] + ctx.per_element(shape, body, node, [d] + ctx.error_names())
            + done)


check_labels.lowerings["cpu"] = _cpu_check_labels
check_labels.lowerings["cuda"] = _cuda_check_labels


@composite(examples=[ex(Fixed(np.array([0, 2])), (2, 3)), ex(Fixed(np.array(1)), (4,)),
                     ex(Fixed(np.array([[1, 0, 2]])), (1, 3, 3))], domain=(-3.0, 3.0))
def sparse_softmax_cross_entropy(labels, logits):
    """Per-example cross-entropy of integer ``labels`` against ``logits`` (last axis: classes).

    Same as ``tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)``.
    """
    logp = log_softmax(logits, axis=-1)
    depth = logits.shape[-1]
    labels = _checked_labels(labels, depth, "sparse_softmax_cross_entropy")
    onehot = _one_hot(labels, depth, logp.dtype)
    return _ew.negative(_r.sum(_ew.multiply(onehot, logp), axis=-1))


@composite(examples=[ex((2, 3), (2, 3)), ex((3,), (3,))], domain=(-3.0, 3.0))
def softmax_cross_entropy(labels, logits, axis=-1):
    """Per-example cross-entropy of a label distribution against ``logits`` along ``axis``."""
    return _ew.negative(_r.sum(_ew.multiply(labels, log_softmax(logits, axis=axis)), axis=axis))
