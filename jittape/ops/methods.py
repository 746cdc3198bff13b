"""The operators and NumPy-style methods of ``Tensor`` and ``Variable``: the ops.

``tensor.py`` defines the classes below the ops (every op takes and returns tensors);
the methods that apply ops are defined here, above both, and set on the classes when
the op package loads, so no module imports one that imports it.
"""

from ..recording import TRACES, current_trace
from ..tensor import Tensor, Variable, to_array
from .elementwise import (abs, add, cast, clip, conjugate, divide, equal, floor_divide, greater,
                          greater_equal, identity, imag, less, less_equal, logical_and,
                          logical_not, logical_or, mod, multiply, negative, not_equal, power, real,
                          subtract)
from .elementwise import round as _round
from .linalg import dot, matmul
from .reduce import (argmax, argmin, cumprod, cumsum, max, mean, min, prod, reduce_all, reduce_any,
                     std, sum, var)
from .indexing import diagonal, getitem, repeat, trace
from .shape import ravel, reshape, squeeze, swapaxes, transpose
from .sorting import argsort


# The arithmetic operators call their primitives' bound ``bind``: calling a Primitive
# goes through its class's ``__call__`` (about 50 ns more a call, on an op that costs
# about 400 ns on a small tensor).
_add, _sub, _mul, _div, _pow, _neg, _matmul = (
    add.bind, subtract.bind, multiply.bind, divide.bind, power.bind, negative.bind, matmul.bind)


class TensorMethods:
    """Set on ``Tensor`` (and so on ``Variable``) by ``install``."""

    def __add__(self, other):
        return _add(self, other)

    def __radd__(self, other):
        return _add(other, self)

    def __sub__(self, other):
        return _sub(self, other)

    def __rsub__(self, other):
        return _sub(other, self)

    def __mul__(self, other):
        return _mul(self, other)

    def __rmul__(self, other):
        return _mul(other, self)

    def __truediv__(self, other):
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

    def __floordiv__(self, other):
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        return floor_divide(other, self)

    def __mod__(self, other):
        return mod(self, other)

    def __rmod__(self, other):
        return mod(other, self)

    def __pow__(self, other):
        return _pow(self, other)

    def __rpow__(self, other):
        return _pow(other, self)

    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)

    def __neg__(self):
        return _neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return abs(self)

    def __eq__(self, other):
        return equal(self, other)

    def __ne__(self, other):
        return not_equal(self, other)

    def __lt__(self, other):
        return less(self, other)

    def __le__(self, other):
        return less_equal(self, other)

    def __gt__(self, other):
        return greater(self, other)

    def __ge__(self, other):
        return greater_equal(self, other)

    def __and__(self, other):
        return logical_and(self, other)

    def __or__(self, other):
        return logical_or(self, other)

    def __invert__(self):
        return logical_not(self)

    def __getitem__(self, index):
        return getitem(self, index)

    def reshape(self, *shape):
        return reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return transpose(self, (axes[0] if len(axes) == 1 else axes) or None)

    def sum(self, axis=None, keepdims=False):
        return sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return min(self, axis=axis, keepdims=keepdims)

    def prod(self, axis=None, keepdims=False):
        return prod(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return reduce_all(self, axis, out, keepdims)

    def any(self, axis=None, out=None, keepdims=False):
        return reduce_any(self, axis, out, keepdims)

    def dot(self, other):
        return dot(self, other)

    def clip(self, min=None, max=None):
        return clip(self, min, max)

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def ravel(self, order="C"):
        return ravel(self, order)

    def flatten(self, order="C"):
        return ravel(self, order)           # (a new tensor: tensors are never written to)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return var(self, axis, dtype, out, ddof, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return std(self, axis, dtype, out, ddof, keepdims)

    def cumsum(self, axis=None, dtype=None, out=None):
        return cumsum(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return cumprod(self, axis, dtype, out)

    def swapaxes(self, axis1, axis2):
        return swapaxes(self, axis1, axis2)

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        return trace(self, offset, axis1, axis2, dtype, out)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return diagonal(self, offset, axis1, axis2)

    def repeat(self, repeats, axis=None):
        return repeat(self, repeats, axis)

    def astype(self, dtype):
        return cast(self, dtype)

    def round(self, decimals=0, out=None):
        return _round(self, decimals, out)

    def argmax(self, axis=None, out=None, keepdims=False):
        return argmax(self, axis, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return argmin(self, axis, out, keepdims)

    # (no ``sort``: NumPy's sorts in place, and tensors are never written to; np.sort(t))
    def argsort(self, axis=-1, kind=None, order=None, *, stable=None):
        return argsort(self, axis, kind, order, stable=stable)

    @property
    def real(self):
        return real(self)

    @property
    def imag(self):
        return imag(self)

    def conj(self):
        return conjugate(self)

    conjugate = conj


    @property
    def T(self):
        return transpose(self)


class VariableMethods:
    """Set on ``Variable`` by ``install``."""

    def read_value(self):
        """The current value as a Tensor (a snapshot: later assignments do not change it)."""
        return identity(self)

    value = read_value

    def assign_add(self, delta):
        if TRACES and current_trace() is not None:
            return self._new_value(add(self, _same_dtype(delta, self.dtype)), "assign_add")
        return self._new_value(self._value + to_array(delta, self.dtype), "assign_add")

    def assign_sub(self, delta):
        if TRACES and current_trace() is not None:
            return self._new_value(subtract(self, _same_dtype(delta, self.dtype)),
                                   "assign_sub")
        return self._new_value(self._value - to_array(delta, self.dtype), "assign_sub")


def _same_dtype(x, dtype):
    """``x`` as a value of ``dtype`` (as ``to_array(x, dtype)``), for traced code."""
    if isinstance(x, Tensor) and x.dtype == dtype:
        return x
    return cast(x, dtype)


def install():
    for source, cls in ((TensorMethods, Tensor), (VariableMethods, Variable)):
        for name, value in vars(source).items():
            if name not in ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__"):
                setattr(cls, name, value)


install()
