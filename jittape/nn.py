"""Layers: ``Dense`` and the activations it accepts by name."""


import numpy as np

from . import ops
from .tensor import Variable, float32
from .errors import at_user_line

ACTIVATIONS = {
    None: lambda x: x, "linear": lambda x: x, "relu": ops.relu, "sigmoid": ops.sigmoid,
    "tanh": ops.tanh, "softplus": ops.softplus, "softmax": ops.softmax, "exp": ops.exp,
}

_layer_counts = {}


def _unique_name(base):
    n = _layer_counts.get(base, 0) + 1
    _layer_counts[base] = n
    return f"{base}_{n}"


class Dense:
    """``activation(inputs @ kernel + bias)``, built on the first call.

    The kernel is initialised glorot-uniform and the bias with zeros, as in Keras.
    Variables are named ``'<layer name>/kernel:0'`` and ``'<layer name>/bias:0'``.
    """

    def __init__(self, units, activation=None, use_bias=True, name=None, dtype=float32):
        if isinstance(activation, str) or activation is None:
            if activation not in ACTIVATIONS:
                raise ValueError(at_user_line(f"Dense: unknown activation {activation!r}; use one of "
                                 f"{sorted(k for k in ACTIVATIONS if k)} or a callable"))
            activation = ACTIVATIONS[activation]
        elif not callable(activation):
            raise TypeError(at_user_line(f"Dense: activation must be a name or a callable, got {activation!r}"))
        self.units = int(units)
        self.activation = activation
        self.use_bias = use_bias
        self.name = name or _unique_name("dense")
        self.dtype = np.dtype(dtype)
        self.kernel = None
        self.bias = None

    def build(self, input_dim):
        kernel = ops.random.glorot_uniform((int(input_dim), self.units), dtype=self.dtype)
        self.kernel = Variable(kernel, name=f"{self.name}/kernel")
        if self.use_bias:
            self.bias = Variable(np.zeros(self.units, self.dtype), name=f"{self.name}/bias")

    @property
    def trainable_variables(self):
        return [v for v in (self.kernel, self.bias) if v is not None]

    @property
    def variables(self):
        return self.trainable_variables

    def __call__(self, inputs):
        if self.kernel is None:
            self.build(inputs.shape[-1])
        y = ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            y = ops.add(y, self.bias)
        return self.activation(y)


